//! `landspeed run --connect-rate` and `--connect-only`: how fast a server takes new connections
//! (netperf's TCP_CRR, iperf 2's `--connect-only`). Back to back until `-t` (on each of `-P` threads,
//! pooled as bounceback's `-P` is): each round opens a TCP
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
use landspeed_core::transactions::{ConnectTimes, TransactionLog, TransactionShape, TransactionsReport};
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

/// Runs one connection-rate test: `-P` threads at once (one without), each making its
/// connections back to back.
pub fn run_connect_rate(
    opts: &ClientOptions,
    churn: Churn,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let plan = BouncePlan::default();
    let (spec, run_for) = checked(&opts.spec, &plan)?;
    let started_unix_s = unix_now_s();
    let addr = resolve(opts)?;
    let mut churners = vec![];
    let mut first = None;
    for _ in 0..spec.streams.max(1) {
        let mut c = Churner::new(opts, spec.clone(), addr, churn);
        // Each one's first connection is made before the clock starts: a server that is not there
        // is an error, not a test of no connections.
        first.get_or_insert(c.once()?);
        churners.push(c);
    }
    let local = (first.as_ref().map(TcpStream::local_addr))
        .transpose()
        .map_err(|err| ClientError::Stream { id: 0, err })?
        .unwrap_or(addr);
    announce_ends(local, addr, spec.streams.max(1), on_event);
    let cpu0 = landspeed_engine::cpu::CpuSnapshot::take();
    let t0 = Instant::now();
    churners.iter_mut().for_each(|c| c.restart(t0));
    let errors = match churners.as_mut_slice() {
        [one] => vec![one.run(run_for, interrupt, on_event).err()],
        all => super::bounce_client::each_at_once(all, |c, on| c.run(run_for, interrupt, on).err(), on_event),
    };
    let elapsed = t0.elapsed().min(run_for);
    let done = Finished {
        tcp: churners[0].last.as_ref().and_then(tcp_stats),
        corrupt: churners.iter().map(|c| c.corrupt).sum(),
        report: pooled_report(churners.iter_mut().map(Churner::logs).collect(), elapsed),
        error: errors.into_iter().flatten().next(),
        elapsed,
        cpu: cpu0.until(&landspeed_engine::cpu::CpuSnapshot::take()),
        started_unix_s,
        ends: (local, addr),
        server: super::bounce_client::BOUNCEBACK_SERVER,
        pattern: super::bounce_client::BOUNCEBACK_PATTERN,
    };
    Ok(done.result(opts, &spec, interrupt.load(Relaxed)))
}

/// Every thread's transactions together (each one's own in `connections` with more than one),
/// and every handshake's times.
fn pooled_report(logs: Vec<(TransactionLog, TransactionLog)>, elapsed: Duration) -> TransactionsReport {
    let end_ns = elapsed.as_nanos() as u64;
    let (logs, handshakes): (Vec<_>, Vec<_>) = logs.into_iter().unzip();
    let mut report = landspeed_core::transactions::pooled(logs, end_ns);
    report.connect = Some(ConnectTimes::from_report(landspeed_core::transactions::pooled(
        handshakes, end_ns,
    )));
    report
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

    /// Forgets the first connection's figures: the test starts at `t0`.
    fn restart(&mut self, t0: Instant) {
        let shape = self.handshakes.shape().clone();
        let interval_ns = self.spec.interval_s.as_nanos() as u64;
        self.log = TransactionLog::new(shape.clone(), interval_ns);
        self.handshakes = TransactionLog::new(shape, 0);
        self.corrupt = 0;
        self.t0 = t0;
    }

    /// Its transactions' and its handshakes' logs, taken for the report.
    fn logs(&mut self) -> (TransactionLog, TransactionLog) {
        let shape = self.handshakes.shape().clone();
        (
            std::mem::replace(&mut self.log, TransactionLog::new(shape.clone(), 0)),
            std::mem::replace(&mut self.handshakes, TransactionLog::new(shape, 0)),
        )
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
