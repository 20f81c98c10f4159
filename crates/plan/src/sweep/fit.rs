//! Throughput against window for one stream count. While the window limits TCP, throughput = streams ×
//! window / RTT: a straight line through the origin. The fit takes the smallest windows that stay on
//! one such line (every point within 15% of it), reports its slope and R², the RTT it implies
//! (8 × streams / slope, scaled by how much window the kernel really granted per byte requested), and where it meets the plateau (the best throughput seen): the window beyond
//! which a bigger one buys nothing. R² is the usual 1 − SS_res / SS_tot with SS_tot about the mean, so a
//! line through the origin that misses the points' trend scores low (it can go negative).

use serde::{Deserialize, Serialize};

/// Largest relative distance of a window-limited point from the line.
pub const ON_LINE: f64 = 0.15;

/// The line through the origin that throughput follows while the window limits (one stream count).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowFit {
    /// The stream count fitted.
    pub streams: u32,
    /// Bits per second per byte of window.
    pub slope_bps_per_byte: f64,
    /// The fit's coefficient of determination.
    pub r2: f64,
    /// Points (smallest windows first) on the line.
    pub points_used: u32,
    /// The largest window still on the line, bytes.
    pub window_limited_up_to_bytes: f64,
    /// The RTT the line implies: 8 × streams × window_scale / slope.
    pub implied_rtt_s: f64,
    /// 8 × streams / slope: the RTT if the requested window were the window in effect.
    #[serde(default)]
    pub implied_rtt_requested_s: f64,
    /// Window in effect (the receive window the senders saw) ÷ window requested, over the fitted cells;
    /// 1 when unknown. Linux grants about 1.2 × a requested socket buffer as window.
    #[serde(default = "one")]
    pub window_scale: f64,
    /// The RTT TCP itself measured in the fitted cells' runs (median of the senders' mean smoothed RTT),
    /// seconds: what `implied_rtt_s` should come close to while the window is the only limit.
    #[serde(default)]
    pub measured_rtt_s: Option<f64>,
    /// The highest median throughput of the stream count, bit/s.
    pub max_throughput_bps: f64,
    /// The window at which the line reaches `max_throughput_bps`.
    pub saturation_window_bytes: f64,
}

fn one() -> f64 {
    1.0
}

impl WindowFit {
    /// Applies the measured window-in-effect ratio to the implied RTT.
    pub fn with_window_scale(mut self, scale: f64) -> WindowFit {
        if scale.is_finite() && scale > 0.0 {
            self.window_scale = scale;
            self.implied_rtt_s = self.implied_rtt_requested_s * scale;
        }
        self
    }
}

fn fit_through_origin(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let sxx: f64 = pts.iter().map(|(x, _)| x * x).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = pts.iter().map(|(x, y)| x * y).sum::<f64>() / sxx;
    let mean = pts.iter().map(|(_, y)| y).sum::<f64>() / pts.len() as f64;
    let ss_res: f64 = pts.iter().map(|(x, y)| (y - slope * x).powi(2)).sum();
    let ss_tot: f64 = pts.iter().map(|(_, y)| (y - mean).powi(2)).sum();
    let r2 = if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 1.0 };
    Some((slope, r2))
}

/// Fits (window bytes, throughput bps) points of one stream count; None with fewer than two windows
/// on a line.
pub fn window_fit(streams: u32, points: &[(f64, f64)]) -> Option<WindowFit> {
    let mut pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y >= 0.0)
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let max_throughput_bps = pts.iter().map(|p| p.1).fold(0.0, f64::max);
    for k in (2..=pts.len()).rev() {
        let head = &pts[..k];
        let Some((slope, r2)) = fit_through_origin(head) else {
            continue;
        };
        if slope <= 0.0 {
            continue;
        }
        if head
            .iter()
            .all(|(x, y)| (y - slope * x).abs() <= ON_LINE * slope * x)
        {
            return Some(WindowFit {
                streams,
                slope_bps_per_byte: slope,
                r2,
                points_used: k as u32,
                window_limited_up_to_bytes: head[k - 1].0,
                implied_rtt_s: 8.0 * f64::from(streams) / slope,
                implied_rtt_requested_s: 8.0 * f64::from(streams) / slope,
                window_scale: 1.0,
                measured_rtt_s: None,
                max_throughput_bps,
                saturation_window_bytes: max_throughput_bps / slope,
            });
        }
    }
    None
}

/// A cell: window bytes, streams, its median throughput.
pub type Cell = (u64, u32, f64);

/// The best cell of a sweep direction, and the cheapest one close to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestCells {
    /// The cell with the highest median.
    pub best: Cell,
    /// The cell with the least total buffer (window × streams, then fewer streams) whose median is
    /// within 5% of the best.
    pub smallest_within_5pct: Cell,
}

/// The best cell and the smallest within 5% of it; None without cells.
pub fn best_cells(cells: &[Cell]) -> Option<BestCells> {
    let best = *cells
        .iter()
        .filter(|c| c.2.is_finite())
        .max_by(|a, b| a.2.total_cmp(&b.2))?;
    let smallest = *cells
        .iter()
        .filter(|c| c.2 >= 0.95 * best.2)
        .min_by_key(|c| (c.0.saturating_mul(u64::from(c.1)), c.1))?;
    Some(BestCells {
        best,
        smallest_within_5pct: smallest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_known_slope_and_its_rtt() {
        // 2 streams, RTT 50 ms: throughput = 2 × 8 × W / 0.05 (320 bit/s per byte) up to 100 Mbit/s.
        let rtt: f64 = 0.05;
        let pts: Vec<(f64, f64)> = [16e3f64, 32e3, 64e3, 128e3, 256e3, 512e3, 1024e3]
            .iter()
            .map(|&w| (w, (2.0 * 8.0 * w / rtt).min(1e8)))
            .collect();
        let f = window_fit(2, &pts).unwrap();
        assert_eq!(f.points_used, 5, "{f:?}");
        assert_eq!(f.window_limited_up_to_bytes, 256e3);
        assert!((f.slope_bps_per_byte - 320.0).abs() < 1e-9, "{f:?}");
        assert!((f.implied_rtt_s - rtt).abs() < 1e-12, "{f:?}");
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert_eq!(f.max_throughput_bps, 1e8);
        assert!((f.saturation_window_bytes - 312_500.0).abs() < 1e-6);
    }

    #[test]
    fn noise_lowers_r2_and_a_flat_line_has_no_fit() {
        let pts = [(1e4, 1.1e6), (2e4, 1.9e6), (4e4, 4.2e6), (8e4, 7.7e6)];
        let f = window_fit(1, &pts).unwrap();
        assert_eq!(f.points_used, 4);
        assert!(f.r2 > 0.98 && f.r2 < 1.0, "{}", f.r2);
        let flat = [(1e4, 5e6), (2e4, 5e6), (4e4, 5e6)];
        let f = window_fit(1, &flat);
        assert!(f.as_ref().is_none_or(|f| f.points_used == 2), "{f:?}");
        assert!(window_fit(1, &[(1e4, 1e6)]).is_none());
    }

    #[test]
    fn best_and_the_smallest_close_to_it() {
        let cells = [
            (65536, 1, 1.0e8),
            (65536, 8, 9.6e8),
            (1 << 20, 1, 9.7e8),
            (1 << 20, 8, 1.0e9),
            (1 << 18, 2, 9.55e8),
        ];
        let b = best_cells(&cells).unwrap();
        assert_eq!(b.best, (1 << 20, 8, 1.0e9));
        // 64 KiB × 8 = 512 KiB of buffer and 256 KiB × 2 = 512 KiB tie; fewer streams wins.
        assert_eq!(b.smallest_within_5pct, (1 << 18, 2, 9.55e8));
        assert!(best_cells(&[]).is_none());
    }
}
