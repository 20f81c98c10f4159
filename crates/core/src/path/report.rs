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
