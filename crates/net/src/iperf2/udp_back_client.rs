//! `run --iperf2 -u --dualtest|--tradeoff` (iperf 2's UDP `-d` and `-r`), against `iperf -s -u` or
//! `landspeed serve --connect-back --iperf2-udp-send`. This client binds a UDP socket on
//! `--listen-port` (iperf 2's `-L`, or any free port), names it in its header (iperf 2's dual flags),
//! and sends its streams as any UDP test (`-P` of them, each end repeated until the server's
//! report). The server's streams come to the listening socket, each from a port of the server's
//! own: the first datagram from a new port of the server's address opens that stream (a socket of
//! its own on the listening port, connected to it, to which the kernel hands the rest; what reached
//! the listener first is passed on; other addresses are read past), up to `-P` of them. Each is
//! counted as iperf 2 counts it, and its end answered with iperf 2's report, again for each end
//! repeated, as iperf 2's listener does. With `-d` both at once, one result both ways; with `-r`
//! this end's streams first (their result in `ClientEvent::Part`), then the server's.

use super::udp::received_stream;
use super::udp_client::{send_test, unix_ns, Sent};
use super::udp_receive::{receive, Got};
use crate::dial::{ClientError, ClientEvent, ClientOptions, ConnectBackAsk};
use landspeed_core::config::{Direction, Flow, Test, TestSpec};
use landspeed_core::endpoint::{EndpointReport, Role, StreamReport, StreamSample};
use landspeed_core::result::RunResult;
use landspeed_engine::transport::udp::IPERF2_HEADER_BYTES;
use landspeed_iperf2::header::flags;
use landspeed_iperf2::Dual;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long the server's first datagram may take to come.
const FIRST_WAIT: Duration = Duration::from_secs(10);

/// Runs a UDP test whose server-to-client stream comes to this host's listening socket.
pub(super) fn run_back_udp(
    opts: &ClientOptions,
    spec: &Test,
    ask: ConnectBackAsk,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let forward = spec.changed(|s: &mut TestSpec| s.direction = Direction::Forward)?;
    let reverse = spec.changed(|s: &mut TestSpec| s.direction = Direction::Reverse)?;
    let addr = crate::dial::resolve(opts)?;
    let listener = listen(addr, ask.listen_port)?;
    let port = listener.local_addr().map_or(ask.listen_port, |a| a.port());
    let header = dual_header(&forward, port, ask.dual)?;
    let started_unix_s = unix_ns() as f64 / 1e9;
    let listening = Listening {
        sock: &listener,
        server: addr.ip(),
        spec: &reverse,
        first_id: if ask.dual == Dual::Simultaneous {
            spec.streams
        } else {
            0
        },
        whole: if ask.dual == Dual::Simultaneous {
            spec
        } else {
            &reverse
        },
        interrupt,
    };
    match ask.dual {
        Dual::Simultaneous => {
            let (mut sent, got, heard) = listening.beside(opts, (&forward, header), on_event)?;
            for g in &got {
                add_received(&mut sent, g, spec.length_bytes);
            }
            sent.samples = super::heard::merged(&sent.samples, &heard, spec);
            Ok(assembled(opts, spec, &sent, started_unix_s, interrupt))
        }
        Dual::Tradeoff => {
            let sent = send_test(opts, &forward, header, interrupt, on_event)?;
            let first = assembled(opts, &forward, &sent, started_unix_s, interrupt);
            on_event(ClientEvent::Part {
                result: Box::new(first),
            });
            let started_unix_s = unix_ns() as f64 / 1e9;
            let (got, heard) = listening.alone(on_event)?;
            let mut back = back_part(&sent, &listener, (&got[0], &heard), &reverse);
            for g in &got {
                add_received(&mut back, g, spec.length_bytes);
            }
            Ok(assembled(opts, &reverse, &back, started_unix_s, interrupt))
        }
    }
}

/// `-r`'s second part as sent (nothing from this end; the server's stream added after).
fn back_part(
    sent: &Sent,
    listener: &UdpSocket,
    (got, heard): (&Heard, &[(u32, StreamSample)]),
    reverse: &Test,
) -> Sent {
    Sent {
        here: EndpointReport {
            software: sent.here.software.clone(),
            host: sent.here.host.clone(),
            ..EndpointReport::default()
        },
        server: EndpointReport {
            software: "iperf 2 server".into(),
            ..EndpointReport::default()
        },
        samples: super::heard::merged(&[], heard, reverse),
        addresses: (listener.local_addr().unwrap_or(sent.addresses.0), got.1),
    }
}

fn gone() -> ClientError {
    ClientError::Stream {
        id: 1,
        err: std::io::Error::other("the receiving thread ended abnormally"),
    }
}

/// The listening socket: `port` on the address family of the server's, shared with the streams'
/// own sockets.
fn listen(server: SocketAddr, port: u16) -> Result<UdpSocket, ClientError> {
    let any: IpAddr = if server.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let at = SocketAddr::new(any, port);
    let sock = crate::host::bind_udp(at, None).map_err(|err| ClientError::Listen { addr: at, err })?;
    let _ = landspeed_path::stamp::enable(&sock);
    Ok(sock)
}

/// The UDP client's header with iperf 2's dual flags (`VERSION1`, and `RUN_NOW` for `-d`) and the
/// listening port in its port word.
fn dual_header(forward: &Test, port: u16, dual: Dual) -> Result<[u8; IPERF2_HEADER_BYTES], ClientError> {
    let mut h = super::udp_client::client_header(forward, port)?;
    h.flags |= flags::VERSION1;
    if dual == Dual::Simultaneous {
        h.flags |= flags::RUN_NOW;
    }
    let bytes = h.encode();
    let mut out = [0u8; IPERF2_HEADER_BYTES];
    out.copy_from_slice(&bytes[..IPERF2_HEADER_BYTES]);
    Ok(out)
}

/// The socket the server's stream comes to, and what it is.
struct Listening<'a> {
    sock: &'a UdpSocket,
    server: IpAddr,
    /// The server's streams' spec (`Reverse`), and the first one's id in the result: `-P`'s count
    /// beside this end's (`-d`), 0 alone (`-r`).
    spec: &'a Test,
    first_id: u32,
    /// Whose flows the samples' ids name: the whole test (`Bidir` with `-d`), or `spec`.
    whole: &'a Test,
    interrupt: &'a AtomicBool,
}

/// What one of the server's streams came to: its receipt and where it came from.
type Heard = (Got, SocketAddr);
/// The listening socket's two ends for each of the server's streams, as they come.
type Firsts = std::sync::mpsc::Sender<(SocketAddr, SocketAddr)>;
/// The received stream's interval samples, by interval number.
type Samples = Vec<(u32, StreamSample)>;

impl Listening<'_> {
    /// `-d`: this end's stream sent (`send_test` on this thread) while the server's is counted on
    /// another, its connection and intervals shown beside this end's as they come; both, and the
    /// received stream's samples.
    fn beside(
        &self,
        opts: &ClientOptions,
        (forward, header): (&Test, [u8; IPERF2_HEADER_BYTES]),
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<(Sent, Vec<Heard>, Samples), ClientError> {
        let (first_tx, first_rx) = std::sync::mpsc::channel::<(SocketAddr, SocketAddr)>();
        let (tx, rx) = std::sync::mpsc::channel::<(u32, StreamSample)>();
        let mut heard = super::heard::Heard::new(self.whole, rx);
        let (sent, got) = std::thread::scope(|sc| {
            let back = sc.spawn(|| self.receive(first_tx, tx));
            let mut pass = |ev: ClientEvent| {
                let closed = match &ev {
                    ClientEvent::Interval { interval, .. } => Some(interval.index),
                    _ => None,
                };
                on_event(ev);
                for ends in first_rx.try_iter() {
                    on_event(back_connected(ends));
                }
                if closed.is_some() {
                    heard.show(closed, on_event);
                }
            };
            let sent = send_test(opts, forward, header, self.interrupt, &mut pass);
            (sent, back.join().unwrap_or_else(|_| Err(gone())))
        });
        for ends in first_rx.try_iter() {
            on_event(back_connected(ends));
        }
        heard.show(None, on_event);
        Ok((sent?, got?, heard.received))
    }

    /// `-r`'s second part: the server's streams counted on other threads, their connections
    /// (with the events of a test starting, at the first) and their intervals shown on this one as
    /// they come.
    fn alone(&self, on_event: &mut dyn FnMut(ClientEvent)) -> Result<(Vec<Heard>, Samples), ClientError> {
        let (first_tx, first_rx) = std::sync::mpsc::channel::<(SocketAddr, SocketAddr)>();
        let (tx, rx) = std::sync::mpsc::channel::<(u32, StreamSample)>();
        let mut heard = super::heard::Heard::new(self.whole, rx);
        let got = std::thread::scope(|sc| {
            let back = sc.spawn(|| self.receive(first_tx, tx));
            let mut started = false;
            while !back.is_finished() {
                for (local, remote) in first_rx.try_iter() {
                    let first_one = !std::mem::replace(&mut started, true);
                    if first_one {
                        on_event(ClientEvent::Connected { local, remote });
                    }
                    on_event(back_connected((local, remote)));
                    if first_one {
                        on_event(ClientEvent::Started {
                            streams: self.spec.streams,
                            warnings: vec![],
                        });
                    }
                }
                heard.show_waiting(Duration::from_millis(20), on_event);
            }
            back.join().unwrap_or_else(|_| Err(gone()))
        });
        heard.show(None, on_event);
        Ok((got?, heard.received))
    }

    /// The server's streams: the listening socket read until each of `-P`'s has come and ended
    /// (`count`), or none came in [`FIRST_WAIT`]; each one's first datagram, from a new port of the
    /// server's address, opens it. Their receipts, in the order they came.
    fn receive(
        &self,
        first: Firsts,
        tx: std::sync::mpsc::Sender<(u32, StreamSample)>,
    ) -> Result<Vec<Heard>, ClientError> {
        let n = self.spec.streams as usize;
        let until = Instant::now() + FIRST_WAIT;
        let _ = self.sock.set_read_timeout(Some(Duration::from_millis(20)));
        let mut buf = vec![0u8; 65_536];
        std::thread::scope(|sc| {
            let mut streams = vec![];
            loop {
                let done = streams
                    .iter()
                    .all(|(_, _, h): &(_, _, std::thread::ScopedJoinHandle<_>)| h.is_finished());
                if self.interrupt.load(Relaxed) || done && (streams.len() == n || Instant::now() >= until) {
                    break;
                }
                let Ok((len, from, stamp)) = landspeed_path::stamp::recv(self.sock, &mut buf) else {
                    continue;
                };
                let early = (buf[..len].to_vec(), stamp);
                if let Some((_, passed, _)) = streams.iter().find(|(at, _, _)| *at == from) {
                    let _ = std::sync::mpsc::Sender::send(passed, early);
                    continue;
                }
                if from.ip().to_canonical() != self.server.to_canonical() || streams.len() == n {
                    continue;
                }
                let id = self.first_id + streams.len() as u32;
                let sock = self
                    .opened(from, &first)
                    .map_err(|err| ClientError::Stream { id, err })?;
                let (passed, rx) = std::sync::mpsc::channel();
                let _ = passed.send(early);
                let tx = tx.clone();
                streams.push((
                    from,
                    passed,
                    sc.spawn(move || self.count(&sock, (id, from), tx, &rx)),
                ));
            }
            let got = streams
                .into_iter()
                .map(|(_, _, h)| h.join().unwrap_or_else(|_| Err(gone())))
                .collect::<Result<Vec<Heard>, ClientError>>()?;
            self.all_came(got, n)
        })
    }

    /// A socket of its own for the stream from `from`: on the listening port, connected to it
    /// (its ends then sent to `first`).
    fn opened(&self, from: SocketAddr, first: &Firsts) -> std::io::Result<UdpSocket> {
        let sock = crate::host::bind_udp(self.sock.local_addr()?, None)?;
        sock.connect(from)?;
        let _ = landspeed_path::stamp::enable(&sock);
        let _ = first.send((sock.local_addr()?, from));
        Ok(sock)
    }

    /// One of the server's streams, counted to its end (what the listener read first passed on),
    /// which is answered with iperf 2's report; its intervals' samples to `tx`.
    fn count(
        &self,
        sock: &UdpSocket,
        (id, from): (u32, SocketAddr),
        tx: std::sync::mpsc::Sender<(u32, StreamSample)>,
        passed: &std::sync::mpsc::Receiver<super::udp_receive::Early>,
    ) -> Result<Heard, ClientError> {
        let got = receive(
            sock,
            (id, self.spec, tx),
            (Instant::now(), self.interrupt),
            (&[], Duration::ZERO, Some(passed)),
        );
        super::udp::report(sock, &got.receipt, (None, false));
        Ok((got, from))
    }

    /// The streams that came, when each of `-P`'s did (or Ctrl-C cut the wait); else how many.
    fn all_came(&self, got: Vec<Heard>, n: usize) -> Result<Vec<Heard>, ClientError> {
        if got.is_empty() || got.len() < n && !self.interrupt.load(Relaxed) {
            return Err(ClientError::NoUdpBack {
                port: self.sock.local_addr().map_or(0, |a| a.port()),
                came: got.len() as u32,
                want: n as u32,
                after: FIRST_WAIT,
            });
        }
        Ok(got)
    }
}

/// The event that says the server's stream came (the listening socket's ends, its own first).
fn back_connected(ends: (SocketAddr, SocketAddr)) -> ClientEvent {
    ClientEvent::BackConnected {
        connections: vec![ends],
        facts: vec![],
    }
}

/// The server's stream received (`got`) as this end's stream 1, and the server's side inferred (it
/// sent at least the highest number that came).
fn add_received(sent: &mut Sent, got: &Heard, length_bytes: u64) {
    let r = &got.0.receipt;
    let id = sent.here.streams.len() as u32;
    sent.here.streams.push(StreamReport {
        id,
        ..received_stream(r, Flow::ServerToClient)
    });
    sent.server.streams.push(StreamReport {
        bytes: r.highest * length_bytes,
        calls: r.highest,
        ..StreamReport::empty(id, Flow::ServerToClient, Role::Sender)
    });
    sent.here.elapsed_s = sent.here.elapsed_s.max(r.span_s());
    sent.here
        .warnings
        .push("the server's stream came to this host's listening port; its side is inferred from the highest number that came".into());
}

fn assembled(
    opts: &ClientOptions,
    spec: &Test,
    sent: &Sent,
    started_unix_s: f64,
    interrupt: &AtomicBool,
) -> RunResult {
    let ends = super::client::Ends::at_end(sent.addresses, started_unix_s, interrupt);
    super::client::assembled(opts, spec, &ends, (&sent.here, &sent.server), &sent.samples)
}
