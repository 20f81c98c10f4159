//! Which of landspeed's data paths this kernel offers, found by trying each on a throwaway socket:
//! io_uring, MSG_ZEROCOPY, UDP segmentation and receive offload, MPTCP, kernel TLS. `landspeed --version` names
//! them, so a bug report carries the facts that decide which path a test took.

use std::os::fd::{FromRawFd, OwnedFd};

/// One data path and whether this kernel has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// Its name as the version line shows it.
    pub name: &'static str,
    /// The kernel accepted it.
    pub available: bool,
}

const SO_ZEROCOPY: libc::c_int = 60;

fn socket(kind: libc::c_int, proto: libc::c_int) -> Option<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, proto) };
    // SAFETY: fd is a new descriptor nobody else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn int_opt(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
    crate::sockopt::set_int(fd, level, name, value).is_ok()
}

/// Tries every data path now.
pub fn probe() -> Vec<Capability> {
    let tcp = socket(libc::SOCK_STREAM, 0);
    let udp = socket(libc::SOCK_DGRAM, 0);
    let on = |s: &Option<OwnedFd>, level, name, v| s.as_ref().is_some_and(|fd| int_opt(fd, level, name, v));
    vec![
        Capability {
            name: "io_uring",
            available: io_uring::IoUring::new(2).is_ok(),
        },
        Capability {
            name: "MSG_ZEROCOPY",
            available: on(&tcp, libc::SOL_SOCKET, SO_ZEROCOPY, 1),
        },
        Capability {
            name: "UDP GSO",
            available: on(&udp, libc::SOL_UDP, libc::UDP_SEGMENT, 1400),
        },
        Capability {
            name: "UDP GRO",
            available: on(&udp, libc::SOL_UDP, libc::UDP_GRO, 1),
        },
        Capability {
            name: "MPTCP",
            available: socket(libc::SOCK_STREAM, crate::mptcp::IPPROTO_MPTCP).is_some(),
        },
        Capability {
            name: "kTLS",
            available: crate::tls::ktls_unavailable_reason().is_none(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_probed_once_by_name() {
        let c = probe();
        let names: Vec<&str> = c.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["io_uring", "MSG_ZEROCOPY", "UDP GSO", "UDP GRO", "MPTCP", "kTLS"]
        );
        // Linux has had UDP GRO since 5.0 and SO_ZEROCOPY since 4.14: the machines landspeed runs on.
        assert!(c[1].available && c[3].available, "{c:?}");
    }
}
