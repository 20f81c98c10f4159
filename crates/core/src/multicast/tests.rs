use super::*;

const LEN: usize = 200;
const MS: u64 = 1_000_000;
/// When the senders started; the receivers joined before (at 0) unless a test says otherwise.
const START: u64 = 1000 * MS;

fn from(port: u16) -> SocketAddr {
    SocketAddr::from(([198, 18, 50, 1], port))
}

fn datagram(p: &Pattern, seq: u64, sent_ns: u64) -> Vec<u8> {
    let mut b = vec![0u8; LEN];
    write_data(&mut b, p, seq, (START, sent_ns));
    b
}

fn end(key: u64, sent: u64) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_BYTES];
    McHeader::End {
        sent,
        sent_ns: 0,
        key,
        start_ns: START,
    }
    .write(&mut b);
    b
}

/// Sends datagrams `seqs` of a test with key `key` from `port`, each 10 ms apart and 5 ms on the way.
fn feed(g: &mut Group, key: u64, port: u16, seqs: impl IntoIterator<Item = u64>) {
    let p = Pattern::new(key);
    for seq in seqs {
        let b = datagram(&p, seq, 1000 * MS + seq * 10 * MS);
        g.on_datagram(
            from(port),
            Arrival::Landspeed(&b),
            1000 * MS + seq * 10 * MS + 5 * MS,
        );
    }
}

#[test]
fn the_header_reads_back_as_written_and_the_end_is_told_apart() {
    let mut b = [0u8; HEADER_BYTES];
    for h in [
        McHeader::Data {
            seq: 7,
            sent_ns: 123,
            key: 0xfeed,
            start_ns: 5,
        },
        McHeader::End {
            sent: 1 << 40,
            sent_ns: 9,
            key: 1,
            start_ns: 3,
        },
    ] {
        h.write(&mut b);
        assert_eq!(McHeader::read(&b), Some(h));
    }
    // Too short, or without the magic: not landspeed's.
    assert_eq!(McHeader::read(&b[..HEADER_BYTES - 1]), None);
    b[16] = b'X';
    assert_eq!(McHeader::read(&b), None);
}

#[test]
fn every_datagram_arriving_once_and_the_end_give_no_loss_and_a_verified_test() {
    let mut g = Group::new(0);
    feed(&mut g, 42, 9000, 0..100);
    assert!(!g.all_ended());
    g.on_datagram(from(9000), Arrival::Landspeed(&end(42, 100)), 2000 * MS);
    assert!(g.all_ended());
    let r = &g.report("239.1.1.1:5001".into(), "end").sources[0];
    assert_eq!(
        (
            r.udp.datagrams_sent,
            r.udp.datagrams_received,
            r.udp.datagrams_lost
        ),
        (Some(100), 100, 0)
    );
    assert_eq!((r.verified, r.corrupt, r.ended), (Some(true), 0, true));
    assert_eq!(r.bytes, 100 * LEN as u64);
    let ow = r.one_way.unwrap();
    assert!((ow.min_ms - 5.0).abs() < 1e-9 && (ow.max_ms - 5.0).abs() < 1e-9);
    assert!((r.span_s - 0.99).abs() < 1e-9);
}

#[test]
fn gaps_reordering_duplicates_and_a_lost_tail_are_counted_against_the_senders_count() {
    let mut g = Group::new(0);
    // 0..10, 12 before 11, 11 twice, 14..17; 13 lost, and 18, 19 lost at the tail.
    feed(&mut g, 5, 1, (0..11).chain([12, 11, 11]).chain(14..18));
    g.on_datagram(from(1), Arrival::Landspeed(&end(5, 20)), 2000 * MS);
    let r = &g.report(String::new(), "end").sources[0];
    assert_eq!(r.udp.datagrams_received, 17);
    assert_eq!(
        (r.udp.datagrams_lost, r.udp.out_of_order, r.udp.duplicates),
        (3, 1, 1)
    );
    assert!((r.udp.loss_pct - 15.0).abs() < 1e-9);
    assert_eq!(r.verified, Some(true));
}

#[test]
fn a_changed_byte_or_a_wrong_length_makes_the_test_unverified() {
    let p = Pattern::new(77);
    let mut g = Group::new(0);
    let mut b = datagram(&p, 3, 0);
    b[HEADER_BYTES + 10] ^= 1;
    g.on_datagram(from(2), Arrival::Landspeed(&datagram(&p, 2, 0)), 1);
    g.on_datagram(from(2), Arrival::Landspeed(&b), 2);
    let mut short = datagram(&p, 4, 0);
    short.truncate(LEN - 1);
    g.on_datagram(from(2), Arrival::Landspeed(&short), 3);
    let r = &g.report(String::new(), "time").sources[0];
    assert_eq!((r.verified, r.corrupt), (Some(false), 2));
    let c = r.first_corruption.as_ref().unwrap();
    assert_eq!(c.offset, 3 * (LEN - HEADER_BYTES) as u64 + 10);
    // A payload written for another sequence number is wrong too.
    let mut g = Group::new(0);
    let mut moved = datagram(&p, 9, 0);
    McHeader::Data {
        seq: 8,
        sent_ns: 0,
        key: 77,
        start_ns: START,
    }
    .write(&mut moved);
    g.on_datagram(from(2), Arrival::Landspeed(&moved), 1);
    assert_eq!(g.report(String::new(), "time").sources[0].verified, Some(false));
}

#[test]
fn a_receiver_that_joins_late_counts_from_the_first_datagram_it_hears() {
    // Joined after the sender started: datagrams before 50 were sent before it was there.
    let mut g = Group::new(START + 1);
    feed(&mut g, 8, 1, 50..60);
    g.on_datagram(from(1), Arrival::Landspeed(&end(8, 60)), 2000 * MS);
    let r = &g.report(String::new(), "end").sources[0];
    assert_eq!(r.first_seq, 50);
    assert_eq!((r.udp.datagrams_sent, r.udp.datagrams_lost), (Some(10), 0));
    // Joined before: the first datagrams' loss is loss, whichever arrived first.
    let mut g = Group::new(START);
    feed(&mut g, 8, 1, 50..60);
    g.on_datagram(from(1), Arrival::Landspeed(&end(8, 60)), 2000 * MS);
    let r = &g.report(String::new(), "end").sources[0];
    assert_eq!((r.first_seq, r.udp.datagrams_lost), (0, 50));
}

#[test]
fn senders_are_told_apart_by_address_and_key_and_their_number_is_bounded() {
    let mut g = Group::new(0);
    feed(&mut g, 1, 7, 0..3);
    feed(&mut g, 2, 7, 0..5); // same address, another test
    feed(&mut g, 1, 8, 0..4); // another address
    g.on_datagram(from(7), Arrival::Landspeed(&end(1, 3)), 1);
    assert!(!g.all_ended(), "two of three senders still sending");
    let r = g.report(String::new(), "time");
    let got: Vec<u64> = r.sources.iter().map(|s| s.udp.datagrams_received).collect();
    assert_eq!(got, [3, 5, 4]);
    let mut g = Group::new(0);
    for port in 0..(MAX_SOURCES as u16 + 10) {
        feed(&mut g, 3, port, 0..1);
    }
    let r = g.report(String::new(), "time");
    assert_eq!((r.sources.len(), r.ignored_datagrams), (MAX_SOURCES, 10));
}

#[test]
fn another_tools_datagrams_are_counted_with_its_end_and_not_verified() {
    let mut g = Group::new(0);
    for seq in [0u64, 1, 3] {
        g.on_datagram(
            from(3),
            Arrival::Foreign {
                protocol: "iperf2",
                seq,
                sent_ns: seq * MS,
                len: 1470,
                end_of: (seq == 3).then_some(4),
            },
            seq * MS + 2 * MS,
        );
    }
    g.on_unknown();
    assert!(g.all_ended());
    let r = g.report(String::new(), "end");
    let s = &r.sources[0];
    assert_eq!(
        (s.protocol.as_str(), s.verified, s.key.as_deref()),
        ("iperf2", None, None)
    );
    assert_eq!(
        (
            s.udp.datagrams_sent,
            s.udp.datagrams_received,
            s.udp.datagrams_lost
        ),
        (Some(4), 3, 1)
    );
    assert_eq!(r.unknown_datagrams, 1);
}

#[test]
fn groups_sources_sizes_rates_and_ttls_outside_what_works_are_refused_by_name() {
    let g: SocketAddr = "239.1.1.1:5001".parse().unwrap();
    assert_eq!(check_group(g, None), Ok(()));
    assert_eq!(check_group("[ff15::1]:5001".parse().unwrap(), None), Ok(()));
    assert_eq!(check_group(g, Some("198.18.50.1".parse().unwrap())), Ok(()));
    let e = check_group("198.18.50.1:5001".parse().unwrap(), None).unwrap_err();
    assert!(e.to_string().contains("not a multicast group"), "{e}");
    assert_eq!(
        check_group("239.1.1.1:0".parse().unwrap(), None),
        Err(McSpecError::NoPort)
    );
    for bad in ["fd00::1", "239.2.2.2", "0.0.0.0"] {
        assert!(matches!(
            check_group(g, Some(bad.parse().unwrap())),
            Err(McSpecError::BadSource { .. })
        ));
    }
    assert_eq!(check_sender(1448, 1e6, 1, false), Ok(()));
    assert!(check_sender(20, 1e6, 1, false).is_err());
    assert!(
        check_sender(40, 1e6, 1, true).is_err(),
        "iperf 2's header needs 76 bytes"
    );
    assert!(check_sender(70_000, 1e6, 1, false).is_err());
    assert!(check_sender(1448, 0.0, 1, false).is_err());
    assert!(check_sender(1448, f64::NAN, 1, false).is_err());
    assert_eq!(check_sender(1448, 1e6, 256, false), Err(McSpecError::Ttl(256)));
}

#[test]
fn a_receivers_result_has_each_sender_it_heard_as_a_test_to_this_host() {
    use crate::multicast::record::{received_results, MulticastRecord};
    let mut g = Group::new(0);
    // Sender A: 20 datagrams, 18 and 19 lost; sender B (another key, another port): 5, whole.
    feed(&mut g, 42, 9000, 0..18);
    g.on_datagram(from(9000), Arrival::Landspeed(&end(42, 20)), 2000 * MS);
    feed(&mut g, 43, 9001, 0..5);
    g.on_datagram(from(9001), Arrival::Landspeed(&end(43, 5)), 2000 * MS);
    let rep = g.report("239.1.1.1:5001".into(), "every sender ended");
    let results = received_results(&rep, &crate::endpoint::HostInfo::default());
    assert_eq!(results.len(), 2);
    let a = &results[0];
    assert_eq!(a.protocol, "multicast");
    assert_eq!(a.config.spec.direction, crate::config::Direction::Reverse);
    assert_eq!(a.config.remote_address, "198.18.50.1:9000");
    assert_eq!(a.summary.bytes_received, 18 * LEN as u64);
    assert_eq!(a.summary.bytes_verified, 18 * LEN as u64);
    let udp = a.summary.udp.as_ref().unwrap();
    assert_eq!((udp.datagrams_sent, udp.datagrams_lost), (Some(20), 2));
    assert!((udp.transit.unwrap().min_ms - 5.0).abs() < 1e-9);
    assert!(a.verdict().is_trusted());
    assert!((a.started_unix_s - 1.005).abs() < 1e-9);
    match &a.multicast {
        Some(MulticastRecord::Receiver { group, heard, .. }) => {
            assert_eq!(
                (group.as_str(), heard.key.as_deref()),
                ("239.1.1.1:5001", Some("000000000000002a"))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(results[1].summary.bytes_received, 5 * LEN as u64);
    // Through JSON and back, as the archive keeps it.
    let back: crate::result::RunResult = serde_json::from_str(&serde_json::to_string(a).unwrap()).unwrap();
    assert_eq!(&back, a);
}

#[test]
fn a_corrupt_datagram_makes_the_receivers_result_untrusted_and_a_foreign_one_unverified() {
    use crate::multicast::record::received_results;
    let p = Pattern::new(9);
    let mut g = Group::new(0);
    let mut b = datagram(&p, 0, START);
    b[HEADER_BYTES + 3] ^= 1;
    g.on_datagram(from(1), Arrival::Landspeed(&b), START + MS);
    g.on_datagram(
        from(2),
        Arrival::Foreign {
            protocol: "iperf2",
            seq: 0,
            sent_ns: START,
            len: 1470,
            end_of: None,
        },
        START + MS,
    );
    let results = received_results(&g.report(String::new(), "time"), &Default::default());
    assert!(!results[0].verdict().is_trusted());
    assert_eq!(results[0].summary.corrupt_blocks, 1);
    let foreign = &results[1];
    assert_eq!(foreign.protocol, "iperf2-multicast");
    assert_eq!(foreign.summary.bytes_verified, 0);
    assert!(
        foreign
            .warnings
            .iter()
            .any(|w| w.contains("nothing was verified")),
        "{:?}",
        foreign.warnings
    );
    assert!(
        foreign.warnings.iter().any(|w| w.contains("end did not arrive")),
        "{:?}",
        foreign.warnings
    );
}

#[test]
fn a_senders_result_holds_what_it_sent_and_says_where_the_receivers_figures_are() {
    use crate::multicast::record::{sent_result, MulticastRecord, SentPlan};
    let sent = SendReport {
        protocol: "landspeed".into(),
        group: "239.1.1.1:5001".parse().unwrap(),
        from: "198.18.50.1:40000".parse().unwrap(),
        key: "00000000000000ff".into(),
        ttl: 1,
        datagrams: 1000,
        bytes: 1000 * 1448,
        send_errors: 2,
        first_error: Some("No buffer space available".into()),
        elapsed_s: 2.0,
        rate_bps: 1000.0 * 1448.0 * 8.0 / 2.0,
        started_unix_s: 1_700_000_000.0,
    };
    let plan = SentPlan {
        interface: Some("eth1".into()),
        length: 1448,
        rate_bps: 6e6,
        duration: std::time::Duration::from_secs(2),
        started_unix_s: sent.started_unix_s,
        host: Default::default(),
    };
    let r = sent_result(&sent, plan);
    assert_eq!(
        (r.protocol.as_str(), r.config.spec.direction),
        ("multicast", crate::config::Direction::Forward)
    );
    assert_eq!((r.summary.bytes_sent, r.summary.bytes_received), (1000 * 1448, 0));
    assert_eq!(r.config.spec.payload_key, 0xff);
    assert_eq!(r.config.local_address, "198.18.50.1:40000");
    assert!(
        r.warnings.iter().any(|w| w.contains("no return path")),
        "{:?}",
        r.warnings
    );
    assert!(matches!(&r.multicast, Some(MulticastRecord::Sender { sent: s, .. }) if s.datagrams == 1000));
    // A refused send is a warning (the receivers count it lost), not a failed stream; nothing
    // received is no shortfall.
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.warnings[1].contains("2 sends refused by this host (the first: No buffer space available)"));
    assert!(r.directions.iter().all(|d| d.limits.is_empty()), "not judged");
    assert!(r.verdict().is_trusted(), "{:?}", r.verdict());
}
