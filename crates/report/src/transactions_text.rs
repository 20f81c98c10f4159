//! The text report of a request/response test (`RunResult::transactions`): what a bulk test's report
//! says about bytes, this says about transactions: their rate beside the bound one connection's
//! latency sets, the latency distribution and its histogram, each interval, whether every answer was
//! its request sent back, and the ends. A bulk test's rate table and limit diagnosis would describe a
//! few kbit/s of requests, so they are not printed; the JSON keeps every field.

use landspeed_core::result::RunResult;
use landspeed_core::transactions::{LatencySummary, TransactionInterval, TransactionsReport, WorkingLoad};
use landspeed_core::units::{BitRate, Bytes};
use std::fmt::Write;

/// The report.
pub fn render(r: &RunResult, t: &TransactionsReport) -> String {
    let mut out = String::new();
    head(&mut out, r, t);
    intervals(&mut out, t);
    totals(&mut out, t, r.config.spec.streams as usize);
    echo(&mut out, r, t);
    if let Some(l) = &t.load {
        let _ = writeln!(out, "  load       {}", load_line(l));
    }
    crate::text::ends_and_warnings(&mut out, r);
    out
}

fn head(out: &mut String, r: &RunResult, t: &TransactionsReport) {
    let s = &t.shape;
    let pace = if s.request_bytes == 0 {
        "connect and close, back to back".to_string()
    } else if s.kind.contains("a connection each") {
        "a new connection for each, back to back".to_string()
    } else if s.burst == 0 {
        "each request as soon as the last was answered".to_string()
    } else {
        format!("bursts of {} every {:.3} s", s.burst, s.period_s)
    };
    let mut hold = match s.hold_us {
        0 => String::new(),
        us => format!(", the server holding each {:.3} ms", f64::from(us) / 1e3),
    };
    if let Some(tls) = &r.data_path.tls {
        hold.push_str(&format!(", over TLS ({}; {})", tls.suite, tls.record_layer));
    }
    let _ = writeln!(
        out,
        "\nRequest/response test ({}), {} -> {}: {} requests, {} answers, {}, {pace}{hold}{}",
        s.kind,
        r.config.local_address,
        r.config.remote_address,
        Bytes(u64::from(s.request_bytes)),
        Bytes(u64::from(s.response_bytes)),
        match t.connections.len() {
            0 | 1 => format!("{} in flight", s.in_flight),
            n => format!("{n} connections, {} in flight on each", s.in_flight),
        },
        if r.interrupted { ", INTERRUPTED" } else { "" }
    );
}

fn intervals(out: &mut String, t: &TransactionsReport) {
    if t.intervals.len() < 2 {
        return;
    }
    let _ = writeln!(out, "{}", interval_header());
    for i in &t.intervals {
        let _ = writeln!(out, "{}", interval_line(i));
    }
}

/// The interval table's header (the live lines' too).
pub fn interval_header() -> String {
    format!(
        "{:>15} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "Interval(s)", "Transactions", "Per s", "Mean(ms)", "p99(ms)", "Max(ms)"
    )
}

/// One interval's line.
pub fn interval_line(i: &TransactionInterval) -> String {
    let span = i.end_s - i.start_s;
    let per_s = if span > 0.0 {
        i.transactions as f64 / span
    } else {
        0.0
    };
    format!(
        "{:>15} {:>12} {:>10.1} {:>10} {:>10} {:>10}",
        format!("{:.2}-{:.2}", i.start_s, i.end_s),
        i.transactions,
        per_s,
        ms(i.latency.mean_ms),
        ms(i.latency.p99_ms),
        ms(i.latency.max_ms)
    )
}

/// `connections`: the test's connections (the spec's streams: a bounceback's one connection has a
/// stream each way in the result).
fn totals(out: &mut String, t: &TransactionsReport, connections: usize) {
    let _ = writeln!(
        out,
        "\nTransactions {} in {:.3} s: {:.1}/s",
        t.transactions, t.elapsed_s, t.per_s
    );
    if let Some(mean) = t.latency.mean_ms.filter(|m| *m > 0.0) {
        // One connection with k requests in flight answers at most k per latency; c connections c
        // times that.
        let conns = t.shape.in_flight.max(1) as usize * connections.max(1);
        let bound = conns as f64 * 1e3 / mean;
        let why = if t.shape.burst == 0 {
            format!(
                "{:.0}% of the bound its latency sets ({conns} in flight / {mean:.3} ms mean = {bound:.0}/s): the rate is the latency's",
                100.0 * t.per_s / bound,
            )
        } else {
            format!(
                "the rate asked for (the bursts' pace); back to back its latency would allow {bound:.0}/s (--bounceback-period 0)"
            )
        };
        let _ = writeln!(out, "  rate       {why}");
    }
    let _ = writeln!(out, "  latency    {}", summary(&t.latency));
    for (k, c) in t.connections.iter().enumerate() {
        let _ = writeln!(
            out,
            "  conn {:<5} {} in {:.3} s: {:.1}/s; {}",
            k + 1,
            c.transactions,
            c.elapsed_s,
            c.per_s,
            summary(&c.latency)
        );
    }
    if let Some(lost) = t.lost {
        // Over UDP: requests whose answer did not come within the loss timeout.
        let _ = writeln!(
            out,
            "  lost       {lost} request(s) unanswered within 1 s, {} answer(s) after that (not timed)",
            t.late.unwrap_or(0)
        );
    }
    if let Some(w) = &t.one_way {
        let way = |s: &landspeed_core::transactions::SignedSummary| {
            format!(
                "min {:.3} mean {:.3} max {:.3} stdev {:.3} ms",
                s.min_ms, s.mean_ms, s.max_ms, s.stdev_ms
            )
        };
        let _ = writeln!(
            out,
            "  one-way    to the server {}; back {} ({} answers; as right as the two clocks agree)",
            way(&w.to_server),
            way(&w.from_server),
            w.samples
        );
    }
    let handshakes = [
        ("connect    ", "connections; handshake", &t.connect),
        ("tls        ", "handshakes;", &t.tls),
    ];
    for (label, what, c) in handshakes {
        if let Some(c) = c {
            let _ = writeln!(out, "  {label}{} {what} {}", c.connections, summary(&c.latency));
        }
    }
    let bins: Vec<String> = t
        .histogram
        .iter()
        .map(|b| format!("≤{} {}", ms(Some(b.upper_ms)), b.count))
        .collect();
    if !bins.is_empty() {
        let _ = writeln!(out, "  histogram  (ms) {}", bins.join(", "));
    }
}

/// "min 0.022 mean 0.036 ... ms".
pub fn summary(l: &LatencySummary) -> String {
    if l.mean_ms.is_none() {
        return "none completed".into();
    }
    format!(
        "min {} mean {} stdev {} p50 {} p90 {} p99 {} p99.9 {} max {} ms",
        ms(l.min_ms),
        ms(l.mean_ms),
        ms(l.stdev_ms),
        ms(l.p50_ms),
        ms(l.p90_ms),
        ms(l.p99_ms),
        ms(l.p999_ms),
        ms(l.max_ms)
    )
}

fn echo(out: &mut String, r: &RunResult, t: &TransactionsReport) {
    let corrupt = r.payload.corrupt_blocks;
    let ours = t.shape.kind.starts_with("landspeed");
    let perf = t.shape.kind.starts_with("QUIC perf");
    let line = match corrupt {
        _ if t.shape.request_bytes == 0 => "nothing sent: each connection opened and closed".into(),
        0 if perf => format!(
            "each answer was the length asked for ({} answers of {}); a perf server's bytes are its own, so their content is not checked",
            t.transactions,
            Bytes(u64::from(t.shape.response_bytes))
        ),
        n if perf => format!("{n} answer(s) were not the length asked for"),
        _ if ours && !r.payload.verified => "not checked (--no-verify)".into(),
        0 if ours && t.transactions > 0 => format!(
            "every request and every response matched landspeed's pattern ({} checked; {} responses of {})",
            Bytes(r.payload.bytes_verified),
            t.transactions,
            Bytes(u64::from(t.shape.response_bytes))
        ),
        n if ours => format!("{n} corrupt block(s) in the requests or responses: UNTRUSTED"),
        0 if t.transactions > 0 => format!(
            "every answer was its request sent back ({} answers of {})",
            t.transactions,
            Bytes(u64::from(t.shape.response_bytes))
        ),
        0 => "no answer came back".into(),
        n => format!(
            "{n} of {} answers were not their request: UNTRUSTED",
            t.transactions
        ),
    };
    let _ = writeln!(out, "  echo       {line}");
    for s in r.streams.iter().filter(|s| s.tcp.is_some()) {
        let tcp = s.tcp.as_ref().expect("filtered");
        let _ = writeln!(
            out,
            "  tcp        retransmits {}, smoothed RTT {} ms at the end",
            tcp.retransmits,
            ms(Some(f64::from(tcp.rtt_us) / 1e3))
        );
    }
}

/// "landspeed, 2 connection(s) each way, 1.0 s before the first transaction: up 9.41 Gbit/s (3
/// retransmits), down 9.12 Gbit/s; every byte checked".
pub fn load_line(l: &WorkingLoad) -> String {
    use landspeed_core::config::{Direction, Flow};
    let way = match l.direction {
        Direction::Forward => "up",
        Direction::Reverse => "down",
        Direction::Bidir => "each way",
    };
    let mut line = format!(
        "{}{} connection(s) {way}, {:.1} s before the first transaction",
        if l.protocol.is_empty() {
            String::new()
        } else {
            format!("{}, ", l.protocol)
        },
        l.streams,
        l.settle_s
    );
    let rates: Vec<String> = l
        .flows
        .iter()
        .map(|f| {
            let name = if f.flow == Flow::ClientToServer {
                "up"
            } else {
                "down"
            };
            format!(
                "{name} {} ({} retransmits)",
                BitRate(f.throughput_bps),
                f.retransmits
            )
        })
        .collect();
    if !rates.is_empty() {
        line.push_str(&format!(": {} over its whole run", rates.join(", ")));
    }
    match (l.corrupt_blocks, l.bytes_verified) {
        (0, 0) => line.push_str("; its payload not checked"),
        (0, v) => line.push_str(&format!("; {} of it checked", Bytes(v))),
        (n, _) => line.push_str(&format!("; {n} corrupt block(s) in it")),
    }
    if let Some(why) = &l.ended_early {
        line.push_str(&format!("; {why}"));
    }
    line
}

fn ms(x: Option<f64>) -> String {
    match x {
        Some(v) if v < 1.0 => format!("{v:.3}"),
        Some(v) if v < 100.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::transactions::{TransactionLog, TransactionShape};

    fn log(latencies_us: &[u64]) -> TransactionLog {
        let shape = TransactionShape {
            kind: "iperf2 bounceback".into(),
            request_bytes: 100,
            response_bytes: 100,
            in_flight: 1,
            ..TransactionShape::default()
        };
        let mut l = TransactionLog::new(shape, 0);
        for (k, us) in latencies_us.iter().enumerate() {
            l.record(k as u64 * 1_000, us * 1_000);
        }
        l
    }

    #[test]
    fn several_connections_are_named_in_the_head_and_each_has_its_line() {
        let t = landspeed_core::transactions::pooled(vec![log(&[100, 300]), log(&[200])], 1_000_000_000);
        let mut r: RunResult =
            serde_json::from_str(include_str!("../tests/fixtures/iperf2-bidir-p2.json")).unwrap();
        r.config.spec.streams = 2;
        let text = render(&r, &t);
        assert!(
            text.contains(": 100 B requests, 100 B answers, 2 connections, 1 in flight on each, "),
            "{text}"
        );
        assert!(
            text.contains("\n  conn 1     2 in 1.000 s: 2.0/s; min 0.100 "),
            "{text}"
        );
        assert!(
            text.contains("\n  conn 2     1 in 1.000 s: 1.0/s; min 0.200 "),
            "{text}"
        );
        let one = render(
            &r,
            &landspeed_core::transactions::pooled(vec![log(&[100])], 1_000_000_000),
        );
        assert!(
            one.contains(", 1 in flight, ") && !one.contains("conn 1"),
            "{one}"
        );
    }
}
