//! The drop-in's process options, as iperf3 treats them: `--logfile` (everything the program prints,
//! output and errors, appended to a file), `-D` (the server detaches: a new session, the standard
//! streams on /dev/null or the log file, the working directory kept, as iperf3's `daemon(1, 0)`), and
//! `-I` (a pid file, `common::pidfile`). They change where the program runs and writes, never what
//! it measures, so they are done here, before the client runs or the server is started.

use std::os::fd::AsRawFd;

/// Sends standard output and standard error to the end of `path` (created if missing).
pub(super) fn log_to(path: &str) -> std::io::Result<()> {
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
pub(super) fn daemonize(keep_output: bool) -> std::io::Result<()> {
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
