//! What both of an iperf3 test's ways of taking its data streams (TCP connections in `server`,
//! UDP hellos in `udp`) share: the control connection's address they are checked against, how many
//! streams send to this server, and why streams that never came are missing.

use crate::control::Link;
use crate::host::{MissingWhy, TestError};
use landspeed_core::config::{Direction, TestSpec};
use landspeed_iperf3::session::{Iperf3Error, ServerSession};

/// The control connection of an iperf3 test on this server.
pub(crate) type Iperf3Link = Link<ServerSession>;

/// The control connection's peer address (canonical): the only address its data may come from.
pub(crate) fn control_ip(link: &Iperf3Link) -> Result<std::net::IpAddr, TestError> {
    link.stream()
        .peer_addr()
        .map(|a| a.ip().to_canonical())
        .map_err(|err| TestError::Iperf3Io {
            step: "control peer address",
            err,
        })
}

/// The client's streams that send to this server: with --bidir its sending streams connect first.
pub(crate) fn receivers(spec: &TestSpec, n: usize) -> usize {
    match spec.direction {
        Direction::Forward => n,
        Direction::Reverse => 0,
        Direction::Bidir => n / 2,
    }
}

pub(crate) fn missing(arrived: usize, expected: u32, why: MissingWhy) -> TestError {
    TestError::StreamsMissing {
        arrived,
        expected,
        why,
    }
}

/// A wait for streams that failed: the session's timeout or the client leaving say why streams are
/// missing.
pub(crate) fn streams_error(e: TestError, arrived: usize, expected: u32) -> TestError {
    match e {
        TestError::Iperf3(Iperf3Error::Wait(landspeed_proto::WaitFailed::Timeout { .. })) => {
            missing(arrived, expected, MissingWhy::Timeout)
        }
        TestError::ClientClosed => missing(arrived, expected, MissingWhy::ClientClosed),
        e => e,
    }
}
