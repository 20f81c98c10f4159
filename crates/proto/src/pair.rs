//! In-memory pair tests: a client session against a server session with no sockets and a virtual
//! clock. Every message crosses as bytes (encoded, then reassembled by a `FrameDecoder` from small
//! chunks), so the framing is on the path too. These walk every path of a test: the complete exchange,
//! each refusal the sessions decide, a timeout at every wait on both sides, and the peer vanishing at
//! every wait. Time only moves when a test moves it, so nothing here depends on the machine's speed.

use super::auth::{Key, KeyRing, NONCE_LEN};
use super::framing::{encode, FrameDecoder};
use super::messages::{Message, Refusal, SessionId};
use super::session::{ClientAction, ClientSession, ProtocolError, ServerAction, ServerSession};
use super::timer::{Timers, Waiting};
use super::Limits;
use landspeed_core::config::TestSpec;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TIMERS: Timers = Timers {
    handshake: Duration::from_secs(10),
    accept_extra: Duration::from_secs(5),
    results: Duration::from_secs(40),
};

/// The two sessions, the clock they share, and what the server side has been asked to do.
struct Pair {
    c: ClientSession,
    s: ServerSession,
    now: Instant,
    /// When the waiting side armed its timer, where that was before the walk's last message.
    armed: Option<Instant>,
}

/// Sends `m` through the byte layer, three bytes at a time.
fn wire(m: &Message) -> Message {
    let mut d = FrameDecoder::new();
    let mut out = None;
    for chunk in encode(m).chunks(3) {
        d.push(chunk);
        if let Some(x) = d.next_message().expect("a frame we encoded") {
            out = Some(x);
        }
    }
    out.expect("one whole message")
}

/// The client's answer once both ends are done: its (default, empty) report.
fn results() -> ClientAction {
    ClientAction::Send(Message::Results {
        report: Box::default(),
    })
}

/// Where a walk stops: the wait one side is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The server, before the hello.
    ServerHello,
    /// The client, after its hello.
    ClientWelcome,
    /// The server, after its welcome.
    ServerRequest,
    /// The client, after its request.
    ClientAccepted,
    /// The server, after accepting (no stream yet).
    ServerStreams,
    /// The client, after its streams connected.
    ClientReady,
    /// The server, after Ready.
    ServerStart,
    /// The client, its streams done, the server's not.
    ClientDone,
    /// The server, its streams done, waiting for the client's results.
    ServerResults,
    /// The client, both ends done and its results sent.
    ClientResults,
}

const STEPS: [Step; 10] = [
    Step::ServerHello,
    Step::ClientWelcome,
    Step::ServerRequest,
    Step::ClientAccepted,
    Step::ServerStreams,
    Step::ClientReady,
    Step::ServerStart,
    Step::ClientDone,
    Step::ServerResults,
    Step::ClientResults,
];

impl Step {
    fn client_waits(self) -> bool {
        matches!(
            self,
            Step::ClientWelcome
                | Step::ClientAccepted
                | Step::ClientReady
                | Step::ClientDone
                | Step::ClientResults
        )
    }
    /// The waiting side's phase, as its errors name it.
    fn phase(self) -> &'static str {
        match self {
            Step::ServerHello => "waiting for hello",
            Step::ClientWelcome => "waiting for the server's welcome",
            Step::ServerRequest => "waiting for the test request",
            Step::ClientAccepted => "waiting for the server to accept the test",
            Step::ServerStreams => "waiting for data streams",
            Step::ClientReady => "waiting for the server to be ready",
            Step::ServerStart => "waiting for start",
            Step::ClientDone => "running",
            Step::ServerResults => "waiting for the client's results",
            Step::ClientResults => "waiting for the server's results",
        }
    }
    /// How long that wait may last.
    fn limit(self) -> Duration {
        match self {
            Step::ClientAccepted => TIMERS.handshake + TIMERS.accept_extra,
            Step::ClientDone | Step::ServerResults | Step::ClientResults => TIMERS.results,
            _ => TIMERS.handshake,
        }
    }
}

impl Pair {
    fn new(spec: TestSpec, s: ServerSession) -> Pair {
        let now = Instant::now();
        Pair {
            c: ClientSession::new(spec.validated().unwrap()).with_timers(TIMERS),
            s: s.with_timers(TIMERS, now),
            now,
            armed: None,
        }
    }

    fn plain(streams: u32) -> Pair {
        let spec = TestSpec {
            streams,
            ..TestSpec::default()
        };
        Pair::new(spec, ServerSession::new())
    }

    /// Lets `d` pass on the shared clock.
    fn wait(&mut self, d: Duration) {
        self.now += d;
    }

    fn send_server(&mut self, m: &Message) -> Result<ServerAction, ProtocolError> {
        self.s.on_message(wire(m), self.now)
    }

    fn send_client(&mut self, m: &Message) -> Result<ClientAction, ProtocolError> {
        self.c.on_message(wire(m), self.now)
    }

    /// Hello, welcome and request: what the server decided about the request.
    fn request(&mut self) -> Result<ServerAction, ProtocolError> {
        let hello = self.c.hello(self.now);
        self.wait(Duration::from_millis(3));
        let ServerAction::Reply(welcome) = self.send_server(&hello)? else {
            panic!("no welcome")
        };
        self.wait(Duration::from_millis(3));
        match self.send_client(&welcome)? {
            ClientAction::Send(req) => {
                self.wait(Duration::from_millis(3));
                self.send_server(&req)
            }
            other => panic!("no request: {other:?}"),
        }
    }

    /// Runs the conversation until it reaches `step` (every side's answer checked on the way), with a
    /// little time passing between messages.
    fn walk(&mut self, step: Step) {
        let tick = Duration::from_millis(7);
        if step == Step::ServerHello {
            return;
        }
        let hello = self.c.hello(self.now);
        if step == Step::ClientWelcome {
            return;
        }
        self.wait(tick);
        let ServerAction::Reply(welcome) = self.send_server(&hello).unwrap() else {
            panic!()
        };
        if step == Step::ServerRequest {
            return;
        }
        self.wait(tick);
        let ClientAction::Send(req) = self.send_client(&welcome).unwrap() else {
            panic!()
        };
        if step == Step::ClientAccepted {
            return;
        }
        self.wait(tick);
        let ServerAction::Accept(spec) = self.send_server(&req).unwrap() else {
            panic!()
        };
        if step == Step::ServerStreams {
            return;
        }
        let sid = SessionId([9; 16]);
        self.wait(tick);
        assert_eq!(
            self.send_client(&crate::Admission::plain(sid).message()).unwrap(),
            ClientAction::ConnectStreams(crate::Admission::plain(sid))
        );
        for id in 0..spec.total_streams() {
            self.wait(tick);
            let answer = self.s.on_stream(id, self.now).unwrap();
            let last = id + 1 == spec.total_streams();
            let ready = ServerAction::Reply(Message::Ready);
            assert_eq!(answer == ready, last);
        }
        // The server sends Ready as the last stream arrives, and the client has just connected it.
        self.c.on_streams_connected(self.now).unwrap();
        if matches!(step, Step::ClientReady | Step::ServerStart) {
            return;
        }
        self.wait(tick);
        assert_eq!(
            self.send_client(&Message::Ready).unwrap(),
            ClientAction::StartTest
        );
        assert_eq!(
            self.send_server(&Message::Start).unwrap(),
            ServerAction::StartTest
        );
        self.wait(Duration::from_secs(30));
        let mine = Default::default();
        assert_eq!(self.c.on_local_done(mine, self.now).unwrap(), ClientAction::Wait);
        let local_done_at = self.now;
        if step == Step::ClientDone {
            return;
        }
        self.wait(tick);
        let ServerAction::Reply(done) = self.s.on_local_done(self.now).unwrap() else {
            panic!()
        };
        if step == Step::ServerResults {
            return;
        }
        self.wait(tick);
        assert_eq!(self.send_client(&done).unwrap(), results());
        // The client's results timer runs from the end of its own streams.
        self.armed = Some(local_done_at);
    }

    /// The side that waits at `step`.
    fn waiter(&mut self, step: Step) -> &mut dyn Waiting {
        if step.client_waits() {
            &mut self.c
        } else {
            &mut self.s
        }
    }
}

#[test]
fn a_whole_test_through_bytes_under_a_virtual_clock() {
    let mut p = Pair::plain(3);
    p.walk(Step::ClientResults);
    let report = Message::Results {
        report: Box::default(),
    };
    p.wait(Duration::from_millis(5));
    assert!(matches!(
        p.send_server(&report).unwrap(),
        ServerAction::SendResults(_)
    ));
    assert!(matches!(
        p.send_client(&report).unwrap(),
        ClientAction::Finished(_)
    ));
    // Both are done: no timer is left running.
    assert_eq!((p.c.poll_timeout(), p.s.poll_timeout()), (None, None));
    p.wait(Duration::from_secs(3600));
    assert_eq!(p.c.handle_timeout(p.now), Ok(()));
    assert_eq!(p.s.handle_timeout(p.now), Ok(()));
}

#[test]
fn every_wait_times_out_at_its_limit_and_not_before() {
    for step in STEPS {
        let mut p = Pair::plain(2);
        p.walk(step);
        let (now, limit) = (p.armed.unwrap_or(p.now), step.limit());
        let w = p.waiter(step);
        assert_eq!(w.time_left(now), Some(limit), "{step:?}");
        let just_before = now + limit - Duration::from_millis(1);
        assert_eq!(w.handle_timeout(just_before), Ok(()), "{step:?}");
        assert_eq!(
            w.handle_timeout(now + limit),
            Err(ProtocolError::Wait(crate::WaitFailed::Timeout {
                phase: step.phase(),
                after: limit
            })),
            "{step:?}"
        );
        // A session that timed out has failed: no timer is left, and nothing more is taken.
        assert_eq!(w.poll_timeout(), None, "{step:?}");
    }
}

#[test]
fn the_results_timer_runs_from_the_end_of_local_streams_whatever_comes_first() {
    // The client's streams end first; the server's Done arrives 30 s later: the client still waits
    // for results only until 40 s after its own end, not 40 s after the Done.
    let mut p = Pair::plain(1);
    p.walk(Step::ClientDone);
    let started = p.now;
    p.wait(Duration::from_secs(30));
    let ServerAction::Reply(done) = p.s.on_local_done(p.now).unwrap() else {
        panic!()
    };
    assert_eq!(p.send_client(&done).unwrap(), results());
    assert_eq!(p.c.poll_timeout(), Some(started + TIMERS.results));
}

#[test]
fn the_peer_vanishing_at_every_wait_is_named() {
    for step in STEPS {
        let mut p = Pair::plain(2);
        p.walk(step);
        let now = p.now;
        let e = p.waiter(step).on_closed(now);
        assert_eq!(
            e,
            ProtocolError::Wait(crate::WaitFailed::PeerClosed { phase: step.phase() }),
            "{step:?}"
        );
    }
}

#[test]
fn a_late_message_after_a_timeout_is_refused() {
    let mut p = Pair::plain(1);
    p.walk(Step::ServerStart);
    p.wait(TIMERS.handshake);
    assert!(p.s.handle_timeout(p.now).is_err());
    assert!(matches!(
        p.send_server(&Message::Start),
        Err(ProtocolError::Unexpected { .. })
    ));
}

#[test]
fn refusals_by_the_server_session_reach_the_client_with_their_code() {
    // Over a limit.
    let limits = Limits {
        max_streams: Some(2),
        ..Limits::default()
    };
    let spec = TestSpec {
        streams: 4,
        ..TestSpec::default()
    };
    let mut p = Pair::new(spec, ServerSession::with_limits(limits));
    let ServerAction::Reject(no) = p.request().unwrap() else {
        panic!()
    };
    let got = p.send_client(&no);
    assert!(
        matches!(
            got,
            Err(ProtocolError::Rejected {
                code: Refusal::OverLimit,
                ..
            })
        ),
        "{got:?}"
    );
    // An invalid request (a client session only holds valid tests: this one comes from another
    // implementation, written on the wire by hand).
    let mut p = Pair::plain(1);
    let hello = p.c.hello(p.now);
    let ServerAction::Reply(welcome) = p.send_server(&hello).unwrap() else {
        panic!("no welcome")
    };
    let bad = Message::TestRequest {
        spec: Box::new(TestSpec {
            streams: 0,
            ..TestSpec::default()
        }),
        auth: None,
    };
    let ServerAction::Reject(no) = p.send_server(&bad).unwrap() else {
        panic!()
    };
    assert!(matches!(p.send_client(&welcome), Ok(ClientAction::Send(_))));
    let got = p.send_client(&no);
    assert!(
        matches!(
            got,
            Err(ProtocolError::Rejected {
                code: Refusal::Invalid,
                ..
            })
        ),
        "{got:?}"
    );
    // Refusals the server's driver decides before the session (busy, rate, allow-list) arrive in place
    // of the welcome; the client ends with each code.
    for code in [Refusal::Busy, Refusal::RateLimited, Refusal::NotAllowed] {
        let mut p = Pair::plain(1);
        p.c.hello(p.now);
        let got = p.send_client(&Message::Rejected {
            reason: "no".into(),
            code,
        });
        assert_eq!(
            got,
            Err(ProtocolError::Rejected {
                code,
                reason: "no".into()
            })
        );
        assert_eq!(p.c.poll_timeout(), None);
    }
}

fn keys() -> Arc<KeyRing> {
    Arc::new(KeyRing::parse("alice 0123456789abcdef0123").unwrap())
}

#[test]
fn authentication_failures_end_the_test_on_both_sides() {
    // No key on a server that needs one: the client stops before sending anything.
    let s = ServerSession::new().with_auth(keys(), [1; NONCE_LEN]);
    let mut p = Pair::new(TestSpec::default(), s);
    assert_eq!(p.request(), Err(ProtocolError::AuthRequired));
    // A wrong key: the server refuses with the authentication code, and the client sees it.
    let s = ServerSession::new().with_auth(keys(), [1; NONCE_LEN]);
    let mut p = Pair::new(TestSpec::default(), s);
    let wrong = Key::new("alice", b"guessed-Wrong-key-7531").unwrap();
    p.c = ClientSession::new(TestSpec::default().validated().unwrap())
        .with_timers(TIMERS)
        .with_auth(wrong, [2; NONCE_LEN]);
    let ServerAction::AuthFailed { reply, .. } = p.request().unwrap() else {
        panic!()
    };
    assert_eq!(p.s.poll_timeout(), None);
    let got = p.send_client(&reply);
    assert!(
        matches!(
            got,
            Err(ProtocolError::Rejected {
                code: Refusal::Authentication,
                ..
            })
        ),
        "{got:?}"
    );
}
