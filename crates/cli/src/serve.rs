//! `landspeed serve`: binds, prints where it listens, logs one line per test, and exits cleanly on
//! SIGINT or SIGTERM.

use crate::args::ServeArgs;
use crate::UsageError;
use anyhow::{Context, Result};
use landspeed_core::units::{BitRate, Bytes};
use landspeed_net::server::TestLog;
use landspeed_net::{Server, ServerEvent, ServerOptions};
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn now_utc() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    landspeed_core::result::format_utc(s)
}

fn test_line(t: &TestLog) -> String {
    let dir = t
        .direction
        .map_or("-".to_string(), |d| format!("{d:?}").to_lowercase());
    let bytes = t.bytes_received.max(t.bytes_sent);
    let rate = if t.duration_s > 0.0 {
        BitRate(bytes as f64 * 8.0 / t.duration_s).to_string()
    } else {
        "-".into()
    };
    let outcome = match (&t.error, t.corrupt_blocks) {
        (Some(e), _) => format!("FAILED: {e}"),
        (None, 0) => "ok".to_string(),
        (None, n) => format!("CORRUPTED: {n} bad block(s) received"),
    };
    let peer = t
        .peer_bytes
        .map(|b| format!("; client reported {b} B"))
        .unwrap_or_default();
    let who = t.auth.as_ref().map(|n| format!(" (key {n})")).unwrap_or_default();
    format!(
        "{} {} test from {}{who}: {} stream(s) {dir}, received {} B = {} (verified {} B) sent {} B = {} in {:.2} s ({rate}){peer}: {outcome}",
        now_utc(),
        t.protocol,
        t.peer,
        t.streams,
        t.bytes_received,
        Bytes(t.bytes_received),
        t.bytes_verified,
        t.bytes_sent,
        Bytes(t.bytes_sent),
        t.duration_s,
    )
}

fn print(ev: ServerEvent) {
    let line = match ev {
        ServerEvent::Listening(addrs) => {
            let a: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
            format!(
                "landspeed {} listening on {}",
                landspeed_core::SOFTWARE_VERSION,
                a.join(", ")
            )
        }
        ServerEvent::Test(t) => test_line(&t),
        ServerEvent::Refused { peer, reason } => format!("{} refused {peer}: {reason}", now_utc()),
        ServerEvent::Stats(st) => {
            let refused: Vec<String> = st.refused.iter().map(|(k, v)| format!("{v} {k}")).collect();
            format!(
                "{} stats: up {:.0} s; tests {} ok, {} failed, {} running; received {} B, sent {} B; refused: {}",
                now_utc(),
                st.uptime_s,
                st.tests_ok,
                st.tests_failed,
                st.tests_running,
                st.bytes_received,
                st.bytes_sent,
                if refused.is_empty() { "none".to_string() } else { refused.join(", ") }
            )
        }
    };
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// One JSON object per event (`--log-json`), for log shippers.
fn json_line(ev: &ServerEvent) -> serde_json::Value {
    use serde_json::json;
    match ev {
        ServerEvent::Listening(addrs) => json!({
            "time": now_utc(), "event": "listening",
            "addresses": addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "software": format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
        }),
        ServerEvent::Test(t) => json!({
            "time": now_utc(), "event": "test", "protocol": t.protocol, "peer": t.peer.to_string(),
            "streams": t.streams, "direction": t.direction.map(|d| format!("{d:?}").to_lowercase()),
            "bytes_received": t.bytes_received, "bytes_sent": t.bytes_sent,
            "bytes_verified": t.bytes_verified, "corrupt_blocks": t.corrupt_blocks,
            "duration_s": t.duration_s, "peer_bytes": t.peer_bytes, "error": t.error, "auth": t.auth,
            "ok": t.verdict().is_trusted(),
        }),
        ServerEvent::Refused { peer, reason } => json!({
            "time": now_utc(), "event": "refused", "peer": peer.to_string(), "reason": reason,
        }),
        ServerEvent::Stats(st) => json!({
            "time": now_utc(), "event": "stats", "uptime_s": st.uptime_s, "tests_ok": st.tests_ok,
            "tests_failed": st.tests_failed, "tests_running": st.tests_running,
            "bytes_received": st.bytes_received, "bytes_sent": st.bytes_sent,
            "refused": st.refused.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        }),
    }
}

fn print_json(ev: ServerEvent) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", json_line(&ev));
    let _ = o.flush();
}

pub fn serve(a: ServeArgs) -> Result<bool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handler")?;
    }
    // `kill -USR1 PID` prints the counters (tests, bytes, refusals by reason).
    let stats = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, stats.clone())
        .context("cannot install signal handler")?;
    let opts = ServerOptions {
        bind: a.bind,
        port: a.port,
        once: a.once,
        idle_timeout: a.idle_timeout,
        handshake_timeout: a.handshake_timeout,
        max_tests: a.max_tests.max(1),
        limits: landspeed_core::protocol::Limits {
            max_duration_s: a.max_duration.map(|d| d.as_secs_f64()),
            max_streams: a.max_streams,
            max_bytes: a.max_bytes.map(|b| b.get()),
            max_rate_bps: a.max_rate.map(|r| r.bps()),
            max_tests_per_minute: a.max_tests_per_minute,
        },
        allow: a.allow.clone(),
        stats_signal: Some(stats),
        auth: match &a.auth_keys {
            None => None,
            Some(file) => {
                let ring = landspeed_core::protocol::KeyRing::parse(&crate::keyfile::read(file)?)
                    .map_err(|e| UsageError(format!("--auth-keys {}: {e}", file.display())))?;
                if ring.is_empty() {
                    return Err(UsageError(format!(
                        "--auth-keys {}: the file holds no keys",
                        file.display()
                    ))
                    .into());
                }
                Some(Arc::new(ring))
            }
        },
        allow_control: a.allow_control,
        files_dir: match &a.files {
            Some(d) if !d.is_dir() => {
                return Err(UsageError(format!("--files {}: not a directory", d.display())).into())
            }
            other => other.clone(),
        },
        control_key: match &a.control_auth {
            None => None,
            Some((name, file)) => Some(
                landspeed_core::protocol::auth::client_key(name, &crate::keyfile::read(file)?)
                    .map_err(|e| UsageError(format!("--control-auth {name}:{}: {e}", file.display())))?,
            ),
        },
    };
    let server = if a.log_json {
        Server::bind(opts, Arc::new(print_json))?
    } else {
        Server::bind(opts, Arc::new(print))?
    };
    server.run(&stop)?;
    Ok(true)
}
