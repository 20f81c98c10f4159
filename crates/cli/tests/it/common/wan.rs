//! The WAN emulator for tests, as root: one emulated path at a time (a lock), taken down with every
//! process started in it when its guard drops, also when the test fails. Without root the tests skip,
//! unless CI is set, where they fail.

use super::{bin, landspeed, Outcome};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
static NEXT: AtomicU32 = AtomicU32::new(0);

extern "C" {
    fn geteuid() -> u32;
}

/// The lock, or None when the test must be skipped (not root, not in CI).
pub fn root() -> Option<MutexGuard<'static, ()>> {
    // SAFETY: geteuid cannot fail.
    if unsafe { geteuid() } != 0 {
        assert!(
            std::env::var_os("CI").is_none(),
            "WAN emulator tests need root, and CI is set: run them as root"
        );
        eprintln!("skipping: the WAN emulator needs root");
        return None;
    }
    Some(super::take(&ONE_AT_A_TIME))
}

/// The same lock without the root check, for loopback tests that load both CPUs: holding it keeps them
/// from running beside an emulator test, whose userspace forwarder they would starve (its RTT and
/// rate figures are what those tests assert).
#[allow(dead_code)]
pub fn serial() -> MutexGuard<'static, ()> {
    super::take(&ONE_AT_A_TIME)
}

fn unique_name() -> String {
    format!(
        "t{}{}",
        std::process::id() % 100_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// An emulator that is taken down, with every process started in it, when dropped.
pub struct Wan {
    pub name: String,
    pub servers: Vec<Child>,
}

impl Wan {
    pub fn up(args: &[&str]) -> Wan {
        let name = unique_name();
        let mut all = vec!["wan", "up", name.as_str()];
        all.extend_from_slice(args);
        let o = landspeed(&all, Duration::from_secs(30));
        let w = Wan {
            name,
            servers: vec![],
        };
        assert_eq!(o.code, 0, "wan up failed: {}{}", o.stdout, o.stderr);
        w
    }

    pub fn status(&self) -> Value {
        let o = landspeed(&["wan", "status", &self.name, "--json"], Duration::from_secs(10));
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("status not JSON ({e}): {}", o.stdout))
    }

    /// Starts `landspeed serve` in host B and waits until it listens.
    pub fn serve_in_b(&mut self) {
        drop(self.serve_in_b_with(&[]));
    }

    /// Starts `landspeed serve EXTRA` in host B, waits until it listens, and returns its log lines
    /// (one a test) as they come.
    pub fn serve_in_b_with(&mut self, extra: &[&str]) -> std::sync::mpsc::Receiver<String> {
        let mut child = Command::new(bin())
            .args(["wan", "exec", &self.name, "b", "--", bin(), "serve"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn server in b");
        let out = child.stdout.take().unwrap();
        self.servers.push(child);
        let mut out = BufReader::new(out);
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.contains("listening"), "server said {line:?}");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        rx
    }

    /// `landspeed run 198.18.0.2 ARGS --json` from host A; returns (exit code, result).
    pub fn run_from_a(&self, args: &[&str]) -> (i32, Value) {
        let mut all = vec![
            "wan",
            "exec",
            &self.name,
            "a",
            "--",
            bin(),
            "run",
            "198.18.0.2",
            "--json",
        ];
        all.extend_from_slice(args);
        let o = landspeed(&all, Duration::from_secs(90));
        let v = serde_json::from_str(&o.stdout)
            .unwrap_or_else(|e| panic!("run not JSON ({e}): {}\n{}", o.stdout, o.stderr));
        (o.code, v)
    }

    pub fn run_ok(&self, args: &[&str]) -> Value {
        let (code, v) = self.run_from_a(args);
        assert_eq!(code, 0, "run {args:?} failed: {v}");
        v
    }
}

impl Wan {
    /// Any command run in host A (`wan exec NAME a -- CMD`).
    pub fn in_exec_a(&self, cmd: &[&str], timeout: Duration) -> Outcome {
        let mut all = vec!["wan", "exec", &self.name, "a", "--"];
        all.extend_from_slice(cmd);
        landspeed(&all, timeout)
    }

    /// `landspeed ARGS` run in host A.
    pub fn in_a(&self, args: &[&str], timeout: Duration) -> Outcome {
        let mut all = vec![bin()];
        all.extend_from_slice(args);
        self.in_exec_a(&all, timeout)
    }
}

impl Drop for Wan {
    fn drop(&mut self) {
        for c in &mut self.servers {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = landspeed(&["wan", "down", &self.name], Duration::from_secs(30));
    }
}
