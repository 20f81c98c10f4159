//! Linux: the reference implementation of [`crate::os`] (libc system calls, /proc, mio's epoll).

use crate::cpu::SystemTicks;
use crate::sockopt::SockOptError;
use crate::tcp_info::{RawTcpInfo, TcpInfo};
use std::fs::{File, OpenOptions};
use std::io::{Error, Result};
use std::net::{IpAddr, TcpStream, UdpSocket};
pub use std::os::fd::AsFd as AsSock;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

// ---- socket options ----

fn raw(sock: &impl AsSock) -> libc::c_int {
    sock.as_fd().as_raw_fd()
}

/// Sets an int socket option (`level` SOL_SOCKET, SOL_UDP, IPPROTO_TCP, ...).
pub fn set_int(sock: &impl AsSock, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> Result<()> {
    set_value(sock, level, opt, &v)
}

fn set_value<T: Copy>(sock: &impl AsSock, level: libc::c_int, opt: libc::c_int, v: &T) -> Result<()> {
    // SAFETY: `v` points at a live T whose size is passed.
    let rc = unsafe {
        libc::setsockopt(
            raw(sock),
            level,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(())
}

/// Reads an int socket option.
fn get_int(sock: &impl AsSock, level: libc::c_int, opt: libc::c_int) -> Result<libc::c_int> {
    let (mut v, mut len): (libc::c_int, libc::socklen_t) = (0, std::mem::size_of::<libc::c_int>() as _);
    // SAFETY: getsockopt into a live c_int whose size is passed.
    let rc = unsafe {
        libc::getsockopt(
            raw(sock),
            level,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(v)
}

/// TCP_INFO says whether ECN was negotiated and counts CE-marked deliveries.
pub const TCP_INFO_HAS_ECN: bool = true;

/// TCP_INFO of a TCP socket, and how many bytes of it the kernel filled.
pub fn tcp_info(sock: &impl AsSock) -> Result<TcpInfo> {
    let mut raw_info = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw_info` is a plain repr(C) struct of `len` bytes; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            raw(sock),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw_info as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(TcpInfo {
        raw: raw_info,
        len: len as usize,
    })
}

/// The congestion control a socket uses (TCP_CONGESTION).
pub fn congestion(sock: &socket2::Socket) -> Option<String> {
    let name = sock.tcp_congestion().ok()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Sets the congestion control (TCP_CONGESTION).
pub fn set_congestion(sock: &socket2::Socket, name: &str) -> Result<()> {
    sock.set_tcp_congestion(name.as_bytes())
}

/// Sets the MSS asked of the handshake (TCP_MAXSEG).
pub fn set_mss(sock: &socket2::Socket, mss: u32) -> Result<()> {
    sock.set_tcp_mss(mss)
}

/// Paces a sending socket at `bytes_per_s` (SO_MAX_PACING_RATE) and keeps at most `unsent` bytes
/// unsent in it (TCP_NOTSENT_LOWAT).
pub fn set_pacing(
    sock: &socket2::Socket,
    bytes_per_s: u64,
    unsent: usize,
) -> std::result::Result<(), SockOptError> {
    let other = |what| move |err| SockOptError::Other { what, err };
    // A u64, as SO_MAX_PACING_RATE accepts since Linux 4.20.
    set_value(sock, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes_per_s)
        .map_err(other("SO_MAX_PACING_RATE"))?;
    let unsent = unsent.min(i32::MAX as usize) as libc::c_int;
    set_int(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, unsent).map_err(other("TCP_NOTSENT_LOWAT"))
}

/// Linux's `struct in6_flowlabel_req` (linux/in6.h): a flow label asked of the kernel's label
/// manager for one destination.
#[repr(C)]
#[derive(Clone, Copy)]
struct FlowLabelReq {
    dst: [u8; 16],
    label_be: u32,
    action: u8,
    share: u8,
    flags: u16,
    expires: u16,
    linger: u16,
    pad: u32,
}

/// The IPv6 flow label `label` on a socket about to connect to `dst`: taken from the kernel's label
/// manager (created, shared with any socket) and sent in every packet (IPV6_FLOWINFO_SEND).
pub fn set_flow_label(
    sock: &socket2::Socket,
    dst: std::net::Ipv6Addr,
    label: u32,
) -> std::result::Result<(), SockOptError> {
    let other = |what| move |err| SockOptError::Other { what, err };
    const GET: u8 = 0;
    const CREATE: u16 = 1;
    const SHARE_ANY: u8 = 255;
    let req = FlowLabelReq {
        dst: dst.octets(),
        label_be: (label & 0xf_ffff).to_be(),
        action: GET,
        share: SHARE_ANY,
        flags: CREATE,
        expires: 0,
        linger: 0,
        pad: 0,
    };
    set_value(sock, libc::IPPROTO_IPV6, libc::IPV6_FLOWLABEL_MGR, &req)
        .map_err(other("IPV6_FLOWLABEL_MGR"))?;
    set_int(sock, libc::IPPROTO_IPV6, libc::IPV6_FLOWINFO_SEND, 1).map_err(other("IPV6_FLOWINFO_SEND"))
}

/// Bytes written to a TCP socket and not yet sent (SIOCOUTQNSD).
pub fn unsent_bytes(sock: &impl AsSock) -> Result<u64> {
    // The request argument is c_ulong in glibc and c_int in musl: `as _` takes either.
    const SIOCOUTQNSD: u32 = 0x894B;
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQNSD writes one int through the pointer, which points at a live c_int.
    let rc = unsafe { libc::ioctl(raw(sock), SIOCOUTQNSD as _, &mut n) };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(n.max(0) as u64)
}

/// Keeps at most `bytes` written and not yet sent in a TCP socket (TCP_NOTSENT_LOWAT): the send
/// buffer then holds the congestion window and little more, so data written later waits less.
pub fn set_notsent_lowat(sock: &impl AsSock, bytes: u32) -> Result<()> {
    set_int(
        sock,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        bytes.min(i32::MAX as u32) as i32,
    )
}

/// Clamps the receive window a TCP socket advertises to `bytes` (TCP_WINDOW_CLAMP).
pub fn set_window_clamp(sock: &impl AsSock, bytes: u32) -> Result<()> {
    set_int(
        sock,
        libc::IPPROTO_TCP,
        libc::TCP_WINDOW_CLAMP,
        bytes.min(i32::MAX as u32) as i32,
    )
}

/// The receive window a TCP socket is clamped to (TCP_WINDOW_CLAMP), bytes (0: not clamped).
pub fn window_clamp(sock: &impl AsSock) -> Result<u32> {
    get_int(sock, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP).map(|v| v as u32)
}

/// The unsent data a TCP socket is held to (TCP_NOTSENT_LOWAT), bytes: what `set_notsent_lowat`
/// left (the kernel's default, its sysctl's, when never set).
pub fn notsent_lowat(sock: &impl AsSock) -> Result<u32> {
    get_int(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT).map(|v| v as u32)
}

/// Acknowledges at once rather than after the delayed-ACK timer (TCP_QUICKACK; the kernel clears
/// it again by itself, so a request/response loop sets it after each exchange).
pub fn set_quickack(sock: &impl AsSock) -> Result<()> {
    set_int(sock, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1)
}

/// The MTU of a connected socket's route (IP_MTU, or IPV6_MTU on an IPv6 socket), as the kernel
/// knows it now: the interface's, or a smaller one path MTU discovery found.
pub fn path_mtu(sock: &TcpStream) -> Result<u32> {
    let (level, opt) = match sock.local_addr()? {
        std::net::SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU),
        std::net::SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    let mtu = get_int(sock, level, opt)?;
    Ok(mtu.max(0) as u32)
}

/// Sets the receive low-water mark (SO_RCVLOWAT) and returns what the kernel kept.
pub fn set_rcvlowat(sock: &impl AsSock, bytes: u64) -> Result<u64> {
    let asked = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int(sock, libc::SOL_SOCKET, libc::SO_RCVLOWAT, asked)?;
    let kept = get_int(sock, libc::SOL_SOCKET, libc::SO_RCVLOWAT)?;
    Ok(kept.max(0) as u64)
}

/// Whether the peer has closed or reset a connection that should be quiet now: a non-blocking peek
/// that sees end-of-file or an error. Bytes waiting to be read mean the peer is still there.
pub fn peer_gone(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: recv(2) into a 1-byte stack buffer on a descriptor `s` owns; MSG_PEEK leaves the data.
    let n = unsafe {
        libc::recv(
            raw(s),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => true,
        n if n > 0 => false,
        _ => !matches!(
            Error::last_os_error().kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
        ),
    }
}

/// Receives up to `buf.len()` bytes without copying them to user space: for TCP, MSG_TRUNC makes the
/// kernel consume and drop the data (`buf` is not written). Returns the byte count like `read`.
pub fn discard(sock: &TcpStream, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: with MSG_TRUNC on a TCP socket the kernel writes nothing to the buffer; a null pointer
    // with a length is accepted for exactly this use.
    let n = unsafe { libc::recv(raw(sock), std::ptr::null_mut(), buf.len(), libc::MSG_TRUNC) };
    if n < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

// ---- UDP ----

/// Whether a send error means the kernel's queue was full (the datagrams are skipped and counted).
pub fn queue_full(e: &Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS) || e.kind() == std::io::ErrorKind::WouldBlock
}

/// UDP segmentation offload: every send of several `len`-sized pieces leaves as that many datagrams.
/// False where the kernel does not offer it (then datagrams are sent one by one).
pub fn enable_gso(s: &UdpSocket, len: usize) -> bool {
    len <= 65_000 && set_int(s, libc::SOL_UDP, libc::UDP_SEGMENT, len as libc::c_int).is_ok()
}

/// UDP receive offload: the kernel may hand over several same-sized datagrams in one read.
pub fn enable_gro(s: &UdpSocket) -> bool {
    set_int(s, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
}

/// Asks the kernel to attach the socket's drop count to each datagram (SO_RXQ_OVFL); false if not.
pub fn count_drops(s: &UdpSocket) -> bool {
    set_int(s, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok()
}

/// Asks the kernel to attach each datagram's TOS byte, or IPv6 traffic class (IP_RECVTOS,
/// IPV6_RECVTCLASS), so its ECN field can be read; false if neither took.
pub fn receive_tos(s: &UdpSocket) -> bool {
    let v4 = set_int(s, libc::IPPROTO_IP, libc::IP_RECVTOS, 1).is_ok();
    let v6 = set_int(s, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1).is_ok();
    v4 || v6
}

/// What one read of a UDP socket gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRead {
    /// Bytes read.
    pub len: usize,
    /// The socket's drop count the kernel stamped on this buffer (SO_RXQ_OVFL; 0 when it attached
    /// none, which it does while the count is 0).
    pub drops: u64,
    /// The datagram's TOS byte or traffic class (with `receive_tos`), the same for every datagram
    /// a receive offload put together (the kernel merges only datagrams whose headers match).
    pub tos: Option<u8>,
}

/// One read, with what the kernel attached to it (`UdpRead`); `wait` false returns WouldBlock at
/// once when nothing is queued (MSG_DONTWAIT), for a receiver that polls.
pub fn recv_counted(s: &UdpSocket, buf: &mut [u8], wait: bool) -> Result<UdpRead> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 12]; // aligned room for the drop count, the TOS and the offload's size
                                  // SAFETY: a zeroed msghdr is valid; it then points at the live iovec and control buffer above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg with the msghdr built above, whose buffers outlive the call.
    let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
    let n = unsafe { libc::recvmsg(raw(s), &mut msg, flags) };
    if n < 0 {
        return Err(Error::last_os_error());
    }
    let (mut drops, mut tos) = (0u64, None);
    // SAFETY: the CMSG_* walk stays within msg_controllen as the kernel set it; the data of an
    // SO_RXQ_OVFL message is one u32, of IP_TOS one byte, of IPV6_TCLASS one int, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                    drops = u64::from(std::ptr::read_unaligned(data.cast::<u32>()))
                }
                (libc::IPPROTO_IP, libc::IP_TOS) => tos = Some(*data),
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    tos = Some(std::ptr::read_unaligned(data.cast::<libc::c_int>()) as u8)
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(UdpRead {
        len: n as usize,
        drops,
        tos,
    })
}

/// The buffers the socket has dropped, from SO_MEMINFO (None if the kernel does not say).
pub fn socket_drops(s: &UdpSocket) -> Option<u64> {
    let mut info = [0u32; 16]; // SK_MEMINFO_VARS is 9 today; room for more
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt into a live u32 array whose size is passed.
    let rc = unsafe {
        libc::getsockopt(
            raw(s),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let idx = libc::SK_MEMINFO_DROPS as usize;
    (rc == 0 && len as usize > idx * 4).then(|| u64::from(info[idx]))
}

/// Makes the calling thread's timed sleeps end within a microsecond of their time (PR_SET_TIMERSLACK).
pub fn tight_timers() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64, 0, 0, 0) };
}

// ---- readiness ----

/// Waits up to `timeout` for one socket to be readable or (when `write`) writable; returns (readable,
/// writable). An error or hang-up counts as readable: the next read says what it was.
pub fn wait_one(sock: &TcpStream, write: bool, timeout: std::time::Duration) -> Result<(bool, bool)> {
    let mut fd = libc::pollfd {
        fd: raw(sock),
        events: libc::POLLIN | if write { libc::POLLOUT } else { 0 },
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(0, i32::MAX as u128) as libc::c_int;
    // SAFETY: one live pollfd.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    if n < 0 {
        let e = Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::Interrupted => Ok((false, false)),
            _ => Err(e),
        };
    }
    let r = fd.revents;
    Ok((
        r & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0,
        r & libc::POLLOUT != 0,
    ))
}

/// mio's epoll, edge-triggered: `waiting` is not needed, epoll reports only what changed.
pub struct Poller {
    poll: mio::Poll,
    events: mio::Events,
}

impl Poller {
    /// An epoll instance with room for `n` events per wait.
    pub fn new(n: usize) -> Result<Poller> {
        Ok(Poller {
            poll: mio::Poll::new()?,
            events: mio::Events::with_capacity(n.max(16)),
        })
    }
}

impl super::Readiness for Poller {
    fn register(&mut self, sock: &TcpStream, token: usize, writable: bool) -> Result<()> {
        let interest = if writable {
            mio::Interest::WRITABLE
        } else {
            mio::Interest::READABLE
        };
        let fd = sock.as_raw_fd();
        let source = &mut mio::unix::SourceFd(&fd);
        self.poll.registry().register(source, mio::Token(token), interest)
    }

    fn wait(
        &mut self,
        timeout: std::time::Duration,
        _waiting: &dyn Fn(usize) -> bool,
        ready: &mut dyn FnMut(usize),
    ) -> Result<()> {
        self.poll.poll(&mut self.events, Some(timeout))?;
        for ev in self.events.iter() {
            ready(ev.token().0);
        }
        Ok(())
    }
}

// ---- CPU ----

/// User and system CPU seconds of this process (`RUSAGE_SELF`) or this thread (`RUSAGE_THREAD`).
fn rusage_times(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// This thread's user and system CPU seconds.
pub fn thread_times() -> (f64, f64) {
    rusage_times(libc::RUSAGE_THREAD)
}

/// This process's user and system CPU seconds.
pub fn process_times() -> (f64, f64) {
    rusage_times(libc::RUSAGE_SELF)
}

/// Seconds the calling thread has waited, ready, for a CPU (the second field of
/// /proc/thread-self/schedstat, in ns); None where the kernel keeps no such count.
pub fn thread_runq_wait_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// CPUs online on the host (a quota or affinity mask does not lower it).
pub fn cpus_online() -> u32 {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } {
        n if n > 0 => n as u32,
        _ => crate::cpu::cpu_count(),
    }
}

/// The CPU quota of the nearest control group above this process that has one, with its throttling
/// counters (cgroup v1's cpu controller where it is mounted, else v2); None without a quota.
pub fn cgroup_cpu() -> Option<crate::cpu::CgroupTicks> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let v1 = own.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    });
    let v2 = own.lines().find_map(|l| l.strip_prefix("0::"));
    let (root, path, v1) = match (v1, v2) {
        (Some(p), _) => ("/sys/fs/cgroup/cpu", p, true),
        (None, Some(p)) => ("/sys/fs/cgroup", p, false),
        _ => return None,
    };
    let mut at = Path::new(path.trim());
    loop {
        let dir = Path::new(root).join(at.strip_prefix("/").unwrap_or(at));
        if let Some(t) = cgroup_quota_at(&dir, v1, at) {
            return Some(t);
        }
        at = at.parent()?;
    }
}

/// One group's quota and counters, when it has a quota.
fn cgroup_quota_at(dir: &Path, v1: bool, path: &Path) -> Option<crate::cpu::CgroupTicks> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let quota = if v1 {
        let (q, p) = (read("cpu.cfs_quota_us")?, read("cpu.cfs_period_us")?);
        crate::cpu::parse_quota(None, Some((&q, &p)))
    } else {
        crate::cpu::parse_quota(Some(&read("cpu.max")?), None)
    }?;
    let (periods, throttled_periods, throttled_s) = crate::cpu::parse_cgroup_stat(&read("cpu.stat")?);
    Some(crate::cpu::CgroupTicks {
        path: path.display().to_string(),
        quota_cpus: quota,
        periods,
        throttled_periods,
        throttled_s,
    })
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions; -1 means unknown.
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// The machine's CPU ticks ("cpu" line of /proc/stat) and each CPU's ("cpuN" lines), and ticks per second.
pub fn system_ticks() -> (SystemTicks, Vec<(u32, SystemTicks)>, f64) {
    // SAFETY: sysconf has no preconditions.
    let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        t if t > 0 => t as f64,
        _ => 100.0,
    };
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return (SystemTicks::default(), vec![], hz);
    };
    let (all, each) = crate::cpu::parse_proc_stat(&text);
    (all, each, hz)
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is a plain bit set; CPU_SET bounds-checks against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs this process may run on (its affinity mask).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills the zeroed set; CPU_ISSET reads within its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..crate::cpu::cpu_count() as usize).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

// ---- descriptors ----

/// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the limit now in force.
pub fn raise_fd_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit read and write the plain struct we pass.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return want.rlim_cur;
            }
        }
        r.rlim_cur
    }
}

/// The open-file limit in force (the soft RLIMIT_NOFILE), or 0 if it cannot be read.
pub fn fd_limit() -> u64 {
    // SAFETY: getrlimit writes the plain struct we pass.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        r.rlim_cur
    }
}

// ---- the host ----

/// (host name, kernel name, kernel release) from uname(2).
pub fn uname() -> (String, String, String) {
    // SAFETY: uname fills the zeroed struct.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let s = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (s(&u.nodename), s(&u.sysname), s(&u.release))
}

/// The name of the interface that holds `addr` (getifaddrs).
pub fn interface_for(addr: IpAddr) -> Option<String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk read-only and free with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_addr, when set, points to a sockaddr whose family says which struct it is.
        if !ifa.ifa_addr.is_null() && unsafe { sockaddr_ip(ifa.ifa_addr) } == Some(addr) {
            // SAFETY: ifa_name is a NUL-terminated C string.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            found = Some(name.to_string_lossy().into_owned());
            break;
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: frees the list allocated above exactly once.
    unsafe { libc::freeifaddrs(head) };
    found
}

/// The address in a sockaddr of either IP family.
///
/// # Safety
/// `sa` points at a live sockaddr as large as its family's struct.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    match i32::from((*sa).sa_family) {
        libc::AF_INET => {
            let sa = &*(sa as *const libc::sockaddr_in);
            Some(IpAddr::from(u32::from_be(sa.sin_addr.s_addr).to_be_bytes()))
        }
        libc::AF_INET6 => Some(IpAddr::from(
            (*(sa as *const libc::sockaddr_in6)).sin6_addr.s6_addr,
        )),
        _ => None,
    }
}

// ---- files ----

/// Opens for reading with O_DIRECT when the file system takes it (tmpfs does not), else buffered;
/// says which.
pub fn open_direct(path: &Path) -> Result<(File, bool)> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((File::open(path)?, false)),
        Err(e) => Err(e),
    }
}

/// Drops a file's cached pages, so the next read comes from the disk (advice only; tmpfs ignores it).
pub fn drop_cache(file: &File) {
    // SAFETY: plain fadvise on an open descriptor.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// One sendfile(2) of up to `n` bytes of `file` from `offset` into the (non-blocking) socket.
pub fn send_chunk(sock: &TcpStream, file: &File, offset: u64, n: usize) -> Result<usize> {
    let mut off = offset as libc::off64_t;
    // SAFETY: both descriptors are open for the call; `off` is a valid pointer.
    let r = unsafe { libc::sendfile64(sock.as_raw_fd(), file.as_raw_fd(), &mut off, n) };
    if r < 0 {
        return Err(Error::last_os_error());
    }
    Ok(r as usize)
}

/// socket -> pipe -> file with splice(2): the receiver's copy-free path.
pub struct Splicer {
    read: OwnedFd,
    write: OwnedFd,
    cap: usize,
}

impl Splicer {
    /// A pipe to splice through, sized as large as the host allows.
    pub fn new() -> Result<Splicer> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 returns.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded, so both are open descriptors that we now own.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A bigger pipe moves more per call; the default (64 KiB) is kept if the kernel refuses.
        // SAFETY: plain fcntl on a descriptor we own.
        let got = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        let cap = if got > 0 { got as usize } else { 64 << 10 };
        Ok(Splicer { read, write, cap })
    }

    /// Moves what the socket has (up to `n` bytes) into `file` at `offset`. Ok(0) at end of stream;
    /// WouldBlock when the socket has nothing.
    pub fn recv(&mut self, sock: &TcpStream, file: &File, offset: u64, n: usize) -> Result<usize> {
        let want = n.min(self.cap);
        let (sock_fd, write_fd) = (sock.as_raw_fd(), self.write.as_raw_fd());
        let null = std::ptr::null_mut();
        // SAFETY: open descriptors, null offsets (socket and pipe have none).
        let got = unsafe {
            libc::splice(
                sock_fd,
                null,
                write_fd,
                null,
                want,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if got < 0 {
            return Err(Error::last_os_error());
        }
        let got = got as usize;
        let mut moved = 0usize;
        let mut off = offset as libc::loff_t;
        while moved < got {
            let (read_fd, file_fd) = (self.read.as_raw_fd(), file.as_raw_fd());
            // SAFETY: open descriptors; `off` is a valid pointer the kernel advances.
            let w =
                unsafe { libc::splice(read_fd, null, file_fd, &mut off, got - moved, libc::SPLICE_F_MOVE) };
            if w < 0 {
                let e = Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if w == 0 {
                return Err(Error::other("splice into the file moved nothing"));
            }
            moved += w as usize;
        }
        Ok(got)
    }
}

// ---- whole features only Linux has ----

/// MPTCP's figures of a connection.
pub fn mptcp_stats(sock: &TcpStream) -> Option<landspeed_core::endpoint::MptcpStats> {
    crate::mptcp::read(sock)
}

pub use crate::zerocopy::ZcSender;

/// Turns on MSG_ZEROCOPY for a sending socket and makes its buffer ring.
pub fn zerocopy_sender(
    sock: &TcpStream,
    pattern: &landspeed_core::payload::Pattern,
    len: usize,
) -> Result<ZcSender> {
    crate::zerocopy::enable(sock)?;
    Ok(ZcSender::new(pattern, len))
}

/// The IPv6 traffic class of a socket.
pub fn set_tclass_v6(s: &socket2::SockRef<'_>, tclass: u32) -> Result<()> {
    s.set_tclass_v6(tclass)
}

/// Reads a socket option of any size into `buf`; the bytes the kernel filled.
pub fn getsockopt_bytes(sock: &impl AsSock, level: i32, opt: i32, buf: &mut [u8]) -> Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes; the kernel writes at most `len` bytes and updates it.
    let rc = unsafe { libc::getsockopt(raw(sock), level, opt, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(len as usize)
}

/// Why an MPTCP socket could not be opened, in words naming the kernel's side of it.
pub fn mptcp_unavailable_reason(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ENOPROTOOPT) => {
            "MPTCP is turned off in this network namespace (sysctl net.mptcp.enabled=0)".into()
        }
        Some(libc::EPROTONOSUPPORT) | Some(libc::EINVAL) => {
            "this kernel has no MPTCP (built without CONFIG_MPTCP, or older than Linux 5.6)".into()
        }
        _ => format!("the kernel refused an MPTCP socket: {err}"),
    }
}

// ---- the data paths `--version` probes ----

use crate::capabilities::Capability;

const SO_ZEROCOPY: libc::c_int = 60;

fn socket(kind: libc::c_int, proto: libc::c_int) -> Option<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, proto) };
    // SAFETY: fd is a new descriptor nobody else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn int_opt(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
    set_int(fd, level, name, value).is_ok()
}

/// Tries every data path now.
pub fn capabilities() -> Vec<Capability> {
    let tcp = socket(libc::SOCK_STREAM, 0);
    let udp = socket(libc::SOCK_DGRAM, 0);
    let on = |s: &Option<OwnedFd>, level, name, v| s.as_ref().is_some_and(|fd| int_opt(fd, level, name, v));
    vec![
        Capability {
            name: "io_uring",
            available: io_uring::IoUring::new(2).is_ok(),
        },
        Capability {
            name: "MSG_ZEROCOPY",
            available: on(&tcp, libc::SOL_SOCKET, SO_ZEROCOPY, 1),
        },
        Capability {
            name: "UDP GSO",
            available: on(&udp, libc::SOL_UDP, libc::UDP_SEGMENT, 1400),
        },
        Capability {
            name: "UDP GRO",
            available: on(&udp, libc::SOL_UDP, libc::UDP_GRO, 1),
        },
        Capability {
            name: "MPTCP",
            available: socket(libc::SOCK_STREAM, crate::mptcp::IPPROTO_MPTCP).is_some(),
        },
        Capability {
            name: "kTLS",
            available: crate::tls::ktls_unavailable_reason().is_none(),
        },
    ]
}

/// Why kernel TLS (`--ktls`) cannot be used on this host, in words; None when the kernel has it.
///
/// Probed the way the offload would start: `setsockopt(TCP_ULP, "tls")` on a fresh TCP socket fails
/// with ENOENT when the kernel has no TLS upper-layer protocol (built without CONFIG_TLS, or the `tls`
/// module not loaded and this process not allowed to load it), and with ENOTCONN when it has one (the
/// socket is not connected yet).
pub fn ktls_unavailable_reason() -> Option<String> {
    let ulps = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    let sock = match socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None) {
        Ok(s) => s,
        Err(e) => return Some(format!("cannot open a TCP socket to probe for it: {e}")),
    };
    let name = b"tls";
    // SAFETY: a valid socket and a buffer of the given length.
    let rc = unsafe {
        libc::setsockopt(
            raw(&sock),
            libc::SOL_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    let err = std::io::Error::last_os_error();
    match (rc, err.raw_os_error()) {
        (0, _) | (_, Some(libc::ENOTCONN)) => None,
        (_, Some(libc::ENOENT)) => Some(format!(
            "this kernel has no TLS upper-layer protocol (CONFIG_TLS, module `tls`): TCP_ULP \"tls\" \
             failed with ENOENT, and /proc/sys/net/ipv4/tcp_available_ulp lists only '{}'",
            ulps.trim()
        )),
        _ => Some(format!("TCP_ULP \"tls\" failed: {err}")),
    }
}

/// Attaches the datagram router to the port group of `sock`: index 0 of the group (the socket bound
/// first, the UDP listener) gets landspeed's and iperf3's datagrams, index 1 (the QUIC socket) the
/// rest. A datagram shorter than four bytes goes to the listener.
pub fn route_port(sock: &std::net::UdpSocket) -> std::io::Result<()> {
    // The kernel's copy of landspeed_core::quic_perf::is_for_quic.
    use landspeed_core::quic_perf::{LANDSPEED_DATAGRAMS, NOT_FROM_QUIC_CLIENTS, QUIC_FIXED_BIT};
    let [lspe, lspd] = LANDSPEED_DATAGRAMS.map(u32::from_be_bytes);
    let f = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let (ld_w, ld_b) = (
        (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16,
    );
    let jeq = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let jset = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    let jge = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    let mut prog = [
        f(ld_w, 0, 0, 0),                               // 0: A = first four payload bytes
        f(jeq, 4, 0, lspe),                             // 1: landspeed echo probe -> listener
        f(jeq, 3, 0, lspd),                             // 2: landspeed stream hello -> listener
        f(ld_b, 0, 0, 0),                               // 3: A = first byte
        f(jge, 1, 0, u32::from(NOT_FROM_QUIC_CLIENTS)), // 4: no QUIC client's -> listener
        f(jset, 1, 0, u32::from(QUIC_FIXED_BIT)),       // 5: QUIC's fixed bit set -> QUIC
        f(ret, 0, 0, 0),                                // 6: listener
        f(ret, 0, 0, 1),                                // 7: QUIC
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: a valid socket and a filter program that lives across the call (the kernel copies it).
    let rc = unsafe {
        libc::setsockopt(
            raw(sock),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            std::ptr::from_ref(&fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether a socket (bound or not) is IPv6 (SO_DOMAIN).
pub fn is_ipv6(s: &socket2::Socket) -> Result<bool> {
    Ok(s.domain()? == socket2::Domain::IPV6)
}

/// Lets several UDP sockets share a port (SO_REUSEADDR and SO_REUSEPORT): the server's listener and
/// its per-stream sockets, which the kernel picks by their connected peer.
pub fn share_port(s: &socket2::Socket) -> Result<()> {
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)
}

/// Whether a socket has something to read (or an end-of-file, or an error) within `timeout` (poll(2)).
pub fn wait_readable(sock: &impl AsSock, timeout: std::time::Duration) -> Result<bool> {
    let mut p = libc::pollfd {
        fd: raw(sock),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: poll on one live pollfd.
    match unsafe { libc::poll(&mut p, 1, ms) } {
        n if n < 0 => Err(Error::last_os_error()),
        n => Ok(n > 0 && p.revents != 0),
    }
}

/// `--bind-dev`: the socket sends from that interface only (SO_BINDTODEVICE).
pub fn bind_device(sock: &socket2::Socket, dev: &str) -> Result<()> {
    sock.bind_device(Some(dev.as_bytes()))
}

/// Reads one of the system's files (/proc, /sys, /etc/os-release) that the host's figures come from.
pub fn kernel_file(path: impl AsRef<Path>) -> Result<String> {
    std::fs::read_to_string(path)
}

/// Gives the memory the allocator keeps free back to the system (glibc's `malloc_trim`), so a
/// server's resident size returns near its idle level once a burst of connections has gone. A
/// no-op where the C library has no such call (musl).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a padding and touches only the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

// ---- multicast ----

/// The index of the network interface named `name` (if_nametoindex).
pub fn interface_index(name: &str) -> Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated string that lives across the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(Error::last_os_error());
    }
    Ok(i)
}

/// Sends an IPv4 socket's multicast out of interface `index` (IP_MULTICAST_IF with an `ip_mreqn`).
pub fn set_multicast_if_index_v4(sock: &impl AsSock, index: u32) -> Result<()> {
    let m = libc::ip_mreqn {
        imr_multiaddr: libc::in_addr { s_addr: 0 },
        imr_address: libc::in_addr { s_addr: 0 },
        imr_ifindex: index as libc::c_int,
    };
    set_value(sock, libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &m)
}

/// `struct group_source_req` (RFC 3678's protocol-independent source-specific join).
#[repr(C)]
#[derive(Clone, Copy)]
struct GroupSourceReq {
    interface: u32,
    group: libc::sockaddr_storage,
    source: libc::sockaddr_storage,
}

fn storage(ip: IpAddr) -> libc::sockaddr_storage {
    let addr = socket2::SockAddr::from(std::net::SocketAddr::new(ip, 0));
    // SAFETY: SockAddr holds a sockaddr_storage; copying its bytes out is a plain read.
    unsafe { std::ptr::read(addr.as_ptr().cast::<libc::sockaddr_storage>()) }
}

/// Joins `group` for datagrams from `source` only (source-specific multicast, MCAST_JOIN_SOURCE_GROUP)
/// on interface `index` (0: the kernel's choice by route), IPv4 or IPv6 alike.
pub fn join_source_group(sock: &impl AsSock, index: u32, group: IpAddr, source: IpAddr) -> Result<()> {
    let req = GroupSourceReq {
        interface: index,
        group: storage(group),
        source: storage(source),
    };
    let level = if group.is_ipv4() {
        libc::IPPROTO_IP
    } else {
        libc::IPPROTO_IPV6
    };
    set_value(sock, level, libc::MCAST_JOIN_SOURCE_GROUP, &req)
}

/// Keeps a UDP socket from the datagrams of groups it did not join itself: Linux hands a group's
/// datagrams to every socket bound to the port (a wildcard address included) once any socket on
/// the host joined it, unless IP_MULTICAST_ALL (and for an IPv6 socket IPV6_MULTICAST_ALL too) is
/// off. A no-op where that is not the rule.
pub fn only_joined_groups(sock: &impl AsSock, v6: bool) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        let off: libc::c_int = 0;
        // A dual-stack IPv6 socket gets IPv4 groups' datagrams by the IPv4 option's rule.
        set_value(sock, libc::IPPROTO_IP, libc::IP_MULTICAST_ALL, &off)?;
        if v6 {
            set_value(sock, libc::IPPROTO_IPV6, libc::IPV6_MULTICAST_ALL, &off)?;
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (sock, v6);
        Ok(())
    }
}
