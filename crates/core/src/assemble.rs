//! Builds a `RunResult` from the two ends' reports and interval samples. This is the only place where
//! rates, durations, CPU percentages and warm-up exclusions are derived, so every figure in every output
//! has one definition (docs/metrics.md) and one set of tests.

use crate::config::{Flow, TestSpec};
use crate::endpoint::{EndpointReport, IntervalSample, Role, StreamReport};
use crate::result::*;
use crate::stats::{deltas, peak_and_lowest};

/// What the client driver knows about the run besides the two reports.
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    /// The server, as the client named it.
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// The client's address.
    pub local_address: String,
    /// The server's address.
    pub remote_address: String,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// The client's worker threads.
    pub threads: u32,
    /// The CPUs the client's workers were pinned to.
    pub cpus: Option<Vec<usize>>,
    /// The local address the client bound to.
    pub bind: Option<String>,
    /// When the client sent `start`, Unix seconds.
    pub started_unix_s: f64,
    /// Ctrl-C stopped the test early.
    pub interrupted: bool,
    /// `landspeed`, `iperf3`, `quic-perf` or `ndt7`.
    pub protocol: String,
    /// When the client scheduled the data to start (iperf 2's `--txstart-time`), Unix seconds.
    pub scheduled_start_unix_s: Option<f64>,
    /// The peer is not landspeed (an iperf3 server or client, a QUIC perf or ndt7 server that
    /// answered no payload key): it neither sends nor checks landspeed's pattern, which is why
    /// nothing was verified.
    pub foreign_peer: bool,
    /// The result is a server's record of a test it served (an iperf3 or ndt7 client's): the
    /// peer is the client, and what this server sent was landspeed's pattern.
    pub served_here: bool,
}

impl RunContext {
    /// A landspeed-protocol test against `host` port 5201 from 192.0.2.1 to 192.0.2.2 (documentation
    /// addresses, RFC 5737), one thread, started at `started_unix_s`: for examples and tests.
    pub fn example(host: &str, started_unix_s: f64) -> RunContext {
        RunContext {
            host: host.into(),
            port: 5201,
            local_address: "192.0.2.1:40000".into(),
            remote_address: "192.0.2.2:5201".into(),
            family: "ipv4".into(),
            threads: 1,
            cpus: None,
            bind: None,
            started_unix_s,
            interrupted: false,
            protocol: "landspeed".into(),
            scheduled_start_unix_s: None,
            foreign_peer: false,
            served_here: false,
        }
    }
}

/// The inputs: the client's (local) and the server's (remote) reports and samples.
pub struct Inputs<'a> {
    /// The test both ends ran.
    pub spec: &'a TestSpec,
    /// What the client driver knows besides the reports.
    pub context: RunContext,
    /// The client's report.
    pub client: &'a EndpointReport,
    /// The server's report.
    pub server: &'a EndpointReport,
    /// The client's interval samples.
    pub client_samples: &'a [IntervalSample],
    /// The server's interval samples (empty when the server sends none, as iperf3's).
    pub server_samples: &'a [IntervalSample],
}

impl Inputs<'_> {
    /// Every stream, on either end, that this end `role` played.
    fn streams_with(&self, role: Role) -> impl Iterator<Item = &StreamReport> {
        self.client
            .streams
            .iter()
            .chain(&self.server.streams)
            .filter(move |s| s.role == role)
    }
}

fn stream(report: &EndpointReport, id: u32) -> Option<&StreamReport> {
    report.streams.iter().find(|s| s.id == id)
}

fn rate(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// Receiver's measured span of a set of streams: from the first byte (or the warm-up's end, whichever
/// is later) to the last byte.
fn receiver_span<'a>(streams: impl Iterator<Item = &'a StreamReport>, omit_s: f64) -> f64 {
    let mut first = f64::INFINITY;
    let mut last = f64::NEG_INFINITY;
    for s in streams {
        if let (Some(f), Some(l)) = (s.first_byte_s, s.last_byte_s) {
            first = first.min(f);
            last = last.max(l);
        }
    }
    if !first.is_finite() {
        return 0.0;
    }
    (last - first.max(omit_s)).max(0.0)
}

fn sender_span<'a>(streams: impl Iterator<Item = &'a StreamReport>) -> f64 {
    receiver_span(streams, 0.0)
}

struct FlowParts<'a> {
    sender: &'a EndpointReport,
    receiver: &'a EndpointReport,
    sender_samples: &'a [IntervalSample],
    receiver_samples: &'a [IntervalSample],
}

fn parts<'a>(inp: &'a Inputs<'a>, flow: Flow) -> FlowParts<'a> {
    match flow {
        Flow::ClientToServer => FlowParts {
            sender: inp.client,
            receiver: inp.server,
            sender_samples: inp.client_samples,
            receiver_samples: inp.server_samples,
        },
        Flow::ServerToClient => FlowParts {
            sender: inp.server,
            receiver: inp.client,
            sender_samples: inp.server_samples,
            receiver_samples: inp.client_samples,
        },
    }
}

/// An interval's RTT as the sender's smoothed RTT at its end, unless the connection had no RTT sample
/// yet (0) or the figure lies below the smallest RTT the kernel saw over the whole connection: a smoothed
/// RTT cannot, so such a reading is not shown rather than shown below the path's floor.
fn interval_rtt(rtt_us: u32, sender: Option<&StreamReport>) -> Option<u32> {
    let floor = sender.and_then(|s| s.tcp.as_ref()).map_or(0, |t| t.rtt_min_us);
    (rtt_us > 0 && rtt_us >= floor).then_some(rtt_us)
}

fn flow_intervals(p: &FlowParts, ids: &[u32]) -> Vec<IntervalResult> {
    // The receiver's view, or the sender's when the far end sends no samples (iperf3's protocol
    // carries none): then an interval's bytes are those written, as iperf3's own client shows them.
    let samples = if p.receiver_samples.is_empty() {
        p.sender_samples
    } else {
        p.receiver_samples
    };
    let rx: Vec<IntervalSample> = samples
        .iter()
        .map(|s| IntervalSample {
            streams: s
                .streams
                .iter()
                .filter(|st| ids.contains(&st.id))
                .cloned()
                .collect(),
            ..s.clone()
        })
        .collect();
    let d = deltas(&rx);
    rx.iter()
        .zip(d)
        .map(|(sample, deltas)| {
            let secs = sample.end_s - sample.start_s;
            let tx = p.sender_samples.iter().find(|t| t.index == sample.index);
            let streams: Vec<IntervalStream> = deltas
                .iter()
                .map(|dl| {
                    let snap = tx
                        .and_then(|t| t.streams.iter().find(|s| s.id == dl.id))
                        .and_then(|s| s.tcp);
                    let here = sample.streams.iter().find(|s| s.id == dl.id);
                    let udp = here.and_then(|s| s.udp.as_ref());
                    IntervalStream {
                        id: dl.id,
                        bytes: dl.bytes,
                        throughput_bps: rate(dl.bytes, secs),
                        rtt_us: snap.and_then(|t| interval_rtt(t.rtt_us, stream(p.sender, dl.id))),
                        cwnd_bytes: snap.map(|t| t.cwnd_bytes),
                        retransmits: snap.map(|t| t.retransmits),
                        datagrams_sent: dl.datagrams.map(|d| d.0),
                        datagrams_lost: dl.datagrams.map(|d| d.1),
                        frames: None,
                        jitter_ms: udp.and_then(|u| u.jitter_ms),
                        transit: udp.and_then(|u| u.transit).or(here.and_then(|s| s.trips)),
                        reads: dl.reads,
                        transit_bins: here.and_then(|s| s.trip_bins.clone()),
                        frames_heard: udp.and_then(|u| u.frames.clone()),
                    }
                })
                .collect();
            let bytes = streams.iter().map(|s| s.bytes).sum();
            IntervalResult {
                index: sample.index,
                start_s: sample.start_s,
                end_s: sample.end_s,
                bytes,
                throughput_bps: rate(bytes, secs),
                omitted: sample.omitted,
                streams,
                probe_rtt: None,
            }
        })
        .collect()
}

/// A warning when the window, not the path, set the rate: the senders spent most of the test limited
/// by the receive window or their send buffer (TCP_INFO), and the window over the path's minimum
/// RTT allows about the rate measured, no more (`limit::WINDOW_EXPLAINS_RATE`): a window that would allow
/// more did not hold the rate back, whatever the limited times say. Names the bound and what to
/// change. With a window set for the test (`set_window`), the kernel's autotuning was off: the
/// warning says so.
fn window_limited(streams: &[StreamResult], set_window: Option<u64>) -> Option<String> {
    let tcp: Vec<(&LimitedShares, &crate::endpoint::TcpStats)> = streams
        .iter()
        .filter_map(|s| Some((s.limited.as_ref()?, s.tcp.as_ref()?)))
        .collect();
    if tcp.is_empty() {
        return None;
    }
    let n = tcp.len() as f64;
    let rwnd = tcp.iter().map(|t| t.0.rwnd_limited_pct).sum::<f64>() / n;
    let sndbuf = tcp.iter().map(|t| t.0.sndbuf_limited_pct).sum::<f64>() / n;
    if rwnd + sndbuf < 50.0 {
        return None;
    }
    // The path's own RTT (the minimum: the mean includes the queue the senders themselves built).
    let rtt_us = |t: &crate::endpoint::TcpStats| {
        if t.rtt_min_us > 0 {
            t.rtt_min_us
        } else {
            t.rtt_avg_us
        }
    };
    let rtt_s = tcp.iter().map(|t| f64::from(rtt_us(t.1))).sum::<f64>() / n / 1e6;
    let window = tcp.iter().map(|t| t.1.snd_wnd_bytes as f64).sum::<f64>() / n;
    if rtt_s <= 0.0 || window <= 0.0 {
        return None;
    }
    let bound = n * window * 8.0 / rtt_s;
    let measured: f64 = streams.iter().map(|s| s.throughput_bps).sum();
    if !(measured > 0.0 && bound <= crate::limit::WINDOW_EXPLAINS_RATE * measured) {
        return None;
    }
    let set = set_window.map_or(String::new(), |w| {
        format!(
            "; the window was set to {} for this test, which turns the kernel's receive-buffer autotuning off: with no window set the kernel may grow it up to its limit (net.ipv4.tcp_rmem's maximum)",
            crate::units::Bytes(w)
        )
    });
    Some(format!(
        "the window limited this test: the senders were receive-window limited {rwnd:.0}% and send-buffer limited {sndbuf:.0}% of the time; {} stream(s) × {} of window over the path's minimum RTT of {:.1} ms allow at most {}, about the rate measured — below the bandwidth-delay product of a faster path (a larger window, or host buffers tuned for the path's rate, an RTT of {:.0} ms and {} stream(s)){set}",
        tcp.len(),
        crate::units::Bytes(window as u64),
        rtt_s * 1e3,
        crate::units::BitRate(bound),
        (rtt_s * 1e3).ceil(),
        tcp.len()
    ))
}

/// TCP's limited/busy times as shares of the sending end's test time, capped at 100%.
fn limited_shares(tcp: &crate::endpoint::TcpStats, sender_elapsed_s: f64) -> Option<LimitedShares> {
    if sender_elapsed_s <= 0.0 {
        return None;
    }
    let pct = |us: u64| (us as f64 / 1e6 / sender_elapsed_s * 100.0).min(100.0);
    Some(LimitedShares {
        rwnd_limited_pct: pct(tcp.rwnd_limited_us),
        sndbuf_limited_pct: pct(tcp.sndbuf_limited_us),
        busy_pct: pct(tcp.busy_time_us),
    })
}

fn stream_result(
    spec: &TestSpec,
    flow: Flow,
    id: u32,
    tx: Option<&StreamReport>,
    rx: Option<&StreamReport>,
    sender_elapsed: f64,
) -> StreamResult {
    let omit = spec.omit_s.as_secs_f64();
    let omitted = rx.map_or(0, |r| r.omitted_bytes);
    let sent = tx.map_or(0, |t| t.bytes).saturating_sub(omitted);
    let received = rx.map_or(0, |r| r.bytes).saturating_sub(omitted);
    let duration = rx.map_or(0.0, |r| receiver_span(std::iter::once(r), omit));
    let len = spec.length_bytes as f64;
    let errors = [tx, rx]
        .iter()
        .flatten()
        .filter_map(|s| s.error.clone())
        .collect();
    StreamResult {
        id,
        flow,
        bytes_sent: sent,
        bytes_received: received,
        // A bulk sender checks nothing (0); a request/response client checks the responses.
        bytes_verified: if spec.verify {
            (rx.map_or(0, |r| r.bytes_verified) + tx.map_or(0, |t| t.bytes_verified)).saturating_sub(omitted)
        } else {
            0
        },
        omitted_bytes: omitted,
        duration_s: duration,
        throughput_bps: rate(received, duration),
        kbytes_per_s: if duration > 0.0 {
            received as f64 / 1000.0 / duration
        } else {
            0.0
        },
        buffers: received as f64 / len,
        buffers_per_s: if duration > 0.0 {
            received as f64 / len / duration
        } else {
            0.0
        },
        sender_elapsed_s: tx.map_or(0.0, |t| sender_span(std::iter::once(t))),
        tcp: tx.and_then(|t| t.tcp.clone()),
        receiver_tcp: rx.and_then(|r| r.tcp.clone()),
        limited: tx
            .and_then(|t| t.tcp.as_ref())
            .and_then(|t| limited_shares(t, sender_elapsed)),
        errors,
        udp: rx.and_then(|r| r.udp).map(|u| udp_against_sender(u, tx)),
        send_errors: tx.map_or(0, |t| t.send_errors),
        tls: tx.and_then(|t| t.tls).or_else(|| rx.and_then(|r| r.tls)),
        quic: tx
            .and_then(|t| t.quic.clone())
            .or_else(|| rx.and_then(|r| r.quic.clone())),
        client_port: client_port(flow, tx, rx),
        connection: None,
    }
}

/// The client's port of a stream's connection: the client's own report, or the server's view of its
/// peer (an iperf3 client reports no ports).
fn client_port(flow: Flow, tx: Option<&StreamReport>, rx: Option<&StreamReport>) -> Option<u16> {
    let (client, server) = match flow {
        Flow::ClientToServer => (tx, rx),
        Flow::ServerToClient => (rx, tx),
    };
    (client.and_then(|c| c.local_port)).or_else(|| server.and_then(|s| s.peer_port))
}

/// The receiver's UDP figures with loss recounted against the sender's report of what it sent (which
/// arrives in the results exchange even when every end-of-stream marker was lost).
fn udp_against_sender(mut u: crate::udp::UdpStats, tx: Option<&StreamReport>) -> crate::udp::UdpStats {
    if let Some(sent) = tx.map(|t| t.calls) {
        u.datagrams_sent = Some(sent);
        u.datagrams_lost = sent.saturating_sub(u.datagrams_received);
        u.lost_in_receiver = u.lost_in_receiver.map(|h| h.min(u.datagrams_lost));
        u.loss_pct = if sent > 0 {
            u.datagrams_lost as f64 * 100.0 / sent as f64
        } else {
            0.0
        };
    }
    u
}

/// The datagrams the sending host dropped after they were sent: its UDP send-buffer errors (both
/// families; a full qdisc or device counts there when the sender asked for no error reports) beyond
/// the send errors landspeed itself saw, plus its interface's transmit drops. Capped by the loss the
/// receiver's socket does not explain.
fn lost_in_sender(u: &crate::udp::UdpStats, sender: &EndpointReport) -> Option<u64> {
    if sender.kernel_counters.is_empty() {
        return None;
    }
    let k = |n: &str| sender.kernel_counters.get(n).copied().unwrap_or(0);
    let seen: u64 = sender
        .streams
        .iter()
        .filter(|s| s.role == Role::Sender)
        .map(|s| s.send_errors)
        .sum();
    let host = (k("Udp.SndbufErrors") + k("Udp6.SndbufErrors")).saturating_sub(seen)
        + sender.interface.as_ref().map_or(0, |i| i.tx_dropped);
    Some(host.min(u.datagrams_lost - u.lost_in_receiver.unwrap_or(0)))
}

/// A direction's UDP figures: the streams' added up.
fn udp_total(streams: &[StreamResult]) -> Option<crate::udp::UdpStats> {
    combine_udp(streams.iter().filter_map(|s| s.udp.as_ref()))
}

/// UDP figures added up (jitter: the mean).
fn combine_udp<'a>(parts: impl Iterator<Item = &'a crate::udp::UdpStats>) -> Option<crate::udp::UdpStats> {
    let all: Vec<&crate::udp::UdpStats> = parts.collect();
    if all.is_empty() {
        return None;
    }
    let sent: Option<u64> = all.iter().map(|u| u.datagrams_sent).sum();
    let lost: u64 = all.iter().map(|u| u.datagrams_lost).sum();
    let expected = sent.unwrap_or(lost + all.iter().map(|u| u.datagrams_received).sum::<u64>());
    Some(crate::udp::UdpStats {
        datagrams_sent: sent,
        datagrams_received: all.iter().map(|u| u.datagrams_received).sum(),
        datagrams_lost: lost,
        loss_pct: if expected > 0 {
            lost as f64 * 100.0 / expected as f64
        } else {
            0.0
        },
        out_of_order: all.iter().map(|u| u.out_of_order).sum(),
        duplicates: all.iter().map(|u| u.duplicates).sum(),
        jitter_ms: all.iter().map(|u| u.jitter_ms).sum::<f64>() / all.len() as f64,
        socket_drops: all.iter().map(|u| u.socket_drops).sum(),
        lost_in_receiver: all.iter().map(|u| u.lost_in_receiver).sum(),
        lost_in_sender: all.iter().map(|u| u.lost_in_sender).sum(),
        ce_marked: all.iter().map(|u| u.ce_marked).sum(),
        // Transit is each stream's own: a flow's mean of several says nothing a line prints.
        transit: match all.as_slice() {
            [one] => one.transit,
            _ => None,
        },
    })
}

fn flow_summary(
    spec: &TestSpec,
    p: &FlowParts,
    ids: &[u32],
    streams: &[StreamResult],
    intervals: &[IntervalResult],
) -> Summary {
    let omit = spec.omit_s.as_secs_f64();
    let bytes_received: u64 = streams.iter().map(|s| s.bytes_received).sum();
    let bytes_sent: u64 = streams.iter().map(|s| s.bytes_sent).sum();
    let duration = receiver_span(p.receiver.streams.iter().filter(|s| ids.contains(&s.id)), omit);
    let len = spec.length_bytes as f64;
    let iv: Vec<(f64, f64, u64, bool)> = intervals
        .iter()
        .map(|i| (i.start_s, i.end_s, i.bytes, i.omitted))
        .collect();
    let pl = peak_and_lowest(&iv, spec.interval_s.as_secs_f64());
    Summary {
        bytes_sent,
        bytes_received,
        bytes_verified: streams.iter().map(|s| s.bytes_verified).sum(),
        // The receivers' and, in a request/response test, the client's (the responses it checked).
        corrupt_blocks: ids
            .iter()
            .flat_map(|&id| [stream(p.receiver, id), stream(p.sender, id)])
            .flatten()
            .map(|s| s.corrupt_blocks)
            .sum(),
        omitted_bytes: streams.iter().map(|s| s.omitted_bytes).sum(),
        duration_s: duration,
        throughput_bps: rate(bytes_received, duration),
        kbytes_per_s: if duration > 0.0 {
            bytes_received as f64 / 1000.0 / duration
        } else {
            0.0
        },
        buffers_sent: bytes_sent as f64 / len,
        buffers_received: bytes_received as f64 / len,
        buffers_per_s: if duration > 0.0 {
            bytes_received as f64 / len / duration
        } else {
            0.0
        },
        peak_interval_bps: pl.map(|x| x.0),
        lowest_interval_bps: pl.map(|x| x.1),
        retransmits: streams
            .iter()
            .filter_map(|s| s.tcp.as_ref())
            .map(|t| t.retransmits)
            .sum(),
        udp: udp_total(streams),
        trips: trips_total(spec, intervals, duration),
        sender_elapsed_s: sender_span(
            p.sender
                .streams
                .iter()
                .filter(|s| ids.contains(&s.id) && s.role == Role::Sender),
        ),
    }
}

/// A TCP flow's burst transits over its intervals (warm-up left out), merged exactly.
fn trips_total(
    spec: &TestSpec,
    intervals: &[IntervalResult],
    over_s: f64,
) -> Option<crate::udp::TransitSummary> {
    if spec.transport == crate::config::Transport::Udp {
        return None;
    }
    let each = (intervals.iter().filter(|i| !i.omitted))
        .flat_map(|i| i.streams.iter().filter_map(|s| s.transit.as_ref()));
    crate::transit::merged(each, over_s)
}

fn combine(dirs: &[DirectionResult]) -> Summary {
    if dirs.len() == 1 {
        return dirs[0].summary.clone();
    }
    let mut s = Summary::default();
    for d in dirs {
        let x = &d.summary;
        s.bytes_sent += x.bytes_sent;
        s.bytes_received += x.bytes_received;
        s.bytes_verified += x.bytes_verified;
        s.corrupt_blocks += x.corrupt_blocks;
        s.omitted_bytes += x.omitted_bytes;
        s.duration_s = s.duration_s.max(x.duration_s);
        s.buffers_sent += x.buffers_sent;
        s.buffers_received += x.buffers_received;
        s.retransmits += x.retransmits;
        s.sender_elapsed_s = s.sender_elapsed_s.max(x.sender_elapsed_s);
    }
    s.udp = combine_udp(dirs.iter().filter_map(|d| d.summary.udp.as_ref()));
    s.trips = crate::transit::merged(dirs.iter().filter_map(|d| d.summary.trips.as_ref()), s.duration_s);
    s.throughput_bps = rate(s.bytes_received, s.duration_s);
    if s.duration_s > 0.0 {
        s.kbytes_per_s = s.bytes_received as f64 / 1000.0 / s.duration_s;
        s.buffers_per_s = s.buffers_received / s.duration_s;
    }
    s
}

/// Merges the per-direction interval lists by index (bidirectional tests).
fn merge_intervals(dirs: &[DirectionResult]) -> Vec<IntervalResult> {
    let mut out: Vec<IntervalResult> = dirs.first().map(|d| d.intervals.clone()).unwrap_or_default();
    for d in dirs.iter().skip(1) {
        for iv in &d.intervals {
            match out.iter_mut().find(|o| o.index == iv.index) {
                Some(o) => {
                    o.bytes += iv.bytes;
                    o.streams.extend(iv.streams.iter().cloned());
                    o.throughput_bps = rate(o.bytes, o.end_s - o.start_s);
                }
                None => out.push(iv.clone()),
            }
        }
    }
    out
}

fn endpoint_summary(role: &str, spec: &TestSpec, r: &EndpointReport) -> EndpointSummary {
    let c = &r.cpu;
    let moved: u64 = r.streams.iter().map(|s| s.bytes).sum();
    let pct = |x: f64, of: f64| if of > 0.0 { x / of * 100.0 } else { 0.0 };
    let cpu = CpuSummary {
        user_pct: pct(c.process_user_s, c.wall_s),
        system_pct: pct(c.process_system_s, c.wall_s),
        system_busy_pct: pct(c.system_busy_s, c.system_total_s),
        softirq_pct: pct(c.system_softirq_s, c.system_total_s),
        cpu_s_per_gb: if moved > 0 {
            (c.process_user_s + c.process_system_s) / (moved as f64 / 1e9)
        } else {
            0.0
        },
        cycles_per_byte: c
            .clock_hz
            .filter(|_| moved > 0)
            .map(|hz| c.system_busy_s * hz / moved as f64),
        clock_hz: c.clock_hz,
        clock_source: c.clock_source.clone(),
        cpus: c.cpus,
    };
    let window = WindowSummary {
        requested_bytes: spec.window_bytes,
        granted_snd_bytes: r.streams.iter().map(|s| s.snd_buf_bytes).min().unwrap_or(0),
        granted_rcv_bytes: r.streams.iter().map(|s| s.rcv_buf_bytes).min().unwrap_or(0),
    };
    let interface = r.interface.as_ref().map(|i| {
        let per_s = |x: u64| {
            if i.wall_s > 0.0 {
                x as f64 / i.wall_s
            } else {
                0.0
            }
        };
        InterfaceSummary {
            name: i.name.clone(),
            rx_packets: i.rx_packets,
            tx_packets: i.tx_packets,
            rx_bytes: i.rx_bytes,
            tx_bytes: i.tx_bytes,
            rx_errors: i.rx_errors,
            tx_errors: i.tx_errors,
            rx_dropped: i.rx_dropped,
            tx_dropped: i.tx_dropped,
            rx_packets_per_s: per_s(i.rx_packets),
            tx_packets_per_s: per_s(i.tx_packets),
            interrupts: i.interrupts,
            interrupts_per_s: per_s(i.interrupts),
        }
    });
    EndpointSummary {
        role: role.to_string(),
        software: r.software.clone(),
        cpu,
        host: r.host.clone(),
        window,
        interface,
        wire: wire_summary(r),
        kernel_counters: r.kernel_counters.clone(),
        tcp_info_retransmits: r
            .streams
            .iter()
            .filter(|s| s.role == Role::Sender)
            .filter_map(|s| s.tcp.as_ref().map(|t| t.retransmits))
            .reduce(|a, b| a + b),
        threads: r.threads,
        cpus_pinned: r.cpus_pinned.clone(),
        elapsed_s: r.elapsed_s,
        memory: r.memory,
    }
}

/// The most header bytes one packet can carry beyond its payload (Ethernet, IPv6 with options, TCP with
/// options): more per packet than this means other traffic shared the interface.
const MAX_HEADER_BYTES: f64 = 200.0;

/// One end's interface bytes against its application bytes, and RFC 6349's TCP efficiency from the
/// kernel's segment counters.
fn wire_summary(r: &EndpointReport) -> Option<crate::result::WireSummary> {
    let i = r.interface.as_ref()?;
    let app = |role: Role| {
        r.streams
            .iter()
            .filter(|s| s.role == role)
            .map(|s| s.bytes)
            .sum::<u64>()
    };
    let (out, inn) = (app(Role::Sender), app(Role::Receiver));
    let per_packet =
        (out > 0 && i.tx_packets > 0).then(|| (i.tx_bytes as f64 - out as f64) / i.tx_packets as f64);
    let k = |n: &str| r.kernel_counters.get(n).copied();
    // Only for TCP tests: a UDP test's segments are its control connection's.
    let tcp = r.streams.iter().any(|s| s.tcp.is_some());
    let efficiency = match (k("Tcp.OutSegs"), k("Tcp.RetransSegs")) {
        (Some(sent), Some(re)) if sent > 0 && tcp => {
            Some(sent.saturating_sub(re) as f64 * 100.0 / sent as f64)
        }
        _ => None,
    };
    let shared = if i.name == "lo" {
        Some("loopback".to_string())
    } else if per_packet.is_some_and(|p| !(0.0..=MAX_HEADER_BYTES).contains(&p)) || i.rx_bytes < inn {
        Some("other traffic".to_string())
    } else {
        None
    };
    Some(crate::result::WireSummary {
        app_bytes_out: out,
        app_bytes_in: inn,
        wire_bytes_out: i.tx_bytes,
        wire_bytes_in: i.rx_bytes,
        overhead_bytes_per_packet: per_packet,
        tcp_efficiency_pct: efficiency,
        shared,
    })
}

/// Verification totals, the first corruption, and whether every packet carried different data.
fn payload_summary(spec: &TestSpec, inp: &Inputs, bytes_verified: u64) -> PayloadSummary {
    use crate::payload::{PATTERN_NAME, UNIQUE_SEGMENT_MIN};
    // Whoever checked bytes: receivers, and in a request/response test the client (the responses).
    let checked = || {
        inp.streams_with(Role::Receiver)
            .chain(inp.streams_with(Role::Sender))
    };
    let corrupt: u64 = checked().map(|s| s.corrupt_blocks).sum();
    let first = checked()
        .filter_map(|s| s.first_corruption.clone())
        .min_by_key(|c| (c.stream, c.offset));
    let smallest_mss = inp
        .streams_with(Role::Sender)
        .filter_map(|s| s.tcp.as_ref().map(|t| t.mss_bytes))
        .filter(|&m| m > 0)
        .min();
    let mss_ok = smallest_mss.is_none_or(|m| m as usize >= UNIQUE_SEGMENT_MIN);
    let mss_text = smallest_mss.map_or("unknown".to_string(), |m| format!("{m} bytes"));
    // A foreign server (iperf3, iperf 2, a QUIC perf or ndt7 server) sending to this client sends
    // its own bytes; a landspeed server over iperf3's protocol or ndt7 sends landspeed's pattern (agreed).
    // In a server's record of a test it served, the peer is the client: foreign when it said so.
    let protocol = inp.context.protocol.as_str();
    let agreed = matches!(protocol, "iperf3" | "ndt7") && spec.verify;
    let (peer, peer_is_foreign, here) = if inp.context.served_here {
        ("client", inp.context.foreign_peer, inp.server)
    } else {
        let foreign = matches!(protocol, "iperf3" | "iperf2" | "quic-perf" | "ndt7") && !agreed;
        ("server", foreign, inp.client)
    };
    let foreign = peer_is_foreign && here.streams.iter().any(|s| s.role == Role::Receiver);
    // iperf3's connections carry no stream number: every stream the same bytes at the same offsets.
    let shared_streams = protocol == "iperf3" && agreed && spec.total_streams() > 1;
    let held = mss_ok && corrupt == 0 && !foreign && !shared_streams;
    let unverified_because = (!spec.verify).then(|| unverified_because(&inp.context));
    let evidence = if foreign {
        format!(
            "the {protocol} {peer} sent its own payload, not landspeed's pattern: nothing shows its packets differed"
        )
    } else if shared_streams && corrupt == 0 {
        "every received byte matched landspeed's pattern; over iperf3's protocol every stream carries \
         the same bytes at the same offsets (its connections have no stream number), so each \
         stream's packets differ but the streams' packets repeat one another"
            .to_string()
    } else if !mss_ok {
        format!("the smallest MSS ({mss_text}) is below the {UNIQUE_SEGMENT_MIN}-byte bound of the uniqueness proof")
    } else if corrupt > 0 {
        format!("{corrupt} corrupt block(s) arrived: what was delivered is not the unique pattern")
    } else if spec.verify {
        format!(
            "every received byte matched the never-repeating pattern; segments of {UNIQUE_SEGMENT_MIN} bytes or more are provably distinct and the smallest MSS was {mss_text}"
        )
    } else {
        format!(
            "the senders wrote the never-repeating pattern (segments of {UNIQUE_SEGMENT_MIN} bytes or more are provably distinct; smallest MSS {mss_text}); arrival was not checked ({})",
            unverified_because.as_deref().unwrap_or_default()
        )
    };
    PayloadSummary {
        pattern: PATTERN_NAME.to_string(),
        key_hex: format!("{:016x}", spec.payload_key),
        verified: spec.verify,
        unverified_because,
        bytes_verified,
        corrupt_blocks: corrupt,
        first_corruption: first,
        different_data_every_packet: held,
        unique_segment_min_bytes: UNIQUE_SEGMENT_MIN as u32,
        smallest_mss_bytes: smallest_mss,
        evidence,
    }
}

/// Why a run verified nothing: the user's `--no-verify`, a peer that is not landspeed, or (in an
/// ndt7 server's record of a download) a client that checks what it receives and does not say.
fn unverified_because(context: &RunContext) -> String {
    if context.foreign_peer {
        format!(
            "the {} peer is not landspeed: it neither sends nor checks landspeed's pattern",
            context.protocol
        )
    } else if context.served_here && context.protocol == "ndt7" {
        "an ndt7 download is checked by its client (landspeed's, which named its payload key), and \
         ndt7 does not tell the server what the client found: see the client's result"
            .into()
    } else {
        "--no-verify".into()
    }
}

fn data_path(spec: &TestSpec, inp: &Inputs) -> DataPath {
    use crate::config::TxMode;
    let sends: u64 = inp.streams_with(Role::Sender).map(|s| s.zerocopy_sends).sum();
    let copied: u64 = inp.streams_with(Role::Sender).map(|s| s.zerocopy_copied).sum();
    if spec.transport == crate::config::Transport::Udp {
        let gso = inp.streams_with(Role::Sender).any(|s| s.udp_offload);
        let gro = inp.streams_with(Role::Receiver).any(|s| s.udp_offload);
        return DataPath {
            tx: if gso {
                "send, UDP segmentation offload (batches)"
            } else {
                "send, one datagram per call"
            }
            .into(),
            rx: if gro {
                "recv, UDP receive offload"
            } else {
                "recv, one datagram per call"
            }
            .into(),
            engine: "one thread per stream, paced by schedule".into(),
            zerocopy_sends: 0,
            zerocopy_copied_pct: None,
            tls: None,
        };
    }
    if spec.transport == crate::config::Transport::Quic {
        return DataPath {
            tx: "quinn stream writes, UDP datagrams batched by segmentation offload (GSO) where the kernel has it".into(),
            rx: "quinn stream chunks, read without copying".into(),
            engine: format!(
                "one thread and async runtime per connection: {} stream(s) over {} connection(s)",
                spec.streams,
                spec.connections
            ),
            zerocopy_sends: 0,
            zerocopy_copied_pct: None,
            tls: None,
        };
    }
    if spec.file.is_some() {
        return DataPath {
            tx: "sendfile (file to socket, no copy through user space; a Windows end reads and writes)"
                .into(),
            rx: "splice (socket to pipe to file, no copy through user space; a Windows end reads and writes)"
                .into(),
            engine: "epoll, non-blocking sockets".into(),
            zerocopy_sends: 0,
            zerocopy_copied_pct: None,
            tls: None,
        };
    }
    DataPath {
        tx: match spec.tx {
            TxMode::Copy => "send".into(),
            TxMode::Zerocopy => "send+MSG_ZEROCOPY".into(),
        },
        rx: rx_path(spec.rx, inp),
        engine: match spec.io {
            crate::config::IoBackend::Epoll => tcp_engine(inp),
            crate::config::IoBackend::Uring => {
                format!(
                    "io_uring, {} linked operations queued per stream",
                    spec.queue_depth
                )
            }
        },
        zerocopy_sends: sends,
        zerocopy_copied_pct: (sends > 0).then(|| copied as f64 / sends as f64 * 100.0),
        tls: spec.tls.and_then(|_| tls_path(inp)),
    }
}

/// A `--tls` test's encryption: the suites the streams agreed on and the senders' records.
fn tls_path(inp: &Inputs) -> Option<crate::result::TlsPath> {
    let mut suites: Vec<&str> = inp
        .streams_with(Role::Sender)
        .chain(inp.streams_with(Role::Receiver))
        .filter_map(|s| s.tls.map(|t| t.cipher.iana_name()))
        .collect();
    suites.sort_unstable();
    suites.dedup();
    if suites.is_empty() {
        return None;
    }
    let senders = || inp.streams_with(Role::Sender).filter(|s| s.tls.is_some());
    let records: u64 = senders().filter_map(|s| s.tls).map(|t| t.records).sum();
    let bytes: u64 = senders().map(|s| s.bytes).sum();
    Some(crate::result::TlsPath {
        suite: suites.join(", "),
        record_layer: if inp.spec.tls.is_some_and(|t| t.ktls) {
            "the kernel (kTLS, keys from rustls' handshake)".into()
        } else {
            "landspeed in user space (aws-lc-rs AEAD, keys from rustls' handshake)".into()
        },
        records,
        mean_record_bytes: if records > 0 {
            bytes as f64 / records as f64
        } else {
            0.0
        },
        record_overhead_bytes: 22,
    })
}

/// How the receivers read, and the low-water mark they woke at, if any (the highest one the kernel
/// kept on either end).
fn rx_path(rx: crate::config::RxMode, inp: &Inputs) -> String {
    use crate::config::RxMode;
    let how = match rx {
        RxMode::Copy => "recv (copy)",
        RxMode::Discard => "recv+MSG_TRUNC (discard)",
    };
    let lowat = inp
        .streams_with(Role::Receiver)
        .filter_map(|s| s.rcvlowat_bytes)
        .max();
    match lowat {
        Some(b) => format!("{how}, woken at {} (SO_RCVLOWAT)", crate::units::Bytes(b)),
        None => how.into(),
    }
}

/// Which TCP worker moved the streams: blocking sockets where a thread had one stream to itself, epoll
/// where it had several (both ends together; only the client's against an iperf3 server).
fn tcp_engine(inp: &Inputs) -> String {
    let server: &[StreamReport] = if inp.context.protocol == "iperf3" {
        &[]
    } else {
        &inp.server.streams
    };
    let all = || inp.client.streams.iter().chain(server);
    let how = match (all().filter(|s| s.blocking).count(), all().count()) {
        (0, _) => "epoll, non-blocking sockets",
        (b, n) if b == n => "blocking sockets, one thread per stream",
        _ => "blocking sockets where a thread had one stream, epoll where it had several",
    };
    let threads = match server.is_empty() {
        true => format!("client {} worker thread(s)", inp.client.threads),
        false => format!(
            "client {} worker thread(s), server {}",
            inp.client.threads, inp.server.threads
        ),
    };
    format!(
        "{how}: {threads} for {} stream(s) (by default each stream has a thread of its own up to {} streams, above that one epoll worker per CPU carries them)",
        inp.spec.total_streams(),
        crate::config::THREAD_PER_STREAM_MAX
    )
}

/// Every flow's streams and summary, in the spec's flow order.
fn per_flow(inp: &Inputs) -> (Vec<DirectionResult>, Vec<StreamResult>) {
    let spec = inp.spec;
    let mut directions = vec![];
    let mut streams = vec![];
    for flow in spec.flows() {
        let p = parts(inp, flow);
        let ids: Vec<u32> = (0..spec.total_streams())
            .filter(|&i| spec.flow_of(i) == flow)
            .collect();
        let srs: Vec<StreamResult> = ids
            .iter()
            .map(|&id| {
                stream_result(
                    spec,
                    flow,
                    id,
                    stream(p.sender, id),
                    stream(p.receiver, id),
                    p.sender.elapsed_s,
                )
            })
            .collect();
        let intervals = flow_intervals(&p, &ids);
        let summary = flow_summary(spec, &p, &ids, &srs, &intervals);
        let limits = crate::limit::decide(&crate::limit::Facts {
            samples: limit_samples(&intervals, spec.interval_s.as_secs_f64()),
            ..limit_facts(spec, &p, &srs, &summary)
        });
        streams.extend(srs);
        directions.push(DirectionResult {
            flow,
            summary,
            intervals,
            stalls: p.receiver.stalls.clone(),
            limits,
        });
    }
    (directions, streams)
}

/// Each direction's verdict weighed against what the path itself says (`core::limit::refine`):
/// the WAN emulator's settings and counters when the test crossed it, else `--path`'s capacity
/// estimate (from packet trains toward the server: the client's sending direction only).
pub fn judge_with_path(r: &mut RunResult) {
    let trains = r
        .path
        .as_ref()
        .and_then(|p| p.capacity.as_ref())
        .and_then(|c| c.estimate_bps);
    for d in &mut r.directions {
        let seen = match (&r.emulator, trains) {
            (Some(e), _) => e.path_seen(d.flow),
            (None, Some(c)) if d.flow == Flow::ClientToServer => crate::limit::PathSeen {
                source: "--path's packet trains".into(),
                capacity_bps: Some(c),
                ..Default::default()
            },
            _ => continue,
        };
        crate::limit::refine(&mut d.limits, &seen);
    }
}

/// The evidence one direction's verdict is decided from (`core::limit`): its rate and time, its
/// senders' TCP_INFO (mean minimum and smoothed RTT, limited times, window, segments and
/// retransmissions), the window asked for and granted, the pace asked for, and whether a worker
/// thread at either end was busy all its time.
fn limit_facts(
    spec: &TestSpec,
    p: &FlowParts,
    srs: &[StreamResult],
    summary: &Summary,
) -> crate::limit::Facts {
    let tcp: Vec<&crate::endpoint::TcpStats> = srs.iter().filter_map(|s| s.tcp.as_ref()).collect();
    let n = tcp.len().max(1) as f64;
    let mean = |f: &dyn Fn(&crate::endpoint::TcpStats) -> f64| tcp.iter().map(|t| f(t)).sum::<f64>() / n;
    let limited: Vec<&LimitedShares> = srs.iter().filter_map(|s| s.limited.as_ref()).collect();
    let share = |f: &dyn Fn(&LimitedShares) -> f64| match limited.len() {
        0 => 0.0,
        k => limited.iter().map(|l| f(l)).sum::<f64>() / k as f64,
    };
    let has_rtt = !tcp.is_empty() && tcp.iter().all(|t| t.rtt_min_us > 0);
    let failed = [p.sender.error.clone(), p.receiver.error.clone()]
        .into_iter()
        .flatten()
        .chain(srs.iter().flat_map(|s| s.errors.clone()))
        .next();
    let streams = srs.len() as u32;
    let paced_bps = spec.paced_bps(streams);
    let min_buf = |r: &EndpointReport, f: fn(&StreamReport) -> u64| {
        r.streams.iter().map(f).filter(|b| *b > 0).min().unwrap_or(0)
    };
    let sender_tcp = spec.transport == crate::config::Transport::Tcp;
    crate::limit::Facts {
        failed,
        rate_bps: summary.throughput_bps,
        duration_s: summary.duration_s,
        streams,
        rtt_min_s: has_rtt.then(|| mean(&|t| f64::from(t.rtt_min_us)) / 1e6),
        rtt_avg_s: has_rtt.then(|| mean(&|t| f64::from(t.rtt_avg_us)) / 1e6),
        rwnd_limited_pct: share(&|l| l.rwnd_limited_pct),
        sndbuf_limited_pct: share(&|l| l.sndbuf_limited_pct),
        window_bytes: mean(&|t| t.snd_wnd_bytes as f64),
        window_requested: spec.window_bytes,
        granted_snd_bytes: min_buf(p.sender, |s| s.snd_buf_bytes),
        granted_rcv_bytes: min_buf(p.receiver, |s| s.rcv_buf_bytes),
        segs_out: tcp.iter().map(|t| t.segs_out).sum(),
        retransmits: tcp.iter().map(|t| t.retransmits).sum(),
        mss_bytes: tcp.first().map_or(0, |t| t.mss_bytes),
        paced_bps,
        peer_cap_bps: [p.sender, p.receiver]
            .iter()
            .find_map(|r| r.stream_cap_bps)
            .map(|c| c * f64::from(streams)),
        sender_wmem_max: sysctl_max(p.sender, "net.ipv4.tcp_wmem"),
        receiver_rmem_max: sysctl_max(p.receiver, "net.ipv4.tcp_rmem"),
        sender_cpu: end_cpu(p.sender, Role::Sender, sender_tcp),
        receiver_cpu: end_cpu(p.receiver, Role::Receiver, true),
        samples: Vec::new(),
    }
}

/// The intervals as the verdict weighs them (`core::limit::parts`): the warm-up and a tail under
/// half an interval left out, each with its senders' mean RTT at its end and the segments they retransmitted within
/// it (their running counts' growth).
fn limit_samples(intervals: &[IntervalResult], nominal_s: f64) -> Vec<crate::limit::Sample> {
    let mut so_far: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for i in intervals {
        let rtts: Vec<f64> = i.streams.iter().filter_map(|s| s.rtt_us).map(f64::from).collect();
        let mut retransmits = None;
        for s in &i.streams {
            if let Some(n) = s.retransmits {
                let before = so_far.insert(s.id, n).unwrap_or(0);
                *retransmits.get_or_insert(0) += n.saturating_sub(before);
            }
        }
        // A short last interval's rate is noise against the others': left out under half the length.
        if i.omitted || (nominal_s > 0.0 && i.end_s - i.start_s < 0.5 * nominal_s) {
            continue;
        }
        out.push(crate::limit::Sample {
            from_s: i.start_s,
            to_s: i.end_s,
            rate_bps: i.throughput_bps,
            rtt_s: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64 / 1e6),
            retransmits,
        });
    }
    out
}

/// A triple sysctl's maximum (its third field) as an end reported it.
fn sysctl_max(r: &EndpointReport, key: &str) -> Option<u64> {
    r.host.sysctls.get(key)?.split_whitespace().nth(2)?.parse().ok()
}

/// What an end's CPUs showed, for the streams it moved in `role` (a UDP sender paces itself, so its
/// busy thread is not taken as its limit: `threads` false).
fn end_cpu(r: &EndpointReport, role: Role, threads: bool) -> crate::limit::EndCpu {
    let c = &r.cpu;
    let share = |s: f64| (c.system_total_s > 0.0).then(|| (s / c.system_total_s * 100.0).min(100.0));
    crate::limit::EndCpu {
        bound_thread: crate::cpu_bound::bound_thread(r, role).filter(|_| threads),
        waits_known: !r.workers.is_empty() && r.workers.iter().all(|w| w.runq_wait_s.is_some()),
        host_busy_pct: share(c.system_busy_s),
        steal_pct: share(c.system_steal_s),
        quota: c.cgroup.as_ref().filter(|g| g.periods > 0).map(|g| {
            (
                g.quota_cpus,
                g.throttled_periods as f64 / g.periods as f64 * 100.0,
            )
        }),
    }
}

/// What the result warns about: each end's own warnings and errors, corrupt payload, byte counts that
/// disagree, failed streams, a window that limited the rate, a file that did not arrive intact.
fn warnings(
    inp: &Inputs,
    payload: &PayloadSummary,
    streams: &[StreamResult],
    file: Option<&crate::files::FileTransferResult>,
) -> Vec<String> {
    let (client, server) = (&inp.client.warnings, &inp.server.warnings);
    // The same words from both ends (a window both kernels capped) are one warning.
    let mut warnings: Vec<String> = client
        .iter()
        .map(|w| match server.contains(w) {
            true => format!("both ends: {w}"),
            false => format!("client: {w}"),
        })
        .collect();
    warnings.extend(
        server
            .iter()
            .filter(|w| !client.contains(w))
            .map(|w| format!("server: {w}")),
    );
    if let Some(c) = &payload.first_corruption {
        warnings.push(format!(
            "payload corrupted: stream {} offset {}: expected {} received {}",
            c.stream, c.offset, c.expected_hex, c.received_hex
        ));
    }
    for s in streams {
        // UDP loses datagrams by nature; its loss is reported as such, not as a disagreement.
        // An ndt7 server's count is its last measurement's, which trails by design.
        let udp = inp.spec.transport == crate::config::Transport::Udp;
        if s.bytes_sent != s.bytes_received && !udp && inp.context.protocol != "ndt7" {
            warnings.push(format!(
                "stream {}: sender wrote {} bytes but receiver read {}",
                s.id, s.bytes_sent, s.bytes_received
            ));
        }
        for e in &s.errors {
            warnings.push(format!("stream {}: {e}", s.id));
        }
    }
    warnings.extend(window_limited(streams, inp.spec.window_bytes));
    warnings.extend(cipher_without_instructions(inp, streams));
    warnings.extend(mptcp_fallback(inp.spec, streams));
    if inp.spec.transport == crate::config::Transport::Tcp {
        // UDP senders pace by schedule, so a busy sender there says nothing about the limit; nor does
        // a busy TCP sender whose streams kept the pace the user asked for.
        match paced(inp.spec, streams) {
            Some(line) => warnings.push(line),
            None => {
                warnings.extend(crate::cpu_bound::cpu_bound("client", inp.client));
                warnings.extend(crate::cpu_bound::cpu_bound("server", inp.server));
            }
        }
    }
    for (who, r) in [("client", inp.client), ("server", inp.server)] {
        if let Some(e) = &r.error {
            warnings.push(format!("{who}: {e}"));
        }
    }
    if let Some(f) = file.filter(|f| !f.verified) {
        warnings.push(format!(
            "file {}: NOT intact: the receiver's copy (SHA-256 {}) differs from the sender's ({})",
            f.name, f.sha256_receiver_hex, f.sha256_sender_hex
        ));
    }
    warnings
}

/// A TLS test sealing with AES-GCM where an end's CPU lacks the instructions for it: software AES-GCM
/// is several times slower than ChaCha20 there, so the cipher rather than the path may set the rate;
/// the result says so in one line, with the rate the test reached and the suite to use instead.
fn cipher_without_instructions(inp: &Inputs, streams: &[StreamResult]) -> Option<String> {
    let cipher = inp.spec.tls.as_ref()?.cipher;
    if cipher == crate::tls::TlsCipher::Chacha20Poly1305 {
        return None;
    }
    let ends: Vec<&str> = [("client", inp.client), ("server", inp.server)]
        .into_iter()
        .filter(|(_, r)| r.host.aes_instructions == Some(false))
        .map(|(who, _)| who)
        .collect();
    if ends.is_empty() {
        return None;
    }
    let bps: f64 = streams.iter().map(|s| s.throughput_bps).sum();
    Some(format!(
        "{}: {} on a CPU without AES instructions runs in software, several times slower than ChaCha20-Poly1305 there: this test reached {} (all streams); --tls-cipher chacha20 is the fast suite on such a CPU",
        ends.join(" and "),
        cipher.iana_name(),
        crate::units::BitRate(bps)
    ))
}

/// A UDP direction whose receiving socket overflowed: the rate its receiver kept (the most it keeps
/// at this datagram size, or less) against the rate sent, in one line with what to change.
fn receiver_behind(d: &crate::result::DirectionResult) -> Option<String> {
    let u = d.summary.udp.as_ref()?;
    let dropped = u
        .lost_in_receiver
        .filter(|&n| n > 0 && u.socket_drops.unwrap_or(0) > 0)?;
    let sent = u.datagrams_sent.filter(|&n| n > 0)?;
    let kept = d.summary.throughput_bps;
    let offered = kept * sent as f64 / u.datagrams_received.max(1) as f64;
    let end = match d.flow {
        Flow::ClientToServer => "server",
        Flow::ServerToClient => "client",
    };
    Some(format!(
        "{end}: the receiver could not keep up: it kept {} of the {} sent ({dropped} datagrams, {:.1}% of those sent, dropped in its full socket buffer); a larger receive buffer (-w), a lower rate (-b), larger datagrams (-l) or more streams (-P)",
        crate::units::BitRate(kept),
        crate::units::BitRate(offered),
        dropped as f64 * 100.0 / sent as f64
    ))
}

/// A stream that reached this share of its pace kept it.
const PACE_KEPT: f64 = 0.9;

/// The rate asked for, when every stream was paced (`--fq-rate`) and kept its pace on average: then the
/// pacing, not the network or a CPU, set the rate.
fn paced(spec: &TestSpec, streams: &[StreamResult]) -> Option<String> {
    let pace = spec.fq_rate_bps?;
    if streams.is_empty() {
        return None;
    }
    let per_stream = streams.iter().map(|s| s.throughput_bps).sum::<f64>() / streams.len() as f64;
    (per_stream >= PACE_KEPT * pace).then(|| {
        format!(
            "each stream paced to {} (--fq-rate): {} measured per stream; the pacing asked for set the rate",
            crate::units::BitRate(pace),
            crate::units::BitRate(per_stream)
        )
    })
}

/// MPTCP asked for, and streams whose connection is plain TCP at both ends: a fallback.
fn mptcp_fallback(spec: &TestSpec, streams: &[StreamResult]) -> Option<String> {
    if !spec.mptcp {
        return None;
    }
    let fell: Vec<String> = streams
        .iter()
        .filter(|s| s.mptcp().is_none())
        .map(|s| s.id.to_string())
        .collect();
    (!fell.is_empty()).then(|| {
        format!(
            "MPTCP was asked for, but {} of {} streams (stream {}) fell back to plain TCP: the server \
             listens with plain TCP (`landspeed serve --no-mptcp`, an iperf3 older than 3.19, or a \
             kernel without MPTCP), or something on the path strips MPTCP's TCP options",
            fell.len(),
            streams.len(),
            fell.join(", ")
        )
    })
}

/// The test as it ran: a download's size is known only to the server until the end.
fn spec_as_run(spec: &TestSpec, file: Option<&crate::files::FileTransferResult>) -> TestSpec {
    let mut spec = spec.clone();
    if let (Some(f), Some(fs)) = (file, spec.file.as_mut()) {
        fs.size_bytes = Some(f.size_bytes);
        spec.end = crate::config::EndCondition::Bytes(f.size_bytes);
    }
    spec
}

/// The result of a test that has only just started: every stream, no figures yet. What a live output
/// (iperf3's `--json-stream` start event) can say about the test before its end.
pub fn provisional(spec: &TestSpec, context: RunContext) -> RunResult {
    so_far(spec, context, &[], &[])
}

/// A running test as its server sees it: every stream (the client's port of stream N from
/// `client_ports[N]`, when known) and the intervals of the server's `samples` so far, figured as the
/// finished test's are. What a live view of the server's end renders (iperf3's server text).
pub fn so_far(
    spec: &TestSpec,
    context: RunContext,
    client_ports: &[Option<u16>],
    samples: &[IntervalSample],
) -> RunResult {
    let end = |at: fn(Flow) -> Role, ports: &[Option<u16>]| EndpointReport {
        streams: (0..spec.total_streams())
            .map(|id| {
                let flow = spec.flow_of(id);
                let mut s = StreamReport::empty(id, flow, at(flow));
                s.peer_port = ports.get(id as usize).copied().flatten();
                s
            })
            .collect(),
        ..EndpointReport::default()
    };
    assemble(&Inputs {
        spec,
        context,
        client: &end(Role::at_client, &[]),
        server: &end(Role::at_server, client_ports),
        client_samples: &[],
        server_samples: samples,
    })
}

/// Builds the run result. Pure: the same inputs always give the same result.
pub fn assemble(inp: &Inputs) -> RunResult {
    let (mut directions, streams) = per_flow(inp);
    for d in &mut directions {
        let sender = match d.flow {
            crate::config::Flow::ClientToServer => inp.client,
            crate::config::Flow::ServerToClient => inp.server,
        };
        if let Some(u) = d.summary.udp.as_mut() {
            u.lost_in_sender = lost_in_sender(u, sender);
        }
    }
    let summary = combine(&directions);
    let payload = payload_summary(inp.spec, inp, summary.bytes_verified);
    let intervals = merge_intervals(&directions);
    let file = file_result(inp, &summary);
    let mut warnings = warnings(inp, &payload, &streams, file.as_ref());
    warnings.extend(directions.iter().filter_map(receiver_behind));
    let ctx = &inp.context;
    let spec = &spec_as_run(inp.spec, file.as_ref());
    RunResult {
        schema: SCHEMA.to_string(),
        software: format!("landspeed {}", crate::SOFTWARE_VERSION),
        protocol: if ctx.protocol.is_empty() {
            "landspeed".into()
        } else {
            ctx.protocol.clone()
        },
        started_unix_s: ctx.started_unix_s,
        started_utc: format_utc(ctx.started_unix_s),
        config: ResolvedConfig {
            host: ctx.host.clone(),
            port: ctx.port,
            local_address: ctx.local_address.clone(),
            remote_address: ctx.remote_address.clone(),
            family: ctx.family.clone(),
            spec: spec.clone(),
            threads: ctx.threads,
            cpus: ctx.cpus.clone(),
            bind: ctx.bind.clone(),
            scheduled_start_unix_s: ctx.scheduled_start_unix_s,
            no_end_report: false,
            bounceback: None,
        },
        payload,
        data_path: data_path(spec, inp),
        summary,
        directions,
        streams,
        intervals,
        local: endpoint_summary("client", spec, inp.client),
        remote: endpoint_summary("server", spec, inp.server),
        warnings,
        interrupted: ctx.interrupted,
        latency: None,
        path: None,
        file,
        emulator: None,
        authentication: None,
        iperf3_server_output: None,
        ndt7: None,
        transactions: None,
        frames: None,
        multicast: None,
    }
}

/// The file section of a disk-to-disk test: the sending end's report against the receiving end's.
fn file_result(inp: &Inputs, summary: &Summary) -> Option<crate::files::FileTransferResult> {
    let spec = inp.spec;
    let f = spec.file.as_ref()?;
    let (sender, receiver) = if spec.direction == crate::config::Direction::Reverse {
        (inp.server, inp.client)
    } else {
        (inp.client, inp.server)
    };
    Some(crate::files::combine(
        sender.file.as_ref()?,
        receiver.file.as_ref()?,
        &f.name,
        summary.throughput_bps,
        summary.duration_s,
        summary.bytes_received,
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::Direction;
    use crate::endpoint::{CpuTimes, InterfaceCounters, StreamSample};
    use std::time::Duration;

    /// A stream report with these figures (other modules' tests build theirs here too).
    pub(crate) fn sr(
        id: u32,
        flow: Flow,
        role: Role,
        bytes: u64,
        omitted: u64,
        first: f64,
        last: f64,
    ) -> StreamReport {
        StreamReport {
            bytes,
            calls: 1,
            omitted_bytes: omitted,
            first_byte_s: Some(first),
            last_byte_s: Some(last),
            snd_buf_bytes: 1000,
            rcv_buf_bytes: 2000,
            bytes_verified: if role == Role::Receiver { bytes } else { 0 },
            ..StreamReport::empty(id, flow, role)
        }
    }

    fn samples(ids: &[u32], cum: &[u64], omit_until: usize) -> Vec<IntervalSample> {
        cum.iter()
            .enumerate()
            .map(|(i, &c)| IntervalSample {
                index: i as u32,
                start_s: i as f64,
                end_s: i as f64 + 1.0,
                omitted: i < omit_until,
                streams: ids
                    .iter()
                    .map(|&id| StreamSample {
                        id,
                        bytes: c,
                        tcp: None,
                        udp: None,
                        reads: None,
                        trips: None,
                        trip_bins: None,
                    })
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn a_udp_receiver_that_could_not_keep_up_is_named_with_the_rate_it_kept() {
        let dir = |lost_in_receiver, socket_drops| crate::result::DirectionResult {
            flow: Flow::ClientToServer,
            summary: Summary {
                throughput_bps: 27.7e9,
                udp: Some(crate::udp::UdpStats {
                    datagrams_sent: Some(1000),
                    datagrams_received: 590,
                    datagrams_lost: 410,
                    lost_in_receiver,
                    socket_drops,
                    ..Default::default()
                }),
                ..Default::default()
            },
            intervals: vec![],
            stalls: vec![],
            limits: vec![],
        };
        let line = receiver_behind(&dir(Some(400), Some(12))).unwrap();
        assert!(
            line.starts_with("server: the receiver could not keep up: it kept 27.7 Gbit/s of the 46.9 Gbit/s sent (400 datagrams, 40.0% of those sent,"),
            "{line}"
        );
        // Loss on the path only, or no drop count (iperf3, Windows): nothing said of the receiver.
        assert_eq!(receiver_behind(&dir(Some(0), Some(0))), None);
        assert_eq!(receiver_behind(&dir(None, None)), None);
    }

    #[test]
    fn aes_gcm_on_a_cpu_without_aes_instructions_is_named_with_the_rate_it_reached() {
        let warned = |cipher, client_aes, server_aes| {
            let spec = TestSpec {
                tls: Some(crate::tls::TlsSpec { cipher, ktls: false }),
                ..Default::default()
            };
            let end = |role, aes| {
                let mut e = EndpointReport {
                    streams: vec![sr(0, Flow::ClientToServer, role, 2_500_000_000, 0, 0.0, 2.0)],
                    ..Default::default()
                };
                e.host.aes_instructions = aes;
                e
            };
            let (client, server) = (end(Role::Sender, client_aes), end(Role::Receiver, server_aes));
            let r = assemble(&Inputs {
                spec: &spec,
                context: RunContext::example("h", 2.0),
                client: &client,
                server: &server,
                client_samples: &[],
                server_samples: &[],
            });
            r.warnings.into_iter().find(|w| w.contains("AES instructions"))
        };
        let aes = crate::tls::TlsCipher::Aes128Gcm;
        let line = warned(aes, Some(true), Some(false)).expect("the server lacks them");
        assert!(
            line.starts_with("server: TLS13_AES_128_GCM_SHA256 on a CPU without"),
            "{line}"
        );
        assert!(
            line.contains("10.0 Gbit/s") && line.contains("--tls-cipher chacha20"),
            "{line}"
        );
        let both = warned(crate::tls::TlsCipher::Aes256Gcm, Some(false), Some(false)).unwrap();
        assert!(both.starts_with("client and server: TLS13_AES_256_GCM"), "{both}");
        // Instructions present, unknown (another CPU, a withheld host), or ChaCha20: nothing to say.
        assert_eq!(warned(aes, Some(true), Some(true)), None);
        assert_eq!(warned(aes, None, None), None);
        let chacha = crate::tls::TlsCipher::Chacha20Poly1305;
        assert_eq!(warned(chacha, Some(false), Some(false)), None);
    }

    #[test]
    fn a_servers_record_says_the_client_is_the_peer_that_sent_its_own_bytes() {
        let record = |flow: Flow, server_role: Role| {
            let spec = TestSpec {
                verify: false,
                ..Default::default()
            };
            let client_role = match server_role {
                Role::Sender => Role::Receiver,
                Role::Receiver => Role::Sender,
            };
            let end = |role| EndpointReport {
                streams: vec![sr(0, flow, role, 1_000, 0, 0.0, 1.0)],
                ..Default::default()
            };
            let (client, server) = (end(client_role), end(server_role));
            let mut context = RunContext::example("h", 1.0);
            context.protocol = "iperf3".into();
            context.foreign_peer = true;
            context.served_here = true;
            assemble(&Inputs {
                spec: &spec,
                context,
                client: &client,
                server: &server,
                client_samples: &[],
                server_samples: &[],
            })
            .payload
        };
        // The server sent (iperf3 -R): its own pattern, whatever the client is.
        let sent = record(Flow::ServerToClient, Role::Sender);
        assert!(sent.different_data_every_packet, "{sent:?}");
        assert!(
            sent.evidence
                .starts_with("the senders wrote the never-repeating pattern"),
            "{sent:?}"
        );
        // The client sent: a foreign client's own bytes.
        let got = record(Flow::ClientToServer, Role::Receiver);
        assert!(!got.different_data_every_packet, "{got:?}");
        assert!(
            got.evidence.starts_with("the iperf3 client sent its own payload"),
            "{got:?}"
        );
        assert_eq!(
            got.unverified_because.as_deref(),
            Some("the iperf3 peer is not landspeed: it neither sends nor checks landspeed's pattern")
        );
    }

    #[test]
    fn an_interval_rtt_is_never_below_the_connections_minimum_nor_zero() {
        let sender = |min| StreamReport {
            tcp: Some(crate::endpoint::TcpStats {
                rtt_min_us: min,
                ..Default::default()
            }),
            ..sr(0, Flow::ClientToServer, Role::Sender, 1, 0, 0.0, 1.0)
        };
        assert_eq!(interval_rtt(60_000, Some(&sender(50_000))), Some(60_000));
        assert_eq!(interval_rtt(50_000, Some(&sender(50_000))), Some(50_000));
        assert_eq!(interval_rtt(40_000, Some(&sender(50_000))), None);
        assert_eq!(interval_rtt(0, Some(&sender(0))), None, "no sample yet");
        assert_eq!(interval_rtt(900, None), Some(900), "no final figures: as read");
    }

    #[test]
    fn wire_bytes_are_set_against_the_data_and_shared_interfaces_are_named() {
        let f = Flow::ClientToServer;
        let tcp_stream = StreamReport {
            tcp: Some(Default::default()),
            ..sr(0, f, Role::Sender, 1_000_000, 0, 0.0, 1.0)
        };
        let mut r = EndpointReport {
            streams: vec![tcp_stream],
            interface: Some(InterfaceCounters {
                name: "eth0".into(),
                tx_packets: 1000,
                tx_bytes: 1_066_000,
                rx_bytes: 40_000,
                ..Default::default()
            }),
            kernel_counters: [("Tcp.OutSegs", 1000), ("Tcp.RetransSegs", 10)]
                .map(|(k, v)| (k.to_string(), v))
                .into(),
            ..Default::default()
        };
        let w = wire_summary(&r).unwrap();
        assert_eq!((w.app_bytes_out, w.wire_bytes_out), (1_000_000, 1_066_000));
        assert_eq!(w.overhead_bytes_per_packet, Some(66.0));
        assert_eq!(w.tcp_efficiency_pct, Some(99.0));
        assert_eq!(w.shared, None);
        r.interface.as_mut().unwrap().tx_bytes = 2_000_000; // 1 kB per packet beyond the data
        assert_eq!(wire_summary(&r).unwrap().shared.as_deref(), Some("other traffic"));
        r.interface.as_mut().unwrap().name = "lo".into();
        assert_eq!(wire_summary(&r).unwrap().shared.as_deref(), Some("loopback"));
        r.streams[0].tcp = None; // a UDP test: the segments are its control connection's
        assert_eq!(wire_summary(&r).unwrap().tcp_efficiency_pct, None);
        r.interface = None;
        assert_eq!(wire_summary(&r), None);
    }

    #[test]
    fn forward_with_omit_excludes_warmup_everywhere() {
        let spec = TestSpec {
            streams: 2,
            omit_s: Duration::from_secs(1),
            interval_s: Duration::from_secs(1),
            ..TestSpec::default()
        };
        let f = Flow::ClientToServer;
        let client = EndpointReport {
            streams: vec![
                sr(0, f, Role::Sender, 3000, 0, 0.0, 3.0),
                sr(1, f, Role::Sender, 3000, 0, 0.0, 3.0),
            ],
            cpu: CpuTimes {
                wall_s: 3.0,
                process_user_s: 0.3,
                process_system_s: 1.5,
                system_busy_s: 2.0,
                system_softirq_s: 0.5,
                system_total_s: 6.0,
                cpus: 2,
                clock_hz: Some(2e9),
                clock_source: None,
                per_cpu: vec![],
                ..CpuTimes::default()
            },
            ..Default::default()
        };
        let server = EndpointReport {
            streams: vec![
                sr(0, f, Role::Receiver, 3000, 1000, 0.1, 3.0),
                sr(1, f, Role::Receiver, 3000, 1000, 0.1, 3.0),
            ],
            ..Default::default()
        };
        let ss = samples(&[0, 1], &[1000, 2000, 3000], 1);
        let r = assemble(&Inputs {
            spec: &spec,
            context: RunContext::default(),
            client: &client,
            server: &server,
            client_samples: &[],
            server_samples: &ss,
        });
        // The JSON document reads back into the same result (no key twice, nothing lost).
        let back: RunResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.summary.bytes_received, 4000);
        assert_eq!(r.summary.bytes_sent, 4000);
        assert_eq!(r.summary.omitted_bytes, 2000);
        assert!((r.summary.duration_s - 2.0).abs() < 1e-9);
        assert!((r.summary.throughput_bps - 16000.0).abs() < 1e-6);
        let measured: u64 = r.intervals.iter().filter(|i| !i.omitted).map(|i| i.bytes).sum();
        assert_eq!(measured, r.summary.bytes_received);
        assert_eq!(r.summary.peak_interval_bps, Some(16000.0));
        assert!((r.local.cpu.user_pct - 10.0).abs() < 1e-9);
        assert!((r.local.cpu.system_busy_pct - 100.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.local.cpu.cycles_per_byte, Some(2.0 * 2e9 / 6000.0));
        assert_eq!(r.schema, SCHEMA);
    }

    #[test]
    fn bidir_reports_each_direction() {
        let spec = TestSpec {
            streams: 1,
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        let (a, b) = (Flow::ClientToServer, Flow::ServerToClient);
        let client = EndpointReport {
            streams: vec![
                sr(0, a, Role::Sender, 500, 0, 0.0, 1.0),
                sr(1, b, Role::Receiver, 700, 0, 0.0, 1.0),
            ],
            ..Default::default()
        };
        let server = EndpointReport {
            streams: vec![
                sr(0, a, Role::Receiver, 500, 0, 0.0, 1.0),
                sr(1, b, Role::Sender, 700, 0, 0.0, 1.0),
            ],
            ..Default::default()
        };
        let cs = samples(&[1], &[700], 0);
        let ss = samples(&[0], &[500], 0);
        let r = assemble(&Inputs {
            spec: &spec,
            context: RunContext::default(),
            client: &client,
            server: &server,
            client_samples: &cs,
            server_samples: &ss,
        });
        assert_eq!(r.directions.len(), 2);
        assert_eq!(r.directions[0].summary.bytes_received, 500);
        assert_eq!(r.directions[1].summary.bytes_received, 700);
        assert_eq!(r.summary.bytes_received, 1200);
        assert_eq!(r.intervals.len(), 1);
        assert_eq!(r.intervals[0].bytes, 1200);
        assert_eq!(r.streams.len(), 2);
    }
}

#[cfg(test)]
mod window_tests {
    use super::tests::sr;
    use super::*;

    /// One stream of `rate_bps`, its sender receive-window limited `rwnd_pct` of the time with
    /// `window` bytes of window, the path's minimum RTT `min_ms` and its mean `avg_ms`.
    fn stream(rate_bps: f64, rwnd_pct: f64, window: u64, min_ms: u32, avg_ms: u32) -> StreamResult {
        let spec = TestSpec::default();
        let tx = sr(0, Flow::ClientToServer, Role::Sender, 1000, 0, 0.0, 10.0);
        let rx = sr(0, Flow::ClientToServer, Role::Receiver, 1000, 0, 0.0, 10.0);
        let mut s = stream_result(&spec, Flow::ClientToServer, 0, Some(&tx), Some(&rx), 10.0);
        s.throughput_bps = rate_bps;
        s.limited = Some(LimitedShares {
            rwnd_limited_pct: rwnd_pct,
            sndbuf_limited_pct: 0.0,
            busy_pct: 100.0,
        });
        s.tcp = Some(crate::endpoint::TcpStats {
            snd_wnd_bytes: window,
            rtt_min_us: min_ms * 1000,
            rtt_avg_us: avg_ms * 1000,
            ..Default::default()
        });
        s
    }

    #[test]
    fn a_small_window_that_explains_the_rate_is_named() {
        // 64 KiB over 10 ms is 52 Mbit/s: a 50 Mbit/s test was held there.
        let w = window_limited(&[stream(50e6, 90.0, 65536, 10, 11)], Some(65536)).unwrap();
        assert!(
            w.contains("minimum RTT of 10.0 ms") && w.contains("52.4 Mbit/s"),
            "{w}"
        );
        assert!(w.contains("autotuning off"), "{w}");
    }

    #[test]
    fn a_full_path_with_a_standing_queue_is_not_blamed_on_the_window() {
        // A 1 Gbit/s bottleneck at 100 ms with 35 ms of queue: the window grew to cover the queue
        // (16.9 MB), and the senders still saw it as their limit most of the time. Over the mean RTT
        // it "allows" 1.0 Gbit/s, the old rule's false verdict; over the minimum, 1.35 Gbit/s, which
        // did not hold the 953 Mbit/s measured back.
        assert_eq!(
            window_limited(&[stream(953e6, 80.0, 16_875_000, 100, 135)], None),
            None
        );
        // Reordering or loss: a window bound 1.6 times the rate is not the limit.
        assert_eq!(
            window_limited(&[stream(100e6, 70.0, 2_000_000, 100, 100)], None),
            None
        );
        // Not limited most of the time: nothing to say.
        assert_eq!(window_limited(&[stream(50e6, 20.0, 65536, 10, 10)], None), None);
    }
}
