//! Many hosts at once (`landspeed mesh`): the plan a user writes and its expansion into tests, and the
//! combined report built from their results. The controller that checks hosts, agrees the start and
//! collects the results lives in the binary and landspeed-net; everything here is pure.

pub mod combine;
pub mod plan;

pub use combine::{combine, HostInfo, MeshReport, TestOutcome};
pub use plan::{Plan, PlannedTest};
