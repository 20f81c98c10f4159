//! landspeed-core holds everything about a throughput test that does not touch a socket, a thread or a
//! clock: units, the validated test configuration, interval statistics and the `RunResult` that every
//! output is rendered from (landspeed's control protocol is landspeed-proto, which builds on this). Keeping it free of I/O lets it be tested deterministically, fuzzed, and reused by
//! every driver (landspeed's own protocol, iperf3 compatibility, the WAN emulator's tests).

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod address;
pub mod assemble;
pub mod clock;
pub mod config;
pub mod cpu_bound;
pub mod emulated;
pub mod emulator;
pub mod endpoint;
pub mod files;
pub mod frames;
pub mod intent;
pub mod limit;
pub mod lsr;
pub mod multicast;
pub mod ndt7;
pub mod path;
pub mod payload;
pub mod quic_perf;
pub mod result;
pub mod server_log;
pub mod session_id;
pub mod stall;
pub mod stats;
pub mod tls;
pub mod tos;
pub mod transactions;
pub mod transit;
pub mod transit_bins;
pub mod udp;
pub mod units;
pub mod verdict;

/// The version of landspeed's software, sent in the handshake and written into every result.
pub const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");
