//! DualPI2 (RFC 9332), the L4S dual-queue coupled AQM: packets marked ECT(1) or CE (L4S) wait in a
//! shallow queue that marks every packet whose sojourn exceeds a 1 ms step, beside a classic queue
//! held at a 15 ms target by a PI controller. The controller's base probability p' is updated every
//! 16 ms from the queueing delay (α = 0.16 Hz, β = 3.2 Hz); classic packets are signalled with p'²
//! (marked if ECT(0), dropped if not ECN-capable), L4S packets with the larger of the step and the
//! coupled k·p' (k = 2), so the two kinds of congestion control get about the same rate. The L queue
//! is served first unless the classic head has waited `tshift` (30 ms) longer: the time-shifted FIFO
//! RFC 9332 describes. Two choices stated: the controller's delay is the older of the two heads'
//! sojourns (as Linux's sch_dualpi2 takes the larger), and its 16 ms updates run at the first event
//! after each tick (the model has no timer of its own). Overload protection (dropping L4S packets
//! once p_C passes a threshold) is not modelled.

use super::{Held, Out};
use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::VecDeque;
use std::time::Duration;

const UPDATE_NS: u64 = 16_000_000;
const ALPHA_HZ: f64 = 0.16;
const BETA_HZ: f64 = 3.2;
const COUPLING: f64 = 2.0;

/// DualPI2's state.
#[derive(Debug, Clone)]
pub struct DualPi2 {
    l: VecDeque<Held>,
    c: VecDeque<Held>,
    bytes: u64,
    target_ns: u64,
    step_ns: u64,
    tshift_ns: u64,
    /// Classify every ECN-capable packet as L4S (Linux's `any_ect`), not only ECT(1) and CE.
    any_ect: bool,
    /// The base probability p'.
    p_base: f64,
    prev_delay_ns: u64,
    next_update_ns: u64,
}

impl DualPi2 {
    /// DualPI2 with this classic target and L4S step; `any_ect` puts ECT(0) packets in the L queue.
    pub fn new(target: Duration, step: Duration, any_ect: bool) -> DualPi2 {
        let target_ns = target.as_nanos() as u64;
        DualPi2 {
            l: VecDeque::new(),
            c: VecDeque::new(),
            bytes: 0,
            target_ns,
            step_ns: step.as_nanos() as u64,
            tshift_ns: 2 * target_ns,
            any_ect,
            p_base: 0.0,
            prev_delay_ns: 0,
            next_update_ns: UPDATE_NS,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The controller's base probability p', for `wan status` and the tests.
    pub fn base_probability(&self) -> f64 {
        self.p_base
    }

    fn is_l4s(&self, p: &Held) -> bool {
        matches!(p.ecn, 1 | 3) || (self.any_ect && p.ecn == 2)
    }

    /// Holds `pkt` in its queue, or drops it when the total would pass `limit_bytes`.
    pub fn enqueue(&mut self, now_ns: u64, pkt: Held, limit_bytes: Option<u64>, out: &mut Vec<Out>) {
        self.update(now_ns);
        if limit_bytes.is_some_and(|l| self.bytes + u64::from(pkt.len) > l) {
            out.push(Out::DropLimit(pkt));
            return;
        }
        self.bytes += u64::from(pkt.len);
        if self.is_l4s(&pkt) {
            self.l.push_back(pkt);
        } else {
            self.c.push_back(pkt);
        }
    }

    fn head_sojourn(q: &VecDeque<Held>, now_ns: u64) -> u64 {
        q.front().map_or(0, |p| now_ns.saturating_sub(p.arrival_ns))
    }

    /// Runs the PI updates due by `now_ns`.
    fn update(&mut self, now_ns: u64) {
        while self.next_update_ns <= now_ns {
            let t = self.next_update_ns;
            let delay = Self::head_sojourn(&self.c, t).max(Self::head_sojourn(&self.l, t));
            let secs = |ns: u64| ns as f64 / 1e9;
            let tu = secs(UPDATE_NS);
            let dp = ALPHA_HZ * tu * (secs(delay) - secs(self.target_ns))
                + BETA_HZ * tu * (secs(delay) - secs(self.prev_delay_ns));
            self.p_base = (self.p_base + dp).clamp(0.0, 1.0);
            self.prev_delay_ns = delay;
            self.next_update_ns += UPDATE_NS;
        }
    }

    /// The next packet at `now_ns`, with whether to mark it; classic packets the controller drops go
    /// to `out`.
    pub fn dequeue(&mut self, now_ns: u64, rng: &mut SmallRng, out: &mut Vec<Out>) -> Option<(Held, bool)> {
        self.update(now_ns);
        loop {
            let l_wait = self.l.front().map(|p| now_ns.saturating_sub(p.arrival_ns));
            let c_wait = self.c.front().map(|p| now_ns.saturating_sub(p.arrival_ns));
            let from_l = match (l_wait, c_wait) {
                (None, None) => return None,
                (Some(l), Some(c)) => l + self.tshift_ns >= c,
                (l, _) => l.is_some(),
            };
            if from_l {
                let p = self.l.pop_front()?;
                self.bytes -= u64::from(p.len);
                let step = now_ns.saturating_sub(p.arrival_ns) > self.step_ns;
                let coupled = (COUPLING * self.p_base).min(1.0);
                let ce = step || rng.random::<f64>() < coupled;
                return Some((p, ce));
            }
            let p = self.c.pop_front()?;
            self.bytes -= u64::from(p.len);
            // p'² as the larger of two draws falling below p'.
            let signal = rng.random::<f64>().max(rng.random::<f64>()) < self.p_base;
            match (signal, p.ect()) {
                (false, _) => return Some((p, false)),
                (true, true) => return Some((p, true)),
                (true, false) => out.push(Out::DropAqm(p)),
            }
        }
    }

    /// Gives up every packet held.
    pub fn drain_all(&mut self) -> Vec<Held> {
        self.bytes = 0;
        self.l.drain(..).chain(self.c.drain(..)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{median, Wire};
    use super::super::Scheduler;
    use super::*;

    const MS: u64 = 1_000_000;

    fn dual(any_ect: bool) -> Wire {
        let s = DualPi2::new(Duration::from_millis(15), Duration::from_millis(1), any_ect);
        Wire::new(Scheduler::DualPi2(s), 80.0, Some(4_000_000))
    }

    /// Flow 1 offers `rate_mbit` of 1500-byte packets with ECN field `ecn` for `secs`.
    fn offer(w: &mut Wire, secs: u64, per_ns: u64, ecn: u8) {
        let mut t = 0;
        while t < secs * 1000 * MS {
            w.arrive(t, 1, 1500, ecn);
            t += per_ns;
        }
        w.run_until(u64::MAX / 2);
    }

    fn pi(w: &Wire) -> f64 {
        match &w.s {
            Scheduler::DualPi2(d) => d.base_probability(),
            Scheduler::FqCodel(_) | Scheduler::Prio(_) => unreachable!(),
        }
    }

    #[test]
    fn l4s_packets_are_marked_past_the_step_and_never_dropped() {
        let mut w = dual(false);
        // 1500 B every 100 µs is 120 Mbit/s into 100: a queue builds past the 1 ms step.
        offer(&mut w, 1, 100_000, 1);
        assert!(w.met.iter().all(|m| !m.aqm_drop));
        let marked = w.met.iter().filter(|m| m.ce).count();
        assert!(marked > 0);
        // Every packet that waited past the step was marked.
        assert!((w.met.iter())
            .filter(|m| m.sent_at_ns.is_some_and(|s| s - m.pkt.arrival_ns > MS))
            .all(|m| m.ce));
    }

    #[test]
    fn an_ect0_packet_is_classic_unless_any_ect() {
        let d = DualPi2::new(Duration::from_millis(15), Duration::from_millis(1), false);
        let p = |ecn| Held {
            id: 1,
            len: 100,
            arrival_ns: 0,
            flow: 0,
            ecn,
            probe: false,
            dscp: 0,
        };
        assert!(d.is_l4s(&p(1)) && d.is_l4s(&p(3)) && !d.is_l4s(&p(2)) && !d.is_l4s(&p(0)));
        let d = DualPi2::new(Duration::from_millis(15), Duration::from_millis(1), true);
        assert!(d.is_l4s(&p(2)) && !d.is_l4s(&p(0)));
    }

    #[test]
    fn an_overloaded_classic_queue_is_steered_toward_the_target() {
        let mut w = dual(false);
        // 150 Mbit/s of unresponsive classic traffic into 100: only drops can hold the queue, and the
        // controller raises p' until they do: the standing delay ends near the 15 ms target, not at
        // the 320 ms of a full 4 MB queue.
        offer(&mut w, 20, 80_000, 0);
        let late = median(w.delays(1, 15_000 * MS));
        assert!(late < 40 * MS, "classic queue {late} ns");
        assert!(pi(&w) > 0.3, "p' {}", pi(&w));
        assert!(w.met.iter().any(|m| m.aqm_drop));
    }

    #[test]
    fn the_l_queue_is_served_first_within_the_time_shift() {
        let mut w = dual(false);
        // Both queues loaded at t = 0; the L packets go first while the classic head has not waited
        // 30 ms longer than theirs.
        for _ in 0..10 {
            w.arrive(0, 1, 1500, 0);
        }
        for _ in 0..10 {
            w.arrive(0, 2, 1500, 1);
        }
        w.run_until(u64::MAX / 2);
        let order: Vec<u64> = w.met.iter().map(|m| m.pkt.flow).collect();
        // The first classic packet was already on the wire when the L ones arrived.
        assert_eq!(&order[..11], &[1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]);
    }
}
