//! iperf3's `--server-bitrate-limit RATE[/SECONDS]` as a server applies it while a test runs: after
//! every statistics interval, the bytes of the last SECONDS (5 by default, rounded to whole
//! intervals) in both directions, averaged; once a full window is over RATE the test is ended with
//! iperf3's TOTAL_RATE error. The option's text and its checks are here too, with iperf3's words.
//! Nothing here reads a clock: the driver hands over each interval's count.

use std::collections::VecDeque;

/// iperf3's averaging window when the option gives none, seconds.
pub const DEFAULT_AVERAGE_S: f64 = 5.0;

/// A server's total rate limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TotalRateLimit {
    /// The most bits per second a test may move in all (both directions).
    pub bps: f64,
    /// Over how many seconds the rate is averaged (0: each interval alone).
    pub average_s: f64,
}

impl TotalRateLimit {
    /// `RATE[/SECONDS]` as iperf3 reads it: RATE with k, m, g or t (powers of 1000, either case);
    /// SECONDS from 0.1 to 60, or 0. The error is iperf3's words.
    pub fn parse(text: &str) -> Result<TotalRateLimit, String> {
        let (rate, secs) = match text.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (text, None),
        };
        let average_s = match secs {
            // C's atof: what does not read as a number is 0.
            Some(s) => s.trim().parse::<f64>().unwrap_or(0.0),
            None => DEFAULT_AVERAGE_S,
        };
        if average_s != 0.0 && !(0.1..=60.0).contains(&average_s) {
            return Err("invalid time interval for calculating average data rate".into());
        }
        // landspeed's own rate reader takes iperf3's suffixes (k, m, g, t: powers of 1000).
        let bps = rate
            .trim()
            .parse::<landspeed_core::units::BitRate>()
            .map_err(|_| format!("invalid unit value or suffix: '{rate}'"))?
            .bps();
        Ok(TotalRateLimit { bps, average_s })
    }
}

/// The running check of one test.
#[derive(Debug, Clone)]
pub struct TotalRateCheck {
    limit: TotalRateLimit,
    interval_s: f64,
    /// Intervals averaged.
    per: usize,
    window: VecDeque<u64>,
    last_total: u64,
}

impl TotalRateCheck {
    /// A check of `limit` over statistics intervals of `interval_s` (the window rounded to whole
    /// intervals, at least one, as iperf3 rounds it).
    pub fn new(limit: TotalRateLimit, interval_s: f64) -> TotalRateCheck {
        let per = if limit.average_s <= interval_s || interval_s <= 0.0 {
            1
        } else {
            (limit.average_s / interval_s).round().max(1.0) as usize
        };
        TotalRateCheck {
            limit,
            interval_s,
            per,
            window: VecDeque::with_capacity(per),
            last_total: 0,
        }
    }

    /// An interval ended with `total_bytes` moved so far in the test (both directions): the
    /// window's average rate when a full window is over the limit.
    pub fn interval(&mut self, total_bytes: u64) -> Option<f64> {
        let moved = total_bytes.saturating_sub(self.last_total);
        self.last_total = total_bytes;
        if self.window.len() == self.per {
            self.window.pop_front();
        }
        self.window.push_back(moved);
        if self.window.len() < self.per {
            return None;
        }
        let bytes: u64 = self.window.iter().sum();
        let bps = bytes as f64 * 8.0 / (self.interval_s.max(f64::MIN_POSITIVE) * self.per as f64);
        (bps > self.limit.bps).then_some(bps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_reads_as_iperf3_reads_it() {
        let l = TotalRateLimit::parse("100M").unwrap();
        assert_eq!((l.bps, l.average_s), (100e6, 5.0));
        let l = TotalRateLimit::parse("2g/2").unwrap();
        assert_eq!((l.bps, l.average_s), (2e9, 2.0));
        assert_eq!(TotalRateLimit::parse("1k/0").unwrap().average_s, 0.0);
        assert_eq!(TotalRateLimit::parse("1k/x").unwrap().average_s, 0.0, "atof");
        let bad = "invalid time interval for calculating average data rate";
        assert_eq!(TotalRateLimit::parse("10M/100").unwrap_err(), bad);
        assert_eq!(TotalRateLimit::parse("10M/0.05").unwrap_err(), bad);
        assert_eq!(
            TotalRateLimit::parse("10x").unwrap_err(),
            "invalid unit value or suffix: '10x'"
        );
    }

    #[test]
    fn a_full_window_over_the_limit_ends_the_test_and_a_short_burst_does_not() {
        // 100 Mbit/s averaged over 2 s of 1 s intervals: 12.5 MB a second is the limit.
        let limit = TotalRateLimit {
            bps: 100e6,
            average_s: 2.0,
        };
        let mut c = TotalRateCheck::new(limit, 1.0);
        assert_eq!(c.interval(20_000_000), None, "one interval is not a window");
        assert_eq!(c.interval(22_000_000), None, "20 + 2 MB in 2 s: 88 Mbit/s");
        assert_eq!(c.interval(50_000_000), Some(120e6), "2 + 28 MB in 2 s");
        let mut each = TotalRateCheck::new(
            TotalRateLimit {
                average_s: 0.0,
                ..limit
            },
            1.0,
        );
        assert_eq!(each.interval(12_500_000), None, "at the limit is not over it");
        assert_eq!(each.interval(25_000_001), Some(100_000_008.0));
        // A window shorter than the interval is one interval; 2.6 s of 1 s intervals is 3.
        assert_eq!(
            TotalRateCheck::new(
                TotalRateLimit {
                    average_s: 0.5,
                    ..limit
                },
                1.0
            )
            .per,
            1
        );
        assert_eq!(
            TotalRateCheck::new(
                TotalRateLimit {
                    average_s: 2.6,
                    ..limit
                },
                1.0
            )
            .per,
            3
        );
    }
}
