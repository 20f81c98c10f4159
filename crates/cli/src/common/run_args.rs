//! `run`'s arguments and the test options every test-running command shares (`run`, `sweep` cells,
//! the exporter's and pScheduler's argument lists, the iperf3 drop-in's), and what they say as a
//! [`TestIntent`], which `landspeed_core::intent` lowers into the test. Value parsers turn sizes, rates and durations into unit types so a bad value is a
//! usage error (exit 2) naming the flag.

use crate::common::values::{self, CpuList, IoArg, RxArg, TxArg};
use clap::Args;
use landspeed_core::config::{Direction, EndCondition, RxMode, TransactionSpec, Transport};
use landspeed_core::intent::{Rate, TestIntent};
use landspeed_core::units::{BitRate, Bytes};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Server to test against (name or address).
    pub host: String,
    #[command(flatten)]
    pub test: TestArgs,
    /// Print the whole result as one JSON document at the end.
    #[arg(long, conflicts_with = "json_stream")]
    pub json: bool,
    /// Print JSON Lines events while the test runs (start, interval, end, error).
    #[arg(long)]
    pub json_stream: bool,
    /// The server is iperf3 (`iperf3 -s`): speak iperf3's protocol. Without this flag landspeed switches
    /// by itself when the server answers like iperf3.
    #[arg(long)]
    pub iperf3: bool,
    /// The server is iperf 2 (`iperf -s`, 2.1.x): speak iperf 2's protocol (TCP: -P, -t or -n, -l,
    /// -w, -R, --bidir as its --full-duplex; UDP, -u: -P, -t or -n, -l, -b, its server's report of
    /// loss, out of order and jitter; -u -R, one stream the server sends, counted here as iperf 2's
    /// client counts it). Over TCP iperf 2 sends the client no figures, so the server's side is
    /// inferred from this end's; nothing is verified.
    #[arg(long, conflicts_with_all = ["iperf3", "quic_perf", "ndt7", "tls", "mptcp", "latency", "from", "send_file", "recv_file"])]
    pub iperf2: bool,
    /// The server speaks the QUIC performance protocol (ALPN "perf": quinn's perf, msquic's
    /// secnetperf, quic-go's perf, or landspeed serve): -P requests, -R downloads, -n or -t, -p its
    /// UDP port (often 4433). Its payload is its own, so nothing is verified; --tls-pin checks its
    /// certificate.
    #[arg(long, conflicts_with_all = ["iperf3", "udp", "tls", "mptcp", "latency", "measure_path", "from", "send_file", "recv_file"])]
    pub quic_perf: bool,
    /// --quic-perf, --ndt7 over wss: do not check the server's certificate (a foreign server
    /// announces no fingerprint); the result says it was not checked. Without it, --tls-pin is
    /// required.
    #[arg(long, conflicts_with = "tls_pin")]
    pub insecure: bool,
    /// Speak ndt7 (M-Lab's speed test) to HOST, given as wss://NAME:PORT or ws://NAME:PORT (a bare
    /// name is wss on -p's port): one subtest, the upload, or the download with -R; the server ends
    /// it at 10 s. Against `landspeed serve --ndt7` the payload is landspeed's and every byte is
    /// checked; against any other ndt7 server the bytes are counted and the result says they were
    /// not verified. wss needs --tls-pin SHA256 (serve prints it) or --insecure.
    #[arg(long, conflicts_with_all = ["iperf3", "quic_perf", "udp", "tls", "mptcp", "latency", "measure_path", "from", "send_file", "recv_file", "bidir"])]
    pub ndt7: bool,
    /// A request/response test in iperf 2's bounceback protocol, against `iperf -s` (2.1.x) or
    /// `landspeed serve`: every --bounceback-period a burst of N requests (10 when N is not given)
    /// of -l bytes (100 by default, 64 at least), each answered before the next. Reports
    /// transactions per second and the latency distribution (min, p50, p90, p99, p99.9, max, a
    /// histogram); every answer is checked against its request. Example:
    /// `landspeed run HOST --bounceback --bounceback-period 0 -t 10` (back to back, the connection's
    /// transaction rate).
    #[arg(long, value_name = "N", num_args = 0..=1, require_equals = true, default_missing_value = "10",
          conflicts_with_all = ["iperf3", "quic_perf", "ndt7", "udp", "tls", "mptcp", "latency", "from", "send_file", "recv_file", "auth"])]
    pub bounceback: Option<u32>,
    /// --bounceback: the time from one burst's start to the next (default 1s); 0 sends each request
    /// as soon as the last is answered.
    #[arg(long, value_name = "DUR", value_parser = values::duration, requires = "bounceback")]
    pub bounceback_period: Option<Duration>,
    /// --bounceback: ask the server to wait this long before each answer (counted in the latency, as
    /// iperf 2 counts it; at most 10s).
    #[arg(long, value_name = "DUR", value_parser = values::duration, requires = "bounceback")]
    pub bounceback_hold: Option<Duration>,
    /// --bounceback: do not ask either end for immediate ACKs (TCP_QUICKACK, asked by default as
    /// iperf 2 asks).
    #[arg(long, requires = "bounceback")]
    pub bounceback_no_quickack: bool,
    /// With --bounceback, --isochronous or a TCP test with --iperf2: the two clocks are
    /// synchronized (NTP, PTP, or one host). --bounceback reports each way's delay from the
    /// server's timestamps; --isochronous tells iperf 2's server so, which then prints each
    /// frame's latency; a TCP test sends (and receives) its data in bursts of one write each,
    /// stamped when written, and each burst's one-way latency is timed where it arrives (iperf
    /// 2's --trip-times).
    #[arg(long)]
    pub trip_times: bool,
    /// Start sending at this instant, Unix seconds (`1796600000.5`) or a delay from now (`+5s`), at
    /// most an hour ahead: tests from many hosts together, each host's clock synchronized (NTP,
    /// PTP). The connections are made first (a landspeed test's a few seconds before), the data
    /// flows from the instant, and the result counts from it. With --iperf2 it is iperf 2's
    /// --txstart-time (TCP, or UDP this host sends): the header names the instant and the server's
    /// clock starts there too. Not with iperf3's protocol, which has no such start. Example:
    /// `landspeed run HOST --start-at +10s -t 5`.
    #[arg(long, value_name = "UNIX_SECONDS|+DUR", value_parser = values::start_instant,
          conflicts_with_all = ["iperf3", "quic_perf", "ndt7", "from", "bounceback", "connect_rate", "connect_only", "under_load"])]
    pub start_at: Option<f64>,
    /// With --iperf2: iperf 2's -d (dual test): both directions at once, the server's on
    /// connections it opens back to this host, which listens for them (--listen-port; with -u a UDP
    /// socket there, the server's -P streams told apart by their ports); one result both ways. Against `iperf -s` or `landspeed serve --connect-back`; a firewall or NAT in the
    /// way of connections to this host stops it (the client says so after 10 s).
    #[arg(long, requires = "iperf2", conflicts_with_all = ["reverse", "bidir", "tradeoff", "bounceback", "isochronous", "connect_rate", "rr"])]
    pub dualtest: bool,
    /// With --iperf2: iperf 2's -r (tradeoff): this host's streams first, then the server's on
    /// connections it opens back to this host; a result for each (both saved; with --json, two
    /// documents).
    #[arg(long, requires = "iperf2", conflicts_with_all = ["reverse", "bidir", "bounceback", "isochronous", "connect_rate", "rr"])]
    pub tradeoff: bool,
    /// With --dualtest or --tradeoff: the port this host listens on for the server's connections
    /// back (iperf 2's -L); by default any free port, which the test's header names.
    #[arg(long, value_name = "PORT")]
    pub listen_port: Option<u16>,
    /// Video-like traffic (iperf 2's --isochronous): FPS frames a second, each of a size drawn from a
    /// log-normal distribution of mean MEAN and standard deviation STDDEV (rates: k, m, g bits, K,
    /// M, G bytes; 60:20m,0 when no value is given), sent at its slot: with -u back to back in
    /// datagrams of -l bytes, over TCP as one burst in writes of -l bytes; a sender late for a slot
    /// skips the frame. In iperf 2's protocol (--iperf2), against `iperf -s` or `landspeed serve`,
    /// whose log counts each UDP frame's arrival, loss and latency (over TCP, with --trip-times,
    /// each frame's latency). Examples: `landspeed run HOST --iperf2 -u --isochronous=60:20m,5m -t
    /// 10`, `landspeed run HOST --iperf2 --isochronous=30:8m,1m --trip-times`.
    #[arg(long, value_name = "FPS:MEAN,STDDEV", num_args = 0..=1, require_equals = true,
          default_missing_value = "", value_parser = values::frames)]
    pub isochronous: Option<landspeed_core::frames::FrameSpec>,
    /// Connection rate (netperf's TCP_CRR): back to back until -t (on each of -P threads), each
    /// connection opened, one request of -l bytes answered and checked, closed. Reports connections per second, the
    /// handshake times, and each transaction's (from connect to the answer's last byte). In iperf
    /// 2's bounceback protocol (against `landspeed serve` or `iperf -s`); with --tls or --auth in
    /// landspeed's (against `landspeed serve`), each connection a data connection of the test, its
    /// TLS handshake timed apart. Examples: `landspeed run HOST --connect-rate -t 5`, `landspeed run
    /// HOST --connect-rate --tls -t 5`.
    #[arg(long, conflicts_with_all = ["bounceback", "connect_only", "iperf3", "ndt7", "udp", "mptcp", "latency", "from", "send_file", "recv_file"])]
    pub connect_rate: bool,
    /// Connection rate without a request (iperf 2's --connect-only): connect and close, back to back
    /// until -t, against any TCP server; reports connections per second and the handshake times.
    #[arg(long, conflicts_with_all = ["bounceback", "iperf3", "quic_perf", "ndt7", "udp", "tls", "mptcp", "latency", "from", "send_file", "recv_file", "auth"])]
    pub connect_only: bool,
    /// Run the request/response test (--rr, --bounceback, --connect-rate, --connect-only) under a
    /// bulk load to the same server: N TCP connections (1 by default) sending up (client to
    /// server), down, or both (bidir, the default, as iperf 2's --bounceback-congest), started
    /// --load-settle before the first transaction and stopped after the last; the result gives
    /// the load's rates beside the latency. Speaks landspeed's protocol, or iperf 2's when the
    /// server is `iperf -s` or --iperf2 is given. Example: `landspeed run HOST --rr -t 10
    /// --under-load down,4`.
    #[arg(long, value_name = "up|down|bidir[,N]", num_args = 0..=1, default_missing_value = "bidir",
          value_parser = values::working_load)]
    pub under_load: Option<(landspeed_core::config::Direction, u32)>,
    /// --under-load: how long the load runs before the first transaction (default 1s).
    #[arg(long, value_name = "DUR", value_parser = values::duration, requires = "under_load")]
    pub load_settle: Option<Duration>,
    /// Authenticate to a server that requires it (`serve --auth-keys`): the key named NAME, read from
    /// KEYFILE (a key file like the server's, or one line holding the secret alone). A client with a
    /// key never falls back to iperf3's protocol, which cannot carry it.
    #[arg(long, value_name = "NAME:KEYFILE", value_parser = values::auth,
          conflicts_with_all = ["iperf3", "iperf2", "quic_perf", "ndt7"])]
    pub auth: Option<(String, std::path::PathBuf)>,
    /// Measure RTT with UDP echo probes before the transfer (idle) and during it (loaded): the queueing
    /// delay the test causes, RFC 6349's Buffer Delay %, and the RTT in every interval.
    #[arg(long)]
    pub latency: bool,
    /// Do not save the result in the archive.
    #[arg(long)]
    pub no_save: bool,
    /// A label stored with the result, to find it again (`history --tag`).
    #[arg(long, value_name = "TAG")]
    pub tag: Option<String>,
    #[command(flatten)]
    pub db: crate::common::store::DbArg,
    /// Measure the path first (RTT, route, path MTU, capacity, as `landspeed path` does, briefly) and
    /// put it in the result.
    #[arg(long = "path", conflicts_with = "iperf3")]
    pub measure_path: bool,
    /// Third-party test: ask the landspeed server on FROM (which must allow it: serve --allow-control)
    /// to run this test from there to HOST, and report its result. --auth is the key FROM requires.
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with_all = ["iperf3", "latency", "measure_path"])]
    pub from: Option<String>,
    /// Disk-to-disk: send this file to the server (stored in its `serve --files` directory), by
    /// sendfile; both ends hash it and report disk and network rates apart. A directory: each of its
    /// regular files in turn, one test each.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["iperf3", "recv_file", "from"])]
    pub send_file: Option<std::path::PathBuf>,
    /// Disk-to-disk, with -R: receive the server's file into PATH (a file, or a directory to keep the
    /// name), by splice; the copy is flushed, read back and hashed.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["iperf3", "from"])]
    pub recv_file: Option<std::path::PathBuf>,
    /// The file's name in the server's --files directory (default: the local file's name).
    #[arg(long, value_name = "NAME")]
    pub remote_file: Option<String>,
    /// --tls, --quic, --quic-perf: trust only the certificate with this SHA-256 fingerprint (64 hex digits, colons allowed;
    /// the server logs it at start) instead of the one the server announces on the control
    /// connection: protects the data connections even when the control connection is intercepted.
    #[arg(long, value_name = "SHA256")]
    pub tls_pin: Option<landspeed_core::tls::CertFingerprint>,
    /// Echo probes per second with --latency.
    #[arg(long, value_name = "N", default_value_t = 20.0, requires = "latency")]
    pub latency_rate: f64,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// Server port.
    #[arg(short, long, default_value_t = 5201)]
    pub port: u16,
    /// Parallel streams per direction (1..=1024): TCP connections, or QUIC streams with --quic.
    #[arg(short = 'P', long = "streams", default_value_t = 1, value_name = "N")]
    pub streams: u32,
    /// Worker threads on this end (default: one per stream up to 128 streams, else one per CPU).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// CPUs to pin this end's workers to, round-robin (e.g. 0,2-3).
    #[arg(long, value_name = "LIST", value_parser = values::cpu_list)]
    pub cpus: Option<CpuList>,
    /// Worker threads on the server.
    #[arg(long, value_name = "N")]
    pub server_threads: Option<u32>,
    /// CPUs to pin the server's workers to.
    #[arg(long, value_name = "LIST", value_parser = values::cpu_list)]
    pub server_cpus: Option<CpuList>,
    /// Bytes per write/read call (K/M/G = 1024). Default 1M (UDP: the path's size, see -u); 128K
    /// when the streams outnumber twice this host's CPUs.
    #[arg(short, long, value_name = "SIZE", value_parser = values::bytes)]
    pub length: Option<Bytes>,
    /// Test time after the warm-up (default 10s).
    #[arg(short, long, value_name = "DUR", value_parser = values::duration, conflicts_with_all = ["bytes", "blocks"])]
    pub time: Option<Duration>,
    /// Send exactly this many bytes per direction, split over the streams.
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = values::bytes, conflicts_with = "blocks")]
    pub bytes: Option<Bytes>,
    /// Send exactly this many buffers of --length per direction.
    #[arg(short = 'k', long, value_name = "N")]
    pub blocks: Option<u64>,
    /// Socket buffer (SO_SNDBUF and SO_RCVBUF) on both ends.
    #[arg(short, long, value_name = "SIZE", value_parser = values::bytes)]
    pub window: Option<Bytes>,
    /// Receive low-water mark (SO_RCVLOWAT) on each receiver with a thread of its own: a receive
    /// wakes when this much has arrived (or 10 ms have passed). Default: two writes, at most a
    /// sixteenth of the receive buffer (of -w, when set); none when the streams outnumber twice this
    /// host's CPUs; 0 turns it off.
    #[arg(long, value_name = "SIZE", value_parser = values::bytes)]
    pub rcvlowat: Option<Bytes>,
    /// TCP congestion control algorithm (e.g. cubic, bbr, reno).
    #[arg(short = 'C', long, value_name = "ALG")]
    pub congestion: Option<String>,
    /// TCP maximum segment size.
    #[arg(short = 'M', long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm (TCP_NODELAY).
    #[arg(short = 'N', long)]
    pub nodelay: bool,
    /// Pace each sending socket at this rate, per stream as iperf3's --fq-rate (SO_MAX_PACING_RATE;
    /// k/M/G = 1000 bit/s); -b gives the total of all streams instead.
    #[arg(long, value_name = "RATE", value_parser = values::rate)]
    pub fq_rate: Option<BitRate>,
    /// Mark every data packet, both ways, with this IP type-of-service byte (IPv4 TOS, IPv6 traffic
    /// class; iperf3's -S): 0-255 as decimal, 0x hex or 0 octal, e.g. --tos 0x20 (CS1).
    #[arg(long, value_name = "BYTE", value_parser = values::tos, conflicts_with = "dscp")]
    pub tos: Option<u8>,
    /// The same by DiffServ code point: 0-63, or a name (af11-af43, cs0-cs7, ef, va, lowdelay,
    /// throughput, reliability), e.g. --dscp ef.
    #[arg(long, value_name = "DSCP", value_parser = values::dscp)]
    pub dscp: Option<u8>,
    /// UDP over IPv4: send every datagram with Don't Fragment set, at both ends (iperf3's
    /// --dont-fragment): a datagram over the path MTU fails instead of being split.
    #[arg(long)]
    pub dont_fragment: bool,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    pub ipv6: bool,
    /// Local address to send from (both the control and the data connections), or a name of this
    /// host that resolves to it.
    #[arg(short = 'B', long, value_name = "ADDR", value_parser = values::local_name)]
    pub bind: Option<String>,
    /// Send from this network interface (SO_BINDTODEVICE), the control and the data connections
    /// alike (iperf3's --bind-dev), e.g. --bind-dev eth1.
    #[arg(long, value_name = "DEV")]
    pub bind_dev: Option<String>,
    /// The IPv6 flow label of every TCP data connection (iperf3's -L): 1 to 0xfffff, decimal or 0x
    /// hex; the test must run over IPv6.
    #[arg(long, value_name = "N", value_parser = values::flow_label)]
    pub flow_label: Option<u32>,
    /// Bind the data connections to local ports PORT, PORT+1, ... (stream N on PORT+N; the control
    /// connection keeps an ephemeral port): for a firewall that opens those ports, or to take one
    /// kind of connection down on an emulated path (`wan change --ports`, `--except-ports`).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub cport: Option<u16>,
    /// Reverse: the server sends, this end receives.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once, reported separately.
    #[arg(long)]
    pub bidir: bool,
    /// Interval between live report lines (0 turns them off; samples are still kept every second).
    #[arg(short, long, value_name = "DUR", value_parser = values::duration, default_value = "1s")]
    pub interval: Duration,
    /// Show every stream in the live lines, not just the sum.
    #[arg(long)]
    pub per_stream: bool,
    /// Warm-up left out of the results.
    #[arg(short = 'O', long, value_name = "DUR", value_parser = values::duration)]
    pub omit: Option<Duration>,
    /// Do not check received bytes against the expected payload (the report says nothing was verified).
    #[arg(long)]
    pub no_verify: bool,
    /// How receivers take data off the socket: copy (needed to verify) or discard (MSG_TRUNC, no copy;
    /// only with --no-verify). Default: copy, or discard with --no-verify.
    #[arg(long, value_name = "MODE", value_enum)]
    pub rx: Option<RxArg>,
    /// How senders hand data to the kernel: copy (send) or zerocopy (MSG_ZEROCOPY, for real NICs; the
    /// kernel copies anyway on loopback, and the report says how often).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = TxArg::Copy)]
    pub tx: TxArg,
    /// Event loop for the data sockets on both ends: epoll (one system call per buffer) or uring
    /// (io_uring, --queue-depth operations queued per stream).
    #[arg(long, value_name = "BACKEND", value_enum, default_value_t = IoArg::Epoll)]
    pub io: IoArg,
    /// io_uring: operations kept queued per stream, like NTttcp's -a (1..=64; default 4 with --io uring).
    #[arg(short = 'a', long, value_name = "N")]
    pub queue_depth: Option<u32>,
    /// Seconds to wait for a connection.
    #[arg(long, value_name = "DUR", value_parser = values::duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// Give up when a data stream moves nothing for this long (a path that went down and stayed
    /// down): both ends end the test with what they measured, exit 1. A shorter outage is measured
    /// and reported as a stall.
    #[arg(long, value_name = "DUR", value_parser = values::duration, default_value = "30s")]
    pub idle_timeout: Duration,
    /// UDP instead of TCP: paced datagrams (-b), loss, jitter, out-of-order and duplicates reported,
    /// payload verified. -l is the datagram size (default: the largest the path carries whole, from
    /// the control connection's MSS and route MTU, at most a thousandth of a second of a stream's
    /// rate and at least 1448: 1448 on Ethernet, up to 65507 on loopback).
    #[arg(short = 'u', long)]
    pub udp: bool,
    /// Target rate of ALL streams together, TCP and UDP alike (iperf3's -b is per stream), e.g.
    /// 500M. UDP: the senders' schedule (default 1M). TCP: each stream paced at its share: by the
    /// kernel on Linux (SO_MAX_PACING_RATE, as --fq-rate RATE/N), by landspeed's own cap on each
    /// stream's writes and reads on Windows.
    #[arg(short = 'b', long = "rate", value_name = "RATE", value_parser = values::rate,
          conflicts_with_all = ["fq_rate", "quic"])]
    pub rate: Option<BitRate>,
    /// UDP: datagrams a sender that fell behind may send back to back.
    #[arg(long, value_name = "N", default_value_t = 16, requires = "udp")]
    pub burst: u32,
    /// Multipath TCP (iperf3's -m): the data connections are MPTCP, their subflows opened by the
    /// kernel's path manager (`ip mptcp endpoint`, `ip mptcp limits`); each stream's subflows and
    /// bytes per subflow are reported, and a fallback to plain TCP is said.
    #[arg(short = 'm', long, conflicts_with = "udp")]
    pub mptcp: bool,
    /// TLS 1.3 over every data connection (rustls' handshake, records of up to 16 KiB sealed and
    /// opened in user space by landspeed's own record layer):
    /// the report says the suite and the records, and its CPU per byte includes the cryptography.
    /// The server presents a self-signed certificate (or its --cert) and the client pins the
    /// fingerprint the server announces on the control connection (or --tls-pin).
    #[arg(long, conflicts_with = "udp")]
    pub tls: bool,
    /// --tls: the cipher suite, aes128 (AES-128-GCM), aes256 (AES-256-GCM) or chacha20
    /// (ChaCha20-Poly1305).
    #[arg(long, value_name = "SUITE", default_value = "aes128", requires = "tls")]
    pub tls_cipher: landspeed_core::tls::TlsCipher,
    /// --tls: hand the record layer to the kernel after the handshake (kernel TLS: Linux's `tls`
    /// module; a NIC with TLS offload then takes the cryptography); both ends must have it, and a
    /// host without it refuses, naming what is missing.
    #[arg(long, requires = "tls")]
    pub ktls: bool,
    /// QUIC instead of TCP (quinn, TLS 1.3 inside): -P streams over one connection, or spread over
    /// --connections; every byte verified; the report gives QUIC's own RTT, congestion window, lost
    /// packets and path MTU. -C picks quinn's controller: cubic (default), bbr or newreno. The server
    /// answers on its own port number over UDP.
    #[arg(long, conflicts_with_all = ["udp", "tls", "mptcp"])]
    pub quic: bool,
    /// --quic: connections to spread the -P streams over, round-robin (-P is raised to N when smaller).
    #[arg(long, value_name = "N")]
    pub connections: Option<u32>,
    /// A request/response test against `landspeed serve` (netperf's TCP_RR): on each of -P TCP
    /// connections the client sends requests of --request bytes, the server answers each with
    /// --response bytes, --in-flight of them outstanding at once; until -t. Reports transactions per
    /// second and the latency distribution (min, p50, p90, p99, p99.9, max, a histogram); every
    /// request and response is checked byte for byte. Example: `landspeed run HOST --rr -t 10`
    /// (1-byte requests and responses, one at a time). With -u, over UDP (netperf's UDP_RR) to the
    /// server's echo service: 32-byte requests and answers by default (its header), the response
    /// the request's size or 32; a request unanswered for 1 s is counted lost; -P N sockets.
    #[arg(long, conflicts_with_all = ["quic", "reverse", "bidir", "bytes", "blocks", "rate", "omit",
          "iperf3", "iperf2", "ndt7", "bounceback", "connect_rate", "connect_only", "send_file", "recv_file", "from"])]
    pub rr: bool,
    /// --rr: bytes of each request (1..=1M; default 1).
    #[arg(long, value_name = "SIZE", value_parser = values::bytes, requires = "rr")]
    pub request: Option<Bytes>,
    /// --rr: bytes of each response (1..=1M; default 1).
    #[arg(long, value_name = "SIZE", value_parser = values::bytes, requires = "rr")]
    pub response: Option<Bytes>,
    /// --rr: requests each connection keeps unanswered at once (1..=1024; default 1: each request
    /// waits for the last one's response).
    #[arg(long, value_name = "N", requires = "rr")]
    pub in_flight: Option<u32>,
}

impl TestArgs {
    /// What the flags say, and nothing more: [`TestIntent::lower`] holds the defaults and the
    /// per-stream rules (`common::client::cell_spec` lowers it for this host).
    pub fn intent(&self) -> TestIntent {
        let end = match (self.time, self.bytes, self.blocks) {
            (_, Some(b), _) => Some(EndCondition::Bytes(b.get())),
            (_, _, Some(k)) => Some(EndCondition::Blocks(k)),
            (t, _, _) => t.map(EndCondition::Time),
        };
        TestIntent {
            streams: Some(self.streams),
            connections: self.connections,
            length: self.length,
            end,
            omit: self.omit,
            direction: if self.bidir {
                Direction::Bidir
            } else if self.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            window: self.window,
            congestion: self.congestion.clone(),
            mss: self.mss,
            nodelay: self.nodelay,
            rate: self.rate.map(Rate::Total),
            fq_rate: self.fq_rate,
            interval: Some(self.interval),
            server_threads: self.server_threads,
            server_cpus: self.server_cpus.clone().map(|c| c.0),
            no_verify: self.no_verify,
            rx: self.rx.map(|rx| match rx {
                RxArg::Copy => RxMode::Copy,
                RxArg::Discard => RxMode::Discard,
            }),
            tx: self.tx.into(),
            io: self.io.into(),
            queue_depth: self.queue_depth,
            transport: if self.udp {
                Transport::Udp
            } else if self.quic {
                Transport::Quic
            } else {
                Transport::Tcp
            },
            burst: Some(self.burst),
            rcvlowat: self.rcvlowat,
            tos: self.tos.or(self.dscp),
            dont_fragment: self.dont_fragment,
            mptcp: self.mptcp,
            tls: self.tls.then_some(landspeed_core::tls::TlsSpec {
                cipher: self.tls_cipher,
                ktls: self.ktls,
            }),
            transactions: self.rr.then(|| self.transaction_spec()),
            // `run --isochronous` sets it (common::client::cell_spec).
            frames: None,
        }
    }
}

impl TestArgs {
    /// `--rr`'s sizes and depth: 1-byte requests and answers over TCP; over UDP the echo service's
    /// header (32 bytes) is the least a request can be, and the answer is the request echoed whole
    /// unless `--response` says otherwise.
    fn transaction_spec(&self) -> TransactionSpec {
        let request_bytes = self.request.map_or(if self.udp { 32 } else { 1 }, clamp_u32);
        TransactionSpec {
            request_bytes,
            response_bytes: self
                .response
                .map_or(if self.udp { request_bytes } else { 1 }, clamp_u32),
            in_flight: self.in_flight.unwrap_or(1),
            connect_each: false,
        }
    }
}

/// A size as a u32, an absurd one kept absurd (validation names the bound).
fn clamp_u32(b: Bytes) -> u32 {
    u32::try_from(b.get()).unwrap_or(u32::MAX)
}
