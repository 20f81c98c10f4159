//! Fair admission of connections that have proved nothing yet (a control connection still in its
//! handshake, a QUIC connection before its first stream, an ndt7 request head, an HTTP connection of
//! the responsiveness test). Such a pool is small and cheap to fill, so a plain "first come" pool
//! lets a few addresses that reopen as fast as the server closes them keep everyone else out.
//!
//! Here every place is counted at two tiers of the client's address: the address itself (IPv4 /32,
//! IPv6 /64, the block one host holds) and its network (IPv4 /24, IPv6 /48, the block one site or
//! attacker commonly holds), each with a cap well below the pool. When the pool (or the newcomer's
//! network) is full, the newcomer may take the place of the oldest connection of the group that holds
//! the most (the network holding the most, then its address holding the most), but only when that
//! group would still hold more than the newcomer's own: places move from the largest holders to the
//! smallest, never back and forth between equals. So an attacker's whole /48 (or /24) holds at most
//! its network's share however fast it reopens, and a client from elsewhere always finds a place or
//! takes one from the attacker. The pool is pure: the caller keeps, with each place, whatever closes
//! its connection (`T`), and closes the one an admission hands back.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The address tier a client is counted under: IPv4 /32, IPv6 /64 (IPv4-mapped IPv6 as IPv4).
pub fn address_of(ip: IpAddr) -> IpAddr {
    super::rate::bucket(ip)
}

/// The network tier: IPv4 /24, IPv6 /48.
pub fn network_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 0))
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0))
        }
    }
}

/// The caps of a pool: places in all, per address, per network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Places in all.
    pub total: usize,
    /// Places one address (IPv4 /32, IPv6 /64) may hold.
    pub per_address: usize,
    /// Places one network (IPv4 /24, IPv6 /48) may hold.
    pub per_network: usize,
}

/// A place's handle, to give it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlaceId(u64);

/// Why a newcomer found no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address holds its share already.
    Address(usize),
    /// Its network holds its share, and no address there holds more than the newcomer's.
    Network(usize),
    /// Every place is held, and no group holds more than the newcomer's own.
    All(usize),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Address(n) => write!(f, "{n} from this address"),
            Refused::Network(n) => write!(f, "{n} from this network (/24 or /48)"),
            Refused::All(n) => write!(f, "{n} connections in all"),
        }
    }
}

/// A newcomer let in: its place, and the connection whose place it took (to be closed by the caller).
#[derive(Debug)]
pub struct Admitted<T> {
    /// The newcomer's place.
    pub id: PlaceId,
    /// What the caller keeps for the evicted connection, if one was.
    pub evicted: Option<T>,
}

struct Entry<T> {
    address: IpAddr,
    network: IpAddr,
    keep: T,
}

/// Places for connections still proving themselves, shared fairly by address and network.
pub struct Pool<T> {
    caps: Caps,
    next: u64,
    /// By age: a smaller id is older.
    entries: BTreeMap<PlaceId, Entry<T>>,
    addresses: HashMap<IpAddr, usize>,
    networks: HashMap<IpAddr, usize>,
}

impl<T> std::fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("caps", &self.caps)
            .field("held", &self.entries.len())
            .finish()
    }
}

impl<T> Pool<T> {
    /// An empty pool with `caps` (each at least 1; a tier's cap at most the one above it).
    pub fn new(caps: Caps) -> Pool<T> {
        let total = caps.total.max(1);
        let per_network = caps.per_network.clamp(1, total);
        Pool {
            caps: Caps {
                total,
                per_network,
                per_address: caps.per_address.clamp(1, per_network),
            },
            next: 0,
            entries: BTreeMap::new(),
            addresses: HashMap::new(),
            networks: HashMap::new(),
        }
    }

    /// The caps in force.
    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.entries.len()
    }

    /// Places `ip`'s address holds now.
    pub fn held_by(&self, ip: IpAddr) -> usize {
        count(&self.addresses, address_of(ip))
    }

    /// A place for a connection from `ip`, keeping `keep` with it; when the pool was full, the place
    /// taken from the largest holder's oldest connection comes back in `evicted`. Refused: why, and
    /// `keep` back.
    pub fn admit(&mut self, ip: IpAddr, keep: T) -> Result<Admitted<T>, (Refused, T)> {
        let (address, network) = (address_of(ip), network_of(ip));
        let mine = count(&self.addresses, address);
        if mine >= self.caps.per_address {
            return Err((Refused::Address(self.caps.per_address), keep));
        }
        let victim = if count(&self.networks, network) >= self.caps.per_network {
            match self.within(network, mine) {
                Some(v) => Some(v),
                None => return Err((Refused::Network(self.caps.per_network), keep)),
            }
        } else if self.entries.len() >= self.caps.total {
            match self.anywhere(network, mine) {
                Some(v) => Some(v),
                None => return Err((Refused::All(self.caps.total), keep)),
            }
        } else {
            None
        };
        let evicted = victim.and_then(|v| self.release(v));
        let id = PlaceId(self.next);
        self.next += 1;
        self.entries.insert(
            id,
            Entry {
                address,
                network,
                keep,
            },
        );
        *self.addresses.entry(address).or_default() += 1;
        *self.networks.entry(network).or_default() += 1;
        Ok(Admitted { id, evicted })
    }

    /// Gives a place back; what was kept with it, or None when it was already gone (evicted).
    pub fn release(&mut self, id: PlaceId) -> Option<T> {
        let e = self.entries.remove(&id)?;
        uncount(&mut self.addresses, e.address);
        uncount(&mut self.networks, e.network);
        Some(e.keep)
    }

    /// The place to take inside `network` for a newcomer whose address holds `mine`: the oldest of
    /// the address there holding the most, if it holds more than `mine + 1`.
    fn within(&self, network: IpAddr, mine: usize) -> Option<PlaceId> {
        let (address, most) = largest(self.addresses.iter().filter(|(a, _)| network_of(**a) == network))?;
        (mine + 1 < most).then(|| self.oldest(|e| e.address == address))?
    }

    /// The place to take from the whole pool for a newcomer from `network` whose address holds
    /// `mine`: from the network holding the most, if it holds more than the newcomer's network
    /// would; else from inside the newcomer's own network, by address.
    fn anywhere(&self, network: IpAddr, mine: usize) -> Option<PlaceId> {
        let (top, most) = largest(self.networks.iter())?;
        let ours = count(&self.networks, network);
        if top != network && ours + 1 < most {
            let (address, _) = largest(self.addresses.iter().filter(|(a, _)| network_of(**a) == top))?;
            return self.oldest(|e| e.address == address);
        }
        self.within(network, mine)
    }

    fn oldest(&self, pick: impl Fn(&Entry<T>) -> bool) -> Option<PlaceId> {
        self.entries.iter().find(|(_, e)| pick(e)).map(|(id, _)| *id)
    }
}

fn count(m: &HashMap<IpAddr, usize>, k: IpAddr) -> usize {
    m.get(&k).copied().unwrap_or(0)
}

fn uncount(m: &mut HashMap<IpAddr, usize>, k: IpAddr) {
    if let Some(n) = m.get_mut(&k) {
        *n -= 1;
        if *n == 0 {
            m.remove(&k);
        }
    }
}

/// The group holding the most (ties: the smallest key, so the choice does not depend on hashing).
fn largest<'a>(groups: impl Iterator<Item = (&'a IpAddr, &'a usize)>) -> Option<(IpAddr, usize)> {
    groups
        .map(|(k, n)| (*k, *n))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn pool(total: usize, per_address: usize, per_network: usize) -> Pool<u32> {
        Pool::new(Caps {
            total,
            per_address,
            per_network,
        })
    }

    #[test]
    fn tiers_are_the_address_and_its_network() {
        assert_eq!(address_of(ip("2001:db8:1:2::9")), ip("2001:db8:1:2::"));
        assert_eq!(network_of(ip("2001:db8:1:2::9")), ip("2001:db8:1::"));
        assert_eq!(network_of(ip("192.0.2.77")), ip("192.0.2.0"));
        assert_eq!(network_of(ip("::ffff:192.0.2.77")), ip("192.0.2.0"));
        assert_eq!(address_of(ip("::ffff:192.0.2.77")), ip("192.0.2.77"));
    }

    #[test]
    fn an_address_holds_its_share_and_no_more() {
        let mut p = pool(64, 4, 16);
        for i in 0..4 {
            assert!(p.admit(ip("192.0.2.1"), i).is_ok());
        }
        let (why, back) = p.admit(ip("192.0.2.1"), 9).unwrap_err();
        assert_eq!((why, back), (Refused::Address(4), 9));
        // The same /64 is one address.
        for i in 0..4 {
            p.admit(ip(&format!("2001:db8::{i}")), i).unwrap();
        }
        assert!(matches!(
            p.admit(ip("2001:db8::ffff"), 0),
            Err((Refused::Address(4), _))
        ));
    }

    #[test]
    fn a_network_full_of_attackers_cannot_keep_out_another_network() {
        // 64 attacking addresses of one /48 (its /58) reopen far more often than the pool holds.
        let mut p = pool(64, 4, 16);
        let mut refused = 0;
        for round in 0..50u32 {
            for a in 0..64u32 {
                let addr = ip(&format!("2001:db8:aa:{a:x}::1"));
                if p.admit(addr, round).is_err() {
                    refused += 1;
                }
            }
        }
        assert!(refused > 0);
        assert!(p.held() <= 16, "the /48 holds its share only: {}", p.held());
        // An honest client anywhere else gets a place at once, with nobody evicted.
        let a = p.admit(ip("2001:db8:bb::1"), 7).unwrap();
        assert!(a.evicted.is_none());
        // IPv4: a /24 the same way.
        let mut p = pool(64, 4, 16);
        for a in 0..64u32 {
            let _ = p.admit(ip(&format!("10.0.0.{a}")), 0);
        }
        assert!(p.admit(ip("10.0.1.1"), 1).is_ok());
    }

    #[test]
    fn a_full_pool_gives_the_largest_holders_oldest_place_to_a_smaller_one() {
        let mut p = pool(8, 4, 4);
        // Two networks with 4 each fill the pool.
        for i in 0..4 {
            p.admit(ip("192.0.2.1"), i).unwrap();
            p.admit(ip("198.51.100.1"), 10 + i).unwrap();
        }
        // A third network holds nothing: it takes the oldest place of the first largest network.
        let a = p.admit(ip("203.0.113.1"), 20).unwrap();
        assert_eq!(a.evicted, Some(0));
        // Now 3, 4, 1: the next newcomer from the third network takes from the one holding 4.
        let a = p.admit(ip("203.0.113.2"), 21).unwrap();
        assert_eq!(a.evicted, Some(10));
        // 3, 3, 2: a third from the same network would make it 3 against 3: refused, no churn.
        assert!(matches!(
            p.admit(ip("203.0.113.3"), 22),
            Err((Refused::All(8), 22))
        ));
        assert_eq!(p.held(), 8);
    }

    #[test]
    fn inside_a_full_network_the_address_holding_most_gives_way() {
        let mut p = pool(64, 4, 6);
        for i in 0..4 {
            p.admit(ip("192.0.2.1"), i).unwrap();
        }
        p.admit(ip("192.0.2.2"), 4).unwrap();
        p.admit(ip("192.0.2.2"), 5).unwrap();
        // The /24 is full; .3 holds nothing, .1 holds 4: its oldest goes.
        assert_eq!(p.admit(ip("192.0.2.3"), 6).unwrap().evicted, Some(0));
        // .1 holds 3, .3 holds 1: 2 < 3, so once more.
        assert_eq!(p.admit(ip("192.0.2.3"), 7).unwrap().evicted, Some(1));
        // Now 2, 2, 2: refused rather than swapped.
        assert!(matches!(
            p.admit(ip("192.0.2.3"), 8),
            Err((Refused::Network(6), _))
        ));
    }

    #[test]
    fn release_counts_down_and_an_evicted_place_is_gone() {
        let mut p = pool(2, 2, 2);
        let a = p.admit(ip("192.0.2.1"), 1).unwrap().id;
        let b = p.admit(ip("192.0.2.1"), 2).unwrap().id;
        let c = p.admit(ip("198.51.100.1"), 3).unwrap();
        assert_eq!(c.evicted, Some(1));
        assert_eq!(p.release(a), None, "evicted already");
        assert_eq!(p.release(b), Some(2));
        assert_eq!(p.release(c.id), Some(3));
        assert_eq!(p.held(), 0);
        assert!(p.addresses.is_empty() && p.networks.is_empty());
    }

    #[test]
    fn caps_are_ordered() {
        let p = pool(8, 100, 50);
        assert_eq!(
            p.caps(),
            Caps {
                total: 8,
                per_address: 8,
                per_network: 8
            }
        );
    }
}
