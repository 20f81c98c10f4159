//! The responsiveness test (RPM, draft-ietf-ippm-responsiveness) over HTTP, both ends: the client
//! (`client`, `landspeed rpm`) and the server (`server`, `serve --rpm`), their connections
//! (`conn`) and how both hold their unsent data near 5 ms of each connection's rate (`backlog`).
//! The method itself (formula, ramp, confidence) is `landspeed_rpm`'s.

mod backlog;
mod client;
mod conn;
pub(crate) mod server;

pub use client::{measure, ConfigError, RpmError, RpmOptions};
pub use conn::{ConnError, UrlError};
