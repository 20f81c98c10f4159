use super::*;
use crate::unhex;
use landspeed_core::transactions::LatencySummary;

/// The first 112 bytes of two datagrams iperf 2.1.8 sent for `-u --isochronous=60:2m,0.5m -t 1`:
/// the first of frame 1 (1470 bytes) and its last (905 bytes).
const FIRST: &str = "000000026b116d5e000368c900000000680100d800000001000013ee0000000000000000ffffff9c0000000000000000000100000002000100080003000000000010000000000000000000000000411a6b116d5e000368c90000000000000001000014c3000014c30000000000000000";
const LAST: &str = "000000056b116d5e0003691d00000000680100d800000001000013ee0000000000000000ffffff9c0000000000000000000100000002000100080003000000000010000000000000000000000000411a6b116d5e000368c90000000000000001000014c3000003890000000000000000";

#[test]
fn iperf2s_frame_fields_read_and_write_back_byte_for_byte() {
    let first = unhex(FIRST);
    let p = FramePayload::parse(&first).unwrap();
    assert_eq!(
        p,
        FramePayload {
            period_us: 16_666,
            start_s: 0x6b11_6d5e,
            start_us: 223_433,
            prev: 0,
            frame: 1,
            size: 5315,
            remaining: 5315,
        }
    );
    let mut again = first.clone();
    again[AT..].fill(0xAA);
    p.write(&mut again);
    assert_eq!(&again[..MIN_DATAGRAM], &first[..MIN_DATAGRAM]);
    let last = FramePayload::parse(&unhex(LAST)).unwrap();
    assert_eq!((last.frame, last.remaining), (1, 905));
    // The last of the frame: as long as what remained (905 bytes on the wire).
    let d = last.datagram(5, 905, 0);
    assert_eq!(d.remaining, d.len);
    assert_eq!(p.due_ns(), 0x6b11_6d5e_i128 * 1_000_000_000 + 223_433_000);
    let third = FramePayload { frame: 3, ..p };
    assert_eq!(third.due_ns() - p.due_ns(), 2 * 16_666_000);
}

#[test]
fn datagrams_without_a_frame_are_not_read_as_one() {
    let mut first = unhex(FIRST);
    assert!(FramePayload::parse(&first[..MIN_DATAGRAM - 1]).is_none());
    // iperf 2's opening datagram: the fields all zero.
    first[AT..MIN_DATAGRAM].fill(0);
    assert!(FramePayload::parse(&first).is_none());
    // A start time with a million microseconds or more.
    let mut bad = unhex(FIRST);
    bad[AT + 8..AT + 12].copy_from_slice(&1_000_000u32.to_be_bytes());
    assert!(FramePayload::parse(&bad).is_none());
}

#[test]
fn the_receivers_counts_ride_after_the_report_and_anything_else_is_none() {
    let f = FramesReport {
        frames: 120,
        complete: 118,
        lost: 2,
        skipped_by_sender: 3,
        cut_at_end: 1,
        late: 4,
        clock_behind: 0,
        latency: LatencySummary {
            min_ms: Some(0.25),
            p50_ms: Some(0.5),
            max_ms: Some(12.0),
            ..LatencySummary::default()
        },
        ..FramesReport::default()
    };
    let mut datagram = vec![0u8; 128];
    datagram.extend_from_slice(&encode_trailer(&f));
    let back = parse_trailer(&datagram, 128).unwrap();
    assert_eq!(
        back,
        FramesReport {
            histogram: vec![],
            ..f.clone()
        }
    );
    // iperf 2's report alone, a cut trailer, another magic or version: none.
    assert!(parse_trailer(&datagram[..128], 128).is_none());
    assert!(parse_trailer(&datagram[..200], 128).is_none());
    let mut other = datagram.clone();
    other[128] = b'X';
    assert!(parse_trailer(&other, 128).is_none());
    other[128] = b'L';
    other[132] = 2;
    assert!(parse_trailer(&other, 128).is_none());
    // A latency that cannot be one is none.
    let mut neg = datagram.clone();
    neg[128 + 5 + 6 * 8..128 + 5 + 7 * 8].copy_from_slice(&(-1.0f64).to_be_bytes());
    assert_eq!(parse_trailer(&neg, 128).unwrap().latency.min_ms, None);
}

#[test]
fn frames_are_heard_at_their_last_datagram_each_once() {
    let frame = |frame: u32, prev: u32, remaining: u32| FramePayload {
        period_us: 100_000,
        start_s: 1000,
        start_us: 0,
        prev,
        frame,
        size: 3000,
        remaining,
    };
    let mut t = FrameTally::default();
    // Frame 1 in two datagrams, its last 2 ms late; frame 2's last datagram lost; frame 3 whole
    // (3.5 ms late), its repeat not counted; frame 5 after a skip by the sender (prev 3) not
    // counted; frame 6 whole.
    t.datagram(&frame(1, 0, 3000), 1500, 1000.001);
    t.datagram(&frame(1, 0, 1500), 1500, 1000.002);
    t.datagram(&frame(2, 1, 3000), 1500, 1000.101);
    t.datagram(&frame(3, 2, 1500), 1500, 1000.2035);
    t.datagram(&frame(3, 2, 1500), 1500, 1000.2036);
    let a = t.take_interval(0.25);
    assert_eq!((a.frames, a.lost), (2, 1));
    let l = a.latency.unwrap();
    assert!(
        (l.min_ms - 2.0).abs() < 1e-3 && (l.max_ms - 3.5).abs() < 1e-3,
        "{l:?}"
    );
    t.datagram(&frame(5, 3, 1500), 1500, 1000.45);
    t.datagram(&frame(6, 5, 1500), 1500, 1000.5011);
    let b = t.take_interval(0.25);
    assert_eq!((b.frames, b.lost), (1, 2));
    assert_eq!(t.take_interval(0.25).latency, None);
    let whole = landspeed_core::frames::FramesHeard::merged([a, b].iter(), 0.5).unwrap();
    assert_eq!(
        (whole.frames, whole.lost, whole.latency.unwrap().datagrams),
        (3, 3, 3)
    );
}

#[test]
fn binned_frames_keep_their_latency_and_the_longest_arrival() {
    let frame = |frame: u32| FramePayload {
        period_us: 100_000,
        start_s: 1000,
        start_us: 0,
        prev: frame - 1,
        frame,
        size: 1500,
        remaining: 1500,
    };
    let mut t = FrameTally::default();
    t.bin_latencies(landspeed_core::transit_bins::BinSpec::default());
    // 0.25 ms, 1.25 ms and 0.35 ms late: 100 µs bins 3, 13 and 4 (counted from 1).
    t.datagram(&frame(1), 1500, 1_000.000_25);
    t.datagram(&frame(2), 1500, 1_000.101_25);
    let a = t.take_interval(0.2);
    t.datagram(&frame(3), 1500, 1_000.200_35);
    let b = t.take_interval(0.1);
    let h = a.bins.clone().unwrap();
    let bins: Vec<(u32, u64)> = h.bins.iter().map(|b| (b.index, b.count)).collect();
    assert_eq!(bins, [(3, 1), (13, 1)]);
    // The longest of the interval, marked with its last datagram's arrival.
    let peak = h.peak.unwrap();
    assert_eq!((peak.sent_s, peak.sent_us / 1000), (1000, 101));
    assert!((peak.transit_ms - 1.25).abs() < 1e-3, "{peak:?}");
    // Each interval's counted afresh; the test's are the intervals' merged.
    assert_eq!(b.bins.as_ref().unwrap().population(), 1);
    let whole = landspeed_core::frames::FramesHeard::merged([a, b].iter(), 0.3).unwrap();
    assert_eq!(whole.bins.unwrap().population(), 3);
}
