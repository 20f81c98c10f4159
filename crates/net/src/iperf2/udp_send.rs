//! iperf 2's UDP `-R` on landspeed's port, when the operator allows it (`serve --iperf2-udp-send`,
//! the `iperf -s` drop-in's default as it is iperf 2's): the server sends the test's datagrams to
//! the address and port the client's first datagram came from, from the port it reached, as iperf
//! 2.1.8's server does (captured, docs/iperf2.md): numbered from 1 with the sender's clock in
//! iperf 2's prefix, at the header's rate (`-b`) for its time or bytes, then one datagram carrying
//! the next number negated (sent again while the client's port stays open: [`repeat_end`]). iperf 2's server expects no report back for these tests (it marks them
//! `no-udp-fin`), so the server's side is what it sent and the client's is its own output. The
//! client's repeats of its first datagram (until data arrives) are read by no one. Nothing proves
//! the client's address: docs/security.md says what that costs and what bounds it.

use super::server::{inferred_client, protocol, Admitted, Hook};
use crate::host::{Shared, TestLog};
use landspeed_core::config::{Direction, Test};
use landspeed_core::endpoint::Role;
use landspeed_engine::supervisor::{self, EngineOutput, EngineParams, Flags, Wake, Wiring};
use landspeed_engine::transport::udp::{
    iperf2_prefix, Udp, UdpFormat, UdpParams, UdpStream, IPERF2_HEADER_BYTES,
};
use landspeed_iperf2::ClientHeader;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// What follows the prefix in each datagram: iperf 2's digit pattern, as its server's datagrams
/// carry it from their 17th byte on.
fn digits() -> [u8; IPERF2_HEADER_BYTES] {
    std::array::from_fn(|i| b'0' + ((16 + i) % 10) as u8)
}

/// Sends one admitted `-R` stream to `peer` from `local`, then logs it.
pub(super) fn serve(
    (header, epoch): (&ClientHeader, Option<landspeed_iperf2::ack::WireTime>),
    admitted: Admitted,
    (peer, local): (SocketAddr, SocketAddr),
    shared: &Arc<Shared>,
) {
    let test = &admitted.test;
    let Some((sock, local)) = super::udp::open(local, peer, shared) else {
        return;
    };
    let started = SystemTime::now();
    let mut context = super::server::iperf2_context((Some(local), Some(peer)), started, 1);
    context.scheduled_start_unix_s = super::start_at::scheduled_s(epoch, context.started_unix_s);
    let scheduled = context.scheduled_start_unix_s;
    let mut log = TestLog::new(peer, "iperf2");
    log.protocol = format!("{} (UDP)", protocol(header));
    log.streams = 1;
    log.direction = Some(Direction::Reverse);
    let made = super::udp::made_udp(Some(&sock), peer, header);
    let streams = [UdpStream::of_test(test, 0, Role::at_server, sock)];
    let live = shared.opts.live.then(|| crate::host::Live {
        spec: test.spec().clone(),
        context,
        client_ports: vec![Some(peer.port())],
        samples: vec![],
        frames: false,
        made,
    });
    if let Some(l) = &live {
        shared.emit(l.so_far());
    }
    let (out, cut) = send_all(&streams, test, (shared, live, None));
    let s = &out.streams[0];
    repeat_end(
        &streams[0].socket,
        s.calls + s.send_errors,
        test.length_bytes as usize,
    );
    crate::host::add_measured(&mut log, &out);
    log.error = cut.or_else(|| out.streams[0].error.clone());
    let mut result = seen_here(&out, header, test, (local, peer), started);
    result.config.scheduled_start_unix_s = scheduled;
    log.result = Some(Box::new(result));
    shared.tests_done.fetch_add(1, Relaxed);
    shared.emit(crate::host::ServerEvent::Test(log));
}

/// The stream's datagrams (`send`), then its end: one datagram numbered with the next number
/// negated, as iperf 2's server ends what it sends.
pub(super) fn send_all(
    streams: &[UdpStream],
    test: &Test,
    how: (&Shared, Option<crate::host::Live>, Option<&AtomicBool>),
) -> (EngineOutput, Option<String>) {
    let format = UdpFormat::Iperf2 {
        header: digits(),
        start: None,
    };
    let (out, cut) = send(streams, test, (format, std::time::Duration::ZERO), how);
    let s = &out.streams[0];
    end(
        &streams[0].socket,
        s.calls + s.send_errors,
        test.length_bytes as usize,
    );
    (out, cut)
}

/// How long a stream back to a `-r`/`-d` client's listener may meet an ICMP port unreachable
/// before it ends: iperf 2.1.8's UDP listener takes each stream by connecting its socket to the
/// stream's first sender and binding a new one for the next, so a second stream's first datagrams
/// (`-d -P 2`: both start at once) can find no socket there for a moment.
pub(super) const BACK_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// The stream's datagrams at the header's rate (within `--max-rate`), until its time or bytes, the
/// server's cut, or `gone` raised (the client's port closed, as the reader of the same socket
/// learned): why it was cut, returned; with a live view, the test so far as each interval closes.
/// An ICMP port unreachable ends it once it has sent for `grace`.
pub(super) fn send(
    streams: &[UdpStream],
    test: &Test,
    (format, grace): (UdpFormat, std::time::Duration),
    (shared, live, gone): (&Shared, Option<crate::host::Live>, Option<&AtomicBool>),
) -> (EngineOutput, Option<String>) {
    let o = &shared.opts;
    let mut params = EngineParams::for_spec(test, None, None, o.idle_timeout);
    params.send_time = params
        .send_time
        .or(Some(crate::iperf3::server::udp_count_bound(test)));
    let rate = test
        .rate_bps
        .unwrap_or(landspeed_core::config::DEFAULT_UDP_RATE_BPS);
    let udp = Udp {
        streams,
        params: UdpParams {
            rate_bps: landspeed_core::units::lower(Some(rate), o.limits.max_rate_bps).unwrap_or(rate),
            burst: test.burst,
            format,
            // Nothing proved the client's address: no socket there ends the test (a stream back
            // to a `-r`/`-d` client's listener after a grace: `BACK_GRACE`).
            refused_ends_after: Some(grace),
        },
    };
    let (tx, rx) = std::sync::mpsc::channel::<Wake<()>>();
    let flags = Flags::default();
    let mut hook = Hook::new(shared);
    hook.live = live;
    hook.gone = gone;
    let out = supervisor::run(&udp, &params, Wiring::new(&flags, (&tx, &rx), &mut hook, None));
    (out, hook.cut)
}

/// The end: one datagram numbered with the next number negated (`sent` numbers were used), as
/// iperf 2's server sends it.
fn end(sock: &UdpSocket, sent: u64, len: usize) {
    let mut buf = vec![0u8; len.max(16 + IPERF2_HEADER_BYTES)];
    iperf2_prefix(-(sent as i64 + 1), super::udp_client::unix_ns(), &mut buf);
    buf[16..16 + IPERF2_HEADER_BYTES].copy_from_slice(&digits());
    let _ = sock.send(&buf);
}

/// After the first copy of a `-R` test's end, how long the server waits for the client's port to
/// close before it sends the next; the wait doubles after each copy.
const END_FIRST_WAIT: Duration = Duration::from_millis(10);
/// How long a `-R` test's end is repeated at most.
const END_REPEATED_FOR: Duration = Duration::from_secs(2);

/// iperf 2's `-R` client counts until the end and, given a byte count, has no timer: an end lost
/// (a client too busy to read while its receive buffer filled) leaves it waiting for ever, and
/// iperf 2.1.8's server sends it once. Here it is sent again, the same number, while the client's
/// port stays open, for at most [`END_REPEATED_FOR`]: the client reads the first copy that reaches
/// it and closes its socket, which the next copy learns (ICMP port unreachable). The client's
/// repeated first datagrams, still queued on the socket, are read and set aside.
fn repeat_end(sock: &UdpSocket, sent: u64, len: usize) {
    let started = Instant::now();
    let mut wait = END_FIRST_WAIT;
    if sock.set_nonblocking(false).is_err() {
        return;
    }
    let mut buf = [0u8; 2048];
    while let Some(left) = END_REPEATED_FOR.checked_sub(started.elapsed()) {
        if left.is_zero() || sock.set_read_timeout(Some(wait.min(left))).is_err() {
            return;
        }
        match sock.recv(&mut buf) {
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                end(sock, sent, len);
                wait *= 2;
            }
            Err(_) => return,
        }
    }
}

/// The test as this server saw it: what it sent; the client's side inferred, said so.
fn seen_here(
    out: &EngineOutput,
    header: &ClientHeader,
    test: &Test,
    (local, peer): (SocketAddr, SocketAddr),
    started: SystemTime,
) -> landspeed_core::result::RunResult {
    let warnings = vec![
        "iperf 2's UDP -R sends no report back: what the client received (its loss, jitter, order) is in its own output; its side here is inferred as everything sent".to_string(),
        "iperf 2's payload is not landspeed's: nothing was verified".to_string(),
    ];
    let here = out.report(None, warnings);
    let addresses = (Some(local), Some(peer));
    inferred_client(out, &here, (header, test), (addresses, started))
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_iperf2::udp::Datagram;

    /// A server's socket and a client's, connected to each other on loopback.
    fn pair() -> (UdpSocket, UdpSocket) {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        server.connect(client.local_addr().unwrap()).unwrap();
        client.connect(server.local_addr().unwrap()).unwrap();
        (server, client)
    }

    #[test]
    fn the_end_is_repeated_with_its_number_while_the_clients_port_stays_open() {
        let (server, client) = pair();
        // Stray first datagrams of the client's, queued before the end, are set aside.
        client.send(&[1u8; 100]).unwrap();
        let sending = std::thread::spawn(move || repeat_end(&server, 41, 200));
        client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 2048];
        for _ in 0..3 {
            let n = client.recv(&mut buf).unwrap();
            assert_eq!(n, 200);
            assert_eq!(Datagram::parse(&buf[..n], false).unwrap().seq, -42);
        }
        // The client's port closes: the next copy learns it and the repeating stops well before
        // its bound (2 s; here some tens of ms).
        let closed = Instant::now();
        drop(client);
        sending.join().unwrap();
        assert!(closed.elapsed() < END_REPEATED_FOR);
    }
}
