//! The archive on a real PostgreSQL server (.ci/run installs and starts Debian's postgresql and sets
//! LANDSPEED_TEST_POSTGRES). Each test works in a schema of its own, dropped at the end. Without a server
//! the tests skip, unless CI is set, where they fail.

use super::*;
use crate::backend::Backend;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The test that restarts the server takes this alone; every other test shares it.
static SERVER: std::sync::RwLock<()> = std::sync::RwLock::new(());

enum Hold {
    Shared(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>),
}

/// A scratch schema on the test server: its URL (search_path set to it) and a guard that drops it.
struct Scratch {
    base: String,
    schema: String,
    _hold: Hold,
}

impl Scratch {
    fn new() -> Option<Scratch> {
        Self::holding(Hold::Shared(SERVER.read().unwrap_or_else(|e| e.into_inner())))
    }

    /// A scratch schema while no other test uses the server (it is about to be restarted).
    fn alone() -> Option<Scratch> {
        Self::holding(Hold::Alone(SERVER.write().unwrap_or_else(|e| e.into_inner())))
    }

    fn holding(hold: Hold) -> Option<Scratch> {
        let base = std::env::var("LANDSPEED_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://landspeed:landspeed@127.0.0.1/landspeed".into());
        let schema = format!("t{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        match postgres::Client::connect(&base, postgres::NoTls) {
            Ok(mut c) => {
                c.batch_execute(&format!("CREATE SCHEMA {schema}")).unwrap();
                Some(Scratch {
                    base,
                    schema,
                    _hold: hold,
                })
            }
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI is set and PostgreSQL at {} is not reachable: {e}",
                    pg::redact(&base)
                );
                eprintln!("skipping: no PostgreSQL server ({e}); set LANDSPEED_TEST_POSTGRES");
                None
            }
        }
    }

    fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-csearch_path%3D{}", self.base, self.schema)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema));
        }
    }
}

#[test]
fn a_postgres_archive_round_trips_runs_sweeps_and_campaigns() {
    let Some(db) = Scratch::new() else { return };
    let a = Archive::open(Path::new(&db.url())).unwrap();
    assert_eq!(a.version().unwrap(), SCHEMA_VERSION);
    assert!(
        !a.path().contains("landspeed:landspeed@"),
        "no password in {}",
        a.path()
    );
    // Large counts survive (BIGINT), and so does the whole result.
    let mut r1 = result("alpha", 1000.0, 1, None, 1e9);
    r1.summary.bytes_received = 5_705_338_455;
    let r2 = result("beta", 2000.0, 4, Some(1 << 20), 2e9);
    let id1 = a.save(&r1, &RunMeta::default()).unwrap();
    let id2 = a
        .save(
            &r2,
            &RunMeta {
                tag: Some("lsr".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_ne!(id1, id2);
    assert_eq!(a.get(id1).unwrap().unwrap(), r1);
    assert!(a.get(id2 + 100).unwrap().is_none());
    let all = a.list(&Filter::default()).unwrap();
    assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), vec![id2, id1]);
    assert_eq!(all[1].bytes_received, 5_705_338_455);
    assert_eq!(all[0].window_bytes, Some(1 << 20));
    let tagged = a
        .list(&Filter {
            tag: Some("lsr".into()),
            since_unix_s: Some(1500.0),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0].host, "beta");

    // Sweeps: cells unique per repetition, counted per sweep.
    let s = a.create_sweep("beta", "2026-11-23T00:00:00Z", "{}").unwrap();
    let cell = RunMeta {
        sweep: Some((s, 0)),
        ..Default::default()
    };
    a.save(&r2, &cell).unwrap();
    assert!(a.save(&r2, &cell).is_err(), "a duplicate cell is refused");
    a.set_sweep_status(s, "complete").unwrap();
    let sweeps = a.list_sweeps(10).unwrap();
    assert_eq!((sweeps[0].0.status.as_str(), sweeps[0].1), ("complete", 1));
    assert_eq!(a.sweep_runs(s).unwrap()[0].window_bytes, Some(1 << 20));

    // Campaigns.
    let c = a.create_campaign("mesh", "2026-11-23T00:00:00Z", "{}").unwrap();
    a.save(
        &r1,
        &RunMeta {
            campaign: Some((c, "a".into())),
            ..Default::default()
        },
    )
    .unwrap();
    a.finish_campaign(c, r#"{"ok":true}"#, "complete").unwrap();
    assert_eq!(a.campaign(c).unwrap().unwrap().status, "complete");
    assert_eq!(a.campaign_runs(c).unwrap()[0].1, "a");

    // Two landspeeds sharing it: a second connection sees every run.
    let b = Archive::open(Path::new(&db.url())).unwrap();
    assert_eq!(b.list(&Filter::default()).unwrap().len(), 4);
}

#[test]
fn a_first_version_postgres_archive_is_migrated_and_a_newer_one_refused() {
    let Some(db) = Scratch::new() else { return };
    let mut old = result("old-host", 5.0, 2, Some(262_144), 5e8);
    old.transactions = Some(landspeed_core::transactions::TransactionsReport {
        per_s: 1234.5,
        ..Default::default()
    });
    // A UDP run's loss and its senders' rate too.
    old.summary.udp = Some(landspeed_core::udp::UdpStats {
        loss_pct: 2.5,
        ..Default::default()
    });
    (old.summary.bytes_sent, old.summary.sender_elapsed_s) = (1_000_000, 2.0);
    {
        // Written as the first schema version would have written it.
        let mut p = pg::Postgres::connect(&db.url()).unwrap();
        p.migrate(&schema::POSTGRES_MIGRATIONS[..1], 0).unwrap();
        assert_eq!(p.version().unwrap(), 1);
        p.execute(
            "INSERT INTO runs (started_unix_s, started_utc, host, port, protocol, direction, streams,
                throughput_bps, bytes_received, result_json) VALUES (5.0, 'x', 'old-host', 5201, 'landspeed',
                'forward', 2, 5e8, 0, ?1)",
            &[serde_json::to_string(&old).unwrap().into()],
        )
        .unwrap();
    }
    let a = Archive::open_postgres(&db.url()).unwrap();
    assert_eq!(a.version().unwrap(), SCHEMA_VERSION);
    let rows = a.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].window_bytes,
        Some(262_144),
        "backfilled from the stored JSON"
    );
    assert_eq!(rows[0].transport, "tcp");
    assert_eq!(rows[0].transactions_per_s, Some(1234.5), "backfilled");
    assert_eq!(
        (rows[0].loss_pct, rows[0].sent_bps),
        (Some(2.5), Some(4e6)),
        "backfilled"
    );
    assert_eq!(a.get(rows[0].id).unwrap().unwrap(), old);
    drop(a);
    let mut c = postgres::Client::connect(&db.url(), postgres::NoTls).unwrap();
    c.execute("UPDATE landspeed_schema SET version = version + 1", &[])
        .unwrap();
    let e = Archive::open_postgres(&db.url()).err().expect("too new");
    assert!(e.to_string().contains("upgrade landspeed"), "{e}");
}

#[test]
fn two_landspeeds_creating_one_postgres_archive_at_once_both_succeed() {
    let Some(db) = Scratch::new() else { return };
    let url = db.url();
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let u = url.clone();
            std::thread::spawn(move || Archive::open_postgres(&u).map(|a| a.version().unwrap()))
        })
        .collect();
    for o in opens {
        assert_eq!(o.join().unwrap().unwrap(), SCHEMA_VERSION);
    }
}

/// Restarts every PostgreSQL cluster on this machine (Debian's pg_ctlcluster, as root): false when
/// that cannot be done here.
fn restart_postgres() -> bool {
    let Ok(out) = std::process::Command::new("pg_lsclusters").arg("-h").output() else {
        return false;
    };
    let list = String::from_utf8_lossy(&out.stdout).to_string();
    let clusters: Vec<(&str, &str)> = list
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?, w.next()?))
        })
        .collect();
    !clusters.is_empty()
        && clusters.iter().all(|(ver, name)| {
            std::process::Command::new("pg_ctlcluster")
                .args([ver, name, "restart"])
                .status()
                .is_ok_and(|s| s.success())
        })
}

#[test]
fn a_restarted_server_is_reconnected_to_and_every_run_is_stored_once() {
    let Some(db) = Scratch::alone() else { return };
    let a = Archive::open(Path::new(&db.url())).unwrap();
    a.save(&result("alpha", 1000.0, 1, None, 1e9), &RunMeta::default())
        .unwrap();
    if !restart_postgres() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and PostgreSQL cannot be restarted here (pg_ctlcluster as root)"
        );
        eprintln!("skipping: cannot restart PostgreSQL (pg_ctlcluster as root)");
        return;
    }
    // The archive's connection died with the server: the next save reconnects (with back-off while
    // the server comes up) and stores the run once.
    a.save(&result("beta", 2000.0, 1, None, 2e9), &RunMeta::default())
        .expect("saved after the restart");
    let hosts: Vec<String> = a
        .list(&Filter::default())
        .unwrap()
        .into_iter()
        .map(|r| r.host)
        .collect();
    assert_eq!(hosts, ["beta", "alpha"]);
}

/// A connection the server ends (an administrator's pg_terminate_backend, as a restart's fast shutdown
/// does) is replaced and the run stored once: ended while the archive was idle (the client then sees
/// a closed connection or a failed socket) and ended while a save waited in the server (the client
/// then reads the server's "terminating connection", SQLSTATE 57P01, before the connection's end).
#[test]
fn a_connection_the_server_ends_is_replaced_and_the_run_stored_once() {
    let Some(db) = Scratch::alone() else { return };
    let a = Archive::open(Path::new(&db.url())).unwrap();
    let mut admin = postgres::Client::connect(&db.url(), postgres::NoTls).unwrap();
    let end_others = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                  WHERE usename = current_user AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
    };
    for i in 0..4 {
        a.save(
            &result(&format!("idle{i}"), 1000.0, 1, None, 1e9),
            &RunMeta::default(),
        )
        .unwrap();
        assert!(end_others(&mut admin) >= 1, "no connection to end");
        if i % 2 == 1 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    a.save(&result("reconnected", 1000.0, 1, None, 1e9), &RunMeta::default())
        .expect("saved after the connection was ended");
    // In flight: the table locked, a save waits on the lock, and its connection is ended.
    let mut tx = admin.transaction().unwrap();
    tx.batch_execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    std::thread::scope(|s| {
        let saving = s.spawn(|| a.save(&result("in-flight", 1000.0, 1, None, 1e9), &RunMeta::default()));
        let waits = |tx: &mut postgres::Transaction| -> i64 {
            tx.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = current_user
                  AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
        };
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while waits(&mut tx) == 0 {
            assert!(
                std::time::Instant::now() < end,
                "the save never waited on the lock"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        tx.query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
              WHERE usename = current_user AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap();
        tx.batch_execute("SELECT 1").unwrap();
        let _ = tx.commit();
        saving
            .join()
            .unwrap()
            .expect("a save whose connection was ended while it waited");
    });
    let runs = a.list(&Filter::default()).unwrap();
    assert_eq!(runs.len(), 6, "each run once");
}
