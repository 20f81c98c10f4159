use super::*;
use crate::settings::Request;
use std::time::Duration;

fn dir(f: impl FnOnce(&mut Request)) -> Direction {
    let mut r = Request::default();
    f(&mut r);
    r.resolve().unwrap().a_to_b
}

fn deliver_at(f: Fate) -> u64 {
    match f {
        Fate::Deliver { at_ns, .. } => at_ns,
        Fate::Dropped(d) => panic!("dropped: {d:?}"),
        Fate::Held(id) => panic!("held: {id}"),
    }
}

#[test]
fn delay_only_path_delivers_after_the_one_way_delay() {
    let mut l = Link::new(dir(|r| r.rtt = Some("80ms".into())), 1);
    assert_eq!(deliver_at(l.offer(1_000, 1500)), 40_001_000);
}

#[test]
fn serialization_follows_the_rate_exactly() {
    // 1500 bytes at 12 Mbit/s = 1 ms each; a burst of 10 leaves 1 ms apart.
    let mut l = Link::new(
        dir(|r| {
            r.rate = Some("12M".into());
            r.queue = Some("1M".into());
        }),
        1,
    );
    let times: Vec<u64> = (0..10).map(|_| deliver_at(l.offer(0, 1500))).collect();
    for (i, t) in times.iter().enumerate() {
        assert_eq!(*t, (i as u64 + 1) * 1_000_000);
    }
    assert_eq!(l.backlog_bytes(0), 15_000);
    assert_eq!(l.backlog_bytes(5_000_000), 7_500);
    assert_eq!(l.backlog_bytes(20_000_000), 0);
}

#[test]
fn long_run_rate_is_the_configured_rate() {
    // Offer far more than the link carries for 1 s of virtual time; what is delivered by t = 1 s is the
    // rate, to within one packet.
    let mut l = Link::new(
        dir(|r| {
            r.rate = Some("100M".into());
            r.queue = Some("64K".into());
        }),
        1,
    );
    let mut delivered = 0u64;
    let mut t = 0u64;
    while t < 1_000_000_000 {
        if let Fate::Deliver { at_ns, .. } = l.offer(t, 1500) {
            if at_ns <= 1_000_000_000 {
                delivered += 1500;
            }
        }
        t += 10_000; // 150 MB/s offered
    }
    let rate = delivered as f64 * 8.0;
    assert!((rate - 100e6).abs() <= 1500.0 * 8.0, "rate {rate}");
    assert!(l.counters.path.dropped_queue > 0);
}

#[test]
fn queue_drops_at_the_tail_when_full() {
    let mut l = Link::new(
        dir(|r| {
            r.rate = Some("8M".into());
            r.queue = Some("4500".into());
        }),
        1,
    );
    let fates: Vec<Fate> = (0..5).map(|_| l.offer(0, 1500)).collect();
    assert!(matches!(fates[2], Fate::Deliver { .. }));
    assert_eq!(fates[3], Fate::Dropped(Drop::Queue));
    assert_eq!(l.counters.path.dropped_queue, 2);
    assert_eq!(l.counters.queue_max_bytes, 4500);
}

#[test]
fn bernoulli_loss_rate_is_close_to_p() {
    let mut l = Link::new(dir(|r| r.loss = Some("2%".into())), 7);
    let n = 200_000;
    for i in 0..n {
        l.offer(i, 100);
    }
    let p = l.counters.path.dropped_loss as f64 / n as f64;
    assert!((p - 0.02).abs() < 0.002, "loss {p}");
}

#[test]
fn gilbert_loss_is_bursty_with_the_right_mean() {
    let mut l = Link::new(dir(|r| r.loss_model = Some("gilbert:1%,25%".into())), 3);
    let n = 400_000u64;
    let mut lost = vec![];
    for i in 0..n {
        lost.push(matches!(l.offer(i, 100), Fate::Dropped(Drop::Loss)));
    }
    let mean = lost.iter().filter(|x| **x).count() as f64 / n as f64;
    let expected = 0.01 / 0.26;
    assert!((mean - expected).abs() < 0.1 * expected, "mean {mean}");
    // Bursts: the mean run of consecutive losses is 1/r = 4, far above Bernoulli's ~1.04.
    let runs = lost.windows(2).filter(|w| w[0] && !w[1]).count();
    let mean_run = lost.iter().filter(|x| **x).count() as f64 / runs as f64;
    assert!(mean_run > 3.0 && mean_run < 5.0, "mean run {mean_run}");
}

#[test]
fn jitter_varies_delay_but_never_reorders() {
    let mut l = Link::new(
        dir(|r| {
            r.rtt = Some("20ms".into());
            r.jitter = Some("2ms".into());
        }),
        5,
    );
    let mut last = 0;
    let mut spread = (u64::MAX, 0u64);
    for i in 0..10_000u64 {
        let now = i * 50_000;
        let at = deliver_at(l.offer(now, 1500));
        assert!(at >= last, "reordered");
        last = at;
        spread = (spread.0.min(at - now), spread.1.max(at - now));
    }
    assert!(spread.0 >= 8_000_000 && spread.1 <= 12_000_000 + 2_000_000);
    assert!(spread.1 - spread.0 > 2_000_000, "no jitter: {spread:?}");
}

#[test]
fn reordered_packets_are_overtaken() {
    let mut l = Link::new(
        dir(|r| {
            r.rtt = Some("2ms".into());
            r.reorder = Some("10%".into());
            r.reorder_gap = Some("1ms".into());
        }),
        9,
    );
    let mut out = vec![];
    for i in 0..1000u64 {
        if let Fate::Deliver { at_ns, reordered, .. } = l.offer(i * 100_000, 100) {
            out.push((at_ns, i, reordered));
        }
    }
    let n = out.iter().filter(|x| x.2).count();
    assert!((60..=140).contains(&n), "reordered {n}");
    out.sort();
    let inversions = out.windows(2).filter(|w| w[0].1 > w[1].1).count();
    assert!(inversions >= n / 2, "inversions {inversions}");
    assert_eq!(l.counters.path.reordered as usize, n);
}

#[test]
fn duplicates_and_corruption_are_requested_at_their_rates() {
    let mut l = Link::new(
        dir(|r| {
            r.duplicate = Some("5%".into());
            r.corrupt_payload = Some("1%".into());
        }),
        11,
    );
    for i in 0..100_000 {
        l.offer(i, 100);
    }
    let d = l.counters.path.duplicated as f64 / 1e5;
    let c = l.counters.corrupt_requested as f64 / 1e5;
    assert!((d - 0.05).abs() < 0.005 && (c - 0.01).abs() < 0.002, "{d} {c}");
}

#[test]
fn same_seed_same_decisions() {
    let d = dir(|r| {
        r.loss = Some("10%".into());
        r.jitter = Some("1ms".into());
        r.rtt = Some("10ms".into());
    });
    let run = |seed| {
        let mut l = Link::new(d.clone(), seed);
        (0..1000).map(|i| l.offer(i * 1000, 100)).collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
    let _ = Duration::ZERO;
}

#[test]
fn an_outage_drops_everything_inside_its_window_and_nothing_after() {
    let mut l = Link::new(dir(|r| r.rtt = Some("10ms".into())), 1);
    l.set_outage(3_000_000_000, Default::default());
    assert_eq!(l.offer(1_000, 1500), Fate::Dropped(Drop::Outage));
    assert_eq!(l.offer(2_999_999_999, 1500), Fate::Dropped(Drop::Outage));
    assert_eq!(deliver_at(l.offer(3_000_000_000, 1500)), 3_005_000_000);
    assert_eq!(
        (l.counters.path.dropped_outage, l.counters.packets_offered),
        (2, 3)
    );
}

#[test]
fn a_live_rate_change_drains_the_backlog_at_the_new_rate_and_a_shorter_delay_never_reorders() {
    // 1500 bytes at 12 Mbit/s = 1 ms each: ten queued, then the rate doubles at 2 ms.
    let mut l = Link::new(
        dir(|r| {
            r.rate = Some("12M".into());
            r.queue = Some("1M".into());
            r.rtt = Some("20ms".into());
        }),
        1,
    );
    let before: Vec<u64> = (0..10).map(|_| deliver_at(l.offer(0, 1500))).collect();
    assert_eq!(l.backlog_bytes(2_000_000), 12_000);
    let mut faster = l.direction().clone();
    faster.rate_bps = Some(24e6);
    faster.delay = Duration::from_millis(1);
    l.set_direction(faster, 2_000_000);
    // 12,000 bytes at 24 Mbit/s: 4 ms of backlog, so the next packet is serialized by 6.5 ms and
    // delivered 1 ms later, but not before the last one sent at the old delay (20 ms).
    assert_eq!(l.backlog_bytes(2_000_000), 12_000);
    let next = deliver_at(l.offer(2_000_000, 1500));
    assert_eq!(next, *before.last().unwrap(), "floored, not overtaking");
    assert_eq!(deliver_at(l.offer(40_000_000, 1500)), 41_500_000);
}

#[test]
fn an_outage_of_one_protocol_spares_the_others() {
    let mut l = Link::new(dir(|r| r.rtt = Some("10ms".into())), 1);
    let udp = crate::packet::OutageScope {
        proto: Some(17),
        ..Default::default()
    };
    l.set_outage(1_000_000_000, udp);
    let mut v4 = [0u8; 60];
    v4[0] = 0x45;
    v4[9] = 17;
    assert_eq!(l.offer_packet(1_000, &v4), Fate::Dropped(Drop::Outage));
    v4[9] = 6;
    assert!(matches!(l.offer_packet(1_000, &v4), Fate::Deliver { .. }));
    let mut v6 = [0u8; 60];
    v6[0] = 0x60;
    v6[6] = 17;
    assert_eq!(l.offer_packet(1_000, &v6), Fate::Dropped(Drop::Outage));
    assert!(matches!(l.offer_packet(1_000_000_000, &v6), Fate::Deliver { .. }));
}

/// A TCP/IPv4 packet from port `src` to port `dst`.
fn tcp4(src: u16, dst: u16) -> [u8; 60] {
    let mut p = [0u8; 60];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&60u16.to_be_bytes());
    p[9] = 6;
    p[20..22].copy_from_slice(&src.to_be_bytes());
    p[22..24].copy_from_slice(&dst.to_be_bytes());
    p[32] = 0x50; // a 20-byte TCP header
    p
}

#[test]
fn an_outage_of_some_ports_spares_the_others_and_except_ports_the_reverse() {
    let scope = |except_ports| crate::packet::OutageScope {
        proto: None,
        ports: Some((40000, 40001)),
        except_ports,
    };
    let (data, back, control) = (tcp4(40001, 5201), tcp4(5201, 40000), tcp4(51234, 5201));
    let mut l = Link::new(dir(|r| r.rtt = Some("10ms".into())), 1);
    l.set_outage(1_000_000_000, scope(false));
    assert_eq!(l.offer_packet(1_000, &data), Fate::Dropped(Drop::Outage));
    assert_eq!(l.offer_packet(1_000, &back), Fate::Dropped(Drop::Outage));
    assert!(matches!(l.offer_packet(1_000, &control), Fate::Deliver { .. }));
    let mut l = Link::new(dir(|r| r.rtt = Some("10ms".into())), 1);
    l.set_outage(1_000_000_000, scope(true));
    assert!(matches!(l.offer_packet(1_000, &data), Fate::Deliver { .. }));
    assert_eq!(l.offer_packet(1_000, &control), Fate::Dropped(Drop::Outage));
    // A packet whose ports cannot be read is in no port range.
    let mut short = [0u8; 60];
    short[0] = 0x45;
    short[9] = 6;
    short[2..4].copy_from_slice(&22u16.to_be_bytes());
    assert_eq!(l.offer_packet(1_000, &short), Fate::Dropped(Drop::Outage));
}

/// A 12 Mbit/s bottleneck (1 ms a 1500-byte packet) with a 100 ms queue, offered 5% more than its
/// rate for `secs` (50 packets a second too many, as a sender that does not slow down): (packets
/// delivered, delivered marked CE, dropped by the discipline, dropped by the tail, the link).
fn overdriven(aqm: &str, ect: bool, secs: u64) -> (u64, u64, u64, u64, Link) {
    let mut l = Link::new(
        dir(|r| {
            r.rate = Some("12M".into());
            r.queue = Some("150K".into());
            r.aqm = Some(aqm.into());
        }),
        1,
    );
    let mut pkt = tcp4(40000, 5201).to_vec();
    pkt.resize(1500, 0);
    pkt[1] = if ect { 0b10 } else { 0 };
    let (mut delivered, mut marked, mut aqm_drops, mut tail) = (0, 0, 0, 0);
    for i in 0..secs * 1050 {
        match l.offer_packet(i * 1_000_000_000 / 1050, &pkt) {
            Fate::Deliver { ce, .. } => {
                delivered += 1;
                marked += u64::from(ce);
            }
            Fate::Dropped(Drop::Aqm) => aqm_drops += 1,
            Fate::Dropped(Drop::Queue) => tail += 1,
            Fate::Dropped(d) => panic!("{d:?}"),
            Fate::Held(id) => panic!("held {id}"),
        }
    }
    (delivered, marked, aqm_drops, tail, l)
}

#[test]
fn codel_keeps_the_standing_queue_near_its_target_where_tail_drop_fills_the_buffer() {
    let (_, _, _, tail_drops, tail) = overdriven("tail-drop", false, 10);
    let (_, _, codel_drops, codel_tail, codel) = overdriven("codel", false, 10);
    let mean = |l: &Link| l.counters.sojourn_sum_ns / l.counters.path.sojourn_packets.max(1) / 1_000_000;
    // Tail drop: the queue fills in 2 s and the 150 kB buffer (100 ms at 12 Mbit/s) stays full.
    assert!(
        tail_drops > 300 && mean(&tail) >= 80,
        "{tail_drops} {} ms",
        mean(&tail)
    );
    // CoDel: its drops catch up with the excess within about a second and a half and keep the
    // standing queue low; the tail never drops.
    assert!(codel_drops > 300 && codel_tail == 0, "{codel_drops} {codel_tail}");
    assert_eq!(codel.counters.path.dropped_aqm, codel_drops);
    assert!(
        mean(&codel) < 40,
        "{} ms against tail drop's {} ms",
        mean(&codel),
        mean(&tail)
    );
}

#[test]
fn codel_marks_ecn_capable_packets_instead_of_dropping_them_and_counts_each_mark() {
    let (delivered, marked, aqm_drops, _, l) = overdriven("codel", true, 2);
    assert!(marked > 0 && aqm_drops == 0, "{marked} {aqm_drops}");
    assert_eq!(l.counters.path.marked_ce, marked);
    assert!(delivered >= marked);
    // The same traffic without ECN: as many signals, each a drop.
    let (_, _, drops, _, _) = overdriven("codel", false, 2);
    assert!(drops > 0);
}

#[test]
fn pie_steers_the_queue_toward_its_target_where_tail_drop_fills_the_buffer() {
    let (_, _, pie_drops, pie_tail, pie) = overdriven("pie", false, 10);
    let (_, marks, ecn_drops, _, _) = overdriven("pie", true, 10);
    let mean = |l: &Link| l.counters.sojourn_sum_ns / l.counters.path.sojourn_packets.max(1) / 1_000_000;
    // 5% too many packets: PIE's probability settles near 5% and the queue near its 15 ms target.
    assert!(pie_drops > 300 && pie_tail == 0, "{pie_drops} {pie_tail}");
    assert!(mean(&pie) < 40, "{} ms", mean(&pie));
    // ECN-capable but unresponsive (a mark does not slow this sender): marked while the probability
    // is under 10%; the queue keeps growing, the probability passes 10%, and PIE drops (RFC 8033's
    // protection against a flow that ignores marks).
    assert!(
        marks > 100 && ecn_drops > 0,
        "{marks} marked, {ecn_drops} dropped"
    );
}

/// Offers `pkt` at `t` to a link whose scheduler holds packets, collecting every fate it releases
/// into `fates` (by handle) and recording the packet's arrival and port in `sent`.
fn offer_held(
    l: &mut Link,
    t: u64,
    pkt: &[u8],
    sent: &mut Vec<(u64, u64, u16)>,
    fates: &mut HashMap<u64, Fate>,
) {
    let Fate::Held(id) = l.offer_packet(t, pkt) else {
        panic!("a scheduled link held nothing")
    };
    sent.push((id, t, u16::from_be_bytes([pkt[20], pkt[21]])));
    fates.extend(l.take_released());
}

use std::collections::HashMap;

#[test]
fn fq_codel_holds_each_packet_and_a_sparse_flow_passes_the_bulk_flows_queue() {
    let mut l = Link::new(
        dir(|r| {
            r.rtt = Some("20ms".into());
            r.rate = Some("12M".into());
            r.queue = Some("150K".into());
            r.aqm = Some("fq-codel".into());
        }),
        1,
    );
    let mut bulk = tcp4(40000, 5201).to_vec();
    bulk.resize(1500, 0);
    let mut sparse = tcp4(40001, 5201).to_vec();
    sparse.resize(100, 0);
    let (mut sent, mut fates) = (vec![], HashMap::new());
    for i in 0..3 * 1050 {
        let t = i * 1_000_000_000 / 1050;
        offer_held(&mut l, t, &bulk, &mut sent, &mut fates);
        if i % 50 == 0 {
            offer_held(&mut l, t, &sparse, &mut sent, &mut fates);
        }
    }
    l.release(10_000_000_000);
    fates.extend(l.take_released());
    assert_eq!(fates.len(), sent.len(), "every held packet has one fate");
    assert_eq!(l.next_release_ns(), None);
    for &(id, t, port) in sent.iter().filter(|s| s.2 == 40001) {
        // 10 ms one way, at most two bulk packets (1 ms each) ahead: the one on the wire and one the
        // bulk flow still has quantum for; then its own 0.07 ms. Tail drop would add ~100 ms.
        let at = deliver_at(fates[&id]);
        assert!(
            at - t <= 12_100_000,
            "sparse packet {id} ({port}) took {} ns",
            at - t
        );
    }
    let c = l.counters;
    assert!(c.path.dropped_aqm > 50 && c.path.dropped_queue == 0, "{c:?}");
    assert!(c.sojourn_sum_ns / c.path.sojourn_packets < 40_000_000, "{c:?}");
}

#[test]
fn changing_the_discipline_hands_over_what_the_scheduler_held() {
    let fq = dir(|r| {
        r.rate = Some("12M".into());
        r.queue = Some("150K".into());
        r.aqm = Some("dualpi2".into());
    });
    let mut tail = fq.clone();
    tail.aqm = crate::aqm::Aqm::TailDrop;
    let mut l = Link::new(fq, 1);
    let mut pkt = tcp4(40000, 5201).to_vec();
    pkt.resize(1500, 0);
    let (mut sent, mut fates) = (vec![], HashMap::new());
    for _ in 0..50 {
        offer_held(&mut l, 0, &pkt, &mut sent, &mut fates);
    }
    assert_eq!(l.backlog_bytes(0), 49 * 1500, "the first is on the wire");
    l.set_direction(tail, 0);
    fates.extend(l.take_released());
    let times: Vec<u64> = sent.iter().map(|s| deliver_at(fates[&s.0])).collect();
    assert_eq!(times.len(), 50);
    assert!(times.windows(2).all(|w| w[1] == w[0] + 1_000_000), "{times:?}");
    // The FIFO now serializes after them.
    assert_eq!(deliver_at(l.offer_packet(0, &pkt)), 51_000_000);
}
