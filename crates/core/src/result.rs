//! `RunResult`: the one record of a test that every output is rendered from (text, JSON, JSON Lines, and
//! later CSV, the archive, plots and record documents). Field names carry their units (`_bytes`, `_bps`,
//! `_s`, `_us`); keys are only ever added, and a rename or removal bumps `SCHEMA`. docs/result-schema.md
//! documents every key.

use crate::config::{Flow, TestSpec};
use crate::endpoint::{HostInfo, TcpStats};
use serde::{Deserialize, Serialize};

/// The schema tag of this layout.
pub const SCHEMA: &str = "landspeed/result/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    pub software: String,
    /// Which control protocol ran the test: "landspeed" (or "iperf3" for compatibility runs).
    pub protocol: String,
    pub started_unix_s: f64,
    pub started_utc: String,
    pub config: ResolvedConfig,
    pub summary: Summary,
    /// One entry per data direction (two with `--bidir`).
    pub directions: Vec<DirectionResult>,
    pub streams: Vec<StreamResult>,
    pub intervals: Vec<IntervalResult>,
    /// What was sent and what verification found.
    pub payload: PayloadSummary,
    /// How the bytes moved between landspeed and the kernel.
    pub data_path: DataPath,
    /// The client's end (where `run` was invoked) and the server's.
    pub local: EndpointSummary,
    pub remote: EndpointSummary,
    pub warnings: Vec<String>,
    /// The test was stopped early (Ctrl-C); figures cover what was moved until then.
    pub interrupted: bool,
    /// `run --latency`: echo-probe RTT before and during the transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<crate::path::LatencyReport>,
    /// `run --path`: RTT, route, path MTU and capacity measured just before the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<crate::path::PathReport>,
    /// `run --send-file` / `--recv-file`: the file, its digests on both ends, and disk vs network rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<crate::files::FileTransferResult>,
}

/// The I/O paths used by the senders and receivers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataPath {
    /// "send" or "send+MSG_ZEROCOPY".
    pub tx: String,
    /// "recv (copy)" or "recv+MSG_TRUNC (discard)".
    pub rx: String,
    /// Event loop driving the sockets.
    pub engine: String,
    pub zerocopy_sends: u64,
    /// Share of zerocopy sends the kernel copied after all (always 100% on loopback).
    pub zerocopy_copied_pct: Option<f64>,
}

/// The payload and its verification (docs/payload.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadSummary {
    pub pattern: String,
    pub key_hex: String,
    /// Receivers checked every byte.
    pub verified: bool,
    pub bytes_verified: u64,
    pub corrupt_blocks: u64,
    /// The first wrong byte found (lowest stream, then offset).
    pub first_corruption: Option<crate::payload::Corruption>,
    /// Rule 6 of the Land Speed Record: no two packets of the run carried the same data.
    pub different_data_every_packet: bool,
    pub unique_segment_min_bytes: u32,
    pub smallest_mss_bytes: Option<u32>,
    /// Why `different_data_every_packet` is what it is.
    pub evidence: String,
}

/// The configuration as both ends ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedConfig {
    pub host: String,
    pub port: u16,
    pub local_address: String,
    pub remote_address: String,
    pub family: String,
    #[serde(flatten)]
    pub spec: TestSpec,
    pub threads: u32,
    pub cpus: Option<Vec<usize>>,
    pub bind: Option<String>,
}

/// Totals for a direction (or for the whole test). Warm-up bytes (`-O`) are excluded from every figure
/// but `omitted_bytes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub bytes_verified: u64,
    pub corrupt_blocks: u64,
    pub omitted_bytes: u64,
    /// Receiver's time from first byte (or end of warm-up) to last byte.
    pub duration_s: f64,
    /// bytes_received * 8 / duration_s.
    pub throughput_bps: f64,
    /// bytes_received / 1000 / duration_s (NTttcp's KB/s).
    pub kbytes_per_s: f64,
    pub buffers_sent: f64,
    pub buffers_received: f64,
    pub buffers_per_s: f64,
    pub peak_interval_bps: Option<f64>,
    pub lowest_interval_bps: Option<f64>,
    pub retransmits: u64,
    /// UDP: the streams' datagram figures added up (jitter: the mean of the streams').
    #[serde(default)]
    pub udp: Option<crate::udp::UdpStats>,
    /// Sender's time from its first to its last write, warm-up included.
    pub sender_elapsed_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionResult {
    pub flow: Flow,
    pub summary: Summary,
    pub intervals: Vec<IntervalResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub id: u32,
    pub flow: Flow,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub bytes_verified: u64,
    pub omitted_bytes: u64,
    pub duration_s: f64,
    pub throughput_bps: f64,
    pub kbytes_per_s: f64,
    pub buffers: f64,
    pub buffers_per_s: f64,
    pub sender_elapsed_s: f64,
    /// The sending socket's TCP_INFO (retransmits, RTT, cwnd, ... live there).
    pub tcp: Option<TcpStats>,
    /// The receiving socket's TCP_INFO.
    pub receiver_tcp: Option<TcpStats>,
    /// Shares of the sender's test time that TCP spent limited by the receive window, limited by the
    /// send buffer, and busy sending (tcpi_rwnd_limited, tcpi_sndbuf_limited, tcpi_busy_time).
    pub limited: Option<LimitedShares>,
    pub errors: Vec<String>,
    /// UDP: the receiver's datagram accounting, loss counted against the sender's own count.
    #[serde(default)]
    pub udp: Option<crate::udp::UdpStats>,
    /// UDP: sends the sender's kernel refused (ENOBUFS); those datagrams were skipped.
    #[serde(default)]
    pub send_errors: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LimitedShares {
    pub rwnd_limited_pct: f64,
    pub sndbuf_limited_pct: f64,
    pub busy_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalResult {
    pub index: u32,
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    pub throughput_bps: f64,
    pub omitted: bool,
    pub streams: Vec<IntervalStream>,
    /// `run --latency`: the echo probes answered within this interval (median and largest RTT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_rtt: Option<ProbeRtt>,
}

/// Echo-probe RTT within one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRtt {
    pub probes: u32,
    pub median_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalStream {
    pub id: u32,
    pub bytes: u64,
    pub throughput_bps: f64,
    /// From the sender's TCP_INFO at the end of the interval.
    pub rtt_us: Option<u32>,
    pub cwnd_bytes: Option<u64>,
    pub retransmits: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointSummary {
    pub role: String,
    pub software: String,
    pub cpu: CpuSummary,
    pub host: HostInfo,
    pub window: WindowSummary,
    pub interface: Option<InterfaceSummary>,
    pub threads: u32,
    pub cpus_pinned: Option<Vec<usize>>,
    pub elapsed_s: f64,
}

/// CPU figures, derived as docs/metrics.md explains.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// This process, percent of one CPU (may exceed 100 with several threads).
    pub user_pct: f64,
    pub system_pct: f64,
    /// All CPUs together, percent of the machine's capacity.
    pub system_busy_pct: f64,
    pub softirq_pct: f64,
    /// This process's CPU seconds per 10^9 bytes moved by this end.
    pub cpu_s_per_gb: f64,
    /// Machine-wide busy CPU cycles per byte moved by this end.
    pub cycles_per_byte: Option<f64>,
    pub clock_hz: Option<f64>,
    pub clock_source: Option<String>,
    pub cpus: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowSummary {
    pub requested_bytes: Option<u64>,
    /// The smallest SO_SNDBUF / SO_RCVBUF any data socket of this end got, as the kernel reports it
    /// (Linux doubles the request for its own bookkeeping; see docs/metrics.md).
    pub granted_snd_bytes: u64,
    pub granted_rcv_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceSummary {
    pub name: String,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_packets_per_s: f64,
    pub tx_packets_per_s: f64,
    pub interrupts: u64,
    pub interrupts_per_s: f64,
}

/// `1970-01-01T00:00:00Z`-style UTC time for a Unix timestamp (no time-zone database needed).
pub fn format_utc(unix_s: f64) -> String {
    let secs = unix_s.floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (proleptic Gregorian), after H. Hinnant's public-domain algorithm description.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SSZ` (UTC) into Unix seconds; the inverse of `format_utc`.
pub fn parse_utc(s: &str) -> Option<f64> {
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (d, Some(t.strip_suffix('Z').unwrap_or(t))),
        None => (s, None),
    };
    let mut it = date.splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let d: i64 = it.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days-from-civil, the inverse of format_utc's conversion.
    let yy = if m <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = match time {
        None => 0,
        Some(t) => {
            let mut p = t.splitn(3, ':');
            let h: i64 = p.next()?.parse().ok()?;
            let mi: i64 = p.next()?.parse().ok()?;
            let se: i64 = p.next().unwrap_or("0").parse().ok()?;
            if h > 23 || mi > 59 || se > 60 {
                return None;
            }
            h * 3600 + mi * 60 + se
        }
    };
    Some((days * 86_400 + secs) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_utc_inverts_format_utc() {
        for t in [0.0, 951_782_400.0, 1_700_000_000.0, 4_102_444_800.0] {
            assert_eq!(parse_utc(&format_utc(t)), Some(t));
        }
        assert_eq!(parse_utc("2026-11-22"), Some(1_795_305_600.0));
        assert_eq!(parse_utc("2026-13-01"), None);
        assert_eq!(parse_utc("yesterday"), None);
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_077_408_000.0), "2004-02-22T00:00:00Z");
        assert_eq!(format_utc(1_795_398_223.5), "2026-11-23T01:43:43Z");
        assert_eq!(format_utc(951_782_400.0), "2000-02-29T00:00:00Z");
    }
}
