//! TCP_INFO, read with getsockopt. The struct mirrors the kernel's `struct tcp_info` (uapi/linux/tcp.h)
//! up to the fields of Linux 6.x; an older kernel fills fewer bytes, and fields past what it returned
//! stay zero, so `len` tells which figures are real.

use landspeed_core::endpoint::{TcpSnapshot, TcpStats};
use std::os::fd::AsRawFd;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RawTcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub rehash: u32,
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
}

/// TCP_INFO of a socket and how many bytes of it the kernel filled.
#[derive(Debug, Clone, Copy)]
pub struct TcpInfo {
    pub raw: RawTcpInfo,
    pub len: usize,
}

/// Reads TCP_INFO. Errors only if the descriptor is not a TCP socket.
pub fn read(sock: &impl AsRawFd) -> std::io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a plain repr(C) struct of `len` bytes; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(TcpInfo {
        raw,
        len: len as usize,
    })
}

impl TcpInfo {
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
            rcv_wnd_bytes: u64::from(r.rcv_wnd),
        }
    }
}

/// The congestion control algorithm a socket uses.
pub fn congestion(sock: &socket2::Socket) -> Option<String> {
    let name = sock.tcp_congestion().ok()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
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
