//! `landspeed run --iperf3`: drives an unmodified `iperf3 -s` with iperf3's own protocol (cookie,
//! parameters, CREATE_STREAMS, TEST_START/RUNNING, TEST_END, results exchange), moves the data with
//! landspeed's engine, and turns both ends' figures (the server's arrive in its results message) into the
//! same `RunResult` as a landspeed test, marked with the protocol. iperf3's payload is not landspeed's
//! pattern, so nothing is verified, and the result says so.

use super::{connect, measure, resolve, ClientError, ClientEvent, ClientOptions, DataPaths, LiveIntervals};
use landspeed_core::assemble::{assemble, Inputs};
use landspeed_core::config::{EndCondition, RxMode, Test, TestSpec, Transport};
use landspeed_core::endpoint::{
    CpuTimes, EndpointReport, HostInfo, IntervalSample, Role, StreamReport, TcpStats,
};
use landspeed_core::result::RunResult;
use landspeed_engine::supervisor::{EngineHook, Flags, Progress, Wake};
use landspeed_engine::transport::tcp::DataStream;
use landspeed_engine::transport::udp::UdpFormat;
use landspeed_iperf3::wire::{frame_json, json_len, MAX_RESULTS_JSON};
use landspeed_iperf3::{Cookie, Params, Results, State};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

/// An I/O failure on the iperf3 control connection at `step`.
fn io_at(step: &'static str) -> impl Fn(std::io::Error) -> ClientError {
    move |err| ClientError::Iperf3Io { step, err }
}

/// Reads one state byte; a SERVER_ERROR is turned into an error with iperf3's numbers.
fn read_state(c: &mut TcpStream) -> Result<State, ClientError> {
    let mut b = [0u8; 1];
    c.read_exact(&mut b).map_err(io_at("reading a state"))?;
    match State::from_byte(b[0]) {
        Some(State::ServerError) => {
            let mut codes = [0u8; 8];
            let _ = c.read_exact(&mut codes);
            let code = i32::from_be_bytes([codes[0], codes[1], codes[2], codes[3]]);
            let os = i32::from_be_bytes([codes[4], codes[5], codes[6], codes[7]]);
            Err(ClientError::Iperf3Refused { code, errno: os })
        }
        Some(State::AccessDenied) => Err(ClientError::Busy {
            reason: "the iperf3 server is running another test (ACCESS_DENIED)".into(),
        }),
        Some(s) => Ok(s),
        None => Err(ClientError::Iperf3Unexpected {
            got: format!("unknown state {}", b[0] as i8),
            expected: "a state",
        }),
    }
}

fn expect(c: &mut TcpStream, want: State, expected: &'static str) -> Result<(), ClientError> {
    match read_state(c)? {
        s if s == want => Ok(()),
        s => Err(ClientError::Iperf3Unexpected {
            got: format!("{s:?}"),
            expected,
        }),
    }
}

struct Hook<'a> {
    ctl: &'a TcpStream,
    deadline: Option<Instant>,
    /// The count of a `-n`/`-k` test: iperf3's client ends it once it has sent *or* received this many
    /// bytes, so senders that finished their budget end it even while data still arrives.
    receive_target: Option<u64>,
    /// This client has receiving streams (reverse or bidirectional).
    receives: bool,
    /// This client has sending streams (forward or bidirectional).
    sends: bool,
    ended: bool,
    interrupt: &'a AtomicBool,
    on_event: &'a mut dyn FnMut(ClientEvent),
    live: LiveIntervals,
    spec: &'a TestSpec,
    failure: Option<ClientError>,
}

impl<'a> Hook<'a> {
    /// The hook of a test starting now: it ends the test by time, by count or by Ctrl-C.
    fn new(
        ctl: &'a TcpStream,
        spec: &'a TestSpec,
        data: &DataPaths,
        interrupt: &'a AtomicBool,
        on_event: &'a mut dyn FnMut(ClientEvent),
    ) -> Self {
        Hook {
            ctl,
            deadline: spec.send_time().map(|d| Instant::now() + d),
            receive_target: match spec.end {
                EndCondition::Bytes(b) => Some(b),
                EndCondition::Blocks(k) => Some(k.saturating_mul(spec.length_bytes)),
                EndCondition::Time(_) => None,
            },
            sends: data.has_role(Role::Sender),
            receives: data.has_role(Role::Receiver),
            ended: false,
            interrupt,
            on_event,
            live: LiveIntervals::default(),
            spec,
            failure: None,
        }
    }

    fn end(&mut self, flags: &Flags) {
        if !self.ended {
            self.ended = true;
            if let Err(err) = (&mut &*self.ctl).write_all(&[State::TestEnd.byte()]) {
                let failed = ClientError::Iperf3Io {
                    step: "sending TEST_END",
                    err,
                };
                self.failure.get_or_insert(failed);
            }
            flags.halt.store(true, Relaxed);
        }
    }
}

impl EngineHook<()> for Hook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        let spec = self.spec;
        for flow in spec.flows() {
            let iv = self.live.convert(sample, |id| spec.flow_of(id) == flow);
            if !iv.streams.is_empty() {
                (self.on_event)(ClientEvent::Interval { flow, interval: iv });
            }
        }
    }
    fn on_external(&mut self, _x: (), _flags: &Flags) {}
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
    let spec = &iperf3_spec(opts)?;
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let addr = resolve(opts)?;
    let mut r = [0u8; 36];
    getrandom::fill(&mut r).map_err(|err| ClientError::Random {
        what: "a cookie",
        err,
    })?;
    let cookie = Cookie::from_random(r);
    let (mut ctl, local) = greet(opts, addr, &cookie, after_detection)?;
    on_event(ClientEvent::Connected { local, remote: addr });
    let version = format!("landspeed {}", landspeed_core::SOFTWARE_VERSION);
    ctl.write_all(&frame_json(&Params::message_for(spec, &version)))
        .map_err(io_at("sending the parameters"))?;
    expect(&mut ctl, State::CreateStreams, "CREATE_STREAMS")?;
    let data = if spec.transport == Transport::Udp {
        DataPaths::Udp(open_udp_streams(opts, addr, spec)?)
    } else {
        DataPaths::Tcp(open_streams(opts, addr, spec, cookie)?)
    };
    expect(&mut ctl, State::TestStart, "TEST_START")?;
    // The server may send TEST_RUNNING right away or after its own start-up.
    expect(&mut ctl, State::TestRunning, "TEST_RUNNING")?;
    let mut warnings =
        vec!["iperf3 protocol: the payload is not landspeed's pattern, so nothing was verified".to_string()];
    warnings.extend(data.window_warning(spec.window_bytes));
    on_event(ClientEvent::Started {
        streams: spec.total_streams(),
        warnings: warnings.clone(),
    });
    let (tx, rx) = mpsc::channel::<Wake<()>>();
    let mut hook = Hook::new(&ctl, spec, &data, interrupt, on_event);
    let format = UdpFormat::Iperf3 { wide: false };
    let out = measure(opts, spec, (&data, format), local, (&tx, &rx), &mut hook);
    // A test that ended by itself (every stream done) still owes the server its TEST_END.
    hook.end(&Flags::default());
    if let Some(f) = hook.failure.take() {
        return Err(f);
    }
    drop(hook);
    let local_report = out.report(opts.cpus.clone(), warnings);
    let theirs = exchange_results(&mut ctl, opts, &local_report)?;
    let sent_in_warmup = warmup_bytes(&out.samples);
    let server_report = remote_report(&theirs, &local_report, spec.omit_s.as_secs_f64(), &sent_in_warmup);
    let interrupted = interrupt.load(Relaxed);
    let context = super::run_context(
        opts,
        local,
        addr,
        &local_report,
        started_unix_s,
        interrupted,
        "iperf3",
    );
    Ok(assemble(&Inputs {
        spec,
        context,
        client: &local_report,
        server: &server_report,
        client_samples: &out.samples,
        server_samples: &[],
    }))
}

/// The test as an iperf3 server runs it: its payload is not ours, so nothing is verified, and TCP
/// receivers drop what arrives without copying it.
fn iperf3_spec(opts: &ClientOptions) -> Result<Test, ClientError> {
    Ok(opts.spec.changed(|s| {
        s.verify = false;
        if s.transport == Transport::Tcp {
            s.rx = RxMode::Discard;
        }
    })?)
}

/// Connects and sends the cookie, until the server answers PARAM_EXCHANGE. An iperf3 server that has
/// just failed a test (for instance landspeed's own greeting, when it found out what the server is)
/// resets connections while it restarts its listener: with `retry`, that is tried again.
fn greet(
    opts: &ClientOptions,
    addr: SocketAddr,
    cookie: &Cookie,
    retry: bool,
) -> Result<(TcpStream, SocketAddr), ClientError> {
    let mut attempt = 0;
    loop {
        let tried = (|| {
            let mut ctl = connect(opts, addr, None)?;
            let local = ctl
                .local_addr()
                .map_err(|err| ClientError::Connect { addr, err })?;
            let _ = ctl.set_nodelay(true);
            let _ = ctl.set_read_timeout(Some(opts.control_timeout));
            let _ = ctl.set_write_timeout(Some(opts.control_timeout));
            ctl.write_all(&cookie.to_wire())
                .map_err(io_at("sending the cookie"))?;
            expect(&mut ctl, State::ParamExchange, "PARAM_EXCHANGE")?;
            Ok::<_, ClientError>((ctl, local))
        })();
        match tried {
            Ok(x) => return Ok(x),
            // A server that just finished a test may still say "busy" for a moment.
            Err(e) if attempt < 5 && e.is_transient() => {}
            // A listener restarting resets connections or answers out of turn for a moment.
            Err(
                ClientError::Connect { .. }
                | ClientError::Iperf3Io { .. }
                | ClientError::Iperf3Unexpected { .. }
                | ClientError::Iperf3Refused { .. },
            ) if attempt < 5 && retry => {}
            Err(e) => return Err(e),
        }
        attempt += 1;
        std::thread::sleep(Duration::from_millis(50 << attempt));
    }
}

/// EXCHANGE_RESULTS: sends this end's results and reads the server's, up to DISPLAY_RESULTS.
fn exchange_results(
    ctl: &mut TcpStream,
    opts: &ClientOptions,
    local_report: &EndpointReport,
) -> Result<Results, ClientError> {
    let _ = ctl.set_read_timeout(Some(opts.control_timeout + opts.idle_timeout));
    expect(ctl, State::ExchangeResults, "EXCHANGE_RESULTS")?;
    let ours = our_results(local_report);
    ctl.write_all(&frame_json(&ours.to_json()))
        .map_err(io_at("sending results"))?;
    let mut len = [0u8; 4];
    ctl.read_exact(&mut len).map_err(io_at("reading results"))?;
    let n = json_len(len, MAX_RESULTS_JSON)
        .map_err(|n| ClientError::Iperf3Results(format!("{n} bytes refused")))?;
    let mut body = vec![0u8; n];
    ctl.read_exact(&mut body).map_err(io_at("reading results"))?;
    let theirs = Results::parse(&body).map_err(|e| ClientError::Iperf3Results(e.to_string()))?;
    expect(ctl, State::DisplayResults, "DISPLAY_RESULTS")?;
    let _ = ctl.write_all(&[State::IperfDone.byte()]);
    Ok(theirs)
}

fn open_streams(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    cookie: Cookie,
) -> Result<Vec<DataStream>, ClientError> {
    let greeting = cookie.to_wire();
    (0..spec.total_streams())
        .map(|id| super::tcp_stream(opts, addr, spec, id, &greeting))
        .collect()
}

/// This client's results message, as iperf3's server expects it.
fn our_results(r: &EndpointReport) -> Results {
    let udp = r.streams.iter().all(|s| s.tcp.is_none());
    landspeed_iperf3::from_reports(&r.streams, &r.cpu, r.elapsed_s, udp)
}

/// The server's end as a report, built from its results message: per stream its byte count and its
/// time span, its retransmits when it sent, and its CPU use.
/// Per stream, the bytes counted by the end of the warm-up (the last omitted sample).
fn warmup_bytes(samples: &[IntervalSample]) -> std::collections::HashMap<u32, u64> {
    samples
        .iter()
        .rev()
        .find(|s| s.omitted)
        .map(|s| s.streams.iter().map(|x| (x.id, x.bytes)).collect())
        .unwrap_or_default()
}

/// iperf3 resets its counters when the warm-up (`-O`) ends, so its figures cover only the measured
/// part, with times counted from there: they are put back on landspeed's time line, and a receiving
/// server is credited with the warm-up bytes this client sent (counted at its own warm-up boundary),
/// which the result then leaves out again, as for a landspeed server.
fn remote_report(
    theirs: &Results,
    local: &EndpointReport,
    omit_s: f64,
    sent_in_warmup: &std::collections::HashMap<u32, u64>,
) -> EndpointReport {
    let wall = theirs.streams.iter().map(|s| s.end_time_s).fold(0.0, f64::max) + omit_s;
    let streams = local
        .streams
        .iter()
        .map(|l| {
            let t = theirs
                .streams
                .iter()
                .find(|s| s.id == landspeed_iperf3::stream_id(l.id));
            let warm = if l.role == Role::Sender && omit_s > 0.0 {
                sent_in_warmup.get(&l.id).copied().unwrap_or(0)
            } else {
                0
            };
            remote_stream(l, t, (omit_s, warm), &theirs.congestion_used)
        })
        .collect();
    EndpointReport {
        file: None,
        software: "iperf3 server".into(),
        streams,
        cpu: CpuTimes {
            wall_s: wall,
            process_user_s: theirs.cpu_util_user / 100.0 * wall,
            process_system_s: theirs.cpu_util_system / 100.0 * wall,
            ..CpuTimes::default()
        },
        host: HostInfo::default(),
        interface: None,
        elapsed_s: wall,
        threads: 1,
        cpus_pinned: None,
        warnings: vec![],
        error: None,
    }
}

/// The server's side of stream `l` from what the iperf3 server reported of it (`t`), counting from
/// the end of the warm-up (`omit_s`, with the `warm` bytes this end sent during it).
fn remote_stream(
    l: &StreamReport,
    t: Option<&landspeed_iperf3::results::StreamResult>,
    (omit_s, warm): (f64, u64),
    congestion: &Option<String>,
) -> StreamReport {
    let role = l.role.peer();
    StreamReport {
        id: l.id,
        flow: l.flow,
        role,
        bytes: t.map_or(0, |t| t.bytes) + warm,
        // A UDP sender's datagram count; loss is counted against it.
        calls: t
            .filter(|_| role == Role::Sender)
            .map_or(0, |t| t.packets.max(0) as u64),
        omitted_bytes: warm,
        first_byte_s: t.map(|t| t.start_time_s + omit_s),
        last_byte_s: t.map(|t| t.end_time_s + omit_s),
        snd_buf_bytes: 0,
        rcv_buf_bytes: 0,
        tcp: t
            .filter(|t| role == Role::Sender && t.retransmits >= 0)
            .map(|t| TcpStats {
                retransmits: t.retransmits as u64,
                congestion: congestion.clone(),
                ..TcpStats::default()
            }),
        error: t
            .is_none()
            .then(|| "the iperf3 server reported no figures for this stream".into()),
        bytes_verified: 0,
        corrupt_blocks: 0,
        first_corruption: None,
        zerocopy_sends: 0,
        zerocopy_copied: 0,
        udp: t
            .filter(|_| role == Role::Receiver && l.udp.is_none() && l.tcp.is_none())
            .map(remote_udp),
        send_errors: 0,
        udp_offload: false,
    }
}

/// A receiving iperf3 server's UDP figures for one stream.
fn remote_udp(t: &landspeed_iperf3::results::StreamResult) -> landspeed_core::udp::UdpStats {
    let lost = t.errors.max(0) as u64;
    landspeed_core::udp::UdpStats {
        datagrams_sent: None,
        datagrams_received: (t.packets.max(0) as u64).saturating_sub(lost),
        datagrams_lost: lost,
        loss_pct: 0.0,
        out_of_order: 0,
        duplicates: 0,
        jitter_ms: t.jitter_s * 1000.0,
    }
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
            let sock = super::udp_socket(opts, addr, spec).map_err(err)?;
            sock.set_read_timeout(Some(opts.control_timeout)).map_err(err)?;
            sock.send(b"9876").map_err(err)?;
            let mut buf = [0u8; 16];
            let n = sock.recv(&mut buf).map_err(err)?;
            if &buf[..n] != b"6789" {
                return Err(ClientError::Iperf3UdpHello { id });
            }
            let flow = spec.flow_of(id);
            let role = Role::at_client(flow);
            Ok(landspeed_engine::transport::udp::UdpStream {
                id,
                flow,
                role,
                socket: sock,
                datagrams: (role == Role::Sender)
                    .then(|| spec.stream_budget(id).map(|b| b.div_ceil(spec.length_bytes)))
                    .flatten(),
            })
        })
        .collect()
}
