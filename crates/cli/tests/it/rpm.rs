//! `serve --rpm` and `landspeed rpm`: landspeed's responsiveness client measures landspeed's server
//! over HTTP/2 with TLS and over plain HTTP/2, over HTTP/1.1 with the TCP round trip as the loaded
//! one, and a
//! hand-written HTTP/1.1 client gets each endpoint's answer (the configuration in both spellings,
//! built from its Host header; a keyed server refuses the test unless `--open rpm`). The comparison
//! with goresponsiveness and the reference nginx server is in docs/latency.md (run by hand: neither
//! can be fetched by CI).

use crate::auth::key_files;
use crate::common::{self, ServerProc};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The configuration URL from the server's listening line ("...; responsiveness (RPM) at URL").
pub(crate) fn rpm_url(s: &ServerProc) -> String {
    let tail = (s.first_line.split("responsiveness (RPM) at ").nth(1))
        .unwrap_or_else(|| panic!("no RPM in {}", s.first_line));
    tail.split(';').next().unwrap().trim().to_string()
}

/// `landspeed rpm URL ... --json` with a 5 s timeout: its exit code and document.
fn rpm_json(url: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["rpm", url, "--timeout", "5s", "--json"];
    args.extend_from_slice(extra);
    let o = common::landspeed(&args, Duration::from_secs(60));
    let v = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", o.stdout, o.stderr));
    (o.code, v)
}

#[test]
fn the_rpm_client_measures_landspeeds_server_over_http2_with_tls_and_plain() {
    // A measurement: beside the emulator's real-time forwarders it was starved once (10 KB in
    // 5 s, one probe answered).
    let _one = common::alone();
    let s = ServerProc::start("127.0.0.1", &["--rpm", "127.0.0.1:0"]);
    let url = rpm_url(&s);
    assert!(
        url.starts_with("https://127.0.0.1:") && url.ends_with("/config"),
        "{url}"
    );
    let (code, r) = rpm_json(&url, &["--direction", "download"]);
    assert_eq!((code, r["schema"].as_str()), (0, Some("landspeed-rpm/1")), "{r}");
    assert_eq!(r["http"], "HTTP/2");
    let d = &r["directions"][0];
    let f = &d["figures"];
    assert_eq!(d["direction"], "download");
    assert!(d["throughput_bps"].as_f64().unwrap() > 1e6, "{d}");
    assert!(
        f["rpm"].as_f64().unwrap() > 0.0 && f["tls_ms"].as_f64().unwrap() > 0.0,
        "{f}"
    );
    assert!(f["self_probes"].as_u64().unwrap() > 0 && f["foreign_probes"].as_u64().unwrap() > 0);
    assert!(!d["intervals"].as_array().unwrap().is_empty());
    drop(s);
    // Plain HTTP/2 (prior knowledge) uploading: no TLS step in the foreign probes.
    let s = ServerProc::start("127.0.0.1", &["--rpm", "127.0.0.1:0", "--rpm-plain"]);
    let url = rpm_url(&s);
    assert!(url.starts_with("http://"), "{url}");
    let (code, r) = rpm_json(&url, &["--direction", "upload"]);
    let d = &r["directions"][0];
    assert_eq!((code, d["direction"].as_str()), (0, Some("upload")), "{r}");
    assert!(
        d["figures"]["tls_ms"].is_null() && d["figures"]["rpm"].as_f64().unwrap() > 0.0,
        "{d}"
    );
    assert!(d["throughput_bps"].as_f64().unwrap() > 1e6, "{d}");
    // Both directions at once (draft-09's concurrent test): each its own load and probes, then one
    // score from their probes pooled.
    let (code, r) = rpm_json(&url, &["--direction", "concurrent", "--connections", "2"]);
    assert_eq!((code, r["parallel"].as_bool()), (0, Some(true)), "{r}");
    let dirs: Vec<&str> = (0..2)
        .map(|i| r["directions"][i]["direction"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["download", "upload"]);
    for d in r["directions"].as_array().unwrap() {
        assert!(
            d["figures"]["rpm"].as_f64().unwrap() > 0.0 && d["throughput_bps"].as_f64().unwrap() > 1e6,
            "{d}"
        );
    }
    assert!(r["overall"]["rpm"].as_f64().unwrap() > 0.0, "{r}");
    // HTTP/1.1: no request can ride a loaded connection; the kernel's round-trip estimate of a load
    // connection stands in for each self probe (draft-09), every one marked so.
    let (code, r) = rpm_json(&url, &["--direction", "download", "--http1.1"]);
    let d = &r["directions"][0];
    assert_eq!((code, r["http"].as_str()), (0, Some("HTTP/1.1")), "{r}");
    assert!(d["figures"]["rpm"].as_f64().unwrap() > 0.0, "{d}");
    let own = d["self_probes"].as_array().unwrap();
    assert!(!own.is_empty() && own.iter().all(|p| p["tcp_rtt"] == true), "{d}");
}

/// Draft-09's method end to end: a connection more each interval, each stage's confidence, the
/// figures by -09's formula from the foreign and loaded responsiveness, and the same probes
/// recomputed under -03's by `--recompute`.
#[test]
fn the_client_ramps_as_draft_09_says_and_a_saved_report_is_recomputed_under_draft_03() {
    // A measurement: beside the emulator's real-time forwarders it was starved once (10 KB in
    // 5 s, one probe answered).
    let _one = common::alone();
    let s = ServerProc::start("127.0.0.1", &["--rpm", "127.0.0.1:0", "--rpm-plain"]);
    let url = rpm_url(&s);
    let o = common::landspeed(
        &[
            "rpm",
            &url,
            "--direction",
            "download",
            "--interval",
            "1s",
            "--timeout",
            "8s",
            "--json",
        ],
        Duration::from_secs(60),
    );
    let r: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stderr));
    assert_eq!(o.code, 0, "{r}");
    assert_eq!(r["params"]["draft"], "draft-09");
    let d = &r["directions"][0];
    let intervals = d["intervals"].as_array().unwrap();
    // One more connection each interval until the direction ended (stable, or 8 s).
    let conns: Vec<u64> = intervals
        .iter()
        .map(|i| i["connections"].as_u64().unwrap())
        .collect();
    assert!(conns.windows(2).all(|w| w[1] == w[0] + 1), "{conns:?}");
    assert!(conns.len() >= 4, "{conns:?}");
    let words = ["low", "medium", "high"];
    for stage in ["capacity", "responsiveness"] {
        assert!(words.contains(&d["confidence"][stage].as_str().unwrap()), "{d}");
    }
    let f = &d["figures"];
    let (rpm, foreign, loaded) = (
        f["rpm"].as_f64().unwrap(),
        f["foreign_rpm"].as_f64().unwrap(),
        f["loaded_rpm"].as_f64().unwrap(),
    );
    assert!((rpm - (foreign + loaded) / 2.0).abs() < 1e-6 * rpm, "{f}");
    let dir = tempfile_dir();
    let saved = dir.join("rpm.json");
    std::fs::write(&saved, r.to_string()).unwrap();
    let o = common::landspeed(
        &[
            "rpm",
            "--recompute",
            saved.to_str().unwrap(),
            "--draft",
            "03",
            "--json",
        ],
        Duration::from_secs(10),
    );
    let old: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stderr));
    assert_eq!(old["params"]["draft"], "draft-03");
    let old_rpm = old["directions"][0]["figures"]["rpm"].as_f64().unwrap();
    // -03: 60 000 over the mean of the two round trips, 60 000/foreign and 60 000/loaded.
    let expected = 60_000.0 / (0.5 * 60_000.0 / foreign + 0.5 * 60_000.0 / loaded);
    assert!(
        (old_rpm - expected).abs() < 1e-6 * expected,
        "{old_rpm} vs {expected}"
    );
    assert!(
        old_rpm <= rpm,
        "the harmonic form is never above the arithmetic one"
    );
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("landspeed-rpm-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A configuration served apart from the test (as Apple's and the reference deployment can): its URLs
/// name a host that does not resolve (`rpm.invalid`), its `test_endpoint` the address of landspeed's
/// server, so the test can only run if every connection goes to the endpoint. Over HTTP/1.1 (this
/// configuration server is a one-answer HTTP/1.1 listener), so no RPM: the load and the foreign
/// probes are what show where the connections went.
#[test]
fn a_configuration_naming_a_test_endpoint_is_tested_there() {
    // A measurement: beside the emulator's real-time forwarders it was starved once (10 KB in
    // 5 s, one probe answered).
    let _one = common::alone();
    let s = ServerProc::start("127.0.0.1", &["--rpm", "127.0.0.1:0", "--rpm-plain"]);
    let port = rpm_url(&s)
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let url = |path: &str| format!("http://rpm.invalid:{port}/{path}");
    let config = serde_json::json!({
        "version": 1,
        "test_endpoint": "127.0.0.1",
        "urls": {
            "small_https_download_url": url("small"),
            "large_https_download_url": url("large"),
            "https_upload_url": url("slurp"),
        }
    })
    .to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config_url = format!(
        "http://127.0.0.1:{}/config",
        listener.local_addr().unwrap().port()
    );
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = [0u8; 4096];
        let _ = c.read(&mut head);
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{config}",
            config.len()
        );
        c.write_all(answer.as_bytes()).unwrap();
    });
    let (code, r) = rpm_json(&config_url, &["--direction", "download", "--http1.1"]);
    server.join().unwrap();
    let d = &r["directions"][0];
    assert_eq!(code, 0, "{r}");
    assert!(d["throughput_bps"].as_f64().unwrap() > 1e6, "{d}");
    assert!(!d["foreign"].as_array().unwrap().is_empty(), "{d}");
    assert!(d["figures"]["rpm"].as_f64().unwrap() > 0.0, "{d}");
}

/// One HTTP/1.1 exchange on a new connection: the status and the body.
fn exchange(port: u16, request: &str) -> (u16, String) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    let _ = c.read_to_string(&mut text);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |b| b.1).to_string();
    (status, body)
}

fn get(port: u16, path: &str) -> (u16, String) {
    exchange(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: rpm.example:{port}\r\nConnection: close\r\n\r\n"),
    )
}

#[test]
fn each_endpoint_answers_a_plain_http_client_and_a_keyed_server_refuses_unless_opened() {
    let port = common::free_port();
    let bind = format!("127.0.0.1:{port}");
    let s = ServerProc::start("127.0.0.1", &["--rpm", &bind, "--rpm-plain"]);
    let (status, body) = get(port, "/config");
    assert_eq!(status, 200, "{body}");
    let c: Value = serde_json::from_str(&body).unwrap();
    let base = format!("http://rpm.example:{port}");
    assert_eq!(c["urls"]["large_download_url"], format!("{base}/large"));
    assert_eq!(c["urls"]["upload_url"], format!("{base}/upload"));
    assert!(c["urls"].get("https_upload_url").is_none(), "{body}");
    assert_eq!(get(port, "/small"), (200, "x".into()));
    assert_eq!(get(port, "/nothing").0, 404);
    let post = format!(
        "POST /slurp HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n{}",
        "y".repeat(5000)
    );
    assert_eq!(exchange(port, &post).0, 200);
    drop(s);
    let (keys, _) = key_files("rpm");
    let keys = keys.to_str().unwrap();
    let s = ServerProc::start("127.0.0.1", &["--rpm", &bind, "--rpm-plain", "--auth-keys", keys]);
    let (status, body) = get(port, "/config");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("does not open rpm"), "{body}");
    assert_eq!(get(port, "/large").0, 403);
    drop(s);
    let s = ServerProc::start(
        "127.0.0.1",
        &[
            "--rpm",
            &bind,
            "--rpm-plain",
            "--auth-keys",
            keys,
            "--open",
            "rpm",
        ],
    );
    assert_eq!(get(port, "/config").0, 200);
    drop(s);
}

/// An HTTP/2 frame: its type, flags, stream and payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The next frame read: (type, flags, stream, payload), None when nothing came in time.
fn read_h2_frame(c: &mut TcpStream) -> Option<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    c.read_exact(&mut head).ok()?;
    let n = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0u8; n];
    c.read_exact(&mut payload).ok()?;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some((head[3], head[4], stream, payload))
}

#[test]
fn an_upload_sent_before_the_servers_settings_arrive_is_not_left_waiting() {
    // A client may send up to the protocol's default window (64 KiB) before it reads the server's
    // SETTINGS; the server's smaller window then takes effect on its acknowledgement, with this
    // client's window below zero. Here 20,000 bytes go first and the acknowledgement 300 ms later:
    // the server must still send the stream a WINDOW_UPDATE that lets the upload go on (h2 0.4
    // alone never did: the upload stalled for good, seen in CI).
    let port = common::free_port();
    let bind = format!("127.0.0.1:{port}");
    let _s = ServerProc::start("127.0.0.1", &["--rpm", &bind, "--rpm-plain"]);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let authority = format!("127.0.0.1:{port}");
    // HPACK: :method POST, :scheme http (static entries), :path and :authority as literals.
    let mut headers = vec![0x83, 0x86, 0x04, 7];
    headers.extend_from_slice(b"/upload");
    headers.extend_from_slice(&[0x01, authority.len() as u8]);
    headers.extend_from_slice(authority.as_bytes());
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, 0, &[]));
    out.extend(h2_frame(1, 0x4, 1, &headers));
    out.extend(h2_frame(0, 0, 1, &[b'u'; 16_384]));
    out.extend(h2_frame(0, 0, 1, &[b'u'; 3_616]));
    c.write_all(&out).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The client's view of its stream's window: the default, less what it sent, moved by the
    // server's SETTINGS and its updates.
    let mut window: i64 = 65_535 - 20_000;
    let mut acked = false;
    while window <= 0 || !acked {
        let Some((kind, flags, stream, p)) = read_h2_frame(&mut c) else {
            panic!("no WINDOW_UPDATE reopened the stream: its window stayed at {window}");
        };
        match (kind, flags & 1, stream) {
            (4, 0, 0) => {
                for s in p.chunks_exact(6) {
                    if u16::from_be_bytes([s[0], s[1]]) == 4 {
                        let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                        window += i64::from(v) - 65_535;
                    }
                }
                c.write_all(&h2_frame(4, 1, 0, &[])).unwrap();
                acked = true;
            }
            (8, _, 1) => window += i64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
            (3 | 7, ..) => panic!("the server ended the stream or the connection: {kind} {p:?}"),
            _ => {}
        }
    }
    assert!(window > 0, "{window}");
}

#[test]
fn a_load_the_server_ends_before_the_tests_end_voids_the_score_with_its_reason() {
    // The server cuts each test at 2 s (`--max-duration`); the client's one load (`--connections
    // 1`, none added) ends then, 3 s before its 5 s direction would: no figures, the reason named.
    let s = ServerProc::start(
        "127.0.0.1",
        &["--rpm", "127.0.0.1:0", "--rpm-plain", "--max-duration", "2s"],
    );
    let url = rpm_url(&s);
    let args = [
        "--direction",
        "download",
        "--interval",
        "1s",
        "--connections",
        "1",
    ];
    let (code, r) = rpm_json(&url, &args);
    let d = &r["directions"][0];
    assert_eq!(code, 1, "{r}");
    assert!(d["figures"].is_null(), "a score from a broken test: {d}");
    let why = d["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("not under working conditions") && why.contains("ended the load after"),
        "{why}"
    );
    // Uploading, the server answers the cut upload (503): that is named too.
    let args = ["--direction", "upload", "--interval", "1s", "--connections", "1"];
    let (code, r) = rpm_json(&url, &args);
    let d = &r["directions"][0];
    assert_eq!(code, 1, "{r}");
    assert!(d["figures"].is_null(), "a score from a broken test: {d}");
    let why = d["error"].as_str().unwrap_or_default();
    assert!(why.contains("not under working conditions"), "{why}");
}
