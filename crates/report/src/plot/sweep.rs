//! A sweep's figures, per direction: throughput against window (log scale) with one line of medians per
//! stream count, the 10th–90th spread as error bars and the fitted line through the origin dashed; a
//! windows × streams heatmap of the medians; and the CDF of the repeated runs of each stream count's
//! best window (how much one run can be trusted).

use super::{colour, footer, legend, render, Draw, DrawResult, Figure, PlotError, FONT};
use crate::sweep_text::direction_name;
use landspeed_core::config::Direction;
use landspeed_core::units::Bytes;
use landspeed_plan::sweep::{CellSummary, DirectionSummary, SweepReport};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A series' name: `1 stream`, `4 streams`.
fn streams_label(s: u32) -> String {
    if s == 1 {
        "1 stream".into()
    } else {
        format!("{s} streams")
    }
}

fn short_size(b: u64) -> String {
    Bytes(b)
        .to_string()
        .replace(".00 ", " ")
        .replace(".0 ", " ")
        .replace(" KiB", "K")
        .replace(" MiB", "M")
        .replace(" GiB", "G")
}

/// The unit throughput is drawn in: Gbit/s once values reach 5 Gbit/s, else Mbit/s.
pub(crate) fn unit(max_bps: f64) -> (f64, &'static str) {
    if max_bps >= 5e9 {
        (1e9, "Gbit/s")
    } else {
        (1e6, "Mbit/s")
    }
}

fn dir_tag(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "send",
        Direction::Reverse => "recv",
        Direction::Bidir => "bidir",
    }
}

fn foot(r: &SweepReport) -> String {
    format!(
        "landspeed sweep {} · {} port {} · {} UTC · {} of {} runs of {} s",
        r.sweep_id,
        r.plan.host,
        r.plan.port,
        r.created_utc.trim_end_matches('Z').replace('T', " "),
        r.summary.runs_done,
        r.summary.runs_planned,
        r.plan.time_s
    )
}

struct VsWindow<'a> {
    r: &'a SweepReport,
    d: &'a DirectionSummary,
    cells: Vec<&'a CellSummary>,
}

impl Draw for VsWindow<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let p = &self.r.plan;
        let top = (self.cells.iter())
            .map(|c| c.throughput_bps.max)
            .fold(1.0, f64::max);
        let (div, uname) = unit(top);
        let area = root.margin(8, 40, 8, 16);
        let caption = format!("Throughput vs window, {}", direction_name(self.d.direction));
        let (mut chart, (lo, hi)) = window_axes(
            &area,
            p,
            caption,
            (top / div * 1.12, format!("throughput ({uname})")),
        )?;
        for (i, &s) in p.streams.iter().enumerate() {
            self.stream_series(&mut chart, (colour(i), s), div, (lo, hi))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
        footer(root, &foot(self.r))
    }
}

/// A window chart and its x axis' ends.
type WindowAxes<'a, DB> = (WindowChart<'a, DB>, (f64, f64));

/// The sweep's windows on a log scale (each a key point, a third beyond either end) against `0..ymax`,
/// captioned, its mesh drawn; with the axis' ends.
fn window_axes<'a, DB: DrawingBackend + 'a>(
    area: &'a DrawingArea<DB, Shift>,
    p: &landspeed_plan::sweep::SweepPlan,
    caption: String,
    (ymax, y_desc): (f64, String),
) -> Result<WindowAxes<'a, DB>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let lo = *p.windows_bytes.first().unwrap_or(&1) as f64 / 1.5;
    let hi = *p.windows_bytes.last().unwrap_or(&2) as f64 * 1.5;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 22))
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (lo..hi)
                .log_scale()
                .with_key_points(p.windows_bytes.iter().map(|w| *w as f64).collect::<Vec<_>>()),
            0f64..ymax,
        )?;
    chart
        .configure_mesh()
        .x_desc("window (socket buffer per stream, log scale)")
        .y_desc(y_desc)
        .x_label_formatter(&|x| short_size(x.round() as u64))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()?;
    Ok((chart, (lo, hi)))
}

/// The log-scale window axis against throughput, as `VsWindow` draws it.
type WindowChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<
        plotters::coord::combinators::WithKeyPoints<LogCoord<f64>>,
        plotters::coord::types::RangedCoordf64,
    >,
>;

impl VsWindow<'_> {
    /// One stream count's medians (line and dots), its min–max bars, and its fitted line dashed.
    fn stream_series<DB: DrawingBackend>(
        &self,
        chart: &mut WindowChart<'_, DB>,
        (c, s): (RGBColor, u32),
        div: f64,
        (lo, hi): (f64, f64),
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let mine: Vec<&&CellSummary> = self.cells.iter().filter(|x| x.streams == s).collect();
        let pts: Vec<(f64, f64)> = mine
            .iter()
            .map(|x| (x.window_bytes as f64, x.throughput_bps.median / div))
            .collect();
        let label = streams_label(s);
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        chart.draw_series(mine.iter().map(|x| {
            let w = x.window_bytes as f64;
            PathElement::new(
                vec![(w, x.throughput_bps.min / div), (w, x.throughput_bps.max / div)],
                c.mix(0.6),
            )
        }))?;
        if let Some(f) = self.d.fits.iter().find(|f| f.streams == s) {
            let end = f.saturation_window_bytes.min(hi);
            let line: Vec<(f64, f64)> = (0..=40)
                .map(|k| lo * (end / lo).powf(f64::from(k) / 40.0))
                .map(|w| (w, f.slope_bps_per_byte * w / div))
                .collect();
            chart
                .draw_series(DashedLineSeries::new(line, 6, 4, c.stroke_width(1)))?
                .label(format!(
                    "fit {s}: RTT {:.1} ms, R² {:.3}",
                    f.implied_rtt_s * 1e3,
                    f.r2
                ))
                .legend(move |(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 20, y)], 4, 3, c.stroke_width(1))
                });
        }
        Ok(())
    }
}

struct Heatmap<'a> {
    r: &'a SweepReport,
    d: &'a DirectionSummary,
    cells: Vec<&'a CellSummary>,
}

/// White → blue → dark blue as the fraction of the best median grows.
fn heat(f: f64) -> RGBColor {
    let f = f.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64, t: f64| (a + (b - a) * t).round() as u8;
    if f < 0.5 {
        let t = f / 0.5;
        RGBColor(mix(247.0, 107.0, t), mix(251.0, 174.0, t), mix(255.0, 214.0, t))
    } else {
        let t = (f - 0.5) / 0.5;
        RGBColor(mix(107.0, 8.0, t), mix(174.0, 48.0, t), mix(214.0, 107.0, t))
    }
}

impl Draw for Heatmap<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let p = &self.r.plan;
        let (nw, ns) = (p.windows_bytes.len() as i32, p.streams.len() as i32);
        let best = self
            .cells
            .iter()
            .map(|c| c.throughput_bps.median)
            .fold(0.0, f64::max);
        let (div, uname) = unit(best);
        let area = root.margin(8, 40, 8, 16);
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!(
                    "Median throughput ({uname}), windows × streams, {}",
                    direction_name(self.d.direction)
                ),
                (FONT, 22),
            )
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((0..nw - 1).into_segmented(), (0..ns - 1).into_segmented())?;
        let windows = p.windows_bytes.clone();
        let streams = p.streams.clone();
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(nw as usize)
            .y_labels(ns as usize)
            .x_desc("window (socket buffer per stream)")
            .y_desc("parallel streams")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => {
                    windows.get(*i as usize).map_or(String::new(), |w| short_size(*w))
                }
                _ => String::new(),
            })
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => {
                    streams.get(*i as usize).map_or(String::new(), |s| s.to_string())
                }
                _ => String::new(),
            })
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .draw()?;
        for c in &self.cells {
            self.cell(&mut chart, c, best, div)?;
        }
        footer(root, &foot(self.r))
    }
}

/// The windows × streams grid, as `Heatmap` draws it.
type GridChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<
        plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordi32>,
        plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordi32>,
    >,
>;

impl Heatmap<'_> {
    /// One cell: its colour by the fraction of the best median, its median written in it.
    fn cell<DB: DrawingBackend>(
        &self,
        chart: &mut GridChart<'_, DB>,
        c: &CellSummary,
        best: f64,
        div: f64,
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let p = &self.r.plan;
        let (Some(i), Some(j)) = (
            p.windows_bytes.iter().position(|w| *w == c.window_bytes),
            p.streams.iter().position(|s| *s == c.streams),
        ) else {
            return Ok(());
        };
        let (i, j) = (i as i32, j as i32);
        let f = if best > 0.0 {
            c.throughput_bps.median / best
        } else {
            0.0
        };
        chart.draw_series(std::iter::once(Rectangle::new(
            [
                (SegmentValue::Exact(i), SegmentValue::Exact(j)),
                (SegmentValue::Exact(i + 1), SegmentValue::Exact(j + 1)),
            ],
            heat(f).filled(),
        )))?;
        let ink = if f > 0.55 { WHITE } else { BLACK };
        chart.draw_series(std::iter::once(Text::new(
            if div > 1e6 {
                format!("{:.2}", c.throughput_bps.median / div)
            } else {
                format!("{:.0}", c.throughput_bps.median / div)
            },
            (SegmentValue::CenterOf(i), SegmentValue::CenterOf(j)),
            (FONT, 13)
                .into_font()
                .color(&ink)
                .pos(Pos::new(HPos::Center, VPos::Center)),
        )))?;
        Ok(())
    }
}

/// Step-function CDF series: (label, values) drawn as fraction ≤ x.
pub(crate) struct Cdf {
    pub title: String,
    pub x_desc: String,
    /// What the fraction counts: "fraction of runs at or below".
    pub y_desc: String,
    pub series: Vec<(String, Vec<f64>)>,
    pub footer: String,
}

impl Draw for Cdf {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let all = self.series.iter().flat_map(|s| s.1.iter().copied());
        let (lo, hi) = all.fold((f64::INFINITY, 0f64), |(a, b), v| (a.min(v), b.max(v)));
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        let pad = ((hi - lo) * 0.08).max(hi * 0.01).max(1e-9);
        let area = root.margin(8, 40, 8, 16);
        let mut chart = ChartBuilder::on(&area)
            .caption(&self.title, (FONT, 22))
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((lo - pad).max(0.0)..hi + pad, 0f64..1.0)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .y_desc(self.y_desc.as_str())
            .x_label_formatter(&|x| format!("{x:.1}"))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .draw()?;
        for (i, (label, values)) in self.series.iter().enumerate() {
            let c = colour(i);
            let mut v = values.clone();
            v.sort_by(f64::total_cmp);
            let n = v.len() as f64;
            let mut pts = vec![((lo - pad).max(0.0), 0.0)];
            for (k, x) in v.iter().enumerate() {
                pts.push((*x, k as f64 / n));
                pts.push((*x, (k + 1) as f64 / n));
            }
            pts.push((hi + pad, 1.0));
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
        footer(root, &self.footer)
    }
}

/// The echo probes' median RTT under each cell's load (`run --latency` in the sweep's options) against
/// the window, a line per stream count: the queue each window builds.
struct LoadedRtt<'a> {
    r: &'a SweepReport,
    d: &'a DirectionSummary,
    cells: Vec<&'a CellSummary>,
}

impl Draw for LoadedRtt<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let p = &self.r.plan;
        let ymax = (self.cells.iter())
            .filter_map(|c| c.loaded_rtt_ms)
            .fold(1.0, f64::max)
            * 1.12;
        let area = root.margin(8, 40, 8, 16);
        let caption = format!("RTT under load vs window, {}", direction_name(self.d.direction));
        let y_desc = "echo probes' median RTT under the load (ms)".to_string();
        let (mut chart, _) = window_axes(&area, p, caption, (ymax, y_desc))?;
        for (i, &s) in p.streams.iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = (self.cells.iter())
                .filter(|x| x.streams == s)
                .filter_map(|x| x.loaded_rtt_ms.map(|ms| (x.window_bytes as f64, ms)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(streams_label(s))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
        footer(root, &foot(self.r))
    }
}

/// Every figure of a sweep: per direction, throughput vs window, the probes' RTT under load vs window
/// (when the cells had `--latency`), the heatmap and the CDF of repeated runs (each stream count's
/// best window).
pub fn sweep_figures(r: &SweepReport) -> Result<Vec<Figure>, PlotError> {
    let mut out = Vec::new();
    for d in &r.summary.directions {
        let cells: Vec<&CellSummary> = (r.summary.cells.iter())
            .filter(|c| c.direction == d.direction)
            .collect();
        if cells.is_empty() {
            continue;
        }
        let tag = dir_tag(d.direction);
        let name = |what: &str| format!("sweep-{}-{what}-{tag}", r.sweep_id);
        let title = |what: &str| format!("{what}, {}", direction_name(d.direction));
        let size = (960, 600);
        let v = VsWindow {
            r,
            d,
            cells: cells.clone(),
        };
        out.push(render(
            name("throughput-vs-window"),
            title("Throughput vs window"),
            size,
            &v,
        )?);
        if cells.iter().any(|c| c.loaded_rtt_ms.is_some()) {
            let l = LoadedRtt {
                r,
                d,
                cells: cells.clone(),
            };
            out.push(render(
                name("loaded-rtt-vs-window"),
                title("RTT under load vs window"),
                size,
                &l,
            )?);
        }
        let h = Heatmap {
            r,
            d,
            cells: cells.clone(),
        };
        out.push(render(
            name("heatmap"),
            title("Windows × streams heatmap"),
            size,
            &h,
        )?);
        out.push(render(
            name("cdf"),
            title("CDF of repeated runs"),
            size,
            &best_runs_cdf(r, d, &cells),
        )?);
    }
    Ok(out)
}

/// The CDF of the repeated runs of each stream count's best window in one direction.
fn best_runs_cdf(r: &SweepReport, d: &DirectionSummary, cells: &[&CellSummary]) -> Cdf {
    let (div, uname) = unit(cells.iter().map(|c| c.throughput_bps.max).fold(0.0, f64::max));
    let series = (r.plan.streams.iter())
        .filter_map(|&s| {
            let best = (cells.iter())
                .filter(|c| c.streams == s)
                .max_by(|a, b| a.throughput_bps.median.total_cmp(&b.throughput_bps.median))?;
            Some((
                format!(
                    "{s} × {} ({} runs)",
                    short_size(best.window_bytes),
                    best.runs_bps.len()
                ),
                best.runs_bps.iter().map(|v| v / div).collect(),
            ))
        })
        .collect();
    Cdf {
        title: format!(
            "Repeated runs of each stream count's best window, {}",
            direction_name(d.direction)
        ),
        x_desc: format!("throughput ({uname})"),
        y_desc: "fraction of runs at or below".into(),
        series,
        footer: foot(r),
    }
}
