//! The forwarding engine: one thread per direction reads IP packets from one TUN device, asks the path
//! model what happens to each, holds the survivors in a delay line ordered by delivery time, and writes
//! them to the other TUN device when they are due. Threads sleep in `ppoll` until a packet arrives or the
//! next one is due (timer slack 1 µs), so an idle path costs nothing and delays are kept to microseconds.

mod frame;

use crate::model::{Fate, Link, ModelCounters};
use crate::timing::{Lateness, LatenessSnapshot};
use crate::train::{Train, VNET_LEN};
use frame::{Frame, Out, Pools};
use landspeed_core::emulator::PathCounts;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

/// Packets read per wake-up before due packets are written again.
const BATCH: usize = 128;
/// A departure nearer than the wake-up latency plus this is slept for without an early alarm.
const SPIN_NS: u64 = 20_000;
/// The longest sleep, so that a stop request is seen.
const MAX_SLEEP_NS: u64 = 50_000_000;
/// The forwarding threads' real-time priority (SCHED_FIFO, 1-99): above every ordinary process, below
/// the kernel's own real-time threads.
const RT_PRIORITY: libc::c_int = 10;
/// Bytes the delay line may hold at most, whatever the settings (a path without a rate limit and with a
/// long delay would otherwise hold whatever the hosts send).
const MAX_IN_FLIGHT: u64 = 1 << 30;
/// The segments of a train leave together when their departures lie within this of the first's: at
/// 10 Gbit/s a train of 20 wire packets of 1500 bytes, at 1 Gbit/s two. Each segment's lateness is
/// entered as it is, so what this costs in punctuality shows in the histogram.
const TRAIN_SPAN_NS: u64 = 25_000;

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
    /// How late each packet left against its intended departure.
    pub lateness: Lateness,
    /// The forwarding thread runs with real-time priority.
    pub realtime: AtomicBool,
    /// GSO trains read (each also counted as its wire packets).
    pub trains_in: AtomicU64,
    /// Frames written carrying more than one wire packet.
    pub trains_out: AtomicU64,
    /// Frames read as trains the emulator cannot cut into wire packets, dropped.
    pub trains_refused: AtomicU64,
}

/// The value behind `m` (a thread that panicked holding it left it usable: counters and settings).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A change waiting for a direction's forwarding thread (`wan change`, a schedule): the settings it
/// takes from now on and the end of an outage that starts now. The thread looks at every pass, so a
/// change takes effect before the next packet (the pass is at most 50 ms long on an idle path).
#[derive(Default)]
pub struct Control {
    waiting: AtomicBool,
    next: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    direction: Option<crate::settings::Direction>,
    down_until_ns: Option<(u64, crate::packet::OutageScope)>,
}

impl Control {
    /// Asks the thread to take `direction` and, with `down_until_ns`, to drop every packet its scope
    /// takes (every packet, by default) until then (on the forwarder's clock).
    pub fn request(
        &self,
        direction: Option<crate::settings::Direction>,
        down_until_ns: Option<(u64, crate::packet::OutageScope)>,
    ) {
        let mut p = lock(&self.next);
        if direction.is_some() {
            p.direction = direction;
        }
        if down_until_ns.is_some() {
            p.down_until_ns = down_until_ns;
        }
        self.waiting.store(true, Relaxed);
    }

    /// Applies a waiting change to `link` at the time `now_ns` reads (read only when one waits: the
    /// forwarder's pass costs one relaxed load otherwise).
    fn apply(&self, link: &mut Link, now_ns: impl Fn() -> u64) {
        if !self.waiting.load(Relaxed) || !self.waiting.swap(false, Relaxed) {
            return;
        }
        let now_ns = now_ns();
        let p = std::mem::take(&mut *lock(&self.next));
        if let Some(d) = p.direction {
            link.set_direction(d, now_ns);
        }
        if let Some((until, scope)) = p.down_until_ns {
            link.set_outage(until, scope);
        }
    }
}

/// What one direction's thread shares with the rest of the forwarder: its counters and its changes.
#[derive(Default)]
pub struct DirShared {
    /// The live counters.
    pub stats: DirStats,
    /// The change waiting for the thread.
    pub control: Control,
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
    /// What the path did to them (the model's counts: drops by cause, duplicates, reordering, marks,
    /// queued packets), as a result carries them.
    #[serde(flatten)]
    pub path: PathCounts,
    /// Dropped because the delay line was full (a safety bound, not part of the model).
    pub dropped_overflow: u64,
    /// Delivered with a corrupted payload byte.
    pub corrupted: u64,
    /// Packets the TUN device refused.
    pub write_errors: u64,
    /// The bottleneck queue's backlog now, bytes.
    pub queue_bytes: u64,
    /// The largest backlog seen, bytes.
    pub queue_max_bytes: u64,
    /// Packets on the delay line now.
    pub in_flight_packets: u64,
    /// How late packets left against their intended departure time.
    #[serde(default)]
    pub departure_lateness: LatenessSnapshot,
    /// The forwarding thread runs with real-time priority (SCHED_FIFO); false when the kernel refused.
    #[serde(default)]
    pub realtime: bool,
    /// The queued packets' queueing delay (arrival to the start of serialization), summed, ns.
    #[serde(default)]
    pub sojourn_sum_ns: u64,
    /// The longest of those, ns.
    #[serde(default)]
    pub sojourn_max_ns: u64,
    /// The echo probes' queueing delay, summed, ns.
    #[serde(default)]
    pub probe_sojourn_sum_ns: u64,
    /// GSO trains read from the sending host (TUN offloads; each also counted as its wire packets).
    #[serde(default)]
    pub trains_in: u64,
    /// Frames written to the receiving host carrying more than one wire packet.
    #[serde(default)]
    pub trains_out: u64,
    /// Trains the emulator could not cut into wire packets, dropped.
    #[serde(default)]
    pub trains_refused: u64,
}

impl DirStats {
    /// The counters now.
    pub fn snapshot(&self) -> DirSnapshot {
        let m = *lock(&self.model);
        DirSnapshot {
            packets_in: m.packets_offered,
            bytes_in: m.bytes_offered,
            packets_forwarded: self.packets_forwarded.load(Relaxed),
            bytes_forwarded: self.bytes_forwarded.load(Relaxed),
            path: m.path,
            dropped_overflow: self.dropped_overflow.load(Relaxed),
            corrupted: self.corrupted.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            queue_bytes: self.queue_bytes.load(Relaxed),
            queue_max_bytes: m.queue_max_bytes,
            in_flight_packets: self.in_flight_packets.load(Relaxed),
            departure_lateness: self.lateness.snapshot(),
            realtime: self.realtime.load(Relaxed),
            sojourn_sum_ns: m.sojourn_sum_ns,
            sojourn_max_ns: m.sojourn_max_ns,
            probe_sojourn_sum_ns: m.probe_sojourn_sum_ns,
            trains_in: self.trains_in.load(Relaxed),
            trains_out: self.trains_out.load(Relaxed),
            trains_refused: self.trains_refused.load(Relaxed),
        }
    }
}

struct Entry {
    /// When its last segment is due.
    at: u64,
    /// When its first segment is due (the same for a single packet).
    first_at: u64,
    seq: u64,
    out: Out,
}

impl Entry {
    /// Enters how late each of its segments left at `now` (the departures of a train's segments lie
    /// evenly between its first's and its last's, exactly so when they are all due at once).
    fn record_lateness(&self, lateness: &Lateness, now: u64) {
        let n = u64::from(self.out.segments);
        if n <= 1 || self.first_at == self.at {
            return lateness.record_many(self.at, now, n.max(1));
        }
        for k in 0..n {
            lateness.record(self.first_at + (self.at - self.first_at) * k / (n - 1), now);
        }
    }
}

/// Packets waiting for their delivery time: in order of arrival (their delivery times never decrease,
/// since jitter is floored by the previous packet's), plus a heap for the few deliberately reordered.
#[derive(Default)]
struct DelayLine {
    fifo: VecDeque<Entry>,
    late: BinaryHeap<Reverse<Entry>>,
    /// Memory its frames hold.
    bytes: u64,
    /// Wire packets on it.
    segments: u64,
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
        self.bytes -= e.out.frame.mem_bytes();
        self.segments -= u64::from(e.out.segments);
        Some(e)
    }

    fn push(&mut self, e: Entry, reordered: bool) {
        self.bytes += e.out.frame.mem_bytes();
        self.segments += u64::from(e.out.segments);
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

/// Waits until `fd` is readable or `timeout_ns` passes; true when the time ran out.
fn wait(fd: &OwnedFd, timeout_ns: u64) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as _,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one pollfd, a valid timespec, no signal mask change.
    unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) == 0 }
}

/// Asks the kernel to wake this thread within 1 µs of the requested time and, with `realtime`, to run
/// it before the hosts' ordinary processes: the emulator stands for the network, which the hosts' load
/// does not slow. Otherwise, or when the kernel refuses (no CAP_SYS_NICE), it runs at the highest
/// ordinary priority, less punctually under load; the lateness histogram shows it. True when the thread
/// is real-time.
fn punctual_thread(realtime: bool) -> bool {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64, 0, 0, 0) };
    // SAFETY: sched_param is plain integers (musl's has more fields than glibc's): zero is valid.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = RT_PRIORITY;
    // SAFETY: sets the calling thread's policy (pid 0) from a valid sched_param.
    if realtime && unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        return true;
    }
    // SAFETY: setpriority on the calling thread (who 0) with an integer priority.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) };
    false
}

/// How late the kernel wakes a sleeping thread after its timeout, learned from the timeouts themselves
/// (it is tens to hundreds of µs in a VM), so that the forwarder sets its alarm that much early.
struct WakeLatency {
    estimate_ns: u64,
}

impl WakeLatency {
    const START_NS: u64 = 100_000;
    const MAX_NS: u64 = 400_000;

    /// Enters one timed-out sleep that should have ended at `asked_ns` and ended at `woke_ns`. The
    /// estimate rises by an eighth of a later wake-up's excess and falls by a 64th of an earlier one's
    /// shortfall, so it settles near the 90th percentile: early enough for most alarms without
    /// spinning for the rare long wake-up.
    fn learn(&mut self, asked_ns: u64, woke_ns: u64) {
        let late = woke_ns.saturating_sub(asked_ns).min(Self::MAX_NS);
        self.estimate_ns = if late > self.estimate_ns {
            self.estimate_ns + (late - self.estimate_ns).div_ceil(8)
        } else {
            self.estimate_ns - (self.estimate_ns - late) / 64
        };
    }
}

impl Default for WakeLatency {
    fn default() -> Self {
        WakeLatency {
            estimate_ns: Self::START_NS,
        }
    }
}

/// Moves packets from `input` to `output` through `link` until `stop` is set, taking the changes
/// `shared.control` hands it.
pub fn run_direction(
    input: &OwnedFd,
    output: &OwnedFd,
    mut link: Link,
    path: &crate::settings::PathSettings,
    shared: &DirShared,
    stop: &AtomicBool,
    epoch: Instant,
) {
    let stats = &shared.stats;
    stats.realtime.store(punctual_thread(path.realtime), Relaxed);
    let now_ns = || epoch.elapsed().as_nanos() as u64;
    let mut f = Forwarder::new(stats);
    while !stop.load(Relaxed) {
        shared.control.apply(&mut link, now_ns);
        if link.schedules() {
            link.release(now_ns());
        }
        f.collect(&mut link);
        f.deliver_due(output, now_ns);
        let (got, now) = f.read_batch(input, &mut link, now_ns);
        if got > 0 {
            *lock(&stats.model) = link.counters;
            stats.queue_bytes.store(link.backlog_bytes(now), Relaxed);
            stats.in_flight_packets.store(f.line.segments, Relaxed);
        }
        if got == BATCH {
            continue;
        }
        f.idle(input, link.next_release_ns(), now_ns);
        if f.line.len() == 0 && f.held.is_empty() {
            stats.queue_bytes.store(link.backlog_bytes(now_ns()), Relaxed);
            stats.in_flight_packets.store(0, Relaxed);
        }
    }
}

/// One direction's packets in flight, the buffers it reuses and its counters.
struct Forwarder<'a> {
    line: DelayLine,
    pools: Pools,
    seq: u64,
    stats: &'a DirStats,
    wake: WakeLatency,
    /// Spin (poll without sleeping) until this time: an early alarm went off before a departure.
    spin_until: u64,
    /// Packets the link's scheduler holds, by its handle.
    held: HashMap<u64, Out>,
    /// The fates of a train's segments, and how they leave (reused).
    fates: Vec<Fate>,
    groups: Vec<Group>,
}

/// How a delivered packet is impaired (`Fate::Deliver` less the CE mark, which is carried out first).
#[derive(Clone, Copy, Default)]
struct Impair {
    duplicate: bool,
    corrupt: Option<u64>,
    reordered: bool,
}

impl<'a> Forwarder<'a> {
    fn new(stats: &'a DirStats) -> Forwarder<'a> {
        Forwarder {
            line: DelayLine::default(),
            pools: Pools::default(),
            seq: 0,
            stats,
            wake: WakeLatency::default(),
            spin_until: 0,
            held: HashMap::new(),
            fates: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Writes every frame due by now to `output`, entering how late each segment left.
    fn deliver_due(&mut self, output: &OwnedFd, now_ns: impl Fn() -> u64) {
        let mut now = now_ns();
        while let Some(e) = self.line.pop_due(now) {
            e.record_lateness(&self.stats.lateness, now);
            let sent = e.out.frame.write(output);
            now = now_ns();
            let segments = u64::from(e.out.segments);
            match sent {
                Ok(_) => {
                    self.stats.packets_forwarded.fetch_add(segments, Relaxed);
                    self.stats.bytes_forwarded.fetch_add(e.out.wire_bytes, Relaxed);
                    if segments > 1 {
                        self.stats.trains_out.fetch_add(1, Relaxed);
                    }
                }
                Err(_) => {
                    self.stats.write_errors.fetch_add(segments, Relaxed);
                }
            }
            self.pools.recycle(e.out.frame);
        }
    }

    /// Reads up to `BATCH` frames and gives each packet to the link, stopping early when one on the
    /// delay line falls due: how many were read, and the time of the last.
    fn read_batch(&mut self, input: &OwnedFd, link: &mut Link, now_ns: impl Fn() -> u64) -> (usize, u64) {
        let mut now = now_ns();
        let mut got = 0;
        for _ in 0..BATCH {
            let mut buf = self.pools.large();
            let n = match read(input, &mut buf) {
                Ok(n) => n,
                Err(_) => {
                    self.pools.keep(buf);
                    break;
                }
            };
            got += 1;
            now = now_ns();
            self.offer(buf, n, link, now);
            self.collect(link);
            if self.line.next_due().is_some_and(|d| d <= now) {
                break; // a packet is due: write it before reading on
            }
        }
        (got, now)
    }

    /// Gives the frame read into `buf` (`n` bytes) to the link: a single packet, or a train's segments
    /// one by one.
    fn offer(&mut self, buf: Vec<u8>, n: usize, link: &mut Link, now: u64) {
        match Train::of(&buf[..n]) {
            Ok(Some(t)) => {
                let buf = self.pools.fit(buf, n);
                self.offer_train(buf, n, t, link, now)
            }
            Ok(None) if n > VNET_LEN => {
                let fate = link.offer_packet(now, &buf[VNET_LEN..n]);
                let out = self.pools.single(buf, n);
                self.carry_out(out, fate);
            }
            Ok(None) => self.pools.keep(buf),
            Err(_) => {
                self.stats.trains_refused.fetch_add(1, Relaxed);
                self.pools.keep(buf);
            }
        }
    }

    /// Gives each segment of train `t` (read into `buf`, `n` bytes) to the link, then sends on the
    /// runs of segments that leave together as trains and the rest one by one.
    fn offer_train(&mut self, buf: Vec<u8>, n: usize, t: Train, link: &mut Link, now: u64) {
        self.stats.trains_in.fetch_add(1, Relaxed);
        self.fates.clear();
        for i in 0..t.segments {
            let fate = link.offer_segment(now, &buf[VNET_LEN..n], t.wire_len(i));
            self.fates.push(fate);
        }
        group(&self.fates, &mut self.groups);
        if let [Group::Run {
            from: 0,
            to,
            first_at,
            at,
        }] = self.groups[..]
        {
            if to == t.segments {
                let out = Out {
                    frame: Frame::Whole { buf, len: n },
                    segments: t.segments as u32,
                    wire_bytes: t.wire_bytes(0, t.segments),
                };
                return self.delay(out, (first_at, at), Impair::default());
            }
        }
        let train = Rc::new(buf);
        let leaving = self
            .fates
            .iter()
            .filter(|f| !matches!(f, Fate::Dropped(_)))
            .count();
        for k in 0..self.groups.len() {
            match self.groups[k] {
                Group::Run {
                    from,
                    to,
                    first_at,
                    at,
                } => {
                    let out = self.pools.part(&t, &train, (from, to), leaving);
                    self.delay(out, (first_at, at), Impair::default());
                }
                Group::Alone(i) if matches!(self.fates[i], Fate::Dropped(_)) => {}
                Group::Alone(i) => {
                    let out = self.pools.part(&t, &train, (i, i + 1), leaving);
                    self.carry_out(out, self.fates[i]);
                }
            }
        }
        self.pools.release(train);
    }

    /// Does what the link decided for a packet: drops it, holds it for the scheduler, or puts it on
    /// the delay line (marked CE if the discipline said so).
    fn carry_out(&mut self, mut out: Out, fate: Fate) {
        match fate {
            Fate::Dropped(_) => self.pools.recycle(out.frame),
            Fate::Held(id) => {
                self.held.insert(id, out);
            }
            Fate::Deliver {
                at_ns,
                duplicate,
                corrupt,
                reordered,
                ce,
            } => {
                if ce {
                    out.frame.mark_ce();
                }
                let impair = Impair {
                    duplicate,
                    corrupt,
                    reordered,
                };
                self.delay(out, (at_ns, at_ns), impair)
            }
        }
    }

    /// Carries out the fates the link's scheduler decided for packets it held.
    fn collect(&mut self, link: &mut Link) {
        for (id, fate) in link.take_released() {
            if let Some(out) = self.held.remove(&id) {
                self.carry_out(out, fate);
            }
        }
    }

    /// Puts a frame the link delivers between `(first_at, at)` on the delay line (corrupted, duplicated
    /// or reordered as the link decided), unless the line is full.
    fn delay(&mut self, mut out: Out, (first_at, at): (u64, u64), impair: Impair) {
        if self.line.bytes + out.frame.mem_bytes() > MAX_IN_FLIGHT {
            self.stats
                .dropped_overflow
                .fetch_add(u64::from(out.segments), Relaxed);
            return self.pools.recycle(out.frame);
        }
        if let Some(r) = impair.corrupt {
            if out.frame.corrupt(r, &mut self.pools) {
                self.stats.corrupted.fetch_add(1, Relaxed);
            }
        }
        if impair.duplicate {
            let copy = Out {
                frame: out.frame.copy(&mut self.pools),
                ..out
            };
            self.push(copy, (first_at, at), impair.reordered);
        }
        self.push(out, (first_at, at), impair.reordered);
    }

    fn push(&mut self, out: Out, (first_at, at): (u64, u64), reordered: bool) {
        self.seq += 1;
        let seq = self.seq;
        self.line.push(
            Entry {
                at,
                first_at,
                seq,
                out,
            },
            reordered,
        );
    }

    /// Waits for the next packet to arrive or fall due. Far from its departure the thread sleeps with its
    /// alarm set early by the learned wake-up latency, then spins the rest of the way (reading what
    /// arrives meanwhile); nearer than that it sleeps until the departure itself, accepting the latency
    /// rather than spinning a core away from the hosts under load.
    fn idle(&mut self, input: &OwnedFd, link_due: Option<u64>, now_ns: impl Fn() -> u64) {
        let now = now_ns();
        if now < self.spin_until {
            std::hint::spin_loop();
            return;
        }
        let due = match (self.line.next_due(), link_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(due) = due else {
            wait(input, MAX_SLEEP_NS);
            return;
        };
        if due <= now {
            return;
        }
        let early = self.wake.estimate_ns;
        let alarm = if due - now > early + SPIN_NS {
            due - early
        } else {
            due
        };
        let asked = alarm.min(now + MAX_SLEEP_NS);
        if wait(input, asked - now) {
            self.wake.learn(asked, now_ns());
            if alarm < due {
                self.spin_until = due;
            }
        }
    }
}

/// How the segments of a train leave: a run of segments delivered unimpaired, whose departures lie
/// within `TRAIN_SPAN_NS` of the run's first, as one frame; every other segment alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Run {
        from: usize,
        to: usize,
        first_at: u64,
        at: u64,
    },
    Alone(usize),
}

/// When a segment is due, if it is delivered unimpaired.
fn unimpaired(f: &Fate) -> Option<u64> {
    match *f {
        Fate::Deliver {
            at_ns,
            duplicate: false,
            corrupt: None,
            reordered: false,
            ce: false,
        } => Some(at_ns),
        _ => None,
    }
}

/// Divides a train whose segments' fates are `fates` into the frames it leaves as (into `out`).
fn group(fates: &[Fate], out: &mut Vec<Group>) {
    out.clear();
    let mut run: Option<(usize, u64, u64)> = None;
    for (i, f) in fates.iter().enumerate() {
        let due = unimpaired(f);
        if let (Some(at), Some((from, first, _))) = (due, run) {
            if at.saturating_sub(first) <= TRAIN_SPAN_NS {
                run = Some((from, first, at));
                continue;
            }
        }
        if let Some((from, first_at, at)) = run.take() {
            out.push(Group::Run {
                from,
                to: i,
                first_at,
                at,
            });
        }
        match due {
            Some(at) => run = Some((i, at, at)),
            None => out.push(Group::Alone(i)),
        }
    }
    if let Some((from, first_at, at)) = run {
        out.push(Group::Run {
            from,
            to: fates.len(),
            first_at,
            at,
        });
    }
}

#[cfg(test)]
mod train_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn e(at: u64, seq: u64) -> Entry {
        Entry {
            at,
            seq,
            first_at: at,
            out: Out {
                frame: Frame::Whole {
                    buf: vec![0; 10],
                    len: 10,
                },
                segments: 1,
                wire_bytes: 0,
            },
        }
    }

    #[test]
    fn wake_latency_settles_near_the_90th_percentile_and_stays_capped() {
        let mut w = WakeLatency::default();
        // 90% of wake-ups 50 µs late, 10% 300 µs late.
        for i in 0..5_000 {
            let late = if i % 10 == 0 { 300_000 } else { 50_000 };
            w.learn(1_000, 1_000 + late);
        }
        assert!((60_000..300_000).contains(&w.estimate_ns), "{}", w.estimate_ns);
        for _ in 0..200 {
            w.learn(0, 10_000_000);
        }
        assert_eq!(w.estimate_ns, WakeLatency::MAX_NS, "capped");
        w.learn(5_000, 0); // woke before the alarm: counts as on time
        assert!(w.estimate_ns < WakeLatency::MAX_NS);
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
        assert_eq!((d.len(), d.bytes, d.segments), (0, 0, 0));
    }
}
