//! UDP on the server: a UDP socket on the same address and port as the TCP listener receives each
//! stream's hello (the same 28-byte data preamble TCP streams start with), and the test it names opens
//! a socket of its own on that port, connected to the client (so the kernel delivers that client's
//! datagrams to it), and answers with the preamble as an acknowledgement. Hellos are resent by the
//! client until acknowledged, so a repeated hello only gets the acknowledgement again.

use super::{Shared, TestError, UdpRegistry};
use landspeed_core::config::{Flow, Test, TestSpec};
use landspeed_core::endpoint::Role;
use landspeed_core::protocol::{Preamble, ServerSession, SessionId, Waiting, PROTOCOL_VERSION};
use landspeed_engine::transport::udp::UdpStream;
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A hello: (stream id, client address, the listener's address).
pub(super) type Hello = (u32, SocketAddr, SocketAddr);

/// A UDP socket bound to `addr` with SO_REUSEPORT, so per-stream sockets can share the port.
pub(super) fn bind(addr: SocketAddr, v6only: Option<bool>) -> std::io::Result<UdpSocket> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    if let Some(v) = v6only {
        s.set_only_v6(v)?;
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Receives hellos on one listener and hands them to their test, and answers echo probes (`landspeed
/// path`, `run --latency`), until the server shuts down.
pub(super) fn listen(sock: UdpSocket, shared: &Shared) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = landspeed_path::stamp::enable(&sock);
    let local = sock.local_addr().ok();
    let mut buf = vec![0u8; 65536];
    while !shared.shutdown.load(Relaxed) {
        let Ok((n, peer, stamp)) = landspeed_path::stamp::recv(&sock, &mut buf) else {
            continue;
        };
        if buf[..4.min(n)] == landspeed_core::path::ECHO_MAGIC {
            if shared.allowed(peer) {
                let rx_ns = stamp.unwrap_or_else(landspeed_path::realtime_ns);
                if let Some(len) = landspeed_core::path::echo::answer(&mut buf[..n], rx_ns) {
                    let _ = sock.send_to(&buf[..len], peer);
                }
            }
            continue;
        }
        if buf[..n] == super::iperf3_udp::HELLO {
            if let Some(local) = local {
                super::iperf3_udp::route_hello(shared, peer, local);
            }
            continue;
        }
        let Ok(Some((Preamble::Data { session, stream, .. }, _))) = Preamble::parse(&buf[..n]) else {
            continue;
        };
        let tx = shared.udp.lock().ok().and_then(|r| r.get(&session).cloned());
        if let (Some(tx), Some(local)) = (tx, local) {
            let _ = tx.send((stream, peer, local));
        }
    }
}

/// Removes a session from the UDP registry however the test ends.
pub(super) struct Registered<'a>(pub &'a UdpRegistry, pub SessionId);
impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.lock() {
            r.remove(&self.1);
        }
    }
}

fn ack(sid: SessionId, id: u32) -> Vec<u8> {
    Preamble::Data {
        version: PROTOCOL_VERSION,
        session: sid,
        stream: id,
    }
    .encode()
}

/// Collects the test's UDP streams: a connected socket per hello, acknowledged.
pub(super) fn collect(
    rx: &mpsc::Receiver<Hello>,
    spec: &TestSpec,
    sid: SessionId,
    sm: &mut ServerSession,
    control: &std::net::TcpStream,
) -> Result<Vec<UdpStream>, TestError> {
    let n = spec.total_streams() as usize;
    let mut socks: HashMap<u32, UdpSocket> = HashMap::new();
    let deadline = sm.poll_timeout().unwrap_or_else(Instant::now);
    while socks.len() < n {
        let (id, peer, local) =
            super::wait_stream(rx, deadline, control).map_err(|why| TestError::StreamsMissing {
                arrived: socks.len(),
                expected: spec.total_streams(),
                why,
            })?;
        if let Some(s) = socks.get(&id) {
            let _ = s.send(&ack(sid, id));
            continue;
        }
        sm.on_stream(id, Instant::now())?;
        let v6only = local.is_ipv6().then_some(!local.ip().is_unspecified());
        let udp_err = |err| TestError::UdpStream { id, err };
        let s = bind(local, v6only).map_err(udp_err)?;
        s.connect(peer).map_err(udp_err)?;
        let _ = s.send(&ack(sid, id));
        socks.insert(id, s);
    }
    let mut streams: Vec<UdpStream> = socks
        .into_iter()
        .map(|(id, socket)| {
            let flow = spec.flow_of(id);
            let role = if flow == Flow::ClientToServer {
                Role::Receiver
            } else {
                Role::Sender
            };
            UdpStream {
                id,
                flow,
                role,
                socket,
                datagrams: (role == Role::Sender)
                    .then(|| spec.stream_budget(id).map(|b| b.div_ceil(spec.length_bytes)))
                    .flatten(),
            }
        })
        .collect();
    streams.sort_by_key(|s| s.id);
    let w = spec
        .window_bytes
        .map_or(landspeed_engine::transport::udp::DEFAULT_BUFFER, |w| w as usize);
    for s in &streams {
        let r = socket2::SockRef::from(&s.socket);
        let _ = r.set_send_buffer_size(w);
        let _ = r.set_recv_buffer_size(w);
    }
    Ok(streams)
}

/// A UDP test, from the acceptance on: streams by hello, then the same start, engine run and results
/// exchange as a TCP test.
pub(super) fn run_test(
    mut reader: crate::control::ControlReader,
    mut writer: crate::control::ControlWriter,
    mut sm: ServerSession,
    spec: Test,
    sid: SessionId,
    shared: &Shared,
    log: &mut super::TestLog,
) -> Result<(), TestError> {
    use super::{Hook, Incoming};
    use landspeed_core::protocol::{Message, ServerAction};
    use landspeed_engine::supervisor::{EngineParams, Flags, Wake, Wiring};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let o = &shared.opts;
    let (tx, rx) = mpsc::channel();
    shared
        .udp
        .lock()
        .map_err(|_| TestError::Poisoned)?
        .insert(sid, tx);
    let registered = Registered(&shared.udp, sid);
    writer.send(&Message::Accepted { session: sid })?;
    let streams =
        collect(&rx, &spec, sid, &mut sm, reader.stream()).map_err(|e| super::fail(&mut writer, e))?;
    drop(registered);
    let mut warnings = vec![];
    if let Some(s) = streams.first() {
        let (snd, rcv) = landspeed_engine::sockopt::granted(&socket2::SockRef::from(&s.socket));
        warnings.extend(landspeed_engine::sockopt::window_warning(
            spec.window_bytes,
            snd,
            rcv,
        ));
    }
    writer.send(&Message::Ready)?;
    let start = reader.read_for(&mut sm)?;
    match sm.on_message(start, Instant::now()) {
        Ok(ServerAction::StartTest) => {}
        Ok(other) => return Err(TestError::NotStarted(format!("{other:?}"))),
        Err(e) => return Err(e.into()),
    }
    let (wtx, wrx) = mpsc::channel::<Wake<Incoming>>();
    let quit = Arc::new(AtomicBool::new(false));
    crate::control::spawn_reader(reader, wtx.clone(), quit.clone());
    let params = EngineParams::for_spec(&spec, None, None, o.idle_timeout);
    let u = landspeed_engine::transport::udp::UdpParams::for_spec(
        &spec,
        landspeed_engine::transport::udp::UdpFormat::Landspeed,
    );
    let flags = Flags::default();
    let mut hook = Hook {
        writer: &mut writer,
        session: &mut sm,
        shutdown: &shared.shutdown,
        client_report: None,
        failure: None,
    };
    let wiring = Wiring::new(&flags, (&wtx, &wrx), &mut hook, None);
    let udp = landspeed_engine::transport::udp::Udp {
        streams: &streams,
        params: u,
    };
    let out = landspeed_engine::supervisor::run(&udp, &params, wiring);
    super::add_measured(log, &out);
    let result = super::finish(
        &mut hook,
        &out,
        &flags,
        &wrx,
        super::Local {
            warnings,
            cpus: None,
            file: None,
        },
    );
    quit.store(true, Relaxed);
    result
}
