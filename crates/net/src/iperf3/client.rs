//! `landspeed run --iperf3`: drives an unmodified `iperf3 -s` with iperf3's own protocol (cookie,
//! parameters, CREATE_STREAMS, TEST_START/RUNNING, TEST_END, results exchange), moves the data with
//! landspeed's engine, and turns both ends' figures (the server's arrive in its results message) into the
//! same `RunResult` as a landspeed test, marked with the protocol. iperf3's payload is not landspeed's
//! pattern, so against iperf3 nothing is verified, and the result says so. The parameters carry
//! landspeed's payload key, which iperf3 ignores: a landspeed server answers that it took it, and then
//! both ends send landspeed's pattern and check every byte they receive, in iperf3's protocol.

use crate::control::{Event, Input, Link, WaitError, Wire};
use crate::dial::{connect, measure, resolve, ClientError, ClientEvent, ClientOptions, LiveIntervals};
use crate::streams::DataPaths;
use landspeed_core::assemble::{assemble, Inputs};
use landspeed_core::config::{EndCondition, RxMode, Test, TestSpec, Transport};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport};
use landspeed_core::result::{Iperf3ServerOutput, RunResult};
use landspeed_engine::supervisor::{EngineHook, Flags, Progress};
use landspeed_engine::transport::tcp::DataStream;
use landspeed_engine::transport::udp::UdpFormat;
use landspeed_iperf3::session::{describe, ClientAction, ClientSession, Iperf3Error, Iperf3Timers};
use landspeed_iperf3::{Cookie, Params, Results};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

type Iperf3Link = Link<ClientSession>;

/// The session's reasons as the client's errors: a refusal keeps iperf3's numbers, ACCESS_DENIED is
/// "busy" (a retry can work), the rest name the step.
impl From<Iperf3Error> for ClientError {
    fn from(e: Iperf3Error) -> Self {
        match e {
            Iperf3Error::ServerError { code, errno } => ClientError::Iperf3Refused { code, errno },
            Iperf3Error::AccessDenied => ClientError::Busy {
                reason: "the iperf3 server is running another test (ACCESS_DENIED)".into(),
            },
            Iperf3Error::Unexpected { got, expected } => ClientError::Iperf3Unexpected {
                got: describe(got),
                expected,
            },
            e => ClientError::Iperf3(e),
        }
    }
}

impl From<WaitError<Iperf3Error>> for ClientError {
    fn from(e: WaitError<Iperf3Error>) -> Self {
        match e {
            WaitError::Session(e) => e.into(),
            WaitError::Control(err) => ClientError::Iperf3Control(err),
        }
    }
}

/// Follows the test while the engine runs: ends it as iperf3's client does (TEST_END through the
/// session), hands the live intervals on, and aborts when the server says anything the session refuses
/// or goes away.
struct Hook<'a> {
    wire: &'a mut Wire<ClientSession>,
    deadline: Option<Instant>,
    /// The count of a `-n`/`-k` test: iperf3's client ends it once it has sent *or* received this many
    /// bytes, so senders that finished their budget end it even while data still arrives.
    receive_target: Option<u64>,
    /// This client has receiving streams (reverse or bidirectional).
    receives: bool,
    /// This client has sending streams (forward or bidirectional).
    sends: bool,
    interrupt: &'a AtomicBool,
    on_event: &'a mut dyn FnMut(ClientEvent),
    live: LiveIntervals,
    spec: &'a TestSpec,
    failure: Option<ClientError>,
}

impl<'a> Hook<'a> {
    /// The hook of a test starting now: it ends the test by time, by count or by Ctrl-C.
    fn new(
        wire: &'a mut Wire<ClientSession>,
        spec: &'a TestSpec,
        data: &DataPaths,
        interrupt: &'a AtomicBool,
        on_event: &'a mut dyn FnMut(ClientEvent),
    ) -> Self {
        Hook {
            wire,
            deadline: spec.send_time().map(|d| Instant::now() + d),
            receive_target: match spec.end {
                EndCondition::Bytes(b) => Some(b),
                EndCondition::Blocks(k) => Some(k.saturating_mul(spec.length_bytes)),
                EndCondition::Time(_) => None,
            },
            sends: data.has_role(Role::Sender),
            receives: data.has_role(Role::Receiver),
            interrupt,
            on_event,
            live: LiveIntervals::default(),
            spec,
            failure: None,
        }
    }

    /// The engine halted, then TEST_END (once): halting first, so no stream is still writing when the
    /// server closes the streams on TEST_END (a reset there would read as a failed stream).
    fn end(&mut self, flags: &Flags) {
        flags.halt.store(true, Relaxed);
        if let Err(e) = self.wire.with(|s| {
            s.end(Instant::now());
            Ok(())
        }) {
            self.failure.get_or_insert(e.into());
        }
    }
}

impl EngineHook<Input> for Hook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        self.live.each_flow(self.spec, sample, self.on_event);
    }
    /// What the server says during the test: iperf3's server says nothing until TEST_END, so anything
    /// (a SERVER_ERROR, SERVER_TERMINATE, the connection closing) ends the test as failed.
    fn on_external(&mut self, x: Input, flags: &Flags) {
        if let Err(e) = self.wire.feed(x, Instant::now()) {
            self.failure.get_or_insert(e.into());
            flags.abort.store(true, Relaxed);
        }
    }
    fn on_tick(&mut self, flags: &Flags) {
        if self.interrupt.load(Relaxed) {
            flags.stop.store(true, Relaxed);
        }
    }
    /// The client ends the test (TEST_END) as iperf3's does: a timed test once its own senders have
    /// stopped at the deadline (ending earlier would let the server close streams under them); a
    /// counted test (`-n`/`-k`) once it has sent the count (its senders' budget is done) or received it.
    fn on_progress(&mut self, p: Progress, flags: &Flags) {
        let time_up = self.deadline.is_some_and(|d| Instant::now() >= d);
        let target = self.receive_target.is_some_and(|t| p.received >= t);
        let stopped = flags.stop.load(Relaxed);
        // A client that only receives has no budget of its own: "senders done" says nothing then.
        let sent_count = self.receive_target.is_some() && self.sends && p.senders_done;
        if target || sent_count || (p.senders_done && (time_up || stopped || !self.receives)) {
            self.end(flags);
        }
    }
}

/// Runs one test against an iperf3 server.
///
/// `after_detection`: landspeed's own greeting has just been refused by this server, which may be
/// restarting its listener; connection failures are then retried for a little while.
pub fn run_iperf3_client(
    opts: &ClientOptions,
    after_detection: bool,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let offered = &offered_spec(opts)?;
    landspeed_engine::platform::check_spec(offered)?;
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let addr = resolve(opts)?;
    let (mut link, local, cookie) = greet(opts, addr, offered, after_detection)?;
    on_event(ClientEvent::Connected { local, remote: addr });
    awaiting(&mut link, |a| matches!(a, ClientAction::OpenStreams))?;
    let agreed = link.wire.conn.payload_agreed();
    let unverified = unverified_spec(offered)?;
    let spec: &TestSpec = if agreed { offered } else { &unverified };
    let data = open_data(opts, addr, spec, cookie)?;
    link.wire.with(|s| s.streams_open(Instant::now()))?;
    // The server sends TEST_START and TEST_RUNNING back to back or with its own start-up between.
    awaiting(&mut link, |a| matches!(a, ClientAction::Run))?;
    let mut warnings = super::peer::payload_warning(agreed, offered.verify);
    warnings.extend(data.window_warning(spec.window_bytes));
    on_event(ClientEvent::Started {
        streams: spec.total_streams(),
        warnings: warnings.clone(),
    });
    let mut hook = Hook::new(&mut link.wire, spec, &data, interrupt, on_event);
    let format = UdpFormat::Iperf3 {
        wide: opts.iperf3_udp64,
    };
    let out = measure(
        opts,
        spec,
        (&data, format),
        local,
        (&link.tx, &link.rx),
        &mut hook,
    );
    // A test that ended by itself (every stream done) still owes the server its TEST_END.
    hook.end(&Flags::default());
    if let Some(f) = hook.failure.take() {
        return Err(f);
    }
    let local_report = out.report(opts.cpus.clone(), warnings);
    let counted = landspeed_iperf3::iperf3_counts(&local_report.streams, &out.samples);
    let checked = agreed.then_some(local_report.streams.as_slice());
    let omit_s = spec.omit_s.as_secs_f64();
    let theirs = exchange_results(&mut link, (&local_report, omit_s), &counted, checked)?;
    let peer = match agreed {
        true => "landspeed server (iperf3 protocol)",
        false => "iperf3 server",
    };
    let server_report = super::peer::remote_report(&theirs, &local_report, &counted, omit_s, peer);
    let mut context = crate::dial::run_context(
        opts,
        local,
        addr,
        &local_report,
        started_unix_s,
        interrupt.load(Relaxed),
        "iperf3",
    );
    context.foreign_peer = !agreed && offered.verify; // asked for, not agreed: iperf3 itself
    let mut result = assemble(&Inputs {
        spec,
        context,
        client: &local_report,
        server: &server_report,
        client_samples: &out.samples,
        server_samples: &[],
    });
    result.iperf3_server_output = server_output(opts, theirs);
    Ok(result)
}

/// The test's data connections, each greeted with the cookie (TCP) or iperf3's UDP hello.
fn open_data(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    cookie: Cookie,
) -> Result<DataPaths, ClientError> {
    Ok(if spec.transport == Transport::Udp {
        DataPaths::Udp(open_udp_streams(opts, addr, spec)?)
    } else {
        DataPaths::Tcp(open_streams(opts, addr, spec, cookie)?)
    })
}

/// The server's own output from its results, only when asked (`--get-server-output`): an `iperf3 -s`
/// that served a client asking for it keeps sending it to the next ones (iperf3's own client ignores
/// it then, as here).
fn server_output(opts: &ClientOptions, theirs: Results) -> Option<Iperf3ServerOutput> {
    match (theirs.server_output_json, theirs.server_output_text) {
        _ if !opts.iperf3_server_output => None,
        (Some(j), _) => Some(Iperf3ServerOutput::Json(j)),
        (None, Some(t)) => Some(Iperf3ServerOutput::Text(t)),
        (None, None) => None,
    }
}

/// Runs the link until the session asks for what `wanted` picks out.
fn awaiting(
    link: &mut Iperf3Link,
    wanted: impl Fn(&ClientAction) -> bool,
) -> Result<ClientAction, ClientError> {
    link.run(|_, ev| match ev {
        Event::Action(a) if wanted(&a) => Ok(Some(a)),
        _ => Ok(None),
    })
}

/// The test this client offers: a fresh payload key, sent in the parameters when it verifies.
fn offered_spec(opts: &ClientOptions) -> Result<Test, ClientError> {
    if opts.spec.tls.is_some() {
        return Err(ClientError::NotWithIperf3 {
            what: "TLS: iperf3 has no encrypted data mode",
        });
    }
    if opts.spec.transactions.is_some() {
        return Err(ClientError::NotWithIperf3 {
            what: "a request/response test (--rr): iperf3 has none; against iperf 2 use --bounceback",
        });
    }
    let mut test = opts.spec.clone();
    if test.payload_key == 0 {
        test = test.with_payload_key(getrandom::u64().unwrap_or(0x5eed) | 1);
    }
    Ok(test)
}

/// The test as an iperf3 server runs it: its payload is not ours, so nothing is verified, and TCP
/// receivers drop what arrives without copying it.
fn unverified_spec(offered: &Test) -> Result<Test, ClientError> {
    Ok(offered.changed(|s| {
        s.verify = false;
        if s.transport == Transport::Tcp {
            s.rx = RxMode::Discard;
        }
    })?)
}

/// Connects and sends a new cookie, until the server answers PARAM_EXCHANGE (the session then sends
/// the parameters). An iperf3 server that has just failed a test (for instance landspeed's own
/// greeting, when it found out what the server is) resets connections while it restarts its listener:
/// with `retry`, that is tried again.
fn greet(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    retry: bool,
) -> Result<(Iperf3Link, SocketAddr, Cookie), ClientError> {
    let mut attempt = 0;
    loop {
        let tried = (|| {
            let mut r = [0u8; 36];
            getrandom::fill(&mut r).map_err(|err| ClientError::Random {
                what: "a cookie",
                err,
            })?;
            let cookie = Cookie::from_random(r);
            let ctl = connect(opts, addr, None)?;
            let local = ctl
                .local_addr()
                .map_err(|err| ClientError::Connect { addr, err })?;
            let mut link = Link::new(ctl, session(opts, spec, &cookie), opts.control_timeout)
                .map_err(ClientError::Iperf3Control)?;
            link.listen().map_err(ClientError::Iperf3Control)?;
            awaiting(&mut link, |a| matches!(a, ClientAction::Greeted))?;
            Ok::<_, ClientError>((link, local, cookie))
        })();
        match tried {
            Ok(x) => return Ok(x),
            // A server that just finished a test may still say "busy" for a moment.
            Err(e) if attempt < 5 && e.is_transient() => {}
            // A listener restarting resets connections or answers out of turn for a moment.
            Err(
                ClientError::Connect { .. }
                | ClientError::Iperf3(_)
                | ClientError::Iperf3Control(_)
                | ClientError::Iperf3Unexpected { .. }
                | ClientError::Iperf3Refused { .. },
            ) if attempt < 5 && retry => {}
            Err(e) => return Err(e),
        }
        attempt += 1;
        std::thread::sleep(Duration::from_millis(50 << attempt));
    }
}

fn unix_s() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A new conversation with `cookie` for `spec`: each handshake step within the control timeout, the
/// server's results within the control and idle timeouts.
fn session(opts: &ClientOptions, spec: &TestSpec, cookie: &Cookie) -> ClientSession {
    let version = format!("landspeed {}", landspeed_core::SOFTWARE_VERSION);
    let timers = Iperf3Timers {
        handshake: opts.control_timeout,
        results: opts.control_timeout + opts.idle_timeout,
        idle: opts.idle_timeout,
    };
    let mut params = Params::message_for(spec, &version);
    if opts.iperf3_server_output {
        // iperf3 sends the number 1 (its server looks for a number).
        params["get_server_output"] = serde_json::json!(1);
    }
    if let Some(t) = &opts.iperf3_title {
        params["title"] = serde_json::json!(t);
    }
    if opts.iperf3_udp64 && spec.transport == landspeed_core::config::Transport::Udp {
        params["udp_counters_64bit"] = serde_json::json!(1);
    }
    if let Some(d) = &opts.iperf3_extra_data {
        params["extra_data"] = serde_json::json!(d);
    }
    // Made for each attempt, so its time is fresh; a key that cannot encrypt was refused at start.
    if let Some(t) = opts.iperf3_auth.as_ref().and_then(|a| a.token(unix_s()).ok()) {
        params["authtoken"] = serde_json::json!(t);
    }
    ClientSession::new(cookie, &params, timers, Instant::now())
}

/// The results both ways: this end's go out when the server asks (with what it checked of the streams
/// it received, `checked`, when the payload was agreed), the server's come back.
fn exchange_results(
    link: &mut Iperf3Link,
    (local_report, omit_s): (&EndpointReport, f64),
    counted: &[StreamReport],
    checked: Option<&[StreamReport]>,
) -> Result<Results, ClientError> {
    let udp = counted.iter().all(|s| s.tcp.is_none());
    let span = (local_report.elapsed_s, omit_s);
    let mut ours = landspeed_iperf3::from_reports(counted, &local_report.cpu, span, udp);
    if let Some(streams) = checked {
        ours.add_verification(streams);
    }
    link.wire.with(|s| s.results(&ours.to_json()))?;
    match awaiting(link, |a| matches!(a, ClientAction::Done(_)))? {
        ClientAction::Done(theirs) => Ok(*theirs),
        _ => unreachable!("awaiting returns only the action it waits for"),
    }
}

fn open_streams(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    cookie: Cookie,
) -> Result<Vec<DataStream>, ClientError> {
    let greeting = cookie.to_wire();
    (0..spec.total_streams())
        .map(|id| crate::dial::tcp_stream(opts, addr, spec, id, &greeting, None))
        .collect()
}

/// Opens iperf3 UDP streams: a connected socket per stream says `9876` and waits for `6789`.
fn open_udp_streams(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
) -> Result<Vec<landspeed_engine::transport::udp::UdpStream>, ClientError> {
    (0..spec.total_streams())
        .map(|id| {
            let err = |err| ClientError::Stream { id, err };
            let sock = crate::dial::udp_socket(opts, addr, spec, id).map_err(err)?;
            sock.set_read_timeout(Some(opts.control_timeout)).map_err(err)?;
            sock.send(b"9876").map_err(err)?;
            let mut buf = [0u8; 16];
            let n = sock.recv(&mut buf).map_err(err)?;
            if &buf[..n] != b"6789" {
                return Err(ClientError::Iperf3UdpHello { id });
            }
            Ok(landspeed_engine::transport::udp::UdpStream::of_test(
                spec,
                id,
                Role::at_client,
                sock,
            ))
        })
        .collect()
}
