//! `landspeed pscheduler METHOD`: the pScheduler tool's executables (contrib/pscheduler wraps each in a
//! one-line script). Each reads JSON on stdin and writes JSON on stdout; what needs no I/O is the
//! landspeed-pscheduler crate, this module reads, sleeps until the scheduled start, serves or runs
//! the client, and writes. Malformed input is a method error (exit 1, the reason on stderr) that still
//! writes the method's failure shape on stdout; a measurement that fails is a result that says so
//! (exit 0), as pScheduler expects.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use landspeed_pscheduler::{methods, result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Where a site may set the server participant's port: `{"server_port": N}`.
pub const CONFIG: &str = "/etc/pscheduler/tool/landspeed.conf";

#[derive(Args, Debug)]
pub struct PschedulerArgs {
    /// The tool method pScheduler calls.
    #[arg(value_enum)]
    pub method: Method,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Method {
    Enumerate,
    CanRun,
    Duration,
    ParticipantData,
    Run,
    MergedResults,
}

pub fn pscheduler(a: PschedulerArgs) -> Result<bool> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read stdin")?;
    let input: Value = match (a.method, serde_json::from_str(&text)) {
        (Method::Enumerate, _) => Value::Null,
        (_, Ok(v)) => v,
        (m, Err(e)) => {
            let why = format!("malformed JSON on stdin: {e}");
            outln!("{}", failure_shape(m, &why));
            anyhow::bail!(why);
        }
    };
    let out = answer(a.method, &input);
    match out {
        Ok(v) => {
            outln!("{v}");
            Ok(true)
        }
        Err(why) => {
            outln!("{}", failure_shape(a.method, &why));
            anyhow::bail!(why)
        }
    }
}

/// What a method writes on stdout when its input is unusable.
fn failure_shape(m: Method, why: &str) -> Value {
    match m {
        Method::CanRun => json!({"can-run": false, "reasons": [why]}),
        _ => result::failure(why, ""),
    }
}

fn answer(m: Method, input: &Value) -> Result<Value, String> {
    match m {
        Method::Enumerate => Ok(methods::enumerate(landspeed_core::SOFTWARE_VERSION)),
        Method::CanRun => Ok(methods::can_run(input)),
        Method::Duration => methods::duration(input),
        Method::ParticipantData => methods::participant_data(input, configured_port()),
        Method::MergedResults => Ok(methods::merged_results(input)),
        Method::Run => run(input),
    }
}

/// The server port from the tool's configuration file, or the default.
fn configured_port() -> u16 {
    std::fs::read_to_string(CONFIG)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|c| c.get("server_port")?.as_u64())
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(methods::DEFAULT_PORT)
}

/// `run`: waits for the scheduled start, then serves or measures.
fn run(input: &Value) -> Result<Value, String> {
    let role = methods::plan(input, configured_port())?;
    let start = methods::scheduled_start(input)?;
    let window_end = methods::window_end(input)?;
    sleep_until(start);
    Ok(match role {
        methods::Role::Server { port, lifetime } => serve(port, lifetime),
        methods::Role::Client { args, local_server } => {
            let deadline = window_end - RESULT_MARGIN;
            if local_server {
                loopback(args, deadline)
            } else {
                std::thread::sleep(methods::SERVER_WAIT);
                client(args, deadline)
            }
        }
    })
}

/// How long before the window's end the client gives up, so that its result is written before
/// pScheduler kills it.
const RESULT_MARGIN: Duration = Duration::from_secs(1);

fn sleep_until(t: SystemTime) {
    if let Ok(wait) = t.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
}

/// The server participant: `landspeed serve --once` on the port for at most the run's length.
fn serve(port: u16, lifetime: Duration) -> Value {
    let command = format!("landspeed serve --once -p {port}");
    let mut child = match spawn_server(&["-p", &port.to_string()]) {
        Ok(c) => c,
        Err(e) => return result::failure(&format!("cannot start the server: {e}"), &command),
    };
    let status = wait_or_kill(&mut child, lifetime);
    let log = child_output(&mut child);
    match status {
        Some(s) if s.success() => json!({
            "succeeded": true,
            "diags": format!("{command}\nserved its test\n{log}"),
        }),
        Some(s) => result::failure(
            &format!("the server ended with {s}: {}", log.trim()),
            &format!("{command}\n{log}"),
        ),
        None => result::failure(
            "the server had not finished a test by the end of the run's window; stopped",
            &format!("{command}\n{log}"),
        ),
    }
}

/// Starts `landspeed serve --once` as a child that cannot outlive this process: pScheduler ends a
/// tool by signal (SIGTERM, then SIGKILL half a second later, at the window's end or when its runner
/// restarts), and `serve --once` waiting for a client that will never come would otherwise stay on.
fn spawn_server(args: &[&str]) -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["serve", "--once", "--idle-timeout", "10s"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    dies_with_parent(&mut cmd);
    cmd.spawn()
}

/// Linux: the child is killed when the thread that started it ends (the main thread here: all of
/// this process). A parent already gone before the child asked (it was reparented) ends it too.
#[cfg(target_os = "linux")]
fn dies_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid and _exit are async-signal-safe; nothing is allocated after the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn dies_with_parent(_cmd: &mut Command) {}

/// Waits for the child to exit until `limit`, else kills it; its exit status when it exited by itself.
fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn child_output(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut s);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// `loopback`: a server on a free port of this host, then the client against it.
fn loopback(mut args: Vec<String>, deadline: SystemTime) -> Value {
    let bind = args[0].clone();
    let mut child = match spawn_server(&["-p", "0", "--bind", &bind]) {
        Ok(c) => c,
        Err(e) => return result::failure(&format!("cannot start the local server: {e}"), ""),
    };
    let port = child.stdout.take().and_then(|o| {
        let mut line = String::new();
        BufReader::new(o).read_line(&mut line).ok()?;
        landspeed_report::server_log::listening_port(&line)
    });
    let out = match port {
        Some(p) => {
            args[2] = p.to_string();
            client(args, deadline)
        }
        None => result::failure("the local server did not say its port", ""),
    };
    let _ = child.kill();
    let _ = child.wait();
    out
}

/// The client participant: one landspeed test, its result in the throughput format. A test still
/// running at `deadline` is stopped (its figures so far, marked interrupted); one that has not even
/// started by then (a server that never answers) is a failure, written before pScheduler kills us.
fn client(args: Vec<String>, deadline: SystemTime) -> Value {
    let command = format!("landspeed run {}", args.join(" "));
    let opts = match crate::common::client::options_from_args(&args) {
        Ok(o) => o,
        Err(e) => return result::failure(&format!("cannot build the test: {e}"), &command),
    };
    let interrupt = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = interrupt.clone();
    let cmd = command.clone();
    std::thread::spawn(move || {
        let out = match crate::common::client::run_quiet(&opts, false, &stop) {
            Ok(r) => result::throughput_result(&r, &cmd),
            Err(e) => result::failure(&crate::common::flags::client(&e), &cmd),
        };
        let _ = tx.send(out);
    });
    let left = deadline.duration_since(SystemTime::now()).unwrap_or_default();
    if let Ok(out) = rx.recv_timeout(left) {
        return out;
    }
    interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
    rx.recv_timeout(RESULT_MARGIN / 2).unwrap_or_else(|_| {
        result::failure(
            "the test had not ended by the end of the run's window (the server never answered?); stopped",
            &command,
        )
    })
}
