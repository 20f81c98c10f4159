//! The QUIC performance protocol as a client (`run --quic-perf HOST`): landspeed drives another
//! stack's perf server (quinn's perf, msquic's secnetperf, quic-go's and aioquic peers, or `landspeed
//! serve`) with the same engine, meters and report as its own tests. Each stream is one request on
//! a bidirectional stream: an upload sends the 8-byte size 0, the payload and FIN, and counts as
//! received when the server's FIN answers (the server reads the whole request first); a download
//! asks for its share of `-n`, or for u64::MAX when timed, and is stopped (STOP_SENDING) when the
//! time is up. There is no control connection: the server's side of the result is what the client
//! could prove, the payload is the server's own (constant bytes for most), so nothing is verified,
//! and the result says both.

use crate::dial::quic::{connect, open_stream, quic_err};
use crate::dial::{resolve, run_context, ClientError, ClientEvent, ClientOptions};
use crate::streams::{DataPaths, QuicData};
use landspeed_core::assemble::{assemble, Inputs};
use landspeed_core::config::{Test, TestSpec};
use landspeed_core::endpoint::{EndpointReport, Role, StreamReport};
use landspeed_core::result::RunResult;
use landspeed_engine::quic::{self as q, ALPN_PERF};
use landspeed_engine::tls::Trust;
use landspeed_engine::transport::quic::{QuicConnection, QuicStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::SystemTime;

/// Requests a performance-protocol connection may have open at once.
const MAX_STREAMS: u32 = 256;

/// Runs one test against a QUIC performance-protocol server.
pub fn run_quic_perf(
    opts: &ClientOptions,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let spec = &perf_spec(opts)?;
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let addr = resolve(opts)?;
    let connections = connections(opts, spec, addr)?;
    let local = connections[0]
        .endpoint
        .as_ref()
        .and_then(|e| e.local_addr().ok())
        .unwrap_or(addr);
    on_event(ClientEvent::Connected { local, remote: addr });
    let streams = (0..spec.total_streams())
        .map(|id| request(spec, &connections, id))
        .collect::<Result<Vec<_>, _>>()?;
    for c in &connections {
        c.runtime.keep_driving();
    }
    let data = DataPaths::Quic(QuicData { connections, streams });
    let mut warnings = vec![
        "QUIC performance protocol: the server sends its own bytes and reports nothing, so nothing was verified; an upload counts as received once the server answered it (it reads every byte first), a download as what arrived".to_string(),
    ];
    if opts.tls_pin.is_none() {
        warnings.push("the server's certificate was not checked (no --tls-pin)".into());
    }
    on_event(ClientEvent::Started {
        streams: spec.total_streams(),
        warnings: warnings.clone(),
    });
    let out = crate::dial::measure_quietly(opts, spec, (&data, false), local, interrupt, on_event);
    if let DataPaths::Quic(q) = &data {
        if let Some(reason) = q.connections.iter().find_map(|c| refused(&c.conn)) {
            return Err(quic_err(format!("the server closed the connection: {reason}")));
        }
    }
    drop(data);
    let client = out.report(opts.cpus.clone(), warnings);
    let server = EndpointReport {
        streams: client.streams.iter().map(server_view).collect(),
        ..EndpointReport::default()
    };
    let mut context = run_context(
        opts,
        local,
        addr,
        &client,
        started_unix_s,
        interrupt.load(Relaxed),
        "quic-perf",
    );
    context.foreign_peer = true;
    Ok(assemble(&Inputs {
        spec,
        context,
        client: &client,
        server: &server,
        client_samples: &out.samples,
        server_samples: &[],
    }))
}

/// The test's connections to the perf server, its certificate pinned (`--tls-pin`) or not checked.
fn connections(
    opts: &ClientOptions,
    spec: &TestSpec,
    addr: std::net::SocketAddr,
) -> Result<Vec<QuicConnection>, ClientError> {
    let trust = opts.tls_pin.map_or(Trust::Any, Trust::Pinned);
    let congestion = spec.congestion.clone().unwrap_or_else(|| "cubic".into());
    let config = q::client_config(trust, ALPN_PERF, Some(&congestion), MAX_STREAMS).map_err(quic_err)?;
    (0..spec.connections)
        .map(|_| connect(opts, addr, config.clone(), &congestion, &opts.host))
        .collect()
}

/// Why the server closed the connection with an error of its own (a refusal), if it did.
fn refused(conn: &quinn::Connection) -> Option<String> {
    match conn.close_reason()? {
        quinn::ConnectionError::ApplicationClosed(c) if c.error_code != 0u32.into() => {
            Some(String::from_utf8_lossy(&c.reason).into_owned())
        }
        quinn::ConnectionError::ConnectionClosed(c) => Some(c.to_string()),
        _ => None,
    }
}

/// The test as a perf server runs it: QUIC, and nothing to verify.
fn perf_spec(opts: &ClientOptions) -> Result<Test, ClientError> {
    Ok(opts.spec.changed(|s| {
        s.transport = landspeed_core::config::Transport::Quic;
        s.verify = false;
    })?)
}

/// Opens request `id`: its size header (0 for an upload, its share of the bytes or u64::MAX for a
/// download, which then ends its request at once).
fn request(spec: &TestSpec, connections: &[QuicConnection], id: u32) -> Result<QuicStream, ClientError> {
    let header = match Role::at_client(spec.flow_of(id)) {
        Role::Sender => landspeed_core::quic_perf::request_header(Some(0)),
        Role::Receiver => landspeed_core::quic_perf::request_header(spec.stream_budget(id)),
    };
    open_stream(spec, connections, id, &header, true)
}

/// What the client can say of the server's end of a stream: an answered upload was received whole,
/// a download sent at least what arrived.
fn server_view(s: &StreamReport) -> StreamReport {
    let answered = s.role == Role::Receiver || s.error.is_none();
    StreamReport {
        role: match s.role {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        },
        bytes: if answered { s.bytes } else { 0 },
        bytes_verified: 0,
        tcp: None,
        quic: None,
        error: None,
        ..s.clone()
    }
}
