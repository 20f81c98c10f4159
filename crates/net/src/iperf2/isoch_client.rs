//! `landspeed run --iperf2 -u --isochronous FPS:MEAN,STDDEV`: video-like frames in iperf 2's
//! protocol, against `iperf -s -u` (2.1.x) or `landspeed serve`. Each stream is a thread with a
//! socket of its own: at each frame's slot (`core::frames::FrameClock`) it draws the frame's size
//! (`FrameSizes`, log-normal as iperf 2 draws it) and sends the frame back to back in datagrams of
//! at most `-l` bytes, each carrying iperf 2's prefix, the client's header (ISOCH set, 108 bytes
//! declared) and the frame's fields (`landspeed_iperf2::isoch`); a frame whose slot has passed when
//! the sender comes back for it is skipped (a slip). The last datagram of a frame is at least 108
//! bytes, its `remaining` its own length. When the time (or `-n`) is up, each stream sends iperf 2's
//! end and takes the server's report, as the steady UDP client does (`udp_client`). The result's
//! `frames` holds the sender's side (frames, skipped, slips); iperf 2's report carries no frame
//! figures, so the receiver's are in the server's own output (`iperf -s -e`, or `landspeed serve`'s
//! log, which counts them: `udp`).

use super::udp_client::{end_all, ended, unix_ns};
use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions};
use landspeed_core::config::{EndCondition, Flow, Test};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport, StreamSample};
use landspeed_core::frames::{
    FrameClock, FrameSizes, FrameSpec, FramesInterval, FramesReport, FramesSent, Tick,
};
use landspeed_iperf2::isoch::{write_start, FramePayload, MIN_DATAGRAM, START_AT};
use landspeed_iperf2::{Amount, ClientHeader};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// What one stream sent.
#[derive(Debug, Default)]
pub(super) struct Sent {
    /// Datagrams (UDP) or write calls (TCP).
    datagrams: u64,
    frames: u64,
    bytes: u64,
    send_errors: u64,
    pub(super) error: Option<String>,
    first_s: Option<f64>,
    last_s: Option<f64>,
}

impl Sent {
    /// Writes (or datagrams) and bytes, for tests.
    #[cfg(test)]
    pub(super) fn frames_written(&self) -> (u64, u64) {
        (self.datagrams, self.bytes)
    }

    /// `n` bytes went out in one datagram or write, counted here and in the stream's counters.
    pub(super) fn wrote(&mut self, n: usize, plan: &Plan) {
        self.datagrams += 1;
        self.bytes += n as u64;
        plan.counter[BYTES].fetch_add(n as u64, Relaxed);
        plan.counter[WRITES].fetch_add(1, Relaxed);
        let at = plan.t0.elapsed().as_secs_f64();
        self.first_s.get_or_insert(at);
        self.last_s = Some(at);
    }
}

/// Runs an isochronous test against an iperf 2 server; `spec.frames` is set.
pub(crate) fn run_frames(
    opts: &ClientOptions,
    spec: &Test,
    frames: FrameSpec,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<landspeed_core::result::RunResult, ClientError> {
    let header = frame_header(spec, opts.port, frames, opts.trip_times)?;
    let started_unix_s = unix_ns() as f64 / 1e9;
    let (socks, local, addr) = open(opts, spec)?;
    // Each stream's own port, for its connection's line.
    let locals: Vec<SocketAddr> = socks.iter().map(|s| s.local_addr().unwrap_or(local)).collect();
    let mut warnings = super::client::started_udp(
        on_event,
        (&locals, super::client::udp_facts(socks.iter())),
        (addr, spec.streams),
        None,
    );
    // Each stream's bytes, datagrams, frames, frames skipped and slips so far, for the intervals.
    let counters: Vec<Counters> = (0..spec.streams).map(|_| Counters::default()).collect();
    let t0 = Instant::now();
    let (sent, samples) = std::thread::scope(|s| {
        let handles: Vec<_> = socks
            .iter()
            .zip(&counters)
            .map(|(sock, counter)| {
                let plan = Plan {
                    spec,
                    frames,
                    header: &header,
                    t0,
                    counter,
                    trip_times: opts.trip_times,
                };
                s.spawn(move || send_frames(&mut Datagrams::new(sock, &plan), &plan, interrupt))
            })
            .collect();
        let samples = sample_while(&handles, &counters, (spec, t0), &|_| None, on_event);
        let sent: Vec<Sent> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (sent, samples)
    });
    let answered = reports(&socks, &sent, (&header, spec), &mut warnings);
    let received: Vec<FramesReport> = answered.iter().flatten().filter_map(|(_, f)| f.clone()).collect();
    let reports: Vec<_> = answered.into_iter().map(|r| r.map(|(r, _)| r)).collect();
    if received.is_empty() {
        warnings.push("the server's report carries no frame figures (iperf 2's does not): the frames received, lost and late are in its own output (iperf -s -u -e --trip-times)".into());
    }
    let mut here = here_report(&sent, t0.elapsed().as_secs_f64(), warnings);
    for (r, l) in here.streams.iter_mut().zip(&locals) {
        r.local_port = Some(l.port());
    }
    let server = ended(&mut here, spec, &reports);
    let ends = super::client::Ends::at_end((local, addr), started_unix_s, interrupt);
    let mut result = super::client::assembled(opts, spec, &ends, (&here, &server), &samples);
    result.frames = Some(FramesReport {
        fps: frames.fps,
        period_ms: frames.period_ns() as f64 / 1e6,
        sender: Some(sender_side(frames, &sent, &counters)),
        sender_streams: each_sender(frames, &sent, &counters),
        ..merged(&received, socks.len())
    });
    Ok(result)
}

/// Each stream's socket, connected to the server; the first's address and the server's.
fn open(opts: &ClientOptions, spec: &Test) -> Result<(Vec<UdpSocket>, SocketAddr, SocketAddr), ClientError> {
    let addr = resolve(opts)?;
    let socks = (0..spec.streams)
        .map(|id| {
            crate::dial::udp_socket(opts, addr, spec, id).map_err(|err| ClientError::Stream { id, err })
        })
        .collect::<Result<Vec<UdpSocket>, _>>()?;
    let local = socks[0]
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    Ok((socks, local, addr))
}

/// The receiver's frame counts from every stream's report (landspeed's server sends them): one
/// stream's as they came; several streams' counts added, their latency's least and most kept and its
/// mean weighted by whole frames (percentiles of separate streams do not add: none). Zero counts when
/// no report carried any (iperf 2's server).
fn merged(received: &[FramesReport], streams: usize) -> FramesReport {
    if received.len() == 1 && streams == 1 {
        return received[0].clone();
    }
    let mut out = FramesReport::default();
    let (mut weighted, mut whole) = (0.0, 0u64);
    for f in received {
        out.frames += f.frames;
        out.complete += f.complete;
        out.lost += f.lost;
        out.skipped_by_sender += f.skipped_by_sender;
        out.cut_at_end += f.cut_at_end;
        out.late += f.late;
        out.clock_behind += f.clock_behind;
        let l = &f.latency;
        out.latency.min_ms = [out.latency.min_ms, l.min_ms]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        out.latency.max_ms = [out.latency.max_ms, l.max_ms]
            .into_iter()
            .flatten()
            .reduce(f64::max);
        if let Some(m) = l.mean_ms {
            weighted += m * f.complete as f64;
            whole += f.complete;
        }
    }
    out.latency.mean_ms = (whole > 0).then(|| weighted / whole as f64);
    out
}

/// Each stream's end and the server's report, with the receiver's frame counts when it sends them
/// (a warning for each report that never came).
fn reports(
    socks: &[UdpSocket],
    sent: &[Sent],
    (header, spec): (&[u8], &Test),
    warnings: &mut Vec<String>,
) -> Vec<Option<(landspeed_iperf2::ServerReport, Option<FramesReport>)>> {
    let used: Vec<u64> = sent.iter().map(|s| s.datagrams + s.send_errors).collect();
    let reports = end_all(socks.iter(), (header, spec.length_bytes as usize), &used);
    for (id, r) in reports.iter().enumerate() {
        if r.is_none() {
            warnings.push(format!("stream {id}: no report from the server after 10 ends"));
        }
    }
    reports
}

/// A stream's running counts, indexed by the constants below.
pub(super) type Counters = [AtomicU64; 5];
const BYTES: usize = 0;
/// Datagrams (UDP) or write calls (TCP).
const WRITES: usize = 1;
const FRAMES: usize = 2;
/// Frames skipped and slips: the sender's clock's totals, stored as they change.
const SKIPPED: usize = 3;
const SLIPS: usize = 4;

/// What every stream's thread shares.
pub(super) struct Plan<'a> {
    pub(super) spec: &'a Test,
    pub(super) frames: FrameSpec,
    /// UDP: the header each datagram carries (TCP's went once, when the connection opened).
    pub(super) header: &'a [u8],
    pub(super) t0: Instant,
    pub(super) counter: &'a Counters,
    pub(super) trip_times: bool,
}

/// One frame to send.
pub(super) struct Frame {
    pub(super) tick: Tick,
    /// Its size, bytes (drawn at least the carrier's least).
    pub(super) size: u32,
    /// When the first frame went: Unix seconds and microseconds.
    pub(super) start: (u32, u32),
    pub(super) period_us: u32,
}

/// How a stream's frames leave: in datagrams (UDP) or as one burst each (TCP, `isoch_tcp`).
pub(super) trait Carrier {
    /// The least a frame can be: what its framing takes.
    const MIN_FRAME: u64;
    /// Sends `frame`, at most `budget` bytes of it (taken off) and before `deadline`, counting
    /// into `out` (`Sent::wrote`); an error ends the stream.
    fn frame(
        &mut self,
        frame: &Frame,
        plan: &Plan,
        limits: (&mut u64, Instant),
        out: &mut Sent,
    ) -> Result<(), String>;
}

/// iperf 2's header for frames: a UDP sender's, with UDPTESTS, ISOCH and 108 bytes declared.
fn frame_header(spec: &Test, port: u16, frames: FrameSpec, trip_times: bool) -> Result<Vec<u8>, ClientError> {
    let not = |what: String| ClientError::NotWithIperf2 { what };
    if spec.direction != landspeed_core::config::Direction::Forward {
        return Err(not(
            "isochronous frames with -R or --bidir (the client sends them)".into(),
        ));
    }
    if (spec.length_bytes as usize) < MIN_DATAGRAM {
        return Err(not(format!(
            "{}-byte datagrams for frames: each carries iperf 2's {MIN_DATAGRAM}-byte prefix, header and frame fields (-l {MIN_DATAGRAM} or more)",
            spec.length_bytes
        )));
    }
    let amount = match spec.end {
        EndCondition::Time(t) => {
            Amount::Centiseconds(u32::try_from(t.as_millis().div_ceil(10)).unwrap_or(u32::MAX))
        }
        EndCondition::Bytes(b) => {
            Amount::Bytes(b.div_ceil(u64::from(spec.streams)).min((1 << 31) - 1) as u32)
        }
        EndCondition::Blocks(_) => return Err(not("a block count (-k) with frames; give -n or -t".into())),
    };
    let length = u32::try_from(spec.length_bytes).map_err(|_| not("so long a datagram".into()))?;
    let mut h = ClientHeader::for_isochronous_sender(port, length, frames.mean_bps as u64, amount);
    h.threads = spec.streams;
    // The type of service asked (`-S`), which iperf 2's server shows (`(tos rx=0x10)`).
    if let Some(e) = h.extension.as_mut() {
        e.tos = spec.tos.map_or(0, u16::from);
    }
    if let (true, Some(e)) = (trip_times, h.extension.as_mut()) {
        e.upper |= landspeed_iperf2::header::upper::TRIPTIME;
    }
    Ok(h.encode())
}

/// One stream's frames until the time or its bytes are up, or the test is interrupted.
pub(super) fn send_frames<C: Carrier>(carrier: &mut C, plan: &Plan, interrupt: &AtomicBool) -> Sent {
    let spec = plan.spec;
    let deadline = match spec.end {
        EndCondition::Time(t) => plan.t0 + t,
        // -n: twice the time the frames' mean rate takes to send it, and 10 s.
        EndCondition::Bytes(b) | EndCondition::Blocks(b) => {
            let s = 2.0 * b as f64 * 8.0 / plan.frames.mean_bps / f64::from(spec.streams) + 10.0;
            plan.t0 + Duration::from_secs_f64(s.min(86_400.0))
        }
    };
    let mut budget = match spec.end {
        EndCondition::Bytes(b) => b.div_ceil(u64::from(spec.streams)),
        _ => u64::MAX,
    };
    let mut sizes = FrameSizes::new(plan.frames, C::MIN_FRAME, FrameSizes::any_seed());
    let mut clock = FrameClock::new(plan.frames.period_ns());
    let (mut out, mut start) = (Sent::default(), None);
    while budget > 0 && !interrupt.load(Relaxed) {
        let tick = clock.next(mono_ns(plan.t0));
        plan.counter[SKIPPED].store(clock.skipped(), Relaxed);
        plan.counter[SLIPS].store(clock.slips(), Relaxed);
        if !sleep_until(plan.t0 + Duration::from_nanos(tick.due_ns), deadline, interrupt) {
            break;
        }
        let frame = Frame {
            tick,
            size: sizes.next_bytes().min(u64::from(u32::MAX)) as u32,
            start: *start.get_or_insert_with(unix_start),
            period_us: (plan.frames.period_ns() / 1_000) as u32,
        };
        out.frames += 1;
        plan.counter[FRAMES].fetch_add(1, Relaxed);
        if let Err(e) = carrier.frame(&frame, plan, (&mut budget, deadline), &mut out) {
            out.error = Some(e);
            break;
        }
    }
    out
}

/// A UDP stream's frames: each in datagrams of at most `-l` bytes, each carrying iperf 2's prefix,
/// the client's header and the frame's fields.
struct Datagrams<'a> {
    sock: &'a UdpSocket,
    buf: Vec<u8>,
    /// The next datagram's number.
    seq: i64,
    /// The start time is written (with `--trip-times`, once).
    started: bool,
}

impl<'a> Datagrams<'a> {
    fn new(sock: &'a UdpSocket, plan: &Plan) -> Datagrams<'a> {
        let mut buf = vec![0u8; plan.spec.length_bytes as usize];
        let prefix = landspeed_iperf2::udp::PREFIX_BYTES;
        buf[prefix..prefix + plan.header.len()].copy_from_slice(plan.header);
        Datagrams {
            sock,
            buf,
            seq: 1,
            started: false,
        }
    }
}

impl Carrier for Datagrams<'_> {
    const MIN_FRAME: u64 = MIN_DATAGRAM as u64;

    fn frame(
        &mut self,
        f: &Frame,
        plan: &Plan,
        (budget, deadline): (&mut u64, Instant),
        out: &mut Sent,
    ) -> Result<(), String> {
        if plan.trip_times && !std::mem::replace(&mut self.started, true) && self.buf.len() >= START_AT + 8 {
            write_start(&mut self.buf, f.start);
        }
        let mut payload = FramePayload {
            period_us: f.period_us,
            start_s: f.start.0,
            start_us: f.start.1,
            prev: f.tick.prev,
            frame: f.tick.frame,
            size: f.size,
            remaining: f.size,
        };
        let mut left = u64::from(f.size);
        let gap = Duration::from_nanos(plan.frames.ipg_ns);
        let mut due = Instant::now();
        while left > 0 && *budget > 0 && Instant::now() < deadline {
            // --ipg: each datagram of the frame a gap after the one before (iperf 2's inter-packet
            // gap within a frame); without it, back to back.
            if !gap.is_zero() && !sleep_until(due, deadline, &AtomicBool::new(false)) {
                break;
            }
            due += gap;
            let len = (left.min(self.buf.len() as u64) as usize).max(MIN_DATAGRAM);
            payload.remaining = left.max(len as u64) as u32;
            payload.write(&mut self.buf);
            landspeed_engine::transport::udp::iperf2_prefix(self.seq, unix_ns(), &mut self.buf);
            match self.sock.send(&self.buf[..len]) {
                Ok(n) => out.wrote(n, plan),
                // A full queue (ENOBUFS): the datagram is skipped and its number used, as the
                // steady client does; a thousand of them end the stream.
                Err(_) if out.send_errors < 1_000 => out.send_errors += 1,
                Err(e) => return Err(format!("send: {e}")),
            }
            self.seq += 1;
            left = left.saturating_sub(len as u64);
            *budget = budget.saturating_sub(len as u64);
        }
        Ok(())
    }
}

/// Now as iperf 2's start time: Unix seconds and microseconds.
fn unix_start() -> (u32, u32) {
    let now = unix_ns();
    ((now / 1_000_000_000) as u32, (now / 1_000 % 1_000_000) as u32)
}

/// Sleeps until `at` (true), or returns false when `deadline` comes first or the test is
/// interrupted; checks the flag every 50 ms.
fn sleep_until(at: Instant, deadline: Instant, interrupt: &AtomicBool) -> bool {
    loop {
        let now = Instant::now();
        if now >= deadline || interrupt.load(Relaxed) {
            return false;
        }
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(50)).min(deadline - now));
    }
}

/// Cumulative bytes of every stream at each interval's end (and over TCP its TCP_INFO, `tcp`'s of
/// stream k), while the senders run; each interval also told as it closes.
pub(super) fn sample_while(
    handles: &[std::thread::ScopedJoinHandle<'_, Sent>],
    counters: &[Counters],
    (spec, t0): (&Test, Instant),
    tcp: &dyn Fn(usize) -> Option<landspeed_core::endpoint::TcpSnapshot>,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Vec<IntervalSample> {
    let udp = spec.transport == landspeed_core::config::Transport::Udp;
    let step = spec.interval_s.max(Duration::from_millis(100));
    let mut samples: Vec<IntervalSample> = vec![];
    let mut live = crate::dial::LiveIntervals::default();
    let mut before = vec![[0u64; 5]; counters.len()];
    let mut next = t0 + step;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        let done = handles.iter().all(|h| h.is_finished());
        if now >= next || done {
            let end = if done { now } else { next };
            let sample = IntervalSample {
                index: samples.len() as u32,
                start_s: (next - step - t0).as_secs_f64(),
                end_s: (end - t0).as_secs_f64(),
                omitted: false,
                streams: counters
                    .iter()
                    .enumerate()
                    .map(|(id, c)| StreamSample {
                        id: id as u32,
                        bytes: c[BYTES].load(Relaxed),
                        tcp: tcp(id),
                        udp: None,
                        reads: None,
                        trips: None,
                        trip_bins: None,
                    })
                    .collect(),
            };
            let mut interval = live.convert(&sample, |_| true);
            for (st, (c, was)) in interval.streams.iter_mut().zip(counters.iter().zip(&mut before)) {
                let now: [u64; 5] = std::array::from_fn(|i| c[i].load(Relaxed));
                let d = |i: usize| now[i] - was[i];
                st.datagrams_sent = udp.then(|| d(WRITES));
                st.frames = Some(FramesInterval {
                    sent: d(FRAMES),
                    skipped: d(SKIPPED),
                    slips: d(SLIPS),
                    writes: d(WRITES),
                });
                *was = now;
            }
            on_event(ClientEvent::Interval {
                flow: Flow::ClientToServer,
                interval,
            });
            samples.push(sample);
            next += step;
        }
        if done {
            return samples;
        }
    }
}

/// This end's report: each stream's bytes, datagrams and span.
pub(super) fn here_report(sent: &[Sent], elapsed_s: f64, mut warnings: Vec<String>) -> EndpointReport {
    let streams = sent
        .iter()
        .enumerate()
        .map(|(id, s)| {
            if let Some(e) = &s.error {
                warnings.push(format!("stream {id}: {e}"));
            }
            StreamReport {
                bytes: s.bytes,
                calls: s.datagrams,
                send_errors: s.send_errors,
                first_byte_s: s.first_s,
                last_byte_s: s.last_s,
                error: s.error.clone(),
                ..StreamReport::empty(id as u32, Flow::ClientToServer, Role::Sender)
            }
        })
        .collect();
    EndpointReport {
        software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
        streams,
        elapsed_s,
        threads: sent.len() as u32,
        host: landspeed_engine::host::host_info(),
        warnings,
        ..EndpointReport::default()
    }
}

/// The frames every stream sent, skipped and slipped (the last two from the counters each sender
/// kept its clock's totals in).
pub(super) fn sender_side(frames: FrameSpec, sent: &[Sent], counters: &[Counters]) -> FramesSent {
    let total = |i: usize| counters.iter().map(|c| c[i].load(Relaxed)).sum();
    FramesSent {
        spec: Some(frames),
        frames: sent.iter().map(|s| s.frames).sum(),
        skipped: total(SKIPPED),
        slips: total(SLIPS),
        bytes: sent.iter().map(|s| s.bytes).sum(),
        datagrams: sent.iter().map(|s| s.datagrams).sum(),
    }
}

/// With more than one stream, each stream's own sender side (iperf 2 prints each one's frames on
/// its total line); none with one.
pub(super) fn each_sender(frames: FrameSpec, sent: &[Sent], counters: &[Counters]) -> Vec<FramesSent> {
    if sent.len() < 2 {
        return Vec::new();
    }
    (sent.iter().zip(counters))
        .map(|(s, c)| sender_side(frames, std::slice::from_ref(s), std::slice::from_ref(c)))
        .collect()
}

/// Nanoseconds since `t0`.
pub(super) fn mono_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frames_datagrams_go_a_gap_apart_with_ipg_and_back_to_back_without() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let spec: Test = landspeed_core::config::TestSpec {
            length_bytes: 1000,
            transport: landspeed_core::config::Transport::Udp,
            ..Default::default()
        }
        .validated()
        .unwrap();
        let counter = Counters::default();
        // A frame of 4,000 bytes: four datagrams, 5 ms apart with --ipg 5.
        for (ipg_ms, least_ms) in [(5, 15), (0, 0)] {
            let plan = Plan {
                spec: &spec,
                frames: FrameSpec {
                    ipg_ns: ipg_ms * 1_000_000,
                    ..FrameSpec::DEFAULT
                },
                header: &[],
                t0: Instant::now(),
                counter: &counter,
                trip_times: false,
            };
            let f = Frame {
                tick: landspeed_core::frames::Tick {
                    frame: 1,
                    prev: 0,
                    due_ns: 0,
                },
                size: 4_000,
                start: (7, 8),
                period_us: 16_667,
            };
            let (mut budget, far) = (u64::MAX, Instant::now() + Duration::from_secs(10));
            let started = Instant::now();
            let mut out = Sent::default();
            Datagrams::new(&tx, &plan)
                .frame(&f, &plan, (&mut budget, far), &mut out)
                .unwrap();
            // A sleep never ends early: three gaps at least (no upper bound: the machine may be busy).
            assert!(
                started.elapsed() >= Duration::from_millis(least_ms),
                "{ipg_ms} ms"
            );
            let mut buf = [0u8; 2048];
            let sizes: Vec<usize> = (0..4).map(|_| rx.recv(&mut buf).unwrap()).collect();
            assert_eq!(sizes, [1000; 4], "{ipg_ms} ms");
        }
    }
}
