//! The `iperf` drop-in's output options beside iperf 2.1.8's client, against `landspeed serve`:
//! `-o FILE` (one line on stdout saying so, then stdout and stderr into FILE) and `-x` (reports left
//! out: `S` the head, `C` the connections' lines as 2.1.8 leaves them out; `D` and `V`, which 2.1.8's
//! client hangs on or ignores, as its manual says) and `--sum-only` (the streams' `[SUM-N]` lines).

use crate::common::{self, ServerProc};
use crate::iperf2_dual::{drop_in, ids, masked, on_time};
use crate::iperf2_server::have_iperf2;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// What `-o FILE` prints on stdout before the rest goes to FILE (iperf 2.1.8's main.cpp).
fn redirected(file: &Path) -> String {
    format!(
        "Output from stdout and stderr will be redirected to file {}\n",
        file.display()
    )
}

#[test]
fn o_writes_what_iperf2s_client_writes_into_the_file_it_names() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    let dir = std::env::temp_dir().join(format!("landspeed-iperf2-o-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (theirs_file, mine_file) = (dir.join("iperf.txt"), dir.join("drop-in.txt"));
    let test = "-t 1 -i 0.5";
    let line = |file: &Path| format!("-c 127.0.0.1 -p {} {test} -o {}", s.port, file.display());
    let theirs = common::output_within(
        Command::new("iperf").args(line(&theirs_file).split_whitespace()),
        Duration::from_secs(20),
    );
    let mine = drop_in(&line(&mine_file), Duration::from_secs(20));
    assert_eq!(mine.code, 0, "{}", mine.stderr);
    assert_eq!(String::from_utf8_lossy(&theirs.stdout), redirected(&theirs_file));
    assert_eq!(mine.stdout, redirected(&mine_file));
    assert_eq!(mine.stderr, "");
    let read = |f: &Path| std::fs::read_to_string(f).unwrap();
    let (theirs_text, mine_text) = (read(&theirs_file), read(&mine_file));
    assert!(
        mine_text.contains("Client connecting to 127.0.0.1"),
        "{mine_text}"
    );
    assert_eq!(
        masked(&on_time(&mine_text, test)),
        masked(&on_time(&theirs_text, test)),
        "{mine_text}\n/ iperf:\n{theirs_text}"
    );
    // A file that cannot be made: one line, exit 1, nothing run or printed.
    let bad = dir.join("no-such-dir/x.txt");
    let port = s.port.to_string();
    let args = ["iperf2", "-c", "127.0.0.1", "-p", &port, "-t", "1", "-o"];
    let o = common::landspeed(
        &[&args[..], &[bad.to_str().unwrap()]].concat(),
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(o.stdout, "");
    assert!(
        o.stderr.starts_with(&format!("iperf: -o {}: ", bad.display())) && o.stderr.lines().count() == 1,
        "{}",
        o.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `iperf -c 127.0.0.1 -p PORT ARGS` by iperf 2.1.8's client and by the drop-in (at once when
/// paced): their stdout.
fn both(port: u16, args: &str) -> (String, String) {
    let line = format!("-c 127.0.0.1 -p {port} {args}");
    let (theirs, mine) = beside(common::iperf2_paced(args), || line.clone(), || line.clone());
    assert_eq!(theirs.status.code(), Some(0), "iperf {line}: {theirs:?}");
    assert_eq!(mine.code, 0, "{line}: {}", mine.stderr);
    (String::from_utf8_lossy(&theirs.stdout).into_owned(), mine.stdout)
}

/// iperf 2.1.8's client with the arguments `theirs` makes and the drop-in with those `mine` makes
/// (each made as its client starts), at once when `paced`, else one after the other; each within
/// 20 s.
fn beside(
    paced: bool,
    theirs: impl FnOnce() -> String + Send,
    mine: impl FnOnce() -> String + Send,
) -> (std::process::Output, common::Outcome) {
    common::at_once_if(
        paced,
        || {
            let line = theirs();
            common::output_within(
                Command::new("iperf").args(line.split_whitespace()),
                Duration::from_secs(20),
            )
        },
        || drop_in(&mine(), Duration::from_secs(20)),
    )
}

/// A fresh iperf 2.1.8 server (kept by the caller until its client ends) when `iperf2`, else
/// landspeed's at `ours`: the port to run against.
fn fresh_or(iperf2: bool, ours: u16) -> (Option<crate::iperf2_server::Iperf2Server>, u16) {
    match iperf2 {
        true => {
            let s = crate::iperf2_server::Iperf2Server::start();
            let p = s.1;
            (Some(s), p)
        }
        false => (None, ours),
    }
}

#[test]
fn x_leaves_out_the_reports_iperf2s_client_leaves_out() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    // The head (S) and the connections' lines (C), as iperf 2.1.8 leaves them out.
    for args in [
        "-t 1 -i 0.5 -x C",
        "-t 1 -x S",
        "-t 1 -i 0.5 -x sc",
        "-u -t 1 -x SC",
    ] {
        let (theirs, mine) = both(s.port, args);
        assert_eq!(
            masked(&on_time(&mine, args)),
            masked(&on_time(&theirs, args)),
            "{args}:\n{mine}\n/ iperf:\n{theirs}"
        );
        let letters = args.rsplit(' ').next().unwrap().to_ascii_uppercase();
        assert_eq!(
            mine.contains("Client connecting to"),
            !letters.contains('S'),
            "{args}: {mine}"
        );
        assert_eq!(
            mine.contains(" connected with "),
            !letters.contains('C'),
            "{args}: {mine}"
        );
    }
    // The data (D): the head and the connections' lines only (iperf 2.1.8's client hangs).
    let mine = landspeed_only(s.port, "-t 1 -i 0.5 -x D").stdout;
    assert!(
        mine.contains("Client connecting to") && mine.contains(" connected with "),
        "{mine}"
    );
    assert!(!mine.contains(" sec ") && !mine.contains("[ ID]"), "{mine}");
    // The server's report (V) over UDP: the client's own lines stay (iperf 2.1.8 ignores V).
    let mine = landspeed_only(s.port, "-u -t 1 -x V").stdout;
    assert!(
        mine.contains("Sent ") && !mine.contains("Server Report"),
        "{mine}"
    );
    // A letter iperf 2 does not name: one line, exit 1.
    let bad = landspeed_only(s.port, "-t 1 -x CQ");
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr.starts_with("iperf: -x CQ: 'Q'") && bad.stderr.lines().count() == 1,
        "{}",
        bad.stderr
    );
}

/// The drop-in alone.
fn landspeed_only(port: u16, args: &str) -> common::Outcome {
    drop_in(&format!("-c 127.0.0.1 -p {port} {args}"), Duration::from_secs(20))
}

#[test]
fn sum_only_prints_the_sums_iperf2s_client_prints() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    for args in [
        "-P 2 -t 1 -i 0.5 --sum-only",
        "-t 1 --sum-only",
        "-u -P 2 -t 1 -i 0.5 --sum-only",
        "-u -t 1 --sum-only",
        // -e: the sums' own columns (TCP: writes and retries; UDP: writes and PPS).
        "-P 2 -t 1 -i 0.5 -e --sum-only",
        "-t 1 -e --sum-only",
        "-u -P 2 -t 1 -e --sum-only",
    ] {
        let (theirs, mine) = both(s.port, args);
        assert_eq!(
            masked(&on_time(&mine, args)),
            masked(&on_time(&theirs, args)),
            "{args}:\n{mine}\n/ iperf:\n{theirs}"
        );
        assert!(
            mine.contains("[SUM-cnt]") && !mine.contains(" connected with "),
            "{mine}"
        );
    }
    // In CSV iperf 2.1.8 prints each stream's line all the same.
    let (theirs, mine) = both(s.port, "-P 2 -t 1 --sum-only -y C");
    assert_eq!(ids(&mine), ids(&theirs), "{mine}\n/ iperf:\n{theirs}");
    // What it cannot be: one line, exit 1.
    let bad = landspeed_only(s.port, "-t 1 -P 2 -R --sum-only");
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr
            .starts_with("iperf: landspeed iperf2 does not support --sum-only with"),
        "{}",
        bad.stderr
    );
}

/// `--txstart-time`: iperf 2.1.8's client and the drop-in, each scheduled 2 s ahead, connect at
/// once, say when their traffic starts, and send from then (with -e's lines, which it turns on):
/// the same lines against landspeed's server and iperf 2.1.8's, and the test 1 s long. Over UDP
/// the drop-in announces the start in a first datagram numbered 0, as iperf 2.1.8's client does,
/// and each server marks the test `(epoch-start)` (the server's report, in the client's lines).
#[test]
fn txstart_time_sends_from_the_time_it_names_as_iperf2s_client_does() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let ours = ServerProc::start("127.0.0.1", &[]);
    let scheduled = |extra: &str| {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 2;
        format!("{extra} --txstart-time {at}")
    };
    // iperf 2.1.8's server fresh for each client (one that served a scheduled -P 2 test can fail
    // the next one's streams). Paced and one stream: iperf 2.1.8's client and the drop-in at once;
    // else one after the other, each scheduled 2 s from its own start.
    for iperf2 in [false, true] {
        for extra in [
            "-t 1 -b 50M",
            "-t 1 -P 2 --trip-times -b 50M",
            "-u -t 1 -i 0.5 -b 2m",
        ] {
            let udp = extra.starts_with("-u");
            let fresh = || match (iperf2, udp) {
                (true, true) => {
                    let s = crate::iperf2_server::Iperf2Server::with(&["-u"]);
                    let p = s.1;
                    (Some(s), p)
                }
                _ => fresh_or(iperf2, ours.port),
            };
            let (a, b) = (fresh(), fresh());
            let args = scheduled(extra);
            let line = format!("-c 127.0.0.1 -p {} {args}", b.1);
            let (reference, mine) = beside(
                common::iperf2_paced(extra),
                || format!("-c 127.0.0.1 -p {} {}", a.1, scheduled(extra)),
                || format!("-c 127.0.0.1 -p {} {}", b.1, scheduled(extra)),
            );
            let reference = String::from_utf8_lossy(&reference.stdout).into_owned();
            assert_eq!(mine.code, 0, "{line}: {}{}", mine.stdout, mine.stderr);
            assert_eq!(
                masked(&on_time(&mine.stdout, &args)),
                masked(&on_time(&reference, &args)),
                "{line}:\n{}\n/ iperf:\n{reference}",
                mine.stdout
            );
            assert!(
                mine.stdout.contains(" (epoch-start)") && mine.stdout.contains("Client traffic to start in "),
                "{}",
                mine.stdout
            );
        }
    }
    // landspeed's server timed each test from its start: about 1 s, not 3 (a margin of 0.5 s).
    for _ in 0..2 {
        let logged = common::line_with(&ours, "iperf2 2.1.8 test");
        let secs: f64 = logged
            .split(" in ")
            .last()
            .and_then(|r| r.split(" s ").next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{logged}"));
        assert!((0.9..1.5).contains(&secs), "{logged}");
    }
    // What it cannot be: one line, exit 1.
    let bad = drop_in(
        &format!("-c 127.0.0.1 -p {} -R {}", ours.port, scheduled("-t 1")),
        Duration::from_secs(20),
    );
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr
            .starts_with("iperf: landspeed iperf2 does not support --txstart-time with"),
        "{}",
        bad.stderr
    );
}

/// `-X` (peer detection): the header asks for the server's header ack, which each stream reads
/// before its data; iperf 2.1.8's client prints nothing of it. The drop-in's lines are iperf 2.1.8's
/// against either server, and landspeed's server logs each test ended ok (an ack left unread would
/// reset the connection at the end).
#[test]
fn x_asks_the_servers_version_as_iperf2s_client_does() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let ours = ServerProc::start("127.0.0.1", &[]);
    let rows = [
        "-t 1 -X -b 50M",
        "-t 1 -X -R -b 50M",
        "-t 1 -X -e -P 2 --trip-times -b 50M",
        "-t 1 -X -P 2 -i 0.5 -b 50M",
    ];
    for iperf2 in [false, true] {
        for args in rows {
            // A fresh iperf 2.1.8 server for each client; paced, both clients at once.
            let (a, b) = (fresh_or(iperf2, ours.port), fresh_or(iperf2, ours.port));
            let line = format!("-c 127.0.0.1 -p {} {args}", b.1);
            let (reference, mine) = beside(
                common::iperf2_paced(args),
                || format!("-c 127.0.0.1 -p {} {args}", a.1),
                || line.clone(),
            );
            let reference = String::from_utf8_lossy(&reference.stdout).into_owned();
            assert_eq!(mine.code, 0, "{line}: {}{}", mine.stdout, mine.stderr);
            assert_eq!(
                masked(&on_time(&mine.stdout, args)),
                masked(&on_time(&reference, args)),
                "{line}:\n{}\n/ iperf:\n{reference}",
                mine.stdout
            );
        }
    }
    // Both clients' tests of each row against landspeed's server ended ok.
    for _ in 0..2 * rows.len() {
        let logged = common::line_with(&ours, "iperf2 2.1.8 test");
        assert!(logged.ends_with(": ok"), "{logged}");
    }
}

/// `--connect-retries N`: a refused connection tried N more times, 200 ms apart. Nothing listens at
/// first: without retries the drop-in fails at once in one line; with two it fails after its three
/// tries (two pauses, 0.4 s at least). Then iperf 2.1.8's client and the drop-in, started together
/// with `--connect-retries 50` (10 s of tries), wait for iperf 2.1.8's server, which comes up once
/// 2.1.8's client has said two refused tries: both run their test and end 0. Margins: no upper
/// bound on time is asserted; the server has most of 10 s of tries to come up in.
#[test]
fn connect_retries_waits_for_a_server_that_comes_up_later_as_iperf2s_client_does() {
    if !have_iperf2() {
        return;
    }
    let port = common::free_port();
    let refused = drop_in(&format!("-c 127.0.0.1 -p {port} -t 0.3"), Duration::from_secs(20));
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("Connection refused"),
        "{}",
        refused.stderr
    );
    let started = std::time::Instant::now();
    let line = format!("-c 127.0.0.1 -p {port} -t 0.3 --connect-retries 2");
    let tried = drop_in(&line, Duration::from_secs(20));
    assert_eq!(tried.code, 1, "{}", tried.stderr);
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    let line = format!("-c 127.0.0.1 -p {port} -t 0.5 --connect-retries 50");
    let mut client = Command::new("iperf")
        .args(line.split_whitespace())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run iperf -c");
    // iperf 2.1.8 says each refused try on stderr: the server comes up once it has said two.
    let (said, refusals) = std::sync::mpsc::channel();
    let stderr = client.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for l in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if l.contains("tcp connect failed") {
                let _ = said.send(());
            }
            all += &l;
            all.push('\n');
        }
        all
    });
    let mine = std::thread::spawn(move || drop_in(&line, Duration::from_secs(30)));
    for k in 1..=2 {
        let heard = refusals.recv_timeout(Duration::from_secs(10));
        assert!(
            heard.is_ok(),
            "iperf 2.1.8's client said no refused try {k} in 10 s"
        );
    }
    let mut server = Command::new("iperf")
        .args(["-s", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run iperf -s");
    let (theirs, _) = common::wait_output_or_kill(client, Duration::from_secs(30));
    let (their_err, mine) = (reader.join().unwrap(), mine.join().unwrap());
    let _ = server.kill();
    let _ = server.wait();
    assert!(their_err.contains("tcp connect failed"), "{their_err}");
    assert_eq!(theirs.status.code(), Some(0), "iperf: {theirs:?}");
    assert_eq!(mine.code, 0, "{}", mine.stderr);
    let total = |text: &str| text.lines().any(|l| l.contains(" sec ") && l.contains("Bytes"));
    assert!(total(&String::from_utf8_lossy(&theirs.stdout)), "{theirs:?}");
    assert!(total(&mine.stdout), "{}", mine.stdout);
}

/// The scheduling policy of each of process `pid`'s threads (`/proc/PID/task/*/stat`'s 41st field:
/// 0 normal, 2 round-robin realtime).
fn thread_policies(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let policy = |stat: String| -> Option<u32> {
        // The command's name, in parentheses, may hold spaces: fields are counted after it.
        let after = &stat[stat.rfind(')')? + 2..];
        after.split(' ').nth(38)?.parse().ok()
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
        .filter_map(policy)
        .collect()
}

/// `-z`: the drop-in's server (every thread it has started once listening) runs under the realtime
/// round-robin policy, as iperf 2.1.8's threads do; without root the kernel's refusal is said in
/// 2.1.8's words and the server serves on.
#[test]
fn z_schedules_the_drop_ins_threads_realtime() {
    let port = common::free_port();
    let mut server = Command::new(common::bin())
        .args(["iperf2", "-s", "-p", &port.to_string(), "-z"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the drop-in's server");
    let up = common::wait_until(Duration::from_secs(10), || common::listening(port));
    let policies = thread_policies(server.id());
    let _ = server.kill();
    let out = server.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(up, "the drop-in's server did not listen: {said}");
    // Either every thread runs realtime, or the kernel refused (no CAP_SYS_NICE: not root, or a
    // container without it) and 2.1.8's words say so while the server serves on.
    let refused = said.contains("Client set scheduler: Operation not permitted");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(root || refused, "not root and no refusal said: {said}");
    match refused {
        false => assert!(
            !policies.is_empty() && policies.iter().all(|p| *p == 2),
            "{policies:?} {said}"
        ),
        true => assert!(policies.iter().all(|p| *p == 0), "{policies:?} {said}"),
    }
}
