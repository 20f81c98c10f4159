//! The shapes of iperf 2.1.8's server output, captured on loopback (`iperf -s -p 5301 [-i 0.5]
//! [-u] [-y C]` against `iperf -c 127.0.0.1 -p 5301` with `-t 1 -P 2`, `--full-duplex`, `-R`, `-u`),
//! drawn from results built the way the server builds its own (`assemble` over the server's samples
//! and reports, the client's side inferred).

use super::*;
use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport, StreamSample, UdpCounts};

fn style(csv: bool, interval_s: Option<f64>) -> Iperf2Style {
    Iperf2Style {
        csv,
        enhanced: false,
        format: 'a',
        interval_s,
    }
}

/// A test the server ran: `ports[id]` the client's port of stream `id`; `cumulative[k][id]` the
/// stream's bytes at the end of interval k (each `step_s` long but the last, which ends at `end_s`);
/// `udp`: each stream's (datagrams sent, received, jitter ms) at each interval's end.
struct Built<'a> {
    spec: TestSpec,
    ports: &'a [u16],
    cumulative: &'a [&'a [u64]],
    end_s: f64,
    udp: Option<&'a [(u64, u64, f64)]>,
}

fn build(b: &Built) -> RunResult {
    let step = b.spec.interval_s.as_secs_f64();
    let n = b.cumulative.len();
    let samples: Vec<IntervalSample> = (0..n)
        .map(|k| IntervalSample {
            index: k as u32,
            start_s: k as f64 * step,
            end_s: if k + 1 == n {
                b.end_s
            } else {
                (k + 1) as f64 * step
            },
            omitted: false,
            streams: b.cumulative[k]
                .iter()
                .enumerate()
                .map(|(id, &bytes)| StreamSample {
                    id: id as u32,
                    bytes,
                    tcp: None,
                    udp: b.udp.map(|u| UdpCounts {
                        expected: u[k].0,
                        received: u[k].1,
                        jitter_ms: Some(u[k].2),
                        transit: None,
                        frames: None,
                    }),
                    reads: None,
                    trips: None,
                    trip_bins: None,
                })
                .collect(),
        })
        .collect();
    let last = b.cumulative[n - 1];
    let end = |at: fn(Flow) -> Role, ports: bool| EndpointReport {
        streams: (0..b.spec.total_streams())
            .map(|id| {
                let flow = b.spec.flow_of(id);
                let mut s = StreamReport::empty(id, flow, at(flow));
                s.bytes = last[id as usize];
                s.calls = b.udp.map_or(0, |u| u[n - 1].0);
                (s.first_byte_s, s.last_byte_s) = (Some(0.0), Some(b.end_s));
                s.peer_port = ports.then(|| b.ports[id as usize]);
                s.udp = b.udp.filter(|_| at(flow) == Role::Receiver).map(|u| {
                    let (sent, got, jitter_ms) = u[n - 1];
                    landspeed_core::udp::UdpStats {
                        datagrams_sent: Some(sent),
                        datagrams_received: got,
                        datagrams_lost: sent - got,
                        loss_pct: (sent - got) as f64 * 100.0 / sent as f64,
                        out_of_order: 1,
                        jitter_ms,
                        ..Default::default()
                    }
                });
                s
            })
            .collect(),
        elapsed_s: b.end_s,
        ..EndpointReport::default()
    };
    assemble(&Inputs {
        spec: &b.spec,
        context: RunContext {
            local_address: "127.0.0.1:37550".into(),
            remote_address: "127.0.0.1:5301".into(),
            protocol: "iperf2".into(),
            started_unix_s: 1_796_000_000.0,
            served_here: true,
            foreign_peer: true,
            ..Default::default()
        },
        client: &end(Role::at_client, false),
        server: &end(Role::at_server, true),
        client_samples: &[],
        server_samples: &samples,
    })
}

fn spec(streams: u32, direction: Direction, transport: Transport) -> TestSpec {
    TestSpec {
        streams,
        direction,
        transport,
        interval_s: std::time::Duration::from_millis(500),
        length_bytes: 1470,
        ..TestSpec::default()
    }
}

/// Each line with its figures masked (digits to `9`), as the shapes are compared.
fn masked(t: &str) -> String {
    t.chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect()
}

#[test]
fn the_head_is_iperf2s_for_tcp_and_udp() {
    assert_eq!(
        listening(false, 5301, Some(131_072), None),
        "------------------------------------------------------------\n\
         Server listening on TCP port 5301\n\
         TCP window size:  128 KByte (default)\n\
         ------------------------------------------------------------\n"
    );
    assert!(listening(true, 5001, Some(212_992), None).contains("\nUDP buffer size:  208 KByte (default)\n"));
    // -e, as iperf 2.1.8's `-s -u -e` prints it: its pid, the read size and the histogram's bins.
    let e = listening(true, 15151, Some(212_992), Some(1470));
    assert!(
        e.contains(&format!(
            "Server listening on UDP port 15151 with pid {}\n",
            std::process::id()
        )),
        "{e}"
    );
    assert!(
        e.contains("\nRead buffer size: 1.44 KByte (Dist bin width= 183 Byte)\n"),
        "{e}"
    );
}

#[test]
fn parallel_streams_are_numbered_from_the_servers_count_with_each_clients_port_and_summed() {
    let r = build(&Built {
        spec: spec(2, Direction::Forward, Transport::Tcp),
        ports: &[37550, 37566],
        cumulative: &[&[1_000_000_000, 800_000_000], &[2_000_000_000, 1_600_000_000]],
        end_s: 0.9992,
        udp: None,
    });
    assert_eq!(numbers_used(&r), 2);
    let st = style(false, Some(0.5));
    assert_eq!(
        connected(&r, 3, &st),
        "[  3] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 37550\n\
         [  4] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 37566\n\
         [ ID] Interval       Transfer     Bandwidth\n"
    );
    assert_eq!(printed(&r, &st), [0, 1]);
    assert_eq!(
        interval(&r, 0, 3, &st),
        "[  3] 0.0000-0.5000 sec   954 MBytes  16.0 Gbits/sec\n\
         [  4] 0.0000-0.5000 sec   763 MBytes  12.8 Gbits/sec\n\
         [SUM] 0.0000-0.5000 sec  1.68 GBytes  28.8 Gbits/sec\n"
    );
    let t = totals(&r, 3, &st);
    assert_eq!(
        masked(&t),
        "[  9] 9.9999-9.9999 sec  9.99 GBytes  99.9 Gbits/sec\n\
         [  9] 9.9999-9.9999 sec  9.99 GBytes  99.9 Gbits/sec\n\
         [SUM] 9.9999-9.9999 sec  9.99 GBytes  99.9 Gbits/sec\n"
    );
    assert!(t.starts_with("[  3] 0.0000-0.9992 sec  1.86 GBytes"), "{t}");
}

#[test]
fn without_an_interval_only_the_totals_are_printed_and_a_last_sliver_never() {
    let r = build(&Built {
        spec: spec(1, Direction::Forward, Transport::Tcp),
        ports: &[37518],
        cumulative: &[&[100], &[200], &[201]],
        end_s: 1.02,
        udp: None,
    });
    assert!(printed(&r, &style(false, None)).is_empty());
    // 1.0-1.02 is under a tenth of 0.5 s: its bytes are in the total only.
    assert_eq!(printed(&r, &style(false, Some(0.5))), [0, 1]);
}

/// A full-duplex TCP test over one connection: 1.3 GB in, 1.4 GB out in two intervals.
fn full_duplex_one() -> RunResult {
    build(&Built {
        spec: spec(1, Direction::Bidir, Transport::Tcp),
        ports: &[58966, 58966],
        cumulative: &[&[600_000_000, 650_000_000], &[1_300_000_000, 1_400_000_000]],
        end_s: 1.0,
        udp: None,
    })
}

/// Each line's tag (`[  1]`, `[ *1]`, `[SUM]`).
fn tags(text: &str) -> Vec<String> {
    text.lines().map(|l| l[..5].to_string()).collect()
}

#[test]
fn full_duplex_shares_a_number_and_marks_what_the_server_sent() {
    let r = full_duplex_one();
    let st = style(false, Some(0.5));
    assert_eq!(
        connected(&r, 1, &st).lines().next(),
        Some("[  1] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 58966 (full-duplex)")
    );
    assert_eq!(tags(&interval(&r, 0, 1, &st)), ["[  1]", "[ *1]"]);
    assert_eq!(tags(&totals(&r, 1, &st)), ["[  1]", "[ *1]"]);
}

#[test]
fn connections_back_take_numbers_of_their_own() {
    // -d: the client's connection in, the server's connection back from another port.
    let r = build(&Built {
        spec: spec(1, Direction::Bidir, Transport::Tcp),
        ports: &[58982, 5302],
        cumulative: &[&[100, 200]],
        end_s: 1.0,
        udp: None,
    });
    assert_eq!(numbers_used(&r), 2);
    let c = connected(&r, 1, &style(false, None));
    assert!(
        c.contains("[  2] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 5302\n"),
        "{c}"
    );
    assert!(!c.contains("full-duplex"), "{c}");
}

#[test]
fn reverse_marks_the_connection_and_csv_names_the_sender_first() {
    let r = build(&Built {
        spec: spec(1, Direction::Reverse, Transport::Tcp),
        ports: &[59022],
        cumulative: &[&[1_282_670_592]],
        end_s: 1.0,
        udp: None,
    });
    assert!(connected(&r, 1, &style(false, None)).contains("port 59022 (reverse)\n"));
    let csv = totals(&r, 1, &style(true, None));
    let fields: Vec<&str> = csv.trim_end().split(',').collect();
    assert_eq!(
        fields[1..],
        [
            "127.0.0.1",
            "5301",
            "127.0.0.1",
            "59022",
            "1",
            "0.0-1.0",
            "1282670592",
            "10261364736"
        ]
    );
}

#[test]
fn udp_lines_carry_jitter_and_loss_and_its_csv_iperf2s_receiver_columns() {
    let r = build(&Built {
        spec: spec(1, Direction::Forward, Transport::Udp),
        ports: &[57730],
        cumulative: &[&[69_090], &[136_710]],
        end_s: 1.0208,
        udp: Some(&[(47, 47, 0.008), (93, 92, 0.007)]),
    });
    let st = style(false, Some(0.5));
    let c = connected(&r, 1, &st);
    assert!(c.ends_with(crate::iperf2_text::COLUMN_HEAD_UDP_RECEIVED), "{c}");
    assert_eq!(
        interval(&r, 0, 1, &st),
        "[  1] 0.0000-0.5000 sec  67.5 KBytes  1.11 Mbits/sec   0.008 ms 0/47 (0%)\n"
    );
    assert_eq!(
        totals(&r, 1, &st),
        "[  1] 0.0000-1.0208 sec   134 KBytes  1.07 Mbits/sec   0.007 ms 1/93 (1.1%)\n\
         [  1] 0.0000-1.0208 sec  1 datagrams received out-of-order\n"
    );
    let csv = interval(&r, 1, 1, &style(true, Some(0.5)));
    let fields: Vec<&str> = csv.trim_end().split(',').collect();
    assert_eq!(
        fields[1..],
        [
            "127.0.0.1",
            "57730",
            "127.0.0.1",
            "5301",
            "1",
            "0.5-1.0",
            "67620",
            "1038710",
            "0.007",
            "1",
            "46",
            "2.174",
            "0"
        ]
    );
}

/// A TCP test of `streams` in `direction` sampled each second with iperf 2's 128 KiB writes (the
/// `ports` and `cumulative` bytes as `Built` takes them), and `-e -i 1`'s style.
fn enhanced_tcp(direction: Direction, ports: &[u16], cumulative: &[&[u64]]) -> (RunResult, Iperf2Style) {
    let mut s = spec(ports.len() as u32, direction, Transport::Tcp);
    if direction == Direction::Bidir {
        s.streams = 1;
    }
    s.interval_s = std::time::Duration::from_secs(1);
    s.length_bytes = 131_072;
    let r = build(&Built {
        spec: s,
        ports,
        cumulative,
        end_s: 2.0,
        udp: None,
    });
    let st = Iperf2Style {
        enhanced: true,
        ..style(false, Some(1.0))
    };
    (r, st)
}

#[test]
fn tcp_enhanced_lines_carry_the_reads_as_iperf_2s_do() {
    // iperf 2.1.8's `-s -e -i 1` against `-c -P 2 -t 2`: the head, each stream's reads and their
    // eighths, the [SUM] of both.
    let (mut r, st) = enhanced_tcp(
        Direction::Forward,
        &[55028, 55042],
        &[&[6_553_600, 6_684_672], &[13_107_200, 13_238_272]],
    );
    let bins = |b: [u64; 8]| {
        Some(ReadBins {
            width_bytes: 16_384,
            bins: b,
        })
    };
    for (k, each) in [
        [[9, 0, 1, 4, 2, 1, 0, 46], [12, 0, 0, 1, 1, 0, 0, 50]],
        [[16, 0, 0, 4, 0, 0, 0, 48], [12, 0, 0, 6, 2, 0, 0, 46]],
    ]
    .iter()
    .enumerate()
    {
        for (st, b) in r.intervals[k].streams.iter_mut().zip(each) {
            st.reads = bins(*b);
        }
    }
    assert!(
        connected(&r, 1, &st).ends_with("[ ID] Interval            Transfer    Bandwidth       Reads=Dist\n")
    );
    let first = interval(&r, 0, 1, &st);
    assert_eq!(
        first,
        "[  1] 0.0000-1.0000 sec  6.25 MBytes  52.4 Mbits/sec  63=9:0:1:4:2:1:0:46\n\
         [  2] 0.0000-1.0000 sec  6.38 MBytes  53.5 Mbits/sec  64=12:0:0:1:1:0:0:50\n\
         [SUM] 0.0000-1.0000 sec  12.6 MBytes   106 Mbits/sec  127=21:0:1:5:3:1:0:96\n"
    );
    let end = totals(&r, 1, &st);
    assert!(
        end.contains("[  1] 0.0000-2.0000 sec  12.5 MBytes  52.4 Mbits/sec  131=25:0:1:8:2:1:0:94\n"),
        "{end}"
    );
    assert!(
        end.contains("[SUM] 0.0000-2.0000 sec  25.1 MBytes   105 Mbits/sec  261=49:0:1:15:5:1:0:190\n"),
        "{end}"
    );
    // Without -e, iperf 2's plain lines.
    assert!(!interval(&r, 0, 1, &style(false, Some(1.0))).contains('='));
    // The head names the read buffer and the bins' width.
    let e = listening(false, 15402, Some(131_072), Some(131_072));
    assert!(e.contains("\nRead buffer size:  128 KByte (Dist bin width=16.0 KByte)\nTCP window size:  128 KByte (default)\n"), "{e}");
}

#[test]
fn tcp_enhanced_lines_of_what_the_server_sends_carry_its_writes() {
    // iperf 2.1.8's `-s -e -i 1` against `-c -R -t 2 -b 50M`: the writes' column head, each line's
    // writes/errors, retries, cwnd/RTT and net power.
    let (r, st) = enhanced_tcp(Direction::Reverse, &[55724], &[&[6_553_600], &[13_107_200]]);
    let head = connected(&r, 1, &st);
    // Not dated: 2.1.8 dates a connection it receives on only (checked again 2026-12-07).
    assert!(head.contains(" (reverse)\n"), "{head}");
    assert!(head.ends_with("[ ID] Interval            Transfer    Bandwidth       Write/Err  Rtry     Cwnd/RTT(var)        NetPwr\n"), "{head}");
    assert_eq!(
        masked(&interval(&r, 0, 1, &st)),
        masked("[  1] 0.0000-1.0000 sec  6.25 MBytes  52.4 Mbits/sec  50/0          0       0K/0(0) us  0\n")
    );
    let end = totals(&r, 1, &st);
    assert!(
        end.starts_with("[  1] 0.0000-2.0000 sec  12.5 MBytes  52.4 Mbits/sec  100/0 "),
        "{end}"
    );
}

#[test]
fn tcp_full_duplex_enhanced_heads_each_kind_once_and_closes_with_fd_lines() {
    // iperf 2.1.8's `-s -e -i 1` against `-c --full-duplex -t 2 -b 50M`: the reads' head (with the
    // connection), the writes' before the first line sent, the plain head before the first [FD1].
    let (r, st) = enhanced_tcp(
        Direction::Bidir,
        &[33392, 33392],
        &[&[6_553_600, 6_553_600], &[13_107_200, 13_107_200]],
    );
    assert!(connected(&r, 1, &st).ends_with("Reads=Dist\n"));
    let heads = |t: &str| t.lines().filter(|l| l.starts_with("[ ID]")).count();
    let first = interval(&r, 0, 1, &st);
    let kinds: Vec<&str> = first.lines().map(|l| &l[..5]).collect();
    assert_eq!(kinds, ["[  1]", "[ ID]", "[ *1]", "[ ID]", "[FD1]"], "{first}");
    assert!(
        first.contains("[FD1] 0.0000-1.0000 sec  12.5 MBytes   105 Mbits/sec\n"),
        "{first}"
    );
    let second = interval(&r, 1, 1, &st);
    assert_eq!(heads(&second), 0, "{second}");
    assert!(
        second.ends_with("[FD1] 1.0000-2.0000 sec  12.5 MBytes   105 Mbits/sec\n"),
        "{second}"
    );
    let end = totals(&r, 1, &st);
    assert_eq!(heads(&end), 0, "{end}");
    assert!(
        end.ends_with("[FD1] 0.0000-2.0000 sec  25.0 MBytes   105 Mbits/sec\n"),
        "{end}"
    );
    // Without -i the totals carry the heads.
    let quiet = Iperf2Style {
        enhanced: true,
        ..style(false, None)
    };
    assert_eq!(heads(&totals(&r, 1, &quiet)), 2);
}

/// A `--trip-times` client's test (2 streams, 1 s intervals, 2 s): each interval's transits and
/// reads as the server's samples give them.
fn timed_tcp() -> RunResult {
    let mut s = spec(2, Direction::Forward, Transport::Tcp);
    s.interval_s = std::time::Duration::from_secs(1);
    s.length_bytes = 131_072;
    s.trip_times = true;
    let mut r = build(&Built {
        spec: s,
        ports: &[55028, 55042],
        cumulative: &[&[6_553_600, 6_553_600], &[13_107_200, 13_107_200]],
        end_s: 2.0,
        udp: None,
    });
    let transit = |mean_ms: f64, min_ms: f64, max_ms: f64| TransitSummary {
        datagrams: 50,
        mean_ms,
        min_ms,
        max_ms,
        stddev_ms: 0.05,
        per_s: 50.0,
    };
    for (k, i) in r.intervals.iter_mut().enumerate() {
        for st in i.streams.iter_mut() {
            st.transit = Some(transit(0.15 + k as f64 * 0.1, 0.1, 0.3 + k as f64));
            st.reads = Some(ReadBins {
                width_bytes: 16_384,
                bins: [2, 0, 0, 0, 0, 0, 0, 50],
            });
        }
    }
    r
}

#[test]
fn a_trip_times_clients_lines_carry_its_bursts_latency_with_or_without_e() {
    // iperf 2.1.8's `-s [-e] -i 1` against `-c -P 2 --trip-times`: its `-e` lines whether or not
    // the server was given `-e`, the bursts' latency (avg/min/max/stdev, count/size, Little's law's
    // bytes in flight, net power) before the reads; the [SUM] under a head of its own, with the
    // reads only with `-e`.
    let r = timed_tcp();
    for enhanced in [false, true] {
        let st = Iperf2Style {
            enhanced,
            ..style(false, Some(1.0))
        };
        let c = connected(&r, 1, &st);
        assert!(c.contains(" port 55028 (trip-times) on "), "{c}");
        assert!(c.ends_with("[ ID] Interval            Transfer    Bandwidth    Burst Latency avg/min/max/stdev (cnt/size) inP NetPwr  Reads=Dist\n"), "{c}");
        let first = interval(&r, 0, 1, &st);
        let (head, sum) = match enhanced {
            true => (READS_HEAD, "  104=4:0:0:0:0:0:0:100"),
            false => (PLAIN_HEAD, ""),
        };
        assert_eq!(
            first,
            format!(
                "[  1] 0.0000-1.0000 sec  6.25 MBytes  52.4 Mbits/sec  0.150/0.100/0.300/0.050 ms (50/131072)  983 Byte 43691  52=2:0:0:0:0:0:0:50\n\
                 [  2] 0.0000-1.0000 sec  6.25 MBytes  52.4 Mbits/sec  0.150/0.100/0.300/0.050 ms (50/131072)  983 Byte 43691  52=2:0:0:0:0:0:0:50\n\
                 {head}[SUM] 0.0000-1.0000 sec  12.5 MBytes   105 Mbits/sec{sum}\n"
            )
        );
        assert!(
            !interval(&r, 1, 1, &st).contains("[ ID]"),
            "the [SUM]'s head comes once"
        );
        // The totals merge the intervals' transits exactly: 100 bursts, mean 0.2 ms, the least and
        // the most of both.
        let end = totals(&r, 1, &st);
        assert!(
            end.contains("[  1] 0.0000-2.0000 sec  12.5 MBytes  52.4 Mbits/sec  0.200/0.100/1.300/0.071 ms (100/131072) 1.28 KByte 32768  104=4:0:0:0:0:0:0:100\n"),
            "{end}"
        );
        assert!(!end.contains("[ ID]"), "{end}");
    }
}

#[test]
fn a_frame_senders_timed_lines_are_marked_isoch_without_bytes_in_flight() {
    // iperf 2.1.8's `-s` against `-c --isochronous --trip-times`: the connection marked `(isoch)
    // (trip-times)`, its burst columns without `inP` (2.1.8 prints zeros there; landspeed the
    // bursts' latency).
    let mut r = timed_tcp();
    r.frames = Some(Default::default());
    let st = style(false, Some(1.0));
    let c = connected(&r, 1, &st);
    assert!(c.contains(" port 55028 (isoch) (trip-times) on "), "{c}");
    assert!(c.ends_with("[ ID] Interval            Transfer    Bandwidth    Burst Latency avg/min/max/stdev (cnt/size) NetPwr  Reads=Dist\n"), "{c}");
    let first = interval(&r, 0, 1, &st);
    assert!(
        first.starts_with("[  1] 0.0000-1.0000 sec  6.25 MBytes  52.4 Mbits/sec  0.150/0.100/0.300/0.050 ms (50/131072) 43691  52=2:0:0:0:0:0:0:50\n"),
        "{first}"
    );
}

#[test]
fn reverse_streams_sum_under_the_reads_head_with_e() {
    // iperf 2.1.8's `-s -e` against `-c -t 1 -R -P 2`: the streams' write lines, then its [SUM]
    // under the reads' head with a reads column (its counts there are not reads; the drop-in
    // prints the none it read).
    let (r, st) = enhanced_tcp(
        Direction::Reverse,
        &[36760, 36774],
        &[&[6_684_672, 6_684_672], &[13_369_344, 13_369_344]],
    );
    let no_i = Iperf2Style {
        interval_s: None,
        ..st
    };
    let end = totals(&r, 1, &no_i);
    assert!(
        end.ends_with(&format!(
            "{READS_HEAD}[SUM] 0.0000-2.0000 sec  25.5 MBytes   107 Mbits/sec  0=0:0:0:0:0:0:0:0\n"
        )),
        "{end}"
    );
    assert!(
        !totals(&r, 1, &st).contains("[ ID]"),
        "with -i the first interval had the head"
    );
    let first = interval(&r, 0, 1, &st);
    assert!(first.contains(&format!("{READS_HEAD}[SUM] ")), "{first}");
    assert!(!interval(&r, 1, 1, &st).contains("[ ID]"), "the head comes once");
    assert!(
        !totals(&r, 1, &style(false, Some(1.0))).contains("Reads"),
        "without -e: plain"
    );
}

#[test]
fn a_joined_groups_head_is_iperf2s() {
    let g = "239.1.1.1".parse().unwrap();
    let head = listening(true, 5001, Some(212_992), None);
    let t = joined(&head, g, None, None);
    let want = "Server listening on UDP port 5001\nJoining multicast group  239.1.1.1\nServer set to single client traffic mode (per multicast receive)\nUDP buffer size:  208 KByte (default)\n";
    assert!(t.contains(want), "{t}");
    assert!(
        joined(&head, g, None, Some("eth0")).contains("\nJoining multicast (*,G)=*,239.1.1.1 w/iface eth0\n")
    );
    let ssm = joined(
        &head,
        "232.1.1.1".parse().unwrap(),
        Some("198.18.50.1".parse().unwrap()),
        None,
    );
    assert!(
        ssm.contains("\nJoining multicast (S,G)=198.18.50.1,232.1.1.1\nServer set"),
        "{ssm}"
    );
    // -e: the read buffer's line between the join and the mode, as iperf 2.1.8's.
    let e = joined(&listening(true, 5001, Some(212_992), Some(1470)), g, None, None);
    assert!(e.contains("\nJoining multicast group  239.1.1.1\nRead buffer size: 1.44 KByte (Dist bin width= 183 Byte)\nServer set to"), "{e}");
}

/// How a connection was made, as the server keeps it.
fn made(local: &str, back: bool) -> ConnectFacts {
    ConnectFacts {
        cwnd_mss_rtt: Some((320, 32768, 27)),
        fd: Some(4),
        interface: Some("lo".into()),
        local: Some(local.into()),
        back,
        send_buffer_bytes: Some(16384),
        ..ConnectFacts::default()
    }
}

#[test]
fn a_connections_marks_follow_iperf2s_order_and_e_adds_its_socket_interface_and_peer() {
    // Captured from iperf 2.1.8's server (`iperf -s [-e]`, a 2.1.8 client with -S 0x10).
    let mut r = build(&Built {
        spec: TestSpec {
            tos: Some(0x10),
            ..spec(1, Direction::Forward, Transport::Tcp)
        },
        ports: &[45038],
        cumulative: &[&[100]],
        end_s: 1.0,
        udp: None,
    });
    r.streams[0].connection = Some(made("127.0.0.1:5301", false));
    r.local.software = "iperf 2 2.1.8 client".into();
    let plain = connected(&r, 1, &style(false, None));
    assert_eq!(
        plain.lines().next(),
        Some("[  1] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 45038 (tos rx=0x10) (icwnd/mss/irtt=320/32768/27)")
    );
    let e = Iperf2Style {
        enhanced: true,
        ..style(false, None)
    };
    let line = connected(&r, 1, &e)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        masked(&line),
        masked("[  1] local 127.0.0.1%lo port 5301 connected with 127.0.0.1 port 45038 (sock=4) (tos rx=0x10) (peer 2.1.8) (icwnd/mss/irtt=320/32768/27) on 2026-12-07 01:52:29 (UTC)")
    );
}

#[test]
fn a_connection_back_gets_a_clients_head_its_own_port_a_star_and_reverse() {
    // -d as iperf 2.1.8's server prints it: the client's connection, then its own back to -L.
    let mut r = build(&Built {
        spec: spec(1, Direction::Bidir, Transport::Tcp),
        ports: &[58982, 5302],
        cumulative: &[&[100, 200]],
        end_s: 1.0,
        udp: None,
    });
    r.streams[0].connection = Some(made("127.0.0.1:5301", false));
    r.streams[1].connection = Some(made("127.0.0.1:40000", true));
    let st = style(false, None);
    let c = connected(&r, 1, &st);
    let want = format!(
        "[  1] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 58982 (icwnd/mss/irtt=320/32768/27)\n{DASHES}\nClient connecting to 127.0.0.1, TCP port 5302\nTCP window size: 16.0 KByte (default)\n{DASHES}\n[ *2] local 127.0.0.1 port 40000 connected with 127.0.0.1 port 5302 (reverse) (icwnd/mss/irtt=320/32768/27)\n"
    );
    assert!(c.starts_with(&want), "{c}");
    assert_eq!(tags(&totals(&r, 1, &st)), ["[  1]", "[ *2]", "[SUM]"]);
}

#[test]
fn full_duplex_sums_both_ways_once_as_iperf2_does() {
    let r = full_duplex_one();
    // One connection: the [SUM] of both ways at the end when no interval was printed only.
    let sum = totals(&r, 1, &style(false, None));
    assert_eq!(
        sum.lines().last(),
        Some("[SUM] 0.0000-1.0000 sec  2.51 GBytes  21.6 Gbits/sec"),
        "{sum}"
    );
    let two = build(&Built {
        spec: spec(2, Direction::Bidir, Transport::Tcp),
        ports: &[1, 2, 1, 2],
        cumulative: &[&[1, 2, 3, 4], &[10, 20, 30, 40]],
        end_s: 1.0,
        udp: None,
    });
    // Two: in each interval too, all four streams summed.
    let st = style(false, Some(0.5));
    let sums: Vec<String> = interval(&two, 0, 1, &st)
        .lines()
        .filter(|l| l.starts_with("[SUM]"))
        .map(String::from)
        .collect();
    assert_eq!(sums, ["[SUM] 0.0000-0.5000 sec  10.0 Bytes   160 bits/sec"]);
}

#[test]
fn a_bounceback_is_one_connection_counting_requests_and_answers_as_iperf2_does() {
    // iperf 2.1.8's server (`iperf -s [-e] [-i 0.5] [-y C]`) against `iperf -c 127.0.0.1
    // --bounceback -t 1 [-S 0x10 --bounceback-no-quickack --bounceback-hold 2 -l 200]`: 10 requests
    // of 100 bytes read and 10 answers written, 2000 bytes on its lines.
    let mut r = build(&Built {
        spec: TestSpec {
            interval_s: std::time::Duration::from_millis(500),
            ..spec(1, Direction::Bidir, Transport::Tcp)
        },
        ports: &[46670, 46670],
        cumulative: &[&[1000, 1000], &[1000, 1000]],
        end_s: 1.0004,
        udp: None,
    });
    r.streams[0].connection = Some(made("127.0.0.1:5301", false));
    r.config.bounceback = Some(landspeed_core::transactions::BounceAsked {
        request_bytes: 100,
        hold_us: 0,
        quickack: true,
    });
    let st = style(false, Some(0.5));
    assert_eq!(
        connected(&r, 1, &st),
        format!("[  1] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 46670 (bb w/quickack len/hold=100/0) (icwnd/mss/irtt=320/32768/27)\n{PLAIN_HEAD}")
    );
    assert_eq!(numbers_used(&r), 1);
    assert_eq!(
        interval(&r, 0, 1, &st),
        "[  1] 0.0000-0.5000 sec  1.95 KBytes  32.0 Kbits/sec\n"
    );
    assert_eq!(
        interval(&r, 1, 1, &st),
        "[  1] 0.5000-1.0004 sec  0.000 Bytes  0.000 bits/sec\n"
    );
    assert_eq!(
        totals(&r, 1, &st),
        "[  1] 0.0000-1.0004 sec  1.95 KBytes  16.0 Kbits/sec\n"
    );
    let csv = totals(&r, 1, &style(true, None));
    assert!(
        csv.ends_with(",127.0.0.1,46670,127.0.0.1,5301,1,0.0-1.0,2000,15994\n"),
        "{csv}"
    );
    // What else the header asked, and -e: no quick acks, a hold, TOS both ways, trip times (which
    // do not turn -e's lines on, as they do for a bulk client's).
    r.config.bounceback = Some(landspeed_core::transactions::BounceAsked {
        request_bytes: 200,
        hold_us: 2000,
        quickack: false,
    });
    r.config.spec.tos = Some(0x10);
    r.config.spec.trip_times = true;
    let plain = connected(&r, 1, &style(false, None));
    assert_eq!(
        plain,
        format!("[  1] local 127.0.0.1 port 5301 connected with 127.0.0.1 port 46670 (bb len/hold=200/2000) (trip-times) (tos rx/tx=0x10/0x10) (icwnd/mss/irtt=320/32768/27)\n{PLAIN_HEAD}")
    );
    let e = Iperf2Style {
        enhanced: true,
        ..style(false, None)
    };
    let line = connected(&r, 1, &e);
    assert_eq!(
        masked(line.lines().next().unwrap_or_default()),
        masked("[  1] local 127.0.0.1%lo port 5301 connected with 127.0.0.1 port 46670 (bb len/hold=200/2000) (trip-times) (sock=4) (tos rx/tx=0x10/0x10) (icwnd/mss/irtt=320/32768/27) on 2026-12-07 05:18:37 (UTC)")
    );
    assert!(line.ends_with(PLAIN_HEAD), "{line}");
}
