//! Transports: the kinds of data connection the one supervisor drives. A transport knows how to move
//! bytes on its connections (its worker threads, its system calls, its offloads) and what its kernel
//! can tell about them (TCP_INFO, socket buffers); everything around that, the interval sampling, the
//! end of a test, CPU and interface counters and the per-stream report, is the supervisor's
//! (`crate::supervisor`), the same for every transport. A new data path (batched or completion-based
//! I/O, QUIC, TLS) is one more implementation of [`Transport`].

pub mod quic;
pub mod rr;
pub mod tcp;
pub mod udp;

use crate::supervisor::{EngineParams, Flags};
use landspeed_core::config::Flow;
use landspeed_core::endpoint::{Role, TcpSnapshot, TcpStats};
use landspeed_core::payload::Corruption;
use landspeed_core::transit_bins::TransitBins;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// What the supervisor sees of one stream while it runs: its byte count and whether it has finished,
/// written by the worker that owns the stream with relaxed stores, read at each sample. One cache line
/// each, so workers on different cores do not share a line.
#[repr(align(128))]
#[derive(Default)]
pub struct Meter {
    /// Bytes this end has moved on the stream so far (sent or received, as its role says).
    pub bytes: AtomicU64,
    /// The worker is done with the stream.
    pub finished: AtomicBool,
    /// A UDP receiver's running datagram counts (set once it receives).
    pub udp: UdpMeter,
    /// A TCP receiver's reads by size, when the test counts them (`EngineParams::read_bins`).
    pub reads: ReadMeter,
    /// A TCP receiver's burst transits since the last sample, when its sender stamps its bursts
    /// (`EngineParams::trip_times`).
    pub trips: TripMeter,
}

/// A TCP receiver's one-way burst transits since the last sample: its worker adds a read's worth
/// at a time under the lock, the sampler takes them.
#[derive(Debug, Default)]
pub struct TripMeter {
    /// The receiver times its bursts.
    active: AtomicBool,
    since: std::sync::Mutex<landspeed_core::transit::Transits>,
    /// The same transits in bins, when the test bins them (`EngineParams::trip_bins`): their
    /// binning, and the bins since the last sample.
    binning: std::sync::OnceLock<landspeed_core::transit_bins::BinSpec>,
    bins: std::sync::Mutex<Option<TransitBins>>,
}

impl TripMeter {
    /// The receiver times its bursts from now on, and bins them by `bins` when given.
    pub fn start(&self, bins: Option<landspeed_core::transit_bins::BinSpec>) {
        if let (Some(spec), Ok(mut b)) = (bins, self.bins.lock()) {
            *b = Some(TransitBins::new(spec));
            let _ = self.binning.set(spec);
        }
        self.active.store(true, Relaxed);
    }

    /// Whether the receiver times its bursts.
    pub fn on(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// How it also bins them, when it does.
    pub fn binning(&self) -> Option<landspeed_core::transit_bins::BinSpec> {
        self.binning.get().copied()
    }

    /// Transits measured since the last call's, and each of them with its burst's send time
    /// (seconds, microseconds) for the bins when binned.
    pub fn add(&self, t: &landspeed_core::transit::Transits, binned: &[(f64, (i64, u32))]) {
        if let Ok(mut s) = self.since.lock() {
            s.merge(t);
        }
        if binned.is_empty() {
            return;
        }
        if let Some(b) = self.bins.lock().ok().as_deref_mut().and_then(Option::as_mut) {
            for (transit_s, sent) in binned {
                b.add(*transit_s, Some(*sent));
            }
        }
    }

    /// The transits since the last sample, `over_s` seconds of them (none when not timed; a count
    /// of 0 when timed and no burst ended).
    pub fn take(&self, over_s: f64) -> Option<landspeed_core::udp::TransitSummary> {
        if !self.on() {
            return None;
        }
        let t = std::mem::take(&mut *self.since.lock().ok()?);
        Some(t.summary(over_s).unwrap_or_default())
    }

    /// The bins since the last sample (none when not binned).
    pub fn take_bins(&self) -> Option<landspeed_core::transit_bins::TransitHistogram> {
        Some(self.bins.lock().ok()?.as_mut()?.take())
    }
}

/// A TCP receiver's running reads by size (`landspeed_core::endpoint::ReadBins`), written by the
/// worker that owns the stream (one writer: a load and a store, no locked add) and read at each
/// sample.
#[derive(Debug, Default)]
pub struct ReadMeter {
    /// Each bin's width, bytes; 0: not counted.
    width_bytes: AtomicU64,
    bins: [AtomicU64; 8],
}

impl ReadMeter {
    /// Counts reads in bins `width_bytes` wide from now on.
    pub fn start(&self, width_bytes: u64) {
        self.width_bytes.store(width_bytes.max(1), Relaxed);
    }

    /// A read of `n` bytes (none when reads are not counted or nothing was read).
    #[inline]
    pub fn count(&self, n: usize) {
        let width = self.width_bytes.load(Relaxed);
        if width == 0 || n == 0 {
            return;
        }
        let bin = &self.bins[landspeed_core::endpoint::ReadBins::bin(width, n as u64)];
        bin.store(bin.load(Relaxed) + 1, Relaxed);
    }

    /// The counts now, when they are kept.
    pub fn bins(&self) -> Option<landspeed_core::endpoint::ReadBins> {
        let width_bytes = self.width_bytes.load(Relaxed);
        (width_bytes > 0).then(|| landspeed_core::endpoint::ReadBins {
            width_bytes,
            bins: std::array::from_fn(|k| self.bins[k].load(Relaxed)),
        })
    }
}

/// A UDP receiver's running counts, for the interval samples.
#[derive(Debug, Default)]
pub struct UdpMeter {
    /// The stream is a UDP receiver: the counts below mean something.
    pub active: AtomicBool,
    /// The highest sequence number seen, plus one.
    pub expected: AtomicU64,
    /// Distinct datagrams received.
    pub received: AtomicU64,
}

impl UdpMeter {
    /// The counts now, when this is a UDP receiver.
    pub fn counts(&self) -> Option<landspeed_core::endpoint::UdpCounts> {
        self.active
            .load(Relaxed)
            .then(|| landspeed_core::endpoint::UdpCounts {
                expected: self.expected.load(Relaxed),
                received: self.received.load(Relaxed),
                jitter_ms: None,
                transit: None,
                frames: None,
            })
    }
}

/// What a worker measured on one stream, handed back when it ends.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Bytes moved (sent or received).
    pub bytes: u64,
    /// System calls (or datagrams) that moved them.
    pub calls: u64,
    /// When the stream moved its first byte.
    pub first: Option<Instant>,
    /// When the stream moved its last byte.
    pub last: Option<Instant>,
    /// Why the stream ended early, if it did.
    pub error: Option<String>,
    /// Receivers: bytes checked against the payload.
    pub verified_bytes: u64,
    /// Receivers: 256-byte blocks of the payload with at least one wrong byte.
    pub corrupt_blocks: u64,
    /// Receivers: where the first wrong byte was.
    pub first_corruption: Option<Corruption>,
    /// TCP senders with MSG_ZEROCOPY: sends issued, and how many of them the kernel copied anyway.
    pub zerocopy_sends: u64,
    /// Zero-copy sends the kernel copied anyway.
    pub zerocopy_copied: u64,
    /// UDP senders: datagrams the kernel refused (ENOBUFS, a full queue).
    pub send_errors: u64,
    /// UDP receivers: loss, order and jitter.
    pub udp: Option<landspeed_core::udp::UdpStats>,
    /// UDP: segmentation (sender) or receive (receiver) offload was on.
    pub offload: bool,
    /// TCP: the stream ran on the blocking worker (one thread, one socket).
    pub blocking: bool,
    /// TCP receiver on the blocking worker: the SO_RCVLOWAT the kernel kept.
    pub rcvlowat_bytes: Option<u64>,
    /// TLS senders: the records they sealed.
    pub tls_records: u64,
    /// TCP receivers counting iperf 2's bursts as frames (`EngineParams::frames_from_bursts`).
    pub frames: Option<landspeed_core::frames::FrameReceipt>,
}

impl Outcome {
    /// Counts `n` bytes moved by one call at `now` and publishes the stream's total in its `meter`
    /// (one relaxed store: the per-call work of every transport's hot loop).
    #[inline]
    pub(crate) fn moved(&mut self, n: usize, now: Instant, meter: &Meter) {
        self.counted(n, now);
        meter
            .bytes
            .store(self.bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts `n` bytes moved by one call at `now`, for a worker that publishes its meter itself
    /// (a request/response server's counts both ways).
    #[inline]
    pub(crate) fn counted(&mut self, n: usize, now: Instant) {
        self.bytes += n as u64;
        self.calls += 1;
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// Checks `data`, just received on stream `id` at its current offset (`self.bytes`, before
    /// counting it), and records what was wrong; `last_bad_block` keeps a block split over two
    /// receives from counting twice.
    pub(crate) fn verify(
        &mut self,
        v: &mut landspeed_core::payload::Verifier,
        id: u32,
        last_bad_block: &mut Option<u64>,
        data: &[u8],
    ) {
        self.verify_at(v, id, self.bytes, last_bad_block, data);
    }

    /// [`Outcome::verify`] of `data` at `offset` of the stream (several pieces taken in one receive).
    pub(crate) fn verify_at(
        &mut self,
        v: &mut landspeed_core::payload::Verifier,
        id: u32,
        offset: u64,
        last_bad_block: &mut Option<u64>,
        data: &[u8],
    ) {
        if let Some(c) = v.check(id, offset, data) {
            for b in c.bad_blocks {
                if last_bad_block.is_none_or(|l| b > l) {
                    self.corrupt_blocks += 1;
                    *last_bad_block = Some(b);
                }
            }
            self.first_corruption.get_or_insert(c.first);
        }
        self.verified_bytes += data.len() as u64;
    }
}

/// Who a stream is: the part of it the supervisor needs to sample and report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamMeta {
    /// The stream's number in the test.
    pub id: u32,
    /// Which way its data goes.
    pub flow: Flow,
    /// Whether this end sends or receives on it.
    pub role: Role,
}

impl StreamMeta {
    /// Who stream `id` is.
    pub fn new(id: u32, flow: Flow, role: Role) -> StreamMeta {
        StreamMeta { id, flow, role }
    }
}

/// What the kernel says about a stream once it has ended.
#[derive(Debug, Default)]
pub struct Settled {
    /// Socket buffers as the kernel granted them.
    pub snd_buf_bytes: u64,
    /// The receive buffer as the kernel granted it.
    pub rcv_buf_bytes: u64,
    /// TCP's own figures (None for transports without them).
    pub tcp: Option<TcpStats>,
    /// TLS streams: the suite their handshake agreed on.
    pub tls_cipher: Option<landspeed_core::tls::TlsCipher>,
    /// QUIC streams: their connection's figures.
    pub quic: Option<landspeed_core::endpoint::QuicStats>,
    /// The stream's own socket: this end's port and the far end's (None where streams share one;
    /// the far end's also once the peer has reset the connection).
    pub ports: (Option<u16>, Option<u16>),
}

/// A socket's local and peer ports, where it still has them.
pub(crate) fn ports_of(s: socket2::SockRef<'_>) -> (Option<u16>, Option<u16>) {
    let port = |a: std::io::Result<socket2::SockAddr>| a.ok()?.as_socket().map(|a| a.port());
    (port(s.local_addr()), port(s.peer_addr()))
}

/// One kind of data connection behind the supervisor.
///
/// The contract: [`Transport::work`] runs on its own thread for one group of [`Transport::groups`];
/// it moves bytes on exactly those streams until each has ended (a sender at its budget, its deadline
/// or `flags.stop`; a receiver at end of data, `flags.halt`, an idle timeout or an error), stores each
/// stream's byte count in its meter as it goes and raises `finished` when the stream is done, then
/// returns an [`Outcome`] per stream. Workers never block for longer than about 100 ms without
/// looking at the flags.
pub trait Transport: Sync {
    /// The streams, in the order meters, groups and indices refer to.
    fn streams(&self) -> Vec<StreamMeta>;
    /// How the streams are spread over worker threads: one group of stream indices per thread.
    fn groups(&self, p: &EngineParams) -> Vec<Vec<usize>>;
    /// Runs one worker thread over `group`; `meters` holds every stream's meter, by index.
    fn work(
        &self,
        group: &[usize],
        meters: &[Meter],
        p: &EngineParams,
        flags: &Flags,
        t0: Instant,
    ) -> Vec<(usize, Outcome)>;
    /// A live look at stream `i` for an interval sample (TCP_INFO for TCP).
    fn snapshot(&self, i: usize) -> Option<TcpSnapshot>;
    /// The kernel's figures for stream `i` after the test; `rtts_us` are its sampled RTTs.
    fn settle(&self, i: usize, rtts_us: &[u32]) -> Settled;
    /// Whether its receivers count their reads by size when asked (`EngineParams::read_bins`).
    fn counts_reads(&self) -> bool {
        false
    }
}

/// Spreads `n` streams round-robin over at most `threads` groups (at least one stream each).
pub fn round_robin(n: usize, threads: usize) -> Vec<Vec<usize>> {
    let k = threads.clamp(1, n.max(1));
    (0..k).map(|w| (w..n).step_by(k).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::round_robin;

    #[test]
    fn round_robin_spreads_every_stream_once() {
        assert_eq!(round_robin(5, 2), vec![vec![0, 2, 4], vec![1, 3]]);
        assert_eq!(round_robin(2, 8), vec![vec![0], vec![1]]);
        assert_eq!(round_robin(0, 4), vec![Vec::<usize>::new()]);
    }
}
