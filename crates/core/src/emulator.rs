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

/// One direction's counters over the test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EmulatorCounts {
    /// Packets that entered the path.
    pub packets_in: u64,
    /// Packets it delivered.
    pub packets_forwarded: u64,
    /// Dropped by its loss model.
    pub dropped_loss: u64,
    /// Dropped by its full bottleneck queue.
    pub dropped_queue: u64,
    /// Dropped because its delay line was full (a safety bound).
    pub dropped_overflow: u64,
    /// Dropped because the path was down (an outage).
    #[serde(default)]
    pub dropped_outage: u64,
    /// Delivered twice.
    pub duplicated: u64,
    /// Delivered after later packets.
    pub reordered: u64,
    /// Delivered with a corrupted payload.
    pub corrupted: u64,
}

impl EmulatorCounts {
    /// Every packet it dropped, for whatever reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_loss + self.dropped_queue + self.dropped_overflow + self.dropped_outage
    }
}

impl EmulatorReport {
    /// The counters of the direction data took in `flow`.
    pub fn carrying(&self, flow: crate::config::Flow) -> &EmulatorCounts {
        match flow {
            crate::config::Flow::ClientToServer => &self.to_server,
            crate::config::Flow::ServerToClient => &self.to_client,
        }
    }
}

/// Records the emulator in `r` and, where it counted the path's drops, lets its count replace the
/// receiver's estimate: a gap that came with a socket drop may also hold datagrams the path lost, so
/// the emulator's exact count goes to the path and the receiving host keeps the rest.
pub fn attach(r: &mut crate::result::RunResult, e: EmulatorReport) {
    for d in &mut r.directions {
        if let Some(u) = d.summary.udp.as_mut() {
            split_with(u, e.carrying(d.flow).dropped());
        }
    }
    if let Some(u) = r.summary.udp.as_mut() {
        let dropped = r.directions.iter().map(|d| e.carrying(d.flow).dropped()).sum();
        split_with(u, dropped);
    }
    r.emulator = Some(e);
}

fn split_with(u: &mut crate::udp::UdpStats, path_dropped: u64) {
    if let Some(host) = u.lost_in_receiver.as_mut() {
        let beyond_sender = u.datagrams_lost - u.lost_in_sender.unwrap_or(0);
        *host = beyond_sender - path_dropped.min(beyond_sender);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulators_count_goes_to_the_path_and_the_rest_to_the_receiver() {
        let mut u = crate::udp::UdpStats {
            datagrams_lost: 100,
            lost_in_receiver: Some(60),
            lost_in_sender: Some(10),
            ..Default::default()
        };
        split_with(&mut u, 35);
        assert_eq!(u.lost_in_receiver, Some(55));
        // More drops than loss (control packets crossed too): all of the rest is the path's.
        split_with(&mut u, 500);
        assert_eq!(u.lost_in_receiver, Some(0));
        // Unknown receiver drops stay unknown.
        let mut old = crate::udp::UdpStats {
            datagrams_lost: 5,
            ..Default::default()
        };
        split_with(&mut old, 5);
        assert_eq!(old.lost_in_receiver, None);
    }
}
