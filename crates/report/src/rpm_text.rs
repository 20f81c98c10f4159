//! The text of a `landspeed rpm` run: per direction its throughput, connections, RPM and the
//! probes' figures behind it, and what was not measured and why.

use landspeed_core::rpm::{RpmDirection, RpmReport};
use landspeed_core::units::BitRate;
use std::fmt::Write;

/// The report.
pub fn text(r: &RpmReport) -> String {
    let at_once = if r.parallel {
        ", both directions at once"
    } else {
        ""
    };
    let mut out = format!("Responsiveness at {} ({}{at_once}):\n", r.config_url, r.http);
    for d in &r.directions {
        let name = match d.direction {
            RpmDirection::Download => "download",
            RpmDirection::Upload => "upload",
        };
        let _ = writeln!(
            out,
            "  {name}: {} on {} connection{}{}",
            BitRate(d.throughput_bps),
            d.connections,
            if d.connections == 1 { "" } else { "s" },
            if d.stable {
                ""
            } else {
                " (not stable within the timeout: figures from every probe)"
            }
        );
        match (&d.figures, &d.error) {
            (Some(f), _) => {
                let tls = f.tls_ms.map_or("-".into(), |v| format!("{v:.1}"));
                let _ = writeln!(
                    out,
                    "    RPM {:.0} (P{:.0}: {:.0}); round trips, trimmed means: TCP {:.1} ms, TLS {tls} ms, HTTP {:.1} ms on a new connection, {:.1} ms on a loaded one ({} and {} probes)",
                    f.rpm,
                    r.params.percentile,
                    f.rpm_percentile,
                    f.tcp_ms,
                    f.http_foreign_ms,
                    f.http_self_ms,
                    f.foreign_probes,
                    f.self_probes
                );
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
            "  both directions: RPM {:.0} (P{:.0}: {:.0}), their probes pooled",
            f.rpm, r.params.percentile, f.rpm_percentile
        );
    }
    out
}
