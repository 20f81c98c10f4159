use super::*;
use crate::unhex;
use proptest::prelude::*;

/// iperf 2.1.8's first request of `iperf -c ... --bounceback=3 -t 1.2` (default 100 bytes), as a
/// listener read it: header, then the fill and iperf 2's digit pattern.
const CAPTURED: &str = "00800000000000640000000180005a5a000000006b10b18900026b3bffffffffffffffffffffffffffffffff000000005a5a5a5a5a5a5a5a5a5a5a5a30313233";

/// `--bounceback=2 --bounceback-hold 1 --trip-times -S 0x10`: the flags say quick ACKs, synced
/// clocks and a type of service; the hold is 1,000 µs.
const CAPTURED_HOLD: &str = "008000000000006400000001e0000010000000006b10b46f00008a8cffffffffffffffffffffffffffffffff000003e85a5a5a5a5a5a5a5a5a5a5a5a30313233";

#[test]
fn iperf2s_request_reads_field_by_field() {
    let b = Bounce::parse(&unhex(CAPTURED)).unwrap();
    assert_eq!(b.size, 100);
    assert_eq!(b.id, 1);
    assert_eq!(b.flags, bbflags::QUICKACK);
    assert_eq!(
        b.client_tx,
        WireTime {
            secs: 0x6b10_b189,
            micros: 0x0002_6b3b
        }
    );
    assert_eq!(b.server_rx, UNSET);
    assert_eq!(b.server_tx, UNSET);
    assert_eq!(b.hold_us, 0);
    let h = Bounce::parse(&unhex(CAPTURED_HOLD)).unwrap();
    assert!(h.has(bbflags::CLOCK_SYNCED) && h.has(bbflags::TOS) && h.has(bbflags::QUICKACK));
    assert!(!h.has(bbflags::STOP));
    assert_eq!((h.tos, h.hold_us), (0x10, 1000));
}

#[test]
fn a_request_is_written_as_iperf2_writes_it() {
    let raw = unhex(CAPTURED);
    let b = Bounce::parse(&raw).unwrap();
    let mut out = raw.clone();
    out[..FIELDS_BYTES].fill(0);
    b.write(&mut out);
    assert_eq!(out, raw);
    let made = Bounce::request(100, 1, bbflags::QUICKACK, b.client_tx, 0);
    assert_eq!(made, b);
}

#[test]
fn the_servers_stamps_land_where_iperf2s_client_reads_them() {
    let mut raw = unhex(CAPTURED);
    stamp_received(&mut raw, WireTime { secs: 7, micros: 8 });
    stamp_answered(&mut raw, WireTime { secs: 9, micros: 10 });
    let (rx, tx) = server_times(&raw).unwrap();
    assert_eq!((rx.secs, rx.micros, tx.secs, tx.micros), (7, 8, 9, 10));
    // Nothing else moved.
    let b = Bounce::parse(&raw).unwrap();
    assert_eq!((b.size, b.id, b.hold_us), (100, 1, 0));
}

#[test]
fn requests_outside_the_servers_bounds_are_refused_by_name() {
    let mut raw = unhex(CAPTURED);
    raw[4..8].copy_from_slice(&63u32.to_be_bytes());
    assert_eq!(Bounce::parse(&raw), Err(BounceError::Size(63)));
    raw[4..8].copy_from_slice(&(MAX_REQUEST_BYTES + 1).to_be_bytes());
    assert_eq!(Bounce::parse(&raw), Err(BounceError::Size(MAX_REQUEST_BYTES + 1)));
    raw[4..8].copy_from_slice(&100u32.to_be_bytes());
    raw[44..48].copy_from_slice(&(MAX_HOLD_US + 1).to_be_bytes());
    assert_eq!(Bounce::parse(&raw), Err(BounceError::Hold(MAX_HOLD_US + 1)));
    assert_eq!(Bounce::parse(&raw[..63]), Err(BounceError::Short(63)));
    raw[0] = 0x40;
    assert!(matches!(Bounce::parse(&raw), Err(BounceError::NotBounceback(_))));
}

#[test]
fn only_the_flag_word_reads_as_bounceback() {
    assert_eq!(detect(&[]), None);
    assert_eq!(detect(&[0, 0x80]), None);
    assert_eq!(detect(&unhex(CAPTURED)[..4]), Some(true));
    // iperf 2's test header (-n 8K), an iperf 3 cookie, landspeed's preamble.
    assert_eq!(detect(&unhex("40010078")), Some(false));
    assert_eq!(detect(b"abcdefgh"), Some(false));
    assert_eq!(detect(b"LSPD"), Some(false));
    assert_eq!(detect(&[0, 0x80, 0, 1]), Some(false));
}

proptest! {
    #[test]
    fn no_input_panics_the_reader(b in proptest::collection::vec(any::<u8>(), 0..130)) {
        let _ = Bounce::parse(&b);
        let _ = detect(&b);
        let _ = server_times(&b);
    }

    #[test]
    fn a_header_written_reads_back(size in 64u32..=MAX_REQUEST_BYTES, id: u32, flags: u16,
                                   secs: u32, micros: u32, hold in 0..=MAX_HOLD_US) {
        let b = Bounce::request(size, id, flags, WireTime { secs, micros }, hold);
        let mut out = vec![0u8; HEADER_BYTES];
        b.write(&mut out);
        prop_assert_eq!(Bounce::parse(&out), Ok(b));
    }
}
