//! Packets seen on the wire, for tests whose claim is about the packets themselves (the type-of-service
//! byte a test marks its data with): a packet socket (AF_PACKET, root only) reads the IPv4 header and
//! the ports of every TCP and UDP packet to or from one port while the test runs. Nothing here sends.

use socket2::{Domain, Protocol, Socket, Type};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One IPv4 packet to or from the watched port.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The type-of-service byte.
    pub tos: u8,
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

/// An IPv4 TCP or UDP packet to or from `port`, from its first bytes.
fn parse(b: &[u8], port: u16) -> Option<Seen> {
    if b.len() < 20 || b[0] >> 4 != 4 || !matches!(b[9], 6 | 17) {
        return None;
    }
    let ihl = usize::from(b[0] & 0xf) * 4;
    let ports = b.get(ihl..ihl + 4)?;
    let (src, dst) = (
        u16::from_be_bytes([ports[0], ports[1]]),
        u16::from_be_bytes([ports[2], ports[3]]),
    );
    (src == port || dst == port).then_some(Seen {
        tos: b[1],
        len: u16::from_be_bytes([b[2], b[3]]),
        to_port: dst == port,
    })
}
