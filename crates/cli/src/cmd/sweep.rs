//! `landspeed sweep`: a windows × streams campaign like SLAC's. The plan is stored in the archive first,
//! then every cell is saved the moment it finishes, so a sweep killed at any point loses at most the
//! cell in flight and `--resume ID` runs exactly the cells that are missing. The progress bar (with an
//! ETA from the cells run so far) and the live table go to stderr; the summary goes to stdout.

use crate::common::client::{cell_spec, check, interrupt_flag, options_for, run_quiet};
use crate::common::run_args::RunArgs;
use crate::common::store::DbArg;
use crate::common::sweep_output::load_report;
use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::{Args, Parser, ValueEnum};
use landspeed_archive::Archive;
use landspeed_campaign::sweep::{
    self as campaign, CellOutcome, Sweep, SweepError, SweepEvent, SweepStatus, MAX_FAILS_IN_A_ROW,
};
use landspeed_core::config::Direction;
use landspeed_core::units::{BitRate, Bytes};
use landspeed_plan::sweep::{parse_streams, parse_windows, CellKey, Order, SweepPlan, PLAN_VERSION};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Server to test against (not needed with --resume).
    #[arg(required_unless_present = "resume")]
    pub host: Option<String>,
    /// Socket buffer sizes to try: a list (64K,256K,1M) or a range: 64K..8M doubles, 64K..8M:x4
    /// multiplies by 4, 1M..8M:+1M adds 1 MiB.
    #[arg(long, value_name = "LIST|RANGE", required_unless_present = "resume")]
    pub windows: Option<String>,
    /// Stream counts to try, e.g. 1,2,4,8.
    #[arg(long, value_name = "LIST", default_value = "1")]
    pub streams: String,
    /// Runs of every cell.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
    /// Length of each run.
    #[arg(short, long, value_name = "DUR", default_value = "10s", value_parser = crate::common::values::duration)]
    pub time: Duration,
    /// Order of the runs: scrambled (each repetition in its own random order, as SLAC ran them) or
    /// sequential.
    #[arg(long, value_enum, default_value_t = OrderArg::Scrambled)]
    pub order: OrderArg,
    /// Run every cell in both directions (client sends, then server sends).
    #[arg(long)]
    pub both_directions: bool,
    /// Seed of the scrambled order (default: from the clock; stored with the sweep).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Continue sweep ID: run only the cells it is missing, with its stored plan and options.
    #[arg(long, value_name = "ID", conflicts_with_all = ["host", "windows", "seed", "run_args"])]
    pub resume: Option<i64>,
    /// A label stored with every cell's run.
    #[arg(long)]
    pub tag: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the summary (cells, fits, best cell) as JSON.
    #[arg(long)]
    pub json: bool,
    /// When done, write the plots (SVG and PNG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// When done, write the HTML report to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Options of `landspeed run` for every cell, after `--` (e.g. -- -p 5300 -C bbr -l 1M).
    #[arg(last = true, value_name = "RUN OPTIONS")]
    pub run_args: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OrderArg {
    Scrambled,
    Sequential,
}

/// The `run` options after `--`, parsed as `run` parses them.
#[derive(Parser, Debug)]
#[command(name = "landspeed sweep ... --", no_binary_name = true)]
struct CellArgs {
    #[command(flatten)]
    run: RunArgs,
}

/// Parses the per-cell options and refuses the ones the sweep itself sets.
fn cell_args(host: &str, extra: &[String]) -> Result<RunArgs> {
    let a = CellArgs::try_parse_from(std::iter::once(host.to_string()).chain(extra.iter().cloned()))
        .map_err(|e| UsageError(format!("the run options after --: {}", e.kind())))
        .with_context(|| format!("'{}'", extra.join(" ")))?
        .run;
    let t = &a.test;
    let set_by_sweep = [
        ("-P/--streams (use the sweep's --streams)", t.streams != 1),
        ("-w/--window (use --windows)", t.window.is_some()),
        (
            "-t/-n/-k (use the sweep's --time)",
            t.time.is_some() || t.bytes.is_some() || t.blocks.is_some(),
        ),
        ("-R/--bidir (use --both-directions)", t.reverse || t.bidir),
        (
            "--json/--json-stream (use the sweep's --json)",
            a.json || a.json_stream,
        ),
        (
            "--tag/--db/--no-save (use the sweep's)",
            a.tag.is_some() || a.db.db.is_some() || a.no_save,
        ),
        ("--path", a.measure_path),
        (
            "--iperf2 (a sweep speaks landspeed's or iperf3's protocol)",
            a.iperf2,
        ),
        (
            "a bulk test in every cell (--rr, --bounceback, --connect-rate and --connect-only are not)",
            t.rr || a.bounceback.is_some() || a.connect_rate || a.connect_only,
        ),
        (
            "the generated payload (leave out --send-file, --recv-file and --from)",
            a.send_file.is_some() || a.recv_file.is_some() || a.from.is_some(),
        ),
    ];
    if let Some((what, _)) = set_by_sweep.iter().find(|(_, set)| *set) {
        return Err(UsageError(format!("the sweep sets {what}; leave it out of the run options")).into());
    }
    Ok(a)
}

fn new_plan(a: &SweepArgs) -> Result<SweepPlan> {
    let usage = |e: landspeed_plan::sweep::PlanError| UsageError(crate::common::flags::plan(&e));
    let host = a.host.clone().context("a host is needed")?;
    let cell = cell_args(&host, &a.run_args)?;
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let plan = SweepPlan {
        version: PLAN_VERSION,
        host,
        port: cell.test.port,
        windows_bytes: parse_windows(a.windows.as_deref().unwrap_or_default()).map_err(usage)?,
        streams: parse_streams(&a.streams).map_err(usage)?,
        directions: if a.both_directions {
            vec![Direction::Forward, Direction::Reverse]
        } else {
            vec![Direction::Forward]
        },
        repeat: a.repeat,
        time_s: a.time.as_secs_f64(),
        order: match a.order {
            OrderArg::Scrambled => Order::Scrambled,
            OrderArg::Sequential => Order::Sequential,
        },
        seed,
        cell: Some(cell_spec(&cell)?),
        run_args: a.run_args.clone(),
        command_line: std::env::args()
            .map(|s| shell_word(&s))
            .collect::<Vec<_>>()
            .join(" "),
    };
    plan.validate().map_err(usage)?;
    if !(0.1..=3600.0).contains(&plan.time_s) {
        return Err(UsageError(format!("--time must be 0.1 s..=1 h, got {:?}", a.time)).into());
    }
    Ok(plan)
}

fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn cell_name(c: &CellKey) -> String {
    let dir = match c.direction {
        Direction::Forward => "send",
        Direction::Reverse => "recv",
        Direction::Bidir => "bidir",
    };
    format!(
        "{:>9} × {:>2} {dir} #{}",
        Bytes(c.window_bytes).to_string(),
        c.streams,
        c.repeat + 1
    )
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

pub fn sweep(a: SweepArgs) -> Result<bool> {
    let archive = a.db.open()?;
    let (id, plan) = open_sweep(&a, &archive)?;
    let cell = plan.cell.as_ref().context("the plan has no cell specification")?;
    let base = options_for(&plan.host, plan.port, cell)?;
    check(&base)?;
    let sweep = Sweep {
        archive: &archive,
        id,
        plan: &plan,
        tag: a.tag.clone(),
    };
    let todo = sweep.todo(&base).map_err(|e| match e {
        SweepError::Cell(c) => anyhow::Error::from(UsageError(crate::common::flags::config(&c))),
        other => other.into(),
    })?;
    errln!("{}", announce(id, &plan, todo.done.len(), todo.cells.len()));
    let interrupt = interrupt_flag()?;
    let out = {
        let mut progress = Progress::new(todo.cells.len());
        let iperf3 = cell.iperf3;
        sweep.run(
            &todo,
            &interrupt,
            &mut |o| run_quiet(o, iperf3, &interrupt),
            &mut |e| progress.event(e),
        )?
    };
    if out.retried > 0 {
        errln!(
            "landspeed: {} cell(s) failed and were tried again at the end: {} stored on the second try",
            out.retried,
            out.retried - out.failed.min(out.retried)
        );
    }
    if out.status != SweepStatus::Complete {
        errln!(
            "landspeed: sweep {id} is {} ({} failed runs not saved); landspeed sweep --resume {id} runs what is missing",
            out.status.as_str(),
            out.failed
        );
    }
    errln!("landspeed: sweep took {}", human(out.elapsed));
    let report = load_report(&archive, id)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", landspeed_report::sweep_text(&report));
    }
    crate::common::sweep_output::write_outputs(&archive, &report, a.plots.as_deref(), a.html.as_deref())?;
    Ok(out.status == SweepStatus::Complete)
}

/// The sweep to run: the one `--resume` names, or a new one stored in the archive now.
fn open_sweep(a: &SweepArgs, archive: &Archive) -> Result<(i64, SweepPlan)> {
    if let Some(id) = a.resume {
        let plan = load_report(archive, id)?.plan;
        return Ok((id, current_plan(archive, id, plan)?));
    }
    let plan = new_plan(a)?;
    let now = landspeed_core::result::format_utc(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    );
    let id = campaign::create(archive, &plan, &now)?;
    Ok((id, plan))
}

/// A stored plan in this landspeed's format: a format-1 plan (its run options stored as command-line
/// words) is read once more with today's options and stored again as format 2; one whose words today's
/// options refuse, or one from a newer landspeed, is refused with what to do.
fn current_plan(archive: &Archive, id: i64, mut plan: SweepPlan) -> Result<SweepPlan> {
    if plan.version > PLAN_VERSION {
        return Err(UsageError(format!(
            "sweep {id} was stored by a newer landspeed (plan format {}, this one knows {PLAN_VERSION}): resume it with that landspeed",
            plan.version
        ))
        .into());
    }
    if plan.version == PLAN_VERSION && plan.cell.is_some() {
        return Ok(plan);
    }
    let cell = cell_args(&plan.host, &plan.run_args)
        .and_then(|a| cell_spec(&a))
        .map_err(|e| {
            UsageError(format!(
                "sweep {id} was stored by an older landspeed as command-line words ('{}') that this one cannot read: {e:#}; \
                 start a new sweep with the same grid and today's run options",
                plan.run_args.join(" ")
            ))
        })?;
    plan.cell = Some(cell);
    plan.version = PLAN_VERSION;
    archive.set_sweep_plan(id, &serde_json::to_string(&plan)?)?;
    errln!(
        "landspeed: sweep {id}'s plan carried over to plan format {PLAN_VERSION} (typed cell specification)"
    );
    Ok(plan)
}

/// What a sweep is about to do, in one line.
fn announce(id: i64, plan: &SweepPlan, done: usize, todo: usize) -> String {
    format!(
        "landspeed: sweep {id} against {}: {} windows × {} stream counts × {} direction(s) × {} = {} runs of {}, {} order; {done} done, {todo} to run (landspeed sweep --resume {id} continues it)",
        plan.host,
        plan.windows_bytes.len(),
        plan.streams.len(),
        plan.directions.len(),
        plan.repeat,
        plan.cells().len(),
        if plan.time_s < 60.0 { format!("{} s", plan.time_s) } else { human(Duration::from_secs_f64(plan.time_s)) },
        format!("{:?}", plan.order).to_lowercase(),
    )
}

/// The progress bar (with the ETA and the cell running) and the live table, on stderr.
struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    fn new(todo: usize) -> Progress {
        let bar = indicatif::ProgressBar::new(todo as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs {msg}")
                .expect("static template"),
        );
        Progress { bar }
    }

    fn say(&self, line: String) {
        if self.bar.is_hidden() {
            errln!("{line}")
        } else {
            self.bar.println(line)
        }
    }

    fn event(&mut self, e: SweepEvent) {
        match e {
            SweepEvent::Starting { cell, eta, .. } => {
                self.bar
                    .set_message(format!("ETA {} · now {}", human(eta), cell_name(cell)))
            }
            SweepEvent::Finished {
                position,
                total,
                cell,
                outcome,
                retry,
            } => {
                let line = cell_line(position, total, cell, outcome);
                if retry {
                    self.say(format!("{line}  (second try)"));
                } else {
                    self.say(line);
                    self.bar.inc(1);
                }
            }
            SweepEvent::Retrying { cells } => self.say(format!(
                "landspeed: every cell has run; trying the {cells} that failed once more"
            )),
            SweepEvent::TooManyFailures => self.say(format!(
                "landspeed: {MAX_FAILS_IN_A_ROW} runs in a row failed; stopping"
            )),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// A line of the live table: the cell's run and its running median, or why it failed.
fn cell_line(n: usize, total: usize, c: &CellKey, outcome: &CellOutcome) -> String {
    match outcome {
        CellOutcome::Failed { why } => format!("  [{n:>4}/{total}] {}  FAILED: {why}", cell_name(c)),
        CellOutcome::Stored {
            run_id,
            throughput_bps,
            retransmits,
            cell_median_bps,
            cell_runs,
        } => format!(
            "  [{n:>4}/{total}] {}  {:>14}  retr {:>6}  cell median {:>14} (n={cell_runs})  run {run_id}",
            cell_name(c),
            BitRate(*throughput_bps).to_string(),
            retransmits,
            cell_median_bps.map_or(String::new(), |m| BitRate(m).to_string()),
        ),
    }
}
