//! Renderers: pure functions from a `RunResult` (or from one live interval) to text or JSON. They never
//! measure anything and the measurement code never formats anything, so every output format shows the
//! same numbers and a new format is a new function here.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

pub mod frames_text;
pub mod html;
pub mod iperf2_bounce_text;
pub mod iperf2_dual_text;
pub mod iperf2_multicast_text;
pub mod iperf2_pdf;
pub mod iperf2_server_text;
pub mod iperf2_text;
pub mod iperf3_json;
pub mod iperf3_text;
pub mod json;
pub mod live;
pub mod mesh_text;
pub mod model_text;
pub mod multicast_text;
pub mod openmetrics;
pub mod path_text;
pub mod plot;
pub mod record_doc;
pub mod rpm_text;
pub mod server_log;
pub mod sweep_text;
pub mod text;
pub mod transactions_text;
#[cfg(target_os = "linux")]
pub mod wan_text;

pub use json::{to_json, JsonEvent};
pub use live::{interval_header, interval_line};
pub use mesh_text::mesh_text;
pub use model_text::{model_text, tune_text};
pub use sweep_text::sweep_text;
pub use text::render;
