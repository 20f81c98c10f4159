//! Live changes to a running path, and schedules of them: what `wan change` and `wan up --schedule`
//! ask for, parsed and checked before anything is sent to the forwarder, and applied to the path's
//! settings as pure functions. Real long-haul paths change under a running transfer (a route change
//! steps the RTT, a bottleneck's rate changes, a link flaps); this is how the emulator plays that.
//!
//! A change is a list of `KEY=VALUE` words, the same on the command line (`wan change`'s flags are
//! turned into them) and in a schedule file, so both are checked by one parser:
//! `rtt`, `delay` (one-way), `rate`, `queue`, `loss`, `loss-model`, `jitter`, `down` (an outage: every
//! packet dropped for that long, then the path as it was) and `direction` (`both`, `a-to-b`,
//! `b-to-a`; both by default).

use crate::settings::{self, Direction, LossModel, PathSettings, QueueSpec, SettingsError};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest one-way delay a change may set (a round trip of 10 s is beyond any real path).
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// The longest outage one change may ask for.
pub const MAX_DOWN: Duration = Duration::from_secs(3600);

/// Why a change or a schedule could not be understood.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChangeError {
    /// A word that is not KEY=VALUE with a known key.
    #[error("'{0}' is not KEY=VALUE with KEY one of rtt, delay, rate, queue, loss, loss-model, jitter, down, proto, ports, except-ports, direction (or the word up)")]
    Word(String),
    /// A value that could not be read.
    #[error(transparent)]
    Setting(#[from] SettingsError),
    /// A value out of its range.
    #[error("{0}")]
    Range(String),
    /// Nothing to change.
    #[error(
        "nothing to change: give at least one of rtt, delay, rate, queue, loss, loss-model, jitter, down"
    )]
    Empty,
    /// A line of a schedule file.
    #[error("line {line}: {why}")]
    Line {
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

/// Which directions a change applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Which {
    /// A→B and B→A.
    #[default]
    Both,
    /// A→B only.
    AToB,
    /// B→A only.
    BToA,
}

impl Which {
    /// Whether the change applies to A→B (`false`) or B→A (`true`).
    pub fn covers(self, b_to_a: bool) -> bool {
        match self {
            Which::Both => true,
            Which::AToB => !b_to_a,
            Which::BToA => b_to_a,
        }
    }

    /// `both`, `a-to-b` or `b-to-a`.
    pub fn name(self) -> &'static str {
        match self {
            Which::Both => "both",
            Which::AToB => "a-to-b",
            Which::BToA => "b-to-a",
        }
    }
}

/// One change, read from its words.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    /// The words as given, for the record (`rtt=80ms down=3s`).
    pub words: Vec<String>,
    /// The directions it applies to.
    pub which: Which,
    /// A new one-way delay (`rtt` is halved into it).
    pub delay: Option<Duration>,
    /// A new rate: `Some(None)` is unlimited.
    pub rate: Option<Option<f64>>,
    /// A new queue limit.
    pub queue: Option<QueueSpec>,
    /// A new queue discipline (its state starts afresh).
    pub aqm: Option<crate::aqm::Aqm>,
    /// A new loss model.
    pub loss: Option<LossModel>,
    /// A new delay variation.
    pub jitter: Option<Duration>,
    /// An outage from the moment it is applied, for this long.
    pub down: Option<Duration>,
    /// Ends an outage now (`up`).
    pub up: bool,
    /// Which packets the outage takes down (`proto=tcp|udp`, `ports=A[-B]`, `except-ports=A[-B]`).
    pub scope: crate::packet::OutageScope,
}

/// A port range, `A` or `A-B` (1..=65535, A <= B).
fn port_range(key: &str, v: &str) -> Result<(u16, u16), ChangeError> {
    let bad = || {
        ChangeError::Range(format!(
            "{key} '{v}' is not a port or a range A-B of ports 1..=65535"
        ))
    };
    let port = |t: &str| t.trim().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad);
    let (lo, hi) = match v.split_once('-') {
        Some((a, b)) => (port(a)?, port(b)?),
        None => (port(v)?, port(v)?),
    };
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

fn duration(what: &str, v: &str) -> Result<Duration, ChangeError> {
    Ok(settings::dur(what, v)?)
}

impl Change {
    /// Reads a change from its `KEY=VALUE` words.
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<Change, ChangeError> {
        let mut c = Change::default();
        for w in words {
            c.word(w.as_ref())?;
            c.words.push(w.as_ref().trim().to_string());
        }
        if c.scope != crate::packet::OutageScope::default() && c.down.is_none() {
            return Err(ChangeError::Range(
                "proto=, ports= and except-ports= name what an outage takes down: give them with \
                 down=DURATION"
                    .into(),
            ));
        }
        if !c.sets_anything() && c.down.is_none() && !c.up {
            return Err(ChangeError::Empty);
        }
        if c.up && c.down.is_some() {
            return Err(ChangeError::Range("down and up in one change".into()));
        }
        Ok(c)
    }

    fn word(&mut self, w: &str) -> Result<(), ChangeError> {
        if w.trim() == "up" {
            self.up = true;
            return Ok(());
        }
        let (k, v) = w.split_once('=').ok_or_else(|| ChangeError::Word(w.into()))?;
        let v = v.trim();
        match k.trim() {
            "rtt" => self.delay = Some(checked_delay(duration("rtt", v)? / 2, "rtt", v)?),
            "delay" => self.delay = Some(checked_delay(duration("delay", v)?, "delay", v)?),
            "rate" => self.rate = Some(rate(v)?),
            "queue" => self.queue = Some(QueueSpec::parse(v)?),
            "aqm" => self.aqm = Some(crate::aqm::Aqm::parse(v).map_err(ChangeError::Range)?),
            "loss" => self.loss = Some(settings::bernoulli(v)?),
            "loss-model" => self.loss = Some(LossModel::parse(v)?),
            "jitter" => self.jitter = Some(checked_delay(duration("jitter", v)?, "jitter", v)?),
            "down" => self.down = Some(checked_down(duration("down", v)?, v)?),
            "proto" => {
                self.scope.proto = Some(
                    crate::packet::protocol_named(v)
                        .ok_or_else(|| ChangeError::Range(format!("proto '{v}' is not tcp or udp")))?,
                )
            }
            "ports" | "except-ports" => {
                if self.scope.ports.is_some() {
                    return Err(ChangeError::Range(
                        "ports= and except-ports= in one change".into(),
                    ));
                }
                self.scope.ports = Some(port_range(k.trim(), v)?);
                self.scope.except_ports = k.trim() == "except-ports";
            }
            "direction" | "dir" => {
                self.which = match v {
                    "both" => Which::Both,
                    "a-to-b" => Which::AToB,
                    "b-to-a" => Which::BToA,
                    _ => {
                        return Err(ChangeError::Range(format!(
                            "direction '{v}' is not both, a-to-b or b-to-a"
                        )))
                    }
                }
            }
            _ => return Err(ChangeError::Word(w.into())),
        }
        Ok(())
    }

    /// The words as one line, but the direction (recorded beside it).
    pub fn text(&self) -> String {
        let settings: Vec<&str> = self
            .words
            .iter()
            .map(String::as_str)
            .filter(|w| !w.starts_with("direction=") && !w.starts_with("dir="))
            .collect();
        settings.join(" ")
    }

    /// Whether it changes settings (rather than only taking the path down for a while).
    pub fn sets_anything(&self) -> bool {
        self.delay.is_some()
            || self.rate.is_some()
            || self.queue.is_some()
            || self.aqm.is_some()
            || self.loss.is_some()
            || self.jitter.is_some()
    }

    /// The path's settings after this change. A queue set in bytes stays in bytes when the rate or
    /// the delay changes (as a router's buffer does); one given here as a multiple of the BDP is
    /// resolved against the new rate and round trip; a direction that gains a rate without a queue
    /// gets the default of one BDP, as `wan up` gives it.
    pub fn apply(&self, now: &PathSettings) -> Result<PathSettings, ChangeError> {
        let mut next = now.clone();
        for (b_to_a, dir) in [(false, &mut next.a_to_b), (true, &mut next.b_to_a)] {
            if self.which.covers(b_to_a) {
                self.set(dir);
            }
        }
        let rtt = next.a_to_b.delay + next.b_to_a.delay;
        for (b_to_a, dir) in [(false, &mut next.a_to_b), (true, &mut next.b_to_a)] {
            if self.which.covers(b_to_a) {
                self.resolve_queue(dir, rtt)?;
            }
        }
        Ok(next)
    }

    fn set(&self, d: &mut Direction) {
        if let Some(x) = self.delay {
            d.delay = x;
        }
        if let Some(r) = self.rate {
            d.rate_bps = r;
        }
        if let Some(l) = self.loss {
            d.loss = l;
        }
        if let Some(j) = self.jitter {
            d.jitter = j;
        }
        if let Some(a) = self.aqm {
            d.aqm = a;
        }
    }

    fn resolve_queue(&self, d: &mut Direction, rtt: Duration) -> Result<(), ChangeError> {
        d.queue_bytes = match (self.queue, d.rate_bps, d.queue_bytes) {
            (_, None, _) => None,
            // A queue in bytes stays in bytes when only the rate or the delay changes.
            (None, Some(_), Some(b)) => Some(b),
            (q, rate, _) => settings::queue_bytes(q, rate, rtt)?,
        };
        Ok(())
    }
}

fn rate(v: &str) -> Result<Option<f64>, ChangeError> {
    let r = settings::rate(v)?;
    if r.is_some_and(|bps| bps < 1e3) {
        return Err(ChangeError::Range(format!(
            "rate '{v}' is below 1 kbit/s (use down=DURATION for an outage, rate=unlimited for none)"
        )));
    }
    Ok(r)
}

fn checked_delay(d: Duration, what: &str, v: &str) -> Result<Duration, ChangeError> {
    if d > MAX_DELAY {
        return Err(ChangeError::Range(format!(
            "{what} '{v}' is beyond the emulator's {} s one-way limit",
            MAX_DELAY.as_secs()
        )));
    }
    Ok(d)
}

fn checked_down(d: Duration, v: &str) -> Result<Duration, ChangeError> {
    if d < Duration::from_millis(1) || d > MAX_DOWN {
        return Err(ChangeError::Range(format!(
            "down '{v}' must be between 1ms and {} s",
            MAX_DOWN.as_secs()
        )));
    }
    Ok(d)
}

/// One line of a schedule: a change at a time after the emulator started, once, or again every
/// period (a number of times, or until the emulator is taken down).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The schedule file's line, from 1.
    pub line: usize,
    /// When it is applied first, after `wan up`.
    pub at: Duration,
    /// Applied again every this long.
    pub every: Option<Duration>,
    /// How many times in all (with `every`); `None` is until the emulator is taken down.
    pub times: Option<u32>,
    /// What it changes.
    pub change: Change,
}

/// The longest schedule the emulator keeps: a file is a plan, not a trace.
pub const MAX_ENTRIES: usize = 10_000;

/// Reads a schedule file: one change a line, `AT [every PERIOD [times N]] KEY=VALUE...`, with `#`
/// comments and blank lines. For example `10s rtt=80ms` (an RTT step at 10 s) or
/// `5s every 10s down=2s` (a 2 s outage every 10 s from 5 s on).
pub fn parse_schedule(text: &str) -> Result<Vec<Entry>, ChangeError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let entry = parse_line(i + 1, line).map_err(|e| ChangeError::Line {
            line: i + 1,
            why: e.to_string(),
        })?;
        out.push(entry);
        if out.len() > MAX_ENTRIES {
            return Err(ChangeError::Line {
                line: i + 1,
                why: format!("more than {MAX_ENTRIES} changes (use `every` to repeat one)"),
            });
        }
    }
    Ok(out)
}

fn parse_line(line: usize, text: &str) -> Result<Entry, ChangeError> {
    let mut words = text.split_whitespace().peekable();
    let at_word = words.next().unwrap_or("");
    let at = duration("time", at_word).map_err(|_| {
        ChangeError::Range(format!(
            "'{at_word}' is not a time after `wan up` (e.g. 10s, 1.5m), then KEY=VALUE words"
        ))
    })?;
    let mut every = None;
    let mut times = None;
    if words.peek() == Some(&"every") {
        words.next();
        let p = words.next().unwrap_or("");
        let period = duration("every", p)?;
        if period < Duration::from_millis(10) {
            return Err(ChangeError::Range(format!("every '{p}' is shorter than 10ms")));
        }
        every = Some(period);
        if words.peek() == Some(&"times") {
            words.next();
            let n = words.next().unwrap_or("");
            times =
                Some(n.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                    ChangeError::Range(format!("times '{n}' is not a whole number above 0"))
                })?);
        }
    }
    let rest: Vec<&str> = words.collect();
    let change = Change::parse(&rest)?;
    if let (Some(period), Some(down)) = (every, change.down) {
        if down >= period {
            return Err(ChangeError::Range(format!(
                "down={} lasts as long as its period (every {}): the path would never come back",
                landspeed_core::units::format_duration(down),
                landspeed_core::units::format_duration(period)
            )));
        }
    }
    Ok(Entry {
        line,
        at,
        every,
        times,
        change,
    })
}

/// Plays a schedule: hands out its changes in time order, each repetition in its turn.
#[derive(Debug, Clone)]
pub struct Player {
    entries: Vec<Entry>,
    /// How many times each entry has been handed out.
    done: Vec<u32>,
}

impl Player {
    /// A player at the schedule's start.
    pub fn new(entries: Vec<Entry>) -> Player {
        let done = vec![0; entries.len()];
        Player { entries, done }
    }

    fn due(&self, i: usize) -> Option<Duration> {
        let e = &self.entries[i];
        let k = self.done[i];
        match (e.every, e.times) {
            (None, _) if k > 0 => None,
            (Some(_), Some(n)) if k >= n => None,
            (None, _) => Some(e.at),
            (Some(p), _) => Some(e.at + p * k),
        }
    }

    /// When the next change is due (after `wan up`), and which; the earliest line first on a tie.
    pub fn peek(&self) -> Option<(Duration, &Entry)> {
        (0..self.entries.len())
            .filter_map(|i| self.due(i).map(|t| (t, i)))
            .min()
            .map(|(t, i)| (t, &self.entries[i]))
    }

    /// The next change, taken.
    pub fn next_change(&mut self) -> Option<(Duration, Entry)> {
        let (t, i) = (0..self.entries.len())
            .filter_map(|i| self.due(i).map(|t| (t, i)))
            .min()?;
        self.done[i] += 1;
        Some((t, self.entries[i].clone()))
    }
}

/// One change as the emulator applied it, stamped on its clock and the wall clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    /// Seconds after the emulator started (its monotonic clock).
    pub at_s: f64,
    /// The same instant, Unix seconds.
    pub unix_s: f64,
    /// The change's words (`rtt=80ms down=3s`).
    pub change: String,
    /// The directions it applied to: both, a-to-b or b-to-a.
    pub direction: Which,
    /// For an outage, when the path came back (seconds after the emulator started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_until_s: Option<f64>,
    /// Where it came from: `wan change` or the schedule's line.
    pub source: String,
}

#[cfg(test)]
mod tests;
