//! The small HTTP/1.x server behind `serve --metrics` and `exporter`: GET only, one request per
//! connection, and bounded like the test server's greeting handling, so a flood of slow or garbage
//! requests cannot hold it: at most `MAX_CONNECTIONS` connections at once (more are answered 503 and
//! closed), `HEAD_TIMEOUT` for the whole request head, `MAX_HEAD` bytes of it. Requests are parsed by
//! httparse, query strings by form_urlencoded; routing is the caller's.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 32;
/// Time a client has to send its whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head read.
pub const MAX_HEAD: usize = 8 * 1024;

/// A parsed GET request.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The path, without the query.
    pub path: String,
    /// The query's parameters, decoded, in order.
    pub query: Vec<(String, String)>,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A response: status, media type, body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Serves `listener` until `stop` is raised, each connection on its own thread.
pub fn serve(listener: TcpListener, handler: Handler, stop: &AtomicBool) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if open.fetch_add(1, Relaxed) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Relaxed);
                    let _ = respond(&stream, &Response::text(503, "busy: too many connections\n"));
                    continue;
                }
                let (h, open) = (handler.clone(), open.clone());
                std::thread::spawn(move || {
                    connection(stream, &h);
                    open.fetch_sub(1, Relaxed);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn connection(stream: TcpStream, handler: &Handler) {
    let _ = stream.set_nonblocking(false);
    let response = match read_head(&stream).and_then(|head| parse(&head)) {
        Ok(req) => handler(&req),
        Err(r) => r,
    };
    let _ = respond(&stream, &response);
}

/// Reads until the blank line that ends the head, within the time and size bounds.
fn read_head(mut stream: &TcpStream) -> Result<Vec<u8>, Response> {
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Response::text(408, "request head too slow\n"));
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(Response::text(
                    400,
                    "connection closed before the request ended\n",
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => return Err(Response::text(408, "request head too slow\n")),
        }
        if buf.len() > MAX_HEAD {
            return Err(Response::text(431, "request head too large\n"));
        }
    }
    Ok(buf)
}

fn parse(head: &[u8]) -> Result<Request, Response> {
    let Some(h) = landspeed_net::http::RequestHead::parse(head) else {
        return Err(Response::text(400, "malformed HTTP request\n"));
    };
    if h.method != "GET" {
        return Err(Response::text(405, "only GET\n"));
    }
    Ok(Request {
        path: h.path,
        query: form_urlencoded::parse(h.query.as_bytes()).into_owned().collect(),
        headers: h.headers,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn respond(mut stream: &TcpStream, r: &Response) -> std::io::Result<()> {
    let _ = stream.set_write_timeout(Some(HEAD_TIMEOUT));
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(r.body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_is_parsed_with_its_decoded_query_and_headers() {
        let r = parse(b"GET /probe?target=%5B%3A%3A1%5D%3A5201&time=2s HTTP/1.1\r\nHost: x\r\nX-Prometheus-Scrape-Timeout-Seconds: 9.5\r\n\r\n")
            .unwrap();
        assert_eq!(r.path, "/probe");
        assert_eq!(
            r.query,
            vec![
                ("target".into(), "[::1]:5201".into()),
                ("time".into(), "2s".into())
            ]
        );
        assert_eq!(r.header("x-prometheus-scrape-timeout-seconds"), Some("9.5"));
    }

    #[test]
    fn garbage_and_other_methods_are_refused() {
        assert_eq!(parse(b"\x16\x03\x01garbage\r\n\r\n").unwrap_err().status, 400);
        assert_eq!(parse(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap_err().status, 405);
    }
}
