//! The working load a request/response test can run beside (`run --under-load`): latency idle and
//! latency under load are different questions, and the second is the one a user of a busy path
//! asks. The load is a bulk test of its own on connections of its own, started before the first
//! transaction and stopped when the last one ends (iperf 2's `--bounceback-congest` does the same);
//! this module keeps what the report needs of it, computed from the load's own `RunResult`, so
//! the transactions' figures say what they were measured beside.

use crate::config::{Direction, Flow};
use crate::result::RunResult;
use serde::{Deserialize, Serialize};

/// What ran beside the transactions, and what it moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkingLoad {
    /// Which way the load's data went (`forward`: client to server, "up").
    pub direction: Direction,
    /// Its connections per direction.
    pub streams: u32,
    /// The protocol it spoke (`landspeed`, `iperf2`).
    pub protocol: String,
    /// Seconds it ran before the first transaction (`--load-settle`).
    pub settle_s: f64,
    /// What each direction of the load moved over the load's whole run (the settling included).
    pub flows: Vec<LoadFlow>,
    /// Blocks of the load's payload that failed their check (0 where nothing was checked).
    pub corrupt_blocks: u64,
    /// Bytes of the load checked against the payload's pattern (0 where the server is not
    /// landspeed's).
    pub bytes_verified: u64,
    /// Why the load ended before the transactions did, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_early: Option<String>,
}

/// One direction of the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFlow {
    /// Which way.
    pub flow: Flow,
    /// Bytes the receiving end took in.
    pub bytes_received: u64,
    /// Its rate over the load's run, bits per second.
    pub throughput_bps: f64,
    /// TCP retransmissions the sending end counted, where it reports them.
    pub retransmits: u64,
}

impl WorkingLoad {
    /// The load's figures from its own result: `settle_s` as it was given, `ended_early` set when
    /// the load stopped on its own before the transactions ended.
    pub fn from_result(
        direction: Direction,
        streams: u32,
        protocol: &str,
        settle_s: f64,
        load: &RunResult,
        ended_early: Option<String>,
    ) -> WorkingLoad {
        WorkingLoad {
            direction,
            streams,
            protocol: protocol.into(),
            settle_s,
            flows: load
                .directions
                .iter()
                .map(|d| LoadFlow {
                    flow: d.flow,
                    bytes_received: d.summary.bytes_received,
                    throughput_bps: d.summary.throughput_bps,
                    retransmits: d.summary.retransmits,
                })
                .collect(),
            corrupt_blocks: load.summary.corrupt_blocks,
            bytes_verified: load.summary.bytes_verified,
            ended_early,
        }
    }

    /// The load's rate one way, bits per second, when it ran that way.
    pub fn throughput_bps(&self, flow: Flow) -> Option<f64> {
        self.flows
            .iter()
            .find(|f| f.flow == flow)
            .map(|f| f.throughput_bps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::{provisional, RunContext};
    use crate::config::TestSpec;
    use crate::result::{DirectionResult, Summary};

    fn result(directions: Vec<DirectionResult>) -> RunResult {
        let mut r = provisional(&TestSpec::default(), RunContext::example("h", 0.0));
        r.directions = directions;
        r
    }

    fn direction(flow: Flow, bytes: u64, bps: f64, retransmits: u64) -> DirectionResult {
        DirectionResult {
            flow,
            summary: Summary {
                bytes_received: bytes,
                throughput_bps: bps,
                retransmits,
                ..Default::default()
            },
            intervals: vec![],
            stalls: vec![],
            limits: vec![],
        }
    }

    #[test]
    fn a_bidirectional_load_keeps_each_way_and_its_checks() {
        let mut r = result(vec![
            direction(Flow::ClientToServer, 1_000_000, 8e6, 3),
            direction(Flow::ServerToClient, 500_000, 4e6, 0),
        ]);
        r.summary.corrupt_blocks = 2;
        r.summary.bytes_verified = 1_500_000;
        let l = WorkingLoad::from_result(Direction::Bidir, 2, "landspeed", 1.0, &r, None);
        assert_eq!(l.throughput_bps(Flow::ClientToServer), Some(8e6));
        assert_eq!(l.throughput_bps(Flow::ServerToClient), Some(4e6));
        assert_eq!(l.flows[0].retransmits, 3);
        assert_eq!((l.corrupt_blocks, l.bytes_verified), (2, 1_500_000));
        let json = serde_json::to_string(&l).unwrap();
        assert!(!json.contains("ended_early"), "{json}");
        assert_eq!(serde_json::from_str::<WorkingLoad>(&json).unwrap(), l);
    }

    #[test]
    fn a_load_one_way_has_no_figure_the_other() {
        let r = result(vec![direction(Flow::ServerToClient, 10, 80.0, 0)]);
        let l = WorkingLoad::from_result(Direction::Reverse, 1, "iperf2", 0.5, &r, Some("reset".into()));
        assert_eq!(l.throughput_bps(Flow::ClientToServer), None);
        assert_eq!(l.ended_early.as_deref(), Some("reset"));
    }
}
