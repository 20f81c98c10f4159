//! `landspeed serve`: listens on IPv4 and IPv6, tells control connections, data streams and iperf3
//! clients apart by their first bytes, and runs each test in its own thread through landspeed-core's
//! `ServerSession`. Tests are independent: data streams find their test through a registry keyed by a
//! random session id, so any number of clients can test at once. Every wait has a timeout, and a broken
//! client ends only its own test. Events (listening, one per test, rejections) go to a callback; the
//! binary decides how to print them.

mod error;
mod files;
mod greeting;
mod iperf3;
mod iperf3_udp;
mod order;
mod udp;

pub use error::{MissingWhy, TestError};

use crate::control::{self, ControlError, ControlWriter, WaitError};
use landspeed_core::config::{Flow, Test, TestSpec, Transport};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role};
use landspeed_core::protocol::{
    Message, ProtocolError, Refusal, ServerAction, ServerSession, SessionId, Timers, Waiting,
};
pub use landspeed_core::server_log::{ServerEvent, ServerStats, TestLog};
use landspeed_engine::sockopt;
use landspeed_engine::supervisor::{self, EngineHook, EngineParams, Flags, Wake, Wiring};
use landspeed_engine::transport::tcp::{DataStream, Tcp};
use mio::net::TcpListener as MioListener;
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Condvar;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub bind: Option<IpAddr>,
    pub port: u16,
    /// Serve one test, then return.
    pub once: bool,
    pub handshake_timeout: Duration,
    pub idle_timeout: Duration,
    /// Tests running at once, both protocols together; one more is told "busy".
    pub max_tests: usize,
    /// What one test may ask for (advertised in the welcome).
    pub limits: landspeed_core::protocol::Limits,
    /// Client networks allowed to test (empty: everyone).
    pub allow: Vec<ipnet::IpNet>,
    /// Raised (e.g. by SIGUSR1) to ask for a `ServerEvent::Stats`; the server lowers it.
    pub stats_signal: Option<Arc<AtomicBool>>,
    /// Keys a landspeed client must prove it holds (`--auth-keys`); None: no authentication.
    pub auth: Option<Arc<landspeed_core::protocol::KeyRing>>,
    /// Take third-party orders from clients that authenticate with `auth` (`--allow-control`).
    pub allow_control: bool,
    /// The key this server answers other servers' challenges with when it runs an order.
    pub control_key: Option<landspeed_core::protocol::Key>,
    /// Disk-to-disk tests write into and read from this directory (`--files`); None: refused.
    pub files_dir: Option<std::path::PathBuf>,
}

/// Tests held at once by default: enough for a busy public server on a small host.
pub const DEFAULT_MAX_TESTS: usize = 32;

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bind: None,
            port: 5201,
            once: false,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_tests: DEFAULT_MAX_TESTS,
            limits: landspeed_core::protocol::Limits::default(),
            allow: vec![],
            stats_signal: None,
            auth: None,
            allow_control: false,
            control_key: None,
            files_dir: None,
        }
    }
}

/// Adds what the engine measured on this server's streams to the test's log entry.
pub(crate) fn add_measured(log: &mut TestLog, out: &supervisor::EngineOutput) {
    log.duration_s = out.elapsed_s;
    for s in &out.streams {
        match s.role {
            Role::Receiver => {
                log.bytes_received += s.bytes;
                log.bytes_verified += s.bytes_verified;
                log.corrupt_blocks += s.corrupt_blocks;
            }
            Role::Sender => log.bytes_sent += s.bytes,
        }
    }
}

#[derive(Default)]
struct Counters {
    tests_ok: u64,
    tests_failed: u64,
    bytes_received: u64,
    bytes_sent: u64,
    refused: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {err}")]
    Bind { addr: SocketAddr, err: std::io::Error },
    #[error("server I/O: {0}")]
    Io(#[from] std::io::Error),
}

type Registry = Mutex<HashMap<SessionId, mpsc::Sender<(u32, TcpStream)>>>;
type UdpRegistry = Mutex<HashMap<SessionId, mpsc::Sender<udp::Hello>>>;
pub type EventSink = Arc<dyn Fn(ServerEvent) + Send + Sync>;

struct Shared {
    opts: ServerOptions,
    registry: Registry,
    iperf3: iperf3::Registry,
    udp: UdpRegistry,
    iperf3_udp: iperf3_udp::Waiting,
    shutdown: AtomicBool,
    /// Connection threads still running, and a signal when that number changes.
    active: (Mutex<usize>, Condvar),
    tests_done: AtomicUsize,
    /// Tests running now (both protocols).
    running: AtomicUsize,
    events: EventSink,
    counters: Mutex<Counters>,
    started: Instant,
    /// New tests per address (`--max-tests-per-minute`).
    rate: Option<Mutex<landspeed_core::protocol::rate::PerAddressRate>>,
}

/// One running test, counted against `--max-tests` while it lives.
pub(crate) struct Slot<'a>(&'a AtomicUsize);
impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Shared {
    /// Counts an event, then hands it to the sink.
    pub(crate) fn emit(&self, ev: ServerEvent) {
        if let Ok(mut c) = self.counters.lock() {
            match &ev {
                ServerEvent::Test(t) => {
                    if t.verdict().is_trusted() {
                        c.tests_ok += 1;
                    } else {
                        c.tests_failed += 1;
                    }
                    c.bytes_received += t.bytes_received;
                    c.bytes_sent += t.bytes_sent;
                }
                ServerEvent::Refused { reason, .. } => {
                    let key = reason.split([':', '(']).next().unwrap_or("").trim().to_string();
                    *c.refused.entry(key).or_default() += 1;
                }
                _ => {}
            }
        }
        (self.events)(ev);
    }

    fn stats(&self) -> ServerStats {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        ServerStats {
            uptime_s: self.started.elapsed().as_secs_f64(),
            tests_ok: c.tests_ok,
            tests_failed: c.tests_failed,
            tests_running: self.running.load(Relaxed) as u64,
            bytes_received: c.bytes_received,
            bytes_sent: c.bytes_sent,
            refused: c.refused.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }

    /// A slot for a new test, or None when `--max-tests` are running.
    pub(crate) fn slot(&self) -> Option<Slot<'_>> {
        let n = self.running.fetch_add(1, Relaxed);
        let slot = Slot(&self.running);
        (n < self.opts.max_tests).then_some(slot)
    }

    /// Counts a new test from `peer` against `--max-tests-per-minute`; the error is the client's message.
    pub(crate) fn admit(&self, peer: SocketAddr) -> Result<(), String> {
        let Some(rate) = &self.rate else {
            return Ok(());
        };
        let mut r = rate.lock().unwrap_or_else(|e| e.into_inner());
        r.admit(peer.ip(), Instant::now()).map_err(|wait| {
            format!(
                "rate limited: this server starts at most {} tests per minute for one address \
                 (--max-tests-per-minute); retry in {} s",
                self.opts.limits.max_tests_per_minute.unwrap_or(0),
                wait.as_secs() + 1
            )
        })
    }

    /// Whether `peer` may test here (`--allow`).
    pub(crate) fn allowed(&self, peer: SocketAddr) -> bool {
        let ip = peer.ip().to_canonical();
        self.opts.allow.is_empty() || self.opts.allow.iter().any(|n| n.contains(&ip))
    }
}

impl Shared {
    fn connection_started(&self) {
        if let Ok(mut n) = self.active.0.lock() {
            *n += 1;
        }
    }

    fn connection_ended(&self) {
        if let Ok(mut n) = self.active.0.lock() {
            *n = n.saturating_sub(1);
        }
        self.active.1.notify_all();
    }
}

/// A bound server, ready to run.
pub struct Server {
    listeners: Vec<MioListener>,
    shared: Arc<Shared>,
    udp_socks: Vec<std::net::UdpSocket>,
}

fn listen(addr: SocketAddr, v6only: Option<bool>) -> Result<MioListener, ServerError> {
    let err = |err| ServerError::Bind { addr, err };
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(err)?;
    s.set_reuse_address(true).map_err(err)?;
    if let Some(v) = v6only {
        s.set_only_v6(v).map_err(err)?;
    }
    s.bind(&addr.into()).map_err(err)?;
    s.listen(1024).map_err(err)?;
    s.set_nonblocking(true).map_err(err)?;
    Ok(MioListener::from_std(s.into()))
}

impl Server {
    /// Binds the listening socket(s): one dual-stack socket on `[::]` by default (IPv4 and IPv6), falling
    /// back to `0.0.0.0` where IPv6 is unavailable, or exactly `--bind`.
    pub fn bind(opts: ServerOptions, events: EventSink) -> Result<Server, ServerError> {
        let listeners = match opts.bind {
            Some(ip) => vec![listen(
                SocketAddr::new(ip, opts.port),
                if ip.is_ipv6() { Some(true) } else { None },
            )?],
            None => match listen(
                SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), opts.port),
                Some(false),
            ) {
                Ok(l) => vec![l],
                Err(_) => vec![listen(
                    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), opts.port),
                    None,
                )?],
            },
        };
        let shared = Arc::new(Shared {
            registry: Mutex::new(HashMap::new()),
            iperf3: Mutex::new(HashMap::new()),
            udp: Mutex::new(HashMap::new()),
            iperf3_udp: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            active: (Mutex::new(0), Condvar::new()),
            tests_done: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            events,
            counters: Mutex::new(Counters::default()),
            started: Instant::now(),
            rate: opts
                .limits
                .max_tests_per_minute
                .map(|n| Mutex::new(landspeed_core::protocol::rate::PerAddressRate::per_minute(n))),
            opts,
        });
        // UDP tests say hello on the same address and port.
        let mut udp_socks = vec![];
        for l in &listeners {
            if let Ok(a) = l.local_addr() {
                let v6only = a.is_ipv6().then_some(!a.ip().is_unspecified());
                udp_socks.push(udp::bind(a, v6only).map_err(|err| ServerError::Bind { addr: a, err })?);
            }
        }
        Ok(Server {
            listeners,
            shared,
            udp_socks,
        })
    }

    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Serves until `stop` is raised (or after one test with `once`), then waits briefly for running
    /// tests to wind down.
    pub fn run(mut self, stop: &AtomicBool) -> Result<(), ServerError> {
        for sock in self.udp_socks.drain(..) {
            let shared = self.shared.clone();
            std::thread::spawn(move || udp::listen(sock, &shared));
        }
        // Announced once every listener (TCP and UDP) is ready.
        self.shared.emit(ServerEvent::Listening(self.local_addrs()));
        let mut poll = Poll::new()?;
        for (i, l) in self.listeners.iter_mut().enumerate() {
            poll.registry().register(l, Token(i), Interest::READABLE)?;
        }
        let mut events = Events::with_capacity(256);
        let mut greeters = greeting::Greeters::new(self.listeners.len());
        loop {
            if stop.load(Relaxed) || (self.shared.opts.once && self.shared.tests_done.load(Relaxed) > 0) {
                break;
            }
            if let Some(f) = &self.shared.opts.stats_signal {
                if f.swap(false, Relaxed) {
                    self.shared.emit(ServerEvent::Stats(self.shared.stats()));
                }
            }
            match poll.poll(&mut events, Some(Duration::from_millis(100))) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
            for ev in events.iter() {
                if greeters.owns(ev.token()) {
                    greeters.ready(poll.registry(), ev.token(), &self.shared);
                    continue;
                }
                let l = &self.listeners[ev.token().0];
                loop {
                    match l.accept() {
                        Ok((stream, peer)) => greeters.add(poll.registry(), stream, peer, &self.shared),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        // Out of descriptors or similar: stop accepting for this round, keep serving.
                        Err(_) => break,
                    }
                }
            }
            greeters.expire(poll.registry(), Instant::now(), &self.shared);
        }
        self.shared.shutdown.store(true, Relaxed);
        let (count, changed) = &self.shared.active;
        if let Ok(guard) = count.lock() {
            let _ = changed.wait_timeout_while(guard, Duration::from_secs(3), |n| *n > 0);
        }
        Ok(())
    }
}

/// Waits for the next data stream of a test until `deadline`, giving up early when the client closes
/// its control connection (a killed client frees its slot at once, not after the timeout).
pub(crate) fn wait_stream<T>(
    rx: &mpsc::Receiver<T>,
    deadline: Instant,
    control: &TcpStream,
) -> Result<T, MissingWhy> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(MissingWhy::Timeout);
        }
        match rx.recv_timeout(left.min(Duration::from_millis(50))) {
            Ok(x) => return Ok(x),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(MissingWhy::Shutdown),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if sockopt::peer_gone(control) {
                    return Err(MissingWhy::ClientClosed);
                }
            }
        }
    }
}

type Incoming = Result<Message, ControlError>;

struct Hook<'a> {
    writer: &'a mut ControlWriter,
    session: &'a mut ServerSession,
    shutdown: &'a AtomicBool,
    client_report: Option<Box<EndpointReport>>,
    failure: Option<TestError>,
}

impl Hook<'_> {
    fn handle(&mut self, x: Incoming, flags: &Flags) {
        let now = Instant::now();
        let step = match x {
            Ok(m) => self.session.on_message(m, now).map_err(TestError::from),
            Err(ControlError::Closed) => Err(self.session.on_closed(now).into()),
            Err(e) => Err(e.into()),
        };
        let failed = match step {
            Ok(ServerAction::StopSenders) => {
                flags.stop.store(true, Relaxed);
                return;
            }
            Ok(ServerAction::SendResults(r)) => {
                self.client_report = Some(r);
                return;
            }
            Ok(ServerAction::PeerFailed(m)) => TestError::ClientFailed(m),
            Ok(_) => return,
            Err(e) => e,
        };
        flags.abort.store(true, Relaxed);
        self.failure.get_or_insert(failed);
    }
}

impl EngineHook<Incoming> for Hook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        let _ = self.writer.send(&Message::Interval {
            sample: sample.clone(),
        });
    }
    fn on_external(&mut self, x: Incoming, flags: &Flags) {
        self.handle(x, flags);
    }
    fn on_tick(&mut self, flags: &Flags) {
        if self.shutdown.load(Relaxed) && !flags.abort.load(Relaxed) {
            flags.abort.store(true, Relaxed);
            self.failure.get_or_insert(TestError::Shutdown);
        }
    }
}

/// Removes a session from the registry however the test ends.
struct Registered<'a>(&'a Registry, SessionId);
impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.lock() {
            r.remove(&self.1);
        }
    }
}

fn serve_test(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    if let Err(reason) = shared.admit(peer) {
        if let Ok(mut w) = ControlWriter::new(stream, shared.opts.handshake_timeout) {
            let _ = w.send(&Message::Rejected {
                reason: reason.clone(),
                code: Refusal::RateLimited,
            });
        }
        return shared.emit(ServerEvent::Refused {
            peer,
            reason: "rate limited (--max-tests-per-minute)".into(),
        });
    }
    let Some(_slot) = shared.slot() else {
        if let Ok(mut w) = ControlWriter::new(stream, shared.opts.handshake_timeout) {
            let _ = w.send(&Message::Rejected {
                reason: format!(
                    "busy: this server runs at most {} tests at once (--max-tests); retry in a few seconds",
                    shared.opts.max_tests
                ),
                code: Refusal::Busy,
            });
        }
        return shared.emit(ServerEvent::Refused {
            peer,
            reason: "busy (--max-tests)".into(),
        });
    };
    let mut log = TestLog::new(peer, "landspeed");
    match run_test(stream, shared, &mut log) {
        Ok(()) => {}
        Err(End::Failed(e)) => log.error = Some(e.to_string()),
        // A client that did not authenticate leaves nothing but a refusal in the log.
        Err(End::Refused(reason)) => return shared.emit(ServerEvent::Refused { peer, reason }),
        // A controller's check (welcome and clock probes, then goodbye) is not a test.
        Err(End::Checked) => return,
    }
    shared.tests_done.fetch_add(1, Relaxed);
    shared.emit(ServerEvent::Test(log));
}

/// How a test that did not complete ended.
enum End {
    Failed(TestError),
    /// Not a test at all (authentication failed): logged as a refusal.
    Refused(String),
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
end_from!(
    TestError,
    ControlError,
    WaitError,
    landspeed_core::protocol::ProtocolError,
    sockopt::SockOptError
);

/// Tells the client why the test failed (best effort) and hands the error on.
fn fail(writer: &mut ControlWriter, e: TestError) -> TestError {
    let _ = writer.send(&Message::Error {
        message: e.to_string(),
    });
    e
}

/// Hello, welcome, clock probes and orders up to an accepted test request (None: the connection
/// carried a third-party order, already run and answered); refusals and failures end it here.
fn handshake(
    reader: &mut control::ControlReader,
    writer: &mut ControlWriter,
    sm: &mut ServerSession,
    shared: &Shared,
    log: &mut TestLog,
) -> Result<Option<Test>, End> {
    loop {
        let msg = match reader.read_for(sm) {
            Ok(m) => m,
            Err(WaitError::Session(ProtocolError::PeerClosed { .. })) if sm.clock_probes() > 0 => {
                return Err(End::Checked)
            }
            Err(e) => return Err(e.into()),
        };
        match sm.on_message(msg, Instant::now()) {
            Ok(ServerAction::Reply(m)) => writer.send(&m)?,
            Ok(ServerAction::Accept(spec)) => return Ok(Some(spec)),
            Ok(ServerAction::ClockReading { client_ns }) => writer.send(&Message::Clock {
                client_ns,
                server_ns: unix_ns(),
            })?,
            Ok(ServerAction::RunOrder { order, test }) => {
                log.auth = sm.authenticated().map(str::to_string);
                let out = order::run_order(&order, test, writer, shared, log);
                sm.on_order_done();
                return out.map(|()| None).map_err(End::Failed);
            }
            Ok(ServerAction::AuthFailed { reply, detail }) => {
                let _ = writer.send(&reply);
                return Err(End::Refused(format!("authentication failed: {detail}")));
            }
            Ok(ServerAction::Reject(m)) => {
                let _ = writer.send(&m);
                return Err(match m {
                    Message::Rejected { reason, code } => TestError::Rejected { code, reason },
                    other => TestError::NotStarted(other.kind().into()),
                }
                .into());
            }
            Ok(ServerAction::PeerFailed(m)) => return Err(TestError::ClientFailed(m).into()),
            Ok(other) => return Err(TestError::NotStarted(format!("{other:?}")).into()),
            Err(e) => return Err(fail(writer, e.into()).into()),
        }
    }
}

/// This server's session for a new connection: its limits, whether it takes orders, its timers, and
/// a fresh nonce when it requires authentication.
fn new_session(o: &ServerOptions) -> Result<ServerSession, TestError> {
    let mut sm = ServerSession::with_limits(o.limits.clone())
        .with_control(o.allow_control)
        .with_timers(timers(o), Instant::now());
    if let Some(keys) = &o.auth {
        let mut nonce = [0u8; landspeed_core::protocol::NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|err| TestError::Random { what: "a nonce", err })?;
        sm = sm.with_auth(keys.clone(), nonce);
    }
    Ok(sm)
}

/// The test's file, opened (a refusal is sent to the client with its reason).
fn open_file(
    spec: &mut Test,
    o: &ServerOptions,
    writer: &mut ControlWriter,
) -> Result<Option<files::ServerFile>, End> {
    let Some(f) = spec.file.clone() else {
        return Ok(None);
    };
    files::open(&f, spec, o).map(Some).map_err(|reason| {
        let code = Refusal::Invalid;
        let _ = writer.send(&Message::Rejected {
            reason: reason.clone(),
            code,
        });
        TestError::Rejected { code, reason }.into()
    })
}

/// Waits for the client's `start` once this end said `ready`.
fn await_start(
    reader: &mut control::ControlReader,
    sm: &mut ServerSession,
    writer: &mut ControlWriter,
) -> Result<(), End> {
    let start = reader.read_for(sm)?;
    match sm.on_message(start, Instant::now()) {
        Ok(ServerAction::StartTest) => Ok(()),
        Ok(other) => Err(TestError::NotStarted(format!("{other:?}")).into()),
        Err(e) => Err(fail(writer, e.into()).into()),
    }
}

fn run_test(stream: TcpStream, shared: &Shared, log: &mut TestLog) -> Result<(), End> {
    let o = &shared.opts;
    let (mut reader, mut writer) =
        control::split(stream, &[], o.handshake_timeout).map_err(ControlError::from)?;
    let mut sm = new_session(o)?;
    let Some(mut spec) = handshake(&mut reader, &mut writer, &mut sm, shared, log)? else {
        return Ok(());
    };
    log.auth = sm.authenticated().map(str::to_string);
    if let Some(c) = &spec.server_cpus {
        if let Err(e) = landspeed_engine::pin::check_cpus(c) {
            return Err(fail(&mut writer, TestError::Cpus(e)).into());
        }
    }
    log.streams = spec.streams;
    log.direction = Some(spec.direction);
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|err| TestError::Random {
        what: "a session id",
        err,
    })?;
    let sid = SessionId(id);
    log.session = Some(sid);
    if spec.transport == Transport::Udp {
        log.protocol = "landspeed udp".into();
        return udp::run_test(reader, writer, sm, spec, sid, shared, log).map_err(End::Failed);
    }
    let (tx, rx) = mpsc::channel();
    shared
        .registry
        .lock()
        .map_err(|_| TestError::Poisoned)?
        .insert(sid, tx);
    let registered = Registered(&shared.registry, sid);
    let file = open_file(&mut spec, o, &mut writer)?;
    writer.send(&Message::Accepted { session: sid })?;
    let handle = file.as_ref().map(|f| f.handle.clone());
    let arrivals = Arrivals {
        rx: &rx,
        control: reader.stream(),
    };
    let mut streams = collect_streams(&arrivals, &spec, &mut sm, &mut writer, handle)?;
    drop(registered);
    streams.sort_by_key(|s| s.id);
    let mut warnings = vec![];
    if let Some(s) = streams.first() {
        let (snd, rcv) = sockopt::granted(&socket2::SockRef::from(&s.socket));
        warnings.extend(sockopt::window_warning(spec.window_bytes, snd, rcv));
    }
    writer.send(&Message::Ready)?;
    await_start(&mut reader, &mut sm, &mut writer)?;
    let local = Local {
        warnings,
        cpus: spec.server_cpus.clone(),
        file,
    };
    measure((reader, writer, sm), &spec, &streams, shared, local, log)
}

/// Runs the test's streams through the supervisor while the control connection is read in the
/// background, then exchanges the results over the control connection (`ctl`: its reader, writer and
/// session).
fn measure(
    ctl: (control::ControlReader, ControlWriter, ServerSession),
    spec: &Test,
    streams: &[DataStream],
    shared: &Shared,
    local: Local,
    log: &mut TestLog,
) -> Result<(), End> {
    let o = &shared.opts;
    let (reader, mut writer, mut sm) = ctl;
    let (wtx, wrx) = mpsc::channel::<Wake<Incoming>>();
    let quit = Arc::new(AtomicBool::new(false));
    control::spawn_reader(reader, wtx.clone(), quit.clone());
    let threads = spec.server_threads.map(|t| t as usize);
    let mut params = EngineParams::for_spec(spec, threads, spec.server_cpus.clone(), o.idle_timeout);
    // --max-rate: this end reads and writes no faster than its share, whichever way the data goes.
    params.stream_cap_bps = o.limits.max_rate_bps.map(|r| r / f64::from(spec.total_streams()));
    let flags = Flags::default();
    let iface = streams
        .first()
        .and_then(|s| s.socket.local_addr().ok())
        .and_then(|a| landspeed_engine::host::interface_for(a.ip()));
    let mut hook = Hook {
        writer: &mut writer,
        session: &mut sm,
        shutdown: &shared.shutdown,
        client_report: None,
        failure: None,
    };
    let wiring = Wiring::new(&flags, (&wtx, &wrx), &mut hook, iface.as_deref());
    let out = supervisor::run(&Tcp(streams), &params, wiring);
    add_measured(log, &out);
    let result = finish(&mut hook, &out, &flags, &wrx, local);
    quit.store(true, Relaxed);
    Ok(result?)
}

/// The session's timers from the server's options: each handshake step within the handshake timeout,
/// the client's results within the idle and handshake timeouts after this end's streams finish.
pub(crate) fn timers(o: &ServerOptions) -> Timers {
    Timers {
        handshake: o.handshake_timeout,
        accept_extra: Duration::ZERO,
        results: o.idle_timeout + o.handshake_timeout,
    }
}

/// Where a test's data connections arrive (the session's timer says how long to wait for them).
struct Arrivals<'a> {
    rx: &'a mpsc::Receiver<(u32, TcpStream)>,
    control: &'a TcpStream,
}

/// Waits for every data connection of the test, checks each id with the session and configures it;
/// the client is told why when one is missing or wrong.
fn collect_streams(
    a: &Arrivals,
    spec: &TestSpec,
    sm: &mut ServerSession,
    writer: &mut ControlWriter,
    file: Option<Arc<std::fs::File>>,
) -> Result<Vec<DataStream>, TestError> {
    let mut streams: Vec<DataStream> = vec![];
    let deadline = sm.poll_timeout().unwrap_or_else(Instant::now);
    while streams.len() < spec.total_streams() as usize {
        let (sid_n, sock) = match wait_stream(a.rx, deadline, a.control) {
            Ok(x) => x,
            Err(why) => {
                let missing = TestError::StreamsMissing {
                    arrived: streams.len(),
                    expected: spec.total_streams(),
                    why,
                };
                return Err(fail(writer, missing));
            }
        };
        sm.on_stream(sid_n, Instant::now())
            .map_err(|e| fail(writer, e.into()))?;
        let flow = spec.flow_of(sid_n);
        let role = if flow == Flow::ClientToServer {
            Role::Receiver
        } else {
            Role::Sender
        };
        sockopt::after_connect(&socket2::SockRef::from(&sock), spec, role == Role::Sender)
            .map_err(|e| fail(writer, e.into()))?;
        streams.push(DataStream {
            file: file.clone(),
            id: sid_n,
            flow,
            role,
            socket: sock,
            budget: if role == Role::Sender {
                spec.stream_budget(sid_n)
            } else {
                None
            },
        });
    }
    Ok(streams)
}

/// What goes into this end's report besides the engine's figures.
pub(crate) struct Local {
    pub warnings: Vec<String>,
    pub cpus: Option<Vec<usize>>,
    /// Disk-to-disk tests: this end's file, reported once the client's digest is in.
    pub file: Option<files::ServerFile>,
}

fn finish(
    hook: &mut Hook,
    out: &supervisor::EngineOutput,
    flags: &Flags,
    wrx: &mpsc::Receiver<Wake<Incoming>>,
    local: Local,
) -> Result<(), TestError> {
    if let Some(f) = hook.failure.take() {
        return Err(f);
    }
    let done = hook.session.on_local_done(Instant::now())?;
    hook.writer.send(&done)?;
    while hook.client_report.is_none() {
        let now = Instant::now();
        if let Err(ProtocolError::Timeout { after, .. }) = hook.session.handle_timeout(now) {
            return Err(TestError::NoResults(after));
        }
        match wrx.recv_timeout(hook.session.time_left(now).unwrap_or(Duration::ZERO)) {
            Ok(Wake::External(x)) => hook.handle(x, flags),
            Ok(Wake::WorkerDone) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(hook.session.on_closed(now).into()),
        }
        if let Some(f) = hook.failure.take() {
            return Err(f);
        }
    }
    let errors: Vec<(u32, String)> = out
        .streams
        .iter()
        .filter_map(|s| s.error.clone().map(|e| (s.id, e)))
        .collect();
    let mut report = out.report(local.cpus, local.warnings);
    if let Some(f) = local.file {
        let client = hook.client_report.as_ref().and_then(|r| r.file.as_ref());
        match f.report(client) {
            Ok((r, kept)) => {
                report.file = Some(r);
                report.warnings.extend(kept);
            }
            Err(e) => report.error = Some(e),
        }
    }
    hook.writer.send(&Message::Results {
        report: Box::new(report),
    })?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(TestError::Streams(errors))
    }
}

/// Now on this host's clock, in nanoseconds since the Unix epoch (clock probes).
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
