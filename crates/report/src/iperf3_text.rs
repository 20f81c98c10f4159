//! A `RunResult` as iperf3's client prints it in text: the "Connecting to host" lines, one line per
//! stream per interval (and a `[SUM]` line with more than one stream), the separator, and the
//! `sender`/`receiver` summary lines, with iperf3's columns and its adaptive units (bytes in powers of
//! 1024, bits per second in powers of 1000, three significant figures). For `landspeed iperf3`, so a
//! script that reads iperf3's text reads this. `--bidir`'s role column is not drawn (docs/iperf3.md).

use crate::iperf3_json::host_port;
use landspeed_core::config::{Flow, Transport};
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult, StreamResult};
use std::fmt::Write;

const SEPARATOR: &str = "- - - - - - - - - - - - - - - - - - - - - - - - -";

/// iperf3's adaptive unit: `1.60 GByte`, `895 KByte`, `13.7 Gbit` (the caller adds `s` or `s/sec`).
pub fn unit(value: f64, bytes: bool) -> String {
    let (step, names) = if bytes {
        (1024.0, ["Byte", "KByte", "MByte", "GByte", "TByte"])
    } else {
        (1000.0, ["bit", "Kbit", "Mbit", "Gbit", "Tbit"])
    };
    let (mut v, mut k) = (value, 0);
    while v >= step && k < names.len() - 1 {
        v /= step;
        k += 1;
    }
    three_figures(v, names[k])
}

/// `v` in `name` to three significant figures, four wide, as iperf (2 and 3) prints: `9.95 Mbit`,
/// `13.7 Gbit`, ` 895 KByte`.
pub fn three_figures(v: f64, name: &str) -> String {
    if v < 9.995 {
        format!("{v:4.2} {name}")
    } else if v < 99.95 {
        format!("{v:4.1} {name}")
    } else {
        format!("{v:4.0} {name}")
    }
}

/// iperf3's stream numbers: its client's data sockets from 4, its server's from 5.
fn id(st: &Style, s: u32) -> u32 {
    s + if st.server { 5 } else { 4 }
}

fn udp(r: &RunResult) -> bool {
    r.config.spec.transport == Transport::Udp
}

/// How the text is drawn: iperf3's `-f` (rate units), `--timestamps` and `-V`.
#[derive(Debug, Clone)]
pub struct Style {
    /// `a` (adaptive bits, the default), `A` (adaptive bytes), `k`/`m`/`g`/`t` (fixed bits) or
    /// `K`/`M`/`G`/`T` (fixed bytes, powers of 1024), per second.
    pub rate: char,
    /// Each line begins with the time it describes (UTC, C's `%c` and a space) ...
    pub timestamps: bool,
    /// ... or in this strftime format (iperf3's `--timestamps=FORMAT`; [`time_format_ok`] checks it).
    pub timestamp_format: Option<String>,
    /// `-V`: iperf3's extra lines (version, host, cookie, the test's settings, CPU use, congestion
    /// control), from these facts.
    pub verbose: Option<crate::iperf3_json::Iperf3Meta>,
    /// The server's end (`iperf3 -s`): its stream numbers and `[TX-S]`/`[RX-S]` roles.
    pub server: bool,
    /// `-T`: every line begins with it and `:  ` (after the time, with `--timestamps`).
    pub title: Option<String>,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            rate: 'a',
            timestamps: false,
            timestamp_format: None,
            verbose: None,
            server: false,
            title: None,
        }
    }
}

/// The whole text, from "Connecting to host" to "iperf Done.", in iperf3's default style.
pub fn render(r: &RunResult) -> String {
    render_with(r, &Style::default())
}

/// The lines of the text, each with the time (seconds after the start) it describes.
struct Lines {
    started_unix_s: f64,
    timestamps: bool,
    timestamp_format: Option<String>,
    title: Option<String>,
    text: String,
}

impl Lines {
    /// An empty line, with the time and title iperf3 3.21 gives it too.
    fn blank(&mut self, at_s: f64) {
        self.push_lines(at_s, std::iter::once(""));
    }

    fn push(&mut self, at_s: f64, block: &str) {
        self.push_lines(at_s, block.lines());
    }

    fn push_lines<'a>(&mut self, at_s: f64, lines: impl Iterator<Item = &'a str>) {
        for line in lines {
            if self.timestamps {
                let t = self.started_unix_s + at_s;
                match &self.timestamp_format {
                    Some(f) => self.text += &strftime(t, f),
                    None => {
                        self.text += &c_time(t);
                        self.text.push(' ');
                    }
                }
            }
            if let Some(t) = &self.title {
                self.text += t;
                self.text += ":  ";
            }
            self.text += line;
            self.text.push('\n');
        }
    }
}

/// The whole text in `st`'s style.
pub fn render_with(r: &RunResult, st: &Style) -> String {
    let mut out = Lines {
        started_unix_s: r.started_unix_s,
        timestamps: st.timestamps,
        timestamp_format: st.timestamp_format.clone(),
        title: st.title.clone(),
        text: String::new(),
    };
    let bidir = r.config.spec.direction == landspeed_core::config::Direction::Bidir;
    let reverse = r.streams.iter().all(|s| s.flow == Flow::ServerToClient);
    let mut t = st.verbose.as_ref().map_or(String::new(), |m| verbose_head(r, m));
    let _ = writeln!(t, "Connecting to host {}, port {}", r.config.host, r.config.port);
    if let Some(m) = &st.verbose {
        t += &verbose_settings(r, m);
    }
    if reverse {
        let _ = writeln!(t, "Reverse mode, remote host {} is sending", r.config.host);
    }
    let ((lh, lp), (rh, rp)) = (
        host_port(&r.config.local_address),
        host_port(&r.config.remote_address),
    );
    for s in &r.streams {
        let lp = s.client_port.unwrap_or(lp);
        let _ = writeln!(
            t,
            "[{:3}] local {lh} port {lp} connected to {rh} port {rp}",
            id(st, s.id)
        );
    }
    if st.verbose.is_some() {
        t += &starting_test(r);
    }
    t += interval_header(r, reverse, bidir);
    out.push(0.0, &t);
    // With more than one stream each way, a `[SUM]` per direction and a separator per interval.
    let many = r.streams.len() > if bidir { 2 } else { 1 };
    for i in crate::iperf3_json::shown(r) {
        out.push(i.end_s, &interval_block(r, st, i, many));
    }
    let end = r.summary.duration_s;
    let mut t = String::new();
    if !many {
        t += SEPARATOR;
        t.push('\n');
    }
    if st.verbose.is_some() {
        t += "Test Complete. Summary Results:\n";
    }
    t += &summary(r, st, bidir);
    if st.verbose.is_some() {
        t += &verbose_tail(r, reverse);
    }
    out.push(end, &t);
    out.text += &server_output(r);
    out.blank(end);
    out.push(end, "iperf Done.");
    out.text
}

/// `--get-server-output`'s part of the text, as iperf3 prints it after the summary.
fn server_output(r: &RunResult) -> String {
    use landspeed_core::result::Iperf3ServerOutput;
    match &r.iperf3_server_output {
        Some(Iperf3ServerOutput::Json(v)) => format!(
            "\nServer JSON output:\n{}\n",
            serde_json::to_string_pretty(v).unwrap_or_default()
        ),
        Some(Iperf3ServerOutput::Text(t)) => format!("\nServer output:\n{t}\n"),
        None => String::new(),
    }
}

fn mss(r: &RunResult) -> u32 {
    r.streams
        .iter()
        .find_map(|s| s.tcp.as_ref().map(|t| t.mss_bytes))
        .unwrap_or(0)
}

/// `-V`'s lines before "Connecting to host".
fn verbose_head(r: &RunResult, m: &crate::iperf3_json::Iperf3Meta) -> String {
    let mut t = format!(
        "{}\n{}\nControl connection MSS {}\n",
        m.version,
        m.system_info,
        mss(r)
    );
    if udp(r) {
        let _ = writeln!(t, "Setting UDP block size to {}", r.config.spec.length_bytes);
    }
    let _ = writeln!(t, "Time: {}", crate::iperf3_json::http_date(r.started_unix_s));
    t
}

/// `-V`'s lines after "Connecting to host": the cookie, the MSS or the target rate.
fn verbose_settings(r: &RunResult, m: &crate::iperf3_json::Iperf3Meta) -> String {
    let mut t = format!("      Cookie: {}\n", m.cookie);
    if udp(r) {
        let _ = writeln!(
            t,
            "      Target Bitrate: {}",
            r.config.spec.udp_stream_rate_bps() as u64
        );
    } else {
        let default = if r.config.spec.mss.is_none() {
            " (default)"
        } else {
            ""
        };
        let _ = writeln!(t, "      TCP MSS: {}{default}", mss(r));
    }
    t
}

fn starting_test(r: &RunResult) -> String {
    use landspeed_core::config::EndCondition;
    let spec = &r.config.spec;
    let end = match spec.end {
        EndCondition::Time(d) => {
            let s = d.as_secs();
            format!("{s} second{} test", if s == 1 { "" } else { "s" })
        }
        EndCondition::Bytes(b) => format!("{b} bytes to send"),
        EndCondition::Blocks(k) => format!("{k} blocks to send"),
    };
    format!(
        "Starting Test: protocol: {}, {} streams, {} byte blocks, omitting {} seconds, {end}, tos 0\n",
        if udp(r) { "UDP" } else { "TCP" },
        spec.streams,
        spec.length_bytes,
        spec.omit_s.as_secs()
    )
}

/// `-V`'s lines after the summary: CPU use of both ends and, for TCP, the congestion control.
fn verbose_tail(r: &RunResult, reverse: bool) -> String {
    let (l, rm) = (&r.local.cpu, &r.remote.cpu);
    let (me, peer) = if reverse {
        ("receiver", "sender")
    } else {
        ("sender", "receiver")
    };
    let mut t = format!(
        "CPU Utilization: local/{me} {:.1}% ({:.1}%u/{:.1}%s), remote/{peer} {:.1}% ({:.1}%u/{:.1}%s)\n",
        l.user_pct + l.system_pct,
        l.user_pct,
        l.system_pct,
        rm.user_pct + rm.system_pct,
        rm.user_pct,
        rm.system_pct
    );
    if !udp(r) {
        // As iperf3: each line only when that end's algorithm is known.
        let cc = |f: fn(&StreamResult) -> Option<&landspeed_core::endpoint::TcpStats>| {
            r.streams.iter().find_map(|s| f(s)?.congestion.clone())
        };
        if let Some(c) = cc(|s| s.tcp.as_ref()) {
            let _ = writeln!(t, "snd_tcp_congestion {c}");
        }
        if let Some(c) = cc(|s| s.receiver_tcp.as_ref()) {
            let _ = writeln!(t, "rcv_tcp_congestion {c}");
        }
    }
    t
}

fn stream_flow(r: &RunResult, sid: u32) -> Flow {
    r.streams
        .iter()
        .find(|s| s.id == sid)
        .map_or(Flow::ClientToServer, |s| s.flow)
}

/// A stream's tag: `[  4]`, with its role after it in a bidirectional test (`[  4][TX-C]`; the
/// server's `[TX-S]` and `[RX-S]`).
fn tag(r: &RunResult, st: &Style, sid: u32) -> String {
    format!("[{:3}]{}", id(st, sid), role(r, st, stream_flow(r, sid)))
}

fn role(r: &RunResult, st: &Style, flow: Flow) -> &'static str {
    if r.config.spec.direction != landspeed_core::config::Direction::Bidir {
        return "";
    }
    match (st.server, flow) {
        (false, Flow::ClientToServer) => "[TX-C]",
        (false, Flow::ServerToClient) => "[RX-C]",
        (true, Flow::ClientToServer) => "[RX-S]",
        (true, Flow::ServerToClient) => "[TX-S]",
    }
}

/// Whether `format` is a strftime format this build can write (every `%` item known).
pub fn time_format_ok(format: &str) -> bool {
    use chrono::format::{Item, StrftimeItems};
    !StrftimeItems::new(format).any(|i| matches!(i, Item::Error))
}

/// `unix_s` in strftime's `format`, UTC (a format [`time_format_ok`] refuses comes back as it is).
pub fn strftime(unix_s: f64, format: &str) -> String {
    let secs = unix_s.floor() as i64;
    let nanos = ((unix_s - secs as f64) * 1e9) as u32;
    match chrono::DateTime::from_timestamp(secs, nanos) {
        Some(t) if time_format_ok(format) => t.format(format).to_string(),
        _ => format.to_string(),
    }
}

/// C's `%c` in the C locale, UTC: `Wed Nov 25 19:54:07 2026`.
pub fn c_time(unix_s: f64) -> String {
    // The HTTP date has the same fields: `Wed, 25 Nov 2026 19:54:07 GMT`.
    let h = crate::iperf3_json::http_date(unix_s);
    let f: Vec<&str> = h.split([',', ' ']).filter(|x| !x.is_empty()).collect();
    let day: u32 = f[1].parse().unwrap_or(0);
    format!("{} {} {day:2} {} {}", f[0], f[2], f[4], f[3])
}

fn interval_header(r: &RunResult, reverse: bool, bidir: bool) -> &'static str {
    if bidir {
        return if udp(r) {
            "[ ID][Role] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
        } else {
            "[ ID][Role] Interval           Transfer     Bitrate         Retr  Cwnd"
        };
    }
    match (udp(r), reverse) {
        (true, false) => "[ ID] Interval           Transfer     Bitrate         Total Datagrams",
        (true, true) => {
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
        }
        (false, false) => "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd",
        (false, true) => "[ ID] Interval           Transfer     Bitrate",
    }
}

fn head(st: &Style, tag: &str, start: f64, end: f64, bytes: u64) -> String {
    let secs = (end - start).max(1e-9);
    format!(
        "{tag} {start:6.2}-{end:<6.2} sec  {}s  {}s/sec",
        unit(bytes as f64, true),
        rate(bytes as f64 * 8.0 / secs, st.rate)
    )
}

/// A rate in `-f`'s unit: adaptive or fixed, bits (powers of 1000) or bytes (powers of 1024).
pub fn rate(bits_per_s: f64, format: char) -> String {
    let fixed = three_figures;
    match format {
        'A' => unit(bits_per_s / 8.0, true),
        'k' => fixed(bits_per_s / 1e3, "Kbit"),
        'm' => fixed(bits_per_s / 1e6, "Mbit"),
        'g' => fixed(bits_per_s / 1e9, "Gbit"),
        't' => fixed(bits_per_s / 1e12, "Tbit"),
        'K' => fixed(bits_per_s / 8.0 / 1024.0, "KByte"),
        'M' => fixed(bits_per_s / 8.0 / 1048576.0, "MByte"),
        'G' => fixed(bits_per_s / 8.0 / 1073741824.0, "GByte"),
        'T' => fixed(bits_per_s / 8.0 / 1099511627776.0, "TByte"),
        _ => unit(bits_per_s, false),
    }
}

fn interval_line(
    r: &RunResult,
    st: &Style,
    i: &IntervalResult,
    (sid, bytes): (u32, u64),
    reverse: bool,
) -> String {
    let (start, end) = crate::iperf3_json::span(r, i);
    let mut l = head(st, &tag(r, st, sid), start, end, bytes);
    let s = i.streams.iter().find(|s| s.id == sid);
    if udp(r) {
        let packets = s
            .and_then(|s| s.datagrams_sent)
            .unwrap_or(bytes / r.config.spec.length_bytes.max(1));
        if reverse {
            let lost = s.and_then(|s| s.datagrams_lost).unwrap_or(0);
            let _ = write!(l, "  {:5.3} ms  {}", jitter(r, sid), lost_of(lost, packets));
        } else {
            let _ = write!(l, "  {packets}  ");
        }
    } else if !reverse {
        let retr = s.map_or(0, |s| crate::iperf3_json::interval_retransmits(r, i, s));
        let cwnd = unit(s.and_then(|s| s.cwnd_bytes).unwrap_or(0) as f64, true);
        let _ = write!(l, "  {retr:3}   {cwnd}s       ");
    } else {
        l += "                  ";
    }
    if i.omitted {
        // iperf3's last field: after a receiver's UDP loss, two spaces first.
        if udp(r) && reverse {
            l += "  ";
        }
        l += "(omitted)";
    }
    l + "\n"
}

/// One interval's lines: each stream's, a `[SUM]` per direction with several streams, and a separator
/// when there are.
fn interval_block(r: &RunResult, st: &Style, i: &IntervalResult, many: bool) -> String {
    let mut t = String::new();
    for (flow, group) in by_direction(r, &i.streams) {
        // The end whose lines these are receives this direction's data.
        let receives = (flow == Flow::ServerToClient) != st.server;
        for s in &group {
            t += &interval_line(r, st, i, (s.id, s.bytes), receives);
        }
        if group.len() > 1 {
            t += &sum_interval_line(r, st, i, (&sum_tag(r, st, flow), &group), receives);
        }
    }
    if many {
        t += SEPARATOR;
    }
    t
}

/// The server's lines for one iperf3 test, as `iperf3 -s` prints them: from "Accepted connection"
/// to this end's summary (only its own role's line per stream). Every interval is shown, the short
/// tail too, as iperf3's server does. A live view prints the same in three parts: `server_head` when
/// the streams are up, `server_interval` as each interval closes, `server_tail` at the end.
pub fn render_server(r: &RunResult, st: &Style) -> String {
    let mut t = server_head(r, st);
    for i in &r.intervals {
        t += &server_interval(r, st, i);
    }
    t + &server_tail(r, st)
}

fn server_style(st: &Style) -> Style {
    Style {
        server: true,
        ..st.clone()
    }
}

fn bidir(r: &RunResult) -> bool {
    r.config.spec.direction == landspeed_core::config::Direction::Bidir
}

/// More than one stream each way: `[SUM]` lines and a separator after every interval.
fn many(r: &RunResult) -> bool {
    r.streams.len() > if bidir(r) { 2 } else { 1 }
}

/// "Accepted connection", each stream's "connected" line, and the interval header.
pub fn server_head(r: &RunResult, st: &Style) -> String {
    let st = &server_style(st);
    // The server's result keeps the client's address as its local one (landspeed's convention).
    let ((ch, cp), (sh, sp)) = (
        host_port(&r.config.local_address),
        host_port(&r.config.remote_address),
    );
    let mut t = format!("Accepted connection from {ch}, port {cp}\n");
    for s in &r.streams {
        let cp = s.client_port.unwrap_or(cp);
        let _ = writeln!(
            t,
            "[{:3}] local {sh} port {sp} connected to {ch} port {cp}",
            id(st, s.id)
        );
    }
    let receives_all = r.streams.iter().all(|s| s.flow == Flow::ClientToServer);
    t += interval_header(r, receives_all, bidir(r));
    t.push('\n');
    t
}

/// One interval's lines (`r` holds the intervals before it, for the retransmissions in it).
pub fn server_interval(r: &RunResult, st: &Style, i: &IntervalResult) -> String {
    let st = &server_style(st);
    let mut t = interval_block(r, st, i, many(r))
        .trim_end_matches('\n')
        .to_string();
    t.push('\n');
    t
}

/// The end: the separator, then this end's summary.
pub fn server_tail(r: &RunResult, st: &Style) -> String {
    let st = &server_style(st);
    let receives_all = r.streams.iter().all(|s| s.flow == Flow::ClientToServer);
    let sep = if many(r) {
        String::new()
    } else {
        format!("{SEPARATOR}\n")
    };
    sep + &server_summary(r, st, bidir(r), receives_all)
}

/// The server's summary: a header, then per stream (and per direction's `[SUM]`) the line of its own
/// role, `sender` or `receiver`.
fn server_summary(r: &RunResult, st: &Style, bidir: bool, receives_all: bool) -> String {
    let head = match (udp(r), receives_all && !bidir) {
        (true, _) => "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams",
        (false, true) => "[ ID] Interval           Transfer     Bitrate",
        (false, false) => "[ ID] Interval           Transfer     Bitrate         Retr",
    };
    let role = if bidir { "[Role]" } else { "" };
    let head = head.replacen("[ ID]", &format!("[ ID]{role}"), 1);
    // Of each sender/receiver pair, the server's: it receives what the client sends.
    let own = |pair: String, flow: Flow| {
        let at = usize::from(flow == Flow::ClientToServer);
        pair.lines().nth(at).map_or(String::new(), |l| format!("{l}\n"))
    };
    format!("{head}\n{}", summary_lines(r, st, bidir, &own))
}

/// An interval's streams by direction, the client's sending ones first (one group unless
/// bidirectional).
fn by_direction<'a>(r: &RunResult, streams: &'a [IntervalStream]) -> Vec<(Flow, Vec<&'a IntervalStream>)> {
    [Flow::ClientToServer, Flow::ServerToClient]
        .into_iter()
        .map(|f| {
            (
                f,
                streams
                    .iter()
                    .filter(|s| stream_flow(r, s.id) == f)
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, g)| !g.is_empty())
        .collect()
}

/// `[SUM]`, with the direction's role in a bidirectional test (`[SUM][TX-C]`).
fn sum_tag(r: &RunResult, st: &Style, flow: Flow) -> String {
    format!("[SUM]{}", role(r, st, flow))
}

fn sum_interval_line(
    r: &RunResult,
    st: &Style,
    i: &IntervalResult,
    (tag, streams): (&str, &[&IntervalStream]),
    reverse: bool,
) -> String {
    let bytes = streams.iter().map(|s| s.bytes).sum();
    let (start, end) = crate::iperf3_json::span(r, i);
    let mut l = head(st, tag, start, end, bytes);
    if udp(r) {
        let packets: u64 = streams
            .iter()
            .map(|s| {
                s.datagrams_sent
                    .unwrap_or(s.bytes / r.config.spec.length_bytes.max(1))
            })
            .sum();
        if reverse {
            let lost = streams.iter().filter_map(|s| s.datagrams_lost).sum();
            let _ = write!(l, "  {:5.3} ms  {}", 0.0, lost_of(lost, packets));
        } else {
            let _ = write!(l, "  {packets}  ");
        }
    } else if !reverse {
        let retr: u64 = streams
            .iter()
            .map(|s| crate::iperf3_json::interval_retransmits(r, i, s))
            .sum();
        let _ = write!(l, "  {retr:3}             ");
    } else {
        l += "                  ";
    }
    if i.omitted {
        // iperf3's last field: after a receiver's UDP loss, two spaces first.
        if udp(r) && reverse {
            l += "  ";
        }
        l += "(omitted)";
    }
    l + "\n"
}

fn lost_of(lost: u64, total: u64) -> String {
    let pct = if total > 0 {
        lost as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    format!("{lost}/{total} ({})", percent(pct))
}

/// C's `%.2g%%`.
fn percent(p: f64) -> String {
    if p == 0.0 {
        return "0%".into();
    }
    let digits = 1 - p.abs().log10().floor() as i32;
    let v = format!("{:.*}", digits.max(0) as usize, p);
    let v = if v.contains('.') {
        v.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        v
    };
    v + "%"
}

fn jitter(r: &RunResult, sid: u32) -> f64 {
    r.streams
        .iter()
        .find(|s| s.id == sid)
        .and_then(|s| s.udp.as_ref())
        .map_or(0.0, |u| u.jitter_ms)
}

fn summary(r: &RunResult, st: &Style, bidir: bool) -> String {
    let role = if bidir { "[Role]" } else { "" };
    let t = if udp(r) {
        format!(
            "[ ID]{role} Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
        )
    } else {
        format!("[ ID]{role} Interval           Transfer     Bitrate         Retr\n")
    };
    t + &summary_lines(r, st, bidir, &|pair, _| pair)
}

/// Each stream's sender and receiver lines, and each direction's `[SUM]` ones, through `pick` (which
/// keeps both, or one end's).
fn summary_lines(r: &RunResult, st: &Style, bidir: bool, pick: &dyn Fn(String, Flow) -> String) -> String {
    let mut t = String::new();
    for flow in [Flow::ClientToServer, Flow::ServerToClient] {
        let group: Vec<&StreamResult> = r.streams.iter().filter(|s| s.flow == flow).collect();
        for s in &group {
            t += &pick(stream_summary(r, st, s), flow);
        }
        match group.len() {
            0 | 1 => {}
            _ if !bidir => t += &pick(sum_summary(r, st), flow),
            _ => t += &pick(direction_summary(r, st, (&sum_tag(r, st, flow), &group)), flow),
        }
    }
    t
}

/// One direction's `[SUM][TX-C]` (or `[RX-C]`) sender and receiver lines of a bidirectional test.
fn direction_summary(r: &RunResult, st: &Style, (tag, group): (&str, &[&StreamResult])) -> String {
    let sent = group.iter().map(|s| s.bytes_sent).sum();
    let received = group.iter().map(|s| s.bytes_received).sum();
    let secs = group.iter().map(|s| s.duration_s).fold(0.0, f64::max);
    if udp(r) {
        let each: Vec<_> = group.iter().map(|s| s.udp.unwrap_or_default()).collect();
        let u = landspeed_core::udp::UdpStats {
            datagrams_received: each.iter().map(|u| u.datagrams_received).sum(),
            datagrams_lost: each.iter().map(|u| u.datagrams_lost).sum(),
            datagrams_sent: each.iter().map(|u| u.datagrams_sent).sum(),
            jitter_ms: each.iter().map(|u| u.jitter_ms).sum::<f64>() / each.len() as f64,
            ..Default::default()
        };
        return udp_summary(st, tag, secs, (sent, received), &u);
    }
    let retr: u64 = group
        .iter()
        .filter_map(|s| s.tcp.as_ref().map(|t| t.retransmits))
        .sum();
    let sender_secs = group
        .iter()
        .map(|s| crate::iperf3_json::sender_s(r, s))
        .fold(secs, f64::max);
    format!(
        "{}  {retr:3}             sender\n{}                  receiver\n",
        head(st, tag, 0.0, sender_secs, sent),
        head(st, tag, 0.0, secs, received)
    )
}

fn stream_summary(r: &RunResult, st: &Style, s: &StreamResult) -> String {
    let tag = tag(r, st, s.id);
    let secs = s.duration_s;
    if udp(r) {
        let u = s.udp.unwrap_or_default();
        return udp_summary(st, &tag, secs, (s.bytes_sent, s.bytes_received), &u);
    }
    let retr = s.tcp.as_ref().map_or(0, |t| t.retransmits);
    format!(
        "{}  {retr:3}            sender\n{}                  receiver\n",
        head(
            st,
            &tag,
            0.0,
            crate::iperf3_json::sender_s(r, s).max(secs),
            s.bytes_sent
        ),
        head(st, &tag, 0.0, secs, s.bytes_received)
    )
}

/// A UDP summary's sender and receiver lines (the sender's jitter and loss are iperf3's zeros).
fn udp_summary(
    st: &Style,
    tag: &str,
    secs: f64,
    (sent, received): (u64, u64),
    u: &landspeed_core::udp::UdpStats,
) -> String {
    let total = u
        .datagrams_sent
        .unwrap_or(u.datagrams_received + u.datagrams_lost);
    format!(
        "{}  {:5.3} ms  0/{total} (0%)  sender\n{}  {:5.3} ms  {}  receiver\n",
        head(st, tag, 0.0, secs, sent),
        0.0,
        head(st, tag, 0.0, secs, received),
        u.jitter_ms,
        lost_of(u.datagrams_lost, total)
    )
}

fn sum_summary(r: &RunResult, st: &Style) -> String {
    let sum = &r.summary;
    let secs = sum.duration_s;
    if udp(r) {
        let u = sum.udp.unwrap_or_default();
        return udp_summary(st, "[SUM]", secs, (sum.bytes_sent, sum.bytes_received), &u);
    }
    format!(
        "{}  {:3}             sender\n{}                  receiver\n",
        head(st, "[SUM]", 0.0, secs, sum.bytes_sent),
        sum.retransmits,
        head(st, "[SUM]", 0.0, secs, sum.bytes_received)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_iperf3s() {
        assert_eq!(unit(1.60 * 1024.0 * 1024.0 * 1024.0, true), "1.60 GByte");
        assert_eq!(unit(895.0 * 1024.0, true), " 895 KByte");
        assert_eq!(unit(13.7e9, false), "13.7 Gbit");
        assert_eq!(unit(9.95e6, false), "9.95 Mbit");
        assert_eq!(unit(0.0, true), "0.00 Byte");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(1.2345), "1.2%");
        assert_eq!(percent(12.345), "12%");
        assert_eq!(percent(0.05), "0.05%");
        assert_eq!(rate(23_699e6, 'm'), "23699 Mbit");
        assert_eq!(rate(2593.0 * 8.0 * 1048576.0, 'M'), "2593 MByte");
        assert_eq!(rate(13.7e9, 'a'), "13.7 Gbit");
        assert_eq!(c_time(1_795_636_447.0), "Wed Nov 25 19:54:07 2026");
        assert_eq!(c_time(0.0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(strftime(1_795_636_447.5, "%F %T "), "2026-11-25 19:54:07 ");
        assert_eq!(strftime(1_795_636_447.0, "%c "), "Wed Nov 25 19:54:07 2026 ");
        assert!(time_format_ok("%Y-%m-%dT%H:%M:%S%.3f "));
        assert!(!time_format_ok("%Q"));
    }

    #[test]
    fn a_line_has_iperf3s_columns() {
        assert_eq!(
            head(&Style::default(), "[  4]", 0.0, 1.0, 1_717_986_918),
            "[  4]   0.00-1.00   sec  1.60 GBytes  13.7 Gbits/sec"
        );
    }
}
