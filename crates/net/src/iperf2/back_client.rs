//! `run --iperf2 --dualtest|--tradeoff` (iperf 2's `-d` and `-r`), against `iperf -s` or
//! `landspeed serve --connect-back`. This client listens (on `--listen-port`, iperf 2's `-L`, or
//! any free port), names the port in its header (`ClientHeader::for_tcp_back`), opens its streams,
//! reads the header ack the server sends for such a test, and takes as many connections back from
//! the server's address (others are closed unread) within the connect timeout. With `-d` both
//! halves run at once, one result both ways; with `-r` its own streams run first (that part's
//! result in `ClientEvent::Part`), then the server's, whose result is returned.

use super::client::{measured, unix_now_s, Ends};
use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions, ConnectBackAsk};
use landspeed_core::config::{Direction, Flow, Test, TestSpec};
use landspeed_core::result::RunResult;
use landspeed_engine::transport::tcp::DataStream;
use landspeed_iperf2::{ClientHeader, Dual};
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Runs a test whose server-to-client half comes on connections the server opens back.
pub(super) fn run_back(
    opts: &ClientOptions,
    spec: &Test,
    ask: ConnectBackAsk,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    if spec.direction != expected_direction(ask.dual) {
        return Err(ClientError::NotWithIperf2 {
            what: format!(
                "{} with -R or --bidir: the server's half comes on its own connections",
                flag(ask.dual)
            ),
        });
    }
    let addr = resolve(opts)?;
    let listener = listen(opts, addr, ask.listen_port)?;
    let port = listener.local_addr().map_or(ask.listen_port, |a| a.port());
    let forward = spec.changed(|s: &mut TestSpec| s.direction = Direction::Forward)?;
    let header = ClientHeader::for_tcp_back(&forward, port, ask.dual)
        .map_err(|e| ClientError::NotWithIperf2 { what: e.to_string() })?;
    landspeed_engine::platform::check_spec(spec)?;
    let started_unix_s = unix_now_s();
    let (mut streams, mut facts) = (vec![], vec![]);
    for k in 0..forward.streams {
        // TCP_INFO as the handshake left it, before the header goes (as iperf 2 reads it).
        let (sock, tcp) = crate::dial::connect_timed(opts, addr, &forward, k)?;
        facts.push(super::client::connect_facts(&sock, tcp));
        streams.push(crate::dial::greeted(
            opts,
            &forward,
            (k, sock),
            &header.encode(),
            None,
        )?);
    }
    let local = streams[0]
        .socket
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    if same_host(local.ip(), addr.ip()) && addr.port() == port {
        // Listening on the server's own port of this very host: the streams reached this listener.
        return Err(ClientError::Listen {
            addr: SocketAddr::new(local.ip(), port),
            err: std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "the server is this host at the same port, so the test would reach this client",
            ),
        });
    }
    read_acks(&streams, opts.control_timeout)?;
    on_event(ClientEvent::Connected { local, remote: addr });
    on_event(super::client::streams_connected(&streams, facts));
    let ends = Ends {
        addresses: (local, addr),
        started_unix_s,
        interrupted: false,
    };
    let waiting = Waiting {
        listener: &listener,
        server: addr.ip(),
        want: forward.streams,
        within: opts.connect_timeout.max(Duration::from_secs(10)),
        interrupt,
    };
    let run = Run {
        opts,
        spec,
        interrupt,
        waiting,
    };
    match ask.dual {
        Dual::Simultaneous => run.both_at_once(streams, ends, on_event),
        Dual::Tradeoff => run.one_then_the_other((streams, &forward), ends, on_event),
    }
}

/// A test whose client streams are open, waiting for the server's.
struct Run<'a> {
    opts: &'a ClientOptions,
    spec: &'a Test,
    interrupt: &'a AtomicBool,
    waiting: Waiting<'a>,
}

impl Run<'_> {
    /// `-d`: the server's connections beside the client's, one test both ways.
    fn both_at_once(
        &self,
        mut streams: Vec<DataStream>,
        ends: Ends,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<RunResult, ClientError> {
        let back = self.waiting.accept()?;
        on_event(back_connected(&back));
        streams.extend(back_streams(back, self.spec, self.waiting.want)?);
        Ok(measured(
            self.opts,
            self.spec,
            streams,
            ends,
            (self.interrupt, on_event),
        ))
    }

    /// `-r`: the client's streams (their result in a `Part`), then the server's connections.
    fn one_then_the_other(
        &self,
        (streams, forward): (Vec<DataStream>, &Test),
        ends: Ends,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<RunResult, ClientError> {
        let first = measured(self.opts, forward, streams, ends, (self.interrupt, on_event));
        on_event(ClientEvent::Part {
            result: Box::new(first),
        });
        let back = self.waiting.accept()?;
        let reverse = self
            .spec
            .changed(|s: &mut TestSpec| s.direction = Direction::Reverse)?;
        let addresses = (back[0].local_addr(), back[0].peer_addr());
        let (Ok(here), Ok(peer)) = addresses else {
            return Err(self.waiting.gone(0));
        };
        on_event(ClientEvent::Connected {
            local: here,
            remote: peer,
        });
        on_event(back_connected(&back));
        let streams = back_streams(back, &reverse, 0)?;
        let second = Ends {
            addresses: (here, peer),
            started_unix_s: unix_now_s(),
            interrupted: false,
        };
        Ok(measured(
            self.opts,
            &reverse,
            streams,
            second,
            (self.interrupt, on_event),
        ))
    }
}

/// The event that says the connections back are up.
fn back_connected(back: &[TcpStream]) -> ClientEvent {
    let ends = |s: &TcpStream| Some((s.local_addr().ok()?, s.peer_addr().ok()?));
    let back: Vec<_> = back.iter().filter_map(|s| Some((ends(s)?, s))).collect();
    ClientEvent::BackConnected {
        connections: back.iter().map(|(e, _)| *e).collect(),
        facts: back.iter().map(|(_, s)| accepted_facts(s)).collect(),
    }
}

/// What iperf 2 says of a connection it accepted: its descriptor and its interface.
fn accepted_facts(socket: &TcpStream) -> landspeed_core::endpoint::ConnectFacts {
    landspeed_core::endpoint::ConnectFacts {
        connect_ms: None,
        cwnd_mss_rtt: None,
        ..super::client::connect_facts(socket, Duration::ZERO)
    }
}

/// The direction a `-d` test (both at once) or a `-r` test (the client's half first) is asked as.
fn expected_direction(dual: Dual) -> Direction {
    match dual {
        Dual::Simultaneous => Direction::Bidir,
        Dual::Tradeoff => Direction::Forward,
    }
}

/// iperf 2's flag for `dual`.
fn flag(dual: Dual) -> &'static str {
    match dual {
        Dual::Simultaneous => "-d (--dualtest)",
        Dual::Tradeoff => "-r (--tradeoff)",
    }
}

/// A listener for the server's connections: on `--bind`'s address or every address of the
/// server's family, at `port` (0: any free one).
fn listen(opts: &ClientOptions, server: SocketAddr, port: u16) -> Result<TcpListener, ClientError> {
    let ip = opts.bind.unwrap_or(match server {
        SocketAddr::V4(_) => IpAddr::from([0u8; 4]),
        SocketAddr::V6(_) => IpAddr::from([0u16; 8]),
    });
    let addr = SocketAddr::new(ip, port);
    TcpListener::bind(addr).map_err(|err| ClientError::Listen { addr, err })
}

/// Reads the header ack each stream's server sends for a version-1 test (left unread, it would
/// make this end's close a reset that could cut the data short); a server that sends none costs
/// `within` once; one that closes a connection instead refused the test.
fn read_acks(streams: &[DataStream], within: Duration) -> Result<(), ClientError> {
    let until = Instant::now() + within;
    for s in streams {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        let _ = s.socket.set_read_timeout(Some(left));
        let mut ack = [0u8; landspeed_iperf2::ack::ACK_BYTES];
        let read = (&s.socket).read_exact(&mut ack);
        let _ = s.socket.set_read_timeout(None);
        if let Err(e) = read {
            if matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ) {
                return Err(ClientError::BackRefused);
            }
        }
    }
    Ok(())
}

/// Waiting for the server's connections back.
struct Waiting<'a> {
    listener: &'a TcpListener,
    /// Only connections from the server's address are taken.
    server: IpAddr,
    want: u32,
    within: Duration,
    interrupt: &'a AtomicBool,
}

impl Waiting<'_> {
    /// The error for `came` of the connections in time.
    fn gone(&self, came: usize) -> ClientError {
        ClientError::NoConnectBack {
            port: self.listener.local_addr().map_or(0, |a| a.port()),
            came: came as u32,
            want: self.want,
            after: self.within,
        }
    }

    /// The server's `want` connections, in the order they came.
    fn accept(&self) -> Result<Vec<TcpStream>, ClientError> {
        let gone = |came: usize| self.gone(came);
        self.listener.set_nonblocking(true).map_err(|_| gone(0))?;
        let until = Instant::now() + self.within;
        let mut out = vec![];
        while out.len() < self.want as usize {
            if Instant::now() >= until || self.interrupt.load(Relaxed) {
                return Err(gone(out.len()));
            }
            match self.listener.accept() {
                Ok((s, from)) if same_host(from.ip(), self.server) => {
                    s.set_nonblocking(false).map_err(|_| gone(out.len()))?;
                    out.push(s);
                }
                // Someone else: closed unread.
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => return Err(gone(out.len())),
            }
        }
        Ok(out)
    }
}

/// Whether two addresses are one host's (an IPv4 address and its IPv6-mapped form alike).
fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// The engine's receiving streams over the server's connections back, numbered from `first_id`.
fn back_streams(back: Vec<TcpStream>, spec: &Test, first_id: u32) -> Result<Vec<DataStream>, ClientError> {
    let mut out = vec![];
    for (k, socket) in back.into_iter().enumerate() {
        let id = first_id + k as u32;
        landspeed_engine::sockopt::after_connect(&socket2::SockRef::from(&socket), spec, false)?;
        out.push(DataStream::receiving(id, Flow::ServerToClient, socket));
    }
    Ok(out)
}
