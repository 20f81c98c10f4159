//! Test helpers: a `landspeed serve` child process on a free loopback port that is killed when the test
//! ends (pass or fail), and a way to run `landspeed run` against it and parse its JSON.
#![allow(dead_code)]

pub mod capture;
pub mod chain;
mod failures;
pub mod lan;
pub mod wan;
mod watchdog;

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A tool a test needs is missing: outside CI the test is skipped (with a word), in CI it fails.
pub fn missing<T>(what: &str) -> Option<T> {
    assert!(std::env::var_os("CI").is_none(), "CI is set and {what}");
    eprintln!("skipping: {what}");
    None
}

/// The binary under test. Naming it claims a share of the machine for the rest of the test (see
/// `alone`): every landspeed process a test starts is named here.
pub fn bin() -> &'static str {
    share();
    env!("CARGO_BIN_EXE_landspeed")
}

/// The tests in this binary share the machine's CPUs: at most one test per CPU runs at a time (a
/// slot). libtest starts more threads than that (RUST_TEST_THREADS in .cargo/config.toml), because a
/// test that waits for a lock (`take`: one emulated path at a time, one Prometheus port...) gives its
/// slot back while it waits: the thread waits, and another test uses the CPU. A test whose assertions
/// are about time itself (the emulator's punctuality) takes the machine alone (`alone`): it waits
/// until no test runs or waits for a lock, and no test starts until it ends.
struct Machine {
    /// Tests holding a slot.
    running: usize,
    /// Tests that gave their slot back to wait for a lock.
    waiting_for_lock: usize,
    /// Tests that hold their lock and wait for a slot again: they get one before any new test.
    reentering: usize,
    /// Tests waiting to be alone; while one waits, no new test starts.
    waiting_alone: usize,
    alone: bool,
}

static MACHINE: Mutex<Machine> = Mutex::new(Machine {
    running: 0,
    waiting_for_lock: 0,
    reentering: 0,
    waiting_alone: 0,
    alone: false,
});
static CHANGED: Condvar = Condvar::new();

fn slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Waits on the machine's state until `ready`, then changes it with `then`.
fn when(ready: impl Fn(&Machine) -> bool, then: impl FnOnce(&mut Machine)) {
    let mut m = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    while !ready(&m) {
        m = CHANGED.wait(m).unwrap_or_else(|e| e.into_inner());
    }
    then(&mut m);
    CHANGED.notify_all();
}

/// A test thread's slot, given back when the thread (the test) ends.
struct Slot(Claimed);

impl Drop for Slot {
    fn drop(&mut self) {
        when(|_| true, |m| m.running -= 1);
        self.0.log("shared");
    }
}

/// When a test claimed the machine, and its name (read then: a slot is given back as the thread's
/// locals are destroyed, when the thread can no longer be asked); watched while held.
struct Claimed(std::time::Instant, String, #[allow(dead_code)] watchdog::Held);

/// When the suite's first claim was made (the clock of the claims log).
static SUITE_START: std::sync::LazyLock<std::time::Instant> =
    std::sync::LazyLock::new(std::time::Instant::now);

impl Claimed {
    fn now() -> Claimed {
        std::sync::LazyLock::force(&SUITE_START);
        failures::record_panics();
        let name = std::thread::current().name().unwrap_or("?").to_string();
        let held = watchdog::Held::new(&name);
        Claimed(std::time::Instant::now(), name, held)
    }

    /// With LANDSPEED_TEST_CLAIMS=FILE, appends "shared|alone SECONDS TEST at START" to FILE (START:
    /// when the claim began, seconds after the first test's): from the claim to
    /// the test's end. libtest's own times count the wait for a slot; these do not (a shared claim does
    /// count a later wait for a lock, during which its slot is lent out), so they say which tests hold
    /// the machine longest (where CI's time goes).
    fn log(&self, kind: &str) {
        let Some(path) = std::env::var_os("LANDSPEED_TEST_CLAIMS") else {
            return;
        };
        // Then when the claim began, seconds into the suite: what ran beside what, and the tail.
        let began = self.0.saturating_duration_since(*SUITE_START).as_secs_f64();
        let line = format!(
            "{kind} {:.2} {} at {began:.1}\n",
            self.0.elapsed().as_secs_f64(),
            self.1
        );
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = std::io::Write::write_all(&mut f, line.as_bytes());
        }
    }
}

enum Claim {
    None,
    Shared(#[allow(dead_code)] Slot),
    Alone,
}

thread_local! {
    /// This test thread's claim on the machine.
    static CLAIM: RefCell<Claim> = const { RefCell::new(Claim::None) };
}

/// Claims a slot for this test thread, once (nothing when it holds the machine alone). Threads a test
/// spawns run on its claim: libtest names each test's thread, and a test's helper threads have no
/// name.
pub fn share() {
    if std::thread::current().name().is_none() {
        return;
    }
    CLAIM.with(|c| {
        let mut c = c.borrow_mut();
        if matches!(*c, Claim::None) {
            when(
                |m| !m.alone && m.waiting_alone == 0 && m.reentering == 0 && m.running < slots(),
                |m| m.running += 1,
            );
            *c = Claim::Shared(Slot(Claimed::now()));
        }
    });
}

/// A test's lock. The slot is given back while the test waits for it and taken again (before any new
/// test starts) once it holds it, so a test never holds a slot while it waits and no test waiting to
/// be alone waits on a lock's holder that waits on it.
pub fn take(lock: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    share();
    let shared = CLAIM.with(|c| matches!(*c.borrow(), Claim::Shared(_)));
    if !shared {
        return lock.lock().unwrap_or_else(|e| e.into_inner());
    }
    if let Ok(free) = lock.try_lock() {
        return free;
    }
    when(
        |_| true,
        |m| {
            m.running -= 1;
            m.waiting_for_lock += 1;
        },
    );
    let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    when(
        |_| true,
        |m| {
            m.waiting_for_lock -= 1;
            m.reentering += 1;
        },
    );
    when(
        |m| !m.alone && m.running < slots(),
        |m| {
            m.reentering -= 1;
            m.running += 1;
        },
    );
    guard
}

/// An iperf3 interoperability test takes the machine alone: each compares runs of iperf3's own client
/// and server with landspeed's, byte for byte and line for line, and iperf3's UDP receivers and
/// byte-count endings are what a busy neighbour upsets (a full run with them beside other tests lost
/// 6% of a 100 Mbit/s UDP test and overshot a reverse byte count by 50%).
pub fn one_iperf3_test() -> Alone {
    alone()
}

/// `a` and `b` at once, each on its own thread: a test comparing runs that cannot disturb each other
/// (light traffic, figures masked, their own ports) takes half the time. Both run to their ends; a
/// panic in either is the test's.
pub fn at_once<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    std::thread::scope(|s| {
        let first = s.spawn(a);
        let second = b();
        (
            first.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            second,
        )
    })
}

/// `at_once` when `light` (paced traffic); otherwise `a`, then `b`. Two unpaced TCP tests at once
/// on two CPUs upset iperf 2.1.8's own client (its `--full-duplex` ended once with no report at all).
pub fn at_once_if<A: Send, B: Send>(
    light: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if light {
        at_once(a, b)
    } else {
        let first = a();
        (first, b())
    }
}

/// Whether an iperf 2 client's arguments ask for paced traffic only, one stream: UDP (1 Mbit/s
/// unless -b), a TCP rate (-b) at most 100 Mbit/s, or bounceback's bursts (not back to back, no
/// load beside them). Not with `-P`: iperf 2.1.8 prints a `[SUM]`
/// as its streams' threads meet, and a neighbour moves when they do (a full CI run saw the server's
/// `-e` lines of `--trip-times -P 2 -b 50M` differ with the drop-in's test beside it).
pub fn iperf2_paced(args: &str) -> bool {
    let words: Vec<&str> = args.split_whitespace().collect();
    if words.contains(&"-P") {
        return false;
    }
    let rate = words
        .iter()
        .position(|w| *w == "-b")
        .and_then(|i| words.get(i + 1));
    let modest = |r: &str| {
        r.strip_suffix('M')
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|m| m <= 100)
    };
    // A bounceback moves a few kB a second (its bursts of requests, each answered).
    let period = words
        .iter()
        .position(|w| *w == "--bounceback-period")
        .and_then(|i| words.get(i + 1)?.parse::<f64>().ok());
    let bounceback = words.iter().any(|w| w.starts_with("--bounceback"))
        && !words.iter().any(|w| w.starts_with("--bounceback-congest"))
        && period != Some(0.0);
    match rate {
        Some(r) => modest(r),
        None => words.contains(&"-u") || bounceback,
    }
}

/// The machine for this test alone until the guard drops; called before the test starts anything.
pub struct Alone(Claimed);

pub fn alone() -> Alone {
    CLAIM.with(|c| {
        assert!(
            matches!(*c.borrow(), Claim::None),
            "alone() must come before anything else the test starts"
        );
        *c.borrow_mut() = Claim::Alone;
    });
    when(|_| true, |m| m.waiting_alone += 1);
    when(
        |m| !m.alone && m.running == 0 && m.waiting_for_lock == 0 && m.reentering == 0,
        |m| {
            m.waiting_alone -= 1;
            m.alone = true;
        },
    );
    Alone(Claimed::now())
}

impl Drop for Alone {
    fn drop(&mut self) {
        CLAIM.with(|c| *c.borrow_mut() = Claim::None);
        when(|_| true, |m| m.alone = false);
        self.0.log("alone");
    }
}

pub struct ServerProc {
    pub child: Option<Child>,
    pub port: u16,
    pub lines: mpsc::Receiver<String>,
    /// Its first log line ("listening on ...; TLS certificate sha256:...").
    pub first_line: String,
}

impl ServerProc {
    /// Starts `landspeed serve --bind ADDR -p 0 [extra]` (no --bind when `bind` is empty) and waits for
    /// its "listening on" line.
    pub fn start(bind: &str, extra: &[&str]) -> ServerProc {
        ServerProc::start_env(bind, extra, &[])
    }

    /// `start`, with these environment variables set for the server (the fault injectors).
    pub fn start_env(bind: &str, extra: &[&str], env: &[(&str, &str)]) -> ServerProc {
        let bind_args: Vec<&str> = if bind.is_empty() {
            vec![]
        } else {
            vec!["--bind", bind]
        };
        let mut child = Command::new(bin())
            .args(["serve", "-p", "0"])
            .args(bind_args)
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn landspeed serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Its first line is the listening one, but for `--metrics`'s own line before it.
        let first = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(10)).ok())
            .find(|l| !l.starts_with("landspeed metrics on "));
        let Some(first) = first else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server printed no listening line");
        };
        // The text log says "listening on ADDR:PORT; TLS certificate ..."; --log-json's first event
        // lists the addresses.
        let first_line = first.clone();
        let port = match serde_json::from_str::<serde_json::Value>(&first) {
            Ok(v) => {
                let a = v["addresses"][0].as_str().unwrap_or_default();
                a.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0)
            }
            Err(_) => listening_port(&first),
        };
        ServerProc {
            child: Some(child),
            port,
            lines: rx,
            first_line,
        }
    }

    /// The server process (until `exit` took it).
    pub fn process(&self) -> &Child {
        self.child.as_ref().expect("server still owned")
    }

    /// Waits for the server to exit by itself, at most `timeout`.
    pub fn exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_exit(self.child.take()?, timeout)
    }

    /// Waits for the next log line of the server.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
    fn getrlimit(resource: i32, limit: *mut RLimit) -> i32;
    fn setrlimit(resource: i32, limit: *const RLimit) -> i32;
    fn pipe(fds: *mut i32) -> i32;
}

/// The write end of a pipe whose read end is already closed: every write to it fails with EPIPE,
/// as a program's stdout does under `| head -1` once head has its line.
#[allow(dead_code)]
pub fn pipe_nobody_reads() -> Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [-1i32; 2];
    assert_eq!(unsafe { pipe(fds.as_mut_ptr()) }, 0, "pipe(2)");
    // SAFETY: pipe(2) just returned both descriptors, owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Linux's `struct rlimit` (64-bit).
#[repr(C)]
struct RLimit {
    cur: u64,
    max: u64,
}

/// Raises this process's open-file limit (RLIMIT_NOFILE) to at least `want` where the hard limit
/// allows: a test that holds many connections at once. The soft limit now.
#[allow(dead_code)]
pub fn raise_open_files(want: u64) -> u64 {
    const RLIMIT_NOFILE: i32 = 7;
    let mut r = RLimit { cur: 0, max: 0 };
    // SAFETY: getrlimit/setrlimit(2) with a valid pointer to a struct of the kernel's layout.
    unsafe {
        if getrlimit(RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.cur < want {
            let raised = RLimit {
                cur: want.min(r.max),
                max: r.max,
            };
            if setrlimit(RLIMIT_NOFILE, &raised) == 0 {
                r.cur = raised.cur;
            }
        }
    }
    r.cur
}

/// Sends a signal to a process by id (one a test started, such as a daemon that left its pid in a
/// file); whether it was there to receive it.
pub fn signal_pid(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) with a pid and a signal number; no memory is passed.
    unsafe { libc_kill(pid, sig) == 0 }
}

/// Sends a signal to one of our own child processes.
pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
    unsafe { libc_kill(child.id() as i32, sig) };
}

/// Waits (up to `timeout`) until `cond` holds, looking again every 20 ms; false when it never did.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
    false
}

/// Waits for a child to exit, at most `timeout`; kills it and returns None if it does not.
pub fn wait_exit(child: Child, timeout: Duration) -> Option<ExitStatus> {
    wait_output(child, timeout).map(|o| o.status)
}

/// Like `wait_exit`, collecting whatever of stdout/stderr is still piped.
pub fn wait_output(child: Child, timeout: Duration) -> Option<Output> {
    match wait_output_or_kill(child, timeout) {
        (out, false) => Some(out),
        (_, true) => None,
    }
}

/// Waits for a child to exit, at most `timeout`, then kills it: what it wrote either way, and
/// whether it had to be killed (for a peer whose own bug can hang it after its work is done).
pub fn wait_output_or_kill(child: Child, timeout: Duration) -> (Output, bool) {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let killed = match rx.recv_timeout(timeout) {
        Ok(out) => return (out.expect("wait for a child"), false),
        Err(_) => {
            // SAFETY: kill(2) on our own child, which the waiting thread will then reap.
            unsafe { libc_kill(pid, 9) };
            true
        }
    };
    let out = rx.recv().expect("the waiting thread").expect("wait for a child");
    (out, killed)
}

/// `cmd` run to its end with its output captured, as `Command::output` does, but for at most
/// `timeout`: a process that outlives it (a peer's client that hangs) is killed and the test fails
/// saying so, with what it printed, instead of hanging every test after it.
pub fn output_within(cmd: &mut Command, timeout: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let (out, killed) = wait_output_or_kill(child, timeout);
    assert!(
        !killed,
        "{cmd:?} still ran after {timeout:?} and was killed; it printed {:?} / {:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A repository script that writes its record with `--json FILE` (bench/diagnosis/matrix,
/// contrib/pscheduler/lab/tasks), run with `args` for at most `timeout`: its printed table (also
/// shown on stderr) and its record, read back and removed. Panics when the script fails.
pub fn script_record(
    script: &std::path::Path,
    args: &[&str],
    timeout: Duration,
) -> (serde_json::Value, String) {
    let name = script
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let record = std::env::temp_dir().join(format!("landspeed-{name}-{}.json", std::process::id()));
    let child = std::process::Command::new(script)
        .args(args)
        .arg("--json")
        .arg(&record)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let o = wait_output(child, timeout).unwrap_or_else(|| panic!("{name} did not end in {timeout:?}"));
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("{table}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{name} failed: {table}");
    let v = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let _ = std::fs::remove_file(&record);
    (v, table)
}

/// The port in a server's text "listening on ADDR:PORT, ...; TLS certificate ..." line.
pub fn listening_port(line: &str) -> u16 {
    landspeed_report::server_log::listening_port(line).unwrap_or_else(|| panic!("no port in {line:?}"))
}

/// `landspeed record --run 1 --db DB --path PATH --min-duration MIN EXTRA...`: the first run of an
/// archive made for the test, checked against the rules.
pub fn record(db: &str, path: &str, min_duration: &str, extra: &[&str]) -> Outcome {
    let mut args = vec!["record", "--run", "1", "--db", db, "--path", path];
    args.extend(["--min-duration", min_duration]);
    args.extend_from_slice(extra);
    landspeed(&args, Duration::from_secs(60))
}

/// `run --json ARGS` against a server whose receive path flips the byte `LANDSPEED_FAULT_FLIP`
/// names (`STREAM:OFFSET`, the test build's fault injector): the run must fail (exit 1); its result.
pub fn flipped_run(flip: &str, args: &[&str]) -> serde_json::Value {
    let s = ServerProc::start_env("127.0.0.1", &[], &[("LANDSPEED_FAULT_FLIP", flip)]);
    let p = s.port.to_string();
    let mut all = vec!["run", "127.0.0.1", "-p", &p, "--json", "--no-save"];
    all.extend_from_slice(args);
    let o = landspeed(&all, Duration::from_secs(60));
    assert_eq!(o.code, 1, "a corrupted run must fail: {}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

/// A fresh archive in a temporary directory, removed when dropped.
pub struct TempArchive {
    pub dir: std::path::PathBuf,
    pub db: String,
}

impl Drop for TempArchive {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One second of `run 127.0.0.1 -p PORT ARGS` stored in a fresh archive, whose `history` must list
/// the run's transport as `transport`; returns the archive and `record`'s "standard TCP" check of it.
pub fn archived_transport(port: u16, args: &[&str], transport: &str) -> (TempArchive, serde_json::Value) {
    let dir = std::env::temp_dir().join(format!("landspeed-{transport}-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let a = TempArchive {
        db: dir.join("a.db").display().to_string(),
        dir,
    };
    let mut all = args.to_vec();
    all.extend(["-t", "1", "--db", &a.db]);
    let o = run_text(port, &all, Duration::from_secs(60));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let h = landspeed(&["history", "--db", &a.db], Duration::from_secs(30));
    assert!(h.stdout.contains(&format!("lands/{transport}")), "{}", h.stdout);
    let o = record(&a.db, "Geneva, CH > Chicago, US", "0.5s", &["--json"]);
    let check = record_check(&o, "standard TCP");
    (a, check)
}

/// The check named `rule` in `record --json`'s output.
pub fn record_check(o: &Outcome, rule: &str) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", o.stdout, o.stderr));
    let found = v["checks"].as_array().unwrap().iter().find(|c| c["rule"] == rule);
    found.unwrap_or_else(|| panic!("no check {rule:?}: {v}")).clone()
}

/// Runs the binary with a hard timeout, killing it if it hangs.
/// `landspeed run HOST -p PORT -t 1 --no-save EXTRA`, to its end (30 s at most).
pub fn one_second_run(host: &str, port: u16, extra: &[&str]) -> Outcome {
    let p = port.to_string();
    let mut args = vec!["run", host, "-p", &p, "-t", "1", "--no-save"];
    args.extend_from_slice(extra);
    landspeed(&args, Duration::from_secs(30))
}

pub fn landspeed(args: &[&str], timeout: Duration) -> Outcome {
    let mut cmd = Command::new(bin());
    // Never the test runner's terminal: a run that would prompt (iperf3's password) fails instead.
    cmd.args(args).stdin(Stdio::null());
    outcome(cmd, timeout)
}

/// `landspeed ARGS` under an open-file limit of `fds` (bash's `ulimit -n`, then exec).
pub fn with_fd_limit(fds: u32, args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &format!("ulimit -n {fds} && exec \"$@\""), "bash", bin()])
        .args(args);
    cmd
}

/// Runs `cmd` to its end with its output captured (panics after `timeout`).
pub fn outcome(mut cmd: Command, timeout: Duration) -> Outcome {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn landspeed");
    let out =
        wait_output(child, timeout).unwrap_or_else(|| panic!("{cmd:?} did not finish within {timeout:?}"));
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Reads a child's stdout until a line containing `needle` appears (the condition a test waits on);
/// panics if the output ends first. Returns the reader so the caller can keep reading.
pub fn wait_for_line<R: std::io::Read>(out: R, needle: &str) -> BufReader<R> {
    let mut r = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap_or(0) > 0,
            "output ended before {needle:?}"
        );
        if line.contains(needle) {
            return r;
        }
    }
}

/// `landspeed run 127.0.0.1 -p PORT ARGS` as a user types it (text output), with a hard timeout.
pub fn run_text(port: u16, args: &[&str], timeout: Duration) -> Outcome {
    let p = port.to_string();
    let mut all = vec!["run", "127.0.0.1", "-p", &p];
    all.extend_from_slice(args);
    landspeed(&all, timeout)
}

/// `landspeed run HOST -p PORT ARGS --json`, asserting success, returning the parsed document.
pub fn run_json(host: &str, port: u16, args: &[&str]) -> serde_json::Value {
    let p = port.to_string();
    let mut all = vec!["run", host, "-p", &p, "--json"];
    all.extend_from_slice(args);
    let o = landspeed(&all, Duration::from_secs(60));
    assert_eq!(
        o.code, 0,
        "run {args:?} failed\nstdout: {}\nstderr: {}",
        o.stdout, o.stderr
    );
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.stdout))
}

/// Checks the invariants every result must satisfy: the required keys, sent == received per stream and
/// in total, and measured intervals summing to the totals.
pub fn check_invariants(r: &serde_json::Value) {
    assert_eq!(r["schema"], "landspeed/result/1");
    for k in [
        "bytes_sent",
        "bytes_received",
        "bytes_verified",
        "corrupt_blocks",
        "duration_s",
        "throughput_bps",
        "retransmits",
    ] {
        assert!(!r["summary"][k].is_null(), "summary.{k} missing");
    }
    for side in ["local", "remote"] {
        for k in [
            "user_pct",
            "system_pct",
            "softirq_pct",
            "cpu_s_per_gb",
            "cycles_per_byte",
        ] {
            assert!(r[side]["cpu"].get(k).is_some(), "{side}.cpu.{k} missing");
        }
        for k in ["requested_bytes", "granted_snd_bytes", "granted_rcv_bytes"] {
            assert!(r[side]["window"].get(k).is_some(), "{side}.window.{k} missing");
        }
        assert!(r[side]["host"].is_object());
    }
    assert!(r["config"].is_object());
    let s = &r["summary"];
    assert_eq!(s["bytes_sent"], s["bytes_received"], "sent != received");
    let recv = s["bytes_received"].as_u64().unwrap();
    let dur = s["duration_s"].as_f64().unwrap();
    let bps = s["throughput_bps"].as_f64().unwrap();
    assert!(dur > 0.0);
    assert!((bps - recv as f64 * 8.0 / dur).abs() <= bps * 1e-9 + 1e-6);
    let mut per_stream = 0;
    for st in r["streams"].as_array().unwrap() {
        for k in [
            "id",
            "bytes_sent",
            "bytes_received",
            "bytes_verified",
            "throughput_bps",
            "tcp",
        ] {
            assert!(st.get(k).is_some(), "streams[].{k} missing");
        }
        assert_eq!(
            st["bytes_sent"], st["bytes_received"],
            "stream {} sent != received",
            st["id"]
        );
        per_stream += st["bytes_received"].as_u64().unwrap();
    }
    assert_eq!(per_stream, recv);
    let measured: u64 = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| !i["omitted"].as_bool().unwrap())
        .map(|i| i["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(measured, recv, "intervals do not add up to the total");
    for iv in r["intervals"].as_array().unwrap() {
        for k in ["start_s", "end_s", "bytes", "throughput_bps", "streams"] {
            assert!(iv.get(k).is_some(), "intervals[].{k} missing");
        }
        let sum: u64 = iv["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, iv["bytes"].as_u64().unwrap());
    }
}

/// The bytes a landspeed client opens its control connection with: the preamble and a hello.
pub fn control_greeting(software: &str) -> Vec<u8> {
    use landspeed_proto::{encode, Message, Preamble, PROTOCOL_VERSION};
    let mut b = Preamble::Control {
        version: PROTOCOL_VERSION,
    }
    .encode();
    b.extend(encode(&Message::Hello {
        version: PROTOCOL_VERSION,
        software: software.into(),
        auth: None,
    }));
    b
}

/// The server's next log line holding `needle` (waiting at most 20 s for each line).
pub fn line_with(s: &ServerProc, needle: &str) -> String {
    loop {
        let l = s
            .next_line(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("no server line with {needle:?}"));
        if l.contains(needle) {
            return l;
        }
    }
}

/// Reads the server's lines until each of `needles` has been in one, in any order (lines that
/// arrive from concurrent connections need not keep an order).
#[allow(dead_code)]
pub fn lines_with(s: &ServerProc, needles: &[&str]) {
    let mut missing: Vec<&str> = needles.to_vec();
    while !missing.is_empty() {
        let l = s
            .next_line(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("no server lines with {missing:?}"));
        missing.retain(|n| !l.contains(n));
    }
}

/// A TCP port free on 127.0.0.1 now (bound, then let go).
#[allow(dead_code)]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `ip ARGS` (iproute2), asserting it succeeded.
pub fn ip(args: &[&str]) {
    command(&[&["ip"], args].concat());
}

/// A command line run to its end, asserting it succeeded.
pub fn command(cmd: &[&str]) {
    let o = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .expect("run a command");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `iperf3 -s` on a free loopback port (Debian's iperf3, installed by .ci/run).
pub struct Iperf3Server {
    pub child: Option<Child>,
    pub port: u16,
}

impl Iperf3Server {
    /// `iperf3 -s` on a free loopback port, or None when iperf3 is missing outside CI.
    pub fn start() -> Option<Iperf3Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let spawned = Command::new("iperf3")
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string(), "--forceflush"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "iperf3 is missing in CI: {e}");
                eprintln!("skipping: iperf3 is not installed (apt-get install iperf3)");
                return None;
            }
        };
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        let ready = lines.any(|l| l.is_ok_and(|l| l.contains("Server listening")));
        assert!(ready, "iperf3 -s did not start");
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Some(Iperf3Server {
            child: Some(child),
            port,
        })
    }
}

impl Drop for Iperf3Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = wait_exit(c, Duration::from_secs(5));
        }
    }
}

/// Runs `cmd` (another program: a cross-built landspeed under qemu or Wine, rpm, podman) to its end,
/// its output captured; panics naming `what` if it cannot start or runs past 120 s.
pub fn captured(cmd: &mut Command, what: &str) -> Output {
    wait_output(spawn_captured(cmd, what), Duration::from_secs(120))
        .unwrap_or_else(|| panic!("{what}: no end in 120 s"))
}

/// `cmd` started with its output piped, or a panic naming `what`.
pub fn spawn_captured(cmd: &mut Command, what: &str) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Whether something listens on TCP `port` (Linux's /proc tables; probing by binding could steal it).
pub fn listening(port: u16) -> bool {
    let wanted = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|t| {
        std::fs::read_to_string(t).unwrap_or_default().lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&wanted) && f[3] == "0A"
        })
    })
}
