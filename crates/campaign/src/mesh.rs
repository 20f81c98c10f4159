//! Running a mesh plan: check every host (welcome and clock) in parallel, agree one start instant on the
//! controller's clock, order every test from its sending host with that instant converted to the host's
//! clock, and collect the results as they come, one thread per test. A host that cannot be checked, or
//! that fails while the plan runs, fails only the tests that involve it; the others complete. Every wait
//! is bounded by the tests' own durations. Output and archiving are the caller's (`MeshObserver`).

use landspeed_net::controller::{connect_host, HostCheck, CLOCK_PROBES};
use landspeed_plan::mesh::plan::{host_port, PlannedTest};
use landspeed_plan::mesh::{HostInfo, TestOutcome};
use landspeed_proto::control::result_wait;
use landspeed_proto::control::{McPart, MulticastOrder};
use landspeed_proto::{ControlOrder, Key};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

/// What the caller sees while a plan runs.
pub trait MeshObserver {
    /// A sending host answered its check (version, clock offset, what it takes).
    fn host_checked(&mut self, host: &HostInfo);
    /// Tests are being ordered to start at `t0_unix_s` (controller clock; None: one after another).
    fn starting(&mut self, t0_unix_s: Option<f64>, tests: usize);
    /// A test finished or failed; the answer is its archive id, when the caller stored it.
    fn test_done(&mut self, outcome: &TestOutcome) -> Option<i64>;
    /// One after another, every test has run once and `tests` of them failed: they run once more now
    /// (their outcomes come through `test_done` again).
    fn retrying(&mut self, _tests: usize) {}
}

/// How a mesh plan is run.
pub struct MeshOptions {
    /// The key the sending hosts require (`--auth`).
    pub key: Option<Key>,
    /// Connect and per-message timeout for the control connections.
    pub timeout: Duration,
    /// Run the plan's tests at once from an agreed start (true), or one after another.
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

/// One ordered test, start to result: ordered from its sending host to its receiving host, or for
/// a multicast entry's part, from the host that sends or receives, to the group.
fn order_one(
    t: &PlannedTest,
    hosts: &BTreeMap<String, String>,
    start_at_ns: Option<u64>,
    key: u64,
    o: &MeshOptions,
) -> Result<landspeed_core::result::RunResult, String> {
    let name = t.ordered_host();
    let (fh, fp) = host_port(&hosts[name])?;
    let ((th, tp), multicast) = match t.multicast {
        Some(m) => {
            let part = if m.send { McPart::Send } else { McPart::Receive };
            let order = MulticastOrder {
                part,
                key,
                ttl: m.ttl,
            };
            ((m.group.ip().to_string(), m.group.port()), Some(order))
        }
        None => (host_port(&hosts[&t.to])?, None),
    };
    let conn = connect_host(&fh, fp, o.key.as_ref(), o.timeout, 1).map_err(|e| format!("{name}: {e}"))?;
    let order = ControlOrder {
        host: th,
        port: tp,
        spec: t.spec.spec().clone(),
        start_at_unix_ns: start_at_ns,
        multicast,
    };
    conn.order(order, o.start_delay + result_wait(&t.spec))
        .map_err(|e| format!("{name}: {e}"))
}

/// A random key for each multicast entry of the plan, which its sender's datagrams carry and its
/// receivers look for (0 for unicast tests, which have none).
fn multicast_keys(tests: &[PlannedTest]) -> BTreeMap<usize, u64> {
    tests
        .iter()
        .filter_map(|t| t.multicast)
        .map(|m| {
            let mut b = [0u8; 8];
            let _ = getrandom::fill(&mut b);
            (m.entry, u64::from_le_bytes(b))
        })
        .collect()
}

fn key_of(keys: &BTreeMap<usize, u64>, t: &PlannedTest) -> u64 {
    t.multicast.and_then(|m| keys.get(&m.entry).copied()).unwrap_or(0)
}

/// The hosts as checked, by name.
struct Checked<'a>(BTreeMap<&'a str, &'a (HostInfo, Option<HostCheck>)>);

impl Checked<'_> {
    /// The ordered host's clock offset, when it passed its check and takes orders.
    fn sender_offset(&self, t: &PlannedTest) -> Option<i64> {
        let c = self.0.get(t.ordered_host())?.1.as_ref()?;
        c.control.then_some(c.clock.offset_ns)
    }

    /// A test whose hosts did not pass the check fails now, with the reason; otherwise the sending
    /// host's clock offset.
    fn precheck(&self, t: &PlannedTest) -> Result<i64, String> {
        for n in [&t.from, &t.to] {
            if let Some((info, None)) = self.0.get(n.as_str()).map(|c| (&c.0, &c.1)) {
                return Err(format!(
                    "host {n} failed its check: {}",
                    info.error.as_deref().unwrap_or("?")
                ));
            }
        }
        let ordered = t.ordered_host();
        match self.0.get(ordered).and_then(|c| c.1.as_ref()) {
            Some(c) if !c.control => Err(format!(
                "host {ordered} does not take third-party orders (its server must allow control and require keys)"
            )),
            Some(c) => Ok(c.clock.offset_ns),
            None => Err(format!("host {ordered} was not checked")),
        }
    }
}

/// A test's outcome before the observer has stored it.
fn outcome(
    t: &PlannedTest,
    result: Result<landspeed_core::result::RunResult, String>,
    offset: i64,
) -> TestOutcome {
    TestOutcome {
        test: t.clone(),
        result,
        from_offset_ns: offset,
        run_id: None,
    }
}

/// Where the outcomes go: the observer hears each (and answers its archive id), in plan order slots.
struct Outcomes<'a> {
    obs: &'a mut dyn MeshObserver,
    slots: Vec<Option<TestOutcome>>,
}

impl Outcomes<'_> {
    fn done(&mut self, mut out: TestOutcome) {
        out.run_id = self.obs.test_done(&out);
        let i = out.test.index;
        self.slots[i] = Some(out);
    }

    /// Every test's outcome in plan order; one whose thread ended without a word says so.
    fn into_list(self, tests: &[PlannedTest]) -> Vec<TestOutcome> {
        self.slots
            .into_iter()
            .zip(tests)
            .map(|(o, t)| {
                o.unwrap_or_else(|| outcome(t, Err("no result (the thread running it ended)".into()), 0))
            })
            .collect()
    }
}

/// Every test at once, each ordered to start at the agreed instant on its sending host's clock;
/// returns that instant (controller clock, Unix seconds).
fn run_together(
    hosts: &BTreeMap<String, String>,
    tests: &[PlannedTest],
    checked: &Checked,
    o: &MeshOptions,
    out: &mut Outcomes,
) -> f64 {
    let t0 = SystemTime::now() + o.start_delay;
    out.obs.starting(Some(unix_s(t0)), tests.len());
    let (tx, rx) = mpsc::channel();
    let mut running = 0;
    let keys = multicast_keys(tests);
    for t in tests {
        let offset = match checked.precheck(t) {
            Err(e) => {
                out.done(outcome(t, Err(e), 0));
                continue;
            }
            Ok(offset) => offset,
        };
        let at = unix_s(t0) * 1e9 + offset as f64;
        let (t, tx, hosts, key) = (t.clone(), tx.clone(), hosts.clone(), key_of(&keys, t));
        let mo = MeshOptions {
            key: o.key.clone(),
            timeout: o.timeout,
            concurrent: true,
            start_delay: o.start_delay,
        };
        running += 1;
        std::thread::spawn(move || {
            let result = order_one(&t, &hosts, Some(at as u64), key, &mo);
            let _ = tx.send(outcome(&t, result, offset));
        });
    }
    drop(tx);
    for _ in 0..running {
        let Ok(o) = rx.recv() else { break };
        out.done(o);
    }
    unix_s(t0)
}

/// One test after another, each started when ready, then once more each that failed while its sending
/// host takes orders (its receiver restarted, a path down for a while); returns when the first
/// started.
/// A concurrent plan's tests are not tried again: alone, a test would not measure what it did beside
/// the others.
fn run_in_turn(
    hosts: &BTreeMap<String, String>,
    tests: &[PlannedTest],
    checked: &Checked,
    o: &MeshOptions,
    out: &mut Outcomes,
) -> f64 {
    out.obs.starting(None, tests.len());
    let t0 = unix_s(SystemTime::now());
    let mut failed = vec![];
    for t in tests {
        let (result, offset) = match checked.precheck(t) {
            Err(e) => (Err(e), 0),
            Ok(offset) => (order_one(t, hosts, None, 0, o), offset),
        };
        // Worth a second try when the sending host takes orders (its receiver may be back).
        if let (Err(_), Some(offset)) = (&result, checked.sender_offset(t)) {
            failed.push((t, offset));
        }
        out.done(outcome(t, result, offset));
    }
    if !failed.is_empty() {
        out.obs.retrying(failed.len());
        for (t, offset) in failed {
            let r = order_one(t, hosts, None, 0, o);
            out.done(outcome(t, r, offset));
        }
    }
    t0
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
    let by_name = Checked(checked.iter().map(|c| (c.0.name.as_str(), c)).collect());
    let mut out = Outcomes {
        obs,
        slots: vec![None; tests.len()],
    };
    let t0 = if o.concurrent {
        run_together(hosts, tests, &by_name, o, &mut out)
    } else {
        run_in_turn(hosts, tests, &by_name, o, &mut out)
    };
    let outcomes = out.into_list(tests);
    (checked.into_iter().map(|c| c.0).collect(), outcomes, t0)
}
