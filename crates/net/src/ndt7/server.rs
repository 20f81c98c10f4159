//! `serve --ndt7 ADDR`: M-Lab's ndt7 speed test (landspeed-core's `ndt7` module has the protocol's
//! rules) on its own address, so any ndt7 client or browser can test against a landspeed server. One
//! thread accepts; each connection gets a thread for its HTTP request and its subtest, at most
//! `HANDSHAKING_CAPS` still in their request at once, shared fairly by address and network (so idle connections
//! cannot take every thread). A request is checked like any other test (`--allow`, the per-minute
//! rate, `--max-tests`) before the WebSocket handshake; each subtest is one line in the server log.

mod frame;
mod progress;
mod reader;
mod record;
mod upload;

use progress::{closing, not_yet, Check, Conn, Progress, Reporter, Waits};
use record::direction;

use crate::host::{RefusalKind, ServerEvent, Shared};
use crate::http::RequestHead as Request;
use landspeed_core::ndt7::{self, Due, MessageSizer, Subtest, Timetable};
use landspeed_core::server_log::TestLog;
use landspeed_proto::admission;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

/// Connections still sending their HTTP request (each holds a thread), shared fairly by address and
/// network (`proto::admission`): a newcomer from a smaller holder takes the place of the
/// largest holder's oldest connection, which is closed.
pub(crate) const HANDSHAKING_CAPS: admission::Caps = admission::Caps {
    total: 64,
    per_address: 4,
    per_network: 16,
};
/// The memory a subtest is charged against `--max-memory`: the reader's piece, the download's
/// payload generator (one scaled message), the queue for a client that does not read, the record's
/// client measurements, and 64 KiB for the rest (TLS's and tungstenite's buffers).
pub(crate) const SUBTEST_BYTES: u64 = (reader::CHUNK
    + ndt7::MAX_SCALED_MESSAGE_BYTES
    + upload::MAX_QUEUED
    + record::MAX_CLIENT_BYTES
    + 64 * 1024) as u64;
/// The longest HTTP request head read.
const MAX_HEAD: usize = 8192;

/// The ndt7 listener: where it listens and whether it speaks TLS (wss) or plain HTTP (ws).
pub(crate) struct Ndt7Listener {
    pub(crate) listener: TcpListener,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
}

/// Accepts ndt7 connections until the server shuts down: waits for the listener to be readable (at
/// most 100 ms, to see a shutdown), then takes every connection waiting.
pub(crate) fn serve(ndt: Ndt7Listener, shared: Arc<Shared>) {
    let handshaking = crate::host::admission_pool(HANDSHAKING_CAPS);
    while !shared.shutdown.load(Relaxed) {
        match landspeed_engine::os::wait_readable(&ndt.listener, Duration::from_millis(100)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
        // Out of descriptors or similar: stop for this round, keep serving.
        while let Ok((stream, peer)) = ndt.listener.accept() {
            take(stream, peer, &ndt, &shared, &handshaking);
        }
    }
}

/// Gives an accepted connection its thread and a place among those still sending their request
/// (`HANDSHAKING_CAPS`), or closes it when its address or network holds its share.
fn take(
    stream: TcpStream,
    peer: SocketAddr,
    ndt: &Ndt7Listener,
    shared: &Arc<Shared>,
    handshaking: &crate::host::Admission,
) {
    let place = match crate::host::take_place(handshaking, peer, crate::host::tcp_closer(&stream)) {
        Ok(p) => p,
        Err(why) => {
            return shared.refuse(
                peer,
                RefusalKind::Busy,
                format!("ndt7: {why} already sending their request"),
            );
        }
    };
    shared.connection_started();
    let (shared2, tls) = (shared.clone(), ndt.tls.clone());
    let spawned = std::thread::Builder::new().name("ndt7".into()).spawn(move || {
        connection(stream, peer, tls, &shared2, place);
        shared2.connection_ended();
    });
    if spawned.is_err() {
        shared.connection_ended();
    }
}

/// One connection: its request, then its subtest, then its log line.
fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    shared: &Shared,
    handshaking: crate::host::Place,
) {
    let handshake = shared.opts.handshake_timeout;
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_read_timeout(Some(handshake));
    let _ = tcp.set_write_timeout(Some(handshake));
    let Ok(sock) = tcp.try_clone() else {
        return;
    };
    let tls_on = tls.is_some();
    let mut stream: Box<dyn Conn> = match tls {
        None => Box::new(tcp),
        Some(cfg) => match rustls::ServerConnection::new(cfg) {
            Ok(c) => Box::new(rustls::StreamOwned::new(c, tcp)),
            Err(_) => return,
        },
    };
    // One deadline for the TLS handshake and the whole request head, however the bytes trickle.
    let head = read_head(&mut stream, &sock, Instant::now() + handshake);
    let evicted = handshaking.evicted().load(Relaxed);
    drop(handshaking);
    if evicted {
        return shared.refuse(
            peer,
            RefusalKind::Evicted,
            "ndt7: closed inside its request: its place went to a client from an address holding fewer",
        );
    }
    let _ = sock.set_read_timeout(Some(handshake));
    let (head, rest) = match head {
        Ok(h) => h,
        Err(reason) => {
            if let Some(reason) = reason {
                shared.refuse(peer, RefusalKind::Greeting, format!("ndt7: {reason}"));
            }
            return;
        }
    };
    let Some(req) = Request::parse(&head) else {
        return refuse(stream, peer, shared, Answer::new(400, "not an HTTP/1.1 request"));
    };
    if req.method == "GET" && matches!(req.path.as_str(), "/" | "/index.html" | PROBE_PATH) {
        if !shared.allowed(peer) {
            let answer = Answer::new(403, "this address may not test here");
            return refuse(stream, peer, shared, answer);
        }
        return match req.path.as_str() {
            PROBE_PATH => probe(stream),
            _ => page(stream),
        };
    }
    let (subtest, metadata) = match accept(&req, peer, shared) {
        Ok(t) => t,
        Err(answer) => return refuse(stream, peer, shared, answer),
    };
    let _held = match hold(peer, shared) {
        Ok(h) => h,
        Err(answer) => return refuse(stream, peer, shared, answer),
    };
    let started = Instant::now();
    let asked = asked(peer, subtest, &metadata, tls_on, shared);
    let log = match upgrade(&mut stream, &req) {
        Ok(()) => run(stream, rest, &sock, &asked, started),
        Err(e) => failed(peer, subtest, format!("WebSocket handshake: {e}")),
    };
    shared.emit(ServerEvent::Test(log));
}

/// The subtest as asked, held to this server's limits on length, bytes and rate.
fn asked<'a>(
    peer: SocketAddr,
    subtest: Subtest,
    metadata: &'a BTreeMap<String, String>,
    tls: bool,
    shared: &Shared,
) -> record::Asked<'a> {
    let l = &shared.opts.limits;
    record::Asked {
        peer,
        subtest,
        metadata,
        tls,
        limits: ndt7::SubtestLimits {
            test_s: l.max_duration_s,
            max_bytes: l.max_bytes,
            rate_bps: l.max_rate_bps,
        },
    }
}

/// A test slot (`--max-tests`, shared with every protocol) and the subtest's memory (`SUBTEST_BYTES`
/// of `--max-memory`), held while it runs; or the 503 that says which is missing.
fn hold(
    peer: SocketAddr,
    shared: &Shared,
) -> Result<(crate::host::Slot, Option<crate::host::MemoryHold>), Answer> {
    let Ok(slot) = shared.slot(peer) else {
        return Err(Answer::new(
            503,
            "busy: every test slot is taken; retry in a few seconds",
        ));
    };
    let Ok(memory) = shared.hold_bytes(SUBTEST_BYTES) else {
        let mut a = Answer::new(
            503,
            "busy: the tests running now hold this server's memory budget; retry in a few seconds",
        );
        a.kind = RefusalKind::Memory;
        return Err(a);
    };
    Ok((slot, memory))
}

/// The speed-test page: one self-contained file (its script and style inline, nothing from another
/// site), which runs both subtests against this address.
const PAGE: &str = include_str!("page.html");

/// Serves the page (to addresses `--allow` admits: the caller checks).
fn page(mut stream: Box<dyn Conn>) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
         connect-src 'self'; img-src 'self' blob:\r\nX-Content-Type-Options: nosniff\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        PAGE.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(PAGE.as_bytes());
    let _ = stream.flush();
}

/// Where the page's latency probes go: a one-byte answer on a connection of its own.
pub(crate) const PROBE_PATH: &str = "/landspeed/probe";

/// Answers a latency probe (to addresses `--allow` admits: the caller checks): one byte, never
/// cached, and the connection closed after it, so the page's next probe opens a fresh one (the
/// draft's foreign probe: a new connection's handshake and one request, timed apart by the browser).
fn probe(mut stream: Box<dyn Conn>) {
    let answer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\
                  Cache-Control: no-store\r\nConnection: close\r\n\r\n1";
    let _ = stream.write_all(answer.as_bytes());
    let _ = stream.flush();
}

/// An HTTP answer that ends a connection (no WebSocket).
struct Answer {
    status: u16,
    text: String,
    retry_after_s: Option<u64>,
    /// What the refusal counts as.
    kind: RefusalKind,
}

impl Answer {
    /// An answer counted by its status: 403 not allowed, 429 rate limited, 503 busy, else malformed.
    fn new(status: u16, text: &str) -> Answer {
        let kind = match status {
            403 => RefusalKind::NotAllowed,
            429 => RefusalKind::RateLimited,
            503 => RefusalKind::Busy,
            _ => RefusalKind::Malformed,
        };
        Answer {
            status,
            text: text.into(),
            retry_after_s: None,
            kind,
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Writes `answer` and closes; logs a refusal for everything but a plain 404.
fn refuse(mut stream: Box<dyn Conn>, peer: SocketAddr, shared: &Shared, answer: Answer) {
    let body = format!("{}\n", answer.text);
    let retry = answer
        .retry_after_s
        .map(|s| format!("Retry-After: {s}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{retry}Connection: close\r\n\r\n",
        answer.status,
        reason_phrase(answer.status),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    if answer.status != 404 {
        shared.refuse(
            peer,
            answer.kind,
            format!("ndt7: {} {}", answer.status, answer.text),
        );
    }
}

/// Reads an HTTP request head (up to the blank line) within `deadline`: the head, and any bytes read
/// past it. The error is a reason to log, or None for a connection that closed without a byte.
fn read_head(
    stream: &mut dyn Conn,
    sock: &TcpStream,
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<u8>), Option<String>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(Some(format!("request head over {MAX_HEAD} bytes")));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Some(format!("no complete request in time ({} bytes)", buf.len())));
        }
        // Each read waits at most what is left of the deadline, so no read can stretch it.
        let _ = sock.set_read_timeout(Some(left));
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Err(None),
            Ok(0) => return Err(Some("closed the connection inside its request".into())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(Some(format!("no complete request in time ({} bytes)", buf.len())))
            }
            Err(e) => return Err(Some(format!("request: {e}"))),
        }
    }
}

/// Checks a request against the protocol and the server's limits: the subtest and the client's
/// metadata, or the answer that refuses it.
fn accept(
    req: &Request,
    peer: SocketAddr,
    shared: &Shared,
) -> Result<(Subtest, BTreeMap<String, String>), Answer> {
    let Some(subtest) = Subtest::from_path(&req.path) else {
        return Err(Answer::new(
            404,
            "not found: ndt7 tests are at /ndt/v7/download and /ndt/v7/upload",
        ));
    };
    if req.method != "GET" {
        return Err(Answer::new(405, "ndt7 subtests are WebSocket upgrades of a GET"));
    }
    if !req.lists("upgrade", "websocket") || !req.lists("connection", "upgrade") {
        return Err(Answer::new(
            426,
            "this is an ndt7 WebSocket endpoint: upgrade to websocket",
        ));
    }
    if !req.lists("sec-websocket-protocol", ndt7::SUBPROTOCOL) {
        return Err(Answer::new(
            400,
            "missing the WebSocket subprotocol net.measurementlab.ndt.v7",
        ));
    }
    if req.header("sec-websocket-version") != Some("13") || req.header("sec-websocket-key").is_none() {
        return Err(Answer::new(
            400,
            "a WebSocket upgrade needs Sec-WebSocket-Version 13 and a key",
        ));
    }
    let metadata = ndt7::parse_query(&req.query).map_err(|e| Answer::new(400, &e.to_string()))?;
    if !shared.allowed(peer) {
        return Err(Answer::new(403, "this address may not test here"));
    }
    if shared.keyed_only(crate::host::Keyless::Ndt7) {
        let mut a = Answer::new(
            403,
            "this server requires a landspeed key, which ndt7 cannot carry, and does not open ndt7",
        );
        a.kind = RefusalKind::Keyed;
        return Err(a);
    }
    if let Err(text) = shared.admit(peer) {
        let mut a = Answer::new(429, &text);
        a.retry_after_s = Some(60);
        return Err(a);
    }
    Ok((subtest, metadata))
}

/// Writes the 101 answer that makes the connection a WebSocket with ndt7's subprotocol.
fn upgrade(stream: &mut dyn Conn, req: &Request) -> std::io::Result<()> {
    let key = req.header("sec-websocket-key").unwrap_or("");
    let accept = tungstenite::handshake::derive_accept_key(key.trim().as_bytes());
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {}\r\n\r\n",
        ndt7::SUBPROTOCOL
    );
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

/// A log entry for a subtest that never ran.
fn failed(peer: SocketAddr, subtest: Subtest, error: String) -> TestLog {
    let mut log = TestLog::new(peer, "ndt7");
    log.direction = Some(direction(subtest));
    log.streams = 1;
    log.error = Some(error);
    log
}

/// Runs the subtest on the upgraded connection and returns its log entry.
fn run(
    stream: Box<dyn Conn>,
    rest: Vec<u8>,
    sock: &TcpStream,
    asked: &record::Asked,
    started: Instant,
) -> TestLog {
    let (peer, subtest, metadata) = (asked.peer, asked.subtest, asked.metadata);
    let config = WebSocketConfig::default()
        .max_message_size(Some(ndt7::MAX_MESSAGE_BYTES + 1024))
        .max_frame_size(Some(ndt7::MAX_MESSAGE_BYTES + 1024));
    let info = Reporter::new(sock, subtest, started);
    let mut p = Progress {
        bytes: 0,
        other: 0,
        started,
        now_s: 0.0,
        first_byte_s: None,
        last_byte_s: None,
        error: None,
        check: ndt7::payload_key(metadata).map(Check::new),
        seen: record::Seen::new(asked),
        limits: asked.limits,
    };
    match subtest {
        Subtest::Download => {
            // What the client sends is read by `reader` (at the close), never by tungstenite.
            let mut ws = WebSocket::from_raw_socket(stream, Role::Server, Some(config));
            download(&mut ws, &mut reader::Reader::new(rest), sock, &info, &mut p)
        }
        Subtest::Upload => upload::upload(&mut upload::Frames::new(stream, rest), sock, &info, &mut p),
    }
    let mut log = failed(peer, subtest, String::new());
    log.error = p.error.clone();
    log.duration_s = p.started.elapsed().as_secs_f64();
    match subtest {
        Subtest::Download => {
            log.bytes_sent = p.bytes;
            log.bytes_received = p.other;
        }
        Subtest::Upload => log.bytes_received = p.bytes + p.other,
    }
    if let (Subtest::Upload, Some(c)) = (subtest, &p.check) {
        log.bytes_verified = c.verified;
        log.corrupt_blocks = c.corrupt;
    }
    let client: Vec<String> = metadata
        .iter()
        .filter(|(k, _)| k.starts_with("client_"))
        .map(|(k, v)| format!("{k}={}", v.chars().take(40).collect::<String>()))
        .collect();
    if !client.is_empty() {
        log.protocol = format!("ndt7 ({})", client.join(" "));
    }
    log.result = p.seen.result(asked, &p.counts(), sock).map(Box::new);
    log
}

/// The download: binary messages of landspeed's payload, growing as the spec's appendix says, with a
/// measurement every 250 ms, until 10 s; then the close handshake.
fn download(
    ws: &mut WebSocket<Box<dyn Conn>>,
    reader: &mut reader::Reader,
    sock: &TcpStream,
    info: &Reporter,
    p: &mut Progress,
) {
    let mut t = Timetable::new(p.limits.test_s());
    // Messages grow to 1 MiB at most, as M-Lab's server's do: M-Lab's Go client closes on a larger
    // one (found running it here; docs/ndt7.md).
    let mut sizer = MessageSizer::new(ndt7::MAX_SCALED_MESSAGE_BYTES);
    // A landspeed client named its key: its payload, announced before the first byte of it, so the
    // client knows what it checks. Anyone else gets a random key.
    let key = match &p.check {
        Some(c) => c.key,
        None => getrandom::u64().unwrap_or_else(|_| p.started.elapsed().as_nanos() as u64),
    };
    let pattern = landspeed_core::payload::Pattern::new(key);
    let mut gen = landspeed_core::payload::Generator::new(&pattern, ndt7::MAX_SCALED_MESSAGE_BYTES);
    if p.check.is_some() {
        if let Err(e) = ws.send(Message::text(info.message(sock, p))) {
            return p.fail(&format!("sending a measurement: {e}"));
        }
    }
    // A measurement due goes out between frames, through tungstenite; the binary frames go past it.
    // The end, like a measurement, waits for a frame on its way out.
    let (mut measure, mut ending) = (false, false);
    let mut frame: Option<frame::BinaryFrame> = None;
    let mut waits = Waits::new(sock);
    loop {
        let now = p.clock();
        match t.at(now) {
            Due::CutOff => return p.fail("cut off at the ndt7 hard limit (13 s)"),
            Due::End => ending = true,
            Due::Measure => measure = true,
            Due::Nothing => {}
        }
        if ending && frame.is_none() {
            return close(ws, reader, sock, &mut t, p);
        }
        waits.write(&t, now);
        if frame.is_none() && p.limits.bytes_reached(p.charged()) {
            ending = true;
            continue;
        }
        if frame.is_none() && p.paced() {
            continue;
        }
        if frame.is_none() {
            if std::mem::take(&mut measure) {
                if let Err(e) = ws.write(Message::text(info.message(sock, p))) {
                    if !not_yet(&e) {
                        return p.fail(&format!("sending a measurement: {e}"));
                    }
                }
            }
            match ws.flush() {
                Ok(()) => {}
                Err(e) if not_yet(&e) => continue,
                Err(e) => return p.fail(&format!("sending: {e}")),
            }
            frame = Some(frame::BinaryFrame::new(sizer.total(), sizer.size()));
            sizer.sent();
        }
        let Some(f) = frame.as_mut() else { continue };
        match f.write_to(ws.get_mut(), gen.fill(0, f.offset, f.len)) {
            Ok(()) => {
                p.moved(f.offset + f.len as u64);
                frame = None;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return p.fail(&format!("sending: {e}")),
        }
    }
}

/// Starts the closing handshake at the end of the test time and waits (to the hard limit) for the
/// client's answer, counting what still arrives (read piece by piece, like an upload's; a ping is
/// not answered once the close is out).
fn close(
    ws: &mut WebSocket<Box<dyn Conn>>,
    reader: &mut reader::Reader,
    sock: &TcpStream,
    t: &mut Timetable,
    p: &mut Progress,
) {
    let frame = p.close_reason().map(|reason| tungstenite::protocol::CloseFrame {
        code: tungstenite::protocol::frame::coding::CloseCode::Normal,
        reason: reason.into(),
    });
    if let Err(e) = ws.close(frame) {
        if !not_yet(&e) {
            return;
        }
    }
    closing(sock, t, p, |p| {
        let _ = ws.flush();
        matches!(
            reader.next(ws.get_mut(), p),
            Ok(reader::Got::More | reader::Got::Ping(_))
        )
    });
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A fresh upload's progress, no limits, no key (the reader's tests).
    pub(super) fn progress() -> Progress {
        let metadata = Box::leak(Box::new(BTreeMap::new()));
        let asked = record::Asked {
            peer: "192.0.2.1:4000".parse().unwrap(),
            subtest: Subtest::Upload,
            metadata,
            tls: false,
            limits: ndt7::SubtestLimits::default(),
        };
        Progress {
            bytes: 0,
            other: 0,
            started: Instant::now(),
            now_s: 0.0,
            first_byte_s: None,
            last_byte_s: None,
            error: None,
            check: None,
            seen: record::Seen::new(&asked),
            limits: asked.limits,
        }
    }

    #[test]
    fn requests_are_checked_before_any_upgrade() {
        let ok =
            b"GET /ndt/v7/download?client_name=x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n\
Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Protocol: net.measurementlab.ndt.v7\r\n\r\n";
        let r = Request::parse(ok).unwrap();
        assert_eq!(
            (r.path.as_str(), r.query.as_str()),
            ("/ndt/v7/download", "client_name=x")
        );
        assert!(r.lists("connection", "upgrade"));
        assert!(r.lists("sec-websocket-protocol", ndt7::SUBPROTOCOL));
        assert!(Request::parse(b"\x16\x03\x01garbage\r\n\r\n").is_none());
    }
}
