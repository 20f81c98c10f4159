//! The archive end to end: `run` saves (or not, with --no-save), `history` filters and exports,
//! `show` prints a stored run again, and the test suite itself never writes into the user's archive.

use crate::common;

use common::{landspeed, run_text, ServerProc};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// One test at a time uses the test PostgreSQL server here: one of them restarts it.
static POSTGRES: Mutex<()> = Mutex::new(());

pub(crate) fn db(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("landspeed-cli-archive-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.join("a.db").display().to_string()
}

/// Run `id` of the archive `file`, as `landspeed show --json` prints it.
pub(crate) fn archived(file: &str, id: u32) -> serde_json::Value {
    let o = landspeed(
        &["show", &id.to_string(), "--db", file, "--json"],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "show {id}: {}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout))
}

/// Stops a server with SIGTERM, as a service manager would, and waits for it to exit cleanly.
pub(crate) fn stop(s: &mut ServerProc) {
    common::signal(s.process(), 15);
    let status = s.exit(Duration::from_secs(30)).expect("the server did not stop");
    assert!(status.success(), "the server exited {status:?}");
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

/// `landspeed run ... | head -1`: once nobody reads stdout or stderr, the run still goes to its end,
/// is saved, and exits 0, as does the iperf 2 drop-in's (a panic on the first failed write used to cost the run and exit 101).
#[test]
fn a_run_whose_output_nobody_reads_is_still_saved() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let file = db("unread");
    for args in [
        vec!["run", "127.0.0.1", "-p", &p, "-n", "1M", "--db", &file],
        vec!["iperf2", "-c", "127.0.0.1", "-p", &p, "-n", "1M", "-i", "0.1"],
    ] {
        let child = Command::new(common::bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(common::pipe_nobody_reads())
            .stderr(common::pipe_nobody_reads())
            .spawn()
            .unwrap();
        let status = common::wait_exit(child, Duration::from_secs(30)).expect("it ended");
        assert_eq!(status.code(), Some(0), "{args:?}: {status:?}");
    }
    let o = landspeed(&["history", "--db", &file, "--json"], Duration::from_secs(10));
    let rows: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "run's run saved: {rows}");
}

#[test]
fn tests_archive_into_target_not_the_users_archive() {
    let v = std::env::var("LANDSPEED_DB").expect("LANDSPEED_DB set by .cargo/config.toml");
    assert!(v.contains("target"), "{v}");
}

/// A schema of its own on the test PostgreSQL server (LANDSPEED_TEST_POSTGRES, set by .ci/run), dropped
/// at the end; None (skip) without a server, unless CI is set.
struct PgScratch {
    base: String,
    schema: String,
}

impl PgScratch {
    fn new() -> Option<PgScratch> {
        let base = std::env::var("LANDSPEED_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://landspeed:landspeed@127.0.0.1/landspeed".into());
        let schema = format!("cli{}", std::process::id());
        match postgres::Client::connect(&base, postgres::NoTls) {
            Ok(mut c) => {
                c.batch_execute(&format!(
                    "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
                ))
                .unwrap();
                Some(PgScratch { base, schema })
            }
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI is set and PostgreSQL is not reachable: {e}"
                );
                eprintln!("skipping: no PostgreSQL server ({e})");
                None
            }
        }
    }

    fn url(&self) -> String {
        format!("{}?options=-csearch_path%3D{}", self.base, self.schema)
    }
}

impl Drop for PgScratch {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema));
        }
    }
}

#[test]
fn runs_go_to_a_shared_postgres_archive_and_come_back() {
    let _pg = common::take(&POSTGRES);
    let Some(pg) = PgScratch::new() else { return };
    let url = pg.url();
    let s = ServerProc::start("127.0.0.1", &[]);
    let o = run_text(
        s.port,
        &["-n", "4M", "--tag", "shared", "--db", &url],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("saved as run"), "{}", o.stderr);
    assert!(
        !o.stderr.contains("landspeed:landspeed@"),
        "password shown: {}",
        o.stderr
    );
    let o = landspeed(
        &["history", "--db", &url, "--tag", "shared", "--json"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rows: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    let id = rows[0]["id"].to_string();
    let o = landspeed(&["show", &id, "--db", &url, "--json"], Duration::from_secs(10));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(r["summary"]["bytes_received"], 4 * 1024 * 1024);
    // A server that is not there is an error that names it, without the password.
    let o = landspeed(
        &["history", "--db", "postgres://landspeed:secret@127.0.0.1:1/none"],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("postgres://landspeed@127.0.0.1:1/none"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("secret"), "{}", o.stderr);
}

/// Restarts every PostgreSQL cluster of this host (Debian's pg_ctlcluster, as root).
fn restart_postgres() -> bool {
    let Ok(out) = Command::new("pg_lsclusters").arg("-h").output() else {
        return false;
    };
    let list = String::from_utf8_lossy(&out.stdout).to_string();
    let clusters: Vec<Vec<&str>> = list.lines().map(|l| l.split_whitespace().collect()).collect();
    !clusters.is_empty()
        && clusters.iter().all(|c| {
            c.len() >= 2
                && Command::new("pg_ctlcluster")
                    .args([c[0], c[1], "restart"])
                    .status()
                    .is_ok_and(|s| s.success())
        })
}

#[test]
fn a_sweep_goes_on_through_a_postgresql_restart_and_stores_every_cell_once() {
    let _pg = common::take(&POSTGRES);
    let Some(pg) = PgScratch::new() else { return };
    let url = pg.url();
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let mut child = Command::new(common::bin())
        .args([
            "sweep",
            "127.0.0.1",
            "--windows",
            "64K,128K",
            "--streams",
            "1",
            "--repeat",
            "2",
            "-t",
            "0.3s",
            "--db",
            &url,
            "--json",
            "--",
            "-p",
            &p,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Restart the server once the first cell is stored (the sweep's own table says so).
    let err = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in err.lines().map_while(Result::ok) {
            if line.starts_with("  [") && line.contains(" run ") {
                let _ = tx.send(());
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("a first cell stored");
    let restarted = restart_postgres();
    let out = common::wait_output(child, Duration::from_secs(120)).expect("the sweep ends");
    let stderr = reader.join().unwrap();
    if !restarted {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and PostgreSQL cannot be restarted here"
        );
        eprintln!("skipping: cannot restart PostgreSQL (pg_ctlcluster as root)");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (r["status"].as_str(), r["summary"]["runs_done"].as_u64()),
        (Some("complete"), Some(4)),
        "{stderr}"
    );
    let h = landspeed(&["history", "--db", &url, "--json"], Duration::from_secs(20));
    let rows: serde_json::Value = serde_json::from_str(&h.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 4, "every cell once: {rows}");
}

/// A small tmpfs, unmounted (and its directory removed) when dropped, also when the test fails.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(name: &str, size: &str) -> Option<SmallDisk> {
        let dir = std::env::temp_dir().join(format!("landspeed-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "mounting a tmpfs needs root, and CI is set"
            );
            eprintln!("skipping: cannot mount a tmpfs (not root)");
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(SmallDisk(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_full_disk_fails_the_save_not_the_result_and_leaves_the_archive_whole() {
    let Some(disk) = SmallDisk::mount("fulldisk", "1m") else {
        return;
    };
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let file = disk.0.join("a.db").display().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "127.0.0.1", "-p", &p, "-n", "2M", "--db", &file];
        args.extend_from_slice(extra);
        landspeed(&args, Duration::from_secs(30))
    };
    let o = run(&[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Fill what is left of the disk.
    let filler = disk.0.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![7u8; 64 * 1024];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    drop(f);
    let o = run(&["--json"]);
    assert_eq!(
        o.code, 1,
        "a run that is not in the archive exits 1: {}",
        o.stderr
    );
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("the result is still printed");
    assert_eq!(r["summary"]["bytes_received"], 2 * 1024 * 1024);
    let line = o
        .stderr
        .lines()
        .find(|l| l.contains("not archived"))
        .unwrap_or("");
    assert!(line.contains(&file) && line.contains("full"), "{}", o.stderr);
    // Room again: the archive holds the first run, whole.
    std::fs::remove_file(&filler).unwrap();
    let o = landspeed(&["history", "--db", &file, "--json"], Duration::from_secs(10));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rows: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    let check = std::process::Command::new("python3")
        .args(["-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('pragma integrity_check').fetchone()[0])"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "ok");
    assert_eq!(run(&[]).code, 0, "and it takes runs again");
}
