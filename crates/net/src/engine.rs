//! The data engine: moves bytes on a set of data connections with worker threads, and samples them.
//!
//! Streams are spread round-robin over worker threads (optionally pinned to CPUs); each worker drives its
//! sockets non-blocking through one epoll instance, with one send and one receive buffer allocated
//! before the test. Per buffer the hot loop does one system call, one clock read and one relaxed atomic
//! store of the stream's byte count: no locks, no allocation, no formatting. The calling thread samples
//! the counters and TCP_INFO at each interval boundary, and also serves as the place where the driver's
//! control messages are handled (they arrive on the same wake-up channel as worker completions).
//!
//! Ending honestly: a sender stops at its byte budget or deadline and shuts down its write side; a
//! receiver reads until end-of-file. So when every worker is done, every byte written has been read and
//! counted, and the final sample equals the totals.

mod uring;

use crate::cpu::CpuSnapshot;
use crate::host::NetSnapshot;
use crate::tcp_info;
use crate::zerocopy::ZcSender;
use landspeed_core::config::Flow;
use landspeed_core::endpoint::{
    CpuTimes, InterfaceCounters, IntervalSample, Role, StreamReport, StreamSample,
};
use landspeed_core::payload::{Corruption, Generator, Pattern, Verifier};
use landspeed_core::stats::SampleSchedule;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// One data connection and what this end does with it.
pub struct DataStream {
    pub id: u32,
    pub flow: Flow,
    pub role: Role,
    pub socket: TcpStream,
    /// Sender only: stop after exactly this many bytes.
    pub budget: Option<u64>,
    /// Disk-to-disk tests: the sender sends this file (sendfile), the receiver writes into it (splice).
    pub file: Option<std::sync::Arc<std::fs::File>>,
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineParams {
    pub length: usize,
    /// Senders stop this long after the start (None: budgets end the test).
    pub send_time: Option<Duration>,
    pub interval: Duration,
    pub omit: Duration,
    pub threads: usize,
    pub cpus: Option<Vec<usize>>,
    /// A stream that moves no byte for this long fails.
    pub idle_timeout: Duration,
    /// The run's payload; senders always write it.
    pub pattern: Pattern,
    /// Receivers check every byte against it.
    pub verify: bool,
    /// Receivers drop data in the kernel without copying it (MSG_TRUNC); never with `verify`.
    pub discard: bool,
    /// Senders use MSG_ZEROCOPY.
    pub zerocopy: bool,
    /// io_uring instead of epoll, with this many operations queued per stream.
    pub uring: bool,
    pub queue_depth: usize,
    /// Each stream moves at most this many bits per second (a server's `--max-rate`, split over the
    /// streams): senders write and receivers read no faster, so TCP's flow control slows the peer.
    pub stream_cap_bps: Option<f64>,
}

/// What a capped stream may run ahead of its rate.
const CAP_BURST: f64 = 256.0 * 1024.0;

impl EngineParams {
    /// The engine settings for one end of a test: `threads` defaults to one per stream up to the core
    /// count; the payload and receive mode come from the spec both ends agreed on.
    pub fn for_spec(
        spec: &landspeed_core::config::TestSpec,
        threads: Option<usize>,
        cpus: Option<Vec<usize>>,
        idle_timeout: Duration,
    ) -> EngineParams {
        let ncpu = crate::cpu::cpu_count() as usize;
        EngineParams {
            length: spec.length_bytes as usize,
            send_time: spec.send_time(),
            interval: spec.interval_s,
            omit: spec.omit_s,
            threads: threads.unwrap_or_else(|| (spec.total_streams() as usize).min(ncpu)),
            cpus,
            idle_timeout,
            pattern: Pattern::new(spec.payload_key),
            verify: spec.verify && spec.file.is_none(),
            discard: spec.rx == landspeed_core::config::RxMode::Discard,
            zerocopy: spec.tx == landspeed_core::config::TxMode::Zerocopy,
            uring: spec.io == landspeed_core::config::IoBackend::Uring,
            queue_depth: spec.queue_depth as usize,
            stream_cap_bps: None,
        }
    }
}

/// Flags the driver raises while the engine runs.
#[derive(Debug, Default)]
pub struct Flags {
    /// Senders stop early (Ctrl-C, or the peer asked); receivers still drain.
    pub stop: AtomicBool,
    /// Everything stops now (the peer vanished or broke the protocol).
    pub abort: AtomicBool,
    /// Everything stops now, without error: iperf3's protocol ends a test by a control message, not by
    /// the data streams ending, and what is still in flight is not counted.
    pub halt: AtomicBool,
}

/// How far one end has got, as the sampling thread sees it.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Bytes received so far on all receiving streams.
    pub received: u64,
    /// Every sending stream has finished (true when there are none).
    pub senders_done: bool,
}

/// What wakes the sampling thread.
pub enum Wake<X> {
    WorkerDone,
    External(X),
}

/// Callbacks from the sampling thread to the driver.
pub trait EngineHook<X> {
    fn on_sample(&mut self, sample: &IntervalSample);
    fn on_external(&mut self, x: X, flags: &Flags);
    /// Called on every wake-up of the sampling thread (at least every 100 ms): the place to turn outside
    /// conditions (Ctrl-C, server shutdown) into flags.
    fn on_tick(&mut self, _flags: &Flags) {}
    /// Called once when `flags.stop` is first seen raised.
    fn on_stop(&mut self) {}
    /// Called on every wake-up with how far this end has got.
    fn on_progress(&mut self, _progress: Progress, _flags: &Flags) {}
}

/// Everything the engine measured.
pub struct EngineOutput {
    pub streams: Vec<StreamReport>,
    pub samples: Vec<IntervalSample>,
    pub elapsed_s: f64,
    pub cpu: CpuTimes,
    pub interface: Option<InterfaceCounters>,
    pub threads: u32,
}

impl EngineOutput {
    /// This end's report for the results exchange and the result.
    pub fn report(
        &self,
        cpus_pinned: Option<Vec<usize>>,
        warnings: Vec<String>,
    ) -> landspeed_core::endpoint::EndpointReport {
        landspeed_core::endpoint::EndpointReport {
            file: None,
            software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
            streams: self.streams.clone(),
            cpu: self.cpu.clone(),
            host: landspeed_core::endpoint::HostInfo {
                nic: self.interface.as_ref().map(|i| crate::host::nic_info(&i.name)),
                ..crate::host::host_info()
            },
            interface: self.interface.clone(),
            elapsed_s: self.elapsed_s,
            threads: self.threads,
            cpus_pinned,
            warnings,
            error: None,
        }
    }
}

#[repr(align(128))]
#[derive(Default)]
struct Counter {
    bytes: AtomicU64,
    finished: AtomicBool,
}

#[derive(Default)]
struct WorkerStream {
    bytes: u64,
    calls: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    error: Option<String>,
    verified: u64,
    corrupt_blocks: u64,
    last_bad_block: Option<u64>,
    first_corruption: Option<Corruption>,
    zc_sends: u64,
    zc_copied: u64,
}

impl WorkerStream {
    /// Checks `data`, just read at the stream's current offset, and records what was wrong.
    fn verify(&mut self, v: &mut Verifier, id: u32, data: &[u8]) {
        if let Some(c) = v.check(id, self.bytes, data) {
            for b in c.bad_blocks {
                // A block split over two reads is counted once.
                if self.last_bad_block.is_none_or(|l| b > l) {
                    self.corrupt_blocks += 1;
                    self.last_bad_block = Some(b);
                }
            }
            self.first_corruption.get_or_insert(c.first);
        }
        self.verified += data.len() as u64;
    }
}

struct State<'a> {
    ds: &'a DataStream,
    counter: &'a Counter,
    ready: bool,
    done: bool,
    remaining: Option<u64>,
    out: WorkerStream,
    last_progress: Instant,
    /// MSG_ZEROCOPY state, for senders when asked.
    zc: Option<ZcSender>,
    /// Receivers into a file: the pipe splice(2) goes through.
    splicer: Option<crate::files::Splicer>,
}

impl<'a> State<'a> {
    fn new(ds: &'a DataStream, counter: &'a Counter, now: Instant) -> Self {
        State {
            ds,
            counter,
            ready: true,
            done: false,
            remaining: ds.budget,
            out: WorkerStream::default(),
            last_progress: now,
            zc: None,
            splicer: None,
        }
    }

    /// One send: from the zerocopy ring when it has a free buffer, else a plain copying send.
    fn send(&mut self, gen: &mut Option<Generator>, n: usize) -> std::io::Result<usize> {
        let (id, off, sock) = (self.ds.id, self.out.bytes, &self.ds.socket);
        if let Some(f) = &self.ds.file {
            return crate::files::send_chunk(sock, f, off, n);
        }
        match (self.zc.as_mut(), gen.as_mut()) {
            (Some(zc), _) => {
                if !zc.can_send() {
                    zc.reap(sock)?;
                }
                if !zc.can_send() {
                    return Err(ErrorKind::WouldBlock.into());
                }
                zc.send(sock, id, off, n)
            }
            (None, Some(g)) => (&self.ds.socket).write(g.fill(id, off, n)),
            (None, None) => Err(std::io::Error::other("no payload generator")),
        }
    }

    /// One receive: into `rbuf` (or dropped with `discard`), or spliced into the stream's file.
    fn recv(&mut self, rbuf: &mut [u8], discard_it: bool) -> std::io::Result<usize> {
        if let Some(f) = &self.ds.file {
            if self.splicer.is_none() {
                self.splicer = Some(crate::files::Splicer::new()?);
            }
            let s = self.splicer.as_mut().expect("just set");
            return s.recv(&self.ds.socket, f, self.out.bytes, rbuf.len().max(64 << 10));
        }
        if discard_it {
            discard(&self.ds.socket, rbuf.len())
        } else {
            (&self.ds.socket).read(rbuf)
        }
    }

    fn account(&mut self, n: usize, now: Instant) {
        self.out.bytes += n as u64;
        self.out.calls += 1;
        self.out.first.get_or_insert(now);
        self.out.last = Some(now);
        self.last_progress = now;
        self.counter.bytes.store(self.out.bytes, Relaxed);
        if let Some(r) = self.remaining.as_mut() {
            *r -= n as u64;
        }
    }

    fn finish(&mut self, error: Option<String>) {
        self.counter.finished.store(true, Relaxed);
        if self.ds.role == Role::Sender {
            let _ = self.ds.socket.shutdown(Shutdown::Write);
        }
        self.done = true;
        if self.out.error.is_none() {
            self.out.error = error;
        }
    }
}

/// Calls per stream before the worker turns to its next stream.
const BURST: usize = 16;

fn worker(
    streams: Vec<(&DataStream, &Counter)>,
    p: &EngineParams,
    flags: &Flags,
    t0: Instant,
) -> Vec<(u32, WorkerStream)> {
    let sends = streams.iter().any(|(d, _)| d.role == Role::Sender);
    let receives = streams.iter().any(|(d, _)| d.role == Role::Receiver);
    let mut gen = sends.then(|| Generator::new(&p.pattern, p.length));
    let mut verifier = (receives && p.verify).then(|| Verifier::new(&p.pattern, p.length));
    let mut rbuf = vec![0u8; if receives { p.length } else { 0 }];
    let now = Instant::now();
    let mut states: Vec<State> = streams
        .into_iter()
        .map(|(ds, c)| State::new(ds, c, now))
        .collect();
    let mut poll = match Poll::new() {
        Ok(p) => p,
        Err(e) => {
            let out = |id| {
                (
                    id,
                    WorkerStream {
                        error: Some(format!("epoll: {e}")),
                        ..WorkerStream::default()
                    },
                )
            };
            return states.iter().map(|s| out(s.ds.id)).collect();
        }
    };
    for (i, st) in states.iter_mut().enumerate() {
        let interest = if st.ds.role == Role::Sender {
            Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        let fd = st.ds.socket.as_raw_fd();
        if let Err(e) = st
            .ds
            .socket
            .set_nonblocking(true)
            .and_then(|_| poll.registry().register(&mut SourceFd(&fd), Token(i), interest))
        {
            st.finish(Some(format!("cannot poll socket: {e}")));
        }
        if p.zerocopy && st.ds.role == Role::Sender && !st.done {
            match crate::zerocopy::enable(&st.ds.socket) {
                Ok(()) => st.zc = Some(ZcSender::new(&p.pattern, p.length)),
                Err(e) => st.finish(Some(format!("SO_ZEROCOPY: {e}"))),
            }
        }
    }
    let deadline = p.send_time.map(|d| t0 + d);
    let mut events = Events::with_capacity(states.len().max(16));
    loop {
        if flags.abort.load(Relaxed) {
            for st in states.iter_mut().filter(|s| !s.done) {
                st.finish(Some("test aborted".into()));
            }
        }
        if flags.halt.load(Relaxed) {
            for st in states.iter_mut().filter(|s| !s.done) {
                // What has already arrived is counted: read the receive queue empty first.
                if st.ds.role == Role::Receiver {
                    for _ in 0..4096 {
                        let r = st.recv(&mut rbuf, p.discard);
                        match r {
                            Ok(n) if n > 0 => {
                                if let Some(v) = verifier.as_mut() {
                                    st.out.verify(v, st.ds.id, &rbuf[..n]);
                                }
                                st.account(n, Instant::now());
                            }
                            _ => break,
                        }
                    }
                }
                st.finish(None);
            }
        }
        let now = Instant::now();
        let stop_send = flags.stop.load(Relaxed) || deadline.is_some_and(|d| now >= d);
        let mut live = 0;
        let mut any_ready = false;
        let mut wake: Option<Instant> = None;
        for st in states.iter_mut().filter(|s| !s.done) {
            let sender = st.ds.role == Role::Sender;
            if sender && (stop_send || st.remaining == Some(0)) {
                st.finish(None);
                continue;
            }
            if !st.ready {
                if now.duration_since(st.last_progress) > p.idle_timeout {
                    let what = if sender {
                        "could not send"
                    } else {
                        "received nothing"
                    };
                    st.finish(Some(format!(
                        "{what} for {:?}; giving up on this stream",
                        p.idle_timeout
                    )));
                } else {
                    live += 1;
                }
                continue;
            }
            if let Some(bps) = p.stream_cap_bps {
                // Ahead of the cap: leave the socket alone until the rate catches up.
                let rate = bps / 8.0;
                let ahead = st.out.bytes as f64 - CAP_BURST;
                if ahead > rate * now.duration_since(t0).as_secs_f64() {
                    let due = t0 + Duration::from_secs_f64(ahead / rate);
                    wake = Some(wake.map_or(due, |w| w.min(due)));
                    live += 1;
                    continue;
                }
            }
            for _ in 0..BURST {
                let res = if sender {
                    let n = st.remaining.map_or(p.length, |r| r.min(p.length as u64) as usize);
                    if n == 0 {
                        break;
                    }
                    st.send(&mut gen, n)
                } else {
                    st.recv(&mut rbuf, p.discard)
                };
                match res {
                    Ok(0) if !sender => {
                        st.done = true;
                        break;
                    }
                    Ok(n) => {
                        #[cfg(feature = "fault-injection")]
                        if !sender {
                            fault::flip(st.ds.id, st.out.bytes, &mut rbuf[..n]);
                        }
                        if let (false, Some(v)) = (sender, verifier.as_mut()) {
                            st.out.verify(v, st.ds.id, &rbuf[..n]);
                        }
                        st.account(n, Instant::now())
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        st.ready = false;
                        break;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        st.finish(Some(format!("{}: {e}", if sender { "send" } else { "receive" })));
                        break;
                    }
                }
            }
            if !st.done {
                live += 1;
                any_ready |= st.ready;
            }
        }
        if live == 0 {
            break;
        }
        let mut timeout = if any_ready {
            Duration::ZERO
        } else {
            Duration::from_millis(100)
        };
        if let Some(w) = wake {
            timeout = timeout.min(w.saturating_duration_since(Instant::now()));
        }
        if let Some(d) = deadline {
            timeout = timeout.min(d.saturating_duration_since(Instant::now()));
        }
        match poll.poll(&mut events, Some(timeout)) {
            Ok(()) => {
                for ev in events.iter() {
                    if let Some(st) = states.get_mut(ev.token().0) {
                        st.ready = true;
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                for st in states.iter_mut().filter(|s| !s.done) {
                    st.finish(Some(format!("epoll: {e}")));
                }
            }
        }
    }
    // Zerocopy senders: collect the last completions (bounded), so the copied count is complete and no
    // buffer is dropped while the kernel may still send from it.
    let until = Instant::now() + Duration::from_millis(500);
    for st in states.iter_mut() {
        if let Some(zc) = st.zc.as_mut() {
            while zc.issued() > 0 && !zc.all_completed() && Instant::now() < until {
                if zc.reap(&st.ds.socket).is_err() {
                    break;
                }
                std::thread::yield_now();
            }
            st.out.zc_sends = zc.issued();
            st.out.zc_copied = zc.copied;
        }
    }
    states.into_iter().map(|s| (s.ds.id, s.out)).collect()
}

/// Receives up to `len` bytes without copying them to user space: for TCP, MSG_TRUNC makes the kernel
/// consume and drop the data. Returns the byte count like `read`.
fn discard(sock: &TcpStream, len: usize) -> std::io::Result<usize> {
    // SAFETY: with MSG_TRUNC on a TCP socket the kernel writes nothing to the buffer; a null pointer
    // with a length is accepted for exactly this use.
    let n = unsafe { libc::recv(sock.as_raw_fd(), std::ptr::null_mut(), len, libc::MSG_TRUNC) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(feature = "fault-injection")]
mod fault {
    /// Flips one byte of a received chunk if `LANDSPEED_FAULT_FLIP=STREAM:OFFSET` falls inside it.
    pub fn flip(stream: u32, offset: u64, data: &mut [u8]) {
        let Ok(spec) = std::env::var("LANDSPEED_FAULT_FLIP") else {
            return;
        };
        let Some((s, o)) = spec.split_once(':') else {
            return;
        };
        let (Ok(s), Ok(o)) = (s.parse::<u32>(), o.parse::<u64>()) else {
            return;
        };
        if s == stream && (offset..offset + data.len() as u64).contains(&o) {
            data[(o - offset) as usize] ^= 0x01;
        }
    }
}

/// Notifies the sampling thread when a worker ends, however it ends.
struct DoneGuard<'a, X>(&'a Sender<Wake<X>>);
impl<X> Drop for DoneGuard<'_, X> {
    fn drop(&mut self) {
        let _ = self.0.send(Wake::WorkerDone);
    }
}

fn sample(
    streams: &[DataStream],
    counters: &[Counter],
    index: u32,
    start_s: f64,
    end_s: f64,
    omitted: bool,
) -> IntervalSample {
    IntervalSample {
        index,
        start_s,
        end_s,
        omitted,
        streams: streams
            .iter()
            .zip(counters)
            .map(|(ds, c)| StreamSample {
                id: ds.id,
                bytes: c.bytes.load(Relaxed),
                tcp: tcp_info::read(&ds.socket).ok().map(|i| i.snapshot()),
            })
            .collect(),
    }
}

/// Runs the streams to completion. `t0` anchors all timestamps; call right after the start signal.
pub fn run<X: Send>(
    streams: &[DataStream],
    p: &EngineParams,
    flags: &Flags,
    wake_tx: &Sender<Wake<X>>,
    wake_rx: &Receiver<Wake<X>>,
    hook: &mut dyn EngineHook<X>,
    interface: Option<&str>,
) -> EngineOutput {
    let cpu0 = CpuSnapshot::take();
    let net0 = interface.and_then(NetSnapshot::take);
    let counters: Vec<Counter> = streams.iter().map(|_| Counter::default()).collect();
    let threads = p.threads.clamp(1, streams.len().max(1));
    let t0 = Instant::now();
    let mut samples = vec![];
    let mut outs: Vec<(u32, WorkerStream)> = vec![];
    std::thread::scope(|scope| {
        let mut handles = vec![];
        for w in 0..threads {
            let mine: Vec<(&DataStream, &Counter)> = streams
                .iter()
                .zip(&counters)
                .enumerate()
                .filter(|(i, _)| i % threads == w)
                .map(|(_, x)| x)
                .collect();
            let cpu = p.cpus.as_ref().filter(|c| !c.is_empty()).map(|c| c[w % c.len()]);
            let tx = wake_tx.clone();
            handles.push(scope.spawn(move || {
                let _guard = DoneGuard(&tx);
                if let Some(c) = cpu {
                    let _ = crate::pin::pin_current_thread(c);
                }
                if p.uring && p.stream_cap_bps.is_none() {
                    uring::worker(mine, p, flags, t0)
                } else {
                    worker(mine, p, flags, t0)
                }
            }));
        }
        let mut sched = SampleSchedule::new(p.interval, p.omit);
        let mut cur = sched.next_interval();
        let mut finished = 0;
        let mut stop_seen = false;
        loop {
            hook.on_tick(flags);
            let mine = |r: Role| streams.iter().zip(&counters).filter(move |(d, _)| d.role == r);
            let progress = Progress {
                received: mine(Role::Receiver).map(|(_, c)| c.bytes.load(Relaxed)).sum(),
                senders_done: mine(Role::Sender).all(|(_, c)| c.finished.load(Relaxed)),
            };
            hook.on_progress(progress, flags);
            if !stop_seen && flags.stop.load(Relaxed) {
                stop_seen = true;
                hook.on_stop();
            }
            if finished == threads {
                let end = t0.elapsed().as_secs_f64().max(cur.1);
                let s = sample(streams, &counters, cur.0, cur.1, end, cur.3);
                hook.on_sample(&s);
                samples.push(s);
                break;
            }
            let boundary = t0 + Duration::from_secs_f64(cur.2);
            let now = Instant::now();
            if now >= boundary {
                let s = sample(streams, &counters, cur.0, cur.1, cur.2, cur.3);
                hook.on_sample(&s);
                samples.push(s);
                cur = sched.next_interval();
                continue;
            }
            match wake_rx.recv_timeout((boundary - now).min(Duration::from_millis(100))) {
                Ok(Wake::WorkerDone) => finished += 1,
                Ok(Wake::External(x)) => hook.on_external(x, flags),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => finished = threads,
            }
        }
        for h in handles {
            match h.join() {
                Ok(v) => outs.extend(v),
                Err(_) => flags.abort.store(true, Relaxed),
            }
        }
    });
    let elapsed_s = t0.elapsed().as_secs_f64();
    let cpu = cpu0.until(&CpuSnapshot::take());
    let interface = net0.map(|n| n.until_now());
    // Bytes each receiving stream had read when the warm-up ended: the last warm-up sample.
    let omit_sample = samples.iter().rev().find(|s| s.omitted);
    let reports = streams
        .iter()
        .map(|ds| {
            let out = outs.iter().find(|(id, _)| *id == ds.id).map(|(_, o)| o);
            let rel = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(t0).as_secs_f64());
            let rtts: Vec<u32> = samples
                .iter()
                .filter_map(|s| {
                    s.streams
                        .iter()
                        .find(|x| x.id == ds.id)
                        .and_then(|x| x.tcp)
                        .map(|t| t.rtt_us)
                })
                .collect();
            let sref = socket2::SockRef::from(&ds.socket);
            let (snd, rcv) = crate::sockopt::granted(&sref);
            let omitted = match (ds.role, omit_sample) {
                (Role::Receiver, Some(s)) => s.streams.iter().find(|x| x.id == ds.id).map_or(0, |x| x.bytes),
                _ => 0,
            };
            StreamReport {
                id: ds.id,
                flow: ds.flow,
                role: ds.role,
                bytes: out.map_or(0, |o| o.bytes),
                calls: out.map_or(0, |o| o.calls),
                omitted_bytes: omitted,
                first_byte_s: rel(out.and_then(|o| o.first)),
                last_byte_s: rel(out.and_then(|o| o.last)),
                snd_buf_bytes: snd,
                rcv_buf_bytes: rcv,
                tcp: tcp_info::read(&ds.socket)
                    .ok()
                    .map(|i| i.stats(&rtts, tcp_info::congestion(&sref))),
                error: out.map_or(Some("worker thread failed".into()), |o| o.error.clone()),
                bytes_verified: out.map_or(0, |o| o.verified),
                corrupt_blocks: out.map_or(0, |o| o.corrupt_blocks),
                first_corruption: out.and_then(|o| o.first_corruption.clone()),
                zerocopy_sends: out.map_or(0, |o| o.zc_sends),
                zerocopy_copied: out.map_or(0, |o| o.zc_copied),
                udp: None,
                send_errors: 0,
                udp_offload: false,
            }
        })
        .collect();
    EngineOutput {
        streams: reports,
        samples,
        elapsed_s,
        cpu,
        interface,
        threads: threads as u32,
    }
}
