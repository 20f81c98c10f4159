//! landspeed-net runs the protocols over real connections: the client and server drivers that run
//! landspeed-core's session state machines (and iperf3's protocol, both ways) over control
//! connections, the control-connection framing, and the controller that orders third-party tests. The
//! bytes themselves move in landspeed-engine; the path probes live in landspeed-path. Nothing here
//! prints or formats output: drivers return a `RunResult` and report progress through callbacks.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod client;
pub mod control;
pub mod controller;
pub mod http;
mod iperf3_peer;
pub mod rpm;
pub mod server;
mod streams;

pub use client::{
    run_client, run_iperf3_client, run_ndt7, run_quic_perf, ClientError, ClientEvent, ClientOptions,
};
pub use server::{Server, ServerError, ServerEvent, ServerOptions, StatsHandle, TestError};
