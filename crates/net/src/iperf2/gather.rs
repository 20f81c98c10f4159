//! Which connections make one iperf 2 test. iperf 2.1.8's client sends no test id: its `-P N`
//! streams are N connections from one address, each opening with the same header (the same flags,
//! stream count, write size, amount and rate), made at once. The first opens a gathering (and takes
//! the test's slot); the next ones from the same address with the same header join it until it holds
//! N or its time is up ([`GATHER_WAIT`]); a connection that finds no open gathering opens its own.
//! A gathering never takes more than the N its header named, so a client cannot hold connections
//! beyond its test's own streams (bounded by `--max-streams`) this way.

use landspeed_iperf2::ClientHeader;
use std::net::{IpAddr, TcpStream};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Mutex;
use std::time::Duration;

/// How long a test's first connection waits for its other streams (iperf 2's client connects them
/// all before sending; on a long path they come within a round trip or two).
pub(crate) const GATHER_WAIT: Duration = Duration::from_secs(2);

/// A connection of a gathering test, with its header.
pub(crate) type Joining = (TcpStream, ClientHeader);

struct Open {
    id: u64,
    ip: IpAddr,
    header: ClientHeader,
    /// Connections it still takes.
    room: u32,
    tx: Sender<Joining>,
}

/// The tests still gathering their streams, server-wide.
#[derive(Default)]
pub(crate) struct Gatherings {
    open: Mutex<(u64, Vec<Open>)>,
}

/// Whether two headers are of one test: the same in every field but those each stream sets alone
/// (the start time and later fields, kept in `rest`).
fn same_test(a: &ClientHeader, b: &ClientHeader) -> bool {
    (
        a.flags,
        a.threads,
        a.port,
        a.buffer_len,
        a.window_band,
        a.amount,
        a.extension,
    ) == (
        b.flags,
        b.threads,
        b.port,
        b.buffer_len,
        b.window_band,
        b.amount,
        b.extension,
    )
}

/// What became of an arriving connection.
pub(crate) enum Arrived {
    /// It joined a test already gathering.
    Joined,
    /// It opens a test: its id among the gatherings, and where its other streams will come.
    Opens(u64, Receiver<Joining>),
}

impl Gatherings {
    /// Takes a connection from `ip` with `header`: into an open gathering of the same test, or as the
    /// first of a new one (which then waits for `header.threads - 1` more).
    pub(crate) fn arrive(
        &self,
        ip: IpAddr,
        header: &ClientHeader,
        stream: TcpStream,
    ) -> (Arrived, Option<TcpStream>) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (next, open) = &mut *g;
        let ip = ip.to_canonical();
        if let Some(i) = open
            .iter()
            .position(|o| o.ip == ip && o.room > 0 && same_test(&o.header, header))
        {
            let o = &mut open[i];
            return match o.tx.send((stream, header.clone())) {
                Ok(()) => {
                    o.room -= 1;
                    if o.room == 0 {
                        open.swap_remove(i);
                    }
                    (Arrived::Joined, None)
                }
                // Its test stopped gathering before it could close the gathering: this one opens its
                // own.
                Err(e) => {
                    open.swap_remove(i);
                    let (s, _) = e.0;
                    drop(g);
                    return self.arrive(ip, header, s);
                }
            };
        }
        let (tx, rx) = std::sync::mpsc::channel();
        *next += 1;
        let id = *next;
        if header.threads > 1 {
            open.push(Open {
                id,
                ip,
                header: header.clone(),
                room: header.threads - 1,
                tx,
            });
        }
        (Arrived::Opens(id, rx), Some(stream))
    }

    /// Closes gathering `id` (its time is up, or its test is refused): later connections open their
    /// own.
    pub(crate) fn close(&self, id: u64) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        g.1.retain(|o| o.id != id);
    }

    /// Gatherings open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.lock().map_or(0, |g| g.1.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_iperf2::Amount;
    use std::net::{Ipv4Addr, TcpListener};

    fn header(threads: u32) -> ClientHeader {
        ClientHeader {
            flags: 0x4001_0078,
            threads,
            port: 5201,
            buffer_len: 0,
            window_band: 0,
            amount: Amount::Centiseconds(100),
            extension: None,
            rest: vec![],
        }
    }

    fn conn(l: &TcpListener) -> TcpStream {
        TcpStream::connect(l.local_addr().unwrap()).unwrap()
    }

    #[test]
    fn streams_of_one_test_join_its_first_and_no_more_than_it_named() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let g = Gatherings::default();
        let a = IpAddr::from([10, 0, 0, 1]);
        let (first, s) = g.arrive(a, &header(3), conn(&l));
        let Arrived::Opens(id, rx) = first else {
            panic!("the first opens")
        };
        assert!(s.is_some());
        assert!(matches!(g.arrive(a, &header(3), conn(&l)).0, Arrived::Joined));
        // Another address, or another test's header, opens its own.
        assert!(matches!(
            g.arrive(IpAddr::from([10, 0, 0, 2]), &header(3), conn(&l)).0,
            Arrived::Opens(..)
        ));
        assert!(matches!(g.arrive(a, &header(2), conn(&l)).0, Arrived::Opens(..)));
        assert!(matches!(g.arrive(a, &header(3), conn(&l)).0, Arrived::Joined));
        // The first test is full: a fourth stream with its header opens a new test.
        assert!(matches!(g.arrive(a, &header(3), conn(&l)).0, Arrived::Opens(..)));
        assert_eq!(rx.try_iter().count(), 2);
        g.close(id);
        // A test of one stream never waits for others.
        let before = g.len();
        assert!(matches!(g.arrive(a, &header(1), conn(&l)).0, Arrived::Opens(..)));
        assert_eq!(g.len(), before);
    }

    #[test]
    fn a_stream_for_a_test_that_stopped_gathering_opens_its_own() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let g = Gatherings::default();
        let a = IpAddr::from([10, 0, 0, 1]);
        let (first, _) = g.arrive(a, &header(2), conn(&l));
        drop(first);
        let (next, s) = g.arrive(a, &header(2), conn(&l));
        assert!(matches!(next, Arrived::Opens(..)) && s.is_some());
    }
}
