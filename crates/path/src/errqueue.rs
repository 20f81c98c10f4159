//! ICMP errors without raw sockets: with IP_RECVERR / IPV6_RECVERR a UDP socket keeps the ICMP errors
//! its datagrams caused on an error queue, read with MSG_ERRQUEUE. Each carries the ICMP type and code,
//! the router or host that sent it (the offender), ee_info (the next-hop MTU of "fragmentation
//! needed"), and the start of the datagram that caused it, so a probe can be matched by its payload.
//! This is how traceroute and path-MTU probing work unprivileged.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

pub use crate::icmp::IcmpError;

fn setsockopt_int(sock: &UdpSocket, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt with a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(sock: &UdpSocket, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a live c_int with its size.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Keeps ICMP errors on the socket's error queue.
pub fn enable(sock: &UdpSocket, v6: bool) -> io::Result<()> {
    if v6 {
        setsockopt_int(sock, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1)
    } else {
        setsockopt_int(sock, libc::IPPROTO_IP, libc::IP_RECVERR, 1)
    }
}

/// The TTL / hop limit of datagrams sent from now on.
pub fn set_ttl(sock: &UdpSocket, v6: bool, ttl: u8) -> io::Result<()> {
    if v6 {
        setsockopt_int(sock, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, ttl.into())
    } else {
        sock.set_ttl(ttl.into())
    }
}

/// Sets "don't fragment" and ignores the kernel's cached path MTU (IP_PMTUDISC_PROBE), so datagrams of
/// any size up to the interface MTU are sent as they are and an ICMP error says where they do not pass.
pub fn probe_mtu(sock: &UdpSocket, v6: bool) -> io::Result<()> {
    if v6 {
        setsockopt_int(
            sock,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        )
    } else {
        setsockopt_int(
            sock,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    }
}

/// Sets "don't fragment" on an IPv4 UDP socket (IP_PMTUDISC_DO: the kernel never fragments; datagrams
/// over the path MTU fail to send). iperf3's `--dont-fragment`.
pub fn dont_fragment(sock: &UdpSocket) -> io::Result<()> {
    setsockopt_int(
        sock,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )
}

/// The MTU of the route a connected socket uses (its outgoing interface's, or a cached path MTU).
pub fn route_mtu(sock: &UdpSocket, v6: bool) -> io::Result<u32> {
    let v = if v6 {
        getsockopt_int(sock, libc::IPPROTO_IPV6, libc::IPV6_MTU)?
    } else {
        getsockopt_int(sock, libc::IPPROTO_IP, libc::IP_MTU)?
    };
    Ok(v.max(0) as u32)
}

/// Waits until the socket has a datagram (POLLIN) or an error (POLLERR), at most `timeout`.
/// Returns (readable, error pending).
pub fn wait(sock: &UdpSocket, timeout: Duration) -> io::Result<(bool, bool)> {
    let mut p = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: poll on one live pollfd.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok((false, false))
        } else {
            Err(e)
        };
    }
    Ok((p.revents & libc::POLLIN != 0, p.revents & libc::POLLERR != 0))
}

fn offender(ee: *const libc::sock_extended_err, len_left: usize) -> Option<IpAddr> {
    // SAFETY: SO_EE_OFFENDER points just past the extended error inside the same control message; we
    // read it only when the message is long enough for the address family it names.
    unsafe {
        let sa = libc::SO_EE_OFFENDER(ee);
        let family = std::ptr::read_unaligned(sa.cast::<libc::sa_family_t>());
        let base = std::mem::size_of::<libc::sock_extended_err>();
        match i32::from(family) {
            libc::AF_INET if len_left >= base + std::mem::size_of::<libc::sockaddr_in>() => {
                let a: libc::sockaddr_in = std::ptr::read_unaligned(sa.cast());
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))))
            }
            libc::AF_INET6 if len_left >= base + std::mem::size_of::<libc::sockaddr_in6>() => {
                let a: libc::sockaddr_in6 = std::ptr::read_unaligned(sa.cast());
                Some(IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)))
            }
            _ => None,
        }
    }
}

/// Takes one error from the queue, or None when it is empty.
pub fn read(sock: &UdpSocket) -> io::Result<Option<IcmpError>> {
    let mut data = [0u8; 512];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    let mut control = [0u64; 64];
    // SAFETY: all-zero is a valid msghdr; it then points at live buffers of the sizes given.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg into the buffers described by msg.
    let n = unsafe {
        libc::recvmsg(
            sock.as_raw_fd(),
            &mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    let payload = data[..(n as usize).min(data.len())].to_vec();
    // SAFETY: walking the control messages the kernel wrote, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let recverr = ((*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_RECVERR)
                || ((*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_RECVERR);
            if recverr {
                let data_ptr = libc::CMSG_DATA(c);
                let header = data_ptr as usize - c as usize;
                let len_left = ((*c).cmsg_len as usize).saturating_sub(header);
                if len_left >= std::mem::size_of::<libc::sock_extended_err>() {
                    let ee_ptr = data_ptr.cast::<libc::sock_extended_err>();
                    let ee: libc::sock_extended_err = std::ptr::read_unaligned(ee_ptr);
                    return Ok(Some(IcmpError {
                        origin: ee.ee_origin,
                        icmp_type: ee.ee_type,
                        code: ee.ee_code,
                        info: ee.ee_info,
                        errno: ee.ee_errno,
                        offender: offender(ee_ptr, len_left),
                        payload,
                    }));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram to a closed loopback port comes back as ICMP port unreachable, from 127.0.0.1.
    #[test]
    fn port_unreachable_is_read_from_the_queue() {
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = closed.local_addr().unwrap();
        drop(closed);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable(&s, false).unwrap();
        s.connect(target).unwrap();
        s.send(b"probe-7").unwrap();
        let (_, err) = wait(&s, Duration::from_secs(5)).unwrap();
        assert!(err, "no error signalled");
        let e = read(&s).unwrap().expect("an error on the queue");
        assert!(e.port_unreachable(), "{e:?}");
        assert_eq!(e.offender, Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(e.payload, b"probe-7");
        assert_eq!(read(&s).unwrap(), None);
        assert!(route_mtu(&s, false).unwrap() >= 1500);
    }
}
