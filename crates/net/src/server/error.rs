//! Why a test on this server did not complete, as a typed error. The server's log line shows its text;
//! code that must react to a failure (the SIGUSR1 counters, a retry, a test) matches the variant, never
//! the text.

use crate::control::{ControlError, WaitError};
use landspeed_core::protocol::{ProtocolError, Refusal};
use landspeed_engine::sockopt::SockOptError;
use std::time::Duration;

/// Why some data streams never arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingWhy {
    /// The handshake timeout passed.
    Timeout,
    /// The client closed its control connection while the server waited.
    ClientClosed,
    /// The server is shutting down (its registry closed).
    Shutdown,
}

impl std::fmt::Display for MissingWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MissingWhy::Timeout => "before the handshake timeout",
            MissingWhy::ClientClosed => "before the client closed its control connection",
            MissingWhy::Shutdown => "(registry closed)",
        })
    }
}

/// A test that ended without completing, on the server (`ServerError` is the server's own start-up
/// failure).
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("rejected: {reason}")]
    Rejected { code: Refusal, reason: String },
    #[error("client failed: {0}")]
    ClientFailed(String),
    #[error("only {arrived} of {expected} data streams arrived {why}")]
    StreamsMissing {
        arrived: usize,
        expected: u32,
        why: MissingWhy,
    },
    #[error("UDP stream {id}: {err}")]
    UdpStream { id: u32, err: std::io::Error },
    #[error(transparent)]
    SockOpt(#[from] SockOptError),
    #[error("server CPUs: {0}")]
    Cpus(String),
    #[error("no randomness for {what}: {err}")]
    Random {
        what: &'static str,
        err: getrandom::Error,
    },
    #[error("expected start, got {0}")]
    NotStarted(String),
    #[error("the client sent no results within {0:?}")]
    NoResults(Duration),
    #[error("{}", .0.iter().map(|(id, e)| format!("stream {id}: {e}")).collect::<Vec<_>>().join("; "))]
    Streams(Vec<(u32, String)>),
    #[error("server shutting down")]
    Shutdown,
    #[error("a registry lock was poisoned by a panicked test")]
    Poisoned,
    /// A third-party order that could not be carried out.
    #[error("{0}")]
    Order(String),
    #[error("iperf3 control connection, {step}: {err}")]
    Iperf3Io { step: &'static str, err: std::io::Error },
    /// An iperf3 conversation failed (the session's typed reason).
    #[error(transparent)]
    Iperf3(landspeed_iperf3::Iperf3Error),
    #[error("the client terminated the test")]
    ClientTerminated,
    #[error("the client closed the connection")]
    ClientClosed,
    #[error("the client never ended the test")]
    NeverEnded,
}

/// A client that leaves or terminates is named as such; the other reasons keep the session's text.
impl From<landspeed_iperf3::Iperf3Error> for TestError {
    fn from(e: landspeed_iperf3::Iperf3Error) -> TestError {
        use landspeed_iperf3::Iperf3Error as E;
        match e {
            E::PeerClosed { .. } => TestError::ClientClosed,
            E::ClientTerminated => TestError::ClientTerminated,
            e => TestError::Iperf3(e),
        }
    }
}

impl From<WaitError<landspeed_iperf3::Iperf3Error>> for TestError {
    fn from(e: WaitError<landspeed_iperf3::Iperf3Error>) -> TestError {
        match e {
            WaitError::Session(e) => e.into(),
            WaitError::Control(e) => TestError::Control(e),
        }
    }
}

impl From<WaitError> for TestError {
    fn from(e: WaitError) -> TestError {
        match e {
            WaitError::Session(e) => TestError::Protocol(e),
            WaitError::Control(e) => TestError::Control(e),
        }
    }
}
