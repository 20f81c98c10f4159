//! The Land Speed Record submission document, as the seeds' submissions laid it out: class and headline
//! figures, per-stream results with totals, both command lines, both end systems (collected at test
//! time), the path (route, RTT, MTU), the distance leg by leg, and the rule checklist with evidence.
//! Written once as Markdown; the HTML version is the same Markdown rendered (pulldown-cmark), so the
//! two can never say different things.

use landspeed_core::lsr::{Check, RecordMetric, Rules};
use landspeed_core::result::{EndpointSummary, RunResult};
use landspeed_core::units::{BitRate, Bytes};
use landspeed_geo::RecordPath;
use std::fmt::Write;

/// What a Land Speed Record submission document is made from.
pub struct RecordDoc<'a> {
    /// The run submitted.
    pub run: &'a RunResult,
    /// Its archive id, when it came from the archive.
    pub run_id: Option<i64>,
    /// The path and its length.
    pub path: &'a RecordPath,
    /// The bit-metre metric and the class.
    pub metric: &'a RecordMetric,
    /// Every rule checked, with its evidence.
    pub checks: &'a [Check],
    /// The rules in force.
    pub rules: &'a Rules,
    /// When the document was made, UTC.
    pub generated_utc: String,
}

/// Escapes text for a Markdown table cell or line.
fn md(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' | '*' | '_' | '`' | '<' | '>' | '[' | ']' | '#' | '\\' => {
                o.push('\\');
                o.push(c);
            }
            '\n' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v);
    let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

fn end_system(o: &mut String, title: &str, e: &EndpointSummary, address: &str) {
    let h = &e.host;
    let _ = writeln!(o, "### {title} ({})\n", md(address));
    let _ = writeln!(o, "| | |\n| --- | --- |");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(o, "| {k} | {} |", md(&v));
    };
    if h.withheld {
        row(
            "host",
            "withheld by the server, which describes itself only to clients that prove a key or with \
             serve --share-host; the CPUs and network sysctls below are what it shares with anyone"
                .into(),
        );
    }
    row("host name", h.hostname.clone());
    row("operating system", h.os.clone());
    row("kernel", h.kernel.clone());
    row("CPU", format!("{} ({} logical CPUs)", h.cpu_model, h.cpus));
    row("memory", Bytes(h.memory_bytes).to_string());
    if let Some(n) = &h.nic {
        row(
            "network interface",
            format!(
                "{} (driver {}, {}, MTU {}, txqueuelen {}, qdisc {})",
                n.name,
                n.driver.as_deref().unwrap_or("none/virtual"),
                n.speed_mbps
                    .map_or("speed not reported".into(), |s| format!("{s} Mbit/s")),
                n.mtu.map_or("?".into(), |m| m.to_string()),
                n.tx_queue_len.map_or("?".into(), |m| m.to_string()),
                n.qdisc.as_deref().unwrap_or("?")
            ),
        );
        if n.offloads.is_empty() {
            row("offloads", "not known (ethtool not installed on this end)".into());
        } else {
            row(
                "offloads",
                n.offloads
                    .iter()
                    .map(|(k, v)| format!("{k} {}", if *v { "on" } else { "off" }))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
    }
    row(
        "socket buffers",
        format!(
            "requested {}, granted send {}, receive {}",
            e.window
                .requested_bytes
                .map_or("default (auto-tuning)".into(), |w| Bytes(w).to_string()),
            Bytes(e.window.granted_snd_bytes),
            Bytes(e.window.granted_rcv_bytes)
        ),
    );
    for (k, v) in &h.sysctls {
        row(k, v.clone());
    }
    row("software", e.software.clone());
    let _ = writeln!(o);
}

/// The submission as Markdown: summary, rules, per-stream results, command lines, end systems, path,
/// distance and the rules in force.
pub fn record_markdown(d: &RecordDoc) -> String {
    let mut o = String::new();
    summary_section(&mut o, d);
    rules_section(&mut o, d);
    streams_section(&mut o, d);
    systems_section(&mut o, d);
    path_section(&mut o, d);
    distance_section(&mut o, d);
    rules_in_force(&mut o, d);
    o
}

/// The class, throughput, distance and metric, date, streams and data.
fn summary_section(o: &mut String, d: &RecordDoc) {
    let (r, m) = (d.run, d.metric);
    let _ = writeln!(
        o,
        "# Land Speed Record submission: {}, {}\n",
        m.family, m.streams_class
    );
    let _ = writeln!(o, "| | |\n| --- | --- |");
    let _ = writeln!(o, "| class | {} {} TCP |", m.family, m.streams_class);
    let _ = writeln!(
        o,
        "| throughput | **{}** ({} bytes × 8 / {:.3} s, the receiver's time) |",
        BitRate(m.throughput_bps),
        thousands(m.bytes as f64),
        m.duration_s
    );
    let _ = writeln!(
        o,
        "| distance | **{} km** (terrestrial path, {} legs{}) |",
        thousands(m.distance_km),
        d.path.legs.len(),
        d.path
            .cap_km
            .map_or(String::new(), |c| format!(", capped at {} km", thousands(c)))
    );
    let _ = writeln!(
        o,
        "| metric | **{} bit·m/s = {:.3} Pb·m/s** |",
        thousands(m.bit_meters_per_s),
        m.petabit_meters_per_s
    );
    let _ = writeln!(o, "| date | {} |", md(&r.started_utc));
    let _ = writeln!(o, "| streams | {} |", m.streams);
    let _ = writeln!(
        o,
        "| data | {} bytes sent, {} received, {} verified |",
        thousands(r.summary.bytes_sent as f64),
        thousands(r.summary.bytes_received as f64),
        thousands(r.payload.bytes_verified as f64)
    );
    if let Some(id) = d.run_id {
        let _ = writeln!(o, "| archive | run {id} (`landspeed show {id} --json`) |");
    }
}

/// Each rule with its result and evidence.
fn rules_section(o: &mut String, d: &RecordDoc) {
    let _ = writeln!(
        o,
        "\n## Rules\n\n| rule | result | evidence |\n| --- | --- | --- |"
    );
    for c in d.checks {
        let _ = writeln!(
            o,
            "| {} | {} | {} |",
            md(&c.rule),
            if c.passed { "pass" } else { "**FAIL**" },
            md(&c.evidence)
        );
    }
}

/// Per stream: direction, bytes, throughput, retransmits, RTT; then the totals.
fn streams_section(o: &mut String, d: &RecordDoc) {
    let (r, m) = (d.run, d.metric);
    let _ = writeln!(o, "\n## Per-stream results\n");
    let _ = writeln!(o, "| stream | direction | bytes sent | bytes received | throughput | retransmits | RTT (ms) |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    for s in &r.streams {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            s.id,
            s.flow.label(),
            thousands(s.bytes_sent as f64),
            thousands(s.bytes_received as f64),
            BitRate(s.throughput_bps),
            s.tcp.as_ref().map_or("-".into(), |t| t.retransmits.to_string()),
            s.tcp
                .as_ref()
                .map_or("-".into(), |t| format!("{:.2}", f64::from(t.rtt_avg_us) / 1e3))
        );
    }
    let _ = writeln!(
        o,
        "| **total** | | **{}** | **{}** | **{}** | **{}** | |",
        thousands(r.summary.bytes_sent as f64),
        thousands(r.summary.bytes_received as f64),
        BitRate(m.throughput_bps),
        r.summary.retransmits
    );
}

/// The command lines at both ends and each end system.
fn systems_section(o: &mut String, d: &RecordDoc) {
    let r = d.run;
    let _ = writeln!(
        o,
        "\n## Command lines\n\n```\nreceiver/server: {}\nclient:          {}\n```\n",
        r.remote.host.command_line, r.local.host.command_line
    );
    let _ = writeln!(o, "## End systems\n");
    end_system(o, "Client", &r.local, &r.config.local_address);
    end_system(o, "Server", &r.remote, &r.config.remote_address);
}

/// The route, RTT and path MTU measured with the run, and its latency figures.
fn path_section(o: &mut String, d: &RecordDoc) {
    let r = d.run;
    let _ = writeln!(o, "## Path\n");
    match r.path.as_ref() {
        Some(p) => {
            if let Some(rtt) = p.rtt.as_ref() {
                let s = &rtt.summary;
                let _ = writeln!(
                    o,
                    "RTT (UDP echo, {} probes): min {} / avg {} / max {} ms, loss {:.1}%\n",
                    s.sent,
                    s.min_ms.map_or("-".into(), |v| format!("{v:.3}")),
                    s.avg_ms.map_or("-".into(), |v| format!("{v:.3}")),
                    s.max_ms.map_or("-".into(), |v| format!("{v:.3}")),
                    s.loss_pct
                );
            }
            if let Some(pm) = p.pmtu.as_ref() {
                let _ = writeln!(
                    o,
                    "Path MTU: {}\n",
                    pm.path_mtu.map_or("not found".into(), |v| format!("{v} bytes"))
                );
            }
            if let Some(t) = p.trace.as_ref() {
                let _ = writeln!(
                    o,
                    "Route ({} hop{}):\n\n| hop | address | name | RTT (ms) |\n| ---: | --- | --- | --- |",
                    t.hops.len(),
                    if t.hops.len() == 1 { "" } else { "s" }
                );
                for h in &t.hops {
                    let _ = writeln!(
                        o,
                        "| {} | {} | {} | {} |",
                        h.ttl,
                        md(h.address.as_deref().unwrap_or("*")),
                        md(h.name.as_deref().unwrap_or("")),
                        h.probes
                            .iter()
                            .map(|p| p.rtt_ms.map_or("*".into(), |v| format!("{v:.3}")))
                            .collect::<Vec<_>>()
                            .join(" ")
                    );
                }
                let _ = writeln!(o);
            }
        }
        None => {
            let _ = writeln!(
                o,
                "The run was made without `--path`: no route, RTT or MTU was recorded with it.\n"
            );
        }
    }
    if let Some(l) = &r.latency {
        let _ = writeln!(
            o,
            "RTT idle (min/median) {} / {} ms; under load {} / {} ms.\n",
            l.idle.min_ms.map_or("-".into(), |v| format!("{v:.3}")),
            l.idle.median_ms.map_or("-".into(), |v| format!("{v:.3}")),
            l.loaded.min_ms.map_or("-".into(), |v| format!("{v:.3}")),
            l.loaded.median_ms.map_or("-".into(), |v| format!("{v:.3}"))
        );
    }
}

/// Each leg's geodesic and counted length, the cap, the points as resolved.
fn distance_section(o: &mut String, d: &RecordDoc) {
    let _ = writeln!(o, "## Distance\n\nEach leg is the geodesic between the points on the WGS84 ellipsoid (Karney's method), unless a length was given for it.\n");
    let _ = writeln!(o, "| leg | from | to | geodesic (km) | given (km) | counted (km) |\n| ---: | --- | --- | ---: | ---: | ---: |");
    for (i, l) in d.path.legs.iter().enumerate() {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {:.1} | {} | {:.1} |",
            i + 1,
            md(&l.from),
            md(&l.to),
            l.geodesic_km,
            l.override_km.map_or(String::new(), |v| format!("{v:.1}")),
            l.km
        );
    }
    let _ = writeln!(o, "| | | **total** | | | **{:.1}** |", d.path.total_km);
    if let Some(c) = d.path.cap_km {
        let _ = writeln!(
            o,
            "\nCounted under the {} km cap: {:.1} km.",
            thousands(c),
            d.path.counted_km
        );
    }
    let _ = writeln!(o, "\nPoints:\n");
    for p in &d.path.points {
        let _ = writeln!(
            o,
            "- {} → {:.5}, {:.5}: {}",
            md(&p.query),
            p.latitude,
            p.longitude,
            md(&p.choice)
        );
    }
}

/// The rules in force and the generator's line with the data attribution.
fn rules_in_force(o: &mut String, d: &RecordDoc) {
    let _ = writeln!(
        o,
        "\nRules in force: minimum duration {} s, {}{}.\n",
        d.rules.min_duration_s,
        if d.rules.min_bytes == 0 {
            "no minimum data".to_string()
        } else {
            format!("minimum data {} bytes", d.rules.min_bytes)
        },
        d.rules
            .previous_bit_meters_per_s
            .map_or(String::new(), |p| format!(
                ", standing record {:.4e} b·m/s to beat by {}%",
                p, d.rules.improvement_pct
            ))
    );
    let _ = writeln!(
        o,
        "---\nGenerated by landspeed {} on {}. City coordinates: GeoNames (geonames.org), CC BY 4.0.",
        env!("CARGO_PKG_VERSION"),
        md(&d.generated_utc)
    );
}

/// The short text `landspeed record` prints: each point as resolved, each leg, the metric and every
/// rule with its evidence.
pub fn record_text(d: &RecordDoc) -> String {
    let (path, m) = (d.path, d.metric);
    let mut o = String::new();
    for p in &path.points {
        let _ = writeln!(o, "{}: {}", p.query, p.choice);
    }
    for (i, l) in path.legs.iter().enumerate() {
        let given = l.override_km.map_or(String::new(), |_| {
            format!(" (given; geodesic {:.1} km)", l.geodesic_km)
        });
        let _ = writeln!(o, "leg {}: {} > {}: {:.1} km{given}", i + 1, l.from, l.to, l.km);
    }
    let _ = writeln!(
        o,
        "\n{} {}: {} × {:.1} km = {:.4e} bit·m/s ({:.3} Pb·m/s)",
        m.family,
        m.streams_class,
        BitRate(m.throughput_bps),
        m.distance_km,
        m.bit_meters_per_s,
        m.petabit_meters_per_s
    );
    for ch in d.checks {
        let verdict = if ch.passed { "pass" } else { "FAIL" };
        let _ = writeln!(o, "  [{verdict}] {}: {}", ch.rule, ch.evidence);
    }
    o
}

/// The same document as one self-contained HTML page.
pub fn record_html(d: &RecordDoc) -> String {
    let text = record_markdown(d);
    let mut body = String::new();
    let opts = pulldown_cmark::Options::ENABLE_TABLES;
    pulldown_cmark::html::push_html(&mut body, pulldown_cmark::Parser::new_ext(&text, opts));
    let body = without_empty_heads(&body);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{}{DOC_STYLE}</style></head><body>\n{body}</body></html>\n",
        crate::html::esc(&format!("Land Speed Record submission: {} {}", d.metric.family, d.metric.streams_class)),
        crate::html::STYLE
    )
}

/// The HTML without the empty header rows of the key-value tables (Markdown needs a header row; the
/// page does not show a blank one).
fn without_empty_heads(html: &str) -> String {
    const OPEN: &str = "<thead><tr>";
    const CLOSE: &str = "</tr></thead>";
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(i) = rest.find(OPEN) {
        let Some(j) = rest[i..].find(CLOSE).map(|j| i + j) else {
            break;
        };
        let cells = &rest[i + OPEN.len()..j];
        let keep = if cells.replace("<th></th>", "").is_empty() {
            i
        } else {
            j + CLOSE.len()
        };
        out.push_str(&rest[..keep]);
        rest = &rest[j + CLOSE.len()..];
    }
    out.push_str(rest);
    out
}

/// The record document's tables hold prose (rules' evidence, operating system, CPU, sysctl values):
/// its text cells wrap inside the page instead of running off its right edge, while the key column and
/// the right-aligned number columns stay on one line (printed, `html::STYLE` lets every cell wrap).
const DOC_STYLE: &str = "th,td{text-align:left}td{white-space:normal;overflow-wrap:anywhere}\
td:first-child,td[style]{white-space:nowrap}";

#[cfg(test)]
mod tests {
    use super::without_empty_heads;

    #[test]
    fn only_blank_header_rows_are_dropped() {
        let html =
            "<table><thead><tr><th></th><th></th></tr></thead><tbody><tr><td>a</td></tr></tbody></table>\
                    <table><thead><tr><th>rule</th><th></th></tr></thead><tbody></tbody></table>";
        assert_eq!(
            without_empty_heads(html),
            "<table><tbody><tr><td>a</td></tr></tbody></table>\
             <table><thead><tr><th>rule</th><th></th></tr></thead><tbody></tbody></table>"
        );
    }
}
