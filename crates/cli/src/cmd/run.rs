//! `landspeed run` and `landspeed demo`: build the options, run the client driver with Ctrl-C wired to a
//! clean early stop, and hand the result to the chosen output.

use crate::common::client::{check, client_options, interrupt_flag};
use crate::common::output::{Format, Output};
use crate::common::run_args::RunArgs;
use crate::common::values;
use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_campaign::directory;
use landspeed_core::config::Family;
use landspeed_core::config::{EndCondition, TestSpec};
use landspeed_net::{run_client, run_iperf3_client, ClientError, ClientOptions, Server, ServerOptions};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// The protocol a run speaks to its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speak {
    /// landspeed's own (switching to iperf3's when the server turns out to be iperf3).
    Landspeed,
    /// iperf3's (`--iperf3`).
    Iperf3,
    /// iperf 2's (`--iperf2`).
    Iperf2,
    /// iperf 2's bounceback (`--bounceback`), to either server.
    Bounceback(landspeed_net::BouncePlan),
    /// A connection each (`--connect-rate`, `--connect-only`).
    Connections(landspeed_net::Churn),
    /// The QUIC performance protocol (`--quic-perf`).
    QuicPerf,
    /// Request/response in the QUIC performance protocol (`--quic-perf --rr`, `--connect-rate`).
    QuicTransactions(landspeed_net::QuicChurn),
    /// Request/response over UDP, to the server's echo service (`--rr -u`).
    UdpTransactions,
    /// ndt7's WebSocket subtests (`--ndt7`); `tls` for wss.
    Ndt7 { tls: bool },
}

fn execute(
    opts: ClientOptions,
    format: Format,
    per_stream: bool,
    interval_lines: bool,
    (speak, load): (Speak, Option<landspeed_net::LoadPlan>),
    measure_path: bool,
    save: Option<(crate::common::store::DbArg, Option<String>)>,
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
        Some(crate::common::path_probe::measure(
            &plan, addr, &interrupt, false,
        )?)
    } else {
        None
    };
    let crossing = crate::common::crossing::crossing();
    let outcome = match load {
        Some(plan) => converse_under_load(speak, plan, &opts, &interrupt, &mut out),
        None => converse(speak, &opts, &interrupt, &mut out),
    };
    match outcome {
        Ok(mut r) => {
            r.path = path;
            if let Some(e) = crossing.and_then(|c| c.finish(r.started_unix_s)) {
                landspeed_core::emulated::attach(&mut r, e);
            }
            landspeed_core::assemble::judge_with_path(&mut r);
            out.result(&r);
            // A test in parts (iperf 2's -r): each part shown as it finished, all saved.
            let mut all = std::mem::take(&mut out.parts);
            all.push(r);
            let saved = match save {
                Some((db, tag)) => all
                    .iter()
                    .all(|r| crate::common::store::save_and_say(&db, r, tag.clone())),
                None => true,
            };
            Ok(all.iter().all(|r| r.verdict().is_trusted()) && saved)
        }
        Err(e) => {
            let msg = crate::common::flags::client(&e);
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
    save: Option<(crate::common::store::DbArg, Option<String>)>,
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
    let order = landspeed_proto::ControlOrder {
        host: opts.host.clone(),
        port: opts.port,
        spec: opts.spec.spec().clone(),
        start_at_unix_ns: None,
        multicast: None,
    };
    let wait = landspeed_proto::control::result_wait(&opts.spec);
    match conn.order(order, wait) {
        Ok(r) => {
            out.result(&r);
            let saved = match save {
                Some((db, tag)) => crate::common::store::save_and_say(&db, &r, tag),
                None => true,
            };
            Ok(r.verdict().is_trusted() && saved)
        }
        Err(e) => {
            out.error(&e.to_string());
            Err(e).with_context(|| format!("third-party test from {from} to {}", opts.host))
        }
    }
}

/// The test itself, in the protocol `speak` names.
fn converse(
    speak: Speak,
    opts: &ClientOptions,
    interrupt: &std::sync::atomic::AtomicBool,
    out: &mut Output,
) -> Result<landspeed_core::result::RunResult, ClientError> {
    match speak {
        Speak::Iperf3 => run_iperf3_client(opts, false, interrupt, &mut |ev| out.event(ev)),
        Speak::Iperf2 => landspeed_net::run_iperf2_client(opts, interrupt, &mut |ev| out.event(ev)),
        Speak::Bounceback(plan) => {
            landspeed_net::run_bounceback_client(opts, &plan, interrupt, &mut |ev| out.event(ev))
        }
        Speak::Connections(churn) => {
            landspeed_net::run_connect_rate(opts, churn, interrupt, &mut |ev| out.event(ev))
        }
        Speak::QuicPerf => landspeed_net::run_quic_perf(opts, interrupt, &mut |ev| out.event(ev)),
        Speak::UdpTransactions => {
            landspeed_net::run_udp_transactions(opts, interrupt, &mut |ev| out.event(ev))
        }
        Speak::QuicTransactions(churn) => {
            landspeed_net::run_quic_transactions(opts, churn, interrupt, &mut |ev| out.event(ev))
        }
        Speak::Ndt7 { tls } => landspeed_net::run_ndt7(opts, tls, interrupt, &mut |ev| out.event(ev)),
        Speak::Landspeed => match run_client(opts, interrupt, &mut |ev| out.event(ev)) {
            Err(ClientError::Iperf3Server { .. }) if opts.start_at.is_some() => {
                Err(ClientError::NotWithIperf3 {
                    what: "a scheduled start (--start-at): it starts when its client is ready",
                })
            }
            Err(ClientError::Iperf3Server { .. }) => {
                out.note("the server speaks iperf3; running the test with iperf3's protocol");
                run_iperf3_client(opts, true, interrupt, &mut |ev| out.event(ev))
            }
            other => other,
        },
    }
}

/// The test beside a working load (`--under-load`): the load first, settled, then the test, then
/// the load stopped and its figures kept in the test's transactions.
fn converse_under_load(
    speak: Speak,
    plan: landspeed_net::LoadPlan,
    opts: &ClientOptions,
    interrupt: &std::sync::atomic::AtomicBool,
    out: &mut Output,
) -> Result<landspeed_core::result::RunResult, ClientError> {
    out.note(&format!(
        "starting the working load ({} connection(s) {}), then {:?} for it to settle",
        plan.streams,
        match plan.direction {
            landspeed_core::config::Direction::Forward => "up",
            landspeed_core::config::Direction::Reverse => "down",
            landspeed_core::config::Direction::Bidir => "each way",
        },
        plan.settle
    ));
    let test_time = match opts.spec.end {
        EndCondition::Time(t) => t,
        _ => Duration::from_secs(3600),
    };
    let running = landspeed_net::start_load(opts, plan, test_time, interrupt)?;
    let outcome = converse(speak, opts, interrupt, out);
    let load = running.finish();
    let mut r = outcome.map_err(|e| match e {
        ClientError::Busy { reason } => ClientError::Busy {
            reason: format!("{reason} (the working load, --under-load, is one of this client's tests)"),
        },
        other => other,
    })?;
    if let Some(why) = &load.ended_early {
        r.warnings.push(format!(
            "the working load {why}: not every transaction ran under it"
        ));
    }
    if load.corrupt_blocks > 0 {
        r.warnings.push(format!(
            "the working load's payload failed its check in {} block(s)",
            load.corrupt_blocks
        ));
    }
    if let Some(t) = r.transactions.as_mut() {
        t.load = Some(load);
    }
    Ok(r)
}

/// `--under-load`'s plan, refused without a request/response test to run beside (and `--rr`'s
/// shape refused without `--rr`).
fn load_plan(a: &RunArgs) -> Result<Option<landspeed_net::LoadPlan>, UsageError> {
    let t = &a.test;
    if !t.rr && (t.request.is_some() || t.response.is_some() || t.in_flight.is_some()) {
        // clap lets them through beside a flag that conflicts with --rr (--connect-rate), so here.
        return Err(UsageError(
            "--request, --response and --in-flight go with --rr".into(),
        ));
    }
    let Some((direction, streams)) = a.under_load else {
        return Ok(None);
    };
    if !(a.test.rr || a.bounceback.is_some() || a.connect_rate || a.connect_only) {
        return Err(UsageError(
            "--under-load runs beside a request/response test: add --rr, --bounceback, --connect-rate or --connect-only".into(),
        ));
    }
    Ok(Some(landspeed_net::LoadPlan {
        direction,
        streams,
        settle: a.load_settle.unwrap_or(Duration::from_secs(1)),
        iperf2: a.iperf2,
    }))
}

/// The spec's write size where iperf 2's defaults differ from landspeed's (a transaction test's
/// requests, iperf 2's own writes), and `--connect-rate` with TLS or a key made a connection-each
/// test in landspeed's protocol (true then).
fn shape_spec(a: &RunArgs, opts: &mut ClientOptions, transactions: bool) -> Result<bool, UsageError> {
    if transactions && a.test.length.is_none() {
        // iperf 2's bounceback size.
        opts.spec = opts
            .spec
            .changed(|s| s.length_bytes = landspeed_iperf2::spec::DEFAULT_BOUNCEBACK_LEN)
            .map_err(|e| UsageError(e.to_string()))?;
    } else if a.iperf2 && a.test.length.is_none() {
        // iperf 2's own write size: an iperf 2.1.8 server sending (-R) writes the client's size from
        // a buffer of its own -l (128 KiB by default), and a larger one brings it down. Over UDP,
        // its datagram (1470 bytes).
        let len = match opts.spec.transport {
            landspeed_core::config::Transport::Udp => landspeed_iperf2::spec::DEFAULT_UDP_LEN,
            _ => landspeed_iperf2::spec::DEFAULT_TCP_LEN,
        };
        opts.spec = opts
            .spec
            .changed(|s| s.length_bytes = len)
            .map_err(|e| UsageError(e.to_string()))?;
    }
    let each = a.connect_rate && !a.quic_perf && (a.test.tls || a.auth.is_some());
    if each {
        let len = u32::try_from(opts.spec.length_bytes).unwrap_or(u32::MAX);
        opts.spec = opts
            .spec
            .changed(|s| {
                s.transactions = Some(landspeed_core::config::TransactionSpec {
                    request_bytes: len,
                    response_bytes: len,
                    in_flight: 1,
                    connect_each: true,
                })
            })
            .map_err(|e| UsageError(e.to_string()))?;
    }
    Ok(each)
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
    let mut opts = client_options(&a)?;
    let load = load_plan(&a)?;
    let bounce = a.bounceback.map(|burst| bounce_plan(&a, burst));
    let churn = match (a.connect_rate, a.connect_only) {
        (true, _) => Some(landspeed_net::Churn::Transaction),
        (_, true) => Some(landspeed_net::Churn::ConnectOnly),
        _ => None,
    };
    let each = shape_spec(&a, &mut opts, bounce.is_some() || churn.is_some())?;
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
        (
            match (a.iperf3, a.quic_perf, a.ndt7) {
                (_, true, _) if a.test.rr => Speak::QuicTransactions(landspeed_net::QuicChurn::Reuse),
                (_, true, _) if a.connect_rate => {
                    Speak::QuicTransactions(landspeed_net::QuicChurn::ConnectEach)
                }
                _ if a.test.rr && a.test.udp => Speak::UdpTransactions,
                _ if bounce.is_some() => Speak::Bounceback(bounce.unwrap_or_default()),
                _ if churn.is_some() && !each => {
                    Speak::Connections(churn.unwrap_or(landspeed_net::Churn::ConnectOnly))
                }
                _ if a.iperf2 => Speak::Iperf2,
                (true, ..) => Speak::Iperf3,
                (false, true, _) => Speak::QuicPerf,
                (false, false, true) => Speak::Ndt7 {
                    tls: crate::common::client::ndt7_target(&a.host, a.test.port)?.2,
                },
                (false, false, false) => Speak::Landspeed,
            },
            load,
        ),
        a.measure_path,
        (!a.no_save).then(|| (a.db.clone(), a.tag.clone())),
    )
}

/// `--bounceback`'s pacing from its flags (iperf 2's defaults where they are not given).
fn bounce_plan(a: &RunArgs, burst: u32) -> landspeed_net::BouncePlan {
    let d = landspeed_net::BouncePlan::default();
    landspeed_net::BouncePlan {
        burst,
        period: a.bounceback_period.unwrap_or(d.period),
        hold: a.bounceback_hold.unwrap_or(d.hold),
        quickack: !a.bounceback_no_quickack,
        trip_times: a.trip_times,
    }
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
            (Speak::Landspeed, None),
            false,
            (!a.no_save).then(|| (a.db.clone(), a.tag.clone())),
        )
        .map_err(|e| format!("{e:#}"))
    };
    let verdicts = directory::send_each(&files, &mut send, &mut |v| {
        if let Err(e) = &v.outcome {
            errln!("landspeed: error: {}: {e}", v.path.display());
        }
    });
    if format == Format::Text {
        outln!("\nDirectory {}: {} file(s)", dir.display(), files.len());
        for v in &verdicts {
            outln!(
                "  {}  {}",
                if v.ok() { "ok    " } else { "FAILED" },
                v.path.display()
            );
        }
    }
    Ok(verdicts.iter().all(|v| v.ok()))
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
        outln!(
            "landspeed demo: loopback server on 127.0.0.1:{port}, {} streams for {:?}",
            a.streams,
            a.time
        );
    }
    let test = spec
        .validated()
        .map_err(|e| UsageError(crate::common::flags::config(&e)))?;
    let opts = ClientOptions::new("127.0.0.1", port, test);
    let result = execute(
        opts,
        if a.json { Format::Json } else { Format::Text },
        false,
        true,
        (Speak::Landspeed, None),
        false,
        None,
    );
    stop.store(true, Relaxed);
    let _ = handle.join();
    result
}
