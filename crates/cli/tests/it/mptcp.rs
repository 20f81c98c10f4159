//! Multipath TCP (`run --mptcp`): on loopback the data connections are MPTCP with one subflow and every
//! byte verified; a server listening with plain TCP (`serve --no-mptcp`) is a fallback the result says;
//! (root, CI) a namespace with MPTCP turned off is a one-line error, and two links between two
//! namespaces (two veth pairs, each shaped to 200 Mbit/s by tbf) give a connection two subflows that
//! both carry a fifth of its bytes or more, each named with its addresses.

use crate::common;

use common::wan::root;
use common::{bin, command, ip, landspeed, run_json, run_text, wait_output, ServerProc};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

fn mptcp_of(stream: &Value) -> &Value {
    let sender = &stream["tcp"]["mptcp"];
    if sender.is_null() {
        &stream["receiver_tcp"]["mptcp"]
    } else {
        sender
    }
}

#[test]
fn loopback_mptcp_has_one_subflow_per_stream_and_verifies_every_byte() {
    let s = ServerProc::start("127.0.0.1", &[]);
    for dir in [None, Some("-R")] {
        let mut args = vec!["--mptcp", "-P", "2", "-t", "1", "--no-save"];
        args.extend(dir);
        let r = run_json("127.0.0.1", s.port, &args);
        assert_eq!(r["config"]["mptcp"], true, "{dir:?}");
        for st in r["streams"].as_array().unwrap() {
            let m = mptcp_of(st);
            assert_eq!(m["subflows"], 1, "{dir:?}: {st}");
            let paths = m["paths"].as_array().unwrap();
            assert_eq!(paths.len(), 1, "{dir:?}: {m}");
            assert!(
                paths[0]["local"].as_str().unwrap().starts_with("127.0.0.1:"),
                "{m}"
            );
            assert!(
                paths[0]["bytes_acked"].as_u64().unwrap() + paths[0]["bytes_received"].as_u64().unwrap() > 0
            );
            assert_eq!(st["bytes_verified"], st["bytes_received"], "{dir:?}");
        }
        let warnings = r["warnings"].to_string();
        assert!(!warnings.contains("fell back"), "{warnings}");
    }
    let text = run_text(
        s.port,
        &["--mptcp", "-t", "0.5", "--no-save"],
        Duration::from_secs(30),
    );
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("MPTCP test"), "{}", text.stdout);
    assert!(text.stdout.contains("stream    0: 1 subflow "), "{}", text.stdout);
}

#[test]
fn record_and_the_archive_name_the_transport() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let (_archive, std_tcp) = common::archived_transport(s.port, &["--mptcp"], "mptcp");
    assert_eq!(std_tcp["passed"], false, "{std_tcp}");
    assert!(
        std_tcp["evidence"].as_str().unwrap().contains("Multipath TCP"),
        "{std_tcp}"
    );
}

#[test]
fn a_plain_tcp_server_is_a_fallback_the_result_says() {
    let s = ServerProc::start("127.0.0.1", &["--no-mptcp"]);
    let r = run_json("127.0.0.1", s.port, &["--mptcp", "-t", "0.5", "--no-save"]);
    assert!(mptcp_of(&r["streams"][0]).is_null(), "{}", r["streams"][0]);
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("fell back to plain TCP"), "{warnings}");
    let text = run_text(
        s.port,
        &["--mptcp", "-t", "0.5", "--no-save"],
        Duration::from_secs(30),
    );
    assert!(
        text.stdout.contains("stream    0: fell back to plain TCP"),
        "{}",
        text.stdout
    );
    // Plain TCP clients of an MPTCP listener are plain TCP.
    let plain = ServerProc::start("127.0.0.1", &[]);
    let r = run_json("127.0.0.1", plain.port, &["-t", "0.3", "--no-save"]);
    assert!(r["streams"][0]["tcp"]["mptcp"].is_null() && r["streams"][0]["receiver_tcp"]["mptcp"].is_null());
}

#[test]
fn mptcp_with_udp_or_pacing_is_a_usage_error() {
    let o = landspeed(&["run", "127.0.0.1", "-u", "--mptcp"], Duration::from_secs(10));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("--mptcp") && o.stderr.contains("--udp"),
        "{}",
        o.stderr
    );
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Namespaces made for one test, deleted (with every process in them) when dropped.
struct Namespaces(Vec<String>);

impl Namespaces {
    fn new(count: usize) -> Namespaces {
        let tag = format!(
            "lsm{}{}",
            std::process::id() % 100_000,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let names: Vec<String> = (0..count).map(|i| format!("{tag}-{i}")).collect();
        let ns = Namespaces(names);
        for n in &ns.0 {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ns
    }

    fn exec(&self, i: usize, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0[i]]).args(args);
        c
    }

    /// `landspeed serve` in namespace `i`, waited for until it listens; its output stays open.
    fn serve(&self, i: usize, args: &[&str]) -> (std::process::Child, impl Sized) {
        let mut c = self.exec(i, &[bin(), "serve"]);
        let mut child = c
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let reader = common::wait_for_line(out, "listening");
        (child, reader)
    }

    fn landspeed(&self, i: usize, args: &[&str]) -> std::process::Output {
        let mut c = self.exec(i, &[bin()]);
        let child = c
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_output(child, Duration::from_secs(60)).expect("landspeed hung")
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            if let Ok(o) = Command::new("ip").args(["netns", "pids", n]).output() {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).output();
                }
            }
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

#[test]
fn mptcp_turned_off_in_the_namespace_is_a_one_line_error() {
    let Some(_root) = root() else { return };
    let ns = Namespaces::new(1);
    ip(&["netns", "exec", &ns.0[0], "sysctl", "-qw", "net.mptcp.enabled=0"]);
    let (mut server, _out) = ns.serve(0, &["--bind", "127.0.0.1", "--port", "5201"]);
    let o = ns.landspeed(0, &["run", "127.0.0.1", "--mptcp", "-t", "1", "--no-save"]);
    let _ = server.kill();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("net.mptcp.enabled=0"), "{stderr}");
}

#[test]
fn two_links_carry_two_subflows() {
    let Some(_root) = root() else { return };
    let ns = Namespaces::new(2);
    let (a, b) = (&ns.0[0], &ns.0[1]);
    for link in 1..=2 {
        let (ea, eb) = (format!("a{link}"), format!("b{link}"));
        ip(&[
            "link", "add", &ea, "netns", a, "type", "veth", "peer", "name", &eb, "netns", b,
        ]);
        for (n, dev, host) in [(a, &ea, 1), (b, &eb, 2)] {
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("10.201.{link}.{host}/24"),
                "dev",
                dev,
            ]);
            ip(&["-n", n, "link", "set", dev, "up"]);
            // Each link an emulated 200 Mbit/s one, so neither can carry the whole test alone.
            command(&[
                "tc", "-n", n, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", "200mbit", "burst",
                "64kb", "latency", "20ms",
            ]);
        }
    }
    ip(&[
        "-n",
        b,
        "mptcp",
        "endpoint",
        "add",
        "10.201.2.2",
        "dev",
        "b2",
        "signal",
    ]);
    ip(&[
        "-n",
        a,
        "mptcp",
        "limits",
        "set",
        "subflow",
        "2",
        "add_addr_accepted",
        "2",
    ]);
    let (mut server, _out) = ns.serve(1, &["--port", "5201"]);
    let o = ns.landspeed(
        0,
        &["run", "10.201.1.2", "--mptcp", "-t", "3", "--no-save", "--json"],
    );
    let _ = server.kill();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = mptcp_of(&r["streams"][0]);
    assert_eq!(m["subflows"], 2, "{m}");
    let paths = m["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{m}");
    let carried: Vec<u64> = paths.iter().map(|p| p["bytes_acked"].as_u64().unwrap()).collect();
    let total: u64 = carried.iter().sum();
    for (p, c) in paths.iter().zip(&carried) {
        assert!(*c * 5 > total, "a subflow carried {c} of {total} bytes: {m}");
        let local = p["local"].as_str().unwrap();
        assert!(
            local.starts_with("10.201.1.1:") || local.starts_with("10.201.2.1:"),
            "{p}"
        );
    }
    assert_eq!(
        r["streams"][0]["bytes_verified"],
        r["streams"][0]["bytes_received"]
    );
}
