//! The client and server session state machines. They hold no sockets: a driver feeds them the messages
//! it read and the local events it saw (a data stream arrived, the local streams finished), and they
//! answer with what to do next, or with a typed error when the peer broke the protocol. This is where the
//! order of a test is defined, so it is tested here message by message.

use super::messages::{Message, SessionId};
use super::preamble::PROTOCOL_VERSION;
use crate::config::{ConfigError, TestSpec};
use crate::endpoint::{EndpointReport, IntervalSample};

/// A violation of the protocol, or a refusal, as a typed error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    #[error("unexpected '{got}' message while {phase}")]
    Unexpected { phase: &'static str, got: &'static str },
    #[error("peer speaks protocol version {0}, this side speaks {PROTOCOL_VERSION}")]
    Version(u16),
    #[error("invalid test request: {0}")]
    InvalidSpec(#[from] ConfigError),
    #[error("server refused the test: {0}")]
    Rejected(String),
    #[error("peer reported an error: {0}")]
    Remote(String),
    #[error("data stream {id} is not part of this test (it has {total} streams)")]
    UnknownStream { id: u32, total: u32 },
    #[error("data stream {0} connected twice")]
    DuplicateStream(u32),
    #[error("local event '{event}' while {phase}")]
    BadLocalEvent {
        phase: &'static str,
        event: &'static str,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPhase {
    AwaitHello,
    AwaitRequest,
    AwaitStreams,
    AwaitStart,
    Running,
    AwaitResults,
    Finished,
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
    Accept(TestSpec),
    /// The request is invalid: send this `Rejected` and close.
    Reject(Message),
    /// Start the local streams.
    StartTest,
    /// Stop local senders early.
    StopSenders,
    /// The client's results arrived: send ours and close.
    SendResults(Box<EndpointReport>),
    /// The client gave up; close.
    PeerFailed(String),
}

/// The server's side of one test.
#[derive(Debug)]
pub struct ServerSession {
    phase: ServerPhase,
    spec: Option<TestSpec>,
    connected: Vec<bool>,
    remaining: u32,
    limits: super::Limits,
}

impl Default for ServerSession {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerSession {
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
        }
    }

    pub fn phase(&self) -> ServerPhase {
        self.phase
    }

    pub fn spec(&self) -> Option<&TestSpec> {
        self.spec.as_ref()
    }

    fn unexpected(&mut self, got: &Message) -> ProtocolError {
        let e = ProtocolError::Unexpected {
            phase: self.phase.name(),
            got: got.kind(),
        };
        self.phase = ServerPhase::Failed;
        e
    }

    pub fn on_message(&mut self, msg: Message) -> Result<ServerAction, ProtocolError> {
        use ServerPhase::*;
        match (self.phase, msg) {
            (_, Message::Error { message }) => {
                self.phase = Failed;
                Ok(ServerAction::PeerFailed(message))
            }
            (AwaitHello, Message::Hello { version, .. }) => {
                if version != PROTOCOL_VERSION {
                    self.phase = Failed;
                    return Err(ProtocolError::Version(version));
                }
                self.phase = AwaitRequest;
                Ok(ServerAction::Reply(Message::Welcome {
                    version: PROTOCOL_VERSION,
                    software: format!("landspeed {}", crate::SOFTWARE_VERSION),
                    limits: self.limits.clone(),
                }))
            }
            (AwaitRequest, Message::TestRequest { spec }) => match spec
                .validate()
                .map_err(|e| e.to_string())
                .and_then(|()| self.limits.check(&spec).map_or(Ok(()), Err))
            {
                Ok(()) => {
                    self.remaining = spec.total_streams();
                    self.connected = vec![false; self.remaining as usize];
                    self.spec = Some(spec.clone());
                    self.phase = AwaitStreams;
                    Ok(ServerAction::Accept(spec))
                }
                Err(reason) => {
                    self.phase = Failed;
                    Ok(ServerAction::Reject(Message::Rejected { reason }))
                }
            },
            (AwaitStart, Message::Start) => {
                self.phase = Running;
                Ok(ServerAction::StartTest)
            }
            (Running | AwaitResults, Message::Stop) => Ok(ServerAction::StopSenders),
            (AwaitResults, Message::Results { report }) => {
                self.phase = Finished;
                Ok(ServerAction::SendResults(report))
            }
            (_, other) => Err(self.unexpected(&other)),
        }
    }

    /// A data connection quoting this session arrived. Returns true when it was the last one expected.
    pub fn on_stream(&mut self, id: u32) -> Result<bool, ProtocolError> {
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
            self.phase = ServerPhase::AwaitStart;
            return Ok(true);
        }
        Ok(false)
    }

    /// The server's own streams have finished: the driver sends `Done` and waits for the client's results.
    pub fn on_local_done(&mut self) -> Result<Message, ProtocolError> {
        if self.phase != ServerPhase::Running {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "local done",
            });
        }
        self.phase = ServerPhase::AwaitResults;
        Ok(Message::Done)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPhase {
    New,
    AwaitWelcome,
    AwaitAccepted,
    Connecting,
    AwaitReady,
    Running,
    AwaitResults,
    Finished,
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
    Send(Message),
    /// Open the data streams quoting this session.
    ConnectStreams(SessionId),
    /// Send `Start` and start the local streams.
    StartTest,
    /// A server-side interval sample arrived.
    Interval(IntervalSample),
    /// Nothing to do yet.
    Wait,
    /// Both ends are done: send the local report (`Results`) and wait for the server's.
    SendResults,
    /// The server's report arrived: the test is complete.
    Finished(Box<EndpointReport>),
}

/// The client's side of one test.
#[derive(Debug)]
pub struct ClientSession {
    phase: ClientPhase,
    spec: TestSpec,
    local_done: bool,
    remote_done: bool,
}

impl ClientSession {
    pub fn new(spec: TestSpec) -> Self {
        ClientSession {
            phase: ClientPhase::New,
            spec,
            local_done: false,
            remote_done: false,
        }
    }

    pub fn phase(&self) -> ClientPhase {
        self.phase
    }

    /// The first message to send.
    pub fn hello(&mut self) -> Message {
        self.phase = ClientPhase::AwaitWelcome;
        Message::Hello {
            version: PROTOCOL_VERSION,
            software: format!("landspeed {}", crate::SOFTWARE_VERSION),
        }
    }

    pub fn on_message(&mut self, msg: Message) -> Result<ClientAction, ProtocolError> {
        use ClientPhase::*;
        match (self.phase, msg) {
            (_, Message::Error { message }) => {
                self.phase = Failed;
                Err(ProtocolError::Remote(message))
            }
            (AwaitWelcome, Message::Welcome { version, .. }) => {
                if version != PROTOCOL_VERSION {
                    self.phase = Failed;
                    return Err(ProtocolError::Version(version));
                }
                self.phase = AwaitAccepted;
                Ok(ClientAction::Send(Message::TestRequest {
                    spec: self.spec.clone(),
                }))
            }
            (AwaitAccepted, Message::Accepted { session }) => {
                self.phase = Connecting;
                Ok(ClientAction::ConnectStreams(session))
            }
            (AwaitAccepted | AwaitWelcome, Message::Rejected { reason }) => {
                self.phase = Failed;
                Err(ProtocolError::Rejected(reason))
            }
            (AwaitReady, Message::Ready) => {
                self.phase = Running;
                Ok(ClientAction::StartTest)
            }
            (Running, Message::Interval { sample }) => Ok(ClientAction::Interval(sample)),
            (Running, Message::Done) if !self.remote_done => {
                self.remote_done = true;
                Ok(self.maybe_finish())
            }
            (AwaitResults, Message::Results { report }) => {
                self.phase = Finished;
                Ok(ClientAction::Finished(report))
            }
            (phase, other) => {
                self.phase = Failed;
                Err(ProtocolError::Unexpected {
                    phase: phase.name(),
                    got: other.kind(),
                })
            }
        }
    }

    /// All data streams are connected.
    pub fn on_streams_connected(&mut self) -> Result<(), ProtocolError> {
        if self.phase != ClientPhase::Connecting {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "streams connected",
            });
        }
        self.phase = ClientPhase::AwaitReady;
        Ok(())
    }

    /// The client's own streams have finished.
    pub fn on_local_done(&mut self) -> Result<ClientAction, ProtocolError> {
        if self.phase != ClientPhase::Running || self.local_done {
            return Err(ProtocolError::BadLocalEvent {
                phase: self.phase.name(),
                event: "local done",
            });
        }
        self.local_done = true;
        Ok(self.maybe_finish())
    }

    fn maybe_finish(&mut self) -> ClientAction {
        if self.local_done && self.remote_done {
            self.phase = ClientPhase::AwaitResults;
            ClientAction::SendResults
        } else {
            ClientAction::Wait
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TestSpec;

    fn report() -> Box<EndpointReport> {
        Box::default()
    }

    /// Runs a whole test through both machines, passing messages between them as a driver would.
    #[test]
    fn full_exchange() {
        let spec = TestSpec {
            streams: 2,
            ..TestSpec::default()
        };
        let mut c = ClientSession::new(spec.clone());
        let mut s = ServerSession::new();
        let hello = c.hello();
        let ServerAction::Reply(welcome) = s.on_message(hello).unwrap() else {
            panic!()
        };
        let ClientAction::Send(req) = c.on_message(welcome).unwrap() else {
            panic!()
        };
        assert_eq!(s.on_message(req).unwrap(), ServerAction::Accept(spec));
        let id = SessionId([1; 16]);
        assert_eq!(
            c.on_message(Message::Accepted { session: id }).unwrap(),
            ClientAction::ConnectStreams(id)
        );
        assert!(!s.on_stream(1).unwrap());
        assert!(s.on_stream(0).unwrap());
        c.on_streams_connected().unwrap();
        assert_eq!(c.on_message(Message::Ready).unwrap(), ClientAction::StartTest);
        assert_eq!(s.on_message(Message::Start).unwrap(), ServerAction::StartTest);
        let sample = IntervalSample {
            index: 0,
            start_s: 0.0,
            end_s: 1.0,
            omitted: false,
            streams: vec![],
        };
        assert!(matches!(
            c.on_message(Message::Interval { sample }).unwrap(),
            ClientAction::Interval(_)
        ));
        assert_eq!(c.on_local_done().unwrap(), ClientAction::Wait);
        let done = s.on_local_done().unwrap();
        assert_eq!(c.on_message(done).unwrap(), ClientAction::SendResults);
        assert!(matches!(
            s.on_message(Message::Results { report: report() }).unwrap(),
            ServerAction::SendResults(_)
        ));
        assert!(matches!(
            c.on_message(Message::Results { report: report() }).unwrap(),
            ClientAction::Finished(_)
        ));
        assert_eq!(s.phase(), ServerPhase::Finished);
        assert_eq!(c.phase(), ClientPhase::Finished);
    }

    #[test]
    fn server_refuses_out_of_order_and_bad_requests() {
        let mut s = ServerSession::new();
        assert!(matches!(
            s.on_message(Message::Start),
            Err(ProtocolError::Unexpected { .. })
        ));
        assert_eq!(s.phase(), ServerPhase::Failed);

        let mut s = ServerSession::new();
        assert!(matches!(
            s.on_message(Message::Hello {
                version: 99,
                software: "x".into()
            }),
            Err(ProtocolError::Version(99))
        ));

        let mut s = ServerSession::new();
        s.on_message(Message::Hello {
            version: PROTOCOL_VERSION,
            software: "x".into(),
        })
        .unwrap();
        let bad = TestSpec {
            streams: 0,
            ..TestSpec::default()
        };
        assert!(matches!(
            s.on_message(Message::TestRequest { spec: bad }).unwrap(),
            ServerAction::Reject(_)
        ));
        assert_eq!(s.phase(), ServerPhase::Failed);
    }

    #[test]
    fn server_checks_stream_ids() {
        let mut s = ServerSession::new();
        s.on_message(Message::Hello {
            version: PROTOCOL_VERSION,
            software: "x".into(),
        })
        .unwrap();
        s.on_message(Message::TestRequest {
            spec: TestSpec {
                streams: 2,
                ..TestSpec::default()
            },
        })
        .unwrap();
        assert_eq!(
            s.on_stream(5),
            Err(ProtocolError::UnknownStream { id: 5, total: 2 })
        );
        s.on_stream(0).unwrap();
        assert_eq!(s.on_stream(0), Err(ProtocolError::DuplicateStream(0)));
        assert!(s.on_local_done().is_err());
    }

    #[test]
    fn client_reports_rejection_and_remote_errors() {
        let mut c = ClientSession::new(TestSpec::default());
        c.hello();
        c.on_message(Message::Welcome {
            limits: Default::default(),
            version: PROTOCOL_VERSION,
            software: "s".into(),
        })
        .unwrap();
        assert_eq!(
            c.on_message(Message::Rejected {
                reason: "busy".into()
            }),
            Err(ProtocolError::Rejected("busy".into()))
        );
        let mut c = ClientSession::new(TestSpec::default());
        c.hello();
        assert_eq!(
            c.on_message(Message::Error {
                message: "boom".into()
            }),
            Err(ProtocolError::Remote("boom".into()))
        );
        let mut c = ClientSession::new(TestSpec::default());
        c.hello();
        assert!(matches!(
            c.on_message(Message::Done),
            Err(ProtocolError::Unexpected { .. })
        ));
    }

    #[test]
    fn done_twice_is_a_violation() {
        let mut c = ClientSession::new(TestSpec::default());
        c.hello();
        c.on_message(Message::Welcome {
            limits: Default::default(),
            version: PROTOCOL_VERSION,
            software: "s".into(),
        })
        .unwrap();
        c.on_message(Message::Accepted {
            session: SessionId([0; 16]),
        })
        .unwrap();
        c.on_streams_connected().unwrap();
        c.on_message(Message::Ready).unwrap();
        assert_eq!(c.on_message(Message::Done).unwrap(), ClientAction::Wait);
        assert!(c.on_message(Message::Done).is_err());
    }
}
