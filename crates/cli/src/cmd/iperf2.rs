//! `landspeed iperf2 ARGS` (and the binary started as `iperf`): iperf 2's command line and output,
//! so a script written around `iperf` runs landspeed by changing one path. The client runs
//! landspeed's data path in iperf 2's protocol (`run --iperf2`: against `iperf -s` and `landspeed
//! serve` alike) and prints iperf 2's text or CSV (report::iperf2_text); the server is `landspeed
//! serve` on iperf 2's port, which answers iperf 2 clients. What landspeed cannot do of iperf 2 is
//! refused by name in one line, never ignored (docs/iperf2.md lists it).

use super::iperf2_out as out;
use anyhow::Result;
use clap::{Args, Parser};
use landspeed_report::iperf2_text::{self, Iperf2Style};
use std::ffi::OsString;

/// iperf 2's port.
pub(crate) const PORT: u16 = 5001;
/// iperf 2's UDP rate without `-b`, bits per second.
const UDP_DEFAULT_BPS: u64 = 1 << 20;

/// `landspeed iperf2 ARGS...`: the arguments as iperf 2 takes them.
#[derive(Args, Debug)]
pub struct Iperf2Args {
    /// iperf 2's arguments, e.g. `-c HOST -t 10 -P 4 -y C` or `-s`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "IPERF_ARGS"
    )]
    pub args: Vec<OsString>,
}

/// iperf 2.1.8's options that landspeed carries out, and those it refuses by name.
#[derive(Parser, Debug, Default)]
#[command(
    name = "iperf",
    disable_version_flag = true,
    disable_help_flag = true,
    infer_long_args = true
)]
pub(crate) struct Opts {
    #[arg(short = 'c', long = "client")]
    pub(crate) client: Option<String>,
    #[arg(short = 's', long = "server")]
    pub(crate) server: bool,
    #[arg(short = 'p', long = "port")]
    pub(crate) port: Option<u16>,
    #[arg(short = 't', long = "time")]
    pub(crate) time: Option<f64>,
    #[arg(short = 'n', long = "num")]
    pub(crate) bytes: Option<String>,
    #[arg(short = 'P', long = "parallel")]
    pub(crate) parallel: Option<u32>,
    #[arg(short = 'l', long = "len")]
    pub(crate) length: Option<String>,
    #[arg(short = 'w', long = "window")]
    pub(crate) window: Option<String>,
    /// `-R`: the server sends. iperf 2.1.8's `--remove` is the same letter (on Windows, a server
    /// removes its service with it; on a client it is `--reverse`, as 2.1.8 reads it).
    #[arg(short = 'R', long = "reverse", alias = "remove")]
    pub(crate) reverse: bool,
    #[arg(long = "full-duplex")]
    pub(crate) full_duplex: bool,
    #[arg(short = 'i', long = "interval")]
    pub(crate) interval: Option<f64>,
    #[arg(short = 'e', long = "enhanced")]
    pub(crate) enhanced: bool,
    #[arg(short = 'y', long = "reportstyle")]
    pub(crate) style: Option<String>,
    #[arg(short = 'f', long = "format")]
    pub(crate) format: Option<char>,
    #[arg(short = 'b', long = "bandwidth")]
    pub(crate) bandwidth: Option<String>,
    #[arg(short = 'B', long = "bind")]
    pub(crate) bind: Option<String>,
    #[arg(short = 'v', long = "version")]
    pub(crate) version: bool,
    #[arg(short = 'h', long = "help")]
    pub(crate) help: bool,
    /// Options iperf 2 has that landspeed refuses by name (see `refused`).
    #[arg(short = 'u', long = "udp")]
    pub(crate) udp: bool,
    #[arg(short = 'r', long = "tradeoff")]
    pub(crate) tradeoff: bool,
    #[arg(short = 'd', long = "dualtest")]
    pub(crate) dualtest: bool,
    #[arg(short = 'L', long = "listenport")]
    pub(crate) listen_port: Option<u16>,
    #[arg(long = "trip-times")]
    pub(crate) trip_times: bool,
    /// `--no-udp-fin`: a UDP client's streams end without the server's report.
    #[arg(long = "no-udp-fin")]
    pub(crate) no_udp_fin: bool,
    #[arg(long = "bounceback", num_args = 0..=1, default_missing_value = "", require_equals = true)]
    pub(crate) bounceback: Option<String>,
    #[arg(long = "bounceback-period")]
    pub(crate) bounceback_period: Option<f64>,
    #[arg(long = "bounceback-hold")]
    pub(crate) bounceback_hold: Option<f64>,
    #[arg(long = "bounceback-no-quickack")]
    pub(crate) bounceback_no_quickack: bool,
    #[arg(long = "bounceback-congest", num_args = 0..=1, default_missing_value = "bidir", require_equals = true)]
    pub(crate) bounceback_congest: Option<String>,
    #[arg(long = "isochronous", num_args = 0..=1, default_missing_value = "", require_equals = true)]
    pub(crate) isochronous: Option<String>,
    #[arg(long = "connect-only", num_args = 0..=1, default_missing_value = "", require_equals = true)]
    pub(crate) connect_only: Option<String>,
    #[arg(short = 'D', long = "daemon")]
    pub(crate) daemon: bool,
    #[arg(short = 'o', long = "output")]
    pub(crate) output: Option<String>,
    #[arg(short = 'H', long = "ssm-host")]
    pub(crate) ssm_host: Option<String>,
    #[arg(short = 'T', long = "ttl")]
    pub(crate) ttl: Option<u32>,
    #[arg(short = 'x', long = "reportexclude")]
    pub(crate) exclude: Option<String>,
    #[arg(short = 'X', long = "peer-detect")]
    pub(crate) peer_detect: bool,
    /// `-V`: IPv6 (a client resolves its host to IPv6; the server listens on IPv6 and IPv4 alike).
    #[arg(short = 'V', long = "ipv6_domain")]
    pub(crate) ipv6: bool,
    /// `-6`: IPv6, as `-V`.
    #[arg(short = '6', long = "v6")]
    pub(crate) v6: bool,
    /// `-4`: IPv4 (the host resolved to IPv4; with `-6` or `-V` too, neither, as iperf 2.1.8 warns).
    #[arg(short = '4', long = "v4")]
    pub(crate) v4: bool,
    /// `-z`: realtime scheduling (SCHED_RR at its highest priority) and the memory locked.
    #[arg(short = 'z', long = "realtime")]
    pub(crate) realtime: bool,
    /// `--connect-retries N`: a TCP connection refused is tried N more times, 200 ms apart.
    #[arg(long = "connect-retries")]
    pub(crate) connect_retries: Option<u32>,
    /// `--tcp-write-prefetch N[KMG]`: each TCP sender holds at most N bytes unsent
    /// (TCP_NOTSENT_LOWAT; the server's too with -R and --full-duplex); `-e` on.
    #[arg(long = "tcp-write-prefetch")]
    pub(crate) write_prefetch: Option<String>,
    /// `--tcp-quickack`: each TCP receiver acknowledges every read at once (TCP_QUICKACK; the
    /// server's too where it receives).
    #[arg(long = "tcp-quickack")]
    pub(crate) quickack: bool,
    /// `-s --tcp-rx-window-clamp N[KMG]`: each TCP client's connection's receive window clamped
    /// (TCP_WINDOW_CLAMP).
    #[arg(long = "tcp-rx-window-clamp")]
    pub(crate) rx_clamp: Option<String>,
    /// `-S`: the type-of-service byte of every packet (`0x` hex, `0` octal, decimal, or a name
    /// such as `af11` or `lowdelay`, as iperf 2 reads it).
    #[arg(short = 'S', long = "tos")]
    pub(crate) tos: Option<String>,
    /// `-N`: Nagle's algorithm off (TCP_NODELAY).
    #[arg(short = 'N', long = "nodelay")]
    pub(crate) nodelay: bool,
    /// `-Z`: the TCP congestion control.
    #[arg(short = 'Z', long = "tcp-congestion")]
    pub(crate) congestion: Option<String>,
    /// `-M`: the TCP maximum segment size asked for (TCP_MAXSEG).
    #[arg(short = 'M', long = "mss")]
    pub(crate) mss: Option<String>,
    /// `-m`: the head says the MSS.
    #[arg(short = 'm', long = "print_mss")]
    pub(crate) print_mss: bool,
    /// `--sum-only`: only the `[SUM]` lines.
    #[arg(long = "sum-only")]
    pub(crate) sum_only: bool,
    /// `--hide-ips`: IPv4 addresses printed as `*.*.*.N`, the client's host as `(**hidden**)`.
    #[arg(long = "hide-ips")]
    pub(crate) hide_ips: bool,
    /// `--ipg MS`: UDP's gap between datagrams, milliseconds (with `--isochronous`, between one
    /// frame's datagrams).
    #[arg(long = "ipg")]
    pub(crate) ipg: Option<f64>,
    /// `--fq-rate RATE`: each sending socket paced by the kernel (SO_MAX_PACING_RATE); `k`, `m`,
    /// `g` bits, `K`, `M`, `G` bytes, powers of 1000 (iperf 2's `bitorbyte_atoi`).
    #[arg(long = "fq-rate")]
    pub(crate) fq_rate: Option<String>,
    /// `--txstart-time SECS[.USECS]`: the streams connect now and send from this Unix time on
    /// (iperf 2 reads the digits after the point as microseconds); turns `-e` on. A client's own
    /// streams only, TCP or UDP: with -R iperf 2.1.8's server sends at once, before the start.
    #[arg(long = "txstart-time")]
    pub(crate) txstart_time: Option<String>,
    /// `--txdelay-time S`: the client's streams connect, then hold back S seconds before their
    /// data (TCP, this host's streams; the server is not told).
    #[arg(long = "txdelay-time", value_parser = hold_back)]
    pub(crate) txdelay_time: Option<f64>,
    /// `--histograms[=WIDTH[u|m],BINS,LOWER,UPPER]` (`--udp-histograms` too): a server's bins of
    /// each trip-times client's transits, their histogram under each of its lines; `-e` on.
    #[arg(long = "histograms", visible_alias = "udp-histograms", num_args = 0..=1, default_missing_value = "", require_equals = true)]
    pub(crate) histograms: Option<String>,
    /// Words that are no option's value (iperf 2 says it ignores each, and runs): among them the
    /// value of an option that takes one only after `=` (`--isochronous 60:1m,0.2m` is
    /// `--isochronous` with its defaults, as iperf 2's getopt reads it).
    #[arg(value_name = "IGNORED")]
    pub(crate) extra: Vec<String>,
}

/// `landspeed iperf2 ARGS`.
pub fn iperf2(a: Iperf2Args) -> Result<bool> {
    let mut argv = vec![OsString::from("iperf")];
    argv.extend(a.args);
    main(argv)
}

/// One line on stderr for a command line landspeed will not run, and exit 1.
pub(crate) fn refuse(why: &str) -> Result<bool> {
    errln!("iperf: {why}");
    Ok(false)
}

/// The binary started as `iperf`, or `landspeed iperf2`: `argv` starts with the program's name.
pub fn main(argv: Vec<OsString>) -> Result<bool> {
    let o = match parse(argv) {
        Ok(o) => families(o),
        Err(why) => return refuse(&why),
    };
    for word in &o.extra {
        errln!("iperf: ignoring extra argument -- {word}");
    }
    if o.version {
        // iperf 2 writes its version on stderr.
        errln!(
            "iperf version 2.1.8 (landspeed {}: iperf 2's command line and output)",
            landspeed_core::SOFTWARE_VERSION
        );
        return Ok(true);
    }
    if o.help {
        outln!("{HELP}");
        return Ok(true);
    }
    if let Some(why) = refused(&o) {
        return refuse(&why);
    }
    let shown = match o.exclude.as_deref().map(out::Exclude::parse).transpose() {
        Ok(x) => x.unwrap_or_default(),
        Err(why) => return refuse(&why),
    };
    out::exclude(out::Exclude {
        sum_only: o.sum_only.then(|| o.parallel.unwrap_or(1).max(1)),
        hide_ips: o.hide_ips,
        tcp_enhanced: o.enhanced && !o.udp,
        ..shown
    });
    if let Some(path) = &o.output {
        if let Err(why) = output_to(path) {
            return refuse(&why);
        }
    }
    warnings(&o);
    // The server becomes `landspeed serve` (exec), which the memory lock would not survive: it is
    // asked of serve instead (--iperf2-realtime).
    if o.realtime && !o.server {
        realtime();
    }
    if let Some(line) = (o.client.as_deref()).and_then(|h| unresolved(h, o.ipv6).filter(|_| !o.server)) {
        errln!("{line}");
        return Ok(false);
    }
    match (&o.client, o.server) {
        (Some(_), true) => refuse("-c and -s together: one or the other"),
        (None, false) => refuse("usage: iperf [-s|-c host] [options] (iperf -h for help)"),
        (None, true) => serve(&o),
        (Some(host), false) if super::iperf2_multicast::is_group(host) => {
            super::iperf2_multicast::client(&o, host)
        }
        (Some(host), false) if o.bounceback.is_some() => super::iperf2_bounce::client(&o, host),
        (Some(host), false) if o.connect_only.is_some() => super::iperf2_bounce::connect_only(&o, host),
        (Some(host), false) if o.tradeoff || o.dualtest => dual(&o, host),
        (Some(host), false) => client(&o, host),
    }
}

/// `-4`, `-6` and `-V` as iperf 2.1.8 settles them: `-6` is `-V`; `-4` beside either is neither
/// (it warns, and resolves as without them).
fn families(mut o: Opts) -> Opts {
    o.ipv6 |= o.v6;
    if o.v4 && o.ipv6 {
        errln!("WARN: both ipv4 and ipv6 set");
        (o.v4, o.ipv6) = (false, false);
    }
    o
}

/// What iperf 2.1.8 warns of and passes over, on stderr in its words: `--connect-retries` on a
/// server.
fn warnings(o: &Opts) {
    if o.server && o.connect_retries.is_some_and(|n| n > 0) {
        errln!("WARN: option --connect-retries not supported on the server");
    }
    if o.server && o.write_prefetch.is_some() {
        errln!("WARN: setting of option --tcp-write-prefetch is not supported on the server");
    }
    if o.udp && !o.server && o.write_prefetch.is_some() {
        errln!("WARN: setting of option --tcp-write-prefetch is not supported with -u UDP");
    }
    if o.udp && !o.server && o.quickack {
        errln!("WARN: setting of option --tcp-quickack is not supported with -u UDP");
    }
    if !o.server && o.rx_clamp.is_some() {
        errln!("WARN: option of --tcp-rx-window-clamp not supported on the client");
    }
    if o.server && o.udp && o.rx_clamp.is_some() {
        errln!("WARN: option of --tcp-rx-window-clamp not supported using -u UDP ");
    }
}

/// `-z`: this process's threads (the test's, started after this) scheduled realtime and its memory
/// locked; what the kernel refuses is said in iperf 2.1.8's words (its `perror`), and the test
/// runs on, as iperf 2's does.
pub(crate) fn realtime() {
    if let Err(r) = crate::common::sys::realtime() {
        let text = r.err.to_string();
        let words = text.split(" (os error").next().unwrap_or(&text);
        match r.call {
            "sched_setscheduler" => errln!("Client set scheduler: {words}"),
            call => errln!("{call}: {words}"),
        }
    }
}

/// What iperf 2.1.8's client says, before anything else and exiting 1, of a host it cannot
/// resolve (`HOST: Unknown host`) or, with `-V`, one that has no IPv6 address (`ERROR: failed to
/// find an ip address for host 'HOST'`); None when the host resolves.
fn unresolved(host: &str, ipv6: bool) -> Option<String> {
    use std::net::ToSocketAddrs;
    // A group's interface (`GROUP%DEV`) is not the host's.
    let bare = host.split('%').next().unwrap_or(host);
    let addrs: Vec<std::net::SocketAddr> = (bare, 0).to_socket_addrs().map_or(vec![], |a| a.collect());
    match (addrs.iter().any(|a| a.is_ipv6() || !ipv6), ipv6) {
        (true, _) => None,
        (false, false) => Some(format!("{host}: Unknown host")),
        (false, true) => Some(format!("ERROR: failed to find an ip address for host '{host}'")),
    }
}

/// `--txdelay-time`'s value: seconds, from 0 to a day.
fn hold_back(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if (0.0..=86_400.0).contains(&s) => Ok(s),
        _ => Err(format!("--txdelay-time takes seconds from 0 to 86400, not '{v}'")),
    }
}

/// iperf 2.1.8's short options (its getopt string's letters).
const IPERF2_SHORT: &str = "146bcdefhilmnoprstuvwxyzABCDFHILMNPRSTUVWXZ";

/// iperf 2.1.8's long options: one the drop-in lacks is refused by name, a word that is none of
/// them is passed over as iperf 2's getopt passes it over.
const IPERF2_LONG: &[&str] = &[
    "singleclient",
    "v4",
    "v6",
    "bandwidth",
    "client",
    "dualtest",
    "enhanced",
    "format",
    "help",
    "interval",
    "len",
    "print_mss",
    "num",
    "output",
    "port",
    "tradeoff",
    "server",
    "time",
    "udp",
    "version",
    "window",
    "reportexclude",
    "realtime",
    "awdl",
    "bind",
    "bounceback",
    "bounceback-congest",
    "bounceback-txdelay",
    "bounceback-hold",
    "bounceback-no-quickack",
    "bounceback-period",
    "compatibility",
    "daemon",
    "file_input",
    "ssm-host",
    "stdin_input",
    "mss",
    "nodelay",
    "listenport",
    "parallel",
    "remove",
    "reverse",
    "tos",
    "ttl",
    "single_udp",
    "ipv6_domain",
    "suggest_win_size",
    "peer-detect",
    "tcp-congestion",
    "histograms",
    "hide-ips",
    "udp-histograms",
    "l2checks",
    "incr-dstip",
    "incr-srcip",
    "incr-dstport",
    "incr-srcport",
    "sum-dstip",
    "txstart-time",
    "txdelay-time",
    "fq-rate",
    "trip-times",
    "no-udp-fin",
    "connect-only",
    "connect-retries",
    "no-connect-sync",
    "full-duplex",
    "ipg",
    "isochronous",
    "sum-only",
    "local-only",
    "near-congestion",
    "permit-key",
    "permit-key-timeout",
    "burst-size",
    "burst-period",
    "tos-override",
    "tcp-rx-window-clamp",
    "tcp-quickack",
    "tcp-write-prefetch",
    "tcp-write-times",
    "tap-dev",
    "tun-dev",
];

/// What iperf 2.1.8's getopt makes of an option word (`-k`, `--name`, `--name=VALUE`).
#[derive(Debug, PartialEq)]
enum Getopt {
    /// One of its options (a long one by its name or a prefix of only its name).
    Known,
    /// A prefix of several of its long options.
    Ambiguous,
    /// None of its options.
    Unknown,
}

fn getopt(arg: &str) -> Getopt {
    let known = match arg.strip_prefix("--") {
        Some(long) => {
            let name = long.split('=').next().unwrap_or(long);
            let matches = IPERF2_LONG.iter().filter(|l| l.starts_with(name)).count();
            match name.is_empty() || matches == 0 {
                true => false,
                false if matches > 1 && !IPERF2_LONG.contains(&name) => return Getopt::Ambiguous,
                false => true,
            }
        }
        None => arg
            .strip_prefix('-')
            .and_then(|s| s.chars().next())
            .is_some_and(|c| IPERF2_SHORT.contains(c)),
    };
    match known {
        true => Getopt::Known,
        false => Getopt::Unknown,
    }
}

/// iperf 2's options as its getopt reads them: a word that is none of iperf 2.1.8's options is
/// passed over with getopt's warning (as 2.1.8 runs on); one of 2.1.8's that the drop-in lacks is
/// refused by name; anything else wrong, clap's first line.
fn parse(mut argv: Vec<OsString>) -> Result<Opts, String> {
    loop {
        let e = match Opts::try_parse_from(&argv) {
            Ok(o) => return Ok(o),
            Err(e) => e,
        };
        let unknown = match (e.kind(), e.get(clap::error::ContextKind::InvalidArg)) {
            (clap::error::ErrorKind::UnknownArgument, Some(clap::error::ContextValue::String(a))) => {
                Some(a.clone())
            }
            _ => None,
        };
        let at = unknown
            .as_ref()
            .and_then(|a| argv.iter().position(|w| w.to_str() == Some(a.as_str())));
        match (unknown, at) {
            (Some(a), _) if getopt(&a) == Getopt::Known => {
                return Err(format!(
                    "landspeed iperf2 does not support {a}: not built here (docs/iperf2.md lists what is)"
                ))
            }
            (Some(a), Some(i)) => {
                match (getopt(&a), a.strip_prefix("--")) {
                    (Getopt::Ambiguous, _) => errln!("iperf: option `{a}' is ambiguous"),
                    (_, Some(_)) => errln!("iperf: unrecognized option `{a}'"),
                    (_, None) => errln!("iperf: invalid option -- {}", a.trim_start_matches('-')),
                }
                argv.remove(i);
            }
            _ => {
                let text = e.to_string();
                return Err(text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ")
                    .into());
            }
        }
    }
}

/// `-o FILE`: from here on what goes to stdout and stderr goes to FILE (created, or emptied), after
/// one line on stdout saying so, as iperf 2 does. One open file behind both, so lines and messages
/// stay in the order written (iperf 2.1.8 opens the file once for each, and one's writes can
/// overwrite the other's).
#[cfg(unix)]
fn output_to(path: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let file = std::fs::File::create(path).map_err(|e| format!("-o {path}: {e}"))?;
    outln!("Output from stdout and stderr will be redirected to file {path}");
    let _ = std::io::stdout().flush();
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 onto the standard descriptors from a file this function holds open; Rust's
        // stdout was flushed above and stderr is unbuffered, so nothing written before is lost.
        if unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
            return Err(format!("-o {path}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// `-o FILE` where the standard descriptors cannot be replaced under Rust's own handles.
#[cfg(not(unix))]
fn output_to(_path: &str) -> Result<(), String> {
    Err("landspeed iperf2 does not support -o on this system: redirect standard output".into())
}

/// `-d` or `-r`: the test built once, run over UDP or TCP.
fn dual(o: &Opts, host: &str) -> Result<bool> {
    match super::iperf2_dual::DualTest::new(o, host) {
        Ok(t) if o.udp => super::iperf2_udp_dual::client(host, t),
        Ok(t) => super::iperf2_dual::client(host, t),
        Err(why) => refuse(&why),
    }
}

const HELP: &str = "Usage: iperf [-s|-c host] [options]   (landspeed's iperf 2 drop-in)
  -c, --client HOST  run as a client against HOST      -s, --server      run as a server
  -p, --port N       server port (5001)                -B, --bind ADDR   local address
  -t, --time S       seconds to send (10)              -n, --num N[KMG]  bytes instead (per stream)
  -P, --parallel N   streams                           -l, --len N[KMG]  write size (128K)
  -w, --window N     socket buffers                    -b, --bandwidth R per stream (k, m, g: 1000s)
  -R, --reverse      the server sends                  --full-duplex     both ways on each stream
  -d, --dualtest     both ways at once, the server's on connections back to this host (-L PORT;
                     with -u its datagrams to this host's UDP port -L, -P streams each way)
  -r, --tradeoff     this host's streams, then the server's on connections back (-L PORT)
  -i, --interval S   report interval                   -e, --enhanced    -e's columns
  -V, -6, --ipv6_domain  IPv6 (the host resolved to IPv6; the server listens on both)   -4  IPv4
  -z, --realtime     realtime scheduling (SCHED_RR) and locked memory (root or CAP_SYS_NICE)
  --connect-retries N  TCP: a refused connection tried N more times, 200 ms apart
  --tcp-write-prefetch N  TCP: at most N bytes unsent per sender (the server's too with -R; -e on)
  --tcp-quickack     TCP: every read acknowledged at once (the server's too where it receives)
  -s --tcp-rx-window-clamp N  TCP: each client's connection's receive window clamped to N bytes
  -S, --tos N|NAME   type of service (0x10, 40, af11, lowdelay)  -N, --nodelay  Nagle off (TCP)
  -Z, --tcp-congestion ALG  TCP congestion control     -M, --mss N  TCP MSS asked (-m: print the MSS)
  -y C               CSV                               -f [abkmgKMG]     units
  -o FILE            stdout and stderr into FILE (created, or emptied), after a line saying so
  -x [CDMSV]         leave out reports: C connections, D data, S settings (the head), V the
                     server's (UDP), M multicast's (none apart); -s leaves out S and C alone
  --sum-only         the streams' [SUM-N] lines alone (TCP or UDP sent)
  --fq-rate R        pace each TCP socket sent (k/m/g bits, K/M/G bytes a second)
  -X, --peer-detect  TCP: ask the server's version (its header ack, read before the data)
  --txstart-time T   this host's streams (TCP or UDP): connect now, send from Unix time T (SECS[.USECS], .25 is 25 µs as in iperf 2; -e on)
  -s --histograms[=W[u|m],BINS,LO,HI]  each --trip-times client's transits in bins (100u,10000,5,95), -e on
  -u, --udp          UDP (1470-byte datagrams, -b 1M each stream; the server's report printed)
  --ipg MS           with -u: a datagram every MS ms (with --isochronous: the gap within a frame)
  -c GROUP -u        multicast: iperf 2's datagrams to the group (-T TTL, 1), no server report
  -s -u -B GROUP     join GROUP[%IF] (-H SOURCE: that sender only) and count each sender to it
  --connect-only[=N] N connections (10), each timed and closed; with -i one an interval for -t
  --bounceback[=N]   request/response: N requests a burst (10), --bounceback-period S (1),
                     --bounceback-hold MS, --bounceback-no-quickack, --bounceback-congest[=up|down|bidir[,N]]
iperf 2's protocol over TCP or UDP against `iperf -s` or `landspeed serve`; the server is `landspeed serve`
printing iperf 2's server lines (-i, -y C, -f; -u names UDP in its head: it serves both at once). iperf 2's payload is not landspeed's: nothing is verified.
Options landspeed cannot honour are refused by name in one line (docs/iperf2.md).";

/// The first option given that landspeed refuses, with why.
fn refused(o: &Opts) -> Option<String> {
    let not = |name: &str, why: &str| format!("landspeed iperf2 does not support {name}: {why}");
    let list = [
        (
            (o.tradeoff || o.dualtest) && (o.reverse || o.full_duplex),
            "-r/-d with -R or --full-duplex",
            "the server's half comes on connections of its own",
        ),
        (
            (o.tradeoff || o.dualtest) && (o.bounceback.is_some() || o.isochronous.is_some()),
            "-r/-d with --bounceback or --isochronous",
            "they are bulk tests",
        ),
        (
            o.listen_port.is_some() && !(o.tradeoff || o.dualtest || o.server),
            "-L without -r or -d",
            "it is the port the client listens on for the server's connections back",
        ),
        (
            o.server && (o.tradeoff || o.dualtest),
            "-s with -r or -d",
            "the client asks for them; the server answers them",
        ),
        (
            o.bounceback.is_some() && (o.udp || o.reverse || o.full_duplex || o.bytes.is_some()),
            "--bounceback with -u, -R, --full-duplex or -n",
            "a bounceback test is TCP connections each carrying both ways, for -t",
        ),
        (
            o.bounceback.is_some() && o.style.is_some(),
            "--bounceback with -y C",
            "iperf 2 prints no CSV for it either",
        ),
        (
            o.no_udp_fin
                && (!o.udp
                    || o.reverse
                    || o.full_duplex
                    || another_test(o)
                    || o.client.as_deref().is_some_and(super::iperf2_multicast::is_group)),
            "--no-udp-fin without -u, or with -s, -R, --full-duplex, -r, -d, --isochronous or -c GROUP",
            "it asks the server of a UDP client's own streams for no report at their end",
        ),
        (
            o.bandwidth.is_some() && o.isochronous.is_some(),
            "-b with --isochronous",
            "the frames' mean is their rate (iperf 2.1.8 refuses them together too)",
        ),
        (
            o.bandwidth.as_deref().is_some_and(is_pps) && !o.udp,
            "-b in packets a second (pps) without -u",
            "a rate in datagrams a second is UDP's",
        ),
        (
            o.isochronous.is_some() && (o.reverse || o.full_duplex),
            "--isochronous with -R or --full-duplex",
            "the client sends the frames",
        ),
        (
            o.histograms.is_some() && !o.server,
            "--histograms on a client",
            "a client's write-time histograms (iperf 2's W8 lines) are not kept; a server's are",
        ),
    ];
    list.into_iter()
        .chain(refused_options(o))
        .chain(refused_schedules(o))
        .chain(refused_elsewhere(o))
        .find(|(on, ..)| *on)
        .map(|(_, name, why)| not(name, why))
}

/// iperf 2's options of how a client's connections start and what their sockets are asked, where
/// landspeed does not carry them.
fn refused_schedules(o: &Opts) -> [(bool, &'static str, &'static str); 5] {
    [
        (
            o.txdelay_time.is_some() && (o.udp || o.txstart_time.is_some() || beyond_plain_send(o)),
            "--txdelay-time with -u, --txstart-time, -s, -R, --full-duplex, -r, -d, --bounceback, --connect-only or --isochronous",
            "a client's own TCP streams hold back",
        ),
        (
            o.txstart_time.is_some() && beyond_plain_send(o),
            "--txstart-time with -s, -R, --full-duplex, -r, -d, --bounceback, --connect-only or --isochronous",
            "a client's own streams start at it, TCP or UDP (iperf 2.1.8's server sends -R's before it)",
        ),
        (
            o.udp && o.connect_retries.is_some_and(|n| n > 0),
            "--connect-retries with -u",
            "it tries a TCP connection again (iperf 2.1.8 refuses it with -u too)",
        ),
        (
            (o.write_prefetch.is_some() || o.quickack) && !o.udp && another_test(o) && !o.server,
            "--tcp-write-prefetch or --tcp-quickack with -r, -d, --bounceback, --connect-only or --isochronous",
            "they set a TCP client's own streams (-R and --full-duplex too)",
        ),
        (
            o.quickack && o.server,
            "--tcp-quickack on a server",
            "the server acknowledges at once where its client asks it to (--tcp-quickack on the client)",
        ),
    ]
}

/// iperf 2's socket and pacing options where landspeed does not carry them.
fn refused_options(o: &Opts) -> [(bool, &'static str, &'static str); 7] {
    [
        (
            o.server && (o.tos.is_some() || tcp_options(o)),
            "-S, -N, -Z, -M or -m with -s",
            "the server's sockets take what each client asks; give them to the client",
        ),
        (
            o.udp && tcp_options(o),
            "-N, -Z, -M or -m with -u",
            "they are TCP's",
        ),
        (
            (o.tos.is_some() || tcp_options(o))
                && (o.bounceback.is_some()
                    || o.connect_only.is_some()
                    || o.client.as_deref().is_some_and(super::iperf2_multicast::is_group)),
            "-S, -N, -Z, -M or -m with --bounceback, --connect-only or -c GROUP",
            "those tests set their sockets as iperf 2's defaults do",
        ),
        (
            o.sum_only
                && (beyond_plain_send(o)
                    || o.client.as_deref().is_some_and(super::iperf2_multicast::is_group)),
            "--sum-only with -s, -R, --full-duplex, -r, -d, --bounceback, --connect-only, --isochronous or -c GROUP",
            "the sums alone are printed for a client's streams sent, TCP or UDP",
        ),
        (
            o.fq_rate.is_some() && (another_test(o) || o.udp),
            "--fq-rate with -s, -u, -r, -d, --bounceback, --connect-only or --isochronous",
            "it paces a TCP test's sending sockets, the server's too with -R and --full-duplex (UDP is paced by -b)",
        ),
        (
            o.ipg.is_some() && (!o.udp || o.bandwidth.is_some()),
            "--ipg without -u, or with -b",
            "it is UDP's gap between datagrams, which sets the rate (iperf 2.1.8 refuses both too)",
        ),
        (
            o.ipg.is_some_and(|g| !(g > 0.0 && g <= 60_000.0)),
            "--ipg outside (0, 60000] ms",
            "a gap between datagrams is above zero and at most a minute",
        ),
    ]
}

/// Anything but a client's streams sent: the server, `-R`, `--full-duplex`, `-r`, `-d`,
/// `--bounceback`, `--connect-only` or `--isochronous` (what `--sum-only` and `--fq-rate` leave out).
fn beyond_plain_send(o: &Opts) -> bool {
    o.reverse || o.full_duplex || another_test(o)
}

/// A test other than a client's own streams over TCP or UDP, either way: the server, `-r`, `-d`,
/// `--bounceback`, `--connect-only` or `--isochronous` (what `-X` leaves out, with `-u`).
fn another_test(o: &Opts) -> bool {
    o.server
        || o.tradeoff
        || o.dualtest
        || o.bounceback.is_some()
        || o.connect_only.is_some()
        || o.isochronous.is_some()
}

/// `-N`, `-Z`, `-M` or `-m`: options of a TCP connection.
fn tcp_options(o: &Opts) -> bool {
    o.nodelay || o.congestion.is_some() || o.mss.is_some() || o.print_mss
}

/// iperf 2's options that belong to another command of landspeed's, or to none.
fn refused_elsewhere(o: &Opts) -> [(bool, &'static str, &'static str); 7] {
    [
        (
            o.connect_only.is_some()
                && (o.udp
                    || o.reverse
                    || o.full_duplex
                    || o.tradeoff
                    || o.dualtest
                    || o.bytes.is_some()
                    || o.bounceback.is_some()
                    || o.isochronous.is_some()
                    || o.style.is_some()),
            "--connect-only with -u, -R, --full-duplex, -r, -d, -n, --bounceback, --isochronous or -y",
            "it opens TCP connections and closes them, nothing sent (iperf 2.1.8 refuses -u with it too)",
        ),
        (
            o.ttl.is_some() && !o.client.as_deref().is_some_and(super::iperf2_multicast::is_group),
            "-T without -c GROUP",
            "it is a multicast sender's TTL",
        ),
        (
            o.ssm_host.is_some()
                && !(o.server && o.bind.as_deref().is_some_and(super::iperf2_multicast::is_group)),
            "-H without -s -B GROUP",
            "it is the one source a multicast server hears",
        ),
        (
            o.server && !o.udp && o.bind.as_deref().is_some_and(super::iperf2_multicast::is_group),
            "-s -B GROUP without -u",
            "multicast is UDP",
        ),
        (o.daemon, "-D", "run `landspeed serve` under your service manager"),
        (
            o.peer_detect && (another_test(o) || o.udp),
            "-X with -s, -u, -r, -d, --bounceback, --connect-only or --isochronous",
            "a TCP client's streams ask the server's version (-R and --full-duplex too)",
        ),
        (
            o.style.as_deref().is_some_and(|s| !s.eq_ignore_ascii_case("c")),
            "-y other than C",
            "CSV is the only other style",
        ),
    ]
}

/// iperf 2's byte counts: `K`, `M`, `G` powers of 1024, `k`, `m`, `g` of 1000 (its `byte_atoi`).
pub(crate) fn bytes(v: &str) -> Option<u64> {
    let (num, mult) = match v.chars().last()? {
        'K' => (&v[..v.len() - 1], 1024.0),
        'M' => (&v[..v.len() - 1], 1024.0 * 1024.0),
        'G' => (&v[..v.len() - 1], 1024.0 * 1024.0 * 1024.0),
        'k' => (&v[..v.len() - 1], 1e3),
        'm' => (&v[..v.len() - 1], 1e6),
        'g' => (&v[..v.len() - 1], 1e9),
        _ => (v, 1.0),
    };
    let n: f64 = num.parse().ok()?;
    (n >= 0.0 && n.is_finite()).then(|| (n * mult).round() as u64)
}

/// iperf 2's bit rates, read as its `-b` reads them (2.1.8's `byte_atoi`, the same as byte counts):
/// `K`, `M`, `G` powers of 1024, `k`, `m`, `g` of 1000, in bits per second (`-b 50M` is 52,428,800
/// bit/s, `-b 50m` 50,000,000); above zero.
pub(crate) fn bits(v: &str) -> Option<u64> {
    bytes(v).filter(|b| *b > 0)
}

/// Whether iperf 2.1.8 reads `-b V` in packets a second (it looks for a `p` or `P`: `100pps`).
fn is_pps(v: &str) -> bool {
    v.contains(['p', 'P'])
}

/// iperf 2's `-b` for `len`-byte datagrams, bits per second: a bit rate ([`bits`]), or in packets
/// a second (`100pps`: what comes before the `p`, read as a count) that many datagrams a second.
pub(crate) fn rate_bps(v: &str, len: u64) -> Option<u64> {
    match v.find(['p', 'P']) {
        Some(at) => bytes(&v[..at]).filter(|n| *n > 0).map(|pps| pps * len * 8),
        None => bits(v),
    }
}

/// `landspeed run` arguments for iperf 2's client options (`-n`, `-l`, `-w` and `-b` read as iperf
/// 2 reads them; `-n` and `-b` are per stream in iperf 2, totals in landspeed).
fn run_args(o: &Opts, host: &str) -> Result<Vec<String>, String> {
    let streams = u64::from(o.parallel.unwrap_or(1).max(1));
    let number = |flag: &str, v: &Option<String>, read: &dyn Fn(&str) -> Option<u64>| {
        v.as_deref()
            .map(|v| read(v).ok_or_else(|| format!("{flag} {v}: not a number iperf 2 reads")))
            .transpose()
    };
    let mut a = vec![
        host.to_string(),
        "-p".into(),
        o.port.unwrap_or(PORT).to_string(),
        "--no-save".into(),
        "--iperf2".into(),
    ];
    match number("-n", &o.bytes, &bytes)? {
        Some(n) => a.extend(["-n".into(), (n * streams).to_string()]),
        None => a.extend([
            "-t".into(),
            format!("{}ms", (o.time.unwrap_or(10.0) * 1000.0).round()),
        ]),
    }
    a.extend(["-P".into(), streams.to_string()]);
    let default_len = match o.udp {
        true => landspeed_iperf2::spec::DEFAULT_UDP_LEN,
        false => landspeed_iperf2::spec::DEFAULT_TCP_LEN,
    };
    let len = number("-l", &o.length, &bytes)?.unwrap_or(default_len);
    a.extend(["-l".into(), len.to_string()]);
    if o.udp {
        a.push("-u".into());
    }
    if let Some(w) = number("-w", &o.window, &bytes)? {
        a.extend(["-w".into(), w.to_string()]);
    }
    // iperf 2's UDP rate without -b: 1 Mbit/s as it reads "1M" (2^20 bit/s), each stream. Frames
    // (--isochronous) go at their own mean, as iperf 2 sends them whatever -b says.
    let udp_default = match o.ipg {
        // --ipg MS: one datagram every MS milliseconds.
        Some(ms) if o.udp => Some(((len * 8) as f64 * 1e3 / ms).round().max(1.0) as u64),
        _ => o.udp.then_some(UDP_DEFAULT_BPS),
    };
    if o.isochronous.is_none() {
        let rate = |v: &str| rate_bps(v, len);
        if let Some(b) = number("-b", &o.bandwidth, &rate)?.or(udp_default) {
            a.extend(["-b".into(), (b * streams).to_string()]);
        }
    }
    if let Some(i) = o.interval.filter(|i| *i > 0.0) {
        a.extend(["-i".into(), format!("{}ms", (i * 1000.0).round())]);
    }
    if let Some(b) = &o.bind {
        a.extend(["-B".into(), b.clone()]);
    }
    for (on, flag) in [
        (o.reverse, "-R"),
        (o.full_duplex, "--bidir"),
        (o.ipv6, "-6"),
        (o.v4, "-4"),
        (o.nodelay, "-N"),
    ] {
        if on {
            a.push(flag.into());
        }
    }
    a.extend(socket_args(o)?);
    if let Some(v) = &o.fq_rate {
        let pace = fq_rate_bps(v).ok_or_else(|| format!("--fq-rate {v}: not a rate iperf 2 reads"))?;
        a.extend(["--fq-rate".into(), pace.to_string()]);
    }
    Ok(a)
}

/// iperf 2's most for a scheduled start's distance from now (its MAXDIFFTXSTART), seconds.
const TXSTART_FURTHEST_S: f64 = 3600.0;

/// `--txstart-time` as iperf 2.1.8 reads it (`%ld.%6ld`: whole seconds, then up to six digits
/// read as a count of microseconds, so `.25` is 25 µs), checked as it checks it at `now_s`: Unix
/// seconds, or why not.
fn txstart_s(v: &str, now_s: f64) -> Result<f64, String> {
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let secs: i64 = whole
        .parse()
        .map_err(|_| format!("--txstart-time {v}: not SECONDS[.MICROSECONDS] (Unix time)"))?;
    let digits: String = frac.chars().take(6).take_while(char::is_ascii_digit).collect();
    let usecs: i64 = digits.parse().unwrap_or(0);
    if secs < 0 {
        return Err(format!("--txstart-time {v}: must be a positive value"));
    }
    let at = secs as f64 + usecs as f64 / 1e6;
    if secs as f64 - now_s.floor() > TXSTART_FURTHEST_S {
        return Err(format!(
            "--txstart-time {v}: exceeds max scheduled delay of {TXSTART_FURTHEST_S} secs"
        ));
    }
    Ok(at)
}

/// `--fq-rate` as iperf 2.1.8 reads it (`bitorbyte_atoi`, then whole bytes a second for
/// SO_MAX_PACING_RATE): `k`, `m`, `g` are kilo-, mega-, gigabits, `K`, `M`, `G` kilo-, mega-,
/// gigabytes (powers of 1000); the pace in bits per second, above zero.
fn fq_rate_bps(v: &str) -> Option<u64> {
    let (num, mult) = match v.chars().last()? {
        'k' => (&v[..v.len() - 1], 1e3),
        'm' => (&v[..v.len() - 1], 1e6),
        'g' => (&v[..v.len() - 1], 1e9),
        'K' => (&v[..v.len() - 1], 8e3),
        'M' => (&v[..v.len() - 1], 8e6),
        'G' => (&v[..v.len() - 1], 8e9),
        _ => (v, 1.0),
    };
    let bits: f64 = num.parse().ok()?;
    let bytes = (bits * mult / 8.0).floor();
    (bytes >= 1.0 && bytes.is_finite()).then(|| bytes as u64 * 8)
}

/// `run` arguments for iperf 2's socket options: `-S` (its names or a number, as iperf 2's
/// `parse_ipqos` reads them), `-Z`, `-M` (a byte count as iperf 2 reads it).
fn socket_args(o: &Opts) -> Result<Vec<String>, String> {
    let mut a = vec![];
    if let Some(v) = &o.tos {
        let tos = crate::common::values::tos(v)
            .or_else(|_| crate::common::values::dscp(v))
            .map_err(|_| {
                format!("-S {v}: not a type of service iperf 2 reads (0-255, or a name such as af11)")
            })?;
        a.extend(["--tos".into(), tos.to_string()]);
    }
    if let Some(c) = &o.congestion {
        a.extend(["-C".into(), c.clone()]);
    }
    if let Some(m) = &o.mss {
        let mss = bytes(m)
            .filter(|m| (1..=u64::from(u16::MAX)).contains(m))
            .ok_or_else(|| format!("-M {m}: not a segment size (1 to 65535 bytes)"))?;
        a.extend(["-M".into(), mss.to_string()]);
    }
    Ok(a)
}

/// `--isochronous[=FPS:MEAN,STDDEV]` (`--ipg`'s gap within a frame, and `--trip-times`) on the
/// test: frames at their mean rate.
fn with_frames(
    opts: &mut landspeed_net::ClientOptions,
    given: &str,
    (ipg_ms, trip_times): (Option<f64>, bool),
) -> Result<(), String> {
    let mut f = crate::common::values::frames(given)?;
    // --ipg: the gap between a frame's datagrams.
    f.ipg_ns = ipg_ms.map_or(0, |ms| (ms * 1e6).round() as u64);
    let f = f.check().map_err(|e| e.to_string())?;
    opts.spec = opts
        .spec
        .changed(|s| {
            s.frames = Some(f);
            // Over UDP the frames' mean is the rate (each stream's: the test's is their sum);
            // over TCP they are bursts, unpaced.
            if s.transport == landspeed_core::config::Transport::Udp {
                s.rate_bps = Some(f.mean_bps * f64::from(s.streams));
            }
        })
        .map_err(|e| e.to_string())?;
    opts.trip_times = trip_times;
    Ok(())
}

/// `run`'s client options for iperf 2's command line (`--iperf2` chooses the protocol; the
/// options themselves are `run`'s), or why not.
pub(crate) fn client_options(o: &Opts, host: &str) -> Result<landspeed_net::ClientOptions, String> {
    let args = run_args(o, host)?;
    let plain: Vec<String> = args.iter().filter(|a| *a != "--iperf2").cloned().collect();
    let mut opts = crate::common::client::options_from_args(&plain)?;
    opts.connect_retries = o.connect_retries.unwrap_or(0);
    // --tcp-write-prefetch and --tcp-quickack are TCP's: over UDP 2.1.8 warns and drops them.
    opts.write_prefetch = write_prefetch(o)?;
    opts.quickack = o.quickack && !o.udp;
    // --fq-rate: said in the header as 2.1.8 says it, so that the server paces its own sending.
    opts.fq_rate_header = o.fq_rate.as_deref().and_then(fq_rate_bps).map(|b| b / 8);
    Ok(opts)
}

/// `--tcp-write-prefetch`'s bytes as iperf 2 reads a byte count (none over UDP, where iperf 2.1.8
/// warns and drops it), 1 byte to 2 GiB, or why not.
fn write_prefetch(o: &Opts) -> Result<Option<u32>, String> {
    let Some(v) = o.write_prefetch.as_deref().filter(|_| !o.udp) else {
        return Ok(None);
    };
    bytes(v)
        .filter(|b| (1..=i32::MAX as u64).contains(b))
        .map(|b| Some(b as u32))
        .ok_or_else(|| format!("--tcp-write-prefetch {v}: not a byte count from 1 to 2G"))
}

/// A UDP test's connection marks after the direction's, in iperf 2's order: no report asked
/// (`--no-udp-fin`), then the frames' `(isoch)` and `(trip-times)` (over UDP trip times mark the
/// connection too).
fn udp_mark(shown: &landspeed_core::config::TestSpec, trip_times: bool, no_fin: bool) -> &'static str {
    let timed = landspeed_core::config::TestSpec {
        trip_times,
        ..shown.clone()
    };
    match (no_fin, iperf2_text::trips_mark(&timed)) {
        (true, " (trip-times)") => " (no-udp-fin) (trip-times)",
        (true, _) => " (no-udp-fin)",
        (false, mark) => mark,
    }
}

/// The client: one test, printed as iperf 2 prints it.
fn client(o: &Opts, host: &str) -> Result<bool> {
    let mut opts = match client_options(o, host) {
        Ok(opts) => opts,
        Err(why) => return refuse(&why),
    };
    if let Some(f) = &o.isochronous {
        if let Err(e) = with_frames(&mut opts, f, (o.ipg, o.trip_times)) {
            return refuse(&e);
        }
    }
    // --trip-times: over TCP the bursts stamped and timed; over UDP the server reads each
    // datagram's one-way latency (and with --isochronous each frame's, above).
    opts.trip_times |= o.trip_times;
    opts.peer_detect = o.peer_detect;
    opts.no_udp_fin = o.no_udp_fin;
    opts.hold_back = o.txdelay_time.map(std::time::Duration::from_secs_f64);
    if let Some(v) = &o.txstart_time {
        match txstart_s(v, crate::common::unix_now_s()) {
            Ok(at) => opts.start_at_unix_s = Some(at),
            Err(why) => return refuse(&why),
        }
    }
    // --txstart-time and --tcp-write-prefetch turn -e on, as iperf 2's do.
    let enhanced = o.enhanced || o.txstart_time.is_some() || opts.write_prefetch.is_some();
    // -e over TCP: the reads of what this end receives counted, as iperf 2's client counts them.
    if enhanced && !o.udp {
        opts.read_bins = Some(opts.spec.length_bytes as usize);
    }
    // The test as its lines show it: with --trip-times over TCP its bursts are timed.
    let shown = landspeed_core::config::TestSpec {
        trip_times: opts.trip_times && !o.udp,
        ..opts.spec.spec().clone()
    };
    let style = iperf2_text::effective(
        &shown,
        &Iperf2Style {
            csv: o.style.is_some(),
            // --isochronous turns -e on, as iperf 2's does.
            enhanced: enhanced || o.isochronous.is_some(),
            format: o.format.unwrap_or('a'),
            interval_s: o.interval.filter(|i| *i > 0.0),
        },
    );
    // What the kernel refuses of -Z or -M fails in one line before the head, not after it.
    if let (false, Err(why)) = (o.udp, landspeed_net::tcp_options_taken(&opts.spec)) {
        return refuse(&why.to_string());
    }
    if !style.csv {
        out::head(&client_head_text(o, host, &opts, style.enhanced));
    }
    let interrupt = crate::common::client::interrupt_flag()?;
    let mut live = Live::new(&style, &shown);
    live.start_at = opts.start_at_unix_s;
    live.hold_back = o.txdelay_time;
    if o.udp {
        live.mark = udp_mark(&shown, opts.trip_times, o.no_udp_fin);
    }
    match landspeed_net::run_iperf2_client(&opts, &interrupt, &mut |ev| live.event(ev)) {
        Ok(r) if o.udp && o.full_duplex => {
            let head = !live.received_head;
            out::lines(&iperf2_text::totals_udp_both(&r, &style, head));
            Ok(r.streams.iter().all(|s| s.errors.is_empty()))
        }
        Ok(r) if o.udp && o.reverse => {
            out::lines(&iperf2_text::totals_udp_received(&r, &style));
            Ok(r.streams.iter().all(|s| s.errors.is_empty()))
        }
        Ok(r) if o.udp => {
            out::lines(&live.sum_head(iperf2_text::totals_udp(&r, &style), false));
            Ok(r.streams.iter().all(|s| s.errors.is_empty()))
        }
        Ok(r) => {
            let totals = tcp_totals(&r, &style, &live);
            out::lines(&live.sum_head(totals, false));
            Ok(r.streams.iter().all(|s| s.errors.is_empty()))
        }
        Err(e) => refuse(&format!("connect failed: {e}")),
    }
}

/// The client's dashed head, over UDP or TCP.
fn client_head_text(o: &Opts, host: &str, opts: &landspeed_net::ClientOptions, enhanced: bool) -> String {
    let port = o.port.unwrap_or(PORT);
    match o.udp {
        true => iperf2_text::head_udp(
            host,
            port,
            (opts.spec.length_bytes, opts.spec.udp_stream_rate_bps()),
            opts.spec.frames,
            &iperf2_text::TcpHead {
                ipg_given_ms: o.ipg.filter(|_| opts.spec.frames.is_none()),
                ..client_head(opts, enhanced, true)
            },
        ),
        false => {
            let mut h = client_head(opts, enhanced, false);
            h.fq_rate_bps = o.fq_rate.as_deref().and_then(fq_rate_bps).map(|b| b as f64);
            if o.print_mss && h.mss.is_none() {
                h.mss = landspeed_net::unconnected_mss().map(iperf2_text::MssLine::Default);
            }
            iperf2_text::head(host, port, &h)
        }
    }
}

/// A TCP test's closing lines: each stream's total and the sums; in full duplex with `-e` the
/// received streams' reads head (when no interval printed it) and the `[FDk]` lines; with `-e` and
/// several connections the `[ CT]` line.
fn tcp_totals(r: &landspeed_core::result::RunResult, style: &Iperf2Style, live: &Live) -> String {
    let totals = iperf2_text::totals_at(r, style, &live.each);
    let both = r.config.spec.direction == landspeed_core::config::Direction::Bidir;
    let fd = both && style.enhanced && !style.csv;
    let mut t = match fd && !live.received_head {
        true => with_reads_head(&totals),
        false => totals,
    };
    if fd {
        t += &iperf2_text::full_duplex_tcp_totals(r, style, !live.full_duplex_head);
    }
    if style.enhanced && !style.csv && live.each.len() > 1 {
        let facts: Vec<_> = live.each.iter().filter_map(|e| e.facts.clone()).collect();
        t += &iperf2_text::connect_times(&facts);
    }
    t
}

/// The client's head: the send buffer a TCP (or `udp`) socket like the test's is granted (asking
/// for `-w`'s), and with `-e` this process, the connections, the write size, type of service and
/// Nagle.
pub(crate) fn client_head(
    opts: &landspeed_net::ClientOptions,
    enhanced: bool,
    udp: bool,
) -> iperf2_text::TcpHead {
    let spec = &opts.spec;
    iperf2_text::TcpHead {
        window: (granted_window(udp, spec.window_bytes), spec.window_bytes),
        enhanced: enhanced.then(|| iperf2_text::EnhancedHead {
            pid: std::process::id(),
            flows: spec.streams,
            write_bytes: spec.length_bytes,
            tos: spec.tos.unwrap_or(0),
            nodelay: spec.nodelay,
            // A UDP head prints the frames' line itself (`head_udp`).
            frames: spec.frames.filter(|_| !udp),
        }),
        mss: spec.mss.map(iperf2_text::MssLine::Asked),
        congestion: spec.congestion.clone(),
        ipg_given_ms: None,
        // --fq-rate's line is the option's (client_head_text), not a pace `-b` set.
        fq_rate_bps: None,
        write_prefetch: opts.write_prefetch,
    }
}

/// The send buffer a new TCP socket asking for `asked` is granted, as iperf 2's head shows it.
pub(crate) fn granted_window(udp: bool, asked: Option<u64>) -> u64 {
    landspeed_net::granted_send_buffer(udp, asked)
}

/// `lines` with iperf 2's reads head before the first line of a stream received (`[ *k]`).
fn with_reads_head(lines: &str) -> String {
    match lines.find("[ *") {
        Some(at) => {
            let head = landspeed_report::iperf2_server_text::READS_HEAD;
            format!("{}{head}{}", &lines[..at], &lines[at..])
        }
        None => lines.to_string(),
    }
}

/// The client's lines as the test goes, as iperf 2 prints them: the connections when the streams
/// are up, each whole interval (`-i`) as it closes; the totals come from the result.
struct Live<'a> {
    style: &'a Iperf2Style,
    spec: &'a landspeed_core::config::TestSpec,
    ends: Option<iperf2_text::Ends>,
    /// Each TCP connection's own ends, in stream order (empty until they are known).
    each: Vec<iperf2_text::Ends>,
    started_unix_s: f64,
    /// UDP `--full-duplex`: the received lines' column head is printed (before the first).
    received_head: bool,
    /// UDP `--full-duplex -e`: the last interval of the streams sent (for the `[FDk]` lines once
    /// the received streams' of the same interval come), and whether their column head is printed.
    last_sent: Option<landspeed_core::result::IntervalResult>,
    full_duplex_head: bool,
    /// Each TCP stream's retransmissions counted by the last interval printed (the intervals carry
    /// the running count; `-e`'s Rtry is each interval's own, as iperf 2 prints it).
    retries: std::collections::HashMap<u32, u64>,
    /// `--trip-times -R -P`: the `[SUM]`'s head of its own is printed.
    sum_head: bool,
    /// The connection lines' mark after the direction's (`(isoch)`, `(trip-times)`).
    mark: &'static str,
    /// `--txstart-time`: when the data starts (Unix seconds), said under each connection's line.
    start_at: Option<f64>,
    /// `--txdelay-time`: how long after the connections the data starts, seconds (said as a
    /// start is, without `(epoch-start)`: the server is not told).
    hold_back: Option<f64>,
    /// When the data starts, once the connections are up (either of the two above).
    data_at: Option<f64>,
}

impl<'a> Live<'a> {
    fn new(style: &'a Iperf2Style, spec: &'a landspeed_core::config::TestSpec) -> Live<'a> {
        Live {
            style,
            spec,
            ends: None,
            each: vec![],
            started_unix_s: 0.0,
            received_head: false,
            last_sent: None,
            full_duplex_head: false,
            retries: std::collections::HashMap::new(),
            sum_head: false,
            mark: iperf2_text::trips_mark(spec),
            start_at: None,
            hold_back: None,
            data_at: None,
        }
    }

    /// `interval` with each stream's retransmissions its own (the running count less the last
    /// interval's).
    fn own_retries(
        &mut self,
        interval: &landspeed_core::result::IntervalResult,
    ) -> landspeed_core::result::IntervalResult {
        let mut own = interval.clone();
        for s in own.streams.iter_mut() {
            if let Some(total) = s.retransmits {
                let before = self.retries.insert(s.id, total).unwrap_or(0);
                s.retransmits = Some(total.saturating_sub(before));
            }
        }
        own
    }

    fn event(&mut self, ev: landspeed_net::ClientEvent) {
        use landspeed_net::ClientEvent;
        let text = match ev {
            ClientEvent::Connected { local, remote } => {
                self.ends = Some(iperf2_text::Ends {
                    tos: self.spec.tos,
                    ..iperf2_text::Ends::new(&local.to_string(), &remote.to_string())
                });
                return;
            }
            ClientEvent::StreamsConnected { connections, facts } => {
                let tos = self.spec.tos;
                self.each = (connections.iter().enumerate())
                    .map(|(k, c)| iperf2_text::Ends {
                        facts: facts.get(k).cloned(),
                        tos,
                        ..iperf2_text::Ends::between(c)
                    })
                    .collect();
                // A scheduled start (--txstart-time, --txdelay-time): the lines now, before the
                // wait, as iperf 2 prints them.
                self.started_unix_s = crate::common::unix_now_s();
                self.data_at = (self.start_at).or(self.hold_back.map(|h| self.started_unix_s + h));
                if self.data_at.is_none() {
                    return;
                }
                let each_way = 1 + u32::from(self.spec.direction == landspeed_core::config::Direction::Bidir);
                match self.started(self.each.len() as u32 * each_way) {
                    Some(t) => t,
                    None => return,
                }
            }
            ClientEvent::Started { .. } if self.data_at.is_some() => return,
            ClientEvent::Started { streams, .. } => {
                self.started_unix_s = crate::common::unix_now_s();
                match self.started(streams) {
                    Some(t) => t,
                    None => return,
                }
            }
            ClientEvent::Interval { flow, interval } => match self.interval(flow, &interval) {
                Some(t) => t,
                None => return,
            },
            // Not in this test: request/response (iperf2_bounce's), connections back (iperf2_dual's).
            ClientEvent::Transactions { .. }
            | ClientEvent::BackConnected { .. }
            | ClientEvent::Part { .. } => return,
        };
        out::lines(&text);
    }

    /// The connections' lines and the column head, when the streams are up (none in CSV).
    fn started(&self, streams: u32) -> Option<String> {
        use landspeed_core::config::{Direction, Transport};
        let (Some(ends), false) = (&self.ends, self.style.csv) else {
            return None;
        };
        let connections = if self.spec.direction == Direction::Bidir {
            streams / 2
        } else {
            streams
        };
        let when = self.style.enhanced.then_some(self.started_unix_s);
        let head = match self.spec.transport {
            Transport::Udp if self.spec.direction == Direction::Reverse => {
                iperf2_text::column_head_udp_received(self.style)
            }
            Transport::Udp => iperf2_text::column_head_udp(self.style, self.spec.frames.is_some()),
            _ => iperf2_text::client_head(self.spec, self.style),
        };
        let each = match self.each.len() == connections as usize {
            true => self.each.clone(),
            false => vec![ends.clone(); connections as usize],
        };
        // iperf 2's order: the direction, a scheduled start, trip times.
        let epoch = if self.start_at.is_some() {
            " (epoch-start)"
        } else {
            ""
        };
        let mark = format!("{epoch}{}", self.mark);
        let mut lines = iperf2_text::connected_marked(&each, self.spec.direction, when, &mark);
        if let Some(at) = self.data_at {
            lines = iperf2_text::with_start_lines(&lines, at, crate::common::unix_now_s());
        }
        if self.spec.transport == Transport::Udp && self.spec.direction == Direction::Bidir {
            // iperf 2's UDP full duplex asks for no report at the end, and says so.
            lines = lines.replace(" (full-duplex)", " (full-duplex) (no-udp-fin)");
        }
        Some(lines + head)
    }

    /// TCP `--full-duplex`: no direction's own `[SUM]`; with `-e` the received streams' reads head
    /// before their first lines and after them each connection's `[FDk]` line; with several
    /// connections the `[SUM]` of both directions; each once the sent streams' interval of the
    /// same number is known.
    fn full_duplex_tcp(
        &mut self,
        interval: &landspeed_core::result::IntervalResult,
        received: bool,
        lines: String,
    ) -> String {
        let lines: String = (lines.lines())
            .filter(|l| !l.starts_with("[SUM]"))
            .map(|l| l.to_string() + "\n")
            .collect();
        if !received {
            self.last_sent = Some(interval.clone());
            return lines;
        }
        let enhanced = self.style.enhanced;
        let head = match enhanced && !std::mem::replace(&mut self.received_head, true) {
            true => landspeed_report::iperf2_server_text::READS_HEAD,
            false => "",
        };
        let after = match self.last_sent.take() {
            Some(sent) if sent.index == interval.index => {
                let fd = match enhanced {
                    true => {
                        let first = !std::mem::replace(&mut self.full_duplex_head, true);
                        iperf2_text::full_duplex_tcp(&sent, interval, self.style, first)
                    }
                    false => String::new(),
                };
                let sum = match self.spec.streams > 1 {
                    true => iperf2_text::full_duplex_tcp_sum(&sent, interval, self.style),
                    false => String::new(),
                };
                fd + &sum
            }
            _ => String::new(),
        };
        head.to_string() + &lines + &after
    }

    /// UDP `--full-duplex`: with `-e` each connection's `[FDk]` line and with `-P` the `[SUM]` of
    /// all, once the received streams' interval (`received`) meets the sent streams' of the same
    /// number.
    fn full_duplex(&mut self, received: &landspeed_core::result::IntervalResult) -> String {
        let shown = (self.style.enhanced || self.spec.streams > 1) && !self.style.csv;
        match self.last_sent.take() {
            Some(sent) if shown && sent.index == received.index => {
                let head = !std::mem::replace(&mut self.full_duplex_head, true);
                let at = (self.spec.length_bytes, head);
                iperf2_text::full_duplex_interval((&sent, received), self.style, at)
            }
            _ => String::new(),
        }
    }

    /// `lines` with, before the first `[SUM]` of the test, the head iperf 2 prints there when its
    /// streams' lines have another: the reads' head for the timed streams this end receives
    /// (`--trip-times -R -P`), the plain `-e` head over a sender's frames (`--isochronous -P`,
    /// whose streams' lines add the frames' columns).
    fn sum_head(&mut self, lines: String, received: bool) -> String {
        use landspeed_core::config::Transport;
        let head = match (received, self.spec.transport) {
            (true, _) if self.spec.trip_times => landspeed_report::iperf2_server_text::READS_HEAD,
            (false, Transport::Udp) if self.spec.frames.is_some() => {
                iperf2_text::column_head_udp(self.style, false)
            }
            (false, _) if self.spec.frames.is_some() => iperf2_text::column_head(self.style),
            _ => return lines,
        };
        let due = !self.style.csv && lines.contains("[SUM]");
        match due && !std::mem::replace(&mut self.sum_head, true) {
            true => lines.replacen("[SUM]", &format!("{head}[SUM]"), 1),
            false => lines,
        }
    }

    /// One direction's lines of an interval (`-i`), as it closes.
    fn interval(
        &mut self,
        flow: landspeed_core::config::Flow,
        interval: &landspeed_core::result::IntervalResult,
    ) -> Option<String> {
        use landspeed_core::config::{Direction, Flow, Transport};
        let (Some(ends), Some(nominal)) = (&self.ends, self.style.interval_s) else {
            return None;
        };
        // iperf 2 prints a last, partial interval longer than a quarter of -i (its PARTIALPERCENT).
        if interval.end_s - interval.start_s <= landspeed_report::iperf2_text::PARTIAL * nominal {
            return None;
        }
        let stamp = self.started_unix_s + interval.end_s;
        let length = self.spec.length_bytes;
        Some(match self.spec.transport {
            Transport::Udp if flow == Flow::ServerToClient => {
                let both = self.spec.direction == Direction::Bidir && !self.style.csv;
                let head = match both && !std::mem::replace(&mut self.received_head, true) {
                    true => iperf2_text::column_head_udp_received(self.style),
                    false => "",
                };
                let lines = match both {
                    true => iperf2_text::interval_udp_received_streams(interval, self.style, (ends, stamp)),
                    false => iperf2_text::interval_udp_received(interval, self.style, (ends, stamp)),
                };
                head.to_string() + &lines + &self.full_duplex(interval)
            }
            Transport::Udp if self.spec.direction == Direction::Bidir => {
                self.last_sent = Some(interval.clone());
                iperf2_text::interval_udp_streams(interval, self.style, (ends, stamp, length))
            }
            Transport::Udp => {
                let lines = iperf2_text::interval_udp(interval, self.style, (ends, stamp, length));
                self.sum_head(lines, false)
            }
            _ => {
                let each = match self.each.is_empty() {
                    true => std::slice::from_ref(ends),
                    false => &self.each[..],
                };
                let received = flow == Flow::ServerToClient;
                let each = each.to_vec();
                let own = self.own_retries(interval);
                let lines = iperf2_text::interval(&own, received, self.style, (&each, stamp, length));
                let lines = self.sum_head(lines, received);
                match self.spec.direction == Direction::Bidir && !self.style.csv {
                    true => self.full_duplex_tcp(interval, received, lines),
                    false => lines,
                }
            }
        })
    }
}

/// The server: `landspeed serve` on iperf 2's port (5001 unless `-p`), in this process's place.
fn serve(o: &Opts) -> Result<bool> {
    // iperf 2's server answers -r and -d by connecting back, and UDP -R by sending: so does the
    // drop-in's.
    let mut args: Vec<String> = vec![
        "-p".into(),
        o.port.unwrap_or(PORT).to_string(),
        "--connect-back".into(),
        "--iperf2-udp-send".into(),
        // iperf 2's server lines, not landspeed's log.
        "--iperf2-text".into(),
    ];
    match &o.bind {
        // -B GROUP: the group joined on the UDP port (iperf 2's multicast server); -H its one source.
        Some(b) if super::iperf2_multicast::is_group(b) => {
            args.extend(["--join".into(), b.clone()]);
            if let Some(src) = &o.ssm_host {
                args.extend(["--join-source".into(), src.clone()]);
            }
        }
        Some(b) => args.extend(["--bind".into(), b.clone()]),
        None => {}
    }
    // --histograms turns -e on, as iperf 2's does.
    for (on, flag) in [
        (o.udp, "--iperf2-udp"),
        (o.style.is_some(), "--iperf2-csv"),
        (o.enhanced || o.histograms.is_some(), "--iperf2-enhanced"),
        (o.hide_ips, "--iperf2-hide-ips"),
        (o.realtime, "--iperf2-realtime"),
    ] {
        if on {
            args.push(flag.into());
        }
    }
    if let Some(i) = o.interval.filter(|i| *i > 0.0) {
        args.extend(["--iperf2-interval".into(), format!("{}ms", (i * 1000.0).round())]);
    }
    if let Some(f) = o.format {
        args.extend(["--iperf2-format".into(), f.to_string()]);
    }
    if let Some(h) = &o.histograms {
        if let Err(e) = landspeed_core::transit_bins::BinSpec::parse(h) {
            return refuse(&e.to_string());
        }
        args.push(format!("--iperf2-histograms={h}"));
    }
    // -x: the server leaves out its head (S) and connection lines (C), as iperf 2.1.8's does.
    if let Some(x) = &o.exclude {
        args.push(format!("--iperf2-exclude={x}"));
    }
    if let (false, Some(l)) = (o.udp, o.length.as_deref()) {
        match bytes(l) {
            Some(len) => args.extend(["--iperf2-read-len".into(), len.to_string()]),
            None => return refuse(&format!("-l {l}: not a number iperf 2 reads")),
        }
    }
    if let (false, Some(c)) = (o.udp, o.rx_clamp.as_deref()) {
        match bytes(c).filter(|b| (1..=i32::MAX as u64).contains(b)) {
            Some(b) => args.extend(["--iperf2-rx-clamp".into(), b.to_string()]),
            None => {
                return refuse(&format!(
                    "--tcp-rx-window-clamp {c}: not a byte count from 1 to 2G"
                ))
            }
        }
    }
    crate::common::become_serve(&args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(line: &str) -> Result<Opts, clap::Error> {
        Opts::try_parse_from(std::iter::once("iperf").chain(line.split_whitespace()))
    }

    fn parsed(line: &str) -> Result<Opts, String> {
        parse(
            std::iter::once("iperf")
                .chain(line.split_whitespace())
                .map(OsString::from)
                .collect(),
        )
    }

    #[test]
    fn a_hold_back_is_seconds_for_a_clients_own_tcp_streams() {
        assert_eq!(hold_back("0.5"), Ok(0.5));
        assert!(hold_back("-1").is_err() && hold_back("x").is_err() && hold_back("1e9").is_err());
        for (line, refused) in [
            ("-c h --txdelay-time 1", false),
            ("-c h --txdelay-time 1 -P 2 -i 1", false),
            ("-c h --txdelay-time 1 -u", true),
            ("-c h --txdelay-time 1 -R", true),
            ("-c h --txdelay-time 1 --full-duplex", true),
            ("-c h --txdelay-time 1 --txstart-time 1", true),
        ] {
            let o = opts(line).unwrap();
            assert_eq!(super::refused(&o).is_some(), refused, "{line}");
        }
    }

    #[test]
    fn a_host_that_does_not_resolve_is_named_as_iperf2_names_it() {
        // iperf 2.1.8's lines, captured: no head, exit 1.
        assert_eq!(unresolved("127.0.0.1", false), None);
        assert_eq!(unresolved("::1", true), None);
        assert_eq!(unresolved("239.1.1.1%lo", false), None);
        assert_eq!(
            unresolved("127.0.0.1", true).as_deref(),
            Some("ERROR: failed to find an ip address for host '127.0.0.1'")
        );
        assert_eq!(
            unresolved("no-such-host.invalid", false).as_deref(),
            Some("no-such-host.invalid: Unknown host")
        );
        assert_eq!(
            unresolved("no-such-host.invalid", true).as_deref(),
            Some("ERROR: failed to find an ip address for host 'no-such-host.invalid'")
        );
    }

    #[test]
    fn options_are_read_as_iperf2s_getopt_reads_them() {
        // A word that is none of iperf 2.1.8's options is passed over (its value then an extra
        // argument), as 2.1.8 runs on; an ambiguous prefix too.
        let o = parsed("-c h -k 1M --foo -t 2 --b").unwrap();
        assert_eq!(
            (o.client.as_deref(), o.time, o.extra),
            (Some("h"), Some(2.0), vec!["1M".to_string()])
        );
        // A long option by an unambiguous prefix, as getopt takes it.
        assert!(parsed("-c h --trip").unwrap().trip_times);
        // An option that takes its value only after `=`: a separate word is an extra argument.
        let o = parsed("-c h --isochronous 60:1m,0.2m").unwrap();
        assert_eq!((o.isochronous.as_deref(), o.extra.len()), (Some(""), 1));
        assert_eq!(
            parsed("-c h --isochronous=60:1m,0.2m")
                .unwrap()
                .isochronous
                .as_deref(),
            Some("60:1m,0.2m")
        );
        // One of 2.1.8's options the drop-in lacks is refused by name.
        for (line, name) in [
            ("-c h -C", "-C"),
            ("-c h --tcp-write-times", "--tcp-write-times"),
            ("-c h --tcp-write-t", "--tcp-write-t"),
        ] {
            let e = parsed(line).err().unwrap_or_default();
            assert!(
                e.starts_with(&format!("landspeed iperf2 does not support {name}:")),
                "{line}: {e}"
            );
        }
        assert_eq!(getopt("--no"), Getopt::Ambiguous);
        assert_eq!(getopt("--nodelay"), Getopt::Known);
        assert_eq!(getopt("-q"), Getopt::Unknown);
    }

    #[test]
    fn families_realtime_and_retries_are_taken_as_iperf2_takes_them() {
        // -6 is -V; -4 beside either is neither (2.1.8 warns and resolves as without them).
        let o = families(parsed("-c h -6").unwrap());
        assert!(o.ipv6 && !o.v4);
        assert!(run_args(&o, "h").unwrap().join(" ").ends_with(" -6"));
        let o = families(parsed("-c h -4").unwrap());
        assert!(o.v4 && run_args(&o, "h").unwrap().join(" ").ends_with(" -4"));
        for line in ["-c h -4 -6", "-c h -V --v4"] {
            let o = families(parsed(line).unwrap());
            assert!(!o.v4 && !o.ipv6, "{line}");
        }
        // -z and --connect-retries are carried out, not refused; retries reach the client's options.
        let o = parsed("-c h -z --connect-retries 3 -P 2").unwrap();
        assert!(o.realtime && refused(&o).is_none());
        assert!(parsed("-c h --remove").unwrap().reverse, "2.1.8's --remove is -R");
        assert_eq!(client_options(&o, "127.0.0.1").unwrap().connect_retries, 3);
        assert!(parsed("--real -s").unwrap().realtime);
        // --tcp-write-prefetch and --tcp-quickack reach the options; over UDP they are dropped.
        let o = parsed("-c h --tcp-write-prefetch 16K --tcp-quickack -R").unwrap();
        let c = client_options(&o, "127.0.0.1").unwrap();
        assert_eq!((c.write_prefetch, c.quickack), (Some(16_384), true));
        let c = client_options(
            &parsed("-c h -u --tcp-write-prefetch 16K --tcp-quickack").unwrap(),
            "h",
        );
        assert_eq!(c.map(|c| (c.write_prefetch, c.quickack)), Ok((None, false)));
        assert!(client_options(&parsed("-c h --tcp-write-prefetch 0").unwrap(), "h").is_err());
        for line in [
            "-s --tcp-quickack",
            "-c h -d --tcp-quickack",
            "-c h --bounceback --tcp-write-prefetch 1K",
        ] {
            assert!(refused(&opts(line).unwrap()).is_some(), "{line}");
        }
        let why = refused(&opts("-c h -u --connect-retries 2").unwrap()).unwrap_or_default();
        assert!(why.contains("--connect-retries with -u"), "{why}");
        assert!(refused(&opts("-s --connect-retries 2").unwrap()).is_none());
    }

    #[test]
    fn a_rate_in_packets_a_second_is_datagrams_of_the_length() {
        assert_eq!(rate_bps("100pps", 1470), Some(100 * 1470 * 8));
        assert_eq!(rate_bps("2kpps", 100), Some(2000 * 100 * 8));
        assert_eq!(rate_bps("10m", 1470), Some(10_000_000));
        assert_eq!(rate_bps("0pps", 1470), None);
        let a = run_args(&opts("-c h -u -b 100pps -l 1000").unwrap(), "h")
            .unwrap()
            .join(" ");
        assert!(a.contains("-b 800000"), "{a}");
        assert!(refused(&opts("-c h -b 100pps").unwrap()).is_some_and(|w| w.contains("pps")));
        for line in [
            "-c h --no-udp-fin",
            "-c h -u -R --no-udp-fin",
            "-s -u --no-udp-fin",
        ] {
            let why = refused(&opts(line).unwrap()).unwrap_or_default();
            assert!(why.contains("--no-udp-fin without -u"), "{line}: {why}");
        }
        assert!(refused(&opts("-c h -u --no-udp-fin").unwrap()).is_none());
        let both = refused(&opts("-c h -u -b 1m --isochronous=60:1m,0.1m").unwrap());
        assert!(both.is_some_and(|w| w.contains("-b with --isochronous")));
    }

    #[test]
    fn byte_counts_and_rates_are_read_as_iperf2_reads_them() {
        assert_eq!(bytes("1M"), Some(1_048_576));
        assert_eq!(bytes("1m"), Some(1_000_000));
        assert_eq!(bytes("128K"), Some(131_072));
        assert_eq!(bytes("2G"), Some(2 * 1024 * 1024 * 1024));
        assert_eq!(bytes("1000"), Some(1000));
        assert_eq!(bytes("lots"), None);
        // iperf 2.1.8's client sends -b 50M at 52.4 Mbit/s and -b 50m at 50.0 (its byte_atoi).
        assert_eq!(bits("50M"), Some(50 << 20));
        assert_eq!(bits("50m"), Some(50_000_000));
        assert_eq!(bits("1g"), Some(1_000_000_000));
        assert_eq!(bits("0"), None);
        // --txstart-time as 2.1.8's `%ld.%6ld` reads it: ".25" is 25 µs; within an hour of now.
        let now = 1_800_000_000.0;
        assert_eq!(txstart_s("1800000002", now), Ok(1_800_000_002.0));
        assert_eq!(txstart_s("1800000002.25", now), Ok(1_800_000_002.000025));
        assert_eq!(txstart_s("1800000002.250000", now), Ok(1_800_000_002.25));
        assert_eq!(txstart_s("1799999000", now), Ok(1_799_999_000.0));
        assert!(txstart_s("1800003601", now)
            .unwrap_err()
            .contains("exceeds max scheduled delay"));
        assert!(txstart_s("-5", now).unwrap_err().contains("positive"));
        assert!(txstart_s("soon", now).unwrap_err().contains("not SECONDS"));
        // --fq-rate: bits lower case, bytes upper case, powers of 1000, whole bytes a second (2.1.8
        // prints 100m as 100 Mbit/s and 50M as 400 Mbit/s).
        assert_eq!(fq_rate_bps("100m"), Some(100_000_000));
        assert_eq!(fq_rate_bps("50M"), Some(400_000_000));
        assert_eq!(fq_rate_bps("1001"), Some(1000));
        assert_eq!(fq_rate_bps("7"), None);
        assert_eq!(fq_rate_bps("fast"), None);
    }

    #[test]
    fn per_stream_amounts_become_landspeeds_totals() {
        let o = opts("-c h -n 1M -P 3 -b 10m -l 1000 -w 256K -R").unwrap();
        let a = run_args(&o, "h").unwrap().join(" ");
        assert!(a.contains("-n 3145728"), "{a}");
        assert!(a.contains("-b 30000000"), "{a}");
        assert!(a.contains("-l 1000 -w 262144"), "{a}");
        assert!(a.contains("-p 5001") && a.ends_with("-R"), "{a}");
        let a = run_args(&opts("-c h -V").unwrap(), "h").unwrap().join(" ");
        assert!(a.ends_with(" -6"), "{a}");
        let o = opts("-c h --full-duplex -t 2.5").unwrap();
        let a = run_args(&o, "h").unwrap().join(" ");
        assert!(
            a.contains("-t 2500ms") && a.contains("-l 131072") && a.ends_with("--bidir"),
            "{a}"
        );
        assert!(run_args(&opts("-c h -n many").unwrap(), "h").is_err());
    }

    #[test]
    fn socket_options_are_read_as_iperf2_reads_them() {
        // -S as iperf 2.1.8's parse_ipqos: a number in C's bases, or a DiffServ name.
        for (tos, byte) in [
            ("0x10", 16),
            ("40", 40),
            ("020", 16),
            ("af11", 0x28),
            ("EF", 0xb8),
            ("lowdelay", 0x10),
        ] {
            let a = run_args(&opts(&format!("-c h -S {tos}")).unwrap(), "h")
                .unwrap()
                .join(" ");
            assert!(a.ends_with(&format!("--tos {byte}")), "{tos}: {a}");
        }
        let a = run_args(&opts("-c h -N -Z reno -M 1K").unwrap(), "h")
            .unwrap()
            .join(" ");
        assert!(a.ends_with("-N -C reno -M 1024"), "{a}");
        // --ipg MS over UDP: one datagram every MS milliseconds (-l 1470 every 10 ms: 1,176,000 bit/s).
        let a = run_args(&opts("-c h -u --ipg 10 -P 2").unwrap(), "h")
            .unwrap()
            .join(" ");
        assert!(a.contains("-b 2352000"), "{a}");
        for bad in [
            "-c h -S 256",
            "-c h -S nosuch",
            "-c h -M 0",
            "-c h -M 70000",
            "-c h -M x",
        ] {
            let why = run_args(&opts(bad).unwrap(), "h").unwrap_err();
            assert!(why.starts_with(&bad[5..7]), "{bad}: {why}");
        }
    }

    #[test]
    fn what_is_not_built_is_refused_by_name() {
        for (line, name) in [
            ("-c h --connect-only -u", "--connect-only with -u"),
            ("-c h --connect-only=5 -n 1M", "--connect-only with -u"),
            ("-c h -d -R", "-r/-d with -R"),
            ("-c h -d --bounceback", "-r/-d with --bounceback"),
            ("-c h -L 6000", "-L without -r or -d"),
            ("-s -d", "-s with -r or -d"),
            ("-c h --bounceback -R", "--bounceback with -u, -R"),
            ("-c h --bounceback -y C", "--bounceback with -y C"),
            ("-c h -R --isochronous=60:1m,100k", "--isochronous with -R"),
            ("-c h -T 4", "-T without -c GROUP"),
            ("-s -u -H 10.0.0.1", "-H without -s -B GROUP"),
            ("-s -B 239.1.1.1", "-s -B GROUP without -u"),
            ("-c h -y J", "-y other than C"),
            ("-s -Z reno", "-S, -N, -Z, -M or -m with -s"),
            ("-s -S 0x10", "-S, -N, -Z, -M or -m with -s"),
            ("-c h -u -N", "-N, -Z, -M or -m with -u"),
            (
                "-c h --bounceback -Z reno",
                "with --bounceback, --connect-only or -c GROUP",
            ),
            (
                "-c 239.1.1.1 -u -S 0x10",
                "with --bounceback, --connect-only or -c GROUP",
            ),
            ("-c h -R --sum-only", "--sum-only with"),
            ("-c h -u --fq-rate 10m", "--fq-rate with"),
            ("-c h -d --fq-rate 10m", "--fq-rate with"),
            ("-c h -R --txstart-time 1", "--txstart-time with"),
            ("-c h -u -R --txstart-time 1", "--txstart-time with"),
            ("-c h -d --txstart-time 1", "--txstart-time with"),
            ("-c h -u -X", "-X with"),
            ("-s -X", "-X with"),
            ("-c h --ipg 10", "--ipg without -u, or with -b"),
            ("-c h -u --ipg 10 -b 1m", "--ipg without -u, or with -b"),
            ("-c h -u --ipg 0", "--ipg outside (0, 60000] ms"),
            ("-c h --trip-times --histograms", "--histograms on a client"),
            ("-c h -u --udp-histograms=1m,10", "--histograms on a client"),
        ] {
            let why = refused(&opts(line).unwrap()).unwrap_or_else(|| panic!("{line} accepted"));
            assert!(why.contains(name), "{line}: {why}");
        }
        assert!(refused(&opts("-c h -y C -e -P 2 -i 1 --full-duplex").unwrap()).is_none());
        assert!(refused(&opts("-c h -d -L 6000 -P 2 -i 1 -y C").unwrap()).is_none());
        assert!(refused(&opts("-c h -r -n 1M").unwrap()).is_none());
        assert!(refused(&opts("-c h -t 1 -o out.txt").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -x CSV").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -P 2 --sum-only -y C").unwrap()).is_none());
        assert!(refused(&opts("-c h -P 2 --fq-rate 50M").unwrap()).is_none());
        assert!(refused(&opts("-c h -R --fq-rate 50M").unwrap()).is_none());
        let o = opts("-c h --full-duplex --fq-rate 100m").unwrap();
        assert_eq!(
            client_options(&o, "127.0.0.1").unwrap().fq_rate_header,
            Some(12_500_000)
        );
        assert!(refused(&opts("-c h -P 2 --trip-times --txstart-time 1").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -P 2 -b 2m --txstart-time 1").unwrap()).is_none());
        assert!(refused(&opts("-c h -R -X -e").unwrap()).is_none());
        for line in [
            "-s --histograms",
            "-s -u --histograms=10u,500,10,99",
            "-s --udp-histograms",
        ] {
            assert!(refused(&opts(line).unwrap()).is_none(), "{line}");
        }
        assert_eq!(opts("-s --histograms").unwrap().histograms.as_deref(), Some(""));
        assert!(refused(&opts("-c h -u -d -L 6000 -i 1 -y C").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -r -b 2m -t 3").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -R -t 2 -i 1 -y C").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -R -P 2 -i 1").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -R -e -i 1").unwrap()).is_none());
        assert!(refused(&opts("-c h -u --full-duplex -e").unwrap()).is_none());
        assert!(refused(&opts("-c h -u -d -e -L 6000").unwrap()).is_none());
        assert!(refused(&opts("-c h -u --full-duplex -P 2 -i 1").unwrap()).is_none());
        // A server takes UDP clients on its one port: -u there is no refusal; -e over TCP draws the
        // reads.
        assert!(refused(&opts("-s -u").unwrap()).is_none());
        assert!(refused(&opts("-s -e -l 64K -i 1").unwrap()).is_none());
        assert!(refused(&opts("-s -u -i 1 -y C -f m").unwrap()).is_none());
        assert!(refused(&opts("-s -u -e -i 1").unwrap()).is_none());
        assert!(refused(&opts("-s -u -B 232.1.1.1%eth0 -H 10.0.0.1 -i 1").unwrap()).is_none());
    }
}
