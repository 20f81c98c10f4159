use super::*;
use proptest::prelude::*;

#[test]
fn the_spec_reads_as_iperf2_reads_it() {
    let s = FrameSpec::parse("60:20m,5m").unwrap();
    assert_eq!((s.fps, s.mean_bps, s.stddev_bps), (60.0, 20e6, 5e6));
    assert_eq!(FrameSpec::parse("").unwrap(), FrameSpec::DEFAULT);
    let s = FrameSpec::parse("30").unwrap();
    assert_eq!((s.fps, s.mean_bps, s.stddev_bps), (30.0, 20e6, 0.0));
    // Upper case is bytes: 2 million bytes a second is 16 Mbit/s.
    assert_eq!(FrameSpec::parse("24:2M").unwrap().mean_bps, 16e6);
    assert_eq!(FrameSpec::parse("24:1500k,100K").unwrap().stddev_bps, 800e3);
    assert_eq!(FrameSpec::parse("60:20m").unwrap().period_ns(), 16_666_667);
    assert!((FrameSpec::DEFAULT.mean_frame_bytes() - 41_666.67).abs() < 0.01);
}

#[test]
fn what_is_not_a_frame_spec_is_refused_with_its_reason() {
    let err = |s: &str| FrameSpec::parse(s).unwrap_err();
    assert!(matches!(err("0:1m"), FrameSpecError::Fps(_)));
    assert!(matches!(err("20000:1m"), FrameSpecError::Fps(_)));
    assert!(matches!(err("-5:1m"), FrameSpecError::Fps(_)));
    assert!(matches!(err("NaN:1m"), FrameSpecError::Fps(_)));
    assert!(matches!(err("60:0"), FrameSpecError::Mean(_)));
    assert!(matches!(err("60:1m,-1"), FrameSpecError::Stddev(_)));
    assert!(matches!(err("60:1m,20m"), FrameSpecError::Stddev(_)));
    assert!(matches!(err("60:10p"), FrameSpecError::Packets(_)));
    assert!(matches!(err("sixty"), FrameSpecError::Number { .. }));
    assert!(matches!(err("60:fast"), FrameSpecError::Number { .. }));
    assert!(matches!(err("60:inf"), FrameSpecError::Number { .. }));
    assert!(matches!(err("60:1m,1m,1m"), FrameSpecError::Form(_)));
    assert!(matches!(err("1:1G"), FrameSpecError::FrameTooLarge(_)));
    // Each says what to give, in one line.
    for s in ["0:1m", "60:10p", "sixty", "1:1G", "60:1m,1m,1m"] {
        let text = err(s).to_string();
        assert!(
            text.starts_with("--isochronous") && !text.contains('\n'),
            "{text}"
        );
    }
}

#[test]
fn frame_sizes_have_the_spec_mean_and_spread_and_a_floor() {
    let flat = FrameSpec::parse("60:20m").unwrap();
    let mut sizes = FrameSizes::new(flat, 100, 7);
    assert!((0..100).all(|_| sizes.next_bytes() == 41_666));
    let spec = FrameSpec::parse("60:20m,5m").unwrap();
    let mut sizes = FrameSizes::new(spec, 100, 7);
    let n = 50_000;
    let v: Vec<f64> = (0..n).map(|_| sizes.next_bytes() as f64).collect();
    let mean = v.iter().sum::<f64>() / n as f64;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let (want_mean, want_sd) = (20e6 / 60.0 / 8.0, 5e6 / 60.0 / 8.0);
    assert!(
        (mean / want_mean - 1.0).abs() < 0.02,
        "{mean} against {want_mean}"
    );
    assert!((sd / want_sd - 1.0).abs() < 0.05, "{sd} against {want_sd}");
    // The same seed, the same sizes; a small mean is held to the floor.
    let again: Vec<u64> = {
        let mut s = FrameSizes::new(spec, 100, 7);
        (0..10).map(|_| s.next_bytes()).collect()
    };
    assert_eq!(again, v[..10].iter().map(|x| *x as u64).collect::<Vec<_>>());
    let tiny = FrameSpec::parse("1000:8k").unwrap();
    assert_eq!(FrameSizes::new(tiny, 108, 1).next_bytes(), 108);
}

#[test]
fn the_clock_keeps_to_its_slots_and_counts_the_frames_a_late_sender_skips() {
    let mut c = FrameClock::new(10);
    let t = c.next(1_000);
    assert_eq!((t.frame, t.prev, t.due_ns), (1, 0, 1_000));
    // Back before the next slot: the next frame, due then.
    let t = c.next(1_004);
    assert_eq!((t.frame, t.prev, t.due_ns), (2, 1, 1_010));
    let t = c.next(1_012);
    assert_eq!((t.frame, t.due_ns), (3, 1_020));
    assert_eq!(c.slips(), 0);
    // Back 25 past frame 3's slot: frames 4 and 5 (due 1_030 and 1_040) have passed.
    let t = c.next(1_045);
    assert_eq!((t.frame, t.prev, t.due_ns), (6, 3, 1_050));
    assert_eq!((c.slips(), c.skipped(), c.frames()), (1, 2, 6));
    // Exactly on a slot's time is too late for it (iperf 2's wait_tick).
    let t = c.next(1_060);
    assert_eq!(t.frame, 8);
}

/// The datagrams of `frames` frames of `per` datagrams of 1000 bytes, every 10 ms from a due time
/// of 0, each arriving `delay(frame)` ns after its due time.
fn frames(n: u32, per: u32, delay: impl Fn(u32) -> i128) -> Vec<FrameDatagram> {
    let period = 10_000_000i128;
    let mut seq = 1;
    let mut out = vec![];
    for f in 1..=n {
        let size = per * 1000;
        for i in 0..per {
            let due = period * i128::from(f - 1);
            out.push(FrameDatagram {
                frame: f,
                prev: f - 1,
                seq,
                len: 1000,
                remaining: size - i * 1000,
                size,
                due_ns: due,
                arrival_ns: due + delay(f) + i128::from(i) * 1000,
            });
            seq += 1;
        }
    }
    out
}

fn receipt_of(datagrams: &[FrameDatagram]) -> FramesReport {
    let mut r = FrameReceipt::new(10_000_000);
    for d in datagrams {
        r.datagram(d);
    }
    r.finish()
}

#[test]
fn whole_frames_are_counted_with_their_latency_from_due_to_last_byte() {
    let r = receipt_of(&frames(10, 3, |_| 2_000_000));
    assert_eq!((r.frames, r.complete, r.lost, r.cut_at_end), (10, 10, 0, 0));
    assert_eq!((r.skipped_by_sender, r.late, r.clock_behind), (0, 0, 0));
    // 2 ms to the first datagram, the last 2 µs later.
    let l = r.latency;
    assert!((l.min_ms.unwrap() - 2.002).abs() < 1e-9, "{l:?}");
    assert!((l.max_ms.unwrap() - 2.002).abs() < 1e-9, "{l:?}");
    assert!((r.fps - 100.0).abs() < 1e-9 && (r.period_ms - 10.0).abs() < 1e-9);
}

#[test]
fn a_frame_missing_a_datagram_or_every_one_is_lost_and_reordering_loses_none() {
    let mut d = frames(10, 3, |_| 1_000_000);
    d.remove(3 * 3 + 1); // the middle datagram of frame 4
    d.retain(|x| x.frame != 6); // frame 6 whole
    d.swap(0, 2); // frame 1 arrives last datagram first
    let r = receipt_of(&d);
    assert_eq!((r.frames, r.complete, r.lost), (10, 8, 2), "{r:?}");
    // The first datagram of a frame lost: not whole either, though its last came.
    let mut d = frames(5, 3, |_| 1_000_000);
    d.remove(3);
    assert_eq!(receipt_of(&d).lost, 1);
}

#[test]
fn frames_the_sender_skipped_are_not_lost_and_the_last_cut_short_is_neither() {
    let mut d = frames(10, 2, |_| 1_000_000);
    // The sender came back late after frame 4 and went on at frame 7.
    d.retain(|x| !(5..=6).contains(&x.frame));
    for x in d.iter_mut().filter(|x| x.frame == 7) {
        x.prev = 4;
    }
    // And stopped half way through frame 10.
    d.pop();
    let r = receipt_of(&d);
    assert_eq!(
        (r.frames, r.complete, r.lost, r.skipped_by_sender, r.cut_at_end),
        (7, 7, 0, 2, 1),
        "{r:?}"
    );
}

#[test]
fn a_frame_later_than_a_period_beyond_the_least_is_late_and_a_clock_behind_is_said() {
    let r = receipt_of(&frames(20, 2, |f| match f {
        7 => 25_000_000,
        8 => 11_500_000,
        _ => 1_000_000,
    }));
    // Frame 7 is 24 ms beyond the least, frame 8 10.5 ms: both more than the 10 ms period.
    assert_eq!((r.complete, r.late), (20, 2), "{r:?}");
    let r = receipt_of(&frames(3, 1, |_| -5_000_000));
    assert_eq!((r.complete, r.clock_behind), (3, 3));
    assert!(r.latency.max_ms.unwrap() < 1e-3, "{:?}", r.latency);
}

#[test]
fn iperf2s_last_datagram_raised_to_its_least_size_still_closes_the_frame() {
    // iperf 2.1.8 raises a frame's last write to its least datagram and restates the frame's size
    // as that remainder; the frame is whole when its first and last and everything between came.
    let d = |seq, remaining, size, len| FrameDatagram {
        frame: 1,
        prev: 0,
        seq,
        len,
        remaining,
        size,
        due_ns: 0,
        arrival_ns: 1_000,
    };
    let quirk = [
        d(1, 3000, 3000, 1470),
        d(2, 1530, 3000, 1470),
        d(3, 108, 108, 108),
    ];
    let mut r = FrameReceipt::new(10_000_000);
    quirk.iter().for_each(|x| r.datagram(x));
    assert_eq!(r.finish().complete, 1);
    let mut r = FrameReceipt::new(10_000_000);
    quirk[1..].iter().for_each(|x| r.datagram(x));
    let out = r.finish();
    assert_eq!((out.complete, out.cut_at_end), (0, 1));
}

#[test]
fn datagrams_of_frames_long_counted_are_set_aside() {
    let mut d = frames(400, 1, |_| 1_000);
    let old = d[10];
    d.push(old);
    let r = receipt_of(&d);
    assert_eq!((r.complete, r.too_old), (400, 1));
}

proptest! {
    /// Whatever arrives, in whatever order: nothing panics, and the frames counted are at most
    /// the span of frame numbers heard.
    #[test]
    fn any_datagrams_are_counted_without_panic(
        ds in proptest::collection::vec(
            (0u32..600, 0u32..600, 0u64..5000, 1u32..3000, 0u32..9000, 0u32..9000, any::<i32>()),
            0..400,
        )
    ) {
        let mut r = FrameReceipt::new(1_000_000);
        let (mut lo, mut hi) = (u32::MAX, 0);
        for (frame, prev, seq, len, remaining, size, t) in ds {
            if frame > 0 {
                lo = lo.min(frame);
                hi = hi.max(frame);
            }
            r.datagram(&FrameDatagram {
                frame, prev, seq, len, remaining, size,
                due_ns: 0,
                arrival_ns: i128::from(t),
            });
        }
        let out = r.finish();
        let span = if hi >= lo { u64::from(hi - lo + 1) } else { 0 };
        prop_assert!(out.complete + out.lost + out.skipped_by_sender + out.cut_at_end <= span);
        prop_assert!(out.late <= out.complete);
    }

    #[test]
    fn huge_frame_numbers_cost_no_time(a in 1u32..10, b in (u32::MAX - 10)..u32::MAX) {
        let mut r = FrameReceipt::new(1_000_000);
        for f in [a, b, a, b - 1] {
            r.datagram(&FrameDatagram {
                frame: f, prev: 0, seq: 1, len: 10, remaining: 10, size: 10,
                due_ns: 0, arrival_ns: 5,
            });
        }
        let out = r.finish();
        prop_assert!(out.complete >= 1);
    }
}

#[test]
fn frames_whole_on_a_reliable_stream_count_gaps_as_the_senders_skips() {
    let period = 10_000_000i128;
    let mut r = FrameReceipt::new(period as u64);
    // Frames 1, 2, 5, 6 (3 and 4 skipped by the sender), each 1 ms after it was due; then a
    // repeated 5 and an older 1: nothing new.
    for f in [1u32, 2, 5, 6, 5, 1] {
        let due = i128::from(f) * period;
        r.whole_frame(f, 1000, (due, due + 1_000_000));
    }
    // The stream ends 300 bytes into frame 8 (7 skipped): cut, neither whole nor lost.
    r.begun_frame(8, (1000, 300), 8 * period);
    let rep = r.finish();
    assert_eq!((rep.frames, rep.complete, rep.lost), (4, 4, 0));
    assert_eq!(rep.skipped_by_sender, 3);
    assert_eq!(rep.cut_at_end, 1);
    assert_eq!(rep.latency.min_ms, Some(1.0));
    assert_eq!(rep.latency.max_ms, Some(1.0));
}

#[test]
fn several_streams_frames_pool_into_one_report() {
    let period = 10_000_000i128;
    let stream = |n: u32, late_ms: i128| {
        let mut r = FrameReceipt::new(period as u64);
        for f in 1..=n {
            let due = i128::from(f) * period;
            r.whole_frame(f, 500, (due, due + late_ms * 1_000_000));
        }
        r
    };
    assert!(FrameReceipt::finish_all(Vec::new()).is_none());
    let one = FrameReceipt::finish_all([stream(10, 2)]).unwrap();
    assert_eq!(one, stream(10, 2).finish());
    let both = FrameReceipt::finish_all([stream(10, 2), stream(30, 4)]).unwrap();
    assert_eq!((both.frames, both.complete, both.lost), (40, 40, 0));
    assert_eq!(both.latency.min_ms, Some(2.0));
    assert_eq!(both.latency.max_ms, Some(4.0));
    // The pooled mean and spread are those of the forty latencies together.
    assert!(
        (both.latency.mean_ms.unwrap() - 3.5).abs() < 1e-9,
        "{:?}",
        both.latency
    );
    let sd = (30.0f64 * 0.25 / 39.0 * 4.0).sqrt();
    assert!(
        (both.latency.stdev_ms.unwrap() - sd).abs() < 1e-9,
        "{:?}",
        both.latency
    );
    assert_eq!(both.fps, 100.0);
}

#[test]
fn a_gap_within_a_frame_is_shorter_than_its_period_and_absent_from_the_json_when_none() {
    let with = |ipg_ns| {
        FrameSpec {
            ipg_ns,
            ..FrameSpec::DEFAULT
        }
        .check()
    };
    assert!(with(1_000_000).is_ok());
    let e = with(16_666_667).unwrap_err().to_string();
    assert!(
        e.contains("--ipg 16.666667 ms") && e.contains("period (16.667 ms)"),
        "{e}"
    );
    let json = serde_json::to_string(&FrameSpec::DEFAULT).unwrap();
    assert!(!json.contains("ipg"), "{json}");
    let old: FrameSpec = serde_json::from_str(r#"{"fps":60.0,"mean_bps":2e7,"stddev_bps":0.0}"#).unwrap();
    assert_eq!(old, FrameSpec::DEFAULT);
}
