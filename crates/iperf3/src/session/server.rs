//! The server's side of an iperf3 conversation: PARAM_EXCHANGE, the parameters checked against the
//! protocol and this server's limits (a refusal answered with iperf3's error number), CREATE_STREAMS
//! once the driver can route the data connections, TEST_START and TEST_RUNNING after the last stream,
//! then the client's TEST_END, the results both ways and IPERF_DONE.

use super::{Inbox, Iperf3Error, Iperf3Timers};
use crate::params::{Params, MAX_TIME_S};
use crate::results::Results;
use crate::wire::{errno, frame_json, server_error, State, MAX_JSON, MAX_RESULTS_JSON};
use landspeed_core::config::{EndCondition, Test};
use landspeed_proto::{Conversation, Limits, OverLimit, Timer};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Where the server's conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPhase {
    /// PARAM_EXCHANGE is sent; the parameters are awaited.
    AwaitParams,
    /// The parameters are accepted; the driver prepares to receive the streams.
    Accepted,
    /// CREATE_STREAMS is sent; the data streams are awaited.
    AwaitStreams,
    /// TEST_START and TEST_RUNNING are sent: the data moves until the client's TEST_END.
    Running,
    /// TEST_END arrived; the driver stops the engine and hands over this end's results.
    Ended,
    /// EXCHANGE_RESULTS is sent; the client's results are awaited.
    AwaitResults,
    /// The results went both ways and DISPLAY_RESULTS is sent; IPERF_DONE is awaited.
    AwaitDone,
    /// The conversation is complete.
    Finished,
    /// The conversation failed.
    Failed,
}

impl ServerPhase {
    /// What the session waits for, as the error messages say it.
    pub fn name(self) -> &'static str {
        match self {
            ServerPhase::AwaitParams => "waiting for the parameters",
            ServerPhase::Accepted => "preparing for the streams",
            ServerPhase::AwaitStreams => "waiting for the data streams",
            ServerPhase::Running => "running",
            ServerPhase::Ended => "ending the test",
            ServerPhase::AwaitResults => "waiting for the client's results",
            ServerPhase::AwaitDone => "waiting for IPERF_DONE",
            ServerPhase::Finished => "finished",
            ServerPhase::Failed => "failed",
        }
    }
}

/// What the server's session asks of its driver.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerAction {
    /// The parameters are accepted as `test`: make the data connections find this test, then call
    /// `create_streams`.
    Accepted {
        /// The parameters as the client sent them.
        params: Box<Params>,
        /// The test this server runs for them.
        test: Box<Test>,
    },
    /// Every stream is in and TEST_START/TEST_RUNNING are sent: run the engine.
    Run,
    /// The client sent TEST_END: stop the engine, then call `exchange` with this end's results.
    End,
    /// The client's results; this end's and DISPLAY_RESULTS are sent.
    PeerResults(Box<Results>),
    /// IPERF_DONE (or the client closing after the results): the conversation is complete.
    Done,
}

/// The server's iperf3 session.
#[derive(Debug)]
pub struct ServerSession {
    phase: ServerPhase,
    timers: Iperf3Timers,
    timer: Timer,
    limits: Limits,
    /// iperf3's `--server-bitrate-limit`: the most bits per second a test may ask for in all.
    total_rate_bps: Option<f64>,
    payload_key: u64,
    expected_streams: u32,
    arrived_streams: u32,
    ours: Vec<u8>,
    inbox: Inbox,
    transmit: Vec<u8>,
    actions: VecDeque<ServerAction>,
}

impl ServerSession {
    /// A new test's conversation at `now` (its cookie already read): PARAM_EXCHANGE goes out. Accepted
    /// parameters become a test with `payload_key` within `limits`.
    pub fn new(limits: Limits, payload_key: u64, timers: Iperf3Timers, now: Instant) -> Self {
        let mut s = ServerSession {
            phase: ServerPhase::AwaitParams,
            timers,
            timer: Timer::default(),
            limits,
            total_rate_bps: None,
            payload_key,
            expected_streams: 0,
            arrived_streams: 0,
            ours: vec![],
            inbox: Inbox::default(),
            transmit: vec![State::ParamExchange.byte()],
            actions: VecDeque::new(),
        };
        s.timer.arm(now, timers.handshake);
        s
    }

    /// With iperf3's `--server-bitrate-limit` of `bps`: a test asking for more in all (`-b` times the
    /// streams, both ways with `--bidir`; likewise `--fq-rate`) is refused with iperf3's TOTAL_RATE.
    pub fn with_total_rate(mut self, bps: Option<f64>) -> Self {
        self.total_rate_bps = bps;
        self
    }

    /// The test moved more than the total rate limit on average: SERVER_ERROR with iperf3's
    /// TOTAL_RATE goes out and the conversation is over, as iperf3's server ends such a test.
    pub fn over_total_rate(&mut self) -> Iperf3Error {
        self.transmit.extend(server_error(errno::TOTAL_RATE, 0));
        self.fail(Iperf3Error::TotalRate)
    }

    /// The running test reached one of the server's limits (`cut`): SERVER_ERROR with iperf3's
    /// SERVER_TEST_DURATION_EXPIRED for its length (as iperf3's `--server-max-duration` ends a
    /// test), SERVER_TERM for its bytes, and the conversation is over.
    pub fn cut(&mut self, cut: landspeed_proto::Cut) -> Iperf3Error {
        let code = match cut {
            landspeed_proto::Cut::Duration { .. } => errno::SERVER_TEST_DURATION_EXPIRED,
            landspeed_proto::Cut::Bytes { .. } => errno::SERVER_TERM,
        };
        self.transmit.extend(server_error(code, 0));
        self.fail(Iperf3Error::Cut(cut))
    }

    /// The server cannot take the accepted test now (its memory budget is held by running tests):
    /// SERVER_ERROR with iperf3's ACCESS_DENIED ("the server is busy running a test. try again
    /// later") goes out and the conversation is over.
    pub fn busy(&mut self) -> Iperf3Error {
        self.transmit.extend(server_error(errno::ACCESS_DENIED, 0));
        self.fail(Iperf3Error::AccessDenied)
    }

    /// The accepted parameters did not pass iperf3's authentication (`why`, for the log): SERVER_ERROR
    /// with iperf3's AUTH_TEST ("test authorization failed") goes out and the conversation is over.
    pub fn unauthorized(&mut self, why: String) -> Iperf3Error {
        self.transmit.extend(server_error(errno::AUTH_TEST, 0));
        self.fail(Iperf3Error::Unauthorized(why))
    }

    /// Where the conversation stands.
    pub fn phase(&self) -> ServerPhase {
        self.phase
    }

    /// The data connections can find the test now: CREATE_STREAMS goes out.
    pub fn create_streams(&mut self, now: Instant) -> Result<(), Iperf3Error> {
        self.expect_phase(ServerPhase::Accepted, "create streams")?;
        self.state(State::CreateStreams);
        self.enter(ServerPhase::AwaitStreams, now, self.timers.handshake);
        Ok(())
    }

    /// A data stream arrived; after the last, TEST_START and TEST_RUNNING go out and the test runs.
    pub fn on_stream(&mut self, _now: Instant) -> Result<(), Iperf3Error> {
        self.expect_phase(ServerPhase::AwaitStreams, "stream")?;
        self.arrived_streams += 1;
        if self.arrived_streams == self.expected_streams {
            self.state(State::TestStart);
            self.state(State::TestRunning);
            self.phase = ServerPhase::Running;
            self.timer.disarm();
            self.actions.push_back(ServerAction::Run);
        }
        Ok(())
    }

    /// The streams cannot be had (the server shuts down, a stream failed): the client is told.
    pub fn streams_failed(&mut self) {
        self.transmit.extend(server_error(errno::STREAM_ACCEPT, 0));
        self.fail(());
    }

    /// This end's streams are done before the client said TEST_END (a sending server's byte count):
    /// the client has `timers.idle` to end the test.
    pub fn local_done(&mut self, now: Instant) {
        if self.phase == ServerPhase::Running {
            self.timer.arm(now, self.timers.idle);
        }
    }

    /// This end's results (after `End`): EXCHANGE_RESULTS goes out, and the client's are awaited.
    pub fn exchange(&mut self, ours: &serde_json::Value, now: Instant) -> Result<(), Iperf3Error> {
        self.expect_phase(ServerPhase::Ended, "exchange")?;
        self.ours = frame_json(ours);
        self.state(State::ExchangeResults);
        self.enter(ServerPhase::AwaitResults, now, self.timers.results);
        Ok(())
    }

    fn expect_phase(&self, want: ServerPhase, event: &'static str) -> Result<(), Iperf3Error> {
        if self.phase == want {
            Ok(())
        } else {
            Err(Iperf3Error::BadLocalEvent {
                event,
                phase: self.phase.name(),
            })
        }
    }

    fn enter(&mut self, phase: ServerPhase, now: Instant, wait: Duration) {
        self.phase = phase;
        self.timer.arm(now, wait);
    }

    fn state(&mut self, st: State) {
        self.transmit.push(st.byte());
    }

    fn fail<E>(&mut self, e: E) -> E {
        self.phase = ServerPhase::Failed;
        self.timer.disarm();
        e
    }

    fn finish(&mut self) {
        self.phase = ServerPhase::Finished;
        self.timer.disarm();
        self.actions.push_back(ServerAction::Done);
    }

    /// Takes what has arrived as far as it goes: Ok(false) when more bytes are needed.
    fn step(&mut self, now: Instant) -> Result<bool, Iperf3Error> {
        match self.phase {
            ServerPhase::AwaitParams => self.parameters(now),
            ServerPhase::AwaitResults => self.their_results(now),
            ServerPhase::Finished | ServerPhase::Failed => Ok(false),
            _ => match self.inbox.state() {
                Some(b) => self.on_state(b).map(|()| true),
                None => Ok(false),
            },
        }
    }

    /// A state byte from the client outside the JSON messages.
    fn on_state(&mut self, b: u8) -> Result<(), Iperf3Error> {
        match (self.phase, State::from_byte(b)) {
            (ServerPhase::Running, Some(State::TestEnd)) => {
                self.phase = ServerPhase::Ended;
                self.timer.disarm();
                self.actions.push_back(ServerAction::End);
            }
            (ServerPhase::AwaitDone, Some(State::IperfDone)) => self.finish(),
            (_, Some(State::ClientTerminate)) => return Err(Iperf3Error::ClientTerminated),
            (phase, _) => {
                return Err(Iperf3Error::Unexpected {
                    got: b,
                    expected: phase.name(),
                })
            }
        }
        Ok(())
    }

    /// The parameter message, once it has arrived whole: accepted, or refused with iperf3's number.
    fn parameters(&mut self, now: Instant) -> Result<bool, Iperf3Error> {
        let body = match self.inbox.json(MAX_JSON) {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(false),
            Err(e) => return Err(self.refuse(errno::RECV_PARAMS, e)),
        };
        let (params, test) = match self.accept(&body) {
            Ok(x) => x,
            Err((code, e)) => return Err(self.refuse(code, e)),
        };
        self.expected_streams = test.total_streams();
        if params.landspeed_payload_key.is_some() {
            self.state(State::LandspeedPayload);
        }
        self.phase = ServerPhase::Accepted;
        self.timer.arm(now, self.timers.handshake);
        let params = Box::new(params);
        let test = Box::new(test);
        self.actions.push_back(ServerAction::Accepted { params, test });
        Ok(true)
    }

    /// The parameters as a test this server runs, or iperf3's error number and why not.
    fn accept(&self, body: &[u8]) -> Result<(Params, Test), (i32, Iperf3Error)> {
        let params = Params::parse(body).map_err(|e| (e.code, e.into()))?;
        let test = params.to_test(self.payload_key).map_err(|e| (e.code, e.into()))?;
        if let Some(why) = self.limits.check(&asked(&params, &test)) {
            return Err((limit_code(&why), Iperf3Error::OverLimit(why)));
        }
        if let Some(limit) = self.total_rate_bps {
            let flows = f64::from(test.flows().len() as u32);
            let total = |rate: Option<f64>| rate.unwrap_or(0.0) * f64::from(params.parallel.max(1)) * flows;
            if total(params.bandwidth_bps) > limit || total(params.fqrate_bps) > limit {
                return Err((errno::TOTAL_RATE, Iperf3Error::TotalRate));
            }
        }
        Ok((params, test))
    }

    fn refuse(&mut self, code: i32, e: Iperf3Error) -> Iperf3Error {
        self.transmit.extend(server_error(code, 0));
        e
    }

    /// The client's results, once they have arrived whole: this end's and DISPLAY_RESULTS go out.
    fn their_results(&mut self, now: Instant) -> Result<bool, Iperf3Error> {
        if self.inbox.0.first().copied() == Some(State::ClientTerminate.byte()) {
            return Err(Iperf3Error::ClientTerminated);
        }
        let Some(body) = self.inbox.json(MAX_RESULTS_JSON)? else {
            return Ok(false);
        };
        let theirs = Results::parse(&body)?;
        self.transmit.append(&mut self.ours);
        self.state(State::DisplayResults);
        self.enter(ServerPhase::AwaitDone, now, self.timers.handshake);
        self.actions
            .push_back(ServerAction::PeerResults(Box::new(theirs)));
        Ok(true)
    }
}

/// The test as the client asked for it, for the limits: the test's own deadline carries a safety
/// margin, and a timed test without a time runs iperf3's longest.
fn asked(params: &Params, test: &Test) -> landspeed_core::config::TestSpec {
    let mut asked = test.spec().clone();
    if let EndCondition::Time(_) = asked.end {
        let t = if params.time_s > 0.0 {
            params.time_s
        } else {
            MAX_TIME_S
        };
        asked.end = EndCondition::Time(Duration::from_secs_f64(t));
    }
    asked
}

/// iperf3 has no number for a server's limit; the closest: streams, duration, rate, end conditions,
/// and for memory the block size (what an iperf3 client lowers with -l).
fn limit_code(why: &OverLimit) -> i32 {
    match why {
        OverLimit::Streams { .. } => errno::NUM_STREAMS,
        OverLimit::Duration { .. } => errno::DURATION,
        OverLimit::UdpRate { .. } => errno::TOTAL_RATE,
        OverLimit::Bytes { .. } => errno::END_CONDITIONS,
        OverLimit::Memory { .. } | OverLimit::Threads { .. } | OverLimit::QueueDepth { .. } => {
            errno::BLOCK_SIZE
        }
    }
}

impl ServerSession {
    /// The timer ran out (it was armed `after` ago). Streams that do not all come are answered with
    /// iperf3's STREAM_ACCEPT error; a client that does not say IPERF_DONE after the results has still
    /// completed the test.
    fn on_timeout(&mut self, after: Duration) -> Result<(), Iperf3Error> {
        match self.phase {
            ServerPhase::AwaitDone => {
                self.finish();
                return Ok(());
            }
            ServerPhase::AwaitStreams => self.transmit.extend(server_error(errno::STREAM_ACCEPT, 0)),
            _ => {}
        }
        let phase = self.phase.name();
        Err(self.fail(Iperf3Error::Wait(landspeed_proto::WaitFailed::Timeout {
            phase,
            after,
        })))
    }

    /// Some clients close without IPERF_DONE: after the results, that completes the test.
    fn on_closed(&mut self) -> Iperf3Error {
        let phase = self.phase.name();
        if self.phase == ServerPhase::AwaitDone {
            self.finish();
        } else {
            self.fail(());
        }
        Iperf3Error::Wait(landspeed_proto::WaitFailed::PeerClosed { phase })
    }
}

impl_endpoint!(ServerSession, ServerAction);
