//! The server's answer to a TCP client's header: iperf 2's "header ack", which carries the server's
//! version (and, with trip times, three timestamps for the client's clock check). iperf 2.1.8's
//! server sends it on every TCP test whose header has the extension without `VERSION2`, or asks for
//! it (`V2PEERDETECT`); its client reads it only with `-X` (peer detection), so a client that does not
//! read it leaves it unread in its socket, as against iperf 2's own server.

use crate::header::{flags, ClientHeader, Version};

/// The answer's type word (`CLIENTHDRACK` in iperf 2's message types).
pub const ACK_TYPE: u32 = 2;
/// Its length without timestamps.
pub const ACK_BYTES: usize = 28;
/// Its length with the trip-time timestamps.
pub const ACK_TIMED_BYTES: usize = ACK_BYTES + 24;

/// A time as iperf 2 writes it: seconds and microseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireTime {
    /// Seconds.
    pub secs: u32,
    /// Microseconds.
    pub micros: u32,
}

impl WireTime {
    /// A time in nanoseconds since the Unix epoch (iperf 2's 32-bit seconds wrap in 2106).
    pub fn from_unix_ns(ns: u64) -> WireTime {
        WireTime {
            secs: (ns / 1_000_000_000) as u32,
            micros: (ns % 1_000_000_000 / 1_000) as u32,
        }
    }
}

/// The clock check's timestamps: when the client sent its header (its own stamp), when the server
/// took the connection, when the server sent this answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckTimes {
    /// The client's start time from its header.
    pub sent: WireTime,
    /// When the server accepted the connection.
    pub received: WireTime,
    /// When the server wrote the answer.
    pub acked: WireTime,
}

/// The header ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderAck {
    /// The version the server says it speaks.
    pub version: Version,
    /// The timestamps, in a test with trip times.
    pub times: Option<AckTimes>,
}

/// The version landspeed's server announces: the iperf 2 release whose protocol it follows (its
/// tests are captures of 2.1.8).
pub const SPOKEN: Version = Version {
    major: 2,
    minor: 1,
    patch: 8,
    release: 3,
};

impl HeaderAck {
    /// Whether iperf 2's server answers `h` with an ack: a TCP header with the extension and without
    /// `VERSION2`, or one that asks (`V2PEERDETECT`).
    pub fn wanted(h: &ClientHeader) -> bool {
        let f = h.flags;
        (f & flags::VERSION2 == 0 && f & flags::EXTEND != 0) || f & flags::V2PEERDETECT != 0
    }

    /// The answer's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let len = if self.times.is_some() {
            ACK_TIMED_BYTES
        } else {
            ACK_BYTES
        };
        let v = self.version;
        let mut words = vec![
            ACK_TYPE,
            len as u32,
            0,
            u32::from(v.major) << 16 | u32::from(v.minor),
            u32::from(v.patch) << 16 | u32::from(v.release),
            0,
            0,
        ];
        if let Some(t) = self.times {
            for w in [t.sent, t.received, t.acked] {
                words.extend([w.secs, w.micros]);
            }
        }
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    #[test]
    fn the_plain_ack_is_what_iperf_2_1_8_sent() {
        // iperf 2.1.8's server to `iperf -c -t 1` (tcpdump on loopback).
        let captured = unhex("000000020000001c000000000002000100080003" /* */);
        let mut want = captured.clone();
        want.extend([0; 8]);
        let ack = HeaderAck {
            version: SPOKEN,
            times: None,
        };
        assert_eq!(ack.encode(), want);
        assert_eq!(ack.encode().len(), ACK_BYTES);
    }

    #[test]
    fn the_timed_ack_carries_the_three_stamps() {
        let t = |s, u| WireTime { secs: s, micros: u };
        let ack = HeaderAck {
            version: SPOKEN,
            times: Some(AckTimes {
                sent: t(1, 2),
                received: t(3, 4),
                acked: t(5, 6),
            }),
        };
        let b = ack.encode();
        assert_eq!(b.len(), ACK_TIMED_BYTES);
        assert_eq!(crate::be32(&b, 4), ACK_TIMED_BYTES as u32);
        let stamps: Vec<u32> = (0..6).map(|i| crate::be32(&b, 28 + 4 * i)).collect();
        assert_eq!(stamps, [1, 2, 3, 4, 5, 6]);
        assert_eq!(WireTime::from_unix_ns(1_500_000_123_456), t(1500, 123));
    }
}
