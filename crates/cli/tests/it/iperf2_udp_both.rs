//! iperf 2's UDP `--full-duplex` (each socket both ways, no report at the end) with iperf 2.1.8 at
//! either end: its client against `landspeed serve --iperf2-udp-send` beside iperf 2's own server,
//! `landspeed run --iperf2 -u --bidir` against both servers, and the drop-in's lines beside iperf
//! 2.1.8's client's.

use crate::common::{self, ServerProc};
use crate::iperf2_server::{have_iperf2, masked_text, run_iperf2_udp_outcome, Iperf2Server};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `iperf -c 127.0.0.1 -p PORT -u EXTRA`, ended within 25 s: its exit code and its text.
fn iperf2_udp(port: u16, extra: &[&str]) -> (Option<i32>, String) {
    let (code, text, hung) = iperf2_udp_run(port, extra);
    assert!(!hung, "iperf -c -u {extra:?} hung: {text}");
    (code, text)
}

/// `iperf -c 127.0.0.1 -p PORT -u EXTRA`, killed after 25 s: its exit code (None when killed by a
/// signal), its text, and whether it hung.
fn iperf2_udp_run(port: u16, extra: &[&str]) -> (Option<i32>, String, bool) {
    let child = Command::new("iperf")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-u"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run iperf -c");
    let (out, hung) = common::wait_output_or_kill(child, Duration::from_secs(25));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let code = if hung { None } else { out.status.code() };
    (code, text, hung)
}

/// `iperf2_udp` as a reference to compare with: iperf 2.1.8's client is run again, twice at most,
/// when it hangs, dies or warns that the last datagram went unanswered. Its dual and tradeoff
/// modes with `-P 2` race in its own threads: against its own server it warned in 20 of 20 `-d
/// -P 2` runs; against landspeed's, on an idle machine none in 40, but under CI's load it has
/// died of heap corruption ("malloc(): unsorted double linked list corrupted"), hung with its
/// listener silent, or warned. The last try is returned whatever it was. Without a `port`, each
/// try has a fresh `iperf -s -u`.
fn iperf2_udp_reference(port: Option<u16>, extra: &[&str]) -> (Option<i32>, String) {
    let mut last = (None, String::new());
    for attempt in 0..3 {
        let own = port.is_none().then(|| Iperf2Server::with(&["-u"]));
        let port = port.or(own.as_ref().map(|s| s.1)).expect("a port");
        let (code, text, hung) = iperf2_udp_run(port, extra);
        if code == Some(0) && !text.contains("WARNING: ack of last datagram failed") {
            return (code, text);
        }
        eprintln!("iperf -c -u {extra:?} (try {attempt}): hung {hung}, exit {code:?}: {text}");
        last = (code, text);
    }
    last
}

/// `iperf -c 127.0.0.1 -p PORT -u --full-duplex ARGS`: its exit code, and each stream it received
/// (the `[ *N]` totals: lost, total), from its text.
fn iperf2_client(port: u16, args: &str) -> (Option<i32>, Vec<(u64, u64)>, String) {
    let extra: Vec<&str> = std::iter::once("--full-duplex")
        .chain(args.split_whitespace())
        .collect();
    let (code, text) = iperf2_udp(port, &extra);
    (code, received_totals(&text), text)
}

/// The received streams' totals (`[ *N] 0.0000-...` lines with lost/total), in stream order.
fn received_totals(text: &str) -> Vec<(u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = text
        .lines()
        .filter(|l| l.starts_with("[ *") && l.contains(" 0.0000-") && l.contains(" ms "))
        .filter_map(|l| {
            let lt = l.split(" ms ").nth(1)?.split_whitespace().next()?;
            let (lost, total) = lt.split_once('/')?;
            Some((l[..5].to_string(), lost.parse().ok()?, total.parse().ok()?))
        })
        .collect();
    v.sort();
    // With -i the last interval can start at 0 too (a test of one interval): the totals come last.
    v.dedup_by(|b, a| a.0 == b.0);
    v.into_iter().map(|(_, l, t)| (l, t)).collect()
}

#[test]
fn iperf2s_udp_full_duplex_client_gets_from_landspeed_what_iperf2s_server_sends() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    for args in ["-t 1", "-n 60K -l 1200", "-t 1 -P 2 -b 2M"] {
        let theirs = iperf2_client(Iperf2Server::with(&["-u"]).1, args);
        let ours = iperf2_client(s.port, args);
        assert_eq!(ours.0, Some(0), "{args}: {}", ours.2);
        assert_eq!(theirs.0, ours.0, "{args}");
        assert_eq!(
            ours.1.len(),
            theirs.1.len(),
            "{args}:\n{}\n/ iperf 2.1.8's server:\n{}",
            ours.2,
            theirs.2
        );
        // iperf 2.1.8's own server now and then leaves one of -P's streams with nothing (its
        // count 0/0): its largest count stands for each stream.
        let t = theirs.1.iter().map(|x| x.1).max().unwrap_or(0);
        assert!(t > 0, "{args}: iperf 2.1.8's server sent nothing:\n{}", theirs.2);
        for (lost, o) in &ours.1 {
            // The server's datagrams, as iperf 2.1.8's client counted them: a byte count the same
            // (within the end datagram), a time within 10%; none lost on loopback.
            let close = if args.contains("-n") {
                t.abs_diff(*o) <= 1
            } else {
                t.abs_diff(*o) * 10 <= t
            };
            assert!(
                close,
                "{args}: landspeed's {o} datagrams, iperf 2's {t}:\n{}",
                ours.2
            );
            assert!(*lost <= 1, "{args}: {lost} lost:\n{}", ours.2);
        }
        let log = common::line_with(&s, "bidir");
        assert!(log.contains(": ok"), "{args}: {log}");
    }
}

#[test]
fn landspeed_runs_iperf2s_udp_full_duplex_against_both_servers() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    for port in [Iperf2Server::with(&["-u"]).1, s.port] {
        let p = port.to_string();
        let args = [
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "--iperf2",
            "-u",
            "--bidir",
            "-t",
            "1",
            "-P",
            "2",
            "-b",
            "4M",
            "--json",
            "--no-save",
        ];
        let o = common::landspeed(&args, Duration::from_secs(30));
        assert_eq!(o.code, 0, "port {p}: {}", o.stderr);
        let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        let streams = r["streams"].as_array().unwrap();
        assert_eq!(streams.len(), 4, "{r}");
        for st in streams {
            let moved = st["bytes_received"].as_u64().unwrap();
            // 2 Mbit/s a stream for 1 s: about 170 KiB each way; more than half of it.
            assert!(moved > 85_000, "port {p}: stream {st}");
        }
        let back: Vec<&serde_json::Value> = streams
            .iter()
            .filter(|s| s["flow"] == "server_to_client")
            .collect();
        assert_eq!(back.len(), 2, "{r}");
        assert!(
            back.iter()
                .all(|s| s["udp"]["datagrams_lost"].as_u64() == Some(0)),
            "{r}"
        );
        let shown = r["intervals"][0]["streams"].as_array().unwrap().len();
        assert_eq!(shown, 4, "the first interval has both ways' streams: {r}");
    }
}

#[test]
fn the_iperf_drop_in_prints_iperf2s_udp_full_duplex_lines() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    // Without -i (session 25): iperf 2.1.8 closes one connection's test with the [SUM] of both
    // ways and [SUM-2]'s count, or with -e its [FD1].
    for args in ["-t 1 -i 0.5", "-t 1 -i 0.5 -e", "-t 1", "-t 1 -e"] {
        the_drop_in_prints_udp_full_duplex(&s, args);
    }
    // With -P, iperf 2.1.8's closing [SUM] of every stream both ways and [SUM-4]'s count (its own
    // client's -P lines vary run to run: the drop-in's are checked on their own).
    let line = format!("iperf2 -c 127.0.0.1 -p {} -u --full-duplex -t 1 -P 2", s.port);
    let ours = common::landspeed(
        &line.split_whitespace().collect::<Vec<_>>(),
        Duration::from_secs(30),
    );
    assert_eq!(ours.code, 0, "{line}: {}", ours.stderr);
    let lines: Vec<&str> = ours.stdout.lines().collect();
    let n = lines.len();
    assert!(n >= 3, "{}", ours.stdout);
    assert_eq!(
        lines[n - 3],
        "[ ID] Interval       Transfer     Bandwidth    Datagrams   PPS",
        "{}",
        ours.stdout
    );
    let sum: Vec<&str> = lines[n - 2].split_whitespace().collect();
    let count = lines[n - 1]
        .strip_prefix("[SUM-4] Sent ")
        .and_then(|r| r.strip_suffix(" datagrams"));
    // About 4 × 86 datagrams (1 Mbit/s of 1470 bytes for 1 s each way on two connections).
    assert!(
        sum[0] == "[SUM]"
            && sum.last() == Some(&"pps")
            && count.is_some_and(|c| c == sum[sum.len() - 3] && c.parse::<u64>().is_ok_and(|c| c > 300)),
        "{}",
        ours.stdout
    );
}

/// The drop-in's `-u --full-duplex ARGS` lines against a fresh iperf 2.1.8 server and `s`, beside
/// iperf 2.1.8's client's.
fn the_drop_in_prints_udp_full_duplex(s: &ServerProc, args: &str) {
    let (_, _, theirs) = iperf2_client(Iperf2Server::with(&["-u"]).1, args);
    for port in [Iperf2Server::with(&["-u"]).1, s.port] {
        let line = format!("iperf2 -c 127.0.0.1 -p {port} -u --full-duplex {args}");
        let ours = common::landspeed(
            &line.split_whitespace().collect::<Vec<_>>(),
            Duration::from_secs(30),
        );
        assert_eq!(ours.code, 0, "{line}: {}", ours.stderr);
        assert_eq!(
            masked_text(&ours.stdout),
            masked_text(&theirs),
            "{line}:\n{}\n/ iperf 2.1.8:\n{theirs}",
            ours.stdout
        );
    }
}

/// A stream's datagrams lost and in all, as an iperf 2 line prints them.
type LostTotal = (u64, u64);

/// `iperf -c 127.0.0.1 -p PORT -u ARGS -L LISTEN`: its exit code, the stream it received on its
/// listener (lost, total), and the server's report of its own stream (lost, total).
fn iperf2_dual_client(port: u16, args: &str) -> (Option<i32>, Option<LostTotal>, Option<LostTotal>, String) {
    let listen = common::free_port().to_string();
    let extra: Vec<&str> = ["-L", listen.as_str()]
        .into_iter()
        .chain(args.split_whitespace())
        .collect();
    let (code, text) = iperf2_udp(port, &extra);
    let lost_total = |l: &str| {
        let lt = l.split(" ms ").nth(1)?.split_whitespace().next()?;
        let (lost, total) = lt.split_once('/')?;
        Some((lost.parse().ok()?, total.parse().ok()?))
    };
    let mut lines = text.lines();
    let mut received = None;
    let mut report = None;
    while let Some(l) = lines.next() {
        if l.contains("Server Report:") {
            report = lines.find(|l| l.contains(" ms ")).and_then(lost_total);
        } else if l.contains(" ms ") && l.contains(" 0.0000-") {
            received = lost_total(l);
        }
    }
    (code, received, report, text)
}

#[test]
fn iperf2s_udp_dual_and_tradeoff_clients_get_the_servers_stream_from_landspeed() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--connect-back", "--iperf2-udp-send"]);
    for args in ["-d -t 1", "-r -t 1", "-d -n 60K -l 1200"] {
        let theirs = iperf2_dual_client(Iperf2Server::with(&["-u"]).1, args);
        let ours = iperf2_dual_client(s.port, args);
        assert_eq!(ours.0, Some(0), "{args}: {}", ours.3);
        assert_eq!(theirs.0, ours.0, "{args}");
        let (Some((lost, got)), Some((_, want))) = (ours.1, theirs.1) else {
            panic!(
                "{args}: no stream received from one of the servers:\n{}\n/ iperf 2.1.8's server:\n{}",
                ours.3, theirs.3
            );
        };
        // The server's stream as the client's listener counted it: a byte count the same within
        // the end datagram, a time within 10%, none lost on loopback.
        let close = if args.contains("-n") {
            got.abs_diff(want) <= 1
        } else {
            got.abs_diff(want) * 10 <= want
        };
        assert!(
            close && lost <= 1,
            "{args}: landspeed's {lost}/{got}, iperf 2's {want}:\n{}",
            ours.3
        );
        assert!(
            ours.2.is_some_and(|(l, t)| l <= 1 && t > 0),
            "{args}: no server report:\n{}",
            ours.3
        );
        common::lines_with(&s, &["(UDP, back) test", "(UDP) test"]);
    }
    // Without both options the server sends nothing back and says why.
    let plain = ServerProc::start("127.0.0.1", &["--iperf2-udp-send"]);
    let refused = iperf2_dual_client(plain.port, "-d -t 1");
    assert!(refused.1.is_none(), "{}", refused.3);
    let log = common::line_with(&plain, "iperf2");
    assert!(log.contains("--connect-back and --iperf2-udp-send"), "{log}");
}

/// Each document's streams (flow, bytes received, datagrams lost) in the JSON of a `landspeed run
/// --iperf2 -u ARGS --json`.
fn documents(o: &common::Outcome) -> Vec<Vec<(String, u64, Option<u64>)>> {
    serde_json::Deserializer::from_str(&o.stdout)
        .into_iter::<serde_json::Value>()
        .map(|d| {
            let d = d.expect("a JSON document");
            let streams = d["streams"].as_array().expect("streams").clone();
            streams
                .iter()
                .map(|s| {
                    let flow = s["flow"].as_str().unwrap_or_default().to_string();
                    (
                        flow,
                        s["bytes_received"].as_u64().unwrap_or(0),
                        s["udp"]["datagrams_lost"].as_u64(),
                    )
                })
                .collect()
        })
        .collect()
}

#[test]
fn landspeed_runs_iperf2s_udp_dual_and_tradeoff_against_both_servers() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--connect-back", "--iperf2-udp-send"]);
    for (args, want_docs) in [
        ("--dualtest -t 1", 1),
        ("--tradeoff -t 1", 2),
        ("--dualtest -t 1 -P 2", 1),
        ("--tradeoff -t 1 -P 3", 2),
    ] {
        let p = args.rsplit_once("-P ").map_or(1, |(_, p)| p.parse().unwrap());
        // A fresh iperf 2.1.8 server each time: after a -d test it can miss the next -r's report.
        let theirs = Iperf2Server::with(&["-u"]);
        let reference = theirs.1;
        for port in [reference, s.port] {
            let o = run_iperf2_udp_outcome(port, args);
            if o.code != 0 && port == reference && p > 1 && args.contains("--tradeoff") {
                // iperf 2.1.8's server, with -r and -P above 1, now and then never sends its
                // streams back (its own client with the same line got none back 1 run in 8 by
                // hand; docs/iperf2.md): the client says so in one line after its wait.
                let line = format!("the server sent 0 of {p} streams back to UDP port");
                assert!(o.stderr.contains(&line), "{args}: {}", o.stderr);
                eprintln!("{args}: iperf 2.1.8's server sent nothing back (its stall)");
                continue;
            }
            assert_eq!(o.code, 0, "port {port} {args}: {}", o.stderr);
            let docs = documents(&o);
            assert_eq!(docs.len(), want_docs, "port {port} {args}: {docs:?}");
            let streams: Vec<_> = docs.concat();
            let flows: Vec<&str> = streams.iter().map(|s| s.0.as_str()).collect();
            // Each of -P's streams each way: this end's first, then the server's (to the
            // listening port, each from a port of its own).
            let want: Vec<&str> = std::iter::repeat_n("client_to_server", p)
                .chain(std::iter::repeat_n("server_to_client", p))
                .collect();
            assert_eq!(flows, want, "port {port} {args}");
            for (flow, bytes, lost) in &streams {
                // 1 Mbit/s for 1 s (landspeed's -b is the test's, shared by -P's streams): about
                // 128 KB each way; more than 100 KB, none lost on loopback. iperf 2.1.8's server
                // now and then hands datagrams of one of -P's streams to another's socket (one
                // stream over what it was sent, another short): up to one a stream here, and with
                // its -P 3 two seen by hand.
                let lost_at_most = if port == reference && p > 1 && flow == "client_to_server" {
                    p as u64 - 1
                } else {
                    1
                };
                assert!(
                    *bytes > 100_000 / p as u64 && lost.unwrap_or(0) <= lost_at_most,
                    "port {port} {args}: {flow} {bytes} {lost:?}"
                );
            }
        }
    }
}

/// Masked lines with the listener's first line cut to its protocol: iperf 2.1.8 prints "port L",
/// or "ports L-P with pid N" when the server's port P is above `-L` (report/iperf2_dual_text's unit
/// test holds the drop-in to both), and the two runs' free ports fall either way.
fn listener_as_one(masked: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = masked
        .into_iter()
        .map(|l| match l.starts_with("Server listening on UDP") {
            true => "Server listening on UDP".to_string(),
            false => l,
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_iperf_drop_in_prints_iperf2s_udp_dual_and_tradeoff_lines() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--connect-back", "--iperf2-udp-send"]);
    for args in [
        "-d -t 2 -i 1",
        "-r -t 1 -i 0.5",
        "-d -t 1",
        "-r -t 1 -i 0.5 -y C",
        "-d -t 1 -i 0.5 -e",
    ] {
        let listen = common::free_port().to_string();
        let extra: Vec<&str> = args.split_whitespace().chain(["-L", &listen]).collect();
        // 1 Mbit/s each way: the three runs go at once.
        let drop_in = |port: u16| {
            let line = format!(
                "iperf2 -c 127.0.0.1 -p {port} -u {args} -L {}",
                common::free_port()
            );
            let ours = common::landspeed(
                &line.split_whitespace().collect::<Vec<_>>(),
                Duration::from_secs(30),
            );
            (line, ours)
        };
        // A fresh iperf 2.1.8 server for each test (a reused one can miss a report).
        let iperf2 = Iperf2Server::with(&["-u"]);
        let ((code, theirs), (a, b)) = common::at_once(
            || iperf2_udp_reference(None, &extra),
            || common::at_once(|| drop_in(iperf2.1), || drop_in(s.port)),
        );
        assert_eq!(code, Some(0), "iperf 2.1.8 -u {args}: {theirs}");
        for (line, ours) in [a, b] {
            assert_eq!(ours.code, 0, "{line}: {}", ours.stderr);
            assert_eq!(
                listener_as_one(masked_text(&ours.stdout)),
                listener_as_one(masked_text(&theirs)),
                "{line}:\n{}\n/ iperf 2.1.8:\n{theirs}",
                ours.stdout
            );
        }
    }
    // Two streams each way: against landspeed's server, iperf 2.1.8's client beside (its own
    // server now and then sends one stream of two back: it/iperf2_udp_both.rs above). The kinds of
    // line compared, not their count: iperf 2.1.8's threads race to print an interval's `[SUM]` (or
    // not) and number its last `[SUM-N]` 4 or 8.
    let kinds = |t: &str| -> std::collections::BTreeSet<String> {
        listener_as_one(masked_text(t)).into_iter().collect()
    };
    for args in ["-d -P 2 -t 1 -i 0.5", "-r -P 2 -t 1 -i 0.5", "-d -P 2 -t 1 -e"] {
        let listen = common::free_port().to_string();
        let extra: Vec<&str> = args.split_whitespace().chain(["-L", &listen]).collect();
        let line = format!(
            "iperf2 -c 127.0.0.1 -p {} -u {args} -L {}",
            s.port,
            common::free_port()
        );
        let ((code, theirs), ours) = common::at_once(
            || iperf2_udp_reference(Some(s.port), &extra),
            || {
                common::landspeed(
                    &line.split_whitespace().collect::<Vec<_>>(),
                    Duration::from_secs(30),
                )
            },
        );
        assert_eq!(code, Some(0), "iperf 2.1.8 -u {args}: {theirs}");
        assert_eq!(ours.code, 0, "{line}: {}", ours.stderr);
        assert_eq!(
            kinds(&ours.stdout),
            kinds(&theirs),
            "{line}:\n{}\n/ iperf 2.1.8:\n{theirs}",
            ours.stdout
        );
        // The streams back are numbered after the client's: 3 and 4.
        for n in ["[  3] ", "[  4] "] {
            assert!(ours.stdout.contains(n), "{line}: {}", ours.stdout);
        }
    }
}
