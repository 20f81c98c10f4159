//! The command line, and its translation into validated configuration. This is the only place that
//! knows about clap; value parsers turn sizes, rates and durations into unit types so a bad value is a
//! usage error (exit 2) naming the flag.

use crate::values::{self, CpuList, IoArg, RxArg, TxArg};
use clap::{Args, Parser, Subcommand};
use landspeed_core::config::{Direction, EndCondition, RxMode, TestSpec, Transport};
use landspeed_core::units::{BitRate, Bytes};
use std::net::IpAddr;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "landspeed",
    version,
    about = "Measure how fast bulk data really moves between hosts over TCP and UDP, with both ends' figures",
    long_about = None,
    after_help = "Examples:\n  landspeed demo                         loopback server + client, 4 streams, 5 s\n  landspeed serve                        serve tests on port 5201 (IPv4 and IPv6)\n  landspeed run server.example -P 8 -w 64M -t 30\n  landspeed run ::1 -R --json            server sends; one JSON document at the end\n  landspeed run host -u -b 1G            UDP at 1 Gbit/s: loss, jitter, reordering, every datagram verified\n  landspeed run iperf3.host --iperf3     drive an iperf3 -s server\n  landspeed path host                    RTT, route, path MTU and bottleneck capacity\n  landspeed history                      archived runs (every run is saved)\n  landspeed sweep host --windows 64K..8M --streams 1,2,4   windows × streams, plotted and fitted\n  landspeed report --sweep 1 --html s.html   one self-contained page: tables, plots, both hosts\n  landspeed wan up lfn --rtt 100ms --rate 1G   an emulated long fat network (root)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve tests: landspeed's protocol and iperf3 clients, TCP and UDP, on one port.
    #[command(
        after_help = "Examples:\n  landspeed serve\n  landspeed serve -p 5300 --bind 192.0.2.10\n  landspeed serve --once\n  landspeed serve --max-tests 8 --max-duration 60s --max-streams 16 --allow 192.0.2.0/24 --log-json\n  landspeed serve --metrics 127.0.0.1:9572    # OpenMetrics on http://127.0.0.1:9572/metrics"
    )]
    Serve(ServeArgs),
    /// Run one test against a landspeed server (or an iperf3 server).
    #[command(
        after_help = "Examples:\n  landspeed run host -P 4 -t 30            4 streams for 30 s\n  landspeed run host -n 10G -l 1M          exactly 10 GiB in 1 MiB writes\n  landspeed run host -w 128M -i 5          128 MiB windows, a line every 5 s\n  landspeed run host --bidir --json        both directions, JSON result\n  landspeed run host -P 9 --cpus 0 --server-cpus 1   NTttcp-style pinning"
    )]
    Run(RunArgs),
    /// Many hosts at once: the tests of a plan file (pairs, one-to-many, many-to-one, full mesh) run
    /// by the hosts themselves, started together, reported as one campaign.
    #[command(
        after_help = "Examples:\n  landspeed mesh plan.toml --auth ops:ops.key\n  landspeed mesh plan.toml --json > campaign.json\n  landspeed mesh plan.toml --dry-run          the tests the plan expands to\n\nEvery sending host runs `landspeed serve --auth-keys KEYS --allow-control`; see docs/mesh.md for\nthe plan format."
    )]
    Mesh(crate::mesh::MeshArgs),
    /// Loopback server and client in one process: 4 streams for 5 seconds, full report.
    Demo(DemoArgs),
    /// Measure the path to a host: RTT (UDP echo, TCP connect), the route, and the path MTU.
    #[command(
        after_help = "Examples:\n  landspeed path host                    RTT (UDP echo and TCP connect), route and path MTU\n  landspeed path host --rtt -c 100 -i 10ms   100 UDP echo probes to a landspeed server, 10 ms apart\n  landspeed path host --tcp 443          TCP connect time to port 443 of any host\n  landspeed path host --trace -n         the route, numeric\n  landspeed path host --pmtu             largest packet that passes, and where bigger ones stop\n  landspeed path host --json             everything as one JSON document"
    )]
    Path(crate::path::PathArgs),
    /// List the archived runs (every `run` is saved unless --no-save), or export them as CSV or JSON.
    #[command(
        after_help = "Examples:\n  landspeed history                       the last 50 runs\n  landspeed history --host h --since 2026-11-01\n  landspeed history --tag lsr --csv > runs.csv"
    )]
    History(crate::archive::HistoryArgs),
    /// Print one archived run, as `run` printed it (or its JSON document).
    Show(crate::archive::ShowArgs),
    /// A windows × streams campaign (SLAC's bulk-throughput method): every cell archived as it finishes.
    #[command(
        after_help = "Examples:\n  landspeed sweep host --windows 64K..8M --streams 1,2,4,8 --repeat 3 --time 10s\n  landspeed sweep host --windows 64K,256K,1M,4M --both-directions --plots out/ --html sweep.html\n  landspeed sweep host --windows 1M..8M:+1M -- -p 5300 -C bbr -l 1M    run options after --\n  landspeed sweep --resume 7             run the cells sweep 7 is missing (after Ctrl-C, a crash, a reboot)\n\nThe summary gives every cell's median, 90th percentile, min, max, mean, sd and 95% CI; per stream\ncount the line throughput = slope × window through the origin (R², the RTT it implies, where it\nsaturates); the best cell and the smallest buffer within 5% of it."
    )]
    Sweep(crate::sweep::SweepArgs),
    /// Report on archived runs or a sweep: text, plots (SVG + PNG) or one self-contained HTML page.
    #[command(
        after_help = "Examples:\n  landspeed report 12                     run 12 as text\n  landspeed report 12 13 14 --html runs.html --plots plots/\n  landspeed report --sweep 7 --html sweep7.html"
    )]
    Report(crate::report::ReportArgs),
    /// Throughput models: what the window, loss (Mathis, PFTK) and the link allow, and which binds.
    #[command(
        after_help = "Examples:\n  landspeed model --rate 10G --rtt 100ms --window 64M --streams 4\n  landspeed model --rtt 150ms --loss 0.001% --mss 8948      Mathis and PFTK for a jumbo-frame path\n  landspeed model --run 42 --rate 1G                       a stored run: predicted vs measured, RFC 6349 figures"
    )]
    Model(crate::model::ModelArgs),
    /// Host tuning advisor: the limits that keep the TCP window below the bandwidth-delay product.
    #[command(
        after_help = "Examples:\n  landspeed tune                                   this host's limits and general advice\n  landspeed tune --rate 10G --rtt 100ms --streams 4   what stops 4 streams filling 10 Gbit/s over 100 ms\n  landspeed tune --rate 10G --rtt 100ms --write /etc/sysctl.d/90-landspeed.conf\n  sudo landspeed tune --rate 10G --rtt 100ms --apply    change the kernel settings now\n\nNothing on the system changes unless --apply is given."
    )]
    Tune(crate::model::TuneArgs),
    /// Land Speed Record entry from a stored run: path length, bit·m/s, class, rule checks, the document.
    #[command(
        after_help = "Examples:\n  landspeed record --run 42 --path \"Sunnyvale, US > Kansas City, MO, US > Chicago, US > Geneva, CH\"\n  landspeed record --run 42 --path \"Los Angeles, US > Sunnyvale, US > Geneva, CH\" --leg-km 1=489 --markdown lsr.md --html lsr.html\n  landspeed record --result run.json --path \"34.05,-118.24 > 46.20,6.15\" --previous 68.4Pbm/s --min-duration 10m\n\nExit code 1 when a rule fails."
    )]
    Record(crate::record::RecordArgs),
    /// Packet-level WAN emulator: two namespaces joined through a delaying, shaping, lossy path.
    Wan(crate::wan::WanArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  landspeed completions bash > ~/.local/share/bash-completion/completions/landspeed\n  landspeed completions zsh > ~/.zfunc/_landspeed\n  landspeed completions fish > ~/.config/fish/completions/landspeed.fish"
    )]
    Completions(crate::version::CompletionsArgs),
    /// (for packaging) Write the man pages, one per command, into a directory.
    #[command(hide = true)]
    Man(crate::version::ManArgs),
    /// Prometheus exporter: /probe?target=HOST[:PORT] runs one test and answers its figures.
    #[command(
        after_help = "Examples:\n  landspeed exporter --listen 127.0.0.1:9571\n  curl 'http://127.0.0.1:9571/probe?target=b.example.net&time=5s&streams=4'\n  curl 'http://127.0.0.1:9571/probe?target=b.example.net:5201&udp=1&rate=200M&reverse=1'\n\nA failed test answers probe_success 0 (HTTP 200); a bad query answers 400 with the reason.\nPrometheus configuration: docs/metrics-export.md."
    )]
    Exporter(crate::exporter::ExporterArgs),
    /// (for pScheduler) One method of the perfSONAR pScheduler tool: JSON on stdin, JSON on stdout.
    #[command(
        after_help = "Installed as /usr/lib/pscheduler/classes/tool/landspeed/METHOD wrappers (contrib/pscheduler).\nExample:\n  echo '{\"type\":\"throughput\",\"spec\":{\"dest\":\"b.example\",\"duration\":\"PT20S\"}}' | landspeed pscheduler duration"
    )]
    Pscheduler(crate::pscheduler::PschedulerArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one and prints it).
    #[arg(short, long, default_value_t = 5201)]
    pub port: u16,
    /// Address to listen on (default: every IPv4 and IPv6 address).
    #[arg(long)]
    pub bind: Option<IpAddr>,
    /// Serve one test, then exit.
    #[arg(long)]
    pub once: bool,
    /// Seconds a stream may move nothing before the server gives up on it.
    #[arg(long, default_value = "30s", value_parser = values::duration)]
    pub idle_timeout: Duration,
    /// Tests running at once (both protocols); one more is told "busy, retry".
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_tests: usize,
    /// New tests one client address (IPv6: one /64) may start per minute; more are told when to retry.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tests_per_minute: Option<u32>,
    /// Time a client has for each handshake step (its greeting, each control message, its data streams).
    #[arg(long, default_value = "10s", value_parser = values::duration, value_name = "DUR")]
    pub handshake_timeout: Duration,
    /// Longest test a client may ask for (warm-up included), e.g. 60s.
    #[arg(long, value_name = "DUR", value_parser = values::duration)]
    pub max_duration: Option<Duration>,
    /// Most data streams per test (both directions counted).
    #[arg(long, value_name = "N")]
    pub max_streams: Option<u32>,
    /// Most bytes a -n/-k test may move.
    #[arg(long, value_name = "SIZE", value_parser = values::bytes)]
    pub max_bytes: Option<Bytes>,
    /// Fastest rate of a test: UDP tests asking for more are refused, TCP tests are paced down to it.
    #[arg(long, value_name = "RATE", value_parser = values::rate)]
    pub max_rate: Option<BitRate>,
    /// Only these client networks may test (repeatable), e.g. 192.0.2.0/24 or 2001:db8::/32.
    #[arg(long, value_name = "CIDR", value_parser = values::cidr)]
    pub allow: Vec<ipnet::IpNet>,
    /// Log one JSON object per line instead of text.
    #[arg(long)]
    pub log_json: bool,
    /// Serve OpenMetrics for Prometheus on http://ADDR/metrics: tests by outcome, bytes, refusals by
    /// reason, running tests, authentication failures, the last test's figures (docs/metrics-export.md).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Require landspeed clients to authenticate with one of the keys in FILE: one `NAME SECRET` per
    /// line (secret at least 16 bytes; `#` comments). Clients use `run --auth NAME:KEYFILE`.
    #[arg(long, value_name = "FILE")]
    pub auth_keys: Option<std::path::PathBuf>,
    /// Take third-party orders: a client holding one of the --auth-keys may ask this server to run a test
    /// from here to another landspeed server (`run --from`, `mesh`). Off by default.
    #[arg(long, requires = "auth_keys")]
    pub allow_control: bool,
    /// The key this server proves when an order sends it to a server that requires authentication.
    #[arg(long, value_name = "NAME:KEYFILE", value_parser = values::auth, requires = "allow_control")]
    pub control_auth: Option<(String, std::path::PathBuf)>,
    /// Take disk-to-disk tests: uploads (`run --send-file`) are written into DIR, downloads
    /// (`run -R --recv-file`) are read from it. Plain names only. Off by default.
    #[arg(long, value_name = "DIR")]
    pub files: Option<std::path::PathBuf>,
    /// Listen with a plain TCP socket: `run --mptcp` clients then fall back to TCP (by default the
    /// listener is MPTCP where the kernel has it, and plain TCP clients are served as plain TCP).
    #[arg(long)]
    pub no_mptcp: bool,
    /// The certificate (PEM, end entity first) encrypted data connections present (run --tls);
    /// without it the server makes a self-signed one at start. Its SHA-256 fingerprint is logged
    /// and announced to each client, which pins it.
    #[arg(long, value_name = "PEM", requires = "key")]
    pub cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --cert.
    #[arg(long, value_name = "PEM", requires = "cert")]
    pub key: Option<std::path::PathBuf>,
    /// Do not serve QUIC (run --quic, and the QUIC performance protocol for other tools' clients).
    #[arg(long)]
    pub no_quic: bool,
    /// Serve QUIC on this UDP port (default: the server's own port number, beside its UDP listener).
    #[arg(long, value_name = "PORT", conflicts_with = "no_quic")]
    pub quic_port: Option<u16>,
}

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
    /// The server speaks the QUIC performance protocol (ALPN "perf": quinn's perf, msquic's
    /// secnetperf, quic-go's perf, or landspeed serve): -P requests, -R downloads, -n or -t, -p its
    /// UDP port (often 4433). Its payload is its own, so nothing is verified; --tls-pin checks its
    /// certificate.
    #[arg(long, conflicts_with_all = ["iperf3", "udp", "tls", "mptcp", "latency", "measure_path", "from", "send_file", "recv_file"])]
    pub quic_perf: bool,
    /// --quic-perf: do not check the server's certificate (a foreign perf server announces no
    /// fingerprint); the result says it was not checked. Without it, --tls-pin is required.
    #[arg(long, requires = "quic_perf", conflicts_with = "tls_pin")]
    pub insecure: bool,
    /// Authenticate to a server that requires it (`serve --auth-keys`): the key named NAME, read from
    /// KEYFILE (a key file like the server's, or one line holding the secret alone).
    #[arg(long, value_name = "NAME:KEYFILE", value_parser = values::auth)]
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
    pub db: crate::archive::DbArg,
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
pub struct DemoArgs {
    /// Streams.
    #[arg(short = 'P', long = "streams", default_value_t = 4)]
    pub streams: u32,
    /// Test time.
    #[arg(short, long, default_value = "5s", value_parser = values::duration)]
    pub time: Duration,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// Server port.
    #[arg(short, long, default_value_t = 5201)]
    pub port: u16,
    /// Parallel streams per direction (1..=1024): TCP connections, or QUIC streams with --quic.
    #[arg(short = 'P', long = "streams", default_value_t = 1, value_name = "N")]
    pub streams: u32,
    /// Worker threads on this end (default: one per stream up to the core count).
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
    /// Bytes per write/read call (K/M/G = 1024). Default 1M (UDP: 1448).
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
    /// wakes when this much has arrived (or 10 ms have passed). Default: two writes (at most a quarter
    /// of -w); 0 turns it off.
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
    /// Pace each sending socket at this rate (SO_MAX_PACING_RATE; k/M/G = 1000 bit/s).
    #[arg(long, value_name = "RATE", value_parser = values::rate)]
    pub fq_rate: Option<BitRate>,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    pub ipv6: bool,
    /// Local address to send from.
    #[arg(short = 'B', long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
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
    /// UDP instead of TCP: paced datagrams (-b), loss, jitter, out-of-order and duplicates reported,
    /// payload verified. -l is the datagram size (default 1448).
    #[arg(short = 'u', long)]
    pub udp: bool,
    /// UDP: target rate of ALL streams together (iperf3's -b is per stream), e.g. 500M; default 1M.
    #[arg(short = 'b', long = "rate", value_name = "RATE", value_parser = values::rate, requires = "udp")]
    pub udp_rate: Option<BitRate>,
    /// UDP: datagrams a sender that fell behind may send back to back.
    #[arg(long, value_name = "N", default_value_t = 16, requires = "udp")]
    pub burst: u32,
    /// Multipath TCP (iperf3's -m): the data connections are MPTCP, their subflows opened by the
    /// kernel's path manager (`ip mptcp endpoint`, `ip mptcp limits`); each stream's subflows and
    /// bytes per subflow are reported, and a fallback to plain TCP is said.
    #[arg(short = 'm', long, conflicts_with = "udp")]
    pub mptcp: bool,
    /// TLS 1.3 over every data connection (rustls, records of up to 16 KiB sealed in user space):
    /// the report says the suite and the records, and its CPU per byte includes the cryptography.
    /// The server presents a self-signed certificate (or its --cert) and the client pins the
    /// fingerprint the server announces on the control connection (or --tls-pin).
    #[arg(long, conflicts_with = "udp")]
    pub tls: bool,
    /// --tls: the cipher suite, aes128 (AES-128-GCM), aes256 (AES-256-GCM) or chacha20
    /// (ChaCha20-Poly1305).
    #[arg(long, value_name = "SUITE", default_value = "aes128", requires = "tls")]
    pub tls_cipher: landspeed_core::tls::TlsCipher,
    /// --tls: hand the record layer to the kernel after the handshake (kernel TLS); refused, naming
    /// what is missing, where the kernel cannot.
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
}

impl TestArgs {
    /// The test specification these flags describe (validated by the caller).
    pub fn spec(&self) -> TestSpec {
        let end = match (self.time, self.bytes, self.blocks) {
            (_, Some(b), _) => EndCondition::Bytes(b.get()),
            (_, _, Some(k)) => EndCondition::Blocks(k),
            (Some(t), _, _) => EndCondition::Time(t),
            _ => EndCondition::Time(Duration::from_secs(10)),
        };
        TestSpec {
            // -P 0 stays 0, for validation to refuse.
            streams: match self.connections {
                Some(c) if self.streams > 0 => self.streams.max(c),
                _ => self.streams,
            },
            length_bytes: self
                .length
                .unwrap_or(if self.udp {
                    landspeed_core::config::DEFAULT_UDP_LENGTH
                } else {
                    landspeed_core::config::DEFAULT_LENGTH
                })
                .get(),
            end,
            omit_s: self.omit.unwrap_or_default(),
            direction: if self.bidir {
                Direction::Bidir
            } else if self.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            window_bytes: self.window.map(|w| w.get()),
            congestion: self.congestion.clone(),
            mss: self.mss,
            nodelay: self.nodelay,
            fq_rate_bps: self.fq_rate.map(|r| r.bps()),
            interval_s: if self.interval.is_zero() {
                Duration::from_secs(1)
            } else {
                self.interval
            },
            server_threads: self.server_threads,
            server_cpus: self.server_cpus.clone().map(|c| c.0),
            verify: !self.no_verify,
            payload_key: 0,
            rx: match (self.rx, self.no_verify && !self.udp && !self.tls) {
                (Some(RxArg::Discard), _) | (None, true) => RxMode::Discard,
                _ => RxMode::Copy,
            },
            tx: self.tx.into(),
            io: self.io.into(),
            queue_depth: self
                .queue_depth
                .unwrap_or(if self.io == IoArg::Uring { 4 } else { 1 }),
            transport: if self.udp {
                Transport::Udp
            } else if self.quic {
                Transport::Quic
            } else {
                Transport::Tcp
            },
            rate_bps: self.udp_rate.map(|r| r.bps()),
            burst: self.burst,
            file: None,
            rcvlowat_bytes: self.rcvlowat.map(|b| b.get()),
            mptcp: self.mptcp,
            tls: self.tls.then_some(landspeed_core::tls::TlsSpec {
                cipher: self.tls_cipher,
                ktls: self.ktls,
            }),
            connections: self.connections.unwrap_or(1),
        }
    }
}
