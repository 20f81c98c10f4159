//! Sweeps in the archive: a sweep row holds the plan (so `sweep --resume ID` needs nothing else), and
//! each finished cell is an ordinary run that names its sweep and repetition. A unique index on
//! (sweep, window, streams, direction, repetition) makes a duplicate cell impossible, whatever a crash
//! or a second resumer does.

use crate::{Archive, ArchiveError};
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

/// A sweep as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub id: i64,
    pub created_utc: String,
    pub host: String,
    pub plan_json: String,
    /// running, complete, incomplete (some cells failed) or interrupted.
    pub status: String,
}

/// One finished cell of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRun {
    pub run_id: i64,
    pub window_bytes: Option<u64>,
    pub streams: u32,
    pub direction: String,
    pub repeat: u32,
    pub throughput_bps: f64,
    /// The receive window the senders saw (TCP_INFO snd_wnd), averaged over the streams; None
    /// without TCP_INFO.
    pub effective_window_bytes: Option<f64>,
}

impl Archive {
    /// Starts a sweep record; returns its id.
    pub fn create_sweep(&self, host: &str, created_utc: &str, plan_json: &str) -> Result<i64, ArchiveError> {
        self.conn.execute(
            "INSERT INTO sweeps (created_utc, host, plan_json) VALUES (?1, ?2, ?3)",
            params![created_utc, host, plan_json],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// A sweep's plan, as stored.
    pub fn sweep_plan(&self, id: i64) -> Result<Option<String>, ArchiveError> {
        Ok(self.sweep(id)?.map(|s| s.plan_json))
    }

    pub fn sweep(&self, id: i64) -> Result<Option<SweepRow>, ArchiveError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, created_utc, host, plan_json, status FROM sweeps WHERE id = ?1",
                [id],
                |r| {
                    Ok(SweepRow {
                        id: r.get(0)?,
                        created_utc: r.get(1)?,
                        host: r.get(2)?,
                        plan_json: r.get(3)?,
                        status: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    pub fn set_sweep_status(&self, id: i64, status: &str) -> Result<(), ArchiveError> {
        self.conn
            .execute("UPDATE sweeps SET status = ?2 WHERE id = ?1", params![id, status])?;
        Ok(())
    }

    /// The newest `limit` sweeps, each with how many of its runs are stored.
    pub fn list_sweeps(&self, limit: u32) -> Result<Vec<(SweepRow, u32)>, ArchiveError> {
        let mut st = self.conn.prepare(
            "SELECT s.id, s.created_utc, s.host, s.plan_json, s.status,
                    (SELECT count(*) FROM runs r WHERE r.sweep_id = s.id)
             FROM sweeps s ORDER BY s.id DESC LIMIT ?1",
        )?;
        let rows = st.query_map([limit], |r| {
            Ok((
                SweepRow {
                    id: r.get(0)?,
                    created_utc: r.get(1)?,
                    host: r.get(2)?,
                    plan_json: r.get(3)?,
                    status: r.get(4)?,
                },
                r.get(5)?,
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The finished cells of sweep `id`, oldest first.
    pub fn sweep_runs(&self, id: i64) -> Result<Vec<SweepRun>, ArchiveError> {
        let mut st = self.conn.prepare(
            "SELECT id, window_bytes, streams, direction, cell_repeat, throughput_bps,
                (SELECT avg(json_extract(s.value, '$.tcp.snd_wnd_bytes')) FROM json_each(result_json, '$.streams') s
                 WHERE json_extract(s.value, '$.tcp.snd_wnd_bytes') > 0)
             FROM runs
             WHERE sweep_id = ?1 ORDER BY id",
        )?;
        let rows = st.query_map([id], |r| {
            Ok(SweepRun {
                run_id: r.get(0)?,
                window_bytes: r.get::<_, Option<i64>>(1)?.map(|w| w as u64),
                streams: r.get(2)?,
                direction: r.get(3)?,
                repeat: r.get::<_, Option<u32>>(4)?.unwrap_or(0),
                throughput_bps: r.get(5)?,
                effective_window_bytes: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
