//! `landspeed iperf3`, the drop-in for the iperf3 program, proven by difference against the iperf3 on
//! this machine (Debian's, installed by .ci/run): the same arguments to both clients against the same
//! servers (`iperf3 -s` and `landspeed serve`); the `-J` documents have the same tree (every key path
//! and the JSON type of each value; landspeed may add only its `landspeed` key and the keys iperf3
//! added after the installed version), the text has the same lines once numbers are masked, and the
//! exit codes agree, also for a refused option and a server that is not there.

use crate::common;

use common::{bin, Iperf3Server, ServerProc};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

/// Keys iperf3 3.21 writes that older versions do not (checked against 3.12): landspeed writes 3.21's
/// document, so these may be present in it alone.
const NEWER_KEYS: &[&str] = &[
    "/start/fq_rate",
    "/start/test_start/bidir",
    "/start/test_start/fqrate",
    "/start/test_start/gro",
    "/start/test_start/gso",
    "/start/test_start/interval",
    "/start/timestamp/timemillisecs",
    "/end/streams[]/sender/reorder",
    "/intervals[]/streams[]/reorder",
    "/end/sender_tcp_congestion",
    "/end/receiver_tcp_congestion",
];

fn tree(v: &Value, path: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, x)| tree(x, &format!("{path}/{k}"), out)),
        Value::Array(a) if a.is_empty() => {
            out.insert(format!("{path}[] (empty)"));
        }
        Value::Array(a) => a.iter().for_each(|x| tree(x, &format!("{path}[]"), out)),
        Value::Number(_) => {
            out.insert(format!("{path} number"));
        }
        Value::String(_) => {
            out.insert(format!("{path} string"));
        }
        Value::Bool(_) => {
            out.insert(format!("{path} bool"));
        }
        Value::Null => {
            out.insert(format!("{path} null"));
        }
    }
}

fn keys(doc: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    tree(doc, "", &mut out);
    out
}

/// (exit code, stdout) of `program ARGS`.
fn output(program: &str, args: &[&str]) -> (i32, String) {
    let o = common::output_within(
        Command::new(program).args(args),
        std::time::Duration::from_secs(60),
    );
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// Debian's iperf3 is on PATH (None: skipped outside CI, a failure in CI).
fn debians_iperf3() -> Option<()> {
    match Command::new("iperf3").arg("-v").output() {
        Ok(_) => Some(()),
        Err(_) => common::missing("iperf3 is missing"),
    }
}

fn dropin(args: &[&str]) -> (i32, String) {
    let mut all = vec!["iperf3"];
    all.extend_from_slice(args);
    output(bin(), &all)
}

/// Numbers, units' magnitudes and runs of spaces masked: what is left is iperf3's layout.
fn masked(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut l = String::new();
        for c in line.chars() {
            let c = if c.is_ascii_digit() || c == '.' { 'N' } else { c };
            let repeat = (c == 'N' || c == ' ') && l.ends_with(c);
            if !repeat {
                l.push(c);
            }
        }
        for unit in ["KBytes", "MBytes", "GBytes", "Kbits", "Mbits", "Gbits"] {
            l = l.replace(unit, &unit[1..]);
        }
        // iperf3 before 3.16 heads a reverse test's intervals "Retr  Cwnd" with no such columns
        // under it; 3.21 (and landspeed) do not. The forward header is masked alike on both sides.
        l = l.replace("Bitrate Retr Cwnd", "Bitrate");
        out.push(l.trim_end().to_string());
    }
    out
}

#[test]
fn the_json_tree_and_the_text_are_iperf3s_against_both_servers() {
    let _one = common::one_iperf3_test();
    let Some(i3) = Iperf3Server::start() else { return };
    let ls = ServerProc::start("127.0.0.1", &[]);
    let cases: [&[&str]; 4] = [
        &["-P", "2", "-f", "m"],
        &["-R", "-f", "M"],
        &["-u", "-b", "10M", "-R"],
        // Sums per direction: [SUM][TX-C] and [SUM][RX-C].
        &["--bidir", "-P", "2"],
    ];
    for port in [i3.port.to_string(), ls.port.to_string()] {
        for extra in cases {
            let mut args = vec!["-c", "127.0.0.1", "-p", &port, "-t", "1"];
            args.extend_from_slice(extra);
            let json: Vec<&str> = args.iter().copied().chain(["-J"]).collect();
            let (code_i, theirs) = output("iperf3", &json);
            let (code_l, ours) = dropin(&json);
            assert_eq!((code_l, code_i), (0, 0), "{args:?}: {ours}");
            let theirs: Value = serde_json::from_str(&theirs).unwrap();
            let ours_doc: Value = serde_json::from_str(&ours).unwrap();
            assert_eq!(ours_doc["landspeed"]["protocol"], "iperf3", "{args:?}");
            // Against landspeed every byte is checked (landspeed's payload key, in iperf3's protocol);
            // against iperf3 nothing is, and the document says so.
            let landspeed_peer = port == ls.port.to_string();
            assert_eq!(
                ours_doc["landspeed"]["payload_verified"], landspeed_peer,
                "{args:?}"
            );
            let verified = ours_doc["landspeed"]["bytes_verified"].as_u64().unwrap();
            assert_eq!(
                verified > 0,
                landspeed_peer,
                "{args:?}: {}",
                ours_doc["landspeed"]
            );
            // Each stream's own connection: its own local port, as iperf3 lists them.
            let ports: BTreeSet<u64> = ours_doc["start"]["connected"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["local_port"].as_u64().unwrap())
                .collect();
            let streams = ours_doc["start"]["connected"].as_array().unwrap().len();
            assert_eq!(
                ports.len(),
                streams,
                "{args:?}: {}",
                ours_doc["start"]["connected"]
            );
            let differ = tree_difference(&theirs, &ours_doc);
            assert!(differ.is_empty(), "{args:?}: landspeed iperf3 {differ:#?}");
            let (_, theirs) = output("iperf3", &args);
            let (_, ours) = dropin(&args);
            assert_eq!(masked(&ours), masked(&theirs), "{args:?}\n{ours}\n{theirs}");
        }
    }
    // -V: the same lines but the program's name and the random cookie.
    let port = ls.port.to_string();
    let args = ["-c", "127.0.0.1", "-p", &port, "-t", "1", "-V"];
    let verbose = |text: &str| -> Vec<String> {
        masked(text)
            .into_iter()
            .skip(1)
            .filter(|l| !l.contains("Cookie:"))
            .collect()
    };
    let ((_, theirs), (_, ours)) = (output("iperf3", &args), dropin(&args));
    assert_eq!(verbose(&ours), verbose(&theirs), "-V\n{ours}\n{theirs}");
}

/// Whether something listens on TCP `port` here, read from /proc/net/tcp and tcp6 (connecting would
/// cost a one-off server its one test).
fn listening(port: &str) -> bool {
    let hex = format!(":{:04X} ", port.parse::<u16>().unwrap());
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", &cols[1][cols[1].len() - 5..]) == hex && cols[3] == "0A"
            })
        })
    })
}

/// `iperf3 -c` against a one-test server on `port` once it listens; then the server's document.
fn one_off_document(server: std::process::Child, port: &str, extra: &[&str]) -> Value {
    let text = one_off_text(server, port, extra);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{extra:?}: {e}: {text}"))
}

#[test]
fn the_server_json_is_iperf3s_as_perfsonars_iperf3_tool_runs_it() {
    // pScheduler's iperf3 tool runs `iperf3 -s -1 --idle-timeout N --json -p PORT` and parses the
    // server's document; for a reverse test the merged result is that document.
    let _one = common::one_iperf3_test();
    let Some(()) = debians_iperf3() else { return };
    let labels: &[&str] = &["-T", "pS", "--extra-data", "x"];
    let cases: [&[&str]; 4] = [&[], &["-R"], &["-u", "-b", "10M"], labels];
    for extra in cases {
        let (p1, p2) = (common::free_port().to_string(), common::free_port().to_string());
        let json = ["--idle-timeout", "30", "--json"];
        let theirs = one_off_document(one_off_server("iperf3", &p1, &json), &p1, extra);
        let ours = one_off_document(one_off_server(bin(), &p2, &json), &p2, extra);
        let differ = tree_difference(&theirs, &ours);
        assert!(differ.is_empty(), "{extra:?}: landspeed iperf3 -s {differ:#?}");
        if extra == labels {
            // The client's labels at the top, as iperf3's server writes them.
            assert_eq!(
                (&ours["title"], &ours["extra_data"]),
                (&theirs["title"], &theirs["extra_data"])
            );
            assert_eq!(ours["title"], "pS");
        }
    }
}

#[test]
fn a_server_bitrate_limit_refuses_and_ends_tests_as_iperf3s_does() {
    // Debian's iperf3 client against `landspeed iperf3 -s -1 -J --server-bitrate-limit`: a test
    // asking for more than the limit in all is refused, one moving more on average (over one 1 s
    // interval here; loopback moves far more than 100 Mbit/s) is ended after it, each with iperf3
    // 3.21's words in both ends' documents and the client's exit code. Debian's 3.12 server is no
    // reference here: it closes the control connection without SERVER_ERROR (its client then says
    // "control socket has closed unexpectedly", and exits 0 for the TCP case), which 3.21 fixed; with
    // IPERF3 naming a 3.21+ build, its server is held to the same words beside the drop-in's.
    let _one = common::one_iperf3_test();
    let Some(()) = debians_iperf3() else { return };
    let total = "total required bandwidth is larger than server limit";
    let mut servers = vec![bin().to_string()];
    servers.extend(std::env::var("IPERF3").ok());
    for (limit, client) in [
        ("100M", &["-u", "-b", "60M", "-P", "2", "-t", "1"][..]),
        ("100M/1", &["-t", "4"][..]),
    ] {
        for program in servers.iter().map(String::as_str) {
            let port = common::free_port().to_string();
            let server = one_off_server(program, &port, &["-J", "--server-bitrate-limit", limit]);
            assert!(common::wait_until(Duration::from_secs(10), || listening(&port)));
            // Text, not -J: Debian's 3.12 client exits 0 after a SERVER_ERROR when it writes JSON.
            let mut args = vec!["-c", "127.0.0.1", "-p", &port];
            args.extend_from_slice(client);
            let o = common::output_within(
                Command::new("iperf3").args(&args),
                std::time::Duration::from_secs(60),
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{program} {limit}: {err}");
            assert!(
                err.contains(&format!("iperf3: error - {total}")),
                "{program} {limit}: {err}"
            );
            let out = common::wait_output(server, Duration::from_secs(20)).expect("the server ends");
            let served: Value = serde_json::from_slice(&out.stdout).unwrap();
            let said = format!("error - {total}");
            assert_eq!(
                served["error"].as_str(),
                Some(said.as_str()),
                "{program} {limit}: {served}"
            );
        }
    }
    // The drop-in's client says what iperf3's client says of a server's refusal (3.21's server, or
    // the drop-in's, which refuses as 3.21's does; Debian's 3.12 says nothing before it closes).
    let port = common::free_port().to_string();
    let reference = servers.last().map_or(bin(), String::as_str);
    let server = one_off_server(reference, &port, &["--server-bitrate-limit", "100M"]);
    assert!(common::wait_until(Duration::from_secs(10), || listening(&port)));
    let args = [
        "iperf3",
        "-c",
        "127.0.0.1",
        "-p",
        &port,
        "-u",
        "-b",
        "60M",
        "-P",
        "2",
        "-t",
        "1",
    ];
    let o = common::output_within(Command::new(bin()).args(args), std::time::Duration::from_secs(60));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "iperf3: SERVER ERROR - {total}\niperf3: error - {total}\n"
        )),
        "{err}"
    );
    let _ = common::wait_output(server, Duration::from_secs(20));
}

/// `PROGRAM -s -1 -p PORT EXTRA` (the drop-in when PROGRAM is landspeed), stdout piped.
fn one_off_server(program: &str, port: &str, extra: &[&str]) -> std::process::Child {
    let mut args: Vec<&str> = if program == bin() { vec!["iperf3"] } else { vec![] };
    args.extend(["-s", "-1", "-p", port]);
    args.extend_from_slice(extra);
    Command::new(program)
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn a server")
}

#[test]
fn refusals_and_errors_exit_as_iperf3_does() {
    let port = common::free_port().to_string();
    for args in [
        &["-c", "127.0.0.1", "-p", port.as_str(), "-t", "1"][..],
        &["-t", "1"][..],
        &["-c", "127.0.0.1", "--no-such-option"][..],
    ] {
        let i3 = Command::new("iperf3").args(args).output();
        let Ok(i3) = i3 else {
            assert!(std::env::var_os("CI").is_none(), "iperf3 is missing in CI");
            return;
        };
        let mut all = vec!["iperf3"];
        all.extend_from_slice(args);
        let ours = common::output_within(Command::new(bin()).args(&all), std::time::Duration::from_secs(60));
        assert_eq!(ours.status.code(), i3.status.code(), "{args:?}");
        let err = String::from_utf8_lossy(&ours.stderr);
        assert!(err.starts_with("iperf3: "), "{args:?}: {err}");
    }
    // Bad values and options in the wrong role: iperf3's words and exit code.
    for (opt, words) in [
        (&["-S", "256"][..], "bad TOS value"),
        (&["--dscp", "af44"][..], "bad DSCP value"),
        (&["-D"][..], "some option you are trying to set is server only"),
        (
            &["--logfile", "/nonexistent/dir/log"][..],
            "unable to open log file",
        ),
        (
            &["--rcv-timeout", "50", "-R"][..],
            "receive timeout value is incorrect",
        ),
        (&["--rcv-timeout", "500"][..], "valid only in receiving mode"),
        (&["-A", "x"][..], "unable to set CPU affinity"),
        (&["--snd-timeout", "-5"][..], "send timeout value is incorrect"),
        (&["--cntl-ka=10/5/3"][..], "Keepalive period should be larger"),
        (
            &["--server-bitrate-limit", "1M"][..],
            "some option you are trying to set is server only",
        ),
        (
            &["--server-bitrate-limit", "1M/100"][..],
            "invalid time interval for calculating average data rate",
        ),
    ] {
        let mut args = vec!["-c", "127.0.0.1", "-p", port.as_str(), "-t", "1"];
        args.extend_from_slice(opt);
        let theirs = common::output_within(
            Command::new("iperf3").args(&args),
            std::time::Duration::from_secs(60),
        );
        let mut all = vec!["iperf3"];
        all.extend_from_slice(&args);
        let o = common::output_within(Command::new(bin()).args(&all), std::time::Duration::from_secs(60));
        assert_eq!(o.status.code(), theirs.status.code(), "{opt:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("iperf3: ") && err.contains(words),
            "{opt:?}: {err}"
        );
    }
    // A server that closes the conversation at once (as `iperf3 -s` does to a client that comes
    // while it reopens its listener between tests): the same words and exit code as Debian's client.
    let closer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cport = closer.local_addr().unwrap().port().to_string();
    let closing = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut c, _) = closer.accept().unwrap();
            let _ = std::io::Read::read(&mut c, &mut [0u8; 37]);
        }
    });
    let args = ["-c", "127.0.0.1", "-p", cport.as_str(), "-t", "1"];
    let theirs = common::output_within(
        Command::new("iperf3").args(args),
        std::time::Duration::from_secs(60),
    );
    let ours = common::output_within(
        Command::new(bin()).arg("iperf3").args(args),
        std::time::Duration::from_secs(60),
    );
    closing.join().unwrap();
    let words = "iperf3: error - control socket has closed unexpectedly";
    for o in [&theirs, &ours] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.code() == Some(1) && err.contains(words), "{err}");
    }
    // An option iperf3 has and landspeed cannot honour is refused by name, never ignored.
    for (opt, name) in [
        (&["--repeating-payload"][..], "--gsro/--repeating-payload"),
        (&["--gsro"][..], "--gsro"),
        (&["--pacing-timer", "1000"][..], "--pacing-timer"),
        (&["--rsa-private-key-path", "k"][..], "--rsa-private-key-path"),
    ] {
        let mut args = vec!["iperf3", "-c", "127.0.0.1"];
        args.extend_from_slice(opt);
        let o = common::output_within(
            Command::new(bin()).args(&args),
            std::time::Duration::from_secs(60),
        );
        assert_eq!(o.status.code(), Some(1), "{opt:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("does not support {name}")),
            "{opt:?}: {err}"
        );
    }
}

#[test]
fn timestamps_take_iperf3s_strftime_formats() {
    let _one = common::one_iperf3_test();
    let Some(real) = Iperf3Server::start() else { return };
    let p = real.port.to_string();
    let (code, text) = dropin(&["-c", "127.0.0.1", "-p", &p, "-t", "1", "--timestamps=%F %T -- "]);
    assert_eq!(code, 0, "{text}");
    // Every line, the empty one before "iperf Done." too, begins with the formatted time.
    let shape = |l: &str| {
        let b = l.as_bytes();
        b.len() >= 23
            && b[4] == b'-'
            && b[10] == b' '
            && b[13] == b':'
            && l[19..].starts_with(" -- ")
            && l[..4].chars().all(|c| c.is_ascii_digit())
    };
    assert!(text.lines().count() > 5 && text.lines().all(shape), "{text}");
}

/// A daemon a test started, found by its pid file; killed when dropped if still there.
struct Daemon(Option<i32>);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            common::signal_pid(pid, 9);
        }
    }
}

#[test]
fn the_server_detaches_logs_to_a_file_and_keeps_a_pid_file() {
    let dir = std::env::temp_dir().join(format!("landspeed-dropin-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pid_path, log) = (dir.join("s.pid"), dir.join("s.log"));
    let port = common::free_port().to_string();
    let (pid_s, log_s) = (pid_path.display().to_string(), log.display().to_string());
    let started = ["-s", "-D", "-p", &port, "-I", &pid_s, "--logfile", &log_s];
    // The command returns at once (the daemon's parent exits 0) and prints nothing.
    let (code, out) = dropin(&started);
    assert_eq!((code, out.as_str()), (0, ""));
    let read_pid = || {
        std::fs::read_to_string(&pid_path)
            .ok()?
            .trim()
            .parse::<i32>()
            .ok()
    };
    let up = common::wait_until(Duration::from_secs(10), || {
        read_pid().is_some() && listening(&port)
    });
    let mut daemon = Daemon(read_pid());
    assert!(
        up,
        "no pid file or no listener: {:?}",
        std::fs::read_to_string(&log)
    );
    let (code, _) = dropin(&["-c", "127.0.0.1", "-p", &port, "-t", "1"]);
    assert_eq!(code, 0);
    let logged = |words: &str| std::fs::read_to_string(&log).is_ok_and(|t| t.contains(words));
    assert!(
        common::wait_until(Duration::from_secs(5), || logged("Accepted connection from")),
        "the log: {:?}",
        std::fs::read_to_string(&log)
    );
    assert!(logged(&format!("Server listening on {port}")));
    // SIGTERM ends it; the pid file goes with it.
    let pid = daemon.0.unwrap();
    assert!(common::signal_pid(pid, 15));
    // Gone, or a zombie waiting for a parent that does not reap (PID 1 in some containers).
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|t| {
            t.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    let gone = common::wait_until(Duration::from_secs(5), || !pid_path.exists() && !running());
    assert!(gone, "the daemon or its pid file is still there");
    daemon.0 = None;
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn started_as_iperf3_it_is_the_drop_in() {
    let dir = std::env::temp_dir().join(format!("landspeed-iperf3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("iperf3");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let (code, out) = output(link.to_str().unwrap(), &["-v"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 0);
    assert!(out.starts_with("iperf 3.21 (landspeed "), "{out}");
}

/// `landspeed iperf3 -c` against a landspeed server whose receive path flips one byte (or whose own
/// receive path does, `client_env`): the JSON document and the exit code.
fn flipped(server_env: &[(&str, &str)], client_env: &[(&str, &str)], extra: &[&str]) -> (i32, Value) {
    let s = ServerProc::start_env("127.0.0.1", &[], server_env);
    let port = s.port.to_string();
    let mut args = vec!["iperf3", "-c", "127.0.0.1", "-p", &port, "-n", "20M", "-J"];
    args.extend_from_slice(extra);
    let o = common::output_within(
        Command::new(bin()).args(&args).envs(client_env.iter().copied()),
        std::time::Duration::from_secs(60),
    );
    let doc = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{extra:?}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code().unwrap_or(-1), doc)
}

#[test]
fn against_landspeed_every_byte_is_checked_and_a_flipped_one_fails_the_run() {
    let fault = [("LANDSPEED_FAULT_FLIP", "0:1234567")];
    for (server_env, client_env, extra) in
        [(&fault[..], &[][..], &[][..]), (&[][..], &fault[..], &["-R"][..])]
    {
        let (code, doc) = flipped(server_env, client_env, extra);
        let l = &doc["landspeed"];
        assert_eq!(code, 1, "{extra:?}: a corrupted run fails: {l}");
        assert_eq!(l["peer_software"], "landspeed server (iperf3 protocol)", "{l}");
        assert_eq!(l["payload_verified"], true, "{l}");
        assert_eq!(l["trusted"], false, "{l}");
        assert!(l["corrupt_blocks"].as_u64().unwrap() >= 1, "{extra:?}: {l}");
        // The document is still iperf3's: its summary is there.
        assert!(doc["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0, "{doc}");
    }
    // The same without the fault: 20 MB each way, every byte checked.
    for extra in [&[][..], &["-R"][..], &["-P", "2"][..]] {
        let (code, doc) = flipped(&[], &[], extra);
        let l = &doc["landspeed"];
        assert_eq!(code, 0, "{extra:?}: {l}");
        assert_eq!(l["trusted"], true, "{l}");
        assert_eq!(
            l["bytes_verified"].as_u64(),
            doc["end"]["sum_received"]["bytes"].as_u64(),
            "{extra:?}: {l}"
        );
    }
}

/// The key tree of every event `name` of a `--json-stream` output.
fn event_keys(events: &[Value], name: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in events.iter().filter(|e| e["event"] == name) {
        tree(&e["data"], "", &mut out);
    }
    out
}

#[test]
fn json_stream_writes_the_documents_parts_as_events_as_it_goes() {
    // iperf3 3.17+ has --json-stream (Debian's 3.12 does not; checked by hand against 3.21, see
    // docs/iperf3.md): a line per event, "event" first; here each event's data has the tree of the
    // matching part of the -J document, which is held to iperf3's own above.
    let _one = common::one_iperf3_test();
    let Some(i3) = Iperf3Server::start() else { return };
    let ls = ServerProc::start("127.0.0.1", &[]);
    for port in [i3.port.to_string(), ls.port.to_string()] {
        for extra in [&[][..], &["--bidir"][..], &["-u", "-b", "10M"][..]] {
            let mut args = vec!["-c", "127.0.0.1", "-p", &port, "-t", "1", "-i", "0.5"];
            args.extend_from_slice(extra);
            let doc: Value = serde_json::from_str(&dropin(&[&args[..], &["-J"]].concat()).1).unwrap();
            let (code, text) = dropin(&[&args[..], &["--json-stream"]].concat());
            assert_eq!(code, 0, "{args:?}: {text}");
            assert!(text.lines().all(|l| l.starts_with("{\"event\":")), "{text}");
            let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            let names: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
            let n = names.len();
            assert!(n >= 5, "{args:?}: {names:?}");
            assert_eq!(
                (names[0], names[n - 2], names[n - 1]),
                ("start", "landspeed", "end"),
                "{names:?}"
            );
            assert!(names[1..n - 2].iter().all(|e| *e == "interval"), "{names:?}");
            for (event, part) in [("start", "start"), ("interval", "intervals"), ("end", "end")] {
                let mut want = BTreeSet::new();
                match &doc[part] {
                    Value::Array(a) => a.iter().for_each(|x| tree(x, "", &mut want)),
                    v => tree(v, "", &mut want),
                }
                assert_eq!(event_keys(&events, event), want, "{args:?}: {event}");
            }
            assert_eq!(events[n - 2]["data"]["protocol"], "iperf3");
        }
    }
    // A server that is not there: iperf3's error event, then an empty end; exit 1.
    let gone = common::free_port().to_string();
    let (code, text) = dropin(&["-c", "127.0.0.1", "-p", &gone, "-t", "1", "--json-stream"]);
    assert_eq!(code, 1);
    let names: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["error", "end"], "{text}");
}

/// A one-off server's whole output after `iperf3 -c` ran one test against it.
fn one_off_text(server: std::process::Child, port: &str, extra: &[&str]) -> String {
    let mut args = vec!["-c", "127.0.0.1", "-p", port, "-t", "1"];
    args.extend_from_slice(extra);
    assert!(
        common::wait_until(std::time::Duration::from_secs(10), || listening(port)),
        "the server on {port} never listened"
    );
    let o = common::output_within(
        Command::new("iperf3").args(&args),
        std::time::Duration::from_secs(60),
    );
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = common::wait_output(server, std::time::Duration::from_secs(20))
        .expect("the one-off server ends after its test");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_server_text_is_iperf3s() {
    // `iperf3 -s -1` beside `landspeed iperf3 -s -1`, each serving Debian's iperf3 client: the same
    // lines once masked. How many interval lines a server prints depends on when the last bytes came
    // (a short tail interval, or none), so each distinct masked line is compared in the order it
    // first appears.
    let _one = common::one_iperf3_test();
    let Some(()) = debians_iperf3() else { return };
    let cases: [&[&str]; 3] = [&["-R", "-P", "2"], &["-u", "-b", "10M"], &["--bidir", "-P", "2"]];
    for extra in cases {
        let (p1, p2) = (common::free_port().to_string(), common::free_port().to_string());
        let theirs = one_off_text(one_off_server("iperf3", &p1, &[]), &p1, extra);
        let ours = one_off_text(one_off_server(bin(), &p2, &[]), &p2, extra);
        assert_eq!(
            distinct_masked(&ours),
            distinct_masked(&theirs),
            "{extra:?}\n{ours}\n{theirs}"
        );
    }
}

/// `client` (iperf3 or the drop-in) with `args` against a one-test `iperf3 -s` (with `server`'s
/// options) of its own: exit code and output.
fn against_one_off_iperf3(client: &str, args: &[&str], server: &[&str]) -> (i32, String) {
    let port = common::free_port().to_string();
    let srv = one_off_server("iperf3", &port, server);
    assert!(common::wait_until(std::time::Duration::from_secs(10), || {
        listening(&port)
    }));
    let mut all = vec!["-c", "127.0.0.1", "-p", &port, "-t", "1"];
    all.extend_from_slice(args);
    let out = if client == "iperf3" {
        output("iperf3", &all)
    } else {
        dropin(&all)
    };
    let _ = common::wait_exit(srv, std::time::Duration::from_secs(20));
    out
}

#[test]
fn get_server_output_brings_the_servers_text_or_document_as_iperf3s_client_does() {
    let _one = common::one_iperf3_test();
    let Some(()) = debians_iperf3() else { return };
    for server in [&[][..], &["-J"][..]] {
        let json = ["--get-server-output", "-J"];
        let (ci, theirs) = against_one_off_iperf3("iperf3", &json, server);
        let (cl, ours) = against_one_off_iperf3("landspeed", &json, server);
        assert_eq!((cl, ci), (0, 0), "{server:?}: {ours}");
        let (theirs, ours): (Value, Value) = (
            serde_json::from_str(&theirs).unwrap(),
            serde_json::from_str(&ours).unwrap(),
        );
        let key = if server.is_empty() {
            "server_output_text"
        } else {
            "server_output_json"
        };
        assert!(ours.get(key).is_some(), "{server:?}: no {key}");
        let differ = tree_difference(&theirs, &ours);
        assert!(differ.is_empty(), "{server:?}: {differ:#?}");
        let text = ["--get-server-output"];
        let (_, theirs) = against_one_off_iperf3("iperf3", &text, server);
        let (_, ours) = against_one_off_iperf3("landspeed", &text, server);
        // A server's document comes pretty-printed by serde (two spaces, keys in order) where
        // iperf3's cJSON uses tabs and the server's order: the lines before it are compared, and the
        // document by its tree (docs/iperf3.md).
        let (head_o, doc_o) = split_server_json(&ours);
        let (head_t, doc_t) = split_server_json(&theirs);
        assert_eq!(
            distinct_masked(head_o),
            distinct_masked(head_t),
            "{server:?}\n{ours}\n{theirs}"
        );
        match (doc_o, doc_t) {
            (Some(o), Some(t)) => assert!(tree_difference(&t, &o).is_empty(), "{server:?}: {ours}"),
            (o, t) => assert_eq!((o.is_some(), t.is_some()), (false, false), "{ours}\n{theirs}"),
        }
    }
}

/// The text before "Server JSON output:" and the document after it (to "iperf Done."), if any.
fn split_server_json(text: &str) -> (&str, Option<Value>) {
    match text.split_once("Server JSON output:\n") {
        None => (text, None),
        Some((head, rest)) => {
            let doc = rest.split("\niperf Done.").next().unwrap_or(rest);
            (
                head,
                Some(serde_json::from_str(doc.trim()).expect("the server's document")),
            )
        }
    }
}

#[test]
fn the_server_text_comes_as_the_test_runs() {
    // A 4 s test: the server's first interval line is on its stdout while the client still runs
    // (at about 1 s; margin 3 s), and its summary only after.
    let _one = common::one_iperf3_test();
    let Some(()) = debians_iperf3() else { return };
    let port = common::free_port().to_string();
    let mut server = one_off_server(bin(), &port, &[]);
    let lines = std::io::BufReader::new(server.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in lines.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    assert!(common::wait_until(std::time::Duration::from_secs(10), || {
        listening(&port)
    }));
    let mut client = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port, "-t", "4"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("iperf3 -c");
    let mut seen = vec![];
    while !seen.iter().any(|l: &String| l.contains("0.00-1.00")) {
        let l = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the server's first interval, live");
        seen.push(l);
    }
    assert!(
        client.try_wait().unwrap().is_none(),
        "the client still runs: {seen:?}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("receiver")),
        "no summary yet: {seen:?}"
    );
    assert!(client.wait().unwrap().success());
    let summary = std::iter::from_fn(|| rx.recv_timeout(std::time::Duration::from_secs(10)).ok())
        .any(|l| l.contains("receiver"));
    assert!(summary, "the summary at the end");
    let _ = common::wait_exit(server, std::time::Duration::from_secs(10));
}

/// The key paths of `reference` missing from `ours`, and those `ours` adds but for its `landspeed` key
/// and the keys iperf3 3.21 writes that older versions do not.
pub(crate) fn tree_difference(reference: &Value, ours: &Value) -> Vec<String> {
    let theirs = keys(reference);
    let ours: BTreeSet<String> = keys(ours)
        .into_iter()
        .filter(|k| !k.starts_with("/landspeed"))
        .collect();
    let missing = theirs.difference(&ours).map(|k| format!("lacks {k}"));
    let added = ours
        .difference(&theirs)
        .filter(|k| !NEWER_KEYS.iter().any(|n| k.starts_with(&format!("{n} "))))
        .map(|k| format!("adds {k}"));
    missing.chain(added).collect()
}

/// The masked lines of a text, each distinct line once, in the order it first appears (how many
/// interval lines a run prints depends on its timing).
pub(crate) fn distinct_masked(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    masked(text)
        .into_iter()
        .filter(|l| seen.insert(l.clone()))
        .collect()
}
