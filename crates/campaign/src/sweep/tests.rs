use super::*;
use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::EndpointReport;
use landspeed_plan::sweep::{Order, PLAN_VERSION};

fn scratch(name: &str) -> Archive {
    let d = std::env::temp_dir().join(format!("landspeed-campaign-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    Archive::open(&d.join("a.db")).unwrap()
}

/// Two windows × one stream count × two repetitions: four cells.
fn plan() -> SweepPlan {
    SweepPlan {
        version: PLAN_VERSION,
        host: "192.0.2.7".into(),
        port: 5201,
        windows_bytes: vec![65536, 262144],
        streams: vec![2],
        directions: vec![Direction::Forward],
        repeat: 2,
        time_s: 0.5,
        order: Order::Sequential,
        seed: 1,
        cell: None,
        run_args: vec![],
        command_line: String::new(),
    }
}

fn base() -> ClientOptions {
    ClientOptions::new("192.0.2.7", 5201, TestSpec::default().validated().unwrap())
}

/// A test that "ran" with the cell's own spec (the archive files it under the cell by that spec),
/// at a throughput of the window in bits.
fn fake(o: &ClientOptions) -> RunResult {
    let e = EndpointReport::default();
    let mut r = assemble(&Inputs {
        spec: o.spec.spec(),
        context: RunContext {
            host: o.host.clone(),
            port: o.port,
            local_address: "192.0.2.1:40000".into(),
            remote_address: "192.0.2.7:5201".into(),
            family: "ipv4".into(),
            threads: 1,
            cpus: None,
            bind: None,
            started_unix_s: 1.0,
            interrupted: false,
            protocol: "landspeed".into(),
            scheduled_start_unix_s: None,
            foreign_peer: false,
            served_here: false,
        },
        client: &e,
        server: &e,
        client_samples: &[],
        server_samples: &[],
    });
    r.summary.throughput_bps = o.spec.window_bytes.unwrap() as f64 * 8.0;
    r
}

fn refused() -> ClientError {
    ClientError::OutOfOrder { step: "a test" }
}

#[test]
fn cells_are_stored_as_they_end_and_a_resume_runs_only_what_is_missing() {
    let archive = scratch("resume");
    let plan = plan();
    let id = create(&archive, &plan, "2026-11-23T00:00:00Z").unwrap();
    let sweep = Sweep {
        archive: &archive,
        id,
        plan: &plan,
        tag: Some("t".into()),
    };
    let todo = sweep.todo(&base()).unwrap();
    assert_eq!(todo.cells.len(), 4);
    assert!(todo
        .cells
        .iter()
        .all(|(c, o)| o.spec.window_bytes == Some(c.window_bytes)
            && o.spec.streams == 2
            && o.spec.end == EndCondition::Time(Duration::from_millis(500))));
    // The second cell fails, and again when it is tried once more at the end: not stored, the sweep
    // is incomplete.
    let mut calls = 0;
    let mut events = vec![];
    let out = sweep
        .run(
            &todo,
            &AtomicBool::new(false),
            &mut |o| {
                calls += 1;
                if calls == 2 || calls == 5 {
                    Err(refused())
                } else {
                    Ok(fake(o))
                }
            },
            &mut |e| {
                if let SweepEvent::Finished {
                    position, outcome, ..
                } = e
                {
                    events.push((position, outcome.clone()))
                }
            },
        )
        .unwrap();
    assert_eq!(
        (out.status, out.failed, out.retried),
        (SweepStatus::Incomplete, 1, 1)
    );
    assert_eq!(events.len(), 5);
    assert_eq!(events[4].0, 4, "the second try does not count as a further cell");
    assert!(matches!(&events[1].1, CellOutcome::Failed { why } if why.contains("a test")));
    // Cell 3 repeats cell 1 (same window): its running median is over both runs.
    let CellOutcome::Stored {
        cell_runs,
        cell_median_bps,
        ..
    } = &events[2].1
    else {
        panic!("{events:?}")
    };
    assert_eq!((*cell_runs, *cell_median_bps), (2, Some(65536.0 * 8.0)));
    assert_eq!(report(&archive, id).unwrap().status, "incomplete");
    // Resumed: only the failed cell runs, counted after the three stored.
    let todo = sweep.todo(&base()).unwrap();
    assert_eq!((todo.done.len(), todo.cells.len()), (3, 1));
    let mut positions = vec![];
    let out = sweep
        .run(&todo, &AtomicBool::new(false), &mut |o| Ok(fake(o)), &mut |e| {
            if let SweepEvent::Finished { position, total, .. } = e {
                positions.push((position, total))
            }
        })
        .unwrap();
    assert_eq!(out.status, SweepStatus::Complete);
    assert_eq!(positions, [(4, 4)]);
    let r = report(&archive, id).unwrap();
    assert_eq!((r.status.as_str(), r.summary.runs_done), ("complete", 4));
}

#[test]
fn a_cell_that_failed_is_tried_again_at_the_end_and_stored_once() {
    let archive = scratch("retry");
    let plan = plan();
    let id = create(&archive, &plan, "2026-11-23T00:00:00Z").unwrap();
    let sweep = Sweep {
        archive: &archive,
        id,
        plan: &plan,
        tag: None,
    };
    let todo = sweep.todo(&base()).unwrap();
    // The server went away during the second cell and was back for the third.
    let (mut calls, mut order, mut retrying) = (0, vec![], None);
    let out = sweep
        .run(
            &todo,
            &AtomicBool::new(false),
            &mut |o| {
                calls += 1;
                order.push(o.spec.window_bytes);
                if calls == 2 {
                    Err(refused())
                } else {
                    Ok(fake(o))
                }
            },
            &mut |e| {
                if let SweepEvent::Retrying { cells } = e {
                    retrying = Some(cells)
                }
            },
        )
        .unwrap();
    assert_eq!(
        (out.status, out.failed, out.retried),
        (SweepStatus::Complete, 0, 1)
    );
    assert_eq!(retrying, Some(1));
    assert_eq!(calls, 5);
    assert_eq!(order[4], order[1], "the failed cell, once more, last");
    // Nothing lost, nothing doubled: every cell stored once, and a resume has nothing to run.
    let stored = finished(&archive, id).unwrap();
    assert_eq!(stored.len(), 4);
    let keys: HashSet<CellKey> = stored.iter().map(|c| c.0).collect();
    assert_eq!(keys.len(), 4);
    assert!(sweep.todo(&base()).unwrap().cells.is_empty());
}

#[test]
fn three_failures_in_a_row_stop_the_sweep_and_an_interrupt_stops_it_at_once() {
    let archive = scratch("stop");
    let plan = SweepPlan { repeat: 3, ..plan() };
    let id = create(&archive, &plan, "2026-11-23T00:00:00Z").unwrap();
    let sweep = Sweep {
        archive: &archive,
        id,
        plan: &plan,
        tag: None,
    };
    let todo = sweep.todo(&base()).unwrap();
    let (mut calls, mut stop_heard) = (0, false);
    let out = sweep
        .run(
            &todo,
            &AtomicBool::new(false),
            &mut |_| {
                calls += 1;
                Err(refused())
            },
            &mut |e| stop_heard |= matches!(e, SweepEvent::TooManyFailures),
        )
        .unwrap();
    assert_eq!((calls, out.failed, out.status), (3, 3, SweepStatus::Incomplete));
    assert!(stop_heard);
    // Interrupted during the first cell: nothing stored, status says so.
    let stop = AtomicBool::new(false);
    let out = sweep
        .run(
            &todo,
            &stop,
            &mut |o| {
                stop.store(true, Relaxed);
                Ok(fake(o))
            },
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(out.status, SweepStatus::Interrupted);
    assert_eq!(report(&archive, id).unwrap().summary.runs_done, 0);
    assert_eq!(report(&archive, id).unwrap().status, "interrupted");
}

#[test]
fn a_cell_outside_the_limits_stops_the_sweep_before_its_first_run() {
    let archive = scratch("badcell");
    let plan = SweepPlan {
        windows_bytes: vec![65536, u64::MAX],
        ..plan()
    };
    let id = create(&archive, &plan, "2026-11-23T00:00:00Z").unwrap();
    let sweep = Sweep {
        archive: &archive,
        id,
        plan: &plan,
        tag: None,
    };
    assert!(matches!(
        sweep.todo(&base()),
        Err(SweepError::Cell(ConfigError::Window(_)))
    ));
}

#[test]
fn an_unknown_stored_direction_is_an_error_not_forward_and_a_missing_sweep_is_named() {
    assert_eq!(stored_direction("reverse"), Some(Direction::Reverse));
    assert_eq!(stored_direction("bidir"), Some(Direction::Bidir));
    assert_eq!(stored_direction("sideways"), None);
    let archive = scratch("direction");
    let id = create(&archive, &plan(), "2026-11-23T00:00:00Z").unwrap();
    assert!(finished(&archive, id).unwrap().is_empty());
    assert!(matches!(
        report(&archive, 99),
        Err(SweepError::NoSweep { id: 99, .. })
    ));
}
