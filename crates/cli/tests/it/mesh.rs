//! Many hosts, as root, with network namespaces as the hosts (common::lan): a third-party test driven
//! from a third host, a 4-host mesh plan whose tests start together and whose report adds up, and a host
//! killed while a plan runs. Without root they skip, unless CI is set, where they fail.

use crate::common;

use common::lan::Lan;
use serde_json::Value;
use std::time::Duration;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

#[test]
fn a_third_party_test_runs_between_two_hosts_driven_from_a_third() {
    let Some(_root) = common::wan::root() else { return };
    let mut lan = Lan::up(3);
    let key = lan.key();
    lan.serve(0, &["--auth-keys", &key, "--allow-control"]);
    lan.serve(1, &[]);
    let auth = format!("ops:{key}");
    let (h0, h1) = (Lan::addr(0), Lan::addr(1));

    let o = lan.landspeed(
        2,
        &[
            "run",
            &h1,
            "--from",
            &h0,
            "--auth",
            &auth,
            "-t",
            "2",
            "-P",
            "2",
            "--json",
            "--no-save",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r = json(&o.stdout);
    // The data went from host 0 to host 1; the controller on host 2 only ordered it.
    assert!(
        r["config"]["local_address"].as_str().unwrap().starts_with(&h0),
        "{}",
        r["config"]
    );
    assert!(r["config"]["remote_address"].as_str().unwrap().starts_with(&h1));
    let s = &r["summary"];
    assert!(n(&s["bytes_received"]) > 0);
    assert_eq!(s["bytes_sent"], s["bytes_received"]);
    assert_eq!(s["bytes_verified"], s["bytes_received"]);

    // Without the key: refused, nothing runs.
    let o = lan.landspeed(
        2,
        &["run", &h1, "--from", &h0, "-t", "1", "--no-save"],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("authentication"), "{}", o.stderr);
    // A server without --allow-control takes no orders, whatever the key.
    let o = lan.landspeed(
        2,
        &["run", &h0, "--from", &h1, "--auth", &auth, "-t", "1", "--no-save"],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("does not take third-party orders"),
        "{}",
        o.stderr
    );
}

fn write_plan(lan: &Lan, text: &str) -> String {
    let p = lan.dir.join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn a_four_host_mesh_starts_together_and_its_report_adds_up() {
    // The start spread is a bound on time (15 ms): the test takes the machine alone (CI once saw
    // 49 ms with other tests' servers busy beside it).
    let _alone = common::alone();
    let Some(_root) = common::wan::root() else { return };
    let mut lan = Lan::up(5);
    let key = lan.key();
    for i in 0..4 {
        lan.serve(
            i,
            &[
                "--auth-keys",
                &key,
                "--allow-control",
                "--control-auth",
                &format!("ops:{key}"),
            ],
        );
    }
    // Paced TCP so that the 2-CPU machine is not the bottleneck of five tests at once.
    let plan = write_plan(
        &lan,
        &format!(
            r#"name = "four hosts"
[hosts]
a = "{}"
b = "{}"
c = "{}"
d = "{}:5201"
[defaults]
time = "3s"
rate = "200M"
[[tests]]
from = "a"
to = ["b", "c", "d"]
[[tests]]
from = "b"
to = "c"
streams = 2
[[tests]]
from = ["c", "d"]
to = "a"
"#,
            Lan::addr(0),
            Lan::addr(1),
            Lan::addr(2),
            Lan::addr(3)
        ),
    );
    let auth = format!("ops:{key}");
    // Started together: every test's data began within 15 ms of the agreed instant. Up to two tries
    // more when one is later than that: six tests starting at once on this 2-CPU machine were once
    // 16.7 ms apart with nothing else running (a scheduling stall says nothing of the agreed start);
    // a mesh that does not start together is late in all three. Each try archives apart.
    let mut tries = vec![];
    let (r, db) = loop {
        let db = lan
            .dir
            .join(format!("archive-{}.db", tries.len()))
            .display()
            .to_string();
        let o = lan.landspeed(
            4,
            &["mesh", &plan, "--auth", &auth, "--json", "--db", &db],
            Duration::from_secs(60),
        );
        assert_eq!(o.code, 0, "{}\n{}", o.stderr, o.stdout);
        let r = json(&o.stdout);
        assert_eq!(r["schema"], "landspeed/mesh/1");
        let tests = r["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 6);
        assert!(tests.iter().all(|t| t["status"] == "ok"), "{tests:?}");
        let spread = r["aggregate"]["start_spread_ms"].as_f64().unwrap();
        let worst = tests
            .iter()
            .map(|t| t["start_offset_ms"].as_f64().unwrap().abs())
            .fold(0.0, f64::max);
        eprintln!("start spread {spread:.2} ms, largest offset {worst:.2} ms");
        tries.push((spread, worst));
        if spread < 15.0 && worst < 15.0 {
            break (r, db);
        }
        assert!(
            tries.len() < 3,
            "started apart in every try (spread, largest offset): {tries:?}"
        );
    };
    let tests = r["tests"].as_array().unwrap();
    // Clock offsets were measured for every host (same kernel clock here: near zero).
    for h in r["hosts"].as_array().unwrap() {
        assert!(h["error"].is_null(), "{h}");
        assert!(h["clock"]["offset_ns"].as_i64().unwrap().abs() < 5_000_000, "{h}");
    }
    // Per host in and out add up to the tests' bytes, and so do the common intervals.
    let total: u64 = tests.iter().map(|t| n(&t["bytes_received"])).sum();
    assert!(total > 0);
    assert_eq!(n(&r["aggregate"]["bytes_received"]), total);
    let hosts = r["per_host"].as_array().unwrap();
    let out: u64 = hosts.iter().map(|h| n(&h["bytes_out"])).sum();
    let inn: u64 = hosts.iter().map(|h| n(&h["bytes_in"])).sum();
    assert_eq!((out, inn), (total, total));
    for h in hosts {
        let name = h["name"].as_str().unwrap();
        let sent: u64 = tests
            .iter()
            .filter(|t| t["from"] == name)
            .map(|t| n(&t["bytes_received"]))
            .sum();
        let got: u64 = tests
            .iter()
            .filter(|t| t["to"] == name)
            .map(|t| n(&t["bytes_received"]))
            .sum();
        assert_eq!((n(&h["bytes_out"]), n(&h["bytes_in"])), (sent, got), "{h}");
    }
    let iv: u64 = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| n(&i["bytes"]))
        .sum();
    assert_eq!(iv, total);
    // Paced at 200 Mbit/s each: a's three tests together send about 600 Mbit/s.
    let a_out = hosts.iter().find(|h| h["name"] == "a").unwrap()["out_bps"]
        .as_f64()
        .unwrap();
    assert!((a_out / 600e6 - 1.0).abs() < 0.2, "a sent at {a_out}");
    // Archived as one campaign: every test's run is in the archive under its id.
    assert!(r["campaign_id"].as_i64().is_some());
    for t in tests {
        let id = t["run_id"].as_i64().unwrap().to_string();
        let s = lan.landspeed(4, &["show", &id, "--json", "--db", &db], Duration::from_secs(10));
        assert_eq!(s.code, 0, "{}", s.stderr);
        assert_eq!(json(&s.stdout)["summary"]["bytes_received"], t["bytes_received"]);
    }
}

#[test]
fn a_host_killed_mid_plan_is_reported_and_the_rest_complete() {
    let Some(_root) = common::wan::root() else { return };
    let mut lan = Lan::up(4);
    let key = lan.key();
    for i in 0..3 {
        lan.serve(
            i,
            &[
                "--auth-keys",
                &key,
                "--allow-control",
                "--control-auth",
                &format!("ops:{key}"),
            ],
        );
    }
    let plan = write_plan(
        &lan,
        &format!(
            r#"name = "one host dies"
[hosts]
a = "{}"
b = "{}"
c = "{}"
[defaults]
time = "4s"
rate = "100M"
[[tests]]
from = "a"
to = ["b", "c"]
[[tests]]
from = "c"
to = "b"
"#,
            Lan::addr(0),
            Lan::addr(1),
            Lan::addr(2)
        ),
    );
    let auth = format!("ops:{key}");
    let child = lan.spawn(3, &["mesh", &plan, "--auth", &auth, "--json", "--no-save"]);
    // Once c holds its tests' connections (its order from the controller, a's control and data
    // connections), it dies.
    assert!(
        common::wait_until(Duration::from_secs(20), || lan.established(2) >= 3),
        "host c never got its tests"
    );
    lan.kill(2);
    let out = common::wait_output(child, Duration::from_secs(60)).expect("mesh hung");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&stdout);
    let tests = r["tests"].as_array().unwrap();
    let by = |f: &str, t: &str| {
        tests
            .iter()
            .find(|x| x["from"] == f && x["to"] == t)
            .unwrap()
            .clone()
    };
    // The test that did not involve c completed in full.
    let ab = by("a", "b");
    assert_eq!(ab["status"], "ok", "{ab}");
    assert!(n(&ab["bytes_received"]) > 0);
    // Both tests that involved c are reported, with why.
    for t in [by("a", "c"), by("c", "b")] {
        assert_ne!(t["status"], "ok", "{t}");
        if t["status"] == "failed" {
            assert!(!t["error"].as_str().unwrap_or("").is_empty(), "{t}");
        }
    }
    assert_eq!(r["aggregate"]["tests_ok"], 1);
}

#[test]
fn a_test_one_after_another_that_failed_is_tried_once_more_at_the_end() {
    let Some(_root) = common::wan::root() else { return };
    let mut lan = Lan::up(4);
    let key = lan.key();
    let control = ["--auth-keys", &key, "--allow-control", "--control-auth"];
    let ops = format!("ops:{key}");
    // a and c take orders; b's server is not up yet, so a -> b fails the first time.
    for i in [0, 2] {
        let mut args = control.to_vec();
        args.push(&ops);
        lan.serve(i, &args);
    }
    let plan = write_plan(
        &lan,
        &format!(
            r#"name = "b comes back"
concurrent = false
[hosts]
a = "{}"
b = "{}"
c = "{}"
[defaults]
time = "2s"
rate = "50M"
[[tests]]
from = "a"
to = "b"
[[tests]]
from = "c"
to = "a"
"#,
            Lan::addr(0),
            Lan::addr(1),
            Lan::addr(2)
        ),
    );
    let mut child = lan.spawn(3, &["mesh", &plan, "--auth", &ops, "--json", "--no-save"]);
    // Once a -> b has failed, b's server starts: c -> a (2 s) runs meanwhile, then a -> b again.
    let stderr = child.stderr.take().unwrap();
    let lines = common::wait_for_line(stderr, "test 0 a -> b: FAILED");
    lan.serve(1, &[]);
    let rest = std::thread::spawn(move || {
        let (mut lines, mut s) = (lines, String::new());
        let _ = std::io::Read::read_to_string(&mut lines, &mut s);
        s
    });
    let out = common::wait_output(child, Duration::from_secs(60)).expect("mesh hung");
    let stderr = rest.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("every test has run; trying the 1 that failed once more"),
        "{stderr}"
    );
    let r = json(&String::from_utf8_lossy(&out.stdout));
    let tests = r["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2, "each test reported once");
    assert!(tests.iter().all(|t| t["status"] == "ok"), "{tests:?}");
    assert_eq!(r["aggregate"]["tests_ok"], 2);
}

/// Four hosts that route multicast out of their one interface, each serving with control; host 4
/// the controller.
fn multicast_lan() -> (Lan, String) {
    let mut lan = Lan::up(5);
    let key = lan.key();
    for i in 0..4 {
        common::ip(&["-n", &lan.ns[i], "route", "add", "224.0.0.0/4", "dev", "eth0"]);
        lan.serve(i, &["--auth-keys", &key, "--allow-control"]);
    }
    (lan, key)
}

#[test]
fn a_multicast_entry_sends_from_one_host_and_each_receiver_reports_its_own_loss() {
    let _alone = common::alone();
    let Some(_root) = common::wan::root() else { return };
    let (lan, key) = multicast_lan();
    // Host d's rule drops exactly every tenth datagram to port 5001.
    crate::multicast::drop_every_tenth(&lan, 3);
    let plan = write_plan(
        &lan,
        &format!(
            r#"name = "one group"
[hosts]
a = "{}"
b = "{}"
c = "{}"
d = "{}"
[[tests]]
multicast = "239.1.1.7"
from = "a"
to = ["b", "c", "d"]
time = "2s"
rate = "4M"
length = "1200"
"#,
            Lan::addr(0),
            Lan::addr(1),
            Lan::addr(2),
            Lan::addr(3)
        ),
    );
    let db = lan.dir.join("archive.db").display().to_string();
    let auth = format!("ops:{key}");
    let o = lan.landspeed(
        4,
        &["mesh", &plan, "--auth", &auth, "--json", "--db", &db],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stderr, o.stdout);
    let r = json(&o.stdout);
    let tests = r["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 4, "{tests:?}");
    assert!(
        tests
            .iter()
            .all(|t| t["status"] == "ok" && t["transport"] == "mcast"),
        "{tests:?}"
    );
    assert_eq!(
        (tests[0]["from"].as_str(), tests[0]["to"].as_str()),
        (Some("a"), Some("239.1.1.7:5001"))
    );
    let sent = n(&tests[0]["bytes_sent"]) / 1200;
    assert!(sent > 700, "{tests:?}");
    for (t, lost) in tests[1..].iter().zip([0, 0, sent.div_ceil(10)]) {
        assert_eq!(n(&t["bytes_received"]), (sent - lost) * 1200, "{t}");
        // Each receiver's data began near the agreed instant (its first datagram, its clock).
        assert!(t["start_offset_ms"].as_f64().unwrap().abs() < 100.0, "{t}");
        let id = t["run_id"].as_i64().unwrap().to_string();
        let run = json(
            &lan.landspeed(4, &["show", &id, "--json", "--db", &db], Duration::from_secs(10))
                .stdout,
        );
        let heard = &run["multicast"]["heard"];
        assert_eq!(
            (run["multicast"]["role"].as_str(), heard["verified"].as_bool()),
            (Some("receiver"), Some(true))
        );
        assert_eq!(n(&heard["datagrams_lost"]), lost, "{heard}");
    }
    // The sender's bytes out are what its receivers got.
    let a = r["per_host"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "a")
        .unwrap();
    let got: u64 = tests[1..].iter().map(|t| n(&t["bytes_received"])).sum();
    assert_eq!(n(&a["bytes_out"]), got);
}

#[test]
fn a_multicast_order_is_refused_by_name_when_it_cannot_run() {
    let _alone = common::alone();
    let Some(_root) = common::wan::root() else { return };
    let (lan, key) = multicast_lan();
    // A receiver that hears nothing of the test (its sender's host takes no part: b is not
    // serving with control) fails by name; the plan's other part fails on the sender's check.
    let plan = write_plan(
        &lan,
        &format!(
            "name = \"no sender\"\n[hosts]\na = \"{}\"\nb = \"{}:9\"\n[[tests]]\nmulticast = \"239.1.1.8\"\nfrom = \"b\"\nto = \"a\"\ntime = \"1s\"\n",
            Lan::addr(0),
            Lan::addr(1),
        ),
    );
    let auth = format!("ops:{key}");
    let o = lan.landspeed(
        4,
        &["mesh", &plan, "--auth", &auth, "--json", "--no-save"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 1, "{}\n{}", o.stderr, o.stdout);
    let r = json(&o.stdout);
    let tests = r["tests"].as_array().unwrap();
    assert!(
        tests[0]["error"]
            .as_str()
            .unwrap()
            .contains("host b failed its check"),
        "{tests:?}"
    );
    assert!(
        tests[1]["error"]
            .as_str()
            .unwrap()
            .contains("host b failed its check"),
        "{tests:?}"
    );
}
