//! The HTML report: one self-contained page (inline SVG, inline CSS, no script, nothing fetched) for a
//! sweep or for one or more runs, with the tables, the figures, both ends' host configuration and the
//! exact command lines, so the page alone is the evidence.

use crate::plot::Figure;
use crate::sweep_text::direction_name;
use landspeed_core::result::RunResult;
use landspeed_core::units::{BitRate, Bytes};
use landspeed_plan::sweep::SweepReport;
use std::fmt::Write;

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The stylesheet every HTML page the project writes carries inline (no external files). On paper the
/// page takes the sheet's width, table cells wrap (at 1280 px they stay on one line, but for lists and
/// words that may grow, class `lw`: a sweep cell's runs and its verdict), and a figure or a
/// table row is never split across pages. A run's text report (`pre.report`) never wraps on screen: its
/// font keeps the per-stream table's rows on one line at 1280 px and a longer line scrolls sideways;
/// on paper it wraps.
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:0.6em 0 1.4em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f0f3f7}td.l,th.l{text-align:left}td.lw{text-align:left;white-space:normal}code,pre{background:#f6f6f6;padding:2px 4px}\
pre{padding:8px;white-space:pre-wrap;overflow-wrap:anywhere}pre code{padding:0;background:none}pre.report{white-space:pre;overflow-wrap:normal;overflow-x:auto;font-size:12px;line-height:1.3}td{white-space:nowrap}figure{margin:1em 0}figcaption{color:#555;font-size:90%}\
svg{max-width:100%;height:auto}\
@media print{body{max-width:none;margin:0;padding:0;font-size:10pt}table{font-size:8.5pt}\
td,th{white-space:normal;overflow-wrap:anywhere;padding:2px 4px}pre,pre.report{font-size:8pt;white-space:pre-wrap;overflow-wrap:anywhere}figure,tr{break-inside:avoid}\
h2,h3{break-after:avoid}}";

/// What a report covers.
pub enum Subject<'a> {
    /// A sweep's report: its tables and figures.
    Sweep {
        /// The sweep's summary.
        report: &'a SweepReport,
        /// One stored run of the sweep, for the host configuration (None if no cell finished).
        sample: Option<&'a RunResult>,
    },
    /// Stored runs, each with its archive id.
    Runs(&'a [(i64, RunResult)]),
    /// A `landspeed latency` run (or its `--aqm` comparison): the page's heading and the text report.
    Latency {
        /// The heading (and the page's title).
        heading: &'a str,
        /// The text report, shown as it was printed.
        text: &'a str,
    },
}

fn figure(o: &mut String, f: &Figure) {
    // Plotters' SVG starts with an XML declaration, which is not allowed inside HTML.
    let svg = f.svg.trim_start();
    let svg = if svg.starts_with("<?xml") {
        svg.split_once("?>").map_or(svg, |(_, rest)| rest)
    } else {
        svg
    };
    let _ = writeln!(
        o,
        "<figure id=\"{}\">{}<figcaption>{}</figcaption></figure>",
        esc(&f.name),
        svg,
        esc(&f.title)
    );
}

/// Flattens a JSON value into `a.b.c = value` rows.
fn leaves(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&p, x, out);
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::String(s) => out.push((prefix.into(), s.clone())),
        other => out.push((prefix.into(), other.to_string())),
    }
}

fn hosts(o: &mut String, r: &RunResult) {
    let _ = writeln!(o, "<h2>Hosts</h2>");
    let _ = writeln!(
        o,
        "<p>Command lines, as each process was started:</p><pre>client: {}\nserver: {}</pre>",
        esc(&r.local.host.command_line),
        esc(&r.remote.host.command_line)
    );
    let side = |e: &landspeed_core::result::EndpointSummary| {
        let mut rows = Vec::new();
        let mut v = serde_json::to_value(&e.host).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            m.remove("command_line");
        }
        leaves("host", &v, &mut rows);
        leaves(
            "window",
            &serde_json::to_value(&e.window).unwrap_or_default(),
            &mut rows,
        );
        leaves(
            "interface",
            &serde_json::to_value(&e.interface).unwrap_or_default(),
            &mut rows,
        );
        rows.push(("software".into(), e.software.clone()));
        rows
    };
    let (l, rm) = (side(&r.local), side(&r.remote));
    let mut keys: Vec<&String> = l.iter().chain(rm.iter()).map(|x| &x.0).collect();
    keys.sort();
    keys.dedup();
    let get = |rows: &[(String, String)], k: &str| {
        rows.iter()
            .find(|x| x.0 == k)
            .map_or(String::new(), |x| x.1.clone())
    };
    let _ = writeln!(
        o,
        "<table><tr><th class=l>setting</th><th class=l>client ({})</th><th class=l>server ({})</th></tr>",
        esc(&r.config.local_address),
        esc(&r.config.remote_address)
    );
    for k in keys {
        let _ = writeln!(
            o,
            "<tr><td class=l>{}</td><td class=l>{}</td><td class=l>{}</td></tr>",
            esc(k),
            esc(&get(&l, k)),
            esc(&get(&rm, k))
        );
    }
    let _ = writeln!(o, "</table>");
}

fn sweep_body(o: &mut String, r: &SweepReport, sample: Option<&RunResult>, figs: &[Figure]) {
    let p = &r.plan;
    let _ = writeln!(o, "<h1>Sweep {} against {}</h1>", r.sweep_id, esc(&p.host));
    let _ = writeln!(
        o,
        "<p>Started {} UTC; status <b>{}</b>; {} of {} runs of {} s; windows {}; streams {}; {} repetitions in {} order (seed {}).</p>",
        esc(&r.created_utc),
        esc(&r.status),
        r.summary.runs_done,
        r.summary.runs_planned,
        p.time_s,
        esc(&p.windows_bytes.iter().map(|w| Bytes(*w).to_string()).collect::<Vec<_>>().join(", ")),
        esc(&p.streams.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")),
        p.repeat,
        format!("{:?}", p.order).to_lowercase(),
        p.seed
    );
    let _ = writeln!(o, "<p>Command line:</p><pre>{}</pre>", esc(&p.command_line));
    for d in &r.summary.directions {
        let _ = writeln!(o, "<h2>{}</h2>", esc(direction_name(d.direction)));
        if let Some(b) = &d.best {
            let _ = writeln!(
                o,
                "<p>Best cell: <b>{} × {} streams</b>, median {}. Smallest buffer within 5% of it: <b>{} × {} streams</b>, median {}.</p>",
                Bytes(b.best.0), b.best.1, BitRate(b.best.2),
                Bytes(b.smallest_within_5pct.0), b.smallest_within_5pct.1, BitRate(b.smallest_within_5pct.2)
            );
        }
        let _ = writeln!(o, "<table><tr><th>streams</th><th>Mbit/s per MiB</th><th>R²</th><th>points</th><th>implied RTT (ms)</th><th>TCP's RTT (ms)</th><th>window granted ÷ requested</th><th>window-limited up to</th><th>saturates at</th><th>max</th></tr>");
        for f in &d.fits {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{:.2}</td><td>{:.4}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                f.streams,
                f.slope_bps_per_byte * 1048576.0 / 1e6,
                f.r2,
                f.points_used,
                f.implied_rtt_s * 1e3,
                f.measured_rtt_s
                    .map_or("-".into(), |t| format!("{:.2}", t * 1e3)),
                f.window_scale,
                Bytes(f.window_limited_up_to_bytes as u64),
                Bytes(f.saturation_window_bytes as u64),
                BitRate(f.max_throughput_bps)
            );
        }
        let _ = writeln!(o, "</table>");
        for f in figs
            .iter()
            .filter(|f| f.title.ends_with(direction_name(d.direction)))
        {
            figure(o, f);
        }
        let _ = writeln!(o, "<h3>Cells (throughput in Mbit/s)</h3><table><tr><th>window</th><th>streams</th><th>n</th><th>median</th><th>p90</th><th>min</th><th>max</th><th>mean</th><th>sd</th><th>95% CI of mean</th><th class=l>runs</th><th class=l>limited by</th></tr>");
        for c in r.summary.cells.iter().filter(|c| c.direction == d.direction) {
            let t = &c.throughput_bps;
            let m = |v: f64| format!("{:.1}", v / 1e6);
            let ci = match (t.ci95_low, t.ci95_high) {
                (Some(a), Some(b)) => format!("{} – {}", m(a), m(b)),
                _ => "–".into(),
            };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=lw>{}</td><td class=lw>{}</td></tr>",
                Bytes(c.window_bytes), c.streams, t.n, m(t.median), m(t.p90), m(t.min), m(t.max), m(t.mean), m(t.sd), ci,
                c.runs_bps.iter().map(|v| m(*v)).collect::<Vec<_>>().join(", "),
                c.limit.map_or("-".to_string(), |k| k.label().replace('_', " "))
            );
        }
        let _ = writeln!(o, "</table>");
    }
    if let Some(s) = sample {
        hosts(o, s);
    }
}

fn runs_body(o: &mut String, runs: &[(i64, RunResult)], figs: &[Figure]) {
    let _ = match runs {
        [(id, r)] => writeln!(o, "<h1>Run {id} against {}</h1>", esc(&r.config.host)),
        _ => writeln!(o, "<h1>{} runs</h1>", runs.len()),
    };
    let _ = writeln!(o, "<table><tr><th>id</th><th class=l>started (UTC)</th><th class=l>host</th><th>streams</th><th>window</th><th class=l>direction</th><th>duration (s)</th><th>throughput</th><th>retransmits</th><th>verified</th></tr>");
    for (id, r) in runs {
        let _ = writeln!(
            o,
            "<tr><td>{id}</td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td class=l>{:?}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.started_utc),
            esc(&r.config.host),
            r.config.spec.streams,
            r.config.spec.window_bytes.map_or("default".into(), |w| Bytes(w).to_string()),
            r.config.spec.direction,
            r.summary.duration_s,
            BitRate(r.summary.throughput_bps),
            r.summary.retransmits,
            Bytes(r.summary.bytes_verified)
        );
    }
    let _ = writeln!(o, "</table>");
    multicast_table(o, runs);
    for f in figs {
        figure(o, f);
    }
    for (id, r) in runs {
        let _ = writeln!(
            o,
            "<h2>Run {id}</h2><pre class=\"report\">{}</pre>",
            esc(&crate::render(r))
        );
    }
    if let Some((_, r)) = runs.first() {
        hosts(o, r);
    }
}

/// The multicast runs among `runs`, one row each: a sender's datagrams and rate sent, a
/// receiver's per sender heard (loss, order, duplicates, jitter, one-way delay, verified), so the
/// results of one group's sender and receivers, gathered in one archive, read side by side.
fn multicast_table(o: &mut String, runs: &[(i64, RunResult)]) {
    use landspeed_core::multicast::record::MulticastRecord;
    let rows: Vec<String> = runs
        .iter()
        .filter_map(|(id, r)| match r.multicast.as_ref()? {
            MulticastRecord::Sender { sent, .. } => Some(format!(
                "<tr><td>{id}</td><td class=l>sender</td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>{} sent</td><td>-</td></tr>",
                esc(&sent.group.to_string()),
                esc(&sent.from.to_string()),
                sent.datagrams,
                BitRate(sent.rate_bps)
            )),
            MulticastRecord::Receiver { group, heard: h, .. } => Some(format!(
                "<tr><td>{id}</td><td class=l>receiver</td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td>{} ({:.3}%)</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(group),
                esc(&h.from.to_string()),
                h.udp.datagrams_sent.map_or("end not heard".into(), |n| n.to_string()),
                h.udp.datagrams_received,
                h.udp.datagrams_lost,
                h.udp.loss_pct,
                h.udp.out_of_order,
                h.udp.duplicates,
                h.udp.jitter_ms,
                h.one_way.map_or("-".into(), |d| format!("{:.3}", d.mean_ms)),
                BitRate(h.rate_bps),
                match h.verified {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "not checkable",
                }
            )),
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(o, "<h2>Multicast</h2><table><tr><th>id</th><th class=l>end</th><th class=l>group</th><th class=l>sender</th><th>sent</th><th>received</th><th>lost</th><th>out of order</th><th>duplicates</th><th>jitter (ms)</th><th>one-way delay, mean (ms)</th><th>rate</th><th>verified</th></tr>");
    for r in rows {
        let _ = writeln!(o, "{r}");
    }
    let _ = writeln!(o, "</table>");
}

/// The page.
pub fn report_html(subject: &Subject, figures: &[Figure], generated_utc: &str) -> String {
    let mut o = String::new();
    let title = match subject {
        Subject::Sweep { report, .. } => {
            format!("landspeed sweep {} — {}", report.sweep_id, report.plan.host)
        }
        Subject::Runs(runs) => format!(
            "landspeed run{} {}",
            if runs.len() == 1 { "" } else { "s" },
            runs.iter()
                .map(|r| r.0.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Subject::Latency { heading, .. } => format!("landspeed {heading}"),
    };
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        esc(&title)
    );
    match subject {
        Subject::Sweep { report, sample } => sweep_body(&mut o, report, *sample, figures),
        Subject::Runs(runs) => runs_body(&mut o, runs, figures),
        Subject::Latency { heading, text } => {
            let _ = writeln!(o, "<h1>{}</h1>", esc(heading));
            figures.iter().for_each(|f| figure(&mut o, f));
            let _ = writeln!(o, "<pre class=\"report\">{}</pre>", esc(text));
        }
    }
    let _ = writeln!(
        o,
        "<hr><p><small>Made by landspeed {} on {} UTC. Every figure and table on this page comes from the stored results; nothing here is loaded from elsewhere.</small></p></body></html>",
        env!("CARGO_PKG_VERSION"),
        esc(generated_utc)
    );
    o
}
