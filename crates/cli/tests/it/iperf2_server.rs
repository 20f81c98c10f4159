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
pub(crate) fn have_iperf2() -> bool {
    let ok = Command::new("iperf")
        .arg("-v")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stderr).contains("iperf version 2."));
    ok || common::missing::<()>("iperf (iperf 2) is not installed (apt-get install iperf)").is_some()
}

/// iperf 2's own server on a free port, killed when dropped.
pub(crate) struct Iperf2Server(Child, pub(crate) u16);

impl Iperf2Server {
    pub(crate) fn start() -> Iperf2Server {
        Iperf2Server::with(&[])
    }

    /// iperf 2's UDP server (`-u`) or its TCP one.
    pub(crate) fn over_udp(udp: bool) -> Iperf2Server {
        match udp {
            true => Iperf2Server::with(&["-u"]),
            false => Iperf2Server::start(),
        }
    }

    /// `iperf -s -p PORT EXTRA` (`-u`: its UDP server, a process of its own).
    pub(crate) fn with(extra: &[&str]) -> Iperf2Server {
        let port = common::free_port();
        let child = Command::new("iperf")
            .args(["-s", "-p", &port.to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run iperf -s");
        let udp = extra.contains(&"-u");
        let ready = || {
            if udp {
                udp_bound(port)
            } else {
                common::listening(port)
            }
        };
        assert!(
            common::wait_until(Duration::from_secs(5), ready),
            "iperf -s did not listen"
        );
        Iperf2Server(child, port)
    }
}

/// Whether a UDP socket is bound to `port` (the kernel's tables: a UDP server answers nothing to
/// tell by).
fn udp_bound(port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|t| {
        std::fs::read_to_string(t)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|local| format!("{local} ").ends_with(&hex))
            })
    })
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
    let (out, lines, hung) = client_or_hang(port, args);
    assert!(!hung, "iperf -c -p {port} {args} hung");
    (out, lines)
}

/// Like `client`, and whether the client had to be killed after 20 s (what it printed kept).
fn client_or_hang(port: u16, args: &str) -> (Output, Vec<CsvLine>, bool) {
    let mut cmd = Command::new("iperf");
    cmd.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-y", "C"])
        .args(args.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("run iperf -c");
    let (out, hung) = common::wait_output_or_kill(child, Duration::from_secs(20));
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
    (out, lines, hung)
}

/// One matrix line against one server. iperf 2.1.8's client can hang after a `--full-duplex`
/// test has ended and it has printed both its lines: its sending thread waits for its reporter
/// thread, which missed the wake-up (gdb on a hung client built from 2.1.8's source: the sender in
/// `EndJob` awaiting `consumerdone`, the reporter idle in `reporter_spawn`, the receiver at the
/// full-duplex stop barrier; about 1 run in 150 against landspeed on loopback, whose two
/// directions end together). Only there, a hang after both lines stands for exit 0: the lines
/// and the server's log are still checked.
///
/// iperf 2.1.8's client also dies now and then of its own heap corruption ("malloc(): unsorted
/// double linked list corrupted", SIGABRT, against either server, seen under CI's load): a client
/// killed by a signal without hanging is run again, twice at most, and said so on stderr.
///
/// And its full-duplex client hangs before its second line now and then, at its own stop barrier
/// ("Barrier timeout per full duplex traffic": its receiving side not done 3 s after its sending
/// side; seen once in a full CI run with `-n 1M --full-duplex`, the server not known; 0 of 60 runs
/// by hand against `landspeed serve` and 0 of 60 against `iperf -s`): that client is run again,
/// twice at most, and said so on stderr.
fn matrix_client(port: u16, args: &str) -> (Option<i32>, Vec<CsvLine>, String) {
    let (mut out, mut lines, mut hung) = client_or_hang(port, args);
    for _ in 0..2 {
        let both_ways = lines.iter().any(|l| l.received) && lines.iter().any(|l| !l.received);
        let barrier = hung && args.contains("--full-duplex") && !both_ways;
        if !barrier && (hung || out.status.code().is_some()) {
            break;
        }
        eprintln!(
            "iperf -c -p {port} {args} {}; once more",
            match barrier {
                true => "hung before its second line (iperf 2.1.8's full-duplex barrier)".to_string(),
                false => format!("died of a signal ({})", out.status),
            }
        );
        (out, lines, hung) = client_or_hang(port, args);
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !hung {
        return (out.status.code(), lines, text);
    }
    let both_ways = lines.iter().any(|l| l.received) && lines.iter().any(|l| !l.received);
    assert!(
        args.contains("--full-duplex") && both_ways,
        "iperf -c -p {port} {args} hung: {text}"
    );
    eprintln!("iperf -c -p {port} {args}: hung after both its lines (iperf 2.1.8's lost wake-up)");
    (Some(0), lines, text)
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

/// One matrix line against a fresh `iperf -s`, run again on another when that server died under
/// it: iperf 2.1.8's server aborts (SIGABRT) now and then at the end of a `--trip-times` test (1
/// run of the matrix in about 20 here), and the yardstick must not be a dying process.
fn reference_run(args: &str) -> (Option<i32>, Vec<CsvLine>, String) {
    for _ in 0..2 {
        let mut reference = Iperf2Server::start();
        let got = matrix_client(reference.1, args);
        let died = common::wait_until(Duration::from_millis(100), || {
            reference.0.try_wait().is_ok_and(|s| s.is_some())
        });
        if !died {
            return got;
        }
        eprintln!("iperf -s died under iperf -c {args}; once more on a fresh one");
    }
    panic!("iperf -s died twice under iperf -c {args}");
}

#[test]
fn iperf2_clients_get_from_landspeed_what_iperf2s_server_gives() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    for args in MATRIX {
        let (theirs, their_lines, their_text) = reference_run(args);
        let (ours, our_lines, text) = matrix_client(s.port, args);
        assert_eq!(ours, theirs, "{args}: {text}");
        assert_eq!(ours, Some(0), "{args}: {text}");
        let shape = |l: &[CsvLine]| l.iter().map(|l| l.received).collect::<Vec<_>>();
        let (mut a, mut b) = (shape(&our_lines), shape(&their_lines));
        a.sort();
        b.sort();
        assert_eq!(
            a, b,
            "{args}: the same streams each way: {text} / iperf -s: {their_text}"
        );
        if args.starts_with("-n") {
            for way in [false, true] {
                let (o, t) = (total(&our_lines, way), total(&their_lines, way));
                assert_eq!(o, t, "{args}: {text} / iperf -s: {their_text}");
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

/// `iperf -c 127.0.0.1 -p PORT -u ARGS` (it must not hang): what it wrote, its server reports
/// (`server_reports`), and whether it warned that no report came.
fn udp_client(port: u16, args: &str) -> (Output, Vec<(u64, u64)>, bool) {
    let (out, hung) = udp_client_run(port, args);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!hung, "iperf -c -p {port} -u {args} hung; it printed: {text}");
    let (reports, unanswered) = server_reports(&text);
    (out, reports, unanswered)
}

/// `iperf -c 127.0.0.1 -p PORT -u ARGS`, killed after 30 s: what it wrote, and whether it hung.
fn udp_client_run(port: u16, args: &str) -> (Output, bool) {
    text_client(port, &format!("-u {args}"))
}

/// `iperf -c 127.0.0.1 -p PORT ARGS` with its text output, ended within 30 s: what it printed, and
/// whether it had to be killed.
fn text_client(port: u16, args: &str) -> (Output, bool) {
    let child = Command::new("iperf")
        .args(["-c", "127.0.0.1", "-p", &port.to_string()])
        .args(args.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run iperf -c");
    common::wait_output_or_kill(child, Duration::from_secs(30))
}

/// A UDP client's server reports, from its text: (lost, total) for each stream, and whether it
/// warned that no report came.
fn server_reports(text: &str) -> (Vec<(u64, u64)>, bool) {
    let mut reports = vec![];
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if !l.contains("Server Report:") {
            continue;
        }
        // The figures' line follows (after a heading line with -e).
        let figures = lines.find(|l| l.contains(" ms ") && l.contains('/')).expect(text);
        let lt = figures
            .split(" ms ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        let (lost, total) = lt.split_once('/').unwrap();
        reports.push((lost.parse().unwrap(), total.parse().unwrap()));
    }
    (reports, text.contains("did not receive ack"))
}

/// UDP command lines: each stream's report from landspeed's server beside iperf 2's own.
const UDP_MATRIX: &[&str] = &[
    "-n 100K -l 1000",
    "-n 100K -l 1000 -e",
    "-n 100K --trip-times",
    "-t 1 -b 10M",
    "-t 1 -b 5M -P 2",
];

#[test]
fn iperf2_udp_clients_get_the_report_iperf2s_server_sends() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let reference = Iperf2Server::with(&["-u"]);
    let s = ServerProc::start("127.0.0.1", &[]);
    for args in UDP_MATRIX {
        let (theirs, their_reports, _) = udp_client(reference.1, args);
        let (ours, our_reports, unanswered) = udp_client(s.port, args);
        assert_eq!(ours.status.code(), theirs.status.code(), "{args}");
        assert!(!unanswered, "{args}: the client got no report");
        assert_eq!(
            our_reports.len(),
            their_reports.len(),
            "{args}: a report per stream"
        );
        for ((lost, total), (_, their_total)) in our_reports.iter().zip(&their_reports) {
            // Loopback at these rates loses nothing; the totals are the datagrams sent, the end's
            // included: equal for a byte count; for a time within 10% (the client paces by its own
            // clock, and a busy CI machine delays it differently in the two runs; 0.1% apart here).
            assert_eq!(*lost, 0, "{args}");
            if args.starts_with("-n") {
                assert_eq!(total, their_total, "{args}");
            } else {
                let ratio = *total as f64 / *their_total as f64;
                assert!(
                    (0.9..1.1).contains(&ratio),
                    "{args}: {total} against {their_total}"
                );
            }
        }
        for _ in &our_reports {
            let line = common::line_with(&s, "iperf2 2.1.8 (UDP) test");
            assert!(line.ends_with(": ok"), "{args}: {line}");
            assert!(num_after(&line, "received ") > 100_000, "{args}: {line}");
        }
    }
    // A server that sends only when told to: by default -R is refused, and says how to serve it.
    let _ = udp_client(s.port, "-t 1 -R");
    common::line_with(&s, "UDP -R is not served here");
}

/// The lost and total datagrams an iperf 2 UDP `-R` client counted (its last figures' line, the
/// whole test's), from its text.
fn udp_received(port: u16, args: &str) -> (Output, Option<(u64, u64)>) {
    let (out, _, _) = udp_client(port, args);
    let count = last_count(&out);
    (out, count)
}

/// What an iperf 2 UDP `-R` client counted in the whole test (lost, total), from its text.
fn last_count(out: &Output) -> Option<(u64, u64)> {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .rfind(|l| l.contains(" ms ") && l.contains('/') && l.contains("sec"))
        .map(|l| {
            let lt = l.split(" ms ").nth(1).unwrap().split_whitespace().next().unwrap();
            let (lost, total) = lt.split_once('/').unwrap();
            (lost.parse().unwrap(), total.parse().unwrap())
        })
}

/// `udp_received` against a fresh iperf 2.1.8 UDP server. Its server sends a `-R` test's end
/// once and its client, given a byte count, waits for it without end: an end lost on a busy
/// machine hangs the client (landspeed's server repeats it); and its client with `-R -P 2` died of
/// a signal once in CI. Either way the run is made again on a fresh server, said on stderr.
fn reference_received(args: &str) -> (Output, Option<(u64, u64)>) {
    for _ in 0..3 {
        let (out, hung) = udp_client_run(Iperf2Server::with(&["-u"]).1, args);
        if !hung && out.status.code().is_some() {
            let count = last_count(&out);
            return (out, count);
        }
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        eprintln!(
            "iperf -c -u {args} against iperf 2.1.8's server hung or died ({:?}): {text}; once more",
            out.status
        );
    }
    panic!("iperf -c -u {args} hung or died three times against iperf 2.1.8's server");
}

#[test]
fn iperf2_udp_reverse_clients_receive_from_landspeed_what_iperf2s_server_sends() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    // A byte count's datagrams, the end's included: 512 + 1, and 52 + 1 for each of -P 2's.
    for (args, datagrams) in [
        ("-R -n 100K -l 200", Some(513)),
        ("-R -t 1 -b 5M -l 1000", None),
        ("-R -P 2 -n 50K -l 1000", Some(53)),
    ] {
        // A fresh iperf 2.1.8 UDP server for each test: one that takes a test soon after another
        // can leave it unanswered (its client then waits for ever: seen in a run of the module).
        let (theirs, their_count) = reference_received(args);
        let (ours, our_count) = udp_received(s.port, args);
        assert_eq!(ours.status.code(), theirs.status.code(), "{args}");
        let ((lost, total), (_, their_total)) = (our_count.expect(args), their_count.expect(args));
        // Loopback at these rates loses nothing; a byte count's datagrams are equal, a time's
        // within 10% (each sender paces by its own clock).
        assert_eq!(lost, 0, "{args}");
        let ratio = total as f64 / their_total as f64;
        if let Some(n) = datagrams {
            assert_eq!(total, n, "{args}");
            // iperf 2.1.8's own server can miss one of -P's requests (it has no socket on its port
            // for a moment after taking a test; docs/iperf2.md): its count stands only without -P.
            if their_total != n {
                assert!(
                    args.contains("-P"),
                    "{args}: iperf 2.1.8's server gave {their_total}"
                );
                eprintln!("{args}: iperf 2.1.8's server gave {their_total} (its missed request)");
            }
        } else {
            assert!(
                (0.9..1.1).contains(&ratio),
                "{args}: {total} against {their_total}"
            );
        }
        // Each of -P's streams is a test of its own, as iperf 2's server serves them.
        for _ in 0..if args.contains("-P 2") { 2 } else { 1 } {
            let line = common::line_with(&s, "iperf2 2.1.8 (UDP) test");
            assert!(
                line.contains("reverse") && line.ends_with(": ok"),
                "{args}: {line}"
            );
            assert!(num_after(&line, "sent ") >= 50 * 1024, "{args}: {line}");
        }
    }
    // Held to the server's limits: a rate over --max-rate is refused (nothing sent), one within
    // it served.
    let capped = ServerProc::start("127.0.0.1", &["--iperf2-udp-send", "--max-rate", "2M"]);
    let (_, none) = udp_received(capped.port, "-R -t 1 -b 20M -l 1000");
    assert!(
        none.is_none_or(|(_, total)| total == 0),
        "a refused -R test receives nothing: {none:?}"
    );
    common::line_with(&capped, "allows UDP at most 2000000 bit/s");
    let (_, got) = udp_received(capped.port, "-R -t 1 -b 1M -l 1000");
    assert_eq!(got.map(|(lost, _)| lost), Some(0));
}

/// `landspeed run 127.0.0.1 -p PORT --iperf2 -u ARGS --json --no-save`, however it ends.
pub(crate) fn run_iperf2_udp_outcome(port: u16, args: &str) -> common::Outcome {
    let p = port.to_string();
    let mut all = vec![
        "run",
        "127.0.0.1",
        "-p",
        &p,
        "--iperf2",
        "-u",
        "--json",
        "--no-save",
    ];
    all.extend(args.split_whitespace());
    common::landspeed(&all, Duration::from_secs(30))
}

/// `landspeed run --iperf2 -u ARGS --json`: each stream's datagrams as the server's report says
/// (lost, total), and its datagrams sent as this end counted them.
fn run_iperf2_udp(port: u16, args: &str) -> (Vec<(u64, u64)>, Vec<u64>) {
    let o = run_iperf2_udp_outcome(port, args);
    assert_eq!(o.code, 0, "{args}: {}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let streams = r["streams"].as_array().unwrap();
    let reports = streams
        .iter()
        .map(|st| {
            let u = &st["udp"];
            let total = u["datagrams_sent"]
                .as_u64()
                .unwrap_or_else(|| panic!("{args}: {st}"));
            (u["datagrams_lost"].as_u64().unwrap(), total)
        })
        .collect();
    let sent = streams
        .iter()
        .map(|st| st["bytes_sent"].as_u64().unwrap())
        .collect();
    (reports, sent)
}

#[test]
fn landspeed_runs_iperf2s_udp_protocol_against_both_servers() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    // landspeed's -n is the test's, iperf 2's each stream's: "-n 2M -P 2" against "-n 1M -P 2".
    for (ours, theirs, len) in [
        ("-n 200K -l 1000", "-n 200K -l 1000", 1000),
        ("-n 2M -P 2 -b 40M", "-n 1M -P 2 -b 20M", 1470),
    ] {
        // A fresh iperf 2.1.8 UDP server for each test: one whose next test comes within its
        // quarter second of waiting for silence after its report stops serving for good (its own
        // client's included; docs/iperf2.md).
        let (_, their_reports, _) = udp_client(Iperf2Server::with(&["-u"]).1, theirs);
        let reference = Iperf2Server::with(&["-u"]);
        for port in [reference.1, s.port] {
            let (reports, sent) = run_iperf2_udp(port, ours);
            assert_eq!(reports.len(), their_reports.len(), "{ours}");
            for ((lost, total), ((_, their_total), bytes)) in
                reports.iter().zip(their_reports.iter().zip(&sent))
            {
                // The same datagrams as iperf 2.1.8's own client sends (its end counted, as both
                // servers count it), and landspeed's server counts exactly what this end sent.
                // iperf 2.1.8's server, with two streams, now and then hands a datagram of one
                // stream to the other's socket (its own client's streams show 1 lost on one and 1
                // out of order on the other in most such runs; here and then its count of one
                // stream, or its own client's, is one short): within one there.
                let exact = reports.len() == 1;
                let apart = total.abs_diff(*their_total);
                assert!(
                    apart == 0 || (!exact && apart == 1),
                    "{ours} against port {port}: {total} against {their_total}"
                );
                if port == s.port {
                    assert_eq!(*bytes, total * len, "{ours}");
                }
                assert!(*lost <= total / 100, "{ours}: {lost} of {total} lost on loopback");
            }
        }
    }
    // --bidir (iperf 2's --full-duplex) against a server that does not send over UDP: it fails,
    // saying nothing came back (it/iperf2_udp_both.rs runs it against servers that send).
    let o = run_iperf2_udp_outcome(s.port, "--bidir -t 1");
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert!(
        o.stdout.contains("nothing came from the server"),
        "{}{}",
        o.stdout,
        o.stderr
    );
}

#[test]
fn landspeed_receives_iperf2s_udp_reverse_from_both_servers() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    // iperf 2.1.8's own client counts 0/513 for this test against its own server: 512 datagrams
    // and the end.
    let sends = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    // -P 2: two streams of 50K each (landspeed's -n is the test's), 256 datagrams and the end.
    let cases = [
        ("-R -n 100K -l 200", vec![(0, 513)]),
        ("-R -P 2 -n 100K -l 200", vec![(0, 257), (0, 257)]),
    ];
    for (args, want) in cases {
        // A fresh iperf 2.1.8 UDP server for each test: one that takes a test soon after another
        // can leave it unanswered (seen here 1 run in 7 of this pair by hand: nothing in 5 s).
        for port in [Iperf2Server::with(&["-u"]).1, sends.port] {
            let (reports, _) = run_iperf2_udp(port, args);
            assert_eq!(reports, want, "{args} against port {port}");
        }
    }
    for _ in 0..3 {
        let line = common::line_with(&sends, "(UDP) test");
        assert!(line.contains("reverse") && line.ends_with(": ok"), "{line}");
    }
    // A server that does not send: said in one line, with what would make it send.
    let quiet = ServerProc::start("127.0.0.1", &[]);
    let o = run_iperf2_udp_outcome(quiet.port, "-R -t 1");
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("--iperf2-udp-send"), "{}", o.stderr);
    // A server that serves one of -P 2's streams (one test per address): the result is kept, the
    // other stream failed in it, and the test is not trusted. The served stream holds the slot for
    // 3 s, past the other's requests (at most 100 in about 1 s, never over 2 s).
    let one = ServerProc::start(
        "127.0.0.1",
        &["--iperf2-udp-send", "--max-tests-per-address", "1"],
    );
    let o = run_iperf2_udp_outcome(one.port, "-R -P 2 -t 3");
    assert_eq!(o.code, 1, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let errors: Vec<usize> = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["errors"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(errors.iter().filter(|e| **e > 0).count(), 1, "{r}");
    assert!(r["summary"]["bytes_received"].as_u64().unwrap() > 0, "{r}");
}

/// A client's text but its dashed head, each line with its numbers masked and its spaces
/// collapsed, sorted (iperf 2's threads print streams in either order); the out-of-order lines left
/// out (they come with reordering, which a busy loopback gives or not).
pub(crate) fn masked_text(out: &str) -> Vec<String> {
    // The head's lines wherever they fall (iperf 2's threads may print a "connected" line first).
    let head = [
        "---",
        "Client connecting",
        "Sending ",
        "UDP buffer size",
        "TOS set",
    ];
    let mut v: Vec<String> = out
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("out-of-order"))
        .filter(|l| !head.iter().any(|h| l.starts_with(h)))
        .map(|l| {
            let mut m = String::new();
            for c in l.chars() {
                let c = if c.is_ascii_digit() || c == '.' { '#' } else { c };
                let repeat = (c == '#' || c == ' ') && m.ends_with(c);
                if !repeat {
                    m.push(c);
                }
            }
            // "on 2026-12-03 04:21:56 (UTC)" and "(sock=3)" after the ports, and "%lo" after the
            // local address, are iperf 2's -e extras the drop-in does not print (docs/iperf2.md).
            let m = m
                .split(" (sock=")
                .next()
                .unwrap_or(&m)
                .split(" on #-#-# ")
                .next()
                .unwrap_or(&m);
            m.replace("%lo ", " ")
        })
        .collect();
    v.sort();
    // iperf 2.1.8 prints a column head again whenever its reporter's queue has run empty
    // (Reporter.c resets its heading flags then): with -P 2 the second server report may or may
    // not find the head printed, as the threads fall. A head counts once, however often printed.
    let mut seen = std::collections::BTreeSet::new();
    v.retain(|l| !l.starts_with("[ ID]") || seen.insert(l.clone()));
    v
}

/// The CSV lines' shape: field count, stream id, span, and the closing line's datagrams field.
fn csv_shape(out: &str) -> Vec<(usize, String, String, String)> {
    let mut v: Vec<_> = out
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let at = |i: usize| f.get(i).map_or(String::new(), |x| x.to_string());
            (
                f.len(),
                at(5),
                at(6),
                if at(11) == "-1" {
                    "-1".into()
                } else {
                    String::new()
                },
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_iperf_drop_in_prints_iperf2s_udp_client_lines() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    for args in [
        "-t 1 -i 0.5",
        "-n 100K -e",
        "-t 1 -P 2",
        "-y C -t 1 -i 0.5",
        "-R -n 20K -l 1000",
        "-R -t 1 -i 0.5",
        "-R -y C -t 1 -i 0.5",
        "-R -e -t 1 -i 0.5",
        "-R -e -y C -t 1 -i 0.5",
        // Trip times (session 24): the start time in each datagram, the server's extended
        // report with its one-way latency printed as 2.1.8's client prints it.
        "-t 1 --trip-times",
        "-t 1 -i 0.5 --trip-times",
        // No report asked (session 24): one end sent, nothing awaited, no "Server Report".
        "-t 1 --no-udp-fin",
    ] {
        // A fresh iperf 2.1.8 UDP server for each client (see the test above); 1 Mbit/s each, so
        // the three clients run at once (but with -P).
        let drop_in = |port: u16| {
            let line = format!("iperf2 -c 127.0.0.1 -p {port} -u {args}");
            let ours = common::landspeed(
                &line.split_whitespace().collect::<Vec<_>>(),
                Duration::from_secs(30),
            );
            (line, ours)
        };
        let (iperf2_a, iperf2_b) = (Iperf2Server::with(&["-u"]), Iperf2Server::with(&["-u"]));
        let ((theirs, _, _), (a, b)) = common::at_once_if(
            common::iperf2_paced(args),
            || udp_client(iperf2_a.1, args),
            || common::at_once(|| drop_in(iperf2_b.1), || drop_in(s.port)),
        );
        let theirs = String::from_utf8_lossy(&theirs.stdout).into_owned();
        for (line, ours) in [a, b] {
            assert_eq!(ours.code, 0, "{line}: {}", ours.stderr);
            if args.contains("-y C") {
                // With -e iperf 2.1.8 stamps CSV lines to the millisecond.
                let ms = |t: &str| {
                    t.lines().all(|l| {
                        l.split(',')
                            .next()
                            .is_some_and(|s| s.len() == 18 && s.as_bytes()[14] == b'.')
                    })
                };
                assert_eq!(
                    ms(&ours.stdout),
                    ms(&theirs),
                    "{line}:\n{}\n/ iperf 2.1.8:\n{theirs}",
                    ours.stdout
                );
                assert_eq!(
                    csv_shape(&ours.stdout),
                    csv_shape(&theirs),
                    "{line}:\n{}\n/ iperf 2.1.8:\n{theirs}",
                    ours.stdout
                );
            } else {
                assert_eq!(
                    masked_text(&ours.stdout),
                    masked_text(&theirs),
                    "{line}:\n{}\n/ iperf 2.1.8:\n{theirs}",
                    ours.stdout
                );
            }
        }
    }
}

/// An iperf 2 UDP datagram: the prefix (sequence `seq`, sent now), then 2.1.8's header for `-u`
/// with `amount` (negative: hundredths of a second).
fn udp_datagram(seq: i32, amount: i32) -> Vec<u8> {
    udp_datagram_asking(seq, amount, 0)
}

/// `udp_datagram` with the extension's `upper` flags (0x0400: -R; iperf 2.1.8 then sets its
/// version-2 flags too).
pub(crate) fn udp_datagram_asking(seq: i32, amount: i32, upper: u16) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let mut d = vec![];
    for w in [
        seq as u32,
        now.as_secs() as u32,
        now.subsec_micros(),
        if seq < 0 { u32::MAX } else { 0 },
    ] {
        d.extend_from_slice(&w.to_be_bytes());
    }
    let mut h = header(1, amount, upper);
    let flags: u32 = if upper != 0 { 0x6c01_0098 } else { 0x4801_0098 };
    h[..4].copy_from_slice(&flags.to_be_bytes());
    d.extend(h);
    d.resize(1470, b'7');
    d
}

#[test]
fn a_forged_udp_reverse_request_sends_nothing_past_a_closed_port() {
    let _one = common::alone();
    let s = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    // "Send to me for 10 s", from a socket closed at once: nothing listens where the server would
    // send (iperf -s 2.1.8 sent its whole test there: 657 datagrams for a captured -t 1 -l 200).
    let forged = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut d = udp_datagram_asking(1, -1000, 0x0400);
    d.truncate(200);
    forged.send_to(&d, ("127.0.0.1", s.port)).unwrap();
    drop(forged);
    let line = common::line_with(&s, "(UDP) test");
    assert!(
        line.contains("reverse") && line.contains("port is closed"),
        "{line}"
    );
    assert!(num_after(&line, "sent ") <= 4 * 1470, "{line}");
    // The same with --full-duplex (0x0800, and NOUDPFIN 0x0008 as iperf 2.1.8 sets them): the
    // server's reader of the socket learns of the closed port and ends its sending.
    let forged = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    forged
        .send_to(&udp_datagram_asking(1, -1000, 0x0808), ("127.0.0.1", s.port))
        .unwrap();
    drop(forged);
    let line = common::line_with(&s, "(UDP) test");
    assert!(
        line.contains("bidir") && line.contains("port is closed"),
        "{line}"
    );
    assert!(num_after(&line, "sent ") <= 4 * 1470, "{line}");
}

#[test]
fn hostile_iperf2_datagrams_cost_a_test_no_longer_than_the_idle_timeout() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--idle-timeout", "2s"]);
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", s.port);
    // Longer than the server allows: refused before anything is held.
    sock.send_to(&udp_datagram(1, -360_000), to).unwrap();
    common::line_with(&s, "allows tests of at most 300 s; the test asked for 3600 s");
    // One datagram, then silence: the test ends at the idle timeout, unanswered.
    let quiet = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = std::time::Instant::now();
    quiet.send_to(&udp_datagram(1, -1000), to).unwrap();
    let line = common::line_with(&s, "(UDP) test");
    assert!(line.contains("no datagram for 2s"), "{line}");
    assert!(t.elapsed() < Duration::from_secs(6), "{line}");
    // A client's own datagrams and its end: the report comes back, 128 bytes.
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.connect(to).unwrap();
    for seq in 1..=5 {
        c.send(&udp_datagram(seq, -100)).unwrap();
    }
    // The end, repeated as iperf 2's client repeats it until a report comes (an end that overtakes
    // the test's own socket reaches the port's QUIC endpoint instead, whose answer is not a report).
    c.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0u8; 2048];
    let n = (0..10)
        .find_map(|_| {
            c.send(&udp_datagram(-6, -100)).unwrap();
            c.recv(&mut buf).ok().filter(|n| *n == 128)
        })
        .expect("a report");
    assert_eq!(n, 128);
    let datagrams = u32::from_be_bytes(buf[16 + 28..16 + 32].try_into().unwrap());
    assert_eq!(datagrams, 6, "the end counts as the sixth");
    assert!(common::line_with(&s, "(UDP) test").ends_with(": ok"));
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
    let (_, reports, unanswered) = udp_client(keyed.port, "-n 10K");
    assert!(
        reports.is_empty() && unanswered,
        "a keyed server sends no UDP report"
    );
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
    // A start scheduled past the server's longest test (--txstart-time): refused at once, not
    // waited for.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    let (h, _) = landspeed_iperf2::ClientHeader::parse(&header(1, -100, 0), 0).unwrap();
    let at = landspeed_iperf2::ack::WireTime {
        secs: now + 100,
        micros: 0,
    };
    let _late = send(h.scheduled(at).encode());
    common::line_with(&s, "test exceed the server's longest test (30 s)");
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

/// One of iperf 2's TCP bursts' 92-byte headers: frame `id`, `size` bytes, a period of 1 µs.
fn burst(id: u32, size: u32) -> [u8; 92] {
    let mut b = [0u8; 92];
    landspeed_iperf2::burst::BurstHeader {
        period_us: 1,
        id,
        size,
        ..Default::default()
    }
    .encode_into(&mut b);
    b
}

#[test]
fn hostile_frames_over_tcp_are_counted_within_bounds_and_the_server_serves_on() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--max-duration", "30s"]);
    // A header with the ISOCH bit (2 s), then frames whose numbers jump to the top of their range
    // and back, 20,000 scattered ones (each a jump or a frame long settled), one claiming 1 GiB, and
    // the connection closed inside it.
    let t = std::time::Instant::now();
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(&header(1, -200, 0x0001)).unwrap();
    for id in [1, 4_000_000_000, u32::MAX, 5, 2, u32::MAX, 7] {
        c.write_all(&burst(id, 92)).unwrap();
    }
    let scattered: Vec<u8> = (1..=20_000u32)
        .flat_map(|i| burst(i.wrapping_mul(2_654_435_761), 92))
        .collect();
    c.write_all(&scattered).unwrap();
    c.write_all(&burst(8, 1 << 30)).unwrap();
    c.write_all(&[0; 1000]).unwrap();
    drop(c);
    let line = common::line_with(&s, "iperf2 2.1.8 test");
    assert!(t.elapsed() < Duration::from_secs(10), "{line}");
    // Counted by arithmetic, each number at most once: whole, lost (a frame heard inside a range
    // claimed skipped voids the claim) and skipped add up to no more than there are numbers.
    let after = |key: &str| -> u64 {
        let at = line.find(key).unwrap_or_else(|| panic!("no {key:?} in {line}"));
        let n = line[..at].rsplit([' ', ',']).find(|w| !w.is_empty()).unwrap();
        n.parse()
            .unwrap_or_else(|_| panic!("{n:?} before {key:?} in {line}"))
    };
    let counted = after(" whole") + after(" lost") + after(" skipped by the sender");
    assert!(counted > 0 && counted <= 1 << 32, "{line}");
    // A real client is served after it.
    let (o, l) = client(s.port, "-n 1M");
    assert!(o.status.success());
    assert_eq!(total(&l, false), 1 << 20);
}

/// `iperf -s -y C`'s stream lines so far: their bytes (its lines do not say which way a stream went:
/// a reverse stream's reads like a received one).
pub(crate) fn server_csv(path: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() >= 9 && f[5] != "-1").then(|| f[7].parse().unwrap_or(0))
        })
        .collect()
}

#[test]
fn landspeed_runs_iperf2s_protocol_against_iperf2s_server() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let mut server = LoggedIperf2::start(&["-y", "C", "-l", "128K"], "s.csv");
    for (args, streams) in [
        ("-n 10M -P 2", 2),
        ("-t 1", 1),
        ("-n 4M -R -P 2", 2),
        ("-n 1M --bidir", 1),
    ] {
        let mut argv = vec!["--iperf2", "--no-save", "--json"];
        argv.extend(args.split_whitespace());
        let (o, seen) = server.run(&argv, |log| server_csv(log).len());
        let log = &server.log;
        assert_eq!(o.code, 0, "{args}: {}", o.stderr);
        let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(r["protocol"], "iperf2", "{args}");
        let way = |flow: &str| -> u64 {
            r["streams"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["flow"] == flow)
                .map(|s| s["bytes_received"].as_u64().unwrap())
                .sum()
        };
        // iperf 2's server writes its lines as each stream ends: wait for this test's.
        let want = streams * if args.contains("--bidir") { 2 } else { 1 };
        assert!(
            common::wait_until(Duration::from_secs(5), || server_csv(log).len() >= seen + want),
            "{args}: iperf -s wrote no lines"
        );
        let lines = server_csv(log);
        let theirs: u64 = lines[seen..].iter().sum();
        // What iperf 2's server received counts each stream's 60-byte header; what it sent arrived
        // here whole.
        let headers = if args.contains("-R") {
            0
        } else {
            60 * streams as u64
        };
        let ours = way("client_to_server") + headers + way("server_to_client");
        assert_eq!(theirs, ours, "{args}");
        if args.starts_with("-n 10M") {
            assert_eq!(way("client_to_server"), 10 << 20, "{args}");
        }
    }
}

/// `iperf -s -p PORT ARGS` writing its lines to a file of its own (`name`), once it listens; killed
/// and its file removed when dropped, however the test ends.
pub(crate) struct LoggedIperf2 {
    child: Child,
    pub(crate) port: u16,
    pub(crate) log: std::path::PathBuf,
    args: Vec<String>,
}

impl LoggedIperf2 {
    pub(crate) fn start(args: &[&str], name: &str) -> LoggedIperf2 {
        let log = std::env::temp_dir().join(format!("landspeed-iperf2-{}-{name}", std::process::id()));
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (child, port) = LoggedIperf2::spawn(&args, &log);
        LoggedIperf2 {
            child,
            port,
            log,
            args,
        }
    }

    fn spawn(args: &[String], log: &std::path::Path) -> (Child, u16) {
        let port = common::free_port();
        let child = Command::new("iperf")
            .args(["-s", "-p", &port.to_string()])
            .args(args)
            .stdout(std::fs::File::create(log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("run iperf -s");
        assert!(common::wait_until(Duration::from_secs(5), || common::listening(
            port
        )));
        (child, port)
    }

    /// A fresh server (new port, empty log) in place of this one.
    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.child, self.port) = LoggedIperf2::spawn(&self.args, &self.log);
    }

    /// `landspeed run 127.0.0.1 -p PORT ARGS` against this server, and how many of `count`'s
    /// items its log held before that run. iperf 2.1.8's server now and then dies or hangs on a
    /// reverse test, its own client's included (by hand, `iperf -c -e -R -t 1 [--trip-times]`: it
    /// died in 1 of 60, 2 of 60 and 1 of 100 runs; for landspeed's, 2 of 60 and 3 of 100; docs/
    /// iperf2.md): a run it failed that
    /// way (it died, or sent nothing: `NoEcho`'s words) is run again on a fresh server, up to 3
    /// times; a server found dead before a run is replaced. Any other failure is the run's.
    pub(crate) fn run(
        &mut self,
        args: &[&str],
        count: impl Fn(&std::path::Path) -> usize,
    ) -> (common::Outcome, usize) {
        for attempt in 1..=3 {
            if self.child.try_wait().ok().flatten().is_some() {
                self.restart();
            }
            let p = self.port.to_string();
            let before = count(&self.log);
            let mut argv = vec!["run", "127.0.0.1", "-p", &p];
            argv.extend(args);
            let o = common::landspeed(&argv, Duration::from_secs(30));
            let died = self.child.try_wait().ok().flatten().is_some();
            let hung = o.stderr.contains("the iperf 2 server sent nothing within");
            if o.code == 0 || !(died || hung) || attempt == 3 {
                return (o, before);
            }
            eprintln!("iperf -s failed {args:?} (died: {died}, hung: {hung}), run again on a fresh one");
            self.restart();
        }
        unreachable!()
    }
}

impl Drop for LoggedIperf2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Kills the child when the test ends, however it ends.
pub(crate) fn scopeguard(c: &mut Child) -> impl Drop + '_ {
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    Kill(c)
}

/// The CSV lines of `-y C` output: (id, whether it received, bytes), the interval field too.
fn csv_lines(out: &str, server_port: u16) -> Vec<(String, bool, u64, String)> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() == 9 && f[5] != "-1").then(|| {
                let received = f[2] == server_port.to_string();
                (
                    f[5].to_string(),
                    received,
                    f[7].parse().unwrap(),
                    f[6].to_string(),
                )
            })
        })
        .collect()
}

/// The drop-in's `-y C` output and iperf 2.1.8's client's for one command line, against `port`
/// (None: a fresh `iperf -s`, and another if that one died under the clients, up to four; see
/// `reference_run`). None when every reference died: iperf 2.1.8's server exits under this test now
/// and then (1 run of the module in 5 here, twice in a row once; not reproduced outside it in 80
/// runs of the same two clients), and the landspeed half of the comparison still stands.
/// iperf 2's client may hang after a full-duplex test (see `matrix_client`); what it printed counts.
fn beside_iperf2(port: Option<u16>, args: &str) -> Option<(String, String, u16)> {
    let mut hangs = 0;
    for _ in 0..4 {
        let mut reference = port.is_none().then(Iperf2Server::start);
        let port = port.unwrap_or_else(|| reference.as_ref().map_or(0, |r| r.1));
        let line = format!("-c 127.0.0.1 -p {port} -y C {args}");
        let ours = common::landspeed(
            &std::iter::once("iperf2")
                .chain(line.split_whitespace())
                .collect::<Vec<_>>(),
            Duration::from_secs(30),
        );
        let (out, lines, hung) = client_or_hang(port, args);
        let died = reference.as_mut().and_then(|r| {
            let mut status = None;
            common::wait_until(Duration::from_millis(100), || {
                status = r.0.try_wait().ok().flatten();
                status.is_some()
            });
            status
        });
        if let Some(status) = died {
            eprintln!("iperf -s died ({status}) under {line}; once more on a fresh one");
            continue;
        }
        assert_eq!(ours.code, 0, "{line}: {}", ours.stderr);
        let both_ways = lines.iter().any(|l| l.received) && lines.iter().any(|l| !l.received);
        // iperf 2.1.8's full-duplex client also hangs before its second line now and then (seen
        // once in CI's module run with `-n 1M --full-duplex`), and once its `-n 2M -R` client did
        // (CI, 2026-12-07, the server not known; 0 of 160 runs by hand against `landspeed serve`,
        // half of them beside two busy loops): its own run again, up to four times.
        if hung && !(args.contains("--full-duplex") && both_ways) {
            hangs += 1;
            assert!(hangs < 4, "iperf {line} hung {hangs} times");
            eprintln!("iperf {line} hung before its lines were all out; once more");
            continue;
        }
        return Some((
            ours.stdout,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            port,
        ));
    }
    eprintln!("iperf -s died four times under {args}: compared against landspeed serve only");
    None
}

/// The same CSV lines from the drop-in and from iperf 2.1.8's client (stream ids, which way, every
/// interval's span; a total's span is the stream's own time), and for `-n` the same bytes.
fn compare_csv(got: Option<(String, String, u16)>, args: &str) {
    let Some((ours, theirs, port)) = got else {
        return;
    };
    let (a, b) = (csv_lines(&ours, port), csv_lines(&theirs, port));
    // iperf 2.1.8's sending thread now and then writes once more after -t and then prints an
    // interval past the test's end ("2.0-3.0" with one 128 KiB write, for `-t 2 -i 1 -P 2`): an
    // interval that starts at or after -t is its overrun, not a line of the test's.
    let seconds: Option<f64> = args
        .split_whitespace()
        .skip_while(|a| *a != "-t")
        .nth(1)
        .and_then(|t| t.parse().ok());
    let within = |span: &str| {
        let start: f64 = span.split('-').next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
        seconds.is_none_or(|t| start < t - 1e-9)
    };
    let b: Vec<_> = b.into_iter().filter(|(.., span)| within(span)).collect();
    let shape = |l: &[(String, bool, u64, String)]| {
        // A stream's last line is its total, whose span is its own measured time.
        let mut seen = std::collections::HashSet::new();
        let mut v: Vec<_> = l
            .iter()
            .rev()
            .map(|(id, r, _, span)| {
                let last = seen.insert((id.clone(), *r));
                (id.clone(), *r, if last { "total".into() } else { span.clone() })
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(shape(&a), shape(&b), "{args}:\n{ours}\n/ iperf 2.1.8:\n{theirs}");
    if args.starts_with("-n") {
        let bytes = |l: &[(String, bool, u64, String)]| l.iter().map(|x| x.2).sum::<u64>();
        assert_eq!(bytes(&a), bytes(&b), "{args}: {ours}");
    }
}

/// `landspeed iperf2 -c ... -y C` (the drop-in) and iperf 2.1.8's client, the same command line
/// against a fresh `iperf -s` each and against `landspeed serve`: the same CSV lines (stream ids,
/// which way, the interval fields), the same bytes for `-n` tests, exit 0; the text's lines have
/// iperf 2's shape; refusals name the option; and the binary started as `iperf` is the drop-in.
#[test]
fn the_iperf_drop_in_prints_what_iperf2s_client_prints() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    for args in ["-n 1M -P 2", "-n 2M -R", "-n 1M --full-duplex", "-t 2 -i 1 -P 2"] {
        compare_csv(beside_iperf2(None, args), args);
        let against_landspeed = beside_iperf2(Some(s.port), args);
        assert!(against_landspeed.is_some(), "{args}");
        compare_csv(against_landspeed, args);
    }
    // The text: iperf 2's head, a "connected with" line, the column head, stream and SUM lines.
    let text = common::landspeed(
        &[
            "iperf2",
            "-c",
            "127.0.0.1",
            "-p",
            &s.port.to_string(),
            "-n",
            "1M",
            "-P",
            "2",
            "-e",
        ],
        Duration::from_secs(30),
    );
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(
        lines[1].starts_with("Client connecting to 127.0.0.1, TCP port"),
        "{}",
        text.stdout
    );
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("connected with 127.0.0.1 port"))
            .count()
            == 2,
        "{}",
        text.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[ ID] Interval") && l.contains("Write/Err")),
        "{}",
        text.stdout
    );
    let sum = lines
        .iter()
        .find(|l| l.starts_with("[SUM] 0.0000-"))
        .expect("a [SUM] line");
    assert!(sum.contains(" 2.00 MBytes "), "{sum}");
    // Refused by name, one line, exit 1; unknown options likewise.
    for (args, name) in [
        (
            &["-c", "127.0.0.1", "-r", "-R"][..],
            "-r/-d with -R or --full-duplex",
        ),
        // -L defaults to the server's port: on one host that is the client's own listener.
        (
            &["-c", "127.0.0.1", "-d", "-p", "5999"][..],
            "choose another port",
        ),
        (
            &["-c", "127.0.0.1", "--bounceback", "-R"][..],
            "--bounceback with",
        ),
        // One of iperf 2.1.8's options the drop-in lacks (one 2.1.8 lacks is passed over, as
        // 2.1.8's getopt passes it: cmd::iperf2's unit tests).
        (&["-c", "127.0.0.1", "-C"][..], "does not support -C"),
    ] {
        let o = common::landspeed(
            &std::iter::once("iperf2")
                .chain(args.iter().copied())
                .collect::<Vec<_>>(),
            Duration::from_secs(10),
        );
        assert_eq!(o.code, 1, "{args:?}");
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(name), "{args:?}: {}", o.stderr);
    }
    let dir = std::env::temp_dir().join(format!("landspeed-iperf2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("iperf");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(common::bin(), &link).unwrap();
    let v = Command::new(&link).arg("-v").output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // On stderr, as iperf 2 writes it.
    assert!(
        String::from_utf8_lossy(&v.stderr).starts_with("iperf version 2.1.8 (landspeed "),
        "{v:?}"
    );
}

/// The lines of a bounceback client's text that both print (iperf 2's window line is not the
/// drop-in's: docs/iperf2.md), its figures' lines left to the total: iperf 2.1.8 sometimes prints a
/// first second's line without -i (seen with -t 1), so the lines compared are the head, the
/// connection, the column head, the last figures' line and the `BB8(f)-PDF` line (its bins, as
/// many as the round trips spread over, masked to one).
fn bounceback_lines(out: &str) -> Vec<String> {
    let total = out.lines().rfind(|l| l.ends_with(" rps")).unwrap_or("");
    let mut v: Vec<String> = masked_text(out)
        .into_iter()
        .filter(|l| !l.contains("-PDF:") && !l.starts_with("TCP window size") && !l.ends_with(" rps"))
        .collect();
    v.extend(masked_text(total));
    for pdf in masked_text(out).iter().filter(|l| l.contains("-PDF:")) {
        let (head, tail) = pdf
            .split_once(")=")
            .zip(pdf.rsplit_once(" ("))
            .map_or((pdf.as_str(), ""), |((h, _), (_, t))| (h, t));
        v.push(format!("{head})=BINS ({tail}"));
    }
    v
}

/// The bins of a `BB8(f)-PDF` line (`bin:count`) and its count.
fn pdf_bins(out: &str) -> (u64, Vec<(u32, u64)>) {
    let line = out
        .lines()
        .find(|l| l.contains("BB8(f)-PDF:"))
        .unwrap_or_else(|| panic!("no PDF line: {out}"));
    let count = line
        .split("cnt(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap()
        .parse()
        .unwrap();
    let bins = line.split(")=").nth(1).unwrap().split(' ').next().unwrap();
    let bins = (bins.split(',').filter(|b| !b.is_empty()))
        .map(|b| {
            b.split_once(':')
                .map(|(k, c)| (k.parse().unwrap(), c.parse().unwrap()))
                .unwrap()
        })
        .collect();
    (count, bins)
}

/// `PROGRAM -c 127.0.0.1 -p PORT ARGS` (iperf 2.1.8's client or the drop-in), which must end well
/// within 30 s; its stdout.
fn bounceback_client(program: &[&str], port: u16, args: &str) -> String {
    let mut all: Vec<String> = program.iter().map(|s| s.to_string()).collect();
    all.extend(["-c", "127.0.0.1", "-p", &port.to_string()].map(String::from));
    all.extend(args.split_whitespace().map(String::from));
    let child = Command::new(&all[0])
        .args(&all[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a bounceback client");
    let (o, killed) = common::wait_output_or_kill(child, Duration::from_secs(30));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!killed && o.status.success(), "{all:?}: {text}");
    text
}

#[test]
fn the_iperf_drop_in_prints_iperf2s_bounceback_lines() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    let theirs = Iperf2Server::start();
    let args = "--bounceback=3 --bounceback-period 0.25 --bounceback-hold 2 -l 200 -t 2.5";
    let run = |program: &[&str], port: u16| bounceback_client(program, port, args);
    let bin = common::bin();
    let reference = run(&["iperf"], theirs.1);
    let want = bounceback_lines(&reference);
    // The head, the connection, the column head, the total and the PDF line, each alike.
    assert!(want.iter().any(|l| l.ends_with(" rps")), "{reference}");
    assert!(
        want.last()
            .is_some_and(|l| l.contains("BB#(f)-PDF: bin(w=#us):cnt(#)=BINS (")),
        "{want:?}"
    );
    assert!(
        want.iter().any(|l| l.starts_with("Bounce-back test")),
        "{reference}"
    );
    for port in [theirs.1, s.port] {
        let mine = run(&[bin, "iperf2"], port);
        assert_eq!(
            bounceback_lines(&mine),
            want,
            "ours:\n{mine}\niperf 2.1.8's:\n{reference}"
        );
        // Every transaction waited the 2 ms hold, and the total counts what the intervals did.
        let total = mine.lines().rfind(|l| l.contains(" rps")).unwrap();
        let figures = total.split_whitespace().find(|w| w.contains('=')).unwrap();
        let min: f64 = figures.split(['=', '/']).nth(2).unwrap().parse().unwrap();
        assert!(min >= 2.0, "{total}");
        // The PDF counts every transaction, none under the 2 ms hold (bins of 100 µs from 1) nor
        // past the largest.
        let (count, bins) = pdf_bins(&mine);
        let max: f64 = figures.split(['=', '/']).nth(3).unwrap().parse().unwrap();
        assert_eq!(count.to_string(), figures.split('=').next().unwrap(), "{mine}");
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), count, "{mine}");
        // The bin's floor against the printed max, rounded to 3 decimals (bin 24's floor is
        // 2.3000000000000003 in binary, a max of 2.3003 prints 2.300: half a unit of the print).
        assert!(
            bins.iter()
                .all(|b| b.0 >= 21 && f64::from(b.0 - 1) * 0.1 <= max + 5e-4),
            "{mine}"
        );
    }
    // With -i, each whole interval as iperf 2 prints it.
    let p = s.port.to_string();
    let o = common::landspeed(
        &[
            "iperf2",
            "-c",
            "127.0.0.1",
            "-p",
            &p,
            "--bounceback=2",
            "--bounceback-period",
            "0.25",
            "-t",
            "2.2",
            "-i",
            "1",
        ],
        Duration::from_secs(20),
    );
    for span in [
        "] 0.0000-1.0000 sec ",
        "] 1.0000-2.0000 sec ",
        "] 0.0000-2.2000 sec ",
    ] {
        let l = o
            .stdout
            .lines()
            .find(|l| l.contains(span))
            .unwrap_or_else(|| panic!("{span}: {}", o.stdout));
        // Nine bursts of two; how they fall into the two whole seconds is the scheduler's.
        assert!(!span.contains("2.2") || l.contains(" 18="), "{l}");
        assert!(l.contains(" ms ") && l.ends_with(" rps"), "{l}");
    }
    // What it cannot run is refused by name.
    let o = common::landspeed(
        &[
            "iperf2",
            "-c",
            "127.0.0.1",
            "-p",
            &s.port.to_string(),
            "--bounceback",
            "-R",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("--bounceback with -u, -R, --full-duplex or -n"),
        "{}",
        o.stderr
    );
}

#[test]
fn the_iperf_drop_in_prints_iperf2s_bounceback_lines_over_several_connections() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    // `--bounceback -P 2`: each connection's line, iperf 2.1.8's `[SUM]` of them under its write
    // head, each connection's total and PDF line, then `[ CT]`; without -i, a line each second
    // (iperf 2.1.8's default with its default period). Its threads print in either order: the
    // lines are compared sorted, digits masked, the PDF lines' bins left out.
    let s = ServerProc::start("127.0.0.1", &[]);
    let theirs = Iperf2Server::start();
    let lines = |program: &[&str], port: u16, args: &str| {
        let text = bounceback_client(program, port, args);
        let masked = masked_text(&text)
            .into_iter()
            .filter(|l| !l.starts_with("TCP window size"));
        let bins = |l: String| match (l.contains("-PDF:"), l.split_once(")="), l.rsplit_once(" (")) {
            (true, Some((head, _)), Some((_, tail))) => format!("{head})=BINS ({tail}"),
            _ => l,
        };
        // iperf 2.1.8's [SUM] of a bounceback prints zeros ("0.000 Bytes  0.000 bits/sec  0/0");
        // the drop-in its connections' figures in that shape: the unit is the figure's.
        let unit = |l: String| match l.starts_with("[SUM]") {
            true => l
                .replace(" KBytes ", " Bytes ")
                .replace(" Kbits/sec ", " bits/sec "),
            false => l,
        };
        let mut v: Vec<String> = masked.map(bins).map(unit).collect();
        v.sort();
        (v, text)
    };
    for args in ["--bounceback -P 2 -t 2 -i 0.5", "--bounceback -P 3 -t 2"] {
        let (want, reference) = lines(&["iperf"], theirs.1, args);
        assert!(
            want.iter().any(|l| l.starts_with("[ CT] final connect times")),
            "{reference}"
        );
        assert!(want.iter().any(|l| l.starts_with("[SUM] ")), "{reference}");
        for port in [theirs.1, s.port] {
            let (got, mine) = lines(&[common::bin(), "iperf2"], port, args);
            assert_eq!(got, want, "{args}: ours:\n{mine}\niperf 2.1.8's:\n{reference}");
        }
    }
}

/// The bursts' mean latency (ms) and count on the last line of a stream the iperf 2 client
/// received (`[ *1] 0.0000-...` with the `Burst Latency` columns), if it printed one.
fn received_bursts(text: &str) -> Option<(f64, u64)> {
    burst_figures(text.lines().rev().find(|l| l.starts_with("[ *1] 0.0000-"))?)
}

/// A `Burst Latency` line's mean (ms) and burst count.
fn burst_figures(line: &str) -> Option<(f64, u64)> {
    let (figures, rest) = line.split_once(" ms (")?;
    let mean = figures.rsplit("  ").next()?.split('/').next()?.parse().ok()?;
    Some((mean, rest.split('/').next()?.parse().ok()?))
}

#[test]
fn an_iperf2_trip_times_client_times_the_bursts_landspeed_sends() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    // iperf 2.1.8's `-R`/`--full-duplex` client with `--trip-times` reads the server's echo of its
    // header, then times each 128 KiB burst from the stamp landspeed wrote in it. On loopback a
    // burst arrives within milliseconds (physical margin: under 1 s is asked).
    let s = ServerProc::start("127.0.0.1", &[]);
    for args in ["-t 1 -R --trip-times", "-t 1 --full-duplex --trip-times"] {
        let (out, hung) = text_client(s.port, args);
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(!hung || args.contains("--full-duplex"), "{args} hung: {text}");
        assert!(text.contains("Burst Latency avg/min/max/stdev"), "{args}: {text}");
        assert!(!text.contains("WARN: ignore --trip-times"), "{args}: {text}");
        assert!(!text.contains("Program error"), "{args}: {text}");
        let (mean_ms, bursts) = received_bursts(&text).unwrap_or_else(|| panic!("{args}: {text}"));
        assert!(bursts > 10, "{args}: {text}");
        assert!((0.0..1000.0).contains(&mean_ms), "{args}: {text}");
        assert!(common::line_with(&s, "iperf2 2.1.8 test").ends_with(": ok"));
    }
}

/// The mean (ms) and count of every `Burst Latency` line iperf 2's server printed.
fn bursts_printed(text: &str) -> Vec<(f64, u64)> {
    text.lines().filter_map(burst_figures).collect()
}

#[test]
fn landspeed_sends_and_times_iperf2_bursts_against_iperf2s_server() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    // `run --iperf2 --trip-times` against iperf 2.1.8's `iperf -s -e`: what landspeed sends, iperf
    // 2's server times from landspeed's stamps (its lines); what iperf 2 sends (-R, --bidir),
    // landspeed times (its result's trips). Loopback: a burst within a second (physical margin).
    let mut server = LoggedIperf2::start(&["-e"], "tt.txt");
    let printed =
        |log: &std::path::Path| bursts_printed(&std::fs::read_to_string(log).unwrap_or_default()).len();
    for args in ["-t 1", "-t 1 -R", "-t 1 --bidir", "-t 1 -b 50M"] {
        let mut argv = vec!["--iperf2", "--no-save", "--json", "--trip-times"];
        argv.extend(args.split_whitespace());
        let (o, seen) = server.run(&argv, printed);
        let log = &server.log;
        assert_eq!(o.code, 0, "{args}: {}", o.stderr);
        let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        let timed_here: Vec<&serde_json::Value> = (r["directions"].as_array().unwrap().iter())
            .filter(|d| d["flow"] == "server_to_client")
            .map(|d| &d["summary"]["trips"])
            .collect();
        for t in &timed_here {
            assert!(t["datagrams"].as_u64().unwrap_or(0) > 10, "{args}: {t}");
            assert!(
                (0.0..1000.0).contains(&t["mean_ms"].as_f64().unwrap()),
                "{args}: {t}"
            );
        }
        assert_eq!(
            timed_here.len(),
            usize::from(args.contains('R') || args.contains("bidir"))
        );
        if args.contains("-R") {
            continue;
        }
        assert!(
            common::wait_until(Duration::from_secs(5), || printed(log) > seen),
            "{args}: iperf -s printed no latency"
        );
        let text = std::fs::read_to_string(log).unwrap();
        assert!(
            !text.contains("Program error") && !text.contains("WARN"),
            "{args}: {text}"
        );
        let lines = bursts_printed(&text);
        let (mean, count) = *lines.last().unwrap();
        assert!(count > 10 && (0.0..1000.0).contains(&mean), "{args}: {text}");
        // Paced, each 128 KiB burst leaves whole (a kernel pace would spread it over 21 ms at
        // 50 Mbit/s): on loopback its mean is under a millisecond (physical margin: 10 ms).
        // Only the paced row: "--bidir" is not "-b" (it was read as one, and its unpaced
        // full-duplex mean, 10.8 ms once under CI's load, failed the paced row's bound).
        let paced = args.split_whitespace().any(|a| a == "-b");
        assert!(!paced || mean < 10.0, "{args}: {text}");
    }
}

/// A client's text for comparison: `masked_text` less what the drop-in's head and connection
/// lines leave out (iperf 2's `-e` head lines, its `(icwnd...)` and `(ct=...)` after the ports,
/// its `[ CT]` connect-time line; docs/iperf2.md).
fn trips_shape(out: &str) -> Vec<String> {
    let kept: String = out
        .lines()
        .filter(|l| !l.starts_with("Write buffer size") && !l.starts_with("TCP window size"))
        .filter(|l| !l.starts_with("[ CT]"))
        .map(|l| l.split(" (icwnd").next().unwrap_or(l).to_string() + "\n")
        .collect();
    // Adaptive units follow the rate of the moment.
    let units = |l: String| {
        ["K", "M", "G"].iter().fold(l, |l, p| {
            l.replace(&format!(" {p}Byte"), " Byte")
                .replace(&format!(" {p}bits"), " bits")
        })
    };
    masked_text(&kept).into_iter().map(units).collect()
}

#[test]
fn the_iperf_drop_in_prints_iperf2s_trip_times_and_e_client_lines() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    // iperf 2.1.8's client and the drop-in's, each against a fresh `iperf -s`: a sent test's
    // connection marked (trip-times); a received one's lines with its bursts' latency and reads,
    // -P's [SUM] under the reads' head; with -e, a received stream's reads and a sent [SUM]'s
    // writes and retries.
    let lines = [
        "-t 1.2 -i 0.5 --trip-times",
        "-t 1.2 -i 0.5 --trip-times -R",
        "-t 1 --trip-times -P 2 -R",
        "-t 1.2 -i 0.5 -e -R",
        "-t 1 -e -R -P 2 -b 50M",
        "-t 1 -e -P 2 -b 50M",
        // TCP full duplex: no direction's own [SUM]; both directions' [SUM] with -P (and with one
        // connection only without -i and -e); with -e the reads head and each connection's [FDk].
        "-t 1 --full-duplex",
        "-t 1.2 -i 0.5 --full-duplex -e",
        "-t 1 --full-duplex -e -P 2",
        "-t 1.2 -i 0.5 --full-duplex -P 2",
        // --hide-ips (session 25): the host as (**hidden**), IPv4 addresses as *.*.*.N.
        "-t 1 -e --hide-ips -b 50M",
        // --txdelay-time (session 25): connected, the start said, the data held back.
        "-t 1 --txdelay-time 0.5 -b 10M",
        // --tcp-write-prefetch (session 26): -e on, the head's "Event based writes" line, the
        // connections marked (prefetch=N), also when the server sends; --tcp-quickack's (qack).
        "-t 1 --tcp-write-prefetch 64K -b 50M",
        "-t 1 -R --tcp-write-prefetch 16K -b 50M",
        "-t 1 --tcp-quickack -R -e -b 50M",
        // --fq-rate with -R and --full-duplex (session 26; refused before): the header asks the
        // server to pace too; -R's connection marked (fq).
        "-t 1 -R --fq-rate 100m -e",
        "-t 1 --full-duplex --fq-rate 50m",
    ];
    for args in lines {
        // Figures masked: iperf 2.1.8's client and the drop-in's at once where paced.
        let (theirs, ours) = common::at_once_if(
            common::iperf2_paced(args),
            || {
                let s = Iperf2Server::start();
                let (out, hung) = text_client(s.1, args);
                assert!(!hung, "iperf -c {args} hung");
                String::from_utf8_lossy(&out.stdout).into_owned()
            },
            || {
                let s = Iperf2Server::start();
                let line = format!("-c 127.0.0.1 -p {} {args}", s.1);
                let o = crate::iperf2_dual::drop_in(&line, Duration::from_secs(30));
                assert_eq!(o.code, 0, "{args}: {}", o.stderr);
                o.stdout
            },
        );
        assert_eq!(
            trips_shape(&ours),
            trips_shape(&theirs),
            "{args}:\n{ours}\n/ iperf 2.1.8:\n{theirs}"
        );
        let timed = args.contains("--trip-times") && args.contains("-R");
        assert_eq!(ours.contains("Burst Latency"), timed, "{ours}");
    }
}

/// A TCP client's head, connection lines and `[ CT]` line, every other line left out, each with its
/// digits masked (and the window's unit: iperf 2.1.8 prints 16.0 KByte or 4.00 MByte as the
/// buffer's autotuning falls), sorted (-P's threads print their connections in either order).
fn head_and_connections(out: &str) -> Vec<String> {
    // (Not UDP's "read failed" and closing warnings: iperf 2.1.8 prints them as the server's
    // report comes or does not.)
    let kept = |l: &&str| {
        (!l.starts_with('[') && !l.starts_with("read failed"))
            || l.contains("connected with")
            || l.starts_with("[ CT]")
    };
    let mut v: Vec<String> = out
        .lines()
        .filter(kept)
        .map(|l| {
            let mut m = String::new();
            for c in l.chars() {
                let c = if c.is_ascii_digit() || c == '.' { '#' } else { c };
                if !(c == '#' && m.ends_with('#')) {
                    m.push(c);
                }
            }
            let m = m.replace("KByte", "Byte").replace("MByte", "Byte");
            // The buffer line's figure is iperf 2.1.8's autotuning race (16.0 KByte, 180 KByte or
            // 3.76 MByte from run to run, docs/iperf2.md): its padding goes with its width.
            match m.starts_with("TCP window size:") || m.starts_with("UDP buffer size:") {
                true => m.split_whitespace().collect::<Vec<_>>().join(" "),
                false => m,
            }
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_iperf_drop_ins_head_and_connection_lines_are_iperf2s() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    // iperf 2.1.8's own lines, and the drop-in's against the same kind of server: the head with
    // and without -e (its pid, flows, write size, type of service, window granted or warned), each
    // connection's (icwnd/mss/irtt=...) from TCP_INFO before the header goes, and with -e its
    // interface, (sock=N), (ct=...) and date, and -P's [ CT] line; the bounceback client's
    // (always enhanced) and the UDP client's (its buffer, -e's lines, the frames' and trip times'
    // marks) likewise; -S's (tos ...) mark, -Z's and -M's (or -m's) lines, --fq-rate's pacing line
    // (and its pace held: loopback unpaced carries tens of Gbit/s). Nothing else is left out.
    for args in [
        "-t 0.3",
        "-t 0.3 -e -P 2",
        "-t 0.3 -e -R -w 1M",
        "-t 0.3 -P 2 -w 300K",
        "-t 0.3 -e -S 0x10 -N -Z reno -M 1000",
        "-t 0.3 -S af11 -m -R",
        "-t 0.3 --fq-rate 100m",
        "-t 0.3 -e -P 2 --fq-rate 50M",
        "--bounceback -t 0.5",
        "-u -t 0.3",
        "-u -t 0.3 -e -P 2 -w 1M",
        "-u -t 0.3 -e -S 0x28",
        "-u -t 0.3 --ipg 10",
        "-u -t 0.3 -e --isochronous=60:1m,0 --ipg 1",
        "-u -t 0.3 --isochronous=60:20m,0 --trip-times",
    ] {
        let s = Iperf2Server::over_udp(args.starts_with("-u"));
        let (out, hung) = text_client(s.1, args);
        assert!(!hung, "iperf -c {args} hung");
        let theirs = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = format!("-c 127.0.0.1 -p {} {args}", s.1);
        let o = crate::iperf2_dual::drop_in(&line, Duration::from_secs(30));
        assert_eq!(o.code, 0, "{args}: {}", o.stderr);
        let want = head_and_connections(&theirs);
        if args.contains("--fq-rate") {
            assert!(!o.stdout.contains("Gbits/sec"), "{args}: not paced: {}", o.stdout);
        }
        let tcp = !args.starts_with("-u");
        assert_eq!(
            want.iter().any(|l| l.contains("(icwnd/mss/irtt=")),
            tcp,
            "{theirs}"
        );
        assert_eq!(
            head_and_connections(&o.stdout),
            want,
            "{args}:\n{}\n/ iperf 2.1.8:\n{theirs}",
            o.stdout
        );
    }
}

/// `run --iperf2 --start-at`: iperf 2's `--txstart-time` against iperf 2.1.8's own server, TCP and
/// UDP: the streams connect at once, the data flows from the instant (2 s ahead), and the result
/// counts from it (a physical margin of 0.25 s).
#[test]
fn run_iperf2_starts_its_data_at_the_instant_at_iperf2s_server() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    for udp in [false, true] {
        let server = Iperf2Server::over_udp(udp);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let at = (now.unwrap().as_secs_f64() + 2.0).round();
        let mut args = vec!["--iperf2", "-t", "1", "--no-save"];
        if udp {
            args.extend(["-u", "-b", "10M"]);
        }
        let at_arg = format!("{at}");
        args.extend(["--start-at", &at_arg]);
        let r = common::run_json("127.0.0.1", server.1, &args);
        let started = r["started_unix_s"].as_f64().unwrap();
        assert!(
            (at..at + 0.25).contains(&started),
            "udp {udp}: {started} for {at}"
        );
        assert_eq!(r["config"]["scheduled_start_unix_s"].as_f64(), Some(at));
        let d = r["summary"]["duration_s"].as_f64().unwrap();
        assert!((0.9..1.5).contains(&d), "udp {udp}: {d} s");
    }
}

/// An iperf 2.1.8 client's `--fq-rate` with `-R` or `--full-duplex` paces what `landspeed serve`
/// sends back, as iperf 2.1.8's server paces it (before, landspeed's sent unpaced: 12.9 Gbit/s
/// where 100 Mbit/s was asked). 100 Mbit/s for 1 s is 12.5 MB; physical margin: 6 to 19 MB
/// (50-150 Mbit/s; unpaced on loopback is a hundred times more).
#[test]
fn an_iperf2_clients_fq_rate_paces_what_landspeed_sends_back() {
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    for args in ["-t 1 -R --fq-rate 100m", "-t 1 --full-duplex --fq-rate 100m"] {
        let (out, lines, _) = matrix_client(s.port, args);
        assert_eq!(out, Some(0), "{args}");
        let back = total(&lines, true);
        assert!(
            (6_000_000..19_000_000).contains(&back),
            "{args}: {back} bytes back"
        );
    }
}

/// `-u --trip-times` with datagrams under 128 bytes: iperf 2.1.8 sends them in its small form (the
/// prefix and a flags word, no test header), which landspeed's server did not know (no report, the
/// client waiting out its ten ends) and the drop-in refused. Now: iperf 2.1.8's client against
/// `landspeed serve`, and the drop-in against iperf 2.1.8's server and landspeed's, each get the
/// server's report with its latency columns, the lines iperf 2.1.8's client prints against its own
/// server (numbers masked). iperf 2.1.8's UDP server dies of a segfault at its second such client
/// (by hand, its own client twice): each client here gets a fresh one.
#[test]
fn small_trip_times_datagrams_are_served_and_sent_as_iperf2_sends_them() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let args = "-u -t 1 --trip-times -l 64 -e";
    let last = |text: &str| -> String {
        let line = text
            .lines()
            .rev()
            .find(|l| l.contains(" ms "))
            .unwrap_or_default();
        crate::iperf2_dual::masked(line).concat()
    };
    let theirs = {
        let s = Iperf2Server::with(&["-u"]);
        let (out, hung) = text_client(s.1, args);
        assert!(!hung, "iperf -c {args} hung against its own server");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let want = last(&theirs);
    assert!(want.contains("pps") && !want.is_empty(), "{theirs}");
    let landspeed = ServerProc::start("127.0.0.1", &[]);
    let (out, hung) = text_client(landspeed.port, args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!hung && out.status.success(), "iperf -c {args}: {text}");
    assert_eq!(
        last(&text),
        want,
        "iperf 2.1.8's client against landspeed serve:\n{text}"
    );
    for port in [None, Some(landspeed.port)] {
        let fresh = port.is_none().then(|| Iperf2Server::with(&["-u"]));
        let p = port.unwrap_or_else(|| fresh.as_ref().map_or(0, |s| s.1));
        let o = crate::iperf2_dual::drop_in(&format!("-c 127.0.0.1 -p {p} {args}"), Duration::from_secs(30));
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(
            last(&o.stdout),
            want,
            "the drop-in against port {p}:\n{}",
            o.stdout
        );
    }
}
