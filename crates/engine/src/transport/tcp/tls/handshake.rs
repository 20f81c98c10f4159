//! The TLS 1.3 handshake of a data connection, by rustls' unbuffered API on a blocking socket, ending
//! where rustls hands the traffic keys over (`dangerous_into_kernel_connection`) to the record layer
//! of `super::record`. rustls is given the peer's records one at a time, so that it stops at the end
//! of the handshake and never opens a record of payload that arrived with the peer's last flight:
//! those bytes, still sealed, go to the record layer as they are.

use super::record::{whole_record, HEADER};
use super::HandshakeError;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::{ConnectionTrafficSecrets, Error, ExtractedSecrets, SupportedCipherSuite};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// What rustls still does once the handshake is done: derive the next traffic secret at a key update,
/// and take the tickets a server sends its client.
pub(super) enum Kernel {
    Client(KernelConnection<ClientConnectionData>),
    Server(KernelConnection<ServerConnectionData>),
}

impl Kernel {
    pub(super) fn suite(&self) -> SupportedCipherSuite {
        match self {
            Kernel::Client(k) => k.negotiated_cipher_suite(),
            Kernel::Server(k) => k.negotiated_cipher_suite(),
        }
    }

    /// The next traffic secret for sending (after this end's KeyUpdate).
    pub(super) fn update_tx(&mut self) -> Result<ConnectionTrafficSecrets, Error> {
        match self {
            Kernel::Client(k) => k.update_tx_secret(),
            Kernel::Server(k) => k.update_tx_secret(),
        }
        .map(|(_, s)| s)
    }

    /// The next traffic secret for receiving (after the peer's KeyUpdate).
    pub(super) fn update_rx(&mut self) -> Result<ConnectionTrafficSecrets, Error> {
        match self {
            Kernel::Client(k) => k.update_rx_secret(),
            Kernel::Server(k) => k.update_rx_secret(),
        }
        .map(|(_, s)| s)
    }
}

/// A finished handshake: rustls' remaining part, the keys of both directions with their sequence
/// numbers, and what the peer sent after its last handshake record (sealed records, not opened).
pub(super) struct Established {
    pub(super) kernel: Kernel,
    pub(super) secrets: ExtractedSecrets,
    pub(super) early: Vec<u8>,
}

/// One side of rustls' unbuffered connection, client or server.
pub(super) trait Unbuffered: Sized {
    type Data;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    fn into_kernel(self) -> Result<(ExtractedSecrets, Kernel), Error>;
}

impl Unbuffered for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(self) -> Result<(ExtractedSecrets, Kernel), Error> {
        self.dangerous_into_kernel_connection()
            .map(|(s, k)| (s, Kernel::Client(k)))
    }
}

impl Unbuffered for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(self) -> Result<(ExtractedSecrets, Kernel), Error> {
        self.dangerous_into_kernel_connection()
            .map(|(s, k)| (s, Kernel::Server(k)))
    }
}

/// The most the peer's handshake may occupy before it is refused.
const HANDSHAKE_BUFFER_MAX: usize = 1 << 20;

/// The peer's bytes as they arrive: `fed` of them handed to rustls so far, whole records only.
struct Incoming {
    buf: Vec<u8>,
    used: usize,
    fed: usize,
}

impl Incoming {
    /// Hands rustls one more whole record if one is here; false when the socket must be read.
    fn feed_one(&mut self) -> Result<bool, HandshakeError> {
        let rest = &self.buf[self.fed..self.used];
        let Some(h) = rest.get(..HEADER) else {
            return Ok(false);
        };
        let len = HEADER + usize::from(u16::from_be_bytes([h[3], h[4]]));
        // Handshake records are plaintext or protected; rustls judges their content, here only whether
        // one is whole (the protected-record check of the record layer would refuse the plaintext ones).
        let whole = rest.len() >= len;
        if h[0] == 23 {
            whole_record(rest).map_err(|e| HandshakeError::Io(std::io::Error::other(e)))?;
        }
        if whole {
            self.fed += len;
        }
        Ok(whole)
    }

    /// One read from the socket, growing the buffer when it is full.
    fn read(&mut self, sock: &TcpStream, deadline: Instant) -> Result<(), HandshakeError> {
        if self.used == self.buf.len() {
            // Whole records only are fed, and rustls joins a message of at most 64 KiB: a peer that
            // needs more than this is not doing a handshake.
            if self.buf.len() >= HANDSHAKE_BUFFER_MAX {
                return Err(Error::General("a TLS handshake of more than 1 MiB".into()).into());
            }
            self.buf.resize(self.buf.len() * 2, 0);
        }
        sock.set_read_timeout(Some(left(deadline)?))?;
        let n = (&mut &*sock).read(&mut self.buf[self.used..])?;
        if n == 0 {
            return Err(std::io::Error::from(ErrorKind::UnexpectedEof).into());
        }
        self.used += n;
        Ok(())
    }

    fn discard(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.buf.copy_within(n..self.used, 0);
        self.used -= n;
        self.fed -= n;
    }
}

/// What is left of the one deadline every read and write of the handshake shares: a peer that sends its
/// handshake a byte at a time cannot stretch it.
fn left(deadline: Instant) -> Result<std::time::Duration, HandshakeError> {
    let l = deadline.saturating_duration_since(Instant::now());
    if l.is_zero() {
        return Err(std::io::Error::from(ErrorKind::TimedOut).into());
    }
    Ok(l)
}

/// Drives `conn` through its handshake on `sock` (blocking) by `deadline`.
pub(super) fn drive<C: Unbuffered>(
    sock: &TcpStream,
    mut conn: C,
    deadline: Instant,
) -> Result<Established, HandshakeError> {
    let mut inc = Incoming {
        buf: vec![0; 32 << 10],
        used: 0,
        fed: 0,
    };
    let mut out: Vec<u8> = Vec::new();
    loop {
        let UnbufferedStatus { discard, state } = conn.process(&mut inc.buf[..inc.fed]);
        let done = match state? {
            ConnectionState::EncodeTlsData(mut e) => {
                encode(&mut out, |b| e.encode(b))?;
                false
            }
            ConnectionState::TransmitTlsData(t) => {
                sock.set_write_timeout(Some(left(deadline)?))?;
                (&mut &*sock).write_all(&out)?;
                out.clear();
                t.done();
                false
            }
            ConnectionState::BlockedHandshake => {
                if !inc.feed_one()? {
                    inc.read(sock, deadline)?;
                }
                false
            }
            ConnectionState::WriteTraffic(_) => true,
            ConnectionState::PeerClosed | ConnectionState::Closed => {
                return Err(std::io::Error::from(ErrorKind::UnexpectedEof).into())
            }
            _ => return Err(Error::General("application data during the handshake".into()).into()),
        };
        inc.discard(discard);
        if done {
            break;
        }
    }
    if inc.fed != 0 || !out.is_empty() {
        return Err(Error::General("handshake records left over at its end".into()).into());
    }
    let (secrets, kernel) = conn.into_kernel()?;
    inc.buf.truncate(inc.used);
    Ok(Established {
        kernel,
        secrets,
        early: inc.buf,
    })
}

/// Appends one encoded handshake record to `out`, growing it to the size rustls asks for.
fn encode(
    out: &mut Vec<u8>,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, EncodeError>,
) -> Result<(), HandshakeError> {
    let at = out.len();
    out.resize(at + 4096, 0);
    loop {
        match f(&mut out[at..]) {
            Ok(n) => {
                out.truncate(at + n);
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(s)) => out.resize(at + s.required_size, 0),
            Err(e) => return Err(Error::General(e.to_string()).into()),
        }
    }
}
