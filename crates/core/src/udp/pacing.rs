//! The sender's schedule: datagram `k` of a stream is due at `k × size × 8 / rate` after the start, so
//! the rate is exact over any interval whatever the timer does; a sender that fell behind may catch up
//! with at most `burst` datagrams back to back, never more.

/// Pacing state of one stream. Times are nanoseconds on the caller's clock.
#[derive(Debug, Clone)]
pub struct Pacer {
    start_ns: u64,
    ns_per_datagram: f64,
    burst: u32,
    sent: u64,
}

/// What the sender should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Send this many datagrams now (1..=burst).
    Send(u32),
    /// Nothing is due before this time.
    WaitUntil(u64),
}

impl Pacer {
    /// `rate_bps` counts the UDP payload (what iperf3 counts); `size` is the datagram payload size.
    pub fn new(start_ns: u64, rate_bps: f64, size: usize, burst: u32) -> Pacer {
        Pacer {
            start_ns,
            ns_per_datagram: size as f64 * 8.0 / rate_bps * 1e9,
            burst: burst.max(1),
            sent: 0,
        }
    }

    fn due(&self, k: u64) -> u64 {
        self.start_ns + (k as f64 * self.ns_per_datagram) as u64
    }

    /// How many datagrams to send at `now_ns`.
    pub fn poll(&self, now_ns: u64) -> Pace {
        let next = self.due(self.sent);
        if next > now_ns {
            return Pace::WaitUntil(next);
        }
        let behind = ((now_ns - self.start_ns) as f64 / self.ns_per_datagram) as u64 + 1 - self.sent;
        Pace::Send(behind.clamp(1, u64::from(self.burst)) as u32)
    }

    /// Like `poll`, but waits until `batch` datagrams (or the `remaining` ones) are due, so they can
    /// leave in one segmentation-offload send; still never more than `burst` at once.
    pub fn poll_batch(&self, now_ns: u64, batch: u32, remaining: Option<u64>) -> Pace {
        let b = u64::from(batch.clamp(1, self.burst))
            .min(remaining.unwrap_or(u64::MAX))
            .max(1);
        let last = self.due(self.sent + b - 1);
        if last > now_ns {
            return Pace::WaitUntil(last);
        }
        self.poll(now_ns)
    }

    /// Records `n` datagrams as sent (or given up on after a send error, so the schedule holds).
    pub fn sent(&mut self, n: u32) {
        self.sent += u64::from(n);
    }

    /// Datagrams sent so far.
    pub fn count(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_time_sender_sends_one_at_a_time_at_the_rate() {
        // 1250-byte datagrams at 1 Gbit/s: one every 10 µs.
        let mut p = Pacer::new(1_000, 1e9, 1250, 8);
        assert_eq!(p.poll(1_000), Pace::Send(1));
        p.sent(1);
        assert_eq!(p.poll(1_000), Pace::WaitUntil(11_000));
        assert_eq!(p.poll(11_000), Pace::Send(1));
    }

    #[test]
    fn a_late_sender_catches_up_in_bursts_no_larger_than_allowed() {
        let mut p = Pacer::new(0, 1e9, 1250, 4);
        // 100 µs late: 11 datagrams are due, but at most 4 go back to back.
        assert_eq!(p.poll(100_000), Pace::Send(4));
        p.sent(4);
        assert_eq!(p.poll(100_000), Pace::Send(4));
        p.sent(4);
        assert_eq!(p.poll(100_000), Pace::Send(3));
        p.sent(3);
        assert_eq!(p.poll(100_000), Pace::WaitUntil(110_000));
    }

    #[test]
    fn batches_wait_for_the_whole_batch_and_respect_the_burst() {
        let mut p = Pacer::new(0, 1e9, 1250, 8);
        // Datagrams every 10 µs: a batch of 4 is due at 30 µs.
        assert_eq!(p.poll_batch(0, 4, None), Pace::WaitUntil(30_000));
        assert_eq!(p.poll_batch(30_000, 4, None), Pace::Send(4));
        p.sent(4);
        // Only 2 remain in the budget: they go as soon as both are due.
        assert_eq!(p.poll_batch(40_000, 4, Some(2)), Pace::WaitUntil(50_000));
        // A batch larger than the burst is cut to the burst.
        assert_eq!(p.poll_batch(1_000_000, 100, None), Pace::Send(8));
    }

    #[test]
    fn the_long_run_rate_is_exact() {
        // Poll at irregular times for 1 s of virtual time: what was sent is the rate to one datagram.
        let mut p = Pacer::new(0, 100e6, 1000, 16);
        let mut t = 0u64;
        let mut step = 7_919u64;
        while t < 1_000_000_000 {
            if let Pace::Send(n) = p.poll(t) {
                p.sent(n);
            }
            step = (step * 31 + 17) % 50_000 + 1;
            t += step;
        }
        let bits = p.count() as f64 * 1000.0 * 8.0;
        assert!((bits - 100e6).abs() <= 16.0 * 8000.0, "{bits}");
    }
}
