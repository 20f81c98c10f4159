//! Live interval lines, printed as each interval closes (iperf's familiar layout: id, interval, transfer,
//! bitrate), with the sum always and each stream with `--per-stream`.

use landspeed_core::config::Flow;
use landspeed_core::result::IntervalResult;
use landspeed_core::units::{BitRate, Bytes};

/// The header line of the live interval table (with a direction column for bidirectional tests).
pub fn interval_header(bidir: bool) -> String {
    let dir = if bidir { " Direction      " } else { "" };
    format!("[ ID]{dir} Interval           Transfer      Bitrate          Retr   RTT(ms)  Cwnd")
}

fn row(
    id: &str,
    flow: Flow,
    bidir: bool,
    iv: &IntervalResult,
    bytes: u64,
    bps: f64,
    extra: String,
) -> String {
    let dir = if bidir {
        format!(" {:<15}", flow.label())
    } else {
        String::new()
    };
    let omitted = if iv.omitted { "  (omitted)" } else { "" };
    format!(
        "[{id:>3}]{dir} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}{extra}{omitted}",
        iv.start_s,
        iv.end_s,
        Bytes(bytes).to_string(),
        BitRate(bps).to_string()
    )
}

/// The lines for one interval: per stream (if asked) and the sum.
pub fn interval_line(flow: Flow, iv: &IntervalResult, per_stream: bool, bidir: bool) -> Vec<String> {
    let mut out = vec![];
    if per_stream || iv.streams.len() == 1 {
        for s in &iv.streams {
            let extra = match (s.retransmits, s.rtt_us, s.cwnd_bytes) {
                (Some(r), Some(rtt), Some(c)) => {
                    format!("  {r:>5}  {:>7.3}  {}", rtt as f64 / 1000.0, Bytes(c))
                }
                _ => String::new(),
            };
            out.push(row(
                &s.id.to_string(),
                flow,
                bidir,
                iv,
                s.bytes,
                s.throughput_bps,
                extra,
            ));
        }
    }
    if iv.streams.len() > 1 {
        out.push(row(
            "SUM",
            flow,
            bidir,
            iv,
            iv.bytes,
            iv.throughput_bps,
            String::new(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::result::IntervalStream;

    #[test]
    fn sum_line_for_many_streams() {
        let s = |id| IntervalStream {
            id,
            bytes: 1 << 20,
            throughput_bps: 8e6,
            rtt_us: None,
            cwnd_bytes: None,
            retransmits: None,
        };
        let iv = IntervalResult {
            index: 0,
            start_s: 0.0,
            end_s: 1.0,
            bytes: 2 << 20,
            throughput_bps: 16.7e6,
            omitted: false,
            streams: vec![s(0), s(1)],
            probe_rtt: None,
        };
        let lines = interval_line(Flow::ClientToServer, &iv, false, false);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("[SUM]"), "{}", lines[0]);
        assert!(lines[0].contains("2.00 MiB"), "{}", lines[0]);
        assert_eq!(interval_line(Flow::ClientToServer, &iv, true, false).len(), 3);
    }
}
