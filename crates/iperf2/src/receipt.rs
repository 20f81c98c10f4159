//! What a UDP server counts of an iperf 2 client's datagrams, as iperf 2.1.8's server counts them,
//! so that its report (`ServerReport`) says to the client what iperf 2's own server would: a
//! datagram numbered above the next expected counts the gap as lost, one numbered below counts as
//! out of order (and the final loss is the gaps less the datagrams out of order, never below zero);
//! the datagrams are the highest number seen; jitter is RFC 1889's smoothed mean deviation of the
//! change in transit (each datagram's arrival less its send time, the clocks' difference included);
//! the transit's least, most, sum, mean and M2 are Welford's, as iperf 2 keeps them.

use crate::report::{ServerReport, Transit};
use crate::udp::Datagram;
use std::time::Duration;

/// The flags of the report iperf 2.1.8's server sends (`VERSION1 | SEQNO64B`); with `-e`, or to a
/// client sending trip times, `EXTEND` too ([`REPORT_EXTEND`]), which makes iperf 2's client print
/// the report with its `-e` columns (its transit, PPS and net power).
pub const REPORT_FLAGS: u32 = 0x8800_0000;
/// See [`REPORT_FLAGS`].
pub const REPORT_EXTEND: u32 = 0x4000_0000;

/// A test's datagrams so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Receipt {
    /// The highest sequence number seen.
    pub highest: u64,
    /// Bytes of the datagrams counted (whole datagrams, prefix and header included).
    pub bytes: u64,
    /// Datagrams counted.
    pub received: u64,
    /// Sequence gaps seen.
    pub gaps: u64,
    /// Datagrams below the next expected number.
    pub out_of_order: u64,
    /// Jitter, seconds.
    pub jitter_s: f64,
    last_transit_s: f64,
    first_arrival_s: Option<f64>,
    last_arrival_s: f64,
    /// Where the clock starts when not at the first datagram (`start_at`).
    zero_s: Option<f64>,
    transit: Welford,
    /// Since the last [`Receipt::take_interval`]: the transits, and the datagrams with the sum of
    /// their gaps from the one before (iperf 2's `cntIPG` and `IPGsum`).
    interval_transit: Welford,
    interval_datagrams: u64,
    interval_gaps_s: f64,
    /// The transits since the last [`Receipt::take_bins`] in bins, when they are binned
    /// ([`Receipt::bin_transits`]).
    bins: Option<landspeed_core::transit_bins::TransitBins>,
}

/// One-way transit (arrival less send time: the two clocks' offset included) over a set of
/// datagrams, and their pace, as iperf 2's `-e` receiver prints them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Arrivals {
    /// Datagrams counted.
    pub datagrams: u64,
    /// Transit mean, least, most and standard deviation (sample, n − 1), seconds.
    pub mean_s: f64,
    /// Least.
    pub min_s: f64,
    /// Most.
    pub max_s: f64,
    /// Standard deviation.
    pub stddev_s: f64,
    /// The datagrams over the sum of their arrival gaps, a second (iperf 2's PPS).
    pub per_s: f64,
}

/// The running least, most, sum, mean and M2 of a series, iperf 2's way.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Welford {
    count: u32,
    min: f64,
    max: f64,
    sum: f64,
    mean: f64,
    m2: f64,
    /// The last value's difference from the mean before it.
    last_change: f64,
}

impl Welford {
    fn add(&mut self, v: f64) {
        self.count += 1;
        if self.count == 1 {
            *self = Welford {
                count: 1,
                min: v,
                max: v,
                sum: v,
                mean: v,
                m2: 0.0,
                last_change: v,
            };
            return;
        }
        self.sum += v;
        self.last_change = v - self.mean;
        self.mean += self.last_change / f64::from(self.count);
        self.m2 += self.last_change * (v - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

fn arrivals(t: &Welford, datagrams: u64, gaps_s: f64) -> Arrivals {
    Arrivals {
        datagrams,
        mean_s: t.mean,
        min_s: t.min,
        max_s: t.max,
        stddev_s: if t.count < 2 {
            0.0
        } else {
            (t.m2 / f64::from(t.count - 1)).sqrt()
        },
        per_s: if gaps_s > 0.0 {
            datagrams as f64 / gaps_s
        } else {
            0.0
        },
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

impl Receipt {
    /// Counts datagram `d` of `len` bytes that arrived at `arrival_s` (seconds since the Unix epoch
    /// on this host's clock). The client's end (its negated next number) counts as that datagram,
    /// as iperf 2's server counts the first of them; the caller counts no repeat.
    pub fn datagram(&mut self, d: &Datagram, len: usize, arrival_s: f64) {
        if d.seq == 0 {
            return;
        }
        let seq = d.seq.unsigned_abs();
        self.bytes += len as u64;
        self.received += 1;
        if seq < self.highest + 1 {
            self.out_of_order += 1;
        } else if seq > self.highest + 1 {
            self.gaps += seq - self.highest - 1;
        }
        self.highest = self.highest.max(seq);
        let sent_s = f64::from(d.sent_s) + f64::from(d.sent_us) / 1e6;
        let transit = arrival_s - sent_s;
        // The clock's span and pace from its zero: a datagram before it counts as at it.
        let arrival_s = arrival_s.max(self.zero_s.unwrap_or(f64::MIN));
        self.jitter_s += ((transit - self.last_transit_s).abs() - self.jitter_s) / 16.0;
        self.last_transit_s = transit;
        self.transit.add(transit);
        self.interval_transit.add(transit);
        if let Some(b) = self.bins.as_mut() {
            b.add(transit, None);
        }
        self.interval_datagrams += 1;
        if self.first_arrival_s.is_some() {
            self.interval_gaps_s += arrival_s - self.last_arrival_s;
        }
        self.first_arrival_s.get_or_insert(arrival_s);
        self.last_arrival_s = arrival_s;
    }

    /// Bins each transit from now on by `spec` (iperf 2's `--histograms`, which bins a UDP
    /// client's datagrams when it sends trip times: its `T8` lines, with no send time kept).
    pub fn bin_transits(&mut self, spec: landspeed_core::transit_bins::BinSpec) {
        self.bins = Some(landspeed_core::transit_bins::TransitBins::new(spec));
    }

    /// Whether the transits are binned.
    pub fn binned(&self) -> bool {
        self.bins.is_some()
    }

    /// The transits binned since the last call (none when not binned), then counted afresh.
    pub fn take_bins(&mut self) -> Option<landspeed_core::transit_bins::TransitHistogram> {
        self.bins.as_mut().map(|b| b.take())
    }

    /// The transit and pace since the last call (or the first datagram), then counted afresh: an
    /// interval's, as iperf 2's receiver resets them each interval.
    pub fn take_interval(&mut self) -> Arrivals {
        let a = arrivals(
            &self.interval_transit,
            self.interval_datagrams,
            self.interval_gaps_s,
        );
        self.interval_transit = Welford::default();
        self.interval_datagrams = 0;
        self.interval_gaps_s = 0.0;
        a
    }

    /// The whole test's transit and pace (the datagrams over the span from the first arrival to
    /// the last).
    pub fn arrivals(&self) -> Arrivals {
        arrivals(&self.transit, self.received, self.span_s())
    }

    /// Datagrams lost: the gaps less those that came out of order, never below zero.
    pub fn lost(&self) -> u64 {
        self.gaps.saturating_sub(self.out_of_order)
    }

    /// Starts the clock at `zero_s` (the arrival clock's seconds) rather than at the first
    /// datagram: a `--txstart-time` client's scheduled start, as iperf 2's server starts its clock
    /// there (the datagram such a client sends before its wait counts, as if it came then).
    pub fn start_at(&mut self, zero_s: f64) {
        self.zero_s = Some(zero_s);
    }

    /// Where the clock starts (the arrival clock's seconds): `start_at`'s time, else the first
    /// datagram's arrival, if one has come.
    pub fn first_arrival_s(&self) -> Option<f64> {
        self.zero_s.or(self.first_arrival_s)
    }

    /// From where the clock starts to the last datagram's arrival.
    pub fn span_s(&self) -> f64 {
        self.first_arrival_s
            .map_or(0.0, |f| self.last_arrival_s - self.zero_s.unwrap_or(f))
    }

    /// The report iperf 2's server would send for these datagrams; `extend`: flagged for iperf 2's
    /// client to print with its `-e` columns (its server does so with `-e`, or to a client sending
    /// trip times). The transit fields are filled either way, as iperf 2.1.8 fills them.
    pub fn report(&self, extend: bool) -> ServerReport {
        let t = &self.transit;
        let span = self.span_s();
        ServerReport {
            flags: REPORT_FLAGS | if extend { REPORT_EXTEND } else { 0 },
            bytes: self.bytes,
            duration: secs(span),
            lost: self.lost(),
            out_of_order: self.out_of_order,
            datagrams: self.highest,
            jitter: secs(self.jitter_s),
            transit: Transit {
                min: secs(t.min),
                max: secs(t.max),
                sum: secs(t.sum),
                mean: secs(t.mean),
                m2_us2: t.m2 * 1e12,
                last_change_us: (t.last_change * 1e6) as i64,
                count: t.count,
            },
            rate_count: if span > 0.0 {
                (self.highest as f64 / span) as u32
            } else {
                0
            },
            rate_span_s: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(seq: i64, sent_ms: u64) -> Datagram {
        Datagram {
            seq,
            sent_s: (sent_ms / 1000) as u32,
            sent_us: (sent_ms % 1000 * 1000) as u32,
        }
    }

    #[test]
    fn gaps_reordering_and_the_end_count_as_iperf2_counts_them() {
        let mut r = Receipt::default();
        // 1, 2, 5 (3 and 4 missing), 3 late, 6; then the end (-7), counted as datagram 7.
        for (seq, sent, at) in [
            (1, 0, 10),
            (2, 10, 20),
            (5, 40, 50),
            (3, 20, 55),
            (6, 50, 60),
            (-7, 60, 70),
        ] {
            r.datagram(&d(seq, 1_000_000 + sent), 1000, 1000.0 + at as f64 / 1000.0);
        }
        assert_eq!(
            (r.received, r.highest, r.gaps, r.out_of_order, r.lost()),
            (6, 7, 2, 1, 1)
        );
        assert_eq!(r.bytes, 6000);
        let rep = r.report(true);
        assert_eq!((rep.datagrams, rep.lost, rep.out_of_order), (7, 1, 1));
        assert_eq!(rep.duration, Duration::from_millis(60));
        // Transits 10, 10, 10, 35, 10, 10 ms: least 10, most 35, mean 14.17.
        assert_eq!(rep.transit.min, Duration::from_millis(10));
        assert_eq!(rep.transit.max, Duration::from_millis(35));
        assert!((rep.transit.mean.as_secs_f64() - 0.085 / 6.0).abs() < 1e-9);
        assert_eq!(rep.transit.count, 6);
        // M2 of 10,10,10,35,10,10 ms: 5 × (25/6)² + (125/6)² = 520.83 ms² = 5.2083e8 µs².
        assert!(
            (rep.transit.m2_us2 - 3125.0 / 6.0 * 1e6).abs() < 10.0,
            "{}",
            rep.transit.m2_us2
        );
    }

    #[test]
    fn a_scheduled_start_is_the_clocks_zero_and_the_datagram_before_it_counts_there() {
        let mut r = Receipt::default();
        // The clock started at 1002.0 s; then counted, datagram 1 that came at 1000.0 s (before
        // the wait), and datagrams 2 and 3 at 1002.1 s and 1003.0 s, each 1 ms in transit.
        r.start_at(1002.0);
        r.datagram(&d(1, 999_999), 100, 1000.0);
        r.datagram(&d(2, 1_002_099), 100, 1002.1);
        r.datagram(&d(3, 1_002_999), 100, 1003.0);
        assert_eq!(r.first_arrival_s(), Some(1002.0));
        assert!((r.span_s() - 1.0).abs() < 1e-9, "{}", r.span_s());
        assert_eq!((r.received, r.lost()), (3, 0));
        // Its transit is its own: the jitter sees no 2 s jump (what it holds is the first
        // transit's step from zero, decayed).
        assert!(r.jitter_s < 1e-4, "{}", r.jitter_s);
        // The pace: 3 datagrams over the gaps from the zero (0.1 s and 0.9 s).
        let a = r.take_interval();
        assert!((a.per_s - 3.0).abs() < 1e-9, "{}", a.per_s);
    }

    #[test]
    fn each_interval_counts_its_own_transit_and_pace() {
        let mut r = Receipt::default();
        // Sent every 10 ms; transits 1, 3, 2 ms, then (a new interval) 4 and 6 ms.
        let transits = [1.0, 3.0, 2.0, 4.0, 6.0];
        let mut first = None;
        for (k, t) in transits.iter().enumerate() {
            let sent_ms = 1_000_000 + k as u64 * 10;
            r.datagram(&d(k as i64 + 1, sent_ms), 100, (sent_ms as f64 + t) / 1000.0);
            if k == 2 {
                first = Some(r.take_interval());
            }
        }
        let a = first.unwrap();
        assert_eq!(a.datagrams, 3);
        assert!((a.mean_s - 0.002).abs() < 1e-9 && (a.min_s - 0.001).abs() < 1e-9);
        assert!((a.max_s - 0.003).abs() < 1e-9 && (a.stddev_s - 0.001).abs() < 1e-9);
        // Gaps 12 and 9 ms after the first arrival: 3 datagrams over 21 ms.
        assert!((a.per_s - 3.0 / 0.021).abs() < 1e-6, "{}", a.per_s);
        let b = r.take_interval();
        assert_eq!(b.datagrams, 2);
        assert!((b.mean_s - 0.005).abs() < 1e-9 && (b.min_s - 0.004).abs() < 1e-9);
        // Gaps 12 and 12 ms (from the last arrival of the interval before).
        assert!((b.per_s - 2.0 / 0.024).abs() < 1e-6, "{}", b.per_s);
        let all = r.arrivals();
        assert_eq!(all.datagrams, 5);
        assert!((all.max_s - 0.006).abs() < 1e-9 && (all.mean_s - 0.0032).abs() < 1e-9);
    }

    #[test]
    fn jitter_is_the_smoothed_change_in_transit() {
        let mut r = Receipt::default();
        // Transit alternates 10 and 20 ms: each change is 10 ms; the first is from 0 (iperf 2
        // starts from a transit of zero).
        let mut want = 0.0;
        let mut last = 0.0;
        for k in 0..40u64 {
            let transit = if k % 2 == 0 { 0.010 } else { 0.020 };
            r.datagram(
                &d(k as i64 + 1, 1_000_000 + k * 100),
                100,
                1000.0 + k as f64 * 0.1 + transit,
            );
            want += ((transit - last).abs() - want) / 16.0;
            last = transit;
        }
        assert!((r.jitter_s - want).abs() < 1e-9);
        assert!((r.jitter_s - 0.010).abs() < 0.002, "{}", r.jitter_s);
    }

    #[test]
    fn the_report_reads_back_as_written() {
        let mut r = Receipt::default();
        for k in 1..=104 {
            r.datagram(
                &d(k, 1_000_000 + k as u64 * 7),
                1000,
                1000.0 + k as f64 * 0.007 + 0.0001,
            );
        }
        let rep = r.report(true);
        // On the wire times are whole microseconds: what is read back writes the same bytes.
        let wire = rep.encode();
        assert_eq!(ServerReport::parse(&wire).unwrap().encode(), wire);
        assert_eq!((rep.datagrams, rep.lost, rep.bytes), (104, 0, 104_000));
    }
}
