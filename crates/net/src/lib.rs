//! landspeed-net runs the protocols over real connections, a module per protocol with both its
//! ends: landspeed's own (`landspeed`), iperf3's (`iperf3`), M-Lab's ndt7 (`ndt7`), the
//! responsiveness test (`rpm`) and the QUIC performance protocol (`quic_perf`). What they share
//! sits apart, below them: the control-connection links (`control`), HTTP request heads (`http`),
//! the data paths handed to the engine (`streams`), the client's options, errors and dialing
//! (`dial`), and the server's shared state and pools (`host`). `server` is the listener above them
//! all: it tells the protocols apart by their first bytes and hands each connection down. The bytes
//! themselves move in landspeed-engine; the path probes live in landspeed-path. Nothing here prints
//! or formats output: drivers return a `RunResult` and report progress through callbacks.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod control;
mod dial;
mod host;
pub mod http;
mod iperf2;
mod iperf3;
mod landspeed;
pub mod multicast;
mod ndt7;
mod quic_perf;
pub mod rpm;
mod server;
mod streams;
mod udp_rr;

pub use dial::{
    start_load, ClientError, ClientEvent, ClientOptions, ConnectBackAsk, Keepalive, LatencyOptions, LoadPlan,
    Remedy, RunningLoad,
};
pub use host::{
    EventSink, Keyless, ListenerOptions, MissingWhy, RefusalKind, ServerError, ServerEvent, ServerOptions,
    ServerStats, TestError, TestLog, DEFAULT_MAX_TESTS, DEFAULT_MAX_TESTS_PER_ADDRESS, PREAUTH_CAPS,
};
pub use iperf2::bounce_client::{run_bounceback_client, BouncePlan};
pub use iperf2::client::{
    granted_recv_buffer, granted_send_buffer, run_iperf2_client, tcp_options_taken, unconnected_mss,
};
pub use iperf2::connect_only::{run_connect_only, ConnectOnlyPlan, Handshake};
pub use iperf2::connect_rate::{run_connect_rate, Churn};
pub use iperf3::client::run_iperf3_client;
pub use landspeed::client::run_client;
pub use landspeed::controller;
pub use ndt7::client::run_ndt7;
pub use quic_perf::client::run_quic_perf;
pub use quic_perf::rr::{run_quic_transactions, QuicChurn};
pub use server::{Server, StatsHandle};
pub use udp_rr::run_udp_transactions;
