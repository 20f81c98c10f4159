//! landspeed's own protocol over real connections, both ends: the client's session (`client`), the
//! server's (`server`) with its UDP and QUIC streams, disk-to-disk files and third-party orders,
//! and the controller that orders a test between two servers (`controller`). The conversation
//! itself is `landspeed_proto`'s; these drivers only run it over sockets.

pub(crate) mod client;
pub mod controller;
mod files;
mod order;
mod order_multicast;
pub(crate) mod quic;
pub(crate) mod server;
pub(crate) mod udp;
