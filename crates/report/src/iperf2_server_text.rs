//! An iperf 2 client's test as iperf 2.1.8's server prints it, for the `iperf -s` drop-in, so a
//! script that reads `iperf -s`'s output (the classic way to see a UDP test's loss and jitter at the
//! receiving end) reads this: the dashed head when the server listens, then for each test a
//! "connected with" line per connection, the column head, with the server's `-i` one line per
//! stream per interval (and a `[SUM]` per direction with several streams), and each stream's total;
//! or their CSV (`-y C`). Connections are numbered across the server's life, as iperf 2's server
//! numbers them: a test's first number is the caller's. Pure: the drop-in's printer keeps the
//! numbering and feeds it the results (`RunResult`, the server's view) as they grow.
//! docs/iperf2.md ("The drop-in's server") says what differs from iperf 2's own lines.

use crate::iperf2_text::{
    column_head_udp, column_head_udp_received, columns, csv_line, transit_columns, two_figures, udp_enhanced,
    Ends, Iperf2Style, DASHES,
};
use crate::iperf3_json::host_port;
use crate::iperf3_text::strftime;
use crate::iperf3_text::unit;
use landspeed_core::config::{Direction, Flow, Transport};
use landspeed_core::endpoint::ConnectFacts;
use landspeed_core::endpoint::ReadBins;
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult, StreamResult};
use landspeed_core::transit_bins::TransitHistogram;
use landspeed_core::udp::TransitSummary;
use std::fmt::Write;

/// The head iperf 2's server prints when it listens: its protocol, port and receive buffer (the
/// kernel's default for a socket of that protocol, when known); with `-e` (`read`: the read size)
/// this process's id, and the read size with the width of the bins of iperf 2's histogram.
pub fn listening(udp: bool, port: u16, buffer_bytes: Option<u64>, read: Option<u64>) -> String {
    let (proto, buffer) = if udp {
        ("UDP", "UDP buffer size")
    } else {
        ("TCP", "TCP window size")
    };
    let size = buffer_bytes.map_or("the kernel's default".to_string(), |b| {
        format!("{} (default)", unit(b as f64, true))
    });
    let more = match read {
        Some(len) => {
            let (size, width) = read_size(len);
            format!(
                " with pid {}\nRead buffer size: {size} (Dist bin width={width})",
                std::process::id()
            )
        }
        None => String::new(),
    };
    format!("{DASHES}\nServer listening on {proto} port {port}{more}\n{buffer}: {size}\n{DASHES}\n")
}

/// `head` ([`listening`]'s) with the line iperf 2.1.8's server adds for `--histograms`, before the
/// buffer's line: the bins' width and count, and that clients should send trip times.
pub fn with_histograms(head: &str, spec: &landspeed_core::transit_bins::BinSpec) -> String {
    let line = format!(
        "Enabled receive histograms bin-width={:.3} ms, bins={} (clients should use --trip-times)\n",
        spec.width_ms(),
        spec.bins
    );
    let lines: Vec<&str> = head.split_inclusive('\n').collect();
    match lines.len() {
        n if n >= 3 => lines[..n - 2].concat() + &line + &lines[n - 2..].concat(),
        _ => head.to_string() + &line,
    }
}

/// The server's head ([`listening`]'s) for a multicast group it joined, as iperf 2.1.8's `-s -u -B
/// GROUP` prints it: its join (`group  G`, or `(*,G)=*,G` / `(S,G)=S,G` with the interface or the
/// one source named) after the listening line, and its single-client mode before the buffer's.
pub fn joined(
    head: &str,
    group: std::net::IpAddr,
    source: Option<std::net::IpAddr>,
    interface: Option<&str>,
) -> String {
    let iface = interface.map_or(String::new(), |i| format!(" w/iface {i}"));
    let join = match (source, interface) {
        (None, None) => format!("Joining multicast group  {group}"),
        (None, Some(_)) => format!("Joining multicast (*,G)=*,{group}{iface}"),
        (Some(s), _) => format!("Joining multicast (S,G)={s},{group}{iface}"),
    };
    let mut t = String::new();
    for (k, line) in head.lines().enumerate() {
        if line.starts_with("UDP buffer size") || line.starts_with("TCP window size") {
            t += "Server set to single client traffic mode (per multicast receive)\n";
        }
        t += line;
        t.push('\n');
        if k == 1 {
            t += &join;
            t.push('\n');
        }
    }
    t
}

/// A TCP read size (`-l`) as iperf 2's `-e` head prints it, and its histogram's bin width.
pub(crate) fn read_size(len: u64) -> (String, String) {
    (unit(len as f64, true), bin_width(len / 8))
}

/// The width of the read histogram's bins as iperf 2 prints it: `%4d Byte` under a kilobyte, else
/// in its units (`16.0 KByte`).
fn bin_width(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes:>4} Byte")
    } else {
        unit(bytes as f64, true)
    }
}

/// One of a test's connections as the server numbers it: the stream it received on it and the one
/// it sent on it (both in full duplex), and the client's port.
#[derive(Debug, Clone, Copy)]
struct Conn<'a> {
    number: u32,
    received: Option<&'a StreamResult>,
    sent: Option<&'a StreamResult>,
    client_port: Option<u16>,
}

/// The test's connections numbered from `first`: those the server received on, in stream order,
/// then those it only sent on; a stream sent on a connection the client's port shows it received on
/// too (full duplex) shares that connection's number.
fn connections(r: &RunResult, first: u32) -> Vec<Conn<'_>> {
    let mut by_id: Vec<&StreamResult> = r.streams.iter().collect();
    by_id.sort_by_key(|s| s.id);
    let mut out: Vec<Conn> = vec![];
    for s in by_id.iter().filter(|s| s.flow == Flow::ClientToServer) {
        out.push(Conn {
            number: first + out.len() as u32,
            received: Some(s),
            sent: None,
            client_port: s.client_port,
        });
    }
    for s in by_id.iter().filter(|s| s.flow == Flow::ServerToClient) {
        let shared = out
            .iter_mut()
            .find(|c| c.sent.is_none() && c.client_port.is_some() && c.client_port == s.client_port);
        match shared {
            Some(c) => c.sent = Some(s),
            None => out.push(Conn {
                number: first + out.len() as u32,
                received: None,
                sent: Some(s),
                client_port: s.client_port,
            }),
        }
    }
    out
}

/// How many numbers a test's connections take (the next test's first is this much further on).
pub fn numbers_used(r: &RunResult) -> u32 {
    connections(r, 0).len() as u32
}

fn is_udp(r: &RunResult) -> bool {
    r.config.spec.transport == Transport::Udp
}

/// An iperf 2 bounceback test (its requests and answers on one connection, counted as one).
fn bounce(r: &RunResult) -> bool {
    r.config.bounceback.is_some()
}

/// A bounceback test's line of `bytes` (its requests and answers) over `span`, as iperf 2.1.8's
/// server prints it: the plain columns, or CSV.
fn bounce_line(
    r: &RunResult,
    c: &Conn,
    (span, stamp): ((f64, f64), f64),
    bytes: u64,
    st: &Iperf2Style,
) -> String {
    match st.csv {
        true => csv_line(
            &ends(r, c.client_port),
            (c.number, true),
            (stamp, span.0, span.1),
            bytes,
            st,
        ),
        false => format!("{} {}\n", tag(c, true), columns(span.0, span.1, bytes, st)),
    }
}

/// The bounceback's mark on its connection line: its request size and hold, and quick acks.
fn bounce_mark(r: &RunResult) -> String {
    let Some(b) = r.config.bounceback else {
        return String::new();
    };
    let quick = if b.quickack { " w/quickack" } else { "" };
    format!(" (bb{quick} len/hold={}/{})", b.request_bytes, b.hold_us)
}

/// The server's end and the client's, at `port` (the client's port of a connection).
fn ends(r: &RunResult, client_port: Option<u16>) -> Ends {
    let server = host_port(&r.config.remote_address);
    let (cip, cport) = host_port(&r.config.local_address);
    Ends {
        local: server,
        remote: (cip, client_port.unwrap_or(cport)),
        facts: None,
        tos: None,
    }
}

/// A stream's tag: `[  N]`, or `[ *N]` for what the server sent on a connection it also received on
/// (iperf 2's mark of full duplex's other direction) or opened back to the client (`-r`, `-d`).
fn tag(c: &Conn, received: bool) -> String {
    crate::iperf2_text::tag(c.number, !received && (c.received.is_some() || back(c).is_some()))
}

/// How a connection this server opened back to its client (`-r`, `-d`) was made; None for one it
/// accepted.
fn back<'a>(c: &Conn<'a>) -> Option<&'a ConnectFacts> {
    let sent = c.sent.filter(|_| c.received.is_none())?;
    sent.connection.as_ref().filter(|f| f.back)
}

/// Each connection's "connected with" line, then the column head (none in CSV); before the first
/// connection opened back to the client, the head iperf 2's server prints as it becomes a client.
pub fn connected(r: &RunResult, first: u32, st: &Iperf2Style) -> String {
    let st = &effective(r, st);
    if st.csv {
        return String::new();
    }
    let mut t = String::new();
    let mut back_head = true;
    for c in connections(r, first) {
        if let Some(f) = back(&c).filter(|_| std::mem::replace(&mut back_head, false)) {
            let (cip, cport) = ends(r, c.client_port).remote;
            let window = f.send_buffer_bytes.map_or(String::new(), |b| {
                format!("TCP window size: {} (default)\n", unit(b as f64, true))
            });
            let _ = write!(
                t,
                "{DASHES}\nClient connecting to {cip}, TCP port {cport}\n{window}{DASHES}\n"
            );
        }
        t += &connection_line(r, &c, st);
    }
    let received_udp = is_udp(r) && r.config.spec.direction != Direction::Reverse;
    t + match (received_udp, is_udp(r) && st.enhanced) {
        _ if bounce(r) => PLAIN_HEAD,
        (true, _) if timed_frames(r) => ISOCH_TRIPS_HEAD,
        (true, _) => column_head_udp_received(st),
        (false, true) => column_head_udp(st, false),
        (false, false) if timed(r) && r.frames.is_some() => TRIPS_HEAD_FRAMES,
        (false, false) if timed(r) => TRIPS_HEAD,
        (false, false) if counts_reads(r, st) => READS_HEAD,
        (false, false) if writes_drawn(r, st) => crate::iperf2_text::column_head(st),
        (false, false) => PLAIN_HEAD,
    }
}

/// One connection's "connected with" line, with iperf 2.1.8's marks in its order: frames, the
/// direction, a scheduled start, UDP's no report, trip times, then how it was made.
fn connection_line(r: &RunResult, c: &Conn, st: &Iperf2Style) -> String {
    let made = c.received.or(c.sent).and_then(|s| s.connection.as_ref());
    let e = ends(r, c.client_port);
    let (sip, sport) = made.and_then(|f| f.local.as_deref()).map_or(e.local, host_port);
    let (cip, cport) = &e.remote;
    let way = match (c.received.is_some(), c.sent.is_some(), r.config.spec.direction) {
        _ if bounce(r) => "",
        (true, true, _) => " (full-duplex)",
        (false, true, Direction::Reverse) => " (reverse)",
        (false, true, _) if back(c).is_some() => " (reverse)",
        _ => "",
    };
    let epoch = match r.config.scheduled_start_unix_s {
        Some(_) => " (epoch-start)",
        None => "",
    };
    let fin = match is_udp(r) && (!way.is_empty() || r.config.no_end_report) {
        true => " (no-udp-fin)",
        false => "",
    };
    let trips = match r.config.spec.trip_times && c.received.is_some() && (c.sent.is_none() || bounce(r)) {
        true => " (trip-times)",
        false => "",
    };
    let facts = how_made(r, made, way, st.enhanced);
    let bb = bounce_mark(r);
    let isoch = match r.frames.is_some() && c.received.is_some() {
        true => " (isoch)",
        false => "",
    };
    // 2.1.8 dates a connection it only receives on, not one it sends on (`-R`, full duplex).
    let when = match st.enhanced && way.is_empty() {
        true => format!(" on {} (UTC)", strftime(r.started_unix_s, "%Y-%m-%d %H:%M:%S")),
        false => String::new(),
    };
    let dev = match made.and_then(|f| f.interface.as_deref()) {
        Some(dev) if st.enhanced => format!("%{dev}"),
        _ => String::new(),
    };
    let prefetch = crate::iperf2_text::prefetch_mark(made);
    let fq = crate::iperf2_text::fq_mark(made, way == " (reverse)");
    format!(
        "{} local {sip}{dev} port {sport} connected with {cip} port {cport}{prefetch}{isoch}{way}{fq}{epoch}{bb}{fin}{trips}{facts}{when}\n",
        tag(c, c.received.is_some())
    )
}

/// What iperf 2.1.8's server says of how a connection was made, after its other marks: with `-e`
/// the socket (`(sock=N)`), the type of service the client asked (`-S`), with `-e` the
/// client's version from its header (`(peer 2.1.8)`), and over TCP TCP_INFO's first figures.
fn how_made(r: &RunResult, made: Option<&ConnectFacts>, way: &str, enhanced: bool) -> String {
    let mut t = String::new();
    if let Some(fd) = made.and_then(|f| f.fd).filter(|_| enhanced) {
        let _ = write!(t, " (sock={fd})");
    }
    // A server's TOS is "rx" but on a full-duplex or bounceback connection (2.1.8's `isReverse`
    // is its client's).
    let direction = match way {
        _ if bounce(r) => Direction::Bidir,
        " (full-duplex)" => Direction::Bidir,
        _ => Direction::Forward,
    };
    t += &crate::iperf2_text::tos_mark(r.config.spec.tos, direction);
    // The client's software as its header named it (the result's local end is the client's).
    let version = r
        .local
        .software
        .strip_prefix("iperf 2 ")
        .and_then(|v| v.strip_suffix(" client"));
    if let Some(v) = version.filter(|v| enhanced && v.starts_with(|c: char| c.is_ascii_digit())) {
        let _ = write!(t, " (peer {v})");
    }
    t += crate::iperf2_text::qack_mark(made);
    if let Some((c, m, rtt)) = made.and_then(|f| f.cwnd_mss_rtt) {
        let _ = write!(t, " (icwnd/mss/irtt={c}/{m}/{rtt})");
    }
    t
}

/// The column head of UDP frames received from a `--trip-times` client (`--isochronous`), iperf
/// 2.1.8's: its frames and their latency after the datagrams' columns.
const ISOCH_TRIPS_HEAD: &str = "[ ID] Interval            Transfer     Bandwidth        Jitter   Lost/Total Latency avg/min/max/stdev  PPS  Frame:rx/lost  latency  NetPwr\n";

/// Whether the test is of UDP frames from a client sending trip times (iperf 2.1.8's server then
/// prints its frames' columns).
fn timed_frames(r: &RunResult) -> bool {
    is_udp(r) && r.frames.is_some() && r.config.spec.trip_times
}

/// The columns after a UDP frames line's loss (`timed_frames`): the datagrams' transit and pace,
/// the frames heard and lost, their latency, and the net power, as iperf 2.1.8's
/// `report_bw_jitter_loss_enhanced_isoch_format` prints them.
fn isoch_columns(
    t: Option<&TransitSummary>,
    f: Option<&landspeed_core::frames::FramesHeard>,
    bytes: u64,
    secs: f64,
) -> String {
    let Some(t) = t.filter(|t| t.datagrams > 0) else {
        return crate::iperf2_text::transit_columns(None, bytes, secs);
    };
    let f = f.cloned().unwrap_or_default();
    let l = f.latency.unwrap_or_default();
    format!(
        " {:.3}/{:.3}/{:.3}/{:.3} ms {:.0} pps  {:3}/{}  {:.3}/{:.3}/{:.3}/{:.3} ms {}",
        t.mean_ms,
        t.min_ms,
        t.max_ms,
        t.stddev_ms,
        t.per_s,
        f.frames,
        f.lost,
        l.mean_ms,
        l.min_ms,
        l.max_ms,
        l.stddev_ms,
        crate::iperf2_text::net_power(bytes, secs, t.mean_ms)
    )
}

/// A stream's frames over the whole test (its intervals' merged), `secs` of them.
fn frames_of(r: &RunResult, id: u32, secs: f64) -> Option<landspeed_core::frames::FramesHeard> {
    let each = (r.intervals.iter())
        .flat_map(|i| i.streams.iter().filter(|s| s.id == id))
        .filter_map(|s| s.frames_heard.as_ref());
    landspeed_core::frames::FramesHeard::merged(each, secs)
}

/// iperf 2's `-e` column head of a TCP test's received streams.
pub const READS_HEAD: &str = "[ ID] Interval            Transfer    Bandwidth       Reads=Dist\n";

/// The column head of a TCP stream received from a `--trip-times` client (its bursts timed).
pub(crate) const TRIPS_HEAD: &str =
    "[ ID] Interval            Transfer    Bandwidth    Burst Latency avg/min/max/stdev (cnt/size) inP NetPwr  Reads=Dist\n";

/// `TRIPS_HEAD` for a client's frames (`--isochronous --trip-times`): iperf 2.1.8's, without `inP`.
const TRIPS_HEAD_FRAMES: &str =
    "[ ID] Interval            Transfer    Bandwidth    Burst Latency avg/min/max/stdev (cnt/size) NetPwr  Reads=Dist\n";

/// Whether the test's received TCP streams came in timed bursts (an iperf 2 client's
/// `--trip-times`: their intervals carry the bursts' transits).
fn timed(r: &RunResult) -> bool {
    r.config.spec.trip_times && !is_udp(r)
}

/// The style a test is drawn in: iperf 2's server prints a `--trip-times` client's test with
/// `-e`'s lines whether or not it was given `-e`.
fn effective(r: &RunResult, st: &Iperf2Style) -> Iperf2Style {
    Iperf2Style {
        enhanced: st.enhanced || (r.config.spec.trip_times && r.config.bounceback.is_none()),
        ..*st
    }
}

/// A timed stream's burst columns over `secs` with `bytes`: the bursts' mean, least, most and
/// standard deviation (the last three 0 with fewer than two), how many and their mean size, the
/// bytes in flight by Little's law (rate × mean transit) and the net power.
pub(crate) fn trips_columns(t: Option<&TransitSummary>, bytes: u64, secs: f64) -> String {
    trips_columns_of(t, bytes, secs, true)
}

/// `trips_columns` on a server's line: without the bytes in flight for a client's frames (iperf
/// 2.1.8's server draws an isochronous stream's columns without `inP`).
fn server_trips_columns(r: &RunResult, t: Option<&TransitSummary>, bytes: u64, secs: f64) -> String {
    trips_columns_of(t, bytes, secs, r.frames.is_none())
}

fn trips_columns_of(t: Option<&TransitSummary>, bytes: u64, secs: f64, in_flight_drawn: bool) -> String {
    let t = t.copied().unwrap_or_default();
    let few = |v: f64| if t.datagrams < 2 { 0.0 } else { v };
    let size = match t.datagrams {
        0 => 0,
        n => bytes / n,
    };
    let in_flight = match secs > 0.0 {
        true => bytes as f64 / secs * t.mean_ms / 1e3,
        false => 0.0,
    };
    let in_flight = match in_flight_drawn {
        true => format!("{} ", adaptive_bytes(in_flight)),
        false => String::new(),
    };
    format!(
        "  {:.3}/{:.3}/{:.3}/{:.3} ms ({}/{size}) {in_flight}{}",
        t.mean_ms,
        few(t.min_ms),
        few(t.max_ms),
        few(t.stddev_ms),
        t.datagrams,
        crate::iperf2_text::net_power(bytes, secs, t.mean_ms)
    )
}

/// Bytes in iperf 2's adaptive units, negative ones too (a clock offset can make a transit so).
fn adaptive_bytes(v: f64) -> String {
    if v < -1e7 {
        return "OBL".into();
    }
    let s = unit(v.abs(), true);
    match v < 0.0 {
        true => format!("-{}", s.trim_start()),
        false => s,
    }
}

/// A `[SUM]`'s head where its kind differs from its streams' (a timed test's sums carry the reads
/// with `-e` and plain columns without): before the test's first `[SUM]`, which comes in the first
/// interval printed or, with none, in the totals (`asked`: the server's own style).
fn sum_head(r: &RunResult, asked: &Iperf2Style, first_sum: bool) -> &'static str {
    match (first_sum, timed(r), asked.enhanced) {
        (false, _, _) => "",
        (true, true, true) => READS_HEAD,
        (true, true, false) => PLAIN_HEAD,
        (true, false, _) if reverse_sum_reads(r, asked) => READS_HEAD,
        _ => "",
    }
}

/// `-e` with `-R -P` over TCP: iperf 2.1.8's server prints the `[SUM]` of the streams it sends as
/// a sum of reads, under the reads' head (its counts there are not reads: the drop-in prints the
/// reads it made on them, none).
fn reverse_sum_reads(r: &RunResult, asked: &Iperf2Style) -> bool {
    asked.enhanced && !asked.csv && !is_udp(r) && r.config.spec.direction == Direction::Reverse
}

/// The reads column of a `[SUM]` of streams the server sent (`reverse_sum_reads`): none read.
fn no_reads(r: &RunResult, asked: &Iperf2Style) -> String {
    match reverse_sum_reads(r, asked) {
        true => reads_column(Some(&ReadBins::default())),
        false => String::new(),
    }
}

/// Whether `-e`'s reads go on the test's lines: a TCP test the server received (its reads are
/// counted with `-e`; a line of a stream that counted none has no reads column).
fn counts_reads(r: &RunResult, st: &Iperf2Style) -> bool {
    st.enhanced && !st.csv && !is_udp(r) && r.config.spec.direction != Direction::Reverse
}

/// `--full-duplex -e` over TCP as iperf 2.1.8's server prints it: the first time a kind of line
/// comes (`heads`: in the first interval printed, or the totals when none was), its column head
/// before it (the writes' before the first stream sent, the plain one before the first `[FDk]`),
/// and each connection's lines closed by its `[FDk]`, both ways summed.
struct FullDuplexTcp {
    on: bool,
    heads: bool,
    sent_head: bool,
    fd_head: bool,
}

impl FullDuplexTcp {
    fn new(r: &RunResult, st: &Iperf2Style, heads: bool) -> FullDuplexTcp {
        FullDuplexTcp {
            on: st.enhanced && !st.csv && tcp_full_duplex(r),
            heads,
            sent_head: false,
            fd_head: false,
        }
    }

    /// The writes' column head before the first stream sent, when it is due.
    fn head(&mut self, received: bool, st: &Iperf2Style) -> &'static str {
        match self.on && self.heads && !received && !std::mem::replace(&mut self.sent_head, true) {
            true => crate::iperf2_text::column_head(st),
            false => "",
        }
    }

    /// Connection `number`'s `[FDk]` line of `bytes` both ways over the span.
    fn line(&mut self, number: u32, (start_s, end_s): (f64, f64), bytes: u64, st: &Iperf2Style) -> String {
        if !self.on {
            return String::new();
        }
        let head = match self.heads && !std::mem::replace(&mut self.fd_head, true) {
            true => PLAIN_HEAD,
            false => "",
        };
        let plain = Iperf2Style {
            enhanced: false,
            ..*st
        };
        format!("{head}[FD{number}] {}\n", columns(start_s, end_s, bytes, &plain))
    }
}

/// Whether the test is TCP both ways at once (`--full-duplex`, and `-d` on connections back).
fn tcp_full_duplex(r: &RunResult) -> bool {
    !is_udp(r) && r.config.spec.direction == Direction::Bidir
}

/// iperf 2.1.8's server's one `[SUM]` of a full-duplex TCP test, when `due`: every stream's bytes
/// both ways over the span, in the plain columns (with `-e` too). 2.1.8 prints it in each interval
/// and at the end with more than one connection, and with one at the end only when it printed no
/// intervals.
fn full_duplex_sum(span: (f64, f64), bytes: u64, due: bool, st: &Iperf2Style) -> String {
    let plain = Iperf2Style {
        enhanced: false,
        ..*st
    };
    match due {
        true => format!("[SUM] {}\n", columns(span.0, span.1, bytes, &plain)),
        false => String::new(),
    }
}

/// Whether `-e`'s writes go on the test's lines: a TCP test the server sends on (`-R`: its writes,
/// retries, cwnd/RTT and net power, as iperf 2's client prints its own).
fn writes_drawn(r: &RunResult, st: &Iperf2Style) -> bool {
    st.enhanced && !st.csv && !is_udp(r) && r.config.spec.direction != Direction::Forward
}

/// `-e`'s columns of a stream the server sent: its writes (the bytes over the write size), the
/// `retries` within the span, and its TCP state at the span's end.
fn writes_column(r: &RunResult, bytes: u64, secs: f64, tcp: crate::iperf2_text::Tcp) -> String {
    crate::iperf2_text::enhanced(r.config.spec.length_bytes, bytes, secs, &tcp)
}

/// Stream `id`'s retransmissions within interval `k` (the intervals carry the running count).
fn retries_within(r: &RunResult, k: usize, id: u32) -> u64 {
    let at = |k: usize| {
        (r.intervals
            .get(k)
            .and_then(|i| i.streams.iter().find(|s| s.id == id)))
        .and_then(|s| s.retransmits)
        .unwrap_or(0)
    };
    at(k).saturating_sub(if k > 0 { at(k - 1) } else { 0 })
}

/// `-e`'s reads column: how many, then how many in each eighth of the read buffer.
pub(crate) fn reads_column(reads: Option<&ReadBins>) -> String {
    let Some(r) = reads else {
        return String::new();
    };
    let bins: Vec<String> = r.bins.iter().map(u64::to_string).collect();
    format!("  {}={}", r.reads(), bins.join(":"))
}

/// A stream's reads over the whole test (its intervals' summed), or none if it counted none.
pub(crate) fn reads_of(r: &RunResult, id: u32) -> Option<ReadBins> {
    summed(
        r.intervals
            .iter()
            .flat_map(|i| i.streams.iter().filter(|s| s.id == id))
            .map(|s| s.reads),
    )
}

/// A stream's burst transits over the whole test (its intervals' merged), `secs` of them.
pub(crate) fn trips_of(r: &RunResult, id: u32, secs: f64) -> Option<TransitSummary> {
    let each = (r.intervals.iter())
        .flat_map(|i| i.streams.iter().filter(|s| s.id == id))
        .filter_map(|s| s.transit.as_ref());
    landspeed_core::transit::merged(each, secs)
}

/// Readings summed over streams (a `[SUM]` line's), none when none of them has any.
pub(crate) fn summed(reads: impl Iterator<Item = Option<ReadBins>>) -> Option<ReadBins> {
    reads.flatten().reduce(|mut a, b| {
        a.add(&b);
        a
    })
}

/// The intervals iperf 2's server prints with its `-i`: every one but a last one no longer than a
/// quarter of an interval (iperf 2's PARTIALPERCENT; its bytes are in the totals), none without
/// `-i`.
pub fn printed(r: &RunResult, st: &Iperf2Style) -> Vec<usize> {
    let Some(nominal) = st.interval_s else {
        return vec![];
    };
    (0..r.intervals.len())
        .filter(|&k| {
            let i = &r.intervals[k];
            !i.omitted && i.end_s - i.start_s > crate::iperf2_text::PARTIAL * nominal
        })
        .collect()
}

/// Interval `k` of the test: each connection's lines (what it received, then what it sent), then a
/// `[SUM]` per direction with more than one stream; in CSV one line per stream.
pub fn interval(r: &RunResult, k: usize, first: u32, asked: &Iperf2Style) -> String {
    let st = &effective(r, asked);
    let Some(i) = r.intervals.get(k) else {
        return String::new();
    };
    let find = |s: Option<&StreamResult>| s.and_then(|s| i.streams.iter().find(|x| x.id == s.id));
    let mut t = String::new();
    let mut sums = [(0u64, 0usize, None); 2];
    let stamp = r.started_unix_s + i.end_s;
    if bounce(r) {
        let span = ((i.start_s, i.end_s), stamp);
        for c in connections(r, first) {
            let bytes = [find(c.received), find(c.sent)]
                .iter()
                .flatten()
                .map(|s| s.bytes)
                .sum();
            t += &bounce_line(r, &c, span, bytes, st);
        }
        return t;
    }
    let mut fd = FullDuplexTcp::new(r, st, printed(r, st).first() == Some(&k));
    for c in connections(r, first) {
        for (received, s) in [(true, find(c.received)), (false, find(c.sent))] {
            let Some(s) = s else { continue };
            let sum = &mut sums[usize::from(received)];
            *sum = (sum.0 + s.bytes, sum.1 + 1, summed([sum.2, s.reads].into_iter()));
            t += fd.head(received, st);
            t += &interval_line(r, (i, s), (&c, received), (st, stamp));
            t += &interval_pdf(r, (k, s), (c.number, received), st);
        }
        if let (Some(a), Some(b)) = (find(c.received), find(c.sent)) {
            t += &fd.line(c.number, (i.start_s, i.end_s), a.bytes + b.bytes, st);
        }
    }
    if tcp_full_duplex(r) && !st.csv {
        let (bytes, streams) = (sums[0].0 + sums[1].0, sums[0].1 + sums[1].1);
        return t + &full_duplex_sum((i.start_s, i.end_s), bytes, streams > 2, st);
    }
    if !st.csv {
        let reads = counts_reads(r, asked);
        for (bytes, _, bins) in sums.into_iter().rev().filter(|s| s.1 > 1) {
            let more = if reads {
                reads_column(bins.as_ref())
            } else {
                no_reads(r, asked)
            };
            t += sum_head(r, asked, printed(r, st).first() == Some(&k));
            let _ = writeln!(t, "[SUM] {}{more}", columns(i.start_s, i.end_s, bytes, st));
        }
    }
    t
}

/// One stream's line of interval `i`: UDP received adds jitter and lost/total.
fn interval_line(
    r: &RunResult,
    (i, s): (&IntervalResult, &IntervalStream),
    (c, received): (&Conn, bool),
    (st, stamp): (&Iperf2Style, f64),
) -> String {
    let udp = (received && is_udp(r)).then(|| {
        let (sent, lost) = (s.datagrams_sent.unwrap_or(0), s.datagrams_lost.unwrap_or(0));
        (s.jitter_ms.unwrap_or(0.0), lost, sent)
    });
    if st.csv {
        let line = csv_line(
            &ends(r, c.client_port),
            (c.number, received),
            (stamp, i.start_s, i.end_s),
            s.bytes,
            st,
        );
        return match udp {
            Some((jitter, lost, sent)) => {
                format!(
                    "{},{jitter:.3},{lost},{sent},{:.3},0\n",
                    line.trim_end(),
                    pct(lost, sent)
                )
            }
            None => line,
        };
    }
    let mut l = format!(
        "{} {}",
        tag(c, received),
        columns(i.start_s, i.end_s, s.bytes, st)
    );
    if let Some((jitter, lost, sent)) = udp {
        let _ = write!(
            l,
            "  {jitter:6.3} ms {lost}/{sent} ({}%)",
            two_figures(pct(lost, sent))
        );
        let secs = i.end_s - i.start_s;
        if timed_frames(r) {
            l += &isoch_columns(s.transit.as_ref(), s.frames_heard.as_ref(), s.bytes, secs);
        } else if st.enhanced {
            l += &transit_columns(s.transit.as_ref(), s.bytes, secs);
        }
    } else if st.enhanced && is_udp(r) {
        let secs = i.end_s - i.start_s;
        l += &udp_enhanced(r.config.spec.length_bytes, s.bytes, secs, None);
    } else if received && counts_reads(r, st) {
        if timed(r) && s.bytes > 0 {
            l += &server_trips_columns(r, s.transit.as_ref(), s.bytes, i.end_s - i.start_s);
        }
        l += &reads_column(s.reads.as_ref());
    } else if !received && writes_drawn(r, st) {
        let tcp = crate::iperf2_text::Tcp {
            retransmits: retries_within(
                r,
                r.intervals.iter().position(|x| x.index == i.index).unwrap_or(0),
                s.id,
            ),
            cwnd_bytes: s.cwnd_bytes.unwrap_or(0),
            rtt_us: s.rtt_us.unwrap_or(0),
            rtt_var_us: 0,
        };
        l += &writes_column(r, s.bytes, i.end_s - i.start_s, tcp);
    }
    l + "\n"
}

fn pct(lost: u64, sent: u64) -> f64 {
    if sent > 0 {
        lost as f64 * 100.0 / sent as f64
    } else {
        0.0
    }
}

/// The test's last lines: each stream's total over its own span (UDP received: jitter, lost/total
/// and the datagrams out of order; UDP sent: the datagrams sent), a `[SUM]` per direction with more
/// than one stream; in CSV one line per stream.
pub fn totals(r: &RunResult, first: u32, asked: &Iperf2Style) -> String {
    let st = &effective(r, asked);
    let mut t = String::new();
    let mut sums = [(0u64, 0f64, 0usize); 2];
    let udp_both = is_udp(r) && r.config.spec.direction == Direction::Bidir;
    if bounce(r) {
        return bounce_totals(r, first, st);
    }
    let mut fd = FullDuplexTcp::new(r, st, printed(r, st).is_empty());
    for c in connections(r, first) {
        let mut both = (0, 0.0f64);
        for (received, s) in [(true, c.received), (false, c.sent)] {
            let Some(s) = s else { continue };
            let (bytes, secs) = if received {
                (s.bytes_received, s.duration_s)
            } else {
                (s.bytes_sent, s.sender_elapsed_s)
            };
            both = (both.0 + bytes, both.1.max(secs));
            let sum = &mut sums[usize::from(received)];
            *sum = (sum.0 + bytes, sum.1.max(secs), sum.2 + 1);
            if udp_both && !received && !st.csv {
                t += PLAIN_HEAD;
            }
            t += fd.head(received, st);
            t += &total_line(r, s, (&c, received), (bytes, secs), st);
            if received {
                t += &whole_pdf(r, (c.number, s.id), (0.0, secs), st);
            }
        }
        if c.received.is_some() && c.sent.is_some() {
            t += &fd.line(c.number, (0.0, both.1), both.0, st);
        }
    }
    if udp_both && !st.csv {
        return t + &udp_both_sum(r, sums);
    }
    if tcp_full_duplex(r) && !st.csv {
        let (bytes, secs) = (sums[0].0 + sums[1].0, sums[0].1.max(sums[1].1));
        let due = sums[0].2 + sums[1].2 > 2 || printed(r, st).is_empty();
        return t + &full_duplex_sum((0.0, secs), bytes, due, st);
    }
    if !st.csv {
        for (k, (bytes, secs, _)) in sums.into_iter().enumerate().rev().filter(|s| s.1 .2 > 1) {
            let more = match k == 1 && counts_reads(r, asked) {
                true => reads_column(summed(received_ids(r).map(|id| reads_of(r, id))).as_ref()),
                false => no_reads(r, asked),
            };
            t += sum_head(r, asked, printed(r, st).is_empty());
            let _ = writeln!(t, "[SUM] {}{more}", columns(0.0, secs, bytes, st));
        }
    }
    t
}

/// A bounceback test's last line: its requests and answers over its whole span.
fn bounce_totals(r: &RunResult, first: u32, st: &Iperf2Style) -> String {
    let mut t = String::new();
    for c in connections(r, first) {
        let each = [(c.received, true), (c.sent, false)];
        let (bytes, secs) = each
            .iter()
            .fold((0, 0.0f64), |(b, d), (s, received)| match (s, received) {
                (Some(s), true) => (b + s.bytes_received, d.max(s.duration_s)),
                (Some(s), false) => (b + s.bytes_sent, d.max(s.sender_elapsed_s)),
                (None, _) => (b, d),
            });
        t += &bounce_line(r, &c, ((0.0, secs), r.started_unix_s + secs), bytes, st);
    }
    t
}

/// The histogram lines under stream `s`'s line of interval `k`, when its transits were binned:
/// its transits' (`F8` over TCP, `T8` over UDP), then a UDP client's frames' latencies (`F8`). A
/// UDP test's last interval cut short by its end is printed as iperf 2.1.8's server prints it:
/// marked final, with the whole test's bins (its histograms are flagged final before that partial
/// interval's line, which then counts from the start).
fn interval_pdf(
    r: &RunResult,
    (k, s): (usize, &IntervalStream),
    (number, received): (u32, bool),
    st: &Iperf2Style,
) -> String {
    let (Some(i), false, true) = (r.intervals.get(k), st.csv, received) else {
        return String::new();
    };
    let nominal = st.interval_s.unwrap_or(f64::INFINITY);
    let cut_short = k + 1 == r.intervals.len() && i.end_s - i.start_s < 0.99 * nominal;
    if is_udp(r) && cut_short {
        return whole_pdf(r, (number, s.id), (i.start_s, i.end_s), st);
    }
    let span = (i.start_s, i.end_s);
    let transits = s
        .transit_bins
        .as_ref()
        .map(|h| crate::iperf2_pdf::line(number, span, &crate::iperf2_pdf::of_transits(h, is_udp(r), false)));
    let frames = (s.frames_heard.as_ref())
        .and_then(|f| f.bins.as_ref())
        .map(|h| crate::iperf2_pdf::line(number, span, &crate::iperf2_pdf::of_frames(h, false)));
    transits.unwrap_or_default() + &frames.unwrap_or_default()
}

/// The histogram lines of stream `id` over the whole test (its intervals' merged), when they were
/// binned: iperf 2's `F8(f)` or `T8(f)` line under its total, and a UDP client's frames' `F8(f)`.
fn whole_pdf(r: &RunResult, (number, id): (u32, u32), span: (f64, f64), st: &Iperf2Style) -> String {
    if st.csv {
        return String::new();
    }
    let each = || (r.intervals.iter()).flat_map(|i| i.streams.iter().filter(|s| s.id == id));
    let transits = TransitHistogram::merged(each().filter_map(|s| s.transit_bins.as_ref()));
    let frames = each().filter_map(|s| s.frames_heard.as_ref()?.bins.as_ref());
    let transits = transits
        .map(|h| crate::iperf2_pdf::line(number, span, &crate::iperf2_pdf::of_transits(&h, is_udp(r), true)));
    let frames = TransitHistogram::merged(frames)
        .map(|h| crate::iperf2_pdf::line(number, span, &crate::iperf2_pdf::of_frames(&h, true)));
    transits.unwrap_or_default() + &frames.unwrap_or_default()
}

/// The streams the server received.
fn received_ids(r: &RunResult) -> impl Iterator<Item = u32> + '_ {
    (r.streams.iter())
        .filter(|s| s.flow == Flow::ClientToServer)
        .map(|s| s.id)
}

/// The column head of lines without UDP's receiver columns.
const PLAIN_HEAD: &str = "[ ID] Interval       Transfer     Bandwidth\n";

/// UDP `--full-duplex`'s closing `[SUM]` of both directions, with its datagrams and their rate, as
/// iperf 2.1.8's server prints it (`sums`: each direction's bytes and longest span, sent first).
fn udp_both_sum(r: &RunResult, sums: [(u64, f64, usize); 2]) -> String {
    let [(sent, sent_s, _), (got, got_s, _)] = sums;
    let secs = sent_s.max(got_s);
    let received: u64 = r
        .streams
        .iter()
        .filter_map(|s| s.udp.as_ref().map(|u| u.datagrams_received))
        .sum();
    let datagrams = received + datagrams(r, sent);
    let st = Iperf2Style {
        csv: false,
        enhanced: false,
        format: 'a',
        interval_s: None,
    };
    format!(
        "[ ID] Interval       Transfer     Bandwidth    Datagrams   PPS\n[SUM] {} {datagrams}{:>8.0} pps\n",
        columns(0.0, secs, sent + got, &st),
        datagrams as f64 / secs.max(1e-9)
    )
}

/// One stream's total line.
fn total_line(
    r: &RunResult,
    s: &StreamResult,
    (c, received): (&Conn, bool),
    (bytes, secs): (u64, f64),
    st: &Iperf2Style,
) -> String {
    let udp = s.udp.as_ref().filter(|_| received && is_udp(r));
    if st.csv {
        let line = csv_line(
            &ends(r, c.client_port),
            (c.number, received),
            (r.started_unix_s + secs, 0.0, secs),
            bytes,
            st,
        );
        return match udp {
            Some(u) => format!(
                "{},{:.3},{},{},{:.3},{}\n",
                line.trim_end(),
                u.jitter_ms,
                u.datagrams_lost,
                total(u),
                u.loss_pct,
                u.out_of_order
            ),
            None => line,
        };
    }
    let tag = tag(c, received);
    let mut l = format!("{tag} {}", columns(0.0, secs, bytes, st));
    if let Some(u) = udp {
        let _ = write!(
            l,
            "  {:6.3} ms {}/{} ({}%)",
            u.jitter_ms,
            u.datagrams_lost,
            total(u),
            two_figures(u.loss_pct)
        );
        if timed_frames(r) {
            l += &isoch_columns(u.transit.as_ref(), frames_of(r, s.id, secs).as_ref(), bytes, secs);
        } else if st.enhanced {
            l += &transit_columns(u.transit.as_ref(), bytes, secs);
        }
        if u.out_of_order > 0 {
            let _ = write!(
                l,
                "\n{tag} 0.0000-{secs:.4} sec  {} datagrams received out-of-order",
                u.out_of_order
            );
        }
    } else if st.enhanced && is_udp(r) && !received {
        l += &udp_enhanced(r.config.spec.length_bytes, bytes, secs, None);
    } else if received && counts_reads(r, st) {
        if timed(r) && bytes > 0 {
            l += &server_trips_columns(r, trips_of(r, s.id, secs).as_ref(), bytes, secs);
        }
        l += &reads_column(reads_of(r, s.id).as_ref());
    } else if !received && writes_drawn(r, st) {
        let t = s.tcp.as_ref();
        let tcp = crate::iperf2_text::Tcp {
            retransmits: t.map_or(0, |t| t.retransmits),
            cwnd_bytes: t.map_or(0, |t| t.cwnd_bytes),
            rtt_us: t.map_or(0, |t| t.rtt_us),
            rtt_var_us: t.map_or(0, |t| t.rtt_var_us),
        };
        l += &writes_column(r, bytes, secs, tcp);
    }
    if !received && is_udp(r) {
        let _ = write!(l, "\n[{:>3}] Sent {} datagrams", c.number, datagrams(r, bytes));
    }
    l + "\n"
}

/// The datagrams `bytes` of the test's length make.
fn datagrams(r: &RunResult, bytes: u64) -> u64 {
    bytes / r.config.spec.length_bytes.max(1)
}

fn total(u: &landspeed_core::udp::UdpStats) -> u64 {
    u.datagrams_sent
        .unwrap_or(u.datagrams_received + u.datagrams_lost)
}

#[cfg(test)]
mod tests;
