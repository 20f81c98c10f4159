//! OpenMetrics for Prometheus, checked by a real Prometheus (Debian's `prometheus`, installed by .ci/run):
//! `serve --metrics` and the exporter's `/probe` (through the blackbox relabelling) are scraped with a
//! throwaway configuration and data directory, and the series are queried through Prometheus's HTTP API
//! until they appear with the right values (bounded wait); every query of the Grafana dashboard in
//! contrib/grafana must return data. The expositions are also checked by a strict parser here, and
//! the HTTP side against bad queries and a flood of slow and garbage connections. Without the
//! `prometheus` binary the Prometheus test skips, unless CI is set, where it fails.

use crate::common;

use common::{bin, free_port, wait_until};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A child process killed when the guard drops, also when the test fails.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts landspeed with `args` and reads its first `n` lines on stdout.
fn start(args: &[&str], n: usize) -> (Proc, Vec<String>) {
    let mut c = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn landspeed");
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let lines: Vec<String> = (0..n)
        .map(|_| {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line
        })
        .collect();
    assert!(
        lines.iter().all(|l| !l.is_empty()),
        "landspeed {args:?} said {lines:?}"
    );
    (Proc(c), lines)
}

/// The port of the first `HOST:PORT` in a line such as "... listening on 0.0.0.0:5201, [::]:5201"
/// or "... on http://127.0.0.1:9571/probe".
fn port_in(line: &str) -> u16 {
    let addr = line
        .split_whitespace()
        .find(|w| {
            w.contains(':')
                && w.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == '[' || c == 'h')
        })
        .unwrap();
    let addr = addr.trim_start_matches("http://").trim_end_matches([',', ';']);
    let addr = addr.split('/').next().unwrap();
    addr.rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no port in {line}"))
}

/// The metrics tests load the loopback with connections: one at a time, so that the ports they pick
/// for Prometheus are not taken by another test's connections.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    common::take(&ONE_AT_A_TIME)
}

/// `landspeed serve --metrics` on free ports: the process, its test port and its metrics port.
fn serve_with_metrics() -> (Proc, u16, u16) {
    let (p, lines) = start(
        &[
            "serve",
            "-p",
            "0",
            "--bind",
            "127.0.0.1",
            "--metrics",
            "127.0.0.1:0",
        ],
        2,
    );
    (p, port_in(&lines[1]), port_in(&lines[0]))
}

/// `landspeed exporter` on a free port with probes of at most 5 s: the process and its port.
fn exporter(extra: &[&str]) -> (Proc, u16) {
    let mut args = vec!["exporter", "--listen", "127.0.0.1:0", "--max-time", "5s"];
    args.extend_from_slice(extra);
    let (p, lines) = start(&args, 1);
    (p, port_in(&lines[0]))
}

/// GET http://127.0.0.1:port/path_and_query: (status, headers, body).
fn get(port: u16, path: &str) -> (u16, String, String) {
    try_get(port, path).unwrap()
}

/// `get`, with a refused or reset connection as an error (a server at its connection cap may reset
/// new ones until old ones are gone).
fn try_get(port: u16, path: &str) -> std::io::Result<(u16, String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?; // 1.0: no chunked body
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((status, head.to_string(), body.to_string()))
}

/// A strict reading of an OpenMetrics exposition: metadata before samples, each family once, TYPE
/// known, UNIT a suffix of the family, counter samples ending `_total`, numbers that parse, `# EOF`
/// last and only there.
fn check_openmetrics(text: &str) {
    let mut families: std::collections::HashMap<String, String> = Default::default();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "no # EOF at the end:\n{text}");
    for l in &lines[..lines.len() - 1] {
        if let Some(rest) = l.strip_prefix("# ") {
            let mut it = rest.splitn(3, ' ');
            let (kind, name, value) = (
                it.next().unwrap(),
                it.next().unwrap_or(""),
                it.next().unwrap_or(""),
            );
            match kind {
                "TYPE" => {
                    assert!(
                        [
                            "counter",
                            "gauge",
                            "info",
                            "histogram",
                            "summary",
                            "unknown",
                            "stateset",
                            "gaugehistogram"
                        ]
                        .contains(&value),
                        "{l}"
                    );
                    assert!(
                        families.insert(name.into(), value.into()).is_none(),
                        "family {name} twice"
                    );
                }
                "UNIT" => assert!(name.ends_with(&format!("_{value}")), "{l}"),
                "HELP" => {}
                _ => panic!("unknown metadata line {l}"),
            }
            continue;
        }
        let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {l}"));
        assert!(value.parse::<f64>().is_ok(), "{l}");
        let name = series.split('{').next().unwrap();
        let family = families
            .iter()
            .filter(|(f, _)| name.starts_with(f.as_str()))
            .max_by_key(|(f, _)| f.len())
            .unwrap_or_else(|| panic!("sample before its TYPE: {l}"));
        match family.1.as_str() {
            "counter" => assert_eq!(name, format!("{}_total", family.0), "{l}"),
            "info" => assert_eq!(name, format!("{}_info", family.0), "{l}"),
            "gauge" => assert_eq!(name, family.0, "{l}"),
            _ => {}
        }
    }
}

#[test]
fn the_exporter_refuses_bad_queries_and_survives_a_flood() {
    let _one = serial();
    let (_server, sport, _) = serve_with_metrics();
    let (_exp, eport) = exporter(&[]);
    // A request/response probe, over TCP and (udp=1) UDP: its rate and latency quantiles, in
    // seconds.
    for extra in ["", "&udp=1"] {
        let (status, _, body) = get(
            eport,
            &format!("/probe?target=127.0.0.1:{sport}&time=1s&module=rr{extra}"),
        );
        assert_eq!(status, 200, "{extra}: {body}");
        assert!(body.contains("\nprobe_success 1.0\n"), "{extra}: {body}");
        for name in [
            "landspeed_probe_transactions_per_second ",
            "landspeed_probe_transaction_latency_seconds{quantile=\"0.99\"} ",
        ] {
            let v: f64 = body
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} in {body}"))
                .parse()
                .unwrap();
            assert!(v > 0.0, "{extra}: {name}{v}");
        }
        check_openmetrics(&body);
    }
    for (q, why) in [
        ("/probe", "target is required"),
        ("/probe?target=127.0.0.1&frob=1", "unknown parameter 'frob'"),
        ("/probe?target=127.0.0.1&time=9999h", "--max-time"),
        ("/probe?target=127.0.0.1&streams=100000", "1 to 128"),
    ] {
        let (status, _, body) = get(eport, q);
        assert_eq!(status, 400, "{q}: {body}");
        assert!(body.contains(why), "{q}: {body}");
    }
    assert_eq!(get(eport, "/nothing").0, 404);
    // An unreachable target is a failed probe, not an HTTP error.
    let (status, head, body) = get(eport, &format!("/probe?target=127.0.0.1:{}&time=1s", free_port()));
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(body.contains("\nprobe_success 0.0\n"), "{body}");
    check_openmetrics(&body);

    // 60 connections that send nothing and 60 that send garbage, held open, then let go.
    let mut flood: Vec<TcpStream> = (0..120)
        .filter_map(|i| {
            let mut s = TcpStream::connect(("127.0.0.1", eport)).ok()?;
            if i % 2 == 0 {
                let _ = s.write_all(b"\x16\x03\x01\x00garbage\r\n\r\n");
            }
            Some(s)
        })
        .collect();
    flood.clear();
    // It still answers, once the flood's connections are gone (each is bounded by the head timeout).
    assert!(
        wait_until(Duration::from_secs(15), || {
            try_get(eport, "/metrics").is_ok_and(|r| r.0 == 200)
        }),
        "the exporter no longer answers after the flood"
    );
    let (_, _, m) = get(eport, "/metrics");
    check_openmetrics(&m);
    assert!(
        m.contains("landspeed_exporter_probes_total{result=\"refused\"} 4"),
        "{m}"
    );
}

/// The Prometheus binary, or None when the test must be skipped (not installed, not in CI).
fn prometheus() -> Option<&'static str> {
    if Command::new("prometheus").arg("--version").output().is_ok() {
        return Some("prometheus");
    }
    common::missing("Debian's prometheus is not installed (.ci/run installs it)")
}

fn prometheus_config(dir: &std::path::Path, metrics: u16, exporter: u16, server: u16) -> std::path::PathBuf {
    let cfg = format!(
        r#"global: {{scrape_interval: 4s, scrape_timeout: 4s}}
scrape_configs:
  - job_name: landspeed
    static_configs: [{{targets: ['127.0.0.1:{metrics}']}}]
  - job_name: landspeed_exporter
    static_configs: [{{targets: ['127.0.0.1:{exporter}']}}]
  - job_name: landspeed_probe
    metrics_path: /probe
    params: {{time: [1s]}}
    static_configs: [{{targets: ['127.0.0.1:{server}']}}]
    relabel_configs:
      - {{source_labels: [__address__], target_label: __param_target}}
      - {{source_labels: [__param_target], target_label: instance}}
      - {{target_label: __address__, replacement: '127.0.0.1:{exporter}'}}
  - job_name: landspeed_probe_udp
    metrics_path: /probe
    params: {{time: [1s], module: [udp], rate: [50M]}}
    static_configs: [{{targets: ['127.0.0.1:{server}']}}]
    relabel_configs:
      - {{source_labels: [__address__], target_label: __param_target}}
      - {{source_labels: [__param_target], target_label: instance}}
      - {{target_label: __address__, replacement: '127.0.0.1:{exporter}'}}
"#
    );
    let path = dir.join("prometheus.yml");
    std::fs::write(&path, cfg).unwrap();
    path
}

/// `query` through Prometheus's HTTP API: the result vector.
fn query(port: u16, promql: &str) -> Vec<Value> {
    let q: String = form_urlencoded::byte_serialize(promql.as_bytes()).collect();
    let (status, _, body) = get(port, &format!("/api/v1/query?query={q}"));
    assert_eq!(status, 200, "{promql}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn value(v: &Value) -> f64 {
    v["value"][1].as_str().unwrap().parse().unwrap()
}

#[test]
fn a_real_prometheus_scrapes_the_server_and_the_probes_and_the_dashboard_has_data() {
    let Some(prom) = prometheus() else { return };
    let _one = serial();
    let (_server, sport, mport) = serve_with_metrics();
    // Two probes per target: the TCP and the UDP job scrape the same server at once.
    let (_exp, eport) = exporter(&["--per-target", "2"]);
    let pport = free_port();
    // A refusal (not landspeed's protocol) so that the refusal series exist.
    let mut junk = TcpStream::connect(("127.0.0.1", sport)).unwrap();
    let _ = junk.write_all(b"GET / HTTP/1.0\r\n\r\n");
    drop(junk);
    let dir = std::env::temp_dir().join(format!("landspeed-prom-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let cfg = prometheus_config(&dir, mport, eport, sport);
    let _prom = Proc(
        Command::new(prom)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{pport}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let cleanup = Cleanup(dir);
    let ready = || {
        query(pport, "probe_success").len() >= 2
            && query(pport, "landspeed_server_tests_total{outcome=\"completed\"} >= 2").len() == 1
            && !query(pport, "increase(landspeed_server_tests_total[1m])").is_empty()
            && !query(pport, "increase(landspeed_exporter_probes_total[1m])").is_empty()
    };
    let up = wait_until(Duration::from_secs(5), || {
        TcpStream::connect(("127.0.0.1", pport)).is_ok()
    }) && wait_until(Duration::from_secs(60), || {
        get(pport, "/-/ready").0 == 200 && ready()
    });
    let (_, _, targets) = get(pport, "/api/v1/targets");
    assert!(up, "the series did not appear within 60 s; targets: {targets}");
    // Every target up: Prometheus parsed each exposition as OpenMetrics (it refuses a malformed one).
    let t: Value = serde_json::from_str(&targets).unwrap();
    for target in t["data"]["activeTargets"].as_array().unwrap() {
        assert_eq!(target["health"], "up", "{target}");
    }
    for s in query(pport, "probe_success") {
        assert_eq!(value(&s), 1.0, "{s}");
    }
    let tput = query(
        pport,
        "landspeed_probe_throughput_bytes_per_second{job=\"landspeed_probe\"}",
    );
    assert!(value(&tput[0]) > 1e6, "{tput:?}");
    assert_eq!(tput[0]["metric"]["instance"], format!("127.0.0.1:{sport}"));
    let udp = query(pport, "landspeed_probe_loss_ratio");
    assert!(!udp.is_empty() && value(&udp[0]) < 0.5, "{udp:?}");
    let meta = get(pport, "/api/v1/metadata?metric=landspeed_server_received_bytes").2;
    assert!(meta.contains("\"unit\":\"bytes\""), "{meta}");
    dashboard_queries_return_data(pport);
    drop(cleanup);
}

fn dashboard_queries_return_data(pport: u16) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/grafana/landspeed.json"
    );
    let d: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for panel in d["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap().replace("$probe_job", ".*");
            assert!(
                !query(pport, &expr).is_empty(),
                "panel '{}': {expr} returns no data",
                panel["title"]
            );
        }
    }
}

struct Cleanup(std::path::PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn serve_metrics_is_strict_openmetrics_before_and_after_a_test() {
    let _one = serial();
    let (_server, sport, mport) = serve_with_metrics();
    let (status, head, before) = get(mport, "/metrics");
    assert_eq!(status, 200);
    assert!(
        head.contains("application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    check_openmetrics(&before);
    assert!(!before.contains("last_test"), "{before}");
    common::run_json("127.0.0.1", sport, &["-t", "1"]);
    assert!(wait_until(Duration::from_secs(10), || get(mport, "/metrics")
        .2
        .contains("last_test_trusted 1.0")));
    let (_, _, after) = get(mport, "/metrics");
    check_openmetrics(&after);
    assert!(
        after.contains("landspeed_server_tests_total{outcome=\"completed\"} 1"),
        "{after}"
    );
}
