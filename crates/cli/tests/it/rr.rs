//! landspeed's own request/response test (`run --rr`, issue #68): every transaction counted and
//! every byte of every request and response checked, whatever the sizes and the depth (a request
//! larger than the socket buffers with several in flight must not deadlock), a flipped byte either
//! way caught, the server's limits holding over both directions, and what it cannot run refused.
//! The assertions are exact counts, not rates: the tests share the machine.

use crate::common::{self, ServerProc};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// `run --rr --json ARGS` against `port`: the exit code, the result and stderr.
fn rr(port: u16, args: &str, env: &[(&str, &str)]) -> (i32, Value, String) {
    let mut cmd = Command::new(common::bin());
    cmd.args([
        "run",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "--rr",
        "--json",
        "--no-save",
    ]);
    cmd.args(args.split_whitespace());
    cmd.envs(env.iter().copied());
    let o = common::outcome(cmd, Duration::from_secs(60));
    let v = serde_json::from_str(&o.stdout).unwrap_or(Value::Null);
    (o.code, v, o.stderr)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn every_transaction_is_counted_and_every_byte_both_ways_checked() {
    let s = ServerProc::start("127.0.0.1", &[]);
    // (arguments, request bytes, response bytes): netperf's 1-byte default; several connections
    // with many in flight and responses larger than requests; requests larger than the socket
    // buffers, three in flight at once.
    for (args, req, resp) in [
        ("-t 1", 1, 1),
        (
            "-t 1 -P 2 --in-flight 8 --request 100 --response 20K",
            100,
            20 * 1024,
        ),
        ("-t 1 --in-flight 3 --request 3M --response 1", 3 << 20, 1),
        // Over TLS: the records sealed as they are generated, checked where they are opened.
        (
            "-t 1 --tls --in-flight 4 --request 5000 --response 300",
            5000,
            300,
        ),
        ("-t 1 --tls", 1, 1),
    ] {
        let (code, r, err) = rr(s.port, args, &[]);
        if args.contains("3M") {
            // Over the 1 MiB bound: refused before anything is sent, as a usage error.
            assert_eq!(code, 2, "{args}");
            assert!(
                err.contains("request must be 1 B..=1 MiB, got 3145728 B"),
                "{err}"
            );
            continue;
        }
        assert_eq!(code, 0, "{args}: {err}");
        let t = &r["transactions"];
        let n = u(&t["transactions"]);
        assert!(n > 10, "{args}: {t}");
        assert_eq!(t["shape"]["kind"], "landspeed request/response");
        assert_eq!(
            (u(&t["shape"]["request_bytes"]), u(&t["shape"]["response_bytes"])),
            (req, resp)
        );
        // Every request answered before the end: the server checked n requests, the client n
        // responses, and nothing else moved.
        assert_eq!(u(&r["payload"]["bytes_verified"]), n * (req + resp), "{args}");
        assert_eq!(u(&r["payload"]["corrupt_blocks"]), 0);
        let sent: u64 = r["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| u(&s["bytes_sent"]))
            .sum();
        assert_eq!(sent, n * req, "{args}");
        let l = &t["latency"];
        let ms = |k: &str| l[k].as_f64().unwrap();
        assert!(
            ms("min_ms") <= ms("p50_ms") && ms("p50_ms") <= ms("p99_ms") && ms("p99_ms") <= ms("max_ms"),
            "{l}"
        );
        // The bulk diagnosis does not apply: no direction names a limit.
        for d in r["directions"].as_array().unwrap() {
            assert!(d.get("limits").is_none(), "{args}: {d}");
        }
        let binned: u64 = t["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| u(&b["count"]))
            .sum();
        assert_eq!(binned, n);
        let line = common::line_with(&s, "landspeed test");
        assert!(
            line.contains(&format!("received {} B", n * req)),
            "{args}: {n}: {line}"
        );
    }
    // The live lines are the transactions, each interval as it closes.
    let p = s.port.to_string();
    let o = common::landspeed(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &p,
            "--rr",
            "-t",
            "1",
            "-i",
            "0.25",
            "--json-stream",
            "--no-save",
        ],
        Duration::from_secs(30),
    );
    let events: Vec<Value> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let live = events.iter().filter(|e| e["event"] == "transactions").count();
    assert_eq!(live, 4, "{}", o.stdout);
    assert!(
        !events.iter().any(|e| e["event"] == "interval"),
        "no byte intervals: {}",
        o.stdout
    );
    let big = "-t 1 --in-flight 3 --request 1M --response 1";
    let (code, r, err) = rr(s.port, big, &[]);
    assert_eq!(code, 0, "{big}: {err}");
    let n = u(&r["transactions"]["transactions"]);
    assert!(n >= 3, "{r}");
    assert_eq!(u(&r["payload"]["bytes_verified"]), n * ((1 << 20) + 1));
}

#[test]
fn a_flipped_request_or_response_byte_fails_the_run() {
    // A request byte flipped at the server (stream 0, byte 5).
    let r = common::flipped_run("0:5", &["--rr", "-t", "1"]);
    assert!(u(&r["payload"]["corrupt_blocks"]) >= 1, "{}", r["payload"]);
    // A response byte flipped at the client: the responses are patterned as stream 2^31 + id.
    let s = ServerProc::start("127.0.0.1", &[]);
    let (code, r, err) = rr(s.port, "-t 1", &[("LANDSPEED_FAULT_FLIP", "2147483648:7")]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(u(&r["payload"]["corrupt_blocks"]), 1, "{}", r["payload"]);
    assert_eq!(
        u(&r["payload"]["first_corruption"]["offset"]),
        7,
        "{}",
        r["payload"]
    );
    // The same over TLS, the byte flipped where its record was opened.
    let flip = [("LANDSPEED_FAULT_FLIP", "2147483648:9")];
    let (code, r, err) = rr(s.port, "-t 1 --tls --in-flight 2", &flip);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        u(&r["payload"]["first_corruption"]["offset"]),
        9,
        "{}",
        r["payload"]
    );
    assert!(r["data_path"]["tls"]["suite"].is_string(), "{}", r["data_path"]);
}

#[test]
fn the_servers_limits_count_the_responses_too() {
    // 1-byte requests asking for 100 KiB each: the responses are what --max-bytes must see.
    let s = ServerProc::start("127.0.0.1", &["--max-bytes", "2M"]);
    let (code, _, err) = rr(s.port, "-t 3 --response 100K", &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cut by the server at its limit of 2097152 bytes"),
        "{err}"
    );
    // --max-rate holds over both ways: 8 Mbit/s for 2 s is 2 MB and the burst allowance (256 KiB),
    // at most 23 responses of 100 KiB whatever the machine.
    let s = ServerProc::start("127.0.0.1", &["--max-rate", "8M"]);
    let (code, r, err) = rr(s.port, "-t 2 --response 100K", &[]);
    assert_eq!(code, 0, "{err}");
    let n = u(&r["transactions"]["transactions"]);
    assert!(
        (1..=23).contains(&n),
        "{n} responses of 100 KiB in 2 s under 8 Mbit/s"
    );
}

#[test]
fn what_a_request_response_test_cannot_be_is_refused_in_one_line() {
    let s = ServerProc::start("127.0.0.1", &[]);
    for (args, says) in [
        ("-t 1 --in-flight 0", "keeps 1..=1024 requests in flight, got 0"),
        ("-t 1 --response 0", "response must be 1 B..=1 MiB, got 0 B"),
        (
            "-t 1 -u --request 10",
            "a UDP request is 32 (the echo header) to 65507 bytes, not 10",
        ),
        (
            "-t 1 -u --request 100 --response 50",
            "the request's size or the 32-byte header alone, not 50",
        ),
        ("-t 1 -R", "cannot be used with"),
        ("-n 1M", "cannot be used with"),
        ("-t 1 --iperf3", "cannot be used with"),
    ] {
        let (code, _, err) = rr(s.port, args, &[]);
        assert_ne!(code, 0, "{args}");
        assert!(err.contains(says), "{args}: {err}");
    }
    let o = common::landspeed(&["run", "127.0.0.1", "--request", "10"], Duration::from_secs(10));
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--rr"), "{}", o.stderr);
    // A sweep's cells are rates: a request/response test is not one.
    let o = common::landspeed(
        &[
            "sweep",
            "127.0.0.1",
            "--windows",
            "64K",
            "--time",
            "1",
            "--",
            "--rr",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("(--rr, --bounceback"), "{}", o.stderr);
}

/// `run --rr -u` (netperf's UDP_RR) against a landspeed server's echo service: every answer timed
/// and checked, several in flight, the short answer, nothing lost on loopback, and a port where no
/// landspeed server answers named as such.
#[test]
fn udp_requests_go_to_the_echo_service_and_every_answer_is_timed_and_checked() {
    let s = ServerProc::start("127.0.0.1", &[]);
    for (args, req, resp) in [
        ("-u -t 1", 32, 32),
        ("-u -t 1 --request 1200 --in-flight 4", 1200, 1200),
        ("-u -t 1 --request 1000 --response 32", 1000, 32),
        ("-u -t 1 -P 3 --in-flight 2", 32, 32),
    ] {
        let (code, r, err) = rr(s.port, args, &[]);
        assert_eq!(code, 0, "{args}: {err}");
        let t = &r["transactions"];
        assert_eq!(
            t["shape"]["kind"], "landspeed UDP echo request/response (UDP_RR)",
            "{args}"
        );
        assert_eq!(
            (u(&t["shape"]["request_bytes"]), u(&t["shape"]["response_bytes"])),
            (req, resp)
        );
        // Loopback loses nothing at a few thousand datagrams a second (a 208 KiB socket buffer
        // would have to wait unread for tens of ms to drop one).
        assert!(u(&t["transactions"]) > 100, "{args}: {t}");
        assert_eq!(u(&t["lost"]), 0, "{args}: {t}");
        assert_eq!(r["payload"]["verified"], true, "{args}: {}", r["payload"]);
        assert_eq!(r["config"]["transport"], "udp");
        assert!(t["latency"]["p99_ms"].as_f64().unwrap() > 0.0, "{t}");
        // -P: a socket each, each one's figures beside the whole's, which add up.
        let each = t["connections"].as_array().map_or(0, |c| c.len());
        assert_eq!(each, if args.contains("-P 3") { 3 } else { 0 }, "{args}: {t}");
        if each > 0 {
            let sum: u64 = (t["connections"].as_array().unwrap().iter())
                .map(|c| u(&c["transactions"]))
                .sum();
            assert_eq!(sum, u(&t["transactions"]), "{t}");
            assert!(t["connections"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| u(&c["lost"]) == 0));
        }
    }
    // A UDP port where nothing answers echoes: said so, exit 1, before any test.
    let quiet = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = quiet.local_addr().unwrap().port();
    let (code, _, err) = rr(port, "-u -t 1", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no echo answered its UDP port within 3s"), "{err}");
}

/// `run --connect-rate --json ARGS` against `port`: the exit code, the result and stderr.
fn crr(port: u16, args: &[&str]) -> (i32, Value, String) {
    let mut cmd = Command::new(common::bin());
    let p = port.to_string();
    cmd.args([
        "run",
        "127.0.0.1",
        "-p",
        &p,
        "--connect-rate",
        "--json",
        "--no-save",
    ]);
    cmd.args(args);
    let o = common::outcome(cmd, Duration::from_secs(60));
    let v = serde_json::from_str(&o.stdout).unwrap_or(Value::Null);
    (o.code, v, o.stderr)
}

#[test]
fn a_connection_each_in_landspeeds_protocol_times_tcp_and_tls_handshakes_apart() {
    // --connect-rate with --tls or a key: each transaction a data connection of the test of its
    // own (its preamble proven by the key), its handshakes timed, its bytes checked.
    let (keys, alice) = crate::auth::key_files("crr");
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let key = format!("alice:{}", alice.display());
    for (args, tls, streams) in [
        (&["-t", "1", "--tls", "--auth", &key][..], true, 1),
        (
            &["-t", "1", "--auth", &key, "-P", "2", "-l", "3000"][..],
            false,
            2,
        ),
    ] {
        let (code, r, err) = crr(s.port, args);
        assert_eq!(code, 0, "{args:?}: {err}{r}");
        assert_eq!(r["protocol"], "landspeed", "{}", r["protocol"]);
        let t = &r["transactions"];
        let n = u(&t["transactions"]);
        assert!(n >= 20, "{args:?}: {t}");
        assert!(
            t["shape"]["kind"].as_str().unwrap().contains("a connection each"),
            "{t}"
        );
        // Each timed transaction had a connection of its own, and over TLS a handshake of its own;
        // the streams' first connections (made before the clock) are not among them.
        assert_eq!(u(&t["connect"]["connections"]), n, "{t}");
        match tls {
            true => assert_eq!(u(&t["tls"]["connections"]), n, "{t}"),
            false => assert!(t.get("tls").is_none(), "{t}"),
        }
        // A transaction is its handshakes and more.
        let p50 = |v: &Value| v["p50_ms"].as_f64().unwrap();
        assert!(p50(&t["connect"]["latency"]) < p50(&t["latency"]), "{t}");
        if tls {
            assert!(p50(&t["tls"]["latency"]) < p50(&t["latency"]), "{t}");
        }
        assert_eq!(r["payload"]["verified"], true, "{}", r["payload"]);
        assert_eq!(
            r["streams"].as_array().unwrap().len(),
            streams,
            "{}",
            r["streams"]
        );
        assert_eq!(
            r["authentication"]["data_streams_proven"], true,
            "{}",
            r["authentication"]
        );
    }
    assert!(common::line_with(&s, "test from").contains("key alice"));
}
