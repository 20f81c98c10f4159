//! The command line's own dealings with the operating system, in one place with one implementation
//! per platform (this file for Linux, `sys_windows.rs` for Windows): starting another program in this
//! process's place, detaching as a daemon, redirecting output to a log file, file permissions of
//! keys, whether a process is alive, and the statistics signal. The engine's counterpart is
//! `landspeed_engine::os`.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Replaces this process with `cmd` (exec); returns only if that failed.
pub fn exec(cmd: &mut std::process::Command) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    cmd.exec()
}

/// Sends standard output and standard error to the end of `path` (created if missing).
pub fn log_to(path: &str) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 of an open descriptor onto a standard one; `f` outlives the call.
        if unsafe { libc::dup2(f.as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Detaches from the terminal: the parent exits at once with 0, the child leads a new session with
/// standard input on /dev/null, and standard output and error there too unless `keep_output` (a log
/// file already took them). Called while the process has one thread, before anything starts.
pub fn daemonize(keep_output: bool) -> std::io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    // SAFETY: fork in a single-threaded process; the parent only calls _exit.
    match unsafe { libc::fork() } {
        -1 => return Err(std::io::Error::last_os_error()),
        0 => {}
        // SAFETY: _exit ends the parent without running anything of the child's state.
        _ => unsafe { libc::_exit(0) },
    }
    // SAFETY: setsid and dup2 on descriptors this process owns.
    unsafe {
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut onto = vec![libc::STDIN_FILENO];
        if !keep_output {
            onto.extend([libc::STDOUT_FILENO, libc::STDERR_FILENO]);
        }
        for fd in onto {
            if libc::dup2(null.as_raw_fd(), fd) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// A file's permission bits (None if it cannot be read).
pub fn mode(path: &Path) -> Option<u32> {
    Some(std::fs::metadata(path).ok()?.permissions().mode())
}

/// Opens `path` for appending, creating it readable and writable by its owner only.
pub fn append_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// True when stdout and stderr are one open file (the same terminal, pipe or file): the same
/// device and inode.
pub fn stderr_is_stdout() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let id = |fd: std::os::fd::BorrowedFd<'_>| {
        let m = std::fs::File::from(fd.try_clone_to_owned().ok()?)
            .metadata()
            .ok()?;
        Some((m.dev(), m.ino(), m.rdev()))
    };
    match (id(std::io::stdout().as_fd()), id(std::io::stderr().as_fd())) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Whether process `pid` exists (signal 0: nothing is sent).
pub fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// `kill -USR1 PID` raises `flag` (the server then prints its counters).
pub fn on_stats_signal(flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::io::Result<()> {
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, flag).map(|_| ())
}

/// Whether this process runs as root (effective user 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// What the kernel refused of realtime scheduling (`realtime`), with the call that refused it.
#[derive(Debug)]
pub struct RealtimeRefused {
    /// `sched_setscheduler` or `mlockall`.
    pub call: &'static str,
    pub err: std::io::Error,
}

/// iperf 2's `-z`: this thread, and every thread it starts afterwards (they inherit both), scheduled
/// round-robin at the realtime policy's highest priority, and the process's memory locked (what
/// it has and what it maps later), so no page fault waits on the disk. Needs root or
/// CAP_SYS_NICE and CAP_IPC_LOCK; the kernel's realtime throttling (95% of each second by default)
/// still leaves the rest of the machine its share.
pub fn realtime() -> Result<(), RealtimeRefused> {
    // SAFETY: plain system calls on this thread and process, with a parameter they only read; the
    // parameter is all zeros but its priority (musl's has more fields than glibc's).
    unsafe {
        let mut param: libc::sched_param = std::mem::zeroed();
        param.sched_priority = libc::sched_get_priority_max(libc::SCHED_RR);
        if libc::sched_setscheduler(0, libc::SCHED_RR, &param) < 0 {
            return Err(RealtimeRefused {
                call: "sched_setscheduler",
                err: std::io::Error::last_os_error(),
            });
        }
        if libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) != 0 {
            return Err(RealtimeRefused {
                call: "mlockall",
                err: std::io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}
