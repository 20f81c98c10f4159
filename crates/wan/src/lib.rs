//! landspeed's packet-level WAN emulator: two network namespaces (hosts A and B) joined through TUN
//! devices by a userspace forwarding engine that applies delay, rate, a tail-drop queue (or CoDel over it), loss, jitter,
//! reordering, duplication and payload corruption. TCP runs end to end between the namespaces.
//!
//! `settings`, `change`, `aqm`, `model` and `packet` are pure (time is passed in) and tested deterministically; `netns`,
//! `forward` and `daemon` do the I/O.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod aqm;
pub mod change;
pub mod daemon;
pub mod forward;
pub mod model;
pub mod netns;
pub mod packet;
pub mod sched;
pub mod settings;
pub mod timing;
pub mod train;

pub use daemon::{Host, Hosts, State, Status, WanError};
pub use settings::{PathSettings, Request};
