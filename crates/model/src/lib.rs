//! Throughput models: what each bound on a TCP transfer predicts for a path (window / RTT, Mathis,
//! PFTK, the link's goodput, N streams) and which one binds; and RFC 6349's figures for a finished
//! transfer (ideal transfer time, Transfer Time Ratio, TCP Efficiency, Buffer Delay). Pure arithmetic,
//! so `landspeed model`, `run` and `report` all predict the same way and tests check it by hand.
//! [`tune`] is the host tuning advisor's reasoning on the same arithmetic. A crate of its own because
//! it answers a different question from `landspeed-core` (what a path allows, not what a test is).
#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod tune;

use serde::{Deserialize, Serialize};

/// Mathis et al.'s constant without delayed ACKs, √(3/2).
pub const MATHIS_C: f64 = 1.224_744_871_391_589;

/// Bytes of Ethernet framing per packet besides the IP packet: header 14, FCS 4, preamble 8, gap 12.
pub const ETHERNET_OVERHEAD: u32 = 38;
/// IPv4 + TCP headers without options, as RFC 6349 counts them (MTU − 40 = payload).
pub const TCPIP_HEADERS: u32 = 40;

/// A path and a transfer as the models see them (docs/metrics.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInput {
    /// The bottleneck's line rate, bit/s.
    pub rate_bps: Option<f64>,
    /// Round-trip time, seconds.
    pub rtt_s: f64,
    /// Packet loss probability (0..1).
    pub loss: Option<f64>,
    /// Maximum segment size, bytes.
    pub mss_bytes: u32,
    /// Window per stream (the smaller of send buffer and receive window), bytes.
    pub window_bytes: Option<u64>,
    /// Parallel streams.
    pub streams: u32,
    /// Retransmission timeout; default RTT + 200 ms (Linux: srtt + max(4 rttvar, 200 ms)).
    pub rto_s: Option<f64>,
    /// Packets acknowledged per ACK (PFTK's b): 2 with delayed ACKs.
    pub packets_per_ack: f64,
}

impl Default for ModelInput {
    fn default() -> Self {
        ModelInput {
            rate_bps: None,
            rtt_s: 0.0,
            loss: None,
            mss_bytes: 1448,
            window_bytes: None,
            streams: 1,
            rto_s: None,
            packets_per_ack: 2.0,
        }
    }
}

/// One bound on the transfer's rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// window, mathis, pftk or link.
    pub name: String,
    /// The rate of all streams together, bit/s.
    pub total_bps: f64,
    /// One stream's, where the bound is per stream.
    pub per_stream_bps: Option<f64>,
    /// The formula with the numbers put in.
    pub formula: String,
}

/// What the models predict for a path: every bound, the one that binds, and RFC 8337's targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The input the prediction was made from.
    pub input: ModelInput,
    /// Every bound the input allows, with its formula.
    pub bounds: Vec<Bound>,
    /// The lowest bound's name. Mathis and PFTK model the same limit (loss); PFTK, which accounts
    /// for timeouts, is the one compared when both are present.
    pub binding: Option<String>,
    /// The binding bound's rate, bit/s.
    pub predicted_bps: Option<f64>,
    /// Bandwidth-delay product of the line rate and RTT, bytes.
    pub bdp_bytes: Option<f64>,
    /// The window each stream needs to fill the link's goodput: goodput × RTT / 8 / streams, bytes.
    pub window_needed_per_stream_bytes: Option<f64>,
    /// RFC 8337: packets in flight the target rate needs, and packets to be delivered between losses.
    pub target_window_packets: Option<f64>,
    /// RFC 8337: packets the path must deliver between losses (3 × window²).
    pub target_run_length_packets: Option<f64>,
}

/// Why a path cannot be modelled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// An RTT that is not positive.
    #[error("the RTT must be positive, got {0} s")]
    Rtt(f64),
    /// A loss rate outside (0, 1).
    #[error("loss must be a probability in (0, 1), got {0}")]
    Loss(f64),
    /// No streams, or an MSS of 0.
    #[error("streams and MSS must be positive")]
    Zero,
}

/// TCP goodput of a link: payload per Ethernet frame, RFC 6349's (MTU − 40) / (MTU + 38) with
/// MTU = MSS + 40.
pub fn link_goodput_bps(rate_bps: f64, mss_bytes: u32) -> f64 {
    let mss = f64::from(mss_bytes);
    rate_bps * mss / (mss + f64::from(TCPIP_HEADERS + ETHERNET_OVERHEAD))
}

/// Window-limited throughput: window × 8 / RTT (RFC 6349: 16 KB at 5 ms is 25.6 Mbit/s).
pub fn window_limit_bps(window_bytes: f64, rtt_s: f64) -> f64 {
    window_bytes * 8.0 / rtt_s
}

/// Mathis et al.: MSS × 8 / RTT × C / √p.
pub fn mathis_bps(mss_bytes: u32, rtt_s: f64, loss: f64) -> f64 {
    f64::from(mss_bytes) * 8.0 / rtt_s * MATHIS_C / loss.sqrt()
}

/// Padhye, Firoiu, Towsley, Kurose: MSS / (RTT √(2bp/3) + RTO min(1, 3√(3bp/8)) p (1 + 32p²)), in bit/s.
pub fn pftk_bps(mss_bytes: u32, rtt_s: f64, loss: f64, rto_s: f64, b: f64) -> f64 {
    let p = loss;
    let denom = rtt_s * (2.0 * b * p / 3.0).sqrt()
        + rto_s * (3.0 * (3.0 * b * p / 8.0).sqrt()).min(1.0) * p * (1.0 + 32.0 * p * p);
    f64::from(mss_bytes) * 8.0 / denom
}

/// Every bound the input allows (window, Mathis, PFTK, the link), the one that binds, and RFC 8337's
/// targets when the line rate is known.
pub fn predict(input: &ModelInput) -> Result<Prediction, ModelError> {
    let i = input;
    check_input(i)?;
    let n = f64::from(i.streams);
    let mut bounds = Vec::new();
    if let Some(w) = i.window_bytes {
        bounds.push(window_bound(i, w));
    }
    if let Some(p) = i.loss {
        bounds.push(mathis_bound(i, p));
        bounds.push(pftk_bound(i, p));
    }
    if let Some(r) = i.rate_bps {
        bounds.push(Bound {
            name: "link".into(),
            total_bps: link_goodput_bps(r, i.mss_bytes),
            per_stream_bps: None,
            formula: format!(
                "{r:.0} bit/s × {} / ({} + 78): TCP payload per Ethernet frame",
                i.mss_bytes, i.mss_bytes
            ),
        });
    }
    let binding = bounds
        .iter()
        .filter(|b| !(b.name == "mathis" && bounds.iter().any(|o| o.name == "pftk")))
        .min_by(|a, b| a.total_bps.total_cmp(&b.total_bps));
    let goodput = i.rate_bps.map(|r| link_goodput_bps(r, i.mss_bytes));
    let target_window = goodput.map(|g| (g * i.rtt_s / 8.0 / f64::from(i.mss_bytes)).ceil());
    Ok(Prediction {
        input: i.clone(),
        binding: binding.map(|b| b.name.clone()),
        predicted_bps: binding.map(|b| b.total_bps),
        bdp_bytes: i.rate_bps.map(|r| r * i.rtt_s / 8.0),
        window_needed_per_stream_bytes: goodput.map(|g| g * i.rtt_s / 8.0 / n),
        target_window_packets: target_window,
        target_run_length_packets: target_window.map(|w| 3.0 * w * w),
        bounds,
    })
}

fn check_input(i: &ModelInput) -> Result<(), ModelError> {
    if !(i.rtt_s > 0.0 && i.rtt_s.is_finite()) {
        return Err(ModelError::Rtt(i.rtt_s));
    }
    if let Some(p) = i.loss {
        if !(p > 0.0 && p < 1.0) {
            return Err(ModelError::Loss(p));
        }
    }
    if i.streams == 0 || i.mss_bytes == 0 {
        return Err(ModelError::Zero);
    }
    Ok(())
}

/// Each stream's window `w` over the RTT.
fn window_bound(i: &ModelInput, w: u64) -> Bound {
    let one = window_limit_bps(w as f64, i.rtt_s);
    Bound {
        name: "window".into(),
        total_bps: f64::from(i.streams) * one,
        per_stream_bps: Some(one),
        formula: format!("{} × {w} B × 8 / {:.3} ms", i.streams, i.rtt_s * 1e3),
    }
}

/// Mathis et al. at loss `p`.
fn mathis_bound(i: &ModelInput, p: f64) -> Bound {
    let one = mathis_bps(i.mss_bytes, i.rtt_s, p);
    Bound {
        name: "mathis".into(),
        total_bps: f64::from(i.streams) * one,
        per_stream_bps: Some(one),
        formula: format!(
            "{} × {} B × 8 / {:.3} ms × 1.2247 / √{p:.4e}",
            i.streams,
            i.mss_bytes,
            i.rtt_s * 1e3
        ),
    }
}

/// PFTK at loss `p` (timeouts included), capped by the window when one is given.
fn pftk_bound(i: &ModelInput, p: f64) -> Bound {
    let rto = i.rto_s.unwrap_or(i.rtt_s + 0.2);
    let mut one = pftk_bps(i.mss_bytes, i.rtt_s, p, rto, i.packets_per_ack);
    let mut formula = format!(
        "{} × {} B × 8 / ({ms:.3} ms × √(2·{b}·p/3) + {rto_ms:.1} ms × min(1, 3√(3·{b}·p/8)) × p × (1 + 32p²)), p = {p:.4e}",
        i.streams,
        i.mss_bytes,
        ms = i.rtt_s * 1e3,
        b = i.packets_per_ack,
        rto_ms = rto * 1e3
    );
    if let Some(w) = i.window_bytes {
        let cap = window_limit_bps(w as f64, i.rtt_s);
        if cap < one {
            one = cap;
            formula.push_str(", capped at Wmax / RTT");
        }
    }
    Bound {
        name: "pftk".into(),
        total_bps: f64::from(i.streams) * one,
        per_stream_bps: Some(one),
        formula,
    }
}

/// RFC 6349's figures for one finished transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc6349 {
    /// Bytes over the maximum achievable TCP throughput (the link's goodput), s.
    pub ideal_transfer_time_s: Option<f64>,
    /// The transfer's time, s.
    pub actual_transfer_time_s: f64,
    /// Actual ÷ ideal.
    pub transfer_time_ratio: Option<f64>,
    /// (bytes sent − bytes retransmitted) ÷ bytes sent × 100.
    pub tcp_efficiency_pct: Option<f64>,
    /// (average RTT during the transfer − baseline RTT) ÷ baseline RTT × 100.
    pub buffer_delay_pct: Option<f64>,
}

/// What RFC 6349's figures are computed from: one finished transfer.
pub struct TransferFacts {
    /// Bytes delivered.
    pub bytes: u64,
    /// The transfer's time, seconds.
    pub duration_s: f64,
    /// The bottleneck's line rate, when known.
    pub rate_bps: Option<f64>,
    /// The MSS used, bytes.
    pub mss_bytes: u32,
    /// Bytes the senders sent, retransmissions included.
    pub bytes_sent: u64,
    /// Bytes retransmitted, when TCP_INFO said.
    pub bytes_retransmitted: Option<u64>,
    /// The idle RTT before the transfer, seconds.
    pub baseline_rtt_s: Option<f64>,
    /// The mean RTT during the transfer, seconds.
    pub loaded_avg_rtt_s: Option<f64>,
}

/// RFC 6349's transfer time ratio, TCP efficiency and buffer delay of a transfer (those its facts allow).
pub fn rfc6349(f: &TransferFacts) -> Rfc6349 {
    let ideal = f
        .rate_bps
        .filter(|r| *r > 0.0)
        .map(|r| f.bytes as f64 * 8.0 / link_goodput_bps(r, f.mss_bytes));
    Rfc6349 {
        ideal_transfer_time_s: ideal,
        actual_transfer_time_s: f.duration_s,
        transfer_time_ratio: ideal.filter(|i| *i > 0.0).map(|i| f.duration_s / i),
        tcp_efficiency_pct: f
            .bytes_retransmitted
            .filter(|_| f.bytes_sent > 0)
            .map(|r| (f.bytes_sent.saturating_sub(r)) as f64 / f.bytes_sent as f64 * 100.0),
        buffer_delay_pct: match (f.baseline_rtt_s, f.loaded_avg_rtt_s) {
            (Some(b), Some(l)) if b > 0.0 => Some((l - b) / b * 100.0),
            _ => None,
        },
    }
}

/// What a finished run tells the models: its RTT (the senders' mean smoothed RTT), loss (segments
/// retransmitted ÷ sent), window in effect (the smallest receive window a sender saw), streams and MSS;
/// and its RFC 6349 facts. `rate_bps` is the bottleneck if known (else the run's path capacity estimate).
/// None without TCP_INFO (UDP, iperf3's protocol).
pub fn from_run(
    r: &landspeed_core::result::RunResult,
    rate_bps: Option<f64>,
) -> Option<(ModelInput, TransferFacts)> {
    let tcp: Vec<_> = r.streams.iter().filter_map(|s| s.tcp.as_ref()).collect();
    if tcp.is_empty() {
        return None;
    }
    let n = tcp.len() as f64;
    let rtt_s = tcp.iter().map(|t| f64::from(t.rtt_avg_us)).sum::<f64>() / n / 1e6;
    if rtt_s <= 0.0 {
        return None;
    }
    let mss = ((tcp.iter().map(|t| f64::from(t.mss_bytes)).sum::<f64>() / n).round() as u32).max(1);
    let segs: u64 = tcp.iter().map(|t| t.segs_out).sum();
    let retr: u64 = tcp.iter().map(|t| t.retransmits).sum();
    let window = tcp.iter().map(|t| t.snd_wnd_bytes).filter(|w| *w > 0).min();
    let rate = rate_bps.or_else(|| r.path.as_ref()?.capacity.as_ref()?.estimate_bps);
    let input = ModelInput {
        rate_bps: rate,
        rtt_s,
        loss: (retr > 0 && segs > 0).then(|| retr as f64 / segs as f64),
        mss_bytes: mss,
        window_bytes: window,
        streams: tcp.len() as u32,
        ..ModelInput::default()
    };
    let facts = TransferFacts {
        bytes: r.summary.bytes_received,
        duration_s: r.summary.duration_s,
        rate_bps: rate,
        mss_bytes: mss,
        bytes_sent: r.summary.bytes_sent,
        bytes_retransmitted: Some(retr * u64::from(mss)),
        baseline_rtt_s: r.latency.as_ref().and_then(|l| l.idle.min_ms).map(|v| v / 1e3),
        loaded_avg_rtt_s: r.latency.as_ref().and_then(|l| l.loaded.avg_ms).map(|v| v / 1e3),
    };
    Some((input, facts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn rfc6349_worked_examples() {
        // §3.3.1: a 16 KB window over 5 ms is limited to 25.6 Mbit/s (KB = 1000 bytes there).
        assert!(close(window_limit_bps(16_000.0, 0.005), 25.6e6, 1e-12));
        // Maximum achievable TCP throughput: (MTU − 40) × 8 × frames per second, with 1538 bytes on
        // the wire per 1500-byte frame: 8,127 fps at 100 Mbit/s → 94.9 Mbit/s; 81,274 at 1 GbE and
        // 812,743 at 10 GbE.
        for (rate, fps, goodput) in [
            (1e8, 8127.0, 94.9e6),
            (1e9, 81_274.0, 949e6),
            (1e10, 812_743.0, 9.49e9),
        ] {
            assert!(close(rate / (1538.0 * 8.0), fps, 1e-4), "{rate}");
            assert!(close(link_goodput_bps(rate, 1460), goodput, 1e-3), "{rate}");
            assert!(close(link_goodput_bps(rate, 1460), 1460.0 * 8.0 * fps, 1e-4));
        }
        // BDP and the receive window it needs: 100 Mbit/s × 5 ms = 500,000 bits = 62,500 bytes.
        let p = predict(&ModelInput {
            rate_bps: Some(1e8),
            rtt_s: 0.005,
            mss_bytes: 1460,
            ..ModelInput::default()
        })
        .unwrap();
        assert!(close(p.bdp_bytes.unwrap(), 62_500.0, 1e-12));
    }

    #[test]
    fn mathis_and_pftk_by_hand() {
        // 1448-byte MSS, 100 ms, 0.01% loss: 1448 × 8 / 0.1 × 1.2247 / 0.01 = 14.19 Mbit/s.
        let m = mathis_bps(1448, 0.1, 1e-4);
        assert!(close(m, 1448.0 * 8.0 / 0.1 * 1.224_744_871 / 0.01, 1e-9));
        assert!(close(m, 14.187e6, 1e-3), "{m}");
        // PFTK, b = 2, RTO = 0.3 s: denominator 0.1 × √(4e-4/3) + 0.3 × min(1, 3√(7.5e-5)) × 1e-4 ×
        // (1 + 3.2e-7) = 1.1547e-3 + 0.3 × 0.025981 × 1e-4 = 1.155479e-3 → 10.025 Mbit/s.
        let q = pftk_bps(1448, 0.1, 1e-4, 0.3, 2.0);
        let denom =
            0.1 * (4e-4f64 / 3.0).sqrt() + 0.3 * (3.0 * 7.5e-5f64.sqrt()) * 1e-4 * (1.0 + 32.0 * 1e-8);
        assert!(close(q, 1448.0 * 8.0 / denom, 1e-12));
        assert!(close(q, 10.025e6, 1e-3), "{q}");
        // With a large loss rate the timeout term saturates at min(1, ·) = 1.
        // (b = 1, p = 0.5: 3√(3 · 0.5 / 8) = 1.30.)
        let big = pftk_bps(1448, 0.1, 0.5, 1.0, 1.0);
        let d = 0.1 * (1.0f64 / 3.0).sqrt() + 1.0 * 0.5 * (1.0 + 32.0 * 0.25);
        assert!(close(big, 1448.0 * 8.0 / d, 1e-12));
    }

    #[test]
    fn the_lowest_bound_binds() {
        // 1 Gbit/s, 100 ms, 4 streams of 4 MiB, 0.001% loss.
        let p = predict(&ModelInput {
            rate_bps: Some(1e9),
            rtt_s: 0.1,
            loss: Some(1e-5),
            window_bytes: Some(4 << 20),
            streams: 4,
            ..ModelInput::default()
        })
        .unwrap();
        let get = |n: &str| p.bounds.iter().find(|b| b.name == n).unwrap().total_bps;
        assert!(close(get("window"), 4.0 * 4194304.0 * 8.0 / 0.1, 1e-12));
        assert!(close(get("mathis"), 4.0 * mathis_bps(1448, 0.1, 1e-5), 1e-12));
        assert!(close(get("link"), 1e9 * 1448.0 / 1526.0, 1e-12));
        // window 1342 Mbit/s, link 949, PFTK 4 × 32.6 = 130 Mbit/s: loss binds.
        assert_eq!(p.binding.as_deref(), Some("pftk"));
        assert!(close(p.predicted_bps.unwrap(), get("pftk"), 0.0));
        // Without loss the link binds; with a small window, the window does.
        let mut i = p.input.clone();
        i.loss = None;
        assert_eq!(predict(&i).unwrap().binding.as_deref(), Some("link"));
        i.window_bytes = Some(64 << 10);
        assert_eq!(predict(&i).unwrap().binding.as_deref(), Some("window"));
        // Each stream needs goodput × RTT / 8 / 4 = 2.97 MB; RFC 8337's target window is 8,191 packets.
        let q = predict(&i).unwrap();
        assert!(close(
            q.window_needed_per_stream_bytes.unwrap(),
            1e9 * 1448.0 / 1526.0 * 0.1 / 8.0 / 4.0,
            1e-12
        ));
        assert_eq!(
            q.target_window_packets,
            Some((1e9 * 1448.0 / 1526.0 * 0.1 / 8.0 / 1448.0f64).ceil())
        );
        assert_eq!(q.target_run_length_packets, Some(3.0 * 8192.0 * 8192.0));
        assert!(predict(&ModelInput {
            rtt_s: 0.0,
            ..ModelInput::default()
        })
        .is_err());
        assert!(predict(&ModelInput {
            rtt_s: 0.1,
            loss: Some(1.5),
            ..ModelInput::default()
        })
        .is_err());
    }

    #[test]
    fn rfc6349_transfer_figures() {
        // 100 MB at 100 Mbit/s (goodput 94.93 Mbit/s with MSS 1460): ideal 8.427 s; 10 s actual → TTR
        // 1.187; 1% of the bytes retransmitted → 99% efficiency; 25 ms loaded over 20 ms → 25% delay.
        let r = rfc6349(&TransferFacts {
            bytes: 100_000_000,
            duration_s: 10.0,
            rate_bps: Some(1e8),
            mss_bytes: 1460,
            bytes_sent: 101_000_000,
            bytes_retransmitted: Some(1_010_000),
            baseline_rtt_s: Some(0.020),
            loaded_avg_rtt_s: Some(0.025),
        });
        let ideal = 8e8 / (1e8 * 1460.0 / 1538.0);
        assert!(close(r.ideal_transfer_time_s.unwrap(), ideal, 1e-12));
        assert!(close(ideal, 8.427, 1e-3));
        assert!(close(r.transfer_time_ratio.unwrap(), 10.0 / ideal, 1e-12));
        assert!(close(r.tcp_efficiency_pct.unwrap(), 99.0, 1e-12));
        assert!(close(r.buffer_delay_pct.unwrap(), 25.0, 1e-9));
    }
}
