//! The UDP transport: one worker thread per stream (a paced sender or a receiver on a connected socket);
//! sampling and reporting are the supervisor's, as for TCP. Senders follow `core::udp::Pacer`'s schedule
//! (sleeping until shortly before a datagram is due, then polling the clock), write landspeed's header
//! and the run's payload, and finish with end-of-stream markers that carry how many datagrams they sent;
//! receivers account every datagram (`UdpReceiver`), verify its payload, and stop shortly after the
//! marker. UDP has no end-of-file, so that marker and a short drain are how a test ends.

use super::{Meter, Outcome, Settled, StreamMeta, Transport};
use crate::os::{enable_gro, enable_gso, receive_tos, recv_counted, socket_drops, tight_timers};
use crate::supervisor::{EngineParams, Flags};
use landspeed_core::config::Flow;
use landspeed_core::endpoint::{Role, TcpSnapshot};
use landspeed_core::payload::{Generator, Verifier};
use landspeed_core::udp::{pacing::Pace, spin::SpinBudget, Header, Pacer, UdpReceiver, UdpStats, HEADER};
use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The sequence number of the end-of-stream marker; its time field carries the datagram count.
pub const END_MARK: u64 = u64::MAX;
/// End-of-stream markers sent, a little apart, so that one survives loss.
const END_MARKS: u32 = 5;
/// Socket buffers UDP streams ask for when `-w` is not given: a receiver that is descheduled for a
/// few milliseconds must not overflow (the kernel caps this at net.core.rmem_max / wmem_max).
pub const DEFAULT_BUFFER: usize = 4 << 20;
/// Most bytes one segmented (UDP_SEGMENT) send may carry: a UDP length field's worth, less headers.
const GSO_MAX_BYTES: usize = 65_000;
/// Most datagrams one segmented send may carry (the kernel's UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// How long a receiver keeps reading after the marker, for datagrams that were overtaken.
const DRAIN: Duration = Duration::from_millis(200);

/// One UDP data stream on a connected socket.
pub struct UdpStream {
    /// The stream's number in the test.
    pub id: u32,
    /// Which way its data goes.
    pub flow: Flow,
    /// Whether this end sends or receives on it.
    pub role: Role,
    /// The socket, connected to the peer's.
    pub socket: UdpSocket,
    /// Sender only: stop after this many datagrams.
    pub datagrams: Option<u64>,
}

impl UdpStream {
    /// Stream `id` of `spec` on its socket, at the end whose role on a flow `role_of` gives
    /// (`Role::at_client` or `Role::at_server`); a sender of a byte or block count stops after the
    /// datagrams that carry its share.
    pub fn of_test(
        spec: &landspeed_core::config::TestSpec,
        id: u32,
        role_of: fn(Flow) -> Role,
        socket: UdpSocket,
    ) -> Self {
        let flow = spec.flow_of(id);
        let role = role_of(flow);
        UdpStream {
            id,
            flow,
            role,
            socket,
            datagrams: (role == Role::Sender)
                .then(|| spec.stream_budget(id).map(|b| b.div_ceil(spec.length_bytes)))
                .flatten(),
        }
    }
}

/// Whose datagram header the streams use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpFormat {
    /// landspeed's: 64-bit sequence and nanoseconds, verified payload, end-of-stream markers.
    Landspeed,
    /// iperf3's: seconds, microseconds, sequence from 1 (64-bit when `wide`); the test ends on the
    /// control connection, so no markers, and the payload is not checked.
    Iperf3 {
        /// The sequence number is 64 bits wide (`--udp-counters-64bit`).
        wide: bool,
    },
    /// iperf 2's: sequence from 1 (64 bits, the upper half in the fourth word), the sender's clock
    /// in seconds and microseconds, then the client's test header, which every datagram repeats;
    /// the client ends the test itself (its end and the server's report are the caller's), so no
    /// markers, and the payload is not checked.
    Iperf2 {
        /// The client's header as it follows the 16-byte prefix.
        header: [u8; IPERF2_HEADER_BYTES],
        /// With trip times (`--trip-times`), the client's start (Unix seconds, microseconds),
        /// which iperf 2.1.8 writes after the header's 32 bytes of frame fields (zero without
        /// frames) and a reserved word, at byte 112 of every datagram.
        start: Option<(u32, u32)>,
    },
    /// iperf 2's small trip-times form (a `--trip-times` client's datagrams under
    /// [`IPERF2_SMALL_BELOW`] bytes): the prefix, then the flags word [`IPERF2_SMALL_FLAGS`]
    /// alone, then payload; the send time in the prefix is all the receiver times.
    Iperf2Small,
}

/// iperf 2's small trip-times flags word (`HEADER32_SMALL_TRIPTIMES`).
pub const IPERF2_SMALL_FLAGS: u32 = 0x0002_0000;
/// iperf 2.1.8 sends a `--trip-times` client's datagrams in the small form below this length (its
/// MINTRIPTIMEPLAYOAD; captured: 127 bytes small, 128 with the header).
pub const IPERF2_SMALL_BELOW: usize = 128;

/// Where iperf 2's start time goes in a datagram that carries one (after the prefix, the header,
/// the frame fields and a reserved word), and the bytes such a datagram needs.
pub const IPERF2_START_AT: usize = 112;
/// A datagram with iperf 2's start time is at least this long.
pub const IPERF2_TIMED_BYTES: usize = IPERF2_START_AT + 8;

/// The bytes of iperf 2's client header in each datagram (its version-1 part and extension).
pub const IPERF2_HEADER_BYTES: usize = 60;

impl UdpFormat {
    /// Bytes before the payload of a datagram of `len` bytes (iperf 2's header is cut short in a
    /// datagram shorter than it, as iperf 2.1.8 cuts it).
    pub fn header_len(self, len: usize) -> usize {
        match self {
            UdpFormat::Iperf2 { start: Some(_), .. } => IPERF2_TIMED_BYTES.min(len),
            UdpFormat::Iperf2 { .. } => (HEADER + IPERF2_HEADER_BYTES).min(len),
            UdpFormat::Iperf2Small => HEADER + 4,
            _ => HEADER,
        }
    }
}

/// iperf 2's 16-byte prefix: datagram `seq` (from 1; negative: the end) sent at `unix_ns`.
pub fn iperf2_prefix(seq: i64, unix_ns: u64, buf: &mut [u8]) {
    let words = [
        seq as u32,
        (unix_ns / 1_000_000_000) as u32,
        (unix_ns % 1_000_000_000 / 1000) as u32,
        (seq as u64 >> 32) as u32,
    ];
    for (i, w) in words.into_iter().enumerate() {
        buf[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
    }
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What the UDP runner needs besides the engine parameters.
#[derive(Debug, Clone, Copy)]
pub struct UdpParams {
    /// Each stream's rate, bits per second of datagrams.
    pub rate_bps: f64,
    /// Datagrams sent back to back before the pacer waits (`-b RATE/BURST`).
    pub burst: u32,
    /// Whose datagram header the streams use.
    pub format: UdpFormat,
    /// A send the kernel refuses for an ICMP port unreachable (no socket at the peer's port) ends
    /// the stream with an error once the stream has sent for this long (zero: at once), instead of
    /// counting as a send error: for a sender whose peer's address nothing proved (iperf 2's UDP
    /// `-R` on the server; its streams back for `-r`/`-d` after a short grace, as an iperf 2
    /// client's listener binds again for each stream that comes). None: never.
    pub refused_ends_after: Option<std::time::Duration>,
}

impl UdpParams {
    /// Each stream's share of the test's rate, its burst, and the header format.
    pub fn for_spec(spec: &landspeed_core::config::TestSpec, format: UdpFormat) -> UdpParams {
        UdpParams {
            rate_bps: spec.udp_stream_rate_bps(),
            burst: spec.burst,
            format,
            refused_ends_after: None,
        }
    }
}

fn write_header(f: UdpFormat, h: Header, buf: &mut [u8]) {
    match f {
        UdpFormat::Landspeed => h.write(buf),
        UdpFormat::Iperf3 { wide } => h.write_iperf3(buf, wide),
        UdpFormat::Iperf2 { header, start } => {
            iperf2_prefix(h.seq as i64 + 1, unix_ns(), buf);
            let room = buf.len().saturating_sub(HEADER).min(IPERF2_HEADER_BYTES);
            buf[HEADER..HEADER + room].copy_from_slice(&header[..room]);
            if let Some((s, us)) = start.filter(|_| buf.len() >= IPERF2_TIMED_BYTES) {
                buf[HEADER + IPERF2_HEADER_BYTES..IPERF2_START_AT].fill(0);
                buf[IPERF2_START_AT..IPERF2_START_AT + 4].copy_from_slice(&s.to_be_bytes());
                buf[IPERF2_START_AT + 4..IPERF2_TIMED_BYTES].copy_from_slice(&us.to_be_bytes());
            }
        }
        UdpFormat::Iperf2Small => {
            iperf2_prefix(h.seq as i64 + 1, unix_ns(), buf);
            buf[HEADER..HEADER + 4].copy_from_slice(&IPERF2_SMALL_FLAGS.to_be_bytes());
        }
    }
}

fn read_header(f: UdpFormat, buf: &[u8]) -> Option<Header> {
    match f {
        UdpFormat::Landspeed => Header::read(buf),
        UdpFormat::Iperf3 { wide } => Header::read_iperf3(buf, wide),
        // This end only sends iperf 2's datagrams.
        UdpFormat::Iperf2 { .. } | UdpFormat::Iperf2Small => None,
    }
}

/// The UDP transport over a set of connected streams.
pub struct Udp<'a> {
    /// The streams.
    pub streams: &'a [UdpStream],
    /// Rate, burst and header format.
    pub params: UdpParams,
}

impl Transport for Udp<'_> {
    fn streams(&self) -> Vec<StreamMeta> {
        self.streams
            .iter()
            .map(|d| StreamMeta::new(d.id, d.flow, d.role))
            .collect()
    }

    /// One thread per stream: a paced sender sleeps between datagrams, and must not wait for others.
    fn groups(&self, _p: &EngineParams) -> Vec<Vec<usize>> {
        (0..self.streams.len()).map(|i| vec![i]).collect()
    }

    fn work(
        &self,
        group: &[usize],
        meters: &[Meter],
        p: &EngineParams,
        flags: &Flags,
        t0: Instant,
    ) -> Vec<(usize, Outcome)> {
        (group.iter())
            .map(|&i| {
                let (s, c, u) = (&self.streams[i], &meters[i], self.params);
                let o = if s.role == Role::Sender {
                    send_stream(s, c, p, u, flags, t0)
                } else {
                    // Every stream of this end is a busy thread of its own.
                    let spin = SpinBudget::for_threads(self.streams.len(), crate::cpu::cpu_count() as usize);
                    receive_stream(s, c, p, (u, spin), flags, t0)
                };
                (i, o)
            })
            .collect()
    }

    fn snapshot(&self, _i: usize) -> Option<TcpSnapshot> {
        None
    }

    fn settle(&self, i: usize, _rtts_us: &[u32]) -> Settled {
        let sref = socket2::SockRef::from(&self.streams[i].socket);
        let (snd_buf_bytes, rcv_buf_bytes) = crate::sockopt::granted(&sref);
        Settled {
            snd_buf_bytes,
            rcv_buf_bytes,
            tcp: None,
            tls_cipher: None,
            quic: None,
            ports: super::ports_of(sref),
        }
    }
}

/// Sleeps until `t` on the thread's clock: a sleep to shortly before, then polling.
fn wait_until(t0: Instant, t_ns: u64) {
    loop {
        let now = t0.elapsed().as_nanos() as u64;
        if now >= t_ns {
            return;
        }
        let left = t_ns - now;
        if left > 150_000 {
            std::thread::sleep(Duration::from_nanos(left - 100_000));
        } else {
            // Close to the due time: give the core to a receiver on the same machine rather than spin.
            std::thread::yield_now();
        }
    }
}

fn send_stream(
    s: &UdpStream,
    c: &Meter,
    p: &EngineParams,
    u: UdpParams,
    flags: &Flags,
    t0: Instant,
) -> Outcome {
    tight_timers();
    let mut o = Outcome::default();
    let len = p.length;
    let hlen = u.format.header_len(len);
    let plen = len - hlen;
    let mut gen = Generator::new(&p.pattern, plen);
    let gso = enable_gso(&s.socket, len);
    o.offload = gso;
    // One segmented send carries at most 64 datagrams and 64 KiB in all (the kernel refuses more with
    // EMSGSIZE): a sender catching up with its burst must not ask for more.
    let gso_max = (GSO_MAX_BYTES / len).clamp(1, GSO_MAX_SEGMENTS) as u32;
    // With segmentation offload, datagrams leave in batches of about a millisecond's worth (never more
    // than the burst), one system call each.
    let batch = if gso {
        ((u.rate_bps / 8.0 / 1000.0 / len as f64) as u32).clamp(1, u.burst.min(gso_max))
    } else {
        1
    };
    let mut buf = vec![0u8; len * batch.max(u.burst) as usize];
    let mut pacer = Pacer::new(0, u.rate_bps, len, u.burst);
    let deadline_ns = p.send_time.map(|d| d.as_nanos() as u64);
    loop {
        if flags.abort.load(Relaxed) {
            o.error = Some("test aborted".into());
            break;
        }
        let now = t0.elapsed().as_nanos() as u64;
        let budget_done = s.datagrams.is_some_and(|n| pacer.count() >= n);
        if flags.halt.load(Relaxed)
            || flags.stop.load(Relaxed)
            || deadline_ns.is_some_and(|d| now >= d)
            || budget_done
        {
            break;
        }
        let remaining = s.datagrams.map(|m| m.saturating_sub(pacer.count()));
        let pace = if gso {
            pacer.poll_batch(now, batch, remaining)
        } else {
            pacer.poll(now)
        };
        match pace {
            Pace::WaitUntil(t) => wait_until(t0, deadline_ns.map_or(t, |d| t.min(d))),
            Pace::Send(n) => {
                let n = remaining.map_or(u64::from(n), |r| r.min(u64::from(n))) as usize;
                let n = if gso { n.min(gso_max as usize) } else { n.min(1) };
                if n == 0 {
                    break;
                }
                let sent_ns = t0.elapsed().as_nanos() as u64;
                for i in 0..n {
                    let seq = pacer.count() + i as u64;
                    let d = &mut buf[i * len..(i + 1) * len];
                    write_header(u.format, Header { seq, sent_ns }, d);
                    d[hlen..].copy_from_slice(gen.fill(s.id, seq * plen as u64, plen));
                }
                send_batch(s, (&buf[..n * len], n), (c, u.refused_ends_after), &mut o);
                pacer.sent(n as u32);
                if o.error.is_some() {
                    break;
                }
            }
        }
    }
    if !flags.abort.load(Relaxed) && u.format == UdpFormat::Landspeed {
        send_end_marks(s, o.calls);
    }
    c.finished.store(true, Relaxed);
    o
}

/// Sends `n` datagrams (one segmented send, or one datagram) and counts them in `o` and the meter; a
/// full kernel queue or an ICMP error for an earlier datagram skips them, counted as send errors
/// (an ICMP port unreachable ends the stream instead once it has sent for `refused_ends_after`).
fn send_batch(
    s: &UdpStream,
    (bytes, n): (&[u8], usize),
    (c, refused_ends_after): (&Meter, Option<Duration>),
    o: &mut Outcome,
) {
    let refused_ends = refused_ends_after.is_some_and(|grace| o.first.is_none_or(|f| f.elapsed() >= grace));
    match s.socket.send(bytes) {
        Ok(_) => {
            let at = Instant::now();
            o.bytes += bytes.len() as u64;
            o.calls += n as u64;
            o.first.get_or_insert(at);
            o.last = Some(at);
            c.bytes.store(o.bytes, Relaxed);
        }
        Err(e) if crate::os::queue_full(&e) => {
            o.send_errors += n as u64;
        }
        Err(e) if e.kind() == ErrorKind::Interrupted => {}
        Err(e) if e.kind() == ErrorKind::ConnectionRefused && refused_ends => {
            o.error =
                Some("the peer's port is closed (ICMP port unreachable): nothing receives there".into());
        }
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => o.send_errors += n as u64,
        Err(e) => o.error = Some(format!("send: {e}")),
    }
}

/// The end marks that tell the receiver this sender is done and how many datagrams it sent.
fn send_end_marks(s: &UdpStream, sent: u64) {
    let mut mark = [0u8; HEADER];
    Header {
        seq: END_MARK,
        sent_ns: sent,
    }
    .write(&mut mark);
    for _ in 0..END_MARKS {
        let _ = s.socket.send(&mark);
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// What one read of a receiving socket gave.
enum Received {
    /// A read: its bytes, the socket's drop count the kernel stamped on its buffer, its TOS byte.
    Bytes(crate::os::UdpRead),
    /// Nothing yet (timeout, interrupt, an ICMP error for a datagram this end sent): read again.
    Again,
    /// Halting and nothing more is queued.
    Done,
    Failed(std::io::Error),
}

/// One read, polling the socket for the spin budget before sleeping in the kernel (Linux; Windows
/// always sleeps): `core::udp::spin` says why and for how long.
fn receive(s: &UdpStream, buf: &mut [u8], halting: bool, spin: &mut SpinBudget) -> Received {
    let start = Instant::now();
    let waited = || start.elapsed().as_nanos() as u64;
    let r = loop {
        // Halting, the socket is non-blocking already: a plain read says whether anything is left.
        match recv_counted(&s.socket, buf, halting) {
            Err(e) if e.kind() == ErrorKind::WouldBlock && !halting => {
                if waited() >= spin.budget_ns() {
                    spin.ran_out();
                    break recv_counted(&s.socket, buf, true);
                }
                std::hint::spin_loop();
            }
            r => break r,
        }
    };
    if r.is_ok() {
        spin.arrived(waited());
    }
    classify(r, halting)
}

fn classify(r: std::io::Result<crate::os::UdpRead>, halting: bool) -> Received {
    match r {
        Ok(r) => Received::Bytes(r),
        Err(_) if halting => Received::Done,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::WouldBlock
                    | ErrorKind::TimedOut
                    | ErrorKind::Interrupted
                    | ErrorKind::ConnectionRefused
            ) =>
        {
            Received::Again
        }
        Err(e) => Received::Failed(e),
    }
}

/// A receiver's payload check: every datagram against the payload its sequence number chose.
struct Check {
    verifier: Verifier,
    /// The stream's datagram size.
    length: usize,
    /// The last block counted bad (a block spanning datagrams is counted once).
    last_bad: Option<u64>,
}

impl Check {
    fn datagram(&mut self, stream: u32, seq: u64, d: &[u8], o: &mut Outcome) {
        let plen = (self.length - HEADER) as u64;
        if let Some(ch) = self.verifier.check(stream, seq * plen, &d[HEADER.min(d.len())..]) {
            for b in ch.bad_blocks {
                if self.last_bad != Some(b) {
                    o.corrupt_blocks += 1;
                    self.last_bad = Some(b);
                }
            }
            o.first_corruption.get_or_insert(ch.first);
        }
        // A datagram of the wrong length cannot be right: count its block as bad.
        if d.len() != self.length {
            o.corrupt_blocks += 1;
        }
        // The header is checked too: its sequence number chose the expected payload.
        o.verified_bytes += d.len() as u64;
    }
}

fn receive_stream(
    s: &UdpStream,
    c: &Meter,
    p: &EngineParams,
    (u, mut spin): (UdpParams, SpinBudget),
    flags: &Flags,
    t0: Instant,
) -> Outcome {
    let mut o = Outcome::default();
    let mut inbox = Inbox {
        rx: UdpReceiver::default(),
        check: p.verify.then(|| Check {
            verifier: Verifier::new(&p.pattern, p.length),
            length: p.length,
            last_bad: None,
        }),
        format: u.format,
        length: p.length,
        sent: None,
        marked: None,
        ce_marked: receive_tos(&s.socket).then_some(0),
    };
    let gro = enable_gro(&s.socket);
    o.offload = gro;
    let counted = crate::os::count_drops(&s.socket);
    let mut buf = vec![0u8; if gro { 65_536 } else { p.length.max(HEADER) + 1 }];
    let _ = s.socket.set_read_timeout(Some(Duration::from_millis(20)));
    let mut last_progress = Instant::now();
    c.udp.active.store(true, Relaxed);
    loop {
        if flags.abort.load(Relaxed) {
            o.error = Some("test aborted".into());
            break;
        }
        if inbox.marked.is_some_and(|m| m.elapsed() > DRAIN) {
            break;
        }
        // Halting: count what has already arrived, then stop.
        let halting = flags.halt.load(Relaxed);
        let _ = halting.then(|| s.socket.set_nonblocking(true));
        if last_progress.elapsed() > p.idle_timeout {
            o.error = Some(format!(
                "received nothing for {:?}; giving up on this stream",
                p.idle_timeout
            ));
            break;
        }
        let n = match receive(s, &mut buf, halting, &mut spin) {
            Received::Bytes(r) => {
                inbox.note(&r, counted);
                r.len
            }
            Received::Again => continue,
            Received::Done => break,
            Received::Failed(e) => {
                o.error = Some(format!("receive: {e}"));
                break;
            }
        };
        let now = Instant::now();
        last_progress = now;
        inbox.take(&buf[..n], s.id, now.saturating_duration_since(t0), now, &mut o);
        c.bytes.store(o.bytes, Relaxed);
        c.udp.expected.store(inbox.rx.expected(), Relaxed);
        c.udp.received.store(inbox.rx.received(), Relaxed);
    }
    let drops = counted.then(|| socket_drops(&s.socket)).flatten();
    if let Some(d) = drops {
        inbox.rx.on_socket_drops(d);
    }
    o.udp = Some(UdpStats {
        socket_drops: drops,
        ce_marked: inbox.ce_marked,
        ..inbox.rx.stats(inbox.sent)
    });
    c.finished.store(true, Relaxed);
    o
}

/// A receiving stream's accounting and check, fed one read at a time.
struct Inbox {
    rx: UdpReceiver,
    check: Option<Check>,
    format: UdpFormat,
    /// The stream's datagram size.
    length: usize,
    /// What the sender's end mark says it sent, and when the first mark came.
    sent: Option<u64>,
    marked: Option<Instant>,
    /// Datagrams that arrived marked Congestion Experienced (None: the ECN field is not readable).
    ce_marked: Option<u64>,
}

impl Inbox {
    /// Notes what the kernel attached to a read: the socket's drop count (when `counted`) and an
    /// ECN field of Congestion Experienced, for every datagram the read holds.
    fn note(&mut self, r: &crate::os::UdpRead, counted: bool) {
        if counted {
            self.rx.on_socket_drops(r.drops);
        }
        if let (Some(ce), Some(3)) = (self.ce_marked.as_mut(), r.tos.map(|t| t & 3)) {
            *ce += r.len.div_ceil(self.length.max(HEADER)).max(1) as u64;
        }
    }

    /// Accounts one read (with receive offload, several datagrams of the stream's size).
    fn take(&mut self, read: &[u8], id: u32, since_start: Duration, now: Instant, o: &mut Outcome) {
        let seg = if read.len() > self.length {
            self.length
        } else {
            read.len().max(1)
        };
        for d in read.chunks(seg) {
            let Some(h) = read_header(self.format, d) else {
                continue;
            };
            if h.seq == END_MARK && self.format == UdpFormat::Landspeed {
                self.sent = Some(h.sent_ns);
                self.marked.get_or_insert(now);
                continue;
            }
            if !self.rx.on_datagram(h, since_start.as_nanos() as u64, d.len()) {
                continue;
            }
            o.bytes += d.len() as u64;
            o.calls += 1;
            o.first.get_or_insert(now);
            o.last = Some(now);
            if let Some(v) = self.check.as_mut() {
                v.datagram(id, h.seq, d, o);
            }
        }
    }
}
