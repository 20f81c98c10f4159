//! `landspeed sweep` and `landspeed report` end to end: a loopback sweep archived cell by cell with its
//! summary, plots and HTML page; a sweep killed with SIGKILL mid-way and resumed, ending with every cell
//! exactly once; bad grids and forbidden run options refused; and (root, CI) a sweep across the WAN
//! emulator at 50 ms whose window-limited fit is a straight line implying the emulated RTT.

use crate::common;

use common::wan::{root, serial, Wan};
use common::{landspeed, signal, wait_exit, ServerProc};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("landspeed-cli-sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Lines of the live table for a run that was saved: `  [  3/12]  64.0 KiB ×  1 send #1 ... run 7`.
fn saved_lines(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.starts_with("  [") && l.contains(" run ") && !l.contains("FAILED"))
        .count()
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn a_sweep_with_latency_probes_plots_the_rtt_under_each_cells_load() {
    let _serial = serial();
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let dir = scratch("latency");
    let db = dir.join("a.db").display().to_string();
    let html = dir.join("s.html");
    let o = landspeed(
        &[
            "sweep",
            "127.0.0.1",
            "--windows",
            "64K,256K",
            "--streams",
            "1",
            "--repeat",
            "1",
            "-t",
            "0.3s",
            "--json",
            "--db",
            &db,
            "--html",
            html.to_str().unwrap(),
            "--",
            "-p",
            &p,
            "--latency",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let r = json(&o.stdout);
    // Each cell carries its probes' median RTT under the load, from the archived run.
    for c in r["summary"]["cells"].as_array().unwrap() {
        assert!(c["loaded_rtt_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{c}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("RTT under load vs window"), "no loaded-RTT figure");
    assert_eq!(page.matches("<svg").count(), 4);
    let id = r["sweep_id"].as_i64().unwrap().to_string();
    let t = landspeed(&["report", "--sweep", &id, "--db", &db], Duration::from_secs(30));
    assert!(t.stdout.contains("RTT under load (ms)"), "{}", t.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_loopback_sweep_is_archived_summarised_plotted_and_reported() {
    let _serial = serial();
    // The page shows both ends' hosts: the server shares its details with this keyless client.
    let s = ServerProc::start("127.0.0.1", &["--share-host"]);
    let p = s.port.to_string();
    let dir = scratch("flow");
    let db = dir.join("a.db").display().to_string();
    let plots = dir.join("plots");
    let html = dir.join("s.html");
    let o = landspeed(
        &[
            "sweep",
            "127.0.0.1",
            "--windows",
            "64K,256K",
            "--streams",
            "1,2",
            "--repeat",
            "2",
            "-t",
            "0.3s",
            "--json",
            "--db",
            &db,
            "--plots",
            plots.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--",
            "-p",
            &p,
            "-l",
            "128K",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let r = json(&o.stdout);
    assert_eq!(r["status"], "complete");
    assert_eq!(r["summary"]["runs_planned"], 8);
    assert_eq!(r["summary"]["runs_done"], 8);
    let cells = r["summary"]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert_eq!(c["throughput_bps"]["n"], 2, "{c}");
        assert!(c["throughput_bps"]["median"].as_f64().unwrap() > 1e8, "{c}");
        assert!(c["effective_window_bytes"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["rtt_s"].as_f64().unwrap() > 0.0, "{c}");
    }
    assert!(r["summary"]["directions"][0]["best"]["best"].is_array());
    assert_eq!(r["plan"]["run_args"], serde_json::json!(["-p", p, "-l", "128K"]));
    // The plan stores every cell's test as typed JSON (format 2), not only the words.
    assert_eq!(r["plan"]["version"], 2);
    assert_eq!(r["plan"]["cell"]["test"]["length_bytes"], 131072);
    assert_eq!(r["plan"]["cell"]["iperf3"], false);
    // The live table went to stderr, one line per run, and the ETA line did not hide it.
    assert_eq!(saved_lines(&o.stderr), 8, "{}", o.stderr);
    // Every cell is an ordinary archived run, with its cell's settings.
    let id = r["sweep_id"].as_i64().unwrap().to_string();
    let h = landspeed(
        &["history", "--db", &db, "--sweep", &id, "--json"],
        Duration::from_secs(10),
    );
    let rows = json(&h.stdout);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 8);
    assert!(rows
        .iter()
        .all(|r| [65536, 262144].contains(&r["window_bytes"].as_u64().unwrap())));
    let run = landspeed(
        &["show", rows[0]["id"].to_string().as_str(), "--db", &db, "--json"],
        Duration::from_secs(10),
    );
    let run = json(&run.stdout);
    assert_eq!(
        run["config"]["length_bytes"], 131072,
        "the run options apply to each cell"
    );
    // Plots: three figures in both formats; the page embeds them.
    for f in ["throughput-vs-window-send", "heatmap-send", "cdf-send"] {
        for ext in ["svg", "png"] {
            let path = plots.join(format!("sweep-{id}-{f}.{ext}"));
            assert!(
                std::fs::metadata(&path).map(|m| m.len() > 2000).unwrap_or(false),
                "{path:?}"
            );
        }
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 3);
    assert!(page.contains("landspeed serve"), "the server's command line");
    // report: text, and the same page again from the archive alone.
    let t = landspeed(&["report", "--sweep", &id, "--db", &db], Duration::from_secs(30));
    assert_eq!(t.code, 0, "{}", t.stderr);
    assert!(
        t.stdout.contains("95% CI of mean") && t.stdout.contains("best:"),
        "{}",
        t.stdout
    );
    let again = dir.join("again.html");
    let t = landspeed(
        &[
            "report",
            "--sweep",
            &id,
            "--db",
            &db,
            "--html",
            again.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(t.code, 0, "{}", t.stderr);
    assert_eq!(
        std::fs::read_to_string(&again).unwrap().matches("<svg").count(),
        3
    );
    // A report on two single runs: over-time plots for each and the CDF of the two.
    let ids = [rows[0]["id"].to_string(), rows[1]["id"].to_string()];
    let runs_html = dir.join("runs.html");
    let t = landspeed(
        &[
            "report",
            &ids[0],
            &ids[1],
            "--db",
            &db,
            "--html",
            runs_html.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(t.code, 0, "{}", t.stderr);
    assert_eq!(
        std::fs::read_to_string(&runs_html)
            .unwrap()
            .matches("<svg")
            .count(),
        5
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_grids_and_options_the_sweep_sets_are_usage_errors() {
    let dir = scratch("usage");
    let db = dir.join("a.db").display().to_string();
    for (args, says) in [
        (&["--windows", "4M..1M"][..], "--windows"),
        (&["--windows", "64K", "--streams", "0"][..], "--streams"),
        (&["--windows", "64K", "--repeat", "0"][..], "--repeat"),
        (&["--windows", "64K", "--", "-P", "4"][..], "-P/--streams"),
        (&["--windows", "64K", "--", "-w", "1M"][..], "--windows"),
        (&["--windows", "64K", "--", "--bogus"][..], "run options"),
    ] {
        let mut all = vec!["sweep", "127.0.0.1", "--db", &db];
        all.extend_from_slice(args);
        let o = landspeed(&all, Duration::from_secs(10));
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{args:?}: {}", o.stderr);
    }
    let o = landspeed(&["sweep", "--resume", "77", "--db", &db], Duration::from_secs(10));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("no sweep 77"), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plan stored by landspeed before plan format 2 (the run options as command-line words, no typed
/// cell): resuming carries it over once and runs it; one whose words today's options refuse, and one
/// from a newer landspeed, are refused with what to do.
#[test]
fn an_older_plan_format_is_carried_over_or_refused_with_what_to_do() {
    let _serial = serial();
    let s = ServerProc::start("127.0.0.1", &[]);
    let dir = scratch("format1");
    let path = dir.join("a.db");
    let db = path.display().to_string();
    let archive = landspeed_archive::Archive::open(&path).unwrap();
    let format1 = |run_args: Value| {
        serde_json::json!({
            "host": "127.0.0.1", "port": s.port, "windows_bytes": [131072], "streams": [2],
            "directions": ["forward"], "repeat": 1, "time_s": 0.2, "order": "sequential", "seed": 1,
            "run_args": run_args, "command_line": "landspeed sweep ...",
        })
    };
    let ok = format1(serde_json::json!(["-p", s.port.to_string(), "-l", "64K"])).to_string();
    let old = archive
        .create_sweep("127.0.0.1", "2026-01-01T00:00:00Z", &ok)
        .unwrap();
    let o = landspeed(
        &["sweep", "--resume", &old.to_string(), "--db", &db, "--json"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("carried over to plan format 2"), "{}", o.stderr);
    let plan: Value = serde_json::from_str(&archive.sweep_plan(old).unwrap().unwrap()).unwrap();
    assert_eq!(plan["version"], 2, "{plan}");
    assert_eq!(plan["cell"]["test"]["length_bytes"], 65536, "{plan}");
    assert_eq!(json(&o.stdout)["summary"]["runs_done"], 1);
    let bad = format1(serde_json::json!(["--flag-of-the-past"])).to_string();
    let bad = archive
        .create_sweep("127.0.0.1", "2026-01-01T00:00:00Z", &bad)
        .unwrap();
    let o = landspeed(
        &["sweep", "--resume", &bad.to_string(), "--db", &db],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("stored by an older landspeed"), "{}", o.stderr);
    assert!(o.stderr.contains("start a new sweep"), "{}", o.stderr);
    let mut newer = format1(serde_json::json!([]));
    newer["version"] = 3.into();
    let newer = archive
        .create_sweep("127.0.0.1", "2026-01-01T00:00:00Z", &newer.to_string())
        .unwrap();
    let o = landspeed(
        &["sweep", "--resume", &newer.to_string(), "--db", &db],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("stored by a newer landspeed"), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_killed_mid_way_resumes_without_redoing_or_duplicating_cells() {
    let _serial = serial();
    let s = ServerProc::start("127.0.0.1", &[]);
    let p = s.port.to_string();
    let dir = scratch("resume");
    let db = dir.join("a.db").display().to_string();
    let mut child = Command::new(common::bin())
        .args([
            "sweep",
            "127.0.0.1",
            "--windows",
            "64K..256K",
            "--streams",
            "1,2",
            "--repeat",
            "2",
            "-t",
            "0.3s",
            "--db",
            &db,
            "--",
            "-p",
            &p,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (on the live table, not a clock) until three cells are saved, then SIGKILL.
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if saved_lines(&line) == 1 && tx.send(line).is_err() {
                break;
            }
        }
    });
    for _ in 0..3 {
        rx.recv_timeout(Duration::from_secs(60)).expect("a cell finished");
    }
    signal(&child, 9);
    wait_exit(child, Duration::from_secs(10)).expect("killed");
    let h = landspeed(
        &["history", "--db", &db, "--sweep", "1", "--json"],
        Duration::from_secs(10),
    );
    let saved = json(&h.stdout).as_array().unwrap().len();
    assert!((3..12).contains(&saved), "{saved} runs saved before the kill");
    let o = landspeed(
        &["sweep", "--resume", "1", "--db", &db, "--json"],
        Duration::from_secs(120),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains(&format!("{saved} done, {} to run", 12 - saved)),
        "{}",
        o.stderr
    );
    assert_eq!(saved_lines(&o.stderr), 12 - saved, "{}", o.stderr);
    let r = json(&o.stdout);
    assert_eq!(r["status"], "complete");
    assert_eq!(r["summary"]["runs_done"], 12);
    for c in r["summary"]["cells"].as_array().unwrap() {
        assert_eq!(c["throughput_bps"]["n"], 2, "every cell exactly twice: {c}");
    }
    let h = landspeed(
        &["history", "--db", &db, "--sweep", "1", "--json"],
        Duration::from_secs(10),
    );
    assert_eq!(json(&h.stdout).as_array().unwrap().len(), 12);
    let l = landspeed(
        &["history", "--sweeps", "--db", &db, "--json"],
        Duration::from_secs(10),
    );
    let l = json(&l.stdout);
    assert_eq!(l[0]["status"], "complete", "{l}");
    assert_eq!(
        (l[0]["runs_done"].as_u64(), l[0]["runs_planned"].as_u64()),
        (Some(12), Some(12))
    );
    // Resuming a complete sweep runs nothing.
    let o = landspeed(&["sweep", "--resume", "1", "--db", &db], Duration::from_secs(30));
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("12 done, 0 to run"), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_emulated_50ms_path_gives_a_straight_line_and_its_rtt() {
    let Some(_lock) = root() else { return };
    // 50 ms and 1 Gbit/s: every window here (64 KiB .. 512 KiB, ≤ 2 streams) stays below the BDP
    // (6.25 MB), so throughput = streams × window in effect / RTT throughout. Four windows per stream
    // count (a fit needs at least four points) and three repeats, as SLAC ran them: the fit goes through
    // each cell's median, so one run that fell short (a slow start cut early on a busy machine) does not
    // bend the line. The 1 s warm-up covers slow start (512 KiB of window is about 6 RTTs, 300 ms), and
    // 1 s measured is 20 RTTs of the steady window-limited rate.
    let mut w = Wan::up(&["--rtt", "50ms", "--rate", "1G"]);
    w.serve_in_b();
    let db = scratch("wan").join("a.db").display().to_string();
    let o = w.in_a(
        &[
            "sweep",
            "198.18.0.2",
            "--windows",
            "64K..512K",
            "--streams",
            "1,2",
            "--repeat",
            "3",
            "-t",
            "1s",
            "--json",
            "--db",
            &db,
            "--",
            "-O",
            "1s",
        ],
        Duration::from_secs(300),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let r = json(&o.stdout);
    let fits = r["summary"]["directions"][0]["fits"].as_array().unwrap();
    assert_eq!(fits.len(), 2, "{}", o.stdout);
    // The line implies the RTT the runs really had, which TCP measured in the same runs (TCP_INFO):
    // implied 50.5 / 50.8 ms against TCP's 50.2 ms on a quiet machine, 50.7 / 51.5 against 50.2 / 50.3
    // with a busy loop competing for the two CPUs. Holding it to TCP's figure rather than the nominal
    // 50 ms keeps out whatever delay the userspace forwarder adds on a busy machine (checked loosely
    // against the emulated 50 ms below). Two busy loops on the two CPUs starve the endpoints
    // themselves: the line then implied 56.5 ms while TCP still measured 50.4, the window not kept full.
    for f in fits {
        let r2 = f["r2"].as_f64().unwrap();
        let rtt = f["implied_rtt_s"].as_f64().unwrap();
        let tcp = f["measured_rtt_s"].as_f64().unwrap();
        assert!(r2 >= 0.98, "R² {r2}: {f}");
        assert!(
            (rtt / tcp - 1.0).abs() <= 0.10,
            "implied RTT {rtt} s against TCP's {tcp} s: {f}"
        );
        assert!(
            (0.045..=0.060).contains(&tcp),
            "TCP measured {tcp} s on a 50 ms path: {f}"
        );
        assert!(f["points_used"].as_u64().unwrap() >= 4, "{f}");
    }
    eprintln!("{}", serde_json::to_string(fits).unwrap());
}
