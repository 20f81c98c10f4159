//! iperf 2's UDP `-r` and `-d` on landspeed's server (`serve --connect-back --iperf2-udp-send`; the
//! `iperf -s` drop-in's default, as iperf 2's server has both). As captured from iperf 2.1.8
//! (`iperf -c -u -d -L 5310` against `iperf -s -u`, docs/iperf2.md): the server receives the
//! client's stream as any UDP test and, beside it (`-d`) or after it (`-r`), runs a UDP client of
//! its own to the client's address at the header's `-L` port, from a port of its own: datagrams
//! with iperf 2's prefix and a client header (no dual flags), at the client's rate for its time or
//! bytes, then its end, repeated until the client's listener reports back (what it received, lost,
//! out of order, its jitter). That stream is a test of its own in the log. Only the address the
//! client's datagrams came from is sent to, never a port below 1024, within the limits the test
//! was admitted under; an ICMP port unreachable ends it once it has sent for 250 ms (`BACK_GRACE`:
//! iperf 2.1.8's listener binds again for each stream, so a second stream can meet a closed port
//! for a moment).

use crate::host::{bind_udp, Shared, TestLog};
use landspeed_core::config::{Direction, Flow, Test, TestSpec};
use landspeed_core::endpoint::{EndpointReport, Role};
use landspeed_engine::transport::udp::{UdpFormat, UdpStream, IPERF2_HEADER_BYTES};
use landspeed_iperf2::ClientHeader;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::SystemTime;

/// Sends the server's stream of a UDP `-r`/`-d` test (`test`, the client's one-way test) to the
/// client at `peer`'s address and `port`, from `local`'s address, and logs it as a test of its own.
pub(super) fn send_back(
    header: &ClientHeader,
    test: &Test,
    (peer, local, port): (SocketAddr, SocketAddr, u16),
    shared: &Arc<Shared>,
) {
    // The address family of the socket the client reached (an IPv4 client of a dual-stack
    // listener comes as an IPv4-mapped address).
    let to = SocketAddr::new(peer.ip().to_canonical(), port);
    let mut log = TestLog::new(to, "iperf2");
    log.protocol = format!("{} (UDP, back)", super::server::protocol(header));
    log.streams = 1;
    log.direction = Some(Direction::Reverse);
    match run(test, (to, local), shared) {
        Ok((result, error)) => {
            log.bytes_sent = result.summary.bytes_sent;
            log.duration_s = result.summary.duration_s;
            log.error = error;
            log.result = Some(Box::new(result));
        }
        Err(e) => log.error = Some(format!("sending back to the client at {to} (-r/-d): {e}")),
    }
    shared.tests_done.fetch_add(1, Relaxed);
    shared.emit(crate::host::ServerEvent::Test(log));
}

/// The stream sent and the client's report of it: the result, and why it failed if it did.
fn run(
    test: &Test,
    (to, local): (SocketAddr, SocketAddr),
    shared: &Shared,
) -> std::io::Result<(landspeed_core::result::RunResult, Option<String>)> {
    let reverse = test
        .changed(|s: &mut TestSpec| s.direction = Direction::Reverse)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let sock = open(to, local)?;
    let here_addr = super::udp::local_end(&sock, local);
    let header = client_header(&reverse, to.port())?;
    let streams = [UdpStream::of_test(&reverse, 0, Role::at_server, sock)];
    let started = SystemTime::now();
    let format = UdpFormat::Iperf2 { header, start: None };
    let grace = super::udp_send::BACK_GRACE;
    let (out, cut) = super::udp_send::send(&streams, &reverse, (format, grace), (shared, None, None));
    let s = &out.streams[0];
    let len = reverse.length_bytes as usize;
    let report = super::udp_client::end(&streams[0].socket, &header, len, s.calls + s.send_errors);
    let mut here = out.report(None, vec![]);
    // The first end counts as a datagram of the test, as iperf 2 counts it.
    for s in &mut here.streams {
        s.bytes += reverse.length_bytes;
        s.calls += 1;
    }
    let client = EndpointReport {
        software: "iperf 2 client (its -L listener)".into(),
        streams: report
            .iter()
            .map(|r| super::udp_client::received(0, Flow::ServerToClient, r))
            .collect(),
        elapsed_s: here.elapsed_s,
        ..EndpointReport::default()
    };
    let error = cut.or_else(|| s.error.clone()).or_else(|| {
        report
            .is_none()
            .then(|| "no report from the client's listener".into())
    });
    here.warnings
        .push("iperf 2's payload is not landspeed's: nothing was verified".into());
    let result = landspeed_core::assemble::assemble(&landspeed_core::assemble::Inputs {
        spec: &reverse,
        context: super::server::iperf2_context((Some(here_addr), Some(to)), started, 1),
        client: &client,
        server: &here,
        client_samples: &[],
        server_samples: &out.samples,
    });
    Ok((result, error))
}

/// A socket from `local`'s address (any port) connected to the client's listener at `to`.
fn open(to: SocketAddr, local: SocketAddr) -> std::io::Result<UdpSocket> {
    let from = SocketAddr::new(local.ip(), 0);
    let v6only = from.is_ipv6().then_some(!from.ip().is_unspecified());
    let sock = bind_udp(from, v6only)?;
    sock.connect(to)?;
    Ok(sock)
}

/// The header the server's datagrams carry: a UDP client's, to the client's `-L` port.
fn client_header(test: &Test, port: u16) -> std::io::Result<[u8; IPERF2_HEADER_BYTES]> {
    let h = super::udp_client::client_header(test, port).map_err(|e| std::io::Error::other(e.to_string()))?;
    let bytes = h.encode();
    let mut out = [0u8; IPERF2_HEADER_BYTES];
    out.copy_from_slice(&bytes[..IPERF2_HEADER_BYTES]);
    Ok(out)
}
