//! The archive on the command line: `run` saves every result (unless `--no-save`), `history` lists what
//! was saved (filters, table, `--json`, `--csv`), `show ID` prints one stored run as `run` printed it.

use crate::common::store::DbArg;
use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_archive::{to_csv, Filter};
use landspeed_core::result::parse_utc;
use landspeed_core::units::BitRate;

#[derive(Args, Debug)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Only runs against this host (as given to `run`).
    #[arg(long)]
    pub host: Option<String>,
    /// Only runs saved with this `--tag`.
    #[arg(long)]
    pub tag: Option<String>,
    /// Only runs started on or after this day or instant (UTC: 2026-11-22 or 2026-11-22T10:00:00Z).
    #[arg(long, value_parser = utc)]
    pub since: Option<f64>,
    /// Only runs started before this day or instant (UTC).
    #[arg(long, value_parser = utc)]
    pub until: Option<f64>,
    /// Only the runs of this sweep.
    #[arg(long)]
    pub sweep: Option<i64>,
    /// Only runs a direction of which was held back by this (path_capacity, receive_window,
    /// send_buffer, system_cap, loss_and_congestion_control, pacing, peer_limit, sender_cpu,
    /// receiver_cpu, unknown; docs/diagnosis.md)
    #[arg(long, value_parser = limit_kind)]
    pub limited_by: Option<landspeed_core::limit::LimitKind>,
    /// At most this many (newest first).
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    /// The rows as a JSON array.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// The rows as CSV (export).
    #[arg(long)]
    pub csv: bool,
    /// List the sweeps instead of the runs (id, host, status, runs done of planned).
    #[arg(long, conflicts_with_all = ["host", "tag", "since", "until", "sweep", "csv", "limited_by"])]
    pub sweeps: bool,
}

fn sweeps(archive: &landspeed_archive::Archive, limit: u32, json: bool) -> Result<bool> {
    let rows = archive.list_sweeps(limit)?;
    let mut out = Vec::new();
    for (s, done) in rows {
        let plan: Option<landspeed_plan::sweep::SweepPlan> = serde_json::from_str(&s.plan_json).ok();
        out.push(serde_json::json!({
            "id": s.id,
            "created_utc": s.created_utc,
            "host": s.host,
            "status": s.status,
            "runs_done": done,
            "runs_planned": plan.as_ref().map(|p| p.cells().len()),
            "windows": plan.as_ref().map(|p| p.windows_bytes.len()),
            "streams": plan.as_ref().map(|p| p.streams.clone()),
            "command_line": plan.as_ref().map(|p| p.command_line.clone()),
        }));
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else if out.is_empty() {
        outln!("no sweeps in {}", archive.path());
    } else {
        outln!(
            "{:>6}  {:<20}  {:<24} {:<12} {:>11}  grid",
            "sweep",
            "created (UTC)",
            "host",
            "status",
            "runs"
        );
        for s in &out {
            outln!(
                "{:>6}  {:<20}  {:<24} {:<12} {:>11}  {} windows × streams {}",
                s["id"].as_i64().unwrap_or(0),
                s["created_utc"].as_str().unwrap_or(""),
                s["host"].as_str().unwrap_or(""),
                s["status"].as_str().unwrap_or(""),
                format!("{}/{}", s["runs_done"], s["runs_planned"]),
                s["windows"],
                s["streams"]
            );
        }
    }
    Ok(true)
}

fn limit_kind(s: &str) -> Result<landspeed_core::limit::LimitKind, String> {
    landspeed_core::limit::LimitKind::from_label(s).ok_or_else(|| {
        format!(
            "'{s}' is not a limit; one of {}",
            landspeed_core::limit::LimitKind::ALL
                .map(|k| k.label())
                .join(", ")
        )
    })
}

fn utc(s: &str) -> Result<f64, String> {
    parse_utc(s).ok_or_else(|| format!("'{s}' is not a UTC date like 2026-11-22 or 2026-11-22T10:00:00Z"))
}

pub fn history(a: HistoryArgs) -> Result<bool> {
    let archive = a.db.open()?;
    if a.sweeps {
        return sweeps(&archive, a.limit, a.json);
    }
    let rows = archive.list(&Filter {
        host: a.host,
        tag: a.tag,
        since_unix_s: a.since,
        until_unix_s: a.until,
        sweep_id: a.sweep,
        limited_by: a.limited_by,
        limit: Some(a.limit),
    })?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else if a.csv {
        out!("{}", to_csv(&rows));
    } else if rows.is_empty() {
        outln!("no runs in {} match", archive.path());
    } else {
        outln!(
            "{:>6}  {:<20}  {:<24} {:<9} {:<7} {:>3} {:>10}  {:>26}  {:<28} tag",
            "id",
            "started (UTC)",
            "host",
            "protocol",
            "dir",
            "P",
            "window",
            "throughput",
            "limited by"
        );
        for r in &rows {
            outln!(
                "{:>6}  {:<20}  {:<24} {:<9} {:<7} {:>3} {:>10}  {:>26}  {:<28} {}",
                r.id,
                r.started_utc,
                r.host,
                format!("{}/{}", short_protocol(&r.protocol), r.transport),
                r.direction,
                r.streams,
                r.window_bytes
                    .map_or("-".into(), |w| landspeed_core::units::Bytes(w).to_string()),
                rate_shown(r),
                if r.limited_by.is_empty() {
                    "-".to_string()
                } else {
                    r.limited_by.join(" ")
                },
                r.tag.as_deref().unwrap_or("")
            );
        }
    }
    Ok(true)
}

/// The protocol in history's narrow column: its first five letters, multicast as `mcast`
/// (`i2-mc` for iperf 2's).
fn short_protocol(p: &str) -> String {
    match p {
        "multicast" => "mcast".into(),
        "iperf2-multicast" => "i2-mc".into(),
        other => other.chars().take(5).collect(),
    }
}

/// A row's rate as `history` shows it: transactions a second for a request/response test, the rate
/// sent for a run that received nothing (a multicast sender's), else the throughput; a UDP run's
/// loss after it.
fn rate_shown(r: &landspeed_archive::RunRow) -> String {
    let rate = match (r.transactions_per_s, r.sent_bps) {
        (Some(t), _) => format!("{t:.0} trans/s"),
        (None, Some(s)) if r.bytes_received == 0 => format!("{} sent", BitRate(s)),
        _ => BitRate(r.throughput_bps).to_string(),
    };
    match r.loss_pct {
        Some(l) if r.bytes_received > 0 => format!("{rate} {l:.2}% lost"),
        _ => rate,
    }
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The run's id (from `history`, or the line `run` printed).
    pub id: i64,
    #[command(flatten)]
    pub db: DbArg,
    /// The stored result document.
    #[arg(long)]
    pub json: bool,
}

pub fn show(a: ShowArgs) -> Result<bool> {
    let archive = a.db.open()?;
    let r = archive
        .get(a.id)?
        .ok_or_else(|| UsageError(format!("no run {} in {}", a.id, archive.path())))
        .context("landspeed show")?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        out!("{}", landspeed_report::render(&r));
    }
    Ok(true)
}
