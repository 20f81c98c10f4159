//! TUN offloads, and how the emulator keeps every wire packet's fate with them. With `IFF_VNET_HDR` and
//! `TUNSETOFFLOAD`, a host's TCP hands the emulator one GSO train of up to 64 KiB (one IP and TCP header,
//! then the payload of many segments of `gso_size` bytes, checksum left to the device) where it would
//! hand it forty wire packets, and the emulator can hand the receiving host a train the same way, which
//! its TCP takes in one pass. Per-packet system calls and per-packet TCP input were what held the
//! emulator to 1.5 Gbit/s.
//!
//! The path model still sees wire packets: a train is cut into its segments (their wire lengths and
//! headers), each gets its own fate, and the segments whose fates agree leave together again; the rest
//! leave as packets of their own. This module writes the headers of such a part of a train as the
//! kernel's own segmentation would write them: sequence number, IP length and ID, TCP flags (FIN and PSH
//! on the last segment only, CWR on the first only), the IPv4 header checksum, and the TCP checksum's
//! seed (the pseudo-header's sum, which the device completes).

use crate::packet::{fold, pseudo_header_sum, sum_words};
use std::ops::Range;

/// Bytes of the virtio-net header before each packet on a TUN device with `IFF_VNET_HDR`.
pub const VNET_LEN: usize = 10;
/// The header's flag: the transport checksum is to be completed from `csum_start` (its field holds the
/// pseudo-header's sum).
pub const NEEDS_CSUM: u8 = 1;
/// Not a train.
pub const GSO_NONE: u8 = 0;
/// A TCP/IPv4 train.
pub const GSO_TCPV4: u8 = 1;
/// A TCP/IPv6 train.
pub const GSO_TCPV6: u8 = 4;
/// The largest frame a TUN read gives: the header and an IP packet of at most 64 KiB.
pub const MAX_FRAME: usize = VNET_LEN + 65_536;
/// The smallest segment size a train may have: TCP's smallest MSS in Linux (`TCP_MIN_MSS`). A train of
/// 1-byte segments would make the forwarder model 65,000 packets per frame.
pub const MIN_SEGMENT: u16 = 88;

const TCP: u8 = 6;

/// The virtio-net header (`struct virtio_net_hdr`, in the host's byte order, which is what a TUN device
/// uses unless told otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Vnet {
    /// `NEEDS_CSUM` and the like.
    pub flags: u8,
    /// `GSO_NONE`, `GSO_TCPV4`, `GSO_TCPV6` (and the ECN bit, 0x80, which the emulator does not ask for).
    pub gso_type: u8,
    /// Bytes of headers (a hint).
    pub hdr_len: u16,
    /// Payload bytes per segment of a train.
    pub gso_size: u16,
    /// Where the checksum's coverage starts, from the IP header.
    pub csum_start: u16,
    /// Where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
}

impl Vnet {
    /// The header at the start of `frame`.
    pub fn parse(frame: &[u8]) -> Option<Vnet> {
        let b = frame.get(..VNET_LEN)?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(Vnet {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Writes the header to the start of `frame`.
    pub fn write(&self, frame: &mut [u8]) {
        frame[0] = self.flags;
        frame[1] = self.gso_type;
        for (i, v) in [self.hdr_len, self.gso_size, self.csum_start, self.csum_offset]
            .into_iter()
            .enumerate()
        {
            frame[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_ne_bytes());
        }
    }

    /// Whether the transport checksum is left to the device (its field holds a seed).
    pub fn partial_checksum(&self) -> bool {
        self.flags & NEEDS_CSUM != 0
    }
}

/// Why a frame that says it is a train cannot be cut into its segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadTrain {
    /// Not TCP in IPv4 or IPv6 without extension headers, not the IP version its kind says, or its
    /// lengths disagree with the frame.
    #[error("a GSO train whose headers the emulator cannot read")]
    Headers,
    /// A kind of train the emulator did not ask for (UDP, ECN), a checksum not left to the device, or
    /// segments smaller than TCP's smallest.
    #[error("a kind of GSO train the emulator does not take")]
    Kind,
}

/// A GSO train read from a TUN device: where its headers and payload are and how it divides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Train {
    vnet: Vnet,
    /// Where the TCP header starts in the IP packet.
    tcp: usize,
    /// Where the payload starts in the IP packet (the bytes of headers each segment carries).
    payload: usize,
    /// Where the IP packet ends.
    end: usize,
    mss: usize,
    /// How many wire packets it carries.
    pub segments: usize,
}

impl Train {
    /// The train in `frame` (the virtio-net header, then the IP packet), or `None` when the frame is a
    /// single packet.
    pub fn of(frame: &[u8]) -> Result<Option<Train>, BadTrain> {
        let vnet = Vnet::parse(frame).ok_or(BadTrain::Headers)?;
        if vnet.gso_type == GSO_NONE {
            return Ok(None);
        }
        if !matches!(vnet.gso_type, GSO_TCPV4 | GSO_TCPV6)
            || !vnet.partial_checksum()
            || vnet.gso_size < MIN_SEGMENT
        {
            return Err(BadTrain::Kind);
        }
        let ip = &frame[VNET_LEN..];
        let t = crate::packet::transport(ip).ok_or(BadTrain::Headers)?;
        let version = if vnet.gso_type == GSO_TCPV4 { 4 } else { 6 };
        if t.proto != TCP
            || ip[0] >> 4 != version
            || t.end != ip.len()
            || usize::from(vnet.csum_start) != t.start
        {
            return Err(BadTrain::Headers);
        }
        let mss = usize::from(vnet.gso_size);
        Ok(Some(Train {
            vnet,
            tcp: t.start,
            payload: t.payload,
            end: t.end,
            mss,
            segments: (t.end - t.payload).div_ceil(mss).max(1),
        }))
    }

    /// The bytes of the IP packet the train starts with up to its payload (what each segment repeats).
    pub fn header_len(&self) -> usize {
        self.payload
    }

    /// Payload bytes of segments `i..j`, as a range of the frame.
    pub fn payload(&self, i: usize, j: usize) -> Range<usize> {
        let at = |k: usize| VNET_LEN + (self.payload + k * self.mss).min(self.end);
        at(i)..at(j)
    }

    /// The length on the wire of segment `i`: its headers and its payload.
    pub fn wire_len(&self, i: usize) -> usize {
        self.payload + self.payload(i, i + 1).len()
    }

    /// Wire bytes of segments `i..j` in all.
    pub fn wire_bytes(&self, i: usize, j: usize) -> u64 {
        ((j - i) * self.payload + self.payload(i, j).len()) as u64
    }

    /// Writes into `out` the virtio-net header and the IP and TCP headers of segments `i..j` of the
    /// train in `frame`: a train of its own when it is more than one segment, a single packet otherwise.
    pub fn head(&self, frame: &[u8], i: usize, j: usize, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&frame[..VNET_LEN + self.payload]);
        let mut vnet = self.vnet;
        if j - i <= 1 {
            vnet.gso_type = GSO_NONE;
            vnet.gso_size = 0;
        }
        vnet.write(out);
        let payload_len = self.payload(i, j).len();
        let ip = &mut out[VNET_LEN..];
        if ip[0] >> 4 == 4 {
            set_u16(ip, 2, (self.payload + payload_len) as u16);
            set_u16(ip, 4, get_u16(ip, 4).wrapping_add(i as u16));
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            set_u16(ip, 10, 0);
            let sum = !fold(sum_words(&ip[..ihl]));
            set_u16(ip, 10, sum);
        } else {
            set_u16(ip, 4, (self.payload - 40 + payload_len) as u16);
        }
        let tcp = self.tcp;
        let seq = u32::from_be_bytes([ip[tcp + 4], ip[tcp + 5], ip[tcp + 6], ip[tcp + 7]]);
        let seq = seq.wrapping_add((i * self.mss) as u32);
        ip[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        if i > 0 {
            ip[tcp + 13] &= !0x80; // CWR: the first segment only
        }
        if j < self.segments {
            ip[tcp + 13] &= !0x09; // FIN and PSH: the last segment only
        }
        let seed = fold(pseudo_header_sum(
            ip,
            TCP,
            (self.payload - tcp + payload_len) as u32,
        ));
        set_u16(ip, tcp + 16, seed);
    }
}

fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[cfg(test)]
mod tests;

/// Trains as a host's TCP hands them over, for tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub(crate) const OPTIONS: usize = 12; // the timestamp option, as Linux sends it

    /// A train as a host's TCP hands it over: IPv4 or IPv6, `payload` bytes, segments of `mss`, the
    /// checksum field holding the seed for the whole train, `flags` in its TCP header.
    pub(crate) fn train(v6: bool, payload: usize, mss: u16, flags: u8) -> Vec<u8> {
        let l3 = if v6 { 40 } else { 20 };
        let tcp_len = 20 + OPTIONS + payload;
        let mut ip = vec![0u8; l3 + tcp_len];
        if v6 {
            ip[0] = 0x60;
            set_u16(&mut ip, 4, tcp_len as u16);
            ip[6] = TCP;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&[0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            ip[24..40].copy_from_slice(&[0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            ip[0] = 0x45;
            ip[1] = 0x02; // ECT(0)
            set_u16(&mut ip, 2, (l3 + tcp_len) as u16);
            set_u16(&mut ip, 4, 0xfffe); // the ID wraps within the train
            ip[6] = 0x40;
            ip[8] = 64;
            ip[9] = TCP;
            ip[12..20].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
            let s = !fold(sum_words(&ip[..20]));
            set_u16(&mut ip, 10, s);
        }
        let t = l3;
        set_u16(&mut ip, t, 40000);
        set_u16(&mut ip, t + 2, 5201);
        ip[t + 4..t + 8].copy_from_slice(&0xffff_ff00u32.to_be_bytes()); // the sequence wraps too
        ip[t + 12] = (((20 + OPTIONS) / 4) << 4) as u8;
        ip[t + 13] = flags;
        for (k, b) in ip[t + 20 + OPTIONS..].iter_mut().enumerate() {
            *b = (k * 7 + k / 251) as u8;
        }
        let seed = fold(pseudo_header_sum(&ip, TCP, tcp_len as u32));
        set_u16(&mut ip, t + 16, seed);
        let mut frame = vec![0u8; VNET_LEN];
        Vnet {
            flags: NEEDS_CSUM,
            gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: (t + 20 + OPTIONS) as u16,
            gso_size: mss,
            csum_start: t as u16,
            csum_offset: 16,
        }
        .write(&mut frame);
        frame.extend_from_slice(&ip);
        frame
    }

    /// Completes a packet's transport checksum from its seed, as the device would.
    pub(crate) fn complete(ip: &mut [u8], csum_start: usize) {
        let s = !fold(sum_words(&ip[csum_start..]));
        set_u16(ip, csum_start + 16, s);
    }
}
