//! The result archive: every run stored the moment it completes, the whole `RunResult` as JSON plus
//! indexed columns to find it again (host, time, tag, sweep cell, campaign). By default a SQLite file;
//! with a `postgres://` URL, a PostgreSQL database that many hosts and people share. The schema is
//! versioned (SQLite's `user_version`, a one-row table in PostgreSQL); opening an older store migrates it
//! in one transaction, step by step, so an archive made by any earlier landspeed keeps working. Each
//! save is its own transaction, so a process killed at any moment loses at most the run it was about to
//! write.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

mod backend;
mod campaign;
mod pg;
mod schema;
mod sweep;

use backend::{Backend, Sqlite, Val};
use landspeed_core::result::RunResult;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pub use campaign::CampaignRow;
pub use schema::SCHEMA_VERSION;
pub use sweep::{SweepRow, SweepRun};

/// Why the archive could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The SQLite file could not be opened.
    #[error("archive {path}: {err}")]
    Open {
        /// The file.
        path: String,
        /// SQLite's reason.
        err: rusqlite::Error,
    },
    /// The PostgreSQL server could not be reached or refused the connection.
    #[error("archive {url}: {err}")]
    Postgres {
        /// The URL, its password left out.
        url: String,
        /// The server's or the client library's reason.
        err: postgres::Error,
    },
    /// The directory that holds the archive could not be made.
    #[error("cannot create the archive's directory {path}: {err}")]
    Dir {
        /// The directory.
        path: String,
        /// Why not.
        err: std::io::Error,
    },
    /// The file is not a SQLite database, or is damaged: it is left exactly as it was.
    #[error("{path} is not a landspeed archive (not a SQLite database, or damaged); it was left untouched: move it aside and landspeed starts a new archive there, or give another with --db (`sqlite3 {path} .recover` may save what it held)")]
    NotAnArchive {
        /// The file.
        path: String,
    },
    /// The archive was written by a newer landspeed (a schema this one does not know).
    #[error("archive {path} has schema version {found}, newer than this landspeed ({SCHEMA_VERSION}): upgrade landspeed")]
    TooNew {
        /// The archive.
        path: String,
        /// Its schema version.
        found: i64,
    },
    /// A SQLite statement failed.
    #[error("archive: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A PostgreSQL statement failed.
    #[error("archive (PostgreSQL): {0}")]
    Pg(#[from] postgres::Error),
    /// A column held a value of another type than the schema says.
    #[error("archive: unexpected column value: {0}")]
    Type(String),
    /// A stored result is not a readable `RunResult`.
    #[error("archive: stored result {id} is not readable: {err}")]
    Json {
        /// The run's id.
        id: i64,
        /// Why its JSON did not read.
        err: serde_json::Error,
    },
}

/// Where runs are stored unless `--db` says otherwise: `$LANDSPEED_DB`, else the user's data directory
/// (`$XDG_DATA_HOME/landspeed/archive.db`, by default `~/.local/share/landspeed/archive.db`; on
/// Windows `%LOCALAPPDATA%\landspeed\archive.db`).
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("LANDSPEED_DB") {
        return PathBuf::from(p);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        // Windows: %LOCALAPPDATA% (its users have no HOME).
        .or_else(|| std::env::var_os("LOCALAPPDATA").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("landspeed").join("archive.db")
}

/// True for a PostgreSQL connection URL (`postgres://` or `postgresql://`) rather than a file path.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// The archive's place as messages show it: the file, or the PostgreSQL URL without its password.
pub fn shown(location: &Path) -> String {
    let s = location.display().to_string();
    if is_postgres_url(&s) {
        pg::redact(&s)
    } else {
        s
    }
}

/// What a run is stored with besides its result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMeta {
    /// A label given with --tag, to find the run again.
    pub tag: Option<String>,
    /// The sweep and the repetition this run is a cell of.
    pub sweep: Option<(i64, u32)>,
    /// The mesh campaign this run belongs to, and the plan's name for the host that sent.
    pub campaign: Option<(i64, String)>,
}

/// A stored run's indexed columns (what `history` lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// The run's id in this archive.
    pub id: i64,
    /// When the test started, UTC (RFC 3339).
    pub started_utc: String,
    /// The server, as the client named it.
    pub host: String,
    /// The protocol spoken: landspeed or iperf3.
    pub protocol: String,
    /// tcp or udp.
    pub transport: String,
    /// forward, reverse or bidir.
    pub direction: String,
    /// Streams per direction.
    pub streams: u32,
    /// The requested socket buffer per stream, when one was asked for.
    pub window_bytes: Option<u64>,
    /// The run's throughput (all directions), bit/s.
    pub throughput_bps: f64,
    /// Bytes received after the warm-up (all directions).
    pub bytes_received: u64,
    /// The run's label, if any.
    pub tag: Option<String>,
    /// The sweep the run is a cell of, if any.
    pub sweep_id: Option<i64>,
    /// What held its directions back: the kinds their verdicts said (docs/diagnosis.md); none for
    /// runs stored without a verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limited_by: Vec<String>,
    /// A request/response test's transactions a second (its throughput describes only its requests
    /// and answers); none for a bulk test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    /// A UDP run's datagrams lost, percent; none for TCP and QUIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    /// What the senders wrote a second, bit/s (a multicast sender's rate: it receives nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_bps: Option<f64>,
}

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only runs against this server.
    pub host: Option<String>,
    /// Only runs with this label.
    pub tag: Option<String>,
    /// Only runs started at or after this time (Unix seconds).
    pub since_unix_s: Option<f64>,
    /// Only runs started before this time (Unix seconds).
    pub until_unix_s: Option<f64>,
    /// Only the cells of this sweep.
    pub sweep_id: Option<i64>,
    /// Only runs a direction of which was held back by this (their verdict, docs/diagnosis.md).
    pub limited_by: Option<landspeed_core::limit::LimitKind>,
    /// At most this many, newest first.
    pub limit: Option<u32>,
}

/// The kinds a run's directions' verdicts said, each between spaces (` sender_cpu receiver_cpu `),
/// for `history --limited-by`; None when it has none.
fn limited_by(r: &RunResult) -> Option<String> {
    let mut kinds: Vec<&str> = r
        .directions
        .iter()
        .flat_map(|d| d.limits.iter().map(|l| l.kind.label()))
        .collect();
    kinds.dedup();
    (!kinds.is_empty()).then(|| format!(" {} ", kinds.join(" ")))
}

/// The store of runs, sweeps and mesh campaigns: SQLite by default, or PostgreSQL, with the same schema and migrations; safe to share between threads.
pub struct Archive {
    db: Mutex<Box<dyn Backend>>,
    path: String,
}

impl Archive {
    /// Opens (creating it and its directory if needed) and migrates the archive at `path`.
    pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
        let shown = path.display().to_string();
        if is_postgres_url(&shown) {
            return Self::open_postgres(&shown);
        }
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
        Self::init_sqlite(conn, shown)
    }

    /// Connects to the PostgreSQL archive at `url` and migrates it.
    pub fn open_postgres(url: &str) -> Result<Archive, ArchiveError> {
        let db = pg::Postgres::connect(url)?;
        Self::init(Box::new(db), pg::redact(url), &schema::POSTGRES_MIGRATIONS)
    }

    /// A fresh SQLite archive in memory (tests, and runs that keep nothing).
    pub fn open_in_memory() -> Result<Archive, ArchiveError> {
        Self::init_sqlite(Connection::open_in_memory()?, ":memory:".into())
    }

    fn init_sqlite(conn: Connection, path: String) -> Result<Archive, ArchiveError> {
        // Another writer (a second landspeed saving a run) holds the lock for milliseconds: wait.
        conn.busy_timeout(Duration::from_secs(10))?;
        // A file that is not a database is found before anything is written to it: reading the
        // schema's first page fails with SQLITE_NOTADB (or CORRUPT) and nothing else runs.
        let damaged = |e: &rusqlite::Error| {
            matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
            )
        };
        if let Err(e) = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)) {
            return Err(if damaged(&e) {
                ArchiveError::NotAnArchive { path }
            } else {
                ArchiveError::Open { path, err: e }
            });
        }
        // WAL: readers never block the writer, and a crash leaves every committed run intact.
        let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        Self::init(Box::new(Sqlite(conn)), path, &schema::MIGRATIONS)
    }

    fn init(mut db: Box<dyn Backend>, path: String, steps: &[&str]) -> Result<Archive, ArchiveError> {
        let found = db.version()?;
        if found > SCHEMA_VERSION {
            return Err(ArchiveError::TooNew { path, found });
        }
        if found < SCHEMA_VERSION {
            db.migrate(steps, found)?;
        }
        Ok(Archive {
            db: Mutex::new(db),
            path,
        })
    }

    /// The store, for one query (a poisoned lock still holds a usable connection).
    fn db(&self) -> std::sync::MutexGuard<'_, Box<dyn Backend>> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The schema version of the open store.
    pub fn version(&self) -> Result<i64, ArchiveError> {
        self.db().version()
    }

    /// The file, or the PostgreSQL URL without its password.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Stores a run; returns its id.
    pub fn save(&self, r: &RunResult, meta: &RunMeta) -> Result<i64, ArchiveError> {
        let json = serde_json::to_string(r).map_err(|err| ArchiveError::Json { id: 0, err })?;
        let spec = &r.config.spec;
        self.db().insert(
            "INSERT INTO runs (started_unix_s, started_utc, host, port, protocol, transport, direction, streams,
                window_bytes, throughput_bps, bytes_received, tag, sweep_id, cell_repeat, result_json,
                campaign_id, from_host, limited_by, transactions_per_s, loss_pct, sent_bps)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
                ?20, ?21)",
            &[
                r.started_unix_s.into(),
                r.started_utc.as_str().into(),
                r.config.host.as_str().into(),
                (r.config.port as i64).into(),
                r.protocol.as_str().into(),
                spec.transport_name().into(),
                format!("{:?}", spec.direction).to_lowercase().into(),
                spec.streams.into(),
                spec.window_bytes.map(|w| w as i64).into(),
                r.summary.throughput_bps.into(),
                (r.summary.bytes_received as i64).into(),
                meta.tag.clone().into(),
                meta.sweep.map(|s| s.0).into(),
                meta.sweep.map(|s| s.1).into(),
                json.into(),
                meta.campaign.as_ref().map(|c| c.0).into(),
                meta.campaign.as_ref().map(|c| c.1.clone()).into(),
                limited_by(r).into(),
                r.transactions.as_ref().map(|t| t.per_s).into(),
                r.summary.udp.as_ref().map(|u| u.loss_pct).into(),
                sent_bps(&r.summary).into(),
            ],
        )
    }

    /// The stored result of run `id`.
    pub fn get(&self, id: i64) -> Result<Option<RunResult>, ArchiveError> {
        let rows = self
            .db()
            .query("SELECT result_json FROM runs WHERE id = ?1", &[id.into()])?;
        rows.first()
            .map(|r| serde_json::from_str(&r[0].text()?).map_err(|err| ArchiveError::Json { id, err }))
            .transpose()
    }

    /// Runs matching `f`, newest first.
    pub fn list(&self, f: &Filter) -> Result<Vec<RunRow>, ArchiveError> {
        let mut sql = String::from(
            "SELECT id, started_utc, host, protocol, transport, direction, streams, window_bytes,
                    throughput_bps, bytes_received, tag, sweep_id, limited_by, transactions_per_s,
                    loss_pct, sent_bps
             FROM runs WHERE 1=1",
        );
        let mut args: Vec<Val> = vec![];
        let mut arg = |sql: &mut String, cond: &str, v: Val| {
            args.push(v);
            sql.push_str(&format!(" AND {cond} ?{}", args.len()));
        };
        if let Some(h) = &f.host {
            arg(&mut sql, "host =", h.as_str().into());
        }
        if let Some(t) = &f.tag {
            arg(&mut sql, "tag =", t.as_str().into());
        }
        if let Some(s) = f.since_unix_s {
            arg(&mut sql, "started_unix_s >=", s.into());
        }
        if let Some(u) = f.until_unix_s {
            arg(&mut sql, "started_unix_s <", u.into());
        }
        if let Some(s) = f.sweep_id {
            arg(&mut sql, "sweep_id =", s.into());
        }
        if let Some(k) = f.limited_by {
            arg(&mut sql, "limited_by LIKE", format!("% {} %", k.label()).into());
        }
        sql.push_str(" ORDER BY started_unix_s DESC, id DESC");
        if let Some(l) = f.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        self.db()
            .query(&sql, &args)?
            .iter()
            .map(|r| {
                Ok(RunRow {
                    id: r[0].int()?,
                    started_utc: r[1].text()?,
                    host: r[2].text()?,
                    protocol: r[3].text()?,
                    transport: r[4].text()?,
                    direction: r[5].text()?,
                    streams: r[6].int()? as u32,
                    window_bytes: r[7].opt_int()?.map(|w| w as u64),
                    throughput_bps: r[8].real()?,
                    bytes_received: r[9].int()? as u64,
                    tag: r[10].opt_text()?,
                    sweep_id: r[11].opt_int()?,
                    limited_by: r[12]
                        .opt_text()?
                        .map(|k| k.split_whitespace().map(String::from).collect())
                        .unwrap_or_default(),
                    transactions_per_s: r[13].opt_real()?,
                    loss_pct: r[14].opt_real()?,
                    sent_bps: r[15].opt_real()?,
                })
            })
            .collect()
    }
}

/// What the senders wrote a second over their time writing, bit/s; none when they wrote nothing.
fn sent_bps(s: &landspeed_core::result::Summary) -> Option<f64> {
    (s.sender_elapsed_s > 0.0 && s.bytes_sent > 0).then(|| s.bytes_sent as f64 * 8.0 / s.sender_elapsed_s)
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
        "id,started_utc,host,protocol,transport,direction,streams,window_bytes,throughput_bps,bytes_received,tag,sweep_id,limited_by,transactions_per_s,loss_pct,sent_bps\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
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
            r.limited_by.join(" "),
            r.transactions_per_s.map(|t| t.to_string()).unwrap_or_default(),
            r.loss_pct.map(|t| t.to_string()).unwrap_or_default(),
            r.sent_bps.map(|t| t.to_string()).unwrap_or_default(),
        ));
    }
    out
}

#[cfg(test)]
mod tests;
