//! Text for `landspeed model` and `landspeed tune`: the bounds with their formulas and the one that
//! binds; a run's RFC 6349 figures and measured-vs-predicted; the tuning findings and the sysctl lines.

use landspeed_core::units::{BitRate, Bytes};
use landspeed_model::tune::{Advice, Severity};
use landspeed_model::{Prediction, Rfc6349};
use std::fmt::Write;

/// `landspeed model`'s text: the path, the bounds with their formulas and the one that binds, the
/// measured rate against the prediction, and a run's RFC 6349 figures.
pub fn model_text(
    p: &Prediction,
    measured_bps: Option<f64>,
    t: Option<&Rfc6349>,
    note: Option<&str>,
) -> String {
    let mut o = String::new();
    path_lines(&mut o, p);
    if let Some(n) = note {
        let _ = writeln!(o, "note: {n}");
    }
    bounds_table(&mut o, p);
    measured_line(&mut o, p, measured_bps);
    if let Some(t) = t {
        rfc6349_lines(&mut o, t);
    }
    o
}

/// The path's figures, its bandwidth-delay product and RFC 8337's targets when known.
fn path_lines(o: &mut String, p: &Prediction) {
    let i = &p.input;
    let _ = writeln!(
        o,
        "path: RTT {:.3} ms{}{}, MSS {} B, {} stream(s){}",
        i.rtt_s * 1e3,
        i.rate_bps
            .map_or(String::new(), |r| format!(", line rate {}", BitRate(r))),
        i.loss
            .map_or(String::new(), |l| format!(", loss {:.6}%", l * 100.0)),
        i.mss_bytes,
        i.streams,
        i.window_bytes
            .map_or(String::new(), |w| format!(", window {} per stream", Bytes(w)))
    );
    if let (Some(b), Some(w)) = (p.bdp_bytes, p.window_needed_per_stream_bytes) {
        let _ = writeln!(
            o,
            "bandwidth-delay product {} ({:.0} bytes); each stream needs a window of {} to fill the link",
            Bytes(b as u64),
            b,
            Bytes(w as u64)
        );
    }
    if let (Some(w), Some(r)) = (p.target_window_packets, p.target_run_length_packets) {
        let _ = writeln!(
            o,
            "RFC 8337: {w:.0} packets in flight; the path must deliver {r:.0} packets between losses (loss ≤ {:.2e})",
            1.0 / r
        );
    }
}

/// Each bound with its total, per-stream figure and formula, the binding one marked, and the
/// prediction it makes.
fn bounds_table(o: &mut String, p: &Prediction) {
    let _ = writeln!(
        o,
        "\n{:<8} {:>16} {:>16}  formula",
        "bound", "total", "per stream"
    );
    for b in &p.bounds {
        let mark = if p.binding.as_deref() == Some(b.name.as_str()) {
            " ← binds"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "{:<8} {:>16} {:>16}  {}{mark}",
            b.name,
            BitRate(b.total_bps).to_string(),
            b.per_stream_bps.map_or("-".into(), |v| BitRate(v).to_string()),
            b.formula
        );
    }
    match (&p.binding, p.predicted_bps) {
        (Some(n), Some(v)) => {
            let _ = writeln!(o, "\npredicted: {} ({n} bound)", BitRate(v));
        }
        _ => {
            let _ = writeln!(o, "\nno bound: give --window, --loss or --rate");
        }
    }
}

/// The measured rate, against the prediction when there is one.
fn measured_line(o: &mut String, p: &Prediction, measured_bps: Option<f64>) {
    match (measured_bps, p.predicted_bps) {
        (Some(m), Some(v)) => {
            let _ = writeln!(
                o,
                "measured:  {} ({:.1}% of predicted)",
                BitRate(m),
                m / v * 100.0
            );
        }
        (Some(m), None) => {
            let _ = writeln!(o, "measured:  {} (nothing to compare it with)", BitRate(m));
        }
        _ => {}
    }
}

/// RFC 6349's figures of a run; the ones that need the line rate or the idle RTT say so.
fn rfc6349_lines(o: &mut String, t: &Rfc6349) {
    let _ = writeln!(o, "\nRFC 6349:");
    let f = |v: Option<f64>, unit: &str| {
        v.map_or("- (needs the line rate: --rate)".into(), |v| {
            format!("{v:.3}{unit}")
        })
    };
    let _ = writeln!(o, "  ideal transfer time   {}", f(t.ideal_transfer_time_s, " s"));
    let _ = writeln!(o, "  actual transfer time  {:.3} s", t.actual_transfer_time_s);
    let _ = writeln!(o, "  transfer time ratio   {}", f(t.transfer_time_ratio, ""));
    let _ = writeln!(
        o,
        "  TCP efficiency        {}",
        t.tcp_efficiency_pct.map_or("-".into(), |v| format!("{v:.3}%"))
    );
    let _ = writeln!(
        o,
        "  buffer delay          {}",
        t.buffer_delay_pct
            .map_or("- (run with --latency)".into(), |v| format!("{v:.1}%"))
    );
}

/// `landspeed tune`'s text: the target's window, each setting with its verdict, and the sysctl lines.
pub fn tune_text(a: &Advice) -> String {
    let mut o = String::new();
    if let (Some(t), Some(b), Some(w), Some(buf)) = (
        &a.target,
        a.bdp_bytes,
        a.window_per_stream_bytes,
        a.buffer_per_stream_bytes,
    ) {
        let _ = writeln!(
            o,
            "target: {} over {:.1} ms with {} stream(s): BDP {}, each stream needs a window of {} (a {} socket buffer)",
            BitRate(t.rate_bps),
            t.rtt_s * 1e3,
            t.streams,
            Bytes(b as u64),
            Bytes(w as u64),
            Bytes(buf as u64)
        );
    }
    if let Some(w) = a.max_window_now_bytes {
        let _ = write!(o, "now: windows up to {} per stream", Bytes(w as u64));
        if let Some(r) = a.max_rate_now_bps {
            let _ = write!(o, ", at most {} over this RTT", BitRate(r));
        } else {
            for ms in [10.0, 100.0, 200.0] {
                let _ = write!(o, "; {} per stream at {ms:.0} ms", BitRate(w * 8.0 / (ms / 1e3)));
            }
            let _ = write!(
                o,
                "\n(no target: give --rate and --rtt to check the window against a path)"
            );
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o);
    for f in &a.findings {
        let mark = match f.severity {
            Severity::Limit => "LIMIT ",
            Severity::Advice => "advice",
            Severity::Ok => "ok    ",
        };
        let _ = writeln!(o, "{mark} {:<36} {:<28} want {}", f.setting, f.current, f.wanted);
        if f.severity != Severity::Ok {
            let _ = writeln!(o, "       {}", f.why);
        }
    }
    if a.sysctl_lines.is_empty() {
        let _ = writeln!(o, "\nnothing to change");
    } else {
        let _ = writeln!(
            o,
            "\nsysctl lines (landspeed tune ... --write FILE, or --apply as root):"
        );
        for l in &a.sysctl_lines {
            let _ = writeln!(o, "  {l}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_model::{predict, ModelInput};

    #[test]
    fn a_measured_rate_is_shown_with_or_without_a_bound_to_compare_it_with() {
        let unbounded = predict(&ModelInput {
            rtt_s: 0.0002,
            ..ModelInput::default()
        })
        .unwrap();
        assert!(unbounded.predicted_bps.is_none());
        let t = model_text(&unbounded, Some(25e9), None, None);
        assert!(t.contains("no bound") && t.contains("measured:  25"), "{t}");
        let bounded = predict(&ModelInput {
            rtt_s: 0.0002,
            rate_bps: Some(100e9),
            ..ModelInput::default()
        })
        .unwrap();
        let t = model_text(&bounded, Some(25e9), None, None);
        assert!(t.contains("% of predicted"), "{t}");
        assert!(!model_text(&bounded, None, None, None).contains("measured"));
    }
}
