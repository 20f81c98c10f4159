//! How long a UDP receiver that has caught up polls its socket before it sleeps. Waking a sleeping
//! receiver costs the sender an inter-processor interrupt for every datagram it queues (a sixth of
//! a loopback sender's time at 50 Gbit/s on this VM: docs/benchmarks.md, bench/udp), so a receiver
//! whose datagrams come a few microseconds apart keeps polling instead; one whose datagrams come
//! further apart than [`MAX_SPIN_NS`] (a paced test) soon stops polling and costs nothing while it
//! waits. A receiver polls only where the CPUs have room for it ([`SpinBudget::for_threads`]): with
//! more streams than that, polling threads take the CPU their senders need (4 streams on 2 CPUs:
//! 0.79x without it, docs/benchmarks.md). Sans-IO: the receiver reports how long each wait lasted
//! and whether polling ended it.

/// The longest a receiver polls before it sleeps.
pub const MAX_SPIN_NS: u64 = 20_000;

/// The current polling budget, adapted to how far apart datagrams arrive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinBudget {
    budget_ns: u64,
    max_ns: u64,
}

impl SpinBudget {
    /// The budget of one of `threads` busy threads on this end (senders and receivers) on a host
    /// of `cpus` CPUs: polling up to [`MAX_SPIN_NS`] when they fill at most half the CPUs (the
    /// other half is for the peer's threads on loopback, or the kernel's receive work), never
    /// otherwise.
    pub fn for_threads(threads: usize, cpus: usize) -> SpinBudget {
        SpinBudget {
            budget_ns: 0,
            max_ns: if threads.saturating_mul(2) <= cpus {
                MAX_SPIN_NS
            } else {
                0
            },
        }
    }

    /// Nanoseconds to poll before sleeping (0: sleep at once).
    pub fn budget_ns(&self) -> u64 {
        self.budget_ns
    }

    /// A datagram arrived `waited_ns` after the receiver started waiting for it, whether polling or
    /// asleep: a gap polling would have covered sets the budget to twice it; a longer one halves
    /// the budget, so polling that does not pay fades away.
    pub fn arrived(&mut self, waited_ns: u64) {
        if waited_ns <= self.max_ns {
            self.budget_ns = self.budget_ns.max((2 * waited_ns).min(self.max_ns));
        } else {
            self.budget_ns /= 2;
        }
    }

    /// The receiver polled for its whole budget and then slept: polling is worth less than it
    /// cost, and the budget halves (a short gap after the sleep grows it again in [`Self::arrived`]).
    pub fn ran_out(&mut self) {
        self.budget_ns /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_close_together_keep_the_receiver_polling() {
        let mut s = SpinBudget::for_threads(1, 2);
        assert_eq!(s.budget_ns(), 0, "a new receiver sleeps");
        s.arrived(3_000);
        assert_eq!(s.budget_ns(), 6_000);
        s.arrived(0);
        assert_eq!(s.budget_ns(), 6_000, "data already there leaves the budget");
        s.arrived(15_000);
        assert_eq!(s.budget_ns(), MAX_SPIN_NS, "never past the most");
    }

    #[test]
    fn datagrams_far_apart_put_the_receiver_to_sleep() {
        let mut s = SpinBudget::for_threads(1, 2);
        s.arrived(10_000);
        assert_eq!(s.budget_ns(), MAX_SPIN_NS);
        // A paced test: 100 µs between datagrams, each wait polled out and then slept.
        for _ in 0..20 {
            s.ran_out();
            s.arrived(100_000);
        }
        assert_eq!(s.budget_ns(), 0, "polling faded away");
    }

    #[test]
    fn a_receiver_short_of_cpus_never_polls() {
        for (threads, cpus) in [(4, 2), (2, 2), (3, 4), (1, 1)] {
            let mut s = SpinBudget::for_threads(threads, cpus);
            s.arrived(1_000);
            assert_eq!(s.budget_ns(), 0, "{threads} threads on {cpus} CPUs");
        }
        let mut s = SpinBudget::for_threads(8, 16);
        s.arrived(1_000);
        assert_eq!(s.budget_ns(), 2_000);
    }
}
