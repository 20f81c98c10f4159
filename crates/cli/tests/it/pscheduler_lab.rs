//! pScheduler's own daemons run landspeed's tool: two pScheduler hosts on this machine
//! (contrib/pscheduler/lab/hosts: network, mount and UTS namespaces each, with its PostgreSQL
//! cluster, Apache serving pScheduler's API and pScheduler's four daemons) and a throughput task
//! from one to the other through pScheduler's own CLI and REST API (contrib/pscheduler/lab/tasks).
//! pScheduler is built from its source with perfSONAR's packaging and installed by .ci/run; the rest
//! of the lab's tasks (pScheduler's iperf3 tool against the drop-in and iperf3 3.21, archivers,
//! limits, failures) run by hand, docs/pscheduler.md.

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

#[test]
fn a_landspeed_task_runs_under_pschedulers_own_daemons_between_two_hosts() {
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
    let record = std::env::temp_dir().join(format!("landspeed-pslab-{}.json", std::process::id()));
    let child = Command::new(lab("tasks"))
        .args(["--only", "landspeed TCP", "--json"])
        .arg(&record)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the lab's tasks script");
    let o = common::wait_output(child, Duration::from_secs(240)).expect("the task ends");
    let table = String::from_utf8_lossy(&o.stdout);
    eprintln!("{table}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let _ = std::fs::remove_file(&record);
    let detail = &v["landspeed TCP"]["detail"];
    assert_eq!(detail["tool"], "landspeed", "{detail}");
    let run = &detail["runs"][0];
    assert_eq!(run["state"], "finished", "{run}");
    let merged = &run["result-merged"];
    assert_eq!(merged["succeeded"], true, "{merged}");
    assert!(
        merged["summary"]["summary"]["throughput-bits"].as_f64().unwrap() > 1e8,
        "{merged}"
    );
    let client = run["result-full"][0]["diags"].as_str().unwrap_or_default();
    assert!(client.contains("landspeed verdict: trusted"), "{client}");
    let server = run["result-full"][1]["diags"].as_str().unwrap_or_default();
    assert!(server.contains("landspeed serve --once"), "{server}");
}
