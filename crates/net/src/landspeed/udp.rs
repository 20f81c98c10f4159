//! UDP streams of landspeed's own protocol, on the server: the listener (`server::udp`) hands
//! each stream's hello (the same 28-byte data preamble TCP streams start with) here, and the test it
//! names opens a socket of its own on that port, connected to the client (so the kernel delivers
//! that client's datagrams to it), and answers with the preamble as an acknowledgement. Hellos are
//! resent by the client until acknowledged, so a repeated hello only gets the acknowledgement again.
//! A hello from an address other than the control connection's is first challenged
//! (`proto::udp_hello`), so the server never sends a test to an address that asked for nothing.

use crate::control::{Arrival, Input};
use crate::host::{bind_udp, RefusalKind, Shared, TestError};
use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::Role;
use landspeed_engine::supervisor::Wake;
use landspeed_engine::transport::udp::UdpStream;
use landspeed_proto::udp_hello::{Hello, Verdict};
use landspeed_proto::{Preamble, SessionId};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};

/// A landspeed UDP hello from `peer`: handed to its test when `--allow` admits `peer`, its MAC proves
/// it in a keyed test (else refused without an answer), and `peer` is validated (the control connection's address, or a hello echoing the token sent to it), else
/// answered with a challenge and nothing more (udp_hello's rule: no test data to an address that has
/// not shown it receives there).
pub(crate) fn take_hello(
    sock: &UdpSocket,
    shared: &Shared,
    hello: Hello,
    (peer, local): (SocketAddr, SocketAddr),
) {
    if !shared.allowed(peer) {
        return shared.count_refused(RefusalKind::NotAllowed);
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
        return shared.count_refused(RefusalKind::ForeignStream);
    }
    match shared.udp_validator.judge(&hello, peer, w.control) {
        Verdict::Accept => {
            let arrival = Input::Arrival(Arrival::Udp(hello.stream, peer, local));
            let _ = w.tx.send(Wake::External(arrival));
        }
        Verdict::Challenge(c) => {
            shared.count_refused(RefusalKind::UdpUnvalidated);
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
pub(crate) fn accept_hello(
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
    let s = bind_udp(local, v6only).map_err(udp_err)?;
    s.connect(peer).map_err(udp_err)?;
    let buffer = landspeed_engine::transport::udp::DEFAULT_BUFFER;
    landspeed_engine::sockopt::udp_options(&s, spec, buffer)
        .map_err(|e| udp_err(std::io::Error::other(e)))?;
    let _ = s.send(&ack(sid, id));
    socks.insert(id, s);
    Ok(true)
}

/// The test's UDP streams from their sockets, in stream order.
pub(crate) fn streams(socks: HashMap<u32, UdpSocket>, spec: &TestSpec) -> Vec<UdpStream> {
    let mut streams: Vec<UdpStream> = socks
        .into_iter()
        .map(|(id, socket)| UdpStream::of_test(spec, id, Role::at_server, socket))
        .collect();
    streams.sort_by_key(|s| s.id);
    streams
}
