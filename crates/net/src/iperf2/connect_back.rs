//! iperf 2's `-r` and `-d` on landspeed's server (`serve --connect-back`, the `iperf -s` drop-in's
//! default). A client's header names a port it listens on; the server opens as many connections
//! back to the client's address as the client opened, from the address the client reached, and
//! sends on them the header's amount in its write size, with no header of its own (iperf 2.1.8's
//! server does the same): beside the client's streams (`-d`, one test both ways) or after them
//! (`-r`, two tests, each logged). Only the address the client's connections came from is
//! dialled, never a port below 1024 (`Unserved::BackPort`), within the handshake timeout, under
//! the admission the test already holds (its limits count both directions).

use super::server::{run_logged, Legs, Stream};
use crate::host::Shared;
use landspeed_core::config::{Direction, Test, TestSpec};
use landspeed_iperf2::{ConnectBack, Dual, TcpPlan};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs a test that asked for connections back (`back`) over the client's `streams`, as admitted
/// (`test`: both directions).
pub(super) fn serve(
    streams: &[Stream],
    back: ConnectBack,
    (plan, test): (&TcpPlan, &Test),
    peer: SocketAddr,
    shared: &Arc<Shared>,
) {
    let timeout = shared.opts.handshake_timeout;
    let one_way = |direction| test.changed(|s: &mut TestSpec| s.direction = direction);
    let (Ok(forward), Ok(reverse)) = (one_way(Direction::Forward), one_way(Direction::Reverse)) else {
        // A test valid both ways is valid each way; nothing to run if not.
        return;
    };
    let ends: Vec<_> = streams
        .iter()
        .map(|s| (s.socket.local_addr(), s.socket.peer_addr()))
        .collect();
    match back.dual {
        Dual::Simultaneous => match dial(&ends, back.port, timeout) {
            Ok(socks) => run_logged(Legs::of(streams, &socks), (plan, test), (peer, None), shared),
            Err(e) => run_logged(Legs::of(streams, &[]), (plan, &forward), (peer, Some(e)), shared),
        },
        Dual::Tradeoff => {
            run_logged(Legs::of(streams, &[]), (plan, &forward), (peer, None), shared);
            // The client's own connections end here, as iperf 2's server ends them (its client
            // waits for that before its report).
            for s in streams {
                let _ = s.socket.shutdown(std::net::Shutdown::Both);
            }
            if shared.shutdown.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            let (socks, failed) = match dial(&ends, back.port, timeout) {
                Ok(socks) => (socks, None),
                Err(e) => (vec![], Some(e)),
            };
            let legs = Legs {
                ack: false,
                ..Legs::of(streams, &socks)
            };
            if failed.is_none() {
                run_logged(legs, (plan, &reverse), (peer, None), shared);
            } else {
                let mut log = landspeed_core::server_log::TestLog::new(peer, "iperf2");
                log.protocol = super::server::protocol(&streams[0].header);
                log.direction = Some(Direction::Reverse);
                log.error = failed;
                shared.emit(crate::host::ServerEvent::Test(log));
            }
        }
    }
}

/// A client connection's own address and its peer's.
type Ends = (std::io::Result<SocketAddr>, std::io::Result<SocketAddr>);

/// One connection back to the client for each of its own, each from the address it reached and to
/// the address it came from, at `port`; all within `timeout`.
fn dial(ends: &[Ends], port: u16, timeout: Duration) -> Result<Vec<TcpStream>, String> {
    let until = Instant::now() + timeout;
    let mut out = vec![];
    for (k, e) in ends.iter().enumerate() {
        let (local, peer) = match e {
            (Ok(l), Ok(p)) => (*l, *p),
            (Err(e), _) | (_, Err(e)) => return Err(format!("connecting back: stream {k}: {e}")),
        };
        let to = SocketAddr::new(peer.ip(), port);
        let socket = connect_until(local, to, until)
            .map_err(|e| format!("connecting back to the client at {to} (-r/-d): {e}"))?;
        out.push(socket);
    }
    Ok(out)
}

/// How long a refused connection back is tried again: iperf 2.1.8's client may open its listener
/// after its own connections (its listener is a thread of its own), so a server that answers at
/// once can find the port closed for a moment.
const REFUSED_RETRY: Duration = Duration::from_secs(3);

/// A connection to `to` from `local`'s address by `until`, tried again every 20 ms while refused,
/// for at most `REFUSED_RETRY`.
fn connect_until(local: SocketAddr, to: SocketAddr, until: Instant) -> std::io::Result<TcpStream> {
    let refused_until = Instant::now() + REFUSED_RETRY;
    loop {
        let left = until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        match connect_from(local, to, left) {
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() + Duration::from_millis(20) < refused_until.min(until) =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// A TCP connection to `to` from `local`'s address (any port), within `timeout`.
fn connect_from(local: SocketAddr, to: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    socket.bind(&SocketAddr::new(local.ip(), 0).into())?;
    socket.connect_timeout(&to.into(), timeout)?;
    Ok(socket.into())
}
