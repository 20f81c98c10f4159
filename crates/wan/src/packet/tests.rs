use super::*;

fn sum(words: &[u8]) -> u32 {
    words
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

/// An IPv4 TCP or UDP packet with a correct checksum.
fn v4(proto: u8, payload: &[u8]) -> Vec<u8> {
    let thl = if proto == 6 { 20 } else { 8 };
    let total = 20 + thl + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&[198, 18, 0, 1]);
    p[16..20].copy_from_slice(&[198, 18, 0, 2]);
    p[20..22].copy_from_slice(&5201u16.to_be_bytes());
    p[22..24].copy_from_slice(&40000u16.to_be_bytes());
    if proto == 6 {
        p[32] = 5 << 4;
    } else {
        p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    }
    p[20 + thl..].copy_from_slice(payload);
    let len = (total - 20) as u32;
    let s = sum(&p[12..20]) + u32::from(proto) + len + sum(&p[20..]);
    let ck = !fold(s);
    let at = 20 + if proto == 6 { 16 } else { 6 };
    p[at..at + 2].copy_from_slice(&ck.to_be_bytes());
    p
}

/// The same as IPv6.
fn v6(proto: u8, payload: &[u8]) -> Vec<u8> {
    let p4 = v4(proto, payload);
    let seg = &p4[20..];
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(seg.len() as u16).to_be_bytes());
    p[6] = proto;
    p[7] = 64;
    p[8..24].copy_from_slice(&[0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p[24..40].copy_from_slice(&[0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    p.extend_from_slice(seg);
    let ck_at = 40 + if proto == 6 { 16 } else { 6 };
    p[ck_at..ck_at + 2].copy_from_slice(&[0, 0]);
    let s = sum(&p[8..40]) + u32::from(proto) + seg.len() as u32 + sum(&p[40..]);
    p[ck_at..ck_at + 2].copy_from_slice(&(!fold(s)).to_be_bytes());
    p
}

#[test]
fn builders_make_valid_packets() {
    for mut p in [v4(6, b"hello"), v4(17, b"odd"), v6(6, b"x"), v6(17, b"12345678")] {
        assert_eq!(transport_checksum_ok(&p), Some(true));
        *p.last_mut().unwrap() ^= 1;
        assert_eq!(transport_checksum_ok(&p), Some(false), "a damaged byte is seen");
    }
}

#[test]
fn corruption_changes_one_payload_bit_and_keeps_the_checksum_valid() {
    let payload: Vec<u8> = (0..1001u32).map(|i| (i * 7) as u8).collect();
    for make in [v4, v6] {
        for proto in [6u8, 17] {
            let good = make(proto, &payload);
            let t = transport(&good).unwrap();
            for r in [0u64, 1, 999, 1000, 12345 << 40, u64::MAX] {
                let mut bad = good.clone();
                let at = corrupt_payload(&mut bad, r, false).unwrap();
                assert!(at >= t.payload && at < t.end);
                let diff: Vec<usize> = (0..good.len()).filter(|&i| good[i] != bad[i]).collect();
                // The damaged byte, plus the checksum's two bytes.
                assert!(diff.contains(&at));
                assert!(diff.iter().all(|&i| i == at || i >= t.start && i < t.payload));
                assert_eq!((good[at] ^ bad[at]).count_ones(), 1);
                assert_eq!(transport_checksum_ok(&bad), Some(true), "proto {proto} r {r}");
            }
        }
    }
}

#[test]
fn packets_without_payload_or_unknown_are_left_alone() {
    let mut ack = v4(6, b"");
    assert_eq!(corrupt_payload(&mut ack, 5, false), None);
    let mut icmp = v4(6, b"abc");
    icmp[9] = 1;
    assert_eq!(corrupt_payload(&mut icmp, 5, false), None);
    assert_eq!(transport(&[0x45, 0, 0]), None);
    assert_eq!(transport(&[]), None);
    let mut short = v4(6, b"abc");
    short[2..4].copy_from_slice(&9999u16.to_be_bytes());
    assert_eq!(transport(&short), None);
}

#[test]
fn marking_ce_sets_both_ecn_bits_and_keeps_the_ipv4_header_checksum_right() {
    let mut p = v4(6, b"data");
    p[1] = 0b10; // ECT(0)
    let header_sum = |p: &[u8]| fold(sum(&p[..20]));
    let ck = !fold(sum(&p[..20]));
    p[10..12].copy_from_slice(&ck.to_be_bytes());
    assert_eq!(header_sum(&p), 0xffff);
    assert_eq!(ecn(&p), Some(2));
    assert!(mark_ce(&mut p));
    assert_eq!(ecn(&p), Some(3));
    assert_eq!(header_sum(&p), 0xffff, "the header checksum still adds up");
    // Not ECN-capable: left alone.
    let mut plain = v4(6, b"data");
    assert!(!mark_ce(&mut plain));
    assert_eq!(ecn(&plain), Some(0));
    // IPv6: the traffic class's low bits, no header checksum.
    let mut p6 = v6(17, b"x");
    p6[1] |= 0b01 << 4; // ECT(1)
    assert!(mark_ce(&mut p6));
    assert_eq!(ecn(&p6), Some(3));
}

#[test]
fn echo_requests_are_told_from_replies_and_from_other_datagrams() {
    let mut probe = b"LSPE\x00\x00\x00\x00".to_vec();
    probe.resize(32, 0);
    assert!(is_echo_request(&v4(17, &probe)));
    assert!(is_echo_request(&v6(17, &probe)));
    probe[4] = 1; // a reply
    assert!(!is_echo_request(&v4(17, &probe)));
    assert!(!is_echo_request(&v4(17, b"LSPD stream hello")));
    assert!(!is_echo_request(&v4(6, b"LSPE\x00 over TCP")));
}

#[test]
fn a_tcp_header_shorter_than_twenty_bytes_is_not_read() {
    let mut p = v4(6, &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(transport(&p).is_some());
    p[32] = 4 << 4; // a data offset of 16 bytes
    assert_eq!(transport(&p), None);
    assert_eq!(corrupt_payload(&mut p, 5, false), None);
}
