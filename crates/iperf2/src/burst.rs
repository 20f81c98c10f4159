//! iperf 2's TCP bursts: with `--trip-times` (or `--isochronous`, `--burst-period`) an iperf 2.1.x
//! client cuts its TCP stream, after its test header, into bursts (one write buffer each, or a
//! frame), each opening with a 92-byte header that says the burst's size, its number and when it was
//! written. The server times each burst from that stamp to the arrival of its last byte: the
//! one-way "trip time" of its `Burst Latency` columns. This module writes the header
//! ([`BurstHeader::encode_into`], stamped by [`BurstWriter`]) and cuts a received stream into
//! bursts however the reads split it ([`BurstReader`]), without I/O, so the engine's receiver and
//! sender share one checked reading.
//! The layout (docs/iperf2.md, "Trip times over TCP") is iperf 2.1.8's `TCP_burst_payload`.

use crate::ack::WireTime;

/// The header's size: iperf 2.1.8's `sizeof(struct TCP_burst_payload)`.
pub const BURST_HEADER_BYTES: usize = 92;

/// The largest burst this reader accepts (a frame of 1 GiB); a larger size is taken for a stream
/// that is not framed (or is hostile) and ends the timing.
pub const MAX_BURST_BYTES: u32 = 1 << 30;

/// Where each field sits (bytes from the header's start; every field a big-endian word).
mod at {
    pub const START_SECS: usize = 12;
    pub const START_MICROS: usize = 16;
    pub const WRITE_SECS: usize = 20;
    pub const WRITE_MICROS: usize = 24;
    pub const PERIOD_US: usize = 40;
    pub const ID: usize = 44;
    pub const SIZE: usize = 48;
    pub const SEQ_LOW: usize = 52;
    pub const SEQ_HIGH: usize = 56;
}

/// One burst's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BurstHeader {
    /// The client's start time (its test's).
    pub start: WireTime,
    /// When the burst's first write began (`--trip-times`: the clocks are taken as synchronized).
    pub written: WireTime,
    /// The frame period, microseconds (isochronous and periodic bursts; 0 otherwise).
    pub period_us: u32,
    /// The burst's number, from 1.
    pub id: u32,
    /// The burst's size, this header included.
    pub size: u32,
    /// The bytes written before this burst's end (iperf 2's running packet id).
    pub seq: u64,
}

impl BurstHeader {
    /// Reads a header from its 92 bytes.
    pub fn parse(b: &[u8; BURST_HEADER_BYTES]) -> BurstHeader {
        let w = |at: usize| crate::be32(b, at);
        let time = |s: usize, us: usize| WireTime {
            secs: w(s),
            micros: w(us),
        };
        BurstHeader {
            start: time(at::START_SECS, at::START_MICROS),
            written: time(at::WRITE_SECS, at::WRITE_MICROS),
            period_us: w(at::PERIOD_US),
            id: w(at::ID),
            size: w(at::SIZE),
            seq: u64::from(w(at::SEQ_HIGH)) << 32 | u64::from(w(at::SEQ_LOW)),
        }
    }

    /// Writes the header over the first 92 bytes of `b` (the rest of a burst is the caller's
    /// payload); the fields it does not name are left as they are (iperf 2's are its pattern).
    pub fn encode_into(&self, b: &mut [u8]) {
        let mut put = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        put(at::START_SECS, self.start.secs);
        put(at::START_MICROS, self.start.micros);
        put(at::WRITE_SECS, self.written.secs);
        put(at::WRITE_MICROS, self.written.micros);
        put(at::PERIOD_US, self.period_us);
        put(at::ID, self.id);
        put(at::SIZE, self.size);
        put(at::SEQ_LOW, self.seq as u32);
        put(at::SEQ_HIGH, (self.seq >> 32) as u32);
    }
}

/// Why a stream stopped being read as bursts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BurstError {
    /// A header gave a size smaller than the header or above [`MAX_BURST_BYTES`].
    #[error("an iperf 2 burst header gave a size of {0} bytes (92 bytes to 1 GiB are possible): the stream is not timed from there on")]
    Size(u32),
}

/// A received stream cut into bursts as its reads come, whatever their sizes: each read's bytes go
/// to [`BurstReader::feed`], which returns the headers of the bursts whose last byte they held.
#[derive(Debug, Clone)]
pub struct BurstReader {
    /// The header being gathered, and how much of it has come.
    head: [u8; BURST_HEADER_BYTES],
    have: usize,
    /// The burst being received, and the bytes of it still to come (0: a header is next).
    current: BurstHeader,
    left: u64,
    broken: Option<BurstError>,
}

impl Default for BurstReader {
    fn default() -> Self {
        BurstReader {
            head: [0; BURST_HEADER_BYTES],
            have: 0,
            current: BurstHeader::default(),
            left: 0,
            broken: None,
        }
    }
}

impl BurstReader {
    /// Reads `data`, the stream's next bytes; `done` gets each burst that ends within them.
    pub fn feed(&mut self, mut data: &[u8], mut done: impl FnMut(&BurstHeader)) {
        while !data.is_empty() && self.broken.is_none() {
            if self.left > 0 {
                let take = (self.left.min(data.len() as u64)) as usize;
                self.left -= take as u64;
                data = &data[take..];
                if self.left == 0 {
                    done(&self.current);
                }
                continue;
            }
            let take = (BURST_HEADER_BYTES - self.have).min(data.len());
            self.head[self.have..self.have + take].copy_from_slice(&data[..take]);
            self.have += take;
            data = &data[take..];
            if self.have == BURST_HEADER_BYTES {
                self.have = 0;
                self.begin(&mut done);
            }
        }
    }

    /// A whole header has come: its burst begins (or, a header alone, ends).
    fn begin(&mut self, done: &mut impl FnMut(&BurstHeader)) {
        let h = BurstHeader::parse(&self.head);
        if (h.size as usize) < BURST_HEADER_BYTES || h.size > MAX_BURST_BYTES {
            self.broken = Some(BurstError::Size(h.size));
            return;
        }
        self.current = h;
        self.left = u64::from(h.size) - BURST_HEADER_BYTES as u64;
        if self.left == 0 {
            done(&self.current);
        }
    }

    /// The burst begun and not ended, with the bytes of it come (its header's included).
    pub fn unfinished(&self) -> Option<(BurstHeader, u64)> {
        (self.left > 0 && self.broken.is_none())
            .then(|| (self.current, u64::from(self.current.size) - self.left))
    }

    /// Why the stream is no longer read as bursts, if it is not.
    pub fn broken(&self) -> Option<BurstError> {
        self.broken
    }
}

/// A sent stream cut into bursts of one write buffer each (iperf 2's client with `--trip-times`),
/// each opening with its header stamped when its first byte is written. Stamps are placed by the
/// stream's offset, so writes of any size (a paced socket's shorter ones, a partial write) give the
/// same bursts, and a header split over two writes keeps one stamp.
#[derive(Debug, Clone)]
pub struct BurstWriter {
    size: u32,
    total: Option<u64>,
    start: Option<WireTime>,
    /// The burst whose header was last made, and that header.
    current: Option<(u64, [u8; BURST_HEADER_BYTES])>,
}

impl BurstWriter {
    /// Bursts of `size` bytes (at least the header's), the last one cut short when the stream's
    /// `total` is known (iperf 2's `-n`).
    pub fn new(size: u32, total: Option<u64>) -> BurstWriter {
        BurstWriter {
            size: size.max(BURST_HEADER_BYTES as u32),
            total,
            start: None,
            current: None,
        }
    }

    /// Writes over `chunk`, the stream's bytes from `offset` about to be written at `now`, the
    /// parts of burst headers it holds.
    pub fn stamp(&mut self, offset: u64, chunk: &mut [u8], now: WireTime) {
        let size = u64::from(self.size);
        let end = offset + chunk.len() as u64;
        let start = *self.start.get_or_insert(now);
        for b in offset / size..end.div_ceil(size) {
            let (from, to) = (b * size, b * size + BURST_HEADER_BYTES as u64);
            let (lo, hi) = (from.max(offset), to.min(end));
            if lo >= hi {
                continue;
            }
            if self.current.map(|c| c.0) != Some(b) {
                self.current = Some((b, self.header(b, start, now)));
            }
            let head = &self.current.as_ref().expect("just made").1;
            chunk[(lo - offset) as usize..(hi - offset) as usize]
                .copy_from_slice(&head[(lo - from) as usize..(hi - from) as usize]);
        }
    }

    /// Burst `b`'s header (from 0), written at `now`.
    fn header(&self, b: u64, start: WireTime, now: WireTime) -> [u8; BURST_HEADER_BYTES] {
        let size = u64::from(self.size);
        let this = match self.total {
            Some(t) => t.saturating_sub(b * size).clamp(BURST_HEADER_BYTES as u64, size),
            None => size,
        };
        let mut h = [0u8; BURST_HEADER_BYTES];
        BurstHeader {
            start,
            written: now,
            period_us: 0,
            id: (b + 1) as u32,
            size: this as u32,
            seq: b * size + this,
        }
        .encode_into(&mut h);
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn burst(id: u32, size: u32, secs: u32) -> Vec<u8> {
        let mut b = vec![0xa5; size as usize];
        BurstHeader {
            start: WireTime { secs: 7, micros: 8 },
            written: WireTime { secs, micros: 250 },
            period_us: 0,
            id,
            size,
            seq: u64::from(size) * u64::from(id),
        }
        .encode_into(&mut b);
        b
    }

    fn stream(sizes: &[u32]) -> Vec<u8> {
        (sizes.iter().enumerate())
            .flat_map(|(k, s)| burst(k as u32 + 1, *s, 100 + k as u32))
            .collect()
    }

    #[test]
    fn a_captured_header_reads_as_iperf_2_wrote_it() {
        // The first burst header of iperf 2.1.8's `-c 127.0.0.1 --trip-times -l 1000 -n 3000`,
        // captured on loopback after its 80-byte test header (the words the burst header does not
        // set are left from that test header, as iperf 2 leaves them).
        let hex = "400100a000000001000014b96b13d34a000f26b26b13d34a000f26bb0000000000100000000200010008000300000001000003e8000003ea00000000000000006b13d34a000f26a20000000000000000000000000000000000000000";
        let b = crate::unhex(hex);
        let h = BurstHeader::parse(b.as_slice().try_into().unwrap());
        assert_eq!((h.id, h.size, h.seq, h.period_us), (1, 1000, 1002, 0x0008_0003));
        assert_eq!(
            h.start,
            WireTime {
                secs: 0x6b13_d34a,
                micros: 0xf_26b2
            }
        );
        assert_eq!(
            h.written,
            WireTime {
                secs: 0x6b13_d34a,
                micros: 0xf_26bb
            }
        );
        let mut again = b.clone();
        h.encode_into(&mut again);
        assert_eq!(again, b, "written back byte for byte");
    }

    #[test]
    fn a_header_smaller_than_itself_stops_the_timing() {
        let mut r = BurstReader::default();
        let mut n = 0;
        let mut s = stream(&[200]);
        s.extend(burst(2, 91, 1));
        s.extend(stream(&[200]));
        r.feed(&s, |_| n += 1);
        assert_eq!(n, 1);
        assert_eq!(r.broken(), Some(BurstError::Size(91)));
        let mut r = BurstReader::default();
        r.feed(&burst(1, MAX_BURST_BYTES + 1, 1)[..BURST_HEADER_BYTES], |_| {
            n += 1
        });
        assert_eq!(r.broken(), Some(BurstError::Size(MAX_BURST_BYTES + 1)));
    }

    proptest! {
        /// However the reads cut the stream, every burst ends once, in order, at its last byte.
        #[test]
        fn any_cut_of_the_stream_gives_every_burst_at_its_last_byte(
            sizes in prop::collection::vec(92u32..3000, 1..12),
            cuts in prop::collection::vec(1usize..700, 1..40),
        ) {
            let s = stream(&sizes);
            let mut r = BurstReader::default();
            let (mut got, mut at, mut k) = (vec![], 0usize, 0usize);
            while at < s.len() {
                let n = cuts[k % cuts.len()].min(s.len() - at);
                let end = at + n;
                r.feed(&s[at..end], |h| got.push((h.id, h.size, h.written.secs, end)));
                at = end;
                k += 1;
            }
            let mut last = 0usize;
            for (k, (id, size, secs, read_end)) in got.iter().enumerate() {
                prop_assert_eq!((*id, *size, *secs), (k as u32 + 1, sizes[k], 100 + k as u32));
                last += *size as usize;
                prop_assert!(*read_end >= last && *read_end < last + cuts.iter().max().unwrap());
            }
            prop_assert_eq!(got.len(), sizes.len());
            prop_assert!(r.broken().is_none());
        }
    }

    #[test]
    fn written_bursts_read_back_whatever_the_write_sizes() {
        for (total, writes) in [
            (10_000u64, [700usize, 31, 4096, 92, 1]),
            (4_000, [1000, 999, 1, 50, 3000]),
        ] {
            let mut w = BurstWriter::new(1000, Some(total));
            let mut stream = vec![0u8; total as usize];
            let (mut at, mut k) = (0usize, 0usize);
            while at < stream.len() {
                let n = writes[k % writes.len()].min(stream.len() - at);
                let now = WireTime {
                    secs: 50 + k as u32,
                    micros: 0,
                };
                w.stamp(at as u64, &mut stream[at..at + n], now);
                (at, k) = (at + n, k + 1);
            }
            let mut r = BurstReader::default();
            let mut got = vec![];
            r.feed(&stream, |h| got.push((h.id, h.size, h.seq, h.start.secs)));
            let bursts = total.div_ceil(1000) as usize;
            assert_eq!(got.len(), bursts, "every burst ends once");
            for (k, (id, size, seq, start)) in got.iter().enumerate() {
                assert_eq!((*id, *size), (k as u32 + 1, 1000));
                assert_eq!((*seq, *start), ((k as u64 + 1) * 1000, 50));
            }
            assert!(r.broken().is_none());
        }
        // A last burst cut short by the stream's total.
        let mut w = BurstWriter::new(1000, Some(1500));
        let mut s = vec![0u8; 1500];
        w.stamp(0, &mut s, WireTime::default());
        let mut sizes = vec![];
        BurstReader::default().feed(&s, |h| sizes.push(h.size));
        assert_eq!(sizes, [1000, 500]);
    }
}
