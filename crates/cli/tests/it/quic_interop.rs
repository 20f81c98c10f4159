//! The QUIC performance protocol against QUIC stacks nobody on the team wrote, both ways: a small
//! perf peer on Python's aioquic (tests/peers/aioquic_perf.py; slow, so a few MiB) and one on
//! quic-go (tests/peers/quicgo, built here with the Go toolchain from the module proxy). landspeed's
//! `run --quic-perf` uploads to and downloads from each peer's server, and each peer's client
//! uploads to and downloads from `landspeed serve`, whose log counts the bytes. .ci/run installs
//! aioquic; with CI set, a missing peer fails the test instead of skipping it.

use crate::common;

use common::{landspeed, run_json, ServerProc};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const T: Duration = Duration::from_secs(120);

fn peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// A peer's server process, killed when dropped.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a peer server and waits for its "listening PORT" line.
fn start(mut cmd: Command) -> Peer {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening"), "peer said {line:?}");
    Peer(child)
}

/// A peer client's one request against `port`: its JSON line.
fn client(mut cmd: Command) -> serde_json::Value {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = common::wait_output(child, T).expect("the peer client hung");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn aioquic() -> Option<()> {
    let ok = Command::new("python3")
        .args(["-c", "import aioquic"])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(())
    } else {
        common::missing("Python's aioquic is not installed (pip install aioquic)")
    }
}

/// Builds the quic-go peer once per test run.
fn quicgo() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let go = ["go", "/usr/local/go/bin/go"]
                .into_iter()
                .find(|g| Command::new(g).arg("version").output().is_ok());
            let Some(go) = go else {
                return common::missing("the Go toolchain is not installed");
            };
            let out = std::env::temp_dir().join(format!("landspeed-quicgo-{}", std::process::id()));
            let built = Command::new(go)
                .args(["build", "-o"])
                .arg(&out)
                .arg(".")
                .current_dir(peers().join("quicgo"))
                .status()
                .is_ok_and(|s| s.success());
            assert!(built, "go build of the quic-go peer failed");
            Some(out)
        })
        .clone()
}

/// landspeed's perf client against a peer's server on `port`: an upload and a download of `bytes`.
fn landspeed_against(port: u16, bytes: &str, expect: u64) {
    for dir in [None, Some("-R")] {
        let mut args = vec!["--quic-perf", "--insecure", "-n", bytes, "--no-save"];
        args.extend(dir);
        let r = run_json("127.0.0.1", port, &args);
        assert_eq!(
            r["summary"]["bytes_received"], expect,
            "{dir:?}: {}",
            r["summary"]
        );
        assert_eq!(r["protocol"], "quic-perf");
        assert_eq!(r["payload"]["verified"], false);
        let warnings = r["warnings"].to_string();
        assert!(warnings.contains("nothing was verified"), "{warnings}");
        if dir.is_some() {
            assert_eq!(
                r["payload"]["different_data_every_packet"], false,
                "{}",
                r["payload"]
            );
        }
    }
}

/// Request/response over the perf protocol against the server on `port` (a peer's or landspeed's):
/// transactions on one connection, four in flight, each answer the length asked for; then a
/// connection each, every handshake timed.
pub(crate) fn transactions_against(port: u16) {
    let r = run_json(
        "127.0.0.1",
        port,
        &[
            "--quic-perf",
            "--insecure",
            "--rr",
            "--in-flight",
            "4",
            "--request",
            "200",
            "--response",
            "3000",
            "-t",
            "1",
            "--no-save",
        ],
    );
    let t = &r["transactions"];
    let n = t["transactions"].as_u64().unwrap();
    assert!(n > 20, "{t}");
    assert_eq!(t["shape"]["kind"], "QUIC perf request/response");
    assert_eq!(
        (&t["shape"]["in_flight"], &t["shape"]["response_bytes"]),
        (&4.into(), &3000.into())
    );
    // Every answer came whole: the answers' bytes are exactly those asked for.
    let down = r["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["flow"] == "server_to_client")
        .expect("the answers' direction");
    assert_eq!(
        down["summary"]["bytes_received"].as_u64(),
        Some(n * 3000),
        "{down}"
    );
    assert_eq!(r["payload"]["corrupt_blocks"], 0);
    assert_eq!(
        r["payload"]["verified"], false,
        "a perf server's bytes are its own"
    );
    let c = run_json(
        "127.0.0.1",
        port,
        &[
            "--quic-perf",
            "--insecure",
            "--connect-rate",
            "-t",
            "1",
            "--no-save",
        ],
    );
    let t = &c["transactions"];
    let n = t["transactions"].as_u64().unwrap();
    assert!(n > 5, "{t}");
    assert_eq!(
        t["connect"]["connections"].as_u64(),
        Some(n),
        "a handshake each: {t}"
    );
    let handshake = t["connect"]["latency"]["p50_ms"].as_f64().unwrap();
    let whole = t["latency"]["p50_ms"].as_f64().unwrap();
    assert!(handshake > 0.0 && handshake < whole, "{handshake} of {whole} ms");
}

/// A peer's client against `landspeed serve`: the bytes it got, and the server's log of them.
fn peer_against_landspeed(cmd: impl Fn(u16) -> Command, up: u64, down: u64) {
    let s = ServerProc::start("127.0.0.1", &[]);
    let v = client(cmd(s.port));
    assert_eq!(v["downloaded"], down, "{v}");
    let line = s.next_line(Duration::from_secs(10)).expect("no log line");
    assert!(line.contains("quic perf test"), "{line}");
    assert!(line.contains(&format!("received {up} B")), "{line}");
    assert!(line.contains(&format!("sent {down} B")), "{line}");
    assert!(line.ends_with(": ok"), "{line}");
}

#[test]
fn aioquic_server_and_client() {
    if aioquic().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("landspeed-aioquic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("c.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("k.pem"), ck.signing_key.serialize_pem()).unwrap();
    let port = common::free_port();
    let script = peers().join("aioquic_perf.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script).args(["server", &port.to_string()]);
    cmd.arg(dir.join("c.pem")).arg(dir.join("k.pem"));
    let peer = start(cmd);
    landspeed_against(port, "3M", 3 << 20);
    transactions_against(port);
    drop(peer);
    peer_against_landspeed(
        |p| {
            let mut c = Command::new("python3");
            c.arg(&script)
                .args(["client", "127.0.0.1", &p.to_string(), "2000000", "3000000"]);
            c
        },
        2_000_000,
        3_000_000,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quic_go_server_and_client() {
    let Some(bin) = quicgo() else {
        return;
    };
    let port = common::free_port();
    let mut cmd = Command::new(&bin);
    cmd.args(["server", &port.to_string()]);
    let peer = start(cmd);
    landspeed_against(port, "64M", 64 << 20);
    // Timed: the download asks for everything and is stopped when the time is up.
    let r = run_json(
        "127.0.0.1",
        port,
        &["--quic-perf", "--insecure", "-R", "-t", "1", "--no-save"],
    );
    assert!(r["summary"]["bytes_received"].as_u64().unwrap() > 0);
    transactions_against(port);
    drop(peer);
    peer_against_landspeed(
        |p| {
            let mut c = Command::new(&bin);
            c.args(["client", &format!("127.0.0.1:{p}"), "20000000", "30000000"]);
            c
        },
        20_000_000,
        30_000_000,
    );
    let _ = std::fs::remove_file(&bin);
}

#[test]
fn landspeed_serves_its_own_perf_client_within_its_limits() {
    let s = ServerProc::start("127.0.0.1", &[]);
    landspeed_against(s.port, "16M", 16 << 20);
    transactions_against(s.port);
    // What a QUIC request/response test cannot be is refused in one line.
    let o = perf_client(
        s.port,
        &["--insecure", "--connect-rate", "-t", "1", "--request", "5"],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    // Pinned to the certificate the server logged: checked, so no warning about it.
    let pin = s.first_line.rsplit("sha256:").next().unwrap().trim().to_string();
    let r = run_json(
        "127.0.0.1",
        s.port,
        &["--quic-perf", "--tls-pin", &pin, "-n", "2M", "--no-save"],
    );
    assert!(
        !r["warnings"].to_string().contains("not checked"),
        "{}",
        r["warnings"]
    );
    let o = perf_client(s.port, &["-n", "1M"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("--tls-pin SHA256, or --insecure"),
        "{}",
        o.stderr
    );
    // A port with no QUIC behind it: a one-line error within the connect timeout.
    let o = perf_client(common::free_port(), &["--insecure", "--connect-timeout", "1s"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("no QUIC answer"), "{}", o.stderr);
}

/// `landspeed run 127.0.0.1 -p PORT --quic-perf --no-save EXTRA...`.
fn perf_client(port: u16, extra: &[&str]) -> common::Outcome {
    let p = port.to_string();
    let mut args = vec!["run", "127.0.0.1", "-p", &p, "--quic-perf", "--no-save"];
    args.extend_from_slice(extra);
    landspeed(&args, T)
}

#[test]
fn perf_clients_are_refused_outside_allow_and_without_keys() {
    let s = ServerProc::start("127.0.0.1", &["--allow", "192.0.2.0/24"]);
    let o = perf_client(s.port, &["--insecure", "-n", "1M"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("refused"), "{}", o.stderr);
    let dir = std::env::temp_dir().join(format!("landspeed-perf-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("keys");
    std::fs::write(&keys, "ops 00112233445566778899aabbccddeeff\n").unwrap();
    std::fs::set_permissions(&keys, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let o = perf_client(s.port, &["--insecure", "-n", "1M"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    // The run's warnings come as the streams start; the error that ends it is one line.
    let last = o.stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("error: ") && last.contains("requires authentication"),
        "{}",
        o.stderr
    );
    let line = s.next_line(Duration::from_secs(10)).expect("no log line");
    assert!(line.contains("cannot authenticate"), "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}
