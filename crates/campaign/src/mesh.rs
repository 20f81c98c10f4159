//! Running a mesh plan: check every host (welcome and clock) in parallel, agree one start instant on the
//! controller's clock, order every test from its sending host with that instant converted to the host's
//! clock, and collect the results as they come, one thread per test. A host that cannot be checked, or
//! that fails while the plan runs, fails only the tests that involve it; the others complete. Every wait
//! is bounded by the tests' own durations. Output and archiving are the caller's (`MeshObserver`).

use landspeed_core::mesh::plan::{host_port, PlannedTest};
use landspeed_core::mesh::{HostInfo, TestOutcome};
use landspeed_core::protocol::control::result_wait;
use landspeed_core::protocol::{ControlOrder, Key};
use landspeed_net::controller::{connect_host, HostCheck, CLOCK_PROBES};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

/// What the caller sees while a plan runs.
pub trait MeshObserver {
    fn host_checked(&mut self, host: &HostInfo);
    /// Tests are being ordered to start at `t0_unix_s` (controller clock; None: one after another).
    fn starting(&mut self, t0_unix_s: Option<f64>, tests: usize);
    /// A test finished or failed; the answer is its archive id, when the caller stored it.
    fn test_done(&mut self, outcome: &TestOutcome) -> Option<i64>;
}

pub struct MeshOptions {
    /// The key the sending hosts require (`--auth`).
    pub key: Option<Key>,
    /// Connect and per-message timeout for the control connections.
    pub timeout: Duration,
    pub concurrent: bool,
    /// Checks to agreed start.
    pub start_delay: Duration,
}

fn unix_s(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Checks every host at once.
fn check_hosts(hosts: &BTreeMap<String, String>, o: &MeshOptions) -> Vec<(HostInfo, Option<HostCheck>)> {
    let handles: Vec<_> = hosts
        .iter()
        .map(|(name, addr)| {
            let (name, addr, key, timeout) = (name.clone(), addr.clone(), o.key.clone(), o.timeout);
            std::thread::spawn(move || {
                let checked = host_port(&addr).and_then(|(h, p)| {
                    connect_host(&h, p, key.as_ref(), timeout, CLOCK_PROBES).map_err(|e| e.to_string())
                });
                let mut info = HostInfo {
                    name,
                    address: addr,
                    software: None,
                    clock: None,
                    error: None,
                };
                match checked {
                    Ok(c) => {
                        info.software = Some(c.check.software.clone());
                        info.clock = Some(c.check.clock);
                        (info, Some(c.check.clone()))
                    }
                    Err(e) => {
                        info.error = Some(e);
                        (info, None)
                    }
                }
            })
        })
        .collect();
    handles.into_iter().filter_map(|h| h.join().ok()).collect()
}

/// One ordered test, start to result.
fn order_one(
    t: &PlannedTest,
    from_addr: &str,
    to_addr: &str,
    start_at_ns: Option<u64>,
    o: &MeshOptions,
) -> Result<landspeed_core::result::RunResult, String> {
    let (fh, fp) = host_port(from_addr)?;
    let (th, tp) = host_port(to_addr)?;
    let conn = connect_host(&fh, fp, o.key.as_ref(), o.timeout, 1).map_err(|e| format!("{}: {e}", t.from))?;
    let order = ControlOrder {
        host: th,
        port: tp,
        spec: t.spec.spec().clone(),
        start_at_unix_ns: start_at_ns,
    };
    conn.order(order, o.start_delay + result_wait(&t.spec))
        .map_err(|e| format!("{}: {e}", t.from))
}

/// Runs the plan's tests; returns the hosts as checked, every test's outcome (in plan order) and the
/// agreed start (controller clock, Unix seconds).
pub fn run_plan(
    hosts: &BTreeMap<String, String>,
    tests: &[PlannedTest],
    o: &MeshOptions,
    obs: &mut dyn MeshObserver,
) -> (Vec<HostInfo>, Vec<TestOutcome>, f64) {
    let checked = check_hosts(hosts, o);
    for (h, _) in &checked {
        obs.host_checked(h);
    }
    let by_name: BTreeMap<&str, &(HostInfo, Option<HostCheck>)> =
        checked.iter().map(|c| (c.0.name.as_str(), c)).collect();
    // A test whose hosts did not pass the check fails now, with the reason.
    let precheck = |t: &PlannedTest| -> Result<i64, String> {
        for n in [&t.from, &t.to] {
            if let Some((info, None)) = by_name.get(n.as_str()).map(|c| (&c.0, &c.1)) {
                return Err(format!(
                    "host {n} failed its check: {}",
                    info.error.as_deref().unwrap_or("?")
                ));
            }
        }
        let from = by_name.get(t.from.as_str()).and_then(|c| c.1.as_ref());
        match from {
            Some(c) if !c.control => Err(format!(
                "host {} does not take third-party orders (serve --allow-control with --auth-keys)",
                t.from
            )),
            Some(c) => Ok(c.clock.offset_ns),
            None => Err(format!("host {} was not checked", t.from)),
        }
    };
    let mut outcomes: Vec<Option<TestOutcome>> = vec![None; tests.len()];
    let done = |obs: &mut dyn MeshObserver, mut out: TestOutcome, slot: &mut Option<TestOutcome>| {
        out.run_id = obs.test_done(&out);
        *slot = Some(out);
    };
    let t0 = if o.concurrent {
        let t0 = SystemTime::now() + o.start_delay;
        obs.starting(Some(unix_s(t0)), tests.len());
        let (tx, rx) = mpsc::channel();
        let mut running = 0;
        for t in tests {
            match precheck(t) {
                Err(e) => done(
                    obs,
                    TestOutcome {
                        test: t.clone(),
                        result: Err(e),
                        from_offset_ns: 0,
                        run_id: None,
                    },
                    &mut outcomes[t.index],
                ),
                Ok(offset) => {
                    let at = unix_s(t0) * 1e9 + offset as f64;
                    let (t, tx) = (t.clone(), tx.clone());
                    let (fa, ta) = (hosts[&t.from].clone(), hosts[&t.to].clone());
                    let mo = MeshOptions {
                        key: o.key.clone(),
                        timeout: o.timeout,
                        concurrent: true,
                        start_delay: o.start_delay,
                    };
                    running += 1;
                    std::thread::spawn(move || {
                        let result = order_one(&t, &fa, &ta, Some(at as u64), &mo);
                        let _ = tx.send(TestOutcome {
                            test: t,
                            result,
                            from_offset_ns: offset,
                            run_id: None,
                        });
                    });
                }
            }
        }
        drop(tx);
        for _ in 0..running {
            let Ok(out) = rx.recv() else { break };
            let i = out.test.index;
            done(obs, out, &mut outcomes[i]);
        }
        unix_s(t0)
    } else {
        obs.starting(None, tests.len());
        let t0 = unix_s(SystemTime::now());
        for t in tests {
            let (result, offset) = match precheck(t) {
                Err(e) => (Err(e), 0),
                Ok(offset) => (order_one(t, &hosts[&t.from], &hosts[&t.to], None, o), offset),
            };
            done(
                obs,
                TestOutcome {
                    test: t.clone(),
                    result,
                    from_offset_ns: offset,
                    run_id: None,
                },
                &mut outcomes[t.index],
            );
        }
        t0
    };
    let outcomes = outcomes
        .into_iter()
        .zip(tests)
        .map(|(o, t)| {
            o.unwrap_or_else(|| TestOutcome {
                test: t.clone(),
                result: Err("no result (the thread running it ended)".into()),
                from_offset_ns: 0,
                run_id: None,
            })
        })
        .collect();
    (checked.into_iter().map(|c| c.0).collect(), outcomes, t0)
}
