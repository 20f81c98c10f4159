//! landspeed as an ndt7 client (`run --ndt7`): one subtest, the download (`-R`, the server sends) or the
//! upload (the client sends), over WebSocket on plain TCP (`ws://`) or TLS (`wss://`), as M-Lab's
//! spec describes it (landspeed-core's `ndt7` module has its rules). The result is a `RunResult` like
//! any other: this end's bytes and TCP_INFO, the server's last measurement beside them. landspeed's
//! payload key travels in the query string (landspeed's extension, which other servers keep as
//! metadata): a landspeed server answers with it in its measurements, sends its payload with that key
//! (download, checked here) or checks the upload with it (its counts come back in its measurements).
//! Any other server's bytes are counted and said to be unverified.

use crate::dial::{resolve, run_context, ClientError, ClientEvent, ClientOptions, LiveIntervals};
use landspeed_core::assemble::{assemble, Inputs};
use landspeed_core::config::{Direction, Flow, Test};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport, StreamSample};
use landspeed_core::ndt7::{self, Measurement, MessageSizer, Subtest};
use landspeed_core::payload::{Generator, Pattern, Verifier};
use landspeed_core::result::RunResult;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

/// The client's own limit: a subtest still open this long after the handshake is closed from here
/// (the spec's server ends at 10 s and drops at 13 s).
const CLIENT_LIMIT: Duration = Duration::from_secs(15);

/// The byte stream under the WebSocket: TCP, or TLS over it.
trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// One subtest against an ndt7 server: `tls` for `wss://`.
pub fn run_ndt7(
    opts: &ClientOptions,
    tls: bool,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let subtest = match opts.spec.direction {
        Direction::Reverse => Subtest::Download,
        _ => Subtest::Upload,
    };
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let addr = resolve(opts)?;
    let key = getrandom::u64().unwrap_or(started_unix_s.to_bits());
    let (mut ws, sock) = open(opts, addr, tls, subtest, key)?;
    let local = sock.local_addr().unwrap_or(addr);
    on_event(ClientEvent::Connected { local, remote: addr });
    on_event(ClientEvent::Started {
        streams: 1,
        warnings: vec![],
    });
    let mut run = Run::new(opts, subtest, key, sock);
    match subtest {
        Subtest::Download => run.download(&mut ws, interrupt, on_event),
        Subtest::Upload => run.upload(&mut ws, interrupt, on_event),
    }
    let (spec, client, server) = run.reports(opts)?;
    let mut context = run_context(
        opts,
        local,
        addr,
        &client,
        started_unix_s,
        interrupt.load(Relaxed),
        "ndt7",
    );
    context.foreign_peer = !spec.verify;
    let mut result = assemble(&Inputs {
        spec: &spec,
        context,
        client: &client,
        server: &server,
        client_samples: &run.samples,
        server_samples: &[],
    });
    result.data_path = data_path(subtest, tls);
    result.ndt7 = Some(run.record);
    Ok(result)
}

/// How the bytes moved: WebSocket messages on one connection, one thread.
fn data_path(subtest: Subtest, tls: bool) -> landspeed_core::result::DataPath {
    let messages = "WebSocket binary messages of 8 KiB growing to 1 MiB (ndt7)";
    let (tx, rx) = match subtest {
        Subtest::Download => ("the server's", messages),
        Subtest::Upload => (messages, "the server's"),
    };
    landspeed_core::result::DataPath {
        tx: tx.into(),
        rx: rx.into(),
        engine: format!(
            "ndt7 {} subtest over {}: one connection, one thread, blocking reads and writes",
            subtest.name(),
            if tls { "wss:// (TLS 1.3)" } else { "ws://" }
        ),
        zerocopy_sends: 0,
        zerocopy_copied_pct: None,
        tls: None,
    }
}

/// Connects, secures and upgrades: the WebSocket of `subtest` with ndt7's subprotocol, and a handle
/// on its TCP socket (for TCP_INFO and timeouts).
fn open(
    opts: &ClientOptions,
    addr: SocketAddr,
    tls: bool,
    subtest: Subtest,
    key: u64,
) -> Result<(WebSocket<Box<dyn Conn>>, TcpStream), ClientError> {
    let connect_err = |err| ClientError::Connect { addr, err };
    // The same connect as every client's control connection (-B, --bind-dev, the timeout).
    let tcp = crate::dial::connect(opts, addr, None)?;
    let _ = tcp.set_nodelay(true);
    tcp.set_read_timeout(Some(opts.control_timeout))
        .map_err(connect_err)?;
    tcp.set_write_timeout(Some(opts.control_timeout))
        .map_err(connect_err)?;
    let sock = tcp.try_clone().map_err(connect_err)?;
    let stream: Box<dyn Conn> = if tls {
        let trust = opts.tls_pin.map_or(
            landspeed_engine::tls::Trust::Any,
            landspeed_engine::tls::Trust::Pinned,
        );
        let config = landspeed_engine::tls::client_config(&[Default::default()], trust, &[])
            .map_err(|e| ndt7_err(format!("TLS: {e}")))?;
        let name = rustls::pki_types::ServerName::try_from(opts.host.clone())
            .map_err(|e| ndt7_err(format!("TLS server name {}: {e}", opts.host)))?;
        let conn = rustls::ClientConnection::new(config, name).map_err(|e| ndt7_err(format!("TLS: {e}")))?;
        Box::new(rustls::StreamOwned::new(conn, tcp))
    } else {
        Box::new(tcp)
    };
    // The values are plain words and digits: nothing to escape.
    let query: Vec<String> = metadata(key).iter().map(|(k, v)| format!("{k}={v}")).collect();
    let url = format!(
        "{}://{}/ndt/v7/{}?{}",
        if tls { "wss" } else { "ws" },
        host_port(opts, addr),
        subtest.name(),
        query.join("&"),
    );
    let mut req = tungstenite::client::IntoClientRequest::into_client_request(url.as_str())
        .map_err(|e| ndt7_err(format!("{url}: {e}")))?;
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        tungstenite::http::HeaderValue::from_static(ndt7::SUBPROTOCOL),
    );
    let config = WebSocketConfig::default()
        .max_message_size(Some(ndt7::MAX_MESSAGE_BYTES + 1024))
        .max_frame_size(Some(ndt7::MAX_MESSAGE_BYTES + 1024));
    let (ws, answer) = tungstenite::client::client_with_config(req, stream, Some(config))
        .map_err(|e| ndt7_err(format!("the WebSocket upgrade of {url} failed: {e}")))?;
    let proto = answer.headers().get("sec-websocket-protocol");
    if proto.and_then(|p| p.to_str().ok()) != Some(ndt7::SUBPROTOCOL) {
        return Err(ndt7_err(format!(
            "the server did not agree to the subprotocol {}",
            ndt7::SUBPROTOCOL
        )));
    }
    Ok((ws, sock))
}

/// The metadata this client sends in its query string: its name and version, and its payload key.
fn metadata(key: u64) -> std::collections::BTreeMap<String, String> {
    [
        ("client_name", "landspeed".to_string()),
        ("client_version", landspeed_core::SOFTWARE_VERSION.to_string()),
        (ndt7::PAYLOAD_KEY_PARAM, key.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The server as the URL names it: its name and port (an IPv6 literal in brackets).
fn host_port(opts: &ClientOptions, addr: SocketAddr) -> String {
    if opts.host.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{}]:{}", opts.host, addr.port())
    } else {
        format!("{}:{}", opts.host, addr.port())
    }
}

fn ndt7_err(detail: String) -> ClientError {
    ClientError::Ndt7 { detail }
}

/// What one subtest measured, as it goes.
struct Run {
    subtest: Subtest,
    key: u64,
    started: Instant,
    interval: Duration,
    bytes: u64,
    calls: u64,
    first_byte_s: Option<f64>,
    last_byte_s: Option<f64>,
    /// Download: the server said it sends landspeed's payload with our key (checked from then on).
    verifier: Option<Verifier>,
    verified: u64,
    corrupt: u64,
    first_corruption: Option<landspeed_core::payload::Corruption>,
    /// The server's measurements: how many, and the last.
    measurements: u64,
    last: Option<Measurement>,
    /// The metadata sent and the server's measurements kept, for the result.
    record: landspeed_core::result::Ndt7Record,
    error: Option<String>,
    samples: Vec<IntervalSample>,
    live: LiveIntervals,
    /// This process's CPU time at the start.
    cpu0: landspeed_engine::cpu::CpuSnapshot,
    /// The WebSocket's TCP socket (a second handle), for TCP_INFO, timeouts and readiness.
    sock: TcpStream,
}

impl Run {
    fn new(opts: &ClientOptions, subtest: Subtest, key: u64, sock: TcpStream) -> Run {
        Run {
            subtest,
            key,
            started: Instant::now(),
            interval: opts.spec.interval_s,
            bytes: 0,
            calls: 0,
            first_byte_s: None,
            last_byte_s: None,
            verifier: None,
            verified: 0,
            corrupt: 0,
            first_corruption: None,
            measurements: 0,
            last: None,
            record: landspeed_core::result::Ndt7Record::new(subtest, "client", metadata(key)),
            error: None,
            samples: vec![],
            live: LiveIntervals::default(),
            cpu0: landspeed_engine::cpu::CpuSnapshot::take(),
            sock,
        }
    }

    fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The flow of this subtest's data.
    fn flow(&self) -> Flow {
        match self.subtest {
            Subtest::Download => Flow::ServerToClient,
            Subtest::Upload => Flow::ClientToServer,
        }
    }

    /// Closes every interval that has ended, with this end's count and TCP state.
    fn sample(&mut self, on_event: &mut dyn FnMut(ClientEvent)) {
        let step = self.interval.as_secs_f64().max(0.1);
        while self.elapsed_s() >= (self.samples.len() + 1) as f64 * step {
            let index = self.samples.len() as u32;
            let tcp = landspeed_engine::tcp_info::read(&self.sock)
                .ok()
                .map(|t| t.snapshot());
            let s = IntervalSample {
                index,
                start_s: f64::from(index) * step,
                end_s: f64::from(index + 1) * step,
                omitted: false,
                streams: vec![StreamSample {
                    id: 0,
                    bytes: self.bytes,
                    tcp,
                    udp: None,
                    reads: None,
                    trips: None,
                    trip_bins: None,
                }],
            };
            let interval = self.live.convert(&s, |_| true);
            on_event(ClientEvent::Interval {
                flow: self.flow(),
                interval,
            });
            self.samples.push(s);
        }
    }

    /// Payload bytes moved now.
    fn moved(&mut self, n: usize) {
        let t = self.elapsed_s();
        self.first_byte_s.get_or_insert(t);
        self.last_byte_s = Some(t);
        self.bytes += n as u64;
        self.calls += 1;
    }

    /// A text message: the server's measurement. The first one that names our key, before any
    /// payload, makes the download checked.
    fn measurement(&mut self, text: &str) {
        let Ok(m) = serde_json::from_str::<Measurement>(text) else {
            return;
        };
        self.measurements += 1;
        let ours = m
            .landspeed
            .as_ref()
            .is_some_and(|l| l.payload_key == self.key.to_string());
        if ours && self.subtest == Subtest::Download && self.bytes == 0 && self.verifier.is_none() {
            self.verifier = Some(Verifier::new(&Pattern::new(self.key), ndt7::MAX_MESSAGE_BYTES));
        }
        self.record.keep(m.clone());
        self.last = Some(m);
    }

    /// A binary message of the download: counted, and checked when the server sends our payload.
    fn payload(&mut self, data: &[u8]) {
        #[cfg(feature = "fault-injection")]
        let flipped = landspeed_engine::transport::tcp::fault::flipped(0, self.bytes, data);
        #[cfg(feature = "fault-injection")]
        let data = &flipped[..];
        if let Some(v) = self.verifier.as_mut() {
            if let Some(bad) = v.check(0, self.bytes, data) {
                self.corrupt += bad.bad_blocks.len() as u64;
                self.first_corruption.get_or_insert(bad.first);
            }
            self.verified += data.len() as u64;
        }
        self.moved(data.len());
    }

    /// The download: reads until the server closes (or the client's limit, or Ctrl-C).
    fn download(
        &mut self,
        ws: &mut WebSocket<Box<dyn Conn>>,
        interrupt: &AtomicBool,
        on_event: &mut dyn FnMut(ClientEvent),
    ) {
        let _ = self.sock.set_read_timeout(Some(Duration::from_millis(100)));
        loop {
            self.sample(on_event);
            if self.started.elapsed() >= CLIENT_LIMIT || interrupt.load(Relaxed) {
                return self.close(ws);
            }
            match ws.read() {
                Ok(Message::Binary(b)) => self.payload(&b),
                Ok(Message::Text(t)) => self.measurement(t.as_str()),
                Ok(Message::Close(_)) => return drain(ws),
                Ok(_) => {}
                Err(e) if not_yet(&e) => {}
                Err(tungstenite::Error::ConnectionClosed) => return,
                Err(e) => return self.fail(format!("receiving: {e}")),
            }
        }
    }

    /// The upload: landspeed's payload with our key in messages that grow as the spec says, for
    /// the test time; the server's measurements read as they come; then the close handshake.
    fn upload(
        &mut self,
        ws: &mut WebSocket<Box<dyn Conn>>,
        interrupt: &AtomicBool,
        on_event: &mut dyn FnMut(ClientEvent),
    ) {
        let mut sizer = MessageSizer::new(ndt7::MAX_SCALED_MESSAGE_BYTES);
        let mut gen = Generator::new(&Pattern::new(self.key), ndt7::MAX_SCALED_MESSAGE_BYTES);
        let _ = self.sock.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = self.sock.set_read_timeout(Some(Duration::from_millis(100)));
        let test = Duration::from_secs_f64(ndt7::TEST_S);
        let mut queued = false;
        while self.started.elapsed() < test && !interrupt.load(Relaxed) {
            self.sample(on_event);
            if !queued {
                let data = gen.fill(0, sizer.total(), sizer.size()).to_vec();
                match ws.write(Message::binary(data)) {
                    Ok(()) => {}
                    Err(e) if not_yet(&e) => {}
                    Err(e) => return self.fail(format!("sending: {e}")),
                }
                queued = true;
            }
            match ws.flush() {
                Ok(()) => {
                    queued = false;
                    self.moved(sizer.size());
                    sizer.sent();
                }
                Err(e) if not_yet(&e) => {}
                Err(e) => return self.fail(format!("sending: {e}")),
            }
            if !self.read_ready(ws) {
                return drain(ws);
            }
        }
        self.sample(on_event);
        self.close(ws);
    }

    /// Reads all the server has sent by now (its measurements, its close) without waiting, the
    /// frames tungstenite already holds included: a last measurement and the close that come in
    /// one read are both seen (a readable socket alone would leave the close unread, and the
    /// server would cut the connection while this end still sends). False once the server closed
    /// or the connection ended.
    fn read_ready(&mut self, ws: &mut WebSocket<Box<dyn Conn>>) -> bool {
        if self.sock.set_nonblocking(true).is_err() {
            self.fail("receiving: cannot make the socket non-blocking".into());
            return false;
        }
        let open = loop {
            match ws.read() {
                Ok(Message::Text(t)) => self.measurement(t.as_str()),
                Ok(Message::Close(_)) => break false,
                Ok(_) => {}
                Err(e) if not_yet(&e) => break true,
                Err(tungstenite::Error::ConnectionClosed) => break false,
                Err(e) => {
                    self.fail(format!("receiving: {e}"));
                    break false;
                }
            }
        };
        let _ = self.sock.set_nonblocking(false);
        open
    }

    /// Starts the close handshake and reads (the server's last measurements) until it ends, within
    /// the client's limit.
    fn close(&mut self, ws: &mut WebSocket<Box<dyn Conn>>) {
        let _ = ws.close(None);
        while self.started.elapsed() < CLIENT_LIMIT {
            match ws.read() {
                Ok(Message::Text(t)) => self.measurement(t.as_str()),
                Ok(Message::Binary(b)) if self.subtest == Subtest::Download => self.payload(&b),
                Ok(_) => {}
                Err(e) if not_yet(&e) => {
                    let _ = ws.flush();
                }
                Err(_) => return,
            }
        }
    }

    fn fail(&mut self, why: String) {
        self.error = Some(why);
    }

    /// The server's check of the upload, from its last measurement, when it made one with our key.
    fn server_check(&self) -> Option<&ndt7::LandspeedCheck> {
        let l = self.last.as_ref()?.landspeed.as_ref()?;
        (l.payload_key == self.key.to_string()).then_some(l)
    }

    /// The test as it ran and both ends' reports: this end's from what it counted and its TCP_INFO,
    /// the server's from its last measurement (its count trails, by up to 250 ms).
    fn reports(&self, opts: &ClientOptions) -> Result<(Test, EndpointReport, EndpointReport), ClientError> {
        let checked = match self.subtest {
            Subtest::Download => self.verifier.is_some(),
            Subtest::Upload => self.server_check().is_some(),
        };
        let test_s = Duration::from_secs_f64(ndt7::TEST_S);
        let spec = opts.spec.changed(|s| {
            s.streams = 1;
            s.verify = checked;
            s.payload_key = if checked { self.key } else { 0 };
            s.end = landspeed_core::config::EndCondition::Time(test_s);
        })?;
        let (mine, theirs) = match self.subtest {
            Subtest::Download => (Role::Receiver, Role::Sender),
            Subtest::Upload => (Role::Sender, Role::Receiver),
        };
        let tcp = landspeed_engine::tcp_info::read(&self.sock).ok();
        let local = StreamReport {
            bytes: self.bytes,
            calls: self.calls,
            first_byte_s: self.first_byte_s,
            last_byte_s: self.last_byte_s,
            tcp: tcp.map(|t| t.stats(&[], None)),
            error: self.error.clone(),
            bytes_verified: self.verified,
            corrupt_blocks: self.corrupt,
            first_corruption: self.first_corruption.clone(),
            ..StreamReport::empty(0, self.flow(), mine)
        };
        let said = self.last.as_ref().and_then(|m| m.server_count(self.subtest));
        let check = self.server_check();
        let remote = StreamReport {
            bytes: said.map_or(0, |c| c.bytes),
            first_byte_s: said.map(|_| 0.0),
            last_byte_s: said.map(|c| c.elapsed_s),
            bytes_verified: check.map_or(0, |c| c.bytes_verified),
            corrupt_blocks: check.map_or(0, |c| c.corrupt_blocks),
            ..StreamReport::empty(0, self.flow(), theirs)
        };
        let client = EndpointReport {
            software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
            streams: vec![local],
            elapsed_s: self.elapsed_s(),
            threads: 1,
            cpu: self.cpu0.until(&landspeed_engine::cpu::CpuSnapshot::take()),
            host: landspeed_engine::host::host_info(),
            warnings: self.notes(checked),
            ..EndpointReport::default()
        };
        let server = EndpointReport {
            software: if self.last.as_ref().is_some_and(|m| m.landspeed.is_some()) {
                "landspeed (ndt7)".into()
            } else {
                "ndt7 server".into()
            },
            streams: vec![remote],
            ..EndpointReport::default()
        };
        Ok((spec, client, server))
    }

    /// What the result says about this ndt7 subtest: what was checked, and the server's own view.
    fn notes(&self, checked: bool) -> Vec<String> {
        let mut notes = vec![];
        if !checked {
            notes.push(format!(
                "ndt7: the server did not answer landspeed's payload key, so it is not a landspeed server and nothing was verified ({} bytes counted)",
                self.bytes
            ));
        }
        match self.last.as_ref() {
            None => notes.push("ndt7: the server sent no measurement".into()),
            Some(m) => notes.push(server_view(m, self.subtest, self.measurements)),
        }
        notes
    }
}

/// The server's last measurement in one line: its count, when, and its TCP figures.
fn server_view(m: &Measurement, subtest: Subtest, count: u64) -> String {
    let mut parts = vec![format!("{count} measurements")];
    if let Some(c) = m.server_count(subtest) {
        let from = match (c.source, subtest) {
            (ndt7::CountSource::AppInfo, _) => "",
            (ndt7::CountSource::TcpInfo, Subtest::Download) => {
                " acknowledged (its TCP_INFO, framing included)"
            }
            (ndt7::CountSource::TcpInfo, Subtest::Upload) => " received (its TCP_INFO, framing included)",
        };
        parts.push(format!(
            "the last at {:.2} s: {} bytes{from}",
            c.elapsed_s, c.bytes
        ));
    }
    if let Some(t) = &m.tcp_info {
        let ms = |us: Option<i64>| us.map_or("-".into(), |v| format!("{:.3} ms", v as f64 / 1000.0));
        parts.push(format!("RTT {} (smallest {})", ms(t.rtt_us), ms(t.min_rtt_us)));
        if let Some(b) = t.bytes_retrans {
            parts.push(format!("{b} bytes retransmitted"));
        }
    }
    format!("ndt7 server's view: {}", parts.join(", "))
}

/// The server closed first: send the answering close (queued by the read that saw it).
fn drain(ws: &mut WebSocket<Box<dyn Conn>>) {
    let _ = ws.flush();
}

/// Whether an error only means "not yet" (a timeout of the blocking socket).
fn not_yet(e: &tungstenite::Error) -> bool {
    matches!(e, tungstenite::Error::Io(io) if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}
