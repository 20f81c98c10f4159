use super::*;
use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::EndpointReport;

fn result(host: &str, started: f64, streams: u32, window: Option<u64>, bps: f64) -> RunResult {
    let spec = TestSpec {
        streams,
        window_bytes: window,
        ..TestSpec::default()
    };
    let e = EndpointReport::default();
    let mut r = assemble(&Inputs {
        spec: &spec,
        context: RunContext::example(host, started),
        client: &e,
        server: &e,
        client_samples: &[],
        server_samples: &[],
    });
    r.summary.throughput_bps = bps;
    r
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("landspeed-archive-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.join("sub").join("archive.db")
}

#[test]
fn save_get_list_and_filter() {
    let a = Archive::open_in_memory().unwrap();
    assert_eq!(a.version().unwrap(), SCHEMA_VERSION);
    let r1 = result("alpha", 1000.0, 1, None, 1e9);
    let mut r2 = result("beta", 2000.0, 4, Some(1 << 20), 2e9);
    r2.config.spec.mptcp = true;
    let id1 = a.save(&r1, &RunMeta::default()).unwrap();
    let id2 = a
        .save(
            &r2,
            &RunMeta {
                tag: Some("lsr".into()),
                sweep: None,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a.get(id1).unwrap().unwrap(), r1, "the whole result comes back");
    assert_eq!(a.get(999).unwrap(), None);
    let all = a.list(&Filter::default()).unwrap();
    assert_eq!(
        all.iter().map(|r| r.id).collect::<Vec<_>>(),
        [id2, id1],
        "newest first"
    );
    assert_eq!(all[0].window_bytes, Some(1 << 20));
    assert_eq!((all[0].streams, all[0].transport.as_str()), (4, "mptcp"));
    assert_eq!(all[1].transport, "tcp");
    let beta = a
        .list(&Filter {
            host: Some("beta".into()),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(beta.len(), 1);
    let tagged = a
        .list(&Filter {
            tag: Some("lsr".into()),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(tagged[0].id, id2);
    let early = a
        .list(&Filter {
            until_unix_s: Some(1500.0),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(early[0].id, id1);
    let csv = to_csv(&all);
    assert_eq!(csv.lines().count(), 3);
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .contains(",beta,landspeed,mptcp,forward,4,1048576,2000000000,"),
        "{csv}"
    );
}

#[test]
fn sweep_cells_are_unique() {
    let a = Archive::open_in_memory().unwrap();
    let s = a
        .create_sweep("alpha", "2026-11-22T00:00:00Z", "{\"windows\":[1]}")
        .unwrap();
    let r = result("alpha", 1.0, 2, Some(65536), 1e8);
    let meta = RunMeta {
        tag: None,
        sweep: Some((s, 0)),
        ..Default::default()
    };
    a.save(&r, &meta).unwrap();
    // The same cell and repetition again: refused, so a resumed sweep can never count a cell twice.
    assert!(a.save(&r, &meta).is_err());
    a.save(
        &r,
        &RunMeta {
            tag: None,
            sweep: Some((s, 1)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        a.list(&Filter {
            sweep_id: Some(s),
            ..Filter::default()
        })
        .unwrap()
        .len(),
        2
    );
    assert_eq!(a.sweep_plan(s).unwrap().as_deref(), Some("{\"windows\":[1]}"));
    a.set_sweep_status(s, "complete").unwrap();
    assert_eq!(a.sweep(s).unwrap().unwrap().status, "complete");
    assert!(a.sweep(s + 1).unwrap().is_none());
    let runs = a.sweep_runs(s).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (
            runs[1].window_bytes,
            runs[1].streams,
            runs[1].direction.as_str(),
            runs[1].repeat
        ),
        (Some(65536), 2, "forward", 1)
    );
    assert_eq!(runs[1].throughput_bps, 1e8);
    let listed = a.list_sweeps(10).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].0.id, listed[0].0.status.as_str(), listed[0].1),
        (s, "complete", 2)
    );
}

#[test]
fn a_first_version_archive_is_migrated() {
    let path = temp("migrate");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut old = result("old-host", 5.0, 2, Some(262_144), 5e8);
    // A request/response run: its transactions a second come back from its JSON too.
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
        // Written as landspeed's first archive version wrote it.
        let c = Connection::open(&path).unwrap();
        c.execute_batch(schema::MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.execute(
            "INSERT INTO runs (started_unix_s, started_utc, host, port, protocol, direction, streams,
                throughput_bps, bytes_received, result_json) VALUES (5.0, 'x', 'old-host', 5201, 'landspeed',
                'forward', 2, 5e8, 0, ?1)",
            [serde_json::to_string(&old).unwrap()],
        )
        .unwrap();
    }
    let a = Archive::open(&path).unwrap();
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
    // New columns work on the migrated file.
    a.save(
        &old,
        &RunMeta {
            tag: Some("t".into()),
            sweep: None,
            ..Default::default()
        },
    )
    .unwrap();
    let rows = a.list(&Filter::default()).unwrap();
    assert!(
        rows.iter().all(|r| r.transactions_per_s == Some(1234.5)),
        "{rows:?}"
    );
    assert!(to_csv(&rows)
        .lines()
        .nth(1)
        .unwrap()
        .ends_with(",1234.5,2.5,4000000"));
    drop(a);
    // Opening again is a no-op; a newer file is refused instead of damaged.
    let a = Archive::open(&path).unwrap();
    assert_eq!(a.version().unwrap(), SCHEMA_VERSION);
    drop(a);
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let e = Archive::open(&path).err().expect("too new");
    assert!(e.to_string().contains("upgrade landspeed"), "{e}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

#[test]
fn default_path_follows_the_environment() {
    // Only checks the shape: tests must not change the process environment under each other.
    let p = default_path();
    assert!(p.ends_with("archive.db") || std::env::var_os("LANDSPEED_DB").is_some());
}

#[test]
fn campaign_runs_are_stored_as_they_arrive_and_the_report_at_the_end() {
    let a = Archive::open_in_memory().unwrap();
    let c = a
        .create_campaign("four hosts", "2026-11-23T00:00:00Z", "{\"name\":\"four hosts\"}")
        .unwrap();
    assert_eq!(a.campaign(c).unwrap().unwrap().status, "running");
    for (from, to) in [("a", "b"), ("a", "c")] {
        a.save(
            &result(to, 1.0, 1, None, 1e9),
            &RunMeta {
                campaign: Some((c, from.into())),
                ..Default::default()
            },
        )
        .unwrap();
    }
    // A run outside the campaign is not one of its runs.
    a.save(&result("b", 2.0, 1, None, 1e9), &RunMeta::default())
        .unwrap();
    let runs = a.campaign_runs(c).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[1].1.as_str(), runs[1].2.as_str()), ("a", "c"));
    a.finish_campaign(c, "{\"schema\":\"landspeed/mesh/1\"}", "complete")
        .unwrap();
    let row = a.campaign(c).unwrap().unwrap();
    assert_eq!(row.status, "complete");
    assert_eq!(
        row.report_json.as_deref(),
        Some("{\"schema\":\"landspeed/mesh/1\"}")
    );
    assert!(a.campaign(c + 1).unwrap().is_none());
}

mod postgres_store;

#[test]
fn a_save_waits_for_another_writer_and_both_runs_are_stored() {
    let path = temp("busy");
    let a = Archive::open(&path).unwrap();
    a.save(&result("h", 1.0, 1, None, 1e9), &RunMeta::default())
        .unwrap();
    // Another process's writer holds the write lock; it commits its own run after 300 ms in which
    // the save is seen to wait.
    let mut other = Connection::open(&path).unwrap();
    let tx = other
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("UPDATE runs SET tag = 'other' WHERE id = 1", [])
        .unwrap();
    let (sent, held) = std::sync::mpsc::channel();
    let saver = std::thread::spawn(move || {
        sent.send(()).unwrap();
        a.save(&result("h", 2.0, 1, None, 2e9), &RunMeta::default())
            .map(|id| (id, a))
    });
    held.recv().unwrap();
    // While the lock is held the save cannot end: not in 300 ms (it waits, it does not fail).
    let deadline = std::time::Instant::now() + Duration::from_millis(300);
    while std::time::Instant::now() < deadline {
        assert!(
            !saver.is_finished(),
            "the save ended while another writer held the lock"
        );
        std::thread::park_timeout(Duration::from_millis(10));
    }
    tx.commit().unwrap();
    let (id, a) = saver
        .join()
        .unwrap()
        .expect("waited for the lock instead of failing");
    assert_eq!(id, 2);
    let rows = a.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().any(|r| r.tag.as_deref() == Some("other")));
}

#[test]
fn a_file_that_is_not_an_archive_is_refused_and_left_untouched() {
    let path = temp("damaged");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let junk: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, &junk).unwrap();
    let err = Archive::open(&path).err().expect("refused").to_string();
    assert!(err.contains("is not a landspeed archive"), "{err}");
    assert!(
        err.contains("left untouched") && err.contains("move it aside"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), junk, "not a byte changed");
    assert!(!path.with_extension("db-wal").exists());
}

#[test]
fn history_filters_by_what_held_the_rate_back() {
    use landspeed_core::limit::{Confidence, Limit, LimitKind};
    let a = Archive::open_in_memory().unwrap();
    let plain = result("alpha", 1000.0, 1, None, 1e9);
    let mut cpu = result("alpha", 2000.0, 1, None, 1e9);
    let said = |kind| Limit::new(kind, Confidence::High, String::new(), None, vec![]);
    cpu.directions[0].limits = vec![said(LimitKind::SenderCpu), said(LimitKind::ReceiverCpu)];
    let (id1, id2) = (
        a.save(&plain, &RunMeta::default()).unwrap(),
        a.save(&cpu, &RunMeta::default()).unwrap(),
    );
    let by = |k| {
        a.list(&Filter {
            limited_by: Some(k),
            ..Filter::default()
        })
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect::<Vec<_>>()
    };
    assert_eq!(by(LimitKind::ReceiverCpu), [id2]);
    assert_eq!(by(LimitKind::SenderCpu), [id2]);
    assert_eq!(by(LimitKind::Unknown), [id1], "{:?}", plain.directions[0].limits);
    assert!(by(LimitKind::PathCapacity).is_empty());
    let rows = a.list(&Filter::default()).unwrap();
    assert_eq!(rows[0].limited_by, ["sender_cpu", "receiver_cpu"]);
    assert!(to_csv(&rows)
        .lines()
        .nth(1)
        .unwrap()
        .contains(",sender_cpu receiver_cpu,"));
    assert_eq!(rows[0].transactions_per_s, None, "a bulk test has none");
}
