//! The path model of one direction, with no I/O and no clock: time is passed in as nanoseconds. For each
//! packet offered it decides, in this order, random loss (Bernoulli or Gilbert–Elliott), admission to the
//! bottleneck's tail-drop queue, the queue discipline's verdict at its dequeue (CoDel: drop, or mark an
//! ECN-capable packet; `aqm`), when its serialization at the rate ends (a virtual-time token bucket,
//! exact over any interval), and when it is delivered (one-way delay, jitter that never reorders, and
//! deliberate reordering), plus whether it is duplicated or corrupted. The forwarding engine only carries
//! out these decisions, so everything here is tested deterministically.

use crate::settings::{Direction, LossModel};
use landspeed_core::emulator::PathCounts;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Why a packet was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// Random loss (the loss model).
    Loss,
    /// The bottleneck queue was full (tail drop).
    Queue,
    /// The path was down (an outage from `wan change --down` or a schedule).
    Outage,
    /// The queue discipline dropped it (CoDel, a packet that is not ECN-capable).
    Aqm,
}

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Dropped, and why.
    Dropped(Drop),
    /// Delivered at a time, with the impairments decided for it.
    Deliver {
        /// Delivery time, nanoseconds on the caller's clock.
        at_ns: u64,
        /// Deliver a second copy right after it.
        duplicate: bool,
        /// Corrupt one payload byte: `Some(r)` with `r` choosing the byte and the bit.
        corrupt: Option<u64>,
        /// Held back so that later packets overtake it.
        reordered: bool,
        /// Mark it Congestion Experienced (the queue discipline signalled an ECN-capable packet).
        ce: bool,
    },
    /// Held at the bottleneck by a discipline that picks the next packet itself (FQ-CoDel,
    /// DualPI2): its fate comes later from `Link::release`, under this handle.
    Held(u64),
}

/// Counters of one direction's model (the engine adds what only it can know): what the path did to
/// the packets (`landspeed_core::emulator::PathCounts`, the one definition a result carries too) and
/// the model's own sums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ModelCounters {
    /// Packets offered to the link.
    pub packets_offered: u64,
    /// Bytes offered to the link.
    pub bytes_offered: u64,
    /// What the path did to them: drops by cause, duplicates, reordering, marks, queued packets.
    #[serde(flatten)]
    pub path: PathCounts,
    /// Chosen for payload corruption (the forwarder counts those it could corrupt).
    pub corrupt_requested: u64,
    /// Largest backlog seen at the bottleneck, bytes.
    pub queue_max_bytes: u64,
    /// The queued packets' time in the bottleneck queue from arrival to the start of their
    /// serialization, summed, ns.
    pub sojourn_sum_ns: u64,
    /// The longest of those times, ns.
    pub sojourn_max_ns: u64,
    /// The echo probes' queueing delay, summed, ns.
    pub probe_sojourn_sum_ns: u64,
}

impl ModelCounters {
    /// Counts a packet's time in the bottleneck queue, from its arrival to the start of its
    /// serialization (a landspeed echo probe's apart as well).
    fn queued(&mut self, sojourn_ns: u64, probe: bool) {
        self.path.sojourn_packets += 1;
        self.sojourn_sum_ns += sojourn_ns;
        self.sojourn_max_ns = self.sojourn_max_ns.max(sojourn_ns);
        if probe {
            self.path.probe_packets += 1;
            self.probe_sojourn_sum_ns += sojourn_ns;
        }
    }
}

/// What the model needs to know of a packet besides its length.
#[derive(Debug, Clone, Copy, Default)]
struct Kind {
    /// The ECN field (0 not ECN-capable, 1 ECT(1), 2 ECT(0), 3 CE).
    ecn: u8,
    /// A landspeed echo probe toward a server.
    probe: bool,
    /// Its flow, a hash of the 5-tuple (FQ-CoDel's queues).
    flow: u64,
    /// Its DSCP (`prio`'s classes).
    dscp: u8,
}

/// One direction of the emulated path.
pub struct Link {
    dir: Direction,
    rng: SmallRng,
    /// Virtual time at which the serializer finishes everything admitted so far, ns (fractional).
    free_at: f64,
    /// Delivery time of the last packet that was not deliberately reordered: jitter never goes below it.
    floor_ns: u64,
    bad_state: bool,
    ns_per_byte: Option<f64>,
    /// The path drops every packet offered before this time (an outage), ns.
    down_until_ns: u64,
    /// Which packets the outage takes down (`proto=`, `ports=`, `except-ports=`).
    down_scope: crate::packet::OutageScope,
    /// The queue discipline's state (CoDel), if it runs one.
    aqm: Option<crate::aqm::Controller>,
    /// The per-packet scheduler holding the queue (FQ-CoDel, DualPI2), if the discipline is one.
    sched: Option<crate::sched::Scheduler>,
    /// The last handle given to a held packet.
    next_id: u64,
    /// Fates of held packets decided and not yet taken.
    released: Vec<(u64, Fate)>,
    /// What the link decided so far.
    pub counters: ModelCounters,
}

impl Link {
    /// A link with `dir`'s settings, its impairments drawn from `seed`.
    pub fn new(dir: Direction, seed: u64) -> Link {
        let ns_per_byte = dir.rate_bps.map(|r| 8e9 / r);
        Link {
            aqm: dir.aqm.controller(),
            sched: dir.rate_bps.and(dir.aqm.scheduler()),
            next_id: 0,
            released: Vec::new(),
            dir,
            rng: SmallRng::seed_from_u64(seed),
            free_at: 0.0,
            floor_ns: 0,
            bad_state: false,
            ns_per_byte,
            down_until_ns: 0,
            down_scope: crate::packet::OutageScope::default(),
            counters: ModelCounters::default(),
        }
    }

    /// Replaces the link's settings at `now_ns`, as a route or rate change would: the backlog
    /// already at the bottleneck drains at the new rate; packets already on their way keep their
    /// delivery times, and later ones are never delivered before them (a shorter delay takes effect
    /// as the longer one's packets leave).
    pub fn set_direction(&mut self, dir: Direction, now_ns: u64) {
        self.release(now_ns);
        let now = now_ns as f64;
        if self.sched.is_none() {
            let backlog = self.backlog_bytes(now_ns) as f64;
            self.free_at = dir.rate_bps.map_or(now, |r| now + backlog * 8e9 / r);
        }
        self.ns_per_byte = dir.rate_bps.map(|r| 8e9 / r);
        let changed = dir.aqm != self.dir.aqm || dir.rate_bps.is_some() != self.dir.rate_bps.is_some();
        self.dir = dir;
        if changed {
            self.aqm = self.dir.aqm.controller();
            let held = self.sched.take().map(|mut s| s.drain_all()).unwrap_or_default();
            self.sched = self.dir.rate_bps.and(self.dir.aqm.scheduler());
            self.rehome(held, now_ns);
        }
    }

    /// Gives the packets an old scheduler held to the new discipline: a new scheduler holds them,
    /// a FIFO sends them in arrival order at its rate from `now_ns`.
    fn rehome(&mut self, held: Vec<crate::sched::Held>, now_ns: u64) {
        let mut out = Vec::new();
        for p in held {
            if let Some(s) = self.sched.as_mut() {
                if s.bytes() == 0 {
                    self.free_at = self.free_at.max(now_ns as f64);
                }
                s.enqueue(now_ns, p, self.dir.queue_bytes, &mut out);
                continue;
            }
            let start = self.free_at.max(now_ns as f64);
            self.free_at = start + self.ns_per_byte.map_or(0.0, |npb| f64::from(p.len) * npb);
            let fate = self.deliver(self.free_at, false);
            self.released.push((p.id, fate));
        }
        self.record_drops(out);
    }

    /// Takes the path down until `until_ns`: every packet offered before then that `scope` takes
    /// is dropped (every packet, with the default scope).
    pub fn set_outage(&mut self, until_ns: u64, scope: crate::packet::OutageScope) {
        self.down_until_ns = until_ns;
        self.down_scope = scope;
    }

    /// Decides the fate of IP packet `pkt` arriving at `now_ns` (an outage with a scope looks at its
    /// headers).
    pub fn offer_packet(&mut self, now_ns: u64, pkt: &[u8]) -> Fate {
        self.offer_segment(now_ns, pkt, pkt.len())
    }

    /// Decides the fate of one wire packet of `wire_len` bytes cut from IP packet `pkt` (a segment of a
    /// GSO train, whose headers it shares) arriving at `now_ns`.
    pub fn offer_segment(&mut self, now_ns: u64, pkt: &[u8], wire_len: usize) -> Fate {
        let spared = now_ns < self.down_until_ns && !self.down_scope.takes(pkt);
        let kind = Kind {
            ecn: crate::packet::ecn(pkt).unwrap_or(0),
            probe: crate::packet::is_echo_request(pkt),
            flow: if self.sched.is_some() {
                crate::packet::flow_hash(pkt)
            } else {
                0
            },
            dscp: crate::packet::dscp(pkt).unwrap_or(0),
        };
        self.offer_in(now_ns, wire_len, !spared, kind)
    }

    /// The link's settings.
    pub fn direction(&self) -> &Direction {
        &self.dir
    }

    /// Bytes waiting at the bottleneck (including the one being serialized, on a FIFO) at `now_ns`.
    pub fn backlog_bytes(&self, now_ns: u64) -> u64 {
        if let Some(s) = &self.sched {
            return s.bytes();
        }
        match self.ns_per_byte {
            Some(npb) => ((self.free_at - now_ns as f64).max(0.0) / npb) as u64,
            None => 0,
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    fn lost(&mut self) -> bool {
        match self.dir.loss {
            LossModel::None => false,
            LossModel::Bernoulli { p } => self.chance(p),
            LossModel::Gilbert {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                // Transition first, then lose with the new state's probability.
                let flip = if self.bad_state { r } else { p };
                if self.chance(flip) {
                    self.bad_state = !self.bad_state;
                }
                self.chance(if self.bad_state { loss_bad } else { loss_good })
            }
        }
    }

    /// Decides the fate of a packet of `len` bytes arriving at `now_ns`.
    pub fn offer(&mut self, now_ns: u64, len: usize) -> Fate {
        self.offer_in(now_ns, len, true, Kind::default())
    }

    fn offer_in(&mut self, now_ns: u64, len: usize, outage_applies: bool, kind: Kind) -> Fate {
        let c = &mut self.counters;
        c.packets_offered += 1;
        c.bytes_offered += len as u64;
        if outage_applies && now_ns < self.down_until_ns {
            c.path.dropped_outage += 1;
            return Fate::Dropped(Drop::Outage);
        }
        if self.lost() {
            self.counters.path.dropped_loss += 1;
            return Fate::Dropped(Drop::Loss);
        }
        match self.ns_per_byte {
            Some(_) if self.sched.is_some() => self.hold(now_ns, len, kind),
            Some(npb) => match self.fifo(now_ns, len, kind, npb) {
                Ok((departure, ce)) => self.deliver(departure, ce),
                Err(d) => Fate::Dropped(d),
            },
            None => self.deliver(now_ns as f64, false),
        }
    }

    /// Admits a packet to the FIFO bottleneck: when its serialization ends, and whether the queue
    /// discipline marks it; or why it is dropped.
    fn fifo(&mut self, now_ns: u64, len: usize, kind: Kind, npb: f64) -> Result<(f64, bool), Drop> {
        let backlog = self.backlog_bytes(now_ns);
        if let Some(limit) = self.dir.queue_bytes {
            if backlog + len as u64 > limit {
                self.counters.path.dropped_queue += 1;
                return Err(Drop::Queue);
            }
        }
        let head = self.free_at.max(now_ns as f64);
        self.counters
            .queued((head as u64).saturating_sub(now_ns), kind.probe);
        let mut ce = false;
        if let Some(mark_ok) = self.signalled(now_ns, head as u64, backlog) {
            if !(kind.ecn != 0 && mark_ok) {
                self.counters.path.dropped_aqm += 1;
                return Err(Drop::Aqm);
            }
            self.counters.path.marked_ce += 1;
            ce = true;
        }
        self.counters.queue_max_bytes = self.counters.queue_max_bytes.max(backlog + len as u64);
        self.free_at = head + len as f64 * npb;
        Ok((self.free_at, ce))
    }

    /// The impairments after the bottleneck for a packet whose serialization ends at `departure`:
    /// delay, jitter (never reordering), deliberate reordering, duplication, corruption.
    fn deliver(&mut self, departure: f64, ce: bool) -> Fate {
        let mut at = departure + self.dir.delay.as_nanos() as f64;
        let j = self.dir.jitter.as_nanos() as f64;
        if j > 0.0 {
            at += self.rng.random_range(-j..=j);
        }
        let at = (at.max(departure) as u64).max(self.floor_ns);
        let reordered = self.chance(self.dir.reorder);
        let at_ns = if reordered {
            self.counters.path.reordered += 1;
            at + self.dir.reorder_gap.as_nanos() as u64
        } else {
            self.floor_ns = at;
            at
        };
        let duplicate = self.chance(self.dir.duplicate);
        self.counters.path.duplicated += u64::from(duplicate);
        let corrupt = self
            .chance(self.dir.corrupt_payload)
            .then(|| self.rng.random::<u64>());
        self.counters.corrupt_requested += u64::from(corrupt.is_some());
        Fate::Deliver {
            at_ns,
            duplicate,
            corrupt,
            reordered,
            ce,
        }
    }

    /// Holds a packet in the scheduler (after sending what was due before it arrived).
    fn hold(&mut self, now_ns: u64, len: usize, kind: Kind) -> Fate {
        self.release(now_ns);
        let Some(s) = self.sched.as_mut() else {
            return Fate::Dropped(Drop::Queue);
        };
        if s.bytes() == 0 {
            self.free_at = self.free_at.max(now_ns as f64);
        }
        self.next_id += 1;
        let pkt = crate::sched::Held {
            id: self.next_id,
            len: len as u32,
            arrival_ns: now_ns,
            flow: kind.flow,
            ecn: kind.ecn,
            probe: kind.probe,
            dscp: kind.dscp,
        };
        let mut out = Vec::new();
        s.enqueue(now_ns, pkt, self.dir.queue_bytes, &mut out);
        let held = s.bytes();
        self.counters.queue_max_bytes = self.counters.queue_max_bytes.max(held);
        self.record_drops(out);
        self.release(now_ns);
        Fate::Held(pkt.id)
    }

    fn record_drops(&mut self, out: Vec<crate::sched::Out>) {
        for o in out {
            let (id, why) = match o {
                crate::sched::Out::DropAqm(p) => (p.id, Drop::Aqm),
                crate::sched::Out::DropLimit(p) => (p.id, Drop::Queue),
            };
            match why {
                Drop::Aqm => self.counters.path.dropped_aqm += 1,
                _ => self.counters.path.dropped_queue += 1,
            }
            self.released.push((id, Fate::Dropped(why)));
        }
    }

    /// Runs the scheduler's serializer up to `now_ns`: each time it falls free, the discipline picks
    /// the next packet (dropping or marking on the way), and that packet's fate is decided.
    pub fn release(&mut self, now_ns: u64) {
        let (Some(npb), Some(mut s)) = (self.ns_per_byte, self.sched.take()) else {
            return;
        };
        let mut out = Vec::new();
        while s.bytes() > 0 && self.free_at <= now_ns as f64 {
            let t = self.free_at as u64;
            let next = s.dequeue(t, &mut self.rng, &mut out);
            self.record_drops(std::mem::take(&mut out));
            let Some((p, ce)) = next else { break };
            self.counters.queued(t.saturating_sub(p.arrival_ns), p.probe);
            self.counters.path.marked_ce += u64::from(ce);
            self.free_at += f64::from(p.len) * npb;
            let fate = self.deliver(self.free_at, ce);
            self.released.push((p.id, fate));
        }
        self.sched = Some(s);
    }

    /// The fates `release` (or a packet's arrival) decided for held packets, in order.
    pub fn take_released(&mut self) -> std::vec::Drain<'_, (u64, Fate)> {
        self.released.drain(..)
    }

    /// Whether a per-packet scheduler holds the queue (its packets' fates come from `release`).
    pub fn schedules(&self) -> bool {
        self.sched.is_some()
    }

    /// When the scheduler's serializer next falls free with a packet waiting, ns.
    pub fn next_release_ns(&self) -> Option<u64> {
        let held = self.sched.as_ref().is_some_and(|s| s.bytes() > 0);
        held.then(|| self.free_at.ceil() as u64)
    }

    /// Asks the queue discipline about a packet arriving at `now_ns` that reaches the head of the
    /// bottleneck at `head_ns` (`bytes_ahead` queued before it): None to send it, Some(mark_ok) to
    /// signal it (marked if ECN-capable and `mark_ok`, else dropped).
    fn signalled(&mut self, now_ns: u64, head_ns: u64, bytes_ahead: u64) -> Option<bool> {
        let draw = match self.aqm {
            Some(crate::aqm::Controller::Pie(_)) => self.rng.random::<f64>(),
            _ => 0.0,
        };
        self.aqm.as_mut()?.signal(now_ns, head_ns, bytes_ahead, draw)
    }
}

#[cfg(test)]
mod tests;
