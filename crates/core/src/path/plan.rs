//! What a path measurement does (the plan) and what it reports as it goes (events), as data: the
//! campaign that runs the plan is in landspeed-net (`path::campaign`), the lines people read are
//! rendered from the events by landspeed-report (`path_text`).

use super::report::{CapacityReport, Hop, PmtuReport, RttRun, TraceReport};
use std::net::SocketAddr;
use std::time::Duration;

/// The measurements of one `landspeed path` (or `run --path`), every default resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PathPlan {
    /// The host as the user named it (reports and lines show it).
    pub host: String,
    /// The landspeed server's port: its UDP echo and packet trains share the test port.
    pub port: u16,
    /// RTT by UDP echo against a landspeed server.
    pub echo: bool,
    /// RTT by TCP connect time, against this port of any host.
    pub tcp_port: Option<u16>,
    /// Trace the route.
    pub trace: bool,
    /// Discover the path MTU.
    pub pmtu: bool,
    /// Estimate the bottleneck's capacity from packet trains.
    pub capacity: bool,
    /// Packet trains for the capacity estimate.
    pub trains: u32,
    /// No reverse names in the route.
    pub numeric: bool,
    /// The largest TTL the traceroute tries.
    pub max_hops: u8,
    /// Traceroute probes per hop.
    pub queries: u8,
    /// Probes per RTT series.
    pub count: u32,
    /// Time between probes.
    pub interval: Duration,
    /// UDP echo datagram size, header included.
    pub echo_bytes: usize,
    /// How long to wait for an answer to a probe.
    pub timeout: Duration,
}

impl PathPlan {
    /// What `run --path` measures before its test: everything, briefly.
    pub fn for_run(host: &str, port: u16) -> PathPlan {
        PathPlan {
            host: host.into(),
            port,
            echo: true,
            tcp_port: Some(port),
            trace: true,
            pmtu: true,
            capacity: true,
            trains: 10,
            numeric: false,
            max_hops: 30,
            queries: 2,
            count: 10,
            interval: Duration::from_millis(100),
            echo_bytes: 64,
            timeout: Duration::from_secs(1),
        }
    }
}

/// What a path measurement reports while it runs, in order.
#[derive(Debug, Clone, Copy)]
pub enum PathEvent<'a> {
    /// A UDP echo series begins.
    EchoStart {
        /// The plan.
        plan: &'a PathPlan,
        /// The server's address.
        addr: SocketAddr,
    },
    /// An echo reply arrived (None: none did for this probe).
    EchoReply {
        /// The plan.
        plan: &'a PathPlan,
        /// The server's address.
        addr: SocketAddr,
        /// The probe's number, from 0.
        seq: u32,
        /// Its round-trip time, when a reply came.
        rtt: Option<Duration>,
    },
    /// The echo series is over.
    EchoDone {
        /// The plan.
        plan: &'a PathPlan,
        /// The series with its summary.
        run: &'a RttRun,
    },
    /// A TCP connect series begins.
    ConnectStart {
        /// The plan.
        plan: &'a PathPlan,
        /// The address connected to.
        target: SocketAddr,
    },
    /// One connect finished (refused: a reset answered, which still times a round trip).
    Connected {
        /// The plan.
        plan: &'a PathPlan,
        /// The address connected to.
        target: SocketAddr,
        /// The attempt's number, from 0.
        seq: u32,
        /// The connect time, when something answered.
        rtt: Option<Duration>,
        /// A reset answered.
        refused: bool,
    },
    /// The TCP connect series is over.
    ConnectDone {
        /// The series with its summary.
        run: &'a RttRun,
    },
    /// A traceroute begins.
    TraceStart {
        /// The plan.
        plan: &'a PathPlan,
        /// The target's address.
        addr: SocketAddr,
    },
    /// A hop is complete (numeric traces: as it completes; named ones: after the names are in).
    Hop(&'a Hop),
    /// The traceroute is over.
    TraceDone(&'a TraceReport),
    /// Path MTU discovery is over.
    Pmtu {
        /// What it found.
        report: &'a PmtuReport,
        /// The target's address.
        addr: SocketAddr,
    },
    /// The capacity estimate is over.
    Capacity(&'a CapacityReport),
}
