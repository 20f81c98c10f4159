//! One-way transit times gathered as they come and summed across intervals and streams. A
//! receiver that reads its sender's send times (iperf 2's datagrams, and its TCP bursts with
//! `--trip-times`) counts each arrival here; a [`Transits`] becomes the result's
//! [`TransitSummary`] at each sample, and summaries merge exactly (count, mean, spread, least, most)
//! into a whole test's or a `[SUM]`'s, so no figure is an average of averages.

use crate::udp::TransitSummary;

/// Transit times so far: Welford's running mean and squared deviations, the least and the most.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Transits {
    count: u64,
    mean_s: f64,
    m2_s2: f64,
    min_s: f64,
    max_s: f64,
}

impl Transits {
    /// One transit, seconds (negative when the sender's clock runs ahead).
    pub fn add(&mut self, transit_s: f64) {
        self.merge(&Transits {
            count: 1,
            mean_s: transit_s,
            m2_s2: 0.0,
            min_s: transit_s,
            max_s: transit_s,
        });
    }

    /// `other`'s transits added (Chan's pairwise update: exact for any split).
    pub fn merge(&mut self, other: &Transits) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let n = (self.count + other.count) as f64;
        let delta = other.mean_s - self.mean_s;
        let (a, b) = (self.count as f64, other.count as f64);
        self.mean_s += delta * b / n;
        self.m2_s2 += other.m2_s2 + delta * delta * a * b / n;
        self.min_s = self.min_s.min(other.min_s);
        self.max_s = self.max_s.max(other.max_s);
        self.count += other.count;
    }

    /// How many.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The summary of these transits, `over_s` seconds of arrivals (none when there are none).
    pub fn summary(&self, over_s: f64) -> Option<TransitSummary> {
        (self.count > 0).then(|| TransitSummary {
            datagrams: self.count,
            mean_ms: self.mean_s * 1e3,
            min_ms: self.min_s * 1e3,
            max_ms: self.max_s * 1e3,
            stddev_ms: match self.count {
                1 => 0.0,
                n => (self.m2_s2 / (n - 1) as f64).sqrt() * 1e3,
            },
            per_s: if over_s > 0.0 {
                self.count as f64 / over_s
            } else {
                0.0
            },
        })
    }

    /// A summary's transits again (its count, mean, spread, least and most).
    pub fn of(s: &TransitSummary) -> Transits {
        Transits {
            count: s.datagrams,
            mean_s: s.mean_ms / 1e3,
            m2_s2: (s.stddev_ms / 1e3).powi(2) * s.datagrams.saturating_sub(1) as f64,
            min_s: s.min_ms / 1e3,
            max_s: s.max_ms / 1e3,
        }
    }
}

/// Summaries merged into one over `over_s` seconds (intervals into a test, streams into a sum).
pub fn merged<'a>(each: impl Iterator<Item = &'a TransitSummary>, over_s: f64) -> Option<TransitSummary> {
    let mut all = Transits::default();
    for s in each {
        all.merge(&Transits::of(s));
    }
    all.summary(over_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_parts_are_the_whole() {
        let values = [0.10, 0.15, 0.12, 0.40, 0.11, 0.13, 0.2];
        let mut whole = Transits::default();
        values.iter().for_each(|v| whole.add(*v));
        let parts: Vec<TransitSummary> = values
            .chunks(3)
            .map(|c| {
                let mut t = Transits::default();
                c.iter().for_each(|v| t.add(*v));
                t.summary(1.0).unwrap()
            })
            .collect();
        let m = merged(parts.iter(), 3.5).unwrap();
        let w = whole.summary(3.5).unwrap();
        assert_eq!((m.datagrams, m.min_ms, m.max_ms), (7, 100.0, 400.0));
        assert!((m.mean_ms - w.mean_ms).abs() < 1e-9 && (m.stddev_ms - w.stddev_ms).abs() < 1e-9);
        assert!((w.mean_ms - 1210.0 / 7.0).abs() < 1e-9);
        assert_eq!(m.per_s, 2.0);
        assert!(Transits::default().summary(1.0).is_none());
    }
}
