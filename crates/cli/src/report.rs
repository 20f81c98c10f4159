//! `landspeed report`: a stored sweep or stored runs as text, as plot files (SVG and PNG of every
//! figure) and as one self-contained HTML page. `sweep --plots/--html` uses the same writers.

use crate::archive::DbArg;
use crate::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_archive::Archive;
use landspeed_core::result::{format_utc, RunResult};
use landspeed_plan::sweep::SweepReport;
use landspeed_report::html::{report_html, Subject};
use landspeed_report::plot::{run_figures, runs_cdf, sweep_figures, Figure};
use std::path::{Path, PathBuf};

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

fn now_utc() -> String {
    format_utc(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    )
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a crash never leaves half a file.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("landspeed: wrote {}", path.display());
    Ok(())
}

fn write_plots(dir: &Path, figs: &[Figure]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for f in figs {
        write_file(&dir.join(format!("{}.svg", f.name)), f.svg.as_bytes())?;
        write_file(&dir.join(format!("{}.png", f.name)), &f.png)?;
    }
    Ok(())
}

/// The plots and/or the HTML page of a sweep, where asked for.
pub fn write_outputs(
    archive: &Archive,
    r: &SweepReport,
    plots: Option<&Path>,
    html: Option<&Path>,
) -> Result<()> {
    if plots.is_none() && html.is_none() {
        return Ok(());
    }
    let figs = if r.summary.runs_done > 0 {
        sweep_figures(r)?
    } else {
        Vec::new()
    };
    if let Some(dir) = plots {
        write_plots(dir, &figs)?;
    }
    if let Some(file) = html {
        let sample = match archive.sweep_runs(r.sweep_id)?.first() {
            Some(s) => archive.get(s.run_id)?,
            None => None,
        };
        let page = report_html(
            &Subject::Sweep {
                report: r,
                sample: sample.as_ref(),
            },
            &figs,
            &now_utc(),
        );
        write_file(file, page.as_bytes())?;
    }
    Ok(())
}

pub fn report(a: ReportArgs) -> Result<bool> {
    let archive = a.db.open()?;
    if let Some(id) = a.sweep {
        let r = crate::sweep::load_report(&archive, id)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else if a.html.is_none() && a.plots.is_none() {
            print!("{}", landspeed_report::sweep_text(&r));
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
        println!("{}", serde_json::to_string_pretty(&docs)?);
    } else if a.html.is_none() && a.plots.is_none() {
        for (_, r) in &runs {
            print!("{}", landspeed_report::render(r));
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
