//! The payload: every byte of every stream is a function of (session key, stream, offset), so the
//! receiver knows exactly what must arrive and checks every byte, and no two packets of a run carry the
//! same data (the Land Speed Record's rule 6), whatever the write size and MSS.
//!
//! Layout. The stream is cut into 256-byte blocks at absolute offsets. The first 8 bytes of block `b` of
//! stream `s` are a header `H(s, b)`, a keyed bijection of `(s << 48) | b`, so no two headers of a run are
//! equal. The other 248 bytes are body: the byte at stream offset `o` is `P[o mod 16 KiB]`, where `P` is a
//! random pool derived from the key, accepted only if all of its 16,384 cyclic 8-byte windows are
//! distinct (checked when it is made). Generating a buffer is a slice of a pre-filled buffer with its
//! header slots patched (one store per 256 bytes); verifying reads each received byte once against the
//! header function and the pool, without building the expected bytes. Block and pool sizes were chosen by
//! measurement (examples/payload_speed.rs, docs/payload.md): 64-byte blocks verified at 14 GB/s per core,
//! 256-byte blocks at 35-40 GB/s with a 16 KiB pool that stays in the first-level cache.
//!
//! Why two segments of equal length L ≥ 263 bytes from different (stream, offset) differ (docs/payload.md
//! has the full argument): if their offsets differ by a multiple of 256, both hold a whole header in the
//! same place (L ≥ 256 + 7) and the headers differ; otherwise, within any 256 consecutive positions the
//! two segments' headers cover at most 16, leaving a run of at least 80 positions that are body in both,
//! and equal 8-byte body windows would be equal pool windows at different pool offsets, which the pool
//! check rules out.

/// Bytes per payload block (one header each).
pub const BLOCK: usize = 256;
/// Header bytes at the start of each block.
pub const HEADER: usize = 8;
/// Size of the random pool that bodies are cut from.
pub const POOL: usize = 16 * 1024;
/// Segments of at least this many bytes are provably unique within a run.
pub const UNIQUE_SEGMENT_MIN: usize = BLOCK + HEADER - 1;
/// Name of this layout, recorded in results.
pub const PATTERN_NAME: &str = "landspeed/pool16k-block256/2";

const MUL: u64 = 0x9E37_79B9_7F4A_7C15;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(MUL);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pool and header key of one run, shared by every stream.
#[derive(Debug, Clone)]
pub struct Pattern {
    key: u64,
    header_key: u64,
    /// All ones: the stream number goes into every header; zero: every stream carries the same bytes
    /// at the same offset (`Pattern::for_unnumbered_streams`).
    stream_mask: u64,
    pool: Vec<u8>,
}

/// True if every cyclic 8-byte window of `pool` is different from every other.
pub fn windows_unique(pool: &[u8]) -> bool {
    let n = pool.len();
    let mut w: Vec<u64> = (0..n)
        .map(|i| {
            let mut b = [0u8; 8];
            for (k, x) in b.iter_mut().enumerate() {
                *x = pool[(i + k) % n];
            }
            u64::from_le_bytes(b)
        })
        .collect();
    w.sort_unstable();
    w.windows(2).all(|p| p[0] != p[1])
}

impl Pattern {
    /// Derives the pattern from the session key; both ends get the same one.
    pub fn new(key: u64) -> Pattern {
        let mut attempt = 0u64;
        loop {
            let mut state = key ^ attempt.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            let header_key = splitmix(&mut state);
            let mut pool = Vec::with_capacity(POOL);
            while pool.len() < POOL {
                pool.extend_from_slice(&splitmix(&mut state).to_le_bytes());
            }
            // A repeated window has probability ~2^-33 per key; derive another pool if it ever happens.
            if windows_unique(&pool) {
                return Pattern {
                    key,
                    header_key,
                    stream_mask: u64::MAX,
                    pool,
                };
            }
            attempt += 1;
        }
    }

    /// The pattern for streams whose ends cannot agree on their numbers: iperf3's data connections
    /// carry no stream number, and one end may number them in another order than the other. Every
    /// stream carries the same bytes at the same offset, so each stream is still checked byte for
    /// byte, but data delivered to the wrong stream at the same offset would pass, and two streams'
    /// packets are not unique across the run (the Land Speed Record's rule 6 needs `new`).
    pub fn for_unnumbered_streams(key: u64) -> Pattern {
        Pattern {
            stream_mask: 0,
            ..Pattern::new(key)
        }
    }

    /// The key the pattern was made from.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The header of block `block` of stream `stream`: a bijection of `(stream << 48) | block` (xor with a
    /// key, then SplitMix64's finalizer, whose xorshifts and odd multiplications are each invertible).
    #[inline]
    pub fn header(&self, stream: u32, block: u64) -> u64 {
        let mut z = ((u64::from(stream) << 48) & self.stream_mask) ^ block ^ self.header_key;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The expected bytes at `offset` of `stream`, computed byte by byte (the reference the fast paths
    /// are tested against).
    pub fn reference(&self, stream: u32, offset: u64, out: &mut [u8]) {
        for (i, x) in out.iter_mut().enumerate() {
            let o = offset + i as u64;
            let in_block = (o % BLOCK as u64) as usize;
            *x = if in_block < HEADER {
                self.header(stream, o / BLOCK as u64).to_le_bytes()[in_block]
            } else {
                self.pool[(o % POOL as u64) as usize]
            };
        }
    }
}

impl Pattern {
    /// The expected bytes at `offset` of `stream`, block by block (pool slices with headers patched).
    pub fn expected(&self, stream: u32, offset: u64, out: &mut [u8]) {
        let mut pos = 0usize;
        while pos < out.len() {
            let o = offset + pos as u64;
            let in_block = (o % BLOCK as u64) as usize;
            let n = (BLOCK - in_block).min(out.len() - pos);
            let p = (o % POOL as u64) as usize - in_block;
            let mut block = [0u8; BLOCK];
            block.copy_from_slice(&self.pool[p..p + BLOCK]);
            block[..HEADER].copy_from_slice(&self.header(stream, o / BLOCK as u64).to_le_bytes());
            out[pos..pos + n].copy_from_slice(&block[in_block..in_block + n]);
            pos += n;
        }
    }
}

/// Produces payload slices cheaply: a buffer holding the pool repeated, whose header slots are patched
/// for each request. One per worker thread; it holds no per-stream state.
pub struct Generator {
    pattern: Pattern,
    buf: Vec<u8>,
    max_len: usize,
    /// The byte after the last [`Generator::fill_spare`], which its caller may have overwritten.
    spare: Option<usize>,
}

impl Generator {
    /// A generator for requests of up to `max_len` bytes.
    pub fn new(pattern: &Pattern, max_len: usize) -> Generator {
        let len = POOL + max_len + BLOCK;
        let buf: Vec<u8> = (0..len).map(|j| pattern.pool[j % POOL]).collect();
        Generator {
            pattern: pattern.clone(),
            buf,
            max_len,
            spare: None,
        }
    }

    /// The `n` payload bytes of `stream` starting at `offset` (`n` ≤ max_len).
    #[inline]
    pub fn fill(&mut self, stream: u32, offset: u64, n: usize) -> &[u8] {
        let j0 = self.patch(stream, offset, n);
        &self.buf[j0..j0 + n.min(self.max_len)]
    }

    /// [`Generator::fill`], and one byte after the payload that the caller may overwrite (the next
    /// call puts the pattern back): TLS appends its record's inner content type there and seals the
    /// record in one pass from this buffer, with no copy of the payload first.
    pub fn fill_spare(&mut self, stream: u32, offset: u64, n: usize) -> &mut [u8] {
        let j0 = self.patch(stream, offset, n);
        let end = j0 + n.min(self.max_len);
        self.spare = Some(end);
        &mut self.buf[j0..=end]
    }

    /// Writes the headers of the blocks `n` bytes at `offset` cover; returns where they start.
    #[inline]
    fn patch(&mut self, stream: u32, offset: u64, n: usize) -> usize {
        if let Some(j) = self.spare.take() {
            // Outside a header slot this is the pool's byte; a header slot is rewritten before use.
            self.buf[j] = self.pattern.pool[j % POOL];
        }
        let n = n.min(self.max_len);
        let j0 = (offset % POOL as u64) as usize;
        let in_block = (offset % BLOCK as u64) as usize;
        let first = offset / BLOCK as u64;
        let blocks = (in_block + n).div_ceil(BLOCK);
        let mut slot = j0 - in_block;
        for b in 0..blocks as u64 {
            let h = self.pattern.header(stream, first + b).to_le_bytes();
            self.buf[slot..slot + HEADER].copy_from_slice(&h);
            slot += BLOCK;
        }
        j0
    }
}

impl Generator {
    /// Turns `buf`, holding the payload of `stream` at an earlier offset in the same position of the
    /// pool (equal to `offset` modulo [`POOL`]), into the payload at `offset`: only the block headers
    /// differ, so only they are written (one byte in 32). How a sender reuses a buffer a transport
    /// has let go of instead of generating and copying the whole of it again.
    pub fn rewrite(&self, stream: u32, offset: u64, buf: &mut [u8]) {
        let in_block = (offset % BLOCK as u64) as usize;
        let mut block = offset / BLOCK as u64;
        // Where the next whole block starts in buf; a block begun before buf leaves at most the
        // tail of its header there.
        let mut start = 0;
        if in_block != 0 {
            let tail = HEADER.saturating_sub(in_block).min(buf.len());
            let h = self.pattern.header(stream, block).to_le_bytes();
            buf[..tail].copy_from_slice(&h[in_block.min(HEADER)..][..tail]);
            block += 1;
            start = BLOCK - in_block;
        }
        // Whole headers as one 8-byte store each (a slice of variable length was a call to memcpy
        // per header: 3.5% of a QUIC sender's time).
        while start + HEADER <= buf.len() {
            let h = self.pattern.header(stream, block).to_le_bytes();
            buf[start..start + HEADER].copy_from_slice(&h);
            block += 1;
            start += BLOCK;
        }
        if start < buf.len() {
            let h = self.pattern.header(stream, block).to_le_bytes();
            let n = buf.len() - start;
            buf[start..].copy_from_slice(&h[..n]);
        }
    }
}

/// The first corrupted byte found, with some context.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Corruption {
    /// The stream it was in.
    pub stream: u32,
    /// Byte offset in the stream of the first byte that differs.
    pub offset: u64,
    /// Up to 16 bytes from that offset, as hex: what should have arrived and what did.
    pub expected_hex: String,
    /// What arrived there, hex.
    pub received_hex: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The outcome of checking one received chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkCheck {
    /// Blocks (256-byte, absolute) with at least one wrong byte, in order.
    pub bad_blocks: Vec<u64>,
    /// The first wrong byte.
    pub first: Corruption,
}

/// Checks received bytes against the pattern without materialising the expected bytes: whole blocks are
/// compared in one pass (header word against `H(s, b)`, body against the pool, differences OR-ed into an
/// accumulator), and only a group that differs is compared byte by byte to locate the damage.
pub struct Verifier {
    pattern: Pattern,
    /// Scratch for partial blocks and for locating corruption.
    expected: Vec<u8>,
    fused: FusedKernel,
}

/// A whole-block checking kernel: OR of all differences, zero when the blocks are right.
type FusedKernel = fn(&Pattern, u32, u64, &[u8]) -> u64;

/// Whole blocks checked per accumulator test (4 KiB).
const GROUP: usize = 16;

/// OR of the differences between `data` (whole blocks, starting at block `first`) and the pattern; zero
/// when every byte is right. Written so that the compiler vectorises the body loop.
#[inline(always)]
fn fused_generic(pattern: &Pattern, stream: u32, first: u64, data: &[u8]) -> u64 {
    let mut acc = 0u64;
    for (k, blk) in data.chunks_exact(BLOCK).enumerate() {
        let block = first + k as u64;
        let p = ((block * BLOCK as u64) % POOL as u64) as usize;
        let body = &pattern.pool[p + HEADER..p + BLOCK];
        let h = u64::from_le_bytes(blk[..HEADER].try_into().unwrap());
        acc |= h ^ pattern.header(stream, block);
        let mut d = 0u64;
        for (x, y) in blk[HEADER..].chunks_exact(8).zip(body.chunks_exact(8)) {
            d |= u64::from_ne_bytes(x.try_into().unwrap()) ^ u64::from_ne_bytes(y.try_into().unwrap());
        }
        acc |= d;
    }
    acc
}

fn fused_baseline(pattern: &Pattern, stream: u32, first: u64, data: &[u8]) -> u64 {
    fused_generic(pattern, stream, first, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fused_avx2_inner(pattern: &Pattern, stream: u32, first: u64, data: &[u8]) -> u64 {
    use std::arch::x86_64::*;
    // Lane 0 of each block's first vector is the header, checked as a scalar; the mask blanks it.
    let mask = _mm256_set_epi64x(-1, -1, -1, 0);
    let mut acc = _mm256_setzero_si256();
    let mut hacc = 0u64;
    let pool = pattern.pool.as_ptr();
    for (k, blk) in data.chunks_exact(BLOCK).enumerate() {
        let block = first + k as u64;
        // SAFETY: blocks never straddle the pool's end (POOL is a multiple of BLOCK), `blk` holds
        // BLOCK bytes, and all loads are unaligned loads within those ranges.
        let (d, p) = (
            blk.as_ptr(),
            pool.add(((block * BLOCK as u64) % POOL as u64) as usize),
        );
        let v = _mm256_xor_si256(_mm256_loadu_si256(d.cast()), _mm256_loadu_si256(p.cast()));
        acc = _mm256_or_si256(acc, _mm256_and_si256(v, mask));
        for j in 1..BLOCK / 32 {
            let x = _mm256_loadu_si256(d.add(32 * j).cast());
            let y = _mm256_loadu_si256(p.add(32 * j).cast());
            acc = _mm256_or_si256(acc, _mm256_xor_si256(x, y));
        }
        hacc |= std::ptr::read_unaligned(d.cast::<u64>()).to_le() ^ pattern.header(stream, block);
    }
    hacc | u64::from(_mm256_testz_si256(acc, acc) == 0)
}

#[cfg(target_arch = "x86_64")]
fn fused_avx2(pattern: &Pattern, stream: u32, first: u64, data: &[u8]) -> u64 {
    // SAFETY: only selected after `is_x86_feature_detected!("avx2")` returned true.
    unsafe { fused_avx2_inner(pattern, stream, first, data) }
}

fn pick_fused() -> FusedKernel {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return fused_avx2;
    }
    fused_baseline
}

impl Verifier {
    /// `max_len` is kept for API symmetry with [`Generator`]; any length can be checked.
    pub fn new(pattern: &Pattern, _max_len: usize) -> Verifier {
        Verifier {
            pattern: pattern.clone(),
            expected: Vec::with_capacity(GROUP * BLOCK),
            fused: pick_fused(),
        }
    }

    /// Checks `data`, received on `stream` at `offset`. `None` when every byte is right.
    pub fn check(&mut self, stream: u32, offset: u64, data: &[u8]) -> Option<ChunkCheck> {
        let mut found: Option<ChunkCheck> = None;
        let mut pos = 0usize;
        let b = BLOCK as u64;
        // A partial first block, then groups of whole blocks, then a partial last block.
        let head = ((b - offset % b) % b) as usize;
        let head = head.min(data.len());
        if head > 0 {
            self.piece(stream, offset, &data[..head], &mut found);
            pos = head;
        }
        while data.len() - pos >= BLOCK {
            let n = ((data.len() - pos) / BLOCK).min(GROUP) * BLOCK;
            let o = offset + pos as u64;
            if (self.fused)(&self.pattern, stream, o / b, &data[pos..pos + n]) != 0 {
                self.piece(stream, o, &data[pos..pos + n], &mut found);
            }
            pos += n;
        }
        if pos < data.len() {
            self.piece(stream, offset + pos as u64, &data[pos..], &mut found);
        }
        found
    }

    /// Compares a short piece (at most one group) against materialised expected bytes.
    fn piece(&mut self, stream: u32, offset: u64, got: &[u8], found: &mut Option<ChunkCheck>) {
        self.expected.resize(got.len(), 0);
        self.pattern.expected(stream, offset, &mut self.expected);
        if self.expected[..] != *got {
            let c = slow_compare(stream, offset, &self.expected, got);
            match found.as_mut() {
                None => *found = Some(c),
                Some(f) => f.bad_blocks.extend(c.bad_blocks),
            }
        }
    }
}

fn slow_compare(stream: u32, offset: u64, expected: &[u8], got: &[u8]) -> ChunkCheck {
    let first_bad = expected.iter().zip(got).position(|(a, b)| a != b).unwrap_or(0);
    let end = (first_bad + 16).min(got.len());
    let mut bad_blocks = vec![];
    let mut i = 0;
    while i < got.len() {
        let block = (offset + i as u64) / BLOCK as u64;
        let next = ((block + 1) * BLOCK as u64 - offset) as usize;
        let j = next.min(got.len());
        if expected[i..j] != got[i..j] {
            bad_blocks.push(block);
        }
        i = j;
    }
    ChunkCheck {
        bad_blocks,
        first: Corruption {
            stream,
            offset: offset + first_bad as u64,
            expected_hex: hex(&expected[first_bad..end]),
            received_hex: hex(&got[first_bad..end]),
        },
    }
}

#[cfg(test)]
mod tests;
