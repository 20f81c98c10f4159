//! `landspeed iperf3 ARGS` (and the binary started as `iperf3`): iperf3's command line and output, so
//! a script or a perfSONAR host that runs `iperf3` can run landspeed by changing one path. The client
//! runs landspeed's data path with iperf3's protocol (against iperf3 and landspeed servers alike) and
//! prints iperf3's text or `-J` document (report::iperf3_text, report::iperf3_json); the server is
//! `landspeed serve`, which answers iperf3 clients. Options iperf3 has and landspeed cannot honour are
//! refused by name, never ignored (docs/iperf3.md lists them).

mod process;
mod stream;

use anyhow::Result;
use clap::{Args, Parser};
use landspeed_report::{iperf3_json, iperf3_text};
use std::ffi::OsString;

/// `landspeed iperf3 ARGS...`: the arguments as iperf3 takes them.
#[derive(Args, Debug)]
pub struct Iperf3Args {
    /// iperf3's arguments, e.g. `-c HOST -t 10 -P 4 -J` or `-s -1`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "IPERF3_ARGS"
    )]
    pub args: Vec<OsString>,
}

/// iperf3 3.21's options that landspeed carries out.
#[derive(Parser, Debug, Default)]
#[command(name = "iperf3", disable_version_flag = true, disable_help_flag = true)]
pub(crate) struct Opts {
    #[arg(short = 'c', long = "client")]
    client: Option<String>,
    #[arg(short = 's', long = "server")]
    server: bool,
    #[arg(short = 'p', long = "port")]
    port: Option<u16>,
    #[arg(short = 't', long = "time")]
    time: Option<f64>,
    #[arg(short = 'n', long = "bytes")]
    bytes: Option<String>,
    #[arg(short = 'k', long = "blockcount")]
    blocks: Option<String>,
    #[arg(short = 'P', long = "parallel")]
    parallel: Option<u32>,
    #[arg(short = 'R', long = "reverse")]
    reverse: bool,
    #[arg(long = "bidir")]
    bidir: bool,
    #[arg(short = 'u', long = "udp")]
    udp: bool,
    #[arg(short = 'b', long = "bitrate", alias = "bandwidth")]
    bitrate: Option<String>,
    #[arg(short = 'l', long = "length")]
    length: Option<String>,
    #[arg(short = 'w', long = "window")]
    window: Option<String>,
    #[arg(short = 'M', long = "set-mss")]
    mss: Option<u32>,
    #[arg(short = 'N', long = "no-delay")]
    no_delay: bool,
    #[arg(short = 'C', long = "congestion")]
    congestion: Option<String>,
    #[arg(short = 'O', long = "omit")]
    omit: Option<f64>,
    #[arg(short = 'i', long = "interval")]
    interval: Option<f64>,
    #[arg(short = 'J', long = "json")]
    json: bool,
    #[arg(short = 'f', long = "format")]
    format: Option<String>,
    #[arg(short = '4', long = "version4")]
    v4: bool,
    #[arg(short = '6', long = "version6")]
    v6: bool,
    #[arg(short = 'B', long = "bind")]
    bind: Option<String>,
    #[arg(short = 'Z', long = "zerocopy")]
    zerocopy: bool,
    #[arg(long = "fq-rate")]
    fq_rate: Option<String>,
    #[arg(short = 'V', long = "verbose")]
    verbose: bool,
    #[arg(short = '1', long = "one-off")]
    one_off: bool,
    #[arg(long = "idle-timeout")]
    idle_timeout: Option<u64>,
    #[arg(long = "forceflush")]
    forceflush: bool,
    #[arg(short = 'T', long = "title")]
    title: Option<String>,
    #[arg(short = 'v', long = "version")]
    version: bool,
    #[arg(short = 'h', long = "help")]
    help: bool,
    /// Options iperf3 has that landspeed refuses by name (see `refused`).
    #[arg(short = 'S', long = "tos")]
    tos: Option<String>,
    #[arg(short = 'L', long = "flowlabel")]
    flowlabel: Option<String>,
    #[arg(short = 'D', long = "daemon")]
    daemon: bool,
    #[arg(short = 'I', long = "pidfile")]
    pidfile: Option<String>,
    #[arg(long = "logfile")]
    logfile: Option<String>,
    #[arg(long = "get-server-output")]
    get_server_output: bool,
    #[arg(long = "json-stream")]
    json_stream: bool,
    #[arg(long = "timestamps", num_args = 0..=1, default_missing_value = "")]
    timestamps: Option<String>,
    #[arg(short = 'A', long = "affinity")]
    affinity: Option<String>,
    #[arg(long = "cport")]
    cport: Option<u16>,
    #[arg(short = 'F', long = "file")]
    file: Option<String>,
    #[arg(long = "rsa-private-key-path")]
    rsa_private: Option<String>,
    #[arg(long = "authorized-users-path")]
    authorized_users: Option<String>,
    #[arg(long = "username")]
    username: Option<String>,
    #[arg(long = "rsa-public-key-path")]
    rsa_public: Option<String>,
    #[arg(long = "server-bitrate-limit")]
    server_bitrate_limit: Option<String>,
    #[arg(long = "dont-fragment")]
    dont_fragment: bool,
    #[arg(short = 'm', long = "mptcp")]
    mptcp: bool,
    /// landspeed's iperf3 client receives without copying already (MSG_TRUNC): honoured as it is.
    #[arg(long = "skip-rx-copy")]
    skip_rx_copy: bool,
    /// The server's longest test: `landspeed serve --max-duration`.
    #[arg(long = "server-max-duration")]
    server_max_duration: Option<u64>,
    /// More options iperf3 3.21 has, each refused by name (see `refused_more`).
    #[arg(long = "bind-dev")]
    bind_dev: Option<String>,
    #[arg(long = "json-stream-full-output")]
    json_stream_full: bool,
    #[arg(long = "rcv-timeout", allow_hyphen_values = true)]
    rcv_timeout: Option<String>,
    #[arg(long = "snd-timeout", allow_hyphen_values = true)]
    snd_timeout: Option<String>,
    #[arg(long = "cntl-ka", num_args = 0..=1, default_missing_value = "")]
    cntl_ka: Option<String>,
    #[arg(short = 'd', long = "debug", num_args = 0..=1, default_missing_value = "")]
    debug: Option<String>,
    #[arg(long = "time-skew-threshold")]
    time_skew: Option<String>,
    #[arg(long = "use-pkcs1-padding")]
    pkcs1: bool,
    #[arg(long = "connect-timeout")]
    connect_timeout: Option<String>,
    #[arg(long = "pacing-timer")]
    pacing_timer: Option<String>,
    #[arg(long = "dscp")]
    dscp: Option<String>,
    #[arg(long = "extra-data")]
    extra_data: Option<String>,
    #[arg(long = "udp-counters-64bit")]
    udp64: bool,
    #[arg(long = "gsro")]
    gsro: bool,
    #[arg(long = "repeating-payload")]
    repeating_payload: bool,
}

/// iperf3's words for a bad command line; it exits 1 for those, as for every error.
fn parameter_error(why: &str) -> Result<bool> {
    errln!("iperf3: parameter error - {why}");
    errln!("Usage: iperf3 [-s|-c host] [options]\n       iperf3 [-h|--help] [-v|--version]");
    Ok(false)
}

/// `landspeed iperf3 ARGS`.
pub fn iperf3(a: Iperf3Args) -> Result<bool> {
    let mut argv = vec![OsString::from("iperf3")];
    argv.extend(a.args);
    main(argv)
}

/// The binary started as `iperf3`, or `landspeed iperf3`: `argv` starts with the program's name.
pub fn main(argv: Vec<OsString>) -> Result<bool> {
    let o = match Opts::try_parse_from(argv) {
        Ok(o) => o,
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("").trim_start_matches("error: ");
            return parameter_error(first);
        }
    };
    if o.version {
        outln!(
            "iperf 3.21 (landspeed {}: iperf3's command line and output)",
            landspeed_core::SOFTWARE_VERSION
        );
        return Ok(true);
    }
    if o.help {
        outln!("{HELP}");
        return Ok(true);
    }
    if let Some(why) = refused(&o) {
        return parameter_error(&why);
    }
    if let Err(e) = tos(&o) {
        return parameter_error(&e.to_string());
    }
    if let Err(why) = client_values(&o) {
        return parameter_error(why);
    }
    if let Some(Err(why)) = o
        .server_bitrate_limit
        .as_deref()
        .map(landspeed_iperf3::total_rate::TotalRateLimit::parse)
    {
        return parameter_error(&why);
    }
    match (&o.client, o.server) {
        (Some(_), true) => parameter_error("cannot be both server and client"),
        (None, false) => parameter_error("must either be a client (-c) or server (-s)"),
        (Some(_), false) if o.daemon || o.server_bitrate_limit.is_some() => {
            parameter_error("some option you are trying to set is server only")
        }
        (None, true) => with_process_options(&o, || serve(&o)),
        (Some(host), false) => with_process_options(&o, || client(&o, host)),
    }
}

/// `--logfile` and `-D` before `run` (a server's pid file is `serve --pid-file`; a client's is held
/// while it runs), with iperf3's words when one cannot be done.
fn with_process_options(o: &Opts, run: impl FnOnce() -> Result<bool>) -> Result<bool> {
    let failed = |what: &str, e: std::io::Error| {
        errln!("iperf3: error - {what}: {e}");
        Ok(false)
    };
    if let Some(f) = &o.logfile {
        if let Err(e) = process::log_to(f) {
            return failed("unable to open log file", e);
        }
    }
    if o.daemon {
        if let Err(e) = process::daemonize(o.logfile.is_some()) {
            return failed("unable to become a daemon", e);
        }
    }
    let _pid = match (&o.pidfile, o.server) {
        (Some(p), false) => match crate::common::pidfile::PidFile::write(p.as_ref()) {
            Ok(f) => Some(f),
            Err(e) => {
                errln!("iperf3: error - unable to write PID file: {e}");
                return Ok(false);
            }
        },
        _ => None,
    };
    run()
}

const HELP: &str = "Usage: iperf3 [-s|-c host] [options]   (landspeed's iperf3 drop-in)
  -c, --client HOST   run as a client against HOST     -s, --server     run as a server
  -p, --port N        server port (5201)               -1, --one-off    serve one test, then exit
  -t, --time S        seconds to send (10)             -n, --bytes N    bytes to send instead
  -k, --blockcount N  blocks to send instead           -P, --parallel N streams
  -R, --reverse       the server sends                 --bidir          both directions
  -u, --udp           UDP                              -b, --bitrate R  per stream (UDP default 1M)
  -l, --length N      write size (TCP 128K)            -w, --window N   socket buffers
  -M, --set-mss N     TCP MSS                          -N, --no-delay   TCP_NODELAY
  -C, --congestion A  congestion control               -O, --omit S     warm-up left out
  -i, --interval S    report interval                  -J, --json       iperf3's JSON document
  -f, --format [aAkmgtKMGT] units of the text          --timestamps     time on every line
  -S, --tos N / --dscp D  type of service              -T, --title T    prefix every line
  -m, --mptcp, --dont-fragment, -D (daemon), -I FILE (pid file), --logfile FILE
  -4, -6, -B ADDR, -Z, --fq-rate R, --idle-timeout S
iperf3's protocol against any server. Against a landspeed server every byte is still verified;
against iperf3 its payload is iperf3's and is not. The JSON's `landspeed` key says which, with
landspeed's verdict and what limited each stream. --json-stream writes one event per line as it goes.
Options landspeed cannot honour are refused by name (docs/iperf3.md).";

/// `-S` or `--dscp` as the TOS byte, with iperf3's words for a bad value. Given both, `--dscp`'s
/// (iperf3 keeps whichever comes later on its command line).
fn tos(o: &Opts) -> Result<Option<u8>, landspeed_core::tos::TosError> {
    use landspeed_core::tos::{parse_dscp, parse_tos};
    let by_byte = o.tos.as_deref().map(parse_tos).transpose()?;
    let by_dscp = o.dscp.as_deref().map(parse_dscp).transpose()?;
    Ok(by_dscp.or(by_byte))
}

/// `--rcv-timeout` (ms, 100 ms to a day, a receiving client only), `--connect-timeout` (ms) and `-A
/// N[,M]` (CPUs 0-1024), checked as iperf3 checks them, with its words.
fn client_values(o: &Opts) -> Result<(), &'static str> {
    if let Some(t) = &o.rcv_timeout {
        if !t.parse::<u64>().is_ok_and(|ms| (100..=86_400_000).contains(&ms)) {
            return Err("receive timeout value is incorrect or not in range");
        }
        if o.client.is_some() && !o.reverse && !o.bidir {
            return Err("client receive timeout is valid only in receiving mode");
        }
    }
    if o.snd_timeout
        .as_deref()
        .is_some_and(|t| send_timeout_ms(t).is_none())
    {
        return Err("send timeout value is incorrect or not in range");
    }
    if o.connect_timeout
        .as_deref()
        .is_some_and(|t| t.parse::<u64>().is_err())
    {
        return Err("the connect timeout is a whole number of milliseconds");
    }
    if o.affinity.as_deref().is_some_and(|a| affinity(a).is_none()) {
        return Err("unable to set CPU affinity");
    }
    if o.flowlabel
        .as_deref()
        .is_some_and(|l| landspeed_core::tos::parse_flow_label(l).is_none())
    {
        return Err("unable to set IPv6 flow label");
    }
    if o.cntl_ka.as_deref().is_some_and(|k| keepalive(k).is_none()) {
        return Err("control connection Keepalive period should be larger than the full retry period (interval * count)");
    }
    Ok(())
}

/// `--cntl-ka[=IDLE/INTERVAL/COUNT]` (seconds, seconds, probes; each may be left empty for the
/// system's default), None when the idle time is not longer than the probes' whole retry period.
fn keepalive(k: &str) -> Option<landspeed_net::Keepalive> {
    let mut parts = k.splitn(3, '/');
    // C's atoi: an empty or non-numeric field is 0, the system's default.
    let mut next = || {
        let f = parts.next().unwrap_or("");
        let n: String = f.chars().take_while(|c| c.is_ascii_digit()).collect();
        n.parse::<u32>().ok().filter(|v| *v > 0)
    };
    let (idle_s, interval_s, count) = (next(), next(), next());
    let retry = u64::from(interval_s.unwrap_or(0)) * u64::from(count.unwrap_or(0));
    if idle_s.is_some_and(|i| u64::from(i) <= retry) {
        return None;
    }
    Some(landspeed_net::Keepalive {
        idle_s,
        interval_s,
        count,
    })
}

/// `--snd-timeout MS` as iperf3 reads it (C's `atoi`: a word is 0, which turns it off), 0 to a day.
fn send_timeout_ms(t: &str) -> Option<u64> {
    let digits: String = t
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    let ms = digits.parse::<i64>().unwrap_or(0);
    u64::try_from(ms).ok().filter(|ms| *ms <= 86_400_000)
}

/// The idle limit of a client given iperf3's timeouts: `--rcv-timeout` (a receiver's) and
/// `--snd-timeout` (TCP_USER_TIMEOUT in iperf3: a sender's unacknowledged data), the shorter; landspeed
/// ends any stream that moves nothing for its idle limit, sending or receiving.
fn idle_limit_ms(o: &Opts) -> Option<u64> {
    let rcv = o.rcv_timeout.as_deref().and_then(|t| t.parse::<u64>().ok());
    let snd = o
        .snd_timeout
        .as_deref()
        .and_then(send_timeout_ms)
        .filter(|ms| *ms > 0);
    rcv.into_iter().chain(snd).min()
}

/// `-A N[,M]`: this end's CPU and the server's, each 0-1024.
fn affinity(a: &str) -> Option<(usize, Option<usize>)> {
    let cpu = |s: &str| s.parse::<usize>().ok().filter(|c| *c <= 1024);
    match a.split_once(',') {
        Some((n, m)) => Some((cpu(n)?, Some(cpu(m)?))),
        None => Some((cpu(a)?, None)),
    }
}

/// The first option given that landspeed refuses, with why.
fn refused(o: &Opts) -> Option<String> {
    refused_first(o)
        .into_iter()
        .chain(refused_more(o))
        .find(|(on, ..)| *on)
        .map(|(_, name, why)| format!("landspeed iperf3 does not support {name}: {why}"))
}

/// iperf3's options landspeed refuses (the daemon, output, authentication and transport ones), and why.
fn refused_first(o: &Opts) -> [(bool, &'static str, &'static str); 4] {
    [
        (
            o.file.is_some(),
            "-F/--file",
            "use landspeed run --send-file / --recv-file",
        ),
        (
            o.rsa_private.is_some() != o.authorized_users.is_some(),
            "--rsa-private-key-path without --authorized-users-path (or the reverse)",
            "iperf3's server authentication needs both",
        ),
        (
            o.username.is_some() != o.rsa_public.is_some(),
            "--username without --rsa-public-key-path (or the reverse)",
            "iperf3's client authentication needs both",
        ),
        (
            o.format
                .as_deref()
                .is_some_and(|f| f.len() != 1 || !"aAkmgtKMGT".contains(f)),
            "-f/--format",
            "the units are one of a A k m g t K M G T",
        ),
    ]
}

/// The rest of iperf3 3.21's options landspeed refuses, and why.
fn refused_more(o: &Opts) -> [(bool, &'static str, &'static str); 7] {
    [
        (
            o.server && (o.rcv_timeout.is_some() || o.snd_timeout.is_some()),
            "--rcv-timeout/--snd-timeout on the server",
            "a landspeed server ends a stalled stream after its --idle-timeout",
        ),
        (
            o.server && o.cntl_ka.is_some(),
            "--cntl-ka on the server",
            "a landspeed server watches its control connections itself",
        ),
        (
            o.debug.is_some(),
            "-d/--debug",
            "iperf3's debug output has no landspeed equivalent",
        ),
        (
            o.time_skew.is_some() && o.rsa_private.is_none(),
            "--time-skew-threshold",
            "goes with iperf3's RSA authentication (--rsa-private-key-path)",
        ),
        (
            o.pkcs1 && o.rsa_private.is_none() && o.rsa_public.is_none(),
            "--use-pkcs1-padding",
            "goes with iperf3's RSA authentication",
        ),
        (
            o.pacing_timer.is_some(),
            "--pacing-timer",
            "a TCP -b is paced by the kernel (SO_MAX_PACING_RATE)",
        ),
        (
            o.gsro || o.repeating_payload,
            "--gsro/--repeating-payload",
            "not with landspeed's iperf3 client",
        ),
    ]
}

/// The server: `landspeed serve` with iperf3's options, in this process.
fn serve(o: &Opts) -> Result<bool> {
    let mut args: Vec<String> = vec!["-p".into(), o.port.unwrap_or(5201).to_string()];
    if o.one_off {
        args.push("--once".into());
    }
    if let Some(b) = &o.bind {
        args.extend(["--bind".into(), b.clone()]);
    }
    if let Some(t) = o.idle_timeout {
        args.extend(["--idle-timeout".into(), format!("{t}s")]);
    }
    args.push(if o.json { "--iperf3-json" } else { "--iperf3-text" }.into());
    // iperf3's server takes tests of any length unless told (--server-max-duration).
    let longest = o.server_max_duration.map_or("0".to_string(), |s| format!("{s}s"));
    args.extend(["--max-duration".into(), longest]);
    if let Some(l) = &o.server_bitrate_limit {
        args.extend(["--iperf3-bitrate-limit".into(), l.clone()]);
    }
    if let Some(p) = &o.pidfile {
        args.extend(["--pid-file".into(), p.clone()]);
    }
    if let (Some(k), Some(u)) = (&o.rsa_private, &o.authorized_users) {
        args.extend([
            "--iperf3-rsa-key".into(),
            k.clone(),
            "--iperf3-users".into(),
            u.clone(),
        ]);
        if let Some(s) = &o.time_skew {
            args.extend(["--iperf3-time-skew".into(), s.clone()]);
        }
        if o.pkcs1 {
            args.push("--iperf3-pkcs1".into());
        }
    }
    crate::common::become_serve(&args)
}

/// `landspeed run` arguments for iperf3's client options.
pub(crate) fn run_args(o: &Opts, host: &str) -> Vec<String> {
    let mut a = vec![
        host.to_string(),
        "-p".into(),
        o.port.unwrap_or(5201).to_string(),
        "--no-save".into(),
    ];
    let mut opt = |flag: &str, v: Option<String>| {
        if let Some(v) = v {
            a.push(flag.into());
            a.push(v);
        }
    };
    let streams = o.parallel.unwrap_or(1);
    match (&o.bytes, &o.blocks) {
        (Some(n), _) => opt("-n", Some(n.clone())),
        (_, Some(k)) => opt("-k", Some(k.clone())),
        _ => opt(
            "-t",
            Some(format!("{}ms", (o.time.unwrap_or(10.0) * 1000.0).round())),
        ),
    }
    opt("-P", o.parallel.map(|p| p.to_string()));
    // iperf3's writes: 128 KiB for TCP unless -l.
    opt("-l", o.length.clone().or_else(|| (!o.udp).then(|| "128K".into())));
    opt("-w", o.window.clone());
    opt("-M", o.mss.map(|m| m.to_string()));
    opt("-C", o.congestion.clone());
    opt("-O", o.omit.map(|s| format!("{}ms", (s * 1000.0).round())));
    opt(
        "-i",
        o.interval
            .filter(|i| *i > 0.0)
            .map(|s| format!("{}ms", (s * 1000.0).round())),
    );
    opt("-B", o.bind.clone());
    // iperf3 binds every data stream to the one port (which works for one stream); stream N here.
    opt("--cport", o.cport.map(|p| p.to_string()));
    opt("--fq-rate", o.fq_rate.clone());
    // iperf3's -b is per stream (UDP default 1 Mbit/s); landspeed's -b is the total (for TCP, each
    // stream's pace: the socket's where the kernel paces, else the engine's).
    let rate = o
        .bitrate
        .as_deref()
        .map(|b| b.split('/').next().unwrap_or(b).to_string());
    let per = match (o.udp, rate.as_deref()) {
        (true, r) => Some(r.unwrap_or("1M")),
        (false, Some(r)) if r != "0" && o.fq_rate.is_none() => Some(r),
        _ => None,
    };
    let total = per
        .and_then(|p| p.parse::<landspeed_core::units::BitRate>().ok())
        .map(|r| format!("{}", (r.bps() * f64::from(streams)).round() as u64));
    opt("-b", total);
    for (on, flag) in [
        (o.mptcp, "--mptcp"),
        // iperf3 sets DF on UDP only, and ignores it for TCP.
        (o.dont_fragment && o.udp, "--dont-fragment"),
        (o.reverse, "-R"),
        (o.bidir, "--bidir"),
        (o.udp, "-u"),
        (o.no_delay, "-N"),
        (o.v4, "-4"),
        (o.v6, "-6"),
    ] {
        if on {
            a.push(flag.into());
        }
    }
    if o.zerocopy {
        a.extend(["--tx".into(), "zerocopy".into()]);
    }
    a.extend(placement_args(o));
    a
}

/// `landspeed run` arguments for where and how the client's connections run: TOS (`-S`, `--dscp`),
/// CPUs (`-A N,M`: iperf3 pins the whole client to N, landspeed its workers; M goes to the server as
/// server_affinity) and timeouts (`--rcv-timeout`, `--connect-timeout`, in ms).
fn placement_args(o: &Opts) -> Vec<String> {
    let cpus = o.affinity.as_deref().and_then(affinity);
    [
        ("--tos", tos(o).ok().flatten().map(|t| t.to_string())),
        ("--cpus", cpus.map(|(n, _)| n.to_string())),
        ("--server-cpus", cpus.and_then(|(_, m)| m).map(|m| m.to_string())),
        ("--idle-timeout", idle_limit_ms(o).map(|ms| format!("{ms}ms"))),
        ("--bind-dev", o.bind_dev.clone()),
        (
            "--flow-label",
            // iperf3 labels TCP connections only (a UDP test ignores -L).
            o.flowlabel
                .as_deref()
                .and_then(landspeed_core::tos::parse_flow_label)
                .filter(|_| !o.udp)
                .map(|l| l.to_string()),
        ),
        (
            "--connect-timeout",
            o.connect_timeout.as_ref().map(|ms| format!("{ms}ms")),
        ),
    ]
    .into_iter()
    .filter_map(|(flag, v)| Some([flag.to_string(), v?]))
    .flatten()
    .collect()
}

/// iperf3's client authentication: `--username` and `--rsa-public-key-path`, the password from
/// IPERF3_PASSWORD or, as iperf3 does, typed at a prompt when standard input is a terminal (echo off).
/// A key that cannot make a token is said now, not at the server.
fn client_auth(o: &Opts) -> Result<Option<std::sync::Arc<landspeed_iperf3::auth::ClientAuth>>, String> {
    use landspeed_iperf3::auth::{ClientAuth, Credentials, Padding, PublicKey};
    let (Some(user), Some(path)) = (&o.username, &o.rsa_public) else {
        return Ok(None);
    };
    let password = iperf3_password()?;
    let pem = std::fs::read(path).map_err(|e| format!("--rsa-public-key-path {path}: {e}"))?;
    let key = PublicKey::from_pem(&pem).map_err(|e| format!("--rsa-public-key-path {path}: {e}"))?;
    let auth = ClientAuth {
        key,
        credentials: Credentials {
            username: user.clone(),
            password,
        },
        padding: if o.pkcs1 { Padding::Pkcs1 } else { Padding::Oaep },
    };
    auth.token(0).map_err(|e| e.to_string())?;
    Ok(Some(std::sync::Arc::new(auth)))
}

/// The password of iperf3's authentication: IPERF3_PASSWORD, else typed at a prompt when standard
/// input is a terminal (iperf3 reads it there with echo off; this prompts on the terminal itself, not
/// on standard output, so `--json` output stays JSON), else iperf3's error.
fn iperf3_password() -> Result<String, String> {
    use std::io::IsTerminal;
    if let Ok(p) = std::env::var("IPERF3_PASSWORD") {
        return Ok(p);
    }
    let refused = "you must specify a username, password, and path to a valid RSA public key (the \
                   password in IPERF3_PASSWORD, or typed at the prompt when standard input is a \
                   terminal)";
    if !std::io::stdin().is_terminal() {
        return Err(refused.into());
    }
    rpassword::prompt_password("Password: ").map_err(|e| format!("{refused}: {e}"))
}

/// The client: one test, printed as iperf3 prints it (`--json-stream`: as it goes).
fn client(o: &Opts, host: &str) -> Result<bool> {
    let args = run_args(o, host);
    let meta = iperf3_json::Iperf3Meta {
        title: o.title.clone(),
        extra_data: o.extra_data.clone(),
        ..crate::common::iperf3_meta::meta(false)
    };
    let mut opts = match crate::common::client::options_from_args(&args) {
        Ok(opts) => opts,
        Err(e) => return parameter_error(&e.to_string()),
    };
    opts.iperf3_server_output = o.get_server_output;
    opts.iperf3_title = o.title.clone();
    opts.iperf3_udp64 = o.udp64;
    opts.control_keepalive = o.cntl_ka.as_deref().and_then(keepalive);
    opts.iperf3_extra_data = o.extra_data.clone();
    opts.iperf3_auth = match client_auth(o) {
        Ok(a) => a,
        Err(e) => return parameter_error(&e),
    };
    let interrupt = crate::common::client::interrupt_flag()?;
    let port = o.port.unwrap_or(5201);
    let mut live = o
        .json_stream
        .then(|| stream::JsonStream::new(&opts.spec, host, port, meta.clone()));
    // iperf3's protocol, as the program it stands in for: landspeed's would cost an iperf3 server
    // started with -1 its one test before the switch (docs/iperf3.md). A landspeed server still
    // checks every byte (landspeed's payload key, in iperf3's protocol).
    let outcome = landspeed_net::run_iperf3_client(&opts, false, &interrupt, &mut |ev| {
        if let Some(s) = live.as_mut() {
            s.on_event(ev).iter().for_each(|l| outln!("{l}"));
        }
    });
    match outcome {
        Ok(r) => {
            print_result(o, &r, &meta, live.as_ref())?;
            Ok(r.verdict().is_trusted() || !r.payload.verified)
        }
        Err(e) => {
            print_error(o, &e, &meta)?;
            Ok(false)
        }
    }
}

/// A test that ran, as iperf3 prints it: the stream's last events, the document, or the text.
fn print_result(
    o: &Opts,
    r: &landspeed_core::result::RunResult,
    meta: &iperf3_json::Iperf3Meta,
    live: Option<&stream::JsonStream>,
) -> Result<()> {
    if let Some(s) = live {
        s.finished(r).iter().for_each(|l| outln!("{l}"));
    }
    if (o.json && !o.json_stream) || (o.json_stream && o.json_stream_full) {
        outln!(
            "{}",
            serde_json::to_string_pretty(&iperf3_json::document(r, meta))?
        );
    } else if !o.json && !o.json_stream {
        let style = iperf3_text::Style {
            rate: o.format.as_deref().and_then(|f| f.chars().next()).unwrap_or('a'),
            timestamps: o.timestamps.is_some(),
            // `--timestamps` alone is iperf3's "%c " (the time and a space); a format is as given.
            timestamp_format: o.timestamps.clone().filter(|f| !f.is_empty()),
            verbose: o.verbose.then(|| meta.clone()),
            server: false,
            title: o.title.clone(),
        };
        out!("{}", iperf3_text::render_with(r, &style));
    }
    Ok(())
}

/// A test that failed, in iperf3's words: on stderr, or in the JSON (`error`).
fn print_error(o: &Opts, e: &landspeed_net::ClientError, meta: &iperf3_json::Iperf3Meta) -> Result<()> {
    let why = crate::common::flags::client(e);
    // An iperf3 server's SERVER_ERROR: iperf3's client says it twice, the server's words first.
    let server_said = match e {
        landspeed_net::ClientError::Iperf3Refused { code, errno } => Some((*code, *errno)),
        _ => None,
    };
    // An iperf3 server that closes the conversation (`iperf3 -s` closes its listener between tests,
    // so a client that comes just then is reset): iperf3's client words it as its IECTRLCLOSE.
    let closed = matches!(
        e,
        landspeed_net::ClientError::Iperf3(landspeed_iperf3::Iperf3Error::Wait(
            landspeed_proto::WaitFailed::PeerClosed { .. }
        )) | landspeed_net::ClientError::Iperf3Control(landspeed_net::control::ControlError::Closed)
    );
    let text = if let Some((code, errno)) = server_said {
        landspeed_iperf3::strerror::words(code, errno).unwrap_or_else(|| format!("int_errno={code}"))
    } else if closed {
        "control socket has closed unexpectedly".to_string()
    } else if why.contains("cannot connect") {
        // iperf3 3.21's words, with the system's reason last.
        let reason = why.rsplit(": ").next().unwrap_or(&why);
        let reason = reason.split(" (os error").next().unwrap_or(reason);
        format!("unable to connect to server - server may have stopped running or use a different port, firewall issue, etc.: {reason}")
    } else {
        why
    };
    if o.json_stream {
        stream::JsonStream::failed(&text)
            .iter()
            .for_each(|l| outln!("{l}"));
    } else if o.json {
        let doc = crate::common::iperf3_meta::error_document(meta, &text);
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        if let Some((code, errno)) = server_said {
            errln!(
                "iperf3: {}",
                landspeed_iperf3::strerror::server_error(code, errno)
            );
        }
        errln!("iperf3: error - {text}");
    }
    Ok(())
}
