//! The sweep runner: every missing cell of a stored [`SweepPlan`] run in the plan's order, each trusted
//! run stored the moment it ends (so a sweep killed at any point loses at most the cell in flight), an
//! ETA from the cells run so far, a running median per cell, and a stop after
//! [`MAX_FAILS_IN_A_ROW`] failures in a row (the server is likely gone) or when interrupted.

use landspeed_archive::{Archive, ArchiveError, RunMeta};
use landspeed_core::config::{ConfigError, Direction, EndCondition};
use landspeed_core::intent::TestIntent;
use landspeed_core::result::RunResult;
use landspeed_core::units::Bytes;
use landspeed_net::{ClientError, ClientOptions};
use landspeed_plan::sweep::{summarize, CellKey, CellStats, RunFigures, SweepPlan, SweepReport};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Consecutive failed cells after which the sweep stops.
pub const MAX_FAILS_IN_A_ROW: u32 = 3;

/// Why a sweep could not be run or read.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The archive failed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The archive has no such sweep.
    #[error("no sweep {id} in {archive}")]
    NoSweep {
        /// The sweep asked for.
        id: i64,
        /// The archive, as named.
        archive: String,
    },
    /// The stored plan is not a sweep plan.
    #[error("sweep {id}'s stored plan is not readable: {err}")]
    Plan {
        /// The sweep.
        id: i64,
        /// Why its JSON did not read.
        err: serde_json::Error,
    },
    /// The stored plan is of a format that carries no typed cell (format 1: resume carries it over).
    #[error("sweep {id}'s plan has no cell specification (plan format {version})")]
    NoCell {
        /// The sweep.
        id: i64,
        /// The plan's format.
        version: u32,
    },
    /// A stored run names a direction this landspeed does not know.
    #[error("sweep {id}, run {run}: direction '{direction}' is not one this landspeed knows")]
    Direction {
        /// The sweep.
        id: i64,
        /// The run.
        run: i64,
        /// The direction as stored.
        direction: String,
    },
    /// A cell's test does not validate (a window or stream count out of range).
    #[error("a cell's test is not valid: {0}")]
    Cell(#[from] ConfigError),
}

/// How a sweep stands in the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepStatus {
    /// Cells are still being run (or the sweep was cut off).
    Running,
    /// Every cell is stored.
    Complete,
    /// Some runs failed (not stored); resuming runs them.
    Incomplete,
    /// Stopped by the user.
    Interrupted,
}

impl SweepStatus {
    /// The word stored in the archive.
    pub fn as_str(self) -> &'static str {
        match self {
            SweepStatus::Running => "running",
            SweepStatus::Complete => "complete",
            SweepStatus::Incomplete => "incomplete",
            SweepStatus::Interrupted => "interrupted",
        }
    }
}

/// What became of one cell's run.
#[derive(Debug, Clone, PartialEq)]
pub enum CellOutcome {
    /// Trusted and stored as run `run_id`; the cell's running median over its stored runs so far.
    Stored {
        /// The stored run's id.
        run_id: i64,
        /// The run's throughput, bit/s.
        throughput_bps: f64,
        /// Its retransmitted segments.
        retransmits: u64,
        /// The median of the cell's stored runs so far.
        cell_median_bps: Option<f64>,
        /// How many runs the cell has stored so far.
        cell_runs: usize,
    },
    /// Failed or untrusted, so not stored: the reason in words.
    Failed {
        /// Why, in words.
        why: String,
    },
}

/// What a running sweep tells its observer.
#[derive(Debug)]
pub enum SweepEvent<'a> {
    /// The `index`th of `todo` cells is about to run; `eta` for the rest from the cells run so far.
    Starting {
        /// This cell's place among the cells to run now, from 0.
        index: usize,
        /// How many cells run now.
        todo: usize,
        /// The cell.
        cell: &'a CellKey,
        /// The time the remaining cells are expected to take.
        eta: Duration,
    },
    /// A cell ended; `position` counts the sweep's cells (those stored before included) of `total`.
    Finished {
        /// Cells of the sweep done, this one included.
        position: usize,
        /// Cells in the sweep.
        total: usize,
        /// The cell.
        cell: &'a CellKey,
        /// What became of it.
        outcome: &'a CellOutcome,
        /// This was the cell's second try, after every other cell had run.
        retry: bool,
    },
    /// Every cell has run once and `cells` of them failed: they are run once more now.
    Retrying {
        /// How many cells are tried again.
        cells: usize,
    },
    /// [`MAX_FAILS_IN_A_ROW`] runs failed in a row: the sweep stops here.
    TooManyFailures,
}

/// How a run of the sweep ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepOutcome {
    /// The sweep's status after this run of it.
    pub status: SweepStatus,
    /// Cells that failed twice, once in order and once more at the end (not stored).
    pub failed: u32,
    /// Cells that failed in order and were tried again at the end.
    pub retried: u32,
    /// How long this run of the sweep took.
    pub elapsed: Duration,
}

/// Where a run of the sweep is: the running medians, its start, the cells finished, the cells that
/// failed (indices into the run's cells), failures in a row, why it stopped early, and whether this
/// pass is the second try of the failed cells.
struct Pass {
    so_far: Medians,
    started: Instant,
    finished: usize,
    failed: Vec<usize>,
    in_a_row: u32,
    stopped: Option<SweepStatus>,
    retry: bool,
}

/// Runs one cell's test: landspeed's protocol or iperf3's, as the plan says.
pub type RunCell<'a> = dyn FnMut(&ClientOptions) -> Result<RunResult, ClientError> + 'a;

/// Stores a new sweep's plan; returns its id.
pub fn create(archive: &Archive, plan: &SweepPlan, created_utc: &str) -> Result<i64, SweepError> {
    let json = serde_json::to_string(plan).map_err(|err| SweepError::Plan { id: 0, err })?;
    Ok(archive.create_sweep(&plan.host, created_utc, &json)?)
}

/// The report of sweep `id` as stored: its plan, status and the summary of its stored cells.
pub fn report(archive: &Archive, id: i64) -> Result<SweepReport, SweepError> {
    let row = archive.sweep(id)?.ok_or_else(|| SweepError::NoSweep {
        id,
        archive: archive.path().to_string(),
    })?;
    let plan: SweepPlan = serde_json::from_str(&row.plan_json).map_err(|err| SweepError::Plan { id, err })?;
    let summary = summarize(&plan, &finished(archive, id)?);
    Ok(SweepReport {
        sweep_id: id,
        created_utc: row.created_utc,
        status: row.status,
        plan,
        summary,
    })
}

/// The cells of sweep `id` already stored, with their figures.
pub fn finished(archive: &Archive, id: i64) -> Result<Vec<(CellKey, RunFigures)>, SweepError> {
    archive
        .sweep_runs(id)?
        .into_iter()
        .map(|r| {
            let direction = stored_direction(&r.direction).ok_or_else(|| SweepError::Direction {
                id,
                run: r.run_id,
                direction: r.direction.clone(),
            })?;
            let key = CellKey {
                window_bytes: r.window_bytes.unwrap_or(0),
                streams: r.streams,
                direction,
                repeat: r.repeat,
            };
            let figures = RunFigures {
                throughput_bps: r.throughput_bps,
                effective_window_bytes: r.effective_window_bytes,
                rtt_s: r.rtt_s,
                loaded_rtt_ms: r.loaded_rtt_ms,
                limit: r.limit,
            };
            Ok((key, figures))
        })
        .collect()
}

/// A direction as the archive stores it (`forward`, `reverse`, `bidir`); None for any other word
/// (never a silent `forward`).
fn stored_direction(word: &str) -> Option<Direction> {
    serde_json::from_value(word.into()).ok()
}

/// The options of cell `c`: the plan's cell test with the cell's streams, window, direction and time,
/// validated again.
pub fn cell_options(
    base: &ClientOptions,
    plan: &SweepPlan,
    c: &CellKey,
) -> Result<ClientOptions, ConfigError> {
    let mut o = base.clone();
    let time = EndCondition::Time(Duration::from_secs_f64(plan.time_s));
    o.spec = match plan.cell.as_ref().and_then(|cell| cell.intent.as_ref()) {
        Some(intent) => {
            // The one lowering, with the cell's own streams: a rate for all streams is shared out
            // among this cell's, and the defaults for many streams apply to the cells that have them.
            let said = TestIntent {
                streams: Some(c.streams),
                window: Some(Bytes(c.window_bytes)),
                end: Some(time),
                direction: c.direction,
                ..intent.said.clone()
            };
            said.validated(Some(intent.client_cpus))?
        }
        None => base.spec.changed(|s| {
            s.streams = c.streams;
            s.window_bytes = Some(c.window_bytes);
            s.end = time;
            s.direction = c.direction;
        })?,
    };
    Ok(o)
}

/// A cell's throughputs so far, repetitions folded (for the running median).
type Medians = HashMap<(u64, u32, Direction), Vec<f64>>;

/// One stored sweep being run.
pub struct Sweep<'a> {
    /// Where the sweep and its runs are stored.
    pub archive: &'a Archive,
    /// The sweep's id in the archive.
    pub id: i64,
    /// The sweep's plan.
    pub plan: &'a SweepPlan,
    /// The label stored with every run.
    pub tag: Option<String>,
}

/// What a run of the sweep has before it starts: the stored cells and the ones to run, validated.
pub struct Todo {
    /// The cells already stored, with their figures.
    pub done: Vec<(CellKey, RunFigures)>,
    /// The cells still to run, each with the client options of its test.
    pub cells: Vec<(CellKey, ClientOptions)>,
}

impl Sweep<'_> {
    /// The cells stored so far and the ones still to run, in the plan's order, each with its
    /// validated options (so a bad cell stops the sweep before its first run, not in the middle).
    pub fn todo(&self, base: &ClientOptions) -> Result<Todo, SweepError> {
        let done = finished(self.archive, self.id)?;
        let have: HashSet<CellKey> = done.iter().map(|c| c.0).collect();
        let cells = self
            .plan
            .remaining(&have)
            .into_iter()
            .map(|c| Ok((c, cell_options(base, self.plan, &c)?)))
            .collect::<Result<Vec<_>, SweepError>>()?;
        Ok(Todo { done, cells })
    }

    /// Runs `todo` in order, storing each trusted run as it ends, then once more each cell that
    /// failed (a server restarted mid-sweep, a path that was down for a while), and sets the sweep's
    /// status. A cell is stored at most once: a failed run is never stored.
    pub fn run(
        &self,
        todo: &Todo,
        interrupted: &AtomicBool,
        run_cell: &mut RunCell<'_>,
        observe: &mut dyn FnMut(SweepEvent),
    ) -> Result<SweepOutcome, SweepError> {
        self.archive
            .set_sweep_status(self.id, SweepStatus::Running.as_str())?;
        let mut pass = Pass {
            so_far: running_medians(&todo.done),
            started: Instant::now(),
            finished: todo.done.len(),
            failed: vec![],
            in_a_row: 0,
            stopped: None,
            retry: false,
        };
        let all: Vec<usize> = (0..todo.cells.len()).collect();
        self.pass(todo, &all, &mut pass, interrupted, run_cell, observe)?;
        let mut retried = 0;
        if pass.stopped.is_none() && !pass.failed.is_empty() {
            let again = std::mem::take(&mut pass.failed);
            retried = again.len() as u32;
            observe(SweepEvent::Retrying { cells: again.len() });
            pass.in_a_row = 0;
            pass.retry = true;
            self.pass(todo, &again, &mut pass, interrupted, run_cell, observe)?;
        }
        let failed = pass.failed.len() as u32;
        let status = pass.stopped.unwrap_or(if failed > 0 {
            SweepStatus::Incomplete
        } else {
            SweepStatus::Complete
        });
        self.archive.set_sweep_status(self.id, status.as_str())?;
        Ok(SweepOutcome {
            status,
            failed,
            retried,
            elapsed: pass.started.elapsed(),
        })
    }

    /// Runs the cells of `todo` at `which`, in order (`pass.retry`: the second try of cells that
    /// failed).
    fn pass(
        &self,
        todo: &Todo,
        which: &[usize],
        pass: &mut Pass,
        interrupted: &AtomicBool,
        run_cell: &mut RunCell<'_>,
        observe: &mut dyn FnMut(SweepEvent),
    ) -> Result<(), SweepError> {
        for (i, &k) in which.iter().enumerate() {
            let (c, opts) = &todo.cells[k];
            let eta = self.eta(pass.started.elapsed(), i, which.len());
            observe(SweepEvent::Starting {
                index: i,
                todo: which.len(),
                cell: c,
                eta,
            });
            let outcome = run_cell(opts);
            if interrupted.load(Relaxed) {
                pass.stopped = Some(SweepStatus::Interrupted);
                return Ok(());
            }
            let outcome = self.record(c, outcome, &mut pass.so_far)?;
            if matches!(outcome, CellOutcome::Stored { .. }) {
                pass.in_a_row = 0;
            } else {
                pass.failed.push(k);
                pass.in_a_row += 1;
            }
            if !pass.retry {
                pass.finished += 1;
            }
            observe(SweepEvent::Finished {
                position: pass.finished,
                total: self.plan.cells().len(),
                cell: c,
                outcome: &outcome,
                retry: pass.retry,
            });
            if pass.in_a_row >= MAX_FAILS_IN_A_ROW {
                observe(SweepEvent::TooManyFailures);
                pass.stopped = Some(SweepStatus::Incomplete);
                return Ok(());
            }
        }
        Ok(())
    }

    /// The time the remaining cells should take: the plan's time (and a second) for the first, then
    /// the mean of the cells run so far.
    fn eta(&self, elapsed: Duration, index: usize, todo: usize) -> Duration {
        let per_cell = if index == 0 {
            Duration::from_secs_f64(self.plan.time_s + 1.0)
        } else {
            elapsed / index as u32
        };
        per_cell * (todo - index) as u32
    }

    /// Stores a trusted run of cell `c`; a failed or untrusted one is not stored.
    fn record(
        &self,
        c: &CellKey,
        outcome: Result<RunResult, ClientError>,
        so_far: &mut Medians,
    ) -> Result<CellOutcome, SweepError> {
        let r = match outcome {
            Ok(r) if r.verdict().is_trusted() => r,
            Ok(r) => {
                return Ok(CellOutcome::Failed {
                    why: r.verdict().to_string(),
                })
            }
            Err(e) => return Ok(CellOutcome::Failed { why: e.to_string() }),
        };
        let meta = RunMeta {
            tag: self.tag.clone(),
            sweep: Some((self.id, c.repeat)),
            ..Default::default()
        };
        let run_id = self.archive.save(&r, &meta)?;
        let cell = so_far
            .entry((c.window_bytes, c.streams, c.direction))
            .or_default();
        cell.push(r.summary.throughput_bps);
        Ok(CellOutcome::Stored {
            run_id,
            throughput_bps: r.summary.throughput_bps,
            retransmits: r.summary.retransmits,
            cell_median_bps: CellStats::from_values(cell).map(|s| s.median),
            cell_runs: cell.len(),
        })
    }
}

fn running_medians(before: &[(CellKey, RunFigures)]) -> Medians {
    let mut so_far = Medians::new();
    for (k, f) in before {
        so_far
            .entry((k.window_bytes, k.streams, k.direction))
            .or_default()
            .push(f.throughput_bps);
    }
    so_far
}

#[cfg(test)]
mod tests;
