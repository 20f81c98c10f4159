//! landspeed's `RunResult` in pScheduler's throughput result format: `succeeded`, `diags`, `intervals`
//! (per interval, each stream's figures and their sum) and `summary` (per stream and in all), with the
//! units the throughput tools use (bits/s, RTT in µs, jitter in ms, UDP counts in datagrams). The
//! format's top level admits no other keys, so what only landspeed measures (bytes verified, the
//! verdict, what limited the rate, the whole result) goes into `diags`, which every pScheduler result
//! display shows.

use landspeed_core::result::{IntervalResult, RunResult, StreamResult};
use serde_json::{json, Map, Value};

/// A failed run in the format's shape: `succeeded` false, the reason, and the diagnostics.
pub fn failure(error: &str, diags: &str) -> Value {
    json!({"succeeded": false, "error": error, "diags": diags})
}

/// Whether a participant's result has the shape `result-format` reads: `succeeded` a boolean,
/// `diags` and `error` strings when present, and a succeeded result's `intervals` a list and
/// `summary` an object.
pub fn check_shape(r: &Value) -> Result<(), String> {
    let ok = r
        .get("succeeded")
        .and_then(Value::as_bool)
        .ok_or("succeeded is not true or false")?;
    for k in ["diags", "error"] {
        if r.get(k).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Err(format!("{k} is not text"));
        }
    }
    if ok && !r.get("intervals").is_some_and(Value::is_array) {
        return Err("a succeeded result has no intervals list".into());
    }
    if ok && !r.get("summary").is_some_and(Value::is_object) {
        return Err("a succeeded result has no summary object".into());
    }
    Ok(())
}

/// The whole result of a run that produced figures. `command` is the landspeed command line it ran.
pub fn throughput_result(r: &RunResult, command: &str) -> Value {
    let mut out = Map::new();
    out.insert("schema".into(), json!(1));
    out.insert("succeeded".into(), json!(true));
    out.insert("diags".into(), json!(diags(r, command)));
    out.insert("intervals".into(), intervals(r));
    out.insert("summary".into(), summary(r));
    if let Some(mss) = r
        .streams
        .iter()
        .filter_map(|s| s.tcp.as_ref().map(|t| t.mss_bytes))
        .find(|&m| m > 0)
    {
        out.insert("mss".into(), json!(mss));
    }
    if let Some(w) = r.config.spec.window_bytes {
        out.insert("requested-tcp-window-size".into(), json!(w));
    }
    let granted = r.local.window.granted_snd_bytes;
    if r.config.spec.window_bytes.is_some() && granted > 0 {
        out.insert("tcp-window-size".into(), json!(granted));
    }
    Value::Object(out)
}

/// What landspeed adds beyond the format's figures, then the whole result as JSON.
fn diags(r: &RunResult, command: &str) -> String {
    let s = &r.summary;
    let mut t = format!(
        "{command}\nlandspeed verdict: {}\nbytes sent {}, received {}, verified against the payload pattern {}, corrupt blocks {}\n",
        r.verdict(),
        s.bytes_sent,
        s.bytes_received,
        s.bytes_verified,
        s.corrupt_blocks
    );
    for st in &r.streams {
        if let Some(l) = &st.limited {
            t += &format!(
                "stream {}: receive-window limited {:.1}%, send-buffer limited {:.1}%, busy {:.1}%\n",
                st.id, l.rwnd_limited_pct, l.sndbuf_limited_pct, l.busy_pct
            );
        }
    }
    for w in &r.warnings {
        t += &format!("warning: {w}\n");
    }
    for d in &r.directions {
        for l in &d.limits {
            let fix = l.fix.as_ref().map(|f| format!("; fix: {f}")).unwrap_or_default();
            t += &format!(
                "landspeed limited by ({}): {}: {}{fix}\n",
                d.flow.label(),
                l.kind.label(),
                l.why
            );
        }
    }
    t + "landspeed result (JSON):\n" + &serde_json::to_string(r).unwrap_or_default()
}

/// One throughput-data object with the figures every entry has.
fn td(start: f64, end: f64, bits_per_s: f64, bytes: u64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("start".into(), json!(start));
    m.insert("end".into(), json!(end));
    m.insert("throughput-bits".into(), json!(bits_per_s));
    m.insert("throughput-bytes".into(), json!(bytes));
    m
}

/// The intervals as iperf3 reports them: the warm-up's marked `omitted`, the kept ones timed from the
/// warm-up's end (iperf3 restarts its clock there, and the summary runs from 0), and no tail left
/// after the last whole interval (shorter than a tenth of one, or empty: the wait for the end).
fn intervals(r: &RunResult) -> Value {
    let mut previous: std::collections::HashMap<u32, u64> = Default::default();
    let nominal = r.config.spec.interval_s.as_secs_f64();
    let omit = r.config.spec.omit_s.as_secs_f64();
    let last = r.intervals.len().saturating_sub(1);
    r.intervals
        .iter()
        .enumerate()
        .filter_map(|(n, i)| {
            let v = interval(i, &mut previous);
            let tail = i.is_tail(nominal) || (n == last && n > 0 && i.bytes == 0);
            (!tail).then(|| if i.omitted { v } else { shifted(v, omit) })
        })
        .collect()
}

/// An interval's entries with `start` and `end` moved `by` seconds earlier.
fn shifted(mut v: Value, by: f64) -> Value {
    let shift = |e: &mut Value| {
        for k in ["start", "end"] {
            if let Some(t) = e[k].as_f64() {
                e[k] = json!((t - by).max(0.0));
            }
        }
    };
    if by > 0.0 {
        shift(&mut v["summary"]);
        if let Some(streams) = v.get_mut("streams").and_then(Value::as_array_mut) {
            streams.iter_mut().for_each(shift);
        }
    }
    v
}

/// One interval: each stream's entry (retransmits as this interval's, from the running totals) and
/// their sum.
fn interval(i: &IntervalResult, previous: &mut std::collections::HashMap<u32, u64>) -> Value {
    let mut sum_retr: Option<u64> = None;
    let streams: Vec<Value> = i
        .streams
        .iter()
        .map(|s| {
            let mut m = td(i.start_s, i.end_s, s.throughput_bps, s.bytes);
            m.insert("stream-id".into(), json!(s.id));
            m.insert("omitted".into(), json!(i.omitted));
            m.insert("rtt".into(), json!(s.rtt_us));
            m.insert("tcp-window-size".into(), json!(s.cwnd_bytes));
            let retr = s.retransmits.map(|total| {
                let before = previous.insert(s.id, total).unwrap_or(0);
                total.saturating_sub(before)
            });
            if let Some(n) = retr {
                sum_retr = Some(sum_retr.unwrap_or(0) + n);
            }
            m.insert("retransmits".into(), json!(retr));
            if let (Some(sent), Some(lost)) = (s.datagrams_sent, s.datagrams_lost) {
                m.insert("sent".into(), json!(sent));
                m.insert("lost".into(), json!(lost));
            }
            Value::Object(m)
        })
        .collect();
    let mut sum = td(i.start_s, i.end_s, i.throughput_bps, i.bytes);
    sum.insert("omitted".into(), json!(i.omitted));
    sum.insert("retransmits".into(), json!(sum_retr));
    let udp: Option<Vec<(u64, u64)>> = i
        .streams
        .iter()
        .map(|s| Some((s.datagrams_sent?, s.datagrams_lost?)))
        .collect();
    if let Some(counts) = udp.filter(|c| !c.is_empty()) {
        sum.insert("sent".into(), json!(counts.iter().map(|c| c.0).sum::<u64>()));
        sum.insert("lost".into(), json!(counts.iter().map(|c| c.1).sum::<u64>()));
    }
    json!({"streams": streams, "summary": Value::Object(sum)})
}

fn summary(r: &RunResult) -> Value {
    let s = &r.summary;
    let streams: Vec<Value> = r.streams.iter().map(stream_summary).collect();
    let mut sum = td(0.0, s.duration_s, s.throughput_bps, s.bytes_received);
    sum.insert("receiver-throughput-bits".into(), json!(s.throughput_bps));
    let tcp = r.streams.iter().any(|st| st.tcp.is_some());
    sum.insert(
        "retransmits".into(),
        if tcp { json!(s.retransmits) } else { Value::Null },
    );
    let rtts: Vec<f64> = r
        .streams
        .iter()
        .filter_map(|st| st.tcp.as_ref().map(|t| f64::from(t.rtt_avg_us)))
        .filter(|&u| u > 0.0)
        .collect();
    if !rtts.is_empty() {
        sum.insert("rtt".into(), json!(rtts.iter().sum::<f64>() / rtts.len() as f64));
    }
    if let Some(u) = &s.udp {
        sum.insert("sent".into(), json!(u.datagrams_sent));
        sum.insert("lost".into(), json!(u.datagrams_lost));
        sum.insert("jitter".into(), json!(u.jitter_ms));
    }
    json!({"streams": streams, "summary": Value::Object(sum)})
}

fn stream_summary(st: &StreamResult) -> Value {
    let mut m = td(0.0, st.duration_s, st.throughput_bps, st.bytes_received);
    m.insert("stream-id".into(), json!(st.id));
    if let Some(t) = &st.tcp {
        m.insert("retransmits".into(), json!(t.retransmits));
        m.insert("rtt".into(), json!(t.rtt_avg_us));
        m.insert("tcp-window-size".into(), json!(t.cwnd_bytes));
    }
    if let Some(u) = &st.udp {
        m.insert("sent".into(), json!(u.datagrams_sent));
        m.insert("lost".into(), json!(u.datagrams_lost));
        m.insert("jitter".into(), json!(u.jitter_ms));
    }
    Value::Object(m)
}
