//! `landspeed exporter`: a Prometheus exporter in the blackbox pattern. Prometheus scrapes
//! `/probe?target=HOST[:PORT]&...` (the target passed by relabelling); each scrape runs one landspeed
//! test against the target, within the scrape's timeout and the exporter's `--max-time`, and answers
//! `probe_success`, `probe_duration_seconds` and the test's figures in OpenMetrics. A test that fails
//! is `probe_success 0` (HTTP 200); a query the exporter cannot run is HTTP 400 with the reason. One
//! probe per target runs at a time (`--per-target`), so scrapes from several Prometheus servers do
//! not measure each other. The exporter's own counters are on `/metrics`.

use crate::common::http::{Handler, Request, Response};
use anyhow::{Context, Result};
use clap::Args;
use landspeed_net::multicast::{GroupPlan, ReceivePlan};
use landspeed_report::openmetrics;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Time a probe needs beyond its test: connecting, the handshake, the results exchange.
pub const SETUP: Duration = Duration::from_secs(2);
/// The test length when the query names none.
pub const DEFAULT_TIME: Duration = Duration::from_secs(5);

#[derive(Args, Debug)]
pub struct ExporterArgs {
    /// Address to answer Prometheus on.
    #[arg(long, default_value = "127.0.0.1:9571")]
    pub listen: SocketAddr,
    /// The longest test a probe may ask for (`time=`).
    #[arg(long, default_value = "30s", value_parser = crate::common::values::duration)]
    pub max_time: Duration,
    /// Probes of one target that may run at once; more wait for their turn within their timeout.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub per_target: u32,
    /// Time kept free of Prometheus's scrape timeout (X-Prometheus-Scrape-Timeout-Seconds).
    #[arg(long, default_value = "500ms", value_parser = crate::common::values::duration)]
    pub timeout_offset: Duration,
}

/// One probe as the query asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeQuery {
    pub host: String,
    pub port: u16,
    pub time: Duration,
    pub streams: u32,
    pub reverse: bool,
    pub udp: bool,
    pub rate: Option<String>,
    /// A request/response probe (`module=rr`: `run --rr`, 1 byte each way, one in flight): its
    /// transactions a second and latency quantiles instead of a throughput.
    pub rr: bool,
    /// A multicast probe (`module=multicast`): the target is a group (port 5001 when it names
    /// none, `%IF` after it the interface) joined for `time`, and what each sender sent it is the
    /// probe's figures.
    pub group: Option<GroupPlan>,
    /// A multicast probe's source (`source=ADDR`: source-specific).
    pub source: Option<IpAddr>,
}

const PARAMETERS: &str = "target, time, streams, reverse, udp, rate, module, source";

/// `GROUP`, `GROUP:PORT`, `[V6GROUP]:PORT`, each with `%IF` after it, as a group to join.
fn group_target(t: &str, source: Option<IpAddr>) -> Result<GroupPlan, String> {
    let (text, interface) = match t.rsplit_once('%') {
        Some((g, i)) if !i.is_empty() => (g, Some(i.to_string())),
        _ => (t, None),
    };
    let group = match text.parse::<SocketAddr>() {
        Ok(sa) => sa,
        Err(_) => {
            let ip: IpAddr = text
                .trim_matches(|c| c == '[' || c == ']')
                .parse()
                .map_err(|_| format!("target={t}: not a group (239.1.1.1:5001, [ff15::1]:5001)"))?;
            SocketAddr::new(ip, 5001)
        }
    };
    landspeed_core::multicast::check_group(group, source).map_err(|e| format!("target={t}: {e}"))?;
    Ok(GroupPlan {
        group,
        source,
        interface,
    })
}

fn flag(k: &str, v: &str) -> Result<bool, String> {
    match v {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" | "" => Ok(false),
        _ => Err(format!("{k}={v}: give 1 or 0")),
    }
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address (the mesh's and `run --from`'s syntax).
fn target(t: &str) -> Result<(String, u16), String> {
    landspeed_plan::mesh::plan::host_port(t).map_err(|e| format!("target: {e}"))
}

/// Reads and checks the query: every parameter known, every value in range.
pub fn parse_query(q: &[(String, String)], max_time: Duration) -> Result<ProbeQuery, String> {
    let mut p = ProbeQuery {
        host: String::new(),
        port: 5201,
        time: DEFAULT_TIME,
        streams: 1,
        reverse: false,
        udp: false,
        rate: None,
        rr: false,
        group: None,
        source: None,
    };
    let mut have_target = None;
    let mut multicast = false;
    for (k, v) in q {
        match k.as_str() {
            "target" => have_target = Some(v.clone()),
            "source" => {
                p.source = Some(v.parse().map_err(|_| format!("source={v}: not an address"))?);
            }
            "time" => p.time = crate::common::values::duration(v).map_err(|e| format!("time={v}: {e}"))?,
            "streams" => {
                p.streams = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=128).contains(n))
                    .ok_or(format!("streams={v}: give 1 to 128"))?
            }
            "reverse" => p.reverse = flag(k, v)?,
            "udp" => p.udp = flag(k, v)?,
            "rate" => {
                crate::common::values::rate(v).map_err(|e| format!("rate={v}: {e}"))?;
                p.rate = Some(v.clone());
            }
            "module" => match v.as_str() {
                "tcp" => {}
                "udp" => p.udp = true,
                "rr" => p.rr = true,
                "multicast" => multicast = true,
                _ => return Err(format!("module={v}: give tcp, udp, rr or multicast")),
            },
            _ => return Err(format!("unknown parameter '{k}' (known: {PARAMETERS})")),
        }
    }
    let Some(t) = have_target else {
        return Err("target is required: /probe?target=HOST[:PORT]".into());
    };
    if multicast {
        if p.udp || p.rr || p.reverse || p.rate.is_some() || p.streams != 1 {
            return Err("module=multicast listens to a group: no udp, rr, reverse, rate or streams".into());
        }
        p.group = Some(group_target(&t, p.source)?);
        (p.host, p.port) = (t, 0);
    } else if p.source.is_some() {
        return Err("source applies to multicast probes (module=multicast)".into());
    } else {
        (p.host, p.port) = target(&t)?;
    }
    if p.time.is_zero() || p.time > max_time {
        return Err(format!(
            "time={:?} is outside 0..{:?} (the exporter's --max-time)",
            p.time, max_time
        ));
    }
    if p.rate.is_some() && !p.udp {
        return Err("rate applies to UDP probes (udp=1)".into());
    }
    if p.rr && (p.reverse || p.rate.is_some()) {
        return Err("module=rr is request/response (TCP, or UDP with udp=1): no reverse or rate".into());
    }
    Ok(p)
}

/// `landspeed run` arguments for a probe.
pub(crate) fn run_args(p: &ProbeQuery) -> Vec<String> {
    let mut a: Vec<String> = [
        p.host.as_str(),
        "-p",
        &p.port.to_string(),
        "-t",
        &format!("{}ms", p.time.as_millis()),
        "-P",
        &p.streams.to_string(),
        "--no-save",
        "--connect-timeout",
        "3s",
    ]
    .map(String::from)
    .to_vec();
    if p.reverse {
        a.push("-R".into());
    }
    if p.rr {
        a.push("--rr".into());
    }
    if p.udp {
        a.push("-u".into());
        if let Some(r) = &p.rate {
            a.extend(["-b".into(), r.clone()]);
        }
    }
    a
}

/// The exporter's state: its settings, probes running per target, and its counters.
struct Exporter {
    args: ExporterArgs,
    running: Mutex<HashMap<String, u32>>,
    turn: Condvar,
    counts: Mutex<BTreeMap<String, u64>>,
}

impl Exporter {
    fn count(&self, result: &str) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *c.entry(result.to_string()).or_default() += 1;
    }

    fn handle(&self, req: &Request) -> Response {
        match req.path.as_str() {
            "/probe" => self.probe(req),
            "/metrics" => {
                let c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
                let counts: Vec<(String, u64)> = c.iter().map(|(k, v)| (k.clone(), *v)).collect();
                metrics_response(openmetrics::exporter(&counts, landspeed_core::SOFTWARE_VERSION))
            }
            _ => Response::text(404, "not found: /probe?target=HOST[:PORT] or /metrics\n"),
        }
    }

    /// The time a probe may take: the scrape's timeout less the offset, or --max-time and set-up.
    fn budget(&self, req: &Request) -> Result<Duration, String> {
        let Some(h) = req.header("x-prometheus-scrape-timeout-seconds") else {
            return Ok(self.args.max_time + SETUP);
        };
        let s: f64 = h
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .ok_or(format!("bad X-Prometheus-Scrape-Timeout-Seconds: {h}"))?;
        Ok(Duration::from_secs_f64(s).saturating_sub(self.args.timeout_offset))
    }

    fn probe(&self, req: &Request) -> Response {
        let checked = parse_query(&req.query, self.args.max_time).and_then(|q| {
            let budget = self.budget(req)?;
            if q.time + SETUP > budget {
                return Err(format!(
                    "time={:?} plus {:?} of set-up does not fit the scrape's {:?} (less --timeout-offset): raise scrape_timeout or lower time",
                    q.time, SETUP, budget
                ));
            }
            Ok((q, budget))
        });
        let (q, budget) = match checked {
            Ok(x) => x,
            Err(why) => {
                self.count("refused");
                return Response::text(400, why + "\n");
            }
        };
        let start = Instant::now();
        let key = format!("{}:{}", q.host, q.port);
        if !self.take_turn(&key, start + budget - q.time - SETUP) {
            self.count("failure");
            return metrics_response(openmetrics::probe(&openmetrics::Probe {
                success: false,
                duration_s: start.elapsed().as_secs_f64(),
                result: None,
            }));
        }
        if let Some(g) = &q.group {
            let body = self.listen(g, q.time, start);
            self.end_turn(&key);
            return metrics_response(body);
        }
        let outcome = crate::common::client::options_from_args(&run_args(&q)).and_then(|o| {
            crate::common::client::run_quiet(&o, false, &AtomicBool::new(false))
                .map_err(|e| crate::common::flags::client(&e))
        });
        self.end_turn(&key);
        let success = outcome.as_ref().is_ok_and(|r| r.verdict().is_trusted());
        self.count(if success { "success" } else { "failure" });
        metrics_response(openmetrics::probe(&openmetrics::Probe {
            success,
            duration_s: start.elapsed().as_secs_f64(),
            result: outcome.as_ref().ok(),
        }))
    }

    /// A multicast probe: joins the group for `time` (to its end: the linger is as long), and
    /// answers each sender heard; a group that cannot be joined is a failed probe.
    fn listen(&self, g: &GroupPlan, time: Duration, start: Instant) -> String {
        let plan = ReceivePlan {
            from: g.clone(),
            max_wait: time,
            linger: time,
        };
        let heard = match landspeed_net::multicast::receive_multicast(&plan, &AtomicBool::new(false), || {}) {
            Ok(rep) => landspeed_core::multicast::record::received_results(
                &rep,
                &landspeed_engine::host::host_info(),
            ),
            Err(e) => {
                errln!("landspeed exporter: multicast probe of {}: {e}", g.group);
                vec![]
            }
        };
        let success = !heard.is_empty() && heard.iter().all(|r| r.verdict().is_trusted());
        self.count(if success { "success" } else { "failure" });
        openmetrics::multicast_probe(success, start.elapsed().as_secs_f64(), &heard)
    }

    /// Waits until fewer than --per-target probes of `key` run, at most until `deadline`.
    fn take_turn(&self, key: &str, deadline: Instant) -> bool {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let n = running.entry(key.to_string()).or_default();
            if *n < self.args.per_target {
                *n += 1;
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            running = self
                .turn
                .wait_timeout(running, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn end_turn(&self, key: &str) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = running.get_mut(key) {
            *n = n.saturating_sub(1);
        }
        self.turn.notify_all();
    }
}

fn metrics_response(body: String) -> Response {
    Response {
        status: 200,
        content_type: openmetrics::CONTENT_TYPE,
        body,
    }
}

pub fn exporter(a: ExporterArgs) -> Result<bool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handler")?;
    }
    let listener =
        std::net::TcpListener::bind(a.listen).with_context(|| format!("cannot listen on {}", a.listen))?;
    outln!(
        "landspeed {} exporter on http://{}/probe?target=HOST[:PORT]",
        landspeed_core::SOFTWARE_VERSION,
        listener.local_addr()?
    );
    let e = Arc::new(Exporter {
        args: a,
        running: Mutex::default(),
        turn: Condvar::new(),
        counts: Mutex::default(),
    });
    let handler: Handler = Arc::new(move |req| e.handle(req));
    crate::common::http::serve(listener, handler, &stop)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Result<ProbeQuery, String> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_query(&v, Duration::from_secs(30))
    }

    #[test]
    fn a_query_maps_onto_a_test() {
        let p = q(&[
            ("target", "[2001:db8::1]:5300"),
            ("time", "3s"),
            ("streams", "4"),
            ("udp", "1"),
            ("rate", "200M"),
        ])
        .unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.streams, p.udp),
            ("2001:db8::1", 5300, 4, true)
        );
        let args = run_args(&p).join(" ");
        assert!(args.starts_with("2001:db8::1 -p 5300 -t 3000ms -P 4"), "{args}");
        assert!(args.ends_with("-u -b 200M"), "{args}");
        assert_eq!(q(&[("target", "b.example")]).unwrap().port, 5201);
        assert_eq!(q(&[("target", "::1")]).unwrap().host, "::1");
    }

    #[test]
    fn a_multicast_query_names_a_group_its_port_interface_and_source() {
        let g = |pairs: &[(&str, &str)]| q(pairs).unwrap().group.unwrap();
        let m = ("module", "multicast");
        assert_eq!(
            g(&[("target", "239.1.1.1"), m]).group,
            "239.1.1.1:5001".parse().unwrap()
        );
        let p = g(&[("target", "[ff15::1]:6000%eth1"), m, ("source", "fd00::7")]);
        assert_eq!(
            (p.group, p.interface.as_deref(), p.source),
            (
                "[ff15::1]:6000".parse().unwrap(),
                Some("eth1"),
                Some("fd00::7".parse().unwrap())
            )
        );
    }

    #[test]
    fn bad_queries_are_refused_with_the_reason() {
        for (pairs, why) in [
            (vec![], "target is required"),
            (vec![("target", "h"), ("bogus", "1")], "unknown parameter 'bogus'"),
            (vec![("target", "h"), ("time", "1h")], "--max-time"),
            (vec![("target", "h"), ("time", "0s")], "outside"),
            (vec![("target", "h"), ("streams", "0")], "1 to 128"),
            (vec![("target", "h"), ("reverse", "maybe")], "give 1 or 0"),
            (vec![("target", "h"), ("rate", "1G")], "UDP probes"),
            (vec![("target", "h:notaport")], "HOST or HOST:PORT"),
            (
                vec![("target", "h"), ("module", "icmp")],
                "tcp, udp, rr or multicast",
            ),
            (
                vec![("target", "h"), ("module", "rr"), ("reverse", "1")],
                "no reverse or rate",
            ),
            (
                vec![("target", "10.0.0.1"), ("module", "multicast")],
                "not a multicast group",
            ),
            (vec![("target", "h"), ("module", "multicast")], "not a group"),
            (
                vec![("target", "239.1.1.1"), ("module", "multicast"), ("udp", "1")],
                "no udp, rr",
            ),
            (
                vec![("target", "239.1.1.1"), ("source", "10.0.0.1")],
                "module=multicast",
            ),
            (
                vec![
                    ("target", "239.1.1.1"),
                    ("module", "multicast"),
                    ("source", "::1"),
                ],
                "cannot send to group",
            ),
        ] {
            let e = q(&pairs).unwrap_err();
            assert!(e.contains(why), "{pairs:?}: {e}");
        }
    }
}
