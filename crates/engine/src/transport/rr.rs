//! Request/response over TCP (`run --rr`, netperf's TCP_RR): on each connection the client sends
//! requests of a fixed size and the server answers each, once it has read it whole, with a response
//! of another fixed size. Both directions are landspeed's pattern at their stream offsets (the
//! requests as stream `id`, the responses as [`TransactionSpec::response_stream`]`(id)`), so the
//! server checks every request byte and the client every response byte, with the engine's own
//! verifier: nothing is echoed, and an answer cannot pass for its request.
//!
//! With one request in flight the socket blocks (with a short timeout to look at the flags): a
//! request is written whole, then its response is read whole, one system call each way when they
//! fit, as a ping-pong of two threads does. With more in flight both ends poll the one socket for
//! reading and writing at once, so neither can fill the other's buffers while itself not reading.
//!
//! Over TLS (`--tls`) the same, through the engine's record layer: requests and responses are
//! sealed as they are generated and checked where their records are opened, anything sealed and
//! not yet written is written before the end waits, and each end's close begins with close_notify.
//!
//! The client's latencies go into one [`TransactionLog`] shared by its streams (a lock per
//! transaction; the supervisor's byte meters count the requests). A stream's bytes in the report are
//! its requests'; its responses are in the transactions' figures.

mod churn;

pub use churn::{run_each, Connections, Handshakes, Opened};

use super::tcp::DataStream;
use super::{round_robin, Meter, Outcome, Settled, StreamMeta, Transport};
use crate::supervisor::{EngineParams, Flags};
use landspeed_core::config::TransactionSpec;
use landspeed_core::endpoint::{Role, TcpSnapshot};
use landspeed_core::payload::{Generator, Verifier};
use landspeed_core::transactions::{TransactionLog, TransactionShape, TransactionsReport};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest one wait lasts before the flags are looked at again.
const TICK: Duration = Duration::from_millis(10);
/// The most bytes one system call writes or reads.
const CHUNK: usize = 64 * 1024;
/// How long a TLS end may take to hand its last records and close_notify to the kernel.
const TLS_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// What a capped stream may run ahead of its rate.
const CAP_BURST: f64 = 256.0 * 1024.0;

/// The request/response transport over a set of connected TCP streams.
pub struct Rr<'a> {
    /// The connections.
    pub streams: &'a [DataStream],
    /// What each request and response holds, and how many are in flight.
    pub spec: TransactionSpec,
    /// The client's transactions (unused at the server).
    pub log: &'a Mutex<TransactionLog>,
}

impl Transport for Rr<'_> {
    fn streams(&self) -> Vec<StreamMeta> {
        super::tcp::Tcp(self.streams).streams()
    }

    /// A thread per connection: each waits on its own socket.
    fn groups(&self, _p: &EngineParams) -> Vec<Vec<usize>> {
        round_robin(self.streams.len(), self.streams.len())
    }

    fn work(
        &self,
        group: &[usize],
        meters: &[Meter],
        p: &EngineParams,
        flags: &Flags,
        t0: Instant,
    ) -> Vec<(usize, Outcome)> {
        each_stream(group, meters, |i| {
            let mut end = End::new(&self.streams[i], &meters[i], self.spec, p);
            match end.ds.role {
                Role::Sender => end.ask(p, flags, t0, self.log),
                Role::Receiver => end.answer(p, flags),
            }
        })
    }

    fn snapshot(&self, i: usize) -> Option<TcpSnapshot> {
        super::tcp::Tcp(self.streams).snapshot(i)
    }

    fn settle(&self, i: usize, rtts_us: &[u32]) -> Settled {
        super::tcp::Tcp(self.streams).settle(i, rtts_us)
    }
}

/// A worker's streams one after another (a thread each, `groups`): each one's outcome, its meter
/// marked finished as it ends.
fn each_stream(group: &[usize], meters: &[Meter], run: impl Fn(usize) -> Outcome) -> Vec<(usize, Outcome)> {
    (group.iter())
        .map(|&i| {
            let out = run(i);
            meters[i].finished.store(true, Relaxed);
            (i, out)
        })
        .collect()
}

/// The log a request/response test's client records into: `spec`'s shape, an interval every
/// `interval` (the caller may read it as the test runs, as the live lines do).
pub fn new_log(spec: &TransactionSpec, interval: Duration) -> Mutex<TransactionLog> {
    Mutex::new(TransactionLog::new(
        TransactionShape::landspeed(spec),
        ns(interval),
    ))
}

/// Runs a request/response test's streams through the supervisor, the client's transactions into
/// `log` (the server's stays empty); its report comes back beside the engine's output, counted
/// over the test's time.
pub fn run<X: Send>(
    streams: &[DataStream],
    (spec, log): (TransactionSpec, &Mutex<TransactionLog>),
    p: &EngineParams,
    wiring: crate::supervisor::Wiring<'_, X>,
) -> (crate::supervisor::EngineOutput, TransactionsReport) {
    let rr = Rr { streams, spec, log };
    let out = crate::supervisor::run(&rr, p, wiring);
    // The test's time: what came after it is the answers to requests already in flight.
    let elapsed = Duration::from_secs_f64(out.elapsed_s);
    let end = p.send_time.map_or(elapsed, |t| t.min(elapsed));
    let mut held = log.lock().unwrap_or_else(|e| e.into_inner());
    let spent = std::mem::replace(
        &mut *held,
        TransactionLog::new(TransactionShape::landspeed(&spec), 0),
    );
    (out, spent.finish(ns(end)))
}

/// One end of one connection: what it has written and read, and what it owes.
struct End<'a> {
    ds: &'a DataStream,
    meter: &'a Meter,
    spec: TransactionSpec,
    gen: Generator,
    verifier: Option<Verifier>,
    rbuf: Vec<u8>,
    /// Bytes written so far (requests at the client, responses at the server).
    written: u64,
    /// Bytes read so far (responses at the client, requests at the server).
    read: u64,
    out: Outcome,
    last_bad_block: Option<u64>,
    last_progress: Instant,
    /// One request in flight: blocking calls instead of polling.
    blocking: bool,
    /// The meter's count before this connection (a connection each: the stream's earlier ones).
    base: u64,
    /// The most transactions this connection carries (a connection each: one).
    limit: Option<u64>,
    /// When the first transaction began, if before its request (a connection each: at `connect()`).
    began: Option<Instant>,
}

impl<'a> End<'a> {
    fn new(ds: &'a DataStream, meter: &'a Meter, spec: TransactionSpec, p: &EngineParams) -> Self {
        let largest = spec.request_bytes.max(spec.response_bytes) as usize;
        // Not on Windows, where a call that timed out leaves the socket indeterminate (see
        // tcp/blocking.rs): there the sockets are polled.
        let blocking = spec.in_flight == 1 && cfg!(unix);
        End {
            ds,
            meter,
            spec,
            gen: Generator::new(&p.pattern, largest.min(CHUNK)),
            verifier: p.verify.then(|| Verifier::new(&p.pattern, CHUNK)),
            rbuf: vec![0; largest.min(CHUNK)],
            written: 0,
            read: 0,
            out: Outcome {
                blocking,
                ..Outcome::default()
            },
            last_bad_block: None,
            last_progress: Instant::now(),
            blocking,
            base: meter.bytes.load(Relaxed),
            limit: None,
            began: None,
        }
    }

    /// One transaction on this connection, begun at `began` (or at its request), counted on from
    /// `out` (the stream's figures so far).
    fn once(mut self, began: Option<Instant>, out: Outcome) -> Self {
        self.limit = Some(1);
        self.began = began;
        self.out = Outcome {
            blocking: self.blocking,
            ..out
        };
        self
    }

    /// Sets the socket up for this end's way of waiting.
    fn prepare(&self) -> std::io::Result<()> {
        let s = &self.ds.socket;
        s.set_nodelay(true)?;
        s.set_nonblocking(!self.blocking)?;
        if self.blocking {
            s.set_read_timeout(Some(TICK))?;
            s.set_write_timeout(Some(TICK))?;
        }
        Ok(())
    }

    /// Writes up to `n` bytes of stream `stream`'s pattern at `self.written` (over TLS: seals them,
    /// and writes what the socket takes); the bytes taken, 0 when the socket would block.
    fn write_some(&mut self, stream: u32, n: u64) -> std::io::Result<usize> {
        let n = (n as usize).min(CHUNK);
        let sent = match &self.ds.tls {
            Some(t) => {
                let (gen, at) = (&mut self.gen, self.written);
                t.lock()
                    .send(&self.ds.socket, |room| gen.fill_spare(stream, at, n.min(room)))
            }
            None => (&self.ds.socket).write(self.gen.fill(stream, self.written, n)),
        };
        match sent {
            Ok(w) => {
                self.written += w as u64;
                if w > 0 {
                    self.last_progress = Instant::now();
                }
                Ok(w)
            }
            Err(e) if would_block(&e) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Over TLS, writes what was sealed and is still here; true while some is (the socket is
    /// then waited on for writing too). Plain TCP keeps nothing back.
    fn flush(&self) -> std::io::Result<bool> {
        match &self.ds.tls {
            Some(t) => t.lock().flush_pending(&self.ds.socket),
            None => Ok(false),
        }
    }

    /// Reads what is there (at most up to `limit` more bytes; over TLS the records that came),
    /// checks it as stream `stream`'s pattern; None at end of file (over TLS, the peer's
    /// close_notify), Some(0) when nothing came.
    fn read_some(&mut self, stream: u32, limit: u64) -> std::io::Result<Option<usize>> {
        let got = match &self.ds.tls {
            Some(t) => self.read_tls(t, stream),
            None => self.read_plain(stream, limit),
        };
        match got {
            Ok(0) => Ok(None),
            Ok(r) => {
                self.read += r as u64;
                self.last_progress = Instant::now();
                Ok(Some(r))
            }
            Err(e) if would_block(&e) => Ok(Some(0)),
            Err(e) => Err(e),
        }
    }

    fn read_plain(&mut self, stream: u32, limit: u64) -> std::io::Result<usize> {
        let n = (limit as usize).clamp(1, self.rbuf.len());
        let r = (&self.ds.socket).read(&mut self.rbuf[..n])?;
        #[cfg(feature = "fault-injection")]
        super::tcp::fault::flip(stream, self.read, &mut self.rbuf[..r]);
        if let Some(v) = self.verifier.as_mut() {
            self.out
                .verify_at(v, stream, self.read, &mut self.last_bad_block, &self.rbuf[..r]);
        }
        Ok(r)
    }

    /// One TLS receive: each record's content checked where it was opened.
    fn read_tls(&mut self, t: &super::tcp::tls::TlsLink, stream: u32) -> std::io::Result<usize> {
        let (out, last_bad, mut at) = (&mut self.out, &mut self.last_bad_block, self.read);
        let mut v = self.verifier.as_mut();
        t.lock().recv(&self.ds.socket, |plain| {
            #[cfg(feature = "fault-injection")]
            super::tcp::fault::flip(stream, at, plain);
            if let Some(v) = v.as_deref_mut() {
                out.verify_at(v, stream, at, last_bad, plain);
            }
            at += plain.len() as u64;
        })
    }

    /// This end is done writing: over TLS its close_notify goes first (and the socket is set back
    /// to this end's way of waiting), then the write side is shut.
    fn shut(&self) -> std::io::Result<()> {
        if let Some(t) = &self.ds.tls {
            t.lock().close(&self.ds.socket, TLS_CLOSE_TIMEOUT)?;
            self.prepare()?;
        }
        let _ = self.ds.socket.shutdown(Shutdown::Write);
        Ok(())
    }

    /// The client: requests out, responses in, each transaction's latency into `log`, until the
    /// time is up or `stop`; then every request still in flight is answered, the write side is
    /// shut, and the server's close is read.
    fn ask(&mut self, p: &EngineParams, flags: &Flags, t0: Instant, log: &Mutex<TransactionLog>) -> Outcome {
        if let Err(e) = self.prepare() {
            return self.ended(Some(format!("cannot set the socket up: {e}")));
        }
        // A connection of a connection-each test, once open, carries its transaction whatever the
        // time: its handshakes are counted, so it is too.
        let deadline = p.send_time.filter(|_| self.limit.is_none()).map(|d| t0 + d);
        let mut q = Asking::default();
        loop {
            if let Some(e) = self.interrupted(flags, p, !q.pending.is_empty() || q.shut) {
                return self.ended(Some(e));
            }
            let stopping = flags.stop.load(Relaxed)
                || deadline.is_some_and(|d| Instant::now() >= d)
                || self.limit.is_some_and(|l| q.begun >= l);
            let wrote = match self.send_requests(&mut q, stopping) {
                Ok(w) => w,
                Err(e) => return self.ended(Some(format!("sending a request: {e}"))),
            };
            let held = match self.flush() {
                Ok(h) => h,
                Err(e) => return self.ended(Some(format!("sending a request: {e}"))),
            };
            let req = u64::from(self.spec.request_bytes);
            if stopping && q.pending.is_empty() && self.written == q.begun * req && !q.shut {
                if let Err(e) = self.shut() {
                    return self.ended(Some(format!("ending the connection: {e}")));
                }
                q.shut = true;
            }
            let got = match self.take_responses(&mut q, t0, log) {
                Ok(Some(n)) => n,
                Ok(None) => return self.ended(None),
                Err(e) => return self.ended(Some(e)),
            };
            if !self.blocking && wrote == 0 && got == 0 {
                let more = held
                    || self.written < q.begun * req
                    || (!stopping && q.pending.len() < self.spec.in_flight as usize);
                if let Err(e) = crate::os::wait_one(&self.ds.socket, more, TICK) {
                    return self.ended(Some(format!("waiting on the socket: {e}")));
                }
            }
        }
    }

    /// Writes the request begun, then begins more while fewer than `in_flight` are unanswered (none
    /// once `stopping`); the bytes written.
    fn send_requests(&mut self, q: &mut Asking, stopping: bool) -> std::io::Result<usize> {
        let req = u64::from(self.spec.request_bytes);
        let mut wrote = 0;
        loop {
            if self.written == q.begun * req {
                if stopping || q.pending.len() >= self.spec.in_flight as usize {
                    break;
                }
                // A transaction begins just before its request's first byte is handed to the kernel.
                q.pending
                    .push_back(self.began.take().unwrap_or_else(Instant::now));
                q.begun += 1;
            }
            match self.write_some(self.ds.id, q.begun * req - self.written)? {
                0 => break,
                w => wrote += w,
            }
        }
        if wrote > 0 {
            self.out.moved(wrote, Instant::now(), self.meter);
        }
        Ok(wrote)
    }

    /// Reads what came of the responses owed: each one completed ends its transaction. Some(bytes
    /// read), None once the server closed after the last answer, an error for anything else.
    fn take_responses(
        &mut self,
        q: &mut Asking,
        t0: Instant,
        log: &Mutex<TransactionLog>,
    ) -> Result<Option<usize>, String> {
        let resp = u64::from(self.spec.response_bytes);
        let wanted = (q.pending.len() as u64 * resp).saturating_sub(self.read % resp);
        let answers = TransactionSpec::response_stream(self.ds.id);
        let got = match self.read_some(answers, wanted.max(1)) {
            Ok(None) if q.pending.is_empty() && q.shut => return Ok(None),
            Ok(None) => {
                let n = q.pending.len();
                return Err(format!(
                    "the server closed the connection with {n} request(s) unanswered"
                ));
            }
            Ok(Some(n)) => n,
            Err(e) => return Err(format!("reading a response: {e}")),
        };
        let completed = self.read / resp - (self.read - got as u64) / resp;
        if completed > 0 {
            let done = Instant::now();
            let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
            for _ in 0..completed {
                let start = q
                    .pending
                    .pop_front()
                    .ok_or("the server sent more than was asked")?;
                l.record(ns(done - t0), ns(done - start));
            }
        }
        Ok(Some(got))
    }

    /// The server: requests in, a response out for each one read whole, until the client shuts its
    /// side (then the last responses go and this side is shut too).
    fn answer(&mut self, p: &EngineParams, flags: &Flags) -> Outcome {
        if let Err(e) = self.prepare() {
            return self.ended(Some(format!("cannot set the socket up: {e}")));
        }
        let (req, resp) = (
            u64::from(self.spec.request_bytes),
            u64::from(self.spec.response_bytes),
        );
        let answers = TransactionSpec::response_stream(self.ds.id);
        // Responses owed are written before more requests are read once they fill this much.
        let owed_cap = resp.max(256 * 1024);
        let mut client_done = false;
        let started = Instant::now();
        loop {
            if let Some(e) = self.interrupted(flags, p, true) {
                return self.ended(Some(e));
            }
            // The server's --max-rate over both ways: ahead of it, nothing moves until it catches up.
            if let Some(wait) = self.ahead_of_cap(p, flags, started) {
                std::thread::sleep(wait.min(TICK));
                continue;
            }
            let owed = (self.read / req) * resp - self.written;
            let wrote = match owed {
                0 => 0,
                n => match self.write_some(answers, n) {
                    Ok(w) => w,
                    Err(e) => return self.ended(Some(format!("sending a response: {e}"))),
                },
            };
            let owed = owed - wrote as u64;
            let held = match self.flush() {
                Ok(h) => h,
                Err(e) => return self.ended(Some(format!("sending a response: {e}"))),
            };
            self.publish();
            if client_done && owed == 0 {
                let shut = self.shut().err().map(|e| format!("ending the connection: {e}"));
                return self.ended(shut);
            }
            // One request at a time: its response goes whole before the next is read.
            let may_read = !client_done && owed < owed_cap && !(self.blocking && owed > 0);
            let got = match may_read {
                false => 0,
                true => match self.take_requests(req) {
                    Ok(Some(n)) => n,
                    Ok(None) => {
                        client_done = true;
                        0
                    }
                    Err(e) => return self.ended(Some(e)),
                },
            };
            self.publish();
            if !self.blocking && wrote == 0 && got == 0 && !client_done {
                if let Err(e) = crate::os::wait_one(&self.ds.socket, owed > 0 || held, TICK) {
                    return self.ended(Some(format!("waiting on the socket: {e}")));
                }
            }
        }
    }

    /// The server's meter: requests read and responses written, so that its limits (`--max-bytes`,
    /// `--max-rate`) and its interval figures see both ways, and it only ever grows.
    fn publish(&self) {
        (self.meter.bytes).store(self.base + self.read + self.written, Relaxed);
    }

    /// How long until the bytes moved both ways are back within the server's cap (`--max-rate`,
    /// this stream's share, from the stream's start with a burst allowance); None when within it.
    fn ahead_of_cap(&self, p: &EngineParams, flags: &Flags, started: Instant) -> Option<Duration> {
        let rate = p.stream_cap_bps.filter(|_| !flags.uncap.load(Relaxed))? / 8.0;
        let moved = (self.read + self.written) as f64;
        let allowed = rate * started.elapsed().as_secs_f64() + CAP_BURST;
        (moved >= allowed).then(|| Duration::from_secs_f64((moved - allowed) / rate + 1e-4))
    }

    /// Reads requests (with one in flight, no further than the one being read): Some(bytes read),
    /// None when the client has shut its side after a whole request.
    fn take_requests(&mut self, req: u64) -> Result<Option<usize>, String> {
        let limit = if self.blocking {
            req - self.read % req
        } else {
            CHUNK as u64
        };
        match self.read_some(self.ds.id, limit) {
            Ok(None) if !self.read.is_multiple_of(req) => {
                Err("the client closed in the middle of a request".into())
            }
            Ok(None) => Ok(None),
            Ok(Some(n)) => {
                // The stream's bytes are its requests'; the meter (both ways) is the loop's.
                if n > 0 {
                    self.out.counted(n, Instant::now());
                }
                Ok(Some(n))
            }
            Err(e) => Err(format!("reading a request: {e}")),
        }
    }

    /// Why the stream must end now, if it must: the test aborted or was halted, or nothing moved
    /// for the idle timeout while something was awaited (`waiting`).
    fn interrupted(&self, flags: &Flags, p: &EngineParams, waiting: bool) -> Option<String> {
        if flags.abort.load(Relaxed) || flags.halt.load(Relaxed) {
            return Some("test aborted".into());
        }
        let idle = self.last_progress.elapsed();
        (waiting && idle > p.idle_timeout).then(|| {
            let what = match (self.ds.role, self.read) {
                (Role::Sender, 0) => {
                    "no response came (a server older than request/response tests runs a bulk test instead)"
                }
                (Role::Sender, _) => "no response came",
                (_, _) => "no request came and no response could be sent",
            };
            format!("{what} for {:?}; giving up on this stream", p.idle_timeout)
        })
    }

    /// The stream's outcome, with `error` if it failed.
    fn ended(&mut self, error: Option<String>) -> Outcome {
        let mut out = std::mem::take(&mut self.out);
        out.error = error;
        out
    }
}

/// The client's requests: how many begun, and when each still unanswered began.
#[derive(Default)]
struct Asking {
    begun: u64,
    pending: VecDeque<Instant>,
    /// The write side is shut: the test is over, the server's close is awaited.
    shut: bool,
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
