//! `landspeed run` and `landspeed demo`: build the options, run the client driver with Ctrl-C wired to a
//! clean early stop, and hand the result to the chosen output.

use crate::args::{DemoArgs, RunArgs};
use crate::output::{Format, Output};
use crate::UsageError;
use anyhow::{Context, Result};
use landspeed_campaign::directory;
use landspeed_core::config::{EndCondition, TestSpec};
use landspeed_core::result::RunResult;
use landspeed_net::client::Family;
use landspeed_net::{run_client, run_iperf3_client, ClientError, ClientOptions, Server, ServerOptions};
use landspeed_plan::sweep::{CellClient, CellSpec};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

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
    Ok(())
}

/// The protocol a run speaks to its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speak {
    /// landspeed's own (switching to iperf3's when the server turns out to be iperf3).
    Landspeed,
    /// iperf3's (`--iperf3`).
    Iperf3,
    /// The QUIC performance protocol (`--quic-perf`).
    QuicPerf,
}

fn execute(
    opts: ClientOptions,
    format: Format,
    per_stream: bool,
    interval_lines: bool,
    speak: Speak,
    measure_path: bool,
    save: Option<(crate::archive::DbArg, Option<String>)>,
) -> Result<bool> {
    check(&opts)?;
    let interval = if interval_lines {
        opts.spec.interval_s
    } else {
        std::time::Duration::ZERO
    };
    let mut out = Output::new(
        format,
        per_stream,
        interval,
        opts.host.clone(),
        opts.port,
        opts.spec.spec().clone(),
    );
    let interrupt = interrupt_flag()?;
    let path = if measure_path {
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&(opts.host.as_str(), opts.port))
            .with_context(|| format!("cannot resolve host '{}'", opts.host))?
            .find(|a| match opts.family {
                Some(Family::V4) => a.is_ipv4(),
                Some(Family::V6) => a.is_ipv6(),
                None => true,
            })
            .with_context(|| format!("host '{}' has no address of the family asked for", opts.host))?;
        out.note("measuring the path first (--path)");
        let plan = landspeed_core::path::PathPlan::for_run(&opts.host, opts.port);
        Some(crate::path::measure(&plan, addr, &interrupt, false)?)
    } else {
        None
    };
    let crossing = crate::wan::crossing();
    let outcome = match speak {
        Speak::Iperf3 => run_iperf3_client(&opts, false, &interrupt, &mut |ev| out.event(ev)),
        Speak::QuicPerf => landspeed_net::run_quic_perf(&opts, &interrupt, &mut |ev| out.event(ev)),
        Speak::Landspeed => match run_client(&opts, &interrupt, &mut |ev| out.event(ev)) {
            Err(ClientError::Iperf3Server { .. }) => {
                out.note("the server speaks iperf3; running the test with iperf3's protocol");
                run_iperf3_client(&opts, true, &interrupt, &mut |ev| out.event(ev))
            }
            other => other,
        },
    };
    match outcome {
        Ok(mut r) => {
            r.path = path;
            if let Some(e) = crossing.and_then(crate::wan::Crossing::finish) {
                landspeed_core::emulator::attach(&mut r, e);
            }
            out.result(&r);
            if let Some((db, tag)) = save {
                eprintln!("landspeed: {}", crate::archive::save(&db, &r, tag));
            }
            Ok(r.verdict().is_trusted())
        }
        Err(e) => {
            let msg = crate::flags::client(&e);
            out.error(&msg);
            Err(anyhow::anyhow!(msg))
                .with_context(|| format!("test against {} port {}", opts.host, opts.port))
        }
    }
}

/// `run --from`: the test runs between two other hosts; this one orders it and reports the result.
fn execute_ordered(
    from: &str,
    opts: ClientOptions,
    format: Format,
    per_stream: bool,
    save: Option<(crate::archive::DbArg, Option<String>)>,
) -> Result<bool> {
    check(&opts)?;
    let (fhost, fport) = landspeed_plan::mesh::plan::host_port(from).map_err(UsageError)?;
    let out = Output::new(
        format,
        per_stream,
        std::time::Duration::ZERO,
        opts.host.clone(),
        opts.port,
        opts.spec.spec().clone(),
    );
    out.note(&format!(
        "third-party test: {fhost} port {fport} runs it to {} port {}",
        opts.host, opts.port
    ));
    let conn = landspeed_net::controller::connect_host(
        &fhost,
        fport,
        opts.auth.as_ref(),
        opts.connect_timeout.max(std::time::Duration::from_secs(10)),
        1,
    )
    .with_context(|| format!("--from {from}"))?;
    let order = landspeed_core::protocol::ControlOrder {
        host: opts.host.clone(),
        port: opts.port,
        spec: opts.spec.spec().clone(),
        start_at_unix_ns: None,
    };
    let wait = landspeed_core::protocol::control::result_wait(&opts.spec);
    match conn.order(order, wait) {
        Ok(r) => {
            out.result(&r);
            if let Some((db, tag)) = save {
                eprintln!("landspeed: {}", crate::archive::save(&db, &r, tag));
            }
            Ok(r.verdict().is_trusted())
        }
        Err(e) => {
            out.error(&e.to_string());
            Err(e).with_context(|| format!("third-party test from {from} to {}", opts.host))
        }
    }
}

/// What `run` does for these arguments, as one typed value: the validated test and the client's
/// settings (also what a sweep stores for its cells).
pub fn cell_spec(a: &RunArgs) -> Result<CellSpec> {
    let mut spec = a.test.spec();
    if a.send_file.is_some() || a.recv_file.is_some() {
        // Files move over one stream in one direction, with sendfile and splice.
        spec.verify = false;
    }
    if a.quic_perf && !a.insecure && a.tls_pin.is_none() {
        return Err(UsageError(
            "--quic-perf: a perf server announces no certificate to pin; give its fingerprint with --tls-pin SHA256, or --insecure to skip the check".into(),
        )
        .into());
    }
    if a.quic_perf {
        // A perf server's payload is its own.
        spec.transport = landspeed_core::config::Transport::Quic;
        spec.verify = false;
    }
    let test = spec
        .validated()
        .map_err(|e| UsageError(crate::flags::config(&e)))?;
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
    let t = &a.test;
    let client = CellClient {
        threads: t.threads,
        cpus: t.cpus.clone().map(|c| c.0),
        bind: t.bind,
        family: if t.ipv4 {
            Some(Family::V4)
        } else if t.ipv6 {
            Some(Family::V6)
        } else {
            None
        },
        connect_timeout_s: t.connect_timeout,
        latency_probes_per_s: a.latency.then_some(a.latency_rate),
        auth: a.auth.clone(),
    };
    Ok(CellSpec {
        test,
        iperf3: a.iperf3,
        client,
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
    opts.family = c.family;
    opts.connect_timeout = c.connect_timeout_s;
    opts.latency = c
        .latency_probes_per_s
        .map(|probes_per_s| landspeed_net::client::LatencyOptions {
            probes_per_s,
            ..Default::default()
        });
    if let Some((name, file)) = &c.auth {
        let text = crate::keyfile::read(file)?;
        let key = landspeed_core::protocol::auth::client_key(name, &text)
            .map_err(|e| UsageError(format!("--auth {name}:{}: {e}", file.display())))?;
        opts.auth = Some(key);
    }
    Ok(opts)
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
    client_options(&a.run).map_err(|e| format!("{e:#}"))
}

/// The client options `run` uses for these arguments.
pub fn client_options(a: &RunArgs) -> Result<ClientOptions> {
    let mut opts = options_for(&a.host, a.test.port, &cell_spec(a)?)?;
    opts.send_file = a.send_file.clone();
    opts.recv_file = a.recv_file.clone();
    opts.remote_file = a.remote_file.clone();
    opts.tls_pin = a.tls_pin;
    Ok(opts)
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
    match run_client(opts, interrupt, &mut |_| {}) {
        Err(ClientError::Iperf3Server { .. }) => run_iperf3_client(opts, true, interrupt, &mut |_| {}),
        other => other,
    }
}

pub fn run(a: RunArgs) -> Result<bool> {
    let format = if a.json {
        Format::Json
    } else if a.json_stream {
        Format::JsonStream
    } else {
        Format::Text
    };
    if let Some(dir) = a.send_file.as_ref().filter(|p| p.is_dir()) {
        return send_directory(&a, dir, format);
    }
    let opts = client_options(&a)?;
    if let Some(from) = &a.from {
        return execute_ordered(
            from,
            opts,
            format,
            a.test.per_stream,
            (!a.no_save).then(|| (a.db.clone(), a.tag.clone())),
        );
    }
    execute(
        opts,
        format,
        a.test.per_stream,
        !a.test.interval.is_zero(),
        match (a.iperf3, a.quic_perf) {
            (true, _) => Speak::Iperf3,
            (false, true) => Speak::QuicPerf,
            (false, false) => Speak::Landspeed,
        },
        a.measure_path,
        (!a.no_save).then(|| (a.db.clone(), a.tag.clone())),
    )
}

/// `--send-file DIR`: every regular file of DIR (not its subdirectories), in name order, one test each,
/// each reported and archived on its own; a closing table gives each file's verdict and rates.
fn send_directory(a: &RunArgs, dir: &std::path::Path, format: Format) -> Result<bool> {
    if format == Format::Json {
        return Err(UsageError(
            "--send-file DIR runs one test per file: use --json-stream (one end event per file), not --json"
                .into(),
        )
        .into());
    }
    if a.remote_file.is_some() {
        return Err(UsageError("--remote-file names one file; it cannot go with a directory".into()).into());
    }
    let files = directory::files(dir).map_err(|e| UsageError(format!("--send-file {e}")))?;
    let mut send = |f: &std::path::Path| -> Result<bool, String> {
        let mut opts = client_options(a).map_err(|e| format!("{e:#}"))?;
        opts.send_file = Some(f.to_path_buf());
        execute(
            opts,
            format,
            a.test.per_stream,
            !a.test.interval.is_zero(),
            Speak::Landspeed,
            false,
            (!a.no_save).then(|| (a.db.clone(), a.tag.clone())),
        )
        .map_err(|e| format!("{e:#}"))
    };
    let verdicts = directory::send_each(&files, &mut send, &mut |v| {
        if let Err(e) = &v.outcome {
            eprintln!("landspeed: error: {}: {e}", v.path.display());
        }
    });
    if format == Format::Text {
        println!("\nDirectory {}: {} file(s)", dir.display(), files.len());
        for v in &verdicts {
            println!(
                "  {}  {}",
                if v.ok() { "ok    " } else { "FAILED" },
                v.path.display()
            );
        }
    }
    Ok(verdicts.iter().all(|v| v.ok()))
}

/// The default job: a loopback server in this process and a 4-stream, 5-second test against it.
pub fn demo(a: DemoArgs) -> Result<bool> {
    let sopts = ServerOptions {
        bind: Some("127.0.0.1".parse()?),
        port: 0,
        ..ServerOptions::default()
    };
    let server = Server::bind(sopts, Arc::new(|_| {})).context("cannot start the loopback server")?;
    let port = server
        .local_addrs()
        .first()
        .map(|a| a.port())
        .context("server has no address")?;
    let stop = Arc::new(AtomicBool::new(false));
    let handle = std::thread::spawn({
        let stop = stop.clone();
        move || server.run(&stop)
    });
    let spec = TestSpec {
        streams: a.streams,
        end: EndCondition::Time(a.time),
        ..TestSpec::default()
    };
    if !a.json {
        println!(
            "landspeed demo: loopback server on 127.0.0.1:{port}, {} streams for {:?}",
            a.streams, a.time
        );
    }
    let test = spec
        .validated()
        .map_err(|e| UsageError(crate::flags::config(&e)))?;
    let opts = ClientOptions::new("127.0.0.1", port, test);
    let result = execute(
        opts,
        if a.json { Format::Json } else { Format::Text },
        false,
        true,
        Speak::Landspeed,
        false,
        None,
    );
    stop.store(true, Relaxed);
    let _ = handle.join();
    result
}
