//! The blocking TCP worker: a thread that owns one stream and nothing else. With a single socket, epoll
//! buys nothing and costs system calls: a non-blocking send that finds the buffer full returns EAGAIN,
//! then `epoll_wait` sleeps, then the send is made again. A blocking socket lets the kernel sleep the
//! thread inside the one call that will complete. A short send and receive timeout (`TICK`) still wakes
//! the worker often enough to see its flags (stop, abort, iperf3's halt) and to end an idle stream.
//!
//! The transport picks it for a group of one stream with no rate cap, zero-copy, io_uring or file
//! (those keep the epoll worker, which paces, reaps completions and splices); docs/benchmarks.md has
//! the measurement that made it the default.
//!
//! Linux only: on Windows a send or receive that times out (WSAETIMEDOUT) leaves the socket
//! "indeterminate" (Winsock's own words: a send may have been cancelled as it completed, so bytes may
//! be lost or counted twice), and under load a 10 ms tick does time out. Windows keeps every stream on
//! non-blocking sockets polled with WSAPoll, which never leave a call half done.

use super::{halt, Buffers, State};
use crate::supervisor::{EngineParams, Flags};
use crate::transport::{Meter, Outcome};
use landspeed_core::config::RcvLowat;
use landspeed_core::endpoint::Role;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The longest one call may block before the worker looks at its flags again: how late a sender can
/// stop after its time is up on a path too slow to take a whole write within it.
const TICK: Duration = Duration::from_millis(10);

/// Whether a worker's only stream can run on the blocking worker.
pub(super) fn suits(ds: &super::DataStream, p: &EngineParams) -> bool {
    cfg!(unix)
        && !p.uring
        && !p.zerocopy
        && p.stream_cap_bps.is_none()
        && p.burst_bps.is_none()
        && ds.file.is_none()
}

/// Drives one stream with blocking calls until it ends.
pub(super) fn worker(
    index: usize,
    ds: &super::DataStream,
    meter: &Meter,
    p: &EngineParams,
    flags: &Flags,
    t0: Instant,
) -> Vec<(usize, Outcome)> {
    let sender = ds.role == Role::Sender;
    let mut bufs = Buffers::new(p, sender, !sender);
    let mut st = State::new(index, ds, meter, Instant::now())
        .stamping(p)
        .framing(p);
    st.out.blocking = true;
    if let Err(e) = with_timeouts(ds) {
        st.finish(Some(format!("cannot set socket timeouts: {e}")));
    }
    let mut lowat = LowWater::new(p.rcvlowat, !sender);
    let deadline = p.send_time.map(|d| t0 + d);
    while !st.done {
        if flags.abort.load(Relaxed) {
            st.finish(Some("test aborted".into()));
            break;
        }
        if flags.halt.load(Relaxed) {
            let _ = ds.socket.set_nonblocking(true);
            halt(std::slice::from_mut(&mut st), &mut bufs, p);
            break;
        }
        let now = Instant::now();
        let stop_send = flags.stop.load(Relaxed) || deadline.is_some_and(|d| now >= d);
        if sender && (stop_send || st.remaining == Some(0)) {
            st.finish(None);
            break;
        }
        if now.duration_since(st.last_progress) > p.idle_timeout {
            st.idle_out(p.idle_timeout);
            break;
        }
        if let Err(e) = lowat.refresh(ds, now, &mut st.out.rcvlowat_bytes) {
            st.finish(Some(format!("cannot set SO_RCVLOWAT: {e}")));
            break;
        }
        // A call that timed out marks the stream not ready; here the next call simply blocks again.
        st.ready = true;
        // A paced sender's write waits for its pace: one per pass, so its time is looked at each time.
        let allowance = match (sender, p.paced_bps) {
            (true, Some(_)) => p.send_length(),
            _ => usize::MAX,
        };
        super::burst(&mut st, &mut bufs, p, sender, allowance);
        if st.done && flags.halt.load(Relaxed) {
            // iperf3's end: the peer may close the stream while a call was blocked in it; what was in
            // flight is not counted, and its failing is not an error.
            st.out.error = None;
        }
    }
    vec![(st.index, st.out)]
}

/// Blocking mode with `TICK` as both the send and the receive timeout.
fn with_timeouts(ds: &super::DataStream) -> std::io::Result<()> {
    ds.socket.set_nonblocking(false)?;
    ds.socket.set_write_timeout(Some(TICK))?;
    ds.socket.set_read_timeout(Some(TICK))?;
    Ok(())
}

/// A receiver's low-water mark, kept in step with the receive buffer as the kernel autotunes it.
/// Fewer wake-ups per byte: one per mark instead of one per arriving train of segments; the receive
/// timeout (`TICK`) hands over whatever arrived when less than the mark comes.
struct LowWater {
    policy: RcvLowat,
    set: u64,
    next: Option<Instant>,
}

impl LowWater {
    /// How often an automatic mark looks at the receive buffer again.
    const EVERY: Duration = Duration::from_millis(50);

    fn new(policy: RcvLowat, receiver: bool) -> LowWater {
        let policy = if receiver { policy } else { RcvLowat::Off };
        LowWater {
            policy,
            set: 0,
            next: (policy != RcvLowat::Off).then(Instant::now),
        }
    }

    /// Sets the mark the policy asks for now, if it changed; `kept` is the highest the kernel kept.
    fn refresh(
        &mut self,
        ds: &super::DataStream,
        now: Instant,
        kept: &mut Option<u64>,
    ) -> std::io::Result<()> {
        let Some(next) = self.next.filter(|n| now >= *n) else {
            return Ok(());
        };
        let rcvbuf = socket2::SockRef::from(&ds.socket).recv_buffer_size()? as u64;
        let mark = self.policy.mark(rcvbuf);
        if mark != self.set && mark > 0 {
            let k = crate::sockopt::set_rcvlowat(&ds.socket, mark)?;
            *kept = Some(kept.unwrap_or(0).max(k));
            self.set = mark;
        }
        self.next = matches!(self.policy, RcvLowat::Auto { .. }).then(|| next + Self::EVERY);
        Ok(())
    }
}
