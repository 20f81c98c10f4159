//! The operating system under the engine, in one place: every system call the engine makes that is
//! not the same on Linux and Windows goes through this module, which has one implementation per
//! platform with the same names (`linux.rs`, `windows.rs`). The rest of the engine is written once
//! against it. What each platform provides, feature by feature, is [`crate::platform`]'s table;
//! where Windows lacks something the Windows implementation says so (an `Unsupported` error, `None`,
//! or an uninhabited type that cannot be built), never by doing nothing quietly.
//!
//! Linux is the reference (`cfg(not(windows))`: the engine is built for Linux and, in CI, for
//! Windows; other Unix systems are not a target, docs/install.md).

#[cfg(not(windows))]
#[path = "linux.rs"]
mod imp;
#[cfg(windows)]
#[path = "windows.rs"]
mod imp;

pub use imp::*;

/// Readiness of a set of non-blocking sockets, as the TCP worker waits on it: registered once, each
/// with a token (its index) and whether it waits to write or to read; `wait` reports the tokens that
/// became ready among those still waiting.
pub trait Readiness {
    /// Adds a socket; `writable` for senders, readable otherwise.
    fn register(&mut self, sock: &std::net::TcpStream, token: usize, writable: bool) -> std::io::Result<()>;
    /// Waits up to `timeout` and calls `ready(token)` for each socket that became ready; `waiting(token)`
    /// says which registered sockets still matter (ended or already-ready ones are left out).
    fn wait(
        &mut self,
        timeout: std::time::Duration,
        waiting: &dyn Fn(usize) -> bool,
        ready: &mut dyn FnMut(usize),
    ) -> std::io::Result<()>;
}
