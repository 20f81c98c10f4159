use super::*;
use std::time::Duration;

fn params() -> RpmParams {
    RpmParams::default()
}

#[test]
fn stability_is_the_deviation_of_the_last_mad_values_against_the_current_one() {
    // Fewer than MAD values: never stable.
    assert!(!steady(&[100.0, 100.0, 100.0], 4, 5.0));
    assert!(steady(&[100.0; 4], 4, 5.0));
    // 96, 98, 100, 102: mean 99, standard deviation √5 = 2.236; 5% of the current (102) is 5.1.
    assert!(steady(&[96.0, 98.0, 100.0, 102.0], 4, 5.0));
    // 80, 90, 100, 110: deviation √125 = 11.2 against 5.5.
    assert!(!steady(&[80.0, 90.0, 100.0, 110.0], 4, 5.0));
    // The tolerance is against the current value, not the mean: 100, 100, 100, 89.2 deviate by
    // 4.68, within 5% of their mean (4.87) but not of the current value (4.46).
    assert!(!steady(&[100.0, 100.0, 100.0, 89.2], 4, 5.0));
    assert!(steady(&[100.0, 100.0, 100.0, 89.2], 4, 5.3));
    // Only the last MAD count.
    assert!(steady(&[1.0, 500.0, 100.0, 100.0, 100.0, 100.0], 4, 5.0));
    assert!(!steady(&[0.0; 4], 4, 5.0), "a series of zeros is no measurement");
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

fn probes(foreign_ms: [f64; 3], self_ms: f64) -> (Vec<ForeignProbe>, Vec<SelfProbe>) {
    let foreign = (0..10)
        .map(|i| ForeignProbe {
            t_s: f64::from(i),
            tcp_ms: foreign_ms[0],
            tls_ms: Some(foreign_ms[1]),
            http_ms: foreign_ms[2],
        })
        .collect();
    let own = (0..10)
        .map(|i| SelfProbe {
            t_s: f64::from(i),
            http_ms: self_ms,
            tcp_rtt: false,
            conn_rtt_ms: None,
        })
        .collect();
    (foreign, own)
}

#[test]
fn draft_09_averages_the_foreign_and_the_loaded_responsiveness() {
    let (foreign, own) = probes([100.0, 100.0, 100.0], 300.0);
    let f = figures(&foreign, &own, &params()).unwrap();
    // -09: foreign 60 000/100 = 600, loaded 60 000/300 = 200; their mean is 400.
    assert!((f.rpm - 400.0).abs() < 1e-9, "{f:?}");
    assert_eq!((f.foreign_rpm, f.loaded_rpm), (Some(600.0), Some(200.0)));
    assert_eq!((f.foreign_probes, f.self_probes), (10, 10));
    assert_eq!(f.tls_ms, Some(100.0));
    // -03 (what goresponsiveness computes): 60 000 / (½·100 + ½·300) = 300.
    let old = RpmParams {
        draft: Draft::Draft03,
        ..params()
    };
    assert!((figures(&foreign, &own, &old).unwrap().rpm - 300.0).abs() < 1e-9);
    // Each foreign step weighs a third with TLS: (30 + 60 + 90)/3 = 60 ms → 1000; self 20 ms → 3000.
    let (foreign, own) = probes([30.0, 60.0, 90.0], 20.0);
    assert!((figures(&foreign, &own, &params()).unwrap().rpm - 2000.0).abs() < 1e-9);
    // Over plain HTTP, a half each for TCP and HTTP: (30 + 90)/2 = 60 ms again.
    let plain: Vec<ForeignProbe> = foreign
        .iter()
        .map(|p| ForeignProbe { tls_ms: None, ..*p })
        .collect();
    let f = figures(&plain, &own, &params()).unwrap();
    assert!((f.rpm - 2000.0).abs() < 1e-9, "{f:?}");
    assert!(f.tls_ms.is_none());
    assert!(figures(&foreign, &[], &params()).is_none());
}

#[test]
fn the_probes_take_at_most_their_share_of_the_capacity() {
    let p = params();
    // 1 Gbit/s: 5% is 50 Mbit/s, a pair 48 000 bits: 1041 pairs; MPS caps at 100.
    assert_eq!(p.probe_pairs_per_s(1e9), 100.0);
    // 10 Mbit/s: 500 kbit/s over 48 000 bits = 10.4 pairs a second.
    assert!((p.probe_pairs_per_s(10e6) - 500e3 / 48e3).abs() < 1e-9);
    // Nothing measured yet: one pair an interval, so that a slow path is still measured.
    assert_eq!(p.probe_pairs_per_s(0.0), 0.2);
}

/// Runs a ramp whose goodput is `per_conn` per connection up to `cap` connections, each interval's
/// responsiveness `rpm(i)`: the interval the goodput saturated at and the one it ended at.
fn run_ramp(p: RpmParams, cap: usize, rpm: impl Fn(usize) -> f64) -> (Ramp, usize, Option<usize>, usize) {
    let mut r = Ramp::new(p);
    let id = p.interval.as_secs_f64();
    let (mut conns, mut saturated) = (1usize, None);
    for i in 0..100 {
        let t_s = (i + 1) as f64 * id;
        if t_s > p.timeout.as_secs_f64() {
            return (r, conns, saturated, i);
        }
        let add = r.goodput(25e6 * conns.min(cap) as f64, conns, t_s);
        if r.saturated_at_s().is_some() && saturated.is_none() {
            saturated = Some(i);
        }
        if r.window_from_s(t_s).is_some() && r.responsiveness(rpm(i)) {
            return (r, conns, saturated, i);
        }
        conns += usize::from(add);
    }
    unreachable!()
}

#[test]
fn the_ramp_adds_a_connection_every_interval_and_saturates_on_the_goodputs_moving_averages() {
    let p = RpmParams {
        timeout: Duration::from_secs(1000),
        ..params()
    };
    let (r, conns, saturated, end) = run_ramp(p, 4, |_| 500.0);
    // Goodput 25, 50, 75, 100, 100...: averages over MAD = 4 intervals: 6.25, 18.75, 37.5, 62.5,
    // 81.25, 93.75, 100, 100, 100. At index 8 the last four (93.75, 100, 100, 100) deviate by 2.7,
    // within 5% of 100.
    assert_eq!(saturated, Some(8));
    // Responsiveness from index 9 on, stable after MAD values (9..=12).
    assert_eq!(end, 12);
    assert_eq!(conns, 13, "a connection every interval, saturation or not");
    assert!((r.throughput_bps() - 100e6).abs() < 1.0);
    let c = r.confidence();
    assert_eq!(
        (c.capacity, c.responsiveness),
        (Confidence::High, Confidence::High)
    );
    // Never past MNP; a fixed count never grows.
    let (_, conns, ..) = run_ramp(p, 64, |i| 100.0 * i as f64);
    assert_eq!(conns, 16);
    let fixed = RpmParams {
        fixed_connections: Some(4),
        ..p
    };
    let mut r = Ramp::new(fixed);
    assert!((0..20).all(|i| !r.goodput(1e6 * f64::from(i), 4, f64::from(i + 1) * 5.0)));
}

#[test]
fn the_responsiveness_window_is_the_last_mad_intervals_since_saturation() {
    let mut r = Ramp::new(RpmParams {
        timeout: Duration::from_secs(1000),
        ..params()
    });
    for i in 0..10 {
        r.goodput(100e6, 1, f64::from(i + 1) * 5.0);
    }
    // Constant goodput: averages 25, 50, 75, 100, 100, 100, 100 → stable at the 7th (35 s):
    // (75, 100, 100, 100) deviate by 10.8, over 5% of 100.
    assert_eq!(r.saturated_at_s(), Some(35.0));
    assert_eq!(
        r.window_from_s(35.0),
        None,
        "nothing measured after saturation yet"
    );
    assert_eq!(r.window_from_s(40.0), Some(35.0));
    // MAD intervals back (20 s), never before saturation.
    assert_eq!(r.window_from_s(60.0), Some(40.0));
}

#[test]
fn a_stage_out_of_time_is_low_or_medium_confidence_and_still_measured() {
    // 20 s at 5 s intervals: the goodput's stage ends at 10 s (half the time) after 2 intervals.
    let p = RpmParams {
        timeout: Duration::from_secs(20),
        ..params()
    };
    let (r, _, saturated, _) = run_ramp(p, 16, |i| 100.0 * i as f64);
    assert_eq!(saturated, Some(1));
    let c = r.confidence();
    assert_eq!((c.capacity, c.responsiveness), (Confidence::Low, Confidence::Low));
    // The figures still come from the responsiveness stage's window.
    assert_eq!(r.final_window_from_s(20.0), 10.0);
    // 60 s: the goodput still growing at 30 s (MAD intervals ran: Medium); the responsiveness
    // swinging (Medium after MAD values).
    let p = RpmParams {
        timeout: Duration::from_secs(60),
        ..params()
    };
    let (r, ..) = run_ramp(p, 16, |i| if i % 2 == 0 { 100.0 } else { 300.0 });
    let c = r.confidence();
    assert_eq!(
        (c.capacity, c.responsiveness),
        (Confidence::Medium, Confidence::Medium)
    );
    // A test that ends before any responsiveness interval: the last MAD intervals.
    let mut r = Ramp::new(params());
    r.goodput(1e6, 1, 5.0);
    assert_eq!(r.final_window_from_s(5.0), 0.0);
}

#[test]
fn both_spellings_of_the_configuration_parse_and_ours_names_our_paths() {
    let long = r#"{"version":1,"urls":{"small_https_download_url":"https://h/s","large_https_download_url":"https://h/l","https_upload_url":"https://h/u"}}"#;
    let short = r#"{"version":1,"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}"#;
    assert_eq!(RpmConfig::parse(long).unwrap(), RpmConfig::parse(short).unwrap());
    assert!(RpmConfig::parse(r#"{"version":1,"urls":{}}"#)
        .unwrap_err()
        .contains("small_download_url"));
    assert!(RpmConfig::parse("<html>").is_err());
    let c = RpmConfig::for_base("https://192.0.2.1:4043/");
    assert_eq!(c.urls.large_https_download_url, "https://192.0.2.1:4043/large");
    let v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    assert_eq!(v["urls"]["upload_url"], "https://192.0.2.1:4043/upload");
    assert_eq!(v["urls"]["https_upload_url"], "https://192.0.2.1:4043/upload");
    assert_eq!(RpmConfig::parse(&c.to_json()).unwrap(), c);
    // Plain HTTP: the draft's names alone (an `https_` name for an http URL would be wrong).
    let plain = RpmConfig::for_base("http://192.0.2.1:4043");
    let v: serde_json::Value = serde_json::from_str(&plain.to_json()).unwrap();
    let names: Vec<&String> = v["urls"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["large_download_url", "small_download_url", "upload_url"]);
    assert_eq!(RpmConfig::parse(&plain.to_json()).unwrap(), plain);
}

/// A direction of a report written before the window was kept (1 s intervals, ten of them), whose
/// early self probes are fast and late ones `self_ms`, with its figures computed.
fn old_direction(direction: RpmDirection, self_ms: f64, stable: bool, p: &RpmParams) -> RpmDirectionResult {
    let foreign: Vec<ForeignProbe> = (0..20)
        .map(|i| ForeignProbe {
            t_s: f64::from(i) * 0.5,
            tcp_ms: 100.0,
            tls_ms: None,
            http_ms: 100.0,
        })
        .collect();
    let self_probes: Vec<SelfProbe> = (0..20)
        .map(|i| SelfProbe {
            t_s: f64::from(i) * 0.5,
            http_ms: if i < 12 { 1.0 } else { self_ms },
            tcp_rtt: false,
            conn_rtt_ms: None,
        })
        .collect();
    let intervals = (1..=10)
        .map(|i| RpmInterval {
            t_s: f64::from(i),
            throughput_bps: 1e6,
            average_bps: 1e6,
            connections: 1,
            rpm: None,
        })
        .collect();
    let mut d = RpmDirectionResult {
        direction,
        throughput_bps: 1e6,
        connections: 1,
        stable,
        confidence: None,
        saturated_at_s: None,
        window_from_s: None,
        figures: None,
        error: None,
        intervals,
        foreign,
        self_probes,
    };
    let (f, s) = d.window(p);
    d.figures = figures(&f, &s, p);
    d
}

fn one_second() -> RpmParams {
    RpmParams {
        interval: Duration::from_secs(1),
        ..params()
    }
}

#[test]
fn both_directions_pool_each_ones_window_of_probes() {
    let p = one_second();
    // A stable direction's window is its last MAD intervals (t ≥ 6 s): self probes of 300 ms only.
    let down = old_direction(RpmDirection::Download, 300.0, true, &p);
    assert!((down.figures.unwrap().http_self_ms - 300.0).abs() < 1e-9);
    assert!(
        overall(std::slice::from_ref(&down), &p).is_none(),
        "one direction has no pool"
    );
    let up = old_direction(RpmDirection::Upload, 100.0, true, &p);
    let both = overall(&[down, up], &p).unwrap();
    // -09: foreign 60 000/100 = 600; loaded 60 000/mean(300, 100) = 300; their mean 450.
    assert!((both.rpm - 450.0).abs() < 1e-6, "{both:?}");
    assert_eq!(both.self_probes, 16);
    // A direction that kept its window takes the probes from it.
    let mut kept = old_direction(RpmDirection::Download, 300.0, false, &p);
    kept.window_from_s = Some(7.0);
    assert_eq!(kept.window(&p).1.len(), 6);
}

#[test]
fn a_saved_report_is_recomputed_under_another_drafts_formula_from_its_own_probes() {
    let p = one_second();
    let directions = vec![
        old_direction(RpmDirection::Download, 300.0, true, &p),
        old_direction(RpmDirection::Upload, 100.0, true, &p),
    ];
    let report = RpmReport {
        schema: RPM_SCHEMA.into(),
        config_url: String::new(),
        http: "HTTP/2".into(),
        params: p,
        overall: overall(&directions, &p),
        directions,
        parallel: true,
    };
    // -03: 60 000 / (½·100 + ½·200) = 400, from the same probes (the concurrent test's one score).
    let old = report.recomputed(Draft::Draft03);
    assert!((old.overall.unwrap().rpm - 400.0).abs() < 1e-6);
    // The sequential test reports its two scores apart, no pooled one.
    let sequential = RpmReport {
        parallel: false,
        ..report.clone()
    };
    assert_eq!(sequential.recomputed(Draft::Draft09).overall, None);
    assert_eq!(old.params.draft, Draft::Draft03);
    assert_eq!(old.recomputed(Draft::Draft09), report);
    // A report written before results named their draft was computed under -03's.
    let mut json = serde_json::to_value(&report).unwrap();
    json["params"].as_object_mut().unwrap().remove("draft");
    let read: RpmReport = serde_json::from_value(json).unwrap();
    assert_eq!(read.params.draft, Draft::Draft03);
}

#[test]
fn a_configuration_draft_09_voids_is_refused_with_its_reason() {
    let urls = |s: &str, l: &str, u: &str| {
        format!(r#""urls":{{"small_download_url":"{s}","large_download_url":"{l}","upload_url":"{u}"}}"#)
    };
    let good = urls("https://h:4043/s", "https://h:4043/l", "https://H:4043/u");
    let ok = RpmConfig::parse(&format!(
        r#"{{"version":1,{good},"extra":{{"x":1}},"test_endpoint":"e"}}"#
    ))
    .unwrap();
    assert_eq!(
        ok.test_endpoint.as_deref(),
        Some("e"),
        "unknown names ignored, the host's case too"
    );
    let refused = |text: String, why: &str| {
        let e = RpmConfig::parse(&text).unwrap_err();
        assert!(e.contains(why), "{text}: {e}");
    };
    refused(format!("{{{good}}}"), "no version");
    refused(format!(r#"{{"version":2,{good}}}"#), "version is 2");
    refused(
        format!(r#"{{"version":1,"version":1,{good}}}"#),
        "version more than once",
    );
    refused(
        format!(r#"{{"version":1,{good},"test_endpoint":"a","test_endpoint":"b"}}"#),
        "test_endpoint more than once",
    );
    refused(
        r#"{"version":1,"urls":{"upload_url":"https://h/u","upload_url":"https://h/u","small_download_url":"https://h/s","large_download_url":"https://h/l"}}"#.into(),
        "upload_url more than once",
    );
    refused(
        format!(
            r#"{{"version":1,{}}}"#,
            urls("https://a/s", "https://b/l", "https://a/u")
        ),
        "different hosts",
    );
    refused(
        format!(
            r#"{{"version":1,{}}}"#,
            urls("ftp://a/s", "https://a/l", "https://a/u")
        ),
        "not an http or https URL",
    );
    refused("[1,2]".into(), "not a JSON object");
    // IPv6 literals and ports: the host is what is compared.
    let v6 = urls(
        "https://[2001:db8::1]:4043/s",
        "https://[2001:db8::1]/l",
        "http://[2001:db8::1]:80/u",
    );
    assert!(RpmConfig::parse(&format!(r#"{{"version":1,{v6}}}"#)).is_ok());
}

#[test]
fn the_loaded_probes_connections_round_trip_is_trimmed_as_the_probes_are() {
    let (foreign, mut own) = probes([20.0, 20.0, 20.0], 250.0);
    assert_eq!(figures(&foreign, &own, &params()).unwrap().self_conn_rtt_ms, None);
    // 20 probes' connections at 1..=20 ms: the highest 5% (one) dropped, as the probes are.
    own = (1..=20)
        .map(|i| SelfProbe {
            t_s: f64::from(i),
            http_ms: 250.0,
            tcp_rtt: false,
            conn_rtt_ms: Some(f64::from(i)),
        })
        .collect();
    let f = figures(&foreign, &own, &params()).unwrap();
    assert_eq!(f.self_conn_rtt_ms, Some(10.0));
    // A probe whose connection's RTT was not read is left out of that mean, not of the RPM.
    own[0].conn_rtt_ms = None;
    let g = figures(&foreign, &own, &params()).unwrap();
    assert_eq!((g.self_probes, g.http_self_ms), (20, 250.0));
    assert_eq!(
        g.self_conn_rtt_ms,
        trimmed_mean(&(2..=20).map(f64::from).collect::<Vec<_>>(), 5.0)
    );
}
