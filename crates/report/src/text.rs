//! The human report printed at the end of `run` and `demo`: an NTttcp-style per-stream table, then
//! totals per direction (with peak and lowest interval next to the average), windows, CPU, TCP limits
//! and interface counters for both ends, and any warnings.

use landspeed_core::emulator::EmulatorCounts;
use landspeed_core::result::{EndpointSummary, RunResult, StreamResult, Summary};
use landspeed_core::units::{BitRate, Bytes};
use std::fmt::Write;

fn mbit(bps: f64) -> String {
    format!("{:.3}", bps / 1e6)
}

fn rtt(us: u32) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

fn stream_rows(out: &mut String, streams: &[StreamResult]) {
    let _ = writeln!(
        out,
        "{:>6} {:<15} {:>12} {:>9} {:>18} {:>14} {:>11} {:>10} {:>6} {:>23} {:>10}",
        "Stream",
        "Direction",
        "Bytes",
        "Time(s)",
        "Throughput(Mbit/s)",
        "Throughput(KB/s)",
        "Buffers",
        "Buffers/s",
        "Retr",
        "RTT min/avg/max (ms)",
        "Cwnd"
    );
    for s in streams {
        let (retr, rtts, cwnd) = match &s.tcp {
            Some(t) => (
                t.retransmits.to_string(),
                format!(
                    "{}/{}/{}",
                    rtt(t.rtt_min_us),
                    rtt(t.rtt_avg_us),
                    rtt(t.rtt_max_us)
                ),
                Bytes(t.cwnd_bytes).to_string(),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{:>6} {:<15} {:>12} {:>9.3} {:>18} {:>14.1} {:>11.1} {:>10.1} {:>6} {:>23} {:>10}",
            s.id,
            s.flow.label(),
            s.bytes_received,
            s.duration_s,
            mbit(s.throughput_bps),
            s.kbytes_per_s,
            s.buffers,
            s.buffers_per_s,
            retr,
            rtts,
            cwnd
        );
    }
}

/// Where UDP's lost datagrams were lost: in the receiving host (the gaps that came with a drop by its
/// full socket buffer), in the sending host (after a send that succeeded), or on the path (the rest, and
/// the emulator's own drops when it was one), with what to change when a host dropped them.
fn udp_loss_split(u: &landspeed_core::udp::UdpStats, emulator: Option<&EmulatorCounts>) -> Option<String> {
    let host = u.lost_in_receiver.filter(|_| u.datagrams_lost > 0)?;
    let sender = u.lost_in_sender.unwrap_or(0);
    let path = u.datagrams_lost - host - sender;
    let mut line = format!(
        "  loss       in the receiving host (socket buffer full, {} buffers dropped): {host}; ",
        u.socket_drops.unwrap_or(0)
    );
    line += &match u.lost_in_sender {
        Some(n) => {
            format!("in the sending host (after send: queue or device full): {n}; on the path: {path}")
        }
        None => format!("before it (on the path, or in the sending host after send): {path}"),
    };
    if let Some(e) = emulator {
        line += &format!(
            " (the emulator dropped {}: {} by its loss model, {} by its full queue{})",
            e.dropped(),
            e.path.dropped_loss,
            e.path.dropped_queue + e.dropped_overflow,
            match e.path.dropped_aqm {
                0 => String::new(),
                n => format!(", {n} by its queue discipline"),
            }
        );
    }
    // With the socket's drops and the datagrams sent known, the result's warning says this with
    // the rates (core::assemble::receiver_behind); the line gives the advice only when it cannot.
    let warned = u.socket_drops.unwrap_or(0) > 0 && u.datagrams_sent.is_some_and(|n| n > 0);
    if host > 0 && !warned {
        line += "\n             the receiver could not keep up: a larger receive buffer (-w, within \
                 net.core.rmem_max), a lower rate (-b), larger datagrams (-l) or more streams (-P, a \
                 receiving thread each)";
    }
    if host > 0 && emulator.is_some() {
        line += "\n             the emulator shares this machine's CPUs and its real-time \
                 forwarder runs first: `wan up --no-realtime` leaves the hosts more";
    }
    if sender > 0 {
        line += "\n             the sending host dropped datagrams after sending them: a lower rate \
                 (-b) or a longer transmit queue (ip link set DEV txqueuelen N)";
    }
    Some(line)
}

/// What the emulator did to one direction's packets, when the test crossed one.
fn emulator_line(out: &mut String, e: &EmulatorCounts) {
    let _ = writeln!(
        out,
        "  emulator   {} packets in, {} delivered; dropped {} by its loss model, {} by its full queue{}; \
         {} duplicated, {} reordered, {} corrupted{}",
        e.packets_in,
        e.packets_forwarded,
        e.path.dropped_loss,
        e.path.dropped_queue,
        match (e.dropped_overflow, e.path.dropped_outage) {
            (0, 0) => String::new(),
            (o, 0) => format!(", {o} by its delay-line bound"),
            (0, d) => format!(", {d} by outages"),
            (o, d) => format!(", {o} by its delay-line bound, {d} by outages"),
        },
        e.path.duplicated,
        e.path.reordered,
        e.corrupted,
        queue_text(e)
    );
}

/// The bottleneck's queue as the emulator timed it, and its discipline's drops and marks (empty when
/// nothing crossed a rate-limited bottleneck).
fn queue_text(e: &EmulatorCounts) -> String {
    let mut s = String::new();
    if let Some(ms) = e.mean_sojourn_ms {
        s += &format!(
            "; queueing {ms:.2} ms mean over {} packets",
            e.path.sojourn_packets
        );
    }
    if e.path.dropped_aqm + e.path.marked_ce > 0 {
        s += &format!(
            "; its discipline dropped {} and marked {} CE",
            e.path.dropped_aqm, e.path.marked_ce
        );
    }
    s
}

/// One direction's totals (or both's). `exact`: the two ends' counts must agree (not so for a foreign
/// server's own report, as an iperf3 or ndt7 server's).
fn totals(
    out: &mut String,
    label: &str,
    s: &Summary,
    length: u64,
    emulator: Option<&EmulatorCounts>,
    exact: bool,
) {
    let _ = writeln!(out, "\nTotals, {label}:");
    if let Some(u) = &s.udp {
        udp_totals(out, u, emulator);
    }
    if let Some(t) = s.trips.as_ref().filter(|_| s.udp.is_none()) {
        let _ = writeln!(
            out,
            "  trips      one-way {:.3} ms mean, {:.3} min, {:.3} max, {:.3} stddev over {} bursts (arrival less the sender's stamp: the clocks' offset is in it)",
            t.mean_ms, t.min_ms, t.max_ms, t.stddev_ms, t.datagrams
        );
    }
    if let Some(e) = emulator {
        emulator_line(out, e);
    }
    let agree = if s.bytes_sent == s.bytes_received {
        "every byte sent was received"
    } else if !exact {
        "the server's count is its own report (not expected to match to the byte)"
    } else {
        "SENT AND RECEIVED DIFFER"
    };
    let _ = writeln!(
        out,
        "  bytes      sent {} ({}), received {} ({}): {agree}",
        s.bytes_sent,
        Bytes(s.bytes_sent),
        s.bytes_received,
        Bytes(s.bytes_received)
    );
    if s.omitted_bytes > 0 {
        let _ = writeln!(
            out,
            "  warm-up    {} left out of every figure (-O)",
            Bytes(s.omitted_bytes)
        );
    }
    let _ = writeln!(
        out,
        "  time       {:.3} s at the receiver (first to last byte); sender wrote for {:.3} s",
        s.duration_s, s.sender_elapsed_s
    );
    let peak = match (s.peak_interval_bps, s.lowest_interval_bps) {
        (Some(p), Some(l)) => format!("; intervals peak {}, lowest {}", BitRate(p), BitRate(l)),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "  throughput {} = {:.1} KB/s{peak}",
        BitRate(s.throughput_bps),
        s.kbytes_per_s
    );
    let _ = writeln!(
        out,
        "  buffers    {:.1} of {} ({:.1}/s); retransmits {}",
        s.buffers_received,
        Bytes(length),
        s.buffers_per_s,
        s.retransmits
    );
}

/// A UDP direction's datagram lines: the counts, where the losses were, ECN marks.
fn udp_totals(out: &mut String, u: &landspeed_core::udp::UdpStats, emulator: Option<&EmulatorCounts>) {
    let _ = writeln!(
        out,
        "  udp        datagrams sent {}, received {}, lost {} ({:.3}%), out of order {}, duplicates {}, jitter {:.3} ms",
        u.datagrams_sent.map_or("?".to_string(), |n| n.to_string()),
        u.datagrams_received,
        u.datagrams_lost,
        u.loss_pct,
        u.out_of_order,
        u.duplicates,
        u.jitter_ms
    );
    if let Some(line) = udp_loss_split(u, emulator) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(ce) = u.ce_marked.filter(|&n| n > 0) {
        let _ = writeln!(
            out,
            "  ecn        {ce} datagrams arrived marked Congestion Experienced (a queue signalled instead of dropping)"
        );
    }
}

/// One end's figures; what a foreign end (iperf3, an ndt7 server) does not report is said to be
/// missing rather than printed as zeros.
/// The closing block of a report whose figures are its own (request/response, multicast): both
/// ends, then every warning.
pub(crate) fn ends_and_warnings(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "\nEnds:");
    endpoint(out, &r.local);
    endpoint(out, &r.remote);
    for w in &r.warnings {
        let _ = writeln!(out, "WARNING: {w}");
    }
}

pub(crate) fn endpoint(out: &mut String, e: &EndpointSummary) {
    let _ = writeln!(out, "{}", cpu_line(e));
    let w = &e.window;
    let req = w
        .requested_bytes
        .map_or("default (autotuning)".to_string(), |r| Bytes(r).to_string());
    let granted = if w.granted_snd_bytes == 0 && w.granted_rcv_bytes == 0 {
        "the granted sizes not reported".to_string()
    } else {
        format!(
            "kernel granted SO_SNDBUF {} SO_RCVBUF {}",
            Bytes(w.granted_snd_bytes),
            Bytes(w.granted_rcv_bytes)
        )
    };
    let _ = writeln!(out, "  {:<7} window: requested {req}; {granted}", e.role);
    if let Some(i) = &e.interface {
        let _ = writeln!(
            out,
            "  {:<7} interface {}: {} packets out, {} in ({:.0}/s out, {:.0}/s in); interrupts {:.0}/s",
            e.role,
            i.name,
            i.tx_packets,
            i.rx_packets,
            i.tx_packets_per_s,
            i.rx_packets_per_s,
            i.interrupts_per_s
        );
    }
    if let Some(w) = &e.wire {
        let _ = writeln!(out, "{}", wire_line(&e.role, w));
    }
    if let Some(line) = kernel_counters(e) {
        let _ = writeln!(out, "{line}");
    }
    if e.host.withheld {
        let _ = writeln!(
            out,
            "  {:<7} {} threads; host details withheld (the server shares them with clients that prove a key)",
            e.role, e.threads
        );
    } else if e.host.hostname.is_empty() {
        let _ = writeln!(out, "  {:<7} {}: reported no host", e.role, software(e));
    } else {
        let _ = writeln!(
            out,
            "  {:<7} {} threads on {}, {}",
            e.role, e.threads, e.host.hostname, e.host.kernel
        );
    }
    if let Some(m) = &e.memory {
        let _ = writeln!(
            out,
            "  {:<7} memory: peak resident {} (at the end {})",
            e.role,
            Bytes(m.peak_rss_bytes),
            Bytes(m.rss_bytes)
        );
    }
}

/// The CPU line: the machine's share only where the end read its CPUs.
fn cpu_line(e: &EndpointSummary) -> String {
    let c = &e.cpu;
    let cyc = c.cycles_per_byte.map_or("-".to_string(), |x| format!("{x:.2}"));
    let machine = if c.cpus == 0 {
        "machine not reported".to_string()
    } else {
        format!(
            "machine busy {:.1}%, softirq {:.1}% of {} CPUs",
            c.system_busy_pct, c.softirq_pct, c.cpus
        )
    };
    if c.cpus == 0 && c.user_pct == 0.0 && c.system_pct == 0.0 {
        return format!("  {:<7} CPU: not reported by {}", e.role, software(e));
    }
    format!(
        "  {:<7} CPU: process user {:.1}% system {:.1}% (of one CPU); {machine}; {:.3} CPU-s/GB; {cyc} cycles/byte",
        e.role, c.user_pct, c.system_pct, c.cpu_s_per_gb
    )
}

fn software(e: &EndpointSummary) -> &str {
    if e.software.is_empty() {
        "the peer"
    } else {
        &e.software
    }
}

/// The interface's bytes against the application's, and RFC 6349's TCP efficiency.
fn wire_line(role: &str, w: &landspeed_core::result::WireSummary) -> String {
    let mut line = format!(
        "  {role:<7} wire: {} out for {} of data, {} in for {}",
        Bytes(w.wire_bytes_out),
        Bytes(w.app_bytes_out),
        Bytes(w.wire_bytes_in),
        Bytes(w.app_bytes_in)
    );
    if let Some(p) = w.overhead_bytes_per_packet {
        line += &format!(" ({p:.0} B per packet sent beyond the data)");
    }
    if let Some(e) = w.tcp_efficiency_pct {
        line += &format!("; TCP efficiency (RFC 6349, host-wide segments) {e:.3}%");
    }
    match w.shared.as_deref() {
        Some("loopback") => {
            line += "; loopback: both ends count on this interface, so these are not one end's"
        }
        Some(other) => {
            line += &format!("; {other} shared the interface: these counts are not this test's alone")
        }
        None => {}
    }
    line
}

/// The kernel's own counters that moved during the test (host-wide), with TCP's retransmissions set
/// beside what this end's sockets counted and a word on why they may differ.
fn kernel_counters(e: &EndpointSummary) -> Option<String> {
    let moved: Vec<String> = e
        .kernel_counters
        .iter()
        .filter(|(name, v)| **v > 0 && !["Tcp.OutSegs", "Tcp.InSegs"].contains(&name.as_str()))
        .filter(|(name, _)| !name.ends_with("Datagrams"))
        .map(|(name, v)| format!("{name} {v}"))
        .collect();
    let retrans = e.kernel_counters.get("Tcp.RetransSegs").copied();
    let mut line = format!("  {:<7} kernel counters (host-wide, /proc/net): ", e.role);
    line += &if moved.is_empty() {
        "no drops, errors or retransmissions".to_string()
    } else {
        moved.join(", ")
    };
    if let (Some(k), Some(own)) = (retrans, e.tcp_info_retransmits) {
        line += &match k.cmp(&own) {
            std::cmp::Ordering::Equal => format!("; retransmissions agree with TCP_INFO ({own})"),
            std::cmp::Ordering::Greater => format!(
                "; TCP_INFO counted {own} retransmissions on this test's sockets: the other {} were other \
                 connections on this host (or both ends share it)",
                k - own
            ),
            std::cmp::Ordering::Less => format!(
                "; TCP_INFO counted {own} retransmissions, more than the host's {k}: the counters are \
                 another network namespace's"
            ),
        };
    }
    (!e.kernel_counters.is_empty()).then_some(line)
}

/// A disk-to-disk test: the file's verdict, then the three rates side by side.
fn file(out: &mut String, f: &landspeed_core::files::FileTransferResult) {
    use landspeed_core::units::BitRate;
    let _ = writeln!(
        out,
        "\nFile: {} ({} bytes) {} -> {}\n  {}: SHA-256 sender {}\n{:>width$}receiver {}",
        f.name,
        f.size_bytes,
        f.sender_path,
        f.receiver_path,
        if f.verified { "intact" } else { "NOT INTACT" },
        f.sha256_sender_hex,
        "",
        f.sha256_receiver_hex,
        width = if f.verified { 21 } else { 25 }
    );
    let _ = writeln!(
        out,
        "  rates: sender disk read {}, network {}, receiver disk write (to fsync) {}, receiver read-back {}\n  the slowest: {}",
        BitRate(f.sender_read_bps),
        BitRate(f.network_bps),
        BitRate(f.receiver_write_bps),
        BitRate(f.receiver_read_bps),
        f.limited_by
    );
}

fn payload(out: &mut String, r: &RunResult) {
    if let Some(f) = &r.file {
        return file(out, f);
    }
    let p = &r.payload;
    if p.verified {
        let _ = writeln!(
            out,
            "\nPayload: {} bytes verified, {} corrupt block(s) ({} pattern, key {})",
            p.bytes_verified, p.corrupt_blocks, p.pattern, p.key_hex
        );
    } else {
        // A server's record of an ndt7 download: the receiver is the client, which this end cannot see.
        let served_download = r
            .ndt7
            .as_ref()
            .is_some_and(|n| n.view == "server" && n.subtest == "download");
        let rx = match r.config.spec.rx {
            _ if served_download => "what the client did with the data is its own result's to say",
            landspeed_core::config::RxMode::Discard => "receivers discarded the data unread (MSG_TRUNC)",
            landspeed_core::config::RxMode::Copy => "receivers copied the data but did not check it",
        };
        let why = p.unverified_because.as_deref().unwrap_or("--no-verify");
        let _ = writeln!(
            out,
            "\nPayload: NOT verified ({why}): {rx} ({} pattern)",
            p.pattern
        );
    }
    if let Some(c) = &p.first_corruption {
        let _ = writeln!(
            out,
            "  first corruption: stream {} byte offset {}\n    expected {}\n    received {}",
            c.stream, c.offset, c.expected_hex, c.received_hex
        );
    }
    let _ = writeln!(
        out,
        "Different data in every packet: {} ({})",
        if p.different_data_every_packet {
            "yes"
        } else {
            "NO"
        },
        p.evidence
    );
}

fn ms(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

/// `run --latency`: idle and loaded RTT side by side.
fn latency(out: &mut String, l: &landspeed_core::path::LatencyReport) {
    let _ = writeln!(
        out,
        "\nLatency (UDP echo, {} probes/s, {} B): median / p90 / p99 / max, probes lost",
        l.probes_per_s, l.probe_bytes
    );
    for (name, s) in [("idle", &l.idle), ("loaded", &l.loaded)] {
        let _ = writeln!(
            out,
            "  {name:<7} {} / {} / {} / {} ms (min {} ms), {} of {} lost",
            ms(s.median_ms),
            ms(s.p90_ms),
            ms(s.p99_ms),
            ms(s.max_ms),
            ms(s.min_ms),
            s.sent - s.received,
            s.sent
        );
    }
    let _ = writeln!(
        out,
        "  the transfer added {} ms (median); RFC 6349 buffer delay {}%",
        ms(l.added_delay_ms),
        l.buffer_delay_pct.map_or("-".into(), |v| format!("{v:.1}"))
    );
    if let Some(o) = &l.one_way {
        one_way(out, o);
    }
}

/// `run --latency`'s one-way delays: each direction's queueing (which needs no clock offset), then the
/// floors where the probes bound the offset.
fn one_way(out: &mut String, o: &landspeed_core::path::OneWayReport) {
    let q = |d: &landspeed_core::path::DirectionDelay| {
        let s = &d.queueing;
        format!("{} / {} / {}", ms(s.median_ms), ms(s.p99_ms), ms(s.max_ms))
    };
    let _ = writeln!(
        out,
        "  one way, queueing over each direction's floor (median / p99 / max): to server {} ms idle, {} ms loaded; to client {} ms idle, {} ms loaded",
        q(&o.idle_to_server),
        q(&o.loaded_to_server),
        q(&o.idle_to_client),
        q(&o.loaded_to_client)
    );
    out.push_str(&crate::path_text::floors_line(
        o.idle_to_server.floor_ms,
        o.idle_to_client.floor_ms,
        o.clock.as_ref(),
        "the probes contradict any one clock offset (a clock stepped or drifted during the run)",
    ));
}

/// `run --path`: what was measured of the path before the test, one line per measurement.
fn path(out: &mut String, p: &landspeed_core::path::PathReport) {
    let _ = writeln!(
        out,
        "\nPath to {} ({}), measured before the test:",
        p.host, p.address
    );
    for r in [&p.rtt, &p.tcp_connect].into_iter().flatten() {
        let s = &r.summary;
        let _ = writeln!(
            out,
            "  RTT ({}): min {} / median {} / p99 {} / max {} ms, {} of {} lost",
            r.method,
            ms(s.min_ms),
            ms(s.median_ms),
            ms(s.p99_ms),
            ms(s.max_ms),
            s.sent - s.received,
            s.sent
        );
    }
    if let Some(t) = &p.trace {
        let hops: Vec<String> = t
            .hops
            .iter()
            .map(|h| match (&h.address, &h.name) {
                (Some(a), Some(n)) => format!("{n} ({a})"),
                (Some(a), None) => a.clone(),
                _ => "*".into(),
            })
            .collect();
        let _ = writeln!(
            out,
            "  route, {} hop(s){}: {}",
            t.hops.len(),
            if t.reached { "" } else { ", target NOT reached" },
            hops.join(" > ")
        );
    }
    if let Some(m) = &p.pmtu {
        let at = match (&m.bottleneck, m.bottleneck_mtu) {
            (Some(b), Some(bm)) => format!("; bigger packets stop at {b} (next link {bm})"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  path MTU {} bytes (local interface {}){at}",
            m.path_mtu.map_or("unknown".into(), |v| v.to_string()),
            m.local_mtu
        );
    }
    if let Some(c) = &p.capacity {
        let _ = writeln!(
            out,
            "  bottleneck capacity {} (10th-90th percentile {} - {}, {} trains)",
            c.estimate_bps
                .map_or("unknown".into(), |v| BitRate(v).to_string()),
            c.p10_bps.map_or("-".into(), |v| BitRate(v).to_string()),
            c.p90_bps.map_or("-".into(), |v| BitRate(v).to_string()),
            c.trains_used
        );
    }
}

/// An ndt7 subtest's line: whose record it is, the client's metadata, the measurements kept.
fn ndt7(out: &mut String, r: &RunResult) {
    let Some(n) = &r.ndt7 else { return };
    let view = match n.view.as_str() {
        "server" => "the server's record",
        _ => "the client's result",
    };
    let metadata: Vec<String> = n
        .metadata
        .iter()
        .map(|(k, v)| format!("{k}={}", v.chars().take(40).collect::<String>()))
        .collect();
    let _ = writeln!(
        out,
        "ndt7 {} subtest, {view}; client metadata: {}; {} server measurement(s) kept{}",
        n.subtest,
        if metadata.is_empty() {
            "none".into()
        } else {
            metadata.join(" ")
        },
        n.server_measurements.len(),
        match n.measurements_not_kept {
            0 => String::new(),
            more => format!(" ({more} more not kept)"),
        }
    );
}

/// The full human-readable report.
pub fn render(r: &RunResult) -> String {
    if let Some(t) = &r.transactions {
        return crate::transactions_text::render(r, t);
    }
    if let Some(m) = &r.multicast {
        return crate::multicast_text::render(r, m);
    }
    let mut out = String::new();
    let cfg = &r.config;
    let _ = writeln!(
        out,
        "\n{} test, {} -> {}, {} stream(s) per direction, {} per call{}",
        cfg.spec.transport_name().to_uppercase(),
        cfg.local_address,
        cfg.remote_address,
        cfg.spec.streams,
        Bytes(cfg.spec.length_bytes),
        if r.interrupted { ", INTERRUPTED" } else { "" }
    );
    ndt7(&mut out, r);
    stream_rows(&mut out, &r.streams);
    tcp_limits(&mut out, r);
    mptcp(&mut out, r);
    quic(&mut out, r);
    let emulator = |f| r.emulator.as_ref().map(|e| *e.carrying(f));
    let exact = r.evidence().exact_count.is_some() || r.summary.udp.is_some();
    for d in &r.directions {
        totals(
            &mut out,
            d.flow.label(),
            &d.summary,
            cfg.spec.length_bytes,
            emulator(d.flow).as_ref(),
            exact,
        );
        for line in stall_lines(r, d) {
            let _ = writeln!(out, "{line}");
        }
    }
    if r.directions.len() > 1 {
        totals(
            &mut out,
            "both directions",
            &r.summary,
            cfg.spec.length_bytes,
            None,
            exact,
        );
    }
    emulator_path(&mut out, r);
    if let Some(f) = &r.frames {
        out.push('\n');
        for line in crate::frames_text::lines(f) {
            let _ = writeln!(out, "{line}");
        }
    }
    if let Some(l) = &r.latency {
        latency(&mut out, l);
    }
    if let Some(p) = &r.path {
        path(&mut out, p);
    }
    let _ = writeln!(out, "\nEnds:");
    endpoint(&mut out, &r.local);
    endpoint(&mut out, &r.remote);
    payload(&mut out, r);
    data_path(&mut out, r);
    if let Some(line) = measured_vs_predicted(r) {
        let _ = writeln!(out, "{line}");
    }
    for w in &r.warnings {
        let _ = writeln!(out, "WARNING: {w}");
    }
    for line in limited_by(r) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The last lines: what held each direction's rate back (`core::limit`), its confidence and fix.
fn limited_by(r: &RunResult) -> Vec<String> {
    let many = r.directions.len() > 1;
    r.directions
        .iter()
        .filter(|d| !d.limits.is_empty())
        .map(|d| {
            let said: Vec<String> = d
                .limits
                .iter()
                .map(|l| {
                    let sure = match l.confidence {
                        landspeed_core::limit::Confidence::High => "",
                        landspeed_core::limit::Confidence::Medium => " (likely)",
                        landspeed_core::limit::Confidence::Low => " (possibly)",
                    };
                    let fix = l.fix.as_ref().map(|f| format!("; fix: {f}")).unwrap_or_default();
                    let part = l
                        .during_s
                        .map(|(a, b)| format!("from {a:.1} s to {b:.1} s, "))
                        .unwrap_or_default();
                    format!("{part}{}{sure}{fix}", l.why)
                })
                .collect();
            let dir = if many {
                format!(" ({})", d.flow.label())
            } else {
                String::new()
            };
            format!("Limited by{dir}: {}", said.join("; and "))
        })
        .collect()
}

/// One line per stall of direction `d`: how long no data arrived and from when, with what the
/// emulator did then (an outage) and, for TCP, the retransmission timeouts the sending host counted.
fn stall_lines(r: &RunResult, d: &landspeed_core::result::DirectionResult) -> Vec<String> {
    let sender = match d.flow {
        landspeed_core::config::Flow::ClientToServer => &r.local,
        landspeed_core::config::Flow::ServerToClient => &r.remote,
    };
    let timeouts = sender.kernel_counters.get("TcpExt.TCPTimeouts").copied();
    let outages: Vec<&landspeed_core::emulator::EmulatorChange> = r
        .emulator
        .iter()
        .flat_map(|e| &e.changes)
        .filter(|c| c.down_s.is_some())
        .collect();
    d.stalls
        .iter()
        .map(|s| {
            let to = s.from_s + s.length_s;
            let mut line = format!(
                "  stalled    no data for {:.1} s from {:.1} s{}",
                s.length_s,
                s.from_s,
                if s.to_end { " to the end of the test" } else { "" }
            );
            let cause = outages.iter().find(|c| {
                let end = c.at_s + c.down_s.unwrap_or(0.0);
                c.at_s < to + 0.2 && end > s.from_s - 0.2
            });
            if let Some(c) = cause {
                line += &format!(
                    "; the emulator's outage from {:.1} s lasted {:.1} s",
                    c.at_s,
                    c.down_s.unwrap_or(0.0)
                );
            }
            if let (Some(t), true) = (timeouts, r.config.spec.transport_name() == "tcp") {
                line += &format!(
                    "; the sending host counted {t} retransmission timeouts (TcpExt.TCPTimeouts, host-wide)"
                );
            }
            line
        })
        .collect()
}

/// The emulator the test crossed: its name, the changes to the path during the test, and when the
/// path changed, the test's figures per path.
fn emulator_path(out: &mut String, r: &RunResult) {
    let Some(e) = &r.emulator else { return };
    let _ = writeln!(
        out,
        "\nPath: landspeed WAN emulator '{}' (the client in its host {}; `landspeed wan status {}`)",
        e.name, e.client_host, e.name
    );
    for c in &e.changes {
        let way = match c.direction.as_str() {
            "both" => "both directions".to_string(),
            d => d.replace('_', " "),
        };
        let _ = writeln!(out, "  changed at {:.2} s: {}, {way}", c.at_s, c.change);
    }
    let parts = landspeed_core::emulated::segments(r);
    if parts.len() > 1 {
        let each: Vec<String> = parts
            .iter()
            .map(|p| {
                let rtt = p.rtt_ms.map(|m| format!(", RTT {m:.1} ms")).unwrap_or_default();
                format!(
                    "{:.1}-{:.1} s {}{rtt}",
                    p.from_s,
                    p.to_s,
                    BitRate(p.throughput_bps)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  per path: {} (whole intervals only; the test's means above mix the paths)",
            each.join(" | ")
        );
    }
}

/// Per stream, the share of the sender's time each TCP limit held and its TCP_INFO figures.
fn tcp_limits(out: &mut String, r: &RunResult) {
    if !r.streams.iter().any(|s| s.limited.is_some()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nTCP limits (share of the sender's test time, from TCP_INFO):"
    );
    for s in &r.streams {
        if let (Some(l), Some(t)) = (&s.limited, &s.tcp) {
            let _ = writeln!(
                out,
                "  stream {:>4}: receive-window limited {:.1}%, send-buffer limited {:.1}%, busy {:.1}%; peer window {}; MSS {} PMTU {}; segs out {} in {}; delivery rate {}{}{}",
                s.id,
                l.rwnd_limited_pct,
                l.sndbuf_limited_pct,
                l.busy_pct,
                Bytes(t.snd_wnd_bytes),
                t.mss_bytes,
                t.pmtu_bytes,
                t.segs_out,
                t.segs_in,
                BitRate(t.delivery_rate_bps),
                t.congestion.as_deref().map(|c| format!("; {c}")).unwrap_or_default(),
                ecn_text(t)
            );
        }
        if r.streams.len() > 16 && s.id >= 15 {
            let _ = writeln!(out, "  ... ({} more streams in --json)", r.streams.len() - 16);
            break;
        }
    }
}

/// A stream's ECN: negotiated or not, and the CE-marked segments its sender saw delivered.
fn ecn_text(t: &landspeed_core::endpoint::TcpStats) -> String {
    match (t.ecn, t.delivered_ce) {
        (Some(true), Some(ce)) => format!("; ECN, {ce} segments delivered CE-marked"),
        (Some(true), None) => "; ECN".into(),
        _ => String::new(),
    }
}

/// QUIC: each connection's figures as its stack kept them (the sender's end, else the receiver's).
fn quic(out: &mut String, r: &RunResult) {
    let mut seen = std::collections::BTreeMap::new();
    for s in &r.streams {
        if let Some(q) = &s.quic {
            seen.entry(q.connection).or_insert(q);
        }
    }
    if seen.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nQUIC (quinn; the sending end's view of each connection):");
    for (c, q) in seen.iter().take(16) {
        let _ = writeln!(
            out,
            "  connection {c:>2}: {}, RTT {} ms, cwnd {}, {} congestion events, {} of {} packets lost ({}), path MTU {} B; {} datagrams sent in {} calls, {} received",
            q.congestion,
            rtt(u32::try_from(q.rtt_us).unwrap_or(u32::MAX)),
            Bytes(q.cwnd_bytes),
            q.congestion_events,
            q.lost_packets,
            q.sent_packets,
            Bytes(q.lost_bytes),
            q.path_mtu_bytes,
            q.datagrams_sent,
            q.send_calls,
            q.datagrams_received
        );
    }
}

/// MPTCP: each stream's subflows and the bytes each carried (the sender's view, else the receiver's),
/// or that it fell back to plain TCP.
fn mptcp(out: &mut String, r: &RunResult) {
    if !r.config.spec.mptcp {
        return;
    }
    let _ = writeln!(out, "\nMPTCP (subflows opened by the kernel's path manager):");
    for s in r.streams.iter().take(16) {
        let Some(m) = s.mptcp() else {
            let _ = writeln!(out, "  stream {:>4}: fell back to plain TCP", s.id);
            continue;
        };
        let total: u64 = m.paths.iter().map(|p| p.bytes_acked.max(p.bytes_received)).sum();
        let paths: Vec<String> = m
            .paths
            .iter()
            .map(|p| {
                let carried = p.bytes_acked.max(p.bytes_received);
                format!(
                    "{} -> {} {} ({:.1}%, RTT {} ms, {} retransmits)",
                    p.local.as_deref().unwrap_or("?"),
                    p.remote.as_deref().unwrap_or("?"),
                    Bytes(carried),
                    100.0 * carried as f64 / total.max(1) as f64,
                    rtt(p.rtt_us),
                    p.retransmits
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  stream {:>4}: {} {} (at most {} more allowed; addresses announced {}, accepted {}){}{}",
            s.id,
            m.subflows,
            if m.subflows == 1 { "subflow" } else { "subflows" },
            m.subflows_max,
            m.add_addr_signal,
            m.add_addr_accepted,
            if paths.is_empty() { "" } else { ": " },
            paths.join("; ")
        );
    }
}

/// The data path both ends used: send and receive modes, the engine, and zero-copy's figures.
fn data_path(out: &mut String, r: &RunResult) {
    let d = &r.data_path;
    let zc = d
        .zerocopy_copied_pct
        .map(|p| {
            format!(
                " ({} zerocopy sends, {p:.0}% copied by the kernel after all)",
                d.zerocopy_sends
            )
        })
        .unwrap_or_default();
    let _ = writeln!(out, "Data path: {} / {}{zc}; {}", d.tx, d.rx, d.engine);
    if let Some(t) = &d.tls {
        let _ = writeln!(
            out,
            "TLS: 1.3 {}; {} records of {} plaintext on average (+{} B each on the wire), sealed and opened by {}: the CPU figures above include the cryptography",
            t.suite,
            t.records,
            Bytes(t.mean_record_bytes.round() as u64),
            t.record_overhead_bytes,
            t.record_layer
        );
    }
    if let Some(a) = r
        .authentication
        .as_ref()
        .filter(|a| a.key.is_some() || a.data_encrypted)
    {
        let who = match a.server.as_str() {
            "key" => "server authenticated by key",
            "pinned_certificate" => "server authenticated by pinned certificate",
            _ => "server not authenticated",
        };
        let _ = writeln!(out, "Authentication: {who}: {}", a.note);
    }
}

/// "Measured vs predicted" from the run's own TCP_INFO: the window bound (streams × the receive window
/// the senders saw ÷ their mean RTT) against what was measured. Loss-based models (Mathis, PFTK) are
/// left to `landspeed model --run ID --loss P`: TCP_INFO counts retransmitted segments, and a burst of
/// them (slow start overshooting a queue) is one loss event to those models, not many.
fn measured_vs_predicted(r: &RunResult) -> Option<String> {
    let (mut input, _) = landspeed_model::from_run(r, None)?;
    input.loss = None;
    // A path that changed mid-test: the model is of the path as it was last, from its own intervals.
    let parts = landspeed_core::emulated::segments(r);
    let (measured, path) = match parts.last() {
        Some(last) if parts.len() > 1 => {
            input.rtt_s = last.rtt_ms? / 1e3;
            (
                last.throughput_bps,
                format!(" (the path as it was from {:.1} s)", last.from_s),
            )
        }
        _ => (r.summary.throughput_bps, String::new()),
    };
    let w = input.window_bytes?;
    let p = landspeed_model::predict(&input).ok()?;
    let bound = |n: &str| p.bounds.iter().find(|b| b.name == n).map(|b| b.total_bps);
    let window = bound("window")?;
    let link = bound("link");
    let lower = link.map_or(window, |l| l.min(window));
    Some(format!(
        "Model{path}: window bound {} stream(s) × {} / {:.2} ms mean RTT = {}{}; measured {} ({:.0}% of {}) — landspeed model --run ID [--loss P] for every bound",
        input.streams,
        Bytes(w),
        input.rtt_s * 1e3,
        BitRate(window),
        link.map_or(String::new(), |l| format!("; link goodput at the measured capacity {}", BitRate(l))),
        BitRate(measured),
        measured / lower * 100.0,
        if lower < window { "the link" } else { "the window bound" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(counters: &[(&str, u64)], own: Option<u64>) -> EndpointSummary {
        EndpointSummary {
            role: "client".into(),
            kernel_counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            tcp_info_retransmits: own,
            ..Default::default()
        }
    }

    #[test]
    fn an_unverified_run_says_why_and_a_silent_end_is_said_not_reported() {
        use landspeed_core::assemble::{provisional, RunContext};
        let spec = landspeed_core::config::TestSpec {
            verify: false,
            ..Default::default()
        };
        let mut ctx = RunContext::example("h", 1.0);
        ctx.protocol = "ndt7".into();
        ctx.foreign_peer = true;
        let mut r = provisional(&spec, ctx);
        r.remote.software = "ndt7 server".into();
        let t = render(&r);
        assert!(
            t.contains("Payload: NOT verified (the ndt7 peer is not landspeed: it neither sends nor checks landspeed's pattern)"),
            "{t}"
        );
        assert!(t.contains("  server  CPU: not reported by ndt7 server\n"), "{t}");
        assert!(t.contains("  server  ndt7 server: reported no host\n"), "{t}");
        assert!(!t.contains("of 0 CPUs"), "{t}");
        let own = provisional(&spec, RunContext::example("h", 1.0));
        assert!(render(&own).contains("Payload: NOT verified (--no-verify)"));
    }

    #[test]
    fn a_stall_names_its_span_the_outage_behind_it_and_the_timeouts_it_cost() {
        use landspeed_core::assemble::{provisional, RunContext};
        use landspeed_core::emulator::{EmulatorChange, EmulatorReport};
        let spec = landspeed_core::config::TestSpec::default();
        let mut r = provisional(&spec, RunContext::example("h", 1.0));
        r.directions[0].stalls = vec![landspeed_core::stall::Stall {
            from_s: 5.04,
            length_s: 3.43,
            to_end: false,
        }];
        r.local.kernel_counters = [("TcpExt.TCPTimeouts".to_string(), 4)].into();
        r.emulator = Some(EmulatorReport {
            name: "lfn".into(),
            client_host: "a".into(),
            to_server: EmulatorCounts::default(),
            to_client: EmulatorCounts::default(),
            changes: vec![EmulatorChange {
                at_s: 4.98,
                change: "down=3s".into(),
                direction: "both".into(),
                down_s: Some(3.0),
            }],
            settings: None,
        });
        let t = render(&r);
        assert!(
            t.contains("  stalled    no data for 3.4 s from 5.0 s; the emulator's outage from 5.0 s lasted 3.0 s; the sending host counted 4 retransmission timeouts (TcpExt.TCPTimeouts, host-wide)\n"),
            "{t}"
        );
        assert!(
            t.contains("  changed at 4.98 s: down=3s, both directions\n"),
            "{t}"
        );
    }

    #[test]
    fn the_loss_split_puts_each_loss_where_it_happened() {
        let u = landspeed_core::udp::UdpStats {
            datagrams_lost: 100,
            socket_drops: Some(3),
            lost_in_receiver: Some(30),
            lost_in_sender: Some(20),
            ..Default::default()
        };
        let e = EmulatorCounts {
            path: landspeed_core::emulator::PathCounts {
                dropped_loss: 45,
                dropped_queue: 5,
                ..Default::default()
            },
            ..Default::default()
        };
        let line = udp_loss_split(&u, Some(&e)).unwrap();
        assert!(
            line.contains("in the receiving host (socket buffer full, 3 buffers dropped): 30; in the sending host (after send: queue or device full): 20; on the path: 50 (the emulator dropped 50: 45 by its loss model, 5 by its full queue)"),
            "{line}"
        );
        assert!(
            line.contains("could not keep up") && line.contains("txqueuelen"),
            "{line}"
        );
        // Where the warning says it with the rates, the line does not say it again.
        let warned = landspeed_core::udp::UdpStats {
            datagrams_sent: Some(1000),
            ..u
        };
        let line = udp_loss_split(&warned, Some(&e)).unwrap();
        assert!(
            !line.contains("could not keep up") && line.contains("txqueuelen"),
            "{line}"
        );
        // Without the sender's counters the rest is "before it"; with no loss, no line.
        let old = landspeed_core::udp::UdpStats {
            lost_in_sender: None,
            lost_in_receiver: Some(0),
            ..u
        };
        let line = udp_loss_split(&old, None).unwrap();
        assert!(
            line.contains("before it (on the path, or in the sending host after send): 100"),
            "{line}"
        );
        assert!(!line.contains("keep up") && !line.contains("emulator"), "{line}");
        let none = landspeed_core::udp::UdpStats {
            datagrams_lost: 0,
            ..old
        };
        assert!(udp_loss_split(&none, None).is_none());
    }

    #[test]
    fn the_wire_line_says_when_the_interface_is_not_this_tests_alone() {
        let w = landspeed_core::result::WireSummary {
            app_bytes_out: 1 << 30,
            wire_bytes_out: (1 << 30) + 66 * 1000,
            overhead_bytes_per_packet: Some(66.0),
            tcp_efficiency_pct: Some(99.5),
            ..Default::default()
        };
        let alone = wire_line("client", &w);
        assert!(
            alone.contains("66 B per packet") && alone.contains("99.500%"),
            "{alone}"
        );
        assert!(
            !alone.contains("shared") && !alone.contains("loopback"),
            "{alone}"
        );
        let lo = landspeed_core::result::WireSummary {
            shared: Some("loopback".into()),
            ..w.clone()
        };
        assert!(wire_line("client", &lo).contains("loopback: both ends count"));
        let busy = landspeed_core::result::WireSummary {
            shared: Some("other traffic".into()),
            ..w
        };
        assert!(wire_line("client", &busy).contains("other traffic shared the interface"));
    }

    #[test]
    fn kernel_counters_say_whether_the_hosts_retransmissions_are_the_tests() {
        let line = |c: &[(&str, u64)], own| kernel_counters(&end(c, own)).unwrap();
        let agree = line(&[("Tcp.RetransSegs", 5), ("Tcp.OutSegs", 900)], Some(5));
        assert!(
            agree.contains("Tcp.RetransSegs 5") && agree.contains("agree with TCP_INFO (5)"),
            "{agree}"
        );
        assert!(!agree.contains("OutSegs"), "totals are left out: {agree}");
        let more = line(&[("Tcp.RetransSegs", 9)], Some(5));
        assert!(more.contains("the other 4 were other connections"), "{more}");
        let fewer = line(&[("Tcp.RetransSegs", 2)], Some(5));
        assert!(fewer.contains("another network namespace"), "{fewer}");
        let quiet = line(&[("Udp.InDatagrams", 7), ("Udp.RcvbufErrors", 0)], None);
        assert!(quiet.ends_with("no drops, errors or retransmissions"), "{quiet}");
        assert_eq!(
            kernel_counters(&end(&[], Some(1))),
            None,
            "an older peer sends none"
        );
    }
}
