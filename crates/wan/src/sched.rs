//! Queue disciplines that choose which packet the bottleneck sends next, so that a packet's departure
//! is only known when the link reaches it: FQ-CoDel (RFC 8290: a queue per flow served by deficit
//! round robin, CoDel on each), DualPI2 (RFC 9332: the L4S dual queue, a shallow step-marking queue
//! for L4S packets beside a classic one under a PI controller, the two coupled) and strict priority
//! over three DSCP classes (`prio`). The single-FIFO
//! disciplines (`aqm`) can decide at arrival because a FIFO's order is fixed then; these cannot, so the
//! link holds each packet here and asks for the next one each time its serializer falls free. Pure:
//! time is passed in, randomness comes from the caller's generator, so it is tested in virtual time.

use rand::rngs::SmallRng;

pub mod dualpi2;
pub mod fq_codel;
pub mod prio;

/// A packet held at the bottleneck: what a discipline needs to know of it, and the caller's handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The caller's handle for the packet's bytes.
    pub id: u64,
    /// Length on the wire, bytes.
    pub len: u32,
    /// When it reached the bottleneck, ns.
    pub arrival_ns: u64,
    /// Its flow (a hash of the 5-tuple), for FQ-CoDel's queues.
    pub flow: u64,
    /// Its ECN field (RFC 3168: 0 not ECN-capable, 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: u8,
    /// A landspeed echo probe (the link times these apart).
    pub probe: bool,
    /// Its DSCP (the TOS byte's or traffic class's upper six bits), for `prio`'s classes.
    pub dscp: u8,
}

impl Held {
    /// Whether the packet may be marked instead of dropped.
    pub fn ect(&self) -> bool {
        self.ecn != 0
    }
}

/// A running per-packet scheduler.
#[derive(Debug, Clone)]
pub enum Scheduler {
    /// FQ-CoDel.
    FqCodel(fq_codel::FqCodel),
    /// DualPI2.
    DualPi2(dualpi2::DualPi2),
    /// Strict priority over three DSCP classes.
    Prio(prio::Prio),
}

/// A packet the discipline dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// Dropped by the queue discipline (its AQM) at dequeue.
    DropAqm(Held),
    /// Dropped because the queue was over its byte limit.
    DropLimit(Held),
}

impl Scheduler {
    /// Holds `pkt`, arriving at `now_ns`; packets dropped to keep the queue within `limit_bytes` go
    /// to `out` (from the fattest flow's head for FQ-CoDel, the arriving packet for DualPI2).
    pub fn enqueue(&mut self, now_ns: u64, pkt: Held, limit_bytes: Option<u64>, out: &mut Vec<Out>) {
        match self {
            Scheduler::FqCodel(f) => f.enqueue(pkt, limit_bytes, out),
            Scheduler::DualPi2(d) => d.enqueue(now_ns, pkt, limit_bytes, out),
            Scheduler::Prio(p) => p.enqueue(pkt, limit_bytes, out),
        }
    }

    /// The next packet to serialize at `now_ns` (the serializer fell free then), with what the
    /// discipline dropped on the way pushed to `out`; None when nothing is held.
    pub fn dequeue(&mut self, now_ns: u64, rng: &mut SmallRng, out: &mut Vec<Out>) -> Option<(Held, bool)> {
        match self {
            Scheduler::FqCodel(f) => f.dequeue(now_ns, out),
            Scheduler::DualPi2(d) => d.dequeue(now_ns, rng, out),
            Scheduler::Prio(p) => p.dequeue(),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        match self {
            Scheduler::FqCodel(f) => f.bytes(),
            Scheduler::DualPi2(d) => d.bytes(),
            Scheduler::Prio(p) => p.bytes(),
        }
    }

    /// Gives up every packet held, in arrival order (the discipline is being replaced).
    pub fn drain_all(&mut self) -> Vec<Held> {
        let mut all = match self {
            Scheduler::FqCodel(f) => f.drain_all(),
            Scheduler::DualPi2(d) => d.drain_all(),
            Scheduler::Prio(p) => p.drain_all(),
        };
        all.sort_by_key(|p| (p.arrival_ns, p.id));
        all
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Driving a scheduler in virtual time: a serializer at a fixed rate that asks for the next packet
    //! whenever it falls free, as the link does.
    use super::*;
    use rand::SeedableRng;

    /// What one packet met: sent (with its queueing delay and mark) or dropped.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Met {
        pub(crate) pkt: Held,
        pub(crate) sent_at_ns: Option<u64>,
        pub(crate) ce: bool,
        /// Dropped by the AQM (not the limit).
        pub(crate) aqm_drop: bool,
    }

    /// A serializer of `ns_per_byte` in front of `s`.
    pub(crate) struct Wire {
        pub(crate) s: Scheduler,
        pub(crate) ns_per_byte: f64,
        pub(crate) free_at: f64,
        pub(crate) limit: Option<u64>,
        pub(crate) rng: SmallRng,
        pub(crate) met: Vec<Met>,
        next_id: u64,
    }

    impl Wire {
        pub(crate) fn new(s: Scheduler, ns_per_byte: f64, limit: Option<u64>) -> Wire {
            Wire {
                s,
                ns_per_byte,
                free_at: 0.0,
                limit,
                rng: SmallRng::seed_from_u64(7),
                met: vec![],
                next_id: 0,
            }
        }

        fn record(&mut self, out: Vec<Out>) {
            for o in out {
                let (Out::DropAqm(pkt) | Out::DropLimit(pkt)) = o;
                self.met.push(Met {
                    pkt,
                    sent_at_ns: None,
                    ce: false,
                    aqm_drop: matches!(o, Out::DropAqm(_)),
                });
            }
        }

        /// Serializes until `now_ns`.
        pub(crate) fn run_until(&mut self, now_ns: u64) {
            while self.s.bytes() > 0 && self.free_at <= now_ns as f64 {
                let mut out = vec![];
                let next = self.s.dequeue(self.free_at as u64, &mut self.rng, &mut out);
                self.record(out);
                let Some((pkt, ce)) = next else { break };
                self.met.push(Met {
                    pkt,
                    sent_at_ns: Some(self.free_at as u64),
                    ce,
                    aqm_drop: false,
                });
                self.free_at += f64::from(pkt.len) * self.ns_per_byte;
            }
        }

        /// A packet of `flow` arriving at `now_ns`.
        pub(crate) fn arrive(&mut self, now_ns: u64, flow: u64, len: u32, ecn: u8) {
            self.arrive_dscp(now_ns, flow, len, ecn, 0);
        }

        /// A packet of `flow` in class `dscp` arriving at `now_ns`.
        pub(crate) fn arrive_dscp(&mut self, now_ns: u64, flow: u64, len: u32, ecn: u8, dscp: u8) {
            self.run_until(now_ns);
            if self.s.bytes() == 0 {
                self.free_at = self.free_at.max(now_ns as f64);
            }
            self.next_id += 1;
            let pkt = Held {
                id: self.next_id,
                len,
                arrival_ns: now_ns,
                flow,
                ecn,
                probe: false,
                dscp,
            };
            let mut out = vec![];
            self.s.enqueue(now_ns, pkt, self.limit, &mut out);
            self.record(out);
        }

        /// The queueing delays of `flow`'s packets sent from `from_ns` on, ns.
        pub(crate) fn delays(&self, flow: u64, from_ns: u64) -> Vec<u64> {
            (self.met.iter())
                .filter(|m| m.pkt.flow == flow && m.pkt.arrival_ns >= from_ns)
                .filter_map(|m| m.sent_at_ns.map(|s| s - m.pkt.arrival_ns))
                .collect()
        }
    }

    /// The median of `v`.
    pub(crate) fn median(mut v: Vec<u64>) -> u64 {
        v.sort_unstable();
        v[v.len() / 2]
    }
}
