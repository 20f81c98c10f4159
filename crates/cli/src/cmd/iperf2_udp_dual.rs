//! The `iperf` drop-in's `-u -d` and `-u -r` (iperf 2's UDP tests whose server sends its stream to
//! the client's listening port): `run --iperf2 -u --dualtest|--tradeoff` underneath, listening on
//! `-L` (iperf 2's default: the server's port), printed as iperf 2.1.8's client prints them: the
//! UDP listener's head and the client's, the client's stream's "connected" line and the server's
//! stream's when its first datagram comes (numbered 2, no reverse mark), each kind's column head
//! before its first line, each whole interval, and the totals (the client's with "Sent N
//! datagrams" and the server's report; the stream received with its jitter and lost/total; with
//! `-e` the listener's pid and read size, dated "connected" lines, the sender's writes and PPS and
//! the receiver's transit, PPS, Little's law and net power). With `-P N`, N streams each way,
//! numbered as iperf 2.1.8 numbers them (the client's 1..N, the server's N+1..2N) with its `[SUM]`
//! lines: in `-d` one of every stream both ways (each interval, and at the end with `[SUM-2N]
//! Sent`), in `-r` each part's own (the received part's with its lost/total).

use super::iperf2::refuse;
use super::iperf2_dual::DualTest;
use super::iperf2_out as out;
use anyhow::Result;
use landspeed_core::config::{Direction, Flow};
use landspeed_core::result::{IntervalResult, RunResult};
use landspeed_iperf2::Dual as Mode;
use landspeed_net::ClientEvent;
use landspeed_report::iperf2_dual_text::{self as text, Dual};
use landspeed_report::iperf2_text::{self, Ends, Iperf2Style};

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
        out::head(&text::listener_head_udp((listen_port, port), read));
        let buffer = super::iperf2::client_head(&opts, false, true);
        out::head(&iperf2_text::head_udp(host, port, (len, rate), None, &buffer));
    }
    let interrupt = crate::common::client::interrupt_flag()?;
    let mut live = Live::new(style, (opts.spec.length_bytes, opts.spec.streams), mode);
    match landspeed_net::run_iperf2_client(&opts, &interrupt, &mut |ev| live.event(ev)) {
        Ok(r) => {
            out::lines(&live.end(&r, mode));
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
    /// Streams each way (`-P`), and `-d` or `-r`.
    n: u32,
    mode: Mode,
    /// The client's streams' ends, and the server's streams' (once their first datagrams came).
    forward: Vec<Ends>,
    back: Vec<Ends>,
    /// `-d -P`: each interval's bytes of the client's streams, by the interval's number, until
    /// the received streams' interval of the same number comes (the `[SUM]` of both ways).
    sent_bytes: std::collections::HashMap<u32, u64>,
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
    fn new(style: Iperf2Style, (length_bytes, n): (u64, u32), mode: Mode) -> Live {
        Live {
            style,
            length_bytes,
            n: n.max(1),
            mode,
            forward: vec![],
            back: vec![],
            sent_bytes: std::collections::HashMap::new(),
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
            forward: self.forward.clone(),
            back: self.back.clone(),
            n: self.n,
            first_back_id: if self.second { 0 } else { self.n },
        }
    }

    fn event(&mut self, ev: ClientEvent) {
        let text = match ev {
            ClientEvent::Connected { local, remote } if self.forward.is_empty() => {
                self.forward = vec![Ends::between(&(local, remote))];
                return;
            }
            ClientEvent::StreamsConnected { connections, .. } if !self.second => {
                self.forward = connections.iter().map(Ends::between).collect();
                return;
            }
            ClientEvent::Started { .. } => self.started(),
            ClientEvent::BackConnected { connections, .. } => self.connected_back(&connections),
            ClientEvent::Interval { flow, interval } => self.interval(flow, &interval),
            ClientEvent::Part { result } => {
                self.second = true;
                self.first_ok = result.streams.iter().all(|s| s.errors.is_empty());
                self.sent_totals(&result)
            }
            _ => return,
        };
        out::lines(&text);
    }

    /// The "connected" lines of the server's streams not yet told (each event names those that
    /// came since the last, or all so far).
    fn connected_back(&mut self, connections: &[(std::net::SocketAddr, std::net::SocketAddr)]) -> String {
        let before = self.back.len();
        for c in connections.iter().map(Ends::between) {
            if !self
                .back
                .iter()
                .any(|b| b.local == c.local && b.remote == c.remote)
            {
                self.back.push(c);
            }
        }
        let when = self.style.enhanced.then(now_unix_s);
        match self.style.csv {
            true => String::new(),
            false => (text::connected_back(&self.dual(), when).lines())
                .skip(before)
                .map(|l| l.to_string() + "\n")
                .collect(),
        }
    }

    /// The client's stream's "connected" line as its part starts (nothing as the server's starts:
    /// its line comes with its first datagram).
    fn started(&mut self) -> String {
        self.started_unix_s = now_unix_s();
        let when = self.style.enhanced.then_some(self.started_unix_s);
        match self.second || self.style.csv {
            false => iperf2_text::connected_each(&self.forward, Direction::Forward, when),
            true => String::new(),
        }
    }

    /// A whole interval's lines, its kind's column head first the first time; with `-P` the
    /// `[SUM]` lines iperf 2 prints.
    fn interval(&mut self, flow: Flow, interval: &IntervalResult) -> String {
        let Some(nominal) = self.style.interval_s else {
            return String::new();
        };
        if interval.end_s - interval.start_s < 0.9 * nominal {
            return String::new();
        }
        let stamp = self.started_unix_s + interval.end_s;
        let several = self.n > 1 && !self.style.csv;
        if flow == Flow::ServerToClient {
            let lines =
                self.received_head() + &text::interval_udp_back(interval, &self.dual(), &self.style, stamp);
            return lines + &self.received_sum(interval, several);
        }
        let Some(ends) = self.forward.first().cloned() else {
            return String::new();
        };
        let at = (&ends, stamp, self.length_bytes);
        let lines = match (several, self.mode) {
            (true, Mode::Simultaneous) => {
                let bytes = interval.streams.iter().map(|s| s.bytes).sum();
                self.sent_bytes.insert(interval.index, bytes);
                iperf2_text::interval_udp_streams(interval, &self.style, at)
            }
            _ => iperf2_text::interval_udp(interval, &self.style, at),
        };
        self.sent_head() + &lines
    }

    /// After the received streams' lines of an interval with `-P`: in `-r` their `[SUM]`, in `-d`
    /// the `[SUM]` of every stream both ways (once the client's of the same interval are known).
    fn received_sum(&mut self, interval: &IntervalResult, several: bool) -> String {
        if !several {
            return String::new();
        }
        if self.mode == Mode::Tradeoff {
            return text::interval_udp_back_sum(interval, &self.style);
        }
        let received: u64 = interval.streams.iter().map(|s| s.bytes).sum();
        match self.sent_bytes.remove(&interval.index) {
            Some(sent) => format!(
                "[SUM] {}\n",
                iperf2_text::columns(interval.start_s, interval.end_s, sent + received, &self.style)
            ),
            None => String::new(),
        }
    }

    /// The client's stream's totals and the server's report of it.
    fn sent_totals(&mut self, r: &RunResult) -> String {
        self.sent_head() + &iperf2_text::totals_udp(&iperf2_text::one_way(r, false), &self.style)
    }

    /// The last lines: the stream received, and with `-d` the client's own (in CSV the client's
    /// first, as iperf 2.1.8 writes them).
    fn end(&mut self, r: &RunResult, mode: Mode) -> String {
        let several = self.n > 1 && !self.style.csv;
        let mut received = self.received_head() + &text::total_udp_back(r, &self.dual(), &self.style);
        if several && mode == Mode::Tradeoff {
            received += &text::total_udp_back_sum(r, &self.style);
        }
        match (mode, self.style.csv) {
            (Mode::Tradeoff, _) => received,
            (Mode::Simultaneous, false) if several => {
                let sent = iperf2_text::one_way(r, false);
                received
                    + &self.sent_head()
                    + &iperf2_text::totals_udp_dual(&sent, text::received_udp(r), &self.style)
            }
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
