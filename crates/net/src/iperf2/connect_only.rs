//! iperf 2's `--connect-only` as iperf 2.1.8's client runs it, for the `iperf` drop-in (its
//! ClientConnectPeriodic, read in its source and checked against its output): each of `-P`'s
//! threads opens a TCP connection, times its `connect()`, reads TCP_INFO at once (the congestion
//! window in KiB, the MSS, the RTT the handshake gave) and closes it; without `-i` it does so
//! `--connect-only=N` times back to back (10 when no count is given, whatever `-t` says); with `-i`
//! once an interval, from the start, while the next start falls inside `-t`. Each connection is
//! reported as it is made. `landspeed run --connect-only` is the same churn measured as a test
//! (`connect_rate`: back to back for `-t`, the handshakes' distribution); this is the line-by-line
//! form iperf 2's users read.

use crate::dial::{connect_timed, resolve, ClientError, ClientOptions};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

/// Connections a thread makes without `-i` when `--connect-only` names no count (iperf 2.1.8's).
pub(crate) const DEFAULT_CONNECTS: u32 = 10;

/// When a thread connects.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectOnlyPlan {
    /// `--connect-only=N`: connections back to back (without `period`); None: 10, as iperf 2.1.8.
    pub count: Option<u32>,
    /// `-i`: one connection an interval, from the start.
    pub period: Option<Duration>,
    /// `-t`: with `period`, no connection starts at or after it.
    pub run_for: Duration,
    /// `-P`: threads, each connecting on its own.
    pub threads: u32,
}

impl ConnectOnlyPlan {
    /// How long after the thread's start its next connection is due, `made` having been made; None:
    /// it has made its last.
    pub fn next_at(&self, made: u32) -> Option<Duration> {
        match self.period {
            Some(p) if !p.is_zero() => {
                let at = p.saturating_mul(made);
                (made == 0 || at < self.run_for).then_some(at)
            }
            _ => (made < self.count.unwrap_or(DEFAULT_CONNECTS)).then_some(Duration::ZERO),
        }
    }
}

/// One connection: whose, its ends, what its handshake took and what TCP_INFO said right after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handshake {
    /// The thread that made it, from 1 (iperf 2's `[  k]`).
    pub thread: u32,
    /// This end's address and port.
    pub local: SocketAddr,
    /// The server's.
    pub remote: SocketAddr,
    /// `connect()`'s time, milliseconds.
    pub connect_ms: f64,
    /// TCP_INFO after the handshake: congestion window (KiB: segments × MSS / 1024, as iperf 2
    /// prints it), MSS (bytes), RTT (µs).
    pub cwnd_mss_rtt: Option<(u32, u32, u32)>,
    /// When it connected, Unix seconds.
    pub at_unix_s: f64,
}

/// Runs the plan on `-P` threads until each has made its last connection or the user interrupts;
/// `each` hears every connection as it is made (a failed one as its error; that thread stops).
pub fn run_connect_only(
    opts: &ClientOptions,
    plan: ConnectOnlyPlan,
    interrupt: &AtomicBool,
    each: &mut dyn FnMut(Result<Handshake, ClientError>),
) -> Result<(), ClientError> {
    let addr = resolve(opts)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|sc| {
        for thread in 1..=plan.threads.max(1) {
            let tx = tx.clone();
            sc.spawn(move || churn(opts, addr, (plan, thread), interrupt, &tx));
        }
        drop(tx);
        for h in rx {
            each(h);
        }
    });
    Ok(())
}

/// One thread's connections, each sent to `tx` as it is made.
fn churn(
    opts: &ClientOptions,
    addr: SocketAddr,
    (plan, thread): (ConnectOnlyPlan, u32),
    interrupt: &AtomicBool,
    tx: &std::sync::mpsc::Sender<Result<Handshake, ClientError>>,
) {
    let t0 = Instant::now();
    let mut made = 0;
    while let Some(at) = plan.next_at(made) {
        while !interrupt.load(Relaxed) && t0.elapsed() < at {
            std::thread::sleep((at - t0.elapsed()).min(Duration::from_millis(50)));
        }
        if interrupt.load(Relaxed) {
            return;
        }
        let made_one = once(opts, addr, thread);
        let failed = made_one.is_err();
        if tx.send(made_one).is_err() || failed {
            return;
        }
        made += 1;
    }
}

/// One connection, timed, its TCP_INFO read, closed.
fn once(opts: &ClientOptions, addr: SocketAddr, thread: u32) -> Result<Handshake, ClientError> {
    let at_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let (socket, took) = connect_timed(opts, addr, &opts.spec, thread - 1)?;
    let connect_ms = took.as_secs_f64() * 1e3;
    let info = landspeed_engine::tcp_info::read(&socket).ok();
    let failed = |err| ClientError::Stream { id: thread - 1, err };
    Ok(Handshake {
        thread,
        local: socket.local_addr().map_err(failed)?,
        remote: socket.peer_addr().map_err(failed)?,
        connect_ms,
        cwnd_mss_rtt: info.map(|i| {
            let kib = u64::from(i.raw.snd_cwnd) * u64::from(i.raw.snd_mss) / 1024;
            (kib as u32, i.raw.snd_mss, i.raw.rtt)
        }),
        at_unix_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(count: Option<u32>, period_ms: Option<u64>, run_for_ms: u64) -> ConnectOnlyPlan {
        ConnectOnlyPlan {
            count,
            period: period_ms.map(Duration::from_millis),
            run_for: Duration::from_millis(run_for_ms),
            threads: 1,
        }
    }

    fn schedule(p: &ConnectOnlyPlan) -> Vec<u64> {
        (0..100)
            .map_while(|made| p.next_at(made))
            .map(|d| d.as_millis() as u64)
            .collect()
    }

    #[test]
    fn the_schedule_is_iperf_2s() {
        // Ten back to back by default, whatever -t says; N with --connect-only=N.
        assert_eq!(schedule(&plan(None, None, 10_000)), vec![0; 10]);
        assert_eq!(schedule(&plan(None, None, 1)), vec![0; 10]);
        assert_eq!(schedule(&plan(Some(3), None, 10_000)), vec![0; 3]);
        // -t 1 -i 0.5: at 0 and 0.5 s (iperf 2.1.8 printed two lines); -t 2 -i 0.5: four.
        assert_eq!(schedule(&plan(None, Some(500), 1_000)), vec![0, 500]);
        assert_eq!(
            schedule(&plan(None, Some(500), 2_000)),
            vec![0, 500, 1_000, 1_500]
        );
        // A period past -t: the one at the start only.
        assert_eq!(schedule(&plan(None, Some(5_000), 1_000)), vec![0]);
    }
}
