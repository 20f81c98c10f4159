//! The server's QUIC endpoint: one UDP socket (on the server's own port number, beside the UDP
//! listener, or on `--quic-port`) whose connections carry landspeed's QUIC streams (ALPN
//! "landspeed", `landspeed::quic`) or the QUIC performance protocol (ALPN "perf", `quic_perf::server`). A landspeed stream starts
//! with the same hello a TCP stream sends (session and stream number); the stream is then handed to
//! its test like a TCP connection. The endpoint runs on a small multi-thread runtime of its own so
//! connections are processed in parallel; nothing a peer does (garbage datagrams, a client that
//! vanishes, an ICMP error) stops it.

use crate::host::{QuicServer, ServerError, Shared};
use crate::{landspeed, quic_perf};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Concurrent streams a QUIC client may open each way (the server's --max-streams, when lower).
const MAX_STREAMS: u32 = 256;

/// Why the endpoint was not bound.
pub(crate) enum Unbound {
    /// The kernel would not take the shared port's datagram router (SO_ATTACH_REUSEPORT_CBPF:
    /// before Linux 4.5, or qemu-user, which does not translate it). Without the router the QUIC
    /// socket would take some of the UDP listener's datagrams, so the server serves no QUIC on the
    /// shared port and says why; `--quic-port` still serves it on a port of its own.
    NoRouter(String),
    /// Anything else: the server does not start.
    Failed(ServerError),
}

impl<E: Into<ServerError>> From<E> for Unbound {
    fn from(e: E) -> Unbound {
        Unbound::Failed(e.into())
    }
}

/// Binds the endpoint: on `listener`'s address and port, joined to the UDP listener's port group
/// with the datagram router, or on `port` of that address.
pub(crate) fn bind(
    listener: SocketAddr,
    port: Option<u16>,
    identity: &landspeed_engine::tls::Identity,
    max_streams: Option<u32>,
) -> Result<QuicServer, Unbound> {
    let addr = SocketAddr::new(listener.ip(), port.unwrap_or(listener.port()));
    let v6only = addr.is_ipv6().then_some(!addr.ip().is_unspecified());
    let bind_err = |err| ServerError::Bind { addr, err };
    let sock = landspeed_engine::quic::socket(addr, port.is_none(), v6only).map_err(bind_err)?;
    if port.is_none() {
        if let Err(e) = landspeed_engine::quic::route_port(&sock) {
            return Err(Unbound::NoRouter(format!(
                "this kernel does not route the shared port's datagrams ({e}); --quic-port PORT serves \
                 QUIC on a port of its own"
            )));
        }
    }
    let port = sock.local_addr().map_err(bind_err)?.port();
    let buffers = landspeed_engine::sockopt::granted(&socket2::SockRef::from(&sock));
    // One runtime thread per two cores: on the 2-core test host one thread moved a single
    // connection's 6.1 Gbit/s against 4.9-5.6 with two (their hand-offs cost more than the
    // parallelism gained while the test's own threads share the cores); several connections gained
    // nothing from the second thread there (docs/benchmarks.md). A test's streams run here too, as
    // tasks beside their connections (`transport::quic::Runtime::run`): with them, one thread again
    // moved one connection faster (6.2 against 5.1 Gbit/s downloading), and four connections
    // 0.94-0.98x of two threads' rate.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads((std::thread::available_parallelism().map_or(2, |n| n.get()) / 2).clamp(1, 8))
        .thread_name("landspeed-quic")
        .enable_all()
        .build()?;
    let streams = max_streams.map_or(MAX_STREAMS, |m| m.min(MAX_STREAMS));
    let config = landspeed_engine::quic::server_config(identity, streams)?;
    let endpoint = {
        let _in = runtime.enter();
        quinn::Endpoint::new(
            landspeed_engine::quic::endpoint_config(),
            Some(config),
            sock,
            Arc::new(quinn::TokioRuntime),
        )?
    };
    Ok(QuicServer {
        endpoint,
        runtime,
        port,
        buffers,
    })
}

/// Starts accepting connections (until the server shuts down).
pub(crate) fn serve(shared: &Arc<Shared>) {
    if let Some(q) = &shared.quic {
        let (endpoint, s) = (q.endpoint.clone(), shared.clone());
        q.runtime.spawn(accept(endpoint, s));
    }
}

async fn accept(endpoint: quinn::Endpoint, shared: Arc<Shared>) {
    while let Some(incoming) = endpoint.accept().await {
        if shared.shutdown.load(Relaxed) {
            incoming.refuse();
            break;
        }
        if !shared.allowed(incoming.remote_address()) {
            incoming.refuse();
            continue;
        }
        tokio::spawn(connection(incoming, shared.clone()));
    }
}

/// One connection: landspeed streams are handed to their tests, the performance protocol served.
async fn connection(incoming: quinn::Incoming, shared: Arc<Shared>) {
    let peer = incoming.remote_address();
    let Ok(conn) = incoming.await else {
        return;
    };
    let alpn = conn
        .handshake_data()
        .and_then(|h| h.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|h| h.protocol);
    match alpn.as_deref() {
        Some(landspeed_engine::quic::ALPN_LANDSPEED) => landspeed::quic::streams(conn, peer, &shared).await,
        Some(landspeed_engine::quic::ALPN_PERF) => quic_perf::server::serve(conn, peer, &shared).await,
        _ => conn.close(1u32.into(), b"unknown application protocol"),
    }
}
