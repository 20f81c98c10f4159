//! TLS over one TCP data connection: rustls' handshake before the test, then the record layer inside
//! the workers' own send and receive calls, so `--tls` runs on the same epoll and blocking workers,
//! meters, pacing and verification as plain TCP and the two cost the same but for the cryptography.
//!
//! The records are landspeed's own (`record`), over the traffic keys rustls hands over at the end of
//! its handshake (`handshake`); rustls still derives the keys of every key update. Sending, each record
//! is sealed from the payload generator's buffer straight into the buffer the socket is written from
//! (no copy of the payload first), and the records leave in one write; a call
//! seals more only once earlier records have left, so nothing piles up. Receiving, the socket is read
//! into a large buffer, each whole record is opened in place and its content verified where it lies.
//! A sender ends with close_notify, and a receiver that sees the connection end without one reports a
//! truncated stream. Each key is used for at most the records its suite's confidentiality limit allows
//! (2^24 for AES-128-GCM), then the sender sends a KeyUpdate and moves to the next.

mod handshake;
mod offload;
mod record;

use handshake::{Established, Kernel};
use landspeed_core::tls::TlsCipher;
use offload::Direction;
use record::{Content, Keys, RecordError, OVERHEAD, RECORD_MAX};
use rustls::{ClientConfig, ConnectionTrafficSecrets, ServerConfig};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most plaintext one TLS record carries.
pub const RECORD_PLAINTEXT_MAX: usize = record::PLAINTEXT_MAX;

/// Bytes one TLS 1.3 record adds: 5 of header, 1 of inner content type and a 16-byte tag.
pub const RECORD_OVERHEAD: usize = OVERHEAD;

/// How many whole records one send seals before they must leave (about 240 KiB).
const SEND_RECORDS: usize = 15;

/// How much a receive call reads from the socket at once, at most.
const RECV_BUFFER: usize = 256 * 1024;

/// A handshake that did not complete.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// rustls refused (a certificate that is not the pinned one, no common suite, ...).
    #[error("TLS handshake: {0}")]
    Tls(#[from] rustls::Error),
    /// The connection failed or the peer was not speaking TLS.
    #[error("TLS handshake: {0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for HandshakeError {
    fn from(e: std::io::Error) -> Self {
        match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            Some(t) => HandshakeError::Tls(t.clone()),
            None if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                HandshakeError::Io(std::io::Error::new(
                    ErrorKind::TimedOut,
                    "the peer did not answer in time (is it speaking TLS?)",
                ))
            }
            None if e.kind() == ErrorKind::UnexpectedEof => HandshakeError::Io(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                "the peer closed the connection (is it speaking TLS?)",
            )),
            None => HandshakeError::Io(e),
        }
    }
}

/// One data connection's TLS session once its handshake is done.
pub struct TlsLink {
    cipher: TlsCipher,
    state: Mutex<Session>,
}

impl TlsLink {
    /// The client's handshake on a connected socket, within `timeout`; with `kernel`, the keys then
    /// go into the socket (kernel TLS).
    pub fn client(
        sock: &TcpStream,
        config: Arc<ClientConfig>,
        timeout: Duration,
        kernel: bool,
    ) -> Result<TlsLink, HandshakeError> {
        let conn = rustls::client::UnbufferedClientConnection::new(config, crate::tls::server_name())?;
        TlsLink::after(sock, timeout, kernel, |d| handshake::drive(sock, conn, d))
    }

    /// The server's handshake on an accepted socket, within `timeout`; with `kernel`, as `client`.
    pub fn server(
        sock: &TcpStream,
        config: Arc<ServerConfig>,
        timeout: Duration,
        kernel: bool,
    ) -> Result<TlsLink, HandshakeError> {
        let conn = rustls::server::UnbufferedServerConnection::new(config)?;
        TlsLink::after(sock, timeout, kernel, |d| handshake::drive(sock, conn, d))
    }

    /// Runs a handshake with blocking calls by the deadline (and hands the keys to the kernel when
    /// asked), then hands the socket back as it was.
    fn after(
        sock: &TcpStream,
        timeout: Duration,
        kernel: bool,
        hs: impl FnOnce(Instant) -> Result<Established, HandshakeError>,
    ) -> Result<TlsLink, HandshakeError> {
        let before = (sock.read_timeout()?, sock.write_timeout()?);
        sock.set_nonblocking(false)?;
        let deadline = Instant::now() + timeout;
        let done = hs(deadline)?;
        let suite = done.kernel.suite().suite();
        let cipher = TlsCipher::ALL
            .into_iter()
            .find(|c| Some(c.iana_name()) == suite.as_str())
            .unwrap_or_default();
        let session = match kernel {
            true => Session::in_kernel(done, sock, deadline),
            false => Session::new(done.kernel, (&done.secrets.tx, &done.secrets.rx), done.early)
                .map_err(std::io::Error::other),
        };
        sock.set_read_timeout(before.0)?;
        sock.set_write_timeout(before.1)?;
        Ok(TlsLink {
            cipher,
            state: Mutex::new(session.map_err(HandshakeError::Io)?),
        })
    }

    /// Whether the kernel seals and opens this connection's records.
    pub fn in_kernel(&self) -> bool {
        self.lock().offload.is_some()
    }

    /// The suite the handshake agreed on.
    pub fn cipher(&self) -> TlsCipher {
        self.cipher
    }

    /// The session, for the worker that drives the stream.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Session> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The session and this end's buffers, owned by the one worker that drives the stream.
pub(crate) struct Session {
    kernel: Kernel,
    tx: Keys,
    rx: Keys,
    /// Records sealed under one key before the next key update.
    key_limit: u64,
    /// Sealed bytes not yet written: `out[out_pos..out_len]`.
    out: Vec<u8>,
    out_pos: usize,
    out_len: usize,
    /// Bytes read and not yet opened: `inbuf[in_pos..in_len]`.
    inbuf: Vec<u8>,
    in_pos: usize,
    in_len: usize,
    eof: bool,
    /// The peer's close_notify has arrived.
    closed: bool,
    /// Records sealed so far (senders; with kernel TLS, the 16 KiB records the writes make).
    pub(super) records: u64,
    /// Kernel TLS's state, when the kernel seals and opens the records.
    offload: Option<Offload>,
}

/// A session whose records the kernel seals and opens (`--ktls`).
struct Offload {
    /// The receiving key until the kernel has it: records that arrived with the handshake are opened
    /// in user space first, and the kernel takes over at the record boundary after them.
    rx_pending: Option<ConnectionTrafficSecrets>,
    /// At most this many records sealed by the kernel under the current sending key.
    tx_records: u64,
    /// A control record (its content, then its content type) waiting for room in the socket, and
    /// whether the sending key moves on once it has left (a KeyUpdate).
    control: Option<(&'static [u8], bool)>,
}

impl Session {
    /// The session of a finished handshake: its keys (sequence number and secrets, each way) and
    /// what arrived with the peer's last flight.
    fn new(
        kernel: Kernel,
        (tx, rx): (&(u64, ConnectionTrafficSecrets), &(u64, ConnectionTrafficSecrets)),
        early: Vec<u8>,
    ) -> Result<Session, RecordError> {
        let key_limit = match kernel.suite() {
            rustls::SupportedCipherSuite::Tls13(s) => s.common.confidentiality_limit,
            other => return Err(RecordError::Suite(format!("{:?} is not TLS 1.3", other.suite()))),
        };
        // What arrived with the handshake's last flight; the read buffer grows on the first read.
        let inbuf = early;
        let in_len = inbuf.len();
        Ok(Session {
            offload: None,
            tx: Keys::new(tx.0, &tx.1)?,
            rx: Keys::new(rx.0, &rx.1)?,
            kernel,
            key_limit,
            out: Vec::new(),
            out_pos: 0,
            out_len: 0,
            inbuf,
            in_pos: 0,
            in_len,
            eof: false,
            closed: false,
            records: 0,
        })
    }

    /// A session whose keys go into the socket: the sending key at once, the receiving key once the
    /// records that arrived with the handshake are opened here (the last of them, when only part of
    /// it has arrived, is read whole first, by `deadline`, so that the kernel starts on a boundary).
    fn in_kernel(done: Established, sock: &TcpStream, deadline: Instant) -> std::io::Result<Session> {
        let Established {
            kernel,
            secrets,
            mut early,
        } = done;
        offload::attach(sock)?;
        offload::install(sock, Direction::Tx, secrets.tx.0, &secrets.tx.1)?;
        read_to_record_end(sock, &mut early, deadline)?;
        let mut s = Session::new(kernel, (&secrets.tx, &secrets.rx), early).map_err(std::io::Error::other)?;
        s.offload = Some(Offload {
            rx_pending: Some(secrets.rx.1),
            tx_records: 0,
            control: None,
        });
        Ok(s)
    }

    /// Once what was sealed before has left, seals the plaintext `plain` makes (given how many bytes
    /// there is room for; it hands the payload back followed by one byte this call may overwrite, see
    /// `Generator::fill_spare`); returns the payload bytes taken (WouldBlock while the socket holds
    /// earlier records back).
    pub(crate) fn send<'b>(
        &mut self,
        sock: &TcpStream,
        plain: impl FnOnce(usize) -> &'b mut [u8],
    ) -> std::io::Result<usize> {
        if self.offload.is_some() {
            return self.send_plain(sock, plain);
        }
        self.flush(sock)?;
        let p = plain(SEND_RECORDS * RECORD_PLAINTEXT_MAX);
        let n = p.len().saturating_sub(1);
        for start in (0..n).step_by(RECORD_PLAINTEXT_MAX) {
            // Each record's inner content type goes right after its content, over the next record's
            // first byte (or the spare one), which is put back once this record is sealed.
            let end = (start + RECORD_PLAINTEXT_MAX).min(n);
            let kept = std::mem::replace(&mut p[end], Content::ApplicationData.byte());
            let sealed = self.push(&p[start..=end]);
            p[end] = kept;
            sealed?;
        }
        self.records += n.div_ceil(RECORD_PLAINTEXT_MAX) as u64;
        match self.flush(sock) {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    /// Kernel TLS's send: the plaintext written as it is (the kernel makes the records), after a
    /// KeyUpdate when the key could otherwise pass its suite's record limit in this write.
    fn send_plain<'b>(
        &mut self,
        sock: &TcpStream,
        plain: impl FnOnce(usize) -> &'b mut [u8],
    ) -> std::io::Result<usize> {
        self.flush_control(sock)?;
        let most = |n: usize| n.div_ceil(RECORD_PLAINTEXT_MAX) as u64 + 1;
        let o = self.offload.as_mut().expect("a kernel TLS session");
        let p = plain(usize::MAX);
        let n = p.len().saturating_sub(1);
        if o.tx_records + most(n) >= self.key_limit {
            self.update_tx()?;
            self.flush_control(sock)?;
        }
        let w = (&mut &*sock).write(&p[..n])?;
        if let Some(o) = self.offload.as_mut() {
            o.tx_records += most(w);
        }
        self.records += w.div_ceil(RECORD_PLAINTEXT_MAX) as u64;
        Ok(w)
    }

    /// Sends the control record kernel TLS is waiting to send, then moves the sending key on if it
    /// was a KeyUpdate (WouldBlock while the socket has no room: it stays queued).
    fn flush_control(&mut self, sock: &TcpStream) -> std::io::Result<()> {
        let Some(o) = self.offload.as_mut() else {
            return Ok(());
        };
        let Some((inner, rekey)) = o.control.take() else {
            return Ok(());
        };
        if let Err(e) = send_inner(sock, inner) {
            if e.kind() == ErrorKind::WouldBlock {
                o.control = Some((inner, rekey));
            }
            return Err(e);
        }
        if rekey {
            let next = self.kernel.update_tx().map_err(std::io::Error::other)?;
            offload::install(sock, Direction::Tx, 0, &next).map_err(key_update_refused)?;
            o.tx_records = 0;
        }
        Ok(())
    }

    /// Seals `inner` (content and content type) as one record after what is queued, sending a
    /// KeyUpdate first when the key has protected as many records as its suite allows.
    fn push(&mut self, inner: &[u8]) -> std::io::Result<()> {
        if self.tx.seq() + 1 >= self.key_limit {
            self.update_tx()?;
        }
        self.seal(inner)
    }

    /// A KeyUpdate that does not ask the peer for one, then this end's next sending key.
    fn update_tx(&mut self) -> std::io::Result<()> {
        if let Some(o) = self.offload.as_mut() {
            o.control = Some((&KEY_UPDATE_NOT_REQUESTED, true));
            return Ok(());
        }
        self.seal(&KEY_UPDATE_NOT_REQUESTED)?;
        let next = self.kernel.update_tx().map_err(std::io::Error::other)?;
        self.tx = Keys::new(0, &next).map_err(std::io::Error::other)?;
        Ok(())
    }

    fn seal(&mut self, inner: &[u8]) -> std::io::Result<()> {
        if self.out_pos == self.out_len {
            (self.out_pos, self.out_len) = (0, 0);
        }
        let need = self.out_len + inner.len() + OVERHEAD;
        if self.out.len() < need {
            self.out
                .resize(need.max(SEND_RECORDS * RECORD_MAX + 2 * RECORD_MAX), 0);
        }
        let rec = &mut self.out[self.out_len..need];
        self.out_len += self.tx.seal(rec, inner).map_err(std::io::Error::other)?;
        Ok(())
    }

    /// Writes sealed records to the socket until none is left (or it would block).
    /// Writes what was sealed and not yet written, as far as the socket takes it; true while some is
    /// still waiting (a request/response end must not wait for an answer to a request still here).
    pub(crate) fn flush_pending(&mut self, sock: &TcpStream) -> std::io::Result<bool> {
        self.flush(sock).or_else(would_block_ok)?;
        self.flush_control(sock).or_else(would_block_ok)?;
        Ok(self.out_pos < self.out_len || self.offload.as_ref().is_some_and(|o| o.control.is_some()))
    }

    fn flush(&mut self, sock: &TcpStream) -> std::io::Result<()> {
        while self.out_pos < self.out_len {
            match (&mut &*sock).write(&self.out[self.out_pos..self.out_len]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads once from the socket and opens every whole record in place, handing each record's content
    /// to `each` (mutable: the fault injection of the tests flips a byte there); returns the content
    /// bytes handed over: Ok(0) at the peer's close_notify, UnexpectedEof when the connection ended
    /// without one, WouldBlock when the socket has nothing more yet.
    pub(crate) fn recv(
        &mut self,
        sock: &TcpStream,
        mut each: impl FnMut(&mut [u8]),
    ) -> std::io::Result<usize> {
        // A KeyUpdate the peer asked this end for goes out with the next call.
        self.flush(sock).or_else(would_block_ok)?;
        self.flush_control(sock).or_else(would_block_ok)?;
        loop {
            let mut got = 0;
            while !self.closed {
                let Some(o) = self
                    .rx
                    .open(&mut self.inbuf[self.in_pos..self.in_len])
                    .map_err(invalid)?
                else {
                    break;
                };
                let at = self.in_pos;
                self.in_pos += o.len;
                let plain = &mut self.inbuf[at + o.plain.start..at + o.plain.end];
                match o.content {
                    Content::ApplicationData if !plain.is_empty() => {
                        got += plain.len();
                        each(plain);
                    }
                    Content::ApplicationData => {}
                    Content::Alert => self.alert(at + o.plain.start, at + o.plain.end)?,
                    Content::Handshake => self.post_handshake(sock, at + o.plain.start, at + o.plain.end)?,
                }
            }
            if got > 0 || self.closed {
                return Ok(got);
            }
            if self.offload.is_some() {
                return self.recv_plain(sock, &mut each);
            }
            if self.eof {
                return Err(truncated());
            }
            self.fill(sock)?;
        }
    }

    /// Kernel TLS's receive (once the records that came with the handshake are opened): the kernel's
    /// plaintext, a control record handled as in user space.
    fn recv_plain(&mut self, sock: &TcpStream, each: &mut impl FnMut(&mut [u8])) -> std::io::Result<usize> {
        if let Some(rx) = self.offload.as_mut().and_then(|o| o.rx_pending.take()) {
            offload::install(sock, Direction::Rx, self.rx.seq(), &rx)?;
        }
        if self.inbuf.len() < RECV_BUFFER {
            self.inbuf.resize(RECV_BUFFER, 0);
        }
        (self.in_pos, self.in_len) = (0, 0);
        loop {
            let (n, content) = offload::recv_record(sock, &mut self.inbuf)?;
            match content {
                offload::APPLICATION_DATA if n > 0 => {
                    each(&mut self.inbuf[..n]);
                    return Ok(n);
                }
                offload::APPLICATION_DATA => return Err(truncated()),
                t if t == Content::Alert.byte() => {
                    self.alert(0, n)?;
                    if self.closed {
                        return Ok(0);
                    }
                }
                t if t == Content::Handshake.byte() => self.post_handshake(sock, 0, n)?,
                t => return Err(invalid(format!("a TLS record of content type {t}"))),
            }
        }
    }

    /// One read from the socket after what is left of the last; a partial record moves to the front
    /// only when too little room is left behind it for a whole one.
    fn fill(&mut self, sock: &TcpStream) -> std::io::Result<()> {
        if self.inbuf.len() < RECV_BUFFER {
            self.inbuf.resize(RECV_BUFFER, 0);
        }
        if self.in_pos == self.in_len {
            (self.in_pos, self.in_len) = (0, 0);
        } else if self.inbuf.len() - self.in_len < 4 * RECORD_MAX {
            self.inbuf.copy_within(self.in_pos..self.in_len, 0);
            (self.in_pos, self.in_len) = (0, self.in_len - self.in_pos);
        }
        let n = (&mut &*sock).read(&mut self.inbuf[self.in_len..])?;
        self.eof = n == 0;
        self.in_len += n;
        Ok(())
    }

    /// An alert from the peer: close_notify ends the stream; any other is an error that names it.
    fn alert(&mut self, from: usize, to: usize) -> std::io::Result<()> {
        match &self.inbuf[from..to] {
            [_, 0] => {
                self.closed = true;
                Ok(())
            }
            [level, desc] => Err(invalid(format!(
                "the peer sent TLS alert {:?} (level {level})",
                rustls::AlertDescription::from(*desc)
            ))),
            other => Err(invalid(format!("a TLS alert of {} bytes", other.len()))),
        }
    }

    /// Handshake messages after the handshake: a KeyUpdate moves the receiving key on (and, when the
    /// peer asks, this end's sending key too); tickets are taken and unused (nothing resumes).
    fn post_handshake(&mut self, sock: &TcpStream, mut from: usize, to: usize) -> std::io::Result<()> {
        while from < to {
            let m = &self.inbuf[from..to];
            let len = match m {
                [_, a, b, c, ..] => u32::from_be_bytes([0, *a, *b, *c]) as usize,
                _ => return Err(invalid("a truncated TLS handshake message")),
            };
            let body = m
                .get(4..4 + len)
                .ok_or_else(|| invalid("a truncated TLS handshake message"))?;
            match (m[0], body) {
                (KEY_UPDATE, [asked @ (0 | 1)]) => {
                    let asked = *asked == 1;
                    self.update_rx(sock)?;
                    if asked {
                        self.update_tx()?;
                    }
                }
                (NEW_SESSION_TICKET, _) => {}
                (t, _) => return Err(invalid(format!("TLS handshake message {t} after the handshake"))),
            }
            from += 4 + len;
        }
        Ok(())
    }

    /// The peer's next key: in user space, or in the kernel once it has the receiving key.
    fn update_rx(&mut self, sock: &TcpStream) -> std::io::Result<()> {
        let next = self.kernel.update_rx().map_err(std::io::Error::other)?;
        self.rx = Keys::new(0, &next).map_err(invalid)?;
        match self.offload.as_mut() {
            Some(Offload {
                rx_pending: Some(pending),
                ..
            }) => *pending = next,
            Some(_) => offload::install(sock, Direction::Rx, 0, &next).map_err(key_update_refused)?,
            None => {}
        }
        Ok(())
    }

    /// A sender's end: close_notify, then every sealed byte out (blocking up to `timeout`).
    pub(crate) fn close(&mut self, sock: &TcpStream, timeout: Duration) -> std::io::Result<()> {
        sock.set_nonblocking(false)?;
        sock.set_write_timeout(Some(timeout))?;
        if self.offload.is_some() {
            self.flush_control(sock)?;
            return send_inner(sock, &CLOSE_NOTIFY);
        }
        self.push(&CLOSE_NOTIFY)?;
        self.flush(sock)
    }
}

/// Kernel TLS: one control record from `inner` as the record layer seals it (content, then content
/// type), the kernel making the record.
fn send_inner(sock: &TcpStream, inner: &[u8]) -> std::io::Result<()> {
    let (content, body) = inner.split_last().expect("a content type");
    offload::send_record(sock, *content, body)
}

/// Reads what is missing of the last record in `early` (its header included), by `deadline`, so
/// that `early` ends on a record boundary.
fn read_to_record_end(sock: &TcpStream, early: &mut Vec<u8>, deadline: Instant) -> std::io::Result<()> {
    let mut at = 0;
    loop {
        let whole = record::whole_record(&early[at..]).map_err(invalid)?;
        match whole {
            Some(n) => at += n,
            None if at == early.len() => return Ok(()),
            None => {
                let rest = early.len() - at;
                let want = if rest < record::HEADER {
                    record::HEADER - rest
                } else {
                    record::body_len(&early[at..]) + record::HEADER - rest
                };
                let left = deadline.saturating_duration_since(Instant::now());
                sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
                let from = early.len();
                early.resize(from + want, 0);
                (&mut &*sock).read_exact(&mut early[from..])?;
            }
        }
    }
}

fn truncated() -> std::io::Error {
    std::io::Error::new(
        ErrorKind::UnexpectedEof,
        "the connection ended without TLS close_notify: the stream may be truncated",
    )
}

fn key_update_refused(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!("{e}: this kernel's TLS cannot take the key a TLS 1.3 key update brings (older kernels cannot change a key once set)"),
    )
}

/// The handshake type of KeyUpdate, and of NewSessionTicket.
const KEY_UPDATE: u8 = 24;
const NEW_SESSION_TICKET: u8 = 4;

/// A KeyUpdate message that does not ask the peer to update its own key, with its content type.
const KEY_UPDATE_NOT_REQUESTED: [u8; 6] = [KEY_UPDATE, 0, 0, 1, 0, 22];

/// A warning-level close_notify alert, with its content type.
const CLOSE_NOTIFY: [u8; 3] = [1, 0, 21];

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, e)
}

fn would_block_ok(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == ErrorKind::WouldBlock {
        Ok(())
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests;
