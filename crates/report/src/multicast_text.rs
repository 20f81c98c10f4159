//! Text for multicast tests: the sender's one summary, and a receiver's line per sender it heard
//! (loss, order, duplicates, jitter, one-way delay, rate, whether every byte was checked), from the
//! reports in `landspeed_core::multicast`, which hold every figure.

use landspeed_core::multicast::record::MulticastRecord;
use landspeed_core::multicast::{MulticastReport, SendReport, SourceReport};
use landspeed_core::result::RunResult;
use std::fmt::Write;

fn mbps(bps: f64) -> String {
    format!("{:.2} Mbit/s", bps / 1e6)
}

/// The sender's summary.
pub fn send_text(r: &SendReport) -> String {
    let mut out = format!(
        "sent {} {} datagrams ({} bytes) from {} to {} in {:.2} s: {}, TTL {}, test {}\n",
        r.datagrams,
        r.protocol,
        r.bytes,
        r.from,
        r.group,
        r.elapsed_s,
        mbps(r.rate_bps),
        r.ttl,
        r.key
    );
    if r.send_errors > 0 {
        out += &format!(
            "{} sends refused by this host ({}); its receivers count them lost\n",
            r.send_errors,
            r.first_error.as_deref().unwrap_or("no reason given")
        );
    }
    out
}

/// The receiver's report: a head line, then one block per sender.
pub fn receive_text(r: &MulticastReport) -> String {
    let from = r
        .source
        .as_ref()
        .map_or("any source".to_string(), |s| format!("source {s}"));
    let on = r
        .interface
        .as_ref()
        .map(|i| format!(" on {i}"))
        .unwrap_or_default();
    let mut out = format!(
        "group {} ({from}{on}): {} sender{} heard, ended: {}\n",
        r.group,
        r.sources.len(),
        if r.sources.len() == 1 { "" } else { "s" },
        r.ended_by
    );
    for s in &r.sources {
        out += &source_text(s);
    }
    if r.unknown_datagrams > 0 {
        out += &format!(
            "{} datagrams of no known tool, not counted\n",
            r.unknown_datagrams
        );
    }
    if r.ignored_datagrams > 0 {
        out += &format!(
            "{} datagrams from senders past the first {}, not counted\n",
            r.ignored_datagrams,
            landspeed_core::multicast::MAX_SOURCES
        );
    }
    out
}

fn source_text(s: &SourceReport) -> String {
    let test = s.key.as_ref().map(|k| format!(", test {k}")).unwrap_or_default();
    let u = &s.udp;
    let sent = u
        .datagrams_sent
        .map_or("end not heard".to_string(), |n| format!("{n} sent"));
    let mut out = format!("  from {} ({}{test}): {sent}", s.from, s.protocol);
    if s.first_seq > 0 {
        out += &format!(", heard from datagram {} on", s.first_seq);
    }
    out += &format!(
        "\n    {} received, {} lost ({:.3}%), {} out of order, {} duplicates, jitter {:.3} ms, {} over {:.2} s\n",
        u.datagrams_received,
        u.datagrams_lost,
        u.loss_pct,
        u.out_of_order,
        u.duplicates,
        u.jitter_ms,
        mbps(s.rate_bps),
        s.span_s
    );
    if let Some(d) = s.one_way {
        out += &format!(
            "    one-way delay {:.3} / {:.3} / {:.3} ms (min / mean / max, stdev {:.3}; as right as the clocks agree)\n",
            d.min_ms, d.mean_ms, d.max_ms, d.stdev_ms
        );
    }
    out += &format!("    {}\n", verdict(s));
    out
}

fn verdict(s: &SourceReport) -> String {
    match (s.verified, &s.first_corruption) {
        (None, _) => format!(
            "not verified: {}'s payload is not a pattern landspeed can check",
            s.protocol
        ),
        (Some(true), _) => "verified: every byte of every datagram received was right".to_string(),
        (Some(false), Some(c)) => format!(
            "NOT VERIFIED: {} datagrams wrong; first wrong byte at offset {} (expected {}, got {})",
            s.corrupt, c.offset, c.expected_hex, c.received_hex
        ),
        (Some(false), None) if s.corrupt > 0 => {
            format!("NOT VERIFIED: {} datagrams of the wrong length", s.corrupt)
        }
        (Some(false), None) => "not verified: nothing received".to_string(),
    }
}

/// An archived multicast test (`landspeed show`): the command's own text for its end, then both
/// ends and the warnings, as every report has them.
pub fn render(r: &RunResult, m: &MulticastRecord) -> String {
    let mut out = String::from("\n");
    match m {
        MulticastRecord::Sender { interface, sent } => {
            out += &send_text(sent);
            if let Some(i) = interface {
                let _ = writeln!(out, "sent on interface {i}");
            }
        }
        MulticastRecord::Receiver {
            group,
            source,
            interface,
            heard,
            ended_by,
        } => {
            out += &receive_text(&MulticastReport {
                group: group.clone(),
                source: source.clone(),
                interface: interface.clone(),
                sources: vec![(**heard).clone()],
                ended_by: ended_by.clone(),
                ..MulticastReport::default()
            });
        }
    }
    if r.interrupted {
        out += "INTERRUPTED: stopped early (Ctrl-C)\n";
    }
    crate::text::ends_and_warnings(&mut out, r);
    out
}
