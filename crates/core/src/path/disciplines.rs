//! `landspeed latency --aqm LIST`, run inside an emulator's host: the same phases once per queue
//! discipline of that emulated path, so one command shows tail drop against FQ-CoDel against the dual
//! queue; each phase carries what the emulator itself counted at its bottleneck (its sojourn times
//! are the reference for the probes' figures). Pure: the runs are handed in.

use super::phases::{Load, PhasedLatency};
use serde::{Deserialize, Serialize};

/// The schema name and version of a `landspeed latency --aqm` result.
pub const DISCIPLINES_SCHEMA: &str = "landspeed-latency-aqm/1";

/// One discipline's run: its name as `wan change aqm=` takes it and the phases (each with what the
/// emulator counted while it ran: `PhaseSpan::emulator`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisciplineRun {
    /// The discipline, as given to `--aqm`.
    pub aqm: String,
    /// Its phases.
    pub result: PhasedLatency,
}

/// Every discipline's run on one emulated path, in the order they ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyByDiscipline {
    /// [`DISCIPLINES_SCHEMA`].
    pub schema: String,
    /// The emulator whose discipline was switched.
    pub emulator: String,
    /// The discipline it had before, put back afterwards.
    pub restored_aqm: Option<String>,
    /// Each discipline's run.
    pub runs: Vec<DisciplineRun>,
}

impl LatencyByDiscipline {
    /// The comparison of `runs` on emulator `emulator`.
    pub fn new(emulator: &str, restored_aqm: Option<String>, runs: Vec<DisciplineRun>) -> Self {
        LatencyByDiscipline {
            schema: DISCIPLINES_SCHEMA.into(),
            emulator: emulator.into(),
            restored_aqm,
            runs,
        }
    }

    /// Each discipline's median probe RTT in the first phase with `load`, ms (None where that phase
    /// is missing or had no answered probe), in run order.
    pub fn median_rtt_ms(&self, load: Load) -> Vec<(&str, Option<f64>)> {
        (self.runs.iter())
            .map(|r| {
                let phase = r.result.phases.iter().find(|p| p.span.load == load);
                (r.aqm.as_str(), phase.and_then(|p| p.rtt.median_ms))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::{PhaseSpan, ProbeSample};

    fn run(aqm: &str, loaded_rtt_ms: f64) -> DisciplineRun {
        let span = |load, start_s: f64| PhaseSpan {
            load,
            start_s,
            end_s: start_s + 1.0,
            download_bps: None,
            upload_bps: None,
            error: None,
            flows_rtt_ms: None,
            emulator: None,
        };
        let spans = vec![span(Load::Idle, 0.0), span(Load::Download, 1.0)];
        let probes: Vec<ProbeSample> = (0..20)
            .map(|i| ProbeSample {
                sent_s: f64::from(i) * 0.1,
                rtt_ms: Some(if i < 10 { 100.0 } else { loaded_rtt_ms }),
                stamps: None,
            })
            .collect();
        DisciplineRun {
            aqm: aqm.into(),
            result: PhasedLatency::new("h", 10.0, spans, &probes),
        }
    }

    #[test]
    fn each_disciplines_loaded_median_is_read_from_its_own_phases() {
        let c = LatencyByDiscipline::new(
            "lfn",
            Some("none".into()),
            vec![run("none", 500.0), run("fq-codel", 105.0)],
        );
        assert_eq!(
            c.median_rtt_ms(Load::Idle),
            vec![("none", Some(100.0)), ("fq-codel", Some(100.0))]
        );
        assert_eq!(
            c.median_rtt_ms(Load::Download),
            vec![("none", Some(500.0)), ("fq-codel", Some(105.0))]
        );
        assert_eq!(
            c.median_rtt_ms(Load::Both),
            vec![("none", None), ("fq-codel", None)]
        );
        let back: LatencyByDiscipline = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!((back.schema.as_str(), back.runs.len()), (DISCIPLINES_SCHEMA, 2));
        assert_eq!(
            back.median_rtt_ms(Load::Download),
            c.median_rtt_ms(Load::Download)
        );
    }
}
