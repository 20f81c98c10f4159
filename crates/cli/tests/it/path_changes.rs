//! Paths that change under a running test (docs/reliability.md): `wan change` and `wan up --schedule`
//! applied live and stamped, bad changes refused with the emulator unchanged, and a test through an
//! outage that completes, every byte verified, with the stall, the outage and its drops in the
//! result. As root, through the emulator; waits are on conditions with deadlines.

use crate::common;

use common::wan::{root, Wan};
use common::{landspeed, wait_until};
use serde_json::Value;
use std::time::Duration;

fn change(w: &Wan, args: &[&str]) -> common::Outcome {
    let mut all = vec!["wan", "change", &w.name];
    all.extend_from_slice(args);
    landspeed(&all, Duration::from_secs(10))
}

#[test]
fn a_live_change_is_applied_and_stamped_and_a_bad_one_leaves_the_path_as_it_was() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "500M"]);
    w.serve_in_b();
    let o = change(&w, &["--rtt", "80ms", "--json"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let applied: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(applied["change"], "rtt=80ms");
    assert_eq!(applied["direction"], "both");
    assert_eq!(applied["source"], "wan change");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (applied["unix_s"].as_f64().unwrap() - now).abs() < 30.0,
        "{applied}"
    );
    // The new RTT is the path's: TCP measures it (a 0.5 ms margin for the forwarder's wake-ups).
    let r = w.run_ok(&["-n", "256K", "-C", "cubic"]);
    let min_ms = r["streams"][0]["tcp"]["rtt_min_us"].as_f64().unwrap() / 1000.0;
    assert!(
        (min_ms - 80.0).abs() <= 0.5,
        "80 ms asked, TCP measured {min_ms} ms"
    );

    let o = change(
        &w,
        &["--direction", "b-to-a", "--rate", "100M", "--queue", "2bdp"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("rate=100M queue=2bdp at "), "{}", o.stdout);
    let st = w.status();
    assert_eq!(st["settings"]["b_to_a"]["rate_bps"], 100e6);
    // 2 × 100 Mbit/s × 80 ms.
    assert_eq!(st["settings"]["b_to_a"]["queue_bytes"], 2_000_000);
    assert_eq!(st["settings"]["a_to_b"]["rate_bps"], 500e6);
    assert_eq!(st["changes"].as_array().unwrap().len(), 2);

    for (args, says) in [
        (&["--loss", "2"][..], "not a probability"),
        (&[][..], "nothing to change"),
        (&["--down", "0s"][..], "between 1ms"),
        (
            &["--direction", "sideways", "--rtt", "1ms"][..],
            "not both, a-to-b or b-to-a",
        ),
    ] {
        let o = change(&w, args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{args:?}: {}", o.stderr);
    }
    let o = landspeed(
        &["wan", "change", "nosuch0", "--rtt", "1ms"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("no emulator named 'nosuch0'"), "{}", o.stderr);
    let after = w.status();
    assert_eq!(
        after["settings"], st["settings"],
        "refused changes left the path alone"
    );
    assert_eq!(after["changes"], st["changes"]);
}

#[test]
fn a_schedule_plays_its_changes_on_time_and_a_bad_line_is_named() {
    let Some(_lock) = root() else { return };
    let dir = std::env::temp_dir().join(format!("landspeed-schedule-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad");
    std::fs::write(&bad, "0.5s rtt=40ms\n1s colour=red\n").unwrap();
    let o = landspeed(
        &["wan", "up", "badsched", "--schedule", bad.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("line 2: 'colour=red'"), "{}", o.stderr);
    let st = landspeed(&["wan", "status", "badsched"], Duration::from_secs(10));
    assert_ne!(st.code, 0, "no emulator was created: {}", st.stdout);

    let good = dir.join("good");
    std::fs::write(
        &good,
        "# a route change, then three short flaps\n0.3s rtt=40ms\n0.5s every 0.25s times 3 down=50ms\n",
    )
    .unwrap();
    let w = Wan::up(&["--rtt", "10ms", "--schedule", good.to_str().unwrap()]);
    let mut st = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            st = w.status();
            st["changes"].as_array().map_or(0, Vec::len) == 4
        }),
        "{st}"
    );
    let changes = st["changes"].as_array().unwrap();
    let at: Vec<f64> = changes.iter().map(|c| c["at_s"].as_f64().unwrap()).collect();
    // Each on its time after `up` (the player looks at least every 50 ms; 100 ms of margin for a
    // busy machine), and in order.
    for (got, want) in at.iter().zip([0.3, 0.5, 0.75, 1.0]) {
        assert!(*got >= want && *got < want + 0.1, "{at:?}");
    }
    assert_eq!(changes[0]["source"], "schedule line 2");
    assert_eq!(changes[1]["change"], "down=50ms");
    assert_eq!(changes[3]["source"], "schedule line 3");
    assert_eq!(st["settings"]["a_to_b"]["delay"], 0.02);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `args` from host A while taking the path down for `down` once data flows (the emulator's
/// counters say so): the result, and the outage as the emulator applied it.
fn run_through_outage(w: &Wan, args: &[&str], down: &str) -> (i32, Value, Value) {
    let before = w.status()["a_to_b"]["packets_in"].as_u64().unwrap_or(0);
    std::thread::scope(|s| {
        let run = s.spawn(|| w.run_from_a(args));
        // Well under way: a few thousand packets through the path before it goes down.
        let flowing = wait_until(Duration::from_secs(20), || {
            w.status()["a_to_b"]["packets_in"].as_u64().unwrap_or(0) > before + 3000
        });
        assert!(flowing, "no data through the emulator");
        let o = change(w, &["--down", down, "--json"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let (code, r) = run.join().unwrap();
        (code, r, serde_json::from_str(&o.stdout).unwrap())
    })
}

#[test]
fn a_tcp_test_through_an_outage_completes_verified_and_shows_the_stall() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "200M"]);
    w.serve_in_b();
    let (code, r, _) = run_through_outage(&w, &["-t", "4", "-i", "0.5"], "1s");
    assert_eq!(
        code, 0,
        "the outage is what was measured, the result is trusted: {r}"
    );
    let s = &r["summary"];
    assert_eq!(s["bytes_sent"], s["bytes_received"]);
    assert_eq!(r["payload"]["corrupt_blocks"], 0);
    assert!(r["payload"]["bytes_verified"].as_u64().unwrap() > 0);
    let e = &r["emulator"];
    let outage = &e["changes"][0];
    assert_eq!(outage["change"], "down=1s", "{e}");
    // A float the emulator computes from its clock: 1 s within rounding (seen: 0.9999999999999998).
    let down = outage["down_s"].as_f64().unwrap();
    assert!((down - 1.0).abs() < 1e-6, "{e}");
    let at = outage["at_s"].as_f64().unwrap();
    assert!(e["to_server"]["dropped_outage"].as_u64().unwrap() > 0, "{e}");
    // The stall: no data from (at most one look, 100 ms, before) the outage until TCP retransmitted
    // after it, so at least the outage less that look; it begins within 0.3 s of the outage (the two
    // ends' clocks differ by the path's one-way delay and the look).
    let stalls = r["directions"][0]["stalls"].as_array().unwrap();
    let covers = |s: &&Value| {
        let (from, len) = (s["from_s"].as_f64().unwrap(), s["length_s"].as_f64().unwrap());
        len >= 0.9 && (from - at).abs() <= 0.3
    };
    assert!(
        stalls.iter().any(|s| covers(&s)),
        "outage at {at} s, stalls {stalls:?}"
    );
    // The intervals show it too: at least one whole interval inside the outage carried nothing.
    let empty = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["bytes"] == 0)
        .count();
    assert!(empty >= 1, "{}", r["intervals"]);
}

#[test]
fn a_udp_test_through_an_outage_puts_the_lost_datagrams_on_the_path_in_that_window() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "200M"]);
    w.serve_in_b();
    let (code, r, _) = run_through_outage(&w, &["-u", "-b", "20M", "-t", "3", "-i", "0.5"], "800ms");
    assert_eq!(code, 0, "loss is what UDP measures: {r}");
    let dropped = r["emulator"]["to_server"]["dropped_outage"].as_u64().unwrap();
    let u = &r["directions"][0]["summary"]["udp"];
    let lost = u["datagrams_lost"].as_u64().unwrap();
    // 20 Mbit/s of 1448-byte datagrams is about 1,700/s: 0.8 s down drops hundreds.
    assert!(dropped > 500, "{}", r["emulator"]);
    assert!(lost >= dropped, "lost {lost}, the emulator dropped {dropped}");
    // In that window: the intervals that overlap the outage hold nearly all of the loss.
    let at = r["emulator"]["changes"][0]["at_s"].as_f64().unwrap();
    let in_window: u64 = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["end_s"].as_f64().unwrap() > at - 0.2 && i["start_s"].as_f64().unwrap() < at + 1.0)
        .flat_map(|i| i["streams"].as_array().unwrap().iter())
        .filter_map(|s| s["datagrams_lost"].as_u64())
        .sum();
    assert!(
        in_window * 10 >= lost * 9,
        "{in_window} of {lost} lost in the outage's intervals"
    );
    // Nothing arrived for at least the outage less one look (100 ms).
    let stalls = r["directions"][0]["stalls"].as_array().unwrap();
    assert!(
        stalls.iter().any(|s| s["length_s"].as_f64().unwrap() >= 0.7),
        "{stalls:?}"
    );
}

#[test]
fn an_rtt_and_rate_step_show_in_the_interval_series_where_they_happened() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "200M"]);
    w.serve_in_b();
    let before = w.status()["a_to_b"]["bytes_forwarded"].as_u64().unwrap_or(0);
    let (code, r, applied) = std::thread::scope(|s| {
        let run = s.spawn(|| w.run_from_a(&["-t", "4", "-i", "0.5", "-C", "cubic"]));
        // The step comes once 40 MB have crossed: at most 200 Mbit/s, so at least 1.6 s into the
        // test, leaving whole intervals of the first path before it.
        assert!(wait_until(Duration::from_secs(20), || {
            w.status()["a_to_b"]["bytes_forwarded"].as_u64().unwrap_or(0) > before + 40_000_000
        }));
        let o = change(&w, &["--rtt", "80ms", "--rate", "50M", "--json"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let (code, r) = run.join().unwrap();
        (code, r, serde_json::from_str::<Value>(&o.stdout).unwrap())
    });
    assert_eq!(code, 0, "{r}");
    assert_eq!(applied["change"], "rtt=80ms rate=50M");
    let at = r["emulator"]["changes"][0]["at_s"].as_f64().unwrap();
    // Intervals with an RTT sample: the last, after the sender stopped while the slower path still
    // drained its queue to the receiver, has none.
    let series: Vec<(f64, f64, f64)> = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["end_s"].as_f64().unwrap() - i["start_s"].as_f64().unwrap() > 0.4)
        .filter_map(|i| {
            let rtt_ms = i["streams"][0]["rtt_us"].as_f64().filter(|&us| us > 0.0)? / 1e3;
            Some((
                i["start_s"].as_f64().unwrap(),
                i["throughput_bps"].as_f64().unwrap() / 1e6,
                rtt_ms,
            ))
        })
        .collect();
    // Before the step (one interval of margin either side): the first path's figures; a second
    // after it: the new RTT (80 ms plus the queue that builds at the slower rate) and the new rate.
    let early: Vec<_> = series
        .iter()
        .filter(|x| x.0 + 0.5 <= at - 0.5 && x.0 >= 0.5)
        .collect();
    let late: Vec<_> = series.iter().filter(|x| x.0 >= at + 1.0).collect();
    assert!(
        !early.is_empty() && !late.is_empty(),
        "step at {at} s: {series:?}"
    );
    assert!(
        early.iter().all(|x| x.2 < 60.0 && x.1 > 100.0),
        "before {at} s: {series:?}"
    );
    assert!(
        late.iter().all(|x| x.2 >= 75.0 && x.1 < 60.0),
        "after {at} s: {series:?}"
    );
}

#[test]
fn an_outage_longer_than_the_idle_limit_ends_both_ends_naming_the_silent_connections() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "200M"]);
    // The server keeps its default limit (30 s): the client's, sent with the test, is shorter.
    let log = w.serve_in_b_with(&[]);
    let before = w.status()["a_to_b"]["packets_in"].as_u64().unwrap_or(0);
    let (o, gave_up_after) = std::thread::scope(|s| {
        let run = s.spawn(|| {
            let o = w.in_a(
                &[
                    "run",
                    "198.18.0.2",
                    "-t",
                    "30",
                    "--idle-timeout",
                    "1s",
                    "--no-save",
                ],
                Duration::from_secs(60),
            );
            (o, std::time::Instant::now())
        });
        assert!(wait_until(Duration::from_secs(20), || {
            w.status()["a_to_b"]["packets_in"].as_u64().unwrap_or(0) > before + 500
        }));
        let o = change(&w, &["--down", "60s"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let down_at = std::time::Instant::now();
        let (o, ended) = run.join().unwrap();
        (o, ended - down_at)
    });
    // Nothing moves from the outage on: the data streams give up after the idle limit (1 s), then
    // the results are waited for the idle limit and the control timeout (10 s) more. Margin: 3 s
    // for the sender's buffer to stop taking writes and for a busy machine.
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(gave_up_after < Duration::from_secs(14), "{gave_up_after:?}");
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("no progress for 1s on the data connections (stream 0: ")
            && o.stderr
                .contains("then no answer on the control connection for 11s"),
        "{}",
        o.stderr
    );
    // The server gave up too, within the same bound, and frees the slot: the next test runs once
    // the path is back.
    let line = log
        .recv_timeout(Duration::from_secs(5))
        .expect("the server's log line");
    assert!(line.contains("FAILED"), "{line}");
    assert_eq!(change(&w, &["--up"]).code, 0);
    let r = w.run_ok(&["-n", "1M"]);
    assert_eq!(r["summary"]["bytes_received"], 1024 * 1024);
}

/// Runs `args` from host A, taking part of the path down (`wan change --down 60s` with `scope`, such
/// as `--proto tcp` or `--ports 40000`) once data flows: the outcome and how long after the outage
/// began the run ended; the path is brought back.
fn run_while_part_is_down(w: &Wan, args: &[&str], scope: &[&str]) -> (common::Outcome, Duration) {
    let before = w.status()["a_to_b"]["packets_in"].as_u64().unwrap_or(0);
    let out = std::thread::scope(|s| {
        let run = s.spawn(|| {
            let o = w.in_a(args, Duration::from_secs(60));
            (o, std::time::Instant::now())
        });
        assert!(wait_until(Duration::from_secs(20), || {
            w.status()["a_to_b"]["packets_in"].as_u64().unwrap_or(0) > before + 300
        }));
        let mut words = vec!["--down", "60s"];
        words.extend_from_slice(scope);
        let o = change(w, &words);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let down_at = std::time::Instant::now();
        let (o, ended) = run.join().unwrap();
        (o, ended - down_at)
    });
    assert_eq!(change(w, &["--up"]).code, 0);
    out
}

/// The control connection lost while the data flowed: the data ended on time, then the results
/// never came (waited 1 + 10 s; margin 3 s), and the server says the client sent none.
fn control_lost((o, after): (common::Outcome, Duration), log: &std::sync::mpsc::Receiver<String>) {
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the data streams ended, but no answer came on the control connection for 11s"),
        "{}",
        o.stderr
    );
    assert!(after < Duration::from_secs(14), "{after:?}");
    let line = log
        .recv_timeout(Duration::from_secs(10))
        .expect("the server's log line");
    assert!(line.contains("FAILED: the client sent no results"), "{line}");
}

#[test]
fn control_lost_while_data_flows_and_data_lost_while_control_answers_are_told_apart() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "200M"]);
    let log = w.serve_in_b_with(&["--idle-timeout", "1s"]);
    let udp = |t: &'static str| {
        vec![
            "run",
            "198.18.0.2",
            "-u",
            "-b",
            "20M",
            "-t",
            t,
            "--idle-timeout",
            "1s",
            "--no-save",
        ]
    };
    // The TCP control connection down, the UDP data flowing.
    control_lost(run_while_part_is_down(&w, &udp("2"), &["--proto", "tcp"]), &log);
    // The UDP data down, the control connection answering: the server's receiver gives up after
    // its idle limit, the client's sender ends at the test's time (3 s), and the server says why
    // through the control connection with its results, with no wait (margin 3 s).
    let (o, after) = run_while_part_is_down(&w, &udp("3"), &["--proto", "udp"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("stream 0: received nothing for 1s"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("control connection"), "{}", o.stderr);
    assert!(after < Duration::from_secs(6), "{after:?}");
    let line = log
        .recv_timeout(Duration::from_secs(10))
        .expect("the server's log line");
    assert!(
        line.contains("FAILED: stream 0: received nothing for 1s"),
        "{line}"
    );
}

#[test]
fn over_tcp_too_the_control_and_the_data_connections_failing_are_told_apart() {
    let Some(_lock) = root() else { return };
    let mut w = Wan::up(&["--rtt", "20ms", "--rate", "200M"]);
    let log = w.serve_in_b_with(&["--idle-timeout", "1s"]);
    // The data stream bound to a known port (a port of its own per run: the last one's may be in
    // TIME_WAIT towards the same server port), the control connection on an ephemeral one.
    let tcp = |t: &'static str, cport: &'static str| {
        vec![
            "run",
            "198.18.0.2",
            "-b",
            "20M",
            "-t",
            t,
            "--cport",
            cport,
            "--idle-timeout",
            "1s",
            "--no-save",
        ]
    };
    // Every packet down but the data stream's.
    let lost = run_while_part_is_down(&w, &tcp("2", "40000"), &["--except-ports", "40000"]);
    control_lost(lost, &log);
    // The data stream's packets down, the control connection answering: both ends' streams give up
    // after their idle limit and say so through the control connection, with no further wait (the
    // test's 3 s, then 1 s; margin 3 s).
    let (o, after) = run_while_part_is_down(&w, &tcp("3", "40100"), &["--ports", "40100"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("stream 0: "), "{}", o.stderr);
    assert!(o.stderr.contains(" for 1s"), "{}", o.stderr);
    assert!(!o.stderr.contains("control connection"), "{}", o.stderr);
    assert!(after < Duration::from_secs(7), "{after:?}");
    let line = log
        .recv_timeout(Duration::from_secs(10))
        .expect("the server's log line");
    assert!(line.contains("FAILED: stream 0: "), "{line}");
}
