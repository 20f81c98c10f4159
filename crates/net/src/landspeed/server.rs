//! landspeed's own protocol, the server's session: one landspeed test, from the control
//! connection's first message to the results. The order of the conversation is the
//! `ServerSession`'s: this driver runs it through a `Link` and only does what the session asks
//! (accept a test, answer a clock probe, run an order, start the engine, report), collects the data
//! connections the listeners hand over (TCP streams or UDP hellos) and runs the engine. Nothing
//! here decides which message comes next.

use super::{files, order, udp};

mod each;
use crate::control::{Arrival, ControlError, Event, Handshaken, Input, Link, QuicArrival, WaitError, Wire};
use crate::host::{
    add_measured, MemoryHold, MissingWhy, Place, RefusalKind, Registered, Shared, Slot, TestError, TestLog,
};
use crate::streams::DataPaths;
use landspeed_core::config::{Test, TestSpec, Transport};
use landspeed_core::endpoint::{IntervalSample, Role};
use landspeed_engine::sockopt;
use landspeed_engine::supervisor::{
    self, EngineHook, EngineOutput, EngineParams, Flags, Progress, Wake, Wiring,
};
use landspeed_engine::transport::quic::{Quic, QuicConnection, QuicStream, Runtime};
use landspeed_engine::transport::tcp::tls::TlsLink;
use landspeed_engine::transport::tcp::{DataStream, Tcp};
use landspeed_engine::transport::udp::{Udp, UdpFormat, UdpParams};
use landspeed_proto::rate::Full;
use landspeed_proto::{
    Admission, Conn, Message, ProtocolError, Refusal, Running, ServerAction, ServerSession, SessionId, Timers,
};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

type ServerLink = Link<Conn<ServerSession>>;

/// Runs a control connection to its test's end and logs how it ended. It holds `preauth`, its place
/// among connections still proving themselves, until its test is authenticated and valid; only then
/// is it counted against the rate and given a test slot (`admit`).
pub(crate) fn serve_test(stream: TcpStream, peer: SocketAddr, shared: &Arc<Shared>, preauth: Place) {
    let mut log = TestLog::new(peer, "landspeed");
    let evicted = preauth.evicted();
    match run_test(stream, shared, &mut log, preauth) {
        Ok(()) => {}
        // Its place went to a client from an address or network holding fewer: not a test.
        Err(End::Failed(_)) if evicted.load(Relaxed) => {
            return shared.refuse(
                peer,
                RefusalKind::Evicted,
                "closed while still authenticating: its place went to a client from an address holding fewer",
            )
        }
        Err(End::Failed(e)) => log.error = Some(e.to_string()),
        // A client that did not authenticate, or was not admitted, leaves only a refusal in the log.
        Err(End::Refused(kind, reason)) => return shared.refuse(peer, kind, reason),
        // A controller's check (welcome and clock probes, then goodbye) is not a test.
        Err(End::Checked) => return,
    }
    shared.tests_done.fetch_add(1, Relaxed);
    shared.emit(crate::host::ServerEvent::Test(log));
}

/// What an admitted test holds while it runs: its slot, and its memory against the server's budget.
struct Admitted {
    _slot: Slot,
    _memory: Option<MemoryHold>,
}

/// Counts an authenticated, valid test against `--max-tests-per-minute` and gives it a test slot and
/// its memory (`--max-memory`), or tells the client why not (through the session's wire, so a keyed
/// client reads it sealed).
fn admit(link: &mut ServerLink, shared: &Shared, spec: &TestSpec) -> Result<Admitted, End> {
    let peer = link
        .stream()
        .peer_addr()
        .map_err(|e| End::Failed(TestError::Control(ControlError::Io(e))))?;
    let refused = match shared.admit(peer) {
        Err(reason) => (
            Refusal::RateLimited,
            reason,
            RefusalKind::RateLimited,
            "rate limited (too many tests per minute from this address)",
        ),
        Ok(()) => match shared.slot(peer) {
            Ok(slot) => match shared.hold_memory(spec) {
                Ok(memory) => {
                    return Ok(Admitted {
                        _slot: slot,
                        _memory: memory,
                    })
                }
                Err(free) => (
                    Refusal::Busy,
                    format!(
                        "busy: the tests running now leave {} of this server's memory budget, and this \
                         test needs about {}; retry when one ends",
                        landspeed_proto::memory::human(free),
                        landspeed_proto::memory::human(landspeed_proto::memory::server_estimate(spec)),
                    ),
                    RefusalKind::Memory,
                    "busy (the running tests hold the memory budget)",
                ),
            },
            Err(full) => (
                Refusal::Busy,
                shared.busy_reason(full),
                RefusalKind::Busy,
                match full {
                    Full::All(_) => "busy (every test slot in use)",
                    Full::Address(_) => "busy (this address holds its share of the test slots)",
                },
            ),
        },
    };
    let (code, reason, kind, log) = refused;
    let _ = link.wire.send(&Message::Rejected { reason, code });
    Err(End::Refused(kind, log.into()))
}

/// How a test that did not complete ended.
enum End {
    Failed(TestError),
    /// Not a test at all (authentication failed, not admitted): logged as a refusal.
    Refused(RefusalKind, String),
    /// A controller read the welcome and the clock, then closed: nothing to log.
    Checked,
}

/// `?` on any error a test step can meet ends the test as failed.
macro_rules! end_from {
    ($($t:ty),*) => {$(
        impl From<$t> for End {
            fn from(e: $t) -> End {
                End::Failed(e.into())
            }
        }
    )*};
}
end_from!(TestError, ControlError, WaitError, ProtocolError);

/// A test the client is about to start: what it asked for, its streams, what goes into this end's
/// report besides the engine's figures.
struct Accepted {
    test: Test,
    streams: DataPaths,
    local: Local,
    /// The test's slot and memory, held until it ends.
    _slot: Admitted,
}

/// What goes into this end's report besides the engine's figures.
struct Local {
    warnings: Vec<String>,
    cpus: Option<Vec<usize>>,
    /// Disk-to-disk tests: this end's file, reported once the client's digest is in.
    file: Option<files::ServerFile>,
    /// `--max-rate`'s share per stream, when it held this test's TCP streams (told to the client, so
    /// its verdict can name the server's limit).
    stream_cap_bps: Option<f64>,
}

fn run_test(stream: TcpStream, shared: &Arc<Shared>, log: &mut TestLog, preauth: Place) -> Result<(), End> {
    let o = &shared.opts;
    let mut link = Link::new(stream, Conn::new(new_session(o)?), o.handshake_timeout)?;
    link.listen()?;
    let accepted = match prepare(&mut link, shared, log, preauth) {
        Ok(Some(a)) => a,
        Ok(None) => return Ok(()),
        Err(End::Failed(e)) => return Err(End::Failed(tell(&mut link.wire, e))),
        Err(e) => return Err(e),
    };
    measure(&mut link, accepted, shared, log)
}

/// Tells the client why its test failed (best effort), unless the session already did (a refusal) or
/// the client is gone.
fn tell(wire: &mut Wire<Conn<ServerSession>>, e: TestError) -> TestError {
    let said = matches!(
        e,
        TestError::Rejected { .. }
            | TestError::ClientFailed(_)
            | TestError::Protocol(ProtocolError::Wait(
                landspeed_proto::WaitFailed::PeerClosed { .. }
            ))
            | TestError::Control(ControlError::Closed)
    );
    if !said {
        let _ = wire.send(&Message::Error {
            message: e.to_string(),
        });
    }
    e
}

/// This server's session for a new connection: its limits, whether it takes orders, its timers, and
/// a fresh nonce when it requires authentication.
fn new_session(o: &crate::host::ServerOptions) -> Result<ServerSession, TestError> {
    let mut sm = ServerSession::with_limits(o.limits.clone())
        .with_control(o.allow_control)
        .with_timers(timers(o), Instant::now());
    if let Some(keys) = &o.auth {
        let mut nonce = [0u8; landspeed_proto::NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|err| TestError::Random { what: "a nonce", err })?;
        sm = sm.with_auth(keys.clone(), nonce);
    }
    Ok(sm)
}

/// The session's timers from the server's options: each handshake step within the handshake timeout,
/// the client's results within the idle and handshake timeouts after this end's streams finish.
pub(super) fn timers(o: &crate::host::ServerOptions) -> Timers {
    Timers {
        handshake: o.handshake_timeout,
        accept_extra: Duration::ZERO,
        results: o.idle_timeout + o.handshake_timeout,
    }
}

/// From the first message to the client's `start`: the accepted test with its streams, or None when
/// the connection carried a third-party order (already run and answered).
fn prepare(
    link: &mut ServerLink,
    shared: &Arc<Shared>,
    log: &mut TestLog,
    preauth: Place,
) -> Result<Option<Accepted>, End> {
    let mut preauth = Some(preauth);
    let Some(mut test) = handshake(link, shared, log, &mut preauth)? else {
        return Ok(None);
    };
    drop(preauth);
    let slot = admit(link, shared, &test)?;
    log.auth = link.wire.conn.machine().authenticated().map(str::to_string);
    landspeed_engine::platform::check_spec(&test).map_err(TestError::from)?;
    if let Some(c) = &test.server_cpus {
        landspeed_engine::pin::check_cpus(c).map_err(TestError::Cpus)?;
    }
    log.streams = test.streams;
    log.direction = Some(test.direction);
    let sid = new_session_id()?;
    log.session = Some(sid);
    let registry = registry_for(link, shared, &test, log)?;
    let registered = Registered::new(registry, sid, waiter(link)?)?;
    let file = open_file(&mut test, &shared.opts, &mut link.wire)?;
    let quic = (test.transport == Transport::Quic)
        .then_some(shared.quic.as_ref())
        .flatten();
    let admission = Admission {
        session: sid,
        certificate: (test.tls.is_some() || quic.is_some()).then_some(shared.tls.fingerprint),
        quic_port: quic.map(|q| q.port),
    };
    link.wire.local(|s, _| s.accepted(admission))?;
    let handle = file.as_ref().map(|f| f.handle.clone());
    let streams = collect(link, &test, (sid, handle), shared)?;
    drop(registered);
    let warnings = streams.window_warning(test.window_bytes).into_iter().collect();
    await_start(link)?;
    let cpus = match streams {
        DataPaths::Tcp(_) => test.server_cpus.clone(),
        DataPaths::Udp(_) | DataPaths::Quic(_) => None,
    };
    let local = Local {
        warnings,
        cpus,
        file,
        stream_cap_bps: None,
    };
    Ok(Some(Accepted {
        test,
        streams,
        local,
        _slot: slot,
    }))
}

/// Where the test's data connections go, and how each is proven: the control connection's address,
/// and its key in a keyed test.
fn waiter(link: &ServerLink) -> Result<crate::host::Waiter, TestError> {
    let control = link
        .stream()
        .peer_addr()
        .map_err(|e| TestError::Control(ControlError::Io(e)))?
        .ip()
        .to_canonical();
    Ok(crate::host::Waiter {
        tx: link.tx.clone(),
        control,
        streams: link.wire.conn.stream_key().cloned(),
    })
}

/// Where the test's data connections will be looked for (UDP's or the TCP/QUIC registry), with the
/// test's protocol logged; a QUIC test on a server without its QUIC endpoint is refused.
fn registry_for<'a>(
    link: &mut ServerLink,
    shared: &'a Shared,
    test: &TestSpec,
    log: &mut TestLog,
) -> Result<&'a crate::host::Registry, End> {
    Ok(match test.transport {
        Transport::Udp => {
            log.protocol = "landspeed udp".into();
            &shared.udp
        }
        Transport::Quic => {
            log.protocol = "landspeed quic".into();
            if shared.quic.is_none() {
                return Err(reject(
                    &mut link.wire,
                    "this server does not serve QUIC (its QUIC endpoint is turned off)",
                ));
            }
            &shared.registry
        }
        Transport::Tcp => &shared.registry,
    })
}

/// Hello, welcome, clock probes and orders up to an accepted test request (None: the connection
/// carried a third-party order, already run and answered); refusals and failures end it here.
/// The whole of it, until a test or an order is accepted, is within one handshake timeout (each
/// step's own timer cannot be stretched by a client that trickles step after step), while the
/// connection holds `preauth`, its place among those still proving themselves.
fn handshake(
    link: &mut ServerLink,
    shared: &Shared,
    log: &mut TestLog,
    preauth: &mut Option<Place>,
) -> Result<Option<Test>, End> {
    let (started, limit) = (Instant::now(), shared.opts.handshake_timeout);
    let out =
        link.run(|link, ev| {
            let Event::Action(action) = ev else {
                if started.elapsed() >= limit {
                    let phase = "the test request (the whole handshake)";
                    return Err(TestError::Protocol(ProtocolError::Wait(
                        landspeed_proto::WaitFailed::Timeout { phase, after: limit },
                    ))
                    .into());
                }
                return Ok(None);
            };
            match action {
                ServerAction::Accept(test) => Ok(Some(Some(test))),
                ServerAction::ClockReading { client_ns } => {
                    let server_ns = crate::host::unix_ns();
                    link.wire.send(&Message::Clock { client_ns, server_ns })?;
                    Ok(None)
                }
                ServerAction::RunOrder { order, test } => {
                    log.auth = link.wire.conn.machine().authenticated().map(str::to_string);
                    preauth.take();
                    let _slot = admit(link, shared, &test)?;
                    let out = order::run_order(&order, test, &mut link.wire, shared, log);
                    link.wire.local(|s, _| {
                        s.on_order_done();
                        Ok(ServerAction::Wait)
                    })?;
                    out.map(|()| Some(None)).map_err(End::Failed)
                }
                ServerAction::AuthFailed { detail, .. } => Err(End::Refused(
                    RefusalKind::Authentication,
                    format!("authentication failed: {detail}"),
                )),
                ServerAction::Reject(Message::Rejected { reason, code }) => {
                    Err(TestError::Rejected { code, reason }.into())
                }
                ServerAction::PeerFailed(m) => Err(TestError::ClientFailed(m).into()),
                other => Err(TestError::NotStarted(format!("{other:?}")).into()),
            }
        });
    match out {
        Err(End::Failed(TestError::Protocol(ProtocolError::Wait(
            landspeed_proto::WaitFailed::PeerClosed { .. },
        )))) if link.wire.conn.machine().clock_probes() > 0 => Err(End::Checked),
        other => other,
    }
}

fn new_session_id() -> Result<SessionId, TestError> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|err| TestError::Random {
        what: "a session id",
        err,
    })?;
    Ok(SessionId(id))
}

/// The test's file, opened (a refusal is sent to the client with its reason).
/// Refuses the accepted-looking request: the client is told why.
fn reject(wire: &mut Wire<Conn<ServerSession>>, reason: &str) -> End {
    let code = Refusal::Invalid;
    let _ = wire.send(&Message::Rejected {
        reason: reason.into(),
        code,
    });
    TestError::Rejected {
        code,
        reason: reason.into(),
    }
    .into()
}

fn open_file(
    spec: &mut Test,
    o: &crate::host::ServerOptions,
    wire: &mut Wire<Conn<ServerSession>>,
) -> Result<Option<files::ServerFile>, End> {
    let Some(f) = spec.file.clone() else {
        return Ok(None);
    };
    files::open(&f, spec, o)
        .map(Some)
        .map_err(|reason| reject(wire, &reason))
}

/// Waits for every data connection of the test (`sid`, and the file its TCP streams carry), checks
/// each with the session (which says `ready` after the last) and configures it; the client is told
/// why when one is missing or wrong.
fn collect(
    link: &mut ServerLink,
    test: &TestSpec,
    (sid, file): (SessionId, Option<Arc<std::fs::File>>),
    shared: &Arc<Shared>,
) -> Result<DataPaths, TestError> {
    let mut c = Collected {
        handshakes: Handshakes::new(test, link.tx.clone()),
        ..Collected::default()
    };
    let n = test.total_streams() as usize;
    let out = link.run(|link, ev| {
        c.take(link, ev, (test, sid, &file), shared)?;
        Ok((c.arrived() == n).then_some(()))
    });
    let arrived = c.arrived();
    let why = match out {
        Ok(()) if test.transport == Transport::Udp => return Ok(DataPaths::Udp(udp::streams(c.udp, test))),
        Ok(()) if test.transport == Transport::Quic => return Ok(DataPaths::Quic(c.quic.into_data())),
        Ok(()) => {
            c.tcp.sort_by_key(|s| s.id);
            return Ok(DataPaths::Tcp(c.tcp));
        }
        Err(TestError::Protocol(ProtocolError::Wait(landspeed_proto::WaitFailed::Timeout { .. }))) => {
            MissingWhy::Timeout
        }
        Err(TestError::Protocol(ProtocolError::Wait(landspeed_proto::WaitFailed::PeerClosed { .. }))) => {
            MissingWhy::ClientClosed
        }
        Err(e) => return Err(e),
    };
    Err(TestError::StreamsMissing {
        arrived,
        expected: test.total_streams(),
        why,
    })
}

/// The data connections a test has taken so far, by transport.
#[derive(Default)]
struct Collected {
    tcp: Vec<DataStream>,
    udp: HashMap<u32, UdpSocket>,
    quic: QuicCollect,
    handshakes: Handshakes,
}

impl Collected {
    fn arrived(&self) -> usize {
        self.tcp.len() + self.udp.len() + self.quic.streams.len()
    }

    /// Takes what `ev` brings while the streams are awaited.
    fn take(
        &mut self,
        link: &mut ServerLink,
        ev: Event<ServerAction>,
        (test, sid, file): (&TestSpec, SessionId, &Option<Arc<std::fs::File>>),
        shared: &Arc<Shared>,
    ) -> Result<(), TestError> {
        let wanted = |link: &ServerLink, id| link.wire.conn.machine().wants_stream(id);
        match ev {
            Event::Arrival(Arrival::Quic(id, a)) => {
                if self.quic.add(test, id, a, shared) {
                    link.wire.local(|s, now| s.on_stream(id, now))?;
                }
            }
            Event::Arrival(Arrival::Tcp(id, sock)) if !wanted(link, id) => unwanted(shared, &sock, id, test),
            Event::Arrival(Arrival::Tcp(id, sock)) if test.tls.is_some() => {
                self.handshakes.start(test, (id, sock), file.clone(), shared)
            }
            Event::Arrival(Arrival::Tcp(id, sock)) => {
                self.tcp.push(tcp_stream(test, id, sock, file.clone(), None)?);
                link.wire.local(|s, now| s.on_stream(id, now))?;
            }
            Event::Arrival(Arrival::Handshaken(h)) if !wanted(link, h.id) => {
                unwanted(shared, &h.stream.socket, h.id, test)
            }
            Event::Arrival(Arrival::Handshaken(h)) => {
                self.tcp.push(h.stream);
                link.wire.local(|s, now| s.on_stream(h.id, now))?;
            }
            Event::Arrival(Arrival::Udp(id, ..)) if id >= test.total_streams() => {}
            Event::Arrival(Arrival::Udp(id, peer, local)) => {
                if udp::accept_hello(&mut self.udp, test, sid, (id, peer, local))? {
                    link.wire.local(|s, now| s.on_stream(id, now))?;
                }
            }
            Event::Tick if shared.shutdown.load(Relaxed) => {
                return Err(TestError::StreamsMissing {
                    arrived: self.arrived(),
                    expected: test.total_streams(),
                    why: MissingWhy::Shutdown,
                })
            }
            Event::Tick
            | Event::Action(_)
            | Event::Arrival(Arrival::Iperf3Tcp(_) | Arrival::Iperf3Udp(..)) => {}
        }
        Ok(())
    }
}

/// TLS handshakes of a test's data connections, each on a thread of its own with the handshake
/// timeout as its deadline: a connection that stalls its handshake (or is not the client's at all)
/// holds that thread, never the test's, and is refused alone (`stream_handshake`). At most twice the
/// test's streams at once.
#[derive(Default)]
struct Handshakes {
    tx: Option<Sender<Wake<Input>>>,
    in_flight: Arc<AtomicUsize>,
    cap: usize,
}

impl Handshakes {
    fn new(test: &TestSpec, tx: Sender<Wake<Input>>) -> Self {
        Handshakes {
            tx: Some(tx),
            in_flight: Arc::default(),
            cap: 2 * test.total_streams() as usize,
        }
    }

    /// Starts stream `id`'s handshake; a stream that completes it comes back as
    /// `Arrival::Handshaken`, one that does not is refused by its thread.
    fn start(
        &self,
        test: &TestSpec,
        (id, sock): (u32, TcpStream),
        file: Option<Arc<std::fs::File>>,
        shared: &Arc<Shared>,
    ) {
        let (Some(tx), Ok(peer)) = (self.tx.clone(), sock.peer_addr()) else {
            return;
        };
        if self.in_flight.fetch_add(1, Relaxed) >= self.cap {
            self.in_flight.fetch_sub(1, Relaxed);
            let why = format!(
                "data stream {id}: {} TLS handshakes of its test already running",
                self.cap
            );
            return shared.refuse(peer, RefusalKind::Busy, why);
        }
        let (test, in_flight, sh) = (test.clone(), self.in_flight.clone(), shared.clone());
        let tls = (shared.tls.tcp.clone(), shared.opts.handshake_timeout);
        shared.connection_started();
        let spawned = std::thread::Builder::new()
            .name(format!("tls stream {id}"))
            .spawn(move || {
                match tcp_stream(&test, id, sock, file, Some(tls)) {
                    Ok(stream) => {
                        let h = Box::new(Handshaken { id, stream });
                        let _ = tx.send(Wake::External(Input::Arrival(Arrival::Handshaken(h))));
                    }
                    Err(e) => {
                        let why = format!("data stream {id}: its TLS handshake did not complete ({e})");
                        sh.refuse(peer, RefusalKind::StreamHandshake, why)
                    }
                }
                in_flight.fetch_sub(1, Relaxed);
                sh.connection_ended();
            });
        if spawned.is_err() {
            self.in_flight.fetch_sub(1, Relaxed);
            shared.connection_ended();
            shared.refuse(
                peer,
                RefusalKind::Busy,
                format!("data stream {id}: no thread for its TLS handshake"),
            );
        }
    }
}

/// Turns away a data connection the test does not want (a stream it already has, or one it does not
/// have): logged, closed, and the test goes on.
fn unwanted(shared: &Shared, sock: &TcpStream, id: u32, test: &TestSpec) {
    if let Ok(peer) = sock.peer_addr() {
        let why = if id < test.total_streams() {
            format!("data stream {id} connected twice; the second is refused")
        } else {
            format!("data stream {id} of a test with {} streams", test.total_streams())
        };
        shared.refuse(peer, RefusalKind::DuplicateStream, why);
    }
}

/// A QUIC test's streams as they arrive, and the connections they came on.
#[derive(Default)]
struct QuicCollect {
    connections: Vec<QuicConnection>,
    streams: Vec<QuicStream>,
}

impl QuicCollect {
    /// Takes stream `id` unless the test has no such stream or it came before; true when taken.
    fn add(&mut self, test: &TestSpec, id: u32, a: QuicArrival, shared: &Shared) -> bool {
        if id >= test.total_streams() || self.streams.iter().any(|s| s.id == id) {
            return false;
        }
        let Some(q) = &shared.quic else {
            return false;
        };
        let stable = a.conn.stable_id();
        let connection = match self.connections.iter().position(|c| c.conn.stable_id() == stable) {
            Some(i) => i,
            None => {
                self.connections.push(QuicConnection {
                    conn: a.conn,
                    runtime: Runtime::Shared(q.runtime.handle().clone()),
                    congestion: test.congestion.clone().unwrap_or_else(|| "cubic".into()),
                    endpoint: None,
                    buffers: q.buffers,
                });
                self.connections.len() - 1
            }
        };
        let flow = test.flow_of(id);
        let role = Role::at_server(flow);
        let mut send = a.send;
        if role == Role::Receiver {
            // The server sends nothing on a stream it receives on.
            let _ = send.finish();
        }
        self.streams.push(QuicStream {
            id,
            flow,
            role,
            budget: (role == Role::Sender).then(|| test.stream_budget(id)).flatten(),
            connection,
            io: std::sync::Mutex::new(Some((send, a.recv))),
            perf: false,
        });
        true
    }

    fn into_data(mut self) -> crate::streams::QuicData {
        self.streams.sort_by_key(|s| s.id);
        crate::streams::QuicData {
            connections: self.connections,
            streams: self.streams,
        }
    }
}

/// A TCP data connection of the test, configured for its role.
fn tcp_stream(
    test: &TestSpec,
    id: u32,
    socket: TcpStream,
    file: Option<Arc<std::fs::File>>,
    tls: Option<(Arc<rustls::ServerConfig>, std::time::Duration)>,
) -> Result<DataStream, TestError> {
    let flow = test.flow_of(id);
    let role = Role::at_server(flow);
    sockopt::after_connect(&socket2::SockRef::from(&socket), test, role == Role::Sender)?;
    let tls = match tls {
        Some((config, timeout)) => Some(
            TlsLink::server(&socket, config, timeout, test.tls.is_some_and(|t| t.ktls)).map_err(|e| {
                TestError::Tls {
                    stream: id,
                    detail: e.to_string(),
                }
            })?,
        ),
        None => None,
    };
    Ok(DataStream {
        tls,
        file,
        id,
        flow,
        role,
        socket,
        budget: (role == Role::Sender).then(|| test.stream_budget(id)).flatten(),
    })
}

/// Waits for the client's `start` once the session said `ready`.
fn await_start(link: &mut ServerLink) -> Result<(), TestError> {
    link.run(|_, ev| match ev {
        Event::Action(ServerAction::StartTest) => Ok(Some(())),
        Event::Action(ServerAction::PeerFailed(m)) => Err(TestError::ClientFailed(m)),
        Event::Action(other) => Err(TestError::NotStarted(format!("{other:?}"))),
        Event::Arrival(_) | Event::Tick => Ok(None),
    })
}

/// Follows the control connection while the engine runs: interval samples go out, a `stop` stops
/// this end's senders, a failure or the server's shutdown aborts the test.
struct Hook<'a> {
    wire: &'a mut Wire<Conn<ServerSession>>,
    shutdown: &'a AtomicBool,
    failure: Option<TestError>,
    /// The server's limits on the running test (`--max-duration`, `--max-bytes`), from `started`.
    running: Running,
    started: Instant,
}

impl EngineHook<Input> for Hook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        let _ = self.wire.send(&Message::Interval {
            sample: sample.clone(),
        });
    }

    fn on_external(&mut self, x: Input, flags: &Flags) {
        let mut failed = self.wire.feed(x, Instant::now()).err().map(TestError::from);
        while let Some(a) = self.wire.conn.poll_action() {
            match a {
                ServerAction::StopSenders => flags.stop.store(true, Relaxed),
                ServerAction::PeerFailed(m) => {
                    failed.get_or_insert(TestError::ClientFailed(m));
                }
                _ => {}
            }
        }
        if let Some(f) = failed {
            flags.abort.store(true, Relaxed);
            self.failure.get_or_insert(f);
        }
    }

    fn on_tick(&mut self, flags: &Flags) {
        if self.shutdown.load(Relaxed) && !flags.abort.load(Relaxed) {
            flags.abort.store(true, Relaxed);
            self.failure.get_or_insert(TestError::Shutdown);
        }
    }

    /// Cuts the test once it runs past `--max-duration` (and its grace) or moves more than
    /// `--max-bytes`, whatever its own end would be: the client is told why, the test fails.
    fn on_progress(&mut self, p: Progress, flags: &Flags) {
        if flags.abort.load(Relaxed) {
            return;
        }
        let elapsed = self.started.elapsed();
        if self.running.over_length(elapsed) {
            flags.uncap.store(true, Relaxed);
        }
        if let Err(cut) = self.running.check(p.received + p.sent, elapsed) {
            let _ = self.wire.send(&Message::Error {
                message: cut.to_string(),
            });
            flags.abort.store(true, Relaxed);
            self.failure.get_or_insert(TestError::Cut(cut));
        }
    }
}

/// Runs the test's streams through the supervisor while the control connection is followed, then
/// exchanges the results.
fn measure(link: &mut ServerLink, accepted: Accepted, shared: &Shared, log: &mut TestLog) -> Result<(), End> {
    let o = &shared.opts;
    let Accepted {
        test,
        streams,
        mut local,
        _slot,
    } = accepted;
    // The client's idle limit when it is the shorter: both ends give up on a silent path together.
    let idle = test
        .idle_timeout()
        .map_or(o.idle_timeout, |c| c.min(o.idle_timeout));
    let flags = Flags::default();
    // A connection each: the test's later connections are handed to it as they come.
    let arriving = match (&test.transactions, log.session) {
        (Some(t), Some(sid)) if t.connect_each => {
            Some(each::Arriving::register(shared, &test, sid, waiter(link)?)?)
        }
        _ => None,
    };
    let mut hook = Hook {
        wire: &mut link.wire,
        shutdown: &shared.shutdown,
        failure: None,
        running: Running::of(&o.limits),
        started: Instant::now(),
    };
    let wake = (&link.tx, &link.rx);
    let out = match &streams {
        DataPaths::Tcp(s) => {
            let threads = test.server_threads.map(|t| t as usize);
            let mut params = EngineParams::for_spec(&test, threads, test.server_cpus.clone(), idle);
            // --max-rate: this end reads and writes no faster than its share, whichever way the data goes.
            let limit = o.limits.max_rate_bps.map(|r| r / f64::from(test.total_streams()));
            params.stream_cap_bps = landspeed_core::units::lower(params.stream_cap_bps, limit);
            local.stream_cap_bps = limit;
            let iface = s
                .first()
                .and_then(|s| s.socket.local_addr().ok())
                .and_then(|a| landspeed_engine::host::interface_for(a.ip()));
            let wiring = Wiring::new(&flags, wake, &mut hook, iface.as_deref());
            match (test.transactions, &arriving) {
                (Some(t), Some(conns)) => {
                    let log = landspeed_engine::transport::rr::new_log(&t, test.interval_s);
                    landspeed_engine::transport::rr::run_each(s, (t, &log), conns, &params, wiring).0
                }
                // The server's side of a request/response test: its answers; the figures are the client's.
                (Some(t), None) => {
                    let log = landspeed_engine::transport::rr::new_log(&t, test.interval_s);
                    landspeed_engine::transport::rr::run(s, (t, &log), &params, wiring).0
                }
                (None, _) => supervisor::run(&Tcp(s), &params, wiring),
            }
        }
        DataPaths::Udp(s) => {
            let params = EngineParams::for_spec(&test, None, None, idle);
            let udp = Udp {
                streams: s,
                params: UdpParams::for_spec(&test, UdpFormat::Landspeed),
            };
            supervisor::run(&udp, &params, Wiring::new(&flags, wake, &mut hook, None))
        }
        DataPaths::Quic(q) => {
            let params = EngineParams::for_spec(&test, None, None, idle);
            let quic = Quic {
                connections: &q.connections,
                streams: &q.streams,
            };
            supervisor::run(&quic, &params, Wiring::new(&flags, wake, &mut hook, None))
        }
    };
    add_measured(log, &out);
    if let Some(f) = hook.failure.take() {
        return Err(f.into());
    }
    Ok(finish(link, &out, local, shared)?)
}

/// This end's streams are done: the session says so, the client's results are awaited, and this
/// end's report (with its file's, checked against the client's) goes back.
fn finish(link: &mut ServerLink, out: &EngineOutput, local: Local, shared: &Shared) -> Result<(), TestError> {
    link.wire.local(|s, now| s.on_local_done(now))?;
    let client = link
        .run(|_, ev| match ev {
            Event::Action(ServerAction::SendResults(r)) => Ok(Some(r)),
            Event::Action(ServerAction::PeerFailed(m)) => Err(TestError::ClientFailed(m)),
            _ => Ok(None),
        })
        .map_err(|e| match e {
            TestError::Protocol(ProtocolError::Wait(landspeed_proto::WaitFailed::Timeout {
                after, ..
            })) => TestError::NoResults(after),
            e => e,
        })?;
    let errors: Vec<(u32, String)> = out
        .streams
        .iter()
        .filter_map(|s| s.error.clone().map(|e| (s.id, e)))
        .collect();
    let mut report = out.report(local.cpus, local.warnings);
    report.stream_cap_bps = local.stream_cap_bps;
    let keyed = link.wire.conn.machine().authenticated().is_some();
    if !(keyed || shared.opts.share_host) {
        report.host = report.host.for_anonymous();
    }
    if let Some(f) = local.file {
        match f.report(client.file.as_ref()) {
            Ok((r, kept)) => {
                report.file = Some(r);
                report.warnings.extend(kept);
            }
            Err(e) => report.error = Some(e),
        }
    }
    link.wire.local(|s, _| s.results(report))?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(TestError::Streams(errors))
    }
}
