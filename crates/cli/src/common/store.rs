//! Where the archive is (`--db`, shared by every command that touches it) and the one way a finished
//! run is saved: a failed save is a warning line, never a failed run.

use anyhow::Result;
use clap::Args;
use landspeed_archive::{default_path, Archive, RunMeta};
use landspeed_core::result::RunResult;
use std::path::PathBuf;

/// Where the archive is (shared by every command that touches it).
#[derive(Args, Debug, Clone)]
pub struct DbArg {
    /// The archive: a SQLite file, or a shared PostgreSQL database as postgres://USER:PASSWORD@HOST/DB
    /// (default: $LANDSPEED_DB, else ~/.local/share/landspeed/archive.db).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}

impl DbArg {
    pub fn open(&self) -> Result<Archive> {
        let path = self.db.clone().unwrap_or_else(default_path);
        Ok(Archive::open(&path)?)
    }
}

/// Saves a finished run; returns a line saying where, or why not (a failed save never fails the run).
pub fn save(db: &DbArg, r: &RunResult, tag: Option<String>) -> String {
    match db.open().and_then(|a| {
        Ok((
            a.save(
                r,
                &RunMeta {
                    tag,
                    ..Default::default()
                },
            )?,
            a.path().to_string(),
        ))
    }) {
        Ok((id, path)) => format!("saved as run {id} in {path} (landspeed show {id})"),
        Err(e) => format!("warning: the result was not archived: {e:#}"),
    }
}
