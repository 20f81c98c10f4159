//! Just enough IP parsing for the emulator: find a TCP or UDP payload inside an IPv4 or IPv6 packet and
//! flip a bit in it, then fix the transport checksum incrementally (RFC 1624), so the receiver's stack
//! accepts the damaged data as good. That is the middlebox bug `--corrupt-payload` emulates: corruption
//! that TCP's checksum cannot see and only end-to-end verification catches.

const TCP: u8 = 6;
const UDP: u8 = 17;

/// The IP protocol number of an IPv4 or IPv6 packet (for IPv6 its first next header), if it is one.
pub fn protocol(pkt: &[u8]) -> Option<u8> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(pkt[9]),
        6 if pkt.len() >= 40 => Some(pkt[6]),
        _ => None,
    }
}

/// The ECN field of an IPv4 or IPv6 packet (RFC 3168: 0 not ECN-capable, 1 or 2 ECT, 3 CE).
pub fn ecn(pkt: &[u8]) -> Option<u8> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(pkt[1] & 0b11),
        6 if pkt.len() >= 40 => Some((pkt[1] >> 4) & 0b11),
        _ => None,
    }
}

/// The DSCP of an IPv4 or IPv6 packet: the upper six bits of its TOS byte or traffic class.
pub fn dscp(pkt: &[u8]) -> Option<u8> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(pkt[1] >> 2),
        6 if pkt.len() >= 40 => Some(((pkt[0] & 0x0f) << 2) | (pkt[1] >> 6)),
        _ => None,
    }
}

/// Whether a packet is a landspeed echo probe on its way to a server (UDP, its payload an echo
/// request: `LSPE`, kind 0): the emulator times these apart so their queueing can be set beside what
/// the probes themselves measured.
pub fn is_echo_request(pkt: &[u8]) -> bool {
    transport(pkt).is_some_and(|t| {
        let p = &pkt[t.payload..t.end];
        t.proto == UDP && p.len() >= 5 && p[..4] == landspeed_core::path::ECHO_MAGIC && p[4] == 0
    })
}

/// Marks an ECN-capable packet Congestion Experienced (both ECN bits set), fixing the IPv4 header
/// checksum incrementally (IPv6 has none). False, and the packet untouched, when it is not ECN-capable.
pub fn mark_ce(pkt: &mut [u8]) -> bool {
    match ecn(pkt) {
        Some(1..=3) => {}
        _ => return false,
    }
    if pkt[0] >> 4 == 4 {
        let old = u16::from_be_bytes([pkt[0], pkt[1]]);
        pkt[1] |= 0b11;
        let new = u16::from_be_bytes([pkt[0], pkt[1]]);
        let sum = update(u16::from_be_bytes([pkt[10], pkt[11]]), old, new);
        pkt[10..12].copy_from_slice(&sum.to_be_bytes());
    } else {
        pkt[1] |= 0b11 << 4;
    }
    true
}

/// A hash of a packet's flow: its addresses, protocol and ports (the addresses and protocol alone
/// when it is neither TCP nor UDP, or a fragment), the same for every packet of a connection in one
/// direction. FQ-CoDel's queues are chosen by it.
pub fn flow_hash(pkt: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match pkt.first().map(|b| b >> 4) {
        Some(4) if pkt.len() >= 20 => (&pkt[12..20], pkt[9]).hash(&mut h),
        Some(6) if pkt.len() >= 40 => (&pkt[8..40], pkt[6]).hash(&mut h),
        _ => pkt.len().min(1).hash(&mut h),
    }
    ports(pkt).hash(&mut h);
    h.finish()
}

/// The source and destination ports of a TCP or UDP packet (IPv4 or IPv6), if it is one whose
/// transport header is whole.
pub fn ports(pkt: &[u8]) -> Option<(u16, u16)> {
    let t = transport(pkt)?;
    let h = pkt.get(t.start..t.start + 4)?;
    Some((u16::from_be_bytes([h[0], h[1]]), u16::from_be_bytes([h[2], h[3]])))
}

/// Which packets an outage takes down: every one, or only those of one IP protocol, and only those
/// to or from a port range (or every one but those): how a test takes down one connection of a test
/// and not another (the data streams bound with `run --cport`, the control connection not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutageScope {
    /// Only packets of this IP protocol (6 TCP, 17 UDP).
    pub proto: Option<u8>,
    /// Only packets whose source or destination port is in this range (inclusive) ...
    pub ports: Option<(u16, u16)>,
    /// ... or, when set, every packet but those.
    pub except_ports: bool,
}

impl OutageScope {
    /// Whether the outage takes `pkt` down.
    pub fn takes(&self, pkt: &[u8]) -> bool {
        if self.proto.is_some_and(|p| protocol(pkt) != Some(p)) {
            return false;
        }
        let Some((lo, hi)) = self.ports else {
            return true;
        };
        let inside = ports(pkt).is_some_and(|(s, d)| (lo..=hi).contains(&s) || (lo..=hi).contains(&d));
        inside != self.except_ports
    }
}

/// The protocol number named `tcp` or `udp`.
pub fn protocol_named(name: &str) -> Option<u8> {
    match name {
        "tcp" => Some(TCP),
        "udp" => Some(UDP),
        _ => None,
    }
}

/// Where a transport segment sits in a packet: its start, protocol, and payload start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    /// The IP protocol number (6 TCP, 17 UDP).
    pub proto: u8,
    /// Where the transport header starts.
    pub start: usize,
    /// Where its payload starts.
    pub payload: usize,
    /// Where the packet ends.
    pub end: usize,
}

/// Finds the TCP or UDP segment of an IPv4 or IPv6 packet (no IPv6 extension headers, no fragments).
pub fn transport(pkt: &[u8]) -> Option<Transport> {
    let (proto, start, end) = match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
            let frag = u16::from_be_bytes([pkt[6], pkt[7]]) & 0x3fff;
            if ihl < 20 || total > pkt.len() || total < ihl || frag != 0 {
                return None;
            }
            (pkt[9], ihl, total)
        }
        6 if pkt.len() >= 40 => {
            let plen = usize::from(u16::from_be_bytes([pkt[4], pkt[5]]));
            if 40 + plen > pkt.len() {
                return None;
            }
            (pkt[6], 40, 40 + plen)
        }
        _ => return None,
    };
    let seg = &pkt[start..end];
    let hdr = match proto {
        TCP if seg.len() >= 20 => usize::from(seg[12] >> 4) * 4,
        UDP if seg.len() >= 8 => 8,
        _ => return None,
    };
    // A TCP header is at least 20 bytes whatever its data offset says: a shorter one is refused, or
    // the checksum and flags written at its fixed offsets would land in the payload or past the end.
    if hdr < 8 || (proto == TCP && hdr < 20) || hdr > seg.len() {
        return None;
    }
    Some(Transport {
        proto,
        start,
        payload: start + hdr,
        end,
    })
}

/// The one's-complement sum of `b`'s 16-bit words (a last odd byte padded), not yet folded.
pub(crate) fn sum_words(b: &[u8]) -> u32 {
    let mut s: u32 = 0;
    let mut words = b.chunks_exact(2);
    for w in &mut words {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
        s = (s & 0xffff) + (s >> 16);
    }
    if let [last] = words.remainder() {
        s += u32::from(*last) << 8;
    }
    s
}

/// The sum of the pseudo-header of IPv4 or IPv6 packet `ip` for a transport segment of protocol
/// `proto` and `len` bytes.
pub(crate) fn pseudo_header_sum(ip: &[u8], proto: u8, len: u32) -> u32 {
    let addrs = if ip[0] >> 4 == 4 { &ip[12..20] } else { &ip[8..40] };
    sum_words(addrs) + u32::from(proto) + (len >> 16) + (len & 0xffff)
}

/// `s` folded into 16 bits.
pub(crate) fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
fn update(hc: u16, old: u16, new: u16) -> u16 {
    !fold(u32::from(!hc) + u32::from(!old) + u32::from(new))
}

/// Flips one bit of the transport payload, chosen by `r`, and fixes the checksum (unless it is `seeded`:
/// a checksum left to the device holds the pseudo-header's sum, and the device sums the damaged data
/// itself). Returns the offset of the damaged byte in the packet, or `None` when the packet has no
/// payload to damage.
pub fn corrupt_payload(pkt: &mut [u8], r: u64, seeded: bool) -> Option<usize> {
    let t = transport(pkt)?;
    let n = t.end - t.payload;
    if n == 0 {
        return None;
    }
    let at = t.payload + (r % n as u64) as usize;
    let bit = 1u8 << ((r >> 40) % 8);
    // The checksum covers 16-bit words counted from the start of the transport header.
    let w = t.start + ((at - t.start) & !1);
    let word = |p: &[u8]| u16::from_be_bytes([p[w], if w + 1 < t.end { p[w + 1] } else { 0 }]);
    let old = word(pkt);
    pkt[at] ^= bit;
    if seeded {
        return Some(at);
    }
    let new = word(pkt);
    let ck = t.start + if t.proto == TCP { 16 } else { 6 };
    let hc = u16::from_be_bytes([pkt[ck], pkt[ck + 1]]);
    if !(t.proto == UDP && hc == 0) {
        let mut c = update(hc, old, new);
        if t.proto == UDP && c == 0 {
            c = 0xffff;
        }
        pkt[ck..ck + 2].copy_from_slice(&c.to_be_bytes());
    }
    Some(at)
}

/// The full Internet checksum of a TCP/UDP segment with its pseudo-header (for tests and checks).
pub fn transport_checksum_ok(pkt: &[u8]) -> Option<bool> {
    let t = transport(pkt)?;
    let pseudo = pseudo_header_sum(pkt, t.proto, (t.end - t.start) as u32);
    Some(fold(pseudo + sum_words(&pkt[t.start..t.end])) == 0xffff)
}

#[cfg(test)]
mod tests;
