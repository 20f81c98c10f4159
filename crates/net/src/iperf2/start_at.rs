//! iperf 2's `--txstart-time` as a server sees it. Such a client connects, sends its header at once
//! (flagged `EPOCH_START`, the start time's words holding the scheduled start), then sends nothing
//! until that wall-clock time: a server that started its clock at the header would count the wait
//! as test time and report a rate too low (landspeed's did: 3 s for a 1 s test). So the test's
//! clock starts at the scheduled start, as iperf 2.1.8's server's does: the server waits for it
//! before it runs the engine (TCP) or counts the datagrams from it (UDP). The wait holds a test
//! slot, so it counts against the server's longest test; a start iperf 2.1.8 itself would not honour
//! (over an hour away) is ignored, as it ignores it.

use landspeed_core::config::{EndCondition, Test};
use landspeed_iperf2::ack::WireTime;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far from now iperf 2.1.8's server honours a scheduled start (its MAXDIFFTXSTART, 3600 s,
/// plus the second it allows).
const HONOURED: f64 = 3601.0;

/// The scheduled start a client asked for (`epoch`: `ClientHeader::epoch_start` over TCP,
/// `landspeed_iperf2::udp::epoch_start` in a datagram), Unix seconds, when it is one this server
/// honours at `now_unix_s`.
pub(crate) fn scheduled_s(epoch: Option<WireTime>, now_unix_s: f64) -> Option<f64> {
    let at = epoch?;
    let at_s = f64::from(at.secs) + f64::from(at.micros.min(999_999)) / 1e6;
    ((at_s - now_unix_s).abs() <= HONOURED).then_some(at_s)
}

/// How long `test` waits for its scheduled start at `now_unix_s`: zero when it has none or it has
/// passed; refused (the reason) when the wait and the test together run past `max_duration_s`.
pub(super) fn wait(
    epoch: Option<WireTime>,
    test: &Test,
    max_duration_s: Option<f64>,
    now_unix_s: f64,
) -> Result<Duration, String> {
    let Some(at_s) = scheduled_s(epoch, now_unix_s) else {
        return Ok(Duration::ZERO);
    };
    let wait_s = (at_s - now_unix_s).max(0.0);
    let length_s = match test.spec().end {
        EndCondition::Time(t) => t.as_secs_f64(),
        _ => 0.0,
    };
    match max_duration_s {
        Some(max) if wait_s + length_s > max => Err(format!(
            "its start is scheduled {wait_s:.1} s from now (--txstart-time): that wait and its {length_s} s \
             test exceed the server's longest test ({max} s)"
        )),
        _ => Ok(Duration::from_secs_f64(wait_s)),
    }
}

/// Waits `wait` (in steps of at most 100 ms); false when the server began shutting down first.
pub(super) fn sleep(wait: Duration, shutdown: &AtomicBool) -> bool {
    let until = std::time::Instant::now() + wait;
    loop {
        if shutdown.load(Relaxed) {
            return false;
        }
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Now, Unix seconds.
pub(super) fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::config::TestSpec;
    use landspeed_iperf2::ClientHeader;

    /// A TCP client's header scheduled at `at_s` and a half, read back as the server reads it.
    fn header(at_s: Option<u32>) -> Option<WireTime> {
        let h = ClientHeader::for_tcp(&TestSpec::default(), 5001).unwrap();
        let h = match at_s {
            Some(secs) => h.scheduled(WireTime {
                secs,
                micros: 500_000,
            }),
            None => h,
        };
        ClientHeader::parse(&h.encode(), 0).unwrap().0.epoch_start()
    }

    fn test(secs: u64) -> Test {
        TestSpec {
            end: EndCondition::Time(Duration::from_secs(secs)),
            ..TestSpec::default()
        }
        .validated()
        .unwrap()
    }

    #[test]
    fn a_start_ahead_is_waited_for_and_one_past_is_not() {
        let now = 1_800_000_000.0;
        let w = wait(header(Some(1_800_000_002)), &test(10), Some(300.0), now).unwrap();
        assert_eq!(w, Duration::from_millis(2500));
        assert_eq!(
            wait(header(Some(1_799_999_990)), &test(10), Some(300.0), now),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            wait(header(None), &test(10), Some(300.0), now),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            scheduled_s(header(Some(1_799_999_990)), now),
            Some(1_799_999_990.5)
        );
    }

    #[test]
    fn the_wait_counts_against_the_longest_test_and_an_hour_away_is_ignored() {
        let now = 1_800_000_000.0;
        let e = wait(header(Some(1_800_000_295)), &test(10), Some(300.0), now).unwrap_err();
        assert!(
            e.contains("295.5 s from now") && e.contains("longest test (300 s)"),
            "{e}"
        );
        assert!(wait(header(Some(1_800_000_280)), &test(10), Some(300.0), now).is_ok());
        assert!(wait(header(Some(1_800_000_295)), &test(10), None, now).is_ok());
        // Beyond iperf 2.1.8's hour: no wait, no schedule.
        assert_eq!(
            wait(header(Some(1_800_005_000)), &test(10), Some(300.0), now),
            Ok(Duration::ZERO)
        );
        assert_eq!(scheduled_s(header(Some(1_800_005_000)), now), None);
    }

    #[test]
    fn a_server_shutting_down_stops_waiting() {
        let stop = AtomicBool::new(true);
        let t = std::time::Instant::now();
        assert!(!sleep(Duration::from_secs(60), &stop));
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(sleep(Duration::from_millis(1), &AtomicBool::new(false)));
    }
}
