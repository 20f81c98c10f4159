use super::*;

fn params() -> RpmParams {
    RpmParams::default()
}

#[test]
fn stability_needs_mad_averages_within_the_tolerance() {
    let mut s = Stability::new(4, 5.0);
    for v in [10.0, 50.0, 90.0, 100.0, 100.0, 100.0] {
        s.push(v);
        assert!(!s.stable(), "stable too early at {v}");
    }
    // Averages: 62.5, 85, 97.5, 100 → then 100, 100...
    for _ in 0..3 {
        s.push(100.0);
    }
    assert!(s.stable());
    assert_eq!(s.average(), Some(100.0));
    // A series swinging ±20% never is.
    let mut s = Stability::new(4, 5.0);
    for i in 0..40 {
        s.push(if i % 2 == 0 { 80.0 } else { 120.0 });
        if i > 10 {
            assert!(s.stable(), "the averages of an alternating series are flat");
        }
    }
    let mut s = Stability::new(4, 5.0);
    for i in 0..40 {
        s.push(100.0 * 1.1f64.powi(i));
    }
    assert!(!s.stable(), "a series growing 10% an interval is not stable");
}

#[test]
fn the_trimmed_mean_drops_the_highest_samples_only() {
    let v: Vec<f64> = (1..=20).map(f64::from).collect();
    // 5% of 20: the single highest goes.
    assert_eq!(trimmed_mean(&v, 5.0), Some(10.0));
    assert_eq!(trimmed_mean(&v, 0.0), Some(10.5));
    assert_eq!(trimmed_mean(&[7.0], 50.0), Some(7.0));
    assert_eq!(trimmed_mean(&[], 5.0), None);
    assert_eq!(percentile(&v, 90.0), Some(18.0));
    assert_eq!(percentile(&v, 100.0), Some(20.0));
}

#[test]
fn rpm_weighs_the_foreign_steps_and_the_self_probes_half_each() {
    let foreign: Vec<ForeignProbe> = (0..10)
        .map(|i| ForeignProbe {
            t_s: f64::from(i),
            tcp_ms: 100.0,
            tls_ms: Some(100.0),
            http_ms: 100.0,
        })
        .collect();
    let own: Vec<SelfProbe> = (0..10)
        .map(|i| SelfProbe {
            t_s: f64::from(i),
            http_ms: 300.0,
        })
        .collect();
    let f = figures(&foreign, &own, &params()).unwrap();
    // ½·100 + ½·300 = 200 ms a round trip: 300 a minute.
    assert!((f.rpm - 300.0).abs() < 1e-9, "{f:?}");
    assert_eq!((f.foreign_probes, f.self_probes), (10, 10));
    assert_eq!(f.tls_ms, Some(100.0));
    // Over plain HTTP the foreign part is the mean of the TCP and HTTP steps.
    let plain: Vec<ForeignProbe> = (foreign.iter())
        .map(|p| ForeignProbe {
            tls_ms: None,
            http_ms: 300.0,
            ..*p
        })
        .collect();
    let f = figures(&plain, &own, &params()).unwrap();
    assert!((f.rpm - 60_000.0 / 250.0).abs() < 1e-9, "{f:?}");
    assert!(figures(&foreign, &[], &params()).is_none());
}

#[test]
fn the_ramp_adds_connections_until_the_throughput_settles_then_waits_for_the_probes() {
    let mut r = Ramp::new(params());
    let mut conns = 1;
    // Throughput grows with connections until 4, then holds.
    for _ in 0..30 {
        let tput = 25.0e6 * conns.min(4) as f64;
        match r.interval(tput, Some(500.0), conns) {
            Step::AddConnection => conns += 1,
            Step::Continue => {}
            Step::Stable => break,
        }
    }
    // It keeps adding while the moving averages catch up with the plateau (the draft's ramp).
    assert!((4..=10).contains(&conns), "{conns} connections");
    assert!((r.throughput_bps() - 100e6).abs() < 1.0);
    // Never past the maximum.
    let mut r = Ramp::new(params());
    let mut n = 1;
    for i in 0..40 {
        if r.interval(i as f64 * 1e6, None, n) == Step::AddConnection {
            n += 1;
        }
    }
    assert_eq!(n, 16);
    // A fixed count: never more.
    let mut r = Ramp::new(RpmParams {
        fixed_connections: Some(4),
        ..params()
    });
    assert!((0..20).all(|i| r.interval(i as f64 * 1e6, None, 4) != Step::AddConnection));
}

#[test]
fn both_spellings_of_the_configuration_parse_and_ours_names_our_paths() {
    let long = r#"{"version":1,"urls":{"small_https_download_url":"https://h/s","large_https_download_url":"https://h/l","https_upload_url":"https://h/u"}}"#;
    let short = r#"{"version":1,"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}"#;
    assert_eq!(RpmConfig::parse(long).unwrap(), RpmConfig::parse(short).unwrap());
    assert!(RpmConfig::parse(r#"{"urls":{}}"#)
        .unwrap_err()
        .contains("small_https_download_url"));
    assert!(RpmConfig::parse("<html>").is_err());
    let c = RpmConfig::for_base("https://192.0.2.1:4043/");
    assert_eq!(c.urls.large_https_download_url, "https://192.0.2.1:4043/large");
    let v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    assert_eq!(v["urls"]["upload_url"], "https://192.0.2.1:4043/upload");
    assert_eq!(RpmConfig::parse(&c.to_json()).unwrap(), c);
}

#[test]
fn both_directions_pool_each_ones_window_of_probes() {
    let p = params();
    let dir = |direction, self_ms: f64, stable| {
        let foreign: Vec<ForeignProbe> = (0..20)
            .map(|i| ForeignProbe {
                t_s: f64::from(i) * 0.5,
                tcp_ms: 100.0,
                tls_ms: None,
                http_ms: 100.0,
            })
            .collect();
        // Early self probes are fast, late ones slow: a stable direction counts only its window.
        let self_probes: Vec<SelfProbe> = (0..20)
            .map(|i| SelfProbe {
                t_s: f64::from(i) * 0.5,
                http_ms: if i < 12 { 1.0 } else { self_ms },
            })
            .collect();
        let intervals = (1..=10)
            .map(|i| RpmInterval {
                t_s: f64::from(i),
                throughput_bps: 1e6,
                connections: 1,
                rpm: None,
            })
            .collect();
        let mut d = RpmDirectionResult {
            direction,
            throughput_bps: 1e6,
            connections: 1,
            stable,
            figures: None,
            error: None,
            intervals,
            foreign,
            self_probes,
        };
        let (f, s) = d.window(&p);
        d.figures = figures(&f, &s, &p);
        d
    };
    let down = dir(RpmDirection::Download, 300.0, true);
    // Stable: the window is the last 4 s (t ≥ 6 s): self probes of 300 ms only.
    assert!((down.figures.unwrap().http_self_ms - 300.0).abs() < 1e-9);
    assert!(
        overall(std::slice::from_ref(&down), &p).is_none(),
        "one direction has no pool"
    );
    let up = dir(RpmDirection::Upload, 100.0, true);
    let both = overall(&[down, up], &p).unwrap();
    // ½·100 + ½·mean(300, 100) = 150 ms: 400 a minute.
    assert!((both.rpm - 400.0).abs() < 1e-6, "{both:?}");
    assert_eq!(both.self_probes, 16);
}
