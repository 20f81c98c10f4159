//! The client's QUIC data connections (`run --quic`): `connections` connections to the QUIC port the
//! server announced, each with a current-thread runtime and a UDP socket of its own and pinned to the
//! server's certificate, and the test's streams spread over them round-robin. Every stream is opened
//! by the client as a bidirectional stream whose first bytes are the same hello a TCP stream sends,
//! so the server can hand it to the test; a stream the client receives on closes its sending half
//! after the hello.

use super::error::ClientError;
use super::options::ClientOptions;
use crate::streams::QuicData;
use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::Role;
use landspeed_engine::quic::{self as q, ALPN_LANDSPEED};
use landspeed_engine::tls::Trust;
use landspeed_engine::transport::quic::{QuicConnection, QuicStream, Runtime};
use landspeed_proto::{Admission, Preamble, StreamKey};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

/// Streams a landspeed QUIC connection may carry each way.
const MAX_STREAMS: u32 = 256;

pub(crate) fn quic_err(detail: impl std::fmt::Display) -> ClientError {
    ClientError::Quic {
        detail: detail.to_string(),
    }
}

/// Connects the test's QUIC connections and opens its streams.
pub(crate) fn open(
    opts: &ClientOptions,
    spec: &TestSpec,
    server: SocketAddr,
    (a, key): (Admission, Option<&StreamKey>),
) -> Result<QuicData, ClientError> {
    let port = a.quic_port.ok_or(ClientError::QuicNotOffered)?;
    let pin = opts
        .tls_pin
        .or(a.certificate)
        .ok_or(ClientError::QuicNotOffered)?;
    let congestion = spec.congestion.clone().unwrap_or_else(|| "cubic".into());
    let config = q::client_config(Trust::Pinned(pin), ALPN_LANDSPEED, Some(&congestion), MAX_STREAMS)
        .map_err(quic_err)?;
    let server = SocketAddr::new(server.ip(), port);
    let connections = (0..spec.connections)
        .map(|_| connect(opts, server, config.clone(), &congestion, "landspeed"))
        .collect::<Result<Vec<_>, _>>()?;
    let streams = (0..spec.total_streams())
        .map(|id| stream(spec, &connections, (a, key), id))
        .collect::<Result<Vec<_>, _>>()?;
    for c in &connections {
        c.runtime.keep_driving();
    }
    Ok(QuicData { connections, streams })
}

/// One connection, on a runtime and a socket of its own, within the connect timeout (`name`: the
/// server name it sends).
pub(crate) fn connect(
    opts: &ClientOptions,
    server: SocketAddr,
    config: quinn::ClientConfig,
    congestion: &str,
    name: &str,
) -> Result<QuicConnection, ClientError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(quic_err)?;
    let local = match (opts.bind, server.is_ipv4()) {
        (Some(ip), _) => SocketAddr::new(ip, 0),
        (None, true) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        (None, false) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    let (endpoint, conn, buffers) = rt.block_on(async {
        let sock = q::socket(local, false, None).map_err(quic_err)?;
        let buffers = landspeed_engine::sockopt::granted(&socket2::SockRef::from(&sock));
        let endpoint = quinn::Endpoint::new(q::endpoint_config(), None, sock, Arc::new(quinn::TokioRuntime))
            .map_err(quic_err)?;
        let connecting = endpoint.connect_with(config, server, name).map_err(quic_err)?;
        match tokio::time::timeout(opts.connect_timeout, connecting).await {
            Ok(Ok(conn)) => Ok((endpoint, conn, buffers)),
            Ok(Err(e)) => Err(quic_err(format!("QUIC handshake with {server}: {e}"))),
            Err(_) => Err(ClientError::QuicTimeout {
                addr: server,
                after: opts.connect_timeout,
            }),
        }
    })?;
    Ok(QuicConnection {
        conn,
        runtime: Runtime::owned(rt),
        congestion: congestion.into(),
        endpoint: Some(endpoint),
        buffers,
    })
}

/// Opens stream `id` on its connection and sends its hello (with its MAC in a keyed test).
fn stream(
    spec: &TestSpec,
    connections: &[QuicConnection],
    (a, key): (Admission, Option<&StreamKey>),
    id: u32,
) -> Result<QuicStream, ClientError> {
    let hello = Preamble::data(a.session, id, key).encode();
    open_stream(spec, connections, id, &hello, false)
}

/// Opens stream `id` of the test as a bidirectional stream on its connection (round-robin within its
/// direction) and sends `first` (a landspeed hello, or a performance-protocol request's size); a
/// stream this end receives on then finishes its sending half. `perf`: a performance-protocol request.
pub(crate) fn open_stream(
    spec: &TestSpec,
    connections: &[QuicConnection],
    id: u32,
    first: &[u8],
    perf: bool,
) -> Result<QuicStream, ClientError> {
    let connection = ((id % spec.streams) % spec.connections) as usize;
    let c = &connections[connection];
    let flow = spec.flow_of(id);
    let role = Role::at_client(flow);
    let (send, recv) = c
        .runtime
        .block_on(async {
            let (mut send, recv) = c.conn.open_bi().await?;
            send.write_all(first).await?;
            if role == Role::Receiver {
                let _ = send.finish();
            }
            Ok::<_, Box<dyn std::error::Error>>((send, recv))
        })
        .map_err(|e| quic_err(format!("stream {id}: {e}")))?;
    Ok(QuicStream {
        id,
        flow,
        role,
        budget: (role == Role::Sender).then(|| spec.stream_budget(id)).flatten(),
        connection,
        io: Mutex::new(Some((send, recv))),
        perf,
    })
}
