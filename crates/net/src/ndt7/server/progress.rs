//! What one ndt7 subtest carries as it runs, whichever way it goes: its counts and the server's
//! limits on them (`Progress`), the check of a landspeed client's payload, the measurement messages
//! sent to the client (`Reporter`), the socket timeouts that keep a blocking loop on the timetable
//! (`Waits`) and the wait for the client's close.

use super::record::{self, tcp_message, unix_s};
use landspeed_core::ndt7::{self, Due, Measurement, Subtest, Timetable};
use landspeed_engine::tcp_info;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime};

/// The stream a subtest runs on: TLS or plain, with the TCP socket kept for timeouts and TCP_INFO.
pub(super) trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// What one subtest did.
pub(super) struct Progress {
    /// Payload bytes moved: binary messages, the subtest's measure.
    pub(super) bytes: u64,
    /// Every other byte the client sent: text messages and control frames' payloads, counted
    /// against the server's limits beside `bytes`.
    pub(super) other: u64,
    pub(super) started: Instant,
    /// Seconds from `started` when a loop last read the clock.
    pub(super) now_s: f64,
    /// Seconds from `started` to the first and the last payload byte moved.
    pub(super) first_byte_s: Option<f64>,
    pub(super) last_byte_s: Option<f64>,
    pub(super) error: Option<String>,
    /// The payload key a landspeed client named (landspeed's extension), and for an upload what was
    /// checked with it.
    pub(super) check: Option<Check>,
    /// The measurements sent and the intervals they close, for the server's record.
    pub(super) seen: record::Seen,
    /// The server's limits on the subtest (length, bytes, rate).
    pub(super) limits: ndt7::SubtestLimits,
}

/// An upload checked against the payload of the key its client named.
pub(super) struct Check {
    pub(super) key: u64,
    pub(super) verifier: landspeed_core::payload::Verifier,
    pub(super) verified: u64,
    pub(super) corrupt: u64,
}

impl Check {
    pub(super) fn new(key: u64) -> Check {
        let pattern = landspeed_core::payload::Pattern::new(key);
        Check {
            key,
            verifier: landspeed_core::payload::Verifier::new(&pattern, ndt7::MAX_MESSAGE_BYTES),
            verified: 0,
            corrupt: 0,
        }
    }

    /// Checks `data`, received at `offset` of the upload.
    pub(super) fn take(&mut self, offset: u64, data: &[u8]) {
        if let Some(bad) = self.verifier.check(0, offset, data) {
            self.corrupt += bad.bad_blocks.len() as u64;
        }
        self.verified += data.len() as u64;
    }

    /// What the measurements say of it.
    pub(super) fn said(&self) -> ndt7::LandspeedCheck {
        ndt7::LandspeedCheck {
            payload_key: self.key.to_string(),
            bytes_verified: self.verified,
            corrupt_blocks: self.corrupt,
        }
    }
}

impl Progress {
    /// What the subtest moved so far, for its record.
    pub(super) fn counts(&self) -> record::Counts {
        record::Counts {
            bytes: self.bytes,
            first_byte_s: self.first_byte_s,
            last_byte_s: self.last_byte_s,
            error: self.error.clone(),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            check: self.check.as_ref().map(|c| record::Checked {
                key: c.key,
                verified: c.verified,
                corrupt: c.corrupt,
            }),
        }
    }

    pub(super) fn fail(&mut self, why: &str) {
        self.error = Some(why.to_string());
    }

    /// An upload's binary message: counted, and checked when the client named its key.
    pub(super) fn received(&mut self, data: &[u8]) {
        #[cfg(feature = "fault-injection")]
        let flipped = landspeed_engine::transport::tcp::fault::flipped(0, self.bytes, data);
        #[cfg(feature = "fault-injection")]
        let data = &flipped[..];
        if let Some(c) = self.check.as_mut() {
            c.take(self.bytes, data);
        }
        self.moved(self.bytes + data.len() as u64);
    }

    /// Why the server ends the subtest before its time, for its close frame: the byte limit reached.
    pub(super) fn close_reason(&self) -> Option<String> {
        let max = self.limits.max_bytes?;
        self.limits
            .bytes_reached(self.charged())
            .then(|| format!("this server's limit of {max} bytes per test"))
    }

    /// Every byte the subtest moved or the client sent, as the server's limits count them.
    pub(super) fn charged(&self) -> u64 {
        self.bytes + self.other
    }

    /// Seconds since the subtest began, read once per turn of a loop and kept for `moved`.
    pub(super) fn clock(&mut self) -> f64 {
        self.now_s = self.started.elapsed().as_secs_f64();
        self.now_s
    }

    /// Holds the subtest to `--max-rate`: when it is ahead of the rate, sleeps (at most 5 ms at a
    /// time, so the loop still sees its timetable) and says so; TCP's flow control then slows an
    /// uploading client, and a download simply sends later.
    pub(super) fn paced(&mut self) -> bool {
        match self.limits.wait_s(self.charged(), self.now_s) {
            Some(w) => {
                std::thread::sleep(Duration::from_secs_f64(w.min(0.005)));
                true
            }
            None => false,
        }
    }

    /// The subtest's payload count is now `bytes`, at the time its loop last read (a frame may be
    /// a few KiB, so no clock read per frame: a second read there cost the upload a fifth more CPU per
    /// byte with M-Lab's Go client, whose messages come in 4 KiB frames).
    pub(super) fn moved(&mut self, bytes: u64) {
        self.first_byte_s.get_or_insert(self.now_s);
        self.last_byte_s = Some(self.now_s);
        self.bytes = bytes;
    }
}

/// Measurement messages for one subtest.
pub(super) struct Reporter {
    subtest: Subtest,
    started: Instant,
    client: String,
    server: String,
    start_time: String,
}

impl Reporter {
    pub(super) fn new(sock: &TcpStream, subtest: Subtest, started: Instant) -> Reporter {
        Reporter {
            subtest,
            started,
            client: sock.peer_addr().map(ndt7::endpoint).unwrap_or_default(),
            server: sock.local_addr().map(ndt7::endpoint).unwrap_or_default(),
            start_time: landspeed_core::result::format_utc(unix_s(SystemTime::now())),
        }
    }

    /// A measurement now: the subtest's progress `p` and `sock`'s TCP_INFO, kept in `p` for the
    /// server's record.
    pub(super) fn message(&self, sock: &TcpStream, p: &mut Progress) -> String {
        let bytes = p.bytes;
        let us = self.started.elapsed().as_micros() as i64;
        let tcp = tcp_info::read(sock).ok();
        let m = Measurement {
            app_info: Some(ndt7::AppInfo {
                elapsed_time: us,
                num_bytes: bytes as i64,
            }),
            connection_info: Some(ndt7::ConnectionInfo {
                client: self.client.clone(),
                server: self.server.clone(),
                uuid: None,
                start_time: Some(self.start_time.clone()),
            }),
            origin: Some("server".into()),
            test: Some(self.subtest.name().into()),
            tcp_info: tcp.map(|t| tcp_message(&t, us)),
            landspeed: p.check.as_ref().map(Check::said),
        };
        let text = serde_json::to_string(&m).unwrap_or_default();
        p.seen.measured(&m, tcp.map(|t| t.snapshot()));
        text
    }
}

/// Whether an I/O error of the WebSocket only means "not yet" (a timeout of the blocking socket).
pub(super) fn not_yet(e: &tungstenite::Error) -> bool {
    matches!(e, tungstenite::Error::Io(io) if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// A loop's socket timeouts, so a blocking read or write returns in time for the timetable's next
/// event: the time to it rounded down to 5 ms steps (5 to 250 ms), set only when that changes. A
/// setsockopt at every frame was 6% of the server's CPU in an upload of small frames (perf); this
/// sets one a few times per 250 ms.
pub(super) struct Waits<'a> {
    sock: &'a TcpStream,
    read: Option<Duration>,
    write: Option<Duration>,
}

impl<'a> Waits<'a> {
    pub(super) fn new(sock: &'a TcpStream) -> Waits<'a> {
        Waits {
            sock,
            read: None,
            write: None,
        }
    }

    pub(super) fn step(t: &Timetable, now_s: f64) -> Duration {
        let ms = (t.wait_s(now_s) * 1000.0 / 5.0).floor() * 5.0;
        Duration::from_millis(ms.clamp(5.0, 250.0) as u64)
    }

    /// Before a blocking read.
    pub(super) fn read(&mut self, t: &Timetable, now_s: f64) {
        let d = Self::step(t, now_s);
        if self.read != Some(d) && self.sock.set_read_timeout(Some(d)).is_ok() {
            self.read = Some(d);
        }
    }

    /// Before a blocking write.
    pub(super) fn write(&mut self, t: &Timetable, now_s: f64) {
        let d = Self::step(t, now_s);
        if self.write != Some(d) && self.sock.set_write_timeout(Some(d)).is_ok() {
            self.write = Some(d);
        }
    }
}

/// The wait after the server's close, download or upload: `step` reads what still arrives (false
/// once the client has answered or the connection is gone), to the hard limit.
pub(super) fn closing(
    sock: &TcpStream,
    t: &mut Timetable,
    p: &mut Progress,
    mut step: impl FnMut(&mut Progress) -> bool,
) {
    let mut waits = Waits::new(sock);
    loop {
        let now = p.clock();
        if t.at(now) == Due::CutOff {
            return;
        }
        // What still arrives after the end is held to --max-rate and --max-bytes too (until the
        // cut-off).
        if p.limits.bytes_reached(p.charged()) {
            return;
        }
        if p.paced() {
            continue;
        }
        waits.read(t, now);
        waits.write(t, now);
        if !step(p) {
            return;
        }
    }
}
