//! The one supervisor: runs any [`Transport`]'s workers, samples every stream at each interval boundary,
//! ends the test and builds the per-stream report. It is the same for TCP and UDP (and for whatever
//! transport comes next), so intervals, the warm-up, progress and the end of a test mean the same thing
//! on every data path.
//!
//! The calling thread is the sampling thread: it waits on one wake-up channel that carries worker
//! completions and the driver's own events (control messages), takes a sample at each interval
//! boundary, and calls the driver's [`EngineHook`]. Ending honestly: a sender stops at its byte budget or
//! deadline and ends its stream; a receiver reads until the end of data. So when every worker is done,
//! every byte written has been read and counted, and the final sample equals the totals.

use crate::cpu::CpuSnapshot;
use crate::host::NetSnapshot;
use crate::transport::{Meter, Outcome, StreamMeta, Transport};
use landspeed_core::endpoint::{
    CpuTimes, InterfaceCounters, IntervalSample, Role, StreamReport, StreamSample,
};
use landspeed_core::payload::Pattern;
use landspeed_core::stats::{Interval, SampleSchedule};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// Flags the driver raises while the engine runs.
#[derive(Debug, Default)]
pub struct Flags {
    /// Senders stop early (Ctrl-C, or the peer asked); receivers still drain.
    pub stop: AtomicBool,
    /// Everything stops now (the peer vanished or broke the protocol).
    pub abort: AtomicBool,
    /// Everything stops now, without error: iperf3's protocol ends a test by a control message, not by
    /// the data streams ending, and what is still in flight is not counted.
    pub halt: AtomicBool,
    /// The rate cap (`EngineParams::stream_cap_bps`) no longer applies: a server's longest test is
    /// over, and what is still in flight drains at once rather than at the cap.
    pub uncap: AtomicBool,
}

/// How far one end has got, as the sampling thread sees it.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Bytes received so far on all receiving streams.
    pub received: u64,
    /// Bytes sent so far on all sending streams.
    pub sent: u64,
    /// Every sending stream has finished (true when there are none).
    pub senders_done: bool,
}

/// What wakes the sampling thread.
pub enum Wake<X> {
    /// A worker thread finished.
    WorkerDone,
    /// Something from the driver's world (control bytes, a data connection).
    External(X),
}

/// Callbacks from the sampling thread to the driver.
pub trait EngineHook<X> {
    /// A sample of every stream closed an interval.
    fn on_sample(&mut self, sample: &IntervalSample);
    /// Something from the driver's world arrived while the data moves.
    fn on_external(&mut self, x: X, flags: &Flags);
    /// Called on every wake-up of the sampling thread (at least every 100 ms): the place to turn outside
    /// conditions (Ctrl-C, server shutdown) into flags.
    fn on_tick(&mut self, _flags: &Flags) {}
    /// Called once when `flags.stop` is first seen raised.
    fn on_stop(&mut self) {}
    /// Called on every wake-up with how far this end has got.
    fn on_progress(&mut self, _progress: Progress, _flags: &Flags) {}
}

/// The driver's side of a run: the flags it raises, the wake-up channel and its callbacks.
pub struct Wiring<'a, X> {
    /// The flags that stop, halt or abort the workers.
    pub flags: &'a Flags,
    /// The wake-up channel's sending side (workers say they are done through it).
    pub wake_tx: &'a Sender<Wake<X>>,
    /// The wake-up channel's receiving side, which the sampling thread waits on.
    pub wake_rx: &'a Receiver<Wake<X>>,
    /// The driver's callbacks.
    pub hook: &'a mut dyn EngineHook<X>,
    /// The interface whose counters bracket the run, when known.
    pub interface: Option<&'a str>,
}

impl<'a, X> Wiring<'a, X> {
    /// The wiring of a run: `flags` the driver raises, the wake-up channel, its hook, and the interface
    /// whose counters bracket the run.
    pub fn new(
        flags: &'a Flags,
        (wake_tx, wake_rx): (&'a Sender<Wake<X>>, &'a Receiver<Wake<X>>),
        hook: &'a mut dyn EngineHook<X>,
        interface: Option<&'a str>,
    ) -> Self {
        Wiring {
            flags,
            wake_tx,
            wake_rx,
            hook,
            interface,
        }
    }
}

/// Everything the engine measured.
pub struct EngineOutput {
    /// Every stream's report.
    pub streams: Vec<StreamReport>,
    /// Every interval's sample, warm-up included (marked).
    pub samples: Vec<IntervalSample>,
    /// Seconds from the start to the last worker's end.
    pub elapsed_s: f64,
    /// This process's CPU use over the run.
    pub cpu: CpuTimes,
    /// The interface's counters over the run, when known.
    pub interface: Option<InterfaceCounters>,
    /// The kernel's protocol counters over the run (host-wide).
    pub kernel_counters: std::collections::BTreeMap<String, u64>,
    /// Worker threads used.
    pub threads: u32,
    /// Each worker thread's CPU time.
    pub workers: Vec<landspeed_core::endpoint::WorkerCpu>,
    /// Spans in which this end's receivers got no data at all (docs/metrics.md, "Stalls").
    pub stalls: Vec<landspeed_core::stall::Stall>,
    /// The receivers' isochronous frames, every stream's pooled (`EngineParams::frames_from_bursts`).
    pub frames: Option<landspeed_core::frames::FramesReport>,
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineParams {
    /// Bytes per write or read (the write size).
    pub length: usize,
    /// Senders stop this long after the start (None: budgets end the test).
    pub send_time: Option<Duration>,
    /// Time between samples.
    pub interval: Duration,
    /// Warm-up left out of the results.
    pub omit: Duration,
    /// Worker threads (0: one per CPU, at most one per stream).
    pub threads: usize,
    /// CPUs to pin the workers to, in turn.
    pub cpus: Option<Vec<usize>>,
    /// A stream that moves no byte for this long fails.
    pub idle_timeout: Duration,
    /// The run's payload; senders always write it.
    pub pattern: Pattern,
    /// Receivers check every byte against it.
    pub verify: bool,
    /// Receivers drop data in the kernel without copying it (MSG_TRUNC); never with `verify`.
    pub discard: bool,
    /// Senders use MSG_ZEROCOPY.
    pub zerocopy: bool,
    /// io_uring instead of epoll, with this many operations queued per stream.
    pub uring: bool,
    /// io_uring: operations kept queued per stream.
    pub queue_depth: usize,
    /// Each stream moves at most this many bits per second (a server's `--max-rate`, split over the
    /// streams; a TCP pace where the kernel does not pace, `platform::tcp_pace`): senders write and
    /// receivers read no faster, so TCP's flow control slows the peer.
    pub stream_cap_bps: Option<f64>,
    /// SO_RCVLOWAT for receivers on the blocking worker.
    pub rcvlowat: landspeed_core::config::RcvLowat,
    /// Each sending socket's pacing rate (SO_MAX_PACING_RATE), bits per second: its writes are no
    /// larger than what it sends in [`crate::sockopt::PACED_AHEAD`].
    pub paced_bps: Option<f64>,
    /// A span this long without data at this end's receivers is a stall, seconds.
    pub stall_s: f64,
    /// TCP receivers read at most this much a call and count their reads by size in eight bins of an
    /// eighth of it each (iperf 2's server: its read buffer, `Reads=Dist`); None: reads of `length`,
    /// not counted.
    pub read_bins: Option<usize>,
    /// TCP receivers cut their stream into iperf 2's bursts and time each one from the send time
    /// its header carries (the spec's `trip_times`); every byte is then read into memory.
    pub trip_times: bool,
    /// With `trip_times`: each burst's transit is also counted in these bins (iperf 2's server
    /// `--histograms`), a histogram each sample.
    pub trip_bins: Option<landspeed_core::transit_bins::BinSpec>,
    /// TCP receivers cut their stream into iperf 2's bursts and count each one as an isochronous
    /// frame (`--isochronous` over TCP: one burst a frame): the result's `frames`.
    pub frames_from_bursts: bool,
    /// A test with trip times: each sender writes one whole burst (`length`) when the rate allows
    /// it and waits for the next (`platform::burst_pace`), bits per second.
    pub burst_bps: Option<f64>,
    /// TCP receivers on the polling worker ask the kernel to acknowledge at once (TCP_QUICKACK)
    /// after each read that took data (iperf 2's `--tcp-quickack`).
    pub quickack: bool,
    /// The clock's zero when it is earlier than the run's start: a server that counts its test from
    /// the client's first connection, as iperf 2's does (None: the run's start).
    pub clock_from: Option<Instant>,
}

impl EngineParams {
    /// Bytes per read for a TCP receiver: the counted reads' buffer, else the write size.
    pub fn read_length(&self) -> usize {
        self.read_bins.unwrap_or(self.length)
    }

    /// Bytes per write for a sender: the write size, or less on a paced socket.
    pub fn send_length(&self) -> usize {
        match self.paced_bps {
            Some(r) => self.length.min(crate::sockopt::paced_queue_bytes(r)),
            None => self.length,
        }
    }
}

pub use landspeed_core::config::THREAD_PER_STREAM_MAX;

/// Worker threads for `streams` streams when none are asked for: one per stream up to
/// [`THREAD_PER_STREAM_MAX`], else one per CPU (`ncpu`).
pub fn default_threads(streams: usize, ncpu: usize) -> usize {
    if streams <= THREAD_PER_STREAM_MAX as usize {
        streams.max(1)
    } else {
        ncpu.clamp(1, streams)
    }
}

impl EngineParams {
    /// The engine settings for one end of a test: `threads` defaults to [`default_threads`]; the
    /// payload and receive mode come from the spec both ends agreed on.
    pub fn for_spec(
        spec: &landspeed_core::config::TestSpec,
        threads: Option<usize>,
        cpus: Option<Vec<usize>>,
        idle_timeout: Duration,
    ) -> EngineParams {
        let ncpu = crate::cpu::cpu_count() as usize;
        EngineParams {
            length: spec.length_bytes as usize,
            send_time: spec.send_time(),
            interval: spec.interval_s,
            omit: spec.omit_s,
            threads: threads.unwrap_or_else(|| default_threads(spec.total_streams() as usize, ncpu)),
            cpus,
            idle_timeout,
            pattern: Pattern::new(spec.payload_key),
            verify: spec.verify && spec.file.is_none(),
            discard: spec.rx == landspeed_core::config::RxMode::Discard,
            zerocopy: spec.tx == landspeed_core::config::TxMode::Zerocopy,
            uring: spec.io == landspeed_core::config::IoBackend::Uring,
            queue_depth: spec.queue_depth as usize,
            stream_cap_bps: crate::platform::tcp_pace(spec).1,
            rcvlowat: crate::platform::rcvlowat(spec),
            paced_bps: crate::platform::tcp_pace(spec).0,
            // A test with trip times counts its reads (iperf 2's lines of a timed stream show them).
            read_bins: spec.trip_times.then_some(spec.length_bytes as usize),
            trip_times: spec.trip_times,
            trip_bins: None,
            frames_from_bursts: false,
            burst_bps: crate::platform::burst_pace(spec),
            quickack: false,
            clock_from: None,
            stall_s: landspeed_core::stall::threshold_s(
                spec.paced_bps(spec.total_streams()),
                spec.length_bytes as usize,
            ),
        }
    }
}

impl EngineOutput {
    /// This end's report for the results exchange and the result.
    pub fn report(
        &self,
        cpus_pinned: Option<Vec<usize>>,
        warnings: Vec<String>,
    ) -> landspeed_core::endpoint::EndpointReport {
        landspeed_core::endpoint::EndpointReport {
            file: None,
            software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
            streams: self.streams.clone(),
            cpu: self.cpu.clone(),
            workers: self.workers.clone(),
            host: landspeed_core::endpoint::HostInfo {
                nic: self.interface.as_ref().map(|i| crate::host::nic_info(&i.name)),
                ..crate::host::host_info()
            },
            interface: self.interface.clone(),
            kernel_counters: self.kernel_counters.clone(),
            elapsed_s: self.elapsed_s,
            threads: self.threads,
            cpus_pinned,
            warnings,
            error: None,
            memory: crate::host::memory(),
            stalls: self.stalls.clone(),
            stream_cap_bps: None,
        }
    }
}

/// Notifies the sampling thread when a worker ends, however it ends (a panic included).
struct DoneGuard<'a, X>(&'a Sender<Wake<X>>);
impl<X> Drop for DoneGuard<'_, X> {
    fn drop(&mut self) {
        let _ = self.0.send(Wake::WorkerDone);
    }
}

/// Runs `transport`'s streams to completion. Every timestamp is relative to the moment it starts
/// (or to `EngineParams::clock_from`), so call it right after the start signal.
pub fn run<X: Send>(transport: &dyn Transport, p: &EngineParams, mut w: Wiring<'_, X>) -> EngineOutput {
    let metas = transport.streams();
    let meters: Vec<Meter> = metas.iter().map(|_| Meter::default()).collect();
    if let Some(buffer) = p.read_bins {
        for (m, meta) in meters.iter().zip(&metas) {
            if meta.role == Role::Receiver && transport.counts_reads() && !p.uring {
                m.reads.start((buffer / 8) as u64);
            }
        }
    }
    for (m, meta) in meters.iter().zip(&metas) {
        if p.trip_times && meta.role == Role::Receiver && transport.counts_reads() {
            m.trips.start(p.trip_bins);
        }
    }
    let groups = transport.groups(p);
    let cpu0 = CpuSnapshot::take();
    let net0 = w.interface.and_then(NetSnapshot::take);
    let kernel0 = crate::host::kernel_counters();
    let now = Instant::now();
    let t0 = p.clock_from.filter(|t| *t <= now).unwrap_or(now);
    let flags = w.flags;
    let mut outcomes: Vec<Option<Outcome>> = metas.iter().map(|_| None).collect();
    let mut workers = Vec::with_capacity(groups.len());
    let (samples, stalls) = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .enumerate()
            .map(|(k, group)| {
                let cpu = p.cpus.as_ref().filter(|c| !c.is_empty()).map(|c| c[k % c.len()]);
                let (tx, meters, metas) = (w.wake_tx.clone(), &meters, &metas);
                scope.spawn(move || {
                    let _guard = DoneGuard(&tx);
                    if let Some(c) = cpu {
                        let _ = crate::pin::pin_current_thread(c);
                    }
                    let clock = crate::cpu::ThreadClock::start();
                    let outcomes = transport.work(group, meters, p, flags, t0);
                    (outcomes, clock.stop(group.iter().map(|&i| metas[i].id).collect()))
                })
            })
            .collect();
        let sampler = Sampler {
            transport,
            metas: &metas,
            meters: &meters,
        };
        let (samples, stalls) = sampler.until_done(p, &mut w, t0, handles.len());
        for h in handles {
            match h.join() {
                Ok((v, cpu)) => {
                    v.into_iter().for_each(|(i, o)| outcomes[i] = Some(o));
                    workers.push(cpu);
                }
                Err(_) => flags.abort.store(true, Relaxed),
            }
        }
        (samples, stalls)
    });
    let elapsed_s = t0.elapsed().as_secs_f64();
    let receipts: Vec<_> = (outcomes.iter_mut())
        .filter_map(|o| o.as_mut()?.frames.take())
        .collect();
    EngineOutput {
        frames: landspeed_core::frames::FrameReceipt::finish_all(receipts),
        streams: reports(transport, &metas, outcomes, &samples, t0),
        elapsed_s,
        cpu: cpu0.until(&CpuSnapshot::take()),
        interface: net0.map(|n| n.until_now()),
        kernel_counters: crate::netstat::deltas(&kernel0, &crate::host::kernel_counters()),
        threads: groups.len() as u32,
        workers,
        samples,
        stalls,
    }
}

/// The sampling thread's view of the streams.
struct Sampler<'a> {
    transport: &'a dyn Transport,
    metas: &'a [StreamMeta],
    meters: &'a [Meter],
}

impl Sampler<'_> {
    /// Every stream's counters now, closing `iv` at `end_s`.
    fn take(&self, iv: Interval, end_s: f64) -> IntervalSample {
        IntervalSample {
            index: iv.index,
            start_s: iv.start_s,
            end_s,
            omitted: iv.omitted,
            streams: (self.metas.iter().zip(self.meters).enumerate())
                .map(|(i, (m, c))| StreamSample {
                    id: m.id,
                    bytes: c.bytes.load(Relaxed),
                    tcp: self.transport.snapshot(i),
                    udp: c.udp.counts(),
                    reads: c.reads.bins(),
                    trips: c.trips.take(end_s - iv.start_s),
                    trip_bins: c.trips.take_bins(),
                })
                .collect(),
        }
    }

    fn progress(&self) -> Progress {
        let mine = |r: Role| (self.metas.iter().zip(self.meters)).filter(move |(m, _)| m.role == r);
        Progress {
            received: mine(Role::Receiver).map(|(_, c)| c.bytes.load(Relaxed)).sum(),
            sent: mine(Role::Sender).map(|(_, c)| c.bytes.load(Relaxed)).sum(),
            senders_done: mine(Role::Sender).all(|(_, c)| c.finished.load(Relaxed)),
        }
    }

    /// Samples at every interval boundary and once more when all `workers` are done (that last
    /// sample closes at the moment they were, so it equals the totals), and watches the received
    /// bytes for stalls at every pass (at least every 100 ms); returns the samples and the stalls.
    fn until_done<X>(
        &self,
        p: &EngineParams,
        w: &mut Wiring<'_, X>,
        t0: Instant,
        workers: usize,
    ) -> (Vec<IntervalSample>, Vec<landspeed_core::stall::Stall>) {
        let mut sched = SampleSchedule::new(p.interval, p.omit);
        let mut cur = sched.next_interval();
        let (mut finished, mut stop_seen, mut samples) = (0, false, vec![]);
        let mut stalls = landspeed_core::stall::StallWatch::new(p.stall_s);
        loop {
            w.hook.on_tick(w.flags);
            let progress = self.progress();
            stalls.observe(t0.elapsed().as_secs_f64(), progress.received);
            w.hook.on_progress(progress, w.flags);
            if !stop_seen && w.flags.stop.load(Relaxed) {
                stop_seen = true;
                w.hook.on_stop();
            }
            let boundary = t0 + Duration::from_secs_f64(cur.end_s);
            let now = Instant::now();
            let all_done = finished == workers;
            if all_done || now >= boundary {
                let end_s = if all_done {
                    t0.elapsed().as_secs_f64().max(cur.start_s)
                } else {
                    cur.end_s
                };
                let s = self.take(cur, end_s);
                w.hook.on_sample(&s);
                samples.push(s);
                if all_done {
                    let send_end = p.send_time.map(|t| t.as_secs_f64());
                    return (samples, stalls.finish(end_s, send_end));
                }
                cur = sched.next_interval();
                continue;
            }
            match w
                .wake_rx
                .recv_timeout((boundary - now).min(Duration::from_millis(100)))
            {
                Ok(Wake::WorkerDone) => finished += 1,
                Ok(Wake::External(x)) => w.hook.on_external(x, w.flags),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => finished = workers,
            }
        }
    }
}

/// One report per stream from what its worker returned, the samples and the kernel's last word.
fn reports(
    transport: &dyn Transport,
    metas: &[StreamMeta],
    outcomes: Vec<Option<Outcome>>,
    samples: &[IntervalSample],
    t0: Instant,
) -> Vec<StreamReport> {
    // Bytes each receiving stream had moved when the warm-up ended: the last warm-up sample.
    let omit_sample = samples.iter().rev().find(|s| s.omitted);
    let of = |s: &IntervalSample, id: u32| s.streams.iter().find(|x| x.id == id).cloned();
    let rel = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(t0).as_secs_f64());
    (metas.iter().zip(outcomes).enumerate())
        .map(|(i, (m, out))| {
            let rtts: Vec<u32> = samples
                .iter()
                .filter_map(|s| of(s, m.id)?.tcp.map(|t| t.rtt_us))
                .collect();
            let settled = transport.settle(i, &rtts);
            let omitted_bytes = match (m.role, omit_sample) {
                (Role::Receiver, Some(s)) => of(s, m.id).map_or(0, |x| x.bytes),
                _ => 0,
            };
            let error = if out.is_none() {
                Some("worker thread failed".into())
            } else {
                None
            };
            let o = out.unwrap_or_default();
            StreamReport {
                id: m.id,
                flow: m.flow,
                role: m.role,
                bytes: o.bytes,
                calls: o.calls,
                omitted_bytes,
                first_byte_s: rel(o.first),
                last_byte_s: rel(o.last),
                snd_buf_bytes: settled.snd_buf_bytes,
                rcv_buf_bytes: settled.rcv_buf_bytes,
                tcp: settled.tcp,
                error: error.or(o.error),
                bytes_verified: o.verified_bytes,
                corrupt_blocks: o.corrupt_blocks,
                first_corruption: o.first_corruption,
                zerocopy_sends: o.zerocopy_sends,
                zerocopy_copied: o.zerocopy_copied,
                udp: o.udp,
                send_errors: o.send_errors,
                udp_offload: o.offload,
                blocking: o.blocking,
                rcvlowat_bytes: o.rcvlowat_bytes,
                tls: settled
                    .tls_cipher
                    .map(|cipher| landspeed_core::endpoint::StreamTls {
                        cipher,
                        records: o.tls_records,
                    }),
                quic: settled.quic,
                local_port: settled.ports.0,
                peer_port: settled.ports.1,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::config::Flow;

    /// A transport without sockets: each worker "moves" a fixed number of bytes per stream.
    struct Fake {
        bytes: Vec<u64>,
        /// The worker of this group panics.
        panic_group: Option<usize>,
    }

    impl Transport for Fake {
        fn streams(&self) -> Vec<StreamMeta> {
            (0..self.bytes.len() as u32)
                .map(|id| StreamMeta {
                    id: id + 1,
                    flow: Flow::ClientToServer,
                    role: if id % 2 == 0 { Role::Receiver } else { Role::Sender },
                })
                .collect()
        }
        fn groups(&self, p: &EngineParams) -> Vec<Vec<usize>> {
            crate::transport::round_robin(self.bytes.len(), p.threads)
        }
        fn work(
            &self,
            group: &[usize],
            meters: &[Meter],
            _: &EngineParams,
            _: &Flags,
            _: Instant,
        ) -> Vec<(usize, Outcome)> {
            if self.panic_group == Some(group[0] % 2) {
                panic!("worker failed on purpose");
            }
            (group.iter())
                .map(|&i| {
                    meters[i].bytes.store(self.bytes[i], Relaxed);
                    meters[i].finished.store(true, Relaxed);
                    let o = Outcome {
                        bytes: self.bytes[i],
                        calls: 1,
                        first: Some(Instant::now()),
                        last: Some(Instant::now()),
                        verified_bytes: self.bytes[i],
                        ..Outcome::default()
                    };
                    (i, o)
                })
                .collect()
        }
        fn snapshot(&self, _: usize) -> Option<landspeed_core::endpoint::TcpSnapshot> {
            None
        }
        fn settle(&self, i: usize, _: &[u32]) -> crate::transport::Settled {
            crate::transport::Settled {
                snd_buf_bytes: i as u64,
                ..Default::default()
            }
        }
    }

    #[derive(Default)]
    struct Record {
        samples: usize,
        progress: Vec<Progress>,
    }
    impl EngineHook<()> for Record {
        fn on_sample(&mut self, _: &IntervalSample) {
            self.samples += 1;
        }
        fn on_external(&mut self, _: (), _: &Flags) {}
        fn on_progress(&mut self, p: Progress, _: &Flags) {
            self.progress.push(p);
        }
    }

    fn params(threads: usize) -> EngineParams {
        EngineParams {
            length: 1,
            send_time: None,
            interval: Duration::from_secs(3600),
            omit: Duration::ZERO,
            threads,
            cpus: None,
            idle_timeout: Duration::from_secs(1),
            pattern: Pattern::new(7),
            verify: true,
            discard: false,
            zerocopy: false,
            uring: false,
            queue_depth: 1,
            stream_cap_bps: None,
            rcvlowat: landspeed_core::config::RcvLowat::Off,
            paced_bps: None,
            stall_s: landspeed_core::stall::MIN_STALL_S,
            read_bins: None,
            trip_times: false,
            trip_bins: None,
            frames_from_bursts: false,
            burst_bps: None,
            quickack: false,
            clock_from: None,
        }
    }

    fn supervise(t: &Fake, threads: usize) -> (EngineOutput, Record, bool) {
        let (flags, (tx, rx)) = (Flags::default(), std::sync::mpsc::channel());
        let mut hook = Record::default();
        let wiring = Wiring {
            flags: &flags,
            wake_tx: &tx,
            wake_rx: &rx,
            hook: &mut hook,
            interface: None,
        };
        let out = run(t, &params(threads), wiring);
        (out, hook, flags.abort.load(Relaxed))
    }

    #[test]
    fn the_last_sample_equals_the_totals_and_every_stream_is_reported() {
        let t = Fake {
            bytes: vec![10, 20, 30],
            panic_group: None,
        };
        let (out, hook, aborted) = supervise(&t, 2);
        assert!(!aborted);
        assert_eq!(out.threads, 2);
        // The interval is an hour: the only sample is the one taken when the workers were done.
        assert_eq!((out.samples.len(), hook.samples), (1, 1));
        let last = &out.samples[0];
        let sampled: Vec<u64> = last.streams.iter().map(|s| s.bytes).collect();
        assert_eq!(sampled, vec![10, 20, 30]);
        let reported: Vec<(u32, u64, u64, Option<String>)> = (out.streams.iter())
            .map(|s| (s.id, s.bytes, s.snd_buf_bytes, s.error.clone()))
            .collect();
        assert_eq!(
            reported,
            vec![(1, 10, 0, None), (2, 20, 1, None), (3, 30, 2, None)]
        );
        assert!(out
            .streams
            .iter()
            .all(|s| s.bytes_verified == s.bytes && s.first_byte_s.is_some()));
        // Progress counts receivers only (streams 1 and 3), and senders are done at the end.
        let p = hook.progress.last().expect("progress reported");
        assert!(p.senders_done);
        assert!(p.received <= 40);
    }

    #[test]
    fn a_worker_that_panics_aborts_the_run_and_its_streams_say_so() {
        let t = Fake {
            bytes: vec![10, 20, 30, 40],
            panic_group: Some(1),
        };
        let (out, _, aborted) = supervise(&t, 2);
        assert!(aborted);
        let errors: Vec<Option<&str>> = out.streams.iter().map(|s| s.error.as_deref()).collect();
        let failed = Some("worker thread failed");
        assert_eq!(errors, vec![None, failed, None, failed]);
        assert_eq!(out.streams[1].bytes, 0);
    }
}
