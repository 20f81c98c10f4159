//! RTT distributions: ping's summary (min/avg/max/mdev, with median, p90 and p99 added) over the probes
//! that came back, loss over those sent, and the idle-versus-loaded comparison of `run --latency` with
//! RFC 6349's Buffer Delay Percentage. Percentiles interpolate linearly between the closest ranks (the
//! usual "type 7" definition); mdev is the population standard deviation, as ping prints it.

use serde::{Deserialize, Serialize};

/// Loss and RTT statistics of one probe series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    /// Probes sent.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// Probes without a reply, percent.
    pub loss_pct: f64,
    /// None when no probe came back.
    pub min_ms: Option<f64>,
    /// Mean RTT, ms.
    pub avg_ms: Option<f64>,
    /// Median RTT, ms.
    pub median_ms: Option<f64>,
    /// 90th percentile, ms.
    pub p90_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Largest RTT, ms.
    pub max_ms: Option<f64>,
    /// Mean deviation from the mean, ms (ping's mdev).
    pub mdev_ms: Option<f64>,
}

/// The `q` quantile (0..=1) of sorted values.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

impl RttSummary {
    /// The summary of `sent` probes of which `rtts_ms` came back.
    pub fn from_samples(sent: u32, rtts_ms: &[f64]) -> RttSummary {
        let mut v: Vec<f64> = rtts_ms.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let received = v.len() as u32;
        let sent = sent.max(received);
        let loss_pct = if sent == 0 {
            0.0
        } else {
            100.0 * f64::from(sent - received) / f64::from(sent)
        };
        let n = v.len() as f64;
        let avg = (!v.is_empty()).then(|| v.iter().sum::<f64>() / n);
        let mdev = avg.map(|a| (v.iter().map(|x| (x - a) * (x - a)).sum::<f64>() / n).sqrt());
        RttSummary {
            sent,
            received,
            loss_pct,
            min_ms: v.first().copied(),
            avg_ms: avg,
            median_ms: quantile(&v, 0.5),
            p90_ms: quantile(&v, 0.9),
            p99_ms: quantile(&v, 0.99),
            max_ms: v.last().copied(),
            mdev_ms: mdev,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::latency::LatencyReport;

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("value");
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn summary_against_hand_computed_values() {
        // 1..=10 ms, 12 sent: 2 lost.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = RttSummary::from_samples(12, &v);
        assert_eq!((s.sent, s.received), (12, 10));
        close(Some(s.loss_pct), 100.0 * 2.0 / 12.0);
        close(s.min_ms, 1.0);
        close(s.max_ms, 10.0);
        close(s.avg_ms, 5.5);
        close(s.median_ms, 5.5);
        close(s.p90_ms, 9.1); // rank 0.9 × 9 = 8.1 → 9 + 0.1 × (10 − 9)
        close(s.p99_ms, 9.91);
        close(s.mdev_ms, 8.25f64.sqrt()); // population variance of 1..=10 is 8.25
    }

    #[test]
    fn nothing_back_is_all_loss_and_no_figures() {
        let s = RttSummary::from_samples(5, &[]);
        assert_eq!(s.loss_pct, 100.0);
        assert_eq!(s.min_ms, None);
        assert_eq!(RttSummary::from_samples(0, &[]).loss_pct, 0.0);
        let one = RttSummary::from_samples(1, &[40.0]);
        close(one.p99_ms, 40.0);
        close(one.mdev_ms, 0.0);
    }

    #[test]
    fn buffer_delay_follows_rfc_6349() {
        // Baseline (idle minimum) 25 ms, average during the transfer 32 ms: (32 − 25) / 25 = 28%.
        let idle = RttSummary::from_samples(3, &[25.0, 26.0, 27.0]);
        let loaded = RttSummary::from_samples(3, &[30.0, 32.0, 34.0]);
        let r = LatencyReport::new(20.0, 64, idle, loaded);
        close(r.buffer_delay_pct, 28.0);
        close(r.added_delay_ms, 6.0);
    }
}
