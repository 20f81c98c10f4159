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
        let (ab_set, ba_set) = (emulated(&end.settings.a_to_b), emulated(&end.settings.b_to_a));
        let settings = if self.side == 'a' {
            [ab_set, ba_set]
        } else {
            [ba_set, ab_set]
        };
        Some(landspeed_core::emulator::EmulatorReport {
            name: self.name,
            client_host: self.side.to_string(),
            to_server,
            to_client,
            changes,
            settings: Some(settings),
        })
    }
}

/// One direction's settings as the result records them.
fn emulated(d: &landspeed_wan::settings::Direction) -> landspeed_core::emulator::EmulatedPath {
    landspeed_core::emulator::EmulatedPath {
        rate_bps: d.rate_bps,
        queue_bytes: d.queue_bytes,
        delay_ms: d.delay.as_secs_f64() * 1e3,
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
    use landspeed_wan::forward::DirSnapshot as S;
    // Each counter's growth over the test (from zero if the emulator restarted in between).
    let d = |f: fn(&S) -> u64| f(b).saturating_sub(f(a));
    // A sum of nanoseconds over a count of packets as a mean in ms (None for no packet).
    let mean_ms = |sum_ns: u64, n: u64| (n > 0).then(|| sum_ns as f64 / n as f64 / 1e6);
    let path = b.path.since(&a.path);
    landspeed_core::emulator::EmulatorCounts {
        packets_in: d(|s| s.packets_in),
        packets_forwarded: d(|s| s.packets_forwarded),
        path,
        dropped_overflow: d(|s| s.dropped_overflow),
        corrupted: d(|s| s.corrupted),
        mean_sojourn_ms: mean_ms(d(|s| s.sojourn_sum_ns), path.sojourn_packets),
        probe_mean_sojourn_ms: mean_ms(d(|s| s.probe_sojourn_sum_ns), path.probe_packets),
        late_p99_us: landspeed_wan::timing::p99_between(&a.departure_lateness, &b.departure_lateness),
    }
}

/// `latency --aqm LIST`: the emulator this process runs in, whose bottleneck discipline is switched,
/// and the discipline each direction had, put back by [`Disciplines::restore`].
pub struct Disciplines {
    name: String,
    original: [String; 2],
}

impl Disciplines {
    /// The emulator around this process, running (else why not, in one line).
    pub fn enclosing() -> Result<Disciplines, String> {
        let (name, _) = daemon::enclosing().ok_or(
            "--aqm switches the discipline of the emulator this runs in: run it inside one, e.g. \
             landspeed wan exec NAME a -- landspeed latency HOST --aqm tail-drop,fq-codel",
        )?;
        let st = daemon::status(&name).map_err(|e| e.to_string())?;
        if !st.running {
            return Err(format!(
                "emulator '{name}' is not running (landspeed wan status {name})"
            ));
        }
        let original = [st.settings.a_to_b.aqm.spec(), st.settings.b_to_a.aqm.spec()];
        Ok(Disciplines { name, original })
    }

    /// Why `aqm` is not a discipline the emulator has, if it is not.
    pub fn check(aqm: &str) -> Result<(), String> {
        landspeed_wan::aqm::Aqm::parse(aqm).map(drop)
    }

    /// The emulator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Both directions' discipline as it was (`tail-drop`; `codel / tail-drop` when they differ).
    pub fn original(&self) -> String {
        match &self.original {
            [a, b] if a == b => a.clone(),
            [a, b] => format!("{a} / {b}"),
        }
    }

    /// Switches both directions to `aqm` (`wan change NAME aqm=…`).
    pub fn set(&self, aqm: &str) -> Result<(), String> {
        daemon::change(&self.name, &[format!("aqm={aqm}")])
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Puts each direction's discipline back.
    pub fn restore(&self) -> Result<(), String> {
        for (aqm, dir) in self.original.iter().zip(["a-to-b", "b-to-a"]) {
            let words = [format!("aqm={aqm}"), format!("direction={dir}")];
            daemon::change(&self.name, &words).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
