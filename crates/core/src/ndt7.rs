//! ndt7, M-Lab's Network Diagnostic Tool version 7 (spec/ndt7-protocol.md in m-lab/ndt-server, v0.11),
//! as far as it does not touch a socket or a clock: the URL paths and subprotocol, the query string a
//! client may add (its metadata), the binary message sizes a sender grows through, the measurement
//! messages (JSON, the spec's key names and units), and a subtest's timetable (measure every 250 ms,
//! end at 10 s, give up at 13 s) with time passed in. `landspeed serve --ndt7` drives it over
//! WebSocket; keeping it here lets every rule be tested without a network.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The WebSocket subprotocol both ends name.
pub const SUBPROTOCOL: &str = "net.measurementlab.ndt.v7";
/// A subtest ends this long after the WebSocket handshake.
pub const TEST_S: f64 = 10.0;
/// A subtest still running this long after the handshake is cut off.
pub const HARD_LIMIT_S: f64 = 13.0;
/// Measurement messages are sent this often (the spec allows at most ten a second on average).
pub const MEASURE_EVERY_S: f64 = 0.25;
/// The longest query string a client may send.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Binary messages are at least this long...
pub const MIN_MESSAGE_BYTES: usize = 1 << 10;
/// ...and at most this long; a receiver must accept messages this long.
pub const MAX_MESSAGE_BYTES: usize = 1 << 24;
/// A sender's first binary messages.
pub const FIRST_MESSAGE_BYTES: usize = 1 << 13;
/// The largest message a sender grows its messages to. The spec lets a receiver refuse nothing up to
/// `MAX_MESSAGE_BYTES`, but M-Lab's own Go client reads at most 1 MiB a message (and closes on a
/// larger one), and M-Lab's server grows to 1 MiB too ("a good compromise between Go and
/// JavaScript"): so does landspeed's.
pub const MAX_SCALED_MESSAGE_BYTES: usize = 1 << 20;
/// The most measurement messages a result keeps: a spec-abiding server sends 53 at most in a subtest
/// (every 250 ms to the 13 s cut-off); one that sends more is counted past this, not kept.
pub const MAX_KEPT_MEASUREMENTS: usize = 256;

/// landspeed's extension, a query-string name the spec lets a client add: a landspeed client names its
/// payload key, a landspeed server then sends (download) or expects (upload) landspeed's payload with
/// that key, and says so in its measurements (`Measurement::landspeed`). Other servers keep it as
/// metadata; other clients never send it, and nothing changes for them.
pub const PAYLOAD_KEY_PARAM: &str = "landspeed_payload_key";

/// The payload key a client named in its query string, if it named one (a decimal u64).
pub fn payload_key(metadata: &BTreeMap<String, String>) -> Option<u64> {
    metadata.get(PAYLOAD_KEY_PARAM)?.parse().ok()
}

/// A landspeed server's answer to a client that named its payload key, in every measurement: the key
/// (a string: JavaScript numbers stop being exact at 2^53), and for an upload what the server checked
/// of what it received so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct LandspeedCheck {
    /// The key the server sends or checks with.
    pub payload_key: String,
    /// Upload: bytes checked against the payload so far (0 for a download: the client checks).
    pub bytes_verified: u64,
    /// Upload: 256-byte blocks with a wrong byte so far.
    pub corrupt_blocks: u64,
}

/// The two subtests, each on its own connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subtest {
    /// The server sends, the client receives.
    Download,
    /// The client sends, the server receives.
    Upload,
}

impl Subtest {
    /// The subtest a request path names (the query string already split off), if any.
    pub fn from_path(path: &str) -> Option<Subtest> {
        match path {
            "/ndt/v7/download" => Some(Subtest::Download),
            "/ndt/v7/upload" => Some(Subtest::Upload),
            _ => None,
        }
    }

    /// The name the measurement messages use ("download", "upload").
    pub fn name(self) -> &'static str {
        match self {
            Subtest::Download => "download",
            Subtest::Upload => "upload",
        }
    }
}

/// Why a request's query string was refused (the server answers 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Longer than the spec allows.
    #[error("the query string is {0} bytes; ndt7 allows at most 4096")]
    TooLong(usize),
    /// A name or value that is not URL-encoded UTF-8.
    #[error("the query string is not URL-encoded UTF-8 near {0:?}")]
    NotUtf8(String),
}

/// The client's metadata from its query string: names to values, the first of a duplicated name kept
/// (the spec says servers should ignore duplicates), a name without a value given an empty one.
pub fn parse_query(query: &str) -> Result<BTreeMap<String, String>, QueryError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(QueryError::TooLong(query.len()));
    }
    let mut out = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (decode(name)?, decode(value)?);
        out.entry(name).or_insert(value);
    }
    Ok(out)
}

/// One URL-encoded piece: `+` is a space, `%XX` a byte, and the bytes must be UTF-8.
fn decode(piece: &str) -> Result<String, QueryError> {
    let bad = || QueryError::NotUtf8(piece.chars().take(40).collect());
    let b = piece.as_bytes();
    let mut bytes = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = piece.get(i + 1..i + 3).ok_or_else(bad)?;
                bytes.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 2;
            }
            c => bytes.push(c),
        }
        i += 1;
    }
    String::from_utf8(bytes).map_err(|_| bad())
}

/// The sizes of a sender's binary messages: 8 KiB at first, doubled whenever a message is smaller than
/// a sixteenth of what has been queued so far, never above 16 MiB (the spec's appendix). Only fast
/// receivers see large messages.
#[derive(Debug, Clone)]
pub struct MessageSizer {
    size: usize,
    total: u64,
    max: usize,
}

impl MessageSizer {
    /// Sizes from 8 KiB up to `max` bytes (clamped to the spec's 1 KiB..16 MiB).
    pub fn new(max: usize) -> MessageSizer {
        MessageSizer {
            size: FIRST_MESSAGE_BYTES,
            total: 0,
            max: max.clamp(MIN_MESSAGE_BYTES, MAX_MESSAGE_BYTES),
        }
    }

    /// The size of the next message to send.
    pub fn size(&self) -> usize {
        self.size.min(self.max)
    }

    /// Records a message of `size()` bytes as queued, and grows the next one if it is due.
    pub fn sent(&mut self) {
        let n = self.size();
        self.total += n as u64;
        if n < self.max && (n as u64) < self.total / 16 {
            self.size = (n * 2).min(self.max);
        }
    }

    /// Bytes queued so far.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// What a subtest should do at a moment of its run (`Timetable::at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Keep going; nothing to report yet.
    Nothing,
    /// Send a measurement message now.
    Measure,
    /// The test time is over: send a last measurement and close the WebSocket.
    End,
    /// Past the hard limit: drop the connection.
    CutOff,
}

/// A server's limits on one subtest (`serve --max-duration`, `--max-bytes`, `--max-rate`): the
/// spec's ten seconds shortened, the bytes capped, the data paced. Pure: time comes from the caller.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SubtestLimits {
    /// The subtest's length, seconds (at most the spec's ten).
    pub test_s: Option<f64>,
    /// The most payload bytes it may move.
    pub max_bytes: Option<u64>,
    /// The fastest it may move them, bits per second.
    pub rate_bps: Option<f64>,
}

impl SubtestLimits {
    /// How long the subtest runs.
    pub fn test_s(&self) -> f64 {
        self.test_s.map_or(TEST_S, |t| t.min(TEST_S))
    }

    /// Whether `bytes` moved reach the byte limit (the subtest then ends as if its time were up).
    pub fn bytes_reached(&self, bytes: u64) -> bool {
        self.max_bytes.is_some_and(|m| bytes >= m)
    }

    /// How long to wait before moving more, `bytes` having moved in `elapsed_s`: None when the
    /// data is within its rate.
    pub fn wait_s(&self, bytes: u64, elapsed_s: f64) -> Option<f64> {
        let rate = self.rate_bps.filter(|r| *r > 0.0)?;
        let due_s = bytes as f64 * 8.0 / rate;
        (due_s > elapsed_s).then_some(due_s - elapsed_s)
    }
}

/// A subtest's timetable from the WebSocket handshake: measurements every 250 ms, the end at 10 s,
/// the hard limit at 13 s. Time is given in seconds since the handshake.
#[derive(Debug, Clone)]
pub struct Timetable {
    next_measure_s: f64,
    test_s: f64,
    ended: bool,
}

impl Timetable {
    /// A subtest of `test_s` seconds (at most the spec's ten).
    pub fn new(test_s: f64) -> Timetable {
        Timetable {
            next_measure_s: MEASURE_EVERY_S,
            test_s: test_s.clamp(0.0, TEST_S),
            ended: false,
        }
    }

    /// What is due at `now_s` seconds after the handshake.
    pub fn at(&mut self, now_s: f64) -> Due {
        if now_s >= HARD_LIMIT_S.min(self.test_s + (HARD_LIMIT_S - TEST_S)) {
            return Due::CutOff;
        }
        if now_s >= self.test_s {
            if self.ended {
                return Due::Nothing;
            }
            self.ended = true;
            return Due::End;
        }
        if now_s >= self.next_measure_s {
            while self.next_measure_s <= now_s {
                self.next_measure_s += MEASURE_EVERY_S;
            }
            return Due::Measure;
        }
        Due::Nothing
    }

    /// Seconds from `now_s` until something is due (for a blocking read or write's timeout).
    pub fn wait_s(&self, now_s: f64) -> f64 {
        let next = if self.ended {
            self.test_s + (HARD_LIMIT_S - TEST_S)
        } else {
            self.next_measure_s.min(self.test_s)
        };
        (next - now_s).max(0.0)
    }

    /// Whether the test time is over (the close has been started).
    pub fn ended(&self) -> bool {
        self.ended
    }
}

/// One measurement message, as the spec names its keys (text WebSocket messages, JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Measurement {
    /// Application-level bytes and time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_info: Option<AppInfo>,
    /// The connection's two ends, as the server sees them (servers always send it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_info: Option<ConnectionInfo>,
    /// "server" or "client".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// "download" or "upload".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The kernel's view of the connection, where it has one.
    #[serde(rename = "TCPInfo", skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpInfoMessage>,
    /// landspeed's extension: only to a client that named its payload key ([`PAYLOAD_KEY_PARAM`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landspeed: Option<LandspeedCheck>,
}

impl Measurement {
    /// The server's count of the subtest's payload so far: its `AppInfo` where it sends one
    /// (landspeed does), else its TCP_INFO as M-Lab's ndt-server reports it (bytes the client
    /// acknowledged in a download, bytes received in an upload; those include the WebSocket framing
    /// and, in a download, the measurement messages).
    pub fn server_count(&self, subtest: Subtest) -> Option<ServerCount> {
        if let Some(a) = self.app_info {
            return Some(ServerCount {
                bytes: a.num_bytes.max(0) as u64,
                elapsed_s: a.elapsed_time as f64 / 1e6,
                source: CountSource::AppInfo,
            });
        }
        let t = self.tcp_info.as_ref()?;
        let bytes = match subtest {
            Subtest::Download => t.bytes_acked,
            Subtest::Upload => t.bytes_received,
        }?;
        Some(ServerCount {
            bytes: bytes.max(0) as u64,
            elapsed_s: t.elapsed_time_us? as f64 / 1e6,
            source: CountSource::TcpInfo,
        })
    }
}

/// A server's count of a subtest's payload, from one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerCount {
    /// Bytes so far.
    pub bytes: u64,
    /// Seconds since the subtest began, when counted.
    pub elapsed_s: f64,
    /// Which part of the measurement said it.
    pub source: CountSource,
}

/// Where a server's count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountSource {
    /// `AppInfo.NumBytes`: binary message payload only.
    AppInfo,
    /// `TCPInfo.BytesAcked` (download) or `BytesReceived` (upload): the TCP stream, framing included.
    TcpInfo,
}

/// Application-level progress: microseconds since the handshake, payload bytes since then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AppInfo {
    /// Microseconds since the subtest began.
    pub elapsed_time: i64,
    /// Binary message bytes sent or received since then (no WebSocket, TLS or TCP overhead).
    pub num_bytes: i64,
}

/// The connection's four-tuple as the server sees it (`address:port`, IPv6 in brackets).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ConnectionInfo {
    /// The client's end.
    pub client: String,
    /// The server's end.
    pub server: String,
    /// A unique id of the test on its platform.
    #[serde(rename = "UUID", skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// When the subtest started (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
}

/// The TCP_INFO fields the spec names, with its key names; all in bytes or microseconds. A field the
/// kernel does not report is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfoMessage {
    /// Microseconds with data in the send queue.
    #[serde(rename = "BusyTime", skip_serializing_if = "Option::is_none")]
    pub busy_time_us: Option<i64>,
    /// Bytes acknowledged by the peer.
    #[serde(rename = "BytesAcked", skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<i64>,
    /// Bytes received and acknowledged.
    #[serde(rename = "BytesReceived", skip_serializing_if = "Option::is_none")]
    pub bytes_received: Option<i64>,
    /// Bytes transmitted, retransmissions included.
    #[serde(rename = "BytesSent", skip_serializing_if = "Option::is_none")]
    pub bytes_sent: Option<i64>,
    /// Bytes retransmitted.
    #[serde(rename = "BytesRetrans", skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<i64>,
    /// Microseconds since the subtest began, when this was read.
    #[serde(rename = "ElapsedTime", skip_serializing_if = "Option::is_none")]
    pub elapsed_time_us: Option<i64>,
    /// The smallest RTT the kernel saw, microseconds.
    #[serde(rename = "MinRTT", skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<i64>,
    /// The smoothed RTT, microseconds.
    #[serde(rename = "RTT", skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<i64>,
    /// The RTT's variation, microseconds.
    #[serde(rename = "RTTVar", skip_serializing_if = "Option::is_none")]
    pub rtt_var_us: Option<i64>,
    /// Microseconds stalled on the receiver's window.
    #[serde(rename = "RWndLimited", skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<i64>,
    /// Microseconds stalled on the send buffer.
    #[serde(rename = "SndBufLimited", skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<i64>,
}

/// `address:port` as the spec writes an endpoint: IPv6 in brackets, IPv4-mapped IPv6 as IPv4.
pub fn endpoint(addr: std::net::SocketAddr) -> String {
    std::net::SocketAddr::new(addr.ip().to_canonical(), addr.port()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_limits_shorten_cap_and_pace_a_subtest() {
        let none = SubtestLimits::default();
        assert_eq!(none.test_s(), TEST_S);
        assert!(!none.bytes_reached(u64::MAX));
        assert_eq!(none.wait_s(u64::MAX, 0.0), None);
        let l = SubtestLimits {
            test_s: Some(4.0),
            max_bytes: Some(1_000_000),
            rate_bps: Some(8e6),
        };
        assert_eq!(l.test_s(), 4.0);
        assert_eq!(
            SubtestLimits {
                test_s: Some(60.0),
                ..l
            }
            .test_s(),
            TEST_S
        );
        assert!(!l.bytes_reached(999_999) && l.bytes_reached(1_000_000));
        // 8 Mbit/s is 1 MB/s: 500 kB is due at 0.5 s.
        assert_eq!(l.wait_s(500_000, 0.5), None);
        let w = l.wait_s(500_000, 0.2).unwrap();
        assert!((w - 0.3).abs() < 1e-9, "{w}");
        // The timetable of a shortened subtest ends, and cuts off, that much earlier.
        let mut t = Timetable::new(l.test_s());
        assert_eq!(t.at(4.0), Due::End);
        assert_eq!(t.at(7.0), Due::CutOff);
    }

    #[test]
    fn a_servers_count_is_its_app_info_else_its_tcp_info_by_direction() {
        let tcp = TcpInfoMessage {
            bytes_acked: Some(900),
            bytes_received: Some(700),
            elapsed_time_us: Some(2_500_000),
            ..TcpInfoMessage::default()
        };
        let ndt_server = Measurement {
            tcp_info: Some(tcp.clone()),
            ..Measurement::default()
        };
        let down = ndt_server.server_count(Subtest::Download).unwrap();
        assert_eq!((down.bytes, down.source), (900, CountSource::TcpInfo));
        assert!((down.elapsed_s - 2.5).abs() < 1e-9);
        assert_eq!(ndt_server.server_count(Subtest::Upload).unwrap().bytes, 700);
        let landspeed = Measurement {
            app_info: Some(AppInfo {
                elapsed_time: 1_000_000,
                num_bytes: 600,
            }),
            tcp_info: Some(tcp),
            ..Measurement::default()
        };
        let c = landspeed.server_count(Subtest::Upload).unwrap();
        assert_eq!((c.bytes, c.source), (600, CountSource::AppInfo));
        assert_eq!(Measurement::default().server_count(Subtest::Download), None);
        let no_time = Measurement {
            tcp_info: Some(TcpInfoMessage {
                bytes_acked: Some(1),
                ..TcpInfoMessage::default()
            }),
            ..Measurement::default()
        };
        assert_eq!(no_time.server_count(Subtest::Download), None);
    }

    #[test]
    fn paths_name_the_subtests_and_nothing_else() {
        assert_eq!(Subtest::from_path("/ndt/v7/download"), Some(Subtest::Download));
        assert_eq!(Subtest::from_path("/ndt/v7/upload"), Some(Subtest::Upload));
        for p in ["/", "/ndt/v7/", "/ndt/v7/download/", "/ndt/v5/upload", ""] {
            assert_eq!(Subtest::from_path(p), None, "{p}");
        }
    }

    #[test]
    fn queries_decode_keep_the_first_duplicate_and_refuse_bad_input() {
        let m = parse_query("client_name=ndt7-js&client_version=0.1.4&a=%C3%A9+x&a=2&flag").unwrap();
        assert_eq!(m["client_name"], "ndt7-js");
        assert_eq!(m["a"], "é x");
        assert_eq!(m["flag"], "");
        assert_eq!(m.len(), 4);
        assert!(parse_query("").unwrap().is_empty());
        assert_eq!(parse_query(&"a".repeat(4097)), Err(QueryError::TooLong(4097)));
        assert!(parse_query(&"a".repeat(4096)).is_ok());
        assert!(matches!(parse_query("a=%ff"), Err(QueryError::NotUtf8(_))));
        assert!(matches!(parse_query("a=%4"), Err(QueryError::NotUtf8(_))));
        assert!(matches!(parse_query("a=%zz"), Err(QueryError::NotUtf8(_))));
    }

    #[test]
    fn message_sizes_start_at_8k_double_at_a_sixteenth_and_stop_at_the_cap() {
        let mut s = MessageSizer::new(MAX_MESSAGE_BYTES);
        assert_eq!(s.size(), 8192);
        // 8 KiB stays until more than 16 × 8 KiB has been queued.
        for _ in 0..16 {
            assert_eq!(s.size(), 8192);
            s.sent();
        }
        s.sent();
        assert_eq!(s.size(), 16384);
        let mut last = s.size();
        for _ in 0..100_000 {
            s.sent();
            assert!(s.size() == last || s.size() == 2 * last);
            assert!((s.size() as u64) <= s.total() / 16 + s.size() as u64);
            last = s.size();
        }
        assert_eq!(s.size(), MAX_MESSAGE_BYTES);
        let mut small = MessageSizer::new(1 << 20);
        for _ in 0..10_000 {
            small.sent();
        }
        assert_eq!(small.size(), 1 << 20);
        assert_eq!(MessageSizer::new(10).size(), 1024);
    }

    #[test]
    fn the_timetable_measures_every_quarter_second_ends_at_ten_and_cuts_off_at_thirteen() {
        let mut t = Timetable::new(TEST_S);
        let mut measures = 0;
        let mut ended_at = None;
        let mut s = 0.0;
        while s < 20.0 {
            match t.at(s) {
                Due::Measure => measures += 1,
                Due::End => ended_at = Some(s),
                Due::CutOff => break,
                Due::Nothing => {}
            }
            s += 0.01;
        }
        assert_eq!(measures, 39, "at 0.25 .. 9.75 s");
        assert!((ended_at.unwrap() - 10.0).abs() < 0.011);
        assert!((s - 13.0).abs() < 0.011, "cut off at {s}");
        // A late caller gets one measurement, not a burst.
        let mut late = Timetable::new(5.0);
        assert_eq!(late.at(2.0), Due::Measure);
        assert_eq!(late.at(2.01), Due::Nothing);
        assert!((late.wait_s(2.01) - 0.24).abs() < 1e-9);
        assert_eq!(late.at(5.0), Due::End);
        assert_eq!(late.at(6.0), Due::Nothing);
        assert_eq!(late.at(8.0), Due::CutOff);
        assert!(Timetable::new(60.0).test_s <= TEST_S);
    }

    #[test]
    fn measurements_use_the_specs_key_names() {
        let m = Measurement {
            app_info: Some(AppInfo {
                elapsed_time: 250_000,
                num_bytes: 1 << 20,
            }),
            connection_info: Some(ConnectionInfo {
                client: endpoint("[::ffff:127.0.0.1]:5000".parse().unwrap()),
                server: endpoint("[::1]:443".parse().unwrap()),
                uuid: None,
                start_time: None,
            }),
            origin: Some("server".into()),
            test: Some("download".into()),
            tcp_info: Some(TcpInfoMessage {
                min_rtt_us: Some(40),
                rtt_var_us: Some(5),
                sndbuf_limited_us: Some(0),
                ..Default::default()
            }),
            landspeed: None,
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["AppInfo"]["ElapsedTime"], 250_000);
        assert_eq!(v["AppInfo"]["NumBytes"], 1 << 20);
        assert_eq!(v["ConnectionInfo"]["Client"], "127.0.0.1:5000");
        assert_eq!(v["ConnectionInfo"]["Server"], "[::1]:443");
        assert_eq!(v["Origin"], "server");
        assert_eq!(v["Test"], "download");
        assert_eq!(v["TCPInfo"]["MinRTT"], 40);
        assert_eq!(v["TCPInfo"]["RTTVar"], 5);
        assert_eq!(v["TCPInfo"]["SndBufLimited"], 0);
        assert!(v["TCPInfo"].get("BusyTime").is_none());
        assert!(v["ConnectionInfo"].get("UUID").is_none());
        let back: Measurement = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }
}
