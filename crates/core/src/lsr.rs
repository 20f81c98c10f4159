//! The Land Speed Record's arithmetic and rules, from a stored result: throughput recomputed from the
//! bytes received and the receiver's time (published figures disagree; the bytes do not), times the
//! counted terrestrial distance, in bit-metres per second; the class (IPv4 or IPv6, single or multiple
//! streams); and each rule as pass or fail with its evidence. The distance comes from the caller (the
//! geo crate measures the path), so this stays pure arithmetic.

use crate::result::RunResult;
use serde::{Deserialize, Serialize};

/// The rules count standard TCP only: not UDP, and not Multipath TCP (whose subflows may take
/// several paths, so one path's length does not measure it). TLS records riding on standard TCP
/// leave it standard TCP; the evidence says they were there.
fn standard_tcp(r: &RunResult) -> Check {
    let mptcp = r.streams.iter().filter(|s| s.mptcp().is_some()).count();
    let quic = r.config.spec.transport == crate::config::Transport::Quic;
    let transport = match (r.summary.udp.is_some(), mptcp) {
        _ if quic => "QUIC over UDP: the rules count standard TCP only".to_string(),
        (true, _) => "UDP".to_string(),
        (false, 0) if r.config.spec.mptcp => {
            "TCP (MPTCP was asked for; every stream fell back to TCP)".into()
        }
        (false, 0) => "TCP".into(),
        (false, n) => format!(
            "Multipath TCP ({n} of {} streams MPTCP): the rules count standard TCP only",
            r.streams.len()
        ),
    };
    let tls = match &r.data_path.tls {
        Some(t) => format!(", TLS 1.3 records ({}) inside", t.suite),
        None => String::new(),
    };
    Check {
        rule: "standard TCP".into(),
        passed: r.summary.udp.is_none() && mptcp == 0 && !quic,
        evidence: format!("{} over {transport}{tls}", r.protocol),
    }
}

/// bit/s × km → bit·m/s.
pub fn bit_meters_per_s(throughput_bps: f64, distance_km: f64) -> f64 {
    throughput_bps * distance_km * 1000.0
}

/// The rules a record submission is checked against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    /// Shortest transfer that counts (records ran from tens of seconds to an hour).
    pub min_duration_s: f64,
    /// Least data that counts.
    pub min_bytes: u64,
    /// The standing record, bit·m/s, and the improvement over it a new one needs (%).
    pub previous_bit_meters_per_s: Option<f64>,
    /// The improvement over the standing record a new one needs, percent.
    pub improvement_pct: f64,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            min_duration_s: 60.0,
            min_bytes: 0,
            previous_bit_meters_per_s: None,
            improvement_pct: 10.0,
        }
    }
}

/// One rule checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The rule, in words.
    pub rule: String,
    /// The run meets it.
    pub passed: bool,
    /// The figures that show it.
    pub evidence: String,
}

/// The Land Speed Record metric of a run and its class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordMetric {
    /// bytes_received × 8 / the receiver's duration.
    pub throughput_bps: f64,
    /// Bytes received after the warm-up.
    pub bytes: u64,
    /// The receiver's time, seconds.
    pub duration_s: f64,
    /// The path length counted, km.
    pub distance_km: f64,
    /// throughput × distance, bit·m/s.
    pub bit_meters_per_s: f64,
    /// The same in petabit·metres per second.
    pub petabit_meters_per_s: f64,
    /// "IPv4" or "IPv6".
    pub family: String,
    /// "single-stream" or "multiple-stream".
    pub streams_class: String,
    /// Streams per direction.
    pub streams: u32,
}

/// The metric of run `r` over `distance_km` (the counted, possibly capped, path length).
pub fn metric(r: &RunResult, distance_km: f64) -> RecordMetric {
    let bytes = r.summary.bytes_received;
    let duration_s = r.summary.duration_s;
    let throughput_bps = if duration_s > 0.0 {
        bytes as f64 * 8.0 / duration_s
    } else {
        0.0
    };
    let bm = bit_meters_per_s(throughput_bps, distance_km);
    let v6 = r.config.family.eq_ignore_ascii_case("ipv6");
    let streams = r.streams.len() as u32;
    RecordMetric {
        throughput_bps,
        bytes,
        duration_s,
        distance_km,
        bit_meters_per_s: bm,
        petabit_meters_per_s: bm / 1e15,
        family: if v6 { "IPv6" } else { "IPv4" }.into(),
        streams_class: if streams <= 1 {
            "single-stream"
        } else {
            "multiple-stream"
        }
        .into(),
        streams,
    }
}

/// Every rule, pass or fail, with the evidence from the result.
pub fn checks(r: &RunResult, m: &RecordMetric, rules: &Rules) -> Vec<Check> {
    let verdict = r.verdict();
    let mut c = vec![
        Check {
            rule: format!("minimum duration {} s", rules.min_duration_s),
            passed: m.duration_s >= rules.min_duration_s,
            evidence: if !r.config.spec.omit_s.is_zero() {
                format!(
                    "the receiver's time from the end of the {} s warm-up to the last byte: {:.3} s",
                    r.config.spec.omit_s.as_secs_f64(),
                    m.duration_s
                )
            } else {
                format!(
                    "the receiver's time from first to last byte: {:.3} s",
                    m.duration_s
                )
            },
        },
        Check {
            rule: if rules.min_bytes == 0 {
                "data moved (no minimum set)".into()
            } else {
                format!("minimum data {}", crate::units::Bytes(rules.min_bytes))
            },
            passed: m.bytes >= rules.min_bytes && m.bytes > 0,
            evidence: format!("{} bytes received", m.bytes),
        },
        Check {
            rule: "rule 6: every packet carries different data".into(),
            passed: r.payload.different_data_every_packet,
            evidence: r.payload.evidence.clone(),
        },
        Check {
            rule: "every byte arrived intact".into(),
            passed: r.payload.verified
                && r.payload.corrupt_blocks == 0
                && r.payload.bytes_verified == r.summary.bytes_received
                && r.summary.bytes_sent == r.summary.bytes_received,
            evidence: format!(
                "{} bytes sent, {} received, {} verified against the payload, {} corrupt blocks",
                r.summary.bytes_sent,
                r.summary.bytes_received,
                r.payload.bytes_verified,
                r.payload.corrupt_blocks
            ),
        },
        standard_tcp(r),
        Check {
            rule: "the result is trusted (complete, no failed stream, every byte accounted)".into(),
            passed: verdict.is_trusted(),
            evidence: verdict.to_string(),
        },
    ];
    if let Some(prev) = rules.previous_bit_meters_per_s {
        let need = prev * (1.0 + rules.improvement_pct / 100.0);
        c.push(Check {
            rule: format!("{}% better than the standing record", rules.improvement_pct),
            passed: m.bit_meters_per_s >= need,
            evidence: format!(
                "{:.4e} b·m/s against {:.4e} × {:.2} = {:.4e} b·m/s ({:+.1}%)",
                m.bit_meters_per_s,
                prev,
                1.0 + rules.improvement_pct / 100.0,
                need,
                (m.bit_meters_per_s / prev - 1.0) * 100.0
            ),
        });
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_metrics_exactly() {
        // 6.25 Gbit/s over 10,949 km (seed 000), 2.38 Gbit/s over 10,037 km (seed 001), 957 Mbit/s
        // over 5,626 km (seed 004).
        assert_eq!(bit_meters_per_s(6.25e9, 10_949.0), 68_431_250_000_000_000.0);
        assert_eq!(bit_meters_per_s(2.38e9, 10_037.0), 23_888_060_000_000_000.0);
        let m = bit_meters_per_s(957e6, 5_626.0);
        assert_eq!(m, 5_384_082_000_000_000.0);
        assert_eq!(format!("{:.2}", m / 1e15), "5.38");
    }
}
