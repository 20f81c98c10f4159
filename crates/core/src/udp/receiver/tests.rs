use super::*;

fn h(seq: u64, sent_ns: u64) -> Header {
    Header { seq, sent_ns }
}

#[test]
fn a_known_drop_pattern_is_counted_exactly() {
    // 1000 datagrams sent; every 10th lost, 3 arrive late, 2 arrive twice.
    let mut r = UdpReceiver::default();
    let mut late = vec![];
    for s in 0..1000u64 {
        if s % 10 == 9 {
            continue;
        }
        if s == 100 || s == 501 || s == 702 {
            late.push(s);
            continue;
        }
        assert!(r.on_datagram(h(s, s * 1000), s * 1000 + 50_000, 100));
    }
    for s in &late {
        assert!(r.on_datagram(h(*s, s * 1000), 2_000_000, 100));
    }
    assert!(!r.on_datagram(h(5, 5000), 2_100_000, 100));
    assert!(!r.on_datagram(h(501, 501_000), 2_200_000, 100));
    let st = r.stats(Some(1000));
    assert_eq!(st.datagrams_received, 900);
    assert_eq!(st.datagrams_lost, 100);
    assert!((st.loss_pct - 10.0).abs() < 1e-9);
    assert_eq!(st.out_of_order, 3);
    assert_eq!(st.duplicates, 2);
    assert_eq!(r.bytes(), 90_000);
    // Without the sender's count, loss is estimated from the highest sequence seen (998): the lost
    // last datagram cannot be seen, which is why landspeed's protocol reports the sender's count.
    assert_eq!(r.stats(None).datagrams_lost, 99);
}

#[test]
fn constant_transit_has_no_jitter_and_alternating_transit_converges_to_its_step() {
    let mut r = UdpReceiver::default();
    for s in 0..100u64 {
        r.on_datagram(h(s, s * 1_000_000), s * 1_000_000 + 20_000_000, 10);
    }
    assert_eq!(r.stats(None).jitter_ms, 0.0);
    // Transit alternating 20 ms / 21 ms: |D| = 1 ms every time, so J tends to 1 ms.
    let mut r = UdpReceiver::default();
    for s in 0..2000u64 {
        let transit = 20_000_000 + (s % 2) * 1_000_000;
        r.on_datagram(h(s, s * 1_000_000), s * 1_000_000 + transit, 10);
    }
    assert!((r.stats(None).jitter_ms - 1.0).abs() < 1e-6);
}

#[test]
fn a_long_gap_clears_the_duplicate_window() {
    let mut r = UdpReceiver::default();
    r.on_datagram(h(0, 0), 0, 1);
    r.on_datagram(h(200_000, 0), 0, 1);
    // 65,536 + 1 below the maximum: too old to check, counted as a late arrival.
    assert!(r.on_datagram(h(200_000 - 65_537, 0), 0, 1));
    // Within the window and never seen: a late arrival, not a duplicate.
    assert!(r.on_datagram(h(199_999, 0), 0, 1));
    assert!(!r.on_datagram(h(199_999, 0), 0, 1));
    let st = r.stats(Some(200_001));
    assert_eq!((st.out_of_order, st.duplicates, st.datagrams_received), (2, 1, 4));
}

#[test]
fn gaps_after_a_socket_drop_are_the_hosts_and_the_others_the_paths() {
    let mut r = UdpReceiver::default();
    r.on_socket_drops(0);
    for s in 0..10 {
        r.on_datagram(h(s, 0), 0, 100);
    }
    // The buffer holding 15..=19 came after two dropped buffers (seq 10..=14).
    r.on_socket_drops(2);
    for s in 15..20 {
        r.on_datagram(h(s, 0), 0, 100);
    }
    // A gap with no new drop (20..=22) was lost before the host.
    r.on_socket_drops(2);
    for s in 23..30 {
        r.on_datagram(h(s, 0), 0, 100);
    }
    // Drops after the last buffer read take the tail (30..=39 of 40 sent).
    r.on_socket_drops(3);
    let st = r.stats(Some(40));
    assert_eq!(st.datagrams_lost, 5 + 3 + 10);
    assert_eq!(st.lost_in_receiver, Some(5 + 10));
}

#[test]
fn without_drop_counts_the_split_is_unknown() {
    let mut r = UdpReceiver::default();
    for s in [0, 1, 5] {
        r.on_datagram(h(s, 0), 0, 100);
    }
    let st = r.stats(Some(6));
    assert_eq!(st.datagrams_lost, 3);
    assert_eq!(st.lost_in_receiver, None);
}
