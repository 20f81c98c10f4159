//! `run --latency`'s report: the RTT of the probes before the transfer and during it, RFC 6349's
//! buffer delay, and each direction's one-way delay when the replies carried the server's times.

use super::oneway::OneWayReport;
use super::rtt::RttSummary;
use serde::{Deserialize, Serialize};

/// `run --latency`: echo probes before the transfer (idle) and during it (loaded).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    /// Probes per second.
    pub probes_per_s: f64,
    /// Probe size, header included, bytes.
    pub probe_bytes: u32,
    /// The probes before the transfer.
    pub idle: RttSummary,
    /// The probes during the transfer.
    pub loaded: RttSummary,
    /// RFC 6349: (average loaded RTT − baseline RTT) / baseline RTT × 100, baseline being the idle
    /// minimum.
    pub buffer_delay_pct: Option<f64>,
    /// Loaded median minus idle median: the queueing delay the transfer added.
    pub added_delay_ms: Option<f64>,
    /// Each direction's delay, from the server's receive times in the replies (absent when the
    /// replies carried none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<OneWayReport>,
}

impl LatencyReport {
    /// The report of the two series, its buffer delay and added delay computed.
    pub fn new(probes_per_s: f64, probe_bytes: u32, idle: RttSummary, loaded: RttSummary) -> Self {
        let buffer_delay_pct = match (idle.min_ms, loaded.avg_ms) {
            (Some(base), Some(avg)) if base > 0.0 => Some((avg - base) / base * 100.0),
            _ => None,
        };
        let added_delay_ms = match (idle.median_ms, loaded.median_ms) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        LatencyReport {
            probes_per_s,
            probe_bytes,
            idle,
            loaded,
            buffer_delay_pct,
            added_delay_ms,
            one_way: None,
        }
    }
}
