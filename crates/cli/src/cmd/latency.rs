//! `landspeed latency HOST`: latency under load in phases (idle, download, upload, both, idle
//! again), echo probes on a flow of their own throughout, each loaded phase one landspeed test. The
//! summary per phase (core's `path::phases`) says which direction the load queued; docs/latency.md
//! has the method.

use crate::common::client::{interrupt_flag, options_from_args, run_quiet};
use crate::common::crossing::{self, Disciplines};
use crate::common::{values, UsageError};
use anyhow::{Context, Result};
use clap::Args;
use landspeed_core::config::Flow;
use landspeed_core::path::{DisciplineRun, LatencyByDiscipline, Load, PhaseSpan, PhasedLatency, ProbeSample};
use landspeed_path::echo::{self, Background, EchoParams};
use landspeed_report::html::{report_html, Subject};
use landspeed_report::plot::Figure;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct LatencyArgs {
    /// A landspeed server (its UDP port answers the probes; its tests load the path).
    pub host: String,
    /// The server's port.
    #[arg(short, long, default_value_t = 5201)]
    pub port: u16,
    /// How long each of the five phases lasts.
    #[arg(long, default_value = "5s", value_parser = values::duration)]
    pub phase: Duration,
    /// Streams each way in the loaded phases.
    #[arg(short = 'P', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    pub streams: u32,
    /// Echo probes per second.
    #[arg(long, default_value_t = 20.0)]
    pub latency_rate: f64,
    /// Another `landspeed run` option for the loaded phases' tests, e.g. --run-arg=-C --run-arg=bbr
    /// (repeatable).
    #[arg(long = "run-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub run_args: Vec<String>,
    /// The loaded tests' traffic class: a DSCP by name or number (e.g. cs1 for background, ef),
    /// passed to each test as its TOS byte.
    #[arg(long, value_name = "DSCP", value_parser = values::dscp)]
    pub dscp: Option<u8>,
    /// The probes' traffic class: a DSCP by name or number, or `load` for the loaded tests' own
    /// (--dscp); default best effort. Probes in another class than the load show whether the
    /// network protects that class from the load's queue.
    #[arg(long, value_name = "DSCP|load")]
    pub probe_dscp: Option<String>,
    /// One JSON document (schema landspeed-latency/1).
    #[arg(long)]
    pub json: bool,
    /// Write the figures (every probe over time with the phases shaded; RTT per phase) as SVG and
    /// PNG into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<std::path::PathBuf>,
    /// Write one HTML page with the figures and the text report (self-contained: the figures are
    /// inline SVG).
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// Run the phases once per queue discipline, comma-separated (tail-drop, codel, pie, fq-codel,
    /// dualpi2, with their parameters as `wan up --aqm` takes them), switching the emulator this runs
    /// in before each (`wan change aqm=`) and putting its discipline back after: one command compares
    /// them on the same emulated path. Run inside the emulator's host A:
    /// `landspeed wan exec NAME a -- landspeed latency 198.18.0.2 --aqm tail-drop,fq-codel,dualpi2`.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub aqm: Vec<String>,
}

/// Runs the phases (once per `--aqm` discipline if given); true when every phase ran and had probes
/// answered.
pub fn latency(a: LatencyArgs) -> Result<bool> {
    if !(0.1..=1000.0).contains(&a.latency_rate) || a.phase < Duration::from_secs(1) {
        return Err(
            UsageError("--latency-rate must be 0.1..=1000 probes/s and --phase at least 1s".into()).into(),
        );
    }
    probe_tos(&a)?;
    for aqm in &a.aqm {
        Disciplines::check(aqm).map_err(|e| UsageError(format!("--aqm: {e}")))?;
    }
    let interrupt = interrupt_flag()?;
    if !a.aqm.is_empty() {
        return compare(&a, &interrupt);
    }
    let r = phases(&a, &interrupt)?;
    let text = landspeed_report::path_text::phased(&r);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        out!("{text}");
    }
    let heading = format!("latency under load to {}", a.host);
    figures(&a, &heading, &text, || {
        landspeed_report::plot::latency_figures(&r)
    })?;
    Ok(complete(&r))
}

/// `--plots` and `--html`, when asked for: the figures `draw` makes, and the page with them and `text`.
fn figures(
    a: &LatencyArgs,
    heading: &str,
    text: &str,
    draw: impl FnOnce() -> Result<Vec<Figure>, landspeed_report::plot::PlotError>,
) -> Result<()> {
    if a.plots.is_none() && a.html.is_none() {
        return Ok(());
    }
    let figs = draw()?;
    if let Some(dir) = &a.plots {
        crate::common::sweep_output::write_plots(dir, &figs)?;
    }
    if let Some(path) = &a.html {
        let page = report_html(
            &Subject::Latency { heading, text },
            &figs,
            &crate::common::now_utc(),
        );
        crate::common::sweep_output::write_file(path, page.as_bytes())?;
    }
    Ok(())
}

/// Every phase ran, its test did not fail, and probes came back in it.
fn complete(r: &PhasedLatency) -> bool {
    r.phases.len() == Load::PLAN.len()
        && (r.phases.iter()).all(|p| p.span.error.is_none() && p.rtt.received > 0)
}

/// `--aqm`: the phases under each discipline of the emulator around this process, which gets its own
/// discipline back afterwards (also when a run fails or is interrupted).
fn compare(a: &LatencyArgs, interrupt: &AtomicBool) -> Result<bool> {
    let d = Disciplines::enclosing().map_err(UsageError)?;
    let mut runs = vec![];
    let mut failed = None;
    for aqm in &a.aqm {
        if interrupt.load(Relaxed) {
            break;
        }
        let run = d
            .set(aqm)
            .map_err(anyhow::Error::msg)
            .and_then(|()| phases(a, interrupt));
        match run {
            Ok(result) => runs.push(DisciplineRun {
                aqm: aqm.clone(),
                result,
            }),
            Err(e) => {
                failed = Some(e.context(format!("under {aqm}")));
                break;
            }
        }
    }
    let restored = d.restore();
    let c = LatencyByDiscipline::new(d.name(), restored.is_ok().then(|| d.original()), runs);
    let text = landspeed_report::path_text::by_discipline(&c);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        out!("{text}");
    }
    let heading = format!(
        "latency under load to {} per queue discipline of emulator {}",
        a.host,
        d.name()
    );
    figures(a, &heading, &text, || {
        landspeed_report::plot::discipline_figures(&c)
    })?;
    if let Err(e) = restored {
        anyhow::bail!(
            "could not put emulator '{}' back to {}: {e}",
            d.name(),
            d.original()
        );
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(c.runs.len() == a.aqm.len() && c.runs.iter().all(|r| complete(&r.result)))
}

/// The five phases with probes throughout.
fn phases(a: &LatencyArgs, interrupt: &AtomicBool) -> Result<PhasedLatency> {
    let addr = resolve(&a.host, a.port)?;
    let params = EchoParams {
        interval: Duration::from_secs_f64(1.0 / a.latency_rate),
        size: 64,
        linger: Duration::from_millis(500),
    };
    let probe_tos = probe_tos(a)?;
    let bg = Background::start_with(addr, params, |s| {
        landspeed_engine::sockopt::set_udp_tos(s, probe_tos).map_err(|e| std::io::Error::other(e.to_string()))
    })
    .context("cannot start the echo probes")?;
    let mut spans = vec![];
    for load in Load::PLAN {
        if interrupt.load(Relaxed) {
            break;
        }
        let start_s = bg.started().elapsed().as_secs_f64();
        let crossing = crossing::crossing();
        let started_unix_s = crate::common::unix_now_s();
        let (download_bps, upload_bps, flows_rtt_ms, error) = phase(a, load, interrupt);
        spans.push(PhaseSpan {
            load,
            start_s,
            end_s: bg.started().elapsed().as_secs_f64(),
            download_bps,
            upload_bps,
            error,
            flows_rtt_ms,
            emulator: crossing.and_then(|c| c.finish(started_unix_s)),
        });
    }
    let wall0 = bg.started_wall_ns();
    let samples: Vec<ProbeSample> = (bg.finish().iter())
        .map(|p| ProbeSample {
            sent_s: p.sent_at.as_secs_f64(),
            rtt_ms: p.rtt.map(|d| d.as_secs_f64() * 1e3),
            stamps: echo::stamps(p, wall0),
        })
        .collect();
    let mut r = PhasedLatency::new(&a.host, a.latency_rate, spans, &samples);
    (r.load_tos, r.probe_tos) = (a.dscp, probe_tos);
    Ok(r)
}

/// The probes' TOS byte: `--probe-dscp` by name or number, or `load` for `--dscp`'s.
fn probe_tos(a: &LatencyArgs) -> Result<Option<u8>> {
    match a.probe_dscp.as_deref() {
        None => Ok(None),
        Some("load") if a.dscp.is_none() => Err(UsageError("--probe-dscp load needs --dscp".into()).into()),
        Some("load") => Ok(a.dscp),
        Some(d) => values::dscp(d)
            .map(Some)
            .map_err(|e| UsageError(format!("--probe-dscp: {e}")).into()),
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host '{host}'"))?
        .next()
        .with_context(|| format!("'{host}' has no address"))
}

/// (download, upload, the flows' median TCP RTT in ms, why the test failed).
type PhaseOutcome = (Option<f64>, Option<f64>, Option<f64>, Option<String>);

/// One phase: an idle wait, or one test loading the path as `load` says.
fn phase(a: &LatencyArgs, load: Load, interrupt: &AtomicBool) -> PhaseOutcome {
    let direction = match load {
        Load::Idle => {
            let until = Instant::now() + a.phase;
            while Instant::now() < until && !interrupt.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return (None, None, None, None);
        }
        Load::Download => Some("-R"),
        Load::Upload => None,
        Load::Both => Some("--bidir"),
    };
    let mut args = vec![
        a.host.clone(),
        "-p".into(),
        a.port.to_string(),
        "-t".into(),
        format!("{}ms", a.phase.as_millis()),
        "-P".into(),
        a.streams.to_string(),
    ];
    args.extend(direction.map(String::from));
    if let Some(tos) = a.dscp {
        args.extend(["--tos".to_string(), tos.to_string()]);
    }
    args.extend(a.run_args.iter().cloned());
    let opts = match options_from_args(&args) {
        Ok(o) => o,
        Err(e) => return (None, None, None, Some(e)),
    };
    match run_quiet(&opts, false, interrupt) {
        Ok(r) => {
            let rate =
                |f: Flow| (r.directions.iter().find(|d| d.flow == f)).map(|d| d.summary.throughput_bps);
            (
                rate(Flow::ServerToClient),
                rate(Flow::ClientToServer),
                flows_rtt_ms(&r),
                None,
            )
        }
        Err(e) => (None, None, None, Some(e.to_string())),
    }
}

/// The median of every stream's smoothed TCP RTT over the run's intervals, ms (None without any).
fn flows_rtt_ms(r: &landspeed_core::result::RunResult) -> Option<f64> {
    let mut us: Vec<u32> = (r.directions.iter())
        .flat_map(|d| &d.intervals)
        .flat_map(|i| &i.streams)
        .filter_map(|s| s.rtt_us)
        .collect();
    us.sort_unstable();
    us.get(us.len() / 2).map(|&v| f64::from(v) / 1e3)
}
