//! `landspeed run --iperf2`: a test against an iperf 2.1.x server (`iperf -s`) in its protocol. Each
//! stream is a TCP connection that opens with the client's header (`ClientHeader::for_tcp`), then
//! carries the data: this end sends for `-t` or its share of `-n` and closes; with `-R` the server
//! sends on the same connection until its time or bytes, then closes; `--bidir` is iperf 2's
//! `--full-duplex` (both on each connection). iperf 2 sends the client no figures, so the server's
//! side of the result is inferred from this end's, and nothing is verified (the result says both).
//! UDP tests (`-u`) are `udp_client`'s.

use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions};
use crate::streams::DataPaths;
use landspeed_core::assemble::{assemble, Inputs};
use landspeed_core::config::{Direction, Flow, RxMode, Test, TestSpec, Transport};
use landspeed_core::endpoint::ConnectFacts;
use landspeed_core::endpoint::EndpointReport;
use landspeed_core::result::RunResult;
use landspeed_engine::transport::tcp::DataStream;
use landspeed_iperf2::ClientHeader;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::SystemTime;

/// Runs one test against an iperf 2 server.
pub fn run_iperf2_client(
    opts: &ClientOptions,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let spec = &unverified(&opts.spec)?;
    only_where_built(opts, spec)?;
    if let Some(frames) = spec.frames {
        return match spec.transport {
            Transport::Udp => super::isoch_client::run_frames(opts, spec, frames, interrupt, on_event),
            _ => super::isoch_tcp::run_tcp_frames(opts, spec, frames, interrupt, on_event),
        };
    }
    if spec.transport == Transport::Udp {
        landspeed_engine::platform::check_spec(spec)?;
        if let Some(ask) = opts.connect_back {
            return super::udp_back_client::run_back_udp(opts, spec, ask, interrupt, on_event);
        }
        return match spec.direction {
            Direction::Reverse => super::udp_receive::run_reverse(opts, spec, interrupt, on_event),
            Direction::Bidir => super::udp_both::run_both(opts, spec, interrupt, on_event),
            Direction::Forward => super::udp_client::run_udp(opts, spec, interrupt, on_event),
        };
    }
    if let Some(ask) = opts.connect_back {
        return super::back_client::run_back(opts, spec, ask, interrupt, on_event);
    }
    let spec = &with_trips(spec, opts.trip_times)?;
    let started_unix_s = opts.start_at_unix_s.unwrap_or_else(unix_now_s);
    let start = landspeed_iperf2::ack::WireTime::from_unix_ns((started_unix_s * 1e9) as u64);
    let header = ClientHeader::for_tcp(spec, opts.port)
        .map_err(|e| ClientError::NotWithIperf2 { what: e.to_string() })?;
    let header = match opts.fq_rate_header {
        Some(pace) => header.paced(pace),
        None => header,
    }
    .started(start);
    let mut header = match opts.start_at_unix_s {
        Some(_) => header.scheduled(start),
        None => header,
    };
    if opts.peer_detect {
        header.flags |= landspeed_iperf2::header::flags::V2PEERDETECT;
    }
    let header = header.asking(opts.write_prefetch, opts.quickack);
    landspeed_engine::platform::check_spec(spec)?;
    let addr = resolve(opts)?;
    let (streams, facts) = open(opts, addr, spec, &header.encode())?;
    if opts.peer_detect {
        read_acks(&streams[..spec.streams as usize], opts.control_timeout)?;
    }
    if spec.trip_times && spec.direction != Direction::Forward {
        read_echoes(&streams[..spec.streams as usize], opts.control_timeout)?;
    }
    let local = streams[0]
        .socket
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    on_event(ClientEvent::Connected { local, remote: addr });
    on_event(streams_connected(&streams, facts));
    // A scheduled start: the data (and the test's clock) from then, or now if it has passed; a
    // hold back (--txdelay-time): from that long after the connections.
    let at = (opts.start_at_unix_s).or(opts.hold_back.map(|h| unix_now_s() + h.as_secs_f64()));
    let started_unix_s = match at {
        Some(at) => {
            wait_until(at, interrupt);
            unix_now_s()
        }
        None => started_unix_s,
    };
    let ends = Ends {
        addresses: (local, addr),
        started_unix_s,
        interrupted: false,
    };
    Ok(measured(opts, spec, streams, ends, (interrupt, on_event)))
}

/// A scheduled start and peer detection where they are built: a TCP test of this host's streams
/// (`-R`, `--full-duplex` too), and for the start also UDP this host sends.
fn only_where_built(opts: &ClientOptions, spec: &TestSpec) -> Result<(), ClientError> {
    let plain_tcp = spec.transport == Transport::Tcp && spec.frames.is_none() && opts.connect_back.is_none();
    let udp_sent = spec.transport == Transport::Udp
        && spec.frames.is_none()
        && opts.connect_back.is_none()
        && spec.direction == Direction::Forward;
    if opts.start_at_unix_s.is_some() && !(plain_tcp || udp_sent) {
        return Err(ClientError::NotWithIperf2 {
            what: "a scheduled start (--txstart-time) but in a TCP test of this host's streams, -R or --full-duplex, or UDP this host sends".into(),
        });
    }
    let sent_tcp = plain_tcp && spec.direction == Direction::Forward;
    if opts.hold_back.is_some() && !sent_tcp {
        return Err(ClientError::NotWithIperf2 {
            what: "a hold back (--txdelay-time) but in a TCP test of this host's streams".into(),
        });
    }
    if opts.peer_detect && !plain_tcp {
        return Err(ClientError::NotWithIperf2 {
            what: "peer detection (-X) but in a TCP test of this host's streams, -R or --full-duplex".into(),
        });
    }
    Ok(())
}

/// Reads each stream's header ack (`-X`: the server answers the header with its version first).
fn read_acks(streams: &[DataStream], timeout: std::time::Duration) -> Result<(), ClientError> {
    use landspeed_iperf2::ack::HeaderAck;
    use std::io::Read;
    for s in streams {
        let err = |err| ClientError::Stream { id: s.id, err };
        let _ = s.socket.set_read_timeout(Some(timeout));
        let mut ack = vec![0u8; 8];
        (&s.socket).read_exact(&mut ack).map_err(err)?;
        let bad = |e: landspeed_iperf2::ack::AckError| {
            err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("-X: {e}"),
            ))
        };
        ack.resize(HeaderAck::declared_len(&ack).map_err(bad)?, 0);
        (&s.socket).read_exact(&mut ack[8..]).map_err(err)?;
        HeaderAck::parse(&ack).map_err(bad)?;
        let _ = s.socket.set_read_timeout(None);
    }
    Ok(())
}

/// Waits until `at_unix_s` on this host's clock (a scheduled start), in steps of at most 100 ms,
/// or until interrupted.
pub(super) fn wait_until(at_unix_s: f64, interrupt: &AtomicBool) {
    loop {
        let left = at_unix_s - unix_now_s();
        if left <= 0.0 || interrupt.load(Relaxed) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_secs_f64(left.min(0.1)));
    }
}

/// The event that says the test's own connections are up (the first of each with `--bidir`),
/// with how each was made when known (`facts`, in stream order).
pub(super) fn streams_connected(streams: &[DataStream], facts: Vec<ConnectFacts>) -> ClientEvent {
    let mut seen = std::collections::HashSet::new();
    ClientEvent::StreamsConnected {
        connections: streams
            .iter()
            .filter_map(|s| Some((s.socket.local_addr().ok()?, s.socket.peer_addr().ok()?)))
            .filter(|c| seen.insert(*c))
            .collect(),
        facts,
    }
}

/// How each UDP socket of a test was set up, as iperf 2's `-e` line tells it: its descriptor and
/// the interface of its address.
pub(super) fn udp_facts<'a>(socks: impl Iterator<Item = &'a std::net::UdpSocket>) -> Vec<ConnectFacts> {
    socks
        .map(|s| ConnectFacts {
            #[cfg(unix)]
            fd: Some(i64::from(std::os::fd::AsRawFd::as_raw_fd(s))),
            interface: (s.local_addr().ok()).and_then(|a| landspeed_engine::host::interface_for(a.ip())),
            ..ConnectFacts::default()
        })
        .collect()
}

/// The send buffer the kernel grants a new TCP (or `udp`) socket that asks for `asked` (Linux doubles a
/// request; without one, its default), as iperf 2 reads it back for its head; what was asked (or
/// 0) should no socket open.
pub fn granted_send_buffer(udp: bool, asked: Option<u64>) -> u64 {
    granted_buffer(udp, asked, false)
}

/// The receive buffer a new TCP socket asking for `asked` (`-w`) is granted, as iperf 2's head of
/// a listener shows it (`-d`, `-r`: the client's own listener).
pub fn granted_recv_buffer(asked: Option<u64>) -> u64 {
    granted_buffer(false, asked, true)
}

/// The MSS a new, unconnected TCP socket reports (TCP_MAXSEG: Linux's 536), as iperf 2's `-m`
/// prints it; None where it cannot be read.
pub fn unconnected_mss() -> Option<u32> {
    #[cfg(unix)]
    return socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .ok()?
        .tcp_mss()
        .ok();
    #[cfg(not(unix))]
    return None;
}

/// The test's TCP socket options (`sockopt::before_connect`'s) set on a socket that never connects:
/// what the kernel refuses of them (a congestion control this host does not allow, an MSS it will
/// not take) in the words a test would fail with, before anything is printed or sent.
pub fn tcp_options_taken(spec: &TestSpec) -> Result<(), landspeed_engine::sockopt::SockOptError> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).map_err(|err| {
        landspeed_engine::sockopt::SockOptError::Other {
            what: "a TCP socket",
            err,
        }
    })?;
    landspeed_engine::sockopt::before_connect(&s, spec)
}

fn granted_buffer(udp: bool, asked: Option<u64>, receive: bool) -> u64 {
    let kind = match udp {
        true => socket2::Type::DGRAM,
        false => socket2::Type::STREAM,
    };
    let granted = || -> std::io::Result<u64> {
        let s = socket2::Socket::new(socket2::Domain::IPV4, kind, None)?;
        let w = asked.map(|w| usize::try_from(w).unwrap_or(usize::MAX));
        match receive {
            true => {
                if let Some(w) = w {
                    s.set_recv_buffer_size(w)?;
                }
                Ok(s.recv_buffer_size()? as u64)
            }
            false => {
                if let Some(w) = w {
                    s.set_send_buffer_size(w)?;
                }
                Ok(s.send_buffer_size()? as u64)
            }
        }
    };
    granted().unwrap_or(asked.unwrap_or(0))
}

/// How a connection was made: `connect()`'s time (`tcp`), TCP_INFO read now, its descriptor and
/// the interface of its local address.
pub(super) fn connect_facts(socket: &std::net::TcpStream, tcp: std::time::Duration) -> ConnectFacts {
    let info = landspeed_engine::tcp_info::read(socket).ok();
    #[cfg(unix)]
    let fd = Some(i64::from(std::os::fd::AsRawFd::as_raw_fd(socket)));
    #[cfg(not(unix))]
    let fd = None;
    ConnectFacts {
        connect_ms: Some(tcp.as_secs_f64() * 1e3),
        cwnd_mss_rtt: info.map(|i| {
            let kib = u64::from(i.raw.snd_cwnd) * u64::from(i.raw.snd_mss) / 1024;
            (kib as u32, i.raw.snd_mss, i.raw.rtt)
        }),
        fd,
        interface: (socket.local_addr().ok()).and_then(|a| landspeed_engine::host::interface_for(a.ip())),
        local: socket.local_addr().ok().map(|a| a.to_string()),
        back: false,
        send_buffer_bytes: socket2::SockRef::from(socket)
            .send_buffer_size()
            .ok()
            .map(|b| b as u64),
        unsent_mark_bytes: None,
        window_clamp_bytes: None,
        fq_paced: false,
        quickack: false,
    }
}

/// `--tcp-write-prefetch` and `--tcp-quickack` on one of the client's connections (`sends`: it
/// carries this end's data), and the facts that say so (iperf 2's `(prefetch=N)` and `(qack)`):
/// the unsent mark set on a sending socket (on one that only receives, `-R`, the header asked the
/// server's); both said on every connection, as iperf 2.1.8's client says them; quickack done by
/// the engine's receivers.
fn socket_asks(
    opts: &ClientOptions,
    (sock, id, sends): (&std::net::TcpStream, u32, bool),
    facts: ConnectFacts,
) -> Result<ConnectFacts, ClientError> {
    if let Some(bytes) = opts.write_prefetch.filter(|_| sends) {
        landspeed_engine::os::set_notsent_lowat(sock, bytes)
            .map_err(|err| ClientError::Stream { id, err })?;
    }
    Ok(ConnectFacts {
        unsent_mark_bytes: opts.write_prefetch,
        quickack: opts.quickack,
        fq_paced: opts.fq_rate_header.is_some(),
        ..facts
    })
}

/// Now, Unix seconds.
pub(super) fn unix_now_s() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs the test's TCP `streams` (connected, `ends` where and when) and makes its result, the
/// server's side inferred from this end's.
pub(super) fn measured(
    opts: &ClientOptions,
    spec: &TestSpec,
    streams: Vec<DataStream>,
    mut ends: Ends,
    (interrupt, on_event): (&AtomicBool, &mut dyn FnMut(ClientEvent)),
) -> RunResult {
    let warnings = vec![
        "iperf 2's protocol: the server sends the client no figures, so its side of the result is inferred from this end's (what it received is what was sent here; what it sent, what arrived here)".to_string(),
        "iperf 2's payload is not landspeed's: nothing was verified".to_string(),
    ];
    on_event(ClientEvent::Started {
        streams: spec.total_streams(),
        warnings: warnings.clone(),
    });
    let data = DataPaths::Tcp(streams);
    let local = ends.addresses.0;
    let out = crate::dial::measure_quietly(opts, spec, (&data, true), local, interrupt, on_event);
    let here = out.report(opts.cpus.clone(), warnings);
    let server = EndpointReport {
        software: "iperf 2 server".into(),
        streams: here.streams.iter().map(crate::dial::inferred).collect(),
        elapsed_s: here.elapsed_s,
        ..EndpointReport::default()
    };
    ends.interrupted = interrupt.load(Relaxed);
    assembled(opts, spec, &ends, (&here, &server), &out.samples)
}

/// Where and when a test against an iperf 2 server ran.
pub(super) struct Ends {
    /// This end's address and the server's.
    pub(super) addresses: (std::net::SocketAddr, std::net::SocketAddr),
    /// When it started, Unix seconds.
    pub(super) started_unix_s: f64,
    /// Whether it was cut short.
    pub(super) interrupted: bool,
}

/// Tells the caller where a UDP test runs (`locals`: each socket's address, to `remote`) and that
/// its `streams` are up, with the warnings its result will carry (iperf 2's payload, then `more`);
/// returns them.
pub(super) fn started_udp(
    on_event: &mut dyn FnMut(ClientEvent),
    (locals, facts): (&[std::net::SocketAddr], Vec<ConnectFacts>),
    (remote, streams): (std::net::SocketAddr, u32),
    more: Option<&str>,
) -> Vec<String> {
    let each: Vec<(std::net::SocketAddr, std::net::SocketAddr)> =
        locals.iter().map(|l| (*l, remote)).collect();
    if let Some(&(local, remote)) = each.first() {
        on_event(ClientEvent::Connected { local, remote });
    }
    on_event(ClientEvent::StreamsConnected {
        connections: each,
        facts,
    });
    let mut warnings = vec!["iperf 2's payload is not landspeed's: nothing was verified".to_string()];
    warnings.extend(more.map(str::to_string));
    on_event(ClientEvent::Started {
        streams,
        warnings: warnings.clone(),
    });
    warnings
}

impl Ends {
    /// A test's ends as it finishes: `interrupt` says whether it was cut short.
    pub(super) fn at_end(
        addresses: (std::net::SocketAddr, std::net::SocketAddr),
        started_unix_s: f64,
        interrupt: &AtomicBool,
    ) -> Ends {
        Ends {
            addresses,
            started_unix_s,
            interrupted: interrupt.load(Relaxed),
        }
    }
}

/// The result of a test against an iperf 2 server from both sides' reports (the server's inferred
/// or from its UDP report) and this end's samples.
pub(super) fn assembled(
    opts: &ClientOptions,
    spec: &TestSpec,
    ends: &Ends,
    (here, server): (&EndpointReport, &EndpointReport),
    samples: &[landspeed_core::endpoint::IntervalSample],
) -> RunResult {
    let (local, addr) = ends.addresses;
    let mut context = crate::dial::run_context(
        opts,
        local,
        addr,
        here,
        ends.started_unix_s,
        ends.interrupted,
        "iperf2",
    );
    context.foreign_peer = opts.spec.verify;
    assemble(&Inputs {
        spec,
        context,
        client: here,
        server,
        client_samples: samples,
        server_samples: &[],
    })
}

/// The test as iperf 2 runs it: TCP or UDP, its payload not checked.
pub(super) fn unverified(offered: &Test) -> Result<Test, ClientError> {
    if !matches!(offered.transport, Transport::Tcp | Transport::Udp) {
        return Err(ClientError::NotWithIperf2 {
            what: "QUIC: iperf 2 speaks TCP and UDP".into(),
        });
    }
    if offered.transactions.is_some() {
        return Err(ClientError::NotWithIperf2 {
            what: "landspeed's request/response test (--rr): iperf 2's is --bounceback".into(),
        });
    }
    if offered.tls.is_some() || offered.mptcp || offered.file.is_some() {
        return Err(ClientError::NotWithIperf2 {
            what: "TLS, MPTCP or files: its streams are plain TCP carrying its own bytes".into(),
        });
    }
    Ok(offered.changed(|s: &mut TestSpec| {
        s.verify = false;
        if s.transport == Transport::Tcp {
            s.rx = RxMode::Discard;
        }
    })?)
}

/// A TCP test with `--trip-times` (`trip_times`): its bursts stamped by this end's senders and timed
/// by its receivers, which read every byte (no low-water mark: a burst is timed at its last byte).
fn with_trips(spec: &Test, trip_times: bool) -> Result<Test, ClientError> {
    if !trip_times {
        return Ok(spec.clone());
    }
    Ok(spec.changed(|s: &mut TestSpec| {
        s.trip_times = true;
        s.rx = RxMode::Copy;
        s.rcvlowat_bytes = Some(0);
    })?)
}

/// Reads, on each connection, the header an iperf 2 server sends first on a `--trip-times` test it
/// sends on (its echo of this client's, with its start time): its length from its first word.
fn read_echoes(connections: &[DataStream], timeout: std::time::Duration) -> Result<(), ClientError> {
    use std::io::Read;
    for c in connections {
        let err = |err| ClientError::Stream { id: c.id, err };
        c.socket.set_read_timeout(Some(timeout)).map_err(err)?;
        let mut first = [0u8; 4];
        (&c.socket).read_exact(&mut first).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ClientError::NoEcho {
                id: c.id,
                after: timeout,
            },
            _ => err(e),
        })?;
        let len = ClientHeader::len_from_flags(u32::from_be_bytes(first), 0).map_err(|e| {
            err(std::io::Error::other(format!(
                "the iperf 2 server's first bytes on a --trip-times test are not its header ({e})"
            )))
        })?;
        let mut rest = vec![0u8; len.saturating_sub(4)];
        (&c.socket).read_exact(&mut rest).map_err(err)?;
        c.socket.set_read_timeout(None).map_err(err)?;
    }
    Ok(())
}

/// The test's connections, each opened with the header, and how each was made; with `--bidir`
/// each carries both ways (the server's data on a second handle of the same socket).
fn open(
    opts: &ClientOptions,
    addr: std::net::SocketAddr,
    spec: &Test,
    header: &[u8],
) -> Result<(Vec<DataStream>, Vec<ConnectFacts>), ClientError> {
    let (mut out, mut facts) = (vec![], vec![]);
    for k in 0..spec.streams {
        // TCP_INFO as the handshake left it, before the header goes (as iperf 2 reads it).
        let (sock, tcp) = crate::dial::connect_timed(opts, addr, spec, k)?;
        let sends = spec.direction != Direction::Reverse;
        facts.push(socket_asks(opts, (&sock, k, sends), connect_facts(&sock, tcp))?);
        out.push(crate::dial::greeted(opts, spec, (k, sock), header, None)?);
    }
    if spec.direction == Direction::Bidir {
        for k in 0..spec.streams {
            let id = spec.streams + k;
            let socket = out[k as usize]
                .socket
                .try_clone()
                .map_err(|err| ClientError::Stream { id, err })?;
            out.push(DataStream::receiving(id, Flow::ServerToClient, socket));
        }
    }
    Ok((out, facts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn write_prefetch_holds_a_sending_socket_and_both_asks_are_said_on_every_connection() {
        let plain_opts = ClientOptions::new("h", 5001, Test::try_from(TestSpec::default()).unwrap());
        let opts = ClientOptions {
            write_prefetch: Some(16_384),
            quickack: true,
            ..plain_opts.clone()
        };
        let (sending, _s) = pair();
        let (receiving, _r) = pair();
        let before = landspeed_engine::os::notsent_lowat(&receiving).unwrap();
        let sent = socket_asks(&opts, (&sending, 0, true), ConnectFacts::default()).unwrap();
        let got = socket_asks(&opts, (&receiving, 1, false), ConnectFacts::default()).unwrap();
        assert_eq!(landspeed_engine::os::notsent_lowat(&sending).unwrap(), 16_384);
        // A socket that only receives (-R) is left as it was: the header asks the server's.
        assert_eq!(landspeed_engine::os::notsent_lowat(&receiving).unwrap(), before);
        for f in [sent, got] {
            assert_eq!((f.unsent_mark_bytes, f.quickack), (Some(16_384), true));
        }
        let plain = socket_asks(&plain_opts, (&sending, 0, true), ConnectFacts::default());
        assert_eq!(plain.unwrap(), ConnectFacts::default());
    }

    #[test]
    fn a_server_silent_where_it_echoes_the_header_is_named_not_a_bare_socket_error() {
        let (c, _server) = pair();
        let s = [DataStream::receiving(3, Flow::ServerToClient, c)];
        match read_echoes(&s, Duration::from_millis(50)) {
            Err(e @ ClientError::NoEcho { id: 3, .. }) => {
                assert!(e.to_string().contains("sent nothing within 50ms"), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_echoed_header_is_read_whole_and_the_data_after_it_left() {
        let (c, mut server) = pair();
        let spec = TestSpec {
            trip_times: true,
            ..TestSpec::default()
        };
        let header = ClientHeader::for_tcp(&spec, 0).unwrap().encode();
        server.write_all(&header).unwrap();
        server.write_all(b"data").unwrap();
        let s = [DataStream::receiving(0, Flow::ServerToClient, c)];
        read_echoes(&s, Duration::from_secs(5)).unwrap();
        let mut rest = [0u8; 4];
        std::io::Read::read_exact(&mut &s[0].socket, &mut rest).unwrap();
        assert_eq!(&rest, b"data");
    }
}
