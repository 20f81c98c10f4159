//! `landspeed path` as people read it: ping-like lines for each probe, a summary per series, the route
//! hop by hop, the path MTU and the capacity estimate, rendered from the campaign's events
//! (`landspeed_core::path::PathEvent`) as they come.

use landspeed_core::path::{CapacityReport, Hop, PathEvent, PmtuReport, RttSummary};
use std::net::SocketAddr;

/// The lines one event prints (none for some).
pub fn lines(ev: &PathEvent) -> Vec<String> {
    match *ev {
        PathEvent::EchoStart { plan, addr } => vec![format!(
            "RTT to {} ({addr}) by UDP echo, {} bytes, {} probes {:?} apart:",
            plan.host, plan.echo_bytes, plan.count, plan.interval
        )],
        PathEvent::EchoReply { plan, addr, seq, rtt } => {
            let ms = rtt.map_or(0.0, |d| d.as_secs_f64() * 1e3);
            vec![format!(
                "  {} bytes from {addr}: seq={seq} rtt={ms:.3} ms",
                plan.echo_bytes
            )]
        }
        PathEvent::EchoDone { plan, run } => {
            let mut v = vec![format!("  {}", summary_line(&run.summary))];
            if run.summary.received == 0 {
                v.push(format!(
                    "  (no replies: is a landspeed server listening on UDP port {}? try --tcp)",
                    plan.port
                ));
            }
            v
        }
        PathEvent::ConnectStart { plan, target } => vec![format!(
            "RTT to {} ({target}) by TCP connect, {} probes {:?} apart:",
            plan.host, plan.count, plan.interval
        )],
        PathEvent::Connected {
            plan,
            target,
            seq,
            rtt,
            refused,
        } => vec![connect_line(target, seq, rtt, refused, plan.timeout)],
        PathEvent::ConnectDone { run } => vec![format!("  {}", summary_line(&run.summary))],
        PathEvent::TraceStart { plan, addr } => vec![format!(
            "Route to {} ({}), {} hops max, {} probes per hop:",
            plan.host,
            addr.ip(),
            plan.max_hops,
            plan.queries
        )],
        PathEvent::Hop(h) => vec![hop_line(h)],
        PathEvent::TraceDone(r) if !r.reached => {
            vec![format!(
                "  (the target was not reached within {} hops)",
                r.hops.len()
            )]
        }
        PathEvent::TraceDone(_) => vec![],
        PathEvent::Pmtu { report, addr } => vec![pmtu_line(report, addr)],
        PathEvent::Capacity(r) => vec![capacity_line(r)],
    }
}

fn connect_line(
    target: SocketAddr,
    seq: u32,
    rtt: Option<std::time::Duration>,
    refused: bool,
    timeout: std::time::Duration,
) -> String {
    match rtt {
        Some(d) => format!(
            "  connect to {target}: seq={seq} time={:.3} ms{}",
            d.as_secs_f64() * 1e3,
            if refused {
                " (refused: nothing listens, the reset still timed a round trip)"
            } else {
                ""
            }
        ),
        None => format!("  connect to {target}: seq={seq} no answer within {timeout:?}"),
    }
}

/// An RTT series in one line: probes sent and answered, loss, and min/avg/median/p90/p99/max/mdev.
pub fn summary_line(s: &RttSummary) -> String {
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

/// The one-way floors and the clocks' offset the probes bound, as one line; or why they were not
/// measured (`why_not`) when the probes gave no offset.
pub(crate) fn floors_line(
    to_server: Option<f64>,
    to_client: Option<f64>,
    clock: Option<&landspeed_core::path::ClockOffset>,
    why_not: &str,
) -> String {
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.2}"));
    match clock {
        Some(c) => format!(
            "  floors: to server {} ms, to client {} ms (the server's clock {:+.3} ms from the client's, ± {:.3} ms)\n",
            ms(to_server),
            ms(to_client),
            c.offset_ms,
            c.bound_ms
        ),
        None => format!("  floors not measured: {why_not}\n"),
    }
}

/// `landspeed latency`: one line per phase (what it loaded and moved, its RTT, each direction's
/// queueing over that direction's floor), then the floors and the clocks' offset.
pub fn phased(r: &landspeed_core::path::PhasedLatency) -> String {
    use std::fmt::Write;
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.2}"));
    let rate = |x: Option<f64>| x.map_or("-".into(), |b| landspeed_core::units::BitRate(b).to_string());
    let class = |t: Option<u8>| t.map_or("best effort".into(), landspeed_core::tos::tos_name);
    let classes = match (r.load_tos, r.probe_tos) {
        (None, None) => String::new(),
        (l, p) => format!(", probes in {}, load in {}", class(p), class(l)),
    };
    let mut out = format!(
        "Latency under load to {} (UDP echo, {} probes/s, on a flow of their own{classes}):\n  {:<9} {:>13} {:>13}  {:<31} {:<29} {:<10} {}\n",
        r.host, r.probes_per_s, "phase", "download", "upload", "RTT median / p90 / p99 ms", "queueing to server / client", "flows RTT", "lost"
    );
    for p in &r.phases {
        let q = |d: &landspeed_core::path::DirectionDelay| ms(d.queueing.median_ms);
        let _ = writeln!(
            out,
            "  {:<9} {:>13} {:>13}  {:<31} {:<29} {:<10} {} of {}{}",
            p.span.load.name(),
            rate(p.span.download_bps),
            rate(p.span.upload_bps),
            format!(
                "{} / {} / {}",
                ms(p.rtt.median_ms),
                ms(p.rtt.p90_ms),
                ms(p.rtt.p99_ms)
            ),
            format!("{} / {} ms", q(&p.to_server), q(&p.to_client)),
            p.span.flows_rtt_ms.map_or("-".into(), |v| format!("{v:.1} ms")),
            p.rtt.sent - p.rtt.received,
            p.rtt.sent,
            p.span
                .error
                .as_deref()
                .map(|e| format!("  (test failed: {e})"))
                .unwrap_or_default()
        );
    }
    let first = r.phases.first();
    out += &floors_line(
        first.and_then(|p| p.to_server.floor_ms),
        first.and_then(|p| p.to_client.floor_ms),
        r.clock.as_ref(),
        "no answered probe carried the server's time, or the probes contradict any one clock offset",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::path::{PathPlan, RttRun, TraceReport};

    #[test]
    fn a_series_without_replies_says_what_to_check() {
        let plan = PathPlan::for_run("far.example", 5201);
        let run = RttRun::new("udp-echo", 5201, Some(64), 0.1, vec![None, None]);
        let l = lines(&PathEvent::EchoDone {
            plan: &plan,
            run: &run,
        });
        assert_eq!(l.len(), 2);
        assert!(l[0].starts_with("  2 sent, 0 received, 100.0% loss"), "{l:?}");
        assert!(l[1].contains("UDP port 5201? try --tcp"), "{l:?}");
        let answered = RttRun::new("udp-echo", 5201, Some(64), 0.1, vec![Some(1.5)]);
        assert_eq!(
            lines(&PathEvent::EchoDone {
                plan: &plan,
                run: &answered
            })
            .len(),
            1
        );
    }

    #[test]
    fn a_route_that_ends_short_says_so_and_a_refused_connect_is_explained() {
        let r = TraceReport::default();
        assert_eq!(
            lines(&PathEvent::TraceDone(&r)),
            vec!["  (the target was not reached within 0 hops)".to_string()]
        );
        let plan = PathPlan::for_run("h", 1);
        let ev = PathEvent::Connected {
            plan: &plan,
            target: "192.0.2.1:22".parse().unwrap(),
            seq: 4,
            rtt: Some(std::time::Duration::from_micros(1500)),
            refused: true,
        };
        assert_eq!(
            lines(&ev),
            vec!["  connect to 192.0.2.1:22: seq=4 time=1.500 ms (refused: nothing listens, the reset still timed a round trip)"
                .to_string()]
        );
    }
}
