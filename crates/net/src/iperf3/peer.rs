//! The far end of an iperf3 test as an `EndpointReport`, from the figures it sent in iperf3's results
//! exchange: what landspeed's client knows of an iperf3 server, and what landspeed's server knows of
//! an iperf3 client, so that either end can assemble one `RunResult` of the test.

use landspeed_core::endpoint::{CpuTimes, EndpointReport, HostInfo, Role, StreamReport, TcpStats};
use landspeed_iperf3::Results;

/// iperf3 resets its counters when the warm-up (`-O`) ends, so its figures cover only the measured
/// part, with times counted from there: they are put back on landspeed's time line, and the server is
/// credited with the warm-up bytes of this end's streams (counted at this end's warm-up boundary:
/// `counted` holds them as `omitted_bytes`, senders' and receivers' alike), which the result then
/// leaves out again, as for a landspeed server.
pub(crate) fn remote_report(
    theirs: &Results,
    local: &EndpointReport,
    counted: &[StreamReport],
    omit_s: f64,
    software: &str,
) -> EndpointReport {
    let wall = theirs.streams.iter().map(|s| s.end_time_s).fold(0.0, f64::max) + omit_s;
    let streams = local
        .streams
        .iter()
        .map(|l| {
            let t = theirs
                .streams
                .iter()
                .find(|s| s.id == landspeed_iperf3::stream_id(l.id));
            let warm = counted
                .iter()
                .find(|c| c.id == l.id)
                .filter(|_| omit_s > 0.0)
                .map_or(0, |c| c.omitted_bytes);
            remote_stream(l, t, (omit_s, warm), &theirs.congestion_used)
        })
        .collect();
    EndpointReport {
        file: None,
        software: software.into(),
        streams,
        cpu: CpuTimes {
            wall_s: wall,
            process_user_s: theirs.cpu_util_user / 100.0 * wall,
            process_system_s: theirs.cpu_util_system / 100.0 * wall,
            ..CpuTimes::default()
        },
        workers: vec![],
        host: HostInfo::default(),
        interface: None,
        kernel_counters: Default::default(),
        elapsed_s: wall,
        threads: 1,
        cpus_pinned: None,
        warnings: vec![],
        error: None,
        // iperf3 reports no memory figure, and watches for no stalls.
        memory: None,
        stalls: vec![],
        stream_cap_bps: None,
    }
}

/// The server's side of stream `l` from what the iperf3 server reported of it (`t`), counting from
/// the end of the warm-up (`omit_s`, with the `warm` bytes this end sent during it).
fn remote_stream(
    l: &StreamReport,
    t: Option<&landspeed_iperf3::results::StreamResult>,
    (omit_s, warm): (f64, u64),
    congestion: &Option<String>,
) -> StreamReport {
    let role = l.role.peer();
    StreamReport {
        bytes: t.map_or(0, |t| t.bytes) + warm,
        // A UDP sender's datagram count; loss is counted against it.
        calls: t
            .filter(|_| role == Role::Sender)
            .map_or(0, |t| t.packets.max(0) as u64),
        omitted_bytes: warm,
        first_byte_s: t.map(|t| t.start_time_s + omit_s),
        last_byte_s: t.map(|t| t.end_time_s + omit_s),
        tcp: t
            .filter(|t| role == Role::Sender && t.retransmits >= 0)
            .map(|t| TcpStats {
                retransmits: t.retransmits as u64,
                congestion: congestion.clone(),
                ..TcpStats::default()
            }),
        error: t
            .is_none()
            .then(|| "the iperf3 server reported no figures for this stream".into()),
        // A landspeed peer's check of what it received (landspeed's extension of the results).
        bytes_verified: t
            .and_then(|t| t.verified.as_ref())
            .map_or(0, |v| v.bytes_verified),
        corrupt_blocks: t
            .and_then(|t| t.verified.as_ref())
            .map_or(0, |v| v.corrupt_blocks),
        first_corruption: t
            .and_then(|t| t.verified.as_ref())
            .and_then(|v| v.first_corruption.clone()),
        udp: t
            .filter(|_| role == Role::Receiver && l.udp.is_none() && l.tcp.is_none())
            .map(remote_udp),
        ..StreamReport::empty(l.id, l.flow, role)
    }
}

/// A receiving iperf3 server's UDP figures for one stream.
fn remote_udp(t: &landspeed_iperf3::results::StreamResult) -> landspeed_core::udp::UdpStats {
    let lost = t.errors.max(0) as u64;
    landspeed_core::udp::UdpStats {
        datagrams_sent: None,
        datagrams_received: (t.packets.max(0) as u64).saturating_sub(lost),
        datagrams_lost: lost,
        loss_pct: 0.0,
        out_of_order: 0,
        duplicates: 0,
        jitter_ms: t.jitter_s * 1000.0,
        socket_drops: None,
        ce_marked: None,
        lost_in_receiver: None,
        lost_in_sender: None,
        transit: None,
    }
}

/// What the result says of its payload over iperf3's protocol.
pub(crate) fn payload_warning(agreed: bool, asked: bool) -> Vec<String> {
    match (agreed, asked) {
        (true, _) => vec![],
        (false, true) => {
            vec!["iperf3 protocol: the payload is not landspeed's pattern, so nothing was verified".into()]
        }
        (false, false) => vec!["iperf3 protocol: nothing was verified (--no-verify)".into()],
    }
}
