//! Why a client run failed (`ClientError`), whichever protocol it spoke.

use crate::control::ControlError;
use landspeed_engine::sockopt::SockOptError;
use landspeed_proto::ProtocolError;
use std::net::SocketAddr;
use std::time::Duration;

/// Why a client run failed, by kind: callers decide retries and exit codes by variant.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server's name did not resolve.
    #[error("cannot resolve host '{host}': {err}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's reason.
        err: std::io::Error,
    },
    /// The name has no address of the family asked for.
    #[error("host '{host}' has no {family} address")]
    NoAddress {
        /// The name.
        host: String,
        /// IPv4 or IPv6.
        family: &'static str,
    },
    /// The server is iperf3, and the test asks for something iperf3 cannot do.
    #[error("the server speaks iperf3's protocol, which cannot carry {what}")]
    NotWithIperf3 {
        /// What, and why not.
        what: &'static str,
    },
    /// A QUIC test, and the server accepted it without a QUIC port or certificate: it predates QUIC.
    #[error(
        "the server accepted a QUIC test without offering QUIC (a landspeed server older than QUIC support?)"
    )]
    QuicNotOffered,
    /// No QUIC handshake completed in time.
    #[error(
        "no QUIC answer from {addr} within {after:?} (is UDP blocked, or QUIC turned off on the server?)"
    )]
    QuicTimeout {
        /// The server's QUIC address.
        addr: SocketAddr,
        /// How long the client waited.
        after: Duration,
    },
    /// `--flow-label`: the label cannot be used.
    #[error("cannot set the IPv6 flow label: {reason}")]
    FlowLabel {
        /// Why.
        reason: String,
    },
    /// `--bind-dev`: the interface cannot be bound.
    #[error("cannot send from interface {device}: {err}")]
    BindDevice {
        /// The interface.
        device: String,
        /// The kernel's reason (no such device, not permitted).
        err: std::io::Error,
    },
    /// An ndt7 subtest that could not start (`run --ndt7`).
    #[error("ndt7: {detail}")]
    Ndt7 {
        /// What went wrong.
        detail: String,
    },
    /// A QUIC connection or stream failed.
    #[error("QUIC: {detail}")]
    Quic {
        /// What went wrong.
        detail: String,
    },
    /// Kernel TLS was asked for and cannot be used.
    #[error("kernel TLS: {reason}")]
    Ktls {
        /// Why not, in words.
        reason: String,
    },
    /// A `--tls` test, and the server accepted it without announcing a certificate: it predates TLS.
    #[error("the server accepted the test without offering TLS (a landspeed server older than TLS support?); run without TLS")]
    TlsNotOffered,
    /// A data stream's TLS handshake failed.
    #[error("stream {id}: {detail}")]
    Tls {
        /// The stream.
        id: u32,
        /// What went wrong.
        detail: String,
    },
    /// The test asks for something this platform does not have.
    #[error(transparent)]
    Unsupported(#[from] landspeed_engine::platform::Unsupported),
    /// MPTCP was asked for and this host cannot open an MPTCP socket.
    #[error("cannot open an MPTCP socket: {reason}")]
    Mptcp {
        /// The kernel's side of it, in words.
        reason: String,
    },
    /// No connection to the server.
    #[error("cannot connect to {addr}: {err}")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// Why not.
        err: std::io::Error,
    },
    /// Something answered that is not a landspeed server.
    #[error("{addr} does not speak the landspeed protocol ({detail})")]
    NotLandspeed {
        /// The server's address.
        addr: SocketAddr,
        /// What it did instead.
        detail: String,
    },
    /// The control connection failed (I/O, a timeout, the server closed it).
    #[error("control connection to {addr}: {err}")]
    Control {
        /// The server's address.
        addr: SocketAddr,
        /// What happened.
        err: ControlError,
    },
    /// The conversation failed (a timeout at a step, a message out of turn, a remote error).
    #[error(transparent)]
    Protocol(ProtocolError),
    /// The server closed the control connection mid-conversation: it was stopped, killed or
    /// restarted.
    #[error(
        "the server went away while {phase}: it closed the control connection (stopped, killed or restarted)"
    )]
    ServerWentAway {
        /// What the client was waiting for.
        phase: &'static str,
    },
    /// The data streams ended, but the server's results never came on the control connection.
    #[error("the data streams ended, but no answer came on the control connection for {after:?}: the control connection (or the server) went silent")]
    ControlSilent {
        /// How long the results were waited for after the data ended.
        after: Duration,
    },
    /// The data connections moved nothing for the idle timeout and then the control connection
    /// brought no results either: the path or the server went away mid-test.
    #[error("no progress for {idle:?} on the data connections ({streams}), then no answer on the control connection for {control_after:?}: the path or the server went away")]
    WentSilent {
        /// The idle timeout the data streams gave up after.
        idle: Duration,
        /// Each failed stream and why.
        streams: String,
        /// How long the control connection was then waited on.
        control_after: Duration,
    },
    /// The server is at a capacity limit or rate-limits this address: the same test can succeed later.
    #[error("the server is busy: {reason}")]
    Busy {
        /// The server's words.
        reason: String,
    },
    /// The server refused the test for a reason a retry will not change.
    #[error("the server refused the test: {reason}")]
    Refused {
        /// The server's typed reason.
        code: landspeed_proto::Refusal,
        /// The server's words.
        reason: String,
    },
    /// A data stream failed to open.
    #[error("data stream {id}: {err}")]
    Stream {
        /// The stream.
        id: u32,
        /// Why.
        err: std::io::Error,
    },
    /// The test is not valid.
    #[error("invalid test: {0}")]
    Config(#[from] landspeed_core::config::ConfigError),
    /// A socket option the test asks for could not be set.
    #[error(transparent)]
    SockOpt(#[from] SockOptError),
    /// Ctrl-C before the data moved.
    #[error("interrupted before the test started")]
    Interrupted,
    /// A file test asked for the direction its file cannot move in: a file sent from this end needs a
    /// forward test, a file received here a reverse one.
    #[error("{}", if *.upload {
        "a file sent from this end needs a forward test (not reverse or bidirectional)"
    } else {
        "a file received at this end needs a reverse test"
    })]
    FileDirection {
        /// True for a file sent from this end, false for one received here.
        upload: bool,
    },
    /// The system had no randomness to give (cookie, key, session id).
    #[error("no randomness for {what}: {err}")]
    Random {
        /// What it was for.
        what: &'static str,
        /// Why not.
        err: getrandom::Error,
    },
    /// The server answered with something the session did not wait for at this step.
    #[error("the server answered out of order while {step}")]
    OutOfOrder {
        /// Which step.
        step: &'static str,
    },
    #[error(
        "UDP stream {id}: the server did not acknowledge it within {after:?} (is UDP port {port} open?)"
    )]
    /// A UDP stream's hello got no acknowledgement.
    UdpUnacknowledged {
        /// The stream.
        id: u32,
        /// How long it was tried.
        after: Duration,
        /// The server's UDP port.
        port: u16,
    },
    /// An iperf3 server refused the test with its own error numbers (SERVER_ERROR).
    #[error("the iperf3 server refused the test: {} (iperf3 error {code})", landspeed_iperf3::strerror::server_error(*code, *errno))]
    Iperf3Refused {
        /// iperf3's error number.
        code: i32,
        /// The server's errno.
        errno: i32,
    },
    /// An iperf3 server sent a state other than the one its protocol has next.
    #[error("the iperf3 server said {got}, expected {expected}")]
    Iperf3Unexpected {
        /// The state that came.
        got: String,
        /// What the protocol has next.
        expected: &'static str,
    },
    /// The iperf3 conversation failed (the session's typed reason: a timeout or the server leaving
    /// at a named step, its results unreadable, SERVER_TERMINATE).
    #[error("iperf3: {0}")]
    Iperf3(landspeed_iperf3::Iperf3Error),
    /// The iperf3 control connection failed (an I/O error, a write that timed out).
    #[error("iperf3 control connection: {0}")]
    Iperf3Control(ControlError),
    /// An iperf3 server answered a UDP stream's hello with something other than `6789`.
    #[error("UDP stream {id}: unexpected answer to the iperf3 UDP hello")]
    Iperf3UdpHello {
        /// The stream.
        id: u32,
    },
    /// The client holds a key and the server answered in iperf3's protocol, which cannot carry it:
    /// the test stops rather than fall back unauthenticated (a downgrade anyone in the path can cause
    /// with one byte).
    #[error(
        "{addr} answered in iperf3's protocol (first byte {first_byte:#04x}), which cannot authenticate; \
         a client with a key does not fall back to it"
    )]
    Downgrade {
        /// The server's address.
        addr: SocketAddr,
        /// The byte it answered with.
        first_byte: u8,
    },
    /// The server answered in iperf3's protocol (PARAM_EXCHANGE or ACCESS_DENIED): retry with
    /// `run_iperf3_client`.
    #[error("{addr} is an iperf3 server")]
    Iperf3Server {
        /// The server's address.
        addr: SocketAddr,
    },
    /// A file of a disk-to-disk test could not be read or written.
    #[error("file {path}: {err}")]
    File {
        /// The file.
        path: String,
        /// Why.
        err: std::io::Error,
    },
    /// The latency probes could not run.
    #[error("latency probes: {0}")]
    Latency(#[from] landspeed_path::echo::EchoError),
}

impl From<ProtocolError> for ClientError {
    /// A refusal becomes `Busy` or `Refused` by its code, so callers decide by variant.
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Rejected { code, reason } if code.is_transient() => ClientError::Busy { reason },
            ProtocolError::Rejected { code, reason } => ClientError::Refused { code, reason },
            other => ClientError::Protocol(other),
        }
    }
}

impl ClientError {
    /// Trying the same test again later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Busy { .. })
    }
}
