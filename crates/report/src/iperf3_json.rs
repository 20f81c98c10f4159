//! A `RunResult` as iperf3's `-J` document, for `landspeed iperf3` (the drop-in for the iperf3 program):
//! `start`, `intervals` and `end` with iperf3 3.21's keys, nesting, value types and units, seen from
//! the client as iperf3's client reports them, so every script and parser that reads `iperf3 -J` reads
//! this. What only landspeed knows (the verdict, bytes verified, corrupt blocks, what limited each
//! stream, the warnings) goes under the one extra top-level key `landspeed` and nowhere else.
//! docs/iperf3.md lists where a figure is landspeed's rather than iperf3's own way of counting it.

use landspeed_core::config::{Flow, Transport};
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult, StreamResult};
use serde_json::{json, Map, Value};

/// What the document says about the program and the host, which the result does not hold.
#[derive(Debug, Clone)]
pub struct Iperf3Meta {
    /// `start.version`.
    pub version: String,
    /// `start.system_info` (iperf3 writes `uname -a`'s fields).
    pub system_info: String,
    /// `start.cookie`: the test's 36-character cookie.
    pub cookie: String,
    /// The document of the server's end (`iperf3 -s -J`) rather than the client's.
    pub server: bool,
    /// `-T`: the top-level `title`, as iperf3 adds it.
    pub title: Option<String>,
    /// `--extra-data`: the top-level `extra_data`, as iperf3 adds it.
    pub extra_data: Option<String>,
}

/// iperf3 numbers its data sockets from 4 on the client (3 is the control connection).
fn socket(id: u32) -> u32 {
    id + 4
}

/// The whole `-J` document.
pub fn document(r: &RunResult, m: &Iperf3Meta) -> Value {
    let mut doc = json!({
        "start": start(r, m),
        "intervals": shown(r).map(|i| interval(r, m.server, i)).collect::<Vec<_>>(),
        "end": end(r, m.server),
        "landspeed": extra(r),
    });
    if let Some(t) = &m.title {
        doc["title"] = json!(t);
    }
    if let Some(d) = &m.extra_data {
        doc["extra_data"] = json!(d);
    }
    if let Some((key, v)) = server_output(r) {
        doc[key] = v;
    }
    doc
}

/// `--get-server-output`'s top-level key and value, as iperf3 adds them: `server_output_json` (the
/// server's document) or `server_output_text`.
pub fn server_output(r: &RunResult) -> Option<(&'static str, Value)> {
    use landspeed_core::result::Iperf3ServerOutput;
    match r.iperf3_server_output.as_ref()? {
        Iperf3ServerOutput::Json(v) => Some(("server_output_json", v.clone())),
        Iperf3ServerOutput::Text(t) => Some(("server_output_text", json!(t))),
    }
}

/// The intervals iperf3 would print: not a tail shorter than a tenth of the interval, unless it is
/// the only one (a test shorter than that: iperf3 prints its one interval).
pub fn shown(r: &RunResult) -> impl Iterator<Item = &IntervalResult> {
    let nominal = r.config.spec.interval_s.as_secs_f64();
    let only = r.intervals.len() == 1;
    r.intervals.iter().filter(move |i| only || !i.is_tail(nominal))
}

/// Where iperf3 puts interval `i` on its clock: a warm-up (`-O`) interval as it is, a measured one
/// counted from the warm-up's end, where iperf3 resets its clock (0-1 omitted, then 0-1, 1-2, ...).
pub(crate) fn span(r: &RunResult, i: &IntervalResult) -> (f64, f64) {
    if i.omitted {
        return (i.start_s, i.end_s);
    }
    let warm = warmup_s(r).min(i.start_s);
    (i.start_s - warm, i.end_s - warm)
}

/// A stream's sender's time, counted from the warm-up's end as iperf3 counts it.
pub(crate) fn sender_s(r: &RunResult, s: &StreamResult) -> f64 {
    let warm = warmup_s(r);
    if s.sender_elapsed_s > warm {
        s.sender_elapsed_s - warm
    } else {
        s.sender_elapsed_s
    }
}

/// When the warm-up's last interval ended (0 without one).
fn warmup_s(r: &RunResult) -> f64 {
    r.intervals
        .iter()
        .filter(|x| x.omitted)
        .map(|x| x.end_s)
        .fold(0.0, f64::max)
}

fn udp(r: &RunResult) -> bool {
    r.config.spec.transport == Transport::Udp
}

/// Whether this end sends on the stream (iperf3's `sender` flag): the client's end, or the server's.
fn sends(r: &RunResult, server: bool, id: u32) -> bool {
    let flow = if server {
        Flow::ServerToClient
    } else {
        Flow::ClientToServer
    };
    stream(r, id).is_none_or(|s| s.flow == flow)
}

fn stream(r: &RunResult, id: u32) -> Option<&StreamResult> {
    r.streams.iter().find(|s| s.id == id)
}

/// An address as iperf3 prints it: host and port, an IPv4-mapped IPv6 address (a dual-stack
/// listener's view of an IPv4 peer) as plain IPv4.
pub fn host_port(addr: &str) -> (String, u16) {
    match addr.parse::<std::net::SocketAddr>() {
        Ok(a) => (a.ip().to_canonical().to_string(), a.port()),
        Err(_) => (addr.to_string(), 0),
    }
}

/// `start`: the test as it began (a provisional result serves: `assemble::provisional`).
pub fn start(r: &RunResult, m: &Iperf3Meta) -> Value {
    let spec = &r.config.spec;
    // The result's local address is the client's.
    let (mine, theirs) = if m.server {
        (&r.config.remote_address, &r.config.local_address)
    } else {
        (&r.config.local_address, &r.config.remote_address)
    };
    let ((lh, lp), (rh, rp)) = (host_port(mine), host_port(theirs));
    // Each stream's own connection: the client's port of it, where the result has one.
    let connected: Vec<Value> = r
        .streams
        .iter()
        .map(|s| {
            let (lp, rp) = match (m.server, s.client_port) {
                (false, Some(c)) => (c, rp),
                (true, Some(c)) => (lp, c),
                (_, None) => (lp, rp),
            };
            json!({"socket": socket(s.id), "local_host": lh, "local_port": lp,
                   "remote_host": rh, "remote_port": rp})
        })
        .collect();
    let secs = r.started_unix_s;
    let per_stream = per_stream_rate(r);
    let mss = r
        .streams
        .iter()
        .find_map(|s| s.tcp.as_ref().map(|t| t.mss_bytes))
        .unwrap_or(0);
    let mut out = json!({
        "connected": connected,
        "version": m.version,
        "system_info": m.system_info,
        "timestamp": {
            "time": http_date(secs),
            "timesecs": secs.floor() as u64,
            "timemillisecs": (secs * 1000.0).floor() as u64,
        },
        "cookie": m.cookie,
        "target_bitrate": per_stream,
        "fq_rate": spec.fq_rate_bps.unwrap_or(0.0) as u64,
        "sock_bufsize": spec.window_bytes.unwrap_or(0),
        "sndbuf_actual": here(r, m.server).window.granted_snd_bytes,
        "rcvbuf_actual": here(r, m.server).window.granted_rcv_bytes,
        "test_start": test_start(r, per_stream),
    });
    if m.server {
        out["accepted_connection"] = json!({"host": rh, "port": rp});
    } else {
        out["connecting_to"] = json!({"host": r.config.host, "port": r.config.port});
    }
    // iperf3 names the MSS `tcp_mss` when -M set it, `tcp_mss_default` when the kernel chose it.
    match (udp(r), spec.mss) {
        (true, _) => {}
        (false, Some(asked)) => out["tcp_mss"] = json!(asked),
        (false, None) => out["tcp_mss_default"] = json!(mss),
    }
    out
}

/// iperf3's `-b`: per stream, bits per second (0 for TCP without one).
/// This end's summary: the result's `local` is the client's end.
fn here(r: &RunResult, server: bool) -> &landspeed_core::result::EndpointSummary {
    if server {
        &r.remote
    } else {
        &r.local
    }
}

fn per_stream_rate(r: &RunResult) -> u64 {
    if udp(r) {
        r.config.spec.udp_stream_rate_bps() as u64
    } else {
        r.config.spec.fq_rate_bps.unwrap_or(0.0) as u64
    }
}

fn test_start(r: &RunResult, per_stream: u64) -> Value {
    use landspeed_core::config::{Direction, EndCondition};
    let spec = &r.config.spec;
    let (duration, bytes, blocks) = match spec.end {
        EndCondition::Time(t) => (t.as_secs(), 0, 0),
        EndCondition::Bytes(b) => (0, b, 0),
        EndCondition::Blocks(k) => (0, 0, k),
    };
    json!({
        "protocol": if udp(r) { "UDP" } else { "TCP" },
        "num_streams": spec.streams,
        "blksize": spec.length_bytes,
        "omit": spec.omit_s.as_secs(),
        "duration": duration,
        "bytes": bytes,
        "blocks": blocks,
        "reverse": u8::from(spec.direction == Direction::Reverse),
        "tos": spec.tos.unwrap_or(0),
        "target_bitrate": per_stream,
        "bidir": u8::from(spec.direction == Direction::Bidir),
        "fqrate": spec.fq_rate_bps.unwrap_or(0.0) as u64,
        "interval": seconds_number(spec.interval_s.as_secs_f64()),
        "gso": 0,
        "gro": 0,
    })
}

/// A whole number of seconds as an integer (iperf3 prints `1`, and `0.5` as a float).
fn seconds_number(s: f64) -> Value {
    if s.fract() == 0.0 {
        json!(s as u64)
    } else {
        json!(s)
    }
}

/// The common fields of an interval entry.
fn entry(start: f64, end: f64, bytes: u64, omitted: bool, sender: bool) -> Map<String, Value> {
    let seconds = (end - start).max(0.0);
    let mut m = Map::new();
    m.insert("start".into(), json!(start));
    m.insert("end".into(), json!(end));
    m.insert("seconds".into(), json!(seconds));
    m.insert("bytes".into(), json!(bytes));
    let bps = if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    };
    m.insert("bits_per_second".into(), json!(bps));
    m.insert("omitted".into(), json!(omitted));
    m.insert("sender".into(), json!(sender));
    m
}

/// One entry of `intervals`; the intervals before it in `r` give its retransmissions.
pub fn interval(r: &RunResult, server: bool, i: &IntervalResult) -> Value {
    let this_end_sends = |r: &RunResult, id: u32| sends(r, server, id);
    let streams: Vec<Value> = i
        .streams
        .iter()
        .map(|s| interval_stream(r, i, s, this_end_sends(r, s.id)))
        .collect();
    let mut out = Map::new();
    let bidir = r.config.spec.direction == landspeed_core::config::Direction::Bidir;
    out.insert("streams".into(), Value::Array(streams));
    if bidir {
        // `sum` is the client's sending streams, `sum_bidir_reverse` the server's, at either end.
        let (forward, backward): (Vec<&IntervalStream>, Vec<&IntervalStream>) =
            i.streams.iter().partition(|s| sends(r, false, s.id));
        out.insert("sum".into(), interval_sum(r, i, &forward, !server));
        out.insert("sum_bidir_reverse".into(), interval_sum(r, i, &backward, server));
    } else {
        let all: Vec<&IntervalStream> = i.streams.iter().collect();
        let sends = all.iter().all(|s| this_end_sends(r, s.id));
        out.insert("sum".into(), interval_sum(r, i, &all, sends));
    }
    Value::Object(out)
}

fn interval_stream(r: &RunResult, i: &IntervalResult, s: &IntervalStream, sender: bool) -> Value {
    let (start, end) = span(r, i);
    let mut m = entry(start, end, s.bytes, i.omitted, sender);
    m.insert("socket".into(), json!(socket(s.id)));
    if udp(r) {
        let packets = s
            .datagrams_sent
            .unwrap_or(s.bytes / r.config.spec.length_bytes.max(1));
        m.insert("packets".into(), json!(packets));
        if !sender {
            udp_receiver_fields(&mut m, s.datagrams_lost.unwrap_or(0), packets, jitter(r, s.id));
        }
    } else if sender {
        m.insert("retransmits".into(), json!(interval_retransmits(r, i, s)));
        m.insert("snd_cwnd".into(), json!(s.cwnd_bytes.unwrap_or(0)));
        m.insert("snd_wnd".into(), json!(s.cwnd_bytes.unwrap_or(0)));
        m.insert("rtt".into(), json!(s.rtt_us.unwrap_or(0)));
        m.insert(
            "rttvar".into(),
            json!(stream_tcp(r, s.id).map_or(0, |t| t.rtt_var_us)),
        );
        m.insert(
            "pmtu".into(),
            json!(stream_tcp(r, s.id).map_or(0, |t| t.pmtu_bytes)),
        );
        m.insert("reorder".into(), json!(0));
    }
    Value::Object(m)
}

fn stream_tcp(r: &RunResult, id: u32) -> Option<&landspeed_core::endpoint::TcpStats> {
    stream(r, id).and_then(|s| s.tcp.as_ref())
}

fn jitter(r: &RunResult, id: u32) -> f64 {
    stream(r, id)
        .and_then(|s| s.udp.as_ref())
        .map_or(0.0, |u| u.jitter_ms)
}

fn udp_receiver_fields(m: &mut Map<String, Value>, lost: u64, packets: u64, jitter_ms: f64) {
    m.insert("jitter_ms".into(), json!(jitter_ms));
    m.insert("lost_packets".into(), json!(lost));
    let pct = if packets > 0 {
        lost as f64 * 100.0 / packets as f64
    } else {
        0.0
    };
    m.insert("lost_percent".into(), json!(pct));
}

/// This interval's retransmissions of one stream (the sender's running total less the last one
/// before it), for the JSON and the text alike.
pub(crate) fn interval_retransmits(r: &RunResult, i: &IntervalResult, s: &IntervalStream) -> u64 {
    let before = r
        .intervals
        .iter()
        .take_while(|x| x.index < i.index)
        .filter_map(|x| x.streams.iter().find(|y| y.id == s.id)?.retransmits)
        .last()
        .unwrap_or(0);
    s.retransmits.unwrap_or(0).saturating_sub(before)
}

fn interval_sum(r: &RunResult, i: &IntervalResult, streams: &[&IntervalStream], sender: bool) -> Value {
    let bytes = streams.iter().map(|s| s.bytes).sum();
    let (start, end) = span(r, i);
    let mut m = entry(start, end, bytes, i.omitted, sender);
    if udp(r) {
        let packets: u64 = streams
            .iter()
            .map(|s| {
                s.datagrams_sent
                    .unwrap_or(s.bytes / r.config.spec.length_bytes.max(1))
            })
            .sum();
        m.insert("packets".into(), json!(packets));
        if !sender {
            let lost = streams.iter().filter_map(|s| s.datagrams_lost).sum();
            let jitter = mean(streams.iter().map(|s| jitter(r, s.id)));
            udp_receiver_fields(&mut m, lost, packets, jitter);
        }
    } else if sender {
        let retr: u64 = streams.iter().map(|s| interval_retransmits(r, i, s)).sum();
        m.insert("retransmits".into(), json!(retr));
    }
    Value::Object(m)
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (mut n, mut sum) = (0.0, 0.0);
    for x in v {
        n += 1.0;
        sum += x;
    }
    if n > 0.0 {
        sum / n
    } else {
        0.0
    }
}

/// `end`: the summary.
pub fn end(r: &RunResult, server: bool) -> Value {
    let mut out = Map::new();
    // A server that received has no sender's TCP figures to show (its client keeps them); a client
    // has them from the results exchange either way.
    let tcp_of = |sender: bool| sender || !server;
    let streams: Vec<Value> = r
        .streams
        .iter()
        .map(|s| {
            let sender = sends(r, server, s.id);
            end_stream(r, s, sender, tcp_of(sender))
        })
        .collect();
    out.insert("streams".into(), Value::Array(streams));
    let bidir = r.config.spec.direction == landspeed_core::config::Direction::Bidir;
    // `sum_sent`/`sum_received` are the client's sending streams, `_bidir_reverse` the server's.
    let (fwd, back): (Vec<&StreamResult>, Vec<&StreamResult>) =
        r.streams.iter().partition(|s| s.flow == Flow::ClientToServer);
    let groups: Vec<(&str, Vec<&StreamResult>, bool)> = if bidir {
        vec![("", fwd, !server), ("_bidir_reverse", back, server)]
    } else {
        let sends = r.streams.iter().all(|s| sends(r, server, s.id));
        vec![("", r.streams.iter().collect(), sends)]
    };
    for (suffix, group, sender) in groups {
        let retransmits = tcp_of(sender);
        out.insert(
            format!("sum_sent{suffix}"),
            end_sum(r, &group, (true, retransmits), sender),
        );
        out.insert(
            format!("sum_received{suffix}"),
            end_sum(r, &group, (false, false), sender),
        );
        if udp(r) {
            out.insert(format!("sum{suffix}"), end_sum(r, &group, (false, false), sender));
        }
    }
    let (l, rm) = (&here(r, server).cpu, &here(r, !server).cpu);
    out.insert(
        "cpu_utilization_percent".into(),
        json!({"host_total": l.user_pct + l.system_pct, "host_user": l.user_pct,
               "host_system": l.system_pct, "remote_total": rm.user_pct + rm.system_pct,
               "remote_user": rm.user_pct, "remote_system": rm.system_pct}),
    );
    if !udp(r) {
        congestion(r, server, &mut out);
    }
    Value::Object(out)
}

/// The congestion control keys: a client writes both; a server the one of its own role (the
/// sender's when it sends on any stream).
fn congestion(r: &RunResult, server: bool, out: &mut Map<String, Value>) {
    let cc = |side: fn(&StreamResult) -> Option<&landspeed_core::endpoint::TcpStats>| {
        r.streams
            .iter()
            .find_map(|s| side(s)?.congestion.clone())
            .unwrap_or_else(|| "unknown".into())
    };
    let server_sends = r.streams.iter().any(|s| s.flow == Flow::ServerToClient);
    if !server || server_sends {
        out.insert("sender_tcp_congestion".into(), json!(cc(|s| s.tcp.as_ref())));
    }
    if !server || !server_sends {
        out.insert(
            "receiver_tcp_congestion".into(),
            json!(cc(|s| s.receiver_tcp.as_ref())),
        );
    }
}

/// One stream's end entries: a sender and a receiver block for TCP, one `udp` block for UDP.
fn end_stream(r: &RunResult, s: &StreamResult, sender: bool, tcp_figures: bool) -> Value {
    let secs = s.duration_s;
    if udp(r) {
        let mut m = entry(0.0, secs, s.bytes_received, false, sender);
        m.remove("omitted");
        m.insert("socket".into(), json!(socket(s.id)));
        let u = s.udp.unwrap_or_default();
        let packets = u
            .datagrams_sent
            .unwrap_or(u.datagrams_received + u.datagrams_lost);
        m.insert("jitter_ms".into(), json!(u.jitter_ms));
        m.insert("lost_packets".into(), json!(u.datagrams_lost));
        m.insert("packets".into(), json!(packets));
        m.insert("lost_percent".into(), json!(u.loss_pct));
        m.insert("out_of_order".into(), json!(u.out_of_order));
        return json!({"udp": m});
    }
    let mut snd = entry(0.0, sender_s(r, s).max(secs), s.bytes_sent, false, sender);
    snd.remove("omitted");
    snd.insert("socket".into(), json!(socket(s.id)));
    let t = s.tcp.clone().unwrap_or_default();
    for (k, v) in [
        ("retransmits", json!(t.retransmits)),
        ("reorder", json!(t.reordering)),
        ("max_snd_cwnd", json!(t.cwnd_bytes)),
        ("max_snd_wnd", json!(t.cwnd_bytes)),
        ("max_rtt", json!(t.rtt_max_us)),
        ("min_rtt", json!(t.rtt_min_us)),
        ("mean_rtt", json!(t.rtt_avg_us)),
    ] {
        if tcp_figures {
            snd.insert(k.into(), v);
        }
    }
    let mut rcv = entry(0.0, secs, s.bytes_received, false, sender);
    rcv.remove("omitted");
    rcv.insert("socket".into(), json!(socket(s.id)));
    json!({"sender": snd, "receiver": rcv})
}

/// A sum over `group`: of the bytes sent or received, with the retransmissions when asked.
fn end_sum(r: &RunResult, group: &[&StreamResult], (sent, retransmits): (bool, bool), sender: bool) -> Value {
    let bytes: u64 = group
        .iter()
        .map(|s| if sent { s.bytes_sent } else { s.bytes_received })
        .sum();
    let secs = group.iter().map(|s| s.duration_s).fold(0.0, f64::max);
    let mut m = entry(0.0, secs, bytes, false, sender);
    m.remove("omitted");
    if udp(r) {
        let us: Vec<_> = group.iter().filter_map(|s| s.udp).collect();
        let lost: u64 = us.iter().map(|u| u.datagrams_lost).sum();
        let packets: u64 = us
            .iter()
            .map(|u| {
                u.datagrams_sent
                    .unwrap_or(u.datagrams_received + u.datagrams_lost)
            })
            .sum();
        udp_receiver_fields(&mut m, lost, packets, mean(us.iter().map(|u| u.jitter_ms)));
        m.insert("packets".into(), json!(packets));
    } else if retransmits {
        let retr: u64 = group
            .iter()
            .filter_map(|s| s.tcp.as_ref().map(|t| t.retransmits))
            .sum();
        m.insert("retransmits".into(), json!(retr));
    }
    Value::Object(m)
}

/// landspeed's own facts, under the one extra key.
/// The `landspeed` key: what only landspeed knows.
pub fn extra(r: &RunResult) -> Value {
    let verdict = r.verdict();
    json!({
        "software": r.software,
        "protocol": r.protocol,
        // The far end: "iperf3 server" (nothing verified), or a landspeed end that took this end's
        // payload key over iperf3's protocol ("landspeed server (iperf3 protocol)").
        "peer_software": r.remote.software,
        "trusted": verdict.is_trusted(),
        "verdict": verdict.to_string(),
        "payload_verified": r.payload.verified,
        "bytes_verified": r.summary.bytes_verified,
        "corrupt_blocks": r.summary.corrupt_blocks,
        "evidence": r.payload.evidence,
        "limited": r.streams.iter().filter_map(|s| {
            let l = s.limited.as_ref()?;
            Some(json!({"stream": s.id, "rwnd_limited_pct": l.rwnd_limited_pct,
                        "sndbuf_limited_pct": l.sndbuf_limited_pct, "busy_pct": l.busy_pct}))
        }).collect::<Vec<_>>(),
        "warnings": r.warnings,
    })
}

/// One line of iperf3's `--json-stream`: `{"event":"start","data":{...}}` (events `start`, `interval`,
/// `error`, `end`; landspeed adds `landspeed`, with the extra key's content, just before `end`).
pub fn stream_event(event: &str, data: Value) -> String {
    // "event" first, as iperf3 writes it (a line-oriented script may match its start).
    format!("{{\"event\":{},\"data\":{data}}}", json!(event))
}

/// `Wed, 25 Nov 2026 19:19:36 GMT`, as iperf3 writes `start.timestamp.time`.
pub fn http_date(unix_s: f64) -> String {
    let iso = landspeed_core::result::format_utc(unix_s); // 2026-11-25T19:19:36Z
    let days = (unix_s.floor() as i64).div_euclid(86_400);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let weekday = WEEKDAYS[days.rem_euclid(7) as usize];
    let (y, mo, d, time) = (&iso[0..4], &iso[5..7], &iso[8..10], &iso[11..19]);
    let month = MONTHS[mo.parse::<usize>().unwrap_or(1).clamp(1, 12) - 1];
    format!("{weekday}, {d} {month} {y} {time} GMT")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_are_iperf3s() {
        assert_eq!(http_date(1_795_634_376.359), "Wed, 25 Nov 2026 19:19:36 GMT");
        assert_eq!(http_date(0.0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }
}
