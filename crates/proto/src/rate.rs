//! The per-address limit on new tests (`serve --max-tests-per-minute`): a sliding one-minute window of
//! test starts per client. IPv6 clients are counted per /64, since one host commonly holds a whole /64
//! and could otherwise step around the limit. Time comes from the caller, so the limiter is pure and its
//! tests need no clock; memory stays bounded however many addresses knock.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Addresses tracked at most; past this, idle ones are forgotten first, then the oldest.
pub const MAX_TRACKED: usize = 65_536;

/// New tests per client address in a sliding window (`--max-tests-per-minute`).
#[derive(Debug)]
pub struct PerAddressRate {
    per_window: u32,
    window: Duration,
    starts: HashMap<IpAddr, VecDeque<Instant>>,
}

pub use landspeed_core::address::bucket;

impl PerAddressRate {
    /// At most `per_minute` new tests per address in any 60 s.
    pub fn per_minute(per_minute: u32) -> Self {
        Self::new(per_minute, Duration::from_secs(60))
    }

    /// At most `per_window` new tests per address in any `window`.
    pub fn new(per_window: u32, window: Duration) -> Self {
        PerAddressRate {
            per_window: per_window.max(1),
            window,
            starts: HashMap::new(),
        }
    }

    /// Records a new test from `ip` at `now`, or says how long until one is allowed.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        if self.starts.len() >= MAX_TRACKED {
            self.forget_idle(now);
        }
        let q = self.starts.entry(bucket(ip)).or_default();
        while q.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
            q.pop_front();
        }
        if q.len() >= self.per_window as usize {
            let oldest = *q.front().expect("full queue has a front");
            return Err(self.window.saturating_sub(now.duration_since(oldest)));
        }
        q.push_back(now);
        Ok(())
    }

    fn forget_idle(&mut self, now: Instant) {
        let w = self.window;
        self.starts
            .retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < w));
        while self.starts.len() >= MAX_TRACKED {
            let Some(k) = self.starts.keys().next().copied() else {
                break;
            };
            self.starts.remove(&k);
        }
    }

    /// How many addresses are tracked now.
    pub fn tracked(&self) -> usize {
        self.starts.len()
    }
}

/// Places held at once (tests running, connections still proving themselves), at most `total` in all
/// and `each` per address (IPv6 per /64). Memory is one entry per address holding a place, so it is
/// bounded by `total`.
#[derive(Debug)]
pub struct Occupancy {
    total: usize,
    each: usize,
    held: usize,
    per: HashMap<IpAddr, usize>,
}

/// Why a place was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every place is held.
    All(usize),
    /// The address holds as many as one address may.
    Address(usize),
}

impl Occupancy {
    /// At most `total` places, `each` per address (both at least 1).
    pub fn new(total: usize, each: usize) -> Self {
        Occupancy {
            total: total.max(1),
            each: each.max(1),
            held: 0,
            per: HashMap::new(),
        }
    }

    /// A place for `ip`, or why not.
    pub fn take(&mut self, ip: IpAddr) -> Result<(), Full> {
        if self.held >= self.total {
            return Err(Full::All(self.total));
        }
        let n = self.per.entry(bucket(ip)).or_default();
        if *n >= self.each {
            return Err(Full::Address(self.each));
        }
        *n += 1;
        self.held += 1;
        Ok(())
    }

    /// Gives back a place `ip` held.
    pub fn give_back(&mut self, ip: IpAddr) {
        let key = bucket(ip);
        if let Some(n) = self.per.get_mut(&key) {
            *n -= 1;
            self.held -= 1;
            if *n == 0 {
                self.per.remove(&key);
            }
        }
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_starts_per_address() {
        let t0 = Instant::now();
        let mut r = PerAddressRate::new(3, Duration::from_secs(60));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for i in 0..3 {
            assert!(r.admit(a, t0 + Duration::from_secs(i)).is_ok());
        }
        // The fourth within the minute waits until the first start is a minute old.
        assert_eq!(
            r.admit(a, t0 + Duration::from_secs(10)),
            Err(Duration::from_secs(50))
        );
        assert!(
            r.admit(b, t0 + Duration::from_secs(10)).is_ok(),
            "others are not affected"
        );
        assert!(r.admit(a, t0 + Duration::from_secs(60)).is_ok());
        assert!(r.admit(a, t0 + Duration::from_secs(60)).is_err());
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_v4_as_v4() {
        let t0 = Instant::now();
        let mut r = PerAddressRate::new(1, Duration::from_secs(60));
        assert!(r.admit("2001:db8:1:2::1".parse().unwrap(), t0).is_ok());
        assert!(r.admit("2001:db8:1:2::ffff".parse().unwrap(), t0).is_err());
        assert!(r.admit("2001:db8:1:3::1".parse().unwrap(), t0).is_ok());
        assert!(r.admit("192.0.2.9".parse().unwrap(), t0).is_ok());
        assert!(r.admit("::ffff:192.0.2.9".parse().unwrap(), t0).is_err());
    }

    #[test]
    fn places_are_capped_in_all_and_per_address() {
        let mut o = Occupancy::new(3, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        let b2: IpAddr = "2001:db8::2".parse().unwrap();
        assert_eq!(o.take(a), Ok(()));
        assert_eq!(o.take(a), Ok(()));
        assert_eq!(o.take(a), Err(Full::Address(2)));
        assert_eq!(o.take(b), Ok(()));
        // The same /64 is one address; and now every place is held.
        assert_eq!(o.take(b2), Err(Full::All(3)));
        o.give_back(a);
        assert_eq!(o.take(b2), Ok(()));
        assert_eq!(o.take(b), Err(Full::All(3)));
        o.give_back(b);
        o.give_back(b2);
        o.give_back(a);
        // Giving back what was never held changes nothing.
        o.give_back(a);
        assert_eq!(o.held(), 0);
        assert!(o.per.is_empty());
    }

    #[test]
    fn memory_is_bounded() {
        let t0 = Instant::now();
        let mut r = PerAddressRate::new(5, Duration::from_secs(1));
        for i in 0..(MAX_TRACKED as u32 + 1000) {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let _ = r.admit(ip, t0 + Duration::from_millis(u64::from(i) / 100));
        }
        assert!(r.tracked() <= MAX_TRACKED);
    }
}
