//! What `landspeed path` found, as one serializable record (its `--json`), ready to be embedded in a
//! run's result or a record document. Sections are optional: each probe kind fills its own.

use super::rtt::RttSummary;
use serde::{Deserialize, Serialize};

pub const PATH_SCHEMA: &str = "landspeed/path/1";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathReport {
    pub schema: String,
    pub host: String,
    pub address: String,
    pub started_utc: String,
    /// UDP echo against a landspeed server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<RttRun>,
    /// TCP connection set-up time, against any host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_connect: Option<RttRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmtu: Option<PmtuReport>,
}

/// One series of RTT probes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RttRun {
    /// "udp-echo" or "tcp-connect".
    pub method: String,
    pub port: u16,
    /// Datagram size (UDP echo), header included.
    pub probe_bytes: Option<u32>,
    pub interval_s: f64,
    /// Each probe's RTT in order, null when it was lost.
    pub samples_ms: Vec<Option<f64>>,
    pub summary: RttSummary,
}

impl RttRun {
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
    pub target: String,
    /// UDP destination port of the first probe (each probe uses the next).
    pub first_port: u16,
    pub max_hops: u8,
    pub probes_per_hop: u8,
    pub reached: bool,
    pub hops: Vec<Hop>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    pub ttl: u8,
    /// Each probe: who answered and how fast (both null when nothing did).
    pub probes: Vec<HopProbe>,
    /// The answering address (the first one, when probes differ) and its reverse name.
    pub address: Option<String>,
    pub name: Option<String>,
    /// traceroute's annotations: "!N", "!H", "!X", "!U" for unreachables other than the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HopProbe {
    pub address: Option<String>,
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
    pub bottleneck_mtu: Option<u32>,
    /// How the search went: each size tried and what happened.
    pub probes: Vec<PmtuProbe>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PmtuProbe {
    /// IP packet size.
    pub size: u32,
    /// "passed", "too-big" (with the router), or "lost".
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}
