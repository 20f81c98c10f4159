//! The archive end to end: `run` saves (or not, with --no-save), `history` filters and exports,
//! `show` prints a stored run again, and the test suite itself never writes into the user's archive.

mod common;

use common::{landspeed, ServerProc};
use std::time::Duration;

fn db(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("landspeed-cli-archive-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.join("a.db").display().to_string()
}

#[test]
fn runs_are_saved_listed_exported_and_shown() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let file = db("flow");
    for extra in [
        &["--tag", "campaign-a"][..],
        &["--tag", "campaign-a", "-P", "2"][..],
        &["--no-save"][..],
    ] {
        let mut args = vec!["run", "127.0.0.1", "-p", &p, "-n", "2M", "--db", &file];
        args.extend_from_slice(extra);
        let o = landspeed(&args, Duration::from_secs(30));
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(
            o.stderr.contains("saved as run"),
            !extra.contains(&"--no-save"),
            "{}",
            o.stderr
        );
    }
    let o = landspeed(&["history", "--db", &file, "--json"], Duration::from_secs(10));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rows: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "--no-save was not saved: {rows:?}");
    assert_eq!(rows[0]["streams"], 2, "newest first");
    assert_eq!(rows[0]["tag"], "campaign-a");
    let o = landspeed(
        &["history", "--db", &file, "--tag", "other"],
        Duration::from_secs(10),
    );
    assert!(o.stdout.contains("no runs"), "{}", o.stdout);
    let o = landspeed(
        &["history", "--db", &file, "--csv", "--since", "2000-01-01"],
        Duration::from_secs(10),
    );
    assert_eq!(o.stdout.lines().count(), 3, "{}", o.stdout);
    assert!(o.stdout.starts_with("id,started_utc,host"));
    let o = landspeed(
        &["history", "--db", &file, "--until", "2000-01-01", "--json"],
        Duration::from_secs(10),
    );
    assert_eq!(o.stdout.trim(), "[]");

    let id = rows[1]["id"].to_string();
    let o = landspeed(&["show", &id, "--db", &file, "--json"], Duration::from_secs(10));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(r["summary"]["bytes_received"], 2 << 20);
    let o = landspeed(&["show", &id, "--db", &file], Duration::from_secs(10));
    assert!(
        o.stdout.contains("Payload:"),
        "the text report again: {}",
        o.stdout
    );
    let o = landspeed(&["show", "999", "--db", &file], Duration::from_secs(10));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("no run 999"), "{}", o.stderr);
    let o = landspeed(
        &["history", "--db", &file, "--since", "soon"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2);
}

#[test]
fn tests_archive_into_target_not_the_users_archive() {
    let v = std::env::var("LANDSPEED_DB").expect("LANDSPEED_DB set by .cargo/config.toml");
    assert!(v.contains("target"), "{v}");
}
