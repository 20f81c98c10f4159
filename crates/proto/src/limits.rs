//! What a server allows one test: a bound on streams, duration, bytes and UDP rate. The server
//! advertises its limits in the welcome and refuses a request over any of them, naming the limit and the
//! flag that sets it, so the client's user knows exactly what to change.

use landspeed_core::config::{EndCondition, IoBackend, TestSpec, Transport};
use serde::{Deserialize, Serialize};
use std::time::Duration;

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
    /// The most memory one test may need at the server by `memory::server_estimate`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory_bytes: Option<u64>,
    /// The most worker threads a test may ask the server for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_server_threads: Option<u32>,
    /// The deepest io_uring queue a test may ask for, operations per stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queue_depth: Option<u32>,
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
    /// More memory at the server than it allows one test, bytes (by `memory::server_estimate`).
    #[error(
        "this test would need about {} of memory on this server, which allows {} per test (fewer streams or a smaller write size fit)",
        super::memory::human(*asked),
        super::memory::human(*max)
    )]
    Memory {
        /// The server's limit.
        max: u64,
        /// The estimate for the request.
        asked: u64,
    },
    /// Too many worker threads asked for.
    #[error("this server runs at most {max} worker threads per test; the test asked for {asked}")]
    Threads {
        /// The server's limit.
        max: u32,
        /// What the test asked for.
        asked: u32,
    },
    /// An io_uring queue too deep.
    #[error("this server allows an io_uring queue depth of at most {max}; the test asked for {asked}")]
    QueueDepth {
        /// The server's limit.
        max: u32,
        /// What the test asked for.
        asked: u32,
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
        self.check_memory(spec)
    }

    /// The memory limits: worker threads, queue depth, then the estimate as a whole.
    fn check_memory(&self, spec: &TestSpec) -> Option<OverLimit> {
        if let (Some(max), Some(asked)) = (self.max_server_threads, spec.server_threads) {
            if asked > max {
                return Some(OverLimit::Threads { max, asked });
            }
        }
        if let (Some(max), IoBackend::Uring) = (self.max_queue_depth, spec.io) {
            if spec.queue_depth > max {
                return Some(OverLimit::QueueDepth {
                    max,
                    asked: spec.queue_depth,
                });
            }
        }
        let max = self.max_memory_bytes?;
        let asked = super::memory::server_estimate(spec);
        (asked > max).then_some(OverLimit::Memory { max, asked })
    }
}

/// What a server allows a test while it runs, whatever ends it (a count, the clock, the client, or
/// nothing: an HTTP transfer): its length, the bytes it moves both ways, and its rate. Requests are
/// checked against [`Limits`] before a test starts; this is what holds a test that asked for little
/// and moves on regardless (a count at a crawl, a time test with no rate cap, a transfer with no end).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Running {
    /// The longest a test may run.
    pub max_duration: Option<Duration>,
    /// How far past `max_duration` it is cut (what is in flight drains meanwhile).
    pub grace: Duration,
    /// The most bytes it may move, both directions together.
    pub max_bytes: Option<u64>,
    /// The fastest it may move them, bits per second, both directions together.
    pub rate_bps: Option<f64>,
}

/// Why a running test was cut.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum Cut {
    /// It ran past the server's longest test.
    #[error("cut by the server at its limit of {max_s} s per test (after {ran_s:.1} s)")]
    Duration {
        /// The server's limit, seconds.
        max_s: f64,
        /// How long it had run.
        ran_s: f64,
    },
    /// It moved more than the server allows one test.
    #[error("cut by the server at its limit of {max} bytes per test (both directions)")]
    Bytes {
        /// The server's limit.
        max: u64,
    },
}

/// How far past `--max-duration` a test that asked for exactly that may run before it is cut: its
/// senders stop on time, its receivers drain what is in flight, and its results come after.
pub const DURATION_GRACE: Duration = Duration::from_secs(2);

impl Running {
    /// The running limits of a landspeed or iperf3 test on a server with `limits`: its duration with
    /// [`DURATION_GRACE`], its bytes, and (for a test the server does not pace itself) no rate.
    pub fn of(limits: &Limits) -> Running {
        Running {
            max_duration: limits.max_duration_s.map(|s| Duration::from_secs_f64(s.max(0.0))),
            grace: DURATION_GRACE,
            max_bytes: limits.max_bytes,
            rate_bps: None,
        }
    }

    /// Whether a test has run its longest (`max_duration`, before the grace): from then on what is in
    /// flight drains at full speed (a server's own rate cap no longer holds it back).
    pub fn over_length(&self, elapsed: Duration) -> bool {
        self.max_duration.is_some_and(|m| elapsed >= m)
    }

    /// Whether a test that has moved `bytes` in `elapsed` must be cut now.
    pub fn check(&self, bytes: u64, elapsed: Duration) -> Result<(), Cut> {
        if let Some(max) = self.max_duration.filter(|m| elapsed >= *m + self.grace) {
            return Err(Cut::Duration {
                max_s: max.as_secs_f64(),
                ran_s: elapsed.as_secs_f64(),
            });
        }
        match self.max_bytes {
            Some(max) if bytes > max => Err(Cut::Bytes { max }),
            _ => Ok(()),
        }
    }

    /// How long to hold off before moving more, `bytes` having moved in `elapsed`: None within the
    /// rate (or with none).
    pub fn wait(&self, bytes: u64, elapsed: Duration) -> Option<Duration> {
        let rate = self.rate_bps.filter(|r| *r > 0.0)?;
        let due = Duration::from_secs_f64(bytes as f64 * 8.0 / rate);
        due.checked_sub(elapsed).filter(|d| !d.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::config::Direction;

    #[test]
    fn a_running_test_is_cut_at_its_length_or_its_bytes_and_paced_to_its_rate() {
        let l = Limits {
            max_duration_s: Some(5.0),
            max_bytes: Some(1_000_000),
            ..Limits::default()
        };
        let r = Running::of(&l);
        assert_eq!(r.check(999_999, Duration::from_secs(6)), Ok(()));
        assert_eq!(
            r.check(0, Duration::from_secs(7)),
            Err(Cut::Duration {
                max_s: 5.0,
                ran_s: 7.0
            })
        );
        assert_eq!(
            r.check(1_000_001, Duration::from_secs(1)),
            Err(Cut::Bytes { max: 1_000_000 })
        );
        assert!(r
            .check(0, Duration::from_secs(9))
            .unwrap_err()
            .to_string()
            .contains("limit of 5 s per test"));
        assert_eq!(
            Running::of(&Limits::default()).check(u64::MAX, Duration::MAX),
            Ok(())
        );
        let paced = Running {
            rate_bps: Some(8e6),
            ..Running::default()
        };
        // 8 Mbit/s is 1 MB/s: 500 kB is due at 0.5 s.
        assert_eq!(paced.wait(500_000, Duration::from_millis(500)), None);
        assert_eq!(
            paced.wait(500_000, Duration::from_millis(200)),
            Some(Duration::from_millis(300))
        );
        assert_eq!(r.wait(u64::MAX, Duration::ZERO), None);
    }

    #[test]
    fn each_limit_names_itself() {
        let l = Limits {
            max_duration_s: Some(30.0),
            max_streams: Some(8),
            max_bytes: Some(1 << 30),
            max_rate_bps: Some(1e9),
            max_tests_per_minute: None,
            max_memory_bytes: Some(512 << 20),
            max_server_threads: Some(64),
            max_queue_depth: Some(16),
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
        let greedy = TestSpec {
            streams: 8,
            direction: Direction::Reverse,
            length_bytes: 64 << 20,
            ..TestSpec::default()
        };
        let Some(OverLimit::Memory { max, asked }) = l.check(&greedy) else {
            panic!("{:?}", l.check(&greedy));
        };
        assert_eq!(max, 512 << 20);
        let words = l.check(&greedy).unwrap().to_string();
        assert!(
            words.contains("of memory") && words.contains("512 MiB per test"),
            "{words}"
        );
        assert!(asked > max);
        let threads = TestSpec {
            server_threads: Some(65),
            streams: 8,
            ..TestSpec::default()
        };
        assert!(matches!(
            l.check(&threads),
            Some(OverLimit::Threads { max: 64, asked: 65 })
        ));
        let deep = TestSpec {
            io: IoBackend::Uring,
            queue_depth: 17,
            ..TestSpec::default()
        };
        assert!(matches!(
            l.check(&deep),
            Some(OverLimit::QueueDepth { max: 16, asked: 17 })
        ));
    }
}
