//! The client driver: connects to a landspeed server, runs the test through landspeed-core's
//! `ClientSession`, moves the data with the engine, and assembles the `RunResult`. Progress (connected,
//! live intervals) is reported through a callback; nothing is printed here.

mod iperf3;
mod latency;
mod ndt7;
mod quic;
mod quic_perf;
mod session;

pub use iperf3::run_iperf3_client;
pub use latency::LatencyOptions;
pub use ndt7::run_ndt7;
pub use quic_perf::run_quic_perf;
pub use session::run_client;

use crate::control::ControlError;
use crate::streams::DataPaths;
use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::{Flow, Test, TestSpec, Transport};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role};
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult};
use landspeed_core::tls::CertFingerprint;
use landspeed_engine::sockopt::{self, SockOptError};
use landspeed_engine::supervisor::{self, EngineHook, EngineParams, Flags, Wake, Wiring};
use landspeed_engine::transport::tcp::tls::TlsLink;
use landspeed_engine::transport::tcp::{DataStream, Tcp};
use landspeed_engine::transport::udp::{Udp, UdpFormat, UdpParams};
use landspeed_proto::udp_hello::{Challenge, Hello};
use landspeed_proto::{Admission, ClientSession, Preamble, ProtocolError, SessionId, StreamKey, Timers};
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

pub use landspeed_core::config::Family;

/// Everything a client run needs: where, the validated test, and how this end behaves.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The server's name or address.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// The validated test (`TestSpec::validated`).
    pub spec: Test,
    /// Worker threads on this end (None: one per CPU, at most one per stream).
    pub threads: Option<usize>,
    /// CPUs to pin this end's workers to.
    pub cpus: Option<Vec<usize>>,
    /// The local address to connect from.
    pub bind: Option<IpAddr>,
    /// The data connections' first local port (`--cport`): stream N binds it plus N.
    pub cport: Option<u16>,
    /// The network interface every connection sends from (`--bind-dev`, SO_BINDTODEVICE).
    pub bind_device: Option<String>,
    /// The IPv6 flow label of every TCP data connection (`--flow-label`, iperf3's `-L`; 1-0xfffff).
    pub flow_label: Option<u32>,
    /// iperf3's `--get-server-output`: ask an iperf3 server for its own output of the test.
    pub iperf3_server_output: bool,
    /// iperf3's `-T`: the title sent in the parameters (an iperf3 server puts it in its output).
    pub iperf3_title: Option<String>,
    /// iperf3's `--udp-counters-64bit`: 64-bit sequence numbers in iperf3's UDP header, asked of the
    /// server in the parameters.
    pub iperf3_udp64: bool,
    /// TCP keepalive on the control connection (iperf3's `--cntl-ka`).
    pub control_keepalive: Option<Keepalive>,
    /// iperf3's `--extra-data`: a string sent in the parameters (an iperf3 server puts it in its
    /// document).
    pub iperf3_extra_data: Option<String>,
    /// IPv4 or IPv6 only, when the name has both.
    pub family: Option<Family>,
    /// How long each connect may take.
    pub connect_timeout: Duration,
    /// How long each control message may take (each handshake step).
    pub control_timeout: Duration,
    /// A stream that moves nothing for this long fails.
    pub idle_timeout: Duration,
    /// Pin the server's TLS certificate to this fingerprint instead of the one it announces
    /// (`--tls-pin`).
    pub tls_pin: Option<landspeed_core::tls::CertFingerprint>,
    /// The key the conversation is authenticated with (`--auth`): a server that cannot prove it
    /// holds it is refused ...
    pub auth: Option<landspeed_proto::Key>,
    /// ... unless it does not ask for one and the key is to be used only when asked (a server's
    /// ordered tests, `serve --control-key`).
    pub auth_only_if_asked: bool,
    /// iperf3's own authentication for an iperf3 server (`--username`, `--rsa-public-key-path`): the
    /// token goes in the parameters.
    pub iperf3_auth: Option<std::sync::Arc<landspeed_iperf3::auth::ClientAuth>>,
    /// Echo probes before and during the test (`--latency`).
    pub latency: Option<LatencyOptions>,
    /// Send `start` at this instant (this host's clock) rather than as soon as the streams are ready:
    /// how a controller starts tests on many hosts together.
    pub start_at: Option<SystemTime>,
    /// Disk-to-disk: send this file (upload) ...
    pub send_file: Option<std::path::PathBuf>,
    /// ... or receive into this file or directory (download, with -R).
    pub recv_file: Option<std::path::PathBuf>,
    /// The file's name on the server (default: the local file's name).
    pub remote_file: Option<String>,
    /// A UDP test's datagram size was not given: take it from the path (the control connection's
    /// MSS, [`landspeed_core::udp::length_for_path`]) instead of the spec's.
    pub udp_length_from_path: bool,
}

impl ClientOptions {
    /// Options for `spec` against `host:port`, everything else at its default.
    pub fn new(host: impl Into<String>, port: u16, spec: Test) -> Self {
        ClientOptions {
            host: host.into(),
            port,
            spec,
            threads: None,
            cpus: None,
            bind: None,
            cport: None,
            bind_device: None,
            flow_label: None,
            iperf3_server_output: false,
            iperf3_title: None,
            iperf3_udp64: false,
            control_keepalive: None,
            iperf3_extra_data: None,
            family: None,
            connect_timeout: Duration::from_secs(5),
            control_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            auth: None,
            auth_only_if_asked: false,
            iperf3_auth: None,
            tls_pin: None,
            latency: None,
            start_at: None,
            send_file: None,
            recv_file: None,
            remote_file: None,
            udp_length_from_path: false,
        }
    }
}

/// Progress reported while a test runs.
#[derive(Debug, Clone)]
pub enum ClientEvent {
    /// The control connection is up.
    Connected {
        /// This end's address.
        local: SocketAddr,
        /// The server's address.
        remote: SocketAddr,
    },
    /// All streams are connected and the test is starting.
    Started {
        /// Data streams in all.
        streams: u32,
        /// What the user should know before the figures (a window cut by the kernel, ...).
        warnings: Vec<String>,
    },
    /// An interval closed on the receiving end of `flow`.
    Interval {
        /// The direction.
        flow: Flow,
        /// Its figures over the interval.
        interval: IntervalResult,
    },
}

/// Why a client run failed, by kind: callers decide retries and exit codes by variant.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server's name did not resolve.
    #[error("cannot resolve host '{host}': {err}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's reason.
        err: std::io::Error,
    },
    /// The name has no address of the family asked for.
    #[error("host '{host}' has no {family} address")]
    NoAddress {
        /// The name.
        host: String,
        /// IPv4 or IPv6.
        family: &'static str,
    },
    /// The server is iperf3, and the test asks for something iperf3 cannot do.
    #[error("the server speaks iperf3's protocol, which cannot carry {what}")]
    NotWithIperf3 {
        /// What, and why not.
        what: &'static str,
    },
    /// A QUIC test, and the server accepted it without a QUIC port or certificate: it predates QUIC.
    #[error(
        "the server accepted a QUIC test without offering QUIC (a landspeed server older than QUIC support?)"
    )]
    QuicNotOffered,
    /// No QUIC handshake completed in time.
    #[error(
        "no QUIC answer from {addr} within {after:?} (is UDP blocked, or QUIC turned off on the server?)"
    )]
    QuicTimeout {
        /// The server's QUIC address.
        addr: SocketAddr,
        /// How long the client waited.
        after: Duration,
    },
    /// `--flow-label`: the label cannot be used.
    #[error("cannot set the IPv6 flow label: {reason}")]
    FlowLabel {
        /// Why.
        reason: String,
    },
    /// `--bind-dev`: the interface cannot be bound.
    #[error("cannot send from interface {device}: {err}")]
    BindDevice {
        /// The interface.
        device: String,
        /// The kernel's reason (no such device, not permitted).
        err: std::io::Error,
    },
    /// An ndt7 subtest that could not start (`run --ndt7`).
    #[error("ndt7: {detail}")]
    Ndt7 {
        /// What went wrong.
        detail: String,
    },
    /// A QUIC connection or stream failed.
    #[error("QUIC: {detail}")]
    Quic {
        /// What went wrong.
        detail: String,
    },
    /// Kernel TLS was asked for and cannot be used.
    #[error("kernel TLS: {reason}")]
    Ktls {
        /// Why not, in words.
        reason: String,
    },
    /// A `--tls` test, and the server accepted it without announcing a certificate: it predates TLS.
    #[error("the server accepted the test without offering TLS (a landspeed server older than TLS support?); run without TLS")]
    TlsNotOffered,
    /// A data stream's TLS handshake failed.
    #[error("stream {id}: {detail}")]
    Tls {
        /// The stream.
        id: u32,
        /// What went wrong.
        detail: String,
    },
    /// The test asks for something this platform does not have.
    #[error(transparent)]
    Unsupported(#[from] landspeed_engine::platform::Unsupported),
    /// MPTCP was asked for and this host cannot open an MPTCP socket.
    #[error("cannot open an MPTCP socket: {reason}")]
    Mptcp {
        /// The kernel's side of it, in words.
        reason: String,
    },
    /// No connection to the server.
    #[error("cannot connect to {addr}: {err}")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// Why not.
        err: std::io::Error,
    },
    /// Something answered that is not a landspeed server.
    #[error("{addr} does not speak the landspeed protocol ({detail})")]
    NotLandspeed {
        /// The server's address.
        addr: SocketAddr,
        /// What it did instead.
        detail: String,
    },
    /// The control connection failed (I/O, a timeout, the server closed it).
    #[error("control connection to {addr}: {err}")]
    Control {
        /// The server's address.
        addr: SocketAddr,
        /// What happened.
        err: ControlError,
    },
    /// The conversation failed (a timeout at a step, a message out of turn, a remote error).
    #[error(transparent)]
    Protocol(ProtocolError),
    /// The server closed the control connection mid-conversation: it was stopped, killed or
    /// restarted.
    #[error(
        "the server went away while {phase}: it closed the control connection (stopped, killed or restarted)"
    )]
    ServerWentAway {
        /// What the client was waiting for.
        phase: &'static str,
    },
    /// The data streams ended, but the server's results never came on the control connection.
    #[error("the data streams ended, but no answer came on the control connection for {after:?}: the control connection (or the server) went silent")]
    ControlSilent {
        /// How long the results were waited for after the data ended.
        after: Duration,
    },
    /// The data connections moved nothing for the idle timeout and then the control connection
    /// brought no results either: the path or the server went away mid-test.
    #[error("no progress for {idle:?} on the data connections ({streams}), then no answer on the control connection for {control_after:?}: the path or the server went away")]
    WentSilent {
        /// The idle timeout the data streams gave up after.
        idle: Duration,
        /// Each failed stream and why.
        streams: String,
        /// How long the control connection was then waited on.
        control_after: Duration,
    },
    /// The server is at a capacity limit or rate-limits this address: the same test can succeed later.
    #[error("the server is busy: {reason}")]
    Busy {
        /// The server's words.
        reason: String,
    },
    /// The server refused the test for a reason a retry will not change.
    #[error("the server refused the test: {reason}")]
    Refused {
        /// The server's typed reason.
        code: landspeed_proto::Refusal,
        /// The server's words.
        reason: String,
    },
    /// A data stream failed to open.
    #[error("data stream {id}: {err}")]
    Stream {
        /// The stream.
        id: u32,
        /// Why.
        err: std::io::Error,
    },
    /// The test is not valid.
    #[error("invalid test: {0}")]
    Config(#[from] landspeed_core::config::ConfigError),
    /// A socket option the test asks for could not be set.
    #[error(transparent)]
    SockOpt(#[from] SockOptError),
    /// Ctrl-C before the data moved.
    #[error("interrupted before the test started")]
    Interrupted,
    /// A file test asked for the direction its file cannot move in: a file sent from this end needs a
    /// forward test, a file received here a reverse one.
    #[error("{}", if *.upload {
        "a file sent from this end needs a forward test (not reverse or bidirectional)"
    } else {
        "a file received at this end needs a reverse test"
    })]
    FileDirection {
        /// True for a file sent from this end, false for one received here.
        upload: bool,
    },
    /// The system had no randomness to give (cookie, key, session id).
    #[error("no randomness for {what}: {err}")]
    Random {
        /// What it was for.
        what: &'static str,
        /// Why not.
        err: getrandom::Error,
    },
    /// The server answered with something the session did not wait for at this step.
    #[error("the server answered out of order while {step}")]
    OutOfOrder {
        /// Which step.
        step: &'static str,
    },
    #[error(
        "UDP stream {id}: the server did not acknowledge it within {after:?} (is UDP port {port} open?)"
    )]
    /// A UDP stream's hello got no acknowledgement.
    UdpUnacknowledged {
        /// The stream.
        id: u32,
        /// How long it was tried.
        after: Duration,
        /// The server's UDP port.
        port: u16,
    },
    /// An iperf3 server refused the test with its own error numbers (SERVER_ERROR).
    #[error("the iperf3 server refused the test: {} (iperf3 error {code})", landspeed_iperf3::strerror::server_error(*code, *errno))]
    Iperf3Refused {
        /// iperf3's error number.
        code: i32,
        /// The server's errno.
        errno: i32,
    },
    /// An iperf3 server sent a state other than the one its protocol has next.
    #[error("the iperf3 server said {got}, expected {expected}")]
    Iperf3Unexpected {
        /// The state that came.
        got: String,
        /// What the protocol has next.
        expected: &'static str,
    },
    /// The iperf3 conversation failed (the session's typed reason: a timeout or the server leaving
    /// at a named step, its results unreadable, SERVER_TERMINATE).
    #[error("iperf3: {0}")]
    Iperf3(landspeed_iperf3::Iperf3Error),
    /// The iperf3 control connection failed (an I/O error, a write that timed out).
    #[error("iperf3 control connection: {0}")]
    Iperf3Control(ControlError),
    /// An iperf3 server answered a UDP stream's hello with something other than `6789`.
    #[error("UDP stream {id}: unexpected answer to the iperf3 UDP hello")]
    Iperf3UdpHello {
        /// The stream.
        id: u32,
    },
    /// The client holds a key and the server answered in iperf3's protocol, which cannot carry it:
    /// the test stops rather than fall back unauthenticated (a downgrade anyone in the path can cause
    /// with one byte).
    #[error(
        "{addr} answered in iperf3's protocol (first byte {first_byte:#04x}), which cannot authenticate; \
         a client with a key does not fall back to it"
    )]
    Downgrade {
        /// The server's address.
        addr: SocketAddr,
        /// The byte it answered with.
        first_byte: u8,
    },
    /// The server answered in iperf3's protocol (PARAM_EXCHANGE or ACCESS_DENIED): retry with
    /// `run_iperf3_client`.
    #[error("{addr} is an iperf3 server")]
    Iperf3Server {
        /// The server's address.
        addr: SocketAddr,
    },
    /// A file of a disk-to-disk test could not be read or written.
    #[error("file {path}: {err}")]
    File {
        /// The file.
        path: String,
        /// Why.
        err: std::io::Error,
    },
    /// The latency probes could not run.
    #[error("latency probes: {0}")]
    Latency(#[from] landspeed_path::echo::EchoError),
}

impl From<ProtocolError> for ClientError {
    /// A refusal becomes `Busy` or `Refused` by its code, so callers decide by variant.
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Rejected { code, reason } if code.is_transient() => ClientError::Busy { reason },
            ProtocolError::Rejected { code, reason } => ClientError::Refused { code, reason },
            other => ClientError::Protocol(other),
        }
    }
}

impl ClientError {
    /// Trying the same test again later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Busy { .. })
    }
}

fn resolve(opts: &ClientOptions) -> Result<SocketAddr, ClientError> {
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

/// TCP keepalive probes on the control connection: after `idle` without traffic, every `interval`,
/// `count` unanswered ones ending it; each None is the system's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    /// Seconds without traffic before the first probe (TCP_KEEPIDLE).
    pub idle_s: Option<u32>,
    /// Seconds between probes (TCP_KEEPINTVL).
    pub interval_s: Option<u32>,
    /// Unanswered probes that end the connection (TCP_KEEPCNT).
    pub count: Option<u32>,
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

/// Turns consecutive cumulative samples into live interval lines.
#[derive(Default)]
struct LiveIntervals {
    last: HashMap<u32, u64>,
}

impl LiveIntervals {
    fn convert(&mut self, s: &IntervalSample, keep: impl Fn(u32) -> bool) -> IntervalResult {
        let secs = (s.end_s - s.start_s).max(1e-9);
        let streams: Vec<IntervalStream> = s
            .streams
            .iter()
            .filter(|x| keep(x.id))
            .map(|x| {
                let prev = self.last.insert(x.id, x.bytes).unwrap_or(0);
                let bytes = x.bytes.saturating_sub(prev);
                IntervalStream {
                    id: x.id,
                    bytes,
                    throughput_bps: bytes as f64 * 8.0 / secs,
                    rtt_us: x.tcp.map(|t| t.rtt_us),
                    cwnd_bytes: x.tcp.map(|t| t.cwnd_bytes),
                    retransmits: x.tcp.map(|t| t.retransmits),
                    datagrams_sent: None,
                    datagrams_lost: None,
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

/// The run's result from both ends' reports, with the latency probes' figures and a received file
/// settled against the sender's report.
fn result(
    inputs: &Inputs,
    latency: Option<latency::LatencyRun>,
    incoming: Option<landspeed_engine::files::Incoming>,
) -> RunResult {
    let mut result = assemble(inputs);
    if let Some(l) = latency {
        l.finish(&mut result);
    }
    if let (Some(mut inc), Some(mine)) = (incoming, inputs.client.file.as_ref()) {
        result
            .warnings
            .extend(inc.settle(mine, inputs.server.file.as_ref()).err());
    }
    result
}

/// The test as this client asks for it: a fresh payload key, the file to send or receive prepared
/// (each change validated again).
fn test_spec(opts: &ClientOptions) -> Result<(Test, Option<LocalFile>), ClientError> {
    if ktls(&opts.spec) {
        if let Some(reason) = landspeed_engine::tls::ktls_unavailable_reason() {
            return Err(ClientError::Ktls { reason });
        }
    }
    let mut test = opts.spec.clone();
    // The server gives up on a silent test no later than this client does.
    let idle = opts.idle_timeout.as_secs_f64();
    test = test.changed(|s| s.idle_timeout_s = Some(idle))?;
    if test.payload_key == 0 {
        // The run's payload key; any value works, a random one makes every run's payload different.
        test = test.with_payload_key(getrandom::u64().unwrap_or(0x5eed) | 1);
    }
    let local_file = prepare_file(opts, &mut test)?;
    Ok((test, local_file))
}

/// Whether the test's TLS records are the kernel's (`--ktls`).
fn ktls(spec: &TestSpec) -> bool {
    spec.tls.is_some_and(|t| t.ktls)
}

/// Opens the test's data connections (their preambles proven with the stream key in a keyed test);
/// a file test's streams carry its file, and its sender its size.
fn open_data(
    opts: &ClientOptions,
    spec: &TestSpec,
    addr: SocketAddr,
    (a, key): (Admission, Option<&StreamKey>),
    local_file: Option<&LocalFile>,
) -> Result<DataPaths, ClientError> {
    match spec.transport {
        Transport::Udp => return Ok(DataPaths::Udp(open_udp_streams(opts, addr, a.session, key)?)),
        Transport::Quic => return Ok(DataPaths::Quic(quic::open(opts, spec, addr, (a, key))?)),
        Transport::Tcp => {}
    }
    let tls = tls_config(opts, spec, a.certificate)?;
    let mut tcp = open_streams(opts, addr, (a.session, key), tls.as_ref())?;
    if let Some(lf) = local_file {
        for s in &mut tcp {
            s.file = Some(lf.handle.clone());
            if s.role == Role::Sender {
                s.budget = lf.report.as_ref().map(|r| r.size_bytes);
            }
        }
    }
    Ok(DataPaths::Tcp(tcp))
}

/// What the user should know before the data moves: a server rate cap, socket buffers smaller than
/// asked.
fn start_warnings(session: &ClientSession, spec: &TestSpec, data: &DataPaths) -> Vec<String> {
    let mut warnings = vec![];
    if let (Some(cap), Transport::Tcp) = (
        session.server_limits().and_then(|l| l.max_rate_bps),
        spec.transport,
    ) {
        warnings.push(format!(
            "the server paces every test to at most {} in all (its rate limit): this result measures \
             that cap, not the path",
            landspeed_core::units::BitRate(cap)
        ));
    }
    warnings.extend(data.window_warning(spec.window_bytes));
    warnings
}

/// Latency probes: the idle baseline is in, the loaded phase starts (a warning if nothing answered).
fn latency_begins(l: &mut latency::LatencyRun) -> Option<String> {
    let idle = l.wait_idle();
    l.loaded();
    (!idle).then(|| {
        "latency probes: no echo replies from the server (UDP blocked, or not a landspeed server); the \
         latency figures are empty"
            .into()
    })
}

/// Moves the data: the supervisor over this test's transport (UDP datagrams in `format`), the hook
/// following the control connection meanwhile. In iperf3's protocol (its UDP format stands for it)
/// the data connections carry no stream number, so the payload is the same on every stream.
fn measure<X: Send>(
    opts: &ClientOptions,
    spec: &TestSpec,
    (data, format): (&DataPaths, UdpFormat),
    local: SocketAddr,
    (tx, rx): (&mpsc::Sender<Wake<X>>, &mpsc::Receiver<Wake<X>>),
    hook: &mut dyn EngineHook<X>,
) -> supervisor::EngineOutput {
    let mut params = EngineParams::for_spec(spec, opts.threads, opts.cpus.clone(), opts.idle_timeout);
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

/// This end's report, with its file's when the test moved one (a download's file is hashed now).
fn local_report(
    opts: &ClientOptions,
    out: &supervisor::EngineOutput,
    warnings: Vec<String>,
    local_file: Option<LocalFile>,
) -> Result<(EndpointReport, Option<landspeed_engine::files::Incoming>), ClientError> {
    let mut report = out.report(opts.cpus.clone(), warnings);
    let Some(lf) = local_file else {
        return Ok((report, None));
    };
    match (lf.report, lf.incoming) {
        (Some(r), _) => {
            report.file = Some(r);
            Ok((report, None))
        }
        (None, Some(inc)) => {
            report.file = Some(inc.report().map_err(|err| ClientError::File {
                path: inc.dest.display().to_string(),
                err,
            })?);
            Ok((report, Some(inc)))
        }
        (None, None) => Ok((report, None)),
    }
}

/// The session's timers from the client's options. A download waits while the server reads and hashes
/// its file before accepting (bounded).
fn timers(opts: &ClientOptions) -> Timers {
    Timers {
        handshake: opts.control_timeout,
        accept_extra: if opts.recv_file.is_some() {
            Duration::from_secs(600)
        } else {
            Duration::ZERO
        },
        results: opts.idle_timeout + opts.control_timeout,
    }
}

/// A `--tls` test's client configuration: the suite asked for, pinned to `--tls-pin` or else to the
/// certificate the server announced.
fn tls_config(
    opts: &ClientOptions,
    spec: &TestSpec,
    announced: Option<CertFingerprint>,
) -> Result<Option<Arc<rustls::ClientConfig>>, ClientError> {
    let Some(tls) = spec.tls else {
        return Ok(None);
    };
    let pin = opts.tls_pin.or(announced).ok_or(ClientError::TlsNotOffered)?;
    let trust = landspeed_engine::tls::Trust::Pinned(pin);
    landspeed_engine::tls::client_config(&[tls.cipher], trust, &[])
        .map(Some)
        .map_err(|e| ClientError::Tls {
            id: 0,
            detail: e.to_string(),
        })
}

fn open_streams(
    opts: &ClientOptions,
    addr: SocketAddr,
    (sid, key): (SessionId, Option<&StreamKey>),
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Vec<DataStream>, ClientError> {
    let spec = &opts.spec;
    (0..spec.total_streams())
        .map(|id| {
            let pre = Preamble::data(sid, id, key).encode();
            tcp_stream(opts, addr, spec, id, &pre, tls)
        })
        .collect()
}

/// How and where a test ran, for the result.
fn run_context(
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
        foreign_peer: false,
        served_here: false,
    }
}

/// The client's file in a disk-to-disk test.
struct LocalFile {
    handle: Arc<std::fs::File>,
    /// Upload: the read-and-hash pass (done before connecting).
    report: Option<landspeed_core::files::FileReport>,
    /// Download: the file being received.
    incoming: Option<landspeed_engine::files::Incoming>,
}

/// Upload: reads and hashes the file, and puts its name and size in the spec. Download: creates the
/// local file and asks for the remote one.
fn prepare_file(opts: &ClientOptions, spec: &mut Test) -> Result<Option<LocalFile>, ClientError> {
    use landspeed_core::config::{Direction, EndCondition};
    use landspeed_core::files::FileSpec;
    let ferr = |path: &std::path::Path, err| ClientError::File {
        path: path.display().to_string(),
        err,
    };
    let base = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    if let Some(path) = &opts.send_file {
        if spec.direction != Direction::Forward {
            return Err(ClientError::FileDirection { upload: true });
        }
        let report = landspeed_engine::files::sender_report(path).map_err(|e| ferr(path, e))?;
        if report.size_bytes == 0 {
            return Err(ferr(path, std::io::Error::other("the file is empty")));
        }
        let name = opts
            .remote_file
            .clone()
            .or_else(|| base(path))
            .unwrap_or_default();
        *spec = spec.changed(|s| {
            s.file = Some(FileSpec {
                name,
                size_bytes: Some(report.size_bytes),
            });
            s.end = EndCondition::Bytes(report.size_bytes);
        })?;
        let handle = std::fs::File::open(path).map_err(|e| ferr(path, e))?;
        return Ok(Some(LocalFile {
            handle: Arc::new(handle),
            report: Some(report),
            incoming: None,
        }));
    }
    if let Some(dest) = &opts.recv_file {
        if spec.direction != Direction::Reverse {
            return Err(ClientError::FileDirection { upload: false });
        }
        let name = opts
            .remote_file
            .clone()
            .or_else(|| base(dest))
            .unwrap_or_default();
        let path = if dest.is_dir() {
            dest.join(&name)
        } else {
            dest.clone()
        };
        *spec = spec.changed(|s| {
            s.file = Some(FileSpec {
                name,
                size_bytes: None,
            });
            // The server sends the whole file; its size is known there.
            s.end = EndCondition::Bytes(1);
        })?;
        let incoming = landspeed_engine::files::Incoming::create(&path).map_err(|e| ferr(&path, e))?;
        return Ok(Some(LocalFile {
            handle: incoming.handle.clone(),
            report: None,
            incoming: Some(incoming),
        }));
    }
    Ok(None)
}

/// Connects data stream `id` and sends its greeting (landspeed's preamble or iperf3's cookie).
fn tcp_stream(
    opts: &ClientOptions,
    addr: SocketAddr,
    spec: &TestSpec,
    id: u32,
    greeting: &[u8],
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<DataStream, ClientError> {
    let sock = connect(opts, addr, Some((spec, id)))?;
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
fn udp_socket(
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

/// Opens the UDP streams: a connected socket per stream, which says hello (the data preamble, with its
/// MAC in a keyed test) until the server acknowledges it with the stream's version-1 preamble from
/// its own socket for the stream. A server that does
/// not see the hello come from the control connection's address (a NAT that maps UDP elsewhere)
/// answers with a challenge instead, whose token the next hellos carry (`proto::udp_hello`).
fn open_udp_streams(
    opts: &ClientOptions,
    addr: SocketAddr,
    sid: SessionId,
    key: Option<&StreamKey>,
) -> Result<Vec<landspeed_engine::transport::udp::UdpStream>, ClientError> {
    let spec = &opts.spec;
    (0..spec.total_streams())
        .map(|id| {
            let err = |err| ClientError::Stream { id, err };
            let sock = udp_socket(opts, addr, spec, id).map_err(err)?;
            sock.set_read_timeout(Some(Duration::from_millis(200)))
                .map_err(err)?;
            let mut hello = Hello::new(sid, id, key);
            // The server acknowledges with the stream's version-1 preamble (no MAC: it proves nothing
            // to the client, whose data is not authenticated anyway).
            let ack = Preamble::data(sid, id, None).encode();
            let deadline = Instant::now() + opts.control_timeout;
            let mut buf = [0u8; 64];
            loop {
                if Instant::now() >= deadline {
                    return Err(ClientError::UdpUnacknowledged {
                        id,
                        after: opts.control_timeout,
                        port: opts.port,
                    });
                }
                // ECONNREFUSED from an earlier hello means nothing listens yet; keep trying until the deadline.
                let _ = sock.send(&hello.encode());
                match sock.recv(&mut buf) {
                    Ok(n) if buf[..n] == ack[..] => break,
                    Ok(n) => match Challenge::parse(&buf[..n]) {
                        Some(c) if (c.session, c.stream) == (sid, id) => hello.token = Some(c.token),
                        _ => continue,
                    },
                    Err(_) => continue,
                }
            }
            Ok(landspeed_engine::transport::udp::UdpStream::of_test(
                spec,
                id,
                Role::at_client,
                sock,
            ))
        })
        .collect()
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
