//! Every integration test of the `landspeed` binary, in one test binary (one link instead of one per
//! file): each module is one area (loopback, iperf3 interop, faults, the browser, ...), and `common`
//! holds the helpers they share (a `landspeed serve` child on a free port, namespaces, chains of hosts).
//! Run one area with `cargo test --release -p landspeed --test it loopback::`.

mod common;

mod admission;
mod archive;
mod attacks;
mod auth;
mod bad_input;
mod bounceback;
mod browser;
mod diagnosis;
mod faults;
mod files;
mod install;
mod iperf2_dropin_server;
mod iperf2_dual;
mod iperf2_output;
mod iperf2_server;
mod iperf2_udp_both;
mod iperf3_auth;
mod iperf3_client;
mod iperf3_diff;
mod iperf3_dropin;
mod iperf3_server;
mod isochronous;
mod limits;
mod loopback;
mod mesh;
mod metrics;
mod model_tune;
mod mptcp;
mod multicast;
mod ndt7;
mod ndt7_client;
mod ndt7_mlab_page;
mod ndt7_rs;
mod path;
mod path_changes;
mod platforms;
mod pscheduler;
mod pscheduler_lab;
mod quic;
mod quic_interop;
mod record;
mod rpm;
mod rr;
mod sweep;
mod tls;
mod tos;
mod udp;
mod wan;
mod windows;
