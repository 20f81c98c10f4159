//! The drop-in's process options, as iperf3 treats them: `--logfile` (everything the program prints,
//! output and errors, appended to a file), `-D` (the server detaches: a new session, the standard
//! streams on /dev/null or the log file, the working directory kept, as iperf3's `daemon(1, 0)`), and
//! `-I` (a pid file, `common::pidfile`). They change where the program runs and writes, never what
//! it measures, so they are done here, before the client runs or the server is started.

pub(super) use crate::common::sys::{daemonize, log_to};
