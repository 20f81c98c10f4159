//! A connection each (`run --connect-rate` in landspeed's protocol, netperf's TCP_CRR, over TLS
//! too): each of the client's streams opens a connection, has one request answered on it and closes
//! it, again and again until the test's time is up; the server answers each connection of the test
//! as it arrives. The engine does not dial or accept: the caller's [`Connections`] opens the
//! client's (the TCP handshake and, with `--tls`, the TLS one, each timed) and hands the server the
//! ones that arrive (their TLS handshake done). Each connection's request and response are the
//! request/response test's, checked the same way (`super::End`, one transaction); a transaction's
//! latency runs from the start of `connect()` to its response's last byte, as netperf's TCP_CRR
//! counts it. The streams' first connections, opened with the test, carry one transaction each
//! before the clock's first timed one and are not timed (their handshakes came before the start).

use super::super::{round_robin, Meter, Outcome, Settled, StreamMeta, Transport};
use super::{ns, End, TICK};
use crate::supervisor::{EngineOutput, EngineParams, Flags};
use crate::transport::tcp::{DataStream, Tcp};
use landspeed_core::config::TransactionSpec;
use landspeed_core::endpoint::{Role, TcpSnapshot};
use landspeed_core::transactions::{ConnectTimes, TransactionLog, TransactionShape, TransactionsReport};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where a test's connections come from: the client opens them, the server is handed them.
pub trait Connections: Sync {
    /// The client: a new connection for stream `id`, ready for its request.
    fn open(&self, id: u32) -> Result<Opened, String>;
    /// The server: the next connection of the test to arrive within `wait`, ready for its request
    /// (None when none came).
    fn next(&self, wait: Duration) -> Option<Result<DataStream, String>>;
}

/// A connection the client opened, and how long its handshakes took.
pub struct Opened {
    /// The connection.
    pub stream: DataStream,
    /// `connect()`: the TCP three-way handshake as the client sees it.
    pub tcp: Duration,
    /// The TLS handshake after it, over TLS.
    pub tls: Option<Duration>,
}

/// The client's handshake times: TCP's, and TLS's over TLS.
pub struct Handshakes {
    tcp: Mutex<TransactionLog>,
    tls: Mutex<TransactionLog>,
}

impl Default for Handshakes {
    fn default() -> Self {
        let log = || Mutex::new(TransactionLog::new(TransactionShape::default(), 0));
        Handshakes {
            tcp: log(),
            tls: log(),
        }
    }
}

impl Handshakes {
    fn record(&self, at_ns: u64, o: &Opened) {
        let record = |m: &Mutex<TransactionLog>, latency: Duration| {
            (m.lock().unwrap_or_else(|e| e.into_inner())).record(at_ns, ns(latency))
        };
        record(&self.tcp, o.tcp);
        if let Some(t) = o.tls {
            record(&self.tls, t);
        }
    }

    /// The handshakes' figures over the test's `end_ns`: TCP's, and TLS's when any was made.
    fn finish(self, end_ns: u64) -> (ConnectTimes, Option<ConnectTimes>) {
        let take = |m: Mutex<TransactionLog>| m.into_inner().unwrap_or_else(|e| e.into_inner());
        let tcp = ConnectTimes::from_log(take(self.tcp), end_ns);
        let tls = ConnectTimes::from_log(take(self.tls), end_ns);
        (tcp, (tls.connections > 0).then_some(tls))
    }
}

/// The transport: the streams' first connections, then a connection each.
struct Each<'a> {
    first: &'a [DataStream],
    spec: TransactionSpec,
    log: &'a Mutex<TransactionLog>,
    handshakes: &'a Handshakes,
    conns: &'a dyn Connections,
}

impl Transport for Each<'_> {
    fn streams(&self) -> Vec<StreamMeta> {
        Tcp(self.first).streams()
    }

    /// A thread per stream: each waits on its own connections.
    fn groups(&self, _p: &EngineParams) -> Vec<Vec<usize>> {
        round_robin(self.first.len(), self.first.len())
    }

    fn work(
        &self,
        group: &[usize],
        meters: &[Meter],
        p: &EngineParams,
        flags: &Flags,
        t0: Instant,
    ) -> Vec<(usize, Outcome)> {
        super::each_stream(group, meters, |i| {
            let (first, meter) = (&self.first[i], &meters[i]);
            match first.role {
                Role::Sender => self.ask(first, meter, p, flags, t0),
                Role::Receiver => self.answer(first, meter, p, flags),
            }
        })
    }

    /// None: no one connection stands for the stream's many.
    fn snapshot(&self, _i: usize) -> Option<TcpSnapshot> {
        None
    }

    /// The first connection's buffers, cipher and ports, but not its TCP figures: they are one
    /// transaction's of the stream's many.
    fn settle(&self, i: usize, rtts_us: &[u32]) -> Settled {
        Settled {
            tcp: None,
            ..Tcp(self.first).settle(i, rtts_us)
        }
    }
}

impl Each<'_> {
    /// The client's stream: its first connection's transaction (not timed), then connections one
    /// after another until the time is up or the test stops.
    fn ask(
        &self,
        first: &DataStream,
        meter: &Meter,
        p: &EngineParams,
        flags: &Flags,
        t0: Instant,
    ) -> Outcome {
        let untimed = Mutex::new(TransactionLog::new(TransactionShape::default(), 0));
        let mut out = End::new(first, meter, self.spec, p)
            .once(None, Outcome::default())
            .ask(p, flags, t0, &untimed);
        let deadline = p.send_time.map(|d| t0 + d);
        while out.error.is_none() && !stopped(flags, deadline) {
            let began = Instant::now();
            let opened = match self.conns.open(first.id) {
                Ok(o) => o,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            };
            self.handshakes.record(ns(began.duration_since(t0)), &opened);
            out = End::new(&opened.stream, meter, self.spec, p)
                .once(Some(began), out)
                .ask(p, flags, t0, self.log);
        }
        out
    }

    /// The server's stream: its first connection answered, then whichever of the test's
    /// connections arrive, until the client says it is done (`stop`) or the test ends otherwise.
    fn answer(&self, first: &DataStream, meter: &Meter, p: &EngineParams, flags: &Flags) -> Outcome {
        let mut out = End::new(first, meter, self.spec, p).answer(p, flags);
        while out.error.is_none() {
            if flags.abort.load(Relaxed) || flags.halt.load(Relaxed) {
                out.error = Some("test aborted".into());
                break;
            }
            match self.conns.next(TICK) {
                Some(Ok(ds)) => {
                    out = End::new(&ds, meter, self.spec, p)
                        .once(None, out)
                        .answer(p, flags)
                }
                Some(Err(e)) => out.error = Some(e),
                None if flags.stop.load(Relaxed) => break,
                None => {}
            }
        }
        out
    }
}

/// The client's loop is over: stopped, or past its time.
fn stopped(flags: &Flags, deadline: Option<Instant>) -> bool {
    flags.stop.load(Relaxed)
        || flags.abort.load(Relaxed)
        || flags.halt.load(Relaxed)
        || deadline.is_some_and(|d| Instant::now() >= d)
}

/// Runs a connection-each test's streams through the supervisor: the client's transactions into
/// `log` and its handshakes into the report; the server's report stays empty.
pub fn run_each<X: Send>(
    first: &[DataStream],
    (spec, log): (TransactionSpec, &Mutex<TransactionLog>),
    conns: &dyn Connections,
    p: &EngineParams,
    wiring: crate::supervisor::Wiring<'_, X>,
) -> (EngineOutput, TransactionsReport) {
    let handshakes = Handshakes::default();
    let each = Each {
        first,
        spec,
        log,
        handshakes: &handshakes,
        conns,
    };
    let out = crate::supervisor::run(&each, p, wiring);
    let elapsed = Duration::from_secs_f64(out.elapsed_s);
    let end = ns(p.send_time.map_or(elapsed, |t| t.min(elapsed)));
    let mut held = log.lock().unwrap_or_else(|e| e.into_inner());
    let spent = std::mem::replace(
        &mut *held,
        TransactionLog::new(TransactionShape::landspeed(&spec), 0),
    );
    let mut report = spent.finish(end);
    let (tcp, tls) = handshakes.finish(end);
    report.connect = Some(tcp);
    report.tls = tls;
    (out, report)
}
