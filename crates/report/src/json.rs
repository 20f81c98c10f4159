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
    Start {
        schema: &'static str,
        host: &'a str,
        port: u16,
        local: String,
        remote: String,
        config: &'a TestSpec,
    },
    Interval {
        flow: Flow,
        interval: &'a IntervalResult,
    },
    End {
        result: &'a RunResult,
    },
    Error {
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
