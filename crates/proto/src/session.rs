//! The client and server session state machines. They hold no sockets and no clock: a driver feeds them
//! the messages it read and the local events it saw (a data stream arrived, the local streams finished),
//! each with the time `now`, and they answer with what to do next, or with a typed error when the peer
//! broke the protocol. Every wait of the handshake and of the results exchange is a session timer
//! (`crate::timer`): the driver blocks at most `time_left(now)` and calls `handle_timeout(now)`
//! after, so a timeout at any step is a typed error decided here. This is where the order of a test is
//! defined, so it is tested here message by message and, under a virtual clock, pair by pair
//! (`crate::pair`).

use super::auth::{self, Key, KeyRing, AUTH_VERSION, NONCE_LEN};
use super::guard::{GuardError, KeyMaterial, Side};
use super::messages::{Message, Refusal, SessionId};
use super::preamble::PROTOCOL_VERSION;
use super::timer::{impl_waiting, Timer, Timers, Waiting};
use landspeed_core::config::{ConfigError, Test, TestSpec};
use landspeed_core::endpoint::{EndpointReport, IntervalSample};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A wait of a session that ended without what it waited for: one meaning for landspeed's sessions
/// and iperf3's (landspeed-iperf3), so a driver tells a timeout from a closed peer the same way for
/// both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WaitFailed {
    /// A session timer ran out: nothing the session waited for came within `after`.
    #[error("timed out after {after:?} {phase}")]
    Timeout {
        /// What the session waited for.
        phase: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// The peer closed the control connection before the conversation was complete.
    #[error("the peer closed the control connection while {phase}")]
    PeerClosed {
        /// What the session waited for.
        phase: &'static str,
    },
}

/// A violation of the protocol, or a refusal, as a typed error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    /// A message the protocol does not have at this point.
    #[error("unexpected '{got}' message while {phase}")]
    Unexpected {
        /// What the session was doing.
        phase: &'static str,
        /// The message's kind.
        got: &'static str,
    },
    /// The peer speaks another protocol version.
    #[error("peer speaks protocol version {0}, this side speaks {PROTOCOL_VERSION}")]
    Version(u16),
    /// The test request does not validate.
    #[error("invalid test request: {0}")]
    InvalidSpec(#[from] ConfigError),
    /// The server refused the test.
    #[error("server refused the test: {reason}")]
    Rejected {
        /// The typed reason (whether a retry can work).
        code: Refusal,
        /// The server's words.
        reason: String,
    },
    /// The peer reported an error of its own.
    #[error("peer reported an error: {0}")]
    Remote(String),
    /// A data stream quoted a number the test does not have.
    #[error("data stream {id} is not part of this test (it has {total} streams)")]
    UnknownStream {
        /// The number quoted.
        id: u32,
        /// Streams in the test.
        total: u32,
    },
    /// A data stream's number arrived twice.
    #[error("data stream {0} connected twice")]
    DuplicateStream(u32),
    /// The server wants a key and the client has none.
    #[error("the server requires authentication and this client has no key")]
    AuthRequired,
    /// The client's key could not answer the challenge.
    #[error("cannot answer the server's challenge: {0}")]
    Auth(#[from] auth::AuthError),
    /// A frame from the peer failed its MAC; `said` is what it said read unauthenticated (a refusal).
    #[error("{err}{}", said.as_deref().map(|s| format!("; unauthenticated, it said: {s}")).unwrap_or_default())]
    Forged {
        /// What was wrong with the frame.
        err: GuardError,
        /// The peer's refusal or error, unauthenticated.
        said: Option<String>,
    },
    /// This end holds a key and the server does not ask for one.
    #[error(
        "the server does not ask for a key, so it cannot prove it holds yours and nothing it says \
         would be authenticated"
    )]
    ServerWithoutAuth,
    /// The server's authentication is older than this build's.
    #[error(
        "the server speaks landspeed authentication version {0}, which never proves the server holds \
         the key; this client speaks version {AUTH_VERSION} and will not use its key over it: upgrade \
         the server"
    )]
    AuthVersion(u8),
    /// A wait that ended without what it waited for: a timer ran out, or the peer closed.
    #[error(transparent)]
    Wait(#[from] WaitFailed),
    /// The bytes on the control connection are not a control message (see `framing`).
    #[error(transparent)]
    Frame(#[from] super::framing::FrameError),
    /// The driver reported an event the session cannot take now (a driver bug).
    #[error("local event '{event}' while {phase}")]
    BadLocalEvent {
        /// Where the session stood.
        phase: &'static str,
        /// The event.
        event: &'static str,
    },
}

impl ProtocolError {
    /// A frame that failed its MAC, with what it said when it reads as an unsealed refusal or error.
    pub fn forged(err: GuardError, plain: Option<Message>) -> ProtocolError {
        let said = match plain {
            Some(Message::Rejected { reason, .. }) => Some(reason),
            Some(Message::Error { message }) => Some(message),
            _ => None,
        };
        ProtocolError::Forged { err, said }
    }
}

/// The key material a client or controller holding `held` takes from a server's `challenge`: none
/// without a key (a challenge then is the caller's to refuse), an error when the server cannot
/// authenticate itself (no challenge, unless the key is to be used `only_if_asked`, or an older
/// authentication): a key is never used over less.
pub(super) fn keys_for_welcome(
    held: Option<&(Key, [u8; NONCE_LEN])>,
    challenge: Option<&auth::Challenge>,
    only_if_asked: bool,
) -> Result<Option<KeyMaterial>, ProtocolError> {
    let Some((key, client_nonce)) = held else {
        return Ok(None);
    };
    let c = match challenge {
        Some(c) => c,
        None if only_if_asked => return Ok(None),
        None => return Err(ProtocolError::ServerWithoutAuth),
    };
    if c.version < AUTH_VERSION {
        return Err(ProtocolError::AuthVersion(c.version));
    }
    let server_nonce = auth::decode_nonce(&c.nonce)?;
    let agreed = auth::stream_macs(key.hello(client_nonce).data_preamble, c.data_preamble);
    Ok(Some(
        KeyMaterial::new(key.clone(), server_nonce, *client_nonce, Side::Client).with_stream_macs(agreed),
    ))
}

/// Where the server's side of a conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPhase {
    /// The client's hello is awaited.
    AwaitHello,
    /// The test request (or an order, a clock probe) is awaited.
    AwaitRequest,
    /// The data streams are awaited.
    AwaitStreams,
    /// Every stream is in; the client's start is awaited.
    AwaitStart,
    /// The data moves.
    Running,
    /// This end's streams are done; the client's results are awaited.
    AwaitResults,
    /// Running a third-party test ordered by a controller.
    Controlling,
    /// The results went both ways.
    Finished,
    /// The conversation failed.
    Failed,
}

impl ServerPhase {
    fn name(self) -> &'static str {
        match self {
            ServerPhase::AwaitHello => "waiting for hello",
            ServerPhase::AwaitRequest => "waiting for the test request",
            ServerPhase::AwaitStreams => "waiting for data streams",
            ServerPhase::AwaitStart => "waiting for start",
            ServerPhase::Running => "running",
            ServerPhase::AwaitResults => "waiting for the client's results",
            ServerPhase::Controlling => "running an ordered test",
            ServerPhase::Finished => "finished",
            ServerPhase::Failed => "failed",
        }
    }
}

/// What the server driver should do after a message.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerAction {
    /// Send this message.
    Reply(Message),
    /// The request is valid: allocate a session, send `Accepted`, wait for streams.
    Accept(Test),
    /// The request is invalid: send this `Rejected` and close.
    Reject(Message),
    /// The client did not authenticate: send `reply` and close; `detail` is for the server's log only.
    AuthFailed {
        /// The refusal to send.
        reply: Message,
        /// Why, for the server's log.
        detail: String,
    },
    /// Start the local streams.
    StartTest,
    /// Stop local senders early.
    StopSenders,
    /// The client's results arrived: build this end's report (it may need the client's) and hand it to
    /// `results`, which sends it.
    SendResults(Box<EndpointReport>),
    /// Nothing to do yet.
    Wait,
    /// The client gave up; close.
    PeerFailed(String),
    /// A controller asked for this server's clock: send `Clock` with this `client_ns` and the time now.
    ClockReading {
        /// The controller's send time, its clock, ns.
        client_ns: u64,
    },
    /// An authorised controller ordered a test from this server: run `test` (the order's, validated)
    /// to the order's host, then send `ControlResult`.
    RunOrder {
        /// The order.
        order: Box<super::control::ControlOrder>,
        /// The order's test, validated.
        test: Test,
    },
}

/// The server's side of one test.
#[derive(Debug)]
pub struct ServerSession {
    phase: ServerPhase,
    spec: Option<Test>,
    connected: Vec<bool>,
    remaining: u32,
    limits: super::Limits,
    /// The keys and this connection's nonce, when the server requires authentication.
    auth: Option<(Arc<KeyRing>, [u8; NONCE_LEN])>,
    /// The key the client named in its hello: its material until the connection takes it, and
    /// whether the client's frames have carried the right tag.
    keyed: Option<Keying>,
    authenticated: Option<String>,
    /// Third-party orders are taken (`--allow-control`).
    control: bool,
    clock_probes: u32,
    /// This end's results have been sent.
    answered: bool,
    timers: Timers,
    timer: Timer,
}

/// The key a client named in its hello, on the server.
#[derive(Debug)]
struct Keying {
    name: String,
    /// Until the connection takes it.
    material: Option<Result<KeyMaterial, auth::AuthError>>,
    /// The client's frames have carried the right tag.
    proven: bool,
}

impl Default for ServerSession {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerSession {
    /// A session with no limits, no authentication and no orders.
    pub fn new() -> Self {
        Self::with_limits(super::Limits::default())
    }

    /// A session that refuses requests over `limits` (and advertises them in its welcome).
    pub fn with_limits(limits: super::Limits) -> Self {
        ServerSession {
            phase: ServerPhase::AwaitHello,
            spec: None,
            connected: vec![],
            remaining: 0,
            limits,
            auth: None,
            keyed: None,
            authenticated: None,
            control: false,
            clock_probes: 0,
            answered: false,
            timers: Timers::default(),
            timer: Timer::default(),
        }
    }

    /// Waits with these timers, starting with the wait for the hello from `now`. A session built
    /// without it has no timers until its first message.
    pub fn with_timers(mut self, timers: Timers, now: Instant) -> Self {
        self.timers = timers;
        self.timer.arm(now, timers.handshake);
        self
    }

    /// Enters `phase` at `now`, arming the timer its wait has.
    fn enter(&mut self, phase: ServerPhase, now: Instant) {
        use ServerPhase::*;
        self.phase = phase;
        match phase {
            AwaitHello | AwaitRequest | AwaitStreams | AwaitStart => {
                self.timer.arm(now, self.timers.handshake)
            }
            AwaitResults => self.timer.arm(now, self.timers.results),
            Running | Controlling | Finished | Failed => self.timer.disarm(),
        }
    }

    /// Takes third-party orders from controllers that authenticate (it never does without `with_auth`).
    pub fn with_control(mut self, allow: bool) -> Self {
        self.control = allow;
        self
    }

    /// Requires the client to prove it holds one of `keys`, against `nonce` (fresh random bytes for
    /// this connection, from the driver).
    pub fn with_auth(mut self, keys: Arc<KeyRing>, nonce: [u8; NONCE_LEN]) -> Self {
        self.auth = Some((keys, nonce));
        self
    }

    /// The key material for the connection's guard, once (after the welcome).
    pub fn take_keys(&mut self) -> Option<Result<KeyMaterial, auth::AuthError>> {
        self.keyed.as_mut()?.material.take()
    }

    /// The client's frames carry the right tag: it holds the key.
    pub fn on_peer_proven(&mut self) {
        if let Some(k) = &mut self.keyed {
            k.proven = true;
        }
    }

    /// A frame from the client failed its tag at `now`: before the client proved the key, that is a
    /// failed authentication (refused unsealed, the reason only in the log); after, a broken
    /// conversation.
    pub fn on_forged(
        &mut self,
        err: GuardError,
        plain: Option<Message>,
        now: Instant,
    ) -> Result<ServerAction, ProtocolError> {
        if self.keyed.as_ref().is_some_and(|k| k.proven) {
            self.enter(ServerPhase::Failed, now);
            return Err(ProtocolError::forged(err, plain));
        }
        let detail = match &err {
            GuardError::Key(e) => e.to_string(),
            other => format!("{other}"),
        };
        Ok(self.refuse_auth(
            "authentication failed: this server needs a valid key".into(),
            detail,
            now,
        ))
    }

    /// Clock probes answered so far (a controller checking this host sends only those, then closes).
    pub fn clock_probes(&self) -> u32 {
        self.clock_probes
    }

    /// The key name the client authenticated with.
    pub fn authenticated(&self) -> Option<&str> {
        self.authenticated.as_deref()
    }

    /// Checks that the client authenticated when this server requires it: the key named in its hello,
    /// proved by the tags on its frames. A version-1 client's proof is refused by name.
    fn check_auth(&mut self, proof: Option<&auth::Proof>, now: Instant) -> Option<ServerAction> {
        self.auth.as_ref()?;
        let detail = match (&self.keyed, proof) {
            (Some(k), _) if k.proven => {
                self.authenticated = Some(k.name.clone());
                return None;
            }
            (Some(_), _) => "the request did not carry the key's MAC".to_string(),
            (None, Some(_)) => {
                return Some(self.refuse_auth(
                    format!(
                        "this server authenticates both ends of the control conversation (landspeed \
                         authentication version {AUTH_VERSION}); this client speaks version 1: upgrade it"
                    ),
                    "a version-1 client (it proves its key once and cannot check the server)".into(),
                    now,
                ))
            }
            (None, None) => "the client sent no credentials".to_string(),
        };
        Some(self.refuse_auth(
            "authentication failed: this server needs a valid key".into(),
            detail,
            now,
        ))
    }

    /// Refuses the client for authentication: `reason` for it, `detail` for the log.
    fn refuse_auth(&mut self, reason: String, detail: String, now: Instant) -> ServerAction {
        self.enter(ServerPhase::Failed, now);
        ServerAction::AuthFailed {
            reply: Message::Rejected {
                reason,
                code: Refusal::Authentication,
            },
            detail,
        }
    }

    /// The key material for the key `h` names (an unknown name or a bad nonce: the error its first
    /// frame is refused with, at the same step as a wrong key).
    fn keying(&self, h: auth::HelloAuth) -> Option<Keying> {
        let (keys, server_nonce) = self.auth.as_ref()?;
        let material = auth::decode_nonce(&h.client_nonce).and_then(|cn| {
            if cn == *server_nonce {
                return Err(auth::AuthError::Malformed("client nonce equals the server's"));
            }
            let agreed = auth::stream_macs(h.data_preamble, auth::challenge(server_nonce).data_preamble);
            Ok(match keys.get(&h.name) {
                Some(key) => {
                    KeyMaterial::new(key.clone(), *server_nonce, cn, Side::Server).with_stream_macs(agreed)
                }
                // Refused at the same step and after the same work as a wrong key.
                None => {
                    let why = auth::AuthError::UnknownName(h.name.clone());
                    KeyMaterial::decoy(*server_nonce, cn, Side::Server, why)
                }
            })
        });
        Some(Keying {
            name: h.name,
            material: Some(material),
            proven: false,
        })
    }

    /// Where the conversation stands.
    pub fn phase(&self) -> ServerPhase {
        self.phase
    }

    /// The accepted test, once there is one.
    pub fn spec(&self) -> Option<&Test> {
        self.spec.as_ref()
    }

    fn unexpected(&mut self, got: &Message, now: Instant) -> ProtocolError {
        let e = ProtocolError::Unexpected {
            phase: self.phase.name(),
            got: got.kind(),
        };
        self.enter(ServerPhase::Failed, now);
        e
    }

    /// A message from the client arrived at `now`.
    pub fn on_message(&mut self, msg: Message, now: Instant) -> Result<ServerAction, ProtocolError> {
        use ServerPhase::*;
        match (self.phase, msg) {
            (_, Message::Error { message }) => {
                self.enter(ServerPhase::Failed, now);
                Ok(ServerAction::PeerFailed(message))
            }
            (AwaitHello, Message::Hello { version, auth, .. }) => {
                if version != PROTOCOL_VERSION {
                    self.enter(ServerPhase::Failed, now);
                    return Err(ProtocolError::Version(version));
                }
                self.keyed = auth.and_then(|h| self.keying(h));
                self.enter(ServerPhase::AwaitRequest, now);
                Ok(ServerAction::Reply(Message::Welcome {
                    version: PROTOCOL_VERSION,
                    software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
                    limits: self.limits.clone(),
                    auth: self.auth.as_ref().map(|(_, n)| auth::challenge(n)),
                    control: self.control && self.auth.is_some(),
                }))
            }
            (AwaitRequest, Message::ClockProbe { client_ns })
                if self.clock_probes < super::control::MAX_CLOCK_PROBES =>
            {
                self.clock_probes += 1;
                Ok(ServerAction::ClockReading { client_ns })
            }
            (AwaitRequest, Message::ControlRequest { order, auth }) => {
                self.order(order, auth.as_deref(), now)
            }
            (AwaitRequest, Message::TestRequest { spec, auth }) => {
                if let Some(refusal) = self.check_auth(auth.as_deref(), now) {
                    return Ok(refusal);
                }
                self.accept(*spec, now)
            }
            (AwaitStart, Message::Start) => {
                self.enter(ServerPhase::Running, now);
                Ok(ServerAction::StartTest)
            }
            (Running | AwaitResults, Message::Stop) => Ok(ServerAction::StopSenders),
            (AwaitResults, Message::Results { report }) => {
                self.enter(ServerPhase::Finished, now);
                Ok(ServerAction::SendResults(report))
            }
            (_, other) => Err(self.unexpected(&other, now)),
        }
    }

    fn order(
        &mut self,
        order: Box<super::control::ControlOrder>,
        proof: Option<&auth::Proof>,
        now: Instant,
    ) -> Result<ServerAction, ProtocolError> {
        if !self.control || self.auth.is_none() {
            self.enter(ServerPhase::Failed, now);
            return Ok(ServerAction::Reject(Message::Rejected {
                reason: "this server does not take third-party orders".into(),
                code: Refusal::NoControl,
            }));
        }
        if let Some(refusal) = self.check_auth(proof, now) {
            return Ok(refusal);
        }
        match self
            .admissible(order.spec.clone())
            .and_then(|t| multicast_order_fits(&order, t))
        {
            Ok(test) => {
                self.spec = Some(test.clone());
                self.enter(ServerPhase::Controlling, now);
                Ok(ServerAction::RunOrder { order, test })
            }
            Err((code, reason)) => {
                self.enter(ServerPhase::Failed, now);
                Ok(ServerAction::Reject(Message::Rejected { reason, code }))
            }
        }
    }

    /// A request this server takes: valid, and within its limits.
    fn admissible(&self, spec: TestSpec) -> Result<Test, (Refusal, String)> {
        let test = spec.validated().map_err(|e| (Refusal::Invalid, e.to_string()))?;
        if test.transactions.is_some() && test.transport == landspeed_core::config::Transport::Udp {
            // `run --rr -u` goes to the echo service; a session never carries it.
            let why = "a UDP request/response test is answered by the echo service, not as a test";
            return Err((Refusal::Invalid, why.into()));
        }
        match self.limits.check(&test) {
            Some(why) => Err((Refusal::OverLimit, why.to_string())),
            None => Ok(test),
        }
    }

    /// The ordered test is over (its result or error has been sent).
    pub fn on_order_done(&mut self) {
        if self.phase == ServerPhase::Controlling {
            self.phase = ServerPhase::Finished;
        }
    }

    fn accept(&mut self, spec: TestSpec, now: Instant) -> Result<ServerAction, ProtocolError> {
        match self.admissible(spec) {
            Ok(test) => {
                self.remaining = test.total_streams();
                self.connected = vec![false; self.remaining as usize];
                // A client that gives up sooner than this server would is not waited for longer:
                // its idle limit and one handshake step.
                if let Some(idle) = test.idle_timeout() {
                    self.timers.results = self.timers.results.min(idle + self.timers.handshake);
                }
                self.spec = Some(test.clone());
                self.enter(ServerPhase::AwaitStreams, now);
                Ok(ServerAction::Accept(test))
            }
            Err((code, reason)) => {
                self.enter(ServerPhase::Failed, now);
                Ok(ServerAction::Reject(Message::Rejected { reason, code }))
            }
        }
    }

    /// The driver has set the accepted test up under `session` (the id its data connections quote):
    /// the client is told so.
    pub fn accepted(&mut self, a: Admission) -> Result<ServerAction, ProtocolError> {
        if self.phase != ServerPhase::AwaitStreams || self.connected.iter().any(|c| *c) {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "accepted",
            });
        }
        Ok(ServerAction::Reply(a.message()))
    }

    /// Whether a data connection for stream `id` would be taken now: the test has that stream and it
    /// has not connected yet. A driver asks before it spends anything on the connection, and turns
    /// away one that is not wanted without ending the test (it may be an injection).
    pub fn wants_stream(&self, id: u32) -> bool {
        self.phase == ServerPhase::AwaitStreams && self.connected.get(id as usize) == Some(&false)
    }

    /// A data connection quoting this session arrived. When it was the last one expected, the client
    /// is told the server is ready.
    pub fn on_stream(&mut self, id: u32, now: Instant) -> Result<ServerAction, ProtocolError> {
        if self.phase != ServerPhase::AwaitStreams {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "stream connected",
            });
        }
        let total = self.connected.len() as u32;
        let slot = self
            .connected
            .get_mut(id as usize)
            .ok_or(ProtocolError::UnknownStream { id, total })?;
        if *slot {
            return Err(ProtocolError::DuplicateStream(id));
        }
        *slot = true;
        self.remaining -= 1;
        if self.remaining == 0 {
            self.enter(ServerPhase::AwaitStart, now);
            return Ok(ServerAction::Reply(Message::Ready));
        }
        Ok(ServerAction::Wait)
    }

    /// The server's own streams have finished: the client is told, and its results are awaited.
    pub fn on_local_done(&mut self, now: Instant) -> Result<ServerAction, ProtocolError> {
        if self.phase != ServerPhase::Running {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "local done",
            });
        }
        self.enter(ServerPhase::AwaitResults, now);
        Ok(ServerAction::Reply(Message::Done))
    }

    /// This end's report, once the client's has arrived: it is sent, and the conversation is over.
    pub fn results(&mut self, report: EndpointReport) -> Result<ServerAction, ProtocolError> {
        if self.phase != ServerPhase::Finished || self.answered {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "results",
            });
        }
        self.answered = true;
        Ok(ServerAction::Reply(Message::Results {
            report: Box::new(report),
        }))
    }
}

impl_waiting!(ServerSession, ServerPhase);

/// Where the client's side of a conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPhase {
    /// Nothing sent yet.
    New,
    /// The hello is sent; the welcome is awaited.
    AwaitWelcome,
    /// The request is sent; the acceptance is awaited.
    AwaitAccepted,
    /// The data streams are being opened.
    Connecting,
    /// The streams are open; the server's ready is awaited.
    AwaitReady,
    /// The data moves.
    Running,
    /// This end's streams are done; the server's results are awaited.
    AwaitResults,
    /// The results went both ways.
    Finished,
    /// The conversation failed.
    Failed,
}

impl ClientPhase {
    fn name(self) -> &'static str {
        match self {
            ClientPhase::New => "starting",
            ClientPhase::AwaitWelcome => "waiting for the server's welcome",
            ClientPhase::AwaitAccepted => "waiting for the server to accept the test",
            ClientPhase::Connecting => "connecting data streams",
            ClientPhase::AwaitReady => "waiting for the server to be ready",
            ClientPhase::Running => "running",
            ClientPhase::AwaitResults => "waiting for the server's results",
            ClientPhase::Finished => "finished",
            ClientPhase::Failed => "failed",
        }
    }
}

/// What the client driver should do after a message.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAction {
    /// Send this message.
    Send(Message),
    /// Open the data streams quoting this session.
    ConnectStreams(Admission),
    /// The server is ready: start the local streams, and `start` (which sends `Start`) when the test
    /// should begin.
    StartTest,
    /// A server-side interval sample arrived.
    Interval(IntervalSample),
    /// Nothing to do yet.
    Wait,
    /// The server's report arrived: the test is complete.
    Finished(Box<EndpointReport>),
}

/// What the server's `accepted` tells the client about connecting the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// The id the data streams quote.
    pub session: SessionId,
    /// The certificate encrypted data connections present (TLS, QUIC).
    pub certificate: Option<landspeed_core::tls::CertFingerprint>,
    /// QUIC tests: the server's QUIC port.
    pub quic_port: Option<u16>,
}

impl Admission {
    /// Plain streams under `session`: nothing to pin, no QUIC.
    pub fn plain(session: SessionId) -> Admission {
        Admission {
            session,
            certificate: None,
            quic_port: None,
        }
    }

    /// The `accepted` message that says it.
    pub fn message(&self) -> Message {
        Message::Accepted {
            session: self.session,
            certificate: self.certificate,
            quic_port: self.quic_port,
        }
    }

    /// What an `accepted` message says (None for any other message).
    pub fn from_message(m: &Message) -> Option<Admission> {
        match *m {
            Message::Accepted {
                session,
                certificate,
                quic_port,
            } => Some(Admission {
                session,
                certificate,
                quic_port,
            }),
            _ => None,
        }
    }
}

/// The client's side of one test.
#[derive(Debug)]
pub struct ClientSession {
    phase: ClientPhase,
    spec: Test,
    started: bool,
    /// This end's report from its streams finishing until both ends are done (then it is sent).
    report: Option<Box<EndpointReport>>,
    local_done: bool,
    remote_done: bool,
    auth: Option<(Key, [u8; NONCE_LEN])>,
    /// The conversation's key material, from the welcome until the connection takes it.
    keys: Option<KeyMaterial>,
    /// The server's frames have carried the right tag: it holds the key.
    server_proven: bool,
    /// The key is used only when the server asks for one (a server's ordered tests).
    only_if_asked: bool,
    server_limits: Option<super::Limits>,
    timers: Timers,
    timer: Timer,
}

impl ClientSession {
    /// A session for the test `spec`, nothing sent yet.
    pub fn new(spec: Test) -> Self {
        ClientSession {
            phase: ClientPhase::New,
            spec,
            started: false,
            report: None,
            local_done: false,
            remote_done: false,
            auth: None,
            keys: None,
            server_proven: false,
            only_if_asked: false,
            server_limits: None,
            timers: Timers::default(),
            timer: Timer::default(),
        }
    }

    /// Waits with these timers instead of the defaults.
    pub fn with_timers(mut self, timers: Timers) -> Self {
        self.timers = timers;
        self
    }

    /// Enters `phase` at `now`, arming the timer its wait has. The results timer runs from this end's
    /// streams finishing, whichever of the peer's `Done` and its results comes first.
    fn enter(&mut self, phase: ClientPhase, now: Instant) {
        use ClientPhase::*;
        self.phase = phase;
        let t = self.timers;
        match phase {
            AwaitWelcome | AwaitReady => self.timer.arm(now, t.handshake),
            AwaitAccepted => self.timer.arm(now, t.handshake + t.accept_extra),
            AwaitResults if self.timer.at().is_none() => self.timer.arm(now, t.results),
            AwaitResults => {}
            New | Connecting | Running | Finished | Failed => self.timer.disarm(),
        }
    }

    /// The limits the server advertised in its welcome.
    pub fn server_limits(&self) -> Option<&super::Limits> {
        self.server_limits.as_ref()
    }

    /// Authenticates with `key` (and `client_nonce`, random bytes from the driver): the hello names
    /// it, and the conversation is sealed from the welcome on; a server that cannot prove it holds
    /// the key is refused.
    pub fn with_auth(mut self, key: Key, client_nonce: [u8; NONCE_LEN]) -> Self {
        self.auth = Some((key, client_nonce));
        self
    }

    /// Uses the key only when the server asks for one: a server that does not is tested without
    /// authentication (a server's ordered tests, whose key is for the servers that want it).
    pub fn key_only_if_asked(mut self, yes: bool) -> Self {
        self.only_if_asked = yes;
        self
    }

    /// The key's name once the server has proved it holds the key (every message since was checked).
    pub fn server_authenticated(&self) -> Option<&str> {
        self.auth
            .as_ref()
            .filter(|_| self.server_proven)
            .map(|(k, _)| k.name.as_str())
    }

    /// Where the conversation stands.
    pub fn phase(&self) -> ClientPhase {
        self.phase
    }

    /// The first message to send.
    pub fn hello(&mut self, now: Instant) -> Message {
        self.enter(ClientPhase::AwaitWelcome, now);
        Message::Hello {
            version: PROTOCOL_VERSION,
            software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
            auth: self.auth.as_ref().map(|(k, n)| k.hello(n)),
        }
    }

    /// The server's welcome at `now`: the test request follows, sealed when this end holds a key.
    fn on_welcome(
        &mut self,
        version: u16,
        challenge: Option<auth::Challenge>,
        now: Instant,
    ) -> Result<ClientAction, ProtocolError> {
        if version != PROTOCOL_VERSION {
            return Err(ProtocolError::Version(version));
        }
        if challenge.is_some() && self.auth.is_none() {
            return Err(ProtocolError::AuthRequired);
        }
        self.keys = keys_for_welcome(self.auth.as_ref(), challenge.as_ref(), self.only_if_asked)?;
        self.enter(ClientPhase::AwaitAccepted, now);
        Ok(ClientAction::Send(Message::TestRequest {
            spec: Box::new(self.spec.spec().clone()),
            auth: None,
        }))
    }

    /// The conversation failed at `now` (a frame the connection could not take).
    pub fn fail(&mut self, now: Instant) {
        self.enter(ClientPhase::Failed, now);
    }

    /// The key material for the connection's guard, once (after the welcome).
    pub fn take_keys(&mut self) -> Option<KeyMaterial> {
        self.keys.take()
    }

    /// The server's frames carry the right tag.
    pub fn on_peer_proven(&mut self) {
        self.server_proven = true;
    }

    /// A message from the server arrived at `now`.
    pub fn on_message(&mut self, msg: Message, now: Instant) -> Result<ClientAction, ProtocolError> {
        use ClientPhase::*;
        match (self.phase, msg) {
            (_, Message::Error { message }) => {
                self.enter(ClientPhase::Failed, now);
                Err(ProtocolError::Remote(message))
            }
            (
                AwaitWelcome,
                Message::Welcome {
                    version,
                    auth: challenge,
                    limits,
                    ..
                },
            ) => {
                self.server_limits = Some(limits);
                let out = self.on_welcome(version, challenge, now);
                if out.is_err() {
                    self.enter(ClientPhase::Failed, now);
                }
                out
            }
            (AwaitAccepted, m @ Message::Accepted { .. }) => {
                self.enter(ClientPhase::Connecting, now);
                let a = Admission::from_message(&m).expect("the pattern is an accepted message");
                Ok(ClientAction::ConnectStreams(a))
            }
            (AwaitAccepted | AwaitWelcome, Message::Rejected { reason, code }) => {
                self.enter(ClientPhase::Failed, now);
                Err(ProtocolError::Rejected { code, reason })
            }
            (AwaitReady, Message::Ready) => {
                self.enter(ClientPhase::Running, now);
                Ok(ClientAction::StartTest)
            }
            (Running, Message::Interval { sample }) => Ok(ClientAction::Interval(sample)),
            (Running, Message::Done) if !self.remote_done => {
                self.remote_done = true;
                Ok(self.maybe_finish(now))
            }
            (AwaitResults, Message::Results { report }) => {
                self.enter(ClientPhase::Finished, now);
                Ok(ClientAction::Finished(report))
            }
            (phase, other) => {
                self.enter(ClientPhase::Failed, now);
                Err(ProtocolError::Unexpected {
                    phase: phase.name(),
                    got: other.kind(),
                })
            }
        }
    }

    /// All data streams are connected.
    pub fn on_streams_connected(&mut self, now: Instant) -> Result<(), ProtocolError> {
        if self.phase != ClientPhase::Connecting {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "streams connected",
            });
        }
        self.enter(ClientPhase::AwaitReady, now);
        Ok(())
    }

    /// The test begins (at once, or at a controller's instant): the server is told to start.
    pub fn start(&mut self) -> Result<ClientAction, ProtocolError> {
        if self.phase != ClientPhase::Running || self.started {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "start",
            });
        }
        self.started = true;
        Ok(ClientAction::Send(Message::Start))
    }

    /// The client's own streams have finished, with `report`: it is sent once the server's are done
    /// too, and the server's results are then awaited.
    pub fn on_local_done(
        &mut self,
        report: EndpointReport,
        now: Instant,
    ) -> Result<ClientAction, ProtocolError> {
        if self.phase != ClientPhase::Running || self.local_done {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "local done",
            });
        }
        self.local_done = true;
        self.report = Some(Box::new(report));
        self.timer.arm(now, self.timers.results);
        Ok(self.maybe_finish(now))
    }

    fn maybe_finish(&mut self, now: Instant) -> ClientAction {
        match self.report.take() {
            Some(report) if self.remote_done => {
                self.enter(ClientPhase::AwaitResults, now);
                ClientAction::Send(Message::Results { report })
            }
            report => {
                self.report = report;
                ClientAction::Wait
            }
        }
    }
}

impl_waiting!(ClientSession, ClientPhase);

/// A multicast order is a UDP test of one stream to a group, its TTL within [`MAX_ORDERED_TTL`]
/// (`super::control`), and it ends on a time; anything else is refused as invalid.
fn multicast_order_fits(order: &super::control::ControlOrder, test: Test) -> Result<Test, (Refusal, String)> {
    use super::control::MAX_ORDERED_TTL;
    let Some(m) = &order.multicast else {
        return Ok(test);
    };
    let group_ok = order
        .host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_multicast());
    let why = if !group_ok {
        Some(format!(
            "a multicast order's host must be a group, not {}",
            order.host
        ))
    } else if test.transport != landspeed_core::config::Transport::Udp || test.streams != 1 {
        Some("a multicast order is one UDP stream".to_string())
    } else if !(1..=MAX_ORDERED_TTL).contains(&m.ttl) {
        Some(format!(
            "a multicast order's TTL is 1 to {MAX_ORDERED_TTL}, not {}",
            m.ttl
        ))
    } else if !matches!(test.end, landspeed_core::config::EndCondition::Time(_)) {
        Some("a multicast order ends on a time".to_string())
    } else {
        None
    };
    match why {
        Some(w) => Err((Refusal::Invalid, w)),
        None => Ok(test),
    }
}

#[cfg(test)]
mod tests {
    use super::super::conn::Conn;
    use super::*;

    #[test]
    fn a_multicast_order_is_one_timed_udp_stream_to_a_group_within_the_ttl_bound() {
        use super::super::control::{ControlOrder, McPart, MulticastOrder};
        let udp = TestSpec {
            transport: landspeed_core::config::Transport::Udp,
            rate_bps: Some(1e6),
            length_bytes: 1200,
            ..TestSpec::default()
        };
        let order = |host: &str, spec: &TestSpec, ttl: u32| ControlOrder {
            host: host.into(),
            port: 5001,
            spec: spec.clone(),
            start_at_unix_ns: None,
            multicast: Some(MulticastOrder {
                part: McPart::Receive,
                key: 7,
                ttl,
            }),
        };
        let fits = |o: &ControlOrder| multicast_order_fits(o, o.spec.clone().validated().unwrap());
        assert!(fits(&order("239.1.1.1", &udp, 1)).is_ok());
        assert!(fits(&order("ff15::1", &udp, 32)).is_ok());
        let tcp = TestSpec::default();
        let two = TestSpec {
            streams: 2,
            ..udp.clone()
        };
        let bytes = TestSpec {
            end: landspeed_core::config::EndCondition::Bytes(1 << 20),
            ..udp.clone()
        };
        for (o, why) in [
            (order("10.0.0.1", &udp, 1), "must be a group"),
            (order("239.1.1.1", &tcp, 1), "one UDP stream"),
            (order("239.1.1.1", &two, 1), "one UDP stream"),
            (order("239.1.1.1", &udp, 0), "TTL is 1 to 32"),
            (order("239.1.1.1", &udp, 33), "TTL is 1 to 32"),
            (order("239.1.1.1", &bytes, 1), "ends on a time"),
        ] {
            let (code, reason) = fits(&o).unwrap_err();
            assert_eq!(code, Refusal::Invalid);
            assert!(reason.contains(why), "{why}: {reason}");
        }
        // A unicast order passes untouched.
        let mut unicast = order("10.0.0.1", &tcp, 0);
        unicast.multicast = None;
        assert!(fits(&unicast).is_ok());
    }

    /// A client session that has sent its hello and been welcomed.
    fn welcomed_client() -> ClientSession {
        let mut c = ClientSession::new(TestSpec::default().validated().unwrap());
        c.hello(now());
        c.on_message(
            Message::Welcome {
                auth: None,
                control: false,
                limits: Default::default(),
                version: PROTOCOL_VERSION,
                software: "s".into(),
            },
            now(),
        )
        .unwrap();
        c
    }

    /// A server session that took a client's hello (no key).
    fn greeted() -> ServerSession {
        let mut s = ServerSession::new();
        s.on_message(
            Message::Hello {
                version: PROTOCOL_VERSION,
                software: "x".into(),
                auth: None,
            },
            now(),
        )
        .unwrap();
        s
    }

    fn now() -> Instant {
        Instant::now()
    }
    use landspeed_core::config::TestSpec;

    fn report() -> Box<EndpointReport> {
        Box::default()
    }

    /// Runs a whole test through both machines, passing messages between them as a driver would.
    #[test]
    fn full_exchange() {
        let spec = TestSpec {
            streams: 2,
            ..TestSpec::default()
        }
        .validated()
        .unwrap();
        let mut c = ClientSession::new(spec.clone());
        let mut s = ServerSession::new();
        let hello = c.hello(now());
        let ServerAction::Reply(welcome) = s.on_message(hello, now()).unwrap() else {
            panic!()
        };
        let ClientAction::Send(req) = c.on_message(welcome, now()).unwrap() else {
            panic!()
        };
        assert_eq!(s.on_message(req, now()).unwrap(), ServerAction::Accept(spec));
        let id = SessionId([1; 16]);
        let cert = Some(landspeed_core::tls::CertFingerprint([7; 32]));
        let a = Admission {
            session: id,
            certificate: cert,
            quic_port: Some(4433),
        };
        let ServerAction::Reply(accepted) = s.accepted(a).unwrap() else {
            panic!()
        };
        assert_eq!(
            c.on_message(accepted, now()).unwrap(),
            ClientAction::ConnectStreams(a)
        );
        let ready = ServerAction::Reply(Message::Ready);
        assert_eq!(s.on_stream(1, now()).unwrap(), ServerAction::Wait);
        assert_eq!(s.on_stream(0, now()).unwrap(), ready);
        c.on_streams_connected(now()).unwrap();
        assert_eq!(
            c.on_message(Message::Ready, now()).unwrap(),
            ClientAction::StartTest
        );
        assert_eq!(
            s.on_message(Message::Start, now()).unwrap(),
            ServerAction::StartTest
        );
        let sample = IntervalSample {
            index: 0,
            start_s: 0.0,
            end_s: 1.0,
            omitted: false,
            streams: vec![],
        };
        assert!(matches!(
            c.on_message(Message::Interval { sample }, now()).unwrap(),
            ClientAction::Interval(_)
        ));
        assert_eq!(
            c.start().unwrap(),
            ClientAction::Send(Message::Start),
            "the client says when the test begins"
        );
        assert!(c.start().is_err(), "once");
        assert_eq!(
            c.on_local_done(EndpointReport::default(), now()).unwrap(),
            ClientAction::Wait
        );
        let ServerAction::Reply(done) = s.on_local_done(now()).unwrap() else {
            panic!()
        };
        let mine = Message::Results { report: report() };
        assert_eq!(c.on_message(done, now()).unwrap(), ClientAction::Send(mine));
        assert!(
            s.results(EndpointReport::default()).is_err(),
            "not before the client's"
        );
        assert!(matches!(
            s.on_message(Message::Results { report: report() }, now())
                .unwrap(),
            ServerAction::SendResults(_)
        ));
        assert!(matches!(
            s.results(EndpointReport::default()).unwrap(),
            ServerAction::Reply(Message::Results { .. })
        ));
        assert!(s.results(EndpointReport::default()).is_err(), "once");
        assert!(matches!(
            c.on_message(Message::Results { report: report() }, now())
                .unwrap(),
            ClientAction::Finished(_)
        ));
        assert_eq!(s.phase(), ServerPhase::Finished);
        assert_eq!(c.phase(), ClientPhase::Finished);
    }

    #[test]
    fn server_refuses_out_of_order_and_bad_requests() {
        let mut s = ServerSession::new();
        assert!(matches!(
            s.on_message(Message::Start, now()),
            Err(ProtocolError::Unexpected { .. })
        ));
        assert_eq!(s.phase(), ServerPhase::Failed);

        let mut s = ServerSession::new();
        assert!(matches!(
            s.on_message(
                Message::Hello {
                    version: 99,
                    software: "x".into(),
                    auth: None,
                },
                now()
            ),
            Err(ProtocolError::Version(99))
        ));

        let mut s = greeted();
        let bad = TestSpec {
            streams: 0,
            ..TestSpec::default()
        };
        assert!(matches!(
            s.on_message(
                Message::TestRequest {
                    spec: Box::new(bad),
                    auth: None
                },
                now()
            )
            .unwrap(),
            ServerAction::Reject(_)
        ));
        assert_eq!(s.phase(), ServerPhase::Failed);

        // A UDP request/response test is the echo service's, never a session's: a client that asks
        // for one anyway is refused by name.
        let mut s = greeted();
        let udp_rr = TestSpec {
            transport: landspeed_core::config::Transport::Udp,
            length_bytes: 1200,
            transactions: Some(landspeed_core::config::TransactionSpec {
                request_bytes: 32,
                response_bytes: 32,
                in_flight: 1,
                connect_each: false,
            }),
            ..TestSpec::default()
        };
        let said = s.on_message(
            Message::TestRequest {
                spec: Box::new(udp_rr),
                auth: None,
            },
            now(),
        );
        assert!(
            matches!(&said, Ok(ServerAction::Reject(Message::Rejected { reason, code: Refusal::Invalid }))
                if reason.contains("echo service")),
            "{said:?}"
        );
    }

    #[test]
    fn server_checks_stream_ids() {
        let mut s = greeted();
        s.on_message(
            Message::TestRequest {
                spec: Box::new(TestSpec {
                    streams: 2,
                    ..TestSpec::default()
                }),
                auth: None,
            },
            now(),
        )
        .unwrap();
        assert_eq!(
            s.on_stream(5, now()),
            Err(ProtocolError::UnknownStream { id: 5, total: 2 })
        );
        s.on_stream(0, now()).unwrap();
        assert_eq!(s.on_stream(0, now()), Err(ProtocolError::DuplicateStream(0)));
        assert!(s.on_local_done(now()).is_err());
    }

    #[test]
    fn client_reports_rejection_and_remote_errors() {
        let mut c = welcomed_client();
        assert_eq!(
            c.on_message(
                Message::Rejected {
                    reason: "busy".into(),
                    code: Refusal::Busy,
                },
                now()
            ),
            Err(ProtocolError::Rejected {
                code: Refusal::Busy,
                reason: "busy".into()
            })
        );
        let mut c = ClientSession::new(TestSpec::default().validated().unwrap());
        c.hello(now());
        assert_eq!(
            c.on_message(
                Message::Error {
                    message: "boom".into()
                },
                now()
            ),
            Err(ProtocolError::Remote("boom".into()))
        );
        let mut c = ClientSession::new(TestSpec::default().validated().unwrap());
        c.hello(now());
        assert!(matches!(
            c.on_message(Message::Done, now()),
            Err(ProtocolError::Unexpected { .. })
        ));
    }

    #[test]
    fn done_twice_is_a_violation() {
        let mut c = welcomed_client();
        c.on_message(
            Message::Accepted {
                session: SessionId([0; 16]),
                certificate: None,
                quic_port: None,
            },
            now(),
        )
        .unwrap();
        c.on_streams_connected(now()).unwrap();
        c.on_message(Message::Ready, now()).unwrap();
        assert_eq!(c.on_message(Message::Done, now()).unwrap(), ClientAction::Wait);
        assert!(c.on_message(Message::Done, now()).is_err());
    }

    /// A controller's conversation with a server, through both connections: welcome, a clock probe,
    /// an order. Whether the welcome advertised orders, and what the server decided.
    fn order_through(
        s: ServerSession,
        key: Option<Key>,
    ) -> (bool, Result<ServerAction, ProtocolError>, Conn<ServerSession>) {
        use super::super::control::{ControlOrder, ControllerAction, ControllerSession};
        use super::super::mitm::{deliver, frames};
        let t = now();
        let key = key.map(|k| (k, [4; NONCE_LEN]));
        let mut c = Conn::new(ControllerSession::new(key, 1, (t, 77), Duration::from_secs(10)));
        let mut s = Conn::new(s);
        c.handle_local(t, |m, now| Ok(ControllerAction::Send(m.hello(now))))
            .unwrap();
        deliver(&mut s, &frames(&mut c)).unwrap();
        deliver(&mut c, &frames(&mut s)).unwrap();
        deliver(&mut s, &frames(&mut c)).unwrap();
        let Some(ServerAction::ClockReading { client_ns }) = s.poll_action() else {
            panic!("no clock probe")
        };
        s.send(&Message::Clock {
            client_ns,
            server_ns: client_ns + 3,
        });
        deliver(&mut c, &frames(&mut s)).unwrap();
        let Some(ControllerAction::Checked { welcome: w, .. }) = c.poll_action() else {
            panic!()
        };
        let order = ControlOrder {
            host: "b".into(),
            port: 5201,
            spec: TestSpec::default(),
            start_at_unix_ns: None,
            multicast: None,
        };
        if let Err(e) = c.handle_local(t, |m, now| m.order(order, Duration::from_secs(60), now)) {
            return (w.control, Err(e), s);
        }
        let out = deliver(&mut s, &frames(&mut c)).map(|()| s.poll_action().expect("an answer"));
        (w.control, out, s)
    }

    #[test]
    fn orders_need_allow_control_and_a_valid_key() {
        let keys = || Arc::new(KeyRing::parse("ops 0123456789abcdef0123").unwrap());
        let ops = Key::new("ops", b"0123456789abcdef0123").unwrap();

        let s = ServerSession::new()
            .with_auth(keys(), [1; NONCE_LEN])
            .with_control(true);
        let (advertised, out, mut s) = order_through(s, Some(ops.clone()));
        assert!(advertised);
        assert!(matches!(out, Ok(ServerAction::RunOrder { .. })), "{out:?}");
        assert_eq!(s.machine().phase(), ServerPhase::Controlling);
        assert_eq!(s.machine().authenticated(), Some("ops"));
        s.handle_local(now(), |m, _| {
            m.on_order_done();
            Ok(ServerAction::Wait)
        })
        .unwrap();
        assert_eq!(s.machine().phase(), ServerPhase::Finished);

        // Keys but no --allow-control: refused, and the welcome said so.
        let s = ServerSession::new().with_auth(keys(), [1; NONCE_LEN]);
        let (advertised, out, _) = order_through(s, Some(ops.clone()));
        assert!(!advertised);
        assert!(matches!(out, Ok(ServerAction::Reject(_))), "{out:?}");

        // --allow-control without keys never runs anything.
        let s = ServerSession::new().with_control(true);
        let (advertised, out, _) = order_through(s, None);
        assert!(!advertised);
        assert!(matches!(out, Ok(ServerAction::Reject(_))), "{out:?}");

        // A wrong key fails at its first sealed message (the clock probe).
        let wrong = Key::new("ops", b"not-the-right-secret!").unwrap();
        let s = ServerSession::new()
            .with_auth(keys(), [1; NONCE_LEN])
            .with_control(true);
        let t = now();
        let mut c = Conn::new(super::super::control::ControllerSession::new(
            Some((wrong, [4; NONCE_LEN])),
            1,
            (t, 77),
            Duration::from_secs(10),
        ));
        let mut s = Conn::new(s);
        c.handle_local(t, |m, now| {
            Ok(super::super::control::ControllerAction::Send(m.hello(now)))
        })
        .unwrap();
        use super::super::mitm::{deliver, frames};
        deliver(&mut s, &frames(&mut c)).unwrap();
        deliver(&mut c, &frames(&mut s)).unwrap();
        deliver(&mut s, &frames(&mut c)).unwrap();
        assert!(matches!(s.poll_action(), Some(ServerAction::AuthFailed { .. })));
    }

    #[test]
    fn clock_probes_are_bounded() {
        let mut s = greeted();
        for i in 0..super::super::control::MAX_CLOCK_PROBES {
            assert!(s
                .on_message(Message::ClockProbe { client_ns: i as u64 }, now())
                .is_ok());
        }
        assert!(s.on_message(Message::ClockProbe { client_ns: 0 }, now()).is_err());
    }
}
