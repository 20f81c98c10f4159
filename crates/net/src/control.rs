//! Blocking control-connection I/O. `Link` is the one driver loop of landspeed's own tests on both
//! sides: a reader thread and the listeners feed one wake-up channel, the session (a core `Conn`)
//! takes the bytes and decides what is sent and what the driver must do, and the loop hands the
//! driver only actions, arrivals and ticks (landspeed tests on both ends, a controller's orders).
//! `ControlWriter` alone answers a connection refused before any conversation. This module only moves
//! bytes and maps socket conditions to typed errors.

use landspeed_engine::supervisor::Wake;
use landspeed_proto::{encode, Conn, Conversation, FrameError, Machine, Message, ProtocolError};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Why a control connection failed below the conversation.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The peer closed or reset it.
    #[error("peer closed the control connection")]
    Closed,
    /// A write did not complete within the timeout.
    #[error("timed out after {0:?} waiting for the peer")]
    Timeout(Duration),
    /// Another I/O error.
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
    /// Bytes that are not a control frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Why the next message a session waited for did not come (`S`: the session's error, landspeed's
/// `ProtocolError` or iperf3's).
#[derive(Debug, thiserror::Error)]
pub enum WaitError<S = ProtocolError> {
    /// The session's timer ran out, the peer closed the connection, or what it said is not what the
    /// protocol has next: the session names the step.
    #[error(transparent)]
    Session(S),
    /// The connection failed otherwise (an I/O error, a frame that cannot be read).
    #[error(transparent)]
    Control(#[from] ControlError),
}

impl From<ProtocolError> for WaitError {
    fn from(e: ProtocolError) -> Self {
        WaitError::Session(e)
    }
}

/// The writing half of a control connection.
pub struct ControlWriter {
    stream: TcpStream,
}

impl ControlWriter {
    /// The writing half of `stream`, writes bounded by `timeout`, Nagle off.
    pub fn new(stream: TcpStream, timeout: Duration) -> std::io::Result<Self> {
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(ControlWriter { stream })
    }

    /// Writes one message.
    pub fn send(&mut self, msg: &Message) -> Result<(), ControlError> {
        self.write_raw(&encode(msg))
    }

    /// Writes bytes already framed (a session's output).
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ControlError> {
        match self.stream.write_all(bytes) {
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

    /// Closes the connection both ways.
    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// What wakes a test's driver besides its engine: its control connection's bytes and conditions, and
/// on a server the data connections that quote its session.
#[derive(Debug)]
pub enum Input {
    /// Bytes read from the control connection.
    Bytes(Vec<u8>),
    /// The peer closed the control connection (or reset it).
    Closed,
    /// Reading the control connection failed otherwise.
    Failed(std::io::Error),
    /// A data connection for this test arrived.
    Arrival(Arrival),
}

/// A data connection for a test, as the server's listeners hand it over.
#[derive(Debug)]
pub enum Arrival {
    /// TCP stream `id`.
    Tcp(u32, TcpStream),
    /// The hello of UDP stream `id`: from the client's address, at the listener's.
    Udp(u32, SocketAddr, SocketAddr),
    /// An iperf3 TCP data connection (its cookie read): iperf3's streams carry no number, they count
    /// in the order they come.
    Iperf3Tcp(TcpStream),
    /// An iperf3 UDP hello: from the client's address, at the listener's.
    Iperf3Udp(SocketAddr, SocketAddr),
    /// QUIC stream `id` (its hello read), on a connection of the test.
    Quic(u32, QuicArrival),
    /// A TCP stream whose TLS handshake ran on a thread of its own and succeeded.
    Handshaken(Box<Handshaken>),
}

/// A TLS data connection after its handshake, which runs off the test's thread (a connection that
/// never finishes its handshake costs that thread, not the test, and is refused there).
pub struct Handshaken {
    /// The stream's number.
    pub id: u32,
    /// The stream, configured for its role.
    pub stream: landspeed_engine::transport::tcp::DataStream,
}

impl std::fmt::Debug for Handshaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Handshaken({})", self.id)
    }
}

/// A QUIC stream that named its test: the connection it came on and its two halves.
#[derive(Debug)]
pub struct QuicArrival {
    /// The connection.
    pub conn: quinn::Connection,
    /// The server's sending half.
    pub send: quinn::SendStream,
    /// The server's receiving half (the hello already read from it).
    pub recv: quinn::RecvStream,
}

/// A session with its control connection's writing half: what the session sends is written at once.
pub struct Wire<E: Conversation> {
    /// The session (with its framing).
    pub conn: E,
    writer: ControlWriter,
}

impl<E: Conversation> Wire<E> {
    /// Writes what the session has to send.
    pub fn flush(&mut self) -> Result<(), ControlError> {
        while let Some(bytes) = self.conn.poll_transmit() {
            self.writer.write_raw(&bytes)?;
        }
        Ok(())
    }

    /// A local event (`event` calls the session's method for it) at once, and what it sends.
    pub fn with<T>(
        &mut self,
        event: impl FnOnce(&mut E) -> Result<T, E::Error>,
    ) -> Result<T, WaitError<E::Error>> {
        let out = event(&mut self.conn).map_err(WaitError::Session);
        let flushed = self.flush();
        let out = out?;
        flushed?;
        Ok(out)
    }

    /// Takes one input at `now`: control bytes go to the session (and its answers out, a refusal's
    /// too); a data connection comes back to the driver.
    pub fn feed(&mut self, input: Input, now: Instant) -> Result<Option<Arrival>, WaitError<E::Error>> {
        match input {
            Input::Bytes(b) => {
                let fed = self.conn.handle_input(&b, now);
                let flushed = self.flush();
                fed.map_err(WaitError::Session)?;
                flushed?;
                Ok(None)
            }
            Input::Closed => Err(WaitError::Session(self.conn.handle_closed(now))),
            Input::Failed(e) => Err(ControlError::Io(e).into()),
            Input::Arrival(a) => Ok(Some(a)),
        }
    }

    /// Closes the connection both ways.
    pub fn shutdown(&self) {
        self.writer.shutdown();
    }
}

impl<M: Machine> Wire<Conn<M>> {
    /// Sends a message the session does not decide (an error report, a clock reading).
    pub fn send(&mut self, msg: &Message) -> Result<(), ControlError> {
        self.conn.send(msg);
        self.flush()
    }

    /// A local event (`event` is the session's method for it), and what it sends.
    pub fn local(
        &mut self,
        event: impl FnOnce(&mut M, Instant) -> Result<M::Action, ProtocolError>,
    ) -> Result<(), WaitError> {
        self.conn.handle_local(Instant::now(), event)?;
        Ok(self.flush()?)
    }
}

/// What `Link::run` hands its driver.
pub enum Event<A> {
    /// The session asks for this.
    Action(A),
    /// A data connection for the test arrived.
    Arrival(Arrival),
    /// Nothing arrived for a while (at most `TICK`): a chance to look at outside conditions.
    Tick,
}

/// How often `Link::run` hands its driver a `Tick` when nothing happens.
pub const TICK: Duration = Duration::from_millis(100);

/// One control connection driven by its session: the wire, and the wake-up channel that a reader
/// thread (and, on a server, the listeners) feed. The engine's supervisor takes the same channel
/// while the data moves, so one queue carries everything a test's driver waits for.
pub struct Link<E: Conversation> {
    /// The session and the writing half.
    pub wire: Wire<E>,
    /// The wake-up channel: its sending side for the reader thread, the listeners and the engine.
    pub tx: mpsc::Sender<Wake<Input>>,
    /// Its receiving side.
    pub rx: mpsc::Receiver<Wake<Input>>,
    stream: TcpStream,
    quit: Arc<AtomicBool>,
}

impl<E: Conversation> Link<E> {
    /// A link over `stream`, writes bounded by `write_timeout`; what `conn` already holds is sent.
    /// Nothing is read until `listen`.
    pub fn new(stream: TcpStream, conn: E, write_timeout: Duration) -> Result<Self, ControlError> {
        let writer = ControlWriter::new(stream.try_clone()?, write_timeout)?;
        let (tx, rx) = mpsc::channel();
        let mut wire = Wire { conn, writer };
        wire.flush()?;
        Ok(Link {
            wire,
            tx,
            rx,
            stream,
            quit: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The control connection, for checks that do not read.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Starts reading the control connection on a thread of its own, until the link is dropped.
    pub fn listen(&mut self) -> Result<(), ControlError> {
        let stream = self.stream.try_clone()?;
        stream.set_read_timeout(Some(Duration::from_millis(250)))?;
        let (tx, quit) = (self.tx.clone(), self.quit.clone());
        std::thread::Builder::new()
            .name("control-reader".into())
            .spawn(move || read_into(stream, &tx, &quit))?;
        Ok(())
    }

    /// Runs the conversation: writes what the session sends, hands each action, data connection and
    /// tick to `step` until it returns a value, and fails with the session's own error when its timer
    /// runs out or the peer goes away (what the session had to say then, such as a refusal, is still
    /// written). The driver never reads a message itself.
    pub fn run<T, Err: From<WaitError<E::Error>>>(
        &mut self,
        mut step: impl FnMut(&mut Self, Event<E::Action>) -> Result<Option<T>, Err>,
    ) -> Result<T, Err> {
        loop {
            self.wire.flush().map_err(WaitError::from)?;
            let event = match self.wire.conn.poll_action() {
                Some(a) => Event::Action(a),
                None => match self.next_input() {
                    Ok(Some(arrival)) => Event::Arrival(arrival),
                    Ok(None) => self.wire.conn.poll_action().map_or(Event::Tick, Event::Action),
                    Err(e) => {
                        let _ = self.wire.flush();
                        return Err(e.into());
                    }
                },
            };
            match step(self, event) {
                Ok(Some(out)) => {
                    self.wire.flush().map_err(WaitError::from)?;
                    return Ok(out);
                }
                Ok(None) => {}
                Err(e) => {
                    let _ = self.wire.flush();
                    return Err(e);
                }
            }
        }
    }

    /// Waits for the next input (at most the session's time left, and a tick) and takes it.
    fn next_input(&mut self) -> Result<Option<Arrival>, WaitError<E::Error>> {
        let now = Instant::now();
        self.wire.conn.handle_timeout(now).map_err(WaitError::Session)?;
        let left = self.wire.conn.time_left(now).map_or(TICK, |l| l.min(TICK));
        match self.rx.recv_timeout(left) {
            Ok(Wake::External(input)) => self.wire.feed(input, Instant::now()),
            Ok(Wake::WorkerDone) | Err(_) => Ok(None),
        }
    }
}

impl<E: Conversation> Drop for Link<E> {
    fn drop(&mut self) {
        self.quit.store(true, Relaxed);
    }
}

/// The reader thread: forwards what it reads until the connection ends or `quit` is raised.
fn read_into(mut stream: TcpStream, tx: &mpsc::Sender<Wake<Input>>, quit: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    while !quit.load(Relaxed) {
        let input = match stream.read(&mut buf) {
            Ok(0) => Input::Closed,
            Ok(n) => Input::Bytes(buf[..n].to_vec()),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => Input::Closed,
            Err(e) => Input::Failed(e),
        };
        let last = !matches!(input, Input::Bytes(_));
        if tx.send(Wake::External(input)).is_err() || last {
            return;
        }
    }
}
