//! Sweeps in the archive: a sweep row holds the plan (so `sweep --resume ID` needs nothing else), and
//! each finished cell is an ordinary run that names its sweep and repetition. A unique index on
//! (sweep, window, streams, direction, repetition) makes a duplicate cell impossible, whatever a crash
//! or a second resumer does.

use crate::backend::Val;
use crate::{Archive, ArchiveError};
use serde::{Deserialize, Serialize};

/// A sweep as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The sweep's id in this archive.
    pub id: i64,
    /// When it was created, UTC (RFC 3339).
    pub created_utc: String,
    /// The server it measures.
    pub host: String,
    /// The sweep plan as JSON (versioned; docs/archive.md).
    pub plan_json: String,
    /// running, complete, incomplete (some cells failed) or interrupted.
    pub status: String,
}

/// One finished cell of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRun {
    /// The stored run's id.
    pub run_id: i64,
    /// The cell's window (requested socket buffer per stream).
    pub window_bytes: Option<u64>,
    /// The cell's streams per direction.
    pub streams: u32,
    /// The cell's direction: forward, reverse or bidir.
    pub direction: String,
    /// Which repetition of the cell this run is, from 0.
    pub repeat: u32,
    /// The run's throughput, bit/s.
    pub throughput_bps: f64,
    /// The receive window the senders saw (TCP_INFO snd_wnd), averaged over the streams; None
    /// without TCP_INFO.
    pub effective_window_bytes: Option<f64>,
    /// The senders' mean smoothed RTT (TCP_INFO), averaged over the streams, in seconds; None without
    /// TCP_INFO.
    pub rtt_s: Option<f64>,
    /// The median RTT of the echo probes sent during the run (`run --latency`), ms; None without
    /// probes.
    #[serde(default)]
    pub loaded_rtt_ms: Option<f64>,
    /// What held its (first) direction back: its verdict's first kind (docs/diagnosis.md); None for
    /// runs stored without one.
    #[serde(default)]
    pub limit: Option<landspeed_core::limit::LimitKind>,
}

fn sweep_row(r: &[Val]) -> Result<SweepRow, ArchiveError> {
    Ok(SweepRow {
        id: r[0].int()?,
        created_utc: r[1].text()?,
        host: r[2].text()?,
        plan_json: r[3].text()?,
        status: r[4].text()?,
    })
}

/// The mean over the streams of a stored result of `tcp.KEY` (the streams that reported one above 0).
fn streams_mean(result: &serde_json::Value, key: &str) -> Option<f64> {
    let w: Vec<f64> = result["streams"]
        .as_array()?
        .iter()
        .filter_map(|s| s["tcp"][key].as_f64())
        .filter(|&w| w > 0.0)
        .collect();
    (!w.is_empty()).then(|| w.iter().sum::<f64>() / w.len() as f64)
}

impl Archive {
    /// Starts a sweep record; returns its id.
    pub fn create_sweep(&self, host: &str, created_utc: &str, plan_json: &str) -> Result<i64, ArchiveError> {
        self.db().insert(
            "INSERT INTO sweeps (created_utc, host, plan_json) VALUES (?1, ?2, ?3)",
            &[created_utc.into(), host.into(), plan_json.into()],
        )
    }

    /// A sweep's plan, as stored.
    pub fn sweep_plan(&self, id: i64) -> Result<Option<String>, ArchiveError> {
        Ok(self.sweep(id)?.map(|s| s.plan_json))
    }

    /// The stored sweep `id`, if there is one.
    pub fn sweep(&self, id: i64) -> Result<Option<SweepRow>, ArchiveError> {
        self.db()
            .query(
                "SELECT id, created_utc, host, plan_json, status FROM sweeps WHERE id = ?1",
                &[id.into()],
            )?
            .first()
            .map(|r| sweep_row(r))
            .transpose()
    }

    /// Replaces a sweep's stored plan (an older plan format carried over to the current one).
    pub fn set_sweep_plan(&self, id: i64, plan_json: &str) -> Result<(), ArchiveError> {
        self.db().execute(
            "UPDATE sweeps SET plan_json = ?2 WHERE id = ?1",
            &[id.into(), plan_json.into()],
        )
    }

    /// Sets a sweep's status (running, complete, incomplete or interrupted).
    pub fn set_sweep_status(&self, id: i64, status: &str) -> Result<(), ArchiveError> {
        self.db().execute(
            "UPDATE sweeps SET status = ?2 WHERE id = ?1",
            &[id.into(), status.into()],
        )
    }

    /// The newest `limit` sweeps, each with how many of its runs are stored.
    pub fn list_sweeps(&self, limit: u32) -> Result<Vec<(SweepRow, u32)>, ArchiveError> {
        self.db()
            .query(
                "SELECT s.id, s.created_utc, s.host, s.plan_json, s.status,
                        (SELECT count(*) FROM runs r WHERE r.sweep_id = s.id)
                 FROM sweeps s ORDER BY s.id DESC LIMIT ?1",
                &[limit.into()],
            )?
            .iter()
            .map(|r| Ok((sweep_row(r)?, r[5].int()? as u32)))
            .collect()
    }

    /// The finished cells of sweep `id`, oldest first.
    pub fn sweep_runs(&self, id: i64) -> Result<Vec<SweepRun>, ArchiveError> {
        self.db()
            .query(
                "SELECT id, window_bytes, streams, direction, cell_repeat, throughput_bps, result_json
                 FROM runs WHERE sweep_id = ?1 ORDER BY id",
                &[id.into()],
            )?
            .iter()
            .map(|r| {
                let result: serde_json::Value =
                    serde_json::from_str(&r[6].text()?).unwrap_or(serde_json::Value::Null);
                Ok(SweepRun {
                    run_id: r[0].int()?,
                    window_bytes: r[1].opt_int()?.map(|w| w as u64),
                    streams: r[2].int()? as u32,
                    direction: r[3].text()?,
                    repeat: r[4].opt_int()?.unwrap_or(0) as u32,
                    throughput_bps: r[5].real()?,
                    effective_window_bytes: streams_mean(&result, "snd_wnd_bytes"),
                    rtt_s: streams_mean(&result, "rtt_avg_us").map(|us| us / 1e6),
                    loaded_rtt_ms: result["latency"]["loaded"]["median_ms"].as_f64(),
                    limit: serde_json::from_value(result["directions"][0]["limits"][0]["kind"].clone()).ok(),
                })
            })
            .collect()
    }
}
