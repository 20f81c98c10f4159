//! The text of an isochronous test's frames (`--isochronous`): what the sender sent, skipped and
//! slipped; what the receiver counted whole, lost, cut and late; and the frames' latency from the
//! moment each was due to the arrival of its last byte. Shared by `run`'s report and the server's
//! log lines, so the two say the same thing in the same words.

use landspeed_core::frames::FramesReport;

/// The lines, each indented under a `Frames` head.
pub fn lines(f: &FramesReport) -> Vec<String> {
    let mut out = vec![];
    let head = match f.sender.as_ref().and_then(|s| s.spec) {
        Some(spec) => format!("Frames: {spec} (a frame every {:.3} ms)", f.period_ms),
        None => format!(
            "Frames: {:.2} frames/s (a frame every {:.3} ms)",
            f.fps, f.period_ms
        ),
    };
    out.push(head);
    if let Some(s) = &f.sender {
        out.push(format!(
            "  sent      {} frames, {} bytes; {} skipped in {} late return(s) to the schedule",
            s.frames, s.bytes, s.skipped, s.slips
        ));
    }
    let counted = f.frames + f.skipped_by_sender + f.cut_at_end > 0;
    if counted || f.sender.is_none() {
        out.push(format!(
            "  received  {} whole, {} lost ({:.2}%), {} skipped by the sender, {} cut at the end; {} late (more than a period beyond the least latency)",
            f.complete,
            f.lost,
            if f.frames > 0 { f.lost as f64 * 100.0 / f.frames as f64 } else { 0.0 },
            f.skipped_by_sender,
            f.cut_at_end,
            f.late
        ));
        out.push(latency_line(f));
        if f.clock_behind > 0 {
            out.push(format!(
                "  WARNING: {} frame(s) arrived before they were due by the sender's clock: the clocks disagree and the latencies are not one-way delays",
                f.clock_behind
            ));
        }
    } else {
        out.push("  received  not reported: iperf 2's report carries no frame figures (the server's own output counts them)".into());
    }
    out
}

/// Least / p50 / p90 / p99 / most, from each frame's due time to its last byte.
fn latency_line(f: &FramesReport) -> String {
    let l = &f.latency;
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    format!(
        "  latency   min {} / p50 {} / p90 {} / p99 {} / max {} ms (due on the sender's clock to the last byte on the receiver's)",
        ms(l.min_ms),
        ms(l.p50_ms),
        ms(l.p90_ms),
        ms(l.p99_ms),
        ms(l.max_ms)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::frames::{FrameSpec, FramesSent};
    use landspeed_core::transactions::LatencySummary;

    #[test]
    fn the_sender_alone_says_the_receiver_is_not_reported() {
        let f = FramesReport {
            fps: 60.0,
            period_ms: 16.667,
            sender: Some(FramesSent {
                spec: Some(FrameSpec::DEFAULT),
                frames: 120,
                skipped: 2,
                slips: 1,
                bytes: 5_000_000,
                datagrams: 3_500,
            }),
            ..FramesReport::default()
        };
        let text = lines(&f).join("\n");
        assert!(text.contains("60 frames/s, mean 20.000 Mbit/s"), "{text}");
        assert!(
            text.contains("120 frames, 5000000 bytes; 2 skipped in 1 late"),
            "{text}"
        );
        assert!(text.contains("not reported"), "{text}");
    }

    #[test]
    fn the_receiver_counts_and_latency_are_said() {
        let f = FramesReport {
            fps: 60.0,
            period_ms: 16.667,
            frames: 100,
            complete: 98,
            lost: 2,
            late: 3,
            clock_behind: 1,
            latency: LatencySummary {
                min_ms: Some(0.5),
                p50_ms: Some(0.7),
                max_ms: Some(30.0),
                ..LatencySummary::default()
            },
            ..FramesReport::default()
        };
        let text = lines(&f).join("\n");
        assert!(text.contains("98 whole, 2 lost (2.00%)"), "{text}");
        assert!(text.contains("3 late"), "{text}");
        assert!(
            text.contains("min 0.500 / p50 0.700 / p90 - / p99 - / max 30.000 ms"),
            "{text}"
        );
        assert!(text.contains("clocks disagree"), "{text}");
    }
}
