//! Stalls: spans in which a receiving end got no data at all, found from its running byte count as the
//! engine's supervisor looks at it (at least every 100 ms). A path that goes down for 3 s in a 20 s
//! test still gives a mean rate; what a user needs to see is that nothing arrived for 3.4 s from 5.0 s
//! (the outage plus TCP's retransmission back-off), which intervals of a second blur. Pure: the caller
//! passes the time and the count.

use serde::{Deserialize, Serialize};

/// One span without data at a receiving end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    /// When the last data before it was seen, seconds since the receiving end's start (the intervals'
    /// clock); the data stopped at most one look (100 ms) before.
    pub from_s: f64,
    /// How long nothing arrived, seconds (to the look that saw data again, or to the end).
    pub length_s: f64,
    /// No data came again before the test ended.
    #[serde(default)]
    pub to_end: bool,
}

/// The shortest span without data that counts as a stall when no pace says otherwise: longer than
/// the scheduling hiccups of a busy host, shorter than TCP's first retransmission timeout plus its
/// back-off after a real outage.
pub const MIN_STALL_S: f64 = 0.5;
/// At most this many stalls are kept per end (a flapping path over a long test).
pub const MAX_STALLS: usize = 100;

/// The shortest stall for a test whose receiving end expects `rate_bps` in writes of `length_bytes`:
/// four of its writes' spacing when that is longer than [`MIN_STALL_S`] (a slow paced or UDP test
/// is not stalled between its datagrams).
pub fn threshold_s(rate_bps: Option<f64>, length_bytes: usize) -> f64 {
    let gap = rate_bps
        .filter(|r| *r > 0.0)
        .map_or(0.0, |r| length_bytes as f64 * 8.0 / r);
    MIN_STALL_S.max(4.0 * gap)
}

/// Watches one end's received-byte count for stalls.
#[derive(Debug, Clone)]
pub struct StallWatch {
    threshold_s: f64,
    bytes: u64,
    /// When the count last grew (None before the first byte: the start is not a stall).
    last_growth_s: Option<f64>,
    stalls: Vec<Stall>,
}

impl StallWatch {
    /// A watch that reports spans without data of at least `threshold_s`.
    pub fn new(threshold_s: f64) -> StallWatch {
        StallWatch {
            threshold_s,
            bytes: 0,
            last_growth_s: None,
            stalls: Vec::new(),
        }
    }

    /// Looks at the count `bytes` at `now_s`.
    pub fn observe(&mut self, now_s: f64, bytes: u64) {
        if bytes <= self.bytes {
            return;
        }
        self.bytes = bytes;
        if let Some(last) = self.last_growth_s {
            self.close(last, now_s, false);
        }
        self.last_growth_s = Some(now_s);
    }

    fn close(&mut self, from_s: f64, to_s: f64, to_end: bool) {
        let length_s = to_s - from_s;
        if length_s >= self.threshold_s && self.stalls.len() < MAX_STALLS {
            self.stalls.push(Stall {
                from_s,
                length_s,
                to_end,
            });
        }
    }

    /// The stalls, the last one open until `end_s` when the test ended in it (`senders_stopped_s`:
    /// when the senders were due to stop, after which silence is the end, not a stall).
    pub fn finish(mut self, end_s: f64, senders_stopped_s: Option<f64>) -> Vec<Stall> {
        if let Some(last) = self.last_growth_s {
            let end = senders_stopped_s.map_or(end_s, |s| s.min(end_s));
            self.close(last, end, true);
        }
        self.stalls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(points: &[(f64, u64)], end: f64, stop: Option<f64>) -> Vec<Stall> {
        let mut w = StallWatch::new(0.5);
        for &(t, b) in points {
            w.observe(t, b);
        }
        w.finish(end, stop)
    }

    #[test]
    fn an_outage_is_one_stall_from_the_last_data_to_the_first_again() {
        let mut pts: Vec<(f64, u64)> = (0..=25).map(|i| (i as f64 * 0.1, i * 1000)).collect();
        // Nothing from 2.5 s to 5.9 s, then data again.
        pts.extend((59..=80).map(|i| (i as f64 * 0.1, 25_000 + (i - 58) * 1000)));
        let s = watch(&pts, 8.0, Some(8.0));
        assert_eq!(s.len(), 1, "{s:?}");
        assert!((s[0].from_s - 2.5).abs() < 1e-9 && (s[0].length_s - 3.4).abs() < 1e-9);
        assert!(!s[0].to_end);
    }

    #[test]
    fn the_start_short_gaps_and_the_quiet_after_the_senders_stop_are_not_stalls() {
        // First byte at 1.0 s (slow start over a long path), gaps of 0.3 s and 0.4 s, a stall of
        // 2 s, then quiet after the senders stopped at 4.0 s.
        let mut pts = vec![
            (0.0, 0),
            (0.5, 0),
            (1.0, 10),
            (1.1, 20),
            (1.4, 30),
            (1.8, 40),
            (4.0, 50),
        ];
        pts.extend([(4.5, 50), (5.0, 50)]);
        let s = watch(&pts, 5.0, Some(4.0));
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(
            (s[0].from_s - 1.8).abs() < 1e-9 && (s[0].length_s - 2.2).abs() < 1e-9,
            "{s:?}"
        );
        assert!(watch(&[(0.1, 5), (0.2, 9)], 5.0, Some(0.2)).is_empty());
    }

    #[test]
    fn a_test_that_ends_inside_an_outage_says_so() {
        let s = watch(&[(0.1, 5), (0.2, 9)], 3.0, Some(3.0));
        assert_eq!(
            s,
            vec![Stall {
                from_s: 0.2,
                length_s: 2.8,
                to_end: true
            }]
        );
    }

    #[test]
    fn a_slow_pace_raises_the_threshold_and_the_list_is_bounded() {
        assert_eq!(threshold_s(None, 131_072), MIN_STALL_S);
        assert_eq!(threshold_s(Some(10e9), 131_072), MIN_STALL_S);
        // 1460-byte datagrams at 10 kbit/s: 1.17 s apart, a stall is 4 of them.
        assert!((threshold_s(Some(10e3), 1460) - 4.672).abs() < 1e-9);
        let mut w = StallWatch::new(0.5);
        for i in 0..1000u64 {
            w.observe(i as f64, i + 1);
        }
        assert_eq!(w.finish(1000.0, None).len(), MAX_STALLS);
    }
}
