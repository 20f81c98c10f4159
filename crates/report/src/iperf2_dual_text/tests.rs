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
    let plain = listener_head((5302, 5301), (131072, None), None);
    assert!(
        plain.contains("\nServer listening on TCP port 5302\nTCP window size:  128 KByte (default)\n"),
        "{plain}"
    );
    // A server port above the listener's: iperf 2.1.8 prints the two as a range, with its pid.
    let pid = std::process::id();
    assert!(
        listener_head((37251, 37701), (131072, None), None).contains(&format!(
            "\nServer listening on TCP ports 37251-37701 with pid {pid}\n"
        ))
    );
    // -w asked: what the kernel granted, and what was asked (iperf 2.1.8's words).
    let asked = listener_head((5302, 5301), (2 << 20, Some(1 << 20)), None);
    assert!(
        asked.contains("\nTCP window size: 2.00 MByte (WARNING: requested 1.00 MByte)\n"),
        "{asked}"
    );
}

#[test]
fn with_e_the_listener_names_its_pid_and_read_size_and_each_connection_back_its_socket() {
    let pid = std::process::id();
    let e = listener_head((5450, 5420), (131072, None), Some(128 * 1024));
    assert_eq!(
        e,
        format!(
            "{DASHES}\nServer listening on TCP port 5450 with pid {pid}\n\
             Read buffer size:  128 KByte (Dist bin width=16.0 KByte)\n\
             TCP window size:  128 KByte (default)\n{DASHES}\n"
        )
    );
    let mut d = dual();
    d.back[0].facts = Some(landspeed_core::endpoint::ConnectFacts {
        fd: Some(5),
        interface: Some("lo".into()),
        ..Default::default()
    });
    let lines = connected_back(&d, Some(0.0));
    assert!(
        lines.starts_with(
            "[  3] local 127.0.0.1%lo port 5302 connected with 127.0.0.1 port 40298 (sock=5) on 1970-01-01 00:00:00 (UTC)\n"
        ),
        "{lines}"
    );
    // Without -e, no interface and no descriptor.
    assert!(connected_back(&d, None)
        .starts_with("[  3] local 127.0.0.1 port 5302 connected with 127.0.0.1 port 40298\n"));
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

/// The server's UDP stream to the client's listener as iperf 2.1.8's `-u -d -t 2 -i 1 -L 15102`
/// client printed it on loopback: `[  2] 0.0000-1.0000 sec   129 KBytes  1.06 Mbits/sec   0.003 ms
/// 0/90 (0%)` and its CSV `...,127.0.0.1,53955,127.0.0.1,15114,2,0.0-1.0,132300,1058400,0.003,0,90,
/// 0.000,0` (the sending end first), its total `[  2] 0.0000-2.0156 sec   260 KBytes  1.06
/// Mbits/sec   0.003 ms 0/181 (0%)`.
#[test]
fn the_servers_udp_stream_to_the_listener_is_numbered_after_the_clients_without_a_mark() {
    let d = Dual {
        forward: vec![Ends::new("127.0.0.1:42798", "127.0.0.1:15111")],
        back: vec![Ends::new("127.0.0.1:15114", "127.0.0.1:53955")],
        n: 1,
        first_back_id: 1,
    };
    let r = fixture();
    let i = IntervalResult {
        start_s: 0.0,
        end_s: 1.0,
        streams: vec![IntervalStream {
            id: 1,
            bytes: 132_300,
            datagrams_sent: Some(90),
            datagrams_lost: Some(0),
            jitter_ms: Some(0.003),
            ..r.intervals[0].streams[0].clone()
        }],
        ..r.intervals[0].clone()
    };
    assert_eq!(
        interval_udp_back(&i, &d, &style(false), 0.0),
        "[  2] 0.0000-1.0000 sec   129 KBytes  1.06 Mbits/sec   0.003 ms 0/90 (0%)\n"
    );
    let csv = interval_udp_back(&i, &d, &style(true), 0.0);
    assert_eq!(
        csv.split_once(',').unwrap().1,
        "127.0.0.1,53955,127.0.0.1,15114,2,0.0-1.0,132300,1058400,0.003,0,90,0.000,0\n"
    );
    let back = landspeed_core::result::StreamResult {
        id: 1,
        flow: Flow::ServerToClient,
        bytes_received: 266_070,
        duration_s: 2.0156,
        udp: Some(landspeed_core::udp::UdpStats {
            datagrams_sent: Some(181),
            datagrams_received: 181,
            jitter_ms: 0.003,
            ..Default::default()
        }),
        ..r.streams[0].clone()
    };
    let one = RunResult {
        streams: vec![back],
        ..r.clone()
    };
    assert_eq!(
        total_udp_back(&one, &d, &style(false)),
        "[  2] 0.0000-2.0156 sec   260 KBytes  1.06 Mbits/sec   0.003 ms 0/181 (0%)\n"
    );
    assert!(listener_head_udp((15114, 15111), None).contains("\nServer listening on UDP port 15114\n"));
    let e = listener_head_udp((15116, 15111), Some(1470));
    assert!(
        e.contains("\nRead buffer size: 1.44 KByte (Dist bin width= 183 Byte)\n"),
        "{e}"
    );
}
