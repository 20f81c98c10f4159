//! A sweep's runs turned into what SLAC's pages showed: the statistics of every cell, the
//! throughput-versus-window line of every stream count (fitted to the cells' medians), and the best cell
//! with the smallest one close to it, for each direction. Pure: the CLI, the plots and the HTML report
//! all read the same summary.

use super::fit::{best_cells, window_fit, BestCells, WindowFit};
use super::plan::{CellKey, SweepPlan};
use super::stats::CellStats;
use landspeed_core::config::Direction;
use landspeed_core::limit::LimitKind;
use serde::{Deserialize, Serialize};

/// One cell of a sweep: its runs and their statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// The window, bytes.
    pub window_bytes: u64,
    /// Streams per direction.
    pub streams: u32,
    /// The direction.
    pub direction: Direction,
    /// Throughput statistics of the cell's runs, in bit/s.
    pub throughput_bps: CellStats,
    /// Every run's throughput, in the order of the repetitions.
    pub runs_bps: Vec<f64>,
    /// Median over the runs of the receive window the senders saw (TCP_INFO), when known.
    pub effective_window_bytes: Option<f64>,
    /// Median over the runs of the senders' mean smoothed RTT (TCP_INFO), seconds, when known.
    #[serde(default)]
    pub rtt_s: Option<f64>,
    /// Median over the runs of their echo probes' median RTT under the load (`run --latency`), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_rtt_ms: Option<f64>,
    /// What held the cell back: the verdict most of its runs had (the first run's among equals), so a
    /// windows × streams grid shows where the limit moves; None when its runs had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitKind>,
}

/// What the summary needs of one finished run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunFigures {
    /// The run's throughput, bit/s.
    pub throughput_bps: f64,
    /// The receive window in effect, averaged over the streams (the senders' TCP_INFO snd_wnd).
    pub effective_window_bytes: Option<f64>,
    /// The senders' mean smoothed RTT over the run (TCP_INFO), averaged over the streams, seconds.
    pub rtt_s: Option<f64>,
    /// The median RTT of the run's echo probes under the load (`run --latency`), ms.
    pub loaded_rtt_ms: Option<f64>,
    /// What held its (first) direction back: its verdict's first kind.
    pub limit: Option<LimitKind>,
}

impl From<f64> for RunFigures {
    fn from(throughput_bps: f64) -> RunFigures {
        RunFigures {
            throughput_bps,
            effective_window_bytes: None,
            rtt_s: None,
            loaded_rtt_ms: None,
            limit: None,
        }
    }
}

/// The kind most of `kinds` are, the first among equals.
fn most_said(kinds: &[LimitKind]) -> Option<LimitKind> {
    let count = |k: &LimitKind| kinds.iter().filter(|x| *x == k).count();
    let top = kinds.iter().map(count).max()?;
    kinds.iter().find(|k| count(k) == top).copied()
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    landspeed_core::path::rtt::quantile(v, 0.5)
}

/// One direction of a sweep: the window fits of each stream count and its best cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    /// The direction.
    pub direction: Direction,
    /// One per stream count with at least two window-limited windows.
    pub fits: Vec<WindowFit>,
    /// The best cell and the smallest close to it.
    pub best: Option<BestCells>,
}

/// A sweep's finished runs summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// Runs the plan has.
    pub runs_planned: u32,
    /// Runs finished and stored.
    pub runs_done: u32,
    /// Every cell with runs.
    pub cells: Vec<CellSummary>,
    /// Every direction's fits and best cell.
    pub directions: Vec<DirectionSummary>,
}

/// A sweep as the sinks see it: what was planned, how far it got, and the summary of what finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// The sweep's id in the archive.
    pub sweep_id: i64,
    /// When it was created, UTC.
    pub created_utc: String,
    /// running, complete, incomplete or interrupted.
    pub status: String,
    /// The plan.
    pub plan: SweepPlan,
    /// The summary of what finished.
    pub summary: SweepSummary,
}

/// Summarises the finished runs of `plan`.
pub fn summarize(plan: &SweepPlan, runs: &[(CellKey, RunFigures)]) -> SweepSummary {
    let mut cells = Vec::new();
    let mut directions = Vec::new();
    for &direction in &plan.directions {
        let mut g = Gathered::default();
        for &streams in &plan.streams {
            for &window_bytes in &plan.windows_bytes {
                cells.extend(g.cell(runs, (direction, streams, window_bytes)));
            }
        }
        directions.push(DirectionSummary {
            direction,
            fits: plan.streams.iter().filter_map(|&s| g.fit(s)).collect(),
            best: best_cells(&g.medians),
        });
    }
    SweepSummary {
        runs_planned: plan.cells().len() as u32,
        runs_done: runs.len() as u32,
        cells,
        directions,
    }
}

/// One direction's figures by (window, streams) as its cells are summarised: the median throughput,
/// the window granted ÷ requested, and every run's RTT.
#[derive(Default)]
struct Gathered {
    medians: Vec<(u64, u32, f64)>,
    scales: Vec<(u64, u32, f64)>,
    rtts: Vec<(u64, u32, f64)>,
}

impl Gathered {
    /// The cell (direction, streams, window) from its runs, in repeat order; None without runs.
    fn cell(&mut self, runs: &[(CellKey, RunFigures)], key: (Direction, u32, u64)) -> Option<CellSummary> {
        let (direction, streams, window_bytes) = key;
        let mut mine: Vec<(u32, RunFigures)> = runs
            .iter()
            .filter(|(k, _)| {
                k.direction == direction && k.streams == streams && k.window_bytes == window_bytes
            })
            .map(|(k, v)| (k.repeat, *v))
            .collect();
        mine.sort_by_key(|r| r.0);
        let runs_bps: Vec<f64> = mine.iter().map(|r| r.1.throughput_bps).collect();
        let mut wins: Vec<f64> = mine.iter().filter_map(|r| r.1.effective_window_bytes).collect();
        let effective_window_bytes = median(&mut wins);
        let mut cell_rtts: Vec<f64> = mine.iter().filter_map(|r| r.1.rtt_s).collect();
        self.rtts
            .extend(cell_rtts.iter().map(|&t| (window_bytes, streams, t)));
        let rtt_s = median(&mut cell_rtts);
        let loaded_rtt_ms = median(&mut mine.iter().filter_map(|r| r.1.loaded_rtt_ms).collect::<Vec<_>>());
        let limit = most_said(&mine.iter().filter_map(|r| r.1.limit).collect::<Vec<_>>());
        let stats = CellStats::from_values(&runs_bps)?;
        self.medians.push((window_bytes, streams, stats.median));
        if let Some(e) = effective_window_bytes.filter(|e| *e > 0.0) {
            self.scales.push((window_bytes, streams, e / window_bytes as f64));
        }
        Some(CellSummary {
            window_bytes,
            streams,
            direction,
            throughput_bps: stats,
            runs_bps,
            effective_window_bytes,
            rtt_s,
            loaded_rtt_ms,
            limit,
        })
    }

    /// The window-limited fit of `streams`' medians, with the granted scale and the TCP RTT of the
    /// runs inside the window-limited range.
    fn fit(&self, streams: u32) -> Option<WindowFit> {
        let pts: Vec<(f64, f64)> = self
            .medians
            .iter()
            .filter(|c| c.1 == streams)
            .map(|c| (c.0 as f64, c.2))
            .collect();
        let f = window_fit(streams, &pts)?;
        let up_to = f.window_limited_up_to_bytes;
        let limited = |v: &[(u64, u32, f64)]| -> Vec<f64> {
            v.iter()
                .filter(|c| c.1 == streams && (c.0 as f64) <= up_to)
                .map(|c| c.2)
                .collect()
        };
        let f = match median(&mut limited(&self.scales)) {
            Some(scale) => f.with_window_scale(scale),
            None => f,
        };
        Some(WindowFit {
            measured_rtt_s: median(&mut limited(&self.rtts)),
            ..f
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::plan::Order;

    #[test]
    fn cells_fits_and_best_from_synthetic_runs() {
        // 50 ms RTT, 100 Mbit/s bottleneck: throughput = streams × 8 × window / 0.05, capped.
        let plan = SweepPlan {
            host: "h".into(),
            port: 1,
            windows_bytes: vec![32_768, 65_536, 131_072, 262_144, 1 << 20],
            streams: vec![1, 2],
            directions: vec![Direction::Forward],
            repeat: 3,
            time_s: 1.0,
            order: Order::Scrambled,
            seed: 7,
            version: 2,
            cell: None,
            run_args: vec![],
            command_line: String::new(),
        };
        let runs: Vec<(CellKey, RunFigures)> = plan
            .cells()
            .into_iter()
            .map(|k| {
                let ideal = (f64::from(k.streams) * 8.0 * k.window_bytes as f64 / 0.05).min(1e8);
                // Repetitions at -2%, 0, +2%: the median is the ideal value.
                (k, RunFigures::from(ideal * (0.98 + 0.02 * f64::from(k.repeat))))
            })
            .collect();
        let s = summarize(&plan, &runs);
        assert_eq!((s.runs_planned, s.runs_done), (30, 30));
        assert_eq!(s.cells.len(), 10);
        let c = &s.cells[0];
        assert_eq!((c.window_bytes, c.streams), (32_768, 1));
        assert_eq!(c.throughput_bps.n, 3);
        assert!((c.throughput_bps.median - 8.0 * 32_768.0 / 0.05).abs() < 1e-6);
        assert_eq!(c.runs_bps.len(), 3);
        assert!(c.runs_bps[0] < c.runs_bps[2], "in repetition order");
        let d = &s.directions[0];
        assert_eq!(d.fits.len(), 2);
        for f in &d.fits {
            assert!((f.implied_rtt_s - 0.05).abs() < 1e-9, "{f:?}");
            assert!(f.r2 > 0.999);
        }
        // 1 stream: 32K..256K are on the line (256K gives 41.9 Mbit/s), 1M is capped.
        assert_eq!(d.fits[0].points_used, 4);
        let b = d.best.as_ref().unwrap();
        assert_eq!(b.best.2, 1e8);
        // 2 streams × 512 KiB would do; the smallest buffer reaching 95 Mbit/s is 1 MiB × 1 stream.
        assert_eq!((b.smallest_within_5pct.0, b.smallest_within_5pct.1), (1 << 20, 1));
    }

    #[test]
    fn a_partial_sweep_summarises_what_it_has() {
        let plan = SweepPlan {
            host: "h".into(),
            port: 1,
            windows_bytes: vec![1000, 2000],
            streams: vec![1],
            directions: vec![Direction::Forward, Direction::Reverse],
            repeat: 2,
            time_s: 1.0,
            order: Order::Sequential,
            seed: 0,
            version: 2,
            cell: None,
            run_args: vec![],
            command_line: String::new(),
        };
        let runs: Vec<(CellKey, RunFigures)> = plan
            .cells()
            .into_iter()
            .take(3)
            .map(|k| (k, 1e6.into()))
            .collect();
        let s = summarize(&plan, &runs);
        assert_eq!((s.runs_planned, s.runs_done), (8, 3));
        assert_eq!(s.cells.len(), 3);
        assert!(s.directions[1].best.is_some());
    }

    #[test]
    fn the_window_in_effect_corrects_the_implied_rtt() {
        // Linux grants 1.2 × the requested buffer: a 50 ms path then looks like 41.7 ms per requested byte.
        let plan = SweepPlan {
            host: "h".into(),
            port: 1,
            windows_bytes: vec![65_536, 131_072, 262_144],
            streams: vec![1],
            directions: vec![Direction::Forward],
            repeat: 1,
            time_s: 1.0,
            order: Order::Sequential,
            seed: 0,
            version: 2,
            cell: None,
            run_args: vec![],
            command_line: String::new(),
        };
        let runs: Vec<(CellKey, RunFigures)> = plan
            .cells()
            .into_iter()
            .map(|k| {
                let eff = 1.2 * k.window_bytes as f64;
                let f = RunFigures {
                    throughput_bps: 8.0 * eff / 0.05,
                    effective_window_bytes: Some(eff),
                    rtt_s: Some(0.049 + 0.001 * f64::from(k.repeat)),
                    loaded_rtt_ms: None,
                    limit: Some(if k.window_bytes < 200_000 {
                        LimitKind::ReceiveWindow
                    } else {
                        LimitKind::PathCapacity
                    }),
                };
                (k, f)
            })
            .collect();
        let s = summarize(&plan, &runs);
        let f = &s.directions[0].fits[0];
        assert!((f.implied_rtt_requested_s - 0.05 / 1.2).abs() < 1e-9, "{f:?}");
        assert!((f.window_scale - 1.2).abs() < 1e-9);
        assert!((f.implied_rtt_s - 0.05).abs() < 1e-9);
        assert_eq!(s.cells[0].effective_window_bytes, Some(1.2 * 65_536.0));
        // TCP's own RTT beside the implied one: the median of the fitted cells' runs.
        let mid = s.cells[0].rtt_s.unwrap();
        assert!((f.measured_rtt_s.unwrap() - mid).abs() < 1e-12, "{f:?}");
        assert!((0.049..=0.051).contains(&mid), "{mid}");
        // Each cell says what held its runs back: the window up to 128 KiB, the path above.
        let limits: Vec<(u64, Option<LimitKind>)> =
            s.cells.iter().map(|c| (c.window_bytes, c.limit)).collect();
        assert_eq!(
            limits,
            [
                (65_536, Some(LimitKind::ReceiveWindow)),
                (131_072, Some(LimitKind::ReceiveWindow)),
                (262_144, Some(LimitKind::PathCapacity))
            ]
        );
    }

    #[test]
    fn a_cells_verdict_is_what_most_runs_said() {
        use LimitKind::*;
        assert_eq!(
            most_said(&[PathCapacity, ReceiveWindow, ReceiveWindow]),
            Some(ReceiveWindow)
        );
        assert_eq!(
            most_said(&[SenderCpu, ReceiveWindow]),
            Some(SenderCpu),
            "the first among equals"
        );
        assert_eq!(most_said(&[]), None);
    }
}
