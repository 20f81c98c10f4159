//! `landspeed run --iperf2 -u --bidir`: iperf 2's UDP `--full-duplex` against `iperf -s -u` or
//! `landspeed serve --iperf2-udp-send`. Each `-P` stream is one socket both ways, as iperf 2.1.8's
//! is (captured, docs/iperf2.md): this end's datagrams (iperf 2's prefix, then the client's header
//! with `FULLDUPLEX`) paced by the engine, the server's datagrams on the same socket counted by a
//! thread of its own as iperf 2 counts them (`Receipt`, sampled each interval), until the server's
//! end, the test's time and a grace, or a silence. At the end one end datagram, and no report
//! either way (iperf 2's "no-udp-fin"): the server's side of the result is inferred (it received
//! what this end sent; it sent at least the highest number that came).

use super::heard::Heard;
use super::udp::received_stream;
use super::udp_client::unix_ns;
use super::udp_receive::{receive, Got};
use crate::dial::{resolve, ClientError, ClientEvent, ClientOptions};
use crate::streams::DataPaths;
use landspeed_core::config::{Direction, Flow, Test};
use landspeed_core::endpoint::{EndpointReport, IntervalSample, Role, StreamReport, StreamSample};
use landspeed_core::result::RunResult;
use landspeed_engine::supervisor::{EngineHook, EngineOutput, Flags, Wake};
use landspeed_engine::transport::udp::{iperf2_prefix, UdpFormat, IPERF2_HEADER_BYTES};
use landspeed_iperf2::header::{flags, upper};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Runs one UDP `--full-duplex` test: `spec` is `Bidir`, its streams `0..n` this end's, `n..2n` the
/// server's on the same sockets.
pub(super) fn run_both(
    opts: &ClientOptions,
    spec: &Test,
    interrupt: &AtomicBool,
    on_event: &mut dyn FnMut(ClientEvent),
) -> Result<RunResult, ClientError> {
    let sending = spec
        .changed(|s| s.direction = Direction::Forward)
        .map_err(|e| ClientError::NotWithIperf2 { what: e.to_string() })?;
    let header = header(spec, opts.port)?;
    let started_unix_s = unix_ns() as f64 / 1e9;
    let addr = resolve(opts)?;
    let streams = super::udp_client::open(opts, addr, &sending)?;
    let readers = streams
        .iter()
        .map(|s| {
            let r = s.socket.try_clone()?;
            let _ = landspeed_path::stamp::enable(&r);
            Ok(r)
        })
        .collect::<std::io::Result<Vec<UdpSocket>>>()
        .map_err(|err| ClientError::Stream { id: 0, err })?;
    let locals = super::udp_client::locals(readers.iter())?;
    let local = locals[0];
    let warnings = super::client::started_udp(on_event, (&locals, super::client::udp_facts(readers.iter())), (addr, spec.total_streams()), Some("iperf 2's UDP --full-duplex sends no report back: the server's side is inferred (it received what this end sent; it sent at least the highest number that came); what this end received is counted as iperf 2's client counts it (docs/iperf2.md)"));
    let data = DataPaths::Udp(streams);
    let run = Run {
        opts,
        spec,
        sending: &sending,
        header,
        interrupt,
    };
    let (out, got, received) = run.both(&data, &readers, local, on_event);
    let (here, server) = reports(&out, &got, (spec, opts), warnings);
    let ends = super::client::Ends::at_end((local, addr), started_unix_s, interrupt);
    let samples = super::heard::merged(&out.samples, &received, spec);
    Ok(super::client::assembled(
        opts,
        spec,
        &ends,
        (&here, &server),
        &samples,
    ))
}

/// One test's parts the two directions share.
struct Run<'a> {
    opts: &'a ClientOptions,
    spec: &'a Test,
    /// The spec of this end's half alone (`Forward`), which the engine runs.
    sending: &'a Test,
    header: [u8; IPERF2_HEADER_BYTES],
    interrupt: &'a AtomicBool,
}

impl Run<'_> {
    /// This end's datagrams and their ends (the engine, on this thread) while each socket's reader
    /// counts the server's (a thread each): the engine's output, each reader's receipt, and the
    /// readers' interval samples (each shown as it comes, beside the engine's).
    fn both(
        &self,
        data: &DataPaths,
        readers: &[UdpSocket],
        local: std::net::SocketAddr,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> (EngineOutput, Vec<Got>, Vec<(u32, StreamSample)>) {
        let n = self.spec.streams;
        let (tx, rx) = std::sync::mpsc::channel::<(u32, StreamSample)>();
        let t0 = Instant::now();
        let mut hook = Shown {
            spec: self.spec,
            interrupt: self.interrupt,
            on_event,
            live: crate::dial::LiveIntervals::default(),
            heard: Heard::new(self.spec, rx),
            shown: None,
        };
        let (out, got) = std::thread::scope(|sc| {
            let threads: Vec<_> = readers
                .iter()
                .zip(0u32..)
                .map(|(sock, k)| {
                    let tx = tx.clone();
                    let (spec, interrupt) = (self.spec, self.interrupt);
                    sc.spawn(move || {
                        receive(
                            sock,
                            (n + k, spec, tx),
                            (t0, interrupt),
                            (&[], Duration::ZERO, None),
                        )
                    })
                })
                .collect();
            drop(tx);
            let out = self.measure(data, local, &mut hook);
            self.end_each(data, &out);
            let got: Vec<Got> = threads
                .into_iter()
                .zip(0u32..)
                .map(|(t, k)| t.join().unwrap_or_else(|_| Got::failed(n + k)))
                .collect();
            (out, got)
        });
        hook.heard.show(None, hook.on_event);
        (out, got, hook.heard.received)
    }

    fn measure(&self, data: &DataPaths, local: std::net::SocketAddr, hook: &mut Shown) -> EngineOutput {
        let format = UdpFormat::Iperf2 {
            header: self.header,
            start: None,
        };
        let (tx, rx) = std::sync::mpsc::channel::<Wake<()>>();
        crate::dial::measure(self.opts, self.sending, (data, format), local, (&tx, &rx), hook)
    }

    /// Each stream's end: one datagram numbered with the next number negated (no report follows).
    fn end_each(&self, data: &DataPaths, out: &EngineOutput) {
        let DataPaths::Udp(streams) = data else {
            return;
        };
        let length = (self.spec.length_bytes as usize).max(16 + IPERF2_HEADER_BYTES);
        for (s, r) in streams.iter().zip(&out.streams) {
            let mut fin = vec![0u8; length];
            let prefix = landspeed_iperf2::udp::PREFIX_BYTES;
            fin[prefix..prefix + IPERF2_HEADER_BYTES].copy_from_slice(&self.header);
            iperf2_prefix(-((r.calls + r.send_errors) as i64 + 1), unix_ns(), &mut fin);
            let _ = s.socket.send(&fin);
        }
    }
}

/// The engine's hook: each interval of the streams sent shown as it closes, with the readers'
/// samples of the streams received as they come (an interval of theirs once the engine's of the same
/// number is shown, the rest when the test ends); Ctrl-C stops the sending.
struct Shown<'a> {
    /// The whole test (`Bidir`): which flow each stream is.
    spec: &'a Test,
    interrupt: &'a AtomicBool,
    on_event: &'a mut dyn FnMut(ClientEvent),
    live: crate::dial::LiveIntervals,
    heard: Heard<'a>,
    /// The engine's last interval shown.
    shown: Option<u32>,
}

impl EngineHook<()> for Shown<'_> {
    fn on_sample(&mut self, sample: &IntervalSample) {
        self.live.each_flow(self.spec, sample, self.on_event);
        self.shown = Some(sample.index);
        self.heard.show(self.shown, self.on_event);
    }

    fn on_external(&mut self, _: (), _: &Flags) {}

    fn on_tick(&mut self, flags: &Flags) {
        if self.shown.is_some() {
            self.heard.show(self.shown, self.on_event);
        }
        if self.interrupt.load(Relaxed) {
            flags.stop.store(true, Relaxed);
        }
    }
}

/// The header every datagram this end sends carries: the UDP client's, with `FULLDUPLEX` and
/// `NOUDPFIN` (no report is owed at the end), as iperf 2.1.8's client sends it.
fn header(spec: &Test, port: u16) -> Result<[u8; IPERF2_HEADER_BYTES], ClientError> {
    let mut h = super::udp_client::client_header(spec, port)?;
    h.flags |= flags::UDPTESTS | flags::VERSION2 | flags::EXTEND;
    if let Some(e) = h.extension.as_mut() {
        e.upper |= upper::FULLDUPLEX | upper::NOUDPFIN;
    }
    let bytes = h.encode();
    let mut out = [0u8; IPERF2_HEADER_BYTES];
    out.copy_from_slice(&bytes[..IPERF2_HEADER_BYTES]);
    Ok(out)
}

/// This end's report (its streams sent, each end counted as a datagram as iperf 2 counts it, then
/// those received) and the server's, inferred.
fn reports(
    out: &EngineOutput,
    got: &[Got],
    (spec, opts): (&Test, &ClientOptions),
    warnings: Vec<String>,
) -> (EndpointReport, EndpointReport) {
    let mut here = out.report(opts.cpus.clone(), warnings);
    for s in &mut here.streams {
        s.bytes += spec.length_bytes;
        s.calls += 1;
    }
    let mut server: Vec<StreamReport> = here.streams.iter().map(crate::dial::inferred).collect();
    for g in got {
        here.streams.push(StreamReport {
            id: g.id,
            error: (g.receipt.received == 0).then(|| "nothing came from the server on this stream".into()),
            ..received_stream(&g.receipt, Flow::ServerToClient)
        });
        server.push(StreamReport {
            bytes: g.receipt.highest * spec.length_bytes,
            calls: g.receipt.highest,
            ..StreamReport::empty(g.id, Flow::ServerToClient, Role::Sender)
        });
    }
    let server = EndpointReport {
        software: "iperf 2 server".into(),
        streams: server,
        elapsed_s: here.elapsed_s,
        ..EndpointReport::default()
    };
    (here, server)
}
