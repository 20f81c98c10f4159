//! The client's side of an iperf3 conversation: the cookie, the parameters on PARAM_EXCHANGE, the data
//! streams on CREATE_STREAMS, the test from TEST_RUNNING to its TEST_END, then results both ways and
//! IPERF_DONE. The session sends what the protocol has next; the driver opens streams, runs the engine
//! and hands over this end's results.

use super::{Inbox, Iperf3Error, Iperf3Timers};
use crate::results::Results;
use crate::wire::{frame_json, Cookie, State, MAX_RESULTS_JSON};
use landspeed_proto::{Conversation, Timer};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Where the client's conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPhase {
    /// The cookie is sent; PARAM_EXCHANGE is awaited.
    AwaitParamExchange,
    /// The parameters are sent; CREATE_STREAMS is awaited.
    AwaitCreateStreams,
    /// The driver opens the data streams.
    OpeningStreams,
    /// The streams are open; TEST_START is awaited.
    AwaitTestStart,
    /// TEST_RUNNING is awaited.
    AwaitTestRunning,
    /// The data moves until this end sends TEST_END.
    Running,
    /// TEST_END is sent; EXCHANGE_RESULTS is awaited.
    AwaitExchangeResults,
    /// The server asked for the results; this end's are not ready yet.
    ExchangeAsked,
    /// This end's results are sent; the server's are awaited.
    AwaitResults,
    /// The server's results are in; DISPLAY_RESULTS is awaited.
    AwaitDisplayResults,
    /// IPERF_DONE is sent: the conversation is complete.
    Finished,
    /// The conversation failed.
    Failed,
}

impl ClientPhase {
    /// What the session waits for, as the error messages say it.
    pub fn name(self) -> &'static str {
        match self {
            ClientPhase::AwaitParamExchange => "waiting for PARAM_EXCHANGE",
            ClientPhase::AwaitCreateStreams => "waiting for CREATE_STREAMS",
            ClientPhase::OpeningStreams => "opening the data streams",
            ClientPhase::AwaitTestStart => "waiting for TEST_START",
            ClientPhase::AwaitTestRunning => "waiting for TEST_RUNNING",
            ClientPhase::Running => "running",
            ClientPhase::AwaitExchangeResults | ClientPhase::ExchangeAsked => "waiting for EXCHANGE_RESULTS",
            ClientPhase::AwaitResults => "waiting for the server's results",
            ClientPhase::AwaitDisplayResults => "waiting for DISPLAY_RESULTS",
            ClientPhase::Finished => "finished",
            ClientPhase::Failed => "failed",
        }
    }
}

/// What the client's session asks of its driver.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAction {
    /// The server answered the cookie with PARAM_EXCHANGE (the parameters are on their way): it is
    /// an iperf3 server that takes this test.
    Greeted,
    /// CREATE_STREAMS: open the data streams, then call `streams_open`.
    OpenStreams,
    /// TEST_RUNNING: the data moves now.
    Run,
    /// The server's results; IPERF_DONE is sent and the conversation is complete.
    Done(Box<Results>),
}

/// The client's iperf3 session.
#[derive(Debug)]
pub struct ClientSession {
    phase: ClientPhase,
    timers: Iperf3Timers,
    timer: Timer,
    params: Vec<u8>,
    /// The parameters carry landspeed's payload key (`Params::message_for` with a verifying spec).
    offered_payload: bool,
    /// A landspeed server took the key (`State::LandspeedPayload`): both ends send and check it.
    payload_agreed: bool,
    ours: Option<Vec<u8>>,
    theirs: Option<Results>,
    inbox: Inbox,
    transmit: Vec<u8>,
    actions: VecDeque<ClientAction>,
}

impl ClientSession {
    /// A conversation opened at `now` with `cookie`, which sends `params` (iperf3's parameter JSON)
    /// when the server asks.
    pub fn new(cookie: &Cookie, params: &serde_json::Value, timers: Iperf3Timers, now: Instant) -> Self {
        let mut s = ClientSession {
            phase: ClientPhase::AwaitParamExchange,
            timers,
            timer: Timer::default(),
            params: frame_json(params),
            offered_payload: params.get(crate::params::PAYLOAD_KEY).is_some(),
            payload_agreed: false,
            ours: None,
            theirs: None,
            inbox: Inbox::default(),
            transmit: cookie.to_wire().to_vec(),
            actions: VecDeque::new(),
        };
        s.timer.arm(now, timers.handshake);
        s
    }

    /// Where the conversation stands.
    pub fn phase(&self) -> ClientPhase {
        self.phase
    }

    /// The server is landspeed and took this client's payload key: the streams carry landspeed's
    /// pattern both ways and each end checks every byte it receives. Known once `OpenStreams` came.
    pub fn payload_agreed(&self) -> bool {
        self.payload_agreed
    }

    /// The data streams are open (after `OpenStreams`): TEST_START is awaited.
    pub fn streams_open(&mut self, now: Instant) -> Result<(), Iperf3Error> {
        self.expect_phase(ClientPhase::OpeningStreams, "streams open")?;
        self.enter(ClientPhase::AwaitTestStart, now, self.timers.handshake);
        Ok(())
    }

    /// The test is over at this end (by time, count or interrupt): TEST_END goes out once; later
    /// calls, and calls after a failure, do nothing.
    pub fn end(&mut self, now: Instant) {
        if self.phase == ClientPhase::Running {
            self.state(State::TestEnd);
            self.enter(ClientPhase::AwaitExchangeResults, now, self.timers.results);
        }
    }

    /// This end's results (iperf3's results JSON): sent when the server asks, at once if it has.
    pub fn results(&mut self, ours: &serde_json::Value) -> Result<(), Iperf3Error> {
        match self.phase {
            ClientPhase::AwaitExchangeResults => self.ours = Some(frame_json(ours)),
            ClientPhase::ExchangeAsked => {
                self.transmit.extend(frame_json(ours));
                self.phase = ClientPhase::AwaitResults;
            }
            _ => return Err(self.bad_event("results")),
        }
        Ok(())
    }

    fn expect_phase(&self, want: ClientPhase, event: &'static str) -> Result<(), Iperf3Error> {
        if self.phase == want {
            Ok(())
        } else {
            Err(self.bad_event(event))
        }
    }

    fn bad_event(&self, event: &'static str) -> Iperf3Error {
        Iperf3Error::BadLocalEvent {
            event,
            phase: self.phase.name(),
        }
    }

    fn enter(&mut self, phase: ClientPhase, now: Instant, wait: Duration) {
        self.phase = phase;
        self.timer.arm(now, wait);
    }

    fn state(&mut self, st: State) {
        self.transmit.push(st.byte());
    }

    fn fail(&mut self, e: Iperf3Error) -> Iperf3Error {
        self.phase = ClientPhase::Failed;
        self.timer.disarm();
        e
    }

    /// Takes what has arrived as far as it goes: Ok(false) when more bytes are needed.
    fn step(&mut self, now: Instant) -> Result<bool, Iperf3Error> {
        match self.phase {
            ClientPhase::AwaitResults => return self.their_results(),
            ClientPhase::Finished | ClientPhase::Failed => return Ok(false),
            _ => {}
        }
        if let Some(refused) = self.inbox.server_error() {
            return refused
                .map(|(code, errno)| Err(Iperf3Error::ServerError { code, errno }))
                .unwrap_or(Ok(false));
        }
        let Some(b) = self.inbox.state() else {
            return Ok(false);
        };
        match State::from_byte(b) {
            Some(State::AccessDenied) => return Err(Iperf3Error::AccessDenied),
            Some(State::ServerTerminate) => return Err(Iperf3Error::ServerTerminated),
            _ => {}
        }
        self.on_state(b, now)?;
        Ok(true)
    }

    /// The state byte `b` in the current phase.
    fn on_state(&mut self, b: u8, now: Instant) -> Result<(), Iperf3Error> {
        let (hs, rs) = (self.timers.handshake, self.timers.results);
        let st = State::from_byte(b);
        match (self.phase, st) {
            (ClientPhase::AwaitParamExchange, Some(State::ParamExchange)) => {
                self.transmit.extend_from_slice(&self.params);
                self.actions.push_back(ClientAction::Greeted);
                self.enter(ClientPhase::AwaitCreateStreams, now, hs);
            }
            (ClientPhase::AwaitCreateStreams, Some(State::LandspeedPayload)) if self.offered_payload => {
                self.payload_agreed = true;
            }
            (ClientPhase::AwaitCreateStreams, Some(State::CreateStreams)) => {
                self.phase = ClientPhase::OpeningStreams;
                self.timer.disarm();
                self.actions.push_back(ClientAction::OpenStreams);
            }
            (ClientPhase::AwaitTestStart, Some(State::TestStart)) => {
                self.enter(ClientPhase::AwaitTestRunning, now, hs);
            }
            (ClientPhase::AwaitTestRunning, Some(State::TestRunning)) => {
                self.phase = ClientPhase::Running;
                self.timer.disarm();
                self.actions.push_back(ClientAction::Run);
            }
            (ClientPhase::AwaitExchangeResults, Some(State::ExchangeResults)) => match self.ours.take() {
                Some(ours) => {
                    self.transmit.extend(ours);
                    self.enter(ClientPhase::AwaitResults, now, rs);
                }
                None => self.phase = ClientPhase::ExchangeAsked,
            },
            (ClientPhase::AwaitDisplayResults, Some(State::DisplayResults)) => {
                self.state(State::IperfDone);
                self.phase = ClientPhase::Finished;
                self.timer.disarm();
                let theirs = self.theirs.take().unwrap_or_default();
                self.actions.push_back(ClientAction::Done(Box::new(theirs)));
            }
            _ => {
                return Err(Iperf3Error::Unexpected {
                    got: b,
                    expected: self.phase.name(),
                })
            }
        }
        Ok(())
    }

    /// The server's results message, once it has arrived whole.
    fn their_results(&mut self) -> Result<bool, Iperf3Error> {
        let Some(body) = self.inbox.json(MAX_RESULTS_JSON)? else {
            return Ok(false);
        };
        self.theirs = Some(Results::parse(&body)?);
        self.phase = ClientPhase::AwaitDisplayResults;
        Ok(true)
    }
}

impl ClientSession {
    /// The timer ran out (it was armed `after` ago): the session fails, naming the step.
    fn on_timeout(&mut self, after: Duration) -> Result<(), Iperf3Error> {
        let phase = self.phase.name();
        Err(self.fail(Iperf3Error::Wait(landspeed_proto::WaitFailed::Timeout {
            phase,
            after,
        })))
    }

    /// A server that closes right after SERVER_ERROR has refused the test, numbers or not.
    fn on_closed(&mut self) -> Iperf3Error {
        let phase = self.phase.name();
        let e = match self.inbox.server_error() {
            Some(codes) => {
                let (code, errno) = codes.unwrap_or((0, 0));
                Iperf3Error::ServerError { code, errno }
            }
            None => Iperf3Error::Wait(landspeed_proto::WaitFailed::PeerClosed { phase }),
        };
        self.fail(e)
    }
}

impl_endpoint!(ClientSession, ClientAction);
