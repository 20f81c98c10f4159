//! The result archive: every run stored in SQLite the moment it completes, the whole `RunResult` as JSON
//! plus indexed columns to find it again (host, time, tag, sweep cell). The schema is versioned with
//! SQLite's `user_version`; opening an older file migrates it in one transaction, step by step, so an
//! archive made by any earlier landspeed keeps working. Each save is its own transaction (WAL journal),
//! so a process killed at any moment loses at most the run it was about to write.

mod campaign;
mod schema;
mod sweep;

use landspeed_core::result::RunResult;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use campaign::CampaignRow;
pub use schema::SCHEMA_VERSION;
pub use sweep::{SweepRow, SweepRun};

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive {path}: {err}")]
    Open { path: String, err: rusqlite::Error },
    #[error("cannot create the archive's directory {path}: {err}")]
    Dir { path: String, err: std::io::Error },
    #[error("archive {path} has schema version {found}, newer than this landspeed ({SCHEMA_VERSION}): upgrade landspeed")]
    TooNew { path: String, found: i64 },
    #[error("archive: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("archive: stored result {id} is not readable: {err}")]
    Json { id: i64, err: serde_json::Error },
}

/// Where runs are stored unless `--db` says otherwise: `$LANDSPEED_DB`, else the user's data directory
/// (`$XDG_DATA_HOME/landspeed/archive.db`, by default `~/.local/share/landspeed/archive.db`).
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("LANDSPEED_DB") {
        return PathBuf::from(p);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("landspeed").join("archive.db")
}

/// What a run is stored with besides its result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMeta {
    pub tag: Option<String>,
    /// The sweep and the repetition this run is a cell of.
    pub sweep: Option<(i64, u32)>,
    /// The mesh campaign this run belongs to, and the plan's name for the host that sent.
    pub campaign: Option<(i64, String)>,
}

/// A stored run's indexed columns (what `history` lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub id: i64,
    pub started_utc: String,
    pub host: String,
    pub protocol: String,
    pub transport: String,
    pub direction: String,
    pub streams: u32,
    pub window_bytes: Option<u64>,
    pub throughput_bps: f64,
    pub bytes_received: u64,
    pub tag: Option<String>,
    pub sweep_id: Option<i64>,
}

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub host: Option<String>,
    pub tag: Option<String>,
    pub since_unix_s: Option<f64>,
    pub until_unix_s: Option<f64>,
    pub sweep_id: Option<i64>,
    pub limit: Option<u32>,
}

pub struct Archive {
    conn: Connection,
    path: String,
}

impl Archive {
    /// Opens (creating it and its directory if needed) and migrates the archive at `path`.
    pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|err| ArchiveError::Dir {
                path: dir.display().to_string(),
                err,
            })?;
        }
        let conn = Connection::open(path).map_err(|err| ArchiveError::Open {
            path: shown.clone(),
            err,
        })?;
        Self::init(conn, shown)
    }

    pub fn open_in_memory() -> Result<Archive, ArchiveError> {
        Self::init(Connection::open_in_memory()?, ":memory:".into())
    }

    fn init(conn: Connection, path: String) -> Result<Archive, ArchiveError> {
        conn.busy_timeout(Duration::from_secs(10))?;
        // WAL: readers never block the writer, and a crash leaves every committed run intact.
        let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        let mut a = Archive { conn, path };
        a.migrate()?;
        Ok(a)
    }

    fn migrate(&mut self) -> Result<(), ArchiveError> {
        let found = self.version()?;
        if found > SCHEMA_VERSION {
            return Err(ArchiveError::TooNew {
                path: self.path.clone(),
                found,
            });
        }
        let tx = self.conn.transaction()?;
        for (i, step) in schema::MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", i as i64 + 1)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The schema version of the open file.
    pub fn version(&self) -> Result<i64, ArchiveError> {
        Ok(self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Stores a run; returns its id.
    pub fn save(&self, r: &RunResult, meta: &RunMeta) -> Result<i64, ArchiveError> {
        let json = serde_json::to_string(r).map_err(|err| ArchiveError::Json { id: 0, err })?;
        let spec = &r.config.spec;
        self.conn.execute(
            "INSERT INTO runs (started_unix_s, started_utc, host, port, protocol, transport, direction, streams,
                window_bytes, throughput_bps, bytes_received, tag, sweep_id, cell_repeat, result_json,
                campaign_id, from_host)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            params![
                r.started_unix_s,
                r.started_utc,
                r.config.host,
                r.config.port,
                r.protocol,
                format!("{:?}", spec.transport).to_lowercase(),
                format!("{:?}", spec.direction).to_lowercase(),
                spec.streams,
                spec.window_bytes.map(|w| w as i64),
                r.summary.throughput_bps,
                r.summary.bytes_received as i64,
                meta.tag,
                meta.sweep.map(|s| s.0),
                meta.sweep.map(|s| s.1),
                json,
                meta.campaign.as_ref().map(|c| c.0),
                meta.campaign.as_ref().map(|c| c.1.clone()),
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The stored result of run `id`.
    pub fn get(&self, id: i64) -> Result<Option<RunResult>, ArchiveError> {
        let json: Option<String> = self
            .conn
            .query_row("SELECT result_json FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()?;
        json.map(|j| serde_json::from_str(&j).map_err(|err| ArchiveError::Json { id, err }))
            .transpose()
    }

    /// Runs matching `f`, newest first.
    pub fn list(&self, f: &Filter) -> Result<Vec<RunRow>, ArchiveError> {
        let mut sql = String::from(
            "SELECT id, started_utc, host, protocol, transport, direction, streams, window_bytes,
                    throughput_bps, bytes_received, tag, sweep_id FROM runs WHERE 1=1",
        );
        let mut args: Vec<rusqlite::types::Value> = vec![];
        if let Some(h) = &f.host {
            sql.push_str(" AND host = ?");
            args.push(h.clone().into());
        }
        if let Some(t) = &f.tag {
            sql.push_str(" AND tag = ?");
            args.push(t.clone().into());
        }
        if let Some(s) = f.since_unix_s {
            sql.push_str(" AND started_unix_s >= ?");
            args.push(s.into());
        }
        if let Some(u) = f.until_unix_s {
            sql.push_str(" AND started_unix_s < ?");
            args.push(u.into());
        }
        if let Some(s) = f.sweep_id {
            sql.push_str(" AND sweep_id = ?");
            args.push(s.into());
        }
        sql.push_str(" ORDER BY started_unix_s DESC, id DESC");
        if let Some(l) = f.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        let mut st = self.conn.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(args), |r| {
            Ok(RunRow {
                id: r.get(0)?,
                started_utc: r.get(1)?,
                host: r.get(2)?,
                protocol: r.get(3)?,
                transport: r.get(4)?,
                direction: r.get(5)?,
                streams: r.get(6)?,
                window_bytes: r.get::<_, Option<i64>>(7)?.map(|w| w as u64),
                throughput_bps: r.get(8)?,
                bytes_received: r.get::<_, i64>(9)? as u64,
                tag: r.get(10)?,
                sweep_id: r.get(11)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// The rows as CSV (a header line, then one line per run; fields quoted where needed).
pub fn to_csv(rows: &[RunRow]) -> String {
    let q = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut out = String::from(
        "id,started_utc,host,protocol,transport,direction,streams,window_bytes,throughput_bps,bytes_received,tag,sweep_id\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}\n",
            r.id,
            q(&r.started_utc),
            q(&r.host),
            q(&r.protocol),
            r.transport,
            r.direction,
            r.streams,
            r.window_bytes.map(|w| w.to_string()).unwrap_or_default(),
            r.throughput_bps,
            r.bytes_received,
            r.tag.as_deref().map(q).unwrap_or_default(),
            r.sweep_id.map(|s| s.to_string()).unwrap_or_default(),
        ));
    }
    out
}

#[cfg(test)]
mod tests;
