//! landspeed's own control protocol, without I/O, in a crate of its own (as quinn-proto holds QUIC's,
//! and landspeed-iperf3 iperf3's wire format): a change to it rebuilds the protocol's drivers (net,
//! iperf3's endpoint, the command line), not what a test is or what its result means (landspeed-core)
//! nor the crates built on those alone. A test uses one control connection and one TCP
//! connection per stream, all to the same server port. Every connection starts with a fixed preamble
//! (magic, version, kind) so the server can tell a control connection, a data stream, and an iperf3 client
//! apart from the first bytes; control traffic after that is length-delimited JSON messages, each sealed with a MAC once both ends hold a
//! shared key (`guard`). The session
//! state machines decide which message may come next; drivers in landspeed-net do the reading and writing.
//! The wire format is specified in docs/protocol.md.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod admission;
pub mod auth;
pub mod conn;
pub mod control;
pub mod framing;
pub mod guard;
pub mod limits;
pub mod memory;
pub mod messages;
#[cfg(test)]
mod mitm;
#[cfg(test)]
mod pair;
pub mod preamble;
pub mod rate;
pub mod session;
pub mod timer;
pub mod udp_hello;

pub use auth::{AuthError, Key, KeyRing, AUTH_VERSION, NONCE_LEN};
pub use conn::{Conn, Conversation, Machine};
pub use control::{
    ClockOffset, ClockSample, ControlOrder, ControllerAction, ControllerPhase, ControllerSession,
};
pub use framing::{encode, FrameDecoder, FrameError, MAX_FRAME_LEN};
pub use guard::{Guard, GuardError, KeyMaterial, Side};
pub use limits::{Cut, Limits, OverLimit, Running};
pub use messages::{Message, Refusal, SessionId};
pub use preamble::{classify, Preamble, PreambleError, Speaker, StreamKey, MAGIC, PROTOCOL_VERSION};
pub use session::{
    Admission, ClientAction, ClientPhase, ClientSession, ProtocolError, ServerAction, ServerPhase,
    ServerSession, WaitFailed,
};
pub use timer::{Timer, Timers, Waiting};
