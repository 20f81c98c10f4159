//! `landspeed run --iperf2 -u -R`: the server sends an iperf 2 UDP test and this end receives it
//! (`iperf -s -u`, or `landspeed serve --iperf2-udp-send`). As iperf 2.1.8's client does (captured,
//! docs/iperf2.md), it sends its header in a datagram, again after a random wait under 20 ms until
//! the first datagram comes back (at most 100 times), then counts the server's datagrams as iperf
//! 2 counts them (`Receipt`: lost, out of order, jitter) until the server's end (a negative
//! number), the test's time and a grace, or a silence. iperf 2's server expects no report back for
//! these tests. Its side of the result is inferred: it sent at least the highest number that came.

use super::udp::{arrival_s, received_stream};
use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions, LiveIntervals};
use landspeed_core::config::{EndCondition, Flow, Test};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport, StreamSample};
use landspeed_core::result::RunResult;
use landspeed_iperf2::header::{flags, upper};
use landspeed_iperf2::udp::Datagram;
use landspeed_iperf2::Receipt;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

/// The header's datagram is sent at most this many times (iperf 2.1.8's count).
const ASKS: u32 = 100;
/// How long the server may stay silent: before its first datagram, and between two.
const SILENCE: Duration = Duration::from_secs(5);
/// Beyond the test's time, how long its end may take to come.
const GRACE: Duration = Duration::from_secs(3);

/// Runs one UDP test the server sends.
pub(super) fn run_reverse(
    opts: &ClientOptions,
    spec: &Test,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    if spec.streams != 1 {
        return Err(ClientError::NotWithIperf2 {
            what: "UDP -R with -P from landspeed's client yet (one stream)".into(),
        });
    }
    let ask = request(spec, opts.port)?;
    let started_unix_s = unix_ns() as f64 / 1e9;
    let addr = resolve(opts)?;
    let sock =
        crate::dial::udp_socket(opts, addr, spec, 0).map_err(|err| ClientError::Stream { id: 0, err })?;
    let local = sock
        .local_addr()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    let _ = landspeed_path::stamp::enable(&sock);
    on_event(ClientEvent::Connected { local, remote: addr });
    let warnings = vec![
        "iperf 2's payload is not landspeed's: nothing was verified".to_string(),
        "loss, out of order and jitter are counted as iperf 2's client counts them (docs/iperf2.md); the server's side is inferred from the highest number that came".to_string(),
    ];
    on_event(ClientEvent::Started {
        streams: 1,
        warnings: warnings.clone(),
    });
    let t0 = Instant::now();
    let answered = send_request(&sock, &ask, interrupt);
    let got = receive(&sock, spec, (t0, interrupt), on_event);
    if got.receipt.received == 0 && !interrupt.load(Relaxed) {
        return Err(got.error.unwrap_or(ClientError::NothingSent {
            after: answered.max(SILENCE),
        }));
    }
    let (here, server) = reports(&got, spec, t0.elapsed().as_secs_f64(), warnings);
    let ends = super::client::Ends {
        addresses: (local, addr),
        started_unix_s,
        interrupted: interrupt.load(Relaxed),
    };
    Ok(super::client::assembled(
        opts,
        spec,
        &ends,
        (&here, &server),
        &got.samples,
    ))
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
        if landspeed_engine::os::wait_readable(sock, wait).unwrap_or(false) {
            break;
        }
    }
    t.elapsed()
}

/// What this end received.
struct Got {
    receipt: Receipt,
    samples: Vec<IntervalSample>,
    error: Option<ClientError>,
}

/// Counts the server's datagrams until its end, the test's time and [`GRACE`], a silence of
/// [`SILENCE`], or Ctrl-C; an interval sample at every interval's end.
fn receive(
    sock: &UdpSocket,
    spec: &Test,
    (t0, interrupt): (Instant, &AtomicBool),
    on_event: &mut dyn FnMut(ClientEvent),
) -> Got {
    let mut got = Got {
        receipt: Receipt::default(),
        samples: vec![],
        error: None,
    };
    let until = match spec.end {
        EndCondition::Time(t) => Some(t + spec.omit_s + GRACE),
        _ => None,
    };
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 65_536];
    let mut live = LiveIntervals::default();
    let mut heard = Instant::now();
    loop {
        sample(&mut got, spec, t0.elapsed().as_secs_f64(), (&mut live, on_event));
        if interrupt.load(Relaxed) || until.is_some_and(|u| t0.elapsed() >= u) {
            return got;
        }
        match landspeed_path::stamp::recv(sock, &mut buf) {
            Ok((n, _, stamp)) => {
                heard = Instant::now();
                if let Ok(d) = Datagram::parse(&buf[..n], true) {
                    got.receipt.datagram(&d, n, arrival_s(stamp));
                    if d.is_fin() {
                        return got;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                got.error = Some(ClientError::Stream { id: 0, err: e });
                return got;
            }
            Err(_) if heard.elapsed() >= SILENCE => return got,
            Err(_) => {}
        }
    }
}

/// Closes every interval that has ended by `now_s`, with the bytes and datagrams counted so far.
fn sample(
    got: &mut Got,
    spec: &Test,
    now_s: f64,
    (live, on_event): (&mut LiveIntervals, &mut dyn FnMut(ClientEvent)),
) {
    let step = spec.interval_s.as_secs_f64();
    if step <= 0.0 {
        return;
    }
    while now_s >= (got.samples.len() + 1) as f64 * step {
        let index = got.samples.len() as u32;
        let r = &got.receipt;
        let s = IntervalSample {
            index,
            start_s: f64::from(index) * step,
            end_s: f64::from(index + 1) * step,
            omitted: false,
            streams: vec![StreamSample {
                id: 0,
                bytes: r.bytes,
                tcp: None,
                udp: Some(landspeed_core::endpoint::UdpCounts {
                    expected: r.highest,
                    received: r.received,
                }),
            }],
        };
        live.each_flow(spec, &s, on_event);
        got.samples.push(s);
    }
}

/// This end's report (the stream received) and the server's, inferred: it sent at least the
/// highest number that came, in datagrams of the test's length.
fn reports(
    got: &Got,
    spec: &Test,
    elapsed_s: f64,
    warnings: Vec<String>,
) -> (EndpointReport, EndpointReport) {
    let here = EndpointReport {
        software: format!(
            "landspeed {} (iperf 2's protocol)",
            landspeed_core::SOFTWARE_VERSION
        ),
        streams: vec![received_stream(&got.receipt, Flow::ServerToClient)],
        elapsed_s,
        threads: 1,
        host: landspeed_engine::host::host_info(),
        warnings,
        ..EndpointReport::default()
    };
    let server = EndpointReport {
        software: "iperf 2 server".into(),
        streams: vec![StreamReport {
            bytes: got.receipt.highest * spec.length_bytes,
            calls: got.receipt.highest,
            ..StreamReport::empty(0, Flow::ServerToClient, Role::Sender)
        }],
        elapsed_s,
        ..EndpointReport::default()
    };
    (here, server)
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
