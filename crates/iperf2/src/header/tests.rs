//! Captures of iperf 2.1.8 (Debian's `iperf`) on loopback, each command line's header as it sent
//! it (`iperf -c 127.0.0.1 ARGS` against a socket that kept the first bytes): parsed, read field by
//! field, and written back byte for byte.

use super::*;
use crate::detect::{self, FirstBytes};
use crate::udp::{Datagram, PREFIX_BYTES};
use proptest::prelude::*;

const CAPTURES: &[(&str, &str)] = &[
    // iperf 2.1.8: tcp -n 8K
    ("tcp -n 8K", "40010078000000010000176f000000000000000000002000000000000000000000000000000200010008000300000000000000000000000000000000"),
    // iperf 2.1.8: tcp -t 1 -b 1M
    ("tcp -t 1 -b 1M", "40010078000000010000176f0000000000000000ffffff9c000000000000000000000000000200010008000300000000001000000000000000000000"),
    // iperf 2.1.8: tcp -n 8K -l 1000 -P 2
    ("tcp -n 8K -l 1000 -P 2", "40010078000000020000176f000003e80000000000002000000000000000000000000000000200010008000300000000000000000000000000000000"),
    // iperf 2.1.8: tcp -n 8K --trip-times
    ("tcp -n 8K --trip-times", "400100a0000000010000176f000000000000000000002000000000000000000000100000000200010008000300000000000000000000000000000000000000006b1034090009b0060000000000000000"),
    // iperf 2.1.8: tcp -n 8K -r
    ("tcp -n 8K -r", "c0010078000000010000176f000000000000000000002000000000000000000000000000000200010008000300000000000000000000000000000000"),
    // iperf 2.1.8: tcp -n 8K -d
    ("tcp -n 8K -d", "c0010079000000010000176f000000000000000000002000000000000000000000000000000200010008000300000000000000000000000000000000"),
    // iperf 2.1.8: tcp -n 8K --full-duplex
    ("tcp -n 8K --full-duplex", "44010078000000010000176f000000000000000000002000000000000000000008000000000200010008000300000000000000000000000000000000"),
    // iperf 2.1.8: tcp -n 8K -R
    ("tcp -n 8K -R", "44010078000000010000176f000000000000000000002000000000000000000004000000000200010008000300000000000000000000000000000000"),
    // iperf 2.1.8: tcp -t 1 --isochronous=10:200k,0 (to port 5302; each frame then a burst)
    ("tcp -t 1 --isochronous=10:200k,0", "400100a000000001000014b60000000000000000ffffff9c000000000000000000010000000200010008000300000000000000000000000000000000000000006b1495cd000dbaa80000000000000000"),
    // iperf 2.1.8: udp -u -n 4K
    ("udp -u -n 4K", "000000016b10376400057ee60000000048010098000000010000176e000000000000000000001000000000000000000000000000000200010008000300000000001000000000000000000000"),
    // iperf 2.1.8: udp -u -n 4K (its last datagram)
    ("udp -u -n 4K (its last datagram)", "ffffff346b1037640005d729ffffffff"),
    // iperf 2.1.8: udp -u -t 1 -b 100K -l 200
    ("udp -u -t 1 -b 100K -l 200", "000000016b103769000ea3600000000048010098000000010000176e000000c800000000ffffff9c000000000000000000000000000200010008000300000000000190000000000000000000"),
    // iperf 2.1.8: udp -u -t 1 -b 100K -l 200 (its last datagram)
    ("udp -u -t 1 -b 100K -l 200 (its last datagram)", "fffffef56b10376a000ee1ccffffffff"),
    // iperf 2.1.8: udp -u -n 4K --trip-times
    ("udp -u -n 4K --trip-times", "000000016b10377000085f3e00000000680100d8000000010000176e0000000000000000000010000000000000000000001000000002000100080003000000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000"),
    // iperf 2.1.8: udp -u -n 4K --trip-times (its last datagram)
    ("udp -u -n 4K --trip-times (its last datagram)", "ffffff346b1037700008b767ffffffff"),
    // iperf 2.1.8: udp -u -n 4K --isochronous 60:100k,10k
    ("udp -u -n 4K --isochronous 60:100k,10k", "000000016b1037760002802100000000680100d8000000010000176e0000000000000000000010000000000000000000000100000002000100080003000000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000"),
    // iperf 2.1.8: udp -u -n 4K --isochronous 60:100k,10k (its last datagram)
    ("udp -u -n 4K --isochronous 60:100k,10k (its last datagram)", "ffffff346b10377600028154ffffffff"),
    // iperf 2.1.8: udp -u -n 4K -r
    ("udp -u -n 4K -r", "000000016b10377b000b716100000000c8010098000000010000176e000000000000000000001000000000000000000000000000000200010008000300000000001000000000000000000000"),
    // iperf 2.1.8: udp -u -n 4K -r (its last datagram)
    ("udp -u -n 4K -r (its last datagram)", "ffffff346b10377b000bc9b5ffffffff"),
];

fn capture(name: &str) -> Vec<u8> {
    crate::unhex(CAPTURES.iter().find(|(n, _)| *n == name).unwrap().1)
}

pub(crate) fn tcp(name: &str) -> ClientHeader {
    let b = capture(name);
    let (h, used) = ClientHeader::parse(&b, 0).unwrap();
    assert_eq!(used, b.len(), "{name}");
    assert_eq!(h.encode(), b, "{name}: written back byte for byte");
    h
}

/// The UDP datagram's prefix and header; both written back byte for byte.
pub(crate) fn udp(name: &str) -> (Datagram, ClientHeader) {
    let b = capture(name);
    let (h, used) = ClientHeader::parse(&b[PREFIX_BYTES..], PREFIX_BYTES).unwrap();
    assert_eq!(PREFIX_BYTES + used, b.len(), "{name}");
    let seq64 = h.flags & flags::SEQNO64B != 0;
    let d = Datagram::parse(&b, seq64).unwrap();
    let mut again = d.encode(seq64).to_vec();
    again.extend(h.encode());
    assert_eq!(again, b, "{name}: written back byte for byte");
    (d, h)
}

const IPERF_2_1_8: Version = Version {
    major: 2,
    minor: 1,
    patch: 8,
    release: 3,
};

#[test]
fn a_tcp_clients_header_says_its_streams_port_amount_and_version() {
    let h = tcp("tcp -n 8K");
    assert_eq!((h.threads, h.port, h.buffer_len), (1, 5999, 0));
    assert_eq!(h.amount, Amount::Bytes(8192));
    let e = h.extension.unwrap();
    assert_eq!((e.version, e.rate_bps, e.upper, e.lower), (IPERF_2_1_8, 0, 0, 0));
    assert_eq!((h.dual(), h.rest.len()), (None, 0));
    let h = tcp("tcp -t 1 -b 1M");
    assert_eq!(h.amount, Amount::Centiseconds(100));
    assert_eq!(h.amount.duration(), Some(Duration::from_secs(1)));
    assert_eq!(h.extension.unwrap().rate_bps, 1 << 20);
    let h = tcp("tcp -n 8K -l 1000 -P 2");
    assert_eq!((h.threads, h.buffer_len), (2, 1000));
}

#[test]
fn each_way_of_testing_both_directions_has_its_own_bits() {
    assert_eq!(tcp("tcp -n 8K -r").dual(), Some(Dual::Tradeoff));
    assert_eq!(tcp("tcp -n 8K -d").dual(), Some(Dual::Simultaneous));
    let r = tcp("tcp -n 8K -R");
    assert!(r.has(upper::REVERSE) && !r.has(upper::FULLDUPLEX) && r.dual().is_none());
    let f = tcp("tcp -n 8K --full-duplex");
    assert!(f.has(upper::FULLDUPLEX) && !f.has(upper::REVERSE));
    assert!(r.flags & flags::VERSION2 != 0 && f.flags & flags::VERSION2 != 0);
    // Trip times: a longer header (80 bytes), the start time kept in what follows the extension.
    let t = tcp("tcp -n 8K --trip-times");
    assert!(t.has(upper::TRIPTIME));
    assert_eq!(t.rest.len(), 20);
}

#[test]
fn every_udp_datagram_carries_its_sequence_send_time_and_the_header() {
    let (d, h) = udp("udp -u -n 4K");
    assert_eq!((d.seq, d.is_fin()), (1, false));
    assert!(h.flags & flags::SEQNO64B != 0);
    assert_eq!((h.port, h.amount), (5998, Amount::Bytes(4096)));
    assert_eq!(
        h.extension.unwrap().rate_bps,
        1 << 20,
        "UDP's default 1 Mbit/s is sent"
    );
    let (_, h) = udp("udp -u -t 1 -b 100K -l 200");
    assert_eq!(
        (h.buffer_len, h.amount.duration()),
        (200, Some(Duration::from_secs(1)))
    );
    assert_eq!(h.extension.unwrap().rate_bps, 102_400);
    let (_, h) = udp("udp -u -n 4K --trip-times");
    assert!(h.has(upper::TRIPTIME) && h.flags & flags::UDPTESTS != 0);
    let (_, h) = udp("udp -u -n 4K --isochronous 60:100k,10k");
    assert!(h.has(upper::ISOCH) && !h.has(upper::TRIPTIME));
    assert_eq!(udp("udp -u -n 4K -r").1.dual(), Some(Dual::Tradeoff));
}

#[test]
fn a_udp_test_ends_with_negative_sequence_numbers_in_64_bits() {
    for (name, last) in [
        ("udp -u -n 4K (its last datagram)", -204),
        ("udp -u -t 1 -b 100K -l 200 (its last datagram)", -267),
    ] {
        let b = capture(name);
        let d = Datagram::parse(&b, true).unwrap();
        assert_eq!((d.seq, d.is_fin()), (last, true), "{name}");
        assert_eq!(d.encode(true).to_vec(), b);
        // Read as 32 bits (a client without SEQNO64B), the same number.
        assert_eq!(Datagram::parse(&b, false).unwrap().seq, last);
    }
}

#[test]
fn the_first_bytes_of_an_iperf2_client_are_told_from_iperf3s_and_landspeeds() {
    for (name, _) in CAPTURES.iter().filter(|(n, _)| n.starts_with("tcp")) {
        let b = capture(name);
        assert_eq!(
            detect::tcp(&b),
            FirstBytes::Iperf2 {
                header_bytes: b.len()
            },
            "{name}"
        );
        assert_eq!(detect::tcp(&b[..11]), FirstBytes::NeedMore);
    }
    // An iperf 3 cookie (36 characters of [a-z2-7] and a NUL), landspeed's preamble, HTTP.
    let cookie = b"abcdefghijklmnopqrstuvwxyz2345672345\0";
    assert_eq!(detect::tcp(cookie), FirstBytes::Other);
    assert_eq!(
        detect::tcp(b"LSPD\x00\x01\x00\x01\x00\x00\x00\x00"),
        FirstBytes::Other
    );
    assert_eq!(detect::tcp(b"GET / HTTP/1.1\r\n"), FirstBytes::Other);
    assert_eq!(detect::tcp(&[0u8; 12]), FirstBytes::Other);
}

#[test]
fn a_header_that_is_none_or_cut_short_says_so() {
    assert_eq!(
        ClientHeader::parse(&[0, 0, 0, 0], 0),
        Err(HeaderError::NoHeader(0))
    );
    let b = capture("tcp -n 8K");
    assert_eq!(
        ClientHeader::parse(&b[..40], 0),
        Err(HeaderError::Short { got: 40, need: 60 })
    );
    // Declared 10 bytes, with an extension (24 + 36) announced.
    let mut lying = b.clone();
    lying[3] = 20;
    assert_eq!(
        ClientHeader::parse(&lying, 0),
        Err(HeaderError::TooShortDeclared {
            declared: 10,
            need: 60
        })
    );
    assert_eq!(
        ClientHeader::parse(&b, PREFIX_BYTES).unwrap_err(),
        HeaderError::TooShortDeclared {
            declared: 60,
            need: 76
        },
        "a TCP header read as a datagram's"
    );
}

proptest! {
    #[test]
    fn no_bytes_make_the_readers_panic(b in proptest::collection::vec(any::<u8>(), 0..300), prefix in 0usize..20) {
        let _ = ClientHeader::parse(&b, prefix);
        let _ = Datagram::parse(&b, prefix % 2 == 0);
        let _ = detect::tcp(&b);
    }

    #[test]
    fn a_header_written_reads_back_the_same(
        threads in 1u32..1000, port in any::<u16>(), buffer in any::<u32>(), band in any::<i32>(),
        bytes in any::<bool>(), amount in 1u32..=0x8000_0000, upper_bits in any::<u16>(),
        rate in any::<u64>(), rest in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let len = (V1_BYTES + EXTENSION_BYTES + rest.len()) as u32;
        let h = ClientHeader {
            flags: flags::EXTEND | flags::LEN_BIT | (len << 1),
            threads, port, buffer_len: buffer, window_band: band,
            // Bytes 0..2^31, time 1..=2^31 centiseconds: every amount the wire holds.
            amount: if bytes { Amount::Bytes(amount - 1) } else { Amount::Centiseconds(amount) },
            extension: Some(Extension {
                type_len: (0, 0), upper: upper_bits, lower: 0, version: IPERF_2_1_8,
                reserved: 0, tos: 0, rate_bps: rate, write_prefetch: 0,
            }),
            rest,
        };
        let b = h.encode();
        prop_assert_eq!(ClientHeader::parse(&b, 0), Ok((h, b.len())));
    }
}

#[test]
fn a_udp_datagram_is_told_as_iperf2s_by_its_prefix_and_header() {
    for name in [
        "udp -u -n 4K",
        "udp -u -t 1 -b 100K -l 200",
        "udp -u -n 4K --trip-times",
    ] {
        let b = capture(name);
        let (d, h) = detect::udp(&b).unwrap_or_else(|| panic!("{name}"));
        assert_eq!((d.seq, h.threads), (1, 1), "{name}");
        // Its data after the header (iperf 2 fills the datagram to -l) changes nothing.
        let mut padded = b.clone();
        padded.resize(1470, b'7');
        assert!(detect::udp(&padded).is_some(), "{name}");
    }
    // The end (a negative number), a short datagram, landspeed's and iperf3's hellos: not a test.
    assert!(detect::udp(&capture("udp -u -n 4K (its last datagram)")).is_none());
    assert!(detect::udp(&[0; 20]).is_none());
    assert!(detect::udp(b"9876").is_none());
}

#[test]
fn a_trip_times_client_gets_the_servers_echo_of_its_header_before_the_bursts() {
    // iperf 2.1.8's client `-c -t 1 -R --trip-times -b 50M` (then `--full-duplex`) and what iperf
    // 2.1.8's server sent first on the connection (captured on loopback): the header again, the
    // rate cleared, the server's start time in place of the client's; with -R without VERSION2 and
    // REVERSE.
    let cases = [
        (
            "440100a000000001000014ba0000000000000000ffffff9c000000000000000004100000000200010008000300000000032000000000000000000000000000006b13d7da0005f0ba0000000000000000",
            "400100a000000001000014ba0000000000000000ffffff9c000000000000000000100000000200010008000300000000000000000000000000000000000000006b13d7e00007d24f0000000000000000",
        ),
        (
            "440100a000000001000014ba0000000000000000ffffff9c000000000000000008100000000200010008000300000000032000000000000000000000000000006b13d7f00002a9120000000000000000",
            "440100a000000001000014ba0000000000000000ffffff9c000000000000000008100000000200010008000300000000000000000000000000000000000000006b13d7f60004615c0000000000000000",
        ),
    ];
    for (client, server) in cases {
        let (h, _) = ClientHeader::parse(&crate::unhex(client), 0).unwrap();
        let (s, _) = ClientHeader::parse(&crate::unhex(server), 0).unwrap();
        let start = s.start_time().unwrap();
        assert!(
            [0x6b13_d7da, 0x6b13_d7f0].contains(&h.start_time().unwrap().secs),
            "the client's start"
        );
        assert_eq!(h.sender_echo(start), crate::unhex(server));
    }
}

/// iperf 2.1.8's `tcp -n 8K --txstart-time 1796573226.25` (its `%ld.%6ld` reads ".25" as 25 µs),
/// then with `--trip-times`: the start time's words hold the scheduled start, flagged EPOCH_START.
const TXSTART: &str = "400100a000000001000014f6000000000000000000002000000000000000000010000000000200010008000300000000000000000000000000000000000000006b15882a000000190000000000000000";
const TXSTART_TRIPS: &str = "400100a000000001000014f6000000000000000000002000000000000000000010100000000200010008000300000000000000000000000000000000000000006b15882a000000000000000000000000";

#[test]
fn a_scheduled_start_is_read_and_written_as_iperf2_writes_it() {
    let bytes = |h: &str| crate::unhex(h);
    let (h, _) = ClientHeader::parse(&bytes(TXSTART), 0).unwrap();
    let at = crate::ack::WireTime {
        secs: 0x6b15_882a,
        micros: 25,
    };
    assert_eq!(h.epoch_start(), Some(at));
    assert!(h.tcp_plan(0).is_ok());
    // The same client unscheduled, then scheduled: 2.1.8's bytes.
    let plain = "40010078000000010000176f000000000000000000002000000000000000000000000000000200010008000300000000000000000000000000000000";
    let (mut p, _) = ClientHeader::parse(&bytes(plain), 0).unwrap();
    p.port = 0x14f6;
    assert_eq!(p.epoch_start(), None);
    assert_eq!(p.scheduled(at).encode(), bytes(TXSTART));
    // With trip times the start's words are there already; the flag is added to TRIPTIME's.
    let (t, _) = ClientHeader::parse(&bytes(TXSTART_TRIPS), 0).unwrap();
    assert!(t.has(upper::TRIPTIME));
    assert_eq!(t.epoch_start().map(|w| w.secs), Some(0x6b15_882a));
    let (timed, _) = ClientHeader::parse(&bytes(TXSTART_TRIPS), 0).unwrap();
    let mut unflagged = timed.clone();
    unflagged.extension.as_mut().unwrap().upper &= !upper::EPOCH_START;
    assert_eq!(unflagged.scheduled(timed.epoch_start().unwrap()), timed);
}

/// iperf 2.1.8's headers (captured 2026-12-07, `-t 1` to port 5993) with `--tcp-write-prefetch`
/// and `--tcp-quickack`: `-R --tcp-write-prefetch 64K`, `--tcp-quickack`, `-R --tcp-quickack`
/// and `--full-duplex --tcp-quickack --tcp-write-prefetch 1000`.
const PREFETCH_R: &str = "4401007800000001000017690000000000000000ffffff9c000000000000000044000000000200010008000300000000000000000000000000010000";
const QUICKACK: &str = "4001007800000001000017690000000000000000ffffff9c000000000000000080000000000200010008000300000000000000000000000000000000";
const QUICKACK_R: &str = "4401007800000001000017690000000000000000ffffff9c000000000000000004000000000200010008000300000000000000000000000000000000";
const BOTH_FULL_DUPLEX: &str = "4401007800000001000017690000000000000000ffffff9c0000000000000000c80000000002000100080003000000000000000000000000000003e8";

#[test]
fn write_prefetch_and_quickack_are_asked_as_iperf2_asks_them() {
    let read = |h: &str| ClientHeader::parse(&crate::unhex(h), 0).unwrap().0;
    let (prefetch_r, quickack, quickack_r, both) = (
        read(PREFETCH_R),
        read(QUICKACK),
        read(QUICKACK_R),
        read(BOTH_FULL_DUPLEX),
    );
    assert_eq!(prefetch_r.write_prefetch(), Some(65_536));
    assert!(!prefetch_r.has(upper::TCPQUICKACK));
    assert_eq!(
        (quickack.write_prefetch(), quickack.has(upper::TCPQUICKACK)),
        (None, true)
    );
    assert!(!quickack_r.has(upper::TCPQUICKACK));
    assert_eq!(
        (both.write_prefetch(), both.has(upper::TCPQUICKACK)),
        (Some(1000), true)
    );
    // Each written from the same header without the asks: 2.1.8's bytes (the prefetch is not
    // asked where the server only receives, quickack not where it only sends).
    let plain = |h: &ClientHeader| {
        let mut p = h.clone();
        let e = p.extension.as_mut().unwrap();
        e.upper &= !(upper::WRITEPREFETCH | upper::TCPQUICKACK);
        e.write_prefetch = 0;
        p
    };
    assert_eq!(plain(&prefetch_r).asking(Some(65_536), false), prefetch_r);
    assert_eq!(plain(&quickack).asking(Some(4096), true), quickack);
    assert_eq!(plain(&quickack_r).asking(None, true), quickack_r);
    assert_eq!(plain(&both).asking(Some(1000), true), both);
}

/// iperf 2.1.8's `-t 1 -R --fq-rate 100m` header (captured 2026-12-07): FQRATESET, the start time
/// and then the pace, 12,500,000 bytes a second, no `-b` rate.
const FQ_R: &str = "440100a000000001000017690000000000000000ffffff9c000000000000000006000000000200010008000300000000000000000000000000000000000000006b167f800008b36d00bebc2000000000";

#[test]
fn an_fq_rate_is_read_and_written_as_iperf2_writes_it() {
    let (h, _) = ClientHeader::parse(&crate::unhex(FQ_R), 0).unwrap();
    assert_eq!(h.fq_rate_bytes_per_s(), Some(12_500_000));
    let plan = h.tcp_plan(0).unwrap();
    assert_eq!(plan.spec.direction, landspeed_core::config::Direction::Reverse);
    assert_eq!(plan.spec.fq_rate_bps, Some(100e6));
    // The same header without the pace, paced again: 2.1.8's bytes.
    let mut plain = h.clone();
    plain.extension.as_mut().unwrap().upper &= !upper::FQRATESET;
    plain.rest[12..20].fill(0);
    assert_eq!(plain.fq_rate_bytes_per_s(), None);
    assert_eq!(plain.paced(12_500_000), h);
    // A header that had no room for it (no start time) is lengthened to 2.1.8's 80 bytes; beside
    // a -b rate the lower of the two paces the server.
    let mut short = tcp("tcp -n 8K -R");
    short.extension.as_mut().unwrap().rate_bps = 50_000_000;
    let paced = short.clone().paced(12_500_000);
    assert_eq!(
        (paced.encode().len(), paced.fq_rate_bytes_per_s()),
        (80, Some(12_500_000))
    );
    assert_eq!(paced.extension.unwrap().rate_bps, 0, "the pace is the rate");
    let mut both = paced.clone();
    both.extension.as_mut().unwrap().rate_bps = 50_000_000;
    assert_eq!(both.tcp_plan(0).unwrap().spec.fq_rate_bps, Some(50e6));
}

/// iperf 2.1.8's first datagram of `-u -t 1 --trip-times -l 64` (captured 2026-12-07): its small
/// form, the prefix (number 1, the send time) and the flags word alone, then its payload.
const SMALL_TRIPS: &str = "000000016b1682de000db69300000000000200003031323334353637383930313233343536373839303132333435363738393031323334353637383930313233";

#[test]
fn a_small_trip_times_datagram_opens_a_timed_udp_test() {
    let b = crate::unhex(SMALL_TRIPS);
    let (d, h) = detect::udp(&b).expect("iperf 2's small form");
    assert_eq!(d.seq, 1);
    assert!(h.is_small_trip_times() && h.has(upper::TRIPTIME));
    let spec = h.udp_plan(0).unwrap();
    assert_eq!((spec.length_bytes, spec.trip_times, spec.streams), (64, true, 1));
    assert_eq!(spec.direction, landspeed_core::config::Direction::Forward);
    // 128 bytes and more carry the header: such a datagram in the small form is no iperf 2's.
    let mut long = b.clone();
    long.resize(128, b'0');
    assert!(detect::udp(&long).is_none());
    // An end (negative number) opens nothing; a 64-bit number's upper word must be 0.
    let mut end = b.clone();
    end[..4].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(detect::udp(&end).is_none());
    let mut wide = b;
    wide[15] = 1;
    assert!(detect::udp(&wide).is_none());
}
