//! A `RunResult` as iperf3's client prints it in text: the "Connecting to host" lines, one line per
//! stream per interval (and a `[SUM]` line with more than one stream), the separator, and the
//! `sender`/`receiver` summary lines, with iperf3's columns and its adaptive units (bytes in powers of
//! 1024, bits per second in powers of 1000, three significant figures). For `landspeed iperf3`, so a
//! script that reads iperf3's text reads this. `--bidir`'s role column is not drawn (docs/iperf3.md).

use landspeed_core::config::{Flow, Transport};
use landspeed_core::result::{IntervalResult, RunResult, StreamResult};
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
    if v < 9.995 {
        format!("{v:4.2} {}", names[k])
    } else if v < 99.95 {
        format!("{v:4.1} {}", names[k])
    } else {
        format!("{v:4.0} {}", names[k])
    }
}

fn id(s: u32) -> u32 {
    s + 4
}

fn udp(r: &RunResult) -> bool {
    r.config.spec.transport == Transport::Udp
}

/// The whole text, from "Connecting to host" to "iperf Done.".
pub fn render(r: &RunResult) -> String {
    let mut t = format!("Connecting to host {}, port {}\n", r.config.host, r.config.port);
    let reverse = r.streams.iter().all(|s| s.flow == Flow::ServerToClient);
    if reverse {
        let _ = writeln!(t, "Reverse mode, remote host {} is sending", r.config.host);
    }
    let (local, remote) = (&r.config.local_address, &r.config.remote_address);
    for s in &r.streams {
        let (lh, lp) = split(local);
        let (rh, rp) = split(remote);
        let _ = writeln!(
            t,
            "[{:3}] local {lh} port {lp} connected to {rh} port {rp}",
            id(s.id)
        );
    }
    t += interval_header(r, reverse);
    t.push('\n');
    let many = r.streams.len() > 1;
    for i in crate::iperf3_json::shown(r) {
        for s in &i.streams {
            t += &interval_line(r, i, s.id, s.bytes, reverse);
        }
        if many {
            let bytes = i.streams.iter().map(|s| s.bytes).sum();
            t += &sum_interval_line(r, i, bytes, reverse);
            t += SEPARATOR;
            t.push('\n');
        }
    }
    if !many {
        t += SEPARATOR;
        t.push('\n');
    }
    t += &summary(r);
    t + "\niperf Done.\n"
}

fn split(addr: &str) -> (String, u16) {
    match addr.parse::<std::net::SocketAddr>() {
        Ok(a) => (a.ip().to_string(), a.port()),
        Err(_) => (addr.to_string(), 0),
    }
}

fn interval_header(r: &RunResult, reverse: bool) -> &'static str {
    match (udp(r), reverse) {
        (true, false) => "[ ID] Interval           Transfer     Bitrate         Total Datagrams",
        (true, true) => {
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
        }
        (false, false) => "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd",
        (false, true) => "[ ID] Interval           Transfer     Bitrate",
    }
}

fn head(tag: &str, start: f64, end: f64, bytes: u64) -> String {
    let secs = (end - start).max(1e-9);
    format!(
        "{tag} {start:6.2}-{end:<6.2} sec  {}s  {}s/sec",
        unit(bytes as f64, true),
        unit(bytes as f64 * 8.0 / secs, false)
    )
}

fn interval_line(r: &RunResult, i: &IntervalResult, sid: u32, bytes: u64, reverse: bool) -> String {
    let tag = format!("[{:3}]", id(sid));
    let mut l = head(&tag, i.start_s, i.end_s, bytes);
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
        let retr = s
            .and_then(|s| s.retransmits)
            .map_or(0, |total| total.saturating_sub(previous_retransmits(r, i, sid)));
        let cwnd = unit(s.and_then(|s| s.cwnd_bytes).unwrap_or(0) as f64, true);
        let _ = write!(l, "  {retr:3}   {cwnd}s       ");
    } else {
        l += "                  ";
    }
    l + "\n"
}

fn previous_retransmits(r: &RunResult, i: &IntervalResult, sid: u32) -> u64 {
    r.intervals
        .iter()
        .take_while(|x| x.index < i.index)
        .filter_map(|x| x.streams.iter().find(|y| y.id == sid)?.retransmits)
        .last()
        .unwrap_or(0)
}

fn sum_interval_line(r: &RunResult, i: &IntervalResult, bytes: u64, reverse: bool) -> String {
    let mut l = head("[SUM]", i.start_s, i.end_s, bytes);
    if udp(r) {
        let packets: u64 = i
            .streams
            .iter()
            .map(|s| {
                s.datagrams_sent
                    .unwrap_or(s.bytes / r.config.spec.length_bytes.max(1))
            })
            .sum();
        if reverse {
            let lost = i.streams.iter().filter_map(|s| s.datagrams_lost).sum();
            let _ = write!(l, "  {:5.3} ms  {}", 0.0, lost_of(lost, packets));
        } else {
            let _ = write!(l, "  {packets}  ");
        }
    } else if !reverse {
        let retr: u64 = i
            .streams
            .iter()
            .map(|s| {
                s.retransmits
                    .unwrap_or(0)
                    .saturating_sub(previous_retransmits(r, i, s.id))
            })
            .sum();
        let _ = write!(l, "  {retr:3}             ");
    } else {
        l += "                  ";
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

fn summary(r: &RunResult) -> String {
    let mut t = String::new();
    t += if udp(r) {
        "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
    } else {
        "[ ID] Interval           Transfer     Bitrate         Retr\n"
    };
    for s in &r.streams {
        t += &stream_summary(r, s);
    }
    if r.streams.len() > 1 {
        t += &sum_summary(r);
    }
    t
}

fn stream_summary(r: &RunResult, s: &StreamResult) -> String {
    let tag = format!("[{:3}]", id(s.id));
    let secs = s.duration_s;
    if udp(r) {
        let u = s.udp.unwrap_or_default();
        return udp_summary(&tag, secs, (s.bytes_sent, s.bytes_received), &u);
    }
    let retr = s.tcp.as_ref().map_or(0, |t| t.retransmits);
    format!(
        "{}  {retr:3}            sender\n{}                  receiver\n",
        head(&tag, 0.0, s.sender_elapsed_s.max(secs), s.bytes_sent),
        head(&tag, 0.0, secs, s.bytes_received)
    )
}

/// A UDP summary's sender and receiver lines (the sender's jitter and loss are iperf3's zeros).
fn udp_summary(
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
        head(tag, 0.0, secs, sent),
        0.0,
        head(tag, 0.0, secs, received),
        u.jitter_ms,
        lost_of(u.datagrams_lost, total)
    )
}

fn sum_summary(r: &RunResult) -> String {
    let sum = &r.summary;
    let secs = sum.duration_s;
    if udp(r) {
        let u = sum.udp.unwrap_or_default();
        return udp_summary("[SUM]", secs, (sum.bytes_sent, sum.bytes_received), &u);
    }
    format!(
        "{}  {:3}             sender\n{}                  receiver\n",
        head("[SUM]", 0.0, secs, sum.bytes_sent),
        sum.retransmits,
        head("[SUM]", 0.0, secs, sum.bytes_received)
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
    }

    #[test]
    fn a_line_has_iperf3s_columns() {
        assert_eq!(
            head("[  4]", 0.0, 1.0, 1_717_986_918),
            "[  4]   0.00-1.00   sec  1.60 GBytes  13.7 Gbits/sec"
        );
    }
}
