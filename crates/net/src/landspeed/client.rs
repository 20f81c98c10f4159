//! landspeed's own protocol, the client's session: one landspeed test, run as the `ClientSession`
//! orders it. The session decides what is sent and when; this driver greets the server (telling an
//! iperf3 server and a peer that is not landspeed apart), then only reacts to what the session asks
//! through one `Link` loop: open the data streams, start the engine, record the server's intervals,
//! take its report. Nothing here reads a message or decides which comes next.

mod each;
mod setup;

use crate::control::{ControlError, Event, Input, Link, WaitError, Wire};
use crate::dial::{
    latency, measure, measure_transactions, run_context, ClientError, ClientEvent, ClientOptions,
    LiveIntervals,
};
use crate::streams::DataPaths;
use landspeed_core::assemble::Inputs;
use landspeed_core::config::{Flow, Test, TestSpec, Transport};
use landspeed_core::endpoint::{EndpointReport, IntervalSample};
use landspeed_core::result::{Authentication, RunResult};
use landspeed_core::transactions::TransactionLog;
use landspeed_engine::supervisor::{EngineHook, EngineOutput, Flags};
use landspeed_engine::transport::rr;
use landspeed_engine::transport::udp::UdpFormat;
use landspeed_proto::{
    ClientAction, ClientPhase, ClientSession, Conn, Message, Preamble, ProtocolError, StreamKey,
    PROTOCOL_VERSION,
};
use setup::{latency_begins, local_report, open_data, result, start_warnings, test_spec, timers, LocalFile};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

type ClientLink = Link<Conn<ClientSession>>;

/// Runs one test against a landspeed server. `interrupt` (e.g. raised by Ctrl-C) ends the test early
/// and cleanly: senders stop, receivers drain, and the result is marked interrupted.
pub fn run_client(
    opts: &ClientOptions,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let (spec, local_file) = test_spec(opts)?;
    landspeed_engine::platform::check_spec(&spec)?;
    let addr = crate::dial::resolve(opts)?;
    if !lead_in(opts, interrupt) {
        return Err(ClientError::Interrupted);
    }
    let ctl = crate::dial::connect(opts, addr, None)?;
    let local = ctl
        .local_addr()
        .map_err(|err| ClientError::Connect { addr, err })?;
    on_event(ClientEvent::Connected { local, remote: addr });
    let spec = sized_to_path(opts, spec, &ctl)?;
    let latency = opts
        .latency
        .as_ref()
        .map(|l| latency::LatencyRun::start(addr, l))
        .transpose()?;
    let mut link = greet(opts, &spec, ctl, addr)?;
    let mut run = Run {
        opts,
        spec: &spec,
        at: (local, addr),
        interrupt,
        on_event,
        latency,
        local_file,
        data: None,
        dialer: None,
        server: ServerSide::default(),
        done: None,
    };
    let server_report = link
        .run(|link, ev| run.step(link, ev))
        .map_err(|f| run.went_silent(f.into_client(addr)))?;
    let server_key = link
        .wire
        .conn
        .machine()
        .server_authenticated()
        .map(str::to_string);
    let streams_proven = link.wire.conn.stream_key().is_some();
    link.wire.shutdown();
    let mut result = run.result(&server_report)?;
    let encrypted = spec.tls.is_some() || spec.transport == Transport::Quic;
    result.authentication = Some(Authentication::of(
        server_key.as_deref(),
        opts.tls_pin.is_some() && encrypted,
        encrypted,
        streams_proven,
    ));
    Ok(result)
}

/// Why a step of the test failed: the client's own error, or the control connection's.
enum Fail {
    Client(ClientError),
    Wait(WaitError),
}

impl From<ClientError> for Fail {
    fn from(e: ClientError) -> Self {
        Fail::Client(e)
    }
}

impl From<WaitError> for Fail {
    fn from(e: WaitError) -> Self {
        Fail::Wait(e)
    }
}

impl Fail {
    fn into_client(self, addr: SocketAddr) -> ClientError {
        match self {
            Fail::Client(e) => e,
            Fail::Wait(WaitError::Session(ProtocolError::Wait(
                landspeed_proto::WaitFailed::PeerClosed { phase },
            ))) => ClientError::ServerWentAway { phase },
            Fail::Wait(WaitError::Session(e)) => e.into(),
            Fail::Wait(WaitError::Control(err)) => ClientError::Control { addr, err },
        }
    }
}

/// Opens the conversation: preamble and hello, then the server's welcome (the session answers it
/// with the test request). Tells an iperf3 server, a refusal and a peer that is not landspeed apart.
fn greet(
    opts: &ClientOptions,
    spec: &Test,
    ctl: TcpStream,
    addr: SocketAddr,
) -> Result<ClientLink, ClientError> {
    let cerr = |err: ControlError| ClientError::Control { addr, err };
    let mut session = ClientSession::new(spec.clone()).with_timers(timers(opts));
    if let Some(key) = &opts.auth {
        let mut nonce = [0u8; landspeed_proto::NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|err| ClientError::Random { what: "a nonce", err })?;
        session = session
            .with_auth(key.clone(), nonce)
            .key_only_if_asked(opts.auth_only_if_asked);
    }
    let mut conn = Conn::new(session);
    conn.send_raw(
        &Preamble::Control {
            version: PROTOCOL_VERSION,
        }
        .encode(),
    );
    conn.handle_local(Instant::now(), |s, now| Ok(ClientAction::Send(s.hello(now))))?;
    let mut link = Link::new(ctl, conn, opts.control_timeout).map_err(cerr)?;
    // An iperf3 server takes the greeting for a cookie and answers with one state byte: PARAM_EXCHANGE
    // (9) or ACCESS_DENIED (-1). A landspeed answer starts with a frame length, whose first byte is 0.
    let _ = link.stream().set_read_timeout(Some(opts.control_timeout));
    let mut first = [0u8; 1];
    if let Ok(1) = link.stream().peek(&mut first) {
        if first[0] == 9 || first[0] == 0xff {
            // A client that holds a key never falls back to a protocol that cannot carry it: one
            // injected byte would otherwise remove the authentication.
            if opts.auth.is_some() && !opts.auth_only_if_asked {
                return Err(ClientError::Downgrade {
                    addr,
                    first_byte: first[0],
                });
            }
            return Err(ClientError::Iperf3Server { addr });
        }
    }
    link.listen().map_err(cerr)?;
    let welcomed = link.run(|link, _| {
        let phase = link.wire.conn.machine().phase();
        Ok::<_, WaitError>((phase != ClientPhase::AwaitWelcome).then_some(()))
    });
    let not_ls = |detail: String| ClientError::NotLandspeed { addr, detail };
    match welcomed {
        Ok(()) => Ok(link),
        Err(WaitError::Session(ProtocolError::Frame(e))) => Err(not_ls(e.to_string())),
        Err(WaitError::Session(ProtocolError::Wait(landspeed_proto::WaitFailed::Timeout {
            after, ..
        }))) => Err(not_ls(format!("no landspeed answer within {after:?}"))),
        Err(WaitError::Session(ProtocolError::Wait(landspeed_proto::WaitFailed::PeerClosed { .. }))) => Err(
            not_ls("it closed the connection after the greeting without an answer".into()),
        ),
        Err(WaitError::Session(e)) => Err(e.into()),
        Err(WaitError::Control(e)) => Err(cerr(e)),
    }
}

/// A UDP test whose datagram size was left to the path takes it from the control connection: its
/// MSS and its route's MTU (`core::udp::length_for_path`); unchanged where the system cannot say.
fn sized_to_path(opts: &ClientOptions, spec: Test, ctl: &TcpStream) -> Result<Test, ClientError> {
    if !opts.udp_length_from_path || spec.transport != Transport::Udp {
        return Ok(spec);
    }
    let Ok(info) = landspeed_engine::tcp_info::read(ctl) else {
        return Ok(spec);
    };
    let path = landspeed_core::udp::PathSize {
        mss_bytes: info.raw.snd_mss,
        route_mtu: landspeed_engine::os::path_mtu(ctl)
            .ok()
            .zip(ctl.peer_addr().ok().map(|a| a.is_ipv6())),
    };
    let length = landspeed_core::udp::length_for_path(path, spec.udp_stream_rate_bps());
    Ok(spec.changed(|s| s.length_bytes = length)?)
}

/// What the server has sent during the test: its interval samples, and their live form.
#[derive(Default)]
struct ServerSide {
    samples: Vec<IntervalSample>,
    live: LiveIntervals,
}

impl ServerSide {
    /// A server sample: kept for the result, and shown live where the server receives.
    fn take(&mut self, sample: IntervalSample, spec: &TestSpec, on_event: &mut dyn FnMut(ClientEvent)) {
        if spec.transactions.is_some() {
            // A request/response test's live lines are its transactions (this end's hook).
            self.samples.push(sample);
            return;
        }
        let iv = self
            .live
            .convert(&sample, |id| spec.flow_of(id) == Flow::ClientToServer);
        if !iv.streams.is_empty() {
            on_event(ClientEvent::Interval {
                flow: Flow::ClientToServer,
                interval: iv,
            });
        }
        self.samples.push(sample);
    }
}

/// This end's part once its streams are done.
struct Done {
    out: EngineOutput,
    /// A request/response test's figures (`--rr`).
    transactions: Option<landspeed_core::transactions::TransactionsReport>,
    report: EndpointReport,
    incoming: Option<landspeed_engine::files::Incoming>,
    started_unix_s: f64,
    interrupted: bool,
}

/// One test as the client driver follows it.
struct Run<'a> {
    opts: &'a ClientOptions,
    spec: &'a Test,
    /// This end's and the server's addresses.
    at: (SocketAddr, SocketAddr),
    interrupt: &'a AtomicBool,
    on_event: &'a mut dyn FnMut(ClientEvent),
    latency: Option<latency::LatencyRun>,
    local_file: Option<LocalFile>,
    data: Option<DataPaths>,
    /// A connection-each test: where its later connections come from.
    dialer: Option<each::Dialer>,
    server: ServerSide,
    done: Option<Done>,
}

impl Run<'_> {
    /// Does what the session asks; the server's report ends the test.
    fn step(
        &mut self,
        link: &mut ClientLink,
        ev: Event<ClientAction>,
    ) -> Result<Option<Box<EndpointReport>>, Fail> {
        match ev {
            Event::Action(ClientAction::ConnectStreams(admission)) => {
                let key = link.wire.conn.stream_key().cloned();
                let data = self.connect(admission, key.as_ref())?;
                if self.spec.transactions.is_some_and(|t| t.connect_each) {
                    self.dialer = Some(each::Dialer::new(self.opts, self.spec, admission, key)?);
                }
                link.wire
                    .local(|s, now| s.on_streams_connected(now).map(|()| ClientAction::Wait))?;
                self.data = Some(data);
            }
            Event::Action(ClientAction::StartTest) => self.run_engine(link)?,
            Event::Action(ClientAction::Interval(sample)) => {
                self.server.take(sample, self.spec, self.on_event)
            }
            Event::Action(ClientAction::Finished(report)) => return Ok(Some(report)),
            Event::Tick if self.done.is_none() && self.interrupt.load(Relaxed) => {
                return Err(ClientError::Interrupted.into())
            }
            Event::Action(_) | Event::Arrival(_) | Event::Tick => {}
        }
        Ok(None)
    }
}

impl Run<'_> {
    /// The server accepted the test: its data connections, proven with `key` in a keyed test.
    fn connect(
        &mut self,
        admission: landspeed_proto::Admission,
        key: Option<&StreamKey>,
    ) -> Result<DataPaths, ClientError> {
        if self.interrupt.load(Relaxed) {
            return Err(ClientError::Interrupted);
        }
        let (opts, addr) = (self.opts, self.at.1);
        open_data(opts, self.spec, addr, (admission, key), self.local_file.as_ref())
    }

    /// The server is ready: warnings and latency baseline, `start` at the agreed instant, the engine
    /// while the control connection is followed, then this end's report to the session.
    fn run_engine(&mut self, link: &mut ClientLink) -> Result<(), Fail> {
        let data = self.data.take().ok_or(ClientError::OutOfOrder {
            step: "waiting for the server to be ready",
        })?;
        let mut warnings = start_warnings(link.wire.conn.machine(), self.spec, &data);
        if let Some(l) = self.latency.as_mut() {
            warnings.extend(latency_begins(l));
        }
        (self.on_event)(ClientEvent::Started {
            streams: self.spec.total_streams(),
            warnings: warnings.clone(),
        });
        let started_unix_s = wait_for_start(self.opts);
        link.wire.local(|s, _| s.start())?;
        let log = self
            .spec
            .transactions
            .map(|t| rr::new_log(&t, self.spec.interval_s));
        let mut hook = Hook {
            wire: &mut link.wire,
            spec: self.spec,
            interrupt: self.interrupt,
            on_event: &mut *self.on_event,
            server: &mut self.server,
            live: LiveIntervals::default(),
            failure: None,
            transactions: log.as_ref(),
            shown: 0,
        };
        let wake = (&link.tx, &link.rx);
        let (out, transactions) = match (&data, self.spec.transactions, &log) {
            (DataPaths::Tcp(streams), Some(t), Some(log)) => {
                let dialing = (t.connect_each)
                    .then(|| each::Dialing::of(self.dialer.as_ref(), self.opts, self.spec, self.at.1))
                    .transpose()?;
                let rr: (&TestSpec, _, _) = (self.spec, t, log);
                let each = (&streams[..], dialing.as_ref().map(|d| d as &dyn rr::Connections));
                let (out, report) = measure_transactions(self.opts, rr, each, self.at.0, wake, &mut hook);
                if dialing.is_some() {
                    // The server answers whatever connections come until told the last was made.
                    let _ = hook.wire.send(&Message::Stop);
                }
                (out, Some(report))
            }
            _ => {
                let data = (&data, UdpFormat::Landspeed);
                (
                    measure(self.opts, self.spec, data, self.at.0, wake, &mut hook),
                    None,
                )
            }
        };
        if let Some(f) = hook.failure.take() {
            return Err(f);
        }
        if let Some(l) = self.latency.as_mut() {
            l.unloaded();
        }
        let interrupted = self.interrupt.load(Relaxed);
        let (report, incoming) = local_report(self.opts, &out, warnings, self.local_file.take())?;
        let mine = report.clone();
        link.wire.local(|s, now| s.on_local_done(mine, now))?;
        self.done = Some(Done {
            out,
            transactions,
            report,
            incoming,
            started_unix_s,
            interrupted,
        });
        Ok(())
    }

    /// A wait for the server's results that ran out after this end's data streams ended: when they
    /// gave up (nothing moved for the idle timeout) the path or the server went away, and the error
    /// says the data went silent first and how long the control connection then stayed so; when they
    /// ended well, only the control connection went silent.
    fn went_silent(&self, e: ClientError) -> ClientError {
        let ClientError::Protocol(ProtocolError::Wait(landspeed_proto::WaitFailed::Timeout {
            after, ..
        })) = &e
        else {
            return e;
        };
        let Some(done) = &self.done else { return e };
        let failed: Vec<String> = done
            .report
            .streams
            .iter()
            .filter_map(|s| s.error.as_ref().map(|m| format!("stream {}: {m}", s.id)))
            .collect();
        if failed.is_empty() {
            return ClientError::ControlSilent { after: *after };
        }
        ClientError::WentSilent {
            idle: self.opts.idle_timeout,
            streams: failed.join("; "),
            control_after: *after,
        }
    }

    /// The run's result, once the server's report is in.
    fn result(self, server: &EndpointReport) -> Result<RunResult, ClientError> {
        let done = self.done.ok_or(ClientError::OutOfOrder {
            step: "waiting for the server's results",
        })?;
        let (local, addr) = self.at;
        let context = run_context(
            self.opts,
            local,
            addr,
            &done.report,
            done.started_unix_s,
            done.interrupted,
            "landspeed",
        );
        let inputs = Inputs {
            spec: self.spec,
            context,
            client: &done.report,
            server,
            client_samples: &done.out.samples,
            server_samples: &self.server.samples,
        };
        let mut r = result(&inputs, self.latency, done.incoming);
        if done.transactions.is_some() {
            // A request/response test's rate is its latency's (the report's rate line): the bulk
            // diagnosis of what held a rate back does not apply.
            r.directions.iter_mut().for_each(|d| d.limits.clear());
        }
        r.transactions = done.transactions;
        Ok(r)
    }
}

/// How long before a scheduled start (`ClientOptions::start_at`) the test is set up: its control
/// and data connections made, the server waiting for `start` (well inside a server's handshake
/// timeout, 10 s by default).
const LEAD: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits, when the start is more than [`LEAD`] ahead, until [`LEAD`] before it; false when
/// `interrupt` was raised meanwhile (it is looked at every 100 ms).
fn lead_in(opts: &ClientOptions, interrupt: &AtomicBool) -> bool {
    let Some(at) = opts.start_at else { return true };
    let Some(set_up) = at.checked_sub(LEAD) else {
        return true;
    };
    while let Ok(left) = set_up.duration_since(SystemTime::now()) {
        if interrupt.load(Relaxed) {
            return false;
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(100)));
    }
    !interrupt.load(Relaxed)
}

/// Waits for the agreed start instant, when a controller gave one; returns the instant the data
/// starts (Unix seconds), from which the result's intervals count.
fn wait_for_start(opts: &ClientOptions) -> f64 {
    if let Some(at) = opts.start_at {
        // Bounded: a controller's instant is checked to be at most a minute ahead.
        if let Ok(wait) = at.duration_since(SystemTime::now()) {
            std::thread::sleep(wait);
        }
    }
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Follows the control connection while the engine runs: the server's samples are kept and shown,
/// this end's are shown where it receives, Ctrl-C stops the senders (and tells the server), a
/// failure aborts the test.
struct Hook<'a> {
    wire: &'a mut Wire<Conn<ClientSession>>,
    spec: &'a TestSpec,
    interrupt: &'a AtomicBool,
    on_event: &'a mut dyn FnMut(ClientEvent),
    server: &'a mut ServerSide,
    live: LiveIntervals,
    failure: Option<Fail>,
    /// A request/response test's transactions as they come: its live lines.
    transactions: Option<&'a Mutex<TransactionLog>>,
    /// Its intervals shown so far.
    shown: usize,
}

impl EngineHook<Input> for Hook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        if let Some(log) = self.transactions {
            // The workers close intervals too, as their transactions pass a boundary: what is new
            // since the last sample is what this one shows.
            let closed: Vec<_> = {
                let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
                l.advance((sample.end_s * 1e9) as u64);
                l.closed()[self.shown.min(l.closed().len())..].to_vec()
            };
            self.shown += closed.len();
            for interval in closed {
                (self.on_event)(ClientEvent::Transactions {
                    interval,
                    tcp: None,
                    connection: None,
                });
            }
            return;
        }
        let spec = self.spec;
        let iv = self
            .live
            .convert(sample, |id| spec.flow_of(id) == Flow::ServerToClient);
        if !iv.streams.is_empty() {
            (self.on_event)(ClientEvent::Interval {
                flow: Flow::ServerToClient,
                interval: iv,
            });
        }
    }

    fn on_external(&mut self, x: Input, flags: &Flags) {
        let fed = self.wire.feed(x, Instant::now());
        while let Some(a) = self.wire.conn.poll_action() {
            if let ClientAction::Interval(sample) = a {
                self.server.take(sample, self.spec, self.on_event);
            }
        }
        if let Err(e) = fed {
            flags.abort.store(true, Relaxed);
            self.failure.get_or_insert(e.into());
        }
    }

    fn on_tick(&mut self, flags: &Flags) {
        if self.interrupt.load(Relaxed) {
            flags.stop.store(true, Relaxed);
        }
    }

    fn on_stop(&mut self) {
        let _ = self.wire.send(&Message::Stop);
    }
}
