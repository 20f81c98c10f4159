//! What each end of a test knows about itself: its streams' byte counts and timings, TCP_INFO, CPU and
//! host counters, and the interval samples it took. Both ends fill these in from their own measurements
//! and exchange them over the control connection at the end; `assemble` turns a pair of them into the
//! `RunResult`. They are raw observations (seconds, counters), not derived figures, so the arithmetic that
//! derives percentages and rates lives in one place and is tested without sockets.

use crate::config::Flow;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether this end wrote or read a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Sender,
    Receiver,
}

impl Role {
    /// The client's role in a stream whose data goes `flow`.
    pub fn at_client(flow: Flow) -> Role {
        match flow {
            Flow::ClientToServer => Role::Sender,
            Flow::ServerToClient => Role::Receiver,
        }
    }

    /// The server's role in a stream whose data goes `flow`.
    pub fn at_server(flow: Flow) -> Role {
        Role::at_client(flow).peer()
    }

    /// The other end's role in the same stream.
    pub fn peer(self) -> Role {
        match self {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        }
    }
}

/// TCP_INFO figures for one socket at the end of the test, plus RTT statistics over the interval samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpStats {
    pub retransmits: u64,
    pub rtt_us: u32,
    pub rtt_var_us: u32,
    pub rtt_min_us: u32,
    pub rtt_avg_us: u32,
    pub rtt_max_us: u32,
    pub cwnd_bytes: u64,
    pub snd_cwnd_segments: u32,
    pub mss_bytes: u32,
    pub pmtu_bytes: u32,
    pub segs_out: u64,
    pub segs_in: u64,
    pub delivery_rate_bps: f64,
    pub busy_time_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub reordering: u32,
    pub lost: u32,
    pub congestion: Option<String>,
    /// The window the peer advertises, as this end last saw it (on the sender: the receive window in
    /// effect, which is what limits a window-limited test; Linux advertises about 1.2 × the SO_RCVBUF
    /// request on a 1500-byte MTU, since it doubles the request and keeps part for overhead).
    #[serde(default)]
    pub snd_wnd_bytes: u64,
    /// The window this end advertises.
    #[serde(default)]
    pub rcv_wnd_bytes: u64,
}

/// One stream as seen by one end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    pub id: u32,
    pub flow: Flow,
    pub role: Role,
    /// Bytes written (sender) or read (receiver), warm-up included.
    pub bytes: u64,
    /// write()/read() calls that moved data.
    pub calls: u64,
    /// Bytes moved before the warm-up ended, left out of the results. A receiver's own count; a
    /// landspeed sender leaves it 0 (the result subtracts the receiver's), iperf3's view of a sender
    /// (`landspeed_iperf3::iperf3_counts`) and the report built from an iperf3 server's figures set it.
    pub omitted_bytes: u64,
    /// Seconds from this end's start to its first and last byte.
    pub first_byte_s: Option<f64>,
    pub last_byte_s: Option<f64>,
    /// SO_SNDBUF / SO_RCVBUF as the kernel reports them after the request.
    pub snd_buf_bytes: u64,
    pub rcv_buf_bytes: u64,
    pub tcp: Option<TcpStats>,
    pub error: Option<String>,
    /// Receiver only: bytes checked against the expected payload, warm-up included.
    #[serde(default)]
    pub bytes_verified: u64,
    /// Receiver only: 256-byte payload blocks with at least one wrong byte.
    #[serde(default)]
    pub corrupt_blocks: u64,
    #[serde(default)]
    pub first_corruption: Option<crate::payload::Corruption>,
    /// Sender only, with MSG_ZEROCOPY: sends made, and how many the kernel reported it copied anyway.
    #[serde(default)]
    pub zerocopy_sends: u64,
    #[serde(default)]
    pub zerocopy_copied: u64,
    /// UDP receiver: datagram accounting (the sender's count comes with its end-of-stream marker).
    #[serde(default)]
    pub udp: Option<crate::udp::UdpStats>,
    /// UDP sender: sends the kernel refused (ENOBUFS, EAGAIN); those datagrams were skipped.
    #[serde(default)]
    pub send_errors: u64,
    /// UDP: segmentation offload (sender) or receive offload (receiver) was in use.
    #[serde(default)]
    pub udp_offload: bool,
}

/// Process and system CPU time over the test, raw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Wall-clock seconds the counters cover.
    pub wall_s: f64,
    /// This process's user and system CPU seconds (getrusage).
    pub process_user_s: f64,
    pub process_system_s: f64,
    /// All CPUs, from /proc/stat: seconds busy (everything but idle and iowait) and in softirq.
    pub system_busy_s: f64,
    pub system_softirq_s: f64,
    pub system_total_s: f64,
    pub cpus: u32,
    /// Clock rate used for cycles/byte, and where it came from.
    pub clock_hz: Option<f64>,
    pub clock_source: Option<String>,
}

/// Packet counters of the interface the test's traffic used, and the system's interrupt count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub interrupts: u64,
    pub wall_s: f64,
}

/// Facts about a host that a record submission or a puzzled user needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: u32,
    pub memory_bytes: u64,
    /// Network sysctls that decide throughput (rmem/wmem limits, congestion control, ...).
    pub sysctls: BTreeMap<String, String>,
    /// The command line of the process at this end (values of --auth, --auth-keys and --allow left out).
    #[serde(default)]
    pub command_line: String,
    /// The network interface the test used.
    #[serde(default)]
    pub nic: Option<NicInfo>,
}

/// The interface a test ran over, as the record document describes an end system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicInfo {
    pub name: String,
    /// Kernel driver (None for virtual devices without one).
    pub driver: Option<String>,
    /// Link speed in Mbit/s as the driver reports it (None when unknown, e.g. loopback).
    pub speed_mbps: Option<u64>,
    pub mtu: Option<u32>,
    pub tx_queue_len: Option<u32>,
    /// Offloads from `ethtool -k` (empty when ethtool is not installed).
    pub offloads: BTreeMap<String, bool>,
    /// The interface's root queueing discipline (`tc qdisc show`), e.g. "fq" or "noqueue".
    #[serde(default)]
    pub qdisc: Option<String>,
}

/// Everything one end reports at the end of a test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointReport {
    pub software: String,
    pub streams: Vec<StreamReport>,
    pub cpu: CpuTimes,
    pub host: HostInfo,
    pub interface: Option<InterfaceCounters>,
    /// Seconds from this end's start to the end of its last stream.
    pub elapsed_s: f64,
    pub threads: u32,
    pub cpus_pinned: Option<Vec<usize>>,
    pub warnings: Vec<String>,
    pub error: Option<String>,
    /// Disk-to-disk tests: what this end measured about its file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<crate::files::FileReport>,
}

/// TCP state of one stream at a sample instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSnapshot {
    pub rtt_us: u32,
    pub cwnd_bytes: u64,
    pub retransmits: u64,
}

/// One stream's cumulative byte count at a sample instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamSample {
    pub id: u32,
    pub bytes: u64,
    pub tcp: Option<TcpSnapshot>,
}

/// A sample of every local stream, closing the interval `start_s..end_s` (seconds since this end's start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    pub index: u32,
    pub start_s: f64,
    pub end_s: f64,
    /// The interval lies in the warm-up (`-O`) and is left out of the results.
    pub omitted: bool,
    pub streams: Vec<StreamSample>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_knows_its_role_from_the_flow() {
        assert_eq!(Role::at_client(Flow::ClientToServer), Role::Sender);
        assert_eq!(Role::at_server(Flow::ClientToServer), Role::Receiver);
        assert_eq!(Role::at_client(Flow::ServerToClient), Role::Receiver);
        assert_eq!(Role::at_server(Flow::ServerToClient), Role::Sender);
        assert_eq!(Role::Sender.peer().peer(), Role::Sender);
    }
}
