//! `landspeed run --iperf2 -u -R`: the server sends an iperf 2 UDP test and this end receives it
//! (`iperf -s -u`, or `landspeed serve --iperf2-udp-send`), each `-P` stream on a socket and a
//! thread of its own. As iperf 2.1.8's client does (captured,
//! docs/iperf2.md), it sends its header in a datagram, again after a random wait under 20 ms until
//! the first datagram comes back (at most 100 times), then counts the server's datagrams as iperf
//! 2 counts them (`Receipt`: lost, out of order, jitter) until the server's end (a negative
//! number), the test's time and a grace, or a silence. iperf 2's server expects no report back for
//! these tests. Its side of the result is inferred: it sent at least the highest number that came.

use super::udp::{arrival_s, received_stream};
use super::udp_client::unix_ns;
use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions, LiveIntervals};
use landspeed_core::config::{EndCondition, Flow, Test};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport, StreamSample};
use landspeed_core::result::RunResult;
use landspeed_iperf2::header::{flags, upper};
use landspeed_iperf2::udp::Datagram;
use landspeed_iperf2::Receipt;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The header's datagram is sent at most this many times (iperf 2.1.8's count).
const ASKS: u32 = 100;
/// How long the server may stay silent: before its first datagram, and between two.
const SILENCE: Duration = Duration::from_secs(5);
/// Beyond the test's time, how long its end may take to come.
const GRACE: Duration = Duration::from_secs(3);

/// Runs one UDP test the server sends: each of `-P`'s streams a socket and a thread of its own
/// (each a test of its own at the server, as iperf 2's are), their interval samples put together
/// here as they come.
pub(super) fn run_reverse(
    opts: &ClientOptions,
    spec: &Test,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let ask = request(spec, opts.port)?;
    let started_unix_s = unix_ns() as f64 / 1e9;
    let addr = resolve(opts)?;
    let socks = (0..spec.streams)
        .map(|id| {
            let sock = crate::dial::udp_socket(opts, addr, spec, id)
                .map_err(|err| ClientError::Stream { id, err })?;
            let _ = landspeed_path::stamp::enable(&sock);
            Ok(sock)
        })
        .collect::<Result<Vec<UdpSocket>, ClientError>>()?;
    let locals = super::udp_client::locals(socks.iter())?;
    let local = locals[0];
    let warnings = super::client::started_udp(on_event, (&locals, super::client::udp_facts(socks.iter())), (addr, spec.streams), Some("loss, out of order and jitter are counted as iperf 2's client counts them (docs/iperf2.md); the server's side is inferred from the highest number that came"));
    let t0 = Instant::now();
    let (got, samples) = receive_all(&socks, (spec, &ask), (t0, interrupt), on_event);
    let silent: Vec<&Got> = got.iter().filter(|g| g.receipt.received == 0).collect();
    if silent.len() == got.len() && !interrupt.load(Relaxed) {
        return Err(nothing_came(silent[0]));
    }
    // Some streams came and some did not (a server that served only part of -P): the result is
    // kept, those streams failed in it (`reports`).
    let (here, server) = reports(&got, spec, t0.elapsed().as_secs_f64(), warnings);
    let ends = super::client::Ends::at_end((local, addr), started_unix_s, interrupt);
    Ok(super::client::assembled(
        opts,
        spec,
        &ends,
        (&here, &server),
        &samples,
    ))
}

/// Why a stream received nothing: its socket's error (an ICMP port unreachable), or silence.
fn nothing_came(g: &Got) -> ClientError {
    match &g.error {
        Some(e) => ClientError::Stream {
            id: g.id,
            err: std::io::Error::new(e.kind(), e.to_string()),
        },
        None => ClientError::NothingSent {
            after: g.asked.max(SILENCE),
        },
    }
}

/// Every stream's request and receipt, each on a thread of its own; their interval samples merged
/// (and shown) here, an interval once every stream has closed it (those still missing at the end
/// with their last count).
fn receive_all(
    socks: &[UdpSocket],
    (spec, ask): (&Test, &[u8]),
    (t0, interrupt): (Instant, &AtomicBool),
    on_event: &mut dyn FnMut(ClientEvent),
) -> (Vec<Got>, Vec<IntervalSample>) {
    let (tx, rx) = std::sync::mpsc::channel::<(u32, StreamSample)>();
    std::thread::scope(|scope| {
        let threads: Vec<_> = socks
            .iter()
            .zip(0u32..)
            .map(|(sock, id)| {
                let tx = tx.clone();
                scope.spawn(move || {
                    let asked = send_request(sock, ask, interrupt);
                    receive(sock, (id, spec, tx), (t0, interrupt), (ask, asked, None))
                })
            })
            .collect();
        drop(tx);
        let mut merged = Merged::new(spec, socks.len());
        for (index, s) in rx {
            merged.add(index, s, on_event);
        }
        merged.finish(on_event);
        let got = threads
            .into_iter()
            .zip(0u32..)
            .map(|(t, id)| t.join().unwrap_or_else(|_| Got::failed(id)))
            .collect();
        (got, merged.samples)
    })
}

/// Interval samples put together from the streams' own.
struct Merged<'a> {
    spec: &'a Test,
    streams: usize,
    /// Closed by some streams, not yet by all: by interval number.
    open: std::collections::BTreeMap<u32, Vec<StreamSample>>,
    samples: Vec<IntervalSample>,
    live: LiveIntervals,
}

impl<'a> Merged<'a> {
    fn new(spec: &'a Test, streams: usize) -> Merged<'a> {
        Merged {
            spec,
            streams,
            open: Default::default(),
            samples: vec![],
            live: LiveIntervals::default(),
        }
    }

    /// A stream's sample of interval `index`; the interval is shown once every stream's is in.
    fn add(&mut self, index: u32, s: StreamSample, on_event: &mut dyn FnMut(ClientEvent)) {
        let all = self.open.entry(index).or_default();
        all.push(s);
        if all.len() == self.streams {
            let streams = self.open.remove(&index).unwrap_or_default();
            self.close(index, streams, on_event);
        }
    }

    /// The intervals some stream did not close (it ended first): its last sample stands in.
    fn finish(&mut self, on_event: &mut dyn FnMut(ClientEvent)) {
        while let Some((index, mut streams)) = self.open.pop_first() {
            for id in 0..self.streams as u32 {
                if streams.iter().all(|s| s.id != id) {
                    let last = self
                        .samples
                        .last()
                        .and_then(|p| p.streams.iter().find(|s| s.id == id));
                    streams.push(last.cloned().unwrap_or(StreamSample {
                        id,
                        bytes: 0,
                        tcp: None,
                        udp: None,
                        reads: None,
                        trips: None,
                        trip_bins: None,
                    }));
                }
            }
            self.close(index, streams, on_event);
        }
    }

    fn close(&mut self, index: u32, mut streams: Vec<StreamSample>, on_event: &mut dyn FnMut(ClientEvent)) {
        streams.sort_by_key(|s| s.id);
        let step = self.spec.interval_s.as_secs_f64();
        let s = IntervalSample {
            index,
            start_s: f64::from(index) * step,
            end_s: f64::from(index + 1) * step,
            omitted: false,
            streams,
        };
        self.live.each_flow(self.spec, &s, on_event);
        self.samples.push(s);
    }
}

/// The datagram that asks for the test: the prefix (number 1, now), iperf 2.1.8's `-R` header,
/// then its digit pattern to the datagrams' length.
fn request(spec: &Test, port: u16) -> Result<Vec<u8>, ClientError> {
    let mut h = super::udp_client::client_header(spec, port)?;
    h.flags |= flags::UDPTESTS | flags::VERSION2;
    if let Some(e) = h.extension.as_mut() {
        e.upper |= upper::REVERSE;
    }
    let mut d: Vec<u8> = (0..spec.length_bytes as usize)
        .map(|i| b'0' + (i % 10) as u8)
        .collect();
    landspeed_engine::transport::udp::iperf2_prefix(1, unix_ns(), &mut d);
    let header = h.encode();
    let prefix = landspeed_iperf2::udp::PREFIX_BYTES;
    d[prefix..prefix + header.len()].copy_from_slice(&header);
    Ok(d)
}

/// Sends the request until the server's first datagram is waiting (or [`ASKS`] times): how long it
/// took.
fn send_request(sock: &UdpSocket, ask: &[u8], interrupt: &AtomicBool) -> Duration {
    let t = Instant::now();
    for _ in 0..ASKS {
        if interrupt.load(Relaxed) {
            break;
        }
        let _ = sock.send(ask);
        let wait = Duration::from_micros(u64::from(getrandom::u32().unwrap_or(10_000) % 20_000));
        // An ICMP port unreachable also wakes the socket: asked again (iperf 2.1.8's UDP server
        // has no socket on its port for a moment after it takes a test, so one of -P's requests
        // can meet that).
        if landspeed_engine::os::wait_readable(sock, wait).unwrap_or(false) && !refused(sock) {
            break;
        }
    }
    t.elapsed()
}

/// Whether the socket's waiting error is an ICMP port unreachable (taken, so the socket reads on).
fn refused(sock: &UdpSocket) -> bool {
    matches!(sock.take_error(), Ok(Some(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// What one stream received.
pub(super) struct Got {
    pub(super) id: u32,
    pub(super) receipt: Receipt,
    /// How long its request took to be answered.
    asked: Duration,
    error: Option<std::io::Error>,
}

impl Got {
    pub(super) fn failed(id: u32) -> Got {
        Got {
            id,
            receipt: Receipt::default(),
            asked: Duration::ZERO,
            error: Some(std::io::Error::other("its thread ended abnormally")),
        }
    }
}

/// A datagram another socket read for this stream (a listener, before the stream's own socket was
/// connected), and its kernel stamp (Unix ns).
pub(super) type Early = (Vec<u8>, Option<u64>);

/// Counts one stream's datagrams until the server's end, the test's time and [`GRACE`], a silence
/// of [`SILENCE`], or Ctrl-C; its sample of every interval that closes, to `tx`. A port unreachable
/// before anything came is answered with `ask` again (none when empty: the stream's own datagrams
/// ask, with `--full-duplex`). Datagrams `passed` brings (read for it elsewhere) count before
/// each read of its own.
pub(super) fn receive(
    sock: &UdpSocket,
    (id, spec, tx): (u32, &Test, std::sync::mpsc::Sender<(u32, StreamSample)>),
    (t0, interrupt): (Instant, &AtomicBool),
    (ask, asked, passed): (&[u8], Duration, Option<&Receiver<Early>>),
) -> Got {
    let mut got = Got {
        id,
        receipt: Receipt::default(),
        asked,
        error: None,
    };
    let until = match spec.end {
        EndCondition::Time(t) => Some(t + spec.omit_s + GRACE),
        _ => None,
    };
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 65_536];
    let mut heard = Instant::now();
    let step = spec.interval_s.as_secs_f64();
    let mut closed = 0u32;
    loop {
        while step > 0.0 && t0.elapsed().as_secs_f64() >= f64::from(closed + 1) * step {
            let _ = tx.send((closed, sample(got.id, &mut got.receipt, None)));
            closed += 1;
        }
        if interrupt.load(Relaxed) || until.is_some_and(|u| t0.elapsed() >= u) {
            return got;
        }
        // The end counts once; an interval it cuts past its half is closed with it, as iperf 2
        // prints the one its end arrives in (the two clocks start apart).
        let counted = |b: &[u8], stamp: Option<u64>, got: &mut Got| {
            let Ok(d) = Datagram::parse(b, true) else {
                return false;
            };
            got.receipt.datagram(&d, b.len(), arrival_s(stamp));
            if d.is_fin() && step > 0.0 && t0.elapsed().as_secs_f64() >= (f64::from(closed) + 0.5) * step {
                let _ = tx.send((closed, sample(got.id, &mut got.receipt, None)));
            }
            d.is_fin()
        };
        for (b, stamp) in passed.into_iter().flat_map(Receiver::try_iter) {
            heard = Instant::now();
            if counted(&b, stamp, &mut got) {
                return got;
            }
        }
        match landspeed_path::stamp::recv(sock, &mut buf) {
            Ok((n, _, stamp)) => {
                heard = Instant::now();
                if counted(&buf[..n], stamp, &mut got) {
                    return got;
                }
            }
            // Refused before anything came: asked again (see `send_request`), until the silence.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && got.receipt.received == 0 => {
                if heard.elapsed() >= SILENCE {
                    got.error = Some(e);
                    return got;
                }
                if !ask.is_empty() {
                    let _ = sock.send(ask);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                got.error = Some(e);
                return got;
            }
            Err(_) if heard.elapsed() >= SILENCE => return got,
            Err(_) => {}
        }
    }
}

/// A stream's counts now (`r`, stream `id`): bytes, and datagrams expected (the highest number)
/// and received, and the jitter so far; the transit and pace since the sample before (`r`'s
/// interval is then counted afresh).
pub(super) fn sample(
    id: u32,
    r: &mut Receipt,
    frames: Option<landspeed_core::frames::FramesHeard>,
) -> StreamSample {
    let interval = r.take_interval();
    StreamSample {
        id,
        bytes: r.bytes,
        tcp: None,
        udp: Some(landspeed_core::endpoint::UdpCounts {
            expected: r.highest,
            received: r.received,
            jitter_ms: Some(r.jitter_s * 1000.0),
            transit: (interval.datagrams > 0).then(|| super::udp::transit(&interval)),
            frames,
        }),
        reads: None,
        trips: None,
        trip_bins: r.take_bins(),
    }
}

/// This end's report (the streams received) and the server's, inferred: each stream sent at least
/// the highest number that came, in datagrams of the test's length.
fn reports(
    got: &[Got],
    spec: &Test,
    elapsed_s: f64,
    warnings: Vec<String>,
) -> (EndpointReport, EndpointReport) {
    let here = EndpointReport {
        software: format!(
            "landspeed {} (iperf 2's protocol)",
            landspeed_core::SOFTWARE_VERSION
        ),
        streams: got
            .iter()
            .map(|g| StreamReport {
                id: g.id,
                error: (g.receipt.received == 0).then(|| nothing_came(g).to_string()),
                ..received_stream(&g.receipt, Flow::ServerToClient)
            })
            .collect(),
        elapsed_s,
        threads: got.len() as u32,
        host: landspeed_engine::host::host_info(),
        warnings,
        ..EndpointReport::default()
    };
    let server = EndpointReport {
        software: "iperf 2 server".into(),
        streams: got
            .iter()
            .map(|g| StreamReport {
                bytes: g.receipt.highest * spec.length_bytes,
                calls: g.receipt.highest,
                ..StreamReport::empty(g.id, Flow::ServerToClient, Role::Sender)
            })
            .collect(),
        elapsed_s,
        ..EndpointReport::default()
    };
    (here, server)
}
