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

/// The key an address is counted under.
pub fn bucket(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

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
