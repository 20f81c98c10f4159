use super::testing::{complete, train, OPTIONS};
use super::*;
use crate::packet::transport_checksum_ok;

/// Segments `i..j` of `frame` as one frame: the head, then the payload.
fn part(t: &Train, frame: &[u8], i: usize, j: usize) -> Vec<u8> {
    let mut out = Vec::new();
    t.head(frame, i, j, &mut out);
    out.extend_from_slice(&frame[t.payload(i, j)]);
    out
}

fn seq(ip: &[u8], tcp: usize) -> u32 {
    u32::from_be_bytes([ip[tcp + 4], ip[tcp + 5], ip[tcp + 6], ip[tcp + 7]])
}

#[test]
fn a_single_packet_is_not_a_train_and_a_udp_train_is_refused() {
    let mut f = train(false, 100, 1448, 0x18);
    f[1] = GSO_NONE;
    assert_eq!(Train::of(&f), Ok(None));
    f[1] = 5; // UDP_L4
    assert_eq!(Train::of(&f), Err(BadTrain::Kind));
    let tiny = train(false, 5000, MIN_SEGMENT - 1, 0x10);
    assert_eq!(
        Train::of(&tiny),
        Err(BadTrain::Kind),
        "segments below TCP's smallest MSS"
    );
    assert!(Train::of(&train(false, 5000, MIN_SEGMENT, 0x10))
        .unwrap()
        .is_some());
    let mut v6_said_v4 = train(true, 5000, 1448, 0x10);
    v6_said_v4[1] = GSO_TCPV4;
    assert_eq!(Train::of(&v6_said_v4), Err(BadTrain::Headers));
    let mut short_tcp = train(false, 5000, 1448, 0x10);
    short_tcp[VNET_LEN + 20 + 12] = 4 << 4; // a data offset of 16 bytes: shorter than any TCP header
    assert_eq!(Train::of(&short_tcp), Err(BadTrain::Headers));
    let mut g = train(false, 5000, 1448, 0x10);
    g.truncate(g.len() - 1); // the IP length says one byte more than there is
    assert_eq!(Train::of(&g), Err(BadTrain::Headers));
}

#[test]
fn every_part_of_a_train_has_the_headers_the_kernel_s_segmentation_gives() {
    for v6 in [false, true] {
        for (payload, mss) in [
            (5 * 1448 + 100, 1448u16),
            (4 * 8948, 8948),
            (1448, 1448),
            (64_000 - 72, 1448),
        ] {
            let frame = train(v6, payload, mss, 0x80 | 0x18 | 0x01); // CWR, PSH, ACK, FIN
            let t = Train::of(&frame).unwrap().unwrap();
            assert_eq!(t.segments, payload.div_ceil(usize::from(mss)));
            let l3 = if v6 { 40 } else { 20 };
            let mut joined = Vec::new();
            for i in 0..t.segments {
                for j in i + 1..=t.segments {
                    let p = part(&t, &frame, i, j);
                    let v = Vnet::parse(&p).unwrap();
                    assert_eq!(v.gso_type != GSO_NONE, j - i > 1, "{i}..{j}");
                    let mut ip = p[VNET_LEN..].to_vec();
                    assert_eq!(
                        crate::packet::transport(&ip).unwrap().end,
                        ip.len(),
                        "lengths {i}..{j}"
                    );
                    if !v6 {
                        assert_eq!(fold(sum_words(&ip[..20])), 0xffff, "IPv4 header checksum");
                        assert_eq!(get_u16(&ip, 4), 0xfffeu16.wrapping_add(i as u16));
                    }
                    assert_eq!(
                        seq(&ip, l3),
                        0xffff_ff00u32.wrapping_add((i * usize::from(mss)) as u32)
                    );
                    let flags = ip[l3 + 13];
                    assert_eq!(flags & 0x80 != 0, i == 0, "CWR");
                    assert_eq!(flags & 0x09 != 0, j == t.segments, "FIN, PSH");
                    assert_eq!(flags & 0x10, 0x10, "ACK");
                    complete(&mut ip, l3);
                    assert_eq!(transport_checksum_ok(&ip), Some(true), "{v6} {payload} {i}..{j}");
                    if j == i + 1 {
                        assert_eq!(ip.len(), t.wire_len(i));
                        joined.extend_from_slice(&ip[l3 + 20 + OPTIONS..]);
                    }
                }
            }
            assert_eq!(
                joined,
                frame[VNET_LEN + l3 + 20 + OPTIONS..],
                "the segments' payloads are the train's"
            );
            assert_eq!(
                t.wire_bytes(0, t.segments),
                (0..t.segments).map(|i| t.wire_len(i) as u64).sum::<u64>()
            );
        }
    }
}

#[test]
fn the_header_reads_back_as_written() {
    let v = Vnet {
        flags: 1,
        gso_type: 4,
        hdr_len: 86,
        gso_size: 1428,
        csum_start: 40,
        csum_offset: 16,
    };
    let mut b = [0u8; VNET_LEN];
    v.write(&mut b);
    assert_eq!(Vnet::parse(&b), Some(v));
}

proptest::proptest! {
    /// Whatever a host's root writes through a packet socket with its own virtio-net header (the
    /// forwarder's one hostile input here): a frame is read as a train only when its lengths hold,
    /// and every part of an accepted train then has headers whose lengths match what it carries.
    #[test]
    fn any_frame_is_refused_or_cut_consistently(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        mss in 0u16..2000,
        gso in proptest::prelude::prop_oneof![proptest::prelude::Just(GSO_TCPV4), proptest::prelude::Just(GSO_TCPV6), proptest::prelude::any::<u8>()],
        flip in proptest::collection::vec((0usize..400, proptest::prelude::any::<u8>()), 0..6),
    ) {
        // Half the cases start from a well-formed train and damage a few bytes; the rest are noise.
        let mut frame = if bytes.len() % 2 == 0 { train(bytes.len() % 4 == 0, bytes.len() * 7, 200, 0x18) } else { bytes.clone() };
        for (at, v) in &flip {
            if let Some(b) = frame.get_mut(*at) {
                *b = *v;
            }
        }
        if frame.len() >= VNET_LEN {
            frame[1] = gso;
            frame[4..6].copy_from_slice(&mss.to_ne_bytes());
        }
        if let Ok(Some(t)) = Train::of(&frame) {
            proptest::prop_assert!(t.segments >= 1 && t.segments <= 65_536 / usize::from(MIN_SEGMENT) + 1);
            let mut head = Vec::new();
            for (i, j) in [(0, t.segments), (0, 1), (t.segments - 1, t.segments)] {
                t.head(&frame, i, j, &mut head);
                let ip = &head[VNET_LEN..];
                let len = ip.len() + t.payload(i, j).len();
                let said = if ip[0] >> 4 == 4 { usize::from(get_u16(ip, 2)) } else { 40 + usize::from(get_u16(ip, 4)) };
                proptest::prop_assert_eq!(said, len);
                proptest::prop_assert!(t.payload(i, j).end <= frame.len());
            }
        }
    }
}
