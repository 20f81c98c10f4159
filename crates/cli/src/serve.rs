//! `landspeed serve`: binds, prints where it listens, logs one line per test, and exits cleanly on
//! SIGINT or SIGTERM.

use crate::args::ServeArgs;
use crate::UsageError;
use anyhow::{Context, Result};
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

fn print(ev: ServerEvent) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", landspeed_report::server_log::text_line(&ev, &now_utc()));
    let _ = o.flush();
}

fn print_json(ev: ServerEvent) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", landspeed_report::server_log::json_line(&ev, &now_utc()));
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
        mptcp: !a.no_mptcp,
        identity: match (&a.cert, &a.key) {
            (Some(c), Some(k)) => Some(Arc::new(
                landspeed_engine::tls::Identity::from_pem_files(c, k)
                    .map_err(|e| UsageError(format!("--cert/--key: {e}")))?,
            )),
            _ => None,
        },
        quic: !a.no_quic,
        quic_port: a.quic_port,
    };
    let server = if a.log_json {
        Server::bind(opts, Arc::new(print_json))?
    } else {
        Server::bind(opts, Arc::new(print))?
    };
    if let Some(addr) = a.metrics {
        metrics(addr, server.stats_handle(), stop.clone())?;
    }
    server.run(&stop)?;
    Ok(true)
}

/// `--metrics ADDR`: OpenMetrics on http://ADDR/metrics from the server's live counters.
fn metrics(
    addr: std::net::SocketAddr,
    stats: landspeed_net::StatsHandle,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let listener =
        std::net::TcpListener::bind(addr).with_context(|| format!("--metrics: cannot listen on {addr}"))?;
    // Printed first, so that with port 0 scripts learn where the metrics are.
    println!("landspeed metrics on http://{}/metrics", listener.local_addr()?);
    let handler: crate::http::Handler = Arc::new(move |req| match req.path.as_str() {
        "/metrics" => crate::http::Response {
            status: 200,
            content_type: landspeed_report::openmetrics::CONTENT_TYPE,
            body: landspeed_report::openmetrics::server(
                &stats.stats(),
                stats.last_test().as_ref(),
                landspeed_core::SOFTWARE_VERSION,
            ),
        },
        _ => crate::http::Response::text(404, "not found: the metrics are on /metrics\n"),
    });
    std::thread::spawn(move || crate::http::serve(listener, handler, &stop));
    Ok(())
}
