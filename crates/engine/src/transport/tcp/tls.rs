//! TLS over one TCP data connection: the handshake before the test, then the record layer inside the
//! workers' own send and receive calls, so `--tls` runs on the same epoll and blocking workers,
//! meters, pacing and verification as plain TCP and the two cost the same but for the cryptography.
//!
//! Sending, plaintext from the payload generator goes into rustls (which seals it into records of at
//! most 16 KiB) and the sealed bytes go to the socket; a call accepts plaintext only once earlier
//! records have left, so nothing piles up. Receiving, the socket is read into a large buffer of this
//! end's own (rustls alone would read 4 KiB per system call), rustls opens the records from there and
//! the plaintext is copied out for verification. A sender ends with close_notify, and a receiver that
//! sees the connection end without one reports a truncated stream.

use landspeed_core::tls::TlsCipher;
use rustls::{ClientConfig, Connection, ServerConfig};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most plaintext one TLS record carries, and what rustls seals per record.
pub const RECORD_PLAINTEXT_MAX: usize = 16 * 1024;

/// Bytes one TLS 1.3 record adds: 5 of header, 1 of inner content type and a 16-byte tag.
pub const RECORD_OVERHEAD: usize = 22;

/// How much sealed data rustls may hold before a send must wait for the socket.
const SEND_BUFFER: usize = 256 * 1024;

/// How much a receive call reads from the socket at once.
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

/// The session and this end's buffers, owned by the one worker that drives the stream.
pub(super) struct Session {
    conn: Connection,
    inbuf: Vec<u8>,
    in_pos: usize,
    in_len: usize,
    eof: bool,
    /// Records sealed so far (senders).
    pub(super) records: u64,
}

impl TlsLink {
    /// The client's handshake on a connected socket, within `timeout`.
    pub fn client(
        sock: &TcpStream,
        config: Arc<ClientConfig>,
        timeout: Duration,
    ) -> Result<TlsLink, HandshakeError> {
        let conn = rustls::ClientConnection::new(config, crate::tls::server_name())?;
        handshake(sock, conn.into(), timeout)
    }

    /// The server's handshake on an accepted socket, within `timeout`.
    pub fn server(
        sock: &TcpStream,
        config: Arc<ServerConfig>,
        timeout: Duration,
    ) -> Result<TlsLink, HandshakeError> {
        handshake(sock, rustls::ServerConnection::new(config)?.into(), timeout)
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

/// Drives a handshake to its end with blocking calls, then hands the socket back as it was.
fn handshake(sock: &TcpStream, mut conn: Connection, timeout: Duration) -> Result<TlsLink, HandshakeError> {
    let before = (sock.read_timeout()?, sock.write_timeout()?);
    let deadline = Instant::now() + timeout;
    sock.set_nonblocking(false)?;
    let mut s = sock;
    while conn.is_handshaking() || conn.wants_write() {
        // Each read and write waits only for what is left of the one deadline: a peer that sends its
        // handshake a byte at a time cannot stretch it.
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::from(ErrorKind::TimedOut).into());
        }
        sock.set_read_timeout(Some(left))?;
        sock.set_write_timeout(Some(left))?;
        conn.complete_io(&mut s)?;
    }
    sock.set_read_timeout(before.0)?;
    sock.set_write_timeout(before.1)?;
    let suite = conn.negotiated_cipher_suite().map(|s| s.suite());
    let cipher = TlsCipher::ALL
        .into_iter()
        .find(|c| Some(c.iana_name()) == suite.and_then(|s| s.as_str()))
        .unwrap_or_default();
    conn.set_buffer_limit(Some(SEND_BUFFER));
    Ok(TlsLink {
        cipher,
        state: Mutex::new(Session {
            conn,
            inbuf: Vec::new(),
            in_pos: 0,
            in_len: 0,
            eof: false,
            records: 0,
        }),
    })
}

impl Session {
    /// Once what was sealed before has left, seals the plaintext `plain` makes (given how many bytes
    /// rustls has room for); returns the plaintext bytes taken (WouldBlock while the socket holds
    /// earlier records back).
    pub(super) fn send<'b>(
        &mut self,
        sock: &TcpStream,
        plain: impl FnOnce(usize) -> &'b [u8],
    ) -> std::io::Result<usize> {
        self.flush(sock)?;
        let n = self.conn.writer().write(plain(SEND_BUFFER))?;
        self.records += n.div_ceil(RECORD_PLAINTEXT_MAX) as u64;
        match self.flush(sock) {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    /// Writes sealed records to the socket until none is left (or it would block).
    fn flush(&mut self, sock: &TcpStream) -> std::io::Result<()> {
        let mut s = sock;
        while self.conn.wants_write() {
            self.conn.write_tls(&mut s)?;
        }
        Ok(())
    }

    /// Opens records into `out`: Ok(0) at the peer's close_notify, UnexpectedEof when the connection
    /// ended without one, WouldBlock when the socket has nothing more yet.
    pub(super) fn recv(&mut self, sock: &TcpStream, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.conn.reader().read(out) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    return Err(std::io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "the connection ended without TLS close_notify: the stream may be truncated",
                    ))
                }
                Err(e) => return Err(e),
            }
            if self.in_pos == self.in_len && !self.eof {
                self.fill(sock)?;
            }
            let mut rest = &self.inbuf[self.in_pos..self.in_len];
            let taken = self.conn.read_tls(&mut rest)?;
            self.in_pos += taken;
            self.conn
                .process_new_packets()
                .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))?;
        }
    }

    /// One read from the socket into this end's buffer.
    fn fill(&mut self, sock: &TcpStream) -> std::io::Result<()> {
        if self.inbuf.is_empty() {
            self.inbuf = vec![0; RECV_BUFFER];
        }
        let n = (&mut &*sock).read(&mut self.inbuf)?;
        self.eof = n == 0;
        (self.in_pos, self.in_len) = (0, n);
        Ok(())
    }

    /// A sender's end: close_notify, then every sealed byte out (blocking up to `timeout`).
    pub(super) fn close(&mut self, sock: &TcpStream, timeout: Duration) -> std::io::Result<()> {
        self.conn.send_close_notify();
        sock.set_nonblocking(false)?;
        sock.set_write_timeout(Some(timeout))?;
        self.flush(sock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{client_config, Identity, Trust};
    use landspeed_core::tls::CertFingerprint;
    use std::net::TcpListener;

    const T: Duration = Duration::from_secs(5);

    /// A connected pair of loopback sockets: (client, server).
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    /// Handshakes over a fresh pair: the server on its own thread, the client trusting `trust`.
    fn handshake_pair(
        suite: TlsCipher,
        trust: impl FnOnce(&Identity) -> Trust,
    ) -> (
        Result<TlsLink, HandshakeError>,
        Result<TlsLink, HandshakeError>,
        TcpStream,
        TcpStream,
    ) {
        let id = Identity::self_signed().unwrap();
        let (c, s) = pair();
        let sc = id.server_config(&[]).unwrap();
        let s2 = s.try_clone().unwrap();
        let server = std::thread::spawn(move || TlsLink::server(&s2, sc, T));
        let cc = client_config(&[suite], trust(&id), &[]).unwrap();
        let client = TlsLink::client(&c, cc, T);
        if client.is_err() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        (client, server.join().unwrap(), c, s)
    }

    #[test]
    fn pinned_handshake_agrees_on_the_asked_suite_and_carries_data_to_close_notify() {
        for suite in TlsCipher::ALL {
            let (c, s, cs, ss) = handshake_pair(suite, |id| Trust::Pinned(id.fingerprint));
            let (c, s) = (c.unwrap(), s.unwrap());
            assert_eq!((c.cipher(), s.cipher()), (suite, suite));
            let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            let sent = std::thread::spawn(move || {
                let mut tx = c.lock();
                let mut off = 0;
                while off < data.len() {
                    off += tx
                        .send(&cs, |room| &data[off..(off + room).min(data.len())])
                        .unwrap();
                }
                tx.close(&cs, T).unwrap();
                tx.records
            });
            let mut rx = s.lock();
            let (mut got, mut buf) = (Vec::new(), vec![0u8; 7000]);
            loop {
                match rx.recv(&ss, &mut buf).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            assert_eq!(got.len(), 100_000);
            assert!(got.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
            assert_eq!(sent.join().unwrap(), 100_000u64.div_ceil(16384));
        }
    }

    #[test]
    fn a_certificate_other_than_the_pinned_one_fails_the_handshake() {
        let (c, s, _, _) = handshake_pair(TlsCipher::Aes128Gcm, |_| {
            Trust::Pinned(CertFingerprint([0xab; 32]))
        });
        let e = c.err().expect("the pin must not match").to_string();
        assert!(e.contains("not the pinned abab"), "{e}");
        assert!(s.is_err());
    }

    #[test]
    fn a_peer_that_does_not_speak_tls_is_named() {
        let (c, s) = pair();
        drop(s);
        let cc = client_config(&[TlsCipher::Aes128Gcm], Trust::Any, &[]).unwrap();
        let e = TlsLink::client(&c, cc, T).err().unwrap().to_string();
        assert!(e.contains("is it speaking TLS?") || e.contains("reset"), "{e}");
    }

    #[test]
    fn a_connection_that_ends_without_close_notify_is_reported_truncated() {
        let (c, s, cs, ss) = handshake_pair(TlsCipher::Aes128Gcm, |_| Trust::Any);
        let (c, s) = (c.unwrap(), s.unwrap());
        c.lock().send(&cs, |_| b"partial").unwrap();
        cs.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rx = s.lock();
        let mut buf = [0u8; 64];
        assert_eq!(rx.recv(&ss, &mut buf).unwrap(), 7);
        let e = rx.recv(&ss, &mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("close_notify"), "{e}");
    }
}
