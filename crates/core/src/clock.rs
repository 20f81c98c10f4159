//! A host's clock against a controller's, from probes with NTP's four timestamps (the lowest-RTT one
//! wins): the arithmetic a mesh's results are put on one clock with. The probes themselves are part of
//! landspeed's control protocol (landspeed-proto's `control`); what they mean for a result is here.

use serde::{Deserialize, Serialize};

/// One clock probe: the controller's send and receive times and the host's time in between (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSample {
    /// The controller's clock when it sent the probe.
    pub sent_ns: u64,
    /// The host's clock when it answered.
    pub host_ns: u64,
    /// The controller's clock when the answer came.
    pub received_ns: u64,
}

impl ClockSample {
    /// The probe's round trip.
    pub fn rtt_ns(&self) -> u64 {
        self.received_ns.saturating_sub(self.sent_ns)
    }

    /// Host clock minus controller clock, assuming the probe's two legs took equally long.
    pub fn offset_ns(&self) -> i64 {
        let mid = self.sent_ns as i128 + (self.rtt_ns() as i128) / 2;
        (self.host_ns as i128 - mid) as i64
    }
}

/// A host's clock against the controller's: the offset from the probe with the lowest RTT, whose
/// uncertainty is at most half that RTT.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Host clock minus controller clock.
    pub offset_ns: i64,
    /// RTT of the probe the offset came from; the offset is within ±rtt/2.
    pub rtt_ns: u64,
    /// Probes the offset was chosen from.
    pub probes: u32,
}

/// The offset from a set of probes, or None when there were none.
pub fn estimate_offset(samples: &[ClockSample]) -> Option<ClockOffset> {
    let best = samples.iter().min_by_key(|s| s.rtt_ns())?;
    Some(ClockOffset {
        offset_ns: best.offset_ns(),
        rtt_ns: best.rtt_ns(),
        probes: samples.len() as u32,
    })
}
