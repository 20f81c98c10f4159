//! What the forwarder holds for each packet or train between reading and writing it: the frame as read,
//! or some segments of a train (their own headers and their part of the train's payload, which the
//! parts share without copying), and the buffers it reuses. A part is written with one `writev`.

use crate::train::{Train, Vnet, MAX_FRAME, VNET_LEN};
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;

/// Large buffers kept for reuse at most (each holds a train of up to 64 KiB).
const KEEP_LARGE: usize = 1024;
/// Frames up to this long are copied into a buffer of their size rather than kept in a large one.
const SHORT: usize = 16 << 10;

/// A frame to write to a TUN device: the virtio-net header, then an IP packet or a train.
pub(super) enum Frame {
    /// As read (or copied out of the read buffer), `len` bytes.
    Whole { buf: Vec<u8>, len: usize },
    /// Segments of a train: `head` (the header and the segments' IP and TCP headers), then `payload`
    /// of the train's frame.
    Part {
        head: Vec<u8>,
        train: Rc<Vec<u8>>,
        payload: Range<usize>,
        /// Its share of the train's buffer, for the delay line's bound.
        charge: u64,
    },
}

/// A frame with the wire packets it stands for.
pub(super) struct Out {
    pub(super) frame: Frame,
    /// Wire packets in it.
    pub(super) segments: u32,
    /// Their bytes on the wire (IP packets).
    pub(super) wire_bytes: u64,
}

impl Frame {
    /// The IP packet's headers at least (all of it, for a whole frame).
    fn ip_mut(&mut self) -> &mut [u8] {
        match self {
            Frame::Whole { buf, len } => &mut buf[VNET_LEN..*len],
            Frame::Part { head, .. } => &mut head[VNET_LEN..],
        }
    }

    /// Marks the packet Congestion Experienced (if it is ECN-capable).
    pub(super) fn mark_ce(&mut self) -> bool {
        crate::packet::mark_ce(self.ip_mut())
    }

    /// Flips one payload bit chosen by `r`, as `packet::corrupt_payload`; a part is first copied into a
    /// frame of its own. True when there was payload to damage.
    pub(super) fn corrupt(&mut self, r: u64, pools: &mut Pools) -> bool {
        if let Frame::Part {
            head, train, payload, ..
        } = self
        {
            let mut buf = std::mem::take(head);
            buf.extend_from_slice(&train[payload.clone()]);
            let len = buf.len();
            let old = std::mem::replace(self, Frame::Whole { buf, len });
            pools.recycle(old);
        }
        let Frame::Whole { buf, len } = self else {
            unreachable!("made whole above")
        };
        let seeded = Vnet::parse(buf).is_some_and(|v| v.partial_checksum());
        crate::packet::corrupt_payload(&mut buf[VNET_LEN..*len], r, seeded).is_some()
    }

    /// A second copy (a part shares its train's payload).
    pub(super) fn copy(&self, pools: &mut Pools) -> Frame {
        match self {
            Frame::Whole { buf, len } => Frame::Whole {
                buf: buf[..*len].to_vec(),
                len: *len,
            },
            Frame::Part {
                head,
                train,
                payload,
                charge,
            } => {
                let mut h = pools.head();
                h.extend_from_slice(head);
                Frame::Part {
                    head: h,
                    train: Rc::clone(train),
                    payload: payload.clone(),
                    charge: *charge,
                }
            }
        }
    }

    /// Writes the frame to `fd` in one system call.
    pub(super) fn write(&self, fd: &OwnedFd) -> io::Result<usize> {
        let iov = |b: &[u8]| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        };
        let v = match self {
            Frame::Whole { buf, len } => [iov(&buf[..*len]), iov(&[])],
            Frame::Part {
                head, train, payload, ..
            } => [iov(head), iov(&train[payload.clone()])],
        };
        // SAFETY: two iovecs over buffers we own, alive for the call.
        let n = unsafe { libc::writev(fd.as_raw_fd(), v.as_ptr(), 2) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Bytes of memory it holds for the delay line's bound: a buffer's capacity, of which a part
    /// counts its share (the train's buffer divided among the parts that leave, by their segments).
    pub(super) fn mem_bytes(&self) -> u64 {
        match self {
            Frame::Whole { buf, .. } => buf.capacity() as u64,
            Frame::Part { head, charge, .. } => head.capacity() as u64 + charge,
        }
    }
}

/// Buffers the forwarder reuses: large ones to read into, small ones for parts' headers.
#[derive(Default)]
pub(super) struct Pools {
    large: Vec<Vec<u8>>,
    heads: Vec<Vec<u8>>,
}

impl Pools {
    /// A buffer a TUN read of any size fits.
    pub(super) fn large(&mut self) -> Vec<u8> {
        self.large.pop().unwrap_or_else(|| vec![0u8; MAX_FRAME + 64])
    }

    /// An empty buffer for headers.
    pub(super) fn head(&mut self) -> Vec<u8> {
        let mut h = self.heads.pop().unwrap_or_default();
        h.clear();
        h
    }

    /// Keeps a large buffer for the next read.
    pub(super) fn keep(&mut self, buf: Vec<u8>) {
        if buf.len() > MAX_FRAME && self.large.len() < KEEP_LARGE {
            self.large.push(buf);
        }
    }

    /// Keeps a train's buffer once no part of it is left.
    pub(super) fn release(&mut self, train: Rc<Vec<u8>>) {
        if let Ok(buf) = Rc::try_unwrap(train) {
            self.keep(buf);
        }
    }

    /// Takes back a frame's buffers.
    pub(super) fn recycle(&mut self, f: Frame) {
        match f {
            Frame::Whole { buf, .. } => self.keep(buf),
            Frame::Part { head, train, .. } => {
                if self.heads.len() < KEEP_LARGE {
                    self.heads.push(head);
                }
                self.release(train);
            }
        }
    }

    /// A frame read into large buffer `buf` (`len` bytes), copied out into a buffer of its size when
    /// it is short (a single packet, a small train), so that the large one is read into again.
    pub(super) fn fit(&mut self, buf: Vec<u8>, len: usize) -> Vec<u8> {
        if len > SHORT {
            return buf;
        }
        let short = buf[..len].to_vec();
        self.keep(buf);
        short
    }

    /// A single packet read into `buf` (`len` bytes), copied out when it is short.
    pub(super) fn single(&mut self, buf: Vec<u8>, len: usize) -> Out {
        Out {
            frame: Frame::Whole {
                buf: self.fit(buf, len),
                len,
            },
            segments: 1,
            wire_bytes: (len - VNET_LEN) as u64,
        }
    }

    /// Segments `i..j` of train `t` as a part, of the `leaving` segments that share its buffer.
    pub(super) fn part(
        &mut self,
        t: &Train,
        train: &Rc<Vec<u8>>,
        (i, j): (usize, usize),
        leaving: usize,
    ) -> Out {
        let mut head = self.head();
        t.head(train, i, j, &mut head);
        Out {
            frame: Frame::Part {
                head,
                train: Rc::clone(train),
                payload: t.payload(i, j),
                charge: (train.capacity() * (j - i)).div_ceil(leaving.max(1)) as u64,
            },
            segments: (j - i) as u32,
            wire_bytes: t.wire_bytes(i, j),
        }
    }
}
