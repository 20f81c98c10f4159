//! A `RunResult` as iperf 2.1.8's client prints it, for `landspeed iperf2` (the `iperf` drop-in), so
//! a script that reads iperf 2's output reads this: its text (the dashed head, a "connected with"
//! line per stream, one line per stream per interval, `[SUM]` lines with more than one stream,
//! `-e`'s enhanced columns on a sending stream's lines) or its CSV (`-y C`: one line per stream per
//! interval and at the end, no sum lines, as 2.1.8's TCP client writes it). Units are iperf 2's
//! adaptive ones (bytes in powers of 1024, bits per second in powers of 1000, three significant
//! figures), or `-f`'s fixed one. docs/iperf2.md says what differs from iperf 2's own output.

use crate::iperf3_json::host_port;
use crate::iperf3_text::{rate, strftime, unit};
use landspeed_core::config::Flow;
use landspeed_core::result::{IntervalResult, RunResult, StreamResult};
use std::fmt::Write;

const DASHES: &str = "------------------------------------------------------------";

/// How the output is drawn: iperf 2's `-y C`, `-e` and `-f`.
#[derive(Debug, Clone)]
pub struct Iperf2Style {
    /// `-y C`: comma-separated lines instead of text.
    pub csv: bool,
    /// `-e`: the enhanced columns (writes, retries, cwnd/RTT, net power).
    pub enhanced: bool,
    /// `-f`'s letter (`a`, adaptive bits, by default).
    pub format: char,
    /// `-i`'s seconds: interval lines (whole intervals only, as iperf 2 prints them); none without.
    pub interval_s: Option<f64>,
}

impl Iperf2Style {
    /// The intervals iperf 2 would print: whole ones of `-i`'s length (the short last one is
    /// left to the total), none without `-i`.
    fn intervals<'a>(&self, r: &'a RunResult) -> impl Iterator<Item = &'a IntervalResult> {
        let nominal = self.interval_s.unwrap_or(f64::INFINITY);
        r.intervals
            .iter()
            .filter(move |i| !i.omitted && i.end_s - i.start_s >= 0.9 * nominal)
    }
}

/// A stream as iperf 2 numbers it: its connection's number, and whether this end received it.
#[derive(Debug, Clone, Copy)]
struct Numbered<'a> {
    number: u32,
    received: bool,
    s: &'a StreamResult,
}

/// The client's head, before any stream: the dashed block iperf 2 prints first.
pub fn head(host: &str, port: u16, window_bytes: Option<u64>) -> String {
    let window = match window_bytes {
        Some(w) => format!("{} (requested)", unit(w as f64, true)),
        None => "the kernel's default".to_string(),
    };
    format!("{DASHES}\nClient connecting to {host}, TCP port {port}\nTCP window size: {window}\n{DASHES}\n")
}

/// The whole output after the head: text or CSV as `st` says.
pub fn render(r: &RunResult, st: &Iperf2Style) -> String {
    let streams = numbered(r);
    if st.csv {
        return csv(r, &streams, st);
    }
    let mut t = connected_lines(r, &streams, st);
    t += if st.enhanced {
        "[ ID] Interval            Transfer    Bandwidth       Write/Err  Rtry     Cwnd/RTT(var)        NetPwr\n"
    } else {
        "[ ID] Interval       Transfer     Bandwidth\n"
    };
    for i in st.intervals(r) {
        t += &interval_lines(r, &streams, st, i);
    }
    t + &final_lines(r, &streams, st)
}

/// Every stream with its iperf 2 number: the client's sending streams 1..n in id order, its
/// receiving ones likewise (a full-duplex connection's two directions share a number).
fn numbered(r: &RunResult) -> Vec<Numbered<'_>> {
    let mut out = vec![];
    for received in [false, true] {
        let mut group: Vec<&StreamResult> = r
            .streams
            .iter()
            .filter(|s| (s.flow == Flow::ServerToClient) == received)
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
fn tag(n: &Numbered) -> String {
    let id = if n.received {
        format!("*{}", n.number)
    } else {
        n.number.to_string()
    };
    format!("[{id:>3}]")
}

/// One "connected with" line per connection, with `(reverse)` or `(full-duplex)` as iperf 2 marks it.
fn connected_lines(r: &RunResult, streams: &[Numbered], st: &Iperf2Style) -> String {
    let (lip, lport) = host_port(&r.config.local_address);
    let (rip, rport) = host_port(&r.config.remote_address);
    let sends = streams.iter().any(|n| !n.received);
    let receives = streams.iter().any(|n| n.received);
    let mark = match (sends, receives) {
        (true, true) => " (full-duplex)",
        (false, true) => " (reverse)",
        _ => "",
    };
    let connections = streams.iter().map(|n| n.number).max().unwrap_or(0);
    let mut t = String::new();
    for c in 1..=connections {
        let when = if st.enhanced {
            format!(" on {} (UTC)", strftime(r.started_unix_s, "%Y-%m-%d %H:%M:%S"))
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "[{c:>3}] local {lip} port {lport} connected with {rip} port {rport}{mark}{when}"
        );
    }
    t
}

/// The bytes and the seconds of one interval (`i`) for one stream.
fn interval_bytes(i: &IntervalResult, n: &Numbered) -> u64 {
    i.streams.iter().find(|s| s.id == n.s.id).map_or(0, |s| s.bytes)
}

/// `0.0000-1.0000 sec  3.19 GBytes  27.4 Gbits/sec`: the columns every text line shares.
fn columns(start_s: f64, end_s: f64, bytes: u64, st: &Iperf2Style) -> String {
    let secs = (end_s - start_s).max(1e-9);
    format!(
        "{start_s:.4}-{end_s:.4} sec  {}s  {}s/sec",
        transfer(bytes, st.format),
        rate(bytes as f64 * 8.0 / secs, st.format)
    )
}

/// The transfer column: adaptive, or `-f`'s fixed unit in bytes (iperf 2 prints `2608 MBytes` with
/// `-f m`).
fn transfer(bytes: u64, format: char) -> String {
    let power = match format.to_ascii_lowercase() {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        _ => return unit(bytes as f64, true),
    };
    let v = bytes as f64 / 1024f64.powi(power);
    let name = ["KByte", "MByte", "GByte"][power as usize - 1];
    if v < 9.995 {
        format!("{v:4.2} {name}")
    } else if v < 99.95 {
        format!("{v:4.1} {name}")
    } else {
        format!("{v:4.0} {name}")
    }
}

/// One interval: each stream's line, then a `[SUM]` per direction with more than one stream.
fn interval_lines(r: &RunResult, streams: &[Numbered], st: &Iperf2Style, i: &IntervalResult) -> String {
    let mut t = String::new();
    for received in [false, true] {
        let group: Vec<&Numbered> = streams.iter().filter(|n| n.received == received).collect();
        let mut sum = 0;
        for n in &group {
            let bytes = interval_bytes(i, n);
            sum += bytes;
            let mut l = format!("{} {}", tag(n), columns(i.start_s, i.end_s, bytes, st));
            if st.enhanced && !received {
                let stream = i.streams.iter().find(|s| s.id == n.s.id);
                let tcp = Tcp {
                    retransmits: stream.and_then(|s| s.retransmits).unwrap_or(0),
                    cwnd_bytes: stream.and_then(|s| s.cwnd_bytes).unwrap_or(0),
                    rtt_us: stream.and_then(|s| s.rtt_us).unwrap_or(0),
                    rtt_var_us: 0,
                };
                l += &enhanced(r, bytes, i.end_s - i.start_s, &tcp);
            }
            t += &l;
            t.push('\n');
        }
        if group.len() > 1 {
            let _ = writeln!(t, "[SUM] {}", columns(i.start_s, i.end_s, sum, st));
        }
    }
    t
}

/// `-e`'s columns of a sending stream: writes/errors, retries, cwnd/RTT(var) and net power (bytes
/// per second over the RTT in seconds, in millions, as iperf 2 computes it).
fn enhanced(r: &RunResult, bytes: u64, secs: f64, tcp: &Tcp) -> String {
    let writes = bytes / r.config.spec.length_bytes.max(1);
    let rtt = tcp.rtt_us;
    let power = if rtt > 0 && secs > 0.0 {
        (bytes as f64 / secs / (f64::from(rtt) / 1e6) / 1e6) as u64
    } else {
        0
    };
    format!(
        "  {writes}/0 {:10}  {:>6}K/{rtt}({}) us  {power}",
        tcp.retransmits,
        tcp.cwnd_bytes / 1024,
        tcp.rtt_var_us
    )
}

/// The TCP figures of `-e`'s columns (zero where the kernel gave none).
#[derive(Debug, Default)]
struct Tcp {
    retransmits: u64,
    cwnd_bytes: u64,
    rtt_us: u32,
    rtt_var_us: u32,
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
/// `[SUM]` of both directions for full duplex.
fn final_lines(r: &RunResult, streams: &[Numbered], st: &Iperf2Style) -> String {
    let mut t = String::new();
    let mut all = (0, 0.0_f64);
    for received in [false, true] {
        let group: Vec<&Numbered> = streams.iter().filter(|n| n.received == received).collect();
        let mut sum = (0, 0.0_f64);
        for n in &group {
            let (bytes, secs) = whole(n);
            sum = (sum.0 + bytes, sum.1.max(secs));
            let mut l = format!("{} {}", tag(n), columns(0.0, secs, bytes, st));
            if st.enhanced && !received {
                let tcp = n.s.tcp.as_ref().map_or(Tcp::default(), |t| Tcp {
                    retransmits: t.retransmits,
                    cwnd_bytes: t.cwnd_bytes,
                    rtt_us: t.rtt_us,
                    rtt_var_us: t.rtt_var_us,
                });
                l += &enhanced(r, bytes, secs, &tcp);
            }
            t += &l;
            t.push('\n');
        }
        if group.len() > 1 {
            let _ = writeln!(t, "[SUM] {}", columns(0.0, sum.1, sum.0, st));
        }
        all = (all.0 + sum.0, all.1.max(sum.1));
    }
    let both = streams.iter().any(|n| n.received) && streams.iter().any(|n| !n.received);
    if both {
        let _ = writeln!(t, "[SUM] {}", columns(0.0, all.1, all.0, st));
    }
    t
}

/// `-y C`: `time,local ip,local port,remote ip,remote port,id,start-end,bytes,bits/s` for each
/// stream each interval and at the end; a received stream's line names the sending end first.
fn csv(r: &RunResult, streams: &[Numbered], st: &Iperf2Style) -> String {
    let (lip, lport) = host_port(&r.config.local_address);
    let (rip, rport) = host_port(&r.config.remote_address);
    let line = |n: &Numbered, start: f64, end: f64, bytes: u64| {
        let stamp = strftime(r.started_unix_s + end, "%Y%m%d%H%M%S");
        let ends = if n.received {
            format!("{rip},{rport},{lip},{lport}")
        } else {
            format!("{lip},{lport},{rip},{rport}")
        };
        let bps = bytes as f64 * 8.0 / (end - start).max(1e-9);
        format!(
            "{stamp},{ends},{},{start:.1}-{end:.1},{bytes},{bps:.0}\n",
            n.number
        )
    };
    let mut t = String::new();
    for i in st.intervals(r) {
        for n in streams {
            t += &line(n, i.start_s, i.end_s, interval_bytes(i, n));
        }
    }
    for n in streams {
        let (bytes, secs) = whole(n);
        t += &line(n, 0.0, secs, bytes);
    }
    t
}
