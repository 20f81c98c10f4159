//! The Windows build (x86_64-pc-windows-gnu, issue #50, docs/install.md), held by CI under Wine: the
//! Windows client against this build's Linux server and the Windows server against the Linux client,
//! TCP and UDP both ways, many streams, exact and verified; the drop-in (`landspeed.exe iperf3`)
//! against iperf3 3.21's own server and client; the ndt7 client; the archive and the HTML report; and
//! every Linux-only feature refused with one line. .ci/run builds the binary and names it in
//! LANDSPEED_WINDOWS_EXE; without it (a developer's `cargo test`) these skip, and under CI they fail.
//!
//! Wine 8 lacks `ProcessPrng`, which Rust's standard library imports on Windows: a stand-in
//! `bcryptprimitives.dll` (tests/it/wine/, built here with mingw-w64) goes beside the copy of the
//! .exe the tests run. What Wine cannot show is said in docs/install.md: it answers SIO_TCP_INFO with
//! an error (the Windows figures are then absent, as on a Windows older than 10 1703), and it runs
//! the program over Linux's sockets, so the port sharing of the UDP server is Linux's.

use crate::common;

use common::{free_port, ServerProc};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Where the tests run the Windows build from: a copy of the .exe beside the ProcessPrng stand-in,
/// and the Wine prefix they share (made on first use, about 8 s).
struct Stage {
    exe: PathBuf,
    prefix: PathBuf,
}

/// The staged Windows build, or None (a skip; a failure under CI).
fn stage() -> Option<&'static Stage> {
    static STAGE: OnceLock<Option<Stage>> = OnceLock::new();
    STAGE.get_or_init(make_stage).as_ref()
}

fn make_stage() -> Option<Stage> {
    let Some(exe) = std::env::var_os("LANDSPEED_WINDOWS_EXE").map(PathBuf::from) else {
        return common::missing(
            "LANDSPEED_WINDOWS_EXE names no binary (.ci/run builds it with cargo build --profile \
             cross-test --target x86_64-pc-windows-gnu -p landspeed)",
        );
    };
    assert!(
        exe.is_file(),
        "LANDSPEED_WINDOWS_EXE={} is not a file",
        exe.display()
    );
    if Command::new("wine").arg("--version").output().is_err() {
        return common::missing("wine is not installed (Debian's wine64)");
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("windows");
    std::fs::create_dir_all(&dir).unwrap();
    let staged = dir.join("landspeed.exe");
    std::fs::copy(&exe, &staged).unwrap();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/wine");
    let built = Command::new("x86_64-w64-mingw32-gcc")
        .args(["-shared", "-O2", "-o"])
        .arg(dir.join("bcryptprimitives.dll"))
        .arg(fixture.join("bcryptprimitives.c"))
        .arg(fixture.join("bcryptprimitives.def"))
        .arg("-ladvapi32")
        .output()
        .expect("x86_64-w64-mingw32-gcc (Debian's mingw-w64)");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let prefix = dir.join("prefix");
    persistent_wineserver(&prefix);
    Some(Stage { exe: staged, prefix })
}

/// One wineserver for the shared prefix for the whole run, leaving 60 s after its last client (by
/// default each `wine` starts one that leaves 3 s after the last: under a loaded CI machine a client
/// could meet a server on its way out). The prefix directory must exist for it; the first `wine`
/// then fills it. A server already running for the prefix is kept (wineserver says so and exits 2).
fn persistent_wineserver(prefix: &std::path::Path) {
    std::fs::create_dir_all(prefix).unwrap();
    let started = Command::new("wineserver")
        .arg("-p60")
        .env("WINEPREFIX", prefix)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("wineserver (Debian's wine)");
    assert!(
        matches!(started.code(), Some(0 | 2)),
        "wineserver -p60: {started}"
    );
}

/// `wine landspeed.exe ARGS` with the shared prefix and Wine's own chatter off.
fn wine(s: &Stage, args: &[&str]) -> Command {
    common::share();
    let mut c = Command::new("wine");
    c.arg(&s.exe)
        .args(args)
        .env("WINEPREFIX", &s.prefix)
        .env("WINEDEBUG", "-all")
        .stdin(Stdio::null());
    c
}

/// `wine landspeed.exe ARGS` run to its end, its output captured. Run once more if Wine's own
/// client lost its connection to the wineserver (`wine client error:…`, Wine's message, printed
/// before or without landspeed running): that is Wine's plumbing failing, not the program under
/// test, and it happened once in many CI runs (the persistent wineserver `make_stage` starts makes
/// it rarer still). Run once more too if it did not end within 120 s (a 1 s `TCP, 2 streams` test
/// under Wine hung once in many CI runs, cause not found); a command that hangs twice fails. Any other failure is the test's to judge.
fn run_wine(s: &Stage, args: &[&str], what: &str) -> Output {
    let child = common::spawn_captured(&mut wine(s, args), what);
    let (o, hung) = common::wait_output_or_kill(child, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&o.stderr).trim().to_string();
    if !hung && (o.status.success() || !stderr.contains("wine client error:")) {
        return o;
    }
    eprintln!(
        "{what}: {} ({stderr}; stdout {} bytes); once more",
        match hung {
            true => "no end in 120 s under Wine",
            false => "Wine's client lost the wineserver",
        },
        o.stdout.len()
    );
    common::captured(&mut wine(s, args), what)
}

/// A process killed when dropped (also when the test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `landspeed.exe serve` on a free loopback port, once it listens.
fn windows_server(s: &Stage, extra: &[&str]) -> (Killed, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["serve", "-p", &p, "--bind", "127.0.0.1"];
    args.extend(extra);
    let child = wine(s, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("wine landspeed.exe serve");
    let server = Killed(child);
    assert!(
        common::wait_until(Duration::from_secs(60), || common::listening(port)),
        "the Windows server never listened on {port}"
    );
    (server, port)
}

/// A one-second `run` against 127.0.0.1:PORT, as JSON, nothing archived.
fn run_args(port: &str, extra: &[&'static str]) -> Vec<String> {
    let mut a: Vec<String> = ["run", "127.0.0.1", "-p", port, "-t", "1s", "--json", "--no-save"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    a.extend(extra.iter().map(|x| x.to_string()));
    a
}

fn json_of(o: &Output, what: &str) -> Value {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{what}: not JSON ({e})"))
}

/// A paced TCP case kept to its rate: never above it by more than the engine's burst allowance
/// (256 KiB a stream) and rounding, whatever the machine's load (a floor would be a timing test).
fn assert_paced(r: &Value, extra: &[&str], what: &str) {
    if extra.contains(&"-u") || !extra.contains(&"-b") {
        return;
    }
    let rate = 300e6;
    let got = r["summary"]["throughput_bps"].as_f64().unwrap();
    assert!(got <= rate * 1.1, "{what}: {got} bit/s over the pace");
}

/// Every byte sent arrived and was checked against the payload pattern (and, for UDP, no datagram
/// was lost).
fn assert_exact_and_verified(r: &Value, what: &str) {
    let s = &r["summary"];
    let sent = s["bytes_sent"].as_u64().unwrap();
    assert!(sent > 0, "{what}: {s}");
    assert_eq!(s["bytes_received"], s["bytes_sent"], "{what}: {s}");
    assert_eq!(s["bytes_verified"], s["bytes_received"], "{what}: {s}");
    assert_eq!(s["corrupt_blocks"], 0, "{what}: {s}");
}

/// The tests of both pairings: TCP with two streams each way (a thread each, polled with WSAPoll:
/// never a blocking socket with timeouts on Windows), TCP paced each way (Windows has no kernel
/// pacing: the engine's cap),
/// and UDP each way at rates Wine's receive path keeps up with (it loses datagrams above about
/// 100 Mbit/s on this machine).
const CASES: [(&str, &[&str]); 6] = [
    ("TCP, 2 streams", &["-P", "2"]),
    ("TCP reverse, 2 streams", &["-P", "2", "-R"]),
    ("TCP paced at 300 Mbit/s, 3 streams", &["-P", "3", "-b", "300M"]),
    (
        "TCP reverse paced at 300 Mbit/s",
        &["-P", "3", "-b", "300M", "-R"],
    ),
    ("UDP 50 Mbit/s", &["-u", "-b", "50M"]),
    ("UDP reverse 20 Mbit/s", &["-u", "-b", "20M", "-R"]),
];

#[test]
fn the_windows_client_and_the_linux_server_agree_on_every_byte_both_ways() {
    let Some(s) = stage() else { return };
    let server = ServerProc::start("127.0.0.1", &[]);
    let port = server.port.to_string();
    for (what, extra) in CASES {
        let args = run_args(&port, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = json_of(&run_wine(s, &args, what), what);
        assert_exact_and_verified(&r, what);
        assert_paced(&r, extra, what);
        assert_eq!(r["local"]["host"]["os"], "Windows", "{what}: {}", r["local"]);
    }
}

#[test]
fn the_windows_server_and_the_linux_client_agree_on_every_byte_both_ways() {
    let Some(s) = stage() else { return };
    let (_server, port) = windows_server(s, &[]);
    let port = port.to_string();
    for (what, extra) in CASES {
        let mut c = Command::new(common::bin());
        c.args(run_args(&port, extra));
        let r = json_of(&common::captured(&mut c, what), what);
        assert_exact_and_verified(&r, what);
        assert_paced(&r, extra, what);
    }
    // Both ends on Windows: no stream on a blocking socket with timeouts (a Winsock call that times
    // out leaves its socket indeterminate), whichever end sends.
    for extra in [&["-P", "2"][..], &["-P", "2", "--bidir"]] {
        let args = run_args(&port, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = json_of(&run_wine(s, &args, "both"), "both");
        assert_exact_and_verified(&r, "both ends on Windows");
        let engine = r["data_path"]["engine"].as_str().unwrap_or_default();
        assert!(engine.starts_with("epoll, non-blocking"), "{extra:?}: {engine}");
    }
}

/// The drop-in's `-J` totals: (sent, received) bytes.
fn iperf3_totals(o: &Output, what: &str) -> (u64, u64) {
    let j = json_of(o, what);
    let end = &j["end"];
    let n = |v: &Value| v["bytes"].as_u64().unwrap_or_else(|| panic!("{what}: {end}"));
    (n(&end["sum_sent"]), n(&end["sum_received"]))
}

#[test]
fn the_windows_drop_in_runs_against_iperf3_s_server_and_serves_iperf3_s_client() {
    let Some(s) = stage() else { return };
    let Some(iperf3) = crate::iperf3_auth::iperf3_321() else {
        return;
    };
    // The drop-in's client against iperf3 3.21's server.
    let port = free_port().to_string();
    let server = Command::new(&iperf3)
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 3.21 -s");
    let _server = Killed(server);
    let p: u16 = port.parse().unwrap();
    assert!(common::wait_until(Duration::from_secs(10), || common::listening(
        p
    )));
    let o = common::captured(
        &mut wine(
            s,
            &[
                "iperf3",
                "-c",
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                "1",
                "-P",
                "2",
                "-J",
            ],
        ),
        "the drop-in's client",
    );
    let (sent, received) = iperf3_totals(&o, "the drop-in's client");
    assert!(sent > 0 && received > 0 && received <= sent, "{sent} {received}");
    // iperf3 3.21's client against the drop-in's server, TCP then UDP.
    let (_dropin, port) = windows_server(s, &[]);
    let port = port.to_string();
    for extra in [
        &["-R"][..],
        &["-b", "100M", "-P", "2"][..],
        &["-u", "-b", "20M"][..],
    ] {
        let mut c = Command::new(&iperf3);
        c.args(["-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"])
            .args(extra);
        let (sent, received) = iperf3_totals(
            &common::captured(&mut c, "iperf3 3.21's client"),
            "iperf3 3.21's client",
        );
        assert!(sent > 0 && received > 0, "{extra:?}: {sent} {received}");
    }
}

#[test]
fn the_windows_ndt7_client_verifies_a_download_from_the_linux_server() {
    let Some(s) = stage() else { return };
    let server = ServerProc::start("127.0.0.1", &["--ndt7", "127.0.0.1:0", "--ndt7-plain"]);
    let url = format!("ws://{}", crate::ndt7::ndt7_addr(&server));
    let o = run_wine(
        s,
        &["run", "--ndt7", &url, "-R", "--json", "--no-save"],
        "the ndt7 client",
    );
    let r = json_of(&o, "the ndt7 client");
    assert_eq!(r["protocol"], "ndt7");
    assert_eq!(r["payload"]["verified"], true, "{r}");
    let got = r["summary"]["bytes_received"].as_u64().unwrap();
    assert!(
        got > 0 && r["summary"]["bytes_verified"].as_u64() == Some(got),
        "{r}"
    );
}

#[test]
fn the_windows_build_archives_its_runs_and_writes_the_html_report() {
    let Some(s) = stage() else { return };
    let server = ServerProc::start("127.0.0.1", &[]);
    let dir = tempdir("windows-report");
    let db = format!("Z:{}", dir.0.join("archive.db").display());
    let html = format!("Z:{}", dir.0.join("report.html").display());
    let port = server.port.to_string();
    let run = run_wine(
        s,
        &["run", "127.0.0.1", "-p", &port, "-t", "1s", "--db", &db],
        "an archived run",
    );
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("every byte sent was received"), "{text}");
    let report = run_wine(s, &["report", "1", "--db", &db, "--html", &html], "report --html");
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let page = std::fs::read_to_string(dir.0.join("report.html")).expect("the HTML report");
    assert!(
        page.contains("<svg") && page.contains("Windows"),
        "{} bytes",
        page.len()
    );
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir(what: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("landspeed-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

#[test]
fn the_windows_build_says_what_it_is_and_refuses_what_windows_lacks_in_one_line() {
    let Some(s) = stage() else { return };
    let v = run_wine(s, &["--version"], "--version");
    let line = String::from_utf8_lossy(&v.stdout);
    assert!(
        line.contains("built for x86_64-pc-windows-gnu; Windows "),
        "{line}"
    );
    assert!(
        line.contains("built in: TLS, QUIC") && !line.contains("io_uring"),
        "{line}"
    );
    // Refused before anything connects: nothing listens on this port.
    let port = free_port().to_string();
    let refusals: [(&[&str], &str); 9] = [
        (&["--io", "uring"], "io_uring: not available on windows"),
        (
            &["--tx", "zerocopy"],
            "splice and MSG_ZEROCOPY: not available on windows",
        ),
        (&["--mptcp"], "MPTCP: not available on windows"),
        (
            &["-C", "cubic"],
            "choosing congestion control: not available on windows",
        ),
        (
            &["--fq-rate", "1G"],
            "kernel pacing (--fq-rate): not available on windows",
        ),
        (&["-M", "1400"], "setting the MSS: not available on windows"),
        (
            &["--rcvlowat", "64K"],
            "the receive low-water mark: not available on windows",
        ),
        (
            &["-u", "--dont-fragment"],
            "Don't Fragment on UDP: not available on windows",
        ),
        (
            &["--bind-dev", "eth0"],
            "binding to a device (--bind-dev): not available on windows",
        ),
    ];
    for (extra, says) in refusals {
        let mut args = vec!["run", "127.0.0.1", "-p", &port, "-t", "1", "--no-save"];
        args.extend(extra);
        assert_one_line_refusal(run_wine(s, &args, says), says);
    }
    let others: [(&[&str], &str); 3] = [
        (
            &["wan", "up", "lfn", "--rtt", "10ms"],
            "WAN emulator: not available on windows",
        ),
        (&["tune"], "host tuning (tune): not available on windows"),
        (
            &["path", "127.0.0.1", "--trace"],
            "traceroute and path MTU probing are not available on windows",
        ),
    ];
    for (args, says) in others {
        assert_one_line_refusal(run_wine(s, args, says), says);
    }
    let daemon = common::captured(&mut wine(s, &["iperf3", "-s", "-D", "-p", &port]), "iperf3 -s -D");
    let err = String::from_utf8_lossy(&daemon.stderr);
    assert!(
        !daemon.status.success() && err.contains("running as a daemon (-D) is not available on windows"),
        "{err}"
    );
}

/// A failure (not a crash) whose message is one line saying `says` and what to use instead.
fn assert_one_line_refusal(o: Output, says: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{says}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{says}: {err}");
    assert!(
        lines[0].contains(says) && lines[0].contains("use "),
        "{says}: {err}"
    );
}
