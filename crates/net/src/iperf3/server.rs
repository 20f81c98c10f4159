//! Serving unmodified iperf3 clients on landspeed's port. A connection whose first byte is a cookie
//! character is iperf3: a cookie already registered by a running iperf3 test makes it that test's next
//! data connection, any other cookie opens a new test. The conversation is landspeed-iperf3's
//! `ServerSession` (parameters, limits and refusals with iperf3's numbers, CREATE_STREAMS, TEST_START
//! and TEST_RUNNING, TEST_END, the results both ways, IPERF_DONE), driven through the same `Link` as
//! landspeed's own tests; this driver only routes the data connections, runs the engine and builds
//! the results. Unlike iperf3, any number of iperf3 tests run at once.

use super::arrivals::{control_ip, missing, receivers, streams_error, Iperf3Link};
use crate::control::{Arrival, Event, Input, Link};
use crate::host::{Live, RefusalKind, Registered, Shared, TestError, TestLog};
use crate::streams::DataPaths;
use landspeed_core::assemble::RunContext;
use landspeed_core::config::{EndCondition, Flow, Test, TestSpec};
use landspeed_core::endpoint::{IntervalSample, Role};
use landspeed_engine::sockopt;
use landspeed_engine::supervisor::{self, EngineHook, EngineParams, Flags, Progress, Wake, Wiring};
use landspeed_engine::transport::tcp::{DataStream, Tcp};
use landspeed_engine::transport::udp::Udp;
use landspeed_iperf3::session::{Iperf3Error, Iperf3Timers, ServerAction, ServerPhase, ServerSession};
use landspeed_iperf3::total_rate::TotalRateCheck;
use landspeed_iperf3::wire::{errno, server_error};
use landspeed_iperf3::{Cookie, Params, Results, State, COOKIE_LEN};
use landspeed_proto::Conversation;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A connection that sent an iperf3 cookie: hands it to the running test that owns the cookie (a data
/// connection) or refuses a malformed cookie, returning None; otherwise it opens a new test.
pub(crate) fn data_connection(
    mut stream: TcpStream,
    raw: &[u8; COOKIE_LEN],
    peer: SocketAddr,
    shared: &Shared,
) -> Option<TcpStream> {
    let Some(cookie) = Cookie::parse(raw) else {
        let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
        let _ = stream.write_all(&[State::AccessDenied.byte()]);
        shared.refuse(
            peer,
            crate::host::RefusalKind::Malformed,
            "iperf3: malformed cookie",
        );
        return None;
    };
    let waiting = shared.iperf3.lock().ok().and_then(|r| r.get(&cookie).cloned());
    match waiting {
        // iperf3's cookie travels in clear: a data connection must come from the test's own host.
        Some(w) if w.control != peer.ip().to_canonical() => {
            shared.refuse(
                peer,
                crate::host::RefusalKind::ForeignStream,
                format!(
                    "iperf3: a data connection quoting a running test's cookie from another address \
                     than its control connection ({})",
                    w.control
                ),
            );
            None
        }
        Some(w) => {
            let _ =
                w.tx.send(Wake::External(Input::Arrival(Arrival::Iperf3Tcp(stream))));
            None
        }
        None => Some(stream),
    }
}

/// Serves a new iperf3 test on a connection whose cookie (already read) no running test owns.
pub(crate) fn handle(mut stream: TcpStream, raw: [u8; COOKIE_LEN], peer: SocketAddr, shared: &Shared) {
    let refuse = |kind, reason: &str| shared.refuse(peer, kind, reason);
    let Some(cookie) = Cookie::parse(&raw) else {
        return refuse(RefusalKind::Malformed, "iperf3: malformed cookie");
    };
    let _ = stream.set_write_timeout(Some(shared.opts.handshake_timeout));
    if shared.keyed_only(crate::host::Keyless::Iperf3) {
        // iperf3's words for a failed authentication: its client prints "test authorization failed".
        let _ = stream.write_all(&server_error(errno::AUTH_TEST, 0));
        return refuse(
            RefusalKind::Keyed,
            "iperf3: this server requires a key and does not open iperf3's protocol (serve --open iperf3)",
        );
    }
    // Until its parameters are in and valid, the connection holds a place among those still proving
    // themselves (the fair pool of landspeed's control connections); only then is it counted
    // against the per-minute rate and given a test slot (`admit`).
    let preauth = match shared.preauth(peer, crate::host::tcp_closer(&stream)) {
        Ok(p) => p,
        Err(why) => {
            let _ = stream.write_all(&[State::AccessDenied.byte()]);
            return refuse(
                RefusalKind::Busy,
                &format!("iperf3: busy: too many connections still in their handshake ({why})"),
            );
        }
    };
    let evicted = preauth.evicted();
    let mut log = TestLog::new(peer, "iperf3");
    match serve(stream, (cookie, preauth), shared, &mut log) {
        Ok(()) => {}
        Err(TestError::NotAdmitted { kind, reason }) => return refuse(kind, &reason),
        Err(_) if evicted.load(Relaxed) => return refuse(
            RefusalKind::Evicted,
            "iperf3: closed inside its handshake: its place went to a client from an address holding fewer",
        ),
        // A client that did not pass iperf3's authentication leaves a refusal, not a test.
        Err(TestError::Iperf3(landspeed_iperf3::Iperf3Error::Unauthorized(why))) => {
            return refuse(
                RefusalKind::Authentication,
                &format!("iperf3: authentication failed: {why}"),
            );
        }
        Err(e) => log.error = Some(e.to_string()),
    }
    shared.tests_done.fetch_add(1, Relaxed);
    shared.emit(crate::host::ServerEvent::Test(log));
}

/// The session's timers from the server's options: each handshake step and the results within the
/// handshake timeout; a client whose data this end has finished sending ends the test within the idle
/// timeout.
fn timers(o: &crate::host::ServerOptions) -> Iperf3Timers {
    Iperf3Timers {
        handshake: o.handshake_timeout,
        results: o.handshake_timeout,
        idle: o.idle_timeout,
    }
}

fn serve(
    ctl: TcpStream,
    (cookie, preauth): (Cookie, crate::host::Place),
    shared: &Shared,
    log: &mut TestLog,
) -> Result<(), TestError> {
    let o = &shared.opts;
    let _ = ctl.set_nodelay(true);
    let addresses = (ctl.local_addr().ok(), ctl.peer_addr().ok());
    let key = getrandom::u64().map_err(|err| TestError::Random {
        what: "a payload key",
        err,
    })?;
    let session = ServerSession::new(o.limits.clone(), key, timers(o), Instant::now())
        .with_total_rate(o.iperf3_total_rate.map(|l| l.bps));
    let mut link = Link::new(ctl, session, o.handshake_timeout)?;
    link.listen()?;
    let (params, test) = parameters(&mut link)?;
    log.protocol = format!("iperf3 {}", params.client_version.as_deref().unwrap_or("client"));
    let _admitted = admit(&mut link, (&params, &test), shared, log)?;
    drop(preauth);
    log.streams = test.streams;
    log.direction = Some(test.direction);
    let streams = if params.udp {
        DataPaths::Udp(super::udp::collect(&mut link, &test, shared)?)
    } else {
        DataPaths::Tcp(collect_tcp(&mut link, cookie, &test, shared)?)
    };
    let started = std::time::SystemTime::now();
    let live = o.live.then(|| Live {
        spec: test.spec().clone(),
        context: crate::host::server_context(addresses, started, 1, "iperf3"),
        client_ports: client_ports(&streams),
        samples: vec![],
        frames: false,
        made: Default::default(),
    });
    if let Some(l) = &live {
        shared.emit(l.so_far());
    }
    let (mut out, failure) = measure(&mut link, &params, &test, &streams, shared, live)?;
    // iperf3's client counts from the end of the warm-up in both directions; so do the log and the
    // results this end sends.
    out.streams = landspeed_iperf3::iperf3_counts(&out.streams, &out.samples);
    log.duration_s = out.elapsed_s;
    for s in &out.streams {
        let bytes = s.bytes.saturating_sub(s.omitted_bytes);
        match s.role {
            Role::Receiver => {
                log.bytes_received += bytes;
                log.bytes_verified += s.bytes_verified;
                log.corrupt_blocks += s.corrupt_blocks;
            }
            Role::Sender => log.bytes_sent += bytes,
        }
    }
    if let Some(f) = failure {
        return Err(f);
    }
    let theirs = exchange_results(&mut link, &out, (&params, &test), log)?;
    if let Some(t) = theirs {
        log.result = Some(Box::new(seen_here(&out, &t, &test, addresses, started)));
    }
    log.iperf3_labels = landspeed_core::server_log::Iperf3Labels {
        title: params.title.clone(),
        extra_data: params.extra_data.clone(),
    };
    Ok(())
}

/// The client's port of each data connection, by stream number.
fn client_ports(streams: &DataPaths) -> Vec<Option<u16>> {
    match streams {
        DataPaths::Tcp(v) => v
            .iter()
            .map(|s| s.socket.peer_addr().ok().map(|a| a.port()))
            .collect(),
        DataPaths::Udp(v) => v
            .iter()
            .map(|s| s.socket.peer_addr().ok().map(|a| a.port()))
            .collect(),
        DataPaths::Quic(_) => vec![],
    }
}

/// The test as this server saw it: its own report and samples, and the client's figures from the
/// results exchange (the client's samples are not sent in iperf3's protocol).
fn seen_here(
    out: &supervisor::EngineOutput,
    theirs: &Results,
    spec: &TestSpec,
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
    started: std::time::SystemTime,
) -> landspeed_core::result::RunResult {
    let warnings = super::peer::payload_warning(spec.verify, true);
    let here = out.report(None, warnings);
    let client = super::peer::remote_report(
        theirs,
        &here,
        &here.streams,
        spec.omit_s.as_secs_f64(),
        if spec.verify {
            "landspeed client (iperf3 protocol)"
        } else {
            "iperf3 client"
        },
    );
    let context = RunContext {
        foreign_peer: !spec.verify,
        ..crate::host::server_context(addresses, started, here.threads, "iperf3")
    };
    landspeed_core::assemble::assemble(&landspeed_core::assemble::Inputs {
        spec,
        context,
        client: &client,
        server: &here,
        client_samples: &[],
        server_samples: &out.samples,
    })
}

/// PARAM_EXCHANGE up to the parameters the session accepted (it refuses the others to the client
/// with iperf3's number).
fn parameters(link: &mut Iperf3Link) -> Result<(Params, Test), TestError> {
    link.run(|_, ev| match ev {
        Event::Action(ServerAction::Accepted { params, test }) => Ok(Some((*params, *test))),
        _ => Ok(None),
    })
}

/// The total a sending server moves for `-n`/`-k`, split over its sending streams.
fn budgets(spec: &TestSpec, senders: usize) -> Vec<Option<u64>> {
    let total = match spec.end {
        EndCondition::Bytes(b) => Some(b),
        EndCondition::Blocks(k) => Some(k.saturating_mul(spec.length_bytes)),
        EndCondition::Time(_) => None,
    };
    (0..senders)
        .map(|i| {
            total.map(|t| {
                let n = senders as u64;
                t / n + u64::from((i as u64) < t % n)
            })
        })
        .collect()
}

/// After the parameters: iperf3's authentication when the server has it, then the test's memory
/// against the server's budget; either refusal is told the client in iperf3's words.
fn admit(
    link: &mut Iperf3Link,
    (params, test): (&Params, &Test),
    shared: &Shared,
    log: &mut TestLog,
) -> Result<(crate::host::Slot, Option<crate::host::MemoryHold>), TestError> {
    let refused = |link: &mut Iperf3Link, e| {
        let _ = link.wire.flush();
        Err(TestError::Iperf3(e))
    };
    if let Some(a) = &shared.opts.iperf3_auth {
        match authenticate(a, params.authtoken.as_deref()) {
            // iperf3's authentication proves the client to the server only: the log says who, not
            // "both ends".
            Ok(user) => log.protocol = format!("{} (iperf3 user {user})", log.protocol),
            Err(why) => {
                let e = link.wire.conn.unauthorized(why.to_string());
                return refused(link, e);
            }
        }
    }
    let peer = link
        .stream()
        .peer_addr()
        .map_err(|e| TestError::Control(crate::control::ControlError::Io(e)))?;
    // Not admitted: iperf3's client reads ACCESS_DENIED ("the server is busy running a test"), the
    // log a refusal.
    let not_admitted = |link: &mut Iperf3Link, kind, reason: &str| {
        let _ = link.wire.conn.busy();
        let _ = link.wire.flush();
        Err(TestError::NotAdmitted {
            kind,
            reason: format!("iperf3: {reason}"),
        })
    };
    if shared.admit(peer).is_err() {
        return not_admitted(
            link,
            RefusalKind::RateLimited,
            "rate limited (too many tests per minute from this address)",
        );
    }
    let Ok(slot) = shared.slot(peer) else {
        return not_admitted(link, RefusalKind::Busy, "busy (every test slot in use)");
    };
    match shared.hold_memory(test) {
        Ok(m) => Ok((slot, m)),
        Err(_) => {
            let e = link.wire.conn.busy();
            refused(link, e)
        }
    }
}

/// Why an iperf3 client's credentials were not accepted.
#[derive(Debug, thiserror::Error)]
enum Unauthorized {
    /// It sent none.
    #[error("the client sent no credentials (iperf3 --username)")]
    NoCredentials,
    /// The server's users file could not be read.
    #[error("cannot read the authorized users file {}: {err}", path.display())]
    UsersFile {
        path: std::path::PathBuf,
        err: std::io::Error,
    },
    /// The token did not verify (iperf3's own checks).
    #[error(transparent)]
    Denied(#[from] landspeed_iperf3::auth::AuthError),
}

/// Checks an iperf3 client's token with iperf3's authentication: its user's name, or why not (for the
/// log). The users file is read for each test, as iperf3's server reads it.
fn authenticate(a: &landspeed_iperf3::auth::ServerAuth, token: Option<&str>) -> Result<String, Unauthorized> {
    let token = token.ok_or(Unauthorized::NoCredentials)?;
    let users = std::fs::read_to_string(&a.users_file).map_err(|err| Unauthorized::UsersFile {
        path: a.users_file.clone(),
        err,
    })?;
    let now_s = crate::host::unix_ns() as i64 / 1_000_000_000;
    Ok(a.verify(token, now_s, &users)?)
}

/// Registers the cookie, says CREATE_STREAMS and takes the test's TCP data connections in the order
/// they come (each opened with the cookie) until the session says the test runs.
fn collect_tcp(
    link: &mut Iperf3Link,
    cookie: Cookie,
    spec: &TestSpec,
    shared: &Shared,
) -> Result<Vec<DataStream>, TestError> {
    let waiter = crate::host::Waiter::keyless(link.tx.clone(), control_ip(link)?);
    let registered = Registered::new(&shared.iperf3, cookie, waiter)?;
    link.wire.with(|s| s.create_streams(Instant::now()))?;
    let mut socks = vec![];
    let n = spec.total_streams();
    link.run(|link, ev| match ev {
        Event::Arrival(Arrival::Iperf3Tcp(s)) => {
            socks.push(s);
            link.wire.with(|s| s.on_stream(Instant::now()))?;
            Ok(None)
        }
        Event::Action(ServerAction::Run) => Ok(Some(())),
        Event::Tick if shared.shutdown.load(Relaxed) => {
            link.wire.conn.streams_failed();
            Err(missing(socks.len(), n, crate::host::MissingWhy::Shutdown))
        }
        _ => Ok(None),
    })
    .map_err(|e| streams_error(e, socks.len(), n))?;
    drop(registered);
    let receivers = receivers(spec, socks.len());
    let send_budgets = budgets(spec, socks.len() - receivers);
    Ok(socks
        .into_iter()
        .enumerate()
        .map(|(k, socket)| {
            let (flow, budget) = if k < receivers {
                (Flow::ClientToServer, None)
            } else {
                (Flow::ServerToClient, send_budgets[k - receivers])
            };
            let role = Role::at_server(flow);
            let _ = sockopt::after_connect(&socket2::SockRef::from(&socket), spec, role == Role::Sender);
            DataStream {
                tls: None,
                file: None,
                id: k as u32,
                flow,
                role,
                socket,
                budget,
            }
        })
        .collect())
}

/// Runs the engine over the test's streams while the session follows the client's states, until the
/// client ends the test: what was measured, and why the test failed if it did.
fn measure(
    link: &mut Iperf3Link,
    params: &Params,
    spec: &TestSpec,
    streams: &DataPaths,
    shared: &Shared,
    live: Option<Live>,
) -> Result<(supervisor::EngineOutput, Option<TestError>), TestError> {
    let o = &shared.opts;
    let mut params_e = EngineParams::for_spec(spec, None, None, o.idle_timeout);
    // iperf3's data connections carry no stream number: the same payload on every stream.
    params_e.pattern = landspeed_core::payload::Pattern::for_unnumbered_streams(spec.payload_key);
    if params.udp {
        params_e.send_time = params_e.send_time.or(Some(udp_count_bound(spec)));
    }
    // --max-rate paces TCP tests (UDP ones over it were refused with the parameters).
    let limit = o.limits.max_rate_bps.map(|r| r / f64::from(spec.total_streams()));
    params_e.stream_cap_bps = landspeed_core::units::lower(params_e.stream_cap_bps, limit);
    let flags = Flags::default();
    let mut hook = Hook {
        link_wire: &mut link.wire,
        ended: false,
        failure: None,
        shutdown: &shared.shutdown,
        live: live.map(|l| (l, shared)),
        total_rate: o
            .iperf3_total_rate
            .map(|l| TotalRateCheck::new(l, spec.interval_s.as_secs_f64())),
        over_rate: false,
        running: landspeed_proto::Running::of(&o.limits),
        started: Instant::now(),
    };
    let wiring = Wiring::new(&flags, (&link.tx, &link.rx), &mut hook, None);
    let out = match streams {
        DataPaths::Tcp(v) => supervisor::run(&Tcp(v), &params_e, wiring),
        DataPaths::Udp(v) => {
            let udp = Udp {
                streams: v,
                params: udp_params(params, spec),
            };
            supervisor::run(&udp, &params_e, wiring)
        }
        DataPaths::Quic(_) => unreachable!("iperf3 has no QUIC streams"),
    };
    let (ended, failure) = (hook.ended, hook.failure);
    if ended || failure.is_some() {
        return Ok((out, failure));
    }
    // A sending server may finish its byte budget before the client says the test is over.
    link.wire.conn.local_done(Instant::now());
    let ending = link.run(|_, ev| match ev {
        Event::Action(ServerAction::End) => Ok(Some(())),
        _ => Ok(None),
    });
    let failure = match ending {
        Ok(()) => None,
        Err(TestError::Iperf3(Iperf3Error::Wait(landspeed_proto::WaitFailed::Timeout { .. }))) => {
            Some(TestError::NeverEnded)
        }
        Err(e) => Some(e),
    };
    Ok((out, failure))
}

fn udp_params(params: &Params, spec: &TestSpec) -> landspeed_engine::transport::udp::UdpParams {
    landspeed_engine::transport::udp::UdpParams {
        rate_bps: params
            .bandwidth_bps
            .unwrap_or(landspeed_core::config::DEFAULT_UDP_RATE_BPS),
        burst: params.burst.filter(|b| *b > 0).unwrap_or(spec.burst),
        format: landspeed_engine::transport::udp::UdpFormat::Iperf3 {
            wide: params.udp_counters_64bit,
        },
        refused_ends_after: None,
    }
}

/// This end's results out on EXCHANGE_RESULTS, the client's in, then its goodbye: the session sends
/// and awaits each in turn, and a client that closes after the results has completed the test.
fn exchange_results(
    link: &mut Iperf3Link,
    out: &supervisor::EngineOutput,
    (params, spec): (&Params, &TestSpec),
    log: &mut TestLog,
) -> Result<Option<Box<Results>>, TestError> {
    let ours = results(out, spec, params.get_server_output.then(|| summary_text(log)));
    link.wire.with(|s| s.exchange(&ours.to_json(), Instant::now()))?;
    let mut theirs: Option<Box<Results>> = None;
    let done = link.run(|_, ev| match ev {
        Event::Action(ServerAction::PeerResults(r)) => {
            theirs = Some(r);
            Ok(None)
        }
        Event::Action(ServerAction::Done) => Ok(Some(())),
        _ => Ok(None),
    });
    if let Some(t) = &theirs {
        log.peer_bytes = Some(t.streams.iter().map(|s| s.bytes).sum());
    }
    match done {
        Err(_) if link.wire.conn.phase() == ServerPhase::Finished => Ok(theirs),
        Err(e) => Err(e),
        Ok(()) => Ok(theirs),
    }
}

/// UDP tests ended by a byte or block count: iperf3's client ends them once it has *received* the
/// count, so its server keeps sending until TEST_END. The bound only stops a sender whose client went
/// silent without closing: ten times the count's time at the asked rate, plus a minute.
pub(crate) fn udp_count_bound(spec: &TestSpec) -> Duration {
    let total_bytes = match spec.end {
        EndCondition::Bytes(b) => b,
        EndCondition::Blocks(k) => k.saturating_mul(spec.length_bytes),
        EndCondition::Time(t) => return t,
    } as f64;
    let rate = spec
        .rate_bps
        .unwrap_or(landspeed_core::config::DEFAULT_UDP_RATE_BPS)
        .max(1.0);
    let t = total_bytes * 8.0 / rate * 10.0 + 60.0;
    Duration::from_secs_f64(t.min(landspeed_core::config::MAX_TIME.as_secs_f64()))
}

fn summary_text(log: &TestLog) -> String {
    let bytes = log.bytes_received.max(log.bytes_sent);
    format!(
        "landspeed {} server: {} stream(s), received {} bytes, sent {} bytes in {:.3} s ({:.1} Mbit/s)\n",
        landspeed_core::SOFTWARE_VERSION,
        log.streams,
        log.bytes_received,
        log.bytes_sent,
        log.duration_s,
        if log.duration_s > 0.0 {
            bytes as f64 * 8.0 / log.duration_s / 1e6
        } else {
            0.0
        }
    )
}

/// This server's results message.
fn results(out: &supervisor::EngineOutput, spec: &TestSpec, text: Option<String>) -> Results {
    let udp = spec.transport == landspeed_core::config::Transport::Udp;
    let span = (out.elapsed_s, spec.omit_s.as_secs_f64());
    let mut r = landspeed_iperf3::from_reports(&out.streams, &out.cpu, span, udp);
    if spec.verify {
        r.add_verification(&out.streams);
    }
    if r.sender_has_retransmits == 1 {
        r.congestion_used = spec.congestion.clone();
    }
    r.server_output_text = text;
    r
}

/// Follows the client's states while the engine runs: TEST_END halts the engine, anything else the
/// session refuses (CLIENT_TERMINATE, an unknown state, the client leaving) or the server's shutdown
/// aborts it.
struct Hook<'a> {
    link_wire: &'a mut crate::control::Wire<ServerSession>,
    ended: bool,
    failure: Option<TestError>,
    shutdown: &'a AtomicBool,
    /// A live view's test so far, and where its progress goes.
    live: Option<(Live, &'a Shared)>,
    /// iperf3's `--server-bitrate-limit`, checked after every interval; whether a window was over it.
    total_rate: Option<TotalRateCheck>,
    over_rate: bool,
    /// The server's limits on the running test (`--max-duration`, `--max-bytes`), from `started`.
    running: landspeed_proto::Running,
    started: Instant,
}

impl EngineHook<Input> for Hook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        // The sample the engine closes as it stops for the rate limit is not shown (iperf3's server
        // prints nothing after the interval that went over).
        if self.over_rate {
            return;
        }
        if let Some(check) = &mut self.total_rate {
            let total = sample.streams.iter().map(|s| s.bytes).sum();
            self.over_rate = check.interval(total).is_some();
        }
        if let Some((live, shared)) = &mut self.live {
            live.samples.push(sample.clone());
            shared.emit(live.so_far());
        }
    }
    fn on_external(&mut self, x: Input, flags: &Flags) {
        if let Err(e) = self.link_wire.feed(x, Instant::now()) {
            self.failure.get_or_insert(e.into());
            flags.abort.store(true, Relaxed);
        }
        while let Some(a) = self.link_wire.conn.poll_action() {
            if a == ServerAction::End {
                self.ended = true;
                flags.halt.store(true, Relaxed);
            }
        }
    }
    fn on_tick(&mut self, flags: &Flags) {
        if self.over_rate && self.failure.is_none() && !self.ended {
            // The client is told (SERVER_ERROR, TOTAL_RATE) and the test ends, as iperf3's server ends it.
            let told = self.link_wire.with(|s| Ok::<_, Iperf3Error>(s.over_total_rate()));
            self.failure = Some(told.map_or_else(TestError::from, TestError::from));
            flags.abort.store(true, Relaxed);
        }
        if self.shutdown.load(Relaxed) && !flags.abort.load(Relaxed) {
            flags.abort.store(true, Relaxed);
            self.failure.get_or_insert(TestError::Shutdown);
        }
    }
    /// Cuts the test at `--max-duration` (and its grace) or `--max-bytes`, whatever its own end
    /// (iperf3's `-n` and `-k` included): the client reads iperf3's own error for it.
    fn on_progress(&mut self, p: Progress, flags: &Flags) {
        if self.failure.is_some() || self.ended || flags.abort.load(Relaxed) {
            return;
        }
        let elapsed = self.started.elapsed();
        if self.running.over_length(elapsed) {
            flags.uncap.store(true, Relaxed);
        }
        if let Err(cut) = self.running.check(p.received + p.sent, elapsed) {
            let told = self.link_wire.with(|s| Ok::<_, Iperf3Error>(s.cut(cut)));
            self.failure = Some(told.map_or_else(TestError::from, TestError::from));
            flags.abort.store(true, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_budgets_add_up() {
        let spec = TestSpec {
            end: EndCondition::Bytes(10),
            ..TestSpec::default()
        };
        assert_eq!(budgets(&spec, 3), vec![Some(4), Some(3), Some(3)]);
        let spec = TestSpec {
            end: EndCondition::Blocks(3),
            length_bytes: 100,
            ..TestSpec::default()
        };
        assert_eq!(budgets(&spec, 2), vec![Some(150), Some(150)]);
    }
}
