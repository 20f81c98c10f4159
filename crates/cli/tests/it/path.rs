//! `landspeed path` and `run --latency`: on loopback the probes' bookkeeping (counts, JSON, refused TCP
//! connects, --allow), and on the WAN emulator (root) the figures: the RTT of an emulated 40 ms path, and
//! the queueing delay a transfer adds with a deep queue and with a shallow one.

use crate::common;

use common::chain::Chain;
use common::wan::{root, serial, Wan};
use common::{landspeed, run_json, ServerProc};
use serde_json::Value;
use std::time::Duration;

/// `landspeed path 127.0.0.1 -p PORT ARGS`.
fn path_on(port: &str, args: &[&str]) -> common::Outcome {
    let mut all = vec!["path", "127.0.0.1", "-p", port];
    all.extend_from_slice(args);
    landspeed(&all, Duration::from_secs(60))
}

fn json(o: &common::Outcome) -> Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", o.stdout, o.stderr))
}

#[test]
fn udp_echo_and_tcp_connect_on_loopback() {
    // One at a time with the emulator tests, whose timing this file's other tests would disturb.
    let _serial = serial();
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let o = path_on(&p, &["-c", "5", "-i", "20ms", "--rtt", "--tcp", "--json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r = json(&o);
    assert_eq!(r["schema"], "landspeed/path/1");
    for k in ["rtt", "tcp_connect"] {
        let sum = &r[k]["summary"];
        assert_eq!(
            (sum["sent"].as_u64(), sum["received"].as_u64()),
            (Some(5), Some(5)),
            "{k}: {r}"
        );
        assert!(sum["min_ms"].as_f64().unwrap() < 5.0, "{k}: loopback RTT {sum}");
        assert_eq!(r[k]["samples_ms"].as_array().unwrap().len(), 5);
    }
    // Text: ping-like lines and the summary.
    let o = path_on(&p, &["-c", "3", "-i", "10ms", "--rtt"]);
    assert_eq!(o.code, 0);
    assert_eq!(o.stdout.matches("seq=").count(), 3, "{}", o.stdout);
    assert!(o.stdout.contains("3 sent, 3 received, 0.0% loss"), "{}", o.stdout);
}

#[test]
fn without_a_choice_path_measures_everything() {
    // One at a time with the emulator tests, whose timing this file's other tests would disturb.
    let _serial = serial();
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let o = path_on(&p, &["-c", "3", "-i", "10ms", "-n", "--json"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let r = json(&o);
    assert_eq!(r["rtt"]["summary"]["received"], 3);
    assert_eq!(r["tcp_connect"]["summary"]["received"], 3);
    assert_eq!(r["trace"]["reached"], true);
    assert_eq!(r["trace"]["hops"][0]["address"], "127.0.0.1");
    // Loopback's MTU is 65536; no IPv4 packet is longer than 65535 bytes.
    assert_eq!(r["pmtu"]["path_mtu"], 65535, "{}", r["pmtu"]);
    assert!(
        r["capacity"]["estimate_bps"].as_f64().unwrap() > 0.0,
        "{}",
        r["capacity"]
    );
    assert_eq!(r["capacity"]["trains_sent"], 20);
}

#[test]
fn no_echo_service_is_loss_not_a_hang_and_refused_tcp_still_times() {
    // One at a time with the emulator tests, whose timing this file's other tests would disturb.
    let _serial = serial();
    // A port nobody serves: UDP probes are lost (exit 1 with the hint), TCP connects are refused, and a
    // refusal is a round trip.
    let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port().to_string();
    drop(free);
    let o = landspeed(
        &[
            "path",
            "127.0.0.1",
            "-p",
            &port,
            "-c",
            "2",
            "-i",
            "10ms",
            "-W",
            "200ms",
            "--rtt",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout.contains("100.0% loss") && o.stdout.contains("--tcp"),
        "{}",
        o.stdout
    );
    let o = landspeed(
        &[
            "path",
            "127.0.0.1",
            "--tcp",
            &port,
            "-c",
            "2",
            "-i",
            "10ms",
            "--json",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(json(&o)["tcp_connect"]["summary"]["received"], 2);
    // A server that does not take this address does not echo either.
    let s = ServerProc::start("127.0.0.1", &["--allow", "192.0.2.0/24"]);
    let p = s.port.to_string();
    let o = path_on(&p, &["-c", "2", "-i", "10ms", "-W", "200ms", "--rtt"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
}

#[test]
fn run_latency_reports_idle_loaded_and_per_interval_rtt() {
    let _serial = serial();
    let s = ServerProc::start("127.0.0.1", &[]);
    let r = run_json(
        "127.0.0.1",
        s.port,
        &["-t", "2", "--latency", "--latency-rate", "50"],
    );
    let l = &r["latency"];
    assert!(l["idle"]["received"].as_u64().unwrap() >= 10, "{l}");
    assert!(l["loaded"]["sent"].as_u64().unwrap() >= 50, "{l}");
    assert!(l["loaded"]["received"].as_u64().unwrap() > 0, "{l}");
    assert!(l["buffer_delay_pct"].is_number(), "{l}");
    let with_rtt = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|iv| iv["probe_rtt"]["probes"].as_u64().unwrap_or(0) > 0)
        .count();
    assert!(with_rtt >= 1, "no interval carries probe RTT: {}", r["intervals"]);
    let p = s.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-t", "1", "--latency"],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("Latency (UDP echo") && o.stdout.contains("buffer delay"),
        "{}",
        o.stdout
    );
    let bad = landspeed(
        &["run", "127.0.0.1", "-p", &p, "--latency", "--iperf3"],
        Duration::from_secs(10),
    );
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

#[test]
fn emulated_40ms_rtt_is_measured_within_half_a_millisecond() {
    // Alone: half a millisecond is the forwarder's punctuality, which a busy neighbour takes away.
    let _alone = crate::common::alone();
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "40ms", "--rate", "1G"]);
    w.serve_in_b();
    let o = w.in_a(
        &[
            "path",
            "198.18.0.2",
            "-c",
            "20",
            "-i",
            "50ms",
            "--rtt",
            "--tcp",
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r = json(&o);
    for k in ["rtt", "tcp_connect"] {
        let min = r[k]["summary"]["min_ms"].as_f64().unwrap();
        assert!(
            (39.5..=40.5).contains(&min),
            "{k}: min {min} ms for an emulated 40 ms"
        );
        assert_eq!(r[k]["summary"]["received"], 20, "{k}");
    }
}

/// The median RTT the transfer added, from `run --latency` through the emulator, with the emulator's
/// status at the end (for the failure message).
///
/// The load is UDP offered at 150% of a 50 Mbit/s bottleneck, so the emulator's queue stays full for the
/// whole transfer and the added delay is queue / rate: the test checks the measurement, not TCP's
/// sawtooth (four CUBIC flows with tail drop back off together and leave the queue half empty for
/// seconds at a time, which made a TCP-loaded version of this test flaky on a busy 2-core VM). The rate
/// is low and the overload high so that a CPU-starved sender still keeps the queue full and the
/// userspace forwarder never falls behind its input (at 100 Mbit/s and 120%, CI once measured +28 ms
/// for a 20 ms queue, the forwarder's own backlog on top of the emulated one). The queues are given in
/// bytes: a BDP multiple is never below the emulator's 64 KiB floor, which would be 10 ms here.
fn added_delay(queue_bytes: u64) -> (f64, Value, Value) {
    let mut w = Wan::up(&[
        "--rtt",
        "20ms",
        "--rate",
        "50M",
        "--queue",
        &queue_bytes.to_string(),
    ]);
    w.serve_in_b();
    let r = w.run_ok(&["-t", "3", "-u", "-b", "75M", "--latency"]);
    let l = r["latency"].clone();
    let added = l["added_delay_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("no added delay: {l}"));
    eprintln!("queue {queue_bytes} B: added {added:.2} ms; {l}");
    (added, l, w.status())
}

#[test]
fn loaded_rtt_rises_by_the_queue_and_not_without_one() {
    let Some(_lock) = root() else { return };
    // 1 BDP of queue at 50 Mbit/s and 20 ms: 125 kB, which takes 20 ms to drain; a sender above the
    // bottleneck keeps it full, so every probe that gets in waits about that long. Measured on the
    // 2-core VM: +19.3 ms idle, +18.1 to +18.6 ms with two or three busy loops competing for the CPUs.
    // One try more when the first is out of range: in one CI run (2026-11-28) the queue was kept
    // only half full (+11.6 ms) while the machine's other tests competed for both CPUs.
    let (mut deep, mut l, mut st) = added_delay(125_000);
    if !(16.0..=26.0).contains(&deep) {
        (deep, l, st) = added_delay(125_000);
    }
    assert!(
        (16.0..=26.0).contains(&deep),
        "a 20 ms queue added {deep} ms: {l}\nemulator: {st}"
    );
    // A 0.1 BDP queue drains in 2 ms (measured: +1.4 ms, and +0.5 / -0.1 ms under competing load, when
    // the sender cannot always keep so small a queue full).
    let (shallow, l, st) = added_delay(12_500);
    assert!(
        shallow < 6.0,
        "a 2 ms queue added {shallow} ms: {l}\nemulator: {st}"
    );
    assert!(deep > shallow + 10.0, "deep {deep} ms, shallow {shallow} ms");
}

#[test]
fn traceroute_shows_each_router_of_a_chain_in_order() {
    let Some(_lock) = root() else { return };
    let mut c = Chain::up([1500, 1500, 1500]);
    c.serve(3);
    let o = c.landspeed(
        0,
        &["path", "198.18.103.2", "--trace", "-n", "--json"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let r = json(&o);
    let t = &r["trace"];
    assert_eq!(t["reached"], true, "{t}");
    let hops: Vec<&str> = t["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["address"].as_str().unwrap_or("*"))
        .collect();
    assert_eq!(hops, ["198.18.101.2", "198.18.102.2", "198.18.103.2"], "{t}");
    for h in t["hops"].as_array().unwrap() {
        assert_eq!(h["probes"].as_array().unwrap().len(), 3);
        assert!(h["probes"][0]["rtt_ms"].as_f64().unwrap() < 100.0);
    }
    // Text, with names looked up (none exist here; the addresses stand).
    let o = c.landspeed(0, &["path", "198.18.103.2", "--trace"], Duration::from_secs(60));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .collect();
    assert_eq!(lines.len(), 3, "{}", o.stdout);
    assert!(lines[1].contains("198.18.102.2"), "{}", o.stdout);
}

#[test]
fn path_mtu_finds_a_1400_byte_link_inside_a_9000_byte_path() {
    let Some(_lock) = root() else { return };
    let mut c = Chain::up([9000, 1400, 9000]);
    c.serve(3);
    let o = c.landspeed(
        0,
        &["path", "198.18.103.2", "--pmtu", "--json"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let p = &json(&o)["pmtu"];
    assert_eq!(p["local_mtu"], 9000, "{p}");
    assert_eq!(p["path_mtu"], 1400, "{p}");
    assert_eq!(
        p["bottleneck"], "198.18.101.2",
        "the first router refuses bigger packets: {p}"
    );
    assert_eq!(p["bottleneck_mtu"], 1400, "{p}");
    // Without a landspeed server the target's port unreachable confirms the probes just as well.
    let o = c.landspeed(
        0,
        &["path", "198.18.103.2", "-p", "40000", "--pmtu", "--json"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert_eq!(json(&o)["pmtu"]["path_mtu"], 1400);
}

#[test]
fn capacity_of_an_emulated_500_mbit_bottleneck_within_20_percent_below_and_15_above() {
    // Alone: a packet train's dispersion is timing at the microsecond; beside a busy test (CI, the
    // first full run with slots) the trains after the first few came in at 0.5-0.8 Gbit/s. Alone, the
    // misses seen are all below (a late forwarder spreads a train), so the margin below is wider: a full
    // run on a slower 2-CPU VM (2026-11-26, the ceiling probe at 20 Gbit/s against 32-38 on others)
    // estimated 0.848 Gbit/s of an emulated 1 Gbit/s, its trains 0.78-0.94, and a clean clone's CI run
    // 0.797, its first two trains 1.01 and 1.03 and the later ones 0.65-0.90: the userspace forwarder,
    // not the probe, fell behind a 12 µs gap between packets. At 500 Mbit/s the gap is 24 µs.
    let _alone = crate::common::alone();
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "10ms", "--rate", "500M"]);
    w.serve_in_b();
    let o = w.in_a(
        &["path", "198.18.0.2", "--capacity", "--json"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let c = &json(&o)["capacity"];
    let e = c["estimate_bps"].as_f64().unwrap();
    assert!(
        (0.40e9..=0.575e9).contains(&e),
        "estimate {e} for 500 Mbit/s: {c}"
    );
    assert!(c["trains_used"].as_u64().unwrap() >= 10, "{c}");
    assert!(c["p10_bps"].as_f64().unwrap() <= e && e <= c["p90_bps"].as_f64().unwrap());
}

#[test]
fn run_path_puts_the_path_in_the_result() {
    let _serial = serial();
    let s = ServerProc::start("127.0.0.1", &[]);
    let r = run_json("127.0.0.1", s.port, &["-n", "2M", "--path", "--latency"]);
    let p = &r["path"];
    assert_eq!(p["schema"], "landspeed/path/1");
    assert_eq!(p["rtt"]["summary"]["received"], 10, "{p}");
    assert_eq!(p["trace"]["reached"], true, "{p}");
    assert!(p["pmtu"]["path_mtu"].as_u64().unwrap() >= 1500, "{p}");
    assert!(p["capacity"]["estimate_bps"].is_number(), "{p}");
    assert!(r["latency"]["idle"]["received"].as_u64().unwrap() > 0);
    let port = s.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &port, "-n", "1M", "--path"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("measured before the test") && o.stdout.contains("path MTU"),
        "{}",
        o.stdout
    );
}

#[test]
fn ipv6_route_and_mtu_on_loopback() {
    // One at a time with the emulator tests, whose timing this file's other tests would disturb.
    let _serial = serial();
    let s = ServerProc::start("::1", &[]);
    let p = s.port.to_string();
    let o = landspeed(
        &[
            "path", "::1", "-p", &p, "--trace", "--pmtu", "--rtt", "-c", "2", "-i", "10ms", "-n", "--json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let r = json(&o);
    assert_eq!(r["rtt"]["summary"]["received"], 2);
    assert_eq!(r["trace"]["reached"], true);
    assert_eq!(r["trace"]["hops"][0]["address"], "::1");
    assert_eq!(r["pmtu"]["path_mtu"], r["pmtu"]["local_mtu"], "{}", r["pmtu"]);
}

#[test]
fn the_phased_latency_test_against_nothing_says_every_probe_was_lost_and_why_each_test_failed() {
    let port = common::free_port().to_string();
    let dir = std::env::temp_dir().join(format!("landspeed-latency-plots-{}", std::process::id()));
    let o = common::landspeed(
        &[
            "latency",
            "127.0.0.1",
            "-p",
            &port,
            "--phase",
            "1s",
            "--json",
            "--dscp",
            "cs1",
            "--probe-dscp",
            "load",
            "--plots",
            dir.to_str().unwrap(),
            "--html",
            dir.join("latency.html").to_str().unwrap(),
        ],
        std::time::Duration::from_secs(30),
    );
    // The page holds both figures inline and the text report (the same phases as the JSON).
    let page = std::fs::read_to_string(dir.join("latency.html")).unwrap_or_default();
    assert_eq!(page.matches("<svg").count(), 2, "{page}");
    assert!(page.contains("Latency under load to 127.0.0.1"), "{page}");
    // The figures are drawn even with nothing to show but the phases and the lost probes.
    for f in [
        "latency-over-time.svg",
        "latency-over-time.png",
        "latency-cdf.svg",
        "latency-cdf.png",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    // The idle phases probe for their whole second and hear nothing; each loaded phase ends at once
    // with its test's reason.
    for p in r["phases"].as_array().unwrap() {
        assert_eq!(p["rtt"]["received"], 0, "{p}");
        let loaded = p["load"] != "idle";
        assert_eq!(p["error"].is_string(), loaded, "{p}");
        assert!(loaded || p["rtt"]["sent"].as_u64().unwrap() >= 15, "{p}");
    }
    assert!(r["clock"].is_null(), "no probe answered: no offset");
    // The classes asked are in the document: CS1 is TOS 0x20.
    assert_eq!(
        (r["load_tos"].as_u64(), r["probe_tos"].as_u64()),
        (Some(0x20), Some(0x20))
    );
    // The probes' class needs the load's to be named, and a known code point.
    for bad in [&["--probe-dscp", "load"][..], &["--probe-dscp", "fast"][..]] {
        let mut args = vec!["latency", "127.0.0.1", "-p", &port];
        args.extend_from_slice(bad);
        let o = common::landspeed(&args, std::time::Duration::from_secs(10));
        assert_eq!(o.code, 2, "{bad:?}: {}", o.stderr);
        assert!(o.stderr.contains("--probe-dscp"), "{}", o.stderr);
    }
    // `--aqm` names a discipline the emulator has, and switches the emulator this runs in: outside
    // one it says how to run it, in one line, before any probe is sent.
    for (aqm, said) in [
        ("red", "is not one of tail-drop"),
        ("fq-codel", "landspeed wan exec NAME a --"),
    ] {
        let o = common::landspeed(
            &["latency", "127.0.0.1", "-p", &port, "--aqm", aqm],
            std::time::Duration::from_secs(10),
        );
        assert_eq!((o.code, o.stderr.lines().count()), (2, 1), "{aqm}: {}", o.stderr);
        assert!(o.stderr.contains(said), "{aqm}: {}", o.stderr);
    }
}
