//! One path measurement (RTT, route, path MTU) with its lines printed as they come when asked: the
//! `path` command and `run --path` both use it.

use crate::common::UsageError;
use anyhow::Result;
use landspeed_core::path::{PathEvent, PathPlan, PathReport};
use landspeed_path::campaign::{self, PathError};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

/// Runs `plan` against `addr`; with `text`, prints the lines of each step as it comes.
pub fn measure(plan: &PathPlan, addr: SocketAddr, interrupt: &AtomicBool, text: bool) -> Result<PathReport> {
    let mut show = |ev: PathEvent| {
        if text {
            landspeed_report::path_text::lines(&ev)
                .iter()
                .for_each(|l| outln!("{l}"));
        }
    };
    match campaign::measure(plan, addr, interrupt, &mut show) {
        Ok(r) => Ok(r),
        // A bad probe size is the user's to fix.
        Err(PathError::Echo(e)) => Err(UsageError(e.to_string()).into()),
        Err(e) => Err(e.into()),
    }
}
