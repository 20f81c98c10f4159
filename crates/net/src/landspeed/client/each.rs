//! The client's side of a connection-each test (`run --connect-rate` in landspeed's protocol): where
//! its connections after the first come from. Each is a data connection of the test like the first
//! (its preamble quoting the session, with its MAC in a keyed test; over TLS the handshake pinned to
//! the certificate the server announced or `--tls-pin`), opened by `dial::tcp_stream_timed`, which
//! times `connect()` and the TLS handshake apart.

use crate::dial::{tcp_stream_timed, ClientError, ClientOptions};
use landspeed_core::config::TestSpec;
use landspeed_engine::transport::rr::{Connections, Opened};
use landspeed_engine::transport::tcp::DataStream;
use landspeed_proto::{Admission, Preamble, SessionId, StreamKey};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What a connection of the test needs beyond the options: the session, its key, TLS's settings.
pub(super) struct Dialer {
    session: SessionId,
    key: Option<StreamKey>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Dialer {
    /// The dialer of a test the server admitted with `admission`.
    pub(super) fn new(
        opts: &ClientOptions,
        spec: &TestSpec,
        admission: Admission,
        key: Option<StreamKey>,
    ) -> Result<Dialer, ClientError> {
        Ok(Dialer {
            session: admission.session,
            key,
            tls: super::setup::tls_config(opts, spec, admission.certificate)?,
        })
    }
}

/// The dialer at work: the options and the server it dials.
pub(super) struct Dialing<'a> {
    dialer: &'a Dialer,
    opts: &'a ClientOptions,
    spec: &'a TestSpec,
    addr: SocketAddr,
}

impl<'a> Dialing<'a> {
    /// The dialer of the test at work (an error when the test has none: its connections were
    /// never admitted).
    pub(super) fn of(
        dialer: Option<&'a Dialer>,
        opts: &'a ClientOptions,
        spec: &'a TestSpec,
        addr: SocketAddr,
    ) -> Result<Dialing<'a>, ClientError> {
        let dialer = dialer.ok_or(ClientError::OutOfOrder {
            step: "opening a connection-each test's connections",
        })?;
        Ok(Dialing {
            dialer,
            opts,
            spec,
            addr,
        })
    }
}

impl Connections for Dialing<'_> {
    fn open(&self, id: u32) -> Result<Opened, String> {
        let d = self.dialer;
        let pre = Preamble::data(d.session, id, d.key.as_ref()).encode();
        tcp_stream_timed(self.opts, self.addr, self.spec, (id, &pre), d.tls.as_ref())
            .map_err(|e| crate::iperf2::connect_rate::failed_connection(&e.to_string()))
    }

    /// Never asked of a client.
    fn next(&self, _wait: Duration) -> Option<Result<DataStream, String>> {
        None
    }
}
