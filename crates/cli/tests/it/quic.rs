//! QUIC (`run --quic`): streams over one connection or several, each way, with each congestion
//! controller, every byte verified and QUIC's own figures reported; the server answers on its own
//! port number beside the UDP listener (UDP tests and echo probes still work there, and garbage
//! datagrams do not stop it) or on --quic-port; a server without QUIC, a wrong pin and bad
//! combinations are one-line errors; record and the archive name the transport.

use crate::common;

use common::{bin, landspeed, run_json, run_text, ServerProc};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn check_streams(r: &serde_json::Value, what: &str) {
    common::check_invariants(r);
    for st in r["streams"].as_array().unwrap() {
        assert!(st["bytes_received"].as_u64().unwrap() > 0, "{what}: {st}");
        assert_eq!(st["bytes_verified"], st["bytes_received"], "{what}: {st}");
        assert_eq!(st["errors"].as_array().unwrap().len(), 0, "{what}: {st}");
        let q = &st["quic"];
        assert!(q["sent_packets"].as_u64().unwrap() > 0, "{what}: {q}");
        assert!(q["rtt_us"].as_u64().unwrap() > 0, "{what}: {q}");
        assert!(q["path_mtu_bytes"].as_u64().unwrap() >= 1200, "{what}: {q}");
    }
}

#[test]
fn streams_and_connections_verify_every_byte_each_way_with_each_controller() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let cases: [&[&str]; 5] = [
        &["-P", "2"],
        &["-P", "3", "--connections", "2"],
        &["-R", "-C", "bbr"],
        &["--bidir", "-C", "newreno"],
        &["--connections", "2", "-R"],
    ];
    for extra in cases {
        let mut args = vec!["--quic", "-n", "16M", "--no-save"];
        args.extend_from_slice(extra);
        let r = run_json("127.0.0.1", s.port, &args);
        check_streams(&r, &format!("{extra:?}"));
        let connections: std::collections::BTreeSet<u64> = r["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|st| st["quic"]["connection"].as_u64().unwrap())
            .collect();
        let want = if extra.contains(&"--connections") { 2 } else { 1 };
        assert_eq!(connections.len(), want, "{extra:?}");
        let congestion = extra
            .iter()
            .skip_while(|a| **a != "-C")
            .nth(1)
            .unwrap_or(&"cubic");
        assert_eq!(r["streams"][0]["quic"]["congestion"], *congestion, "{extra:?}");
    }
    let o = run_text(s.port, &["--quic", "-n", "4M", "--no-save"], T);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("\nQUIC test, "), "{}", o.stdout);
    assert!(o.stdout.contains("  connection  0: cubic, RTT "), "{}", o.stdout);
    // --no-verify picks TCP's copy-free receive only for TCP: QUIC runs, unverified.
    let r = run_json(
        "127.0.0.1",
        s.port,
        &["--quic", "--no-verify", "-n", "4M", "--no-save"],
    );
    assert_eq!(r["summary"]["bytes_received"], 4u64 << 20, "{}", r["summary"]);
    assert_eq!(r["summary"]["bytes_verified"], 0, "{}", r["summary"]);
}

#[test]
fn the_shared_port_still_serves_udp_tests_and_echo_and_survives_garbage() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", s.port);
    // Short datagrams, long-header-looking ones, short-header-looking ones, landspeed-looking ones.
    let mut garbage: Vec<Vec<u8>> = vec![vec![], vec![0xc0], vec![0x40; 3], b"LSPDxx".to_vec()];
    for i in 0..200u32 {
        garbage.push(
            (0..(i % 1400 + 1))
                .map(|j| (i * 31 + j * 7) as u8 | 0x40)
                .collect(),
        );
    }
    for g in &garbage {
        sock.send_to(g, to).unwrap();
    }
    let r = run_json("127.0.0.1", s.port, &["--quic", "-n", "8M", "--no-save"]);
    check_streams(&r, "after garbage");
    let u = run_json(
        "127.0.0.1",
        s.port,
        &["-u", "-b", "50M", "-t", "0.5", "--no-save"],
    );
    let udp = &u["summary"]["udp"];
    assert!(udp["datagrams_received"].as_u64().unwrap() > 0, "{udp}");
    assert_eq!(udp["datagrams_lost"], 0, "{udp}");
    let p = landspeed(&["path", "127.0.0.1", "-p", &s.port.to_string(), "--json"], T);
    assert_eq!(p.code, 0, "{}", p.stderr);
    let path: serde_json::Value = serde_json::from_str(&p.stdout).unwrap();
    assert_eq!(
        path["rtt"]["summary"]["received"], path["rtt"]["summary"]["sent"],
        "{path}"
    );
}

#[test]
fn a_separate_quic_port_is_announced_to_the_client() {
    let quic_port = common::free_port();
    let s = ServerProc::start("127.0.0.1", &["--quic-port", &quic_port.to_string()]);
    assert_ne!(s.port, quic_port);
    let r = run_json("127.0.0.1", s.port, &["--quic", "-n", "4M", "--no-save"]);
    check_streams(&r, "--quic-port");
    // Without a key or a pin, the result says the server was not authenticated.
    let a = &r["authentication"];
    assert_eq!(
        (a["server"].as_str(), a["data_encrypted"].as_bool()),
        (Some("none"), Some(true))
    );
    assert!(
        a["note"].as_str().unwrap().contains("passive observers only"),
        "{a}"
    );
}

#[test]
fn what_cannot_run_is_one_line() {
    let s = ServerProc::start("127.0.0.1", &["--no-quic"]);
    let o = run_text(s.port, &["--quic", "-t", "1", "--no-save"], T);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("does not serve QUIC"), "{}", o.stderr);
    let s = ServerProc::start("127.0.0.1", &[]);
    let pin = "cd".repeat(32);
    let o = run_text(s.port, &["--quic", "--tls-pin", &pin, "-t", "1", "--no-save"], T);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("not the pinned {pin}")),
        "{}",
        o.stderr
    );
    for (bad, says) in [
        (&["--quic", "-u"][..], "cannot be used with"),
        (&["--quic", "--tls"][..], "cannot be used with"),
        (&["--connections", "2"][..], "--quic"),
        (&["--quic", "-C", "reno"][..], "cubic, bbr or newreno"),
        (&["--quic", "-M", "1400"][..], "not QUIC"),
    ] {
        let mut args = bad.to_vec();
        args.extend(["-t", "1", "--no-save"]);
        let o = run_text(s.port, &args, T);
        assert_eq!(o.code, 2, "{bad:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{bad:?}: {}", o.stderr);
    }
}

#[test]
fn a_byte_flipped_on_arrival_is_caught_at_its_offset() {
    let r = common::flipped_run("1:2000003", &["--quic", "-P", "2", "-n", "8M"]);
    assert_eq!(r["payload"]["first_corruption"]["stream"], 1);
    assert_eq!(r["payload"]["first_corruption"]["offset"], 2_000_003);
}

#[test]
fn the_archive_and_record_name_quic() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let (_archive, std_tcp) = common::archived_transport(s.port, &["--quic"], "quic");
    assert_eq!(std_tcp["passed"], false, "{std_tcp}");
    assert!(
        std_tcp["evidence"].as_str().unwrap().contains("QUIC over UDP"),
        "{std_tcp}"
    );
}

#[test]
fn a_client_that_vanishes_does_not_stop_the_endpoint() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    for dir in ["-R", "--bidir"] {
        let mut c = std::process::Command::new(bin())
            .args([
                "run",
                "127.0.0.1",
                "-p",
                &p,
                "--quic",
                "-t",
                "8",
                "--no-save",
                dir,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Killed once data moves: its first interval line.
        let out = common::wait_for_line(c.stdout.take().unwrap(), " sec ");
        let _ = c.kill();
        let _ = c.wait();
        drop(out);
    }
    // The server's senders are still writing to sockets whose peer is gone (ICMP port unreachable)
    // while this test runs.
    let r = run_json("127.0.0.1", s.port, &["--quic", "-n", "4M", "--no-save"]);
    check_streams(&r, "after a vanished client");
}
