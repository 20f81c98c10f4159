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

#[test]
fn connections_pool_into_one_report_that_keeps_each_ones_own() {
    let shape = TransactionShape::default();
    let (mut a, mut b) = (
        TransactionLog::new(shape.clone(), 1_000_000_000),
        TransactionLog::new(shape, 1_000_000_000),
    );
    // a: 100 µs and 300 µs in the first second; b: 200 µs in the first, 1 ms in the second.
    a.record(100_000_000, 100_000);
    a.record(200_000_000, 300_000);
    b.record(300_000_000, 200_000);
    b.record(1_500_000_000, 1_000_000);
    let r = pooled(vec![a, b], 2_000_000_000);
    assert_eq!(r.transactions, 4);
    assert_eq!(r.connections.len(), 2);
    assert_eq!(r.connections[0].transactions, 2);
    assert_eq!(r.connections[1].transactions, 2);
    assert_eq!(r.latency.min_ms, Some(0.1));
    assert_eq!(r.latency.max_ms, Some(1.0));
    assert!((r.latency.mean_ms.unwrap() - 0.4).abs() < 1e-9);
    // The whole test's percentiles come from the histograms added: the median is 200 or 300 µs.
    let p50 = r.latency.p50_ms.unwrap();
    assert!((0.199..=0.301).contains(&p50), "{p50}");
    // Each interval: every connection's count and exact extremes; no percentiles pooled.
    assert_eq!(r.intervals.len(), 2);
    assert_eq!(r.intervals[0].transactions, 3);
    assert_eq!(r.intervals[0].latency.max_ms, Some(0.3));
    assert_eq!(r.intervals[0].latency.p50_ms, None);
    assert_eq!(r.intervals[1].transactions, 1);
    assert_eq!((r.intervals[1].start_s, r.intervals[1].end_s), (1.0, 2.0));
    // iperf 2's fine bins: 100 µs wide, every transaction's.
    let fine = r.fine.unwrap();
    assert_eq!(fine.bins.iter().map(|b| b.count).sum::<u64>(), 4);
    assert!((r.per_s - 2.0).abs() < 1e-9);
}

#[test]
fn one_connection_pools_to_its_own_report() {
    let mut a = TransactionLog::new(TransactionShape::default(), 0);
    a.record(10, 50_000);
    let r = pooled(vec![a], 1_000);
    assert_eq!(r.transactions, 1);
    assert!(r.connections.is_empty());
    assert_eq!(pooled(vec![], 1_000).transactions, 0);
}

#[test]
fn live_intervals_pool_to_the_figures_of_all_their_latencies() {
    // Two connections' intervals of one second: 1 and 3 ms; 2, 4 and 6 ms. All five: mean 3.2 ms,
    // sample deviation sqrt(14.8 / 4) = 1.9235 ms.
    let log = |ms: &[u64]| {
        let mut l = TransactionLog::new(shape(), 1_000_000_000);
        for (k, m) in ms.iter().enumerate() {
            l.record(k as u64 + 1, m * 1_000_000);
        }
        l.finish(1_000_000_000).intervals[0].clone()
    };
    let p = pool_intervals(&[log(&[1, 3]), log(&[2, 4, 6])]);
    assert_eq!(p.transactions, 5);
    assert_eq!((p.start_s, p.end_s), (0.0, 1.0));
    assert_eq!((p.latency.min_ms, p.latency.max_ms), (Some(1.0), Some(6.0)));
    assert!((p.latency.mean_ms.unwrap() - 3.2).abs() < 1e-9);
    assert!((p.latency.stdev_ms.unwrap() - (14.8f64 / 4.0).sqrt()).abs() < 1e-9);
    assert_eq!(p.latency.p50_ms, None);
    // An interval with nothing in it adds its time only.
    let empty = TransactionInterval {
        start_s: 0.0,
        end_s: 1.0,
        ..Default::default()
    };
    assert_eq!(pool_intervals(&[empty, log(&[5])]).latency.mean_ms, Some(5.0));
}
