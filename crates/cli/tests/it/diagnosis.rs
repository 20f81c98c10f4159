//! What held the rate back, on limits built by construction: bench/diagnosis/matrix's CI-sized
//! scenarios (a full path each way and with four Reno streams, a window asked too small, the
//! sender's tcp_wmem and the receiver's tcp_rmem maxima lowered in the emulator's namespaces, a pace,
//! a server's --max-rate, random loss, a cgroup CPU quota and a busy process on the client's CPU),
//! each run through landspeed and its verdict checked: every kind said must be one of the scenario's
//! right kinds ("unknown" fails as missing). The whole matrix, with the scenarios the verdict still
//! misses, runs by hand (docs/diagnosis.md). As root, alone on the machine (the emulator's forwarder
//! and the CPU scenarios need both CPUs): about 80 s. The physical margin: a scenario whose verdict
//! is not right is run once more (the emulator's forwarder shares the 2 CPUs with both hosts, and
//! one noisy run must not fail CI), and both attempts are printed; a rule that is wrong fails twice.

use crate::common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[test]
fn every_limit_built_on_purpose_is_named_right() {
    let _alone = common::alone();
    let Some(_lock) = common::wan::root() else { return };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/diagnosis/matrix");
    let record = std::env::temp_dir().join(format!("landspeed-diagnosis-{}.json", std::process::id()));
    let child = Command::new(&script)
        .args(["--ci", "--retries", "1", "--landspeed", common::bin(), "--json"])
        .arg(&record)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run bench/diagnosis/matrix");
    let o = common::wait_output(child, Duration::from_secs(400)).expect("the matrix ends");
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("{table}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{table}");
    let rows: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let _ = std::fs::remove_file(&record);
    assert!(rows.len() >= 10, "{table}");
    let not_right: Vec<&Value> = rows.iter().filter(|r| r["outcome"] != "right").collect();
    assert!(not_right.is_empty(), "not right: {not_right:#?}\n{table}");
}
