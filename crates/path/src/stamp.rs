//! Kernel receive timestamps for UDP (SO_TIMESTAMPNS): the time the packet reached the socket layer, free
//! of the scheduling delay between arrival and the `recvmsg` call. Packet-train dispersion is measured in
//! microseconds, which a user-space clock read after a wake-up cannot resolve on a busy host.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Asks the kernel to timestamp every datagram this socket receives.
pub fn enable(sock: &UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Receives one datagram: its length, sender, and the kernel's receive time (CLOCK_REALTIME, ns) when
/// the socket has timestamps enabled.
pub fn recv(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<u64>)> {
    let fd = sock.as_raw_fd();
    // SAFETY: the closure hands recvmsg the storage and length socket2 provides, and live buffers of
    // the sizes given; it reports the address length the kernel wrote back.
    let ((n, stamp), sa) = unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let mut control = [0u64; 16];
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = storage.cast();
            msg.msg_namelen = *len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            let n = libc::recvmsg(fd, &mut msg, 0);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            *len = msg.msg_namelen;
            let mut stamp = None;
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
            Ok((n as usize, stamp))
        })?
    };
    let peer = sa
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "datagram from a non-IP address"))?;
    Ok((n, peer, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_arrive_with_datagrams() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable(&b).unwrap();
        b.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        a.send_to(b"hello", b.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let (n, from, t) = recv(&b, &mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"hello"[..], a.local_addr().unwrap()));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let t = t.expect("a kernel timestamp");
        assert!(t <= now && now - t < 5_000_000_000);
    }
}
