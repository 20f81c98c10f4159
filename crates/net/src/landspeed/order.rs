//! Third-party orders (`serve --allow-control`): an authorised controller asks this server to run a test
//! from here to another landspeed server. The server runs it as an ordinary client would (the same driver,
//! so the result is the same `RunResult`), waits for the controller's agreed start instant first when one
//! was given, and sends the result back on the control connection. The test holds one `--max-tests` slot
//! like any other, and its outcome goes to the server's log.

use super::client::run_client;
use crate::control::Wire;
use crate::dial::ClientOptions;
use crate::host::{Shared, TestError, TestLog};
use landspeed_core::config::Test;
use landspeed_proto::{Conn, ControlOrder, Message, ServerSession};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

/// Runs `order` and answers the controller with its result; an error is told to the controller by the
/// test's driver.
pub(super) fn run_order(
    order: &ControlOrder,
    test: Test,
    wire: &mut Wire<Conn<ServerSession>>,
    shared: &Shared,
    log: &mut TestLog,
) -> Result<(), TestError> {
    log.protocol = match &order.multicast {
        Some(m) => format!(
            "landspeed multicast order ({:?}) on {}:{}",
            m.part, order.host, order.port
        )
        .to_lowercase(),
        None => format!("landspeed order to {}:{}", order.host, order.port),
    };
    log.streams = test.streams;
    log.direction = Some(test.direction);
    let mut opts = ClientOptions::new(order.host.clone(), order.port, test);
    opts.auth = shared.opts.control_key.clone();
    opts.auth_only_if_asked = true;
    opts.start_at = order
        .start_at_unix_ns
        .map(|ns| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns));
    // The controller's instant may be at most this far ahead: a bounded wait, like every other.
    if let Some(at) = opts.start_at {
        if at.duration_since(SystemTime::now()).unwrap_or_default() > MAX_START_DELAY {
            let e = TestError::Order(format!(
                "the start instant is more than {MAX_START_DELAY:?} ahead"
            ));
            return Err(e);
        }
    }
    let never = AtomicBool::new(false);
    let failed = |e: &dyn std::fmt::Display| {
        TestError::Order(format!(
            "the ordered test to {}:{} failed: {e}",
            order.host, order.port
        ))
    };
    let result = match &order.multicast {
        Some(m) => super::order_multicast::run(group(order)?, m, &opts.spec, opts.start_at)?,
        None => run_client(&opts, &never, &mut |_| {}).map_err(|e| failed(&e))?,
    };
    log.bytes_sent = result.summary.bytes_sent;
    log.bytes_received = result.summary.bytes_received;
    log.bytes_verified = result.summary.bytes_verified;
    log.corrupt_blocks = result.summary.corrupt_blocks;
    log.duration_s = result.summary.duration_s;
    wire.send(&Message::ControlResult {
        result: Box::new(result),
    })
    .map_err(TestError::from)
}

/// A multicast order's group: its host and port.
fn group(order: &ControlOrder) -> Result<std::net::SocketAddr, TestError> {
    let ip: std::net::IpAddr = order
        .host
        .parse()
        .map_err(|_| TestError::Order(format!("{} is not a group", order.host)))?;
    Ok(std::net::SocketAddr::new(ip, order.port))
}

/// How far ahead a controller may set the start.
pub(super) const MAX_START_DELAY: Duration = Duration::from_secs(60);
