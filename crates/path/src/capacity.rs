//! Bottleneck capacity from packet-train dispersion (pipechar's and pathrate's idea): a train of
//! back-to-back packets leaves the narrowest link spaced by that link's serialization time, so
//! (packets − 1) × size / (last arrival − first arrival) is its rate. The landspeed server stamps each
//! packet with its kernel receive time and answers with a short echo, so the estimate uses the
//! receiver's clock only and the return path never limits it. Trains are spaced apart so they do not
//! queue behind each other; the median over many trains resists cross traffic and scheduling noise, and
//! the 10th–90th percentile range is reported as the spread.

use landspeed_core::path::report::train_estimate_bps;
use landspeed_core::path::{CapacityReport, EchoHeader, EchoKind};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How the packet-train capacity estimate is sent.
#[derive(Debug, Clone)]
pub struct CapacityParams {
    /// Trains sent.
    pub trains: u32,
    /// Back-to-back packets per train.
    pub train_packets: u32,
    /// IP packet size (capped at the route's MTU).
    pub packet_bytes: u32,
    /// Pause between trains.
    pub gap: Duration,
    /// How long to wait for a train's echoes.
    pub wait: Duration,
}

impl Default for CapacityParams {
    fn default() -> Self {
        CapacityParams {
            trains: 20,
            train_packets: 48,
            packet_bytes: 1500,
            gap: Duration::from_millis(20),
            wait: Duration::from_secs(1),
        }
    }
}

/// Sends the trains to a landspeed server at `dst` and estimates the bottleneck's rate.
pub fn estimate(dst: SocketAddr, p: &CapacityParams, interrupt: &AtomicBool) -> io::Result<CapacityReport> {
    let v6 = dst.is_ipv6();
    let sock = crate::udp_socket(dst, true)?;
    let overhead = crate::ip_udp_overhead(v6);
    let mtu = crate::errqueue::route_mtu(&sock, v6).unwrap_or(1500).min(65_535);
    let size = p.packet_bytes.min(mtu).max(overhead + 64);
    let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(4 << 20);
    let id = getrandom::u32().unwrap_or(0xca9);
    let mut report = CapacityReport {
        packet_bytes: size,
        train_packets: p.train_packets,
        ..CapacityReport::default()
    };
    let n = p.train_packets.max(2);
    let mut pkt = vec![0x3cu8; (size - overhead) as usize];
    let mut buf = vec![0u8; 2048];
    for t in 0..p.trains {
        if interrupt.load(Relaxed) {
            break;
        }
        let train = id.wrapping_add(t);
        for k in 0..n {
            EchoHeader::request(train, k, 0, true).write(&mut pkt);
            // A full send buffer drops nothing here: the socket blocks, the train just leaves later.
            sock.send(&pkt)?;
        }
        report.trains_sent += 1;
        let mut stamps: Vec<u64> = Vec::with_capacity(n as usize);
        let until = Instant::now() + p.wait;
        while (stamps.len() as u32) < n {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            sock.set_read_timeout(Some(left))?;
            match sock.recv(&mut buf) {
                Ok(len) => {
                    if let Some(h) = EchoHeader::read(&buf[..len]) {
                        if h.kind == EchoKind::Reply && h.train == train && h.server_rx_ns > 0 {
                            stamps.push(h.server_rx_ns);
                        }
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
                Err(_) => break,
            }
        }
        // Half the train back at least, or the spacing says more about loss than about the link.
        if stamps.len() as u32 >= n / 2 {
            let first = stamps.iter().min().copied().unwrap_or(0);
            let last = stamps.iter().max().copied().unwrap_or(0);
            if let Some(bps) = train_estimate_bps(stamps.len() as u32, size, last - first) {
                report.per_train_bps.push(bps);
            }
        }
        std::thread::sleep(p.gap);
    }
    report.summarize();
    Ok(report)
}
