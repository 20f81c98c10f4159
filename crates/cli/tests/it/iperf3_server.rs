//! Unmodified iperf3 clients (Debian's iperf3, installed by .ci/run) against `landspeed serve`: every
//! option the issue lists, checked on iperf3's own JSON against the server's log line for the same test;
//! several iperf3 clients at once; and hostile parameter messages answered with iperf3's SERVER_ERROR
//! while the server goes on serving.

use crate::common;

use common::{run_json, ServerProc};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// True when iperf3 can be run; in CI its absence is a failure.
fn have_iperf3() -> bool {
    let ok = Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "iperf3 is missing in CI (.ci/run installs it)"
        );
        eprintln!("skipping: iperf3 is not installed (apt-get install iperf3)");
    }
    ok
}

fn iperf3_client(port: u16, args: &[&str]) -> Value {
    let p = port.to_string();
    let mut cmd = Command::new("iperf3");
    cmd.args(["-c", "127.0.0.1", "-p", &p, "-J"])
        .args(args)
        .stdout(Stdio::piped());
    let child = cmd.spawn().expect("run iperf3");
    let out = common::wait_output(child, Duration::from_secs(40)).expect("iperf3 hung");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "iperf3 {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(v.get("error").is_none(), "iperf3 {args:?} failed: {}", v["error"]);
    assert!(out.status.success(), "iperf3 {args:?} exited {:?}", out.status);
    v
}

/// The server's log line for the test just run: (received, sent, client-reported) bytes.
fn server_line(s: &ServerProc) -> (u64, u64, u64, String) {
    let line = s
        .next_line(Duration::from_secs(10))
        .expect("no log line for the test");
    assert!(line.contains("iperf3 3."), "not marked as iperf3: {line}");
    assert!(line.ends_with(": ok"), "{line}");
    let num_after = |key: &str| -> u64 {
        let i = line.find(key).unwrap_or_else(|| panic!("no {key:?} in {line}")) + key.len();
        line[i..].split(' ').next().unwrap().parse().unwrap()
    };
    (
        num_after("received "),
        num_after(" sent "),
        num_after("client reported "),
        line,
    )
}

fn b(v: &Value) -> u64 {
    v["bytes"]
        .as_u64()
        .unwrap_or_else(|| v["bytes"].as_f64().unwrap() as u64)
}

#[test]
fn iperf3_client_options_match_the_server_log() {
    let _one = common::one_iperf3_test();
    if !have_iperf3() {
        return;
    }
    let db = crate::archive::db("iperf3-served");
    let mut s = ServerProc::start("127.0.0.1", &["--archive", "--db", &db]);
    let cases: &[&[&str]] = &[
        &["-t", "1"],
        &["-t", "1", "-P", "3"],
        &["-t", "1", "-R"],
        &["-t", "1", "-R", "-P", "2"],
        &["-t", "1", "--bidir"],
        &["-t", "1", "--bidir", "-P", "2"],
        &["-n", "50M"],
        &["-n", "50M", "-R"],
        &["-k", "200"],
        &["-t", "1", "-l", "64K"],
        &["-t", "1", "-w", "1M"],
        &["-t", "1", "-M", "1400"],
        &["-t", "1", "-N"],
        &["-t", "1", "-C", "cubic"],
        &["-t", "2", "-O", "1"],
        &["-t", "1", "--get-server-output"],
    ];
    let mut counts = vec![];
    for args in cases {
        let j = iperf3_client(s.port, args);
        let (recv, sent, reported, line) = server_line(&s);
        counts.push((recv, sent));
        let end = &j["end"];
        let reverse = args.contains(&"-R");
        let bidir = args.contains(&"--bidir");
        // iperf3's "receiver" figures for the client->server direction are the server's own count.
        if !reverse {
            assert_eq!(b(&end["sum_received"]), recv, "{args:?}: {line}");
            // The client's own total, as it reported it in the results exchange.
            if !bidir {
                assert_eq!(b(&end["sum_sent"]), reported, "{args:?}: {line}");
            }
        }
        if reverse {
            assert_eq!(b(&end["sum_sent"]), sent, "{args:?}: {line}");
            assert_eq!(b(&end["sum_received"]), reported, "{args:?}: {line}");
        }
        if bidir {
            assert_eq!(b(&end["sum_sent_bidir_reverse"]), sent, "{args:?}: {line}");
        }
        let n = end["streams"].as_array().map_or(0, |a| a.len());
        let parallel: usize = args
            .iter()
            .position(|a| *a == "-P")
            .map_or(1, |i| args[i + 1].parse().unwrap());
        assert_eq!(n, parallel * if bidir { 2 } else { 1 }, "{args:?}");
        if args.contains(&"-n") {
            assert_eq!(
                if reverse { sent } else { recv },
                50 << 20,
                "{args:?}: exactly -n"
            );
        }
        if args.contains(&"-k") {
            assert_eq!(
                recv,
                200 * 128 * 1024,
                "{args:?}: -k blocks of the default 128 KiB"
            );
        }
        if args.contains(&"--get-server-output") {
            let text = j["server_output_text"].as_str().unwrap_or("");
            assert!(text.contains("landspeed"), "no server output: {j}");
        }
        if args.contains(&"-C") {
            assert_eq!(end["sender_tcp_congestion"], "cubic");
        }
    }
    // `serve --archive` kept every test as the server saw it, with the server's own counts.
    crate::archive::stop(&mut s);
    for (i, (args, (recv, sent))) in cases.iter().zip(counts).enumerate() {
        let a = crate::archive::archived(&db, i as u32 + 1);
        assert_eq!(a["protocol"], "iperf3", "{args:?}");
        if args.contains(&"--bidir") {
            continue;
        }
        let reverse = args.contains(&"-R");
        let here = a["summary"][if reverse { "bytes_sent" } else { "bytes_received" }]
            .as_u64()
            .unwrap();
        assert_eq!(here, if reverse { sent } else { recv }, "{args:?}: {a}");
    }
}

#[test]
fn three_iperf3_clients_at_once_are_all_served() {
    let _one = common::one_iperf3_test();
    if !have_iperf3() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let children: Vec<_> = (0..3)
        .map(|i| {
            let dir = if i == 1 { "-R" } else { "-N" };
            Command::new("iperf3")
                .args(["-c", "127.0.0.1", "-p", &p, "-t", "2", "-J", dir])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = common::wait_output(c, Duration::from_secs(30)).expect("iperf3 hung");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v.get("error").is_none(),
            "a concurrent client was refused: {}",
            v["error"]
        );
        assert!(b(&v["end"]["sum_received"]) > 0);
    }
    for _ in 0..3 {
        server_line(&s);
    }
}

/// Speaks iperf3's control protocol by hand up to the parameters, returning what the server answers.
fn send_params(port: u16, body: &[u8], declared_len: Option<u32>) -> Vec<u8> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"abcdefghijklmnopqrstuvwxyz2345672345\0").unwrap();
    let mut st = [0u8; 1];
    c.read_exact(&mut st).unwrap();
    assert_eq!(st[0], 9, "PARAM_EXCHANGE expected");
    let len = declared_len.unwrap_or(body.len() as u32);
    c.write_all(&len.to_be_bytes()).unwrap();
    let _ = c.write_all(body);
    let mut reply = vec![];
    let _ = c.read_to_end(&mut reply);
    reply
}

#[test]
fn bad_iperf3_parameters_get_server_error_and_the_server_carries_on() {
    let _one = common::one_iperf3_test();
    let s = ServerProc::start("127.0.0.1", &[]);
    let err = |code: i32| {
        let mut m = vec![0xfe];
        m.extend_from_slice(&code.to_be_bytes());
        m.extend_from_slice(&0i32.to_be_bytes());
        m
    };
    assert_eq!(
        send_params(s.port, br#"{"tcp":true,"parallel":1000}"#, None),
        err(6)
    );
    assert_eq!(
        send_params(s.port, br#"{"tcp":true,"time":"ten"}"#, None),
        err(114)
    );
    assert_eq!(
        send_params(s.port, br#"{"tcp":true,"len":99999999}"#, None),
        err(7)
    );
    assert_eq!(
        send_params(s.port, br#"{"reverse":1,"bidirectional":1}"#, None),
        err(25)
    );
    assert_eq!(send_params(s.port, b"not json", None), err(114));
    // A length beyond the 8 KiB cap is refused before anything is read or allocated.
    assert_eq!(send_params(s.port, b"{}", Some(50_000_000)), err(114));
    // A malformed cookie: ACCESS_DENIED.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"abcdefghijklmnopqrstuvwxyz234567abcdX").unwrap();
    let mut reply = vec![];
    let _ = c.read_to_end(&mut reply);
    assert_eq!(reply, vec![0xff]);
    // A client that goes away in the middle of the exchange.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"abcdefghijklmnopqrstuvwxyz2345672345\0").unwrap();
    drop(c);
    // Each attempt left a log line, and the server still serves a full test.
    for _ in 0..8 {
        let line = s
            .next_line(Duration::from_secs(15))
            .expect("a log line per attempt");
        assert!(line.contains("FAILED") || line.contains("refused"), "{line}");
    }
    let r = run_json("127.0.0.1", s.port, &["-t", "1"]);
    assert_eq!(r["summary"]["bytes_sent"], r["summary"]["bytes_received"]);
}

#[test]
fn iperf3_udp_clients_are_served() {
    let _one = common::one_iperf3_test();
    if !have_iperf3() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    let cases: &[&[&str]] = &[
        // iperf3 3.12's default UDP datagram is 32 KiB; MTU-sized ones give meaningful packet counts.
        // 20 Mbit/s: a receiver starved by a test beside it for a hundred milliseconds still has
        // room in its socket buffer.
        &["-u", "-b", "20M", "-t", "1", "-l", "1400"],
        &["-u", "-b", "20M", "-t", "1", "-l", "1400", "-R"],
        &["-u", "-b", "20M", "-t", "1", "-l", "1400", "-P", "2"],
        &["-u", "-b", "20M", "-t", "1", "-l", "1400", "--bidir"],
        &["-u", "-b", "20M", "-t", "1", "-l", "1000"],
    ];
    for args in cases {
        let j = iperf3_client(s.port, args);
        let (recv, sent, _, line) = server_line(&s);
        let sum = &j["end"]["sum"];
        let packets = sum["packets"].as_u64().unwrap();
        let lost = sum["lost_packets"].as_u64().unwrap();
        assert!(packets > 1000, "{args:?}: {sum}");
        assert!(
            lost * 20 <= packets,
            "{args:?}: {lost} of {packets} lost on loopback"
        );
        // The byte counts on iperf3's side and in the server's log agree to within the datagrams in
        // flight when the test ended.
        let theirs = b(sum) as f64;
        let ours = if args.contains(&"-R") { sent } else { recv } as f64;
        assert!(
            (ours / theirs - 1.0).abs() < 0.02,
            "{args:?}: iperf3 {theirs}, server {line}"
        );
        let l: u64 = args[args.iter().position(|a| *a == "-l").unwrap() + 1]
            .parse()
            .unwrap();
        assert_eq!(b(sum) % l, 0, "{args:?}: datagrams of -l bytes");
    }
}
