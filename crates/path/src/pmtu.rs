//! Path-MTU discovery with "don't fragment" probes (IP_PMTUDISC_PROBE: the kernel neither fragments nor
//! trusts its cached path MTU). A probe of a given IP size passes when the target answers it: a landspeed
//! server echoes it (with a short reply, so the return path never limits), any other host answers with
//! ICMP port unreachable. A router whose next link is too small answers "fragmentation needed" / "packet
//! too big" with that link's MTU, which names the bottleneck and where it is; a probe that vanishes
//! silently points at a black hole, and the search narrows by bisection either way.

use crate::errqueue;
use landspeed_core::path::{EchoHeader, EchoKind, PmtuProbe, PmtuReport, ECHO_HEADER_LEN};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Passed,
    TooBig { from: Option<String>, mtu: u32 },
    Lost,
}

struct Prober {
    sock: UdpSocket,
    overhead: u32,
    id: u32,
    seq: u32,
    wait: Duration,
    buf: Vec<u8>,
}

impl Prober {
    fn probe(&mut self, size: u32) -> io::Result<Outcome> {
        let len = size.saturating_sub(self.overhead).max(ECHO_HEADER_LEN as u32) as usize;
        let mut pkt = vec![0x5au8; len];
        self.seq += 1;
        EchoHeader::request(self.id, self.seq, 0, true).write(&mut pkt);
        if let Err(e) = self.sock.send(&pkt) {
            // Over the local interface's MTU: the error queue holds the MTU that would pass.
            if e.raw_os_error() == Some(libc::EMSGSIZE) {
                let mtu = errqueue::read(&self.sock)?
                    .filter(|e| e.too_big())
                    .map_or(0, |e| e.info);
                return Ok(Outcome::TooBig { from: None, mtu });
            }
            // An error left over from an earlier probe; try once more.
            self.sock.send(&pkt)?;
        }
        let until = Instant::now() + self.wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Outcome::Lost);
            }
            let (readable, error) = errqueue::wait(&self.sock, left)?;
            if readable {
                if let Ok(n) = self.sock.recv(&mut self.buf) {
                    if let Some(h) = EchoHeader::read(&self.buf[..n]) {
                        if h.kind == EchoKind::Reply && h.train == self.id && h.seq == self.seq {
                            return Ok(Outcome::Passed);
                        }
                    }
                }
            }
            if error {
                while let Some(e) = errqueue::read(&self.sock)? {
                    let ours =
                        EchoHeader::read(&e.payload).is_some_and(|h| h.train == self.id && h.seq == self.seq);
                    if !ours {
                        continue;
                    }
                    if e.port_unreachable() {
                        return Ok(Outcome::Passed);
                    }
                    if e.too_big() {
                        return Ok(Outcome::TooBig {
                            from: e.offender.map(|a| a.to_string()),
                            mtu: e.info,
                        });
                    }
                }
            }
        }
    }

    /// A probe, retried once when lost (a single loss is not a size limit).
    fn try_size(&mut self, size: u32, log: &mut Vec<PmtuProbe>) -> io::Result<Outcome> {
        let mut o = self.probe(size)?;
        if o == Outcome::Lost {
            o = self.probe(size)?;
        }
        log.push(PmtuProbe {
            size,
            outcome: match &o {
                Outcome::Passed => "passed",
                Outcome::TooBig { .. } => "too-big",
                Outcome::Lost => "lost",
            }
            .into(),
            from: match &o {
                Outcome::TooBig { from, .. } => from.clone(),
                _ => None,
            },
        });
        Ok(o)
    }
}

/// Finds the largest IP packet that reaches `dst` (a landspeed server's port, or any UDP port of a host
/// that answers with port unreachable).
pub fn discover(dst: SocketAddr, wait: Duration, interrupt: &AtomicBool) -> io::Result<PmtuReport> {
    let v6 = dst.is_ipv6();
    let sock = crate::udp_socket(dst, true)?;
    errqueue::enable(&sock, v6)?;
    errqueue::probe_mtu(&sock, v6)?;
    let local_mtu = errqueue::route_mtu(&sock, v6)?;
    let mut p = Prober {
        sock,
        overhead: crate::ip_udp_overhead(v6),
        id: getrandom::u32().unwrap_or(0x9a7),
        seq: 0,
        wait,
        buf: vec![0u8; 65536],
    };
    let mut report = PmtuReport {
        local_mtu,
        ..PmtuReport::default()
    };
    let floor = if v6 { 1280 } else { 576 }.min(local_mtu);
    let mut log = vec![];
    // The floor every IP path must carry; if even that gets no answer, nothing answers at all.
    if p.try_size(floor, &mut log)? != Outcome::Passed {
        report.probes = log;
        return Ok(report);
    }
    // No IP packet is longer than its length field allows, whatever the interface (loopback: 65536).
    let max_packet = if v6 { 65_575 } else { 65_535 };
    let (mut lo, mut hi) = (floor, local_mtu.min(max_packet));
    let mut next = hi;
    while lo < hi && !interrupt.load(Relaxed) && log.len() < 64 {
        match p.try_size(next, &mut log)? {
            Outcome::Passed => lo = next,
            Outcome::TooBig { from, mtu } => {
                hi = next - 1;
                if from.is_some() {
                    report.bottleneck = from;
                    report.bottleneck_mtu = Some(mtu);
                }
                // The router said what passes: try exactly that next.
                if mtu > lo && mtu <= hi {
                    next = mtu;
                    continue;
                }
            }
            Outcome::Lost => hi = next - 1,
        }
        next = lo + (hi - lo).div_ceil(2);
    }
    report.path_mtu = Some(lo);
    report.probes = log;
    Ok(report)
}
