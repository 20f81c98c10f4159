//! Multicast over real sockets: a sender paced to a rate for a time (landspeed's datagrams, or iperf
//! 2's so that `iperf -s -u -B GROUP` can count them), and a receiver that joins a group (any source,
//! or one source: SSM), reads until every sender it heard has ended or its time is up, and hands
//! each datagram to `landspeed_core::multicast::Group`, which holds every figure. Nothing here talks
//! back to a sender: the group has no return path, so nothing a receiver does reaches anyone.

use landspeed_core::multicast::{self as mc, Arrival, Group, McSpecError, MulticastReport, SendReport};
use landspeed_core::payload::Pattern;
use landspeed_core::udp::pacing::{Pace, Pacer};
use socket2::{Domain, InterfaceIndexOrAddress, Protocol, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};
use thiserror::Error;

/// Why a multicast test could not run.
#[derive(Debug, Error)]
pub enum McError {
    /// The test as asked cannot be run.
    #[error(transparent)]
    Spec(#[from] McSpecError),
    /// This build has no multicast.
    #[error("{0}")]
    Unsupported(String),
    /// The interface named is not there.
    #[error("interface {name}: {err}")]
    Interface {
        /// Its name.
        name: String,
        /// Why.
        err: std::io::Error,
    },
    /// The kernel refused the join.
    #[error("cannot join {group}{on}: {err}")]
    Join {
        /// The group.
        group: SocketAddr,
        /// " from S on IF", as given.
        on: String,
        /// Why.
        err: std::io::Error,
    },
    /// Another socket call failed.
    #[error("{what}: {err}")]
    Socket {
        /// The call.
        what: &'static str,
        /// Why.
        err: std::io::Error,
    },
}

fn sock_err(what: &'static str) -> impl FnOnce(std::io::Error) -> McError {
    move |err| McError::Socket { what, err }
}

/// Where a multicast test's datagrams go, or come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPlan {
    /// The group and port.
    pub group: SocketAddr,
    /// The one source to hear (SSM); None: any.
    pub source: Option<IpAddr>,
    /// The interface to join or send on, by name; None: the route's.
    pub interface: Option<String>,
}

/// A sender's test.
#[derive(Debug, Clone)]
pub struct SendPlan {
    /// Where to.
    pub to: GroupPlan,
    /// The local address to send from (its port chosen by the kernel); None: the interface's.
    pub bind: Option<IpAddr>,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u32,
    /// Whether this host's own receivers get a copy (IP_MULTICAST_LOOP).
    pub loopback: bool,
    /// Bits per second of UDP payload.
    pub rate_bps: f64,
    /// Bytes per datagram (UDP payload).
    pub length: usize,
    /// How long to send.
    pub duration: Duration,
    /// Datagrams at most (None: as many as the time takes).
    pub count: Option<u64>,
    /// Send iperf 2's datagrams (no verification) rather than landspeed's.
    pub iperf2: bool,
    /// The test's key (None: a random one): a mesh's controller chooses it, so that each receiver
    /// it ordered reports this sender's test.
    pub key: Option<u64>,
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn supported() -> Result<(), McError> {
    landspeed_engine::platform::require("multicast tests").map_err(|e| McError::Unsupported(e.to_string()))
}

fn index_of(interface: &Option<String>) -> Result<u32, McError> {
    interface.as_ref().map_or(Ok(0), |name| {
        landspeed_engine::os::interface_index(name).map_err(|err| McError::Interface {
            name: name.clone(),
            err,
        })
    })
}

/// The group's address to bind or send to: link-scoped IPv6 groups need the interface.
fn scoped(group: SocketAddr, index: u32) -> SocketAddr {
    match group {
        SocketAddr::V6(mut a) => {
            a.set_scope_id(index);
            SocketAddr::V6(a)
        }
        v4 => v4,
    }
}

fn udp_socket(at: SocketAddr) -> Result<Socket, McError> {
    let s =
        Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP)).map_err(sock_err("socket"))?;
    if at.is_ipv6() {
        s.set_only_v6(true).map_err(sock_err("IPV6_V6ONLY"))?;
    }
    Ok(s)
}

/// A socket bound to the group's port and joined to it, as `plan` says, after the group and the
/// source are checked (`serve --join`'s listener).
pub(crate) fn join_group(plan: &GroupPlan) -> Result<UdpSocket, McError> {
    supported()?;
    mc::check_group(plan.group, plan.source)?;
    join(plan)
}

/// A socket bound to the group's port and joined to it, as `plan` says.
fn join(plan: &GroupPlan) -> Result<UdpSocket, McError> {
    let index = index_of(&plan.interface)?;
    let at = scoped(plan.group, index);
    let s = udp_socket(at)?;
    // Several receivers on one host each get every datagram.
    s.set_reuse_address(true).map_err(sock_err("SO_REUSEADDR"))?;
    // Bound to the group itself: datagrams to other groups on the same port stay out.
    s.bind(&SockAddr::from(at)).map_err(sock_err("bind"))?;
    let _ = s.set_recv_buffer_size(8 << 20);
    let joined = match (plan.group.ip(), plan.source) {
        (IpAddr::V4(g), None) => s.join_multicast_v4_n(&g, &InterfaceIndexOrAddress::Index(index)),
        (IpAddr::V6(g), None) => s.join_multicast_v6(&g, index),
        (g, Some(src)) => landspeed_engine::os::join_source_group(&s, index, g, src),
    };
    joined.map_err(|err| McError::Join {
        group: plan.group,
        on: on_text(plan),
        err,
    })?;
    Ok(s.into())
}

fn on_text(plan: &GroupPlan) -> String {
    let from = plan.source.map(|s| format!(" from {s}")).unwrap_or_default();
    let on = plan
        .interface
        .as_ref()
        .map(|i| format!(" on {i}"))
        .unwrap_or_default();
    format!("{from}{on}")
}

/// The sender's socket: bound, its TTL, loop and interface set, connected to the group.
fn sender_socket(plan: &SendPlan) -> Result<UdpSocket, McError> {
    let index = index_of(&plan.to.interface)?;
    let to = scoped(plan.to.group, index);
    let s = udp_socket(to)?;
    let local = plan.bind.unwrap_or(match to {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    s.bind(&SockAddr::from(SocketAddr::new(local, 0)))
        .map_err(sock_err("bind"))?;
    if to.is_ipv4() {
        s.set_multicast_ttl_v4(plan.ttl)
            .map_err(sock_err("IP_MULTICAST_TTL"))?;
        s.set_multicast_loop_v4(plan.loopback)
            .map_err(sock_err("IP_MULTICAST_LOOP"))?;
        if index != 0 {
            landspeed_engine::os::set_multicast_if_index_v4(&s, index)
                .map_err(sock_err("IP_MULTICAST_IF"))?;
        }
    } else {
        s.set_multicast_hops_v6(plan.ttl)
            .map_err(sock_err("IPV6_MULTICAST_HOPS"))?;
        s.set_multicast_loop_v6(plan.loopback)
            .map_err(sock_err("IPV6_MULTICAST_LOOP"))?;
        if index != 0 {
            s.set_multicast_if_v6(index)
                .map_err(sock_err("IPV6_MULTICAST_IF"))?;
        }
    }
    let _ = s.set_send_buffer_size(4 << 20);
    s.connect(&SockAddr::from(to)).map_err(sock_err("connect"))?;
    Ok(s.into())
}

/// The datagrams a sender writes: landspeed's (verified by every receiver) or iperf 2's.
enum Writer {
    Landspeed(Pattern),
    Iperf2(Vec<u8>),
}

impl Writer {
    fn new(plan: &SendPlan, key: u64) -> Writer {
        if !plan.iperf2 {
            return Writer::Landspeed(Pattern::new(key));
        }
        let header = landspeed_iperf2::ClientHeader::for_udp_sender(
            plan.to.group.port(),
            plan.length as u32,
            plan.rate_bps as u64,
            landspeed_iperf2::Amount::Centiseconds(plan.duration.as_millis().div_ceil(10).min(1 << 31) as u32),
        );
        Writer::Iperf2(header.encode())
    }

    /// Datagram `k` (from 0) into `buf`.
    fn data(&self, buf: &mut [u8], k: u64, (start_ns, now_ns): (u64, u64)) {
        match self {
            Writer::Landspeed(p) => mc::write_data(buf, p, k, (start_ns, now_ns)),
            Writer::Iperf2(header) => iperf2_datagram(buf, header, k as i64 + 1, now_ns),
        }
    }
}

fn iperf2_datagram(buf: &mut [u8], header: &[u8], seq: i64, now_ns: u64) {
    let d = landspeed_iperf2::udp::Datagram {
        seq,
        sent_s: (now_ns / 1_000_000_000) as u32,
        sent_us: (now_ns % 1_000_000_000 / 1000) as u32,
    };
    let prefix = landspeed_iperf2::udp::PREFIX_BYTES;
    buf[..prefix].copy_from_slice(&d.encode(true));
    buf[prefix..prefix + header.len()].copy_from_slice(header);
}

/// What a sender tells as it goes (the `iperf` drop-in prints iperf 2's lines from it).
pub trait SendWatch {
    /// The socket is open, sending from `from`.
    fn opened(&mut self, _from: SocketAddr) {}
    /// `sent` datagrams went before `elapsed` (from the start; the end not among them). Told before
    /// each round of sending and at least every 20 ms.
    fn progress(&mut self, _elapsed: Duration, _sent: u64) {}
}

/// Nothing watched.
impl SendWatch for () {}

/// Sends to the group as `plan` says, until its time or count is done or `stop` is set, then the
/// end (landspeed's three times, 10 ms apart; iperf 2's once, as its client does).
pub fn send_multicast(plan: &SendPlan, stop: &AtomicBool) -> Result<SendReport, McError> {
    send_multicast_watched(plan, stop, &mut ())
}

/// [`send_multicast`], telling `watch` as it goes.
pub fn send_multicast_watched(
    plan: &SendPlan,
    stop: &AtomicBool,
    watch: &mut dyn SendWatch,
) -> Result<SendReport, McError> {
    supported()?;
    mc::check_group(plan.to.group, None)?;
    mc::check_sender(plan.length as u64, plan.rate_bps, plan.ttl, plan.iperf2)?;
    let sock = sender_socket(plan)?;
    watch.opened(sock.local_addr().map_err(sock_err("getsockname"))?);
    let key = plan.key.unwrap_or_else(|| {
        let mut key_bytes = [0u8; 8];
        let _ = getrandom::fill(&mut key_bytes);
        u64::from_le_bytes(key_bytes)
    });
    let writer = Writer::new(plan, key);
    let mut buf = vec![0u8; plan.length];
    let mut tally = Tally::default();
    let started = Instant::now();
    let start_ns = unix_ns();
    let mut pacer = Pacer::new(start_ns, plan.rate_bps, plan.length, 8);
    while !stop.load(Relaxed)
        && started.elapsed() < plan.duration
        && plan.count.is_none_or(|c| pacer.count() < c)
    {
        watch.progress(started.elapsed(), pacer.count());
        let now = unix_ns();
        match pacer.poll(now) {
            Pace::WaitUntil(t) => std::thread::sleep(Duration::from_nanos((t - now).min(20_000_000))),
            Pace::Send(n) => {
                for _ in 0..n {
                    writer.data(&mut buf, pacer.count(), (start_ns, unix_ns()));
                    tally.sent(sock.send(&buf));
                    pacer.sent(1);
                }
            }
        }
    }
    watch.progress(started.elapsed(), pacer.count());
    let elapsed = started.elapsed().as_secs_f64();
    let sent = pacer.count();
    let datagrams = send_end(&sock, &writer, &mut buf, (start_ns, sent));
    Ok(SendReport {
        protocol: if plan.iperf2 { "iperf2" } else { "landspeed" }.into(),
        group: plan.to.group,
        from: sock.local_addr().map_err(sock_err("getsockname"))?,
        key: format!("{key:016x}"),
        ttl: plan.ttl,
        datagrams,
        bytes: datagrams * plan.length as u64,
        send_errors: tally.errors,
        first_error: tally.first,
        elapsed_s: elapsed,
        rate_bps: if elapsed > 0.0 {
            (sent * plan.length as u64 * 8) as f64 / elapsed
        } else {
            0.0
        },
        started_unix_s: start_ns as f64 / 1e9,
    })
}

/// Send errors: counted, the first kept.
#[derive(Default)]
struct Tally {
    errors: u64,
    first: Option<String>,
}

impl Tally {
    fn sent(&mut self, r: std::io::Result<usize>) {
        if let Err(e) = r {
            self.errors += 1;
            self.first.get_or_insert_with(|| e.to_string());
        }
    }
}

/// Sends the end; returns the datagrams of the test (iperf 2's end is one of them).
fn send_end(sock: &UdpSocket, writer: &Writer, buf: &mut [u8], (start_ns, sent): (u64, u64)) -> u64 {
    match writer {
        Writer::Landspeed(p) => {
            let mut end = [0u8; mc::HEADER_BYTES];
            for k in 0..3 {
                if k > 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
                mc::McHeader::End {
                    sent,
                    sent_ns: unix_ns(),
                    key: p.key(),
                    start_ns,
                }
                .write(&mut end);
                let _ = sock.send(&end);
            }
            sent
        }
        Writer::Iperf2(header) => {
            iperf2_datagram(buf, header, -(sent as i64 + 1), unix_ns());
            let _ = sock.send(buf);
            sent + 1
        }
    }
}

/// A receiver's test.
#[derive(Debug, Clone)]
pub struct ReceivePlan {
    /// The group to join.
    pub from: GroupPlan,
    /// The longest the receiver waits in all.
    pub max_wait: Duration,
    /// How long after every sender heard has ended the receiver keeps listening (for late
    /// datagrams and other senders).
    pub linger: Duration,
}

/// Joins the group and counts what arrives until every sender heard has ended (and `linger` passed
/// with nothing new), `max_wait` is up, or `stop` is set.
pub fn receive_multicast(
    plan: &ReceivePlan,
    stop: &AtomicBool,
    joined: impl FnOnce(),
) -> Result<MulticastReport, McError> {
    supported()?;
    mc::check_group(plan.from.group, plan.from.source)?;
    let sock = join(&plan.from)?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(sock_err("SO_RCVTIMEO"))?;
    joined();
    let mut group = Group::new(unix_ns());
    let mut reader = Reader::default();
    let mut buf = vec![0u8; 65_536];
    let started = Instant::now();
    let ended_by = loop {
        if stop.load(Relaxed) {
            break "interrupted";
        }
        if started.elapsed() >= plan.max_wait {
            break "time limit";
        }
        let quiet_ns = unix_ns().saturating_sub(group.last_arrival_ns());
        if group.all_ended() && quiet_ns >= plan.linger.as_nanos() as u64 {
            break "every sender ended";
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => reader.read(&mut group, from, &buf[..n], unix_ns()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                return Err(McError::Socket {
                    what: "recvfrom",
                    err,
                })
            }
        }
    };
    let mut report = group.report(plan.from.group.to_string(), ended_by);
    report.source = plan.from.source.map(|s| s.to_string());
    report.interface = plan.from.interface.clone();
    Ok(report)
}

/// Tells each datagram's tool by its bytes: landspeed's magic, or an iperf 2 client's header (whose
/// later datagrams, the end among them, are read by the sender they came from).
#[derive(Default)]
struct Reader {
    /// iperf 2 senders heard, with whether their sequence numbers are 64 bits.
    iperf2: HashMap<SocketAddr, bool>,
}

impl Reader {
    fn read(&mut self, group: &mut Group, from: SocketAddr, b: &[u8], at_ns: u64) {
        if mc::McHeader::read(b).is_some() {
            return group.on_datagram(from, Arrival::Landspeed(b), at_ns);
        }
        let seq64 = match self.iperf2.get(&from) {
            Some(&wide) => wide,
            None => match landspeed_iperf2::detect::udp(b) {
                Some((_, h)) if self.iperf2.len() < mc::MAX_SOURCES => {
                    let wide = h.flags & landspeed_iperf2::header::flags::SEQNO64B != 0;
                    *self.iperf2.entry(from).or_insert(wide)
                }
                _ => return group.on_unknown(),
            },
        };
        let Ok(d) = landspeed_iperf2::udp::Datagram::parse(b, seq64) else {
            return group.on_unknown();
        };
        let number = d.seq.unsigned_abs();
        if number == 0 {
            return group.on_unknown();
        }
        let arrival = Arrival::Foreign {
            protocol: "iperf2",
            seq: number - 1,
            sent_ns: u64::from(d.sent_s) * 1_000_000_000 + u64::from(d.sent_us) * 1000,
            len: b.len(),
            end_of: d.is_fin().then_some(number),
        };
        group.on_datagram(from, arrival, at_ns);
    }
}
