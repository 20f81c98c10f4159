//! The `iperf` drop-in's `-d` and `-r` (iperf 2's tests whose server opens connections back):
//! `run --iperf2 --dualtest|--tradeoff` underneath, listening on `-L` (iperf 2's default: the
//! server's port, as its own client does; on the server's own host that port is taken, and the
//! client says so in one line), printed as iperf 2.1.8's client prints them
//! (report::iperf2_dual_text): the listener's head, then the client's, each connection's line,
//! each whole interval's lines (with `-d` both sides' together and one `[SUM]`), and the totals
//! (with `-r` the client's part's before the server's part starts).

use super::iperf2::{client_options, refuse, Opts, PORT};
use super::iperf2_out as out;
use anyhow::Result;
use landspeed_core::config::{Direction, Flow};
use landspeed_core::result::{IntervalResult, RunResult};
use landspeed_iperf2::Dual as Mode;
use landspeed_net::ClientEvent;
use landspeed_report::iperf2_dual_text::{self as text, Dual};
use landspeed_report::iperf2_text::{self, Ends, Iperf2Style};
use std::io::Write;

/// A `-d` or `-r` test as `run` takes it: the command line's options with the server's half asked
/// back to `-L` (iperf 2's default: the server's port) and, with `-d`, both ways; its mode and its
/// ports (the listener's, the server's), and iperf 2's style of output. Or why not.
pub(crate) struct DualTest {
    pub(crate) opts: landspeed_net::ClientOptions,
    pub(crate) mode: Mode,
    pub(crate) ports: (u16, u16),
    pub(crate) style: Iperf2Style,
}

impl DualTest {
    pub(crate) fn new(o: &Opts, host: &str) -> Result<DualTest, String> {
        let mut opts = client_options(o, host)?;
        let mode = if o.dualtest {
            Mode::Simultaneous
        } else {
            Mode::Tradeoff
        };
        if mode == Mode::Simultaneous {
            opts.spec = (opts.spec)
                .changed(|s| s.direction = Direction::Bidir)
                .map_err(|e| e.to_string())?;
        }
        let port = o.port.unwrap_or(PORT);
        let listen_port = o.listen_port.unwrap_or(port);
        // -e: the reads of what this end receives counted, as iperf 2's listener counts them.
        if o.enhanced {
            opts.read_bins = Some(opts.spec.length_bytes as usize);
        }
        opts.connect_back = Some(landspeed_net::ConnectBackAsk {
            dual: mode,
            listen_port,
        });
        let style = Iperf2Style {
            csv: o.style.is_some(),
            enhanced: o.enhanced,
            format: o.format.unwrap_or('a'),
            interval_s: o.interval.filter(|i| *i > 0.0),
        };
        Ok(DualTest {
            opts,
            mode,
            ports: (listen_port, port),
            style,
        })
    }
}

/// The client of `-d` or `-r` (`test`, built by [`DualTest::new`]): one test, printed as iperf 2
/// prints it.
pub(crate) fn client(host: &str, test: DualTest) -> Result<bool> {
    let DualTest {
        opts,
        mode,
        ports: (listen_port, port),
        style,
    } = test;
    if !style.csv {
        let window = opts.spec.window_bytes;
        let read = style.enhanced.then_some(opts.spec.length_bytes);
        out::head(&text::listener_head(
            (listen_port, port),
            (landspeed_net::granted_recv_buffer(window), window),
            read,
        ));
        let head = super::iperf2::client_head(&opts, style.enhanced, false);
        out::head(&iperf2_text::head(host, port, &head));
    }
    let interrupt = crate::common::client::interrupt_flag()?;
    let mut live = Live::new(style, mode, opts.spec.streams, opts.spec.length_bytes);
    match landspeed_net::run_iperf2_client(&opts, &interrupt, &mut |ev| live.event(ev)) {
        Ok(r) => {
            live.flush();
            let totals = text::totals(&r, &live.dual(), &live.style);
            out::lines(&live.reads_head(totals));
            out::lines(&text::connect_times(&live.dual(), &live.style));
            let ok = |r: &RunResult| r.streams.iter().all(|s| s.errors.is_empty());
            Ok(ok(&r) && live.parts_ok)
        }
        Err(e) => refuse(&e.to_string()),
    }
}

/// The lines as the test goes.
struct Live {
    style: Iperf2Style,
    mode: Mode,
    /// Streams a side.
    n: u32,
    length_bytes: u64,
    forward: Vec<Ends>,
    back: Vec<Ends>,
    /// In `-r`, whether the client's part is over.
    second: bool,
    /// With `-d`, one side's interval until the other side's of the same time comes.
    pending: Option<(IntervalResult, Flow)>,
    started_unix_s: f64,
    parts_ok: bool,
    /// With `-e`, iperf 2's reads head is still to come before the first line of a stream
    /// received.
    reads_head_due: bool,
}

impl Live {
    fn new(style: Iperf2Style, mode: Mode, n: u32, length_bytes: u64) -> Live {
        Live {
            mode,
            n,
            length_bytes,
            forward: vec![],
            back: vec![],
            second: false,
            pending: None,
            started_unix_s: 0.0,
            parts_ok: true,
            reads_head_due: style.enhanced && !style.csv,
            style,
        }
    }

    /// Where each stream stands now.
    fn dual(&self) -> Dual {
        Dual {
            forward: self.forward.clone(),
            back: self.back.clone(),
            n: self.n,
            first_back_id: if self.mode == Mode::Simultaneous {
                self.n
            } else {
                0
            },
        }
    }

    fn event(&mut self, ev: ClientEvent) {
        let text = match ev {
            ClientEvent::Connected { local, remote } => {
                if self.forward.is_empty() {
                    self.forward = vec![Ends::new(&local.to_string(), &remote.to_string())];
                }
                return;
            }
            ClientEvent::StreamsConnected { connections, facts } if !self.second => {
                self.forward = with_facts(&connections, facts);
                return;
            }
            ClientEvent::StreamsConnected { .. } => return,
            ClientEvent::BackConnected { connections, facts } => {
                self.back = with_facts(&connections, facts);
                return;
            }
            ClientEvent::Started { .. } => self.started(),
            ClientEvent::Interval { flow, interval } => self.interval(flow, interval),
            ClientEvent::Part { result } => {
                self.second = true;
                self.parts_ok = result.streams.iter().all(|s| s.errors.is_empty());
                self.take_pending() + &text::totals(&result, &self.dual(), &self.style)
            }
            ClientEvent::Transactions { .. } => return,
        };
        out::lines(&self.reads_head(text));
        let _ = std::io::stdout().flush();
    }

    /// `text` with iperf 2's reads head before its first line of a stream received, once (`-e`):
    /// a line numbered after the client's streams that is not a connection's.
    fn reads_head(&mut self, text: String) -> String {
        if !self.reads_head_due {
            return text;
        }
        let back = |l: &str| {
            let number = l.strip_prefix('[').and_then(|r| r.get(..3));
            let k = number.and_then(|n| n.trim().parse::<u32>().ok());
            k.is_some_and(|k| k > self.n) && !l.contains(" connected with ")
        };
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            if back(line) {
                self.reads_head_due = false;
                let head = landspeed_report::iperf2_server_text::READS_HEAD;
                return format!("{}{head}{}", &text[..at], &text[at..]);
            }
            at += line.len();
        }
        text
    }

    /// The connections' lines and the column head as a part starts.
    fn started(&mut self) -> String {
        self.started_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        if self.style.csv {
            return String::new();
        }
        let when = self.style.enhanced.then_some(self.started_unix_s);
        let mut t = String::new();
        if !self.second {
            t += &iperf2_text::connected_each(&self.dual().forward, Direction::Forward, when);
        }
        if self.mode == Mode::Simultaneous || self.second {
            t += &text::connected_back(&self.dual(), when);
        }
        // -r's second part with -e: only the reads head, before its first line.
        match self.second && self.style.enhanced {
            true => t,
            false => t + iperf2_text::column_head(&self.style),
        }
    }

    /// A whole interval's lines; with `-d`, once both sides' of that time have come.
    fn interval(&mut self, flow: Flow, interval: IntervalResult) -> String {
        let Some(nominal) = self.style.interval_s else {
            return String::new();
        };
        if interval.end_s - interval.start_s < 0.9 * nominal {
            return String::new();
        }
        if self.mode == Mode::Tradeoff {
            return self.lines(&[(&interval, flow)]);
        }
        match self.pending.take() {
            Some((other, f)) if f != flow && (other.end_s - interval.end_s).abs() < 1e-6 => {
                let mut parts = [(&other, f), (&interval, flow)];
                parts.sort_by_key(|(_, f)| *f == Flow::ServerToClient);
                self.lines(&parts)
            }
            Some((other, f)) => {
                let earlier = self.lines(&[(&other, f)]);
                self.pending = Some((interval, flow));
                earlier
            }
            None => {
                self.pending = Some((interval, flow));
                String::new()
            }
        }
    }

    fn lines(&self, parts: &[(&IntervalResult, Flow)]) -> String {
        let end = parts.first().map_or(0.0, |(i, _)| i.end_s);
        let at = (self.started_unix_s + end, self.length_bytes);
        text::interval(parts, &self.dual(), &self.style, at)
    }

    /// An interval still waiting for the other side's, printed alone.
    fn take_pending(&mut self) -> String {
        match self.pending.take() {
            Some((i, f)) => self.lines(&[(&i, f)]),
            None => String::new(),
        }
    }

    fn flush(&mut self) {
        out::lines(&self.take_pending());
    }
}

/// Each connection's ends with how it was made, where known (`facts` in the same order).
fn with_facts(
    connections: &[(std::net::SocketAddr, std::net::SocketAddr)],
    facts: Vec<landspeed_core::endpoint::ConnectFacts>,
) -> Vec<Ends> {
    let mut facts = facts.into_iter();
    (connections.iter())
        .map(|c| Ends {
            facts: facts.next(),
            ..Ends::between(c)
        })
        .collect()
}
