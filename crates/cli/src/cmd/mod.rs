//! One module per command (`run` and `demo` share one, as do `model` and `tune`, `history` and
//! `show`, `completions` and `man`): each takes its own argument type and uses `common` for what it
//! shares; no command imports another.

pub mod archive;
pub mod exporter;
pub mod iperf2;
mod iperf2_bounce;
mod iperf2_dual;
mod iperf2_multicast;
mod iperf2_out;
pub mod iperf2_server;
mod iperf2_udp_dual;
pub mod iperf3;
pub mod keygen;
pub mod latency;
pub mod mesh;
pub mod model;
pub mod multicast;
pub mod path;
pub mod pscheduler;
pub mod record;
pub mod report;
pub mod rpm;
pub mod run;
pub mod serve;
pub mod sweep;
pub mod version;
#[cfg_attr(not(target_os = "linux"), path = "wan_none.rs")]
pub mod wan;
#[cfg(test)]
mod ways_in_tests;
