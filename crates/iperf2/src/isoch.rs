//! iperf 2's isochronous fields in a UDP datagram (`--isochronous`): after the 16-byte prefix and
//! the client's 60-byte header, eight words: the frame period (µs), when the first frame was sent
//! (seconds, µs), the frame sent before this one, this frame's number, the frame's size, the bytes
//! left of it with this datagram's, and a reserved word. The header's length is then 108 and its
//! ISOCH bit (upper flags 0x0001) is set. iperf 2.1.8's client sends one datagram first with all
//! eight zero; its frames are numbered from 1. `landspeed_core::frames` counts them.

use crate::be32 as word;
use landspeed_core::frames::{FrameDatagram, FramesReport};
use landspeed_core::transactions::LatencySummary;

/// Where the fields start in a datagram.
pub const AT: usize = 76;
/// Their size.
pub const BYTES: usize = 32;
/// A datagram of a frame is at least this long: prefix, header and these fields.
pub const MIN_DATAGRAM: usize = AT + BYTES;
/// With `--trip-times`, where the client's start time follows (seconds and microseconds, after a
/// reserved word; iperf 2.1.8 writes it beyond the declared 108 bytes, and its server ignores the
/// trip times without it).
pub const START_AT: usize = MIN_DATAGRAM + 4;

/// Writes the client's start time for `--trip-times` (the datagram at least `START_AT + 8` bytes).
pub fn write_start(datagram: &mut [u8], (s, us): (u32, u32)) {
    datagram[START_AT..START_AT + 4].copy_from_slice(&s.to_be_bytes());
    datagram[START_AT + 4..START_AT + 8].copy_from_slice(&us.to_be_bytes());
}

/// A datagram's frame fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FramePayload {
    /// Microseconds between frames.
    pub period_us: u32,
    /// When the sender sent its first frame: seconds of its clock.
    pub start_s: u32,
    /// And microseconds.
    pub start_us: u32,
    /// The frame sent before this one (0 before the first).
    pub prev: u32,
    /// This frame's number, from 1 (0: no frame).
    pub frame: u32,
    /// The frame's size, bytes.
    pub size: u32,
    /// Bytes left of the frame, this datagram's included.
    pub remaining: u32,
}

impl FramePayload {
    /// The fields of a datagram long enough to hold them and belonging to a frame.
    pub fn parse(datagram: &[u8]) -> Option<FramePayload> {
        if datagram.len() < MIN_DATAGRAM {
            return None;
        }
        let w = |i: usize| word(datagram, AT + 4 * i);
        let p = FramePayload {
            period_us: w(0),
            start_s: w(1),
            start_us: w(2),
            prev: w(3),
            frame: w(4),
            size: w(5),
            remaining: w(6),
        };
        (p.frame > 0 && p.start_us < 1_000_000).then_some(p)
    }

    /// Writes the fields into `datagram` (at least [`MIN_DATAGRAM`] bytes).
    pub fn write(&self, datagram: &mut [u8]) {
        let words = [
            self.period_us,
            self.start_s,
            self.start_us,
            self.prev,
            self.frame,
            self.size,
            self.remaining,
            0,
        ];
        for (i, v) in words.into_iter().enumerate() {
            datagram[AT + 4 * i..AT + 4 * i + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// When this frame was due on the sender's clock, Unix nanoseconds: the first frame's time
    /// plus a period for each frame before this one.
    pub fn due_ns(&self) -> i128 {
        let start = i128::from(self.start_s) * 1_000_000_000 + i128::from(self.start_us) * 1_000;
        start + i128::from(self.period_us) * 1_000 * i128::from(self.frame.saturating_sub(1))
    }

    /// The datagram as the frames' accounting reads it.
    pub fn datagram(&self, seq: u64, len: usize, arrival_ns: i128) -> FrameDatagram {
        FrameDatagram {
            frame: self.frame,
            prev: self.prev,
            seq,
            len: u32::try_from(len).unwrap_or(u32::MAX),
            remaining: self.remaining,
            size: self.size,
            due_ns: self.due_ns(),
            arrival_ns,
        }
    }
}

/// A server's frames as their last datagrams come, per interval and over the test, for iperf 2's
/// `Frame:rx/lost  latency` columns: a frame is heard when the datagram carrying its last bytes
/// comes (iperf 2.1.8's `transit_ready`: the bytes left are the datagram's own) and the sender
/// skipped none before it; the frame numbers between two heard ones are lost; each heard frame's
/// latency is that datagram's arrival less the frame's due time. Where iperf 2.1.8 counts its
/// first frame twice and a gap's frames with the one after it, this counts each frame once
/// (docs/isochronous.md).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrameTally {
    /// The last frame heard.
    last: u32,
    interval_frames: u64,
    interval_lost: u64,
    interval_latency: landspeed_core::transit::Transits,
    /// The interval's latencies binned ([`FrameTally::bin_latencies`]).
    bins: Option<landspeed_core::transit_bins::TransitBins>,
}

impl FrameTally {
    /// Counts a datagram of `len` bytes with frame fields `p` that came at `arrival_s` (seconds
    /// since the Unix epoch on this host's clock).
    pub fn datagram(&mut self, p: &FramePayload, len: usize, arrival_s: f64) {
        let last_of_frame = p.remaining as usize == len;
        if p.frame == 0 || !last_of_frame || p.frame.wrapping_sub(p.prev) != 1 || p.frame <= self.last {
            return;
        }
        if self.last > 0 {
            self.interval_lost += u64::from(p.frame - self.last - 1);
        }
        self.last = p.frame;
        self.interval_frames += 1;
        let latency_s = arrival_s - p.due_ns() as f64 / 1e9;
        self.interval_latency.add(latency_s);
        if let Some(bins) = self.bins.as_mut() {
            // iperf 2.1.8 marks the longest with the arrival of the frame's last datagram.
            let at = (arrival_s.floor() as i64, (arrival_s.fract() * 1e6) as u32);
            bins.add(latency_s, Some(at));
        }
    }

    /// Bins each heard frame's latency by `spec` from here on (iperf 2's server `--histograms`
    /// for a client sending frames with trip times: its `F8` line).
    pub fn bin_latencies(&mut self, spec: landspeed_core::transit_bins::BinSpec) {
        self.bins = Some(landspeed_core::transit_bins::TransitBins::new(spec));
    }

    /// The frames heard since the last call (or the start), `over_s` seconds of them, then counted
    /// afresh.
    pub fn take_interval(&mut self, over_s: f64) -> landspeed_core::frames::FramesHeard {
        let heard = landspeed_core::frames::FramesHeard {
            frames: self.interval_frames,
            lost: self.interval_lost,
            latency: self.interval_latency.summary(over_s),
            bins: self.bins.as_mut().map(|b| b.take()),
        };
        *self = FrameTally {
            last: self.last,
            bins: self.bins.take(),
            ..FrameTally::default()
        };
        heard
    }
}

/// landspeed's addition to a UDP report for a test of frames, after iperf 2's 128 bytes: `LSFR`, a
/// version byte (1), six counts (whole, lost, skipped by the sender, cut at the end, late, clock
/// behind; 64-bit words) and the latency in milliseconds as eight doubles (least, mean, standard
/// deviation, p50, p90, p99, p99.9, most; NaN where none), all big-endian. iperf 2.1.8's client
/// reads the report's own bytes and ignores the rest (it/isochronous.rs runs it against
/// `landspeed serve`), so a landspeed client gets the receiver's counts and an iperf 2 client loses
/// nothing.
pub const TRAILER_MAGIC: [u8; 4] = *b"LSFR";
/// The trailer's size.
pub const TRAILER_BYTES: usize = 4 + 1 + 6 * 8 + 8 * 8;

/// The receiver's counts and latency as the trailer carries them.
pub fn encode_trailer(f: &FramesReport) -> [u8; TRAILER_BYTES] {
    let mut out = [0u8; TRAILER_BYTES];
    out[..4].copy_from_slice(&TRAILER_MAGIC);
    out[4] = 1;
    let counts = [
        f.complete,
        f.lost,
        f.skipped_by_sender,
        f.cut_at_end,
        f.late,
        f.clock_behind,
    ];
    let l = &f.latency;
    let ms = [
        l.min_ms, l.mean_ms, l.stdev_ms, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms,
    ];
    let words = counts
        .iter()
        .map(|c| c.to_be_bytes())
        .chain(ms.iter().map(|m| m.unwrap_or(f64::NAN).to_be_bytes()));
    for (i, w) in words.enumerate() {
        out[5 + 8 * i..13 + 8 * i].copy_from_slice(&w);
    }
    out
}

/// The trailer after a report of `report_bytes`, when one is there and well formed: the receiver's
/// counts and latency (a latency not finite and at least 0 is taken as none).
pub fn parse_trailer(datagram: &[u8], report_bytes: usize) -> Option<FramesReport> {
    let t = datagram.get(report_bytes..report_bytes + TRAILER_BYTES)?;
    if t[..4] != TRAILER_MAGIC || t[4] != 1 {
        return None;
    }
    let w = |i: usize| -> [u8; 8] { t[5 + 8 * i..13 + 8 * i].try_into().unwrap_or_default() };
    let c = |i: usize| u64::from_be_bytes(w(i));
    let ms = |i: usize| Some(f64::from_be_bytes(w(6 + i))).filter(|v| v.is_finite() && *v >= 0.0);
    Some(FramesReport {
        frames: c(0).saturating_add(c(1)),
        complete: c(0),
        lost: c(1),
        skipped_by_sender: c(2),
        cut_at_end: c(3),
        late: c(4),
        clock_behind: c(5),
        latency: LatencySummary {
            min_ms: ms(0),
            mean_ms: ms(1),
            stdev_ms: ms(2),
            p50_ms: ms(3),
            p90_ms: ms(4),
            p99_ms: ms(5),
            p999_ms: ms(6),
            max_ms: ms(7),
        },
        ..FramesReport::default()
    })
}

#[cfg(test)]
mod tests;
