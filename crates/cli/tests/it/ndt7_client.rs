//! `run --ndt7`: landspeed as an ndt7 client. Against `landspeed serve --ndt7` both subtests run, over
//! ws:// and wss:// (the certificate pinned), every byte checked (the download here, the upload by the
//! server, which says so in its measurements) and a flipped byte caught at either end; against an
//! ndt7 server that does not know landspeed's extension (a minimal one in this file, speaking only
//! the spec) the bytes are counted and the result says nothing was verified.

use crate::archive;
use crate::common::{self, ServerProc};
use crate::ndt7::{log_bytes, ndt7_addr, ndt7_line};
use serde_json::Value;
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

fn json(o: &common::Outcome) -> Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", o.stdout, o.stderr))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `landspeed run --ndt7 ARGS --json --no-save`, with `env` set for the client.
fn ndt7_run(args: &[&str], env: &[(&str, &str)]) -> common::Outcome {
    let mut cmd = Command::new(common::bin());
    cmd.args(["run", "--ndt7", "--json", "--no-save"]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::outcome(cmd, Duration::from_secs(40))
}

#[test]
fn both_subtests_against_landspeed_are_verified_over_ws_and_wss() {
    let (down_db, up_db) = (archive::db("ndt7-down"), archive::db("ndt7-up"));
    let mut plain = ServerProc::start(
        "127.0.0.1",
        &[
            "--ndt7",
            "127.0.0.1:0",
            "--ndt7-plain",
            "--archive",
            "--db",
            &down_db,
        ],
    );
    let url = format!("ws://{}", ndt7_addr(&plain));
    // Download: the server sends landspeed's payload with the client's key; the client checks it.
    let o = ndt7_run(&[&url, "-R"], &[]);
    assert_eq!(o.code, 0, "{}\n{}", o.stderr, o.stdout);
    let r = json(&o);
    assert_eq!(r["protocol"], "ndt7");
    assert_eq!(r["payload"]["verified"], true, "{r}");
    let got = n(&r["summary"]["bytes_received"]);
    assert!(got > 0 && n(&r["summary"]["bytes_verified"]) == got, "{r}");
    assert_eq!(n(&r["summary"]["corrupt_blocks"]), 0);
    let line = ndt7_line(&plain);
    assert!(
        line.contains("client_name=landspeed") && line.ends_with(": ok"),
        "{line}"
    );
    assert!(got <= log_bytes(&line, "sent"), "{got} > {line}");
    // Stopped at once after the test's line: what it queued for the archive is saved first.
    archive::stop(&mut plain);
    archived_as_served(&down_db, &r, log_bytes(&line, "sent"));
    // Upload over TLS, the certificate pinned: the server checks every byte and says so.
    let mut tls = ServerProc::start(
        "127.0.0.1",
        &["--ndt7", "127.0.0.1:0", "--archive", "--db", &up_db],
    );
    let pin = tls
        .first_line
        .split("sha256:")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let url = format!("wss://{}", ndt7_addr(&tls));
    let o = ndt7_run(&[&url, "--tls-pin", pin], &[]);
    assert_eq!(o.code, 0, "{}\n{}", o.stderr, o.stdout);
    let r = json(&o);
    assert_eq!(r["payload"]["verified"], true, "{r}");
    assert!(
        r["data_path"]["engine"].as_str().unwrap().contains("wss://"),
        "{r}"
    );
    let line = ndt7_line(&tls);
    let received = log_bytes(&line, "received");
    assert!(line.contains(&format!("verified {received} B")), "{line}");
    assert!(n(&r["summary"]["bytes_sent"]) >= received, "{r}\n{line}");
    // A wrong pin is refused before anything is sent.
    let wrong = "0".repeat(64);
    let o = ndt7_run(&[&url, "--tls-pin", &wrong], &[]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    archive::stop(&mut tls);
    let a = archived_as_served(&up_db, &r, received);
    assert_eq!(a["payload"]["verified"], true, "{a}");
    assert_eq!(n(&a["summary"]["bytes_verified"]), received, "{a}");
    assert!(
        a["data_path"]["engine"].as_str().unwrap().contains("wss://"),
        "{a}"
    );
}

/// The one run in the server's archive `db`: the subtest the client's result `client` describes, as
/// the server saw it: its `bytes` (sent or received, as its log said), its measurements (at least
/// as many as the client kept), one interval per measurement, the client's metadata.
fn archived_as_served(db: &str, client: &Value, bytes: u64) -> Value {
    let rows = common::landspeed(&["history", "--db", db, "--json"], Duration::from_secs(30));
    let rows: Value = serde_json::from_str(&rows.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    let a = archive::archived(db, 1);
    let (mine, theirs) = (&a["ndt7"], &client["ndt7"]);
    assert_eq!(
        (mine["view"].as_str(), theirs["view"].as_str()),
        (Some("server"), Some("client"))
    );
    assert_eq!(mine["subtest"], theirs["subtest"], "{a}");
    assert_eq!(
        mine["metadata"], theirs["metadata"],
        "the metadata the client sent, kept whole"
    );
    let kept = |v: &Value| v["server_measurements"].as_array().map_or(0, Vec::len);
    assert!(
        kept(theirs) >= 30 && kept(mine) >= kept(theirs),
        "{} < {}",
        kept(mine),
        kept(theirs)
    );
    assert!(a["intervals"].as_array().unwrap().len() >= 30, "{a}");
    assert_eq!(a["protocol"], "ndt7");
    let count = match mine["subtest"].as_str() {
        Some("download") => &a["summary"]["bytes_sent"],
        _ => &a["summary"]["bytes_received"],
    };
    assert_eq!(n(count), bytes, "{a}");
    a
}

#[test]
fn a_flipped_byte_is_caught_at_the_end_that_checks() {
    // Download: the client checks, a byte flipped on its way in fails the run.
    let s = ServerProc::start("127.0.0.1", &["--ndt7", "127.0.0.1:0", "--ndt7-plain"]);
    let url = format!("ws://{}", ndt7_addr(&s));
    let o = ndt7_run(&[&url, "-R"], &[("LANDSPEED_FAULT_FLIP", "0:5000")]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    let r = json(&o);
    assert_eq!(n(&r["summary"]["corrupt_blocks"]), 1, "{r}");
    // Upload: the server checks (a byte flipped as it arrives there) and its measurements say so.
    let s = ServerProc::start_env(
        "127.0.0.1",
        &["--ndt7", "127.0.0.1:0", "--ndt7-plain"],
        &[("LANDSPEED_FAULT_FLIP", "0:70000")],
    );
    let url = format!("ws://{}", ndt7_addr(&s));
    let o = ndt7_run(&[&url], &[]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    let r = json(&o);
    assert_eq!(n(&r["summary"]["corrupt_blocks"]), 1, "{r}");
    let line = ndt7_line(&s);
    assert!(line.contains("CORRUPTED: 1 bad block"), "{line}");
}

/// A minimal ndt7 server that knows only the spec: one download connection, 200 binary messages of
/// 8 KiB of zeros and one measurement without landspeed's answer, then the close.
fn foreign_download_server() -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut ws = accept_ndt7(&listener);
        let m = r#"{"AppInfo":{"ElapsedTime":1000,"NumBytes":0},"Origin":"server","Test":"download"}"#;
        ws.send(tungstenite::Message::text(m)).unwrap();
        for _ in 0..200 {
            ws.send(tungstenite::Message::binary(vec![0u8; 8192])).unwrap();
        }
        // The last measurement as M-Lab's ndt-server writes them: no AppInfo, its count in TCPInfo.
        let m =
            r#"{"TCPInfo":{"BytesAcked":1650000,"ElapsedTime":2000000},"Origin":"server","Test":"download"}"#;
        ws.send(tungstenite::Message::text(m)).unwrap();
        let _ = ws.close(None);
        while ws.read().is_ok() {}
    });
    (addr, t)
}

/// The next connection on `listener`, upgraded with ndt7's subprotocol agreed.
fn accept_ndt7(listener: &TcpListener) -> tungstenite::WebSocket<std::net::TcpStream> {
    use tungstenite::handshake::server::{Request, Response};
    let (tcp, _) = listener.accept().unwrap();
    // tungstenite's callback type returns its whole error response; nothing to shrink here.
    #[allow(clippy::result_large_err)]
    let agree = |_: &Request, mut resp: Response| {
        resp.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            "net.measurementlab.ndt.v7".parse().unwrap(),
        );
        Ok(resp)
    };
    tungstenite::accept_hdr(tcp, agree).unwrap()
}

/// An ndt7 server that ends an upload early: it reads for 300 ms, then writes its last measurement
/// and its close in one write (so they reach the client in one read), and waits 3 s for the
/// client's close while it reads on. Its thread says whether the client answered.
fn early_closing_upload_server() -> (std::net::SocketAddr, std::thread::JoinHandle<bool>) {
    use tungstenite::Message;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut ws = accept_ndt7(&listener);
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(300) {
            ws.read().unwrap();
        }
        let m = r#"{"AppInfo":{"ElapsedTime":300000,"NumBytes":1000},"Origin":"server","Test":"upload"}"#;
        ws.write(Message::text(m)).unwrap();
        ws.close(None).unwrap();
        let closing = std::time::Instant::now();
        while closing.elapsed() < Duration::from_secs(3) {
            match ws.read() {
                Ok(Message::Close(_)) | Err(tungstenite::Error::ConnectionClosed) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    });
    (addr, t)
}

#[test]
fn a_server_that_closes_an_upload_early_is_answered_whatever_came_with_its_close() {
    let (addr, server) = early_closing_upload_server();
    let o = ndt7_run(&[&format!("ws://{addr}")], &[]);
    let answered = server.join().unwrap();
    assert!(answered, "the client did not answer the close: {}", o.stdout);
    assert_eq!(o.code, 0, "{}\n{}", o.stderr, o.stdout);
    let r = json(&o);
    assert_eq!(r["streams"][0]["errors"], serde_json::json!([]), "{r}");
}

#[test]
fn another_ndt7_server_is_counted_and_said_unverified() {
    let (addr, server) = foreign_download_server();
    let o = ndt7_run(&[&format!("ws://{addr}"), "-R"], &[]);
    server.join().unwrap();
    assert_eq!(o.code, 0, "{}\n{}", o.stderr, o.stdout);
    let r = json(&o);
    assert_eq!(r["payload"]["verified"], false, "{r}");
    assert_eq!(n(&r["summary"]["bytes_received"]), 200 * 8192, "{r}");
    assert_eq!(n(&r["summary"]["bytes_verified"]), 0, "{r}");
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("nothing was verified"), "{warnings}");
    // Why, in the result itself, and no claim about bytes landspeed did not write.
    let why = r["payload"]["unverified_because"].as_str().unwrap_or_default();
    assert!(why.contains("ndt7 peer is not landspeed"), "{r}");
    assert_eq!(r["payload"]["different_data_every_packet"], false, "{r}");
    // The server's count from its TCPInfo when it sends no AppInfo, and said to be so.
    assert_eq!(n(&r["summary"]["bytes_sent"]), 1_650_000, "{r}");
    assert!(
        warnings.contains("1650000 bytes acknowledged (its TCP_INFO"),
        "{warnings}"
    );
}
