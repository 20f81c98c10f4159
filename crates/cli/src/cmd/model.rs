//! `landspeed model` and `landspeed tune`: the throughput each bound predicts for a path, or for a
//! stored run with RFC 6349's figures; and the host tuning advisor, which reads this host's limits,
//! names the ones that keep the window below the bandwidth-delay product and writes (or, as root,
//! applies) the sysctl lines that lift them.

use crate::common::store::DbArg;
use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_core::units::{BitRate, Bytes};
use landspeed_model::tune::{advise, sysctl_file, Severity, Target};
use landspeed_model::{predict, rfc6349, ModelInput};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// The bottleneck's line rate (k/M/G = 1000), e.g. 10G.
    #[arg(long, value_parser = crate::common::values::rate)]
    pub rate: Option<BitRate>,
    /// Round-trip time, e.g. 100ms.
    #[arg(long, value_parser = crate::common::values::duration)]
    pub rtt: Option<Duration>,
    /// Packet loss: a probability (0.0001) or a percentage (0.01%).
    #[arg(long, value_parser = loss)]
    pub loss: Option<f64>,
    /// Maximum segment size, bytes (default 1448; with --run, the run's own).
    #[arg(long)]
    pub mss: Option<u32>,
    /// Window per stream (the smaller of send buffer and receive window).
    #[arg(long, value_parser = crate::common::values::bytes)]
    pub window: Option<Bytes>,
    /// Parallel streams.
    #[arg(long, default_value_t = 1)]
    pub streams: u32,
    /// Retransmission timeout for PFTK (default RTT + 200 ms).
    #[arg(long, value_parser = crate::common::values::duration)]
    pub rto: Option<Duration>,
    /// Model a stored run instead: its RTT, window, streams and MSS, with RFC 6349's transfer figures;
    /// --rate gives the bottleneck (else the run's path capacity), --loss the path's loss rate (else the
    /// run's retransmitted ÷ sent segments, which overstates it when losses came in bursts).
    #[arg(long, value_name = "ID")]
    pub run: Option<i64>,
    #[command(flatten)]
    pub db: DbArg,
    #[arg(long)]
    pub json: bool,
}

fn loss(s: &str) -> Result<f64, String> {
    let (v, pct) = match s.strip_suffix('%') {
        Some(v) => (v, true),
        None => (s, false),
    };
    let x: f64 = v
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a loss like 0.0001 or 0.01%"))?;
    let p = if pct { x / 100.0 } else { x };
    if p > 0.0 && p < 1.0 {
        Ok(p)
    } else {
        Err(format!("loss must be in (0, 1) or (0%, 100%), got '{s}'"))
    }
}

/// Which transport the run used when it was not plain TCP: the models take each stream as one TCP
/// connection on one path.
fn transport_note(r: &landspeed_core::result::RunResult) -> Option<String> {
    let subflows: u32 = r
        .streams
        .iter()
        .filter_map(|s| s.mptcp())
        .map(|m| m.subflows)
        .sum();
    let tls = r.data_path.tls.as_ref().map(|t| {
        format!(
            "the run carried TLS 1.3 ({}) over TCP: the models count TCP's goodput, and each {} B record of data adds {} B on the wire; a CPU-bound sender (sealing records) can fall short of them",
            t.suite,
            t.mean_record_bytes.round(),
            t.record_overhead_bytes
        )
    });
    let mptcp = (subflows > 0).then(|| {
        format!(
            "the run used Multipath TCP ({subflows} subflows over {} streams): the models take each stream as one TCP connection on one path, so a stream spread over several paths can beat them",
            r.streams.len()
        )
    });
    match (mptcp, tls) {
        (Some(m), Some(t)) => Some(format!("{m}; {t}")),
        (m, t) => m.or(t),
    }
}

pub fn model(a: ModelArgs) -> Result<bool> {
    let mut notes: Vec<String> = Vec::new();
    let (input, facts, measured) = if let Some(id) = a.run {
        let archive = a.db.open()?;
        let r = archive
            .get(id)?
            .ok_or_else(|| UsageError(format!("no run {id} in {}", archive.path())))?;
        let (mut i, f) = landspeed_model::from_run(&r, a.rate.map(|r| r.bps())).ok_or_else(|| {
            UsageError("the run has no TCP_INFO (UDP, QUIC, or iperf3's protocol): nothing to model".into())
        })?;
        // The path's loss rate when given; else the run's retransmitted ÷ sent segments, an upper
        // bound on the loss-event rate the models want.
        if a.loss.is_some() {
            i.loss = a.loss;
        } else if i.loss.is_some() {
            notes.push(
                "loss is the run's retransmitted ÷ sent segments: a burst of losses (slow start overrunning a queue) counts many times, where Mathis and PFTK count one loss event; give the path's loss rate with --loss".into(),
            );
        }
        // The path's RTT is its idle one: the mean TCP RTT of a run includes the queue the run built.
        let idle = f
            .baseline_rtt_s
            .or_else(|| r.path.as_ref()?.rtt.as_ref()?.summary.min_ms.map(|v| v / 1e3));
        if let Some(rtt) = a.rtt {
            i.rtt_s = rtt.as_secs_f64();
        } else if let Some(idle) = idle.filter(|v| *v > 0.0) {
            notes.push(format!(
                "RTT is the path's idle minimum {:.3} ms (the run's mean TCP RTT was {:.3} ms, the queue it built included); --rtt overrides",
                idle * 1e3,
                i.rtt_s * 1e3
            ));
            i.rtt_s = idle;
        } else {
            notes.push("RTT is the run's mean TCP RTT, which includes any queue the run built (run with --latency or --path to know the idle RTT; --rtt overrides)".into());
        }
        i.mss_bytes = a.mss.unwrap_or(i.mss_bytes);
        notes.extend(transport_note(&r));
        (i, Some(f), Some(r.summary.throughput_bps))
    } else {
        let rtt = a
            .rtt
            .ok_or_else(|| UsageError("--rtt is needed (or --run ID)".into()))?;
        let input = ModelInput {
            rate_bps: a.rate.map(|r| r.bps()),
            rtt_s: rtt.as_secs_f64(),
            loss: a.loss,
            mss_bytes: a.mss.unwrap_or(1448),
            window_bytes: a.window.map(|w| w.get()),
            streams: a.streams,
            rto_s: a.rto.map(|d| d.as_secs_f64()),
            ..ModelInput::default()
        };
        (input, None, None)
    };
    let p = predict(&input).map_err(|e| UsageError(e.to_string()))?;
    let t = facts.as_ref().map(rfc6349);
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "prediction": p,
                "measured_bps": measured,
                "rfc6349": t,
            }))?
        );
        return Ok(true);
    }
    let note = (!notes.is_empty()).then(|| notes.join("\nnote: "));
    out!(
        "{}",
        landspeed_report::model_text(&p, measured, t.as_ref(), note.as_deref())
    );
    Ok(true)
}

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The rate to tune for (k/M/G = 1000), e.g. 10G. With --rtt.
    #[arg(long, value_parser = crate::common::values::rate, requires = "rtt")]
    pub rate: Option<BitRate>,
    /// The path's round-trip time, e.g. 100ms. With --rate.
    #[arg(long, value_parser = crate::common::values::duration, requires = "rate")]
    pub rtt: Option<Duration>,
    /// Streams the transfer will use (the window is shared among them).
    #[arg(long, default_value_t = 1)]
    pub streams: u32,
    /// Write the sysctl lines to this file (e.g. /etc/sysctl.d/90-landspeed.conf); nothing else changes.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Apply the lines now (root only): writes each value under /proc/sys, as `sysctl -w` would.
    #[arg(long)]
    pub apply: bool,
    /// Read (and apply to) this directory instead of / (a copy of proc/sys, proc/net and sys/class/net).
    #[arg(long, hide = true, default_value = "/")]
    pub root: PathBuf,
    #[arg(long)]
    pub json: bool,
}

pub fn tune(a: TuneArgs) -> Result<bool> {
    landspeed_engine::platform::require("host tuning (tune)")?;
    if a.streams == 0 {
        return Err(UsageError("--streams must be at least 1".into()).into());
    }
    let target = match (a.rate, a.rtt) {
        (Some(r), Some(t)) if r.bps() > 0.0 && !t.is_zero() => Some(Target {
            rate_bps: r.bps(),
            rtt_s: t.as_secs_f64(),
            streams: a.streams,
        }),
        (Some(_), Some(_)) => return Err(UsageError("--rate and --rtt must be positive".into()).into()),
        _ => None,
    };
    let host = landspeed_engine::tune::read_host(&a.root);
    let advice = advise(&host, target.as_ref());
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"host": host, "advice": advice}))?
        );
    } else {
        out!("{}", landspeed_report::tune_text(&advice));
    }
    if let Some(f) = &a.write {
        std::fs::write(f, sysctl_file(&advice)).with_context(|| format!("cannot write {}", f.display()))?;
        errln!(
            "landspeed: wrote {} (load it with: sysctl -p {})",
            f.display(),
            f.display()
        );
    }
    if a.apply {
        if a.root == std::path::Path::new("/") && !crate::common::sys::is_root() {
            return Err(UsageError(
                "--apply changes kernel settings: run it as root (or use --write)".into(),
            )
            .into());
        }
        landspeed_engine::tune::apply(&a.root, &advice.sysctl_lines)?;
        let after = advise(&landspeed_engine::tune::read_host(&a.root), target.as_ref());
        let left = after
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Limit)
            .count();
        errln!(
            "landspeed: applied {} setting(s); {left} limit(s) left",
            advice.sysctl_lines.len()
        );
    }
    Ok(true)
}
