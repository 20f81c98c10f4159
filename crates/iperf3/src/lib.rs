//! iperf3's wire protocol, sans-IO: the cookie, the one-byte state messages, length-prefixed JSON, the
//! parameter message (parsed liberally, checked strictly, mapped onto landspeed's `TestSpec`) and the
//! results message, and the conversation itself as client and server sessions (`session`). The wire facts are summarised in docs/iperf3.md and were checked against Debian's
//! iperf3 3.12 and upstream's source; nothing here does I/O, so the drivers in landspeed-net and the fuzz targets share it.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod auth;
pub mod params;
pub mod results;
pub mod session;
pub mod strerror;
pub mod total_rate;
pub mod wire;

pub use params::{ParamError, Params};
pub use results::{from_reports, iperf3_counts, stream_id, warmup_bytes, Results, StreamResult};
pub use session::{Iperf3Error, Iperf3Timers};
pub use wire::{Cookie, State, COOKIE_LEN, MAX_JSON};
