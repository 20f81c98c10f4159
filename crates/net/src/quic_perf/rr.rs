//! Request/response over QUIC (`run --quic-perf --rr`, and `--quic-perf --connect-rate`), in the
//! QUIC performance protocol, so any perf server answers it (`landspeed serve`, quinn's perf,
//! msquic's secnetperf, quic-go's and aioquic's): each transaction is one bidirectional stream on
//! which the client writes the response size it wants (8 bytes, big-endian), its request and FIN,
//! and the server, having read the request whole, writes that many bytes and FIN. Its latency is
//! from opening the stream to the answer's FIN, so it includes the stream's setup as an HTTP/3
//! request's does. `--in-flight N` keeps N such streams open at once on the one connection; with
//! `--connect-rate` each transaction has a connection of its own (one UDP socket, a handshake each,
//! its time kept apart as TCP_CRR's connect is). The server's bytes are its own (constant for most
//! stacks): their count is checked, not their content, and the result says so.

use crate::dial::quic::{connect, quic_err};
use crate::dial::{resolve, run_context, ClientError, ClientEvent, ClientOptions};
use landspeed_core::config::{EndCondition, Flow, Test, TransactionSpec};
use landspeed_core::endpoint::{CpuTimes, EndpointReport, Role, StreamReport};
use landspeed_core::result::RunResult;
use landspeed_core::transactions::{ConnectTimes, TransactionLog, TransactionShape, TransactionsReport};
use landspeed_engine::quic::{self as q, ALPN_PERF};
use landspeed_engine::tls::Trust;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

/// Streams a connection may have open at once (the most `--in-flight` allows).
const MAX_STREAMS: u32 = landspeed_core::config::MAX_IN_FLIGHT;
/// A transaction that takes longer than this ends the test with that said.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);

/// How the connection is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuicChurn {
    /// One connection, `in_flight` transactions on it at once (`--rr`).
    Reuse,
    /// A connection per transaction, its handshake timed (`--connect-rate`).
    ConnectEach,
}

/// What one test needs while it runs.
struct Run<'a> {
    spec: TransactionSpec,
    request: Vec<u8>,
    t0: Instant,
    end: Instant,
    interrupt: &'a AtomicBool,
    log: RefCell<TransactionLog>,
    handshakes: RefCell<TransactionLog>,
    short: RefCell<u64>,
    on_event: RefCell<&'a mut dyn FnMut(ClientEvent)>,
}

/// Runs one request/response test against a QUIC performance-protocol server.
pub fn run_quic_transactions(
    opts: &ClientOptions,
    churn: QuicChurn,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let (spec, t, run_for) = checked(opts, churn)?;
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let addr = resolve(opts)?;
    let trust = opts.tls_pin.map_or(Trust::Any, Trust::Pinned);
    let congestion = spec.congestion.clone().unwrap_or_else(|| "cubic".into());
    let config = q::client_config(trust, ALPN_PERF, Some(&congestion), MAX_STREAMS).map_err(quic_err)?;
    let first = connect(opts, addr, config.clone(), &congestion, &opts.host)?;
    let local = (first.endpoint.as_ref())
        .and_then(|e| e.local_addr().ok())
        .unwrap_or(addr);
    on_event(ClientEvent::Connected { local, remote: addr });
    on_event(ClientEvent::Started {
        streams: 1,
        warnings: vec![],
    });
    let cpu0 = landspeed_engine::cpu::CpuSnapshot::take();
    let shape = shape(&t, churn);
    let interval_ns = spec.interval_s.as_nanos() as u64;
    let t0 = Instant::now();
    let run = Run {
        spec: t,
        request: vec![0u8; t.request_bytes as usize],
        t0,
        end: t0 + run_for,
        interrupt,
        log: RefCell::new(TransactionLog::new(shape.clone(), interval_ns)),
        handshakes: RefCell::new(TransactionLog::new(shape, 0)),
        short: RefCell::new(0),
        on_event: RefCell::new(on_event),
    };
    let error = first
        .runtime
        .block_on(async {
            match churn {
                QuicChurn::Reuse => run.reuse(&first.conn).await,
                QuicChurn::ConnectEach => {
                    let endpoint = first
                        .endpoint
                        .as_ref()
                        .expect("a client connection has its endpoint");
                    first.conn.close(0u32.into(), b"");
                    run.connect_each(endpoint, &config, addr, &opts.host).await
                }
            }
        })
        .err()
        .map(|e| e.to_string());
    let elapsed = t0.elapsed().min(run_for);
    first.conn.close(0u32.into(), b"");
    let cpu = cpu0.until(&landspeed_engine::cpu::CpuSnapshot::take());
    let short = *run.short.borrow();
    let mut report = run.log.into_inner().finish(elapsed.as_nanos() as u64);
    if churn == QuicChurn::ConnectEach {
        let h = run.handshakes.into_inner().finish(elapsed.as_nanos() as u64);
        report.connect = Some(ConnectTimes {
            connections: h.transactions,
            latency: h.latency,
            histogram: h.histogram,
        });
    }
    let here = endpoint(&report, (short, error), elapsed, cpu);
    let ends = (local, addr, started_unix_s, interrupt.load(Relaxed));
    Ok(assembled(opts, &spec, here, ends, (report, short)))
}

/// The result: this end's report, the server's inferred from it, the figures attached.
fn assembled(
    opts: &ClientOptions,
    spec: &Test,
    here: EndpointReport,
    (local, addr, started_unix_s, interrupted): (std::net::SocketAddr, std::net::SocketAddr, f64, bool),
    (report, short): (TransactionsReport, u64),
) -> RunResult {
    let mut context = run_context(opts, local, addr, &here, started_unix_s, interrupted, "quic-perf");
    context.foreign_peer = true;
    let mut result = crate::dial::assemble_inferred(spec, context, &here, "");
    counted(&mut result, report, short);
    result
}

/// The test as it runs: QUIC, forward, timed, nothing verified; its transactions' shape.
fn checked(opts: &ClientOptions, churn: QuicChurn) -> Result<(Test, TransactionSpec, Duration), ClientError> {
    let t = opts.spec.transactions.unwrap_or(TransactionSpec {
        request_bytes: 1,
        response_bytes: 1,
        in_flight: 1,
        connect_each: false,
    });
    let run_for = match opts.spec.end {
        EndCondition::Time(d) => d,
        _ => {
            return Err(ClientError::NotWithIperf3 {
                what: "a QUIC request/response test ended by bytes or blocks (it runs for -t)",
            })
        }
    };
    if churn == QuicChurn::ConnectEach && t.in_flight > 1 {
        return Err(ClientError::NotWithIperf3 {
            what: "--in-flight with --connect-rate (a connection carries one transaction)",
        });
    }
    // The spec's request/response shape is landspeed's own protocol's (TCP); the perf protocol's
    // is in the result's transactions.
    let spec = opts.spec.changed(|s| {
        s.transactions = None;
        s.transport = landspeed_core::config::Transport::Quic;
        // Requests one way, answers the other: a stream each way in the result.
        s.direction = landspeed_core::config::Direction::Bidir;
        s.streams = 1;
        s.verify = false;
        s.omit_s = Duration::ZERO;
    })?;
    Ok((spec, t, run_for))
}

fn shape(t: &TransactionSpec, churn: QuicChurn) -> TransactionShape {
    let kind = match churn {
        QuicChurn::Reuse => "QUIC perf request/response",
        QuicChurn::ConnectEach => "QUIC perf, a connection each",
    };
    TransactionShape::back_to_back(kind, t)
}

impl Run<'_> {
    fn going(&self) -> bool {
        Instant::now() < self.end && !self.interrupt.load(Relaxed)
    }

    /// `in_flight` loops of transactions on one connection, interleaved on this thread.
    async fn reuse(&self, conn: &quinn::Connection) -> Result<(), ClientError> {
        let loops = (0..self.spec.in_flight).map(|_| async {
            while self.going() {
                let started = Instant::now();
                self.transact(conn).await?;
                self.record(started, Instant::now());
            }
            Ok::<(), ClientError>(())
        });
        let mut all: Vec<_> = loops.map(Box::pin).collect();
        // Every loop polled together on this thread until each has ended; the first error is the
        // test's.
        let mut outcomes: Vec<Option<Result<(), ClientError>>> = all.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (f, out) in all.iter_mut().zip(outcomes.iter_mut()) {
                if out.is_none() {
                    match std::future::Future::poll(f.as_mut(), cx) {
                        std::task::Poll::Ready(r) => *out = Some(r),
                        std::task::Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                std::task::Poll::Pending
            } else {
                std::task::Poll::Ready(())
            }
        })
        .await;
        outcomes
            .into_iter()
            .flatten()
            .find(|r| r.is_err())
            .unwrap_or(Ok(()))
    }

    /// A connection per transaction: handshake, one request answered, closed.
    async fn connect_each(
        &self,
        endpoint: &quinn::Endpoint,
        config: &quinn::ClientConfig,
        addr: std::net::SocketAddr,
        name: &str,
    ) -> Result<(), ClientError> {
        while self.going() {
            let started = Instant::now();
            let connecting = endpoint
                .connect_with(config.clone(), addr, name)
                .map_err(quic_err)?;
            let conn = tokio::time::timeout(TRANSACTION_TIMEOUT, connecting)
                .await
                .map_err(|_| quic_err(format!("no QUIC handshake within {TRANSACTION_TIMEOUT:?}")))?
                .map_err(|e| quic_err(format!("QUIC handshake: {e}")))?;
            let connected = Instant::now();
            self.transact(&conn).await?;
            conn.close(0u32.into(), b"");
            let since = |t: Instant| t.duration_since(self.t0).as_nanos() as u64;
            (self.handshakes.borrow_mut()).record(since(connected), (connected - started).as_nanos() as u64);
            self.record(started, Instant::now());
        }
        Ok(())
    }

    /// One stream: the size asked, the request, FIN; the answer read to its FIN and counted.
    async fn transact(&self, conn: &quinn::Connection) -> Result<(), ClientError> {
        let want = u64::from(self.spec.response_bytes);
        let exchange = async {
            let (mut send, mut recv) = conn.open_bi().await.map_err(quic_err)?;
            send.write_all(&want.to_be_bytes()).await.map_err(quic_err)?;
            send.write_all(&self.request).await.map_err(quic_err)?;
            send.finish().map_err(quic_err)?;
            let mut got = 0u64;
            let mut buf = vec![0u8; 64 * 1024];
            while let Some(n) = recv.read(&mut buf).await.map_err(quic_err)? {
                got += n as u64;
            }
            Ok::<u64, ClientError>(got)
        };
        let got = tokio::time::timeout(TRANSACTION_TIMEOUT, exchange)
            .await
            .map_err(|_| quic_err(format!("a transaction took over {TRANSACTION_TIMEOUT:?}")))??;
        if got != want {
            *self.short.borrow_mut() += 1;
        }
        Ok(())
    }

    /// A transaction done: recorded, and the intervals it closed handed on.
    fn record(&self, started: Instant, done: Instant) {
        let since = |t: Instant| t.duration_since(self.t0).as_nanos() as u64;
        let end_ns = self.end.duration_since(self.t0).as_nanos() as u64;
        let mut log = self.log.borrow_mut();
        log.record(since(done).min(end_ns), (done - started).as_nanos() as u64);
        let closed = log.advance(since(done).min(end_ns)).to_vec();
        drop(log);
        let mut on = self.on_event.borrow_mut();
        for interval in closed {
            on(ClientEvent::Transactions {
                interval,
                tcp: None,
                connection: None,
            });
        }
    }
}

/// This end's report: the requests sent, the answers received (none verified: the server's bytes
/// are its own).
fn endpoint(
    r: &TransactionsReport,
    (short, error): (u64, Option<String>),
    elapsed: Duration,
    cpu: CpuTimes,
) -> EndpointReport {
    let stream = |id, flow, role, size: u32| StreamReport {
        bytes: r.transactions * u64::from(size),
        calls: r.transactions,
        first_byte_s: Some(0.0),
        last_byte_s: Some(elapsed.as_secs_f64()),
        error: error.clone(),
        ..StreamReport::empty(id, flow, role)
    };
    let mut received = stream(1, Flow::ServerToClient, Role::Receiver, r.shape.response_bytes);
    received.corrupt_blocks = short;
    EndpointReport {
        software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
        streams: vec![
            stream(0, Flow::ClientToServer, Role::Sender, r.shape.request_bytes),
            received,
        ],
        cpu,
        host: landspeed_engine::host::host_info(),
        elapsed_s: elapsed.as_secs_f64(),
        threads: 1,
        error,
        ..EndpointReport::default()
    }
}

/// The figures attached, what was checked said, and no bulk diagnosis (the rate is the latency's).
fn counted(result: &mut RunResult, report: TransactionsReport, short: u64) {
    let p = &mut result.payload;
    p.pattern = "QUIC perf: the server's own bytes; each answer's length checked".into();
    p.verified = false;
    p.bytes_verified = 0;
    p.unverified_because = Some(if short > 0 {
        format!("{short} answer(s) were not the length asked for")
    } else {
        "the QUIC performance protocol's server sends bytes of its own choosing: each answer's length was checked, not its content".into()
    });
    for d in &mut result.directions {
        d.limits.clear();
    }
    result.transactions = Some(report);
}
