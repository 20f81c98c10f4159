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
mod record;

use handshake::{Established, Kernel};
use landspeed_core::tls::TlsCipher;
use record::{Content, Keys, RecordError, OVERHEAD, RECORD_MAX};
use rustls::{ClientConfig, ServerConfig};
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
    /// The client's handshake on a connected socket, within `timeout`.
    pub fn client(
        sock: &TcpStream,
        config: Arc<ClientConfig>,
        timeout: Duration,
    ) -> Result<TlsLink, HandshakeError> {
        let conn = rustls::client::UnbufferedClientConnection::new(config, crate::tls::server_name())?;
        TlsLink::after(sock, timeout, |d| handshake::drive(sock, conn, d))
    }

    /// The server's handshake on an accepted socket, within `timeout`.
    pub fn server(
        sock: &TcpStream,
        config: Arc<ServerConfig>,
        timeout: Duration,
    ) -> Result<TlsLink, HandshakeError> {
        let conn = rustls::server::UnbufferedServerConnection::new(config)?;
        TlsLink::after(sock, timeout, |d| handshake::drive(sock, conn, d))
    }

    /// Runs a handshake with blocking calls by the deadline, then hands the socket back as it was.
    fn after(
        sock: &TcpStream,
        timeout: Duration,
        hs: impl FnOnce(Instant) -> Result<Established, HandshakeError>,
    ) -> Result<TlsLink, HandshakeError> {
        let before = (sock.read_timeout()?, sock.write_timeout()?);
        sock.set_nonblocking(false)?;
        let done = hs(Instant::now() + timeout)?;
        sock.set_read_timeout(before.0)?;
        sock.set_write_timeout(before.1)?;
        let suite = done.kernel.suite().suite();
        let cipher = TlsCipher::ALL
            .into_iter()
            .find(|c| Some(c.iana_name()) == suite.as_str())
            .unwrap_or_default();
        Ok(TlsLink {
            cipher,
            state: Mutex::new(Session::new(done).map_err(|e| HandshakeError::Io(std::io::Error::other(e)))?),
        })
    }

    /// The suite the handshake agreed on.
    pub fn cipher(&self) -> TlsCipher {
        self.cipher
    }

    /// The session, for the worker that drives the stream.
    pub(super) fn lock(&self) -> MutexGuard<'_, Session> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The session and this end's buffers, owned by the one worker that drives the stream.
pub(super) struct Session {
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
    /// Records sealed so far (senders).
    pub(super) records: u64,
}

impl Session {
    fn new(done: Established) -> Result<Session, RecordError> {
        let (tx, rx) = (&done.secrets.tx, &done.secrets.rx);
        let key_limit = match done.kernel.suite() {
            rustls::SupportedCipherSuite::Tls13(s) => s.common.confidentiality_limit,
            other => return Err(RecordError::Suite(format!("{:?} is not TLS 1.3", other.suite()))),
        };
        // What arrived with the handshake's last flight; the read buffer grows on the first read.
        let inbuf = done.early;
        let in_len = inbuf.len();
        Ok(Session {
            tx: Keys::new(tx.0, &tx.1)?,
            rx: Keys::new(rx.0, &rx.1)?,
            kernel: done.kernel,
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

    /// Once what was sealed before has left, seals the plaintext `plain` makes (given how many bytes
    /// there is room for; it hands the payload back followed by one byte this call may overwrite, see
    /// `Generator::fill_spare`); returns the payload bytes taken (WouldBlock while the socket holds
    /// earlier records back).
    pub(super) fn send<'b>(
        &mut self,
        sock: &TcpStream,
        plain: impl FnOnce(usize) -> &'b mut [u8],
    ) -> std::io::Result<usize> {
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

    /// Seals `inner` (content and content type) as one record after what is queued, sending a
    /// KeyUpdate first when the key has protected as many records as its suite allows.
    fn push(&mut self, inner: &[u8]) -> std::io::Result<()> {
        if self.tx.seq() + 1 >= self.key_limit {
            self.seal(&KEY_UPDATE_NOT_REQUESTED)?;
            let next = self.kernel.update_tx().map_err(std::io::Error::other)?;
            self.tx = Keys::new(0, &next).map_err(std::io::Error::other)?;
        }
        self.seal(inner)
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
    pub(super) fn recv(
        &mut self,
        sock: &TcpStream,
        mut each: impl FnMut(&mut [u8]),
    ) -> std::io::Result<usize> {
        // A KeyUpdate the peer asked this end for goes out with the next call.
        self.flush(sock).or_else(would_block_ok)?;
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
                    Content::Handshake => self.post_handshake(at + o.plain.start, at + o.plain.end)?,
                }
            }
            if got > 0 || self.closed {
                return Ok(got);
            }
            if self.eof {
                return Err(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "the connection ended without TLS close_notify: the stream may be truncated",
                ));
            }
            self.fill(sock)?;
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
    fn post_handshake(&mut self, mut from: usize, to: usize) -> std::io::Result<()> {
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
                    let next = self.kernel.update_rx().map_err(std::io::Error::other)?;
                    self.rx = Keys::new(0, &next).map_err(invalid)?;
                    if asked {
                        self.seal(&KEY_UPDATE_NOT_REQUESTED)?;
                        let next = self.kernel.update_tx().map_err(std::io::Error::other)?;
                        self.tx = Keys::new(0, &next).map_err(std::io::Error::other)?;
                    }
                }
                (NEW_SESSION_TICKET, _) => {}
                (t, _) => return Err(invalid(format!("TLS handshake message {t} after the handshake"))),
            }
            from += 4 + len;
        }
        Ok(())
    }

    /// A sender's end: close_notify, then every sealed byte out (blocking up to `timeout`).
    pub(super) fn close(&mut self, sock: &TcpStream, timeout: Duration) -> std::io::Result<()> {
        self.push(&CLOSE_NOTIFY)?;
        sock.set_nonblocking(false)?;
        sock.set_write_timeout(Some(timeout))?;
        self.flush(sock)
    }
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
