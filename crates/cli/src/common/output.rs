//! Chooses how a test is shown: live text lines and the text report, one JSON document, or JSON Lines
//! events. The measurement code calls back with events; this turns each into the chosen format.

use landspeed_core::config::{Direction, TestSpec};
use landspeed_core::result::RunResult;
use landspeed_net::ClientEvent;
use landspeed_report::{interval_header, interval_line, JsonEvent};
use std::io::Write;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    JsonStream,
}

pub struct Output {
    pub format: Format,
    pub per_stream: bool,
    /// Live lines every this many samples (None: no live lines).
    pub every: Option<u32>,
    pub host: String,
    pub port: u16,
    pub spec: TestSpec,
    header_done: bool,
    /// Warnings already printed on stderr (at the start): the end prints only the others, so each
    /// appears once there and once in the report.
    warned: Vec<String>,
    /// Whether warnings go to stderr as well as into the report: not when stderr is the very file
    /// stdout is (one terminal, or `2>&1`), where the report already shows each one.
    warn_on_stderr: bool,
    /// The results of a test's finished parts (iperf 2's `-r`), shown as each finished; the
    /// caller saves them with the last.
    pub parts: Vec<RunResult>,
}

use crate::common::sys::stderr_is_stdout;

impl Output {
    pub fn new(
        format: Format,
        per_stream: bool,
        interval: Duration,
        host: String,
        port: u16,
        spec: TestSpec,
    ) -> Self {
        let every = if interval.is_zero() { None } else { Some(1) };
        Output {
            format,
            per_stream,
            every,
            host,
            port,
            spec,
            header_done: false,
            warned: Vec::new(),
            warn_on_stderr: !stderr_is_stdout(),
            parts: Vec::new(),
        }
    }

    fn out(&self, line: &str) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    }

    pub fn event(&mut self, ev: ClientEvent) {
        match (self.format, ev) {
            // The connections themselves are in the result's streams.
            (_, ClientEvent::BackConnected { .. } | ClientEvent::StreamsConnected { .. }) => {}
            (_, ClientEvent::Part { result }) => {
                let mut r = *result;
                landspeed_core::assemble::judge_with_path(&mut r);
                self.result(&r);
                self.parts.push(r);
                self.header_done = false;
            }
            (Format::Json, _) => {}
            (Format::Text, ClientEvent::Connected { local, remote }) => {
                self.out(&format!(
                    "Connecting to {} port {} from {local} to {remote}",
                    self.host, self.port
                ));
            }
            (Format::Text, ClientEvent::Started { warnings, .. }) => {
                for w in warnings.into_iter().filter(|_| self.warn_on_stderr) {
                    errln!("landspeed: warning: {w}");
                    self.warned.push(w);
                }
            }
            (Format::Text, ClientEvent::Interval { flow, interval }) => {
                if self.every.is_none() {
                    return;
                }
                let bidir = self.spec.direction == Direction::Bidir;
                if !self.header_done {
                    self.header_done = true;
                    self.out(&interval_header(bidir));
                }
                let nominal = self.spec.interval_s.as_secs_f64();
                for l in interval_line(flow, &interval, self.per_stream, bidir, nominal) {
                    self.out(&l);
                }
            }
            (Format::JsonStream, ClientEvent::Connected { local, remote }) => {
                let ev = JsonEvent::Start {
                    schema: landspeed_report::json::STREAM_SCHEMA,
                    host: &self.host,
                    port: self.port,
                    local: local.to_string(),
                    remote: remote.to_string(),
                    config: &self.spec,
                };
                self.out(&ev.line());
            }
            (Format::JsonStream, ClientEvent::Interval { flow, interval }) => {
                self.out(
                    &JsonEvent::Interval {
                        flow,
                        interval: &interval,
                    }
                    .line(),
                );
            }
            (Format::JsonStream, ClientEvent::Started { .. }) => {}
            (
                format,
                ClientEvent::Transactions {
                    interval, connection, ..
                },
            ) => self.transactions(format, &interval, connection),
        }
    }

    /// A transaction test's interval: the test's (with several connections each one's come too,
    /// and are not printed: the lines are the test's).
    fn transactions(
        &mut self,
        format: Format,
        interval: &landspeed_core::transactions::TransactionInterval,
        connection: Option<u32>,
    ) {
        match (format, connection) {
            (_, Some(_)) | (Format::Json, _) => {}
            (Format::Text, None) => {
                if self.every.is_none() {
                    return;
                }
                if !self.header_done {
                    self.header_done = true;
                    self.out(&landspeed_report::transactions_text::interval_header());
                }
                self.out(&landspeed_report::transactions_text::interval_line(interval));
            }
            (Format::JsonStream, None) => {
                self.out(&JsonEvent::Transactions { interval }.line());
            }
        }
    }

    pub fn result(&self, r: &RunResult) {
        match self.format {
            Format::Text => {
                self.out(&landspeed_report::render(r));
                // The start's warnings are this end's own words; the result names the end.
                let said = |w: &String| {
                    let core = ["client: ", "both ends: "]
                        .iter()
                        .find_map(|p| w.strip_prefix(p))
                        .unwrap_or(w);
                    self.warned.iter().any(|x| x == core)
                };
                for w in r.warnings.iter().filter(|w| self.warn_on_stderr && !said(w)) {
                    errln!("landspeed: warning: {w}");
                }
            }
            Format::Json => self.out(&landspeed_report::to_json(r)),
            Format::JsonStream => self.out(&JsonEvent::End { result: r }.line()),
        }
    }

    /// A remark on how the test runs (text output only; JSON results carry it in their config).
    pub fn note(&self, message: &str) {
        if self.format == Format::Text {
            errln!("landspeed: note: {message}");
        }
    }

    pub fn error(&self, message: &str) {
        if self.format == Format::JsonStream {
            self.out(
                &JsonEvent::Error {
                    message: message.to_string(),
                }
                .line(),
            );
        }
    }
}
