//! `landspeed path HOST`: RTT by UDP echo against a landspeed server and by TCP connect time against any
//! host, printed as ping-like lines and a summary, or as one JSON document (`--json`).

use crate::common::path_probe::measure;
use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_core::path::{PathPlan, RttRun};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct PathArgs {
    /// Host to measure the path to (a landspeed server for UDP echo; any host for --tcp).
    pub host: String,
    /// The landspeed server's port (its UDP echo shares the test port).
    #[arg(short, long, default_value_t = 5201)]
    pub port: u16,
    /// RTT by UDP echo against a landspeed server. Without --rtt, --tcp, --trace, --pmtu or --capacity,
    /// all of them run.
    #[arg(long)]
    pub rtt: bool,
    /// The route: UDP probes with rising TTL, ICMP answers read without raw sockets.
    #[arg(long)]
    pub trace: bool,
    /// Path MTU: the largest packet that reaches the host with "don't fragment" set, and where bigger
    /// ones stop.
    #[arg(long)]
    pub pmtu: bool,
    /// Bottleneck capacity from packet-train dispersion against a landspeed server.
    #[arg(long)]
    pub capacity: bool,
    /// Packet trains for --capacity.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub trains: u32,
    /// No reverse names in the route.
    #[arg(short = 'n', long = "numeric")]
    pub numeric: bool,
    /// Longest route followed.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub max_hops: u8,
    /// Traceroute probes per hop.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=10))]
    pub queries: u8,
    /// RTT by TCP connect time, against any host: PORT (default: --port).
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "0")]
    pub tcp: Option<u16>,
    /// Probes per series.
    #[arg(short, long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub count: u32,
    /// Time between probes.
    #[arg(short, long, default_value = "200ms", value_parser = crate::common::values::duration)]
    pub interval: Duration,
    /// UDP echo datagram size, header included (32..=65507).
    #[arg(short, long, default_value_t = 64)]
    pub size: usize,
    /// How long to wait for an answer to a probe.
    #[arg(short = 'W', long, default_value = "2s", value_parser = crate::common::values::duration)]
    pub timeout: Duration,
    /// Only IPv4 / only IPv6.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

fn resolve(a: &PathArgs) -> Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = (a.host.as_str(), a.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host '{}'", a.host))?
        .collect();
    addrs
        .into_iter()
        .find(|x| (!a.ipv4 || x.is_ipv4()) && (!a.ipv6 || x.is_ipv6()))
        .with_context(|| format!("host '{}' has no address of the family asked for", a.host))
}

pub fn path(a: PathArgs) -> Result<bool> {
    if a.interval.is_zero() {
        return Err(UsageError("--interval must be positive".into()).into());
    }
    let addr = resolve(&a)?;
    let interrupt = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupt.clone()).context("cannot install signal handler")?;
    }
    let report = measure(&a.plan(), addr, &interrupt, !a.json)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    }
    let answered = |r: &Option<RttRun>| r.as_ref().is_none_or(|x| x.summary.received > 0);
    let reached = report.trace.as_ref().is_none_or(|t| t.reached);
    let pmtu = report.pmtu.as_ref().is_none_or(|p| p.path_mtu.is_some());
    let capacity = report.capacity.as_ref().is_none_or(|c| c.estimate_bps.is_some());
    Ok(answered(&report.rtt) && answered(&report.tcp_connect) && reached && pmtu && capacity)
}

impl PathArgs {
    /// The campaign's plan: without --rtt, --tcp, --trace, --pmtu or --capacity, everything this
    /// platform can probe runs (not the route and path MTU where traceroute is not built: asked for
    /// by name, they are refused).
    pub fn plan(&self) -> PathPlan {
        let all = !(self.rtt || self.tcp.is_some() || self.trace || self.pmtu || self.capacity);
        let icmp = landspeed_engine::platform::has("traceroute");
        PathPlan {
            host: self.host.clone(),
            port: self.port,
            echo: self.rtt || all,
            tcp_port: (self.tcp.or(all.then_some(0))).map(|p| if p == 0 { self.port } else { p }),
            trace: self.trace || (all && icmp),
            pmtu: self.pmtu || (all && icmp),
            capacity: self.capacity || all,
            trains: self.trains,
            numeric: self.numeric,
            max_hops: self.max_hops,
            queries: self.queries,
            count: self.count,
            interval: self.interval,
            echo_bytes: self.size,
            timeout: self.timeout,
        }
    }
}
