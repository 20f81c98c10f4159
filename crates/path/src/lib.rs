//! Measuring the path: echo probes against a landspeed server (RTT, and `run --latency` in the
//! background of a test) and TCP connect times against any host. The probes' formats and the statistics
//! are in landspeed-core's `path`; this crate does the sending, receiving and timing, and runs the
//! probes `landspeed path` and `run --path` ask for ([`campaign`]).
#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod campaign;
pub mod capacity;
pub mod echo;
#[cfg_attr(windows, path = "windows/errqueue.rs")]
pub mod errqueue;
pub mod icmp;
pub mod pmtu;
#[cfg_attr(windows, path = "windows/stamp.rs")]
pub mod stamp;
pub mod tcp_ping;
pub mod trace;

/// A UDP socket on an ephemeral port of `dst`'s family, connected to `dst` when `connect` (probes that
/// go to one destination), unconnected otherwise (traceroute's rising ports).
pub fn udp_socket(dst: std::net::SocketAddr, connect: bool) -> std::io::Result<std::net::UdpSocket> {
    let any: std::net::IpAddr = if dst.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let s = std::net::UdpSocket::bind((any, 0))?;
    if connect {
        s.connect(dst)?;
    }
    Ok(s)
}

/// IP and UDP header bytes in front of a datagram's payload.
pub fn ip_udp_overhead(v6: bool) -> u32 {
    if v6 {
        48
    } else {
        28
    }
}

/// The wall clock in nanoseconds (what kernel receive timestamps use).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
