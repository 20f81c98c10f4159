//! `landspeed run HOST --rr -u`: request/response over UDP (netperf's UDP_RR) against a landspeed
//! server's echo service (the UDP port every `landspeed serve` answers echo probes on): a socket
//! for each of `-P` (a thread each beyond one), `--in-flight` requests unanswered at once on each,
//! until `-t`. `core::transactions::udp::UdpRr` holds
//! every figure; this drives the socket and the clock. The server keeps no record of it: its echo
//! service answers any allowed address, with nothing longer than the request, and logs nothing.

use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions};
use crate::iperf2::bounce_client::{Finished, Live};
use landspeed_core::config::EndCondition;
use landspeed_core::result::RunResult;
use landspeed_core::transactions::udp::UdpRr;
use landspeed_core::transactions::TransactionShape;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A request unanswered this long is counted lost (and replaced).
pub(crate) const LOSS_TIMEOUT: Duration = Duration::from_secs(1);
/// How long the first request may wait for its answer before the server is said not to answer.
const FIRST_ANSWER: Duration = Duration::from_secs(3);

/// The kind a result names.
pub(crate) const KIND: &str = "landspeed UDP echo request/response (UDP_RR)";

/// Runs one UDP request/response test: `-P` sockets at once, each its own requests in flight.
pub fn run_udp_transactions(
    opts: &ClientOptions,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let spec = &opts.spec;
    let (Some(t), EndCondition::Time(run_for)) = (spec.transactions, spec.end) else {
        return Err(ClientError::Config(
            landspeed_core::config::ConfigError::TransactionsWith(
                "-n or -k (a request/response test is timed)",
            ),
        ));
    };
    let started_unix_s = unix_now_s();
    let addr = resolve(opts)?;
    let shape = TransactionShape::back_to_back(KIND, &t);
    let mut askers = Vec::new();
    for _ in 0..spec.streams.max(1) {
        let sock = socket(opts, addr)?;
        first_answer(&sock, shape.clone(), addr)?;
        let interval_ns = spec.interval_s.as_nanos() as u64;
        let rr = UdpRr::new(
            shape.clone(),
            random_train(),
            LOSS_TIMEOUT.as_nanos() as u64,
            interval_ns,
        )
        .map_err(|e| ClientError::Config(e.into()))?;
        askers.push((sock, rr));
    }
    let local = askers[0]
        .0
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    crate::iperf2::bounce_client::announce_ends(local, addr, spec.streams.max(1), on_event);
    let cpu0 = landspeed_engine::cpu::CpuSnapshot::take();
    let t0 = Instant::now();
    let ask =
        |(sock, rr): &mut (UdpSocket, UdpRr), on: Live| drive(sock, rr, (t0, run_for), interrupt, on).err();
    let errors = match askers.as_mut_slice() {
        [one] => vec![ask(one, on_event)],
        all => crate::iperf2::bounce_client::each_at_once(all, ask, on_event),
    };
    let elapsed = t0.elapsed().min(run_for);
    let rrs: Vec<UdpRr> = askers.into_iter().map(|(_, rr)| rr).collect();
    let done = Finished {
        corrupt: rrs.iter().map(UdpRr::corrupt).sum(),
        report: landspeed_core::transactions::udp::pooled(rrs, elapsed.as_nanos() as u64),
        tcp: None,
        error: errors.into_iter().flatten().next(),
        elapsed,
        cpu: cpu0.until(&landspeed_engine::cpu::CpuSnapshot::take()),
        started_unix_s,
        ends: (local, addr),
        server: "landspeed echo service",
        pattern:
            "UDP echo: each request's padding a pattern of its number, each full answer checked against it",
    };
    Ok(done.result(opts, spec, interrupt.load(Relaxed)))
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn random_train() -> u32 {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    u32::from_le_bytes(b)
}

/// A UDP socket of the server's family (on `--bind`'s address when given), connected to it.
fn socket(opts: &ClientOptions, addr: SocketAddr) -> Result<UdpSocket, ClientError> {
    let io = |err| ClientError::Stream { id: 0, err };
    let local = match (opts.bind, addr) {
        (Some(b), _) => SocketAddr::new(b, 0),
        (None, SocketAddr::V4(_)) => SocketAddr::from(([0, 0, 0, 0], 0)),
        (None, SocketAddr::V6(_)) => SocketAddr::from(([0u16; 8], 0)),
    };
    let sock = UdpSocket::bind(local).map_err(io)?;
    sock.connect(addr).map_err(io)?;
    Ok(sock)
}

/// One request answered before the clock starts: a server that does not answer is an error, not a
/// test of nothing but losses.
fn first_answer(sock: &UdpSocket, shape: TransactionShape, addr: SocketAddr) -> Result<(), ClientError> {
    let silent = |detail: String| ClientError::NotLandspeed { addr, detail };
    let mut rr = UdpRr::new(shape, random_train(), FIRST_ANSWER.as_nanos() as u64, 0)
        .map_err(|e| ClientError::Config(e.into()))?;
    let mut buf = vec![0u8; rr.request_bytes().max(65_536)];
    let t0 = Instant::now();
    let n = rr.request(&mut buf, 0).unwrap_or(0);
    sock.send(&buf[..n]).map_err(|e| silent(e.to_string()))?;
    while let Some(left) = FIRST_ANSWER.checked_sub(t0.elapsed()) {
        let _ = sock.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match sock.recv(&mut buf) {
            Ok(m) if rr.on_datagram(&buf[..m], t0.elapsed().as_nanos() as u64) == udp_answer() => {
                return Ok(())
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => return Err(silent(e.to_string())),
        }
    }
    Err(silent(format!(
        "no echo answered its UDP port within {FIRST_ANSWER:?}: not a landspeed server, or UDP is blocked"
    )))
}

fn udp_answer() -> landspeed_core::transactions::udp::Heard {
    landspeed_core::transactions::udp::Heard::Answer
}

/// Requests and answers until `run_for` has passed or the user interrupts; an error ends it early
/// with what was measured kept.
fn drive(
    sock: &UdpSocket,
    rr: &mut UdpRr,
    (t0, run_for): (Instant, Duration),
    interrupt: &AtomicBool,
    on: Live,
) -> Result<(), String> {
    let end_ns = run_for.as_nanos() as u64;
    let mut out = vec![0u8; rr.request_bytes()];
    let mut inbuf = vec![0u8; 65_536];
    let now = || t0.elapsed().as_nanos() as u64;
    while now() < end_ns && !interrupt.load(Relaxed) {
        while let Some(n) = rr.request(&mut out, now()) {
            sock.send(&out[..n])
                .map_err(|e| format!("a request could not be sent: {e}"))?;
        }
        let wake = rr.next_expiry_ns().unwrap_or(end_ns).min(end_ns);
        let wait = Duration::from_nanos(wake.saturating_sub(now())).max(Duration::from_micros(100));
        let _ = sock.set_read_timeout(Some(wait));
        match sock.recv(&mut inbuf) {
            Ok(m) => {
                rr.on_datagram(&inbuf[..m], now());
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                return Err(
                    "the server's UDP port refused the requests (ICMP port unreachable): it went away".into(),
                )
            }
            Err(e) => return Err(format!("an answer could not be read: {e}")),
        }
        rr.expire(now());
        for i in rr.log().advance(now()) {
            on(ClientEvent::Transactions {
                interval: i.clone(),
                tcp: None,
                connection: None,
            });
        }
    }
    Ok(())
}
