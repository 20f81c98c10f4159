use super::*;
use crate::packet::transport_checksum_ok;

const OPTIONS: usize = 12; // the timestamp option, as Linux sends it

/// A train as a host's TCP hands it over: IPv4 or IPv6, `payload` bytes, segments of `mss`, the
/// checksum field holding the seed for the whole train, `flags` in its TCP header.
fn train(v6: bool, payload: usize, mss: u16, flags: u8) -> Vec<u8> {
    let l3 = if v6 { 40 } else { 20 };
    let tcp_len = 20 + OPTIONS + payload;
    let mut ip = vec![0u8; l3 + tcp_len];
    if v6 {
        ip[0] = 0x60;
        set_u16(&mut ip, 4, tcp_len as u16);
        ip[6] = TCP;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&[0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        ip[24..40].copy_from_slice(&[0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        ip[0] = 0x45;
        ip[1] = 0x02; // ECT(0)
        set_u16(&mut ip, 2, (l3 + tcp_len) as u16);
        set_u16(&mut ip, 4, 0xfffe); // the ID wraps within the train
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = TCP;
        ip[12..20].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
        let s = !fold(sum_words(&ip[..20]));
        set_u16(&mut ip, 10, s);
    }
    let t = l3;
    set_u16(&mut ip, t, 40000);
    set_u16(&mut ip, t + 2, 5201);
    ip[t + 4..t + 8].copy_from_slice(&0xffff_ff00u32.to_be_bytes()); // the sequence wraps too
    ip[t + 12] = ((20 + OPTIONS) / 4 << 4) as u8;
    ip[t + 13] = flags;
    for (k, b) in ip[t + 20 + OPTIONS..].iter_mut().enumerate() {
        *b = (k * 7 + k / 251) as u8;
    }
    let seed = fold(pseudo_header_sum(&ip, tcp_len as u32));
    set_u16(&mut ip, t + 16, seed);
    let mut frame = vec![0u8; VNET_LEN];
    Vnet {
        flags: NEEDS_CSUM,
        gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
        hdr_len: (t + 20 + OPTIONS) as u16,
        gso_size: mss,
        csum_start: t as u16,
        csum_offset: 16,
    }
    .write(&mut frame);
    frame.extend_from_slice(&ip);
    frame
}

/// Completes a packet's transport checksum from its seed, as the device would.
fn complete(ip: &mut [u8], csum_start: usize) {
    let s = !fold(sum_words(&ip[csum_start..]));
    set_u16(ip, csum_start + 16, s);
}

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
    let mut g = train(false, 5000, 1448, 0x10);
    g.truncate(g.len() - 1); // the IP length says one byte more than there is
    assert_eq!(Train::of(&g), Err(BadTrain::Headers));
}

#[test]
fn every_part_of_a_train_has_the_headers_the_kernel_s_segmentation_gives() {
    for v6 in [false, true] {
        for (payload, mss) in [(5 * 1448 + 100, 1448u16), (4 * 8948, 8948), (1448, 1448), (64_000 - 72, 1448)] {
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
                    assert_eq!(crate::packet::transport(&ip).unwrap().end, ip.len(), "lengths {i}..{j}");
                    if !v6 {
                        assert_eq!(fold(sum_words(&ip[..20])), 0xffff, "IPv4 header checksum");
                        assert_eq!(get_u16(&ip, 4), 0xfffeu16.wrapping_add(i as u16));
                    }
                    assert_eq!(seq(&ip, l3), 0xffff_ff00u32.wrapping_add((i * usize::from(mss)) as u32));
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
            assert_eq!(joined, frame[VNET_LEN + l3 + 20 + OPTIONS..], "the segments' payloads are the train's");
            assert_eq!(t.wire_bytes(0, t.segments), (0..t.segments).map(|i| t.wire_len(i) as u64).sum::<u64>());
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
