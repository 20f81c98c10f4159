//! RTT from TCP connection set-up, against any host and port: the time `connect` takes is one round trip
//! (SYN, SYN-ACK) plus the local stack's work. A refused connection (RST) is a round trip too and
//! counts; a timeout is a lost probe. Each connection is closed at once.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One connect: its RTT, or None when nothing answered within the timeout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Connect {
    /// The attempt's number, from 0.
    pub seq: u32,
    /// The connect time (SYN to SYN-ACK); None when nothing answered within the timeout.
    pub rtt: Option<Duration>,
    /// The host answered with a reset (nothing listens on the port).
    pub refused: bool,
}

/// Times `count` TCP connects to `addr`, `interval` apart, each given up after `timeout`; stops early when `interrupt` is raised. `seen` hears of each attempt as it ends.
pub fn ping(
    addr: SocketAddr,
    count: u32,
    interval: Duration,
    timeout: Duration,
    interrupt: &AtomicBool,
    seen: &mut dyn FnMut(&Connect),
) -> Vec<Connect> {
    let start = Instant::now();
    let mut out = vec![];
    for seq in 0..count {
        if interrupt.load(Relaxed) {
            break;
        }
        let t = Instant::now();
        let r = TcpStream::connect_timeout(&addr, timeout);
        let took = t.elapsed();
        let c = match r {
            Ok(s) => {
                drop(s);
                Connect {
                    seq,
                    rtt: Some(took),
                    refused: false,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Connect {
                seq,
                rtt: Some(took),
                refused: true,
            },
            Err(_) => Connect {
                seq,
                rtt: None,
                refused: false,
            },
        };
        seen(&c);
        out.push(c);
        if seq + 1 < count {
            let next = start + interval * (seq + 1);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }
    out
}
