//! The data engine: what moves a test's bytes and measures them, apart from any protocol. One
//! [`supervisor`] runs every [`transport`] (TCP through epoll or io_uring, with zero-copy sends; UDP
//! paced per stream) on pinned worker threads, samples every stream each interval and builds the
//! per-stream report; around it, what the kernel and the host say ([`tcp_info`], [`cpu`], [`host`],
//! [`tune`]), socket options ([`sockopt`]), CPU pinning ([`pin`]), file descriptors ([`rlimit`]) and
//! disk-to-disk files ([`files`]). The protocol drivers (landspeed-net) hand it connected sockets and a
//! validated test; the next data paths plug in as transports here.
#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod capabilities;
pub mod cpu;
pub mod files;
pub mod host;
pub mod mptcp;
pub mod netstat;
pub mod os;
pub mod pin;
pub mod platform;
pub mod quic;
pub mod rlimit;
pub mod sockopt;
pub mod supervisor;
pub mod tcp_info;
pub mod tls;
pub mod transport;
pub mod tune;
/// MSG_ZEROCOPY: Linux only (`os::ZcSender` is the one the transport uses).
#[cfg(not(windows))]
pub mod zerocopy;
