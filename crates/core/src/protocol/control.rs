//! Third-party control, without I/O. A controller (`run --from`, `mesh`) does not move data itself: it
//! asks a landspeed server that allows it (`serve --allow-control`) to run a test from there to another
//! server, and gets the `RunResult` back. Before ordering, it measures the host's clock against its own
//! with a few probes (NTP's four timestamps, the lowest-RTT sample wins), so that tests on many hosts can be
//! started at one instant and their intervals put on one clock. The order and the offset arithmetic live
//! here; the controller's conversation is `ControllerSession`.

use super::auth::{Challenge, Key, NONCE_LEN};
use super::messages::Message;
use super::preamble::PROTOCOL_VERSION;
use super::session::ProtocolError;
use crate::config::TestSpec;
use crate::result::RunResult;
use serde::{Deserialize, Serialize};

/// How many clock probes one control connection may send (they keep the connection open, so they are
/// bounded like every other wait).
pub const MAX_CLOCK_PROBES: u32 = 32;

/// A test a controller orders a server to run, from that server to `host:port`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlOrder {
    pub host: String,
    pub port: u16,
    pub spec: TestSpec,
    /// When to send `start`, on the ordered server's own clock (Unix time, nanoseconds). The server
    /// connects and readies the streams first, then waits for this instant. None: start when ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ns: Option<u64>,
}

/// How long a controller waits for an ordered test's result once the test should have started: the
/// test's own time and warm-up plus a minute for the handshakes and the results exchange; a test that ends
/// on a byte or block count gets an hour.
pub fn result_wait(spec: &TestSpec) -> std::time::Duration {
    use std::time::Duration;
    match spec.end {
        crate::config::EndCondition::Time(t) => t + spec.omit_s + Duration::from_secs(60),
        _ => Duration::from_secs(3600),
    }
}

/// One clock probe: the controller's send and receive times and the host's time in between (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSample {
    pub sent_ns: u64,
    pub host_ns: u64,
    pub received_ns: u64,
}

impl ClockSample {
    pub fn rtt_ns(&self) -> u64 {
        self.received_ns.saturating_sub(self.sent_ns)
    }

    /// Host clock minus controller clock, assuming the probe's two legs took equally long.
    pub fn offset_ns(&self) -> i64 {
        let mid = self.sent_ns as i128 + (self.rtt_ns() as i128) / 2;
        (self.host_ns as i128 - mid) as i64
    }
}

/// A host's clock against the controller's: the offset from the probe with the lowest RTT, whose
/// uncertainty is at most half that RTT.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Host clock minus controller clock.
    pub offset_ns: i64,
    /// RTT of the probe the offset came from; the offset is within ±rtt/2.
    pub rtt_ns: u64,
    pub probes: u32,
}

/// The offset from a set of probes, or None when there were none.
pub fn estimate_offset(samples: &[ClockSample]) -> Option<ClockOffset> {
    let best = samples.iter().min_by_key(|s| s.rtt_ns())?;
    Some(ClockOffset {
        offset_ns: best.offset_ns(),
        rtt_ns: best.rtt_ns(),
        probes: samples.len() as u32,
    })
}

/// What the controller learnt from a server's welcome.
#[derive(Debug, Clone, PartialEq)]
pub struct HostWelcome {
    pub software: String,
    /// The server takes third-party orders (`--allow-control`).
    pub control: bool,
    pub auth_required: bool,
}

/// The controller's side of one control connection: hello, welcome, clock probes, one order, its result.
#[derive(Debug)]
pub struct ControllerSession {
    key: Option<(Key, [u8; NONCE_LEN])>,
    challenge: Option<Challenge>,
    welcomed: bool,
    ordered: bool,
}

impl ControllerSession {
    /// `key` answers the server's challenge (with `client_nonce`, random bytes from the driver).
    pub fn new(key: Option<(Key, [u8; NONCE_LEN])>) -> Self {
        ControllerSession {
            key,
            challenge: None,
            welcomed: false,
            ordered: false,
        }
    }

    pub fn hello(&self) -> Message {
        Message::Hello {
            version: PROTOCOL_VERSION,
            software: format!("landspeed {} (controller)", crate::SOFTWARE_VERSION),
        }
    }

    pub fn on_welcome(&mut self, msg: Message) -> Result<HostWelcome, ProtocolError> {
        match msg {
            Message::Welcome {
                version,
                software,
                auth,
                control,
                ..
            } => {
                if version != PROTOCOL_VERSION {
                    return Err(ProtocolError::Version(version));
                }
                self.welcomed = true;
                let auth_required = auth.is_some();
                self.challenge = auth;
                Ok(HostWelcome {
                    software,
                    control,
                    auth_required,
                })
            }
            Message::Rejected { reason, code } => Err(ProtocolError::Rejected { code, reason }),
            Message::Error { message } => Err(ProtocolError::Remote(message)),
            other => Err(ProtocolError::Unexpected {
                phase: "waiting for the server's welcome",
                got: other.kind(),
            }),
        }
    }

    /// A clock probe sent at `now_ns` (controller clock).
    pub fn probe(&self, now_ns: u64) -> Message {
        Message::ClockProbe { client_ns: now_ns }
    }

    /// The answer to a probe, received at `now_ns`.
    pub fn on_clock(&self, msg: Message, now_ns: u64) -> Result<ClockSample, ProtocolError> {
        match msg {
            Message::Clock { client_ns, server_ns } if client_ns <= now_ns => Ok(ClockSample {
                sent_ns: client_ns,
                host_ns: server_ns,
                received_ns: now_ns,
            }),
            Message::Error { message } => Err(ProtocolError::Remote(message)),
            other => Err(ProtocolError::Unexpected {
                phase: "waiting for a clock reading",
                got: other.kind(),
            }),
        }
    }

    /// The order, with the answer to the server's challenge when it set one.
    pub fn order(&mut self, order: ControlOrder) -> Result<Message, ProtocolError> {
        if !self.welcomed || self.ordered {
            return Err(ProtocolError::BadLocalEvent {
                phase: if self.ordered {
                    "waiting for the result"
                } else {
                    "waiting for the server's welcome"
                },
                event: "order",
            });
        }
        let auth = match (&self.challenge, &self.key) {
            (None, _) => None,
            (Some(_), None) => return Err(ProtocolError::AuthRequired),
            (Some(c), Some((key, nonce))) => Some(Box::new(key.prove(c, nonce)?)),
        };
        self.ordered = true;
        Ok(Message::ControlRequest {
            order: Box::new(order),
            auth,
        })
    }

    /// The server's answer to the order.
    pub fn on_result(&self, msg: Message) -> Result<RunResult, ProtocolError> {
        match msg {
            Message::ControlResult { result } => Ok(*result),
            Message::Rejected { reason, code } => Err(ProtocolError::Rejected { code, reason }),
            Message::Error { message } => Err(ProtocolError::Remote(message)),
            other => Err(ProtocolError::Unexpected {
                phase: "waiting for the result",
                got: other.kind(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_rtt_probe_sets_the_offset() {
        // Host clock 5 ms ahead; the second probe's return leg was delayed by 4 ms.
        let s = [
            ClockSample {
                sent_ns: 1_000_000,
                host_ns: 6_500_000,
                received_ns: 2_000_000,
            },
            ClockSample {
                sent_ns: 10_000_000,
                host_ns: 15_100_000,
                received_ns: 14_200_000,
            },
        ];
        let o = estimate_offset(&s).unwrap();
        assert_eq!(o.rtt_ns, 1_000_000);
        assert_eq!(o.offset_ns, 5_000_000);
        assert_eq!(o.probes, 2);
        assert!(estimate_offset(&[]).is_none());
        // A host behind the controller gives a negative offset.
        let behind = ClockSample {
            sent_ns: 1_000_000_000,
            host_ns: 400_000_000,
            received_ns: 1_000_200_000,
        };
        assert_eq!(behind.offset_ns(), -600_100_000);
    }

    fn welcome(auth: Option<Challenge>, control: bool) -> Message {
        Message::Welcome {
            version: PROTOCOL_VERSION,
            software: "landspeed test".into(),
            limits: Default::default(),
            auth,
            control,
        }
    }

    fn order() -> ControlOrder {
        ControlOrder {
            host: "198.18.0.2".into(),
            port: 5201,
            spec: TestSpec::default(),
            start_at_unix_ns: Some(7),
        }
    }

    #[test]
    fn an_order_carries_a_proof_when_the_server_challenges() {
        let key = Key::new("ops", b"0123456789abcdef0123456789abcdef").unwrap();
        let mut c = ControllerSession::new(Some((key, [3; NONCE_LEN])));
        let w = c
            .on_welcome(welcome(
                Some(super::super::auth::challenge(&[9; NONCE_LEN])),
                true,
            ))
            .unwrap();
        assert!(w.control && w.auth_required);
        match c.order(order()).unwrap() {
            Message::ControlRequest { order: o, auth } => {
                assert_eq!(*o, order());
                assert_eq!(auth.unwrap().name, "ops");
            }
            m => panic!("{m:?}"),
        }
        // One order per connection.
        assert!(c.order(order()).is_err());
    }

    #[test]
    fn a_challenge_without_a_key_is_an_error_and_order_needs_a_welcome() {
        let mut c = ControllerSession::new(None);
        assert!(matches!(
            c.order(order()),
            Err(ProtocolError::BadLocalEvent { .. })
        ));
        c.on_welcome(welcome(
            Some(super::super::auth::challenge(&[9; NONCE_LEN])),
            true,
        ))
        .unwrap();
        assert_eq!(c.order(order()), Err(ProtocolError::AuthRequired));
    }

    #[test]
    fn clock_replies_and_results_are_checked() {
        let c = ControllerSession::new(None);
        let s = c
            .on_clock(
                Message::Clock {
                    client_ns: 10,
                    server_ns: 50,
                },
                30,
            )
            .unwrap();
        assert_eq!((s.rtt_ns(), s.offset_ns()), (20, 30));
        // A reply claiming to come from the future of the receive time is not a reply to our probe.
        assert!(c
            .on_clock(
                Message::Clock {
                    client_ns: 40,
                    server_ns: 50
                },
                30
            )
            .is_err());
        assert!(matches!(
            c.on_result(Message::Rejected {
                reason: "no".into(),
                code: super::super::messages::Refusal::Other
            }),
            Err(ProtocolError::Rejected { .. })
        ));
        assert!(matches!(
            c.on_result(Message::Start),
            Err(ProtocolError::Unexpected { .. })
        ));
    }
}
