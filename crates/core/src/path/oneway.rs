//! One-way delay from echo probes whose replies carry the server's receive time. Each answered probe
//! gives three times: sent (client clock), received by the server (server clock), and the reply's
//! arrival (client clock). The two clocks differ by an unknown offset θ (server − client), so:
//!
//! - **Queueing per direction needs no offset.** A direction's delay in one probe, less the smallest
//!   delay any probe saw that way, is its queueing delay at that moment: θ cancels (as long as it does
//!   not drift during the run). This is what the report leads with.
//! - **The absolute one-way delay needs θ, bounded by the probes themselves.** Neither direction can
//!   take less than nothing, so each probe says θ ≤ server_rx − sent and θ ≥ server_rx − reply_rx;
//!   over all probes θ lies between the largest lower and the smallest upper limit. The midpoint is
//!   the estimate and half the width its error bound (at best half the minimum RTT, when one probe
//!   met empty queues both ways). A floor is never reported below zero, and when the limits cross
//!   (a clock stepped or drifted during the run) no absolute figure is reported at all.
//!
//! The server's reply time is taken as its receive time (it answers at once), so time the server
//! spends before answering counts towards the reverse direction.

use super::rtt::RttSummary;
use serde::{Deserialize, Serialize};

/// One answered probe: the client's send and receive times and the server's receive time, ns, each
/// on its own host's wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamps {
    /// When the client sent it (client clock).
    pub sent_ns: u64,
    /// When the server received it (server clock).
    pub server_rx_ns: u64,
    /// When the reply reached the client (client clock).
    pub reply_rx_ns: u64,
}

/// The server's clock less the client's, as the probes bound it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// The estimate (the middle of what the probes allow), ms.
    pub offset_ms: f64,
    /// How far the truth may lie from it either way, ms.
    pub bound_ms: f64,
}

/// What θ the probes allow, or None when they contradict each other (a clock stepped or drifted).
pub fn clock_offset(probes: &[Stamps]) -> Option<ClockOffset> {
    let signed = |a: u64, b: u64| a as f64 - b as f64;
    let lo = probes
        .iter()
        .map(|p| signed(p.server_rx_ns, p.reply_rx_ns))
        .fold(f64::NEG_INFINITY, f64::max);
    let hi = probes
        .iter()
        .map(|p| signed(p.server_rx_ns, p.sent_ns))
        .fold(f64::INFINITY, f64::min);
    (lo.is_finite() && hi.is_finite() && lo <= hi).then(|| ClockOffset {
        offset_ms: (lo + hi) / 2.0 / 1e6,
        bound_ms: (hi - lo) / 2.0 / 1e6,
    })
}

/// Each probe's delay to the server and back from it, ms, up to the unknown offset: forward is
/// `server_rx − sent − θ` and reverse `reply_rx − server_rx + θ`; here with θ = 0.
fn raw_delays(probes: &[Stamps]) -> Vec<(f64, f64)> {
    probes
        .iter()
        .map(|p| {
            let f = (p.server_rx_ns as f64 - p.sent_ns as f64) / 1e6;
            let r = (p.reply_rx_ns as f64 - p.server_rx_ns as f64) / 1e6;
            (f, r)
        })
        .collect()
}

/// One direction in one phase: the queueing delay over the whole run's floor for that direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionDelay {
    /// Queueing delay above the direction's floor (the smallest delay any probe of the run saw that
    /// way), ms: median, percentiles, maximum. Independent of the clocks' offset.
    pub queueing: RttSummary,
    /// The floor itself, absolute, ms: only with a clock offset (its bound applies), never below 0.
    pub floor_ms: Option<f64>,
}

/// One-way delays of a `run --latency`: the clocks' offset and, per phase, each direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayReport {
    /// The server's clock less the client's, with its bound; None when the probes contradict each
    /// other (then only the queueing delays, which do not need it, are reported).
    pub clock: Option<ClockOffset>,
    /// Client to server before the transfer.
    pub idle_to_server: DirectionDelay,
    /// Server to client before the transfer.
    pub idle_to_client: DirectionDelay,
    /// Client to server during the transfer.
    pub loaded_to_server: DirectionDelay,
    /// Server to client during the transfer.
    pub loaded_to_client: DirectionDelay,
}

/// The run's floor each way, up to the clocks' offset (forward and reverse, ms; as `raw_delays`):
/// None without probes.
pub fn floors(all: &[Stamps]) -> Option<(f64, f64)> {
    let d = raw_delays(all);
    let f = d.iter().map(|d| d.0).fold(f64::INFINITY, f64::min);
    let r = d.iter().map(|d| d.1).fold(f64::INFINITY, f64::min);
    (f.is_finite() && r.is_finite()).then_some((f, r))
}

/// One probe's queueing each way over the floors `floors` gave: (to the server, to the client), ms.
pub fn queueing(p: &Stamps, (floor_f, floor_r): (f64, f64)) -> (f64, f64) {
    let (f, r) = raw_delays(std::slice::from_ref(p))[0];
    (f - floor_f, r - floor_r)
}

/// Each group's delay to the server and back (queueing over the whole run's floor for each
/// direction, and the floors where the probes bound the clocks' offset), with that offset.
pub fn by_group(groups: &[&[Stamps]]) -> (Option<ClockOffset>, Vec<(DirectionDelay, DirectionDelay)>) {
    let all: Vec<Stamps> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let clock = clock_offset(&all);
    let (floor_f, floor_r) = floors(&all).unwrap_or((f64::INFINITY, f64::INFINITY));
    let direction = |v: &[Stamps], forward: bool| {
        let q: Vec<f64> = v
            .iter()
            .map(|p| queueing(p, (floor_f, floor_r)))
            .map(|(f, r)| if forward { f } else { r })
            .collect();
        let floor = if forward { floor_f } else { floor_r };
        let theta = |c: &ClockOffset| if forward { -c.offset_ms } else { c.offset_ms };
        DirectionDelay {
            queueing: RttSummary::from_samples(q.len() as u32, &q),
            floor_ms: clock
                .as_ref()
                .filter(|_| floor.is_finite())
                .map(|c| (floor + theta(c)).max(0.0)),
        }
    };
    let each = groups
        .iter()
        .map(|g| (direction(g, true), direction(g, false)))
        .collect();
    (clock, each)
}

impl OneWayReport {
    /// From the idle and the loaded probes (answered ones with the server's time), or None when no
    /// probe carried it (a server that does not stamp its replies).
    pub fn new(idle: &[Stamps], loaded: &[Stamps]) -> Option<OneWayReport> {
        if idle.is_empty() && loaded.is_empty() {
            return None;
        }
        let (clock, mut each) = by_group(&[idle, loaded]);
        let (loaded_to_server, loaded_to_client) = each.pop()?;
        let (idle_to_server, idle_to_client) = each.pop()?;
        Some(OneWayReport {
            clock,
            idle_to_server,
            idle_to_client,
            loaded_to_server,
            loaded_to_client,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A probe sent at `t` ms (client clock, counted from 1000 s) over `fwd` and `rev` ms, the
    /// server's clock `theta` ms ahead of the client's (whole ms; `theta` may be negative).
    fn probe(t: u64, fwd: u64, rev: u64, theta: i64) -> Stamps {
        let t = t + 1_000_000;
        let server = (t + fwd) as i64 + theta;
        Stamps {
            sent_ns: t * MS,
            server_rx_ns: server as u64 * MS,
            reply_rx_ns: (t + fwd + rev) * MS,
        }
    }

    #[test]
    fn the_offset_is_bounded_by_the_fastest_probes_and_exact_when_one_path_was_empty_both_ways() {
        // 10 ms each way at best, the server 5 s ahead: θ in [5000 − 10, 5000 + 10].
        let p = [probe(1000, 10, 10, 5000), probe(1100, 30, 12, 5000)];
        let c = clock_offset(&p).unwrap();
        assert_eq!((c.offset_ms, c.bound_ms), (5000.0, 10.0));
        // Asymmetric floors (15 out, 5 back): the midpoint is off by 5, inside the bound of 10.
        let p = [probe(1000, 15, 5, -300)];
        let c = clock_offset(&p).unwrap();
        assert_eq!((c.offset_ms, c.bound_ms), (-295.0, 10.0));
        assert!((c.offset_ms - -300.0).abs() <= c.bound_ms);
    }

    #[test]
    fn queueing_per_direction_does_not_depend_on_the_clocks() {
        // Idle: 20 ms each way. Loaded: the upload's queue adds 40 ms to server, none back.
        for theta in [-7_000, 0, 123_456] {
            let idle: Vec<Stamps> = (0..10).map(|k| probe(k * 50, 20, 20, theta)).collect();
            let loaded: Vec<Stamps> = (10..20).map(|k| probe(k * 50, 60, 20, theta)).collect();
            let r = OneWayReport::new(&idle, &loaded).unwrap();
            assert_eq!(r.idle_to_server.queueing.median_ms, Some(0.0));
            assert_eq!(r.loaded_to_server.queueing.median_ms, Some(40.0));
            assert_eq!(r.loaded_to_client.queueing.median_ms, Some(0.0));
            let c = r.clock.unwrap();
            assert_eq!((c.offset_ms, c.bound_ms), (theta as f64, 20.0));
            assert_eq!(r.idle_to_server.floor_ms, Some(20.0));
        }
    }

    #[test]
    fn contradicting_probes_give_no_offset_and_no_floor_but_still_the_queueing() {
        // The server's clock steps back 1 s between the two probes.
        let a = probe(0, 10, 10, 0);
        let b = probe(100, 10, 10, -1000);
        assert_eq!(clock_offset(&[a, b]), None);
        let r = OneWayReport::new(&[a], &[b]).unwrap();
        assert!(r.clock.is_none() && r.loaded_to_server.floor_ms.is_none());
        assert!(r.loaded_to_server.queueing.median_ms.is_some());
    }

    #[test]
    fn no_stamped_probe_no_report() {
        assert_eq!(OneWayReport::new(&[], &[]), None);
    }
}
