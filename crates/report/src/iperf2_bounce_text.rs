//! iperf 2.1.8's client text for a bounceback test (`iperf -c HOST --bounceback`), so the `iperf`
//! drop-in prints what a script written around iperf 2's request/response output reads: its head
//! (write size, bursts, the bounceback's size and hold), the connection line, the column head, each
//! interval's and the whole run's line (transfer both ways, `count=avg/min/max/stdev ms`, retries,
//! cwnd/RTT, `rps`). The formats are iperf 2.1.8's (Locale.c's `report_client_bb_bw_format`), read
//! against its own output (tests below), and the final `BB8(f)-PDF` line, the round trips' histogram
//! in 100 µs bins; with `-P`, each connection's lines by its number, the `[SUM]` of them and the
//! connect times. Also `--connect-only`'s head
//! and its line for each connection (TCP_INFO's initial window, MSS and RTT, the connect time).

use crate::iperf2_text::{columns, Ends, Iperf2Style, DASHES};
use crate::iperf3_text::{strftime, unit};
use landspeed_core::endpoint::TcpStats;
use landspeed_core::transactions::{FineHistogram, LatencySummary};
use std::fmt::Write;

/// What the head says of the test.
#[derive(Debug, Clone, Copy)]
pub struct BounceHead {
    /// Bytes of each request (and answer).
    pub size: u64,
    /// Requests per burst; 0 when back to back.
    pub burst: u32,
    /// Seconds between bursts.
    pub period_s: f64,
    /// The server's hold, microseconds.
    pub hold_us: u32,
    /// TCP_QUICKACK asked of both ends.
    pub quickack: bool,
    /// The send buffer the kernel granted a socket like the test's, and the one `-w` asked for.
    pub window: (u64, Option<u64>),
    /// Connections at once (`-P`).
    pub flows: u32,
}

/// iperf 2's sizes in the head: `%4d Byte` below a kilobyte, as its `byte_snprintf` with 'A'.
fn size(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes:>4} Byte")
    } else {
        unit(bytes as f64, true).trim_end_matches('s').to_string()
    }
}

/// The head, from the first dashes to the second.
pub fn head(host: &str, port: u16, h: &BounceHead) -> String {
    let mut t = format!(
        "{DASHES}\nClient connecting to {host}, TCP port {port} with pid {} ({} flows)\n",
        std::process::id(),
        h.flows
    );
    let _ = writeln!(t, "Write buffer size: {}", size(h.size));
    if h.burst > 0 {
        let _ = writeln!(
            t,
            "Bursting: {} writes {} times every {:.2} second(s)",
            size(h.size),
            h.burst,
            h.period_s
        );
    }
    let ack = if h.quickack { " & tcp_quickack" } else { "" };
    let _ = writeln!(
        t,
        "Bounce-back test (size={}) (server hold req={} usecs{ack})",
        size(h.size),
        h.hold_us
    );
    t += "TOS set to 0x0 and nodelay (Nagle off)\n";
    let _ = writeln!(t, "{}\n{DASHES}", crate::iperf2_text::window_line(h.window));
    t
}

/// Connection `number`'s line (`when`: the test's start, Unix seconds), with how the connection was
/// made when known (its interface, `(sock=N)`, `(icwnd/mss/irtt=...)` and `(ct=...)`, as iperf
/// 2.1.8's bounceback client, always enhanced, prints them).
pub fn connected(number: u32, ends: &Ends, h: &BounceHead, when: f64) -> String {
    let ((lip, lport), (rip, rport)) = (&ends.local, &ends.remote);
    let lip = match ends.facts.as_ref().and_then(|f| f.interface.as_ref()) {
        Some(i) => format!("{lip}%{i}"),
        None => lip.clone(),
    };
    let ack = if h.quickack { " w/quickack" } else { "" };
    format!(
        "[{number:>3}] local {lip} port {lport} connected with {rip} port {rport} (bb{ack} len/hold={}/{}){} on {} (UTC)\n",
        h.size,
        h.hold_us,
        crate::iperf2_text::how_made(ends, true, ""),
        strftime(when, "%Y-%m-%d %H:%M:%S")
    )
}

/// `--connect-only`'s head (iperf 2.1.8 prints no window or size for it).
pub fn connect_only_head(host: &str, port: u16) -> String {
    format!("{DASHES}\nClient connecting to {host}, TCP port {port}\nTCP three-way-handshake (3WHS) only\n{DASHES}\n")
}

/// One `--connect-only` connection's line: thread `thread`'s, TCP_INFO's congestion window
/// (KiB), MSS and RTT (µs) right after the handshake when known, `connect()`'s time and when
/// it connected (Unix seconds).
pub fn connect_only_line(
    thread: u32,
    ends: &Ends,
    cwnd_mss_rtt: Option<(u32, u32, u32)>,
    (connect_ms, when): (f64, f64),
) -> String {
    let ((lip, lport), (rip, rport)) = (&ends.local, &ends.remote);
    let tcp = cwnd_mss_rtt.map_or(String::new(), |(c, m, r)| {
        format!(" (icwnd/mss/irtt={c}/{m}/{r})")
    });
    format!(
        "[{thread:>3}] local {lip} port {lport} connected with {rip} port {rport}{tcp} (ct={connect_ms:4.2} ms) on {} (UTC)\n",
        strftime(when, "%Y-%m-%d %H:%M:%S")
    )
}

/// The column head.
pub const COLUMN_HEAD: &str = "[ ID] Interval            Transfer    Bandwidth         BB cnt=avg/min/max/stdev         Rtry  Cwnd/RTT    RPS\n";

/// Connection `number`'s line of one interval, or of the whole run: `count` transactions of `size`
/// bytes each way between `start_s` and `end_s`, their latency, the connection's TCP state then.
pub fn line(
    number: u32,
    (start_s, end_s): (f64, f64),
    (count, size): (u64, u64),
    latency: &LatencySummary,
    tcp: Option<&TcpStats>,
    st: &Iperf2Style,
) -> String {
    let ms = |v: Option<f64>| if count < 2 { 0.0 } else { v.unwrap_or(0.0) };
    let mean = latency.mean_ms.unwrap_or(0.0);
    let rps = if mean > 0.0 { 1e3 / mean } else { 0.0 };
    let rps = if rps < 10.0 {
        format!("{rps:.1}")
    } else {
        format!("{rps:.0}")
    };
    let (retries, cwnd_k, rtt_us) = tcp.map_or((0, 0, 0), |t| (t.retransmits, t.cwnd_bytes / 1024, t.rtt_us));
    format!(
        "[{number:>3}] {}    {count}={mean:.3}/{:.3}/{:.3}/{:.3} ms {retries:>4} {cwnd_k:>4}K/{rtt_us} us    {rps} rps\n",
        columns(start_s, end_s, 2 * count * size, st),
        ms(latency.min_ms),
        ms(latency.max_ms),
        ms(latency.stdev_ms),
    )
}

/// The head of `[SUM]`'s columns with more than one connection (iperf 2.1.8 prints its `-e` write
/// head there).
pub const SUM_HEAD: &str =
    "[ ID] Interval            Transfer    Bandwidth       Write/Err  Rtry     Cwnd/RTT(var)        NetPwr\n";

/// The `[SUM]` of every connection's line of one interval or the whole run (`-P`): their
/// transactions' bytes both ways (`count` of `size`), the requests written, no errors, no
/// retries counted. iperf 2.1.8 prints zeros there ("0.000 Bytes ... 0/0 0"); the drop-in its
/// connections' figures, in that shape.
pub fn sum_line((start_s, end_s): (f64, f64), (count, size): (u64, u64), st: &Iperf2Style) -> String {
    format!(
        "[SUM] {}  {count}/0{:>10}\n",
        columns(start_s, end_s, 2 * count * size, st),
        0
    )
}

/// iperf 2.1.8's last line of a bounceback client, its round trips' histogram (its `BB8`
/// histogram, final: [`crate::iperf2_pdf`]).
pub fn pdf_line(number: u32, whole: (f64, f64), fine: &FineHistogram) -> String {
    let pdf = crate::iperf2_pdf::Pdf {
        name: "BB8",
        last: true,
        width: fine.width_us,
        width_unit: "us",
        bins: &fine.bins,
        below: 0,
        above: fine.above,
        limit: landspeed_core::transactions::FineBins::LIMIT as u32,
        ci_pct: (5.0, 95.0),
        peak: None,
    };
    crate::iperf2_pdf::line(number, whole, &pdf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_only_lines_are_iperf_2s() {
        // iperf 2.1.8's own, `iperf -c 127.0.0.1 -p 15600 --connect-only -t 1 -i 0.5`.
        let want = "------------------------------------------------------------
Client connecting to 127.0.0.1, TCP port 15600
TCP three-way-handshake (3WHS) only
------------------------------------------------------------
[  1] local 127.0.0.1 port 49540 connected with 127.0.0.1 port 15600 (icwnd/mss/irtt=319/32741/33) (ct=0.10 ms) on 2026-12-05 03:42:15 (UTC)
";
        let ends = Ends {
            local: ("127.0.0.1".into(), 49540),
            remote: ("127.0.0.1".into(), 15600),
            facts: None,
            tos: None,
        };
        let line = connect_only_line(1, &ends, Some((319, 32741, 33)), (0.1, 1_796_442_135.4));
        assert_eq!(connect_only_head("127.0.0.1", 15600) + &line, want);
        let slow = connect_only_line(12, &ends, None, (12.345, 1_796_442_135.0));
        assert!(
            slow.starts_with("[ 12] local") && slow.contains("port 15600 (ct=12.35 ms) on"),
            "{slow}"
        );
    }

    fn style() -> Iperf2Style {
        Iperf2Style {
            csv: false,
            enhanced: false,
            format: 'a',
            interval_s: None,
        }
    }

    #[test]
    fn the_head_is_iperf2s_for_each_pace_and_hold() {
        let h = BounceHead {
            size: 100,
            burst: 10,
            period_s: 1.0,
            hold_us: 0,
            quickack: true,
            window: (16 * 1024, None),
            flows: 2,
        };
        let t = head("127.0.0.1", 5001, &h);
        assert!(
            t.contains(&format!(" with pid {} (2 flows)\n", std::process::id())),
            "{t}"
        );
        // iperf 2.1.8's own lines (captured; its pid, flows and window line differ).
        for want in [
            "Write buffer size:  100 Byte\n",
            "Bursting:  100 Byte writes 10 times every 1.00 second(s)\n",
            "Bounce-back test (size= 100 Byte) (server hold req=0 usecs & tcp_quickack)\n",
            "TOS set to 0x0 and nodelay (Nagle off)\n",
        ] {
            assert!(t.contains(want), "{want:?} in {t}");
        }
        let b2b = BounceHead {
            size: 1000,
            burst: 0,
            hold_us: 5000,
            quickack: false,
            ..h
        };
        let t = head("h", 5001, &b2b);
        assert!(!t.contains("Bursting"), "{t}");
        assert!(
            t.contains("Bounce-back test (size=1000 Byte) (server hold req=5000 usecs)\n"),
            "{t}"
        );
    }

    #[test]
    fn a_line_is_iperf2s_to_the_character() {
        // iperf 2.1.8: "[  1] 0.0000-1.0000 sec  1.95 KBytes  16.0 Kbits/sec    10=0.109/0.028/0.671/0.199 ms    0  576K/27 us    9217 rps"
        let l = LatencySummary {
            min_ms: Some(0.028),
            mean_ms: Some(0.108_500_5),
            stdev_ms: Some(0.199),
            max_ms: Some(0.671),
            ..Default::default()
        };
        let tcp = TcpStats {
            retransmits: 0,
            cwnd_bytes: 576 * 1024,
            rtt_us: 27,
            ..Default::default()
        };
        assert_eq!(
            line(1, (0.0, 1.0), (10, 100), &l, Some(&tcp), &style()),
            "[  1] 0.0000-1.0000 sec  1.95 KBytes  16.0 Kbits/sec    10=0.109/0.028/0.671/0.199 ms    0  576K/27 us    9217 rps\n"
        );
        // One transaction: iperf 2 prints its least, most and deviation as 0; a slow one's rate with
        // a decimal.
        let one = LatencySummary {
            min_ms: Some(150.0),
            mean_ms: Some(150.0),
            max_ms: Some(150.0),
            ..Default::default()
        };
        // -P: each connection's number, and the [SUM] of them in iperf 2.1.8's shape ("[SUM]
        // 0.0000-1.0000 sec  0.000 Bytes  0.000 bits/sec  0/0         0", its figures zero).
        assert!(
            line(2, (0.0, 1.0), (10, 100), &l, Some(&tcp), &style()).starts_with("[  2] 0.0000-1.0000 sec ")
        );
        assert_eq!(
            sum_line((0.0, 1.0), (20, 100), &style()),
            "[SUM] 0.0000-1.0000 sec  3.91 KBytes  32.0 Kbits/sec  20/0         0\n"
        );
        assert_eq!(
            sum_line((0.5, 1.0), (0, 100), &style()),
            "[SUM] 0.5000-1.0000 sec  0.000 Bytes  0.000 bits/sec  0/0         0\n"
        );
        assert!(line(1, (0.0, 1.0), (1, 100), &one, None, &style())
            .ends_with("1=150.000/0.000/0.000/0.000 ms    0    0K/0 us    6.7 rps\n"));
    }

    fn fine(bins: &[(u32, u64)], above: u64) -> FineHistogram {
        let bins = bins
            .iter()
            .map(|&(index, count)| landspeed_core::transactions::FineBin { index, count });
        FineHistogram {
            width_us: 100,
            bins: bins.collect(),
            above,
        }
    }

    #[test]
    fn the_pdf_line_is_iperf_2s() {
        // iperf 2.1.8's own, `iperf -c 127.0.0.1 --bounceback -e -t 2 -i 1` and `--bounceback=3
        // --bounceback-period=0.1 -t 1 -i 0.5`: 18 of 20 is under 0.9 in single precision, so the
        // 90% fence is bin 2 and bin 6 is no outlier.
        let want = "[  1] 0.0000-2.0143 sec BB8(f)-PDF: bin(w=100us):cnt(20)=1:12,2:6,3:1,6:1 (5.00/95.00/99.7%=1/6/6,Outliers=0,obl/obu=0/0)\n";
        assert_eq!(
            pdf_line(1, (0.0, 2.0143), &fine(&[(1, 12), (2, 6), (3, 1), (6, 1)], 0)),
            want
        );
        let want = "[  1] 0.0000-1.0161 sec BB8(f)-PDF: bin(w=100us):cnt(30)=1:17,2:7,3:1,4:2,5:2,10:1 (5.00/95.00/99.7%=1/5/10,Outliers=0,obl/obu=0/0)\n";
        let bins = [(1, 17), (2, 7), (3, 1), (4, 2), (5, 2), (10, 1)];
        assert_eq!(pdf_line(1, (0.0, 1.0161), &fine(&bins, 0)), want);
        // An outlier: past 3 x (90% bin - 10% bin) beyond the 90% bin; past 10 s out of bounds.
        let mut bins: Vec<(u32, u64)> = (1..=10).map(|k| (k, 10)).collect();
        bins.push((200, 1));
        let line = pdf_line(1, (0.0, 1.0), &fine(&bins, 1));
        assert!(
            line.ends_with(",200:1 (5.00/95.00/99.7%=1/10/100000,Outliers=1,obl/obu=0/1)\n"),
            "{line}"
        );
        // None: iperf 2 cuts the "=" and names the last bin.
        let none = pdf_line(1, (0.0, 1.0), &fine(&[], 0));
        assert!(
            none.ends_with("cnt(0) (5.00/95.00/99.7%=0/100000/100000,Outliers=0,obl/obu=0/0)\n"),
            "{none}"
        );
    }
}
