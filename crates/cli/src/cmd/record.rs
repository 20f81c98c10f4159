//! `landspeed record`: a Land Speed Record entry from a stored run (or a result JSON file): the path's
//! length leg by leg, the bit-metre metric, the class, every rule checked with its evidence, and the
//! submission document in Markdown and HTML.

use crate::common::store::DbArg;
use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_core::lsr::{checks, metric, Rules};
use landspeed_core::result::{format_utc, RunResult};
use landspeed_report::record_doc::{record_html, record_markdown, record_text, RecordDoc};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The run: an archive id (from `landspeed history`).
    #[arg(
        long,
        value_name = "ID",
        required_unless_present = "result",
        conflicts_with = "result"
    )]
    pub run: Option<i64>,
    /// The run: a result JSON file (`landspeed run --json > FILE`).
    #[arg(long, value_name = "FILE")]
    pub result: Option<PathBuf>,
    /// The routed path, city by city or lat,lon: "Los Angeles, US > Sunnyvale, US > Geneva, CH".
    #[arg(long, value_name = "A > B > ...")]
    pub path: String,
    /// A leg's length in km instead of its geodesic, e.g. --leg-km 1=489 (legs count from 1; repeatable).
    #[arg(long, value_name = "N=KM", value_parser = leg)]
    pub leg_km: Vec<(usize, f64)>,
    /// Count at most this distance (later records capped it at 30000 km).
    #[arg(long, value_name = "KM")]
    pub cap_km: Option<f64>,
    /// Shortest run that counts.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = crate::common::values::duration)]
    pub min_duration: Duration,
    /// Least data that counts.
    #[arg(long, value_name = "SIZE", value_parser = crate::common::values::bytes)]
    pub min_bytes: Option<landspeed_core::units::Bytes>,
    /// The standing record in bit·m/s (e.g. 6.84e16) or Pb·m/s with the unit (68.4Pbm/s).
    #[arg(long, value_name = "VALUE", value_parser = bit_meters)]
    pub previous: Option<f64>,
    /// Improvement over --previous a new record needs, %.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    pub improvement: f64,
    /// Write the submission document as Markdown.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the submission document as HTML (self-contained).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the metric, the path and the checks as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArg,
}

fn leg(s: &str) -> Result<(usize, f64), String> {
    let (n, km) = s
        .split_once('=')
        .ok_or_else(|| format!("expected N=KM, got '{s}'"))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("'{n}' is not a leg number"))?;
    let km: f64 = km
        .trim()
        .parse()
        .map_err(|_| format!("'{km}' is not a length in km"))?;
    if n == 0 || km.is_nan() || km <= 0.0 {
        return Err(format!("legs count from 1 and lengths are positive: '{s}'"));
    }
    Ok((n - 1, km))
}

fn bit_meters(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase().replace(['·', ' '], "");
    let (num, mult) = if let Some(v) = t.strip_suffix("pbm/s") {
        (v, 1e15)
    } else if let Some(v) = t.strip_suffix("tbm/s") {
        (v, 1e12)
    } else {
        (t.strip_suffix("bm/s").unwrap_or(&t), 1.0)
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0)
        .map(|v| v * mult)
        .ok_or_else(|| format!("'{s}' is not a record like 6.84e16 or 68.4Pbm/s"))
}

pub fn record(a: RecordArgs) -> Result<bool> {
    let (run, id) = load_run(&a)?;
    if a.cap_km.is_some_and(|c| c.is_nan() || c <= 0.0) {
        return Err(UsageError("--cap-km must be positive".into()).into());
    }
    let path =
        landspeed_geo::parse_path(&a.path, &a.leg_km, a.cap_km).map_err(|e| UsageError(e.to_string()))?;
    let m = metric(&run, path.counted_km);
    let rules = Rules {
        min_duration_s: a.min_duration.as_secs_f64(),
        min_bytes: a.min_bytes.map_or(0, |b| b.get()),
        previous_bit_meters_per_s: a.previous,
        improvement_pct: a.improvement,
    };
    let c = checks(&run, &m, &rules);
    let now = format_utc(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    );
    let doc = RecordDoc {
        run: &run,
        run_id: id,
        path: &path,
        metric: &m,
        checks: &c,
        rules: &rules,
        generated_utc: now,
    };
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"metric": m, "path": path, "checks": c, "rules": rules})
            )?
        );
    } else {
        out!("{}", record_text(&doc));
    }
    write_documents(&a, &doc)?;
    Ok(c.iter().all(|c| c.passed))
}

/// The run from a result file or the archive, with its archive id.
fn load_run(a: &RecordArgs) -> Result<(RunResult, Option<i64>)> {
    match (&a.result, a.run) {
        (Some(f), _) => {
            let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
            let r = serde_json::from_str(&text)
                .map_err(|e| UsageError(format!("{} is not a landspeed result: {e}", f.display())))?;
            Ok((r, None))
        }
        (None, Some(id)) => {
            let archive = a.db.open()?;
            let r = archive
                .get(id)?
                .ok_or_else(|| UsageError(format!("no run {id} in {}", archive.path())))?;
            Ok((r, Some(id)))
        }
        (None, None) => Err(UsageError("--run ID or --result FILE".into()).into()),
    }
}

/// The submission as Markdown and HTML, where asked.
fn write_documents(a: &RecordArgs, doc: &RecordDoc) -> Result<()> {
    if let Some(f) = &a.markdown {
        std::fs::write(f, record_markdown(doc)).with_context(|| format!("cannot write {}", f.display()))?;
        errln!("landspeed: wrote {}", f.display());
    }
    if let Some(f) = &a.html {
        std::fs::write(f, record_html(doc)).with_context(|| format!("cannot write {}", f.display()))?;
        errln!("landspeed: wrote {}", f.display());
    }
    Ok(())
}
