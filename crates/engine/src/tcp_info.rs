//! TCP_INFO, read with getsockopt. The struct mirrors the kernel's `struct tcp_info` (uapi/linux/tcp.h)
//! up to the fields of Linux 6.x; an older kernel fills fewer bytes, and fields past what it returned
//! stay zero, so `len` tells which figures are real.

use landspeed_core::endpoint::{TcpSnapshot, TcpStats};

/// `struct tcp_info` as Linux lays it out (uapi/linux/tcp.h); the kernel's names without `tcpi_`, times in microseconds unless said otherwise.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RawTcpInfo {
    /// The connection's state (TCP_ESTABLISHED, ...).
    pub state: u8,
    /// Congestion avoidance state (open, disorder, CWR, recovery, loss).
    pub ca_state: u8,
    /// Unrecovered retransmission timeouts in a row.
    pub retransmits: u8,
    /// Unanswered zero-window probes.
    pub probes: u8,
    /// Exponential backoff of the retransmission timer.
    pub backoff: u8,
    /// Options in use (TCPI_OPT_TIMESTAMPS, SACK, WSCALE, ECN, ...).
    pub options: u8,
    /// Window scale shifts: send in the low nibble, receive in the high one.
    pub wscale: u8,
    /// Delivery-rate application-limited bit and fast-open flags.
    pub flags: u8,
    /// The retransmission timeout.
    pub rto: u32,
    /// The delayed-ACK timeout.
    pub ato: u32,
    /// The MSS this end sends with, bytes.
    pub snd_mss: u32,
    /// The MSS seen from the peer, bytes.
    pub rcv_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Segments the peer has selectively acknowledged.
    pub sacked: u32,
    /// Segments taken as lost.
    pub lost: u32,
    /// Retransmitted segments not yet acknowledged.
    pub retrans: u32,
    /// Unused since Linux 4.x (was forward-acknowledged segments).
    pub fackets: u32,
    /// Milliseconds since data was last sent.
    pub last_data_sent: u32,
    /// Milliseconds since an ACK was last sent (not kept by Linux).
    pub last_ack_sent: u32,
    /// Milliseconds since data was last received.
    pub last_data_recv: u32,
    /// Milliseconds since an ACK was last received.
    pub last_ack_recv: u32,
    /// The path MTU, bytes.
    pub pmtu: u32,
    /// The receive slow-start threshold, bytes.
    pub rcv_ssthresh: u32,
    /// The smoothed round-trip time.
    pub rtt: u32,
    /// The round-trip time's variation.
    pub rttvar: u32,
    /// The slow-start threshold, segments.
    pub snd_ssthresh: u32,
    /// The congestion window, segments.
    pub snd_cwnd: u32,
    /// The MSS this end advertised, bytes.
    pub advmss: u32,
    /// How far out of order segments may arrive before loss is assumed, segments.
    pub reordering: u32,
    /// The receiver's estimate of the round-trip time.
    pub rcv_rtt: u32,
    /// The receive buffer space auto-tuning aims at, bytes.
    pub rcv_space: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// The pacing rate, bytes per second.
    pub pacing_rate: u64,
    /// The largest pacing rate allowed (SO_MAX_PACING_RATE), bytes per second.
    pub max_pacing_rate: u64,
    /// Bytes the peer has acknowledged.
    pub bytes_acked: u64,
    /// Bytes received in order.
    pub bytes_received: u64,
    /// Segments sent, retransmissions included.
    pub segs_out: u32,
    /// Segments received.
    pub segs_in: u32,
    /// Bytes written by the application and not yet sent.
    pub notsent_bytes: u32,
    /// The smallest round-trip time seen (the windowed minimum).
    pub min_rtt: u32,
    /// Segments with data received.
    pub data_segs_in: u32,
    /// Segments with data sent.
    pub data_segs_out: u32,
    /// The latest delivery-rate sample, bytes per second.
    pub delivery_rate: u64,
    /// Time with data in flight.
    pub busy_time: u64,
    /// Time limited by the peer's receive window.
    pub rwnd_limited: u64,
    /// Time limited by this end's send buffer.
    pub sndbuf_limited: u64,
    /// Segments delivered, retransmissions included.
    pub delivered: u32,
    /// Segments delivered with an ECN congestion mark.
    pub delivered_ce: u32,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// Duplicate segments the peer reported with D-SACK.
    pub dsack_dups: u32,
    /// Reordering events seen.
    pub reord_seen: u32,
    /// Segments received out of order.
    pub rcv_ooopack: u32,
    /// The peer's advertised receive window, bytes.
    pub snd_wnd: u32,
    /// This end's advertised receive window, bytes.
    pub rcv_wnd: u32,
    /// Times the connection's flow label was changed (PLB, timeouts).
    pub rehash: u32,
    /// Retransmission timeouts over the connection's life.
    pub total_rto: u16,
    /// Recoveries that began with a retransmission timeout.
    pub total_rto_recoveries: u16,
    /// Milliseconds spent in those recoveries.
    pub total_rto_time: u32,
}

/// TCPI_OPT_ECN: the connection negotiated ECN.
const TCPI_OPT_ECN: u8 = 8;

/// TCP_INFO of a socket and how many bytes of it the kernel filled.
#[derive(Debug, Clone, Copy)]
pub struct TcpInfo {
    /// The struct as the kernel filled it.
    pub raw: RawTcpInfo,
    /// How many bytes of it the kernel filled (fields past it are zero, not measured).
    pub len: usize,
}

/// Reads TCP_INFO (on Windows, SIO_TCP_INFO's figures in the same layout). Errors only if the
/// socket is not a TCP socket, or the system cannot say.
pub fn read(sock: &impl crate::os::AsSock) -> std::io::Result<TcpInfo> {
    crate::os::tcp_info(sock)
}

impl TcpInfo {
    /// A TCP_INFO the kernel wrote into a larger answer (MPTCP_TCPINFO's per-subflow array): the
    /// first `b.len()` bytes of the struct, the rest zero.
    pub fn from_bytes(b: &[u8]) -> TcpInfo {
        let mut raw = RawTcpInfo::default();
        let len = b.len().min(std::mem::size_of::<RawTcpInfo>());
        // SAFETY: RawTcpInfo is plain old data (integers only); `len` is at most its size.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), (&mut raw as *mut RawTcpInfo).cast::<u8>(), len) };
        TcpInfo { raw, len }
    }

    /// The figures a live sample carries (RTT, window, retransmits, delivery rate, ...).
    pub fn snapshot(&self) -> TcpSnapshot {
        TcpSnapshot {
            rtt_us: self.raw.rtt,
            cwnd_bytes: u64::from(self.raw.snd_cwnd) * u64::from(self.raw.snd_mss),
            retransmits: u64::from(self.raw.total_retrans),
        }
    }

    /// The end-of-test figures; `rtts` are the RTTs sampled during the test (for average and maximum).
    pub fn stats(&self, rtts: &[u32], congestion: Option<String>) -> TcpStats {
        let r = &self.raw;
        let mut all: Vec<u32> = rtts.iter().copied().filter(|&x| x > 0).collect();
        if r.rtt > 0 {
            all.push(r.rtt);
        }
        let avg = if all.is_empty() {
            0
        } else {
            (all.iter().map(|&x| u64::from(x)).sum::<u64>() / all.len() as u64) as u32
        };
        TcpStats {
            retransmits: u64::from(r.total_retrans),
            rtt_us: r.rtt,
            rtt_var_us: r.rttvar,
            rtt_min_us: if r.min_rtt > 0 && r.min_rtt != u32::MAX {
                r.min_rtt
            } else {
                all.iter().copied().min().unwrap_or(0)
            },
            rtt_avg_us: avg,
            rtt_max_us: all.iter().copied().max().unwrap_or(0),
            cwnd_bytes: u64::from(r.snd_cwnd) * u64::from(r.snd_mss),
            snd_cwnd_segments: r.snd_cwnd,
            mss_bytes: r.snd_mss,
            pmtu_bytes: r.pmtu,
            segs_out: u64::from(r.segs_out),
            segs_in: u64::from(r.segs_in),
            delivery_rate_bps: r.delivery_rate as f64 * 8.0,
            busy_time_us: r.busy_time,
            rwnd_limited_us: r.rwnd_limited,
            sndbuf_limited_us: r.sndbuf_limited,
            reordering: r.reordering,
            lost: r.lost,
            congestion,
            snd_wnd_bytes: u64::from(r.snd_wnd),
            ecn: crate::os::TCP_INFO_HAS_ECN.then_some(r.options & TCPI_OPT_ECN != 0),
            delivered_ce: (crate::os::TCP_INFO_HAS_ECN
                && self.len >= std::mem::offset_of!(RawTcpInfo, delivered_ce) + 4)
                .then_some(r.delivered_ce),
            rcv_wnd_bytes: u64::from(r.rcv_wnd),
            mptcp: None,
        }
    }
}

/// The congestion control algorithm a socket uses (None where the system does not say).
pub fn congestion(sock: &socket2::Socket) -> Option<String> {
    crate::os::congestion(sock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_kernel() {
        assert_eq!(std::mem::size_of::<RawTcpInfo>(), 248);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, total_retrans), 100);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, busy_time), 168);
    }

    #[test]
    fn reads_a_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = read(&c).unwrap();
        assert!(info.len >= 104, "kernel returned only {} bytes", info.len);
        assert!(info.raw.snd_mss > 0);
        assert_eq!(info.raw.state, 1, "TCP_ESTABLISHED");
    }
}
