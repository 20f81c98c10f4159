//! iperf3's protocol over real connections, both ends: landspeed as an iperf3 client (`client`)
//! and as an iperf3 server (`server`, its UDP streams in `udp`), and how an iperf3 peer's results
//! become one end's report (`peer`). The wire format and the sans-IO sessions are
//! `landspeed_iperf3`'s.

mod arrivals;
pub(crate) mod client;
mod peer;
pub(crate) mod server;
pub(crate) mod udp;
