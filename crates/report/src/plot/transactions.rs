//! A request/response run's figure: each interval's latency (p50, p99 and the most) over time on a
//! logarithmic axis, so a loaded path's queue or a stall shows against the idle floor; the footer
//! names the shape, the rate and whether a working load ran beside. A bulk run's throughput figures
//! would describe only its requests and answers, so a transaction run has this one instead.

use super::{colour, footer, legend, render, Draw, DrawResult, Figure, PlotError, FONT};
use landspeed_core::result::RunResult;
use landspeed_core::transactions::{TransactionInterval, TransactionsReport};
use plotters::coord::Shift;
use plotters::prelude::*;

struct OverTime<'a> {
    r: &'a RunResult,
    t: &'a TransactionsReport,
}

fn foot(r: &RunResult, t: &TransactionsReport) -> String {
    format!(
        "{} · {} port {} · {} UTC · {} B requests, {} B answers, {} in flight · {:.0} transactions/s{}",
        t.shape.kind,
        r.config.host,
        r.config.port,
        r.started_utc.trim_end_matches('Z').replace('T', " "),
        t.shape.request_bytes,
        t.shape.response_bytes,
        t.shape.in_flight,
        t.per_s,
        if t.load.is_some() {
            " · under a working load"
        } else {
            ""
        }
    )
}

type Pick = fn(&TransactionInterval) -> Option<f64>;

impl Draw for OverTime<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let t = self.t;
        let t_end = t.intervals.last().map_or(1.0, |i| i.end_s).max(1e-3);
        let values = t
            .intervals
            .iter()
            .flat_map(|i| [i.latency.p50_ms, i.latency.max_ms])
            .flatten();
        let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (lo, hi) = if hi > 0.0 {
            (lo.max(1e-4) / 2.0, hi * 2.0)
        } else {
            (1e-3, 1.0)
        };
        let area = root.margin(8, 40, 8, 16);
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!("Transaction latency to {}", self.r.config.host),
                (FONT, 22),
            )
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..t_end, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("time since the first request (s)")
            .y_desc("latency (ms)")
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .draw()?;
        let lines: [(&str, Pick); 3] = [
            ("p50", |i| i.latency.p50_ms),
            ("p99", |i| i.latency.p99_ms),
            ("most", |i| i.latency.max_ms),
        ];
        for (k, (label, pick)) in lines.into_iter().enumerate() {
            let c = colour(k);
            let pts: Vec<(f64, f64)> = (t.intervals.iter())
                .filter_map(|i| pick(i).map(|v| (i.end_s, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 13)?;
        footer(root, &foot(self.r, t))
    }
}

/// A transaction run's figure (`stem` names its files).
pub(super) fn transaction_figures(
    r: &RunResult,
    t: &TransactionsReport,
    stem: &str,
) -> Result<Vec<Figure>, PlotError> {
    Ok(vec![render(
        format!("{stem}-latency-over-time"),
        "Each interval's transaction latency (p50, p99, most) over time".into(),
        (960, 600),
        &OverTime { r, t },
    )?])
}
