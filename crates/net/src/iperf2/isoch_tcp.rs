//! `landspeed run --iperf2 --isochronous FPS:MEAN,STDDEV` over TCP: video-like frames in iperf 2's
//! protocol, against `iperf -s` (2.1.x) or `landspeed serve`, as iperf 2.1.8's client sends them
//! without `-u`. Each stream is a connection that opens with the client's header (the ISOCH bit,
//! 80 bytes: `ClientHeader::for_tcp_frames`), then carries one burst a frame: at each frame's slot
//! (`core::frames::FrameClock`) the sender draws the frame's size (`FrameSizes`, at least the
//! burst header's 92 bytes) and writes it in writes of at most `-l` bytes, the first opening with
//! iperf 2's burst header (its period, number, size and send time: `landspeed_iperf2::burst`),
//! which the server reads to time each frame with `--trip-times`. A frame whose slot has passed
//! when the sender comes back is skipped (a slip). iperf 2's server sends nothing back over TCP,
//! so the result's receiving side is inferred from what was written, and the frames received and
//! their latency are in the server's own output. The schedule, the intervals and the sender's
//! counts are `isoch_client`'s, shared with UDP's frames.

use super::isoch_client::{self as frames, Carrier, Counters, Frame, Plan, Sent};
use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions};
use landspeed_core::config::Test;
use landspeed_core::frames::{FrameSpec, FramesReport};
use landspeed_core::result::RunResult;
use landspeed_iperf2::ack::WireTime;
use landspeed_iperf2::burst::{BurstHeader, BURST_HEADER_BYTES};
use landspeed_iperf2::ClientHeader;
use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// How long one write may block before the sender looks at the clock (and the test's end) again.
const WRITE_WAIT: Duration = Duration::from_millis(200);

/// Runs a TCP test of frames against an iperf 2 server; `spec.frames` is set.
pub(crate) fn run_tcp_frames(
    opts: &ClientOptions,
    spec: &Test,
    frames: FrameSpec,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let started_unix_s = super::client::unix_now_s();
    let timed = landspeed_core::config::TestSpec {
        trip_times: opts.trip_times,
        ..spec.spec().clone()
    };
    let header = ClientHeader::for_tcp_frames(&timed, opts.port)
        .map_err(|e| ClientError::NotWithIperf2 { what: e.to_string() })?
        .started(WireTime::from_unix_ns((started_unix_s * 1e9) as u64));
    landspeed_engine::platform::check_spec(spec)?;
    let addr = resolve(opts)?;
    let socks = open(opts, addr, spec, &header.encode(), on_event)?;
    let warnings = vec![
        "iperf 2's protocol: the server sends the client no figures over TCP, so its side of the result is inferred from this end's; the frames it received and their latency are in its own output (iperf -s -e --trip-times, or landspeed serve's log)".to_string(),
        "iperf 2's payload is not landspeed's: nothing was verified".to_string(),
    ];
    on_event(ClientEvent::Started {
        streams: spec.streams,
        warnings: warnings.clone(),
    });
    let counters: Vec<Counters> = (0..spec.streams).map(|_| Counters::default()).collect();
    let t0 = Instant::now();
    let tcp = |k: usize| {
        let s = socks.get(k)?;
        landspeed_engine::tcp_info::read(s).ok().map(|t| t.snapshot())
    };
    let (sent, samples) = std::thread::scope(|s| {
        let handles: Vec<_> = (socks.iter().zip(&counters))
            .map(|(sock, counter)| {
                let plan = Plan {
                    spec,
                    frames,
                    header: &[],
                    t0,
                    counter,
                    trip_times: opts.trip_times,
                };
                s.spawn(move || frames::send_frames(&mut Bursts::new(sock, spec), &plan, interrupt))
            })
            .collect();
        let samples = frames::sample_while(&handles, &counters, (spec, t0), &tcp, on_event);
        let sent: Vec<Sent> = (handles.into_iter())
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (sent, samples)
    });
    let elapsed_s = t0.elapsed().as_secs_f64();
    let here = with_tcp(frames::here_report(&sent, elapsed_s, warnings), &socks);
    for s in &socks {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let server = landspeed_core::endpoint::EndpointReport {
        software: "iperf 2 server".into(),
        streams: here.streams.iter().map(crate::dial::inferred).collect(),
        elapsed_s: here.elapsed_s,
        ..Default::default()
    };
    let local = socks[0]
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    let ends = super::client::Ends::at_end((local, addr), started_unix_s, interrupt);
    let mut result = super::client::assembled(opts, spec, &ends, (&here, &server), &samples);
    result.frames = Some(FramesReport {
        fps: frames.fps,
        period_ms: frames.period_ns() as f64 / 1e6,
        sender: Some(frames::sender_side(frames, &sent, &counters)),
        sender_streams: frames::each_sender(frames, &sent, &counters),
        ..FramesReport::default()
    });
    Ok(result)
}

/// The test's connections, each opened with the header, told to the caller as they are made.
fn open(
    opts: &ClientOptions,
    addr: std::net::SocketAddr,
    spec: &Test,
    header: &[u8],
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<Vec<TcpStream>, ClientError> {
    let (mut streams, mut facts) = (vec![], vec![]);
    for k in 0..spec.streams {
        let (sock, tcp) = crate::dial::connect_timed(opts, addr, spec, k)?;
        facts.push(super::client::connect_facts(&sock, tcp));
        streams.push(crate::dial::greeted(opts, spec, (k, sock), header, None)?);
    }
    let local = (streams[0].socket.local_addr()).map_err(|err| ClientError::Stream { id: 0, err })?;
    on_event(ClientEvent::Connected { local, remote: addr });
    on_event(super::client::streams_connected(&streams, facts));
    streams
        .into_iter()
        .map(|s| {
            let err = |err| ClientError::Stream { id: s.id, err };
            s.socket.set_write_timeout(Some(WRITE_WAIT)).map_err(err)?;
            Ok(s.socket)
        })
        .collect()
}

/// This end's report with each stream's TCP figures as its connection ends.
fn with_tcp(
    mut here: landspeed_core::endpoint::EndpointReport,
    socks: &[TcpStream],
) -> landspeed_core::endpoint::EndpointReport {
    for (s, sock) in here.streams.iter_mut().zip(socks) {
        s.tcp = super::bounce_client::tcp_stats(sock);
    }
    here
}

/// A TCP stream's frames: each one burst, its header first, in writes of at most `-l` bytes.
struct Bursts<'a> {
    sock: &'a TcpStream,
    buf: Vec<u8>,
    /// The stream's bytes written by the end of the last burst (iperf 2's running packet id).
    seq: u64,
}

impl<'a> Bursts<'a> {
    fn new(sock: &'a TcpStream, spec: &Test) -> Bursts<'a> {
        let len = (spec.length_bytes as usize).max(BURST_HEADER_BYTES);
        Bursts {
            sock,
            buf: vec![0u8; len],
            seq: 0,
        }
    }
}

impl Carrier for Bursts<'_> {
    const MIN_FRAME: u64 = BURST_HEADER_BYTES as u64;

    fn frame(
        &mut self,
        f: &Frame,
        plan: &Plan,
        (budget, deadline): (&mut u64, Instant),
        out: &mut Sent,
    ) -> Result<(), String> {
        // With -n the last frame is what is left (never less than its header).
        let size = u64::from(f.size).min(*budget).max(Self::MIN_FRAME);
        self.seq += size;
        BurstHeader {
            start: WireTime {
                secs: f.start.0,
                micros: f.start.1,
            },
            written: WireTime::from_unix_ns(super::udp_client::unix_ns()),
            period_us: f.period_us,
            id: f.tick.frame,
            size: size as u32,
            seq: self.seq,
        }
        .encode_into(&mut self.buf);
        let mut done = 0u64;
        while done < size {
            // The burst's bytes from `done`, no further than the buffer's end: the header goes
            // once, whole, at the frame's start.
            let at = (done % self.buf.len() as u64) as usize;
            let len = ((size - done) as usize).min(self.buf.len() - at);
            match self.sock.write(&self.buf[at..at + len]) {
                Ok(0) => return Err("the server closed the connection".into()),
                Ok(n) => {
                    out.wrote(n, plan);
                    done += n as u64;
                    *budget = budget.saturating_sub(n as u64);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    if Instant::now() >= deadline {
                        // The test's time ran out within the frame: it ends there.
                        *budget = 0;
                        return Ok(());
                    }
                }
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_iperf2::burst::BurstReader;

    /// A connected pair on loopback.
    fn pair() -> (TcpStream, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (a, l.accept().unwrap().0)
    }

    #[test]
    fn each_frame_is_one_burst_of_its_size_with_its_number_and_period() {
        let (tx, mut rx) = pair();
        let spec: Test = landspeed_core::config::TestSpec {
            length_bytes: 1000,
            ..Default::default()
        }
        .validated()
        .unwrap();
        let counter = Counters::default();
        let plan = Plan {
            spec: &spec,
            frames: FrameSpec {
                fps: 10.0,
                mean_bps: 8e4,
                stddev_bps: 0.0,
                ipg_ns: 0,
            },
            header: &[],
            t0: Instant::now(),
            counter: &counter,
            trip_times: false,
        };
        let mut b = Bursts::new(&tx, &spec);
        let mut out = Sent::default();
        let far = Instant::now() + Duration::from_secs(10);
        // A frame of 2,500 bytes in writes of at most 1,000, then a small one, then -n's last 50.
        let mut budget = 2_500 + 300 + 50;
        for (frame, size) in [(1, 2_500), (3, 300), (4, 9_000)] {
            let f = Frame {
                tick: landspeed_core::frames::Tick {
                    frame,
                    prev: frame - 1,
                    due_ns: 0,
                },
                size,
                start: (7, 8),
                period_us: 100_000,
            };
            b.frame(&f, &plan, (&mut budget, far), &mut out).unwrap();
        }
        drop(tx);
        let mut got = vec![];
        std::io::Read::read_to_end(&mut rx, &mut got).unwrap();
        assert_eq!(
            got.len(),
            2_500 + 300 + 92,
            "the last frame is at least its header"
        );
        assert_eq!(out.frames_written(), (3 + 1 + 1, 2_500 + 300 + 92));
        let mut bursts = vec![];
        BurstReader::default().feed(&got, |h| bursts.push((h.id, h.size, h.period_us, h.seq)));
        assert_eq!(
            bursts,
            [
                (1, 2_500, 100_000, 2_500),
                (3, 300, 100_000, 2_800),
                (4, 92, 100_000, 2_892)
            ]
        );
        assert_eq!(budget, 0);
    }
}
