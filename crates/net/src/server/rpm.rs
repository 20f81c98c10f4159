//! `serve --rpm ADDR`: the responsiveness test's HTTP endpoints (network-quality/server's
//! SERVER_SPEC.md), so goresponsiveness, Apple's networkQuality and `landspeed rpm` can measure RPM
//! against a landspeed server: `/config` (the JSON naming the others, built from the request's
//! Host), `/small` (1 byte), `/large` (an object that outlasts any test), `/upload` and `/slurp`
//! (a POST sink). HTTP/2 and HTTP/1.1 on one port (ALPN over TLS; over plain TCP HTTP/1.1, or
//! HTTP/2 with prior knowledge), hyper on a small runtime of its own. Each connection holds a place
//! (`MAX_CONNECTIONS`, `MAX_CONNECTIONS_PER_ADDRESS`: a test opens up to 16 loading connections and
//! a few probe connections a second, which clients leave open: a connection with no byte either way
//! for `IDLE` is closed), a transfer ends after `MAX_TRANSFER` whatever the client does, and a
//! connection after `MAX_CONNECTION`. A test is counted (`--allow`, the per-minute rate) when
//! its client fetches the configuration; a keyed server answers 403 unless `--open rpm`.

use super::{Keyless, RefusalKind, Shared};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use landspeed_core::protocol::rate::Occupancy;
use landspeed_core::rpm::{self, RpmConfig};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// Connections open at once, at most.
pub(crate) const MAX_CONNECTIONS: usize = 1024;
/// The same from one address (IPv6: one /64): 16 loading connections and the probes' of a few
/// seconds at goresponsiveness's rates.
pub(crate) const MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// Unsent bytes a connection's socket may hold beyond what is in flight.
pub(crate) const NOTSENT_LOWAT: u32 = 16 * 1024;
/// A connection that moves no byte either way for this long is closed.
pub(crate) const IDLE: Duration = Duration::from_secs(2);
/// The longest one download or upload runs (a direction of a test takes at most about 20 s).
pub(crate) const MAX_TRANSFER: Duration = Duration::from_secs(60);
/// The longest a connection stays open.
pub(crate) const MAX_CONNECTION: Duration = Duration::from_secs(120);
/// The large object's size: 8 GiB, as SERVER_SPEC.md asks ("at least 8GB").
pub(crate) const LARGE_BYTES: u64 = 8 << 30;

/// The listener and whether it speaks TLS.
pub(crate) struct RpmListener {
    pub(crate) listener: std::net::TcpListener,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
}

/// Serves until the server shuts down, on a runtime of its own.
pub(crate) fn serve(l: RpmListener, shared: Arc<Shared>) {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rpm")
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(accept(l, shared));
    rt.shutdown_timeout(Duration::from_secs(1));
}

async fn accept(l: RpmListener, shared: Arc<Shared>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(l.listener) else {
        return;
    };
    let places = Arc::new(Mutex::new(Occupancy::new(
        MAX_CONNECTIONS,
        MAX_CONNECTIONS_PER_ADDRESS,
    )));
    while !shared.shutdown.load(Relaxed) {
        let Ok(Ok((tcp, peer))) = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await
        else {
            continue;
        };
        if !shared.allowed(peer) {
            shared.count_refused(RefusalKind::NotAllowed);
            continue;
        }
        let Ok(place) = super::take_slot(&places, peer) else {
            shared.count_refused(RefusalKind::Busy);
            continue;
        };
        let (shared, tls) = (shared.clone(), l.tls.clone());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(MAX_CONNECTION, connection(tcp, peer, tls, shared)).await;
            drop(place);
        });
    }
}

/// One connection: TLS if configured (within the handshake timeout), then HTTP/1.1 or HTTP/2.
async fn connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    shared: Arc<Shared>,
) {
    let _ = tcp.set_nodelay(true);
    // Little unsent data in the kernel: a self probe's answer waits behind the congestion window,
    // not behind seconds of queued bulk data (where the system has the option).
    let _ = landspeed_engine::os::set_notsent_lowat(&tcp, NOTSENT_LOWAT);
    let https = tls.is_some();
    let svc = hyper::service::service_fn(move |req| answer(req, peer, https, shared.clone()));
    let mut http = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    http.http2()
        .adaptive_window(true)
        .max_concurrent_streams(256)
        .max_send_buf_size(32 * 1024);
    let seen = Arc::new(AtomicU64::new(0));
    let epoch = tokio::time::Instant::now();
    let watch = idle(seen.clone(), epoch);
    match tls {
        None => {
            let io = TokioIo::new(Watched::new(tcp, seen, epoch));
            tokio::select! { _ = http.serve_connection(io, svc) => {}, _ = watch => {} }
        }
        Some(cfg) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
            let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
            else {
                return;
            };
            let io = TokioIo::new(Watched::new(stream, seen, epoch));
            tokio::select! { _ = http.serve_connection(io, svc) => {}, _ = watch => {} }
        }
    }
}

/// Returns once the connection has moved no byte for `IDLE` (`seen`: ms since `epoch` of the last).
async fn idle(seen: Arc<AtomicU64>, epoch: tokio::time::Instant) {
    loop {
        tokio::time::sleep(IDLE / 4).await;
        let quiet = epoch.elapsed().as_millis() as u64 - seen.load(Relaxed);
        if quiet >= IDLE.as_millis() as u64 {
            return;
        }
    }
}

/// A stream that notes when it last moved a byte.
struct Watched<S> {
    inner: S,
    seen: Arc<AtomicU64>,
    epoch: tokio::time::Instant,
}

impl<S> Watched<S> {
    fn new(inner: S, seen: Arc<AtomicU64>, epoch: tokio::time::Instant) -> Watched<S> {
        Watched { inner, seen, epoch }
    }

    fn note(&self) {
        self.seen.store(self.epoch.elapsed().as_millis() as u64, Relaxed);
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.note();
        }
        r
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, b);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.note();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

type Answer = Response<BoxBody<Bytes, Infallible>>;

fn plain(status: StatusCode, text: &str) -> Answer {
    let mut r = Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *r.status_mut() = status;
    r
}

/// Answers one request.
async fn answer(
    req: Request<Incoming>,
    peer: SocketAddr,
    https: bool,
    shared: Arc<Shared>,
) -> Result<Answer, Infallible> {
    if shared.keyed_only(Keyless::Rpm) {
        shared.count_refused(RefusalKind::Keyed);
        return Ok(plain(
            StatusCode::FORBIDDEN,
            "this server requires a landspeed key, which the responsiveness test cannot carry, and does not open rpm\n",
        ));
    }
    let path = req.uri().path().to_owned();
    Ok(match (req.method(), path.as_str()) {
        (&Method::GET, rpm::CONFIG_PATH | "/.well-known/nq") => config(&req, peer, https, &shared),
        (&Method::GET, rpm::SMALL_PATH) => Response::new(Full::new(Bytes::from_static(b"x")).boxed()),
        (&Method::GET, rpm::LARGE_PATH) => Response::new(Large::new().boxed()),
        (&Method::POST, rpm::UPLOAD_PATH | "/slurp") => sink(req.into_body()).await,
        _ => plain(
            StatusCode::NOT_FOUND,
            "not one of /config, /small, /large, /upload\n",
        ),
    })
}

/// The configuration, its URLs on the host and port the client reached (its Host header, or the
/// HTTP/2 authority): counted as the start of a test.
fn config(req: &Request<Incoming>, peer: SocketAddr, https: bool, shared: &Shared) -> Answer {
    if let Err(text) = shared.admit(peer) {
        let mut a = plain(StatusCode::TOO_MANY_REQUESTS, &format!("{text}\n"));
        a.headers_mut()
            .insert("retry-after", hyper::header::HeaderValue::from_static("60"));
        shared.count_refused(RefusalKind::RateLimited);
        return a;
    }
    let host = (req.uri().authority().map(|a| a.as_str().to_owned()))
        .or_else(|| (req.headers().get("host")).and_then(|h| h.to_str().ok().map(String::from)))
        .filter(|h| h.len() <= 255 && h.bytes().all(|b| b.is_ascii_graphic()));
    let Some(host) = host else {
        return plain(StatusCode::BAD_REQUEST, "no Host header\n");
    };
    let base = format!("{}://{host}", if https { "https" } else { "http" });
    let mut r = Response::new(Full::new(Bytes::from(RpmConfig::for_base(&base).to_json())).boxed());
    r.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Reads and discards an upload until it ends or `MAX_TRANSFER` passes.
async fn sink(mut body: Incoming) -> Answer {
    let until = tokio::time::Instant::now() + MAX_TRANSFER;
    while let Ok(Some(Ok(_))) = tokio::time::timeout_at(until, body.frame()).await {}
    plain(StatusCode::OK, "{}")
}

/// The large object: `LARGE_BYTES` of one repeated chunk, cut short after `MAX_TRANSFER`.
struct Large {
    chunk: Bytes,
    left: u64,
    until: std::time::Instant,
}

/// The chunk the large object repeats.
static CHUNK: [u8; 256 * 1024] = [b'x'; 256 * 1024];

impl Large {
    fn new() -> Large {
        Large {
            chunk: Bytes::from_static(&CHUNK),
            left: LARGE_BYTES,
            until: std::time::Instant::now() + MAX_TRANSFER,
        }
    }
}

impl Body for Large {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 || std::time::Instant::now() >= self.until {
            return Poll::Ready(None);
        }
        let n = self.left.min(self.chunk.len() as u64) as usize;
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }
}
