//! The download's binary messages written past tungstenite. A server's WebSocket frames are not
//! masked, so a binary message is a few header bytes and the payload as it is: written straight from
//! the payload generator's buffer, it costs the kernel's copy and nothing more, where tungstenite
//! would copy each message twice first (into an owned message, then into its write buffer; a fifth
//! of the server's CPU in a 10 Gbit/s+ download, measured with perf). Only used between tungstenite's
//! own writes, with its buffer flushed, so the two never interleave inside a frame.

use std::io::{ErrorKind, IoSlice, Write};

/// The longest header: FIN and opcode, the length marker, a 64-bit length.
const MAX_HEADER: usize = 10;

/// One binary frame (FIN set, opcode 2, unmasked) on its way out, resumable after a partial write.
pub(super) struct BinaryFrame {
    header: [u8; MAX_HEADER],
    header_len: usize,
    /// The payload's length.
    pub(super) len: usize,
    /// The payload's offset in the subtest's byte stream (what the generator is asked for).
    pub(super) offset: u64,
    written: usize,
}

/// A server frame's header (FIN set, unmasked) for `opcode` and a payload of `len` bytes, and its
/// length.
fn header(opcode: u8, len: usize) -> ([u8; MAX_HEADER], usize) {
    let mut header = [0u8; MAX_HEADER];
    header[0] = 0x80 | opcode;
    let header_len = if len < 126 {
        header[1] = len as u8;
        2
    } else if len <= usize::from(u16::MAX) {
        header[1] = 126;
        header[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        header[1] = 127;
        header[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    (header, header_len)
}

/// A whole server frame with `opcode` (1 text, 8 close, 10 pong) and `payload`, as bytes.
pub(super) fn server_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let (h, n) = header(opcode, payload.len());
    [&h[..n], payload].concat()
}

impl BinaryFrame {
    /// A frame carrying `len` bytes from stream offset `offset`.
    pub(super) fn new(offset: u64, len: usize) -> BinaryFrame {
        let (header, header_len) = header(2, len);
        BinaryFrame {
            header,
            header_len,
            len,
            offset,
            written: 0,
        }
    }

    /// Writes what is left of the frame; `payload` is the frame's whole payload every time. Ok when
    /// all of it is out; a timeout (the socket's write timeout) returns the error with the progress
    /// kept, to be called again.
    pub(super) fn write_to(&mut self, out: &mut dyn Write, payload: &[u8]) -> std::io::Result<()> {
        debug_assert_eq!(payload.len(), self.len);
        while self.written < self.header_len + self.len {
            let n = if self.written < self.header_len {
                out.write_vectored(&[
                    IoSlice::new(&self.header[self.written..self.header_len]),
                    IoSlice::new(payload),
                ])?
            } else {
                out.write(&payload[self.written - self.header_len..])?
            };
            if n == 0 {
                return Err(ErrorKind::WriteZero.into());
            }
            self.written += n;
        }
        Ok(())
    }

    /// The frame as bytes (tests).
    #[cfg(test)]
    fn bytes(&self, payload: &[u8]) -> Vec<u8> {
        [&self.header[..self.header_len], payload].concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tungstenite::protocol::frame::Frame;

    #[test]
    fn frames_are_byte_for_byte_tungstenites_at_every_length_boundary() {
        for len in [0, 1, 125, 126, 127, 65535, 65536, 1 << 20] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let theirs = Frame::message(
                payload.clone(),
                tungstenite::protocol::frame::coding::OpCode::Data(
                    tungstenite::protocol::frame::coding::Data::Binary,
                ),
                true,
            );
            let mut expected = Vec::new();
            theirs.format(&mut expected).unwrap();
            assert_eq!(BinaryFrame::new(0, len).bytes(&payload), expected, "{len}");
        }
        let mut pong = Vec::new();
        Frame::pong(b"ab".to_vec()).format(&mut pong).unwrap();
        assert_eq!(server_frame(10, b"ab"), pong);
        let mut text = Vec::new();
        Frame::message(
            "x".repeat(300),
            tungstenite::protocol::frame::coding::OpCode::Data(
                tungstenite::protocol::frame::coding::Data::Text,
            ),
            true,
        )
        .format(&mut text)
        .unwrap();
        assert_eq!(server_frame(1, "x".repeat(300).as_bytes()), text);
    }

    /// A writer that takes at most `step` bytes a call and times out every other call.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
        stall: bool,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.stall = !self.stall;
            if !self.stall {
                return Err(ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_cut_by_timeouts_and_short_writes_resumes_where_it_stopped() {
        let payload: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let mut f = BinaryFrame::new(4096, payload.len());
        let mut out = Trickle {
            got: vec![],
            step: 3,
            stall: false,
        };
        let mut tries = 0;
        while let Err(e) = f.write_to(&mut out, &payload) {
            assert_eq!(e.kind(), ErrorKind::WouldBlock);
            tries += 1;
            out.step = 7919;
        }
        assert!(tries > 1);
        assert_eq!(out.got, f.bytes(&payload));
        assert_eq!((f.offset, f.len), (4096, 70_000));
    }
}
