//! The fuzz targets on stable: every committed seed and crash reproducer (fuzz/corpus, fuzz/regressions)
//! replayed, a quick mutation run around the seeds, and the real cargo-fuzz smoke run (nightly), which
//! must run in CI and is skipped elsewhere only when cargo-fuzz is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return vec![];
    };
    let mut out: Vec<_> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn seeds_and_regressions_replay_cleanly() {
    for (name, body) in landspeed_fuzzing::TARGETS {
        let seeds = inputs("corpus", name);
        assert!(seeds.len() >= 3, "{name}: seed corpus missing");
        for (path, bytes) in seeds.iter().chain(&inputs("regressions", name)) {
            let r = std::panic::catch_unwind(|| body(bytes));
            assert!(r.is_ok(), "{name} panicked on {}", path.display());
        }
    }
}

/// Bit flips, truncations, splices and length-field rewrites of the seeds: a few seconds of blind
/// fuzzing that any `cargo test` gets, nightly or not.
#[test]
fn mutated_seeds_do_not_panic() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (name, body) in landspeed_fuzzing::TARGETS {
        let seeds = inputs("corpus", name);
        for _ in 0..4000 {
            let (_, seed) = &seeds[next() as usize % seeds.len()];
            let mut b = seed.clone();
            for _ in 0..1 + next() % 4 {
                if b.is_empty() {
                    b.push(next() as u8);
                    continue;
                }
                let at = next() as usize % b.len();
                match next() % 5 {
                    0 => b[at] ^= 1 << (next() % 8),
                    1 => b.truncate(at),
                    2 => b.insert(at, next() as u8),
                    3 => {
                        let v = (next() as u32).to_be_bytes();
                        let end = (at + 4).min(b.len());
                        b[at..end].copy_from_slice(&v[..end - at]);
                    }
                    _ => {
                        let (_, other) = &seeds[next() as usize % seeds.len()];
                        let cut = next() as usize % (other.len() + 1);
                        b.truncate(at);
                        b.extend_from_slice(&other[cut..]);
                    }
                }
            }
            let r = std::panic::catch_unwind(|| body(&b));
            assert!(r.is_ok(), "{name} panicked on {b:?}");
        }
    }
}

/// `cargo +nightly fuzz run TARGET` for a few seconds each (LANDSPEED_FUZZ_S, default 10), new inputs
/// going to a scratch directory so the committed corpus stays as it is.
#[test]
fn cargo_fuzz_smoke() {
    let ci = std::env::var_os("CI").is_some();
    let has = cargo_fuzz()
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        assert!(
            !ci,
            "cargo-fuzz or the nightly toolchain is missing in CI (.ci/run installs it)"
        );
        eprintln!("cargo_fuzz_smoke: cargo-fuzz not installed; skipped outside CI");
        return;
    }
    let secs = std::env::var("LANDSPEED_FUZZ_S").unwrap_or_else(|_| "10".into());
    // Every target at once, after one build: libFuzzer runs on one core each, so on CI's two cores each
    // target still gets two fifths of a core for its seconds (the runs it made are printed).
    build_fuzz_targets();
    std::thread::scope(|scope| {
        let runs: Vec<_> = landspeed_fuzzing::TARGETS
            .iter()
            .map(|(name, _)| (name, scope.spawn(|| fuzz_for(name, &secs))))
            .collect();
        for (name, run) in runs {
            let (ok, log) = run.join().expect("fuzz runner thread");
            check_fuzz_run(name, ok, &log);
        }
    });
}

/// `cargo fuzz`, run in fuzz/ with the nightly toolchain and none of this test's cargo environment.
fn cargo_fuzz() -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(fuzz_dir())
        .args(["+nightly", "fuzz"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    c
}

/// Builds every fuzz target once, so the parallel runs do not wait on each other's build. A `--dev`
/// build (debug assertions and overflow checks on, no optimisation): 24 s from clean on CI's 2 cores
/// against 61 s for the optimised one; a smoke run needs the targets to build and run, and the long
/// searches (`cargo +nightly fuzz run TARGET`, optimised) are run by hand.
fn build_fuzz_targets() {
    let out = cargo_fuzz()
        .args(["build", "--dev"])
        .output()
        .expect("run cargo fuzz build");
    assert!(
        out.status.success(),
        "cargo fuzz build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cargo fuzz` on target `name` for `secs` seconds: whether it succeeded, and its log.
fn fuzz_for(name: &str, secs: &str) -> (bool, String) {
    let scratch = std::env::temp_dir().join(format!("landspeed-fuzz-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let seeds = fuzz_dir().join("corpus").join(name);
    let out = cargo_fuzz()
        .args(["run", "--dev"])
        .arg(name)
        .arg(&scratch)
        .arg(&seeds)
        .args([
            "--",
            &format!("-max_total_time={secs}"),
            "-rss_limit_mb=2048",
            "-timeout=10",
        ])
        .output()
        .expect("run cargo fuzz");
    let _ = std::fs::remove_dir_all(&scratch);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fuzz run passed: it exited cleanly and reported how many inputs it ran.
fn check_fuzz_run(name: &str, ok: bool, log: &str) {
    let done = log.lines().rev().find(|l| l.starts_with("Done ")).unwrap_or("");
    eprintln!("fuzz {name}: {done}");
    assert!(
        ok,
        "fuzz target {name} failed (reproducer under fuzz/artifacts/{name}/):\n{}",
        log.lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        done.contains("runs"),
        "{name}: no run count in the fuzzer's output"
    );
}

/// The sealed seeds are whole conversations the keyed server takes: the fuzzer starts from inputs
/// that reach past the guard, not from ones every tag check stops at the first sealed frame.
#[test]
fn sealed_seeds_reach_an_authenticated_accept() {
    use landspeed_proto::ServerAction;
    for (path, bytes) in inputs("corpus", "control_decoder") {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("session-") {
            continue;
        }
        let mut conn = landspeed_fuzzing::control_server();
        // The messages after the request come before any stream: the session refuses the first of
        // them, after the accept.
        let _ = conn.handle_input(&bytes[1..], std::time::Instant::now());
        let accepted =
            std::iter::from_fn(|| conn.poll_action()).any(|a| matches!(a, ServerAction::Accept(_)));
        assert!(accepted, "{name}: no accept");
        assert_eq!(conn.machine().authenticated(), Some("fuzz"), "{name}");
    }
}
