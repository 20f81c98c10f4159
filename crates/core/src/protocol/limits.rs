//! What a server allows one test: a bound on streams, duration, bytes and UDP rate. The server
//! advertises its limits in the welcome and refuses a request over any of them, naming the limit and the
//! flag that sets it, so the client's user knows exactly what to change.

use crate::config::{EndCondition, TestSpec, Transport};
use serde::{Deserialize, Serialize};

/// What a server allows a test to ask for (advertised in its welcome; None: no limit).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Longest test (warm-up included), seconds.
    pub max_duration_s: Option<f64>,
    /// Most data streams per test (both directions counted).
    pub max_streams: Option<u32>,
    /// Most bytes a test ending by bytes or blocks may move (both directions counted).
    pub max_bytes: Option<u64>,
    /// Fastest rate of a test, bits per second: UDP requests above it are refused, TCP tests are paced
    /// down to it by the server.
    pub max_rate_bps: Option<f64>,
    /// New tests one client address (IPv6: one /64) may start per minute.
    #[serde(default)]
    pub max_tests_per_minute: Option<u32>,
}

/// Which of a server's limits a test is over, and by how much. The text is what the refused client
/// shows its user: the limit in words (the flag that sets it is the server operator's, not the user's).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OverLimit {
    /// Too many streams.
    #[error("this server allows at most {max} streams per test; the test asked for {asked}")]
    Streams {
        /// The server's limit.
        max: u32,
        /// What the test asked for.
        asked: u32,
    },
    /// Too long, seconds.
    #[error("this server allows tests of at most {max} s; the test asked for {asked} s")]
    Duration {
        /// The server's limit.
        max: f64,
        /// What the test asked for.
        asked: f64,
    },
    /// Too many bytes.
    #[error("this server allows at most {max} bytes per test; the test asked for {asked}")]
    Bytes {
        /// The server's limit.
        max: u64,
        /// What the test asked for.
        asked: u64,
    },
    /// A UDP rate too high, bit/s.
    #[error("this server allows UDP at most {max} bit/s; the test asked for {asked} bit/s")]
    UdpRate {
        /// The server's limit.
        max: f64,
        /// What the test asked for.
        asked: f64,
    },
}

impl Limits {
    /// The first limit `spec` is over, or `None`.
    pub fn check(&self, spec: &TestSpec) -> Option<OverLimit> {
        if let Some(max) = self.max_streams {
            let asked = spec.total_streams();
            if asked > max {
                return Some(OverLimit::Streams { max, asked });
            }
        }
        if let (Some(max), EndCondition::Time(t)) = (self.max_duration_s, spec.end) {
            let asked = (t + spec.omit_s).as_secs_f64();
            if asked > max {
                return Some(OverLimit::Duration { max, asked });
            }
        }
        if let Some(max) = self.max_bytes {
            let per_flow = match spec.end {
                EndCondition::Bytes(b) => Some(b),
                EndCondition::Blocks(k) => Some(k.saturating_mul(spec.length_bytes)),
                EndCondition::Time(_) => None,
            };
            if let Some(asked) = per_flow.map(|b| b.saturating_mul(spec.flows().len() as u64)) {
                if asked > max {
                    return Some(OverLimit::Bytes { max, asked });
                }
            }
        }
        if let (Some(max), Transport::Udp) = (self.max_rate_bps, spec.transport) {
            let asked = spec.udp_stream_rate_bps() * f64::from(spec.streams) * spec.flows().len() as f64;
            if asked > max {
                return Some(OverLimit::UdpRate { max, asked });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Direction;
    use std::time::Duration;

    #[test]
    fn each_limit_names_itself() {
        let l = Limits {
            max_duration_s: Some(30.0),
            max_streams: Some(8),
            max_bytes: Some(1 << 30),
            max_rate_bps: Some(1e9),
            max_tests_per_minute: None,
        };
        let ok = TestSpec::default();
        assert_eq!(l.check(&ok), None);
        let many = TestSpec {
            streams: 5,
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        assert_eq!(l.check(&many), Some(OverLimit::Streams { max: 8, asked: 10 }));
        assert!(l
            .check(&many)
            .unwrap()
            .to_string()
            .contains("at most 8 streams per test"));
        let long = TestSpec {
            end: EndCondition::Time(Duration::from_secs(25)),
            omit_s: Duration::from_secs(10),
            ..TestSpec::default()
        };
        assert!(matches!(l.check(&long), Some(OverLimit::Duration { .. })));
        assert!(l.check(&long).unwrap().to_string().contains("tests of at most"));
        let big = TestSpec {
            end: EndCondition::Bytes(600 << 20),
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        assert!(matches!(l.check(&big), Some(OverLimit::Bytes { .. })));
        assert!(l.check(&big).unwrap().to_string().contains("bytes per test"));
        let fast = TestSpec {
            transport: Transport::Udp,
            rate_bps: Some(2e9),
            length_bytes: 1448,
            ..TestSpec::default()
        };
        assert!(matches!(l.check(&fast), Some(OverLimit::UdpRate { .. })));
        assert!(l.check(&fast).unwrap().to_string().contains("allows UDP at most"));
        assert_eq!(Limits::default().check(&fast), None);
    }
}
