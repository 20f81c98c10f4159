//! A sweep as text: the cell statistics SLAC's pages tabulated (median, 90th percentile, spread and the
//! 95% confidence interval of the mean), the throughput-versus-window line of every stream count, and
//! the best cell with the smallest buffer that comes within 5% of it.

use landspeed_core::config::Direction;
use landspeed_core::units::{BitRate, Bytes};
use landspeed_plan::sweep::summary::{CellSummary, DirectionSummary};
use landspeed_plan::sweep::SweepReport;
use std::fmt::Write;

/// The words for a direction in a sweep's tables.
pub fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "client → server",
        Direction::Reverse => "server → client",
        Direction::Bidir => "both ways",
    }
}

fn mbps(bps: f64) -> String {
    format!("{:.1}", bps / 1e6)
}

/// A sweep's report as text: per direction the cells' statistics, the window fits and the best cell.
pub fn sweep_text(r: &SweepReport) -> String {
    let mut o = String::new();
    let p = &r.plan;
    let s = &r.summary;
    let _ = writeln!(
        o,
        "sweep {} against {} port {} ({}, {}): {} of {} runs done, {} s each, {} order",
        r.sweep_id,
        p.host,
        p.port,
        r.created_utc,
        r.status,
        s.runs_done,
        s.runs_planned,
        p.time_s,
        format!("{:?}", p.order).to_lowercase()
    );
    for d in &s.directions {
        cells_table(&mut o, d, &s.cells);
        fits_table(&mut o, d);
        best_line(&mut o, d);
    }
    o
}

/// One direction's cells: the throughput statistics of each window × streams.
fn cells_table(o: &mut String, d: &DirectionSummary, cells: &[CellSummary]) {
    let mine: Vec<&CellSummary> = cells.iter().filter(|c| c.direction == d.direction).collect();
    // The probes' RTT under each cell's load, when the sweep's runs had `--latency`.
    let probed = mine.iter().any(|c| c.loaded_rtt_ms.is_some());
    let _ = writeln!(o, "\n{} (throughput in Mbit/s)", direction_name(d.direction));
    let _ = writeln!(
        o,
        "{:>10} {:>4} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>21}{}  limited by",
        "window",
        "P",
        "n",
        "median",
        "p90",
        "min",
        "max",
        "mean",
        "sd",
        "95% CI of mean",
        if probed { "  RTT under load (ms)" } else { "" }
    );
    for c in mine {
        let t = &c.throughput_bps;
        let ci = match (t.ci95_low, t.ci95_high) {
            (Some(l), Some(h)) => format!("{} – {}", mbps(l), mbps(h)),
            _ => "-".into(),
        };
        let rtt = match (probed, c.loaded_rtt_ms) {
            (false, _) => String::new(),
            (true, Some(ms)) => format!("  {ms:>19.2}"),
            (true, None) => format!("  {:>19}", "-"),
        };
        let _ = writeln!(
            o,
            "{:>10} {:>4} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>21}{rtt}  {}",
            Bytes(c.window_bytes).to_string(),
            c.streams,
            t.n,
            mbps(t.median),
            mbps(t.p90),
            mbps(t.min),
            mbps(t.max),
            mbps(t.mean),
            mbps(t.sd),
            ci,
            c.limit.map_or("-", |k| k.label())
        );
    }
}

/// The window-limited fits of one direction, per stream count.
fn fits_table(o: &mut String, d: &DirectionSummary) {
    if d.fits.is_empty() {
        let _ = writeln!(o, "no stream count has two window-limited windows: no fit");
    } else {
        let _ = writeln!(
            o,
            "\nthroughput = slope × window while the window limits (fit through the origin, medians);\nimplied RTT = 8 × streams × granted / slope; granted = window in effect (TCP_INFO) ÷ requested;\nTCP RTT = the senders' smoothed RTT in the fitted runs (TCP_INFO, median)"
        );
        let _ = writeln!(
            o,
            "{:>4} {:>16} {:>8} {:>6} {:>12} {:>10} {:>9} {:>17} {:>14} {:>12}",
            "P",
            "Mbit/s per MiB",
            "R²",
            "points",
            "implied RTT",
            "TCP RTT",
            "granted×",
            "window-limited to",
            "saturates at",
            "max"
        );
        for f in &d.fits {
            let _ = writeln!(
                o,
                "{:>4} {:>16.2} {:>8.4} {:>6} {:>9.2} ms {:>10} {:>9.3} {:>17} {:>14} {:>12}",
                f.streams,
                f.slope_bps_per_byte * 1048576.0 / 1e6,
                f.r2,
                f.points_used,
                f.implied_rtt_s * 1e3,
                f.measured_rtt_s
                    .map_or("-".into(), |t| format!("{:.2} ms", t * 1e3)),
                f.window_scale,
                Bytes(f.window_limited_up_to_bytes as u64).to_string(),
                Bytes(f.saturation_window_bytes as u64).to_string(),
                BitRate(f.max_throughput_bps).to_string()
            );
        }
    }
}

/// The best cell of one direction, and the smallest within 5% of it.
fn best_line(o: &mut String, d: &DirectionSummary) {
    if let Some(b) = &d.best {
        let _ = writeln!(
            o,
            "\nbest: {} × {} streams, median {}; smallest within 5%: {} × {} streams, median {}",
            Bytes(b.best.0),
            b.best.1,
            BitRate(b.best.2),
            Bytes(b.smallest_within_5pct.0),
            b.smallest_within_5pct.1,
            BitRate(b.smallest_within_5pct.2)
        );
    }
}
