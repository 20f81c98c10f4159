//! iperf 2's UDP tests on landspeed's port. Every datagram of an iperf 2 UDP test carries the
//! client's header after its 16-byte prefix, so the listener tells them apart by their bytes
//! (`landspeed_iperf2::detect::udp`) and the first from a new address and port opens a test: from
//! then on the test reads from a socket of its own on the port, connected to the client (the kernel
//! hands it that client's datagrams; any that reach the listener first are passed on), counts
//! them as iperf 2's server does (`Receipt`), and answers the client's end (its negative-numbered
//! datagrams, repeated) with iperf 2's report, again for each repeat until the client falls silent,
//! as iperf 2.1.8's server does. Each `-P` stream (its own source port) is a test of its own here.

use crate::host::{bind_udp, Live, RefusalKind, Shared, TestLog};
use landspeed_core::config::{Direction, Flow, Test, TestSpec};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport};
use landspeed_core::frames::{FrameReceipt, FramesReport};
use landspeed_engine::supervisor::EngineOutput;
use landspeed_engine::transport::udp::UdpStream;
use landspeed_iperf2::ack::WireTime;
use landspeed_iperf2::udp::Datagram;
use landspeed_iperf2::{ClientHeader, ConnectBack, Dual, FramePayload, Receipt, Unserved};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long the server waits for the client to fall silent after each report it sends.
const SILENCE: Duration = Duration::from_millis(250);
/// Reports sent at most (iperf 2.1.8's count).
const REPORTS: u32 = 10;

/// A datagram the listener read for a running test, and when it arrived (Unix ns).
type Passed = (Vec<u8>, u64);

/// The iperf 2 UDP tests running, by client address and port.
#[derive(Default)]
pub(crate) struct UdpTests(Mutex<HashMap<SocketAddr, Sender<Passed>>>);

impl UdpTests {
    fn remove(&self, peer: SocketAddr) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&peer);
    }
}

/// A datagram the listener read: an iperf 2 test's (passed on, or opening one: true), or not (false).
pub(crate) fn take(
    b: &[u8],
    stamp_ns: u64,
    (peer, local): (SocketAddr, SocketAddr),
    shared: &Arc<Shared>,
) -> bool {
    let running = shared
        .iperf2_udp
        .0
        .lock()
        .ok()
        .and_then(|t| t.get(&peer).cloned());
    if let Some(tx) = running {
        let _ = tx.send((b.to_vec(), stamp_ns));
        return true;
    }
    let Some((_, header)) = landspeed_iperf2::detect::udp(b) else {
        return false;
    };
    if !shared.allowed(peer) || super::server::refused_keyed(peer, shared) {
        return true;
    }
    // Admitted here, on the listener's thread (no I/O), so that a client refused datagram after
    // datagram costs no thread each time.
    let group = local.ip().is_multicast();
    let (plan, back) = match group {
        // A group's sender gets nothing back: no stream, no connection back.
        true => (group_plan(&header, shared), None),
        false => plan(&header, shared),
    };
    let Some(admitted) = super::server::admit(plan, peer, shared) else {
        return true;
    };
    let epoch = landspeed_iperf2::udp::epoch_start(b, &header);
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = tx.send((b.to_vec(), stamp_ns));
    shared
        .iperf2_udp
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(peer, tx);
    let sh = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("iperf2 udp {peer}"))
        .spawn(move || {
            sh.connection_started();
            if !super::server::scheduled_start(epoch, &admitted.test, peer, &sh) {
                sh.iperf2_udp.remove(peer);
                sh.connection_ended();
                return;
            }
            // Forward and --full-duplex receive here; -R only sends.
            if group {
                let test = admitted.test.clone();
                receive_logged((&header, epoch), &test, (None, (peer, local)), &rx, &sh);
            } else if admitted.test.direction == Direction::Reverse {
                super::udp_send::serve((&header, epoch), admitted, (peer, local), &sh);
            } else {
                serve((header, epoch, back), admitted, (peer, local), rx, &sh);
            }
            sh.iperf2_udp.remove(peer);
            sh.connection_ended();
        });
    if spawned.is_err() {
        shared.iperf2_udp.remove(peer);
        shared.refuse(
            peer,
            RefusalKind::Busy,
            "iperf2: cannot start a thread for the test",
        );
    }
    true
}

/// The test a UDP header asks for, as this server serves it (admitted with both directions when
/// the server sends a stream back for `-r`/`-d`, which needs `--connect-back` and
/// `--iperf2-udp-send`), sampled at `serve`'s iperf 2 interval; and the stream back, if any.
fn plan(header: &ClientHeader, shared: &Shared) -> (Result<TestSpec, Unserved>, Option<ConnectBack>) {
    let o = &shared.opts;
    let (plan, back) = match o.connect_back && o.iperf2_udp_send {
        true => match header.udp_plan_back(0) {
            Ok((spec, back)) => (Ok(spec), back),
            Err(e) => (Err(e), None),
        },
        false => (header.udp_plan_sending(0, o.iperf2_udp_send), None),
    };
    let mut plan = plan.map(|s| sampled(s, shared));
    if let (Ok(spec), true) = (plan.as_mut(), back.is_some()) {
        spec.direction = Direction::Bidir;
    }
    if let (Ok(spec), true) = (plan.as_mut(), header.is_small_trip_times()) {
        spec.end = unsaid_length(o);
    }
    (plan, back)
}

/// The length admitted for a test whose client says none (iperf 2's small trip-times datagrams):
/// the server's longest test, else an hour; it runs until the client's end either way.
fn unsaid_length(o: &crate::host::ServerOptions) -> landspeed_core::config::EndCondition {
    let s = o.limits.max_duration_s.unwrap_or(3600.0);
    landspeed_core::config::EndCondition::Time(Duration::from_secs_f64(s))
}

/// A group's sender's test: one way only, whatever the server sends unicast clients.
fn group_plan(header: &ClientHeader, shared: &Shared) -> Result<TestSpec, Unserved> {
    match header.udp_plan_sending(0, false) {
        Ok(s) => Ok(sampled(s, shared)),
        Err(Unserved::UdpSending(_) | Unserved::ConnectBackUdp(_)) => Err(Unserved::ToGroup),
        Err(e) => Err(e),
    }
}

/// The test sampled at `serve`'s iperf 2 interval, when it has one.
fn sampled(mut spec: TestSpec, shared: &Shared) -> TestSpec {
    spec.interval_s = shared.opts.iperf2_interval.unwrap_or(spec.interval_s);
    spec
}

/// Receives one admitted UDP stream and answers its end with iperf 2's report (with
/// `--full-duplex`, sends the server's stream on the same socket meanwhile, and answers nothing, as
/// iperf 2.1.8's server), then logs it.
fn serve(
    (header, epoch, back): (ClientHeader, Option<WireTime>, Option<ConnectBack>),
    admitted: super::server::Admitted,
    (peer, local): (SocketAddr, SocketAddr),
    rx: Receiver<Passed>,
    shared: &Arc<Shared>,
) {
    let Some((sock, local)) = open(local, peer, shared) else {
        return;
    };
    let Some(one_way) = back.map_or(Some(admitted.test.clone()), |_| {
        admitted.test.changed(|s| s.direction = Direction::Forward).ok()
    }) else {
        return;
    };
    let test = &one_way;
    let sending_back = |_: ()| {
        if let Some(b) = back {
            super::udp_back::send_back(&header, test, (peer, local, b.port), shared);
        }
    };
    std::thread::scope(|sc| {
        if back.is_some_and(|b| b.dual == Dual::Simultaneous) {
            sc.spawn(|| sending_back(()));
            receive_logged((&header, epoch), test, (Some(&sock), (peer, local)), &rx, shared);
        } else {
            receive_logged((&header, epoch), test, (Some(&sock), (peer, local)), &rx, shared);
            sending_back(());
        }
    });
}

/// Receives the client's stream (and with `--full-duplex` sends the server's) on `sock`, then logs
/// the test; without a socket (a group's sender) from what the listener passes, answering nothing.
fn receive_logged(
    (header, epoch): (&ClientHeader, Option<WireTime>),
    test: &Test,
    (sock, (peer, local)): (Option<&UdpSocket>, (SocketAddr, SocketAddr)),
    rx: &Receiver<Passed>,
    shared: &Arc<Shared>,
) {
    if let Some(s) = sock {
        let _ = landspeed_path::stamp::enable(s);
    }
    let started = SystemTime::now();
    let both = test.direction == Direction::Bidir;
    let mut log = TestLog::new(peer, "iperf2");
    log.protocol = format!("{} (UDP)", super::server::protocol(header));
    log.streams = 1;
    log.direction = Some(test.direction);
    let seq64 = header.flags & landspeed_iperf2::header::flags::SEQNO64B != 0;
    let (mut counted, mut frames) = counting(test, header, shared);
    // A scheduled start (waited for before this): the clock's zero is now, whenever the first
    // datagram (sent before the wait) came.
    let scheduled = super::start_at::scheduled_s(epoch, super::start_at::now_s());
    if scheduled.is_some() {
        counted.receipt.start_at(super::start_at::now_s());
    }
    // Live only one way: both ways' intervals come at the end (their two clocks start apart).
    let mut context = super::server::iperf2_context((Some(local), Some(peer)), started, 1);
    context.scheduled_start_unix_s = scheduled;
    let made = made_udp(sock, peer, header);
    counted.live = (shared.opts.live && !both).then(|| Live {
        spec: test.spec().clone(),
        context,
        client_ports: vec![Some(peer.port())],
        samples: vec![],
        frames: frames.is_some(),
        made: made.clone(),
    });
    if let Some(l) = &counted.live {
        shared.emit(l.so_far());
    }
    let (outcome, sent) = if let (true, Some(sock)) = (both, sock) {
        both_ways(sock, (test, rx, seq64), &mut counted)
    } else {
        (receive(sock, rx, (seq64, &mut frames), &mut counted), None)
    };
    let receipt = &counted.receipt;
    log.bytes_received = receipt.bytes;
    log.duration_s = receipt.span_s();
    let frames = frames.map(FrameReceipt::finish);
    // No report when the client asked for none (iperf 2's `NOUDPFIN`, which its --full-duplex sets).
    let no_fin = both || header.has(landspeed_iperf2::header::upper::NOUDPFIN);
    match (outcome, sock) {
        (Ok(()), Some(sock)) if !no_fin => {
            // iperf 2.1.8's server flags its report for -e's columns when it runs with -e, or
            // when the client sends trip times.
            let extend = shared.opts.iperf2_enhanced || header.has(landspeed_iperf2::header::upper::TRIPTIME);
            report(sock, receipt, (frames.as_ref(), extend))
        }
        (Ok(()), _) => {}
        (Err(e), _) => log.error = Some(e),
    }
    if let Some((out, cut)) = &sent {
        log.bytes_sent = out.streams.iter().map(|s| s.bytes).sum();
        log.duration_s = log.duration_s.max(out.elapsed_s);
        log.error = log.error.take().or(cut.clone());
    }
    let sent = sent.as_ref().map(|(out, _)| out);
    let mut result = result(&counted, sent, (test, header), (local, peer), started);
    result.config.scheduled_start_unix_s = scheduled;
    result.frames = frames;
    made.put_into(&mut result);
    log.result = Some(Box::new(result));
    shared.tests_done.fetch_add(1, Relaxed);
    shared.emit(crate::host::ServerEvent::Test(log));
}

/// What a test counts: its datagrams, with the frames' tally when the client sends frames and the
/// transits binned when the server bins a trip-times client's; and the frames' own accounting.
/// A UDP test's socket as iperf 2's server tells of it (its descriptor, the interface of its
/// address), by the client's port, and the client's software.
pub(super) fn made_udp(
    sock: Option<&UdpSocket>,
    peer: SocketAddr,
    header: &ClientHeader,
) -> crate::host::Made {
    crate::host::Made {
        connections: (super::client::udp_facts(sock.into_iter()).into_iter())
            .map(|f| (Some(peer.port()), f))
            .collect(),
        client_software: super::server::client_software(header),
        no_end_report: header.has(landspeed_iperf2::header::upper::NOUDPFIN),
        bounceback: None,
    }
}

fn counting<'a>(
    test: &Test,
    header: &ClientHeader,
    shared: &'a Shared,
) -> (Counted<'a>, Option<FrameReceipt>) {
    let frames = header
        .has(landspeed_iperf2::header::upper::ISOCH)
        .then(|| FrameReceipt::new(0));
    let mut counted = Counted::new(test, shared);
    counted.tally = frames.is_some().then(Default::default);
    if let Some(spec) = shared.opts.iperf2_histograms.filter(|_| test.trip_times) {
        counted.receipt.bin_transits(spec);
        if let Some(t) = counted.tally.as_mut() {
            t.bin_latencies(spec);
        }
    }
    (counted, frames)
}

/// The test's socket, bound to the listener's address and connected to the client, and the
/// address it sends from; or None, refused in the log.
pub(super) fn open(local: SocketAddr, peer: SocketAddr, shared: &Shared) -> Option<(UdpSocket, SocketAddr)> {
    let v6only = local.is_ipv6().then_some(!local.ip().is_unspecified());
    match bind_udp(local, v6only).and_then(|s| s.connect(peer).map(|()| s)) {
        Ok(s) => {
            let local = local_end(&s, local);
            Some((s, local))
        }
        Err(e) => {
            let why = format!("iperf2: cannot open the test's socket: {e}");
            shared.refuse(peer, RefusalKind::Busy, why);
            None
        }
    }
}

/// What the server's own stream did with `--full-duplex`: the sender's output and why it was cut.
type Sent = (EngineOutput, Option<String>);

/// Why a test that sends ends when its client's port is closed.
pub(super) const PORT_CLOSED: &str = "the peer's port is closed (ICMP port unreachable)";
/// With `--full-duplex`, how long the client's end may come after the server's stream has ended.
const END_GRACE: Duration = Duration::from_secs(3);

/// `--full-duplex`: the client's datagrams counted here while a thread sends the server's stream
/// (stream 1) on a clone of the socket, then its end; the sender's output and cut, if it ran. An
/// ICMP port unreachable (read here) ends the sending at once; once the sending has ended, the
/// client's end may come for [`END_GRACE`].
fn both_ways(
    sock: &UdpSocket,
    (test, rx, seq64): (&Test, &Receiver<Passed>, bool),
    counted: &mut Counted,
) -> (Result<(), String>, Option<Sent>) {
    let shared = counted.shared;
    let Ok(clone) = sock.try_clone() else {
        return (receive(Some(sock), rx, (seq64, &mut None), counted), None);
    };
    let streams = [UdpStream::of_test(test, 1, Role::at_server, clone)];
    let (gone, sent) = (AtomicBool::new(false), Arc::new(AtomicBool::new(false)));
    counted.sent = Some(sent.clone());
    let outcome = std::thread::scope(|sc| {
        let sender = sc.spawn(|| {
            let out = super::udp_send::send_all(&streams, test, (shared, None, Some(&gone)));
            sent.store(true, Relaxed);
            out
        });
        let outcome = receive(Some(sock), rx, (seq64, &mut None), counted);
        if outcome.as_ref().is_err_and(|e| e == PORT_CLOSED) {
            gone.store(true, Relaxed);
        }
        (outcome, sender.join().ok())
    });
    counted.sent = None;
    outcome
}

/// The address a test's socket connected to its client sends from (the listener's may be every
/// address), an IPv4 one as IPv4.
pub(super) fn local_end(sock: &UdpSocket, bound: SocketAddr) -> SocketAddr {
    let a = sock.local_addr().unwrap_or(bound);
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// A datagram's arrival in seconds since the Unix epoch (the kernel's stamp when it gave one).
pub(super) fn arrival_s(stamp_ns: Option<u64>) -> f64 {
    stamp_ns.map_or_else(
        || {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        },
        |ns| ns as f64 / 1e9,
    )
}

/// A UDP stream's counts, and a sample of each interval closed so far (they run from its first
/// datagram's arrival); with a live view, the test so far goes out as each closes.
struct Counted<'a> {
    receipt: Receipt,
    /// An iperf 2 client's frames (`--isochronous`), as its server's lines count them.
    tally: Option<landspeed_iperf2::isoch::FrameTally>,
    step_s: f64,
    samples: Vec<IntervalSample>,
    live: Option<Live>,
    shared: &'a Shared,
    /// With `--full-duplex`: raised when the server's own stream has ended.
    sent: Option<Arc<AtomicBool>>,
}

impl<'a> Counted<'a> {
    fn new(test: &Test, shared: &'a Shared) -> Counted<'a> {
        Counted {
            receipt: Receipt::default(),
            tally: None,
            step_s: test.spec().interval_s.as_secs_f64(),
            samples: vec![],
            live: None,
            shared,
            sent: None,
        }
    }

    /// Closes every interval that ended by `now_s` (Unix seconds).
    fn close_until(&mut self, now_s: f64) {
        let Some(first) = self.receipt.first_arrival_s() else {
            return;
        };
        while self.step_s > 0.0 {
            let start = self.samples.len() as f64 * self.step_s;
            if now_s - first < start + self.step_s {
                return;
            }
            self.close(start + self.step_s);
        }
    }

    /// Closes the last interval at the stream's end, unless it is a sliver (under a tenth of an
    /// interval; its datagrams are in the total, as iperf 2's server prints it). A sliver is closed
    /// when the transits are binned or the frames tallied: the whole test's histogram and frames
    /// are its intervals' (iperf 2 prints no line for a sliver either way).
    fn finish(&mut self) {
        let start = self.samples.len() as f64 * self.step_s;
        let span = self.receipt.span_s();
        let sliver = span - start < 0.1 * self.step_s;
        let whole = self.receipt.binned() || self.tally.is_some();
        if self.step_s > 0.0 && span > start && (!sliver || whole) {
            self.close(span);
        }
    }

    fn close(&mut self, end_s: f64) {
        let start_s = self.samples.len() as f64 * self.step_s;
        let frames = self.tally.as_mut().map(|t| t.take_interval(end_s - start_s));
        let s = IntervalSample {
            index: self.samples.len() as u32,
            start_s: self.samples.len() as f64 * self.step_s,
            end_s,
            omitted: false,
            streams: vec![super::udp_receive::sample(0, &mut self.receipt, frames)],
        };
        if let Some(live) = &mut self.live {
            live.samples.push(s.clone());
            self.shared.emit(live.so_far());
        }
        self.samples.push(s);
    }
}

/// Counts the stream's datagrams until the client's end; or why it ended otherwise.
fn receive(
    sock: Option<&UdpSocket>,
    rx: &Receiver<Passed>,
    (seq64, frames): (bool, &mut Option<FrameReceipt>),
    c: &mut Counted,
) -> Result<(), String> {
    if let Some(s) = sock {
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    }
    let shared = c.shared;
    let running = landspeed_proto::Running::of(&shared.opts.limits);
    let (start, mut heard) = (Instant::now(), Instant::now());
    let mut sent_at: Option<Instant> = None;
    let mut buf = vec![0u8; 65536];
    // The end counts once, as its datagram (iperf 2's server counts the first and stops reading).
    let mut count = |b: &[u8], at: f64, c: &mut Counted| match Datagram::parse(b, seq64) {
        Ok(d) => {
            c.close_until(at);
            c.receipt.datagram(&d, b.len(), at);
            if let (Some(f), Some(p), false) = (frames.as_mut(), FramePayload::parse(b), d.is_fin()) {
                f.period(u64::from(p.period_us) * 1_000);
                f.datagram(&p.datagram(d.seq as u64, b.len(), (at * 1e9) as i128));
                if let Some(t) = c.tally.as_mut() {
                    t.datagram(&p, b.len(), at);
                }
            }
            if d.is_fin() {
                c.finish();
            }
            d.is_fin()
        }
        Err(_) => false,
    };
    loop {
        for (b, ns) in rx.try_iter() {
            heard = Instant::now();
            if count(&b, ns as f64 / 1e9, c) {
                return Ok(());
            }
        }
        match next(sock, rx, &mut buf) {
            Ok((n, at_s)) => {
                heard = Instant::now();
                if count(&buf[..n], at_s, c) {
                    return Ok(());
                }
            }
            Err(_) if heard.elapsed() >= shared.opts.idle_timeout => {
                return Err(format!(
                    "no datagram for {:?} and no end from the client",
                    shared.opts.idle_timeout
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Err(PORT_CLOSED.into()),
            Err(_) => c.close_until(arrival_s(None)),
        }
        if c.sent.as_ref().is_some_and(|s| s.load(Relaxed))
            && sent_at.get_or_insert_with(Instant::now).elapsed() > END_GRACE
        {
            return Err(format!(
                "no end from the client within {END_GRACE:?} of the server's"
            ));
        }
        if shared.shutdown.load(Relaxed) {
            return Err("server shutting down".into());
        }
        if let Err(cut) = running.check(c.receipt.bytes, start.elapsed()) {
            return Err(cut.to_string());
        }
    }
}

/// The next datagram and its arrival (Unix seconds): read on the test's socket, or without one
/// (a group's sender) passed by the listener; a timeout after 100 ms of nothing.
fn next(sock: Option<&UdpSocket>, rx: &Receiver<Passed>, buf: &mut [u8]) -> std::io::Result<(usize, f64)> {
    let Some(sock) = sock else {
        let (b, ns) = rx
            .recv_timeout(Duration::from_millis(100))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?;
        let n = b.len().min(buf.len());
        buf[..n].copy_from_slice(&b[..n]);
        return Ok((n, ns as f64 / 1e9));
    };
    landspeed_path::stamp::recv(sock, buf).map(|(n, _, stamp)| (n, arrival_s(stamp)))
}

/// Sends iperf 2's report (with a test of frames, landspeed's frame counts after it), again for each
/// datagram the client still sends (its end, repeated until a report comes back), at most
/// [`REPORTS`] times, until it is silent for [`SILENCE`].
pub(super) fn report(sock: &UdpSocket, r: &Receipt, (frames, extend): (Option<&FramesReport>, bool)) {
    let mut bytes = r.report(extend).encode().to_vec();
    if let Some(f) = frames {
        // The receiver's frame counts after iperf 2's report (which its client ignores).
        bytes.extend_from_slice(&landspeed_iperf2::isoch::encode_trailer(f));
    }
    let _ = sock.set_read_timeout(Some(SILENCE));
    let mut buf = vec![0u8; 65536];
    for _ in 0..REPORTS {
        let _ = sock.send(&bytes);
        if sock.recv(&mut buf).is_err() {
            return;
        }
    }
}

/// The test as this server saw it: its stream received, with iperf 2's counts, and with
/// `--full-duplex` the stream it sent (`sent`); the client's side inferred (it sent at least the
/// highest numbered datagram; it received what was sent).
fn result(
    c: &Counted,
    sent: Option<&EngineOutput>,
    (test, header): (&Test, &ClientHeader),
    addresses: (SocketAddr, SocketAddr),
    started: SystemTime,
) -> landspeed_core::result::RunResult {
    let r = &c.receipt;
    let mut mine = received_stream(r, Flow::ClientToServer);
    mine.peer_port = Some(addresses.1.port());
    let mut warnings = vec![
        "iperf 2's protocol carries no figures from the client: its datagrams sent are the highest number that arrived here".to_string(),
        "iperf 2's payload is not landspeed's: nothing was verified".into(),
        "loss, out of order and jitter are counted as iperf 2's server counts them (docs/iperf2.md)".into(),
    ];
    if sent.is_some() {
        warnings.push("iperf 2's UDP --full-duplex sends no report back: what the client received (its loss, jitter, order) is in its own output; its side here is inferred as everything sent".into());
    }
    let mut here = EndpointReport {
        software: format!(
            "landspeed {} (iperf 2's protocol)",
            landspeed_core::SOFTWARE_VERSION
        ),
        streams: vec![mine],
        elapsed_s: r.span_s(),
        threads: 1,
        host: landspeed_engine::host::host_info(),
        warnings,
        ..EndpointReport::default()
    };
    let mut client = EndpointReport {
        software: super::server::client_software(header),
        streams: vec![StreamReport {
            bytes: r.bytes,
            // At least the highest numbered datagram was sent.
            calls: r.highest,
            ..StreamReport::empty(0, Flow::ClientToServer, Role::Sender)
        }],
        elapsed_s: r.span_s(),
        ..EndpointReport::default()
    };
    let mut samples = c.samples.clone();
    if let Some(out) = sent {
        let report = out.report(None, vec![]);
        here.elapsed_s = here.elapsed_s.max(report.elapsed_s);
        client.elapsed_s = here.elapsed_s;
        for s in report.streams {
            client.streams.push(crate::dial::inferred(&s));
            here.streams.push(s);
        }
        // Each interval of the stream sent beside the same interval of the one received.
        for (mine, theirs) in samples.iter_mut().zip(&out.samples) {
            mine.streams.extend(theirs.streams.iter().cloned());
        }
    }
    landspeed_core::assemble::assemble(&landspeed_core::assemble::Inputs {
        spec: test,
        context: super::server::iperf2_context((Some(addresses.0), Some(addresses.1)), started, 1),
        client: &client,
        server: &here,
        client_samples: &[],
        server_samples: &samples,
    })
}

/// iperf 2's arrivals in the result's units.
pub(super) fn transit(a: &landspeed_iperf2::receipt::Arrivals) -> landspeed_core::udp::TransitSummary {
    landspeed_core::udp::TransitSummary {
        datagrams: a.datagrams,
        mean_ms: a.mean_s * 1e3,
        min_ms: a.min_s * 1e3,
        max_ms: a.max_s * 1e3,
        stddev_ms: a.stddev_s * 1e3,
        per_s: a.per_s,
    }
}

/// A stream this end received, counted as iperf 2 counts it (`r`): its bytes, its span from the
/// first datagram, and its datagrams sent (the highest number), received, lost, out of order and
/// jitter.
pub(super) fn received_stream(r: &Receipt, flow: Flow) -> StreamReport {
    let lost = r.lost();
    let udp = landspeed_core::udp::UdpStats {
        datagrams_sent: Some(r.highest),
        datagrams_received: r.received,
        datagrams_lost: lost,
        loss_pct: if r.highest > 0 {
            lost as f64 * 100.0 / r.highest as f64
        } else {
            0.0
        },
        out_of_order: r.out_of_order,
        duplicates: 0,
        jitter_ms: r.jitter_s * 1000.0,
        socket_drops: None,
        ce_marked: None,
        lost_in_receiver: None,
        lost_in_sender: None,
        transit: (r.received > 0).then(|| transit(&r.arrivals())),
    };
    StreamReport {
        bytes: r.bytes,
        first_byte_s: Some(0.0),
        last_byte_s: Some(r.span_s()),
        udp: Some(udp),
        ..StreamReport::empty(0, flow, Role::Receiver)
    }
}
