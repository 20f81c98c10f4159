//! The unsent data a responsiveness endpoint holds, kept near 5 ms of its connection's rate, as
//! draft-ietf-ippm-responsiveness-09 asks of both the client and the server ("the test client and
//! test endpoint respectively calculate their current estimate of the connection throughput ... and
//! then multiply this by 5 ms to get the desired buffer size", TCP_NOTSENT_LOWAT set before each
//! write where TCP_REPLENISH_TIME is missing). Unsent data sits in three places, and each is held to
//! a share of the 5 ms: the kernel's send buffer beyond what is in flight (TCP_NOTSENT_LOWAT, three
//! fifths), TLS's buffered records (one of HTTP/2's writes at a time, taken whole: a fifth) and
//! HTTP/2's queued frames (the body's chunk, with the stream's send buffer at one chunk: a fifth). The rate is the bytes the peer
//! acknowledged over the last `RATE_SPAN` (TCP_INFO), read at most every `REFRESH` by the wrapper
//! under the HTTP and TLS layers before a write. Without TLS the kernel takes TLS's share too.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The draft's unsent-data budget: 5 ms of the connection's rate.
pub(crate) const BUDGET: Duration = Duration::from_millis(5);
/// The smallest share of any layer, bytes (the draft's own example: 625 bytes at 1 Mbit/s).
pub(crate) const FLOOR_BYTES: u64 = 512;
/// The largest HTTP/2 chunk and TLS buffer, bytes (a TLS record's most).
pub(crate) const CEILING_BYTES: u64 = 16 * 1024;
/// How often the rate is read again.
const REFRESH: Duration = Duration::from_millis(10);
/// The span the rate is measured over: the bytes acknowledged in it (the kernel's own delivery-rate
/// sample follows single ACKs, and acknowledgements that arrive in bursts, as they do behind GRO or a
/// forwarder's trains, put it at several times the path's rate).
const RATE_SPAN: Duration = Duration::from_millis(100);

/// One connection's rate estimate, shared by its socket wrapper and its bodies.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// The connection's rate, bytes a second acknowledged (0: not known yet).
    rate_bytes_per_s: AtomicU64,
    /// The TLS layer's share goes to the kernel when there is no TLS.
    tls: std::sync::atomic::AtomicBool,
    /// The kernel's latest round-trip estimate, µs: the sender's smoothed RTT, or the receiver's
    /// estimate when this end mostly receives (0: none yet). Over HTTP/1.1, where no self probe
    /// can ride a loaded connection, it stands in for one (draft-09).
    rtt_us: AtomicU64,
    /// The bytes the connection has received (TCP_INFO), as last read.
    received: AtomicU64,
}

impl Budget {
    /// A budget for a connection with (`tls`) or without TLS.
    pub(crate) fn new(tls: bool) -> Arc<Budget> {
        let b = Budget::default();
        b.tls.store(tls, Relaxed);
        Arc::new(b)
    }

    /// 5 ms of the rate, bytes (0 while the rate is not known).
    fn bytes(&self) -> u64 {
        self.rate_bytes_per_s.load(Relaxed) * BUDGET.as_micros() as u64 / 1_000_000
    }

    /// The kernel's share: TCP_NOTSENT_LOWAT (three fifths, four without TLS).
    pub(crate) fn kernel_bytes(&self) -> u64 {
        let fifths = if self.tls.load(Relaxed) { 3 } else { 4 };
        (self.bytes() * fifths / 5).max(FLOOR_BYTES)
    }

    /// The kernel's latest round-trip estimate on this connection (None: none yet).
    pub(crate) fn rtt(&self) -> Option<Duration> {
        let us = self.rtt_us.load(Relaxed);
        (us > 0).then(|| Duration::from_micros(us))
    }

    /// The bytes the connection had received when the kernel was last asked.
    pub(crate) fn received(&self) -> u64 {
        self.received.load(Relaxed)
    }

    /// An HTTP/2 body's chunk, and TLS's buffer: a fifth each.
    pub(crate) fn chunk_bytes(&self) -> usize {
        (self.bytes() / 5).clamp(FLOOR_BYTES, CEILING_BYTES) as usize
    }
}

/// A TCP stream that sets its TCP_NOTSENT_LOWAT from its budget before a write (the rate read again
/// at most every `REFRESH`).
pub(crate) struct Paced {
    tcp: tokio::net::TcpStream,
    budget: Arc<Budget>,
    read_at: Option<Instant>,
    /// The start of the rate's span: when, and the bytes acknowledged then.
    span: Option<(Instant, u64)>,
    lowat: u64,
    /// A backstop while waiting for the kernel to take more (should its wake-up not come).
    backstop: Option<Pin<Box<tokio::time::Sleep>>>,
    /// At most this much is unsent: the kernel's count when last read, plus what was written since
    /// (the kernel only ever sends it down), so TCP_INFO is read only when this reaches the mark.
    unsent_at_most: u64,
}

impl Paced {
    /// `tcp` under `budget`, its mark set to the floor until the rate is known.
    pub(crate) fn new(tcp: tokio::net::TcpStream, budget: Arc<Budget>) -> Paced {
        let _ = landspeed_engine::os::set_notsent_lowat(&tcp, FLOOR_BYTES as u32);
        Paced {
            tcp,
            budget,
            read_at: None,
            span: None,
            lowat: FLOOR_BYTES,
            backstop: None,
            unsent_at_most: 0,
        }
    }

    /// Reads the delivery rate and sets the mark, at most every `REFRESH`.
    fn refresh(&mut self) {
        if self.read_at.is_some_and(|t| t.elapsed() < REFRESH) {
            return;
        }
        let now = Instant::now();
        self.read_at = Some(now);
        if let Ok(info) = landspeed_engine::os::tcp_info(&self.tcp) {
            self.budget.rtt_us.store(u64::from(rtt_us(&info.raw)), Relaxed);
            self.budget.received.store(info.raw.bytes_received, Relaxed);
            let acked = info.raw.bytes_acked;
            match self.span {
                Some((t, a)) if now - t >= RATE_SPAN => {
                    let rate = (acked.saturating_sub(a)) as f64 / (now - t).as_secs_f64();
                    self.budget.rate_bytes_per_s.store(rate as u64, Relaxed);
                    self.span = Some((now, acked));
                }
                Some(_) => {}
                None => self.span = Some((now, acked)),
            }
        }
        let lowat = self.budget.kernel_bytes();
        if lowat != self.lowat {
            let _ = landspeed_engine::os::set_notsent_lowat(&self.tcp, lowat.min(u64::from(u32::MAX)) as u32);
            self.lowat = lowat;
        }
    }
}

/// The round trip the kernel sees: the sender's smoothed RTT once this end has had more
/// acknowledged than it received (an upload), else the receiver's own estimate (a download, whose
/// sender's RTT here rests on a few requests).
fn rtt_us(r: &landspeed_engine::tcp_info::RawTcpInfo) -> u32 {
    let sending = r.bytes_acked > r.bytes_received;
    if sending || r.rcv_rtt == 0 {
        r.rtt
    } else {
        r.rcv_rtt
    }
}

/// Reads refresh the estimates too: a download's connection writes almost nothing.
impl AsyncRead for Paced {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.refresh();
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl Paced {
    /// Ready to write: the unsent bytes under the mark. TCP_NOTSENT_LOWAT alone does not hold a
    /// writer that keeps writing: the kernel checks the mark only when it starts a new buffer (one of
    /// up to 64 KiB with segmentation offload), and tokio writes again while writes succeed. So once
    /// what may be unsent reaches the mark, the unsent bytes are read (TCP_INFO); at the mark, a poll(2) of the socket has the kernel note
    /// that a writer waits (it then signals when the unsent bytes fall under the mark), and the
    /// socket's write readiness is cleared and awaited (with a 10 ms backstop).
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.refresh();
        if self.unsent_at_most < self.lowat {
            return Poll::Ready(Ok(()));
        }
        loop {
            let notsent =
                landspeed_engine::os::tcp_info(&self.tcp).map_or(0, |i| u64::from(i.raw.notsent_bytes));
            self.unsent_at_most = notsent;
            if notsent < self.lowat || !kernel_will_signal(&self.tcp) {
                self.backstop = None;
                return Poll::Ready(Ok(()));
            }
            let _ = self.tcp.try_io(tokio::io::Interest::WRITABLE, || {
                Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
            });
            let backstop = self
                .backstop
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(REFRESH)));
            if backstop.as_mut().poll(cx).is_ready() {
                self.backstop = None;
                continue;
            }
            match self.tcp.poll_write_ready(cx) {
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Paced {
    /// Counts a write's bytes into the unsent bound.
    fn wrote(&mut self, written: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = written {
            self.unsent_at_most += *n as u64;
        }
    }
}

/// Asks the kernel whether the socket is writable by its own rule (unsent bytes under the mark),
/// which also has it signal the waiting writer once it is: true when it is not writable yet (wait),
/// false when it already is (write).
#[cfg(target_os = "linux")]
fn kernel_will_signal(tcp: &tokio::net::TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: tcp.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 0
}

/// Elsewhere no wait: the writes alone are held to the share.
#[cfg(not(target_os = "linux"))]
fn kernel_will_signal(_tcp: &tokio::net::TcpStream) -> bool {
    false
}

/// Each write waits for room under the mark and takes at most the kernel's share.
impl AsyncWrite for Paced {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_room(cx))?;
        let n = buf.len().min(self.lowat as usize);
        let written = Pin::new(&mut self.tcp).poll_write(cx, &buf[..n]);
        self.wrote(&written);
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_room(cx))?;
        let (mut left, mut within) = (self.lowat as usize, Vec::with_capacity(bufs.len()));
        for b in bufs {
            if left == 0 {
                break;
            }
            let n = b.len().min(left);
            within.push(io::IoSlice::new(&b[..n]));
            left -= n;
        }
        let written = Pin::new(&mut self.tcp).poll_write_vectored(cx, &within);
        self.wrote(&written);
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A TLS stream whose buffered records are held to its budget's share (rustls' buffer limit, set
/// again before each write).
pub(crate) struct PacedTls<S> {
    tls: S,
    budget: Arc<Budget>,
}

/// What of a TLS stream the limit needs: its rustls connection.
pub(crate) trait TlsLimit {
    /// Sets rustls' limit on buffered plaintext and records.
    fn set_limit(&mut self, bytes: usize);
}

impl<IO> TlsLimit for tokio_rustls::server::TlsStream<IO> {
    fn set_limit(&mut self, bytes: usize) {
        self.get_mut().1.set_buffer_limit(Some(bytes));
    }
}

impl<IO> TlsLimit for tokio_rustls::client::TlsStream<IO> {
    fn set_limit(&mut self, bytes: usize) {
        self.get_mut().1.set_buffer_limit(Some(bytes));
    }
}

impl<S> PacedTls<S> {
    /// `tls` under `budget`.
    pub(crate) fn new(tls: S, budget: Arc<Budget>) -> PacedTls<S> {
        PacedTls { tls, budget }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for PacedTls<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

/// Room over a frame's payload for what HTTP/2 writes with it in one go: the frame's 9-byte head,
/// and a few small frames (a probe's answer, a WINDOW_UPDATE, a PING).
pub(crate) const HEAD_SLACK_BYTES: usize = 256;

impl<S: AsyncWrite + TlsLimit + Unpin> PacedTls<S> {
    /// Ready for a write of `len` bytes to go to TLS whole: what TLS holds has gone to the socket
    /// first, and the limit then admits the write (up to the share and the slack). A write taken in
    /// part left its tail for a record of its own: with HTTP/2's chunk at the share, each DATA
    /// frame's last bytes became a 9-byte record, and every probe's answer waited behind two records
    /// per frame (download self probes 43 ms on a path where plain HTTP/2's took 33).
    fn poll_whole(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<()>> {
        std::task::ready!(Pin::new(&mut self.tls).poll_flush(cx))?;
        let share = self.budget.chunk_bytes();
        self.tls.set_limit(share.max(len.min(share + HEAD_SLACK_BYTES)));
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + TlsLimit + Unpin> AsyncWrite for PacedTls<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_whole(cx, buf.len()))?;
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    /// HTTP/2 writes a DATA frame's head and its payload as two slices: one write, so one TLS
    /// record (a write of the first slice alone made a record of every 9-byte head).
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        std::task::ready!(self.poll_whole(cx, len))?;
        Pin::new(&mut self.tls).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tls.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_ms_of_the_rate_is_shared_between_the_kernel_tls_and_http2() {
        let b = Budget::new(true);
        // Unknown rate: each at the floor.
        assert_eq!(
            (b.kernel_bytes(), b.chunk_bytes()),
            (FLOOR_BYTES, FLOOR_BYTES as usize)
        );
        // 100 Mbit/s is 12.5 MB/s: 5 ms is 62 500 bytes (the draft's own example), three fifths
        // of it 37 500 in the kernel, 12 500 each for TLS and HTTP/2.
        b.rate_bytes_per_s.store(12_500_000, Relaxed);
        assert_eq!((b.kernel_bytes(), b.chunk_bytes()), (37_500, 12_500));
        // Without TLS the kernel holds four fifths.
        let plain = Budget::new(false);
        plain.rate_bytes_per_s.store(12_500_000, Relaxed);
        assert_eq!(plain.kernel_bytes(), 50_000);
        // 1 Mbit/s: 625 bytes in all, each share at the floor.
        b.rate_bytes_per_s.store(125_000, Relaxed);
        assert_eq!((b.kernel_bytes(), b.chunk_bytes()), (512, 512));
        // 10 Gbit/s: the chunk and TLS's buffer at a record's size.
        b.rate_bytes_per_s.store(1_250_000_000, Relaxed);
        assert_eq!(b.chunk_bytes(), 16 * 1024);
        assert_eq!(b.kernel_bytes(), 3_750_000);
    }

    /// A TLS client's transport: what it wrote after its handshake, and its writes held while
    /// `blocked` (a socket at its mark).
    struct Tap {
        tcp: tokio::net::TcpStream,
        wrote: Vec<u8>,
        blocked: Arc<std::sync::atomic::AtomicBool>,
        waiting: Arc<std::sync::Mutex<Option<std::task::Waker>>>,
    }

    impl AsyncRead for Tap {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.tcp).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Tap {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            if self.blocked.load(Relaxed) {
                *self.waiting.lock().unwrap() = Some(cx.waker().clone());
                return Poll::Pending;
            }
            let n = std::task::ready!(Pin::new(&mut self.tcp).poll_write(cx, buf))?;
            self.wrote.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.tcp).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.tcp).poll_shutdown(cx)
        }
    }

    /// The lengths of the TLS records in `bytes`.
    fn records(bytes: &[u8]) -> Vec<usize> {
        let (mut at, mut out) = (0, Vec::new());
        while at + 5 <= bytes.len() {
            let len = usize::from(u16::from_be_bytes([bytes[at + 3], bytes[at + 4]]));
            out.push(len);
            at += 5 + len;
        }
        out
    }

    type Client = PacedTls<tokio_rustls::client::TlsStream<Tap>>;

    /// A TLS client under a budget whose share is 560 bytes, its server on loopback reading
    /// everything; the transport's record of writes starts after the handshake.
    async fn client() -> (Client, Arc<std::sync::atomic::AtomicBool>) {
        use landspeed_engine::tls::{client_config, Identity, Trust};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = Identity::self_signed().unwrap().server_config(&[]).unwrap();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = tokio_rustls::TlsAcceptor::from(server).accept(tcp).await.unwrap();
            let mut buf = [0u8; 4096];
            while std::future::poll_fn(|cx| {
                let mut rb = ReadBuf::new(&mut buf);
                Pin::new(&mut tls)
                    .poll_read(cx, &mut rb)
                    .map_ok(|()| rb.filled().len())
            })
            .await
            .is_ok_and(|n| n > 0)
            {}
        });
        let blocked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tap = Tap {
            tcp: tokio::net::TcpStream::connect(addr).await.unwrap(),
            wrote: Vec::new(),
            blocked: blocked.clone(),
            waiting: Arc::default(),
        };
        let cfg = client_config(&landspeed_core::tls::TlsCipher::ALL, Trust::Any, &[]).unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(cfg)
            .connect(landspeed_engine::tls::server_name(), tap)
            .await
            .unwrap();
        tls.get_mut().0.wrote.clear();
        let budget = Budget::new(true);
        // 560 000 bytes a second: 5 ms is 2 800 bytes, a fifth of it 560.
        budget.rate_bytes_per_s.store(560_000, Relaxed);
        assert_eq!(budget.chunk_bytes(), 560);
        (PacedTls::new(tls, budget), blocked)
    }

    /// An HTTP/2 DATA frame as h2 writes it: its 9-byte head and its payload of one share.
    fn frame() -> (Vec<u8>, Vec<u8>) {
        (vec![0u8; 9], vec![7u8; 560])
    }

    fn write_once(
        c: &mut Client,
        cx: &mut Context<'_>,
        head: &[u8],
        payload: &[u8],
    ) -> Poll<io::Result<usize>> {
        let bufs = [io::IoSlice::new(head), io::IoSlice::new(payload)];
        Pin::new(c).poll_write_vectored(cx, &bufs)
    }

    async fn flush(c: &mut Client) {
        std::future::poll_fn(|cx| Pin::new(&mut *c).poll_flush(cx))
            .await
            .unwrap();
    }

    /// TLS 1.3's record for `n` bytes of data: the content type and the AEAD tag added.
    const fn record(n: usize) -> usize {
        n + 1 + 16
    }

    #[tokio::test]
    async fn a_frame_and_its_head_go_as_one_record_where_a_write_in_part_left_a_record_of_its_tail() {
        let (mut c, _) = client().await;
        let (head, payload) = frame();
        let n = std::future::poll_fn(|cx| write_once(&mut c, cx, &head, &payload))
            .await
            .unwrap();
        assert_eq!(n, 569, "the whole frame taken in one write");
        flush(&mut c).await;
        assert_eq!(records(&c.tls.get_ref().0.wrote), vec![record(569)]);
    }

    #[tokio::test]
    async fn a_write_waits_while_tls_still_holds_the_last_one() {
        let (mut c, blocked) = client().await;
        let (head, payload) = frame();
        blocked.store(true, Relaxed);
        let waiting = c.tls.get_ref().0.waiting.clone();
        let first = std::future::poll_fn(|cx| Poll::Ready(write_once(&mut c, cx, &head, &payload))).await;
        assert!(
            matches!(first, Poll::Ready(Ok(569))),
            "{first:?}: taken whole, held by TLS"
        );
        let second = std::future::poll_fn(|cx| Poll::Ready(write_once(&mut c, cx, &head, &payload))).await;
        assert!(
            second.is_pending(),
            "the next write waits for the first to reach the socket"
        );
        blocked.store(false, Relaxed);
        if let Some(w) = waiting.lock().unwrap().take() {
            w.wake();
        }
        let n = std::future::poll_fn(|cx| write_once(&mut c, cx, &head, &payload))
            .await
            .unwrap();
        assert_eq!(n, 569);
        flush(&mut c).await;
        assert_eq!(records(&c.tls.get_ref().0.wrote), vec![record(569), record(569)]);
    }
}
