//! What a TCP connection's first bytes say: an iperf 2 client's test header, or not. landspeed's
//! server answers several protocols on one port and tells them apart by their first bytes; an
//! iperf 2 client speaks first, with its header. Its flags alone are not enough (an iperf 3
//! client's cookie begins with lowercase letters, whose bits look like the extension's), so the
//! stream count and port words are read too: small numbers in iperf 2's header, text in a cookie.

use crate::header::ClientHeader;

/// Bytes the decision needs.
pub const NEEDED_BYTES: usize = 12;

/// The most streams a header may ask for and still be read as iperf 2's (iperf 2 itself takes
/// `-P` up to what its threads allow; a cookie's text reads as hundreds of millions).
pub const MAX_THREADS: u32 = 1 << 16;

/// The reading of a connection's first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstBytes {
    /// An iperf 2 client's header of this many bytes.
    Iperf2 {
        /// The header's length.
        header_bytes: usize,
    },
    /// Not iperf 2's.
    Other,
    /// Fewer than [`NEEDED_BYTES`] so far.
    NeedMore,
}

/// Reads `first`, the bytes a TCP client sent first.
pub fn tcp(first: &[u8]) -> FirstBytes {
    if first.len() < NEEDED_BYTES {
        return FirstBytes::NeedMore;
    }
    let word = |at: usize| crate::be32(first, at);
    let (f, threads, port) = (word(0), word(4), word(8));
    if threads == 0 || threads > MAX_THREADS || port > u32::from(u16::MAX) {
        return FirstBytes::Other;
    }
    // The flags must announce a header whose declared length holds its parts.
    match ClientHeader::len_from_flags(f, 0) {
        Ok(header_bytes) => FirstBytes::Iperf2 { header_bytes },
        Err(_) => FirstBytes::Other,
    }
}

/// Reads a UDP datagram: an iperf 2 client's (its prefix, then its header, a sequence number of 0
/// or more) or not. Every datagram of an iperf 2 UDP test carries the header, so any of them opens
/// or continues a test; one numbered 0 is a first payload sent before the test's datagrams (iperf
/// 2's announcing a scheduled start, `--txstart-time`), which opens the test and is not counted in
/// it. An end (negative) opens none.
pub fn udp(b: &[u8]) -> Option<(crate::udp::Datagram, ClientHeader)> {
    use crate::udp::{Datagram, PREFIX_BYTES};
    let rest = b.get(PREFIX_BYTES..)?;
    if rest.len() < NEEDED_BYTES || !matches!(tcp(rest), FirstBytes::Iperf2 { .. }) {
        return None;
    }
    let (header, _) = ClientHeader::parse(rest, PREFIX_BYTES).ok()?;
    let seq64 = header.flags & crate::header::flags::SEQNO64B != 0;
    let d = Datagram::parse(b, seq64).ok()?;
    (d.seq >= 0).then_some((d, header))
}
