//! `landspeed path HOST`: RTT by UDP echo against a landspeed server and by TCP connect time against any
//! host, printed as ping-like lines and a summary, or as one JSON document (`--json`).

use crate::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_core::path::{
    CapacityReport, Hop, PathReport, PmtuReport, RttRun, RttSummary, TraceReport, PATH_SCHEMA,
};
use landspeed_net::path::{echo, tcp_ping};
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
    #[arg(short, long, default_value = "200ms", value_parser = crate::args::duration_arg)]
    pub interval: Duration,
    /// UDP echo datagram size, header included (32..=65507).
    #[arg(short, long, default_value_t = 64)]
    pub size: usize,
    /// How long to wait for an answer to a probe.
    #[arg(short = 'W', long, default_value = "2s", value_parser = crate::args::duration_arg)]
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

fn summary_line(s: &RttSummary) -> String {
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    format!(
        "{} sent, {} received, {:.1}% loss; rtt min/avg/median/p90/p99/max/mdev = {}/{}/{}/{}/{}/{}/{} ms",
        s.sent,
        s.received,
        s.loss_pct,
        f(s.min_ms),
        f(s.avg_ms),
        f(s.median_ms),
        f(s.p90_ms),
        f(s.p99_ms),
        f(s.max_ms),
        f(s.mdev_ms)
    )
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
    let report = measure(&a, addr, &interrupt, !a.json)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    let answered = |r: &Option<RttRun>| r.as_ref().is_none_or(|x| x.summary.received > 0);
    let reached = report.trace.as_ref().is_none_or(|t| t.reached);
    let pmtu = report.pmtu.as_ref().is_none_or(|p| p.path_mtu.is_some());
    let capacity = report.capacity.as_ref().is_none_or(|c| c.estimate_bps.is_some());
    Ok(answered(&report.rtt) && answered(&report.tcp_connect) && reached && pmtu && capacity)
}

impl PathArgs {
    /// What `run --path` measures before its test: everything, briefly.
    pub fn for_run(host: &str, port: u16) -> PathArgs {
        PathArgs {
            host: host.into(),
            port,
            rtt: false,
            trace: false,
            pmtu: false,
            capacity: false,
            trains: 10,
            numeric: false,
            max_hops: 30,
            queries: 2,
            tcp: None,
            count: 10,
            interval: Duration::from_millis(100),
            size: 64,
            timeout: Duration::from_secs(1),
            ipv4: false,
            ipv6: false,
            json: true,
        }
    }
}

/// Runs the chosen measurements against `addr`; with `text`, prints ping-like lines as they come.
pub fn measure(a: &PathArgs, addr: SocketAddr, interrupt: &AtomicBool, text: bool) -> Result<PathReport> {
    let mut report = PathReport {
        schema: PATH_SCHEMA.into(),
        host: a.host.clone(),
        address: addr.ip().to_string(),
        started_utc: landspeed_core::result::format_utc(landspeed_net::path::realtime_ns() as f64 / 1e9),
        ..PathReport::default()
    };
    let all = !(a.rtt || a.tcp.is_some() || a.trace || a.pmtu || a.capacity);
    let udp = a.rtt || all;
    if udp {
        let p = echo::EchoParams {
            interval: a.interval,
            size: a.size,
            linger: a.timeout,
        };
        if text {
            println!(
                "RTT to {} ({addr}) by UDP echo, {} bytes, {} probes {:?} apart:",
                a.host, a.size, a.count, a.interval
            );
        }
        let probes = echo::ping(addr, a.count, &p, interrupt, &mut |pr| {
            if text {
                let ms = pr.rtt.map_or(0.0, |d| d.as_secs_f64() * 1e3);
                println!("  {} bytes from {addr}: seq={} rtt={ms:.3} ms", a.size, pr.seq);
            }
        })
        .map_err(|e| UsageError(e.to_string()))?;
        let samples = probes
            .iter()
            .map(|p| p.rtt.map(|d| d.as_secs_f64() * 1e3))
            .collect();
        let run = RttRun::new(
            "udp-echo",
            a.port,
            Some(a.size as u32),
            a.interval.as_secs_f64(),
            samples,
        );
        if text {
            println!("  {}", summary_line(&run.summary));
            if run.summary.received == 0 {
                println!(
                    "  (no replies: is a landspeed server listening on UDP port {}? try --tcp)",
                    a.port
                );
            }
        }
        report.rtt = Some(run);
    }
    if let Some(port) = a.tcp.or(all.then_some(0)) {
        let port = if port == 0 { a.port } else { port };
        let target = SocketAddr::new(addr.ip(), port);
        if text {
            println!(
                "RTT to {} ({target}) by TCP connect, {} probes {:?} apart:",
                a.host, a.count, a.interval
            );
        }
        let conns = tcp_ping::ping(target, a.count, a.interval, a.timeout, interrupt, &mut |c| {
            if text {
                match c.rtt {
                    Some(d) => println!(
                        "  connect to {target}: seq={} time={:.3} ms{}",
                        c.seq,
                        d.as_secs_f64() * 1e3,
                        if c.refused {
                            " (refused: nothing listens, the reset still timed a round trip)"
                        } else {
                            ""
                        }
                    ),
                    None => println!(
                        "  connect to {target}: seq={} no answer within {:?}",
                        c.seq, a.timeout
                    ),
                }
            }
        });
        let samples = conns
            .iter()
            .map(|c| c.rtt.map(|d| d.as_secs_f64() * 1e3))
            .collect();
        let run = RttRun::new("tcp-connect", port, None, a.interval.as_secs_f64(), samples);
        if text {
            println!("  {}", summary_line(&run.summary));
        }
        report.tcp_connect = Some(run);
    }
    if a.trace || all {
        report.trace = Some(trace(a, addr, interrupt, text)?);
    }
    if a.pmtu || all {
        let r = landspeed_net::path::pmtu::discover(addr, a.timeout.min(Duration::from_secs(1)), interrupt)
            .context("path MTU discovery")?;
        if text {
            println!("{}", pmtu_line(&r, addr));
        }
        report.pmtu = Some(r);
    }
    if a.capacity || all {
        let p = landspeed_net::path::capacity::CapacityParams {
            trains: a.trains,
            packet_bytes: report
                .pmtu
                .as_ref()
                .and_then(|m| m.path_mtu)
                .unwrap_or(1500)
                .min(1500),
            ..Default::default()
        };
        let r = landspeed_net::path::capacity::estimate(addr, &p, interrupt).context("capacity estimate")?;
        if text {
            println!("{}", capacity_line(&r));
        }
        report.capacity = Some(r);
    }
    Ok(report)
}

fn trace(a: &PathArgs, addr: SocketAddr, interrupt: &AtomicBool, text: bool) -> Result<TraceReport> {
    use landspeed_net::path::trace as tr;
    let p = tr::TraceParams {
        max_hops: a.max_hops,
        probes: a.queries,
        wait: a.timeout.min(Duration::from_secs(5)),
        ..Default::default()
    };
    if text {
        println!(
            "Route to {} ({}), {} hops max, {} probes per hop:",
            a.host,
            addr.ip(),
            a.max_hops,
            a.queries
        );
    }
    // Numeric lines as hops complete; names are looked up at the end, all together and bounded.
    let mut r = tr::trace(addr.ip(), &p, interrupt, &mut |h| {
        if text && a.numeric {
            println!("{}", hop_line(h));
        }
    })
    .context("traceroute")?;
    if !a.numeric {
        tr::name_hops(&mut r, Duration::from_secs(3));
        if text {
            for h in &r.hops {
                println!("{}", hop_line(h));
            }
        }
    }
    if text && !r.reached {
        println!("  (the target was not reached within {} hops)", r.hops.len());
    }
    Ok(r)
}

fn hop_line(h: &Hop) -> String {
    let who = match (&h.address, &h.name) {
        (Some(a), Some(n)) => format!("{n} ({a})"),
        (Some(a), None) => a.clone(),
        _ => "*".into(),
    };
    let times: Vec<String> = h
        .probes
        .iter()
        .map(|p| p.rtt_ms.map_or("*".into(), |t| format!("{t:.3} ms")))
        .collect();
    format!(
        "  {:>2}  {who}  {}{}",
        h.ttl,
        times.join("  "),
        h.note.as_deref().map(|n| format!(" {n}")).unwrap_or_default()
    )
}

fn capacity_line(r: &CapacityReport) -> String {
    use landspeed_core::units::BitRate;
    match (r.estimate_bps, r.p10_bps, r.p90_bps) {
        (Some(e), Some(lo), Some(hi)) => format!(
            "Bottleneck capacity: {} (10th-90th percentile {} - {}; {} of {} trains of {} x {} B packets; IP layer)",
            BitRate(e),
            BitRate(lo),
            BitRate(hi),
            r.trains_used,
            r.trains_sent,
            r.train_packets,
            r.packet_bytes
        ),
        _ => format!(
            "Bottleneck capacity: unknown ({} trains sent, none came back whole enough: needs a landspeed server)",
            r.trains_sent
        ),
    }
}

fn pmtu_line(r: &PmtuReport, addr: SocketAddr) -> String {
    match (r.path_mtu, &r.bottleneck, r.bottleneck_mtu) {
        (None, _, _) => format!("Path MTU to {}: unknown (no probe was answered)", addr.ip()),
        (Some(m), Some(b), Some(bm)) => format!(
            "Path MTU to {}: {m} bytes (local interface {}); bigger packets stop at {b}, whose next link carries {bm}",
            addr.ip(),
            r.local_mtu
        ),
        (Some(m), _, _) if m < r.local_mtu.min(65_535) => format!(
            "Path MTU to {}: {m} bytes (local interface {}); bigger packets vanish without an ICMP answer (a black hole)",
            addr.ip(),
            r.local_mtu
        ),
        (Some(m), _, _) => format!("Path MTU to {}: {m} bytes, the local interface's MTU", addr.ip()),
    }
}
