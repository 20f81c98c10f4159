//! A `RunResult` as iperf 2.1.8's client prints it, for `landspeed iperf2` (the `iperf` drop-in), so
//! a script that reads iperf 2's output reads this: its text (the dashed head, a "connected with"
//! line per stream, one line per stream per interval, `[SUM]` lines with more than one stream,
//! `-e`'s enhanced columns on a sending stream's lines) or its CSV (`-y C`: one line per stream per
//! interval and at the end, no sum lines, as 2.1.8's TCP client writes it). Units are iperf 2's
//! adaptive ones (bytes in powers of 1024, bits per second in powers of 1000, three significant
//! figures), or `-f`'s fixed one. docs/iperf2.md says what differs from iperf 2's own output.

use crate::iperf3_json::host_port;
use crate::iperf3_text::{strftime, three_figures, unit};
use landspeed_core::config::{Direction, Flow};
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult, StreamResult};
use landspeed_core::udp::TransitSummary;
use std::fmt::Write;

pub(crate) const DASHES: &str = "------------------------------------------------------------";

/// How the output is drawn: iperf 2's `-y C`, `-e` and `-f`.
#[derive(Debug, Clone)]
pub struct Iperf2Style {
    /// `-y C`: comma-separated lines instead of text.
    pub csv: bool,
    /// `-e`: the enhanced columns (writes, retries, cwnd/RTT, net power).
    pub enhanced: bool,
    /// `-f`'s letter (`a`, adaptive bits, by default).
    pub format: char,
    /// `-i`'s seconds: interval lines (a last, partial one only past [`PARTIAL`] of it, as iperf 2
    /// prints them); none without.
    pub interval_s: Option<f64>,
}

impl Iperf2Style {
    /// The intervals iperf 2 would print: those of `-i`'s length, and a last, partial one past
    /// [`PARTIAL`] of it (a shorter one is left to the total); none without `-i`.
    fn intervals<'a>(&self, r: &'a RunResult) -> impl Iterator<Item = &'a IntervalResult> {
        let nominal = self.interval_s.unwrap_or(f64::INFINITY);
        r.intervals
            .iter()
            .filter(move |i| !i.omitted && i.end_s - i.start_s > PARTIAL * nominal)
    }
}

/// A stream as iperf 2 numbers it: its connection's number, and whether this end received it.
#[derive(Debug, Clone, Copy)]
struct Numbered<'a> {
    number: u32,
    received: bool,
    s: &'a StreamResult,
}

/// The share of `-i` a last, partial interval must pass to be printed (iperf 2.1.8's
/// PARTIALPERCENT).
pub const PARTIAL: f64 = 0.25;

/// What a client's head says beyond where it connects: the send buffer the kernel granted a socket
/// like the test's and the one `-w` asked for, and with `-e` the rest of iperf 2.1.8's lines (a UDP
/// client's too: its buffer line, and `-e`'s lines but the write size).
#[derive(Debug, Clone, Default)]
pub struct TcpHead {
    /// (granted, asked for) bytes of send buffer.
    pub window: (u64, Option<u64>),
    /// `-e`'s lines: none without.
    pub enhanced: Option<EnhancedHead>,
    /// `-M` or `-m`: the MSS line.
    pub mss: Option<MssLine>,
    /// `-Z`: the congestion control asked for.
    pub congestion: Option<String>,
    /// `--ipg`'s milliseconds, which iperf 2.1.8's UDP head prints as its "IPG target" labelled
    /// `us` (`--ipg 10`: `IPG target: 10.00 us`, datagrams 10 ms apart); None: the gap the rate sets.
    pub ipg_given_ms: Option<f64>,
    /// `--fq-rate`: each socket's pace, bits per second (its "fair-queue socket pacing" line).
    pub fq_rate_bps: Option<f64>,
    /// `--tcp-write-prefetch`: the unsent data each sender is held to, bytes (its "Event based
    /// writes" line after the window's).
    pub write_prefetch: Option<u32>,
}

/// iperf 2.1.8's MSS line: the size `-M` asked for, or (`-m` alone) what a new socket says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MssLine {
    /// `MSS req size N bytes (per TCP_MAXSEG)`.
    Asked(u32),
    /// `MSS size N bytes`.
    Default(u32),
}

/// The lines iperf 2.1.8 prints of a TCP client's socket options, between `-e`'s write size and its
/// type-of-service line: the pace (`--fq-rate`), the MSS (`-M`, `-m`) and the congestion control
/// (`-Z`).
fn socket_lines(h: &TcpHead) -> String {
    let fq = (h.fq_rate_bps).map_or(String::new(), |b| {
        format!("fair-queue socket pacing set to {}\n", rate_text(b))
    });
    let mss = match h.mss {
        Some(MssLine::Asked(n)) => format!("MSS req size {n} bytes (per TCP_MAXSEG)\n"),
        Some(MssLine::Default(n)) => format!("MSS size {n} bytes\n"),
        None => String::new(),
    };
    let cc =
        (h.congestion.as_ref()).map_or(String::new(), |c| format!("TCP congestion control set to {c}\n"));
    fq + &mss + &cc
}

/// `-e`'s lines of a TCP client's head.
#[derive(Debug, Clone, Default)]
pub struct EnhancedHead {
    /// This process's id.
    pub pid: u32,
    /// The connections (`-P`).
    pub flows: u32,
    /// The write size (`-l`).
    pub write_bytes: u64,
    /// The type-of-service byte (`-S`; 0 when not set).
    pub tos: u8,
    /// `-N`: Nagle's algorithm off.
    pub nodelay: bool,
    /// A TCP test of frames (`--isochronous`): their line follows the write size.
    pub frames: Option<landspeed_core::frames::FrameSpec>,
}

/// iperf 2.1.8's window line: the size granted, "(default)" when none was asked, a warning when
/// the kernel granted other than what was asked (Linux doubles it).
pub fn window_line((granted, asked): (u64, Option<u64>)) -> String {
    let size = |b: u64| unit(b as f64, true);
    match asked {
        None => format!("TCP window size: {} (default)", size(granted)),
        Some(w) if w != granted => format!(
            "TCP window size: {} (WARNING: requested {})",
            size(granted),
            size(w)
        ),
        Some(_) => format!("TCP window size: {}", size(granted)),
    }
}

/// The client's head, before any stream: the dashed block iperf 2 prints first.
pub fn head(host: &str, port: u16, h: &TcpHead) -> String {
    let mut t = format!("{DASHES}\nClient connecting to {host}, TCP port {port}");
    let mut tos = String::new();
    match &h.enhanced {
        None => t.push('\n'),
        Some(e) => {
            let nagle = match e.nodelay {
                true => "and nodelay (Nagle off)",
                false => "(Nagle on)",
            };
            let frames = e.frames.map(|f| frames_line(&f) + "\n").unwrap_or_default();
            let _ = write!(
                t,
                " with pid {} ({} flows)\nWrite buffer size: {} Byte\n{frames}",
                e.pid, e.flows, e.write_bytes
            );
            tos = format!("TOS set to {:#x} {nagle}\n", e.tos);
        }
    }
    let prefetch = h.write_prefetch.map_or(String::new(), |b| {
        format!("Event based writes (pending queue watermark at {b} bytes)\n")
    });
    t + &socket_lines(h) + &tos + &window_line(h.window) + "\n" + &prefetch + DASHES + "\n"
}

/// The whole output after the head: text or CSV as `st` says (the lines a live client prints as
/// it goes, all at once).
pub fn render(r: &RunResult, st: &Iperf2Style) -> String {
    let spec = &r.config.spec;
    let st = &effective(spec, st);
    let ends = Ends::of(r);
    let mut t = String::new();
    if !st.csv {
        let when = st.enhanced.then_some(r.started_unix_s);
        let each = vec![ends.clone(); connections(r) as usize];
        t += &connected_marked(&each, spec.direction, when, trips_mark(spec));
        t += client_head(spec, st);
    }
    for i in st.intervals(r) {
        t += &interval_both_ways(r, i, st, &ends);
    }
    t + &totals(r, st)
}

/// One interval of a stored result: each direction's lines; in full duplex (text) without a
/// direction's own `[SUM]`, then the connections' `[FDk]` (`-e`) and both directions' `[SUM]`
/// (several connections), as the live client prints them.
fn interval_both_ways(r: &RunResult, i: &IntervalResult, st: &Iperf2Style, ends: &Ends) -> String {
    let part = |received: bool| {
        let streams: Vec<IntervalStream> = (i.streams.iter())
            .filter(|s| (r.streams.iter()).any(|x| x.id == s.id && receives(x.flow) == received))
            .cloned()
            .collect();
        IntervalResult { streams, ..i.clone() }
    };
    let both = r.config.spec.direction == Direction::Bidir && !st.csv;
    let at = (
        std::slice::from_ref(ends),
        r.started_unix_s + i.end_s,
        r.config.spec.length_bytes,
    );
    let mut t = String::new();
    for received in [false, true] {
        let p = part(received);
        if p.streams.is_empty() {
            continue;
        }
        let lines = interval(&p, received, st, at);
        t += &match both {
            true => (lines.lines().filter(|l| !l.starts_with("[SUM]")))
                .map(|l| l.to_string() + "\n")
                .collect(),
            false => lines,
        };
    }
    if both && st.enhanced {
        t += &full_duplex_tcp(&part(false), &part(true), st, false);
    }
    if both && connections(r) > 1 {
        t += &full_duplex_tcp_sum(&part(false), &part(true), st);
    }
    t
}

/// Both ends' addresses, as iperf 2 prints them (IP and port).
#[derive(Debug, Clone)]
pub struct Ends {
    /// This end's.
    pub local: (String, u16),
    /// The server's.
    pub remote: (String, u16),
    /// How the connection was made, when known (the TCP client's): its line's
    /// `(icwnd/mss/irtt=...)`, and with `-e` its interface, `(sock=N)` and `(ct=...)`.
    pub facts: Option<landspeed_core::endpoint::ConnectFacts>,
    /// The type-of-service byte asked for (`-S`), which `-e`'s line shows when set.
    pub tos: Option<u8>,
}

impl Ends {
    /// From `addr` strings (`ip:port`).
    pub fn new(local: &str, remote: &str) -> Ends {
        Ends {
            local: host_port(local),
            remote: host_port(remote),
            facts: None,
            tos: None,
        }
    }

    /// A connection's ends from its addresses (this end's first).
    pub fn between((local, remote): &(std::net::SocketAddr, std::net::SocketAddr)) -> Ends {
        Ends::new(&local.to_string(), &remote.to_string())
    }

    fn of(r: &RunResult) -> Ends {
        Ends::new(&r.config.local_address, &r.config.remote_address)
    }
}

/// Whether this end (the client) receives a stream of `flow`.
fn receives(flow: Flow) -> bool {
    flow == Flow::ServerToClient
}

/// The connections of a test: its streams, or half of them in full duplex (two on each).
fn connections(r: &RunResult) -> u32 {
    let n = r.streams.len() as u32;
    if r.config.spec.direction == Direction::Bidir {
        n / 2
    } else {
        n
    }
}

/// The column head of the text (`-e`'s wider one).
pub fn column_head(st: &Iperf2Style) -> &'static str {
    if st.enhanced {
        "[ ID] Interval            Transfer    Bandwidth       Write/Err  Rtry     Cwnd/RTT(var)        NetPwr\n"
    } else {
        "[ ID] Interval       Transfer     Bandwidth\n"
    }
}

/// Every stream with its iperf 2 number: the client's sending streams 1..n in id order, its
/// receiving ones likewise (a full-duplex connection's two directions share a number).
fn numbered(r: &RunResult) -> Vec<Numbered<'_>> {
    let mut out = vec![];
    for received in [false, true] {
        let mut group: Vec<&StreamResult> = r
            .streams
            .iter()
            .filter(|s| receives(s.flow) == received)
            .collect();
        group.sort_by_key(|s| s.id);
        for (k, s) in group.into_iter().enumerate() {
            out.push(Numbered {
                number: k as u32 + 1,
                received,
                s,
            });
        }
    }
    out
}

/// `[  1]` for a stream this end sends, `[ *1]` for one it receives (iperf 2's reverse mark).
pub(crate) fn tag(number: u32, received: bool) -> String {
    let id = if received {
        format!("*{number}")
    } else {
        number.to_string()
    };
    format!("[{id:>3}]")
}

/// One "connected with" line per connection, with `(reverse)` or `(full-duplex)` as iperf 2 marks
/// it; with `-e` (`when`: the test's start, Unix seconds) the date too.
pub fn connected(ends: &Ends, direction: Direction, connections: u32, when: Option<f64>) -> String {
    connected_each(&vec![ends.clone(); connections as usize], direction, when)
}

/// One "connected with" line for each connection's own ends, numbered 1.. in order.
pub fn connected_each(each: &[Ends], direction: Direction, when: Option<f64>) -> String {
    connected_marked(each, direction, when, "")
}

/// `connected_each` with `more` after the direction's mark (`(trip-times)`: [`trips_mark`]).
pub fn connected_marked(each: &[Ends], direction: Direction, when: Option<f64>, more: &str) -> String {
    let way = match direction {
        Direction::Bidir => " (full-duplex)",
        Direction::Reverse => " (reverse)",
        Direction::Forward => "",
    };
    let when = when.map_or(String::new(), |t| {
        format!(" on {} (UTC)", strftime(t, "%Y-%m-%d %H:%M:%S"))
    });
    let mut t = String::new();
    for (k, e) in each.iter().enumerate() {
        let ((lip, lport), (rip, rport)) = (&e.local, &e.remote);
        let c = k + 1;
        let enhanced = !when.is_empty();
        let lip = match e.facts.as_ref().and_then(|f| f.interface.as_ref()) {
            Some(i) if enhanced => format!("{lip}%{i}"),
            _ => lip.clone(),
        };
        let made = how_made(e, enhanced, &tos_mark(e.tos, direction));
        let prefetch = prefetch_mark(e.facts.as_ref());
        let fq = fq_mark(e.facts.as_ref(), direction == Direction::Reverse);
        let _ = writeln!(
            t,
            "[{c:>3}] local {lip} port {lport} connected with {rip} port {rport}{prefetch}{way}{fq}{more}{made}{when}"
        );
    }
    t
}

/// `--txstart-time`'s line under each connection's (`lines`, one a connection, numbered from 1):
/// how many whole seconds until the data starts at `at_unix_s`, rounded up, and when, as of
/// `now_unix_s`; or, the time passed, iperf 2.1.8's warning that it is before now.
pub fn with_start_lines(lines: &str, at_unix_s: f64, now_unix_s: f64) -> String {
    let start = strftime(at_unix_s, "%Y-%m-%d %H:%M:%S");
    let now = strftime(now_unix_s, "%Y-%m-%d %H:%M:%S");
    let ahead = (at_unix_s - now_unix_s).ceil();
    let mut t = String::new();
    for (k, line) in lines.lines().enumerate() {
        let c = k + 1;
        t += line;
        t.push('\n');
        let _ = match ahead > 0.0 {
            true => writeln!(
                t,
                "[{c:>3}] Client traffic to start in {ahead} seconds at {start} current time is {now} (UTC)"
            ),
            false => writeln!(
                t,
                "[{c:>3}] WARNING: --txstart-time ({}.{}) {start} is before now {now} (UTC)",
                at_unix_s.trunc(),
                ((at_unix_s.fract() * 1e6).round() as i64)
            ),
        };
    }
    t
}

/// iperf 2.1.8's mark of a connection's type of service (`-S`) when set: `(tos rx=0x10)` on a
/// test the client sends, `(tos tx=...)` on one it receives (`-R`), `(tos rx/tx=.../...)` both ways.
pub(crate) fn tos_mark(tos: Option<u8>, direction: Direction) -> String {
    let Some(tos) = tos.filter(|t| *t != 0) else {
        return String::new();
    };
    match direction {
        Direction::Forward => format!(" (tos rx={tos:#x})"),
        Direction::Reverse => format!(" (tos tx={tos:#x})"),
        Direction::Bidir => format!(" (tos rx/tx={tos:#x}/{tos:#x})"),
    }
}

/// What iperf 2.1.8 says of how a TCP connection was made, after its mark: `(icwnd/mss/irtt=...)`,
/// before it with `-e` `(sock=N)`, then `tos` (`tos_mark`'s, with or without `-e`), and with `-e`
/// `(ct=... ms)` after.
pub(crate) fn how_made(e: &Ends, enhanced: bool, tos: &str) -> String {
    let Some(f) = &e.facts else {
        return String::new();
    };
    let mut t = String::new();
    if enhanced {
        if let Some(fd) = f.fd {
            let _ = write!(t, " (sock={fd})");
        }
    }
    t += tos;
    t += qack_mark(Some(f));
    if let Some((c, m, r)) = f.cwnd_mss_rtt {
        let _ = write!(t, " (icwnd/mss/irtt={c}/{m}/{r})");
    }
    if let Some(ct) = f.connect_ms.filter(|_| enhanced) {
        let _ = write!(t, " (ct={ct:4.2} ms)");
    }
    t
}

/// iperf 2.1.8's marks first after a connection's ports: its receive window clamped (a server's
/// `--tcp-rx-window-clamp`), `(clamp=N)`; its sender holding its unsent data
/// (`--tcp-write-prefetch`), `(prefetch=N)`.
pub(crate) fn prefetch_mark(f: Option<&landspeed_core::endpoint::ConnectFacts>) -> String {
    let clamp = f
        .and_then(|f| f.window_clamp_bytes)
        .map_or(String::new(), |b| format!(" (clamp={b})"));
    let prefetch = f
        .and_then(|f| f.unsent_mark_bytes)
        .map_or(String::new(), |b| format!(" (prefetch={b})"));
    clamp + &prefetch
}

/// iperf 2.1.8's mark after `(reverse)` (`reverse`: the connection is one) of a connection whose
/// sender the client's `--fq-rate` paces: `(fq)`.
pub(crate) fn fq_mark(f: Option<&landspeed_core::endpoint::ConnectFacts>, reverse: bool) -> &'static str {
    match reverse && f.is_some_and(|f| f.fq_paced) {
        true => " (fq)",
        false => "",
    }
}

/// iperf 2.1.8's mark of a connection whose receiver acknowledges each read at once
/// (`--tcp-quickack`), just before TCP_INFO's figures: `(qack)`.
pub(crate) fn qack_mark(f: Option<&landspeed_core::endpoint::ConnectFacts>) -> &'static str {
    match f.is_some_and(|f| f.quickack) {
        true => " (qack)",
        false => "",
    }
}

/// `-e`'s closing line with more than one connection: their `connect()` times, the least, mean and
/// most in milliseconds and the standard deviation printed a thousand times too large (iperf 2.1.8
/// divides microseconds where it means milliseconds: 0.068 and 0.071 ms give "2.121"), and how many
/// connected and failed.
pub fn connect_times(facts: &[landspeed_core::endpoint::ConnectFacts]) -> String {
    let ms: Vec<f64> = facts.iter().filter_map(|f| f.connect_ms).collect();
    let n = ms.len() as f64;
    if ms.is_empty() {
        return String::new();
    }
    let mean = ms.iter().sum::<f64>() / n;
    let (min, max) = ms
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let var = match ms.len() {
        1 => 0.0,
        _ => ms.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0),
    };
    format!(
        "[ CT] final connect times (min/avg/max/stdev) = {min:.3}/{mean:.3}/{max:.3}/{:.3} ms (tot/err) = {}/0\n",
        var.sqrt() * 1e3,
        ms.len()
    )
}

/// The mark iperf 2 puts on an isochronous test's connections (`(isoch)`) and a `--trip-times`
/// test's.
pub fn trips_mark(spec: &landspeed_core::config::TestSpec) -> &'static str {
    match (spec.frames.is_some(), spec.trip_times) {
        (true, true) => " (isoch) (trip-times)",
        (true, false) => " (isoch)",
        (false, true) => " (trip-times)",
        (false, false) => "",
    }
}

/// The style a client test is drawn in: iperf 2's client prints a `--trip-times` test it receives
/// on (`-R`, `--full-duplex`) with `-e`'s lines whether or not it was given `-e`.
pub fn effective(spec: &landspeed_core::config::TestSpec, st: &Iperf2Style) -> Iperf2Style {
    Iperf2Style {
        enhanced: st.enhanced || (spec.trip_times && spec.direction != Direction::Forward),
        ..*st
    }
}

/// The column head of a TCP client sending frames (`--isochronous`, which turns `-e` on).
pub const COLUMN_HEAD_TCP_FRAMES: &str =
    "[ ID] Interval            Transfer     Bandwidth      Write/Err  Rtry     Cwnd/RTT     isoch:tx/miss/slip  NetPwr\n";

/// The column head of a client test: a `--trip-times` test received (`-R`) has the bursts' one,
/// a TCP test of frames its isochronous one.
pub fn client_head(spec: &landspeed_core::config::TestSpec, st: &Iperf2Style) -> &'static str {
    let st = effective(spec, st);
    let tcp = spec.transport == landspeed_core::config::Transport::Tcp;
    if tcp && spec.frames.is_some() && st.enhanced {
        return COLUMN_HEAD_TCP_FRAMES;
    }
    match (spec.direction == Direction::Reverse, spec.trip_times, st.enhanced) {
        (true, true, _) => crate::iperf2_server_text::TRIPS_HEAD,
        (true, false, true) if spec.transport == landspeed_core::config::Transport::Tcp => {
            crate::iperf2_server_text::READS_HEAD
        }
        _ => column_head(&st),
    }
}

/// One direction's lines of one interval (`i` holds that direction's streams only): each stream's,
/// numbered by id order, and a `[SUM]` with more than one; in CSV one line each (`at`: both ends,
/// the interval's end in Unix seconds for the CSV's time, and the write size for `-e`'s writes).
pub fn interval(i: &IntervalResult, received: bool, st: &Iperf2Style, at: (&[Ends], f64, u64)) -> String {
    let (each, stamp, length_bytes) = at;
    let mut ids: Vec<&IntervalStream> = i.streams.iter().collect();
    ids.sort_by_key(|s| s.id);
    let mut t = String::new();
    let mut sum = 0;
    for (k, s) in ids.iter().enumerate() {
        let number = k as u32 + 1;
        sum += s.bytes;
        if st.csv {
            let ends = each.get(k).or(each.first());
            let ends = ends.expect("a connection's ends");
            t += &csv_line(ends, (number, received), (stamp, i.start_s, i.end_s), s.bytes, st);
            continue;
        }
        t += &stream_line(&tag(number, received), (i, s), !received, (st, length_bytes));
    }
    if !st.csv && ids.len() > 1 {
        let counted = received && st.enhanced && ids.iter().any(|s| s.reads.is_some());
        let reads = match (timed(&ids) || counted, !received && st.enhanced) {
            (true, _) => reads_column(summed(ids.iter().map(|s| s.reads))),
            (false, true) => {
                let retries = ids.iter().filter_map(|s| s.retransmits).sum();
                // Frames' writes vary in size: the senders counted them.
                let counted = ids
                    .iter()
                    .map(|s| s.frames.map(|f| f.writes))
                    .sum::<Option<u64>>();
                sum_writes(counted.unwrap_or(sum / length_bytes.max(1)), retries)
            }
            (false, false) => String::new(),
        };
        let _ = writeln!(t, "[SUM] {}{reads}", columns(i.start_s, i.end_s, sum, st));
    }
    t
}

/// `-e`'s columns of a `[SUM]` of streams this end sent: their writes (no errors counted) and
/// retries, as iperf 2 prints them (`%d/%d%10d`).
pub(crate) fn sum_writes(writes: u64, retries: u64) -> String {
    format!("  {writes}/0{retries:10}")
}

/// Whether these received streams came in timed bursts (their intervals carry the transits).
fn timed(streams: &[&IntervalStream]) -> bool {
    streams.iter().any(|s| s.transit.is_some())
}

fn reads_column(reads: Option<landspeed_core::endpoint::ReadBins>) -> String {
    crate::iperf2_server_text::reads_column(reads.as_ref())
}

fn summed(
    reads: impl Iterator<Item = Option<landspeed_core::endpoint::ReadBins>>,
) -> Option<landspeed_core::endpoint::ReadBins> {
    crate::iperf2_server_text::summed(reads)
}

/// One stream's text line of interval `i` under `tag`: the columns, and `-e`'s enhanced ones when
/// this end sent it (`length_bytes`: the write size, for the writes column).
pub(crate) fn stream_line(
    tag: &str,
    (i, s): (&IntervalResult, &IntervalStream),
    sent: bool,
    (st, length_bytes): (&Iperf2Style, u64),
) -> String {
    let mut l = format!("{tag} {}", columns(i.start_s, i.end_s, s.bytes, st));
    if !sent && s.transit.is_some() {
        let secs = i.end_s - i.start_s;
        l += &crate::iperf2_server_text::trips_columns(s.transit.as_ref(), s.bytes, secs);
        l += &reads_column(s.reads);
    } else if !sent && st.enhanced && s.reads.is_some() {
        l += &reads_column(s.reads);
    }
    if st.enhanced && sent {
        let tcp = Tcp {
            retransmits: s.retransmits.unwrap_or(0),
            cwnd_bytes: s.cwnd_bytes.unwrap_or(0),
            rtt_us: s.rtt_us.unwrap_or(0),
            rtt_var_us: 0,
        };
        let secs = i.end_s - i.start_s;
        l += &match s.frames {
            Some(f) => enhanced_frames(f.writes, (s.bytes, secs), &tcp, (f.sent, f.skipped, f.slips)),
            None => enhanced(length_bytes, s.bytes, secs, &tcp),
        };
    }
    l + "\n"
}

/// `-e`'s columns of a TCP sender of frames, as iperf 2.1.8 prints them (its
/// `report_write_enhanced_isoch_format`): writes/errors, retries, cwnd/RTT, the frames begun,
/// skipped and slips (`frames`), net power.
pub(crate) fn enhanced_frames(
    writes: u64,
    (bytes, secs): (u64, f64),
    tcp: &Tcp,
    frames: (u64, u64, u64),
) -> String {
    format!(
        "  {writes}/0 {:8} {:8}K/{} us  {:9}/{}/{}        {}",
        tcp.retransmits,
        tcp.cwnd_bytes / 1024,
        tcp.rtt_us,
        frames.0,
        frames.1,
        frames.2,
        power(bytes, secs, tcp.rtt_us)
    )
}

/// iperf 2's net power of a TCP sender: bytes a second over the RTT in seconds, in millions.
fn power(bytes: u64, secs: f64, rtt_us: u32) -> u64 {
    if rtt_us > 0 && secs > 0.0 {
        (bytes as f64 / secs / (f64::from(rtt_us) / 1e6) / 1e6) as u64
    } else {
        0
    }
}

/// `0.0000-1.0000 sec  3.19 GBytes  27.4 Gbits/sec`: the columns every text line shares.
pub fn columns(start_s: f64, end_s: f64, bytes: u64, st: &Iperf2Style) -> String {
    let secs = (end_s - start_s).max(1e-9);
    format!(
        "{start_s:.4}-{end_s:.4} sec  {}s  {}s/sec",
        transfer(bytes, st.format),
        iperf2_rate(bytes as f64 * 8.0 / secs, st.format)
    )
}

/// `v` in `name` as iperf 2.1.8's `byte_snprintf` prints it: iperf3's three figures, but under
/// 0.9995 with three decimals (`0.000 Bytes`, where iperf3 prints `0.00 Bytes`).
fn iperf2_figures(v: f64, name: &str) -> String {
    match v.abs() < 0.9995 {
        true => format!("{v:4.3} {name}"),
        false => three_figures(v, name),
    }
}

/// iperf 2's adaptive unit ([`unit`]'s steps, [`iperf2_figures`]' digits).
fn iperf2_unit(value: f64, bytes: bool) -> String {
    let (step, names) = match bytes {
        true => (1024.0, ["Byte", "KByte", "MByte", "GByte", "TByte"]),
        false => (1000.0, ["bit", "Kbit", "Mbit", "Gbit", "Tbit"]),
    };
    let (mut v, mut k) = (value, 0);
    while v >= step && k < names.len() - 1 {
        v /= step;
        k += 1;
    }
    iperf2_figures(v, names[k])
}

/// A rate in `-f`'s unit as iperf 2 prints it: [`rate`]'s units, [`iperf2_figures`]' digits.
fn iperf2_rate(bits_per_s: f64, format: char) -> String {
    let fixed = |div: f64, name: &str| iperf2_figures(bits_per_s / div, name);
    match format {
        'A' => iperf2_unit(bits_per_s / 8.0, true),
        'k' => fixed(1e3, "Kbit"),
        'm' => fixed(1e6, "Mbit"),
        'g' => fixed(1e9, "Gbit"),
        't' => fixed(1e12, "Tbit"),
        'K' => fixed(8.0 * 1024.0, "KByte"),
        'M' => fixed(8.0 * 1048576.0, "MByte"),
        'G' => fixed(8.0 * 1073741824.0, "GByte"),
        'T' => fixed(8.0 * 1099511627776.0, "TByte"),
        _ => iperf2_unit(bits_per_s, false),
    }
}

/// The transfer column: adaptive, or `-f`'s fixed unit in bytes (iperf 2 prints `2608 MBytes` with
/// `-f m`).
fn transfer(bytes: u64, format: char) -> String {
    let power = match format.to_ascii_lowercase() {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        _ => return iperf2_unit(bytes as f64, true),
    };
    let v = bytes as f64 / 1024f64.powi(power);
    iperf2_figures(v, ["KByte", "MByte", "GByte"][power as usize - 1])
}

/// `-e`'s columns of a sending stream: writes/errors, retries, cwnd/RTT(var) and net power (bytes
/// per second over the RTT in seconds, in millions, as iperf 2 computes it).
pub(crate) fn enhanced(length_bytes: u64, bytes: u64, secs: f64, tcp: &Tcp) -> String {
    let writes = bytes / length_bytes.max(1);
    let rtt = tcp.rtt_us;
    let power = power(bytes, secs, rtt);
    format!(
        "  {writes}/0 {:10}  {:>6}K/{rtt}({}) us  {power}",
        tcp.retransmits,
        tcp.cwnd_bytes / 1024,
        tcp.rtt_var_us
    )
}

/// The TCP figures of `-e`'s columns (zero where the kernel gave none).
#[derive(Debug, Default)]
pub(crate) struct Tcp {
    pub(crate) retransmits: u64,
    pub(crate) cwnd_bytes: u64,
    pub(crate) rtt_us: u32,
    pub(crate) rtt_var_us: u32,
}

/// A stream's whole-test bytes and seconds from this end: what it wrote and its writing time when
/// it sends, what it read and its reading time when it receives.
fn whole(n: &Numbered) -> (u64, f64) {
    if n.received {
        (n.s.bytes_received, n.s.duration_s)
    } else {
        (n.s.bytes_sent, n.s.sender_elapsed_s)
    }
}

/// The test's last lines: each stream's total, a `[SUM]` per direction with more than one, and a
/// `[SUM]` of both directions for full duplex; in CSV one line per stream.
pub fn totals(r: &RunResult, st: &Iperf2Style) -> String {
    totals_at(r, st, &[Ends::of(r)])
}

/// `totals` with each connection's own ends (`each`, by connection number; the first's where
/// one is not known) in the CSV lines.
pub fn totals_at(r: &RunResult, st: &Iperf2Style, each: &[Ends]) -> String {
    let streams = numbered(r);
    if st.csv {
        let fallback = Ends::of(r);
        return streams
            .iter()
            .map(|n| {
                let (bytes, secs) = whole(n);
                let ends = each
                    .get(n.number as usize - 1)
                    .or(each.first())
                    .unwrap_or(&fallback);
                csv_line(
                    ends,
                    (n.number, n.received),
                    (r.started_unix_s + secs, 0.0, secs),
                    bytes,
                    st,
                )
            })
            .collect();
    }
    let mut t = String::new();
    let mut all = (0, 0.0_f64);
    for received in [false, true] {
        let group: Vec<&Numbered> = streams.iter().filter(|n| n.received == received).collect();
        let mut sum = (0, 0.0_f64);
        for (k, n) in group.iter().enumerate() {
            let (bytes, secs) = whole(n);
            sum = (sum.0 + bytes, sum.1.max(secs));
            let mut l = format!("{} {}", tag(n.number, received), columns(0.0, secs, bytes, st));
            let reads = crate::iperf2_server_text::reads_of(r, n.s.id);
            if received && r.config.spec.trip_times {
                let trips = crate::iperf2_server_text::trips_of(r, n.s.id, secs);
                l += &crate::iperf2_server_text::trips_columns(trips.as_ref(), bytes, secs);
                l += &reads_column(reads);
            } else if received && st.enhanced && reads.is_some() {
                l += &reads_column(reads);
            }
            if st.enhanced && !received {
                let tcp = n.s.tcp.as_ref().map_or(Tcp::default(), |t| Tcp {
                    retransmits: t.retransmits,
                    cwnd_bytes: t.cwnd_bytes,
                    rtt_us: t.rtt_us,
                    rtt_var_us: t.rtt_var_us,
                });
                // A stream of frames: the sender's counts, each stream's own (`-P`).
                let frames = frames_sent(r, k, group.len()).copied();
                l += &match frames {
                    Some(f) => {
                        enhanced_frames(f.datagrams, (bytes, secs), &tcp, (f.frames, f.skipped, f.slips))
                    }
                    None => enhanced(r.config.spec.length_bytes, bytes, secs, &tcp),
                };
            }
            t += &l;
            t.push('\n');
        }
        // Full duplex sums both directions together, never one alone.
        if group.len() > 1 && r.config.spec.direction != Direction::Bidir {
            let _ = writeln!(t, "{}", sum_line(r, &group, (received, sum), st));
        }
        all = (all.0 + sum.0, all.1.max(sum.1));
    }
    // Both directions' [SUM]: iperf 2.1.8 prints it with more than one connection, and with one
    // only when neither -i nor -e is given (with -i there is none; with -e it follows the [FDk]
    // lines, `full_duplex_tcp_totals`).
    let one_sum = st.interval_s.is_none();
    let shown = (connections(r) > 1 || one_sum) && !st.enhanced;
    if r.config.spec.direction == Direction::Bidir && shown {
        let _ = writeln!(t, "[SUM] {}", columns(0.0, all.1, all.0, st));
    }
    t
}

/// TCP `--full-duplex -e`: each connection's `[FDk]` line, its two directions' bytes together over
/// the interval (iperf 2.1.8's plain column head first when `head`: once in the whole output).
pub fn full_duplex_tcp(
    sent: &IntervalResult,
    received: &IntervalResult,
    st: &Iperf2Style,
    head: bool,
) -> String {
    let sorted = |i: &IntervalResult| {
        let mut s: Vec<&IntervalStream> = i.streams.iter().collect();
        s.sort_by_key(|s| s.id);
        s.iter().map(|s| s.bytes).collect::<Vec<u64>>()
    };
    let mut t = match head {
        true => column_head(&Iperf2Style {
            enhanced: false,
            ..st.clone()
        })
        .to_string(),
        false => String::new(),
    };
    for (k, (a, b)) in sorted(sent).iter().zip(sorted(received)).enumerate() {
        let _ = writeln!(
            t,
            "[FD{}] {}",
            k + 1,
            columns(sent.start_s, sent.end_s, a + b, st)
        );
    }
    t
}

/// TCP full duplex: an interval's `[SUM]` of both directions of every connection (iperf 2.1.8
/// prints one with more than one connection).
pub fn full_duplex_tcp_sum(sent: &IntervalResult, received: &IntervalResult, st: &Iperf2Style) -> String {
    let bytes: u64 = (sent.streams.iter().chain(&received.streams))
        .map(|s| s.bytes)
        .sum();
    format!("[SUM] {}\n", columns(sent.start_s, sent.end_s, bytes, st))
}

/// TCP `--full-duplex -e`'s closing `[FDk]` lines: each connection's two directions' bytes over the
/// longer of their times (the plain column head first when `head`), then with more than one
/// connection the `[SUM]` of all.
pub fn full_duplex_tcp_totals(r: &RunResult, st: &Iperf2Style, head: bool) -> String {
    let streams = numbered(r);
    let mut t = String::new();
    let mut all = (0, 0.0_f64);
    for n in streams.iter().filter(|n| !n.received) {
        let back = streams.iter().find(|m| m.received && m.number == n.number);
        let ((a, ta), (b, tb)) = (whole(n), back.map_or((0, 0.0), whole));
        all = (all.0 + a + b, all.1.max(ta).max(tb));
        let _ = writeln!(t, "[FD{}] {}", n.number, columns(0.0, ta.max(tb), a + b, st));
    }
    if connections(r) > 1 {
        let _ = writeln!(t, "[SUM] {}", columns(0.0, all.1, all.0, st));
    }
    match (head, t.is_empty()) {
        (true, false) => {
            let plain = Iperf2Style {
                enhanced: false,
                ..st.clone()
            };
            column_head(&plain).to_string() + &t
        }
        _ => t,
    }
}

/// A direction's closing `[SUM]` (`sum`: its bytes and longest span): a timed test's received
/// streams' with their reads, under the reads' head when no interval printed it.
fn sum_line(
    r: &RunResult,
    group: &[&Numbered],
    (received, sum): (bool, (u64, f64)),
    st: &Iperf2Style,
) -> String {
    let plain = format!("[SUM] {}", columns(0.0, sum.1, sum.0, st));
    let reads = summed(
        group
            .iter()
            .map(|n| crate::iperf2_server_text::reads_of(r, n.s.id)),
    );
    if received && st.enhanced && !r.config.spec.trip_times && reads.is_some() {
        return format!("{plain}{}", reads_column(reads));
    }
    if !received && st.enhanced && r.config.spec.transport == landspeed_core::config::Transport::Tcp {
        let retries = group
            .iter()
            .filter_map(|n| n.s.tcp.as_ref())
            .map(|t| t.retransmits)
            .sum();
        let counted = r
            .frames
            .as_ref()
            .map(|f| f.sender_streams.iter().map(|s| s.datagrams).sum());
        let writes = counted.filter(|_| group.len() > 1);
        return plain
            + &sum_writes(
                writes.unwrap_or(sum.0 / r.config.spec.length_bytes.max(1)),
                retries,
            );
    }
    if !(received && r.config.spec.trip_times) {
        return plain;
    }
    let head = match st.interval_s {
        Some(_) => "",
        None => crate::iperf2_server_text::READS_HEAD,
    };
    format!("{head}{plain}{}", reads_column(reads))
}

/// One `-y C` line: `time,local ip,local port,remote ip,remote port,id,start-end,bytes,bits/s`
/// (`when`: the line's time in Unix seconds, then the span; with `-e` the time to the millisecond);
/// a received stream's line names the sending end first.
pub(crate) fn csv_line(
    ends: &Ends,
    (number, received): (u32, bool),
    when: (f64, f64, f64),
    bytes: u64,
    st: &Iperf2Style,
) -> String {
    let (stamp, start, end) = when;
    let ((lip, lport), (rip, rport)) = (&ends.local, &ends.remote);
    let pair = if received {
        format!("{rip},{rport},{lip},{lport}")
    } else {
        format!("{lip},{lport},{rip},{rport}")
    };
    let bps = bytes as f64 * 8.0 / (end - start).max(1e-9);
    // With -e iperf 2.1.8 stamps its CSV lines to the millisecond.
    let stamp = match st.enhanced {
        true => format!(
            "{}.{:03}",
            strftime(stamp, "%Y%m%d%H%M%S"),
            ((stamp.fract() * 1000.0) as u32).min(999)
        ),
        false => strftime(stamp, "%Y%m%d%H%M%S"),
    };
    format!("{stamp},{pair},{number},{start:.1}-{end:.1},{bytes},{bps:.0}\n")
}

/// The UDP client's head: the datagram size and the gap between datagrams its rate sets (iperf 2's
/// "IPG target"), as iperf 2.1.8 prints them (the buffer size is the kernel's, not asked).
pub fn head_udp(
    host: &str,
    port: u16,
    (length_bytes, stream_rate_bps): (u64, f64),
    frames: Option<landspeed_core::frames::FrameSpec>,
    h: &TcpHead,
) -> String {
    let sending = match frames {
        Some(f) => frames_line(&f),
        None => {
            let ipg_us =
                (h.ipg_given_ms).unwrap_or(length_bytes as f64 * 8.0 / stream_rate_bps.max(1.0) * 1e6);
            format!("Sending {length_bytes} byte datagrams, IPG target: {ipg_us:.2} us (kalman adjust)")
        }
    };
    let mut t = format!("{DASHES}\nClient connecting to {host}, UDP port {port}");
    // -e's type-of-service line comes before the datagrams' line, after the frames'.
    let tos = h
        .enhanced
        .as_ref()
        .map(|e| format!("TOS set to {:#x} (Nagle on)\n", e.tos));
    let tos = tos.unwrap_or_default();
    match &h.enhanced {
        None => t.push('\n'),
        Some(e) => {
            let _ = writeln!(t, " with pid {} ({} flows)", e.pid, e.flows);
        }
    }
    t += &match frames {
        Some(_) => sending + "\n" + &tos,
        None => tos + &sending + "\n",
    };
    let buffer = window_line(h.window).replacen("TCP window size", "UDP buffer size", 1);
    t + &buffer + "\n" + DASHES + "\n"
}

/// iperf 2.1.8's head line for frames: their period and the gap within a frame (`--ipg`; 0.000
/// when a frame's datagrams go back to back), milliseconds.
fn frames_line(f: &landspeed_core::frames::FrameSpec) -> String {
    format!(
        "Isochronous: {:.2} frames/sec mean={}, stddev={}, Period/IPG={:.2}/{:.3} ms",
        f.fps,
        rate_text(f.mean_bps),
        rate_text(f.stddev_bps),
        1e3 / f.fps,
        f.ipg_ns as f64 / 1e6
    )
}

/// A rate as iperf 2 prints the isochronous mean (its `byte_snprintf`): three significant digits
/// four characters wide (`%4.2f`, `%4.1f` or `%4.0f`), and bit/s, Kbit/s, Mbit/s or Gbit/s
/// (powers of 1000).
fn rate_text(bps: f64) -> String {
    let (v, unit) = match bps {
        b if b >= 1e9 => (b / 1e9, "Gbit/s"),
        b if b >= 1e6 => (b / 1e6, "Mbit/s"),
        b if b >= 1e3 => (b / 1e3, "Kbit/s"),
        b => (b, "bit/s"),
    };
    // iperf 2.1.8's byte_snprintf: four places (0.000 below 0.9995).
    let digits = match v {
        v if v >= 99.95 => 0,
        v if v >= 9.995 => 1,
        v if v >= 0.9995 => 2,
        _ => 3,
    };
    format!("{v:4.digits$} {unit}")
}

/// The UDP client's column head (`-e`'s: writes and packets a second; with frames, iperf 2's
/// isochronous columns too).
pub fn column_head_udp(st: &Iperf2Style, frames: bool) -> &'static str {
    if st.enhanced && frames {
        "[ ID] Interval            Transfer     Bandwidth      Write/Err  PPS  isoch:tx/miss/slip\n"
    } else if st.enhanced {
        "[ ID] Interval            Transfer     Bandwidth      Write/Err  PPS\n"
    } else {
        "[ ID] Interval       Transfer     Bandwidth\n"
    }
}

/// `-e`'s columns of a UDP sender: datagrams written (and refused) and datagrams a second; `writes`
/// where the sender counted them (frames' datagrams vary in size), else bytes ÷ the datagram size.
pub(crate) fn udp_enhanced(length_bytes: u64, bytes: u64, secs: f64, writes: Option<u64>) -> String {
    let writes = writes.unwrap_or(bytes / length_bytes.max(1));
    let pps = (writes as f64 / secs.max(1e-9)).round() as u64;
    format!("  {writes}/0{pps:>9} pps")
}

/// One interval of a UDP client's sending streams: each stream's line and a `[SUM]` with more than
/// one; in CSV iperf 2.1.8's UDP columns (jitter, lost and pct zero, its datagrams, none out of
/// order).
pub fn interval_udp(i: &IntervalResult, st: &Iperf2Style, at: (&Ends, f64, u64)) -> String {
    udp_interval_lines(i, st, at, true)
}

/// [`interval_udp`] without the `[SUM]` (UDP `--full-duplex -P`, whose sum takes both ways).
pub fn interval_udp_streams(i: &IntervalResult, st: &Iperf2Style, at: (&Ends, f64, u64)) -> String {
    udp_interval_lines(i, st, at, false)
}

fn udp_interval_lines(i: &IntervalResult, st: &Iperf2Style, at: (&Ends, f64, u64), sums: bool) -> String {
    let (ends, stamp, length_bytes) = at;
    let mut ids: Vec<&IntervalStream> = i.streams.iter().collect();
    ids.sort_by_key(|s| s.id);
    let secs = i.end_s - i.start_s;
    let mut t = String::new();
    for (k, s) in ids.iter().enumerate() {
        let number = k as u32 + 1;
        if st.csv {
            let line = csv_line(ends, (number, false), (stamp, i.start_s, i.end_s), s.bytes, st);
            let datagrams = s.bytes / length_bytes.max(1);
            let _ = writeln!(t, "{},0.000,0,{datagrams},0.000,0", line.trim_end());
            continue;
        }
        let mut l = format!(
            "{} {}",
            tag(number, false),
            columns(i.start_s, i.end_s, s.bytes, st)
        );
        if st.enhanced {
            l += &udp_enhanced(length_bytes, s.bytes, secs, s.datagrams_sent);
            if let Some(f) = s.frames {
                l += &isoch_columns(f.sent, f.skipped, f.slips);
            }
        }
        let _ = writeln!(t, "{l}");
    }
    if sums && !st.csv && ids.len() > 1 {
        let sum: u64 = ids.iter().map(|s| s.bytes).sum();
        let mut l = format!("[SUM] {}", columns(i.start_s, i.end_s, sum, st));
        if st.enhanced {
            let writes = ids.iter().map(|s| s.datagrams_sent).sum::<Option<u64>>();
            l += &udp_enhanced(length_bytes, sum, secs, writes);
        }
        let _ = writeln!(t, "{l}");
    }
    t
}

/// iperf 2's `%.2g` of a loss percentage: two significant figures, no trailing zeros.
pub(crate) fn two_figures(pct: f64) -> String {
    if pct == 0.0 || !pct.is_finite() {
        return "0".into();
    }
    let digits = (1 - pct.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{pct:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The UDP client's last lines: each stream's total and "Sent N datagrams" (a `[SUM]` and
/// `[SUM-N]` with more than one), then each stream's "Server Report" from the server's figures; in
/// CSV one line per stream with iperf 2.1.8's closing columns (its `-1` datagrams included).
pub fn totals_udp(r: &RunResult, st: &Iperf2Style) -> String {
    let streams = numbered(r);
    if st.csv {
        let ends = Ends::of(r);
        return streams
            .iter()
            .map(|n| {
                let (bytes, secs) = (n.s.bytes_sent, n.s.sender_elapsed_s);
                let line = csv_line(
                    &ends,
                    (n.number, false),
                    (r.started_unix_s + secs, 0.0, secs),
                    bytes,
                    st,
                );
                format!("{},0.000,0,-1,-0.000,0\n", line.trim_end())
            })
            .collect();
    }
    sent_totals(r, st, true) + &server_reports(&streams, st)
}

/// Each UDP stream sent's total and "Sent N datagrams", and with `sums` and several streams their
/// `[SUM]` and `[SUM-N]`. A sender of frames counts its own datagrams (they vary in size), each
/// stream's where the result holds them (`-P`), its end included in the count sent.
fn sent_totals(r: &RunResult, st: &Iperf2Style, sums: bool) -> String {
    let len = r.config.spec.length_bytes.max(1);
    let streams = numbered(r);
    let mut t = String::new();
    let (mut bytes_all, mut secs_all, mut sent_all) = (0, 0.0_f64, 0);
    let mut writes_all: Option<u64> = Some(0);
    for (k, n) in streams.iter().enumerate() {
        let (bytes, secs) = (n.s.bytes_sent, n.s.sender_elapsed_s);
        let own = frames_sent(r, k, streams.len());
        let mut l = format!("{} {}", tag(n.number, false), columns(0.0, secs, bytes, st));
        if st.enhanced {
            l += &udp_enhanced(len, bytes, secs, own.map(|f| f.datagrams));
            if let Some(f) = own {
                l += &isoch_columns(f.frames, f.skipped, f.slips);
            }
        }
        let sent = own.map_or(bytes / len, |f| f.datagrams + 1);
        let _ = writeln!(t, "{l}\n{} Sent {sent} datagrams", tag(n.number, false));
        (bytes_all, secs_all, sent_all) = (bytes_all + bytes, secs_all.max(secs), sent_all + sent);
        writes_all = writes_all.zip(own).map(|(w, f)| w + f.datagrams);
    }
    if sums && streams.len() > 1 {
        let mut l = format!("[SUM] {}", columns(0.0, secs_all, bytes_all, st));
        if st.enhanced {
            l += &udp_enhanced(len, bytes_all, secs_all, writes_all);
        }
        let _ = writeln!(t, "{l}\n[SUM-{}] Sent {sent_all} datagrams", streams.len());
    }
    t
}

/// The sender's frames of stream `k` (in id order) of `of`: the test's own with one stream, each
/// stream's where the result holds them.
fn frames_sent(r: &RunResult, k: usize, of: usize) -> Option<&landspeed_core::frames::FramesSent> {
    let f = r.frames.as_ref()?;
    match of {
        1 => f.sender.as_ref(),
        _ => f.sender_streams.get(k),
    }
}

/// UDP `-d -P`'s closing lines of the client's streams (`sent`: this end's streams, with the
/// server's reports), then a `[SUM]` of every stream both ways (`received`: the streams received's
/// bytes, datagrams and longest time) and `[SUM-2N] Sent` of their datagrams, then the server's
/// reports, as iperf 2.1.8's client prints them (text only: CSV has no sums).
pub fn totals_udp_dual(sent: &RunResult, received: (u64, u64, f64), st: &Iperf2Style) -> String {
    let len = sent.config.spec.length_bytes.max(1);
    let streams = numbered(sent);
    let mut t = sent_totals(sent, st, false);
    let (mut bytes, mut datagrams, mut secs) = received;
    for n in &streams {
        bytes += n.s.bytes_sent;
        datagrams += n.s.bytes_sent / len;
        secs = secs.max(n.s.sender_elapsed_s);
    }
    // With -e iperf 2.1.8 adds the received datagrams as its writes and every datagram a second.
    let enhanced = match st.enhanced {
        true => format!("  {}/0{:>9.0} pps", received.1, datagrams as f64 / secs.max(1e-9)),
        false => String::new(),
    };
    let _ = writeln!(
        t,
        "[SUM] {}{enhanced}\n[SUM-{}] Sent {datagrams} datagrams",
        columns(0.0, secs, bytes, st),
        2 * streams.len()
    );
    t + &server_reports(&streams, st)
}

/// UDP `--full-duplex`'s last lines, as iperf 2.1.8's client prints them: each stream sent (its
/// total and "Sent N datagrams"), then each received (`[ *N]`: jitter, lost/total), no server report
/// (none comes); `head`: the received lines' column head first (when no interval printed it). In
/// CSV each stream's line, as for `-u` and `-u -R`.
pub fn totals_udp_both(r: &RunResult, st: &Iperf2Style, head: bool) -> String {
    let part = |received: bool| {
        let mut p = one_way(r, received);
        // No report comes back: what this end sent has no receiver's figures.
        for s in &mut p.streams {
            s.udp = s.udp.filter(|_| received);
        }
        p
    };
    let (sent, got) = (part(false), part(true));
    if st.csv {
        return totals_udp(&sent, st) + &totals_udp_received(&got, st);
    }
    let no_intervals = head;
    let head = if head { column_head_udp_received(st) } else { "" };
    let mut t = sent_totals(&sent, st, false) + head + &received_totals(&got, st, false);
    // iperf 2.1.8 sums both ways with several streams, and with one when it printed neither `-e`'s
    // `[FD1]` nor any interval.
    let sum = sent.streams.len() > 1 || (!st.enhanced && no_intervals);
    if st.enhanced || sum {
        t += COLUMN_HEAD_FULL_DUPLEX;
    }
    if st.enhanced {
        t += &full_duplex_totals(r, st);
    }
    if sum {
        t += &full_duplex_sum(r, st);
    }
    t
}

/// UDP `--full-duplex`'s closing `[SUM]` of every stream both ways (bytes, datagrams: the
/// streams sent's by their bytes, the ones received's by their numbers; their rate over the
/// longest span of either way, as 2.1.8 takes it) and `[SUM-N]`'s count of them all, as iperf 2.1.8's client prints them.
fn full_duplex_sum(r: &RunResult, st: &Iperf2Style) -> String {
    let len = r.config.spec.length_bytes.max(1);
    let (mut bytes, mut datagrams, mut secs) = (0, 0, 0f64);
    for s in &r.streams {
        if receives(s.flow) {
            bytes += s.bytes_received;
            datagrams += s
                .udp
                .as_ref()
                .map_or(0, |u| u.datagrams_sent.unwrap_or(u.datagrams_received));
            secs = secs.max(s.duration_s);
        } else {
            bytes += s.bytes_sent;
            datagrams += s.bytes_sent / len;
            secs = secs.max(s.sender_elapsed_s);
        }
    }
    let line = full_duplex_line(0, (0.0, secs), (bytes, datagrams), st);
    format!("{line}[SUM-{}] Sent {datagrams} datagrams\n", r.streams.len())
}

/// The column head of UDP `--full-duplex -e`'s `[FDk]` lines.
const COLUMN_HEAD_FULL_DUPLEX: &str = "[ ID] Interval       Transfer     Bandwidth    Datagrams   PPS\n";

/// UDP `--full-duplex`'s lines of both directions over one interval, as iperf 2.1.8's client prints
/// them: with `-e` each connection's `[FDk]` (both directions' bytes and datagrams, the stream
/// sent's by its bytes, the one received's by its numbers, and their rate a second), with `-P` the
/// `[SUM]` of all (`head`: the column head first); nothing for one connection without `-e`.
pub fn full_duplex_interval(
    (sent, received): (&IntervalResult, &IntervalResult),
    st: &Iperf2Style,
    (length_bytes, head): (u64, bool),
) -> String {
    let sorted = |i: &IntervalResult| {
        let mut v: Vec<IntervalStream> = i.streams.clone();
        v.sort_by_key(|s| s.id);
        v
    };
    let (sent_each, got_each) = (sorted(sent), sorted(received));
    let several = sent_each.len() > 1;
    if !(st.enhanced || several) {
        return String::new();
    }
    let mut t = if head { COLUMN_HEAD_FULL_DUPLEX } else { "" }.to_string();
    let (mut bytes, mut datagrams) = (0, 0);
    for (k, (s, r)) in sent_each.iter().zip(&got_each).enumerate() {
        // The stream sent's by its bytes (iperf 2.1.8 counts 91 where its write column says 90).
        let count = s.bytes / length_bytes.max(1) + r.datagrams_sent.unwrap_or(0);
        let (both, span) = ((s.bytes + r.bytes, count), (sent.start_s, sent.end_s));
        (bytes, datagrams) = (bytes + both.0, datagrams + count);
        if st.enhanced {
            t += &full_duplex_line(k as u32 + 1, span, both, st);
        }
    }
    if several {
        t += &full_duplex_line(0, (sent.start_s, sent.end_s), (bytes, datagrams), st);
    }
    t
}

/// The `[FDk]` totals: each connection's streams both ways (the one sent's datagrams its end
/// included, as "Sent N datagrams" counts them; the one received's by its numbers) over the sending
/// time.
fn full_duplex_totals(r: &RunResult, st: &Iperf2Style) -> String {
    let len = r.config.spec.length_bytes.max(1);
    let side = |received: bool| {
        let mut v: Vec<&StreamResult> = r
            .streams
            .iter()
            .filter(|s| receives(s.flow) == received)
            .collect();
        v.sort_by_key(|s| s.id);
        v
    };
    let mut t = String::new();
    for (k, (s, b)) in side(false).iter().zip(side(true)).enumerate() {
        let got = b
            .udp
            .as_ref()
            .map_or(0, |u| u.datagrams_sent.unwrap_or(u.datagrams_received));
        let both = (s.bytes_sent + b.bytes_received, s.bytes_sent / len + got);
        t += &full_duplex_line(k as u32 + 1, (0.0, s.sender_elapsed_s), both, st);
    }
    t
}

/// One `[FDk]` line (`[SUM]` for k = 0): `bytes` and `datagrams` both ways over the span.
fn full_duplex_line(
    k: u32,
    (start_s, end_s): (f64, f64),
    (bytes, datagrams): (u64, u64),
    st: &Iperf2Style,
) -> String {
    let pps = datagrams as f64 / (end_s - start_s).max(1e-9);
    let tag = match k {
        0 => "[SUM]".to_string(),
        k => format!("[FD{k}]"),
    };
    format!(
        "{tag} {} {datagrams}{pps:8.0} pps\n",
        columns(start_s, end_s, bytes, st)
    )
}

/// The result with only the streams this end received (`received`), or only those it sent.
pub fn one_way(r: &RunResult, received: bool) -> RunResult {
    RunResult {
        streams: r
            .streams
            .iter()
            .filter(|s| receives(s.flow) == received)
            .cloned()
            .collect(),
        ..r.clone()
    }
}

/// iperf 2's `isoch:tx/miss/slip` columns: frames begun, skipped, and the sender's late returns.
fn isoch_columns(sent: u64, skipped: u64, slips: u64) -> String {
    format!(" {sent:>4}/{skipped}/{slips}")
}

/// The column head of a UDP receiver's lines (a server's report, or the client's own with `-R`).
pub const COLUMN_HEAD_UDP_RECEIVED: &str =
    "[ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams\n";

/// The column head of the client's own UDP receiver lines: `-e`'s with the transit, PPS, Little's
/// law and net power columns, else [`COLUMN_HEAD_UDP_RECEIVED`].
pub fn column_head_udp_received(st: &Iperf2Style) -> &'static str {
    if st.enhanced {
        "[ ID] Interval            Transfer     Bandwidth        Jitter   Lost/Total  Latency avg/min/max/stdev PPS  Rx/inP  NetPwr\n"
    } else {
        COLUMN_HEAD_UDP_RECEIVED
    }
}

/// `-e`'s columns of a UDP stream this end received (`bytes` over `secs`), as iperf 2.1.8's
/// receiver prints them: the datagrams' one-way transit mean/least/most/standard deviation, their
/// pace (PPS), how many came and how many were in flight by Little's law (the pace times the mean
/// transit, and times its deviation), and the net power (bytes a second over the mean transit,
/// scaled by 10⁻⁶); with no datagram in the span, dashes.
pub(crate) fn transit_columns(t: Option<&TransitSummary>, bytes: u64, secs: f64) -> String {
    let Some(t) = t.filter(|t| t.datagrams > 0) else {
        return " -/-/-/- ms 0 pps".into();
    };
    let lambda = t.per_s.round();
    let in_flight = (lambda * t.mean_ms / 1e3).round() as i64;
    let varying = (lambda * t.stddev_ms / 1e3).round() as i64;
    format!(
        " {:.3}/{:.3}/{:.3}/{:.3} ms {:.0} pps {}/{in_flight}({varying}) pkts {}",
        t.mean_ms,
        t.min_ms,
        t.max_ms,
        t.stddev_ms,
        t.per_s,
        t.datagrams,
        net_power(bytes, secs, t.mean_ms)
    )
}

/// iperf 2's NetPwr: bytes a second over the mean transit in seconds, times 10⁻⁶, printed with
/// fewer decimals the larger it is (`NAN` with no transit).
pub(crate) fn net_power(bytes: u64, secs: f64, mean_ms: f64) -> String {
    if mean_ms == 0.0 || secs <= 0.0 {
        return "NAN".into();
    }
    let v = 1e-6 * (bytes as f64 / secs) / (mean_ms / 1e3);
    match v {
        v if v < -1e7 => "OBL".into(),
        v if v > 100.0 => format!("{v:.0}"),
        v if v > 10.0 => format!("{v:.2}"),
        v => format!("{v:.6}"),
    }
}

/// Each stream's "Server Report": what the server received, its jitter, lost/total and the
/// datagrams out of order, as the report it sent says.
fn server_reports(streams: &[Numbered], st: &Iperf2Style) -> String {
    let mut t = String::new();
    for (k, n) in streams.iter().enumerate() {
        if n.s.udp.is_none() {
            continue;
        }
        let _ = writeln!(t, "{} Server Report:", tag(n.number, false));
        // The server's transit when its report carried it (its -e, or --trip-times), as 2.1.8's
        // client prints it then.
        let shown = Iperf2Style {
            enhanced: n.s.udp.as_ref().is_some_and(|u| u.transit.is_some()),
            ..st.clone()
        };
        if k == 0 {
            t += column_head_udp_received(&shown);
        }
        t += &received_total(n.s, (n.number, false), &shown);
    }
    t
}

/// A UDP stream received, as iperf 2 prints it (`[ *N]` with its reverse mark when `mark`, else
/// `[  N]`): its bytes and rate over its span, jitter, lost/total (the loss to two figures), and
/// the datagrams out of order when there were any.
pub(crate) fn received_total(s: &StreamResult, (number, mark): (u32, bool), st: &Iperf2Style) -> String {
    let Some(u) = s.udp.as_ref() else {
        return String::new();
    };
    let tag = tag(number, mark);
    let total = u
        .datagrams_sent
        .unwrap_or(u.datagrams_received + u.datagrams_lost);
    let secs = s.duration_s;
    let more = match st.enhanced {
        true => transit_columns(u.transit.as_ref(), s.bytes_received, secs),
        false => String::new(),
    };
    let mut t = format!(
        "{tag} {}  {:6.3} ms {}/{total} ({}%){more}\n",
        columns(0.0, secs, s.bytes_received, st),
        u.jitter_ms,
        u.datagrams_lost,
        two_figures(u.loss_pct)
    );
    if u.out_of_order > 0 {
        let _ = writeln!(
            t,
            "{tag} 0.0000-{secs:.4} sec  {} datagrams received out-of-order",
            u.out_of_order
        );
    }
    t
}

/// One interval of the UDP `-R` client's stream (`[ *1]`): its bytes, the jitter at its end and
/// its lost/total; in CSV iperf 2.1.8's receiver columns (out of order not counted per interval: 0).
pub fn interval_udp_received(i: &IntervalResult, st: &Iperf2Style, at: (&Ends, f64)) -> String {
    received_interval_lines(i, st, at, true)
}

/// [`interval_udp_received`] without the `[SUM]` (UDP `--full-duplex -P`, whose sum takes both
/// ways).
pub fn interval_udp_received_streams(i: &IntervalResult, st: &Iperf2Style, at: (&Ends, f64)) -> String {
    received_interval_lines(i, st, at, false)
}

fn received_interval_lines(i: &IntervalResult, st: &Iperf2Style, at: (&Ends, f64), sums: bool) -> String {
    let mut t = String::new();
    let mut sum = (0u64, 0u64, 0u64);
    for (k, s) in i.streams.iter().enumerate() {
        let (sent, lost) = (s.datagrams_sent.unwrap_or(0), s.datagrams_lost.unwrap_or(0));
        sum = (sum.0 + s.bytes, sum.1 + lost, sum.2 + sent);
        t += &received_interval((i, s), st, at, (k as u32 + 1, true));
    }
    if sums && i.streams.len() > 1 && !st.csv {
        let pps = sum_pps(i.streams.iter().map(|s| s.transit.as_ref()));
        t += &received_sum((i.start_s, i.end_s), sum, pps, st);
    }
    t
}

/// The pace of several received streams together, as iperf 2's `[SUM]` takes it: all their
/// datagrams over the longest of their arrival spans.
pub(crate) fn sum_pps<'a>(each: impl Iterator<Item = Option<&'a TransitSummary>>) -> f64 {
    let (mut datagrams, mut span_s) = (0u64, 0f64);
    for t in each.flatten().filter(|t| t.per_s > 0.0) {
        datagrams += t.datagrams;
        span_s = span_s.max(t.datagrams as f64 / t.per_s);
    }
    if span_s > 0.0 {
        datagrams as f64 / span_s
    } else {
        0.0
    }
}

/// One received UDP stream's line of an interval (`tag`: its number, and whether it carries iperf
/// 2's reverse mark): bytes, the jitter at the interval's end, lost/total; in CSV the receiver's
/// columns.
pub(crate) fn received_interval(
    (i, s): (&IntervalResult, &IntervalStream),
    st: &Iperf2Style,
    (ends, stamp): (&Ends, f64),
    (number, mark): (u32, bool),
) -> String {
    let (sent, lost) = (s.datagrams_sent.unwrap_or(0), s.datagrams_lost.unwrap_or(0));
    let pct = if sent > 0 {
        lost as f64 * 100.0 / sent as f64
    } else {
        0.0
    };
    let jitter = s.jitter_ms.unwrap_or(0.0);
    if st.csv {
        let line = csv_line(ends, (number, true), (stamp, i.start_s, i.end_s), s.bytes, st);
        return format!("{},{jitter:.3},{lost},{sent},{pct:.3},0\n", line.trim_end());
    }
    let more = match st.enhanced {
        true => transit_columns(s.transit.as_ref(), s.bytes, i.end_s - i.start_s),
        false => String::new(),
    };
    format!(
        "{} {}  {jitter:6.3} ms {lost}/{sent} ({}%){more}\n",
        tag(number, mark),
        columns(i.start_s, i.end_s, s.bytes, st),
        two_figures(pct)
    )
}

/// The `[SUM]` of several received UDP streams, as iperf 2.1.8's `-u -R -P` client prints it: a
/// plain column head, then the bytes, rate and lost/total of all (no jitter); with `-e` the
/// writer's head and its columns filled with lost/total and the pace (`pps`), as 2.1.8 prints it.
pub(crate) fn received_sum(
    (start_s, end_s): (f64, f64),
    (bytes, lost, sent): (u64, u64, u64),
    pps: f64,
    st: &Iperf2Style,
) -> String {
    if st.enhanced {
        return format!(
            "[ ID] Interval            Transfer     Bandwidth      Write/Err  PPS\n[SUM] {}  {lost}/{sent} {pps:8.0} pps\n",
            columns(start_s, end_s, bytes, st)
        );
    }
    let pct = if sent > 0 {
        lost as f64 * 100.0 / sent as f64
    } else {
        0.0
    };
    format!(
        "[ ID] Interval       Transfer     Bandwidth\n[SUM] {}   {lost}/{sent} ({}%)\n",
        columns(start_s, end_s, bytes, st),
        two_figures(pct)
    )
}

/// The UDP `-R` client's last line: the stream it received (`[ *1]`), its jitter and lost/total;
/// in CSV iperf 2.1.8's receiver columns (the server's address first, jitter, lost, total, loss
/// percentage, out of order).
pub fn totals_udp_received(r: &RunResult, st: &Iperf2Style) -> String {
    let streams = numbered(r);
    if !st.csv {
        return received_totals(r, st, true);
    }
    let ends = Ends::of(r);
    streams
        .iter()
        .filter_map(|n| received_csv(n.s, &ends, (n.number, r.started_unix_s), st))
        .collect()
}

/// Each UDP stream received's total (`[ *N]`), and with `sums` and several streams their `[SUM]`.
fn received_totals(r: &RunResult, st: &Iperf2Style, sums: bool) -> String {
    let streams = numbered(r);
    let t: String = streams
        .iter()
        .map(|n| received_total(n.s, (n.number, true), st))
        .collect();
    if !sums || streams.len() < 2 {
        return t;
    }
    let (mut secs, mut sum) = (0f64, (0, 0, 0));
    for (n, u) in streams.iter().filter_map(|n| Some((n, n.s.udp.as_ref()?))) {
        let total = u
            .datagrams_sent
            .unwrap_or(u.datagrams_received + u.datagrams_lost);
        sum = (
            sum.0 + n.s.bytes_received,
            sum.1 + u.datagrams_lost,
            sum.2 + total,
        );
        secs = secs.max(n.s.duration_s);
    }
    let pps = sum_pps(streams.iter().map(|n| n.s.udp.as_ref()?.transit.as_ref()));
    t + &received_sum((0.0, secs), sum, pps, st)
}

/// A received UDP stream's closing `-y C` line (iperf 2.1.8's receiver columns: the sending end
/// first, jitter, lost, total, loss percentage, out of order); None for a stream with no datagram
/// counts.
pub(crate) fn received_csv(
    s: &StreamResult,
    ends: &Ends,
    (number, started_unix_s): (u32, f64),
    st: &Iperf2Style,
) -> Option<String> {
    let u = s.udp.as_ref()?;
    let secs = s.duration_s;
    let line = csv_line(
        ends,
        (number, true),
        (started_unix_s + secs, 0.0, secs),
        s.bytes_received,
        st,
    );
    let total = u
        .datagrams_sent
        .unwrap_or(u.datagrams_received + u.datagrams_lost);
    Some(format!(
        "{},{:.3},{},{total},{:.3},{}\n",
        line.trim_end(),
        u.jitter_ms,
        u.datagrams_lost,
        u.loss_pct,
        u.out_of_order
    ))
}
