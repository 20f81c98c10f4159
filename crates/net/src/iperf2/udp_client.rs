//! `landspeed run --iperf2 -u`: a UDP test against an iperf 2.1.x server (`iperf -s -u`, or
//! `landspeed serve`) in iperf 2's protocol. Each stream is a socket of its own whose every datagram
//! carries iperf 2's prefix and the client's header (`ClientHeader::for_udp_sender`, `threads` the
//! stream count), paced by the engine at each stream's share of `-b`. When a stream has sent, it
//! sends its end (the next number, negated) until the server answers with its report, at most ten
//! times a quarter second apart, as iperf 2.1.8's client does (the first end counts as a datagram
//! of the test, as iperf 2 counts it); the report's figures (bytes, lost, out of order, jitter)
//! become the server's side of the result. A stream whose report never comes
//! says so in the result's warnings.

use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions};
use crate::streams::DataPaths;
use landspeed_core::config::{Direction, Flow, Test, TestSpec};
use landspeed_core::endpoint::{EndpointReport, Role, StreamReport};
use landspeed_core::result::RunResult;
use landspeed_engine::transport::udp::{
    iperf2_prefix, UdpFormat, UdpStream, IPERF2_HEADER_BYTES, IPERF2_SMALL_BELOW, IPERF2_SMALL_FLAGS,
};
use landspeed_iperf2::{Amount, ClientHeader, ServerReport};
use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

/// Ends sent at most, and the wait for the report after each (iperf 2.1.8's).
const ENDS: u32 = 10;
const REPORT_WAIT: Duration = Duration::from_millis(250);

/// Runs one UDP test against an iperf 2 server; `spec` is already without verification.
pub(crate) fn run_udp(
    opts: &ClientOptions,
    spec: &Test,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let header = udp_header(spec, opts.port, (opts.trip_times, opts.no_udp_fin))?;
    // A scheduled start: the clock starts then, or now if it has passed.
    let started_unix_s = (unix_ns() as f64 / 1e9).max(opts.start_at_unix_s.unwrap_or(0.0));
    let sent = send_test(opts, spec, header, interrupt, on_event)?;
    let ends = super::client::Ends::at_end(sent.addresses, started_unix_s, interrupt);
    Ok(super::client::assembled(
        opts,
        spec,
        &ends,
        (&sent.here, &sent.server),
        &sent.samples,
    ))
}

/// A UDP test's streams sent: this end's report, the server's from its reports, the samples, and
/// both ends' addresses.
pub(super) struct Sent {
    pub(super) here: EndpointReport,
    pub(super) server: EndpointReport,
    pub(super) samples: Vec<landspeed_core::endpoint::IntervalSample>,
    pub(super) addresses: (std::net::SocketAddr, std::net::SocketAddr),
}

/// Sends `spec`'s streams with `header` in every datagram, then each stream's end until the
/// server's report comes back.
pub(super) fn send_test(
    opts: &ClientOptions,
    spec: &Test,
    header: [u8; IPERF2_HEADER_BYTES],
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<Sent, ClientError> {
    let addr = resolve(opts)?;
    let streams = open(opts, addr, spec)?;
    let locals = locals(streams.iter().map(|s| &s.socket))?;
    let local = locals[0];
    let mut warnings = super::client::started_udp(on_event, (&locals, super::client::udp_facts(streams.iter().map(|s| &s.socket))), (addr, spec.total_streams()), Some("the server's side is iperf 2's report: its loss, out of order and jitter as iperf 2 counts them (docs/iperf2.md)"));
    if let Some(at) = opts.start_at_unix_s {
        announce_start(
            streams.iter().map(|s| &s.socket),
            (spec, opts.port, opts.trip_times),
            at,
        )?;
        super::client::wait_until(at, interrupt);
    }
    let data = DataPaths::Udp(streams);
    // --trip-times: the start time in each datagram (the clock's zero, as iperf 2's client's).
    let start = opts.trip_times.then(|| {
        let at = opts.start_at_unix_s.map_or(unix_ns(), |s| (s * 1e9) as u64);
        ((at / 1_000_000_000) as u32, (at % 1_000_000_000 / 1000) as u32)
    });
    // --trip-times in datagrams too short for the header: iperf 2's small form, as 2.1.8 sends it
    // (not with -r/-d, whose header must say the test back; 2.1.8 refuses the form with them).
    let small =
        opts.trip_times && opts.connect_back.is_none() && (spec.length_bytes as usize) < IPERF2_SMALL_BELOW;
    let small_word = IPERF2_SMALL_FLAGS.to_be_bytes();
    let format = match small {
        true => UdpFormat::Iperf2Small,
        false => UdpFormat::Iperf2 { header, start },
    };
    let header: &[u8] = match small {
        true => &small_word,
        false => &header,
    };
    let out = crate::dial::measure_quietly_as(opts, spec, (&data, format), local, interrupt, on_event);
    let DataPaths::Udp(streams) = &data else {
        unreachable!("built as UDP above")
    };
    let here_streams = out.report(opts.cpus.clone(), vec![]).streams;
    // The end's number follows every number used, those of sends the kernel refused too.
    let used: Vec<u64> = here_streams.iter().map(|r| r.calls + r.send_errors).collect();
    let socks = streams.iter().map(|s| &s.socket);
    let reports: Vec<Option<ServerReport>> = match opts.no_udp_fin {
        // --no-udp-fin: one end each, as iperf 2.1.8's client sends it, and no report awaited.
        true => {
            socks
                .zip(&used)
                .for_each(|(s, &n)| end_once(s, header, spec.length_bytes as usize, n));
            vec![None; used.len()]
        }
        false => end_all(socks, (header, spec.length_bytes as usize), &used)
            .into_iter()
            .map(|r| r.map(|(r, _)| r))
            .collect(),
    };
    if opts.no_udp_fin {
        warnings.push("--no-udp-fin: the server was asked for no report; its side is unknown".into());
    }
    for (id, r) in reports.iter().enumerate().filter(|_| !opts.no_udp_fin) {
        if r.is_none() {
            warnings.push(format!(
                "stream {id}: no report from the server after {ENDS} ends"
            ));
        }
    }
    let mut here = out.report(opts.cpus.clone(), warnings);
    let server = ended(&mut here, spec, &reports);
    Ok(Sent {
        here,
        server,
        samples: out.samples,
        addresses: (local, addr),
    })
}

/// A scheduled start (`--txstart-time`), as iperf 2.1.8's UDP client announces it: before the
/// wait, one datagram a stream numbered 0 (no datagram of the test: iperf 2's first payload) whose
/// header has the `EPOCH_START` flag and the start at byte 112; the server then waits for it and
/// starts its clock there.
fn announce_start<'a>(
    socks: impl Iterator<Item = &'a UdpSocket>,
    (spec, port, trip_times): (&TestSpec, u16, bool),
    at_unix_s: f64,
) -> Result<(), ClientError> {
    let mut h = timed(client_header(spec, port)?, trip_times);
    if let Some(e) = h.extension.as_mut() {
        e.upper |= landspeed_iperf2::header::upper::EPOCH_START;
    }
    let header = h.encode();
    let prefix = landspeed_iperf2::udp::PREFIX_BYTES;
    let len = (spec.length_bytes as usize).max(landspeed_iperf2::isoch::START_AT + 8);
    let mut d = vec![0u8; len];
    iperf2_prefix(0, unix_ns(), &mut d[..prefix]);
    let upto = (prefix + IPERF2_HEADER_BYTES).min(prefix + header.len());
    d[prefix..upto].copy_from_slice(&header[..upto - prefix]);
    let at = landspeed_iperf2::ack::WireTime::from_unix_ns((at_unix_s * 1e9) as u64);
    landspeed_iperf2::isoch::write_start(&mut d, (at.secs, at.micros));
    for (id, s) in socks.enumerate() {
        s.send(&d)
            .map_err(|err| ClientError::Stream { id: id as u32, err })?;
    }
    Ok(())
}

/// Each socket's own address, in order (at least one: a test has a stream).
pub(super) fn locals<'a>(
    socks: impl Iterator<Item = &'a UdpSocket>,
) -> Result<Vec<std::net::SocketAddr>, ClientError> {
    let v = socks
        .enumerate()
        .map(|(id, s)| {
            s.local_addr()
                .map_err(|err| ClientError::Stream { id: id as u32, err })
        })
        .collect::<Result<Vec<_>, _>>()?;
    match v.is_empty() {
        true => Err(ClientError::Stream {
            id: 0,
            err: std::io::Error::other("no stream to run"),
        }),
        false => Ok(v),
    }
}

/// Now on this host's clock, nanoseconds since the Unix epoch (iperf 2's prefixes carry it).
pub(super) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The shortest datagram of iperf 2's small trip-times form built here: its prefix and flags word.
const SMALL_MIN: u64 = 20;

/// The header every datagram of every stream carries (none in iperf 2's small trip-times form,
/// which carries a flags word alone: `send_test` writes it).
pub(super) fn udp_header(
    spec: &TestSpec,
    port: u16,
    (trip_times, no_fin): (bool, bool),
) -> Result<[u8; IPERF2_HEADER_BYTES], ClientError> {
    if spec.direction != Direction::Forward {
        return Err(ClientError::NotWithIperf2 {
            what: "UDP with --bidir from landspeed's client yet (iperf 2's --full-duplex)".into(),
        });
    }
    // Under 128 bytes a --trip-times client sends iperf 2's small form (`send_test`): the prefix
    // and a flags word, 20 bytes at least (2.1.8 sends a first one of 18 then -l's: not built).
    let small = trip_times && (spec.length_bytes as usize) < IPERF2_SMALL_BELOW;
    if small && spec.length_bytes < SMALL_MIN {
        return Err(ClientError::NotWithIperf2 {
            what: format!(
                "{}-byte datagrams with --trip-times: iperf 2's small form carries its 16-byte prefix and a 4-byte flags word (-l {SMALL_MIN} or more)",
                spec.length_bytes
            ),
        });
    }
    if small {
        return Ok([0; IPERF2_HEADER_BYTES]);
    }
    let mut h = timed(client_header(spec, port)?, trip_times);
    if no_fin {
        h = h.without_fin();
    }
    let bytes = h.encode();
    let mut out = [0u8; IPERF2_HEADER_BYTES];
    out.copy_from_slice(&bytes[..IPERF2_HEADER_BYTES]);
    Ok(out)
}

/// `h` asking for trip times (`--trip-times`: the clocks are synchronized, so the server reads each
/// datagram's one-way latency from its send time and reports it).
fn timed(h: ClientHeader, trip_times: bool) -> ClientHeader {
    match trip_times {
        true => h.with_trip_times(),
        false => h,
    }
}

/// iperf 2.1.8's UDP client header for `spec` (its datagrams' length, its time or bytes, its rate)
/// to `port`.
pub(super) fn client_header(spec: &TestSpec, port: u16) -> Result<ClientHeader, ClientError> {
    let not = |what: &str| ClientError::NotWithIperf2 { what: what.into() };
    let min = (landspeed_iperf2::udp::PREFIX_BYTES + IPERF2_HEADER_BYTES) as u64;
    if spec.length_bytes < min {
        return Err(not(&format!(
            "{}-byte datagrams: every datagram here is -l long and the first must hold iperf 2's {min}-byte prefix and header (-l {min} or more; iperf 2.1.8 sends its first longer)",
            spec.length_bytes
        )));
    }
    let amount = match spec.end {
        landspeed_core::config::EndCondition::Time(t) => Amount::Centiseconds(
            u32::try_from((t + spec.omit_s).as_millis().div_ceil(10)).unwrap_or(u32::MAX),
        ),
        landspeed_core::config::EndCondition::Bytes(b) => {
            let each = b.div_ceil(u64::from(spec.streams)).min((1 << 31) - 1);
            Amount::Bytes(each as u32)
        }
        landspeed_core::config::EndCondition::Blocks(_) => {
            return Err(not("a block count (-k); give -n or -t"))
        }
    };
    let length = u32::try_from(spec.length_bytes).map_err(|_| not("so long a datagram"))?;
    let mut h = ClientHeader::for_udp_sender(port, length, spec.udp_stream_rate_bps() as u64, amount);
    h.threads = spec.streams;
    // The type of service asked (`-S`), which iperf 2's server shows (`(tos rx=0x10)`).
    if let Some(e) = h.extension.as_mut() {
        e.tos = spec.tos.map_or(0, u16::from);
    }
    Ok(h)
}

/// Each stream's socket, connected to the server.
pub(super) fn open(
    opts: &ClientOptions,
    addr: std::net::SocketAddr,
    spec: &Test,
) -> Result<Vec<UdpStream>, ClientError> {
    (0..spec.streams)
        .map(|id| {
            let sock = crate::dial::udp_socket(opts, addr, spec, id)
                .map_err(|err| ClientError::Stream { id, err })?;
            Ok(UdpStream::of_test(spec, id, Role::at_client, sock))
        })
        .collect()
}

/// Sends a stream's end (after its `sent` datagrams) until the server's report comes back.
pub(super) fn end(sock: &UdpSocket, header: &[u8], length: usize, sent: u64) -> Option<ServerReport> {
    end_with_frames(sock, header, length, sent).map(|(r, _)| r)
}

/// Each stream's end ([`end_with_frames`]; `used`: the numbers each used) at once, a thread each, as
/// iperf 2's client ends each stream on its own thread: one stream's wait for its report holds no
/// other's end back (iperf 2.1.8's server, taking `-r -P 2`'s ends one after the other, was seen to
/// stall its streams back for ever).
pub(super) fn end_all<'a>(
    socks: impl Iterator<Item = &'a UdpSocket>,
    (header, length): (&[u8], usize),
    used: &[u64],
) -> Vec<Option<(ServerReport, Option<landspeed_core::frames::FramesReport>)>> {
    std::thread::scope(|sc| {
        let ending: Vec<_> = socks
            .zip(used)
            .map(|(sock, &n)| sc.spawn(move || end_with_frames(sock, header, length, n)))
            .collect();
        ending.into_iter().map(|h| h.join().ok().flatten()).collect()
    })
}

/// One end of a stream (the datagram numbered after the `sent` ones, negated), nothing awaited.
fn end_once(sock: &UdpSocket, header: &[u8], length: usize, sent: u64) {
    let mut fin = vec![0u8; length];
    let prefix = landspeed_iperf2::udp::PREFIX_BYTES;
    fin[prefix..prefix + header.len()].copy_from_slice(header);
    iperf2_prefix(-(sent as i64 + 1), unix_ns(), &mut fin);
    let _ = sock.send(&fin);
}

/// [`end`], with the receiver's frame counts when the server is landspeed's and the test one of
/// frames (`landspeed_iperf2::isoch::parse_trailer`).
pub(super) fn end_with_frames(
    sock: &UdpSocket,
    header: &[u8],
    length: usize,
    sent: u64,
) -> Option<(ServerReport, Option<landspeed_core::frames::FramesReport>)> {
    let mut fin = vec![0u8; length];
    let prefix = landspeed_iperf2::udp::PREFIX_BYTES;
    fin[prefix..prefix + header.len()].copy_from_slice(header);
    let _ = sock.set_read_timeout(Some(REPORT_WAIT));
    let mut buf = vec![0u8; 65_536];
    for _ in 0..ENDS {
        iperf2_prefix(-(sent as i64 + 1), unix_ns(), &mut fin);
        let _ = sock.send(&fin);
        // Anything but a report (a late datagram, an ICMP error) is read past.
        let deadline = std::time::Instant::now() + REPORT_WAIT;
        while std::time::Instant::now() < deadline {
            match sock.recv(&mut buf) {
                Ok(n) => {
                    if let Some(r) = ServerReport::parse(&buf[..n]) {
                        let frames = landspeed_iperf2::isoch::parse_trailer(
                            &buf[..n],
                            landspeed_iperf2::report::REPORT_BYTES,
                        );
                        return Some((r, frames));
                    }
                }
                Err(_) => break,
            }
        }
    }
    None
}

/// Counts each stream's first end as a datagram of the test, as iperf 2 counts it (its server counts
/// its bytes), and returns the server's side from the reports.
pub(super) fn ended(
    here: &mut EndpointReport,
    spec: &TestSpec,
    reports: &[Option<ServerReport>],
) -> EndpointReport {
    for s in &mut here.streams {
        s.bytes += spec.length_bytes;
        s.calls += 1;
    }
    server_side(here, reports)
}

/// The server's side: each stream received as its report says (or, without one, nothing known).
fn server_side(here: &EndpointReport, reports: &[Option<ServerReport>]) -> EndpointReport {
    let streams = here
        .streams
        .iter()
        .zip(reports)
        .map(|(s, r)| match r {
            Some(r) => received(s.id, Flow::ClientToServer, r),
            None => StreamReport::empty(s.id, Flow::ClientToServer, Role::Receiver),
        })
        .collect();
    EndpointReport {
        software: "iperf 2 server".into(),
        streams,
        elapsed_s: here.elapsed_s,
        ..EndpointReport::default()
    }
}

/// The one-way transit a receiver's report carries when it says so (its extended flag: a server
/// with `-e`, or a `--trip-times` client's): iperf 2.1.8's client prints it, its packets a second
/// and count both the report's rate count (over a span it sends as 1 s).
fn report_transit(r: &ServerReport) -> Option<landspeed_core::udp::TransitSummary> {
    const EXTENDED: u32 = 0x4000_0000;
    let t = &r.transit;
    if r.flags & EXTENDED == 0 || t.count == 0 {
        return None;
    }
    let stddev_us = match t.count {
        0 | 1 => 0.0,
        n => (t.m2_us2 / f64::from(n - 1)).sqrt(),
    };
    Some(landspeed_core::udp::TransitSummary {
        datagrams: u64::from(r.rate_count),
        mean_ms: t.sum.as_secs_f64() * 1e3 / f64::from(t.count),
        min_ms: t.min.as_secs_f64() * 1e3,
        max_ms: t.max.as_secs_f64() * 1e3,
        stddev_ms: stddev_us / 1e3,
        per_s: f64::from(r.rate_count) / f64::from(r.rate_span_s.max(1)),
    })
}

/// A stream of `flow` as the receiver's report (`r`) tells it.
pub(super) fn received(id: u32, flow: Flow, r: &ServerReport) -> StreamReport {
    let total = r.datagrams;
    let udp = landspeed_core::udp::UdpStats {
        datagrams_sent: Some(total),
        datagrams_received: total.saturating_sub(r.lost),
        datagrams_lost: r.lost,
        loss_pct: if total > 0 {
            r.lost as f64 * 100.0 / total as f64
        } else {
            0.0
        },
        out_of_order: r.out_of_order,
        duplicates: 0,
        jitter_ms: r.jitter.as_secs_f64() * 1000.0,
        socket_drops: None,
        lost_in_receiver: None,
        lost_in_sender: None,
        ce_marked: None,
        transit: report_transit(r),
    };
    StreamReport {
        bytes: r.bytes,
        first_byte_s: Some(0.0),
        last_byte_s: Some(r.duration.as_secs_f64()),
        udp: Some(udp),
        ..StreamReport::empty(id, flow, Role::Receiver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_iperf2::report::Transit;

    fn report(flags: u32, count: u32) -> ServerReport {
        ServerReport {
            flags,
            bytes: 134_000,
            duration: Duration::from_millis(1021),
            lost: 0,
            out_of_order: 0,
            datagrams: 93,
            jitter: Duration::from_micros(6),
            transit: Transit {
                min: Duration::from_micros(3),
                max: Duration::from_micros(1005),
                sum: Duration::from_micros(38 * 93),
                mean: Duration::from_micros(38),
                m2_us2: 102.0 * 102.0 * 92.0,
                last_change_us: 0,
                count,
            },
            rate_count: 91,
            rate_span_s: 1,
        }
    }

    #[test]
    fn an_extended_report_carries_the_servers_transit_as_2_1_8s_client_reads_it() {
        // iperf 2.1.8's server with --trip-times: "0.038/0.003/1.005/0.102 ms 91 pps 91/0(0)".
        let t = report_transit(&report(0x4000_0000 | 0x8000_0000, 93)).expect("extended");
        assert_eq!((t.datagrams, t.per_s), (91, 91.0));
        assert!(
            (t.mean_ms - 0.038).abs() < 1e-9 && (t.max_ms - 1.005).abs() < 1e-9,
            "{t:?}"
        );
        assert!((t.stddev_ms - 0.102).abs() < 1e-9, "{t:?}");
        // A plain report's transit (2.1.8 fills it in anyway) is not shown; nor one with none timed.
        assert!(report_transit(&report(0x8000_0000, 93)).is_none());
        assert!(report_transit(&report(0x4000_0000, 0)).is_none());
    }
}
