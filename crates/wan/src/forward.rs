//! The forwarding engine: one thread per direction reads IP packets from one TUN device, asks the path
//! model what happens to each, holds the survivors in a delay line ordered by delivery time, and writes
//! them to the other TUN device when they are due. Threads sleep in `ppoll` until a packet arrives or the
//! next one is due (timer slack 1 µs), so an idle path costs nothing and delays are kept to microseconds.

use crate::model::{Drop, Fate, Link, ModelCounters};
use crate::packet;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

/// Packets read per wake-up before due packets are written again.
const BATCH: usize = 128;
/// How long before a packet is due the engine stops sleeping and polls.
const EARLY_NS: u64 = 100_000;
/// Bytes the delay line may hold at most, whatever the settings (a path without a rate limit and with a
/// long delay would otherwise hold whatever the hosts send).
const MAX_IN_FLIGHT: u64 = 1 << 30;

/// Live counters of one direction, readable while the engine runs.
#[derive(Default)]
pub struct DirStats {
    /// What the path model decided (offered, lost, queued, duplicated, reordered).
    pub model: Mutex<ModelCounters>,
    /// Packets written out.
    pub packets_forwarded: AtomicU64,
    /// Bytes written out.
    pub bytes_forwarded: AtomicU64,
    /// Packets whose payload was corrupted.
    pub corrupted: AtomicU64,
    /// Packets dropped because the delay line was full.
    pub dropped_overflow: AtomicU64,
    /// Packets the TUN device refused.
    pub write_errors: AtomicU64,
    /// The bottleneck queue's backlog now, bytes.
    pub queue_bytes: AtomicU64,
    /// Packets on the delay line now.
    pub in_flight_packets: AtomicU64,
}

/// A snapshot of one direction's counters, as `wan status` shows them.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct DirSnapshot {
    /// Packets that arrived.
    pub packets_in: u64,
    /// Bytes that arrived.
    pub bytes_in: u64,
    /// Packets delivered.
    pub packets_forwarded: u64,
    /// Bytes delivered.
    pub bytes_forwarded: u64,
    /// Dropped by the full bottleneck queue.
    pub dropped_queue: u64,
    /// Dropped by the loss model.
    pub dropped_loss: u64,
    /// Dropped because the delay line was full (a safety bound, not part of the model).
    pub dropped_overflow: u64,
    /// Delivered with a corrupted payload byte.
    pub corrupted: u64,
    /// Delivered twice.
    pub duplicated: u64,
    /// Held back so that later packets overtook them.
    pub reordered: u64,
    /// Packets the TUN device refused.
    pub write_errors: u64,
    /// The bottleneck queue's backlog now, bytes.
    pub queue_bytes: u64,
    /// The largest backlog seen, bytes.
    pub queue_max_bytes: u64,
    /// Packets on the delay line now.
    pub in_flight_packets: u64,
}

impl DirStats {
    /// The counters now.
    pub fn snapshot(&self) -> DirSnapshot {
        let m = *self.model.lock().unwrap_or_else(|e| e.into_inner());
        DirSnapshot {
            packets_in: m.packets_offered,
            bytes_in: m.bytes_offered,
            packets_forwarded: self.packets_forwarded.load(Relaxed),
            bytes_forwarded: self.bytes_forwarded.load(Relaxed),
            dropped_queue: m.dropped_queue,
            dropped_loss: m.dropped_loss,
            dropped_overflow: self.dropped_overflow.load(Relaxed),
            corrupted: self.corrupted.load(Relaxed),
            duplicated: m.duplicated,
            reordered: m.reordered,
            write_errors: self.write_errors.load(Relaxed),
            queue_bytes: self.queue_bytes.load(Relaxed),
            queue_max_bytes: m.queue_max_bytes,
            in_flight_packets: self.in_flight_packets.load(Relaxed),
        }
    }
}

struct Entry {
    at: u64,
    seq: u64,
    /// A buffer of the full packet capacity; the packet is `buf[..len]`.
    buf: Vec<u8>,
    len: usize,
}

/// Packets waiting for their delivery time: in order of arrival (their delivery times never decrease,
/// since jitter is floored by the previous packet's), plus a heap for the few deliberately reordered.
#[derive(Default)]
struct DelayLine {
    fifo: VecDeque<Entry>,
    late: BinaryHeap<Reverse<Entry>>,
    bytes: u64,
}

impl DelayLine {
    fn next_due(&self) -> Option<u64> {
        let a = self.fifo.front().map(|e| e.at);
        let b = self.late.peek().map(|e| e.0.at);
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Removes the next packet due by `now`, in delivery order.
    fn pop_due(&mut self, now: u64) -> Option<Entry> {
        let f = self.fifo.front().map(|e| (e.at, e.seq));
        let l = self.late.peek().map(|e| (e.0.at, e.0.seq));
        let e = match (f, l) {
            (Some(x), Some(y)) if y < x && y.0 <= now => self.late.pop().map(|r| r.0),
            (Some(x), _) if x.0 <= now => self.fifo.pop_front(),
            (None, Some(y)) if y.0 <= now => self.late.pop().map(|r| r.0),
            _ => None,
        }?;
        self.bytes -= e.len as u64;
        Some(e)
    }

    fn push(&mut self, e: Entry, reordered: bool) {
        self.bytes += e.len as u64;
        if reordered {
            self.late.push(Reverse(e));
        } else {
            self.fifo.push_back(e);
        }
    }

    fn len(&self) -> usize {
        self.fifo.len() + self.late.len()
    }
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

fn read(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reading into a buffer we own, of the length we pass.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn write(fd: &OwnedFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: writing from a buffer we own.
    let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Waits until `fd` is readable or `timeout_ns` passes.
fn wait(fd: &OwnedFd, timeout_ns: u64) {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one pollfd, a valid timespec, no signal mask change.
    unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
}

/// Asks the kernel to wake this thread within 1 µs of the requested time.
fn tight_timers() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64, 0, 0, 0) };
}

/// Moves packets from `input` to `output` through `link` until `stop` is set.
pub fn run_direction(
    input: &OwnedFd,
    output: &OwnedFd,
    mut link: Link,
    mtu: usize,
    stats: &DirStats,
    stop: &AtomicBool,
    epoch: Instant,
) {
    tight_timers();
    let now_ns = || epoch.elapsed().as_nanos() as u64;
    let mut f = Forwarder {
        line: DelayLine::default(),
        free: Vec::new(),
        seq: 0,
        cap: mtu + 64,
        stats,
    };
    while !stop.load(Relaxed) {
        f.deliver_due(output, now_ns());
        let (got, now) = f.read_batch(input, &mut link, now_ns);
        if got > 0 {
            *stats.model.lock().unwrap_or_else(|e| e.into_inner()) = link.counters;
            stats.queue_bytes.store(link.backlog_bytes(now), Relaxed);
            stats.in_flight_packets.store(f.line.len() as u64, Relaxed);
        }
        if got == BATCH {
            continue;
        }
        f.idle(input, now_ns());
        if f.line.len() == 0 {
            stats.queue_bytes.store(link.backlog_bytes(now_ns()), Relaxed);
            stats.in_flight_packets.store(0, Relaxed);
        }
    }
}

/// One direction's packets in flight, the buffers it reuses and its counters.
struct Forwarder<'a> {
    line: DelayLine,
    free: Vec<Vec<u8>>,
    seq: u64,
    /// Each buffer's size: the MTU and room for the link's headers.
    cap: usize,
    stats: &'a DirStats,
}

impl Forwarder<'_> {
    fn take(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_else(|| vec![0u8; self.cap])
    }

    /// Writes every packet due by `now` to `output`.
    fn deliver_due(&mut self, output: &OwnedFd, now: u64) {
        while let Some(e) = self.line.pop_due(now) {
            match write(output, &e.buf[..e.len]) {
                Ok(_) => {
                    self.stats.packets_forwarded.fetch_add(1, Relaxed);
                    self.stats.bytes_forwarded.fetch_add(e.len as u64, Relaxed);
                }
                Err(_) => {
                    self.stats.write_errors.fetch_add(1, Relaxed);
                }
            }
            self.free.push(e.buf);
        }
    }

    /// Reads up to `BATCH` packets and gives each to the link: how many were read, and the time of
    /// the last.
    fn read_batch(&mut self, input: &OwnedFd, link: &mut Link, now_ns: impl Fn() -> u64) -> (usize, u64) {
        let mut now = now_ns();
        let mut got = 0;
        for _ in 0..BATCH {
            let mut buf = self.take();
            let n = match read(input, &mut buf) {
                Ok(n) => n,
                Err(_) => {
                    self.free.push(buf);
                    break;
                }
            };
            got += 1;
            now = now_ns();
            match link.offer(now, n) {
                Fate::Dropped(Drop::Loss | Drop::Queue) => self.free.push(buf),
                Fate::Deliver {
                    at_ns,
                    duplicate,
                    corrupt,
                    reordered,
                } => self.delay(buf, n, (at_ns, duplicate, corrupt, reordered)),
            }
        }
        (got, now)
    }

    /// Puts a packet the link delivers on the delay line (corrupted, duplicated or reordered as the
    /// link decided), unless the line is full.
    fn delay(&mut self, mut buf: Vec<u8>, n: usize, fate: (u64, bool, Option<u64>, bool)) {
        let (at, duplicate, corrupt, reordered) = fate;
        if self.line.bytes + n as u64 > MAX_IN_FLIGHT {
            self.stats.dropped_overflow.fetch_add(1, Relaxed);
            self.free.push(buf);
            return;
        }
        if let Some(r) = corrupt {
            if packet::corrupt_payload(&mut buf[..n], r).is_some() {
                self.stats.corrupted.fetch_add(1, Relaxed);
            }
        }
        if duplicate {
            let mut copy = self.take();
            copy[..n].copy_from_slice(&buf[..n]);
            self.seq += 1;
            let seq = self.seq;
            self.line.push(
                Entry {
                    at,
                    seq,
                    buf: copy,
                    len: n,
                },
                reordered,
            );
        }
        self.seq += 1;
        let seq = self.seq;
        self.line.push(Entry { at, seq, buf, len: n }, reordered);
    }

    /// Sleeps until shortly before the next packet is due, then polls: a timer wake-up in a VM can be
    /// late by tens of microseconds, and four of them make one round trip.
    fn idle(&self, input: &OwnedFd, now: u64) {
        let due = self.line.next_due().unwrap_or(u64::MAX);
        if due > now + EARLY_NS {
            wait(input, (due - now - EARLY_NS).min(50_000_000));
        } else if due > now {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(at: u64, seq: u64) -> Entry {
        Entry {
            at,
            seq,
            buf: vec![0; 10],
            len: 10,
        }
    }

    #[test]
    fn delay_line_releases_in_delivery_order_mixing_fifo_and_late() {
        let mut d = DelayLine::default();
        d.push(e(10, 1), false);
        d.push(e(30, 2), true); // held back
        d.push(e(20, 3), false);
        d.push(e(40, 4), false);
        assert_eq!(d.next_due(), Some(10));
        assert!(d.pop_due(5).is_none());
        let order: Vec<u64> = std::iter::from_fn(|| d.pop_due(100).map(|x| x.seq)).collect();
        assert_eq!(order, vec![1, 3, 2, 4]);
        assert_eq!((d.len(), d.bytes), (0, 0));
    }
}
