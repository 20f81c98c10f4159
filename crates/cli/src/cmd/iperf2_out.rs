//! What the `iperf` drop-in prints, less the reports `-x` leaves out. iperf 2's `-x`
//! (`--reportexclude`) takes letters: `S` the settings (the dashed head), `C` each connection's
//! "connected with" line, `D` the data (column heads, intervals, totals), `V` the server's report
//! (UDP's "Server Report"), `M` multicast's (none is printed apart here). Every client's text goes
//! through [`head`] or [`lines`], so one choice, made once when the command line is read, holds for
//! every kind of test. The reports' text is built as iperf 2 prints it elsewhere (landspeed-report's
//! iperf2 sinks); this only leaves lines out, by where they come from (a head) or by their shape
//! (a connection's line, a server report and what follows it in its chunk).

use std::io::Write;
use std::sync::OnceLock;

/// The reports left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Exclude {
    pub settings: bool,
    pub connections: bool,
    pub data: bool,
    pub server: bool,
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
            let left_out = match () {
                _ if in_server_report => self.server,
                _ if is_connection(line) => self.connections,
                _ => self.data,
            };
            if !left_out {
                out += line;
            }
        }
        out
    }
}

/// iperf 2's "[  1] local A port P connected with B port Q ..." line.
fn is_connection(line: &str) -> bool {
    line.starts_with('[') && line.contains("] local ") && line.contains(" connected with ")
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
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
