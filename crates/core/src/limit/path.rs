//! The path's own figures, where a run has them: the settings and counters of landspeed's WAN
//! emulator when the test crossed it, or `--path`'s estimate of the bottleneck's capacity. They
//! decide what the hosts' evidence cannot: whether the packets a flow lost were dropped by the
//! bottleneck's own queue, too small for the bandwidth-delay product, or at random on the way, and
//! whether a rate the hosts' evidence left unexplained is the path's capacity.

use super::{ev, Confidence, Limit, LimitKind, LOOK_ALIKE, NO_RULE};

/// What the path itself says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathSeen {
    /// Who says it ("the emulator", "--path's packet trains").
    pub source: String,
    /// The bottleneck's capacity, bits per second (IP packets).
    pub capacity_bps: Option<f64>,
    /// The capacity is the path's setting, not an estimate.
    pub capacity_exact: bool,
    /// The bottleneck's buffer, bytes.
    pub queue_bytes: Option<u64>,
    /// Packets dropped by the bottleneck's full queue, and at random on the way (a loss model), over
    /// the test.
    pub drops: Option<(u64, u64)>,
}

/// A bottleneck buffer under this share of the bandwidth-delay product is too small for one flow
/// to fill the path: a flow sending at the rate in bursts of its window overflows it long before
/// the pipe is full (a BDP of buffer is the classic rule for a single Reno or CUBIC flow).
pub const SHALLOW_BDP: f64 = 0.25;
/// The queue's drops at least this many times the random ones (or the other way round) say which
/// dropped the packets.
pub const DROPS_DOMINATE: f64 = 4.0;
/// A rate this share of the path's capacity or more filled it.
pub const CAPACITY_FILLED: f64 = 0.9;

/// A queue built while the test carried under this share of a capacity the path states exactly is
/// not the path's capacity: bursts (a window that opened at once) or other traffic built it.
pub const CAPACITY_SHORT: f64 = 0.8;

/// Each verdict of `limits` weighed against what the path says: loss becomes a bottleneck buffer
/// too small for the BDP when that buffer dropped the packets, or is confirmed as random loss; a
/// rate no rule explained that filled the path's capacity is its capacity; a full path the rate
/// fell well short of is not said.
pub fn refine(limits: &mut [Limit], p: &PathSeen) {
    for l in limits.iter_mut() {
        let rate = figure(l, "rate");
        let rtt_s = figure(l, "minimum RTT").map(|ms| ms / 1e3);
        if let Some(u) = short_of_capacity(l, p, rate) {
            *l = u;
            continue;
        }
        let open = l.kind == LimitKind::LossCongestion
            || (l.kind == LimitKind::Unknown && l.why.starts_with(NO_RULE));
        if !open {
            continue;
        }
        if let Some(b) = shallow_buffer(p, rate, rtt_s) {
            *l = Limit {
                during_s: l.during_s,
                share_pct: l.share_pct,
                ..b
            };
        } else if let Some(c) = filled(p, rate) {
            *l = Limit {
                during_s: l.during_s,
                share_pct: l.share_pct,
                ..c
            };
        } else if l.kind == LimitKind::LossCongestion {
            random_loss(l, p);
        }
    }
}

fn figure(l: &Limit, name: &str) -> Option<f64> {
    l.evidence.iter().find(|e| e.name == name).map(|e| e.value)
}

/// The bottleneck's queue dropped the packets, and it holds under [`SHALLOW_BDP`] of the BDP,
/// while the rate stayed under the capacity.
fn shallow_buffer(p: &PathSeen, rate: Option<f64>, rtt_s: Option<f64>) -> Option<Limit> {
    let (queue_drops, random_drops) = p.drops?;
    let (cap, queue, rate, rtt) = (p.capacity_bps?, p.queue_bytes?, rate?, rtt_s?);
    let bdp = cap * rtt / 8.0;
    let held = queue_drops > 0
        && queue_drops as f64 >= DROPS_DOMINATE * random_drops as f64
        && (queue as f64) < SHALLOW_BDP * bdp
        && rate < CAPACITY_FILLED * cap;
    if !held {
        return None;
    }
    use crate::units::{BitRate, Bytes};
    Some(Limit::new(
        LimitKind::BottleneckBuffer,
        Confidence::High,
        format!(
            "a bottleneck buffer too small for the bandwidth-delay product: {} of buffer at a {} bottleneck, {:.1}% of the {} BDP at the minimum RTT of {:.1} ms; it dropped {queue_drops} packets ({random_drops} were lost at random), and the test carried {} of the {} the path allows",
            Bytes(queue),
            BitRate(cap),
            queue as f64 / bdp * 100.0,
            Bytes(bdp as u64),
            rtt * 1e3,
            BitRate(rate),
            BitRate(cap)
        ),
        Some(format!(
            "a bottleneck buffer of about a BDP ({}) where it can be set; otherwise a paced congestion control (BBR) that needs no deep buffer, or more streams (-P)",
            Bytes(bdp as u64)
        )),
        vec![
            ev("rate", rate, "bit/s"),
            ev("minimum RTT", rtt * 1e3, "ms"),
            ev(&format!("capacity ({})", p.source), cap, "bit/s"),
            ev("bottleneck buffer", queue as f64, "bytes"),
            ev("bandwidth-delay product", bdp, "bytes"),
            ev("dropped by the queue", queue_drops as f64, "packets"),
            ev("dropped at random", random_drops as f64, "packets"),
        ],
    ))
}

/// A full path (its queue) said of a whole test that carried under [`CAPACITY_SHORT`] of the
/// capacity the path states exactly: unknown, with both figures.
fn short_of_capacity(l: &Limit, p: &PathSeen, rate: Option<f64>) -> Option<Limit> {
    let (cap, rate) = (p.capacity_bps.filter(|_| p.capacity_exact)?, rate?);
    if l.kind != LimitKind::PathCapacity || l.during_s.is_some() || rate >= CAPACITY_SHORT * cap {
        return None;
    }
    let mut evidence = l.evidence.clone();
    evidence.push(ev(&format!("capacity ({})", p.source), cap, "bit/s"));
    Some(Limit::new(
        LimitKind::Unknown,
        Confidence::Low,
        format!(
            "{NO_RULE}: a queue built at the bottleneck, but the test carried {} of the {} it allows ({}): bursts (a window that opened at once, a receiver that stalled) or other traffic through it",
            crate::units::BitRate(rate),
            crate::units::BitRate(cap),
            p.source
        ),
        None,
        evidence,
    ))
}

/// The rate filled the path's capacity: the path, whatever else the hosts' evidence missed.
fn filled(p: &PathSeen, rate: Option<f64>) -> Option<Limit> {
    let (cap, rate) = (p.capacity_bps?, rate?);
    if rate < CAPACITY_FILLED * cap {
        return None;
    }
    use crate::units::BitRate;
    Some(Limit::new(
        LimitKind::PathCapacity,
        if p.capacity_exact {
            Confidence::High
        } else {
            Confidence::Medium
        },
        format!(
            "the path's capacity: {} carried of the {} its bottleneck allows ({})",
            BitRate(rate),
            BitRate(cap),
            p.source
        ),
        None,
        vec![
            ev("rate", rate, "bit/s"),
            ev(&format!("capacity ({})", p.source), cap, "bit/s"),
        ],
    ))
}

/// Loss the path dropped at random, its queue hardly: random loss, said with the counts.
fn random_loss(l: &mut Limit, p: &PathSeen) {
    let Some((queue_drops, random_drops)) = p.drops else {
        return;
    };
    if random_drops == 0 || (random_drops as f64) < DROPS_DOMINATE * queue_drops as f64 {
        return;
    }
    l.confidence = Confidence::Medium;
    l.why = format!(
        "{}: {} lost {random_drops} packets at random on the way and its queue dropped {queue_drops}, so random loss",
        l.why.replace(LOOK_ALIKE, ""),
        p.source
    );
    l.evidence.extend([
        ev("dropped at random", random_drops as f64, "packets"),
        ev("dropped by the queue", queue_drops as f64, "packets"),
    ]);
}

#[cfg(test)]
mod tests {
    use super::super::{decide, Facts};
    use super::*;

    /// CUBIC through a 10 KB buffer on a 100 Mbit/s, 100 ms path: 2.2 Mbit/s, 0.4% retransmitted.
    fn shallow_run() -> Facts {
        Facts {
            rate_bps: 2.2e6,
            duration_s: 10.0,
            streams: 1,
            rtt_min_s: Some(0.100),
            rtt_avg_s: Some(0.102),
            mss_bytes: 1448,
            segs_out: 19_000,
            retransmits: 80,
            ..Facts::default()
        }
    }

    fn emulator(queue: u64, drops: (u64, u64)) -> PathSeen {
        PathSeen {
            source: "the emulator".into(),
            capacity_bps: Some(100e6),
            capacity_exact: true,
            queue_bytes: Some(queue),
            drops: Some(drops),
        }
    }

    #[test]
    fn loss_from_a_shallow_queue_is_the_buffer_and_random_loss_stays_loss() {
        let mut v = decide(&shallow_run());
        assert_eq!(v[0].kind, LimitKind::LossCongestion, "{v:#?}");
        let before = v.clone();
        refine(&mut v, &emulator(10_000, (80, 0)));
        assert_eq!(v[0].kind, LimitKind::BottleneckBuffer);
        assert!(
            v[0].why.contains("0.8% of the") && v[0].fix.as_ref().unwrap().contains("BDP"),
            "{}",
            v[0].why
        );
        // The same loss dropped at random by a path with a deep buffer.
        let mut w = before.clone();
        refine(&mut w, &emulator(1_250_000, (2, 78)));
        assert_eq!(w[0].kind, LimitKind::LossCongestion);
        assert_eq!(w[0].confidence, Confidence::Medium);
        assert!(
            w[0].why.contains("lost 78 packets at random") && !w[0].why.contains("look alike"),
            "{}",
            w[0].why
        );
        // A deep buffer that dropped: not shallow, nothing changes; no counters: nothing changes.
        for p in [emulator(1_250_000, (80, 0)), PathSeen::default()] {
            let mut x = before.clone();
            refine(&mut x, &p);
            assert_eq!(x, before);
        }
    }

    #[test]
    fn an_unexplained_rate_at_the_capacity_is_the_path_and_a_judged_one_is_kept() {
        // BBR filling 100 Mbit/s with a queue too small for the queue rule.
        let f = Facts {
            rate_bps: 96.5e6,
            duration_s: 10.0,
            streams: 1,
            rtt_min_s: Some(0.040),
            rtt_avg_s: Some(0.0415),
            mss_bytes: 1448,
            segs_out: 1_000_000,
            ..Facts::default()
        };
        let mut v = decide(&f);
        assert_eq!(v[0].kind, LimitKind::Unknown);
        refine(&mut v, &emulator(500_000, (0, 0)));
        assert_eq!(
            (v[0].kind, v[0].confidence),
            (LimitKind::PathCapacity, Confidence::High)
        );
        // A failed or too-short test stays unknown; an estimate is only likely.
        let mut short = decide(&Facts {
            duration_s: 0.2,
            ..f.clone()
        });
        refine(&mut short, &emulator(500_000, (0, 0)));
        assert_eq!(short[0].kind, LimitKind::Unknown);
        let mut est = decide(&f);
        let p = PathSeen {
            capacity_exact: false,
            source: "--path's packet trains".into(),
            ..emulator(0, (0, 0))
        };
        refine(
            &mut est,
            &PathSeen {
                queue_bytes: None,
                drops: None,
                ..p
            },
        );
        assert_eq!(
            (est[0].kind, est[0].confidence),
            (LimitKind::PathCapacity, Confidence::Medium)
        );
        // A queue said the path was full, the emulator says the test carried 60% of it.
        let queued = Facts {
            rate_bps: 60e6,
            rtt_avg_s: Some(0.058),
            ..f.clone()
        };
        let mut q = decide(&queued);
        assert_eq!(q[0].kind, LimitKind::PathCapacity);
        refine(&mut q, &emulator(500_000, (0, 0)));
        assert_eq!(q[0].kind, LimitKind::Unknown);
        assert!(q[0].why.contains("60.0 Mbit/s of the 100 Mbit/s"), "{}", q[0].why);
        // Under the capacity: still unknown.
        let mut slow = decide(&Facts { rate_bps: 60e6, ..f });
        refine(&mut slow, &emulator(500_000, (0, 0)));
        assert_eq!(slow[0].kind, LimitKind::Unknown);
    }
}
