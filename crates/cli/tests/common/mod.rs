//! Test helpers: a `landspeed serve` child process on a free loopback port that is killed when the test
//! ends (pass or fail), and a way to run `landspeed run` against it and parse its JSON.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_landspeed")
}

pub struct ServerProc {
    pub child: Child,
    pub port: u16,
    pub lines: mpsc::Receiver<String>,
}

impl ServerProc {
    /// Starts `landspeed serve --bind ADDR -p 0 [extra]` (no --bind when `bind` is empty) and waits for
    /// its "listening on" line.
    pub fn start(bind: &str, extra: &[&str]) -> ServerProc {
        let bind_args: Vec<&str> = if bind.is_empty() {
            vec![]
        } else {
            vec!["--bind", bind]
        };
        let mut child = Command::new(bin())
            .args(["serve", "-p", "0"])
            .args(bind_args)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn landspeed serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server printed nothing");
        let port = first
            .rsplit(':')
            .next()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port in {first:?}"));
        ServerProc {
            child,
            port,
            lines: rx,
        }
    }

    /// Waits for the next log line of the server.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the binary with a hard timeout, killing it if it hangs.
pub fn landspeed(args: &[&str], timeout: Duration) -> Outcome {
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn landspeed");
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).ok();
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).ok();
        s
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("landspeed {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        code: status.code().unwrap_or(-1),
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

/// `landspeed run HOST -p PORT ARGS --json`, asserting success, returning the parsed document.
pub fn run_json(host: &str, port: u16, args: &[&str]) -> serde_json::Value {
    let p = port.to_string();
    let mut all = vec!["run", host, "-p", &p, "--json"];
    all.extend_from_slice(args);
    let o = landspeed(&all, Duration::from_secs(60));
    assert_eq!(
        o.code, 0,
        "run {args:?} failed\nstdout: {}\nstderr: {}",
        o.stdout, o.stderr
    );
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.stdout))
}

/// Checks the invariants every result must satisfy: the required keys, sent == received per stream and
/// in total, and measured intervals summing to the totals.
pub fn check_invariants(r: &serde_json::Value) {
    assert_eq!(r["schema"], "landspeed/result/1");
    for k in [
        "bytes_sent",
        "bytes_received",
        "bytes_verified",
        "corrupt_blocks",
        "duration_s",
        "throughput_bps",
        "retransmits",
    ] {
        assert!(!r["summary"][k].is_null(), "summary.{k} missing");
    }
    for side in ["local", "remote"] {
        for k in [
            "user_pct",
            "system_pct",
            "softirq_pct",
            "cpu_s_per_gb",
            "cycles_per_byte",
        ] {
            assert!(r[side]["cpu"].get(k).is_some(), "{side}.cpu.{k} missing");
        }
        for k in ["requested_bytes", "granted_snd_bytes", "granted_rcv_bytes"] {
            assert!(r[side]["window"].get(k).is_some(), "{side}.window.{k} missing");
        }
        assert!(r[side]["host"].is_object());
    }
    assert!(r["config"].is_object());
    let s = &r["summary"];
    assert_eq!(s["bytes_sent"], s["bytes_received"], "sent != received");
    let recv = s["bytes_received"].as_u64().unwrap();
    let dur = s["duration_s"].as_f64().unwrap();
    let bps = s["throughput_bps"].as_f64().unwrap();
    assert!(dur > 0.0);
    assert!((bps - recv as f64 * 8.0 / dur).abs() <= bps * 1e-9 + 1e-6);
    let mut per_stream = 0;
    for st in r["streams"].as_array().unwrap() {
        for k in [
            "id",
            "bytes_sent",
            "bytes_received",
            "bytes_verified",
            "throughput_bps",
            "tcp",
        ] {
            assert!(st.get(k).is_some(), "streams[].{k} missing");
        }
        assert_eq!(
            st["bytes_sent"], st["bytes_received"],
            "stream {} sent != received",
            st["id"]
        );
        per_stream += st["bytes_received"].as_u64().unwrap();
    }
    assert_eq!(per_stream, recv);
    let measured: u64 = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| !i["omitted"].as_bool().unwrap())
        .map(|i| i["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(measured, recv, "intervals do not add up to the total");
    for iv in r["intervals"].as_array().unwrap() {
        for k in ["start_s", "end_s", "bytes", "throughput_bps", "streams"] {
            assert!(iv.get(k).is_some(), "intervals[].{k} missing");
        }
        let sum: u64 = iv["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, iv["bytes"].as_u64().unwrap());
    }
}
