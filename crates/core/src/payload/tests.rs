//! Tests of the payload: the fast generator equals the byte-by-byte reference, segments are unique, and
//! the verifier catches every kind of fault at the exact offset.

use super::*;
use proptest::prelude::*;
use std::collections::HashSet;

fn stream_bytes(p: &Pattern, stream: u32, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    p.reference(stream, 0, &mut v);
    v
}

#[test]
fn same_key_same_pattern_other_key_other_pattern() {
    let (a, b, c) = (Pattern::new(1), Pattern::new(1), Pattern::new(2));
    let mut x = [0u8; 256];
    let mut y = [0u8; 256];
    let mut z = [0u8; 256];
    a.reference(0, 1000, &mut x);
    b.reference(0, 1000, &mut y);
    c.reference(0, 1000, &mut z);
    assert_eq!(x, y);
    assert_ne!(x, z);
}

#[test]
fn window_check_finds_repeats() {
    let mut pool: Vec<u8> = (0..4096u32)
        .flat_map(|i| (i.wrapping_mul(2654435761)).to_le_bytes())
        .collect();
    assert!(windows_unique(&pool));
    let copy: Vec<u8> = pool[100..108].to_vec();
    pool[3000..3008].copy_from_slice(&copy);
    assert!(!windows_unique(&pool));
}

/// Every window of the minimum unique length (263 bytes), at every offset of two streams spanning
/// several pool periods, is different from every other. Equal longer segments would have equal prefixes
/// of that length, so this covers every longer segment over this range.
#[test]
fn every_minimum_length_window_of_two_streams_is_unique() {
    let p = Pattern::new(0x1234_5678);
    let len = 3 * POOL + 1000;
    let s0 = stream_bytes(&p, 0, len);
    let s1 = stream_bytes(&p, 1, len);
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(2 * len);
    for s in [&s0, &s1] {
        for w in s.windows(UNIQUE_SEGMENT_MIN) {
            assert!(seen.insert(w), "a repeated {UNIQUE_SEGMENT_MIN}-byte segment");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_rewritten_buffer_is_the_payload_at_its_new_offset(
        key in any::<u64>(),
        stream in 0u32..2048,
        old in 0u64..(1u64 << 40),
        pools in 1u64..1000,
        n in 0usize..40_000,
    ) {
        let p = Pattern::new(key);
        let mut g = Generator::new(&p, n);
        let new = old + pools * POOL as u64;
        let mut buf = g.fill(stream, old, n).to_vec();
        g.rewrite(stream, new, &mut buf);
        prop_assert_eq!(&buf[..], g.fill(stream, new, n));
    }

    #[test]
    fn generator_matches_reference(key in any::<u64>(), stream in 0u32..2048, offset in 0u64..(1u64 << 40), n in 0usize..5000) {
        let p = Pattern::new(key);
        let mut g = Generator::new(&p, 4096);
        let n = n.min(4096);
        let mut want = vec![0u8; n];
        p.reference(stream, offset, &mut want);
        prop_assert_eq!(g.fill(stream, offset, n), &want[..]);
    }

    /// A spare byte the caller overwrote never shows in a later payload, wherever it fell (pool byte or
    /// header slot).
    #[test]
    fn a_spare_byte_written_over_is_put_back(
        key in any::<u64>(),
        calls in proptest::collection::vec((0u64..(1u64 << 20), 0usize..5000, any::<u8>()), 1..8),
    ) {
        let p = Pattern::new(key);
        let mut g = Generator::new(&p, 4096);
        for (offset, n, junk) in calls {
            let n = n.min(4096);
            let mut want = vec![0u8; n + 1];
            p.reference(3, offset, &mut want);
            let got = g.fill_spare(3, offset, n);
            prop_assert_eq!(got.len(), n + 1);
            prop_assert_eq!(&got[..n], &want[..n]);
            got[n] = junk;
            let again = g.fill(3, offset + 1, n);
            prop_assert_eq!(again, &want[1..]);
        }
    }

    /// TCP cuts each write into MSS-sized segments; whatever the write size and MSS, no two segments of
    /// at least 263 bytes are equal.
    #[test]
    fn segments_are_unique_for_any_write_size_and_mss(
        writes in proptest::collection::vec(1usize..70_000, 1..12),
        mss in prop_oneof![Just(263usize), Just(536), Just(1448), Just(8948), Just(65483), 263usize..9000],
    ) {
        let p = Pattern::new(99);
        let total: usize = writes.iter().sum::<usize>().max(1);
        let mut segments: HashSet<Vec<u8>> = HashSet::new();
        for stream in 0..2u32 {
            let data = stream_bytes(&p, stream, total);
            let mut off = 0;
            for w in writes.iter().cycle().take(writes.len()) {
                let end = (off + w).min(total);
                let mut s = off;
                while s < end {
                    let e = (s + mss).min(end);
                    if e - s >= UNIQUE_SEGMENT_MIN {
                        prop_assert!(segments.insert(data[s..e].to_vec()), "segment at {s} of stream {stream} repeats");
                    }
                    s = e;
                }
                off = end;
            }
        }
    }
}

/// Feeds a received stream to the verifier in uneven chunks and returns the first corruption and the
/// number of distinct bad blocks.
fn verify(p: &Pattern, stream: u32, received: &[u8], chunk: usize) -> (Option<Corruption>, usize) {
    let mut v = Verifier::new(p, 8192);
    let mut first = None;
    let mut blocks = std::collections::BTreeSet::new();
    let mut off = 0;
    let mut k = 0;
    while off < received.len() {
        let n = (chunk + k * 37 % 1000).min(received.len() - off);
        k += 1;
        if let Some(c) = v.check(stream, off as u64, &received[off..off + n]) {
            first.get_or_insert(c.first);
            blocks.extend(c.bad_blocks);
        }
        off += n;
    }
    (first, blocks.len())
}

fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

enum Fault {
    Flip(usize),
    Drop(usize, usize),
    DuplicateBlock(usize),
    SwapBlocks(usize, usize),
}

fn inject(good: &[u8], f: &Fault) -> Vec<u8> {
    let mut v = good.to_vec();
    match *f {
        Fault::Flip(at) => v[at] ^= 0x20,
        Fault::Drop(at, len) => {
            v.drain(at..at + len);
        }
        Fault::DuplicateBlock(b) => {
            let blk = good[b * BLOCK..(b + 1) * BLOCK].to_vec();
            v.splice((b + 1) * BLOCK..(b + 1) * BLOCK, blk);
        }
        Fault::SwapBlocks(a, b) => {
            let (x, y) = (
                good[a * BLOCK..(a + 1) * BLOCK].to_vec(),
                good[b * BLOCK..(b + 1) * BLOCK].to_vec(),
            );
            v[a * BLOCK..(a + 1) * BLOCK].copy_from_slice(&y);
            v[b * BLOCK..(b + 1) * BLOCK].copy_from_slice(&x);
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_fault_is_caught_at_its_exact_offset(
        key in any::<u64>(),
        stream in 0u32..64,
        kind in 0u8..4,
        at in 0usize..150_000,
        len in 1usize..3000,
        other in 0usize..2000,
        chunk in 1usize..9000,
    ) {
        let p = Pattern::new(key);
        let good = stream_bytes(&p, stream, 160_000);
        let blocks = good.len() / BLOCK;
        let fault = match kind {
            0 => Fault::Flip(at),
            1 => Fault::Drop(at, len),
            2 => Fault::DuplicateBlock((at / BLOCK).min(blocks - 2)),
            _ => {
                let a = (at / BLOCK).min(blocks - 1);
                // Never the same block: swapping a block with itself is no fault at all.
                let b = (a + 1 + other % (blocks - 1)) % blocks;
                Fault::SwapBlocks(a.min(b), a.max(b))
            }
        };
        let bad = inject(&good, &fault);
        let (first, bad_blocks) = verify(&p, stream, &bad, chunk);
        let first = first.expect("fault not caught");
        // The reported offset is exactly the first byte that differs from the expected stream.
        prop_assert_eq!(first.offset as usize, first_difference(&good, &bad));
        prop_assert_eq!(first.stream, stream);
        prop_assert!(bad_blocks >= 1);
        prop_assert_ne!(first.expected_hex, first.received_hex);
    }
}

#[test]
fn clean_stream_verifies_in_any_chunking() {
    let p = Pattern::new(7);
    let good = stream_bytes(&p, 3, 200_000);
    for chunk in [1, 63, 64, 65, 4096, 8192, 100_000] {
        assert_eq!(verify(&p, 3, &good, chunk), (None, 0));
    }
    // The wrong stream's data is caught at its first byte (the header differs).
    let (first, _) = verify(&p, 4, &good, 4096);
    assert_eq!(first.unwrap().offset, 0);
}

fn fused_kernels() -> Vec<FusedKernel> {
    let mut k: Vec<FusedKernel> = vec![fused_baseline];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        k.push(fused_avx2);
    }
    k
}

#[test]
fn every_fused_kernel_sees_every_byte_across_the_pool_end() {
    let p = Pattern::new(11);
    let first = (POOL / BLOCK) as u64 - 2;
    let mut good = vec![0u8; 4 * BLOCK];
    p.expected(5, first * BLOCK as u64, &mut good);
    let mut reference = vec![0u8; 4 * BLOCK];
    p.reference(5, first * BLOCK as u64, &mut reference);
    assert_eq!(good, reference);
    for f in fused_kernels() {
        assert_eq!(f(&p, 5, first, &good), 0);
        // Another stream's blocks differ only in their headers: caught.
        assert_ne!(f(&p, 6, first, &good), 0);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x80;
            assert_ne!(f(&p, 5, first, &bad), 0, "flip at {i} missed");
        }
    }
}

#[test]
fn unnumbered_streams_share_their_bytes_and_are_still_checked() {
    let shared = Pattern::for_unnumbered_streams(21);
    let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
    shared.expected(0, 1000, &mut a);
    shared.expected(7, 1000, &mut b);
    assert_eq!(a, b, "every stream carries the same bytes at the same offset");
    // The same key with numbered streams differs from stream 1 on: only stream 0 is alike.
    let numbered = Pattern::new(21);
    let mut c = vec![0u8; 4096];
    numbered.expected(0, 1000, &mut c);
    assert_eq!(a, c);
    numbered.expected(7, 1000, &mut c);
    assert_ne!(a, c);
    let mut v = Verifier::new(&shared, 4096);
    assert!(v.check(3, 1000, &a).is_none());
    let mut bad = a.clone();
    bad[100] ^= 1;
    let found = v.check(3, 1000, &bad).expect("a flipped byte is caught");
    assert_eq!(found.first.offset, 1100);
    // A chunk at another offset of the same stream is not the data expected there.
    assert!(v.check(3, 1256, &a).is_some());
}
