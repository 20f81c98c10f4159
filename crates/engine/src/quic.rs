//! QUIC endpoints for the data connections (`--quic`): quinn over rustls, configured for bulk
//! transfer rather than quinn's web-sized defaults (stream windows of 32 MiB, a 64 MiB send window,
//! 4 MiB socket buffers), the congestion controller a test names, and the server's UDP socket sharing
//! its port number with landspeed's UDP listener. Both ends use the TLS identity and fingerprint
//! pinning of `crate::tls`; the data movement itself is `transport::quic`.
//!
//! Sharing the port: the server binds its QUIC socket to the same address and port as the UDP
//! listener (SO_REUSEPORT) and attaches a classic BPF program to the port's socket group that sends
//! each datagram to one of the two by its first bytes: landspeed's own datagrams (echo probes
//! `LSPE`, stream hellos `LSPD`) and anything without QUIC's fixed bit (0x40 in the first byte, as
//! iperf3's `6789` hello) to the listener, every other datagram to QUIC.

use crate::tls::{Identity, TlsError, Trust};
use landspeed_core::tls::TlsCipher;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{TransportConfig, VarInt};
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The ALPN of landspeed's own QUIC data connections.
pub const ALPN_LANDSPEED: &[u8] = b"landspeed";
/// The ALPN of the QUIC performance protocol (draft-banks-quic-performance).
pub const ALPN_PERF: &[u8] = b"perf";

/// Socket buffers asked for on every QUIC socket (the kernel may grant less: net.core.rmem_max).
pub const SOCKET_BUFFER: usize = 4 << 20;

/// The most a sender keeps buffered in quinn, unacknowledged or unsent: a bandwidth-delay product of
/// 5 Gbit/s over 100 ms; also the window a connection starts with.
pub const MAX_SEND_WINDOW: u64 = 64 << 20;
/// The least: what loopback and a LAN need, and what keeps the payload a sender cycles through in
/// the CPU's cache there (a 64 MiB window on loopback was 15-20% slower: docs/benchmarks.md).
pub const MIN_SEND_WINDOW: u64 = 2 << 20;

/// The send window for a connection that delivers `sent_bps` over a round trip of `rtt`: four times
/// its bandwidth-delay product (room to quadruple its rate before the next adjustment), within
/// [`MIN_SEND_WINDOW`] and [`MAX_SEND_WINDOW`].
pub fn send_window(sent_bps: f64, rtt: Duration) -> u64 {
    let bdp = sent_bps / 8.0 * rtt.as_secs_f64();
    ((4.0 * bdp) as u64).clamp(MIN_SEND_WINDOW, MAX_SEND_WINDOW)
}

/// How long a QUIC connection may stay silent before either end drops it.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Transport parameters for bulk tests: windows well above one stream's bandwidth-delay product on
/// a fast path (the send window then follows the path: `transport::quic` sets it by [`send_window`]), `max_streams` concurrent streams each way, and `congestion` (cubic by default).
pub fn transport_config(congestion: Option<&str>, max_streams: u32) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(32 << 20));
    t.receive_window(VarInt::MAX);
    t.send_window(MAX_SEND_WINDOW);
    t.max_concurrent_bidi_streams(VarInt::from_u32(max_streams));
    t.max_concurrent_uni_streams(VarInt::from_u32(max_streams));
    t.max_idle_timeout(Some(IDLE_TIMEOUT.try_into().expect("30 s fits")));
    t.keep_alive_interval(Some(Duration::from_secs(5)));
    match congestion {
        Some("bbr") => t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default())),
        Some("newreno") => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()))
        }
        _ => t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default())),
    };
    t
}

/// A server configuration answering both landspeed's ALPN and the performance protocol's.
pub fn server_config(identity: &Identity, max_streams: u32) -> Result<quinn::ServerConfig, TlsError> {
    let tls = identity.server_config(&[ALPN_LANDSPEED, ALPN_PERF])?;
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| TlsError::Generate(e.to_string()))?;
    let mut c = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    c.transport_config(Arc::new(transport_config(None, max_streams)));
    Ok(c)
}

/// A client configuration for `alpn`, trusting as `trust` says, with the congestion controller named.
pub fn client_config(
    trust: Trust,
    alpn: &[u8],
    congestion: Option<&str>,
    max_streams: u32,
) -> Result<quinn::ClientConfig, TlsError> {
    let tls = crate::tls::client_config(&TlsCipher::ALL, trust, &[alpn])?;
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| TlsError::Generate(e.to_string()))?;
    let mut c = quinn::ClientConfig::new(Arc::new(crypto));
    c.transport_config(Arc::new(transport_config(congestion, max_streams)));
    Ok(c)
}

/// A UDP socket for QUIC on `addr`, with large buffers; `reuse_port` lets it join the port of the
/// server's UDP listener.
pub fn socket(
    addr: SocketAddr,
    reuse_port: bool,
    v6only: Option<bool>,
) -> std::io::Result<std::net::UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if reuse_port {
        crate::os::share_port(&s)?;
    }
    if let Some(v) = v6only {
        s.set_only_v6(v)?;
    }
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Attaches the datagram router to the port group of `sock`: index 0 of the group (the socket bound
/// first, the UDP listener) gets landspeed's and iperf3's datagrams, index 1 (the QUIC socket) the
/// rest. A datagram shorter than four bytes goes to the listener. Linux only (a socket filter).
pub fn route_port(sock: &std::net::UdpSocket) -> std::io::Result<()> {
    crate::os::route_port(sock)
}

/// quinn's endpoint settings: no greasing of QUIC's fixed bit, which the port's router reads.
pub fn endpoint_config() -> quinn::EndpointConfig {
    let mut c = quinn::EndpointConfig::default();
    c.grease_quic_bit(false);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_window_follows_the_bandwidth_delay_product() {
        let ms = Duration::from_millis;
        // Loopback and a LAN: the least, whatever the rate.
        assert_eq!(send_window(10e9, Duration::from_micros(100)), MIN_SEND_WINDOW);
        assert_eq!(
            send_window(0.0, ms(100)),
            MIN_SEND_WINDOW,
            "a connection just started"
        );
        // 1 Gbit/s over 20 ms: 2.5 MB in flight, four times that buffered.
        assert_eq!(send_window(1e9, ms(20)), 10_000_000);
        // A long fast path: the most.
        assert_eq!(send_window(10e9, ms(100)), MAX_SEND_WINDOW);
    }
}
