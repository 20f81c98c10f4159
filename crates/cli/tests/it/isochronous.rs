//! Isochronous frames (`--isochronous`) against iperf 2.1.8 both ways: its client's frames counted
//! by `landspeed serve` beside its own server's count of the same command line, and landspeed's
//! client's frames counted by iperf 2's server and by landspeed's; then what is refused in one line.
//! iperf 2.1.8's server counts its first frame twice (it prints 121 frames for 120): landspeed's
//! counts are compared with its count less one.

use crate::common::{self, ServerProc};
use crate::iperf2_server::have_iperf2;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// 60 frames a second of 2 Mbit/s on average, varying, for 2 s, with trip times (iperf 2's server
/// prints frames only with them).
const FRAMES: &str = "--isochronous=60:2m,0.5m";

/// `iperf -s -u -e` on a free port, its output to a file; killed when dropped.
struct Iperf2Frames(Child, u16, std::path::PathBuf);

impl Iperf2Frames {
    fn start() -> Iperf2Frames {
        let port = common::free_port();
        let out = std::env::temp_dir().join(format!("landspeed-it-iperf2-{}-{port}", std::process::id()));
        let child = Command::new("iperf")
            .args(["-s", "-u", "-e", "-p", &port.to_string()])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("run iperf -s -u");
        let up = common::wait_until(Duration::from_secs(5), || {
            std::fs::read_to_string(&out).is_ok_and(|t| t.contains("Server listening"))
        });
        assert!(up, "iperf -s -u did not start");
        Iperf2Frames(child, port, out)
    }

    /// Its count of the test's frames: (received, lost) from the total line, once printed.
    fn frames(&self) -> (u64, u64) {
        let mut got = None;
        common::wait_until(Duration::from_secs(10), || {
            got = frames_of_iperf2(&std::fs::read_to_string(&self.2).unwrap_or_default());
            got.is_some()
        });
        got.unwrap_or_else(|| {
            panic!(
                "iperf -s printed no frames:\n{}",
                std::fs::read_to_string(&self.2).unwrap_or_default()
            )
        })
    }
}

impl Drop for Iperf2Frames {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.2);
    }
}

/// `rx/lost` after `pps` on iperf 2's whole-test line (`0.0000-2.0...`), the one with frames.
fn frames_of_iperf2(text: &str) -> Option<(u64, u64)> {
    let line = text
        .lines()
        .filter(|l| l.contains(" 0.0000-") && l.contains(" pps "))
        .find(|l| !l.contains(" 0.0000-1.0000 "))?;
    let after = line.split(" pps ").nth(1)?;
    let (rx, lost) = after.split_whitespace().next()?.split_once('/')?;
    Some((rx.parse().ok()?, lost.parse().ok()?))
}

/// The frames in landspeed serve's next test line: (whole, lost, skipped by the sender).
fn frames_of_log(s: &ServerProc) -> (u64, u64, u64) {
    loop {
        let line = s
            .next_line(Duration::from_secs(15))
            .expect("a test line from landspeed serve");
        let Some(rest) = line.split_once("; frames ").map(|x| x.1) else {
            assert!(!line.contains(" test from "), "no frames in {line}");
            continue;
        };
        let w: Vec<&str> = rest.split_whitespace().collect();
        let n = |i: usize| w[i].trim_end_matches(',').parse::<u64>().unwrap();
        return (n(0), n(2), n(4));
    }
}

/// iperf 2.1.8's client with the frames: its exit status.
fn iperf2_client(port: u16) -> bool {
    let o = common::output_within(
        Command::new("iperf")
            .args(["-c", "127.0.0.1", "-u", "-p", &port.to_string(), FRAMES])
            .args(["--trip-times", "-t", "2", "-e"]),
        Duration::from_secs(30),
    );
    o.status.success()
}

/// landspeed's client with the frames (over UDP, or TCP's bursts), its result.
fn landspeed_client(port: u16, udp: bool) -> serde_json::Value {
    let p = port.to_string();
    let mut args = vec!["run", "127.0.0.1", "-p", &p, "--iperf2"];
    if udp {
        args.push("-u");
    }
    args.extend([FRAMES, "--trip-times", "-t", "2", "--json", "--no-save"]);
    let o = common::landspeed(&args, Duration::from_secs(30));
    assert_eq!(o.code, 0, "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

#[test]
fn frames_are_counted_alike_by_iperf2s_server_and_landspeeds_both_ways() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    // iperf 2's client to both servers.
    let theirs = Iperf2Frames::start();
    assert!(iperf2_client(theirs.1));
    let (rx, lost) = theirs.frames();
    assert!(iperf2_client(s.port));
    let (whole, ours_lost, skipped) = frames_of_log(&s);
    // A sender late for a slot skips frames (a slip; iperf 2's server then counts the gap and the
    // next frame lost, and ignores the frame after the gap): two runs of iperf 2's client, each may
    // slip on a busy machine, so a few frames of slack; none lost on loopback.
    assert_eq!(ours_lost, 0);
    assert!(
        lost <= 6 && skipped <= 4,
        "iperf 2 lost {lost}, skipped {skipped}"
    );
    assert!(
        (112..=122).contains(&(whole + skipped)),
        "{whole} frames in 2 s at 60/s"
    );
    assert!(
        whole.abs_diff(rx - 1) <= 2 + lost + skipped,
        "landspeed {whole}, iperf 2 {rx} (its first twice)"
    );
    // landspeed's client to both servers.
    let theirs = Iperf2Frames::start();
    let r = landspeed_client(theirs.1, true);
    let sent = &r["frames"]["sender"];
    let frames = sent["frames"].as_u64().unwrap();
    let slips = sent["slips"].as_u64().unwrap();
    assert!(
        (112..=122).contains(&(frames + sent["skipped"].as_u64().unwrap())),
        "{sent}"
    );
    assert_eq!(sent["spec"]["fps"], 60.0);
    // iperf 2's server counts what was sent, less two frames for each slip (the frame after the gap
    // ignored, the next counted lost with the gap), plus its double first.
    let (rx, lost) = theirs.frames();
    assert!(
        lost <= sent["skipped"].as_u64().unwrap() + 2 * slips,
        "{sent}: lost {lost}"
    );
    assert!(
        frames.abs_diff(rx - 1) <= 1 + 2 * slips,
        "sent {frames}, iperf 2 counted {rx}"
    );
    // iperf 2's report carries no frame counts: none in the result, and it says so.
    assert_eq!(r["frames"]["complete"], 0);
    let warned = r["warnings"].to_string();
    assert!(warned.contains("carries no frame figures"), "{warned}");
    let r = landspeed_client(s.port, true);
    let frames = r["frames"]["sender"]["frames"].as_u64().unwrap();
    let (whole, lost, skipped) = frames_of_log(&s);
    // The last frame may be cut short by the end of the time: counted neither whole nor lost.
    assert!(
        whole == frames || whole + 1 == frames,
        "sent {frames}, counted {whole}"
    );
    assert_eq!(
        (lost, skipped),
        (0, r["frames"]["sender"]["skipped"].as_u64().unwrap())
    );
    // landspeed's server sends its counts after iperf 2's report: the client's result has them.
    let f = &r["frames"];
    assert_eq!(
        (f["complete"].as_u64(), f["lost"].as_u64()),
        (Some(whole), Some(0)),
        "{f}"
    );
    assert!(f["latency"]["p99_ms"].as_f64().is_some_and(|v| v > 0.0), "{f}");
    // The `iperf` drop-in takes iperf 2's command line for it, against iperf 2's server.
    let theirs = Iperf2Frames::start();
    let out = dropin(&[
        "-c",
        "127.0.0.1",
        "-u",
        "-p",
        &theirs.1.to_string(),
        FRAMES,
        "--trip-times",
        "-t",
        "2",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("Isochronous: 60.00 frames/sec mean=2.00 Mbit/s, stddev= 500 Kbit/s"),
        "{}",
        out.stdout
    );
    // iperf 2's isochronous columns: frames begun, skipped, slips; the total line's frames those
    // of a 2 s test at 60 a second.
    assert!(out.stdout.contains("PPS  isoch:tx/miss/slip"), "{}", out.stdout);
    // The client's own lines (the server's report, extended by --trip-times, has PPS too).
    let total_frames = out
        .stdout
        .lines()
        .filter(|l| l.contains(" pps ") && !l.contains(" pkts "))
        .filter_map(|l| {
            l.split_whitespace()
                .last()?
                .split('/')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!((110..=122).contains(&total_frames), "{}", out.stdout);
    let sent: u64 = out
        .stdout
        .lines()
        .find_map(|l| l.split(" Sent ").nth(1)?.strip_suffix(" datagrams")?.parse().ok())
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(out.stdout.contains(&format!(" 0/{sent} (0%)")), "{}", out.stdout);
    let (rx, lost) = theirs.frames();
    assert!(
        (110..=123).contains(&rx) && lost <= 6,
        "iperf 2 counted {rx}/{lost}"
    );
}

/// Frames over TCP (`--isochronous` without `-u`: each frame one of iperf 2's bursts), both ways:
/// landspeed's client against iperf 2.1.8's server (`-y C`: it counted every byte written, the
/// 80-byte header beside) and landspeed's; iperf 2.1.8's client against landspeed's server; the
/// drop-in's lines beside iperf 2.1.8's client's, numbers masked.
#[test]
fn frames_over_tcp_go_as_iperf2s_bursts_both_ways() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    let theirs = crate::iperf2_server::LoggedIperf2::start(&["-y", "C"], "frames-tcp.csv");
    let s = ServerProc::start("127.0.0.1", &[]);
    for (port, iperf2) in [(theirs.port, true), (s.port, false)] {
        let r = landspeed_client(port, false);
        let sent = &r["frames"]["sender"];
        let frames = sent["frames"].as_u64().unwrap() + sent["skipped"].as_u64().unwrap();
        assert!((112..=122).contains(&frames), "{sent}");
        assert_eq!(r["config"]["transport"], "tcp", "{r}");
        let bytes = r["summary"]["bytes_sent"].as_u64().unwrap();
        assert_eq!(sent["bytes"].as_u64(), Some(bytes), "{sent}");
        // The frames' mean, 2 Mbit/s for 2 s, within what their spread and the ends allow.
        assert!((350_000..=650_000).contains(&bytes), "{bytes}");
        if iperf2 {
            let counted = || crate::iperf2_server::server_csv(&theirs.log);
            assert!(common::wait_until(Duration::from_secs(5), || !counted().is_empty()));
            assert_eq!(
                counted()[0],
                bytes + 80,
                "iperf -s counted the header and every frame"
            );
        } else {
            // Its log counts the header too, as iperf 2's server does.
            let line = common::line_with(&s, " test from ");
            assert!(
                line.contains(&format!("received {} B", bytes + 80)),
                "{bytes}: {line}"
            );
            // The server counted each burst as a frame: every frame sent (the last one whole, or
            // cut at the end and not said).
            let whole = whole_frames(&line);
            let sent_frames = sent["frames"].as_u64().unwrap();
            assert!(whole == sent_frames || whole + 1 == sent_frames, "{sent}: {line}");
            assert!(line.contains(" whole, 0 lost, "), "{line}");
        }
    }
    // iperf 2.1.8's client to landspeed's server: served, its bytes counted.
    let o = common::output_within(
        Command::new("iperf")
            .args(["-c", "127.0.0.1", "-p", &s.port.to_string(), FRAMES, "-t", "1"])
            .args(["--trip-times", "-y", "C"]),
        Duration::from_secs(30),
    );
    assert!(o.status.success());
    let line = common::line_with(&s, " test from ");
    assert!(line.contains(": ok"), "{line}");
    // Its frames, a second at 60 a second, counted from its bursts.
    assert!((55..=62).contains(&whole_frames(&line)), "{line}");
    assert!(line.contains(" whole, 0 lost, "), "{line}");
    // The drop-in's lines beside iperf 2.1.8's own, against iperf 2's server.
    let args = [
        "-c",
        "127.0.0.1",
        "-p",
        &theirs.port.to_string(),
        FRAMES,
        "-t",
        "1",
        "-i",
        "0.5",
    ];
    let ours = dropin(&args);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let o = common::output_within(Command::new("iperf").args(args), Duration::from_secs(30));
    let reference = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        ours.stdout
            .contains("stddev= 500 Kbit/s, Period/IPG=16.67/0.000 ms"),
        "{}",
        ours.stdout
    );
    // The window line aside: iperf 2.1.8 reads its send buffer when it prints its head, which may
    // be after its connection's autotuning has grown it (16 KByte one run, 3.76 MByte the next).
    let masked = |t: &str| {
        let mut m = crate::iperf2_server::masked_text(t);
        m.retain(|l| !l.starts_with("TCP window size"));
        m
    };
    assert_eq!(
        masked(&ours.stdout),
        masked(&reference),
        "landspeed:\n{}\niperf 2.1.8:\n{reference}",
        ours.stdout
    );
}

/// The drop-in's `--isochronous -P 2` beside iperf 2.1.8's own client, against iperf 2's server,
/// over UDP and TCP: each stream on its own port, each with its own frames on its lines and its
/// total, the `[SUM]`s under the head iperf 2 prints for them. The kinds of line are compared
/// (numbers masked), not their counts: iperf 2.1.8's threads race to print an interval's `[SUM]`
/// (one run prints two of three).
#[test]
fn the_drop_ins_parallel_frames_print_as_iperf2s_client_prints_them() {
    let _one = common::alone();
    if !have_iperf2() {
        return;
    }
    for udp in [true, false] {
        // A server of its own for each client: iperf 2's UDP server may still be closing the
        // test it served when the next one starts.
        let server = || crate::iperf2_server::Iperf2Server::over_udp(udp);
        let (theirs_at, ours_at) = (server(), server());
        let args = |port: &str| {
            let mut a = vec![
                "-c",
                "127.0.0.1",
                "-p",
                port,
                FRAMES,
                "-P",
                "2",
                "-t",
                "1",
                "-i",
                "0.5",
            ];
            a.extend(udp.then_some("-u"));
            a.into_iter().map(String::from).collect::<Vec<String>>()
        };
        let theirs_args = args(&theirs_at.1.to_string());
        let o = common::output_within(Command::new("iperf").args(&theirs_args), Duration::from_secs(30));
        let reference = String::from_utf8_lossy(&o.stdout).to_string();
        let args = args(&ours_at.1.to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ours = dropin(&args);
        assert_eq!(ours.code, 0, "{args:?}: {}", ours.stderr);
        let kinds = |t: &str| {
            let m = crate::iperf2_server::masked_text(t);
            let m = m.into_iter().filter(|l| !l.starts_with("TCP window size"));
            m.collect::<std::collections::BTreeSet<String>>()
        };
        assert_eq!(
            kinds(&ours.stdout),
            kinds(&reference),
            "{args:?}\nlandspeed:\n{}\niperf 2.1.8:\n{reference}",
            ours.stdout
        );
        // Two streams, two ports.
        let ports: std::collections::BTreeSet<&str> = (ours.stdout.lines())
            .filter_map(|l| l.split(" port ").nth(1)?.split(' ').next())
            .collect();
        assert!(ports.len() >= 3, "{args:?}: {}", ours.stdout);
    }
}

/// The frames landspeed's server's log line says arrived whole ("frames N whole").
fn whole_frames(line: &str) -> u64 {
    let n = line.split("; frames ").nth(1).and_then(|t| t.split(' ').next());
    n.and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no frames in {line}"))
}

/// `landspeed iperf2 ARGS` (the drop-in).
fn dropin(args: &[&str]) -> common::Outcome {
    let mut all = vec!["iperf2"];
    all.extend(args);
    common::landspeed(&all, Duration::from_secs(30))
}

#[test]
fn what_an_isochronous_test_cannot_be_is_refused_in_one_line() {
    common::share();
    for (args, says) in [
        (&["--iperf2", "-u", "--isochronous=0:1m"][..], "out of range"),
        (&["--iperf2", "-u", "--isochronous=60:5p"], "packets"),
        (&["--iperf2", "-u", "--isochronous=1:1G"], "bytes a frame"),
        (&["--iperf2", "-u", "--isochronous=sixty"], "not a number"),
        (&["-u", "--isochronous"], "add --iperf2"),
        (&["--iperf2", "--isochronous", "-R"], "-R or --bidir"),
        (&["--iperf2", "--isochronous", "-b", "1m"], "a rate (-b) over TCP"),
        (
            &["-u", "--trip-times"],
            "--trip-times goes with --bounceback, --isochronous, or a test with --iperf2",
        ),
        (&["--iperf2", "-u", "--isochronous", "-R"], "-R or --bidir"),
        (
            &["--iperf2", "-u", "--isochronous", "-l", "100"],
            "-l 108 or more",
        ),
    ] {
        let mut all = vec!["run", "127.0.0.1", "-p", "9", "-t", "1", "--no-save"];
        all.extend(args);
        let o = common::landspeed(&all, Duration::from_secs(10));
        assert_ne!(o.code, 0, "{args:?}");
        assert!(!o.stderr.contains("panicked"), "{args:?}: {}", o.stderr);
        // The reason on the first line (clap adds its pointer to --help below a bad value).
        let first = o.stderr.lines().next().unwrap_or_default();
        assert!(first.contains(says), "{args:?}: {}", o.stderr);
    }
    // The drop-in names what it refuses of iperf 2's command line.
    for (args, says) in [
        (
            &["-c", "127.0.0.1", "-R", "--isochronous=60:1m"][..],
            "--isochronous with -R or --full-duplex",
        ),
        (
            &["-c", "127.0.0.1", "-u", "-b", "1m", "--isochronous=60:1m"],
            "-b with --isochronous",
        ),
        (&["-c", "127.0.0.1", "-u", "--isochronous=0"], "out of range"),
    ] {
        let o = dropin(args);
        assert_ne!(o.code, 0, "{args:?}");
        let all = format!("{}{}", o.stdout, o.stderr);
        assert!(all.contains(says), "{args:?}: {all}");
    }
}
