//! The sessions' timers. Every wait of the handshake and of the results exchange belongs to the session
//! that waits, not to its driver: the session arms a timer when it enters a waiting phase, its driver
//! asks how long it may block (`time_left`) and reports back when that time has passed
//! (`handle_timeout`). Time is an input (`now`), so every timeout is testable with a virtual clock.

use super::ProtocolError;
use std::time::{Duration, Instant};

/// What a driver needs of a session to wait for the peer: when to give up, and what giving up or the
/// peer closing means at this point of the conversation.
pub trait Waiting {
    /// When the session's timer fires (None: it waits for nothing with a time limit).
    fn poll_timeout(&self) -> Option<Instant>;

    /// How long a driver may block for the next message (None: without limit).
    fn time_left(&self, now: Instant) -> Option<Duration> {
        self.poll_timeout().map(|at| at.saturating_duration_since(now))
    }

    /// The driver waited until `now`: a typed timeout, naming what was awaited, once the timer has run
    /// out (the session has then failed); `Ok` before.
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError>;

    /// The peer closed the control connection at `now`: the error that is at this point.
    fn on_closed(&mut self, now: Instant) -> ProtocolError;
}

/// The `Waiting` side of a session: every session keeps a `timer`, a `phase` with a `name()`, and
/// enters phases with `enter(phase, now)`; a timeout or a closed connection fails them the same way.
macro_rules! impl_waiting {
    ($session:ty, $phase:ident) => {
        impl Waiting for $session {
            fn poll_timeout(&self) -> Option<Instant> {
                self.timer.at()
            }

            fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
                let Some(after) = self.timer.expired(now) else {
                    return Ok(());
                };
                let phase = self.phase.name();
                self.enter($phase::Failed, now);
                Err(ProtocolError::Wait(crate::WaitFailed::Timeout {
                    phase,
                    after,
                }))
            }

            fn on_closed(&mut self, now: Instant) -> ProtocolError {
                let phase = self.phase.name();
                self.enter($phase::Failed, now);
                ProtocolError::Wait(crate::WaitFailed::PeerClosed { phase })
            }
        }
    };
}
pub(crate) use impl_waiting;

/// How long each wait of a conversation may last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// Each handshake step: the welcome, the acceptance, the data streams, readiness, the start.
    pub handshake: Duration,
    /// Added to the client's wait for the acceptance: a server that sends a file reads and hashes it
    /// before it accepts.
    pub accept_extra: Duration,
    /// The results exchange: from this end's streams finishing until the peer's report has arrived.
    pub results: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            handshake: Duration::from_secs(10),
            accept_extra: Duration::ZERO,
            results: Duration::from_secs(40),
        }
    }
}

/// One armed (or idle) timer: when it fires, and the wait it was armed for (for the message).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timer(Option<(Instant, Duration)>);

impl Timer {
    /// Arms it to fire `wait` after `now`.
    pub fn arm(&mut self, now: Instant, wait: Duration) {
        self.0 = Some((now + wait, wait));
    }

    /// Nothing is awaited with a time limit any more.
    pub fn disarm(&mut self) {
        self.0 = None;
    }

    /// When it fires (None: nothing is awaited with a time limit).
    pub fn at(&self) -> Option<Instant> {
        self.0.map(|(at, _)| at)
    }

    /// The wait it was armed for, once `now` is past its instant.
    pub fn expired(&self, now: Instant) -> Option<Duration> {
        self.0.filter(|(at, _)| now >= *at).map(|(_, wait)| wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_fires_at_its_instant_and_not_before() {
        let t0 = Instant::now();
        let mut t = Timer::default();
        assert_eq!((t.at(), t.expired(t0)), (None, None));
        t.arm(t0, Duration::from_secs(2));
        assert_eq!(t.at(), Some(t0 + Duration::from_secs(2)));
        assert_eq!(t.expired(t0 + Duration::from_millis(1999)), None);
        assert_eq!(
            t.expired(t0 + Duration::from_secs(2)),
            Some(Duration::from_secs(2))
        );
        t.disarm();
        assert_eq!(t.expired(t0 + Duration::from_secs(9)), None);
    }
}
