//! The test configuration both ends agree on. The client resolves its command line into a `TestSpec`,
//! validates it, and sends it to the server, which validates it again (it cannot trust the client). One
//! validation function serves both, so the limits a user sees in an error are the limits the server
//! enforces.

use crate::udp::MAX_UDP_LENGTH;
use crate::units::{secs, BitRate, Bytes};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most TCP connections one test may open per direction.
pub const MAX_STREAMS: u32 = 1024;

/// Streams per CPU above which a TCP test's defaults change for many streams (see
/// [`TestSpec::for_many_streams`]).
pub const MANY_STREAMS_PER_CPU: u32 = 2;

/// The write size of a TCP test with many streams per CPU when none is asked for: small enough that
/// every thread's buffer stays in the CPU's cache.
pub const MANY_STREAMS_LENGTH: Bytes = Bytes(128 * 1024);

/// Streams (on one end) up to which each stream gets a worker thread of its own by default: blocking
/// calls and the receive low-water mark, as the threaded iperf3 gives every stream a thread
/// (docs/benchmarks.md has the measurement that set it). Above it, one epoll worker per CPU carries
/// them all.
pub const THREAD_PER_STREAM_MAX: u32 = 128;
/// Largest write/read size per call.
pub const MAX_LENGTH: u64 = 64 << 20;
/// Longest test (and warm-up) accepted: one day.
pub const MAX_TIME: Duration = Duration::from_secs(86_400);
/// Largest socket buffer request: the kernel takes an `int` and doubles it.
pub const MAX_WINDOW: u64 = (i32::MAX as u64) / 2;
/// Default write/read size: 1 MiB, measured against 256 KiB and 2 MiB at 1, 2 and 8 streams on loopback
/// (docs/benchmarks.md, "Choosing the default write size"): 1.44x, 1.11x and 1.18x 256 KiB, and
/// within 10% of 2 MiB everywhere; also the largest block an iperf3 server takes.
pub const DEFAULT_LENGTH: Bytes = Bytes(1024 * 1024);
/// UDP rate when none is given (iperf3's default, but over all streams here).
pub const DEFAULT_UDP_RATE_BPS: f64 = 1e6;

/// The IP version a client keeps to when a name resolves to both (`-4`/`-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// The transport the data streams use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// TCP streams.
    #[default]
    Tcp,
    /// Paced UDP datagrams (`-u`).
    Udp,
    /// QUIC streams (`--quic`): `streams` of them over `connections` connections.
    Quic,
}

fn default_burst() -> u32 {
    16
}

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The client sends, the server receives (iperf's default).
    #[default]
    Forward,
    /// The server sends, the client receives (`-R`).
    Reverse,
    /// Both at once, on separate connections (`--bidir`).
    Bidir,
}

/// The direction of one stream's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// From the client to the server.
    ClientToServer,
    /// From the server to the client.
    ServerToClient,
}

impl Flow {
    /// The flow in words, for tables ("client->server" or "server->client").
    pub fn label(self) -> &'static str {
        match self {
            Flow::ClientToServer => "client->server",
            Flow::ServerToClient => "server->client",
        }
    }
}

/// When the senders stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndCondition {
    /// Send for this long after the warm-up.
    Time(#[serde(with = "secs")] Duration),
    /// Send exactly this many bytes per direction, split over the streams.
    Bytes(u64),
    /// Send exactly this many buffers of `length` bytes per direction, split over the streams.
    Blocks(u64),
}

/// Everything both ends must know to run one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    /// TCP connections per direction.
    pub streams: u32,
    /// Bytes per write and per read call.
    pub length_bytes: u64,
    /// What ends the test: a time, a byte count or a block count.
    pub end: EndCondition,
    /// Warm-up at the start whose bytes are left out of the results (`-O`).
    #[serde(with = "secs")]
    pub omit_s: Duration,
    /// Which way the data goes.
    pub direction: Direction,
    /// SO_SNDBUF and SO_RCVBUF requested on every data socket on both ends.
    pub window_bytes: Option<u64>,
    /// TCP congestion control for the senders (`-C`).
    pub congestion: Option<String>,
    /// TCP maximum segment size for every data socket (`-M`).
    pub mss: Option<u32>,
    /// TCP_NODELAY on every data socket (`-N`).
    pub nodelay: bool,
    /// SO_MAX_PACING_RATE for each sending socket, bits per second.
    pub fq_rate_bps: Option<f64>,
    /// Interval between samples (and live report lines).
    #[serde(with = "secs")]
    pub interval_s: Duration,
    /// Worker threads on the server (None: one per stream up to the core count).
    pub server_threads: Option<u32>,
    /// CPUs the server pins its workers to, round-robin.
    pub server_cpus: Option<Vec<usize>>,
    /// The receiver checks every byte against the expected payload (`--no-verify` turns it off).
    #[serde(default = "yes")]
    pub verify: bool,
    /// Key of the run's payload pattern (chosen at random by the client).
    #[serde(default)]
    pub payload_key: u64,
    /// How receivers take data off the socket.
    #[serde(default)]
    pub rx: RxMode,
    /// How senders hand data to the kernel.
    #[serde(default)]
    pub tx: TxMode,
    /// The event loop that drives the sockets.
    #[serde(default)]
    pub io: IoBackend,
    /// io_uring: operations queued per stream (NTttcp's -a).
    #[serde(default = "one")]
    pub queue_depth: u32,
    /// TCP streams or UDP datagrams.
    #[serde(default)]
    pub transport: Transport,
    /// UDP: the target rate of all streams together, bits per second of datagrams (header included).
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// UDP: datagrams a sender that fell behind its schedule may send back to back.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// A disk-to-disk test: the file moved instead of the generated payload (one TCP stream, one
    /// direction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<crate::files::FileSpec>,
    /// SO_RCVLOWAT on every TCP receiver that owns its thread: the bytes a receive call waits for
    /// before the kernel wakes it (None: [`TestSpec::rcvlowat`]'s default; 0: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvlowat_bytes: Option<u64>,
    /// Multipath TCP: the data connections are IPPROTO_MPTCP sockets (the control connection stays
    /// TCP); the kernel's path manager opens the subflows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mptcp: bool,
    /// TLS 1.3 over every TCP data connection (`--tls`): the suite, and whether the kernel takes the
    /// record layer over after the handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::TlsSpec>,
    /// QUIC: the connections the streams are spread over (round-robin).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub connections: u32,
    /// The client's idle limit, seconds: a data stream that moves nothing this long fails, and the
    /// server holds the test no longer than that (and its handshake timeout) after its streams end.
    /// The server uses its own limit when that is shorter. None: each end its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_s: Option<f64>,
    /// The IP type-of-service byte (IPv4 TOS, IPv6 traffic class) on every data socket at both ends
    /// (`--tos`, `--dscp`; iperf3's `-S`): DSCP in the upper six bits, ECN's two bits as the kernel
    /// keeps them for TCP. None: the kernel's default (0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// UDP over IPv4: every datagram leaves with Don't Fragment set (IP_PMTUDISC_DO), at both ends
    /// (`--dont-fragment`, iperf3 3.17+'s): one over the path MTU fails to send rather than being
    /// split. IPv6 never fragments on the way, so it changes nothing there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dont_fragment: bool,
    /// A request/response test (`run --rr`) instead of a bulk one: each stream is a connection on
    /// which the client sends requests and the server answers each with a response
    /// (docs/request-response.md). Absent for a bulk test; a server that predates it ignores it
    /// and would run a bulk test, so the client's first response never comes (its error says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<TransactionSpec>,
    /// UDP in isochronous frames (`--isochronous FPS:MEAN,STDDEV`) instead of a steady rate: a frame
    /// of varying size every period (docs/isochronous.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::frames::FrameSpec>,
    /// TCP: the sender cuts its stream into bursts of one write buffer, each opening with iperf 2's
    /// burst header stamped with its send time, and the receiver times each burst's last byte from
    /// that stamp (iperf 2's `--trip-times`; docs/iperf2.md, "Trip times over TCP").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trip_times: bool,
}

/// A request/response test's shape: what each request and response holds and how many requests a
/// connection keeps unanswered at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionSpec {
    /// Bytes of each request (the payload's pattern, checked by the server).
    pub request_bytes: u32,
    /// Bytes of each response (the payload's pattern, checked by the client).
    pub response_bytes: u32,
    /// Requests sent before the first is answered, and kept unanswered from then on (netperf's
    /// burst plus one): 1 sends each request only once the last is answered.
    pub in_flight: u32,
    /// Each transaction on a connection of its own (netperf's TCP_CRR, `run --connect-rate` in
    /// landspeed's protocol): opened (its TCP and TLS handshakes timed), one request answered,
    /// closed. Absent from specs written before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub connect_each: bool,
}

/// The largest request or response of a request/response test.
pub const MAX_TRANSACTION_BYTES: u32 = 1 << 20;
/// The most requests a request/response connection keeps unanswered.
pub const MAX_IN_FLIGHT: u32 = 1024;

impl TransactionSpec {
    /// The stream number the responses of stream `id` are patterned as (the requests are `id`'s):
    /// past every stream a test can have, so no response can pass for a request.
    pub fn response_stream(id: u32) -> u32 {
        id | 0x8000_0000
    }
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The congestion controllers a QUIC test can ask for (`-C` with `--quic`), as quinn names them.
pub const QUIC_CONGESTION: [&str; 3] = ["cubic", "bbr", "newreno"];

/// The event loop that drives the data sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoBackend {
    /// Non-blocking sockets and epoll; one system call per buffer.
    #[default]
    Epoll,
    /// io_uring with `queue_depth` linked operations queued per stream.
    Uring,
}

fn one() -> u32 {
    1
}

/// How senders hand data to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxMode {
    /// send(): the kernel copies the buffer.
    #[default]
    Copy,
    /// send(MSG_ZEROCOPY): the kernel sends from our pages and reports when it is done with them.
    Zerocopy,
}

/// How receivers take data off the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RxMode {
    /// Copy into the receive buffer (needed to verify).
    #[default]
    Copy,
    /// Let the kernel drop the bytes without copying them (MSG_TRUNC); only without verification.
    Discard,
}

fn yes() -> bool {
    true
}

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            streams: 1,
            length_bytes: DEFAULT_LENGTH.get(),
            end: EndCondition::Time(Duration::from_secs(10)),
            omit_s: Duration::ZERO,
            direction: Direction::Forward,
            window_bytes: None,
            congestion: None,
            mss: None,
            nodelay: false,
            fq_rate_bps: None,
            interval_s: Duration::from_secs(1),
            server_threads: None,
            server_cpus: None,
            verify: true,
            payload_key: 0,
            rx: RxMode::Copy,
            tx: TxMode::Copy,
            io: IoBackend::Epoll,
            queue_depth: 1,
            transport: Transport::Tcp,
            rate_bps: None,
            burst: default_burst(),
            file: None,
            rcvlowat_bytes: None,
            mptcp: false,
            tls: None,
            connections: 1,
            idle_timeout_s: None,
            tos: None,
            dont_fragment: false,
            transactions: None,
            frames: None,
            trip_times: false,
        }
    }
}

/// SO_RCVLOWAT for a receiver: how much must have arrived before a receive call wakes. Fewer wake-ups
/// per byte are fewer CPU-seconds per byte at both ends (on loopback the sender's core runs the
/// receiver's wake-ups), but bytes waiting for the mark are not yet read, and the window the receiver
/// advertises shrinks by them: on a window-limited path the mark costs rate (docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RcvLowat {
    /// Wake for every arrival (the kernel's default of one byte).
    Off,
    /// Exactly this mark, as asked for.
    Fixed(u64),
    /// Two writes' worth, but never more than a sixteenth of the receive buffer the kernel has
    /// autotuned so far, so what waits for the mark takes at most about 1/8 of the window.
    Auto {
        /// The most it grows to.
        max_bytes: u64,
    },
}

impl RcvLowat {
    /// The divisor of the receive buffer (SO_RCVBUF, which counts the kernel's overhead: about half
    /// of it is window) that bounds an automatic mark.
    pub const AUTO_BUFFER_SHARE: u64 = 16;

    /// The mark to set now, given the socket's receive buffer (0: leave it at the kernel's default).
    pub fn mark(self, rcvbuf_bytes: u64) -> u64 {
        match self {
            RcvLowat::Off => 0,
            RcvLowat::Fixed(n) => n,
            RcvLowat::Auto { max_bytes } => max_bytes.min(rcvbuf_bytes / Self::AUTO_BUFFER_SHARE),
        }
    }
}

/// A configuration value outside what landspeed accepts, with the value that was given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A request or response size out of range.
    #[error("a request/response test's {what} must be 1 B..=1 MiB, got {bytes} B")]
    TransactionSize {
        /// "request" or "response".
        what: &'static str,
        /// The size given.
        bytes: u32,
    },
    /// Requests in flight out of range.
    #[error("a request/response test keeps 1..=1024 requests in flight, got {0}")]
    InFlight(u32),
    /// Isochronous frames out of range.
    #[error(transparent)]
    Frames(#[from] crate::frames::FrameSpecError),
    /// Something an isochronous test cannot be run with.
    #[error("an isochronous test (--isochronous) sends frames one way, as UDP datagrams or (iperf 2's protocol) TCP bursts; it cannot take {0}")]
    FramesWith(&'static str),
    /// Something a request/response test cannot be run with.
    #[error(
        "a request/response test (--rr) runs over TCP, TLS or UDP, one way, for a time; it cannot take {0}"
    )]
    TransactionsWith(&'static str),
    /// A UDP request/response test's sizes outside what the echo service answers.
    #[error(transparent)]
    UdpTransactions(#[from] crate::transactions::udp::UdpRrError),
    /// A stream count out of range.
    #[error("streams must be 1..={MAX_STREAMS}, got {0}")]
    Streams(u32),
    /// A write size out of range.
    #[error("length must be 1 B..=64 MiB, got {0} B")]
    Length(u64),
    /// A test time out of range.
    #[error("test time must be more than 0 and at most 86400 s, got {0:?}")]
    Time(Duration),
    /// A warm-up out of range.
    #[error("warm-up (omit) must be at most 86400 s, got {0:?}")]
    Omit(Duration),
    /// An idle limit out of range.
    #[error("idle timeout must be 0.1..=3600 s, got {0} s")]
    IdleTimeout(f64),
    /// A byte count smaller than the stream count.
    #[error("byte count must be at least the number of streams ({streams}), got {bytes}")]
    ByteCount {
        /// The count given.
        bytes: u64,
        /// Streams in the test.
        streams: u32,
    },
    /// A block count smaller than the stream count.
    #[error("block count must be at least the number of streams ({streams}), got {blocks}")]
    BlockCount {
        /// The count given.
        blocks: u64,
        /// Streams in the test.
        streams: u32,
    },
    /// A receive low-water mark out of range.
    #[error("receive low-water mark must be 0 B..={MAX_WINDOW} B (the kernel takes an int), got {0} B")]
    RcvLowat(u64),
    /// A window out of range.
    #[error("window must be 1 B..={MAX_WINDOW} B (the kernel takes an int), got {0} B")]
    Window(u64),
    /// An MSS out of range.
    #[error("MSS must be 88..=65535, got {0}")]
    Mss(u32),
    /// An fq pacing rate that is not a positive number.
    #[error("fq rate must be positive and finite, got {0}")]
    FqRate(f64),
    /// An interval out of range.
    #[error("interval must be 10 ms..=1 h, got {0:?}")]
    Interval(Duration),
    /// A file name that is not a plain name (the text says why).
    #[error("file transfer: {0}")]
    FileName(String),
    /// A file transfer with more than one stream, UDP, or both directions.
    #[error("file transfer: a file moves over one TCP stream in one direction")]
    FileNeedsOneTcpStream,
    /// A file transfer with a data path other than sendfile and splice.
    #[error("file transfer: a file moves with sendfile and splice (no io_uring, zero-copy or discarding receivers)")]
    FileNeedsCopyPaths,
    /// A congestion control name with characters no algorithm has.
    #[error("congestion control name '{0}' is not a plain algorithm name")]
    Congestion(String),
    /// A server thread count out of range.
    #[error("server threads must be 1..={MAX_STREAMS}, got {0}")]
    Threads(u32),
    /// An empty CPU list or one naming a CPU above 4095.
    #[error("CPU list is empty or names a CPU above 4095: {0:?}")]
    Cpus(Vec<usize>),
    /// Discarding receivers with verification on.
    #[error("receive mode 'discard' throws bytes away unread, so it needs verification off")]
    DiscardNeedsNoVerify,
    /// A socket option Linux does not take on MPTCP sockets (fq pacing, zero-copy sends).
    #[error("{0} is not available on MPTCP sockets (Linux refuses the socket option there)")]
    NotOnMptcp(TcpSetting),
    /// A setting QUIC has no use for.
    #[error("{0} applies to TCP, not QUIC")]
    NotOnQuic(TcpSetting),
    /// Don't Fragment asked for a test that is not UDP.
    #[error("don't fragment applies to UDP tests only (TCP and QUIC size their packets to the path)")]
    DontFragmentNeedsUdp,
    /// A type-of-service byte asked for a QUIC test.
    #[error("a type-of-service byte is not set on QUIC tests: quinn writes each datagram's TOS byte itself (for ECN)")]
    TosOnQuic,
    /// A congestion controller quinn does not have.
    #[error("QUIC congestion control '{0}': expected cubic, bbr or newreno")]
    QuicCongestion(String),
    /// More connections than streams, or none.
    #[error("{connections} QUIC connections for {streams} streams: between 1 and the stream count")]
    Connections {
        /// Connections asked for.
        connections: u32,
        /// Streams per direction.
        streams: u32,
    },
    /// Several connections are a QUIC setting.
    #[error("connections apply to QUIC streams only")]
    ConnectionsNeedQuic,
    /// A data path that cannot carry TLS.
    #[error("{0} cannot carry TLS: the record layer runs in landspeed's own send and receive calls")]
    NotWithTls(TcpSetting),
    /// An io_uring queue depth out of range.
    #[error("queue depth must be 1..=64, got {0}")]
    QueueDepth(u32),
    /// Zero-copy sends with the io_uring backend.
    #[error("zero-copy sends are implemented for the epoll backend only")]
    ZerocopyNeedsEpoll,
    /// A UDP datagram size out of range.
    #[error("UDP datagrams must be {min}..={MAX_UDP_LENGTH} bytes, got {0}", min = crate::udp::HEADER + 1)]
    UdpLength(u64),
    /// A UDP rate that is not a positive number.
    #[error("UDP rate must be positive and finite, got {0}")]
    UdpRate(f64),
    /// A UDP burst out of range.
    #[error("burst must be 1..=1024 datagrams, got {0}")]
    Burst(u32),
    /// A TCP option given for a UDP test.
    #[error("{0} applies to TCP only")]
    TcpOnly(TcpSetting),
}

/// A setting that only a TCP test can have, named in plain words; the command line adds its flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpSetting {
    /// A congestion control algorithm.
    Congestion,
    /// A maximum segment size.
    Mss,
    /// TCP_NODELAY.
    NoDelay,
    /// fq pacing (UDP is paced by its own rate).
    FqRate,
    /// The io_uring backend.
    IoUring,
    /// Zero-copy sends.
    TxZerocopy,
    /// Discarding receivers.
    RxDiscard,
    /// A receive low-water mark.
    RcvLowat,
    /// Multipath TCP.
    Mptcp,
    /// TLS over the data connections.
    Tls,
    /// Kernel TLS.
    Ktls,
    /// Disk-to-disk (a file sent with sendfile, received with splice).
    File,
}

impl std::fmt::Display for TcpSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TcpSetting::Congestion => "a congestion control algorithm",
            TcpSetting::Mss => "a maximum segment size",
            TcpSetting::NoDelay => "TCP_NODELAY",
            TcpSetting::FqRate => "fq pacing (UDP is paced by its rate)",
            TcpSetting::IoUring => "the io_uring backend",
            TcpSetting::TxZerocopy => "zero-copy sending",
            TcpSetting::RxDiscard => "the discarding receiver",
            TcpSetting::RcvLowat => "a receive low-water mark (SO_RCVLOWAT)",
            TcpSetting::Mptcp => "multipath TCP",
            TcpSetting::Tls => "TLS",
            TcpSetting::Ktls => "kernel TLS",
            TcpSetting::File => "a disk-to-disk transfer",
        })
    }
}

impl TestSpec {
    /// Checks every field against landspeed's limits. The server calls this on what a client sent.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_amounts()?;
        // Before the transport's own checks: what a request/response test cannot be is said as such.
        if let Some(t) = &self.transactions {
            self.validate_transactions(t)?;
        }
        if let Some(f) = &self.frames {
            self.validate_frames(f)?;
        }
        self.validate_tcp_options()?;
        self.validate_data_path()?;
        if self.dont_fragment && self.transport != Transport::Udp {
            return Err(ConfigError::DontFragmentNeedsUdp);
        }
        match self.transport {
            Transport::Udp => self.validate_udp()?,
            Transport::Quic => self.validate_quic()?,
            Transport::Tcp if self.connections != 1 => return Err(ConfigError::ConnectionsNeedQuic),
            Transport::Tcp => {}
        }
        if let Some(f) = &self.file {
            self.validate_file(f)?;
        }
        Ok(())
    }

    /// An isochronous test: its frames in range, over UDP or TCP (iperf 2's bursts), one way, no
    /// steady rate beside them (none at all over TCP, where a rate would pace), no
    /// request/response.
    fn validate_frames(&self, f: &crate::frames::FrameSpec) -> Result<(), ConfigError> {
        f.check()?;
        let other = if self.transport == Transport::Quic {
            Some("QUIC (frames are UDP datagrams, or TCP bursts in iperf 2's protocol)")
        } else if self.transport == Transport::Tcp && (self.rate_bps.is_some() || self.fq_rate_bps.is_some())
        {
            Some("a rate (-b) over TCP: the frames' mean is their rate")
        } else if self.direction != Direction::Forward {
            Some("-R or --bidir (the client sends the frames)")
        } else if self.transactions.is_some() {
            Some("a request/response test")
        } else if self.rate_bps.is_some() && self.rate_bps != Some(f.mean_bps * f64::from(self.streams)) {
            Some("a rate (-b): the frames' mean is their rate")
        } else {
            None
        };
        match other {
            Some(o) => Err(ConfigError::FramesWith(o)),
            None => Ok(()),
        }
    }

    /// A request/response test: its sizes and depth in range, over TCP (MPTCP and TLS included),
    /// one way, timed, unpaced, with no warm-up and no file.
    fn validate_transactions(&self, t: &TransactionSpec) -> Result<(), ConfigError> {
        for (what, n) in [("request", t.request_bytes), ("response", t.response_bytes)] {
            if !(1..=MAX_TRANSACTION_BYTES).contains(&n) {
                return Err(ConfigError::TransactionSize { what, bytes: n });
            }
        }
        if !(1..=MAX_IN_FLIGHT).contains(&t.in_flight) {
            return Err(ConfigError::InFlight(t.in_flight));
        }
        if self.transport == Transport::Udp {
            crate::transactions::udp::check_sizes(t.request_bytes, t.response_bytes)?;
        }
        let other = if t.connect_each && self.transport != Transport::Tcp {
            Some("a connection each over UDP or QUIC (--connect-rate is TCP's, with or without TLS)")
        } else if t.connect_each && t.in_flight != 1 {
            Some("--in-flight above 1 with a connection each (each carries one transaction)")
        } else if self.transport == Transport::Quic {
            Some("QUIC (--quic)")
        } else if self.direction != Direction::Forward {
            Some("-R or --bidir")
        } else if !matches!(self.end, EndCondition::Time(_)) {
            Some("-n or -k (a request/response test is timed)")
        } else if !self.omit_s.is_zero() {
            Some("a warm-up (-O)")
        } else if self.rate_bps.is_some() || self.fq_rate_bps.is_some() {
            Some("a rate (-b, --fq-rate)")
        } else if self.file.is_some() {
            Some("a file")
        } else if self.io != IoBackend::Epoll || self.tx != TxMode::Copy || self.rx != RxMode::Copy {
            Some("io_uring, zero-copy or the discarding receiver")
        } else {
            None
        };
        match other {
            Some(o) => Err(ConfigError::TransactionsWith(o)),
            None => Ok(()),
        }
    }

    /// Streams, write size, end condition, warm-up and interval.
    fn validate_amounts(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return Err(ConfigError::Streams(self.streams));
        }
        if !(1..=MAX_LENGTH).contains(&self.length_bytes) {
            return Err(ConfigError::Length(self.length_bytes));
        }
        match self.end {
            EndCondition::Time(t) if t.is_zero() || t > MAX_TIME => return Err(ConfigError::Time(t)),
            EndCondition::Bytes(b) if b < u64::from(self.streams) => {
                return Err(ConfigError::ByteCount {
                    bytes: b,
                    streams: self.streams,
                })
            }
            EndCondition::Blocks(b) if b < u64::from(self.streams) => {
                return Err(ConfigError::BlockCount {
                    blocks: b,
                    streams: self.streams,
                })
            }
            _ => {}
        }
        if self.omit_s > MAX_TIME {
            return Err(ConfigError::Omit(self.omit_s));
        }
        if self.interval_s < Duration::from_millis(10) || self.interval_s > Duration::from_secs(3600) {
            return Err(ConfigError::Interval(self.interval_s));
        }
        if let Some(t) = self.idle_timeout_s {
            if !(0.1..=3600.0).contains(&t) {
                return Err(ConfigError::IdleTimeout(t));
            }
        }
        Ok(())
    }

    /// The client's idle limit, when it gave one.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout_s.map(Duration::from_secs_f64)
    }

    /// Window, MSS, fq pacing rate and congestion control name.
    fn validate_tcp_options(&self) -> Result<(), ConfigError> {
        if let Some(w) = self.window_bytes {
            if w == 0 || w > MAX_WINDOW {
                return Err(ConfigError::Window(w));
            }
        }
        if let Some(m) = self.mss {
            if !(88..=65535).contains(&m) {
                return Err(ConfigError::Mss(m));
            }
        }
        if let Some(r) = self.fq_rate_bps {
            if !(r.is_finite() && r > 0.0) {
                return Err(ConfigError::FqRate(r));
            }
        }
        if let Some(l) = self.rcvlowat_bytes {
            if l > MAX_WINDOW {
                return Err(ConfigError::RcvLowat(l));
            }
        }
        if let Some(c) = &self.congestion {
            let plain = !c.is_empty()
                && c.len() < 16
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !plain {
                return Err(ConfigError::Congestion(c.clone()));
            }
        }
        Ok(())
    }

    /// The server's threads and CPUs, and the data path's choices (discard, queue depth, zero-copy).
    fn validate_data_path(&self) -> Result<(), ConfigError> {
        if let Some(t) = self.server_threads {
            if !(1..=MAX_STREAMS).contains(&t) {
                return Err(ConfigError::Threads(t));
            }
        }
        if let Some(c) = &self.server_cpus {
            if c.is_empty() || c.iter().any(|&x| x > 4095) {
                return Err(ConfigError::Cpus(c.clone()));
            }
        }
        if self.verify && self.rx == RxMode::Discard {
            return Err(ConfigError::DiscardNeedsNoVerify);
        }
        if self.mptcp && self.fq_rate_bps.is_some() {
            return Err(ConfigError::NotOnMptcp(TcpSetting::FqRate));
        }
        if self.mptcp && self.tx == TxMode::Zerocopy {
            return Err(ConfigError::NotOnMptcp(TcpSetting::TxZerocopy));
        }
        if !(1..=64).contains(&self.queue_depth) {
            return Err(ConfigError::QueueDepth(self.queue_depth));
        }
        self.validate_tls()?;
        if self.tx == TxMode::Zerocopy && self.io == IoBackend::Uring {
            return Err(ConfigError::ZerocopyNeedsEpoll);
        }
        Ok(())
    }

    /// TLS runs its record layer in the worker's own send and receive calls: the data paths that hand
    /// pages to the kernel (zero-copy, io_uring, sendfile and splice, discarding receivers) cannot
    /// carry it, and kernel TLS cannot sit on an MPTCP socket.
    fn validate_tls(&self) -> Result<(), ConfigError> {
        let Some(tls) = self.tls else {
            return Ok(());
        };
        let refused = [
            (self.tx == TxMode::Zerocopy, TcpSetting::TxZerocopy),
            (self.io == IoBackend::Uring, TcpSetting::IoUring),
            (self.rx == RxMode::Discard, TcpSetting::RxDiscard),
            (self.file.is_some(), TcpSetting::File),
        ];
        if let Some((_, what)) = refused.iter().find(|(set, _)| *set) {
            return Err(ConfigError::NotWithTls(*what));
        }
        if tls.ktls && self.mptcp {
            return Err(ConfigError::NotOnMptcp(TcpSetting::Ktls));
        }
        Ok(())
    }

    /// A file moves over one TCP stream in one direction, with sendfile and splice.
    fn validate_file(&self, f: &crate::files::FileSpec) -> Result<(), ConfigError> {
        crate::files::check_name(&f.name).map_err(ConfigError::FileName)?;
        if self.streams != 1 || self.transport != Transport::Tcp || self.direction == Direction::Bidir {
            return Err(ConfigError::FileNeedsOneTcpStream);
        }
        if self.io != IoBackend::Epoll || self.tx != TxMode::Copy || self.rx != RxMode::Copy {
            return Err(ConfigError::FileNeedsCopyPaths);
        }
        Ok(())
    }

    /// The flows this test runs, in stream-id order: forward streams first, then reverse ones.
    pub fn flows(&self) -> Vec<Flow> {
        match self.direction {
            Direction::Forward => vec![Flow::ClientToServer],
            Direction::Reverse => vec![Flow::ServerToClient],
            Direction::Bidir => vec![Flow::ClientToServer, Flow::ServerToClient],
        }
    }

    /// Total TCP data connections: `streams` per flow.
    pub fn total_streams(&self) -> u32 {
        self.streams * self.flows().len() as u32
    }

    /// The flow of stream `id` (ids are 0-based, `streams` per flow, in `flows()` order).
    pub fn flow_of(&self, id: u32) -> Flow {
        self.flows()[(id / self.streams) as usize]
    }

    /// The byte budget of stream `id`, when the test ends by bytes or blocks: the per-direction total split
    /// as evenly as possible, the first streams taking one extra unit. `None` for timed tests.
    pub fn stream_budget(&self, id: u32) -> Option<u64> {
        let index = u64::from(id % self.streams);
        let n = u64::from(self.streams);
        let share = |total: u64| total / n + u64::from(index < total % n);
        match self.end {
            EndCondition::Time(_) => None,
            EndCondition::Bytes(b) => Some(share(b)),
            EndCondition::Blocks(k) => Some(share(k).saturating_mul(self.length_bytes)),
        }
    }

    /// True when this TCP test has more than [`MANY_STREAMS_PER_CPU`] streams per CPU of an end with
    /// `cpus` CPUs (both directions counted).
    pub fn many_streams(&self, cpus: u32) -> bool {
        self.transport == Transport::Tcp
            && self.total_streams() > MANY_STREAMS_PER_CPU.saturating_mul(cpus.max(1))
    }

    /// The defaults for many streams per CPU, for the settings the user left unset: writes of
    /// [`MANY_STREAMS_LENGTH`] (`length_set` false) and no receive low-water mark (`rcvlowat_bytes`
    /// None). With more threads than CPUs, small buffers stay in cache between the sender's copy and
    /// the receiver's, and a receiver woken for every arrival reads them while they are there; a mark
    /// makes it wait until they are gone (docs/benchmarks.md, 2026-11-25).
    pub fn for_many_streams(mut self, cpus: u32, length_set: bool) -> TestSpec {
        if !self.many_streams(cpus) || self.file.is_some() {
            return self;
        }
        if !length_set {
            self.length_bytes = MANY_STREAMS_LENGTH.get();
        }
        if self.rcvlowat_bytes.is_none() {
            self.rcvlowat_bytes = Some(0);
        }
        self
    }

    /// The receive low-water mark a receiver that owns its thread keeps: none when asked for 0, the
    /// number asked for, or else one sized from the receive buffer ([`RcvLowat::mark`]): the buffer
    /// the kernel autotunes, or the window set for the test (`window_bytes`), which the kernel keeps.
    pub fn rcvlowat(&self) -> RcvLowat {
        match self.rcvlowat_bytes {
            Some(0) => RcvLowat::Off,
            Some(n) => RcvLowat::Fixed(n),
            None => RcvLowat::Auto {
                max_bytes: self.length_bytes.saturating_mul(2),
            },
        }
    }

    /// How long the senders send: warm-up plus test time, for timed tests.
    pub fn send_time(&self) -> Option<Duration> {
        match self.end {
            EndCondition::Time(t) => Some(self.omit_s + t),
            _ => None,
        }
    }

    fn validate_udp(&self) -> Result<(), ConfigError> {
        if !(crate::udp::HEADER as u64 + 1..=MAX_UDP_LENGTH).contains(&self.length_bytes) {
            return Err(ConfigError::UdpLength(self.length_bytes));
        }
        if let Some(r) = self.rate_bps {
            if !(r.is_finite() && r > 0.0) {
                return Err(ConfigError::UdpRate(r));
            }
        }
        if !(1..=1024).contains(&self.burst) {
            return Err(ConfigError::Burst(self.burst));
        }
        match self.tcp_only_settings(true).first() {
            Some(what) => Err(ConfigError::TcpOnly(*what)),
            None => Ok(()),
        }
    }

    /// QUIC runs its own congestion control (one of [`QUIC_CONGESTION`]) over `connections` of
    /// the streams, and none of TCP's socket options.
    fn validate_quic(&self) -> Result<(), ConfigError> {
        if let Some(c) = &self.congestion {
            if !QUIC_CONGESTION.contains(&c.as_str()) {
                return Err(ConfigError::QuicCongestion(c.clone()));
            }
        }
        if self.tos.is_some() {
            return Err(ConfigError::TosOnQuic);
        }
        if !(1..=self.streams).contains(&self.connections) {
            return Err(ConfigError::Connections {
                connections: self.connections,
                streams: self.streams,
            });
        }
        match self.tcp_only_settings(false).first() {
            Some(what) => Err(ConfigError::NotOnQuic(*what)),
            None => Ok(()),
        }
    }

    /// The TCP-only settings this test asks for (the congestion control too when `congestion`).
    fn tcp_only_settings(&self, congestion: bool) -> Vec<TcpSetting> {
        let tcp_only = [
            (congestion && self.congestion.is_some(), TcpSetting::Congestion),
            (self.mss.is_some(), TcpSetting::Mss),
            (self.nodelay, TcpSetting::NoDelay),
            (self.fq_rate_bps.is_some(), TcpSetting::FqRate),
            (self.io == IoBackend::Uring, TcpSetting::IoUring),
            (self.tx == TxMode::Zerocopy, TcpSetting::TxZerocopy),
            (self.rx == RxMode::Discard, TcpSetting::RxDiscard),
            (self.rcvlowat_bytes.is_some(), TcpSetting::RcvLowat),
            (self.mptcp, TcpSetting::Mptcp),
            (self.tls.is_some(), TcpSetting::Tls),
        ];
        tcp_only.iter().filter(|(set, _)| *set).map(|(_, w)| *w).collect()
    }

    /// The transport's short name, as the archive lists it: "tcp", "udp", "quic", "mptcp", "tls"
    /// or "mptcp+tls".
    pub fn transport_name(&self) -> &'static str {
        match (self.transport, self.mptcp, self.tls.is_some()) {
            (Transport::Udp, _, _) => "udp",
            (Transport::Quic, _, _) => "quic",
            (Transport::Tcp, true, true) => "mptcp+tls",
            (Transport::Tcp, true, false) => "mptcp",
            (Transport::Tcp, false, true) => "tls",
            (Transport::Tcp, false, false) => "tcp",
        }
    }

    /// UDP: each stream's share of the total rate.
    pub fn udp_stream_rate_bps(&self) -> f64 {
        self.rate_bps.unwrap_or(DEFAULT_UDP_RATE_BPS) / f64::from(self.streams)
    }

    /// The fq pacing rate, as a rate.
    pub fn fq_rate(&self) -> Option<BitRate> {
        self.fq_rate_bps.map(BitRate)
    }

    /// The pace of `streams` of this test's streams together, bits per second: UDP's schedule
    /// (`rate_bps`, already a total), TCP frames' (`--isochronous`: their mean each stream), else
    /// each socket's pace times the streams. None: not paced.
    pub fn paced_bps(&self, streams: u32) -> Option<f64> {
        match self.transport {
            Transport::Udp => self.rate_bps,
            Transport::Tcp if self.frames.is_some() => self.frames.map(|f| f.mean_bps * f64::from(streams)),
            Transport::Tcp | Transport::Quic => self.fq_rate_bps.map(|r| r * f64::from(streams)),
        }
    }
}

/// A test whose every field passed [`TestSpec::validate`], with every default resolved: the only form
/// drivers, transports, campaigns and the server take. It cannot be changed in place; [`Test::changed`]
/// makes a new one and validates it again, so no code path holds a test that skipped the checks. It
/// serializes as its [`TestSpec`], and deserializing validates (an archived or received test that is
/// out of range is an error, not a test).
#[derive(Debug, Clone, PartialEq)]
pub struct Test(TestSpec);

impl Test {
    /// The checked configuration, read-only.
    pub fn spec(&self) -> &TestSpec {
        &self.0
    }

    /// The configuration, to build a changed one from.
    pub fn into_spec(self) -> TestSpec {
        self.0
    }

    /// A new test from this one with `change` applied, validated again.
    pub fn changed(&self, change: impl FnOnce(&mut TestSpec)) -> Result<Test, ConfigError> {
        let mut spec = self.0.clone();
        change(&mut spec);
        Test::try_from(spec)
    }

    /// This test with the run's payload key (every key is valid, so this cannot fail).
    pub fn with_payload_key(mut self, key: u64) -> Test {
        self.0.payload_key = key;
        self
    }
}

impl TryFrom<TestSpec> for Test {
    type Error = ConfigError;

    fn try_from(spec: TestSpec) -> Result<Test, ConfigError> {
        spec.validate()?;
        Ok(Test(spec))
    }
}

impl std::ops::Deref for Test {
    type Target = TestSpec;

    fn deref(&self) -> &TestSpec {
        &self.0
    }
}

impl Serialize for Test {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Test {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Test, D::Error> {
        Test::try_from(TestSpec::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl TestSpec {
    /// This configuration checked and frozen: the one way to a [`Test`].
    pub fn validated(self) -> Result<Test, ConfigError> {
        Test::try_from(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        TestSpec::default().validate().unwrap();
    }

    #[test]
    fn a_request_response_test_is_held_to_its_bounds_and_to_plain_timed_tcp() {
        let t = |request_bytes, response_bytes, in_flight| TestSpec {
            transactions: Some(TransactionSpec {
                request_bytes,
                response_bytes,
                in_flight,
                connect_each: false,
            }),
            ..TestSpec::default()
        };
        t(1, 1, 1).validate().unwrap();
        t(MAX_TRANSACTION_BYTES, MAX_TRANSACTION_BYTES, MAX_IN_FLIGHT)
            .validate()
            .unwrap();
        assert!(matches!(
            t(0, 1, 1).validate(),
            Err(ConfigError::TransactionSize {
                what: "request",
                bytes: 0
            })
        ));
        let over = MAX_TRANSACTION_BYTES + 1;
        assert!(matches!(
            t(1, over, 1).validate(),
            Err(ConfigError::TransactionSize { what: "response", .. })
        ));
        assert!(matches!(t(1, 1, 0).validate(), Err(ConfigError::InFlight(0))));
        assert!(matches!(
            t(1, 1, MAX_IN_FLIGHT + 1).validate(),
            Err(ConfigError::InFlight(_))
        ));
        let with = |f: fn(&mut TestSpec)| {
            let mut s = t(1, 1, 1);
            f(&mut s);
            s.validate()
        };
        // Over UDP (the echo service): 32 bytes (its header) and up, on one socket or -P.
        assert!(matches!(
            with(|s| s.transport = Transport::Udp),
            Err(ConfigError::UdpTransactions(
                crate::transactions::udp::UdpRrError::RequestSize(1)
            ))
        ));
        let mut udp = t(32, 32, 4);
        udp.transport = Transport::Udp;
        udp.length_bytes = 1200;
        assert!(udp.validate().is_ok(), "{:?}", udp.validate());
        udp.streams = 4;
        assert!(udp.validate().is_ok(), "{:?}", udp.validate());
        for (f, said) in [
            (
                (|s: &mut TestSpec| {
                    s.transport = Transport::Udp;
                    s.length_bytes = 1200;
                    s.transactions = Some(TransactionSpec {
                        request_bytes: 32,
                        response_bytes: 32,
                        in_flight: 1,
                        connect_each: true,
                    });
                }) as fn(&mut TestSpec),
                "a connection each over UDP or QUIC (--connect-rate is TCP's, with or without TLS)",
            ),
            (|s| s.direction = Direction::Reverse, "-R or --bidir"),
            (
                |s| s.end = EndCondition::Bytes(1000),
                "-n or -k (a request/response test is timed)",
            ),
            (|s| s.omit_s = Duration::from_secs(1), "a warm-up (-O)"),
            (|s| s.rate_bps = Some(1e6), "a rate (-b, --fq-rate)"),
            (
                |s| {
                    s.transport = Transport::Quic;
                    s.transactions = s.transactions.map(|t| TransactionSpec {
                        connect_each: true,
                        ..t
                    });
                },
                "a connection each over UDP or QUIC (--connect-rate is TCP's, with or without TLS)",
            ),
            (
                |s| {
                    s.transactions = Some(TransactionSpec {
                        in_flight: 2,
                        connect_each: true,
                        ..s.transactions.unwrap()
                    })
                },
                "--in-flight above 1 with a connection each (each carries one transaction)",
            ),
        ] {
            assert!(
                matches!(with(f), Err(ConfigError::TransactionsWith(w)) if w == said),
                "{said}"
            );
        }
        // A connection each: TCP, with or without TLS, any number of streams.
        let mut each = t(1, 1, 1);
        each.transactions = each.transactions.map(|t| TransactionSpec {
            connect_each: true,
            ..t
        });
        each.streams = 4;
        each.validate().unwrap();
        each.tls = Some(crate::tls::TlsSpec::default());
        each.validate().unwrap();
        // Responses are patterned past every stream number a test can have.
        assert!(TransactionSpec::response_stream(MAX_STREAMS * 2) > MAX_STREAMS * 2);
    }

    #[test]
    fn many_streams_per_cpu_get_small_writes_and_no_mark_unless_set() {
        let s = TestSpec {
            streams: 8,
            ..TestSpec::default()
        };
        assert!(s.many_streams(2) && !s.many_streams(4));
        let many = s.clone().for_many_streams(2, false);
        assert_eq!(many.length_bytes, MANY_STREAMS_LENGTH.get());
        assert_eq!(many.rcvlowat(), RcvLowat::Off);
        assert_eq!(s.clone().for_many_streams(4, false), s, "2 per CPU: unchanged");
        let set = TestSpec {
            rcvlowat_bytes: Some(64 << 10),
            ..s.clone()
        }
        .for_many_streams(2, true);
        assert_eq!(
            set.length_bytes,
            DEFAULT_LENGTH.get(),
            "a write size asked for stays"
        );
        assert_eq!(
            set.rcvlowat(),
            RcvLowat::Fixed(64 << 10),
            "a mark asked for stays"
        );
        let bidir = TestSpec {
            streams: 3,
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        assert!(bidir.many_streams(2), "6 streams on each end");
        let udp = TestSpec {
            streams: 8,
            transport: Transport::Udp,
            ..TestSpec::default()
        };
        assert!(!udp.many_streams(1));
    }

    #[test]
    fn the_receive_low_water_mark_follows_the_buffer_unless_a_mark_is_set() {
        let mut s = TestSpec::default();
        let auto = s.rcvlowat();
        assert_eq!(
            auto,
            RcvLowat::Auto {
                max_bytes: 2 * DEFAULT_LENGTH.get()
            }
        );
        assert_eq!(
            auto.mark(128 << 10),
            8 << 10,
            "a sixteenth of a fresh socket's buffer"
        );
        assert_eq!(auto.mark(16 << 20), 1 << 20);
        assert_eq!(auto.mark(64 << 20), 2 << 20, "at most two writes");
        s.length_bytes = 128 << 10;
        assert_eq!(s.rcvlowat().mark(64 << 20), 256 << 10);
        s.window_bytes = Some(512 << 10);
        // The kernel doubles a set window for its overhead: 1 MiB of buffer, a 64 KiB mark.
        assert_eq!(
            s.rcvlowat().mark(1 << 20),
            64 << 10,
            "a set window keeps a mark sized from it"
        );
        assert_eq!(RcvLowat::Off.mark(64 << 20), 0);
        s.rcvlowat_bytes = Some(100 << 10);
        assert_eq!(s.rcvlowat(), RcvLowat::Fixed(100 << 10));
        assert_eq!(s.rcvlowat().mark(4096), 100 << 10);
        s.rcvlowat_bytes = Some(0);
        assert_eq!(s.rcvlowat(), RcvLowat::Off, "0 turns it off");
        s.rcvlowat_bytes = Some(MAX_WINDOW + 1);
        assert_eq!(s.validate(), Err(ConfigError::RcvLowat(MAX_WINDOW + 1)));
        let udp = TestSpec {
            transport: Transport::Udp,
            length_bytes: 1400,
            rcvlowat_bytes: Some(1 << 20),
            ..TestSpec::default()
        };
        assert_eq!(udp.validate(), Err(ConfigError::TcpOnly(TcpSetting::RcvLowat)));
    }

    #[test]
    fn mptcp_is_tcp_only_and_refuses_what_its_sockets_refuse() {
        let mptcp = |f: fn(&mut TestSpec)| {
            let mut s = TestSpec {
                mptcp: true,
                ..TestSpec::default()
            };
            f(&mut s);
            s.validate()
        };
        assert_eq!(mptcp(|_| {}), Ok(()));
        assert_eq!(
            mptcp(|s| s.fq_rate_bps = Some(1e9)),
            Err(ConfigError::NotOnMptcp(TcpSetting::FqRate))
        );
        assert_eq!(
            mptcp(|s| s.tx = TxMode::Zerocopy),
            Err(ConfigError::NotOnMptcp(TcpSetting::TxZerocopy))
        );
        let udp = mptcp(|s| {
            s.transport = Transport::Udp;
            s.length_bytes = 1400;
        });
        assert_eq!(udp, Err(ConfigError::TcpOnly(TcpSetting::Mptcp)));
    }

    #[test]
    fn rejects_out_of_range() {
        let bad = |f: fn(&mut TestSpec)| {
            let mut s = TestSpec::default();
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert_eq!(bad(|s| s.streams = 0), ConfigError::Streams(0));
        assert_eq!(bad(|s| s.streams = 1025), ConfigError::Streams(1025));
        assert_eq!(bad(|s| s.length_bytes = 0), ConfigError::Length(0));
        assert!(matches!(
            bad(|s| s.end = EndCondition::Time(Duration::ZERO)),
            ConfigError::Time(_)
        ));
        assert!(matches!(
            bad(|s| {
                s.streams = 4;
                s.end = EndCondition::Bytes(3)
            }),
            ConfigError::ByteCount { .. }
        ));
        assert!(matches!(
            bad(|s| s.window_bytes = Some(u64::MAX)),
            ConfigError::Window(_)
        ));
        assert!(matches!(
            bad(|s| s.congestion = Some("../x".into())),
            ConfigError::Congestion(_)
        ));
        assert!(matches!(
            bad(|s| s.interval_s = Duration::ZERO),
            ConfigError::Interval(_)
        ));
    }

    #[test]
    fn a_test_is_validated_on_every_way_in() {
        let t = TestSpec::default().validated().unwrap();
        assert_eq!(t.changed(|s| s.streams = 0), Err(ConfigError::Streams(0)));
        assert_eq!(t.changed(|s| s.streams = 8).unwrap().streams, 8);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, serde_json::to_string(t.spec()).unwrap());
        assert_eq!(serde_json::from_str::<Test>(&json).unwrap(), t);
        let bad = json.replace("\"streams\":1", "\"streams\":0");
        assert_ne!(bad, json);
        let err = serde_json::from_str::<Test>(&bad).unwrap_err().to_string();
        assert!(err.contains("streams must be 1..=1024, got 0"), "{err}");
    }

    #[test]
    fn budgets_split_exactly() {
        for streams in [1u32, 3, 7, 64] {
            for total in [streams as u64, 1000, 1_000_003, 10 << 30] {
                let s = TestSpec {
                    streams,
                    end: EndCondition::Bytes(total),
                    ..TestSpec::default()
                };
                let sum: u64 = (0..streams).map(|i| s.stream_budget(i).unwrap()).sum();
                assert_eq!(sum, total);
            }
        }
        let s = TestSpec {
            streams: 3,
            length_bytes: 100,
            end: EndCondition::Blocks(10),
            ..TestSpec::default()
        };
        let v: Vec<u64> = (0..3).map(|i| s.stream_budget(i).unwrap()).collect();
        assert_eq!(v, vec![400, 300, 300]);
    }

    #[test]
    fn bidir_has_two_flows() {
        let s = TestSpec {
            streams: 2,
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        assert_eq!(s.total_streams(), 4);
        assert_eq!(s.flow_of(1), Flow::ClientToServer);
        assert_eq!(s.flow_of(2), Flow::ServerToClient);
    }
}
