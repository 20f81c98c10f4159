//! The client's test header: the first bytes of each TCP stream, and of every UDP datagram after
//! its 16-byte sequence and timestamp. A version-1 part (flags, streams, port, buffer length,
//! window or bandwidth, amount) that every iperf 2 since 1.7 reads, then, when its flags say so,
//! the extension 2.0.13 and later send (the test's kind and direction, the sender's version, its
//! rate), then fields this crate keeps as sent (start time, fair-queue rate, isochronous
//! settings) for the parts of the protocol that read them.

use std::time::Duration;
use thiserror::Error;

/// Bits of the header's first word.
pub mod flags {
    /// The version-1 fields ask the server for a test back (`-r` and `-d`).
    pub const VERSION1: u32 = 0x8000_0000;
    /// The extension follows the version-1 fields.
    pub const EXTEND: u32 = 0x4000_0000;
    /// Set by a UDP client sending trip times or isochronous frames.
    pub const UDPTESTS: u32 = 0x2000_0000;
    /// UDP sequence numbers are 64 bits (the prefix's fourth word is their upper half).
    pub const SEQNO64B: u32 = 0x0800_0000;
    /// A permit key follows (`--permit-key`, iperf 2's shared-secret check).
    pub const KEYCHECK: u32 = 0x1000_0000;
    /// Set with `-R` and `--full-duplex`.
    pub const VERSION2: u32 = 0x0400_0000;
    /// A `VERSION2` client asks for the server's header ack (peer detection).
    pub const V2PEERDETECT: u32 = 0x0200_0000;
    /// `--bounceback`.
    pub const BOUNCEBACK: u32 = 0x0080_0000;
    /// A UDP client's datagrams too short for the header with `--trip-times` (below 2.1.8's
    /// MINTRIPTIMEPLAYOAD): this word alone after the prefix, then payload (`HEADER32_SMALL_TRIPTIMES`).
    pub const SMALL_TRIPTIMES: u32 = 0x0002_0000;
    /// The low bits below hold the header's length.
    pub const LEN_BIT: u32 = 0x0001_0000;
    /// The header's length in bytes, shifted left once (bit 0 is `RUN_NOW`).
    pub const LEN_MASK: u32 = 0x0000_01FE;
    /// With `VERSION1`: both directions at once (`-d`), not one after the other (`-r`).
    pub const RUN_NOW: u32 = 0x0000_0001;
}

/// Bits of the extension's upper flags: the kind of test and its direction.
pub mod upper {
    /// `--isochronous`: frames at a fixed rate.
    pub const ISOCH: u16 = 0x0001;
    /// UDP: the server sends no report at the end (iperf 2's client sets it with `--full-duplex`).
    pub const NOUDPFIN: u16 = 0x0008;
    /// `--trip-times`: one-way delays, the clocks assumed synchronized.
    pub const TRIPTIME: u16 = 0x0010;
    /// The isochronous settings follow the start time.
    pub const ISOCH_SETTINGS: u16 = 0x0040;
    /// `-b` was given (the rate words hold it).
    pub const BWSET: u16 = 0x0100;
    /// `-R`: the server sends.
    pub const REVERSE: u16 = 0x0400;
    /// `--full-duplex`: both send on the one connection.
    pub const FULLDUPLEX: u16 = 0x0800;
    /// `--txstart-time`: the client starts at the epoch time in its header.
    pub const EPOCH_START: u16 = 0x1000;
    /// `--fq-rate`: each socket paced by the kernel (SO_MAX_PACING_RATE) at the rate after the
    /// start time (bytes a second, two words, lower first).
    pub const FQRATESET: u16 = 0x0200;
    /// `--burst-period`/`--burst-size`: writes in periodic bursts.
    pub const PERIODICBURST: u16 = 0x2000;
    /// `--tcp-write-prefetch` with `-R` or `--full-duplex`: the server holds its unsent data to
    /// the extension's write prefetch (TCP_NOTSENT_LOWAT).
    pub const WRITEPREFETCH: u16 = 0x4000;
    /// `--tcp-quickack` where the server receives (not `-R` alone): it acknowledges each read at once.
    pub const TCPQUICKACK: u16 = 0x8000;
}

/// The version-1 fields' size.
pub const V1_BYTES: usize = 24;
/// The extension's size as 2.1.x sends it.
pub const EXTENSION_BYTES: usize = 36;
/// The longest header the length field can declare.
pub const MAX_HEADER_BYTES: usize = (flags::LEN_MASK >> 1) as usize;

/// How much a test moves: bytes (`-n`) or time (`-t`, sent in hundredths of a second, negated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// `-n`: bytes in all (31 bits on the wire).
    Bytes(u32),
    /// `-t`: hundredths of a second.
    Centiseconds(u32),
}

impl Amount {
    fn from_wire(v: i32) -> Amount {
        if v < 0 {
            Amount::Centiseconds(v.unsigned_abs())
        } else {
            Amount::Bytes(v as u32)
        }
    }

    fn to_wire(self) -> i32 {
        match self {
            Amount::Bytes(n) => (n & 0x7FFF_FFFF) as i32,
            // Negated, up to 2^31 (i32::MIN on the wire, as `from_wire` reads it back).
            Amount::Centiseconds(c) => (-i64::from(c.min(1 << 31))) as i32,
        }
    }

    /// The test's length, when it is given as time.
    pub fn duration(self) -> Option<Duration> {
        match self {
            Amount::Centiseconds(c) => Some(Duration::from_millis(u64::from(c) * 10)),
            Amount::Bytes(_) => None,
        }
    }
}

/// The sender's iperf version: 2.1.8 is major 2, minor 1, patch 8; `release` 3 is a final release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Major.
    pub major: u16,
    /// Minor.
    pub minor: u16,
    /// Patch.
    pub patch: u16,
    /// The kind of release (3: final; lower: development and release candidates).
    pub release: u16,
}

/// The extension: the test's kind and direction, the sender's version and rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension {
    /// Its type and length words (0 and 0 from 2.1.8).
    pub type_len: (i32, i32),
    /// The kind of test and its direction ([`upper`]).
    pub upper: u16,
    /// More settings (0 from 2.1.8 in every test captured).
    pub lower: u16,
    /// Who sent it.
    pub version: Version,
    /// A reserved half-word, kept.
    pub reserved: u16,
    /// The type of service asked for.
    pub tos: u16,
    /// `-b`, bits per second (UDP's default 1 Mbit/s is sent; 0 for TCP without `-b`).
    pub rate_bps: u64,
    /// The write prefetch (`--tcp-write-prefetch`).
    pub write_prefetch: u32,
}

/// A client's test header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHeader {
    /// The first word as sent ([`flags`]; its low bits hold the length).
    pub flags: u32,
    /// `-P`: streams in the test.
    pub threads: u32,
    /// The port the client named (for a test back, the port it listens on).
    pub port: u16,
    /// `-l`, bytes per write (0: the default).
    pub buffer_len: u32,
    /// The window or bandwidth field (`-w`), as sent.
    pub window_band: i32,
    /// `-n` or `-t`.
    pub amount: Amount,
    /// The extension, when the flags announce it.
    pub extension: Option<Extension>,
    /// The bytes after the extension up to the declared length, as sent.
    pub rest: Vec<u8>,
}

/// Why the first bytes are no iperf 2 header.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// Fewer bytes than the header needs.
    #[error("{got} bytes of an iperf 2 header that needs {need}")]
    Short {
        /// Bytes given.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Neither the version-1 nor the extension bit is set.
    #[error("flags {0:#010x} announce no iperf 2 header")]
    NoHeader(u32),
    /// The length field says less than its own flags need.
    #[error("the header declares {declared} bytes, its flags need at least {need}")]
    TooShortDeclared {
        /// Bytes declared (counted from the datagram's start in UDP).
        declared: usize,
        /// Bytes its parts need.
        need: usize,
    },
}

use crate::be32 as word;

fn half(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl ClientHeader {
    /// What a UDP datagram of `datagram_bytes` in iperf 2's small trip-times form tells (its
    /// flags word `SMALL_TRIPTIMES` and nothing more): one stream with trip times, datagrams of
    /// that size, no rate, no version, and no length (iperf 2's default, 10 s, stands in for it;
    /// the test runs until the client's end), as iperf 2.1.8's server takes it.
    pub fn small_trip_times(datagram_bytes: u32) -> ClientHeader {
        ClientHeader {
            flags: flags::SMALL_TRIPTIMES,
            threads: 1,
            port: 0,
            buffer_len: datagram_bytes,
            window_band: 0,
            amount: Amount::Centiseconds(1000),
            extension: Some(Extension {
                type_len: (0, 0),
                upper: upper::TRIPTIME,
                lower: 0,
                version: Version {
                    major: 0,
                    minor: 0,
                    patch: 0,
                    release: 0,
                },
                reserved: 0,
                tos: 0,
                rate_bps: 0,
                write_prefetch: 0,
            }),
            rest: vec![],
        }
    }

    /// Whether this header stands for iperf 2's small trip-times form ([`small_trip_times`](Self::small_trip_times)).
    pub fn is_small_trip_times(&self) -> bool {
        self.flags == flags::SMALL_TRIPTIMES
    }

    /// The header's length in bytes from `b` on, its flags being `flags`: the declared length
    /// (counted from the datagram's start: `prefix` is 16 in UDP, 0 on TCP) less the prefix; or,
    /// from a sender that declares none, the parts its flags announce.
    pub fn len_from_flags(flags: u32, prefix: usize) -> Result<usize, HeaderError> {
        let need = if flags & flags::EXTEND != 0 {
            V1_BYTES + EXTENSION_BYTES
        } else if flags & flags::VERSION1 != 0 {
            V1_BYTES
        } else {
            return Err(HeaderError::NoHeader(flags));
        };
        if flags & flags::LEN_BIT == 0 {
            return Ok(need);
        }
        let declared = ((flags & flags::LEN_MASK) >> 1) as usize;
        match declared.checked_sub(prefix) {
            Some(n) if n >= need => Ok(n),
            _ => Err(HeaderError::TooShortDeclared {
                declared,
                need: need + prefix,
            }),
        }
    }

    /// Parses the header at the start of `b` (`prefix` as in [`Self::len_from_flags`]); returns it
    /// and the bytes it took (the rest of `b` is the test's data).
    pub fn parse(b: &[u8], prefix: usize) -> Result<(ClientHeader, usize), HeaderError> {
        if b.len() < 4 {
            return Err(HeaderError::Short {
                got: b.len(),
                need: 4,
            });
        }
        let flags = word(b, 0);
        let len = Self::len_from_flags(flags, prefix)?;
        if b.len() < len {
            return Err(HeaderError::Short {
                got: b.len(),
                need: len,
            });
        }
        let extension = (flags & flags::EXTEND != 0).then(|| extension(&b[V1_BYTES..]));
        let ext_end = V1_BYTES + extension.map_or(0, |_| EXTENSION_BYTES);
        let h = ClientHeader {
            flags,
            threads: word(b, 4),
            port: word(b, 8) as u16,
            buffer_len: word(b, 12),
            window_band: word(b, 16) as i32,
            amount: Amount::from_wire(word(b, 20) as i32),
            extension,
            rest: b[ext_end..len].to_vec(),
        };
        Ok((h, len))
    }

    /// The header as iperf 2.1.8 writes it: the flags as held, the parts, the kept bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(V1_BYTES + EXTENSION_BYTES + self.rest.len());
        for w in [
            self.flags,
            self.threads,
            u32::from(self.port),
            self.buffer_len,
            self.window_band as u32,
            self.amount.to_wire() as u32,
        ] {
            out.extend_from_slice(&w.to_be_bytes());
        }
        if let Some(e) = &self.extension {
            encode_extension(e, &mut out);
        }
        out.extend_from_slice(&self.rest);
        out
    }

    /// `-r` (one direction then the other) or `-d` (both at once): a test the server opens back
    /// (`VERSION1` without `VERSION2`, as iperf 2.1.8's server reads it).
    pub fn dual(&self) -> Option<Dual> {
        let v1 = self.flags & flags::VERSION1 != 0 && self.flags & flags::VERSION2 == 0;
        v1.then_some(if self.flags & flags::RUN_NOW != 0 {
            Dual::Simultaneous
        } else {
            Dual::Tradeoff
        })
    }

    /// Whether the extension's upper flags carry `bit` ([`upper`]).
    pub fn has(&self, bit: u16) -> bool {
        self.extension.is_some_and(|e| e.upper & bit != 0)
    }

    /// This header telling the server of the client's `--tcp-write-prefetch` (bytes) and
    /// `--tcp-quickack` as iperf 2.1.8 tells it (captured): the prefetch, with its value, only
    /// when the server sends (`-R`, `--full-duplex`), quickack only when it receives (not `-R`
    /// alone). A header without the extension is left as it is.
    pub fn asking(mut self, write_prefetch: Option<u32>, quickack: bool) -> ClientHeader {
        let (reverse, both) = (self.has(upper::REVERSE), self.has(upper::FULLDUPLEX));
        let Some(e) = self.extension.as_mut() else {
            return self;
        };
        if let Some(bytes) = write_prefetch.filter(|b| *b > 0 && (reverse || both)) {
            e.upper |= upper::WRITEPREFETCH;
            e.write_prefetch = bytes;
        }
        if quickack && (!reverse || both) {
            e.upper |= upper::TCPQUICKACK;
        }
        self
    }

    /// The pace the client's `--fq-rate` asks of every socket of the test, bytes a second
    /// (`FQRATESET` and its two words after the start time, as iperf 2.1.8 writes them); None
    /// when not asked or 0.
    pub fn fq_rate_bytes_per_s(&self) -> Option<u64> {
        let word = |at: usize| self.rest.get(at..at + 4).map(|b| u64::from(crate::be32(b, 0)));
        let pace = word(FQ_AT)? | word(FQ_AT + 4)? << 32;
        (self.has(upper::FQRATESET) && pace > 0).then_some(pace)
    }

    /// This TCP header asking every socket of the test paced at `bytes_per_s` (`--fq-rate`), as
    /// iperf 2.1.8 writes it: the `FQRATESET` bit, the pace's two words after the start time (the
    /// header lengthened to hold them when it was shorter) and no `-b` rate (the pace is the
    /// test's rate). Call before [`started`](Self::started), which writes the start time.
    pub fn paced(mut self, bytes_per_s: u64) -> ClientHeader {
        let Some(e) = self.extension.as_mut() else {
            return self;
        };
        e.upper |= upper::FQRATESET;
        e.rate_bps = 0;
        if self.rest.len() < FQ_AT + 8 {
            self.rest.resize(FQ_AT + 8, 0);
            let len = (V1_BYTES + EXTENSION_BYTES + self.rest.len()) as u32;
            self.flags = (self.flags & !flags::LEN_MASK) | flags::LEN_BIT | len << 1;
        }
        self.rest[FQ_AT..FQ_AT + 4].copy_from_slice(&(bytes_per_s as u32).to_be_bytes());
        self.rest[FQ_AT + 4..FQ_AT + 8].copy_from_slice(&((bytes_per_s >> 32) as u32).to_be_bytes());
        self
    }

    /// The unsent data a server that sends on this stream (`-R`, `--full-duplex`) should hold its
    /// socket to, bytes (`WRITEPREFETCH` and a value above 0, as iperf 2.1.8's server takes it).
    pub fn write_prefetch(&self) -> Option<u32> {
        let sends = self.has(upper::REVERSE) || self.has(upper::FULLDUPLEX);
        let asked = self.has(upper::WRITEPREFETCH) && sends;
        self.extension
            .map(|e| e.write_prefetch)
            .filter(|b| asked && *b > 0)
    }

    /// The client's start time, which a header with trip times carries after the extension (its
    /// second and third words: the first is reserved), if the header is that long.
    pub fn start_time(&self) -> Option<crate::ack::WireTime> {
        let word = |at: usize| self.rest.get(at..at + 4).map(|b| crate::be32(b, 0));
        Some(crate::ack::WireTime {
            secs: word(START_AT)?,
            micros: word(START_AT + 4)?,
        })
    }

    /// When a `--txstart-time` client's traffic starts (its header's `EPOCH_START` bit, and the start
    /// time's words, which then hold the scheduled start rather than the send time).
    pub fn epoch_start(&self) -> Option<crate::ack::WireTime> {
        self.has(upper::EPOCH_START).then(|| self.start_time()).flatten()
    }

    /// This TCP header scheduled to start at `at` (`--txstart-time`): the `EPOCH_START` bit, and
    /// the start time's words (added after the extension, the length with them, when the header
    /// had none), as iperf 2.1.8 writes it.
    pub fn scheduled(mut self, at: crate::ack::WireTime) -> ClientHeader {
        let Some(e) = self.extension.as_mut() else {
            return self;
        };
        e.upper |= upper::EPOCH_START;
        if self.rest.len() < START_AT + 16 {
            self.rest.resize(START_AT + 16, 0);
            let len = (V1_BYTES + EXTENSION_BYTES + self.rest.len()) as u32;
            self.flags = (self.flags & !flags::LEN_MASK) | flags::LEN_BIT | len << 1;
        }
        self.started(at)
    }

    /// This header with `start` as the client's start time (a header with trip times; else as it
    /// is).
    pub fn started(mut self, start: crate::ack::WireTime) -> ClientHeader {
        if self.rest.len() >= START_AT + 8 {
            self.rest[START_AT..START_AT + 4].copy_from_slice(&start.secs.to_be_bytes());
            self.rest[START_AT + 4..START_AT + 8].copy_from_slice(&start.micros.to_be_bytes());
        }
        self
    }

    /// The header a server sends first on a stream it sends to a `--trip-times` client (`-R` or
    /// `--full-duplex`; iperf 2.1.8's client reads its length from the flags and the server's
    /// start time from it, then the bursts): this header, the rate cleared and `start` in place
    /// of the client's; with `-R` its `VERSION2` and `REVERSE` flags cleared too, as iperf 2.1.8's
    /// server sends it (captured).
    pub fn sender_echo(&self, start: crate::ack::WireTime) -> Vec<u8> {
        let mut h = self.clone();
        if let (false, Some(e)) = (self.has(upper::FULLDUPLEX), h.extension.as_mut()) {
            h.flags &= !flags::VERSION2;
            e.upper &= !upper::REVERSE;
        }
        if let Some(e) = h.extension.as_mut() {
            e.rate_bps = 0;
        }
        h.started(start).encode()
    }
}

/// Where the start time sits in what follows the extension (bytes).
const START_AT: usize = 4;
/// Where the fair-queue pace sits in what follows the extension (bytes): after the start time.
const FQ_AT: usize = START_AT + 8;

/// The two old ways to test both directions, each on connections the server opens back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dual {
    /// `-r`: the client's test, then the server's.
    Tradeoff,
    /// `-d`: both at once.
    Simultaneous,
}

fn extension(b: &[u8]) -> Extension {
    Extension {
        type_len: (word(b, 0) as i32, word(b, 4) as i32),
        upper: half(b, 8),
        lower: half(b, 10),
        version: Version {
            major: half(b, 12),
            minor: half(b, 14),
            patch: half(b, 16),
            release: half(b, 18),
        },
        reserved: half(b, 20),
        tos: half(b, 22),
        rate_bps: u64::from(word(b, 24)) | u64::from(word(b, 28)) << 32,
        write_prefetch: word(b, 32),
    }
}

fn encode_extension(e: &Extension, out: &mut Vec<u8>) {
    out.extend_from_slice(&(e.type_len.0 as u32).to_be_bytes());
    out.extend_from_slice(&(e.type_len.1 as u32).to_be_bytes());
    let v = e.version;
    for h in [
        e.upper, e.lower, v.major, v.minor, v.patch, v.release, e.reserved, e.tos,
    ] {
        out.extend_from_slice(&h.to_be_bytes());
    }
    out.extend_from_slice(&(e.rate_bps as u32).to_be_bytes());
    out.extend_from_slice(&((e.rate_bps >> 32) as u32).to_be_bytes());
    out.extend_from_slice(&e.write_prefetch.to_be_bytes());
}

#[cfg(test)]
pub(crate) mod tests;
