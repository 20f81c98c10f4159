//! `landspeed multicast send|receive`: one sender to a group, any number of receivers that join it
//! (any source or one, IPv4 or IPv6), each receiver's figures for every sender it heard; iperf 2's
//! multicast on either side (`send --iperf2` for `iperf -s -u -B GROUP`, and a receiver counts iperf
//! 2's senders as it counts landspeed's). The arguments become a `GroupPlan`; the measuring is
//! landspeed-net's, the text landspeed-report's.

use crate::common::client::interrupt_flag;
use crate::common::{values, UsageError};
use anyhow::Result;
use clap::{Args, Subcommand};
use landspeed_core::multicast::record::{self, SentPlan};
use landspeed_core::units::BitRate;
use landspeed_net::multicast::{GroupPlan, ReceivePlan, SendPlan};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MulticastArgs {
    #[command(subcommand)]
    pub what: McCommand,
}

#[derive(Subcommand, Debug)]
pub enum McCommand {
    /// Send to a group at a rate for a time: landspeed's datagrams (every receiver checks every
    /// byte), or iperf 2's with --iperf2.
    #[command(after_help = "Examples:
  landspeed multicast send 239.1.1.1 -b 10M -t 10            port 5001, TTL 1, the route's interface
  landspeed multicast send 239.1.1.1%eth1 --ttl 8 -l 1200
  landspeed multicast send [ff15::1]:6000 --interface eth0
  landspeed multicast send 239.1.1.1 --iperf2 -b 1M          for iperf -s -u -B 239.1.1.1")]
    Send(SendArgs),
    /// Join a group and count what every sender sends it: loss, reordering, duplicates, jitter,
    /// one-way delay, every byte verified (landspeed's senders) or counted (iperf 2's).
    #[command(after_help = "Examples:
  landspeed multicast receive 239.1.1.1                      any source, until every sender ended
  landspeed multicast receive 232.1.1.1 --source 192.0.2.7   source-specific (SSM)
  landspeed multicast receive [ff15::1]:6000%eth0 --json
  landspeed multicast receive 239.1.1.1 -t 30s --linger 2s

It ends once every sender it heard has sent its end and --linger passed with nothing new, at -t,
or on Ctrl-C; the figures are printed then (exit 0), or exit 1 when nothing was heard or a
landspeed sender's bytes were wrong.")]
    Receive(ReceiveArgs),
}

/// The group, as `GROUP`, `GROUP:PORT`, `[V6GROUP]:PORT`, with iperf 2's `%INTERFACE` after either.
#[derive(Args, Debug)]
pub struct GroupArgs {
    /// The group: 239.1.1.1, 239.1.1.1:5001, ff15::1, [ff15::1]:5001, any of them with %INTERFACE.
    pub group: String,
    /// The port, when GROUP does not give one.
    #[arg(short, long, default_value_t = 5001)]
    pub port: u16,
    /// The interface to join or send on (default: the route's for the group).
    #[arg(long, value_name = "NAME")]
    pub interface: Option<String>,
    /// One JSON document at the end.
    #[arg(long)]
    pub json: bool,
    /// Do not save the result in the archive.
    #[arg(long)]
    pub no_save: bool,
    /// A label stored with the result, to find it again (`history --tag`).
    #[arg(long, value_name = "TAG")]
    pub tag: Option<String>,
    #[command(flatten)]
    pub db: crate::common::store::DbArg,
}

impl GroupArgs {
    /// Saves each result unless `--no-save`, saying where on stderr; whether all were saved.
    fn save(&self, results: &[landspeed_core::result::RunResult]) -> bool {
        self.no_save
            || results
                .iter()
                .all(|r| crate::common::store::save_and_say(&self.db, r, self.tag.clone()))
    }
}

#[derive(Args, Debug)]
pub struct SendArgs {
    #[command(flatten)]
    pub group: GroupArgs,
    /// Rate of UDP payload.
    #[arg(short = 'b', long, default_value = "1M", value_parser = values::rate)]
    pub bitrate: BitRate,
    /// How long to send.
    #[arg(short, long, default_value = "10s", value_parser = values::duration)]
    pub time: Duration,
    /// Bytes per datagram (UDP payload).
    #[arg(short, long, default_value_t = 1448)]
    pub length: usize,
    /// IPv4 TTL or IPv6 hop limit: how many routers the datagrams may cross (1: this link only).
    #[arg(long, default_value_t = 1)]
    pub ttl: u32,
    /// The local address to send from.
    #[arg(long, value_name = "ADDR", value_parser = values::local_address)]
    pub bind: Option<IpAddr>,
    /// Do not hand a copy to receivers on this host.
    #[arg(long)]
    pub no_loop: bool,
    /// Send iperf 2's datagrams (its prefix and header: `iperf -s -u -B GROUP` counts them).
    #[arg(long)]
    pub iperf2: bool,
}

#[derive(Args, Debug)]
pub struct ReceiveArgs {
    #[command(flatten)]
    pub group: GroupArgs,
    /// Hear only this sender (source-specific multicast; IPv4 SSM groups are 232.0.0.0/8).
    #[arg(long, value_name = "ADDR")]
    pub source: Option<IpAddr>,
    /// The longest to listen in all.
    #[arg(short, long, default_value = "60s", value_parser = values::duration)]
    pub time: Duration,
    /// After every sender heard has ended, listen this much longer for late datagrams and others.
    #[arg(long, default_value = "1s", value_parser = values::duration)]
    pub linger: Duration,
}

/// A test that cannot run as asked is a usage error (exit 2); the rest are runtime errors.
fn usage_or_runtime(e: landspeed_net::multicast::McError) -> anyhow::Error {
    match e {
        landspeed_net::multicast::McError::Spec(s) => UsageError(s.to_string()).into(),
        other => anyhow::Error::new(other),
    }
}

/// `GROUP[:PORT][%IF]` into the group's socket address and the interface it names.
fn parse_group(a: &GroupArgs) -> Result<(SocketAddr, Option<String>)> {
    let (text, named) = match a.group.rsplit_once('%') {
        Some((g, i)) if !i.is_empty() => (g, Some(i.to_string())),
        _ => (a.group.as_str(), None),
    };
    let addr = if let Ok(sa) = text.parse::<SocketAddr>() {
        sa
    } else {
        let ip: IpAddr = text
            .trim_matches(|c| c == '[' || c == ']')
            .parse()
            .map_err(|_| UsageError(format!("{text}: not a group address (239.1.1.1, [ff15::1]:5001)")))?;
        SocketAddr::new(ip, a.port)
    };
    if named.is_some() && a.interface.is_some() {
        let twice = format!(
            "the interface is given twice (%{} and --interface)",
            named.unwrap_or_default()
        );
        return Err(UsageError(twice).into());
    }
    Ok((addr, named.or_else(|| a.interface.clone())))
}

pub fn multicast(a: MulticastArgs) -> Result<bool> {
    match a.what {
        McCommand::Send(s) => send(s),
        McCommand::Receive(r) => receive(r),
    }
}

fn send(a: SendArgs) -> Result<bool> {
    let (group, interface) = parse_group(&a.group)?;
    let plan = SendPlan {
        to: GroupPlan {
            group,
            source: None,
            interface,
        },
        bind: a.bind,
        ttl: a.ttl,
        loopback: !a.no_loop,
        rate_bps: a.bitrate.bps(),
        length: a.length,
        duration: a.time,
        count: None,
        iperf2: a.iperf2,
        key: None,
    };
    let stop = interrupt_flag()?;
    let r = landspeed_net::multicast::send_multicast(&plan, &stop).map_err(usage_or_runtime)?;
    if a.group.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        out!("{}", landspeed_report::multicast_text::send_text(&r));
    }
    let facts = SentPlan {
        interface: plan.to.interface.clone(),
        length: plan.length,
        rate_bps: plan.rate_bps,
        duration: plan.duration,
        started_unix_s: r.started_unix_s,
        host: landspeed_engine::host::host_info(),
    };
    let mut result = record::sent_result(&r, facts);
    result.interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
    Ok(a.group.save(&[result]))
}

fn receive(a: ReceiveArgs) -> Result<bool> {
    let (group, interface) = parse_group(&a.group)?;
    let plan = ReceivePlan {
        from: GroupPlan {
            group,
            source: a.source,
            interface,
        },
        max_wait: a.time,
        linger: a.linger,
    };
    let stop = interrupt_flag()?;
    let json = a.group.json;
    // On stderr whatever the format: a script starts its senders once every receiver said it.
    let joined = || errln!("joined {group}, listening (up to {:?})", plan.max_wait);
    let r = landspeed_net::multicast::receive_multicast(&plan, &stop, joined).map_err(usage_or_runtime)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        out!("{}", landspeed_report::multicast_text::receive_text(&r));
    }
    if r.sources.is_empty() {
        errln!("landspeed: nothing was heard on {group} ({})", r.ended_by);
        return Ok(false);
    }
    let results = record::received_results(&r, &landspeed_engine::host::host_info());
    let saved = a.group.save(&results);
    Ok(saved && !r.sources.iter().any(|s| s.verified == Some(false)))
}
