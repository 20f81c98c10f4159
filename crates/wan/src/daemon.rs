//! The emulator's life cycle: `up` starts a detached forwarder process that creates the two namespaces and
//! TUN devices, writes a state file and answers status requests on a Unix socket; `down` stops it and
//! removes whatever is left (also after the forwarder was killed); `exec` runs a command inside one host.
//! The forwarder removes its namespaces and files on SIGTERM/SIGINT/SIGHUP; after SIGKILL its TUN devices
//! vanish with it and `down` (or the next `up` of the same name) removes the rest.

use crate::change::{Applied, Change, ChangeError, Entry, Player};
use crate::forward::{lock, run_direction, DirShared, DirSnapshot};
use crate::model::Link;
use crate::netns::{self, NetnsError};
use crate::settings::{check_name, PathSettings, SettingsError};
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Where state files, status sockets and logs live.
pub const RUN_DIR: &str = "/run/landspeed/wan";
/// Host A's and B's addresses, from the benchmarking ranges (RFC 2544, RFC 5180), inside the namespaces.
pub const ADDR_A: &str = "198.18.0.1";
/// Host B's IPv4 address.
pub const ADDR_B: &str = "198.18.0.2";
/// Host A's IPv6 address (the benchmarking range 2001:2::/48, RFC 5180).
pub const ADDR6_A: &str = "2001:2::1";
/// Host B's IPv6 address.
pub const ADDR6_B: &str = "2001:2::2";

/// Why an emulator could not be set up, found or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WanError {
    /// A setting could not be understood.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A namespace or device could not be set up.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// Not running as root.
    #[error("the WAN emulator needs root (it creates network namespaces and TUN devices)")]
    NotRoot,
    /// An emulator of that name is running already.
    #[error("emulator '{0}' is already up (see `landspeed wan status {0}`; `wan down {0}` stops it)")]
    AlreadyUp(String),
    /// No emulator of that name runs.
    #[error("no emulator named '{0}' (see `landspeed wan status`)")]
    NotFound(String),
    /// A change or a schedule that could not be understood.
    #[error(transparent)]
    Change(#[from] ChangeError),
    /// The forwarder refused a change.
    #[error("the emulator refused the change: {0}")]
    Refused(String),
    /// A host side other than a or b.
    #[error("host must be 'a' or 'b', not '{0}'")]
    Side(String),
    /// The forwarder process failed before it was ready.
    #[error("the forwarder did not start: {0}")]
    Start(String),
    /// A file, socket or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> WanError {
    let what = what.into();
    move |source| WanError::Io { what, source }
}

/// One emulated host as scripts see it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    /// The host's network namespace.
    pub namespace: String,
    /// Its TUN device inside the namespace.
    pub device: String,
    /// Its IPv4 address.
    pub address: String,
    /// Its IPv6 address.
    pub address6: String,
}

/// The state file: what was set up, by which process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// The emulator's name.
    pub name: String,
    /// The forwarder's process id.
    pub pid: u32,
    /// When it started, Unix seconds.
    pub started_unix_s: u64,
    /// The path as set up.
    pub settings: PathSettings,
    /// The two hosts.
    pub hosts: Hosts,
}

/// The emulator's two hosts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hosts {
    /// Host A.
    pub a: Host,
    /// Host B.
    pub b: Host,
}

/// What `wan status NAME` reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// The emulator's name.
    pub name: String,
    /// Its forwarder is alive.
    pub running: bool,
    /// The forwarder's process id.
    pub pid: u32,
    /// Seconds since it started.
    pub uptime_s: f64,
    /// The path as set up.
    pub settings: PathSettings,
    /// The two hosts.
    pub hosts: Hosts,
    /// The counters of the direction from A to B.
    pub a_to_b: DirSnapshot,
    /// The counters of the direction from B to A.
    pub b_to_a: DirSnapshot,
    /// The changes applied since it started (`wan change`, a schedule), oldest first; the newest
    /// [`MAX_APPLIED`] are kept.
    #[serde(default)]
    pub changes: Vec<Applied>,
}

/// How many applied changes `wan status` keeps (a flapping schedule would otherwise grow without end).
pub const MAX_APPLIED: usize = 4096;

fn state_path(name: &str) -> PathBuf {
    Path::new(RUN_DIR).join(format!("{name}.json"))
}
fn socket_path(name: &str) -> PathBuf {
    Path::new(RUN_DIR).join(format!("{name}.sock"))
}
/// The forwarder's log file of emulator `name`.
pub fn log_path(name: &str) -> PathBuf {
    Path::new(RUN_DIR).join(format!("{name}.log"))
}

/// The hosts of emulator `name`: their namespaces, device and addresses.
pub fn hosts(name: &str) -> Hosts {
    let host = |side, address: &str, address6: &str| Host {
        namespace: netns::ns_name(name, side),
        device: netns::DEVICE.into(),
        address: address.into(),
        address6: address6.into(),
    };
    Hosts {
        a: host('a', ADDR_A, ADDR6_A),
        b: host('b', ADDR_B, ADDR6_B),
    }
}

/// Fails unless this process runs as root.
pub fn require_root() -> Result<(), WanError> {
    // SAFETY: no arguments, cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(WanError::NotRoot);
    }
    Ok(())
}

fn read_state(name: &str) -> Option<State> {
    let s = std::fs::read(state_path(name)).ok()?;
    serde_json::from_slice(&s).ok()
}

/// True if `pid` is a live forwarder of emulator `name` (not a recycled pid).
fn forwarder_alive(pid: u32, name: &str) -> bool {
    let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
    args.windows(3)
        .any(|w| w[0] == b"wan" && w[1] == b"forward" && w[2] == name.as_bytes())
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
            .unwrap_or(false)
}

/// Names of emulators with a state file or a namespace left.
pub fn known() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(RUN_DIR)
        .map(|d| {
            d.filter_map(|e| {
                let n = e.ok()?.file_name().into_string().ok()?;
                n.strip_suffix(".json").map(str::to_string)
            })
            .collect()
        })
        .unwrap_or_default();
    for ns in netns::list_ours() {
        if let Some(n) = ns
            .strip_prefix(netns::PREFIX)
            .and_then(|r| r.strip_suffix("-a").or_else(|| r.strip_suffix("-b")))
        {
            names.push(n.to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The running emulator whose host this process is in, and which host ('a' or 'b'): found by
/// comparing this process's network namespace with the emulators' (a test run through `wan exec`).
pub fn enclosing() -> Option<(String, char)> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let ours = id(Path::new("/proc/self/ns/net"))?;
    known().into_iter().find_map(|name| {
        ['a', 'b'].into_iter().find_map(|side| {
            let ns = Path::new("/run/netns").join(netns::ns_name(&name, side));
            (id(&ns) == Some(ours)).then(|| (name.clone(), side))
        })
    })
}

/// Starts emulator `name`: spawns `exe wan forward NAME SETTINGS_JSON [--schedule TEXT]` detached and
/// waits until it says it is ready (or why not). A schedule (the text of a schedule file) is checked
/// before anything is created.
pub fn up(
    name: &str,
    settings: &PathSettings,
    schedule: Option<&str>,
    exe: &Path,
) -> Result<State, WanError> {
    check_name(name)?;
    if let Some(text) = schedule {
        crate::change::parse_schedule(text)?;
    }
    require_root()?;
    if let Some(st) = read_state(name) {
        if forwarder_alive(st.pid, name) {
            return Err(WanError::AlreadyUp(name.into()));
        }
    }
    down(name)?; // leftovers of a killed forwarder
    std::fs::create_dir_all(RUN_DIR).map_err(io_err(format!("cannot create {RUN_DIR}")))?;
    let log = std::fs::File::create(log_path(name)).map_err(io_err("cannot create the log file"))?;
    let json = serde_json::to_string(settings).expect("settings serialize");
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["wan", "forward", name, &json]);
    if let Some(text) = schedule {
        cmd.args(["--schedule", text]);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; it detaches the forwarder from our terminal and process group.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(io_err(format!("cannot start {}", exe.display())))?;
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
    if line.trim() == "ready" {
        // Reaped by init once we exit; the forwarder runs on in its own session.
        std::mem::forget(child);
        return read_state(name).ok_or_else(|| WanError::Start("no state file after start".into()));
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(log_path(name)).unwrap_or_default();
    let _ = down(name);
    let why = log
        .lines()
        .last()
        .unwrap_or("no reason given (timed out)")
        .to_string();
    Err(WanError::Start(why))
}

/// What `down` found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Down {
    /// The emulator (its state, forwarder or namespaces) was there.
    pub found: bool,
    /// Processes left running inside its namespaces (started with `wan exec`), ended: SIGTERM, then
    /// SIGKILL for those still alive after [`END_GRACE`].
    pub ended: Vec<libc::pid_t>,
    /// Of those, the ones that needed SIGKILL.
    pub killed: Vec<libc::pid_t>,
}

/// How long processes in an emulator's namespaces get to exit after SIGTERM before SIGKILL.
pub const END_GRACE: Duration = Duration::from_secs(3);

/// Stops emulator `name` and removes everything it created, ending the processes still running in
/// its namespaces first (a deleted namespace would leave them running, unreachable). Stopping one that
/// is not there is fine.
pub fn down(name: &str) -> Result<Down, WanError> {
    check_name(name)?;
    require_root()?;
    let mut found = false;
    // The processes first: a stopping forwarder deletes the namespaces, and then they cannot be found.
    let namespaces: Vec<String> = ['a', 'b']
        .into_iter()
        .map(|side| netns::ns_name(name, side))
        .filter(|ns| netns::exists(ns))
        .collect();
    let pids: Vec<libc::pid_t> = namespaces.iter().flat_map(|ns| netns::pids(ns)).collect();
    let killed = end_processes(&pids, END_GRACE);
    if let Some(st) = read_state(name) {
        found = true;
        if forwarder_alive(st.pid, name) {
            end_forwarder(st.pid, name);
        }
    }
    for ns in namespaces.iter().filter(|ns| netns::exists(ns)) {
        found = true;
        netns::delete(ns)?;
    }
    found |= !namespaces.is_empty();
    for p in [state_path(name), socket_path(name), log_path(name)] {
        let _ = std::fs::remove_file(p);
    }
    Ok(Down {
        found,
        ended: pids,
        killed,
    })
}

fn end_forwarder(pid: u32, name: &str) {
    let pid_t = pid as libc::pid_t;
    // SAFETY: signalling a process we verified is our forwarder.
    unsafe { libc::kill(pid_t, libc::SIGTERM) };
    let t = Instant::now();
    while forwarder_alive(pid, name) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if forwarder_alive(pid, name) {
        // SAFETY: as above.
        unsafe { libc::kill(pid_t, libc::SIGKILL) };
    }
}

/// SIGTERM to every pid, SIGKILL to those still running after `grace`; returns the killed ones.
fn end_processes(pids: &[libc::pid_t], grace: Duration) -> Vec<libc::pid_t> {
    let running = |p: &libc::pid_t| process_running(*p);
    for &p in pids {
        // SAFETY: kill(2) with a pid found in our namespace and a valid signal.
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
    let t = Instant::now();
    while pids.iter().any(running) && t.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed: Vec<libc::pid_t> = pids.iter().copied().filter(running).collect();
    for &p in &killed {
        // SAFETY: as above.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    let t = Instant::now();
    while killed.iter().any(running) && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    killed
}

/// Whether `pid` exists and is not a zombie (a zombie has exited; only its parent's wait is left).
fn process_running(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with(['Z', 'X'])
    })
}

/// What a client asks the forwarder on its socket: one JSON line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
enum Ask {
    /// The live status.
    Status,
    /// A change, as its `KEY=VALUE` words (checked again by the forwarder).
    Change {
        /// The words.
        words: Vec<String>,
    },
}

/// The forwarder's answer to a change.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Applied(Applied),
    Refused(String),
}

/// Sends `ask` to emulator `name`'s forwarder and reads its whole answer.
fn ask(name: &str, ask: &Ask) -> io::Result<Vec<u8>> {
    let mut s = UnixStream::connect(socket_path(name))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut line = serde_json::to_vec(ask).expect("a request serializes");
    line.push(b'\n');
    s.write_all(&line)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Reads the live status of emulator `name`.
pub fn status(name: &str) -> Result<Status, WanError> {
    check_name(name)?;
    let st = read_state(name).ok_or_else(|| WanError::NotFound(name.into()))?;
    if forwarder_alive(st.pid, name) {
        if let Ok(buf) = ask(name, &Ask::Status) {
            if let Ok(status) = serde_json::from_slice::<Status>(&buf) {
                return Ok(status);
            }
        }
    }
    Ok(Status {
        name: st.name,
        running: false,
        pid: st.pid,
        uptime_s: 0.0,
        settings: st.settings,
        hosts: st.hosts,
        a_to_b: DirSnapshot::default(),
        b_to_a: DirSnapshot::default(),
        changes: Vec::new(),
    })
}

/// Applies a change (its `KEY=VALUE` words) to running emulator `name` now: checked here first, so a
/// bad change leaves the emulator as it was.
pub fn change(name: &str, words: &[String]) -> Result<Applied, WanError> {
    check_name(name)?;
    Change::parse(words)?;
    let st = read_state(name).ok_or_else(|| WanError::NotFound(name.into()))?;
    if !forwarder_alive(st.pid, name) {
        return Err(WanError::NotFound(name.into()));
    }
    // The forwarder applies it to the settings it runs with now, and refuses it (with the reason)
    // when they make it invalid.
    let buf = ask(
        name,
        &Ask::Change {
            words: words.to_vec(),
        },
    )
    .map_err(io_err(format!("cannot reach emulator '{name}'")))?;
    match serde_json::from_slice::<Answer>(&buf) {
        Ok(Answer::Applied(a)) => Ok(a),
        Ok(Answer::Refused(why)) => Err(WanError::Refused(why)),
        Err(e) => Err(WanError::Refused(format!("unreadable answer: {e}"))),
    }
}

/// Replaces this process with `cmd` running inside host `side` of emulator `name`.
pub fn exec(name: &str, side: &str, cmd: &[String]) -> Result<std::convert::Infallible, WanError> {
    check_name(name)?;
    let side = match side {
        "a" | "A" => 'a',
        "b" | "B" => 'b',
        _ => return Err(WanError::Side(side.into())),
    };
    let ns = netns::ns_name(name, side);
    if !netns::exists(&ns) {
        return Err(WanError::NotFound(name.into()));
    }
    netns::enter(&ns)?;
    // Without it the command still runs; only /sys/class/net shows the host's interfaces.
    let _ = netns::remount_sys();
    use std::os::unix::process::CommandExt;
    let (prog, args) = cmd
        .split_first()
        .ok_or_else(|| WanError::Start("no command given".into()))?;
    let e = std::process::Command::new(prog).args(args).exec();
    Err(WanError::Io {
        what: format!("cannot run {prog}"),
        source: e,
    })
}

/// Sets the TCP buffer limits inside a namespace so that one connection can fill the emulated path,
/// and with `--ecn` has its TCP ask for ECN.
fn tune_host(ns: &str, settings: &PathSettings) -> Result<(), WanError> {
    let rtt = settings.a_to_b.delay + settings.b_to_a.delay;
    let rate = match (settings.a_to_b.rate_bps, settings.b_to_a.rate_bps) {
        (Some(x), Some(y)) => x.max(y),
        _ => 10e9,
    };
    let bdp = (rate / 8.0 * rtt.as_secs_f64()) as u64;
    let max = (4 * bdp).clamp(6 << 20, 1 << 30);
    let ns_owned = ns.to_string();
    std::thread::scope(|s| {
        s.spawn(move || -> Result<(), WanError> {
            netns::enter(&ns_owned)?;
            let ecn = settings
                .ecn
                .then(|| ("/proc/sys/net/ipv4/tcp_ecn", "1".to_string()));
            for (file, value) in [
                ("/proc/sys/net/ipv4/tcp_rmem", format!("4096 131072 {max}")),
                ("/proc/sys/net/ipv4/tcp_wmem", format!("4096 16384 {max}")),
            ]
            .into_iter()
            .chain(ecn)
            {
                std::fs::write(file, value).map_err(io_err(format!("cannot set {file} in {ns_owned}")))?;
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(WanError::Start("tuning thread panicked".into())))
    })
}

/// The forwarder process: builds the path, reports readiness on stdout, forwards (playing `schedule`)
/// until signalled, then removes what it built. Returns only when the emulator has been taken down.
pub fn forward(name: &str, settings: PathSettings, schedule: Vec<Entry>) -> Result<(), WanError> {
    check_name(name)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(io_err("cannot handle signals"))?;
    }
    let result = build_and_run(name, &settings, schedule, &stop);
    let _ = std::fs::remove_file(socket_path(name));
    for side in ['a', 'b'] {
        let _ = netns::delete(&netns::ns_name(name, side));
    }
    let _ = std::fs::remove_file(state_path(name));
    result
}

/// What the forwarder's threads share: who it is, its clock, the settings it runs with now, the
/// changes applied so far and each direction's counters and controls.
struct Shared {
    state: State,
    epoch: Instant,
    settings: Mutex<PathSettings>,
    applied: Mutex<Vec<Applied>>,
    dirs: [DirShared; 2],
}

impl Shared {
    fn status(&self) -> Status {
        Status {
            name: self.state.name.clone(),
            running: true,
            pid: self.state.pid,
            uptime_s: self.epoch.elapsed().as_secs_f64(),
            settings: lock(&self.settings).clone(),
            hosts: self.state.hosts.clone(),
            a_to_b: self.dirs[0].stats.snapshot(),
            b_to_a: self.dirs[1].stats.snapshot(),
            changes: lock(&self.applied).clone(),
        }
    }

    /// Applies `change` now: the new settings to the directions it names, an outage from now, and
    /// the record of it.
    fn apply(&self, change: &Change, source: String) -> Result<Applied, ChangeError> {
        let mut settings = lock(&self.settings);
        let next = change.apply(&settings)?;
        let at = self.epoch.elapsed();
        let unix_s = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let until = change.down.map(|d| at + d).or(change.up.then_some(at));
        for (i, dir) in [&next.a_to_b, &next.b_to_a].into_iter().enumerate() {
            if change.which.covers(i == 1) {
                let d = change.sets_anything().then(|| dir.clone());
                let down = until.map(|u| (u.as_nanos() as u64, change.scope));
                self.dirs[i].control.request(d, down);
            }
        }
        *settings = next;
        let applied = Applied {
            at_s: at.as_secs_f64(),
            unix_s,
            change: change.text(),
            direction: change.which,
            down_until_s: change.down.map(|d| (at + d).as_secs_f64()),
            source,
        };
        let mut log = lock(&self.applied);
        if change.up {
            // The outages still running end now: their records say when they really did.
            for a in log
                .iter_mut()
                .filter(|a| a.down_until_s.is_some_and(|u| u > at.as_secs_f64()))
            {
                if change.which == crate::change::Which::Both || a.direction == change.which {
                    a.down_until_s = Some(at.as_secs_f64());
                }
            }
        }
        if log.len() == MAX_APPLIED {
            log.remove(0);
        }
        log.push(applied.clone());
        Ok(applied)
    }
}

fn build_and_run(
    name: &str,
    settings: &PathSettings,
    schedule: Vec<Entry>,
    stop: &Arc<AtomicBool>,
) -> Result<(), WanError> {
    let hosts = hosts(name);
    let mut fds = Vec::new();
    for h in [&hosts.a, &hosts.b] {
        netns::create(&h.namespace)?;
        fds.push(netns::open_tun(&h.namespace)?);
        netns::configure(&h.namespace, settings.mtu, &h.address, &h.address6)?;
        tune_host(&h.namespace, settings)?;
    }
    let state = State {
        name: name.into(),
        pid: std::process::id(),
        started_unix_s: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        settings: settings.clone(),
        hosts: hosts.clone(),
    };
    let tmp = state_path(name).with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&state).expect("state serializes"))
        .and_then(|_| std::fs::rename(&tmp, state_path(name)))
        .map_err(io_err("cannot write the state file"))?;
    let _ = std::fs::remove_file(socket_path(name));
    let listener = UnixListener::bind(socket_path(name)).map_err(io_err("cannot bind the status socket"))?;
    let shared = Arc::new(Shared {
        state,
        epoch: Instant::now(),
        settings: Mutex::new(settings.clone()),
        applied: Mutex::new(Vec::new()),
        dirs: Default::default(),
    });
    {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || serve_requests(listener, &shared));
    }
    let (fa, fb) = (&fds[0], &fds[1]);
    std::thread::scope(|s| {
        let ab = Link::new(settings.a_to_b.clone(), settings.seed);
        let ba = Link::new(settings.b_to_a.clone(), settings.seed ^ 0x9E37_79B9_7F4A_7C15);
        let (sh, stop_ref, epoch) = (&*shared, &**stop, shared.epoch);
        s.spawn(move || run_direction(fa, fb, ab, settings, &sh.dirs[0], stop_ref, epoch));
        s.spawn(move || run_direction(fb, fa, ba, settings, &sh.dirs[1], stop_ref, epoch));
        if !schedule.is_empty() {
            s.spawn(move || play(Player::new(schedule), sh, stop_ref));
        }
        println!("ready");
        let _ = io::stdout().flush();
        // SAFETY: closing our own stdout so that the parent's read ends.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            libc::dup2(null, 1);
            libc::close(null);
        }
    });
    Ok(())
}

/// Applies a schedule's changes at their times after the emulator started, until it is stopped. A
/// change its moment's settings make invalid is logged and skipped.
fn play(mut player: Player, shared: &Shared, stop: &AtomicBool) {
    while let Some((at, entry)) = player.next_change() {
        loop {
            if stop.load(Relaxed) {
                return;
            }
            let left = at.saturating_sub(shared.epoch.elapsed());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
        if let Err(e) = shared.apply(&entry.change, format!("schedule line {}", entry.line)) {
            eprintln!("schedule line {}: not applied: {e}", entry.line);
        }
    }
}

/// Answers the socket's requests, one JSON line each: the status, or a change applied now.
fn serve_requests(listener: UnixListener, shared: &Shared) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let mut line = String::new();
        if BufReader::new(&conn).read_line(&mut line).is_err() {
            continue;
        }
        let reply = match serde_json::from_str::<Ask>(&line) {
            Ok(Ask::Status) => serde_json::to_vec(&shared.status()),
            Ok(Ask::Change { words }) => {
                let answer = match Change::parse(&words).and_then(|c| shared.apply(&c, "wan change".into())) {
                    Ok(a) => Answer::Applied(a),
                    Err(e) => Answer::Refused(e.to_string()),
                };
                serde_json::to_vec(&answer)
            }
            Err(e) => serde_json::to_vec(&Answer::Refused(format!("unreadable request: {e}"))),
        };
        let _ = conn.write_all(&reply.expect("answers serialize"));
    }
}
