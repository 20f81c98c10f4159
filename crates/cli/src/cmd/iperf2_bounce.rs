//! The `iperf` drop-in's bounceback client (`iperf -c HOST --bounceback[=N]`, with iperf 2's
//! `--bounceback-period`, `--bounceback-hold`, `--bounceback-no-quickack` and
//! `--bounceback-congest`): `run --bounceback`'s client (against `iperf -s` and `landspeed serve`
//! alike), printed as iperf 2.1.8 prints it (report::iperf2_bounce_text), so a script that reads
//! iperf 2's request/response lines runs unchanged. Its congestion load is `run --under-load`'s.
//! Also `iperf -c HOST --connect-only[=N]` (`landspeed_net::run_connect_only`, iperf 2.1.8's
//! schedule), a line for each connection as it is made.

use super::iperf2::{bytes, refuse, Opts, PORT};
use super::iperf2_out as out;
use anyhow::Result;
use landspeed_core::transactions::TransactionsReport;
use landspeed_net::{BouncePlan, ClientEvent, LoadPlan};
use landspeed_report::iperf2_bounce_text::{self as text, BounceHead};
use landspeed_report::iperf2_text::{Ends, Iperf2Style};
use std::time::Duration;

/// The test iperf 2's options ask for, or why not.
fn plan(o: &Opts) -> Result<(BouncePlan, u64), String> {
    let burst = match o.bounceback.as_deref().unwrap_or("") {
        "" => 10,
        n => n
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("--bounceback={n}: not a count of requests"))?,
    };
    let secs = |flag: &str, v: Option<f64>, unit: f64| match v {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(Duration::from_secs_f64(x * unit))),
        Some(x) => Err(format!("{flag} {x}: not a time iperf 2 reads")),
        None => Ok(None),
    };
    let period = secs("--bounceback-period", o.bounceback_period, 1.0)?.unwrap_or(Duration::from_secs(1));
    let hold = secs("--bounceback-hold", o.bounceback_hold, 1e-3)?.unwrap_or_default();
    let size = match o.length.as_deref() {
        Some(v) => bytes(v).ok_or_else(|| format!("-l {v}: not a number iperf 2 reads"))?,
        None => landspeed_iperf2::spec::DEFAULT_BOUNCEBACK_LEN,
    };
    let plan = BouncePlan {
        burst,
        period,
        hold,
        quickack: !o.bounceback_no_quickack,
        trip_times: false,
    };
    Ok((plan, size))
}

/// `landspeed run` arguments for the connection itself.
fn run_args(o: &Opts, host: &str, size: u64) -> Vec<String> {
    let mut a = vec![
        host.to_string(),
        "-p".into(),
        o.port.unwrap_or(PORT).to_string(),
        "--no-save".into(),
        "-t".into(),
        format!("{}ms", (o.time.unwrap_or(10.0) * 1000.0).round()),
        "-l".into(),
        size.to_string(),
        "-i".into(),
        format!(
            "{}ms",
            (o.interval.filter(|i| *i > 0.0).unwrap_or(1.0) * 1000.0).round()
        ),
    ];
    if let Some(w) = o.window.as_deref().and_then(bytes) {
        a.extend(["-w".into(), w.to_string()]);
    }
    if let Some(b) = &o.bind {
        a.extend(["-B".into(), b.clone()]);
    }
    if o.ipv6 {
        a.push("-6".into());
    }
    if o.v4 {
        a.push("-4".into());
    }
    if let Some(p) = o.parallel.filter(|p| *p > 1) {
        a.extend(["-P".into(), p.to_string()]);
    }
    a
}

/// The client: iperf 2's head, its lines as the test goes, its total.
pub(crate) fn client(o: &Opts, host: &str) -> Result<bool> {
    let (plan, size) = match plan(o) {
        Ok(p) => p,
        Err(why) => return refuse(&why),
    };
    let load = match o
        .bounceback_congest
        .as_deref()
        .map(crate::common::values::working_load)
    {
        Some(Err(why)) => return refuse(&format!("--bounceback-congest: {why}")),
        Some(Ok((direction, streams))) => Some(LoadPlan {
            direction,
            streams,
            settle: Duration::ZERO,
            iperf2: false,
        }),
        None => None,
    };
    let opts = match crate::common::client::options_from_args(&run_args(o, host, size)) {
        Ok(opts) => landspeed_net::ClientOptions {
            connect_retries: o.connect_retries.unwrap_or(0),
            ..opts
        },
        Err(e) => return refuse(&e),
    };
    let head = BounceHead {
        size,
        burst: if plan.period.is_zero() { 0 } else { plan.burst },
        period_s: plan.period.as_secs_f64(),
        hold_us: plan.hold.as_micros() as u32,
        quickack: plan.quickack,
        window: (
            super::iperf2::granted_window(false, opts.spec.window_bytes),
            opts.spec.window_bytes,
        ),
        flows: opts.spec.streams,
    };
    out::head(&text::head(host, o.port.unwrap_or(PORT), &head));
    let interrupt = crate::common::client::interrupt_flag()?;
    let running = match load {
        Some(l) => match landspeed_net::start_load(&opts, l, test_time(&opts), &interrupt) {
            Ok(r) => Some(r),
            Err(e) => return refuse(&format!("connect failed: {e}")),
        },
        None => None,
    };
    // Without -i or a period, iperf 2.1.8 reports each second (its Settings.cpp, with the 1 s
    // period it sets).
    let default_interval = o.bounceback_period.is_none().then_some(1.0);
    let mut live = Live::new(head, o.interval.filter(|i| *i > 0.0).or(default_interval));
    let outcome = landspeed_net::run_bounceback_client(&opts, &plan, &interrupt, &mut |ev| live.event(ev));
    drop(running.map(|r| r.finish()));
    match outcome {
        Ok(r) => {
            let Some(t) = &r.transactions else {
                return refuse("the test ended without transactions");
            };
            out::lines(&live.totals(&r, t));
            Ok(r.verdict().is_trusted())
        }
        Err(e) => refuse(&format!("connect failed: {e}")),
    }
}

/// The lines as the test goes: the connection once the test starts, each whole interval with `-i`
/// (iperf 2 prints none without it; the last, partial one it prints is not printed here).
struct Live {
    head: BounceHead,
    interval_s: Option<f64>,
    /// Each connection's ends and how it was made, in stream order.
    ends: Vec<Ends>,
    /// Each connection's TCP state at its last interval (`-P`: its total line's).
    tcp: Vec<Option<Box<landspeed_core::endpoint::TcpStats>>>,
    /// `-P`: the `[SUM]` lines' head is still to come.
    sum_head_due: bool,
}

impl Live {
    fn new(head: BounceHead, interval_s: Option<f64>) -> Live {
        Live {
            head,
            interval_s,
            ends: vec![],
            tcp: vec![None; head.flows as usize],
            sum_head_due: true,
        }
    }

    /// The last lines: each connection's total and its histogram; with more than one, their
    /// `[SUM]` and the connect times.
    fn totals(&mut self, r: &landspeed_core::result::RunResult, t: &TransactionsReport) -> String {
        let style = self.style();
        let size = self.head.size;
        let whole = (0.0, t.elapsed_s);
        let each: Vec<&TransactionsReport> = match t.connections.as_slice() {
            [] => vec![t],
            all => all.iter().collect(),
        };
        let mut out = String::new();
        for (k, c) in each.iter().enumerate() {
            let tcp = match each.len() {
                1 => r.streams.iter().find_map(|s| s.tcp.as_ref()),
                _ => self.tcp.get(k).and_then(|x| x.as_deref()),
            };
            let n = k as u32 + 1;
            out += &text::line(n, whole, (c.transactions, size), &c.latency, tcp, &style);
            if let Some(fine) = &c.fine {
                out += &text::pdf_line(n, whole, fine);
            }
        }
        if each.len() > 1 {
            out += &self.sum_head();
            out += &text::sum_line(whole, (t.transactions, size), &style);
            let facts: Vec<_> = self.ends.iter().filter_map(|e| e.facts.clone()).collect();
            out += &landspeed_report::iperf2_text::connect_times(&facts);
        }
        out
    }

    /// The `[SUM]` lines' head, before the first of them.
    fn sum_head(&mut self) -> String {
        match std::mem::take(&mut self.sum_head_due) {
            true => text::SUM_HEAD.into(),
            false => String::new(),
        }
    }

    /// An interval's line: a connection's (`-P`), the test's `[SUM]` of them, or the one
    /// connection's; whole intervals only, with `-i` (or iperf 2's default second).
    fn interval(
        &mut self,
        i: &landspeed_core::transactions::TransactionInterval,
        tcp: Option<Box<landspeed_core::endpoint::TcpStats>>,
        connection: Option<u32>,
    ) -> String {
        if let Some(k) = connection {
            if let Some(slot) = self.tcp.get_mut(k as usize) {
                slot.clone_from(&tcp);
            }
        }
        let Some(nominal) = self.interval_s else {
            return String::new();
        };
        if i.end_s - i.start_s < 0.9 * nominal {
            return String::new();
        }
        let (style, span) = (self.style(), (i.start_s, i.end_s));
        let count = (i.transactions, self.head.size);
        match (connection, self.head.flows > 1) {
            (Some(k), _) => text::line(k + 1, span, count, &i.latency, tcp.as_deref(), &style),
            (None, true) => self.sum_head() + &text::sum_line(span, count, &style),
            (None, false) => text::line(1, span, count, &i.latency, tcp.as_deref(), &style),
        }
    }

    fn style(&self) -> Iperf2Style {
        Iperf2Style {
            csv: false,
            enhanced: false,
            format: 'a',
            interval_s: self.interval_s,
        }
    }

    fn event(&mut self, ev: ClientEvent) {
        let text = match ev {
            ClientEvent::Connected { .. } => return,
            ClientEvent::StreamsConnected { connections, facts } => {
                let mut facts = facts.into_iter();
                self.ends = (connections.iter())
                    .map(|c| Ends {
                        facts: facts.next(),
                        ..Ends::between(c)
                    })
                    .collect();
                return;
            }
            ClientEvent::BackConnected { .. } | ClientEvent::Part { .. } => return,
            ClientEvent::Started { .. } => {
                let when = unix_now();
                let lines = self.ends.iter().enumerate();
                let each = lines.map(|(k, e)| text::connected(k as u32 + 1, e, &self.head, when));
                each.collect::<String>() + text::COLUMN_HEAD
            }
            ClientEvent::Transactions {
                interval: i,
                tcp,
                connection,
            } => self.interval(&i, tcp, connection),
            ClientEvent::Interval { .. } => return,
        };
        out::lines(&text);
    }
}

/// The test's `-t`.
fn test_time(opts: &landspeed_net::ClientOptions) -> Duration {
    match opts.spec.end {
        landspeed_core::config::EndCondition::Time(t) => t,
        _ => Duration::from_secs(10),
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `--connect-only[=N]`: iperf 2's head, then a line for each connection as each of `-P`'s threads
/// makes it (N back to back, 10 by default; with `-i` one an interval for `-t`).
pub(crate) fn connect_only(o: &Opts, host: &str) -> Result<bool> {
    let count = match o.connect_only.as_deref().unwrap_or("") {
        "" => None,
        n => match n.parse::<u32>() {
            Ok(n) if n > 0 => Some(n),
            _ => return refuse(&format!("--connect-only={n}: not a count of connections above 0")),
        },
    };
    let run_for = Duration::from_secs_f64(o.time.filter(|t| t.is_finite() && *t > 0.0).unwrap_or(10.0));
    let plan = landspeed_net::ConnectOnlyPlan {
        count,
        period: o
            .interval
            .filter(|i| i.is_finite() && *i > 0.0)
            .map(Duration::from_secs_f64),
        run_for,
        threads: o.parallel.unwrap_or(1).max(1),
    };
    let opts = match crate::common::client::options_from_args(&run_args(o, host, 100)) {
        Ok(opts) => landspeed_net::ClientOptions {
            connect_retries: o.connect_retries.unwrap_or(0),
            ..opts
        },
        Err(e) => return refuse(&e),
    };
    out::head(&text::connect_only_head(host, o.port.unwrap_or(PORT)));
    let interrupt = crate::common::client::interrupt_flag()?;
    let mut failed = None;
    let outcome = landspeed_net::run_connect_only(&opts, plan, &interrupt, &mut |h| match h {
        Ok(h) => {
            let ends = Ends {
                local: (h.local.ip().to_string(), h.local.port()),
                remote: (h.remote.ip().to_string(), h.remote.port()),
                facts: None,
                tos: None,
            };
            out::lines(&text::connect_only_line(
                h.thread,
                &ends,
                h.cwnd_mss_rtt,
                (h.connect_ms, h.at_unix_s),
            ));
        }
        Err(e) => failed = Some(e.to_string()),
    });
    match (outcome, failed) {
        (Err(e), _) => refuse(&format!("connect failed: {e}")),
        (Ok(()), Some(e)) => refuse(&format!("connect failed: {e}")),
        (Ok(()), None) => Ok(true),
    }
}
