//! landspeed's figures as OpenMetrics text for Prometheus: a server's counters (`serve --metrics`),
//! one probe's result (`exporter`'s `/probe`, the blackbox-exporter pattern) and the exporter's own
//! counters. Each exposition is rendered from a snapshot through prometheus-client's encoder, so the
//! format (TYPE, UNIT and HELP per family, `_total` on counters, `# EOF`) is the library's; the names
//! follow Prometheus's naming guide: base units (bytes, seconds, ratios), one unit per metric, the unit
//! as a suffix (docs/metrics-export.md lists every one).

use landspeed_core::result::RunResult;
use landspeed_core::server_log::{RefusalKind, ServerStats, TestLog};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

/// The media type Prometheus parses as OpenMetrics.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(String, String)>;

fn counter(r: &mut Registry, name: &str, help: &str, unit: Option<Unit>, v: u64) {
    let c: Counter = Counter::default();
    c.inc_by(v);
    match unit {
        Some(u) => r.register_with_unit(name, help, u, c),
        None => r.register(name, help, c),
    }
}

fn gauge(r: &mut Registry, name: &str, help: &str, unit: Option<Unit>, v: f64) {
    let g: Gauge<f64, AtomicU64> = Gauge::default();
    g.set(v);
    match unit {
        Some(u) => r.register_with_unit(name, help, u, g),
        None => r.register(name, help, g),
    }
}

fn counters_by(r: &mut Registry, name: &str, help: &str, label: &str, values: &[(String, u64)]) {
    let f: Family<Labels, Counter> = Family::default();
    for (k, v) in values {
        f.get_or_create(&vec![(label.to_string(), k.clone())]).inc_by(*v);
    }
    r.register(name, help, f);
}

fn build_info(r: &mut Registry, version: &str) {
    r.register(
        "build",
        "The landspeed build that answers",
        Info::new(vec![("version".to_string(), version.to_string())]),
    );
}

fn finish(r: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, r);
    out
}

/// `serve --metrics`: the server's counters since it started and its last test's figures.
pub fn server(s: &ServerStats, last: Option<&TestLog>, version: &str) -> String {
    let mut r = Registry::with_prefix("landspeed");
    build_info(&mut r, version);
    let sub = r.sub_registry_with_prefix("server");
    let outcomes = [
        ("completed".to_string(), s.tests_ok),
        ("failed".to_string(), s.tests_failed),
    ];
    counters_by(
        sub,
        "tests",
        "Tests that ended, by outcome (failed: an error or corrupt data)",
        "outcome",
        &outcomes,
    );
    counter(
        sub,
        "received",
        "Bytes the server's tests received after the warm-up",
        Some(Unit::Bytes),
        s.bytes_received,
    );
    counter(
        sub,
        "sent",
        "Bytes the server's tests sent",
        Some(Unit::Bytes),
        s.bytes_sent,
    );
    // Every kind is a series from the start (0 until it happens), and no other can appear: the label
    // set is fixed whatever peers send.
    let refused: Vec<(String, u64)> = RefusalKind::ALL
        .iter()
        .map(|k| {
            let n = s.refused.iter().filter(|(r, _)| r == k).map(|(_, v)| v).sum();
            (k.label().to_string(), n)
        })
        .collect();
    counters_by(
        sub,
        "refusals",
        "Connections and datagrams refused, by reason",
        "reason",
        &refused,
    );
    let auth = s
        .refused
        .iter()
        .filter(|(k, _)| *k == RefusalKind::Authentication)
        .map(|(_, v)| v)
        .sum();
    counter(
        sub,
        "auth_failures",
        "Clients that failed authentication",
        None,
        auth,
    );
    gauge(
        sub,
        "running_tests",
        "Tests running now",
        None,
        s.tests_running as f64,
    );
    gauge(
        sub,
        "uptime",
        "Time since the server started",
        Some(Unit::Seconds),
        s.uptime_s,
    );
    if let Some(t) = last {
        last_test(sub.sub_registry_with_prefix("last_test"), t);
    }
    finish(&r)
}

fn last_test(r: &mut Registry, t: &TestLog) {
    let rate = if t.duration_s > 0.0 {
        t.bytes_received as f64 / t.duration_s
    } else {
        0.0
    };
    gauge(
        r,
        "received",
        "The last test's bytes received after the warm-up",
        Some(Unit::Bytes),
        t.bytes_received as f64,
    );
    gauge(
        r,
        "sent",
        "The last test's bytes sent",
        Some(Unit::Bytes),
        t.bytes_sent as f64,
    );
    gauge(
        r,
        "verified",
        "The last test's bytes checked against the payload pattern",
        Some(Unit::Bytes),
        t.bytes_verified as f64,
    );
    gauge(
        r,
        "duration",
        "The last test's length at this end",
        Some(Unit::Seconds),
        t.duration_s,
    );
    gauge(
        r,
        "throughput_bytes_per_second",
        "The last test's received bytes over its length",
        None,
        rate,
    );
    gauge(
        r,
        "streams",
        "The last test's streams per direction",
        None,
        f64::from(t.streams),
    );
    gauge(
        r,
        "trusted",
        "1 when the last test completed with every byte verified intact, else 0",
        None,
        f64::from(u8::from(t.verdict().is_trusted())),
    );
    // What held it back, where this server assembled the whole test (iperf3's protocol: both ends'
    // figures reach it); a landspeed client keeps its verdict to itself.
    if let Some(res) = &t.result {
        limited_by(r, res);
    }
}

/// One probe's outcome: whether it ran, how long it took, and the result when there is one.
#[derive(Debug)]
pub struct Probe<'a> {
    /// The test ran and its result is trusted.
    pub success: bool,
    /// Wall time of the probe, seconds.
    pub duration_s: f64,
    /// The test's result, when it produced one.
    pub result: Option<&'a RunResult>,
}

/// `/probe`: `probe_success`, `probe_duration_seconds` and the test's figures.
pub fn probe(p: &Probe) -> String {
    let mut r = Registry::default();
    gauge(
        &mut r,
        "probe_success",
        "1 when the test ran and every byte arrived intact, else 0",
        None,
        f64::from(u8::from(p.success)),
    );
    gauge(
        &mut r,
        "probe_duration",
        "How long the probe took",
        Some(Unit::Seconds),
        p.duration_s,
    );
    if let Some(res) = p.result {
        probe_figures(r.sub_registry_with_prefix("landspeed_probe"), res);
    }
    finish(&r)
}

fn probe_figures(r: &mut Registry, res: &RunResult) {
    let s = &res.summary;
    gauge(
        r,
        "throughput_bytes_per_second",
        "Bytes received per second (multiply by 8 for bits)",
        None,
        s.throughput_bps / 8.0,
    );
    gauge(
        r,
        "received",
        "Bytes received after the warm-up",
        Some(Unit::Bytes),
        s.bytes_received as f64,
    );
    gauge(
        r,
        "sent",
        "Bytes sent after the warm-up",
        Some(Unit::Bytes),
        s.bytes_sent as f64,
    );
    gauge(
        r,
        "verified",
        "Bytes checked against the payload pattern",
        Some(Unit::Bytes),
        s.bytes_verified as f64,
    );
    gauge(
        r,
        "transfer",
        "Time the data moved",
        Some(Unit::Seconds),
        s.duration_s,
    );
    gauge(
        r,
        "trusted",
        "1 when every byte arrived intact and the counts agree, else 0",
        None,
        f64::from(u8::from(res.verdict().is_trusted())),
    );
    tcp_figures(r, res);
    if let Some(u) = &s.udp {
        udp_figures(r, u);
    }
    if let Some(t) = &res.transactions {
        transaction_figures(r, t);
    }
    if let Some(f) = &res.frames {
        frame_figures(r, f);
    }
    limited_by(r, res);
}

/// A request/response probe's figures: its rate, its count, and its latency as quantiles (0 the
/// least, 1 the most; the percentiles within 0.1%: docs/request-response.md), in seconds.
fn transaction_figures(r: &mut Registry, t: &landspeed_core::transactions::TransactionsReport) {
    gauge(
        r,
        "transactions_per_second",
        "Transactions (a request answered in full) per second of the test",
        None,
        t.per_s,
    );
    gauge(
        r,
        "transactions",
        "Transactions completed",
        None,
        t.transactions as f64,
    );
    latency_quantiles(
        r,
        (
            "transaction_latency",
            "A transaction's latency, request sent to answer read, by quantile",
        ),
        &t.latency,
    );
}

/// An isochronous probe's frames (`--isochronous`): by outcome (`whole`, `lost`, `skipped` by the
/// sender, `late` among the whole, `cut` at the end), and the whole frames' latency by quantile, in
/// seconds (docs/isochronous.md).
fn frame_figures(r: &mut Registry, fr: &landspeed_core::frames::FramesReport) {
    let f: Family<Labels, Gauge<f64, AtomicU64>> = Family::default();
    for (outcome, n) in [
        ("whole", fr.complete),
        ("lost", fr.lost),
        ("skipped", fr.skipped_by_sender),
        ("late", fr.late),
        ("cut", fr.cut_at_end),
    ] {
        f.get_or_create(&vec![("outcome".to_string(), outcome.to_string())])
            .set(n as f64);
    }
    r.register(
        "frames",
        "Isochronous frames by outcome (late ones are among the whole)",
        f,
    );
    latency_quantiles(
        r,
        (
            "frame_latency",
            "A whole frame's latency, due on the sender's clock to its last datagram's arrival, by quantile",
        ),
        &fr.latency,
    );
}

/// `name`'s latency quantiles (0 the least, 1 the most), in seconds; a quantile not measured is
/// left out.
fn latency_quantiles(
    r: &mut Registry,
    (name, help): (&str, &str),
    l: &landspeed_core::transactions::LatencySummary,
) {
    let f: Family<Labels, Gauge<f64, AtomicU64>> = Family::default();
    for (q, v) in [
        ("0", l.min_ms),
        ("0.5", l.p50_ms),
        ("0.9", l.p90_ms),
        ("0.99", l.p99_ms),
        ("0.999", l.p999_ms),
        ("1", l.max_ms),
    ] {
        if let Some(ms) = v {
            f.get_or_create(&vec![("quantile".to_string(), q.to_string())])
                .set(ms / 1e3);
        }
    }
    r.register_with_unit(name, help, Unit::Seconds, f);
}

/// What held each direction back (docs/diagnosis.md): one series per limit said, 1, labelled with
/// its direction, kind and confidence, so an alert or a dashboard can follow where the limit moves.
fn limited_by(r: &mut Registry, res: &RunResult) {
    let f: Family<Labels, Gauge<f64, AtomicU64>> = Family::default();
    for d in &res.directions {
        for l in &d.limits {
            // Their names in the result's JSON: client_to_server, medium.
            let name = |v: serde_json::Result<serde_json::Value>| {
                v.ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            };
            let confidence = name(serde_json::to_value(l.confidence));
            let labels = vec![
                ("direction".to_string(), name(serde_json::to_value(d.flow))),
                ("kind".to_string(), l.kind.label().to_string()),
                ("confidence".to_string(), confidence),
            ];
            f.get_or_create(&labels).set(1.0);
        }
    }
    r.register(
        "limited_by",
        "1 for each limit that held a direction's rate back, by direction, kind and confidence",
        f,
    );
}

fn tcp_figures(r: &mut Registry, res: &RunResult) {
    let tcp: Vec<_> = res.streams.iter().filter_map(|st| st.tcp.as_ref()).collect();
    if !tcp.is_empty() {
        gauge(
            r,
            "retransmits",
            "Retransmitted TCP segments of this test",
            None,
            res.summary.retransmits as f64,
        );
        let min = tcp
            .iter()
            .map(|t| t.rtt_min_us)
            .filter(|&u| u > 0)
            .min()
            .unwrap_or(0);
        let mean = tcp.iter().map(|t| f64::from(t.rtt_avg_us)).sum::<f64>() / tcp.len() as f64;
        gauge(
            r,
            "rtt_min",
            "The smallest RTT TCP saw",
            Some(Unit::Seconds),
            f64::from(min) / 1e6,
        );
        gauge(
            r,
            "rtt_mean",
            "The mean of the streams' mean smoothed RTT",
            Some(Unit::Seconds),
            mean / 1e6,
        );
    }
}

fn udp_figures(r: &mut Registry, u: &landspeed_core::udp::UdpStats) {
    gauge(
        r,
        "lost_datagrams",
        "UDP datagrams lost",
        None,
        u.datagrams_lost as f64,
    );
    gauge(
        r,
        "loss",
        "UDP datagrams lost over datagrams sent",
        Some(Unit::Other("ratio".into())),
        u.loss_pct / 100.0,
    );
    gauge(
        r,
        "jitter",
        "UDP interarrival jitter (RFC 3550)",
        Some(Unit::Seconds),
        u.jitter_ms / 1e3,
    );
}

/// `/probe` of a multicast group (`module=multicast`): `probe_success` (a sender heard and none
/// arrived wrong), `probe_duration_seconds`, the senders heard, and each one's figures labelled by
/// its address (at most `MAX_SOURCES` senders, so the series are bounded whatever is sent).
pub fn multicast_probe(success: bool, duration_s: f64, heard: &[RunResult]) -> String {
    let mut r = Registry::default();
    gauge(
        &mut r,
        "probe_success",
        "1 when a sender was heard and every checked byte was right, else 0",
        None,
        f64::from(u8::from(success)),
    );
    gauge(
        &mut r,
        "probe_duration",
        "How long the probe took",
        Some(Unit::Seconds),
        duration_s,
    );
    let sub = r.sub_registry_with_prefix("landspeed_probe_multicast");
    gauge(
        sub,
        "senders",
        "Senders heard on the group",
        None,
        heard.len() as f64,
    );
    let families = McFamilies::default();
    for res in heard {
        families.add(res);
    }
    families.register(sub);
    finish(&r)
}

type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;

/// Each multicast figure, one series per sender heard.
#[derive(Default)]
struct McFamilies {
    datagrams: GaugeFamily,
    loss: GaugeFamily,
    jitter: GaugeFamily,
    delay: GaugeFamily,
    throughput: GaugeFamily,
    verified: GaugeFamily,
}

impl McFamilies {
    fn add(&self, res: &RunResult) {
        use landspeed_core::multicast::record::MulticastRecord;
        let Some(MulticastRecord::Receiver { heard: h, .. }) = &res.multicast else {
            return;
        };
        let sender = ("sender".to_string(), h.from.to_string());
        let with = |k: &str, v: &str| vec![sender.clone(), (k.to_string(), v.to_string())];
        let u = &h.udp;
        for (outcome, n) in [
            ("received", u.datagrams_received),
            ("lost", u.datagrams_lost),
            ("out_of_order", u.out_of_order),
            ("duplicate", u.duplicates),
        ] {
            self.datagrams
                .get_or_create(&with("outcome", outcome))
                .set(n as f64);
        }
        let one = vec![sender.clone()];
        self.loss.get_or_create(&one).set(u.loss_pct / 100.0);
        self.jitter.get_or_create(&one).set(u.jitter_ms / 1e3);
        self.throughput.get_or_create(&one).set(h.rate_bps / 8.0);
        if let Some(d) = h.one_way {
            for (stat, ms) in [("min", d.min_ms), ("mean", d.mean_ms), ("max", d.max_ms)] {
                self.delay.get_or_create(&with("stat", stat)).set(ms / 1e3);
            }
        }
        if let Some(v) = h.verified {
            self.verified.get_or_create(&one).set(f64::from(u8::from(v)));
        }
    }

    fn register(self, r: &mut Registry) {
        r.register("datagrams", "Datagrams of each sender by outcome", self.datagrams);
        r.register_with_unit(
            "loss",
            "Datagrams lost over datagrams sent, per sender",
            Unit::Other("ratio".into()),
            self.loss,
        );
        r.register_with_unit(
            "jitter",
            "Interarrival jitter (RFC 3550), per sender",
            Unit::Seconds,
            self.jitter,
        );
        r.register_with_unit(
            "one_way_delay",
            "Arrival less send time (as right as the two clocks agree), per sender: min, mean, max",
            Unit::Seconds,
            self.delay,
        );
        r.register(
            "throughput_bytes_per_second",
            "Bytes of distinct datagrams a second, per sender",
            self.throughput,
        );
        r.register(
            "verified",
            "1 when every byte of the sender's datagrams was right, 0 when one was not (landspeed senders only)",
            self.verified,
        );
    }
}

/// The exporter's own `/metrics`: probes by result.
pub fn exporter(probes: &[(String, u64)], version: &str) -> String {
    let mut r = Registry::with_prefix("landspeed");
    build_info(&mut r, version);
    counters_by(
        r.sub_registry_with_prefix("exporter"),
        "probes",
        "Probes answered, by result (success, failure, refused)",
        "result",
        probes,
    );
    finish(&r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> ServerStats {
        ServerStats {
            uptime_s: 12.5,
            tests_ok: 3,
            tests_failed: 1,
            tests_running: 1,
            bytes_received: 1_000_000,
            bytes_sent: 0,
            refused: vec![(RefusalKind::Authentication, 2), (RefusalKind::Busy, 1)],
        }
    }

    #[test]
    fn the_server_exposition_is_openmetrics_with_base_units_and_totals() {
        let mut t = TestLog::new("127.0.0.1:1".parse().unwrap(), "landspeed");
        (t.bytes_received, t.bytes_verified, t.duration_s, t.streams) = (4_000, 4_000, 2.0, 1);
        let text = server(&stats(), Some(&t), "0.1.0");
        for line in [
            "# TYPE landspeed_build info",
            "landspeed_build_info{version=\"0.1.0\"} 1",
            "# TYPE landspeed_server_tests counter",
            "landspeed_server_tests_total{outcome=\"completed\"} 3",
            "landspeed_server_tests_total{outcome=\"failed\"} 1",
            "# UNIT landspeed_server_received_bytes bytes",
            "landspeed_server_received_bytes_total 1000000",
            "landspeed_server_refusals_total{reason=\"busy\"} 1",
            "landspeed_server_refusals_total{reason=\"udp_unvalidated\"} 0",
            "landspeed_server_auth_failures_total 2",
            "landspeed_server_running_tests 1.0",
            "landspeed_server_uptime_seconds 12.5",
            "landspeed_server_last_test_throughput_bytes_per_second 2000.0",
            "landspeed_server_last_test_trusted 1.0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(!text.contains("limited_by"), "{text}");
        // An iperf3 test, which this server assembled: its verdict too.
        let mut res = landspeed_core::assemble::provisional(
            &landspeed_core::config::TestSpec::default(),
            landspeed_core::assemble::RunContext::example("h", 0.0),
        );
        res.directions = vec![landspeed_core::result::DirectionResult {
            flow: landspeed_core::config::Flow::ServerToClient,
            summary: Default::default(),
            intervals: vec![],
            stalls: vec![],
            limits: vec![landspeed_core::limit::Limit::new(
                landspeed_core::limit::LimitKind::PathCapacity,
                landspeed_core::limit::Confidence::Medium,
                String::new(),
                None,
                vec![],
            )],
        }];
        t.result = Some(Box::new(res));
        let text = server(&stats(), Some(&t), "0.1.0");
        let line = "landspeed_server_last_test_limited_by{direction=\"server_to_client\",kind=\"path_capacity\",confidence=\"medium\"} 1.0";
        assert!(text.lines().any(|l| l == line), "{line:?} missing in\n{text}");
        // One series per kind of refusal, whatever happened: the label set is fixed.
        let series = text
            .lines()
            .filter(|l| l.starts_with("landspeed_server_refusals_total{"))
            .count();
        assert_eq!(series, RefusalKind::ALL.len());
    }

    /// A result of a test that moved nothing, to hang a probe's figures on.
    fn empty_result() -> RunResult {
        use landspeed_core::assemble::{assemble, Inputs, RunContext};
        let (spec, e) = (landspeed_core::config::TestSpec::default(), Default::default());
        assemble(&Inputs {
            spec: &spec,
            context: RunContext::example("h", 0.0),
            client: &e,
            server: &e,
            client_samples: &[],
            server_samples: &[],
        })
    }

    #[test]
    fn a_request_response_probe_gives_its_rate_and_latency_quantiles_in_seconds() {
        use landspeed_core::transactions::{LatencySummary, TransactionsReport};
        let mut res = empty_result();
        res.transactions = Some(TransactionsReport {
            transactions: 1000,
            per_s: 500.0,
            latency: LatencySummary {
                min_ms: Some(1.0),
                p50_ms: Some(2.0),
                p99_ms: Some(8.0),
                max_ms: Some(20.0),
                ..Default::default()
            },
            ..Default::default()
        });
        let text = probe(&Probe {
            success: true,
            duration_s: 2.0,
            result: Some(&res),
        });
        for want in [
            "landspeed_probe_transactions_per_second 500.0",
            "landspeed_probe_transactions 1000.0",
            "# UNIT landspeed_probe_transaction_latency_seconds seconds",
            "landspeed_probe_transaction_latency_seconds{quantile=\"0\"} 0.001",
            "landspeed_probe_transaction_latency_seconds{quantile=\"0.5\"} 0.002",
            "landspeed_probe_transaction_latency_seconds{quantile=\"0.99\"} 0.008",
            "landspeed_probe_transaction_latency_seconds{quantile=\"1\"} 0.02",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        // A percentile the test did not have is left out, not given as 0.
        assert!(!text.contains("quantile=\"0.9\""), "{text}");
    }

    #[test]
    fn a_multicast_probe_gives_each_sender_heard_its_own_series() {
        use landspeed_core::multicast::{record, Arrival, Group};
        let mut g = Group::new(0);
        for (port, seqs) in [(7000u16, [0u64, 1, 3]), (7001, [0, 1, 2])] {
            for seq in seqs {
                let from = std::net::SocketAddr::from(([198, 18, 50, 1], port));
                let foreign = Arrival::Foreign {
                    protocol: "iperf2",
                    seq,
                    sent_ns: seq * 1_000_000,
                    len: 1470,
                    end_of: (seq >= 2).then_some(4),
                };
                g.on_datagram(from, foreign, seq * 1_000_000 + 2_000_000);
            }
        }
        let heard = record::received_results(&g.report("239.1.1.1:5001".into(), "time"), &Default::default());
        let text = multicast_probe(true, 3.0, &heard);
        for line in [
            "probe_success 1.0",
            "landspeed_probe_multicast_senders 2.0",
            "landspeed_probe_multicast_datagrams{sender=\"198.18.50.1:7000\",outcome=\"lost\"} 1.0",
            "landspeed_probe_multicast_datagrams{sender=\"198.18.50.1:7001\",outcome=\"received\"} 3.0",
            "landspeed_probe_multicast_loss_ratio{sender=\"198.18.50.1:7000\"} 0.25",
            "landspeed_probe_multicast_one_way_delay_seconds{sender=\"198.18.50.1:7000\",stat=\"min\"} 0.002",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        // iperf 2's payload cannot be checked: no verified series.
        assert!(!text.contains("landspeed_probe_multicast_verified{"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn an_isochronous_probe_gives_its_frames_by_outcome_and_their_latency() {
        use landspeed_core::transactions::LatencySummary;
        let mut res = empty_result();
        res.frames = Some(landspeed_core::frames::FramesReport {
            frames: 600,
            complete: 590,
            lost: 10,
            skipped_by_sender: 2,
            late: 3,
            cut_at_end: 1,
            latency: LatencySummary {
                p50_ms: Some(16.9),
                max_ms: Some(40.0),
                ..Default::default()
            },
            ..Default::default()
        });
        let text = probe(&Probe {
            success: true,
            duration_s: 10.0,
            result: Some(&res),
        });
        for want in [
            "landspeed_probe_frames{outcome=\"whole\"} 590.0",
            "landspeed_probe_frames{outcome=\"lost\"} 10.0",
            "landspeed_probe_frames{outcome=\"skipped\"} 2.0",
            "landspeed_probe_frames{outcome=\"late\"} 3.0",
            "landspeed_probe_frames{outcome=\"cut\"} 1.0",
            "landspeed_probe_frame_latency_seconds{quantile=\"0.5\"} 0.0169",
            "landspeed_probe_frame_latency_seconds{quantile=\"1\"} 0.04",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(
            !text.contains("frame_latency_seconds{quantile=\"0.9\"}"),
            "{text}"
        );
    }

    #[test]
    fn a_failed_probe_says_so_and_carries_no_figures() {
        let text = probe(&Probe {
            success: false,
            duration_s: 0.25,
            result: None,
        });
        assert!(text.contains("\nprobe_success 0.0\n"), "{text}");
        assert!(text.contains("probe_duration_seconds 0.25"), "{text}");
        assert!(!text.contains("landspeed_probe_"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn a_probes_verdict_is_a_series_per_limit() {
        use landspeed_core::limit::{Confidence, Limit, LimitKind};
        let mut res = empty_result();
        res.directions[0].limits = vec![Limit::new(
            LimitKind::SystemCap,
            Confidence::Medium,
            String::new(),
            None,
            vec![],
        )];
        let text = probe(&Probe {
            success: true,
            duration_s: 1.0,
            result: Some(&res),
        });
        assert!(
            text.contains("landspeed_probe_limited_by{direction=\"client_to_server\",kind=\"system_cap\",confidence=\"medium\"} 1.0"),
            "{text}"
        );
    }
}
