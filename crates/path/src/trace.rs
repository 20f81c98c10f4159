//! Traceroute without raw sockets: UDP datagrams with rising TTL to high ports of the target; each router
//! where the TTL runs out answers with ICMP time exceeded, and the target with port unreachable. The
//! errors come back on the socket's error queue (see `errqueue`), matched to their probe by the probe's
//! own payload (a tag, the TTL and the probe's number), so late answers still land on the right hop.

use crate::errqueue::{self, IcmpError};
use landspeed_core::path::{Hop, HopProbe, TraceReport};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

const TAG: &[u8; 4] = b"LSTR";

/// How a traceroute is sent.
#[derive(Debug, Clone)]
pub struct TraceParams {
    /// The UDP port of the first probe; each probe takes the next.
    pub first_port: u16,
    /// The largest TTL tried.
    pub max_hops: u8,
    /// Probes per hop.
    pub probes: u8,
    /// How long to wait for each probe's answer.
    pub wait: Duration,
}

impl Default for TraceParams {
    fn default() -> Self {
        TraceParams {
            first_port: 33434,
            max_hops: 30,
            probes: 3,
            wait: Duration::from_secs(1),
        }
    }
}

struct Sent {
    ttl: u8,
    n: u8,
    at: Instant,
}

fn payload(nonce: u32, ttl: u8, n: u8) -> [u8; 10] {
    let mut p = [0u8; 10];
    p[..4].copy_from_slice(TAG);
    p[4..8].copy_from_slice(&nonce.to_be_bytes());
    p[8] = ttl;
    p[9] = n;
    p
}

fn matches(e: &IcmpError, nonce: u32) -> Option<(u8, u8)> {
    let p = &e.payload;
    (p.len() >= 10 && &p[..4] == TAG && p[4..8] == nonce.to_be_bytes()).then(|| (p[8], p[9]))
}

/// Traces the route to `dst`; `on_hop` is called as each hop completes (for live lines).
pub fn trace(
    dst: IpAddr,
    p: &TraceParams,
    interrupt: &AtomicBool,
    on_hop: &mut dyn FnMut(&Hop),
) -> io::Result<TraceReport> {
    let v6 = dst.is_ipv6();
    let sock = crate::udp_socket(SocketAddr::new(dst, 0), false)?;
    errqueue::enable(&sock, v6)?;
    let mut t = Tracer {
        sock,
        dst,
        nonce: getrandom::u32().unwrap_or(0x7ace),
        hops: vec![],
        sent: vec![],
        reached: false,
    };
    'hops: for ttl in 1..=p.max_hops {
        t.hops.push(Hop {
            ttl,
            probes: vec![HopProbe::default(); p.probes.into()],
            ..Hop::default()
        });
        for n in 0..p.probes {
            if interrupt.load(Relaxed) {
                break 'hops;
            }
            t.probe(ttl, n, p)?;
        }
        let hop = &mut t.hops[ttl as usize - 1];
        hop.address = hop.probes.iter().find_map(|x| x.address.clone());
        on_hop(hop);
        if t.reached || hop.note.is_some() {
            break;
        }
    }
    Ok(TraceReport {
        target: dst.to_string(),
        first_port: p.first_port,
        max_hops: p.max_hops,
        probes_per_hop: p.probes,
        reached: t.reached,
        hops: t.hops,
    })
}

/// One trace in progress: its socket, the hops so far and the probes sent.
struct Tracer {
    sock: std::net::UdpSocket,
    dst: IpAddr,
    nonce: u32,
    hops: Vec<Hop>,
    sent: Vec<Sent>,
    reached: bool,
}

impl Tracer {
    /// Sends probe `n` of hop `ttl` and takes what answers until it is answered or `p.wait` passes.
    fn probe(&mut self, ttl: u8, n: u8, p: &TraceParams) -> io::Result<()> {
        errqueue::set_ttl(&self.sock, self.dst.is_ipv6(), ttl)?;
        let port = p.first_port.wrapping_add(self.sent.len() as u16);
        let at = Instant::now();
        // A send can fail with an error left by an earlier probe; the probe then counts as lost.
        let _ = self
            .sock
            .send_to(&payload(self.nonce, ttl, n), SocketAddr::new(self.dst, port));
        self.sent.push(Sent { ttl, n, at });
        let until = at + p.wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.hops[ttl as usize - 1].probes[n as usize].rtt_ms.is_some() {
                return Ok(());
            }
            let (readable, error) = errqueue::wait(&self.sock, left)?;
            if readable {
                self.answered_on_port(ttl, n, at);
            }
            if error {
                self.read_errors()?;
            }
        }
    }

    /// Something answered on the UDP port itself: when it is the target, the trace has reached it.
    fn answered_on_port(&mut self, ttl: u8, n: u8, at: Instant) {
        let mut buf = [0u8; 2048];
        if let Ok((_, from)) = self.sock.recv_from(&mut buf) {
            if from.ip() == self.dst {
                let h = &mut self.hops[ttl as usize - 1].probes[n as usize];
                h.address = Some(self.dst.to_string());
                h.rtt_ms = Some(at.elapsed().as_secs_f64() * 1e3);
                self.reached = true;
            }
        }
    }

    /// The ICMP errors queued on the socket, each matched to the probe it answers.
    fn read_errors(&mut self) -> io::Result<()> {
        while let Some(e) = errqueue::read(&self.sock)? {
            let now = Instant::now();
            let Some((t, k)) = matches(&e, self.nonce) else {
                continue;
            };
            let Some(s) = self.sent.iter().find(|s| s.ttl == t && s.n == k) else {
                continue;
            };
            let Some(hop) = self.hops.get_mut(t as usize - 1) else {
                continue;
            };
            let Some(slot) = hop.probes.get_mut(k as usize) else {
                continue;
            };
            if slot.rtt_ms.is_none() {
                slot.address = e.offender.map(|a| a.to_string());
                slot.rtt_ms = Some(now.duration_since(s.at).as_secs_f64() * 1e3);
            }
            if e.port_unreachable() || e.offender == Some(self.dst) {
                self.reached = true;
            }
            if let Some(note) = e.unreachable_note() {
                hop.note = Some(note.into());
            }
        }
        Ok(())
    }
}

/// Windows: never asked (traceroute is refused there before any hop is named).
#[cfg(windows)]
pub fn reverse_name(_ip: IpAddr) -> Option<String> {
    None
}

/// The reverse name of `ip` (a PTR lookup through the system resolver), None when there is none.
#[cfg(not(windows))]
pub fn reverse_name(ip: IpAddr) -> Option<String> {
    let sa = socket2::SockAddr::from(SocketAddr::new(ip, 0));
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY: getnameinfo reads the address socket2 built and writes a NUL-terminated name into `host`.
    let r = unsafe {
        libc::getnameinfo(
            sa.as_ptr().cast(),
            sa.len(),
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: on success `host` holds a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

/// Names every hop's address, each lookup in its own thread, all bounded by `limit` (a resolver that
/// does not answer must not hold the report up).
pub fn name_hops(r: &mut TraceReport, limit: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut asked = 0;
    for (i, h) in r.hops.iter().enumerate() {
        if let Some(ip) = h.address.as_deref().and_then(|a| a.parse::<IpAddr>().ok()) {
            let tx = tx.clone();
            asked += 1;
            std::thread::spawn(move || {
                let _ = tx.send((i, reverse_name(ip)));
            });
        }
    }
    let until = Instant::now() + limit;
    for _ in 0..asked {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((i, name)) => r.hops[i].name = name,
            Err(_) => break,
        }
    }
}
