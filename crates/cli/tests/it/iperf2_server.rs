//! Unmodified iperf 2.1.8 clients (Debian's `iperf`, installed by .ci/run) against `landspeed serve`,
//! each command line run against iperf 2's own server too: the same exit code, the same streams, the
//! same byte counts for tests of a byte count, and the server's log line equal to what the client
//! counted (sent and received). Then what a server refuses (a keyed one without `--open iperf2`; the
//! modes it does not serve) and hostile headers, each refused while the server goes on serving.

use crate::common::{self, ServerProc};
use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// True when iperf 2 can be run; in CI its absence is a failure.
fn have_iperf2() -> bool {
    let ok = Command::new("iperf")
        .arg("-v")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stderr).contains("iperf version 2."));
    ok || common::missing::<()>("iperf (iperf 2) is not installed (apt-get install iperf)").is_some()
}

/// iperf 2's own server on a free port, killed when dropped.
struct Iperf2Server(Child, u16);

impl Iperf2Server {
    fn start() -> Iperf2Server {
        let port = common::free_port();
        let child = Command::new("iperf")
            .args(["-s", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run iperf -s");
        assert!(
            common::wait_until(Duration::from_secs(5), || common::listening(port)),
            "iperf -s did not listen"
        );
        Iperf2Server(child, port)
    }
}

impl Drop for Iperf2Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One stream's line of iperf 2's CSV (`-y C`): which way, and its bytes.
#[derive(Debug, PartialEq)]
struct CsvLine {
    /// The client received it (the server's port is the line's local one).
    received: bool,
    bytes: u64,
}

/// `iperf -c 127.0.0.1 -p PORT ARGS -y C`: its exit, its stream lines, its whole output.
fn client(port: u16, args: &str) -> (Output, Vec<CsvLine>) {
    let mut cmd = Command::new("iperf");
    cmd.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-y", "C"])
        .args(args.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("run iperf -c");
    let out = common::wait_output(child, Duration::from_secs(30)).expect("iperf -c hung");
    let p = port.to_string();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            // Per-stream lines only (a sum line's id is -1).
            (f.len() >= 9 && f[5] != "-1").then(|| CsvLine {
                received: f[2] == p,
                bytes: f[7].parse().unwrap_or_else(|_| panic!("bytes in {l}")),
            })
        })
        .collect();
    (out, lines)
}

fn total(lines: &[CsvLine], received: bool) -> u64 {
    lines
        .iter()
        .filter(|l| l.received == received)
        .map(|l| l.bytes)
        .sum()
}

/// The number after `key` in a server log line.
fn num_after(line: &str, key: &str) -> u64 {
    let i = line.find(key).unwrap_or_else(|| panic!("no {key:?} in {line}")) + key.len();
    line[i..].split(' ').next().unwrap().parse().unwrap()
}

/// The command lines of the matrix; those ending by a byte count must move the same bytes against
/// either server.
const MATRIX: &[&str] = &[
    "-n 100K",
    "-n 1M -P 2",
    "-t 1 -P 3",
    "-n 256K -l 1000",
    "-n 1M -R",
    "-t 1 -R",
    "-n 1M --full-duplex",
    "-t 1 --trip-times",
    "-t 1 -X -e",
    "-t 1 -b 50M",
];

#[test]
fn iperf2_clients_get_from_landspeed_what_iperf2s_server_gives() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let reference = Iperf2Server::start();
    let s = ServerProc::start("127.0.0.1", &[]);
    for args in MATRIX {
        let (theirs, their_lines) = client(reference.1, args);
        let (ours, our_lines) = client(s.port, args);
        let text = String::from_utf8_lossy(&ours.stderr);
        assert_eq!(ours.status.code(), theirs.status.code(), "{args}: {text}");
        assert!(ours.status.success(), "{args}: {text}");
        let shape = |l: &[CsvLine]| l.iter().map(|l| l.received).collect::<Vec<_>>();
        let (mut a, mut b) = (shape(&our_lines), shape(&their_lines));
        a.sort();
        b.sort();
        assert_eq!(a, b, "{args}: the same streams each way");
        if args.starts_with("-n") {
            for way in [false, true] {
                assert_eq!(total(&our_lines, way), total(&their_lines, way), "{args}");
            }
        }
        let line = common::line_with(&s, "iperf2 2.1.8 test");
        assert!(line.ends_with(": ok"), "{args}: {line}");
        assert_eq!(
            num_after(&line, "received "),
            total(&our_lines, false),
            "{args}: {line}"
        );
        assert_eq!(
            num_after(&line, " sent "),
            total(&our_lines, true),
            "{args}: {line}"
        );
        assert!(total(&our_lines, false) + total(&our_lines, true) > 0, "{args}");
    }
    // -b 50M paced the client's one stream: about a second of 50 Mbit/s, not loopback's speed.
    let (_, l) = client(s.port, "-t 1 -b 50M");
    let mbit = total(&l, false) as f64 * 8.0 / 1e6;
    assert!((30.0..80.0).contains(&mbit), "-t 1 -b 50M moved {mbit} Mbit");
}

#[test]
fn what_landspeed_does_not_serve_of_iperf2_is_refused_in_one_line() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let (keys, _) = crate::auth::key_files("iperf2-keyed");
    let keyed = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let _ = client(keyed.port, "-n 100K");
    common::line_with(&keyed, "does not open iperf 2's protocol (serve --open iperf2)");
    let open = ServerProc::start(
        "127.0.0.1",
        &["--auth-keys", keys.to_str().unwrap(), "--open", "iperf2"],
    );
    let (o, l) = client(open.port, "-n 100K");
    assert!(o.status.success());
    assert_eq!(total(&l, false), 102_400);
    assert!(common::line_with(&open, "iperf2 2.1.8 test").ends_with(": ok"));
    // -r and -d would have the server connect back to the client.
    let s = ServerProc::start("127.0.0.1", &[]);
    let _ = client(s.port, "-n 100K -r");
    common::line_with(&s, "-r asks the server to connect back to the client");
}

/// An iperf 2 header as 2.1.8 writes it for TCP: `threads` streams, `amount` (negative:
/// hundredths of a second), the extension's upper flags (0x0400: -R).
fn header(threads: u32, amount: i32, upper: u16) -> Vec<u8> {
    let flags: u32 = if upper != 0 { 0x4401_0078 } else { 0x4001_0078 };
    let mut h = vec![];
    for w in [flags, threads, 5201, 0, 0, amount as u32, 0, 0] {
        h.extend_from_slice(&w.to_be_bytes());
    }
    for half in [upper, 0, 2, 1, 8, 3, 0, 0] {
        h.extend_from_slice(&half.to_be_bytes());
    }
    h.extend_from_slice(&[0; 12]);
    assert_eq!(h.len(), 60);
    h
}

#[test]
fn hostile_iperf2_headers_are_refused_and_the_server_serves_on() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--max-duration", "30s"]);
    let send = |h: Vec<u8>| {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.write_all(&h).unwrap();
        c
    };
    // More streams than landspeed runs, a reverse test longer than the server allows.
    let _a = send(header(65_535, -100, 0));
    common::line_with(&s, "streams must be 1..=1024, got 65535");
    let _b = send(header(1, -360_000, 0x0400));
    common::line_with(&s, "allows tests of at most 30 s; the test asked for 3600 s");
    // A header naming 1,000 streams that opens one: run with it after the gathering's wait,
    // the result saying so; meanwhile a real client is served.
    let mut held = send(header(1000, -100, 0));
    let (o, l) = client(s.port, "-n 1M");
    assert!(o.status.success());
    assert_eq!(total(&l, false), 1 << 20);
    assert!(common::line_with(&s, "iperf2 2.1.8 test").ends_with(": ok"));
    let _ = held.write_all(&[0; 4096]);
    drop(held);
    common::line_with(&s, "iperf2 2.1.8 test");
    // A reverse test whose client never reads ends at its time.
    let t = std::time::Instant::now();
    let _quiet = send(header(1, -100, 0x0400));
    let line = common::line_with(&s, "reverse");
    assert!(t.elapsed() < Duration::from_secs(15), "{line}");
    // Bytes that look like a header's first word but are not one are no iperf 2 test.
    let mut junk = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    junk.write_all(&[0x40; 12]).unwrap();
    common::line_with(&s, "not a landspeed client");
    let (o, _) = client(s.port, "-n 100K");
    assert!(o.status.success());
}
