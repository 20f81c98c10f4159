//! UDP tests, sans-IO: the datagram header (landspeed's and iperf3's), the sender's pacing schedule, and
//! the receiver's accounting (loss, out-of-order, duplicates, RFC 3550 jitter). The I/O drivers feed
//! these with times they read from the clock, so every figure is tested deterministically here.
//!
//! Landspeed's datagram: sequence number (u64, big-endian, from 0) and the sender's clock at sending
//! (u64 nanoseconds), then payload from the run's pattern at stream offset `seq × payload length`, so
//! every datagram is verified like a TCP stream's bytes. iperf3's: seconds and microseconds (u32 each)
//! and a sequence number from 1 (u32, or u64 with `udp_counters_64bit`).

pub mod pacing;
pub mod receiver;
pub mod spin;

pub use pacing::Pacer;
pub use receiver::{TransitSummary, UdpReceiver, UdpStats};

/// Bytes of landspeed's datagram header.
pub const HEADER: usize = 16;
/// UDP datagram size by default: fits a 1500-byte MTU over IPv4 and IPv6.
pub const DEFAULT_UDP_LENGTH: crate::units::Bytes = crate::units::Bytes(1448);
/// The largest UDP payload over IPv4.
pub const MAX_UDP_LENGTH: u64 = 65_507;

/// The header of one datagram, whichever protocol wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sequence number counted from 0 (iperf3's, which start at 1, are shifted).
    pub seq: u64,
    /// The sender's clock when it sent the datagram, nanoseconds.
    pub sent_ns: u64,
}

impl Header {
    /// Writes landspeed's header at the start of `buf`.
    pub fn write(&self, buf: &mut [u8]) {
        buf[..8].copy_from_slice(&self.seq.to_be_bytes());
        buf[8..16].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// Reads landspeed's header from a datagram; None when it is too short.
    pub fn read(buf: &[u8]) -> Option<Header> {
        if buf.len() < HEADER {
            return None;
        }
        Some(Header {
            seq: u64::from_be_bytes(buf[..8].try_into().ok()?),
            sent_ns: u64::from_be_bytes(buf[8..16].try_into().ok()?),
        })
    }

    /// iperf3's header: seconds, microseconds, sequence (32 or 64 bits), all big-endian.
    pub fn write_iperf3(&self, buf: &mut [u8], wide: bool) {
        let secs = (self.sent_ns / 1_000_000_000) as u32;
        let usecs = ((self.sent_ns % 1_000_000_000) / 1000) as u32;
        buf[..4].copy_from_slice(&secs.to_be_bytes());
        buf[4..8].copy_from_slice(&usecs.to_be_bytes());
        let seq = self.seq + 1;
        if wide {
            buf[8..16].copy_from_slice(&seq.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
        }
    }

    /// Reads iperf3's header (32- or 64-bit sequence); None when the datagram is too short.
    pub fn read_iperf3(buf: &[u8], wide: bool) -> Option<Header> {
        let need = if wide { 16 } else { 12 };
        if buf.len() < need {
            return None;
        }
        let secs = u64::from(u32::from_be_bytes(buf[..4].try_into().ok()?));
        let usecs = u64::from(u32::from_be_bytes(buf[4..8].try_into().ok()?));
        let seq = if wide {
            u64::from_be_bytes(buf[8..16].try_into().ok()?)
        } else {
            u64::from(u32::from_be_bytes(buf[8..12].try_into().ok()?))
        };
        Some(Header {
            seq: seq.checked_sub(1)?,
            sent_ns: secs * 1_000_000_000 + usecs * 1000,
        })
    }
}

/// Datagrams a second a stream keeps at least when its size comes from the path: enough samples for
/// loss and jitter at every rate, so a slow test does not send a few large datagrams.
pub const MIN_DATAGRAMS_PER_S: f64 = 1000.0;

/// What a client knows of its path to the server when it sizes datagrams: its control connection's
/// MSS, and the MTU of that connection's route where the system says (Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSize {
    /// The control connection's MSS (0: unknown).
    pub mss_bytes: u32,
    /// The route's MTU (IP_MTU), and whether it is IPv6's.
    pub route_mtu: Option<(u32, bool)>,
}

/// An MSS at least this large is the kernel's bound at connect time (half the largest window the
/// peer has offered, which the SYN's unscaled field holds under 64 KiB), not the path's: the path's
/// MTU is then read from the route (loopback, InfiniBand's connected mode).
pub const HALF_WINDOW_MSS: u32 = 16 << 10;

/// The datagram size a test takes from its path when none is given (`-l`): the largest a datagram
/// can be without fragments, which is the control connection's MSS (iperf3 3.21 sizes its datagrams
/// the same way) or, where that MSS is only the kernel's half-window bound ([`HALF_WINDOW_MSS`]), the
/// route's MTU less the IP and UDP headers; but no larger than a stream's rate sends
/// [`MIN_DATAGRAMS_PER_S`] times a second, and never below [`DEFAULT_UDP_LENGTH`] for
/// that reason alone. On a 1500-byte Ethernet path this is 1448 bytes (IPv4) as before; on loopback
/// or a jumbo-frame path a fast test sends far larger datagrams, so each system call and each
/// verification carries more. An MSS of 0 (the system could not say) leaves the default.
pub fn length_for_path(path: PathSize, stream_rate_bps: f64) -> u64 {
    let mss = u64::from(path.mss_bytes);
    if mss == 0 {
        return DEFAULT_UDP_LENGTH.get();
    }
    let route = path
        .route_mtu
        .map(|(mtu, v6)| u64::from(mtu).saturating_sub(if v6 { 48 } else { 28 }));
    let largest = match route {
        Some(r) if path.mss_bytes >= HALF_WINDOW_MSS => r,
        Some(r) => r.min(mss),
        None => mss,
    };
    let fits = largest.clamp(HEADER as u64 + 1, MAX_UDP_LENGTH);
    let by_rate = (stream_rate_bps / 8.0 / MIN_DATAGRAMS_PER_S) as u64;
    let floor = DEFAULT_UDP_LENGTH.get().min(fits);
    by_rate.clamp(floor, fits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header {
            seq: 123_456_789_012,
            sent_ns: 9_876_543_210_123,
        };
        let mut b = [0u8; 32];
        h.write(&mut b);
        assert_eq!(Header::read(&b), Some(h));
        assert_eq!(Header::read(&b[..15]), None);
        // iperf3 carries microseconds and counts from 1.
        let h = Header {
            seq: 41,
            sent_ns: 5_000_123_000,
        };
        for wide in [false, true] {
            h.write_iperf3(&mut b, wide);
            assert_eq!(Header::read_iperf3(&b, wide), Some(h));
        }
        assert_eq!(&b[8..16], &42u64.to_be_bytes());
        let zero = [0u8; 16];
        assert_eq!(
            Header::read_iperf3(&zero, false),
            None,
            "iperf3 sequence 0 does not exist"
        );
    }

    #[test]
    fn a_datagram_is_sized_to_the_path_and_the_rate() {
        let mss = |m| PathSize {
            mss_bytes: m,
            route_mtu: None,
        };
        let size = super::length_for_path;
        // Ethernet, IPv4 with timestamps: as before, at any rate.
        assert_eq!(size(mss(1448), 1e6), 1448);
        assert_eq!(size(mss(1448), 60e9), 1448);
        // A smaller path (IPv6 over Ethernet, a tunnel): no fragments.
        assert_eq!(size(mss(1428), 60e9), 1428);
        assert_eq!(size(mss(1200), 1e6), 1200);
        // Jumbo frames: the MSS.
        assert_eq!(size(mss(8948), 60e9), 8948);
        // Out of range: an MSS past IPv4's largest datagram, or none.
        assert_eq!(size(mss(90_000), 60e9), MAX_UDP_LENGTH);
        assert_eq!(size(mss(0), 60e9), 1448, "no MSS known: the default");
        assert_eq!(size(mss(8), 60e9), HEADER as u64 + 1);
    }

    #[test]
    fn the_route_mtu_replaces_an_mss_bounded_by_the_first_window() {
        let path = |m, mtu, v6| PathSize {
            mss_bytes: m,
            route_mtu: Some((mtu, v6)),
        };
        let size = super::length_for_path;
        // Loopback: the MSS at connect time is 32768, the route's MTU 65536.
        assert_eq!(size(path(32_768, 65_536, false), 200e9), MAX_UDP_LENGTH);
        assert_eq!(size(path(32_768, 65_536, true), 200e9), 65_488);
        // ... a thousand datagrams a second when slower, the default size when slow.
        assert_eq!(size(path(32_768, 65_536, false), 100e6), 12_500);
        assert_eq!(size(path(32_768, 65_536, false), 1e6), 1448);
        // A jumbo interface towards a peer behind a 1500-byte hop: the peer's MSS, not the route.
        assert_eq!(size(path(1448, 9000, false), 60e9), 1448);
        assert_eq!(size(path(8948, 9000, false), 60e9), 8948);
        // A route smaller than the MSS says (a path MTU found since): the route bounds it.
        assert_eq!(size(path(32_768, 20_000, false), 60e9), 19_972);
        assert_eq!(size(path(1448, 1400, false), 60e9), 1372);
    }
}
