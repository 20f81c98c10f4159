//! `landspeed latency`'s figures: every probe over time with the phases shaded (its RTT and its
//! queueing each way), and the distribution of RTT per phase.

use super::sweep::Cdf;
use super::{colour, footer, legend, render, Draw, DrawResult, Figure, PlotError, FONT};
use landspeed_core::path::{LatencyByDiscipline, Load, PhasedLatency};
use plotters::coord::Shift;
use plotters::prelude::*;

struct OverTime<'a> {
    r: &'a PhasedLatency,
}

fn foot(r: &PhasedLatency) -> String {
    format!(
        "landspeed latency {}: UDP echo, {} probes/s, queueing each way from the server's receive times",
        r.host, r.probes_per_s
    )
}

impl Draw for OverTime<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let r = self.r;
        let t_end = r.phases.last().map_or(1.0, |p| p.span.end_s).max(1e-3);
        let ymax = (r.probes.iter())
            .flat_map(|p| [p.rtt_ms, p.to_server_ms, p.to_client_ms])
            .flatten()
            .fold(1.0, f64::max)
            * 1.15;
        let area = root.margin(8, 40, 8, 16);
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("Latency under load to {}", r.host), (FONT, 22))
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..t_end, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("time since the first probe (s)")
            .y_desc("ms")
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .draw()?;
        for (i, p) in r.phases.iter().enumerate() {
            let band = if i % 2 == 0 {
                BLACK.mix(0.04)
            } else {
                BLACK.mix(0.10)
            };
            let (a, b) = (p.span.start_s, p.span.end_s);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (b, ymax)],
                band.filled(),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                p.span.load.name().to_string(),
                (a + (b - a) * 0.05, ymax * 0.97),
                (FONT, 13).into_font(),
            )))?;
        }
        type Pick = fn(&landspeed_core::path::ProbePoint) -> Option<f64>;
        let lines: [(&str, Pick); 3] = [
            ("RTT", |p| p.rtt_ms),
            ("queueing to server", |p| p.to_server_ms),
            ("queueing to client", |p| p.to_client_ms),
        ];
        for (i, (label, pick)) in lines.into_iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = r
                .probes
                .iter()
                .filter_map(|p| pick(p).map(|v| (p.t_s, v)))
                .collect();
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 2, c.filled())))?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 10, y), 3, c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 13)?;
        footer(root, &foot(r))
    }
}

/// Both figures: over time, and the RTT distribution per phase.
pub fn latency_figures(r: &PhasedLatency) -> Result<Vec<Figure>, PlotError> {
    let over = render(
        "latency-over-time".into(),
        "Every probe over time, the phases shaded".into(),
        (1200, 600),
        &OverTime { r },
    )?;
    let series = r
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let rtts = (r.probes.iter())
                .filter(|q| q.t_s >= p.span.start_s && q.t_s < p.span.end_s)
                .filter_map(|q| q.rtt_ms)
                .collect();
            (format!("{} {}", i + 1, p.span.load.name()), rtts)
        })
        .collect();
    let cdf = render(
        "latency-cdf".into(),
        "RTT distribution per phase".into(),
        (960, 600),
        &Cdf {
            title: format!("RTT per phase to {}", r.host),
            x_desc: "RTT (ms)".into(),
            y_desc: "fraction of probes at or below".into(),
            series,
            footer: foot(r),
        },
    )?;
    Ok(vec![over, cdf])
}

/// `latency --aqm`: the RTT of every probe sent under load (download, upload and both phases) per
/// queue discipline, then each discipline's own two figures (their file names prefixed with it).
pub fn discipline_figures(c: &LatencyByDiscipline) -> Result<Vec<Figure>, PlotError> {
    let series = (c.runs.iter())
        .map(|run| {
            let r = &run.result;
            let loaded = (r.phases.iter()).filter(|p| p.span.load != Load::Idle);
            let rtts = loaded
                .flat_map(|p| {
                    (r.probes.iter())
                        .filter(move |q| q.t_s >= p.span.start_s && q.t_s < p.span.end_s)
                        .filter_map(|q| q.rtt_ms)
                })
                .collect();
            (run.aqm.clone(), rtts)
        })
        .collect();
    let host = c.runs.first().map_or("", |r| r.result.host.as_str());
    let mut out = vec![render(
        "latency-by-discipline".into(),
        "RTT under load per queue discipline".into(),
        (960, 600),
        &Cdf {
            title: format!("RTT under load to {host}, per queue discipline"),
            x_desc: "RTT of the probes sent in the loaded phases (ms)".into(),
            y_desc: "fraction of probes at or below".into(),
            series,
            footer: format!(
                "landspeed latency --aqm on emulator {}: the same phases under each discipline",
                c.emulator
            ),
        },
    )?];
    for run in &c.runs {
        for mut f in latency_figures(&run.result)? {
            f.name = format!("{}-{}", f.name, file_word(&run.aqm));
            f.title = format!("{} ({})", f.title, run.aqm);
            out.push(f);
        }
    }
    Ok(out)
}

/// A discipline's spec as a file-name word (`codel:2ms:50ms` → `codel-2ms-50ms`).
fn file_word(aqm: &str) -> String {
    (aqm.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::path::{DisciplineRun, PhasedLatency};

    #[test]
    fn the_comparison_comes_first_and_each_disciplines_figures_are_named_for_it() {
        let run = |aqm: &str| DisciplineRun {
            aqm: aqm.into(),
            result: PhasedLatency::new("h", 10.0, vec![], &[]),
        };
        let c = LatencyByDiscipline::new("lfn", None, vec![run("tail-drop"), run("codel:2ms:50ms")]);
        let names: Vec<String> = discipline_figures(&c)
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(
            names,
            [
                "latency-by-discipline",
                "latency-over-time-tail-drop",
                "latency-cdf-tail-drop",
                "latency-over-time-codel-2ms-50ms",
                "latency-cdf-codel-2ms-50ms"
            ]
        );
    }
}
