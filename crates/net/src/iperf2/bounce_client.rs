//! `landspeed run --bounceback`: a request/response test in iperf 2's `--bounceback` protocol, against
//! iperf 2.1.x's server (`iperf -s`) or landspeed's (which answers it on its one port). A TCP
//! connection (`-P N`: N at once, a thread each, on one clock), `TCP_NODELAY`; every period (1 s
//! by default) a burst of requests (10 by default) goes out one at a time, each of `-l` bytes (100
//! by default, at least the 64-byte header), and each answer is read whole before the next request: its latency is the time from writing the request
//! to reading the last byte of the answer, as iperf 2 measures it. With a period of 0 the requests
//! follow each other without pause: the connection's transaction rate. Each answer is checked
//! against its request (the same size, id and send time, the same payload): an echo that changed a
//! byte is counted, and makes the result untrusted. The figures are `core::transactions`.

use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions};
use landspeed_core::config::{Direction, EndCondition, Flow, Test, TestSpec, Transport};
use landspeed_core::endpoint::{EndpointReport, Role, StreamReport};
use landspeed_core::result::RunResult;
use landspeed_core::transactions::{
    OneWayTimes, SignedMoments, TransactionInterval, TransactionLog, TransactionShape, TransactionsReport,
};
use landspeed_iperf2::ack::WireTime;
use landspeed_iperf2::bounceback::{self as bb, bbflags, Bounce};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

/// Where a test's live events go.
pub(crate) type Live<'a, 'b> = &'a mut (dyn FnMut(ClientEvent) + 'b);

/// How a bounceback test paces its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BouncePlan {
    /// Requests per burst (iperf 2's `--bounceback=N`; 10 when not given).
    pub burst: u32,
    /// Time between bursts' starts; zero sends each request as soon as the last is answered.
    pub period: Duration,
    /// How long the server is asked to wait before each answer.
    pub hold: Duration,
    /// Ask both ends to acknowledge at once (TCP_QUICKACK; iperf 2's default).
    pub quickack: bool,
    /// The clocks are synchronized: report each way's delay from the server's stamps (iperf 2's
    /// `--trip-times`).
    pub trip_times: bool,
}

impl Default for BouncePlan {
    fn default() -> Self {
        BouncePlan {
            burst: 10,
            period: Duration::from_secs(1),
            hold: Duration::ZERO,
            quickack: true,
            trip_times: false,
        }
    }
}

/// The running test: its connection, its buffers, what came back.
struct Bouncer<'a> {
    socket: TcpStream,
    request: Vec<u8>,
    answer: Vec<u8>,
    flags: u16,
    hold_us: u32,
    quickack: bool,
    log: TransactionLog,
    t0: Instant,
    end_ns: u64,
    corrupt: u64,
    /// With trip times: to the server, back from it.
    trips: Option<(SignedMoments, SignedMoments)>,
    interrupt: &'a AtomicBool,
}

/// Runs one bounceback test: `-P` connections at once, each its own requests one at a time.
pub fn run_bounceback_client(
    opts: &ClientOptions,
    plan: &BouncePlan,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let (spec, run_for) = checked(&opts.spec, plan)?;
    let started_unix_s = unix_now_s();
    let addr = resolve(opts)?;
    let (mut sockets, mut facts) = (vec![], vec![]);
    for k in 0..spec.streams {
        let (socket, tcp) = crate::dial::connect_timed(opts, addr, &spec, k)?;
        facts.push(super::client::connect_facts(&socket, tcp));
        sockets.push(socket);
    }
    on_event(connected(&sockets, facts));
    let local = sockets[0]
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    announce_ends(local, addr, spec.streams, on_event);
    let cpu0 = landspeed_engine::cpu::CpuSnapshot::take();
    let mut bouncers = (sockets.into_iter())
        .map(|s| Bouncer::new(s, &spec, plan, interrupt))
        .collect::<Result<Vec<_>, _>>()?;
    let t0 = Instant::now();
    let errors = match bouncers.as_mut_slice() {
        [b] => vec![b.run(plan, (t0, run_for), on_event).err()],
        all => each_at_once(all, |b, on| b.run(plan, (t0, run_for), on).err(), on_event),
    };
    let elapsed = t0.elapsed().min(run_for);
    let done = Finished {
        tcp: tcp_stats(&bouncers[0].socket),
        corrupt: bouncers.iter().map(|b| b.corrupt).sum(),
        error: errors.into_iter().flatten().next(),
        report: pooled_report(bouncers, elapsed),
        elapsed,
        cpu: cpu0.until(&landspeed_engine::cpu::CpuSnapshot::take()),
        started_unix_s,
        ends: (local, addr),
        server: BOUNCEBACK_SERVER,
        pattern: BOUNCEBACK_PATTERN,
    };
    Ok(done.result(opts, &spec, interrupt.load(Relaxed)))
}

/// The event that says the test's connections are up, and how each was made.
fn connected(sockets: &[TcpStream], facts: Vec<landspeed_core::endpoint::ConnectFacts>) -> ClientEvent {
    let ends = |s: &TcpStream| Some((s.local_addr().ok()?, s.peer_addr().ok()?));
    ClientEvent::StreamsConnected {
        connections: sockets.iter().filter_map(ends).collect(),
        facts,
    }
}

/// Every connection's figures together (and each one's own with more than one), the connections
/// closed; with trip times, each way's delays over every answer.
fn pooled_report(bouncers: Vec<Bouncer>, elapsed: Duration) -> TransactionsReport {
    let mut trips: Option<(SignedMoments, SignedMoments)> = None;
    let mut logs = vec![];
    for b in bouncers {
        let _ = b.socket.shutdown(std::net::Shutdown::Both);
        if let Some((to, from)) = b.trips {
            let t = trips.get_or_insert_with(Default::default);
            t.0.merge(&to);
            t.1.merge(&from);
        }
        logs.push(b.log);
    }
    let mut report = landspeed_core::transactions::pooled(logs, elapsed.as_nanos() as u64);
    report.one_way = trips.filter(|t| t.0.count() > 0).map(|(to, from)| OneWayTimes {
        samples: to.count(),
        to_server: to.summary(),
        from_server: from.summary(),
    });
    report
}

/// Runs every connection (`workers`, each by `run`) at once, a thread each; hands on each one's
/// intervals as they close (`connection`: its stream) and, once every connection's of the same time
/// has come, the test's. Each connection's error, in stream order. (Bounceback's TCP connections
/// and `--rr -u`'s sockets alike.)
pub(crate) fn each_at_once<W: Send>(
    workers: &mut [W],
    run: impl Fn(&mut W, Live) -> Option<String> + Sync,
    on: Live,
) -> Vec<Option<String>> {
    let (tx, rx) = std::sync::mpsc::channel::<(u32, ClientEvent)>();
    let run = &run;
    std::thread::scope(|scope| {
        let runs: Vec<_> = (workers.iter_mut().enumerate())
            .map(|(k, w)| {
                let tx = tx.clone();
                scope.spawn(move || {
                    let mut send = |ev| {
                        let _ = tx.send((k as u32, ev));
                    };
                    run(w, &mut send)
                })
            })
            .collect();
        drop(tx);
        let mut open: std::collections::BTreeMap<u64, Vec<TransactionInterval>> = Default::default();
        for (k, ev) in rx {
            let ClientEvent::Transactions { interval, tcp, .. } = ev else {
                continue;
            };
            let key = interval.start_s.to_bits();
            on(ClientEvent::Transactions {
                interval: interval.clone(),
                tcp,
                connection: Some(k),
            });
            let parts = open.entry(key).or_default();
            parts.push(interval);
            if parts.len() == runs.len() {
                let parts = open.remove(&key).unwrap_or_default();
                on(pooled_interval(&parts));
            }
        }
        // Intervals a connection that ended early did not close: the others' together.
        for parts in open.into_values() {
            on(pooled_interval(&parts));
        }
        let failed = |_| Some("a connection's thread panicked".to_string());
        runs.into_iter()
            .map(|r| r.join().unwrap_or_else(failed))
            .collect()
    })
}

/// The test's interval of connections' intervals of the same time.
fn pooled_interval(parts: &[TransactionInterval]) -> ClientEvent {
    ClientEvent::Transactions {
        interval: landspeed_core::transactions::pool_intervals(parts),
        tcp: None,
        connection: None,
    }
}

/// Tells the output a transaction test's ends (its first connection's) and that it started over
/// `streams` connections.
pub(crate) fn announce_ends(local: std::net::SocketAddr, addr: std::net::SocketAddr, streams: u32, on: Live) {
    on(ClientEvent::Connected { local, remote: addr });
    on(ClientEvent::Started {
        streams,
        warnings: vec![],
    });
}

/// A connection's TCP figures now, where the system gives them.
pub(super) fn tcp_stats(socket: &TcpStream) -> Option<landspeed_core::endpoint::TcpStats> {
    landspeed_engine::tcp_info::read(socket)
        .ok()
        .map(|i| i.stats(&[], None))
}

/// The far end of a bounceback test, and how its answers are checked.
pub(super) const BOUNCEBACK_SERVER: &str = "iperf 2 bounceback server";
pub(super) const BOUNCEBACK_PATTERN: &str =
    "bounceback echo: random requests, each answer checked against its request";

/// What a finished transaction test hands to its result.
pub(crate) struct Finished {
    pub(crate) report: TransactionsReport,
    /// The connection's TCP figures at the end (the last connection's, in a connection-rate test).
    pub(crate) tcp: Option<landspeed_core::endpoint::TcpStats>,
    /// Answers that were not their request.
    pub(crate) corrupt: u64,
    pub(crate) error: Option<String>,
    pub(crate) elapsed: Duration,
    pub(crate) cpu: landspeed_core::endpoint::CpuTimes,
    pub(crate) started_unix_s: f64,
    /// This end's address and the server's.
    pub(crate) ends: (std::net::SocketAddr, std::net::SocketAddr),
    /// What answered (the inferred far end's software).
    pub(crate) server: &'static str,
    /// How the answers were checked.
    pub(crate) pattern: &'static str,
}

impl Finished {
    /// The test's result: this end's report, the server's inferred from it, assembled, its figures
    /// and echoes attached.
    pub(crate) fn result(self, opts: &ClientOptions, spec: &Test, interrupted: bool) -> RunResult {
        let protocol = self.report.shape.kind.clone();
        let here = endpoint(
            &self.report,
            (self.tcp, self.corrupt, self.error),
            self.elapsed,
            self.cpu,
        );
        let (local, addr) = self.ends;
        let context = crate::dial::run_context(
            opts,
            local,
            addr,
            &here,
            self.started_unix_s,
            interrupted,
            &protocol,
        );
        let mut result = crate::dial::assemble_inferred(spec, context, &here, self.server);
        echoed(&mut result, self.report, self.pattern);
        result
    }
}

/// The result of a transaction test: its figures, its echoes as what was verified, and no bulk
/// diagnosis (what held a few kbit/s of requests back is the latency, which the figures state).
fn echoed(result: &mut RunResult, report: TransactionsReport, pattern: &str) {
    let size = u64::from(report.shape.response_bytes);
    let corrupt = result.payload.corrupt_blocks;
    let p = &mut result.payload;
    p.pattern = pattern.into();
    let sent = report.transactions > 0 && size > 0;
    p.verified = sent && corrupt == 0;
    p.unverified_because = match (report.transactions, size) {
        (_, 0) => Some("nothing was sent: each connection opened and closed".into()),
        (0, _) => Some("no answer came back".into()),
        _ => None,
    };
    p.bytes_verified = (report.transactions - corrupt.min(report.transactions)) * size;
    for d in &mut result.directions {
        d.limits.clear();
    }
    result.transactions = Some(report);
}

/// The test as a bounceback test runs it (one TCP connection, both ways, for a time), and that time.
pub(super) fn checked(offered: &Test, plan: &BouncePlan) -> Result<(Test, Duration), ClientError> {
    let no = |what: &str| Err(ClientError::NotWithIperf2 { what: what.into() });
    if offered.transport != Transport::Tcp || offered.tls.is_some() || offered.mptcp || offered.file.is_some()
    {
        return no("a bounceback test over anything but plain TCP (UDP, TLS, MPTCP, files)");
    }
    if offered.direction != Direction::Forward {
        return no("a bounceback test with -R or --bidir (each connection carries both ways)");
    }
    let EndCondition::Time(run_for) = offered.end else {
        return no("a bounceback test ended by bytes or blocks (-t only)");
    };
    let size = offered.length_bytes;
    if size < bb::HEADER_BYTES as u64 || size > u64::from(bb::MAX_REQUEST_BYTES) {
        return no(&format!(
            "requests of {size} bytes (-l: from {} to {} bytes)",
            bb::HEADER_BYTES,
            bb::MAX_REQUEST_BYTES
        ));
    }
    if plan.hold > Duration::from_micros(u64::from(bb::MAX_HOLD_US)) || plan.burst == 0 {
        return no("a hold over 10 s or a burst of 0 requests");
    }
    let spec = offered.changed(|s: &mut TestSpec| {
        s.verify = false;
        s.direction = Direction::Bidir;
        s.omit_s = Duration::ZERO;
    })?;
    Ok((spec, run_for))
}

impl<'a> Bouncer<'a> {
    fn new(
        socket: TcpStream,
        spec: &Test,
        plan: &BouncePlan,
        interrupt: &'a AtomicBool,
    ) -> Result<Self, ClientError> {
        let size = spec.length_bytes as usize;
        let io = |err| ClientError::Stream { id: 0, err };
        socket.set_nodelay(true).map_err(io)?;
        // An answer that takes longer than this (a hold of up to 10 s, a long path) ends the test.
        socket
            .set_read_timeout(Some(plan.hold + Duration::from_secs(10)))
            .map_err(io)?;
        socket
            .set_write_timeout(Some(Duration::from_secs(10)))
            .map_err(io)?;
        let request = random_bytes(size);
        let mut flags = 0;
        if plan.quickack {
            flags |= bbflags::QUICKACK;
        }
        if plan.trip_times {
            flags |= bbflags::CLOCK_SYNCED;
        }
        let shape = TransactionShape {
            kind: "iperf2 bounceback".into(),
            request_bytes: size as u32,
            response_bytes: size as u32,
            in_flight: 1,
            burst: if plan.period.is_zero() { 0 } else { plan.burst },
            period_s: plan.period.as_secs_f64(),
            hold_us: plan.hold.as_micros() as u32,
        };
        let interval_ns = spec.interval_s.as_nanos() as u64;
        Ok(Bouncer {
            socket,
            answer: vec![0u8; size],
            request,
            flags,
            hold_us: shape.hold_us,
            quickack: plan.quickack,
            log: TransactionLog::new(shape, interval_ns),
            t0: Instant::now(),
            end_ns: u64::MAX,
            corrupt: 0,
            trips: plan.trip_times.then(Default::default),
            interrupt,
        })
    }

    /// Bursts on the period (or back to back) until `run_for` has passed or the user interrupts.
    fn run(&mut self, plan: &BouncePlan, (t0, run_for): (Instant, Duration), on: Live) -> Result<(), String> {
        self.t0 = t0;
        self.end_ns = run_for.as_nanos() as u64;
        let end = self.t0 + run_for;
        let mut burst_id: u32 = 0;
        while Instant::now() < end && !self.interrupt.load(Relaxed) {
            burst_id = burst_id.wrapping_add(1);
            if plan.period.is_zero() {
                self.transact(burst_id)?;
                self.emit(on);
                continue;
            }
            self.sleep_until(self.t0 + plan.period * (burst_id - 1), end, on);
            for _ in 0..plan.burst {
                if Instant::now() >= end || self.interrupt.load(Relaxed) {
                    break;
                }
                self.transact(burst_id)?;
            }
            self.emit(on);
        }
        Ok(())
    }

    /// Hands the intervals closed by now to the caller, as they close.
    fn emit(&mut self, on: Live) {
        let now_ns = (self.t0.elapsed().as_nanos() as u64).min(self.end_ns);
        let closed = self.log.advance(now_ns);
        if closed.is_empty() {
            return;
        }
        let tcp = tcp_stats(&self.socket).map(Box::new);
        for i in closed {
            on(ClientEvent::Transactions {
                interval: i.clone(),
                tcp: tcp.clone(),
                connection: None,
            });
        }
    }

    /// Sleeps until `tick` (or `end`, or an interrupt), in short steps, closing intervals on time.
    fn sleep_until(&mut self, tick: Instant, end: Instant, on: Live) {
        let until = tick.min(end);
        while !self.interrupt.load(Relaxed) {
            self.emit(on);
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }

    /// One request written and its answer read whole, checked and timed.
    fn transact(&mut self, id: u32) -> Result<(), String> {
        let size = self.request.len() as u32;
        let sent = Instant::now();
        let sent_wall = wire_now();
        Bounce::request(size, id, self.flags, sent_wall, self.hold_us).write(&mut self.request);
        (&self.socket)
            .write_all(&self.request)
            .map_err(|e| format!("writing a request: {e}"))?;
        if self.quickack {
            landspeed_engine::sockopt::quickack(&self.socket);
        }
        match (&self.socket).read_exact(&mut self.answer) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err("the server closed the connection".into())
            }
            Err(e) => return Err(format!("reading an answer: {e}")),
        }
        let done = Instant::now();
        if !same_echo(&self.request, &self.answer) {
            self.corrupt += 1;
        }
        if let Some(trips) = &mut self.trips {
            one_way(trips, &self.answer, sent_wall, wire_now());
        }
        // A transaction sent before the end and answered after it belongs to the last interval.
        let done_ns = done.duration_since(self.t0).as_nanos() as u64;
        self.log.record(
            done_ns.min(self.end_ns.saturating_sub(1)),
            done.duration_since(sent).as_nanos() as u64,
        );
        Ok(())
    }
}

/// Each way's delay from an answer's server stamps, when the server stamped it (all ones: it did
/// not).
fn one_way(trips: &mut (SignedMoments, SignedMoments), answer: &[u8], sent: WireTime, received: WireTime) {
    let ns = |t: WireTime| i64::from(t.secs) * 1_000_000_000 + i64::from(t.micros) * 1_000;
    let Some((rx, tx)) = bb::server_times(answer) else {
        return;
    };
    if rx.secs == u32::MAX || tx.secs == u32::MAX {
        return;
    }
    trips.0.add(ns(rx) - ns(sent));
    trips.1.add(ns(received) - ns(tx));
}

/// Whether an answer is its request sent back: everything but the server's two stamps (and the type
/// of service, which iperf 2's server may rewrite) unchanged.
pub(super) fn same_echo(request: &[u8], answer: &[u8]) -> bool {
    const STAMPS: std::ops::Range<usize> = 28..44;
    request.len() == answer.len()
        && request[..14] == answer[..14]
        && request[16..STAMPS.start] == answer[16..STAMPS.start]
        && request[STAMPS.end..] == answer[STAMPS.end..]
}

/// This end's report: the requests sent, the answers received (the payload of those that came back
/// intact counted as verified), the connection's TCP figures.
fn endpoint(
    r: &TransactionsReport,
    (tcp, corrupt, error): (Option<landspeed_core::endpoint::TcpStats>, u64, Option<String>),
    elapsed: Duration,
    cpu: landspeed_core::endpoint::CpuTimes,
) -> EndpointReport {
    let size = u64::from(r.shape.request_bytes);
    let bytes = r.transactions * size;
    let last = Some(elapsed.as_secs_f64());
    let sent = StreamReport {
        bytes,
        calls: r.transactions,
        first_byte_s: Some(0.0),
        last_byte_s: last,
        tcp,
        error: error.clone(),
        ..StreamReport::empty(0, Flow::ClientToServer, Role::Sender)
    };
    let received = StreamReport {
        bytes,
        calls: r.transactions,
        first_byte_s: Some(0.0),
        last_byte_s: last,
        bytes_verified: (r.transactions - corrupt) * size,
        corrupt_blocks: corrupt,
        ..StreamReport::empty(1, Flow::ServerToClient, Role::Receiver)
    };
    EndpointReport {
        software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
        streams: vec![sent, received],
        cpu,
        host: landspeed_engine::host::host_info(),
        elapsed_s: elapsed.as_secs_f64(),
        threads: 1,
        error,
        ..EndpointReport::default()
    }
}

/// A request's payload: random, so an echo that loses, repeats or mixes bytes does not match it.
pub(super) fn random_bytes(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    if getrandom::fill(&mut b).is_err() {
        b.iter_mut()
            .enumerate()
            .for_each(|(k, x)| *x = (k * 131 % 251) as u8);
    }
    b
}

pub(super) fn wire_now() -> WireTime {
    WireTime::from_unix_ns(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    )
}

pub(super) fn unix_now_s() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_may_differ_only_in_the_servers_stamps_and_tos() {
        let mut req = random_bytes(100);
        Bounce::request(100, 3, bbflags::QUICKACK, WireTime { secs: 1, micros: 2 }, 0).write(&mut req);
        let mut ans = req.clone();
        bb::stamp_received(&mut ans, WireTime { secs: 5, micros: 6 });
        bb::stamp_answered(&mut ans, WireTime { secs: 5, micros: 9 });
        ans[14..16].copy_from_slice(&[0, 0x10]);
        assert!(same_echo(&req, &ans));
        for at in [0, 8, 13, 20, 27, 44, 63, 64, 99] {
            let mut bad = ans.clone();
            bad[at] ^= 1;
            assert!(!same_echo(&req, &bad), "byte {at}");
        }
        assert!(!same_echo(&req, &ans[..99]));
    }
}
