//! The server's UDP listener: a UDP socket on the same address and port as the TCP listener tells
//! its datagrams apart by their first bytes: echo probes (`landspeed path`, `run --latency`) are
//! answered here, iperf3's UDP hello goes to `iperf3::udp`, a landspeed stream's hello to
//! `landspeed::udp`, an iperf 2 client's datagram to `iperf2::udp`. A group joined with `--join`
//! has a socket of its own, whose datagrams go to `iperf2::udp` only (iperf 2's multicast senders).

use crate::host::Shared;
use crate::{iperf2, iperf3, landspeed};
use landspeed_proto::udp_hello::Hello;
use std::net::UdpSocket;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Receives hellos on one listener and hands them to their test, and answers echo probes (`landspeed
/// path`, `run --latency`), until the server shuts down.
pub(super) fn listen(sock: UdpSocket, shared: &std::sync::Arc<Shared>) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = landspeed_path::stamp::enable(&sock);
    let local = sock.local_addr().ok();
    // A joined group's socket (`--join`) takes iperf 2's multicast senders only, and answers
    // nothing: whatever it sent would go to an address no handshake proved.
    let group = local.filter(|l| l.ip().is_multicast());
    let mut buf = vec![0u8; 65536];
    while !shared.shutdown.load(Relaxed) {
        let Ok((n, peer, stamp)) = landspeed_path::stamp::recv(&sock, &mut buf) else {
            continue;
        };
        if let Some(g) = group {
            let ns = stamp.unwrap_or_else(landspeed_path::realtime_ns);
            iperf2::udp::take(&buf[..n], ns, (peer, g), shared);
            continue;
        }
        if buf[..4.min(n)] == landspeed_core::path::ECHO_MAGIC {
            if shared.allowed(peer) {
                let rx_ns = stamp.unwrap_or_else(landspeed_path::realtime_ns);
                if let Some(len) = landspeed_core::path::echo::answer(&mut buf[..n], rx_ns) {
                    let _ = sock.send_to(&buf[..len], peer);
                }
            }
            continue;
        }
        if buf[..n] == iperf3::udp::HELLO {
            if let Some(local) = local {
                iperf3::udp::route_hello(shared, peer, local);
            }
            continue;
        }
        if let (Some(hello), Some(local)) = (Hello::parse(&buf[..n]), local) {
            landspeed::udp::take_hello(&sock, shared, hello, (peer, local));
            continue;
        }
        if let Some(local) = local {
            let ns = stamp.unwrap_or_else(landspeed_path::realtime_ns);
            iperf2::udp::take(&buf[..n], ns, (peer, local), shared);
        }
    }
}
