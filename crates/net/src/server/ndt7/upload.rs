//! The upload, read frame by frame. tungstenite's `WebSocket` hands over whole messages, and M-Lab's
//! Go client sends each message in fragments, so every byte was copied once more to put the message
//! together (9% of the server's CPU in a 30 Gbit/s upload, perf) and unmasked even when nothing
//! checks it. Here frames come from tungstenite's `FrameSocket` (its codec and its frame size limit)
//! and this module keeps the rules a counting receiver needs: client frames masked (RFC 6455), no
//! reserved bits, control frames whole and at most 125 bytes, data frames in order (a continuation
//! only inside a message, no new message inside one), binary bytes
//! counted and, when the client named its payload key, unmasked and checked; pings answered, the
//! close handshake either way.

use super::{closing, not_yet, Conn, Progress, Reporter, Waits};
use landspeed_core::ndt7::{self, Due, Timetable};
use std::net::TcpStream;
use tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tungstenite::protocol::frame::{Frame, FrameSocket};

/// The kind of the message whose fragments are arriving.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Binary,
    Text,
}

/// What one frame means to the subtest.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Keep reading.
    Go,
    /// The client closed: answer and stop.
    Closed,
}

/// Where a data frame leaves the message it belongs to; `inside` is the message in progress.
fn order(inside: &mut Option<Kind>, op: Data, fin: bool) -> Result<Kind, String> {
    let kind = match (op, *inside) {
        (Data::Continue, Some(k)) => k,
        (Data::Continue, None) => return Err("a continuation frame outside a message".into()),
        (_, Some(_)) => return Err("a new message inside a fragmented one".into()),
        (Data::Binary, None) => Kind::Binary,
        (Data::Text, None) => Kind::Text,
        (Data::Reserved(n), None) => return Err(format!("reserved data opcode {n}")),
    };
    *inside = (!fin).then_some(kind);
    Ok(kind)
}

/// `data` with the client's mask removed, into `out` (the mask starts again with each frame): a copy,
/// then the XOR eight bytes at a time, which the compiler turns into vector instructions.
fn unmask(data: &[u8], mask: [u8; 4], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(data);
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut chunks = out.chunks_exact_mut(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        c.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
}

/// The frames of an upload.
pub(super) struct Frames {
    socket: FrameSocket<Box<dyn Conn>>,
    inside: Option<Kind>,
    scratch: Vec<u8>,
}

impl Frames {
    pub(super) fn new(stream: Box<dyn Conn>, rest: Vec<u8>) -> Frames {
        Frames {
            socket: FrameSocket::from_partially_read(stream, rest),
            inside: None,
            scratch: Vec::new(),
        }
    }

    /// Takes one frame that arrived.
    fn take(&mut self, frame: Frame, p: &mut Progress) -> Result<Step, String> {
        let header = frame.header();
        let Some(mask) = header.mask else {
            return Err("a client frame without a mask".into());
        };
        if header.rsv1 || header.rsv2 || header.rsv3 {
            return Err("reserved bits set with no extension agreed".into());
        }
        let control = matches!(header.opcode, OpCode::Control(_));
        if control && (!header.is_final || frame.payload().len() > 125) {
            return Err("a control frame fragmented or over 125 bytes".into());
        }
        match header.opcode {
            OpCode::Data(op) => {
                match order(&mut self.inside, op, header.is_final)? {
                    Kind::Binary if p.check.is_some() => {
                        unmask(frame.payload(), mask, &mut self.scratch);
                        p.received(&self.scratch);
                    }
                    Kind::Binary => p.moved(p.bytes + frame.payload().len() as u64),
                    // A client's measurement (a whole text message), kept for the server's record.
                    Kind::Text if op == Data::Text && header.is_final => {
                        unmask(frame.payload(), mask, &mut self.scratch);
                        p.seen.client_said(&self.scratch);
                    }
                    Kind::Text => {}
                }
                Ok(Step::Go)
            }
            OpCode::Control(Control::Ping) => {
                unmask(frame.payload(), mask, &mut self.scratch);
                let pong = Frame::pong(self.scratch.clone());
                self.socket
                    .write(pong)
                    .map_err(|e| format!("answering a ping: {e}"))?;
                Ok(Step::Go)
            }
            OpCode::Control(Control::Pong) => Ok(Step::Go),
            OpCode::Control(Control::Close) => Ok(Step::Closed),
            OpCode::Control(Control::Reserved(n)) => Err(format!("reserved control opcode {n}")),
        }
    }

    /// Reads one frame, waiting at most the socket's read timeout.
    fn next(&mut self, p: &mut Progress) -> Result<Step, Option<String>> {
        match self.socket.read(Some(ndt7::MAX_MESSAGE_BYTES + 1024)) {
            Ok(Some(frame)) => self.take(frame, p).map_err(Some),
            Ok(None) => Err(None),
            Err(e) if not_yet(&e) => Ok(Step::Go),
            Err(e) => Err(Some(e.to_string())),
        }
    }

    /// Queues a frame and writes out what is queued, as far as the socket takes it now.
    fn send(&mut self, frame: Frame) -> Result<(), String> {
        match self.socket.write(frame).and_then(|()| self.socket.flush()) {
            Ok(()) => Ok(()),
            Err(e) if not_yet(&e) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The upload: counts the client's binary messages, answers with a measurement every 250 ms, and
/// closes at 10 s (or when the client closes first).
pub(super) fn upload(f: &mut Frames, sock: &TcpStream, info: &Reporter, p: &mut Progress) {
    let mut t = Timetable::new(p.limits.test_s());
    let mut waits = Waits::new(sock);
    loop {
        let now = p.clock();
        if p.limits.bytes_reached(p.bytes) {
            return close(f, sock, &mut t, p);
        }
        if p.paced() {
            continue;
        }
        match t.at(now) {
            Due::CutOff => return p.fail("cut off at the ndt7 hard limit (13 s)"),
            Due::End => return close(f, sock, &mut t, p),
            Due::Measure => {
                if let Err(e) = f.send(Frame::message(
                    info.message(sock, p),
                    OpCode::Data(Data::Text),
                    true,
                )) {
                    return p.fail(&format!("sending a measurement: {e}"));
                }
            }
            Due::Nothing => {}
        }
        waits.read(&t, now);
        match f.next(p) {
            Ok(Step::Go) => {}
            Ok(Step::Closed) => return answer_close(f, sock),
            Err(None) => return,
            Err(Some(e)) => return p.fail(&format!("receiving: {e}")),
        }
    }
}

/// Starts the closing handshake at the end of the test time and waits (to the hard limit) for the
/// client's answer, counting what still arrives.
fn close(f: &mut Frames, sock: &TcpStream, t: &mut Timetable, p: &mut Progress) {
    if f.send(Frame::close(None)).is_err() {
        return;
    }
    closing(sock, t, p, |p| {
        let _ = f.socket.flush();
        f.next(p) == Ok(Step::Go)
    });
}

/// The client closed first: answer its close and stop.
fn answer_close(f: &mut Frames, sock: &TcpStream) {
    let _ = sock.set_write_timeout(Some(std::time::Duration::from_secs(1)));
    let _ = f.send(Frame::close(None));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmasking_matches_the_rfc_at_every_length_and_phase() {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        for len in [0, 1, 3, 7, 8, 9, 15, 16, 17, 1000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
            let mut out = vec![1, 2, 3];
            unmask(&data, mask, &mut out);
            let want: Vec<u8> = data.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]).collect();
            assert_eq!(out, want, "{len}");
        }
    }

    #[test]
    fn fragments_keep_their_messages_kind_and_order_is_enforced() {
        let mut inside = None;
        assert_eq!(order(&mut inside, Data::Binary, false), Ok(Kind::Binary));
        assert_eq!(order(&mut inside, Data::Continue, false), Ok(Kind::Binary));
        assert!(order(&mut inside, Data::Text, true).is_err());
        assert_eq!(order(&mut inside, Data::Continue, true), Ok(Kind::Binary));
        assert_eq!(inside, None);
        assert!(order(&mut inside, Data::Continue, true).is_err());
        assert_eq!(order(&mut inside, Data::Text, false), Ok(Kind::Text));
        assert_eq!(order(&mut inside, Data::Continue, true), Ok(Kind::Text));
        assert_eq!(order(&mut inside, Data::Binary, true), Ok(Kind::Binary));
        assert!(order(&mut inside, Data::Reserved(3), true).is_err());
    }
}
