//! A run through landspeed's WAN emulator, judged by what the emulator reported: its report
//! attached to the result (a change that came late named, UDP loss split between the path and the
//! hosts by the emulator's exact count) and the test cut into segments at every change to the path.

use crate::emulator::{EmulatorReport, LATE_P99_US};
use crate::result::{IntervalResult, RunResult};

/// Records the emulator in `r` and, where it counted the path's drops, lets its count replace the
/// receiver's estimate: a gap that came with a socket drop may also hold datagrams the path lost, so
/// the emulator's exact count goes to the path and the receiving host keeps the rest.
pub fn attach(r: &mut RunResult, e: EmulatorReport) {
    for d in &mut r.directions {
        if let Some(u) = d.summary.udp.as_mut() {
            split_with(u, e.carrying(d.flow).dropped());
        }
    }
    if let Some(u) = r.summary.udp.as_mut() {
        let dropped = r.directions.iter().map(|d| e.carrying(d.flow).dropped()).sum();
        split_with(u, dropped);
    }
    r.warnings.extend(late(r, &e));
    r.emulator = Some(e);
}

/// One line for each direction whose data the emulator did not forward on time, with the rate it was
/// forwarding then: the most it carries on time here, or less.
fn late(r: &RunResult, e: &EmulatorReport) -> Vec<String> {
    r.directions
        .iter()
        .filter_map(|d| {
            let p99 = e.carrying(d.flow).late_p99_us.filter(|&p| p > LATE_P99_US)?;
            Some(format!(
                "emulator {}: {} carried {} but left packets late (p99 {:.2} ms, against {:.1} ms): more than it forwards on time on this machine, so the path's delay was not its setting; give the emulator a core, or set its --rate below {}",
                e.name,
                d.flow.label(),
                crate::units::BitRate(d.summary.throughput_bps),
                p99 / 1e3,
                LATE_P99_US / 1e3,
                crate::units::BitRate(d.summary.throughput_bps)
            ))
        })
        .collect()
}

fn split_with(u: &mut crate::udp::UdpStats, path_dropped: u64) {
    if let Some(host) = u.lost_in_receiver.as_mut() {
        let beyond_sender = u.datagrams_lost - u.lost_in_sender.unwrap_or(0);
        *host = beyond_sender - path_dropped.min(beyond_sender);
    }
}

/// A stretch of a test between changes to the emulated path (not outages: those are stalls).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Its start, seconds after the test's start.
    pub from_s: f64,
    /// Its end.
    pub to_s: f64,
    /// The rate over the whole intervals inside it, bits per second.
    pub throughput_bps: f64,
    /// The senders' smoothed RTT over those intervals, ms (TCP).
    pub rtt_ms: Option<f64>,
}

/// The test cut at every change to the path's settings that fell inside it: one segment when the
/// path never changed. Each segment's figures come from the measured intervals that lie wholly
/// inside it, so the mean of a test whose path changed is not taken for either path.
pub fn segments(r: &RunResult) -> Vec<Segment> {
    let end = r.intervals.last().map_or(0.0, |i| i.end_s);
    let mut cuts: Vec<f64> = r
        .emulator
        .iter()
        .flat_map(|e| &e.changes)
        .filter(|c| c.down_s.is_none() && c.at_s > 0.0 && c.at_s < end)
        .map(|c| c.at_s)
        .collect();
    cuts.sort_by(f64::total_cmp);
    let bounds: Vec<f64> = std::iter::once(0.0)
        .chain(cuts)
        .chain(std::iter::once(end))
        .collect();
    bounds
        .windows(2)
        .map(|w| {
            let inside: Vec<&IntervalResult> = r
                .intervals
                .iter()
                .filter(|i| !i.omitted && i.start_s >= w[0] - 1e-9 && i.end_s <= w[1] + 1e-9)
                .collect();
            let secs: f64 = inside.iter().map(|i| i.end_s - i.start_s).sum();
            let bytes: u64 = inside.iter().map(|i| i.bytes).sum();
            let rtts: Vec<f64> = inside
                .iter()
                .flat_map(|i| i.streams.iter().filter_map(|s| s.rtt_us))
                .map(|u| f64::from(u) / 1e3)
                .collect();
            Segment {
                from_s: w[0],
                to_s: w[1],
                throughput_bps: if secs > 0.0 {
                    bytes as f64 * 8.0 / secs
                } else {
                    0.0
                },
                rtt_ms: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::{EmulatorChange, EmulatorCounts};
    use crate::result::{DirectionResult, IntervalStream, Summary};

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

    #[test]
    fn an_emulator_that_was_not_on_time_is_named_with_the_rate_it_carried() {
        let spec = crate::config::TestSpec::default();
        let mut r = crate::assemble::provisional(&spec, crate::assemble::RunContext::example("h", 0.0));
        r.directions = vec![DirectionResult {
            flow: crate::config::Flow::ClientToServer,
            summary: Summary {
                throughput_bps: 4.2e9,
                ..Default::default()
            },
            intervals: vec![],
            stalls: vec![],
            limits: vec![],
        }];
        let report = |to_server_p99, to_client_p99| EmulatorReport {
            name: "rec".into(),
            client_host: "a".into(),
            to_server: EmulatorCounts {
                late_p99_us: to_server_p99,
                ..Default::default()
            },
            to_client: EmulatorCounts {
                late_p99_us: to_client_p99,
                ..Default::default()
            },
            changes: vec![],
            settings: None,
        };
        // The data's direction late: one line, with the rate it carried.
        let mut late = r.clone();
        attach(&mut late, report(Some(2_500.0), None));
        let lines: Vec<&String> = late
            .warnings
            .iter()
            .filter(|w| w.starts_with("emulator"))
            .collect();
        assert_eq!(lines.len(), 1, "{:?}", late.warnings);
        assert!(
            lines[0].starts_with(
                "emulator rec: client->server carried 4.20 Gbit/s but left packets late (p99 2.50 ms"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with("set its --rate below 4.20 Gbit/s"),
            "{}",
            lines[0]
        );
        // On time, or late only the way the acknowledgements went: nothing to say.
        for (a, b) in [
            (Some(120.0), Some(90.0)),
            (None, None),
            (Some(400.0), Some(9_000.0)),
        ] {
            let mut fine = r.clone();
            attach(&mut fine, report(a, b));
            assert!(
                !fine.warnings.iter().any(|w| w.starts_with("emulator")),
                "{:?}",
                fine.warnings
            );
        }
    }

    fn interval(k: u32, bytes: u64, rtt_us: u32) -> IntervalResult {
        IntervalResult {
            index: k,
            start_s: f64::from(k) * 0.5,
            end_s: f64::from(k + 1) * 0.5,
            bytes,
            throughput_bps: bytes as f64 * 16.0,
            omitted: false,
            streams: vec![IntervalStream {
                id: 0,
                bytes,
                throughput_bps: bytes as f64 * 16.0,
                rtt_us: Some(rtt_us),
                cwnd_bytes: None,
                retransmits: None,
                datagrams_sent: None,
                datagrams_lost: None,
                frames: None,
                jitter_ms: None,
                transit: None,
                reads: None,
                transit_bins: None,
                frames_heard: None,
            }],
            probe_rtt: None,
        }
    }

    #[test]
    fn a_test_is_cut_where_the_path_changed_and_each_part_has_its_own_figures() {
        let spec = crate::config::TestSpec::default();
        let mut r = crate::assemble::provisional(&spec, crate::assemble::RunContext::example("h", 0.0));
        // 2 s at 12.5 MB/s and 20 ms, then 2 s at 3.125 MB/s and 80 ms; the step at 2.1 s falls
        // inside the interval 2.0-2.5, which belongs to neither part.
        r.intervals = (0..8)
            .map(|k| {
                if k < 4 {
                    interval(k, 6_250_000, 20_000)
                } else {
                    interval(k, 1_562_500, 80_000)
                }
            })
            .collect();
        assert_eq!(segments(&r).len(), 1, "no emulator, one part");
        r.emulator = Some(EmulatorReport {
            name: "x".into(),
            client_host: "a".into(),
            to_server: EmulatorCounts::default(),
            to_client: EmulatorCounts::default(),
            changes: vec![
                EmulatorChange {
                    at_s: 1.0,
                    change: "down=300ms".into(),
                    direction: "both".into(),
                    down_s: Some(0.3),
                },
                EmulatorChange {
                    at_s: 2.1,
                    change: "rtt=80ms rate=25M".into(),
                    direction: "both".into(),
                    down_s: None,
                },
            ],
            settings: None,
        });
        let s = segments(&r);
        assert_eq!(s.len(), 2, "an outage does not cut: {s:?}");
        assert_eq!(
            (s[0].from_s, s[0].to_s, s[1].from_s, s[1].to_s),
            (0.0, 2.1, 2.1, 4.0)
        );
        assert_eq!(s[0].throughput_bps, 100e6);
        assert_eq!(s[1].throughput_bps, 25e6);
        assert_eq!((s[0].rtt_ms, s[1].rtt_ms), (Some(20.0), Some(80.0)));
    }
}
