//! Live interval lines, printed as each interval closes (iperf's familiar layout: id, interval, transfer,
//! bitrate), with the sum always and each stream with `--per-stream`. The last sample is taken after the
//! last byte, so the final interval can be a tail of a few milliseconds; its bytes over so short a time
//! would read as a burst rate the path never had, so a tail shorter than a tenth of the interval shows
//! its length instead of a rate.

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
    rate: &str,
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
        rate
    )
}

/// The rate column: the rate, or the tail's length when the interval is too short for one.
fn rate_text(iv: &IntervalResult, bps: f64, nominal_s: f64) -> String {
    if iv.is_tail(nominal_s) {
        format!("(tail {:.0} ms)", (iv.end_s - iv.start_s) * 1e3)
    } else {
        BitRate(bps).to_string()
    }
}

/// The lines for one interval: per stream (if asked) and the sum. `nominal_s` is the interval asked
/// for (`-i`).
pub fn interval_line(
    flow: Flow,
    iv: &IntervalResult,
    per_stream: bool,
    bidir: bool,
    nominal_s: f64,
) -> Vec<String> {
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
                &rate_text(iv, s.throughput_bps, nominal_s),
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
            &rate_text(iv, iv.throughput_bps, nominal_s),
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
            datagrams_sent: None,
            datagrams_lost: None,
            frames: None,
            jitter_ms: None,
            transit: None,
            reads: None,
            transit_bins: None,
            frames_heard: None,
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
        let lines = interval_line(Flow::ClientToServer, &iv, false, false, 1.0);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("[SUM]"), "{}", lines[0]);
        assert!(lines[0].contains("2.00 MiB"), "{}", lines[0]);
        assert_eq!(
            interval_line(Flow::ClientToServer, &iv, true, false, 1.0).len(),
            3
        );
        // The tail after the last boundary: its length, not a burst rate.
        let tail = IntervalResult {
            start_s: 5.0,
            end_s: 5.002,
            ..iv
        };
        let lines = interval_line(Flow::ClientToServer, &tail, false, false, 1.0);
        assert!(
            lines[0].contains("(tail 2 ms)") && !lines[0].contains("bit/s"),
            "{}",
            lines[0]
        );
    }
}
