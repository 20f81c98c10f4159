//! The server's side of a connection-each test (`run --connect-rate` in landspeed's protocol): the
//! test stays in the registry while it runs, so each new data connection that quotes its session
//! (proven as the first ones were: its MAC in a keyed test, else the control connection's address)
//! is handed here rather than refused, and the engine's stream takes it, its TLS handshake done on
//! the stream's own thread within the handshake timeout. A connection that names a stream the test
//! does not have is closed. The client says when it has made its last (`stop`).

use crate::control::{Arrival, Input};
use crate::host::{Registered, Shared, TestError, Waiter};
use landspeed_core::config::TestSpec;
use landspeed_engine::supervisor::Wake;
use landspeed_engine::transport::rr::{Connections, Opened};
use landspeed_engine::transport::tcp::DataStream;
use landspeed_proto::SessionId;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The connections arriving for one running test.
pub(super) struct Arriving<'a> {
    rx: Mutex<Receiver<Wake<Input>>>,
    test: &'a TestSpec,
    tls: Option<(Arc<rustls::ServerConfig>, Duration)>,
    /// Keeps the test in the registry until it ends.
    _registered: Registered<'a, SessionId>,
}

impl<'a> Arriving<'a> {
    /// Registers the test `session` again, its later connections to come here; `waiter` says how
    /// each is proven (its channel is replaced by this one's).
    pub(super) fn register(
        shared: &'a Shared,
        test: &'a TestSpec,
        session: SessionId,
        waiter: Waiter,
    ) -> Result<Arriving<'a>, TestError> {
        let (tx, rx) = mpsc::channel();
        let registered = Registered::new(&shared.registry, session, Waiter { tx, ..waiter })?;
        Ok(Arriving {
            rx: Mutex::new(rx),
            test,
            tls: test
                .tls
                .map(|_| (shared.tls.tcp.clone(), shared.opts.handshake_timeout)),
            _registered: registered,
        })
    }
}

impl Connections for Arriving<'_> {
    /// Never asked of a server.
    fn open(&self, _id: u32) -> Result<Opened, String> {
        Err("a server opens no connections".into())
    }

    fn next(&self, wait: Duration) -> Option<Result<DataStream, String>> {
        let arrived = self.rx.lock().ok()?.recv_timeout(wait).ok()?;
        let Wake::External(Input::Arrival(Arrival::Tcp(id, sock))) = arrived else {
            return None;
        };
        if id >= self.test.total_streams() {
            return None;
        }
        Some(super::tcp_stream(self.test, id, sock, None, self.tls.clone()).map_err(|e| e.to_string()))
    }
}
