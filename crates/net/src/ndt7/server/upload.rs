//! The upload, read piece by piece (`reader`): tungstenite's `WebSocket` hands over whole messages,
//! and its frame codec whole frames, so a client's 16 MiB frames cost 16 MiB each and M-Lab's Go
//! client's fragmented messages were copied once more to be put together (9% of the server's CPU in
//! a 30 Gbit/s upload, perf). Here every byte is counted as it arrives, binary bytes unmasked and
//! checked only when the client named its payload key, text kept only when it can be a
//! measurement; pings answered, the close handshake either way. What the server sends (its
//! measurements, pongs, its close) goes through a small queue written as far as the socket takes
//! it, so a client that stops reading costs no more than that queue's bound.

use super::frame::server_frame;
use super::progress::{closing, Conn, Progress, Reporter, Waits};
use super::reader::{Got, Reader};
use landspeed_core::ndt7::{Due, Timetable};
use std::io::{ErrorKind, Write};
use std::net::TcpStream;

/// The most the server queues for a client that does not read it (measurements, pongs).
pub(super) const MAX_QUEUED: usize = 256 * 1024;

/// An upload's connection: the client's frames in, the server's out.
pub(super) struct Frames {
    stream: Box<dyn Conn>,
    reader: Reader,
    out: Vec<u8>,
}

impl Frames {
    pub(super) fn new(stream: Box<dyn Conn>, rest: Vec<u8>) -> Frames {
        Frames {
            stream,
            reader: Reader::new(rest),
            out: Vec::new(),
        }
    }

    /// Reads what the client sent (at most one read, waiting at most the socket's read timeout):
    /// Ok(true) to go on, Ok(false) once the client closed; Err(None) when the connection ended.
    fn next(&mut self, p: &mut Progress) -> Result<bool, Option<String>> {
        match self.reader.next(&mut self.stream, p)? {
            Got::More => Ok(true),
            Got::Ping(payload) => {
                self.send(&server_frame(10, &payload)).map_err(Some)?;
                Ok(true)
            }
            Got::Close => Ok(false),
        }
    }

    /// Queues a frame and writes out what is queued, as far as the socket takes it now.
    fn send(&mut self, frame: &[u8]) -> Result<(), String> {
        if self.out.len() + frame.len() > MAX_QUEUED {
            return Err("the client does not read what the server sends".into());
        }
        self.out.extend_from_slice(frame);
        self.flush()
    }

    /// Writes what is queued, as far as the socket takes it now.
    fn flush(&mut self) -> Result<(), String> {
        while !self.out.is_empty() {
            match self.stream.write(&self.out) {
                Ok(0) => return Err("the connection closed".into()),
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        let _ = self.stream.flush();
        Ok(())
    }
}

/// The upload: counts the client's bytes, answers with a measurement every 250 ms, and closes at
/// 10 s (or when the client closes first, or the server's limits are reached).
pub(super) fn upload(f: &mut Frames, sock: &TcpStream, info: &Reporter, p: &mut Progress) {
    let mut t = Timetable::new(p.limits.test_s());
    let mut waits = Waits::new(sock);
    loop {
        let now = p.clock();
        if p.limits.bytes_reached(p.charged()) {
            return close(f, sock, &mut t, p);
        }
        if p.paced() {
            continue;
        }
        match t.at(now) {
            Due::CutOff => return p.fail("cut off at the ndt7 hard limit (13 s)"),
            Due::End => return close(f, sock, &mut t, p),
            Due::Measure => {
                let m = info.message(sock, p);
                if let Err(e) = f.send(&server_frame(1, m.as_bytes())) {
                    return p.fail(&format!("sending a measurement: {e}"));
                }
            }
            Due::Nothing => {}
        }
        waits.read(&t, now);
        match f.next(p) {
            Ok(true) => {}
            Ok(false) => return answer_close(f, sock),
            Err(None) => return,
            Err(Some(e)) => return p.fail(&format!("receiving: {e}")),
        }
    }
}

/// Starts the closing handshake at the end of the test time and waits (to the hard limit) for the
/// client's answer, counting what still arrives.
fn close(f: &mut Frames, sock: &TcpStream, t: &mut Timetable, p: &mut Progress) {
    // A reason goes with the close when the server's byte limit ended the subtest (code 1000).
    let payload = p
        .close_reason()
        .map(|r| [&1000u16.to_be_bytes()[..], r.as_bytes()].concat())
        .unwrap_or_default();
    if f.send(&server_frame(8, &payload)).is_err() {
        return;
    }
    closing(sock, t, p, |p| {
        let _ = f.flush();
        f.next(p) == Ok(true)
    });
}

/// The client closed first: answer its close and stop.
fn answer_close(f: &mut Frames, sock: &TcpStream) {
    let _ = sock.set_write_timeout(Some(std::time::Duration::from_secs(1)));
    let _ = f.send(&server_frame(8, &[]));
}
