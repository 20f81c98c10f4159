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
    /// It wrote the stream's data.
    Sender,
    /// It read the stream's data.
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

/// A TCP connection as its client saw it made: what iperf 2's "connected with" line tells of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectFacts {
    /// `connect()`'s time, milliseconds (TCP's; None for a UDP socket).
    pub connect_ms: Option<f64>,
    /// TCP_INFO right after the handshake: the congestion window in KiB (segments × MSS / 1024,
    /// as iperf 2 prints it), the MSS (bytes) and the RTT (µs).
    pub cwnd_mss_rtt: Option<(u32, u32, u32)>,
    /// The socket's descriptor in this process.
    pub fd: Option<i64>,
    /// The interface this end's address is on.
    pub interface: Option<String>,
    /// This end's address of the connection (`IP:PORT`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// A server's connection opened back to its client (iperf 2's `-r` and `-d`), not accepted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub back: bool,
    /// The socket's send buffer as the kernel gave it when the connection was made, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_buffer_bytes: Option<u64>,
    /// The unsent data its sender was held to (TCP_NOTSENT_LOWAT), bytes: iperf 2's
    /// `--tcp-write-prefetch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsent_mark_bytes: Option<u32>,
    /// The receive window this end's socket advertised was clamped to this (TCP_WINDOW_CLAMP),
    /// bytes: iperf 2's server `--tcp-rx-window-clamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_clamp_bytes: Option<u32>,
    /// Its sender was paced by the kernel at the client's `--fq-rate` (iperf 2's `FQRATESET`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fq_paced: bool,
    /// Its receiver acknowledged each read at once (TCP_QUICKACK): iperf 2's `--tcp-quickack`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quickack: bool,
}

/// TCP_INFO figures for one socket at the end of the test, plus RTT statistics over the interval samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpStats {
    /// Retransmitted segments over the connection's life (tcpi_total_retrans).
    pub retransmits: u64,
    /// Smoothed RTT at the end, µs.
    pub rtt_us: u32,
    /// RTT variation at the end, µs.
    pub rtt_var_us: u32,
    /// The smallest RTT the kernel saw (tcpi_min_rtt), µs.
    pub rtt_min_us: u32,
    /// The mean of the samples' smoothed RTTs, µs.
    pub rtt_avg_us: u32,
    /// The largest of the samples' smoothed RTTs, µs.
    pub rtt_max_us: u32,
    /// Congestion window at the end, bytes (segments × MSS).
    pub cwnd_bytes: u64,
    /// Congestion window at the end, segments.
    pub snd_cwnd_segments: u32,
    /// The MSS sent with, bytes.
    pub mss_bytes: u32,
    /// The path MTU, bytes.
    pub pmtu_bytes: u32,
    /// Segments sent, retransmissions included.
    pub segs_out: u64,
    /// Segments received.
    pub segs_in: u64,
    /// The last delivery-rate sample, bit/s.
    pub delivery_rate_bps: f64,
    /// Time with data in flight, µs.
    pub busy_time_us: u64,
    /// Time limited by the peer's receive window, µs.
    pub rwnd_limited_us: u64,
    /// Time limited by the send buffer, µs.
    pub sndbuf_limited_us: u64,
    /// Reordering the kernel tolerates now, segments.
    pub reordering: u32,
    /// Segments taken as lost at the end.
    pub lost: u32,
    /// The congestion control in use.
    pub congestion: Option<String>,
    /// The window the peer advertises, as this end last saw it (on the sender: the receive window in
    /// effect, which is what limits a window-limited test; Linux advertises about 1.2 × the SO_RCVBUF
    /// request on a 1500-byte MTU, since it doubles the request and keeps part for overhead).
    #[serde(default)]
    pub snd_wnd_bytes: u64,
    /// The window this end advertises.
    #[serde(default)]
    pub rcv_wnd_bytes: u64,
    /// ECN: whether the connection negotiated it (RFC 3168, TCPI_OPT_ECN); absent where the system
    /// does not say (Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// Segments this end's peer acknowledged as delivered with a Congestion Experienced mark
    /// (tcpi_delivered_ce, Linux 4.18+, counted on the sender); absent where the kernel does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_ce: Option<u32>,
    /// Multipath TCP: present when the connection is MPTCP (absent for plain TCP, and for an MPTCP
    /// socket that fell back to TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<MptcpStats>,
}

/// One MPTCP connection at the end of a test, as one end's kernel saw it (MPTCP_INFO and the
/// per-subflow MPTCP_TCPINFO / MPTCP_SUBFLOW_ADDRS).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MptcpStats {
    /// Subflows open at the end, the first included.
    pub subflows: u32,
    /// The most extra subflows the path manager allows (`ip mptcp limits`).
    pub subflows_max: u32,
    /// Addresses this end announced to the peer (ADD_ADDR sent).
    pub add_addr_signal: u32,
    /// Addresses the peer announced that this end accepted.
    pub add_addr_accepted: u32,
    /// Each subflow's addresses and TCP figures (empty where the kernel lacks MPTCP_TCPINFO).
    #[serde(default)]
    pub paths: Vec<MptcpSubflow>,
}

/// One subflow of an MPTCP connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MptcpSubflow {
    /// This end's address and port, when the kernel gave them.
    pub local: Option<String>,
    /// The peer's address and port.
    pub remote: Option<String>,
    /// Bytes this subflow sent, retransmissions included (tcpi_bytes_sent).
    pub bytes_sent: u64,
    /// Bytes it received (tcpi_bytes_received).
    pub bytes_received: u64,
    /// Bytes the peer acknowledged on it (tcpi_bytes_acked).
    pub bytes_acked: u64,
    /// Its retransmitted segments.
    pub retransmits: u64,
    /// Its smoothed RTT at the end, µs.
    pub rtt_us: u32,
    /// Its congestion window at the end, bytes.
    pub cwnd_bytes: u64,
}

/// One stream as seen by one end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// The stream's number.
    pub id: u32,
    /// Which way its data goes.
    pub flow: Flow,
    /// Whether this end wrote or read it.
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
    /// Seconds from this end's start to its last byte.
    pub last_byte_s: Option<f64>,
    /// SO_SNDBUF / SO_RCVBUF as the kernel reports them after the request.
    pub snd_buf_bytes: u64,
    /// SO_RCVBUF as the kernel granted it.
    pub rcv_buf_bytes: u64,
    /// TCP_INFO at the end (None for UDP).
    pub tcp: Option<TcpStats>,
    /// Why the stream failed at this end, if it did.
    pub error: Option<String>,
    /// Receiver only: bytes checked against the expected payload, warm-up included.
    #[serde(default)]
    pub bytes_verified: u64,
    /// Receiver only: 256-byte payload blocks with at least one wrong byte.
    #[serde(default)]
    pub corrupt_blocks: u64,
    /// Receiver only: where the first wrong byte was.
    #[serde(default)]
    pub first_corruption: Option<crate::payload::Corruption>,
    /// Sender only, with MSG_ZEROCOPY: sends made, and how many the kernel reported it copied anyway.
    #[serde(default)]
    pub zerocopy_sends: u64,
    /// Zero-copy sends the kernel copied anyway.
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
    /// TCP: the stream ran on a blocking socket its worker thread owned alone (else epoll or io_uring).
    #[serde(default)]
    pub blocking: bool,
    /// TCP receiver: the SO_RCVLOWAT the kernel kept (None: not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvlowat_bytes: Option<u64>,
    /// TLS streams (`--tls`): the suite the handshake agreed on, and the records a sender sealed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<StreamTls>,
    /// QUIC streams: their connection's figures, as this end's QUIC stack kept them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicStats>,
    /// The stream's own socket: this end's port and the far end's, when it has one of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_port: Option<u16>,
    /// The far end's port of the stream's own socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_port: Option<u16>,
}

impl StreamReport {
    /// A stream that has moved nothing yet.
    pub fn empty(id: u32, flow: Flow, role: Role) -> StreamReport {
        StreamReport {
            id,
            flow,
            role,
            bytes: 0,
            calls: 0,
            omitted_bytes: 0,
            first_byte_s: None,
            last_byte_s: None,
            snd_buf_bytes: 0,
            rcv_buf_bytes: 0,
            tcp: None,
            error: None,
            bytes_verified: 0,
            corrupt_blocks: 0,
            first_corruption: None,
            zerocopy_sends: 0,
            zerocopy_copied: 0,
            udp: None,
            send_errors: 0,
            udp_offload: false,
            blocking: false,
            rcvlowat_bytes: None,
            tls: None,
            quic: None,
            local_port: None,
            peer_port: None,
        }
    }
}

/// A QUIC connection's figures at the end of a test, from the stack's own accounting (quinn's
/// `ConnectionStats`), seen from one end. Every stream of a connection carries the same figures.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuicStats {
    /// Which of the test's connections carried the stream (0-based).
    pub connection: u32,
    /// The congestion controller ("cubic", "bbr", "newreno").
    pub congestion: String,
    /// The smoothed round-trip time, microseconds.
    pub rtt_us: u64,
    /// The congestion window at the end, bytes.
    pub cwnd_bytes: u64,
    /// Times the congestion controller reacted to loss or ECN marks.
    pub congestion_events: u64,
    /// Packets this end sent and declared lost.
    pub lost_packets: u64,
    /// Bytes in the packets declared lost.
    pub lost_bytes: u64,
    /// Packets this end sent.
    pub sent_packets: u64,
    /// The largest UDP payload the path was found to carry (MTU discovery), bytes.
    pub path_mtu_bytes: u32,
    /// UDP datagrams this end sent and received.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// Send system calls: fewer than datagrams when segmentation offload (GSO) batched them.
    pub send_calls: u64,
}

/// One TLS stream's session, as its end saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamTls {
    /// The suite the handshake agreed on.
    pub cipher: crate::tls::TlsCipher,
    /// Sender: records sealed (each at most 16 KiB of plaintext). Receiver: 0.
    pub records: u64,
}

/// Process and system CPU time over the test, raw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Wall-clock seconds the counters cover.
    pub wall_s: f64,
    /// This process's user and system CPU seconds (getrusage).
    pub process_user_s: f64,
    /// This process's system CPU seconds.
    pub process_system_s: f64,
    /// All CPUs, from /proc/stat: seconds busy (everything but idle and iowait) and in softirq.
    pub system_busy_s: f64,
    /// All CPUs' seconds in softirq.
    pub system_softirq_s: f64,
    /// All CPUs' seconds in all, idle included.
    pub system_total_s: f64,
    /// CPUs online.
    pub cpus: u32,
    /// Clock rate used for cycles/byte, and where it came from.
    pub clock_hz: Option<f64>,
    /// Where the clock rate came from.
    pub clock_source: Option<String>,
    /// Each CPU's share of the same wall-clock span, from /proc/stat's per-CPU lines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<CpuShare>,
    /// All CPUs' seconds stolen by the hypervisor for other guests (/proc/stat's steal; counted in
    /// `system_busy_s`); 0 from peers that do not report it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub system_steal_s: f64,
    /// The CPU quota of this process's control group, and how often it ran out over the test (None
    /// without a quota, off Linux, or from peers that do not report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupCpu>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// A control group's CPU quota and its throttling over a test (cgroup v2 `cpu.max`/`cpu.stat`, v1
/// `cpu.cfs_quota_us`/`cpu.stat`), read from the nearest group above the process that has a quota.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CgroupCpu {
    /// The group's path in its hierarchy.
    pub path: String,
    /// Its quota, in CPUs (quota / period).
    pub quota_cpus: f64,
    /// Enforcement periods that elapsed over the test.
    pub periods: u64,
    /// Periods in which the group ran out of its quota and was stopped until the next.
    pub throttled_periods: u64,
    /// Seconds its tasks spent stopped by the quota (summed over them).
    pub throttled_s: f64,
}

/// One CPU's time over the test, from /proc/stat (seconds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    /// The CPU's number.
    pub cpu: u32,
    /// Seconds busy: everything but idle and iowait.
    pub busy_s: f64,
    /// Seconds in the kernel on behalf of tasks (system).
    pub system_s: f64,
    /// Seconds in softirq (network receive processing among it).
    pub softirq_s: f64,
    /// Seconds in all, idle included.
    pub total_s: f64,
}

/// One worker thread's CPU time over the test (getrusage RUSAGE_THREAD) and where it last ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerCpu {
    /// The streams the thread moved.
    pub streams: Vec<u32>,
    /// Seconds in user space.
    pub user_s: f64,
    /// Seconds in the kernel.
    pub system_s: f64,
    /// Seconds from the thread's start to its end.
    pub wall_s: f64,
    /// The CPU it was on when it ended (sched_getcpu).
    pub last_cpu: Option<u32>,
    /// Seconds it was ready to run but waited for a CPU (Linux schedstat's run delay: another
    /// thread or process had the CPU); None where the kernel does not say, or from older peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runq_wait_s: Option<f64>,
}

/// Packet counters of the interface the test's traffic used, and the system's interrupt count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    /// The interface.
    pub name: String,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// Packets dropped on receipt.
    pub rx_dropped: u64,
    /// Packets dropped on sending.
    pub tx_dropped: u64,
    /// Interrupts on the host.
    pub interrupts: u64,
    /// Wall-clock seconds the counters cover.
    pub wall_s: f64,
}

/// Facts about a host that a record submission or a puzzled user needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// The host's name.
    pub hostname: String,
    /// The operating system (PRETTY_NAME of /etc/os-release).
    pub os: String,
    /// The kernel release.
    pub kernel: String,
    /// The CPU model.
    pub cpu_model: String,
    /// CPUs online.
    pub cpus: u32,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// Network sysctls that decide throughput (rmem/wmem limits, congestion control, ...).
    pub sysctls: BTreeMap<String, String>,
    /// The command line of the process at this end (values of --auth, --auth-keys and --allow left out).
    #[serde(default)]
    pub command_line: String,
    /// The network interface the test used.
    #[serde(default)]
    pub nic: Option<NicInfo>,
    /// The far end withheld what identifies it (a server tells a client without a key only what the
    /// measurement needs: its CPU count and network sysctls).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub withheld: bool,
    /// Whether the CPU has the instructions AES-GCM runs fast with (x86-64: AES-NI and PCLMULQDQ;
    /// AArch64: AES and PMULL); None on other CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aes_instructions: Option<bool>,
}

impl HostInfo {
    /// What a server tells a client that proved no key: what explains a measurement (the CPUs, the
    /// network sysctls that cap windows), not what identifies the host (its name, OS, kernel, CPU
    /// model, memory, command line, interface).
    pub fn for_anonymous(&self) -> HostInfo {
        HostInfo {
            cpus: self.cpus,
            sysctls: self.sysctls.clone(),
            aes_instructions: self.aes_instructions,
            withheld: true,
            ..HostInfo::default()
        }
    }
}

/// The interface a test ran over, as the record document describes an end system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicInfo {
    /// The interface's name.
    pub name: String,
    /// Kernel driver (None for virtual devices without one).
    pub driver: Option<String>,
    /// Link speed in Mbit/s as the driver reports it (None when unknown, e.g. loopback).
    pub speed_mbps: Option<u64>,
    /// Its MTU, bytes.
    pub mtu: Option<u32>,
    /// Its transmit queue length, packets.
    pub tx_queue_len: Option<u32>,
    /// Offloads from `ethtool -k` (empty when ethtool is not installed).
    pub offloads: BTreeMap<String, bool>,
    /// The interface's root queueing discipline (`tc qdisc show`), e.g. "fq" or "noqueue".
    #[serde(default)]
    pub qdisc: Option<String>,
}

/// One end's memory as a test ends, from the kernel's account of the process (/proc/self/status).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// The process's peak resident set since it started (VmHWM), bytes: for a client, the test's own
    /// peak; for a server, the highest over every test it has served so far.
    pub peak_rss_bytes: u64,
    /// Its resident set as the test ended (VmRSS), bytes.
    pub rss_bytes: u64,
}

impl MemoryUse {
    /// The figures of a /proc/PID/status text (its `VmHWM:` and `VmRSS:` lines, in kB), or None
    /// without them.
    pub fn from_status(text: &str) -> Option<MemoryUse> {
        let kib = |key: &str| -> Option<u64> {
            let line = text.lines().find(|l| l.starts_with(key))?;
            line[key.len()..].split_whitespace().next()?.parse::<u64>().ok()
        };
        Some(MemoryUse {
            peak_rss_bytes: kib("VmHWM:")? * 1024,
            rss_bytes: kib("VmRSS:")? * 1024,
        })
    }
}

/// Everything one end reports at the end of a test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointReport {
    /// This end's software and version.
    pub software: String,
    /// Every stream of this end.
    pub streams: Vec<StreamReport>,
    /// Its CPU use over the test.
    pub cpu: CpuTimes,
    /// Every worker thread's CPU time (empty from peers that do not report it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerCpu>,
    /// The host.
    pub host: HostInfo,
    /// The interface's counters over the test, when known.
    pub interface: Option<InterfaceCounters>,
    /// The kernel's protocol counters over the test, host-wide (`netstat::COUNTERS`, as
    /// `Table.Name` → growth); empty from older peers.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub kernel_counters: std::collections::BTreeMap<String, u64>,
    /// Seconds from this end's start to the end of its last stream.
    pub elapsed_s: f64,
    /// Worker threads.
    pub threads: u32,
    /// The CPUs the workers were pinned to.
    pub cpus_pinned: Option<Vec<usize>>,
    /// What this end wants the user to know.
    pub warnings: Vec<String>,
    /// Why this end failed the test, if it did.
    pub error: Option<String>,
    /// Disk-to-disk tests: what this end measured about its file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<crate::files::FileReport>,
    /// Its memory as the test ended (None from peers that do not report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryUse>,
    /// Spans in which this end's receivers got no data at all, on its intervals' clock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<crate::stall::Stall>,
    /// A server's own rate cap on each of this test's streams (`serve --max-rate` shared among
    /// them), bits per second; None without one, from clients, and from older peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_cap_bps: Option<f64>,
}

/// TCP state of one stream at a sample instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSnapshot {
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Retransmitted segments so far.
    pub retransmits: u64,
}

/// One stream's cumulative byte count at a sample instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSample {
    /// The stream's number.
    pub id: u32,
    /// Bytes it had moved by then.
    pub bytes: u64,
    /// Its TCP state then, when the transport has one.
    pub tcp: Option<TcpSnapshot>,
    /// A UDP receiver's datagram counts then (absent from older peers and other transports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounts>,
    /// A TCP receiver's reads so far by size, where they are counted (iperf 2's tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<ReadBins>,
    /// A TCP receiver's one-way burst transits since the sample before (not a running count),
    /// where its sender stamps its bursts (iperf 2's `--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trips: Option<crate::udp::TransitSummary>,
    /// The same transits (TCP bursts, or UDP datagrams with iperf 2's `--trip-times`) in bins since
    /// the sample before, where the receiver bins them (iperf 2's `--histograms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trip_bins: Option<crate::transit_bins::TransitHistogram>,
}

impl StreamSample {
    /// Stream `id` having moved `bytes`, with nothing else read of it.
    pub fn of_bytes(id: u32, bytes: u64) -> StreamSample {
        StreamSample {
            id,
            bytes,
            tcp: None,
            udp: None,
            reads: None,
            trips: None,
            trip_bins: None,
        }
    }
}

/// A TCP receiver's reads by size, as iperf 2's server counts them for its `-e` lines' `Reads=Dist`:
/// eight bins, each an eighth of the read buffer wide, a read of `n` bytes in bin `(n - 1) / width`
/// (a read of the whole buffer in the last). Running counts in a sample; within an interval in an
/// interval's stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadBins {
    /// Each bin's width, bytes (the read buffer's eighth).
    pub width_bytes: u64,
    /// Reads in each bin.
    pub bins: [u64; 8],
}

impl ReadBins {
    /// The bin a read of `n` bytes (at least 1) falls in, for bins `width_bytes` wide.
    pub fn bin(width_bytes: u64, n: u64) -> usize {
        (n.saturating_sub(1) / width_bytes.max(1)).min(7) as usize
    }

    /// Reads counted.
    pub fn reads(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// The reads since `earlier` (an earlier sample's running counts).
    pub fn since(&self, earlier: Option<&ReadBins>) -> ReadBins {
        let mut d = *self;
        if let Some(e) = earlier {
            for (b, e) in d.bins.iter_mut().zip(e.bins) {
                *b = b.saturating_sub(e);
            }
        }
        d
    }

    /// `other`'s reads added (streams summed, or intervals).
    pub fn add(&mut self, other: &ReadBins) {
        self.width_bytes = self.width_bytes.max(other.width_bytes);
        for (b, o) in self.bins.iter_mut().zip(other.bins) {
            *b += o;
        }
    }
}

/// A UDP receiver's running datagram counts: how many the highest sequence number says were sent so
/// far, and how many distinct ones arrived.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpCounts {
    /// The highest sequence number seen, plus one.
    pub expected: u64,
    /// Distinct datagrams received.
    pub received: u64,
    /// The receiver's running jitter then, ms, when it keeps one per sample (iperf 2's `-u -R`
    /// receiver, whose interval lines print it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    /// The one-way transit and pace of the datagrams since the sample before (not a running
    /// count), where the receiver keeps them per sample (iperf 2's receivers, for `-e`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transit: Option<crate::udp::TransitSummary>,
    /// The frames whose last datagram came since the sample before, where the receiver counts
    /// them (an iperf 2 client's `--isochronous` datagrams on landspeed's server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::frames::FramesHeard>,
}

impl UdpCounts {
    /// Datagrams missing so far (some may still arrive, out of order).
    pub fn missing(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }
}

/// A sample of every local stream, closing the interval `start_s..end_s` (seconds since this end's start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// The interval's number, from 0.
    pub index: u32,
    /// Its start.
    pub start_s: f64,
    /// Its end.
    pub end_s: f64,
    /// The interval lies in the warm-up (`-O`) and is left out of the results.
    pub omitted: bool,
    /// Every local stream at the end of the interval.
    pub streams: Vec<StreamSample>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_comes_from_the_status_lines_in_kib() {
        let status = "Name:\tlandspeed\nVmPeak:\t  900000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(
            MemoryUse::from_status(status),
            Some(MemoryUse {
                peak_rss_bytes: 20 << 20,
                rss_bytes: 10 << 20
            })
        );
        assert_eq!(MemoryUse::from_status("Name:\tx\nVmRSS:\t1 kB\n"), None);
    }

    #[test]
    fn each_end_knows_its_role_from_the_flow() {
        assert_eq!(Role::at_client(Flow::ClientToServer), Role::Sender);
        assert_eq!(Role::at_server(Flow::ClientToServer), Role::Receiver);
        assert_eq!(Role::at_client(Flow::ServerToClient), Role::Receiver);
        assert_eq!(Role::at_server(Flow::ServerToClient), Role::Sender);
        assert_eq!(Role::Sender.peer().peer(), Role::Sender);
    }
}
