//! A hung test must not hang the suite. Every test's claim on the machine (`share`, `alone`) is held
//! here with its start; one test that never ends (a peer's process that hangs, a wait with no
//! bound) would otherwise keep every later test waiting behind it until CI's deadline kills the
//! run, with nothing to say which test it was (CI's log ends in a column of "has been running for
//! over 60 seconds"). The watchdog names it: a claim held `STUCK` (ten times the longest test's
//! claim in a full run) gets the test's name, every claim's age and the suite's child processes
//! printed, and those processes killed, so that a test waiting on one of them fails with its own
//! words and its guards clean up; a claim still held `GRACE` later ends the suite (exit 101).
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

const STUCK: Duration = Duration::from_secs(600);
const GRACE: Duration = Duration::from_secs(120);

/// The claims held now: an id, the test's name, since when.
static HELD: Mutex<Vec<(u64, String, Instant)>> = Mutex::new(Vec::new());

/// A test's claim, watched until dropped.
pub struct Held(u64);

impl Held {
    pub fn new(name: &str) -> Held {
        static START: Once = Once::new();
        START.call_once(|| {
            std::thread::spawn(watch);
        });
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        held().push((id, name.to_string(), Instant::now()));
        Held(id)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        held().retain(|h| h.0 != self.0);
    }
}

fn held() -> std::sync::MutexGuard<'static, Vec<(u64, String, Instant)>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

fn watch() {
    let mut killed_for = None;
    loop {
        std::thread::sleep(Duration::from_secs(10));
        let Some((id, name, age)) = oldest() else { continue };
        if age > STUCK + GRACE {
            eprintln!("watchdog: {name} still holds the machine after {age:?}; the suite ends here");
            report();
            std::process::exit(101);
        }
        if age > STUCK && killed_for != Some(id) {
            eprintln!("watchdog: {name} has held the machine for {age:?}: hung; its processes are killed");
            report();
            for (pid, _) in descendants() {
                // SAFETY: kill(2) on a process this test binary started (or one of theirs).
                unsafe { super::libc_kill(pid, 9) };
            }
            killed_for = Some(id);
        }
    }
}

fn oldest() -> Option<(u64, String, Duration)> {
    let h = held();
    let (id, name, since) = h.iter().min_by_key(|h| h.2)?;
    Some((*id, name.clone(), since.elapsed()))
}

/// Every claim's age and every process this test binary started, on stderr.
fn report() {
    for (_, name, since) in held().iter() {
        eprintln!(
            "watchdog:   held {:>6.0} s  {name}",
            since.elapsed().as_secs_f64()
        );
    }
    for (pid, cmd) in descendants() {
        eprintln!("watchdog:   process {pid}: {cmd}");
    }
}

/// The processes under this one (children, theirs...), with their command lines.
fn descendants() -> Vec<(i32, String)> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![std::process::id() as i32];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(pid, _)| *pid));
        i += 1;
    }
    found[1..]
        .iter()
        .map(|&pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (pid, cmd.trim().to_string())
        })
        .collect()
}

#[test]
fn the_watchdog_finds_the_processes_the_suite_started() {
    let mut c = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = c.id() as i32;
    // Its command line reads "sleep 30" once its exec is done; before, it may read empty (a CI run).
    let execd = || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep"));
    assert!(super::wait_until(std::time::Duration::from_secs(10), execd));
    let found = descendants();
    let _ = c.kill();
    let _ = c.wait();
    assert!(found.contains(&(pid, "sleep 30".to_string())), "{found:?}");
    let named = |name: &str| held().iter().any(|h| h.1 == name);
    let claim = Held::new("the watchdog's own test");
    assert!(named("the watchdog's own test"));
    drop(claim);
    assert!(!named("the watchdog's own test"));
}
