//! Strict priority over three traffic classes chosen by DSCP, as a router's priority queueing (and
//! the three tins of CAKE's diffserv3) sorts them: expedited forwarding and the network-control and
//! voice classes (EF, VA, CS5, CS6, CS7) first, background (CS1 and LE, RFC 8622) last, everything
//! else between. A class is served only when every class above it is empty, so a probe in a higher
//! class passes a bulk flow's standing queue and one in the bulk flow's own class waits behind it:
//! what `landspeed latency --dscp` with `--probe-dscp` is for. The classes share the buffer: over its
//! byte limit a packet pushes out the newest packets of a lower class, else it is dropped itself.

use super::{Held, Out};
use std::collections::VecDeque;

/// The class a DSCP goes in: 0 (served first), 1 (best effort) or 2 (background).
pub fn class(dscp: u8) -> usize {
    match dscp {
        46 | 44 | 40 | 48 | 56 => 0,
        8 | 1 => 2,
        _ => 1,
    }
}

/// The three classes' queues.
#[derive(Debug, Clone, Default)]
pub struct Prio {
    classes: [VecDeque<Held>; 3],
    bytes: u64,
}

impl Prio {
    /// Empty.
    pub fn new() -> Prio {
        Prio::default()
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `pkt` in its class's queue. When the buffer would pass `limit_bytes`, the newest packets
    /// of the lowest class below the arriving packet's make room; with none there, `pkt` is dropped.
    pub fn enqueue(&mut self, pkt: Held, limit_bytes: Option<u64>, out: &mut Vec<Out>) {
        let mine = class(pkt.dscp);
        let over = |bytes: u64| limit_bytes.is_some_and(|l| bytes + u64::from(pkt.len) > l);
        while over(self.bytes) {
            let lower = (mine + 1..3).rev().find(|&c| !self.classes[c].is_empty());
            let Some(victim) = lower.and_then(|c| self.classes[c].pop_back()) else {
                out.push(Out::DropLimit(pkt));
                return;
            };
            self.bytes -= u64::from(victim.len);
            out.push(Out::DropLimit(victim));
        }
        self.bytes += u64::from(pkt.len);
        self.classes[mine].push_back(pkt);
    }

    /// The head of the highest class that holds a packet.
    pub fn dequeue(&mut self) -> Option<(Held, bool)> {
        let p = self.classes.iter_mut().find_map(VecDeque::pop_front)?;
        self.bytes -= u64::from(p.len);
        Some((p, false))
    }

    /// Every packet held.
    pub fn drain_all(&mut self) -> Vec<Held> {
        self.bytes = 0;
        self.classes.iter_mut().flat_map(std::mem::take).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{median, Wire};
    use crate::sched::Scheduler;

    const MS: u64 = 1_000_000;

    /// A bulk flow 25% over a 12 Mbit/s link (1000 ns a byte) in best effort, and a sparse flow of
    /// 100-byte packets every 10 ms in `dscp`: the sparse flow's median queueing delay from 1 s on.
    fn sparse_delay_ms(dscp: u8) -> f64 {
        let mut w = Wire::new(Scheduler::Prio(Prio::new()), 1000.0 * 8.0 / 12.0, Some(150_000));
        for t in 0..3000u64 {
            let now = t * MS;
            // 1500 bytes each 0.8 ms: 15 Mbit/s offered.
            for k in 0..5 {
                w.arrive_dscp(now + k * MS / 5, 1, 1500, 0, 0);
            }
            if t % 10 == 0 {
                w.arrive_dscp(now, 2, 100, 0, dscp);
            }
        }
        w.run_until(4000 * MS);
        median(w.delays(2, 1000 * MS)) as f64 / MS as f64
    }

    #[test]
    fn a_higher_class_passes_the_bulk_queue_and_the_same_class_waits_behind_it() {
        // The buffer (150 kB at 12 Mbit/s, 100 ms) stands full under the overload.
        let ef = sparse_delay_ms(46);
        let same = sparse_delay_ms(0);
        assert!(ef < 1.5, "EF waited {ef:.2} ms");
        assert!(same > 80.0, "best effort waited only {same:.2} ms");
    }

    #[test]
    fn background_waits_for_every_other_class_and_a_full_buffer_gives_way_to_a_higher_class() {
        let p = |id, dscp| Held {
            id,
            len: 1000,
            arrival_ns: id,
            flow: id,
            ecn: 0,
            probe: false,
            dscp,
        };
        let mut s = Prio::new();
        let mut out = vec![];
        for (id, dscp) in [(1, 8), (2, 0), (3, 46), (4, 1), (5, 26)] {
            s.enqueue(p(id, dscp), Some(4000), &mut out);
        }
        // The fifth (best effort) would pass 4000 bytes: it pushes out the newest background packet.
        assert_eq!(out, vec![Out::DropLimit(p(4, 1))]);
        // A background packet finds nothing lower to push out: dropped as it arrives.
        s.enqueue(p(6, 8), Some(4000), &mut out);
        assert_eq!(out[1], Out::DropLimit(p(6, 8)));
        let order: Vec<u64> = std::iter::from_fn(|| s.dequeue().map(|(h, _)| h.id)).collect();
        assert_eq!(order, [3, 2, 5, 1]);
        assert_eq!(s.bytes(), 0);
        assert_eq!(
            (class(46), class(0), class(8), class(1), class(34)),
            (0, 1, 2, 2, 1)
        );
    }
}
