//! The responsiveness test's transfers as tests of this server. The protocol has nothing that ties
//! a download or an upload to a test (a client may fetch `/large` without the configuration), so
//! the server ties them by address: the first transfer from an address (IPv6: its /64) starts a
//! test there, which takes a test slot (`--max-tests`, `--max-tests-per-address`) and counts against
//! `--max-tests-per-minute`; every transfer from that address while it runs (and `LINGER` after the
//! last) belongs to it. The test's bytes, both ways and over all its transfers, are held to
//! `--max-rate` (paced), `--max-bytes` and `--max-duration` (cut), and when it ends it is one line in
//! the server's log and in its counters and metrics, like any test.

use super::answer::{plain, Answer};
use crate::host::{RefusalKind, ServerEvent, Shared, Slot};
use hyper::StatusCode;
use landspeed_core::config::Direction;
use landspeed_core::server_log::TestLog;
use landspeed_proto::{admission, Cut, Running};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after its last transfer an address's test ends (a client's next transfer within it
/// joins the same test).
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// The tests running, by address.
#[derive(Default)]
pub(crate) struct Tests {
    running: Mutex<HashMap<IpAddr, Arc<RpmTest>>>,
}

/// One address's test.
struct RpmTest {
    peer: SocketAddr,
    started: Instant,
    running: Running,
    sent: AtomicU64,
    received: AtomicU64,
    transfers: AtomicUsize,
    most: AtomicUsize,
    /// When the last transfer ended, and why the test was cut, if it was.
    state: Mutex<(Instant, Option<Cut>)>,
    _slot: Slot,
}

/// One download or upload of a test; the test knows it ended when this is dropped.
pub(crate) struct Transfer(Arc<RpmTest>);

impl Tests {
    /// The running test of `peer`'s address joined by a new transfer, or a new test started for
    /// it; refused (429 or 503, the reason in the body) as any test is.
    pub(crate) fn join(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        peer: SocketAddr,
    ) -> Result<Transfer, Box<Answer>> {
        let key = admission::address_of(peer.ip());
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = running.get(&key) {
            if let Some(cut) = t.cut() {
                return Err(Box::new(refused(
                    shared,
                    peer,
                    StatusCode::TOO_MANY_REQUESTS,
                    RefusalKind::RateLimited,
                    &format!("this address's test was {cut}; retry in a few seconds"),
                )));
            }
            return Ok(Transfer::new(t.clone()));
        }
        if let Err(text) = shared.admit(peer) {
            let mut a = refused(
                shared,
                peer,
                StatusCode::TOO_MANY_REQUESTS,
                RefusalKind::RateLimited,
                &text,
            );
            a.headers_mut()
                .insert("retry-after", hyper::header::HeaderValue::from_static("60"));
            return Err(Box::new(a));
        }
        let slot = shared.slot(peer).map_err(|full| {
            refused(
                shared,
                peer,
                StatusCode::SERVICE_UNAVAILABLE,
                RefusalKind::Busy,
                &shared.busy_reason(full),
            )
        })?;
        let limits = &shared.opts.limits;
        let test = Arc::new(RpmTest {
            peer,
            started: Instant::now(),
            running: Running {
                rate_bps: limits.max_rate_bps,
                ..Running::of(limits)
            },
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            transfers: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            state: Mutex::new((Instant::now(), None)),
            _slot: slot,
        });
        running.insert(key, test.clone());
        tokio::spawn(reap(self.clone(), key, test.clone(), shared.clone()));
        Ok(Transfer::new(test))
    }
}

/// Says no to a transfer: counted and logged (the log's own gate keeps a flood to one line a
/// minute), the reason in the answer's body.
fn refused(shared: &Shared, peer: SocketAddr, status: StatusCode, kind: RefusalKind, text: &str) -> Answer {
    shared.refuse(peer, kind, format!("rpm: {text}"));
    plain(status, &format!("{text}\n"))
}

/// Ends `test` once no transfer of it has run for `LINGER` (at once when it was cut): it leaves
/// the running tests and its log line goes out.
async fn reap(tests: Arc<Tests>, key: IpAddr, test: Arc<RpmTest>, shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(LINGER / 4).await;
        let (last, cut) = *test.state.lock().unwrap_or_else(|e| e.into_inner());
        let idle = test.transfers.load(Relaxed) == 0;
        if idle && (cut.is_some() || last.elapsed() >= LINGER) || shared.shutdown.load(Relaxed) {
            break;
        }
    }
    {
        let mut running = tests.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.get(&key).is_some_and(|t| Arc::ptr_eq(t, &test)) {
            running.remove(&key);
        }
    }
    shared.emit(ServerEvent::Test(test.log()));
}

impl RpmTest {
    fn cut(&self) -> Option<Cut> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1
    }

    /// The test's line in the server's log.
    fn log(&self) -> TestLog {
        let (last, cut) = *self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (sent, received) = (self.sent.load(Relaxed), self.received.load(Relaxed));
        let mut log = TestLog::new(self.peer, "rpm");
        log.bytes_sent = sent;
        log.bytes_received = received;
        log.streams = self.most.load(Relaxed) as u32;
        log.duration_s = last.saturating_duration_since(self.started).as_secs_f64();
        log.direction = match (sent > 0, received > 0) {
            (true, true) => Some(Direction::Bidir),
            (true, false) => Some(Direction::Reverse),
            (false, true) => Some(Direction::Forward),
            (false, false) => None,
        };
        log.error = cut.map(|c| c.to_string());
        log
    }
}

impl Transfer {
    fn new(test: Arc<RpmTest>) -> Transfer {
        let n = test.transfers.fetch_add(1, Relaxed) + 1;
        test.most.fetch_max(n, Relaxed);
        Transfer(test)
    }

    /// The test's rate cap, bits per second (`--max-rate`).
    pub(crate) fn rate_bps(&self) -> Option<f64> {
        self.0.running.rate_bps
    }

    /// `n` more bytes moved (`sent` by this server, else received): how long to hold off before the
    /// next (pacing), or the cut that ends the test (every transfer of it stops).
    pub(crate) fn moved(&self, n: u64, sent: bool) -> Result<Option<Duration>, Cut> {
        let t = &self.0;
        if let Some(cut) = t.cut() {
            return Err(cut);
        }
        let counter = if sent { &t.sent } else { &t.received };
        counter.fetch_add(n, Relaxed);
        let total = t.sent.load(Relaxed) + t.received.load(Relaxed);
        let elapsed = t.started.elapsed();
        if let Err(cut) = t.running.check(total, elapsed) {
            t.state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .1
                .get_or_insert(cut);
            return Err(cut);
        }
        Ok(t.running.wait(total, elapsed))
    }
}

impl Drop for Transfer {
    fn drop(&mut self) {
        let t = &self.0;
        t.state.lock().unwrap_or_else(|e| e.into_inner()).0 = Instant::now();
        t.transfers.fetch_sub(1, Relaxed);
    }
}
