//! The figures of one cell's repeated runs: median, 90th percentile (what SLAC called the "maxima":
//! 10% of measurements lie above it), min, max, mean, sample standard deviation and the 95% confidence
//! interval of the mean (Student's t with n − 1 degrees of freedom).

use serde::{Deserialize, Serialize};

/// Statistics of one cell's repeated runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellStats {
    /// Runs.
    pub n: u32,
    /// Median.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one value.
    pub sd: f64,
    /// 95% confidence interval of the mean; None for one value.
    pub ci95_low: Option<f64>,
    /// The upper end of the confidence interval.
    pub ci95_high: Option<f64>,
}

/// Two-sided 95% critical values of Student's t for 1..=30 degrees of freedom.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// The 95% two-sided t critical value for `df` degrees of freedom (normal 1.96 beyond the table, with
/// the usual step values for 40, 60 and 120).
pub fn t95(df: u32) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T95[df as usize - 1],
        31..=40 => 2.021,
        41..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

impl CellStats {
    /// None for no (finite) values.
    pub fn from_values(values: &[f64]) -> Option<CellStats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let half = (n > 1).then(|| t95(n as u32 - 1) * sd / (n as f64).sqrt());
        let q = |p| landspeed_core::path::rtt::quantile(&v, p).expect("non-empty");
        Some(CellStats {
            n: n as u32,
            median: q(0.5),
            p90: q(0.9),
            min: v[0],
            max: v[n - 1],
            mean,
            sd,
            ci95_low: half.map(|h| mean - h),
            ci95_high: half.map(|h| mean + h),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{a} != {b}");
    }

    #[test]
    fn against_hand_computed_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample variance 32/7.
        let s = CellStats::from_values(&[5.0, 4.0, 9.0, 4.0, 2.0, 5.0, 7.0, 4.0]).unwrap();
        assert_eq!(s.n, 8);
        close(s.mean, 5.0);
        close(s.sd, (32.0f64 / 7.0).sqrt());
        close(s.median, 4.5);
        close(s.p90, 7.6); // rank 0.9 × 7 = 6.3 → 7 + 0.3 × (9 − 7)
        close(s.min, 2.0);
        close(s.max, 9.0);
        let half = 2.365 * (32.0f64 / 7.0).sqrt() / 8f64.sqrt();
        close(s.ci95_low.unwrap(), 5.0 - half);
        close(s.ci95_high.unwrap(), 5.0 + half);
    }

    #[test]
    fn one_value_and_none() {
        let s = CellStats::from_values(&[3.0]).unwrap();
        assert_eq!((s.median, s.p90, s.sd, s.ci95_low), (3.0, 3.0, 0.0, None));
        assert!(CellStats::from_values(&[]).is_none());
        assert!(CellStats::from_values(&[f64::NAN]).is_none());
        assert_eq!(t95(1), 12.706);
        assert_eq!(t95(1000), 1.96);
    }
}
