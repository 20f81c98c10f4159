//! iperf3's `--json-stream`: one JSON object per line as the test goes, `start` when the streams are
//! up, `interval` as each one closes, then `end` (or `error`); landspeed's own facts come in one more
//! event, `landspeed`, just before `end`. The events come from the client's live events and a
//! provisional result of the test (`assemble::provisional`); the end from the finished result.

use landspeed_core::assemble::{provisional, RunContext};
use landspeed_core::config::{Direction, TestSpec};
use landspeed_core::result::{IntervalResult, RunResult};
use landspeed_net::ClientEvent;
use landspeed_report::iperf3_json::{self, Iperf3Meta};
use std::net::SocketAddr;

/// Turns the client's live events into `--json-stream` lines.
pub struct JsonStream {
    meta: Iperf3Meta,
    spec: TestSpec,
    host: String,
    port: u16,
    local: Option<(SocketAddr, SocketAddr)>,
    /// The test as it began; the intervals already written are added to it (their retransmissions
    /// count from one to the next).
    began: Option<RunResult>,
    /// With `--bidir`, one direction's half of an interval until the other's arrives.
    half: Option<IntervalResult>,
}

impl JsonStream {
    /// The stream of a test of `spec` against `host`:`port`.
    pub fn new(spec: &TestSpec, host: &str, port: u16, meta: Iperf3Meta) -> JsonStream {
        JsonStream {
            meta,
            spec: spec.clone(),
            host: host.to_string(),
            port,
            local: None,
            began: None,
            half: None,
        }
    }

    /// The lines an event gives (none, or one).
    pub fn on_event(&mut self, ev: ClientEvent) -> Vec<String> {
        match ev {
            ClientEvent::Connected { local, remote } => {
                self.local = Some((local, remote));
                vec![]
            }
            ClientEvent::Started { .. } => {
                let began = provisional(&self.spec, self.context());
                let line = iperf3_json::stream_event("start", iperf3_json::start(&began, &self.meta));
                self.began = Some(began);
                vec![line]
            }
            ClientEvent::Interval { interval, .. } => self.interval(interval).into_iter().collect(),
            // iperf3's command line runs no request/response test.
            ClientEvent::Transactions { .. }
            | ClientEvent::BackConnected { .. }
            | ClientEvent::StreamsConnected { .. }
            | ClientEvent::Part { .. } => vec![],
        }
    }

    fn context(&self) -> RunContext {
        let (local, remote) = self.local.map_or((String::new(), String::new()), |(l, r)| {
            (l.to_string(), r.to_string())
        });
        let v6 = self.local.is_some_and(|(l, _)| l.is_ipv6());
        RunContext {
            host: self.host.clone(),
            port: self.port,
            local_address: local,
            remote_address: remote,
            family: if v6 { "ipv6" } else { "ipv4" }.into(),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            protocol: "iperf3".into(),
            ..RunContext::default()
        }
    }

    /// An interval's line, once whole (both directions of a `--bidir` interval), and not the short
    /// tail iperf3 leaves out.
    fn interval(&mut self, part: IntervalResult) -> Option<String> {
        let whole = if self.spec.direction == Direction::Bidir {
            match self.half.take() {
                Some(mut first) if first.index == part.index => {
                    first.bytes += part.bytes;
                    first.throughput_bps += part.throughput_bps;
                    first.streams.extend(part.streams);
                    first.streams.sort_by_key(|s| s.id);
                    first
                }
                _ => {
                    self.half = Some(part);
                    return None;
                }
            }
        } else {
            part
        };
        let began = self.began.as_mut()?;
        if whole.is_tail(self.spec.interval_s.as_secs_f64()) {
            return None;
        }
        let line = iperf3_json::stream_event("interval", iperf3_json::interval(began, false, &whole));
        began.intervals.push(whole);
        Some(line)
    }

    /// The last lines of a test that ran: landspeed's facts, then iperf3's `end`.
    pub fn finished(&self, r: &RunResult) -> Vec<String> {
        let mut lines = vec![iperf3_json::stream_event("landspeed", iperf3_json::extra(r))];
        // iperf3 writes the server's output as its own event, just before `end`.
        if let Some((key, v)) = iperf3_json::server_output(r) {
            lines.push(iperf3_json::stream_event(key, v));
        }
        lines.push(iperf3_json::stream_event("end", iperf3_json::end(r, false)));
        lines
    }

    /// The last lines of a test that failed: iperf3's `error`, then an empty `end`.
    pub fn failed(error: &str) -> Vec<String> {
        vec![
            iperf3_json::stream_event("error", serde_json::json!(error)),
            iperf3_json::stream_event("end", serde_json::json!({})),
        ]
    }
}
