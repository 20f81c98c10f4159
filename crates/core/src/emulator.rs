//! The landspeed WAN emulator a test crossed, as the result records it: what its forwarder did to
//! the packets of each direction while the test ran (the differences of its counters before and after).
//! A loss the emulator caused is then told apart from one the hosts caused: UDP's loss split puts the
//! emulator's drops on the path, and a TCP test's retransmissions sit beside the drops that caused
//! them. The client finds the emulator itself when it runs in one of its namespaces.

use serde::{Deserialize, Serialize};

/// The emulator and its counters over the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorReport {
    /// The emulator's name (`landspeed wan status NAME`).
    pub name: String,
    /// Which of its hosts the client ran in: "a" or "b".
    pub client_host: String,
    /// From the client's host toward the server's.
    pub to_server: EmulatorCounts,
    /// From the server's host toward the client's.
    pub to_client: EmulatorCounts,
    /// The changes to the path (`wan change`, a schedule) that took effect while the test ran, and
    /// outages that began before it and lasted into it, in the order they were applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<EmulatorChange>,
    /// The path as set when the test ended, toward the server and toward the client (None from an
    /// older client): the verdict weighs its bottleneck's rate and buffer (`core::limit::refine`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<[EmulatedPath; 2]>,
}

/// One direction of the emulated path as set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EmulatedPath {
    /// The bottleneck's rate, bits per second (IP packets); None: no rate limit.
    pub rate_bps: Option<f64>,
    /// The bottleneck's buffer, bytes; None: unlimited.
    pub queue_bytes: Option<u64>,
    /// The one-way delay, ms.
    pub delay_ms: f64,
}

/// A change to the emulated path during a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorChange {
    /// When it took effect, seconds after the test's start (`started_unix_s`; the emulator's
    /// wall-clock stamp); negative for an outage that began before the test.
    pub at_s: f64,
    /// What changed, as `wan change` words (`rtt=80ms`, `down=3s`).
    pub change: String,
    /// Which way: "both", "to_server" or "to_client".
    pub direction: String,
    /// For an outage, how long the path was down, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_s: Option<f64>,
}

/// What an emulated path did to one direction's packets, in one place: the emulator's model counts
/// them (`landspeed_wan::model::ModelCounters`), its forwarder reports them (`wan status`'s
/// `DirSnapshot`) and a result carries their growth over the test ([`EmulatorCounts`]), each
/// embedding this struct (flattened: the JSON of each is unchanged).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathCounts {
    /// Dropped by the loss model.
    #[serde(default)]
    pub dropped_loss: u64,
    /// Dropped by the full bottleneck queue.
    #[serde(default)]
    pub dropped_queue: u64,
    /// Dropped because the path was down (an outage).
    #[serde(default)]
    pub dropped_outage: u64,
    /// Delivered twice.
    #[serde(default)]
    pub duplicated: u64,
    /// Held back so that later packets overtook them.
    #[serde(default)]
    pub reordered: u64,
    /// Dropped by the queue discipline (CoDel, PIE, FQ-CoDel, DualPI2).
    #[serde(default)]
    pub dropped_aqm: u64,
    /// Marked Congestion Experienced by the queue discipline instead of dropped.
    #[serde(default)]
    pub marked_ce: u64,
    /// Packets that went through the rate-limited bottleneck (the queueing figures' count).
    #[serde(default)]
    pub sojourn_packets: u64,
    /// Of those, landspeed's echo probes on their way to a server.
    #[serde(default)]
    pub probe_packets: u64,
}

impl PathCounts {
    /// Each count's growth from `earlier` to `self` (from zero if the emulator restarted in between).
    pub fn since(&self, earlier: &PathCounts) -> PathCounts {
        let d = |f: fn(&PathCounts) -> u64| f(self).saturating_sub(f(earlier));
        PathCounts {
            dropped_loss: d(|c| c.dropped_loss),
            dropped_queue: d(|c| c.dropped_queue),
            dropped_outage: d(|c| c.dropped_outage),
            duplicated: d(|c| c.duplicated),
            reordered: d(|c| c.reordered),
            dropped_aqm: d(|c| c.dropped_aqm),
            marked_ce: d(|c| c.marked_ce),
            sojourn_packets: d(|c| c.sojourn_packets),
            probe_packets: d(|c| c.probe_packets),
        }
    }
}

/// One direction's counters over the test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EmulatorCounts {
    /// Packets that entered the path.
    pub packets_in: u64,
    /// Packets it delivered.
    pub packets_forwarded: u64,
    /// What the path did to them.
    #[serde(flatten)]
    pub path: PathCounts,
    /// Dropped because its delay line was full (a safety bound).
    pub dropped_overflow: u64,
    /// Delivered with a corrupted payload.
    pub corrupted: u64,
    /// The mean queueing delay at the bottleneck (arrival to the start of serialization) of its
    /// `sojourn_packets`, ms: the emulator's own figure of the queue the test met (None: no packet
    /// crossed the bottleneck).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_sojourn_ms: Option<f64>,
    /// The mean queueing delay of its `probe_packets`, ms: the reference for the probes' own
    /// queueing figure that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_mean_sojourn_ms: Option<f64>,
    /// How late its packets left against the delay they were given, 99th percentile over the test,
    /// µs (None: no packet, or an emulator that restarted). Above [`LATE_P99_US`] the path's delay was
    /// not the setting, and the result warns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_p99_us: Option<f64>,
}

/// A departure lateness (99th percentile) above which the emulator was not on time: it was asked to
/// forward more than it can on this machine, or was short of CPU.
pub const LATE_P99_US: f64 = 500.0;

impl EmulatorCounts {
    /// Every packet it dropped, for whatever reason.
    pub fn dropped(&self) -> u64 {
        let p = &self.path;
        p.dropped_loss + p.dropped_queue + self.dropped_overflow + p.dropped_outage + p.dropped_aqm
    }
}

impl EmulatorReport {
    /// What the emulator says of the path `flow`'s data took, for the verdict: its bottleneck's
    /// rate and buffer (when no change to the path fell inside the test: the settings are those at
    /// its end) and the packets its queue and its loss model dropped.
    pub fn path_seen(&self, flow: crate::config::Flow) -> crate::limit::PathSeen {
        let c = self.carrying(flow);
        let set = self
            .settings
            .filter(|_| self.changes.is_empty())
            .map(|s| match flow {
                crate::config::Flow::ClientToServer => s[0],
                crate::config::Flow::ServerToClient => s[1],
            });
        crate::limit::PathSeen {
            source: format!("emulator {}", self.name),
            capacity_bps: set.and_then(|s| s.rate_bps),
            capacity_exact: true,
            queue_bytes: set.and_then(|s| s.queue_bytes),
            drops: Some((c.path.dropped_queue + c.path.dropped_aqm, c.path.dropped_loss)),
        }
    }

    /// The counters of the direction data took in `flow`.
    pub fn carrying(&self, flow: crate::config::Flow) -> &EmulatorCounts {
        match flow {
            crate::config::Flow::ClientToServer => &self.to_server,
            crate::config::Flow::ServerToClient => &self.to_client,
        }
    }
}
