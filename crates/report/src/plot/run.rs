//! A single run's figures: per-stream throughput, congestion window and RTT over time (three panels
//! sharing the time axis, from each interval's TCP_INFO; the echo probes' median RTT too when the run
//! had `--latency`), and the CDF of its interval throughputs. Throughput is a mean over each interval,
//! so it is drawn as a step across the interval's span (the first starts at 0 and holds the connection's
//! slow start); window and RTT are read at each interval's end and drawn there, with the run's minimum
//! RTT as a dashed floor that no interval's RTT falls below (docs/metrics.md). Changes the WAN
//! emulator made to the path during the run are marked on every panel (an outage shaded over its
//! length). For several runs of one configuration, the CDF of their throughputs. A request/response
//! run has its own figure (`transactions`), and several of them the CDF of their transactions a
//! second.

use super::sweep::{unit, Cdf};
use super::{colour, footer, legend, render, Draw, DrawResult, Figure, PlotError, FONT};
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult};
use plotters::coord::Shift;
use plotters::prelude::*;

fn foot(r: &RunResult) -> String {
    let s = &r.config.spec;
    format!(
        "{} protocol · {} port {} · {} UTC · {} stream(s), {}, {}",
        r.protocol,
        r.config.host,
        r.config.port,
        r.started_utc.trim_end_matches('Z').replace('T', " "),
        s.streams,
        format!("{:?}", s.direction).to_lowercase(),
        s.window_bytes.map_or("default window".to_string(), |w| format!(
            "window {}",
            landspeed_core::units::Bytes(w)
        ))
    )
}

type Series = Vec<(String, Vec<(f64, f64)>)>;
/// The points one interval of one stream gives a series.
type Points<'a> = &'a dyn Fn(&IntervalResult, &IntervalStream) -> Option<Vec<(f64, f64)>>;

/// One series per stream, each interval giving the points `pts` makes of it (none to skip it).
fn per_stream(r: &RunResult, pts: Points) -> Series {
    r.streams
        .iter()
        .map(|st| {
            let points = r
                .intervals
                .iter()
                .filter_map(|i| pts(i, i.streams.iter().find(|s| s.id == st.id)?))
                .flatten()
                .collect::<Vec<_>>();
            (format!("stream {}", st.id), points)
        })
        .filter(|s| !s.1.is_empty())
        .collect()
}

/// Each stream's interval throughputs as steps: the mean held from the interval's start to its end.
/// A final tail too short for a rate (`IntervalResult::is_tail`) is left out.
fn steps(r: &RunResult, div: f64) -> Series {
    let nominal_s = r.config.spec.interval_s.as_secs_f64();
    per_stream(r, &|i, s| {
        let v = s.throughput_bps / div;
        (!i.is_tail(nominal_s)).then(|| vec![(i.start_s, v), (i.end_s, v)])
    })
}

/// A value for a legend with three significant digits: 0.00312, 0.0523, 1.25, 52.1, 1250.
fn sig3(v: f64) -> String {
    let decimals = if v > 0.0 {
        (2.0 - v.log10().floor()).clamp(0.0, 9.0) as usize
    } else {
        1
    };
    format!("{v:.decimals$}")
}

/// A figure read at each interval's end.
fn at_ends(r: &RunResult, f: &dyn Fn(&IntervalStream) -> Option<f64>) -> Series {
    per_stream(r, &|i, s| Some(vec![(i.end_s, f(s)?)]))
}

/// The smallest RTT of the run, ms: the senders' TCP minimum (tcpi_min_rtt) or the echo probes'
/// lowest median, whichever is lower.
fn min_rtt_ms(r: &RunResult) -> Option<f64> {
    let tcp = r
        .streams
        .iter()
        .filter_map(|s| s.tcp.as_ref().map(|t| t.rtt_min_us))
        .filter(|&u| u > 0)
        .min()
        .map(|u| f64::from(u) / 1e3);
    let probes = r
        .intervals
        .iter()
        .filter_map(|i| i.probe_rtt.as_ref().map(|p| p.median_ms))
        .reduce(f64::min);
    match (tcp, probes) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

struct OverTime<'a> {
    r: &'a RunResult,
}

/// The time axis the panels share: its end, and the emulator's changes to the path during the run
/// (start and end, seconds; an outage spans its length, any other change is an instant).
struct Frame {
    t_end: f64,
    changes: Vec<(f64, f64)>,
}

impl Frame {
    fn of(r: &RunResult) -> Frame {
        let t_end = r.intervals.last().map_or(1.0, |i| i.end_s);
        let changes = r
            .emulator
            .iter()
            .flat_map(|e| &e.changes)
            .map(|c| (c.at_s.max(0.0), (c.at_s + c.down_s.unwrap_or(0.0)).min(t_end)))
            .filter(|(a, _)| *a <= t_end)
            .collect();
        Frame { t_end, changes }
    }
}

/// One panel: a series per stream of `(time s, value)`; `markers` marks each point (readings taken at
/// an instant rather than means over a span).
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    frame: &Frame,
    floor: Option<f64>,
    markers: bool,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let t_end = frame.t_end;
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.12;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 17))
        .x_label_area_size(36)
        .y_label_area_size(72)
        .margin_right(16)
        .build_cartesian_2d(0f64..t_end.max(1e-3), 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("time since the start (s)")
        .y_desc(y_desc)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        if markers {
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
    }
    let red = RGBColor(200, 30, 30);
    for (k, &(a, b)) in frame.changes.iter().enumerate() {
        let shade = if b > a {
            Rectangle::new([(a, 0.0), (b, ymax)], red.mix(0.15).filled())
        } else {
            Rectangle::new([(a, 0.0), (a, ymax)], red.stroke_width(2))
        };
        let drawn = chart.draw_series(std::iter::once(shade))?;
        if k == 0 {
            drawn
                .label("path changed (wan change; shaded: down)")
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 20, y + 4)], red.mix(0.3).filled()));
        }
    }
    if let Some(f) = floor {
        let grey = BLACK.mix(0.6).stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new([(0.0, f), (t_end, f)], 6, 4, grey))?
            .label(format!("run's minimum ({})", sig3(f)))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey));
    }
    if (series.len() > 1 || !frame.changes.is_empty()) && series.len() <= 16 {
        legend(&mut chart, SeriesLabelPosition::UpperRight, 11)?;
    }
    Ok(())
}

impl Draw for OverTime<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let r = self.r;
        let frame = Frame::of(r);
        let body = root.margin(8, 40, 8, 8);
        let title = body.titled(
            &format!("{} over time, {}", r.config.host, r.started_utc),
            (FONT, 21),
        )?;
        let panels = title.split_evenly((3, 1));
        let top = r
            .intervals
            .iter()
            .flat_map(|i| i.streams.iter().map(|s| s.throughput_bps))
            .fold(0.0, f64::max);
        let (div, uname) = unit(top);
        panel(
            &panels[0],
            "Throughput per stream (mean over each interval)",
            uname,
            &steps(r, div),
            &frame,
            None,
            false,
        )?;
        panel(
            &panels[1],
            "Congestion window per stream (sender's TCP_INFO)",
            "cwnd (KiB)",
            &at_ends(r, &|s| s.cwnd_bytes.map(|c| c as f64 / 1024.0)),
            &frame,
            None,
            true,
        )?;
        let mut rtt = at_ends(r, &|s| s.rtt_us.map(|u| f64::from(u) / 1e3));
        let probes: Vec<(f64, f64)> = r
            .intervals
            .iter()
            .filter_map(|i| i.probe_rtt.as_ref().map(|p| (i.end_s, p.median_ms)))
            .collect();
        if !probes.is_empty() {
            rtt.push(("echo probes (median)".into(), probes));
        }

        panel(
            &panels[2],
            "RTT (sender's smoothed RTT per stream, at each interval's end)",
            "RTT (ms)",
            &rtt,
            &frame,
            min_rtt_ms(r),
            true,
        )?;
        footer(root, &foot(r))
    }
}

/// The figures of one run: over time, and the CDF of its intervals' throughput.
pub fn run_figures(r: &RunResult, id: Option<i64>) -> Result<Vec<Figure>, PlotError> {
    let stem = id.map_or_else(|| "run".to_string(), |i| format!("run-{i}"));
    if let Some(t) = &r.transactions {
        return super::transactions::transaction_figures(r, t, &stem);
    }
    let mut out = vec![render(
        format!("{stem}-over-time"),
        "Per-stream throughput, cwnd and RTT over time".into(),
        (960, 960),
        &OverTime { r },
    )?];
    let (div, uname) = unit(r.intervals.iter().map(|i| i.throughput_bps).fold(0.0, f64::max));
    let nominal_s = r.config.spec.interval_s.as_secs_f64();
    let intervals: Vec<f64> = r
        .intervals
        .iter()
        .filter(|i| !i.omitted && !i.is_tail(nominal_s))
        .map(|i| i.throughput_bps / div)
        .collect();
    if !intervals.is_empty() {
        out.push(render(
            format!("{stem}-interval-cdf"),
            "CDF of interval throughput".into(),
            (960, 600),
            &Cdf {
                title: "Throughput of each interval".into(),
                x_desc: format!("interval throughput ({uname})"),
                y_desc: "fraction of intervals at or below".into(),
                series: vec![(format!("{} intervals", intervals.len()), intervals)],
                footer: foot(r),
            },
        )?);
    }
    Ok(out)
}

/// The CDF of several runs' throughput (repeated runs of one configuration); of their
/// transactions a second when every run is a request/response test.
pub fn runs_cdf(runs: &[RunResult]) -> Result<Figure, PlotError> {
    let first = runs.first();
    let rates: Option<Vec<f64>> = runs
        .iter()
        .map(|r| r.transactions.as_ref().map(|t| t.per_s))
        .collect();
    if let Some(rates) = rates {
        return render(
            "runs-cdf".into(),
            "CDF of repeated runs".into(),
            (960, 600),
            &Cdf {
                title: format!("Transactions a second of {} runs", runs.len()),
                x_desc: "transactions per second".into(),
                y_desc: "fraction of runs at or below".into(),
                series: vec![(format!("{} runs", runs.len()), rates)],
                footer: first.map_or_else(String::new, foot),
            },
        );
    }
    let (div, uname) = unit(runs.iter().map(|r| r.summary.throughput_bps).fold(0.0, f64::max));
    render(
        "runs-cdf".into(),
        "CDF of repeated runs".into(),
        (960, 600),
        &Cdf {
            title: format!("Throughput of {} runs", runs.len()),
            x_desc: format!("throughput ({uname})"),
            y_desc: "fraction of runs at or below".into(),
            series: vec![(
                format!("{} runs", runs.len()),
                runs.iter().map(|r| r.summary.throughput_bps / div).collect(),
            )],
            footer: first.map_or_else(String::new, foot),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::sig3;

    #[test]
    fn legend_values_keep_three_significant_digits() {
        assert_eq!(sig3(0.00312), "0.00312");
        assert_eq!(sig3(0.0523), "0.0523");
        assert_eq!(sig3(1.25), "1.25");
        assert_eq!(sig3(52.1), "52.1");
        assert_eq!(sig3(1250.0), "1250");
        assert_eq!(sig3(0.0), "0.0");
    }
}
