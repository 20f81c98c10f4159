//! iperf 2.1.8's client text for its tests whose server opens connections back (`-d`, `-r`), for
//! the `iperf` drop-in: the head of the client's listener before the client's own, a "connected
//! with" line per connection (the client's 1..n, the server's n+1..2n, each with its own ports and
//! no reverse mark: each is a connection of its own), interval and total lines per stream numbered
//! so, and one `[SUM]` over every stream of a line's time when each side has more than one (iperf
//! 2's sum takes both sides together); `-y C` lines name the sending end first. The shapes are read
//! against iperf 2.1.8's own output (tests below).

use crate::iperf2_text::{
    columns, csv_line, enhanced, received_csv, received_interval, received_total, stream_line, tag,
    window_line, Ends, Iperf2Style, Tcp, DASHES,
};
use crate::iperf3_text::strftime;
use landspeed_core::config::Flow;
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult};
use std::fmt::Write;

/// A test's connections: the client's own and the server's back.
#[derive(Debug, Clone)]
pub struct Dual {
    /// The client's connections' ends, in stream order.
    pub forward: Vec<Ends>,
    /// Each connection back, in the order they came.
    pub back: Vec<Ends>,
    /// Streams a side (`-P`).
    pub n: u32,
    /// The engine's id of the first stream on a connection back (n in a `-d` test, whose
    /// client streams come first; 0 in `-r`'s second part).
    pub first_back_id: u32,
}

impl Dual {
    /// A stream's iperf 2 number, whether this end received it, and its connection's ends (the
    /// side's first connection's where its own is not known; none: empty).
    fn place(&self, id: u32, flow: Flow) -> (u32, bool, Ends) {
        let pick = |side: &[Ends], k: u32| {
            side.get(k as usize)
                .or(side.first())
                .cloned()
                .unwrap_or_else(|| Ends::new("", ""))
        };
        match flow {
            Flow::ClientToServer => (id + 1, false, pick(&self.forward, id)),
            Flow::ServerToClient => {
                let k = id.saturating_sub(self.first_back_id);
                (self.n + k + 1, true, pick(&self.back, k))
            }
        }
    }
}

/// The head of the client's listener, which iperf 2 prints before the client's (`ports`: its
/// `-L`, and the server's port; `window`: the receive buffer a TCP socket is granted and what `-w`
/// asked, as [`window_line`] prints them); with `-e` (`read`: the read size) this process's id, and
/// the read size with the width of the bins of iperf 2's histogram.
pub fn listener_head(ports: (u16, u16), window: (u64, Option<u64>), read: Option<u64>) -> String {
    let mut t = format!("{DASHES}\n{}\n", listening("TCP", ports, read.is_some()));
    if let Some(len) = read {
        let (size, width) = crate::iperf2_server_text::read_size(len);
        let _ = writeln!(t, "Read buffer size: {size} (Dist bin width={width})");
    }
    t + &window_line(window) + "\n" + DASHES + "\n"
}

/// The head of the client's UDP listener (`-u -d`, `-u -r`; `ports`: its `-L`, and the server's
/// port); with `-e` (`read`: the datagram size) this process's id, and the read size with the width
/// of the bins of iperf 2's histogram.
pub fn listener_head_udp(ports: (u16, u16), read: Option<u64>) -> String {
    let mut t = format!("{DASHES}\n{}\n", listening("UDP", ports, read.is_some()));
    if let Some(len) = read {
        let _ = writeln!(
            t,
            "Read buffer size: {} (Dist bin width= {} Byte)",
            crate::iperf3_text::unit(len as f64, true),
            len / 8
        );
    }
    t + "UDP buffer size: the kernel's default\n" + DASHES + "\n"
}

/// The listener's first line as iperf 2.1.8 prints it: its port, or (when the server's port is
/// above it: 2.1.8 keeps that as the last of a range) the two as a range with the process's id;
/// with `-e` the id after a single port too.
fn listening(proto: &str, (port, server_port): (u16, u16), enhanced: bool) -> String {
    let pid = std::process::id();
    if server_port > port {
        format!("Server listening on {proto} ports {port}-{server_port} with pid {pid}")
    } else if enhanced {
        format!("Server listening on {proto} port {port} with pid {pid}")
    } else {
        format!("Server listening on {proto} port {port}")
    }
}

/// One interval of the server's UDP stream to the client's listener (`-u -d`, `-u -r`), as iperf
/// 2.1.8's client prints it: numbered after the client's streams with no reverse mark, its bytes,
/// the jitter at the interval's end, lost/total; in CSV the receiver's columns (`stamp`: the
/// interval's end, Unix seconds).
pub fn interval_udp_back(i: &IntervalResult, d: &Dual, st: &Iperf2Style, stamp: f64) -> String {
    i.streams
        .iter()
        .map(|s| {
            let (number, _, ends) = d.place(s.id, Flow::ServerToClient);
            received_interval((i, s), st, (&ends, stamp), (number, false))
        })
        .collect()
}

/// The closing line of the server's UDP stream to the client's listener: its bytes, jitter and
/// lost/total as the listener counted them (text, or its `-y C` line).
pub fn total_udp_back(r: &RunResult, d: &Dual, st: &Iperf2Style) -> String {
    r.streams
        .iter()
        .filter(|s| s.flow == Flow::ServerToClient)
        .map(|s| {
            let (number, _, ends) = d.place(s.id, s.flow);
            match st.csv {
                true => received_csv(s, &ends, (number, r.started_unix_s), st).unwrap_or_default(),
                false => received_total(s, (number, false), st),
            }
        })
        .collect()
}

/// The `[SUM]` of the server's UDP streams to the client's listener in one interval (`-u -r -P`:
/// their bytes and lost/total, iperf 2.1.8's plain column head before it).
pub fn interval_udp_back_sum(i: &IntervalResult, st: &Iperf2Style) -> String {
    let mut sum = (0u64, 0u64, 0u64);
    for s in &i.streams {
        let (sent, lost) = (s.datagrams_sent.unwrap_or(0), s.datagrams_lost.unwrap_or(0));
        sum = (sum.0 + s.bytes, sum.1 + lost, sum.2 + sent);
    }
    let pps = crate::iperf2_text::sum_pps(i.streams.iter().map(|s| s.transit.as_ref()));
    crate::iperf2_text::received_sum((i.start_s, i.end_s), sum, pps, st)
}

/// The `[SUM]` of the server's UDP streams to the client's listener over the test (`-u -r -P`).
pub fn total_udp_back_sum(r: &RunResult, st: &Iperf2Style) -> String {
    let (mut secs, mut sum) = (0f64, (0, 0, 0));
    let back = || r.streams.iter().filter(|s| s.flow == Flow::ServerToClient);
    for s in back() {
        let Some(u) = s.udp.as_ref() else { continue };
        let total = u
            .datagrams_sent
            .unwrap_or(u.datagrams_received + u.datagrams_lost);
        sum = (sum.0 + s.bytes_received, sum.1 + u.datagrams_lost, sum.2 + total);
        secs = secs.max(s.duration_s);
    }
    let pps = crate::iperf2_text::sum_pps(back().map(|s| s.udp.as_ref()?.transit.as_ref()));
    crate::iperf2_text::received_sum((0.0, secs), sum, pps, st)
}

/// The streams received's bytes, datagrams and longest time (`-u -d -P`'s `[SUM]` of both ways).
pub fn received_udp(r: &RunResult) -> (u64, u64, f64) {
    let back = r.streams.iter().filter(|s| s.flow == Flow::ServerToClient);
    back.fold((0, 0, 0f64), |(b, d, t), s| {
        let u = s.udp.as_ref();
        let total = u.map_or(0, |u| {
            u.datagrams_sent
                .unwrap_or(u.datagrams_received + u.datagrams_lost)
        });
        (b + s.bytes_received, d + total, t.max(s.duration_s))
    })
}

/// One "connected with" line per connection back (with `-e`, `when`: the date, Unix seconds, and
/// before it the connection's interface after this end's address and its `(sock=N)`).
pub fn connected_back(d: &Dual, when: Option<f64>) -> String {
    let enhanced = when.is_some();
    let when = when.map_or(String::new(), |t| {
        format!(" on {} (UTC)", strftime(t, "%Y-%m-%d %H:%M:%S"))
    });
    let mut t = String::new();
    for (k, e) in d.back.iter().enumerate() {
        let ((lip, lport), (rip, rport)) = (&e.local, &e.remote);
        let lip = match e.facts.as_ref().and_then(|f| f.interface.as_ref()) {
            Some(i) if enhanced => format!("{lip}%{i}"),
            _ => lip.clone(),
        };
        let made = crate::iperf2_text::how_made(e, enhanced, "");
        let number = d.n + k as u32 + 1;
        let _ = writeln!(
            t,
            "[{number:>3}] local {lip} port {lport} connected with {rip} port {rport}{made}{when}"
        );
    }
    t
}

/// The lines of one interval: each part (an interval of one direction's streams, and that
/// direction) stream by stream, then a `[SUM]` of all with more than one stream a side (`at`: the
/// interval's end in Unix seconds for the CSV, and the write size for `-e`'s writes).
pub fn interval(parts: &[(&IntervalResult, Flow)], d: &Dual, st: &Iperf2Style, at: (f64, u64)) -> String {
    let (stamp, length_bytes) = at;
    let mut t = String::new();
    let (mut sum, mut sent) = (0, (0, 0));
    for (i, flow) in parts {
        let mut streams: Vec<&IntervalStream> = i.streams.iter().collect();
        streams.sort_by_key(|s| s.id);
        for s in streams {
            sum += s.bytes;
            let (number, received, ends) = d.place(s.id, *flow);
            if !received {
                sent = (sent.0 + s.bytes, sent.1 + s.retransmits.unwrap_or(0));
            }
            if st.csv {
                t += &csv_line(
                    &ends,
                    (number, received),
                    (stamp, i.start_s, i.end_s),
                    s.bytes,
                    st,
                );
                continue;
            }
            t += &stream_line(&tag(number, false), (i, s), !received, (st, length_bytes));
        }
    }
    if let (Some((first, _)), false, true) = (parts.first(), st.csv, d.n > 1) {
        let writes = sent_writes(st, sent, length_bytes);
        let _ = writeln!(
            t,
            "[SUM] {}{writes}",
            columns(first.start_s, first.end_s, sum, st)
        );
    }
    t
}

/// `-e`'s columns of a `[SUM]` of both sides: the writes and retries of the streams this end sent
/// (`sent`: their bytes and retries). iperf 2.1.8 prints other counts there (its "errors" are not
/// this end's write errors: 14133 in a loopback `-d -e -P 2` half second); the shape is its.
fn sent_writes(st: &Iperf2Style, sent: (u64, u64), length_bytes: u64) -> String {
    match st.enhanced {
        true => crate::iperf2_text::sum_writes(sent.0 / length_bytes.max(1), sent.1),
        false => String::new(),
    }
}

/// The result's last lines: each stream's total (what it wrote and its writing time when this end
/// sent it, what it read and its reading time when it received it), then a `[SUM]` of all with
/// more than one stream a side; in CSV one line per stream.
pub fn totals(r: &RunResult, d: &Dual, st: &Iperf2Style) -> String {
    let mut streams: Vec<_> = r.streams.iter().collect();
    streams.sort_by_key(|s| (s.flow == Flow::ServerToClient, s.id));
    let mut t = String::new();
    let (mut sum, mut sent) = ((0, 0.0_f64), (0, 0));
    for s in streams {
        let (number, received, ends) = d.place(s.id, s.flow);
        let (bytes, secs) = match received {
            true => (s.bytes_received, s.duration_s),
            false => (s.bytes_sent, s.sender_elapsed_s),
        };
        sum = (sum.0 + bytes, sum.1.max(secs));
        if !received {
            sent = (
                sent.0 + bytes,
                sent.1 + s.tcp.as_ref().map_or(0, |x| x.retransmits),
            );
        }
        if st.csv {
            t += &csv_line(
                &ends,
                (number, received),
                (r.started_unix_s + secs, 0.0, secs),
                bytes,
                st,
            );
            continue;
        }
        let mut l = format!("{} {}", tag(number, false), columns(0.0, secs, bytes, st));
        if st.enhanced && !received {
            let tcp = s.tcp.as_ref().map_or(Tcp::default(), |x| Tcp {
                retransmits: x.retransmits,
                cwnd_bytes: x.cwnd_bytes,
                rtt_us: x.rtt_us,
                rtt_var_us: x.rtt_var_us,
            });
            l += &enhanced(r.config.spec.length_bytes, bytes, secs, &tcp);
        }
        if st.enhanced && received {
            l += &crate::iperf2_server_text::reads_column(
                crate::iperf2_server_text::reads_of(r, s.id).as_ref(),
            );
        }
        let _ = writeln!(t, "{l}");
    }
    if !st.csv && d.n > 1 {
        let writes = sent_writes(st, sent, r.config.spec.length_bytes);
        let _ = writeln!(t, "[SUM] {}{writes}", columns(0.0, sum.1, sum.0, st));
    }
    t
}

/// `-e`'s last line with more than one stream a side: the client's connections' `connect()` times
/// (iperf2_text's [`crate::iperf2_text::connect_times`]).
pub fn connect_times(d: &Dual, st: &Iperf2Style) -> String {
    let facts: Vec<_> = d.forward.iter().filter_map(|e| e.facts.clone()).collect();
    match st.enhanced && !st.csv && d.n > 1 && !facts.is_empty() {
        true => crate::iperf2_text::connect_times(&facts),
        false => String::new(),
    }
}

#[cfg(test)]
mod tests;
