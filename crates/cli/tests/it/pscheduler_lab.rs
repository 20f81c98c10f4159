//! pScheduler's own daemons run landspeed's tool: two pScheduler hosts on this machine
//! (contrib/pscheduler/lab/hosts: network, mount and UTS namespaces each, with its PostgreSQL
//! cluster, Apache serving pScheduler's API and pScheduler's four daemons) and a throughput task
//! from one to the other through pScheduler's own CLI and REST API (contrib/pscheduler/lab/tasks):
//! one landspeed task, one of pScheduler's iperf3 tool with the drop-in as its iperf3, a limits.conf
//! refusing a rate and a duration, and the destination's daemons restarted mid-run. pScheduler is
//! built from its source with perfSONAR's packaging and installed by .ci/run; the rest of the lab's
//! tasks (iperf3 3.21, archivers, repeating runs, more failures) run by hand, docs/pscheduler.md.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn lab(script: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib/pscheduler/lab")
        .join(script)
}

/// The two hosts, up until dropped (then torn down, also when the test fails).
struct Hosts;

impl Hosts {
    fn up() -> Hosts {
        let o = Command::new(lab("hosts"))
            .arg("up")
            .env("PSLAB_LANDSPEED", common::bin())
            .output()
            .expect("run the lab's hosts script");
        let hosts = Hosts;
        assert!(
            o.status.success(),
            "the two pScheduler hosts did not come up: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        hosts
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = Command::new(lab("hosts")).arg("down").output();
    }
}

/// The lab's tasks script on the given cases (its table printed): its JSON record.
fn tasks(cases: &[&str]) -> Value {
    let only = cases.join("|");
    common::script_record(&lab("tasks"), &["--only", &only], Duration::from_secs(480)).0
}

const LANDSPEED: &str = "landspeed TCP";
const IPERF3_TOOL: &str = "iperf3 tool, drop-in, TCP";
const LIMITS: &str = "limits on ps-b refuse a rate and a duration";
const RESTART: &str = "pScheduler restarted on ps-b while a run runs, landspeed";

#[test]
fn landspeed_and_the_drop_in_run_under_pschedulers_own_daemons_its_limits_and_restarts() {
    let installed = Path::new("/usr/lib/pscheduler/daemons/scheduler").exists()
        && Path::new("/usr/lib/pscheduler/classes/tool/landspeed/run").exists();
    if !installed {
        common::missing::<()>(
            "pScheduler and landspeed's tool are not installed (.ci/run builds pScheduler from its \
             source with contrib/pscheduler/lab/build-pscheduler and installs both)",
        );
        return;
    }
    // Two PostgreSQL clusters, two Apaches, eight daemons and a full-speed test: the machine alone.
    let _alone = common::alone();
    let _hosts = Hosts::up();
    let v = tasks(&[LANDSPEED, IPERF3_TOOL, LIMITS, RESTART]);
    landspeed_task(&v[LANDSPEED]["detail"]);
    drop_in_task(&v[IPERF3_TOOL]["detail"]);
    limits(&v[LIMITS]["detail"]);
    restarted_run(&v[RESTART]["detail"]);
}

/// ps-b's limits.conf: the 2G and the 60 s task refused at submission in pScheduler's words (a task
/// within the limits runs like LANDSPEED's; its row is in the by-hand table).
fn limits(detail: &Value) {
    let said = |k: &str| detail[k]["refused"].as_str().unwrap_or_default().to_string();
    assert!(
        said("rate 2G").contains("bandwidth over 500M is not allowed here"),
        "{detail}"
    );
    assert!(
        said("60 s").contains("only 5 or 10 s throughput tests here"),
        "{detail}"
    );
}

/// The task's first run: by `tool`, finished, succeeded, and faster than 100 Mbit/s.
fn finished_run<'a>(detail: &'a Value, tool: &str) -> &'a Value {
    assert_eq!(detail["tool"], tool, "{detail}");
    let run = &detail["runs"][0];
    assert_eq!(run["state"], "finished", "{run}");
    let merged = &run["result-merged"];
    assert_eq!(merged["succeeded"], true, "{merged}");
    assert!(
        merged["summary"]["summary"]["throughput-bits"].as_f64().unwrap() > 1e8,
        "{merged}"
    );
    run
}

fn landspeed_task(detail: &Value) {
    let run = finished_run(detail, "landspeed");
    let client = run["result-full"][0]["diags"].as_str().unwrap_or_default();
    assert!(client.contains("landspeed verdict: trusted"), "{client}");
    let server = run["result-full"][1]["diags"].as_str().unwrap_or_default();
    assert!(server.contains("landspeed serve --once"), "{server}");
    // As `pscheduler result` prints it: the throughput test's text from landspeed's result.
    let printed = detail["printed"][0].as_str().unwrap_or_default();
    assert!(printed.contains("on ps-a and ps-b with landspeed"), "{printed}");
    assert!(printed.contains("Receiver Throughput"), "{printed}");
}

/// pScheduler's own iperf3 tool (RSA-authenticated, as 5.2.5 runs it) with the drop-in as its iperf3.
fn drop_in_task(detail: &Value) {
    let run = finished_run(detail, "iperf3");
    let client = run["result-full"][0]["diags"].as_str().unwrap_or_default();
    assert!(client.contains("--rsa-public-key-path"), "{client}");
    assert!(client.contains("/iperf3 "), "{client}");
}

/// ps-b's daemons restarted mid-run: the run fails with landspeed's reason, no tool is left over.
fn restarted_run(detail: &Value) {
    let during = detail["during"].as_array();
    assert!(during.is_some_and(|d| !d.is_empty()), "no tool ran: {detail}");
    let run = &detail["runs"][0];
    assert_eq!(run["state"], "failed", "{run}");
    let errors = run.to_string();
    assert!(errors.contains("the server went away"), "{run}");
    let gone = detail["gone_s"].as_f64();
    assert!(gone.is_some_and(|s| s < 10.0), "tools left behind: {detail}");
}
