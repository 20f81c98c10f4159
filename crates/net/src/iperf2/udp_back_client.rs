//! `run --iperf2 -u --dualtest|--tradeoff` (iperf 2's UDP `-d` and `-r`), against `iperf -s -u` or
//! `landspeed serve --connect-back --iperf2-udp-send`. This client binds a UDP socket on
//! `--listen-port` (iperf 2's `-L`, or any free port), names it in its header (iperf 2's dual flags),
//! and sends its stream as any UDP test (its end repeated until the server's report). The server's
//! stream comes to the listening socket from a port of the server's own: the first datagram from
//! the server's address fixes that port (the socket is connected to it; others are read past), the
//! datagrams are counted as iperf 2 counts them, and the server's end is answered with iperf 2's
//! report, again for each end repeated, as iperf 2's listener does. With `-d` both at once, one
//! result both ways; with `-r` this end's stream first (its result in `ClientEvent::Part`), then the
//! server's. One stream each way (`-P 1`).

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
    let not = |what: &str| ClientError::NotWithIperf2 { what: what.into() };
    if spec.streams != 1 {
        return Err(not("UDP -d/-r with -P: one stream each way over UDP"));
    }
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
        id: if ask.dual == Dual::Simultaneous { 1 } else { 0 },
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
            add_received(&mut sent, &got, spec.length_bytes);
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
            let mut back = back_part(&sent, &listener, (&got, &heard), &reverse);
            add_received(&mut back, &got, spec.length_bytes);
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

/// The listening socket: `port` on the address family of the server's.
fn listen(server: SocketAddr, port: u16) -> Result<UdpSocket, ClientError> {
    let any: IpAddr = if server.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let at = SocketAddr::new(any, port);
    let sock = UdpSocket::bind(at).map_err(|err| ClientError::Listen { addr: at, err })?;
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
    /// The server's stream's spec (`Reverse`), and its stream id in the result: 1 beside this
    /// end's (`-d`), 0 alone (`-r`).
    spec: &'a Test,
    id: u32,
    /// Whose flows the samples' ids name: the whole test (`Bidir` with `-d`), or `spec`.
    whole: &'a Test,
    interrupt: &'a AtomicBool,
}

/// What the server's stream came to: its receipt and where it came from.
type Heard = (Got, SocketAddr);
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
    ) -> Result<(Sent, Heard, Samples), ClientError> {
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
                if let Ok(ends) = first_rx.try_recv() {
                    on_event(back_connected(ends));
                }
                if closed.is_some() {
                    heard.show(closed, on_event);
                }
            };
            let sent = send_test(opts, forward, header, self.interrupt, &mut pass);
            (sent, back.join().unwrap_or_else(|_| Err(gone())))
        });
        if let Ok(ends) = first_rx.try_recv() {
            on_event(back_connected(ends));
        }
        heard.show(None, on_event);
        Ok((sent?, got?, heard.received))
    }

    /// `-r`'s second part: the server's stream counted on another thread, its connection (with
    /// the events of a test starting) and its intervals shown on this one as they come.
    fn alone(&self, on_event: &mut dyn FnMut(ClientEvent)) -> Result<(Heard, Samples), ClientError> {
        let (first_tx, first_rx) = std::sync::mpsc::channel::<(SocketAddr, SocketAddr)>();
        let (tx, rx) = std::sync::mpsc::channel::<(u32, StreamSample)>();
        let mut heard = super::heard::Heard::new(self.whole, rx);
        let got = std::thread::scope(|sc| {
            let back = sc.spawn(|| self.receive(first_tx, tx));
            let mut first = Some(first_rx);
            let wait = Duration::from_millis(20);
            while !back.is_finished() {
                let Some(f) = first.as_ref() else {
                    heard.show_waiting(wait, on_event);
                    continue;
                };
                if let Ok((local, remote)) = f.recv_timeout(wait) {
                    first = None;
                    on_event(ClientEvent::Connected { local, remote });
                    on_event(back_connected((local, remote)));
                    on_event(ClientEvent::Started {
                        streams: 1,
                        warnings: vec![],
                    });
                }
            }
            back.join().unwrap_or_else(|_| Err(gone()))
        });
        heard.show(None, on_event);
        Ok((got?, heard.received))
    }

    /// The server's stream: its first datagram from the server's address fixes its port (the
    /// socket's ends then sent to `first`); counted to its end, which is answered with iperf 2's report, its
    /// intervals' samples to `tx`. The receipt and where it came from.
    fn receive(
        &self,
        first: std::sync::mpsc::Sender<(SocketAddr, SocketAddr)>,
        tx: std::sync::mpsc::Sender<(u32, StreamSample)>,
    ) -> Result<Heard, ClientError> {
        let from = self.first()?;
        let failed = |err| ClientError::Stream { id: self.id, err };
        self.sock.connect(from).map_err(failed)?;
        let _ = first.send((self.sock.local_addr().map_err(failed)?, from));
        let got = receive(
            self.sock,
            (self.id, self.spec, tx),
            (Instant::now(), self.interrupt),
            (&[], Duration::ZERO),
        );
        if got.receipt.received == 0 {
            return Err(ClientError::NothingSent { after: FIRST_WAIT });
        }
        super::udp::report(self.sock, &got.receipt, (None, false));
        Ok((got, from))
    }

    /// Where the server's first datagram came from (datagrams from other addresses read past).
    fn first(&self) -> Result<SocketAddr, ClientError> {
        let until = Instant::now() + FIRST_WAIT;
        let _ = self.sock.set_read_timeout(Some(Duration::from_millis(100)));
        let mut buf = [0u8; 64];
        while Instant::now() < until && !self.interrupt.load(Relaxed) {
            match self.sock.peek_from(&mut buf) {
                Ok((_, from)) if from.ip().to_canonical() == self.server.to_canonical() => return Ok(from),
                Ok(_) => {
                    let _ = self.sock.recv_from(&mut buf);
                }
                Err(_) => {}
            }
        }
        Err(ClientError::NothingSent { after: FIRST_WAIT })
    }
}

/// The event that says the server's stream came (the listening socket's ends, its own first).
fn back_connected(ends: (SocketAddr, SocketAddr)) -> ClientEvent {
    ClientEvent::BackConnected {
        connections: vec![ends],
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
