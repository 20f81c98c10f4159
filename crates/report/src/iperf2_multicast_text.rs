//! iperf 2.1.8's lines for a multicast sender, for the `iperf` drop-in's `-c GROUP -u`: the UDP
//! client's lines (its head, the "connected with" line naming the group, an interval's line, the
//! total and "Sent N datagrams"; `-e`'s writes and PPS; `-y C`'s columns) without the server's
//! report, which no one sends back to a group. Only figures the sender has: what it wrote and when.

use crate::iperf2_text::{columns, csv_line, tag, udp_enhanced, Ends, Iperf2Style};

/// A span of a multicast sender's test: its start and end (seconds from the first datagram) and
/// the datagrams written in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SentSpan {
    /// From, in seconds.
    pub start_s: f64,
    /// To, in seconds.
    pub end_s: f64,
    /// Datagrams written.
    pub datagrams: u64,
}

/// One interval's line (`stamp`: the interval's end in Unix seconds, for the CSV's time).
pub fn interval(span: SentSpan, length_bytes: u64, st: &Iperf2Style, at: (&Ends, f64)) -> String {
    let (ends, stamp) = at;
    let bytes = span.datagrams * length_bytes;
    if st.csv {
        let line = csv_line(ends, (1, false), (stamp, span.start_s, span.end_s), bytes, st);
        return format!("{},0.000,0,{},0.000,0\n", line.trim_end(), span.datagrams);
    }
    text_line(span, bytes, length_bytes, st) + "\n"
}

/// A text line's columns: `bytes` over the span, with `-e` the datagrams written and their rate.
fn text_line(span: SentSpan, bytes: u64, length_bytes: u64, st: &Iperf2Style) -> String {
    let mut l = format!(
        "{} {}",
        tag(1, false),
        columns(span.start_s, span.end_s, bytes, st)
    );
    if st.enhanced {
        l += &udp_enhanced(
            length_bytes,
            bytes,
            span.end_s - span.start_s,
            Some(span.datagrams),
        );
    }
    l
}

/// The closing lines: the whole test (`whole.datagrams`: those written, the end not among them)
/// and "Sent N datagrams" (`on_wire`: the end among them); in CSV iperf 2's closing line.
pub fn totals(
    whole: SentSpan,
    on_wire: u64,
    length_bytes: u64,
    st: &Iperf2Style,
    at: (&Ends, f64),
) -> String {
    let (ends, stamp) = at;
    let bytes = on_wire * length_bytes;
    if st.csv {
        let line = csv_line(ends, (1, false), (stamp, whole.start_s, whole.end_s), bytes, st);
        return format!("{},0.000,0,-1,-0.000,0\n", line.trim_end());
    }
    let l = text_line(whole, bytes, length_bytes, st);
    format!("{l}\n{} Sent {on_wire} datagrams\n", tag(1, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(csv: bool, enhanced: bool) -> Iperf2Style {
        Iperf2Style {
            csv,
            enhanced,
            format: 'a',
            interval_s: Some(1.0),
        }
    }

    #[test]
    fn a_senders_lines_are_iperf2s_udp_client_lines_without_a_server_report() {
        let ends = Ends::new("198.18.50.1:47573", "239.1.1.1:5001");
        let one = SentSpan {
            start_s: 0.0,
            end_s: 1.0,
            datagrams: 180,
        };
        // iperf 2.1.8's, captured: "[  1] 0.0000-1.0000 sec   258 KBytes  2.12 Mbits/sec".
        let t = interval(one, 1470, &style(false, false), (&ends, 0.0));
        assert_eq!(
            t.split_whitespace().collect::<Vec<_>>().join(" "),
            "[ 1] 0.0000-1.0000 sec 258 KBytes 2.12 Mbits/sec"
        );
        let e = interval(one, 1470, &style(false, true), (&ends, 0.0));
        assert!(e.trim_end().ends_with("180/0      180 pps"), "{e}");
        let whole = SentSpan {
            start_s: 0.0,
            end_s: 2.0077,
            datagrams: 359,
        };
        let t = totals(whole, 360, 1470, &style(false, false), (&ends, 0.0));
        assert!(
            t.contains("517 KBytes  2.11 Mbits/sec\n[  1] Sent 360 datagrams\n"),
            "{t}"
        );
        assert!(!t.contains("Server Report"));
        let c = totals(whole, 360, 1470, &style(true, false), (&ends, 0.0));
        assert!(
            c.contains(",198.18.50.1,47573,239.1.1.1,5001,1,0.0-2.0,529200,"),
            "{c}"
        );
        assert!(c.ends_with(",0.000,0,-1,-0.000,0\n"), "{c}");
        let c = interval(one, 1470, &style(true, false), (&ends, 0.0));
        assert!(
            c.ends_with(",1,0.0-1.0,264600,2116800,0.000,0,180,0.000,0\n"),
            "{c}"
        );
    }
}
