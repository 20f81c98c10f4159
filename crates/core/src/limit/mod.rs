//! What held a direction's rate back: one verdict per direction, decided from the evidence a run
//! gathers (TCP_INFO's limited times, minimum and mean RTT, the window, retransmissions, the pace
//! asked for, each end's worker threads), with every figure that decided it, its confidence and the
//! fix. The rules are written to be never wrong rather than always saying something: a rule fires
//! only when its evidence holds against the alternatives it could be confused with (a window is the
//! limit only when window / minimum RTT is near the rate, never on a path its own queue shows full),
//! two that both hold are both said, and what cannot be told apart is said as such ("unknown", with
//! what was seen). Pure: the facts come in, the verdict goes out; docs/diagnosis.md has every rule,
//! why its thresholds are where they are, and what each cannot tell apart.

use serde::{Deserialize, Serialize};

mod parts;
mod path;

pub use parts::{Sample, LEVEL_CHANGE, PART_FLAT, PART_INTERVALS};
pub use path::{refine, PathSeen, CAPACITY_FILLED, CAPACITY_SHORT, DROPS_DOMINATE, SHALLOW_BDP};

/// What held a rate back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The path was full: its bottleneck's queue grew under the test (nothing to fix at the ends).
    PathCapacity,
    /// The receiver's window.
    ReceiveWindow,
    /// The sender's send buffer.
    SendBuffer,
    /// A system cap on a window asked for (the sysctl is named in the fix).
    SystemCap,
    /// Loss and congestion control: the rate is what the loss rate allows (Mathis).
    #[serde(rename = "loss_and_congestion_control")]
    LossCongestion,
    /// The pace asked for (`-b`, `--fq-rate`).
    Pacing,
    /// The peer's own limit: a server's `--max-rate` held the streams to its share.
    PeerLimit,
    /// The sender's CPU: its worker thread busy (or waiting for a CPU) all its time, or its control
    /// group's quota used up.
    SenderCpu,
    /// The receiver's CPU: its worker thread busy all its time.
    ReceiverCpu,
    /// A bottleneck buffer too small for the bandwidth-delay product: the bottleneck's own queue
    /// dropped the packets, well before the path was full (known where the path says its buffer).
    BottleneckBuffer,
    /// The rate changed mid-test: each part has its own verdict (`during_s`).
    PathChanged,
    /// The receiving application read slower than the path delivered: its buffer held unread data,
    /// and the window it left closed on the senders.
    ReceivingApplication,
    /// Nothing the evidence can name; what was seen is in the evidence.
    Unknown,
}

impl LimitKind {
    /// Every kind.
    pub const ALL: [LimitKind; 13] = [
        LimitKind::PathCapacity,
        LimitKind::ReceiveWindow,
        LimitKind::SendBuffer,
        LimitKind::SystemCap,
        LimitKind::LossCongestion,
        LimitKind::Pacing,
        LimitKind::PeerLimit,
        LimitKind::SenderCpu,
        LimitKind::ReceiverCpu,
        LimitKind::BottleneckBuffer,
        LimitKind::PathChanged,
        LimitKind::ReceivingApplication,
        LimitKind::Unknown,
    ];

    /// The kind named `label`.
    pub fn from_label(label: &str) -> Option<LimitKind> {
        LimitKind::ALL.into_iter().find(|k| k.label() == label)
    }

    /// Its name in JSON and in the text report.
    pub fn label(self) -> &'static str {
        match self {
            LimitKind::PathCapacity => "path_capacity",
            LimitKind::ReceiveWindow => "receive_window",
            LimitKind::SendBuffer => "send_buffer",
            LimitKind::SystemCap => "system_cap",
            LimitKind::LossCongestion => "loss_and_congestion_control",
            LimitKind::Pacing => "pacing",
            LimitKind::PeerLimit => "peer_limit",
            LimitKind::SenderCpu => "sender_cpu",
            LimitKind::ReceiverCpu => "receiver_cpu",
            LimitKind::BottleneckBuffer => "bottleneck_buffer",
            LimitKind::PathChanged => "path_changed",
            LimitKind::ReceivingApplication => "receiving_application",
            LimitKind::Unknown => "unknown",
        }
    }
}

/// How sure the verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Consistent with the evidence, which cannot rule out another limit (said in `why`).
    Low,
    /// The evidence points to it and rules out the usual alternatives.
    Medium,
    /// Measured directly (the pace asked for and kept, a thread busy all its time).
    High,
}

/// One figure that decided a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// What it is.
    pub name: String,
    /// Its value.
    pub value: f64,
    /// Its unit ("bit/s", "ms", "%", "bytes", "ratio").
    pub unit: String,
}

/// One limit of a direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// What held the rate back.
    pub kind: LimitKind,
    /// How sure.
    pub confidence: Confidence,
    /// The verdict in words, with its figures.
    pub why: String,
    /// What to change, when something can be (none for a full path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The figures that decided it.
    pub evidence: Vec<Evidence>,
    /// The share of the test's time it held, percent, where that is measured (the time TCP spent
    /// limited by the window, a part of a test whose rate changed); None: the whole test, as far as
    /// the evidence tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_pct: Option<f64>,
    /// The part of the test it held, seconds from the start of the intervals (a test whose rate
    /// changed: one verdict per part); None: the whole test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during_s: Option<(f64, f64)>,
}

impl Limit {
    /// A verdict for the whole test.
    pub fn new(
        kind: LimitKind,
        confidence: Confidence,
        why: String,
        fix: Option<String>,
        evidence: Vec<Evidence>,
    ) -> Limit {
        Limit {
            kind,
            confidence,
            why,
            fix,
            evidence,
            share_pct: None,
            during_s: None,
        }
    }
}

/// What a direction's verdict is decided from (assembled from a run's reports).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The direction failed (its error), so nothing can be said of its rate.
    pub failed: Option<String>,
    /// Its rate, bits per second.
    pub rate_bps: f64,
    /// How long it ran, seconds.
    pub duration_s: f64,
    /// Its streams.
    pub streams: u32,
    /// TCP only: the senders' mean minimum RTT, seconds (None without TCP_INFO: a foreign peer,
    /// UDP, QUIC).
    pub rtt_min_s: Option<f64>,
    /// TCP only: the senders' mean smoothed RTT over the test, seconds.
    pub rtt_avg_s: Option<f64>,
    /// The senders' mean share of their time limited by the receive window, percent.
    pub rwnd_limited_pct: f64,
    /// The senders' mean share of their time limited by the send buffer, percent.
    pub sndbuf_limited_pct: f64,
    /// The senders' mean window (the peer's advertised receive window), bytes.
    pub window_bytes: f64,
    /// The window asked for (`-w`), bytes per stream.
    pub window_requested: Option<u64>,
    /// The smallest send buffer granted at the sender, bytes.
    pub granted_snd_bytes: u64,
    /// The smallest receive buffer granted at the receiver, bytes.
    pub granted_rcv_bytes: u64,
    /// Segments sent (all streams).
    pub segs_out: u64,
    /// Segments retransmitted (all streams).
    pub retransmits: u64,
    /// The MSS, bytes.
    pub mss_bytes: u32,
    /// The rate the senders were paced to in all (`-b` or `--fq-rate`), bits per second.
    pub paced_bps: Option<f64>,
    /// A server's own rate cap on this direction's streams together (`--max-rate`), bits per second.
    pub peer_cap_bps: Option<f64>,
    /// The sending host's `net.ipv4.tcp_wmem` maximum (send auto-tuning's ceiling), bytes.
    pub sender_wmem_max: Option<u64>,
    /// The receiving host's `net.ipv4.tcp_rmem` maximum (receive auto-tuning's ceiling), bytes.
    pub receiver_rmem_max: Option<u64>,
    /// What the sending end's CPUs show.
    pub sender_cpu: EndCpu,
    /// What the receiving end's CPUs show.
    pub receiver_cpu: EndCpu,
    /// The intervals, in order (the warm-up and a short tail left out): where the rate changed
    /// mid-test, each part is judged on its own.
    pub samples: Vec<Sample>,
}

/// What one end's CPUs showed over a direction's test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndCpu {
    /// A worker thread moving this direction never idled: its own busy share and the share of its
    /// time it waited, ready, for a CPU (0 where the kernel does not say).
    pub bound_thread: Option<(f64, f64)>,
    /// Whether the end reports run-queue waits at all (Linux schedstat): then an idle thread on a
    /// busy host is known not to have wanted the CPU.
    pub waits_known: bool,
    /// The host's CPUs together: their busy share over the test, percent (softirq included).
    pub host_busy_pct: Option<f64>,
    /// The share of the host's CPU time the hypervisor stole, percent.
    pub steal_pct: Option<f64>,
    /// The end's control group: its quota in CPUs, and the share of its periods it was throttled in,
    /// percent.
    pub quota: Option<(f64, f64)>,
}

/// How far above the rate a window's bound may be and still be the limit: the window explains the
/// rate only when window / minimum RTT is near it. On a full path the window covers the
/// bottleneck's standing queue too, so window / minimum RTT is the rate times (1 + queueing delay /
/// RTT), well above it; with reordering or loss the window is not what held the rate.
pub const WINDOW_EXPLAINS_RATE: f64 = 1.25;
/// The senders stopped by the window at least this share of their time, percent, for the window to
/// be the limit at all (at least half their time unless the window was kept full).
pub const WINDOW_HIT_PCT: f64 = 10.0;
/// The window kept full: window / minimum RTT within this factor of the rate (BBR behind a 512 KiB
/// tcp_rmem cap on an emulated 200 Mbit/s, 40 ms path: 1.08-1.17 over runs, the window read at the
/// end and the rate over the test).
pub const WINDOW_KEPT_FULL: f64 = 1.2;
/// With loss that the Mathis bound explains, a queue under this many times the minimum RTT is loss's
/// (delayed acknowledgements and recovery lift the mean: 1.07-1.13 × for Reno under 1% random loss on
/// an emulated 20 ms path) or a bottleneck buffer too small for the BDP, which the loss verdict names;
/// a full path through a buffer of a BDP keeps 1.4-1.7 ×.
pub const QUEUE_WITH_LOSS: f64 = 1.25;
/// A pace (or a server's cap) kept to this share is what set the rate.
pub const PACE_KEPT: f64 = 0.9;
/// The mean RTT this many times the minimum: the test built a standing queue at a bottleneck (a
/// CUBIC flow filling a 100 Mbit/s, 40 ms path through a 488 KiB queue kept 5 ms of it, 1.125 times
/// the minimum; flows filling 50-100 Mbit/s paths through a BDP of queue kept 1.4-1.65 times). A
/// sender held back by anything else keeps the RTT near the path's own, but not at it: bursts, loss
/// recovery and the hosts' own scheduling lift the mean a little (a Reno flow under 1% random loss on
/// an emulated 20 ms path with no queue: 1.07 times; a send-buffer-limited one at 90 of 200 Mbit/s:
/// 1.06 times).
pub const QUEUE_BUILT: f64 = 1.10;
/// ... and at least this much queueing, seconds: under it the RTT's rise is the hosts' own
/// scheduling and buffering (loopback's 0.04 ms minimum and 0.4 ms mean), not a bottleneck's queue.
pub const QUEUE_MIN_S: f64 = 0.001;
/// A host whose CPUs were busy this share of the test, percent, had none to spare.
pub const HOST_BUSY_PCT: f64 = 90.0;
/// A control group throttled in this share of its periods, percent, wanted more CPU than its quota
/// all through the test.
pub const THROTTLED_PCT: f64 = 50.0;
/// Steal at least this share of the host's CPU time, percent, is named as the cause of a bound
/// thread.
pub const STEAL_PCT: f64 = 10.0;
/// A bound thread that waited for a CPU this share of its time, or more, was held back by other
/// work on its CPU rather than by its own.
pub const WAIT_SHARE: f64 = 0.2;

/// The rate within this factor of the Mathis bound (either way) is what the loss rate allows.
pub const MATHIS_FITS: f64 = 2.0;
/// Round trips a test must last (and at least a second) for its steady state to tell anything.
pub const MIN_ROUND_TRIPS: f64 = 10.0;

/// What an "unknown" verdict says when the test ran long enough and no rule's evidence held (the
/// path's own figures may still decide it: [`refine`]).
pub const NO_RULE: &str = "no limit's evidence holds";

/// The limits of one direction, most certain first; never empty (an "unknown" says what was seen).
pub fn decide(f: &Facts) -> Vec<Limit> {
    if let Some(e) = &f.failed {
        return vec![unknown(
            format!("the direction failed ({e}): nothing can be said of its rate"),
            f,
        )];
    }
    if f.rate_bps <= 0.0 {
        return vec![unknown("nothing moved".into(), f)];
    }
    if let Some(p) = pacing(f).or_else(|| peer(f)) {
        return vec![p];
    }
    let min_s = f.duration_s_needed();
    if f.duration_s < min_s {
        return vec![unknown(
            format!(
                "too short to tell: {:.2} s, under {:.2} s ({} round trips of the path, and at least a second)",
                f.duration_s, min_s, MIN_ROUND_TRIPS
            ),
            f,
        )];
    }
    if let Some(parts) = parts::changed(f) {
        return parts;
    }
    let mut found: Vec<Limit> = [
        cpu(f, true),
        cpu(f, false),
        reader(f),
        window(f),
        path_full(f),
        loss(f),
    ]
    .into_iter()
    .flatten()
    .collect();
    if found.is_empty() {
        found.push(unknown(NO_RULE.into(), f));
    }
    found
}

impl Facts {
    /// How long a test must run for its verdict to mean anything.
    fn duration_s_needed(&self) -> f64 {
        self.rtt_min_s.map_or(1.0, |r| (r * MIN_ROUND_TRIPS).max(1.0))
    }

    /// Mean queueing the test built: the mean RTT over the minimum.
    fn queue_ratio(&self) -> Option<f64> {
        match (self.rtt_min_s, self.rtt_avg_s) {
            (Some(min), Some(avg)) if min > 0.0 => Some(avg / min),
            _ => None,
        }
    }

    /// The loss rate: retransmitted over sent segments.
    fn loss(&self) -> Option<f64> {
        (self.segs_out > 0 && self.retransmits > 0).then(|| self.retransmits as f64 / self.segs_out as f64)
    }
}

fn ev(name: &str, value: f64, unit: &str) -> Evidence {
    Evidence {
        name: name.into(),
        value,
        unit: unit.into(),
    }
}

/// What every verdict shows: the rate, and the RTTs where known.
fn seen(f: &Facts) -> Vec<Evidence> {
    let mut v = vec![ev("rate", f.rate_bps, "bit/s")];
    if let Some(m) = f.rtt_min_s {
        v.push(ev("minimum RTT", m * 1e3, "ms"));
    }
    if let Some(a) = f.rtt_avg_s {
        v.push(ev("mean RTT", a * 1e3, "ms"));
    }
    v
}

fn unknown(why: String, f: &Facts) -> Limit {
    Limit {
        kind: LimitKind::Unknown,
        confidence: Confidence::Low,
        why,
        fix: None,
        evidence: seen(f),
        share_pct: None,
        during_s: None,
    }
}

/// The pace asked for, kept: nothing else set the rate.
fn pacing(f: &Facts) -> Option<Limit> {
    let asked = f.paced_bps.filter(|p| *p > 0.0)?;
    ceiling_kept(
        f,
        (LimitKind::Pacing, asked, "pace asked"),
        format!("the pace asked for: {} asked", crate::units::BitRate(asked)),
        "a higher -b (or none; for frames, a higher --isochronous mean) to measure the path",
    )
}

/// A server's `--max-rate`, kept: the peer's limit, nothing else set the rate.
fn peer(f: &Facts) -> Option<Limit> {
    let cap = f.peer_cap_bps.filter(|c| *c > 0.0)?;
    ceiling_kept(
        f,
        (LimitKind::PeerLimit, cap, "server's cap"),
        format!(
            "the server's own limit: it holds these streams to {} together (serve --max-rate)",
            crate::units::BitRate(cap)
        ),
        "a server without a rate limit, or one whose operator raises --max-rate",
    )
}

/// A ceiling set on purpose (a pace, a server's cap) that the rate kept to at least [`PACE_KEPT`]
/// of: it, and nothing else, set the rate.
fn ceiling_kept(
    f: &Facts,
    (kind, ceiling, name): (LimitKind, f64, &str),
    what: String,
    fix: &str,
) -> Option<Limit> {
    if f.rate_bps < PACE_KEPT * ceiling {
        return None;
    }
    let mut evidence = seen(f);
    evidence.push(ev(name, ceiling, "bit/s"));
    Some(Limit {
        kind,
        confidence: Confidence::High,
        why: format!("{what}, {} measured", crate::units::BitRate(f.rate_bps)),
        fix: Some(fix.into()),
        evidence,
        share_pct: None,
        during_s: None,
    })
}

/// The sending (or receiving) end's CPU: its control group's quota used up, a worker thread that
/// never idled (busy, or ready and waiting for a CPU), or, where waits are not known, every CPU of
/// its host busy.
fn cpu(f: &Facts, sender: bool) -> Option<Limit> {
    let c = if sender { &f.sender_cpu } else { &f.receiver_cpu };
    let end = if sender { "sender" } else { "receiver" };
    let mut evidence = seen(f);
    let (why, confidence, fix) = cpu_cause(c, end, &mut evidence)?;
    Some(Limit {
        kind: if sender {
            LimitKind::SenderCpu
        } else {
            LimitKind::ReceiverCpu
        },
        confidence,
        why,
        fix: Some(fix),
        evidence,
        share_pct: None,
        during_s: None,
    })
}

/// Why an end's CPU held the rate, how sure, and the fix; None when it did not.
fn cpu_cause(c: &EndCpu, end: &str, evidence: &mut Vec<Evidence>) -> Option<(String, Confidence, String)> {
    if let Some((quota, throttled)) = c.quota.filter(|q| q.1 >= THROTTLED_PCT) {
        evidence.extend([
            ev(&format!("{end}'s CPU quota"), quota, "CPUs"),
            ev(&format!("{end}'s periods throttled"), throttled, "%"),
        ]);
        return Some((
            format!("the {end}'s CPU quota: its control group may use {quota:.2} CPUs and ran out of them in {throttled:.0}% of its periods"),
            Confidence::High,
            format!("a larger CPU quota for the {end}'s control group (cpu.max, or cpu.cfs_quota_us under cgroup v1)"),
        ));
    }
    let steal = c.steal_pct.filter(|s| *s >= STEAL_PCT);
    if let Some((busy, wait)) = c.bound_thread {
        evidence.extend([
            ev(&format!("{end} thread busy"), busy * 100.0, "%"),
            ev(&format!("{end} thread waiting for a CPU"), wait * 100.0, "%"),
        ]);
        if let Some(st) = steal {
            evidence.push(ev(&format!("{end} host's CPU time stolen"), st, "%"));
            return Some((
                format!("the {end}'s CPU: a worker thread never idled, and the hypervisor took {st:.0}% of the host's CPU time for other guests (steal)"),
                Confidence::High,
                format!("dedicated CPUs for the {end}'s virtual machine, or a host with fewer guests"),
            ));
        }
        if wait >= WAIT_SHARE {
            // Waiting counts the time a quota held the thread too; a quota the end could not read (a
            // container's or namespace's own view of /sys) is then among the causes.
            let held_by = if c.quota.is_some() {
                "other threads or processes held it"
            } else {
                "other threads or processes held it, or a CPU quota not visible to it"
            };
            return Some((
                format!("the {end}'s CPU: a worker thread {:.0}% busy waited for a CPU {:.0}% of its time ({held_by})", busy * 100.0, wait * 100.0),
                Confidence::High,
                format!("less other work on the {end}'s CPUs, or more CPUs there (-A to pin the workers apart from it)"),
            ));
        }
        return Some((
            format!("the {end}'s CPU: a worker thread busy all its time (its kernel work included)"),
            Confidence::High,
            format!("more or faster CPUs at the {end}; a larger write size (-l); more streams (-P) spread over more CPUs"),
        ));
    }
    let host = c
        .host_busy_pct
        .filter(|b| *b >= HOST_BUSY_PCT && !c.waits_known)?;
    evidence.push(ev(&format!("{end} host's CPUs busy"), host, "%"));
    Some((
        format!("the {end}'s CPU: every CPU of its host busy {host:.0}% of the test (softirq included)"),
        Confidence::Medium,
        format!("more or faster CPUs at the {end}, or less other work there"),
    ))
}

/// A receive buffer that could have carried this many times the rate, while the window held the
/// senders most of the time, was full of data the application had not read.
pub const READER_SLACK: f64 = 2.0;

/// The receiving application: the window held the senders most of the time, though the buffer the
/// receiver was granted could have carried [`READER_SLACK`] times the rate at the mean RTT (Linux
/// advertises about half its buffer): the buffer held data the application had not read, and the
/// window was what was left of it. Not when the receiver's CPU is the limit (then that is why the
/// application read slowly, said as the CPU).
fn reader(f: &Facts) -> Option<Limit> {
    // The RTT the test saw (the mean): on loopback or a busy host the minimum is a few µs that no
    // window was ever judged against.
    let (rtt, n) = (f.rtt_avg_s.filter(|r| *r > 0.0)?, f64::from(f.streams.max(1)));
    if f.rwnd_limited_pct < 50.0 || f.granted_rcv_bytes == 0 || cpu(f, false).is_some() {
        return None;
    }
    let usable = f.granted_rcv_bytes as f64 / 2.0;
    let bound = n * usable * 8.0 / rtt;
    if bound < READER_SLACK * f.rate_bps {
        return None;
    }
    let mut evidence = seen(f);
    evidence.extend([
        ev("receive-window limited", f.rwnd_limited_pct, "%"),
        ev("receive buffer granted", f.granted_rcv_bytes as f64, "bytes"),
        ev("receive buffer / mean RTT", bound, "bit/s"),
        ev("window", f.window_bytes, "bytes"),
    ]);
    Some(Limit {
        kind: LimitKind::ReceivingApplication,
        confidence: Confidence::Medium,
        why: format!(
            "the receiving application: the window held the senders {:.0}% of the time, yet the receiver's {} buffer could carry {} at the mean RTT of {:.1} ms, {:.1} times the rate: it held data the application had not read",
            f.rwnd_limited_pct,
            crate::units::Bytes(f.granted_rcv_bytes),
            crate::units::BitRate(bound),
            rtt * 1e3,
            bound / f.rate_bps
        ),
        fix: Some("a receiver that reads as fast as the path delivers: find what stalls it (a slow disk behind it, a paused or descheduled process, small reads), or read more streams in parallel".into()),
        evidence,
        share_pct: Some(f.rwnd_limited_pct.min(100.0)),
        during_s: None,
    })
}

/// The window: limited most of the time, by the receiver's window with window / minimum RTT near the
/// rate, or by the sender's buffer with no queue built and the data in flight filling its usable part.
fn window(f: &Facts) -> Option<Limit> {
    let limited = f.rwnd_limited_pct + f.sndbuf_limited_pct;
    let (rtt, n) = (f.rtt_min_s?, f64::from(f.streams.max(1)));
    if limited < WINDOW_HIT_PCT || rtt <= 0.0 || reader(f).is_some() {
        return None;
    }
    let by_sndbuf = f.sndbuf_limited_pct > f.rwnd_limited_pct;
    if by_sndbuf && limited < 50.0 {
        return None;
    }
    let in_flight = f.rate_bps * rtt / 8.0 / n;
    let (bound, held) = window_bound(f, by_sndbuf, (rtt, n, in_flight), limited);
    if !held {
        return None;
    }
    let mut evidence = seen(f);
    evidence.extend([
        ev("receive-window limited", f.rwnd_limited_pct, "%"),
        ev("send-buffer limited", f.sndbuf_limited_pct, "%"),
        ev("window", f.window_bytes, "bytes"),
        ev("send buffer granted", f.granted_snd_bytes as f64, "bytes"),
        ev("in flight per stream", in_flight, "bytes"),
    ]);
    // A receiver whose CPU held it filled its buffer with unread data: the window it left is the
    // CPU's doing, and a larger one would not help; nor would a higher tcp_rmem maximum, which
    // auto-tuning reaches the sooner for the data waiting there.
    if !by_sndbuf && cpu(f, false).is_some() {
        return None;
    }
    let (kind, fix, cap) = window_fix(f, by_sndbuf, rtt);
    let what = if by_sndbuf {
        format!(
            "the send buffer: limited {:.0}% of the time, no queue built, and the {} in flight per stream fill the {} buffer the sender was granted",
            f.sndbuf_limited_pct,
            crate::units::Bytes(in_flight as u64),
            crate::units::Bytes(f.granted_snd_bytes)
        )
    } else {
        evidence.push(ev("window / minimum RTT", bound, "bit/s"));
        format!(
            "the window: limited {:.0}% of the time, and {} stream(s) × {} over the minimum RTT of {:.1} ms allow {}, about the rate",
            f.rwnd_limited_pct,
            f.streams,
            crate::units::Bytes(f.window_bytes as u64),
            rtt * 1e3,
            crate::units::BitRate(bound)
        )
    };
    Some(Limit {
        kind,
        confidence: Confidence::Medium,
        why: cap.map_or(what.clone(), |c| format!("{c}: {what}")),
        fix: Some(fix),
        evidence,
        share_pct: Some(limited.min(100.0)),
        during_s: None,
    })
}

/// The window's bound on the rate (the send buffer's or the peer's window over the minimum RTT), and
/// whether it held the rate.
fn window_bound(
    f: &Facts,
    by_sndbuf: bool,
    (rtt, n, in_flight): (f64, f64, f64),
    limited: f64,
) -> (f64, bool) {
    if by_sndbuf {
        // Linux counts each segment's overhead against the send buffer: the data it holds in flight
        // is a half to three quarters of it. A queue that would lift the buffer's bound over the rate
        // as much as the window's may be (the mean RTT over 1.25 times the minimum) says the path,
        // not the buffer, was full.
        let fill = in_flight / f.granted_snd_bytes.max(1) as f64;
        let queue = f.queue_ratio().is_some_and(|q| q > WINDOW_EXPLAINS_RATE);
        let bound = n * f.granted_snd_bytes as f64 * 8.0 / rtt;
        let held = f.granted_snd_bytes > 0 && (SNDBUF_FILL.0..=SNDBUF_FILL.1).contains(&fill) && !queue;
        return (bound, held);
    }
    // Limited most of the time, or (a paced sender such as BBR is held by its pacer between the
    // times the window stops it) hit often enough, the window kept full (the rate at window /
    // minimum RTT) and no queue built.
    let bound = n * f.window_bytes * 8.0 / rtt;
    let kept_full =
        bound <= WINDOW_KEPT_FULL * f.rate_bps && f.queue_ratio().is_some_and(|q| q < QUEUE_BUILT);
    let held =
        f.window_bytes > 0.0 && bound <= WINDOW_EXPLAINS_RATE * f.rate_bps && (limited >= 50.0 || kept_full);
    (bound, held)
}

/// A send buffer holding this share of itself in flight (its data, the rest the kernel's overhead per
/// segment) is full: Linux's per-skb overhead leaves a half to three quarters of it for data.
const SNDBUF_FILL: (f64, f64) = (0.2, 1.0);

/// Which window limit it is (a system cap when the kernel capped what was asked for, or auto-tuning
/// reached its sysctl's maximum) and the fix, with the size 1 Gbit/s per stream would need.
fn window_fix(f: &Facts, by_sndbuf: bool, rtt_s: f64) -> (LimitKind, String, Option<String>) {
    use crate::units::Bytes;
    // Linux gives a window about half its buffer: the buffer a rate needs is twice its BDP.
    let need = |rate: f64| Bytes((2.0 * rate * rtt_s / 8.0) as u64);
    let asked = f.window_requested.filter(|&w| {
        let granted = f.granted_rcv_bytes.min(f.granted_snd_bytes);
        granted > 0 && granted < 2 * w
    });
    if let Some(w) = asked {
        return (
            LimitKind::SystemCap,
            format!(
                "raise net.core.rmem_max and net.core.wmem_max to at least {} on both hosts",
                2 * w
            ),
            Some(format!(
                "a system cap, net.core.rmem_max/wmem_max: the kernel granted less than the {} per stream asked for",
                Bytes(w)
            )),
        );
    }
    // Without -w, auto-tuning grew the buffer to its sysctl's maximum and stopped there.
    let at_max = |granted: u64, max: Option<u64>| {
        f.window_requested.is_none() && max.is_some_and(|m| m > 0 && granted as f64 >= 0.9 * m as f64)
    };
    let (sysctl, end, granted, max) = if by_sndbuf {
        (
            "net.ipv4.tcp_wmem",
            "sender",
            f.granted_snd_bytes,
            f.sender_wmem_max,
        )
    } else {
        (
            "net.ipv4.tcp_rmem",
            "receiver",
            f.granted_rcv_bytes,
            f.receiver_rmem_max,
        )
    };
    if at_max(granted, max) {
        return (
            LimitKind::SystemCap,
            format!(
                "raise {sysctl}'s third field at the {end} (1 Gbit/s per stream at this RTT needs {}; each doubling doubles the rate this limit allows)",
                need(1e9).0
            ),
            Some(format!(
                "a system cap, {sysctl}: auto-tuning grew the {end}'s buffer to its maximum of {}",
                Bytes(max.unwrap_or(0))
            )),
        );
    }
    let kind = if by_sndbuf {
        LimitKind::SendBuffer
    } else {
        LimitKind::ReceiveWindow
    };
    let knob = if by_sndbuf {
        "a larger send buffer at the sender (-w, or net.ipv4.tcp_wmem's maximum)"
    } else {
        "a larger window (-w, or net.ipv4.tcp_rmem's maximum at the receiver)"
    };
    (
        kind,
        format!(
            "{knob}; 1 Gbit/s per stream at this RTT needs about {}",
            need(1e9)
        ),
        None,
    )
}

/// The path full: the test built a standing queue at a bottleneck (the mean RTT well over the
/// minimum), and the window, which would otherwise explain a queue of the senders' own making,
/// did not hold the rate.
fn path_full(f: &Facts) -> Option<Limit> {
    let q = f.queue_ratio()?;
    let (min, avg) = (f.rtt_min_s?, f.rtt_avg_s?);
    // A CPU with none to spare delays acknowledgements and reads, which inflates the RTT too.
    let busy = cpu(f, true).is_some() || cpu(f, false).is_some();
    let other = window(f).is_some() || reader(f).is_some() || loss(f).is_some();
    if q < QUEUE_BUILT || avg - min < QUEUE_MIN_S || busy || other {
        return None;
    }
    let mut evidence = seen(f);
    evidence.push(ev("queueing delay", (avg - min) * 1e3, "ms"));
    Some(Limit {
        kind: LimitKind::PathCapacity,
        confidence: Confidence::Medium,
        why: format!(
            "the path's capacity: the test kept a queue of {:.1} ms at a bottleneck (mean RTT {:.1} ms over a minimum of {:.1} ms), so the path was full at {}",
            (avg - min) * 1e3,
            avg * 1e3,
            min * 1e3,
            crate::units::BitRate(f.rate_bps)
        ),
        fix: None,
        evidence,
        share_pct: None,
        during_s: None,
    })
}

/// What the loss verdict cannot tell apart from the hosts' evidence alone (the path's own counters
/// can: `path::refine`).
const LOOK_ALIKE: &str = " (random loss on the path, or a bottleneck buffer too small for the bandwidth-delay product: the two look alike here)";

/// Loss and congestion control: retransmissions, no more queue than loss itself makes (or a buffer
/// too small to hold a BDP, which the verdict names), and the rate what the Mathis bound allows at
/// that loss rate.
fn loss(f: &Facts) -> Option<Limit> {
    let p = f.loss()?;
    let rtt = f.rtt_min_s.filter(|r| *r > 0.0)?;
    if f.queue_ratio().is_some_and(|q| q >= QUEUE_WITH_LOSS) || f.mss_bytes == 0 {
        return None;
    }
    // Mathis et al.: MSS / RTT × sqrt(3/2) / sqrt(p) per stream.
    let mathis = f64::from(f.streams.max(1)) * f64::from(f.mss_bytes) * 8.0 / rtt * 1.5f64.sqrt() / p.sqrt();
    let fits = f.rate_bps <= MATHIS_FITS * mathis && f.rate_bps >= mathis / MATHIS_FITS;
    if !fits {
        return None;
    }
    let mut evidence = seen(f);
    evidence.extend([
        ev("loss rate", p * 100.0, "%"),
        ev("Mathis bound", mathis, "bit/s"),
    ]);
    Some(Limit {
        kind: LimitKind::LossCongestion,
        confidence: Confidence::Low,
        why: format!(
            "loss and congestion control: {:.3}% of segments retransmitted with no standing queue to speak of, and the Mathis bound at that loss and the minimum RTT is {}, near the rate{LOOK_ALIKE}",
            p * 100.0,
            crate::units::BitRate(mathis)
        ),
        fix: Some("find the loss (a bad link, a policer, a shallow buffer); a congestion control less sensitive to random loss (BBR) or more streams (-P) ride it out".into()),
        evidence,
        share_pct: None,
        during_s: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 10 s TCP direction at `rate`, one stream, minimum RTT `min_ms`, mean `avg_ms`.
    fn facts(rate: f64, min_ms: f64, avg_ms: f64) -> Facts {
        Facts {
            rate_bps: rate,
            duration_s: 10.0,
            streams: 1,
            rtt_min_s: Some(min_ms / 1e3),
            rtt_avg_s: Some(avg_ms / 1e3),
            mss_bytes: 1448,
            segs_out: 1_000_000,
            ..Facts::default()
        }
    }

    fn busy_thread() -> EndCpu {
        EndCpu {
            bound_thread: Some((0.97, 0.0)),
            waits_known: true,
            ..EndCpu::default()
        }
    }

    #[test]
    fn every_kinds_json_name_is_its_label() {
        for k in LimitKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.label());
            assert_eq!(LimitKind::from_label(k.label()), Some(k));
        }
    }

    fn kinds(f: &Facts) -> Vec<LimitKind> {
        decide(f).iter().map(|l| l.kind).collect()
    }

    #[test]
    fn a_full_path_is_its_capacity_never_the_window() {
        // 1 Gbit/s at 100 ms with 35 ms of standing queue; the window grew to cover it and the
        // senders saw it as their limit most of the time.
        let f = Facts {
            rwnd_limited_pct: 80.0,
            window_bytes: 16_875_000.0,
            ..facts(953e6, 100.0, 135.0)
        };
        assert_eq!(kinds(&f), vec![LimitKind::PathCapacity]);
        let l = &decide(&f)[0];
        assert!(l.why.contains("queue of 35.0 ms") && l.fix.is_none(), "{}", l.why);
    }

    #[test]
    fn a_buffer_full_of_unread_data_is_the_receiving_application_not_the_window() {
        // 60 Mbit/s at 40 ms, the window holding the sender 85% of the time, though the receiver's
        // 8 MiB buffer could carry 839 Mbit/s: the reader stalled.
        let stalled = Facts {
            rwnd_limited_pct: 85.0,
            window_bytes: 300_000.0,
            granted_rcv_bytes: 8 << 20,
            granted_snd_bytes: 4 << 20,
            ..facts(60e6, 40.0, 41.0)
        };
        assert_eq!(kinds(&stalled), vec![LimitKind::ReceivingApplication]);
        assert!(decide(&stalled)[0].why.contains("had not read"));
        // The same with a buffer the rate fills: the window, as before.
        let small = Facts {
            granted_rcv_bytes: 600_000,
            ..stalled.clone()
        };
        assert_eq!(kinds(&small), vec![LimitKind::ReceiveWindow]);
        // A receiver whose CPU was the limit: that is why it read slowly.
        let busy = Facts {
            receiver_cpu: busy_thread(),
            ..stalled.clone()
        };
        assert_eq!(kinds(&busy), vec![LimitKind::ReceiverCpu]);
        // A foreign receiver that reports no buffer: never guessed.
        let foreign = Facts {
            granted_rcv_bytes: 0,
            ..stalled
        };
        assert!(!kinds(&foreign).contains(&LimitKind::ReceivingApplication));
    }

    #[test]
    fn a_small_window_is_named_with_its_bound_and_a_capped_one_names_the_sysctl() {
        // 64 KiB over 10 ms allows 52 Mbit/s; the test ran at 50 and queued nothing.
        let f = Facts {
            rwnd_limited_pct: 95.0,
            window_bytes: 65536.0,
            ..facts(50e6, 10.0, 10.5)
        };
        let l = decide(&f);
        assert_eq!(l[0].kind, LimitKind::ReceiveWindow);
        assert!(l[0].why.contains("52.4 Mbit/s"), "{}", l[0].why);
        // -w 4M asked, the kernel granted only 416 KiB: the system cap, with the sysctl.
        let capped = Facts {
            window_requested: Some(4 << 20),
            granted_snd_bytes: 425_984,
            granted_rcv_bytes: 425_984,
            window_bytes: 200_000.0,
            rwnd_limited_pct: 95.0,
            ..facts(155e6, 10.0, 10.5)
        };
        let l = decide(&capped);
        assert_eq!(l[0].kind, LimitKind::SystemCap);
        assert!(l[0].fix.as_deref().unwrap().contains("net.core.rmem_max"));
        // Send-buffer limited rather than receive-window limited: the send buffer.
        // Send-buffer limited: 62.5 KB in flight per stream of a 128 KiB buffer.
        let snd = Facts {
            rwnd_limited_pct: 10.0,
            sndbuf_limited_pct: 85.0,
            granted_snd_bytes: 131_072,
            ..f
        };
        assert_eq!(kinds(&snd), vec![LimitKind::SendBuffer]);
    }

    #[test]
    fn auto_tuning_at_its_sysctls_maximum_is_a_system_cap_naming_that_sysctl() {
        // No -w; the sender's buffer grew to tcp_wmem's 4 MiB maximum and held 2.5 MB in flight at
        // 100 ms (200 Mbit/s), the receiver's window far larger: the sender's sysctl.
        let f = Facts {
            sndbuf_limited_pct: 90.0,
            granted_snd_bytes: 4 << 20,
            sender_wmem_max: Some(4 << 20),
            window_bytes: 12e6,
            ..facts(200e6, 100.0, 100.5)
        };
        let l = decide(&f);
        assert_eq!(l[0].kind, LimitKind::SystemCap, "{l:?}");
        let fix = l[0].fix.as_deref().unwrap();
        assert!(
            fix.contains("net.ipv4.tcp_wmem") && fix.contains("sender"),
            "{fix}"
        );
        // The same buffer under its maximum: the send buffer, its knob named.
        let under = Facts {
            sender_wmem_max: Some(64 << 20),
            ..f.clone()
        };
        assert_eq!(kinds(&under), vec![LimitKind::SendBuffer]);
        // A queue built while the buffer limited: the path was full, not the buffer.
        let full = Facts {
            rtt_avg_s: Some(0.130),
            ..f
        };
        assert_eq!(kinds(&full), vec![LimitKind::PathCapacity]);
        // The receiver's buffer at tcp_rmem's maximum, its window the limit: that sysctl.
        let rcv = Facts {
            rwnd_limited_pct: 90.0,
            window_bytes: 3_145_728.0,
            granted_rcv_bytes: 6 << 20,
            receiver_rmem_max: Some(6 << 20),
            ..facts(240e6, 100.0, 100.2)
        };
        let l = decide(&rcv);
        assert_eq!(l[0].kind, LimitKind::SystemCap, "{l:?}");
        assert!(l[0].fix.as_deref().unwrap().contains("net.ipv4.tcp_rmem"));
        // The same buffer at its maximum behind a receiver whose CPU held it (a worker thread
        // waited for a CPU 93% of its time: bench/diagnosis's receiver-quota, seen in CI): the
        // unread data grew the buffer, the CPU is the limit, not the sysctl.
        let starved = Facts {
            receiver_cpu: EndCpu {
                bound_thread: Some((0.01, 0.93)),
                waits_known: true,
                ..EndCpu::default()
            },
            ..rcv.clone()
        };
        assert_eq!(kinds(&starved), vec![LimitKind::ReceiverCpu]);
        // BBR behind the same cap (emulated 200 Mbit/s, 40 ms): its pacer holds it between the
        // window's stops, limited only 33% of the time, yet 303,744 B / 40.08 ms = 60.6 Mbit/s is
        // the 59.5 measured, with no queue.
        let bbr = Facts {
            rwnd_limited_pct: 32.6,
            window_bytes: 303_744.0,
            granted_rcv_bytes: 524_288,
            receiver_rmem_max: Some(524_288),
            ..facts(59.5e6, 40.08, 40.45)
        };
        assert_eq!(kinds(&bbr), vec![LimitKind::SystemCap]);
        // The same shares with a window well above the rate: not the window.
        let loose = Facts {
            window_bytes: 600_000.0,
            ..bbr
        };
        assert!(!kinds(&loose).contains(&LimitKind::SystemCap));
    }

    #[test]
    fn a_servers_cap_kept_is_the_peers_limit() {
        let f = Facts {
            peer_cap_bps: Some(100e6),
            ..facts(97e6, 10.0, 10.0)
        };
        assert_eq!(kinds(&f), vec![LimitKind::PeerLimit]);
        // Well under the cap: something else.
        let under = Facts {
            peer_cap_bps: Some(1e9),
            ..facts(97e6, 10.0, 10.0)
        };
        assert!(!kinds(&under).contains(&LimitKind::PeerLimit));
    }

    #[test]
    fn a_cpu_limit_names_its_cause_quota_steal_or_other_work() {
        let quota = Facts {
            sender_cpu: EndCpu {
                quota: Some((0.25, 96.0)),
                ..EndCpu::default()
            },
            ..facts(14e9, 0.04, 0.05)
        };
        let l = decide(&quota);
        assert_eq!(l[0].kind, LimitKind::SenderCpu);
        assert!(l[0].why.contains("0.25 CPUs") && l[0].fix.as_deref().unwrap().contains("cpu.max"));
        // A quota rarely reached says nothing.
        let slack = Facts {
            sender_cpu: EndCpu {
                quota: Some((1.0, 3.0)),
                waits_known: true,
                ..EndCpu::default()
            },
            ..facts(14e9, 0.04, 0.05)
        };
        assert_eq!(kinds(&slack), vec![LimitKind::Unknown]);
        let shared = Facts {
            receiver_cpu: EndCpu {
                bound_thread: Some((0.45, 0.5)),
                waits_known: true,
                ..EndCpu::default()
            },
            ..facts(9e9, 0.04, 0.05)
        };
        let l = decide(&shared);
        assert_eq!(l[0].kind, LimitKind::ReceiverCpu);
        assert!(l[0].why.contains("waited for a CPU 50%"), "{}", l[0].why);
        let stolen = Facts {
            sender_cpu: EndCpu {
                steal_pct: Some(30.0),
                ..busy_thread()
            },
            ..facts(9e9, 0.04, 0.05)
        };
        assert!(decide(&stolen)[0].why.contains("steal"));
    }

    #[test]
    fn a_window_bound_well_above_the_rate_is_not_the_limit() {
        // Reordering: limited times high, but the window allows 1.6 times the rate.
        let f = Facts {
            rwnd_limited_pct: 70.0,
            window_bytes: 2_000_000.0,
            ..facts(100e6, 100.0, 100.0)
        };
        assert!(!kinds(&f).contains(&LimitKind::ReceiveWindow));
    }

    #[test]
    fn random_loss_fits_mathis_and_says_what_it_cannot_tell_apart() {
        // 0.1% loss at 50 ms: Mathis allows 1448 B × 8 / 50 ms × 1.22 / sqrt(0.001) ≈ 8.9 Mbit/s;
        // 7.1 Mbit/s measured, no queue.
        let f = Facts {
            retransmits: 1_000,
            ..facts(7.1e6, 50.0, 51.0)
        };
        let l = decide(&f);
        assert_eq!(l[0].kind, LimitKind::LossCongestion, "{l:?}");
        assert!(l[0].why.contains("look alike"), "{}", l[0].why);
        // The same loss with a queue built is a full path's congestion, not random loss.
        let full = Facts {
            retransmits: 1_000,
            ..facts(7.1e6, 50.0, 80.0)
        };
        assert_eq!(kinds(&full), vec![LimitKind::PathCapacity]);
        // Reno under 1% random loss on an emulated 20 ms path with no rate limit: delayed
        // acknowledgements and recovery lifted the mean RTT 1.13 × with no bottleneck at all; the
        // loss explains the rate (Mathis 7.6 Mbit/s), the path was never full.
        let recovering = Facts {
            retransmits: 8_650,
            ..facts(6.76e6, 20.0, 22.6)
        };
        assert_eq!(kinds(&recovering), vec![LimitKind::LossCongestion]);
        // Loss far too small to explain the rate: not the limit.
        let rare = Facts {
            retransmits: 1,
            ..facts(7.1e6, 50.0, 51.0)
        };
        assert_eq!(kinds(&rare), vec![LimitKind::Unknown]);
    }

    #[test]
    fn pacing_kept_is_the_only_verdict_and_a_pace_not_kept_is_none() {
        let f = Facts {
            paced_bps: Some(100e6),
            sender_cpu: busy_thread(),
            ..facts(99e6, 10.0, 10.0)
        };
        assert_eq!(kinds(&f), vec![LimitKind::Pacing]);
        let missed = Facts {
            paced_bps: Some(1e9),
            sender_cpu: busy_thread(),
            ..facts(400e6, 10.0, 10.0)
        };
        assert_eq!(kinds(&missed), vec![LimitKind::SenderCpu]);
    }

    #[test]
    fn loopback_with_every_cpu_busy_is_the_cpus_never_a_full_path() {
        // The demo: 4 streams on a 2-CPU host, no thread pegged alone, both CPUs busy; the RTT rose
        // from 0.04 to 0.43 ms with the hosts' own buffering, which is no bottleneck's queue.
        let host = |pct: f64| EndCpu {
            host_busy_pct: Some(pct),
            ..EndCpu::default()
        };
        let f = Facts {
            sender_cpu: host(99.0),
            receiver_cpu: host(99.0),
            ..facts(46e9, 0.04, 0.43)
        };
        assert_eq!(kinds(&f), vec![LimitKind::SenderCpu, LimitKind::ReceiverCpu]);
        // Idle CPUs and a sub-millisecond rise: unknown, never "the path".
        let idle = Facts {
            sender_cpu: host(40.0),
            ..facts(46e9, 0.04, 0.43)
        };
        assert_eq!(kinds(&idle), vec![LimitKind::Unknown]);
        // A busy host whose threads are known to have idled without waiting for a CPU: another
        // process's load, not this test's limit.
        let other = Facts {
            sender_cpu: EndCpu {
                waits_known: true,
                ..host(99.0)
            },
            ..facts(46e9, 0.04, 0.43)
        };
        assert_eq!(kinds(&other), vec![LimitKind::Unknown]);
    }

    #[test]
    fn cpus_bound_at_both_ends_are_both_said() {
        let f = Facts {
            sender_cpu: busy_thread(),
            receiver_cpu: busy_thread(),
            rtt_min_s: None,
            rtt_avg_s: None,
            ..facts(30e9, 0.0, 0.0)
        };
        assert_eq!(kinds(&f), vec![LimitKind::SenderCpu, LimitKind::ReceiverCpu]);
    }

    #[test]
    fn failures_short_tests_and_missing_evidence_say_so_never_guess() {
        let failed = Facts {
            failed: Some("stream 0: reset".into()),
            ..facts(1e9, 10.0, 10.0)
        };
        let l = decide(&failed);
        assert_eq!(l[0].kind, LimitKind::Unknown);
        assert!(l[0].why.contains("failed"));
        // Two seconds at 200 ms is ten round trips: enough; 1.5 s is not.
        let short = Facts {
            duration_s: 1.5,
            ..facts(1e9, 200.0, 200.0)
        };
        assert!(decide(&short)[0].why.contains("too short"));
        // A foreign peer's direction without TCP_INFO: unknown, with the rate seen.
        let bare = Facts {
            rate_bps: 1e9,
            duration_s: 10.0,
            streams: 1,
            ..Facts::default()
        };
        let l = decide(&bare);
        assert_eq!((l.len(), l[0].kind), (1, LimitKind::Unknown));
        assert_eq!(l[0].evidence[0].name, "rate");
    }
}
