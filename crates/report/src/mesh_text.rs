//! The combined report of a mesh campaign as text: the hosts as checked (with their clock offsets), one
//! line per test, what each host sent and received, the aggregate, and the intervals on the common clock
//! with every test's rate in its own column.

use landspeed_core::result::format_utc;
use landspeed_core::units::{BitRate, Bytes};
use landspeed_plan::mesh::MeshReport;
use std::fmt::Write;

fn mbps(bps: f64) -> String {
    format!("{:.1}", bps / 1e6)
}

/// A mesh campaign's combined report as text: the tests, the hosts' totals and the intervals.
pub fn mesh_text(r: &MeshReport) -> String {
    let mut o = String::new();
    heading(&mut o, r);
    let w = r.hosts.iter().map(|h| h.name.len()).max().unwrap_or(4).max(4);
    hosts(&mut o, r, w);
    tests(&mut o, r, w);
    per_host(&mut o, r, w);
    aggregate(&mut o, r);
    intervals(&mut o, r);
    o
}

fn heading(o: &mut String, r: &MeshReport) {
    let (how, start) = if r.concurrent {
        ("all started together", "agreed start")
    } else {
        ("one after another", "first start")
    };
    let _ = writeln!(
        o,
        "Mesh campaign \"{}\": {} test(s), {how}, {start} {}",
        r.name,
        r.aggregate.tests,
        format_utc(r.start_unix_s)
    );
    if let Some(id) = r.campaign_id {
        let _ = writeln!(o, "Archived as campaign {id}");
    }
}

/// The hosts as checked, `w` wide names.
fn hosts(o: &mut String, r: &MeshReport, w: usize) {
    let _ = writeln!(
        o,
        "\nHosts (clock: host minus this controller, ± half the probe RTT):"
    );
    for h in &r.hosts {
        let _ = match (&h.error, &h.clock) {
            (Some(e), _) => writeln!(o, "  {:w$}  {:22}  FAILED: {e}", h.name, h.address),
            (None, Some(c)) => writeln!(
                o,
                "  {:w$}  {:22}  clock {:+.3} ms (±{:.3} ms)  {}",
                h.name,
                h.address,
                c.offset_ns as f64 / 1e6,
                c.rtt_ns as f64 / 2e6,
                h.software.as_deref().unwrap_or("")
            ),
            (None, None) => writeln!(o, "  {:w$}  {:22}  not checked", h.name, h.address),
        };
    }
}

/// One line per test.
fn tests(o: &mut String, r: &MeshReport, w: usize) {
    let _ = writeln!(
        o,
        "\nTests:\n  {:>3}  {:<pw$}  {:>4} {:>7}  {:>10}  {:>16}  {:>10}  {:>9}",
        "#",
        "from -> to",
        "proto",
        "streams",
        "status",
        "bytes received",
        "Mbit/s",
        "start ms",
        pw = 2 * w + 4
    );
    for t in &r.tests {
        let _ = writeln!(
            o,
            "  {:>3}  {:<pw$}  {:>5} {:>7}  {:>10}  {:>16}  {:>10}  {:>9}{}",
            t.index,
            format!("{} -> {}", t.from, t.to),
            t.transport,
            t.streams,
            t.status,
            t.bytes_received,
            mbps(t.throughput_bps),
            t.start_offset_ms.map_or("-".into(), |s| format!("{s:+.1}")),
            t.error.as_ref().map_or(String::new(), |e| format!("  {e}")),
            pw = 2 * w + 4
        );
    }
}

/// What each host sent and received.
fn per_host(o: &mut String, r: &MeshReport, w: usize) {
    let _ = writeln!(
        o,
        "\nPer host:\n  {:w$}  {:>16}  {:>10}  {:>16}  {:>10}  tests out/in (failed)",
        "host", "bytes out", "out Mbit/s", "bytes in", "in Mbit/s"
    );
    for h in &r.per_host {
        let _ = writeln!(
            o,
            "  {:w$}  {:>16}  {:>10}  {:>16}  {:>10}  {}/{} ({})",
            h.name,
            h.bytes_out,
            mbps(h.out_bps),
            h.bytes_in,
            mbps(h.in_bps),
            h.tests_out,
            h.tests_in,
            h.tests_failed
        );
    }
}

fn aggregate(o: &mut String, r: &MeshReport) {
    let a = &r.aggregate;
    let _ = writeln!(
        o,
        "\nAggregate: {} of {} test(s) ok, {} failed; {} ({} B) received in {:.3} s = {}{}",
        a.tests_ok,
        a.tests,
        a.tests_failed,
        Bytes(a.bytes_received),
        a.bytes_received,
        a.span_s,
        BitRate(a.throughput_bps),
        a.start_spread_ms.map_or(String::new(), |s| format!(
            "; data started within {s:.2} ms of each other"
        ))
    );
}

/// The intervals on the common clock, every test's rate in its own column.
fn intervals(o: &mut String, r: &MeshReport) {
    if r.intervals.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "\nIntervals (s from the {} start, common clock), Mbit/s:\n  {:>13}  {:>9}",
        if r.concurrent { "agreed" } else { "first" },
        "interval",
        "total"
    );
    for t in &r.tests {
        let _ = write!(o, "  {:>9}", format!("#{}", t.index));
    }
    let _ = writeln!(o);
    for i in &r.intervals {
        let len = (i.end_s - i.start_s).max(1e-9);
        let _ = write!(
            o,
            "  {:>13}  {:>9}",
            format!("{:.1}-{:.1}", i.start_s, i.end_s),
            mbps(i.throughput_bps)
        );
        for b in &i.tests {
            let _ = write!(o, "  {:>9}", mbps(*b as f64 * 8.0 / len));
        }
        let _ = writeln!(o);
    }
}
