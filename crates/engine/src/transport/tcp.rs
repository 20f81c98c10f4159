//! The TCP transport: moves bytes on a set of TCP connections with worker threads.
//!
//! Streams are spread round-robin over worker threads (optionally pinned to CPUs); each worker drives its
//! sockets non-blocking through one epoll instance (or io_uring, `uring.rs`), with one send and one
//! receive buffer allocated before the test. Per buffer the hot loop does one system call, one clock read
//! and one relaxed atomic store of the stream's byte count: no locks, no allocation, no formatting. A
//! sender shuts down its write side when it is done, and a receiver reads until end-of-file, so every
//! byte written is read and counted. Sampling and reporting are the supervisor's (`crate::supervisor`).

mod blocking;
pub mod tls;
#[cfg(not(windows))]
mod uring;

use super::{round_robin, Meter, Outcome, Settled, StreamMeta, Transport};
use crate::os::{Readiness, ZcSender};
use crate::supervisor::{EngineParams, Flags};
use crate::tcp_info;
use landspeed_core::config::Flow;
use landspeed_core::endpoint::{Role, TcpSnapshot, TcpStats};
use landspeed_core::frames::FrameReceipt;
use landspeed_core::payload::{Generator, Verifier};
use landspeed_core::transit::Transits;
use landspeed_iperf2::burst::{BurstReader, BurstWriter};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// One data connection and what this end does with it.
pub struct DataStream {
    /// The stream's number in the test.
    pub id: u32,
    /// Which way its data goes.
    pub flow: Flow,
    /// Whether this end sends or receives on it.
    pub role: Role,
    /// The connection.
    pub socket: TcpStream,
    /// Sender only: stop after exactly this many bytes.
    pub budget: Option<u64>,
    /// Disk-to-disk tests: the sender sends this file (sendfile), the receiver writes into it (splice).
    pub file: Option<std::sync::Arc<std::fs::File>>,
    /// TLS over the connection (`--tls`), its handshake done.
    pub tls: Option<tls::TlsLink>,
}

impl DataStream {
    /// A plain stream this end receives on (no file, no TLS, no budget).
    pub fn receiving(id: u32, flow: Flow, socket: TcpStream) -> DataStream {
        DataStream {
            id,
            flow,
            role: Role::Receiver,
            socket,
            budget: None,
            file: None,
            tls: None,
        }
    }
}

/// How long a TLS sender may take to hand its last sealed records and close_notify to the kernel.
const TLS_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a capped stream may run ahead of its rate.
const CAP_BURST: f64 = 256.0 * 1024.0;

/// The TCP transport over a set of connected streams.
pub struct Tcp<'a>(pub &'a [DataStream]);

impl Transport for Tcp<'_> {
    fn streams(&self) -> Vec<StreamMeta> {
        self.0
            .iter()
            .map(|d| StreamMeta::new(d.id, d.flow, d.role))
            .collect()
    }

    fn groups(&self, p: &EngineParams) -> Vec<Vec<usize>> {
        round_robin(self.0.len(), p.threads)
    }

    fn work(
        &self,
        group: &[usize],
        meters: &[Meter],
        p: &EngineParams,
        flags: &Flags,
        t0: Instant,
    ) -> Vec<(usize, Outcome)> {
        if let [i] = *group {
            if blocking::suits(&self.0[i], p) {
                return blocking::worker(i, &self.0[i], &meters[i], p, flags, t0);
            }
        }
        let mine = group.iter().map(|&i| (i, &self.0[i], &meters[i])).collect();
        #[cfg(not(windows))]
        if p.uring && p.stream_cap_bps.is_none() {
            return uring::worker(mine, p, flags, t0);
        }
        worker(mine, p, flags, t0)
    }

    fn snapshot(&self, i: usize) -> Option<TcpSnapshot> {
        tcp_info::read(&self.0[i].socket).ok().map(|t| t.snapshot())
    }

    fn settle(&self, i: usize, rtts_us: &[u32]) -> Settled {
        let sref = socket2::SockRef::from(&self.0[i].socket);
        let (snd_buf_bytes, rcv_buf_bytes) = crate::sockopt::granted(&sref);
        Settled {
            snd_buf_bytes,
            rcv_buf_bytes,
            tcp: (tcp_info::read(&self.0[i].socket).ok()).map(|t| TcpStats {
                mptcp: crate::os::mptcp_stats(&self.0[i].socket),
                ..t.stats(rtts_us, tcp_info::congestion(&sref))
            }),
            tls_cipher: self.0[i].tls.as_ref().map(|t| t.cipher()),
            quic: None,
            ports: super::ports_of(sref),
        }
    }

    fn counts_reads(&self) -> bool {
        true
    }
}

/// `payload` (the stream's bytes from `offset`) copied into `copy` with the burst headers it holds
/// stamped now.
fn stamped<'c>(w: &mut BurstWriter, copy: &'c mut Vec<u8>, payload: &[u8], offset: u64) -> &'c [u8] {
    copy.clear();
    copy.extend_from_slice(payload);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    w.stamp(offset, copy, landspeed_iperf2::ack::WireTime::from_unix_ns(now));
    copy
}

/// A wire time in nanoseconds since the Unix epoch.
fn wire_ns(w: landspeed_iperf2::ack::WireTime) -> i128 {
    i128::from(w.secs) * 1_000_000_000 + i128::from(w.micros) * 1_000
}

/// When a burst that is a frame was due: its sender's start plus a period a frame before it.
fn frame_due_ns(h: &landspeed_iperf2::burst::BurstHeader) -> i128 {
    wire_ns(h.start) + i128::from(h.id.saturating_sub(1)) * i128::from(h.period_us) * 1_000
}

/// The bursts that end within `data` (just read), at their arrival now: with trip times each one
/// is timed from the send time its header carries (added to the stream's meter once per read);
/// counting `frames`, each is a frame that arrived whole, due at its start plus a period a frame.
fn on_bursts(b: &mut BurstReader, data: &[u8], meter: &Meter, mut frames: Option<&mut FrameReceipt>) {
    let mut t = Transits::default();
    // Each burst's transit and send time, for the meter's bins (a read ends a few bursts at most).
    let mut binned: Vec<(f64, (i64, u32))> = Vec::new();
    let bin = meter.trips.binning().is_some();
    let mut now_ns = None;
    let timed = meter.trips.on();
    b.feed(data, |h| {
        let now = *now_ns.get_or_insert_with(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i128)
        });
        if timed {
            let transit_s = (now - wire_ns(h.written)) as f64 * 1e-9;
            t.add(transit_s);
            if bin {
                binned.push((transit_s, (i64::from(h.written.secs), h.written.micros)));
            }
        }
        if let Some(f) = frames.as_deref_mut() {
            f.period(u64::from(h.period_us) * 1_000);
            f.whole_frame(h.id, h.size, (frame_due_ns(h), now));
        }
    });
    if t.count() > 0 {
        meter.trips.add(&t, &binned);
    }
}

/// One stream as its worker drives it.
struct State<'a> {
    index: usize,
    ds: &'a DataStream,
    counter: &'a Meter,
    ready: bool,
    done: bool,
    remaining: Option<u64>,
    out: Outcome,
    /// The last block found corrupt: a block split over two reads is counted once.
    last_bad_block: Option<u64>,
    last_progress: Instant,
    /// MSG_ZEROCOPY state, for senders when asked.
    zc: Option<ZcSender>,
    /// Receivers into a file: the pipe splice(2) goes through.
    splicer: Option<crate::files::Splicer>,
    /// The stream's TLS session, held by its worker for the whole test.
    tls: Option<std::sync::MutexGuard<'a, tls::Session>>,
    /// Receivers timing iperf 2's bursts (`EngineParams::trip_times`): the stream cut into them.
    bursts: Option<BurstReader>,
    /// Senders stamping iperf 2's bursts (`EngineParams::trip_times`), and the copy of each write
    /// the stamps go on (the payload generator's buffer is left as it is).
    stamps: Option<(BurstWriter, Vec<u8>)>,
    /// A receiver asks for an immediate ACK after each read (`EngineParams::quickack`).
    quickack: bool,
}

impl<'a> State<'a> {
    fn new(index: usize, ds: &'a DataStream, counter: &'a Meter, now: Instant) -> Self {
        State {
            index,
            ds,
            counter,
            ready: true,
            done: false,
            remaining: ds.budget,
            out: Outcome::default(),
            last_bad_block: None,
            last_progress: now,
            zc: None,
            splicer: None,
            tls: ds.tls.as_ref().map(|t| t.lock()),
            bursts: counter.trips.on().then(BurstReader::default),
            stamps: None,
            quickack: false,
        }
    }

    /// A receiver of a test that asks for TCP_QUICKACK (`EngineParams::quickack`) sets it after each
    /// read that took data.
    fn acking(mut self, p: &EngineParams) -> Self {
        self.quickack = p.quickack && self.ds.role == Role::Receiver;
        self
    }

    /// A receiver counting frames (`EngineParams::frames_from_bursts`) cuts its stream into bursts.
    fn framing(mut self, p: &EngineParams) -> Self {
        if p.frames_from_bursts && self.ds.role == Role::Receiver {
            self.out.frames = Some(FrameReceipt::new(0));
            self.bursts.get_or_insert_with(BurstReader::default);
        }
        self
    }

    /// A sender of a test with trip times (`EngineParams::trip_times`) stamps its bursts.
    fn stamping(mut self, p: &EngineParams) -> Self {
        let ds = self.ds;
        if p.trip_times && ds.role == Role::Sender && ds.tls.is_none() && ds.file.is_none() {
            self.stamps = Some((BurstWriter::new(p.length as u32, ds.budget), vec![]));
        }
        self
    }

    /// Checks `data`, just read at the stream's current offset, and records what was wrong.
    fn verify(&mut self, v: &mut Verifier, data: &[u8]) {
        self.out.verify(v, self.ds.id, &mut self.last_bad_block, data);
    }

    /// One send: from the zerocopy ring when it has a free buffer, else a plain copying send.
    fn send(&mut self, gen: &mut Option<Generator>, n: usize) -> std::io::Result<usize> {
        let (id, off, sock) = (self.ds.id, self.out.bytes, &self.ds.socket);
        if let Some(f) = &self.ds.file {
            return crate::files::send_chunk(sock, f, off, n);
        }
        if let Some(t) = self.tls.as_mut() {
            let g = gen
                .as_mut()
                .ok_or_else(|| std::io::Error::other("no payload generator"))?;
            // Only what rustls can take now is generated: the rest would be made again next call.
            return t.send(sock, |room| g.fill_spare(id, off, n.min(room)));
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
            (None, Some(g)) => match self.stamps.as_mut() {
                Some((w, copy)) => (&self.ds.socket).write(stamped(w, copy, g.fill(id, off, n), off)),
                None => (&self.ds.socket).write(g.fill(id, off, n)),
            },
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
            crate::os::discard(&self.ds.socket, rbuf)
        } else {
            (&self.ds.socket).read(rbuf)
        }
    }

    /// One receive with its verification (and the tests' fault injection): the bytes taken.
    fn take(&mut self, bufs: &mut Buffers, len: usize, discard_it: bool) -> std::io::Result<usize> {
        if self.tls.is_some() {
            return self.take_tls(bufs.verifier.as_mut());
        }
        let n = self.recv(&mut bufs.rbuf[..len], discard_it && self.bursts.is_none())?;
        if self.quickack && n > 0 {
            crate::sockopt::quickack(&self.ds.socket);
        }
        self.counter.reads.count(n);
        if let Some(b) = self.bursts.as_mut() {
            on_bursts(b, &bufs.rbuf[..n], self.counter, self.out.frames.as_mut());
        }
        #[cfg(feature = "fault-injection")]
        fault::flip(self.ds.id, self.out.bytes, &mut bufs.rbuf[..n]);
        if let Some(v) = bufs.verifier.as_mut() {
            self.verify(v, &bufs.rbuf[..n]);
        }
        Ok(n)
    }

    /// One TLS receive: every record's content verified where it was opened.
    fn take_tls(&mut self, mut v: Option<&mut Verifier>) -> std::io::Result<usize> {
        let (id, base) = (self.ds.id, self.out.bytes);
        let (out, last_bad) = (&mut self.out, &mut self.last_bad_block);
        let t = self.tls.as_mut().expect("a TLS stream");
        let mut at = base;
        t.recv(&self.ds.socket, |plain| {
            #[cfg(feature = "fault-injection")]
            fault::flip(id, at, plain);
            if let Some(v) = v.as_deref_mut() {
                out.verify_at(v, id, at, last_bad, plain);
            }
            at += plain.len() as u64;
        })
    }

    fn account(&mut self, n: usize, now: Instant) {
        self.out.moved(n, now, self.counter);
        self.last_progress = now;
        if let Some(r) = self.remaining.as_mut() {
            *r -= n as u64;
        }
    }

    /// Ends a stream that moved nothing for the idle timeout.
    fn idle_out(&mut self, idle_timeout: Duration) {
        let what = if self.ds.role == Role::Sender {
            "could not send"
        } else {
            "received nothing"
        };
        self.finish(Some(format!(
            "{what} for {idle_timeout:?}; giving up on this stream"
        )));
    }

    fn finish(&mut self, mut error: Option<String>) {
        self.counter.finished.store(true, Relaxed);
        if let (Some(b), Some(f)) = (&self.bursts, self.out.frames.as_mut()) {
            if let Some((h, got)) = b.unfinished() {
                f.begun_frame(h.id, (h.size, got as u32), frame_due_ns(&h));
            }
        }
        if self.ds.role == Role::Sender {
            if let Some(t) = self.tls.as_mut() {
                self.out.tls_records = t.records;
                if let Err(e) = t.close(&self.ds.socket, TLS_CLOSE_TIMEOUT) {
                    error.get_or_insert(format!("sending the last TLS records: {e}"));
                }
            }
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

/// The worker's buffers, allocated once before the test: the payload generator for its senders, the
/// verifier and the receive buffer for its receivers.
struct Buffers {
    gen: Option<Generator>,
    verifier: Option<Verifier>,
    rbuf: Vec<u8>,
}

impl Buffers {
    /// What a worker with senders (`sends`) and receivers (`receives`) needs.
    fn new(p: &EngineParams, sends: bool, receives: bool) -> Self {
        Buffers {
            gen: sends.then(|| Generator::new(&p.pattern, p.length)),
            verifier: (receives && p.verify).then(|| Verifier::new(&p.pattern, p.length)),
            rbuf: vec![0u8; if receives { p.read_length() } else { 0 }],
        }
    }
}

/// What one pass over a stream found.
enum Step {
    /// The stream has ended (or ends now).
    Ended,
    /// Not ready: waiting for epoll to say it is.
    Waiting,
    /// Ahead of its rate cap until this instant.
    Capped(Instant),
    /// It moved data (or tried): still live unless the pass ended it.
    Moved,
}

fn worker(
    streams: Vec<(usize, &DataStream, &Meter)>,
    p: &EngineParams,
    flags: &Flags,
    t0: Instant,
) -> Vec<(usize, Outcome)> {
    let sends = streams.iter().any(|(_, d, _)| d.role == Role::Sender);
    let receives = streams.iter().any(|(_, d, _)| d.role == Role::Receiver);
    let mut bufs = Buffers::new(p, sends, receives);
    let now = Instant::now();
    let mut states: Vec<State> = streams
        .into_iter()
        .map(|(i, ds, c)| State::new(i, ds, c, now).stamping(p).framing(p).acking(p))
        .collect();
    let mut poll = match crate::os::Poller::new(states.len()) {
        Ok(p) => p,
        Err(e) => {
            let out = |id| {
                (
                    id,
                    Outcome {
                        error: Some(format!("epoll: {e}")),
                        ..Outcome::default()
                    },
                )
            };
            return states.iter().map(|s| out(s.index)).collect();
        }
    };
    register(&mut states, &mut poll, p);
    let deadline = p.send_time.map(|d| t0 + d);
    loop {
        if flags.abort.load(Relaxed) {
            for st in states.iter_mut().filter(|s| !s.done) {
                st.finish(Some("test aborted".into()));
            }
        }
        if flags.halt.load(Relaxed) {
            halt(&mut states, &mut bufs, p);
        }
        let now = Instant::now();
        let turn = Turn {
            now,
            stop_send: flags.stop.load(Relaxed) || deadline.is_some_and(|d| now >= d),
            capped: !flags.uncap.load(Relaxed),
        };
        let (live, any_ready, wake) = pass(&mut states, &mut bufs, p, turn);
        if live == 0 {
            break;
        }
        let timeout = poll_timeout(any_ready, [wake, deadline]);
        wait(&mut poll, &mut states, timeout);
    }
    reap_zerocopy(&mut states);
    states.into_iter().map(|s| (s.index, s.out)).collect()
}

/// What holds for every stream in one pass of a worker.
#[derive(Clone, Copy)]
struct Turn {
    now: Instant,
    /// Senders stop.
    stop_send: bool,
    /// The rate cap (`stream_cap_bps`) applies; lifted once the server's longest test is over, so
    /// what is in flight drains at once.
    capped: bool,
}

/// One pass over the live streams: how many are still live, whether one is known ready (poll without
/// waiting then), and the earliest instant a rate-capped one may move again.
fn pass(
    states: &mut [State],
    bufs: &mut Buffers,
    p: &EngineParams,
    turn: Turn,
) -> (usize, bool, Option<Instant>) {
    let (mut live, mut any_ready, mut wake) = (0, false, None::<Instant>);
    for st in states.iter_mut().filter(|s| !s.done) {
        match step(st, bufs, p, turn) {
            Step::Ended => {}
            Step::Waiting => live += 1,
            Step::Capped(due) => {
                wake = Some(wake.map_or(due, |w| w.min(due)));
                live += 1;
            }
            Step::Moved if st.done => {}
            Step::Moved => {
                live += 1;
                any_ready |= st.ready;
            }
        }
    }
    (live, any_ready, wake)
}

/// How long to wait for readiness: not at all when a stream is ready, else up to 100 ms, no later
/// than the next instant that matters.
fn poll_timeout(any_ready: bool, dues: [Option<Instant>; 2]) -> Duration {
    let mut timeout = if any_ready {
        Duration::ZERO
    } else {
        Duration::from_millis(100)
    };
    for due in dues.into_iter().flatten() {
        timeout = timeout.min(due.saturating_duration_since(Instant::now()));
    }
    timeout
}

/// Waits for readiness and marks the streams epoll names; a failing epoll ends every stream.
fn wait(poll: &mut crate::os::Poller, states: &mut [State], timeout: Duration) {
    let waiting: Vec<bool> = states.iter().map(|s| !s.done && !s.ready).collect();
    let mut ready = vec![];
    match poll.wait(timeout, &|i| waiting.get(i) == Some(&true), &mut |i| {
        ready.push(i)
    }) {
        Ok(()) => {
            for i in ready {
                if let Some(st) = states.get_mut(i) {
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

/// Makes every socket non-blocking and registers it with `poll` (writable for senders, readable for
/// receivers); zerocopy senders get their ring. A stream that cannot be set up ends with the reason.
fn register(states: &mut [State], poll: &mut crate::os::Poller, p: &EngineParams) {
    for (i, st) in states.iter_mut().enumerate() {
        let writable = st.ds.role == Role::Sender;
        if let Err(e) = st
            .ds
            .socket
            .set_nonblocking(true)
            .and_then(|_| poll.register(&st.ds.socket, i, writable))
        {
            st.finish(Some(format!("cannot poll socket: {e}")));
        }
        if p.zerocopy && st.ds.role == Role::Sender && !st.done {
            match crate::os::zerocopy_sender(&st.ds.socket, &p.pattern, p.length) {
                Ok(zc) => st.zc = Some(zc),
                Err(e) => st.finish(Some(format!("SO_ZEROCOPY: {e}"))),
            }
        }
    }
}

/// iperf3's end of a test: what has already arrived is counted (each receive queue read empty, bounded),
/// then every stream ends without error.
fn halt(states: &mut [State], bufs: &mut Buffers, p: &EngineParams) {
    for st in states.iter_mut().filter(|s| !s.done) {
        if st.ds.role == Role::Receiver {
            for _ in 0..4096 {
                let len = bufs.rbuf.len();
                match st.take(bufs, len, p.discard) {
                    Ok(n) if n > 0 => {
                        st.account(n, Instant::now());
                    }
                    _ => break,
                }
            }
        }
        st.finish(None);
    }
}

/// One pass over a live stream: ends a sender that is done, times out a stream idle too long, holds
/// back one ahead of its rate cap, and otherwise moves up to `BURST` buffers.
fn step(st: &mut State, bufs: &mut Buffers, p: &EngineParams, turn: Turn) -> Step {
    let Turn {
        now,
        stop_send,
        capped,
    } = turn;
    let sender = st.ds.role == Role::Sender;
    if sender && (stop_send || st.remaining == Some(0)) {
        st.finish(None);
        return Step::Ended;
    }
    if !st.ready {
        if now.duration_since(st.last_progress) <= p.idle_timeout {
            return Step::Waiting;
        }
        st.idle_out(p.idle_timeout);
        return Step::Ended;
    }
    if sender && paced_queue_full(st, p) {
        return Step::Capped(now + PACED_POLL);
    }
    let mut allowance = usize::MAX;
    if let Some(bps) = p.burst_bps.filter(|_| sender) {
        match burst_due(st, p.length as u64, bps, now) {
            Ok(n) => allowance = n,
            Err(at) => return Step::Capped(at),
        }
    }
    if let Some(bps) = p.stream_cap_bps.filter(|_| capped) {
        // Ahead of the cap: leave the socket alone until the rate catches up. Otherwise move no more
        // than the cap allows now, so a burst of large writes cannot run far past it. The rate counts
        // from the stream's first byte, not the test's start: a stream that began late (its thread
        // scheduled late, its connection slow) must not catch up in a burst the receiver, timing
        // from its own first byte, would read as a rate above the cap.
        let rate = bps / 8.0;
        let from = st.out.first.unwrap_or(now);
        let allowed = rate * now.duration_since(from).as_secs_f64() + CAP_BURST;
        let ahead = st.out.bytes as f64 - CAP_BURST;
        if st.out.bytes as f64 >= allowed {
            return Step::Capped(from + Duration::from_secs_f64(ahead / rate));
        }
        allowance = (allowed - st.out.bytes as f64) as usize;
    }
    burst(st, bufs, p, sender, allowance);
    Step::Moved
}

/// A sender releasing whole bursts of `length` bytes at `bps` (`EngineParams::burst_bps`): the
/// rest of the burst it is in, at once; at a burst's start, the whole burst once its time has come
/// (burst k at k × length over the rate after the stream's first byte), else when that is.
fn burst_due(st: &State, length: u64, bps: f64, now: Instant) -> Result<usize, Instant> {
    let (sent, length) = (st.out.bytes, length.max(1));
    if sent % length != 0 {
        return Ok((length - sent % length) as usize);
    }
    let Some(first) = st.out.first else {
        return Ok(length as usize);
    };
    let due = first + Duration::from_secs_f64(sent as f64 * 8.0 / bps);
    match due <= now {
        true => Ok(length as usize),
        false => Err(due),
    }
}

/// A paced sender holds at most [`crate::sockopt::PACED_AHEAD`] of its pace unsent, so that its time
/// ends when the test's does: true when the socket holds that much.
fn paced_queue_full(st: &State, p: &EngineParams) -> bool {
    let Some(rate) = p.paced_bps else {
        return false;
    };
    let limit = crate::sockopt::paced_queue_bytes(rate) as u64;
    // Above this mark the kernel's own low-water mark holds the queue close enough (it overshoots
    // by at most the last segment's size goal, 128 KiB on loopback), and the check would only cost a
    // system call per write.
    if limit >= PACED_CHECK_BELOW {
        return false;
    }
    crate::sockopt::unsent_bytes(&st.ds.socket).is_ok_and(|n| n >= limit)
}

/// The unsent mark below which a paced sender checks its queue itself (about 420 Mbit/s).
const PACED_CHECK_BELOW: u64 = 256 << 10;

/// How often a paced sender whose queue is full looks again: a fifth of what it keeps queued.
const PACED_POLL: Duration = Duration::from_millis(1);

/// Up to `BURST` sends or receives on one ready stream, moving at most `allowance` bytes, until it
/// would block, ends or fails.
#[inline]
fn burst(st: &mut State, bufs: &mut Buffers, p: &EngineParams, sender: bool, mut allowance: usize) {
    let length = if sender { p.send_length() } else { p.read_length() };
    for _ in 0..BURST {
        let call = length.min(allowance);
        if call == 0 {
            break;
        }
        if sender && paced_queue_full(st, p) {
            // The blocking worker waits here; the epoll worker's next pass finds it full (`step`).
            if st.out.blocking {
                std::thread::sleep(PACED_POLL);
            }
            break;
        }
        let res = if sender {
            let n = st.remaining.map_or(call, |r| r.min(call as u64) as usize);
            if n == 0 {
                break;
            }
            st.send(&mut bufs.gen, n)
        } else {
            st.take(bufs, call, p.discard)
        };
        if let Ok(n) = res {
            allowance -= n.min(allowance);
        }
        match res {
            Ok(0) if !sender => {
                st.done = true;
                break;
            }
            Ok(n) => st.account(n, Instant::now()),
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
}

/// Zerocopy senders: collects the last completions (bounded), so the copied count is complete and no
/// buffer is dropped while the kernel may still send from it.
fn reap_zerocopy(states: &mut [State]) {
    let until = Instant::now() + Duration::from_millis(500);
    for st in states.iter_mut() {
        if let Some(zc) = st.zc.as_mut() {
            while zc.issued() > 0 && !zc.all_completed() && Instant::now() < until {
                if zc.reap(&st.ds.socket).is_err() {
                    break;
                }
                std::thread::yield_now();
            }
            st.out.zerocopy_sends = zc.issued();
            st.out.zerocopy_copied = zc.copied();
        }
    }
}

/// Test builds only: a byte flipped on the way in, to prove a receiver's check catches it.
#[cfg(feature = "fault-injection")]
pub mod fault {
    /// `LANDSPEED_FAULT_FLIP=STREAM:OFFSET`, read once per process: a lookup of the environment at
    /// every read cost a test build about 1.5% more instructions per byte received (callgrind), and
    /// `cargo test` leaves target/release/landspeed built with this feature.
    fn target() -> Option<(u32, u64)> {
        static TARGET: std::sync::OnceLock<Option<(u32, u64)>> = std::sync::OnceLock::new();
        *TARGET.get_or_init(|| {
            let spec = std::env::var("LANDSPEED_FAULT_FLIP").ok()?;
            let (s, o) = spec.split_once(':')?;
            Some((s.parse().ok()?, o.parse().ok()?))
        })
    }

    /// Flips one byte of a received chunk if `LANDSPEED_FAULT_FLIP=STREAM:OFFSET` falls inside it.
    pub fn flip(stream: u32, offset: u64, data: &mut [u8]) {
        let Some((s, o)) = target() else {
            return;
        };
        if s == stream && (offset..offset + data.len() as u64).contains(&o) {
            data[(o - offset) as usize] ^= 0x01;
        }
    }

    /// A copy of `data` with [`flip`] applied: for receivers that are handed a message they do not own.
    pub fn flipped(stream: u32, offset: u64, data: &[u8]) -> Vec<u8> {
        let mut d = data.to_vec();
        flip(stream, offset, &mut d);
        d
    }
}
