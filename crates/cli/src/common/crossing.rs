//! The WAN emulator a test crosses, when this process runs inside one of its hosts: its counters at
//! the start and the end of a test, so the result records what the emulator did to the test's packets.

use landspeed_wan::{daemon, Status};

/// The emulator a test from this host crosses, and its counters when the test started.
pub struct Crossing {
    name: String,
    side: char,
    start: Status,
}

/// The emulator around this process, if it runs in one of its hosts and the forwarder answers.
pub fn crossing() -> Option<Crossing> {
    let (name, side) = daemon::enclosing()?;
    let start = daemon::status(&name).ok().filter(|s| s.running)?;
    Some(Crossing { name, side, start })
}

impl Crossing {
    /// What the emulator did to each direction's packets since the test started.
    pub fn finish(self) -> Option<landspeed_core::emulator::EmulatorReport> {
        let end = daemon::status(&self.name).ok().filter(|s| s.running)?;
        let ab = counts_between(&self.start.a_to_b, &end.a_to_b);
        let ba = counts_between(&self.start.b_to_a, &end.b_to_a);
        let (to_server, to_client) = if self.side == 'a' { (ab, ba) } else { (ba, ab) };
        Some(landspeed_core::emulator::EmulatorReport {
            name: self.name,
            client_host: self.side.to_string(),
            to_server,
            to_client,
        })
    }
}

fn counts_between(
    a: &landspeed_wan::forward::DirSnapshot,
    b: &landspeed_wan::forward::DirSnapshot,
) -> landspeed_core::emulator::EmulatorCounts {
    landspeed_core::emulator::EmulatorCounts {
        packets_in: b.packets_in.saturating_sub(a.packets_in),
        packets_forwarded: b.packets_forwarded.saturating_sub(a.packets_forwarded),
        dropped_loss: b.dropped_loss.saturating_sub(a.dropped_loss),
        dropped_queue: b.dropped_queue.saturating_sub(a.dropped_queue),
        dropped_overflow: b.dropped_overflow.saturating_sub(a.dropped_overflow),
        duplicated: b.duplicated.saturating_sub(a.duplicated),
        reordered: b.reordered.saturating_sub(a.reordered),
        corrupted: b.corrupted.saturating_sub(a.corrupted),
    }
}
