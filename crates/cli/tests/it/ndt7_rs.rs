//! The `ndt7-client` crate's command (crates.io, ndt7-client 0.3.1: an ndt7 client written by other
//! authors in Rust) against `landspeed serve --ndt7`: both subtests complete, and what it counted
//! agrees with the server's log. `.ci/run` builds it into target/peers/ndt7-client-rs (`cargo install
//! --debug ndt7-client --version 0.3.1 --locked --root target/peers/ndt7-client-rs`) and names it in
//! LANDSPEED_NDT7_RS; with CI set, a missing binary fails the test. It always runs with
//! `--no-locate`, so it reaches only the server named here.

use crate::common::{self, ServerProc};
use crate::ndt7::{log_bytes, ndt7_addr, ndt7_line};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The crate's binary: LANDSPEED_NDT7_RS, else where `.ci/run` installs it.
fn client() -> Option<PathBuf> {
    let default =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/peers/ndt7-client-rs/bin/ndt7-client");
    let path = std::env::var_os("LANDSPEED_NDT7_RS").map_or(default, PathBuf::from);
    if path.is_file() {
        Some(path)
    } else {
        common::missing(&format!(
            "the ndt7-client crate's command is missing at {} (cargo install --debug ndt7-client \
             --version 0.3.1 --locked --root target/peers/ndt7-client-rs)",
            path.display()
        ))
    }
}

/// The last measurement of `test` from `origin` in the client's JSON lines.
fn last<'a>(events: &'a [Value], origin: &str, test: &str) -> &'a Value {
    events
        .iter()
        .rev()
        .map(|e| &e["Measurement"])
        .find(|m| m["Origin"] == origin && m["Test"] == test)
        .unwrap_or_else(|| panic!("no {origin} measurement of the {test}"))
}

/// The client's own measurements of `test`, in order: (seconds since its start, bytes so far).
fn client_counts(events: &[Value], test: &str) -> Vec<(f64, f64)> {
    events
        .iter()
        .map(|e| &e["Measurement"])
        .filter(|m| m["Origin"] == "client" && m["Test"] == test)
        .map(|m| {
            (
                num(&m["AppInfo"]["ElapsedTime"]) / 1e6,
                num(&m["AppInfo"]["NumBytes"]),
            )
        })
        .collect()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_ndt7_client_crate_completes_both_subtests_and_agrees_with_the_log() {
    let Some(exe) = client() else { return };
    let db = crate::archive::db("ndt7-rs");
    let mut s = ServerProc::start(
        "127.0.0.1",
        &["--ndt7", "127.0.0.1:0", "--ndt7-plain", "--archive", "--db", &db],
    );
    let addr = ndt7_addr(&s).to_string();
    let child = Command::new(exe)
        .args(["--no-locate", "--server", &addr, "--no-tls", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the ndt7-client crate's command");
    let out = common::wait_output(child, Duration::from_secs(60)).expect("the client hung");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let summary = events
        .iter()
        .find(|e| e["Type"] == "Summary")
        .unwrap_or_else(|| panic!("no summary: {text}"));
    for t in ["Download", "Upload"] {
        assert!(
            num(&summary["Summary"][t]["ThroughputMbps"]) > 10.0,
            "{t}: {summary}"
        );
    }
    // The server's measurements reached it, every 250 ms for 10 s: 39 each, at least half of them
    // asked (a physical margin: a busy machine delays the server's messages, and CI's once
    // delivered 28 in an upload's 10 s).
    for t in ["download", "upload"] {
        let from_server = events
            .iter()
            .filter(|e| e["Measurement"]["Origin"] == "server" && e["Measurement"]["Test"] == t)
            .count();
        assert!(from_server >= 20, "{t}: {from_server} server measurements");
    }
    let (down, up) = (ndt7_line(&s), ndt7_line(&s));
    for line in [&down, &up] {
        assert!(
            line.contains("client_library_name=ndt7-client-rs") && line.ends_with(": ok"),
            "{line}"
        );
    }
    // Download: its last count comes a little before the end.
    let sent = log_bytes(&down, "sent") as f64;
    let got = num(&last(&events, "client", "download")["AppInfo"]["NumBytes"]);
    assert!(
        got <= sent * 1.01 && got >= sent * 0.8,
        "client got {got}, server sent {sent}"
    );
    // Upload: the crate's client counts a message once its send completes and takes a measurement
    // at the first completed send 250 ms or more after the last; its 10 s timeout then stops it
    // mid-send (a debug build's timer may fire late: a run here measured at 10.036 s). So after its
    // last count it sent for less than one measurement interval plus one send, at most at the
    // fastest pace its own measurements show (the mean undercounts: a full test run here went 13 MB
    // past a mean-rate bound), and part of the message it was sending (1 MiB at most). A quarter
    // more than that pace: one window may outrun every earlier one a little.
    let received = log_bytes(&up, "received") as f64;
    let counts = client_counts(&events, "upload");
    let &(t_last, put) = counts.last().expect("no client upload measurement");
    let fastest = counts
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0).max(1e-3))
        .fold(0.0, f64::max);
    let message = f64::from(1u32 << 20);
    let after_last = 1.25 * fastest * 0.25 + 2.0 * message;
    assert!(
        received >= put * 0.8 && received <= put + after_last,
        "server received {received}, client sent {put} by {t_last} s, then at most {after_last}"
    );
    // The server kept both subtests as it saw them: a client that is not landspeed, named by its
    // metadata, nothing verified, its rate from the server's own count.
    crate::archive::stop(&mut s);
    for (id, count, subtest) in [(1, sent, "download"), (2, received, "upload")] {
        let a = crate::archive::archived(&db, id);
        assert_eq!(a["ndt7"]["subtest"], subtest, "{a}");
        assert_eq!(
            a["ndt7"]["metadata"]["client_library_name"], "ndt7-client-rs",
            "{a}"
        );
        assert_eq!(a["payload"]["verified"], false, "{a}");
        let key = if subtest == "download" {
            "bytes_sent"
        } else {
            "bytes_received"
        };
        assert_eq!(num(&a["summary"][key]), count, "{a}");
        let rate = num(&a["summary"]["throughput_bps"]);
        assert!(rate > 10e6, "{subtest}: {rate} bit/s");
    }
}
