//! The first bytes of every connection, read by the accepting thread without a thread per connection.
//! A new connection waits here, registered with the poller, until its greeting is complete (landspeed's
//! preamble or iperf3's cookie) or its deadline passes; a client that connects and says nothing, or
//! trickles one byte at a time, costs a table entry and a timer, never a thread. Only a complete control
//! greeting gets a thread (which then takes a test slot or is told "busy"); data streams go straight to
//! their test. The number of connections in this state is capped overall and per address.

use crate::control::{Arrival, ControlWriter, Input};
use crate::host::{tcp_closer, RefusalKind, Shared};
use crate::{iperf2, iperf3, landspeed};
use landspeed_engine::supervisor::Wake;
use landspeed_iperf2::bounceback;
use landspeed_iperf2::detect::{self as iperf2_detect, FirstBytes};
use landspeed_iperf2::header::MAX_HEADER_BYTES as MAX_IPERF2;
use landspeed_iperf3::{State, COOKIE_LEN};
use landspeed_proto::preamble::MAX_LEN as MAX_PREAMBLE;
use landspeed_proto::{classify, Message, Preamble, PreambleError, Refusal, Speaker};
use mio::net::TcpStream as MioStream;
use mio::{Interest, Registry, Token};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections still greeting, at most (all clients together).
pub(super) const MAX_PENDING: usize = 1024;
/// Connections still greeting from one address, at most.
pub(super) const MAX_PENDING_PER_ADDRESS: usize = 64;
/// Connections over those caps kept just long enough to read their first byte, so that each is told
/// "busy" in its own protocol (landspeed's `Rejected`, iperf3's ACCESS_DENIED); past this many the
/// oldest is closed unanswered to make room.
pub(super) const MAX_REFUSING: usize = 256;
/// How long a connection being refused may take to send its first byte.
const REFUSING_WAIT: Duration = Duration::from_secs(1);
/// The longest greeting: a data-stream preamble, an iperf3 cookie or an iperf 2 header.
const MAX_GREETING: usize = max(max(MAX_PREAMBLE, COOKIE_LEN), MAX_IPERF2);

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// What a complete greeting says.
#[derive(Debug, PartialEq)]
pub(super) enum Greeting {
    Control,
    /// A data connection's preamble (kind `D`).
    Data(Preamble),
    Iperf3([u8; COOKIE_LEN]),
    /// An iperf 2 client's header, exactly its bytes.
    Iperf2(Vec<u8>),
    /// An iperf 2 bounceback client's first request: its header's 64 bytes.
    Bounceback(Vec<u8>),
    Unknown(u8),
    Bad(PreambleError),
}

/// Either how many bytes the greeting needs in all, or what it is.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    Need(usize),
    Done(Greeting),
}

/// Classifies the bytes read so far. Pure, so every prefix is tested without sockets.
pub(super) fn step(buf: &[u8]) -> Step {
    let Some(&first) = buf.first() else {
        return Step::Need(1);
    };
    match classify(first) {
        Speaker::Unknown => bounceback_step(buf)
            .or_else(|| iperf2_step(buf))
            .unwrap_or(Step::Done(Greeting::Unknown(first))),
        Speaker::Iperf3 if buf.len() < COOKIE_LEN => Step::Need(COOKIE_LEN),
        Speaker::Iperf3 => {
            let mut c = [0u8; COOKIE_LEN];
            c.copy_from_slice(&buf[..COOKIE_LEN]);
            Step::Done(Greeting::Iperf3(c))
        }
        Speaker::Landspeed => match Preamble::parse(buf) {
            Ok(None) => Step::Need(Preamble::wanted(buf)),
            Ok(Some((Preamble::Control { .. }, _))) => Step::Done(Greeting::Control),
            Ok(Some((p @ Preamble::Data { .. }, _))) => Step::Done(Greeting::Data(p)),
            Err(e) => Step::Done(Greeting::Bad(e)),
        },
    }
}

/// An iperf 2 bounceback request so far (its first word is the bounceback flag alone): how much more
/// its header needs, or the header; None when the bytes are not one.
fn bounceback_step(buf: &[u8]) -> Option<Step> {
    match bounceback::detect(buf) {
        Some(false) => None,
        None => Some(Step::Need(4)),
        Some(true) if buf.len() < bounceback::HEADER_BYTES => Some(Step::Need(bounceback::HEADER_BYTES)),
        Some(true) => Some(Step::Done(Greeting::Bounceback(
            buf[..bounceback::HEADER_BYTES].to_vec(),
        ))),
    }
}

/// An iperf 2 client's header so far (its first bytes are no landspeed or iperf3 greeting): how much
/// more it needs, or the whole header; None when the bytes are not iperf 2's either.
fn iperf2_step(buf: &[u8]) -> Option<Step> {
    match iperf2_detect::tcp(buf) {
        // The first word's top bits announce a header (the version-1 or the extension bit).
        FirstBytes::NeedMore if buf[0] & 0xC0 != 0 => Some(Step::Need(iperf2_detect::NEEDED_BYTES)),
        FirstBytes::NeedMore | FirstBytes::Other => None,
        FirstBytes::Iperf2 { header_bytes } if buf.len() < header_bytes => Some(Step::Need(header_bytes)),
        FirstBytes::Iperf2 { header_bytes } => {
            Some(Step::Done(Greeting::Iperf2(buf[..header_bytes].to_vec())))
        }
    }
}

struct Pending {
    stream: MioStream,
    peer: SocketAddr,
    /// When it was accepted (a bounceback test's clock starts there, as iperf 2's server's does).
    accepted: Instant,
    deadline: Instant,
    buf: [u8; MAX_GREETING],
    len: usize,
}

/// The connections that have not finished greeting.
pub(super) struct Greeters {
    pending: HashMap<Token, Pending>,
    /// Connections over the caps, waiting for the first byte that says which protocol to refuse in.
    refusing: HashMap<Token, (Pending, String)>,
    per_address: HashMap<IpAddr, usize>,
    next: usize,
    first_token: usize,
}

impl Greeters {
    /// Tokens from `first_token` up are this table's (below are the listeners').
    pub(super) fn new(first_token: usize) -> Self {
        Greeters {
            pending: HashMap::new(),
            refusing: HashMap::new(),
            per_address: HashMap::new(),
            next: first_token,
            first_token,
        }
    }

    pub(super) fn owns(&self, t: Token) -> bool {
        t.0 >= self.first_token
    }

    /// Takes a newly accepted connection, or refuses it when the caps are reached.
    pub(super) fn add(
        &mut self,
        reg: &Registry,
        mut stream: MioStream,
        peer: SocketAddr,
        shared: &Arc<Shared>,
    ) {
        let ip = peer.ip().to_canonical();
        let from_here = self.per_address.get(&ip).copied().unwrap_or(0);
        if self.pending.len() >= MAX_PENDING || from_here >= MAX_PENDING_PER_ADDRESS {
            let reason = format!(
                "too many connections still greeting ({} in all, {from_here} from this address)",
                self.pending.len()
            );
            return self.refuse(reg, stream, peer, reason, shared);
        }
        let token = self.token();
        if reg.register(&mut stream, token, Interest::READABLE).is_err() {
            return;
        }
        *self.per_address.entry(ip).or_default() += 1;
        let p = Pending {
            stream,
            peer,
            accepted: Instant::now(),
            deadline: Instant::now() + shared.opts.handshake_timeout,
            buf: [0; MAX_GREETING],
            len: 0,
        };
        self.pending.insert(token, p);
        // Bytes may have arrived with the connection (edge-triggered: no event would announce them).
        self.ready(reg, token, shared);
    }

    fn token(&mut self) -> Token {
        let token = Token(self.next);
        self.next = if self.next == usize::MAX {
            self.first_token
        } else {
            self.next + 1
        };
        token
    }

    /// Turns a connection away: told "busy, retry later" in its own protocol once its first byte
    /// shows which, or closed unanswered when too many are already being refused.
    fn refuse(
        &mut self,
        reg: &Registry,
        mut stream: MioStream,
        peer: SocketAddr,
        reason: String,
        shared: &Arc<Shared>,
    ) {
        if self.refusing.len() >= MAX_REFUSING {
            // The oldest has had the longest to speak: it makes room for the newest.
            let oldest = self
                .refusing
                .iter()
                .min_by_key(|(_, (p, _))| p.deadline)
                .map(|(t, _)| *t);
            if let Some((mut p, _)) = oldest.and_then(|t| self.refusing.remove(&t)) {
                let _ = reg.deregister(&mut p.stream);
            }
        }
        let token = self.token();
        let kept = reg.register(&mut stream, token, Interest::READABLE).is_ok();
        shared.refuse(peer, RefusalKind::Busy, reason.clone());
        if kept {
            let p = Pending {
                stream,
                peer,
                accepted: Instant::now(),
                deadline: Instant::now() + REFUSING_WAIT,
                buf: [0; MAX_GREETING],
                len: 0,
            };
            self.refusing.insert(token, (p, reason));
            self.answer_refused(reg, token);
        }
    }

    /// A connection being refused sent something: answer it in its protocol and close it.
    fn answer_refused(&mut self, reg: &Registry, token: Token) {
        let Some((p, _)) = self.refusing.get_mut(&token) else {
            return;
        };
        let first = match p.stream.peek(&mut p.buf[..1]) {
            Ok(1) => p.buf[0],
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            _ => 0,
        };
        let Some((mut p, reason)) = self.refusing.remove(&token) else {
            return;
        };
        let _ = reg.deregister(&mut p.stream);
        let reply = match classify(first) {
            Speaker::Iperf3 => Answer::Iperf3Denied,
            Speaker::Landspeed => Answer::Control(Box::new(Message::Rejected {
                reason: format!("busy: {reason}; retry in a few seconds"),
                code: Refusal::Busy,
            })),
            Speaker::Unknown => return,
        };
        answer(into_std(p.stream), Duration::from_millis(500), reply);
    }

    fn remove(&mut self, reg: &Registry, token: Token) -> Option<Pending> {
        let mut p = self.pending.remove(&token)?;
        let _ = reg.deregister(&mut p.stream);
        let ip = p.peer.ip().to_canonical();
        if let Some(n) = self.per_address.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&ip);
            }
        }
        Some(p)
    }

    /// Reads what a connection has sent; hands it on when its greeting is complete.
    pub(super) fn ready(&mut self, reg: &Registry, token: Token, shared: &Arc<Shared>) {
        if self.refusing.contains_key(&token) {
            return self.answer_refused(reg, token);
        }
        let Some(p) = self.pending.get_mut(&token) else {
            return;
        };
        let outcome = loop {
            let need = match step(&p.buf[..p.len]) {
                Step::Done(g) => break Ok(g),
                Step::Need(n) => n,
            };
            // Read no further than the greeting: what follows belongs to the protocol handler.
            match p.stream.read(&mut p.buf[p.len..need]) {
                Ok(0) => break Err("closed the connection before its greeting ended".to_string()),
                Ok(n) => p.len += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Err(format!("greeting: {e}")),
            }
        };
        let Some(p) = self.remove(reg, token) else {
            return;
        };
        match outcome {
            Ok(g) => dispatch(p, g, shared),
            // A connection that closes without a byte (a port probe) is not worth a log line.
            Err(_) if p.len == 0 => {}
            Err(reason) => shared.refuse(p.peer, RefusalKind::Greeting, reason),
        }
    }

    /// Drops connections whose greeting did not finish in time.
    pub(super) fn expire(&mut self, reg: &Registry, now: Instant, shared: &Shared) {
        self.refusing.retain(|_, (p, _)| {
            let keep = p.deadline > now;
            if !keep {
                let _ = reg.deregister(&mut p.stream);
            }
            keep
        });
        let late: Vec<Token> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            if let Some(p) = self.remove(reg, t) {
                shared.refuse(
                    p.peer,
                    RefusalKind::Greeting,
                    format!(
                        "no complete greeting within {:?} ({} bytes)",
                        shared.opts.handshake_timeout, p.len
                    ),
                );
            }
        }
    }
}

fn into_std(s: MioStream) -> TcpStream {
    let s = TcpStream::from(s);
    // Protocol handlers use blocking I/O with timeouts.
    let _ = s.set_nonblocking(false);
    s
}

/// A short answer to a connection being turned away; it never waits long on the peer.
fn answer(stream: TcpStream, timeout: Duration, reply: Answer) {
    match reply {
        Answer::Iperf3Denied => {
            let _ = stream.set_write_timeout(Some(timeout));
            let _ = (&stream).write_all(&[State::AccessDenied.byte()]);
        }
        Answer::Control(m) => {
            if let Ok(mut w) = ControlWriter::new(stream, timeout) {
                let _ = w.send(&m);
            }
        }
    }
}

enum Answer {
    Iperf3Denied,
    Control(Box<Message>),
}

/// Hands a connection with a complete greeting to its handler.
fn dispatch(p: Pending, g: Greeting, shared: &Arc<Shared>) {
    let (peer, accepted) = (p.peer, p.accepted);
    let stream = into_std(p.stream);
    let refuse = |kind, reason: String| shared.refuse(peer, kind, reason);
    let quick = Duration::from_millis(500);
    if !shared.allowed(peer) {
        let reply = match g {
            Greeting::Iperf3(_) => Some(Answer::Iperf3Denied),
            // iperf 2 has no message for it: the connection closes.
            Greeting::Iperf2(_) | Greeting::Bounceback(_) => None,
            _ => Some(Answer::Control(Box::new(Message::Rejected {
                reason: "this server does not take tests from your address".into(),
                code: Refusal::NotAllowed,
            }))),
        };
        if let Some(reply) = reply {
            answer(stream, quick, reply);
        }
        return refuse(RefusalKind::NotAllowed, "address not in the allow-list".into());
    }
    match g {
        Greeting::Control => control(stream, peer, shared),
        Greeting::Data(p) => data(stream, peer, p, shared),
        Greeting::Iperf3(cookie) => {
            if let Some(stream) = iperf3::server::data_connection(stream, &cookie, peer, shared) {
                spawn(shared, peer, move |sh| {
                    iperf3::server::handle(stream, cookie, peer, sh)
                });
            }
        }
        Greeting::Iperf2(header) => {
            if let Some(test) = iperf2::server::arrival(stream, &header, peer, shared) {
                spawn(shared, peer, move |sh| test.serve(sh));
            }
        }
        Greeting::Bounceback(header) => {
            let at = (peer, accepted);
            if let Some(test) = iperf2::bounce_server::arrival(stream, &header, at, shared) {
                spawn(shared, peer, move |sh| test.serve(sh));
            }
        }
        Greeting::Unknown(b) => refuse(
            RefusalKind::Greeting,
            format!("not a landspeed client (first byte {b:#04x})"),
        ),
        Greeting::Bad(e @ PreambleError::Version(_)) => {
            answer(
                stream,
                quick,
                Answer::Control(Box::new(Message::Error {
                    message: e.to_string(),
                })),
            );
            refuse(RefusalKind::Greeting, e.to_string())
        }
        Greeting::Bad(e) => refuse(RefusalKind::Greeting, e.to_string()),
    }
}

/// A complete control greeting: a place among connections still proving themselves (fair by address
/// and network, `PREAUTH_CAPS`: it may take the place of the largest holder's oldest connection),
/// then a thread, or "busy".
fn control(stream: TcpStream, peer: SocketAddr, shared: &Arc<Shared>) {
    let why = match shared.preauth(peer, tcp_closer(&stream)) {
        Ok(preauth) => {
            return spawn(shared, peer, move |sh| {
                landspeed::server::serve_test(stream, peer, sh, preauth)
            })
        }
        Err(why) => why,
    };
    let reason = format!("busy: too many connections still authenticating ({why})");
    let reply = Message::Rejected {
        reason: format!("{reason}; retry in a few seconds"),
        code: Refusal::Busy,
    };
    answer(
        stream,
        Duration::from_millis(500),
        Answer::Control(Box::new(reply)),
    );
    shared.refuse(peer, RefusalKind::Busy, reason);
}

/// A data connection with preamble `p`: handed to its test when the preamble proves it (its MAC in a
/// keyed test; its address, the control connection's, in a keyless one), else refused.
fn data(stream: TcpStream, peer: SocketAddr, p: Preamble, shared: &Arc<Shared>) {
    let Preamble::Data {
        session, stream: id, ..
    } = p
    else {
        return;
    };
    let waiter = shared.registry.lock().ok().and_then(|r| r.get(&session).cloned());
    let Some(w) = waiter else {
        // The id is the client's to choose: the log line says nothing that would let one client's
        // stream of garbage ids fill the log with distinct text.
        return shared.refuse(
            peer,
            RefusalKind::UnknownSession,
            format!("data stream {id} for an unknown or finished session"),
        );
    };
    match w.admits(&p, peer.ip()) {
        Ok(()) => {
            let arrival = Arrival::Tcp(id, stream);
            let _ = w.tx.send(Wake::External(Input::Arrival(arrival)));
        }
        Err(why) => shared.refuse(peer, RefusalKind::ForeignStream, why),
    }
}

/// Runs a control connection's handler in its own thread, counted so shutdown can wait for it.
fn spawn(shared: &Arc<Shared>, peer: SocketAddr, f: impl FnOnce(&Arc<Shared>) + Send + 'static) {
    shared.connection_started();
    let sh = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("test {peer}"))
        .spawn(move || {
            f(&sh);
            sh.connection_ended();
        });
    if spawned.is_err() {
        shared.connection_ended();
        shared.refuse(peer, RefusalKind::Busy, "cannot start a thread for the test");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_proto::preamble::{CONTROL_LEN, DATA_LEN, MAC_DATA_LEN};
    use landspeed_proto::{SessionId, PROTOCOL_VERSION};

    #[test]
    fn every_prefix_asks_for_exactly_the_rest() {
        let ctl = Preamble::Control {
            version: PROTOCOL_VERSION,
        }
        .encode();
        for n in 0..ctl.len() {
            assert!(
                matches!(step(&ctl[..n]), Step::Need(k) if k > n && k <= CONTROL_LEN),
                "{n}"
            );
        }
        assert_eq!(step(&ctl), Step::Done(Greeting::Control));
        let key = landspeed_proto::StreamKey::new(&[1; 32]);
        for (p, len) in [
            (Preamble::data(SessionId([3; 16]), 7, None), DATA_LEN),
            (Preamble::data(SessionId([3; 16]), 7, Some(&key)), MAC_DATA_LEN),
        ] {
            let data = p.encode();
            for n in CONTROL_LEN..data.len() {
                assert_eq!(step(&data[..n]), Step::Need(len), "{n}");
            }
            assert_eq!(step(&data), Step::Done(Greeting::Data(p)));
        }
        let cookie = *b"abcdefghijklmnopqrstuvwxyz234567abcd\0";
        assert_eq!(step(&cookie[..5]), Step::Need(COOKIE_LEN));
        assert_eq!(step(&cookie), Step::Done(Greeting::Iperf3(cookie)));
        // A zero byte may begin iperf 2's bounceback flag word: its four bytes decide.
        assert_eq!(step(&[0x00]), Step::Need(4));
        assert_eq!(step(&[0x01]), Step::Done(Greeting::Unknown(1)));
        let mut v2 = ctl.clone();
        v2[5] = 99;
        assert!(matches!(
            step(&v2),
            Step::Done(Greeting::Bad(PreambleError::Version(_)))
        ));
        let mut k = ctl.clone();
        k[6] = b'Z';
        assert!(matches!(step(&k), Step::Done(Greeting::Bad(_))));
    }

    #[test]
    fn an_iperf2_header_is_read_whole_and_no_further() {
        // iperf 2.1.8's `-n 8K` header (60 bytes), then its data.
        let mut h = vec![0x40, 0x01, 0x00, 0x78, 0, 0, 0, 1, 0, 0, 0x17, 0x6f];
        h.resize(60, 0);
        h.extend_from_slice(b"0123456789");
        assert_eq!(step(&h[..1]), Step::Need(12));
        assert_eq!(step(&h[..11]), Step::Need(12));
        for n in 12..60 {
            assert_eq!(step(&h[..n]), Step::Need(60), "{n}");
        }
        assert_eq!(step(&h), Step::Done(Greeting::Iperf2(h[..60].to_vec())));
        // A first word that announces no header, or a stream count no iperf 2 sends: not iperf 2.
        assert_eq!(step(&[0x01; 12]), Step::Done(Greeting::Unknown(0x01)));
        assert_eq!(step(&[0x40; 12]), Step::Done(Greeting::Unknown(0x40)));
    }

    #[test]
    fn a_bounceback_request_is_read_to_its_header_and_no_further() {
        // iperf 2.1.8's `--bounceback` request (100 bytes): the flag word, its size, its burst id.
        let mut h = vec![0x00, 0x80, 0, 0, 0, 0, 0, 100, 0, 0, 0, 1];
        h.resize(100, 0x5a);
        assert_eq!(step(&h[..1]), Step::Need(4));
        assert_eq!(step(&h[..3]), Step::Need(4));
        for n in 4..64 {
            assert_eq!(step(&h[..n]), Step::Need(64), "{n}");
        }
        assert_eq!(step(&h), Step::Done(Greeting::Bounceback(h[..64].to_vec())));
        // A first word with any other bit: not a bounceback request.
        assert_eq!(step(&[0x00, 0x80, 0, 1]), Step::Done(Greeting::Unknown(0)));
        assert_eq!(step(&[0x00, 0x81, 0, 0]), Step::Done(Greeting::Unknown(0)));
        assert_eq!(step(&[0x00; 4]), Step::Done(Greeting::Unknown(0)));
    }

    #[test]
    fn never_asks_beyond_the_longest_greeting() {
        // Any byte string: the classifier asks for at most MAX_GREETING bytes and never panics.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % (MAX_GREETING as u64 + 1)) as usize;
            let mut buf = [0u8; MAX_GREETING];
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (x >> (i % 8 * 8)) as u8;
            }
            buf[..4.min(len)].copy_from_slice(&b"LSPD"[..4.min(len)]);
            if let Step::Need(n) = step(&buf[..len]) {
                assert!(n > len && n <= MAX_GREETING);
            }
        }
    }
}
