//! Packets seen on the wire, for tests whose claim is about the packets themselves (the type-of-service
//! byte a test marks its data with): a packet socket (AF_PACKET, root only) reads the IPv4 header and
//! the ports of every TCP and UDP packet to or from one port while the test runs. Nothing here sends.

use socket2::{Domain, Protocol, Socket, Type};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One IPv4 or IPv6 packet to or from the watched port.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The type-of-service byte (IPv6: the traffic class).
    pub tos: u8,
    /// IPv6: the flow label (0 for IPv4).
    pub flow_label: u32,
    /// The IP packet's total length (a whole TSO/GRO train on loopback).
    pub len: u16,
    /// Toward the watched port (client to server).
    pub to_port: bool,
}

/// A capture running until `stop`.
pub struct Capture {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Seen>>>,
}

impl Capture {
    /// Watches every interface of this namespace for packets to or from `port`; None (outside CI)
    /// without root.
    pub fn start(port: u16) -> Option<Capture> {
        let eth_p_all = i32::from(0x0003u16.to_be());
        let sock = match Socket::new(Domain::PACKET, Type::DGRAM, Some(Protocol::from(eth_p_all))) {
            Ok(s) => s,
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "packet capture needs root, and CI is set: {e}"
                );
                eprintln!("skipping: packet capture needs root ({e})");
                return None;
            }
        };
        sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let _ = sock.set_recv_buffer_size(8 << 20);
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = [0u8; 128];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = (&sock).read(&mut buf) {
                    seen.extend(parse(&buf[..n], port));
                }
            }
            seen
        });
        Some(Capture {
            done,
            thread: Some(thread),
        })
    }

    /// Ends the capture: what it saw.
    pub fn stop(mut self) -> Vec<Seen> {
        self.done.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// A TCP or UDP packet to or from `port`, from its first bytes: IPv4, or IPv6 without extension
/// headers (the only kind a test here sends).
fn parse(b: &[u8], port: u16) -> Option<Seen> {
    let (header, proto, seen) = match b.first()? >> 4 {
        4 if b.len() >= 20 => {
            let ihl = usize::from(b[0] & 0xf) * 4;
            let len = u16::from_be_bytes([b[2], b[3]]);
            (ihl, b[9], (b[1], 0, len))
        }
        6 if b.len() >= 40 => {
            let class = (b[0] << 4) | (b[1] >> 4);
            let label = (u32::from(b[1] & 0xf) << 16) | (u32::from(b[2]) << 8) | u32::from(b[3]);
            let len = u16::from_be_bytes([b[4], b[5]]).saturating_add(40);
            (40, b[6], (class, label, len))
        }
        _ => return None,
    };
    if !matches!(proto, 6 | 17) {
        return None;
    }
    let ports = b.get(header..header + 4)?;
    let (src, dst) = (
        u16::from_be_bytes([ports[0], ports[1]]),
        u16::from_be_bytes([ports[2], ports[3]]),
    );
    let (tos, flow_label, len) = seen;
    (src == port || dst == port).then_some(Seen {
        tos,
        flow_label,
        len,
        to_port: dst == port,
    })
}
