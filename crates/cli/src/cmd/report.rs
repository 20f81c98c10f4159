//! `landspeed report`: a stored sweep or stored runs as text, as plot files (SVG and PNG of every
//! figure) and as one self-contained HTML page. `sweep --plots/--html` uses the same writers.

use crate::common::now_utc;
use crate::common::store::DbArg;
use crate::common::sweep_output::{load_report, write_file, write_outputs, write_plots};
use crate::common::UsageError;
use anyhow::Result;
use clap::Args;
use landspeed_core::result::RunResult;
use landspeed_report::html::{report_html, Subject};
use landspeed_report::plot::{run_figures, runs_cdf};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Archived runs to report on (ids from `landspeed history`).
    #[arg(
        value_name = "ID",
        required_unless_present = "sweep",
        conflicts_with = "sweep"
    )]
    pub ids: Vec<i64>,
    /// Report on a whole sweep instead (its id from `landspeed sweep` or `history`).
    #[arg(long, value_name = "ID")]
    pub sweep: Option<i64>,
    /// Write one self-contained HTML page (tables, plots, both hosts, command lines).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write every plot as SVG and PNG into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Print the sweep's summary (or the runs) as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn report(a: ReportArgs) -> Result<bool> {
    let archive = a.db.open()?;
    if let Some(id) = a.sweep {
        let r = load_report(&archive, id)?;
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&r)?);
        } else if a.html.is_none() && a.plots.is_none() {
            out!("{}", landspeed_report::sweep_text(&r));
        }
        write_outputs(&archive, &r, a.plots.as_deref(), a.html.as_deref())?;
        return Ok(true);
    }
    let mut runs: Vec<(i64, RunResult)> = Vec::new();
    for &id in &a.ids {
        let r = archive
            .get(id)?
            .ok_or_else(|| UsageError(format!("no run {id} in {}", archive.path())))?;
        runs.push((id, r));
    }
    if a.json {
        let docs: Vec<&RunResult> = runs.iter().map(|r| &r.1).collect();
        outln!("{}", serde_json::to_string_pretty(&docs)?);
    } else if a.html.is_none() && a.plots.is_none() {
        for (_, r) in &runs {
            out!("{}", landspeed_report::render(r));
        }
    }
    if a.html.is_some() || a.plots.is_some() {
        let mut figs = Vec::new();
        for (id, r) in &runs {
            figs.extend(run_figures(r, Some(*id))?);
        }
        if runs.len() > 1 {
            let all: Vec<RunResult> = runs.iter().map(|r| r.1.clone()).collect();
            figs.push(runs_cdf(&all)?);
        }
        if let Some(dir) = &a.plots {
            write_plots(dir, &figs)?;
        }
        if let Some(file) = &a.html {
            write_file(
                file,
                report_html(&Subject::Runs(&runs), &figs, &now_utc()).as_bytes(),
            )?;
        }
    }
    Ok(true)
}
