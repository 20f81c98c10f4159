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
    out + &emulator_queue_lines(r)
}

/// When the client ran inside an emulator: its bottleneck's own queue times per phase (the mean of all
/// packets and of the probes toward the server), the reference beside the probes' queueing figures.
fn emulator_queue_lines(r: &landspeed_core::path::PhasedLatency) -> String {
    use std::fmt::Write;
    if r.phases.iter().all(|p| p.span.emulator.is_none()) {
        return String::new();
    }
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.2}"));
    let mut out = "  the emulator's own queue, means in ms: to server, all packets / the probes as it timed them / as they measured themselves | to client, all packets; its discipline's drops and marks:\n".to_string();
    for p in &r.phases {
        let Some(e) = &p.span.emulator else { continue };
        let (s, c) = (&e.to_server, &e.to_client);
        let _ = writeln!(
            out,
            "  {:<9} {} / {} / {} | {}; dropped {}, marked {}",
            p.span.load.name(),
            ms(s.mean_sojourn_ms),
            ms(s.probe_mean_sojourn_ms),
            ms(p.to_server.queueing.avg_ms),
            ms(c.mean_sojourn_ms),
            s.path.dropped_aqm + c.path.dropped_aqm,
            s.path.marked_ce + c.path.marked_ce
        );
    }
    out
}

/// `latency --aqm`: each discipline's phases, then one table of their probes' median RTT per phase
/// and the emulator's mean queue in the phase loading both ways.
pub fn by_discipline(c: &landspeed_core::path::LatencyByDiscipline) -> String {
    use landspeed_core::path::Load;
    use std::fmt::Write;
    let mut out = String::new();
    for run in &c.runs {
        let _ = writeln!(out, "Queue discipline {}:", run.aqm);
        out += &phased(&run.result);
        out.push('\n');
    }
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
    let back = c
        .restored_aqm
        .as_deref()
        .map_or(String::new(), |a| format!(", put back to {a}"));
    let _ = writeln!(
        out,
        "Queue disciplines on emulator {}{back}: probes' median RTT per phase (ms), the emulator's mean queue with both loaded (to server | to client, ms):\n  {:<18} {:>8} {:>9} {:>8} {:>8}   emulator, both",
        c.emulator, "discipline", "idle", "download", "upload", "both"
    );
    let cols: Vec<Vec<(&str, Option<f64>)>> = [Load::Idle, Load::Download, Load::Upload, Load::Both]
        .map(|l| c.median_rtt_ms(l))
        .into();
    for (i, run) in c.runs.iter().enumerate() {
        let both = (run.result.phases.iter()).find(|p| p.span.load == Load::Both);
        let queue = both
            .and_then(|p| p.span.emulator.as_ref())
            .map_or("-".into(), |e| {
                format!(
                    "{} | {}",
                    ms(e.to_server.mean_sojourn_ms),
                    ms(e.to_client.mean_sojourn_ms)
                )
            });
        let _ = writeln!(
            out,
            "  {:<18} {:>8} {:>9} {:>8} {:>8}   {queue}",
            run.aqm,
            ms(cols[0][i].1),
            ms(cols[1][i].1),
            ms(cols[2][i].1),
            ms(cols[3][i].1)
        );
    }
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

    /// Two disciplines' runs: each phase's probes at `loaded_ms` but the idle ones, the emulator's
    /// counts on the loaded phases.
    fn by_discipline_fixture() -> landspeed_core::path::LatencyByDiscipline {
        use landspeed_core::emulator::{EmulatorCounts, EmulatorReport};
        use landspeed_core::path::{
            DisciplineRun, LatencyByDiscipline, Load, PhaseSpan, PhasedLatency, ProbeSample,
        };
        let run = |aqm: &str, loaded_ms: f64| {
            let spans = (Load::PLAN.iter().enumerate())
                .map(|(i, &load)| PhaseSpan {
                    load,
                    start_s: i as f64,
                    end_s: i as f64 + 1.0,
                    download_bps: None,
                    upload_bps: None,
                    error: None,
                    flows_rtt_ms: None,
                    emulator: (load != Load::Idle).then(|| EmulatorReport {
                        name: "lfn".into(),
                        client_host: "a".into(),
                        to_server: EmulatorCounts {
                            mean_sojourn_ms: Some(loaded_ms - 20.0),
                            probe_mean_sojourn_ms: Some(0.25),
                            path: landspeed_core::emulator::PathCounts {
                                dropped_aqm: 7,
                                ..Default::default()
                            },
                            ..Default::default()
                        },
                        to_client: EmulatorCounts::default(),
                        changes: vec![],
                        settings: None,
                    }),
                })
                .collect();
            let probes: Vec<ProbeSample> = (0..50)
                .map(|k| {
                    let t = f64::from(k) * 0.1;
                    let idle = !(1.0..4.0).contains(&t);
                    ProbeSample {
                        sent_s: t,
                        rtt_ms: Some(if idle { 20.0 } else { loaded_ms }),
                        stamps: None,
                    }
                })
                .collect();
            DisciplineRun {
                aqm: aqm.into(),
                result: PhasedLatency::new("198.18.0.2", 10.0, spans, &probes),
            }
        };
        LatencyByDiscipline::new(
            "lfn",
            Some("tail-drop".into()),
            vec![run("tail-drop", 420.0), run("fq-codel", 21.0)],
        )
    }

    #[test]
    fn the_disciplines_table_puts_each_runs_phases_side_by_side_with_the_emulators_queue() {
        let text = by_discipline(&by_discipline_fixture());
        assert!(
            text.contains("Queue discipline tail-drop:") && text.contains("Queue discipline fq-codel:"),
            "{text}"
        );
        assert!(text.contains("on emulator lfn, put back to tail-drop"), "{text}");
        let row = |name: &str| {
            let prefix = format!("  {name} ");
            text.lines()
                .rfind(|l| l.starts_with(&prefix))
                .unwrap_or_default()
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(row("tail-drop"), "20.0 420.0 420.0 420.0 400.0 | -", "{text}");
        assert_eq!(row("fq-codel"), "20.0 21.0 21.0 21.0 1.0 | -", "{text}");
        // Each run's phases carry the emulator's own queue times beside the probes'.
        assert!(
            text.contains("  download  400.00 / 0.25 / - | -; dropped 7, marked 0"),
            "{text}"
        );
    }
}
