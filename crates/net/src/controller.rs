//! The controller's side of third-party control: connect to a landspeed server, read its welcome (does
//! it take orders?), measure its clock against ours, order one test from it to another server, and wait
//! for the `RunResult`. `run --from` uses one connection; `mesh` opens one per test and orders them all to
//! start at one instant. The conversation itself is landspeed-core's `ControllerSession`.

use crate::control::{self, ControlError, ControlReader, ControlWriter};
use landspeed_core::protocol::{
    control::{estimate_offset, ClockOffset},
    ControlOrder, ControllerSession, Key, Preamble, ProtocolError, NONCE_LEN, PROTOCOL_VERSION,
};
use landspeed_core::result::RunResult;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("cannot resolve '{host}': {err}")]
    Resolve { host: String, err: std::io::Error },
    #[error("cannot connect to {addr}: {err}")]
    Connect { addr: SocketAddr, err: std::io::Error },
    #[error("{addr}: {err}")]
    Control { addr: SocketAddr, err: ControlError },
    #[error("{addr}: {err}")]
    Protocol { addr: SocketAddr, err: ProtocolError },
    #[error("{addr} does not take third-party orders (it needs serve --allow-control with --auth-keys)")]
    NoControl { addr: SocketAddr },
    #[error("no randomness: {0}")]
    Random(String),
}

/// What a host said when checked, and its clock against ours.
#[derive(Debug, Clone)]
pub struct HostCheck {
    pub addr: SocketAddr,
    pub software: String,
    /// It takes third-party orders.
    pub control: bool,
    pub clock: ClockOffset,
}

/// An open control connection to a host that takes orders.
pub struct HostConn {
    reader: ControlReader,
    writer: ControlWriter,
    session: ControllerSession,
    pub check: HostCheck,
}

/// Clock probes per host: the best of these sets the offset.
pub const CLOCK_PROBES: u32 = 8;

/// Connects to `host:port`, reads its welcome and measures its clock with `probes` probes.
pub fn connect_host(
    host: &str,
    port: u16,
    key: Option<&Key>,
    timeout: Duration,
    probes: u32,
) -> Result<HostConn, ControllerError> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|err| ControllerError::Resolve {
            host: host.into(),
            err,
        })?
        .next()
        .ok_or_else(|| ControllerError::Resolve {
            host: host.into(),
            err: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
        })?;
    let stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|err| ControllerError::Connect { addr, err })?;
    let cerr = |err| ControllerError::Control { addr, err };
    let perr = |err| ControllerError::Protocol { addr, err };
    let (mut reader, mut writer) = control::split(stream, &[], timeout).map_err(|e| cerr(e.into()))?;
    let key = match key {
        Some(k) => {
            let mut nonce = [0u8; NONCE_LEN];
            getrandom::fill(&mut nonce).map_err(|e| ControllerError::Random(e.to_string()))?;
            Some((k.clone(), nonce))
        }
        None => None,
    };
    let mut session = ControllerSession::new(key);
    let mut hello = Preamble::Control {
        version: PROTOCOL_VERSION,
    }
    .encode();
    hello.extend(landspeed_core::protocol::encode(&session.hello()));
    let mut ctl: &TcpStream = reader.stream();
    ctl.write_all(&hello).map_err(|e| cerr(e.into()))?;
    let welcome = session
        .on_welcome(reader.read(timeout).map_err(cerr)?)
        .map_err(perr)?;
    let mut samples = vec![];
    for _ in 0..probes.clamp(1, CLOCK_PROBES) {
        writer
            .send(&session.probe(crate::server::unix_ns()))
            .map_err(cerr)?;
        let reply = reader.read(timeout).map_err(cerr)?;
        samples.push(session.on_clock(reply, crate::server::unix_ns()).map_err(perr)?);
    }
    let clock = estimate_offset(&samples).ok_or(ControllerError::Protocol {
        addr,
        err: ProtocolError::Remote("no clock readings".into()),
    })?;
    Ok(HostConn {
        reader,
        writer,
        session,
        check: HostCheck {
            addr,
            software: welcome.software,
            control: welcome.control,
            clock,
        },
    })
}

impl HostConn {
    /// Orders the test and waits up to `wait` for its result.
    pub fn order(mut self, order: ControlOrder, wait: Duration) -> Result<RunResult, ControllerError> {
        let addr = self.check.addr;
        if !self.check.control {
            return Err(ControllerError::NoControl { addr });
        }
        let msg = self
            .session
            .order(order)
            .map_err(|err| ControllerError::Protocol { addr, err })?;
        self.writer
            .send(&msg)
            .map_err(|err| ControllerError::Control { addr, err })?;
        let reply = self
            .reader
            .read(wait)
            .map_err(|err| ControllerError::Control { addr, err })?;
        self.session
            .on_result(reply)
            .map_err(|err| ControllerError::Protocol { addr, err })
    }
}
