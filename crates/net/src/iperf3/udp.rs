//! iperf3's UDP streams on landspeed's port. iperf3's UDP hello (the 4 bytes `9876`) carries no cookie,
//! and iperf3 itself serves one test at a time; landspeed serves many, so a hello goes to the oldest
//! iperf3 UDP test from the same client address that still waits for streams. The test answers from a
//! socket of its own on the port, connected to the client, with `6789`.

use super::arrivals::{control_ip, receivers, streams_error};
use crate::control::{Arrival, Event, Input, Link};
use crate::host::{bind_udp, MissingWhy, Shared, TestError};
use landspeed_core::config::{Flow, TestSpec};
use landspeed_core::endpoint::Role;
use landspeed_engine::supervisor::Wake;
use landspeed_engine::transport::udp::UdpStream;
use landspeed_iperf3::session::{ServerAction, ServerSession};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// iperf3's UDP hello and its answer.
pub(crate) const HELLO: [u8; 4] = *b"9876";
pub(super) const REPLY: [u8; 4] = *b"6789";

/// iperf3 UDP tests waiting for streams: (key, client address, where to send each hello), oldest first.
use crate::host::Iperf3UdpWaiting as Waiting;

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// Hands an iperf3 UDP hello to the oldest waiting test from the same address; false if none waits.
/// iperf3's hello has no token to prove its address by, so only the control connection's address is
/// served (that is also where iperf3's own client sends it from).
pub(crate) fn route_hello(shared: &Shared, peer: SocketAddr, local: SocketAddr) -> bool {
    if !shared.allowed(peer) {
        return false;
    }
    let Ok(w) = shared.iperf3_udp.lock() else {
        return false;
    };
    let ip = canonical(peer.ip());
    match w.iter().find(|(_, a, _)| *a == ip) {
        Some((_, _, tx)) => {
            let hello = Input::Arrival(Arrival::Iperf3Udp(peer, local));
            tx.send(Wake::External(hello)).is_ok()
        }
        None => false,
    }
}

struct Registered<'a>(&'a Waiting, u64);
impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut w) = self.0.lock() {
            w.retain(|(k, _, _)| *k != self.1);
        }
    }
}

/// Waits among the iperf3 UDP tests of the client's address, says CREATE_STREAMS and collects the
/// test's UDP streams in hello order (with `--bidir` the client's sending streams come first, as for
/// TCP), each answered from a socket of its own, until the session says the test runs.
pub(super) fn collect(
    link: &mut Link<ServerSession>,
    spec: &TestSpec,
    shared: &Shared,
) -> Result<Vec<UdpStream>, TestError> {
    let peer_ip = control_ip(link)?;
    let key = getrandom::u64().unwrap_or_else(|_| Instant::now().elapsed().as_nanos() as u64);
    shared
        .iperf3_udp
        .lock()
        .map_err(|_| TestError::Poisoned)?
        .push((key, peer_ip, link.tx.clone()));
    let registered = Registered(&shared.iperf3_udp, key);
    link.wire.with(|s| s.create_streams(Instant::now()))?;
    let n = spec.total_streams();
    let mut socks = vec![];
    link.run(|link, ev| match ev {
        Event::Arrival(Arrival::Iperf3Udp(peer, local)) => {
            socks.push(answer(socks.len() as u32, peer, local)?);
            link.wire.with(|s| s.on_stream(Instant::now()))?;
            Ok(None)
        }
        Event::Action(ServerAction::Run) => Ok(Some(())),
        Event::Tick if shared.shutdown.load(Relaxed) => {
            link.wire.conn.streams_failed();
            Err(TestError::StreamsMissing {
                arrived: socks.len(),
                expected: n,
                why: MissingWhy::Shutdown,
            })
        }
        _ => Ok(None),
    })
    .map_err(|e| streams_error(e, socks.len(), n))?;
    drop(registered);
    Ok(streams(socks, spec))
}

/// Stream `id`'s own socket on the listener's address, connected to the client, which says `6789`.
fn answer(id: u32, peer: SocketAddr, local: SocketAddr) -> Result<UdpSocket, TestError> {
    let v6only = local.is_ipv6().then_some(!local.ip().is_unspecified());
    let udp_err = |err| TestError::UdpStream { id, err };
    let s = bind_udp(local, v6only).map_err(udp_err)?;
    s.connect(peer).map_err(udp_err)?;
    let _ = s.send(&REPLY);
    Ok(s)
}

/// The test's streams from their sockets in arrival order (iperf3's receiving streams first), sized,
/// marked and, when asked, with DF set (over IPv4: IPv6 never fragments on the way).
fn streams(socks: Vec<UdpSocket>, spec: &TestSpec) -> Vec<UdpStream> {
    let receivers = receivers(spec, socks.len());
    let buffer = landspeed_engine::transport::udp::DEFAULT_BUFFER;
    socks
        .into_iter()
        .enumerate()
        .map(|(k, socket)| {
            // The parameters' checks (TOS 0-255) leave nothing the kernel refuses on a UDP socket,
            // so there is no failure to answer here.
            let _ = landspeed_engine::sockopt::udp_options(&socket, spec, buffer);
            let flow = if k < receivers {
                Flow::ClientToServer
            } else {
                Flow::ServerToClient
            };
            UdpStream {
                id: k as u32,
                flow,
                role: Role::at_server(flow),
                socket,
                // iperf3's server sends until TEST_END, whatever the end condition: the client ends a
                // -n/-k test when it has *received* that much, so a budget would hang it after a loss.
                datagrams: None,
            }
        })
        .collect()
}
