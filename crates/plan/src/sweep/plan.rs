//! What a sweep will run, kept apart from running it: the grid of windows × streams × directions, how
//! many times each cell is repeated, and the order. SLAC scrambled the order so that a slow drift of the
//! path (the evening peak, a backup job) spreads over every cell instead of biasing the last ones; we do
//! the same, one shuffled round of every cell per repetition, from a seed stored with the plan so that
//! a resumed sweep sees the same order and knows exactly which cells are left.

use landspeed_core::config::{Direction, Family, Test};
use landspeed_core::units::{secs, Bytes};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Why a sweep's grid cannot be planned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("'{0}' is not a window size list (64K,256K,1M) or a range (64K..8M, 64K..8M:x4, 1M..8M:+1M)")]
    /// A window list or range that does not read.
    Windows(String),
    /// A window size out of range.
    #[error("window size: {0}")]
    WindowSize(String),
    /// A window range with more than `MAX_AXIS` values.
    #[error("a range of more than {MAX_AXIS} windows ('{0}')")]
    TooManyWindows(String),
    /// A stream list that does not read.
    #[error("'{0}' is not a list of stream counts like 1,2,4,8 (each 1..=1024)")]
    Streams(String),
    /// A repeat count out of range.
    #[error("the repeat count must be 1..=100, got {0}")]
    Repeat(u32),
    /// More than `MAX_CELLS` cells.
    #[error("a sweep of {0} cells is too many (at most {MAX_CELLS})")]
    TooManyCells(usize),
}

/// Most values on one axis of a sweep.
pub const MAX_AXIS: usize = 64;
/// Most cells (windows × streams × directions × repeats) one sweep may have.
pub const MAX_CELLS: usize = 10_000;

/// In which order a sweep runs its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Each repetition runs every cell once, in its own random order (SLAC's way).
    #[default]
    Scrambled,
    /// Windows in order within streams in order, repetition after repetition.
    Sequential,
}

/// One run of the sweep: a (window, streams, direction) cell and which repetition of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CellKey {
    /// The cell's window (socket buffer per stream), bytes.
    pub window_bytes: u64,
    /// The cell's streams per direction.
    pub streams: u32,
    /// The cell's direction.
    pub direction: Direction,
    /// 0-based.
    pub repeat: u32,
}

/// The plan format this landspeed writes. 2: every cell's test stored as typed JSON ([`CellSpec`]).
/// 1 (landspeed before it): the `run` options stored as command-line words only, read again with
/// the command line's parser on `--resume`; such a plan is carried over once, when it is resumed.
pub const PLAN_VERSION: u32 = 2;

fn version_1() -> u32 {
    1
}

/// What every cell of a sweep runs, before the sweep sets the cell's window, stream count, direction
/// and time: the validated test and how the client runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSpec {
    /// The test (serialized as its `TestSpec`; reading it validates it).
    pub test: Test,
    /// Run with iperf3's protocol against an iperf3 server.
    #[serde(default)]
    pub iperf3: bool,
    /// How the client runs every cell.
    #[serde(default)]
    pub client: CellClient,
    /// What the options said, from which each cell's test is lowered with its own streams, window,
    /// direction and time (a plan stored before landspeed 0.1's one lowering has none: its cells
    /// change `test` in place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<CellIntent>,
}

/// A sweep's options as they were said, and the CPUs of the host the plan was made on: the cells of
/// a sweep resumed elsewhere are the same tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellIntent {
    /// The options.
    pub said: landspeed_core::intent::TestIntent,
    /// The client's CPUs when the plan was made ([`landspeed_core::intent::TestIntent::lower`]).
    pub client_cpus: u32,
}

/// The client's own settings for every cell (those that are not part of the test both ends agree on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellClient {
    /// Client worker threads (None: one per stream up to the core count).
    #[serde(default)]
    pub threads: Option<usize>,
    /// CPUs the client pins its workers to, round-robin.
    #[serde(default)]
    pub cpus: Option<Vec<usize>>,
    /// Local address to bind to.
    #[serde(default)]
    pub bind: Option<IpAddr>,
    /// The first local port of the data connections (`--cport`): stream N uses it plus N.
    #[serde(default)]
    pub cport: Option<u16>,
    /// IPv4 or IPv6 only.
    #[serde(default)]
    pub family: Option<Family>,
    /// How long each connect may take.
    #[serde(with = "secs", default = "default_connect_timeout")]
    pub connect_timeout_s: Duration,
    /// A data stream that moves nothing for this long fails the test (`--idle-timeout`).
    #[serde(with = "secs", default = "default_idle_timeout")]
    pub idle_timeout_s: Duration,
    /// Echo probes during every cell, per second (None: no latency probes).
    #[serde(default)]
    pub latency_probes_per_s: Option<f64>,
    /// The name and key file to authenticate with; the key is read from the file when the sweep runs
    /// and never stored.
    #[serde(default)]
    pub auth: Option<(String, PathBuf)>,
    /// A UDP test's datagram size was not given: the client takes it from the path.
    #[serde(default)]
    pub udp_length_from_path: bool,
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

/// How long a stream may move nothing before the test fails, when the user does not say.
pub fn default_idle_timeout() -> Duration {
    Duration::from_secs(30)
}

impl Default for CellClient {
    fn default() -> Self {
        CellClient {
            threads: None,
            cpus: None,
            bind: None,
            cport: None,
            family: None,
            connect_timeout_s: default_connect_timeout(),
            idle_timeout_s: default_idle_timeout(),
            latency_probes_per_s: None,
            auth: None,
            udp_length_from_path: false,
        }
    }
}

/// Everything needed to run (or resume) a sweep; stored as JSON with the sweep in the archive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// The plan format ([`PLAN_VERSION`]; a plan without one is format 1).
    #[serde(default = "version_1")]
    pub version: u32,
    /// The server.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// The windows tried, bytes.
    pub windows_bytes: Vec<u64>,
    /// The stream counts tried.
    pub streams: Vec<u32>,
    /// The directions tried.
    pub directions: Vec<Direction>,
    /// How many times each cell runs.
    pub repeat: u32,
    /// Each run's length, seconds.
    pub time_s: f64,
    /// The order cells run in.
    pub order: Order,
    /// The seed of the scrambled order, so a sweep can be repeated.
    pub seed: u64,
    /// Every cell's test and client settings (format 2; None in a format-1 plan until it is carried
    /// over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<CellSpec>,
    /// The `run` options as given after `--`: shown in reports; read again only to carry a format-1
    /// plan over.
    #[serde(default)]
    pub run_args: Vec<String>,
    /// The command line that started the sweep, for the report.
    pub command_line: String,
}

impl SweepPlan {
    /// Checks the grid's size; the axes themselves come from [`parse_windows`] and [`parse_streams`].
    pub fn validate(&self) -> Result<(), PlanError> {
        if !(1..=100).contains(&self.repeat) {
            return Err(PlanError::Repeat(self.repeat));
        }
        let n = self.windows_bytes.len() * self.streams.len() * self.directions.len() * self.repeat as usize;
        if n > MAX_CELLS {
            return Err(PlanError::TooManyCells(n));
        }
        Ok(())
    }

    /// Every run of the sweep, in the order they are to be run.
    pub fn cells(&self) -> Vec<CellKey> {
        let mut out = Vec::new();
        let mut rng = SplitMix(self.seed);
        for repeat in 0..self.repeat {
            let mut round: Vec<CellKey> = Vec::new();
            for &direction in &self.directions {
                for &streams in &self.streams {
                    for &window_bytes in &self.windows_bytes {
                        round.push(CellKey {
                            window_bytes,
                            streams,
                            direction,
                            repeat,
                        });
                    }
                }
            }
            if self.order == Order::Scrambled {
                // Fisher–Yates.
                for i in (1..round.len()).rev() {
                    let j = (rng.next() % (i as u64 + 1)) as usize;
                    round.swap(i, j);
                }
            }
            out.extend(round);
        }
        out
    }

    /// The runs still to do when `done` are in the archive, in plan order.
    pub fn remaining(&self, done: &HashSet<CellKey>) -> Vec<CellKey> {
        self.cells().into_iter().filter(|c| !done.contains(c)).collect()
    }
}

/// A small, well-mixed generator (SplitMix64): enough to shuffle a grid reproducibly.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn size(s: &str) -> Result<u64, PlanError> {
    let b: Bytes = s
        .trim()
        .parse()
        .map_err(|e: landspeed_core::units::UnitError| PlanError::WindowSize(e.to_string()))?;
    if b.get() == 0 {
        return Err(PlanError::WindowSize(format!("'{s}' is zero")));
    }
    Ok(b.get())
}

/// Windows as a list (`64K,256K,1M`) or a range: `A..B` doubles from A up to B, `A..B:xF` multiplies by
/// F, `A..B:+S` adds S. B is included when a step lands on it.
pub fn parse_windows(s: &str) -> Result<Vec<u64>, PlanError> {
    let bad = || PlanError::Windows(s.to_string());
    let mut out = if let Some((from, rest)) = s.split_once("..") {
        let (to, step) = match rest.split_once(':') {
            Some((to, step)) => (to, Some(step)),
            None => (rest, None),
        };
        let (a, b) = (size(from)?, size(to)?);
        if a > b {
            return Err(bad());
        }
        let next: Box<dyn Fn(u64) -> u64> = match step {
            None => Box::new(|w| w.saturating_mul(2)),
            Some(st) if st.starts_with('x') => {
                let f: f64 = st[1..].parse().map_err(|_| bad())?;
                if !(f > 1.0 && f.is_finite()) {
                    return Err(bad());
                }
                Box::new(move |w| ((w as f64 * f).round() as u64).max(w + 1))
            }
            Some(st) if st.starts_with('+') => {
                let d = size(&st[1..])?;
                Box::new(move |w| w.saturating_add(d))
            }
            Some(_) => return Err(bad()),
        };
        let mut v = Vec::new();
        let mut w = a;
        while w <= b {
            if v.len() == MAX_AXIS {
                return Err(PlanError::TooManyWindows(s.to_string()));
            }
            v.push(w);
            w = next(w);
        }
        v
    } else {
        s.split(',').map(size).collect::<Result<Vec<_>, _>>()?
    };
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err(bad());
    }
    if out.len() > MAX_AXIS {
        return Err(PlanError::TooManyWindows(s.to_string()));
    }
    Ok(out)
}

/// Stream counts as a list (`1,2,4,8`), each 1..=1024.
pub fn parse_streams(s: &str) -> Result<Vec<u32>, PlanError> {
    let mut v = s
        .split(',')
        .map(|p| match p.trim().parse::<u32>() {
            Ok(n @ 1..=1024) => Ok(n),
            _ => Err(PlanError::Streams(s.to_string())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    v.sort_unstable();
    v.dedup();
    if v.is_empty() || v.len() > MAX_AXIS {
        return Err(PlanError::Streams(s.to_string()));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(order: Order) -> SweepPlan {
        SweepPlan {
            host: "h".into(),
            port: 5201,
            windows_bytes: vec![1, 2, 3, 4, 5],
            streams: vec![1, 2, 4, 8],
            directions: vec![Direction::Forward, Direction::Reverse],
            repeat: 3,
            time_s: 1.0,
            order,
            seed: 42,
            version: 2,
            cell: None,
            run_args: vec![],
            command_line: String::new(),
        }
    }

    #[test]
    fn windows_lists_and_ranges() {
        assert_eq!(parse_windows("64K,16K,64K").unwrap(), [16384, 65536]);
        assert_eq!(
            parse_windows("64K..512K").unwrap(),
            [65536, 131072, 262144, 524288]
        );
        assert_eq!(
            parse_windows("1M..4M:+1M").unwrap(),
            [1 << 20, 2 << 20, 3 << 20, 4 << 20]
        );
        assert_eq!(parse_windows("100..1000:x3").unwrap(), [100, 300, 900]);
        for bad in ["", "x", "4M..1M", "1K..1M:y2", "1K..1M:x1", "0,1K", "1..1G:+1"] {
            assert!(parse_windows(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_streams("8,1,2,2").unwrap(), [1, 2, 8]);
        for bad in ["", "0", "1,x", "2000"] {
            assert!(parse_streams(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_cell_once_per_round_and_a_stable_scramble() {
        let p = plan(Order::Scrambled);
        let cells = p.cells();
        assert_eq!(cells.len(), 5 * 4 * 2 * 3);
        let unique: HashSet<_> = cells.iter().collect();
        assert_eq!(unique.len(), cells.len());
        // Each round is complete before the next begins.
        for (i, c) in cells.iter().enumerate() {
            assert_eq!(c.repeat as usize, i / 40);
        }
        assert_eq!(cells, p.cells(), "same seed, same order");
        assert_ne!(
            cells,
            plan(Order::Sequential).cells(),
            "scrambled differs from sequential"
        );
        let seq = plan(Order::Sequential).cells();
        assert_eq!((seq[0].window_bytes, seq[0].streams), (1, 1));
        assert_eq!((seq[1].window_bytes, seq[1].streams), (2, 1));
    }

    #[test]
    fn remaining_skips_what_is_done_and_keeps_the_order() {
        let p = plan(Order::Scrambled);
        let all = p.cells();
        let done: HashSet<CellKey> = all.iter().step_by(3).copied().collect();
        let left = p.remaining(&done);
        assert_eq!(left.len(), all.len() - done.len());
        let expected: Vec<CellKey> = all.iter().filter(|c| !done.contains(c)).copied().collect();
        assert_eq!(left, expected);
        assert!(p.remaining(&all.iter().copied().collect()).is_empty());
    }

    #[test]
    fn grid_size_is_bounded() {
        let mut p = plan(Order::Sequential);
        assert!(p.validate().is_ok());
        p.repeat = 0;
        assert_eq!(p.validate(), Err(PlanError::Repeat(0)));
        p.repeat = 100;
        p.windows_bytes = (1..=64).collect();
        assert!(matches!(p.validate(), Err(PlanError::TooManyCells(_))));
    }
}
