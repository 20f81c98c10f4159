//! One answer to "can this result be trusted". The run's exit code, a sweep cell's status, a mesh
//! test's status, the server's log line and the record rules all ask this module, so a result that one
//! of them accepts is never refused by another. The rules (docs/metrics.md, "The verdict"):
//!
//! - an interrupted test is untrusted (its figures cover only part of what was asked);
//! - a corrupt block, a stream that failed, or a file whose digests were not confirmed is untrusted;
//! - over landspeed's own TCP protocol every byte sent must have been received. UDP loses datagrams by
//!   nature (loss is a measurement there, reported as such), and an iperf3 peer stops counting when
//!   TEST_END arrives, which may overtake the last data (iperf3's design): neither is held to it.

use crate::result::RunResult;
use serde::{Deserialize, Serialize};

/// Why a result cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Untrusted {
    /// Ctrl-C stopped the test.
    #[error("interrupted")]
    Interrupted,
    /// Received bytes did not match the payload.
    #[error("{blocks} corrupt blocks")]
    Corrupt {
        /// 256-byte blocks with a wrong byte.
        blocks: u64,
    },
    /// A stream (or an end) failed.
    #[error("{message}")]
    StreamFailed {
        /// The stream, when the failure belongs to one.
        stream: Option<u32>,
        /// What failed.
        message: String,
    },
    /// Fewer bytes arrived than were sent.
    #[error("sent {sent} bytes but {received} arrived")]
    Shortfall {
        /// Bytes sent.
        sent: u64,
        /// Bytes received.
        received: u64,
    },
    /// A received file's digest was not confirmed.
    #[error("the received file's digest was not confirmed")]
    FileUnverified,
}

/// The verdict on one result: trusted, or untrusted with every reason found (first is the gravest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Nothing speaks against the result.
    Trusted,
    /// Every reason found, gravest first.
    Untrusted(Vec<Untrusted>),
}

impl Verdict {
    /// The result can be trusted.
    pub fn is_trusted(&self) -> bool {
        matches!(self, Verdict::Trusted)
    }

    /// The gravest reason, if any.
    pub fn first_reason(&self) -> Option<&Untrusted> {
        match self {
            Verdict::Trusted => None,
            Verdict::Untrusted(r) => r.first(),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Trusted => f.write_str("trusted"),
            Verdict::Untrusted(r) => {
                let parts: Vec<String> = r.iter().map(ToString::to_string).collect();
                write!(f, "untrusted: {}", parts.join("; "))
            }
        }
    }
}

/// The facts a verdict is drawn from: a whole result has them all; a server's log of its own half
/// has what that end saw.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// The test was stopped early.
    pub interrupted: bool,
    /// Blocks that did not match the payload.
    pub corrupt_blocks: u64,
    /// Failures, with the stream they happened on when known.
    pub errors: Vec<(Option<u32>, String)>,
    /// (sent, received) when both ends' counts are known and must agree (landspeed's TCP protocol).
    pub exact_count: Option<(u64, u64)>,
    /// Some(false) when a file was moved and its digests were not confirmed.
    pub file_verified: Option<bool>,
}

impl Evidence {
    /// Applies the rules, in order of gravity.
    pub fn judge(&self) -> Verdict {
        let mut why = vec![];
        if self.interrupted {
            why.push(Untrusted::Interrupted);
        }
        if self.corrupt_blocks > 0 {
            why.push(Untrusted::Corrupt {
                blocks: self.corrupt_blocks,
            });
        }
        why.extend(
            self.errors
                .iter()
                .map(|(stream, message)| Untrusted::StreamFailed {
                    stream: *stream,
                    message: message.clone(),
                }),
        );
        if let Some((sent, received)) = self.exact_count {
            if sent != received {
                why.push(Untrusted::Shortfall { sent, received });
            }
        }
        if self.file_verified == Some(false) {
            why.push(Untrusted::FileUnverified);
        }
        if why.is_empty() {
            Verdict::Trusted
        } else {
            Verdict::Untrusted(why)
        }
    }
}

impl RunResult {
    /// The facts of this result that the verdict rules read.
    pub fn evidence(&self) -> Evidence {
        // The counts of a foreign server are its own (iperf3) or inferred (QUIC perf): not exact.
        // An ndt7 server's count is in its measurements, every 250 ms: it trails.
        let iperf3 = matches!(self.protocol.as_str(), "iperf3" | "quic-perf" | "ndt7");
        // UDP loses datagrams by nature (its loss is a figure of its own), whether or not a receiver
        // reported (a multicast sender's result has none).
        let udp = self.summary.udp.is_some() || self.config.spec.transport == crate::config::Transport::Udp;
        Evidence {
            interrupted: self.interrupted,
            corrupt_blocks: self.summary.corrupt_blocks,
            errors: self
                .streams
                .iter()
                .flat_map(|s| s.errors.iter().map(move |e| (Some(s.id), e.clone())))
                .collect(),
            exact_count: (!iperf3 && !udp).then_some((self.summary.bytes_sent, self.summary.bytes_received)),
            file_verified: self.file.as_ref().map(|f| f.verified),
        }
    }

    /// Trusted, or untrusted with typed reasons (this module's rules).
    pub fn verdict(&self) -> Verdict {
        self.evidence().judge()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_has_its_reason() {
        assert_eq!(Evidence::default().judge(), Verdict::Trusted);
        let cases = [
            (
                Evidence {
                    interrupted: true,
                    ..Evidence::default()
                },
                Untrusted::Interrupted,
            ),
            (
                Evidence {
                    corrupt_blocks: 3,
                    ..Evidence::default()
                },
                Untrusted::Corrupt { blocks: 3 },
            ),
            (
                Evidence {
                    errors: vec![(Some(2), "reset".into())],
                    ..Evidence::default()
                },
                Untrusted::StreamFailed {
                    stream: Some(2),
                    message: "reset".into(),
                },
            ),
            (
                Evidence {
                    exact_count: Some((10, 9)),
                    ..Evidence::default()
                },
                Untrusted::Shortfall {
                    sent: 10,
                    received: 9,
                },
            ),
            (
                Evidence {
                    file_verified: Some(false),
                    ..Evidence::default()
                },
                Untrusted::FileUnverified,
            ),
        ];
        for (e, reason) in cases {
            assert_eq!(e.judge(), Verdict::Untrusted(vec![reason]));
        }
        let equal = Evidence {
            exact_count: Some((10, 10)),
            file_verified: Some(true),
            ..Evidence::default()
        };
        assert!(equal.judge().is_trusted());
    }

    #[test]
    fn the_gravest_reason_comes_first_and_all_are_kept() {
        let e = Evidence {
            interrupted: true,
            corrupt_blocks: 1,
            exact_count: Some((2, 1)),
            ..Evidence::default()
        };
        let v = e.judge();
        assert_eq!(v.first_reason(), Some(&Untrusted::Interrupted));
        assert_eq!(
            v.to_string(),
            "untrusted: interrupted; 1 corrupt blocks; sent 2 bytes but 1 arrived"
        );
    }
}
