//! A path measurement as one campaign: runs a `PathPlan` (UDP echo RTT, TCP connect RTT, route, path
//! MTU, bottleneck capacity) against one address and returns the `PathReport`, telling an observer each
//! step as it happens. It prints nothing: `landspeed path` renders the events as lines, `run --path`
//! ignores them.

use crate::{capacity, echo, pmtu, tcp_ping, trace};
use landspeed_core::path::{PathEvent, PathPlan, PathReport, RttRun, TraceReport, PATH_SCHEMA};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Why a path measurement stopped.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The echo probes could not run.
    #[error(transparent)]
    Echo(#[from] echo::EchoError),
    /// The traceroute could not run.
    #[error("traceroute: {0}")]
    Trace(std::io::Error),
    /// Path MTU discovery could not run.
    #[error("path MTU discovery: {0}")]
    Pmtu(std::io::Error),
    /// The capacity estimate could not run.
    #[error("capacity estimate: {0}")]
    Capacity(std::io::Error),
}

/// Runs `plan` against `addr`; `observe` sees every step as it happens.
pub fn measure(
    plan: &PathPlan,
    addr: SocketAddr,
    interrupt: &AtomicBool,
    observe: &mut dyn FnMut(PathEvent),
) -> Result<PathReport, PathError> {
    let mut report = PathReport {
        schema: PATH_SCHEMA.into(),
        host: plan.host.clone(),
        address: addr.ip().to_string(),
        started_utc: landspeed_core::result::format_utc(crate::realtime_ns() as f64 / 1e9),
        ..PathReport::default()
    };
    if plan.echo {
        report.rtt = Some(echo_series(plan, addr, interrupt, observe)?);
    }
    if let Some(port) = plan.tcp_port {
        report.tcp_connect = Some(connect_series(
            plan,
            SocketAddr::new(addr.ip(), port),
            interrupt,
            observe,
        ));
    }
    if plan.trace {
        report.trace = Some(route(plan, addr, interrupt, observe)?);
    }
    if plan.pmtu {
        let r = pmtu::discover(addr, plan.timeout.min(Duration::from_secs(1)), interrupt)
            .map_err(PathError::Pmtu)?;
        observe(PathEvent::Pmtu { report: &r, addr });
        report.pmtu = Some(r);
    }
    if plan.capacity {
        let p = capacity::CapacityParams {
            trains: plan.trains,
            packet_bytes: (report.pmtu.as_ref().and_then(|m| m.path_mtu))
                .unwrap_or(1500)
                .min(1500),
            ..Default::default()
        };
        let r = capacity::estimate(addr, &p, interrupt).map_err(PathError::Capacity)?;
        observe(PathEvent::Capacity(&r));
        report.capacity = Some(r);
    }
    Ok(report)
}

fn ms(rtt: Option<Duration>) -> Option<f64> {
    rtt.map(|d| d.as_secs_f64() * 1e3)
}

fn echo_series(
    plan: &PathPlan,
    addr: SocketAddr,
    interrupt: &AtomicBool,
    observe: &mut dyn FnMut(PathEvent),
) -> Result<RttRun, PathError> {
    let p = echo::EchoParams {
        interval: plan.interval,
        size: plan.echo_bytes,
        linger: plan.timeout,
    };
    observe(PathEvent::EchoStart { plan, addr });
    let probes = echo::ping(addr, plan.count, &p, interrupt, &mut |pr| {
        observe(PathEvent::EchoReply {
            plan,
            addr,
            seq: pr.seq,
            rtt: pr.rtt,
        })
    })?;
    let samples = probes.iter().map(|p| ms(p.rtt)).collect();
    let bytes = Some(plan.echo_bytes as u32);
    let run = RttRun::new("udp-echo", plan.port, bytes, plan.interval.as_secs_f64(), samples);
    observe(PathEvent::EchoDone { plan, run: &run });
    Ok(run)
}

fn connect_series(
    plan: &PathPlan,
    target: SocketAddr,
    interrupt: &AtomicBool,
    observe: &mut dyn FnMut(PathEvent),
) -> RttRun {
    observe(PathEvent::ConnectStart { plan, target });
    let conns = tcp_ping::ping(
        target,
        plan.count,
        plan.interval,
        plan.timeout,
        interrupt,
        &mut |c| {
            observe(PathEvent::Connected {
                plan,
                target,
                seq: c.seq,
                rtt: c.rtt,
                refused: c.refused,
            })
        },
    );
    let samples = conns.iter().map(|c| ms(c.rtt)).collect();
    let run = RttRun::new(
        "tcp-connect",
        target.port(),
        None,
        plan.interval.as_secs_f64(),
        samples,
    );
    observe(PathEvent::ConnectDone { run: &run });
    run
}

fn route(
    plan: &PathPlan,
    addr: SocketAddr,
    interrupt: &AtomicBool,
    observe: &mut dyn FnMut(PathEvent),
) -> Result<TraceReport, PathError> {
    let p = trace::TraceParams {
        max_hops: plan.max_hops,
        probes: plan.queries,
        wait: plan.timeout.min(Duration::from_secs(5)),
        ..Default::default()
    };
    observe(PathEvent::TraceStart { plan, addr });
    // Numeric hops as they complete; names are looked up at the end, all together and bounded.
    let mut r = trace::trace(addr.ip(), &p, interrupt, &mut |h| {
        if plan.numeric {
            observe(PathEvent::Hop(h));
        }
    })
    .map_err(PathError::Trace)?;
    if !plan.numeric {
        trace::name_hops(&mut r, Duration::from_secs(3));
        r.hops.iter().for_each(|h| observe(PathEvent::Hop(h)));
    }
    observe(PathEvent::TraceDone(&r));
    Ok(r)
}
