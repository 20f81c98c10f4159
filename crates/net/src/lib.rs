//! landspeed-net is where landspeed meets Linux: sockets and their options, TCP_INFO, CPU, interface and
//! host counters, thread pinning, the transports that move bytes and the one supervisor that runs and samples them, and the client and server drivers
//! that run landspeed-core's session state machines over real connections. Nothing here prints or
//! formats output: drivers return a `RunResult` and report progress through callbacks.

#![deny(unreachable_pub)]

pub mod client;
pub mod control;
pub mod controller;
pub mod cpu;
pub mod files;
pub mod host;
pub mod mesh;
pub mod path;
pub mod pin;
pub mod rlimit;
pub mod server;
pub mod sockopt;
pub mod supervisor;
pub mod tcp_info;
pub mod transport;
pub mod tune;
pub mod zerocopy;

pub use client::{run_client, run_iperf3_client, ClientError, ClientEvent, ClientOptions};
pub use server::{Server, ServerError, ServerEvent, ServerOptions, TestError};
