//! The HTTP/2 receive window the responsiveness server grants each connection, held near what the
//! connection carries in a round trip plus draft-09's 5 ms. A client that writes whatever flow
//! control lets it (goresponsiveness does) keeps its unsent upload in its own buffers, up to the
//! window: the window is what bounds the client's part of a self probe's wait. hyper's adaptive
//! window grew it from the round trip of its HTTP/2 pings, and a ping's answer waits behind the
//! client's buffered upload, so the window and the client's buffer grew together (1-2 s of upload
//! queued in the client, measured). Here the round trip is the kernel's (TCP's own estimate, which a
//! client's buffer does not lengthen) and the rate is the bytes the connection received over at least
//! one round trip: the window is that rate times 1.25 round trips plus 5 ms. A client held back by
//! the window (it sends a window a round trip) sees it grow by a factor of 1.25 + 5 ms / RTT each
//! round trip, so a window never holds a connection back for long; a client held by the path keeps
//! at most about a quarter of a round trip and 5 ms queued at its end. Sans-IO: time and the counts
//! come in, the window to grant comes out.

use std::time::{Duration, Instant};

/// The smallest window: one HTTP/2 frame of the default size (the protocol's own default window
/// is 64 KiB; a slow upload queues a window in its client, so the floor is kept small).
pub(crate) const FLOOR: u32 = 16 * 1024;
/// The largest: hyper's adaptive window's limit (16 MiB is 1.3 Gbit/s over a 100 ms path).
pub(crate) const CEILING: u32 = 16 << 20;
/// The shortest span a rate is measured over (a loopback round trip is microseconds).
const SPAN_MIN: Duration = Duration::from_millis(20);
/// The unsent data draft-09 lets an endpoint keep: 5 ms of the rate.
const BUDGET: Duration = super::super::backlog::BUDGET;

/// One connection's window.
#[derive(Debug)]
pub(crate) struct RecvWindow {
    /// The start of the current span: when, and the bytes received by then.
    span: Option<(Instant, u64)>,
    /// The window granted (or asked for last).
    window: u32,
    /// The window before the last one asked for (kept should the connection refuse it).
    previous: u32,
}

impl Default for RecvWindow {
    fn default() -> Self {
        RecvWindow {
            span: None,
            window: FLOOR,
            previous: FLOOR,
        }
    }
}

impl RecvWindow {
    /// The window granted now.
    #[cfg(test)]
    pub(crate) fn window(&self) -> u32 {
        self.window
    }

    /// The connection's window for HTTP/2's connection-level flow control: two streams' windows and a
    /// floor (a load's stream and its probes' requests share it).
    pub(crate) fn connection_window(&self) -> u32 {
        self.window.saturating_mul(2).saturating_add(4 * FLOOR)
    }

    /// Given the connection's bytes `received` so far and the kernel's round trip at `now`: the new
    /// window, when a span has passed and it moves by more than an eighth. It grows at once and
    /// shrinks by at most half a span (a pause in an upload does not shut it).
    pub(crate) fn next(&mut self, now: Instant, received: u64, rtt: Option<Duration>) -> Option<u32> {
        let rtt = rtt?;
        let Some((t, r)) = self.span else {
            self.span = Some((now, received));
            return None;
        };
        let elapsed = now.saturating_duration_since(t);
        if elapsed < rtt.max(SPAN_MIN) {
            return None;
        }
        self.span = Some((now, received));
        let rate_bytes_per_s = received.saturating_sub(r) as f64 / elapsed.as_secs_f64();
        let want = rate_bytes_per_s * (rtt.as_secs_f64() * 1.25 + BUDGET.as_secs_f64());
        let want = want.clamp(f64::from(FLOOR), f64::from(CEILING)) as u32;
        let next = want.max(self.window / 2);
        if next.abs_diff(self.window) <= self.window / 8 {
            return None;
        }
        self.previous = self.window;
        self.window = next;
        Some(next)
    }

    /// The window last asked for could not be set (HTTP/2 allows one settings change awaiting its
    /// acknowledgement at a time): the one before stands, and the next span asks again.
    pub(crate) fn refused(&mut self) {
        self.window = self.previous;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Feeds `rate` bytes a second for `spans` spans of `rtt`, returning the window after each.
    fn run(w: &mut RecvWindow, at: &mut (Instant, u64), rate: u64, rtt: Duration, spans: u32) -> Vec<u32> {
        (0..spans)
            .map(|_| {
                at.0 += rtt;
                at.1 += rate * rtt.as_micros() as u64 / 1_000_000;
                w.next(at.0, at.1, Some(rtt));
                w.window()
            })
            .collect()
    }

    #[test]
    fn a_path_limited_upload_gets_its_round_trip_and_a_quarter_plus_5_ms() {
        let mut w = RecvWindow::default();
        let mut at = (Instant::now(), 0);
        assert_eq!(w.next(at.0, 0, None), None, "no round trip yet: the floor stays");
        w.next(at.0, 0, Some(20 * MS));
        // 50 Mbit/s (6.25 MB/s) on a 20 ms path: 6.25 MB/s x 30 ms = 187 500 bytes.
        let windows = run(&mut w, &mut at, 6_250_000, 20 * MS, 4);
        assert_eq!(windows[0], 187_500);
        assert_eq!(w.connection_window(), 2 * 187_500 + 4 * FLOOR);
        // 3 Mbit/s (375 kB/s): 11 250 bytes, under the floor.
        run(&mut w, &mut at, 375_000, 20 * MS, 4);
        assert_eq!(w.window(), FLOOR);
    }

    #[test]
    fn a_window_limited_upload_grows_each_round_trip() {
        // A client that sends the whole window each round trip (100 ms path): the window grows by
        // 1.25 + 5/100 = 1.3 each round trip.
        let rtt = 100 * MS;
        let mut w = RecvWindow::default();
        let mut now = Instant::now();
        let mut received = 0u64;
        w.next(now, received, Some(rtt));
        let mut seen = vec![];
        for _ in 0..6 {
            now += rtt;
            received += u64::from(w.window());
            w.next(now, received, Some(rtt));
            seen.push(w.window());
        }
        let want: Vec<u32> = (1..=6)
            .map(|k| (f64::from(FLOOR) * 1.3f64.powi(k)) as u32)
            .collect();
        for (got, want) in seen.iter().zip(&want) {
            assert!(got.abs_diff(*want) <= 2 * 6, "{seen:?} against {want:?}");
        }
    }

    #[test]
    fn it_shrinks_by_half_at_most_and_not_for_small_moves() {
        let mut w = RecvWindow::default();
        let mut at = (Instant::now(), 0);
        w.next(at.0, 0, Some(20 * MS));
        run(&mut w, &mut at, 100_000_000, 20 * MS, 1);
        assert_eq!(w.window(), 3_000_000);
        // The upload stops: halves each span down to the floor.
        assert_eq!(
            run(&mut w, &mut at, 0, 20 * MS, 3),
            vec![1_500_000, 750_000, 375_000]
        );
        // A move of an eighth or less is not sent.
        let before = w.window();
        let rate = u64::from(before) * 1000 / 30 * 11 / 10;
        run(&mut w, &mut at, rate, 20 * MS, 1);
        assert_eq!(w.window(), before);
    }

    #[test]
    fn it_waits_a_span_of_at_least_20_ms_and_keeps_within_its_bounds() {
        let mut w = RecvWindow::default();
        let t0 = Instant::now();
        w.next(t0, 0, Some(Duration::from_micros(50)));
        assert_eq!(
            w.next(t0 + 10 * MS, 50_000_000, Some(Duration::from_micros(50))),
            None
        );
        // 5 GB/s over 20 ms x 5.06 ms = 25 MB: the ceiling.
        assert_eq!(
            w.next(t0 + 20 * MS, 100_000_000, Some(Duration::from_micros(50))),
            Some(CEILING)
        );
    }
}
