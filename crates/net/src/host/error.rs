//! Why a test on this server did not complete, as a typed error. The server's log line shows its text;
//! code that must react to a failure (the SIGUSR1 counters, a retry, a test) matches the variant, never
//! the text.

use crate::control::{ControlError, WaitError};
use landspeed_engine::sockopt::SockOptError;
use landspeed_proto::{ProtocolError, Refusal};
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
    /// The control connection failed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The conversation failed (a timeout at a step, a message out of turn).
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The test was refused; the client was told why.
    #[error("rejected: {reason}")]
    Rejected {
        /// The typed reason.
        code: Refusal,
        /// The words the client got.
        reason: String,
    },
    /// The client reported a failure of its own.
    #[error("client failed: {0}")]
    ClientFailed(String),
    /// Not admitted as a test (the per-minute rate, every slot taken, the memory budget); the client
    /// was told in its protocol's words. Logged as a refusal of `kind`, not as a test.
    #[error("{reason}")]
    NotAdmitted {
        /// What the refusal counts as.
        kind: landspeed_core::server_log::RefusalKind,
        /// Why, for the log line.
        reason: String,
    },
    /// The server cut the running test at one of its limits; the client was told why.
    #[error(transparent)]
    Cut(landspeed_proto::Cut),
    /// Some data streams never came.
    #[error("only {arrived} of {expected} data streams arrived {why}")]
    StreamsMissing {
        /// How many came.
        arrived: usize,
        /// How many the test has.
        expected: u32,
        /// Why the wait ended.
        why: MissingWhy,
    },
    /// A data stream's TLS handshake failed.
    #[error("stream {stream}: {detail}")]
    Tls {
        /// The stream.
        stream: u32,
        /// What went wrong.
        detail: String,
    },
    /// A UDP stream's socket could not be set up.
    #[error("UDP stream {id}: {err}")]
    UdpStream {
        /// The stream.
        id: u32,
        /// Why.
        err: std::io::Error,
    },
    /// A socket option the test asks for could not be set.
    #[error(transparent)]
    SockOpt(#[from] SockOptError),
    /// The test asks for something this server's platform does not have.
    #[error("this server cannot: {0}")]
    Unsupported(#[from] landspeed_engine::platform::Unsupported),
    /// The CPUs the client asked the server to pin to are not usable here.
    #[error("server CPUs: {0}")]
    Cpus(String),
    /// The system had no randomness to give.
    #[error("no randomness for {what}: {err}")]
    Random {
        /// What it was for.
        what: &'static str,
        /// Why not.
        err: getrandom::Error,
    },
    /// The client never said start.
    #[error("expected start, got {0}")]
    NotStarted(String),
    /// The client's results did not come in time.
    #[error("the client sent no results within {0:?}")]
    NoResults(Duration),
    /// Streams failed, each with its reason.
    #[error("{}", .0.iter().map(|(id, e)| format!("stream {id}: {e}")).collect::<Vec<_>>().join("; "))]
    Streams(Vec<(u32, String)>),
    /// The server is shutting down.
    #[error("server shutting down")]
    Shutdown,
    /// A shared table's lock was poisoned (a test's thread panicked).
    #[error("a registry lock was poisoned by a panicked test")]
    Poisoned,
    /// A third-party order that could not be carried out.
    #[error("{0}")]
    Order(String),
    /// An iperf3 test's control connection failed outside the conversation.
    #[error("iperf3 control connection, {step}: {err}")]
    Iperf3Io {
        /// What was being done.
        step: &'static str,
        /// Why it failed.
        err: std::io::Error,
    },
    /// An iperf3 conversation failed (the session's typed reason).
    #[error(transparent)]
    Iperf3(landspeed_iperf3::Iperf3Error),
    /// The iperf3 client sent CLIENT_TERMINATE.
    #[error("the client terminated the test")]
    ClientTerminated,
    /// The client closed its control connection before the test completed.
    #[error("the client closed the connection")]
    ClientClosed,
    /// The client never ended the test (TEST_END) after this end's streams were done.
    #[error("the client never ended the test")]
    NeverEnded,
}

/// A client that leaves or terminates is named as such; the other reasons keep the session's text.
impl From<landspeed_iperf3::Iperf3Error> for TestError {
    fn from(e: landspeed_iperf3::Iperf3Error) -> TestError {
        use landspeed_iperf3::Iperf3Error as E;
        match e {
            E::Wait(landspeed_proto::WaitFailed::PeerClosed { .. }) => TestError::ClientClosed,
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
