//! `landspeed mesh PLAN`: many hosts at once. Reads the TOML plan, checks every host, has each sending
//! host run its tests (third-party orders, all started at one agreed instant unless the plan says
//! otherwise), archives each result as it arrives under one campaign, and prints the combined report
//! (text or `--json`). Exit 0 when every test completed and every byte arrived; 1 otherwise.

use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use landspeed_campaign::mesh::{run_plan, MeshObserver, MeshOptions};
use landspeed_plan::mesh::{combine, HostInfo, Plan, TestOutcome};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MeshArgs {
    /// The plan (TOML): hosts, and tests between them. See docs/mesh.md.
    pub plan: PathBuf,
    /// The key the hosts require (`serve --auth-keys ... --allow-control`).
    #[arg(long, value_name = "NAME:KEYFILE", value_parser = crate::common::values::auth)]
    pub auth: Option<(String, PathBuf)>,
    /// Print the combined report as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Check the plan and print its tests without contacting any host.
    #[arg(long)]
    pub dry_run: bool,
    /// Connect and control-message timeout per host.
    #[arg(long, default_value = "10s", value_parser = crate::common::values::duration, value_name = "DUR")]
    pub timeout: Duration,
    /// Do not archive the campaign.
    #[arg(long)]
    pub no_save: bool,
    #[command(flatten)]
    pub db: crate::common::store::DbArg,
}

/// Progress on stderr, results into the archive as they arrive.
struct Progress {
    archive: Option<(landspeed_archive::Archive, i64)>,
    quiet: bool,
}

impl MeshObserver for Progress {
    fn host_checked(&mut self, h: &HostInfo) {
        if self.quiet {
            return;
        }
        match (&h.error, &h.clock) {
            (Some(e), _) => errln!("landspeed: host {} ({}): FAILED: {e}", h.name, h.address),
            (None, Some(c)) => errln!(
                "landspeed: host {} ({}): ok, clock {:+.3} ms",
                h.name,
                h.address,
                c.offset_ns as f64 / 1e6
            ),
            _ => {}
        }
    }

    fn starting(&mut self, t0: Option<f64>, tests: usize) {
        if self.quiet {
            return;
        }
        match t0 {
            Some(t) => errln!(
                "landspeed: {tests} test(s) start together at {}",
                landspeed_core::result::format_utc(t)
            ),
            None => errln!("landspeed: {tests} test(s), one after another"),
        }
    }

    fn test_done(&mut self, o: &TestOutcome) -> Option<i64> {
        let t = &o.test;
        let id = match (&o.result, &self.archive) {
            (Ok(r), Some((a, c))) => match a.save(
                r,
                &landspeed_archive::RunMeta {
                    campaign: Some((*c, t.from.clone())),
                    tag: None,
                    ..Default::default()
                },
            ) {
                Ok(id) => Some(id),
                Err(e) => {
                    errln!("landspeed: warning: test {} was not archived: {e}", t.index);
                    None
                }
            },
            _ => None,
        };
        if !self.quiet {
            match &o.result {
                Ok(r) => errln!(
                    "landspeed: test {} {} -> {}: {}",
                    t.index,
                    t.from,
                    t.to,
                    rate(t, r)
                ),
                Err(e) => errln!("landspeed: test {} {} -> {}: FAILED: {e}", t.index, t.from, t.to),
            }
        }
        id
    }

    fn retrying(&mut self, tests: usize) {
        if !self.quiet {
            errln!("landspeed: every test has run; trying the {tests} that failed once more");
        }
    }
}

/// `--dry-run`: the tests the plan expands to, one line each.
fn dry_run(plan: &Plan, tests: &[landspeed_plan::mesh::plan::PlannedTest]) {
    for t in tests {
        let to = match plan.hosts.get(&t.to) {
            Some(addr) => format!("{} ({addr})", t.to),
            None => format!("group {}", t.to),
        };
        let part = match t.multicast {
            Some(m) if m.send => ", multicast sender",
            Some(_) => ", multicast receiver",
            None => "",
        };
        outln!(
            "{:>3}  {} ({}) -> {to}  {} stream(s), {:?}{part}",
            t.index,
            t.from,
            plan.hosts[&t.from],
            t.spec.streams,
            t.spec.end
        );
    }
}

/// A finished test's rate: what arrived, or for a multicast sender (which hears nothing back), what
/// it sent.
fn rate(t: &landspeed_plan::mesh::plan::PlannedTest, r: &landspeed_core::result::RunResult) -> String {
    use landspeed_core::units::BitRate;
    let s = &r.summary;
    match t.multicast {
        Some(m) if m.send && s.sender_elapsed_s > 0.0 => {
            format!("{} sent", BitRate(s.bytes_sent as f64 * 8.0 / s.sender_elapsed_s))
        }
        _ => BitRate(s.throughput_bps).to_string(),
    }
}

pub fn mesh(a: MeshArgs) -> Result<bool> {
    let text = std::fs::read_to_string(&a.plan)
        .map_err(|e| UsageError(format!("cannot read the plan {}: {e}", a.plan.display())))?;
    let plan: Plan =
        toml::from_str(&text).map_err(|e| UsageError(format!("plan {}: {e}", a.plan.display())))?;
    let tests = plan
        .expand()
        .map_err(|e| UsageError(format!("plan {}: {e}", a.plan.display())))?;
    let start_delay = plan
        .start_delay()
        .map_err(|e| UsageError(format!("plan {}: {e}", a.plan.display())))?;
    for (name, addr) in &plan.hosts {
        landspeed_plan::mesh::plan::host_port(addr)
            .map_err(|e| UsageError(format!("plan {}: host {name}: {e}", a.plan.display())))?;
    }
    if a.dry_run {
        dry_run(&plan, &tests);
        return Ok(true);
    }
    let key = match &a.auth {
        None => None,
        Some((name, file)) => Some(
            landspeed_proto::auth::client_key(name, &crate::common::keyfile::read(file)?)
                .map_err(|e| crate::common::keyfile::error(&format!("--auth {name}:"), file, &e))?,
        ),
    };
    let archive = if a.no_save {
        None
    } else {
        match a.db.open().and_then(|db| {
            let plan_json = serde_json::to_string(&plan)?;
            let now = landspeed_core::result::format_utc(crate::common::unix_now_s());
            let id = db.create_campaign(&plan.name, &now, &plan_json)?;
            Ok((db, id))
        }) {
            Ok(x) => Some(x),
            Err(e) => {
                errln!("landspeed: warning: the campaign will not be archived: {e:#}");
                None
            }
        }
    };
    let opts = MeshOptions {
        key,
        timeout: a.timeout,
        concurrent: plan.concurrent,
        start_delay,
    };
    let mut progress = Progress {
        archive,
        quiet: false,
    };
    let (hosts, outcomes, t0) = run_plan(&plan.hosts, &tests, &opts, &mut progress);
    let interval = tests.first().map_or(1.0, |t| t.spec.interval_s.as_secs_f64());
    let mut report = combine(&plan.name, plan.concurrent, t0, hosts, &outcomes, interval);
    let all_ok = report.aggregate.tests_ok == report.aggregate.tests;
    if let Some((db, id)) = &progress.archive {
        report.campaign_id = Some(*id);
        let json = serde_json::to_string(&report).context("report to JSON")?;
        let status = if all_ok { "complete" } else { "incomplete" };
        if let Err(e) = db.finish_campaign(*id, &json, status) {
            errln!("landspeed: warning: the campaign report was not archived: {e}");
        }
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", landspeed_report::mesh_text(&report));
    }
    Ok(all_ok)
}
