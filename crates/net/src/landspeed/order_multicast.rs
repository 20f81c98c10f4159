//! A mesh's multicast test, ordered (`ControlOrder::multicast`): this server either sends the
//! test's datagrams to the group from the agreed instant, with the key the controller chose, or
//! joins the group at once and, once the test's time has passed, reports what the sender with that
//! key sent it. Either way the answer is the `RunResult` of this end (`core::multicast::record`), as
//! `multicast send|receive` would have saved it. Every wait is bounded: the start at most
//! `MAX_START_DELAY` ahead, a receiver's listening at the test's time plus [`GRACE`] after it.

use crate::host::TestError;
use crate::multicast::{receive_multicast, send_multicast, GroupPlan, ReceivePlan, SendPlan};
use landspeed_core::config::{EndCondition, Test};
use landspeed_core::multicast::record::{received_results, sent_result, SentPlan};
use landspeed_core::result::RunResult;
use landspeed_proto::control::{McPart, MulticastOrder};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

/// How long a receiver listens past the test's end for its last datagrams and the sender's end.
pub(super) const GRACE: Duration = Duration::from_secs(2);

/// Runs this server's part of the multicast test; its result, or why there is none.
pub(super) fn run(
    group: SocketAddr,
    m: &MulticastOrder,
    test: &Test,
    start_at: Option<SystemTime>,
) -> Result<RunResult, TestError> {
    let time = match test.end {
        EndCondition::Time(t) => t,
        _ => return Err(TestError::Order("a multicast order ends on a time".into())),
    };
    let to = GroupPlan {
        group,
        source: None,
        interface: None,
    };
    let wait = start_at
        .and_then(|at| at.duration_since(SystemTime::now()).ok())
        .unwrap_or_default();
    let failed = |e: crate::multicast::McError| {
        TestError::Order(format!("the ordered multicast test on {group} failed: {e}"))
    };
    match m.part {
        McPart::Send => {
            std::thread::sleep(wait);
            let plan = SendPlan {
                to,
                bind: None,
                ttl: m.ttl,
                loopback: true,
                rate_bps: test.rate_bps.unwrap_or(1e6),
                length: test.length_bytes as usize,
                duration: time,
                count: None,
                iperf2: false,
                key: Some(m.key),
            };
            let sent = send_multicast(&plan, &AtomicBool::new(false)).map_err(failed)?;
            let facts = SentPlan {
                interface: None,
                length: plan.length,
                rate_bps: plan.rate_bps,
                duration: time,
                started_unix_s: sent.started_unix_s,
                host: landspeed_engine::host::host_info(),
            };
            Ok(sent_result(&sent, facts))
        }
        McPart::Receive => {
            let plan = ReceivePlan {
                from: to,
                max_wait: wait + time + GRACE,
                linger: Duration::from_secs(1),
            };
            let heard = receive_multicast(&plan, &AtomicBool::new(false), || {}).map_err(failed)?;
            let key = format!("{:016x}", m.key);
            received_results(&heard, &landspeed_engine::host::host_info())
                .into_iter()
                .find(|r| r.config.spec.payload_key == m.key)
                .ok_or_else(|| {
                    TestError::Order(format!(
                        "nothing of the test (key {key}) was heard on {group}: {} other sender(s), ended: {}",
                        heard.sources.len(),
                        heard.ended_by
                    ))
                })
        }
    }
}
