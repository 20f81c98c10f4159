//! The text of a `landspeed rpm` run: per direction its throughput, connections, RPM and the
//! probes' figures behind it, and what was not measured and why.

use landspeed_core::units::BitRate;
use landspeed_rpm::{RpmDirection, RpmReport};
use std::fmt::Write;

/// The report.
pub fn text(r: &RpmReport) -> String {
    let at_once = if r.parallel {
        ", the concurrent test: both directions at once"
    } else if r.directions.len() > 1 {
        ", the sequential test: a score each way"
    } else {
        ""
    };
    let mut out = format!(
        "Responsiveness at {} ({}{at_once}; {}, interval {:?}):\n",
        r.config_url,
        r.http,
        r.params.draft.label(),
        r.params.interval
    );
    for d in &r.directions {
        let name = match d.direction {
            RpmDirection::Download => "download",
            RpmDirection::Upload => "upload",
        };
        let _ = writeln!(
            out,
            "  {name}: {} on {} connection{}; {}",
            BitRate(d.throughput_bps),
            d.connections,
            if d.connections == 1 { "" } else { "s" },
            stages(d)
        );
        match (&d.figures, &d.error) {
            (Some(f), _) => {
                let tls = f.tls_ms.map_or("-".into(), |v| format!("{v:.1}"));
                let _ = writeln!(
                    out,
                    "    RPM {:.0} (foreign {}, loaded {}; P{:.0}: {:.0}); round trips, trimmed means: TCP {:.1} ms, TLS {tls} ms, HTTP {:.1} ms on a new connection, {:.1} ms on a loaded one{} ({} and {} probes)",
                    f.rpm,
                    f.foreign_rpm.map_or("-".into(), |v| format!("{v:.0}")),
                    f.loaded_rpm.map_or("-".into(), |v| format!("{v:.0}")),
                    r.params.percentile,
                    f.rpm_percentile,
                    f.tcp_ms,
                    f.http_foreign_ms,
                    f.http_self_ms,
                    if d.self_probes.iter().any(|p| p.tcp_rtt) {
                        " (its TCP round trip: HTTP/1.1 carries no self probe)"
                    } else {
                        ""
                    },
                    f.foreign_probes,
                    f.self_probes
                );
                if let Some(line) = stream_wait(f) {
                    let _ = writeln!(out, "    {line}");
                }
            }
            (None, why) => {
                let _ = writeln!(
                    out,
                    "    RPM not measured: {}",
                    why.as_deref().unwrap_or("no probes")
                );
            }
        }
    }
    if let Some(f) = &r.overall {
        let _ = writeln!(
            out,
            "  the concurrent test's score: RPM {:.0} (P{:.0}: {:.0}), both directions' probes pooled",
            f.rpm, r.params.percentile, f.rpm_percentile
        );
    }
    out
}

/// The loaded probes beside their connections' kernel RTT: a probe that took far longer than its
/// connection's round trip waited in the connection's byte stream, which is the endpoints' share of
/// the figure (draft-09 counts it: it is what an application on that connection waits).
fn stream_wait(f: &landspeed_rpm::RpmFigures) -> Option<String> {
    let rtt = f.self_conn_rtt_ms?;
    let mut line = format!("loaded probes' connections: TCP round trip {rtt:.1} ms (the kernel's estimate)");
    if f.http_self_ms > 2.0 * rtt + 10.0 {
        let _ = write!(
            line,
            "; the probes waited {:.0} ms more in the connection's byte stream: for earlier data held back until a loss was repaired (in-order delivery), or in the endpoints' buffers",
            f.http_self_ms - rtt
        );
    }
    Some(line)
}

/// How far the direction's stages got: when the goodput saturated and each stage's confidence (the
/// draft's Low, Medium, High), or, for a report written before they were kept, whether it was stable.
fn stages(d: &landspeed_rpm::RpmDirectionResult) -> String {
    let Some(c) = d.confidence else {
        return match d.stable {
            true => "stable".into(),
            false => "not stable within the timeout: figures from every probe".into(),
        };
    };
    let saturated = match (d.saturated_at_s, c.capacity) {
        (Some(t), landspeed_rpm::Confidence::High) => format!("goodput saturated at {t:.0} s"),
        (Some(t), _) => format!("goodput not saturated when its time ran out at {t:.0} s"),
        (None, _) => "goodput never saturated".into(),
    };
    let word = |c: landspeed_rpm::Confidence| format!("{c:?}").to_lowercase();
    format!(
        "{saturated}; confidence: capacity {}, responsiveness {}",
        word(c.capacity),
        word(c.responsiveness)
    )
}

#[cfg(test)]
mod tests {
    use super::stream_wait;
    use landspeed_rpm::RpmFigures;

    fn figures(self_ms: f64, conn_rtt_ms: Option<f64>) -> RpmFigures {
        RpmFigures {
            rpm: 1.0,
            rpm_percentile: 1.0,
            foreign_rpm: None,
            loaded_rpm: None,
            tcp_ms: 20.0,
            tls_ms: None,
            http_foreign_ms: 20.0,
            http_self_ms: self_ms,
            self_conn_rtt_ms: conn_rtt_ms,
            foreign_probes: 1,
            self_probes: 1,
        }
    }

    #[test]
    fn a_loaded_probe_far_beyond_its_connections_round_trip_is_said_to_wait_in_the_stream() {
        assert_eq!(stream_wait(&figures(250.0, None)), None);
        let near = stream_wait(&figures(45.0, Some(40.0))).unwrap();
        assert!(
            near.contains("TCP round trip 40.0 ms") && !near.contains("waited"),
            "{near}"
        );
        let far = stream_wait(&figures(250.0, Some(41.0))).unwrap();
        assert!(
            far.contains("waited 209 ms more") && far.contains("in-order delivery"),
            "{far}"
        );
    }
}
