//! The state every listener and test of `landspeed serve` shares, whatever protocol it speaks: the
//! server's options, its pools (running tests, connections still proving themselves, memory), the
//! registries where tests wait for their data connections, the refusal log and counters, the TLS
//! identity and the QUIC endpoint. Each protocol's server side (`landspeed::server`,
//! `iperf3::server`, `ndt7::server`, `rpm::server`, `quic_perf::server`) takes what it needs from
//! here; the listeners that tell the protocols apart are in `server`.

mod error;

pub use error::{MissingWhy, TestError};

use crate::control::{self, Input};
use landspeed_core::endpoint::Role;
pub use landspeed_core::server_log::{RefusalKind, ServerEvent, ServerStats, TestLog};
use landspeed_engine::supervisor::{self, Wake};
use landspeed_proto::admission::{self, PlaceId, Pool, Refused};
use landspeed_proto::rate::{Full, Occupancy};
use landspeed_proto::{Preamble, SessionId};
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Condvar;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How `landspeed serve` runs: where it listens, its timeouts and limits, whom it serves.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The address to listen on (None: every address, IPv4 and IPv6).
    pub bind: Option<IpAddr>,
    /// The TCP and UDP port.
    pub port: u16,
    /// Serve one test, then return.
    pub once: bool,
    /// Time a client has for each handshake step.
    pub handshake_timeout: Duration,
    /// A stream that moves nothing for this long fails.
    pub idle_timeout: Duration,
    /// Tests running at once, both protocols together; one more is told "busy".
    pub max_tests: usize,
    /// Tests running at once from one address (IPv6: one /64).
    pub max_tests_per_address: usize,
    /// What one test may ask for (advertised in the welcome).
    pub limits: landspeed_proto::Limits,
    /// Client networks allowed to test (empty: everyone).
    pub allow: Vec<ipnet::IpNet>,
    /// Raised (e.g. by SIGUSR1) to ask for a `ServerEvent::Stats`; the server lowers it.
    pub stats_signal: Option<Arc<AtomicBool>>,
    /// Keys a landspeed client must prove it holds (`--auth-keys`); None: no authentication.
    pub auth: Option<Arc<landspeed_proto::KeyRing>>,
    /// Take third-party orders from clients that authenticate with `auth` (`--allow-control`).
    pub allow_control: bool,
    /// The key this server answers other servers' challenges with when it runs an order.
    pub control_key: Option<landspeed_proto::Key>,
    /// Disk-to-disk tests write into and read from this directory (`--files`); None: refused.
    pub files_dir: Option<std::path::PathBuf>,
    /// Listen with an MPTCP socket where the kernel allows it, so `run --mptcp` clients get MPTCP data
    /// connections; plain TCP clients are accepted on it as plain TCP sockets. False: plain TCP.
    pub mptcp: bool,
    /// The certificate and key encrypted data connections present (`--cert`/`--key`); None: a
    /// self-signed certificate made when the server binds.
    pub identity: Option<Arc<landspeed_engine::tls::Identity>>,
    /// Serve QUIC (`run --quic` and the QUIC performance protocol) on UDP.
    pub quic: bool,
    /// The UDP port of the QUIC endpoint (None: the server's own port number, shared with its UDP
    /// listener).
    pub quic_port: Option<u16>,
    /// Serve M-Lab's ndt7 speed test (WebSocket) on this address (`--ndt7`); None: off.
    pub ndt7: Option<ListenerOptions>,
    /// Serve the responsiveness test's HTTP endpoints on this address (`--rpm`); None: off.
    pub rpm: Option<ListenerOptions>,
    /// Emit `ServerEvent::Progress` as each iperf3 or iperf 2 client's test runs (the live server
    /// text of `landspeed iperf3 -s` and of the `iperf -s` drop-in).
    pub live: bool,
    /// The interval of an iperf 2 client's test as this server samples it (iperf 2's server `-i`,
    /// the `iperf -s -i` drop-in's); None: the test's default (1 s).
    pub iperf2_interval: Option<Duration>,
    /// An iperf 2 client's TCP test is read this much a call and its reads counted by size (the
    /// `iperf -s -e` drop-in's read buffer, its `-l`: `Reads=Dist`); None: not counted.
    pub iperf2_reads: Option<usize>,
    /// Each iperf 2 client's TCP connection's receive window clamped to this many bytes
    /// (TCP_WINDOW_CLAMP: the `iperf -s --tcp-rx-window-clamp` drop-in's); None: not clamped.
    pub iperf2_rx_clamp: Option<u32>,
    /// iperf 2 clients' one-way transits binned (the `iperf -s --histograms` drop-in): TCP bursts
    /// and UDP datagrams of clients with `--trip-times`; None: not binned.
    pub iperf2_histograms: Option<landspeed_core::transit_bins::BinSpec>,
    /// iperf3's `--server-bitrate-limit` (the drop-in's server): iperf3 tests asking for more in all
    /// are refused, and ended once they move more on average, with iperf3's TOTAL_RATE.
    pub iperf3_total_rate: Option<landspeed_iperf3::total_rate::TotalRateLimit>,
    /// iperf3's own RSA authentication for iperf3 clients (`iperf3 -s --rsa-private-key-path
    /// --authorized-users-path`, `serve --iperf3-rsa-key --iperf3-users`): a token is required of
    /// every iperf3 client, and a keyed server admits iperf3 clients that pass it.
    pub iperf3_auth: Option<Arc<landspeed_iperf3::auth::ServerAuth>>,
    /// Send this host's details (name, OS, kernel, CPU model, memory, command line, interface) to every
    /// client; false: only to clients that proved a key (others get its CPU count and sysctls).
    pub share_host: bool,
    /// Protocols that cannot prove a landspeed key, served anyway by a server with `auth`
    /// (`--open`); without `auth` every protocol is open.
    pub open: Vec<Keyless>,
    /// Answer iperf 2's `-r` and `-d` by opening connections back to the client's address, at
    /// the port its header names (1024 and above), and sending on them (`--connect-back`; the
    /// `iperf -s` drop-in's default, as iperf 2's server does). False: those tests are refused.
    pub connect_back: bool,
    /// Answer iperf 2's UDP `-R` by sending the test's datagrams to the address and port its first
    /// datagram came from (`--iperf2-udp-send`; the `iperf -s` drop-in's default, as iperf 2's
    /// server does). False: those tests are refused.
    pub iperf2_udp_send: bool,
    /// Flag each iperf 2 UDP report for iperf 2's client to print with its `-e` columns, as iperf
    /// 2.1.8's server does when it runs with `-e` (the `iperf -s -u -e` drop-in's).
    pub iperf2_enhanced: bool,
    /// A multicast group to join on the UDP port (`--join`, the `iperf -s -u -B GROUP` drop-in's):
    /// iperf 2's multicast senders to it are received and counted there, one test each, and
    /// nothing is sent back to them (no report: nothing answers a group's sender).
    pub join: Option<crate::multicast::GroupPlan>,
}

/// A protocol that cannot carry landspeed's key, which a keyed server refuses unless the operator
/// opens it by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyless {
    /// iperf3's protocol (its clients without iperf3's own credentials).
    Iperf3,
    /// iperf 2's protocol (it has no authentication).
    Iperf2,
    /// M-Lab's ndt7.
    Ndt7,
    /// The QUIC performance protocol.
    QuicPerf,
    /// The responsiveness test's HTTP endpoints (`--rpm`).
    Rpm,
}

/// Where and how an HTTP listener of the server (`serve --ndt7`, `--rpm`) listens.
#[derive(Debug, Clone, Copy)]
pub struct ListenerOptions {
    /// The address (its own port: 443 or 80 for browsers, any for other clients).
    pub addr: SocketAddr,
    /// TLS (wss, https) with the server's certificate; false: plain ws and http (`--ndt7-plain`,
    /// `--rpm-plain`).
    pub tls: bool,
}

/// Tests held at once by default: enough for a busy public server on a small host.
pub const DEFAULT_MAX_TESTS: usize = 32;
/// Tests one address may hold at once by default: a quarter of the slots, so one host cannot take
/// them all.
pub const DEFAULT_MAX_TESTS_PER_ADDRESS: usize = 8;

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bind: None,
            port: 5201,
            once: false,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_tests: DEFAULT_MAX_TESTS,
            max_tests_per_address: DEFAULT_MAX_TESTS_PER_ADDRESS,
            limits: landspeed_proto::Limits::default(),
            allow: vec![],
            stats_signal: None,
            auth: None,
            allow_control: false,
            control_key: None,
            files_dir: None,
            mptcp: true,
            identity: None,
            quic: true,
            quic_port: None,
            ndt7: None,
            rpm: None,
            live: false,
            iperf2_interval: None,
            iperf2_reads: None,
            iperf2_rx_clamp: None,
            iperf2_histograms: None,
            iperf3_total_rate: None,
            open: vec![],
            connect_back: false,
            iperf2_udp_send: false,
            iperf2_enhanced: false,
            join: None,
            share_host: false,
            iperf3_auth: None,
        }
    }
}

/// Adds what the engine measured on this server's streams to the test's log entry.
pub(crate) fn add_measured(log: &mut TestLog, out: &supervisor::EngineOutput) {
    log.duration_s = out.elapsed_s;
    for s in &out.streams {
        match s.role {
            Role::Receiver => {
                log.bytes_received += s.bytes;
                log.bytes_verified += s.bytes_verified;
                log.corrupt_blocks += s.corrupt_blocks;
            }
            Role::Sender => log.bytes_sent += s.bytes,
        }
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    tests_ok: u64,
    tests_failed: u64,
    bytes_received: u64,
    bytes_sent: u64,
    refused: std::collections::BTreeMap<RefusalKind, u64>,
    last_test: Option<landspeed_core::server_log::TestLog>,
}

/// Why the server could not start or keep serving.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The TLS identity could not be made.
    #[error("{0}")]
    Tls(#[from] landspeed_engine::tls::TlsError),
    /// The port could not be bound.
    #[error("cannot listen on {addr}: {err}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why not.
        err: std::io::Error,
    },
    /// The group given to join could not be joined.
    #[error(transparent)]
    Join(#[from] crate::multicast::McError),
    /// Another I/O error of the listeners.
    #[error("server I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// A test waiting for its data connections: where the listeners hand them, the address its control
/// connection came from, and in a keyed test the key its data preambles are proven with (a data
/// connection or UDP hello is not taken on the word of its session id: docs/security.md, "Data
/// connections").
#[derive(Clone)]
pub(crate) struct Waiter {
    /// The test's wake-up channel.
    pub(crate) tx: mpsc::Sender<Wake<control::Input>>,
    /// The control connection's peer address (canonical).
    pub(crate) control: IpAddr,
    /// The stream key, when the test's data preambles carry a MAC (data preamble version 2).
    pub(crate) streams: Option<landspeed_proto::StreamKey>,
}

impl Waiter {
    /// A waiter for a keyless test (iperf3's, or one without a key).
    pub(crate) fn keyless(tx: mpsc::Sender<Wake<control::Input>>, control: IpAddr) -> Waiter {
        Waiter {
            tx,
            control,
            streams: None,
        }
    }

    /// Whether preamble `p` proves it belongs to this test: in a test with a stream key, by its
    /// MAC (else why not); a keyless test takes any (the address rules are the caller's).
    pub(crate) fn proven(&self, p: &Preamble) -> Result<(), String> {
        let (Some(key), Preamble::Data { stream, mac, .. }) = (&self.streams, p) else {
            return Ok(());
        };
        match mac {
            _ if key.admits(p) => Ok(()),
            Some(_) => Err(format!(
                "data stream {stream} with a wrong MAC for its keyed test"
            )),
            None => Err(format!(
                "data stream {stream} without the MAC its keyed test's preambles carry"
            )),
        }
    }

    /// Whether a TCP or QUIC data connection with preamble `p` from `peer` is this test's: in a
    /// keyed test its MAC proves it, from any address (the TCP or QUIC handshake showed that the
    /// address receives; the key holder's NAT may map a stream elsewhere); in a keyless test it must
    /// come from the control connection's address, since the session id travels in clear.
    pub(crate) fn admits(&self, p: &Preamble, peer: IpAddr) -> Result<(), String> {
        if self.streams.is_some() {
            return self.proven(p);
        }
        if peer.to_canonical() == self.control {
            return Ok(());
        }
        let stream = match p {
            Preamble::Data { stream, .. } => *stream,
            Preamble::Control { .. } => 0,
        };
        Err(format!(
            "data stream {stream} of a running test from another address than its control \
             connection ({})",
            self.control
        ))
    }
}

/// Tests waiting for data connections, by the key their connections quote.
pub(crate) type Waiting<K> = Mutex<HashMap<K, Waiter>>;
/// Running tests by session id: where the listeners hand each data connection (TCP) or hello (UDP).
pub(crate) type Registry = Waiting<SessionId>;
/// Running iperf3 tests by cookie: where their data connections go.
pub(crate) type Iperf3Registry = Waiting<landspeed_iperf3::Cookie>;
/// iperf3 UDP tests waiting for their streams' hellos: the test's id, its client's address, and
/// where to hand the hello.
pub(crate) type Iperf3UdpWaiting = Mutex<Vec<(u64, IpAddr, mpsc::Sender<Wake<Input>>)>>;
/// Removes a waiting test from its registry however the test ends.
pub(crate) struct Registered<'a, K: Eq + std::hash::Hash>(&'a Waiting<K>, K);

impl<'a, K: Eq + std::hash::Hash + Clone> Registered<'a, K> {
    /// `waiter` receives the data connections that name `key` until the test ends.
    pub(crate) fn new(registry: &'a Waiting<K>, key: K, waiter: Waiter) -> Result<Self, TestError> {
        registry
            .lock()
            .map_err(|_| TestError::Poisoned)?
            .insert(key.clone(), waiter);
        Ok(Registered(registry, key))
    }
}

impl<K: Eq + std::hash::Hash> Drop for Registered<'_, K> {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.lock() {
            r.remove(&self.1);
        }
    }
}

/// Where the server's events (tests, refusals, counters) go: the binary logs them.
pub type EventSink = Arc<dyn Fn(ServerEvent) + Send + Sync>;

pub(crate) struct Shared {
    pub(crate) opts: ServerOptions,
    pub(crate) registry: Registry,
    pub(crate) iperf3: Iperf3Registry,
    /// iperf 2 tests still gathering their streams.
    pub(crate) iperf2: crate::iperf2::Gatherings,
    /// iperf 2 UDP tests running, by client address and port.
    pub(crate) iperf2_udp: crate::iperf2::UdpTests,
    pub(crate) udp: Registry,
    pub(crate) iperf3_udp: Iperf3UdpWaiting,
    pub(crate) shutdown: AtomicBool,
    /// Connection threads still running, and a signal when that number changes.
    pub(crate) active: (Mutex<usize>, Condvar),
    pub(crate) tests_done: AtomicUsize,
    /// Tests running now (every protocol), in all and per address.
    pub(crate) tests: Arc<Mutex<Occupancy>>,
    /// Control and QUIC connections still proving themselves, shared fairly by address and network.
    pub(crate) preauth: Admission,
    /// Memory the running tests hold by their estimates (`--max-memory`), bytes.
    pub(crate) memory: Arc<Mutex<u64>>,
    pub(crate) events: EventSink,
    pub(crate) counters: Mutex<Counters>,
    pub(crate) started: Instant,
    /// New tests per address (`--max-tests-per-minute`).
    pub(crate) rate: Option<Mutex<landspeed_proto::rate::PerAddressRate>>,
    /// What encrypted data connections present, and the configuration their handshakes use.
    pub(crate) tls: ServerTls,
    /// The QUIC endpoint, unless turned off.
    pub(crate) quic: Option<QuicServer>,
    /// Return-routability tokens for UDP hellos from addresses other than their control connection's.
    pub(crate) udp_validator: landspeed_proto::udp_hello::Validator,
    /// Keeps refusal lines to one per address and kind a minute.
    pub(crate) refusal_gate: Mutex<landspeed_core::server_log::RefusalGate>,
}

/// The server's TLS identity and configuration, made once when it binds.
pub(crate) struct ServerTls {
    /// The certificate's fingerprint, announced to clients that ask for TLS.
    pub(crate) fingerprint: landspeed_core::tls::CertFingerprint,
    /// The TLS-over-TCP server configuration.
    pub(crate) tcp: Arc<rustls::ServerConfig>,
    /// The certificate and key.
    pub(crate) identity: Arc<landspeed_engine::tls::Identity>,
}

impl ServerTls {
    pub(crate) fn new(
        identity: Option<&Arc<landspeed_engine::tls::Identity>>,
    ) -> Result<ServerTls, ServerError> {
        let id = match identity {
            Some(i) => i.clone(),
            None => Arc::new(landspeed_engine::tls::Identity::self_signed()?),
        };
        Ok(ServerTls {
            fingerprint: id.fingerprint,
            tcp: id.server_config(&[])?,
            identity: id,
        })
    }
}

/// The server's QUIC endpoint and the runtime that drives it (bound and served by `server::quic`).
pub(crate) struct QuicServer {
    pub(crate) endpoint: quinn::Endpoint,
    pub(crate) runtime: tokio::runtime::Runtime,
    /// The UDP port clients connect to.
    pub(crate) port: u16,
    /// Its socket's buffers as the kernel granted them.
    pub(crate) buffers: (u64, u64),
}

/// A UDP socket bound to `addr` with SO_REUSEPORT, so per-stream sockets can share the port.
pub(crate) fn bind_udp(addr: SocketAddr, v6only: Option<bool>) -> std::io::Result<UdpSocket> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    landspeed_engine::os::share_port(&s)?;
    if let Some(v) = v6only {
        s.set_only_v6(v)?;
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// A place held in one of the server's pools (a running test, a connection still proving itself),
/// given back when dropped.
pub(crate) struct Slot {
    pool: Arc<Mutex<Occupancy>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .give_back(self.ip);
    }
}

/// Memory held by a running test against the server's budget (`--max-memory`), given back when
/// dropped.
pub(crate) struct MemoryHold {
    budget: Arc<Mutex<u64>>,
    bytes: u64,
}

impl Drop for MemoryHold {
    fn drop(&mut self) {
        let mut held = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        *held = held.saturating_sub(self.bytes);
    }
}

/// Control connections (and landspeed QUIC connections before their first stream) that may be
/// proving themselves at once: each holds a thread or a task until its test is accepted, its
/// handshake deadline passes, or a newcomer from a smaller holder takes its place.
pub const PREAUTH_CAPS: admission::Caps = admission::Caps {
    total: 64,
    per_address: 4,
    per_network: 16,
};

/// What closes a connection whose place a newcomer took.
pub(crate) type Closer = Box<dyn FnOnce() + Send>;

/// A pool of places for connections still proving themselves (`proto::admission`).
pub(crate) type Admission = Arc<Mutex<Pool<Closer>>>;

/// A new admission pool with `caps`.
pub(crate) fn admission_pool(caps: admission::Caps) -> Admission {
    Arc::new(Mutex::new(Pool::new(caps)))
}

/// A place held in an admission pool, given back when dropped; `evicted` says whether a newcomer
/// took it (its connection was then closed).
pub(crate) struct Place {
    pool: Admission,
    id: PlaceId,
    evicted: Arc<AtomicBool>,
}

impl Place {
    /// Raised once a newcomer took this place.
    pub(crate) fn evicted(&self) -> Arc<AtomicBool> {
        self.evicted.clone()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let kept = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release(self.id);
        drop(kept);
    }
}

/// A place in `pool` for a connection from `peer`, which `close` closes if a newcomer takes its
/// place later. A place taken from another connection is closed here, outside the pool's lock.
pub(crate) fn take_place(
    pool: &Admission,
    peer: SocketAddr,
    close: impl FnOnce() + Send + 'static,
) -> Result<Place, Refused> {
    let evicted = Arc::new(AtomicBool::new(false));
    let flag = evicted.clone();
    let closer: Closer = Box::new(move || {
        flag.store(true, Relaxed);
        close();
    });
    let admitted = pool
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .admit(peer.ip(), closer);
    match admitted {
        Ok(a) => {
            if let Some(close_other) = a.evicted {
                close_other();
            }
            Ok(Place {
                pool: pool.clone(),
                id: a.id,
                evicted,
            })
        }
        Err((why, _)) => Err(why),
    }
}

/// What closes a TCP connection from another thread (both directions shut down: its reader sees the
/// end at once).
pub(crate) fn tcp_closer(stream: &std::net::TcpStream) -> impl FnOnce() + Send + 'static {
    let clone = stream.try_clone().ok();
    move || {
        if let Some(s) = clone {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

pub(crate) fn take_slot(pool: &Arc<Mutex<Occupancy>>, peer: SocketAddr) -> Result<Slot, Full> {
    let ip = peer.ip();
    pool.lock().unwrap_or_else(|e| e.into_inner()).take(ip)?;
    Ok(Slot {
        pool: pool.clone(),
        ip,
    })
}

impl Shared {
    /// Counts an event, then hands it to the sink.
    pub(crate) fn emit(&self, ev: ServerEvent) {
        if let Ok(mut c) = self.counters.lock() {
            match &ev {
                ServerEvent::Test(t) => {
                    if t.verdict().is_trusted() {
                        c.tests_ok += 1;
                    } else {
                        c.tests_failed += 1;
                    }
                    c.bytes_received += t.bytes_received;
                    c.bytes_sent += t.bytes_sent;
                    c.last_test = Some(t.clone());
                }
                ServerEvent::Refused { kind, .. } => *c.refused.entry(*kind).or_default() += 1,
                _ => {}
            }
        }
        (self.events)(ev);
    }

    /// Counts a refused connection (`kind`) and logs it (`reason`), at most `REFUSAL_LINES` (8) lines
    /// per address and kind a minute (`RefusalGate`): a line after a held-back run says how many it
    /// stood for.
    pub(crate) fn refuse(&self, peer: SocketAddr, kind: RefusalKind, reason: impl Into<String>) {
        let pass =
            self.refusal_gate
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pass(peer.ip(), kind, Instant::now());
        let Some(held) = pass else {
            return self.count_refused(kind);
        };
        let mut reason = reason.into();
        if held > 0 {
            reason.push_str(&format!(
                " (and {held} more like it from this address in the last minute)"
            ));
        }
        self.emit(ServerEvent::Refused { peer, kind, reason });
    }

    /// Counts a refusal without a log line (forged UDP datagrams: a log line each would let anyone
    /// fill the log).
    pub(crate) fn count_refused(&self, kind: RefusalKind) {
        if let Ok(mut c) = self.counters.lock() {
            *c.refused.entry(kind).or_default() += 1;
        }
    }

    pub(crate) fn stats(&self) -> ServerStats {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        ServerStats {
            uptime_s: self.started.elapsed().as_secs_f64(),
            tests_ok: c.tests_ok,
            tests_failed: c.tests_failed,
            tests_running: self.tests.lock().map_or(0, |t| t.held()) as u64,
            bytes_received: c.bytes_received,
            bytes_sent: c.bytes_sent,
            refused: c.refused.iter().map(|(k, v)| (*k, *v)).collect(),
        }
    }

    pub(crate) fn last_test(&self) -> Option<landspeed_core::server_log::TestLog> {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.last_test.clone()
    }

    /// A slot for a new test from `peer`, or why not: `--max-tests` are running, or `peer`'s address
    /// runs `--max-tests-per-address` already. Taken once a test is authenticated and valid.
    pub(crate) fn slot(&self, peer: SocketAddr) -> Result<Slot, Full> {
        take_slot(&self.tests, peer)
    }

    /// Holds `spec`'s estimated memory (`memory::server_estimate`) against `--max-memory` while the
    /// test runs, or says how much the running tests leave free. Without a budget: nothing to hold.
    pub(crate) fn hold_memory(
        &self,
        spec: &landspeed_core::config::TestSpec,
    ) -> Result<Option<MemoryHold>, u64> {
        self.hold_bytes(landspeed_proto::memory::server_estimate(spec))
    }

    /// Holds `bytes` against `--max-memory` while the returned hold lives (an HTTP connection, an
    /// ndt7 subtest), or says how much is free. Without a budget: nothing to hold.
    pub(crate) fn hold_bytes(&self, bytes: u64) -> Result<Option<MemoryHold>, u64> {
        let Some(max) = self.opts.limits.max_memory_bytes else {
            return Ok(None);
        };
        let mut held = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        if held.saturating_add(bytes) > max {
            return Err(max.saturating_sub(*held));
        }
        *held += bytes;
        Ok(Some(MemoryHold {
            budget: self.memory.clone(),
            bytes,
        }))
    }

    /// A place for a control connection that has not proved anything yet (`PREAUTH_CAPS`), which
    /// `close` closes if a newcomer from a smaller holder takes it.
    pub(crate) fn preauth(
        &self,
        peer: SocketAddr,
        close: impl FnOnce() + Send + 'static,
    ) -> Result<Place, Refused> {
        take_place(&self.preauth, peer, close)
    }

    /// Why a test slot was not given, in the client's words.
    pub(crate) fn busy_reason(&self, full: Full) -> String {
        match full {
            Full::All(n) => format!("busy: this server runs at most {n} tests at once; retry in a few seconds"),
            Full::Address(n) => format!(
                "busy: this server runs at most {n} tests at once for one address; retry when one of yours ends"
            ),
        }
    }

    /// Counts a new test from `peer` against the per-minute limit; the error is the client's message.
    pub(crate) fn admit(&self, peer: SocketAddr) -> Result<(), String> {
        let Some(rate) = &self.rate else {
            return Ok(());
        };
        let mut r = rate.lock().unwrap_or_else(|e| e.into_inner());
        r.admit(peer.ip(), Instant::now()).map_err(|wait| {
            format!(
                "rate limited: this server starts at most {} tests per minute for one address; \
                 retry in {} s",
                self.opts.limits.max_tests_per_minute.unwrap_or(0),
                wait.as_secs() + 1
            )
        })
    }

    /// Whether this server refuses `proto` because it requires a key that `proto` cannot carry (iperf3
    /// clients can carry iperf3's own, when the server has it).
    pub(crate) fn keyed_only(&self, proto: Keyless) -> bool {
        let own = proto == Keyless::Iperf3 && self.opts.iperf3_auth.is_some();
        self.opts.auth.is_some() && !self.opts.open.contains(&proto) && !own
    }

    /// Whether `peer` may test here (`--allow`).
    pub(crate) fn allowed(&self, peer: SocketAddr) -> bool {
        let ip = peer.ip().to_canonical();
        self.opts.allow.is_empty() || self.opts.allow.iter().any(|n| n.contains(&ip))
    }
}

impl Shared {
    pub(crate) fn connection_started(&self) {
        if let Ok(mut n) = self.active.0.lock() {
            *n += 1;
        }
    }

    pub(crate) fn connection_ended(&self) {
        if let Ok(mut n) = self.active.0.lock() {
            *n = n.saturating_sub(1);
        }
        self.active.1.notify_all();
    }
}

impl Shared {
    /// The state every listener and test shares, for a server with `opts` (a fresh secret for UDP
    /// return-routability tokens, empty registries, pools and counters).
    pub(crate) fn new(
        opts: ServerOptions,
        events: EventSink,
        tls: ServerTls,
        quic: Option<QuicServer>,
    ) -> Result<Shared, ServerError> {
        let mut secret = [0u8; landspeed_proto::udp_hello::SECRET_LEN];
        getrandom::fill(&mut secret).map_err(|e| ServerError::Io(std::io::Error::other(e)))?;
        Ok(Shared {
            udp_validator: landspeed_proto::udp_hello::Validator::new(secret),
            refusal_gate: Mutex::default(),
            tls,
            quic,
            registry: Mutex::new(HashMap::new()),
            iperf3: Mutex::new(HashMap::new()),
            iperf2: crate::iperf2::Gatherings::default(),
            iperf2_udp: crate::iperf2::UdpTests::default(),
            udp: Mutex::new(HashMap::new()),
            iperf3_udp: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            active: (Mutex::new(0), Condvar::new()),
            tests_done: AtomicUsize::new(0),
            tests: Arc::new(Mutex::new(Occupancy::new(
                opts.max_tests,
                opts.max_tests_per_address,
            ))),
            preauth: admission_pool(PREAUTH_CAPS),
            memory: Arc::new(Mutex::new(0)),
            events,
            counters: Mutex::new(Counters::default()),
            started: Instant::now(),
            rate: opts
                .limits
                .max_tests_per_minute
                .map(|n| Mutex::new(landspeed_proto::rate::PerAddressRate::per_minute(n))),
            opts,
        })
    }
}

/// Now on this host's clock, in nanoseconds since the Unix epoch (clock probes).
pub(crate) fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The context of a server's view of a test in `protocol`: the client's address as the local one
/// (landspeed's convention for a server's result), from the connection's `(local, peer)` addresses.
/// A live view's test so far (`ServerOptions::live`): what the server knows of it when its streams
/// are up, and its samples.
pub(crate) struct Live {
    pub(crate) spec: landspeed_core::config::TestSpec,
    pub(crate) context: landspeed_core::assemble::RunContext,
    /// The client's port of each stream, by stream number.
    pub(crate) client_ports: Vec<Option<u16>>,
    pub(crate) samples: Vec<landspeed_core::endpoint::IntervalSample>,
    /// A test of frames received (iperf 2's `--isochronous` over TCP): its view says so with an
    /// empty frames report (the frames are counted into the final result only).
    pub(crate) frames: bool,
    /// How each connection was made, by the client's port, and the client's software (iperf 2's
    /// server prints them on its "connected with" lines); empty where not kept.
    pub(crate) made: Made,
}

/// How a test's connections were made, by the client's port, and the client's software as its
/// greeting named it ("" when unknown).
#[derive(Debug, Clone, Default)]
pub(crate) struct Made {
    pub(crate) connections: Vec<(Option<u16>, landspeed_core::endpoint::ConnectFacts)>,
    pub(crate) client_software: String,
    /// The client asked for no report at its end (iperf 2's `--no-udp-fin`).
    pub(crate) no_end_report: bool,
    /// What an iperf 2 bounceback client's header asked (`config.bounceback`).
    pub(crate) bounceback: Option<landspeed_core::transactions::BounceAsked>,
}

impl Made {
    /// Puts them in `r`: each stream's connection found by its client's port, the client's
    /// software on the client's end (the result's local one) when it has none.
    pub(crate) fn put_into(&self, r: &mut landspeed_core::result::RunResult) {
        for s in &mut r.streams {
            s.connection = (self.connections.iter())
                .find(|(port, _)| port.is_some() && *port == s.client_port)
                .map(|(_, f)| f.clone());
        }
        if r.local.software.is_empty() {
            r.local.software = self.client_software.clone();
        }
        r.config.no_end_report |= self.no_end_report;
        r.config.bounceback = r.config.bounceback.or(self.bounceback);
    }
}

impl Live {
    /// The test so far, as `ServerEvent::Progress` carries it.
    pub(crate) fn so_far(&self) -> ServerEvent {
        let mut r = landspeed_core::assemble::so_far(
            &self.spec,
            self.context.clone(),
            &self.client_ports,
            &self.samples,
        );
        if self.frames {
            r.frames.get_or_insert_with(Default::default);
        }
        self.made.put_into(&mut r);
        ServerEvent::Progress(Box::new(r))
    }
}

pub(crate) fn server_context(
    (local, peer): (Option<SocketAddr>, Option<SocketAddr>),
    started: std::time::SystemTime,
    threads: u32,
    protocol: &str,
) -> landspeed_core::assemble::RunContext {
    let local = local.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    landspeed_core::assemble::RunContext {
        host: local.ip().to_string(),
        port: local.port(),
        local_address: peer.map_or_else(String::new, |p| p.to_string()),
        remote_address: local.to_string(),
        family: if local.is_ipv4() { "ipv4" } else { "ipv6" }.into(),
        threads,
        started_unix_s: started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        protocol: protocol.into(),
        served_here: true,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_proto::StreamKey;

    fn waiter(key: Option<StreamKey>) -> Waiter {
        let (tx, _) = mpsc::channel();
        Waiter {
            streams: key,
            ..Waiter::keyless(tx, "127.0.0.1".parse().unwrap())
        }
    }

    #[test]
    fn a_keyless_test_takes_streams_from_its_control_address_only() {
        let w = waiter(None);
        let p = Preamble::data(SessionId([1; 16]), 0, None);
        assert_eq!(w.admits(&p, "127.0.0.1".parse().unwrap()), Ok(()));
        assert_eq!(w.admits(&p, "::ffff:127.0.0.1".parse().unwrap()), Ok(()));
        let e = w.admits(&p, "127.0.0.2".parse().unwrap()).unwrap_err();
        assert!(e.contains("another address than its control connection"), "{e}");
    }

    #[test]
    fn a_keyed_test_takes_streams_by_their_mac_from_any_address() {
        let key = StreamKey::new(&[7; 32]);
        let w = waiter(Some(key.clone()));
        let sid = SessionId([1; 16]);
        let elsewhere: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(w.admits(&Preamble::data(sid, 3, Some(&key)), elsewhere), Ok(()));
        let control: IpAddr = "127.0.0.1".parse().unwrap();
        let e = w.admits(&Preamble::data(sid, 3, None), control).unwrap_err();
        assert!(e.contains("without the MAC"), "{e}");
        let other = StreamKey::new(&[8; 32]);
        let e = w
            .admits(&Preamble::data(sid, 3, Some(&other)), control)
            .unwrap_err();
        assert!(e.contains("wrong MAC"), "{e}");
        // UDP checks the MAC alone (its address has rules of its own).
        assert!(w.proven(&Preamble::data(sid, 3, None)).is_err());
        assert!(waiter(None).proven(&Preamble::data(sid, 3, None)).is_ok());
    }
}
