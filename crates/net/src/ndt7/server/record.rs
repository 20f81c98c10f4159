//! The server's own record of an ndt7 subtest it served, so `serve --archive` keeps ndt7 tests
//! beside every other: a `RunResult` seen from this end (its count, its TCP_INFO at every
//! measurement as the intervals, the client's metadata and every measurement sent), assembled by the
//! same rules as a client's. ndt7 gives a server no count from its client: in a download the
//! client's received bytes are what its TCP acknowledged (at most the payload sent), in an upload
//! its sent bytes are what arrived here, and the result says so. An upload with a landspeed
//! client's key is verified here; a download is checked by its client, which ndt7 does not report.

use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::{Direction, EndCondition, Flow, Test, TestSpec};
use landspeed_core::endpoint::{
    EndpointReport, IntervalSample, Role, StreamReport, StreamSample, TcpSnapshot,
};
use landspeed_core::ndt7::{self, Measurement, Subtest};
use landspeed_core::result::{DataPath, Ndt7Record, RunResult};
use landspeed_engine::tcp_info::{self, RawTcpInfo};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime};

/// The most bytes of a client's measurements a subtest's record keeps: a 10 s subtest's real ones
/// (one every 250 ms, under 2 KiB each) several times over.
pub(super) const MAX_CLIENT_BYTES: usize = 256 * 1024;

/// What a subtest moved, as its record needs it (from `progress::Progress::counts`).
pub(super) struct Counts {
    /// Payload bytes moved.
    pub(super) bytes: u64,
    /// Seconds from the start to the first and the last payload byte.
    pub(super) first_byte_s: Option<f64>,
    pub(super) last_byte_s: Option<f64>,
    /// Why the subtest failed, if it did.
    pub(super) error: Option<String>,
    /// Seconds since the subtest began.
    pub(super) elapsed_s: f64,
    /// An upload checked against a landspeed client's payload: its key, bytes verified, corrupt
    /// blocks.
    pub(super) check: Option<Checked>,
}

/// What the check of a landspeed client's payload found.
pub(super) struct Checked {
    pub(super) key: u64,
    pub(super) verified: u64,
    pub(super) corrupt: u64,
}

/// What the server keeps of a subtest as it runs, for its record.
pub(super) struct Seen {
    record: Ndt7Record,
    /// Bytes of the client's measurements kept so far (at most `MAX_CLIENT_BYTES`).
    client_bytes: usize,
    samples: Vec<IntervalSample>,
    cpu0: landspeed_engine::cpu::CpuSnapshot,
    started_unix_s: f64,
}

/// A subtest as asked: by whom, which, with what metadata, over TLS or not.
pub(super) struct Asked<'a> {
    pub(super) peer: SocketAddr,
    pub(super) subtest: Subtest,
    pub(super) metadata: &'a BTreeMap<String, String>,
    pub(super) tls: bool,
    /// The server's limits on the subtest.
    pub(super) limits: landspeed_core::ndt7::SubtestLimits,
}

impl Seen {
    /// Nothing seen yet of `asked`'s subtest, which starts now.
    pub(super) fn new(asked: &Asked) -> Seen {
        Seen {
            record: Ndt7Record::new(asked.subtest, "server", asked.metadata.clone()),
            client_bytes: 0,
            samples: vec![],
            cpu0: landspeed_engine::cpu::CpuSnapshot::take(),
            started_unix_s: unix_s(std::time::SystemTime::now()),
        }
    }

    /// A measurement sent: kept, and (when time has passed since the last) its count and the
    /// connection's TCP state closing one interval of the result.
    pub(super) fn measured(&mut self, m: &Measurement, tcp: Option<TcpSnapshot>) {
        if let Some(a) = m.app_info {
            let end_s = a.elapsed_time as f64 / 1e6;
            let start_s = self.samples.last().map_or(0.0, |s| s.end_s);
            if end_s > start_s + 0.01 {
                self.samples.push(IntervalSample {
                    index: self.samples.len() as u32,
                    start_s,
                    end_s,
                    omitted: false,
                    streams: vec![StreamSample {
                        id: 0,
                        bytes: a.num_bytes.max(0) as u64,
                        tcp,
                        udp: None,
                        reads: None,
                        trips: None,
                        trip_bins: None,
                    }],
                });
            }
        }
        self.record.keep(m.clone());
    }

    /// A client's text message: kept when it is a measurement, while the client's kept measurements
    /// stay within `MAX_CLIENT_BYTES` (the reader hands over only messages of at most 4 KiB).
    pub(super) fn client_said(&mut self, text: &[u8]) {
        if self.client_bytes + text.len() > MAX_CLIENT_BYTES {
            return;
        }
        if let Ok(m) = serde_json::from_slice::<Measurement>(text) {
            self.client_bytes += text.len();
            self.record.keep_client(m);
        }
    }

    /// How many of the client's measurements are kept (tests).
    #[cfg(test)]
    pub(super) fn client_kept(&self) -> usize {
        self.record.client_measurements.len()
    }

    /// The subtest's result as this server saw it (None only if its test cannot be described, which
    /// a subtest's fixed shape rules out).
    pub(super) fn result(&self, asked: &Asked, p: &Counts, sock: &TcpStream) -> Option<RunResult> {
        let check = p.check.as_ref();
        let upload = asked.subtest == Subtest::Upload;
        let spec = Test::try_from(TestSpec {
            direction: direction(asked.subtest),
            verify: upload && check.is_some(),
            payload_key: check.map_or(0, |c| c.key),
            end: EndCondition::Time(Duration::from_secs_f64(ndt7::TEST_S)),
            interval_s: Duration::from_secs_f64(ndt7::MEASURE_EVERY_S),
            length_bytes: ndt7::MAX_SCALED_MESSAGE_BYTES as u64,
            ..TestSpec::default()
        })
        .ok()?;
        let local = sock.local_addr().unwrap_or(asked.peer);
        let context = RunContext {
            host: local.ip().to_canonical().to_string(),
            port: local.port(),
            local_address: ndt7::endpoint(asked.peer),
            remote_address: ndt7::endpoint(local),
            family: if asked.peer.ip().to_canonical().is_ipv4() {
                "ipv4"
            } else {
                "ipv6"
            }
            .into(),
            threads: 1,
            started_unix_s: self.started_unix_s,
            protocol: "ndt7".into(),
            foreign_peer: check.is_none(),
            served_here: true,
            ..RunContext::default()
        };
        let tcp = landspeed_engine::tcp_info::read(sock).ok();
        let (server, client) = self.reports(asked, p, tcp.as_ref());
        let mut result = assemble(&Inputs {
            spec: &spec,
            context,
            client: &client,
            server: &server,
            client_samples: &[],
            server_samples: &self.samples,
        });
        result.data_path = data_path(asked);
        result.ndt7 = Some(self.record.clone());
        Some(result)
    }

    /// This server's report and the client's as far as the server knows it.
    fn reports(
        &self,
        asked: &Asked,
        p: &Counts,
        tcp: Option<&landspeed_engine::tcp_info::TcpInfo>,
    ) -> (EndpointReport, EndpointReport) {
        let flow = match asked.subtest {
            Subtest::Download => Flow::ServerToClient,
            Subtest::Upload => Flow::ClientToServer,
        };
        let (here, there) = match asked.subtest {
            Subtest::Download => (Role::Sender, Role::Receiver),
            Subtest::Upload => (Role::Receiver, Role::Sender),
        };
        let check = p.check.as_ref();
        let mine = StreamReport {
            bytes: p.bytes,
            first_byte_s: p.first_byte_s,
            last_byte_s: p.last_byte_s,
            tcp: tcp.map(|t| t.stats(&[], None)),
            error: p.error.clone(),
            bytes_verified: check.map_or(0, |c| c.verified),
            corrupt_blocks: check.map_or(0, |c| c.corrupt),
            ..StreamReport::empty(0, flow, here)
        };
        let theirs = StreamReport {
            bytes: peer_count(asked.subtest, p.bytes, tcp),
            first_byte_s: p.first_byte_s,
            last_byte_s: p.last_byte_s,
            ..StreamReport::empty(0, flow, there)
        };
        let server = EndpointReport {
            software: format!("landspeed {} (ndt7)", landspeed_core::SOFTWARE_VERSION),
            streams: vec![mine],
            elapsed_s: p.elapsed_s,
            threads: 1,
            cpu: self.cpu0.until(&landspeed_engine::cpu::CpuSnapshot::take()),
            host: landspeed_engine::host::host_info(),
            warnings: vec![peer_count_note(asked.subtest)],
            ..EndpointReport::default()
        };
        let client = EndpointReport {
            software: client_software(asked.metadata),
            streams: vec![theirs],
            ..EndpointReport::default()
        };
        (server, client)
    }
}

/// The client's count as far as the server knows it: an upload's bytes sent are those that arrived
/// here; a download's received are those its TCP acknowledged, at most the payload sent (the
/// acknowledged bytes include the HTTP answer, frame headers and measurements).
fn peer_count(subtest: Subtest, bytes: u64, tcp: Option<&landspeed_engine::tcp_info::TcpInfo>) -> u64 {
    match subtest {
        Subtest::Upload => bytes,
        Subtest::Download => {
            let acked = tcp.and_then(|t| tcp_message(t, 0).bytes_acked);
            acked.map_or(0, |a| bytes.min(a.max(0) as u64))
        }
    }
}

/// What the result says of the client's count.
fn peer_count_note(subtest: Subtest) -> String {
    match subtest {
        Subtest::Download => "ndt7: the client does not send the server its count; its bytes received are those its TCP acknowledged (this server's TCP_INFO), at most the payload sent".into(),
        Subtest::Upload => "ndt7: the client does not send the server its count; its bytes sent are those that arrived here".into(),
    }
}

/// The client as its metadata names it (`client_name client_version`), else "ndt7 client".
fn client_software(metadata: &BTreeMap<String, String>) -> String {
    let name = metadata
        .get("client_name")
        .map(|n| n.chars().take(40).collect::<String>());
    let version = metadata
        .get("client_version")
        .map(|v| v.chars().take(40).collect::<String>());
    match (name, version) {
        (Some(n), Some(v)) => format!("{n} {v} (ndt7)"),
        (Some(n), None) => format!("{n} (ndt7)"),
        _ => "ndt7 client".into(),
    }
}

/// How this server moved the subtest's bytes.
fn data_path(asked: &Asked) -> DataPath {
    let (tx, rx) = match asked.subtest {
        Subtest::Download => (
            "WebSocket binary frames of 8 KiB growing to 1 MiB, written with writev from the payload generator's buffer",
            "the client's",
        ),
        Subtest::Upload => ("the client's", "WebSocket frames read one by one, counted (and checked with a landspeed client's key)"),
    };
    DataPath {
        tx: tx.into(),
        rx: rx.into(),
        engine: format!(
            "ndt7 {} subtest served over {}: one connection, one thread, blocking reads and writes",
            asked.subtest.name(),
            if asked.tls { "wss:// (TLS 1.3)" } else { "ws://" }
        ),
        zerocopy_sends: 0,
        zerocopy_copied_pct: None,
        tls: None,
    }
}

/// ndt7's download is the server sending (landspeed's reverse direction), its upload the client.
pub(super) fn direction(subtest: Subtest) -> Direction {
    match subtest {
        Subtest::Download => Direction::Reverse,
        Subtest::Upload => Direction::Forward,
    }
}

/// The spec's TCP_INFO fields, each only where this kernel filled it.
pub(super) fn tcp_message(t: &tcp_info::TcpInfo, elapsed_us: i64) -> ndt7::TcpInfoMessage {
    macro_rules! field {
        ($f:ident) => {{
            let end = std::mem::offset_of!(RawTcpInfo, $f) + std::mem::size_of_val(&t.raw.$f);
            (t.len >= end).then(|| t.raw.$f as i64)
        }};
    }
    ndt7::TcpInfoMessage {
        busy_time_us: field!(busy_time),
        bytes_acked: field!(bytes_acked),
        bytes_received: field!(bytes_received),
        bytes_sent: field!(bytes_sent),
        bytes_retrans: field!(bytes_retrans),
        elapsed_time_us: Some(elapsed_us),
        min_rtt_us: field!(min_rtt),
        rtt_us: field!(rtt),
        rtt_var_us: field!(rttvar),
        rwnd_limited_us: field!(rwnd_limited),
        sndbuf_limited_us: field!(sndbuf_limited),
    }
}

/// Seconds since the Unix epoch.
pub(super) fn unix_s(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_downloads_client_count_is_its_acknowledged_bytes_at_most_the_payload() {
        let mut t = landspeed_engine::tcp_info::TcpInfo::from_bytes(&[]);
        t.raw.bytes_acked = 5_000;
        t.len = std::mem::size_of_val(&t.raw);
        assert_eq!(peer_count(Subtest::Download, 4_000, Some(&t)), 4_000);
        assert_eq!(peer_count(Subtest::Download, 9_000, Some(&t)), 5_000);
        assert_eq!(peer_count(Subtest::Download, 9_000, None), 0);
        assert_eq!(peer_count(Subtest::Upload, 9_000, None), 9_000);
    }

    #[test]
    fn the_client_is_named_by_its_metadata() {
        let m = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            client_software(&m(&[("client_name", "ndt7-js"), ("client_version", "0.1")])),
            "ndt7-js 0.1 (ndt7)"
        );
        assert_eq!(client_software(&m(&[("client_name", "x")])), "x (ndt7)");
        assert_eq!(client_software(&m(&[])), "ndt7 client");
        assert_eq!(
            client_software(&m(&[("client_name", &"y".repeat(100))])).len(),
            47
        );
    }

    #[test]
    fn measurements_close_intervals_only_as_time_passes_and_all_are_kept() {
        let asked_meta = BTreeMap::new();
        let asked = Asked {
            peer: "192.0.2.1:4000".parse().unwrap(),
            subtest: Subtest::Download,
            metadata: &asked_meta,
            tls: false,
            limits: Default::default(),
        };
        let mut seen = Seen::new(&asked);
        let m = |us: i64, bytes: i64| Measurement {
            app_info: Some(ndt7::AppInfo {
                elapsed_time: us,
                num_bytes: bytes,
            }),
            ..Measurement::default()
        };
        for (us, b) in [(100, 0), (250_000, 1_000), (255_000, 1_100), (500_000, 3_000)] {
            seen.measured(&m(us, b), None);
        }
        let ends: Vec<(f64, u64)> = seen
            .samples
            .iter()
            .map(|s| (s.end_s, s.streams[0].bytes))
            .collect();
        assert_eq!(ends, vec![(0.25, 1_000), (0.5, 3_000)]);
        assert_eq!(seen.samples[1].start_s, 0.25);
        assert_eq!(seen.record.server_measurements.len(), 4);
    }
}
