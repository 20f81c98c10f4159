//! Mesh campaigns in the archive: a campaign row holds the plan and, once it is over, the combined
//! report; each test's result is an ordinary run that names its campaign and the host that sent it, saved
//! the moment it arrives, so a controller killed mid-plan loses nothing already measured.

use crate::{Archive, ArchiveError};
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

/// A campaign as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignRow {
    pub id: i64,
    pub created_utc: String,
    pub name: String,
    pub plan_json: String,
    pub report_json: Option<String>,
    /// running, complete, or incomplete (some tests failed).
    pub status: String,
}

impl Archive {
    /// Starts a campaign record; returns its id.
    pub fn create_campaign(
        &self,
        name: &str,
        created_utc: &str,
        plan_json: &str,
    ) -> Result<i64, ArchiveError> {
        self.conn.execute(
            "INSERT INTO campaigns (created_utc, name, plan_json) VALUES (?1, ?2, ?3)",
            params![created_utc, name, plan_json],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Stores the combined report and the final status.
    pub fn finish_campaign(&self, id: i64, report_json: &str, status: &str) -> Result<(), ArchiveError> {
        self.conn.execute(
            "UPDATE campaigns SET report_json = ?2, status = ?3 WHERE id = ?1",
            params![id, report_json, status],
        )?;
        Ok(())
    }

    pub fn campaign(&self, id: i64) -> Result<Option<CampaignRow>, ArchiveError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, created_utc, name, plan_json, report_json, status FROM campaigns WHERE id = ?1",
                [id],
                |r| {
                    Ok(CampaignRow {
                        id: r.get(0)?,
                        created_utc: r.get(1)?,
                        name: r.get(2)?,
                        plan_json: r.get(3)?,
                        report_json: r.get(4)?,
                        status: r.get(5)?,
                    })
                },
            )
            .optional()?)
    }

    /// The runs of a campaign: (run id, sending host, receiving host as run against).
    pub fn campaign_runs(&self, id: i64) -> Result<Vec<(i64, String, String)>, ArchiveError> {
        let mut st = self.conn.prepare(
            "SELECT id, coalesce(from_host, ''), host FROM runs WHERE campaign_id = ?1 ORDER BY id",
        )?;
        let rows = st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
