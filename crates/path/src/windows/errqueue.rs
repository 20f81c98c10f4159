//! Windows: no error queue. Winsock does not hand an unprivileged UDP socket the ICMP errors its
//! datagrams caused, so traceroute and path-MTU probing (which read them) are refused here with one
//! line naming the alternative; `--dont-fragment` likewise.

use std::io;
use std::net::UdpSocket;
use std::time::Duration;

pub use crate::icmp::IcmpError;

fn refused() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "traceroute and path MTU probing are not available on {} (they read ICMP errors from Linux's \
             socket error queue); use the system's tracert, or run `landspeed path` from a Linux host",
            std::env::consts::OS
        ),
    )
}

/// Refused on Windows.
pub fn enable(_sock: &UdpSocket, _v6: bool) -> io::Result<()> {
    Err(refused())
}

/// Refused on Windows.
pub fn set_ttl(_sock: &UdpSocket, _v6: bool, _ttl: u8) -> io::Result<()> {
    Err(refused())
}

/// Refused on Windows.
pub fn probe_mtu(_sock: &UdpSocket, _v6: bool) -> io::Result<()> {
    Err(refused())
}

/// Refused on Windows: Don't Fragment on UDP tests is Linux's here.
pub fn dont_fragment(_sock: &UdpSocket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "Don't Fragment on UDP (--dont-fragment) is not available on {}",
            std::env::consts::OS
        ),
    ))
}

/// Refused on Windows.
pub fn route_mtu(_sock: &UdpSocket, _v6: bool) -> io::Result<u32> {
    Err(refused())
}

/// Refused on Windows.
pub fn wait(_sock: &UdpSocket, _timeout: Duration) -> io::Result<(bool, bool)> {
    Err(refused())
}

/// Refused on Windows.
pub fn read(_sock: &UdpSocket) -> io::Result<Option<IcmpError>> {
    Err(refused())
}
