//! iperf3's conversation as sans-IO sessions, in the quinn style of landspeed's own (`proto::
//! conn`): bytes in with `now` (`handle_input`), local events as methods, the passing of time
//! (`handle_timeout`); bytes out (`poll_transmit`), what the driver must do (`poll_action`) and when to
//! wake (`time_left`). iperf3's control connection carries one-byte states, SERVER_ERROR's two
//! numbers and length-prefixed JSON, and which of them comes next depends on the state: the sessions
//! own that order and every wait's timer, so the drivers in landspeed-net only move bytes and run the
//! engine, and every step (TEST_START and TEST_RUNNING back to back, -R, --bidir, UDP, refusals, a
//! timeout or a peer vanishing anywhere) is tested in memory under a virtual clock.

/// The `Conversation` side every iperf3 session shares: input goes to the session's `step` until it needs
/// more bytes (a failure ends the session through `fail`), output and actions are queued, one timer;
/// what a timeout or a closed peer means is each session's own (`on_timeout`, `on_closed`).
macro_rules! impl_endpoint {
    ($session:ty, $action:ty) => {
        impl Conversation for $session {
            type Action = $action;
            type Error = Iperf3Error;

            fn handle_input(&mut self, bytes: &[u8], now: Instant) -> Result<(), Iperf3Error> {
                self.inbox.push(bytes);
                loop {
                    match self.step(now) {
                        Ok(true) => {}
                        Ok(false) => return Ok(()),
                        Err(e) => return Err(self.fail(e)),
                    }
                }
            }

            fn poll_transmit(&mut self) -> Option<Vec<u8>> {
                (!self.transmit.is_empty()).then(|| std::mem::take(&mut self.transmit))
            }

            fn poll_action(&mut self) -> Option<$action> {
                self.actions.pop_front()
            }

            fn time_left(&self, now: Instant) -> Option<Duration> {
                self.timer.at().map(|at| at.saturating_duration_since(now))
            }

            fn handle_timeout(&mut self, now: Instant) -> Result<(), Iperf3Error> {
                match self.timer.expired(now) {
                    Some(after) => self.on_timeout(after),
                    None => Ok(()),
                }
            }

            fn handle_closed(&mut self, _now: Instant) -> Iperf3Error {
                self.on_closed()
            }
        }
    };
}

mod client;
mod server;
#[cfg(test)]
mod tests;

pub use client::{ClientAction, ClientPhase, ClientSession};
pub use server::{ServerAction, ServerPhase, ServerSession};

use crate::params::ParamError;
use crate::results::ResultsError;
use crate::wire::{json_len, State};
use landspeed_proto::OverLimit;
use std::time::Duration;

/// How long each wait of an iperf3 conversation may last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iperf3Timers {
    /// Each handshake step (parameters, streams, the start) and the final IPERF_DONE.
    pub handshake: Duration,
    /// The results exchange: from the end of the test until the peer's results have arrived.
    pub results: Duration,
    /// A server whose own streams are done waits this long for the client's TEST_END.
    pub idle: Duration,
}

impl Default for Iperf3Timers {
    fn default() -> Self {
        Iperf3Timers {
            handshake: Duration::from_secs(10),
            results: Duration::from_secs(40),
            idle: Duration::from_secs(30),
        }
    }
}

/// Why an iperf3 conversation failed.
#[derive(Debug, thiserror::Error)]
pub enum Iperf3Error {
    /// A wait that ended without what it waited for: a timer ran out, or the peer closed (the same
    /// meaning as landspeed's own sessions').
    #[error(transparent)]
    Wait(#[from] landspeed_proto::WaitFailed),
    /// A state byte the protocol does not have next (`got`), while waiting for `expected`.
    #[error("the peer said {}, expected {expected}", describe(*got))]
    Unexpected {
        /// The state byte that came.
        got: u8,
        /// What the session waited for.
        expected: &'static str,
    },
    /// The server refused or failed the test with iperf3's error number and errno (SERVER_ERROR).
    #[error("the iperf3 server refused the test: iperf3 error {code} (errno {errno})")]
    ServerError {
        /// iperf3's error number (iperf_api.h).
        code: i32,
        /// The server's errno, 0 when none.
        errno: i32,
    },
    /// The server turned the connection away (ACCESS_DENIED): it runs another test.
    #[error("the iperf3 server is running another test (ACCESS_DENIED)")]
    AccessDenied,
    /// The client did not pass iperf3's authentication: the server answered AUTH_TEST.
    #[error("iperf3 authentication failed: {0}")]
    Unauthorized(String),
    /// The client ended the test before it completed (CLIENT_TERMINATE).
    #[error("the client terminated the test")]
    ClientTerminated,
    /// The server ended the test before it completed (SERVER_TERMINATE).
    #[error("the server terminated the test")]
    ServerTerminated,
    /// A JSON message longer than this side accepts (or empty).
    #[error("iperf3 message of {len} bytes refused (limit {limit})")]
    TooLong {
        /// The length the message announced.
        len: usize,
        /// The most this side takes.
        limit: usize,
    },
    /// The client's parameters cannot be run; the client was told with the error's number.
    #[error("bad parameters: {0}")]
    Params(#[from] ParamError),
    /// The parameters ask for more than this server allows; the client was told.
    #[error("over a limit: {0}")]
    OverLimit(OverLimit),
    /// The test asked for, or moved on average, more than the server's total rate limit (iperf3's
    /// `--server-bitrate-limit`); the client was told with iperf3's number, in iperf3's words.
    #[error("total required bandwidth is larger than server limit")]
    TotalRate,
    /// The server cut the running test at its length or byte limit; the client was told with
    /// iperf3's number (160, "server test duration expired", or 120, "the server has terminated").
    #[error(transparent)]
    Cut(landspeed_proto::Cut),
    /// The peer's results message could not be read.
    #[error("results: {0}")]
    Results(#[from] ResultsError),
    /// The driver reported an event the session cannot take in this phase (a driver bug).
    #[error("local event '{event}' while {phase}")]
    BadLocalEvent {
        /// The event.
        event: &'static str,
        /// Where the session stood.
        phase: &'static str,
    },
}

/// A state byte as people read it: its name, or its signed number when iperf3 has no such state.
pub fn describe(b: u8) -> String {
    State::from_byte(b).map_or_else(|| format!("unknown state {}", b as i8), |s| format!("{s:?}"))
}

/// What a session has read and not yet taken: bytes, taken whole as a state, SERVER_ERROR's numbers
/// or a length-prefixed JSON message, as the phase expects.
#[derive(Debug, Default)]
struct Inbox(Vec<u8>);

impl Inbox {
    fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// The next state byte, if one has arrived.
    fn state(&mut self) -> Option<u8> {
        (!self.0.is_empty()).then(|| self.0.remove(0))
    }

    /// A SERVER_ERROR at the front: Some(Some(its error number and errno)) once its 9 bytes have
    /// arrived (they are taken), Some(None) while they are still coming, None when the next byte is
    /// something else.
    fn server_error(&mut self) -> Option<Option<(i32, i32)>> {
        if self.0.first().copied() != Some(State::ServerError.byte()) {
            return None;
        }
        if self.0.len() < 9 {
            return Some(None);
        }
        let b: Vec<u8> = self.0.drain(..9).collect();
        let n = |i: usize| i32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(Some((n(1), n(5))))
    }

    /// A whole JSON message (at most `cap` bytes), once it has arrived.
    fn json(&mut self, cap: usize) -> Result<Option<Vec<u8>>, Iperf3Error> {
        if self.0.len() < 4 {
            return Ok(None);
        }
        let prefix = [self.0[0], self.0[1], self.0[2], self.0[3]];
        let n = json_len(prefix, cap).map_err(|len| Iperf3Error::TooLong { len, limit: cap })?;
        if self.0.len() < 4 + n {
            return Ok(None);
        }
        let body = self.0[4..4 + n].to_vec();
        self.0.drain(..4 + n);
        Ok(Some(body))
    }
}
