//! Windows: no kernel receive timestamps on this path. Datagrams are read with `recv_from` and carry
//! no kernel time, so the echo server's replies say so (no stamp) and probes fall back to the
//! user-space clock, as they do on a Linux socket without SO_TIMESTAMPNS.

use std::io;
use std::net::{SocketAddr, UdpSocket};

/// Kernel timestamps are Linux's here.
pub fn enable(_sock: &UdpSocket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "kernel receive timestamps are not available on {}",
            std::env::consts::OS
        ),
    ))
}

/// Receives one datagram: its length and sender; no kernel time.
pub fn recv(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<u64>)> {
    let (n, from) = sock.recv_from(buf)?;
    Ok((n, from, None))
}
