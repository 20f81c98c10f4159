//! The controller's side of third-party control: connect to a landspeed server, read its welcome (does
//! it take orders?), measure its clock against ours, order one test from it to another server, and wait
//! for the `RunResult`. `run --from` uses one connection; `mesh` opens one per test and orders them all to
//! start at one instant. The conversation itself is landspeed-core's `ControllerSession`, run through a
//! `control::Link` like every other.

use crate::control::{ControlError, Event, Link, WaitError};
use landspeed_core::result::RunResult;
use landspeed_proto::{
    control::ClockOffset, Conn, ControlOrder, ControllerAction, ControllerSession, Key, Preamble,
    ProtocolError, NONCE_LEN, PROTOCOL_VERSION,
};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Why a controller's order to a host failed.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The host's name did not resolve.
    #[error("cannot resolve '{host}': {err}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's reason.
        err: std::io::Error,
    },
    /// No connection to the host.
    #[error("cannot connect to {addr}: {err}")]
    Connect {
        /// The host's address.
        addr: SocketAddr,
        /// Why not.
        err: std::io::Error,
    },
    /// The control connection failed.
    #[error("{addr}: {err}")]
    Control {
        /// The host's address.
        addr: SocketAddr,
        /// What happened.
        err: ControlError,
    },
    /// The conversation failed.
    #[error("{addr}: {err}")]
    Protocol {
        /// The host's address.
        addr: SocketAddr,
        /// What happened.
        err: ProtocolError,
    },
    /// The host does not take third-party orders.
    #[error("{addr} does not take third-party orders (its server must allow control and require keys)")]
    NoControl {
        /// The host's address.
        addr: SocketAddr,
    },
    /// No randomness for a nonce.
    #[error("no randomness: {0}")]
    Random(getrandom::Error),
}

/// What a host said when checked, and its clock against ours.
#[derive(Debug, Clone)]
pub struct HostCheck {
    /// The host's address.
    pub addr: SocketAddr,
    /// Its software and version, as its welcome said.
    pub software: String,
    /// It takes third-party orders.
    pub control: bool,
    /// Its clock against this one's, from the clock probes.
    pub clock: ClockOffset,
}

/// An open control connection to a host that takes orders.
pub struct HostConn {
    link: Link<Conn<ControllerSession>>,
    /// What the host said when checked.
    pub check: HostCheck,
}

/// Clock probes per host: the best of these sets the offset.
pub const CLOCK_PROBES: u32 = 8;

/// A failed wait on a host's connection, as the controller's error.
fn wait_error(addr: SocketAddr) -> impl Fn(WaitError) -> ControllerError {
    move |e| match e {
        WaitError::Session(err) => ControllerError::Protocol { addr, err },
        WaitError::Control(err) => ControllerError::Control { addr, err },
    }
}

/// Connects to `host:port`, reads its welcome and measures its clock with `probes` probes, each
/// wait at most `timeout`.
pub fn connect_host(
    host: &str,
    port: u16,
    key: Option<&Key>,
    timeout: Duration,
    probes: u32,
) -> Result<HostConn, ControllerError> {
    let addr = resolve(host, port)?;
    let stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|err| ControllerError::Connect { addr, err })?;
    let cerr = |err| ControllerError::Control { addr, err };
    let key = match key {
        Some(k) => {
            let mut nonce = [0u8; NONCE_LEN];
            getrandom::fill(&mut nonce).map_err(ControllerError::Random)?;
            Some((k.clone(), nonce))
        }
        None => None,
    };
    let now = Instant::now();
    let session = ControllerSession::new(key, probes, (now, crate::host::unix_ns()), timeout);
    let mut conn = Conn::new(session);
    conn.send_raw(
        &Preamble::Control {
            version: PROTOCOL_VERSION,
        }
        .encode(),
    );
    conn.handle_local(now, |s, now| Ok(ControllerAction::Send(s.hello(now))))
        .map_err(|err| ControllerError::Protocol { addr, err })?;
    let mut link = Link::new(stream, conn, timeout).map_err(cerr)?;
    link.listen().map_err(cerr)?;
    let (welcome, clock) = link
        .run(|_, ev| match ev {
            Event::Action(ControllerAction::Checked { welcome, clock }) => Ok(Some((welcome, clock))),
            _ => Ok(None),
        })
        .map_err(wait_error(addr))?;
    let check = HostCheck {
        addr,
        software: welcome.software,
        control: welcome.control,
        clock,
    };
    Ok(HostConn { link, check })
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, ControllerError> {
    let err = |err| ControllerError::Resolve {
        host: host.into(),
        err,
    };
    (host, port)
        .to_socket_addrs()
        .map_err(err)?
        .next()
        .ok_or_else(|| err(std::io::Error::new(std::io::ErrorKind::NotFound, "no address")))
}

impl HostConn {
    /// Orders the test and waits up to `wait` for its result.
    pub fn order(mut self, order: ControlOrder, wait: Duration) -> Result<RunResult, ControllerError> {
        let addr = self.check.addr;
        if !self.check.control {
            return Err(ControllerError::NoControl { addr });
        }
        self.link
            .wire
            .local(|s, now| s.order(order, wait, now))
            .map_err(wait_error(addr))?;
        self.link
            .run(|_, ev| match ev {
                Event::Action(ControllerAction::Result(r)) => Ok(Some(*r)),
                _ => Ok(None),
            })
            .map_err(wait_error(addr))
    }
}
