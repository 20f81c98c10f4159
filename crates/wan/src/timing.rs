//! Whether the emulator is on time, by its own clock: every packet it writes out is entered in a
//! histogram of how late it left against the departure time the path model gave it (its arrival plus
//! delay, queueing and jitter). A path emulator that claims 100 ms and delivers 103 ms misleads every
//! measurement taken through it, so `wan status` shows these figures beside the counters.
//!
//! The histogram is fixed and lock-free (one atomic per bucket), so the forwarding threads record
//! without contention while `wan status` reads: 10 µs buckets up to 1 ms, 100 µs to 10 ms, 1 ms to
//! 100 ms, and one bucket beyond. A percentile is the upper edge of its bucket, so it is never
//! understated.
//!
//! What it cannot see: how long a packet waited in the TUN device before the forwarder read it (the
//! kernel gives TUN reads no timestamp). That wake-up latency is measured end to end instead (ping
//! through the path, see docs/wan.md).

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const FINE_US: u64 = 10;
const FINE_END_US: u64 = 1_000;
const MID_US: u64 = 100;
const MID_END_US: u64 = 10_000;
const COARSE_US: u64 = 1_000;
const COARSE_END_US: u64 = 100_000;
const FINE_BUCKETS: usize = (FINE_END_US / FINE_US) as usize;
const MID_BUCKETS: usize = ((MID_END_US - FINE_END_US) / MID_US) as usize;
const COARSE_BUCKETS: usize = ((COARSE_END_US - MID_END_US) / COARSE_US) as usize;
/// Buckets in all, the last holding everything from 100 ms on.
const BUCKETS: usize = FINE_BUCKETS + MID_BUCKETS + COARSE_BUCKETS + 1;

/// The bucket of a lateness of `late_ns`.
fn bucket_of(late_ns: u64) -> usize {
    let us = late_ns / 1_000;
    if us < FINE_END_US {
        (us / FINE_US) as usize
    } else if us < MID_END_US {
        FINE_BUCKETS + ((us - FINE_END_US) / MID_US) as usize
    } else if us < COARSE_END_US {
        FINE_BUCKETS + MID_BUCKETS + ((us - MID_END_US) / COARSE_US) as usize
    } else {
        BUCKETS - 1
    }
}

/// The upper edge of bucket `i`, µs (`None` for the last, which is open).
fn upper_edge_us(i: usize) -> Option<u64> {
    if i < FINE_BUCKETS {
        Some((i as u64 + 1) * FINE_US)
    } else if i < FINE_BUCKETS + MID_BUCKETS {
        Some(FINE_END_US + (i - FINE_BUCKETS + 1) as u64 * MID_US)
    } else if i < BUCKETS - 1 {
        Some(MID_END_US + (i - FINE_BUCKETS - MID_BUCKETS + 1) as u64 * COARSE_US)
    } else {
        None
    }
}

/// Live departure lateness of one direction.
pub struct Lateness {
    buckets: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }
}

impl Lateness {
    /// Enters one packet that left at `actual_ns` and was due at `intended_ns` (the same clock).
    pub fn record(&self, intended_ns: u64, actual_ns: u64) {
        self.record_many(intended_ns, actual_ns, 1)
    }

    /// Enters `count` packets that left together at `actual_ns`, all due at `intended_ns`.
    pub fn record_many(&self, intended_ns: u64, actual_ns: u64, count: u64) {
        let late = actual_ns.saturating_sub(intended_ns);
        self.buckets[bucket_of(late)].fetch_add(count, Relaxed);
        self.sum_ns.fetch_add(late * count, Relaxed);
        self.max_ns.fetch_max(late, Relaxed);
    }

    /// The histogram now, with its percentiles.
    pub fn snapshot(&self) -> LatenessSnapshot {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let packets: u64 = counts.iter().sum();
        let max_us = self.max_ns.load(Relaxed) as f64 / 1e3;
        let pct = |q: f64| percentile_us(&counts, packets, q, max_us);
        LatenessSnapshot {
            packets,
            mean_us: if packets == 0 {
                0.0
            } else {
                self.sum_ns.load(Relaxed) as f64 / packets as f64 / 1e3
            },
            p50_us: pct(0.50),
            p90_us: pct(0.90),
            p99_us: pct(0.99),
            p999_us: pct(0.999),
            max_us,
            buckets: counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| LatenessBucket {
                    below_us: upper_edge_us(i),
                    packets: c,
                })
                .collect(),
        }
    }
}

/// The upper edge of the bucket holding the `q` quantile, capped by the largest lateness seen (the
/// open last bucket reports that).
fn percentile_us(counts: &[u64], packets: u64, q: f64, max_us: f64) -> f64 {
    if packets == 0 {
        return 0.0;
    }
    let rank = ((q * packets as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return upper_edge_us(i).map_or(max_us, |e| (e as f64).min(max_us.max(0.0)));
        }
    }
    max_us
}

/// The 99th percentile of the lateness of the packets that left between two snapshots of the same
/// direction (`a` taken first): the histogram's growth, read as [`LatenessSnapshot::p99_us`] is
/// (the upper edge of the bucket holding it; `b`'s maximum for the open last bucket). None when no
/// packet left in between, or when the emulator restarted (a bucket shrank).
pub fn p99_between(a: &LatenessSnapshot, b: &LatenessSnapshot) -> Option<f64> {
    let before = |edge: Option<u64>| {
        a.buckets
            .iter()
            .find(|x| x.below_us == edge)
            .map_or(0, |x| x.packets)
    };
    let grown: Vec<(Option<u64>, u64)> = b
        .buckets
        .iter()
        .map(|x| Some((x.below_us, x.packets.checked_sub(before(x.below_us))?)))
        .collect::<Option<_>>()?;
    let packets: u64 = grown.iter().map(|(_, n)| n).sum();
    if packets == 0 {
        return None;
    }
    let rank = ((0.99 * packets as f64).ceil() as u64).max(1);
    let mut seen = 0;
    grown.iter().find_map(|&(edge, n)| {
        seen += n;
        (seen >= rank).then(|| edge.map_or(b.max_us, |e| (e as f64).min(b.max_us)))
    })
}

/// How late one direction's packets left, as `wan status --json` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LatenessSnapshot {
    /// Packets written out since the emulator started.
    pub packets: u64,
    /// Mean lateness, µs.
    pub mean_us: f64,
    /// Median lateness, µs (the upper edge of its bucket, at most the maximum).
    pub p50_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// The latest any packet left, µs.
    pub max_us: f64,
    /// The histogram's non-empty buckets, in order.
    pub buckets: Vec<LatenessBucket>,
}

/// One bucket of the histogram.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatenessBucket {
    /// Its packets left less than this many µs late (`null`: 100 ms or more).
    pub below_us: Option<u64>,
    /// How many.
    pub packets: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lateness_over_a_test_is_the_histograms_growth() {
        let l = Lateness::default();
        // Before the test: 1000 packets on time.
        for _ in 0..1000 {
            l.record(0, 5_000);
        }
        let a = l.snapshot();
        // During it: 900 on time, 100 two milliseconds late (over 1%).
        for i in 0..1000 {
            l.record(0, if i < 900 { 5_000 } else { 2_000_000 });
        }
        let b = l.snapshot();
        let p99 = p99_between(&a, &b).unwrap();
        assert!((2_000.0..=2_200.0).contains(&p99), "{p99}");
        // Over both, the late tenth is 5%: still the p99 the snapshot itself gives.
        assert!(b.p99_us >= 2_000.0);
        assert_eq!(p99_between(&b, &b), None, "nothing left in between");
        assert_eq!(p99_between(&b, &a), None, "a restart: counts went down");
    }

    #[test]
    fn buckets_are_contiguous_and_each_value_falls_below_its_edge() {
        for us in [0, 9, 10, 999, 1_000, 1_099, 1_100, 9_999, 10_000, 99_999] {
            let i = bucket_of(us * 1_000);
            let edge = upper_edge_us(i).unwrap();
            assert!(us < edge, "{us} µs in bucket {i} below {edge}");
            let lower = if i == 0 { 0 } else { upper_edge_us(i - 1).unwrap() };
            assert!(us >= lower, "{us} µs in bucket {i} from {lower}");
        }
        assert_eq!(bucket_of(100_000_000), BUCKETS - 1);
        assert_eq!(upper_edge_us(BUCKETS - 1), None);
        assert_eq!(upper_edge_us(BUCKETS - 2), Some(COARSE_END_US));
    }

    #[test]
    fn percentiles_come_from_the_buckets_and_never_exceed_the_maximum() {
        let l = Lateness::default();
        for i in 0..990u64 {
            l.record(1_000_000, 1_000_000 + (i % 10) * 1_000); // 0-9 µs late
        }
        for _ in 0..9 {
            l.record(0, 2_345_000); // 2.345 ms late
        }
        l.record(5_000, 1_000); // early counts as on time
        let s = l.snapshot();
        assert_eq!(s.packets, 1_000);
        assert_eq!(s.p50_us, 10.0);
        assert_eq!(s.p99_us, 10.0);
        assert_eq!(s.p999_us, 2_345.0, "the bucket's edge (2.4 ms) capped by the max");
        assert_eq!(s.max_us, 2_345.0);
        assert_eq!(s.buckets.len(), 2);
        assert_eq!(s.buckets[1].below_us, Some(2_400));
        let mean = (990.0 * 4.5 + 9.0 * 2_345.0) / 1_000.0;
        assert!((s.mean_us - mean).abs() < 1e-6, "{}", s.mean_us);
    }

    #[test]
    fn an_empty_histogram_reports_zeros() {
        let s = Lateness::default().snapshot();
        assert_eq!((s.packets, s.p99_us, s.max_us), (0, 0.0, 0.0));
        assert!(s.buckets.is_empty());
    }

    #[test]
    fn beyond_100_ms_the_open_bucket_reports_the_maximum() {
        let l = Lateness::default();
        l.record(0, 250_000_000);
        let s = l.snapshot();
        assert_eq!(s.p50_us, 250_000.0);
        assert_eq!(s.buckets[0].below_us, None);
    }
}
