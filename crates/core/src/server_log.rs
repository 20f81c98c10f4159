//! What a landspeed server reports about itself, as data: one event per test, per refused connection,
//! per statistics request, and when it starts listening. The server (landspeed-net) produces these; the
//! renderers in landspeed-report turn them into the log's text lines or JSON lines
//! (docs/server-log.md). Nothing here does I/O.

use crate::config::Direction;
use crate::session_id::SessionId;
use std::net::SocketAddr;

/// One finished (or failed) test, for the server's log.
#[derive(Debug, Clone)]
pub struct TestLog {
    /// The client's address.
    pub peer: SocketAddr,
    /// The test's session id (landspeed's protocol).
    pub session: Option<SessionId>,
    /// Streams per direction.
    pub streams: u32,
    /// Which way the data went, once known.
    pub direction: Option<Direction>,
    /// Bytes this server received after the warm-up.
    pub bytes_received: u64,
    /// Bytes this server sent (after the warm-up for iperf3 tests, as iperf3 counts).
    pub bytes_sent: u64,
    /// Bytes this server checked against the payload pattern, and blocks that were wrong.
    pub bytes_verified: u64,
    /// 256-byte blocks with a wrong byte.
    pub corrupt_blocks: u64,
    /// This end's test time, seconds.
    pub duration_s: f64,
    /// None when the test completed; otherwise why it did not.
    pub error: Option<String>,
    /// "landspeed", or "iperf3 VERSION" for an iperf3 client.
    pub protocol: String,
    /// iperf3 only: the total the client reported in the results exchange.
    pub peer_bytes: Option<u64>,
    /// The key name the client authenticated with (`--auth-keys`).
    pub auth: Option<String>,
    /// iperf3 tests that completed: the whole test as this server saw it (its own figures, and the
    /// client's from the results exchange), for `landspeed iperf3 -s -J`.
    pub result: Option<Box<crate::result::RunResult>>,
    /// iperf3 tests: the client's `-T` title and `--extra-data`, which iperf3's server puts at the top
    /// of its `-J` document.
    pub iperf3_labels: Iperf3Labels,
}

/// What an iperf3 client labels its test with (`title`, `extra_data` in its parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Iperf3Labels {
    /// `-T`.
    pub title: Option<String>,
    /// `--extra-data`.
    pub extra_data: Option<String>,
}

impl TestLog {
    /// The verdict on this end's half of the test (landspeed-core's rules): the server cannot compare
    /// counts with the client, so an error or a corrupt block is what makes it untrusted.
    pub fn verdict(&self) -> crate::verdict::Verdict {
        crate::verdict::Evidence {
            corrupt_blocks: self.corrupt_blocks,
            errors: self.error.iter().map(|e| (None, e.clone())).collect(),
            ..Default::default()
        }
        .judge()
    }

    /// A test from `peer` in `protocol` ("landspeed", "iperf3"), nothing measured yet.
    pub fn new(peer: SocketAddr, protocol: &str) -> TestLog {
        TestLog {
            peer,
            session: None,
            streams: 0,
            direction: None,
            bytes_received: 0,
            bytes_sent: 0,
            bytes_verified: 0,
            corrupt_blocks: 0,
            duration_s: 0.0,
            error: None,
            protocol: protocol.into(),
            peer_bytes: None,
            auth: None,
            result: None,
            iperf3_labels: Iperf3Labels::default(),
        }
    }
}

/// What the server tells its log (rendered by `report::server_log`, docs/server-log.md).
#[derive(Debug, Clone)]
pub enum ServerEvent {
    /// The server listens on these addresses.
    Listening {
        /// Where.
        addresses: Vec<SocketAddr>,
        /// The fingerprint of the certificate its encrypted data connections present.
        certificate: crate::tls::CertFingerprint,
        /// Where it serves ndt7 (`serve --ndt7`): `ws://ADDR` or `wss://ADDR`.
        ndt7: Option<String>,
        /// Where it serves the responsiveness test (`serve --rpm`): its configuration URL.
        rpm: Option<String>,
        /// Why QUIC is not served though it was not turned off (the kernel cannot route the shared
        /// port's datagrams: before Linux 4.5, or under qemu-user).
        quic_off: Option<String>,
    },
    /// A test finished or failed.
    Test(TestLog),
    /// A connection that was not a test: unknown protocol, unknown session, over a limit, ...
    Refused {
        /// Who connected.
        peer: SocketAddr,
        /// Why, as one of a fixed set (what the counters and metrics count).
        kind: RefusalKind,
        /// Why, in words, for the log line only (it may quote what the peer sent).
        reason: String,
    },
    /// Counters since start, when asked (`stats_signal`, SIGUSR1 in the binary).
    Stats(ServerStats),
    /// An iperf3 or iperf 2 client's test as it runs (only when the server was asked for it, for a
    /// live view): the test so far, with no interval when its streams are up, then one more as each
    /// closes. Its `config.local_address` (the client's) and `started_unix_s` tell one test from
    /// another, and its final result (in `Test`) carries the same.
    Progress(Box<crate::result::RunResult>),
}

/// What a server has done since it started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerStats {
    /// Seconds since the server started.
    pub uptime_s: f64,
    /// Tests that completed.
    pub tests_ok: u64,
    /// Tests that failed.
    pub tests_failed: u64,
    /// Tests running now.
    pub tests_running: u64,
    /// Bytes received by completed and failed tests.
    pub bytes_received: u64,
    /// Bytes sent by completed and failed tests.
    pub bytes_sent: u64,
    /// Refused connections and datagrams by kind (a fixed set, so the counters and their metric
    /// labels stay bounded whatever peers send).
    pub refused: Vec<(RefusalKind, u64)>,
}

/// Why the server turned a connection or datagram away: a fixed set, so that counting refusals by
/// reason can never grow with what strangers send (the words, which may quote them, go only to the
/// log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefusalKind {
    /// Not in `--allow`.
    NotAllowed,
    /// Over `--max-tests-per-minute`.
    RateLimited,
    /// Every slot of its kind in use (tests, greetings, handshakes, threads).
    Busy,
    /// It did not prove a key the server accepts.
    Authentication,
    /// A protocol this keyed server does not open to clients without a key.
    Keyed,
    /// Its first bytes were not a complete greeting of any protocol served, in time.
    Greeting,
    /// Its request was malformed (an HTTP request, a cookie, a QUIC stream's hello).
    Malformed,
    /// A data connection for a session no running test owns.
    UnknownSession,
    /// A data connection from another address than its test's control connection, or with a wrong
    /// stream proof.
    ForeignStream,
    /// A data connection for a stream its test already has, or does not have.
    DuplicateStream,
    /// A UDP hello from an address not yet shown to receive there (answered with a challenge only).
    UdpUnvalidated,
    /// Its test would need more memory than the server's budget allows.
    Memory,
    /// A data connection whose TLS handshake failed or did not end within the handshake timeout.
    StreamHandshake,
    /// A connection still proving itself (or still sending its request) whose place in a full
    /// admission pool went to a client from an address or network holding fewer.
    Evicted,
    /// A well-formed request for a mode this server does not serve (iperf 2's `-r` and `-d`, which
    /// would have it connect back to the client; its `--permit-key`).
    Unserved,
}

impl RefusalKind {
    /// Every kind, in order.
    pub const ALL: [RefusalKind; 15] = [
        RefusalKind::NotAllowed,
        RefusalKind::RateLimited,
        RefusalKind::Busy,
        RefusalKind::Authentication,
        RefusalKind::Keyed,
        RefusalKind::Greeting,
        RefusalKind::Malformed,
        RefusalKind::UnknownSession,
        RefusalKind::ForeignStream,
        RefusalKind::DuplicateStream,
        RefusalKind::UdpUnvalidated,
        RefusalKind::Memory,
        RefusalKind::StreamHandshake,
        RefusalKind::Evicted,
        RefusalKind::Unserved,
    ];

    /// Its name in counters, JSON and metric labels.
    pub fn label(self) -> &'static str {
        match self {
            RefusalKind::NotAllowed => "not_allowed",
            RefusalKind::RateLimited => "rate_limited",
            RefusalKind::Busy => "busy",
            RefusalKind::Authentication => "authentication",
            RefusalKind::Keyed => "keyed_server",
            RefusalKind::Greeting => "greeting",
            RefusalKind::Malformed => "malformed",
            RefusalKind::UnknownSession => "unknown_session",
            RefusalKind::ForeignStream => "foreign_stream",
            RefusalKind::DuplicateStream => "duplicate_stream",
            RefusalKind::UdpUnvalidated => "udp_unvalidated",
            RefusalKind::Memory => "memory",
            RefusalKind::StreamHandshake => "stream_handshake",
            RefusalKind::Evicted => "evicted",
            RefusalKind::Unserved => "unserved",
        }
    }
}

/// The window in which one address may put [`REFUSAL_LINES`] refusals of one kind in the server's
/// log: a flood of refusals must not flood the log (every refusal is still counted).
pub const REFUSAL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Refusal lines one address (IPv6: one /64) may put in the log per kind and per
/// [`REFUSAL_LOG_EVERY`]: enough for one client's distinct mistakes (a wrong key, then a stream
/// without its MAC), so a flood costs at most this many lines a minute per kind.
pub const REFUSAL_LINES: u32 = 8;

/// The gate that keeps refusal lines to [`REFUSAL_LINES`] per address and kind a minute, saying
/// how many it held back when the next line goes out. Time comes from the caller; memory stays
/// bounded (`MAX_TRACKED` pairs; past that, pairs whose minute is over are forgotten, and while it
/// is still full new pairs are held back).
#[derive(Debug, Default)]
pub struct RefusalGate {
    /// Per address and kind: when its minute began, lines in it, lines held back.
    seen: std::collections::HashMap<(std::net::IpAddr, RefusalKind), (std::time::Instant, u32, u64)>,
}

impl RefusalGate {
    /// Pairs of address and kind remembered at most.
    pub const MAX_TRACKED: usize = 4096;

    /// Whether a refusal of `kind` from `ip` at `now` gets a line: Some(lines held back before
    /// it), or None (held back, counted).
    pub fn pass(&mut self, ip: std::net::IpAddr, kind: RefusalKind, now: std::time::Instant) -> Option<u64> {
        let key = (crate::address::bucket(ip), kind);
        if !self.seen.contains_key(&key) && self.seen.len() >= Self::MAX_TRACKED {
            self.seen
                .retain(|_, (at, _, _)| now.saturating_duration_since(*at) < REFUSAL_LOG_EVERY);
            if self.seen.len() >= Self::MAX_TRACKED {
                return None;
            }
        }
        let (at, lines, held) = self.seen.entry(key).or_insert((now, 0, 0));
        if now.saturating_duration_since(*at) >= REFUSAL_LOG_EVERY {
            *at = now;
            *lines = 0;
        }
        if *lines >= REFUSAL_LINES {
            *held += 1;
            return None;
        }
        *lines += 1;
        Some(std::mem::take(held))
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_few_lines_per_address_and_kind_a_minute_with_the_count_held_back() {
        let mut g = RefusalGate::default();
        let t0 = Instant::now();
        let a: std::net::IpAddr = "192.0.2.1".parse().unwrap();
        let b: std::net::IpAddr = "2001:db8::1".parse().unwrap();
        for i in 0..REFUSAL_LINES {
            let at = t0 + Duration::from_millis(i.into());
            assert_eq!(g.pass(a, RefusalKind::Busy, at), Some(0));
        }
        for i in 0..100 {
            let at = t0 + Duration::from_millis(100 + i);
            assert_eq!(g.pass(a, RefusalKind::Busy, at), None);
        }
        assert_eq!(g.pass(a, RefusalKind::Greeting, t0), Some(0), "another kind");
        for _ in 0..REFUSAL_LINES {
            assert_eq!(g.pass(b, RefusalKind::Busy, t0), Some(0), "another address");
        }
        let same_64: std::net::IpAddr = "2001:db8::2".parse().unwrap();
        assert_eq!(g.pass(same_64, RefusalKind::Busy, t0), None, "the same /64");
        let next_minute = t0 + Duration::from_secs(60);
        assert_eq!(g.pass(a, RefusalKind::Busy, next_minute), Some(100));
        assert_eq!(g.pass(a, RefusalKind::Busy, next_minute), Some(0));
    }

    #[test]
    fn memory_is_bounded_and_old_pairs_make_room() {
        let mut g = RefusalGate::default();
        let t0 = Instant::now();
        for i in 0..(RefusalGate::MAX_TRACKED as u32 + 10) {
            let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            g.pass(ip, RefusalKind::Busy, t0);
        }
        assert_eq!(g.seen.len(), RefusalGate::MAX_TRACKED);
        let late = std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 9));
        assert_eq!(g.pass(late, RefusalKind::Busy, t0 + Duration::from_secs(1)), None);
        assert_eq!(
            g.pass(late, RefusalKind::Busy, t0 + Duration::from_secs(61)),
            Some(0)
        );
        assert_eq!(g.seen.len(), 1);
    }
}
