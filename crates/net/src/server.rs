//! `landspeed serve`: listens on IPv4 and IPv6, tells control connections, data streams and iperf3
//! clients apart by their first bytes (`greeting`), UDP hellos by theirs (`udp`) and QUIC
//! connections by their ALPN (`quic`), and hands each to its protocol's server side. Tests are
//! independent: data streams find their test through a registry keyed by a random session id, so
//! any number of clients can test at once. Every wait has a timeout, and a broken client ends only
//! its own test. Events (listening, one per test, rejections) go to a callback; the binary decides
//! how to print them.

mod greeting;
mod quic;
mod udp;

use crate::host::{bind_udp, EventSink, ServerError, ServerOptions, ServerStats, ServerTls, Shared};
use crate::{ndt7, rpm};
use landspeed_core::server_log::{ServerEvent, TestLog};
use mio::net::TcpListener as MioListener;
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Socket, Type};
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Gives the allocator's free memory back once the server is idle again after serving (every test
/// ended, nothing held against the memory budget), checked once a second: a burst of connections
/// leaves no resident memory behind.
#[derive(Default)]
struct Trim {
    last: Option<Instant>,
    served: bool,
}

impl Trim {
    fn tick(&mut self, shared: &Shared) {
        if self.last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        self.last = Some(Instant::now());
        let running = shared.tests.lock().map_or(0, |t| t.held());
        let held = *shared.memory.lock().unwrap_or_else(|e| e.into_inner());
        if running > 0 || held > 0 {
            self.served = true;
        } else if std::mem::take(&mut self.served) {
            landspeed_engine::os::release_free_memory();
        }
    }
}

/// A bound server, ready to run.
pub struct Server {
    listeners: Vec<MioListener>,
    shared: Arc<Shared>,
    udp_socks: Vec<std::net::UdpSocket>,
    ndt7: Option<ndt7::server::Ndt7Listener>,
    rpm: Option<rpm::server::RpmListener>,
    /// Why QUIC is not served though asked for (see `quic::Unbound::NoRouter`).
    quic_off: Option<String>,
}

/// A non-blocking listener on `addr` for one of the HTTP services (ndt7, the responsiveness test).
fn bind_http(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// A listening socket on `addr`: MPTCP when asked and the kernel has it (an MPTCP listener accepts
/// plain TCP connections as plain TCP sockets), TCP otherwise.
fn listen(addr: SocketAddr, v6only: Option<bool>, mptcp: bool) -> Result<MioListener, ServerError> {
    let err = |err| ServerError::Bind { addr, err };
    let domain = Domain::for_address(addr);
    let mptcp_sock = mptcp
        .then(|| {
            let p = socket2::Protocol::from(landspeed_engine::mptcp::IPPROTO_MPTCP);
            Socket::new(domain, Type::STREAM, Some(p)).ok()
        })
        .flatten();
    let s = match mptcp_sock {
        Some(s) => s,
        None => Socket::new(domain, Type::STREAM, Some(socket2::Protocol::TCP)).map_err(err)?,
    };
    s.set_reuse_address(true).map_err(err)?;
    if let Some(v) = v6only {
        s.set_only_v6(v).map_err(err)?;
    }
    s.bind(&addr.into()).map_err(err)?;
    s.listen(1024).map_err(err)?;
    s.set_nonblocking(true).map_err(err)?;
    Ok(MioListener::from_std(s.into()))
}

/// Reads a running server's counters from another thread (`serve --metrics`).
#[derive(Clone)]
pub struct StatsHandle(Arc<Shared>);

impl StatsHandle {
    /// The counters now (the same as SIGUSR1 prints).
    pub fn stats(&self) -> ServerStats {
        self.0.stats()
    }

    /// The last test that ended, if any.
    pub fn last_test(&self) -> Option<TestLog> {
        self.0.last_test()
    }
}

impl Server {
    /// A handle on this server's counters, readable while it runs.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.shared.clone())
    }

    /// Binds the listening socket(s): one dual-stack socket on `[::]` by default (IPv4 and IPv6), falling
    /// back to `0.0.0.0` where IPv6 is unavailable, or exactly `--bind`.
    ///
    /// The TLS certificate is made first (a fresh key takes tens of ms): the kernel completes a
    /// client's handshake once the socket listens, and a test's clock may start at its accept, so
    /// the socket listens as close as it can to the server's serving (a client started as soon as
    /// the port listened had its test read 40-60 ms short).
    pub fn bind(opts: ServerOptions, events: EventSink) -> Result<Server, ServerError> {
        let tls = ServerTls::new(opts.identity.as_ref())?;
        let listeners = match opts.bind {
            Some(ip) => vec![listen(
                SocketAddr::new(ip, opts.port),
                if ip.is_ipv6() { Some(true) } else { None },
                opts.mptcp,
            )?],
            None => match listen(
                SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), opts.port),
                Some(false),
                opts.mptcp,
            ) {
                Ok(l) => vec![l],
                Err(_) => vec![listen(
                    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), opts.port),
                    None,
                    opts.mptcp,
                )?],
            },
        };
        // UDP tests say hello on the same address and port; the QUIC endpoint joins that port
        // after the UDP listener (the port's datagram router counts on that order).
        let mut udp_socks = vec![];
        for l in &listeners {
            if let Ok(a) = l.local_addr() {
                let v6only = a.is_ipv6().then_some(!a.ip().is_unspecified());
                let s = bind_udp(a, v6only).map_err(|err| ServerError::Bind { addr: a, err })?;
                // A group's datagrams only where it was joined (the --join socket), never twice.
                let _ = landspeed_engine::os::only_joined_groups(&s, a.is_ipv6());
                udp_socks.push(s);
            }
        }
        if let Some(g) = &opts.join {
            // On the port the listeners have (`-p 0`: the one the kernel chose for them).
            let mut g = g.clone();
            if let Some(port) = listeners
                .first()
                .and_then(|l| l.local_addr().ok())
                .map(|a| a.port())
            {
                g.group.set_port(port);
            }
            udp_socks.push(crate::multicast::join_group(&g)?);
        }
        let (quic, quic_off) = match (opts.quic, listeners.first().and_then(|l| l.local_addr().ok())) {
            (true, Some(a)) => match quic::bind(a, opts.quic_port, &tls.identity, opts.limits.max_streams) {
                Ok(q) => (Some(q), None),
                Err(quic::Unbound::NoRouter(why)) => (None, Some(why)),
                Err(quic::Unbound::Failed(e)) => return Err(e),
            },
            _ => (None, None),
        };
        let ndt7 = match opts.ndt7 {
            None => None,
            Some(n) => Some(ndt7::server::Ndt7Listener {
                listener: bind_http(n.addr).map_err(|err| ServerError::Bind { addr: n.addr, err })?,
                tls: n.tls.then(|| tls.tcp.clone()),
            }),
        };
        let rpm = match opts.rpm {
            None => None,
            Some(n) => Some(rpm::server::RpmListener {
                listener: bind_http(n.addr).map_err(|err| ServerError::Bind { addr: n.addr, err })?,
                tls: match n.tls {
                    true => Some(tls.identity.server_config(&[b"h2", b"http/1.1"])?),
                    false => None,
                },
            }),
        };
        let shared = Arc::new(Shared::new(opts, events, tls, quic)?);
        Ok(Server {
            listeners,
            shared,
            udp_socks,
            ndt7,
            rpm,
            quic_off,
        })
    }

    /// The addresses the server listens on.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Where ndt7 is served: `ws://ADDR` or `wss://ADDR` (None without `--ndt7`).
    pub fn ndt7_url(&self) -> Option<String> {
        let n = self.ndt7.as_ref()?;
        let addr = n.listener.local_addr().ok()?;
        Some(format!("{}://{addr}", if n.tls.is_some() { "wss" } else { "ws" }))
    }

    /// Where the responsiveness test's configuration is: `https://ADDR/config` or `http://...`
    /// (None without `--rpm`).
    pub fn rpm_url(&self) -> Option<String> {
        let n = self.rpm.as_ref()?;
        let addr = n.listener.local_addr().ok()?;
        let scheme = if n.tls.is_some() { "https" } else { "http" };
        Some(format!("{scheme}://{addr}{}", landspeed_rpm::CONFIG_PATH))
    }

    /// Serves until `stop` is raised (or after one test with `once`), then waits briefly for running
    /// tests to wind down.
    pub fn run(mut self, stop: &AtomicBool) -> Result<(), ServerError> {
        for sock in self.udp_socks.drain(..) {
            let shared = self.shared.clone();
            std::thread::spawn(move || udp::listen(sock, &shared));
        }
        quic::serve(&self.shared);
        let ndt7_url = self.ndt7_url();
        if let Some(n) = self.ndt7.take() {
            let shared = self.shared.clone();
            std::thread::spawn(move || ndt7::server::serve(n, shared));
        }
        let rpm_url = self.rpm_url();
        if let Some(r) = self.rpm.take() {
            let shared = self.shared.clone();
            std::thread::spawn(move || rpm::server::serve(r, shared));
        }
        // Announced once every listener (TCP and UDP) is ready.
        self.shared.emit(ServerEvent::Listening {
            addresses: self.local_addrs(),
            certificate: self.shared.tls.fingerprint,
            ndt7: ndt7_url,
            rpm: rpm_url,
            quic_off: self.quic_off.clone(),
        });
        let mut poll = Poll::new()?;
        for (i, l) in self.listeners.iter_mut().enumerate() {
            poll.registry().register(l, Token(i), Interest::READABLE)?;
        }
        let mut events = Events::with_capacity(256);
        let mut greeters = greeting::Greeters::new(self.listeners.len());
        let mut trim = Trim::default();
        loop {
            if stop.load(Relaxed) || (self.shared.opts.once && self.shared.tests_done.load(Relaxed) > 0) {
                break;
            }
            trim.tick(&self.shared);
            if let Some(f) = &self.shared.opts.stats_signal {
                if f.swap(false, Relaxed) {
                    self.shared.emit(ServerEvent::Stats(self.shared.stats()));
                }
            }
            match poll.poll(&mut events, Some(Duration::from_millis(100))) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
            for ev in events.iter() {
                if greeters.owns(ev.token()) {
                    greeters.ready(poll.registry(), ev.token(), &self.shared);
                    continue;
                }
                let l = &self.listeners[ev.token().0];
                loop {
                    match l.accept() {
                        Ok((stream, peer)) => greeters.add(poll.registry(), stream, peer, &self.shared),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        // Out of descriptors or similar: stop accepting for this round, keep serving.
                        Err(_) => break,
                    }
                }
            }
            greeters.expire(poll.registry(), Instant::now(), &self.shared);
        }
        self.shared.shutdown.store(true, Relaxed);
        let (count, changed) = &self.shared.active;
        if let Ok(guard) = count.lock() {
            let _ = changed.wait_timeout_while(guard, Duration::from_secs(3), |n| *n > 0);
        }
        if let Some(q) = &self.shared.quic {
            q.endpoint.close(0u32.into(), b"server stopping");
        }
        Ok(())
    }
}
