//! `landspeed record` end to end: a real loopback run turned into a record entry whose metric is the
//! run's bytes over its time times the path's geodesic legs, whose rules are checked with evidence, and
//! whose Markdown and HTML documents contain every section; bad paths and legs are usage errors.

use crate::common;

use common::{landspeed, run_text, ServerProc};
use serde_json::Value;
use std::time::Duration;

#[test]
fn a_loopback_run_becomes_a_complete_record_document() {
    // A record needs both end systems described: the server shares its details with this keyless
    // client because it is told to (by default only keyed clients get them).
    let s = ServerProc::start("127.0.0.1", &["--share-host"]);
    let dir = std::env::temp_dir().join(format!("landspeed-cli-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("a.db").display().to_string();
    let o = run_text(
        s.port,
        &["-P", "2", "-t", "2", "--path", "--db", &db],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let path = "Sunnyvale, US > Kansas City, MO, US > Indianapolis, US > Chicago, US > Geneva, CH";
    let md = dir.join("lsr.md");
    let html = dir.join("lsr.html");
    let o = common::record(
        &db,
        path,
        "1s",
        &[
            "--leg-km",
            "4=7067",
            "--markdown",
            md.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let m = &v["metric"];
    let run = landspeed(&["show", "1", "--db", &db, "--json"], Duration::from_secs(10));
    let r: Value = serde_json::from_str(&run.stdout).unwrap();
    let bps =
        r["summary"]["bytes_received"].as_f64().unwrap() * 8.0 / r["summary"]["duration_s"].as_f64().unwrap();
    assert!((m["throughput_bps"].as_f64().unwrap() - bps).abs() < 1e-6 * bps);
    let km = v["path"]["total_km"].as_f64().unwrap();
    // The seed's legs: 2,403 + 727 + 263 + 7,067 km = 10,460 km, the geodesics within 1% of them.
    assert!((km - 10_460.0).abs() < 0.01 * 10_460.0, "{km}");
    assert_eq!(v["path"]["legs"][3]["km"], 7067.0);
    let bm = m["bit_meters_per_s"].as_f64().unwrap();
    assert!((bm - bps * km * 1000.0).abs() < 1e-6 * bm);
    assert_eq!(m["family"], "IPv4");
    assert_eq!(m["streams_class"], "multiple-stream");
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    assert!(checks
        .iter()
        .any(|c| c["rule"].as_str().unwrap().contains("rule 6")));
    let doc = std::fs::read_to_string(&md).unwrap();
    for section in [
        "# Land Speed Record submission: IPv4, multiple-stream",
        "## Rules",
        "## Per-stream results",
        "**total**",
        "## Command lines",
        "landspeed serve",
        "landspeed run 127.0.0.1",
        "## End systems",
        "### Client",
        "### Server",
        "operating system",
        "net.ipv4.tcp_congestion_control",
        "net.core.default_qdisc",
        "network interface",
        "## Path",
        "Route (",
        "RTT (UDP echo",
        "## Distance",
        "Kansas City",
        "GeoNames",
    ] {
        assert!(doc.contains(section), "missing {section:?} in\n{doc}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.starts_with("<!DOCTYPE html>") && page.contains("<table>") && page.contains("<h2>Rules</h2>")
    );
    // A 10-minute minimum fails the 2 s run, and the exit code says so.
    let o = common::record(&db, path, "10m", &[]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.contains("[FAIL] minimum duration 600 s"), "{}", o.stdout);
    for (bad, says) in [
        (&["--path", "Geneva, CH"][..], "at least two points"),
        (&["--path", "Geneva, CH > Qwxyzville"][..], "no city 'Qwxyzville'"),
        (
            &["--path", "Geneva, CH > Chicago, US", "--leg-km", "2=100"][..],
            "leg 2 does not exist",
        ),
    ] {
        let mut a = vec!["record", "--run", "1", "--db", &db];
        a.extend_from_slice(bad);
        let o = landspeed(&a, Duration::from_secs(30));
        assert_eq!(o.code, 2, "{bad:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{bad:?}: {}", o.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
