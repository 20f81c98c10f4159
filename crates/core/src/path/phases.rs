//! Latency under load in phases, the RRUL idea as crusader shows it: idle, download, upload, both
//! ways, idle again, with echo probes on their own flow throughout. Each phase's probes give its RTT
//! distribution and, from the server's receive times, each direction's queueing over the run's floor
//! for that direction (`oneway`), so a phase shows which way the queue it built stands. Pure: the
//! phases' spans and the probes are handed in.

use super::oneway::{self, ClockOffset, DirectionDelay, Stamps};
use super::rtt::RttSummary;
use serde::{Deserialize, Serialize};

/// The schema name and version of a `landspeed latency` result.
pub const LATENCY_SCHEMA: &str = "landspeed-latency/1";

/// What a phase loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// Nothing: the path's idle latency.
    Idle,
    /// Server to client.
    Download,
    /// Client to server.
    Upload,
    /// Both at once.
    Both,
}

impl Load {
    /// The phases a `landspeed latency` run goes through, in order.
    pub const PLAN: [Load; 5] = [Load::Idle, Load::Download, Load::Upload, Load::Both, Load::Idle];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Load::Idle => "idle",
            Load::Download => "download",
            Load::Upload => "upload",
            Load::Both => "both",
        }
    }
}

/// One echo probe of the run: when it was sent (seconds since the probing began), its RTT if it was
/// answered, and its three times if the answer carried the server's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeSample {
    /// Sent at, seconds since the first probe.
    pub sent_s: f64,
    /// Its round trip, ms; None when it was lost.
    pub rtt_ms: Option<f64>,
    /// Its times on both hosts' clocks, when the reply carried the server's.
    pub stamps: Option<Stamps>,
}

/// One phase as it ran: what it loaded, its span on the probes' clock, and the rates the test in it
/// measured (none in an idle phase, or when its test failed: then `error` says why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpan {
    /// What it loaded.
    pub load: Load,
    /// From, seconds on the probes' clock.
    pub start_s: f64,
    /// To.
    pub end_s: f64,
    /// Server to client, bits per second (the test's receiver-side rate).
    pub download_bps: Option<f64>,
    /// Client to server.
    pub upload_bps: Option<f64>,
    /// Why the phase's test did not give its rates.
    pub error: Option<String>,
    /// The loaded flows' own round trip: the median of their senders' smoothed TCP RTT, sampled each
    /// interval (what a flow sharing their queue sees; under a per-flow scheduler the probes' own
    /// flow does not), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows_rtt_ms: Option<f64>,
    /// What the emulator this ran in counted during the phase (its bottleneck's sojourn times, drops
    /// and marks each way), when the client ran inside one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<crate::emulator::EmulatorReport>,
}

/// One phase's latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseLatency {
    /// The phase and its rates.
    #[serde(flatten)]
    pub span: PhaseSpan,
    /// RTT of the probes sent in it.
    pub rtt: RttSummary,
    /// Client to server: queueing over the run's floor that way (and the floor, with a clock offset).
    pub to_server: DirectionDelay,
    /// Server to client.
    pub to_client: DirectionDelay,
}

/// One probe as the figures draw it: when it was sent, its RTT, and its queueing each way (ms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbePoint {
    /// Sent at, seconds since the first probe.
    pub t_s: f64,
    /// Its round trip (None: lost).
    pub rtt_ms: Option<f64>,
    /// Its queueing toward the server, over the run's floor that way (None: lost or not stamped).
    pub to_server_ms: Option<f64>,
    /// Toward the client.
    pub to_client_ms: Option<f64>,
}

/// A `landspeed latency` run: its phases and the clocks' offset the probes bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhasedLatency {
    /// `landspeed-latency/1`.
    pub schema: String,
    /// The server as given.
    pub host: String,
    /// Probes per second.
    pub probes_per_s: f64,
    /// Each phase in order.
    pub phases: Vec<PhaseLatency>,
    /// The server's clock less the client's (absent when the probes contradict each other).
    pub clock: Option<ClockOffset>,
    /// Every probe, in the order sent.
    pub probes: Vec<ProbePoint>,
    /// The loaded tests' TOS byte (`--dscp`), if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_tos: Option<u8>,
    /// The probes' TOS byte (`--probe-dscp`), if set (else best effort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_tos: Option<u8>,
}

impl PhasedLatency {
    /// Each phase's probes (those sent within its span) summarised.
    pub fn new(
        host: &str,
        probes_per_s: f64,
        spans: Vec<PhaseSpan>,
        probes: &[ProbeSample],
    ) -> PhasedLatency {
        let within = |s: &PhaseSpan| -> Vec<&ProbeSample> {
            probes
                .iter()
                .filter(|p| p.sent_s >= s.start_s && p.sent_s < s.end_s)
                .collect()
        };
        let groups: Vec<Vec<&ProbeSample>> = spans.iter().map(within).collect();
        let stamped: Vec<Vec<Stamps>> = groups
            .iter()
            .map(|g| g.iter().filter_map(|p| p.stamps).collect())
            .collect();
        let slices: Vec<&[Stamps]> = stamped.iter().map(Vec::as_slice).collect();
        let (clock, ways) = oneway::by_group(&slices);
        let phases = spans
            .into_iter()
            .zip(groups)
            .zip(ways)
            .map(|((span, g), (to_server, to_client))| {
                let rtts: Vec<f64> = g.iter().filter_map(|p| p.rtt_ms).collect();
                PhaseLatency {
                    span,
                    rtt: RttSummary::from_samples(g.len() as u32, &rtts),
                    to_server,
                    to_client,
                }
            })
            .collect();
        let all: Vec<Stamps> = probes.iter().filter_map(|p| p.stamps).collect();
        let floors = oneway::floors(&all);
        let points = probes
            .iter()
            .map(|p| {
                let q = p.stamps.zip(floors).map(|(s, f)| oneway::queueing(&s, f));
                ProbePoint {
                    t_s: p.sent_s,
                    rtt_ms: p.rtt_ms,
                    to_server_ms: q.map(|q| q.0),
                    to_client_ms: q.map(|q| q.1),
                }
            })
            .collect();
        PhasedLatency {
            schema: LATENCY_SCHEMA.into(),
            host: host.into(),
            probes_per_s,
            phases,
            clock,
            probes: points,
            load_tos: None,
            probe_tos: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(load: Load, start_s: f64, end_s: f64) -> PhaseSpan {
        PhaseSpan {
            flows_rtt_ms: None,
            emulator: None,
            load,
            start_s,
            end_s,
            download_bps: None,
            upload_bps: None,
            error: None,
        }
    }

    /// A probe at `t` s with `fwd` and `rev` ms each way (one clock), or lost.
    fn probe(t: f64, fwd: f64, rev: f64, lost: bool) -> ProbeSample {
        let sent_ns = (1000.0 + t) * 1e9;
        let stamps = Stamps {
            sent_ns: sent_ns as u64,
            server_rx_ns: (sent_ns + fwd * 1e6) as u64,
            reply_rx_ns: (sent_ns + (fwd + rev) * 1e6) as u64,
        };
        ProbeSample {
            sent_s: t,
            rtt_ms: (!lost).then_some(fwd + rev),
            stamps: (!lost).then_some(stamps),
        }
    }

    #[test]
    fn each_phase_shows_the_direction_its_load_queues() {
        // 10 ms each way idle; the download queues 30 ms toward the client, the upload 50 ms toward
        // the server, both phases both; one probe of the upload lost.
        let mut probes = vec![];
        for k in 0..50 {
            let t = k as f64 * 0.1;
            let (f, r) = match k / 10 {
                1 => (10.0, 40.0),
                2 => (60.0, 10.0),
                3 => (60.0, 40.0),
                _ => (10.0, 10.0),
            };
            probes.push(probe(t, f, r, k == 25));
        }
        let spans = Load::PLAN
            .iter()
            .enumerate()
            .map(|(i, &l)| span(l, i as f64, i as f64 + 1.0))
            .collect();
        let r = PhasedLatency::new("h", 10.0, spans, &probes);
        let q = |i: usize| {
            let p = &r.phases[i];
            (
                p.to_server.queueing.median_ms.unwrap(),
                p.to_client.queueing.median_ms.unwrap(),
            )
        };
        assert_eq!(q(0), (0.0, 0.0));
        assert_eq!(q(1), (0.0, 30.0));
        assert_eq!(q(2), (50.0, 0.0));
        assert_eq!(q(3), (50.0, 30.0));
        assert_eq!(q(4), (0.0, 0.0));
        assert_eq!((r.phases[2].rtt.sent, r.phases[2].rtt.received), (10, 9));
        assert_eq!(r.phases[1].rtt.median_ms, Some(50.0));
        assert_eq!(r.phases[0].to_server.floor_ms, Some(10.0));
        let c = r.clock.unwrap();
        assert!(
            c.offset_ms.abs() <= 1e-6 && (c.bound_ms - 10.0).abs() < 1e-6,
            "{c:?}"
        );
    }

    #[test]
    fn a_phase_without_answers_reports_its_losses_and_no_delays() {
        let probes = [probe(0.5, 10.0, 10.0, false), probe(1.5, 10.0, 10.0, true)];
        let spans = vec![span(Load::Idle, 0.0, 1.0), span(Load::Upload, 1.0, 2.0)];
        let r = PhasedLatency::new("h", 1.0, spans, &probes);
        let up = &r.phases[1];
        assert_eq!((up.rtt.sent, up.rtt.received), (1, 0));
        assert_eq!(up.to_server.queueing.median_ms, None);
    }
}
