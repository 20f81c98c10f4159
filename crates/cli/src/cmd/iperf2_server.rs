//! `serve --iperf2-text`: the `iperf -s` drop-in's output. iperf 2's server prints each client's
//! test as it runs (its connections when they are up, each interval of its own `-i` as it closes,
//! the totals at the end), and scripts read those lines (a UDP test's loss and jitter are seen at
//! the receiving end). Here the server's events (`ServerEvent::Progress` as an iperf 2 test runs,
//! `Test` when it ends) are drawn by `report::iperf2_server_text`; what is kept between events is
//! the numbering (connections numbered across the server's life, as iperf 2's are) and how far each
//! running test has been printed. Tests of other protocols print nothing here.

use landspeed_core::result::RunResult;
use landspeed_net::ServerEvent;
use landspeed_report::iperf2_server_text as lines;
use landspeed_report::iperf2_text::Iperf2Style;
use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

/// The options the drop-in's `-s` passes (hidden: `iperf -s` is their way in).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Iperf2Lines {
    /// For `iperf -s`: iperf 2's server lines (its head, then each iperf 2 client's test as iperf
    /// 2.1.8's server prints it) instead of the log.
    #[arg(long, hide = true, conflicts_with_all = ["log_json", "iperf3_json", "iperf3_text"])]
    pub iperf2_text: bool,
    /// With --iperf2-text: iperf 2's CSV (`-y C`).
    #[arg(long, hide = true, requires = "iperf2_text")]
    pub iperf2_csv: bool,
    /// With --iperf2-text: the head names UDP (`iperf -s -u`).
    #[arg(long, hide = true, requires = "iperf2_text")]
    pub iperf2_udp: bool,
    /// iperf 2 clients' tests are sampled this often (iperf 2's server `-i`), and with
    /// --iperf2-text each interval is printed.
    #[arg(long, hide = true, value_name = "DUR", value_parser = crate::common::values::duration)]
    pub iperf2_interval: Option<Duration>,
    /// With --iperf2-text: `-e`'s lines (UDP: the receiver's transit, PPS, Little's law and net
    /// power; the sender's writes and PPS).
    #[arg(long, hide = true, requires = "iperf2_text")]
    pub iperf2_enhanced: bool,
    /// --iperf2-text's unit letter (`-f`: a, b, k, m, g, ...).
    #[arg(long, hide = true, default_value_t = 'a')]
    pub iperf2_format: char,
    /// With --iperf2-enhanced over TCP: the read buffer (iperf 2's server `-l`, 128 KiB by
    /// default), each read counted in an eighth of it (`Reads=Dist`).
    #[arg(long, hide = true, default_value_t = 128 * 1024, value_parser = clap::value_parser!(u64).range(8..=(64 << 20)))]
    pub iperf2_read_len: u64,
    /// iperf 2 clients' one-way transits binned (`iperf -s --histograms[=SPEC]`: iperf 2's
    /// WIDTH[u|m],BINS,LOWER,UPPER; empty for its default), their histogram printed under each
    /// line of a client that sends trip times.
    #[arg(long, hide = true, value_name = "SPEC", value_parser = bin_spec)]
    pub iperf2_histograms: Option<landspeed_core::transit_bins::BinSpec>,
    /// With --iperf2-text: the reports left out (`iperf -s -x LETTERS`). iperf 2.1.8's server
    /// honours `S` (its head) and `C` (each connection's line) and prints its data whatever `D`
    /// says; `V` and `M` name reports a server does not print.
    #[arg(long, hide = true, requires = "iperf2_text", value_parser = exclude)]
    pub iperf2_exclude: Option<super::iperf2_out::Exclude>,
    /// With --iperf2-text: IPv4 addresses printed as `*.*.*.N` (`iperf -s --hide-ips`).
    #[arg(long, hide = true, requires = "iperf2_text")]
    pub iperf2_hide_ips: bool,
    /// Each iperf 2 client's TCP connection's receive window clamped to BYTES (TCP_WINDOW_CLAMP;
    /// `iperf -s --tcp-rx-window-clamp`).
    #[arg(long, hide = true, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1..))]
    pub iperf2_rx_clamp: Option<u32>,
    /// The server's threads scheduled realtime and its memory locked (`iperf -s -z`).
    #[arg(long, hide = true)]
    pub iperf2_realtime: bool,
}

/// `--iperf2-exclude`'s value.
fn exclude(v: &str) -> Result<super::iperf2_out::Exclude, String> {
    super::iperf2_out::Exclude::parse(v)
}

/// `--iperf2-histograms`'s value.
fn bin_spec(
    v: &str,
) -> Result<landspeed_core::transit_bins::BinSpec, landspeed_core::transit_bins::BinSpecError> {
    landspeed_core::transit_bins::BinSpec::parse(v)
}

impl Iperf2Lines {
    /// The read buffer of the drop-in's TCP tests, whose reads are counted (its lines show them
    /// with `-e`, and for a `--trip-times` client, whose tests iperf 2 prints as with `-e`).
    pub fn reads(&self) -> Option<usize> {
        (self.iperf2_text && !self.iperf2_udp).then_some(self.iperf2_read_len as usize)
    }
}

/// A running test: the number of its first connection, and how many of its intervals were seen.
struct Running {
    first: u32,
    seen: usize,
}

/// The printer's memory between events.
struct Printer {
    style: Iperf2Style,
    udp: bool,
    /// TCP's read buffer (`-e`'s head).
    read_len: u64,
    /// The binning of clients' transits (`--histograms`), named in its head.
    histograms: Option<landspeed_core::transit_bins::BinSpec>,
    /// `-x`'s head (`S`) and connection lines (`C`) left out.
    exclude: super::iperf2_out::Exclude,
    /// The group the server joined (`-B GROUP`), named in its head.
    joined: Option<landspeed_net::multicast::GroupPlan>,
    /// The number the next test's first connection gets.
    next: u32,
    running: HashMap<(String, u64), Running>,
}

/// A test's key: the client's address and when it started (a live view's results and the final one
/// carry the same).
fn key(r: &RunResult) -> (String, u64) {
    (r.config.local_address.clone(), r.started_unix_s.to_bits())
}

fn is_iperf2(r: &RunResult) -> bool {
    r.protocol.starts_with("iperf2")
}

impl Printer {
    /// The text an event adds.
    fn on_event(&mut self, ev: ServerEvent) -> String {
        match ev {
            ServerEvent::Listening { .. } if self.style.csv || self.exclude.settings => String::new(),
            ServerEvent::Listening { addresses, .. } => {
                let port = addresses.first().map_or(0, |a| a.port());
                let head = lines::listening(
                    self.udp,
                    port,
                    landspeed_engine::sockopt::default_recv_buffer(self.udp),
                    // -e names iperf 2's read size: a UDP datagram of its default length, or the
                    // TCP read buffer.
                    self.style.enhanced.then_some(match self.udp {
                        true => landspeed_iperf2::spec::DEFAULT_UDP_LEN,
                        false => self.read_len,
                    }),
                );
                let head = match &self.joined {
                    Some(g) => lines::joined(&head, g.group.ip(), g.source, g.interface.as_deref()),
                    None => head,
                };
                match &self.histograms {
                    Some(spec) => lines::with_histograms(&head, spec),
                    None => head,
                }
            }
            ServerEvent::Progress(r) if is_iperf2(&r) => {
                let mut out = String::new();
                let run = self.start(&r, &mut out);
                out + &self.intervals(&r, run)
            }
            ServerEvent::Test(log) => match log.result.filter(|r| is_iperf2(r)) {
                Some(r) => {
                    let mut out = String::new();
                    let run = self.start(&r, &mut out);
                    out += &self.intervals(&r, run);
                    self.running.remove(&key(&r));
                    out + &lines::totals(&r, run.0, &self.style)
                }
                None => String::new(),
            },
            _ => String::new(),
        }
    }

    /// The test's first number and intervals seen; its connections' lines into `out` when it is new.
    fn start(&mut self, r: &RunResult, out: &mut String) -> (u32, usize) {
        if let Some(x) = self.running.get(&key(r)) {
            return (x.first, x.seen);
        }
        let first = self.next;
        self.next += lines::numbers_used(r).max(1);
        let connected = lines::connected(r, first, &self.style);
        *out += &match self.exclude.connections {
            true => super::iperf2_out::without_connections(&connected),
            false => connected,
        };
        self.running.insert(key(r), Running { first, seen: 0 });
        (first, 0)
    }

    /// The intervals of `r` not printed yet.
    fn intervals(&mut self, r: &RunResult, (first, seen): (u32, usize)) -> String {
        let mut out = String::new();
        for k in lines::printed(r, &self.style).into_iter().filter(|&k| k >= seen) {
            out += &lines::interval(r, k, first, &self.style);
        }
        if let Some(x) = self.running.get_mut(&key(r)) {
            x.seen = r.intervals.len();
        }
        out
    }
}

/// The event sink of `--iperf2-text`.
pub fn printer(
    o: &Iperf2Lines,
    joined: Option<landspeed_net::multicast::GroupPlan>,
) -> impl Fn(ServerEvent) + Send + Sync + 'static {
    let state = std::sync::Mutex::new(Printer {
        style: Iperf2Style {
            csv: o.iperf2_csv,
            enhanced: o.iperf2_enhanced,
            format: o.iperf2_format,
            interval_s: o.iperf2_interval.map(|d| d.as_secs_f64()),
        },
        udp: o.iperf2_udp,
        read_len: o.iperf2_read_len,
        histograms: o.iperf2_histograms,
        exclude: o.iperf2_exclude.unwrap_or_default(),
        joined,
        next: 1,
        running: HashMap::new(),
    });
    let hide = o.iperf2_hide_ips;
    move |ev| {
        let text = state.lock().unwrap_or_else(|e| e.into_inner()).on_event(ev);
        let text = if hide {
            super::iperf2_out::hidden(&text)
        } else {
            text
        };
        let mut o = std::io::stdout().lock();
        let _ = write!(o, "{text}");
        let _ = o.flush();
    }
}
