//! The kernel's own protocol counters (/proc/net/snmp and /proc/net/netstat): the host-wide figures a
//! network engineer checks beside a tool's, such as retransmitted segments, receive-queue drops, full
//! UDP socket buffers. Each end reads them before and after the data moves; the result carries the
//! differences of the counters named in [`COUNTERS`], and the report puts them beside landspeed's own
//! sums (docs/metrics.md). Parsing is pure, so the format is tested here on sample text.

use std::collections::BTreeMap;

/// The counters a result carries, as `Table.Name`: TCP's retransmission and loss recovery, the
/// receive-side drops, listen-queue overflows, and UDP's datagram and buffer counters (IPv4 and IPv6).
pub const COUNTERS: &[&str] = &[
    "Tcp.OutSegs",
    "Tcp.InSegs",
    "Tcp.RetransSegs",
    "Tcp.InErrs",
    "Tcp.OutRsts",
    "TcpExt.TCPLostRetransmit",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPLossProbes",
    "TcpExt.TCPFastRetrans",
    "TcpExt.TCPSackRecovery",
    "TcpExt.TCPSpuriousRTOs",
    "TcpExt.TCPRcvQDrop",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.TCPOFOQueue",
    "TcpExt.TCPOFODrop",
    "TcpExt.TCPZeroWindowDrop",
    "TcpExt.PruneCalled",
    "TcpExt.RcvPruned",
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "Udp.InDatagrams",
    "Udp.OutDatagrams",
    "Udp.InErrors",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "Udp.NoPorts",
    "Udp.InCsumErrors",
    "Udp6.InDatagrams",
    "Udp6.OutDatagrams",
    "Udp6.InErrors",
    "Udp6.RcvbufErrors",
    "Udp6.SndbufErrors",
    "Udp6.NoPorts",
];

/// Every counter in the text of /proc/net/snmp or /proc/net/netstat (pairs of lines: `Table: names`,
/// then `Table: values`) or /proc/net/snmp6 (`Name value` lines, whose names carry their table, such as
/// `Udp6InDatagrams`), as `Table.Name`. Lines that do not parse are skipped.
pub fn parse(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some((table, names)) = line.split_once(':') {
            let Some(values) = lines
                .next()
                .and_then(|v| v.strip_prefix(table)?.strip_prefix(':'))
            else {
                continue;
            };
            for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
                if let Ok(v) = v.parse::<u64>() {
                    out.insert(format!("{table}.{n}"), v);
                }
            }
        } else if let Some((name, value)) = snmp6_line(line) {
            out.insert(name, value);
        }
    }
    out
}

/// `Udp6InDatagrams  12` as ("Udp6.InDatagrams", 12).
fn snmp6_line(line: &str) -> Option<(String, u64)> {
    let mut it = line.split_whitespace();
    let (name, value) = (it.next()?, it.next()?.parse().ok()?);
    let table = ["Udp6", "UdpLite6", "Ip6", "Icmp6"]
        .into_iter()
        .find(|t| name.starts_with(t))?;
    Some((format!("{table}.{}", &name[table.len()..]), value))
}

/// The growth of each of [`COUNTERS`] from `before` to `after` (counters missing from either are left
/// out; one that went down, as after a namespace was recreated, counts 0).
pub fn deltas(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    COUNTERS
        .iter()
        .filter_map(|&c| Some((c.to_string(), after.get(c)?.saturating_sub(*before.get(c)?))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
        Tcp: RtoAlgorithm RtoMin OutSegs RetransSegs InErrs\nTcp: 1 200 1000 7 0\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 50 1 4 60 4\n";
    const NETSTAT: &str = "TcpExt: SyncookiesSent TCPLostRetransmit TCPRcvQDrop\nTcpExt: 0 3 2\n\
        IpExt: InNoRoutes\nIpExt: 0\n";
    const SNMP6: &str = "Ip6InReceives   \t10\nUdp6InDatagrams                 \t12\nUdp6RcvbufErrors 2\n";

    #[test]
    fn the_three_formats_parse_to_table_dot_name() {
        let all = [SNMP, NETSTAT, SNMP6].concat();
        let m = parse(&all);
        assert_eq!(m["Tcp.RetransSegs"], 7);
        assert_eq!(m["Udp.RcvbufErrors"], 4);
        assert_eq!(m["TcpExt.TCPLostRetransmit"], 3);
        assert_eq!(m["Udp6.InDatagrams"], 12);
        assert_eq!(m["Udp6.RcvbufErrors"], 2);
        assert_eq!(m["Ip6.InReceives"], 10);
        assert_eq!(m["Tcp.RtoMin"], 200);
    }

    #[test]
    fn deltas_take_the_named_counters_that_both_readings_have() {
        let before = parse(&[SNMP, NETSTAT].concat());
        let after = parse(
            &[SNMP, NETSTAT]
                .concat()
                .replace("Tcp: 1 200 1000 7 0", "Tcp: 1 200 1500 19 0")
                .replace("TcpExt: 0 3 2", "TcpExt: 0 1 9"),
        );
        let d = deltas(&before, &after);
        assert_eq!(d["Tcp.RetransSegs"], 12);
        assert_eq!(d["Tcp.OutSegs"], 500);
        assert_eq!(d["TcpExt.TCPRcvQDrop"], 7);
        assert_eq!(
            d["TcpExt.TCPLostRetransmit"], 0,
            "a counter that went down counts 0"
        );
        assert!(!d.contains_key("Tcp.RtoMin"), "not a named counter");
        assert!(!d.contains_key("Udp6.InDatagrams"), "missing from the readings");
    }
}
