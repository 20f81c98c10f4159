//! Mesh campaigns in the archive: a campaign row holds the plan and, once it is over, the combined
//! report; each test's result is an ordinary run that names its campaign and the host that sent it, saved
//! the moment it arrives, so a controller killed mid-plan loses nothing already measured.

use crate::backend::Val;
use crate::{Archive, ArchiveError};
use serde::{Deserialize, Serialize};

/// A campaign as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignRow {
    /// The campaign's id in this archive.
    pub id: i64,
    /// When it was created, UTC (RFC 3339).
    pub created_utc: String,
    /// The plan's name.
    pub name: String,
    /// The mesh plan as JSON.
    pub plan_json: String,
    /// The combined report as JSON, once the campaign has one.
    pub report_json: Option<String>,
    /// running, complete, or incomplete (some tests failed).
    pub status: String,
}

fn campaign_row(r: &[Val]) -> Result<CampaignRow, ArchiveError> {
    Ok(CampaignRow {
        id: r[0].int()?,
        created_utc: r[1].text()?,
        name: r[2].text()?,
        plan_json: r[3].text()?,
        report_json: r[4].opt_text()?,
        status: r[5].text()?,
    })
}

impl Archive {
    /// Starts a campaign record; returns its id.
    pub fn create_campaign(
        &self,
        name: &str,
        created_utc: &str,
        plan_json: &str,
    ) -> Result<i64, ArchiveError> {
        self.db().insert(
            "INSERT INTO campaigns (created_utc, name, plan_json) VALUES (?1, ?2, ?3)",
            &[created_utc.into(), name.into(), plan_json.into()],
        )
    }

    /// Stores the combined report and the final status.
    pub fn finish_campaign(&self, id: i64, report_json: &str, status: &str) -> Result<(), ArchiveError> {
        self.db().execute(
            "UPDATE campaigns SET report_json = ?2, status = ?3 WHERE id = ?1",
            &[id.into(), report_json.into(), status.into()],
        )
    }

    /// The stored campaign `id`, if there is one.
    pub fn campaign(&self, id: i64) -> Result<Option<CampaignRow>, ArchiveError> {
        self.db()
            .query(
                "SELECT id, created_utc, name, plan_json, report_json, status FROM campaigns WHERE id = ?1",
                &[id.into()],
            )?
            .first()
            .map(|r| campaign_row(r))
            .transpose()
    }

    /// The runs of a campaign: (run id, sending host, receiving host as run against).
    pub fn campaign_runs(&self, id: i64) -> Result<Vec<(i64, String, String)>, ArchiveError> {
        self.db()
            .query(
                "SELECT id, coalesce(from_host, ''), host FROM runs WHERE campaign_id = ?1 ORDER BY id",
                &[id.into()],
            )?
            .iter()
            .map(|r| Ok((r[0].int()?, r[1].text()?, r[2].text()?)))
            .collect()
    }
}
