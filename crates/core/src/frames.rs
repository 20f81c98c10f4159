//! Isochronous frames: video-like traffic, one frame of varying size at a fixed rate, as iperf 2's
//! `--isochronous FPS:MEAN,STDDEV` defines it (frame sizes drawn from a log-normal distribution
//! whose mean and standard deviation are the rates given, divided by the frame rate), and what a
//! receiver makes of it: which frames arrived whole, which were lost or skipped by a late sender,
//! each whole frame's latency from the moment it was due to the arrival of its last byte, and the
//! frames late by more than a frame period. Without I/O: the sender's clock ([`FrameClock`]) and the
//! receiver's accounting ([`FrameReceipt`]) take the time as input, so they are tested exactly.
//! docs/isochronous.md has the definitions and how they differ from iperf 2's own counts.

use crate::transactions::{HistogramBin, LatencySummary, Moments};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, LogNormal};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// A frame rate, mean and standard deviation of the bit rate: `--isochronous FPS:MEAN,STDDEV`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FrameSpec {
    /// Frames a second.
    pub fps: f64,
    /// The mean rate, bits a second (a frame's mean size is this ÷ fps ÷ 8 bytes).
    pub mean_bps: f64,
    /// The rate's standard deviation, bits a second (0: every frame the mean size).
    pub stddev_bps: f64,
    /// The gap between one frame's datagrams, nanoseconds (iperf 2's `--ipg`; 0: back to back).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ipg_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why `--isochronous` was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FrameSpecError {
    /// Not `FPS[:MEAN[,STDDEV]]`.
    #[error("--isochronous {0:?}: the form is FPS:MEAN,STDDEV (e.g. 60:20m,5m: 60 frames a second, a mean of 20 Mbit/s, a standard deviation of 5 Mbit/s)")]
    Form(String),
    /// A part that is not a number.
    #[error("--isochronous: {what} {given:?} is not a number (k, m, g for bits, K, M, G for bytes)")]
    Number {
        /// Which part.
        what: &'static str,
        /// As given.
        given: String,
    },
    /// iperf 2's packets-a-frame suffix.
    #[error("--isochronous: a mean in packets ({0:?}) is not taken; give bits a second (k, m, g) or bytes (K, M, G)")]
    Packets(String),
    /// A frame rate out of range.
    #[error("--isochronous: {0} frames a second is out of range (above 0, at most {max})", max = FrameSpec::MAX_FPS)]
    Fps(f64),
    /// A mean that is not positive.
    #[error("--isochronous: a mean of {0} bit/s; it must be above 0")]
    Mean(f64),
    /// A negative or absurd standard deviation.
    #[error("--isochronous: a standard deviation of {0} bit/s; it must be 0 or more and at most 10 times the mean")]
    Stddev(f64),
    /// A mean frame too large to send.
    #[error("--isochronous: a mean frame of {0:.0} bytes; at most {max} bytes a frame", max = FrameSpec::MAX_FRAME_BYTES)]
    FrameTooLarge(f64),
    /// A gap between a frame's datagrams as long as the frames' period (ms, ms).
    #[error("--ipg {0} ms: the gap within a frame must be shorter than its period ({1:.3} ms)")]
    Ipg(f64, f64),
}

impl FrameSpec {
    /// The highest frame rate taken (a frame every 100 µs).
    pub const MAX_FPS: f64 = 10_000.0;
    /// The largest mean frame taken, bytes.
    pub const MAX_FRAME_BYTES: f64 = 64.0 * 1024.0 * 1024.0;
    /// iperf 2's defaults: 60 frames a second, 20 Mbit/s, no variation.
    pub const DEFAULT: FrameSpec = FrameSpec {
        fps: 60.0,
        mean_bps: 20e6,
        stddev_bps: 0.0,
        ipg_ns: 0,
    };

    /// Reads `FPS[:MEAN[,STDDEV]]` as iperf 2 does (an empty string: its defaults; numbers with k,
    /// m, g for thousands of bits, K, M, G for thousands of bytes) and checks it.
    pub fn parse(s: &str) -> Result<FrameSpec, FrameSpecError> {
        let mut spec = FrameSpec::DEFAULT;
        if s.is_empty() {
            return Ok(spec);
        }
        let (fps, rest) = match s.split_once(':') {
            Some((f, r)) => (f, Some(r)),
            None => (s, None),
        };
        spec.fps = fps.trim().parse().map_err(|_| FrameSpecError::Number {
            what: "the frame rate",
            given: fps.into(),
        })?;
        if let Some(rest) = rest {
            let mut parts = rest.split(',');
            let mean = parts.next().unwrap_or_default();
            spec.mean_bps = quantity(mean, "the mean")?;
            spec.stddev_bps = match parts.next() {
                Some(sd) => quantity(sd, "the standard deviation")?,
                None => 0.0,
            };
            if parts.next().is_some() {
                return Err(FrameSpecError::Form(s.into()));
            }
        }
        spec.check()
    }

    /// Itself when every figure is in range.
    pub fn check(self) -> Result<FrameSpec, FrameSpecError> {
        if !(self.fps > 0.0 && self.fps <= Self::MAX_FPS) {
            return Err(FrameSpecError::Fps(self.fps));
        }
        if !(self.mean_bps > 0.0 && self.mean_bps.is_finite()) {
            return Err(FrameSpecError::Mean(self.mean_bps));
        }
        if !(self.stddev_bps >= 0.0 && self.stddev_bps <= 10.0 * self.mean_bps) {
            return Err(FrameSpecError::Stddev(self.stddev_bps));
        }
        if self.mean_frame_bytes() > Self::MAX_FRAME_BYTES {
            return Err(FrameSpecError::FrameTooLarge(self.mean_frame_bytes()));
        }
        if self.ipg_ns >= self.period_ns() {
            return Err(FrameSpecError::Ipg(
                self.ipg_ns as f64 / 1e6,
                self.period_ns() as f64 / 1e6,
            ));
        }
        Ok(self)
    }

    /// The time between frames, nanoseconds.
    pub fn period_ns(&self) -> u64 {
        (1e9 / self.fps).round() as u64
    }

    /// A frame's mean size, bytes.
    pub fn mean_frame_bytes(&self) -> f64 {
        self.mean_bps / self.fps / 8.0
    }
}

impl std::fmt::Display for FrameSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} frames/s, mean {:.3} Mbit/s, stddev {:.3} Mbit/s",
            self.fps,
            self.mean_bps / 1e6,
            self.stddev_bps / 1e6
        )
    }
}

/// A number with iperf 2's suffixes: k, m, g thousands of bits; K, M, G thousands of bytes.
fn quantity(s: &str, what: &'static str) -> Result<f64, FrameSpecError> {
    let s = s.trim();
    let bad = || FrameSpecError::Number {
        what,
        given: s.into(),
    };
    let (num, scale) = match s.chars().last() {
        Some('k') => (&s[..s.len() - 1], 1e3),
        Some('m') => (&s[..s.len() - 1], 1e6),
        Some('g') => (&s[..s.len() - 1], 1e9),
        Some('K') => (&s[..s.len() - 1], 8e3),
        Some('M') => (&s[..s.len() - 1], 8e6),
        Some('G') => (&s[..s.len() - 1], 8e9),
        Some('p' | 'P') => return Err(FrameSpecError::Packets(s.into())),
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    if !v.is_finite() {
        return Err(bad());
    }
    Ok(v * scale)
}

/// Frame sizes as iperf 2 draws them: a rate from the log-normal distribution with the spec's mean
/// and standard deviation, divided by the frame rate and 8, and at least `min_bytes`.
pub struct FrameSizes {
    rng: SmallRng,
    dist: Option<LogNormal<f64>>,
    spec: FrameSpec,
    min_bytes: u64,
}

impl FrameSizes {
    /// Sizes for `spec`, none below `min_bytes`, drawn from `seed` (the same seed, the same sizes).
    pub fn new(spec: FrameSpec, min_bytes: u64, seed: u64) -> FrameSizes {
        let cv = spec.stddev_bps / spec.mean_bps;
        FrameSizes {
            rng: SmallRng::seed_from_u64(seed),
            dist: (cv > 0.0)
                .then(|| LogNormal::from_mean_cv(spec.mean_bps, cv).ok())
                .flatten(),
            spec,
            min_bytes,
        }
    }

    /// The next frame's size, bytes.
    pub fn next_bytes(&mut self) -> u64 {
        let bps = match &self.dist {
            Some(d) => d.sample(&mut self.rng),
            None => self.spec.mean_bps,
        };
        // An extreme draw is held to four mean frames' worth, so one frame cannot stall the test.
        let bytes = (bps / self.spec.fps / 8.0).min(4.0 * self.spec.mean_frame_bytes().max(1.0));
        (bytes as u64).max(self.min_bytes)
    }

    /// A seed from the clock (for senders that are not given one).
    pub fn any_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }
}

/// The sender's schedule: frame `n` (from 1) is due `(n - 1)` periods after the first. A sender
/// that comes back for its next frame after that frame's time has passed skips to the first frame
/// still ahead (iperf 2's `wait_tick`): the frames skipped are its slips.
#[derive(Debug, Clone)]
pub struct FrameClock {
    period_ns: u64,
    start_ns: Option<u64>,
    frame: u32,
    slips: u64,
    skipped: u64,
}

/// The frame to send next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// Its number, from 1.
    pub frame: u32,
    /// The frame sent before it (0 before the first): frames between were skipped.
    pub prev: u32,
    /// When it is due, on the caller's clock.
    pub due_ns: u64,
}

impl FrameClock {
    /// A schedule of a frame every `period_ns` (at least 1).
    pub fn new(period_ns: u64) -> FrameClock {
        FrameClock {
            period_ns: period_ns.max(1),
            start_ns: None,
            frame: 0,
            slips: 0,
            skipped: 0,
        }
    }

    /// The next frame at `now_ns`: the first, due now, on the first call; then the first frame due
    /// after `now_ns`.
    pub fn next(&mut self, now_ns: u64) -> Tick {
        let prev = self.frame;
        let Some(start) = self.start_ns else {
            self.start_ns = Some(now_ns);
            self.frame = 1;
            return Tick {
                frame: 1,
                prev,
                due_ns: now_ns,
            };
        };
        let passed = now_ns.saturating_sub(start) / self.period_ns;
        let next = (passed + 2).max(u64::from(prev) + 1).min(u64::from(u32::MAX));
        let next = next as u32;
        if next > prev + 1 {
            self.slips += 1;
            self.skipped += u64::from(next - prev - 1);
        }
        self.frame = next;
        Tick {
            frame: next,
            prev,
            due_ns: self.due_ns(next),
        }
    }

    /// When frame `n` is due (the first call's time for frame 1).
    pub fn due_ns(&self, n: u32) -> u64 {
        self.start_ns.unwrap_or(0) + u64::from(n.saturating_sub(1)) * self.period_ns
    }

    /// When the first frame was due (None before it).
    pub fn start_ns(&self) -> Option<u64> {
        self.start_ns
    }

    /// Frames sent (the last frame's number: skipped ones included).
    pub fn frames(&self) -> u32 {
        self.frame
    }

    /// Times the sender came back late and skipped frames.
    pub fn slips(&self) -> u64 {
        self.slips
    }

    /// Frames skipped in all.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
}

/// One datagram of a frame, as the receiver reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDatagram {
    /// The frame's number (from 1).
    pub frame: u32,
    /// The frame the sender sent before it: those between were skipped.
    pub prev: u32,
    /// The datagram's sequence number.
    pub seq: u64,
    /// Its length, bytes.
    pub len: u32,
    /// The frame's bytes left, this datagram's included: the frame's last has `remaining == len`.
    pub remaining: u32,
    /// The frame's size as the datagram states it (the first of a frame has `remaining == size`).
    pub size: u32,
    /// When the frame was due, nanoseconds on the sender's clock (Unix time).
    pub due_ns: i128,
    /// When the datagram arrived, nanoseconds on the receiver's clock (Unix time).
    pub arrival_ns: i128,
}

/// Keeps a skip range that holds `id` only where `id` is at one of its ends, trimmed off (a frame
/// heard inside a range claimed skipped: a hostile or confused sender; the middle is dropped).
fn split(r: &mut (u32, u32), id: u32) -> bool {
    if r.0 == id && r.1 > id {
        r.0 = id + 1;
        true
    } else if r.1 == id && r.0 < id {
        r.1 = id - 1;
        true
    } else {
        false
    }
}

/// The frames that may still complete: those within this many of the highest seen.
const WINDOW: u32 = 256;

/// A frame some of whose datagrams arrived.
#[derive(Debug, Clone, Copy)]
struct Partial {
    size: u32,
    first_seq: Option<u64>,
    last_seq: Option<u64>,
    datagrams: u64,
    last_arrival_ns: i128,
    due_ns: i128,
    done: bool,
}

/// The receiver's accounting of a stream of frames.
#[derive(Default)]
pub struct FrameReceipt {
    /// Frames taken from a reliable stream (`whole_frame`, `begun_frame`), which numbers them in turn.
    stream_frames: u64,
    period_ns: u64,
    open: BTreeMap<u32, Partial>,
    /// Frames the sender skipped, by the frame that followed them: (first skipped, last skipped).
    skips: BTreeMap<u32, (u32, u32)>,
    /// Every frame up to this one is counted.
    settled: u32,
    first: Option<u32>,
    highest: u32,
    complete: u64,
    lost: u64,
    skipped: u64,
    too_old: u64,
    clock_behind: u64,
    latency: Moments,
}

impl std::fmt::Debug for FrameReceipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReceipt")
            .field("period_ns", &self.period_ns)
            .field("highest", &self.highest)
            .field("complete", &self.complete)
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl FrameReceipt {
    /// Accounting for frames every `period_ns` (0 when not yet known: each datagram states it).
    pub fn new(period_ns: u64) -> FrameReceipt {
        FrameReceipt {
            period_ns,
            ..FrameReceipt::default()
        }
    }

    /// Sets the period when a datagram states it.
    pub fn period(&mut self, period_ns: u64) {
        if self.period_ns == 0 {
            self.period_ns = period_ns;
        }
    }

    /// A frame that arrived whole on a reliable stream (iperf 2's TCP bursts, one a frame): the
    /// frames between it and the highest before it were skipped by the sender, since nothing is lost
    /// on the way. A number at or below the highest (a confused or hostile sender) is counted as a
    /// datagram is (`too_old`, or nothing for a frame already whole).
    pub fn whole_frame(&mut self, frame: u32, size: u32, (due_ns, arrival_ns): (i128, i128)) {
        self.on_stream(frame, (size, size), (due_ns, arrival_ns));
    }

    /// The frame a reliable stream ended within, `got` of its `size` bytes come: the sender stopped
    /// in it (counted cut at the end when it is the highest).
    pub fn begun_frame(&mut self, frame: u32, (size, got): (u32, u32), due_ns: i128) {
        self.on_stream(frame, (size, got.min(size.saturating_sub(1))), (due_ns, due_ns));
    }

    /// A frame from a reliable stream, `len` of its `size` bytes (all: whole).
    fn on_stream(&mut self, frame: u32, (size, len): (u32, u32), (due_ns, arrival_ns): (i128, i128)) {
        self.stream_frames += 1;
        let prev = match self.first {
            Some(_) if frame > self.highest => self.highest,
            _ => frame.saturating_sub(1),
        };
        self.datagram(&FrameDatagram {
            frame,
            prev,
            seq: self.stream_frames,
            len,
            remaining: size,
            size,
            due_ns,
            arrival_ns,
        });
    }

    /// One datagram of a frame.
    pub fn datagram(&mut self, d: &FrameDatagram) {
        if d.frame == 0 {
            return;
        }
        if self.first.is_none() {
            // Frames before the first heard are not this test's to count.
            self.first = Some(d.frame);
            self.settled = d.frame - 1;
        }
        if d.frame <= self.settled {
            self.too_old += 1;
            return;
        }
        if d.prev < d.frame - 1 {
            self.skips.insert(d.frame, (d.prev + 1, d.frame - 1));
        }
        let p = self.open.entry(d.frame).or_insert(Partial {
            size: 0,
            first_seq: None,
            last_seq: None,
            datagrams: 0,
            last_arrival_ns: d.arrival_ns,
            due_ns: d.due_ns,
            done: false,
        });
        if p.done {
            return;
        }
        p.datagrams += 1;
        p.last_arrival_ns = p.last_arrival_ns.max(d.arrival_ns);
        if d.size >= p.size {
            p.size = d.size;
        }
        if d.remaining == d.size && d.remaining >= p.size {
            p.first_seq = Some(p.first_seq.map_or(d.seq, |s| s.min(d.seq)));
        }
        if d.remaining == d.len {
            p.last_seq = Some(d.seq);
        }
        let whole = match (p.first_seq, p.last_seq) {
            (Some(a), Some(b)) => b >= a && p.datagrams == b - a + 1,
            _ => false,
        };
        if whole {
            p.done = true;
            let latency = p.last_arrival_ns - p.due_ns;
            if latency < 0 {
                self.clock_behind += 1;
            }
            self.latency.add(latency.max(0) as u64);
        }
        if d.frame > self.highest {
            self.highest = d.frame;
            self.settle(self.highest.saturating_sub(WINDOW));
        }
    }

    /// Counts every frame up to `upto`: whole, skipped by the sender, or lost (each once, whatever
    /// the frames' numbers claimed).
    fn settle(&mut self, upto: u32) {
        if upto <= self.settled {
            return;
        }
        let keep = self.open.split_off(&(upto + 1));
        let heard = std::mem::replace(&mut self.open, keep);
        let mut rest = u64::from(upto - self.settled) - heard.len() as u64;
        for (id, p) in &heard {
            if p.done {
                self.complete += 1;
            } else {
                self.lost += 1;
            }
            // A frame heard is no frame skipped, whatever a later one's `prev` said.
            self.skips
                .retain(|_, r| !(r.0..=r.1).contains(id) || split(r, *id));
        }
        let skipped = self.skipped_in(self.settled + 1, upto).min(rest);
        self.skipped += skipped;
        rest -= skipped;
        self.lost += rest;
        self.settled = upto;
    }

    /// Skipped frames between `from` and `to` (inclusive), ranges overlapping counted once; skip
    /// records wholly up to `to` are dropped.
    fn skipped_in(&mut self, from: u32, to: u32) -> u64 {
        let mut ranges: Vec<(u32, u32)> = self
            .skips
            .values()
            .map(|&(a, b)| (a.max(from), b.min(to)))
            .filter(|(a, b)| a <= b)
            .collect();
        ranges.sort_unstable();
        let (mut n, mut covered) = (0u64, None::<u32>);
        for (a, b) in ranges {
            let a = covered.map_or(a, |c| a.max(c.saturating_add(1)));
            if a <= b {
                n += u64::from(b - a + 1);
            }
            covered = Some(covered.map_or(b, |c| c.max(b)));
        }
        self.skips.retain(|_, &mut (_, b)| b > to);
        n
    }

    /// The figures at the test's end. The highest frame is the one the sender was sending when it
    /// stopped: unless it arrived whole it is counted as cut, not lost.
    pub fn finish(mut self) -> FramesReport {
        let cut = self.close();
        self.report(cut)
    }

    /// Several streams' frames as one test's (iperf 2's `-P` streams of frames, each numbering its
    /// own): their counts summed, their latencies pooled, a frame late by more than a period beyond
    /// the least latency of all. None without a stream.
    pub fn finish_all(receipts: impl IntoIterator<Item = FrameReceipt>) -> Option<FramesReport> {
        let mut all: Option<(FrameReceipt, u64)> = None;
        for mut r in receipts {
            let cut = r.close();
            all = Some(match all {
                None => (r, cut),
                Some((mut a, c)) => {
                    a.absorb(&r);
                    (a, c + cut)
                }
            });
        }
        all.map(|(a, cut)| a.report(cut))
    }

    /// Counts every frame at the end: the highest, unless whole, is cut (1 returned) and settled
    /// neither whole nor lost.
    fn close(&mut self) -> u64 {
        let last = self.open.get(&self.highest).copied();
        let cut = u64::from(last.is_some_and(|p| !p.done));
        if cut == 1 {
            self.open.remove(&self.highest);
        }
        self.settle(self.highest.saturating_sub(u32::from(cut == 1)));
        cut
    }

    /// Adds a closed stream's counts and latencies to this one's (the period: the first known).
    fn absorb(&mut self, o: &FrameReceipt) {
        self.period(o.period_ns);
        self.complete += o.complete;
        self.lost += o.lost;
        self.skipped += o.skipped;
        self.too_old += o.too_old;
        self.clock_behind += o.clock_behind;
        self.latency.merge(&o.latency);
    }

    /// The report of a closed receipt, `cut` frames cut at the end.
    fn report(self, cut: u64) -> FramesReport {
        let min_ns = self.latency.summary().min_ms.map(|m| (m * 1e6) as u64);
        let late = match (min_ns, self.period_ns) {
            (Some(min), p) if p > 0 => self.latency.count_above(min + p),
            _ => 0,
        };
        FramesReport {
            period_ms: self.period_ns as f64 / 1e6,
            fps: if self.period_ns > 0 {
                1e9 / self.period_ns as f64
            } else {
                0.0
            },
            frames: self.complete + self.lost,
            complete: self.complete,
            lost: self.lost,
            skipped_by_sender: self.skipped,
            cut_at_end: cut,
            late,
            too_old: self.too_old,
            clock_behind: self.clock_behind,
            latency: self.latency.summary(),
            histogram: self.latency.bins(),
            sender: None,
            sender_streams: Vec::new(),
        }
    }
}

/// A receiver's frames within one interval, or a test, counted as each one's last datagram comes
/// (iperf 2's server `Frame:rx/lost  latency` columns): frames heard, frames missing between
/// them, and each heard frame's latency (its last datagram's arrival less its due time, the
/// sender's start plus a period a frame: one clock less another), and those latencies binned when
/// the receiver bins them (iperf 2's server `--histograms`: its `F8` line).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FramesHeard {
    /// Frames whose last datagram came.
    pub frames: u64,
    /// Frame numbers missing between them.
    pub lost: u64,
    /// Their latency (`datagrams` counts frames); none without a frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<crate::udp::TransitSummary>,
    /// Their latencies binned, the longest with its arrival time (iperf 2's `F8` histogram);
    /// none unless the receiver bins them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bins: Option<crate::transit_bins::TransitHistogram>,
}

impl FramesHeard {
    /// Intervals' frames as one span's, `over_s` seconds: counts added, latencies merged exactly.
    pub fn merged<'a>(
        each: impl Iterator<Item = &'a FramesHeard> + Clone,
        over_s: f64,
    ) -> Option<FramesHeard> {
        let mut all = each.clone().peekable();
        all.peek()?;
        Some(FramesHeard {
            frames: each.clone().map(|f| f.frames).sum(),
            lost: each.clone().map(|f| f.lost).sum(),
            latency: crate::transit::merged(each.clone().filter_map(|f| f.latency.as_ref()), over_s),
            bins: crate::transit_bins::TransitHistogram::merged(each.filter_map(|f| f.bins.as_ref())),
        })
    }
}

/// A sender's frames within one interval (iperf 2's `isoch:tx/miss/slip` columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FramesInterval {
    /// Frames begun.
    pub sent: u64,
    /// Frames skipped (the sender came back after their time).
    pub skipped: u64,
    /// Times it came back late.
    pub slips: u64,
    /// The sender's writes within it: datagrams over UDP, write calls over TCP (iperf 2's
    /// `Write/Err` column).
    #[serde(default)]
    pub writes: u64,
}

/// The sender's side of a test of frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FramesSent {
    /// The spec it sent to.
    pub spec: Option<FrameSpec>,
    /// Frames sent whole or in part.
    pub frames: u64,
    /// Frames skipped because the sender came back after their time.
    pub skipped: u64,
    /// Times it came back late.
    pub slips: u64,
    /// Bytes of frames it sent.
    pub bytes: u64,
    /// Datagrams they took (over TCP, in iperf 2's protocol, the write calls).
    #[serde(default)]
    pub datagrams: u64,
}

/// Isochronous frames as the receiver counted them (and the sender's side where it is known).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FramesReport {
    /// Frames a second, from the period the frames stated.
    pub fps: f64,
    /// The period, milliseconds.
    pub period_ms: f64,
    /// Frames the sender sent, as the receiver counts them: whole and lost.
    pub frames: u64,
    /// Frames whose every datagram arrived.
    pub complete: u64,
    /// Frames sent of which a datagram, or all, never came.
    pub lost: u64,
    /// Frames the sender skipped (it came back after their time).
    pub skipped_by_sender: u64,
    /// The last frame, cut short when the sender stopped (1 or 0; counted neither whole nor lost).
    pub cut_at_end: u64,
    /// Whole frames whose latency exceeded the least by more than a period: a player holding one
    /// frame in hand would have had to skip them.
    pub late: u64,
    /// Datagrams of frames already counted (more than 256 frames behind the newest).
    pub too_old: u64,
    /// Whole frames that arrived before they were due by the sender's clock: the two clocks
    /// disagree, and the latencies are not one-way delays (counted as 0).
    pub clock_behind: u64,
    /// Whole frames' latency: from when the frame was due on the sender's clock to its last
    /// datagram's arrival on the receiver's (one-way: meaningful where the clocks agree).
    pub latency: LatencySummary,
    /// Its histogram.
    pub histogram: Vec<HistogramBin>,
    /// The sender's side, where the result holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<FramesSent>,
    /// With more than one stream, each stream's sender side, in stream order (`sender` is their
    /// sum).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sender_streams: Vec<FramesSent>,
}

#[cfg(test)]
mod tests;
