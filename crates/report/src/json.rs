//! JSON output: the whole result as one document (`--json`), and the event records of `--json-stream`
//! (JSON Lines: start, interval, end, error), each a complete JSON object on one line.

use landspeed_core::config::{Flow, TestSpec};
use landspeed_core::result::{IntervalResult, RunResult};
use serde::Serialize;

/// The result as a pretty-printed JSON document.
pub fn to_json(r: &RunResult) -> String {
    serde_json::to_string_pretty(r)
        .unwrap_or_else(|e| format!("{{\"error\":\"cannot serialize result: {e}\"}}"))
}

/// One `--json-stream` record.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum JsonEvent<'a> {
    /// The test is about to start.
    Start {
        /// The stream's schema name (`STREAM_SCHEMA`).
        schema: &'static str,
        /// The server, as the client named it.
        host: &'a str,
        /// The server's port.
        port: u16,
        /// This end's address.
        local: String,
        /// The server's address.
        remote: String,
        /// The test as validated.
        config: &'a TestSpec,
    },
    /// One interval of one direction.
    Interval {
        /// The direction.
        flow: Flow,
        /// Its figures.
        interval: &'a IntervalResult,
    },
    /// One interval of a request/response test.
    Transactions {
        /// Its transactions and their latency.
        interval: &'a landspeed_core::transactions::TransactionInterval,
    },
    /// The test ended: the whole result.
    End {
        /// The result, as `--json` prints it.
        result: &'a RunResult,
    },
    /// The test failed.
    Error {
        /// Why, in words.
        message: String,
    },
}

impl JsonEvent<'_> {
    /// The record as one line of JSON (no newline).
    pub fn line(&self) -> String {
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"message\":\"cannot serialize: {e}\"}}"))
    }
}

/// The schema name of `--json-stream` records (docs/result-schema.md).
pub const STREAM_SCHEMA: &str = "landspeed/events/1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_event_is_one_json_line() {
        let l = JsonEvent::Error {
            message: "boom\nbang".into(),
        }
        .line();
        assert!(!l.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["event"], "error");
    }
}
