//! Socket options for data connections: windows (SO_SNDBUF/SO_RCVBUF), MSS, Nagle, congestion control,
//! fq pacing and the type-of-service byte, applied the same way on both ends, and the check that tells a user, naming the sysctl,
//! when the kernel granted less buffer than asked for.

use crate::host::sysctl;
use landspeed_core::config::TestSpec;
use landspeed_core::units::Bytes;
use socket2::{Domain, Socket, Type};

/// Why an option could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum SockOptError {
    /// The kernel refused the congestion control.
    #[error("congestion control '{name}' is not available ({err}); this host allows: {available}")]
    Congestion {
        /// The name asked for.
        name: String,
        /// What the kernel offers (net.ipv4.tcp_allowed_congestion_control).
        available: String,
        /// The kernel's reason.
        err: std::io::Error,
    },
    /// The kernel refused the MSS.
    #[error("cannot set MSS {mss}: {err}")]
    Mss {
        /// The MSS asked for.
        mss: u32,
        /// The kernel's reason.
        err: std::io::Error,
    },
    /// Another option could not be set.
    #[error("cannot set {what}: {err}")]
    Other {
        /// The option.
        what: &'static str,
        /// The kernel's reason.
        err: std::io::Error,
    },
}

fn other(what: &'static str) -> impl FnOnce(std::io::Error) -> SockOptError {
    move |err| SockOptError::Other { what, err }
}

/// `-w`: the same request for SO_SNDBUF and SO_RCVBUF.
fn set_window(sock: &Socket, spec: &TestSpec) -> Result<(), SockOptError> {
    if let Some(w) = spec.window_bytes {
        sock.set_send_buffer_size(w as usize)
            .map_err(other("SO_SNDBUF"))?;
        sock.set_recv_buffer_size(w as usize)
            .map_err(other("SO_RCVBUF"))?;
    }
    Ok(())
}

/// `set_tos` on a UDP socket (the latency probes').
pub fn set_udp_tos(sock: &std::net::UdpSocket, tos: Option<u8>) -> Result<(), SockOptError> {
    set_tos(&socket2::SockRef::from(sock), tos)
}

/// The type-of-service byte on a data socket of either family (`--tos`): IPv6's traffic class, and on
/// an IPv6 socket the IPv4 TOS as well for IPv4-mapped peers (which the kernel sends as IPv4; an
/// IPv6-only socket refuses it, which is fine).
pub fn set_tos(sock: &socket2::SockRef<'_>, tos: Option<u8>) -> Result<(), SockOptError> {
    let Some(tos) = tos else { return Ok(()) };
    let v6 = crate::os::is_ipv6(sock).map_err(other("SO_DOMAIN"))?;
    if v6 {
        crate::os::set_tclass_v6(sock, u32::from(tos)).map_err(other("IPV6_TCLASS"))?;
        let _ = sock.set_tos_v4(u32::from(tos));
        Ok(())
    } else {
        sock.set_tos_v4(u32::from(tos)).map_err(other("IP_TOS"))
    }
}

/// The IPv6 flow label `label` (20 bits) on a TCP socket about to connect to `dst` (iperf3's `-L`):
/// the label taken from the kernel's manager (created, shared with any socket) and sent in every
/// packet (IPV6_FLOWINFO_SEND). The connect must give the label in its address too
/// (`SocketAddrV6::flowinfo`, network order). Linux only.
pub fn set_flow_label(sock: &Socket, dst: std::net::Ipv6Addr, label: u32) -> Result<(), SockOptError> {
    crate::os::set_flow_label(sock, dst, label)
}

/// A UDP data socket's options: the test's buffers (or `default_buffer`; a buffer the kernel caps is
/// reported elsewhere, not an error), its type-of-service byte and, over IPv4, Don't Fragment.
pub fn udp_options(
    sock: &std::net::UdpSocket,
    spec: &TestSpec,
    default_buffer: usize,
) -> Result<(), SockOptError> {
    let r = socket2::SockRef::from(sock);
    let w = spec.window_bytes.map_or(default_buffer, |w| w as usize);
    let _ = r.set_send_buffer_size(w);
    let _ = r.set_recv_buffer_size(w);
    set_tos(&r, spec.tos)?;
    let v4 = sock.local_addr().is_ok_and(|a| a.ip().to_canonical().is_ipv4());
    if spec.dont_fragment && v4 {
        landspeed_path::errqueue::dont_fragment(sock).map_err(other("IP_MTU_DISCOVER"))?;
    }
    Ok(())
}

/// The test's congestion control (`-C`), if it names one.
fn set_congestion(sock: &Socket, spec: &TestSpec) -> Result<(), SockOptError> {
    let Some(name) = &spec.congestion else {
        return Ok(());
    };
    crate::os::set_congestion(sock, name).map_err(|err| SockOptError::Congestion {
        name: name.clone(),
        available: sysctl("net/ipv4/tcp_allowed_congestion_control").unwrap_or_default(),
        err,
    })
}

/// Options that must be set before connect (window scale and MSS are negotiated in the handshake;
/// the type of service marks the handshake's packets too). The congestion control too: Linux starts a
/// connection's with the handshake, and one started as BBR keeps TCP's own pacing on (BBR turns it
/// on and nothing turns it off) after a switch to CUBIC, so `-C cubic` on a host whose default is BBR
/// would be paced by a timer per burst unless the socket is CUBIC from the start.
pub fn before_connect(sock: &Socket, spec: &TestSpec) -> Result<(), SockOptError> {
    set_window(sock, spec)?;
    set_tos(&socket2::SockRef::from(sock), spec.tos)?;
    set_congestion(sock, spec)?;
    if let Some(mss) = spec.mss {
        crate::os::set_mss(sock, mss).map_err(|err| SockOptError::Mss { mss, err })?;
    }
    Ok(())
}

/// Options set on a connected socket (all of them on the server's accepted sockets).
pub fn after_connect(sock: &Socket, spec: &TestSpec, sending: bool) -> Result<(), SockOptError> {
    set_window(sock, spec)?;
    set_tos(&socket2::SockRef::from(sock), spec.tos)?;
    sock.set_tcp_nodelay(spec.nodelay).map_err(other("TCP_NODELAY"))?;
    set_congestion(sock, spec)?;
    if let (Some(rate), true) = (crate::platform::tcp_pace(spec).0, sending) {
        let bytes_per_s: u64 = (rate / 8.0).round().max(1.0) as u64;
        crate::os::set_pacing(sock, bytes_per_s, paced_queue_bytes(rate))?;
        // A paced sender writes a few ms of its pace at a time, less than one segment where the MSS
        // is large (loopback's is 64 KiB): Nagle would hold each such write for the peer's delayed
        // ACK and the rate would fall short of the pace.
        sock.set_tcp_nodelay(true).map_err(other("TCP_NODELAY"))?;
    }
    Ok(())
}

/// How far ahead of the wire a paced sender writes, as time at its rate: the kernel sends a paced
/// socket's buffer no faster than the rate, so whatever is queued when the time is up is still sent,
/// and at 2 Mbit/s a 4 MiB buffer is 16 s. Kept this short, a timed test ends within this (twice: the
/// unsent mark and one write) plus one round trip of its time, at any rate.
pub const PACED_AHEAD: std::time::Duration = std::time::Duration::from_millis(5);

/// The bytes a socket paced at `rate_bps` sends in [`PACED_AHEAD`], at least 1 KiB: both its unsent
/// mark (TCP_NOTSENT_LOWAT) and its largest write.
pub fn paced_queue_bytes(rate_bps: f64) -> usize {
    let bytes = rate_bps / 8.0 * PACED_AHEAD.as_secs_f64();
    (bytes as usize).max(1024)
}

/// Bytes written to a TCP socket and not yet sent (SIOCOUTQNSD). TCP_NOTSENT_LOWAT alone does not bound
/// them: the kernel checks it only when a write needs a new segment, and appends to the last one up
/// to its size goal (two MSS, 128 KiB on loopback) without looking.
pub fn unsent_bytes(sock: &impl crate::os::AsSock) -> std::io::Result<u64> {
    crate::os::unsent_bytes(sock)
}

/// Asks the kernel to acknowledge at once (TCP_QUICKACK) for the next exchange, where it can: a
/// request/response loop calls it after each one, as iperf 2 does (where the option does not exist,
/// delayed ACKs stay as they are: nothing to report).
pub fn quickack(sock: &impl crate::os::AsSock) {
    let _ = crate::os::set_quickack(sock);
}

/// Sets the receive low-water mark (SO_RCVLOWAT) and returns what the kernel kept.
pub fn set_rcvlowat(sock: &impl crate::os::AsSock, bytes: u64) -> std::io::Result<u64> {
    crate::os::set_rcvlowat(sock, bytes)
}

/// The buffer sizes the kernel reports for a socket: (SO_SNDBUF, SO_RCVBUF).
pub fn granted(sock: &Socket) -> (u64, u64) {
    (
        sock.send_buffer_size().map_or(0, |v| v as u64),
        sock.recv_buffer_size().map_or(0, |v| v as u64),
    )
}

/// The receive buffer (SO_RCVBUF) the kernel gives a new TCP or UDP socket that asks for none, if
/// one can be made to ask (what iperf 2's server head shows as its default).
pub fn default_recv_buffer(udp: bool) -> Option<u64> {
    let kind = if udp { Type::DGRAM } else { Type::STREAM };
    let s = Socket::new(Domain::IPV4, kind, None).ok()?;
    s.recv_buffer_size().ok().map(|b| b as u64)
}

/// A warning when the kernel granted less than requested. Linux doubles a request and caps it at
/// net.core.{w,r}mem_max, so anything under twice the request means the cap was hit.
pub fn window_warning(requested: Option<u64>, snd: u64, rcv: u64) -> Option<String> {
    let req = requested?;
    let mut parts = vec![];
    if snd < req.saturating_mul(2) {
        parts.push(format!(
            "SO_SNDBUF got {} (net.core.wmem_max = {})",
            Bytes(snd / 2),
            sysctl("net/core/wmem_max").unwrap_or_else(|| "?".into())
        ));
    }
    if rcv < req.saturating_mul(2) {
        parts.push(format!(
            "SO_RCVBUF got {} (net.core.rmem_max = {})",
            Bytes(rcv / 2),
            sysctl("net/core/rmem_max").unwrap_or_else(|| "?".into())
        ));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "requested window {} but {}; raise the limit with: sysctl -w net.core.rmem_max={} net.core.wmem_max={}",
        Bytes(req),
        parts.join(", "),
        req,
        req
    ))
}

/// Whether the peer has closed or reset a connection that should be quiet now (a control connection
/// while the server waits for data streams): a non-blocking peek that sees end-of-file or an error.
/// Bytes waiting to be read mean the peer is still there.
pub fn peer_gone(s: &std::net::TcpStream) -> bool {
    crate::os::peer_gone(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_udp_socket_takes_the_tos_byte_asked() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_udp_tos(&s, Some(0x20)).unwrap();
        assert_eq!(socket2::SockRef::from(&s).tos_v4().unwrap(), 0x20);
        set_udp_tos(&s, None).unwrap();
        assert_eq!(
            socket2::SockRef::from(&s).tos_v4().unwrap(),
            0x20,
            "None leaves it as it was"
        );
    }

    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn warning_names_the_sysctl() {
        let w = window_warning(Some(64 << 20), 425_984, 425_984).unwrap();
        assert!(w.contains("net.core.rmem_max"), "{w}");
        assert!(w.contains("net.core.wmem_max"), "{w}");
        assert!(window_warning(Some(100_000), 200_000, 200_000).is_none());
        assert!(window_warning(None, 1, 1).is_none());
    }

    #[test]
    fn unknown_congestion_is_a_clear_error() {
        let sock = Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let spec = TestSpec {
            congestion: Some("nosuchcc".into()),
            ..TestSpec::default()
        };
        let e = after_connect(&sock, &spec, true).unwrap_err();
        assert!(e.to_string().contains("nosuchcc"), "{e}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_congestion_control_is_set_before_connect() {
        // The socket's default is the host's (BBR on some): the test's must be in place before the
        // handshake, or a BBR start leaves TCP's own pacing on under the one asked for.
        let sock = Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let default = crate::os::congestion(&sock).unwrap();
        let other = if default == "reno" { "cubic" } else { "reno" };
        let spec = TestSpec {
            congestion: Some(other.into()),
            ..TestSpec::default()
        };
        before_connect(&sock, &spec).unwrap();
        assert_eq!(crate::os::congestion(&sock).as_deref(), Some(other));
    }

    fn int_opt<S: AsRawFd>(sock: &S, level: libc::c_int, opt: libc::c_int) -> libc::c_int {
        let (mut v, mut len): (libc::c_int, libc::socklen_t) = (0, 4);
        // SAFETY: getsockopt into a live c_int whose size is passed.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                level,
                opt,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        v
    }

    #[test]
    fn udp_sockets_get_the_tos_and_dont_fragment_asked_for() {
        let spec = TestSpec {
            tos: Some(0xb8),
            dont_fragment: true,
            transport: landspeed_core::config::Transport::Udp,
            ..TestSpec::default()
        };
        let v4 = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = int_opt(&v4, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER);
        assert_ne!(before, libc::IP_PMTUDISC_DO, "the kernel's default already");
        udp_options(&v4, &spec, 1 << 20).unwrap();
        assert_eq!(int_opt(&v4, libc::IPPROTO_IP, libc::IP_TOS), 0xb8);
        assert_eq!(
            int_opt(&v4, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER),
            libc::IP_PMTUDISC_DO
        );
        // IPv6: the traffic class; DF is IPv4's, so the socket's discovery mode stays as it was.
        let v6 = std::net::UdpSocket::bind("[::1]:0").unwrap();
        udp_options(&v6, &spec, 1 << 20).unwrap();
        assert_eq!(int_opt(&v6, libc::IPPROTO_IPV6, libc::IPV6_TCLASS), 0xb8);
        let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp_options(&plain, &TestSpec::default(), 1 << 20).unwrap();
        assert_eq!(int_opt(&plain, libc::IPPROTO_IP, libc::IP_TOS), 0);
        assert_eq!(int_opt(&plain, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER), before);
    }

    #[test]
    fn tcp_sockets_get_the_tos_before_and_after_connect() {
        let spec = TestSpec {
            tos: Some(0x28),
            ..TestSpec::default()
        };
        let sock = Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        before_connect(&sock, &spec).unwrap();
        assert_eq!(int_opt(&sock, libc::IPPROTO_IP, libc::IP_TOS), 0x28);
        let v6 = Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).unwrap();
        after_connect(&v6, &spec, true).unwrap();
        assert_eq!(int_opt(&v6, libc::IPPROTO_IPV6, libc::IPV6_TCLASS), 0x28);
    }

    #[test]
    fn peer_gone_sees_close_but_not_quiet_or_pending_data() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert!(!peer_gone(&s), "a quiet peer is still there");
        c.write_all(b"x").unwrap();
        drop(c);
        // A byte waits in front of the end-of-file: the peer's data still counts as presence.
        let mut b = [0u8; 1];
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        assert_eq!(s.peek(&mut b).unwrap(), 1);
        assert!(!peer_gone(&s));
        std::io::Read::read_exact(&mut &s, &mut b).unwrap();
        assert!(peer_gone(&s));
    }
}
