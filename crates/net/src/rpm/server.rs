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

use crate::host::{Keyless, RefusalKind, Shared};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use landspeed_proto::admission;
use landspeed_rpm::{self as rpm, RpmConfig};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

mod answer;
mod http2;
mod transfers;
mod window;
use answer::{plain, Answer};
use transfers::{Tests, Transfer};

/// Connections open at once, shared fairly by address and network (`proto::admission`):
/// a test opens up to 16 loading connections and probe connections that clients leave open, so an
/// address may hold many, but one network never more than a third of them, and a newcomer from a
/// smaller holder takes the place of the largest holder's oldest connection.
pub(crate) const CONNECTION_CAPS: admission::Caps = admission::Caps {
    total: 1024,
    per_address: 192,
    per_network: 384,
};
/// A connection serving no request for this long is closed, whatever bytes trickle in (a request
/// head sent a byte at a time is no request until it is whole).
pub(crate) const IDLE: Duration = Duration::from_secs(2);
/// The longest one download or upload runs (a direction of a test takes at most about 20 s).
pub(crate) const MAX_TRANSFER: Duration = Duration::from_secs(60);
/// The longest a connection stays open.
pub(crate) const MAX_CONNECTION: Duration = Duration::from_secs(120);
/// The large object's size: 8 GiB, as SERVER_SPEC.md asks ("at least 8GB").
pub(crate) const LARGE_BYTES: u64 = 8 << 30;
/// HTTP/2 streams one connection may have open at once (a load, its self probes).
pub(crate) const MAX_STREAMS: u32 = 8;
/// What one HTTP/2 stream may hold queued for sending before its body is asked for more: one
/// chunk at a time (a chunk is a fifth of 5 ms of the connection's rate, `crate::rpm::backlog`).
pub(crate) const STREAM_SEND_BUF: usize = super::backlog::FLOOR_BYTES as usize;
/// What one HTTP/2 stream is charged for: its largest chunk (16 KiB) and h2's frames around it.
const STREAM_CHARGE: usize = 32 * 1024;
/// HTTP/1.1's read buffer at most.
pub(crate) const H1_READ_BUF: usize = 64 * 1024;
/// The memory one connection is charged against `--max-memory` while it is open: HTTP/1.1's read
/// buffer, every HTTP/2 stream's send buffer, TLS's buffers both ways (rustls' 64 KiB limit each)
/// and 32 KiB for the rest (hyper's and h2's state, the headers). The large object's chunks are
/// static and written vectored, so they cost no copy per connection.
pub(crate) const CONNECTION_BYTES: u64 =
    (H1_READ_BUF + MAX_STREAMS as usize * STREAM_CHARGE + 2 * 64 * 1024 + 32 * 1024) as u64;

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
    let places = crate::host::admission_pool(CONNECTION_CAPS);
    let tests = Arc::new(Tests::default());
    while !shared.shutdown.load(Relaxed) {
        let Ok(Ok((tcp, peer))) = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await
        else {
            continue;
        };
        if !shared.allowed(peer) {
            shared.count_refused(RefusalKind::NotAllowed);
            continue;
        }
        let evict = Arc::new(tokio::sync::Notify::new());
        let closer = {
            let evict = evict.clone();
            move || evict.notify_one()
        };
        let place = match crate::host::take_place(&places, peer, closer) {
            Ok(p) => p,
            Err(why) => {
                shared.refuse(peer, RefusalKind::Busy, format!("rpm: {why} already open"));
                continue;
            }
        };
        let memory = match shared.hold_bytes(CONNECTION_BYTES) {
            Ok(m) => m,
            Err(_) => {
                shared.refuse(
                    peer,
                    RefusalKind::Memory,
                    "rpm: the server's memory budget is held by its tests and connections",
                );
                continue;
            }
        };
        let (shared, tls, tests) = (shared.clone(), l.tls.clone(), tests.clone());
        tokio::spawn(async move {
            let conn = connection(tcp, peer, tls, shared, tests);
            tokio::select! {
                _ = tokio::time::timeout(MAX_CONNECTION, conn) => {}
                _ = evict.notified() => {}
            }
            drop((place, memory));
        });
    }
}

/// Whether a connection is serving a request, and since when it has served none.
struct Activity {
    epoch: tokio::time::Instant,
    active: AtomicUsize,
    /// Milliseconds from `epoch` when the last request ended (0: none yet).
    quiet_since_ms: AtomicU64,
    served: AtomicBool,
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            epoch: tokio::time::Instant::now(),
            active: AtomicUsize::new(0),
            quiet_since_ms: AtomicU64::new(0),
            served: AtomicBool::new(false),
        })
    }

    /// A request begins; it ends when the guard (kept by its response's body) is dropped.
    fn begin(self: &Arc<Self>) -> Active {
        self.active.fetch_add(1, Relaxed);
        self.served.store(true, Relaxed);
        Active(self.clone())
    }

    /// Returns once the connection has served no request for `IDLE`, or (before its first) for
    /// `first` from its start: the TLS handshake and the first request head must fit in it.
    async fn idle(&self, first: Duration) {
        loop {
            tokio::time::sleep(IDLE / 8).await;
            if self.active.load(Relaxed) > 0 {
                continue;
            }
            let limit = if self.served.load(Relaxed) { IDLE } else { first };
            let quiet =
                (self.epoch.elapsed().as_millis() as u64).saturating_sub(self.quiet_since_ms.load(Relaxed));
            if quiet >= limit.as_millis() as u64 {
                return;
            }
        }
    }
}

/// A request being served.
struct Active(Arc<Activity>);

impl Drop for Active {
    fn drop(&mut self) {
        let a = &self.0;
        a.quiet_since_ms
            .store(a.epoch.elapsed().as_millis() as u64, Relaxed);
        a.active.fetch_sub(1, Relaxed);
    }
}

/// One connection: TLS if configured, then HTTP/1.1 (hyper) or HTTP/2 (`http2`), until it has
/// served no request for `IDLE` (its first within the handshake timeout).
async fn connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    shared: Arc<Shared>,
    tests: Arc<Tests>,
) {
    let _ = tcp.set_nodelay(true);
    let https = tls.is_some();
    // Unsent data near 5 ms of the connection's rate in the kernel, TLS and HTTP/2 together
    // (draft-09): a self probe's answer waits behind the path's queue, not the server's buffers.
    let budget = super::backlog::Budget::new(https);
    let activity = Activity::new();
    let first = shared.opts.handshake_timeout;
    let serving = Serving {
        peer,
        https,
        budget: budget.clone(),
        shared,
        tests,
        activity: activity.clone(),
    };
    match tls {
        None => {
            let h2 = tokio::select! { h = prior_knowledge(&tcp) => h, _ = activity.idle(first) => return };
            let io = super::backlog::Paced::new(tcp, budget);
            serving.http(io, h2, activity.idle(first)).await;
        }
        Some(cfg) => {
            let tcp = super::backlog::Paced::new(tcp, budget.clone());
            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
            let stream = tokio::select! {
                s = acceptor.accept(tcp) => s,
                _ = activity.idle(first) => return,
            };
            let Ok(stream) = stream else { return };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            let io = super::backlog::PacedTls::new(stream, budget);
            serving.http(io, h2, activity.idle(first)).await;
        }
    }
}

/// Whether a plain connection opens with HTTP/2's preface (prior knowledge): its first four bytes
/// are `PRI ` (no HTTP/1.1 method is PRI). Bytes are looked at, not taken.
async fn prior_knowledge(tcp: &tokio::net::TcpStream) -> bool {
    let mut head = [0u8; 4];
    loop {
        match tcp.peek(&mut head).await {
            Ok(n) if n > 0 && b"PRI ".starts_with(&head[..n]) => {
                if n == head.len() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            _ => return false,
        }
    }
}

/// What every request on one connection shares.
struct Serving {
    peer: SocketAddr,
    https: bool,
    budget: Arc<super::backlog::Budget>,
    shared: Arc<Shared>,
    tests: Arc<Tests>,
    activity: Arc<Activity>,
}

impl Serving {
    /// What answering one request needs (it counts as served while its answer lives).
    fn ctx(&self) -> Ctx {
        Ctx {
            peer: self.peer,
            https: self.https,
            budget: self.budget.clone(),
            shared: self.shared.clone(),
            tests: self.tests.clone(),
            active: self.activity.begin(),
        }
    }

    /// Serves HTTP/2 (`h2`) or HTTP/1.1 on `io` until the connection ends or `idle` returns.
    async fn http<T>(self, io: T, h2: bool, idle: impl Future<Output = ()>)
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        if h2 {
            let budget = self.budget.clone();
            let serving = http2::serve(io, budget, move |req| answer(req, self.ctx()));
            tokio::select! { _ = serving => {}, _ = idle => {} }
        } else {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let answered = answer(req, self.ctx());
                async move { Ok::<_, Infallible>(answered.await) }
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.max_buf_size(H1_READ_BUF);
            let conn = http.serve_connection(TokioIo::new(io), svc);
            tokio::select! { _ = conn => {}, _ = idle => {} }
        }
    }
}

/// What answering a request needs.
struct Ctx {
    peer: SocketAddr,
    https: bool,
    /// The connection's unsent-data budget (the large object's chunk size).
    budget: Arc<super::backlog::Budget>,
    shared: Arc<Shared>,
    tests: Arc<Tests>,
    /// The request counts as being served while this lives (it goes into a streaming body).
    active: Active,
}

/// Answers one request, whichever HTTP carried it.
async fn answer<B>(req: Request<B>, ctx: Ctx) -> Answer
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
{
    let shared = &ctx.shared;
    if shared.keyed_only(Keyless::Rpm) {
        shared.count_refused(RefusalKind::Keyed);
        return plain(
            StatusCode::FORBIDDEN,
            "this server requires a landspeed key, which the responsiveness test cannot carry, and does not open rpm\n",
        );
    }
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::GET, rpm::CONFIG_PATH | "/.well-known/nq") => config(&req, ctx.https),
        (&Method::GET, rpm::SMALL_PATH) => octets(Full::new(Bytes::from_static(b"x")).boxed()),
        (&Method::GET, rpm::LARGE_PATH) => match ctx.tests.join(shared, ctx.peer) {
            Ok(t) => octets(Large::new(t, ctx.active, ctx.budget).boxed()),
            Err(refused) => *refused,
        },
        (&Method::POST, rpm::UPLOAD_PATH | "/slurp") => match ctx.tests.join(shared, ctx.peer) {
            Ok(t) => sink(req.into_body(), t).await,
            Err(refused) => *refused,
        },
        _ => plain(
            StatusCode::NOT_FOUND,
            "not one of /config, /small, /large, /upload\n",
        ),
    }
}

/// An answer of bytes (the objects).
fn octets(body: BoxBody<Bytes, Infallible>) -> Answer {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/octet-stream"),
    );
    r
}

/// The configuration, its URLs on the host and port the client reached (its Host header, or the
/// HTTP/2 authority). Not a test: the transfers are, each counted when it starts.
fn config<B>(req: &Request<B>, https: bool) -> Answer {
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

/// Reads and discards an upload, counted and paced as its test's, until it ends, `MAX_TRANSFER`
/// passes or the test is cut (503 with the reason).
async fn sink<B: Body<Data = Bytes> + Unpin>(mut body: B, t: Transfer) -> Answer {
    let until = tokio::time::Instant::now() + MAX_TRANSFER;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(until, body.frame()).await {
        let n = frame.data_ref().map_or(0, |d| d.len() as u64);
        match t.moved(n, false) {
            Ok(None) => {}
            Ok(Some(wait)) => {
                if tokio::time::timeout_at(until, tokio::time::sleep(wait))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Err(cut) => return plain(StatusCode::SERVICE_UNAVAILABLE, &format!("{cut}\n")),
        }
    }
    plain(StatusCode::OK, "{}")
}

/// The large object: `LARGE_BYTES` of one repeated chunk, counted and paced as its test's, ended
/// after `MAX_TRANSFER` or when the test is cut.
struct Large {
    left: u64,
    until: std::time::Instant,
    transfer: Transfer,
    /// A paced transfer's chunk: at most about 10 ms of its rate (at least 4 KiB).
    paced_chunk: Option<usize>,
    budget: Arc<super::backlog::Budget>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    _active: Active,
}

/// The chunk the large object repeats.
static CHUNK: [u8; 256 * 1024] = [b'x'; 256 * 1024];

impl Large {
    fn new(transfer: Transfer, active: Active, budget: Arc<super::backlog::Budget>) -> Large {
        let paced_chunk = transfer
            .rate_bps()
            .map(|r| ((r / 8.0 * 0.01) as usize).clamp(4096, CHUNK.len()));
        Large {
            left: LARGE_BYTES,
            until: std::time::Instant::now() + MAX_TRANSFER,
            transfer,
            paced_chunk,
            budget,
            pause: None,
            _active: active,
        }
    }

    /// The next chunk's size: the connection's budget's share (draft-09's 5 ms), within a paced
    /// transfer's chunk.
    fn chunk(&self) -> usize {
        let share = self.budget.chunk_bytes();
        self.paced_chunk.map_or(share, |p| p.min(share))
    }
}

impl Body for Large {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(p) = self.pause.as_mut() {
            if p.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.pause = None;
        }
        if self.left == 0 || std::time::Instant::now() >= self.until {
            return Poll::Ready(None);
        }
        let n = self.left.min(self.chunk() as u64) as usize;
        match self.transfer.moved(n as u64, true) {
            Err(_) => return Poll::Ready(None),
            Ok(Some(wait)) => self.pause = Some(Box::pin(tokio::time::sleep(wait))),
            Ok(None) => {}
        }
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&CHUNK[..n])))))
    }
}
