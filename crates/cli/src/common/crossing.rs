//! The WAN emulator a test crosses, when this process runs inside one of its hosts: its counters at
//! the start and the end of a test, so the result records what the emulator did to the test's packets,
//! and the changes to the path (`wan change`, a schedule) that fell inside the test.

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
    /// What the emulator did to each direction's packets since the test started, and the changes
    /// it applied meanwhile, timed from the test's start (`started_unix_s`).
    pub fn finish(self, started_unix_s: f64) -> Option<landspeed_core::emulator::EmulatorReport> {
        let end = daemon::status(&self.name).ok().filter(|s| s.running)?;
        let ab = counts_between(&self.start.a_to_b, &end.a_to_b);
        let ba = counts_between(&self.start.b_to_a, &end.b_to_a);
        let (to_server, to_client) = if self.side == 'a' { (ab, ba) } else { (ba, ab) };
        let changes = changes_between(&self.start, &end, self.side, started_unix_s);
        Some(landspeed_core::emulator::EmulatorReport {
            name: self.name,
            client_host: self.side.to_string(),
            to_server,
            to_client,
            changes,
        })
    }
}

/// The changes applied between two statuses (and outages still running at the first), from the
/// client's side of the path.
fn changes_between(
    start: &Status,
    end: &Status,
    side: char,
    started_unix_s: f64,
) -> Vec<landspeed_core::emulator::EmulatorChange> {
    use landspeed_wan::change::Which;
    end.changes
        .iter()
        .filter(|a| {
            let inside = a.at_s >= start.uptime_s && a.at_s <= end.uptime_s;
            let lasting = a
                .down_until_s
                .is_some_and(|u| u > start.uptime_s && a.at_s < start.uptime_s);
            inside || lasting
        })
        .map(|a| landspeed_core::emulator::EmulatorChange {
            at_s: a.unix_s - started_unix_s,
            change: a.change.clone(),
            direction: match (a.direction, side) {
                (Which::Both, _) => "both",
                (Which::AToB, 'a') | (Which::BToA, 'b') => "to_server",
                _ => "to_client",
            }
            .into(),
            down_s: a.down_until_s.map(|u| u - a.at_s),
        })
        .collect()
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
        dropped_outage: b.dropped_outage.saturating_sub(a.dropped_outage),
        duplicated: b.duplicated.saturating_sub(a.duplicated),
        reordered: b.reordered.saturating_sub(a.reordered),
        corrupted: b.corrupted.saturating_sub(a.corrupted),
    }
}
