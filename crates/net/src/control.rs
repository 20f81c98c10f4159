//! Blocking control-connection I/O: whole messages in and out over a TCP stream, every read and write
//! bounded by a timeout. The bytes-to-messages work is landspeed-core's `FrameDecoder`; this module only
//! moves bytes and maps socket conditions to typed errors.

use landspeed_core::protocol::{encode, FrameDecoder, FrameError, Message, ProtocolError, Waiting};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("peer closed the control connection")]
    Closed,
    #[error("timed out after {0:?} waiting for the peer")]
    Timeout(Duration),
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Why the next message a session waited for did not come.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The session's timer ran out, or the peer closed the connection: the session names the step.
    #[error(transparent)]
    Session(#[from] ProtocolError),
    /// The connection failed otherwise (an I/O error, a frame that cannot be read).
    #[error(transparent)]
    Control(#[from] ControlError),
}

/// Longest one read blocks when the session has no timer running (it then waits on something else
/// that is bounded, such as the data streams' idle timeout).
const UNTIMED: Duration = Duration::from_secs(3600);

/// The reading half of a control connection.
pub struct ControlReader {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

impl ControlReader {
    /// The connection, for checks that do not read (see `sockopt::peer_gone`).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn new(stream: TcpStream) -> Self {
        ControlReader {
            stream,
            decoder: FrameDecoder::new(),
            buf: vec![0; 64 * 1024],
        }
    }

    /// Bytes already read past the preamble are handed in here.
    pub fn with_leftover(stream: TcpStream, leftover: &[u8]) -> Self {
        let mut r = Self::new(stream);
        r.decoder.push(leftover);
        r
    }

    /// Reads the next message, waiting at most `timeout` for all of it: a peer that trickles a message
    /// byte by byte gets no more time than one that sends nothing.
    pub fn read(&mut self, timeout: Duration) -> Result<Message, ControlError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(m) = self.decoder.next_message()? {
                return Ok(m);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout(timeout));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut self.buf) {
                Ok(0) => return Err(ControlError::Closed),
                Ok(n) => self.decoder.push(&self.buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(ControlError::Timeout(timeout))
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                    return Err(ControlError::Closed)
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl ControlReader {
    /// Reads the next message `session` waits for, blocking no longer than its timer allows; a timeout
    /// or a closed connection comes back as the session's own typed error for that step.
    pub fn read_for(&mut self, session: &mut dyn Waiting) -> Result<Message, WaitError> {
        loop {
            let left = session.time_left(Instant::now()).unwrap_or(UNTIMED);
            match self.read(left) {
                Ok(m) => return Ok(m),
                Err(ControlError::Timeout(_)) => session.handle_timeout(Instant::now())?,
                Err(ControlError::Closed) => return Err(session.on_closed(Instant::now()).into()),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The writing half of a control connection.
pub struct ControlWriter {
    stream: TcpStream,
}

impl ControlWriter {
    pub fn new(stream: TcpStream, timeout: Duration) -> std::io::Result<Self> {
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(ControlWriter { stream })
    }

    pub fn send(&mut self, msg: &Message) -> Result<(), ControlError> {
        match self.stream.write_all(&encode(msg)) {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Err(
                ControlError::Timeout(self.stream.write_timeout().ok().flatten().unwrap_or_default()),
            ),
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                Err(ControlError::Closed)
            }
            Err(e) => Err(e.into()),
        }
    }

    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Splits a control connection into its reader and writer.
pub fn split(
    stream: TcpStream,
    leftover: &[u8],
    write_timeout: Duration,
) -> std::io::Result<(ControlReader, ControlWriter)> {
    let w = ControlWriter::new(stream.try_clone()?, write_timeout)?;
    Ok((ControlReader::with_leftover(stream, leftover), w))
}

/// Reads control messages on a thread of its own and forwards them to the engine's wake-up channel, so
/// the sampling thread sees them as they arrive. Ends after an error, after the peer's final `Results`,
/// or when `quit` is raised.
pub fn spawn_reader<X: From<Result<Message, ControlError>> + Send + 'static>(
    mut reader: ControlReader,
    tx: std::sync::mpsc::Sender<landspeed_engine::supervisor::Wake<X>>,
    quit: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering::Relaxed;
    std::thread::Builder::new()
        .name("control-reader".into())
        .spawn(move || loop {
            match reader.read(Duration::from_millis(250)) {
                Err(ControlError::Timeout(_)) if !quit.load(Relaxed) => continue,
                Err(ControlError::Timeout(_)) => return,
                other => {
                    let end = other.is_err() || matches!(other, Ok(Message::Results { .. }));
                    if tx
                        .send(landspeed_engine::supervisor::Wake::External(X::from(other)))
                        .is_err()
                        || end
                    {
                        return;
                    }
                }
            }
        })
        .ok();
}
