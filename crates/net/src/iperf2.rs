//! iperf 2's protocol over real connections (issue #68): landspeed's server answering unmodified
//! iperf 2.1.x clients on its own port (`server`), and `run --iperf2` against `iperf -s` (`client`, and `udp_client` for `-u`). iperf 2 has no control connection and no test
//! id: each TCP stream opens with the client's header and then carries the data, and a test of
//! `-P N` is N such connections. The server groups them by address and header (`gather`), runs the
//! test on landspeed's engine and logs it like any other. UDP tests (`udp`) are told apart by their
//! datagrams on the shared UDP port and answered with iperf 2's report. The wire format is `landspeed_iperf2`'s.

mod back_client;
pub(crate) mod bounce_client;
mod bounce_record;
pub(crate) mod bounce_server;
pub(crate) mod client;
mod connect_back;
pub(crate) mod connect_only;
pub(crate) mod connect_rate;
mod gather;
mod heard;
mod isoch_client;
mod isoch_tcp;
pub(crate) mod server;
mod start_at;
pub(crate) mod udp;
mod udp_back;
mod udp_back_client;
mod udp_both;
mod udp_client;
mod udp_receive;
mod udp_send;

pub(crate) use gather::Gatherings;
pub(crate) use udp::UdpTests;
