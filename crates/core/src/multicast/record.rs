//! A multicast test as a [`RunResult`], so that what `multicast send` and `multicast receive` measured
//! is archived, shown, put in HTML and exported as metrics like every other test. A group has no
//! return path, so no host sees the whole test: a sender's result holds what it sent (each
//! receiver's figures are in that receiver's own result), and a receiver's holds, per sender it
//! heard, what arrived. Each result is the local host's view as `run`'s is (`local` is this host):
//! a sender's is a one-way test from here (`forward`), a receiver's one to here (`reverse`) whose
//! far end is the sender, inferred from its datagrams (the count its end gave). The multicast figures
//! themselves (first sequence, one-way delay, duplicates, the end) ride whole in
//! [`RunResult::multicast`]. Pure: the same reports always give the same results.

use super::{MulticastReport, SendReport, SourceReport};
use crate::assemble::{assemble, Inputs, RunContext};
use crate::config::{Direction, EndCondition, Flow, TestSpec, Transport};
use crate::endpoint::{EndpointReport, HostInfo, Role, StreamReport};
use crate::result::RunResult;
use crate::udp::TransitSummary;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// The multicast side of a result: which end this host was, and its figures as the command
/// reported them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum MulticastRecord {
    /// This host sent to the group (what reached each receiver is in that receiver's result).
    Sender {
        /// The interface sent on, if named.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
        /// What was sent.
        sent: SendReport,
    },
    /// This host joined the group and heard one sender.
    Receiver {
        /// The group joined, with its port.
        group: String,
        /// The source asked for (SSM), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// The interface joined on, if named.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
        /// The sender's figures at this receiver.
        heard: Box<SourceReport>,
        /// Why the receiver stopped.
        ended_by: String,
    },
}

/// What a sender's report does not say of its test: the plan it ran and this host.
#[derive(Debug, Clone)]
pub struct SentPlan {
    /// The interface named, if any.
    pub interface: Option<String>,
    /// Bytes per datagram.
    pub length: usize,
    /// The rate asked for, bits per second of UDP payload.
    pub rate_bps: f64,
    /// The time asked for.
    pub duration: Duration,
    /// When the sender started, Unix seconds.
    pub started_unix_s: f64,
    /// This host.
    pub host: HostInfo,
}

/// The protocol a result names: `multicast` for landspeed's datagrams, `iperf2-multicast` for
/// iperf 2's.
pub fn protocol(datagrams: &str) -> String {
    match datagrams {
        "landspeed" => "multicast".to_string(),
        other => format!("{other}-multicast"),
    }
}

fn software(what: &str) -> String {
    format!("landspeed {} ({what})", crate::SOFTWARE_VERSION)
}

fn spec(length: u64, duration: Duration, direction: Direction, key: Option<&str>) -> TestSpec {
    let key = key.and_then(|k| u64::from_str_radix(k, 16).ok());
    TestSpec {
        transport: Transport::Udp,
        length_bytes: length.max(1),
        end: EndCondition::Time(duration),
        direction,
        verify: key.is_some(),
        payload_key: key.unwrap_or(0),
        interval_s: Duration::ZERO,
        ..TestSpec::default()
    }
}

fn context(here: String, there: SocketAddr, started_unix_s: f64, datagrams: &str) -> RunContext {
    RunContext {
        host: there.ip().to_string(),
        port: there.port(),
        local_address: here,
        remote_address: there.to_string(),
        family: if there.is_ipv4() { "ipv4" } else { "ipv6" }.into(),
        threads: 1,
        cpus: None,
        bind: None,
        started_unix_s,
        interrupted: false,
        protocol: protocol(datagrams),
        scheduled_start_unix_s: None,
        foreign_peer: datagrams != "landspeed",
        served_here: false,
    }
}

/// A sender's result: its datagrams sent to the group; the receiving side is empty (no receiver
/// answers a sender), and a warning says where the receivers' figures are.
pub fn sent_result(sent: &SendReport, plan: SentPlan) -> RunResult {
    let landspeed = sent.protocol == "landspeed";
    let spec = TestSpec {
        rate_bps: Some(plan.rate_bps),
        ..spec(
            plan.length as u64,
            plan.duration,
            Direction::Forward,
            landspeed.then_some(sent.key.as_str()),
        )
    };
    let stream = StreamReport {
        bytes: sent.bytes,
        calls: sent.datagrams,
        send_errors: sent.send_errors,
        first_byte_s: Some(0.0),
        last_byte_s: Some(sent.elapsed_s),
        ..StreamReport::empty(0, Flow::ClientToServer, Role::Sender)
    };
    let here = EndpointReport {
        software: software("multicast sender"),
        streams: vec![stream],
        elapsed_s: sent.elapsed_s,
        threads: 1,
        host: plan.host,
        warnings: sent_warnings(sent),
        ..EndpointReport::default()
    };
    let receivers = EndpointReport {
        software: "the group's receivers".into(),
        ..EndpointReport::default()
    };
    let mut r = assemble(&Inputs {
        spec: &spec,
        context: context(
            sent.from.to_string(),
            sent.group,
            plan.started_unix_s,
            &sent.protocol,
        ),
        client: &here,
        server: &receivers,
        client_samples: &[],
        server_samples: &[],
    });
    r.multicast = Some(MulticastRecord::Sender {
        interface: plan.interface,
        sent: sent.clone(),
    });
    unjudged(r)
}

fn sent_warnings(sent: &SendReport) -> Vec<String> {
    let mut w = vec!["a multicast group has no return path: what each receiver got is in that receiver's own result (multicast receive)".to_string()];
    if sent.send_errors > 0 {
        w.push(format!(
            "{} sends refused by this host (the first: {}): its receivers count them lost",
            sent.send_errors,
            sent.first_error.as_deref().unwrap_or("no reason given")
        ));
    }
    w
}

/// What held the rate back is not judged: a sender paces at the rate asked, and no host sees both
/// ends of the group (docs/multicast.md).
fn unjudged(mut r: RunResult) -> RunResult {
    for d in &mut r.directions {
        d.limits.clear();
    }
    r
}

/// One result per sender a receiver heard, in the order first heard.
pub fn received_results(rep: &MulticastReport, host: &HostInfo) -> Vec<RunResult> {
    rep.sources
        .iter()
        .map(|heard| {
            let mut r = received_result(rep, heard, host);
            r.multicast = Some(MulticastRecord::Receiver {
                group: rep.group.clone(),
                source: rep.source.clone(),
                interface: rep.interface.clone(),
                heard: Box::new(heard.clone()),
                ended_by: rep.ended_by.clone(),
            });
            unjudged(r)
        })
        .collect()
}

/// The one-way delay as the result's transit (the clocks' offset in it, as iperf 2's).
fn transit(h: &SourceReport) -> Option<TransitSummary> {
    let d = h.one_way.as_ref()?;
    let n = h.udp.datagrams_received;
    Some(TransitSummary {
        datagrams: n,
        mean_ms: d.mean_ms,
        min_ms: d.min_ms,
        max_ms: d.max_ms,
        stddev_ms: d.stdev_ms,
        per_s: if h.span_s > 0.0 { n as f64 / h.span_s } else { 0.0 },
    })
}

fn received_result(rep: &MulticastReport, h: &SourceReport, host: &HostInfo) -> RunResult {
    let n = h.udp.datagrams_received;
    let length = h.bytes.checked_div(n).unwrap_or(0);
    let spec = spec(
        length,
        Duration::from_secs_f64(h.span_s.max(0.0)),
        Direction::Reverse,
        h.key.as_deref(),
    );
    let mut udp = h.udp;
    udp.transit = transit(h);
    let mine = StreamReport {
        bytes: h.bytes,
        calls: n,
        first_byte_s: Some(0.0),
        last_byte_s: Some(h.span_s),
        bytes_verified: if h.verified == Some(true) { h.bytes } else { 0 },
        corrupt_blocks: h.corrupt,
        first_corruption: h.first_corruption.clone(),
        udp: Some(udp),
        ..StreamReport::empty(0, Flow::ServerToClient, Role::Receiver)
    };
    let sent = h.udp.datagrams_sent.unwrap_or(n);
    let theirs = StreamReport {
        bytes: sent * length,
        calls: sent,
        ..StreamReport::empty(0, Flow::ServerToClient, Role::Sender)
    };
    let mut warnings = vec![];
    if !h.ended {
        warnings
            .push("the sender's end did not arrive: its count is the highest number heard, plus one".into());
    }
    if h.verified.is_none() {
        warnings.push(format!(
            "{}'s payload is not landspeed's: nothing was verified",
            h.protocol
        ));
    }
    let here = EndpointReport {
        software: software("multicast receiver"),
        streams: vec![mine],
        elapsed_s: h.span_s,
        threads: 1,
        host: host.clone(),
        warnings,
        ..EndpointReport::default()
    };
    let sender = EndpointReport {
        software: format!("{} multicast sender", h.protocol),
        streams: vec![theirs],
        elapsed_s: h.span_s,
        ..EndpointReport::default()
    };
    assemble(&Inputs {
        spec: &spec,
        context: context(rep.group.clone(), h.from, h.first_arrival_unix_s, &h.protocol),
        client: &here,
        server: &sender,
        client_samples: &[],
        server_samples: &[],
    })
}
