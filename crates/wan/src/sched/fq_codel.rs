//! FQ-CoDel (RFC 8290): packets hashed by their 5-tuple into 1024 queues, served by deficit round
//! robin with a 1514-byte quantum, flows that have just become active (the new list) ahead of the
//! rest (the old list), and CoDel run on each queue at its dequeue. A flow that sends little keeps
//! finding its queue new and empty, so its packets pass a bulk flow's standing queue: that is what
//! the discipline exists to do, and what the tests check. Over the byte limit, packets are dropped
//! from the head of the fattest queue, as RFC 8290 says.

use super::{Held, Out};
use crate::aqm::{Codel, Verdict};
use std::collections::VecDeque;
use std::time::Duration;

/// The number of flow queues (RFC 8290's default).
pub const FLOWS: usize = 1024;
/// Bytes a queue may send per round (RFC 8290: one MTU and an Ethernet header).
pub const QUANTUM: i64 = 1514;

#[derive(Debug, Clone)]
struct FlowQueue {
    pkts: VecDeque<Held>,
    bytes: u64,
    deficit: i64,
    codel: Codel,
    /// On the new or the old list.
    listed: bool,
}

/// FQ-CoDel's state.
#[derive(Debug, Clone)]
pub struct FqCodel {
    queues: Vec<FlowQueue>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    bytes: u64,
}

impl FqCodel {
    /// FQ-CoDel with CoDel's `target` and `interval` on each queue.
    pub fn new(target: Duration, interval: Duration) -> FqCodel {
        let q = FlowQueue {
            pkts: VecDeque::new(),
            bytes: 0,
            deficit: 0,
            codel: Codel::new(target, interval),
            listed: false,
        };
        FqCodel {
            queues: vec![q; FLOWS],
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            bytes: 0,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `pkt` in its flow's queue (a flow new to the lists goes on the new list with a fresh
    /// quantum), then drops from the fattest queue's head until the total is within `limit_bytes`.
    pub fn enqueue(&mut self, pkt: Held, limit_bytes: Option<u64>, out: &mut Vec<Out>) {
        let i = (pkt.flow % FLOWS as u64) as usize;
        let q = &mut self.queues[i];
        q.pkts.push_back(pkt);
        q.bytes += u64::from(pkt.len);
        self.bytes += u64::from(pkt.len);
        if !q.listed {
            q.listed = true;
            q.deficit = QUANTUM;
            self.new_flows.push_back(i);
        }
        while limit_bytes.is_some_and(|l| self.bytes > l) {
            let fattest = (0..FLOWS).max_by_key(|&j| self.queues[j].bytes).unwrap_or(i);
            let Some(p) = self.pop(fattest) else { break };
            out.push(Out::DropLimit(p));
        }
    }

    fn pop(&mut self, i: usize) -> Option<Held> {
        let q = &mut self.queues[i];
        let p = q.pkts.pop_front()?;
        q.bytes -= u64::from(p.len);
        self.bytes -= u64::from(p.len);
        Some(p)
    }

    /// The next packet at `now_ns`: the first queue on the new list, else the old list, that still
    /// has deficit and a packet CoDel lets through (or marks); its drops go to `out`.
    pub fn dequeue(&mut self, now_ns: u64, out: &mut Vec<Out>) -> Option<(Held, bool)> {
        loop {
            let (i, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (i, true),
                (None, Some(&i)) => (i, false),
                (None, None) => return None,
            };
            let list = if from_new {
                &mut self.new_flows
            } else {
                &mut self.old_flows
            };
            if self.queues[i].deficit <= 0 {
                list.pop_front();
                self.queues[i].deficit += QUANTUM;
                self.old_flows.push_back(i);
                continue;
            }
            if let Some((p, ce)) = self.codel_dequeue(i, now_ns, out) {
                self.queues[i].deficit -= i64::from(p.len);
                return Some((p, ce));
            }
            // Empty: a new flow moves to the old list (so it cannot stay ahead by emptying), an old
            // one leaves the lists.
            let list = if from_new {
                &mut self.new_flows
            } else {
                &mut self.old_flows
            };
            list.pop_front();
            if from_new && !self.old_flows.is_empty() {
                self.old_flows.push_back(i);
            } else {
                self.queues[i].listed = false;
            }
        }
    }

    /// CoDel on queue `i` at `now_ns`: its head packet, or the first one after those it drops.
    fn codel_dequeue(&mut self, i: usize, now_ns: u64, out: &mut Vec<Out>) -> Option<(Held, bool)> {
        loop {
            let Some(p) = self.pop(i) else {
                self.queues[i].codel.idle();
                return None;
            };
            let sojourn = now_ns.saturating_sub(p.arrival_ns);
            let backlog = self.bytes;
            match self.queues[i].codel.dequeue(now_ns, sojourn, backlog) {
                Verdict::Pass => return Some((p, false)),
                Verdict::Signal if p.ect() => return Some((p, true)),
                Verdict::Signal => out.push(Out::DropAqm(p)),
            }
        }
    }

    /// Gives up every packet held.
    pub fn drain_all(&mut self) -> Vec<Held> {
        let all = self.queues.iter_mut().flat_map(|q| q.pkts.drain(..)).collect();
        for q in &mut self.queues {
            q.bytes = 0;
            q.listed = false;
        }
        self.new_flows.clear();
        self.old_flows.clear();
        self.bytes = 0;
        all
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{median, Wire};
    use super::super::Scheduler;
    use super::*;

    const MS: u64 = 1_000_000;

    fn fq(limit: u64) -> Wire {
        let s = FqCodel::new(Duration::from_millis(5), Duration::from_millis(100));
        // 1500 bytes take 1 ms: 12 Mbit/s.
        Wire::new(Scheduler::FqCodel(s), 8e3 / 12.0, Some(limit))
    }

    /// A bulk flow offering 5% more than the link's rate (a sender that does not slow down), beside
    /// a sparse flow of one packet about every 10 ms.
    fn bulk_and_sparse(w: &mut Wire, secs: u64, ecn: u8) {
        let mut i = 0;
        while i * 952_381 < secs * 1000 * MS {
            let t = i * 952_381; // 1500 B every 0.95 ms: 12.6 Mbit/s
            w.arrive(t, 1, 1500, ecn);
            if i % 10 == 0 {
                w.arrive(t, 2, 200, 0);
            }
            i += 1;
        }
        w.run_until(u64::MAX / 2);
    }

    #[test]
    fn a_sparse_flow_passes_a_bulk_flows_standing_queue() {
        let mut w = fq(4_000_000);
        bulk_and_sparse(&mut w, 5, 0);
        // At most two bulk packets ahead of a sparse one (the one on the wire, and one the bulk flow
        // still has quantum for when the sparse flow's queue is new).
        let worst = w.delays(2, 0).into_iter().max().unwrap_or(0);
        assert!(worst < 2_100_000, "sparse flow queued {worst} ns");
        let bulk = median(w.delays(1, 2000 * MS));
        // The bulk flow's own queue is held near CoDel's 5 ms target by drops, not the 320 ms a
        // 4 MB FIFO would reach.
        assert!(bulk < 20 * MS, "bulk flow queued {bulk} ns");
        assert!(w.met.iter().any(|m| m.aqm_drop && m.pkt.flow == 1));
        assert!(w.met.iter().all(|m| m.sent_at_ns.is_some() || m.pkt.flow == 1));
    }

    #[test]
    fn ecn_capable_packets_are_marked_not_dropped() {
        let mut w = fq(4_000_000);
        bulk_and_sparse(&mut w, 2, 2);
        let bulk: Vec<_> = w.met.iter().filter(|m| m.pkt.flow == 1).collect();
        assert!(bulk.iter().any(|m| m.ce));
        // CoDel marks an ECN-capable packet instead of dropping it (only the byte limit drops).
        assert!(bulk.iter().all(|m| !m.aqm_drop));
    }

    #[test]
    fn two_bulk_flows_share_the_link_by_bytes() {
        let mut w = fq(400_000);
        let mut t = 0;
        while t < 1000 * MS {
            w.arrive(t, 1, 1500, 0);
            w.arrive(t, 2, 500, 0);
            w.arrive(t, 2, 500, 0);
            w.arrive(t, 2, 500, 0);
            t += 60_000;
        }
        let sent = |f: u64| -> u64 {
            (w.met.iter())
                .filter(|m| m.pkt.flow == f && m.sent_at_ns.is_some())
                .map(|m| u64::from(m.pkt.len))
                .sum()
        };
        let (a, b) = (sent(1) as f64, sent(2) as f64);
        assert!((a / b - 1.0).abs() < 0.05, "{a} against {b} bytes");
    }

    #[test]
    fn over_the_limit_the_fattest_flow_loses_its_head() {
        let mut w = fq(10_000);
        for _ in 0..6 {
            w.arrive(0, 1, 1500, 0);
        }
        w.arrive(0, 2, 1500, 0);
        w.arrive(0, 2, 1500, 0);
        // The first packet went straight onto the wire; of the 10 500 bytes then held against a
        // 10 000 limit, flow 1 (the fattest) loses its head.
        let dropped: Vec<_> = (w.met.iter())
            .filter(|m| m.sent_at_ns.is_none())
            .map(|m| (m.pkt.flow, m.pkt.id))
            .collect();
        assert_eq!(dropped, vec![(1, 2)]);
        assert_eq!(w.s.bytes(), 9_000);
    }
}
