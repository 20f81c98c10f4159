//! One ICMP error a probe caused, as Linux's error queue reports it ([`crate::errqueue`]), and what it
//! means for traceroute and path-MTU probing. Kept apart from the queue so that the meaning is the same
//! code on every platform (and tested without a kernel); the numbers are Linux's (linux/errqueue.h,
//! asm-generic/errno.h).

use std::net::IpAddr;

/// SO_EE_ORIGIN_LOCAL: the local stack (a datagram over the interface MTU).
const ORIGIN_LOCAL: u8 = 1;
/// SO_EE_ORIGIN_ICMP.
const ORIGIN_ICMP: u8 = 2;
/// SO_EE_ORIGIN_ICMP6.
const ORIGIN_ICMP6: u8 = 3;
/// Linux's EMSGSIZE.
const EMSGSIZE: u32 = 90;

/// One error from the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct IcmpError {
    /// SO_EE_ORIGIN_*: 2 ICMP, 3 ICMPv6, 1 local (e.g. EMSGSIZE for a datagram over the interface MTU).
    pub origin: u8,
    /// The ICMP (or ICMPv6) type.
    pub icmp_type: u8,
    /// The ICMP (or ICMPv6) code.
    pub code: u8,
    /// For "fragmentation needed" / "packet too big" (and local EMSGSIZE): the MTU.
    pub info: u32,
    /// The errno the kernel maps the error to (EHOSTUNREACH, EMSGSIZE, ...).
    pub errno: u32,
    /// The router or host that sent the error, when known.
    pub offender: Option<IpAddr>,
    /// The start of the payload of the datagram that caused the error.
    pub payload: Vec<u8>,
}

impl IcmpError {
    /// Time exceeded in transit (TTL / hop limit reached zero at a router).
    pub fn time_exceeded(&self) -> bool {
        (self.origin == ORIGIN_ICMP && self.icmp_type == 11)
            || (self.origin == ORIGIN_ICMP6 && self.icmp_type == 3)
    }

    /// Port unreachable: the datagram reached the destination host, where nothing listens.
    pub fn port_unreachable(&self) -> bool {
        (self.origin == ORIGIN_ICMP && self.icmp_type == 3 && self.code == 3)
            || (self.origin == ORIGIN_ICMP6 && self.icmp_type == 1 && self.code == 4)
    }

    /// Too big for a link on the way: ICMP fragmentation needed, ICMPv6 packet too big, or the local
    /// interface (origin local, EMSGSIZE). `info` holds the MTU that would pass.
    pub fn too_big(&self) -> bool {
        (self.origin == ORIGIN_ICMP && self.icmp_type == 3 && self.code == 4)
            || (self.origin == ORIGIN_ICMP6 && self.icmp_type == 2)
            || (self.origin == ORIGIN_LOCAL && self.errno == EMSGSIZE)
    }

    /// Any other unreachable (network, host, prohibited): traceroute's !N, !H, !X.
    pub fn unreachable_note(&self) -> Option<&'static str> {
        if self.port_unreachable() || self.too_big() {
            return None;
        }
        match (self.origin, self.icmp_type, self.code) {
            (ORIGIN_ICMP, 3, 0) | (ORIGIN_ICMP6, 1, 0) => Some("!N"),
            (ORIGIN_ICMP, 3, 1) | (ORIGIN_ICMP6, 1, 3) => Some("!H"),
            (ORIGIN_ICMP, 3, 9 | 10 | 13) | (ORIGIN_ICMP6, 1, 1) => Some("!X"),
            (ORIGIN_ICMP, 3, _) | (ORIGIN_ICMP6, 1, _) => Some("!U"),
            _ => None,
        }
    }
}
