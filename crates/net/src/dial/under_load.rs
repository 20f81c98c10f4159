//! A request/response test under a working load (`run --under-load`): a bulk test of its own, on
//! connections of its own to the same server, started first, given time to settle, and stopped
//! once the transactions end, so their latency is what a busy path answers with (iperf 2's
//! `--bounceback-congest`, netperf's RR beside a STREAM). The load speaks landspeed's protocol and
//! iperf 2's when the server turns out not to be landspeed's (or `--iperf2` asks). Nothing is
//! printed: the load's events are read only for its start, and its result becomes the
//! transactions' `load` ([`WorkingLoad`]).

use crate::dial::{ClientError, ClientEvent, ClientOptions};
use landspeed_core::config::{Direction, EndCondition, TestSpec};
use landspeed_core::result::RunResult;
use landspeed_core::transactions::WorkingLoad;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

/// What load to run beside the transactions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadPlan {
    /// Which way its data goes (`Forward`: client to server).
    pub direction: Direction,
    /// Its connections per direction.
    pub streams: u32,
    /// How long it runs before the first transaction.
    pub settle: Duration,
    /// Speak iperf 2's protocol from the start (`--iperf2`).
    pub iperf2: bool,
}

/// Time the load is given beyond the transactions' own, in case they overrun; it is stopped as
/// soon as they end.
const LOAD_SLACK: Duration = Duration::from_secs(30);

/// A load that has started and settled.
pub struct RunningLoad {
    plan: LoadPlan,
    stop: Arc<AtomicBool>,
    signals: mpsc::Receiver<Signal>,
    thread: JoinHandle<(&'static str, Result<RunResult, ClientError>)>,
}

enum Signal {
    Started,
    Ended,
}

/// Starts the load for a test of `test_time` and waits until it has run `plan.settle`; the load's
/// failure to start (or its end while settling) is the error, wrapped as [`ClientError::Load`].
pub fn start_load(
    opts: &ClientOptions,
    plan: LoadPlan,
    test_time: Duration,
    interrupt: &AtomicBool,
) -> Result<RunningLoad, ClientError> {
    let load = ClientOptions {
        spec: opts
            .spec
            .changed(|s| load_spec(s, &plan, test_time))
            .map_err(load_error)?,
        ..opts.clone()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, signals) = mpsc::channel();
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("working-load".into())
            .spawn(move || run_load(&load, plan.iperf2, &stop, tx))
            .map_err(|err| load_error(ClientError::Stream { id: 0, err }))?
    };
    let running = RunningLoad {
        plan,
        stop,
        signals,
        thread,
    };
    let wait = opts.connect_timeout + 3 * opts.control_timeout;
    match running.signals.recv_timeout(wait) {
        Ok(Signal::Started) => {}
        _ => return Err(running.failed("it did not start")),
    }
    match running.signals.recv_timeout(plan.settle) {
        Err(mpsc::RecvTimeoutError::Timeout) => Ok(running),
        _ if interrupt.load(Relaxed) => Ok(running),
        _ => Err(running.failed("it ended while settling")),
    }
}

/// The load's test: the transactions' options with bulk streams, the load's direction, a bulk
/// write size, and time enough to outlast the transactions.
fn load_spec(s: &mut TestSpec, plan: &LoadPlan, test_time: Duration) {
    let bulk = TestSpec::default();
    s.transactions = None;
    s.streams = plan.streams;
    s.direction = plan.direction;
    s.length_bytes = bulk.length_bytes;
    s.nodelay = false;
    s.omit_s = Duration::ZERO;
    s.end = EndCondition::Time(plan.settle + test_time + LOAD_SLACK);
}

fn run_load(
    opts: &ClientOptions,
    iperf2: bool,
    stop: &AtomicBool,
    tx: mpsc::Sender<Signal>,
) -> (&'static str, Result<RunResult, ClientError>) {
    let mut on_event = |ev: ClientEvent| {
        if let ClientEvent::Started { .. } = ev {
            let _ = tx.send(Signal::Started);
        }
    };
    let out = if iperf2 {
        ("iperf2", iperf2_load(opts, stop, &mut on_event))
    } else {
        match crate::run_client(opts, stop, &mut on_event) {
            Err(ClientError::NotLandspeed { .. }) => ("iperf2", iperf2_load(opts, stop, &mut on_event)),
            other => ("landspeed", other),
        }
    };
    let _ = tx.send(Signal::Ended);
    out
}

/// The load in iperf 2's protocol: its default write size, no TLS (iperf 2 has none).
fn iperf2_load(
    opts: &ClientOptions,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let spec = opts.spec.changed(|s| {
        s.length_bytes = landspeed_iperf2::spec::DEFAULT_TCP_LEN;
        s.tls = None;
    })?;
    crate::run_iperf2_client(&ClientOptions { spec, ..opts.clone() }, stop, on_event)
}

fn load_error(e: impl Into<ClientError>) -> ClientError {
    load_failed("could not start", e.into())
}

/// [`ClientError::Load`]: `what` happened, for the load's own reason `e`.
fn load_failed(what: &str, e: ClientError) -> ClientError {
    ClientError::Load {
        why: format!("{what}: {e}"),
        remedy: e.remedy(),
    }
}

impl RunningLoad {
    /// Stops the load and returns what it did. A load that ended on its own before the
    /// transactions did, or failed, is kept with `ended_early` saying so (and, failed, no figures).
    pub fn finish(self) -> WorkingLoad {
        let ended_early = self.signals.try_recv().is_ok();
        self.stop.store(true, Relaxed);
        let empty = |why: String| WorkingLoad {
            direction: self.plan.direction,
            streams: self.plan.streams,
            protocol: String::new(),
            settle_s: self.plan.settle.as_secs_f64(),
            flows: vec![],
            corrupt_blocks: 0,
            bytes_verified: 0,
            ended_early: Some(why),
        };
        match self.thread.join() {
            Err(_) => empty("its thread panicked".into()),
            Ok((protocol, Err(e))) => WorkingLoad {
                protocol: protocol.into(),
                ..empty(format!("it failed: {e}"))
            },
            Ok((protocol, Ok(r))) => WorkingLoad::from_result(
                self.plan.direction,
                self.plan.streams,
                protocol,
                self.plan.settle.as_secs_f64(),
                &r,
                ended_early.then(|| "it ended before the transactions did".to_string()),
            ),
        }
    }

    /// The load's own error once its thread has ended, or `what` when it ended without one.
    fn failed(self, what: &str) -> ClientError {
        self.stop.store(true, Relaxed);
        match self.thread.join() {
            Ok((_, Err(e))) => load_failed(what, e),
            _ => ClientError::Load {
                why: what.into(),
                remedy: crate::dial::Remedy::AskServer,
            },
        }
    }
}
