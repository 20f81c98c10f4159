//! `serve --ndt7`: M-Lab's own ndt7 JavaScript client (npm @m-lab/ndt7, run in Node by
//! tests/peers/ndt7js/run.cjs; .ci/run installs it) completes both subtests against landspeed's
//! server, and what it measured agrees with the server's log; requests that are not ndt7 upgrades
//! get the HTTP answer that says why, and connections that never finish their request cost nothing
//! a real client needs. With CI set, a missing Node.js or client fails the test.

use crate::common;

use common::ServerProc;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn client_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/ndt7js")
}

/// Node.js with M-Lab's client installed, and the flag its WebSocket needs (Node 20 has it behind
/// `--experimental-websocket`; 22 and later have it by default). Missing outside CI: skip.
fn node() -> Option<Vec<&'static str>> {
    let installed = client_dir().join("node_modules/@m-lab/ndt7").is_dir();
    let has = |flag: &[&str]| {
        Command::new("node")
            .args(flag)
            .args(["-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"])
            .status()
            .is_ok_and(|s| s.success())
    };
    let flags = if has(&[]) {
        Some(vec![])
    } else if has(&["--experimental-websocket"]) {
        Some(vec!["--experimental-websocket"])
    } else {
        None
    };
    match flags {
        Some(f) if installed => Some(f),
        _ => {
            let what =
                "Node.js with a WebSocket (20.10+) and tests/peers/ndt7js's npm packages (npm ci there)";
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set and {what} are missing"
            );
            eprintln!("skipping: {what} are missing");
            None
        }
    }
}

/// The ndt7 address from the server's listening line ("...; ndt7 at ws://ADDR").
fn ndt7_addr(s: &ServerProc) -> SocketAddr {
    let url = s
        .first_line
        .split("ndt7 at ")
        .nth(1)
        .expect("no ndt7 in the listening line");
    url.trim_start_matches("ws://")
        .trim_start_matches("wss://")
        .parse()
        .unwrap()
}

/// The next server log line about an ndt7 test.
fn ndt7_line(s: &ServerProc) -> String {
    loop {
        let line = s
            .next_line(Duration::from_secs(30))
            .expect("no ndt7 test in the log");
        if line.contains(" ndt7") && line.contains("test from") {
            return line;
        }
    }
}

/// "sent N B" / "received N B" from a server log line.
fn log_bytes(line: &str, what: &str) -> u64 {
    let after = line.split(&format!("{what} ")).nth(1).unwrap();
    after.split(' ').next().unwrap().parse().unwrap()
}

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn m_labs_own_client_completes_both_subtests_and_agrees_with_the_log() {
    let Some(flags) = node() else { return };
    // TLS, the default: the client takes the server's self-signed certificate as a browser would
    // after the user accepted it (plain ws:// is the request tests' below).
    let s = ServerProc::start("127.0.0.1", &["--ndt7", "127.0.0.1:0"]);
    assert!(s.first_line.contains("ndt7 at wss://"), "{}", s.first_line);
    let addr = ndt7_addr(&s).to_string();
    let child = Command::new("node")
        .args(&flags)
        .arg(client_dir().join("run.cjs"))
        .args([addr.as_str(), "wss"])
        .env("NODE_TLS_REJECT_UNAUTHORIZED", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let out = common::wait_output(child, Duration::from_secs(60)).expect("the ndt7 client hung");
    let text = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(r["code"], 0, "{r}");
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    // A measurement every 250 ms for 10 s: 39 of them; allow a few lost to a busy machine.
    for test in ["download", "upload"] {
        assert!(n(&r["server_measurements"][test]) >= 30.0, "{test}: {r}");
        let last = &r[test]["LastServerMeasurement"];
        assert_eq!(last["Origin"], "server", "{r}");
        assert_eq!(last["Test"], test, "{r}");
        assert!(last["ConnectionInfo"]["Client"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"));
        assert_eq!(last["ConnectionInfo"]["Server"], addr.as_str());
        for k in [
            "BytesAcked",
            "BytesReceived",
            "BytesSent",
            "MinRTT",
            "RTT",
            "ElapsedTime",
        ] {
            assert!(last["TCPInfo"][k].is_i64(), "{test} TCPInfo.{k}: {r}");
        }
    }
    let down = ndt7_line(&s);
    let up = ndt7_line(&s);
    assert!(down.contains("client_name=landspeed-interop-test"), "{down}");
    assert!(down.contains("reverse") && down.ends_with(": ok"), "{down}");
    assert!(up.contains("forward") && up.ends_with(": ok"), "{up}");
    // Download: the client counts every message it got (the measurements' text too), the server its
    // binary messages; the client's last count comes a little before the end.
    let sent = log_bytes(&down, "sent") as f64;
    let got = n(&r["download"]["LastClientMeasurement"]["NumBytes"]);
    assert!(
        got <= sent * 1.01 && got >= sent * 0.8,
        "client {got}, server sent {sent}"
    );
    let last_server = n(&r["download"]["LastServerMeasurement"]["AppInfo"]["NumBytes"]);
    assert!(
        last_server <= sent && last_server >= sent * 0.8,
        "{last_server} vs {sent}"
    );
    // Upload: the client counts what left its buffer, the server what arrived.
    let received = log_bytes(&up, "received") as f64;
    let put = n(&r["upload"]["LastClientMeasurement"]["NumBytes"]);
    assert!(
        received > 0.0 && received <= put * 1.01 && received >= put * 0.8,
        "{received} vs {put}"
    );
    let last_server = n(&r["upload"]["LastServerMeasurement"]["AppInfo"]["NumBytes"]);
    assert!(last_server <= received, "{last_server} vs {received}");
}

/// Sends `request` and returns the status line of the answer (then hangs up).
fn status_of(addr: SocketAddr, request: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") && matches!(c.read(&mut b), Ok(1)) {
        line.push(b[0]);
    }
    String::from_utf8_lossy(&line).trim_end().to_string()
}

fn upgrade(path: &str, protocol: Option<&str>) -> String {
    let proto = protocol
        .map(|p| format!("Sec-WebSocket-Protocol: {p}\r\n"))
        .unwrap_or_default();
    format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{proto}\r\n"
    )
}

#[test]
fn requests_that_are_not_ndt7_upgrades_are_told_why_and_idle_ones_cost_no_test() {
    let s = ServerProc::start(
        "127.0.0.1",
        &[
            "--ndt7",
            "127.0.0.1:0",
            "--ndt7-plain",
            "--handshake-timeout",
            "1s",
        ],
    );
    let a = ndt7_addr(&s);
    let plain = "GET /ndt/v7/download HTTP/1.1\r\nHost: x\r\n\r\n";
    assert!(status_of(a, plain).starts_with("HTTP/1.1 426"));
    let no_proto = upgrade("/ndt/v7/upload", None);
    assert!(status_of(a, &no_proto).starts_with("HTTP/1.1 400"));
    let wrong_proto = upgrade("/ndt/v7/upload", Some("chat"));
    assert!(status_of(a, &wrong_proto).starts_with("HTTP/1.1 400"));
    assert!(
        status_of(a, &upgrade("/nothing", Some("net.measurementlab.ndt.v7"))).starts_with("HTTP/1.1 404")
    );
    let post = "POST /ndt/v7/download HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    assert!(status_of(a, post).starts_with("HTTP/1.1 405"));
    let long = format!("/ndt/v7/download?m={}", "a".repeat(4100));
    assert!(status_of(a, &upgrade(&long, Some("net.measurementlab.ndt.v7"))).starts_with("HTTP/1.1 400"));
    let bad_utf8 = upgrade("/ndt/v7/download?m=%ff", Some("net.measurementlab.ndt.v7"));
    assert!(status_of(a, &bad_utf8).starts_with("HTTP/1.1 400"));
    assert!(status_of(a, "\x16\x03\x01\x00\x05hello\r\n\r\n").starts_with("HTTP/1.1 400"));
    // A hundred connections that never finish their request: those past the cap are closed at once,
    // the rest when the handshake time is up; then a real upgrade is served.
    let idle: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(a).unwrap()).collect();
    let mut closed_at_once = 0;
    for mut c in idle.iter().skip(80) {
        c.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        if matches!(c.read(&mut [0u8; 1]), Ok(0)) {
            closed_at_once += 1;
        }
    }
    assert!(closed_at_once > 0, "every idle connection was kept");
    let served = common::wait_until(Duration::from_secs(10), || {
        status_of(a, &upgrade("/ndt/v7/download", Some("net.measurementlab.ndt.v7")))
            .starts_with("HTTP/1.1 101")
    });
    assert!(served, "no upgrade served after the idle connections");
    drop(idle);
}

#[test]
fn an_address_outside_allow_is_forbidden() {
    let s = ServerProc::start(
        "127.0.0.1",
        &["--ndt7", "127.0.0.1:0", "--ndt7-plain", "--allow", "192.0.2.0/24"],
    );
    let a = ndt7_addr(&s);
    let answer = status_of(a, &upgrade("/ndt/v7/download", Some("net.measurementlab.ndt.v7")));
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}
