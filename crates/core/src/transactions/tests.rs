use super::*;

fn shape() -> TransactionShape {
    TransactionShape {
        kind: "test".into(),
        request_bytes: 100,
        response_bytes: 100,
        in_flight: 1,
        ..TransactionShape::default()
    }
}

/// Latencies of 1, 2, ..., 1000 µs, one a millisecond: worked figures (mean 500.5 µs, the sample
/// standard deviation of 1..n is sqrt(n(n+1)/12) = 288.819 µs, the median 500 µs).
#[test]
fn one_to_a_thousand_microseconds() {
    let mut log = TransactionLog::new(shape(), 0);
    for k in 1..=1000u64 {
        log.record(k * 1_000_000, k * 1_000);
    }
    let r = log.finish(1_000_000_000);
    assert_eq!(r.transactions, 1000);
    let l = &r.latency;
    assert_eq!(l.min_ms, Some(0.001));
    assert_eq!(l.max_ms, Some(1.0));
    assert!((l.mean_ms.unwrap() - 0.5005).abs() < 1e-9);
    assert!((l.stdev_ms.unwrap() - 0.288_819).abs() < 1e-6);
    let near = |got: Option<f64>, want: f64| (got.unwrap() - want).abs() <= want * 0.001;
    assert!(near(l.p50_ms, 0.5), "{:?}", l.p50_ms);
    assert!(near(l.p90_ms, 0.9), "{:?}", l.p90_ms);
    assert!(near(l.p99_ms, 0.99), "{:?}", l.p99_ms);
    assert!(near(l.p999_ms, 0.999), "{:?}", l.p999_ms);
    assert!((r.per_s - 1000.0).abs() < 1e-9);
    // One over the mean latency: 1 / 500.5 µs.
    assert!((r.per_s_busy - 1e6 / 500.5).abs() < 1e-6);
}

#[test]
fn the_histogram_doubles_from_a_microsecond_and_holds_every_transaction() {
    let mut log = TransactionLog::new(shape(), 0);
    for k in 1..=1000u64 {
        log.record(k, k * 1_000);
    }
    let r = log.finish(2_000);
    let bins: Vec<(f64, u64)> = r.histogram.iter().map(|b| (b.upper_ms, b.count)).collect();
    assert_eq!(bins[..4], [(0.001, 1), (0.002, 1), (0.004, 2), (0.008, 4)]);
    assert_eq!(*bins.last().unwrap(), (1.024, 488));
    assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), 1000);
}

#[test]
fn intervals_close_on_time_and_an_empty_one_is_kept() {
    let mut log = TransactionLog::new(shape(), 1_000_000_000);
    log.record(100_000_000, 2_000_000);
    log.record(900_000_000, 4_000_000);
    // Nothing in the second second; the third's transaction closes both.
    let closed = log.advance(2_500_000_000).len();
    assert_eq!(closed, 2);
    log.record(2_600_000_000, 1_000_000);
    let r = log.finish(3_200_000_000);
    let counts: Vec<u64> = r.intervals.iter().map(|i| i.transactions).collect();
    assert_eq!(counts, [2, 0, 1, 0]);
    assert_eq!(r.intervals[0].latency.mean_ms, Some(3.0));
    assert_eq!(r.intervals[1].latency, LatencySummary::default());
    assert!((r.intervals[3].end_s - 3.2).abs() < 1e-12);
    assert_eq!(r.latency.max_ms, Some(4.0));
    assert_eq!(
        r.latency.stdev_ms.map(|s| (s * 1e6).round() / 1e6),
        Some(1.527_525)
    );
}

#[test]
fn nothing_completed_is_no_figure() {
    let r = TransactionLog::new(shape(), 0).finish(1_000_000_000);
    assert_eq!(r.transactions, 0);
    assert_eq!(r.latency, LatencySummary::default());
    assert_eq!((r.per_s, r.per_s_busy), (0.0, 0.0));
    assert!(r.histogram.is_empty());
}

#[test]
fn one_transaction_has_no_deviation() {
    let mut log = TransactionLog::new(shape(), 0);
    log.record(10, 7_000);
    let r = log.finish(10);
    assert_eq!(r.latency.stdev_ms, None);
    assert_eq!(r.latency.p999_ms, Some(0.007));
}

#[test]
fn signed_moments_keep_negative_delays() {
    let mut m = SignedMoments::default();
    for ns in [-2_000_000i64, 1_000_000, 4_000_000] {
        m.add(ns);
    }
    let s = m.summary();
    assert_eq!((s.min_ms, s.mean_ms, s.max_ms), (-2.0, 1.0, 4.0));
    assert!((s.stdev_ms - 3.0).abs() < 1e-12);
    assert_eq!(m.count(), 3);
    let mut one = SignedMoments::default();
    one.add(-5);
    assert_eq!(one.summary().stdev_ms, 0.0);
    assert_eq!(one.summary().min_ms, one.summary().max_ms);
}

#[test]
fn fine_bins_are_iperf_2s_100_us_bins_counted_from_one() {
    let mut log = TransactionLog::new(shape(), 0);
    // 21 µs and 99.999 µs in bin 1, 100 µs in bin 2, 930 µs in bin 10, 10 s past the last.
    for (k, us) in [21_000u64, 99_999, 100_000, 930_000, 10_000_000_000]
        .iter()
        .enumerate()
    {
        log.record(k as u64 * 1_000_000, *us);
    }
    let fine = log.finish(10_000_000).fine.unwrap();
    assert_eq!(fine.width_us, 100);
    let bins: Vec<(u32, u64)> = fine.bins.iter().map(|b| (b.index, b.count)).collect();
    assert_eq!(bins, vec![(1, 2), (2, 1), (10, 1)]);
    assert_eq!(fine.above, 1);
}
