//! Bad input gets one clear line on stderr and the right exit code (2 usage, 1 runtime), never a panic
//! and never a hang.

use crate::common;
use common::*;
use std::time::Duration;

fn assert_one_clear_line(o: &Outcome, code: i32, needle: &str) {
    assert_eq!(o.code, code, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    assert!(
        o.stderr.to_lowercase().contains(&needle.to_lowercase()),
        "expected {needle:?} in stderr: {}",
        o.stderr
    );
}

#[test]
fn nonsense_size_is_a_usage_error() {
    let o = landspeed(&["run", "127.0.0.1", "-l", "12Q"], Duration::from_secs(10));
    assert_one_clear_line(&o, 2, "unknown unit");
}

#[test]
fn nonsense_duration_is_a_usage_error() {
    let o = landspeed(&["run", "127.0.0.1", "-t", "soon"], Duration::from_secs(10));
    assert_one_clear_line(&o, 2, "not a number");
}

#[test]
fn zero_streams_is_a_usage_error() {
    let o = landspeed(&["run", "127.0.0.1", "-P", "0"], Duration::from_secs(10));
    assert_one_clear_line(&o, 2, "streams must be 1..=1024");
}

#[test]
fn too_many_streams_is_a_usage_error() {
    let o = landspeed(&["run", "127.0.0.1", "-P", "5000"], Duration::from_secs(10));
    assert_one_clear_line(&o, 2, "-P/--streams must be 1..=1024");
}

/// An open-file limit too low for the streams asked for is said before anything is sent: one line
/// with the limit and what to raise it to, exit 1, and the server never hears of the test.
#[test]
fn an_open_file_limit_too_low_for_the_streams_is_said_before_the_test() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let port = s.port.to_string();
    let run = [
        "run",
        "127.0.0.1",
        "-p",
        &port,
        "-P",
        "100",
        "-t",
        "1",
        "--no-save",
    ];
    let o = outcome(with_fd_limit(40, &run), Duration::from_secs(20));
    assert_one_clear_line(&o, 1, "100 streams need about 164 open files");
    assert!(o.stderr.contains("open-file limit is 40"), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert_eq!(
        s.next_line(Duration::from_millis(500)),
        None,
        "the server saw a test"
    );
}

#[test]
fn absurd_window_is_a_usage_error() {
    let o = landspeed(&["run", "127.0.0.1", "-w", "8G"], Duration::from_secs(10));
    assert_one_clear_line(&o, 2, "window must be");
}

#[test]
fn unknown_host_is_a_runtime_error() {
    let o = landspeed(&["run", "no-such-host.invalid"], Duration::from_secs(30));
    assert_one_clear_line(&o, 1, "cannot resolve host 'no-such-host.invalid'");
}

#[test]
fn refused_port_is_a_runtime_error() {
    // Bind then drop a listener to find a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &port.to_string(), "-t", "1"],
        Duration::from_secs(15),
    );
    assert_one_clear_line(&o, 1, "connection refused");
}

#[test]
fn a_peer_speaking_another_protocol_is_named() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut c, _) = l.accept().unwrap();
        let mut b = [0u8; 64];
        let _ = c.read(&mut b);
        let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    });
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &port.to_string(), "-t", "1"],
        Duration::from_secs(20),
    );
    t.join().unwrap();
    assert_one_clear_line(&o, 1, "does not speak the landspeed protocol");
}

#[test]
fn a_silent_peer_times_out() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &port.to_string(), "-t", "1"],
        Duration::from_secs(30),
    );
    drop(l);
    assert_one_clear_line(&o, 1, "no landspeed answer");
}

#[test]
fn a_file_moving_against_the_test_direction_is_named_with_its_flag() {
    // Refused before any connection: port 1 is never tried. The library's typed reason names no flag;
    // the command line adds it.
    let file = std::env::temp_dir().join(format!("landspeed-direction-{}", std::process::id()));
    std::fs::write(&file, b"payload").unwrap();
    let path = file.to_str().unwrap();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", "1", "--send-file", path, "-R"],
        Duration::from_secs(10),
    );
    assert_one_clear_line(&o, 1, "--send-file sends from this end: no -R or --bidir");
    let o = landspeed(
        &["run", "127.0.0.1", "-p", "1", "--recv-file", path],
        Duration::from_secs(10),
    );
    assert_one_clear_line(&o, 1, "--recv-file receives at this end: it needs -R");
    let _ = std::fs::remove_file(&file);
}

#[test]
fn unknown_congestion_control_is_reported() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let o = landspeed(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &s.port.to_string(),
            "-t",
            "1",
            "-C",
            "nosuchcc",
        ],
        Duration::from_secs(30),
    );
    assert_one_clear_line(&o, 1, "congestion control 'nosuchcc' is not available");
}

#[test]
fn window_above_the_kernel_limit_warns_naming_the_sysctl() {
    let rmem: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let want = (rmem * 4).min(1 << 30);
    if want / 2 <= rmem {
        eprintln!("skipped: rmem_max {rmem} is already above what this test can request");
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    let o = landspeed(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &s.port.to_string(),
            "-n",
            "1M",
            "-w",
            &want.to_string(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("net.core.rmem_max"), "{}", o.stderr);
    assert!(o.stdout.contains("kernel granted"), "{}", o.stdout);
}

#[test]
fn server_dying_mid_test_ends_the_client_with_an_error() {
    let mut s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let mut client = std::process::Command::new(bin())
        .args(["run", "127.0.0.1", "-p", &p, "-t", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first interval line shows the test running, kill the server outright.
    let rest = wait_for_line(client.stdout.take().unwrap(), "[  0]");
    std::thread::spawn(move || std::io::copy(&mut rest.into_inner(), &mut std::io::sink()));
    drop(s.child.take().map(|mut c| c.kill()));
    let killed = std::time::Instant::now();
    let out = wait_output(client, Duration::from_secs(45)).expect("client hung after the server died");
    // The kernel closes a killed process's sockets at once: the client hears it within a second
    // (stated margin: 3 s on a busy machine).
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "{:?}",
        killed.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("landspeed: error:"), "{err}");
    assert!(err.contains("the server went away while running"), "{err}");
}

#[test]
fn pinning_to_a_missing_cpu_is_refused_on_either_end() {
    let o = landspeed(&["run", "127.0.0.1", "--cpus", "4000"], Duration::from_secs(10));
    assert_one_clear_line(&o, 2, "CPU 4000 is not available");
    let s = ServerProc::start("127.0.0.1", &[]);
    let o = landspeed(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &s.port.to_string(),
            "-t",
            "1",
            "--server-cpus",
            "4000",
        ],
        Duration::from_secs(20),
    );
    assert_one_clear_line(&o, 1, "CPU 4000 is not available");
}

/// A client arriving while its address already holds more idle connections than the greeting cap (64
/// per address) is told the server is busy and that a retry can work, in its own protocol: landspeed's
/// typed `Rejected`, and iperf3's ACCESS_DENIED for an iperf3 cookie.
#[test]
fn a_client_over_the_greeting_cap_learns_the_server_is_busy() {
    let s = ServerProc::start("127.0.0.1", &["--handshake-timeout", "30s"]);
    let idle: Vec<std::net::TcpStream> = (0..300)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    // Wait until the server has taken them all: those over the cap are refused and counted (the log
    // has a few lines of them, RefusalGate; the counters have every one).
    let mut stats = String::new();
    let all_counted = common::wait_until(Duration::from_secs(30), || {
        common::signal(s.process(), libc::SIGUSR1);
        stats = common::line_with(&s, "stats:");
        let busy = stats
            .split("refused: ")
            .nth(1)
            .and_then(|r| r.split(", ").find(|k| k.ends_with(" busy")))
            .and_then(|k| k.split(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        busy >= 300 - 64
    });
    assert!(all_counted, "{stats}");
    let p = s.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-t", "1", "--no-save"],
        Duration::from_secs(30),
    );
    assert_one_clear_line(&o, 1, "busy");
    assert!(o.stderr.contains("retry"), "{}", o.stderr);
    assert!(!o.stderr.contains("does not speak"), "{}", o.stderr);
    // An iperf3 cookie over the cap gets iperf3's own "busy" byte.
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"abcdefghijklmnopqrstuvwxyz2345672345\0").unwrap();
    let mut reply = vec![];
    let _ = c.read_to_end(&mut reply);
    assert_eq!(reply, vec![0xff], "ACCESS_DENIED");
    drop(idle);
}

#[test]
fn client_ports_bind_each_stream_and_ports_that_cannot_be_are_usage_errors() {
    let s = ServerProc::start("127.0.0.1", &[]);
    // Stream N on PORT+N, the control connection elsewhere. Ports above Linux's ephemeral range
    // (32768-60999): inside it, a connection of a test running beside this one may hold the port
    // (CI once saw "Address already in use" at 41230).
    let r = run_json(
        "127.0.0.1",
        s.port,
        &["-n", "2M", "-P", "2", "--cport", "63230", "--no-save"],
    );
    let ports: Vec<u64> = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["client_port"].as_u64().unwrap())
        .collect();
    assert_eq!(ports, [63230, 63231], "{}", r["streams"]);
    assert!(!r["config"]["local_address"].as_str().unwrap().ends_with(":63230"));
    let p = s.port.to_string();
    for (args, needle) in [
        (vec!["-P", "3", "--cport", "65534"], "past 65535"),
        (vec!["--quic", "--cport", "41000"], "--cport binds TCP and UDP"),
        (vec!["--cport", "0"], "--cport"),
    ] {
        let mut all = vec!["run", "127.0.0.1", "-p", &p, "--no-save"];
        all.extend(args);
        assert_one_clear_line(&landspeed(&all, Duration::from_secs(20)), 2, needle);
    }
}

/// A veth pair for one test, removed when dropped (even when the test fails).
struct VethPair(String);

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.0])
            .status();
    }
}

#[test]
fn bind_dev_sends_from_the_interface_named_or_says_there_is_none() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let run = |dev: &str| {
        let extra = ["--connect-timeout", "2s", "--bind-dev", dev];
        one_second_run("127.0.0.1", s.port, &extra)
    };
    let o = run("nosuch0");
    assert_one_clear_line(&o, 1, "cannot send from interface nosuch0: No such device");
    let o = run("lo");
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Bound to an interface with no way to 127.0.0.1 (one end of a veth pair), the connection cannot
    // be made: the option is applied, not just accepted.
    let Some(_root) = common::wan::root() else { return };
    let name = format!("lsbd{}", std::process::id() % 100_000);
    ip(&[
        "link",
        "add",
        &name,
        "type",
        "veth",
        "peer",
        "name",
        &format!("{name}p"),
    ]);
    let _pair = VethPair(name.clone());
    ip(&["link", "set", &name, "up"]);
    let o = run(&name);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stderr.contains("cannot connect to 127.0.0.1"), "{}", o.stderr);
}
