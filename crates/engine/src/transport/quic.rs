//! The QUIC transport: streams over quinn connections, behind the same supervisor, meters,
//! verification and report as TCP.
//!
//! One worker thread per connection drives all of that connection's streams as tasks of one async
//! runtime: the client's own current-thread runtime (so a connection's packet processing and its
//! streams share a core, as in quinn's perf tool), or on the server as a task of the endpoint's
//! shared runtime, so that the thread that drives a connection also reads, verifies or writes its
//! streams while the worker thread waits (`Runtime::run`). A sender writes the
//! payload until its budget, its time or `stop`, then sends FIN and waits (bounded) until the peer
//! has acknowledged every byte; a receiver reads chunks without copying them, verifies each, and ends
//! at FIN. Every wait is cut into `TICK`s so the flags are seen.

use super::{Meter, Outcome, Settled, StreamMeta, Transport};
use crate::supervisor::{EngineParams, Flags};
use landspeed_core::config::Flow;
use landspeed_core::endpoint::{QuicStats, Role, TcpSnapshot};
use landspeed_core::payload::{Generator, Verifier};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest a worker waits on one stream operation before it looks at its flags again.
const TICK: Duration = Duration::from_millis(20);

/// Where a connection's futures run.
pub enum Runtime {
    /// A current-thread runtime of the connection's own (the client: one per connection), with the
    /// thread that keeps driving it between the handshake and the test, when there is one.
    Owned(std::sync::Arc<tokio::runtime::Runtime>, Mutex<Option<Keeper>>),
    /// The endpoint's shared runtime (the server).
    Shared(tokio::runtime::Handle),
}

/// A thread driving a current-thread runtime until told to stop: a connection must answer its
/// peer (acknowledgements, the first stream frames) while the control connection prepares the test.
pub struct Keeper {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Runtime {
    /// A runtime of the connection's own.
    pub fn owned(rt: tokio::runtime::Runtime) -> Runtime {
        Runtime::Owned(std::sync::Arc::new(rt), Mutex::new(None))
    }

    /// Runs `f` to completion on this thread (a keeper gives the runtime up first).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        match self {
            Runtime::Owned(rt, keeper) => {
                if let Some(k) = keeper.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = k.stop.send(());
                    let _ = k.thread.join();
                }
                rt.block_on(f)
            }
            Runtime::Shared(h) => h.block_on(f),
        }
    }

    /// Runs a connection's streams to completion: on the client's own runtime on this thread, on
    /// the server's shared runtime as a task of it, so that the thread that drives the connection
    /// (reads its datagrams, sends its packets) also polls its streams, as one thread, instead of
    /// handing every chunk across to this one (which on a shared host took a third thread's worth
    /// of preemption and wake-ups: docs/benchmarks.md). This thread waits for the task; an error
    /// when the runtime stopped (the server shutting down) before the task finished.
    pub fn run<'a, T: Send + 'static>(&self, f: impl Future<Output = T> + Send + 'a) -> Result<T, String> {
        match self {
            Runtime::Owned(..) => Ok(self.block_on(f)),
            Runtime::Shared(h) => run_as_task(h, Box::pin(f)),
        }
    }

    /// An owned runtime: a thread drives it until the next `block_on`.
    pub fn keep_driving(&self) {
        let Runtime::Owned(rt, keeper) = self else {
            return;
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let rt2 = rt.clone();
        let thread = std::thread::spawn(move || {
            let _ = rt2.block_on(stopped);
        });
        *keeper.lock().unwrap_or_else(|e| e.into_inner()) = Some(Keeper { stop, thread });
    }
}

/// Spawns `f`, which borrows from this thread's stack, as a task of `h`'s runtime and blocks until
/// it has finished.
fn run_as_task<'a, T: Send + 'static>(
    h: &tokio::runtime::Handle,
    f: Pin<Box<dyn Future<Output = T> + Send + 'a>>,
) -> Result<T, String> {
    // SAFETY: only the lifetime changes. What `f` borrows outlives this call, and the task does not
    // outlive it: this thread returns only once the task has finished (its future completed or
    // dropped), and if it unwinds first, `Joined` aborts the task and waits for it in its drop.
    let f: Pin<Box<dyn Future<Output = T> + Send + 'static>> = unsafe { std::mem::transmute(f) };
    let mut joined = Joined {
        rt: h,
        task: Some(h.spawn(f)),
    };
    let out = h.block_on(joined.task.as_mut().expect("spawned"));
    joined.task = None;
    match out {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err("the server's QUIC runtime stopped during the test".into()),
    }
}

/// A task that borrows from the stack: on drop, aborted and waited for until it has finished (its
/// handle resolves once the future is dropped).
struct Joined<'h, T> {
    rt: &'h tokio::runtime::Handle,
    task: Option<tokio::task::JoinHandle<T>>,
}

impl<T> Drop for Joined<'_, T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = self.rt.block_on(task);
        }
    }
}

/// One QUIC connection of a test.
pub struct QuicConnection {
    /// The connection.
    pub conn: quinn::Connection,
    /// Where its futures run.
    pub runtime: Runtime,
    /// Its congestion controller's name, for the report.
    pub congestion: String,
    /// The client's endpoint (its UDP socket), kept open as long as the connection.
    pub endpoint: Option<quinn::Endpoint>,
    /// The UDP socket's send and receive buffers as the kernel granted them.
    pub buffers: (u64, u64),
}

impl Drop for QuicConnection {
    /// The test is over: the connection closes, and a client's endpoint gets a moment to say so.
    fn drop(&mut self) {
        self.conn.close(0u32.into(), b"done");
        if let (Runtime::Owned(..), Some(ep)) = (&self.runtime, &self.endpoint) {
            self.runtime.block_on(async {
                let _ = tokio::time::timeout(Duration::from_millis(200), ep.wait_idle()).await;
            });
        }
    }
}

/// One stream of a test over QUIC.
pub struct QuicStream {
    /// The stream's number in the test.
    pub id: u32,
    /// Which way its data goes.
    pub flow: Flow,
    /// Whether this end sends or receives on it.
    pub role: Role,
    /// Sender only: stop after exactly this many bytes.
    pub budget: Option<u64>,
    /// Which of the test's connections carries it.
    pub connection: usize,
    /// Its two halves, taken by the worker that drives it.
    pub io: Mutex<Option<(quinn::SendStream, quinn::RecvStream)>>,
    /// A request of the QUIC performance protocol (this end is its client): an upload ends when the
    /// server's response (its FIN) proves it read everything, and a timed download is stopped
    /// (STOP_SENDING) when the time is up.
    pub perf: bool,
}

/// The QUIC transport over a test's connections and streams.
pub struct Quic<'a> {
    /// The connections.
    pub connections: &'a [QuicConnection],
    /// The streams, in id order.
    pub streams: &'a [QuicStream],
}

impl Transport for Quic<'_> {
    fn streams(&self) -> Vec<StreamMeta> {
        self.streams
            .iter()
            .map(|s| StreamMeta::new(s.id, s.flow, s.role))
            .collect()
    }

    fn groups(&self, _p: &EngineParams) -> Vec<Vec<usize>> {
        (0..self.connections.len())
            .map(|c| {
                (0..self.streams.len())
                    .filter(|&i| self.streams[i].connection == c)
                    .collect()
            })
            .filter(|g: &Vec<usize>| !g.is_empty())
            .collect()
    }

    fn work(
        &self,
        group: &[usize],
        meters: &[Meter],
        p: &EngineParams,
        flags: &Flags,
        t0: Instant,
    ) -> Vec<(usize, Outcome)> {
        let Some(&first) = group.first() else {
            return vec![];
        };
        let c = &self.connections[self.streams[first].connection];
        let tasks: Vec<StreamTask<'_>> = group
            .iter()
            .map(|&i| {
                let s = &self.streams[i];
                let io = s.io.lock().unwrap_or_else(|e| e.into_inner()).take();
                let task = Stream {
                    s,
                    meter: &meters[i],
                    p,
                    flags,
                };
                Box::pin(async move {
                    let out = match io {
                        None => Outcome {
                            error: Some("the stream was already driven".into()),
                            ..Outcome::default()
                        },
                        Some((tx, rx)) if s.role == Role::Sender => task.send(tx, rx, t0).await,
                        Some((_, rx)) => task.receive(rx, t0).await,
                    };
                    task.meter.finished.store(true, Relaxed);
                    (i, out)
                }) as StreamTask<'_>
            })
            .collect();
        let sends = group.iter().any(|&i| self.streams[i].role == Role::Sender);
        let ran = c.runtime.run(async {
            tokio::select! {
                outs = join_all(tasks) => outs,
                never = follow_the_path(&c.conn), if sends => match never {},
            }
        });
        ran.unwrap_or_else(|e| {
            let error = || Outcome {
                error: Some(e.clone()),
                ..Outcome::default()
            };
            group.iter().map(|&i| (i, error())).collect()
        })
    }

    fn snapshot(&self, i: usize) -> Option<TcpSnapshot> {
        let st = self.connections[self.streams[i].connection].conn.stats();
        Some(TcpSnapshot {
            rtt_us: u32::try_from(st.path.rtt.as_micros()).unwrap_or(u32::MAX),
            cwnd_bytes: st.path.cwnd,
            retransmits: st.path.lost_packets,
        })
    }

    fn settle(&self, i: usize, _rtts_us: &[u32]) -> Settled {
        let c = &self.connections[self.streams[i].connection];
        Settled {
            snd_buf_bytes: c.buffers.0,
            rcv_buf_bytes: c.buffers.1,
            quic: Some(stats(c, self.streams[i].connection)),
            ..Settled::default()
        }
    }
}

/// One stream's task: its index and what it measured.
type StreamTask<'a> = Pin<Box<dyn Future<Output = (usize, Outcome)> + Send + 'a>>;

/// A connection's figures as quinn kept them.
fn stats(c: &QuicConnection, index: usize) -> QuicStats {
    let st = c.conn.stats();
    QuicStats {
        connection: index as u32,
        congestion: c.congestion.clone(),
        rtt_us: st.path.rtt.as_micros() as u64,
        cwnd_bytes: st.path.cwnd,
        congestion_events: st.path.congestion_events,
        lost_packets: st.path.lost_packets,
        lost_bytes: st.path.lost_bytes,
        sent_packets: st.path.sent_packets,
        path_mtu_bytes: u32::from(st.path.current_mtu),
        datagrams_sent: st.udp_tx.datagrams,
        datagrams_received: st.udp_rx.datagrams,
        send_calls: st.udp_tx.ios,
    }
}

/// Polls every future to completion on the current task; outputs in input order.
async fn join_all<T>(mut futs: Vec<Pin<Box<dyn Future<Output = T> + Send + '_>>>) -> Vec<T> {
    let mut outs: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (f, o) in futs.iter_mut().zip(outs.iter_mut()) {
            if o.is_none() {
                if let std::task::Poll::Ready(v) = f.as_mut().poll(cx) {
                    *o = Some(v);
                }
            }
        }
        if outs.iter().all(Option::is_some) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outs.into_iter()
        .map(|o| o.expect("every future completed"))
        .collect()
}

/// One stream as its task drives it.
struct Stream<'a> {
    s: &'a QuicStream,
    meter: &'a Meter,
    p: &'a EngineParams,
    flags: &'a Flags,
}

impl Stream<'_> {
    fn account(&self, out: &mut Outcome, n: usize) {
        out.moved(n, Instant::now(), self.meter);
    }

    /// Writes the payload until the budget, the deadline or `stop`, then FIN and the peer's
    /// acknowledgement of every byte.
    async fn send(&self, mut tx: quinn::SendStream, rx: quinn::RecvStream, t0: Instant) -> Outcome {
        let mut out = Outcome::default();
        let mut gen = Generator::new(&self.p.pattern, self.p.length);
        let mut chunks = Chunks::default();
        let mut pending: Option<bytes::Bytes> = None;
        let deadline = self.p.send_time.map(|d| t0 + d);
        let mut last_progress = Instant::now();
        loop {
            let now = Instant::now();
            if self.flags.abort.load(Relaxed) {
                out.error = Some("test aborted".into());
                return out;
            }
            let left = self.s.budget.map(|b| b - out.bytes);
            if self.flags.stop.load(Relaxed) || deadline.is_some_and(|d| now >= d) || left == Some(0) {
                break;
            }
            if now.duration_since(last_progress) > self.p.idle_timeout {
                out.error = Some(format!("could not send for {:?}", self.p.idle_timeout));
                return out;
            }
            let mut chunk = match pending.take().filter(|b| !b.is_empty()) {
                Some(rest) => [rest],
                None => {
                    let n = left.map_or(self.p.length, |l| l.min(self.p.length as u64) as usize);
                    [chunks.next(&mut gen, self.s.id, out.bytes, n)]
                }
            };
            // Cancelled by the timeout only while nothing was taken; on return `chunk` holds the rest.
            let written = tokio::time::timeout(TICK, tx.write_chunks(&mut chunk)).await;
            let [rest] = chunk;
            pending = Some(rest);
            match written {
                Err(_) => {}
                Ok(Ok(w)) => {
                    self.account(&mut out, w.bytes);
                    last_progress = Instant::now();
                }
                Ok(Err(e)) => {
                    out.error = Some(format!("send: {e}"));
                    return out;
                }
            }
        }
        let _ = tx.finish();
        self.meter.finished.store(true, Relaxed);
        let done = if self.s.perf {
            self.answered(rx).await
        } else {
            self.acknowledged(&mut tx).await
        };
        if let Some(e) = done {
            out.error = Some(e);
        }
        out
    }

    /// A performance-protocol upload: waits for the server's response to end (it reads the whole
    /// request first, so its FIN proves every byte arrived), watching for `abort`.
    async fn answered(&self, mut rx: quinn::RecvStream) -> Option<String> {
        let until = Instant::now() + self.p.idle_timeout;
        while Instant::now() < until && !self.flags.abort.load(Relaxed) {
            match tokio::time::timeout(TICK, rx.read_chunk(usize::MAX, false)).await {
                Err(_) | Ok(Ok(Some(_))) => continue,
                Ok(Ok(None)) => return None,
                Ok(Err(e)) => return Some(format!("waiting for the server's answer: {e}")),
            }
        }
        Some("the server did not answer the upload within the idle timeout".into())
    }

    /// Waits until the peer has acknowledged every byte sent (or stopped the stream), watching for
    /// `abort`; bounded by the idle timeout.
    async fn acknowledged(&self, tx: &mut quinn::SendStream) -> Option<String> {
        let until = Instant::now() + self.p.idle_timeout;
        while Instant::now() < until && !self.flags.abort.load(Relaxed) {
            match tokio::time::timeout(TICK, tx.stopped()).await {
                Err(_) => continue,
                Ok(Ok(None)) => return None,
                Ok(Ok(Some(code))) => return Some(format!("the peer stopped the stream (code {code})")),
                Ok(Err(e)) => return Some(format!("waiting for the last acknowledgements: {e}")),
            }
        }
        None
    }

    /// Reads until FIN, verifying every chunk.
    async fn receive(&self, mut rx: quinn::RecvStream, t0: Instant) -> Outcome {
        let mut out = Outcome::default();
        let deadline = self.p.send_time.filter(|_| self.s.perf).map(|d| t0 + d);
        let mut verifier = self
            .p
            .verify
            .then(|| Verifier::new(&self.p.pattern, self.p.length));
        let mut last_bad = None;
        let mut last_progress = Instant::now();
        // Chunks are what quinn received (about a packet each): taken by the batch, so that the
        // per-call work (the timeout, the clock, the meter) is paid once per batch, not per packet.
        let mut chunks = vec![bytes::Bytes::new(); RECV_CHUNKS];
        loop {
            if self.flags.abort.load(Relaxed) {
                out.error = Some("test aborted".into());
                break;
            }
            if self.flags.halt.load(Relaxed) {
                break;
            }
            let stop = self.flags.stop.load(Relaxed) || deadline.is_some_and(|d| Instant::now() >= d);
            if stop && deadline.is_some() {
                // A timed performance-protocol download: the client ends it.
                let _ = rx.stop(0u32.into());
                break;
            }
            if last_progress.elapsed() > self.p.idle_timeout {
                out.error = Some(format!("received nothing for {:?}", self.p.idle_timeout));
                break;
            }
            match tokio::time::timeout(TICK, rx.read_chunks(&mut chunks)).await {
                Err(_) => {}
                Ok(Ok(Some(n))) => {
                    let mut at = out.bytes;
                    for chunk in &mut chunks[..n] {
                        let data = received(self.s.id, at, std::mem::take(chunk));
                        if let Some(v) = verifier.as_mut() {
                            out.verify_at(v, self.s.id, at, &mut last_bad, &data);
                        }
                        at += data.len() as u64;
                    }
                    let n = (at - out.bytes) as usize;
                    self.account(&mut out, n);
                    last_progress = Instant::now();
                }
                Ok(Ok(None)) => break,
                Ok(Err(e)) => {
                    out.error = Some(format!("receive: {e}"));
                    break;
                }
            }
        }
        out
    }
}

/// How many received chunks one read takes at most.
const RECV_CHUNKS: usize = 64;

/// Chunks a sender hands quinn without a copy (`write_chunks` keeps the `Bytes`, where `write` copies
/// the slice into a buffer of its own: that copy was a fifth of the sender's time). Each chunk is
/// kept here too; once quinn has let go of the oldest (every byte of it acknowledged), the next chunk
/// of the same size and pool position reuses its memory, and only its block headers are rewritten
/// (`Generator::rewrite`). Otherwise a chunk is generated into new memory; what is kept is bounded by
/// quinn's largest send window and one chunk.
#[derive(Default)]
struct Chunks {
    /// The chunks given to quinn, oldest first, with the stream offset each holds.
    given: std::collections::VecDeque<(u64, bytes::Bytes)>,
}

impl Chunks {
    /// The `n` payload bytes of `stream` at `offset`, as a chunk of their own.
    fn next(&mut self, gen: &mut Generator, stream: u32, offset: u64, n: usize) -> bytes::Bytes {
        let pool = landspeed_core::payload::POOL as u64;
        let reusable = self
            .given
            .front()
            .is_some_and(|(at, b)| b.len() == n && at % pool == offset % pool && b.is_unique());
        let chunk = match reusable.then(|| self.given.pop_front()).flatten() {
            Some((_, b)) => {
                let mut m = b.try_into_mut().expect("checked unique");
                gen.rewrite(stream, offset, &mut m);
                m.freeze()
            }
            None => bytes::Bytes::copy_from_slice(gen.fill(stream, offset, n)),
        };
        // Kept: what quinn's largest send window holds, and the chunk being written; beyond, the
        // oldest is forgotten (quinn frees it when done), so memory stays what quinn's own copy took.
        let most = (crate::quic::MAX_SEND_WINDOW as usize / n.max(1)).max(1) + 1;
        while self.given.len() >= most {
            self.given.pop_front();
        }
        self.given.push_back((offset, chunk.clone()));
        chunk
    }
}

/// Keeps a sending connection's send window at what its path needs (`quic::send_window` of the rate
/// it sent at and its RTT), adjusted every round trip and at least every 50 ms: large enough for a
/// long path, small enough on a short one that the chunks a sender cycles through stay in cache.
async fn follow_the_path(conn: &quinn::Connection) -> std::convert::Infallible {
    let (mut at, mut sent) = (Instant::now(), conn.stats().udp_tx.bytes);
    loop {
        tokio::time::sleep(conn.rtt().max(Duration::from_millis(50))).await;
        let (now, total) = (Instant::now(), conn.stats().udp_tx.bytes);
        let bps = (total - sent) as f64 * 8.0 / now.duration_since(at).as_secs_f64();
        conn.set_send_window(crate::quic::send_window(bps, conn.rtt()));
        (at, sent) = (now, total);
    }
}

/// A received chunk as the verifier sees it (the test build's fault injector may flip a byte).
#[cfg(not(feature = "fault-injection"))]
fn received(_id: u32, _offset: u64, b: bytes::Bytes) -> bytes::Bytes {
    b
}

#[cfg(feature = "fault-injection")]
fn received(id: u32, offset: u64, b: bytes::Bytes) -> Vec<u8> {
    let mut v = b.to_vec();
    super::tcp::fault::flip(id, offset, &mut v);
    v
}
