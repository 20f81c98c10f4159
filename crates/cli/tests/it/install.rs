//! What an installation needs from the binary: `--version` as one line for bug reports (version, commit,
//! target, kernel, features, data paths), shell completions that a real bash loads, and man pages generated from the same
//! definitions as `--help`, one per command, with its examples.

use crate::common;

use common::landspeed;
use std::process::Command;
use std::time::Duration;

#[test]
fn version_is_one_line_with_commit_kernel_and_data_paths() {
    for flag in ["--version", "-V"] {
        let o = landspeed(&[flag], Duration::from_secs(10));
        assert_eq!(o.code, 0, "{}", o.stderr);
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{}", o.stdout);
        let l = lines[0];
        assert!(
            l.starts_with(&format!("landspeed {} (commit ", env!("CARGO_PKG_VERSION"))),
            "{l}"
        );
        assert!(l.contains("; Linux "), "{l}");
        // The target triple it was built for, and the features built in.
        assert!(
            l.contains("; built for x86_64-") || l.contains("; built for aarch64-"),
            "{l}"
        );
        assert!(l.contains("; built in: TLS, QUIC, "), "{l}");
        for path in ["io_uring", "MSG_ZEROCOPY", "UDP GSO", "UDP GRO", "MPTCP", "kTLS"] {
            assert!(
                l.contains(&format!("{path} yes")) || l.contains(&format!("{path} no")),
                "{path} in {l}"
            );
        }
    }
}

#[test]
fn completions_load_in_a_real_bash_and_a_bad_shell_is_a_usage_error() {
    let o = landspeed(&["completions", "bash"], Duration::from_secs(10));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let script = std::env::temp_dir().join(format!("landspeed-completion-{}", std::process::id()));
    std::fs::write(&script, &o.stdout).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p landspeed", script.display()))
        .output()
        .expect("bash");
    let _ = std::fs::remove_file(&script);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("landspeed"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for shell in ["zsh", "fish"] {
        let o = landspeed(&["completions", shell], Duration::from_secs(10));
        assert!(o.code == 0 && o.stdout.contains("serve"), "{shell}: {}", o.stderr);
    }
    let bad = landspeed(&["completions", "nosuchshell"], Duration::from_secs(10));
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("bash") && bad.stderr.contains("fish"),
        "{}",
        bad.stderr
    );
}

#[test]
fn man_pages_cover_every_command_with_its_examples() {
    let dir = std::env::temp_dir().join(format!("landspeed-man-{}", std::process::id()));
    let o = landspeed(&["man", dir.to_str().unwrap()], Duration::from_secs(10));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let page = |name: &str| std::fs::read_to_string(dir.join(format!("{name}.1"))).unwrap_or_default();
    let top = page("landspeed");
    assert!(top.starts_with(".ie") || top.contains(".TH landspeed"), "{top}");
    for cmd in [
        "serve",
        "run",
        "demo",
        "sweep",
        "wan",
        "exporter",
        "completions",
        "pscheduler",
        "wan-up",
        "wan-down",
        "wan-status",
    ] {
        let p = page(&format!("landspeed-{cmd}"));
        assert!(p.contains(".TH landspeed-"), "landspeed-{cmd}.1 missing or empty");
    }
    assert!(
        page("landspeed-serve").contains("landspeed serve \\-\\-once"),
        "{}",
        page("landspeed-serve")
    );
    assert!(
        !dir.join("landspeed-man.1").exists(),
        "the hidden command has no page"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
