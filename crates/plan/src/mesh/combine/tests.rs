use super::*;
use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::EndpointReport;
use landspeed_core::result::IntervalResult;

/// A result that started at `start` (sending host's clock) with 1 s intervals of these byte counts.
fn result(start: f64, per_s: &[u64]) -> RunResult {
    let spec = TestSpec::default();
    let e = EndpointReport::default();
    let mut r = assemble(&Inputs {
        spec: &spec,
        context: RunContext::default(),
        client: &e,
        server: &e,
        client_samples: &[],
        server_samples: &[],
    });
    r.started_unix_s = start;
    let total: u64 = per_s.iter().sum();
    r.summary.bytes_sent = total;
    r.summary.bytes_received = total;
    r.summary.duration_s = per_s.len() as f64;
    r.intervals = per_s
        .iter()
        .enumerate()
        .map(|(i, &b)| IntervalResult {
            index: i as u32,
            start_s: i as f64,
            end_s: i as f64 + 1.0,
            bytes: b,
            throughput_bps: b as f64 * 8.0,
            omitted: false,
            streams: vec![],
            probe_rtt: None,
        })
        .collect();
    r
}

fn planned(index: usize, from: &str, to: &str) -> PlannedTest {
    PlannedTest {
        index,
        from: from.into(),
        to: to.into(),
        spec: TestSpec::default().validated().unwrap(),
        multicast: None,
    }
}

fn host(name: &str) -> HostInfo {
    HostInfo {
        name: name.into(),
        address: format!("{name}.example"),
        software: None,
        clock: None,
        error: None,
    }
}

#[test]
fn per_host_sums_equal_the_tests_and_intervals_line_up_on_one_clock() {
    let t0 = 1000.0;
    // a -> b started on time by a's clock, which is 250 ms ahead of the controller's; c -> b started
    // 0.5 s late on a clock that agrees with the controller.
    let outcomes = vec![
        TestOutcome {
            test: planned(0, "a", "b"),
            result: Ok(result(1000.25, &[100, 200, 300])),
            from_offset_ns: 250_000_000,
            run_id: Some(7),
        },
        TestOutcome {
            test: planned(1, "c", "b"),
            result: Ok(result(1000.5, &[1000, 1000])),
            from_offset_ns: 0,
            run_id: None,
        },
        TestOutcome {
            test: planned(2, "a", "d"),
            result: Err("host d: connection refused".into()),
            from_offset_ns: 0,
            run_id: None,
        },
    ];
    let r = combine(
        "t",
        true,
        t0,
        vec![host("a"), host("b"), host("c"), host("d")],
        &outcomes,
        1.0,
    );
    assert_eq!(r.tests[0].start_offset_ms, Some(0.0));
    assert!((r.tests[1].start_offset_ms.unwrap() - 500.0).abs() < 1e-6);
    assert_eq!(r.tests[2].status, "failed");
    assert_eq!(r.tests[2].error.as_deref(), Some("host d: connection refused"));
    assert_eq!(r.aggregate.tests_ok, 2);
    assert_eq!(r.aggregate.tests_failed, 1);
    assert_eq!(r.aggregate.bytes_received, 2600);
    assert!((r.aggregate.start_spread_ms.unwrap() - 500.0).abs() < 1e-6);
    assert!((r.aggregate.span_s - 3.0).abs() < 1e-9);

    let by = |n: &str| r.per_host.iter().find(|h| h.name == n).unwrap().clone();
    assert_eq!(by("a").bytes_out, 600);
    assert_eq!(by("a").tests_failed, 1);
    assert_eq!(by("b").bytes_in, 2600);
    assert_eq!(by("c").bytes_out, 2000);
    assert_eq!(by("d").bytes_in, 0);
    let out: u64 = r.per_host.iter().map(|h| h.bytes_out).sum();
    let inn: u64 = r.per_host.iter().map(|h| h.bytes_in).sum();
    assert_eq!((out, inn), (2600, 2600));
    // b received for 3 s in all: 2600 B over [0, 3).
    assert!((by("b").in_bps - 2600.0 * 8.0 / 3.0).abs() < 1e-6);

    // Common intervals: c's seconds straddle the boundaries and are split by overlap.
    assert_eq!(r.intervals.len(), 3);
    assert_eq!(r.intervals[0].tests, vec![100, 500, 0]);
    assert_eq!(r.intervals[1].tests, vec![200, 1000, 0]);
    assert_eq!(r.intervals[2].tests, vec![300, 500, 0]);
    let sum: u64 = r.intervals.iter().map(|i| i.bytes).sum();
    assert_eq!(sum, 2600);
}

#[test]
fn a_plan_where_nothing_ran_reports_zeros() {
    let outcomes = vec![TestOutcome {
        test: planned(0, "a", "b"),
        result: Err("down".into()),
        from_offset_ns: 0,
        run_id: None,
    }];
    let r = combine("t", false, 5.0, vec![host("a"), host("b")], &outcomes, 1.0);
    assert_eq!(r.aggregate.bytes_received, 0);
    assert_eq!(r.aggregate.throughput_bps, 0.0);
    assert!(r.intervals.is_empty());
    assert_eq!(r.aggregate.start_spread_ms, None);
}

#[test]
fn spreading_keeps_every_byte() {
    let mut bins = vec![0u64; 4];
    spread(&mut bins, 0.0, 1.0, 0.3, 2.7, 1001);
    assert_eq!(bins.iter().sum::<u64>(), 1001);
    assert_eq!(bins[3], 0);
    assert!(bins[1] > bins[0] && bins[1] > bins[2]);
    // Bytes beyond the last bin land in it.
    let mut bins = vec![0u64; 2];
    spread(&mut bins, 0.0, 1.0, 2.01, 2.05, 77);
    assert_eq!(bins, vec![0, 77]);
}

#[test]
fn a_sliver_at_the_end_is_folded_into_the_last_interval() {
    // Started 20 ms late on the common clock, ran 2 whole seconds.
    let outcomes = vec![TestOutcome {
        test: planned(0, "a", "b"),
        result: Ok(result(10.02, &[500, 500])),
        from_offset_ns: 0,
        run_id: None,
    }];
    let r = combine("t", true, 10.0, vec![host("a"), host("b")], &outcomes, 1.0);
    assert_eq!(r.intervals.len(), 2);
    assert!((r.intervals[1].end_s - 2.02).abs() < 1e-9);
    assert_eq!(r.intervals.iter().map(|i| i.bytes).sum::<u64>(), 1000);
}
