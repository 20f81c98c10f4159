//! UDP echo probes against a landspeed server: a run of probes at a fixed interval (`landspeed path`'s
//! RTT), or a background prober that runs until told to stop (`run --latency`). Replies are matched by a
//! random series id and the sequence number; the RTT is measured on this host's monotonic clock, which
//! the probe carries, so nothing depends on the two hosts' clocks agreeing.

use landspeed_core::path::{EchoHeader, EchoKind, ECHO_HEADER_LEN};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a series of echo probes could not run.
#[derive(Debug, thiserror::Error)]
pub enum EchoError {
    /// No UDP socket towards the server.
    #[error("cannot open a UDP socket towards {addr}: {err}")]
    Socket {
        /// The server's address.
        addr: SocketAddr,
        /// Why the socket failed.
        err: std::io::Error,
    },
    /// A probe size outside what a header and one datagram allow.
    #[error("probe size must be {min}..=65507 bytes, got {0}", min = ECHO_HEADER_LEN)]
    Size(usize),
}

/// One probe: when it left (since the series began) and its RTT if a reply came.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// The probe's number in its series, from 0.
    pub seq: u32,
    /// When it was sent, since the series began.
    pub sent_at: Duration,
    /// Its round-trip time; None when no reply came in time.
    pub rtt: Option<Duration>,
    /// The server's wall clock when the probe reached it, ns, as its reply said (None: no reply, or a
    /// reply without it).
    pub server_rx_ns: Option<u64>,
}

/// How a series is sent.
#[derive(Debug, Clone)]
pub struct EchoParams {
    /// Time between probes.
    pub interval: Duration,
    /// Datagram size (header included); the reply has the same size.
    pub size: usize,
    /// How long to wait for the replies after the last probe.
    pub linger: Duration,
}

/// A connected UDP socket to the server's port.
fn socket(addr: SocketAddr) -> Result<UdpSocket, EchoError> {
    crate::udp_socket(addr, true).map_err(|err| EchoError::Socket { addr, err })
}

/// A running series: probes out, replies in, both on one thread.
struct Series {
    sock: UdpSocket,
    id: u32,
    start: Instant,
    /// The wall clock at `start`, ns: probes' wall times are this plus their monotonic offsets.
    start_wall_ns: u64,
    probes: Vec<Probe>,
    buf: Vec<u8>,
    size: usize,
}

impl Series {
    fn new(addr: SocketAddr, size: usize) -> Result<Series, EchoError> {
        if !(ECHO_HEADER_LEN..=65507).contains(&size) {
            return Err(EchoError::Size(size));
        }
        Ok(Series {
            sock: socket(addr)?,
            id: getrandom::u32().unwrap_or(0x1d),
            start: Instant::now(),
            start_wall_ns: crate::realtime_ns(),
            probes: vec![],
            buf: vec![0u8; size.max(ECHO_HEADER_LEN)],
            size,
        })
    }

    fn send(&mut self) {
        let seq = self.probes.len() as u32;
        let sent_at = self.start.elapsed();
        let mut pkt = vec![0u8; self.size];
        EchoHeader::request(self.id, seq, sent_at.as_nanos() as u64, false).write(&mut pkt);
        // A send that fails (no route yet, ICMP error from an earlier probe) is a lost probe.
        let _ = self.sock.send(&pkt);
        self.probes.push(Probe {
            seq,
            sent_at,
            rtt: None,
            server_rx_ns: None,
        });
    }

    /// Takes replies until `until`; calls `seen` for each matched one.
    fn receive(&mut self, until: Instant, seen: &mut dyn FnMut(&Probe)) {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let _ = self.sock.set_read_timeout(Some(left));
            match self.sock.recv(&mut self.buf) {
                Ok(n) => {
                    let now = self.start.elapsed();
                    let Some(h) = EchoHeader::read(&self.buf[..n]) else {
                        continue;
                    };
                    if h.kind != EchoKind::Reply || h.train != self.id {
                        continue;
                    }
                    if let Some(p) = self.probes.get_mut(h.seq as usize) {
                        if p.rtt.is_none() {
                            p.rtt = Some(now.saturating_sub(p.sent_at));
                            p.server_rx_ns = (h.server_rx_ns != 0).then_some(h.server_rx_ns);
                            seen(p);
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return,
                // ICMP errors (port unreachable: no landspeed server) surface here; keep waiting.
                Err(_) => std::thread::sleep(left.min(Duration::from_millis(10))),
            }
        }
    }
}

/// Sends `count` probes `p.interval` apart and waits `p.linger` for the last replies; `seen` is
/// called as each reply arrives (for ping-like lines).
pub fn ping(
    addr: SocketAddr,
    count: u32,
    p: &EchoParams,
    interrupt: &AtomicBool,
    seen: &mut dyn FnMut(&Probe),
) -> Result<Vec<Probe>, EchoError> {
    let mut s = Series::new(addr, p.size)?;
    for k in 0..count {
        if interrupt.load(Relaxed) {
            break;
        }
        s.send();
        let next = s.start + p.interval * (k + 1);
        let until = if k + 1 == count {
            Instant::now() + p.linger
        } else {
            next
        };
        s.receive(until, seen);
    }
    Ok(s.probes)
}

/// A prober running on its own thread until stopped (`run --latency`).
pub struct Background {
    stop: Arc<AtomicBool>,
    replies: Arc<std::sync::atomic::AtomicU32>,
    started: Instant,
    started_wall_ns: u64,
    handle: std::thread::JoinHandle<Vec<Probe>>,
}

impl Background {
    /// Starts probing `addr` every `p.interval`.
    pub fn start(addr: SocketAddr, p: EchoParams) -> Result<Background, EchoError> {
        Background::start_with(addr, p, |_| Ok(()))
    }

    /// `start`, with `configure` applied to the probes' socket first (their traffic class, e.g.).
    pub fn start_with(
        addr: SocketAddr,
        p: EchoParams,
        configure: impl FnOnce(&UdpSocket) -> std::io::Result<()>,
    ) -> Result<Background, EchoError> {
        let mut s = Series::new(addr, p.size)?;
        configure(&s.sock).map_err(|err| EchoError::Socket { addr, err })?;
        let (started, started_wall_ns) = (s.start, s.start_wall_ns);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let replies = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let count = replies.clone();
        let handle = std::thread::Builder::new()
            .name("latency-probe".into())
            .spawn(move || {
                let mut k = 0u32;
                // Bounded: at most one probe per interval, and never more than a day of them.
                let mut seen = |_: &Probe| {
                    count.fetch_add(1, Relaxed);
                };
                while !flag.load(Relaxed) && k < 86_400 * 1000 {
                    s.send();
                    k += 1;
                    s.receive(s.start + p.interval * k, &mut seen);
                }
                s.receive(Instant::now() + p.linger, &mut seen);
                s.probes
            })
            .map_err(|err| EchoError::Socket { addr, err })?;
        Ok(Background {
            stop,
            replies,
            started,
            started_wall_ns,
            handle,
        })
    }

    /// When the series began: probes' `sent_at` counts from here.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The wall clock when the series began, ns (a probe's wall time is this plus its `sent_at`).
    pub fn started_wall_ns(&self) -> u64 {
        self.started_wall_ns
    }

    /// Replies received so far.
    pub fn replies(&self) -> u32 {
        self.replies.load(Relaxed)
    }

    /// Stops, waits for the last replies, and returns every probe.
    pub fn finish(self) -> Vec<Probe> {
        self.stop.store(true, Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// RTTs in milliseconds of the probes that came back.
pub fn rtts_ms<'a>(probes: impl IntoIterator<Item = &'a Probe>) -> Vec<f64> {
    probes
        .into_iter()
        .filter_map(|p| p.rtt.map(|d| d.as_secs_f64() * 1e3))
        .collect()
}

/// An answered probe's three times on the wall clocks (for one-way delays), given the series' wall
/// time at its start; None without a reply or without the server's time in it.
pub fn stamps(p: &Probe, start_wall_ns: u64) -> Option<landspeed_core::path::Stamps> {
    let (rtt, server_rx_ns) = (p.rtt?, p.server_rx_ns?);
    let sent_ns = start_wall_ns + p.sent_at.as_nanos() as u64;
    Some(landspeed_core::path::Stamps {
        sent_ns,
        server_rx_ns,
        reply_rx_ns: sent_ns + rtt.as_nanos() as u64,
    })
}
