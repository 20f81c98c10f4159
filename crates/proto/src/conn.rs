//! The byte-level face of a session, in the quinn style. A `Conn` holds a session (`Machine`) and the
//! control connection's framing: the driver hands it the bytes it read (`handle_input`), the local
//! events it saw (`handle_local`) and the passing of time (`handle_timeout`), each with `now`, and
//! takes back the bytes to write (`poll_transmit`), what else to do (`poll_action`) and when to wake
//! (`poll_timeout`). Messages the session sends go straight to the outgoing bytes; only what needs
//! the outside world (open streams, start the engine, build a report) reaches the driver. So a driver
//! is one small loop that moves bytes and reacts to actions, and never decides which message comes
//! next: the sessions own the order, and the whole conversation runs in memory in tests. Every frame
//! in and out passes the connection's `Guard`: once the session hands over key material, frames are
//! sealed and a frame from the peer reaches the session only when its tag is right.

use super::auth::AuthError;
use super::framing::{body, decode_body, FrameDecoder};
use super::guard::{Guard, GuardError, KeyMaterial};
use super::messages::Message;
use super::session::{ClientAction, ClientSession, ProtocolError, ServerAction, ServerPhase, ServerSession};
use super::timer::Waiting;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What one driver loop needs of any conversation, whichever protocol it speaks (landspeed's `Conn`,
/// iperf3's sessions in landspeed-iperf3): bytes in and out, what the driver must do, and the timers.
/// Every input takes `now`; nothing here reads a clock or a socket.
pub trait Conversation {
    /// What the conversation asks of its driver.
    type Action;
    /// Why the conversation failed.
    type Error;

    /// Bytes read from the connection at `now`.
    fn handle_input(&mut self, bytes: &[u8], now: Instant) -> Result<(), Self::Error>;
    /// The bytes to write now, if any.
    fn poll_transmit(&mut self) -> Option<Vec<u8>>;
    /// The next thing the driver has to do, if any.
    fn poll_action(&mut self) -> Option<Self::Action>;
    /// How long the driver may wait for input from `now` (None: without limit).
    fn time_left(&self, now: Instant) -> Option<Duration>;
    /// Time has passed until `now`: the typed timeout once a timer has run out.
    fn handle_timeout(&mut self, now: Instant) -> Result<(), Self::Error>;
    /// The peer closed the connection at `now`: what that means at this point.
    fn handle_closed(&mut self, now: Instant) -> Self::Error;
}

impl<M: Machine> Conversation for Conn<M> {
    type Action = M::Action;
    type Error = ProtocolError;

    fn handle_input(&mut self, bytes: &[u8], now: Instant) -> Result<(), ProtocolError> {
        Conn::handle_input(self, bytes, now)
    }
    fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        Conn::poll_transmit(self)
    }
    fn poll_action(&mut self) -> Option<M::Action> {
        Conn::poll_action(self)
    }
    fn time_left(&self, now: Instant) -> Option<Duration> {
        Conn::time_left(self, now)
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        Conn::handle_timeout(self, now)
    }
    fn handle_closed(&mut self, now: Instant) -> ProtocolError {
        Conn::handle_closed(self, now)
    }
}

/// A session as a `Conn` drives it: it takes messages and says what follows.
pub trait Machine: Waiting {
    /// What the session asks of its driver.
    type Action;

    /// A message from the peer arrived at `now`.
    fn on_message(&mut self, msg: Message, now: Instant) -> Result<Self::Action, ProtocolError>;

    /// The message an action sends, if any, and what is left for the driver (None: nothing).
    fn split(action: Self::Action) -> (Option<Message>, Option<Self::Action>);

    /// The key material for this conversation, once the greeting has made it (taken once): from then
    /// on every frame is sealed, and opened only with the right tag.
    fn take_keys(&mut self) -> Option<Result<KeyMaterial, AuthError>> {
        None
    }

    /// A frame from the peer carried the right tag for the first time: the peer holds the key.
    fn on_peer_proven(&mut self) {}

    /// The largest frame the peer may send now (a server takes only small ones before a test is
    /// accepted).
    fn max_frame(&self) -> usize {
        super::framing::MAX_FRAME_LEN
    }

    /// A frame from the peer failed its tag at `now`; `plain` is what it says read as an unsealed
    /// message (an unauthenticated refusal is still worth showing). What that means here.
    fn on_forged(
        &mut self,
        err: GuardError,
        plain: Option<Message>,
        _now: Instant,
    ) -> Result<Self::Action, ProtocolError> {
        Err(ProtocolError::forged(err, plain))
    }
}

/// A session with its connection's bytes: input decoded into messages, messages encoded into output.
#[derive(Debug)]
pub struct Conn<M: Machine> {
    machine: M,
    decoder: FrameDecoder,
    transmit: Vec<u8>,
    actions: VecDeque<M::Action>,
    guard: Guard,
}

impl<M: Machine> Conn<M> {
    /// A connection run by `machine`, nothing sent or received yet.
    pub fn new(machine: M) -> Self {
        Conn {
            machine,
            decoder: FrameDecoder::new(),
            transmit: vec![],
            actions: VecDeque::new(),
            guard: Guard::new(),
        }
    }

    /// The session, to read its state.
    pub fn machine(&self) -> &M {
        &self.machine
    }

    /// The key's name once the peer has proved it holds the key (every frame since was checked).
    pub fn peer_proven(&self) -> Option<&str> {
        self.guard.proven()
    }

    /// The key that proves the test's data connections (data preamble version 2), once the peer
    /// has proved the conversation's key, when both ends agreed to it in the greeting.
    pub fn stream_key(&self) -> Option<&super::preamble::StreamKey> {
        self.guard.stream_key()
    }

    /// Bytes read from the connection at `now`: every whole message in them goes to the session, in
    /// order. A message the session refuses, bytes that are not a message, or a frame whose tag is
    /// wrong fail the connection (a session may instead answer a wrong tag with a refusal).
    pub fn handle_input(&mut self, bytes: &[u8], now: Instant) -> Result<(), ProtocolError> {
        self.decoder.push(bytes);
        loop {
            self.decoder.set_max(self.machine.max_frame());
            let Some(frame) = self.decoder.next_frame()? else {
                break;
            };
            if matches!(self.guard, Guard::Broken) {
                return Ok(());
            }
            self.start_keys();
            let was_proven = self.guard.proven().is_some();
            let msg = match self.guard.open(&frame) {
                Ok(b) => decode_body(b)?,
                Err(e) => {
                    self.guard.break_off();
                    let action = self.machine.on_forged(e, decode_body(&frame).ok(), now)?;
                    self.queue(action);
                    return Ok(());
                }
            };
            if !was_proven && self.guard.proven().is_some() {
                self.machine.on_peer_proven();
            }
            let action = self.machine.on_message(msg, now)?;
            self.queue(action);
        }
        Ok(())
    }

    /// Keys from the session, once it has them.
    fn start_keys(&mut self) {
        if self.guard.is_plain() {
            if let Some(m) = self.machine.take_keys() {
                self.guard.start(m);
            }
        }
    }

    /// A local event at `now` (`event` is the session's method for it, such as `on_stream`).
    pub fn handle_local(
        &mut self,
        now: Instant,
        event: impl FnOnce(&mut M, Instant) -> Result<M::Action, ProtocolError>,
    ) -> Result<(), ProtocolError> {
        let action = event(&mut self.machine, now)?;
        self.queue(action);
        Ok(())
    }

    /// Sends raw bytes ahead of anything queued later (a connection's preamble).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.transmit.extend_from_slice(bytes);
    }

    /// Sends a message the session does not decide (an error report, a clock reading). Everything
    /// after the welcome is sealed once the session has keys.
    pub fn send(&mut self, msg: &Message) {
        if !matches!(msg, Message::Welcome { .. }) {
            self.start_keys();
        }
        let frame = self.guard.seal(&body(msg));
        self.transmit.extend(frame);
    }

    /// The bytes to write now, if any.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.transmit.is_empty()).then(|| std::mem::take(&mut self.transmit))
    }

    /// The next thing the driver has to do, if any.
    pub fn poll_action(&mut self) -> Option<M::Action> {
        self.actions.pop_front()
    }

    /// When the session's timer fires (None: nothing is awaited with a time limit).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    /// How long the driver may wait for input from `now` (None: without limit).
    pub fn time_left(&self, now: Instant) -> Option<Duration> {
        self.machine.time_left(now)
    }

    /// Time has passed until `now`: the session's typed timeout once its timer has run out.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ProtocolError> {
        self.machine.handle_timeout(now)
    }

    /// The peer closed the connection at `now`: what that means at this point of the conversation.
    pub fn handle_closed(&mut self, now: Instant) -> ProtocolError {
        self.machine.on_closed(now)
    }

    fn queue(&mut self, action: M::Action) {
        let (msg, rest) = M::split(action);
        if let Some(m) = msg {
            self.send(&m);
        }
        self.actions.extend(rest);
    }
}

impl Machine for ClientSession {
    type Action = ClientAction;

    fn on_message(&mut self, msg: Message, now: Instant) -> Result<ClientAction, ProtocolError> {
        ClientSession::on_message(self, msg, now)
    }

    fn split(action: ClientAction) -> (Option<Message>, Option<ClientAction>) {
        match action {
            ClientAction::Send(m) => (Some(m), None),
            ClientAction::Wait => (None, None),
            other => (None, Some(other)),
        }
    }
    fn take_keys(&mut self) -> Option<Result<KeyMaterial, AuthError>> {
        ClientSession::take_keys(self).map(Ok)
    }

    fn on_peer_proven(&mut self) {
        ClientSession::on_peer_proven(self)
    }

    fn on_forged(
        &mut self,
        err: GuardError,
        plain: Option<Message>,
        now: Instant,
    ) -> Result<ClientAction, ProtocolError> {
        self.fail(now);
        Err(ProtocolError::forged(err, plain))
    }
}

impl Machine for ServerSession {
    type Action = ServerAction;

    fn on_message(&mut self, msg: Message, now: Instant) -> Result<ServerAction, ProtocolError> {
        ServerSession::on_message(self, msg, now)
    }

    /// Refusals are sent and still reach the driver, which closes the connection and logs them.
    fn split(action: ServerAction) -> (Option<Message>, Option<ServerAction>) {
        match action {
            ServerAction::Reply(m) => (Some(m), None),
            ServerAction::Wait => (None, None),
            ServerAction::Reject(m) => (Some(m.clone()), Some(ServerAction::Reject(m))),
            ServerAction::AuthFailed { reply, detail } => (
                Some(reply.clone()),
                Some(ServerAction::AuthFailed { reply, detail }),
            ),
            other => (None, Some(other)),
        }
    }

    fn take_keys(&mut self) -> Option<Result<KeyMaterial, AuthError>> {
        ServerSession::take_keys(self)
    }

    fn max_frame(&self) -> usize {
        match self.phase() {
            ServerPhase::AwaitHello | ServerPhase::AwaitRequest => super::framing::MAX_EARLY_FRAME_LEN,
            _ => super::framing::MAX_FRAME_LEN,
        }
    }

    fn on_peer_proven(&mut self) {
        ServerSession::on_peer_proven(self)
    }

    fn on_forged(
        &mut self,
        err: GuardError,
        plain: Option<Message>,
        now: Instant,
    ) -> Result<ServerAction, ProtocolError> {
        ServerSession::on_forged(self, err, plain, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::messages::{Refusal, SessionId};
    use crate::Limits;
    use landspeed_core::config::TestSpec;
    use landspeed_core::endpoint::EndpointReport;

    /// Moves every byte one side has to send to the other, `chunk` bytes at a time.
    fn carry<A: Machine, B: Machine>(
        from: &mut Conn<A>,
        to: &mut Conn<B>,
        chunk: usize,
        now: Instant,
    ) -> Result<(), ProtocolError> {
        while let Some(bytes) = from.poll_transmit() {
            for c in bytes.chunks(chunk) {
                to.handle_input(c, now)?;
            }
        }
        Ok(())
    }

    fn client(streams: u32) -> Conn<ClientSession> {
        let spec = TestSpec {
            streams,
            ..TestSpec::default()
        };
        let mut c = Conn::new(ClientSession::new(spec.validated().unwrap()));
        c.handle_local(Instant::now(), |s, now| Ok(ClientAction::Send(s.hello(now))))
            .unwrap();
        c
    }

    /// Drives a whole test between two connections as their drivers would, in `chunk`-byte pieces:
    /// the drivers only react to actions, the order of messages comes from the sessions.
    fn whole_test(chunk: usize) {
        let now = Instant::now();
        let (mut c, mut s) = (client(2), Conn::new(ServerSession::new()));
        let sid = SessionId([7; 16]);
        let mut finished = None;
        for _round in 0..20 {
            carry(&mut c, &mut s, chunk, now).unwrap();
            while let Some(a) = s.poll_action() {
                match a {
                    ServerAction::Accept(_) => s
                        .handle_local(now, |m, _| m.accepted(crate::Admission::plain(sid)))
                        .unwrap(),
                    ServerAction::StartTest => s.handle_local(now, |m, now| m.on_local_done(now)).unwrap(),
                    ServerAction::SendResults(_) => s
                        .handle_local(now, |m, _| m.results(EndpointReport::default()))
                        .unwrap(),
                    other => panic!("server: {other:?}"),
                }
            }
            carry(&mut s, &mut c, chunk, now).unwrap();
            while let Some(a) = c.poll_action() {
                match a {
                    ClientAction::ConnectStreams(a) => {
                        assert_eq!(a.session, sid);
                        c.handle_local(now, |m, now| {
                            m.on_streams_connected(now).map(|()| ClientAction::Wait)
                        })
                        .unwrap();
                        // The streams reach the server (its driver reports each).
                        for n in 0..2 {
                            s.handle_local(now, |m, now| m.on_stream(n, now)).unwrap();
                        }
                    }
                    ClientAction::StartTest => {
                        c.handle_local(now, |m, _| m.start()).unwrap();
                        let mine = EndpointReport::default();
                        c.handle_local(now, |m, now| m.on_local_done(mine, now)).unwrap();
                    }
                    ClientAction::Finished(r) => finished = Some(r),
                    other => panic!("client: {other:?}"),
                }
            }
        }
        assert!(finished.is_some(), "the client has the server's report");
        assert_eq!(s.machine().phase(), super::super::session::ServerPhase::Finished);
        assert_eq!((c.poll_transmit(), s.poll_transmit()), (None, None));
    }

    #[test]
    fn a_whole_test_runs_between_two_connections_in_any_chunking() {
        for chunk in [1, 3, 64, 1 << 20] {
            whole_test(chunk);
        }
    }

    #[test]
    fn several_messages_in_one_read_are_taken_in_order() {
        let now = Instant::now();
        let mut s = Conn::new(ServerSession::new());
        let mut bytes = encode(&Message::Hello {
            version: crate::PROTOCOL_VERSION,
            software: "t".into(),
            auth: None,
        });
        bytes.extend(encode(&Message::TestRequest {
            spec: Box::default(),
            auth: None,
        }));
        s.handle_input(&bytes, now).unwrap();
        assert!(s.poll_transmit().is_some(), "the welcome");
        assert!(matches!(s.poll_action(), Some(ServerAction::Accept(_))));
        assert!(s.poll_action().is_none());
    }

    #[test]
    fn bytes_that_are_no_message_fail_the_connection_with_a_typed_error() {
        let mut s = Conn::new(ServerSession::new());
        let err = s.handle_input(&[0, 0, 0, 3, b'{', b'x', b'}'], Instant::now());
        assert!(matches!(err, Err(ProtocolError::Frame(_))), "{err:?}");
    }

    #[test]
    fn a_refusal_is_sent_and_still_reaches_the_driver() {
        let now = Instant::now();
        let limits = Limits {
            max_streams: Some(1),
            ..Limits::default()
        };
        let mut c = client(4);
        let mut s = Conn::new(ServerSession::with_limits(limits));
        carry(&mut c, &mut s, 5, now).unwrap();
        carry(&mut s, &mut c, 5, now).unwrap();
        carry(&mut c, &mut s, 5, now).unwrap();
        assert!(matches!(s.poll_action(), Some(ServerAction::Reject(_))));
        let refused = carry(&mut s, &mut c, 5, now);
        assert!(
            matches!(
                refused,
                Err(ProtocolError::Rejected {
                    code: Refusal::OverLimit,
                    ..
                })
            ),
            "{refused:?}"
        );
    }

    #[test]
    fn a_closed_connection_and_a_timeout_are_the_sessions_errors() {
        let now = Instant::now();
        let mut c = client(1);
        assert!(matches!(
            c.handle_closed(now),
            ProtocolError::Wait(crate::WaitFailed::PeerClosed { .. })
        ));
        let mut c = Conn::new(
            ClientSession::new(TestSpec::default().validated().unwrap())
                .with_timers(crate::Timers::default()),
        );
        c.handle_local(now, |s, now| Ok(ClientAction::Send(s.hello(now))))
            .unwrap();
        let limit = c.time_left(now).unwrap();
        assert_eq!(c.handle_timeout(now + limit - Duration::from_millis(1)), Ok(()));
        assert!(matches!(
            c.handle_timeout(now + limit),
            Err(ProtocolError::Wait(crate::WaitFailed::Timeout { .. }))
        ));
    }
}
