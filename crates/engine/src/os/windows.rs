//! Windows: [`crate::os`] over Winsock and kernel32 (windows-sys). What Windows gives of the Linux
//! figures: TCP_INFO from `SIO_TCP_INFO` (RTT, minimum RTT, congestion window, MSS, windows,
//! retransmitted bytes; no pacing, delivery rate or limited-time counters), CPU from GetThreadTimes,
//! GetProcessTimes and GetSystemTimes (machine-wide busy and kernel time; no per-CPU split and no
//! softirq), readiness from WSAPoll. What it lacks is refused ([`Unsupported`]) or answered with `None`.

use crate::cpu::SystemTicks;
use crate::platform::require;
use crate::sockopt::SockOptError;
use crate::tcp_info::{RawTcpInfo, TcpInfo};
use std::fs::File;
use std::io::{Error, ErrorKind, Read, Result, Write};
use std::net::{IpAddr, TcpStream, UdpSocket};
use std::os::windows::io::AsRawSocket;
pub use std::os::windows::io::AsSocket as AsSock;
use std::path::Path;
use windows_sys::Win32::Foundation::FILETIME;
use windows_sys::Win32::Networking::WinSock as ws;
use windows_sys::Win32::System::Threading as th;

fn raw(sock: &impl AsSock) -> ws::SOCKET {
    sock.as_socket().as_raw_socket() as ws::SOCKET
}

fn refused(feature: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        require(feature).expect_err("a feature Windows lacks"),
    )
}

fn unsupported_option(what: &'static str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("{what} is not available on windows"),
    )
}

// ---- socket options ----

/// SIO_TCP_INFO says nothing of ECN.
pub const TCP_INFO_HAS_ECN: bool = false;

/// TCP_INFO's Windows counterpart (`SIO_TCP_INFO`, version 0: Windows 10 1703 and later), in Linux's
/// layout: the figures Windows has, the others zero.
pub fn tcp_info(sock: &impl AsSock) -> Result<TcpInfo> {
    let version: u32 = 0;
    let mut info = ws::TCP_INFO_v0::default();
    let mut got: u32 = 0;
    // SAFETY: input is one u32, output a TCP_INFO_v0 of the size passed; no overlapped I/O.
    let rc = unsafe {
        ws::WSAIoctl(
            raw(sock),
            ws::SIO_TCP_INFO,
            (&version as *const u32).cast(),
            4,
            (&mut info as *mut ws::TCP_INFO_v0).cast(),
            std::mem::size_of::<ws::TCP_INFO_v0>() as u32,
            &mut got,
            std::ptr::null_mut(),
            None,
        )
    };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(from_v0(&info))
}

/// SIO_TCP_INFO's figures in Linux's layout: the window in segments of the MSS, retransmits as
/// segments (bytes retransmitted over the MSS), the rest zero.
fn from_v0(i: &ws::TCP_INFO_v0) -> TcpInfo {
    let mss = i.Mss.max(1);
    let raw = RawTcpInfo {
        state: i.State as u8,
        rtt: i.RttUs,
        min_rtt: i.MinRttUs,
        snd_mss: i.Mss,
        rcv_mss: i.Mss,
        snd_cwnd: i.Cwnd / mss,
        total_retrans: i.BytesRetrans / mss,
        snd_wnd: i.SndWnd,
        rcv_wnd: i.RcvWnd,
        bytes_sent: i.BytesOut,
        bytes_received: i.BytesIn,
        bytes_retrans: u64::from(i.BytesRetrans),
        ..RawTcpInfo::default()
    };
    TcpInfo {
        raw,
        len: std::mem::size_of::<RawTcpInfo>(),
    }
}

/// Windows names no congestion control per socket.
pub fn congestion(_sock: &socket2::Socket) -> Option<String> {
    None
}

/// Windows sets congestion control per network profile (`netsh`), not per socket.
pub fn set_congestion(_sock: &socket2::Socket, _name: &str) -> Result<()> {
    Err(refused("choosing congestion control"))
}

/// Windows does not let a socket ask for an MSS.
pub fn set_mss(_sock: &socket2::Socket, _mss: u32) -> Result<()> {
    Err(refused("setting the MSS"))
}

/// Windows has no per-socket pacing rate.
pub fn set_pacing(
    _sock: &socket2::Socket,
    _bytes_per_s: u64,
    _unsent: usize,
) -> std::result::Result<(), SockOptError> {
    Err(SockOptError::Other {
        what: "SO_MAX_PACING_RATE",
        err: refused("kernel pacing (--fq-rate)"),
    })
}

/// Windows has no flow label manager.
pub fn set_flow_label(
    _sock: &socket2::Socket,
    _dst: std::net::Ipv6Addr,
    _label: u32,
) -> std::result::Result<(), SockOptError> {
    Err(SockOptError::Other {
        what: "IPV6_FLOWLABEL_MGR",
        err: refused("IPv6 flow labels"),
    })
}

/// Windows does not say how much of a socket's buffer is unsent.
pub fn unsent_bytes(_sock: &impl AsSock) -> Result<u64> {
    Err(unsupported_option("SIOCOUTQNSD"))
}

/// Windows has no TCP_NOTSENT_LOWAT: the send buffer is the system's.
pub fn set_notsent_lowat(_sock: &impl AsSock, _bytes: u32) -> Result<()> {
    Err(refused("the unsent low-water mark"))
}

/// Windows has no TCP_WINDOW_CLAMP.
pub fn set_window_clamp(_sock: &impl AsSock, _bytes: u32) -> Result<()> {
    Err(unsupported_option("TCP_WINDOW_CLAMP"))
}

/// Windows has no TCP_WINDOW_CLAMP to read.
pub fn window_clamp(_sock: &impl AsSock) -> Result<u32> {
    Err(unsupported_option("TCP_WINDOW_CLAMP"))
}

/// Windows has no TCP_NOTSENT_LOWAT to read.
pub fn notsent_lowat(_sock: &impl AsSock) -> Result<u32> {
    Err(unsupported_option("TCP_NOTSENT_LOWAT"))
}

/// Windows has no TCP_QUICKACK (its delayed ACKs are set per interface).
pub fn set_quickack(_sock: &impl AsSock) -> Result<()> {
    Err(unsupported_option("TCP_QUICKACK"))
}

/// Windows: the route's MTU is not read (the datagram size comes from the MSS alone).
pub fn path_mtu(_sock: &TcpStream) -> Result<u32> {
    Err(refused("reading the path MTU"))
}

/// Windows has no receive low-water mark.
pub fn set_rcvlowat(_sock: &impl AsSock, _bytes: u64) -> Result<u64> {
    Err(refused("the receive low-water mark"))
}

/// Waits up to `timeout` for one socket to be readable or (when `write`) writable; returns (readable,
/// writable). An error or hang-up counts as readable: the next read says what it was.
pub fn wait_one(sock: &TcpStream, write: bool, timeout: std::time::Duration) -> Result<(bool, bool)> {
    let mut fd = ws::WSAPOLLFD {
        fd: raw(sock),
        events: ws::POLLRDNORM | if write { ws::POLLWRNORM } else { 0 },
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(0, i32::MAX as u128) as i32;
    // SAFETY: one live WSAPOLLFD.
    let n = unsafe { ws::WSAPoll(&mut fd, 1, ms) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let r = fd.revents;
    Ok((
        r & (ws::POLLRDNORM | ws::POLLERR | ws::POLLHUP) != 0,
        r & ws::POLLWRNORM != 0,
    ))
}

/// Whether the peer has closed or reset a connection that should be quiet now: WSAPoll without
/// waiting, then a peek if it is readable (end-of-file or an error: gone; data: still there).
pub fn peer_gone(s: &TcpStream) -> bool {
    let mut fd = ws::WSAPOLLFD {
        fd: raw(s),
        events: ws::POLLRDNORM,
        revents: 0,
    };
    // SAFETY: one live WSAPOLLFD, no wait.
    let n = unsafe { ws::WSAPoll(&mut fd, 1, 0) };
    if n <= 0 {
        return false;
    }
    let mut b = [0u8; 1];
    // SAFETY: recv into a 1-byte stack buffer; the socket is readable, so this does not block.
    let got = unsafe { ws::recv(raw(s), b.as_mut_ptr(), 1, ws::MSG_PEEK) };
    got <= 0
}

/// Windows has no MSG_TRUNC: the data is read into `buf` and dropped.
pub fn discard(mut sock: &TcpStream, buf: &mut [u8]) -> Result<usize> {
    sock.read(buf)
}

// ---- UDP ----

/// Whether a send error means the socket's queue was full (the datagrams are skipped and counted).
pub fn queue_full(e: &Error) -> bool {
    e.raw_os_error() == Some(ws::WSAENOBUFS) || e.kind() == ErrorKind::WouldBlock
}

/// No UDP segmentation offload through this path on Windows (USO exists, not used here).
pub fn enable_gso(_s: &UdpSocket, _len: usize) -> bool {
    false
}

/// No UDP receive coalescing through this path on Windows.
pub fn enable_gro(_s: &UdpSocket) -> bool {
    false
}

/// Windows does not count a socket's dropped datagrams.
pub fn count_drops(_s: &UdpSocket) -> bool {
    false
}

/// One read; Windows attaches no drop count, and always waits (a receiver does not poll here).
pub fn recv_counted(s: &UdpSocket, buf: &mut [u8], _wait: bool) -> Result<UdpRead> {
    Ok(UdpRead {
        len: s.recv(buf)?,
        drops: 0,
        tos: None,
    })
}

/// What one read of a UDP socket gave (Windows attaches neither a drop count nor the TOS here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRead {
    /// Bytes read.
    pub len: usize,
    /// Always 0.
    pub drops: u64,
    /// Always None.
    pub tos: Option<u8>,
}

/// Windows does not hand over a datagram's TOS byte here.
pub fn receive_tos(_s: &UdpSocket) -> bool {
    false
}

/// Windows does not say how many datagrams a socket dropped.
pub fn socket_drops(_s: &UdpSocket) -> Option<u64> {
    None
}

/// Timer slack is Linux's; Windows sleeps to its own timer resolution.
pub fn tight_timers() {}

// ---- readiness ----

/// WSAPoll over the sockets still waiting (level-triggered, so ended and ready ones are left out).
pub struct Poller {
    registered: Vec<(usize, ws::SOCKET, ws::WSAPOLL_EVENT_FLAGS)>,
    fds: Vec<ws::WSAPOLLFD>,
    tokens: Vec<usize>,
}

impl Poller {
    /// An empty set.
    pub fn new(n: usize) -> Result<Poller> {
        Ok(Poller {
            registered: Vec::with_capacity(n),
            fds: Vec::with_capacity(n),
            tokens: Vec::with_capacity(n),
        })
    }
}

impl super::Readiness for Poller {
    fn register(&mut self, sock: &TcpStream, token: usize, writable: bool) -> Result<()> {
        let events = if writable { ws::POLLWRNORM } else { ws::POLLRDNORM };
        self.registered.push((token, raw(sock), events));
        Ok(())
    }

    fn wait(
        &mut self,
        timeout: std::time::Duration,
        waiting: &dyn Fn(usize) -> bool,
        ready: &mut dyn FnMut(usize),
    ) -> Result<()> {
        self.fds.clear();
        self.tokens.clear();
        for &(token, fd, events) in self.registered.iter().filter(|r| waiting(r.0)) {
            self.fds.push(ws::WSAPOLLFD {
                fd,
                events,
                revents: 0,
            });
            self.tokens.push(token);
        }
        if self.fds.is_empty() {
            std::thread::sleep(timeout);
            return Ok(());
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live array of the length passed.
        let n = unsafe { ws::WSAPoll(self.fds.as_mut_ptr(), self.fds.len() as u32, ms) };
        if n < 0 {
            return Err(Error::last_os_error());
        }
        for (fd, &token) in self.fds.iter().zip(&self.tokens) {
            if fd.revents != 0 {
                ready(token);
            }
        }
        Ok(())
    }
}

// ---- CPU ----

fn seconds(t: FILETIME) -> f64 {
    ticks(t) as f64 / 1e7
}

fn ticks(t: FILETIME) -> u64 {
    (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)
}

const ZERO: FILETIME = FILETIME {
    dwLowDateTime: 0,
    dwHighDateTime: 0,
};

/// This thread's user and system CPU seconds (GetThreadTimes).
pub fn thread_times() -> (f64, f64) {
    let (mut c, mut e, mut k, mut u) = (ZERO, ZERO, ZERO, ZERO);
    // SAFETY: the pseudo-handle of the calling thread and four live FILETIMEs.
    if unsafe { th::GetThreadTimes(th::GetCurrentThread(), &mut c, &mut e, &mut k, &mut u) } == 0 {
        return (0.0, 0.0);
    }
    (seconds(u), seconds(k))
}

/// This process's user and system CPU seconds (GetProcessTimes).
pub fn process_times() -> (f64, f64) {
    let (mut c, mut e, mut k, mut u) = (ZERO, ZERO, ZERO, ZERO);
    // SAFETY: the pseudo-handle of this process and four live FILETIMEs.
    if unsafe { th::GetProcessTimes(th::GetCurrentProcess(), &mut c, &mut e, &mut k, &mut u) } == 0 {
        return (0.0, 0.0);
    }
    (seconds(u), seconds(k))
}

/// The CPU the calling thread runs on now (within its processor group).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: no arguments, no preconditions.
    Some(unsafe { th::GetCurrentProcessorNumber() })
}

/// Windows keeps no per-thread count of time spent waiting for a CPU that landspeed reads.
pub fn thread_runq_wait_s() -> Option<f64> {
    None
}

/// CPUs online.
pub fn cpus_online() -> u32 {
    crate::cpu::cpu_count()
}

/// Job objects' CPU rate limits are not read: no quota is reported on Windows.
pub fn cgroup_cpu() -> Option<crate::cpu::CgroupTicks> {
    None
}

/// The machine's CPU time in 100 ns ticks (GetSystemTimes: its kernel time includes idle); Windows
/// gives no per-CPU split and no softirq figure through it.
pub fn system_ticks() -> (SystemTicks, Vec<(u32, SystemTicks)>, f64) {
    let (mut idle, mut kernel, mut user) = (ZERO, ZERO, ZERO);
    // SAFETY: three live FILETIMEs.
    if unsafe { th::GetSystemTimes(&mut idle, &mut kernel, &mut user) } == 0 {
        return (SystemTicks::default(), vec![], 1e7);
    }
    let (idle, kernel, user) = (ticks(idle), ticks(kernel), ticks(user));
    let total = kernel + user;
    let all = SystemTicks {
        busy: total.saturating_sub(idle),
        system: kernel.saturating_sub(idle),
        softirq: 0,
        steal: 0,
        total,
    };
    (all, vec![], 1e7)
}

/// Pins the calling thread to one CPU (SetThreadAffinityMask, within the first 64 CPUs).
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    if cpu >= usize::BITS as usize {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "CPU numbers above 63 cannot be pinned on windows",
        ));
    }
    // SAFETY: the calling thread's pseudo-handle and a one-bit mask.
    if unsafe { th::SetThreadAffinityMask(th::GetCurrentThread(), 1usize << cpu) } == 0 {
        return Err(Error::last_os_error());
    }
    Ok(())
}

/// The CPUs this process may run on (GetProcessAffinityMask).
pub fn allowed_cpus() -> Vec<usize> {
    let (mut mine, mut system) = (0usize, 0usize);
    // SAFETY: this process's pseudo-handle and two live masks.
    if unsafe { th::GetProcessAffinityMask(th::GetCurrentProcess(), &mut mine, &mut system) } == 0 {
        return (0..crate::cpu::cpu_count() as usize).collect();
    }
    (0..usize::BITS as usize)
        .filter(|c| mine & (1 << c) != 0)
        .collect()
}

// ---- descriptors ----

/// Windows has no per-process socket limit like RLIMIT_NOFILE; this many streams are allowed.
const SOCKETS: u64 = 1 << 16;

/// Nothing to raise on Windows: the sockets allowed.
pub fn raise_fd_limit() -> u64 {
    SOCKETS
}

/// The sockets allowed.
pub fn fd_limit() -> u64 {
    SOCKETS
}

// ---- the host ----

/// (host name, "Windows", its version): the computer's name from the environment, the version from
/// RtlGetVersion (which, unlike GetVersionEx, is not capped at the manifest's version).
pub fn uname() -> (String, String, String) {
    let name = std::env::var("COMPUTERNAME").unwrap_or_default();
    // SAFETY: OSVERSIONINFOW is plain data; its size field is set before the call fills it.
    let mut v: windows_sys::Win32::System::SystemInformation::OSVERSIONINFOW = unsafe { std::mem::zeroed() };
    v.dwOSVersionInfoSize = std::mem::size_of_val(&v) as u32;
    // SAFETY: a live, sized OSVERSIONINFOW.
    let release = if unsafe { windows_sys::Wdk::System::SystemServices::RtlGetVersion(&mut v) } == 0 {
        format!("{}.{}.{}", v.dwMajorVersion, v.dwMinorVersion, v.dwBuildNumber)
    } else {
        String::new()
    };
    (name, "Windows".into(), release)
}

/// Interface names are not read on Windows (GetAdaptersAddresses is not wired in): no NIC figures.
pub fn interface_for(_addr: IpAddr) -> Option<String> {
    None
}

// ---- files ----

/// Windows: buffered reads (FILE_FLAG_NO_BUFFERING's alignment rules are not met here).
pub fn open_direct(path: &Path) -> Result<(File, bool)> {
    Ok((File::open(path)?, false))
}

/// No page-cache advice on Windows: the read-back may come from the cache (reported as not direct).
pub fn drop_cache(_file: &File) {}

/// Windows: the file read into a buffer and written to the socket (no sendfile on this path).
pub fn send_chunk(mut sock: &TcpStream, file: &File, offset: u64, n: usize) -> Result<usize> {
    use std::os::windows::fs::FileExt;
    let mut buf = vec![0u8; n.min(1 << 20)];
    let got = file.seek_read(&mut buf, offset)?;
    if got == 0 {
        return Ok(0);
    }
    sock.write(&buf[..got])
}

/// socket -> buffer -> file: Windows has no splice.
pub struct Splicer {
    buf: Vec<u8>,
}

impl Splicer {
    /// A 1 MiB buffer.
    pub fn new() -> Result<Splicer> {
        Ok(Splicer {
            buf: vec![0u8; 1 << 20],
        })
    }

    /// Moves what the socket has (up to `n` bytes) into `file` at `offset`. Ok(0) at end of stream;
    /// WouldBlock when the socket has nothing.
    pub fn recv(&mut self, mut sock: &TcpStream, file: &File, offset: u64, n: usize) -> Result<usize> {
        use std::os::windows::fs::FileExt;
        let want = n.min(self.buf.len());
        let got = sock.read(&mut self.buf[..want])?;
        let mut done = 0;
        while done < got {
            done += file.seek_write(&self.buf[done..got], offset + done as u64)?;
        }
        Ok(got)
    }
}

// ---- whole features only Linux has ----

/// No MPTCP on Windows.
pub fn mptcp_stats(_sock: &TcpStream) -> Option<landspeed_core::endpoint::MptcpStats> {
    None
}

/// MSG_ZEROCOPY is Linux's.
pub fn zerocopy_sender(
    _sock: &TcpStream,
    _pattern: &landspeed_core::payload::Pattern,
    _len: usize,
) -> Result<ZcSender> {
    Err(refused("splice and MSG_ZEROCOPY"))
}

/// The IPv6 traffic class of a socket (IPV6_TCLASS).
pub fn set_tclass_v6(s: &socket2::SockRef<'_>, tclass: u32) -> Result<()> {
    set_int(&**s, ws::IPPROTO_IPV6, ws::IPV6_TCLASS, tclass as i32)
}

/// Sets an int socket option.
pub fn set_int(sock: &impl AsSock, level: i32, opt: i32, v: i32) -> Result<()> {
    // SAFETY: `v` is a live i32 whose size is passed.
    let rc = unsafe { ws::setsockopt(raw(sock), level, opt, (&v as *const i32).cast(), 4) };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(())
}

/// A zero-copy sender cannot exist on Windows: the type has no values, so no code path holds one.
pub enum ZcSender {}

impl ZcSender {
    /// Uninhabited.
    pub fn issued(&self) -> u64 {
        match *self {}
    }
    /// Uninhabited.
    pub fn copied(&self) -> u64 {
        match *self {}
    }
    /// Uninhabited.
    pub fn all_completed(&self) -> bool {
        match *self {}
    }
    /// Uninhabited.
    pub fn can_send(&self) -> bool {
        match *self {}
    }
    /// Uninhabited.
    pub fn send(&mut self, _sock: &TcpStream, _stream: u32, _offset: u64, _n: usize) -> Result<usize> {
        match *self {}
    }
    /// Uninhabited.
    pub fn reap(&mut self, _sock: &TcpStream) -> Result<()> {
        match *self {}
    }
}

/// The data paths `--version` probes are Linux's: none to probe on Windows.
pub fn capabilities() -> Vec<crate::capabilities::Capability> {
    Vec::new()
}

/// Kernel TLS is Linux's.
pub fn ktls_unavailable_reason() -> Option<String> {
    Some(require("kernel TLS").expect_err("Windows lacks it").to_string())
}

/// The QUIC port router is a Linux socket filter (SO_ATTACH_REUSEPORT_CBPF).
pub fn route_port(_sock: &UdpSocket) -> Result<()> {
    Err(unsupported_option("SO_ATTACH_REUSEPORT_CBPF"))
}

/// Why an MPTCP socket could not be opened.
pub fn mptcp_unavailable_reason(_err: &Error) -> String {
    require("MPTCP").expect_err("Windows lacks it").to_string()
}

/// Reads a socket option of any size into `buf`; the bytes Winsock filled.
pub fn getsockopt_bytes(sock: &impl AsSock, level: i32, opt: i32, buf: &mut [u8]) -> Result<usize> {
    let mut len = buf.len() as i32;
    // SAFETY: `buf` is writable for `len` bytes; Winsock writes at most `len` bytes and updates it.
    let rc = unsafe { ws::getsockopt(raw(sock), level, opt, buf.as_mut_ptr(), &mut len) };
    if rc != 0 {
        return Err(Error::last_os_error());
    }
    Ok(len.max(0) as usize)
}

/// Whether a socket (bound or not) is IPv6 (SO_PROTOCOL_INFOW's address family).
pub fn is_ipv6(s: &socket2::Socket) -> Result<bool> {
    // SAFETY: WSAPROTOCOL_INFOW is plain data; zero is a valid value to be overwritten.
    let mut info: ws::WSAPROTOCOL_INFOW = unsafe { std::mem::zeroed() };
    let buf = unsafe {
        // SAFETY: the struct's bytes, written by getsockopt only.
        std::slice::from_raw_parts_mut(
            (&mut info as *mut ws::WSAPROTOCOL_INFOW).cast::<u8>(),
            std::mem::size_of_val(&info),
        )
    };
    getsockopt_bytes(s, ws::SOL_SOCKET, ws::SO_PROTOCOL_INFOW, buf)?;
    Ok(info.iAddressFamily == i32::from(ws::AF_INET6))
}

/// Lets several UDP sockets share a port (SO_REUSEADDR; Windows has no SO_REUSEPORT). Under Wine this
/// is Linux's port sharing; on Windows itself, which of the sockets sharing a port gets a datagram
/// is the system's choice (docs/install.md).
pub fn share_port(s: &socket2::Socket) -> Result<()> {
    s.set_reuse_address(true)
}

/// Whether a socket has something to read (or an end-of-file, or an error) within `timeout` (WSAPoll).
pub fn wait_readable(sock: &impl AsSock, timeout: std::time::Duration) -> Result<bool> {
    let mut fd = ws::WSAPOLLFD {
        fd: raw(sock),
        events: ws::POLLRDNORM,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one live WSAPOLLFD.
    match unsafe { ws::WSAPoll(&mut fd, 1, ms) } {
        n if n < 0 => Err(Error::last_os_error()),
        n => Ok(n > 0 && fd.revents != 0),
    }
}

/// Binding to a device is Linux's (SO_BINDTODEVICE); on Windows bind to the interface's address (-B).
pub fn bind_device(_sock: &socket2::Socket, _dev: &str) -> Result<()> {
    Err(refused("binding to a device (--bind-dev)"))
}

/// Linux's /proc and /sys are not Windows's: nothing is read (under Wine, whose Z: drive shows the
/// Linux host's /proc, reading them would report Linux's figures as this host's).
pub fn kernel_file(path: impl AsRef<Path>) -> Result<String> {
    Err(Error::new(
        ErrorKind::Unsupported,
        format!("{} is a Linux kernel file", path.as_ref().display()),
    ))
}

/// Gives the allocator's free memory back to the system: Windows' heap does so itself.
pub fn release_free_memory() {}

// ---- multicast ----

/// Windows: interfaces are not looked up by name here (multicast is built for Linux).
pub fn interface_index(_name: &str) -> Result<u32> {
    Err(refused("multicast tests"))
}

/// Windows: not built (multicast is built for Linux).
pub fn set_multicast_if_index_v4(_sock: &impl AsSock, _index: u32) -> Result<()> {
    Err(refused("multicast tests"))
}

/// Windows: not built (multicast is built for Linux).
pub fn join_source_group(_sock: &impl AsSock, _index: u32, _group: IpAddr, _source: IpAddr) -> Result<()> {
    Err(refused("multicast tests"))
}

/// Windows: a socket gets only the groups it joined itself; nothing to turn off.
pub fn only_joined_groups(_sock: &impl AsSock, _v6: bool) -> Result<()> {
    Ok(())
}
