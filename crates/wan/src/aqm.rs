//! Active queue management for the emulated bottleneck: PIE (RFC 8033, `pie`: a drop probability
//! applied on arrival) and CoDel (RFC 8289), deciding at each packet's
//! dequeue whether the queue has stood above its target delay for a whole interval, and then dropping
//! (or, for an ECN-capable packet, marking) at the rate its control law sets. Pure: time is passed in.
//!
//! The link's queue is one FIFO at a fixed rate, so a packet's dequeue time is known when it arrives
//! (when everything ahead of it has been serialized), and packets reach the head in arrival order: the
//! link asks CoDel about each packet, in order, at that dequeue time, which is when RFC 8289's dequeue
//! would ask. A dropped packet takes no serialization time, so the next one reaches the head at the
//! same instant and is asked at once, as the RFC's dequeue loop does. One approximation: the RFC's
//! "less than one MTU queued" exemption is judged from the bytes ahead of the packet when it arrived.

use std::time::Duration;

pub mod pie;

/// Which queue discipline the bottleneck runs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Aqm {
    /// Tail drop only: a packet that does not fit the queue is dropped.
    #[default]
    TailDrop,
    /// CoDel over the tail-drop queue.
    Codel {
        /// The acceptable standing queue delay (RFC 8289: 5 ms).
        #[serde(with = "landspeed_core::units::secs")]
        target: Duration,
        /// The window a standing queue must persist for before dropping starts (RFC 8289: 100 ms).
        #[serde(with = "landspeed_core::units::secs")]
        interval: Duration,
    },
    /// PIE over the tail-drop queue.
    Pie {
        /// The queueing delay PIE steers toward (RFC 8033: 15 ms).
        #[serde(with = "landspeed_core::units::secs")]
        target: Duration,
    },
    /// FQ-CoDel (RFC 8290): a queue per flow, CoDel on each (`sched::fq_codel`).
    FqCodel {
        /// CoDel's target on each queue (5 ms).
        #[serde(with = "landspeed_core::units::secs")]
        target: Duration,
        /// CoDel's interval (100 ms).
        #[serde(with = "landspeed_core::units::secs")]
        interval: Duration,
    },
    /// DualPI2 (RFC 9332): the L4S dual queue (`sched::dualpi2`).
    #[serde(rename = "dualpi2")]
    DualPi2 {
        /// The classic queue's target delay (15 ms).
        #[serde(with = "landspeed_core::units::secs")]
        target: Duration,
        /// The L4S queue's marking step (1 ms).
        #[serde(with = "landspeed_core::units::secs")]
        step: Duration,
        /// Every ECN-capable packet is L4S, ECT(0) too (Linux's `any_ect`), not only ECT(1) and CE.
        #[serde(default)]
        any_ect: bool,
    },
    /// Strict priority over three DSCP classes: EF, VA, CS5-CS7 first, CS1 and LE last
    /// (`sched::prio`).
    Prio,
}

impl Aqm {
    /// RFC 8289's CoDel: 5 ms target, 100 ms interval.
    pub const CODEL: Aqm = Aqm::Codel {
        target: Duration::from_millis(5),
        interval: Duration::from_millis(100),
    };

    /// RFC 8033's PIE: 15 ms target.
    pub const PIE: Aqm = Aqm::Pie {
        target: Duration::from_millis(15),
    };

    /// RFC 8290's FQ-CoDel: CoDel's 5 ms target and 100 ms interval on each flow's queue.
    pub const FQ_CODEL: Aqm = Aqm::FqCodel {
        target: Duration::from_millis(5),
        interval: Duration::from_millis(100),
    };

    /// RFC 9332's DualPI2: 15 ms classic target, 1 ms L4S step, ECT(1) and CE as L4S.
    pub const DUALPI2: Aqm = Aqm::DualPi2 {
        target: Duration::from_millis(15),
        step: Duration::from_millis(1),
        any_ect: false,
    };

    /// `tail-drop`, `codel`, `codel:TARGET:INTERVAL` (e.g. `codel:5ms:100ms`), `pie`, `pie:TARGET`,
    /// `fq-codel`, `fq-codel:TARGET:INTERVAL`, `dualpi2`, `dualpi2:any-ect` or `prio`.
    pub fn parse(s: &str) -> Result<Aqm, String> {
        let mut parts = s.trim().split(':');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("tail-drop" | "taildrop" | "none"), None, None, None) => Ok(Aqm::TailDrop),
            (Some("codel"), None, None, None) => Ok(Aqm::CODEL),
            (Some("pie"), None, None, None) => Ok(Aqm::PIE),
            (Some("fq-codel" | "fq_codel"), None, None, None) => Ok(Aqm::FQ_CODEL),
            (Some("dualpi2"), None, None, None) => Ok(Aqm::DUALPI2),
            (Some("prio"), None, None, None) => Ok(Aqm::Prio),
            (Some("dualpi2"), Some("any-ect" | "any_ect"), None, None) => Ok(Aqm::DualPi2 {
                target: Duration::from_millis(15),
                step: Duration::from_millis(1),
                any_ect: true,
            }),
            (Some("pie"), Some(t), None, None) => match landspeed_core::units::parse_duration(t) {
                Ok(target) if !target.is_zero() => Ok(Aqm::Pie { target }),
                _ => Err(format!("aqm '{s}': the target must be a duration above 0 (e.g. pie:15ms)")),
            },
            (Some(name @ ("codel" | "fq-codel" | "fq_codel")), Some(t), Some(i), None) => {
                let d =
                    |v: &str| landspeed_core::units::parse_duration(v).map_err(|e| format!("aqm '{s}': {e}"));
                let (target, interval) = (d(t)?, d(i)?);
                if target.is_zero() || interval <= target {
                    return Err(format!(
                        "aqm '{s}': the target must be above 0 and below the interval"
                    ));
                }
                Ok(match name {
                    "codel" => Aqm::Codel { target, interval },
                    _ => Aqm::FqCodel { target, interval },
                })
            }
            _ => Err(format!(
                "aqm '{s}' is not one of tail-drop, codel, codel:TARGET:INTERVAL (e.g. codel:5ms:100ms), pie, pie:TARGET, fq-codel, fq-codel:TARGET:INTERVAL, dualpi2, dualpi2:any-ect, prio"
            )),
        }
    }

    /// The discipline as [`Aqm::parse`] reads it back (`wan change aqm=` with it restores it).
    pub fn spec(&self) -> String {
        let us = |d: Duration| format!("{}us", d.as_micros());
        match *self {
            Aqm::TailDrop => "tail-drop".into(),
            Aqm::Codel { target, interval } => format!("codel:{}:{}", us(target), us(interval)),
            Aqm::Pie { target } => format!("pie:{}", us(target)),
            Aqm::FqCodel { target, interval } => format!("fq-codel:{}:{}", us(target), us(interval)),
            Aqm::DualPi2 { any_ect: false, .. } => "dualpi2".into(),
            Aqm::DualPi2 { any_ect: true, .. } => "dualpi2:any-ect".into(),
            Aqm::Prio => "prio".into(),
        }
    }

    /// The per-packet scheduler this discipline needs, if it chooses the next packet (FQ-CoDel,
    /// DualPI2) rather than judging a FIFO's.
    pub fn scheduler(&self) -> Option<crate::sched::Scheduler> {
        use crate::sched::{dualpi2::DualPi2, fq_codel::FqCodel, Scheduler};
        match *self {
            Aqm::FqCodel { target, interval } => Some(Scheduler::FqCodel(FqCodel::new(target, interval))),
            Aqm::DualPi2 {
                target,
                step,
                any_ect,
            } => Some(Scheduler::DualPi2(DualPi2::new(target, step, any_ect))),
            Aqm::Prio => Some(Scheduler::Prio(crate::sched::prio::Prio::new())),
            _ => None,
        }
    }

    /// The state machine this discipline needs on a FIFO, if any.
    pub fn controller(&self) -> Option<Controller> {
        match *self {
            Aqm::TailDrop | Aqm::FqCodel { .. } | Aqm::DualPi2 { .. } | Aqm::Prio => None,
            Aqm::Codel { target, interval } => Some(Controller::Codel(Codel::new(target, interval))),
            Aqm::Pie { target } => Some(Controller::Pie(pie::Pie::new(target))),
        }
    }
}

/// A running discipline.
#[derive(Debug, Clone)]
pub enum Controller {
    /// CoDel, asked at each packet's dequeue.
    Codel(Codel),
    /// PIE, asked at each packet's arrival.
    Pie(pie::Pie),
}

impl Controller {
    /// Whether to signal the packet arriving at `now_ns` that reaches the head at `head_ns` (the
    /// queue ahead of it drains until then; `bytes_ahead` queued): None to send it, Some(mark_ok)
    /// to drop it, or mark it when it is ECN-capable and `mark_ok`. `draw` is uniform in [0, 1).
    pub fn signal(&mut self, now_ns: u64, head_ns: u64, bytes_ahead: u64, draw: f64) -> Option<bool> {
        match self {
            Controller::Codel(c) => {
                let sojourn = head_ns.saturating_sub(now_ns);
                (c.dequeue(head_ns, sojourn, bytes_ahead) == Verdict::Signal).then_some(true)
            }
            Controller::Pie(p) => match p.enqueue(now_ns, head_ns, bytes_ahead, draw) {
                pie::PieVerdict::Pass => None,
                pie::PieVerdict::Signal { mark_ok } => Some(mark_ok),
            },
        }
    }
}

/// What CoDel does with the packet at the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it.
    Pass,
    /// Drop it, or mark it Congestion Experienced if it is ECN-capable.
    Signal,
}

/// The largest packet, for the "less than one MTU queued" exemption.
const MAX_PACKET: u64 = 1500;

/// RFC 8289's CoDel state, in nanoseconds.
#[derive(Debug, Clone)]
pub struct Codel {
    target_ns: u64,
    interval_ns: u64,
    /// When the sojourn time will have been above target for an interval (0: it is not above).
    first_above_ns: u64,
    /// When the next signal is due while dropping.
    drop_next_ns: u64,
    /// Signals since dropping started (the control law's count).
    count: u32,
    /// `count` when dropping last ended.
    last_count: u32,
    dropping: bool,
}

impl Codel {
    /// CoDel with this target and interval.
    pub fn new(target: Duration, interval: Duration) -> Codel {
        Codel {
            target_ns: target.as_nanos() as u64,
            interval_ns: interval.as_nanos() as u64,
            first_above_ns: 0,
            drop_next_ns: 0,
            count: 0,
            last_count: 0,
            dropping: false,
        }
    }

    /// The control law: the next signal an interval over the square root of the count later.
    fn next_after(&self, t_ns: u64) -> u64 {
        t_ns + (self.interval_ns as f64 / f64::from(self.count.max(1)).sqrt()) as u64
    }

    /// Whether the queue has stood above target for an interval, as of this packet's dequeue.
    fn ok_to_signal(&mut self, now_ns: u64, sojourn_ns: u64, bytes_ahead: u64) -> bool {
        if sojourn_ns < self.target_ns || bytes_ahead <= MAX_PACKET {
            self.first_above_ns = 0;
            return false;
        }
        if self.first_above_ns == 0 {
            self.first_above_ns = now_ns + self.interval_ns;
            return false;
        }
        now_ns >= self.first_above_ns
    }

    /// The queue ran empty: the standing queue is gone, and dropping ends (RFC 8289's dequeue of
    /// an empty queue).
    pub fn idle(&mut self) {
        self.first_above_ns = 0;
        self.dropping = false;
    }

    /// The verdict on the packet at the head at `now_ns` (its dequeue), which waited `sojourn_ns` and
    /// had `bytes_ahead` queued in front of it when it arrived.
    pub fn dequeue(&mut self, now_ns: u64, sojourn_ns: u64, bytes_ahead: u64) -> Verdict {
        let ok = self.ok_to_signal(now_ns, sojourn_ns, bytes_ahead);
        if self.dropping {
            if !ok {
                self.dropping = false;
                return Verdict::Pass;
            }
            if now_ns >= self.drop_next_ns {
                self.count = self.count.saturating_add(1);
                self.drop_next_ns = self.next_after(self.drop_next_ns);
                return Verdict::Signal;
            }
            return Verdict::Pass;
        }
        if !ok {
            return Verdict::Pass;
        }
        self.dropping = true;
        // Dropping resumed soon after it ended: start from the rate it had reached.
        let delta = self.count.saturating_sub(self.last_count);
        let recent = now_ns.saturating_sub(self.drop_next_ns) < 16 * self.interval_ns;
        self.count = if delta > 1 && recent { delta } else { 1 };
        self.last_count = self.count;
        self.drop_next_ns = self.next_after(now_ns);
        Verdict::Signal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A queue standing at `sojourn` for `for_ms`, one packet every `every_us`: the signal times.
    fn standing(c: &mut Codel, sojourn: u64, for_ms: u64, every_us: u64) -> Vec<u64> {
        let mut out = vec![];
        let mut t = 0;
        while t < for_ms * MS {
            if c.dequeue(t, sojourn, 100_000) == Verdict::Signal {
                out.push(t);
            }
            t += every_us * 1000;
        }
        out
    }

    #[test]
    fn a_queue_below_target_is_never_signalled() {
        let mut c = Codel::new(Duration::from_millis(5), Duration::from_millis(100));
        assert!(standing(&mut c, 4 * MS, 2000, 100).is_empty());
    }

    #[test]
    fn a_standing_queue_is_signalled_after_one_interval_then_at_the_control_laws_rate() {
        let mut c = Codel::new(Duration::from_millis(5), Duration::from_millis(100));
        let s = standing(&mut c, 50 * MS, 1000, 100);
        // The first packet above target starts the clock; the first signal comes an interval later.
        assert_eq!(s[0], 100 * MS);
        // Then after interval/sqrt(1), interval/sqrt(2), ...: 100, 70.7, 57.7, 50 ms apart (each at
        // the first packet due, packets 0.1 ms apart).
        let gaps: Vec<u64> = s.windows(2).map(|w| (w[1] - w[0]) / 100_000).collect();
        assert_eq!(&gaps[..4], &[1000, 708, 577, 500], "{gaps:?} (in 0.1 ms)");
    }

    #[test]
    fn dropping_ends_when_the_queue_drains_and_resumes_from_the_rate_it_had() {
        let mut c = Codel::new(Duration::from_millis(5), Duration::from_millis(100));
        let first = standing(&mut c, 50 * MS, 1000, 100);
        assert!(first.len() > 4);
        let reached = c.count;
        // The queue drains: no signal, and the state leaves dropping.
        assert_eq!(c.dequeue(1001 * MS, MS, 100_000), Verdict::Pass);
        assert!(!c.dropping);
        // It stands again soon after: an interval to confirm, then the count restarts near where it was.
        let t0 = 1010 * MS;
        assert_eq!(c.dequeue(t0, 50 * MS, 100_000), Verdict::Pass);
        assert_eq!(c.dequeue(t0 + 100 * MS, 50 * MS, 100_000), Verdict::Signal);
        assert!(c.count > 1 && c.count <= reached, "{} of {reached}", c.count);
    }

    #[test]
    fn less_than_a_packet_queued_is_never_signalled() {
        let mut c = Codel::new(Duration::from_millis(5), Duration::from_millis(100));
        for t in 0..3000 {
            assert_eq!(c.dequeue(t * MS, 50 * MS, 1200), Verdict::Pass);
        }
    }

    #[test]
    fn the_discipline_is_parsed_with_rfc_defaults_and_checked() {
        assert_eq!(Aqm::parse("codel"), Ok(Aqm::CODEL));
        assert_eq!(Aqm::parse("tail-drop"), Ok(Aqm::TailDrop));
        assert_eq!(
            Aqm::parse("codel:2ms:50ms"),
            Ok(Aqm::Codel {
                target: Duration::from_millis(2),
                interval: Duration::from_millis(50)
            })
        );
        assert!(Aqm::parse("codel:50ms:2ms").is_err());
        assert!(Aqm::parse("red").unwrap_err().contains("tail-drop, codel"));
        assert_eq!(Aqm::parse("pie"), Ok(Aqm::PIE));
        assert!(Aqm::parse("pie:0ms").is_err());
        assert_eq!(Aqm::parse("fq-codel"), Ok(Aqm::FQ_CODEL));
        assert!(matches!(Aqm::parse("fq_codel:2ms:50ms"), Ok(Aqm::FqCodel { .. })));
        assert_eq!(Aqm::parse("dualpi2"), Ok(Aqm::DUALPI2));
        assert!(matches!(
            Aqm::parse("dualpi2:any-ect"),
            Ok(Aqm::DualPi2 { any_ect: true, .. })
        ));
        assert!(Aqm::parse("dualpi2:x").is_err());
    }

    #[test]
    fn each_discipline_s_spec_reads_back_as_itself() {
        for s in [
            "tail-drop",
            "codel",
            "codel:2ms:50ms",
            "pie",
            "pie:7.5ms",
            "fq-codel",
            "fq-codel:1ms:20ms",
            "dualpi2",
            "dualpi2:any-ect",
            "prio",
        ] {
            let a = Aqm::parse(s).unwrap();
            assert_eq!(Aqm::parse(&a.spec()), Ok(a), "{s} -> {}", a.spec());
        }
    }
}
