//! The WAN emulator, end to end as root: namespaces and TUN devices are created, TCP runs between them
//! through the userspace forwarder, and the path behaves as configured (delay, window/RTT, rate, Mathis
//! loss response, payload corruption caught by verification). Tests take a lock so that only one path
//! is measured at a time on the 2-core machine, and every emulator is taken down when its guard drops,
//! also when the test fails. Without root they skip, unless CI is set, where they fail.

use crate::common;

use common::landspeed;
use common::wan::{root, Wan};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

fn netns_exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        .unwrap_or(false)
}

fn mbps(v: &Value) -> f64 {
    v["summary"]["throughput_bps"].as_f64().unwrap() / 1e6
}

#[test]
fn up_status_exec_down_leave_nothing_behind() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "10ms", "--rate", "100M", "--loss", "0"]);
    let st = w.status();
    assert_eq!(st["running"], true);
    assert_eq!(st["hosts"]["a"]["address"], "198.18.0.1");
    assert_eq!(st["hosts"]["b"]["address"], "198.18.0.2");
    assert_eq!(st["settings"]["a_to_b"]["rate_bps"], 100e6);
    let pid = st["pid"].as_u64().unwrap();
    let (ns_a, ns_b) = (format!("lsw-{}-a", w.name), format!("lsw-{}-b", w.name));
    assert!(netns_exists(&ns_a) && netns_exists(&ns_b));

    // A second `up` of the same name is refused; a bad host letter is a usage error.
    let again = landspeed(&["wan", "up", &w.name], Duration::from_secs(10));
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("already up"), "{}", again.stderr);
    let bad = landspeed(
        &["wan", "exec", &w.name, "c", "--", "true"],
        Duration::from_secs(10),
    );
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    // A command in a host sees the namespace's interfaces in /sys and, as on a real host, the control
    // groups (a server in a CPU quota reads it there: the limit report's evidence).
    let seen = w.in_exec_a(
        &["sh", "-c", "ls /sys/class/net; ls /sys/fs/cgroup"],
        Duration::from_secs(10),
    );
    let here = |dir: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into())
                    .collect()
            })
            .unwrap_or_default()
    };
    let names: Vec<&str> = seen.stdout.lines().collect();
    let host_links = here("/sys/class/net");
    assert!(names.contains(&"wan0"), "{}", seen.stdout);
    assert!(
        host_links
            .iter()
            .all(|l| l == "lo" || !names.contains(&l.as_str())),
        "{}",
        seen.stdout
    );
    let host_cgroups = here("/sys/fs/cgroup");
    assert!(!host_cgroups.is_empty());
    assert!(
        host_cgroups.iter().all(|c| names.contains(&c.as_str())),
        "{}",
        seen.stdout
    );

    w.serve_in_b();
    let r = w.run_ok(&["-t", "2"]);
    assert_eq!(r["summary"]["bytes_sent"], r["summary"]["bytes_received"]);
    assert!(r["summary"]["bytes_received"].as_u64().unwrap() > 1_000_000);
    let st = w.status();
    let fwd = st["a_to_b"]["bytes_forwarded"].as_u64().unwrap();
    assert!(fwd >= r["summary"]["bytes_received"].as_u64().unwrap(), "{st}");
    assert!(st["b_to_a"]["packets_forwarded"].as_u64().unwrap() > 0);

    drop(w);
    assert!(!netns_exists(&ns_a) && !netns_exists(&ns_b), "namespaces left");
    assert!(!alive(pid), "forwarder left running");
}

/// Processes started with `wan exec` and still running when the emulator goes down are ended: a
/// deleted namespace would leave them alive and unreachable. One ignores SIGTERM and is killed after the
/// grace period.
#[test]
fn down_ends_the_processes_left_in_its_namespaces() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "2ms"]);
    let exec = |side: &str, script: &str| {
        Command::new(common::bin())
            .args(["wan", "exec", &w.name, side, "--", "sh", "-c", script])
            .spawn()
            .unwrap()
    };
    let polite = exec("b", "exec sleep 600");
    let stubborn = exec("a", "trap '' TERM; sleep 600 & wait");
    let pids = [polite.id() as u64, stubborn.id() as u64];
    w.servers.extend([polite, stubborn]);
    // Wait (bounded) until both have entered their namespaces (exec replaces `landspeed wan exec`) and
    // the stubborn shell ignores SIGTERM: its trap is set once its `sleep` child exists.
    let entered = |pid: u64| {
        std::fs::read_link(format!("/proc/{pid}/ns/net")).ok() != std::fs::read_link("/proc/self/ns/net").ok()
    };
    let has_child = |pid: u64| {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|st| {
                    st.rsplit(')')
                        .next()?
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u64>()
                        .ok()
                })
                == Some(pid)
        })
    };
    let ready = || pids.iter().all(|p| entered(*p)) && has_child(pids[1]);
    assert!(
        common::wait_until(Duration::from_secs(10), ready),
        "processes never entered the namespaces"
    );
    let down = landspeed(&["wan", "down", &w.name], Duration::from_secs(30));
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert!(down.stdout.contains("ended"), "{}", down.stdout);
    assert!(down.stdout.contains("were killed"), "{}", down.stdout);
    for c in &mut w.servers {
        let _ = c.wait(); // reap, so a zombie cannot pass for a survivor
    }
    for p in pids {
        assert!(!alive(p), "pid {p} survived wan down: {}", down.stdout);
    }
}

#[test]
fn a_killed_forwarder_is_cleaned_up_by_down() {
    let Some(_lock) = root() else { return };
    let w = Wan::up(&["--rtt", "2ms"]);
    let pid = w.status()["pid"].as_u64().unwrap();
    let c = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(c.success());
    let t = std::time::Instant::now();
    while alive(pid) && t.elapsed() < Duration::from_secs(5) {
        std::thread::yield_now();
    }
    let st = landspeed(&["wan", "status", &w.name], Duration::from_secs(10));
    assert_eq!(st.code, 1, "a dead forwarder is not 'running': {}", st.stdout);
    assert!(st.stdout.contains("NOT RUNNING"), "{}", st.stdout);
    let down = landspeed(&["wan", "down", &w.name], Duration::from_secs(30));
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert!(!netns_exists(&format!("lsw-{}-a", w.name)));
    assert!(!std::path::Path::new(&format!("/run/landspeed/wan/{}.json", w.name)).exists());
}

#[test]
fn a_failing_test_still_takes_its_emulator_down() {
    let Some(_lock) = root() else { return };
    let name = std::thread::spawn(|| {
        let w = Wan::up(&["--rtt", "2ms"]);
        let name = w.name.clone();
        std::panic::panic_any(name);
    })
    .join()
    .expect_err("the thread panics");
    let name = name.downcast_ref::<String>().unwrap();
    assert!(!netns_exists(&format!("lsw-{name}-a")));
    assert!(!netns_exists(&format!("lsw-{name}-b")));
}

#[test]
fn idle_rtt_matches_the_configured_rtt() {
    let Some(_lock) = root() else { return };
    for rtt_ms in [1.0, 100.0] {
        let mut w = Wan::up(&["--rtt", &format!("{rtt_ms}ms")]);
        w.serve_in_b();
        let r = w.run_ok(&["-n", "256K", "-C", "cubic"]);
        let min_ms = r["streams"][0]["tcp"]["rtt_min_us"].as_f64().unwrap() / 1000.0;
        assert!(
            (min_ms - rtt_ms).abs() <= 0.5,
            "configured {rtt_ms} ms, measured {min_ms} ms"
        );
    }
}

#[test]
fn window_limited_throughput_is_window_over_rtt() {
    // The RTT under a 215 Mbit/s load is the forwarder's punctuality: no other test's load beside it
    // (15 s of the machine alone).
    let _alone = crate::common::alone();
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "50ms", "--rate", "1G"]);
    w.serve_in_b();
    for win in ["256K", "512K", "1M"] {
        // 1 s of warm-up covers slow start (1 MiB of window is 7 RTTs, 350 ms); 3 s is 60 RTTs.
        let r = w.run_ok(&["-t", "3", "-O", "1", "-C", "cubic", "-w", win]);
        let tcp = &r["streams"][0]["tcp"];
        let wnd = tcp["snd_wnd_bytes"].as_f64().unwrap();
        // The RTT the stream saw: 50 ms plus whatever the userspace forwarder adds when the 2-CPU
        // machine is busy (CI once saw 47.8 against 52.3 Mbit/s computed with the nominal 50 ms, and
        // once a mean of 63.7 ms at `-w 1M` in a noisy minute). The claim is the window over the RTT
        // the stream saw, so the RTT is only checked for sense: the path's delay at least, and not
        // half as much again.
        let rtt_s = tcp["rtt_avg_us"].as_f64().unwrap() / 1e6;
        assert!((0.049..=0.075).contains(&rtt_s), "-w {win}: mean RTT {rtt_s} s");
        let rtt_min_s = tcp["rtt_min_us"].as_f64().unwrap() / 1e6;
        // Each round trip carries a window, so the rate is the window times the mean of 1/RTT:
        // between the window over the mean RTT (Jensen) and the window over the least. A queue or a
        // late forwarder that stretches a few round trips raises the mean RTT more than it lowers
        // the rate (CI, with the machine alone: a mean of 57.05 ms, a least of 50.5 ms, 208.9 Mbit/s
        // where window/mean is 185.4 and window/least 209.4).
        let (low, high) = (wnd * 8.0 / rtt_s / 1e6, wnd * 8.0 / rtt_min_s / 1e6);
        let got = mbps(&r);
        eprintln!(
            "-w {win}: {wnd} B over {:.2} ms (mean) to {:.2} ms (least) = {low:.1} to {high:.1} Mbit/s, measured {got:.1}",
            rtt_s * 1e3,
            rtt_min_s * 1e3
        );
        // The window is read once, at the end, and the receiver advertises what it expects payload to
        // fill of its buffer, from the sizes of the packets its TCP took (len/truesize): the trains the
        // emulator hands over vary in length, so the window moves by a few per cent during the test
        // (1.27-1.36 MB for `-w 1M` in runs whose rate was 212-215 Mbit/s each time). Hence 12%.
        assert!(
            got >= low * 0.88 && got <= high * 1.12,
            "-w {win}: window in effect {wnd} B, RTT mean {:.1} ms and least {:.1} ms, {got:.1} Mbit/s vs {low:.1} to {high:.1}",
            rtt_s * 1e3,
            rtt_min_s * 1e3
        );
    }
}

#[test]
fn ample_buffers_fill_the_configured_rate() {
    // 500 Mbit/s through the userspace forwarder takes most of a CPU: with other tests beside it a
    // full CI run saw 444 Mbit/s (the forwarder late, not CUBIC), so it has the machine alone (9 s).
    let _alone = crate::common::alone();
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "50ms", "--rate", "500M", "--queue", "1bdp"]);
    w.serve_in_b();
    // Slow start fills the 3.1 MB BDP in about 8 RTTs (0.4 s); 2 s of warm-up leaves CUBIC time to
    // settle after its first loss at the queue.
    let r = w.run_ok(&["-t", "5", "-O", "2", "-C", "cubic"]);
    assert!(
        mbps(&r) >= 0.9 * 500.0,
        "{:.1} Mbit/s through a 500 Mbit/s path",
        mbps(&r)
    );
    assert!(mbps(&r) <= 500.0, "faster than the shaper: {:.1}", mbps(&r));
    assert_no_interval_rtt_below_the_runs_minimum(&r);
    assert_late_only_when_said(&r);
    // TCP reached the emulator in GSO trains (TUN offloads), each cut into its wire packets.
    let d = &w.status()["a_to_b"];
    let (trains, packets) = (
        d["trains_in"].as_u64().unwrap(),
        d["packets_in"].as_u64().unwrap(),
    );
    assert!(
        trains > 0 && packets > 2 * trains,
        "{trains} trains, {packets} packets: {d}"
    );
    assert_eq!(d["trains_refused"], 0);
}

/// The result carries how late the emulator was over the test in the data's direction, and warns
/// (one line, with the rate carried) exactly when that p99 is over the 500 µs bound.
fn assert_late_only_when_said(r: &Value) {
    let late_lines = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().is_some_and(|w| w.contains("left packets late")))
        .count();
    let data_way = match r["directions"][0]["flow"].as_str() {
        Some("client_to_server") => "to_server",
        _ => "to_client",
    };
    let p99 = r["emulator"][data_way]["late_p99_us"]
        .as_f64()
        .unwrap_or_else(|| panic!("no lateness {}", r["emulator"]));
    eprintln!("the emulator's p99 lateness {data_way} over the test: {p99} µs");
    assert_eq!(
        late_lines,
        usize::from(p99 > 500.0),
        "{p99} µs: {}",
        r["warnings"]
    );
}

/// Every interval's RTT (the first, in slow start, above all) is at least the run's minimum RTT, and
/// the first interval has one: the path's floor is never undercut.
fn assert_no_interval_rtt_below_the_runs_minimum(r: &Value) {
    let floor = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["tcp"]["rtt_min_us"].as_u64())
        .min()
        .expect("a TCP test has a minimum RTT");
    assert!(floor >= 49_000, "the 50 ms path's minimum RTT is {floor} µs");
    let intervals = r["intervals"].as_array().unwrap();
    assert!(
        intervals[0]["streams"][0]["rtt_us"].as_u64().is_some(),
        "{}",
        intervals[0]
    );
    for i in intervals {
        for s in i["streams"].as_array().unwrap() {
            if let Some(rtt) = s["rtt_us"].as_u64() {
                assert!(rtt >= floor, "interval {} RTT {rtt} µs below {floor}", i["index"]);
            }
        }
    }
}

#[test]
fn reno_under_random_loss_follows_mathis() {
    let Some(_lock) = root() else { return };
    // About 6 loss events a second at 1%, 2 at 0.1%: the two runs see some 30 each.
    for (p, secs) in [(0.01f64, "6"), (0.001, "12")] {
        let mut w = Wan::up(&["--rtt", "20ms", "--rate", "1G", "--a-to-b", &format!("loss={p}")]);
        w.serve_in_b();
        let r = w.run_ok(&["-t", secs, "-O", "2", "-C", "reno"]);
        let mss = r["streams"][0]["tcp"]["mss_bytes"].as_f64().unwrap();
        let mathis = mss * 8.0 / 0.020 * 1.22 / p.sqrt() / 1e6;
        let ratio = mbps(&r) / mathis;
        assert!(
            (0.6..=1.6).contains(&ratio),
            "p = {p}: {:.2} Mbit/s vs Mathis {mathis:.2} (ratio {ratio:.2})",
            mbps(&r)
        );
        let st = w.status();
        assert!(st["a_to_b"]["dropped_loss"].as_u64().unwrap() > 0);
    }
}

#[test]
fn corrupted_payload_passes_tcp_and_is_caught_by_verification() {
    let Some(_lock) = root() else { return };
    // The emulator damages any packet with a payload, the control connection's too (the server
    // then closes it on a message it cannot read: a failed run, not this test's point). At 0.02%
    // a few tens of the 2 s's data packets are damaged and the client's few control packets almost
    // never (at 0.2% one CI run in some tens lost its results message so).
    let mut w = Wan::up(&[
        "--rtt",
        "2ms",
        "--rate",
        "1G",
        "--a-to-b",
        "corrupt-payload=0.02%",
    ]);
    w.serve_in_b();
    let (code, r) = w.run_from_a(&["-t", "2"]);
    assert_eq!(code, 1, "a run with corruption exits 1");
    let s = &r["summary"];
    // TCP delivered everything (the checksums were fixed up), and the verifier caught the damage.
    assert_eq!(s["bytes_sent"], s["bytes_received"]);
    assert!(s["corrupt_blocks"].as_u64().unwrap() > 0, "{s}");
    let corrupted = w.status()["a_to_b"]["corrupted"].as_u64().unwrap();
    assert!(corrupted > 0);
    assert!(
        s["corrupt_blocks"].as_u64().unwrap() <= corrupted,
        "more bad blocks than corrupted packets"
    );
    let first = &r["payload"]["first_corruption"];
    assert_eq!(first["stream"], 0, "{first}");
    assert_ne!(first["expected_hex"], first["received_hex"]);
}

#[test]
fn udp_loss_duplicates_reordering_and_jitter_match_the_emulator() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&[
        "--rtt",
        "10ms",
        "--rate",
        "1G",
        "--seed",
        "7",
        "--a-to-b",
        "loss=1%",
        "--a-to-b",
        "duplicate=1%",
        "--a-to-b",
        "reorder=1%",
        "--a-to-b",
        "jitter=1ms",
    ]);
    w.serve_in_b();
    let r = w.run_ok(&["-u", "-b", "50M", "-t", "3"]);
    let u = &r["summary"]["udp"];
    let st = w.status();
    let emu = &st["a_to_b"];
    let count = |v: &Value| v.as_u64().unwrap();
    // Every datagram the emulator dropped or doubled is counted, and little else: a few control
    // datagrams (the stream's hello, its end-of-stream markers) cross the same path.
    let (lost, dropped) = (count(&u["datagrams_lost"]), count(&emu["dropped_loss"]));
    assert!(
        lost <= dropped && dropped - lost <= 6,
        "lost {lost}, emulator dropped {dropped}"
    );
    let (dups, doubled) = (count(&u["duplicates"]), count(&emu["duplicated"]));
    assert!(
        dups <= doubled && doubled - dups <= 6,
        "duplicates {dups}, emulator duplicated {doubled}"
    );
    // Path loss near 1%: within 5 binomial standard deviations of the datagrams sent.
    let sent = count(&u["datagrams_sent"]) as f64;
    let sd_pct = (0.01 * 0.99 / sent).sqrt() * 100.0;
    assert!(
        (u["loss_pct"].as_f64().unwrap() - 1.0).abs() < 5.0 * sd_pct,
        "{u}"
    );
    // A receiver with room to spare dropped nothing, nor did the sending host: every lost datagram
    // was lost on the path, and the result carries the emulator's own count of it.
    assert_eq!(u["socket_drops"], 0, "{u}");
    assert_eq!(u["lost_in_receiver"], 0, "{u}");
    assert_eq!(u["lost_in_sender"], 0, "{u}");
    let e = &r["emulator"];
    assert_eq!(e["name"].as_str(), Some(w.name.as_str()), "{e}");
    assert_eq!(e["client_host"], "a", "{e}");
    let on_path = count(&e["to_server"]["dropped_loss"]);
    assert!(
        lost <= on_path && on_path - lost <= 6,
        "lost {lost}, on the path {on_path}"
    );
    assert!(
        count(&u["out_of_order"]) > 0 && count(&emu["reordered"]) > 0,
        "{u}"
    );
    assert!(u["jitter_ms"].as_f64().unwrap() > 0.1, "jitter {u}");
    assert_eq!(r["summary"]["bytes_verified"], r["summary"]["bytes_received"]);
    assert_eq!(r["summary"]["corrupt_blocks"], 0);
    assert_late_only_when_said(&r);
}

/// The p99 departure lateness of both directions, µs, and how many packets each left.
fn lateness_p99_us(st: &Value) -> [(f64, u64); 2] {
    ["a_to_b", "b_to_a"].map(|d| {
        let l = &st[d]["departure_lateness"];
        (l["p99_us"].as_f64().unwrap(), l["packets"].as_u64().unwrap())
    })
}

#[test]
fn the_emulator_is_on_time_idle_and_under_tcp_load() {
    // Punctuality is the assertion: no other test's load beside it (a loopback test beside it once
    // made the loaded p99 1.9 ms; the real-time forwarder cannot preempt the kernel's own work).
    let _alone = crate::common::alone();
    let Some(_lock) = root() else { return };
    // Idle: a sparse UDP test (250 datagrams a second, one every 4 ms on a path that carries one in
    // 40 µs), each datagram alone on the path. Margin: on the 2-core VM the p99 is 10-70 µs, the bound
    // 500 µs. The p99 is judged over the datagrams' direction only: with ~500 packets it leaves out the
    // worst five, where the VM's host once stalled one for 1.5 ms; the other direction carries a dozen
    // control segments, too few for a percentile (their p99 is their maximum), so only their count is.
    // Up to two tries more when the first is late: a stall of the VM's host (seen: a p99 of 1.1 ms
    // idle and of 1.9 ms loaded, with nothing else running) says nothing of the forwarder. Two late
    // tries in a row were seen once (CI of 2026-11-28, loaded: 0.7/0.3 ms, then 1.3/3.1 ms, with no
    // other process on the machine); a forwarder that is late is late in all three.
    let idle = on_time_in_three_tries(
        "idle",
        &["-u", "-b", "2M", "-l", "1000", "-t", "2"],
        |[(_, d), (_, c)]| {
            assert!(d >= 400 && c >= 10, "{d} and {c} packets");
            // The datagrams' direction only: the other carries too few packets for a percentile.
            vec![0]
        },
    );
    assert!(idle, "idle: late three times beyond the bound");
    // Loaded: TCP at the path's 200 Mbit/s. Margin: the p99 is 50-60 µs on the 2-core VM (at 1 Gbit/s,
    // both CPUs saturated, 40-70 µs for data and 360-420 µs for ACKs), the bound 500 µs.
    let loaded = on_time_in_three_tries("loaded", &["-t", "3"], |dirs| {
        dirs.iter()
            .for_each(|(_, n)| assert!(*n >= 10_000, "{n} packets"));
        vec![0, 1]
    });
    assert!(loaded, "loaded: late three times beyond the bound");
}

/// Runs `args` from host A to a server in B over a fresh 20 ms, 200 Mbit/s path, at most three times, until
/// the p99 lateness of the directions `judged` (which also checks the packet counts) picks is within
/// the bound: 500 µs, or three times this host's own timer lateness, whichever is more. The host's is
/// measured just before the try and during it, by a thread of the forwarder's own real-time priority
/// waking from 1 ms waits: what the VM's host does to any punctual thread at that moment (quiet: a p99
/// of 100-260 µs; in noisy minutes the forwarder's p99 went to 1-2.4 ms idle while no other process
/// ran, and CI once saw 4.8 and 6.9 ms loaded a minute after 0.8 ms, with a quiet timer just before:
/// the noise came during the try). Whether a try was on time.
fn on_time_in_three_tries(what: &str, args: &[&str], judged: impl Fn([(f64, u64); 2]) -> Vec<usize>) -> bool {
    (0..3).any(|attempt| {
        let before = host_timer_p99_us(400);
        let mut w = Wan::up(&["--rtt", "20ms", "--rate", "200M"]);
        w.serve_in_b();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let during = std::thread::scope(|s| {
            let sampler = s.spawn(|| host_timer_during_us(&stop));
            w.run_ok(args);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            sampler.join().unwrap()
        });
        let bound = 500f64.max(3.0 * before.max(during));
        let dirs = lateness_p99_us(&w.status());
        let late: Vec<f64> = judged(dirs).into_iter().map(|i| dirs[i].0).collect();
        eprintln!(
            "{what}, try {}: p99 {late:?} µs late; host timer p99 {before:.0} µs before, {during:.0} \
             µs during; bound {bound:.0} µs",
            attempt + 1
        );
        late.iter().all(|p| *p <= bound)
    })
}

/// The p99 of how late this thread wakes from `n` 1 ms waits: the host's own timer noise.
fn host_timer_p99_us(n: usize) -> f64 {
    let mut late: Vec<f64> = (0..n).map(|_| one_wait_late_us()).collect();
    late.sort_by(f64::total_cmp);
    late[late.len() * 99 / 100]
}

/// How late one 1 ms wait woke, µs.
fn one_wait_late_us() -> f64 {
    let t = std::time::Instant::now();
    std::thread::park_timeout(Duration::from_millis(1));
    (t.elapsed().as_secs_f64() - 1e-3).max(0.0) * 1e6
}

/// The p99 of 1 ms waits until `stop`, on a thread of the forwarder's priority (SCHED_FIFO 10, timer
/// slack 1 µs, as crates/wan/src/forward.rs sets its own): at an ordinary priority the test's own load
/// would be what it measured.
fn host_timer_during_us(stop: &std::sync::atomic::AtomicBool) -> f64 {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64, 0, 0, 0) };
    // SAFETY: sched_param is plain integers: zero is valid.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = 10;
    // SAFETY: sets this thread's policy (pid 0) from a valid sched_param; as root it cannot fail.
    let rt = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    assert!(rt, "the sampler needs real-time priority, as the forwarder has");
    let mut late = Vec::new();
    // Bounded: a test of a few seconds takes a few thousand waits; 60 s at most.
    while !stop.load(std::sync::atomic::Ordering::Relaxed) && late.len() < 60_000 {
        late.push(one_wait_late_us());
    }
    late.sort_by(f64::total_cmp);
    late.get(late.len() * 99 / 100).copied().unwrap_or(0.0)
}

/// The bottleneck's mean queueing delay A→B in ms, and what the queue discipline did (drops, marks).
fn queueing(st: &Value) -> (f64, u64, u64) {
    let d = &st["a_to_b"];
    let n = |k: &str| d[k].as_u64().unwrap_or_else(|| panic!("{k} in {d}"));
    let mean_ms = n("sojourn_sum_ns") as f64 / n("sojourn_packets").max(1) as f64 / 1e6;
    (mean_ms, n("dropped_aqm"), n("marked_ce"))
}

/// One 2 s CUBIC test A→B through 20 ms at 50 Mbit/s with a 4-BDP buffer (80 ms of queue) and the
/// discipline `aqm`, both hosts asking for ECN when `ecn` (`wan up --ecn`): the emulator's status
/// after it, and the result.
fn through_the_queue(aqm: &str, ecn: bool) -> (Value, Value) {
    let mut args = vec!["--rtt", "20ms", "--rate", "50M", "--queue", "4bdp", "--aqm", aqm];
    if ecn {
        args.push("--ecn");
    }
    let mut w = Wan::up(&args);
    w.serve_in_b();
    let r = w.run_ok(&["-t", "2", "-C", "cubic"]);
    (w.status(), r)
}

/// Strict priority by DSCP (`--aqm prio`): a load in the background class (CS1, TOS 32) leaves
/// best-effort probes at the idle RTT, and a best-effort load makes them wait behind it, on the same
/// path; the emulator's timing of the probes' own packets, in each run's result, says the same.
#[test]
fn the_priority_discipline_keeps_probes_out_of_a_background_load_and_not_out_of_their_own_class() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&[
        "--rtt", "20ms", "--rate", "50M", "--queue", "4bdp", "--aqm", "prio",
    ]);
    w.serve_in_b();
    let added = |r: &Value| {
        let l = &r["latency"];
        l["loaded"]["median_ms"].as_f64().unwrap() - l["idle"]["median_ms"].as_f64().unwrap()
    };
    let probes_ms = |r: &Value| {
        r["emulator"]["to_server"]["probe_mean_sojourn_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("{}", r["emulator"]))
    };
    let background = w.run_ok(&["-t", "2", "-C", "cubic", "--tos", "32", "--latency"]);
    let same = w.run_ok(&["-t", "2", "-C", "cubic", "--latency"]);
    assert!(
        added(&background) < 2.0 && probes_ms(&background) < 1.0,
        "background load: probes +{:.2} ms, {:.2} ms at the bottleneck",
        added(&background),
        probes_ms(&background)
    );
    assert!(
        added(&same) > 10.0 && probes_ms(&same) > 10.0,
        "best-effort load: probes +{:.2} ms, {:.2} ms at the bottleneck",
        added(&same),
        probes_ms(&same)
    );
}

#[test]
fn codel_and_pie_keep_the_queue_that_tail_drop_lets_stand_and_ecn_traffic_is_marked_not_dropped() {
    let Some(_lock) = root() else { return };
    let (tail_ms, tail_drops, _) = queueing(&through_the_queue("tail-drop", false).0);
    let (codel_ms, codel_drops, codel_marks) = queueing(&through_the_queue("codel", false).0);
    let (pie_ms, pie_drops, _) = queueing(&through_the_queue("pie", false).0);
    assert!(
        pie_drops > 0 && pie_ms < tail_ms / 2.0,
        "PIE: {pie_ms:.1} ms, {pie_drops} dropped"
    );
    // The sojourn times are the model's (virtual time): the forwarder's lateness does not enter them.
    assert_eq!(tail_drops, 0, "tail drop has no discipline to drop with");
    assert!(codel_drops > 0 && codel_marks == 0, "{codel_drops} {codel_marks}");
    assert!(
        tail_ms > 20.0 && codel_ms < tail_ms / 2.0,
        "queueing delay: tail drop {tail_ms:.1} ms, CoDel {codel_ms:.1} ms"
    );
    // With ECN negotiated, CoDel marks the data instead (the handshake's SYN is not ECN-capable),
    // and the sender's TCP_INFO says so: ECN on, CE-marked deliveries counted.
    let (st, r) = through_the_queue("codel", true);
    assert_eq!(st["settings"]["ecn"], true, "wan up --ecn is in the status");
    let (ecn_ms, ecn_drops, ecn_marks) = queueing(&st);
    assert!(
        ecn_marks > 0 && ecn_drops <= 1,
        "{ecn_marks} marked, {ecn_drops} dropped"
    );
    assert!(ecn_ms < tail_ms / 2.0, "{ecn_ms:.1} ms");
    let tcp = &r["streams"][0]["tcp"];
    assert_eq!(tcp["ecn"], true, "{tcp}");
    assert!(tcp["delivered_ce"].as_u64().unwrap() > 0, "{tcp}");
}

#[test]
fn fq_codel_isolates_the_probes_flow_and_the_dual_queue_marks_ecn_traffic_in_its_l4s_queue() {
    let Some(_lock) = root() else { return };
    // FQ-CoDel: the probes are a flow of their own, so the bulk flow's queue is not theirs; the bulk
    // flow's own queue is held by CoDel's drops. The emulator's probe timings are the reference.
    let mut w = Wan::up(&[
        "--rtt", "20ms", "--rate", "50M", "--queue", "4bdp", "--aqm", "fq-codel",
    ]);
    w.serve_in_b();
    let r = w.run_ok(&["-t", "2", "-C", "cubic", "--latency"]);
    let st = w.status();
    drop(w);
    let (bulk_ms, drops, _) = queueing(&st);
    let d = &st["a_to_b"];
    let probe_ms =
        d["probe_sojourn_sum_ns"].as_f64().unwrap() / d["probe_packets"].as_f64().unwrap().max(1.0) / 1e6;
    let lat = &r["latency"];
    let added = lat["loaded"]["median_ms"].as_f64().unwrap() - lat["idle"]["median_ms"].as_f64().unwrap();
    assert!(drops > 0, "CoDel never dropped: {d}");
    assert!(
        probe_ms < 1.0 && added < 2.0,
        "probes queued {probe_ms:.2} ms, RTT +{added:.2} ms"
    );
    assert!(
        bulk_ms > probe_ms,
        "bulk {bulk_ms:.2} ms, probes {probe_ms:.2} ms"
    );
    // DualPI2 with every ECT as L4S: ECN-negotiated CUBIC data waits in the shallow queue, which
    // marks past its 1 ms step instead of dropping, and the sender's TCP_INFO counts the marks.
    let (st, r) = through_the_queue("dualpi2:any-ect", true);
    let (_, drops, marks) = queueing(&st);
    assert!(marks > 0 && drops <= 1, "{marks} marked, {drops} dropped");
    let tcp = &r["streams"][0]["tcp"];
    assert_eq!(tcp["ecn"], true, "{tcp}");
    assert!(tcp["delivered_ce"].as_u64().unwrap() > 0, "{tcp}");
}

#[test]
fn the_udp_receiver_counts_the_ce_marks_the_emulator_made() {
    let Some(_lock) = root() else { return };
    // ECN-capable datagrams (--tos 2: ECT(0)) 25% over a CoDel bottleneck: CoDel marks instead of
    // dropping, and the receiver reads each datagram's ECN field.
    let mut w = Wan::up(&[
        "--rtt", "20ms", "--rate", "20M", "--queue", "2bdp", "--aqm", "codel",
    ]);
    w.serve_in_b();
    let r = w.run_ok(&["-u", "-b", "25M", "-t", "2", "--tos", "2"]);
    let marked = w.status()["a_to_b"]["marked_ce"].as_u64().unwrap();
    let u = &r["summary"]["udp"];
    let ce = u["ce_marked"]
        .as_u64()
        .unwrap_or_else(|| panic!("no ce_marked: {u}"));
    // The same count, but for end-of-stream markers the emulator marked after the receiver had
    // stopped reading (a few at most).
    assert!(
        ce > 0 && ce <= marked && marked - ce <= 6,
        "receiver {ce}, emulator {marked}"
    );
    // CoDel marks the ECN-capable datagrams instead of dropping them; what it may drop are the few
    // packets of the test's own TCP control connection that are not ECN-capable (its pure ACKs, or all
    // of them without `--ecn`), when a signal falls on one: about 1% of the packets, against the ~100
    // signals of the run, so one or two (CI saw 1). Margin: 5, against the hundreds a dropping CoDel
    // would take from the datagrams.
    let dropped = w.status()["a_to_b"]["dropped_aqm"].as_u64().unwrap();
    assert!(
        dropped <= 5 && marked > 10 * dropped,
        "CoDel dropped {dropped} and marked {marked}: ECN-capable datagrams are marked, not dropped"
    );
}

#[test]
fn one_way_queueing_follows_the_emulators_queue_and_stays_off_the_unloaded_direction() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "50M", "--queue", "2bdp"]);
    w.serve_in_b();
    let r = w.run_ok(&["-t", "3", "-C", "cubic", "--latency"]);
    let (sojourn_ms, _, _) = queueing(&w.status());
    let ow = &r["latency"]["one_way"];
    let f = |phase: &str, k: &str| {
        ow[phase]["queueing"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("{phase}.{k}: {ow}"))
    };
    // The upload's queue is A→B: the probes to the server meet it, their replies do not. The probes
    // sample it 20 times a second, the emulator averages every packet: within 3 ms or 20% (the
    // sawtooth of one CUBIC flow over 3 s; the margin is that sampling, not a clock).
    let to_server = f("loaded_to_server", "avg_ms");
    assert!(
        (to_server - sojourn_ms).abs() <= (0.2 * sojourn_ms).max(3.0),
        "probes {to_server:.2} ms, emulator {sojourn_ms:.2} ms"
    );
    assert!(f("loaded_to_client", "median_ms") < 1.0, "{ow}");
    assert!(f("idle_to_server", "median_ms") < 1.0, "{ow}");
    // One clock for both ends: the offset is 0 within its bound, at most half the 20 ms RTT (+1 ms).
    let c = &ow["clock"];
    let (off, bound) = (c["offset_ms"].as_f64().unwrap(), c["bound_ms"].as_f64().unwrap());
    assert!(off.abs() <= bound + 0.01 && bound <= 11.0, "{c}");
}

#[test]
fn the_phased_latency_test_finds_each_loads_queue_in_its_own_direction() {
    // The idle one-way delays are held to irtt's, measured a minute earlier, within 0.5 ms: with
    // other tests beside it the emulator's forwarding drifted by more between the two (CI on
    // 66ec5cb: 11.021 ms against irtt's 10.337 toward the client). The machine alone (~30 s).
    let _alone = crate::common::alone();
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "50M", "--queue", "2bdp"]);
    w.serve_in_b();
    let irtt = irtt_one_way_ms(&mut w);
    // Once under the emulator's tail drop, once under FQ-CoDel (`--aqm` switches it and puts it back).
    let both = phases_under(&w, "tail-drop,fq-codel", Duration::from_secs(90));
    assert_eq!(both["schema"], "landspeed-latency-aqm/1");
    assert_eq!(both["restored_aqm"], "tail-drop");
    fq_codel_isolates_the_probes(&w, &both["runs"][1]);
    let r = &both["runs"][0]["result"];
    assert_eq!(both["runs"][0]["aqm"], "tail-drop");
    // Idle, each way: the floor the probes' clock offset splits plus the probes' median queueing,
    // within 0.5 ms of irtt's median one-way delay on the same path.
    for (way, theirs) in [("to_server", irtt.0), ("to_client", irtt.1)] {
        if theirs.is_nan() {
            continue; // no irtt here (outside CI: said above)
        }
        let d = &r["phases"][0][way];
        let ours = d["floor_ms"].as_f64().unwrap() + d["queueing"]["median_ms"].as_f64().unwrap();
        assert!(
            (ours - theirs).abs() <= 0.5,
            "{way}: landspeed {ours:.3} ms, irtt {theirs:.3} ms"
        );
    }
    let at = |i: usize, way: &str, k: &str| r["phases"][i][way]["queueing"][k].as_f64().unwrap();
    let q = |i: usize, way: &str| at(i, way, "median_ms");
    let names: Vec<&str> = (0..5).map(|i| r["phases"][i]["load"].as_str().unwrap()).collect();
    assert_eq!(names, ["idle", "download", "upload", "both", "idle"]);
    // A 2-BDP buffer holds up to 40 ms: the loaded direction's median queue is well into it, the
    // other direction (ACKs only) has none, and the idle phases none either way.
    assert!(
        q(1, "to_client") > 10.0 && q(1, "to_server") < 2.0,
        "download: {}",
        r["phases"][1]
    );
    assert!(
        q(2, "to_server") > 10.0 && q(2, "to_client") < 2.0,
        "upload: {}",
        r["phases"][2]
    );
    // Both ways at once: each direction holds a queue at times (the upload's ACKs wait behind the
    // download's data, which paces the upload: its median may stay low, its p90 does not).
    let p90 = |way| at(3, way, "p90_ms");
    assert!(
        p90("to_server") > 10.0 && p90("to_client") > 10.0,
        "both: {}",
        r["phases"][3]
    );
    for i in [0, 4] {
        assert!(
            q(i, "to_server") < 2.0 && q(i, "to_client") < 2.0,
            "idle: {}",
            r["phases"][i]
        );
    }
    assert!(
        r["phases"][1]["download_bps"].as_f64().unwrap() > 40e6,
        "{}",
        r["phases"][1]
    );
    assert!(r["clock"]["bound_ms"].as_f64().unwrap() <= 11.0, "{}", r["clock"]);
    // The emulator times the probes' own packets at its bottleneck: their mean queueing toward the
    // server, over every phase, against what the probes measured of themselves, within 0.5 ms (the
    // probes after the last phase's end, at most a couple, have no queue and sit in the emulator's
    // count only).
    let (mut sum, mut n) = (0.0, 0.0);
    for i in 0..5 {
        let received = at(i, "to_server", "received");
        sum += at(i, "to_server", "avg_ms") * received;
        n += received;
    }
    let (mut probes, mut emulator_ns) = (0.0, 0.0);
    for i in 0..5 {
        let e = &r["phases"][i]["emulator"]["to_server"];
        let k = e["probe_packets"].as_f64().unwrap();
        probes += k;
        emulator_ns += k * e["probe_mean_sojourn_ms"].as_f64().unwrap_or(0.0) * 1e6;
    }
    let emulator_ms = emulator_ns / probes / 1e6;
    assert!(
        (sum / n - emulator_ms).abs() <= 0.5 && (probes - n).abs() <= 3.0,
        "probes measured {:.3} ms over {n}, the emulator {emulator_ms:.3} ms over {probes}",
        sum / n
    );
    let st = w.status();
    assert_eq!(
        st["settings"]["a_to_b"]["aqm"]["kind"], "tail-drop",
        "{}",
        st["settings"]
    );
}

/// irtt (Debian's package: isochronous UDP, one-way delays from both hosts' clocks, which in the
/// emulator's namespaces are one clock) for 2 s on the idle path: its median send (A→B) and receive
/// (B→A) delays, ms (NaN without irtt, outside CI). The path must be symmetric for the comparison: from probes alone an asymmetry
/// cannot be told from a clock offset (landspeed states the offset's bound beside each floor). Idle
/// only: two tools' samples of a moving queue are a timing comparison (docs/latency.md has the loaded
/// one, by hand).
fn irtt_one_way_ms(w: &mut Wan) -> (f64, f64) {
    if Command::new("irtt").arg("version").output().is_err() {
        common::missing::<()>("irtt is not installed (apt-get install irtt)");
        return (f64::NAN, f64::NAN);
    }
    let server = Command::new(common::bin())
        .args([
            "wan",
            "exec",
            &w.name,
            "b",
            "--",
            "irtt",
            "server",
            "-b",
            "198.18.0.2:2112",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("irtt server");
    w.servers.push(server);
    let o = w.in_exec_a(
        &[
            "irtt",
            "client",
            "-i",
            "20ms",
            "-d",
            "2s",
            "-Q",
            "-o",
            "-",
            "198.18.0.2:2112",
        ],
        Duration::from_secs(30),
    );
    let v: Value = serde_json::from_str(&o.stdout)
        .unwrap_or_else(|e| panic!("irtt's output is not JSON ({e}): {}{}", o.stdout, o.stderr));
    let ms = |k: &str| v["stats"][k]["median"].as_f64().unwrap() / 1e6;
    (ms("send_delay"), ms("receive_delay"))
}

/// `latency --aqm`'s FQ-CoDel run: the probes, a flow of their own, never wait behind the loads' queue
/// (each loaded phase's median within 3 ms of the idle one), which the emulator's timing of the
/// probes' packets confirms phase by phase, while the loads' own packets do queue there.
fn fq_codel_phases(run: &Value) -> Result<(), String> {
    assert_eq!(run["aqm"], "fq-codel");
    let phases = run["result"]["phases"].as_array().unwrap();
    let median = |p: &Value| p["rtt"]["median_ms"].as_f64().unwrap();
    for p in &phases[1..4] {
        let to_server = &p["emulator"]["to_server"];
        if median(p) - median(&phases[0]) >= 3.0
            || to_server["probe_mean_sojourn_ms"].as_f64().unwrap() >= 1.0
        {
            return Err(p.to_string());
        }
    }
    let upload = &phases[2]["emulator"]["to_server"];
    assert!(
        upload["mean_sojourn_ms"].as_f64().unwrap() > upload["probe_mean_sojourn_ms"].as_f64().unwrap(),
        "{upload}"
    );
    Ok(())
}

/// `latency --phase 2s` (CUBIC loads) under each discipline of `aqm`, its JSON.
fn phases_under(w: &Wan, aqm: &str, timeout: Duration) -> Value {
    let args = [
        "latency",
        "198.18.0.2",
        "--phase",
        "2s",
        "--json",
        "--run-arg=-C",
        "--run-arg=cubic",
        "--aqm",
        aqm,
    ];
    let o = w.in_a(&args, timeout);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

/// FQ-CoDel isolates the probes from the loads, unless the probes' flow hashes into a load flow's
/// queue (1,024 queues, the flows' ephemeral ports: about one run in 300 shares the upload's), as a
/// real FQ-CoDel's would; one such run (3.03 ms of probe sojourn, 2026-12-02) is no failure of the
/// discipline, so a second run, on new ports, decides.
fn fq_codel_isolates_the_probes(w: &Wan, first: &Value) {
    let Err(why) = fq_codel_phases(first) else { return };
    eprintln!("FQ-CoDel run shared a queue with a load, trying once more: {why}");
    let again = phases_under(w, "fq-codel", Duration::from_secs(60));
    if let Err(why) = fq_codel_phases(&again["runs"][0]) {
        panic!("FQ-CoDel did not keep the probes out of the loads' queue twice: {why}");
    }
}
