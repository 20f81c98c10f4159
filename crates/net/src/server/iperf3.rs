//! Serving unmodified iperf3 clients on landspeed's port. A connection whose first byte is a cookie
//! character is iperf3: a cookie already registered by a running iperf3 test makes it that test's next
//! data connection, any other cookie opens a new test. The test follows iperf3's state machine
//! (PARAM_EXCHANGE, CREATE_STREAMS, TEST_START, TEST_RUNNING, TEST_END, EXCHANGE_RESULTS,
//! DISPLAY_RESULTS, IPERF_DONE) and runs on landspeed's engine; unlike iperf3, any number of iperf3
//! tests run at once. Bad parameters get SERVER_ERROR with iperf3's error number.

use super::{Shared, TestError, TestLog};
use landspeed_core::config::{Direction, EndCondition, Flow, Test, TestSpec};
use landspeed_core::endpoint::{IntervalSample, Role};
use landspeed_core::protocol::OverLimit;
use landspeed_engine::sockopt;
use landspeed_engine::supervisor::{self, EngineHook, EngineParams, Flags, Wake, Wiring};
use landspeed_engine::transport::tcp::{DataStream, Tcp};
use landspeed_engine::transport::udp::Udp;
use landspeed_iperf3::wire::{errno, frame_json, json_len, server_error, MAX_RESULTS_JSON};
use landspeed_iperf3::{Cookie, Params, Results, State, COOKIE_LEN, MAX_JSON};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Running iperf3 tests waiting for data connections, by cookie.
pub(super) type Registry = Mutex<HashMap<Cookie, mpsc::Sender<TcpStream>>>;

/// A connection that sent an iperf3 cookie: hands it to the running test that owns the cookie (a data
/// connection) or refuses a malformed cookie, returning None; otherwise it opens a new test.
pub(super) fn data_connection(
    mut stream: TcpStream,
    raw: &[u8; COOKIE_LEN],
    peer: SocketAddr,
    shared: &Shared,
) -> Option<TcpStream> {
    let Some(cookie) = Cookie::parse(raw) else {
        let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
        let _ = stream.write_all(&[State::AccessDenied.byte()]);
        shared.emit(super::ServerEvent::Refused {
            peer,
            reason: "iperf3: malformed cookie".into(),
        });
        return None;
    };
    let waiting = shared.iperf3.lock().ok().and_then(|r| r.get(&cookie).cloned());
    match waiting {
        Some(tx) => {
            let _ = tx.send(stream);
            None
        }
        None => Some(stream),
    }
}

/// Serves a new iperf3 test on a connection whose cookie (already read) no running test owns.
pub(super) fn handle(mut stream: TcpStream, raw: [u8; COOKIE_LEN], peer: SocketAddr, shared: &Shared) {
    let refuse = |reason: String| shared.emit(super::ServerEvent::Refused { peer, reason });
    let Some(cookie) = Cookie::parse(&raw) else {
        return refuse("iperf3: malformed cookie".into());
    };
    if shared.admit(peer).is_err() {
        let _ = stream.write_all(&[State::AccessDenied.byte()]);
        return refuse("rate limited (--max-tests-per-minute)".into());
    }
    let Some(_slot) = shared.slot() else {
        let _ = stream.write_all(&[State::AccessDenied.byte()]);
        return refuse("iperf3: busy (--max-tests)".into());
    };
    let mut log = TestLog::new(peer, "iperf3");
    if let Err(e) = serve(stream, cookie, shared, &mut log) {
        log.error = Some(e.to_string());
    }
    shared.tests_done.fetch_add(1, Relaxed);
    shared.emit(super::ServerEvent::Test(log));
}

/// Removes a cookie from the registry however the test ends.
struct Registered<'a>(&'a Registry, Cookie);
impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.lock() {
            r.remove(&self.1);
        }
    }
}

fn io(step: &'static str) -> impl Fn(std::io::Error) -> TestError {
    move |err| TestError::Iperf3Io { step, err }
}

fn read_json(s: &mut TcpStream, cap: usize) -> Result<Vec<u8>, TestError> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(io("no message length"))?;
    let n = json_len(len, cap).map_err(|n| TestError::Iperf3TooLong { len: n, limit: cap })?;
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).map_err(io("truncated message"))?;
    Ok(body)
}

fn send(s: &mut TcpStream, st: State) -> Result<(), TestError> {
    s.write_all(&[st.byte()]).map_err(io("control write"))
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

/// The data streams of a test, by transport.
enum Streams {
    Tcp(Vec<DataStream>),
    Udp(Vec<landspeed_engine::transport::udp::UdpStream>),
}

/// Waits for the test's TCP data connections (each opens with the cookie) and prepares them.
fn collect_tcp(
    ctl: &mut TcpStream,
    cookie: Cookie,
    spec: &TestSpec,
    shared: &Shared,
) -> Result<Vec<DataStream>, TestError> {
    let o = &shared.opts;
    let (tx, rx) = mpsc::channel();
    shared
        .iperf3
        .lock()
        .map_err(|_| TestError::Poisoned)?
        .insert(cookie, tx);
    let registered = Registered(&shared.iperf3, cookie);
    send(ctl, State::CreateStreams)?;
    let n = spec.total_streams() as usize;
    let deadline = Instant::now() + o.handshake_timeout;
    let mut socks = vec![];
    while socks.len() < n {
        let s: TcpStream = super::wait_stream(&rx, deadline, ctl).map_err(|why| {
            let _ = ctl.write_all(&server_error(errno::STREAM_ACCEPT, 0));
            TestError::StreamsMissing {
                arrived: socks.len(),
                expected: n as u32,
                why,
            }
        })?;
        socks.push(s);
    }
    drop(registered);
    // With --bidir the client's sending streams connect first, then its receiving ones.
    let receivers = match spec.direction {
        Direction::Forward => n,
        Direction::Reverse => 0,
        Direction::Bidir => n / 2,
    };
    let send_budgets = budgets(spec, n - receivers);
    let mut streams = vec![];
    for (k, sock) in socks.into_iter().enumerate() {
        let role = if k < receivers {
            Role::Receiver
        } else {
            Role::Sender
        };
        let flow = if role == Role::Receiver {
            Flow::ClientToServer
        } else {
            Flow::ServerToClient
        };
        let _ = sockopt::after_connect(&socket2::SockRef::from(&sock), spec, role == Role::Sender);
        let budget = if role == Role::Sender {
            send_budgets[k - receivers]
        } else {
            None
        };
        streams.push(DataStream {
            file: None,
            id: k as u32,
            flow,
            role,
            socket: sock,
            budget,
        });
    }
    Ok(streams)
}

/// PARAM_EXCHANGE: reads and checks the client's parameters and this server's limits, answering
/// SERVER_ERROR with iperf3's code when they fail; returns them with the spec this server runs.
fn parameters(ctl: &mut TcpStream, shared: &Shared, log: &mut TestLog) -> Result<(Params, Test), TestError> {
    let o = &shared.opts;
    send(ctl, State::ParamExchange)?;
    let body = read_json(ctl, MAX_JSON).inspect_err(|_| {
        let _ = ctl.write_all(&server_error(errno::RECV_PARAMS, 0));
    })?;
    let params = Params::parse(&body).inspect_err(|e| {
        let _ = ctl.write_all(&server_error(e.code, 0));
    })?;
    log.protocol = format!("iperf3 {}", params.client_version.as_deref().unwrap_or("client"));
    let mut key = [0u8; 8];
    let _ = getrandom::fill(&mut key);
    let spec = params.to_test(u64::from_le_bytes(key)).inspect_err(|e| {
        let _ = ctl.write_all(&server_error(e.code, 0));
    })?;
    // The spec's own deadline carries a safety margin; the limit is checked against what was asked.
    let mut asked = spec.spec().clone();
    if let EndCondition::Time(_) = asked.end {
        let t = if params.time_s > 0.0 {
            params.time_s
        } else {
            landspeed_iperf3::params::MAX_TIME_S
        };
        asked.end = EndCondition::Time(Duration::from_secs_f64(t));
    }
    if let Some(why) = o.limits.check(&asked) {
        // iperf3 has no code for a server's limit; the closest: streams, duration, rate, end conditions.
        let code = match why {
            OverLimit::Streams { .. } => errno::NUM_STREAMS,
            OverLimit::Duration { .. } => errno::DURATION,
            OverLimit::UdpRate { .. } => errno::TOTAL_RATE,
            OverLimit::Bytes { .. } => errno::END_CONDITIONS,
        };
        let _ = ctl.write_all(&server_error(code, 0));
        return Err(TestError::OverLimit(why.to_string()));
    }
    Ok((params, spec))
}

fn serve(mut ctl: TcpStream, cookie: Cookie, shared: &Shared, log: &mut TestLog) -> Result<(), TestError> {
    let o = &shared.opts;
    let _ = ctl.set_nodelay(true);
    let _ = ctl.set_write_timeout(Some(o.handshake_timeout));
    let (params, spec) = parameters(&mut ctl, shared, log)?;
    log.streams = spec.streams;
    log.direction = Some(spec.direction);

    let streams = if params.udp {
        Streams::Udp(super::iperf3_udp::collect(
            &mut ctl,
            &spec,
            shared,
            params.dont_fragment,
        )?)
    } else {
        Streams::Tcp(collect_tcp(&mut ctl, cookie, &spec, shared)?)
    };
    send(&mut ctl, State::TestStart)?;
    send(&mut ctl, State::TestRunning)?;

    let (out, failure) = measure(&ctl, &params, &spec, &streams, shared)?;
    log.duration_s = out.elapsed_s;
    for s in &out.streams {
        match s.role {
            Role::Receiver => log.bytes_received += s.bytes.saturating_sub(s.omitted_bytes),
            Role::Sender => log.bytes_sent += s.bytes,
        }
    }
    if let Some(f) = failure {
        return Err(f);
    }
    let _ = ctl.set_read_timeout(Some(o.handshake_timeout));
    exchange_results(&mut ctl, &out, (&params, &spec), log)
}

/// Runs the engine over the test's streams while the client's state bytes are read, until the client
/// ends the test: what was measured, and why the test failed if it did.
fn measure(
    ctl: &TcpStream,
    params: &Params,
    spec: &TestSpec,
    streams: &Streams,
    shared: &Shared,
) -> Result<(supervisor::EngineOutput, Option<TestError>), TestError> {
    let o = &shared.opts;
    let (wtx, wrx) = mpsc::channel::<Wake<Ctl>>();
    let quit = Arc::new(AtomicBool::new(false));
    let reader = spawn_state_reader(ctl, wtx.clone(), quit.clone())?;
    let mut params_e = EngineParams::for_spec(spec, None, None, o.idle_timeout);
    if params.udp {
        params_e.send_time = params_e.send_time.or(Some(udp_count_bound(spec)));
    }
    // --max-rate paces TCP tests (UDP ones over it were refused with the parameters).
    params_e.stream_cap_bps = o.limits.max_rate_bps.map(|r| r / f64::from(spec.total_streams()));
    let flags = Flags::default();
    let mut hook = Hook {
        ended: false,
        failure: None,
        shutdown: &shared.shutdown,
    };
    let wiring = Wiring::new(&flags, (&wtx, &wrx), &mut hook, None);
    let out = match streams {
        Streams::Tcp(v) => supervisor::run(&Tcp(v), &params_e, wiring),
        Streams::Udp(v) => {
            let u = landspeed_engine::transport::udp::UdpParams {
                rate_bps: params
                    .bandwidth_bps
                    .unwrap_or(landspeed_core::config::DEFAULT_UDP_RATE_BPS),
                burst: params.burst.filter(|b| *b > 0).unwrap_or(spec.burst),
                format: landspeed_engine::transport::udp::UdpFormat::Iperf3 {
                    wide: params.udp_counters_64bit,
                },
            };
            let udp = Udp {
                streams: v,
                params: u,
            };
            supervisor::run(&udp, &params_e, wiring)
        }
    };
    // A sending server may finish its byte budget before the client says the test is over.
    let wait_until = Instant::now() + o.idle_timeout;
    while !hook.ended && hook.failure.is_none() {
        match wrx.recv_timeout(wait_until.saturating_duration_since(Instant::now())) {
            Ok(Wake::External(x)) => hook.on_external(x, &flags),
            Ok(Wake::WorkerDone) => {}
            Err(_) => hook.failure = Some(TestError::NeverEnded),
        }
    }
    quit.store(true, Relaxed);
    let _ = reader.join();
    Ok((out, hook.failure))
}

/// The client's results in, this server's out, then the client's goodbye (reads bounded by the
/// control connection's timeout).
fn exchange_results(
    ctl: &mut TcpStream,
    out: &supervisor::EngineOutput,
    (params, spec): (&Params, &TestSpec),
    log: &mut TestLog,
) -> Result<(), TestError> {
    send(ctl, State::ExchangeResults)?;
    let theirs = read_json(ctl, MAX_RESULTS_JSON)?;
    let theirs = Results::parse(&theirs)?;
    log.peer_bytes = Some(theirs.streams.iter().map(|s| s.bytes).sum());
    let ours = results(out, spec, params.get_server_output.then(|| summary_text(log)));
    ctl.write_all(&frame_json(&ours.to_json()))
        .map_err(io("sending results"))?;
    send(ctl, State::DisplayResults)?;
    let mut done = [0u8; 1];
    match ctl.read_exact(&mut done) {
        Ok(()) if State::from_byte(done[0]) == Some(State::IperfDone) => Ok(()),
        Ok(()) => Err(TestError::Iperf3Unexpected(done[0] as i8)),
        // Some clients close without IPERF_DONE; the test itself completed.
        Err(_) => Ok(()),
    }
}

/// UDP tests ended by a byte or block count: iperf3's client ends them once it has *received* the
/// count, so its server keeps sending until TEST_END. The bound only stops a sender whose client went
/// silent without closing: ten times the count's time at the asked rate, plus a minute.
fn udp_count_bound(spec: &TestSpec) -> Duration {
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
    let mut r = landspeed_iperf3::from_reports(&out.streams, &out.cpu, out.elapsed_s, udp);
    if r.sender_has_retransmits == 1 {
        r.congestion_used = spec.congestion.clone();
    }
    r.server_output_text = text;
    r
}

/// What the control connection said during the test.
enum Ctl {
    State(u8),
    Closed(TestError),
}

fn spawn_state_reader(
    ctl: &TcpStream,
    tx: mpsc::Sender<Wake<Ctl>>,
    quit: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, TestError> {
    let mut s = ctl.try_clone().map_err(io("control socket"))?;
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    Ok(std::thread::spawn(move || {
        let mut b = [0u8; 1];
        while !quit.load(Relaxed) {
            match s.read(&mut b) {
                Ok(1) => {
                    let _ = tx.send(Wake::External(Ctl::State(b[0])));
                    if State::from_byte(b[0]) == Some(State::TestEnd) {
                        return;
                    }
                }
                Ok(_) => {
                    let _ = tx.send(Wake::External(Ctl::Closed(TestError::ClientClosed)));
                    return;
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(err) => {
                    let closed = TestError::Iperf3Io {
                        step: "reading states",
                        err,
                    };
                    let _ = tx.send(Wake::External(Ctl::Closed(closed)));
                    return;
                }
            }
        }
    }))
}

struct Hook<'a> {
    ended: bool,
    failure: Option<TestError>,
    shutdown: &'a AtomicBool,
}

impl EngineHook<Ctl> for Hook<'_> {
    fn on_sample(&mut self, _sample: &IntervalSample) {}
    fn on_external(&mut self, x: Ctl, flags: &Flags) {
        match x {
            Ctl::State(b) if State::from_byte(b) == Some(State::TestEnd) => {
                self.ended = true;
                flags.halt.store(true, Relaxed);
            }
            Ctl::State(b) if State::from_byte(b) == Some(State::ClientTerminate) => {
                self.failure.get_or_insert(TestError::ClientTerminated);
                flags.abort.store(true, Relaxed);
            }
            Ctl::State(b) => {
                self.failure.get_or_insert(TestError::Iperf3Unexpected(b as i8));
                flags.abort.store(true, Relaxed);
            }
            Ctl::Closed(m) => {
                self.failure.get_or_insert(m);
                flags.abort.store(true, Relaxed);
            }
        }
    }
    fn on_tick(&mut self, flags: &Flags) {
        if self.shutdown.load(Relaxed) && !flags.abort.load(Relaxed) {
            flags.abort.store(true, Relaxed);
            self.failure.get_or_insert(TestError::Shutdown);
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
