//! UDP tests, sans-IO: the datagram header (landspeed's and iperf3's), the sender's pacing schedule, and
//! the receiver's accounting (loss, out-of-order, duplicates, RFC 3550 jitter). The I/O drivers feed
//! these with times they read from the clock, so every figure is tested deterministically here.
//!
//! Landspeed's datagram: sequence number (u64, big-endian, from 0) and the sender's clock at sending
//! (u64 nanoseconds), then payload from the run's pattern at stream offset `seq × payload length`, so
//! every datagram is verified like a TCP stream's bytes. iperf3's: seconds and microseconds (u32 each)
//! and a sequence number from 1 (u32, or u64 with `udp_counters_64bit`).

pub mod pacing;
pub mod receiver;

pub use pacing::Pacer;
pub use receiver::{UdpReceiver, UdpStats};

/// Bytes of landspeed's datagram header.
pub const HEADER: usize = 16;

/// The header of one datagram, whichever protocol wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sequence number counted from 0 (iperf3's, which start at 1, are shifted).
    pub seq: u64,
    /// The sender's clock when it sent the datagram, nanoseconds.
    pub sent_ns: u64,
}

impl Header {
    /// Writes landspeed's header at the start of `buf`.
    pub fn write(&self, buf: &mut [u8]) {
        buf[..8].copy_from_slice(&self.seq.to_be_bytes());
        buf[8..16].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// Reads landspeed's header from a datagram; None when it is too short.
    pub fn read(buf: &[u8]) -> Option<Header> {
        if buf.len() < HEADER {
            return None;
        }
        Some(Header {
            seq: u64::from_be_bytes(buf[..8].try_into().ok()?),
            sent_ns: u64::from_be_bytes(buf[8..16].try_into().ok()?),
        })
    }

    /// iperf3's header: seconds, microseconds, sequence (32 or 64 bits), all big-endian.
    pub fn write_iperf3(&self, buf: &mut [u8], wide: bool) {
        let secs = (self.sent_ns / 1_000_000_000) as u32;
        let usecs = ((self.sent_ns % 1_000_000_000) / 1000) as u32;
        buf[..4].copy_from_slice(&secs.to_be_bytes());
        buf[4..8].copy_from_slice(&usecs.to_be_bytes());
        let seq = self.seq + 1;
        if wide {
            buf[8..16].copy_from_slice(&seq.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
        }
    }

    /// Reads iperf3's header (32- or 64-bit sequence); None when the datagram is too short.
    pub fn read_iperf3(buf: &[u8], wide: bool) -> Option<Header> {
        let need = if wide { 16 } else { 12 };
        if buf.len() < need {
            return None;
        }
        let secs = u64::from(u32::from_be_bytes(buf[..4].try_into().ok()?));
        let usecs = u64::from(u32::from_be_bytes(buf[4..8].try_into().ok()?));
        let seq = if wide {
            u64::from_be_bytes(buf[8..16].try_into().ok()?)
        } else {
            u64::from(u32::from_be_bytes(buf[8..12].try_into().ok()?))
        };
        Some(Header {
            seq: seq.checked_sub(1)?,
            sent_ns: secs * 1_000_000_000 + usecs * 1000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header {
            seq: 123_456_789_012,
            sent_ns: 9_876_543_210_123,
        };
        let mut b = [0u8; 32];
        h.write(&mut b);
        assert_eq!(Header::read(&b), Some(h));
        assert_eq!(Header::read(&b[..15]), None);
        // iperf3 carries microseconds and counts from 1.
        let h = Header {
            seq: 41,
            sent_ns: 5_000_123_000,
        };
        for wide in [false, true] {
            h.write_iperf3(&mut b, wide);
            assert_eq!(Header::read_iperf3(&b, wide), Some(h));
        }
        assert_eq!(&b[8..16], &42u64.to_be_bytes());
        let zero = [0u8; 16];
        assert_eq!(
            Header::read_iperf3(&zero, false),
            None,
            "iperf3 sequence 0 does not exist"
        );
    }
}
