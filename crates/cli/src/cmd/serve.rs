//! `landspeed serve`: binds, prints where it listens, logs one line per test, and exits cleanly on
//! SIGINT or SIGTERM.

use crate::common::UsageError;
use crate::common::{now_utc, values};
use anyhow::{Context, Result};
use clap::Args;
use landspeed_core::units::{BitRate, Bytes};
use landspeed_net::{Server, ServerEvent, ServerOptions};
use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// `serve --help`'s (and the man page's) examples and what the server authenticates: the words of
/// docs/security.md's threat table.
pub const LONG_HELP: &str = "\
Examples:
  landspeed serve
  landspeed serve -p 5300 --bind 192.0.2.10
  landspeed serve --once
  landspeed serve --max-tests 8 --max-duration 60s --max-streams 16 --allow 192.0.2.0/24 --log-json
  landspeed serve --metrics 127.0.0.1:9572    # OpenMetrics on http://127.0.0.1:9572/metrics
  landspeed serve --ndt7 [::]:4443 --archive  # keep every ndt7 subtest in the archive
  landspeed serve --rpm [::]:4043    # responsiveness: landspeed rpm HOST, goresponsiveness
  landspeed serve --auth-keys /etc/landspeed/keys    # clients: run --auth NAME:KEYFILE
  landspeed serve -p 5001 --join 239.1.1.1%eth0    # iperf -c 239.1.1.1 -u: counted, none answered
  landspeed serve --auth-keys KEYS --open iperf3     # keyed, and iperf3 clients still served
  landspeed serve -p 5001 --connect-back   # iperf 2's -r and -d answered (the server dials back)
  landspeed serve --iperf2-udp-send --max-rate 100M   # iperf 2's UDP -R answered, at most 100 Mbit/s

What is authenticated:
  With --auth-keys, both ends prove they hold a shared key and every control message
  after the greeting carries an HMAC-SHA256 tag bound to its place in the conversation:
  an attacker in the path cannot change, drop, replay, reorder or relay one unnoticed, a
  client without a key is refused at its first message, and the certificate that TLS and
  QUIC data connections are pinned to arrives authenticated. The control messages are
  authenticated, not encrypted; plain TCP and UDP data is neither (payload verification
  still catches changed bytes). A stolen key lets its holder test and impersonate this
  server to that key's clients: remove its line from the key file.
  Without a key, nothing is authenticated: --tls and --quic encrypt the data against
  passive observers only (an attacker in the path could present its own certificate)
  unless the client pins the certificate (run --tls-pin). Each result says which held
  (authentication.server: key, pinned_certificate or none). iperf3's protocol, ndt7,
  the QUIC perf protocol and the responsiveness test cannot carry the key: a keyed
  server refuses them unless --open names them.";

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
    /// Write the server's process id to this file once it listens (no newline, as iperf3 -I writes
    /// it), and remove the file when it stops (SIGINT, SIGTERM, or after --once). A file naming a
    /// process that still runs is left alone and the server does not start.
    #[arg(long, value_name = "PATH")]
    pub pid_file: Option<std::path::PathBuf>,
    /// Seconds a stream may move nothing before the server gives up on it.
    #[arg(long, default_value = "30s", value_parser = values::duration)]
    pub idle_timeout: Duration,
    /// Tests running at once (both protocols); one more is told "busy, retry".
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_tests: usize,
    /// Tests one client address (IPv6: one /64) may run at once, so one host cannot hold every slot;
    /// more are told "busy". Counted once a test is authenticated and valid.
    #[arg(long, value_name = "N", default_value_t = landspeed_net::DEFAULT_MAX_TESTS_PER_ADDRESS)]
    pub max_tests_per_address: usize,
    /// New tests one client address (IPv6: one /64) may start per minute; more are told when to retry.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tests_per_minute: Option<u32>,
    /// Time a client has for each handshake step (its greeting, each control message, its data streams).
    #[arg(long, default_value = "10s", value_parser = values::duration, value_name = "DUR")]
    pub handshake_timeout: Duration,
    /// Longest test a client may ask for (warm-up included), and the most any test may run however
    /// it ends (a count at a crawl is cut 2 s past it); 0 for no limit. The default keeps a public
    /// server's slots turning over; raise it for long tests on your own network.
    #[arg(long, value_name = "DUR", value_parser = values::duration, default_value = "5m")]
    pub max_duration: Duration,
    /// Most data streams per test (both directions counted).
    #[arg(long, value_name = "N")]
    pub max_streams: Option<u32>,
    /// Most bytes a test may move, both directions together: a -n/-k test asking for more is refused,
    /// any other is cut when it gets there.
    #[arg(long, value_name = "SIZE", value_parser = values::bytes)]
    pub max_bytes: Option<Bytes>,
    /// Memory the server's tests may need at once, by its estimate of each request (buffers per
    /// stream and thread: docs/security.md, "Memory"); a test needing more than this is refused by
    /// name, one that would take the total over it is told "busy". The default fits a 1 GiB host.
    #[arg(long, value_name = "SIZE", value_parser = values::bytes, default_value = "512M")]
    pub max_memory: Bytes,
    /// Most worker threads a test may ask the server for (run --server-threads).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_server_threads: u32,
    /// Deepest io_uring queue a test may ask for (run --io uring --queue-depth).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_queue_depth: u32,
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
    /// With --auth-keys, serve this protocol to clients without a key anyway (repeatable): iperf3,
    /// iperf2, ndt7, quic-perf or rpm, none of which can carry landspeed's key. By default a keyed
    /// server refuses them (iperf3 clients read iperf3's "test authorization failed", ndt7 clients
    /// get HTTP 403, iperf 2 clients a closed connection).
    #[arg(long, value_name = "PROTOCOL", value_enum, requires = "auth_keys")]
    pub open: Vec<OpenProtocol>,
    /// Answer iperf 2's -r and -d (its tests the server opens back): open as many connections back
    /// to the client's own address, at the port its header names (1024 or above), and send on them.
    /// Off by default: the server would connect out to a port the client chooses.
    #[arg(long)]
    pub connect_back: bool,
    /// Answer iperf 2's UDP -R and --full-duplex: send the test's datagrams to the address and port
    /// the client's first datagram came from, at the rate and for the time its header asks (within --max-rate,
    /// --max-duration and --max-bytes). Off by default: nothing proves that address, so a forged
    /// datagram would aim the test at someone else (docs/security.md).
    #[arg(long)]
    pub iperf2_udp_send: bool,
    /// Require iperf3's own authentication of iperf3 clients (`iperf3 -c --username NAME
    /// --rsa-public-key-path PUBLIC.pem`, the password in IPERF3_PASSWORD): the RSA private key
    /// (PEM, unencrypted) their tokens are decrypted with. A keyed server (--auth-keys) then admits
    /// iperf3 clients that pass it.
    #[arg(long, value_name = "PEM", requires = "iperf3_users")]
    pub iperf3_rsa_key: Option<std::path::PathBuf>,
    /// The authorized users of iperf3's authentication: `NAME,SHA256HEX` lines, the hash of
    /// `{NAME}PASSWORD` (iperf3's format; `printf '{alice}PASSWORD' | sha256sum`). Read for each test.
    #[arg(long, value_name = "FILE", requires = "iperf3_rsa_key")]
    pub iperf3_users: Option<std::path::PathBuf>,
    /// Seconds an iperf3 token's time may be from this server's clock (iperf3's default: 10).
    #[arg(long, value_name = "S", default_value_t = landspeed_iperf3::auth::DEFAULT_SKEW_S,
          requires = "iperf3_rsa_key")]
    pub iperf3_time_skew: i64,
    /// iperf3 clients pad their tokens with PKCS #1 v1.5 (iperf3's --use-pkcs1-padding), not OAEP.
    #[arg(long, requires = "iperf3_rsa_key")]
    pub iperf3_pkcs1: bool,
    /// Send this host's details (name, OS, kernel, CPU model, memory, command line, interface) to
    /// every client. By default only clients that prove a key get them; others get what explains a
    /// measurement (the CPU count and the network sysctls that cap windows).
    #[arg(long)]
    pub share_host: bool,
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
    /// Serve M-Lab's ndt7 speed test on ADDR (e.g. [::]:4443): any ndt7 client tests at
    /// wss://ADDR/ndt/v7/download and /ndt/v7/upload, with the server's certificate (--cert/--key, or
    /// the self-signed one). Every limit above applies; each subtest is a line in the log.
    #[arg(long, value_name = "ADDR")]
    pub ndt7: Option<std::net::SocketAddr>,
    /// Serve ndt7 over plain ws:// instead of TLS (a browser refuses a self-signed certificate for a
    /// remote host; plain WebSocket is then the way, on a network you trust).
    #[arg(long, requires = "ndt7")]
    pub ndt7_plain: bool,
    /// Serve the responsiveness test (RPM, the IETF draft "Responsiveness under Working
    /// Conditions") on ADDR (e.g. [::]:4043): its configuration at https://ADDR/config, for
    /// landspeed rpm, goresponsiveness and Apple's networkQuality; HTTP/2 and HTTP/1.1 over TLS with
    /// the server's certificate. --allow and the per-minute limit apply (a test is counted when its
    /// client fetches the configuration).
    #[arg(long, value_name = "ADDR")]
    pub rpm: Option<std::net::SocketAddr>,
    /// Serve the responsiveness test over plain HTTP (HTTP/1.1, or HTTP/2 with prior knowledge).
    #[arg(long, requires = "rpm")]
    pub rpm_plain: bool,
    /// Keep, in landspeed's archive (--db), the tests of clients that keep none there: each ndt7
    /// subtest and each iperf3 client's test, as this server saw them (its counts, its TCP_INFO
    /// series, an ndt7 client's metadata and every measurement sent). landspeed clients archive
    /// their own runs. `landspeed history --db ...` lists them.
    #[arg(long)]
    pub archive: bool,
    #[command(flatten)]
    pub db: crate::common::store::DbArg,
    /// For `landspeed iperf3 -s -J`: after each iperf3 client's test, iperf3's JSON document of this
    /// end instead of the log (nothing else on stdout).
    #[arg(long, hide = true, conflicts_with = "log_json")]
    pub iperf3_json: bool,
    /// For `landspeed iperf3 -s`: iperf3's server text (the "Server listening" banners, each iperf3
    /// client's test as `iperf3 -s` prints it) instead of the log.
    #[arg(long, hide = true, conflicts_with_all = ["log_json", "iperf3_json"])]
    pub iperf3_text: bool,
    /// For `landspeed iperf3 -s --server-bitrate-limit RATE[/SECONDS]`: iperf3 tests asking for more
    /// in all are refused, and ended once they move more on average, with iperf3's TOTAL_RATE.
    #[arg(long, hide = true, value_name = "RATE[/SECONDS]",
          value_parser = landspeed_iperf3::total_rate::TotalRateLimit::parse)]
    pub iperf3_bitrate_limit: Option<landspeed_iperf3::total_rate::TotalRateLimit>,
    /// Also join this multicast group on the UDP port (GROUP or GROUP%INTERFACE) and receive iperf
    /// 2's multicast senders to it (`iperf -c GROUP -u`), a test each, counted as iperf 2's server
    /// counts them; nothing is sent back to a group's sender.
    #[arg(long, value_name = "GROUP[%IF]", value_parser = join_group)]
    pub join: Option<(IpAddr, Option<String>)>,
    /// With --join: hear only this sender (source-specific multicast; IPv4 SSM groups are
    /// 232.0.0.0/8).
    #[arg(long, value_name = "ADDR", requires = "join")]
    pub join_source: Option<IpAddr>,
    #[command(flatten)]
    pub iperf2_lines: super::iperf2_server::Iperf2Lines,
}

/// `--join`'s GROUP or GROUP%INTERFACE: a multicast address, its interface if named.
fn join_group(s: &str) -> Result<(IpAddr, Option<String>), String> {
    let (bare, interface) = match s.split_once('%') {
        Some((b, i)) if !i.is_empty() => (b, Some(i.to_string())),
        _ => (s, None),
    };
    match bare.trim_matches(|c| c == '[' || c == ']').parse::<IpAddr>() {
        Ok(ip) if ip.is_multicast() => Ok((ip, interface)),
        _ => Err(format!(
            "{s}: not a multicast group (239.1.1.1, ff15::1, either with %INTERFACE)"
        )),
    }
}

/// `--join` and `--join-source` as the server's group to join on `port`.
fn join_plan(a: &ServeArgs) -> Option<landspeed_net::multicast::GroupPlan> {
    a.join
        .as_ref()
        .map(|(group, interface)| landspeed_net::multicast::GroupPlan {
            group: std::net::SocketAddr::new(*group, a.port),
            source: a.join_source,
            interface: interface.clone(),
        })
}

/// A protocol that cannot carry landspeed's key, opened on a keyed server by `--open`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenProtocol {
    /// iperf3's protocol.
    Iperf3,
    /// iperf 2's protocol (2.1.x clients; it has no authentication).
    Iperf2,
    /// M-Lab's ndt7 (serve --ndt7).
    Ndt7,
    /// The QUIC performance protocol.
    QuicPerf,
    /// The responsiveness test's HTTP endpoints (serve --rpm).
    Rpm,
}

impl From<OpenProtocol> for landspeed_net::Keyless {
    fn from(p: OpenProtocol) -> Self {
        match p {
            OpenProtocol::Iperf3 => Self::Iperf3,
            OpenProtocol::Iperf2 => Self::Iperf2,
            OpenProtocol::Ndt7 => Self::Ndt7,
            OpenProtocol::QuicPerf => Self::QuicPerf,
            OpenProtocol::Rpm => Self::Rpm,
        }
    }
}

fn print(ev: ServerEvent) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", landspeed_report::server_log::text_line(&ev, &now_utc()));
    let _ = o.flush();
}

/// `--iperf3-json`: the document of each iperf3 test, as iperf3's server writes it (a failed one
/// with no figures and its error).
fn print_iperf3(ev: ServerEvent) {
    let ServerEvent::Test(log) = ev else { return };
    if log.protocol.starts_with("ndt7") {
        return;
    }
    match (&log.result, &log.error) {
        (Some(r), _) => {
            let meta = landspeed_report::iperf3_json::Iperf3Meta {
                title: log.iperf3_labels.title.clone(),
                extra_data: log.iperf3_labels.extra_data.clone(),
                ..crate::common::iperf3_meta::meta(true)
            };
            let doc = landspeed_report::iperf3_json::document(r, &meta);
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            let _ = o.flush();
        }
        // iperf3's server writes a failed test as a document too: no figures, its error.
        (None, Some(e)) => {
            let meta = crate::common::iperf3_meta::meta(true);
            let doc = crate::common::iperf3_meta::error_document(&meta, &format!("error - {e}"));
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            let _ = o.flush();
        }
        (None, None) => {}
    }
}

/// `--iperf3-text`: iperf3's server text. A banner when listening and after each iperf3 test (but
/// the last of `--once`); each test's lines as iperf3 prints them, as they happen: the connection and
/// its streams when they are up, each interval as it closes, the summary at the end.
fn iperf3_text_printer(once: bool) -> impl Fn(ServerEvent) + Send + Sync + 'static {
    let state = std::sync::Mutex::new(TextState {
        tests: 1,
        port: 0,
        printed: None,
    });
    move |ev| {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        let text = st.on_event(ev, once);
        let mut o = std::io::stdout().lock();
        let _ = write!(o, "{text}");
        let _ = o.flush();
    }
}

/// What the iperf3 text printer knows between events.
struct TextState {
    /// The number of the test a banner announces next.
    tests: u32,
    port: u16,
    /// Intervals of the running test already printed (None: no test's head printed yet).
    printed: Option<usize>,
}

impl TextState {
    fn banner(&self) -> String {
        let rule = "-----------------------------------------------------------";
        format!(
            "{rule}\nServer listening on {} (test #{})\n{rule}\n",
            self.port, self.tests
        )
    }

    /// The text an event adds (errors go to stderr, as iperf3's).
    fn on_event(&mut self, ev: ServerEvent, once: bool) -> String {
        use landspeed_report::iperf3_text as t;
        let style = t::Style::default();
        match ev {
            ServerEvent::Listening { addresses, .. } => {
                self.port = addresses.first().map_or(0, |a| a.port());
                self.banner()
            }
            ServerEvent::Progress(r) => {
                let mut out = String::new();
                let from = *self.printed.get_or_insert_with(|| {
                    out += &t::server_head(&r, &style);
                    0
                });
                for i in r.intervals.iter().skip(from) {
                    out += &t::server_interval(&r, &style, i);
                }
                self.printed = Some(from.max(r.intervals.len()));
                out
            }
            // ndt7 tests (`--ndt7` beside `--iperf3-text`) are not iperf3's to print.
            ServerEvent::Test(log) if !log.protocol.starts_with("ndt7") => {
                let mut out = String::new();
                match (&log.result, &log.error) {
                    (Some(r), _) => out += &self.finish(r, &style),
                    (None, Some(e)) => errln!("iperf3: error - {e}"),
                    (None, None) => {}
                }
                self.printed = None;
                self.tests += 1;
                if !once {
                    out += &self.banner();
                }
                out
            }
            _ => String::new(),
        }
    }

    /// The end of a test: what was not printed live (all of it without a live view), then the summary.
    fn finish(
        &self,
        r: &landspeed_core::result::RunResult,
        style: &landspeed_report::iperf3_text::Style,
    ) -> String {
        use landspeed_report::iperf3_text as t;
        let Some(from) = self.printed else {
            return t::render_server(r, style);
        };
        let mut out = String::new();
        for i in r.intervals.iter().skip(from) {
            out += &t::server_interval(r, style, i);
        }
        out + &t::server_tail(r, style)
    }
}

fn print_json(ev: ServerEvent) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", landspeed_report::server_log::json_line(&ev, &now_utc()));
    let _ = o.flush();
}

/// The most streams one test may have here: `--max-streams` if asked, and no more than this process's
/// open-file limit leaves room for, so a test past it is refused whole ("at most N streams") instead
/// of failing half-connected. Says so on stderr when the limit is the one that binds.
fn stream_limit(asked: Option<u32>) -> Option<u32> {
    use landspeed_engine::rlimit::{fd_limit, streams_room};
    let fd = fd_limit();
    let room = streams_room(fd);
    let by_fd = (fd > 0 && room < u64::from(landspeed_core::config::MAX_STREAMS)).then_some(room as u32);
    match (asked, by_fd) {
        (Some(a), Some(b)) if a <= b => Some(a),
        (_, Some(b)) => {
            errln!(
                "landspeed: warning: the open-file limit ({fd}) leaves room for at most {b} streams per test; raise it (ulimit -n, or LimitNOFILE= in a service unit) for more"
            );
            Some(b)
        }
        (a, None) => a,
    }
}

pub fn serve(a: ServeArgs) -> Result<bool> {
    if a.iperf2_lines.iperf2_realtime {
        // Before any thread starts: each inherits it (and the lock holds for what they map).
        super::iperf2::realtime();
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handler")?;
    }
    // `kill -USR1 PID` prints the counters (tests, bytes, refusals by reason).
    let stats = Arc::new(AtomicBool::new(false));
    crate::common::sys::on_stats_signal(stats.clone()).context("cannot install signal handler")?;
    let opts = options(&a, stats)?;
    if !(a.iperf3_json || a.iperf3_text || a.iperf2_lines.iperf2_text) {
        errln!("landspeed: {}", limits_line(&opts));
    }
    let joined = opts.join.clone().filter(|_| !a.iperf2_lines.iperf2_text);
    let printer: landspeed_net::EventSink = if a.iperf2_lines.iperf2_text {
        Arc::new(super::iperf2_server::printer(&a.iperf2_lines, join_plan(&a)))
    } else if a.iperf3_json {
        Arc::new(print_iperf3)
    } else if a.iperf3_text {
        Arc::new(iperf3_text_printer(a.once))
    } else if a.log_json {
        Arc::new(print_json)
    } else {
        Arc::new(print)
    };
    let archive = match (a.archive, &a.db.db) {
        (true, _) => Some(crate::common::store::ServerArchive::open(&a.db)?),
        (false, Some(_)) => {
            return Err(UsageError("--db names the archive of --archive: add --archive".into()).into())
        }
        (false, None) => None,
    };
    let server = match &archive {
        None => Server::bind(opts, printer)?,
        Some(keep) => {
            let keep = keep.clone();
            Server::bind(
                opts,
                Arc::new(move |ev: ServerEvent| {
                    keep.take(&ev);
                    printer(ev)
                }),
            )?
        }
    };
    if let Some(g) = joined {
        let from = g.source.map_or(String::new(), |s| format!(" from {s} only"));
        let on = g.interface.map_or(String::new(), |i| format!(" on {i}"));
        errln!(
            "landspeed: joined {}{on}{from} on the server's port: iperf 2's multicast senders to it are counted, none answered",
            g.group.ip()
        );
    }
    if let Some(addr) = a.metrics {
        metrics(addr, server.stats_handle(), stop.clone())?;
    }
    let _pid = a
        .pid_file
        .as_deref()
        .map(crate::common::pidfile::PidFile::write)
        .transpose()
        .map_err(|e| UsageError(format!("--pid-file {e}")))?;
    let ran = server.run(&stop);
    if let Some(keep) = &archive {
        keep.finish();
    }
    ran?;
    Ok(true)
}

/// iperf3's own authentication from `--iperf3-rsa-key` and `--iperf3-users`: the key read and the users
/// file checked readable now, so a bad one stops the server at start.
fn iperf3_auth(a: &ServeArgs) -> Result<Option<Arc<landspeed_iperf3::auth::ServerAuth>>> {
    let (Some(key), Some(users)) = (&a.iperf3_rsa_key, &a.iperf3_users) else {
        return Ok(None);
    };
    let pem = crate::common::keyfile::read(key)?;
    let key = landspeed_iperf3::auth::PrivateKey::from_pem(pem.as_bytes())
        .map_err(|e| UsageError(format!("--iperf3-rsa-key {}: {e}", key.display())))?;
    std::fs::read_to_string(users)
        .map_err(|e| UsageError(format!("--iperf3-users {}: {e}", users.display())))?;
    Ok(Some(Arc::new(landspeed_iperf3::auth::ServerAuth {
        key,
        users_file: users.clone(),
        skew_s: a.iperf3_time_skew,
        padding: if a.iperf3_pkcs1 {
            landspeed_iperf3::auth::Padding::Pkcs1
        } else {
            landspeed_iperf3::auth::Padding::Oaep
        },
    })))
}

/// The limits in force, in one line, printed when the server starts.
fn limits_line(o: &ServerOptions) -> String {
    let l = &o.limits;
    let or_none = |v: Option<String>| v.unwrap_or_else(|| "none".into());
    let open = |on: bool, name: &str| {
        if on {
            format!("{name} on")
        } else {
            format!("{name} off")
        }
    };
    format!(
        "limits in force: test length {}, rate {}, bytes {}, streams {}, {} tests at once ({} per \
         address), new tests per address per minute {}, memory {}, clients {}, authentication {}; {}, {}",
        or_none(l.max_duration_s.map(|s| format!("{s} s"))),
        or_none(l.max_rate_bps.map(|r| BitRate(r).to_string())),
        or_none(l.max_bytes.map(|b| Bytes(b).to_string())),
        or_none(l.max_streams.map(|n| n.to_string())),
        o.max_tests,
        o.max_tests_per_address,
        or_none(l.max_tests_per_minute.map(|n| n.to_string())),
        or_none(l.max_memory_bytes.map(|b| Bytes(b).to_string())),
        if o.allow.is_empty() {
            "every address".to_string()
        } else {
            format!("{} networks", o.allow.len())
        },
        if o.auth.is_some() { "keys required" } else { "none" },
        open(o.ndt7.is_some(), "ndt7"),
        open(o.rpm.is_some(), "rpm"),
    )
}

/// The server's options from the command line (the key files read and checked here).
/// `--auth-keys FILE`'s keys (none without it; a file with none is an error).
fn auth_keys(a: &ServeArgs) -> Result<Option<Arc<landspeed_proto::KeyRing>>> {
    let Some(file) = &a.auth_keys else {
        return Ok(None);
    };
    let ring = landspeed_proto::KeyRing::parse(&crate::common::keyfile::read(file)?)
        .map_err(|e| crate::common::keyfile::error("--auth-keys ", file, &e))?;
    if ring.is_empty() {
        return Err(UsageError(format!("--auth-keys {}: the file holds no keys", file.display())).into());
    }
    Ok(Some(Arc::new(ring)))
}

fn options(a: &ServeArgs, stats: Arc<AtomicBool>) -> Result<ServerOptions> {
    Ok(ServerOptions {
        bind: a.bind,
        port: a.port,
        once: a.once,
        idle_timeout: a.idle_timeout,
        handshake_timeout: a.handshake_timeout,
        max_tests: a.max_tests.max(1),
        max_tests_per_address: a.max_tests_per_address.max(1),
        limits: landspeed_proto::Limits {
            max_duration_s: (!a.max_duration.is_zero()).then_some(a.max_duration.as_secs_f64()),
            max_streams: stream_limit(a.max_streams),
            max_bytes: a.max_bytes.map(|b| b.get()),
            max_rate_bps: a.max_rate.map(|r| r.bps()),
            max_tests_per_minute: a.max_tests_per_minute,
            max_memory_bytes: Some(a.max_memory.get()),
            max_server_threads: Some(a.max_server_threads),
            max_queue_depth: Some(a.max_queue_depth),
        },
        allow: a.allow.clone(),
        stats_signal: Some(stats),
        auth: auth_keys(a)?,
        allow_control: a.allow_control,
        open: a.open.iter().map(|&p| p.into()).collect(),
        connect_back: a.connect_back,
        iperf2_udp_send: a.iperf2_udp_send,
        iperf2_enhanced: a.iperf2_lines.iperf2_enhanced,
        join: join_plan(a),
        share_host: a.share_host,
        iperf3_auth: iperf3_auth(a)?,
        files_dir: match &a.files {
            Some(d) if !d.is_dir() => {
                return Err(UsageError(format!("--files {}: not a directory", d.display())).into())
            }
            other => other.clone(),
        },
        control_key: match &a.control_auth {
            None => None,
            Some((name, file)) => Some(
                landspeed_proto::auth::client_key(name, &crate::common::keyfile::read(file)?).map_err(
                    |e| crate::common::keyfile::error(&format!("--control-auth {name}:"), file, &e),
                )?,
            ),
        },
        mptcp: !a.no_mptcp,
        identity: match (&a.cert, &a.key) {
            (Some(c), Some(k)) => Some(Arc::new(
                landspeed_engine::tls::Identity::from_pem_files(c, k)
                    .map_err(|e| UsageError(format!("--cert/--key: {e}")))?,
            )),
            _ => None,
        },
        quic: !a.no_quic,
        quic_port: a.quic_port,
        ndt7: a.ndt7.map(|addr| landspeed_net::ListenerOptions {
            addr,
            tls: !a.ndt7_plain,
        }),
        rpm: a.rpm.map(|addr| landspeed_net::ListenerOptions {
            addr,
            tls: !a.rpm_plain,
        }),
        live: a.iperf3_text || a.iperf2_lines.iperf2_text,
        iperf2_interval: a.iperf2_lines.iperf2_interval,
        iperf2_reads: a.iperf2_lines.reads(),
        iperf2_rx_clamp: a.iperf2_lines.iperf2_rx_clamp,
        iperf2_histograms: a.iperf2_lines.iperf2_histograms,
        iperf3_total_rate: a.iperf3_bitrate_limit,
    })
}

/// `--metrics ADDR`: OpenMetrics on http://ADDR/metrics from the server's live counters.
fn metrics(
    addr: std::net::SocketAddr,
    stats: landspeed_net::StatsHandle,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let listener =
        std::net::TcpListener::bind(addr).with_context(|| format!("--metrics: cannot listen on {addr}"))?;
    // Printed first, so that with port 0 scripts learn where the metrics are.
    outln!("landspeed metrics on http://{}/metrics", listener.local_addr()?);
    let handler: crate::common::http::Handler = Arc::new(move |req| match req.path.as_str() {
        "/metrics" => crate::common::http::Response {
            status: 200,
            content_type: landspeed_report::openmetrics::CONTENT_TYPE,
            body: landspeed_report::openmetrics::server(
                &stats.stats(),
                stats.last_test().as_ref(),
                landspeed_core::SOFTWARE_VERSION,
            ),
        },
        _ => crate::common::http::Response::text(404, "not found: the metrics are on /metrics\n"),
    });
    std::thread::spawn(move || crate::common::http::serve(listener, handler, &stop));
    Ok(())
}
