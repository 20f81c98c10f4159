//! A test whose rate changed mid-way (a link stepped down, a route moved, traffic arrived to share
//! the bottleneck): one verdict over the whole test would judge a mean rate that no part of it had.
//! The intervals' rates are split where they change level (the split that leaves both parts
//! flattest, then again within each part), and each part is judged on its own figures: its rate, its
//! RTT samples and its retransmissions. What the intervals do not carry (TCP's limited-time
//! counters, each thread's CPU) is known only for the whole test, so a part is judged by the rules
//! that need none of it: a pace or a server's cap kept, a full path, loss.

use super::{decide, ev, Confidence, Facts, Limit, LimitKind};

/// One interval as the verdict sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Its start, seconds.
    pub from_s: f64,
    /// Its end, seconds.
    pub to_s: f64,
    /// The direction's rate within it, bits per second.
    pub rate_bps: f64,
    /// The senders' mean smoothed RTT at its end, seconds (TCP_INFO; None without it).
    pub rtt_s: Option<f64>,
    /// Segments the senders retransmitted within it (None without TCP_INFO).
    pub retransmits: Option<u64>,
}

/// Two parts' rates at least this many times apart are a change of level, not the rate's own
/// wander: a CUBIC or Reno sawtooth seen in 1 s intervals moves a part's median by well under it.
pub const LEVEL_CHANGE: f64 = 1.5;
/// Each part flat: its intervals' median absolute deviation at most this share of its median (a
/// slow start's first interval or a single dip is then one outlier, not a level).
pub const PART_FLAT: f64 = 0.2;
/// Each part at least this many intervals.
pub const PART_INTERVALS: usize = 3;
/// At most this many parts.
const MAX_PARTS: usize = 4;

/// The verdicts of a test whose rate changed level: first the change (when, and each part's
/// rate), then each part's own, marked with its time and its share of the test. None: one level.
pub(super) fn changed(f: &Facts) -> Option<Vec<Limit>> {
    let s = &f.samples;
    let mut cuts = Vec::new();
    split(s, 0, s.len(), &mut cuts);
    if cuts.is_empty() {
        return None;
    }
    cuts.sort_unstable();
    let mut bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts)
        .chain(std::iter::once(s.len()))
        .collect();
    settle(s, &mut bounds);
    let parts: Vec<&[Sample]> = bounds.windows(2).map(|w| &s[w[0]..w[1]]).collect();
    let judged: Vec<Vec<Limit>> = parts.iter().map(|p| decide(&part_facts(f, p))).collect();
    let moved = (0..parts.len() - 1).all(|i| {
        let (a, b) = ((parts[i], &judged[i]), (parts[i + 1], &judged[i + 1]));
        levels_apart(a.0, b.0)
            && (both_flat_and_moved(a, b) || above_a_full_path(a, b) || above_a_full_path(b, a))
    });
    if !moved {
        return None;
    }
    let total_s: f64 = parts.iter().map(|p| span_s(p)).sum();
    let mut out = vec![headline(&parts)];
    for (part, limits) in parts.iter().zip(judged) {
        let (from, to) = (part[0].from_s, part[part.len() - 1].to_s);
        for mut l in limits {
            l.during_s = Some((from, to));
            l.share_pct = Some(span_s(part) / total_s * 100.0);
            out.push(l);
        }
    }
    Some(out)
}

/// Two parts' verdicts show the path (or what shares it) changed: the path full at both rates (its
/// capacity changed), or a different limit in each. The same other limit in both (a loss-bound
/// Reno flow halving its rate, a timeout's slow start) is the flow's own dynamics: the whole test
/// is judged as one. An unknown part tells nothing either way.
fn both_flat_and_moved(a: (&[Sample], &Vec<Limit>), b: (&[Sample], &Vec<Limit>)) -> bool {
    flat(a.0) && flat(b.0) && limit_moved(a.1, b.1)
}

/// One part flat with the path full, the other's level well above it (a ramp allowed: a Reno flow
/// grows into a path that got faster over seconds): the path carried more at one time than it
/// could at the other, so its capacity (or the traffic sharing it) changed.
fn above_a_full_path(full: (&[Sample], &Vec<Limit>), other: (&[Sample], &Vec<Limit>)) -> bool {
    let is_full = full.1.iter().map(|l| l.kind).eq([LimitKind::PathCapacity]);
    is_full && flat(full.0) && median(&rates(other.0)) > median(&rates(full.0))
}

fn limit_moved(a: &[Limit], b: &[Limit]) -> bool {
    let kinds = |v: &[Limit]| v.iter().map(|l| l.kind).collect::<Vec<LimitKind>>();
    let (ka, kb) = (kinds(a), kinds(b));
    let known = |k: &[LimitKind]| !k.contains(&LimitKind::Unknown);
    known(&ka) && known(&kb) && (ka != kb || ka == [LimitKind::PathCapacity])
}

/// Moves each cut back over the intervals at the end of the part before it that lie outside that
/// part's level (the first steps of a ramp the split gave to the level), keeping each part at least
/// [`PART_INTERVALS`] long.
fn settle(s: &[Sample], bounds: &mut [usize]) {
    for i in 1..bounds.len() - 1 {
        let lo = bounds[i - 1];
        while bounds[i] - lo > PART_INTERVALS {
            let level = median(&rates(&s[lo..bounds[i]]));
            if (s[bounds[i] - 1].rate_bps - level).abs() <= PART_FLAT * level {
                break;
            }
            bounds[i] -= 1;
        }
    }
}

/// Adds to `cuts` where `s[lo..hi]` changes level, looking again within each side, up to
/// [`MAX_PARTS`] parts in all.
fn split(s: &[Sample], lo: usize, hi: usize, cuts: &mut Vec<usize>) {
    if cuts.len() + 1 >= MAX_PARTS || hi - lo < 2 * PART_INTERVALS {
        return;
    }
    // The split that leaves the least absolute deviation from each side's median.
    let cost = |a: usize, b: usize| {
        let v = rates(&s[a..b]);
        let m = median(&v);
        v.iter().map(|x| (x - m).abs()).sum::<f64>()
    };
    let best = (lo + PART_INTERVALS..=hi - PART_INTERVALS)
        .min_by(|&a, &b| (cost(lo, a) + cost(a, hi)).total_cmp(&(cost(lo, b) + cost(b, hi))));
    let Some(k) = best.filter(|&k| levels_apart(&s[lo..k], &s[k..hi])) else {
        return;
    };
    cuts.push(k);
    split(s, lo, k, cuts);
    split(s, k, hi, cuts);
}

/// Two parts whose levels (medians) are [`LEVEL_CHANGE`] apart, neither of them still.
fn levels_apart(a: &[Sample], b: &[Sample]) -> bool {
    let (level_a, level_b) = (median(&rates(a)), median(&rates(b)));
    level_a > 0.0 && level_b > 0.0 && level_a.max(level_b) >= LEVEL_CHANGE * level_a.min(level_b)
}

/// A level, not a wander, a ramp or a stall: the median absolute deviation at most [`PART_FLAT`]
/// of the median.
fn flat(p: &[Sample]) -> bool {
    let (spread, level) = deviation(&rates(p));
    spread <= PART_FLAT * level
}

fn rates(s: &[Sample]) -> Vec<f64> {
    s.iter().map(|x| x.rate_bps).collect()
}

/// The median absolute deviation and the median of `v`.
fn deviation(v: &[f64]) -> (f64, f64) {
    let m = median(v);
    let d: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    (median(&d), m)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn span_s(p: &[Sample]) -> f64 {
    p.iter().map(|s| s.to_s - s.from_s).sum()
}

fn mean_rate(p: &[Sample]) -> f64 {
    p.iter().map(|s| s.rate_bps * (s.to_s - s.from_s)).sum::<f64>() / span_s(p).max(1e-9)
}

/// The change itself: when, and each part's rate.
fn headline(parts: &[&[Sample]]) -> Limit {
    let said: Vec<String> = parts
        .iter()
        .map(|p| {
            format!(
                "{} from {:.1} s to {:.1} s",
                crate::units::BitRate(mean_rate(p)),
                p[0].from_s,
                p[p.len() - 1].to_s
            )
        })
        .collect();
    let evidence = parts
        .iter()
        .enumerate()
        .map(|(i, p)| ev(&format!("part {} rate", i + 1), mean_rate(p), "bit/s"))
        .chain(
            parts[1..]
                .iter()
                .enumerate()
                .map(|(i, p)| ev(&format!("change {} at", i + 1), p[0].from_s, "s")),
        )
        .collect();
    Limit::new(
        LimitKind::PathChanged,
        Confidence::High,
        format!(
            "the rate changed mid-test: {} (the path, or the traffic sharing it, changed; each part's own verdict follows)",
            said.join(", then ")
        ),
        None,
        evidence,
    )
}

/// A part's facts: its rate, time, RTT samples and retransmissions; what only the whole test has
/// (limited times, CPUs) left out, and no parts of its own.
fn part_facts(f: &Facts, part: &[Sample]) -> Facts {
    let rtts: Vec<f64> = part.iter().filter_map(|s| s.rtt_s).collect();
    let rtt_avg_s =
        (!rtts.is_empty() && f.rtt_min_s.is_some()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64);
    let retransmits: u64 = part.iter().filter_map(|s| s.retransmits).sum();
    let rate_bps = mean_rate(part);
    let segs_out = match f.mss_bytes {
        0 => 0,
        mss => (rate_bps * span_s(part) / 8.0 / f64::from(mss)) as u64 + retransmits,
    };
    Facts {
        rate_bps,
        duration_s: span_s(part),
        rtt_avg_s,
        retransmits,
        segs_out,
        rwnd_limited_pct: 0.0,
        sndbuf_limited_pct: 0.0,
        sender_cpu: Default::default(),
        receiver_cpu: Default::default(),
        samples: Vec::new(),
        ..f.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-second intervals at these rates (Mbit/s), RTT `rtt_ms`, no loss.
    fn samples(mbps: &[f64], rtt_ms: &[f64]) -> Vec<Sample> {
        mbps.iter()
            .zip(rtt_ms.iter().cycle())
            .enumerate()
            .map(|(i, (r, t))| Sample {
                from_s: i as f64,
                to_s: i as f64 + 1.0,
                rate_bps: r * 1e6,
                rtt_s: Some(t / 1e3),
                retransmits: Some(0),
            })
            .collect()
    }

    fn facts(s: Vec<Sample>) -> Facts {
        let secs = s.len() as f64;
        let rate = s.iter().map(|x| x.rate_bps).sum::<f64>() / secs;
        Facts {
            rate_bps: rate,
            duration_s: secs,
            streams: 1,
            rtt_min_s: Some(0.040),
            rtt_avg_s: Some(0.050),
            mss_bytes: 1448,
            segs_out: 1_000_000,
            samples: s,
            ..Facts::default()
        }
    }

    #[test]
    fn a_rate_that_steps_down_is_two_parts_each_judged_on_its_own() {
        // 950 Mbit/s (the first interval in slow start) for 5 s with a queue of 8 ms, then 96 Mbit/s
        // with a queue of 20 ms: the path full at both rates, its capacity changed.
        let s = samples(
            &[400.0, 950.0, 940.0, 955.0, 948.0, 96.0, 95.0, 96.5, 96.0, 95.5],
            &[40.0, 48.0, 49.0, 47.0, 48.0, 60.0, 61.0, 60.0, 59.0, 60.0],
        );
        let v = changed(&facts(s)).expect("a change");
        assert_eq!(v[0].kind, LimitKind::PathChanged);
        assert!(
            v[0].why.contains("until") || v[0].why.contains("from 5.0 s"),
            "{}",
            v[0].why
        );
        let last = v.last().unwrap();
        assert_eq!(last.kind, LimitKind::PathCapacity, "{v:#?}");
        assert_eq!(last.during_s, Some((5.0, 10.0)));
        assert!((last.share_pct.unwrap() - 50.0).abs() < 1e-9);
        assert!(v[1..].iter().all(|l| l.during_s.is_some()));
    }

    #[test]
    fn a_pace_kept_before_the_path_fell_below_it_is_said_for_its_part() {
        let s = samples(
            &[500.0, 500.0, 500.0, 500.0, 100.0, 97.0, 96.0, 96.0],
            &[40.0, 40.5, 40.0, 40.0, 70.0, 75.0, 72.0, 71.0],
        );
        let f = Facts {
            paced_bps: Some(500e6),
            ..facts(s)
        };
        let v = super::super::decide(&f);
        let kinds: Vec<LimitKind> = v.iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            vec![LimitKind::PathChanged, LimitKind::Pacing, LimitKind::PathCapacity]
        );
    }

    #[test]
    fn one_level_with_its_wander_a_ramp_or_a_stall_is_no_change() {
        // A sawtooth around 7 Mbit/s, a long slow start, a stall in the middle, too few intervals.
        for mbps in [
            vec![6.0, 9.0, 7.5, 5.0, 8.0, 6.5, 9.5, 5.5, 7.0, 8.0],
            vec![0.5, 3.0, 9.0, 19.0, 19.3, 19.2, 19.3, 19.1, 19.3],
            vec![95.0, 95.0, 96.0, 0.0, 0.0, 0.0, 95.0, 96.0, 95.0],
            vec![950.0, 950.0, 96.0, 96.0, 96.0],
        ] {
            let f = facts(samples(&mbps, &[40.0]));
            assert!(changed(&f).is_none(), "{mbps:?}");
        }
    }

    #[test]
    fn a_flow_halving_its_rate_on_loss_is_its_own_dynamics_not_a_changed_path() {
        // Reno under loss: 36 Mbit/s, a loss, 18 Mbit/s; both parts loss-bound at 40 ms.
        let mut s = samples(&[36.0, 36.5, 36.0, 37.0, 18.0, 18.5, 18.2, 18.4], &[40.5]);
        for x in &mut s {
            x.retransmits = Some(3);
        }
        assert!(changed(&facts(s)).is_none());
    }

    #[test]
    fn a_rate_that_grows_above_a_full_path_is_a_change_but_a_ramp_below_one_is_not() {
        // Full at 60 Mbit/s (a queue of 10 ms), then Reno growing into a path made faster.
        let up = samples(
            &[
                58.0, 58.0, 58.0, 58.0, 58.0, 80.0, 110.0, 140.0, 170.0, 200.0, 230.0,
            ],
            &[40.0, 40.0, 40.0, 40.0, 40.0, 31.0, 31.0, 31.0, 31.0, 31.0, 31.0],
        );
        let f = Facts {
            rtt_min_s: Some(0.030),
            ..facts(up)
        };
        let v = changed(&f).expect("a change");
        assert_eq!(v[1].kind, LimitKind::PathCapacity);
        assert_eq!(v[1].during_s, Some((0.0, 5.0)));
        // A long slow start into a full path: the ramp is below the full level, not a change.
        let ramp = samples(&[0.5, 3.0, 9.0, 19.0, 19.3, 19.2, 19.3, 19.1, 19.3], &[300.0]);
        let f = Facts {
            rtt_min_s: Some(0.200),
            ..facts(ramp)
        };
        assert!(changed(&f).is_none());
    }

    #[test]
    fn three_levels_are_three_parts() {
        let s = samples(
            &[100.0, 100.0, 100.0, 50.0, 50.0, 51.0, 200.0, 198.0, 200.0, 199.0],
            &[50.0],
        );
        let v = changed(&facts(s)).unwrap();
        let parts: std::collections::BTreeSet<String> =
            v[1..].iter().map(|l| format!("{:?}", l.during_s)).collect();
        assert_eq!(parts.len(), 3, "{v:#?}");
        assert!(
            v[0].why.contains("then") && v[0].evidence.len() == 5,
            "{:#?}",
            v[0]
        );
    }
}
