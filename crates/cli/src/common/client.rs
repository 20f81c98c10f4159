//! From arguments to a test: the checks every test's options pass, the one way from `run`'s arguments
//! (or a sweep's stored cell, or the argument list the exporter and pScheduler build) to
//! [`ClientOptions`], Ctrl-C wired to a clean early stop, and a test run with no output of its own.

use crate::common::run_args::RunArgs;
use crate::common::UsageError;
use anyhow::{Context, Result};
use landspeed_core::config::Family;
use landspeed_core::result::RunResult;
use landspeed_net::{run_client, run_iperf3_client, ClientError, ClientOptions};
use landspeed_plan::sweep::{CellClient, CellIntent, CellSpec};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A flag set by SIGINT or SIGTERM, for the test loops to stop early and cleanly.
pub fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone()).context("cannot install signal handler")?;
    }
    Ok(flag)
}

/// The checks every test's options pass before anything is sent.
pub fn check(opts: &ClientOptions) -> Result<()> {
    if let Some(t) = opts.threads {
        if t == 0 || t > 1024 {
            return Err(UsageError(format!("--threads must be 1..=1024, got {t}")).into());
        }
    }
    if let Some(c) = &opts.cpus {
        landspeed_engine::pin::check_cpus(c).map_err(|e| UsageError(format!("--cpus: {e}")))?;
    }
    let streams = opts.spec.total_streams();
    let (need, limit) = (
        landspeed_engine::rlimit::descriptors_for(streams),
        landspeed_engine::rlimit::fd_limit(),
    );
    if limit > 0 && need > limit {
        anyhow::bail!(
            "{streams} streams need about {need} open files on this end, but its open-file limit is {limit}: raise it (ulimit -n {need}, or LimitNOFILE= in a service unit) or run fewer streams"
        );
    }
    Ok(())
}

/// What `run` does for these arguments, as one typed value: the validated test and the client's
/// settings (also what a sweep stores for its cells).
/// `--isochronous` (and `--trip-times`) on the intent: frames at their mean rate, in iperf 2's
/// protocol only.
fn frames(a: &RunArgs, said: &mut landspeed_core::intent::TestIntent) -> Result<()> {
    if a.trip_times && a.bounceback.is_none() && a.isochronous.is_none() && !a.iperf2 {
        return Err(UsageError(
            "--trip-times goes with --bounceback, --isochronous, or a test with --iperf2 (TCP's bursts or UDP's datagrams timed one way)".into(),
        )
        .into());
    }
    if let Some(f) = a.isochronous {
        if !a.iperf2 {
            return Err(UsageError(
                "--isochronous sends frames in iperf 2's protocol for now: add --iperf2 (TCP bursts), or --iperf2 -u (datagrams), against `iperf -s` or `landspeed serve`".into(),
            )
            .into());
        }
        said.frames = Some(f);
        // Over UDP the frames' mean is the test's rate; over TCP a rate would pace the bursts.
        if said.rate.is_none() && a.test.udp {
            said.rate = Some(landspeed_core::intent::Rate::PerStream(
                landspeed_core::units::BitRate(f.mean_bps),
            ));
        }
    }
    Ok(())
}

pub fn cell_spec(a: &RunArgs) -> Result<CellSpec> {
    if a.test.fq_rate.is_some() {
        // Asked for by name: the kernel's pacing. (-b paces TCP everywhere: by the kernel where it
        // can, else by the engine's own cap.)
        landspeed_engine::platform::require("kernel pacing (--fq-rate)")?;
    }
    let mut said = a.test.intent();
    frames(a, &mut said)?;
    if a.send_file.is_some() || a.recv_file.is_some() {
        // Files move over one stream in one direction, with sendfile and splice, copied.
        said.no_verify = true;
        said.rx.get_or_insert(landspeed_core::config::RxMode::Copy);
    }
    if a.quic_perf && !a.insecure && a.tls_pin.is_none() {
        return Err(UsageError(
            "--quic-perf: a perf server announces no certificate to pin; give its fingerprint with --tls-pin SHA256, or --insecure to skip the check".into(),
        )
        .into());
    }
    if a.quic_perf {
        // A perf server's payload is its own. With --rr the shape is validated as landspeed's
        // request/response test's (its sizes and depth); the perf protocol's client runs it over
        // QUIC (net::quic_perf::rr).
        if !a.test.rr {
            said.transport = landspeed_core::config::Transport::Quic;
            said.no_verify = true;
        }
    }
    if a.insecure && !a.quic_perf && !a.ndt7 {
        return Err(UsageError("--insecure goes with --quic-perf or --ndt7".into()).into());
    }
    if a.ndt7 {
        let (_, _, tls) = ndt7_target(&a.host, a.test.port)?;
        if tls && !a.insecure && a.tls_pin.is_none() {
            return Err(UsageError(
                "--ndt7 over wss: give the server's certificate fingerprint with --tls-pin SHA256 (landspeed serve prints it), or --insecure to skip the check".into(),
            )
            .into());
        }
    }
    let client_cpus = landspeed_engine::cpu::cpu_count();
    let test = said
        .validated(Some(client_cpus))
        .map_err(|e| UsageError(crate::common::flags::config(&e)))?;
    if a.latency {
        if !(a.latency_rate > 0.0 && a.latency_rate <= 1000.0) {
            return Err(UsageError(format!(
                "--latency-rate must be 0..=1000 per second, got {}",
                a.latency_rate
            ))
            .into());
        }
        if a.iperf3 {
            return Err(
                UsageError("--latency needs a landspeed server's echo service, not --iperf3".into()).into(),
            );
        }
    }
    let client = cell_client(a, &test)?;
    Ok(CellSpec {
        test,
        iperf3: a.iperf3,
        client,
        intent: Some(CellIntent { said, client_cpus }),
    })
}

/// The client's side of a cell: where it connects from and how, for `test`.
fn cell_client(a: &RunArgs, test: &landspeed_core::config::Test) -> Result<CellClient> {
    let t = &a.test;
    let v6 = (t.ipv4 || t.ipv6).then_some(t.ipv6);
    let bind = t
        .bind
        .as_deref()
        .map(|b| crate::common::values::local_address_in(b, v6));
    Ok(CellClient {
        threads: t.threads,
        cpus: t.cpus.clone().map(|c| c.0),
        bind: bind.transpose().map_err(|e| UsageError(format!("-B: {e}")))?,
        cport: cport(t.cport, test)?,
        family: if t.ipv4 {
            Some(Family::V4)
        } else if t.ipv6 {
            Some(Family::V6)
        } else {
            None
        },
        connect_timeout_s: t.connect_timeout,
        idle_timeout_s: t.idle_timeout,
        latency_probes_per_s: a.latency.then_some(a.latency_rate),
        auth: a.auth.clone(),
        udp_length_from_path: t.udp && t.length.is_none(),
    })
}

/// The client options for a test of `cell` against `host`: the one way from a stored or parsed cell
/// to a run (the authentication key is read from its file here).
pub fn options_for(host: &str, port: u16, cell: &CellSpec) -> Result<ClientOptions> {
    let c = &cell.client;
    let mut opts = ClientOptions::new(host, port, cell.test.clone());
    opts.threads = c.threads;
    opts.cpus = c.cpus.clone();
    opts.bind = c.bind;
    opts.cport = c.cport;
    opts.family = c.family;
    opts.connect_timeout = c.connect_timeout_s;
    opts.idle_timeout = c.idle_timeout_s;
    opts.udp_length_from_path = c.udp_length_from_path;
    opts.latency = c
        .latency_probes_per_s
        .map(|probes_per_s| landspeed_net::LatencyOptions {
            probes_per_s,
            ..Default::default()
        });
    if let Some((name, file)) = &c.auth {
        let text = crate::common::keyfile::read(file)?;
        let key = landspeed_proto::auth::client_key(name, &text)
            .map_err(|e| crate::common::keyfile::error(&format!("--auth {name}:"), file, &e))?;
        opts.auth = Some(key);
    }
    Ok(opts)
}

/// `--cport`, checked against the test: every stream's port must exist, and QUIC has no TCP or UDP
/// socket per stream to bind.
fn cport(first: Option<u16>, test: &landspeed_core::config::Test) -> Result<Option<u16>> {
    let Some(p) = first else { return Ok(None) };
    if test.transport == landspeed_core::config::Transport::Quic {
        return Err(UsageError(
            "--cport binds TCP and UDP data connections; QUIC's streams share its connections' sockets"
                .into(),
        )
        .into());
    }
    let last = u32::from(p) + test.total_streams() - 1;
    if last > u32::from(u16::MAX) {
        return Err(UsageError(format!(
            "--cport {p}: {} streams need ports {p}..={last}, past 65535: give a lower port",
            test.total_streams()
        ))
        .into());
    }
    Ok(Some(p))
}

#[derive(clap::Parser)]
struct RunOnly {
    #[command(flatten)]
    run: RunArgs,
}

/// Client options from `landspeed run` arguments given as a list (the pScheduler tool and the
/// exporter build them), checked exactly as the command line is.
pub fn options_from_args(args: &[String]) -> Result<ClientOptions, String> {
    use clap::Parser;
    let a = RunOnly::try_parse_from(std::iter::once("run".to_string()).chain(args.iter().cloned()))
        .map_err(|e| e.to_string().trim().to_string())?;
    if a.run.iperf2 {
        return Err("--iperf2 is for `landspeed run` itself (its one test against iperf -s)".into());
    }
    client_options(&a.run).map_err(|e| format!("{e:#}"))
}

/// `--ndt7`'s HOST: `wss://NAME[:PORT]` (443), `ws://NAME[:PORT]` (80), or a bare name (wss on
/// `port`): the name, the port, and whether it is TLS.
pub fn ndt7_target(host: &str, port: u16) -> Result<(String, u16, bool)> {
    let (rest, tls, default) = match host.split_once("://") {
        Some(("wss", r)) => (r, true, 443),
        Some(("ws", r)) => (r, false, 80),
        Some((scheme, _)) => {
            return Err(UsageError(format!("--ndt7: {scheme}:// is not ndt7's (ws:// or wss://)")).into())
        }
        None => (host, true, port),
    };
    let rest = rest.trim_end_matches('/');
    if rest.contains('/') {
        return Err(UsageError(format!(
            "--ndt7 {host}: give the server only (the subtests are at /ndt/v7/download and /ndt/v7/upload)"
        ))
        .into());
    }
    let (name, port) = match rest.rsplit_once(':') {
        // A bare IPv6 address: its colons are not a port.
        Some((n, _)) if !n.ends_with(']') && n.contains(':') => (rest, default),
        Some((n, p)) => (
            n,
            p.parse()
                .map_err(|_| UsageError(format!("--ndt7 {host}: {p} is not a port")))?,
        ),
        None => (rest, default),
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    Ok((name.to_string(), port, tls))
}

/// The client options `run` uses for these arguments.
pub fn client_options(a: &RunArgs) -> Result<ClientOptions> {
    let (host, port) = match a.ndt7 {
        true => {
            let (h, p, _) = ndt7_target(&a.host, a.test.port)?;
            (h, p)
        }
        false => (a.host.clone(), a.test.port),
    };
    let cell = cell_spec(a)?;
    if a.test.bind_dev.is_some() && cell.test.transport == landspeed_core::config::Transport::Quic {
        return Err(UsageError("--bind-dev does not work with --quic (quinn owns its socket)".into()).into());
    }
    let mut opts = options_for(&host, port, &cell)?;
    opts.bind_device = a.test.bind_dev.clone();
    if a.test.flow_label.is_some() && cell.test.transport != landspeed_core::config::Transport::Tcp {
        return Err(
            UsageError("--flow-label applies to TCP data connections (iperf3's -L does too)".into()).into(),
        );
    }
    opts.flow_label = a.test.flow_label;
    opts.send_file = a.send_file.clone();
    opts.recv_file = a.recv_file.clone();
    opts.remote_file = a.remote_file.clone();
    opts.tls_pin = a.tls_pin;
    opts.trip_times = a.trip_times;
    // --start-at: iperf 2's header names the instant; landspeed's client sends `start` at it.
    match (a.start_at, a.iperf2) {
        (Some(at), true) => opts.start_at_unix_s = Some(at),
        (Some(at), false) => {
            opts.start_at = Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(at))
        }
        (None, _) => {}
    }
    connect_back(a, &mut opts)?;
    Ok(opts)
}

/// `--dualtest` or `--tradeoff` (iperf 2's -d and -r): the server's half on connections back to
/// this host; -d's test is both ways.
fn connect_back(a: &RunArgs, opts: &mut ClientOptions) -> Result<()> {
    use landspeed_iperf2::Dual;
    let dual = match (a.dualtest, a.tradeoff) {
        (true, _) => Dual::Simultaneous,
        (false, true) => Dual::Tradeoff,
        (false, false) if a.listen_port.is_some() => {
            return Err(UsageError("--listen-port goes with --dualtest or --tradeoff".into()).into())
        }
        (false, false) => return Ok(()),
    };
    if dual == Dual::Simultaneous {
        opts.spec = opts
            .spec
            .changed(|s| s.direction = landspeed_core::config::Direction::Bidir)?;
    }
    opts.connect_back = Some(landspeed_net::ConnectBackAsk {
        dual,
        listen_port: a.listen_port.unwrap_or(0),
    });
    Ok(())
}

/// Runs one test with no output of its own: landspeed's protocol, or iperf3's when asked or when the
/// server turns out to be iperf3 (a sweep cell).
pub fn run_quiet(
    opts: &ClientOptions,
    iperf3: bool,
    interrupt: &AtomicBool,
) -> Result<RunResult, ClientError> {
    if iperf3 {
        return run_iperf3_client(opts, false, interrupt, &mut |_| {});
    }
    // Request/response over UDP has a client of its own (`run --rr -u`).
    let s = opts.spec.spec();
    if s.transactions.is_some() && s.transport == landspeed_core::config::Transport::Udp {
        return landspeed_net::run_udp_transactions(opts, interrupt, &mut |_| {});
    }
    match run_client(opts, interrupt, &mut |_| {}) {
        Err(ClientError::Iperf3Server { .. }) => run_iperf3_client(opts, true, interrupt, &mut |_| {}),
        other => other,
    }
}
