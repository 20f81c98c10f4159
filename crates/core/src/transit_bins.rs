//! One-way transits in fixed bins, as iperf 2 bins them for `--histograms`: its server's `F8`
//! (TCP bursts with `--trip-times`) and `T8` (UDP datagrams with `--trip-times`) lines. A receiver
//! that times its sender's bursts or datagrams counts each transit in a [`TransitBins`]; each
//! sample takes what came since the one before as a [`TransitHistogram`], and histograms of
//! intervals merge exactly into the whole test's. The binning is iperf 2.1.8's (histogram.c): bin
//! `k`, counted from 0, holds transits from `k` widths up to `k + 1`, the division in single
//! precision and truncated toward zero (so a transit a little below zero, a clock offset, still
//! lands in the first bin), transits below that counted as below, at or past the last bin as
//! above.

use serde::{Deserialize, Serialize};

/// The unit a bin width was given in (`--histograms=100u`, `=2m`, or bare: seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinUnit {
    /// Seconds (iperf 2 takes a width without a letter so).
    Seconds,
    /// Milliseconds (`m`).
    Millis,
    /// Microseconds (`u`, and iperf 2's default).
    #[default]
    Micros,
}

impl BinUnit {
    /// How many of this unit make a second.
    pub fn per_second(self) -> f32 {
        match self {
            BinUnit::Seconds => 1.0,
            BinUnit::Millis => 1e3,
            BinUnit::Micros => 1e6,
        }
    }
}

/// How transits are binned: iperf 2's `--histograms[=WIDTH[u|m],BINS,LOWER,UPPER]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BinSpec {
    /// Each bin's width, in `unit`s.
    pub width: u32,
    /// The unit of `width`.
    pub unit: BinUnit,
    /// How many bins, as given (0 means iperf 2's fallback of 1,000: [`BinSpec::bins_used`]).
    pub bins: u32,
    /// The lower confidence bound, percent (the bin where the running share first passes it).
    pub ci_lower_pct: f64,
    /// The upper one, percent.
    pub ci_upper_pct: f64,
}

impl Default for BinSpec {
    /// iperf 2.1.8's: 10,000 bins of 100 µs, bounds at 5% and 95%.
    fn default() -> Self {
        BinSpec {
            width: 100,
            unit: BinUnit::Micros,
            bins: 10_000,
            ci_lower_pct: 5.0,
            ci_upper_pct: 95.0,
        }
    }
}

/// Why a `--histograms` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinSpecError {
    /// The width is not a whole number above zero.
    #[error("--histograms: the bin width must be a whole number above 0 (as 100u, 2m or 1), got {0:?}")]
    Width(String),
    /// The bin count is not a whole number.
    #[error("--histograms: the bin count must be a whole number up to 1000000, got {0:?}")]
    Bins(String),
    /// A confidence bound is not a percentage.
    #[error("--histograms: the confidence bounds must be percentages from 0 to 100, got {0:?}")]
    Bound(String),
}

impl BinSpec {
    /// Most bins a histogram may have (10,000 is iperf 2's default; each is 8 bytes when used).
    pub const MOST_BINS: u32 = 1_000_000;

    /// Reads iperf 2's `--histograms` value (empty: the default). The width takes `u`
    /// (microseconds) or `m` (milliseconds) after it, seconds without; the count, the lower and
    /// the upper bound follow, each optional, separated by commas.
    pub fn parse(s: &str) -> Result<BinSpec, BinSpecError> {
        let mut spec = BinSpec::default();
        if s.is_empty() {
            return Ok(spec);
        }
        // A value sets the count only when it names one: iperf 2's server then has none (its head
        // says 0) and bins by 1,000.
        spec.bins = 0;
        let mut parts = s.split(',');
        let width = parts.next().unwrap_or_default();
        let (digits, unit) = match width.strip_suffix('u') {
            Some(d) => (d, BinUnit::Micros),
            None => match width.strip_suffix('m') {
                Some(d) => (d, BinUnit::Millis),
                None => (width, BinUnit::Seconds),
            },
        };
        spec.unit = unit;
        spec.width = (digits.parse::<u32>().ok())
            .filter(|w| *w > 0)
            .ok_or_else(|| BinSpecError::Width(width.to_string()))?;
        if let Some(b) = parts.next() {
            spec.bins = (b.parse::<u32>().ok())
                .filter(|n| *n <= Self::MOST_BINS)
                .ok_or_else(|| BinSpecError::Bins(b.to_string()))?;
        }
        for bound in [&mut spec.ci_lower_pct, &mut spec.ci_upper_pct] {
            if let Some(p) = parts.next() {
                *bound = (p.parse::<f64>().ok())
                    .filter(|v| (0.0..=100.0).contains(v))
                    .ok_or_else(|| BinSpecError::Bound(p.to_string()))?;
            }
        }
        Ok(spec)
    }

    /// The bins a histogram has: the count given, or iperf 2's 1,000 for none.
    pub fn bins_used(&self) -> u32 {
        if self.bins == 0 {
            1000
        } else {
            self.bins
        }
    }

    /// Each bin's width, milliseconds (iperf 2's head prints it so).
    pub fn width_ms(&self) -> f64 {
        1e3 * f64::from(self.width) / f64::from(self.unit.per_second())
    }

    /// The bin a transit of `transit_s` seconds falls in, counted from 0 (negative: below the
    /// first), as iperf 2 computes it.
    pub fn bin_of(&self, transit_s: f64) -> i64 {
        (self.unit.per_second() * transit_s as f32 / self.width as f32) as i64
    }
}

/// The longest transit of an interval, and when its burst was sent (iperf 2 prints both after an
/// `F8` line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TransitPeak {
    /// The transit, milliseconds.
    pub transit_ms: f64,
    /// Its send time: whole seconds since the Unix epoch.
    pub sent_s: i64,
    /// And the microseconds past them.
    pub sent_us: u32,
}

/// Transits binned: the bins that hold any, those below the first and past the last.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransitHistogram {
    /// How they were binned.
    pub spec: BinSpec,
    /// The bins that hold any, in order; `index` counted from 1 as iperf 2 prints them.
    pub bins: Vec<crate::transactions::FineBin>,
    /// Transits below the first bin.
    pub below: u64,
    /// Transits at or past the end of the last.
    pub above: u64,
    /// The longest, where the send times are known (TCP's bursts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<TransitPeak>,
}

impl TransitHistogram {
    /// Transits counted, in bins and out of them.
    pub fn population(&self) -> u64 {
        self.bins.iter().map(|b| b.count).sum::<u64>() + self.below + self.above
    }

    /// Histograms of the same binning merged (intervals into a test): counts added, the longest
    /// of their peaks kept. None when there are none.
    pub fn merged<'a>(each: impl Iterator<Item = &'a TransitHistogram>) -> Option<TransitHistogram> {
        let mut all: Option<TransitBins> = None;
        let mut peak: Option<TransitPeak> = None;
        for h in each {
            let bins = all.get_or_insert_with(|| TransitBins::new(h.spec));
            bins.absorb(h);
            peak = later_peak(peak, h.peak);
        }
        all.map(|b| TransitHistogram {
            peak,
            ..b.histogram()
        })
    }
}

/// The longer of two peaks.
fn later_peak(a: Option<TransitPeak>, b: Option<TransitPeak>) -> Option<TransitPeak> {
    match (a, b) {
        (Some(x), Some(y)) if y.transit_ms > x.transit_ms => Some(y),
        (Some(x), _) => Some(x),
        (None, y) => y,
    }
}

/// Transits being counted: a count per bin, grown as later bins are reached.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitBins {
    spec: BinSpec,
    counts: Vec<u64>,
    below: u64,
    above: u64,
    peak: Option<TransitPeak>,
}

impl TransitBins {
    /// None counted yet, binned by `spec`.
    pub fn new(spec: BinSpec) -> TransitBins {
        TransitBins {
            spec,
            counts: Vec::new(),
            below: 0,
            above: 0,
            peak: None,
        }
    }

    /// Counts a transit of `transit_s` seconds; `sent` (seconds and microseconds since the epoch,
    /// when known) marks it as the peak when it is the longest yet and above zero.
    pub fn add(&mut self, transit_s: f64, sent: Option<(i64, u32)>) {
        if let Some((sent_s, sent_us)) = sent.filter(|_| transit_s > 0.0) {
            let transit_ms = transit_s * 1e3;
            if self.peak.is_none_or(|p| transit_ms > p.transit_ms) {
                self.peak = Some(TransitPeak {
                    transit_ms,
                    sent_s,
                    sent_us,
                });
            }
        }
        let bin = self.spec.bin_of(transit_s);
        if bin < 0 {
            self.below += 1;
        } else if bin >= i64::from(self.spec.bins_used()) {
            self.above += 1;
        } else {
            let k = bin as usize;
            if k >= self.counts.len() {
                self.counts.resize(k + 1, 0);
            }
            self.counts[k] += 1;
        }
    }

    /// Adds a histogram's counts (of the same binning).
    fn absorb(&mut self, h: &TransitHistogram) {
        for b in &h.bins {
            let k = b.index.saturating_sub(1) as usize;
            if k >= self.counts.len() {
                self.counts.resize(k + 1, 0);
            }
            self.counts[k] += b.count;
        }
        self.below += h.below;
        self.above += h.above;
    }

    /// What was counted since the last take (or the start), then counted afresh.
    pub fn take(&mut self) -> TransitHistogram {
        let h = self.histogram();
        *self = TransitBins::new(self.spec);
        h
    }

    /// What was counted.
    pub fn histogram(&self) -> TransitHistogram {
        let bins = (self.counts.iter().enumerate())
            .filter(|(_, c)| **c > 0)
            .map(|(k, c)| crate::transactions::FineBin {
                index: k as u32 + 1,
                count: *c,
            })
            .collect();
        TransitHistogram {
            spec: self.spec,
            bins,
            below: self.below,
            above: self.above,
            peak: self.peak,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_iperf_2_reads_them() {
        assert_eq!(BinSpec::parse("").unwrap(), BinSpec::default());
        let s = BinSpec::parse("10u,500").unwrap();
        assert_eq!(
            (s.width, s.unit, s.bins, s.ci_lower_pct),
            (10, BinUnit::Micros, 500, 5.0)
        );
        let s = BinSpec::parse("2m,50,10,99.9").unwrap();
        assert_eq!((s.width, s.unit, s.bins), (2, BinUnit::Millis, 50));
        assert_eq!((s.ci_lower_pct, s.ci_upper_pct), (10.0, 99.9));
        // A bare width is seconds; a width alone names no count (iperf 2's head prints 0 bins and
        // it uses 1,000).
        let s = BinSpec::parse("1,1000").unwrap();
        assert_eq!((s.unit, s.width_ms()), (BinUnit::Seconds, 1000.0));
        let s = BinSpec::parse("100u").unwrap();
        assert_eq!((s.bins, s.bins_used()), (0, 1000));
        assert_eq!(BinSpec::parse("5u,0").unwrap().bins_used(), 1000);
        assert_eq!(BinSpec::default().width_ms(), 0.1);
        for bad in [
            "abc",
            "0,5",
            "-3u",
            "10u,x",
            "10u,5000000",
            "1,10,101",
            "1,10,5,z",
        ] {
            assert!(BinSpec::parse(bad).is_err(), "{bad}");
        }
        let e = BinSpec::parse("abc").unwrap_err().to_string();
        assert!(
            e.starts_with("--histograms: the bin width") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn transits_fall_in_iperf_2s_bins() {
        let mut b = TransitBins::new(BinSpec::parse("100u,10").unwrap());
        // 0.05 ms and a little below zero in bin 1; 0.1 ms in bin 2; 0.999 ms in bin 10; 1 ms
        // past the last; -0.2 ms below the first.
        for t_ms in [0.05, -0.05, 0.1, 0.999, 1.0, -0.2, 0.15] {
            b.add(t_ms / 1e3, None);
        }
        let h = b.take();
        let bins: Vec<(u32, u64)> = h.bins.iter().map(|b| (b.index, b.count)).collect();
        assert_eq!(bins, vec![(1, 2), (2, 2), (10, 1)]);
        assert_eq!((h.below, h.above, h.population(), h.peak), (1, 1, 7, None));
        assert_eq!(b.take().population(), 0, "a take starts afresh");
    }

    #[test]
    fn the_peak_is_the_longest_with_its_send_time_and_merges_keep_it() {
        let spec = BinSpec::default();
        let mut a = TransitBins::new(spec);
        a.add(0.002, Some((10, 5)));
        a.add(0.004, Some((11, 7)));
        a.add(0.003, Some((12, 9)));
        a.add(-0.5, Some((13, 0)));
        let mut b = TransitBins::new(spec);
        b.add(0.0035, Some((20, 1)));
        let (ha, hb) = (a.take(), b.take());
        assert_eq!(ha.peak.map(|p| (p.sent_s, p.sent_us)), Some((11, 7)));
        let m = TransitHistogram::merged([&ha, &hb].into_iter()).unwrap();
        assert_eq!((m.population(), m.below), (5, 1));
        assert_eq!(m.peak.map(|p| p.transit_ms), Some(4.0));
        let bins: Vec<(u32, u64)> = m.bins.iter().map(|b| (b.index, b.count)).collect();
        assert_eq!(bins, vec![(21, 1), (31, 1), (36, 1), (41, 1)]);
        assert!(TransitHistogram::merged(std::iter::empty()).is_none());
    }
}
