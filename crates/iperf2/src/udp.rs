//! A UDP datagram's first 16 bytes: its sequence number (32 bits, or 64 when the client's header
//! says `SEQNO64B`, the upper half in the fourth word) and when it was sent (seconds and
//! microseconds). A negative sequence number ends the test: the client repeats it until the
//! server answers with its report.

use thiserror::Error;

/// The prefix's size; the client's header follows it.
pub const PREFIX_BYTES: usize = 16;

/// Where a UDP datagram holds a `--txstart-time` client's scheduled start (its seconds, then
/// microseconds): after the prefix, the header, the extension, the isochronous payload's 32 bytes
/// and a reserved word, whatever length the header declares (iperf 2.1.8 counts them in it only
/// with trip times, fq pacing or frames; captured).
const UDP_EPOCH_AT: usize = 112;

/// The scheduled start a UDP datagram carries, when its header (`header`, parsed from it) flags one.
pub fn epoch_start(datagram: &[u8], header: &crate::ClientHeader) -> Option<crate::ack::WireTime> {
    if !header.has(crate::header::upper::EPOCH_START) {
        return None;
    }
    let words = datagram.get(UDP_EPOCH_AT..UDP_EPOCH_AT + 8)?;
    Some(crate::ack::WireTime {
        secs: crate::be32(words, 0),
        micros: crate::be32(words, 4),
    })
}

/// A datagram's sequence and send time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram {
    /// Its sequence number, from 1; negative: the test's end.
    pub seq: i64,
    /// When the client sent it: seconds of its clock.
    pub sent_s: u32,
    /// And microseconds.
    pub sent_us: u32,
}

/// Why a datagram is no iperf 2 datagram.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DatagramError {
    /// Shorter than the prefix.
    #[error("a {0}-byte datagram: iperf 2's carry at least 16")]
    Short(usize),
    /// Microseconds of a million or more.
    #[error("a send time of {0} microseconds past the second")]
    BadTime(u32),
}

use crate::be32 as word;

impl Datagram {
    /// Reads the prefix; `seq64` when the client's header has `SEQNO64B`.
    pub fn parse(b: &[u8], seq64: bool) -> Result<Datagram, DatagramError> {
        if b.len() < PREFIX_BYTES {
            return Err(DatagramError::Short(b.len()));
        }
        let (low, high) = (word(b, 0), word(b, 12));
        let seq = if seq64 {
            (u64::from(high) << 32 | u64::from(low)) as i64
        } else {
            i64::from(low as i32)
        };
        let sent_us = word(b, 8);
        if sent_us >= 1_000_000 {
            return Err(DatagramError::BadTime(sent_us));
        }
        Ok(Datagram {
            seq,
            sent_s: word(b, 4),
            sent_us,
        })
    }

    /// The test's end: the client's last datagram, repeated until the server reports.
    pub fn is_fin(&self) -> bool {
        self.seq < 0
    }

    /// The prefix as iperf 2.1.8 writes it (the upper half in the fourth word with `seq64`).
    pub fn encode(&self, seq64: bool) -> [u8; PREFIX_BYTES] {
        let mut out = [0u8; PREFIX_BYTES];
        let high = if seq64 { (self.seq as u64 >> 32) as u32 } else { 0 };
        for (i, w) in [self.seq as u32, self.sent_s, self.sent_us, high]
            .into_iter()
            .enumerate()
        {
            out[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}
