//! Request/response tests: transactions per second and their latency distribution. A bulk test asks
//! how many bytes a path moves; a transaction test asks how quickly it answers (netperf's TCP_RR,
//! iperf 2's `--bounceback`): a request goes out, the whole response comes back, and the time
//! between is one transaction's latency. Millions of them make a test, so they are kept as a
//! histogram (HdrHistogram, three significant digits: every percentile within 0.1% of the true
//! value) rather than as a list, with the exact least and most and a running mean and variance
//! (Welford). Sans-IO: the caller hands in times since the test began, so the same recorder serves
//! both ends and the tests replay worked numbers. docs/request-response.md says how each figure is
//! computed.

pub mod load;
pub mod udp;

pub use load::{LoadFlow, WorkingLoad};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// What a transaction test asked for: the shape the figures describe.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransactionShape {
    /// The workload and the protocol it spoke (`"iperf2 bounceback"`).
    pub kind: String,
    /// Bytes of each request, any header included.
    pub request_bytes: u32,
    /// Bytes of each response.
    pub response_bytes: u32,
    /// Transactions in flight at once on the connection (1: each waits for the last).
    pub in_flight: u32,
    /// Transactions sent back to back in each burst (iperf 2's `--bounceback=N`); 0 when the test
    /// sends without pause.
    pub burst: u32,
    /// Seconds between bursts; 0 when the test sends without pause.
    pub period_s: f64,
    /// Microseconds the server was asked to wait before answering (counted in each latency, as
    /// iperf 2 counts it).
    pub hold_us: u32,
}

impl TransactionShape {
    /// The shape of landspeed's own request/response test (`run --rr`): requests and responses of
    /// their sizes, `in_flight` of them unanswered at once, back to back.
    pub fn landspeed(t: &crate::config::TransactionSpec) -> TransactionShape {
        let kind = match t.connect_each {
            true => "landspeed request/response, a connection each (TCP_CRR)",
            false => "landspeed request/response",
        };
        TransactionShape::back_to_back(kind, t)
    }

    /// A test of `kind` sending requests and responses of `t`'s sizes, `t.in_flight` at once, each
    /// as soon as one is answered (no bursts, no hold).
    pub fn back_to_back(kind: &str, t: &crate::config::TransactionSpec) -> TransactionShape {
        TransactionShape {
            kind: kind.into(),
            request_bytes: t.request_bytes,
            response_bytes: t.response_bytes,
            in_flight: t.in_flight,
            burst: 0,
            period_s: 0.0,
            hold_us: 0,
        }
    }
}

/// What an iperf 2 bounceback client asked of its server in its request header: each request's
/// size (the answer is as long), how long the server holds a request before answering, and
/// whether it acknowledges at once (TCP_QUICKACK) rather than with its answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BounceAsked {
    /// Bytes of each request, its header included.
    pub request_bytes: u32,
    /// Microseconds the server holds each request before answering.
    pub hold_us: u32,
    /// The server acknowledges each request at once (iperf 2's default; off with
    /// `--bounceback-no-quickack`).
    pub quickack: bool,
}

/// One transaction test's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransactionsReport {
    /// What was asked.
    pub shape: TransactionShape,
    /// Transactions completed (a response read whole).
    pub transactions: u64,
    /// Seconds from the first request to the end.
    pub elapsed_s: f64,
    /// Transactions over the elapsed time (with bursts and periods, the rate asked for; without, the
    /// connection's limit).
    pub per_s: f64,
    /// Transactions over the time they took (one over the mean latency: iperf 2's "rps").
    pub per_s_busy: f64,
    /// The latency distribution over every transaction.
    pub latency: LatencySummary,
    /// Its histogram: bins whose upper bounds double from 1 µs, empty bins left out.
    pub histogram: Vec<HistogramBin>,
    /// Each interval's figures.
    pub intervals: Vec<TransactionInterval>,
    /// A connection-rate test's handshakes (each transaction on a connection of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<ConnectTimes>,
    /// A connection-rate test over TLS: each connection's TLS handshake, from the TCP handshake's
    /// end to the client's first byte it could send encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ConnectTimes>,
    /// Each way's delay from the server's timestamps (`--trip-times`: the clocks are synchronized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<OneWayTimes>,
    /// The bulk load the transactions ran beside (`run --under-load`); absent when they ran alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<WorkingLoad>,
    /// The latencies in iperf 2's bounceback bins (100 µs wide, exact), for its `BB8(f)-PDF` line;
    /// absent from results written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fine: Option<FineHistogram>,
    /// Over UDP (`--rr -u`): requests whose answer did not come within the loss timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// Over UDP: answers that came after their request was counted lost (not timed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<u64>,
    /// With more than one connection (`-P`), each one's own figures, in stream order; the figures
    /// above are all of them together ([`pooled`]). Empty with one connection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<TransactionsReport>,
}

/// Latencies in fixed bins of `width_us` from 0 to `FineBins::LIMIT` wide, as iperf 2 bins a
/// bounceback's round trips (its histogram.c: bin `k`, counted from 1, holds latencies from
/// `(k - 1) * width` up to, not including, `k * width`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FineHistogram {
    /// Each bin's width, microseconds.
    pub width_us: u32,
    /// The bins that hold any, in order.
    pub bins: Vec<FineBin>,
    /// Latencies past the last bin (10 s and more).
    pub above: u64,
}

/// One bin of a [`FineHistogram`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FineBin {
    /// Its number, from 1.
    pub index: u32,
    /// Latencies in it.
    pub count: u64,
}

/// The counts behind a [`FineHistogram`]: a count per bin, grown as later bins are reached.
#[derive(Debug, Default)]
pub struct FineBins {
    counts: Vec<u64>,
    above: u64,
}

impl FineBins {
    /// The bins' width, nanoseconds (iperf 2's 100 µs).
    pub const WIDTH_NS: u64 = 100_000;
    /// How many bins (iperf 2's 100,000: 10 s).
    pub const LIMIT: usize = 100_000;

    /// Counts a latency.
    pub fn add(&mut self, ns: u64) {
        let bin = (ns / Self::WIDTH_NS) as usize;
        if bin >= Self::LIMIT {
            self.above += 1;
            return;
        }
        if bin >= self.counts.len() {
            self.counts.resize(bin + 1, 0);
        }
        self.counts[bin] += 1;
    }

    /// Adds another set's counts.
    pub fn absorb(&mut self, o: &FineBins) {
        if o.counts.len() > self.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&o.counts) {
            *mine += theirs;
        }
        self.above += o.above;
    }

    /// The histogram of what was counted.
    pub fn histogram(&self) -> FineHistogram {
        let bins = (self.counts.iter().enumerate())
            .filter(|(_, c)| **c > 0)
            .map(|(k, c)| FineBin {
                index: k as u32 + 1,
                count: *c,
            })
            .collect();
        FineHistogram {
            width_us: (Self::WIDTH_NS / 1000) as u32,
            bins,
            above: self.above,
        }
    }
}

/// One-way delays from the server's two timestamps in each answer: to the server (its receive time
/// less the client's send time) and back (the client's receive time less the server's send time).
/// Each is one clock less another, so it is as right as the clocks agree: an offset between them
/// moves the two the same amount in opposite directions (their sum, the round trip less the server's
/// time, does not move).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayTimes {
    /// Answers that carried both stamps.
    pub samples: u64,
    /// To the server.
    pub to_server: SignedSummary,
    /// Back from it.
    pub from_server: SignedSummary,
}

/// Least, mean, most and sample standard deviation of values that may be negative, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SignedSummary {
    /// Least.
    pub min_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Most.
    pub max_ms: f64,
    /// Sample standard deviation (0 for one value).
    pub stdev_ms: f64,
}

/// Welford's running figures of signed values (nanoseconds in, milliseconds out).
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedMoments {
    count: u64,
    min_ns: i64,
    max_ns: i64,
    mean: f64,
    m2: f64,
}

impl SignedMoments {
    /// Adds one value.
    pub fn add(&mut self, ns: i64) {
        if self.count == 0 {
            (self.min_ns, self.max_ns) = (ns, ns);
        }
        self.count += 1;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        let x = ns as f64;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds another set's values (Chan's pairwise combination of the mean and variance).
    pub fn merge(&mut self, o: &SignedMoments) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *o;
            return;
        }
        let (n1, n2) = (self.count as f64, o.count as f64);
        let delta = o.mean - self.mean;
        let n = n1 + n2;
        self.mean += delta * n2 / n;
        self.m2 += o.m2 + delta * delta * n1 * n2 / n;
        self.count += o.count;
        self.min_ns = self.min_ns.min(o.min_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// The summary so far.
    pub fn summary(&self) -> SignedSummary {
        let ms = |ns: f64| ns / 1e6;
        SignedSummary {
            min_ms: ms(self.min_ns as f64),
            mean_ms: ms(self.mean),
            max_ms: ms(self.max_ns as f64),
            stdev_ms: if self.count > 1 {
                ms((self.m2 / (self.count - 1) as f64).sqrt())
            } else {
                0.0
            },
        }
    }
}

/// The handshakes of a connection-rate test: each `connect()`'s time, the TCP three-way handshake as
/// the client sees it (SYN out to SYN-ACK in).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectTimes {
    /// Connections made.
    pub connections: u64,
    /// Their times.
    pub latency: LatencySummary,
    /// Their histogram (bins doubling from 1 µs).
    pub histogram: Vec<HistogramBin>,
}

impl ConnectTimes {
    /// The handshakes a log of connect times holds (its own transactions are the connections).
    pub fn from_log(log: TransactionLog, end_ns: u64) -> ConnectTimes {
        ConnectTimes::from_report(log.finish(end_ns))
    }

    /// The handshakes a report of connect times holds (several connections' logs `pooled`).
    pub fn from_report(r: TransactionsReport) -> ConnectTimes {
        ConnectTimes {
            connections: r.transactions,
            latency: r.latency,
            histogram: r.histogram,
        }
    }
}

/// A latency distribution, milliseconds (all None when nothing completed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Least.
    pub min_ms: Option<f64>,
    /// Mean.
    pub mean_ms: Option<f64>,
    /// Sample standard deviation.
    pub stdev_ms: Option<f64>,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 90th percentile.
    pub p90_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// 99.9th percentile.
    pub p999_ms: Option<f64>,
    /// Most.
    pub max_ms: Option<f64>,
}

/// A bin of the histogram: transactions whose latency was above the previous bin's bound and at most
/// this one's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HistogramBin {
    /// The bin's upper bound, milliseconds.
    pub upper_ms: f64,
    /// Transactions in it.
    pub count: u64,
}

/// One interval of a transaction test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransactionInterval {
    /// Start, seconds since the test began.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Transactions completed in it.
    pub transactions: u64,
    /// Their latencies.
    pub latency: LatencySummary,
}

/// The running figures of a set of latencies: the histogram, and the exact extremes, mean and
/// variance (`SignedMoments`, the same running form as the one-way delays'). Transactions' and
/// isochronous frames' latencies (`crate::frames`) are kept in it.
pub struct Moments {
    hist: Histogram<u64>,
    exact: SignedMoments,
}

impl Default for Moments {
    fn default() -> Self {
        Moments::new()
    }
}

impl Moments {
    /// No values yet.
    pub fn new() -> Moments {
        Moments {
            // Three significant digits, growing as larger values come.
            hist: Histogram::new(3).expect("three significant digits is a valid histogram"),
            exact: SignedMoments::default(),
        }
    }

    /// Adds a latency (at least 1 ns is kept).
    pub fn add(&mut self, ns: u64) {
        let ns = ns.clamp(1, i64::MAX as u64);
        // The histogram grows to any u64; saturation is the only failure and is not reachable here.
        let _ = self.hist.record(ns);
        self.exact.add(ns as i64);
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.exact.count
    }

    /// Adds another set's values.
    pub fn merge(&mut self, o: &Moments) {
        // Both grow to any u64: adding one to the other cannot saturate here either.
        let _ = self.hist.add(&o.hist);
        self.exact.merge(&o.exact);
    }

    /// Values above `ns` (to the histogram's three significant digits).
    pub fn count_above(&self, ns: u64) -> u64 {
        let below = self.hist.count_between(0, ns);
        self.count().saturating_sub(below)
    }

    /// Nanoseconds summed (the mean times the count).
    fn sum_ns(&self) -> f64 {
        self.exact.mean * self.exact.count as f64
    }

    /// Least, mean, percentiles, most.
    pub fn summary(&self) -> LatencySummary {
        if self.count() == 0 {
            return LatencySummary::default();
        }
        let e = &self.exact;
        let (min_ns, max_ns) = (e.min_ns as u64, e.max_ns as u64);
        let ms = |ns: f64| ns / 1e6;
        // A percentile never falls outside the exact extremes (the histogram rounds to its bucket).
        let q = |q: f64| Some(ms(self.hist.value_at_quantile(q).clamp(min_ns, max_ns) as f64));
        let signed = e.summary();
        LatencySummary {
            min_ms: Some(signed.min_ms),
            mean_ms: Some(signed.mean_ms),
            stdev_ms: (e.count > 1).then_some(signed.stdev_ms),
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: Some(signed.max_ms),
        }
    }

    /// Bins doubling from 1 µs, empty ones left out.
    pub fn bins(&self) -> Vec<HistogramBin> {
        let mut out: Vec<HistogramBin> = vec![];
        let mut upper_ns = 1_000u64;
        let mut taken = 0;
        while taken < self.count() {
            let below = self.hist.count_between(0, upper_ns);
            let count = below - taken;
            if count > 0 {
                out.push(HistogramBin {
                    upper_ms: upper_ns as f64 / 1e6,
                    count,
                });
            }
            taken = below;
            upper_ns = upper_ns.saturating_mul(2);
            if upper_ns == u64::MAX {
                break;
            }
        }
        out
    }
}

/// The recorder: transactions in, a [`TransactionsReport`] out.
pub struct TransactionLog {
    shape: TransactionShape,
    interval_ns: u64,
    whole: Moments,
    current: Moments,
    current_start_ns: u64,
    intervals: Vec<TransactionInterval>,
    /// Each closed interval's exact figures, for pooling with other connections' ([`pooled`]).
    interval_exact: Vec<SignedMoments>,
    fine: FineBins,
}

impl TransactionLog {
    /// A recorder for a test of `shape`, closing an interval every `interval_ns` (0: one interval).
    pub fn new(shape: TransactionShape, interval_ns: u64) -> TransactionLog {
        TransactionLog {
            shape,
            interval_ns,
            whole: Moments::new(),
            current: Moments::new(),
            current_start_ns: 0,
            intervals: vec![],
            interval_exact: vec![],
            fine: FineBins::default(),
        }
    }

    /// A transaction that completed `done_ns` after the test began and took `latency_ns`.
    pub fn record(&mut self, done_ns: u64, latency_ns: u64) {
        self.advance(done_ns);
        self.whole.add(latency_ns);
        self.current.add(latency_ns);
        self.fine.add(latency_ns);
    }

    /// Closes every interval that ended by `now_ns` (so an interval with no transaction is kept as
    /// such); returns the ones closed.
    pub fn advance(&mut self, now_ns: u64) -> &[TransactionInterval] {
        let before = self.intervals.len();
        while self.interval_ns > 0 && now_ns >= self.current_start_ns + self.interval_ns {
            let end = self.current_start_ns + self.interval_ns;
            self.close(end);
        }
        &self.intervals[before..]
    }

    /// Every interval closed so far (by [`TransactionLog::advance`] or a transaction's record).
    pub fn closed(&self) -> &[TransactionInterval] {
        &self.intervals
    }

    /// The shape it records.
    pub fn shape(&self) -> &TransactionShape {
        &self.shape
    }

    /// Transactions so far.
    pub fn count(&self) -> u64 {
        self.whole.count()
    }

    fn close(&mut self, end_ns: u64) {
        let done = std::mem::take(&mut self.current);
        self.interval_exact.push(done.exact);
        self.intervals.push(TransactionInterval {
            start_s: self.current_start_ns as f64 / 1e9,
            end_s: end_ns as f64 / 1e9,
            transactions: done.count(),
            latency: done.summary(),
        });
        self.current_start_ns = end_ns;
    }

    /// The report of a test that ended `end_ns` after it began (a last, partial interval closed).
    pub fn finish(mut self, end_ns: u64) -> TransactionsReport {
        self.close_at(end_ns);
        let elapsed_s = end_ns as f64 / 1e9;
        let w = &self.whole;
        TransactionsReport {
            transactions: w.count(),
            elapsed_s,
            per_s: if elapsed_s > 0.0 {
                w.count() as f64 / elapsed_s
            } else {
                0.0
            },
            per_s_busy: if w.sum_ns() > 0.0 {
                w.count() as f64 * 1e9 / w.sum_ns()
            } else {
                0.0
            },
            latency: w.summary(),
            histogram: w.bins(),
            intervals: self.intervals,
            shape: self.shape,
            connect: None,
            tls: None,
            one_way: None,
            load: None,
            fine: Some(self.fine.histogram()),
            lost: None,
            late: None,
            connections: vec![],
        }
    }

    /// Closes every interval up to `end_ns`, the last one partial.
    fn close_at(&mut self, end_ns: u64) {
        self.advance(end_ns);
        if end_ns > self.current_start_ns {
            self.close(end_ns);
        }
    }
}

/// The report of a test over several connections, each with its own log (every log begun at the
/// same instant and closing its intervals alike), ended `end_ns` after it began: every
/// transaction's figures together (the whole test's percentiles from the logs' histograms added),
/// each interval's count with its exact least, mean, deviation and most (an interval's percentiles
/// are each connection's only: no histogram is kept per interval), and each connection's own
/// report in `connections`. One log: its own report.
pub fn pooled(mut logs: Vec<TransactionLog>, end_ns: u64) -> TransactionsReport {
    if logs.len() <= 1 {
        return logs
            .pop()
            .map_or_else(TransactionsReport::default, |l| l.finish(end_ns));
    }
    for l in &mut logs {
        l.close_at(end_ns);
    }
    let mut all = TransactionLog::new(logs[0].shape.clone(), logs[0].interval_ns);
    for l in &logs {
        all.whole.merge(&l.whole);
        all.fine.absorb(&l.fine);
    }
    let most = logs.iter().map(|l| l.intervals.len()).max().unwrap_or(0);
    for k in 0..most {
        let mut exact = SignedMoments::default();
        let mut span = (f64::MAX, 0f64);
        for l in &logs {
            if let (Some(m), Some(i)) = (l.interval_exact.get(k), l.intervals.get(k)) {
                exact.merge(m);
                span = (span.0.min(i.start_s), span.1.max(i.end_s));
            }
        }
        all.interval_exact.push(exact);
        all.intervals.push(TransactionInterval {
            start_s: span.0,
            end_s: span.1,
            transactions: exact.count(),
            latency: exact_only(&exact),
        });
    }
    all.current_start_ns = end_ns;
    let connections = logs.into_iter().map(|l| l.finish(end_ns)).collect();
    TransactionsReport {
        connections,
        ..all.finish(end_ns)
    }
}

/// Connections' intervals of the same time as one (a live `[SUM]`): their transactions, and the
/// least, mean, deviation and most of all their latencies, from each one's figures (the mean
/// weighted by the counts, the deviation by Chan's combination); no percentiles.
pub fn pool_intervals(parts: &[TransactionInterval]) -> TransactionInterval {
    let mut exact = SignedMoments::default();
    let mut span = (f64::MAX, 0f64);
    for i in parts {
        span = (span.0.min(i.start_s), span.1.max(i.end_s));
        let l = &i.latency;
        let (Some(min), Some(mean), Some(max)) = (l.min_ms, l.mean_ms, l.max_ms) else {
            continue;
        };
        let n = i.transactions;
        let sd_ns = l.stdev_ms.unwrap_or(0.0) * 1e6;
        exact.merge(&SignedMoments {
            count: n,
            min_ns: (min * 1e6).round() as i64,
            max_ns: (max * 1e6).round() as i64,
            mean: mean * 1e6,
            m2: sd_ns * sd_ns * n.saturating_sub(1) as f64,
        });
    }
    TransactionInterval {
        start_s: if parts.is_empty() { 0.0 } else { span.0 },
        end_s: span.1,
        transactions: parts.iter().map(|i| i.transactions).sum(),
        latency: exact_only(&exact),
    }
}

/// The least, mean, deviation and most of `m`, no percentiles (nothing: all None).
fn exact_only(m: &SignedMoments) -> LatencySummary {
    if m.count() == 0 {
        return LatencySummary::default();
    }
    let s = m.summary();
    LatencySummary {
        min_ms: Some(s.min_ms),
        mean_ms: Some(s.mean_ms),
        stdev_ms: (m.count() > 1).then_some(s.stdev_ms),
        max_ms: Some(s.max_ms),
        ..LatencySummary::default()
    }
}

#[cfg(test)]
mod tests;
