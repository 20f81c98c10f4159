//! The io_uring backend (`--io uring --queue-depth N`, NTttcp's outstanding asynchronous I/Os): each
//! stream keeps a chain of N sends or receives queued in the kernel, so the next buffer starts the moment
//! the previous one completes, without a system call in between; one `io_uring_enter` submits new chains
//! and collects completions for every stream of the worker.
//!
//! Order is what makes a byte stream verifiable, so the N operations of a chain are linked
//! (IOSQE_IO_LINK): the kernel runs them one after another on the socket, never interleaved. Sends use
//! MSG_WAITALL, so a short send only happens on error and cancels the rest of its chain, which sent
//! nothing; the stream's offset is always the sum of what completed. A new chain is queued only when the
//! stream's previous one has fully completed, and every buffer lives until its operation has completed.

use super::{DataStream, EngineParams, Flags, Meter, Outcome, State};
use io_uring::{opcode, squeue, types, IoUring};
use landspeed_core::endpoint::Role;
use landspeed_core::payload::{Generator, Verifier};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

struct Slots {
    gens: Vec<Generator>,
    bufs: Vec<Vec<u8>>,
    in_flight: usize,
    eof: bool,
}

fn user_data(stream: usize, slot: usize) -> u64 {
    ((stream as u64) << 16) | slot as u64
}

/// Runs the worker's streams through one io_uring. Same contract as the epoll worker.
pub(super) fn worker(
    streams: Vec<(usize, &DataStream, &Meter)>,
    p: &EngineParams,
    flags: &Flags,
    t0: Instant,
) -> Vec<(usize, Outcome)> {
    let now = Instant::now();
    let mut states: Vec<State> = streams
        .into_iter()
        .map(|(i, ds, c)| State::new(i, ds, c, now))
        .collect();
    let qd = p.queue_depth.max(1);
    let entries = (states.len() * qd).next_power_of_two().clamp(8, 32768) as u32;
    let ring = match IoUring::new(entries) {
        Ok(r) => r,
        Err(e) => {
            for st in states.iter_mut() {
                st.finish(Some(format!(
                    "io_uring unavailable: {e} (the epoll backend works without it)"
                )));
            }
            return states.into_iter().map(|s| (s.index, s.out)).collect();
        }
    };
    let slots = states.iter().map(|st| Slots::new(st, p, qd)).collect();
    let mut w = Uring {
        ring,
        slots,
        verifier: p.verify.then(|| Verifier::new(&p.pattern, p.length)),
        deadline: p.send_time.map(|d| t0 + d),
        aborting: false,
        qd,
    };
    loop {
        w.check_abort(&mut states, flags);
        let stop_send =
            flags.stop.load(Relaxed) || w.deadline.is_some_and(|d| Instant::now() >= d) || w.aborting;
        if w.queue(&mut states, p, stop_send) == 0 {
            break;
        }
        w.enter(&mut states, stop_send);
        w.reap(&mut states);
    }
    states.into_iter().map(|s| (s.index, s.out)).collect()
}

impl Slots {
    /// A sender's generators or a receiver's buffers, one per queued operation.
    fn new(st: &State, p: &EngineParams, qd: usize) -> Slots {
        let sender = st.ds.role == Role::Sender;
        Slots {
            gens: if sender {
                (0..qd).map(|_| Generator::new(&p.pattern, p.length)).collect()
            } else {
                vec![]
            },
            bufs: if sender {
                vec![]
            } else {
                (0..qd).map(|_| vec![0u8; p.length]).collect()
            },
            in_flight: 0,
            eof: false,
        }
    }
}

/// One worker's ring, its streams' slots and what it has decided so far.
struct Uring {
    ring: IoUring,
    slots: Vec<Slots>,
    verifier: Option<Verifier>,
    deadline: Option<Instant>,
    /// Every socket is shut down: the queued operations complete with an error and release their
    /// buffers.
    aborting: bool,
    qd: usize,
}

impl Uring {
    /// On abort or halt, makes every queued operation complete (with an error) so the buffers can be
    /// released; an abort marks the unfinished streams.
    fn check_abort(&mut self, states: &mut [State], flags: &Flags) {
        let halting = flags.halt.load(Relaxed);
        if (flags.abort.load(Relaxed) || halting) && !self.aborting {
            self.aborting = true;
            for st in states.iter_mut() {
                let _ = st.ds.socket.shutdown(Shutdown::Both);
                if !st.done && !halting {
                    st.out.error.get_or_insert_with(|| "test aborted".into());
                }
            }
        }
    }

    /// Queues a new chain for every stream whose previous one has completed (or finishes the stream):
    /// how many streams are still live.
    fn queue(&mut self, states: &mut [State], p: &EngineParams, stop_send: bool) -> usize {
        let now = Instant::now();
        let mut live = 0;
        for (i, st) in states.iter_mut().enumerate() {
            if st.done {
                continue;
            }
            if self.slots[i].in_flight > 0 {
                live += 1;
                if now.duration_since(st.last_progress) > p.idle_timeout && !self.aborting {
                    // Stuck: unblock the queued operations; their completions finish the stream.
                    st.out
                        .error
                        .get_or_insert_with(|| format!("no progress for {:?}; giving up", p.idle_timeout));
                    let _ = st.ds.socket.shutdown(Shutdown::Both);
                }
                continue;
            }
            let sender = st.ds.role == Role::Sender;
            if st.out.error.is_some()
                || self.aborting
                || (sender && (stop_send || st.remaining == Some(0)))
                || self.slots[i].eof
            {
                let e = st.out.error.take();
                st.finish(e);
                continue;
            }
            self.chain(i, st, p);
            live += 1;
        }
        live
    }

    /// Stream `i`'s chain of up to `qd` linked sends (its next bytes) or receives.
    fn chain(&mut self, i: usize, st: &mut State, p: &EngineParams) {
        let sl = &mut self.slots[i];
        let sender = st.ds.role == Role::Sender;
        let fd = types::Fd(st.ds.socket.as_raw_fd());
        let mut queued = 0u64;
        let mut sq = self.ring.submission();
        for k in 0..self.qd {
            let entry = if sender {
                let left = st.remaining.map_or(u64::MAX, |r| r - queued);
                let n = left.min(p.send_length() as u64) as usize;
                if n == 0 {
                    break;
                }
                let buf = sl.gens[k].fill(st.ds.id, st.out.bytes + queued, n);
                queued += n as u64;
                opcode::Send::new(fd, buf.as_ptr(), n as u32)
                    .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
                    .build()
            } else {
                let b = &mut sl.bufs[k];
                // With discard, MSG_TRUNC makes TCP drop the bytes without copying them.
                let f = if p.discard { libc::MSG_TRUNC } else { 0 };
                opcode::Recv::new(fd, b.as_mut_ptr(), b.len() as u32)
                    .flags(f)
                    .build()
            };
            let last = k + 1 == self.qd || (sender && st.remaining.is_some_and(|r| r == queued));
            let entry = entry.user_data(user_data(i, k)).flags(if last {
                squeue::Flags::empty()
            } else {
                squeue::Flags::IO_LINK
            });
            // SAFETY: the buffer of slot k stays allocated and untouched until this entry's completion
            // is reaped (in_flight counts it; slots are only rewritten when in_flight is 0).
            if unsafe { sq.push(&entry) }.is_err() {
                break;
            }
            sl.in_flight += 1;
            if last {
                break;
            }
        }
    }

    /// Submits the new chains and waits for at least one completion (at most 100 ms, or until the
    /// send deadline); a failing ring aborts every stream.
    fn enter(&mut self, states: &mut [State], stop_send: bool) {
        let mut wait = Duration::from_millis(100);
        if let (Some(d), false) = (self.deadline, stop_send) {
            wait = wait.min(
                d.saturating_duration_since(Instant::now())
                    .max(Duration::from_micros(100)),
            );
        }
        let ts = types::Timespec::from(wait);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) => {}
            Err(e) => {
                for st in states.iter_mut().filter(|s| !s.done) {
                    st.out.error.get_or_insert_with(|| format!("io_uring_enter: {e}"));
                    let _ = st.ds.socket.shutdown(Shutdown::Both);
                }
                self.aborting = true;
            }
        }
    }

    /// Takes every completion: bytes verified (receivers) and counted, end of stream, errors.
    fn reap(&mut self, states: &mut [State]) {
        for cqe in self.ring.completion() {
            let (i, k) = (
                (cqe.user_data() >> 16) as usize,
                (cqe.user_data() & 0xffff) as usize,
            );
            let (Some(st), Some(sl)) = (states.get_mut(i), self.slots.get_mut(i)) else {
                continue;
            };
            sl.in_flight = sl.in_flight.saturating_sub(1);
            let res = cqe.result();
            let sender = st.ds.role == Role::Sender;
            if res > 0 {
                let n = res as usize;
                if !sender {
                    if let Some(v) = self.verifier.as_mut() {
                        st.verify(v, &sl.bufs[k][..n]);
                    }
                }
                st.account(n, Instant::now());
            } else if res == 0 && !sender {
                sl.eof = true;
            } else if res < 0 && res != -libc::ECANCELED {
                let e = std::io::Error::from_raw_os_error(-res);
                st.out
                    .error
                    .get_or_insert_with(|| format!("{}: {e}", if sender { "send" } else { "receive" }));
            }
        }
    }
}
