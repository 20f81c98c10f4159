//! Windows: the command line's dealings with the operating system (see `sys.rs` for Linux). There is
//! no exec (the program is started as a child and its exit code passed on), no fork-style daemon
//! (`-D` is refused: run it as a service or with `start /b`), no Unix permission bits (key files are
//! protected by their NTFS access lists, which landspeed does not read: docs/security.md), and no
//! statistics signal.

use std::path::Path;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::Console::{SetStdHandle, STD_ERROR_HANDLE, STD_OUTPUT_HANDLE};
use windows_sys::Win32::System::Threading::{OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION};

/// Runs `cmd` in this process's place: as a child, waited for, its exit code passed on.
pub fn exec(cmd: &mut std::process::Command) -> std::io::Error {
    match cmd.status() {
        Ok(s) => std::process::exit(s.code().unwrap_or(1)),
        Err(e) => e,
    }
}

/// Sends standard output and standard error to the end of `path` (created if missing): the file
/// becomes the process's standard handles, which Rust's output asks for on every write.
pub fn log_to(path: &str) -> std::io::Result<()> {
    use std::os::windows::io::IntoRawHandle;
    let f = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
    let h = f.into_raw_handle() as HANDLE;
    for which in [STD_OUTPUT_HANDLE, STD_ERROR_HANDLE] {
        // SAFETY: a valid handle this process owns (kept open for the process's life).
        if unsafe { SetStdHandle(which, h) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Windows has no fork: `-D` is refused.
pub fn daemonize(_keep_output: bool) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "running as a daemon (-D) is not available on windows; run the server as a service, or with `start /b`",
    ))
}

/// Windows files have no Unix permission bits: None (nothing is checked).
pub fn mode(_path: &Path) -> Option<u32> {
    None
}

/// Opens `path` for appending (its access is what its directory's access list gives).
pub fn append_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().create(true).append(true).open(path)
}

/// Not told on Windows: warnings go to stderr as well.
pub fn stderr_is_stdout() -> bool {
    false
}

/// Whether process `pid` exists (it can be opened for a query).
pub fn alive(pid: i32) -> bool {
    let Ok(pid) = u32::try_from(pid) else { return false };
    // SAFETY: OpenProcess with a query-only right; the handle is closed at once.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return false;
        }
        CloseHandle(h);
    }
    true
}

/// No statistics signal on Windows (no SIGUSR1): the counters are printed when the server stops.
pub fn on_stats_signal(_flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::io::Result<()> {
    Ok(())
}

/// Root is a Unix notion; `tune`, the only command that asks, is refused on Windows before.
pub fn is_root() -> bool {
    false
}

/// What the platform refused of realtime scheduling (`realtime`), with the call that refused it.
#[derive(Debug)]
pub struct RealtimeRefused {
    pub call: &'static str,
    pub err: std::io::Error,
}

/// iperf 2's `-z`: realtime round-robin scheduling has no counterpart built here for Windows (as
/// iperf 2's own Windows build, which has no `sched_setscheduler` either).
pub fn realtime() -> Result<(), RealtimeRefused> {
    Err(RealtimeRefused {
        call: "realtime scheduling",
        err: std::io::Error::new(std::io::ErrorKind::Unsupported, "not available on Windows"),
    })
}
