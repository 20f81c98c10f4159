//! Measuring the path: echo probes against a landspeed server (RTT, and `run --latency` in the
//! background of a test) and TCP connect times against any host. The probes' formats and the statistics
//! are in landspeed-core's `path`; this module does the sending, receiving and timing.

pub mod capacity;
pub mod echo;
pub mod errqueue;
pub mod pmtu;
pub mod stamp;
pub mod tcp_ping;
pub mod trace;

/// The wall clock in nanoseconds (what kernel receive timestamps use).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
