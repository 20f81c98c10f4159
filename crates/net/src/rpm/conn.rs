//! One HTTP connection of the responsiveness client: TCP, then TLS (ALPN h2 or http/1.1) for
//! https, then HTTP/2 or HTTP/1.1, each step timed (the foreign probes' figures).

use super::backlog::{Budget, Paced, PacedTls};
use http_body_util::{combinators::BoxBody, BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::{http1, http2};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use landspeed_core::tls::TlsCipher;
use landspeed_engine::tls::{client_config, Trust};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::time::Instant;

/// A request's body.
pub(crate) type ReqBody = BoxBody<Bytes, Infallible>;

/// Where a URL points.
/// Why a URL cannot be tested.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// Not a URL at all.
    #[error("'{url}' is not a URL: {err}")]
    NotUrl {
        /// What was given.
        url: String,
        /// The parser's reason.
        err: hyper::http::uri::InvalidUri,
    },
    /// A scheme other than http or https.
    #[error("'{0}': only http:// and https:// URLs are tested")]
    Scheme(String),
    /// No host in it.
    #[error("'{0}' names no host")]
    NoHost(String),
}

/// Why a connection to a URL's server could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The TCP connection failed.
    #[error("cannot connect to {host}:{port}: {err}")]
    Connect {
        /// Where to.
        host: String,
        /// The port.
        port: u16,
        /// Why not.
        err: std::io::Error,
    },
    /// This end's TLS configuration could not be made.
    #[error(transparent)]
    TlsConfig(#[from] landspeed_engine::tls::TlsError),
    /// The host cannot be a TLS server name.
    #[error("'{0}' is not a host name TLS can use")]
    ServerName(String),
    /// The TLS handshake failed.
    #[error("TLS with {host}: {err}")]
    Tls {
        /// The server's name.
        host: String,
        /// Why.
        err: std::io::Error,
    },
    /// The HTTP/2 or HTTP/1.1 handshake failed.
    #[error("{version}: {err}")]
    Http {
        /// "HTTP/2" or "HTTP/1.1".
        version: &'static str,
        /// Why.
        err: hyper::Error,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Target {
    https: bool,
    host: String,
    port: u16,
    /// The path and query.
    path: String,
    /// `host:port` as the URL gave it (the Host header, HTTP/2's authority).
    authority: String,
    /// Connect here instead of to `host` (the configuration's `test_endpoint`); TLS's server name
    /// and the Host stay the URL's.
    connect_to: Option<String>,
}

impl Target {
    /// Parses an http:// or https:// URL.
    pub(crate) fn parse(url: &str) -> Result<Target, UrlError> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|err| UrlError::NotUrl { url: url.into(), err })?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(UrlError::Scheme(url.into())),
        };
        let host = uri.host().ok_or_else(|| UrlError::NoHost(url.into()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path = uri
            .path_and_query()
            .map_or("/".into(), |p| p.as_str().to_string());
        let authority = uri.authority().map_or(host.clone(), |a| a.as_str().to_string());
        Ok(Target {
            https,
            host,
            port,
            path,
            authority,
            connect_to: None,
        })
    }

    /// The same URL reached at `endpoint` when one is given (the configuration's `test_endpoint`).
    pub(crate) fn via(mut self, endpoint: Option<&str>) -> Target {
        self.connect_to = endpoint.map(|e| e.trim_start_matches('[').trim_end_matches(']').to_string());
        self
    }

    /// The host the TCP connection goes to.
    fn connect_host(&self) -> &str {
        self.connect_to.as_deref().unwrap_or(&self.host)
    }

    fn request(&self, method: hyper::Method, body: ReqBody) -> Request<ReqBody> {
        let mut r = Request::new(body);
        *r.method_mut() = method;
        *r.uri_mut() = self.to_string().parse().unwrap_or_default();
        if let Ok(h) = self.authority.parse() {
            r.headers_mut().insert(hyper::header::HOST, h);
        }
        r.headers_mut().insert(
            hyper::header::ACCEPT_ENCODING,
            hyper::header::HeaderValue::from_static("identity"),
        );
        r
    }

    /// A GET of this URL.
    pub(crate) fn get(&self) -> Request<ReqBody> {
        self.request(hyper::Method::GET, Empty::new().boxed())
    }

    /// A POST of `body` to this URL, typed as draft-09 asks (application/octet-stream).
    pub(crate) fn post(&self, body: ReqBody) -> Request<ReqBody> {
        let mut r = self.request(hyper::Method::POST, body);
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/octet-stream"),
        );
        r
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.path)
    }
}

/// A connection's request side.
pub(crate) enum Sender {
    /// HTTP/1.1: one request at a time.
    H1(http1::SendRequest<ReqBody>),
    /// HTTP/2: many at once (a clone sends on the same connection).
    H2(http2::SendRequest<ReqBody>),
}

impl Sender {
    /// Sends `req` once the connection can take it.
    pub(crate) async fn send(
        &mut self,
        mut req: Request<ReqBody>,
    ) -> Result<Response<Incoming>, hyper::Error> {
        match self {
            Sender::H1(s) => {
                // HTTP/1.1 wants the path alone on the request line.
                let path = req
                    .uri()
                    .path_and_query()
                    .map_or("/".into(), |p| p.as_str().to_string());
                *req.uri_mut() = path.parse().unwrap_or_default();
                s.ready().await?;
                s.send_request(req).await
            }
            Sender::H2(s) => {
                // HTTP/2 carries the host as :authority; some servers (nginx) refuse a Host beside it.
                req.headers_mut().remove(hyper::header::HOST);
                s.ready().await?;
                s.send_request(req).await
            }
        }
    }
}

/// An open connection and what its handshakes took.
pub(crate) struct Opened {
    pub(crate) sender: Sender,
    pub(crate) tcp_ms: f64,
    pub(crate) tls_ms: Option<f64>,
    /// Its unsent-data budget (an upload's chunk size).
    pub(crate) budget: Arc<Budget>,
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Connects to `t`: HTTP/2 unless `http1` (over TLS, as ALPN settles it).
pub(crate) async fn open(t: &Target, http1: bool) -> Result<Opened, ConnError> {
    let at = Instant::now();
    let tcp = tokio::net::TcpStream::connect((t.connect_host(), t.port))
        .await
        .map_err(|err| ConnError::Connect {
            host: t.connect_host().into(),
            port: t.port,
            err,
        })?;
    let _ = tcp.set_nodelay(true);
    let tcp_ms = ms(at);
    // Unsent data near 5 ms of the connection's rate in the kernel, TLS and HTTP/2 together
    // (draft-09): an upload's self probe waits behind the path's queue, not this host's buffers.
    let budget = Budget::new(t.https);
    let tcp = Paced::new(tcp, budget.clone());
    if !t.https {
        let sender = handshake(TokioIo::new(tcp), !http1).await?;
        return Ok(Opened {
            sender,
            tcp_ms,
            tls_ms: None,
            budget,
        });
    }
    let alpn: &[&[u8]] = if http1 {
        &[b"http/1.1"]
    } else {
        &[b"h2", b"http/1.1"]
    };
    let cfg = client_config(&TlsCipher::ALL, Trust::Any, alpn)?;
    let name = rustls::pki_types::ServerName::try_from(t.host.clone())
        .map_err(|_| ConnError::ServerName(t.host.clone()))?;
    let at = Instant::now();
    let tls = tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .map_err(|err| ConnError::Tls {
            host: t.host.clone(),
            err,
        })?;
    let tls_ms = Some(ms(at));
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let sender = handshake(TokioIo::new(PacedTls::new(tls, budget.clone())), h2).await?;
    Ok(Opened {
        sender,
        tcp_ms,
        tls_ms,
        budget,
    })
}

/// HTTP/2 or HTTP/1.1 on `io`, its connection driven by a task of its own.
async fn handshake<I>(io: I, h2: bool) -> Result<Sender, ConnError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    if h2 {
        let (s, conn) = http2::Builder::new(TokioExecutor::new())
            .adaptive_window(true)
            // One upload chunk queued at a time (its size is the budget's share).
            .max_send_buf_size(super::backlog::FLOOR_BYTES as usize)
            .handshake(io)
            .await
            .map_err(|err| ConnError::Http {
                version: "HTTP/2",
                err,
            })?;
        tokio::spawn(conn);
        Ok(Sender::H2(s))
    } else {
        let (s, conn) = http1::handshake(io).await.map_err(|err| ConnError::Http {
            version: "HTTP/1.1",
            err,
        })?;
        tokio::spawn(conn);
        Ok(Sender::H1(s))
    }
}
