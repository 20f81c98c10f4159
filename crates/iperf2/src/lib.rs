//! iperf 2's wire format, without I/O.
//!
//! iperf 2 (2.1.x, Debian's `iperf`) is the tool still maintained for what iperf 3 declined
//! (multicast, trip times, isochronous frames, request/response); scripts and images around
//! `iperf` speak it. Its protocol has no control channel: a TCP client's first bytes, and every UDP
//! datagram after a 16-byte sequence and timestamp, carry the client's test header (what to run,
//! how long, which way, which version), and a UDP test ends with negative sequence numbers the
//! server acknowledges with its report. This crate holds those formats as typed values, parsed and
//! written byte for byte as iperf 2.1.8 sends them (its tests are captures of that binary), so the
//! server and client that speak it (issue #68) share one checked reading. docs/iperf2.md has the
//! layout and what each field means.

pub mod ack;
pub mod bounceback;
pub mod burst;
pub mod detect;
pub mod header;
pub mod isoch;
pub mod receipt;
pub mod report;
pub mod spec;
pub mod udp;

/// The big-endian word at `at` (every field of iperf 2's formats is one or a pair).
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Bytes from their hex (the tests' captures).
#[cfg(test)]
pub(crate) fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

pub use ack::HeaderAck;
pub use header::{Amount, ClientHeader, Dual, Extension, HeaderError, Version};
pub use isoch::FramePayload;
pub use receipt::Receipt;
pub use report::ServerReport;
pub use spec::{ConnectBack, NotAsked, TcpPlan, Unserved};
pub use udp::{Datagram, DatagramError};
