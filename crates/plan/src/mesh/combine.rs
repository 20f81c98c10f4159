//! The combined report of a mesh campaign, a pure function of the tests' results: per test, per host
//! (what it sent and received), the aggregate, and intervals on one clock. Every test's result carries its
//! start on its sending host's clock; the controller measured that host's offset, so the start is moved
//! onto the controller's clock, and each interval's bytes are spread over the common intervals by overlap
//! (bytes are whole numbers and the split keeps every test's total exact). A failed test is listed with
//! its reason and counts in no sum.

use super::plan::PlannedTest;
use landspeed_core::clock::ClockOffset;
use landspeed_core::result::RunResult;
use serde::{Deserialize, Serialize};

/// The schema tag of a mesh campaign's combined report.
pub const MESH_SCHEMA: &str = "landspeed/mesh/1";

/// A host as the controller found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// The plan's name for the host.
    pub name: String,
    /// Its address, as the plan gives it.
    pub address: String,
    /// Its software and version, as its welcome said.
    pub software: Option<String>,
    /// Its clock against the controller's.
    pub clock: Option<ClockOffset>,
    /// Why the host could not be checked or used.
    pub error: Option<String>,
}

/// What became of one planned test.
#[derive(Debug, Clone)]
pub struct TestOutcome {
    /// The test as planned.
    pub test: PlannedTest,
    /// Its result, or why it failed.
    pub result: Result<RunResult, String>,
    /// The sending host's clock minus the controller's (ns), to put the result on the common clock.
    pub from_offset_ns: i64,
    /// The stored run, when archived.
    pub run_id: Option<i64>,
}

/// One planned test in the combined report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestLine {
    /// Its place in the plan, from 0.
    pub index: usize,
    /// The sending host.
    pub from: String,
    /// The receiving host.
    pub to: String,
    /// tcp or udp.
    pub transport: String,
    /// Streams per direction.
    pub streams: u32,
    /// ok, incomplete (it ran, but not every byte arrived or a stream failed) or failed.
    pub status: String,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// Bytes sent after the warm-up.
    pub bytes_sent: u64,
    /// Bytes received after the warm-up.
    pub bytes_received: u64,
    /// The receiver's time, seconds.
    pub duration_s: f64,
    /// Its throughput, bit/s.
    pub throughput_bps: f64,
    /// When its data started, on the controller's clock, relative to the agreed instant.
    pub start_offset_ms: Option<f64>,
    /// The stored run, when archived.
    pub run_id: Option<i64>,
}

/// One host's share of the campaign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostTotals {
    /// The plan's name for the host.
    pub name: String,
    /// Tests it sent.
    pub tests_out: u32,
    /// Tests it received.
    pub tests_in: u32,
    /// Its tests (either way) that failed.
    pub tests_failed: u32,
    /// Bytes it sent.
    pub bytes_out: u64,
    /// Bytes it received.
    pub bytes_in: u64,
    /// bytes_out × 8 over the time its sending tests spanned (first start to last end).
    pub out_bps: f64,
    /// bytes_in × 8 over the time its receiving tests spanned.
    pub in_bps: f64,
}

/// The campaign's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Tests planned.
    pub tests: u32,
    /// Tests that completed and can be trusted.
    pub tests_ok: u32,
    /// Tests that failed.
    pub tests_failed: u32,
    /// Bytes received over every test.
    pub bytes_received: u64,
    /// First start to last end over every test that ran, common clock.
    pub span_s: f64,
    /// bytes_received × 8 ÷ span_s.
    pub throughput_bps: f64,
    /// Latest start minus earliest start of the tests that ran (concurrent plans: how together they
    /// started, within the clock offsets' uncertainty).
    pub start_spread_ms: Option<f64>,
}

/// One interval of the campaign on the common clock: every test's bytes in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshInterval {
    /// From the agreed start, controller clock.
    pub start_s: f64,
    /// Its end, from the agreed start.
    pub end_s: f64,
    /// Bytes of every test together.
    pub bytes: u64,
    /// bytes × 8 ÷ the interval's length.
    pub throughput_bps: f64,
    /// Bytes of each test in this interval, in test order.
    pub tests: Vec<u64>,
}

/// A mesh campaign's combined report (schema `landspeed/mesh/1`, docs/mesh.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshReport {
    /// The layout's tag, `MESH_SCHEMA`.
    pub schema: String,
    /// The plan's name.
    pub name: String,
    /// The tests ran at once from an agreed start (else one after another).
    pub concurrent: bool,
    /// The agreed start, controller clock, Unix seconds.
    pub start_unix_s: f64,
    /// Every host as checked.
    pub hosts: Vec<HostInfo>,
    /// Every planned test.
    pub tests: Vec<TestLine>,
    /// Every host's share.
    pub per_host: Vec<HostTotals>,
    /// The totals.
    pub aggregate: Aggregate,
    /// The intervals' length, seconds.
    pub interval_s: f64,
    /// The campaign's intervals on the common clock.
    pub intervals: Vec<MeshInterval>,
    /// The stored campaign, when archived.
    pub campaign_id: Option<i64>,
}

/// A test's data span on the common clock, seconds from `t0`.
fn span(r: &RunResult, offset_ns: i64, t0: f64) -> Span {
    let start = r.started_unix_s - offset_ns as f64 / 1e9 - t0;
    let ivs: Vec<(f64, f64, u64)> = r
        .intervals
        .iter()
        .filter(|i| !i.omitted)
        .map(|i| (start + i.start_s, start + i.end_s, i.bytes))
        .collect();
    match (ivs.first(), ivs.last()) {
        (Some(a), Some(b)) => (a.0, b.1, ivs),
        _ => (start, start + r.summary.duration_s, ivs),
    }
}

/// Spreads `bytes` over `[a, b)` onto bins of width `w` starting at `origin`, exactly.
fn spread(bins: &mut [u64], origin: f64, w: f64, a: f64, b: f64, bytes: u64) {
    if bins.is_empty() {
        return;
    }
    // Past the last bin (the folded sliver) counts in the last bin.
    let first = ((((a - origin) / w).floor().max(0.0)) as usize).min(bins.len() - 1);
    let last = ((((b - origin) / w).ceil() as usize).max(first + 1)).min(bins.len());
    let len = (b - a).max(1e-12);
    let mut given = 0u64;
    for (k, bin) in bins.iter_mut().enumerate().take(last).skip(first) {
        let lo = origin + k as f64 * w;
        let hi = lo + w;
        let share = if k + 1 == last {
            bytes - given
        } else {
            let f = ((b.min(hi) - a.max(lo)) / len).clamp(0.0, 1.0);
            ((bytes as f64 * f) as u64).min(bytes - given)
        };
        *bin += share;
        given += share;
    }
}

/// When one test ran on the controller's clock: its start, its end, and its intervals' bytes.
type Span = (f64, f64, Vec<(f64, f64, u64)>);

/// The combined report. `t0_unix_s` is the agreed start on the controller's clock.
pub fn combine(
    name: &str,
    concurrent: bool,
    t0_unix_s: f64,
    hosts: Vec<HostInfo>,
    outcomes: &[TestOutcome],
    interval_s: f64,
) -> MeshReport {
    let w = if interval_s > 0.0 { interval_s } else { 1.0 };
    let (tests, spans): (Vec<TestLine>, Vec<Option<Span>>) =
        outcomes.iter().map(|o| test_line(o, t0_unix_s)).unzip();
    let ran: Vec<usize> = (0..tests.len()).filter(|&i| spans[i].is_some()).collect();
    let lo = (ran.iter())
        .filter_map(|&i| spans[i].as_ref().map(|s| s.0))
        .fold(f64::INFINITY, f64::min);
    let hi = (ran.iter())
        .filter_map(|&i| spans[i].as_ref().map(|s| s.1))
        .fold(f64::NEG_INFINITY, f64::max);
    let total: u64 = ran.iter().map(|&i| tests[i].bytes_received).sum();
    let starts: Vec<f64> = tests.iter().filter_map(|t| t.start_offset_ms).collect();
    let spread_ms = (starts.len() > 1).then(|| {
        starts.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
            - starts.iter().cloned().fold(f64::INFINITY, f64::min)
    });
    let span_s = if ran.is_empty() { 0.0 } else { (hi - lo).max(0.0) };
    let per_host = hosts.iter().map(|h| host_totals(h, &tests, &spans)).collect();
    let intervals = if ran.is_empty() {
        vec![]
    } else {
        mesh_intervals(&spans, (lo, hi), w)
    };
    MeshReport {
        schema: MESH_SCHEMA.into(),
        name: name.into(),
        concurrent,
        start_unix_s: t0_unix_s,
        hosts,
        aggregate: Aggregate {
            tests: tests.len() as u32,
            tests_ok: tests.iter().filter(|t| t.status == "ok").count() as u32,
            tests_failed: tests.iter().filter(|t| t.status == "failed").count() as u32,
            bytes_received: total,
            span_s,
            throughput_bps: if span_s > 0.0 {
                total as f64 * 8.0 / span_s
            } else {
                0.0
            },
            start_spread_ms: spread_ms,
        },
        tests,
        per_host,
        interval_s: w,
        intervals,
        campaign_id: None,
    }
}

/// One test's line of the report, and its span when it ran.
fn test_line(o: &TestOutcome, t0_unix_s: f64) -> (TestLine, Option<Span>) {
    let t = &o.test;
    let mut line = TestLine {
        index: t.index,
        from: t.from.clone(),
        to: t.to.clone(),
        // A multicast entry's parts: `mcast` (the narrow column of the text report).
        transport: match t.multicast {
            Some(_) => "mcast".into(),
            None => format!("{:?}", t.spec.transport).to_lowercase(),
        },
        streams: t.spec.streams,
        status: "failed".into(),
        error: None,
        bytes_sent: 0,
        bytes_received: 0,
        duration_s: 0.0,
        throughput_bps: 0.0,
        start_offset_ms: None,
        run_id: o.run_id,
    };
    let r = match &o.result {
        Ok(r) => r,
        Err(e) => {
            line.error = Some(e.clone());
            return (line, None);
        }
    };
    let verdict = r.verdict();
    line.status = if verdict.is_trusted() { "ok" } else { "incomplete" }.into();
    line.bytes_sent = r.summary.bytes_sent;
    line.bytes_received = r.summary.bytes_received;
    line.duration_s = r.summary.duration_s;
    line.throughput_bps = r.summary.throughput_bps;
    line.start_offset_ms = Some((r.started_unix_s - o.from_offset_ns as f64 / 1e9 - t0_unix_s) * 1e3);
    line.error = verdict.first_reason().map(|why| why.to_string());
    (line, Some(span(r, o.from_offset_ns, t0_unix_s)))
}

/// What one host sent and received over the tests it took part in.
fn host_totals(h: &HostInfo, tests: &[TestLine], spans: &[Option<Span>]) -> HostTotals {
    let mut t = HostTotals {
        name: h.name.clone(),
        tests_out: 0,
        tests_in: 0,
        tests_failed: 0,
        bytes_out: 0,
        bytes_in: 0,
        out_bps: 0.0,
        in_bps: 0.0,
    };
    let (mut out_span, mut in_span) = (
        (f64::INFINITY, f64::NEG_INFINITY),
        (f64::INFINITY, f64::NEG_INFINITY),
    );
    for (line, span) in tests.iter().zip(spans) {
        let (is_out, is_in) = (line.from == h.name, line.to == h.name);
        if !is_out && !is_in {
            continue;
        }
        if line.status == "failed" {
            t.tests_failed += 1;
        }
        let Some(s) = span else { continue };
        if is_out {
            t.tests_out += 1;
            t.bytes_out += line.bytes_received;
            out_span = (out_span.0.min(s.0), out_span.1.max(s.1));
        }
        if is_in {
            t.tests_in += 1;
            t.bytes_in += line.bytes_received;
            in_span = (in_span.0.min(s.0), in_span.1.max(s.1));
        }
    }
    let rate = |bytes: u64, s: (f64, f64)| {
        if s.1 > s.0 {
            bytes as f64 * 8.0 / (s.1 - s.0)
        } else {
            0.0
        }
    };
    t.out_bps = rate(t.bytes_out, out_span);
    t.in_bps = rate(t.bytes_in, in_span);
    t
}

/// The aggregate's intervals of `w` seconds over `lo..hi`, each test's bytes spread over them.
fn mesh_intervals(spans: &[Option<Span>], (lo, hi): (f64, f64), w: f64) -> Vec<MeshInterval> {
    let origin = (lo / w).floor() * w;
    let mut n = (((hi - origin) / w).ceil() as usize).max(1);
    // A last interval of a sliver (tests that started a few ms after the instant and ran whole
    // seconds) is folded into the one before, as iperf does, rather than shown as a wild rate.
    if n > 1 && hi - (origin + (n - 1) as f64 * w) < 0.1 * w {
        n -= 1;
    }
    let mut per_test = vec![vec![0u64; n]; spans.len()];
    for (bins, span) in per_test.iter_mut().zip(spans) {
        if let Some((_, _, ivs)) = span {
            for &(a, b, bytes) in ivs {
                spread(bins, origin, w, a, b, bytes);
            }
        }
    }
    (0..n)
        .map(|k| {
            let start = origin + k as f64 * w;
            let end = if k + 1 == n { hi } else { start + w };
            let col: Vec<u64> = per_test.iter().map(|v| v[k]).collect();
            let bytes: u64 = col.iter().sum();
            let len = (end - start.max(lo)).max(1e-9);
            MeshInterval {
                start_s: start,
                end_s: end,
                bytes,
                throughput_bps: bytes as f64 * 8.0 / len,
                tests: col,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
