//! What the `iperf` drop-in prints, less the reports `-x` leaves out, and with `--sum-only` the
//! streams' sums alone. iperf 2's `-x`
//! (`--reportexclude`) takes letters: `S` the settings (the dashed head), `C` each connection's
//! "connected with" line, `D` the data (column heads, intervals, totals), `V` the server's report
//! (UDP's "Server Report"), `M` multicast's (none is printed apart here). Every client's text goes
//! through [`head`] or [`lines`], so one choice, made once when the command line is read, holds for
//! every kind of test. The reports' text is built as iperf 2 prints it elsewhere (landspeed-report's
//! iperf2 sinks); this only leaves lines out, by where they come from (a head) or by their shape
//! (a connection's line, a server report and what follows it in its chunk), and for `--sum-only`
//! retags them as iperf 2.1.8 does: no connection or stream lines, the `[SUM]` lines as `[SUM-N]`
//! (N streams; one stream's own lines as `[SUM-1]`), the column head as `[SUM-cnt]`, the server's
//! reports as they were.

use std::io::Write;
use std::sync::OnceLock;

/// The reports left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Exclude {
    pub settings: bool,
    pub connections: bool,
    pub data: bool,
    pub server: bool,
    /// `--sum-only`: the number of streams summed.
    pub sum_only: Option<u32>,
    /// `--sum-only` over TCP with `-e`: the sums keep their own columns (writes and retries), not
    /// a stream's (which add cwnd/RTT and net power).
    pub tcp_enhanced: bool,
    /// `--hide-ips`: what is printed passes through [`hidden`].
    pub hide_ips: bool,
}

static EXCLUDE: OnceLock<Exclude> = OnceLock::new();

impl Exclude {
    /// `-x LETTERS` as iperf 2 reads them (either case), or the letter it does not know.
    pub(crate) fn parse(letters: &str) -> Result<Exclude, String> {
        let mut x = Exclude::default();
        for c in letters.chars() {
            match c.to_ascii_uppercase() {
                'S' => x.settings = true,
                'C' => x.connections = true,
                'D' => x.data = true,
                'V' => x.server = true,
                // Multicast's own report: none is printed apart from the data here.
                'M' => {}
                _ => {
                    return Err(format!(
                        "-x {letters}: '{c}' is not a report iperf 2 names (C, D, M, S, V)"
                    ))
                }
            }
        }
        Ok(x)
    }

    /// `text` less the lines of the reports left out (`text` is not a head).
    fn keep(&self, text: &str) -> String {
        let mut out = String::new();
        let mut in_server_report = false;
        for line in text.split_inclusive('\n') {
            in_server_report |= line.contains("] Server Report:");
            if in_server_report {
                if !self.server {
                    out += line;
                }
            } else if is_connection(line) {
                if !self.connections && self.sum_only.is_none() {
                    out += line;
                }
            } else if !self.data {
                match self.sum_only {
                    Some(n) => out += &summed(line, n, self.tcp_enhanced),
                    None => out += line,
                }
            }
        }
        out
    }
}

/// A data line as `--sum-only` prints it: the column head as `[SUM-cnt]`, a `[SUM]` as `[SUM-N]`,
/// a stream's own line as `[SUM-1]` when it is the only one, else nothing; `-e`'s connect times
/// (`[ CT]`) left out. Over TCP with `-e` (`tcp_enhanced`) the head and a lone stream's line take
/// the sums' columns, as iperf 2.1.8 prints them: up to the retries.
fn summed(line: &str, streams: u32, tcp_enhanced: bool) -> String {
    let Some((tag, rest)) = line.strip_prefix('[').and_then(|l| l.split_once(']')) else {
        return line.to_string();
    };
    match tag.trim() {
        "ID" if tcp_enhanced => format!("[SUM-cnt]{}\n", sum_head(rest)),
        "ID" => format!("[SUM-cnt]{rest}"),
        "SUM" => format!("[SUM-{streams}]{rest}"),
        "CT" => String::new(),
        t if t.parse::<u32>().is_ok() => match (streams, tcp_enhanced) {
            (1, true) => format!("[SUM-1]{}\n", sum_columns(rest)),
            (1, false) => format!("[SUM-1]{rest}"),
            _ => String::new(),
        },
        _ => line.to_string(),
    }
}

/// A TCP sender's `-e` column head cut after its retries (`Rtry`), as its sums' head reads.
fn sum_head(rest: &str) -> &str {
    match rest.find("Rtry") {
        Some(at) => &rest[..at + "Rtry".len()],
        None => rest.trim_end_matches('\n'),
    }
}

/// A TCP sender's `-e` line (`... Mbits/sec  50/0          0     1151K/139(31) us  94297`) in
/// its sums' columns: writes/errors and retries (`%d/%d%10d`).
fn sum_columns(rest: &str) -> String {
    let Some(at) = rest.find("/sec") else {
        return rest.trim_end_matches('\n').to_string();
    };
    let (columns, enhanced) = rest.split_at(at + "/sec".len());
    let mut words = enhanced.split_whitespace();
    match (words.next(), words.next()) {
        (Some(writes), Some(retries)) => format!("{columns}  {writes}{retries:>10}"),
        _ => rest.trim_end_matches('\n').to_string(),
    }
}

/// `text` less its connections' lines (the server's `-x C`).
pub(crate) fn without_connections(text: &str) -> String {
    text.split_inclusive('\n').filter(|l| !is_connection(l)).collect()
}

/// iperf 2's "[  1] local A port P connected with B port Q ..." line.
fn is_connection(line: &str) -> bool {
    line.starts_with('[') && line.contains("] local ") && line.contains(" connected with ")
}

/// `text` as iperf 2.1.8 prints it with `--hide-ips`: every IPv4 address as `*.*.*.N` (its last
/// byte kept; 2.1.8 hides no IPv6 address, and here a v4 address inside one is hidden too), and the
/// host a client connects to (its head's `Client connecting to HOST,`) as `(**hidden**)`.
pub(crate) fn hidden(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let line = match line.split_once("Client connecting to ") {
            Some((before, rest)) => match rest.split_once(',') {
                Some((_, after)) => format!("{before}Client connecting to (**hidden**),{after}"),
                None => line.to_string(),
            },
            None => line.to_string(),
        };
        out += &hide_v4(&line);
    }
    out
}

/// Each dotted quad in `line` (four groups of one to three digits, no digit or dot on either
/// side) as `*.*.*.N`.
fn hide_v4(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b'.');
        match quad_at(&b[i..]).filter(|_| boundary) {
            Some((len, last)) => {
                out += "*.*.*.";
                out += last;
                i += len;
            }
            None => {
                let c = line[i..].chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8().max(1);
            }
        }
    }
    out
}

/// A dotted quad at the start of `b`: its length and its last group.
fn quad_at(b: &[u8]) -> Option<(usize, &str)> {
    let mut at = 0;
    let mut last = 0;
    for k in 0..4 {
        if k > 0 {
            (b.get(at) == Some(&b'.')).then_some(())?;
            at += 1;
        }
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=3).contains(&digits) {
            return None;
        }
        last = at;
        at += digits;
    }
    if b.get(at).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
        return None;
    }
    Some((at, std::str::from_utf8(&b[last..at]).ok()?))
}

/// Chooses the reports left out, once, before anything is printed.
pub(crate) fn exclude(x: Exclude) {
    let _ = EXCLUDE.set(x);
}

fn chosen() -> Exclude {
    EXCLUDE.get().copied().unwrap_or_default()
}

/// Prints a head (the settings), unless `-x S`.
pub(crate) fn head(text: &str) {
    if !chosen().settings {
        put(text);
    }
}

/// Prints report lines, less those `-x` leaves out.
pub(crate) fn lines(text: &str) {
    put(&chosen().keep(text));
}

fn put(text: &str) {
    let text = match chosen().hide_ips {
        true => hidden(text),
        false => text.to_string(),
    };
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_ips_are_iperf2s_stars_and_the_hosts_mark() {
        // iperf 2.1.8's own lines with --hide-ips, captured.
        let shown = "Client connecting to 127.0.0.1, TCP port 5201\n[  1] local 127.0.0.1%lo port 58472 connected with 10.20.30.41 port 5201 (icwnd/mss/irtt=319/32741/42)\n";
        assert_eq!(
            hidden(shown),
            "Client connecting to (**hidden**), TCP port 5201\n[  1] local *.*.*.1%lo port 58472 connected with *.*.*.41 port 5201 (icwnd/mss/irtt=319/32741/42)\n"
        );
        let csv = "20261207061500,192.168.1.7,40588,127.0.0.1,5201,1,0.0-1.0,2000,15996\n";
        assert_eq!(
            hidden(csv),
            "20261207061500,*.*.*.7,40588,*.*.*.1,5201,1,0.0-1.0,2000,15996\n"
        );
        // Figures, versions, spans and IPv6 stay.
        for kept in [
            "[  1] 0.0000-1.0000 sec  1.95 KBytes  16.0 Kbits/sec\n",
            "(peer 2.1.8) 1.2.3.4.5 ::1 fe80::1\n",
        ] {
            assert_eq!(hidden(kept), kept);
        }
    }

    const UDP_END: &str = "[  1] 0.0000-1.0000 sec   131 KBytes  1.07 Mbits/sec
[  1] Sent 92 datagrams
[  1] Server Report:
[ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams
[  1] 0.0000-1.0012 sec   131 KBytes  1.07 Mbits/sec   0.010 ms 0/91 (0%)
";

    #[test]
    fn letters_are_read_as_iperf2_reads_them() {
        let x = Exclude::parse("sC").unwrap();
        assert!(x.settings && x.connections && !x.data && !x.server);
        assert_eq!(
            Exclude::parse("DVM").unwrap(),
            Exclude {
                data: true,
                server: true,
                ..Default::default()
            }
        );
        assert!(Exclude::parse("Q").unwrap_err().contains("'Q'"));
    }

    #[test]
    fn each_letter_leaves_out_its_own_lines() {
        let conn = "[  1] local 127.0.0.1 port 40000 connected with 127.0.0.1 port 5001\n";
        let text = format!("{conn}[ ID] Interval       Transfer     Bandwidth\n{UDP_END}");
        let c = Exclude {
            connections: true,
            ..Default::default()
        };
        assert_eq!(c.keep(&text), text.replacen(conn, "", 1));
        let d = Exclude {
            data: true,
            ..Default::default()
        };
        let from_report = &UDP_END[UDP_END.find("[  1] Server Report:").unwrap()..];
        assert_eq!(d.keep(&text), format!("{conn}{from_report}"));
        let v = Exclude {
            server: true,
            ..Default::default()
        };
        assert_eq!(
            v.keep(UDP_END),
            "[  1] 0.0000-1.0000 sec   131 KBytes  1.07 Mbits/sec\n[  1] Sent 92 datagrams\n"
        );
        assert_eq!(Exclude::default().keep(&text), text);
    }

    #[test]
    fn sum_only_keeps_the_sums_as_iperf2_tags_them() {
        let two = "[  1] local 127.0.0.1 port 40000 connected with 127.0.0.1 port 5001
[ ID] Interval       Transfer     Bandwidth
[  1] 0.0000-1.0000 sec   131 KBytes  1.07 Mbits/sec
[  1] Sent 92 datagrams
[  2] 0.0000-1.0000 sec   131 KBytes  1.07 Mbits/sec
[  2] Sent 92 datagrams
[SUM] 0.0000-1.0000 sec   262 KBytes  2.14 Mbits/sec
[SUM-2] Sent 184 datagrams
[  1] Server Report:
[ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams
[  1] 0.0000-1.0012 sec   131 KBytes  1.07 Mbits/sec   0.010 ms 0/91 (0%)
";
        let sums = Exclude {
            sum_only: Some(2),
            ..Default::default()
        };
        assert_eq!(
            sums.keep(two),
            "[SUM-cnt] Interval       Transfer     Bandwidth
[SUM-2] 0.0000-1.0000 sec   262 KBytes  2.14 Mbits/sec
[SUM-2] Sent 184 datagrams
[  1] Server Report:
[ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams
[  1] 0.0000-1.0012 sec   131 KBytes  1.07 Mbits/sec   0.010 ms 0/91 (0%)
"
        );
        let one = Exclude {
            sum_only: Some(1),
            ..Default::default()
        };
        assert_eq!(
            one.keep("[  1] 0.0000-1.0000 sec  14.6 GBytes   125 Gbits/sec\n"),
            "[SUM-1] 0.0000-1.0000 sec  14.6 GBytes   125 Gbits/sec\n"
        );
        // TCP with -e: the sums' own columns (iperf 2.1.8's `-P 1 -e --sum-only`, captured), and
        // no connect times.
        let tcp = Exclude {
            sum_only: Some(1),
            tcp_enhanced: true,
            ..Default::default()
        };
        assert_eq!(
            tcp.keep(
                "[ ID] Interval            Transfer    Bandwidth       Write/Err  Rtry     Cwnd/RTT(var)        NetPwr
[  1] 0.0000-0.5000 sec  6.25 MBytes   105 Mbits/sec  50/0          0     1151K/139(31) us  94297
[ CT] final connect times (min/avg/max/stdev) = 0.098/0.098/0.098/0.000 ms (tot/err) = 1/0
"
            ),
            "[SUM-cnt] Interval            Transfer    Bandwidth       Write/Err  Rtry
[SUM-1] 0.0000-0.5000 sec  6.25 MBytes   105 Mbits/sec  50/0         0
"
        );
        // CSV lines are not tagged: iperf 2.1.8 prints them all with --sum-only.
        let csv = "19700101000000,127.0.0.1,50388,127.0.0.1,5299,2,0.0-1.0,15061614652,120318695744\n";
        assert_eq!(sums.keep(csv), csv);
    }
}
