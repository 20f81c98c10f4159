//! The shapes of iperf 2.1.8's `-d` and `-r` client output (captured on loopback from
//! `iperf -c 127.0.0.1 -p 5301 -L 5302 -d -t 2 -i 1 -P 2` and `-r ... -y C`), with the figures of a
//! real two-stream-a-side result (tests/fixtures/iperf2-bidir-p2.json: its streams 2 and 3 stand
//! for the connections back).

use super::*;

fn fixture() -> RunResult {
    serde_json::from_str(include_str!("../../tests/fixtures/iperf2-bidir-p2.json")).unwrap()
}

fn style(csv: bool) -> Iperf2Style {
    Iperf2Style {
        csv,
        enhanced: false,
        format: 'a',
        interval_s: Some(1.0),
    }
}

fn dual() -> Dual {
    Dual {
        forward: vec![
            Ends::new("127.0.0.1:37440", "127.0.0.1:5301"),
            Ends::new("127.0.0.1:37452", "127.0.0.1:5301"),
        ],
        back: vec![
            Ends::new("127.0.0.1:5302", "127.0.0.1:40298"),
            Ends::new("127.0.0.1:5302", "127.0.0.1:40312"),
        ],
        n: 2,
        first_back_id: 2,
    }
}

#[test]
fn the_connections_back_are_numbered_after_the_clients_own_with_their_ports() {
    assert_eq!(
        connected_back(&dual(), None),
        "[  3] local 127.0.0.1 port 5302 connected with 127.0.0.1 port 40298\n\
         [  4] local 127.0.0.1 port 5302 connected with 127.0.0.1 port 40312\n"
    );
    assert!(listener_head(5302).contains("\nServer listening on TCP port 5302\n"));
}

#[test]
fn an_interval_prints_every_stream_of_both_sides_then_one_sum() {
    let r = fixture();
    let i = &r.intervals[0];
    let part = |back: bool| IntervalResult {
        streams: i
            .streams
            .iter()
            .filter(|s| (s.id >= 2) == back)
            .cloned()
            .collect(),
        ..i.clone()
    };
    let (fwd, back) = (part(false), part(true));
    let parts = [(&fwd, Flow::ClientToServer), (&back, Flow::ServerToClient)];
    let t = interval(&parts, &dual(), &style(false), (0.0, 131072));
    let lines: Vec<&str> = t.lines().collect();
    let tags: Vec<&str> = lines.iter().map(|l| &l[..5]).collect();
    assert_eq!(tags, ["[  1]", "[  2]", "[  3]", "[  4]", "[SUM]"], "{t}");
    let all: u64 = i.streams.iter().map(|s| s.bytes).sum();
    assert_eq!(
        lines[4],
        format!("[SUM] {}", columns(i.start_s, i.end_s, all, &style(false)))
    );
    // One stream a side: no sum (iperf 2.1.8's -d without -P).
    let one = Dual {
        n: 1,
        first_back_id: 1,
        ..dual()
    };
    let single = IntervalResult {
        streams: vec![i.streams[0].clone()],
        ..i.clone()
    };
    let t = interval(&[(&single, Flow::ClientToServer)], &one, &style(false), (0.0, 1));
    assert!(!t.contains("[SUM]"), "{t}");
}

#[test]
fn the_totals_and_csv_lines_name_each_connections_own_ends() {
    let r = fixture();
    let t = totals(&r, &dual(), &style(false));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 5, "{t}");
    assert!(lines[2].starts_with("[  3] 0.0000-"), "{t}");
    assert!(lines[4].starts_with("[SUM] 0.0000-"), "{t}");
    let csv = totals(&r, &dual(), &style(true));
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4, "{csv}");
    // The client's own: this end first; a connection back: the server's end first, as 2.1.8's
    // "127.0.0.1,39608,127.0.0.1,5302,2,..." for -r.
    assert_eq!((rows[0][2], rows[0][4], rows[0][5]), ("37440", "5301", "1"));
    assert_eq!(
        (rows[1][2], rows[1][5]),
        ("37452", "2"),
        "each connection its own port"
    );
    assert_eq!((rows[2][2], rows[2][4], rows[2][5]), ("40298", "5302", "3"));
    assert_eq!((rows[3][2], rows[3][5]), ("40312", "4"));
    let back = r.streams.iter().find(|s| s.id == 2).unwrap();
    assert_eq!(rows[2][7], back.bytes_received.to_string());
}
