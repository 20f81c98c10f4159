//! The QUIC performance protocol (draft-banks-quic-performance, ALPN "perf") as a server, so quinn's
//! perf client, msquic's secnetperf, quic-go's and aioquic peers can test against `landspeed serve`.
//! Each stream the client opens starts with an 8-byte big-endian count N; the server drains the
//! rest of the request (the upload) to its FIN, then sends N bytes and FIN, on the same stream for a
//! bidirectional request and on a new unidirectional stream for a unidirectional one. N = u64::MAX
//! means "until the client stops the stream". The bytes sent are landspeed's payload pattern (a
//! foreign client cannot check them; the draft leaves the content open).
//!
//! The server's limits hold: a connection counts against --max-tests while it lives, --allow was
//! checked at accept, --max-bytes caps each response and --max-duration (else `MAX_DURATION`) every
//! connection; a server that requires authentication refuses the protocol, which has none.

use crate::host::{Keyless, RefusalKind, Shared};
use landspeed_core::payload::{Generator, Pattern};
use landspeed_core::quic_perf::{RequestDecoder, Response};
use landspeed_core::server_log::{ServerEvent, TestLog};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a performance-protocol connection may run when the server sets no --max-duration.
const MAX_DURATION: Duration = Duration::from_secs(120);

/// Bytes per write of a response.
const CHUNK: usize = 256 * 1024;

/// Both directions' byte counts of one connection.
#[derive(Default)]
struct Counts {
    up: AtomicU64,
    down: AtomicU64,
    streams: AtomicU64,
}

/// Serves one performance-protocol connection to its end, then logs it as a test.
pub(crate) async fn serve(conn: quinn::Connection, peer: SocketAddr, shared: &Shared) {
    let mut log = TestLog::new(peer, "quic perf");
    if shared.keyed_only(Keyless::QuicPerf) {
        conn.close(2u32.into(), b"this server requires authentication");
        refused(
            shared,
            peer,
            RefusalKind::Keyed,
            "the QUIC performance protocol cannot authenticate, and this keyed server does not open it",
        );
        return;
    }
    let Ok(_slot) = shared.slot(peer) else {
        conn.close(2u32.into(), b"busy");
        refused(
            shared,
            peer,
            RefusalKind::Busy,
            "busy: --max-tests tests are running",
        );
        return;
    };
    let limit = shared
        .opts
        .limits
        .max_duration_s
        .map_or(MAX_DURATION, Duration::from_secs_f64);
    let max_bytes = shared.opts.limits.max_bytes;
    let counts = Arc::new(Counts::default());
    let started = Instant::now();
    let ended = tokio::time::timeout(limit, requests(&conn, max_bytes, &counts)).await;
    if ended.is_err() {
        conn.close(0u32.into(), b"time limit");
        log.error = Some(format!("stopped at the server's time limit of {limit:?}"));
    }
    log.duration_s = started.elapsed().as_secs_f64();
    log.bytes_received = counts.up.load(Relaxed);
    log.bytes_sent = counts.down.load(Relaxed);
    log.streams = counts.streams.load(Relaxed) as u32;
    shared.emit(ServerEvent::Test(log));
}

fn refused(shared: &Shared, peer: SocketAddr, kind: RefusalKind, reason: &str) {
    shared.refuse(peer, kind, reason);
}

/// Answers every request of the connection until the client closes it.
async fn requests(conn: &quinn::Connection, max_bytes: Option<u64>, counts: &Arc<Counts>) {
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            bi = conn.accept_bi() => match bi {
                Ok((send, recv)) => { tasks.spawn(bidi(send, recv, max_bytes, counts.clone())); }
                Err(_) => break,
            },
            uni = conn.accept_uni() => match uni {
                Ok(recv) => { tasks.spawn(uni_request(conn.clone(), recv, max_bytes, counts.clone())); }
                Err(_) => break,
            },
        }
    }
    tasks.abort_all();
}

/// Reads the request: the 8-byte size, then the upload drained to FIN. None when the stream ended
/// before the size.
async fn request(recv: &mut quinn::RecvStream, counts: &Counts) -> Option<u64> {
    let mut d = RequestDecoder::new();
    loop {
        match recv.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => {
                let before = d.uploaded();
                d.push(&chunk.bytes);
                counts.up.fetch_add(d.uploaded() - before, Relaxed);
            }
            Ok(None) => break,
            Err(_) => return None,
        }
    }
    counts.streams.fetch_add(1, Relaxed);
    match d.finish()? {
        Response::Bytes(n) => Some(n),
        Response::UntilStopped => Some(u64::MAX),
    }
}

async fn bidi(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    max: Option<u64>,
    counts: Arc<Counts>,
) {
    if let Some(n) = request(&mut recv, &counts).await {
        respond(&mut send, n, max, &counts).await;
    }
}

async fn uni_request(
    conn: quinn::Connection,
    mut recv: quinn::RecvStream,
    max: Option<u64>,
    counts: Arc<Counts>,
) {
    let Some(n) = request(&mut recv, &counts).await else {
        return;
    };
    if n > 0 {
        if let Ok(mut send) = conn.open_uni().await {
            respond(&mut send, n, max, &counts).await;
        }
    }
}

/// The bytes every response is cut from, derived once: deriving a pattern checks its pool for
/// repeats, which took about a millisecond, once per request when it was done here each time
/// (small requests, as a request/response test sends, then ran at about 1,000 a second).
fn pattern() -> &'static Pattern {
    static PATTERN: std::sync::OnceLock<Pattern> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| Pattern::new(0x5eed_0f9e))
}

/// Sends `n` bytes (u64::MAX: until the client stops the stream), at most `max`, then FIN.
async fn respond(send: &mut quinn::SendStream, n: u64, max: Option<u64>, counts: &Counts) {
    let total = max.map_or(n, |m| n.min(m));
    let mut gen = Generator::new(pattern(), total.clamp(1, CHUNK as u64) as usize);
    let mut sent = 0u64;
    while sent < total {
        let len = (total - sent).min(CHUNK as u64) as usize;
        match send.write(gen.fill(0, sent, len)).await {
            Ok(w) => {
                sent += w as u64;
                counts.down.fetch_add(w as u64, Relaxed);
            }
            Err(_) => return,
        }
    }
    let _ = send.finish();
    let _ = send.stopped().await;
}
