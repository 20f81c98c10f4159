//! What a landspeed test needs around its session on the client: the test as this client asks for
//! it (a fresh payload key, the file to send or receive), its data connections and their TLS, the
//! warnings before the data moves, this end's report and the run's result.

use crate::dial::{ktls, latency, quic, tcp_stream, udp_socket, ClientError, ClientOptions};
use crate::streams::DataPaths;
use landspeed_core::assemble::{assemble, Inputs};
use landspeed_core::config::{Test, TestSpec, Transport};
use landspeed_core::endpoint::{EndpointReport, Role};
use landspeed_core::result::RunResult;
use landspeed_core::tls::CertFingerprint;
use landspeed_engine::supervisor::{self};
use landspeed_engine::transport::tcp::DataStream;
use landspeed_proto::udp_hello::{Challenge, Hello};
use landspeed_proto::{Admission, ClientSession, Preamble, SessionId, StreamKey, Timers};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The run's result from both ends' reports, with the latency probes' figures and a received file
/// settled against the sender's report.
pub(super) fn result(
    inputs: &Inputs,
    latency: Option<latency::LatencyRun>,
    incoming: Option<landspeed_engine::files::Incoming>,
) -> RunResult {
    let mut result = assemble(inputs);
    if let Some(l) = latency {
        l.finish(&mut result);
    }
    if let (Some(mut inc), Some(mine)) = (incoming, inputs.client.file.as_ref()) {
        result
            .warnings
            .extend(inc.settle(mine, inputs.server.file.as_ref()).err());
    }
    result
}

/// The test as this client asks for it: a fresh payload key, the file to send or receive prepared
/// (each change validated again).
pub(super) fn test_spec(opts: &ClientOptions) -> Result<(Test, Option<LocalFile>), ClientError> {
    if ktls(&opts.spec) {
        if let Some(reason) = landspeed_engine::tls::ktls_unavailable_reason() {
            return Err(ClientError::Ktls { reason });
        }
    }
    let mut test = opts.spec.clone();
    // The server gives up on a silent test no later than this client does.
    let idle = opts.idle_timeout.as_secs_f64();
    test = test.changed(|s| s.idle_timeout_s = Some(idle))?;
    if test.payload_key == 0 {
        // The run's payload key; any value works, a random one makes every run's payload different.
        test = test.with_payload_key(getrandom::u64().unwrap_or(0x5eed) | 1);
    }
    let local_file = prepare_file(opts, &mut test)?;
    Ok((test, local_file))
}

/// Opens the test's data connections (their preambles proven with the stream key in a keyed test);
/// a file test's streams carry its file, and its sender its size.
pub(super) fn open_data(
    opts: &ClientOptions,
    spec: &TestSpec,
    addr: SocketAddr,
    (a, key): (Admission, Option<&StreamKey>),
    local_file: Option<&LocalFile>,
) -> Result<DataPaths, ClientError> {
    match spec.transport {
        Transport::Udp => return Ok(DataPaths::Udp(open_udp_streams(opts, addr, a.session, key)?)),
        Transport::Quic => return Ok(DataPaths::Quic(quic::open(opts, spec, addr, (a, key))?)),
        Transport::Tcp => {}
    }
    let tls = tls_config(opts, spec, a.certificate)?;
    let mut tcp = open_streams(opts, addr, (a.session, key), tls.as_ref())?;
    if let Some(lf) = local_file {
        for s in &mut tcp {
            s.file = Some(lf.handle.clone());
            if s.role == Role::Sender {
                s.budget = lf.report.as_ref().map(|r| r.size_bytes);
            }
        }
    }
    Ok(DataPaths::Tcp(tcp))
}

/// What the user should know before the data moves: a server rate cap, socket buffers smaller than
/// asked.
pub(super) fn start_warnings(session: &ClientSession, spec: &TestSpec, data: &DataPaths) -> Vec<String> {
    let mut warnings = vec![];
    if let (Some(cap), Transport::Tcp) = (
        session.server_limits().and_then(|l| l.max_rate_bps),
        spec.transport,
    ) {
        warnings.push(format!(
            "the server paces every test to at most {} in all (its rate limit): this result measures \
             that cap, not the path",
            landspeed_core::units::BitRate(cap)
        ));
    }
    warnings.extend(data.window_warning(spec.window_bytes));
    warnings
}

/// Latency probes: the idle baseline is in, the loaded phase starts (a warning if nothing answered).
pub(super) fn latency_begins(l: &mut latency::LatencyRun) -> Option<String> {
    let idle = l.wait_idle();
    l.loaded();
    (!idle).then(|| {
        "latency probes: no echo replies from the server (UDP blocked, or not a landspeed server); the \
         latency figures are empty"
            .into()
    })
}

/// This end's report, with its file's when the test moved one (a download's file is hashed now).
pub(super) fn local_report(
    opts: &ClientOptions,
    out: &supervisor::EngineOutput,
    warnings: Vec<String>,
    local_file: Option<LocalFile>,
) -> Result<(EndpointReport, Option<landspeed_engine::files::Incoming>), ClientError> {
    let mut report = out.report(opts.cpus.clone(), warnings);
    let Some(lf) = local_file else {
        return Ok((report, None));
    };
    match (lf.report, lf.incoming) {
        (Some(r), _) => {
            report.file = Some(r);
            Ok((report, None))
        }
        (None, Some(inc)) => {
            report.file = Some(inc.report().map_err(|err| ClientError::File {
                path: inc.dest.display().to_string(),
                err,
            })?);
            Ok((report, Some(inc)))
        }
        (None, None) => Ok((report, None)),
    }
}

/// The session's timers from the client's options. A download waits while the server reads and hashes
/// its file before accepting (bounded).
pub(super) fn timers(opts: &ClientOptions) -> Timers {
    Timers {
        handshake: opts.control_timeout,
        accept_extra: if opts.recv_file.is_some() {
            Duration::from_secs(600)
        } else {
            Duration::ZERO
        },
        results: opts.idle_timeout + opts.control_timeout,
    }
}

/// A `--tls` test's client configuration: the suite asked for, pinned to `--tls-pin` or else to the
/// certificate the server announced.
pub(super) fn tls_config(
    opts: &ClientOptions,
    spec: &TestSpec,
    announced: Option<CertFingerprint>,
) -> Result<Option<Arc<rustls::ClientConfig>>, ClientError> {
    let Some(tls) = spec.tls else {
        return Ok(None);
    };
    let pin = opts.tls_pin.or(announced).ok_or(ClientError::TlsNotOffered)?;
    let trust = landspeed_engine::tls::Trust::Pinned(pin);
    landspeed_engine::tls::client_config(&[tls.cipher], trust, &[])
        .map(Some)
        .map_err(|e| ClientError::Tls {
            id: 0,
            detail: e.to_string(),
        })
}

pub(super) fn open_streams(
    opts: &ClientOptions,
    addr: SocketAddr,
    (sid, key): (SessionId, Option<&StreamKey>),
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Vec<DataStream>, ClientError> {
    let spec = &opts.spec;
    (0..spec.total_streams())
        .map(|id| {
            let pre = Preamble::data(sid, id, key).encode();
            tcp_stream(opts, addr, spec, id, &pre, tls)
        })
        .collect()
}

/// The client's file in a disk-to-disk test.
pub(super) struct LocalFile {
    handle: Arc<std::fs::File>,
    /// Upload: the read-and-hash pass (done before connecting).
    report: Option<landspeed_core::files::FileReport>,
    /// Download: the file being received.
    incoming: Option<landspeed_engine::files::Incoming>,
}

/// Upload: reads and hashes the file, and puts its name and size in the spec. Download: creates the
/// local file and asks for the remote one.
pub(super) fn prepare_file(opts: &ClientOptions, spec: &mut Test) -> Result<Option<LocalFile>, ClientError> {
    use landspeed_core::config::{Direction, EndCondition};
    use landspeed_core::files::FileSpec;
    let ferr = |path: &std::path::Path, err| ClientError::File {
        path: path.display().to_string(),
        err,
    };
    let base = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    if let Some(path) = &opts.send_file {
        if spec.direction != Direction::Forward {
            return Err(ClientError::FileDirection { upload: true });
        }
        let report = landspeed_engine::files::sender_report(path).map_err(|e| ferr(path, e))?;
        if report.size_bytes == 0 {
            return Err(ferr(path, std::io::Error::other("the file is empty")));
        }
        let name = opts
            .remote_file
            .clone()
            .or_else(|| base(path))
            .unwrap_or_default();
        *spec = spec.changed(|s| {
            s.file = Some(FileSpec {
                name,
                size_bytes: Some(report.size_bytes),
            });
            s.end = EndCondition::Bytes(report.size_bytes);
        })?;
        let handle = std::fs::File::open(path).map_err(|e| ferr(path, e))?;
        return Ok(Some(LocalFile {
            handle: Arc::new(handle),
            report: Some(report),
            incoming: None,
        }));
    }
    if let Some(dest) = &opts.recv_file {
        if spec.direction != Direction::Reverse {
            return Err(ClientError::FileDirection { upload: false });
        }
        let name = opts
            .remote_file
            .clone()
            .or_else(|| base(dest))
            .unwrap_or_default();
        let path = if dest.is_dir() {
            dest.join(&name)
        } else {
            dest.clone()
        };
        *spec = spec.changed(|s| {
            s.file = Some(FileSpec {
                name,
                size_bytes: None,
            });
            // The server sends the whole file; its size is known there.
            s.end = EndCondition::Bytes(1);
        })?;
        let incoming = landspeed_engine::files::Incoming::create(&path).map_err(|e| ferr(&path, e))?;
        return Ok(Some(LocalFile {
            handle: incoming.handle.clone(),
            report: None,
            incoming: Some(incoming),
        }));
    }
    Ok(None)
}

/// Opens the UDP streams: a connected socket per stream, which says hello (the data preamble, with its
/// MAC in a keyed test) until the server acknowledges it with the stream's version-1 preamble from
/// its own socket for the stream. A server that does
/// not see the hello come from the control connection's address (a NAT that maps UDP elsewhere)
/// answers with a challenge instead, whose token the next hellos carry (`proto::udp_hello`).
pub(super) fn open_udp_streams(
    opts: &ClientOptions,
    addr: SocketAddr,
    sid: SessionId,
    key: Option<&StreamKey>,
) -> Result<Vec<landspeed_engine::transport::udp::UdpStream>, ClientError> {
    let spec = &opts.spec;
    (0..spec.total_streams())
        .map(|id| {
            let err = |err| ClientError::Stream { id, err };
            let sock = udp_socket(opts, addr, spec, id).map_err(err)?;
            sock.set_read_timeout(Some(Duration::from_millis(200)))
                .map_err(err)?;
            let mut hello = Hello::new(sid, id, key);
            // The server acknowledges with the stream's version-1 preamble (no MAC: it proves nothing
            // to the client, whose data is not authenticated anyway).
            let ack = Preamble::data(sid, id, None).encode();
            let deadline = Instant::now() + opts.control_timeout;
            let mut buf = [0u8; 64];
            loop {
                if Instant::now() >= deadline {
                    return Err(ClientError::UdpUnacknowledged {
                        id,
                        after: opts.control_timeout,
                        port: opts.port,
                    });
                }
                // ECONNREFUSED from an earlier hello means nothing listens yet; keep trying until the deadline.
                let _ = sock.send(&hello.encode());
                match sock.recv(&mut buf) {
                    Ok(n) if buf[..n] == ack[..] => break,
                    Ok(n) => match Challenge::parse(&buf[..n]) {
                        Some(c) if (c.session, c.stream) == (sid, id) => hello.token = Some(c.token),
                        _ => continue,
                    },
                    Err(_) => continue,
                }
            }
            Ok(landspeed_engine::transport::udp::UdpStream::of_test(
                spec,
                id,
                Role::at_client,
                sock,
            ))
        })
        .collect()
}
