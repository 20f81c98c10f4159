//! Third-party control, without I/O. A controller (`run --from`, `mesh`) does not move data itself: it
//! asks a landspeed server that allows it (`serve --allow-control`) to run a test from there to another
//! server, and gets the `RunResult` back. Before ordering, it measures the host's clock against its own
//! with a few probes (NTP's four timestamps, the lowest-RTT sample wins), so that tests on many hosts can be
//! started at one instant and their intervals put on one clock. The order and the offset arithmetic live
//! here; the controller's conversation is `ControllerSession`.

use super::auth::{AuthError, Challenge, Key, NONCE_LEN};
use super::conn::Machine;
use super::guard::{GuardError, KeyMaterial};
use super::messages::Message;
use super::preamble::PROTOCOL_VERSION;
use super::session::ProtocolError;
use super::timer::{impl_waiting, Timer, Waiting};
use landspeed_core::config::TestSpec;
use landspeed_core::result::RunResult;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How many clock probes one control connection may send (they keep the connection open, so they are
/// bounded like every other wait).
pub const MAX_CLOCK_PROBES: u32 = 32;

/// A test a controller orders a server to run, from that server to `host:port`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlOrder {
    /// The host the ordered server runs the test to.
    pub host: String,
    /// That host's port.
    pub port: u16,
    /// The test.
    pub spec: TestSpec,
    /// When to send `start`, on the ordered server's own clock (Unix time, nanoseconds). The server
    /// connects and readies the streams first, then waits for this instant. None: start when ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ns: Option<u64>,
    /// A multicast test (a mesh plan's `multicast` entry): `host:port` is the group, and the
    /// ordered server sends to it or joins it instead of connecting (docs/mesh.md). A server that
    /// predates it reads the order as a unicast test to the group's address, which fails to connect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicast: Option<MulticastOrder>,
}

/// The ordered server's part in a multicast test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McPart {
    /// Send the test's datagrams to the group from the start instant, at its rate for its time.
    Send,
    /// Join the group now, and report what the test's sender sent it.
    Receive,
}

/// A multicast order: the server's part, the test's key (the sender's datagrams carry it, so each
/// receiver reports that sender's test whatever else the group carries), and the sender's TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MulticastOrder {
    /// Send or receive.
    pub part: McPart,
    /// The test's key, chosen by the controller.
    pub key: u64,
    /// IPv4 TTL or IPv6 hop limit of the sender's datagrams, 1 to [`MAX_ORDERED_TTL`].
    pub ttl: u32,
}

/// The largest TTL an order may give a multicast sender: an ordered test reaches a campaign's
/// hosts, not the whole routed network.
pub const MAX_ORDERED_TTL: u32 = 32;

/// How long a controller waits for an ordered test's result once the test should have started: the
/// test's own time and warm-up plus a minute for the handshakes and the results exchange; a test that ends
/// on a byte or block count gets an hour.
pub fn result_wait(spec: &TestSpec) -> std::time::Duration {
    use std::time::Duration;
    match spec.end {
        landspeed_core::config::EndCondition::Time(t) => t + spec.omit_s + Duration::from_secs(60),
        _ => Duration::from_secs(3600),
    }
}

pub use landspeed_core::clock::{estimate_offset, ClockOffset, ClockSample};

/// What the controller learnt from a server's welcome.
#[derive(Debug, Clone, PartialEq)]
pub struct HostWelcome {
    /// The host's software and version.
    pub software: String,
    /// The server takes third-party orders (`--allow-control`).
    pub control: bool,
    /// The host requires authentication.
    pub auth_required: bool,
}

/// Where a controller's conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerPhase {
    /// Nothing sent yet.
    New,
    /// The hello is sent; the welcome is awaited.
    AwaitWelcome,
    /// Clock probes sent, this many replies still to come.
    Probing(u32),
    /// Welcomed and clock measured: the connection waits (without a timer) for the driver's order.
    Checked,
    /// The order is sent; its result is awaited.
    AwaitResult,
    /// The result arrived.
    Finished,
    /// The conversation failed.
    Failed,
}

impl ControllerPhase {
    fn name(self) -> &'static str {
        match self {
            ControllerPhase::New => "starting",
            ControllerPhase::AwaitWelcome => "waiting for the server's welcome",
            ControllerPhase::Probing(_) => "waiting for a clock reading",
            ControllerPhase::Checked => "waiting to order",
            ControllerPhase::AwaitResult => "waiting for the result",
            ControllerPhase::Finished => "finished",
            ControllerPhase::Failed => "failed",
        }
    }
}

/// What the controller's driver should do.
#[derive(Debug, Clone, PartialEq)]
pub enum ControllerAction {
    /// Send this message.
    Send(Message),
    /// The host is checked: its welcome, and its clock against this one's.
    Checked {
        /// What the host's welcome said.
        welcome: HostWelcome,
        /// The host's clock against the controller's.
        clock: ClockOffset,
    },
    /// The ordered test's result.
    Result(Box<RunResult>),
}

/// The controller's side of one control connection: hello, welcome, clock probes, one order, its
/// result. Probes carry wall-clock time, which the session derives from `now` and the reading it was
/// built with (`wall`), so time is still an input.
#[derive(Debug)]
pub struct ControllerSession {
    key: Option<(Key, [u8; NONCE_LEN])>,
    challenge: Option<Challenge>,
    /// The conversation's key material, from the welcome until the connection takes it.
    keys: Option<KeyMaterial>,
    phase: ControllerPhase,
    probes: u32,
    welcome: Option<HostWelcome>,
    samples: Vec<ClockSample>,
    /// A monotonic instant and the wall clock (Unix ns) at that instant.
    wall: (Instant, u64),
    handshake: Duration,
    timer: Timer,
}

impl ControllerSession {
    /// `key` answers the server's challenge (with `client_nonce`, random bytes from the driver);
    /// `probes` clock probes (1 to `MAX_CLOCK_PROBES`) follow the welcome; `wall` is an instant and
    /// the Unix time in ns then; each wait before the order lasts at most `handshake`.
    pub fn new(
        key: Option<(Key, [u8; NONCE_LEN])>,
        probes: u32,
        wall: (Instant, u64),
        handshake: Duration,
    ) -> Self {
        ControllerSession {
            key,
            challenge: None,
            keys: None,
            phase: ControllerPhase::New,
            probes: probes.clamp(1, MAX_CLOCK_PROBES),
            welcome: None,
            samples: vec![],
            wall,
            handshake,
            timer: Timer::default(),
        }
    }

    /// Where the conversation stands.
    pub fn phase(&self) -> ControllerPhase {
        self.phase
    }

    /// The wall clock at `now`, Unix ns.
    fn wall_ns(&self, now: Instant) -> u64 {
        let (at, ns) = self.wall;
        match now.checked_duration_since(at) {
            Some(after) => ns + after.as_nanos() as u64,
            None => ns.saturating_sub((at - now).as_nanos() as u64),
        }
    }

    fn enter(&mut self, phase: ControllerPhase, now: Instant) {
        self.phase = phase;
        match phase {
            ControllerPhase::AwaitWelcome | ControllerPhase::Probing(_) => {
                self.timer.arm(now, self.handshake)
            }
            // The result's wait is armed by `order`, which knows the test.
            ControllerPhase::AwaitResult => {}
            _ => self.timer.disarm(),
        }
    }

    /// The first message.
    pub fn hello(&mut self, now: Instant) -> Message {
        self.enter(ControllerPhase::AwaitWelcome, now);
        Message::Hello {
            version: PROTOCOL_VERSION,
            software: format!("landspeed {} (controller)", landspeed_core::SOFTWARE_VERSION),
            auth: self.key.as_ref().map(|(k, n)| k.hello(n)),
        }
    }

    /// A message from the server at `now`.
    pub fn on_message(&mut self, msg: Message, now: Instant) -> Result<ControllerAction, ProtocolError> {
        let out = match (self.phase, msg) {
            (_, Message::Error { message }) => Err(ProtocolError::Remote(message)),
            (
                ControllerPhase::AwaitWelcome | ControllerPhase::AwaitResult,
                Message::Rejected { reason, code },
            ) => Err(ProtocolError::Rejected { code, reason }),
            (ControllerPhase::AwaitWelcome, m @ Message::Welcome { .. }) => self.on_welcome(m, now),
            (ControllerPhase::Probing(left), Message::Clock { client_ns, server_ns }) => {
                self.on_clock(left, (client_ns, server_ns), now)
            }
            (ControllerPhase::AwaitResult, Message::ControlResult { result }) => {
                self.enter(ControllerPhase::Finished, now);
                Ok(ControllerAction::Result(result))
            }
            (phase, other) => Err(ProtocolError::Unexpected {
                phase: phase.name(),
                got: other.kind(),
            }),
        };
        if out.is_err() {
            self.enter(ControllerPhase::Failed, now);
        }
        out
    }

    fn on_welcome(&mut self, msg: Message, now: Instant) -> Result<ControllerAction, ProtocolError> {
        let Message::Welcome {
            version,
            software,
            auth,
            control,
            ..
        } = msg
        else {
            unreachable!("called with a welcome")
        };
        if version != PROTOCOL_VERSION {
            return Err(ProtocolError::Version(version));
        }
        self.welcome = Some(HostWelcome {
            software,
            control,
            auth_required: auth.is_some(),
        });
        self.keys = super::session::keys_for_welcome(self.key.as_ref(), auth.as_ref(), true)?;
        self.challenge = auth;
        Ok(self.probe(now))
    }

    /// The next clock probe, sent at `now`.
    fn probe(&mut self, now: Instant) -> ControllerAction {
        self.enter(
            ControllerPhase::Probing(self.probes - self.samples.len() as u32),
            now,
        );
        ControllerAction::Send(Message::ClockProbe {
            client_ns: self.wall_ns(now),
        })
    }

    /// The host's answer to a probe, received at `now`.
    fn on_clock(
        &mut self,
        left: u32,
        (sent_ns, host_ns): (u64, u64),
        now: Instant,
    ) -> Result<ControllerAction, ProtocolError> {
        let received_ns = self.wall_ns(now);
        if sent_ns > received_ns {
            // A reply from the future of its receipt is not a reply to our probe.
            return Err(ProtocolError::Unexpected {
                phase: self.phase.name(),
                got: "clock reading for no probe of ours",
            });
        }
        self.samples.push(ClockSample {
            sent_ns,
            host_ns,
            received_ns,
        });
        if left > 1 {
            return Ok(self.probe(now));
        }
        self.enter(ControllerPhase::Checked, now);
        let clock =
            estimate_offset(&self.samples).ok_or(ProtocolError::Remote("no clock readings".into()))?;
        let welcome = self
            .welcome
            .clone()
            .ok_or(ProtocolError::Remote("no welcome".into()))?;
        Ok(ControllerAction::Checked { welcome, clock })
    }

    /// The order (with the answer to the server's challenge when it set one), at `now`; its result is
    /// awaited for `wait`.
    pub fn order(
        &mut self,
        order: ControlOrder,
        wait: Duration,
        now: Instant,
    ) -> Result<ControllerAction, ProtocolError> {
        if self.phase != ControllerPhase::Checked {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "order",
            });
        }
        match (&self.challenge, &self.key) {
            (Some(_), None) => return Err(ProtocolError::AuthRequired),
            // A host that asks for no key takes no orders; its welcome's "no" is believed (an
            // attacker could only deny the order), a "yes" without a challenge never is.
            (None, Some(_)) if !self.welcome.as_ref().is_some_and(|w| w.control) => {
                return Err(ProtocolError::Rejected {
                    code: super::messages::Refusal::NoControl,
                    reason: "this server does not take third-party orders".into(),
                })
            }
            (None, Some(_)) => return Err(ProtocolError::ServerWithoutAuth),
            _ => {}
        }
        self.enter(ControllerPhase::AwaitResult, now);
        self.timer.arm(now, wait);
        Ok(ControllerAction::Send(Message::ControlRequest {
            order: Box::new(order),
            auth: None,
        }))
    }
}

impl_waiting!(ControllerSession, ControllerPhase);

impl Machine for ControllerSession {
    type Action = ControllerAction;

    fn on_message(&mut self, msg: Message, now: Instant) -> Result<ControllerAction, ProtocolError> {
        ControllerSession::on_message(self, msg, now)
    }

    fn split(action: ControllerAction) -> (Option<Message>, Option<ControllerAction>) {
        match action {
            ControllerAction::Send(m) => (Some(m), None),
            other => (None, Some(other)),
        }
    }
    fn take_keys(&mut self) -> Option<Result<KeyMaterial, AuthError>> {
        self.keys.take().map(Ok)
    }

    fn on_forged(
        &mut self,
        err: GuardError,
        plain: Option<Message>,
        now: Instant,
    ) -> Result<ControllerAction, ProtocolError> {
        self.enter(ControllerPhase::Failed, now);
        Err(ProtocolError::forged(err, plain))
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
            multicast: None,
        }
    }

    const WAIT: Duration = Duration::from_secs(10);

    /// A session that has sent its hello at `t0`, when the wall clock read 1 s.
    fn session(key: Option<(Key, [u8; NONCE_LEN])>, probes: u32, t0: Instant) -> ControllerSession {
        let mut c = ControllerSession::new(key, probes, (t0, 1_000_000_000), WAIT);
        c.hello(t0);
        c
    }

    /// Answers every probe the session sends with a host clock `ahead_ns` ahead, 1 ms later each.
    fn answer_probes(
        c: &mut ControllerSession,
        first: ControllerAction,
        t: &mut Instant,
    ) -> ControllerAction {
        let mut next = first;
        while let ControllerAction::Send(Message::ClockProbe { client_ns }) = next {
            *t += Duration::from_millis(1);
            let reply = Message::Clock {
                client_ns,
                server_ns: client_ns + 5_000_000,
            };
            next = c.on_message(reply, *t).unwrap();
        }
        next
    }

    #[test]
    fn a_keyed_controller_seals_from_the_welcome_and_refuses_servers_that_cannot_prove_the_key() {
        let key = Key::new("ops", b"0123456789abcdef0123456789abcdef").unwrap();
        let mut t = Instant::now();
        let mut c = session(Some((key.clone(), [3; NONCE_LEN])), 3, t);
        let challenge = Some(super::super::auth::challenge(&[9; NONCE_LEN]));
        let first = c.on_message(welcome(challenge, true), t).unwrap();
        assert!(
            Machine::take_keys(&mut c).is_some(),
            "the conversation is keyed from the welcome on"
        );
        let ControllerAction::Checked { welcome: w, clock } = answer_probes(&mut c, first, &mut t) else {
            panic!()
        };
        assert!(w.control && w.auth_required);
        assert_eq!(clock.probes, 3);
        // Each reply took 1 ms; the host's clock read 5 ms past the probe's send time.
        assert_eq!((clock.rtt_ns, clock.offset_ns), (1_000_000, 4_500_000));
        assert_eq!(
            c.poll_timeout(),
            None,
            "a checked host waits for the order without a timer"
        );
        match c.order(order(), WAIT, t).unwrap() {
            ControllerAction::Send(Message::ControlRequest { order: o, auth }) => {
                assert_eq!(*o, order());
                assert_eq!(
                    auth, None,
                    "the order is proved by its MAC, not by a proof of its own"
                );
            }
            m => panic!("{m:?}"),
        }
        // One order per connection.
        assert!(c.order(order(), WAIT, t).is_err());
        assert_eq!(c.phase(), ControllerPhase::AwaitResult);
        // A server that does not challenge gets no order (its clock is still read); one that
        // challenges with version 1 is refused at its welcome.
        for (control, refused) in [(false, "third-party orders"), (true, "does not ask for a key")] {
            let mut c = session(Some((key.clone(), [3; NONCE_LEN])), 1, t);
            let first = c.on_message(welcome(None, control), t).unwrap();
            answer_probes(&mut c, first, &mut t);
            let e = c.order(order(), WAIT, t).unwrap_err();
            assert!(e.to_string().contains(refused), "{e}");
        }
        let mut old = super::super::auth::challenge(&[9; NONCE_LEN]);
        old.version = 1;
        let mut c = session(Some((key, [3; NONCE_LEN])), 1, t);
        assert_eq!(
            c.on_message(welcome(Some(old), true), t),
            Err(ProtocolError::AuthVersion(1))
        );
        assert_eq!(c.phase(), ControllerPhase::Failed);
    }

    #[test]
    fn a_challenge_without_a_key_is_an_error_and_order_needs_a_welcome() {
        let mut t = Instant::now();
        let mut c = session(None, 1, t);
        assert!(matches!(
            c.order(order(), WAIT, t),
            Err(ProtocolError::BadLocalEvent { .. })
        ));
        let challenge = Some(super::super::auth::challenge(&[9; NONCE_LEN]));
        let first = c.on_message(welcome(challenge, true), t).unwrap();
        answer_probes(&mut c, first, &mut t);
        assert_eq!(c.order(order(), WAIT, t), Err(ProtocolError::AuthRequired));
    }

    #[test]
    fn clock_replies_and_results_are_checked() {
        let t = Instant::now();
        let mut c = session(None, 2, t);
        c.on_message(welcome(None, true), t).unwrap();
        // A reply claiming to come from the future of the receive time is not a reply to our probe.
        let future = Message::Clock {
            client_ns: 9_000_000_000,
            server_ns: 1,
        };
        assert!(c.on_message(future, t).is_err());
        assert_eq!(c.phase(), ControllerPhase::Failed);
        let mut c = session(None, 1, t);
        assert!(matches!(
            c.on_message(
                Message::Rejected {
                    reason: "no".into(),
                    code: super::super::messages::Refusal::Other
                },
                t
            ),
            Err(ProtocolError::Rejected { .. })
        ));
        let mut c = session(None, 1, t);
        assert!(matches!(
            c.on_message(Message::Start, t),
            Err(ProtocolError::Unexpected { .. })
        ));
    }

    #[test]
    fn every_wait_has_its_timer() {
        let mut t = Instant::now();
        let mut c = session(None, 1, t);
        assert_eq!(c.time_left(t), Some(WAIT), "the welcome");
        let first = c.on_message(welcome(None, true), t).unwrap();
        assert_eq!(c.time_left(t), Some(WAIT), "a clock reading");
        answer_probes(&mut c, first, &mut t);
        let result_wait = Duration::from_secs(70);
        c.order(order(), result_wait, t).unwrap();
        assert_eq!(
            c.handle_timeout(t + result_wait - Duration::from_millis(1)),
            Ok(())
        );
        assert_eq!(
            c.handle_timeout(t + result_wait),
            Err(ProtocolError::Wait(crate::WaitFailed::Timeout {
                phase: "waiting for the result",
                after: result_wait
            }))
        );
    }
}
