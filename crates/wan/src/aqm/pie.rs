//! PIE (RFC 8033): a drop probability steered every 15 ms by the queueing delay, its distance from a
//! target and its trend, applied to packets as they arrive. The link's queue drains at a known rate,
//! so the queueing delay at any instant between two arrivals is exact (the time to serialise what is
//! queued): each arrival first runs the updates that fell due since the last one, then draws against
//! the probability. ECN-capable packets are marked instead of dropped while the probability is under
//! 10% (RFC 8033's default `mark_ecnth`). Not done: the RFC's optional de-randomisation.

use std::time::Duration;

/// RFC 8033's update interval.
const T_UPDATE_NS: u64 = 15_000_000;
/// Its gains, per second of delay error (α) and of delay change (β).
const ALPHA: f64 = 0.125;
const BETA: f64 = 1.25;
/// The burst a queue may take before PIE acts, from empty.
const MAX_BURST_NS: u64 = 150_000_000;
/// Under this drop probability an ECN-capable packet is marked rather than dropped.
const MARK_ECN_BELOW: f64 = 0.1;
/// Less than this many bytes queued: never dropped.
const TWO_PACKETS: u64 = 3000;

/// PIE's state.
#[derive(Debug, Clone)]
pub struct Pie {
    target_ns: u64,
    drop_prob: f64,
    qdelay_old_ns: u64,
    burst_allowance_ns: u64,
    next_update_ns: u64,
}

/// What PIE does with an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieVerdict {
    /// Queue it.
    Pass,
    /// Drop it; an ECN-capable one may be marked instead when `mark_ok`.
    Signal {
        /// The probability is low enough that marking is what RFC 8033 does.
        mark_ok: bool,
    },
}

impl Pie {
    /// PIE with this target queueing delay (RFC 8033: 15 ms).
    pub fn new(target: Duration) -> Pie {
        Pie {
            target_ns: target.as_nanos() as u64,
            drop_prob: 0.0,
            qdelay_old_ns: 0,
            burst_allowance_ns: MAX_BURST_NS,
            next_update_ns: 0,
        }
    }

    /// The drop probability now.
    pub fn drop_probability(&self) -> f64 {
        self.drop_prob
    }

    /// RFC 8033's step for the probability: small probabilities move in small steps.
    fn scaled(&self, p: f64) -> f64 {
        let scale = match self.drop_prob {
            d if d < 1e-6 => 2048.0,
            d if d < 1e-5 => 512.0,
            d if d < 1e-4 => 128.0,
            d if d < 1e-3 => 32.0,
            d if d < 1e-2 => 8.0,
            d if d < 1e-1 => 2.0,
            _ => 1.0,
        };
        p / scale
    }

    /// One update at `t_ns`, the queue delay then being `qdelay_ns`.
    fn update(&mut self, qdelay_ns: u64) {
        let s = |ns: u64| ns as f64 / 1e9;
        let p = ALPHA * (s(qdelay_ns) - s(self.target_ns)) + BETA * (s(qdelay_ns) - s(self.qdelay_old_ns));
        self.drop_prob = (self.drop_prob + self.scaled(p)).clamp(0.0, 1.0);
        if qdelay_ns == 0 && self.qdelay_old_ns == 0 {
            self.drop_prob *= 0.98;
        }
        self.burst_allowance_ns = self.burst_allowance_ns.saturating_sub(T_UPDATE_NS);
        let half = self.target_ns / 2;
        if self.drop_prob == 0.0 && qdelay_ns < half && self.qdelay_old_ns < half {
            self.burst_allowance_ns = MAX_BURST_NS;
        }
        self.qdelay_old_ns = qdelay_ns;
    }

    /// The verdict on a packet arriving at `now_ns`: `drain_at_ns` is when the queue ahead of it
    /// would be empty (the queue delay at any t before is `drain_at_ns − t`), `bytes_ahead` what is
    /// queued, `draw` a uniform random number in [0, 1).
    pub fn enqueue(&mut self, now_ns: u64, drain_at_ns: u64, bytes_ahead: u64, draw: f64) -> PieVerdict {
        if self.next_update_ns == 0 {
            self.next_update_ns = now_ns + T_UPDATE_NS;
        }
        while self.next_update_ns <= now_ns {
            let t = self.next_update_ns;
            self.update(drain_at_ns.saturating_sub(t));
            self.next_update_ns += T_UPDATE_NS;
        }
        let half = self.target_ns / 2;
        let calm = self.qdelay_old_ns < half && self.drop_prob < 0.2;
        if self.burst_allowance_ns > 0 || calm || bytes_ahead < TWO_PACKETS || draw >= self.drop_prob {
            return PieVerdict::Pass;
        }
        PieVerdict::Signal {
            mark_ok: self.drop_prob < MARK_ECN_BELOW,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_queue_below_target_raises_no_probability_and_keeps_its_burst_allowance() {
        let mut p = Pie::new(Duration::from_millis(15));
        for k in 0..1000 {
            let now = k * MS;
            assert_eq!(p.enqueue(now, now + 2 * MS, 50_000, 0.0), PieVerdict::Pass);
        }
        assert_eq!(p.drop_probability(), 0.0);
    }

    #[test]
    fn a_standing_queue_over_target_drives_the_probability_up_after_the_burst_allowance() {
        let mut p = Pie::new(Duration::from_millis(15));
        // 100 ms queued, always: the probability climbs, signals start once 150 ms of burst are used.
        let mut first = None;
        for k in 0..1000u64 {
            let now = k * MS;
            if let PieVerdict::Signal { .. } = p.enqueue(now, now + 100 * MS, 1_000_000, 0.0) {
                first.get_or_insert(now);
            }
        }
        let first = first.expect("PIE never signalled");
        assert!(
            (150 * MS..=400 * MS).contains(&first),
            "first signal at {} ms",
            first / MS
        );
        let pr = p.drop_probability();
        assert!(pr > 0.05 && pr < 1.0, "{pr}");
        // A draw above the probability passes.
        assert_eq!(
            p.enqueue(1000 * MS, 1100 * MS, 1_000_000, 0.999),
            PieVerdict::Pass
        );
    }

    #[test]
    fn marking_gives_way_to_dropping_as_the_probability_passes_ten_percent() {
        let mut p = Pie::new(Duration::from_millis(15));
        let mut marks_then_drops = vec![];
        for k in 0..20_000u64 {
            let now = k * MS;
            // 30 ms queued, always: the probability climbs slowly past 10%.
            if let PieVerdict::Signal { mark_ok } = p.enqueue(now, now + 30 * MS, 1_000_000, 0.0) {
                if marks_then_drops.last() != Some(&mark_ok) {
                    marks_then_drops.push(mark_ok);
                }
            }
        }
        assert_eq!(
            marks_then_drops,
            [true, false],
            "marks first, drops once p >= 10%"
        );
    }

    #[test]
    fn an_empty_queue_lets_the_probability_decay() {
        let mut p = Pie::new(Duration::from_millis(15));
        for k in 0..2000u64 {
            let now = k * MS;
            let _ = p.enqueue(now, now + 200 * MS, 1_000_000, 0.5);
        }
        let high = p.drop_probability();
        for k in 2000..6000u64 {
            let _ = p.enqueue(k * MS, 0, 0, 0.5);
        }
        assert!(
            p.drop_probability() < high / 10.0,
            "{} after {high}",
            p.drop_probability()
        );
    }
}
