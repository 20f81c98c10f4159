//! What every client side shares, whichever protocol it speaks (landspeed's, iperf3's, ndt7, the QUIC
//! performance protocol): the client's options, its events and errors, resolving and connecting
//! (with the socket options a test asks for), opening data streams, live intervals, running the
//! engine and assembling the `RunResult`. Progress is reported through a callback; nothing is
//! printed here.

mod error;
pub(crate) mod latency;
mod options;
pub(crate) mod quic;
mod under_load;

pub use error::{ClientError, Remedy};
pub use latency::LatencyOptions;
pub use options::{ClientEvent, ClientOptions, ConnectBackAsk, Keepalive};
pub use under_load::{start_load, LoadPlan, RunningLoad};

use crate::streams::DataPaths;
use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::{Family, TestSpec};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport};
use landspeed_core::result::{IntervalResult, IntervalStream};
use landspeed_engine::sockopt::{self};
use landspeed_engine::supervisor::{self, EngineHook, EngineParams, Flags, Wake, Wiring};
use landspeed_engine::transport::tcp::tls::TlsLink;
use landspeed_engine::transport::tcp::{DataStream, Tcp};
use landspeed_engine::transport::udp::{Udp, UdpFormat, UdpParams};
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// The far end's side of one of this end's streams when the far end reports none (iperf 2's server
/// and client, a QUIC perf server): it received what was sent here and sent what arrived here, over
/// the same span; nothing more is known of it.
pub(crate) fn inferred(s: &StreamReport) -> StreamReport {
    let role = match s.role {
        Role::Sender => Role::Receiver,
        Role::Receiver => Role::Sender,
    };
    StreamReport {
        bytes: s.bytes,
        first_byte_s: s.first_byte_s,
        last_byte_s: s.last_byte_s,
        ..StreamReport::empty(s.id, s.flow, role)
    }
}

/// The result of a test whose server reports nothing while it runs or after: its side inferred
/// stream by stream from `here` (its software named `software`), assembled without interval
/// samples (a request/response test's figures are its transactions').
pub(crate) fn assemble_inferred(
    spec: &TestSpec,
    context: RunContext,
    here: &EndpointReport,
    software: &str,
) -> landspeed_core::result::RunResult {
    let server = EndpointReport {
        software: software.into(),
        streams: here.streams.iter().map(inferred).collect(),
        elapsed_s: here.elapsed_s,
        ..EndpointReport::default()
    };
    assemble(&Inputs {
        spec,
        context,
        client: here,
        server: &server,
        client_samples: &[],
        server_samples: &[],
    })
}

pub(crate) fn resolve(opts: &ClientOptions) -> Result<SocketAddr, ClientError> {
    let addrs: Vec<SocketAddr> = (opts.host.as_str(), opts.port)
        .to_socket_addrs()
        .map_err(|err| ClientError::Resolve {
            host: opts.host.clone(),
            err,
        })?
        .collect();
    let pick = |want: Option<Family>| {
        addrs.iter().copied().find(|a| match want {
            Some(Family::V4) => a.is_ipv4(),
            Some(Family::V6) => a.is_ipv6(),
            None => true,
        })
    };
    // Without -4/-6, a bound test goes to the server's address of the bound address's family.
    let bound = opts.bind.map(|b| match b.to_canonical() {
        std::net::IpAddr::V4(_) => Family::V4,
        std::net::IpAddr::V6(_) => Family::V6,
    });
    let chosen = match opts.family {
        Some(f) => pick(Some(f)),
        None => bound.and_then(|f| pick(Some(f))).or_else(|| pick(None)),
    };
    chosen.ok_or(ClientError::NoAddress {
        host: opts.host.clone(),
        family: if opts.family == Some(Family::V6) {
            "IPv6"
        } else {
            "IPv4"
        },
    })
}

/// A TCP connection to `addr`: the control connection (no `spec`), or data stream `id` of `spec`
/// (bound to its `--cport` port when one is given).
pub(crate) fn connect(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: Option<(&TestSpec, u32)>,
) -> Result<TcpStream, ClientError> {
    let err = |err| ClientError::Connect { addr, err };
    if opts.flow_label.is_some() && addr.is_ipv4() {
        // Said before the first connection, not after the server has taken the test.
        return Err(ClientError::FlowLabel {
            reason: format!("{addr} is IPv4, and flow labels are IPv6's (connect over IPv6: -6)"),
        });
    }
    let mptcp = spec.is_some_and(|(s, _)| s.mptcp);
    let protocol = if mptcp {
        socket2::Protocol::from(landspeed_engine::mptcp::IPPROTO_MPTCP)
    } else {
        socket2::Protocol::TCP
    };
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(protocol)).map_err(|e| {
        if mptcp {
            ClientError::Mptcp {
                reason: landspeed_engine::mptcp::unavailable_reason(&e),
            }
        } else {
            err(e)
        }
    })?;
    if let Some((spec, _)) = spec {
        sockopt::before_connect(&sock, spec)?;
    }
    bind_device(opts, &sock)?;
    if let (None, Some(k)) = (spec, &opts.control_keepalive) {
        keepalive(k, &sock).map_err(err)?;
    }
    let port = data_port(opts, spec.map(|(_, id)| id));
    if opts.bind.is_some() || port != 0 {
        // A port of the last test may still be in TIME_WAIT; binding it again is what --cport asks.
        sock.set_reuse_address(port != 0).map_err(err)?;
        sock.bind(&local(opts, addr, port).into()).map_err(err)?;
    }
    let to = match (spec, opts.flow_label) {
        (Some(_), Some(label)) => labelled(&sock, addr, label)?,
        _ => addr,
    };
    sock.connect_timeout(&to.into(), opts.connect_timeout)
        .map_err(err)?;
    Ok(sock.into())
}

/// `--flow-label`: the label set on a data connection's socket, and the address to connect to with
/// it (the label in its flow information, as the kernel wants it there too). IPv6 only.
fn labelled(sock: &Socket, addr: SocketAddr, label: u32) -> Result<SocketAddr, ClientError> {
    let SocketAddr::V6(v6) = addr else {
        return Ok(addr);
    };
    sockopt::set_flow_label(sock, *v6.ip(), label).map_err(|e| ClientError::FlowLabel {
        reason: e.to_string(),
    })?;
    let flowinfo = (label & 0xf_ffff).to_be();
    Ok(SocketAddr::V6(std::net::SocketAddrV6::new(
        *v6.ip(),
        v6.port(),
        flowinfo,
        v6.scope_id(),
    )))
}

/// `--cntl-ka` on the control connection's socket.
fn keepalive(k: &Keepalive, sock: &socket2::Socket) -> std::io::Result<()> {
    let mut ka = socket2::TcpKeepalive::new();
    if let Some(s) = k.idle_s {
        ka = ka.with_time(Duration::from_secs(u64::from(s)));
    }
    if let Some(s) = k.interval_s {
        ka = ka.with_interval(Duration::from_secs(u64::from(s)));
    }
    if let Some(n) = k.count {
        ka = ka.with_retries(n);
    }
    sock.set_tcp_keepalive(&ka)
}

/// `--bind-dev`: the socket sends from that interface only.
fn bind_device(opts: &ClientOptions, sock: &socket2::Socket) -> Result<(), ClientError> {
    match &opts.bind_device {
        Some(dev) => landspeed_engine::os::bind_device(sock, dev).map_err(|err| ClientError::BindDevice {
            device: dev.clone(),
            err,
        }),
        None => Ok(()),
    }
}

/// The engine hook of a client whose server says nothing while the data moves (the QUIC performance
/// protocol, iperf 2's): live intervals from this end's samples, and Ctrl-C, after which the senders
/// stop and what is in flight is still read, or, where the server cannot be told to stop sending
/// (`halts`: iperf 2's server sends until its own end), everything stops at once and the
/// connections close under it.
pub(crate) struct QuietHook<'a> {
    spec: &'a TestSpec,
    interrupt: &'a std::sync::atomic::AtomicBool,
    on_event: &'a mut dyn FnMut(ClientEvent),
    live: LiveIntervals,
    halts: bool,
}

impl<'a> QuietHook<'a> {
    pub(crate) fn new(
        spec: &'a TestSpec,
        interrupt: &'a std::sync::atomic::AtomicBool,
        on_event: &'a mut dyn FnMut(ClientEvent),
    ) -> Self {
        QuietHook {
            spec,
            interrupt,
            on_event,
            live: LiveIntervals::default(),
            halts: false,
        }
    }
}

impl EngineHook<()> for QuietHook<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        self.live.each_flow(self.spec, sample, self.on_event);
    }

    fn on_external(&mut self, _: (), _: &Flags) {}

    fn on_tick(&mut self, flags: &Flags) {
        if self.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            flags.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            if self.halts {
                flags.halt.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

/// Moves the data of a test whose server says nothing meanwhile (`QuietHook`). `halts`: the server
/// sends until its own end whatever this end does (iperf 2's, with `-R` or `--full-duplex`), so
/// Ctrl-C stops everything at once, what is in flight is left uncounted, and the connections close
/// under the server's writes, which ends its test.
pub(crate) fn measure_quietly(
    opts: &ClientOptions,
    spec: &TestSpec,
    (data, halts): (&DataPaths, bool),
    local: SocketAddr,
    interrupt: &std::sync::atomic::AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> supervisor::EngineOutput {
    let (tx, rx) = mpsc::channel::<Wake<()>>();
    let mut hook = QuietHook::new(spec, interrupt, on_event);
    hook.halts = halts;
    measure(
        opts,
        spec,
        (data, UdpFormat::Landspeed),
        local,
        (&tx, &rx),
        &mut hook,
    )
}

/// `measure_quietly` with datagrams in another tool's `format` (iperf 2's UDP client).
pub(crate) fn measure_quietly_as(
    opts: &ClientOptions,
    spec: &TestSpec,
    (data, format): (&DataPaths, UdpFormat),
    local: SocketAddr,
    interrupt: &std::sync::atomic::AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> supervisor::EngineOutput {
    let (tx, rx) = mpsc::channel::<Wake<()>>();
    let mut hook = QuietHook::new(spec, interrupt, on_event);
    measure(opts, spec, (data, format), local, (&tx, &rx), &mut hook)
}

/// Turns consecutive cumulative samples into live interval lines.
#[derive(Default)]
pub(crate) struct LiveIntervals {
    last: HashMap<u32, u64>,
    /// Each stream's last datagram counts, where its receiver keeps its jitter per sample.
    last_udp: HashMap<u32, landspeed_core::endpoint::UdpCounts>,
    last_reads: HashMap<u32, landspeed_core::endpoint::ReadBins>,
}

impl LiveIntervals {
    /// Each flow's interval line of `sample` (a flow with no stream in it says nothing), to
    /// `on_event`: every client hook's `on_sample`.
    pub(crate) fn each_flow(
        &mut self,
        spec: &TestSpec,
        sample: &IntervalSample,
        on_event: &mut dyn FnMut(ClientEvent),
    ) {
        for flow in spec.flows() {
            let iv = self.convert(sample, |id| spec.flow_of(id) == flow);
            if !iv.streams.is_empty() {
                on_event(ClientEvent::Interval { flow, interval: iv });
            }
        }
    }

    /// The datagrams sent and lost in the interval and the jitter at its end, for a stream whose
    /// receiver keeps its jitter per sample (iperf 2's `-u -R` receiver; other streams' live lines
    /// carry no datagram counts).
    fn udp_delta(&mut self, x: &landspeed_core::endpoint::StreamSample) -> Option<(u64, u64, f64)> {
        let now = x.udp.clone().filter(|u| u.jitter_ms.is_some())?;
        let prev = self.last_udp.insert(x.id, now.clone()).unwrap_or_default();
        let sent = now.expected.saturating_sub(prev.expected);
        Some((sent, now.missing().saturating_sub(prev.missing()), now.jitter_ms?))
    }

    pub(crate) fn convert(&mut self, s: &IntervalSample, keep: impl Fn(u32) -> bool) -> IntervalResult {
        let secs = (s.end_s - s.start_s).max(1e-9);
        let streams: Vec<IntervalStream> = s
            .streams
            .iter()
            .filter(|x| keep(x.id))
            .map(|x| {
                let prev = self.last.insert(x.id, x.bytes).unwrap_or(0);
                let bytes = x.bytes.saturating_sub(prev);
                let udp = self.udp_delta(x);
                IntervalStream {
                    id: x.id,
                    bytes,
                    throughput_bps: bytes as f64 * 8.0 / secs,
                    rtt_us: x.tcp.map(|t| t.rtt_us),
                    cwnd_bytes: x.tcp.map(|t| t.cwnd_bytes),
                    retransmits: x.tcp.map(|t| t.retransmits),
                    datagrams_sent: udp.map(|u| u.0),
                    datagrams_lost: udp.map(|u| u.1),
                    frames: None,
                    jitter_ms: udp.map(|u| u.2),
                    transit: x.udp.as_ref().and_then(|u| u.transit).or(x.trips),
                    reads: x
                        .reads
                        .map(|now| now.since(self.last_reads.insert(x.id, now).as_ref())),
                    transit_bins: x.trip_bins.clone(),
                    frames_heard: x.udp.as_ref().and_then(|u| u.frames.clone()),
                }
            })
            .collect();
        let bytes = streams.iter().map(|x| x.bytes).sum();
        IntervalResult {
            index: s.index,
            start_s: s.start_s,
            end_s: s.end_s,
            bytes,
            throughput_bps: bytes as f64 * 8.0 / secs,
            omitted: s.omitted,
            streams,
            probe_rtt: None,
        }
    }
}

/// Moves the data: the supervisor over this test's transport (UDP datagrams in `format`), the hook
/// following the control connection meanwhile. In iperf3's protocol (its UDP format stands for it)
/// the data connections carry no stream number, so the payload is the same on every stream.
pub(crate) fn measure<X: Send>(
    opts: &ClientOptions,
    spec: &TestSpec,
    (data, format): (&DataPaths, UdpFormat),
    local: SocketAddr,
    (tx, rx): (&mpsc::Sender<Wake<X>>, &mpsc::Receiver<Wake<X>>),
    hook: &mut dyn EngineHook<X>,
) -> supervisor::EngineOutput {
    let mut params = EngineParams::for_spec(spec, opts.threads, opts.cpus.clone(), opts.idle_timeout);
    params.read_bins = opts.read_bins.or(params.read_bins);
    params.quickack = opts.quickack;
    if matches!(format, UdpFormat::Iperf3 { .. }) {
        params.pattern = landspeed_core::payload::Pattern::for_unnumbered_streams(spec.payload_key);
    }
    let flags = Flags::default();
    let iface = landspeed_engine::host::interface_for(local.ip());
    let wiring = Wiring::new(&flags, (tx, rx), hook, iface.as_deref());
    match data {
        DataPaths::Udp(streams) => {
            let udp = Udp {
                streams,
                params: UdpParams::for_spec(spec, format),
            };
            supervisor::run(&udp, &params, wiring)
        }
        DataPaths::Tcp(streams) => supervisor::run(&Tcp(streams), &params, wiring),
        DataPaths::Quic(d) => {
            let quic = landspeed_engine::transport::quic::Quic {
                connections: &d.connections,
                streams: &d.streams,
            };
            supervisor::run(&quic, &params, wiring)
        }
    }
}

/// [`measure`] for a request/response test (`--rr`): its TCP streams through the engine's
/// request/response transport, the transactions into `log` (which the hook may read as they
/// come); their figures beside the engine's output. With `each` (a connection-each test) the
/// streams are the first connections, and it opens every later one.
pub(crate) fn measure_transactions<X: Send>(
    opts: &ClientOptions,
    (spec, t, log): (
        &TestSpec,
        landspeed_core::config::TransactionSpec,
        &std::sync::Mutex<landspeed_core::transactions::TransactionLog>,
    ),
    (streams, each): (
        &[landspeed_engine::transport::tcp::DataStream],
        Option<&dyn landspeed_engine::transport::rr::Connections>,
    ),
    local: SocketAddr,
    (tx, rx): (&mpsc::Sender<Wake<X>>, &mpsc::Receiver<Wake<X>>),
    hook: &mut dyn EngineHook<X>,
) -> (
    supervisor::EngineOutput,
    landspeed_core::transactions::TransactionsReport,
) {
    let params = EngineParams::for_spec(spec, opts.threads, opts.cpus.clone(), opts.idle_timeout);
    let flags = Flags::default();
    let iface = landspeed_engine::host::interface_for(local.ip());
    let wiring = Wiring::new(&flags, (tx, rx), hook, iface.as_deref());
    match each {
        // A connection each: after the first connections, `conns` opens each transaction's.
        Some(conns) => landspeed_engine::transport::rr::run_each(streams, (t, log), conns, &params, wiring),
        None => landspeed_engine::transport::rr::run(streams, (t, log), &params, wiring),
    }
}

/// How and where a test ran, for the result.
pub(crate) fn run_context(
    opts: &ClientOptions,
    local: SocketAddr,
    addr: SocketAddr,
    report: &EndpointReport,
    started_unix_s: f64,
    interrupted: bool,
    protocol: &str,
) -> RunContext {
    RunContext {
        host: opts.host.clone(),
        port: opts.port,
        local_address: local.to_string(),
        remote_address: addr.to_string(),
        family: if addr.is_ipv4() { "ipv4" } else { "ipv6" }.into(),
        threads: report.threads,
        cpus: opts.cpus.clone(),
        bind: opts.bind.map(|b| b.to_string()),
        started_unix_s,
        interrupted,
        protocol: protocol.into(),
        // iperf 2's scheduled start, or landspeed's (`start` sent at the instant).
        scheduled_start_unix_s: opts.start_at_unix_s.or_else(|| {
            let at = opts.start_at?.duration_since(std::time::UNIX_EPOCH).ok()?;
            Some(at.as_secs_f64())
        }),
        foreign_peer: false,
        served_here: false,
    }
}

/// Connects data stream `id` and sends its greeting (landspeed's preamble or iperf3's cookie).
pub(crate) fn tcp_stream(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    id: u32,
    greeting: &[u8],
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<DataStream, ClientError> {
    tcp_stream_timed(opts, addr, spec, (id, greeting), tls).map(|o| o.stream)
}

/// `tcp_stream`, with how long `connect()` took and the TLS handshake after it.
pub(crate) fn tcp_stream_timed(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    (id, greeting): (u32, &[u8]),
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<landspeed_engine::transport::rr::Opened, ClientError> {
    let (sock, tcp) = connect_timed(opts, addr, spec, id)?;
    let secured = std::time::Instant::now();
    let stream = greeted(opts, spec, (id, sock), greeting, tls)?;
    Ok(landspeed_engine::transport::rr::Opened {
        tcp,
        tls: stream.tls.as_ref().map(|_| secured.elapsed()),
        stream,
    })
}

/// Data stream `id`'s connection, and how long the `connect()` that made it took; a try that
/// fails is made again `opts.connect_retries` times at most (iperf 2's `--connect-retries`).
pub(crate) fn connect_timed(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    id: u32,
) -> Result<(TcpStream, std::time::Duration), ClientError> {
    let mut retries_left = opts.connect_retries;
    loop {
        let started = std::time::Instant::now();
        match connect(opts, addr, Some((spec, id))) {
            Ok(sock) => return Ok((sock, started.elapsed())),
            Err(ClientError::Connect { .. }) if retries_left > 0 => {
                retries_left -= 1;
                std::thread::sleep(CONNECT_RETRY_PAUSE);
            }
            Err(e) => return Err(e),
        }
    }
}

/// How long iperf 2.1.8 waits between tries of a refused connection (`--connect-retries`).
const CONNECT_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// A connected data stream's greeting sent, its options set and (with `tls`) its TLS handshake made.
pub(crate) fn greeted(
    opts: &ClientOptions,
    spec: &TestSpec,
    (id, sock): (u32, TcpStream),
    greeting: &[u8],
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<DataStream, ClientError> {
    let flow = spec.flow_of(id);
    let role = Role::at_client(flow);
    sock.set_write_timeout(Some(opts.control_timeout))
        .map_err(|err| ClientError::Stream { id, err })?;
    (&sock)
        .write_all(greeting)
        .map_err(|err| ClientError::Stream { id, err })?;
    sockopt::after_connect(&socket2::SockRef::from(&sock), spec, role == Role::Sender)?;
    let tls = match tls {
        Some(config) => Some(
            TlsLink::client(&sock, config.clone(), opts.control_timeout, ktls(spec)).map_err(|e| {
                ClientError::Tls {
                    id,
                    detail: e.to_string(),
                }
            })?,
        ),
        None => None,
    };
    Ok(DataStream {
        tls,
        file: None,
        id,
        flow,
        role,
        socket: sock,
        budget: if role == Role::Sender {
            spec.stream_budget(id)
        } else {
            None
        },
    })
}

/// A UDP socket for one stream: bound like the control connection (`-B`), with the test's buffers
/// (or 4 MiB) and type of service, connected to the server.
pub(crate) fn udp_socket(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    id: u32,
) -> std::io::Result<std::net::UdpSocket> {
    let sock = std::net::UdpSocket::bind(local(opts, addr, data_port(opts, Some(id))))?;
    if let Some(dev) = &opts.bind_device {
        landspeed_engine::os::bind_device(&socket2::SockRef::from(&sock), dev)?;
    }
    let buffer = landspeed_engine::transport::udp::DEFAULT_BUFFER;
    landspeed_engine::sockopt::udp_options(&sock, spec, buffer).map_err(std::io::Error::other)?;
    sock.connect(addr)?;
    Ok(sock)
}

/// This end's address for a connection to `addr` from `port` (0: any): `-B`'s, or the unspecified
/// address of `addr`'s family.
fn local(opts: &ClientOptions, addr: SocketAddr, port: u16) -> SocketAddr {
    let ip = opts.bind.unwrap_or(match addr {
        SocketAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    });
    SocketAddr::new(ip, port)
}

/// The local port of data stream `id` (`--cport` plus its number), 0 for the control connection or
/// without `--cport`. The CLI checks that every stream's port exists.
fn data_port(opts: &ClientOptions, id: Option<u32>) -> u16 {
    match (opts.cport, id) {
        (Some(p), Some(id)) => u16::try_from(u32::from(p) + id).unwrap_or(0),
        _ => 0,
    }
}

/// Whether the test's TLS records are the kernel's (`--ktls`).
pub(crate) fn ktls(spec: &TestSpec) -> bool {
    spec.tls.is_some_and(|t| t.ktls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_keepalive_is_set_as_asked_and_defaults_stay_the_systems() {
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let k = Keepalive {
            idle_s: Some(30),
            interval_s: Some(5),
            count: Some(3),
        };
        keepalive(&k, &sock).unwrap();
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(30));
        assert_eq!(sock.tcp_keepalive_interval().unwrap(), Duration::from_secs(5));
        assert_eq!(sock.tcp_keepalive_retries().unwrap(), 3);
        let plain = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let before = plain.tcp_keepalive_time().unwrap();
        keepalive(&Keepalive::default(), &plain).unwrap();
        assert!(plain.keepalive().unwrap());
        assert_eq!(plain.tcp_keepalive_time().unwrap(), before);
    }
}
