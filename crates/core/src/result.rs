//! `RunResult`: the one record of a test that every output is rendered from (text, JSON, JSON Lines, and
//! later CSV, the archive, plots and record documents). Field names carry their units (`_bytes`, `_bps`,
//! `_s`, `_us`); keys are only ever added, and a rename or removal bumps `SCHEMA`. docs/result-schema.md
//! documents every key.

use crate::config::{Flow, TestSpec};
use crate::endpoint::{HostInfo, TcpStats};
use serde::{Deserialize, Serialize};

/// The schema tag of this layout.
pub const SCHEMA: &str = "landspeed/result/1";

/// One test's result: the one record every output (text, JSON, HTML, archive) is rendered from (schema `landspeed/result/1`, docs/result-schema.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The layout's tag, `SCHEMA`.
    pub schema: String,
    /// `landspeed X.Y.Z` of the client.
    pub software: String,
    /// Which control protocol ran the test: "landspeed" (or "iperf3" for compatibility runs).
    pub protocol: String,
    /// When the client sent `start` (the data's start), Unix seconds.
    pub started_unix_s: f64,
    /// The same instant, UTC (RFC 3339).
    pub started_utc: String,
    /// The configuration both ends ran.
    pub config: ResolvedConfig,
    /// The whole test's totals (with `--bidir` both directions added up).
    pub summary: Summary,
    /// One entry per data direction (two with `--bidir`).
    pub directions: Vec<DirectionResult>,
    /// Every stream's figures.
    pub streams: Vec<StreamResult>,
    /// The intervals of the whole test (both directions added up).
    pub intervals: Vec<IntervalResult>,
    /// What was sent and what verification found.
    pub payload: PayloadSummary,
    /// How the bytes moved between landspeed and the kernel.
    pub data_path: DataPath,
    /// The client's end (where `run` was invoked) and the server's.
    pub local: EndpointSummary,
    /// The server's end.
    pub remote: EndpointSummary,
    /// What the user should know: window caps, stream errors, mismatches (prefixed `client:`, `server:`, `stream N:`).
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
    /// The landspeed WAN emulator the test crossed, when the client ran in one of its hosts: what it
    /// did to each direction's packets while the test ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<crate::emulator::EmulatorReport>,
    /// Who was authenticated, and what that protects (landspeed-protocol tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// iperf3's `--get-server-output`: what the iperf3 server sent of its own output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iperf3_server_output: Option<Iperf3ServerOutput>,
    /// ndt7 subtests (`run --ndt7`, and a server's record of the ndt7 tests it served): the client's
    /// metadata and the server's measurement messages as the protocol carried them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ndt7: Option<Ndt7Record>,
    /// A request/response test's transactions as its client measured them (`run --rr`, `run --iperf2
    /// --bounceback`): their rate and latency distribution (docs/request-response.md). A server's
    /// record of an iperf 2 bounceback test has none (the latencies are the client's):
    /// `config.bounceback` says what was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<crate::transactions::TransactionsReport>,
    /// Isochronous frames (`--isochronous`, and a server's record of an iperf 2 client's): whole,
    /// lost, skipped and late frames and their latency (docs/isochronous.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::frames::FramesReport>,
    /// A multicast test (`multicast send|receive`): which end this host was and its figures
    /// (docs/multicast.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicast: Option<crate::multicast::record::MulticastRecord>,
}

/// An ndt7 subtest's own record, beside the figures every result has: the metadata the client sent
/// in its query string, and the server's measurement messages in order (the spec's keys and units:
/// its byte count, and its TCP_INFO every 250 ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ndt7Record {
    /// `download` or `upload`.
    pub subtest: String,
    /// Whose view the result is: `client` (`run --ndt7`) or `server` (`serve --ndt7 --archive`).
    pub view: String,
    /// The query string's names and values as the client sent them (`client_name`, ...).
    pub metadata: std::collections::BTreeMap<String, String>,
    /// The server's measurement messages: every one the client received, or every one the server
    /// sent, up to [`crate::ndt7::MAX_KEPT_MEASUREMENTS`].
    pub server_measurements: Vec<crate::ndt7::Measurement>,
    /// Measurement messages past that limit, counted and not kept.
    #[serde(default)]
    pub measurements_not_kept: u64,
    /// The client's measurement messages the server received, in order (a server's record of an
    /// upload; clients may send them), up to the same limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_measurements: Vec<crate::ndt7::Measurement>,
}

impl Ndt7Record {
    /// An empty record of `subtest` seen from `view`, with the client's `metadata`.
    pub fn new(
        subtest: crate::ndt7::Subtest,
        view: &str,
        metadata: std::collections::BTreeMap<String, String>,
    ) -> Ndt7Record {
        Ndt7Record {
            subtest: subtest.name().into(),
            view: view.into(),
            metadata,
            server_measurements: vec![],
            measurements_not_kept: 0,
            client_measurements: vec![],
        }
    }

    /// Keeps one more client measurement, or counts it past the limit.
    pub fn keep_client(&mut self, m: crate::ndt7::Measurement) {
        Self::bounded(&mut self.client_measurements, m, &mut self.measurements_not_kept);
    }

    /// Pushes `m` while `list` holds fewer than the limit; counts it in `not_kept` otherwise.
    fn bounded(list: &mut Vec<crate::ndt7::Measurement>, m: crate::ndt7::Measurement, not_kept: &mut u64) {
        if list.len() < crate::ndt7::MAX_KEPT_MEASUREMENTS {
            list.push(m);
        } else {
            *not_kept += 1;
        }
    }

    /// Keeps one more server measurement, or counts it past the limit.
    pub fn keep(&mut self, m: crate::ndt7::Measurement) {
        Self::bounded(&mut self.server_measurements, m, &mut self.measurements_not_kept);
    }
}

/// An iperf3 server's own output for one test, as it sent it at the end (`--get-server-output`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Iperf3ServerOutput {
    /// Its JSON document (a server started with `-J`).
    Json(serde_json::Value),
    /// Its text, the lines it printed for the test.
    Text(String),
}

/// Who was authenticated in a test, and what that protects (docs/security.md has the threat table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Authentication {
    /// How the client knew the server: `key` (it proved it holds the shared key, and every control
    /// message in both directions carried the conversation's MAC), `pinned_certificate` (`--tls-pin`:
    /// the data connections presented that certificate), or `none`.
    pub server: String,
    /// The key the client proved it holds (`--auth`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Every control message after the greeting carried a MAC.
    pub control_messages_authenticated: bool,
    /// The data connections were encrypted (TLS or QUIC).
    pub data_encrypted: bool,
    /// Each data connection proved with a MAC under the key that it belongs to the test (data
    /// preamble version 2: both ends hold the key and speak it).
    #[serde(default)]
    pub data_streams_proven: bool,
    /// For people: what this protects and what it does not.
    pub note: String,
}

impl Authentication {
    /// What a test had: the key the server proved (`key`), a pinned certificate (`pinned`), encrypted
    /// data connections (`encrypted`), data preambles proven with the key (`streams_proven`).
    pub fn of(key: Option<&str>, pinned: bool, encrypted: bool, streams_proven: bool) -> Authentication {
        let streams = if streams_proven {
            "each data connection proved with a MAC under the key that it is this test's; "
        } else {
            "the data connections were matched by session id and address only; "
        };
        let (server, note) = match (key, pinned, encrypted) {
            (Some(k), _, true) => (
                "key",
                format!(
                    "both ends proved they hold the key '{k}' and every control message carried its MAC; \
                     {streams}the data connections' certificate came in an authenticated message"
                ),
            ),
            (Some(k), _, false) => (
                "key",
                format!(
                    "both ends proved they hold the key '{k}' and every control message carried its MAC; \
                     {streams}the data itself is neither encrypted nor authenticated"
                ),
            ),
            (None, true, _) => (
                "pinned_certificate",
                "the data connections presented the pinned \
                 certificate (--tls-pin); the control conversation was not authenticated"
                    .to_string(),
            ),
            (None, false, true) => (
                "none",
                "the server was not authenticated: the encryption protects \
                 against passive observers only, and an attacker in the path could present its own \
                 certificate (use --auth or --tls-pin)"
                    .to_string(),
            ),
            (None, false, false) => ("none", "nothing was authenticated (no --auth)".to_string()),
        };
        Authentication {
            server: server.into(),
            key: key.map(str::to_string),
            control_messages_authenticated: key.is_some(),
            data_encrypted: encrypted,
            data_streams_proven: key.is_some() && streams_proven,
            note,
        }
    }
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
    /// Zero-copy sends made.
    pub zerocopy_sends: u64,
    /// Share of zerocopy sends the kernel copied after all (always 100% on loopback).
    pub zerocopy_copied_pct: Option<f64>,
    /// TLS (`--tls`): how the data was encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsPath>,
}

/// How a `--tls` test's data was encrypted (docs/metrics.md, "TLS").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlsPath {
    /// The suite every stream's handshake agreed on (IANA name), or the suites, comma-separated.
    pub suite: String,
    /// Where records were sealed and opened: "landspeed in user space (aws-lc-rs AEAD, keys from
    /// rustls' handshake)", or "the kernel (kTLS, ...)" with `--ktls`.
    pub record_layer: String,
    /// Records the senders sealed, warm-up included.
    pub records: u64,
    /// Plaintext bytes per record on average (at most 16384).
    pub mean_record_bytes: f64,
    /// Bytes each record adds on the wire (TLS 1.3: 5 of header, 1 of content type, 16 of tag).
    pub record_overhead_bytes: u32,
}

/// The payload and its verification (docs/payload.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadSummary {
    /// The payload layout's name.
    pub pattern: String,
    /// The run's payload key, hex.
    pub key_hex: String,
    /// Receivers checked every byte.
    pub verified: bool,
    /// Why nothing was verified (`--no-verify`, or a server that is not landspeed); absent when
    /// every byte was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverified_because: Option<String>,
    /// Bytes checked against the pattern after the warm-up.
    pub bytes_verified: u64,
    /// 256-byte blocks with at least one wrong byte.
    pub corrupt_blocks: u64,
    /// The first wrong byte found (lowest stream, then offset).
    pub first_corruption: Option<crate::payload::Corruption>,
    /// Rule 6 of the Land Speed Record: no two packets of the run carried the same data.
    pub different_data_every_packet: bool,
    /// The shortest run of bytes that is provably distinct in the pattern (263).
    pub unique_segment_min_bytes: u32,
    /// The smallest MSS any stream used, when TCP said.
    pub smallest_mss_bytes: Option<u32>,
    /// Why `different_data_every_packet` is what it is.
    pub evidence: String,
}

/// The configuration as both ends ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedConfig {
    /// The server, as the client named it.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// The client's address on the control connection.
    pub local_address: String,
    /// The server's address.
    pub remote_address: String,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// The test specification both ends ran (flattened into the config object).
    #[serde(flatten)]
    pub spec: TestSpec,
    /// The client's worker threads.
    pub threads: u32,
    /// The CPUs the client's workers were pinned to.
    pub cpus: Option<Vec<usize>>,
    /// The local address the client bound to, if any.
    pub bind: Option<String>,
    /// When the client scheduled the data to start (iperf 2's `--txstart-time`), Unix seconds: the
    /// test's clock starts there, not when it connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_start_unix_s: Option<f64>,
    /// The client asked for no report at the end (iperf 2's `--no-udp-fin`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_end_report: bool,
    /// An iperf 2 bounceback test: what its client's request header asked of the server (the
    /// request's size, the hold before each answer, quick acks). Absent for every other test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounceback: Option<crate::transactions::BounceAsked>,
}

/// Totals for a direction (or for the whole test). Warm-up bytes (`-O`) are excluded from every figure
/// but `omitted_bytes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Bytes the senders wrote after the warm-up.
    pub bytes_sent: u64,
    /// Bytes the receivers read after the warm-up.
    pub bytes_received: u64,
    /// Bytes checked against the payload after the warm-up.
    pub bytes_verified: u64,
    /// 256-byte blocks with a wrong byte.
    pub corrupt_blocks: u64,
    /// Warm-up bytes left out.
    pub omitted_bytes: u64,
    /// Receiver's time from first byte (or end of warm-up) to last byte.
    pub duration_s: f64,
    /// bytes_received * 8 / duration_s.
    pub throughput_bps: f64,
    /// bytes_received / 1000 / duration_s (NTttcp's KB/s).
    pub kbytes_per_s: f64,
    /// bytes_sent ÷ length_bytes.
    pub buffers_sent: f64,
    /// bytes_received ÷ length_bytes.
    pub buffers_received: f64,
    /// buffers_received per second of duration_s.
    pub buffers_per_s: f64,
    /// The fastest full-length measured interval, bit/s.
    pub peak_interval_bps: Option<f64>,
    /// The slowest full-length measured interval, bit/s.
    pub lowest_interval_bps: Option<f64>,
    /// The senders' retransmitted segments (tcpi_total_retrans), added up.
    pub retransmits: u64,
    /// UDP: the streams' datagram figures added up (jitter: the mean of the streams').
    #[serde(default)]
    pub udp: Option<crate::udp::UdpStats>,
    /// Sender's time from its first to its last write, warm-up included.
    pub sender_elapsed_s: f64,
    /// TCP: the one-way transit of the senders' stamped bursts over the test (iperf 2's
    /// `--trip-times`: each burst's last byte's arrival less the send time its header carries, so
    /// the two hosts' clock offset is in it), all streams' merged; none where no burst was stamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trips: Option<crate::udp::TransitSummary>,
}

/// One data direction of the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionResult {
    /// Which way the data went.
    pub flow: Flow,
    /// Its totals.
    pub summary: Summary,
    /// Its intervals, as its receiving end sampled them.
    pub intervals: Vec<IntervalResult>,
    /// Spans in which its receiving end got no data at all, on the intervals' clock (docs/metrics.md,
    /// "Stalls").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<crate::stall::Stall>,
    /// What held its rate back (`core::limit`, docs/diagnosis.md), most certain first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<crate::limit::Limit>,
}

/// One stream's figures, from both of its ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// The stream's number.
    pub id: u32,
    /// Which way its data went.
    pub flow: Flow,
    /// Bytes its sender wrote after the warm-up.
    pub bytes_sent: u64,
    /// Bytes its receiver read after the warm-up.
    pub bytes_received: u64,
    /// Bytes checked against the payload after the warm-up.
    pub bytes_verified: u64,
    /// Warm-up bytes left out.
    pub omitted_bytes: u64,
    /// The receiver's time from its first (or post-warm-up) to its last byte.
    pub duration_s: f64,
    /// bytes_received × 8 ÷ duration_s.
    pub throughput_bps: f64,
    /// bytes_received ÷ 1000 ÷ duration_s.
    pub kbytes_per_s: f64,
    /// bytes_received ÷ length_bytes.
    pub buffers: f64,
    /// buffers per second of duration_s.
    pub buffers_per_s: f64,
    /// The sender's time from its first to its last write.
    pub sender_elapsed_s: f64,
    /// The sending socket's TCP_INFO (retransmits, RTT, cwnd, ... live there).
    pub tcp: Option<TcpStats>,
    /// The receiving socket's TCP_INFO.
    pub receiver_tcp: Option<TcpStats>,
    /// Shares of the sender's test time that TCP spent limited by the receive window, limited by the
    /// send buffer, and busy sending (tcpi_rwnd_limited, tcpi_sndbuf_limited, tcpi_busy_time).
    pub limited: Option<LimitedShares>,
    /// Why the stream failed, from either end.
    pub errors: Vec<String>,
    /// UDP: the receiver's datagram accounting, loss counted against the sender's own count.
    #[serde(default)]
    pub udp: Option<crate::udp::UdpStats>,
    /// UDP: sends the sender's kernel refused (ENOBUFS); those datagrams were skipped.
    #[serde(default)]
    pub send_errors: u64,
    /// TLS (`--tls`): the suite the stream's handshake agreed on and the records its sender sealed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::endpoint::StreamTls>,
    /// QUIC: the figures of the stream's connection, from its sender's end (else its receiver's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::endpoint::QuicStats>,
    /// The client's port of the stream's own connection (TCP and UDP; not QUIC, whose streams share
    /// a connection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_port: Option<u16>,
    /// How the stream's connection was made, as this end saw it when the test began (TCP_INFO's
    /// first figures, the socket's descriptor, the interface): what iperf 2's "connected with"
    /// line tells. Kept by the server of iperf 2's protocol; None elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<crate::endpoint::ConnectFacts>,
}

impl StreamResult {
    /// The stream's MPTCP figures, from its sender's socket or else its receiver's; None when the
    /// connection is plain TCP (not asked for, or fallen back).
    pub fn mptcp(&self) -> Option<&crate::endpoint::MptcpStats> {
        fn of(t: &Option<TcpStats>) -> Option<&crate::endpoint::MptcpStats> {
            t.as_ref()?.mptcp.as_ref()
        }
        of(&self.tcp).or_else(|| of(&self.receiver_tcp))
    }
}

/// Shares of the sender's test time TCP spent limited or busy (from TCP_INFO).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LimitedShares {
    /// Limited by the receiver's window (tcpi_rwnd_limited), percent.
    pub rwnd_limited_pct: f64,
    /// Limited by the send buffer (tcpi_sndbuf_limited), percent.
    pub sndbuf_limited_pct: f64,
    /// With data in flight (tcpi_busy_time), percent.
    pub busy_pct: f64,
}

/// One interval of the test, as its receiving end sampled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalResult {
    /// The interval's number, from 0.
    pub index: u32,
    /// Its start, seconds since the receiving end's start.
    pub start_s: f64,
    /// Its end, seconds since the receiving end's start.
    pub end_s: f64,
    /// Bytes received within it.
    pub bytes: u64,
    /// bytes × 8 ÷ its length.
    pub throughput_bps: f64,
    /// It lies in the warm-up, left out of the totals.
    pub omitted: bool,
    /// Each stream's share.
    pub streams: Vec<IntervalStream>,
    /// `run --latency`: the echo probes answered within this interval (median and largest RTT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_rtt: Option<ProbeRtt>,
}

impl IntervalResult {
    /// The tail after the last interval boundary, shorter than a tenth of the nominal interval
    /// (`nominal_s`, the run's `-i`): its bytes over so short a time would read as a rate the path never
    /// had, so reports show its length instead and plots leave it out (docs/metrics.md).
    pub fn is_tail(&self, nominal_s: f64) -> bool {
        nominal_s > 0.0 && self.end_s - self.start_s < 0.1 * nominal_s
    }
}

/// Echo-probe RTT within one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRtt {
    /// Probes answered within the interval.
    pub probes: u32,
    /// Their median RTT, ms.
    pub median_ms: f64,
    /// Their largest RTT, ms.
    pub max_ms: f64,
}

/// One stream within one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalStream {
    /// The stream's number.
    pub id: u32,
    /// Bytes received within the interval.
    pub bytes: u64,
    /// bytes × 8 ÷ the interval's length.
    pub throughput_bps: f64,
    /// From the sender's TCP_INFO at the end of the interval.
    pub rtt_us: Option<u32>,
    /// The sender's congestion window at the end of the interval, bytes.
    pub cwnd_bytes: Option<u64>,
    /// The sender's retransmitted segments so far.
    pub retransmits: Option<u64>,
    /// UDP: datagrams sent within the interval, as the receiver's sequence numbers tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams_sent: Option<u64>,
    /// UDP: datagrams found missing within the interval, less those that arrived late within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams_lost: Option<u64>,
    /// Isochronous frames (`--isochronous`): what the sender began, skipped and slipped within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::frames::FramesInterval>,
    /// A receiver's frames within it, where it counts them per interval (an iperf 2 client's
    /// `--isochronous` datagrams on landspeed's server: `Frame:rx/lost  latency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_heard: Option<crate::frames::FramesHeard>,
    /// The receiver's running jitter at the interval's end, ms, where it keeps one per sample
    /// (iperf 2's `-u -R` receiver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    /// The datagrams' one-way transit and pace within the interval, where the receiver keeps them
    /// (iperf 2's UDP receivers: its `-e` lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transit: Option<crate::udp::TransitSummary>,
    /// A TCP receiver's reads within the interval by size, where they are counted (iperf 2's tests:
    /// its `-e` lines' `Reads=Dist`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<crate::endpoint::ReadBins>,
    /// Its one-way transits in bins, where the receiver binned them (iperf 2's `--histograms`:
    /// TCP bursts and UDP datagrams timed with `--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transit_bins: Option<crate::transit_bins::TransitHistogram>,
}

/// One end of the test as the result shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointSummary {
    /// `client` or `server`.
    pub role: String,
    /// Its software and version.
    pub software: String,
    /// Its CPU use.
    pub cpu: CpuSummary,
    /// The host: OS, kernel, CPU, memory, sysctls, NIC, command line.
    pub host: HostInfo,
    /// The socket buffers asked for and granted.
    pub window: WindowSummary,
    /// The interface's counters over the test, when known.
    pub interface: Option<InterfaceSummary>,
    /// The kernel's protocol counters over the test, host-wide (docs/metrics.md); empty from older peers.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub kernel_counters: std::collections::BTreeMap<String, u64>,
    /// The interface's bytes against this end's application bytes (None without interface counters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<WireSummary>,
    /// Retransmitted segments this end's own TCP senders counted (TCP_INFO), to set beside the
    /// kernel's host-wide `Tcp.RetransSegs`; None when this end sent no TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info_retransmits: Option<u64>,
    /// Its worker threads.
    pub threads: u32,
    /// The CPUs its workers were pinned to.
    pub cpus_pinned: Option<Vec<usize>>,
    /// From the start signal to its last stream's end, seconds.
    pub elapsed_s: f64,
    /// Its memory as the test ended (peak and current resident set), when the end reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::endpoint::MemoryUse>,
}

/// CPU figures, derived as docs/metrics.md explains.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// This process, percent of one CPU (may exceed 100 with several threads).
    pub user_pct: f64,
    /// This process's system time, percent of one CPU.
    pub system_pct: f64,
    /// All CPUs together, percent of the machine's capacity.
    pub system_busy_pct: f64,
    /// All CPUs' softirq time, percent of the machine's capacity.
    pub softirq_pct: f64,
    /// This process's CPU seconds per 10^9 bytes moved by this end.
    pub cpu_s_per_gb: f64,
    /// Machine-wide busy CPU cycles per byte moved by this end.
    pub cycles_per_byte: Option<f64>,
    /// The CPU clock, Hz, when known.
    pub clock_hz: Option<f64>,
    /// Where the clock figure came from (cpufreq, /proc/cpuinfo, ...).
    pub clock_source: Option<String>,
    /// CPUs online.
    pub cpus: u32,
}

/// The socket buffers of one end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowSummary {
    /// The buffer asked for per stream (`-w`), if any.
    pub requested_bytes: Option<u64>,
    /// The smallest SO_SNDBUF / SO_RCVBUF any data socket of this end got, as the kernel reports it
    /// (Linux doubles the request for its own bookkeeping; see docs/metrics.md).
    pub granted_snd_bytes: u64,
    /// The smallest SO_RCVBUF granted.
    pub granted_rcv_bytes: u64,
}

/// An interface's counters over the test (/proc/net/dev), and the host's interrupts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceSummary {
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
    /// Packets received per second.
    pub rx_packets_per_s: f64,
    /// Packets sent per second.
    pub tx_packets_per_s: f64,
    /// Interrupts on the host over the test.
    pub interrupts: u64,
    /// Interrupts per second.
    pub interrupts_per_s: f64,
}

/// What went over one end's interface against what its application moved (docs/metrics.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireSummary {
    /// Payload bytes this end's senders wrote and its receivers read.
    pub app_bytes_out: u64,
    /// Payload bytes this end's receivers read.
    pub app_bytes_in: u64,
    /// Bytes the interface sent and received over the test.
    pub wire_bytes_out: u64,
    /// Bytes the interface received.
    pub wire_bytes_in: u64,
    /// Bytes on the interface beyond the data this end sent, per packet sent (headers, retransmissions,
    /// ACKs), when it sent data.
    pub overhead_bytes_per_packet: Option<f64>,
    /// RFC 6349's TCP efficiency from the kernel's counters: (segments sent − retransmitted) ÷ sent, %.
    pub tcp_efficiency_pct: Option<f64>,
    /// Why the interface's counts are not this test's alone, if they are not: "loopback" (both ends
    /// count on it) or "other traffic" (more bytes than any header stack explains).
    pub shared: Option<String>,
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
