//! `run --latency`: echo probes to the server's UDP port, started before the test and kept up during it,
//! so the result shows the RTT of an idle path next to the RTT the transfer itself caused (the queue it
//! built), RFC 6349's Buffer Delay %, and the probes' RTT in each interval.

use landspeed_core::path::{LatencyReport, OneWayReport, RttSummary};
use landspeed_core::result::{ProbeRtt, RunResult};
use landspeed_path::echo::{self, Background, EchoParams, Probe};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How `run --latency` probes.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyOptions {
    /// Probes per second.
    pub probes_per_s: f64,
    /// Datagram size, header included.
    pub size: usize,
    /// Idle probes wanted before the transfer starts (waited for at most `idle_wait`).
    pub idle_probes: u32,
    /// The longest wait for the idle probes.
    pub idle_wait: Duration,
}

impl Default for LatencyOptions {
    fn default() -> Self {
        LatencyOptions {
            probes_per_s: 20.0,
            size: 64,
            idle_probes: 20,
            idle_wait: Duration::from_secs(3),
        }
    }
}

pub(crate) struct LatencyRun {
    bg: Background,
    opts: LatencyOptions,
    loaded_from: Option<Duration>,
    loaded_until: Option<Duration>,
}

impl LatencyRun {
    pub(crate) fn start(addr: SocketAddr, opts: &LatencyOptions) -> Result<LatencyRun, echo::EchoError> {
        let p = EchoParams {
            interval: Duration::from_secs_f64(1.0 / opts.probes_per_s.clamp(0.1, 1000.0)),
            size: opts.size,
            linger: Duration::from_millis(500),
        };
        Ok(LatencyRun {
            bg: Background::start(addr, p)?,
            opts: opts.clone(),
            loaded_from: None,
            loaded_until: None,
        })
    }

    /// Waits (bounded) until enough idle probes came back; false when none did (no echo service).
    pub(crate) fn wait_idle(&self) -> bool {
        let until = Instant::now() + self.opts.idle_wait;
        while self.bg.replies() < self.opts.idle_probes && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.bg.replies() > 0
    }

    /// The transfer starts now.
    pub(crate) fn loaded(&mut self) {
        self.loaded_from = Some(self.bg.started().elapsed());
    }

    /// The transfer ended now.
    pub(crate) fn unloaded(&mut self) {
        self.loaded_until = Some(self.bg.started().elapsed());
    }

    /// Stops probing and writes the report and the per-interval RTT into `r`.
    pub(crate) fn finish(self, r: &mut RunResult) {
        let from = self.loaded_from.unwrap_or(Duration::MAX);
        let until = self.loaded_until.unwrap_or(Duration::MAX);
        let wall0 = self.bg.started_wall_ns();
        let probes = self.bg.finish();
        let idle: Vec<&Probe> = probes.iter().filter(|p| p.sent_at < from).collect();
        let loaded: Vec<&Probe> = probes
            .iter()
            .filter(|p| p.sent_at >= from && p.sent_at < until)
            .collect();
        let summary =
            |v: &[&Probe]| RttSummary::from_samples(v.len() as u32, &echo::rtts_ms(v.iter().copied()));
        let mut report = LatencyReport::new(
            self.opts.probes_per_s,
            self.opts.size as u32,
            summary(&idle),
            summary(&loaded),
        );
        let stamped = |v: &[&Probe]| -> Vec<_> { v.iter().filter_map(|p| echo::stamps(p, wall0)).collect() };
        report.one_way = OneWayReport::new(&stamped(&idle), &stamped(&loaded));
        r.latency = Some(report);
        if from == Duration::MAX {
            return;
        }
        for iv in &mut r.intervals {
            let (a, b) = (from.as_secs_f64() + iv.start_s, from.as_secs_f64() + iv.end_s);
            let rtts = echo::rtts_ms(loaded.iter().copied().filter(|p| {
                let t = p.sent_at.as_secs_f64();
                t >= a && t < b
            }));
            let s = RttSummary::from_samples(rtts.len() as u32, &rtts);
            if let (Some(median_ms), Some(max_ms)) = (s.median_ms, s.max_ms) {
                iv.probe_rtt = Some(ProbeRtt {
                    probes: s.received,
                    median_ms,
                    max_ms,
                });
            }
        }
    }
}
