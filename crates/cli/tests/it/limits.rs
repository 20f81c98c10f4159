//! A server you can leave running: per-test limits (streams, duration, bytes, UDP rate) refused with the
//! limit's name, `--max-tests` answered "busy" in both protocols, `--allow` networks, and JSON log lines.

use crate::common;

use common::{bin, landspeed, run_json, with_fd_limit, ServerProc};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn refused(port: u16, args: &[&str], needle: &str) {
    let p = port.to_string();
    let mut all = vec!["run", "127.0.0.1", "-p", &p];
    all.extend_from_slice(args);
    let o = landspeed(&all, Duration::from_secs(30));
    assert_eq!(o.code, 1, "{args:?} should be refused: {}", o.stdout);
    assert!(o.stderr.contains(needle), "{args:?}: {}", o.stderr);
}

/// A server whose open-file limit cannot hold a test's streams refuses the test whole, naming the
/// most it allows, and says why when it starts; a test within the room runs.
#[test]
fn a_server_refuses_more_streams_than_its_open_file_limit_holds() {
    let mut child = with_fd_limit(80, &["serve", "--bind", "127.0.0.1", "-p", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port: u16 = first
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    refused(port, &["-P", "20", "-t", "1"], "at most 16 streams per test");
    let r = run_json("127.0.0.1", port, &["-P", "16", "-t", "0.5", "--no-save"]);
    assert_eq!(r["streams"].as_array().unwrap().len(), 16);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("open-file limit (80) leaves room for at most 16 streams"),
        "{err}"
    );
}

#[test]
fn each_limit_is_enforced_and_named() {
    let s = ServerProc::start(
        "127.0.0.1",
        &[
            "--max-streams",
            "2",
            "--max-duration",
            "2s",
            "--max-bytes",
            "64M",
            "--max-rate",
            "10M",
        ],
    );
    refused(s.port, &["-P", "3", "-t", "1"], "at most 2 streams per test");
    refused(s.port, &["-t", "5"], "tests of at most 2 s");
    refused(s.port, &["-n", "100M"], "bytes per test");
    refused(s.port, &["-u", "-b", "100M", "-t", "1"], "allows UDP at most");
    // Within every limit, tests run.
    let r = run_json("127.0.0.1", s.port, &["-P", "2", "-t", "1"]);
    assert_eq!(r["summary"]["bytes_sent"], r["summary"]["bytes_received"]);
    run_json("127.0.0.1", s.port, &["-n", "5M"]);
    run_json("127.0.0.1", s.port, &["-u", "-b", "5M", "-t", "1"]);
}

#[test]
fn over_max_tests_is_busy_not_a_hang() {
    let s = ServerProc::start("127.0.0.1", &["--max-tests", "1"]);
    let p = s.port.to_string();
    let mut first = Command::new(bin())
        .args(["run", "127.0.0.1", "-p", &p, "-t", "3", "--json-stream"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Once the first test reports an interval it is running and holds the only slot.
    let rest = common::wait_for_line(first.stdout.take().unwrap(), "\"interval\"");
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-t", "1"],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "a second test was not refused: {}", o.stdout);
    drop(rest);
    assert!(
        o.stderr.contains("busy") && o.stderr.contains("tests at once"),
        "{}",
        o.stderr
    );
    let out = common::wait_output(first, Duration::from_secs(30)).expect("first test hung");
    assert!(out.status.success());
    // The slot is free again.
    run_json("127.0.0.1", s.port, &["-t", "1"]);
}

#[test]
fn only_allowed_networks_may_test() {
    let s = ServerProc::start("127.0.0.1", &["--allow", "192.0.2.0/24"]);
    refused(s.port, &["-t", "1"], "does not take tests from your address");
    let s = ServerProc::start("127.0.0.1", &["--allow", "127.0.0.0/8", "--allow", "::1"]);
    run_json("127.0.0.1", s.port, &["-t", "1"]);
    let bad = landspeed(&["serve", "--allow", "not-a-net"], Duration::from_secs(10));
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

#[test]
fn log_json_writes_one_object_per_event() {
    let mut child = Command::new(bin())
        .args(["serve", "--bind", "127.0.0.1", "-p", "0", "--log-json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "listening");
    let addr = first["addresses"][0].as_str().unwrap().to_string();
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let r = run_json("127.0.0.1", port, &["-t", "1"]);
    let test: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(test["event"], "test");
    assert_eq!(test["ok"], true);
    assert_eq!(test["protocol"], "landspeed");
    assert_eq!(test["bytes_received"], r["summary"]["bytes_received"]);
}

#[test]
fn sigusr1_prints_the_counters() {
    let s = ServerProc::start("127.0.0.1", &["--max-streams", "1"]);
    let r = run_json("127.0.0.1", s.port, &["-n", "3M"]);
    assert!(s
        .next_line(Duration::from_secs(10))
        .unwrap()
        .contains("test from"));
    refused(s.port, &["-P", "2", "-t", "1"], "at most 1 streams per test");
    let _ = s.next_line(Duration::from_secs(10));
    common::signal(s.process(), 10); // SIGUSR1
    let line = s.next_line(Duration::from_secs(10)).expect("no stats line");
    assert!(line.contains("stats:"), "{line}");
    assert!(line.contains("tests 1 ok, 1 failed"), "{line}");
    let bytes = r["summary"]["bytes_received"].as_u64().unwrap();
    assert!(line.contains(&format!("received {bytes} B")), "{line}");
}

/// Fraction of `cap` a result's receiver-side throughput reached.
fn share_of(r: &serde_json::Value, cap: f64) -> f64 {
    r["summary"]["throughput_bps"].as_f64().unwrap() / cap
}

#[test]
fn max_rate_paces_tcp_both_ways_and_the_client_says_so() {
    let s = ServerProc::start("127.0.0.1", &["--max-rate", "100M"]);
    // The receive buffers fill at the start, so a short test may run a little over; never far over.
    for args in [&["-t", "2", "-P", "2"][..], &["-t", "2", "-R"][..]] {
        let r = run_json("127.0.0.1", s.port, args);
        let share = share_of(&r, 100e6);
        assert!((0.7..1.35).contains(&share), "{args:?}: {share:.2} of the cap");
        let w = r["warnings"].to_string();
        assert!(w.contains("its rate limit"), "{args:?}: warnings {w}");
    }
    // Unlimited, the same machine moves far more: the cap, not the host, set the rate above.
    let free = ServerProc::start("127.0.0.1", &[]);
    let r = run_json("127.0.0.1", free.port, &["-t", "1"]);
    assert!(share_of(&r, 100e6) > 3.0);
}

#[test]
fn new_tests_per_minute_per_address() {
    let s = ServerProc::start("127.0.0.1", &["--max-tests-per-minute", "2"]);
    run_json("127.0.0.1", s.port, &["-n", "1M"]);
    run_json("127.0.0.1", s.port, &["-n", "1M"]);
    refused(s.port, &["-n", "1M"], "tests per minute");
    let p = s.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-n", "1M"],
        Duration::from_secs(20),
    );
    assert!(o.stderr.contains("retry in"), "{}", o.stderr);
    // An iperf3 client from the same address is counted too.
    if let Ok(c) = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &p, "-n", "1M"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        let (out, killed) = common::wait_output_or_kill(c, Duration::from_secs(30));
        assert!(!killed && !out.status.success(), "iperf3 was not refused");
    } else {
        assert!(std::env::var_os("CI").is_none(), "iperf3 missing in CI");
    }
}
