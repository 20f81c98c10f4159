//! A stored sweep's report and its files (plots as SVG and PNG, one HTML page), shared by `sweep
//! --plots/--html` and `report --sweep`; every file is written through a temporary file and a rename.

use crate::common::now_utc;
use crate::common::UsageError;
use anyhow::{Context, Result};
use landspeed_archive::Archive;
use landspeed_campaign::sweep::{self as campaign, SweepError};
use landspeed_plan::sweep::SweepReport;
use landspeed_report::html::{report_html, Subject};
use landspeed_report::plot::{sweep_figures, Figure};
use std::path::Path;

/// The report of sweep `id` as stored (plan, status, summary of the finished cells).
pub fn load_report(archive: &Archive, id: i64) -> Result<SweepReport> {
    campaign::report(archive, id).map_err(|e| match e {
        SweepError::NoSweep { .. } => UsageError(e.to_string()).into(),
        other => anyhow::Error::from(other),
    })
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a crash never leaves half a file.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    errln!("landspeed: wrote {}", path.display());
    Ok(())
}

/// Every figure as SVG and PNG into `dir`.
pub fn write_plots(dir: &Path, figs: &[Figure]) -> Result<()> {
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
