//! What a server allows one test: a bound on streams, duration, bytes and UDP rate. The server
//! advertises its limits in the welcome and refuses a request over any of them, naming the limit and the
//! flag that sets it, so the client's user knows exactly what to change.

use crate::config::{EndCondition, TestSpec, Transport};
use serde::{Deserialize, Serialize};

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

impl Limits {
    /// Why `spec` is over a limit, or `None`.
    pub fn check(&self, spec: &TestSpec) -> Option<String> {
        if let Some(m) = self.max_streams {
            if spec.total_streams() > m {
                return Some(format!(
                    "this server allows at most {m} streams per test (--max-streams); the test asked for {}",
                    spec.total_streams()
                ));
            }
        }
        if let (Some(m), EndCondition::Time(t)) = (self.max_duration_s, spec.end) {
            let asked = (t + spec.omit_s).as_secs_f64();
            if asked > m {
                return Some(format!(
                    "this server allows tests of at most {m} s (--max-duration); the test asked for {asked} s"
                ));
            }
        }
        if let Some(m) = self.max_bytes {
            let per_flow = match spec.end {
                EndCondition::Bytes(b) => Some(b),
                EndCondition::Blocks(k) => Some(k.saturating_mul(spec.length_bytes)),
                EndCondition::Time(_) => None,
            };
            if let Some(total) = per_flow.map(|b| b.saturating_mul(spec.flows().len() as u64)) {
                if total > m {
                    return Some(format!(
                        "this server allows at most {m} bytes per test (--max-bytes); the test asked for {total}"
                    ));
                }
            }
        }
        if let (Some(m), Transport::Udp) = (self.max_rate_bps, spec.transport) {
            let asked = spec.udp_stream_rate_bps() * f64::from(spec.streams) * spec.flows().len() as f64;
            if asked > m {
                return Some(format!(
                    "this server allows UDP at most {m} bit/s (--max-rate); the test asked for {asked} bit/s"
                ));
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
        assert!(l.check(&many).unwrap().contains("--max-streams"));
        let long = TestSpec {
            end: EndCondition::Time(Duration::from_secs(25)),
            omit_s: Duration::from_secs(10),
            ..TestSpec::default()
        };
        assert!(l.check(&long).unwrap().contains("--max-duration"));
        let big = TestSpec {
            end: EndCondition::Bytes(600 << 20),
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        assert!(l.check(&big).unwrap().contains("--max-bytes"));
        let fast = TestSpec {
            transport: Transport::Udp,
            rate_bps: Some(2e9),
            length_bytes: 1448,
            ..TestSpec::default()
        };
        assert!(l.check(&fast).unwrap().contains("--max-rate"));
        assert_eq!(Limits::default().check(&fast), None);
    }
}
