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

/// The longest datagram iperf 2.1.8 sends in its small trip-times form: below this (its
/// MINTRIPTIMEPLAYOAD) a `--trip-times` client drops the header, at it and above it sends it.
pub const SMALL_TRIPS_BELOW: usize = 128;

/// A datagram in iperf 2's small trip-times form (`-u --trip-times -l N`, N under
/// [`SMALL_TRIPS_BELOW`]): the prefix with a 32-bit sequence number of 0 or more (its upper word
/// 0), then the flags word `SMALL_TRIPTIMES` alone (2.1.8 writes it as a 16-bit word and zeroes
/// the next), then payload. Its header is [`ClientHeader::small_trip_times`].
fn udp_small(b: &[u8]) -> Option<(crate::udp::Datagram, ClientHeader)> {
    use crate::udp::{Datagram, PREFIX_BYTES};
    let word = b.get(PREFIX_BYTES..PREFIX_BYTES + 4)?;
    if crate::be32(word, 0) != crate::header::flags::SMALL_TRIPTIMES || b.len() >= SMALL_TRIPS_BELOW {
        return None;
    }
    let d = Datagram::parse(b, false).ok()?;
    let upper_zero = b.get(12..16) == Some(&[0u8; 4][..]);
    (d.seq >= 0 && upper_zero).then(|| (d, ClientHeader::small_trip_times(b.len() as u32)))
}

/// Reads a UDP datagram: an iperf 2 client's (its prefix, then its header, a sequence number of 0
/// or more) or not. Every datagram of an iperf 2 UDP test carries the header, so any of them opens
/// or continues a test; one numbered 0 is a first payload sent before the test's datagrams (iperf
/// 2's announcing a scheduled start, `--txstart-time`), which opens the test and is not counted in
/// it. An end (negative) opens none.
pub fn udp(b: &[u8]) -> Option<(crate::udp::Datagram, ClientHeader)> {
    use crate::udp::{Datagram, PREFIX_BYTES};
    if let Some(small) = udp_small(b) {
        return Some(small);
    }
    let rest = b.get(PREFIX_BYTES..)?;
    if rest.len() < NEEDED_BYTES || !matches!(tcp(rest), FirstBytes::Iperf2 { .. }) {
        return None;
    }
    let (header, _) = ClientHeader::parse(rest, PREFIX_BYTES).ok()?;
    let seq64 = header.flags & crate::header::flags::SEQNO64B != 0;
    let d = Datagram::parse(b, seq64).ok()?;
    (d.seq >= 0).then_some((d, header))
}
