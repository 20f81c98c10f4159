//! TLS over TCP (`run --tls`): every suite carries every byte verified, both ways and both workers,
//! and the result says the suite and the records; the client pins the certificate the server announces
//! (a wrong `--tls-pin` is a one-line error and the server keeps serving), a server's own
//! `--cert/--key` is announced and pinnable, a byte flipped after decryption is still caught at its
//! offset, and what cannot carry TLS (an iperf3 server, zero-copy, kernel TLS on this kernel) is
//! refused in one line.

use crate::common;

use common::{landspeed, run_json, run_text, ServerProc};
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

#[test]
fn every_suite_verifies_every_byte_both_ways_and_reports_its_records() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let cases: [(&str, &str, &[&str]); 4] = [
        ("aes128", "TLS13_AES_128_GCM_SHA256", &["-P", "2"]),
        ("aes256", "TLS13_AES_256_GCM_SHA384", &["--bidir"]),
        ("chacha20", "TLS13_CHACHA20_POLY1305_SHA256", &["-R"]),
        // Two streams on one thread on each end: the epoll worker.
        (
            "aes128",
            "TLS13_AES_128_GCM_SHA256",
            &["-P", "2", "--threads", "1", "--server-threads", "1"],
        ),
    ];
    for (cipher, iana, extra) in cases {
        let mut args = vec!["--tls", "--tls-cipher", cipher, "-n", "24M", "--no-save"];
        args.extend_from_slice(extra);
        let r = run_json("127.0.0.1", s.port, &args);
        common::check_invariants(&r);
        let config: landspeed_core::tls::TlsCipher =
            serde_json::from_value(r["config"]["tls"]["cipher"].clone()).unwrap();
        assert_eq!(config.short_name(), cipher, "{extra:?}");
        for st in r["streams"].as_array().unwrap() {
            assert_eq!(st["bytes_verified"], st["bytes_received"], "{extra:?}: {st}");
            assert!(st["bytes_received"].as_u64().unwrap() > 0);
            assert_eq!(st["errors"].as_array().unwrap().len(), 0, "{st}");
            assert!(st["tls"]["records"].as_u64().unwrap() > 0, "{st}");
        }
        let t = &r["data_path"]["tls"];
        assert_eq!(t["suite"], iana, "{extra:?}");
        let mean = t["mean_record_bytes"].as_f64().unwrap();
        assert!(mean > 8192.0 && mean <= 16384.0, "{t}");
    }
    let o = run_text(s.port, &["--tls", "-n", "4M", "--no-save"], T);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("\nTLS test, "), "{}", o.stdout);
    assert!(
        o.stdout.contains("TLS: 1.3 TLS13_AES_128_GCM_SHA256; "),
        "{}",
        o.stdout
    );
}

#[test]
fn a_wrong_pin_is_one_line_and_the_server_keeps_serving() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let pin = "ab".repeat(32);
    let o = run_text(s.port, &["--tls", "--tls-pin", &pin, "-t", "1", "--no-save"], T);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let err = o.stderr.trim();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("not the pinned {pin}")), "{err}");
    let r = run_json("127.0.0.1", s.port, &["--tls", "-n", "1M", "--no-save"]);
    assert_eq!(r["summary"]["bytes_verified"], 1 << 20);
}

#[test]
fn a_servers_own_certificate_is_announced_and_can_be_pinned() {
    let dir = std::env::temp_dir().join(format!("landspeed-tls-cert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["test.example".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let fingerprint = landspeed_core::tls::CertFingerprint::of_der(ck.cert.der()).to_string();
    let s = ServerProc::start(
        "127.0.0.1",
        &["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()],
    );
    let line = &s.first_line;
    let colons = fingerprint
        .to_uppercase()
        .as_bytes()
        .chunks(2)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(":");
    let r = run_json(
        "127.0.0.1",
        s.port,
        &["--tls", "--tls-pin", &colons, "-n", "2M", "--no-save"],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(line.contains(&format!("sha256:{fingerprint}")), "{line}");
    assert_eq!(r["summary"]["bytes_verified"], 2 << 20);
    let bad = landspeed(
        &[
            "serve",
            "-p",
            "0",
            "--cert",
            "/nonexistent.pem",
            "--key",
            "/nonexistent.pem",
        ],
        T,
    );
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("--cert/--key: /nonexistent.pem"),
        "{}",
        bad.stderr
    );
}

#[test]
fn a_byte_flipped_after_decryption_is_caught_at_its_offset() {
    let r = common::flipped_run("0:3000001", &["--tls", "-n", "8M"]);
    assert_eq!(r["payload"]["first_corruption"]["offset"], 3_000_001);
    assert_eq!(r["summary"]["corrupt_blocks"], 1);
}

#[test]
fn what_cannot_carry_tls_is_refused_in_one_line() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let o = run_text(s.port, &["--tls", "--tx", "zerocopy", "-t", "1"], T);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("--tx zerocopy does not work with --tls"),
        "{}",
        o.stderr
    );
    let o = run_text(s.port, &["--tls", "-u", "-t", "1"], T);
    assert_eq!(o.code, 2, "{}", o.stderr);
    // Kernel TLS runs where the kernel has it (bench/ktls-vm runs it in Debian's kernel by hand),
    // and is refused in one line naming what is missing where it has not (this project's CI kernel).
    let o = run_text(s.port, &["--tls", "--ktls", "-t", "1", "--no-save"], T);
    match landspeed_engine::tls::ktls_unavailable_reason() {
        Some(_) => {
            assert_eq!(o.code, 1, "{}", o.stderr);
            assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
            assert!(o.stderr.contains("--ktls: "), "{}", o.stderr);
            assert!(o.stderr.contains("CONFIG_TLS"), "{}", o.stderr);
        }
        None => {
            assert_eq!(o.code, 0, "{}", o.stderr);
            assert!(
                o.stdout.contains("sealed and opened by the kernel (kTLS"),
                "{}",
                o.stdout
            );
        }
    }
}

#[test]
fn an_iperf3_server_cannot_carry_tls() {
    let Some(srv) = common::Iperf3Server::start() else {
        return;
    };
    let o = run_text(srv.port, &["--tls", "-t", "1", "--no-save"], T);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("iperf3's protocol, which cannot carry --tls"),
        "{}",
        o.stderr
    );
}

#[test]
fn the_archive_record_and_model_name_tls() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let (archive, std_tcp) = common::archived_transport(s.port, &["--tls"], "tls");
    let db = &archive.db;
    assert_eq!(std_tcp["passed"], true, "{std_tcp}");
    let evidence = std_tcp["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("TLS 1.3 records (TLS13_AES_128_GCM_SHA256)"),
        "{evidence}"
    );
    let m = landspeed(&["model", "--run", "1", "--db", db], T);
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert!(m.stdout.contains("the run carried TLS 1.3"), "{}", m.stdout);
}

/// A client on a CPU without AES instructions (qemu-user emulating its `qemu64` model, which has
/// neither AES-NI nor PCLMULQDQ) says so in one warning line naming the suite, the rate the test
/// reached and ChaCha20; the server, on this CPU, has them and is not named.
#[test]
fn aes_gcm_on_a_cpu_without_aes_instructions_is_named_in_one_line() {
    const QEMU: &str = "qemu-x86_64-static";
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    if std::process::Command::new(QEMU)
        .arg("--version")
        .output()
        .is_err()
    {
        let _: Option<()> =
            common::missing("qemu-x86_64-static is not installed (Debian's qemu-user-static)");
        return;
    }
    let s = ServerProc::start("127.0.0.1", &[]);
    let port = s.port.to_string();
    let mut cmd = std::process::Command::new(QEMU);
    cmd.args(["-cpu", "qemu64", common::bin(), "run", "127.0.0.1", "-p", &port]);
    cmd.args(["--tls", "-n", "8M", "--no-save", "--json"]);
    let o = common::outcome(cmd, Duration::from_secs(120));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        r["local"]["host"]["aes_instructions"], false,
        "{}",
        r["local"]["host"]
    );
    assert_eq!(r["summary"]["bytes_verified"], r["summary"]["bytes_received"]);
    let warned: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains("without AES instructions"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", r["warnings"]);
    let w = warned[0];
    assert!(w.starts_with("client: TLS13_AES_128_GCM_SHA256"), "{w}");
    assert!(
        w.contains("bit/s (all streams)") && w.contains("--tls-cipher chacha20"),
        "{w}"
    );
    // With ChaCha20 there is nothing to say.
    let mut cmd = std::process::Command::new(QEMU);
    cmd.args(["-cpu", "qemu64", common::bin(), "run", "127.0.0.1", "-p", &port]);
    cmd.args([
        "--tls",
        "--tls-cipher",
        "chacha20",
        "-n",
        "8M",
        "--no-save",
        "--json",
    ]);
    let o = common::outcome(cmd, Duration::from_secs(120));
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stdout.contains("without AES instructions"), "{}", o.stdout);
}
