//! iperf 2's request/response test (`--bounceback`), without I/O. A bounceback client opens a TCP
//! connection and, instead of the test header, writes a request of `-l` bytes (100 by default) that
//! begins with this 64-byte header: the request's size, a burst id, flags (the server should set
//! `TCP_QUICKACK`, the clocks are synced, a type of service), the client's send time, slots the server
//! fills with its receive and send times, and a hold (microseconds the server waits before it answers).
//! The server reads each request whole, stamps it, waits the hold, stamps it again and writes the same
//! bytes back; the client times each round trip. There is no end message in 2.1.8: the client closes
//! (a `STOP` flag exists and ends the test when set). Captured from iperf 2.1.8 (docs/iperf2.md).

use crate::ack::WireTime;
use thiserror::Error;

/// The first word of a bounceback request (`HEADER_BOUNCEBACK`): no other flag is set.
pub const FLAG: u32 = 0x0080_0000;
/// The header's length: what iperf 2's server reads before the rest of the first request.
pub const HEADER_BYTES: usize = 64;
/// The header's fields (iperf 2's `struct bounceback_hdr`); its server reads four bytes more.
pub const FIELDS_BYTES: usize = 60;
/// The largest request landspeed's server answers (iperf 2 allows any `-l`; a request is held in
/// memory whole, so a server bounds it).
pub const MAX_REQUEST_BYTES: u32 = 1 << 20;
/// The longest hold landspeed's server grants, microseconds (longer holds are refused: a request that
/// asks the server to wait minutes holds a slot for nothing).
pub const MAX_HOLD_US: u32 = 10_000_000;
/// The fill byte iperf 2 writes in its requests' unused header fields.
pub const FILL: u8 = 0x5A;

/// The bounceback flags (a 16-bit word at byte 12).
pub mod bbflags {
    /// The server should set `TCP_QUICKACK` (iperf 2's default; `--bounceback-no-quickack` clears it).
    pub const QUICKACK: u16 = 0x8000;
    /// The clocks are synced (`--trip-times`): one-way delays are meaningful.
    pub const CLOCK_SYNCED: u16 = 0x4000;
    /// The type-of-service word is set.
    pub const TOS: u16 = 0x2000;
    /// The last request: the server stops after it.
    pub const STOP: u16 = 0x1000;
}

/// Why bytes are not a bounceback request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BounceError {
    /// Fewer bytes than the header.
    #[error("a bounceback header is {HEADER_BYTES} bytes; {0} came")]
    Short(usize),
    /// The first word is not the bounceback flag.
    #[error("not a bounceback request (first word {0:#010x})")]
    NotBounceback(u32),
    /// The request size is smaller than its header or larger than the server answers.
    #[error("bounceback size {0} bytes is outside {HEADER_BYTES}..={MAX_REQUEST_BYTES}")]
    Size(u32),
    /// The hold is longer than the server grants.
    #[error("bounceback hold {0} µs is longer than {MAX_HOLD_US} µs")]
    Hold(u32),
}

/// A bounceback request's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounce {
    /// The request's size, header included; the answer is as long.
    pub size: u32,
    /// The burst the request belongs to (iperf 2 numbers its period's bursts from 1).
    pub id: u32,
    /// [`bbflags`].
    pub flags: u16,
    /// The type of service asked for (with [`bbflags::TOS`]).
    pub tos: u16,
    /// When the client sent it.
    pub client_tx: WireTime,
    /// When the server read it (the client writes all ones).
    pub server_rx: WireTime,
    /// When the server answered (the client writes all ones).
    pub server_tx: WireTime,
    /// Microseconds the server waits between reading and answering.
    pub hold_us: u32,
}

const UNSET: WireTime = WireTime {
    secs: u32::MAX,
    micros: u32::MAX,
};

impl Bounce {
    /// A client's request header: `size` bytes, burst `id`, sent at `client_tx`.
    pub fn request(size: u32, id: u32, flags: u16, client_tx: WireTime, hold_us: u32) -> Bounce {
        Bounce {
            size,
            id,
            flags,
            tos: u16::from_be_bytes([FILL, FILL]),
            client_tx,
            server_rx: UNSET,
            server_tx: UNSET,
            hold_us,
        }
    }

    /// Reads a header (the first [`HEADER_BYTES`] of a request), checked as landspeed's server
    /// answers it: the flag word, a size from the header's to [`MAX_REQUEST_BYTES`], a bounded hold.
    pub fn parse(b: &[u8]) -> Result<Bounce, BounceError> {
        if b.len() < HEADER_BYTES {
            return Err(BounceError::Short(b.len()));
        }
        let w = |at| crate::be32(b, at);
        let time = |at| WireTime {
            secs: w(at),
            micros: w(at + 4),
        };
        if w(0) != FLAG {
            return Err(BounceError::NotBounceback(w(0)));
        }
        let size = w(4);
        if size < HEADER_BYTES as u32 || size > MAX_REQUEST_BYTES {
            return Err(BounceError::Size(size));
        }
        let hold_us = w(44);
        if hold_us > MAX_HOLD_US {
            return Err(BounceError::Hold(hold_us));
        }
        Ok(Bounce {
            size,
            id: w(8),
            flags: u16::from_be_bytes([b[12], b[13]]),
            tos: u16::from_be_bytes([b[14], b[15]]),
            client_tx: time(20),
            server_rx: time(28),
            server_tx: time(36),
            hold_us,
        })
    }

    /// Writes the header's fields into the first [`FIELDS_BYTES`] of `out` (the run time word, the
    /// client's RTT and read-time slots as iperf 2.1.8 leaves them: zero and the fill); the four
    /// bytes after them, up to [`HEADER_BYTES`], are the request's payload.
    pub fn write(&self, out: &mut [u8]) {
        let out = &mut out[..FIELDS_BYTES];
        out.fill(FILL);
        let mut put = |at: usize, v: u32| out[at..at + 4].copy_from_slice(&v.to_be_bytes());
        put(0, FLAG);
        put(4, self.size);
        put(8, self.id);
        put(16, 0);
        for (at, t) in [(20, self.client_tx), (28, self.server_rx), (36, self.server_tx)] {
            put(at, t.secs);
            put(at + 4, t.micros);
        }
        put(44, self.hold_us);
        out[12..14].copy_from_slice(&self.flags.to_be_bytes());
        out[14..16].copy_from_slice(&self.tos.to_be_bytes());
    }

    /// Whether a flag is set.
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// Stamps a request in place as the server does: its receive time (on reading it).
pub fn stamp_received(request: &mut [u8], at: WireTime) {
    put_time(request, 28, at);
}

/// Stamps a request in place as the server does: its send time (just before answering).
pub fn stamp_answered(request: &mut [u8], at: WireTime) {
    put_time(request, 36, at);
}

/// The server's two stamps in an answer: when it read the request and when it answered (all ones
/// when the server did not stamp).
pub fn server_times(answer: &[u8]) -> Option<(WireTime, WireTime)> {
    let b = Bounce::parse(answer).ok()?;
    Some((b.server_rx, b.server_tx))
}

fn put_time(b: &mut [u8], at: usize, t: WireTime) {
    if b.len() >= at + 8 {
        b[at..at + 4].copy_from_slice(&t.secs.to_be_bytes());
        b[at + 4..at + 8].copy_from_slice(&t.micros.to_be_bytes());
    }
}

/// Whether a connection's first bytes begin a bounceback request: None while they agree with the
/// flag word but fewer than its 4 bytes have come. The first word is the flag alone, so no other
/// protocol's greeting (an iperf 3 cookie's letters, landspeed's preamble, iperf 2's test header,
/// whose first byte has its top bits set) reads as one; the size and hold are checked by
/// [`Bounce::parse`], so a bad request is refused for what it is.
pub fn detect(first: &[u8]) -> Option<bool> {
    if first.iter().zip(FLAG.to_be_bytes()).any(|(a, b)| *a != b) {
        return Some(false);
    }
    (first.len() >= 4).then_some(true)
}

#[cfg(test)]
mod tests;
