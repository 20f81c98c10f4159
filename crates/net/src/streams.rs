//! The data connections of one test, as both ends' drivers hold them once they are connected: TCP
//! streams, UDP sockets or QUIC connections and their streams, whichever the test moves its data on.

use landspeed_core::endpoint::Role;
use landspeed_engine::sockopt;
use landspeed_engine::transport::quic::{QuicConnection, QuicStream};
use landspeed_engine::transport::tcp::DataStream;
use landspeed_engine::transport::udp::UdpStream;

/// A test's data connections.
pub(crate) enum DataPaths {
    Tcp(Vec<DataStream>),
    Udp(Vec<UdpStream>),
    Quic(QuicData),
}

/// A QUIC test's connections and its streams over them.
pub(crate) struct QuicData {
    pub(crate) connections: Vec<QuicConnection>,
    pub(crate) streams: Vec<QuicStream>,
}

impl DataPaths {
    /// A warning when the kernel granted the first connection less buffer than the test's `window`.
    pub(crate) fn window_warning(&self, window: Option<u64>) -> Option<String> {
        let sock = match self {
            DataPaths::Tcp(s) => socket2::SockRef::from(&s.first()?.socket),
            DataPaths::Udp(s) => socket2::SockRef::from(&s.first()?.socket),
            DataPaths::Quic(_) => return None,
        };
        let (snd, rcv) = sockopt::granted(&sock);
        sockopt::window_warning(window, snd, rcv)
    }

    /// Some connection has this end in `role`.
    pub(crate) fn has_role(&self, role: Role) -> bool {
        match self {
            DataPaths::Tcp(s) => s.iter().any(|s| s.role == role),
            DataPaths::Udp(s) => s.iter().any(|s| s.role == role),
            DataPaths::Quic(q) => q.streams.iter().any(|s| s.role == role),
        }
    }
}
