//! Where the archive is (`--db`, shared by every command that touches it) and the one way a finished
//! run is saved. The result is printed (and its JSON written) before it is saved, so a save that
//! fails (a full disk, a damaged file, a database that went away) loses nothing on screen; it is an
//! error line naming the archive, and the run exits 1 so a script knows the run is not in the archive.

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

/// Saves a finished run; returns a line saying where, or (as the error) a line saying why not.
fn save(db: &DbArg, r: &RunResult, tag: Option<String>) -> Result<String, String> {
    let place = db.db.clone().unwrap_or_else(default_path);
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
        Ok((id, path)) => Ok(format!("saved as run {id} in {path} (landspeed show {id})")),
        Err(e) => Err(format!(
            "error: the result above was not archived in {}: {e:#}",
            landspeed_archive::shown(&place)
        )),
    }
}

/// Prints where a finished run was saved, or why it was not; whether it was.
pub fn save_and_say(db: &DbArg, r: &RunResult, tag: Option<String>) -> bool {
    match save(db, r, tag) {
        Ok(line) => {
            eprintln!("landspeed: {line}");
            true
        }
        Err(line) => {
            eprintln!("landspeed: {line}");
            false
        }
    }
}
