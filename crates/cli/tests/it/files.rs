//! Disk-to-disk transfers on loopback: an upload and a download whose copies are byte-identical, a copy
//! corrupted on the receiver's disk that the read-back hash catches (the test build's fault injector),
//! and the refusals (no --files on the server, a name with a path in it, several streams).

use crate::common;

use common::{landspeed, run_text, ServerProc};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("landspeed-files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("server")).unwrap();
    std::fs::create_dir_all(d.join("client")).unwrap();
    d
}

/// 40 MiB + 123 bytes of varied data (not a multiple of any block size).
fn data() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..(40 << 20) + 123)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

#[test]
fn uploads_and_downloads_arrive_byte_identical_with_disk_and_network_rates() {
    let d = dir("both");
    let original = data();
    std::fs::write(d.join("client/up.bin"), &original).unwrap();
    let srv = d.join("server").display().to_string();
    let s = ServerProc::start("127.0.0.1", &["--files", &srv]);
    let local = d.join("client/up.bin").display().to_string();

    let o = run_text(
        s.port,
        &["--send-file", &local, "--json", "--no-save"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read(d.join("server/up.bin")).unwrap(), original);
    let r = json(&o.stdout);
    let f = &r["file"];
    assert_eq!(f["verified"], true, "{f}");
    assert_eq!(f["size_bytes"], original.len() as u64);
    assert_eq!(f["sha256_sender_hex"], f["sha256_receiver_hex"]);
    assert_eq!(r["summary"]["bytes_received"], original.len() as u64);
    for k in [
        "sender_read_bps",
        "network_bps",
        "receiver_write_bps",
        "receiver_read_bps",
    ] {
        assert!(f[k].as_f64().unwrap() > 0.0, "{k}: {f}");
    }
    assert!(r["data_path"]["tx"].as_str().unwrap().starts_with("sendfile"));

    // Download it again under another name, into a directory.
    std::fs::rename(d.join("server/up.bin"), d.join("server/down.bin")).unwrap();
    let into = d.join("client").display().to_string();
    let o = run_text(
        s.port,
        &[
            "-R",
            "--recv-file",
            &into,
            "--remote-file",
            "down.bin",
            "--json",
            "--no-save",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read(d.join("client/down.bin")).unwrap(), original);
    // Nothing is left of the temporary copies.
    let leftovers: Vec<_> = std::fs::read_dir(d.join("client"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".landspeed-part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let r = json(&o.stdout);
    assert_eq!(r["file"]["verified"], true);
    // The download's size came from the server.
    assert_eq!(
        r["config"]["end"]["bytes"],
        original.len() as u64,
        "{}",
        r["config"]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_copy_corrupted_on_the_receivers_disk_is_caught() {
    let d = dir("bad");
    std::fs::write(d.join("client/f.bin"), data()).unwrap();
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args(["serve", "--bind", "127.0.0.1", "-p", "0", "--files"])
        .arg(d.join("server"))
        .env("LANDSPEED_FAULT_FILE_FLIP", "7654321")
        .stdout(std::process::Stdio::piped());
    let mut server = cmd.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port = common::listening_port(&line).to_string();
    let local = d.join("client/f.bin").display().to_string();
    let o = landspeed(
        &[
            "run",
            "127.0.0.1",
            "-p",
            &port,
            "--send-file",
            &local,
            "--json",
            "--no-save",
        ],
        Duration::from_secs(60),
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(o.code, 1, "a corrupted copy must fail the run: {}", o.stderr);
    let r = json(&o.stdout);
    assert_eq!(r["file"]["verified"], false);
    assert_ne!(r["file"]["sha256_sender_hex"], r["file"]["sha256_receiver_hex"]);
    // Every byte crossed the network intact; the disk copy is what is wrong, and the run says so.
    assert_eq!(r["summary"]["bytes_received"], r["summary"]["bytes_sent"]);
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("NOT intact")),
        "{}",
        r["warnings"]
    );
    // The bad copy never took the file's name: it is kept aside for inspection.
    assert!(!d.join("server/f.bin").exists());
    assert!(d.join("server/.f.bin.landspeed-part").exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn file_tests_are_refused_where_they_cannot_be_done_safely() {
    let d = dir("refused");
    std::fs::write(d.join("client/f.bin"), b"some bytes").unwrap();
    let local = d.join("client/f.bin").display().to_string();
    // A server without --files takes none.
    let plain = ServerProc::start("127.0.0.1", &[]);
    let p = plain.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "--send-file", &local, "--no-save"],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("takes no file transfers"), "{}", o.stderr);
    // A name with a path in it never leaves the client.
    let srv = d.join("server").display().to_string();
    let s = ServerProc::start("127.0.0.1", &["--files", &srv]);
    let o = run_text(
        s.port,
        &["--send-file", &local, "--remote-file", "../escape", "--no-save"],
        Duration::from_secs(20),
    );
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("plain file name"), "{}", o.stderr);
    assert!(!d.join("escape").exists());
    // A missing file on the server is a refusal that names it.
    let into = d.join("client").display().to_string();
    let o = run_text(
        s.port,
        &[
            "-R",
            "--recv-file",
            &into,
            "--remote-file",
            "none.bin",
            "--no-save",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("none.bin"), "{}", o.stderr);
    // One stream only.
    let o = run_text(
        s.port,
        &["--send-file", &local, "-P", "2", "--no-save"],
        Duration::from_secs(20),
    );
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("one TCP stream"), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_directory_is_sent_file_by_file() {
    let d = dir("dir");
    std::fs::create_dir_all(d.join("client/set/sub")).unwrap();
    let (a, b) = (data(), data()[..1_000_001].to_vec());
    std::fs::write(d.join("client/set/a.bin"), &a).unwrap();
    std::fs::write(d.join("client/set/b.bin"), &b).unwrap();
    // A subdirectory is not descended into.
    std::fs::write(d.join("client/set/sub/c.bin"), b"x").unwrap();
    let srv = d.join("server").display().to_string();
    let s = ServerProc::start("127.0.0.1", &["--files", &srv]);
    let set = d.join("client/set").display().to_string();
    let o = run_text(
        s.port,
        &["--send-file", &set, "--json-stream", "--no-save"],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read(d.join("server/a.bin")).unwrap(), a);
    assert_eq!(std::fs::read(d.join("server/b.bin")).unwrap(), b);
    assert!(!d.join("server/c.bin").exists());
    // One end event per file, each verified.
    let ends: Vec<Value> = o
        .stdout
        .lines()
        .map(json)
        .filter(|e| e["event"] == "end")
        .collect();
    assert_eq!(ends.len(), 2, "{}", o.stdout);
    assert!(ends.iter().all(|e| e["result"]["file"]["verified"] == true));
    // --json promises one document: refused for a directory.
    let o = run_text(
        s.port,
        &["--send-file", &set, "--json", "--no-save"],
        Duration::from_secs(20),
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&d);
}
