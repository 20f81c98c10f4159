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
            errln!("landspeed: {line}");
            true
        }
        Err(line) => {
            errln!("landspeed: {line}");
            false
        }
    }
}

/// `serve --archive`: the results of tests a server served to clients that keep no landspeed archive
/// (ndt7 subtests, iperf3 clients), saved as the server saw them. Saving runs on a thread of its own,
/// so a slow archive (a PostgreSQL server far away) never holds up a test; at shutdown everything
/// still queued is saved before the server exits.
pub struct ServerArchive {
    queue: std::sync::Mutex<Option<std::sync::mpsc::Sender<Box<RunResult>>>>,
    saver: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ServerArchive {
    /// Opens the archive now (so a wrong `--db` stops the server before it listens) and starts the
    /// thread that saves into it.
    pub fn open(db: &DbArg) -> Result<std::sync::Arc<ServerArchive>> {
        let place = db.db.clone().unwrap_or_else(default_path);
        let archive = db.open().map_err(|e| {
            anyhow::anyhow!(
                "--archive: cannot open the archive {}: {e:#}",
                landspeed_archive::shown(&place)
            )
        })?;
        let (tx, rx) = std::sync::mpsc::channel::<Box<RunResult>>();
        let saver = std::thread::Builder::new()
            .name("archive".into())
            .spawn(move || {
                for r in rx {
                    errln!("landspeed: {}", save_served(&archive, &r));
                }
            })?;
        Ok(std::sync::Arc::new(ServerArchive {
            queue: std::sync::Mutex::new(Some(tx)),
            saver: std::sync::Mutex::new(Some(saver)),
        }))
    }

    /// Queues the result a test event carries, if it carries one.
    pub fn take(&self, ev: &landspeed_net::ServerEvent) {
        let landspeed_net::ServerEvent::Test(log) = ev else {
            return;
        };
        let Some(r) = &log.result else { return };
        let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = queue.as_ref() {
            let _ = tx.send(r.clone());
        }
    }

    /// Saves what is queued, then stops the saving thread; results of tests that end later are
    /// not saved.
    pub fn finish(&self) {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = self.saver.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// Saves a served test's result; the line saying where, or why not.
fn save_served(archive: &Archive, r: &RunResult) -> String {
    let what = match &r.ndt7 {
        Some(n) => format!("ndt7 {}", n.subtest),
        None => format!("{} test", r.protocol),
    };
    let from = &r.config.local_address;
    match archive.save(r, &RunMeta::default()) {
        Ok(id) => format!(
            "saved the {what} from {from} as run {id} in {} (landspeed show {id})",
            archive.path()
        ),
        Err(e) => format!(
            "error: the {what} from {from} was not archived in {}: {e:#}",
            archive.path()
        ),
    }
}
