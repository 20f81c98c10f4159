//! The `iperf` drop-in's `-u -d` and `-u -r` (iperf 2's UDP tests whose server sends its stream to
//! the client's listening port): `run --iperf2 -u --dualtest|--tradeoff` underneath, listening on
//! `-L` (iperf 2's default: the server's port), printed as iperf 2.1.8's client prints them: the
//! UDP listener's head and the client's, the client's stream's "connected" line and the server's
//! stream's when its first datagram comes (numbered 2, no reverse mark), each kind's column head
//! before its first line, each whole interval, and the totals (the client's with "Sent N
//! datagrams" and the server's report; the stream received with its jitter and lost/total; with
//! `-e` the listener's pid and read size, dated "connected" lines, the sender's writes and PPS and
//! the receiver's transit, PPS, Little's law and net power). One stream each way, as `run` takes it.

use super::iperf2::refuse;
use super::iperf2_dual::DualTest;
use anyhow::Result;
use landspeed_core::config::{Direction, Flow};
use landspeed_core::result::{IntervalResult, RunResult};
use landspeed_iperf2::Dual as Mode;
use landspeed_net::ClientEvent;
use landspeed_report::iperf2_dual_text::{self as text, Dual};
use landspeed_report::iperf2_text::{self, Ends, Iperf2Style};
use std::io::Write;

/// The client of `-u -d` or `-u -r` (`test`, built by [`DualTest::new`]): one test, printed as
/// iperf 2 prints it.
pub(crate) fn client(host: &str, test: DualTest) -> Result<bool> {
    let DualTest {
        opts,
        mode,
        ports: (listen_port, port),
        style,
    } = test;
    if !style.csv {
        let (len, rate) = (opts.spec.length_bytes, opts.spec.udp_stream_rate_bps());
        let read = style.enhanced.then_some(len);
        print!("{}", text::listener_head_udp((listen_port, port), read));
        let buffer = super::iperf2::client_head(&opts, false, true);
        print!(
            "{}",
            iperf2_text::head_udp(host, port, (len, rate), None, &buffer)
        );
    }
    let interrupt = crate::common::client::interrupt_flag()?;
    let mut live = Live::new(style, opts.spec.length_bytes);
    match landspeed_net::run_iperf2_client(&opts, &interrupt, &mut |ev| live.event(ev)) {
        Ok(r) => {
            print!("{}", live.end(&r, mode));
            let ok = |r: &RunResult| r.streams.iter().all(|s| s.errors.is_empty());
            Ok(ok(&r) && live.first_ok)
        }
        Err(e) => refuse(&e.to_string()),
    }
}

/// The lines as the test goes.
struct Live {
    style: Iperf2Style,
    length_bytes: u64,
    /// The client's stream's ends, and the server's stream's (once its first datagram came).
    forward: Option<Ends>,
    back: Option<Ends>,
    /// In `-r`, whether the client's part is over.
    second: bool,
    /// Whether each kind's column head is printed: the client's stream's, the received one's.
    sent_head: bool,
    received_head: bool,
    started_unix_s: f64,
    /// In `-r`, whether the client's part ended with no error.
    first_ok: bool,
}

impl Live {
    fn new(style: Iperf2Style, length_bytes: u64) -> Live {
        Live {
            style,
            length_bytes,
            forward: None,
            back: None,
            second: false,
            sent_head: false,
            received_head: false,
            started_unix_s: 0.0,
            first_ok: true,
        }
    }

    /// The streams as iperf 2 numbers them: the client's 1, the server's 2.
    fn dual(&self) -> Dual {
        Dual {
            forward: self.forward.iter().cloned().collect(),
            back: self.back.iter().cloned().collect(),
            n: 1,
            first_back_id: if self.second { 0 } else { 1 },
        }
    }

    fn event(&mut self, ev: ClientEvent) {
        let text = match ev {
            ClientEvent::Connected { local, remote } if self.forward.is_none() => {
                self.forward = Some(Ends::between(&(local, remote)));
                return;
            }
            ClientEvent::Started { .. } => self.started(),
            ClientEvent::BackConnected { connections } => {
                self.back = connections.first().map(Ends::between);
                let when = self.style.enhanced.then(now_unix_s);
                match self.style.csv {
                    true => String::new(),
                    false => text::connected_back(&self.dual(), when),
                }
            }
            ClientEvent::Interval { flow, interval } => self.interval(flow, &interval),
            ClientEvent::Part { result } => {
                self.second = true;
                self.first_ok = result.streams.iter().all(|s| s.errors.is_empty());
                self.sent_totals(&result)
            }
            _ => return,
        };
        print!("{text}");
        let _ = std::io::stdout().flush();
    }

    /// The client's stream's "connected" line as its part starts (nothing as the server's starts:
    /// its line comes with its first datagram).
    fn started(&mut self) -> String {
        self.started_unix_s = now_unix_s();
        let when = self.style.enhanced.then_some(self.started_unix_s);
        match (&self.forward, self.second || self.style.csv) {
            (Some(ends), false) => {
                iperf2_text::connected_each(std::slice::from_ref(ends), Direction::Forward, when)
            }
            _ => String::new(),
        }
    }

    /// A whole interval's line, its kind's column head first the first time.
    fn interval(&mut self, flow: Flow, interval: &IntervalResult) -> String {
        let Some(nominal) = self.style.interval_s else {
            return String::new();
        };
        if interval.end_s - interval.start_s < 0.9 * nominal {
            return String::new();
        }
        let stamp = self.started_unix_s + interval.end_s;
        if flow == Flow::ServerToClient {
            return self.received_head()
                + &text::interval_udp_back(interval, &self.dual(), &self.style, stamp);
        }
        let Some(ends) = self.forward.clone() else {
            return String::new();
        };
        let at = (&ends, stamp, self.length_bytes);
        self.sent_head() + &iperf2_text::interval_udp(interval, &self.style, at)
    }

    /// The client's stream's totals and the server's report of it.
    fn sent_totals(&mut self, r: &RunResult) -> String {
        self.sent_head() + &iperf2_text::totals_udp(&iperf2_text::one_way(r, false), &self.style)
    }

    /// The last lines: the stream received, and with `-d` the client's own (in CSV the client's
    /// first, as iperf 2.1.8 writes them).
    fn end(&mut self, r: &RunResult, mode: Mode) -> String {
        let received = self.received_head() + &text::total_udp_back(r, &self.dual(), &self.style);
        match (mode, self.style.csv) {
            (Mode::Tradeoff, _) => received,
            (Mode::Simultaneous, false) => received + &self.sent_totals(r),
            (Mode::Simultaneous, true) => self.sent_totals(r) + &received,
        }
    }

    fn sent_head(&mut self) -> String {
        match self.style.csv || std::mem::replace(&mut self.sent_head, true) {
            true => String::new(),
            false => iperf2_text::column_head_udp(&self.style, false).to_string(),
        }
    }

    fn received_head(&mut self) -> String {
        match self.style.csv || std::mem::replace(&mut self.received_head, true) {
            true => String::new(),
            false => iperf2_text::column_head_udp_received(&self.style).to_string(),
        }
    }
}

/// Now, Unix seconds.
fn now_unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
