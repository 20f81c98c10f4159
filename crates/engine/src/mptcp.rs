//! Multipath TCP: opening IPPROTO_MPTCP sockets and reading what the kernel says of a connection at
//! the end of a test. An MPTCP socket speaks the TCP API, so the TCP transport moves its bytes
//! unchanged; what differs is the socket's protocol, and the figures: whether the connection is MPTCP
//! at all (TCP_IS_MPTCP; 0 when either end fell back to plain TCP), how many subflows the path manager
//! opened (MPTCP_INFO), and each subflow's addresses and TCP_INFO (MPTCP_SUBFLOW_ADDRS, MPTCP_TCPINFO).
//! Layouts are the kernel's uapi/linux/mptcp.h; the parsers take the bytes the kernel filled, so they
//! are tested without a kernel.

use crate::os::AsSock;
use landspeed_core::endpoint::{MptcpStats, MptcpSubflow};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// IPPROTO_MPTCP: the protocol number of `socket(AF_INET, SOCK_STREAM, 262)`.
pub const IPPROTO_MPTCP: i32 = 262;
const SOL_MPTCP: i32 = 284;
const MPTCP_INFO: i32 = 1;
const MPTCP_TCPINFO: i32 = 2;
const MPTCP_SUBFLOW_ADDRS: i32 = 3;
const TCP_IS_MPTCP: i32 = 43;
const IPPROTO_TCP: i32 = 6;
/// Linux's address family numbers, as the kernel writes them in MPTCP_SUBFLOW_ADDRS.
const AF_INET: i32 = 2;
const AF_INET6: i32 = 10;
/// `struct mptcp_subflow_data`: the header of MPTCP_TCPINFO and MPTCP_SUBFLOW_ADDRS answers.
const SUBFLOW_DATA_LEN: usize = 16;
/// `struct mptcp_subflow_addrs`: two `__kernel_sockaddr_storage` unions, local then remote.
const SUBFLOW_ADDRS_LEN: usize = 256;
/// The most subflows read back (the kernel's path manager allows at most 8 extra).
const MAX_SUBFLOWS: usize = 16;

/// Why an MPTCP socket could not be opened, in words naming the kernel's side of it.
pub fn unavailable_reason(err: &std::io::Error) -> String {
    crate::os::mptcp_unavailable_reason(err)
}

/// The connection's MPTCP figures, or None when it is not an MPTCP connection (plain TCP, or an MPTCP
/// socket that fell back to TCP).
pub fn read(sock: &impl AsSock) -> Option<MptcpStats> {
    let fd = sock;
    let mut is = [0u8; 4];
    if getsockopt(fd, IPPROTO_TCP, TCP_IS_MPTCP, &mut is).ok()? < 4 || i32::from_ne_bytes(is) != 1 {
        return None;
    }
    let mut info = [0u8; 96];
    let n = getsockopt(fd, SOL_MPTCP, MPTCP_INFO, &mut info).ok()?;
    let mut stats = parse_info(&info[..n])?;
    let infos = subflow_array(
        fd,
        MPTCP_TCPINFO,
        std::mem::size_of::<crate::tcp_info::RawTcpInfo>(),
    );
    let addrs = subflow_array(fd, MPTCP_SUBFLOW_ADDRS, SUBFLOW_ADDRS_LEN);
    stats.paths = subflows(&infos, &addrs);
    Some(stats)
}

/// `struct mptcp_info` as far as the kernel filled it: subflow counts and limits.
fn parse_info(b: &[u8]) -> Option<MptcpStats> {
    if b.len() < 6 {
        return None;
    }
    // mptcpi_subflows counts the extra subflows only; mptcpi_subflows_total (offset 80, Linux 6.10+)
    // counts the first one too.
    let total = b.get(80).map(|&t| u32::from(t)).filter(|&t| t > 0);
    Some(MptcpStats {
        subflows: total.unwrap_or(u32::from(b[0]) + 1),
        subflows_max: u32::from(b[3]),
        add_addr_signal: u32::from(b[1]),
        add_addr_accepted: u32::from(b[2]),
        paths: Vec::new(),
    })
}

/// One MPTCP_TCPINFO or MPTCP_SUBFLOW_ADDRS answer: the elements (each `elem` bytes) the kernel
/// filled, after the `mptcp_subflow_data` header. Empty when the kernel does not have the option.
fn subflow_array(fd: &impl AsSock, opt: i32, elem: usize) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; SUBFLOW_DATA_LEN + elem * MAX_SUBFLOWS];
    buf[0..4].copy_from_slice(&(SUBFLOW_DATA_LEN as u32).to_ne_bytes());
    buf[12..16].copy_from_slice(&(elem as u32).to_ne_bytes());
    match getsockopt(fd, SOL_MPTCP, opt, &mut buf) {
        Ok(n) => split_subflow_data(&buf[..n]),
        Err(_) => Vec::new(),
    }
}

/// The elements of a filled `mptcp_subflow_data` answer, each `size_user` bytes long (the kernel
/// copies min(size_kernel, size_user) of each).
fn split_subflow_data(b: &[u8]) -> Vec<Vec<u8>> {
    if b.len() < SUBFLOW_DATA_LEN {
        return Vec::new();
    }
    let word = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
    let (hdr, n, size_user) = (word(0), word(4), word(12));
    if size_user == 0 || hdr < SUBFLOW_DATA_LEN {
        return Vec::new();
    }
    b[hdr..]
        .chunks_exact(size_user)
        .take(n)
        .map(<[u8]>::to_vec)
        .collect()
}

/// Each subflow's addresses and figures, pairing the two answers by position.
fn subflows(infos: &[Vec<u8>], addrs: &[Vec<u8>]) -> Vec<MptcpSubflow> {
    infos
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let t = crate::tcp_info::TcpInfo::from_bytes(raw);
            let (local, remote) = addrs
                .get(i)
                .map_or((None, None), |a| (sockaddr(&a[..128]), sockaddr(&a[128..])));
            MptcpSubflow {
                local: local.map(|a| a.to_string()),
                remote: remote.map(|a| a.to_string()),
                bytes_sent: t.raw.bytes_sent,
                bytes_received: t.raw.bytes_received,
                bytes_acked: t.raw.bytes_acked,
                retransmits: u64::from(t.raw.total_retrans),
                rtt_us: t.raw.rtt,
                cwnd_bytes: u64::from(t.raw.snd_cwnd) * u64::from(t.raw.snd_mss),
            }
        })
        .collect()
}

/// A `sockaddr_in` or `sockaddr_in6` from a `__kernel_sockaddr_storage` (family in host order, port
/// and IPv4 address in network order).
fn sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes([b[0], b[1]]));
    let port = u16::from_be_bytes([b[2], b[3]]);
    match family {
        AF_INET => {
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
        }
        AF_INET6 => {
            let octets: [u8; 16] = b[8..24].try_into().ok()?;
            // A dual-stack listener's subflows carry IPv4 as v4-mapped IPv6: name them as IPv4.
            let ip = Ipv6Addr::from(octets);
            Some(match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                None => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0)),
            })
        }
        _ => None,
    }
}

fn getsockopt(sock: &impl AsSock, level: i32, opt: i32, buf: &mut [u8]) -> std::io::Result<usize> {
    crate::os::getsockopt_bytes(sock, level, opt, buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subflow_data(elems: &[Vec<u8>], size_user: usize) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [SUBFLOW_DATA_LEN, elems.len(), size_user, size_user] {
            b.extend_from_slice(&(w as u32).to_ne_bytes());
        }
        for e in elems {
            b.extend_from_slice(e);
        }
        b
    }

    fn storage(addr: SocketAddr) -> Vec<u8> {
        let mut s = vec![0u8; 128];
        match addr {
            SocketAddr::V4(a) => {
                s[0..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
                s[4..8].copy_from_slice(&a.ip().octets());
            }
            SocketAddr::V6(a) => {
                s[0..2].copy_from_slice(&(AF_INET6 as u16).to_ne_bytes());
                s[8..24].copy_from_slice(&a.ip().octets());
            }
        }
        s[2..4].copy_from_slice(&addr.port().to_be_bytes());
        s
    }

    #[test]
    fn info_counts_the_first_subflow() {
        let mut old = vec![0u8; 48];
        old[0] = 1; // one extra subflow
        old[3] = 2;
        assert_eq!(parse_info(&old).unwrap().subflows, 2);
        let mut new = vec![0u8; 96];
        new[80] = 3;
        new[2] = 1;
        let s = parse_info(&new).unwrap();
        assert_eq!((s.subflows, s.add_addr_accepted), (3, 1));
        assert!(parse_info(&[0u8; 4]).is_none());
    }

    #[test]
    fn subflows_pair_tcp_info_with_addresses() {
        let mut t = crate::tcp_info::RawTcpInfo {
            bytes_sent: 1000,
            bytes_received: 20,
            total_retrans: 3,
            rtt: 150,
            snd_cwnd: 10,
            snd_mss: 1448,
            ..Default::default()
        };
        let raw = |t: &crate::tcp_info::RawTcpInfo| {
            // SAFETY: RawTcpInfo is a plain repr(C) struct; reading its bytes is sound.
            unsafe { std::slice::from_raw_parts((t as *const crate::tcp_info::RawTcpInfo).cast::<u8>(), 248) }
                .to_vec()
        };
        let first = raw(&t);
        t.bytes_sent = 5000;
        let second = raw(&t);
        let infos = split_subflow_data(&subflow_data(&[first, second], 248));
        let a1: SocketAddr = "10.201.1.1:40000".parse().unwrap();
        let r1: SocketAddr = "10.201.1.2:5201".parse().unwrap();
        let a2: SocketAddr = "[::ffff:10.201.2.1]:40001".parse().unwrap();
        let r2: SocketAddr = "[2001:db8::2]:5201".parse().unwrap();
        let pairs = [
            [storage(a1), storage(r1)].concat(),
            [storage(a2), storage(r2)].concat(),
        ];
        let addrs = split_subflow_data(&subflow_data(&pairs, 256));
        let s = subflows(&infos, &addrs);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].local.as_deref(), Some("10.201.1.1:40000"));
        assert_eq!(s[1].local.as_deref(), Some("10.201.2.1:40001"));
        assert_eq!(s[1].remote.as_deref(), Some("[2001:db8::2]:5201"));
        assert_eq!(
            (s[0].bytes_sent, s[1].bytes_sent, s[1].cwnd_bytes),
            (1000, 5000, 14480)
        );
        assert!(split_subflow_data(&[0u8; 8]).is_empty());
    }

    #[test]
    fn a_plain_tcp_connection_has_no_mptcp_figures() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(read(&c).is_none());
    }
}
