//! The forwarder with trains: each segment keeps its own fate, the survivors reach the other side with
//! the headers and payload a host's TCP accepts, and unimpaired runs stay together.

use super::*;
use crate::settings::Request;
use crate::train::testing::{complete, train, OPTIONS};
use crate::train::Vnet;

const MSS: u16 = 1448;
const PAYLOAD: usize = 44 * 1448 + 300; // 45 segments
const SEQ0: u32 = 0xffff_ff00;

fn link(f: impl FnOnce(&mut Request)) -> Link {
    let mut r = Request::default();
    f(&mut r);
    Link::new(r.resolve().unwrap().a_to_b, 7)
}

fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socketpair fills two descriptors, which we then own.
    assert_eq!(
        unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) },
        0
    );
    use std::os::fd::FromRawFd;
    // SAFETY: both were just created and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Sends `frame` through a forwarder over `link` and returns the frames it wrote and its counters.
fn through(frame: &[u8], link: &mut Link) -> (Vec<Vec<u8>>, DirSnapshot) {
    let stats = DirStats::default();
    let mut f = Forwarder::new(&stats);
    let (w, r) = seqpacket_pair();
    let mut buf = f.pools.large();
    buf[..frame.len()].copy_from_slice(frame);
    f.offer(buf, frame.len(), link, 0);
    f.collect(link);
    f.deliver_due(&w, || 1 << 62);
    let mut out = Vec::new();
    let mut b = vec![0u8; crate::train::MAX_FRAME];
    while let Ok(n) = read(&r, &mut b) {
        out.push(b[..n].to_vec());
    }
    *lock(&stats.model) = link.counters;
    (out, stats.snapshot())
}

/// The segments a host takes from `frames` (sequence number, payload), each frame's checksum
/// completed from its seed and checked first.
fn segments(frames: &[Vec<u8>], l3: usize) -> Vec<(u32, Vec<u8>)> {
    let mut segs = Vec::new();
    for fr in frames {
        let v = Vnet::parse(fr).unwrap();
        let mut ip = fr[VNET_LEN..].to_vec();
        complete(&mut ip, usize::from(v.csum_start));
        assert_eq!(crate::packet::transport_checksum_ok(&ip), Some(true));
        let seq = u32::from_be_bytes(ip[l3 + 4..l3 + 8].try_into().unwrap());
        let payload = &ip[l3 + 20 + OPTIONS..];
        let mss = if v.gso_type == crate::train::GSO_NONE {
            payload.len()
        } else {
            usize::from(v.gso_size)
        };
        for (k, chunk) in payload.chunks(mss).enumerate() {
            segs.push((seq.wrapping_add((k * mss) as u32), chunk.to_vec()));
        }
    }
    segs
}

fn original(frame: &[u8], l3: usize) -> Vec<(u32, Vec<u8>)> {
    let payload = &frame[VNET_LEN + l3 + 20 + OPTIONS..];
    let mss = usize::from(MSS);
    payload
        .chunks(mss)
        .enumerate()
        .map(|(k, c)| (SEQ0.wrapping_add((k * mss) as u32), c.to_vec()))
        .collect()
}

#[test]
fn an_unimpaired_train_leaves_as_it_came_counted_as_its_wire_packets() {
    let frame = train(false, PAYLOAD, MSS, 0x18);
    let (out, st) = through(&frame, &mut link(|r| r.rtt = Some("20ms".into())));
    assert_eq!(out, vec![frame.clone()]);
    assert_eq!(
        (st.packets_in, st.packets_forwarded, st.departure_lateness.packets),
        (45, 45, 45)
    );
    assert_eq!((st.trains_in, st.trains_out), (1, 1));
    assert_eq!(st.bytes_forwarded, (PAYLOAD + 45 * (20 + 20 + OPTIONS)) as u64);
}

#[test]
fn lost_segments_are_missing_and_every_other_arrives_intact() {
    for v6 in [false, true] {
        let l3 = if v6 { 40 } else { 20 };
        let frame = train(v6, PAYLOAD, MSS, 0x18);
        let mut l = link(|r| r.loss = Some("30%".into()));
        let (out, st) = through(&frame, &mut l);
        let got = segments(&out, l3);
        let want = original(&frame, l3);
        assert!(
            st.path.dropped_loss > 3 && st.path.dropped_loss < 30,
            "{}",
            st.path.dropped_loss
        );
        assert_eq!(got.len() as u64, 45 - st.path.dropped_loss);
        assert!(
            got.iter().all(|s| want.contains(s)),
            "every segment delivered is one sent, unchanged"
        );
        assert!(
            got.windows(2).all(|w| w[0].0 < w[1].0 || w[1].0 < SEQ0),
            "in order"
        );
        assert!(out.len() < got.len(), "runs between losses leave together");
        assert_eq!(st.packets_forwarded, got.len() as u64);
    }
}

#[test]
fn a_rate_cuts_a_train_into_runs_no_longer_than_the_span() {
    // 1500-byte wire packets at 1 Gbit/s leave 12 µs apart: three fit in 25 µs.
    let frame = train(false, PAYLOAD, MSS, 0x18);
    let mut l = link(|r| {
        r.rate = Some("1G".into());
        r.queue = Some("10M".into());
    });
    let (out, st) = through(&frame, &mut l);
    assert_eq!(segments(&out, 20), original(&frame, 20));
    assert_eq!(out.len(), 15);
    assert_eq!(st.trains_out, 15);
    assert_eq!(st.departure_lateness.packets, 45);
}

#[test]
fn corrupted_segments_leave_alone_with_one_bit_flipped_and_a_checksum_tcp_accepts() {
    let frame = train(false, PAYLOAD, MSS, 0x18);
    let (out, st) = through(&frame, &mut link(|r| r.corrupt_payload = Some("100%".into())));
    assert_eq!((out.len(), st.corrupted), (45, 45));
    for ((s, got), (s0, want)) in segments(&out, 20).iter().zip(original(&frame, 20)) {
        assert_eq!(*s, s0);
        let flipped: u32 = got.iter().zip(&want).map(|(a, b)| (a ^ b).count_ones()).sum();
        assert_eq!(flipped, 1);
    }
}

#[test]
fn duplicated_segments_arrive_twice() {
    let frame = train(true, PAYLOAD, MSS, 0x18);
    let (out, st) = through(&frame, &mut link(|r| r.duplicate = Some("100%".into())));
    let got = segments(&out, 40);
    assert_eq!((got.len(), st.packets_forwarded), (90, 90));
    let want = original(&frame, 40);
    assert!(want.iter().all(|s| got.iter().filter(|g| *g == s).count() == 2));
}

#[test]
fn runs_are_cut_at_impaired_segments_and_at_the_span() {
    let d = |at_ns| Fate::Deliver {
        at_ns,
        duplicate: false,
        corrupt: None,
        reordered: false,
        ce: false,
    };
    let ce = Fate::Deliver {
        at_ns: 5,
        duplicate: false,
        corrupt: None,
        reordered: false,
        ce: true,
    };
    let fates = [
        d(0),
        d(1),
        Fate::Dropped(crate::model::Drop::Loss),
        d(2),
        ce,
        d(3),
        d(30_000),
        d(30_001),
    ];
    let mut g = Vec::new();
    group(&fates, &mut g);
    let run = |from, to, first_at, at| Group::Run {
        from,
        to,
        first_at,
        at,
    };
    assert_eq!(
        g,
        vec![
            run(0, 2, 0, 1),
            Group::Alone(2),
            run(3, 4, 2, 2),
            Group::Alone(4),
            run(5, 6, 3, 3),
            run(6, 8, 30_000, 30_001)
        ]
    );
}
