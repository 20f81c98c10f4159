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

/// Why bytes are not a header ack.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Fewer bytes than its length words need.
    #[error("{0} bytes of a header ack")]
    Short(usize),
    /// Not the ack's type, or a length iperf 2 does not send.
    #[error("type {kind} and length {len} are no iperf 2 header ack")]
    NotAnAck {
        /// The type word.
        kind: u32,
        /// The length word.
        len: u32,
    },
}

impl HeaderAck {
    /// The ack's whole length from its first 8 bytes (its type and length words): 28, or 52 with
    /// the trip-time stamps.
    pub fn declared_len(first: &[u8]) -> Result<usize, AckError> {
        if first.len() < 8 {
            return Err(AckError::Short(first.len()));
        }
        let (kind, len) = (crate::be32(first, 0), crate::be32(first, 4));
        match (kind, len as usize) {
            (ACK_TYPE, n @ (ACK_BYTES | ACK_TIMED_BYTES)) => Ok(n),
            _ => Err(AckError::NotAnAck { kind, len }),
        }
    }

    /// Reads an ack (all of its declared length): the server's version, and its stamps when it
    /// sent them.
    pub fn parse(b: &[u8]) -> Result<HeaderAck, AckError> {
        let len = Self::declared_len(b)?;
        if b.len() < len {
            return Err(AckError::Short(b.len()));
        }
        let w = |i: usize| crate::be32(b, 4 * i);
        let half = |x: u32| ((x >> 16) as u16, x as u16);
        let ((major, minor), (patch, release)) = (half(w(3)), half(w(4)));
        let t = |i: usize| WireTime {
            secs: w(i),
            micros: w(i + 1),
        };
        Ok(HeaderAck {
            version: Version {
                major,
                minor,
                patch,
                release,
            },
            times: (len == ACK_TIMED_BYTES).then(|| AckTimes {
                sent: t(7),
                received: t(9),
                acked: t(11),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    #[test]
    fn an_ack_reads_back_as_written_and_junk_is_named() {
        let captured = unhex("000000020000001c0000000000020001000800030000000000000000");
        let ack = HeaderAck::parse(&captured).unwrap();
        assert_eq!((ack.version, ack.times), (SPOKEN, None));
        let timed = HeaderAck {
            version: SPOKEN,
            times: Some(AckTimes {
                sent: WireTime { secs: 1, micros: 2 },
                received: WireTime { secs: 3, micros: 4 },
                acked: WireTime { secs: 5, micros: 6 },
            }),
        };
        assert_eq!(HeaderAck::parse(&timed.encode()), Ok(timed));
        assert_eq!(HeaderAck::declared_len(&captured[..8]), Ok(ACK_BYTES));
        assert_eq!(HeaderAck::parse(&captured[..20]), Err(AckError::Short(20)));
        assert!(matches!(
            HeaderAck::declared_len(&[0, 0, 0, 3, 0, 0, 0, 28]),
            Err(AckError::NotAnAck { kind: 3, len: 28 })
        ));
        assert!(HeaderAck::declared_len(&[0, 0, 0, 2, 0, 0, 1, 0]).is_err());
    }

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
