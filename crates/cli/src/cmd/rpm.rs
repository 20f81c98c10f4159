//! `landspeed rpm TARGET`: responsiveness under working conditions (RPM) against any server of the
//! IETF method (`landspeed serve --rpm`, network-quality/server's reference configuration, Apple's
//! servers): landspeed_net::rpm runs it, landspeed_report::rpm_text prints it, docs/latency.md has
//! the method.

use crate::common::client::interrupt_flag;
use crate::common::values;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use landspeed_net::rpm::{measure, RpmOptions};
use landspeed_rpm::{Draft, RpmDirection, RpmParams, RpmReport};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct RpmArgs {
    /// The configuration's URL (https://host:4043/config), or HOST[:PORT] for
    /// https://HOST:PORT/config (port 4043 by default, as goresponsiveness).
    #[arg(required_unless_present = "recompute")]
    pub target: Option<String>,
    /// Which directions: both one after the other (draft-09's sequential test: a score each), both
    /// at once (its concurrent test: one score), or one.
    #[arg(long, value_enum, default_value_t = Which::Sequential)]
    pub direction: Which,
    /// Speak HTTP/1.1 only: no request can ride a loaded connection, so the kernel's round-trip
    /// estimate of a load connection stands in for each self probe (draft-09 allows it).
    #[arg(long = "http1.1")]
    pub http1: bool,
    /// Most probe pairs (a foreign and a self probe) a second, the draft's MPS; fewer when they would
    /// take more than 5% of the capacity measured (its PTC).
    #[arg(long, default_value_t = 100.0)]
    pub probes_per_s: f64,
    /// The interval (the draft's ID): a connection added, the goodput and the responsiveness
    /// evaluated, once each. draft-09 says 5 s; 1 s is drafts 03-08's (and goresponsiveness's), for a
    /// shorter test.
    #[arg(long, default_value = "5s", value_parser = values::duration)]
    pub interval: Duration,
    /// Whose formula the figures follow: 09 (the average of the foreign and the loaded
    /// responsiveness) or 03 (60 000 over the mean of the two round trips, what goresponsiveness and
    /// drafts before -04 compute).
    #[arg(long, value_enum, default_value_t = DraftArg::D09)]
    pub draft: DraftArg,
    /// Recompute the figures of a saved `--json` report from its own probes under --draft's formula
    /// and print them (no test is run), e.g. to set a result beside a client of an older draft.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "direction", "connections"])]
    pub recompute: Option<std::path::PathBuf>,
    /// Most load-generating connections per direction.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_connections: u32,
    /// Open this many load-generating connections at once and add none (no ramp-up), e.g. 16 to
    /// stand beside a goresponsiveness run that ended with 16.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub connections: Option<u32>,
    /// Longest a direction runs: its first half at most goes to saturating the goodput, the rest to
    /// the responsiveness; a stage cut short is reported with the draft's Low or Medium confidence.
    #[arg(long, default_value = "60s", value_parser = values::duration)]
    pub timeout: Duration,
    /// One JSON document (schema landspeed-rpm/1).
    #[arg(long)]
    pub json: bool,
}

/// `--draft`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraftArg {
    /// draft-ietf-ippm-responsiveness-09.
    #[value(name = "09")]
    D09,
    /// draft-ietf-ippm-responsiveness-03.
    #[value(name = "03")]
    D03,
}

impl From<DraftArg> for Draft {
    fn from(d: DraftArg) -> Draft {
        match d {
            DraftArg::D09 => Draft::Draft09,
            DraftArg::D03 => Draft::Draft03,
        }
    }
}

/// The directions to run.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Download, then upload: a score each (draft-09's sequential test).
    #[value(alias = "both")]
    Sequential,
    /// Download and upload at the same time, each with its own connections and probes, one score
    /// from both's probes (draft-09's concurrent test; goresponsiveness's -rpm.parallel).
    #[value(alias = "parallel")]
    Concurrent,
    /// Download only.
    Download,
    /// Upload only.
    Upload,
}

/// The configuration URLs `target` means: a URL is itself; a bare HOST[:PORT] (port 4043 by
/// default, as goresponsiveness's) is draft-09's well-known URI there, then `/config` (where
/// goresponsiveness's and older servers answer) if that is not found.
fn config_urls(target: &str) -> (String, Option<String>) {
    if target.contains("://") {
        return (target.to_string(), None);
    }
    let has_port = target
        .rsplit_once(':')
        .is_some_and(|(h, p)| p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']')));
    let host_port = if has_port {
        target.to_string()
    } else if target.contains(':') {
        format!("[{target}]:4043")
    } else {
        format!("{target}:4043")
    };
    (
        format!("https://{host_port}/.well-known/nq"),
        Some(format!("https://{host_port}{}", landspeed_rpm::CONFIG_PATH)),
    )
}

/// Runs the test (or recomputes a saved one); true when every direction gave its figures.
pub fn rpm(a: RpmArgs) -> Result<bool> {
    let r = match (&a.recompute, &a.target) {
        (Some(file), _) => recompute(file, a.draft.into())?,
        (None, Some(target)) => run(&a, target)?,
        (None, None) => unreachable!("clap requires TARGET without --recompute"),
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        out!("{}", landspeed_report::rpm_text::text(&r));
    }
    Ok(!r.directions.is_empty() && r.directions.iter().all(|d| d.figures.is_some()))
}

/// A saved report's figures under `draft`'s formula, from its own probes.
fn recompute(file: &std::path::Path, draft: Draft) -> Result<RpmReport> {
    let text = std::fs::read_to_string(file).with_context(|| format!("--recompute {}", file.display()))?;
    let saved: RpmReport = serde_json::from_str(&text).with_context(|| {
        format!(
            "--recompute {}: not a `landspeed rpm --json` report",
            file.display()
        )
    })?;
    Ok(saved.recomputed(draft))
}

fn run(a: &RpmArgs, target: &str) -> Result<RpmReport> {
    let interval_ok = (Duration::from_millis(100)..=Duration::from_secs(60)).contains(&a.interval);
    if !(0.1..=100.0).contains(&a.probes_per_s) || a.timeout < Duration::from_secs(5) || !interval_ok {
        return Err(crate::common::UsageError(
            "--probes-per-s must be 0.1..=100 (the method's cap), --interval 100ms..=60s and --timeout at least 5s"
                .into(),
        )
        .into());
    }
    let opts = RpmOptions {
        config_url: config_urls(target).0,
        fallback_config_url: config_urls(target).1,
        directions: match a.direction {
            Which::Sequential | Which::Concurrent => vec![RpmDirection::Download, RpmDirection::Upload],
            Which::Download => vec![RpmDirection::Download],
            Which::Upload => vec![RpmDirection::Upload],
        },
        params: RpmParams {
            draft: a.draft.into(),
            interval: a.interval,
            probes_per_s: a.probes_per_s,
            max_connections: a.max_connections as usize,
            fixed_connections: a.connections.map(|n| n as usize),
            timeout: a.timeout,
            ..RpmParams::default()
        },
        http1: a.http1,
        parallel: a.direction == Which::Concurrent,
    };
    let interrupt = interrupt_flag()?;
    Ok(measure(&opts, &interrupt)?)
}

#[cfg(test)]
mod tests {
    use super::config_urls;

    fn config_url(t: &str) -> String {
        config_urls(t).0
    }

    #[test]
    fn a_host_alone_means_its_configuration_on_port_4043() {
        assert_eq!(config_url("h"), "https://h:4043/.well-known/nq");
        assert_eq!(config_urls("h").1.as_deref(), Some("https://h:4043/config"));
        assert_eq!(config_url("h:8443"), "https://h:8443/.well-known/nq");
        assert_eq!(
            config_url("2001:db8::1"),
            "https://[2001:db8::1]:4043/.well-known/nq"
        );
        assert_eq!(
            config_url("[2001:db8::1]:9"),
            "https://[2001:db8::1]:9/.well-known/nq"
        );
        assert_eq!(config_urls("http://h/c"), ("http://h/c".into(), None));
    }
}
