//! iperf 2's text and CSV from a real `landspeed run --iperf2 -P 2 --bidir -t 2 -i 1 --json`
//! against `iperf -s` 2.1.8 (tests/fixtures/iperf2-bidir-p2.json): the lines iperf 2.1.8's client
//! prints for the same command line, in its shape, with the document's figures.

use landspeed_core::result::RunResult;
use landspeed_report::iperf2_text::{head, render, Iperf2Style};

fn fixture() -> RunResult {
    serde_json::from_str(include_str!("fixtures/iperf2-bidir-p2.json")).unwrap()
}

fn style(csv: bool, interval_s: Option<f64>) -> Iperf2Style {
    Iperf2Style {
        csv,
        enhanced: false,
        format: 'a',
        interval_s,
    }
}

#[test]
fn the_text_has_iperf2s_lines_with_the_documents_figures() {
    let t = render(&fixture(), &style(false, Some(1.0)));
    let lines: Vec<&str> = t.lines().collect();
    // Two connections, each marked full duplex; the column head.
    assert!(
        lines[0].starts_with("[  1] local 127.0.0.1 port ") && lines[0].ends_with("(full-duplex)"),
        "{t}"
    );
    assert!(lines[1].starts_with("[  2] local "), "{t}");
    assert_eq!(lines[2], "[ ID] Interval       Transfer     Bandwidth");
    // Two whole intervals (the 0.9 ms tail is left to the totals), each: 2 sending streams, 2
    // receiving ones and the SUM of both directions (full duplex sums no direction alone); then
    // the totals likewise.
    assert_eq!(
        lines[3], "[  1] 0.0000-1.0000 sec  1.82 GBytes  15.7 Gbits/sec",
        "{t}"
    );
    assert!(lines[5].starts_with("[ *1] 0.0000-1.0000 sec"), "{t}");
    assert_eq!(
        lines[7], "[SUM] 0.0000-1.0000 sec  6.27 GBytes  53.9 Gbits/sec",
        "{t}"
    );
    assert!(lines[8].starts_with("[  1] 1.0000-2.0000 sec"), "{t}");
    assert!(
        !t.contains("2.0000-2.0009"),
        "the tail is not an interval of iperf 2's: {t}"
    );
    assert_eq!(
        lines[13], "[  1] 0.0000-1.9995 sec  3.79 GBytes  16.3 Gbits/sec",
        "{t}"
    );
    assert!(
        lines[17].starts_with("[SUM] 0.0000-1.9995 sec  13.0 GBytes"),
        "{t}"
    );
    assert_eq!(t.matches("[SUM]").count(), 3, "{t}");
    assert_eq!(lines.len(), 18, "{t}");
    // Without -i, the totals only.
    let t = render(&fixture(), &style(false, None));
    assert!(!t.contains("1.0000-2.0000"), "{t}");
    assert!(t.contains("[ *2] 0.0000-1.9980 sec"), "{t}");
}

#[test]
fn the_csv_has_a_line_per_stream_per_interval_and_per_total() {
    let r = fixture();
    let t = render(&r, &style(true, Some(1.0)));
    let lines: Vec<Vec<&str>> = t.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(lines.len(), 4 * 3, "{t}");
    assert!(lines.iter().all(|f| f.len() == 9 && f[0].len() == 14), "{t}");
    // A sending stream names this end first; a received one the server's end.
    assert_eq!(lines[0][4], "5101");
    assert_eq!(lines[2][2], "5101");
    assert_eq!(
        (lines[0][5], lines[0][6], lines[0][7]),
        ("1", "0.0-1.0", "1956642816")
    );
    let total: u64 = lines[8..].iter().map(|f| f[7].parse::<u64>().unwrap()).sum();
    let want: u64 = r.streams.iter().map(|s| s.bytes_received).sum();
    assert_eq!(total, want);
    // bits/s of a total: its bytes over its own time.
    assert_eq!(
        lines[8][8],
        format!("{:.0}", 4_066_377_728.0 * 8.0 / 1.999_467_756_000_000_3)
    );
}

#[test]
fn the_head_is_iperf2s_dashed_block() {
    use landspeed_report::iperf2_text::{EnhancedHead, TcpHead};
    // iperf 2.1.8's own lines (`-w 256K`: Linux grants twice what is asked; none asked: its
    // default; `-e -P 2`: pid, flows, write size, type of service and Nagle).
    let asked = TcpHead {
        window: (512 * 1024, Some(256 * 1024)),
        ..Default::default()
    };
    assert_eq!(
        head("h.example", 5001, &asked).lines().collect::<Vec<_>>(),
        [
            "------------------------------------------------------------",
            "Client connecting to h.example, TCP port 5001",
            "TCP window size:  512 KByte (WARNING: requested  256 KByte)",
            "------------------------------------------------------------"
        ]
    );
    let enhanced = TcpHead {
        window: (16 * 1024, None),
        enhanced: Some(EnhancedHead {
            pid: 16579,
            flows: 2,
            write_bytes: 131_072,
            tos: 0,
            nodelay: false,
            frames: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        head("127.0.0.1", 5401, &enhanced).lines().collect::<Vec<_>>(),
        [
            "------------------------------------------------------------",
            "Client connecting to 127.0.0.1, TCP port 5401 with pid 16579 (2 flows)",
            "Write buffer size: 131072 Byte",
            "TOS set to 0x0 (Nagle on)",
            "TCP window size: 16.0 KByte (default)",
            "------------------------------------------------------------"
        ]
    );
    // iperf 2.1.8's `-e -l 10K -S lowdelay -Z reno -M 1000`: the MSS asked and the congestion
    // control between the write size and the type of service; `-m` alone: a new socket's MSS.
    let options = TcpHead {
        mss: Some(landspeed_report::iperf2_text::MssLine::Asked(1000)),
        congestion: Some("reno".into()),
        enhanced: enhanced.enhanced.clone().map(|e| EnhancedHead {
            pid: 4233,
            flows: 1,
            write_bytes: 10240,
            tos: 0x10,
            ..e
        }),
        ..enhanced.clone()
    };
    assert_eq!(
        head("127.0.0.1", 5001, &options).lines().collect::<Vec<_>>(),
        [
            "------------------------------------------------------------",
            "Client connecting to 127.0.0.1, TCP port 5001 with pid 4233 (1 flows)",
            "Write buffer size: 10240 Byte",
            "MSS req size 1000 bytes (per TCP_MAXSEG)",
            "TCP congestion control set to reno",
            "TOS set to 0x10 (Nagle on)",
            "TCP window size: 16.0 KByte (default)",
            "------------------------------------------------------------"
        ]
    );
    let printed = TcpHead {
        mss: Some(landspeed_report::iperf2_text::MssLine::Default(536)),
        ..asked.clone()
    };
    assert_eq!(
        head("h", 5001, &printed).lines().nth(2),
        Some("MSS size 536 bytes")
    );
    // iperf 2.1.8's `-c 127.0.0.1 --isochronous=60:2m,200k` (TCP frames): their line after the
    // write size, its rates four characters wide.
    let mut frames = enhanced.clone();
    if let Some(e) = frames.enhanced.as_mut() {
        e.flows = 1;
        e.frames = Some(landspeed_core::frames::FrameSpec {
            fps: 60.0,
            mean_bps: 2e6,
            stddev_bps: 2e5,
            ipg_ns: 0,
        });
    }
    assert_eq!(
        head("127.0.0.1", 5301, &frames).lines().collect::<Vec<_>>()[1..5],
        [
            "Client connecting to 127.0.0.1, TCP port 5301 with pid 16579 (1 flows)",
            "Write buffer size: 131072 Byte",
            "Isochronous: 60.00 frames/sec mean=2.00 Mbit/s, stddev= 200 Kbit/s, Period/IPG=16.67/0.000 ms",
            "TOS set to 0x0 (Nagle on)",
        ]
    );
}

/// iperf 2.1.8's `[ CT]` line for two connections of 0.068 and 0.071 ms: its standard deviation
/// printed a thousand times too large, as it prints it.
#[test]
fn the_connect_times_line_is_iperf2s() {
    use landspeed_core::endpoint::ConnectFacts;
    let f = |ms| ConnectFacts {
        connect_ms: Some(ms),
        ..ConnectFacts::default()
    };
    assert_eq!(
        landspeed_report::iperf2_text::connect_times(&[f(0.068), f(0.0725), f(0.071)]),
        "[ CT] final connect times (min/avg/max/stdev) = 0.068/0.071/0.072/2.291 ms (tot/err) = 3/0\n"
    );
    assert_eq!(landspeed_report::iperf2_text::connect_times(&[]), "");
}

/// A UDP stream received with its transit as iperf 2.1.8's `-u -R -e -t 2 -i 1` client printed
/// it on loopback (`[ *1] 0.0000-1.0000 sec   129 KBytes  1.06 Mbits/sec   0.005 ms 0/90 (0%)
/// 0.060/0.007/4.120/0.433 ms 91 pps 90/0(0) pkts 2222`), its total, and `--full-duplex -e`'s
/// `[FD1]` line: the same figures give the same lines.
#[test]
fn the_enhanced_received_udp_lines_are_iperf2s() {
    use landspeed_core::result::{IntervalResult, IntervalStream, StreamResult};
    use landspeed_core::udp::{TransitSummary, UdpStats};
    use landspeed_report::iperf2_text::{
        column_head_udp_received, full_duplex_interval, interval_udp_received, totals_udp_received, Ends,
    };
    let e = Iperf2Style {
        enhanced: true,
        ..style(false, Some(1.0))
    };
    let r = fixture();
    let stream = |id, bytes, transit| IntervalStream {
        id,
        bytes,
        datagrams_sent: Some(90),
        datagrams_lost: Some(0),
        jitter_ms: Some(0.005),
        transit,
        ..r.intervals[0].streams[0].clone()
    };
    let transit = TransitSummary {
        datagrams: 90,
        mean_ms: 132_300.0 / 2222.0 / 1e3,
        min_ms: 0.007,
        max_ms: 4.12,
        stddev_ms: 0.433,
        per_s: 91.0,
    };
    let i = IntervalResult {
        start_s: 0.0,
        end_s: 1.0,
        streams: vec![stream(0, 132_300, Some(transit))],
        ..r.intervals[0].clone()
    };
    let ends = Ends::new("127.0.0.1:42126", "127.0.0.1:15121");
    assert_eq!(
        interval_udp_received(&i, &e, (&ends, 0.0)),
        "[ *1] 0.0000-1.0000 sec   129 KBytes  1.06 Mbits/sec   0.005 ms 0/90 (0%) 0.060/0.007/4.120/0.433 ms 91 pps 90/0(0) pkts 2222\n"
    );
    assert!(column_head_udp_received(&e).ends_with("Latency avg/min/max/stdev PPS  Rx/inP  NetPwr\n"));
    // No datagram in the interval: dashes, as iperf 2 prints them.
    let empty = IntervalResult {
        streams: vec![stream(0, 0, None)],
        ..i.clone()
    };
    assert!(interval_udp_received(&empty, &e, (&ends, 0.0)).ends_with(" -/-/-/- ms 0 pps\n"));
    let total = StreamResult {
        id: 0,
        flow: landspeed_core::config::Flow::ServerToClient,
        bytes_received: 266_070,
        duration_s: 2.0148,
        udp: Some(UdpStats {
            datagrams_sent: Some(181),
            datagrams_received: 181,
            jitter_ms: 0.003,
            transit: Some(TransitSummary {
                datagrams: 181,
                mean_ms: 266_070.0 / 2.0148 / 3551.0 / 1e3,
                min_ms: 0.007,
                max_ms: 4.12,
                stddev_ms: 0.305,
                per_s: 89.8,
            }),
            ..Default::default()
        }),
        ..r.streams[0].clone()
    };
    let one = RunResult {
        streams: vec![total],
        ..r.clone()
    };
    assert_eq!(
        totals_udp_received(&one, &e),
        "[ *1] 0.0000-2.0148 sec   260 KBytes  1.06 Mbits/sec   0.003 ms 0/181 (0%) 0.037/0.007/4.120/0.305 ms 90 pps 181/0(0) pkts 3551\n"
    );
    // --full-duplex -e: 91 datagrams' bytes sent and 90 received over the second.
    let sent = IntervalResult {
        streams: vec![stream(0, 133_770, None)],
        ..i.clone()
    };
    let back = IntervalResult {
        streams: vec![stream(1, 132_300, Some(transit))],
        ..i.clone()
    };
    assert_eq!(
        full_duplex_interval((&sent, &back), &e, (1470, false)),
        "[FD1] 0.0000-1.0000 sec   260 KBytes  2.13 Mbits/sec 181     181 pps\n"
    );
}
