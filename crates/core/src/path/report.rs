//! What `landspeed path` found, as one serializable record (its `--json`), ready to be embedded in a
//! run's result or a record document. Sections are optional: each probe kind fills its own.

use super::rtt::RttSummary;
use serde::{Deserialize, Serialize};

/// The schema tag of `landspeed path --json` (and of a run's `path`).
pub const PATH_SCHEMA: &str = "landspeed/path/1";

/// What a path measurement found (schema `landspeed/path/1`, docs/path.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathReport {
    /// The layout's tag, `PATH_SCHEMA`.
    pub schema: String,
    /// The target, as named.
    pub host: String,
    /// The address measured.
    pub address: String,
    /// When the measurement started, UTC.
    pub started_utc: String,
    /// UDP echo against a landspeed server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<RttRun>,
    /// TCP connection set-up time, against any host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_connect: Option<RttRun>,
    /// The route, hop by hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReport>,
    /// The path MTU and where bigger packets stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmtu: Option<PmtuReport>,
    /// The bottleneck's capacity from packet trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityReport>,
}

/// One series of RTT probes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RttRun {
    /// "udp-echo" or "tcp-connect".
    pub method: String,
    /// The port probed.
    pub port: u16,
    /// Datagram size (UDP echo), header included.
    pub probe_bytes: Option<u32>,
    /// Time between probes, seconds.
    pub interval_s: f64,
    /// Each probe's RTT in order, null when it was lost.
    pub samples_ms: Vec<Option<f64>>,
    /// Loss and the RTT statistics.
    pub summary: RttSummary,
}

impl RttRun {
    /// A series from its samples (None for a lost probe), its summary computed.
    pub fn new(
        method: &str,
        port: u16,
        probe_bytes: Option<u32>,
        interval_s: f64,
        samples_ms: Vec<Option<f64>>,
    ) -> Self {
        let got: Vec<f64> = samples_ms.iter().flatten().copied().collect();
        let summary = RttSummary::from_samples(samples_ms.len() as u32, &got);
        RttRun {
            method: method.into(),
            port,
            probe_bytes,
            interval_s,
            samples_ms,
            summary,
        }
    }
}

/// A traceroute: the routers on the way, hop by hop.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceReport {
    /// The address traced.
    pub target: String,
    /// UDP destination port of the first probe (each probe uses the next).
    pub first_port: u16,
    /// The largest TTL tried.
    pub max_hops: u8,
    /// Probes per hop.
    pub probes_per_hop: u8,
    /// The target itself answered.
    pub reached: bool,
    /// Every hop tried, in order.
    pub hops: Vec<Hop>,
}

/// One hop of a traceroute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    /// The probes' TTL: the hop's distance.
    pub ttl: u8,
    /// Each probe: who answered and how fast (both null when nothing did).
    pub probes: Vec<HopProbe>,
    /// The answering address (the first one, when probes differ) and its reverse name.
    pub address: Option<String>,
    /// The answering address's reverse name, when it has one.
    pub name: Option<String>,
    /// traceroute's annotations: "!N", "!H", "!X", "!U" for unreachables other than the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One traceroute probe.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HopProbe {
    /// Who answered, if anyone.
    pub address: Option<String>,
    /// How fast, ms.
    pub rtt_ms: Option<f64>,
}

/// Path-MTU discovery: the largest packet that passes, and where bigger ones stop.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PmtuReport {
    /// The MTU of the local interface towards the target.
    pub local_mtu: u32,
    /// The largest IP packet that reached the target (bytes, IP header included).
    pub path_mtu: Option<u32>,
    /// The router that refused bigger packets ("fragmentation needed"/"packet too big") and the
    /// next-hop MTU it reported; null when bigger packets vanished without a word (a black hole).
    pub bottleneck: Option<String>,
    /// The next-hop MTU the router reported.
    pub bottleneck_mtu: Option<u32>,
    /// How the search went: each size tried and what happened.
    pub probes: Vec<PmtuProbe>,
}

/// One size tried in path MTU discovery.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PmtuProbe {
    /// IP packet size.
    pub size: u32,
    /// "passed", "too-big" (with the router), or "lost".
    pub outcome: String,
    /// The router that said "too big".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// The bottleneck's capacity from packet-train dispersion: back-to-back packets leave the narrowest link
/// spaced by its serialization time, and the receiver's timestamps measure that spacing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    /// IP packet size of the train's packets.
    pub packet_bytes: u32,
    /// Packets per train.
    pub train_packets: u32,
    /// Trains sent.
    pub trains_sent: u32,
    /// Trains with enough packets back to measure.
    pub trains_used: u32,
    /// Median of the per-train estimates, IP-layer bits per second (link framing not counted).
    pub estimate_bps: Option<f64>,
    /// 10th and 90th percentile of the per-train estimates: the spread.
    pub p10_bps: Option<f64>,
    /// The 90th percentile of the per-train estimates.
    pub p90_bps: Option<f64>,
    /// Every usable train's estimate, bit/s.
    pub per_train_bps: Vec<f64>,
}

impl CapacityReport {
    /// Fills the estimate and spread from `per_train_bps`.
    pub fn summarize(&mut self) {
        let mut v: Vec<f64> = self
            .per_train_bps
            .iter()
            .copied()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        v.sort_by(f64::total_cmp);
        self.trains_used = v.len() as u32;
        self.estimate_bps = super::rtt::quantile(&v, 0.5);
        self.p10_bps = super::rtt::quantile(&v, 0.1);
        self.p90_bps = super::rtt::quantile(&v, 0.9);
    }
}

/// One train's estimate: `received` packets of `packet_bytes`, the first and last arriving `spread_ns`
/// apart, carried (received − 1) packets' worth of bits through the bottleneck in that time.
pub fn train_estimate_bps(received: u32, packet_bytes: u32, spread_ns: u64) -> Option<f64> {
    (received >= 2 && spread_ns > 0)
        .then(|| f64::from(received - 1) * f64::from(packet_bytes) * 8.0 / (spread_ns as f64 / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispersion_arithmetic() {
        // 1500-byte packets 12 µs apart: 1 Gbit/s.
        let e = train_estimate_bps(48, 1500, 47 * 12_000).unwrap();
        assert!((e - 1e9).abs() < 1.0, "{e}");
        assert_eq!(train_estimate_bps(1, 1500, 10), None);
        assert_eq!(train_estimate_bps(5, 1500, 0), None);
        let mut r = CapacityReport {
            per_train_bps: vec![9e8, 1e9, 1.1e9, f64::NAN, 0.0],
            ..Default::default()
        };
        r.summarize();
        assert_eq!(r.trains_used, 3);
        assert_eq!(r.estimate_bps, Some(1e9));
        assert!((r.p10_bps.unwrap() - 9.2e8).abs() < 1.0);
    }
}
