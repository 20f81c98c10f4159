//! What more than one command needs, and nothing that is a command: value parsers, error texts, key
//! files, the small HTTP server, the run output, `run`'s arguments and their translation into client
//! options, the archive argument, a sweep's files, a path measurement and the emulator's counters.
//! Nothing here imports `cmd` or `cli`, so the binary's modules have one direction:
//! `main` → `cli` → `cmd::*` → `common::*` → the library crates.

pub mod client;
#[cfg_attr(not(target_os = "linux"), path = "crossing_none.rs")]
pub mod crossing;
pub mod flags;
pub mod http;
pub mod iperf3_meta;
pub mod keyfile;
pub mod output;
pub mod path_probe;
pub mod pidfile;
pub mod run_args;
pub mod store;
pub mod sweep_output;
#[cfg_attr(windows, path = "sys_windows.rs")]
pub mod sys;
pub mod values;

/// An error that is the user's to fix (exit code 2), as opposed to a runtime failure (exit code 1).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

/// Now as UTC text (the server log's stamps, the pages' "made at" line).
pub fn now_utc() -> String {
    landspeed_core::result::format_utc(unix_now_s())
}

/// Now, seconds since the Unix epoch.
pub fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Replaces this process with `landspeed serve ARGS` (the drop-ins' `-s`); returns only on failure.
pub fn become_serve(args: &[String]) -> anyhow::Result<bool> {
    let exe = std::env::current_exe()?;
    let err = sys::exec(std::process::Command::new(exe).arg("serve").args(args));
    anyhow::bail!("cannot start landspeed serve: {err}")
}
