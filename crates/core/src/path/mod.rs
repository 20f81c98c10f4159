//! Knowing the path, without I/O: the UDP echo probe format a landspeed server answers, RTT
//! distributions (ping's summary and RFC 6349's buffer delay), and the report types `landspeed path`
//! and `run --latency` fill. The probing itself lives in landspeed-net; docs/path.md describes the
//! methods and their limits.

pub mod disciplines;
pub mod echo;
pub mod latency;
pub mod oneway;
pub mod phases;
pub mod plan;
pub mod report;
pub mod rtt;

pub use disciplines::{DisciplineRun, LatencyByDiscipline, DISCIPLINES_SCHEMA};
pub use echo::{EchoHeader, EchoKind, ECHO_HEADER_LEN, ECHO_MAGIC};
pub use latency::LatencyReport;
pub use oneway::{ClockOffset, DirectionDelay, OneWayReport, Stamps};
pub use phases::{Load, PhaseLatency, PhaseSpan, PhasedLatency, ProbePoint, ProbeSample, LATENCY_SCHEMA};
pub use plan::{PathEvent, PathPlan};
pub use report::{
    CapacityReport, Hop, HopProbe, PathReport, PmtuProbe, PmtuReport, RttRun, TraceReport, PATH_SCHEMA,
};
pub use rtt::RttSummary;
