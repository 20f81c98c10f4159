//! What a client run is asked (`ClientOptions`, with the control connection's keepalive) and what it
//! reports while it runs (`ClientEvent`).

use super::latency::LatencyOptions;
use landspeed_core::config::{Family, Flow, Test};
use landspeed_core::result::IntervalResult;
use landspeed_core::result::RunResult;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

/// Everything a client run needs: where, the validated test, and how this end behaves.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The server's name or address.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// The validated test (`TestSpec::validated`).
    pub spec: Test,
    /// Worker threads on this end (None: one per CPU, at most one per stream).
    pub threads: Option<usize>,
    /// CPUs to pin this end's workers to.
    pub cpus: Option<Vec<usize>>,
    /// The local address to connect from.
    pub bind: Option<IpAddr>,
    /// The data connections' first local port (`--cport`): stream N binds it plus N.
    pub cport: Option<u16>,
    /// The network interface every connection sends from (`--bind-dev`, SO_BINDTODEVICE).
    pub bind_device: Option<String>,
    /// The IPv6 flow label of every TCP data connection (`--flow-label`, iperf3's `-L`; 1-0xfffff).
    pub flow_label: Option<u32>,
    /// iperf3's `--get-server-output`: ask an iperf3 server for its own output of the test.
    pub iperf3_server_output: bool,
    /// iperf3's `-T`: the title sent in the parameters (an iperf3 server puts it in its output).
    pub iperf3_title: Option<String>,
    /// iperf3's `--udp-counters-64bit`: 64-bit sequence numbers in iperf3's UDP header, asked of the
    /// server in the parameters.
    pub iperf3_udp64: bool,
    /// TCP keepalive on the control connection (iperf3's `--cntl-ka`).
    pub control_keepalive: Option<Keepalive>,
    /// iperf3's `--extra-data`: a string sent in the parameters (an iperf3 server puts it in its
    /// document).
    pub iperf3_extra_data: Option<String>,
    /// IPv4 or IPv6 only, when the name has both.
    pub family: Option<Family>,
    /// How long each connect may take.
    pub connect_timeout: Duration,
    /// How long each control message may take (each handshake step).
    pub control_timeout: Duration,
    /// A stream that moves nothing for this long fails.
    pub idle_timeout: Duration,
    /// Pin the server's TLS certificate to this fingerprint instead of the one it announces
    /// (`--tls-pin`).
    pub tls_pin: Option<landspeed_core::tls::CertFingerprint>,
    /// iperf 2's `--trip-times`: the clocks are synchronized, so one-way figures mean something:
    /// with `--isochronous` the server reads each frame's latency; over TCP (`run --iperf2`) each
    /// burst is stamped and timed where it arrives.
    pub trip_times: bool,
    /// iperf 2's `--txstart-time` (a TCP test against an iperf 2 server): the streams connect and
    /// send their headers now, their data from this wall-clock time on (Unix seconds); the
    /// server's clock starts there too.
    pub start_at_unix_s: Option<f64>,
    /// iperf 2's `--txdelay-time` (a TCP test of this host's streams against an iperf 2 server):
    /// the streams connect and send their headers, then hold back this long before their data;
    /// the server is not told (its clock runs from the connection).
    pub hold_back: Option<std::time::Duration>,
    /// iperf 2's `--connect-retries N` (its TCP data connections): a connection refused, unreachable
    /// or timed out is tried again up to N more times, 200 ms apart, as iperf 2.1.8 tries.
    pub connect_retries: u32,
    /// iperf 2's `--tcp-write-prefetch` (a TCP test against an iperf 2 server): each sending socket
    /// holds at most this many bytes unsent (TCP_NOTSENT_LOWAT); with `-R` or `--bidir` the header
    /// asks the server to hold its own to it too.
    pub write_prefetch: Option<u32>,
    /// iperf 2's `--fq-rate` as its header tells the server (a TCP test against an iperf 2
    /// server): `FQRATESET` and this pace, bytes a second, which paces the server's sending sockets
    /// too (`-R`, `--bidir`); this end's own are paced by the spec's `fq_rate_bps`.
    pub fq_rate_header: Option<u64>,
    /// iperf 2's `--tcp-quickack` (a TCP test against an iperf 2 server): each receiving socket
    /// acknowledges every read at once (TCP_QUICKACK); where the server receives, the header asks
    /// it to do the same.
    pub quickack: bool,
    /// iperf 2's `-X` (a TCP test against an iperf 2 server): the header asks for the server's
    /// header ack (`V2PEERDETECT`), which each stream reads before its data.
    pub peer_detect: bool,
    /// iperf 2's `--no-udp-fin` (a UDP test against an iperf 2 server): the header asks for no
    /// report at the end; each stream sends one end and waits for nothing (the server's side of
    /// the result stays unknown).
    pub no_udp_fin: bool,
    /// TCP receivers count their reads by size in eight bins of an eighth of this (the `iperf`
    /// drop-in's `-e`: iperf 2's `Reads=Dist`); None: not counted.
    pub read_bins: Option<usize>,
    /// iperf 2's `-d` or `-r` (`run --iperf2 --dualtest|--tradeoff`): the server's data comes on
    /// connections it opens back to this client, which listens for them.
    pub connect_back: Option<ConnectBackAsk>,
    /// The key the conversation is authenticated with (`--auth`): a server that cannot prove it
    /// holds it is refused ...
    pub auth: Option<landspeed_proto::Key>,
    /// ... unless it does not ask for one and the key is to be used only when asked (a server's
    /// ordered tests, `serve --control-key`).
    pub auth_only_if_asked: bool,
    /// iperf3's own authentication for an iperf3 server (`--username`, `--rsa-public-key-path`): the
    /// token goes in the parameters.
    pub iperf3_auth: Option<std::sync::Arc<landspeed_iperf3::auth::ClientAuth>>,
    /// Echo probes before and during the test (`--latency`).
    pub latency: Option<LatencyOptions>,
    /// Send `start` at this instant (this host's clock) rather than as soon as the streams are ready:
    /// how a controller starts tests on many hosts together.
    pub start_at: Option<SystemTime>,
    /// Disk-to-disk: send this file (upload) ...
    pub send_file: Option<std::path::PathBuf>,
    /// ... or receive into this file or directory (download, with -R).
    pub recv_file: Option<std::path::PathBuf>,
    /// The file's name on the server (default: the local file's name).
    pub remote_file: Option<String>,
    /// A UDP test's datagram size was not given: take it from the path (the control connection's
    /// MSS, [`landspeed_core::udp::length_for_path`]) instead of the spec's.
    pub udp_length_from_path: bool,
}

impl ClientOptions {
    /// Options for `spec` against `host:port`, everything else at its default.
    pub fn new(host: impl Into<String>, port: u16, spec: Test) -> Self {
        ClientOptions {
            host: host.into(),
            port,
            spec,
            threads: None,
            cpus: None,
            bind: None,
            cport: None,
            bind_device: None,
            flow_label: None,
            iperf3_server_output: false,
            iperf3_title: None,
            iperf3_udp64: false,
            control_keepalive: None,
            iperf3_extra_data: None,
            family: None,
            connect_timeout: Duration::from_secs(5),
            control_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            auth: None,
            auth_only_if_asked: false,
            iperf3_auth: None,
            tls_pin: None,
            trip_times: false,
            start_at_unix_s: None,
            hold_back: None,
            connect_retries: 0,
            write_prefetch: None,
            fq_rate_header: None,
            quickack: false,
            peer_detect: false,
            no_udp_fin: false,
            read_bins: None,
            connect_back: None,
            latency: None,
            start_at: None,
            send_file: None,
            recv_file: None,
            remote_file: None,
            udp_length_from_path: false,
        }
    }
}

/// A test whose server-to-client half comes on connections the server opens back (iperf 2's `-d`
/// and `-r`, against `iperf -s` or `landspeed serve --connect-back`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectBackAsk {
    /// Both halves at once (`-d`: one result, both ways) or one after the other (`-r`: the
    /// client's half reported in a [`ClientEvent::Part`], the server's returned).
    pub dual: landspeed_iperf2::Dual,
    /// The port this client listens on for the server's connections (iperf 2's `-L`); 0: any free
    /// one, which the header names.
    pub listen_port: u16,
}

/// Progress reported while a test runs.
#[derive(Debug, Clone)]
pub enum ClientEvent {
    /// The control connection is up.
    Connected {
        /// This end's address.
        local: SocketAddr,
        /// The server's address.
        remote: SocketAddr,
    },
    /// All streams are connected and the test is starting.
    Started {
        /// Data streams in all.
        streams: u32,
        /// What the user should know before the figures (a window cut by the kernel, ...).
        warnings: Vec<String>,
    },
    /// An interval closed on the receiving end of `flow`.
    Interval {
        /// The direction.
        flow: Flow,
        /// Its figures over the interval.
        interval: IntervalResult,
    },
    /// An interval of a request/response test closed.
    Transactions {
        /// Its transactions and their latency.
        interval: landspeed_core::transactions::TransactionInterval,
        /// The connection's TCP state when it closed (a one-connection test's: the bounceback's),
        /// for the drop-in's retries and cwnd/RTT columns.
        tcp: Option<Box<landspeed_core::endpoint::TcpStats>>,
        /// Whose: None, the test's (every connection's together); with more than one connection
        /// (a bounceback's `-P`), also each connection's own interval first, Some(its stream).
        connection: Option<u32>,
    },
    /// The test's own connections are up (iperf 2's TCP tests): each one's ends, this end's
    /// address first, in stream order.
    StreamsConnected {
        /// (this end, the server's end) of each.
        connections: Vec<(SocketAddr, SocketAddr)>,
        /// How each was made, in the same order (empty where not kept).
        facts: Vec<landspeed_core::endpoint::ConnectFacts>,
    },
    /// The server's connections back (iperf 2's `-d`, `-r`) are up: each one's ends, this end's
    /// address first, in the order they came.
    BackConnected {
        /// (this end, the server's end) of each.
        connections: Vec<(SocketAddr, SocketAddr)>,
        /// Each one's descriptor and interface, in the same order (empty where not kept; an
        /// accepted connection has no connect time or first TCP_INFO of its own making).
        facts: Vec<landspeed_core::endpoint::ConnectFacts>,
    },
    /// A test in two parts (iperf 2's `-r`) finished its first: that part's whole result; the
    /// call returns the second's.
    Part {
        /// The first part's result.
        result: Box<RunResult>,
    },
}

/// TCP keepalive probes on the control connection: after `idle` without traffic, every `interval`,
/// `count` unanswered ones ending it; each None is the system's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    /// Seconds without traffic before the first probe (TCP_KEEPIDLE).
    pub idle_s: Option<u32>,
    /// Seconds between probes (TCP_KEEPINTVL).
    pub interval_s: Option<u32>,
    /// Unanswered probes that end the connection (TCP_KEEPCNT).
    pub count: Option<u32>,
}
