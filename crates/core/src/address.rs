//! Which clients count as one: an IPv4 address, or an IPv6 /64 (what one host or one subscriber is
//! usually given). The server's rate limits (landspeed-proto) and its log of refusals (`server_log`)
//! count by the same key.

use std::net::IpAddr;

/// The key an address is counted under.
pub fn bucket(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}
