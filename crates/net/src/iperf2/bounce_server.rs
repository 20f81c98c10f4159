//! Answering iperf 2's `--bounceback` clients on landspeed's port. The greeting has read a request's
//! 64-byte header (its first word is the bounceback flag alone); here the request is checked (its size
//! and hold within the server's bounds), admitted as any test (a keyed server refuses it unless
//! `--open iperf2`; the per-minute rate, the slots per server and address and the memory budget
//! apply) and answered as
//! iperf 2.1.8's server answers: each request read whole, stamped when read, held as asked, stamped
//! again and written back, until the client closes, sets the stop flag, falls silent for the idle
//! timeout or reaches the server's longest test. The log counts transactions as bytes both ways, as
//! iperf 2's server does; the latencies are the client's to measure.

use super::bounce_record as record;
use super::server::refused_keyed;
use crate::host::{RefusalKind, Shared, TestLog};
use landspeed_core::config::Direction;
use landspeed_iperf2::ack::WireTime;
use landspeed_iperf2::bounceback::{self as bb, bbflags, Bounce};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// How often a wait for the next request looks at the server's shutdown and the test's deadline.
const POLL: Duration = Duration::from_millis(200);

/// A bounceback client admitted: its first request's header and its slot.
pub(crate) struct Bouncing {
    socket: TcpStream,
    header: Vec<u8>,
    first: Bounce,
    peer: SocketAddr,
    /// When the connection was accepted: the test's clock starts there, as iperf 2's server's
    /// does (not once its greeting was read and the test admitted).
    accepted: Instant,
    _slot: crate::host::Slot,
    _memory: Option<crate::host::MemoryHold>,
}

/// A connection whose greeting was a bounceback header (`header`, its 64 bytes), from `peer` and
/// accepted at `accepted`: checked and admitted on the accepting thread (it never waits on the
/// client), or refused with a log line (iperf 2 has no message for it: the connection closes).
pub(crate) fn arrival(
    socket: TcpStream,
    header: &[u8],
    (peer, accepted): (SocketAddr, Instant),
    shared: &Shared,
) -> Option<Bouncing> {
    let refuse = |kind, reason: String| {
        shared.refuse(peer, kind, format!("iperf2 bounceback: {reason}"));
        None
    };
    let first = match Bounce::parse(header) {
        Ok(b) => b,
        Err(e) => return refuse(RefusalKind::Malformed, e.to_string()),
    };
    if refused_keyed(peer, shared) {
        return None;
    }
    if let Err(why) = shared.admit(peer) {
        return refuse(RefusalKind::RateLimited, why);
    }
    let Ok(slot) = shared.slot(peer) else {
        return refuse(RefusalKind::Busy, "busy (every test slot in use)".into());
    };
    // The one request buffer the test holds, against --max-memory.
    let Ok(memory) = shared.hold_bytes(u64::from(first.size)) else {
        return refuse(
            RefusalKind::Memory,
            "its request needs more memory than the server has left".into(),
        );
    };
    Some(Bouncing {
        socket,
        header: header.to_vec(),
        first,
        peer,
        accepted,
        _slot: slot,
        _memory: memory,
    })
}

impl Bouncing {
    /// Answers requests until the test ends, then logs it with its result.
    pub(crate) fn serve(self, shared: &Arc<Shared>) {
        let mut log = TestLog::new(self.peer, "iperf2 bounceback");
        log.streams = 1;
        log.direction = Some(Direction::Bidir);
        if self.first.has(bbflags::TOS) {
            let tos = Some(self.first.tos as u8);
            let _ = landspeed_engine::sockopt::set_tos(&socket2::SockRef::from(&self.socket), tos);
        }
        let mut rec = Recorder::new(&self, shared);
        let error = answer_all(&self, shared, &mut rec);
        let elapsed_s = rec.now_s();
        rec.tally.end(elapsed_s);
        (log.bytes_received, log.bytes_sent) = rec.tally.bytes();
        log.duration_s = elapsed_s;
        let result = record::result(
            (&rec.spec, rec.context),
            (&rec.tally, elapsed_s),
            Some(self.peer.port()),
            (&rec.made, error.clone()),
        );
        log.result = Some(Box::new(result));
        log.error = error;
        shared.tests_done.fetch_add(1, Relaxed);
        shared.emit(crate::host::ServerEvent::Test(log));
    }
}

/// The test's record as it runs: its bytes each way on its clock, sampled at the server's interval
/// (iperf 2's server `-i`, else the spec's), each sample shown to a live view.
struct Recorder<'a> {
    started: Instant,
    tally: record::Tally,
    spec: landspeed_core::config::TestSpec,
    context: landspeed_core::assemble::RunContext,
    made: crate::host::Made,
    live: Option<crate::host::Live>,
    shared: &'a Shared,
}

impl<'a> Recorder<'a> {
    /// The record of `b`'s test starting now, its first header counted as read.
    fn new(b: &Bouncing, shared: &'a Shared) -> Recorder<'a> {
        let o = &shared.opts;
        let every = (o.iperf2_interval).unwrap_or(landspeed_core::config::TestSpec::default().interval_s);
        let spec = record::spec(&b.first, every);
        let context = record::context(&b.socket, SystemTime::now() - b.accepted.elapsed());
        let port = Some(b.peer.port());
        let made = record::made(port, super::server::made(&b.socket), &b.first);
        let live = o.live.then(|| record::live(&spec, &context, port, &made));
        if let Some(l) = &live {
            shared.emit(l.so_far());
        }
        let mut rec = Recorder {
            started: b.accepted,
            tally: record::Tally::new(every),
            spec,
            context,
            made,
            live,
            shared,
        };
        rec.tally.read(rec.now_s(), bb::HEADER_BYTES);
        rec
    }

    fn now_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn read(&mut self, n: usize) {
        let closed = self.tally.read(self.now_s(), n);
        self.show(closed);
    }

    fn wrote(&mut self, n: usize) {
        let closed = self.tally.wrote(self.now_s(), n);
        self.show(closed);
    }

    /// A wait for the client woke: the intervals that ended meanwhile close.
    fn waited(&mut self) {
        let closed = self.tally.close_until(self.now_s());
        self.show(closed);
    }

    fn show(&mut self, closed: bool) {
        if let Some(l) = self.live.as_mut().filter(|_| closed) {
            let new = self.tally.samples.get(l.samples.len()..).unwrap_or_default();
            l.samples.extend_from_slice(new);
            self.shared.emit(l.so_far());
        }
    }
}

/// The answering loop: the first request's rest, then request after request; the error that ended
/// it, if one did.
fn answer_all(b: &Bouncing, shared: &Shared, rec: &mut Recorder) -> Option<String> {
    let o = &shared.opts;
    let deadline = o
        .limits
        .max_duration_s
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    let mut ends = Ends {
        shutdown: &shared.shutdown,
        deadline,
        idle: o.idle_timeout,
    };
    let socket = &b.socket;
    let _ = socket.set_nodelay(true);
    let _ = socket.set_read_timeout(Some(POLL));
    let _ = socket.set_write_timeout(Some(o.handshake_timeout));
    let quickack = b.first.has(bbflags::QUICKACK);
    let mut buf = vec![0u8; b.first.size as usize];
    buf[..bb::HEADER_BYTES].copy_from_slice(&b.header);
    let mut have = bb::HEADER_BYTES;
    loop {
        match read_whole(socket, &mut buf, have, (&mut ends, &mut *rec)) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(e),
        }
        if Bounce::parse(&buf).is_ok_and(|r| r.has(bbflags::STOP)) {
            return None;
        }
        if let Err(e) = answer(socket, &mut buf, b.first.hold_us, quickack) {
            return Some(format!("writing an answer: {e}"));
        }
        rec.wrote(buf.len());
        have = 0;
    }
}

/// Stamps a request, holds it as asked, stamps it again and writes it back.
fn answer(socket: &TcpStream, buf: &mut [u8], hold_us: u32, quickack: bool) -> std::io::Result<()> {
    bb::stamp_received(buf, now());
    if hold_us > 0 {
        // As iperf 2's server: the request is acknowledged before the hold, not after it.
        if quickack {
            landspeed_engine::sockopt::quickack(socket);
        }
        std::thread::sleep(Duration::from_micros(u64::from(hold_us)));
    }
    bb::stamp_answered(buf, now());
    (&*socket).write_all(buf)
}

/// When a wait for a request gives up.
struct Ends<'a> {
    shutdown: &'a std::sync::atomic::AtomicBool,
    deadline: Option<Instant>,
    idle: Duration,
}

/// Reads until `buf` is full (`have` bytes are already there): Ok(false) when the client closed
/// between requests, an error when it closed inside one, went silent or the test ran out of time.
fn read_whole(
    mut s: &TcpStream,
    buf: &mut [u8],
    mut have: usize,
    (ends, rec): (&mut Ends, &mut Recorder),
) -> Result<bool, String> {
    let mut quiet_since = Instant::now();
    while have < buf.len() {
        match s.read(&mut buf[have..]) {
            Ok(0) if have == 0 => return Ok(false),
            Ok(0) => {
                return Err(format!(
                    "the client closed inside a request ({have} of {} bytes)",
                    buf.len()
                ))
            }
            Ok(n) => {
                have += n;
                rec.read(n);
                quiet_since = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                rec.waited()
            }
            Err(e) => return Err(format!("reading a request: {e}")),
        }
        if ends.shutdown.load(Relaxed) {
            return Err("the server is shutting down".into());
        }
        if ends.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err("the server's longest test (--max-duration) was reached".into());
        }
        if quiet_since.elapsed() >= ends.idle {
            return Err(format!("no request for {:?} (the idle timeout)", ends.idle));
        }
    }
    Ok(true)
}

fn now() -> WireTime {
    WireTime::from_unix_ns(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    )
}
