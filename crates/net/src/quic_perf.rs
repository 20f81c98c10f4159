//! The QUIC performance protocol (draft-banks-quic-performance), both ends: the client
//! (`client`, `run --quic-perf`) and the server's side (`server`, ALPN "perf" on the QUIC endpoint).

pub(crate) mod client;
pub(crate) mod rr;
pub(crate) mod server;
