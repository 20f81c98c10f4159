//! `landspeed run --connect-rate` and `--connect-only`: how fast a server takes new connections
//! (netperf's TCP_CRR, iperf 2's `--connect-only`). Back to back until `-t`: each round opens a TCP
//! connection (its `connect()` timed: the three-way handshake as this end sees it), with
//! `--connect-rate` sends one bounceback request and reads its answer whole (checked against the
//! request, as `run --bounceback` checks), and closes. A transaction's latency is from the start of
//! `connect()` to the answer's last byte (the handshake included, as netperf's TCP_CRR counts it);
//! with `--connect-only` nothing is sent and the transaction is the handshake. Against `landspeed
//! serve` or `iperf -s` (both answer bounceback requests; `--connect-only` against any TCP server).
//! This end closes first, so its ports wait in TIME_WAIT: a long test at a high rate can run out of
//! local ports, which ends it with that said.

use super::bounce_client::{
    announce_ends, checked, random_bytes, same_echo, tcp_stats, unix_now_s, wire_now, BouncePlan, Finished,
    Live,
};
use crate::dial::{connect, resolve, ClientError, ClientEvent, ClientOptions};
use landspeed_core::result::RunResult;
use landspeed_core::transactions::{ConnectTimes, TransactionLog, TransactionShape};
use landspeed_iperf2::bounceback::{bbflags, Bounce};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// What each connection carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Churn {
    /// One bounceback request and its answer (TCP_CRR).
    Transaction,
    /// Nothing: connect and close (iperf 2's `--connect-only`).
    ConnectOnly,
}

/// The test's running state.
struct Churner<'a> {
    opts: &'a ClientOptions,
    spec: landspeed_core::config::Test,
    addr: SocketAddr,
    churn: Churn,
    request: Vec<u8>,
    answer: Vec<u8>,
    log: TransactionLog,
    handshakes: TransactionLog,
    t0: Instant,
    corrupt: u64,
    last: Option<TcpStream>,
}

/// Runs one connection-rate test.
pub fn run_connect_rate(
    opts: &ClientOptions,
    churn: Churn,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let plan = BouncePlan::default();
    let (spec, run_for) = checked(&opts.spec, &plan)?;
    if spec.streams != 1 {
        return Err(ClientError::NotWithIperf2 {
            what: "a connection-rate test with -P (one connection at a time)".into(),
        });
    }
    let started_unix_s = unix_now_s();
    let addr = resolve(opts)?;
    let mut c = Churner::new(opts, spec, addr, churn);
    // The first connection is made before the clock starts: a server that is not there is an
    // error, not a test of no connections.
    let first = c.once()?;
    let local = first
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    announce_ends(local, addr, 1, on_event);
    let cpu0 = landspeed_engine::cpu::CpuSnapshot::take();
    c.restart();
    let error = c.run(run_for, interrupt, on_event).err();
    let elapsed = c.t0.elapsed().min(run_for);
    let end_ns = elapsed.as_nanos() as u64;
    let tcp = c.last.as_ref().and_then(tcp_stats);
    let mut report = c.log.finish(end_ns);
    report.connect = Some(ConnectTimes::from_log(c.handshakes, end_ns));
    let done = Finished {
        report,
        tcp,
        corrupt: c.corrupt,
        error,
        elapsed,
        cpu: cpu0.until(&landspeed_engine::cpu::CpuSnapshot::take()),
        started_unix_s,
        ends: (local, addr),
        server: super::bounce_client::BOUNCEBACK_SERVER,
        pattern: super::bounce_client::BOUNCEBACK_PATTERN,
    };
    Ok(done.result(opts, &c.spec, interrupt.load(Relaxed)))
}

impl<'a> Churner<'a> {
    fn new(
        opts: &'a ClientOptions,
        spec: landspeed_core::config::Test,
        addr: SocketAddr,
        churn: Churn,
    ) -> Self {
        let size = match churn {
            Churn::Transaction => spec.length_bytes as usize,
            Churn::ConnectOnly => 0,
        };
        let shape = TransactionShape {
            kind: match churn {
                Churn::Transaction => "iperf2 bounceback, a connection each (TCP_CRR)",
                Churn::ConnectOnly => "TCP connect only",
            }
            .into(),
            request_bytes: size as u32,
            response_bytes: size as u32,
            in_flight: 1,
            ..TransactionShape::default()
        };
        let interval_ns = spec.interval_s.as_nanos() as u64;
        Churner {
            opts,
            addr,
            churn,
            request: random_bytes(size),
            answer: vec![0u8; size],
            log: TransactionLog::new(shape.clone(), interval_ns),
            handshakes: TransactionLog::new(shape, 0),
            spec,
            t0: Instant::now(),
            corrupt: 0,
            last: None,
        }
    }

    /// Forgets the first connection's figures: the test starts now.
    fn restart(&mut self) {
        let shape = self.handshakes.shape().clone();
        let interval_ns = self.spec.interval_s.as_nanos() as u64;
        self.log = TransactionLog::new(shape.clone(), interval_ns);
        self.handshakes = TransactionLog::new(shape, 0);
        self.corrupt = 0;
        self.t0 = Instant::now();
    }

    /// Connections back to back until `run_for` has passed or the user interrupts.
    fn run(&mut self, run_for: Duration, interrupt: &AtomicBool, on: Live) -> Result<(), String> {
        let end = self.t0 + run_for;
        let end_ns = run_for.as_nanos() as u64;
        while Instant::now() < end && !interrupt.load(Relaxed) {
            let s = self.once().map_err(|e| failed_connection(&e.to_string()))?;
            self.last = Some(s);
            let now_ns = (self.t0.elapsed().as_nanos() as u64).min(end_ns);
            for i in self.log.advance(now_ns) {
                on(ClientEvent::Transactions {
                    interval: i.clone(),
                    tcp: None,
                    connection: None,
                });
            }
        }
        Ok(())
    }

    /// One connection: opened (timed), its transaction; recorded. Returns the socket, for its TCP
    /// figures; dropping it closes it.
    fn once(&mut self) -> Result<TcpStream, ClientError> {
        let started = Instant::now();
        let socket = connect(self.opts, self.addr, Some((&self.spec, 0)))?;
        let connected = Instant::now();
        if self.churn == Churn::Transaction {
            self.transact(&socket)
                .map_err(|err| ClientError::Stream { id: 0, err })?;
        }
        let done = Instant::now();
        let since = |t: Instant| t.duration_since(self.t0).as_nanos() as u64;
        self.handshakes
            .record(since(connected), (connected - started).as_nanos() as u64);
        self.log.record(since(done), (done - started).as_nanos() as u64);
        Ok(socket)
    }

    fn transact(&mut self, mut socket: &TcpStream) -> std::io::Result<()> {
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(Duration::from_secs(10)))?;
        let size = self.request.len() as u32;
        Bounce::request(size, 1, bbflags::QUICKACK, wire_now(), 0).write(&mut self.request);
        socket.write_all(&self.request)?;
        socket.read_exact(&mut self.answer)?;
        if !same_echo(&self.request, &self.answer) {
            self.corrupt += 1;
        }
        Ok(())
    }
}

/// A connection that failed mid-test, said plainly when it is the local ports running out (shared
/// with landspeed's protocol's connection-each test).
pub(crate) fn failed_connection(e: &str) -> String {
    if e.contains("Cannot assign requested address") || e.contains("os error 99") {
        format!("{e}: this end ran out of local ports (its closed connections wait in TIME_WAIT); a shorter -t, or net.ipv4.ip_local_port_range wider")
    } else {
        format!("a connection failed: {e}")
    }
}
