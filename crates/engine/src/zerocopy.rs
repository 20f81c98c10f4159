//! MSG_ZEROCOPY sending: the kernel sends from our pages instead of copying them, and tells us through
//! the socket's error queue when it no longer needs them. A buffer may not be rewritten until then, so
//! each stream keeps a small ring of payload generators and reuses a slot only after the send that last
//! used it has completed. Completions come as ranges of send numbers (the kernel counts each zerocopy
//! `send` that queued data); a completion flagged "copied" means the kernel fell back to copying, as it
//! always does on loopback, and is counted so the report can say so.

use landspeed_core::payload::{Generator, Pattern};
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

const SO_ZEROCOPY: libc::c_int = 60;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// Sends in flight per stream (and buffers kept for them).
pub const RING: usize = 4;

/// Turns on SO_ZEROCOPY for a socket.
pub fn enable(sock: &TcpStream) -> io::Result<()> {
    crate::os::set_int(sock, libc::SOL_SOCKET, SO_ZEROCOPY, 1)
}

/// One stream's zerocopy state: the buffer ring and the send counters.
pub struct ZcSender {
    slots: Vec<Generator>,
    issued: u64,
    completed: u64,
    /// Completions the kernel reported as copied after all.
    pub copied: u64,
}

impl ZcSender {
    /// A zero-copy sender of `pattern` in writes of at most `max_len` bytes.
    pub fn new(pattern: &Pattern, max_len: usize) -> ZcSender {
        ZcSender {
            slots: (0..RING).map(|_| Generator::new(pattern, max_len)).collect(),
            issued: 0,
            completed: 0,
            copied: 0,
        }
    }

    /// Zerocopy sends issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Completions the kernel reported as copied after all.
    pub fn copied(&self) -> u64 {
        self.copied
    }

    /// Whether the kernel has reported every send complete.
    pub fn all_completed(&self) -> bool {
        self.completed >= self.issued
    }

    /// Whether a buffer is free for the next send.
    pub fn can_send(&self) -> bool {
        self.issued - self.completed < RING as u64
    }

    /// Sends the payload bytes at `offset` from the next free slot. Returns the bytes queued.
    pub fn send(&mut self, sock: &TcpStream, stream: u32, offset: u64, n: usize) -> io::Result<usize> {
        let slot = (self.issued % RING as u64) as usize;
        let buf = self.slots[slot].fill(stream, offset, n);
        // SAFETY: `buf` stays alive and unmodified until the kernel reports this send complete: the slot is
        // not reused before `completed` passes its number (see `can_send`), and the ring lives as long
        // as the stream's worker; pages still pinned by the kernel after that are the kernel's to hold.
        let r = unsafe {
            libc::send(
                sock.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_ZEROCOPY | libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            // Out of option memory for notifications: wait for completions like for a full buffer.
            if e.raw_os_error() == Some(libc::ENOBUFS) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            return Err(e);
        }
        if r > 0 {
            self.issued += 1;
        }
        Ok(r as usize)
    }

    /// Drains completion notifications from the error queue.
    pub fn reap(&mut self, sock: &TcpStream) -> io::Result<()> {
        loop {
            let mut control = [0u64; 16];
            // SAFETY: msghdr is plain data; we point it at our control buffer and no data buffer.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: recvmsg writes at most msg_controllen bytes into `control`.
            let r = unsafe {
                libc::recvmsg(
                    sock.as_raw_fd(),
                    &mut msg,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(()),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            // SAFETY: walks the control messages the kernel wrote, within msg_controllen.
            let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
            while !cmsg.is_null() {
                // SAFETY: `cmsg` points into `control`; the kernel sets level/type and the payload size.
                let (level, kind) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type) };
                let recverr = (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR);
                if recverr {
                    // SAFETY: an IP(V6)_RECVERR control message carries a sock_extended_err.
                    let ee = unsafe {
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::sock_extended_err)
                    };
                    if ee.ee_errno == 0 && ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                        let (lo, hi) = (u64::from(ee.ee_info), u64::from(ee.ee_data));
                        // Send numbers are 32-bit and wrap; map the range onto our 64-bit count.
                        let base = self.completed & !0xFFFF_FFFF;
                        let mut end = base + hi + 1;
                        if end < self.completed {
                            end += 1 << 32;
                        }
                        if ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                            self.copied += (hi.wrapping_sub(lo) & 0xFFFF_FFFF) + 1;
                        }
                        self.completed = self.completed.max(end);
                    }
                }
                // SAFETY: advances within the same control buffer.
                cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
            }
        }
    }
}
