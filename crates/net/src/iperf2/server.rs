//! Serving unmodified iperf 2 clients on landspeed's port. The greeting has read a connection's
//! header (`landspeed_iperf2::detect` told it from the other protocols); here it joins its test
//! (`gather`), the test is admitted as any other (a keyed server refuses iperf 2 unless `--open
//! iperf2`, since it carries no key; `--max-streams`, `--max-duration`, `--max-bytes`, the slots per
//! server and address, the per-minute rate, the memory budget), each stream gets iperf 2's header
//! ack when its client expects one, and the engine runs: receiving to the end of each stream
//! (`-t`, `-n`: the client decides), sending for `-R` and `--full-duplex` (on the same connection,
//! as iperf 2 does) until the time or bytes the header asked. iperf 2 cannot be told why a test is
//! refused: the connection is closed and the server's log says why.

use super::gather::{Arrived, Joining, GATHER_WAIT};
use crate::host::{Keyless, RefusalKind, Shared, TestLog};
use landspeed_core::assemble::RunContext;
use landspeed_core::config::{Direction, Flow, Test, TestSpec};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role};
use landspeed_engine::sockopt;
use landspeed_engine::supervisor::{self, EngineHook, EngineParams, Flags, Progress, Wake, Wiring};
use landspeed_engine::transport::tcp::{DataStream, Tcp};
use landspeed_iperf2::ack::{AckTimes, HeaderAck, WireTime, SPOKEN};
use landspeed_iperf2::{ClientHeader, TcpPlan, Unserved};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A connection whose greeting was an iperf 2 header (`raw`, exactly its bytes): refused on a keyed
/// server, else given to its test; the first connection of a test comes back as the test to run (in
/// a thread of its own). Runs on the accepting thread, so it never waits on the client.
pub(crate) fn arrival(stream: TcpStream, raw: &[u8], peer: SocketAddr, shared: &Shared) -> Option<Opened> {
    let Ok((header, _)) = ClientHeader::parse(raw, 0) else {
        // The greeting checked the header's length; a header it passed always parses.
        shared.refuse(
            peer,
            RefusalKind::Malformed,
            "iperf2: a header that does not parse",
        );
        return None;
    };
    if refused_keyed(peer, shared) {
        return None;
    }
    let accepted = SystemTime::now();
    match shared.iperf2.arrive(peer.ip(), &header, stream) {
        (Arrived::Opens(id, rx), Some(socket)) => Some(Opened {
            first: Stream {
                accepted,
                ..Stream::new(socket, header)
            },
            id,
            rx,
            peer,
        }),
        _ => None,
    }
}

/// Whether this keyed server refuses iperf 2 (it carries no key), saying so in its log.
pub(super) fn refused_keyed(peer: SocketAddr, shared: &Shared) -> bool {
    let refused = shared.keyed_only(Keyless::Iperf2);
    if refused {
        shared.refuse(
            peer,
            RefusalKind::Keyed,
            "iperf2: this server requires a key and does not open iperf 2's protocol (serve --open iperf2)",
        );
    }
    refused
}

/// A test whose first connection has come.
pub(crate) struct Opened {
    first: Stream,
    id: u64,
    rx: std::sync::mpsc::Receiver<Joining>,
    peer: SocketAddr,
}

impl Opened {
    /// Runs the test: admitted, gathered, measured, logged.
    pub(crate) fn serve(self, shared: &Arc<Shared>) {
        let id = self.id;
        serve(self.first, (id, self.rx), self.peer, shared);
        shared.iperf2.close(id);
    }
}

/// One of a test's connections.
pub(super) struct Stream {
    pub(super) socket: TcpStream,
    pub(super) header: ClientHeader,
    accepted: SystemTime,
    /// The same moment on the monotonic clock: the test's clock starts at its first connection's.
    accepted_at: std::time::Instant,
    /// How it was made, read as it joined its test (before this server wrote to it).
    made: landspeed_core::endpoint::ConnectFacts,
}

impl Stream {
    fn new(socket: TcpStream, header: ClientHeader) -> Stream {
        Stream {
            made: socket_asks(&socket, &header, made(&socket)),
            socket,
            header,
            accepted: SystemTime::now(),
            accepted_at: std::time::Instant::now(),
        }
    }
}

/// What the header asks of this server's socket, done, and the facts that say so (iperf 2.1.8's
/// `(prefetch=N)` and `(qack)` marks): the unsent data held to the client's `--tcp-write-prefetch`
/// where this server sends (a socket that refuses it sends as it would have); quickack where it
/// receives (done by the engine's receivers after each read, `EngineParams::quickack`).
fn socket_asks(
    socket: &TcpStream,
    header: &ClientHeader,
    facts: landspeed_core::endpoint::ConnectFacts,
) -> landspeed_core::endpoint::ConnectFacts {
    let mark = header
        .write_prefetch()
        .filter(|b| landspeed_engine::os::set_notsent_lowat(socket, *b).is_ok());
    landspeed_core::endpoint::ConnectFacts {
        unsent_mark_bytes: mark,
        quickack: header.has(landspeed_iperf2::header::upper::TCPQUICKACK),
        fq_paced: header.fq_rate_bytes_per_s().is_some(),
        ..facts
    }
}

/// How a connection was made, as iperf 2's server tells it: TCP_INFO's first figures, the
/// descriptor and the interface (no connect time: this end accepted it).
pub(super) fn made(socket: &TcpStream) -> landspeed_core::endpoint::ConnectFacts {
    landspeed_core::endpoint::ConnectFacts {
        connect_ms: None,
        ..super::client::connect_facts(socket, Duration::ZERO)
    }
}

/// Runs the test `first` opened: admitted, gathered, measured, logged.
fn serve(
    first: Stream,
    (id, rx): (u64, std::sync::mpsc::Receiver<Joining>),
    peer: SocketAddr,
    shared: &Arc<Shared>,
) {
    let key = getrandom::u64().unwrap_or(0x1a2b_3c4d);
    let plan = first.header.tcp_plan(key).and_then(|p| match p.connect_back {
        Some(b) if !shared.opts.connect_back => Err(Unserved::ConnectBack(b.dual)),
        _ => Ok(p),
    });
    let every = shared.opts.iperf2_interval;
    let spec = plan
        .as_ref()
        .map(|p| admitted_spec(p, every))
        .map_err(Clone::clone);
    let (Some(admitted), Ok(plan)) = (admit(spec, peer, shared), plan) else {
        return;
    };
    let test = &admitted.test;
    let mut streams = vec![first];
    gather(&mut streams, &rx, plan.spec.streams, &shared.shutdown);
    shared.iperf2.close(id);
    drop(rx);
    if !scheduled_start(streams[0].header.epoch_start(), test, peer, shared) {
        return;
    }
    match plan.connect_back {
        None => run_logged(Legs::of(&streams, &[]), (&plan, test), (peer, None), shared),
        Some(back) => super::connect_back::serve(&streams, back, (&plan, test), peer, shared),
    }
    shared.tests_done.fetch_add(1, Relaxed);
}

/// Waits for the test's scheduled start (`--txstart-time`, `super::start_at`); false when it is
/// refused (the wait and the test run past the server's longest test: logged) or the server began
/// shutting down meanwhile.
pub(super) fn scheduled_start(
    epoch: Option<WireTime>,
    test: &Test,
    peer: SocketAddr,
    shared: &Shared,
) -> bool {
    let max_s = shared.opts.limits.max_duration_s;
    match super::start_at::wait(epoch, test, max_s, super::start_at::now_s()) {
        Ok(w) => super::start_at::sleep(w, &shared.shutdown),
        Err(why) => {
            shared.refuse(peer, RefusalKind::Unserved, format!("iperf2: {why}"));
            false
        }
    }
}

/// What a test's header is admitted as: with `-r` or `-d`, both directions (the server's
/// connections back move as much as the client's); sampled `every` so often when the server was
/// given an interval (iperf 2's server `-i`).
fn admitted_spec(p: &TcpPlan, every: Option<Duration>) -> TestSpec {
    let mut spec = p.spec.clone();
    if p.connect_back.is_some() {
        spec.direction = Direction::Bidir;
    }
    spec.interval_s = every.unwrap_or(spec.interval_s);
    spec
}

/// A test's connections: the client's (`incoming`, each opened with its header) and those this
/// server opened back to it (`back`, for `-r` and `-d`), which carry the server's data when there
/// are any; else the server sends on the client's own (`-R`, `--full-duplex`).
#[derive(Clone, Copy)]
pub(super) struct Legs<'a> {
    pub(super) incoming: &'a [Stream],
    pub(super) back: &'a [TcpStream],
    /// Whether the client's connections get iperf 2's header ack (false once they have had it).
    pub(super) ack: bool,
}

impl<'a> Legs<'a> {
    pub(super) fn of(incoming: &'a [Stream], back: &'a [TcpStream]) -> Legs<'a> {
        Legs {
            incoming,
            back,
            ack: true,
        }
    }
}

/// Measures one test over `legs` and logs it, with `failed` as its error when the test itself had
/// none (what it could not do before it ran).
pub(super) fn run_logged(
    legs: Legs,
    (plan, test): (&TcpPlan, &Test),
    (peer, failed): (SocketAddr, Option<String>),
    shared: &Arc<Shared>,
) {
    let mut log = TestLog::new(peer, "iperf2");
    log.protocol = protocol(&legs.incoming[0].header);
    log.streams = legs.incoming.len() as u32;
    log.direction = Some(test.direction);
    log.error = run(legs, (plan, test), shared, &mut log).err().or(failed);
    shared.emit(crate::host::ServerEvent::Test(log));
}

/// A test admitted: it holds its slot and memory until dropped.
pub(super) struct Admitted {
    pub(super) test: Test,
    _slot: crate::host::Slot,
    _memory: Option<crate::host::MemoryHold>,
}

/// Admits the test a header asks for (`spec`, or why it is not served), as every test is admitted:
/// validated, within the server's limits, the per-minute rate, a slot, its memory; or refuses it
/// with a log line (iperf 2 has no message for it).
pub(super) fn admit(spec: Result<TestSpec, Unserved>, peer: SocketAddr, shared: &Shared) -> Option<Admitted> {
    let refuse = |kind, reason: String| {
        shared.refuse(peer, kind, format!("iperf2: {reason}"));
        None
    };
    let test = match spec.map(TestSpec::validated) {
        Err(e) => return refuse(RefusalKind::Unserved, e.to_string()),
        Ok(Err(e)) => {
            return refuse(
                RefusalKind::Unserved,
                format!("the header asks for a test landspeed does not run: {e}"),
            )
        }
        Ok(Ok(t)) => t,
    };
    if let Some(over) = shared.opts.limits.check(&test) {
        return refuse(RefusalKind::Unserved, over.to_string());
    }
    if let Err(why) = shared.admit(peer) {
        return refuse(RefusalKind::RateLimited, why);
    }
    let Ok(slot) = shared.slot(peer) else {
        return refuse(RefusalKind::Busy, "busy (every test slot in use)".into());
    };
    let Ok(memory) = shared.hold_memory(&test) else {
        return refuse(
            RefusalKind::Memory,
            "its test needs more memory than the server has left".into(),
        );
    };
    Some(Admitted {
        test,
        _slot: slot,
        _memory: memory,
    })
}

/// "iperf2 2.1.8" from the client's header (a release other than a final one marked as iperf 2
/// marks it: "2.2.0-dev", "-rc", "-rc2", "-private", "-master", "-unk"), or "iperf2" when it sends
/// no version.
pub(super) fn protocol(h: &ClientHeader) -> String {
    let Some(v) = h.extension.map(|e| e.version) else {
        return "iperf2".into();
    };
    if (v.major, v.minor) == (0, 0) || (v.patch, v.release) == (0, 0) {
        return "iperf2".into();
    }
    let kind = match v.release & 0xf {
        3 => "",
        0 => "-dev",
        1 => "-rc",
        2 => "-rc2",
        4 => "-private",
        5 => "-master",
        _ => "-unk",
    };
    format!("iperf2 {}.{}.{}{kind}", v.major, v.minor, v.patch)
}

/// Takes the test's other streams as they come, until it has `want` or its time is up (a test then
/// runs with the streams that came: the result says how many).
fn gather(
    streams: &mut Vec<Stream>,
    rx: &std::sync::mpsc::Receiver<Joining>,
    want: u32,
    shutdown: &AtomicBool,
) {
    let until = Instant::now() + GATHER_WAIT;
    while streams.len() < want as usize && !shutdown.load(Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok((socket, header)) => streams.push(Stream::new(socket, header)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => break,
        }
    }
}

/// Sends each stream iperf 2's header ack when its client expects one (the server's version, and
/// with trip times the clock check's stamps).
fn acknowledge(s: &Stream, timeout: Duration) {
    if !HeaderAck::wanted(&s.header) {
        return;
    }
    let unix = |t: SystemTime| {
        WireTime::from_unix_ns(
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        )
    };
    let times = s
        .header
        .has(landspeed_iperf2::header::upper::TRIPTIME)
        .then(|| AckTimes {
            sent: s.header.start_time().unwrap_or_default(),
            received: unix(s.accepted),
            acked: unix(SystemTime::now()),
        });
    let ack = HeaderAck {
        version: SPOKEN,
        times,
    };
    let _ = s.socket.set_write_timeout(Some(timeout));
    let _ = (&s.socket).write_all(&ack.encode());
}

/// The engine's streams over the test's connections: the client's data in on its own connections;
/// the server's out on those opened back to it, or (`-R`, `--full-duplex`) on the client's.
fn data_streams(legs: Legs, test: &Test) -> Result<Vec<DataStream>, String> {
    let n = legs.incoming.len() as u32;
    let flows: Vec<Flow> = match test.direction {
        Direction::Forward => vec![Flow::ClientToServer],
        Direction::Reverse => vec![Flow::ServerToClient],
        Direction::Bidir => vec![Flow::ClientToServer, Flow::ServerToClient],
    };
    let mut out = vec![];
    for (f, flow) in flows.into_iter().enumerate() {
        let sockets: Vec<&TcpStream> = match flow {
            Flow::ServerToClient if !legs.back.is_empty() => legs.back.iter().collect(),
            _ => legs.incoming.iter().map(|s| &s.socket).collect(),
        };
        for (k, s) in sockets.into_iter().enumerate().take(n as usize) {
            let id = f as u32 * n + k as u32;
            let socket = s.try_clone().map_err(|e| format!("stream {id}: {e}"))?;
            let role = Role::at_server(flow);
            let sending = role == Role::Sender;
            let _ = sockopt::after_connect(&socket2::SockRef::from(&socket), test, sending);
            out.push(DataStream {
                id,
                flow,
                role,
                socket,
                budget: if sending {
                    test.stream_budget(f as u32 * test.streams + k as u32)
                } else {
                    None
                },
                file: None,
                tls: None,
            });
        }
    }
    Ok(out)
}

/// A `--trip-times` test this server sends on (`-R`, `--full-duplex`): each stream's header echoed
/// with this server's start time before its bursts, as iperf 2's client expects. The bytes written.
fn echo_headers(streams: &[Stream], test: &Test, timeout: Duration) -> u64 {
    if !test.trip_times || test.direction == Direction::Forward {
        return 0;
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut written = 0;
    for s in streams {
        let echo = s.header.sender_echo(WireTime::from_unix_ns(now));
        let _ = s.socket.set_write_timeout(Some(timeout));
        if (&s.socket).write_all(&echo).is_ok() {
            written += echo.len() as u64;
        }
    }
    written
}

/// Measures the test and fills the log (and its result) in.
fn run(
    legs: Legs,
    (plan, test): (&TcpPlan, &Test),
    shared: &Arc<Shared>,
    log: &mut TestLog,
) -> Result<(), String> {
    let o = &shared.opts;
    let streams = legs.incoming;
    for s in streams.iter().filter(|_| legs.ack) {
        acknowledge(s, o.handshake_timeout);
    }
    let echoed = echo_headers(streams, test, o.handshake_timeout);
    let clamp = o.iperf2_rx_clamp.filter(|b| clamp_windows(streams, *b));
    let made = connections_made(legs, clamp);
    let paths = data_streams(legs, test)?;
    // Read now: once the client has gone, its connections may no longer say where they went.
    let ends = Ends {
        addresses: addresses(legs),
        client_ports: client_ports(&paths, test),
        started: SystemTime::now(),
    };
    let mut context = iperf2_context(ends.addresses, ends.started, 1);
    let epoch = streams[0].header.epoch_start();
    context.scheduled_start_unix_s = super::start_at::scheduled_s(epoch, context.started_unix_s);
    let live = o.live.then(|| crate::host::Live {
        spec: test.spec().clone(),
        context,
        client_ports: ends.client_ports.clone(),
        samples: vec![],
        frames: plan.frames,
        made: made.clone(),
    });
    if let Some(l) = &live {
        shared.emit(l.so_far());
    }
    let mut params = EngineParams::for_spec(test, None, None, o.idle_timeout);
    params.read_bins = o.iperf2_reads.or(params.read_bins);
    params.quickack = streams.iter().any(|s| s.made.quickack);
    // Counted from the first connection, as iperf 2.1.8's server counts (not from when the
    // streams were gathered: under load that came 80-100 ms later and cut the last interval short);
    // a test with a scheduled start (`--txstart-time`) from that start, which it has waited for, and
    // one with connections back (`-r`, `-d`) from now (`-r`'s back test follows the forward one).
    params.clock_from = (epoch.is_none() && legs.back.is_empty())
        .then(|| streams.iter().map(|s| s.accepted_at).min())
        .flatten();
    params.trip_bins = o.iperf2_histograms;
    params.frames_from_bursts = plan.frames;
    // --max-rate paces the test as it paces landspeed's and iperf3's.
    let limit = o.limits.max_rate_bps.map(|r| r / paths.len() as f64);
    params.stream_cap_bps = landspeed_core::units::lower(params.stream_cap_bps, limit);
    let (tx, rx) = std::sync::mpsc::channel::<Wake<()>>();
    let flags = Flags::default();
    let mut hook = Hook::new(shared);
    hook.live = live;
    let out = supervisor::run(
        &Tcp(&paths),
        &params,
        Wiring::new(&flags, (&tx, &rx), &mut hook, None),
    );
    let headers = (streams.len() * streams[0].header.encode().len()) as u64;
    crate::host::add_measured(log, &out);
    log.bytes_received += if test.direction == Direction::Reverse {
        0
    } else {
        headers
    };
    log.bytes_sent += echoed;
    let mut result = seen_here(&out, (plan, test), legs, &ends);
    result.frames = out.frames.clone();
    made.put_into(&mut result);
    log.result = Some(Box::new(result));
    if let Some(cut) = hook.cut {
        return Err(cut);
    }
    match out.streams.iter().find_map(|s| s.error.clone()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The server's `--tcp-rx-window-clamp` (the drop-in's) on each of the client's connections:
/// whether every one took it.
fn clamp_windows(streams: &[Stream], bytes: u32) -> bool {
    streams
        .iter()
        .all(|s| landspeed_engine::os::set_window_clamp(&s.socket, bytes).is_ok())
}

/// How each of the test's connections was made, by the client's port, read before its data flows:
/// TCP_INFO's first figures, the descriptor and the interface, the client's connections' window
/// clamp (iperf 2's server prints them on its "connected with" lines).
fn connections_made(legs: Legs, clamp: Option<u32>) -> crate::host::Made {
    let port = |s: &TcpStream| s.peer_addr().ok().map(|a| a.port());
    let incoming = legs.incoming.iter().map(|s| {
        let facts = landspeed_core::endpoint::ConnectFacts {
            window_clamp_bytes: clamp,
            ..s.made.clone()
        };
        (port(&s.socket), facts)
    });
    let back = (legs.back.iter()).map(|s| {
        (
            port(s),
            landspeed_core::endpoint::ConnectFacts {
                back: true,
                ..made(s)
            },
        )
    });
    let connections = incoming.chain(back).collect();
    crate::host::Made {
        connections,
        client_software: client_software(&legs.incoming[0].header),
        no_end_report: false,
        bounceback: None,
    }
}

/// The client's software as iperf 2's header names it ("iperf 2 2.1.8 client").
pub(super) fn client_software(h: &ClientHeader) -> String {
    protocol(h).replace("iperf2", "iperf 2") + " client"
}

/// The client's port of each of the engine's streams, by stream number.
fn client_ports(paths: &[DataStream], test: &Test) -> Vec<Option<u16>> {
    let mut ports = vec![None; test.spec().total_streams() as usize];
    for p in paths {
        if let Some(slot) = ports.get_mut(p.id as usize) {
            *slot = p.socket.peer_addr().ok().map(|a| a.port());
        }
    }
    ports
}

/// Where a test's connections went and when it started, as read when it starts.
struct Ends {
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
    client_ports: Vec<Option<u16>>,
    started: SystemTime,
}

/// The ends a test's result names: the server's connection back (`-r`, `-d`) or the client's first.
fn addresses(legs: Legs) -> (Option<SocketAddr>, Option<SocketAddr>) {
    let sock = legs.back.first().unwrap_or(&legs.incoming[0].socket);
    (sock.local_addr().ok(), sock.peer_addr().ok())
}

/// Ends the test at the server's shutdown, or cuts it at `--max-duration` (with its grace) or
/// `--max-bytes`, whatever the client asked: iperf 2 has no message for it, its connections close.
/// With a live view, the test so far goes out as each interval closes.
pub(super) struct Hook<'a> {
    shutdown: &'a AtomicBool,
    shared: &'a Shared,
    pub(super) live: Option<crate::host::Live>,
    /// Raised when the client's port is closed (another thread read its ICMP port unreachable).
    pub(super) gone: Option<&'a AtomicBool>,
    running: landspeed_proto::Running,
    started: Instant,
    /// Why the test was cut, if it was.
    pub(super) cut: Option<String>,
}

impl<'a> Hook<'a> {
    /// The hook of a test starting now on `shared`'s server.
    pub(super) fn new(shared: &'a Shared) -> Hook<'a> {
        Hook {
            shutdown: &shared.shutdown,
            shared,
            live: None,
            gone: None,
            running: landspeed_proto::Running::of(&shared.opts.limits),
            started: Instant::now(),
            cut: None,
        }
    }
}

impl EngineHook<()> for Hook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        if let Some(live) = &mut self.live {
            live.samples.push(sample.clone());
            self.shared.emit(live.so_far());
        }
    }
    fn on_external(&mut self, _: (), _: &Flags) {}
    fn on_tick(&mut self, flags: &Flags) {
        if self.shutdown.load(Relaxed) && !flags.abort.load(Relaxed) {
            self.cut.get_or_insert_with(|| "server shutting down".into());
            flags.abort.store(true, Relaxed);
        }
        if self.gone.is_some_and(|g| g.load(Relaxed)) && !flags.abort.load(Relaxed) {
            self.cut.get_or_insert_with(|| super::udp::PORT_CLOSED.into());
            flags.abort.store(true, Relaxed);
        }
    }
    fn on_progress(&mut self, p: Progress, flags: &Flags) {
        if self.cut.is_some() {
            return;
        }
        let elapsed = self.started.elapsed();
        if self.running.over_length(elapsed) {
            flags.uncap.store(true, Relaxed);
        }
        if let Err(cut) = self.running.check(p.received + p.sent, elapsed) {
            self.cut = Some(cut.to_string());
            flags.abort.store(true, Relaxed);
        }
    }
}

/// The test as this server saw it. iperf 2 sends the server no figures of its own, so the client's
/// side is inferred: what it sent is what arrived here; what it received, what this server sent.
fn seen_here(
    out: &supervisor::EngineOutput,
    (plan, test): (&TcpPlan, &Test),
    legs: Legs,
    ends: &Ends,
) -> landspeed_core::result::RunResult {
    let streams = legs.incoming;
    let mut warnings = vec![
        "iperf 2's protocol carries no figures from the client: its side of each stream is inferred from this server's (what it sent is what arrived here; what it received, what this server sent)".to_string(),
        "iperf 2's payload is not landspeed's: nothing was verified".to_string(),
    ];
    if streams.len() < test.streams as usize {
        warnings.push(format!(
            "only {} of the {} streams the client's header named arrived within {} s",
            streams.len(),
            test.streams,
            GATHER_WAIT.as_secs()
        ));
    }
    warnings.extend(plan.notes.iter().cloned());
    let mut here = out.report(None, warnings);
    for s in &mut here.streams {
        s.peer_port = s
            .peer_port
            .or(ends.client_ports.get(s.id as usize).copied().flatten());
    }
    inferred_client(
        out,
        &here,
        (&streams[0].header, test),
        (ends.addresses, ends.started),
    )
}

/// A test this server ran (`out`, its report `here`), assembled with the client's side inferred
/// from it: iperf 2 sends the server no figures.
pub(super) fn inferred_client(
    out: &supervisor::EngineOutput,
    here: &EndpointReport,
    (header, test): (&ClientHeader, &Test),
    (addresses, started): ((Option<SocketAddr>, Option<SocketAddr>), SystemTime),
) -> landspeed_core::result::RunResult {
    let client = EndpointReport {
        software: client_software(header),
        streams: here.streams.iter().map(crate::dial::inferred).collect(),
        elapsed_s: here.elapsed_s,
        ..EndpointReport::default()
    };
    let mut context = iperf2_context(addresses, started, here.threads);
    let epoch = header.epoch_start();
    context.scheduled_start_unix_s = super::start_at::scheduled_s(epoch, context.started_unix_s);
    landspeed_core::assemble::assemble(&landspeed_core::assemble::Inputs {
        spec: test,
        context,
        client: &client,
        server: here,
        client_samples: &[],
        server_samples: &out.samples,
    })
}

/// The context of the server's view of an iperf 2 test (its peer is never landspeed's).
pub(super) fn iperf2_context(
    addresses: (Option<SocketAddr>, Option<SocketAddr>),
    started: SystemTime,
    threads: u32,
) -> RunContext {
    RunContext {
        foreign_peer: true,
        ..crate::host::server_context(addresses, started, threads, "iperf2")
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn unsent_mark(s: &TcpStream) -> u32 {
        landspeed_engine::os::notsent_lowat(s).unwrap()
    }

    /// iperf 2.1.8's headers (captured; landspeed_iperf2's header tests read the same bytes):
    /// `-R --tcp-write-prefetch 64K` and `--tcp-quickack`.
    const PREFETCH_R: &str = "4401007800000001000017690000000000000000ffffff9c000000000000000044000000000200010008000300000000000000000000000000010000";
    const QUICKACK: &str = "4001007800000001000017690000000000000000ffffff9c000000000000000080000000000200010008000300000000000000000000000000000000";

    #[test]
    fn the_sockets_are_set_as_the_clients_header_asks() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let accepted = l.accept().unwrap().0;
        let before = unsent_mark(&accepted);
        let header = |hex: &str| {
            let b: Vec<u8> = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            ClientHeader::parse(&b, 0).unwrap().0
        };
        let quick = Stream::new(accepted.try_clone().unwrap(), header(QUICKACK));
        assert!(quick.made.quickack && quick.made.unsent_mark_bytes.is_none());
        assert_eq!(
            unsent_mark(&accepted),
            before,
            "no prefetch asked: the socket as it was"
        );
        let sending = Stream::new(accepted.try_clone().unwrap(), header(PREFETCH_R));
        assert_eq!(sending.made.unsent_mark_bytes, Some(65_536));
        assert!(!sending.made.quickack);
        assert_eq!(unsent_mark(&accepted), 65_536);
        // The server's --tcp-rx-window-clamp: each of the client's connections clamped.
        let before = landspeed_engine::os::window_clamp(&accepted).unwrap();
        assert!(clamp_windows(std::slice::from_ref(&sending), 40_000));
        assert_ne!(before, 40_000);
        assert_eq!(landspeed_engine::os::window_clamp(&accepted).unwrap(), 40_000);
    }
}
