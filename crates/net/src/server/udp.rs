//! UDP on the server: a UDP socket on the same address and port as the TCP listener receives each
//! stream's hello (the same 28-byte data preamble TCP streams start with), and the test it names opens
//! a socket of its own on that port, connected to the client (so the kernel delivers that client's
//! datagrams to it), and answers with the preamble as an acknowledgement. Hellos are resent by the
//! client until acknowledged, so a repeated hello only gets the acknowledgement again. A hello from an
//! address other than the control connection's is first challenged (`proto::udp_hello`), so
//! the server never sends a test to an address that asked for nothing.

use super::{Shared, TestError};
use crate::control::{Arrival, Input};
use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::Role;
use landspeed_engine::supervisor::Wake;
use landspeed_engine::transport::udp::UdpStream;
use landspeed_proto::udp_hello::{Hello, Verdict};
use landspeed_proto::{Preamble, SessionId};
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// A UDP socket bound to `addr` with SO_REUSEPORT, so per-stream sockets can share the port.
pub(super) fn bind(addr: SocketAddr, v6only: Option<bool>) -> std::io::Result<UdpSocket> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    landspeed_engine::os::share_port(&s)?;
    if let Some(v) = v6only {
        s.set_only_v6(v)?;
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Receives hellos on one listener and hands them to their test, and answers echo probes (`landspeed
/// path`, `run --latency`), until the server shuts down.
pub(super) fn listen(sock: UdpSocket, shared: &Shared) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = landspeed_path::stamp::enable(&sock);
    let local = sock.local_addr().ok();
    let mut buf = vec![0u8; 65536];
    while !shared.shutdown.load(Relaxed) {
        let Ok((n, peer, stamp)) = landspeed_path::stamp::recv(&sock, &mut buf) else {
            continue;
        };
        if buf[..4.min(n)] == landspeed_core::path::ECHO_MAGIC {
            if shared.allowed(peer) {
                let rx_ns = stamp.unwrap_or_else(landspeed_path::realtime_ns);
                if let Some(len) = landspeed_core::path::echo::answer(&mut buf[..n], rx_ns) {
                    let _ = sock.send_to(&buf[..len], peer);
                }
            }
            continue;
        }
        if buf[..n] == super::iperf3_udp::HELLO {
            if let Some(local) = local {
                super::iperf3_udp::route_hello(shared, peer, local);
            }
            continue;
        }
        if let (Some(hello), Some(local)) = (Hello::parse(&buf[..n]), local) {
            take_hello(&sock, shared, hello, (peer, local));
        }
    }
}

/// A landspeed UDP hello from `peer`: handed to its test when `--allow` admits `peer`, its MAC proves
/// it in a keyed test (else refused without an answer), and `peer` is validated (the control connection's address, or a hello echoing the token sent to it), else
/// answered with a challenge and nothing more (udp_hello's rule: no test data to an address that has
/// not shown it receives there).
fn take_hello(sock: &UdpSocket, shared: &Shared, hello: Hello, (peer, local): (SocketAddr, SocketAddr)) {
    if !shared.allowed(peer) {
        return shared.count_refused(super::RefusalKind::NotAllowed);
    }
    let Some(w) = shared
        .udp
        .lock()
        .ok()
        .and_then(|r| r.get(&hello.session).cloned())
    else {
        return;
    };
    if w.proven(&hello.preamble()).is_err() {
        // Not even a challenge: without the key, a hello gets nothing back. Counted, not logged (a
        // line per forged datagram would let anyone fill the log).
        return shared.count_refused(super::RefusalKind::ForeignStream);
    }
    match shared.udp_validator.judge(&hello, peer, w.control) {
        Verdict::Accept => {
            let arrival = Input::Arrival(Arrival::Udp(hello.stream, peer, local));
            let _ = w.tx.send(Wake::External(arrival));
        }
        Verdict::Challenge(c) => {
            shared.count_refused(super::RefusalKind::UdpUnvalidated);
            let _ = sock.send_to(&c.encode(), peer);
        }
    }
}

/// The acknowledgement of a hello: the stream's version-1 preamble, whatever the hello's version.
fn ack(sid: SessionId, id: u32) -> Vec<u8> {
    Preamble::data(sid, id, None).encode()
}

/// Takes the hello of stream `id` of test `sid`: a socket of its own on the listener's address,
/// connected to the client, buffers sized, and the hello acknowledged. True for a new stream; a
/// repeated hello (the client resends until acknowledged) is only acknowledged again.
pub(super) fn accept_hello(
    socks: &mut HashMap<u32, UdpSocket>,
    spec: &TestSpec,
    sid: SessionId,
    (id, peer, local): (u32, SocketAddr, SocketAddr),
) -> Result<bool, TestError> {
    if let Some(s) = socks.get(&id) {
        let _ = s.send(&ack(sid, id));
        return Ok(false);
    }
    let v6only = local.is_ipv6().then_some(!local.ip().is_unspecified());
    let udp_err = |err| TestError::UdpStream { id, err };
    let s = bind(local, v6only).map_err(udp_err)?;
    s.connect(peer).map_err(udp_err)?;
    let buffer = landspeed_engine::transport::udp::DEFAULT_BUFFER;
    landspeed_engine::sockopt::udp_options(&s, spec, buffer)
        .map_err(|e| udp_err(std::io::Error::other(e)))?;
    let _ = s.send(&ack(sid, id));
    socks.insert(id, s);
    Ok(true)
}

/// The test's UDP streams from their sockets, in stream order.
pub(super) fn streams(socks: HashMap<u32, UdpSocket>, spec: &TestSpec) -> Vec<UdpStream> {
    let mut streams: Vec<UdpStream> = socks
        .into_iter()
        .map(|(id, socket)| UdpStream::of_test(spec, id, Role::at_server, socket))
        .collect();
    streams.sort_by_key(|s| s.id);
    streams
}
