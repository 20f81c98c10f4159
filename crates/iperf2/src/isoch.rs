//! iperf 2's isochronous fields in a UDP datagram (`--isochronous`): after the 16-byte prefix and
//! the client's 60-byte header, eight words: the frame period (µs), when the first frame was sent
//! (seconds, µs), the frame sent before this one, this frame's number, the frame's size, the bytes
//! left of it with this datagram's, and a reserved word. The header's length is then 108 and its
//! ISOCH bit (upper flags 0x0001) is set. iperf 2.1.8's client sends one datagram first with all
//! eight zero; its frames are numbered from 1. `landspeed_core::frames` counts them.

use crate::be32 as word;
use landspeed_core::frames::FrameDatagram;

/// Where the fields start in a datagram.
pub const AT: usize = 76;
/// Their size.
pub const BYTES: usize = 32;
/// A datagram of a frame is at least this long: prefix, header and these fields.
pub const MIN_DATAGRAM: usize = AT + BYTES;
/// With `--trip-times`, where the client's start time follows (seconds and microseconds, after a
/// reserved word; iperf 2.1.8 writes it beyond the declared 108 bytes, and its server ignores the
/// trip times without it).
pub const START_AT: usize = MIN_DATAGRAM + 4;

/// Writes the client's start time for `--trip-times` (the datagram at least `START_AT + 8` bytes).
pub fn write_start(datagram: &mut [u8], (s, us): (u32, u32)) {
    datagram[START_AT..START_AT + 4].copy_from_slice(&s.to_be_bytes());
    datagram[START_AT + 4..START_AT + 8].copy_from_slice(&us.to_be_bytes());
}

/// A datagram's frame fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FramePayload {
    /// Microseconds between frames.
    pub period_us: u32,
    /// When the sender sent its first frame: seconds of its clock.
    pub start_s: u32,
    /// And microseconds.
    pub start_us: u32,
    /// The frame sent before this one (0 before the first).
    pub prev: u32,
    /// This frame's number, from 1 (0: no frame).
    pub frame: u32,
    /// The frame's size, bytes.
    pub size: u32,
    /// Bytes left of the frame, this datagram's included.
    pub remaining: u32,
}

impl FramePayload {
    /// The fields of a datagram long enough to hold them and belonging to a frame.
    pub fn parse(datagram: &[u8]) -> Option<FramePayload> {
        if datagram.len() < MIN_DATAGRAM {
            return None;
        }
        let w = |i: usize| word(datagram, AT + 4 * i);
        let p = FramePayload {
            period_us: w(0),
            start_s: w(1),
            start_us: w(2),
            prev: w(3),
            frame: w(4),
            size: w(5),
            remaining: w(6),
        };
        (p.frame > 0 && p.start_us < 1_000_000).then_some(p)
    }

    /// Writes the fields into `datagram` (at least [`MIN_DATAGRAM`] bytes).
    pub fn write(&self, datagram: &mut [u8]) {
        let words = [
            self.period_us,
            self.start_s,
            self.start_us,
            self.prev,
            self.frame,
            self.size,
            self.remaining,
            0,
        ];
        for (i, v) in words.into_iter().enumerate() {
            datagram[AT + 4 * i..AT + 4 * i + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// When this frame was due on the sender's clock, Unix nanoseconds: the first frame's time
    /// plus a period for each frame before this one.
    pub fn due_ns(&self) -> i128 {
        let start = i128::from(self.start_s) * 1_000_000_000 + i128::from(self.start_us) * 1_000;
        start + i128::from(self.period_us) * 1_000 * i128::from(self.frame.saturating_sub(1))
    }

    /// The datagram as the frames' accounting reads it.
    pub fn datagram(&self, seq: u64, len: usize, arrival_ns: i128) -> FrameDatagram {
        FrameDatagram {
            frame: self.frame,
            prev: self.prev,
            seq,
            len: u32::try_from(len).unwrap_or(u32::MAX),
            remaining: self.remaining,
            size: self.size,
            due_ns: self.due_ns(),
            arrival_ns,
        }
    }
}

#[cfg(test)]
mod tests;
