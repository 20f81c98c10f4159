//! iperf 2.1.8's histogram lines (histogram.c's `histogram_print`), one renderer for all of them:
//! a bounceback client's round trips (`BB8`), a server's TCP bursts (`F8`) and UDP datagrams
//! (`T8`) with `--histograms`. Each bin that holds any as `bin:count`, then the bins where the
//! running share first passes the lower bound, the upper bound and 99.7%, the outliers (past three
//! times the 10%-90% span beyond the 90% bin), and the counts out of bounds; a server's `F8` line
//! ends with the interval's longest transit and its burst's send time. The shares are computed in
//! single precision as iperf 2 computes them (18 of 20 is under 0.9 there).

use landspeed_core::transactions::FineBin;
use landspeed_core::transit_bins::TransitPeak;
use std::fmt::Write;

/// One histogram line's content.
#[derive(Debug, Clone, Copy)]
pub struct Pdf<'a> {
    /// iperf 2's name for it (`BB8`, `F8`, `T8`).
    pub name: &'a str,
    /// The whole test's (`(f)` after the name).
    pub last: bool,
    /// Each bin's width, in `width_unit`.
    pub width: u32,
    /// `ms` or `us` (iperf 2 names every other unit `us`).
    pub width_unit: &'a str,
    /// The bins that hold any, numbered from 1.
    pub bins: &'a [FineBin],
    /// Counted below the first bin.
    pub below: u64,
    /// Counted past the last.
    pub above: u64,
    /// How many bins there are (the bound named when a share is never passed).
    pub limit: u32,
    /// The lower and upper bounds, percent.
    pub ci_pct: (f64, f64),
    /// The longest, and when it was sent.
    pub peak: Option<TransitPeak>,
}

/// The bins where the running share first passes `lower`, `upper` and 99.7% (0 when never), and
/// the outliers.
fn marks(p: &Pdf, population: u64) -> (i64, i64, i64, u64) {
    let share = |running: u64| f64::from(running as f32 / population as f32);
    let (lower_pct, upper_pct) = p.ci_pct;
    let (mut running, mut lower, mut upper, mut upper3) = (0u64, 0i64, 0i64, 0i64);
    let (mut fence_lower, mut fence_upper, mut outside, mut outliers) = (0i64, 0i64, 0i64, 0u64);
    for b in p.bins {
        let ix = i64::from(b.index) - 1;
        running += b.count;
        let s = share(running);
        if lower == 0 && s > lower_pct / 100.0 {
            lower = ix + 1;
        }
        if s < 0.1 {
            fence_lower = ix + 1;
        }
        if s < 0.9 {
            fence_upper = ix + 1;
        } else if outside == 0 {
            outside = fence_upper + 3 * (fence_upper - fence_lower);
        } else if ix > outside {
            outliers += b.count;
        }
        if upper == 0 && s > upper_pct / 100.0 {
            upper = ix + 1;
        }
        if upper3 == 0 && s > 99.7 / 100.0 {
            upper3 = ix + 1;
        }
    }
    (lower, upper, upper3, outliers)
}

/// The line of histogram `p` of connection `number` over `start_s..end_s`.
pub fn line(number: u32, (start_s, end_s): (f64, f64), p: &Pdf) -> String {
    let population = p.bins.iter().map(|b| b.count).sum::<u64>() + p.below + p.above;
    let last = if p.last { "(f)" } else { "" };
    let mut t = format!(
        "[{number:>3}] {start_s:4.4}-{end_s:4.4} sec {}{last}-PDF: bin(w={}{}):cnt({population})=",
        p.name, p.width, p.width_unit
    );
    for b in p.bins {
        let _ = write!(t, "{}:{},", b.index, b.count);
    }
    t.pop();
    let (lower, upper, upper3, outliers) = marks(p, population);
    let (upper, upper3) = (nonzero(upper, p.limit), nonzero(upper3, p.limit));
    let (lo, hi) = p.ci_pct;
    let _ = if hi > 99.7 {
        write!(t, " ({lo:.2}/99.7/{hi:.2}/%={lower}/{upper3}/{upper}")
    } else {
        write!(t, " ({lo:.2}/{hi:.2}/99.7%={lower}/{upper}/{upper3}")
    };
    let _ = write!(t, ",Outliers={outliers},obl/obu={}/{})", p.below, p.above);
    if let Some(k) = p.peak.filter(|k| k.transit_ms > 0.0) {
        // iperf 2 prints the microseconds as a plain number after the point (5 µs is ".5").
        let _ = write!(t, " ({:.3} ms/{}.{})", k.transit_ms, k.sent_s, k.sent_us);
    }
    t + "\n"
}

/// `bin`, or the last bin when no share passed its mark.
fn nonzero(bin: i64, limit: u32) -> i64 {
    if bin == 0 {
        i64::from(limit)
    } else {
        bin
    }
}

/// A server's histogram of a stream's transits (`F8` over TCP, `T8` over UDP), as a [`Pdf`].
pub fn of_transits<'a>(
    h: &'a landspeed_core::transit_bins::TransitHistogram,
    udp: bool,
    last: bool,
) -> Pdf<'a> {
    named(h, if udp { "T8" } else { "F8" }, last)
}

/// A server's histogram of a UDP client's frames' latencies (iperf 2's `F8` under its `T8`), as a
/// [`Pdf`].
pub fn of_frames(h: &landspeed_core::transit_bins::TransitHistogram, last: bool) -> Pdf<'_> {
    named(h, "F8", last)
}

fn named<'a>(h: &'a landspeed_core::transit_bins::TransitHistogram, name: &'a str, last: bool) -> Pdf<'a> {
    let s = &h.spec;
    Pdf {
        name,
        last,
        width: s.width,
        width_unit: match s.unit {
            landspeed_core::transit_bins::BinUnit::Millis => "ms",
            _ => "us",
        },
        bins: &h.bins,
        below: h.below,
        above: h.above,
        limit: s.bins_used(),
        ci_pct: (s.ci_lower_pct, s.ci_upper_pct),
        peak: h.peak,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::transit_bins::{BinSpec, TransitHistogram};

    fn histogram(bins: &[(u32, u64)], peak: Option<(f64, i64, u32)>) -> TransitHistogram {
        TransitHistogram {
            spec: BinSpec::default(),
            bins: bins
                .iter()
                .map(|&(index, count)| FineBin { index, count })
                .collect(),
            below: 0,
            above: 0,
            peak: peak.map(|(transit_ms, sent_s, sent_us)| TransitPeak {
                transit_ms,
                sent_s,
                sent_us,
            }),
        }
    }

    #[test]
    fn a_servers_lines_are_iperf_2s() {
        // iperf 2.1.8's own server (`iperf -s -e --histograms -i 1`), its client with --trip-times.
        let h = histogram(
            &[(1, 91), (2, 1), (18, 5), (38, 2), (39, 1)],
            Some((3.824, 1796583181, 583493)),
        );
        assert_eq!(
            line(1, (0.0, 1.0), &of_transits(&h, false, false)),
            "[  1] 0.0000-1.0000 sec F8-PDF: bin(w=100us):cnt(100)=1:91,2:1,18:5,38:2,39:1 (5.00/95.00/99.7%=1/18/39,Outliers=0,obl/obu=0/0) (3.824 ms/1796583181.583493)\n"
        );
        let h = histogram(
            &[(1, 88), (3, 1), (8, 1), (18, 3), (38, 7)],
            Some((3.791, 1796583182, 783502)),
        );
        assert!(line(1, (1.0, 2.0), &of_transits(&h, false, false))
            .contains("=1:88,3:1,8:1,18:3,38:7 (5.00/95.00/99.7%=1/38/38,Outliers=7,obl/obu=0/0)"));
        let h = histogram(&[(1, 75), (2, 1)], Some((0.125, 1796583362, 53626)));
        assert_eq!(
            line(1, (0.0, 1.5005), &of_transits(&h, false, true)),
            "[  1] 0.0000-1.5005 sec F8(f)-PDF: bin(w=100us):cnt(76)=1:75,2:1 (5.00/95.00/99.7%=1/1/2,Outliers=0,obl/obu=0/0) (0.125 ms/1796583362.53626)\n"
        );
        let h = histogram(&[(1, 893)], None);
        assert_eq!(
            line(1, (0.0, 1.0), &of_transits(&h, true, false)),
            "[  1] 0.0000-1.0000 sec T8-PDF: bin(w=100us):cnt(893)=1:893 (5.00/95.00/99.7%=1/1/1,Outliers=0,obl/obu=0/0)\n"
        );
    }

    #[test]
    fn bounds_units_and_empty_intervals_are_iperf_2s() {
        let mut h = histogram(&[], None);
        h.spec = BinSpec::parse("2m,50,10,99.9").unwrap();
        assert!(line(1, (0.0, 1.0), &of_transits(&h, true, false))
            .ends_with("T8-PDF: bin(w=2ms):cnt(0) (10.00/99.7/99.90/%=0/50/50,Outliers=0,obl/obu=0/0)\n"));
        h.spec = BinSpec::parse("1,10").unwrap();
        h.below = 2;
        assert!(line(1, (0.0, 1.0), &of_transits(&h, false, true))
            .ends_with("F8(f)-PDF: bin(w=1us):cnt(2) (5.00/95.00/99.7%=0/10/10,Outliers=0,obl/obu=2/0)\n"));
    }
}
