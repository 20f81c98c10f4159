//! The server's record of an iperf 2 bounceback test it answered. iperf 2.1.8's server prints such a
//! test like any other: its connection line with what the client asked (`(bb w/quickack
//! len/hold=100/0)`), each of its own `-i` intervals and the total, counting the requests it read
//! and the answers it wrote alike; scripts read those lines, and an archive keeps the test. Here the
//! bytes each way are tallied against the test's clock (`Tally`, sans-IO: the caller hands in the
//! time), sampled at the server's interval, and assembled into a result: one connection carrying
//! requests (stream 0, client to server) and answers (stream 1, back), the client's side inferred
//! (iperf 2 sends the server no figures), what the header asked kept in `config.bounceback`.

use crate::host::{Live, Made};
use landspeed_core::assemble::RunContext;
use landspeed_core::config::{Direction, Flow, TestSpec, TransactionSpec, Transport};
use landspeed_core::endpoint::{
    ConnectFacts, EndpointReport, IntervalSample, Role, StreamReport, StreamSample,
};
use landspeed_core::result::RunResult;
use landspeed_core::transactions::BounceAsked;
use landspeed_iperf2::bounceback::{bbflags, Bounce};
use std::time::{Duration, SystemTime};

/// Bytes read (requests) and written (answers) so far, and the samples taken of them: one at
/// every whole interval of the test's clock, and the last at its end.
#[derive(Debug)]
pub(super) struct Tally {
    every_s: f64,
    read: u64,
    written: u64,
    pub(super) samples: Vec<IntervalSample>,
}

impl Tally {
    /// A tally sampled every `every` of the test's clock.
    pub(super) fn new(every: Duration) -> Tally {
        Tally {
            every_s: every.as_secs_f64().max(1e-3),
            read: 0,
            written: 0,
            samples: vec![],
        }
    }

    /// Closes every interval that ended by `at_s` with the counts so far (nothing has been counted
    /// after its end); true when one closed.
    pub(super) fn close_until(&mut self, at_s: f64) -> bool {
        let before = self.samples.len();
        while self.next_end_s() <= at_s {
            let end_s = self.next_end_s();
            self.sample(end_s);
        }
        self.samples.len() > before
    }

    /// `n` bytes of requests read at `at_s` (the intervals ended before it closed first).
    pub(super) fn read(&mut self, at_s: f64, n: usize) -> bool {
        let closed = self.close_until(at_s);
        self.read += n as u64;
        closed
    }

    /// `n` bytes of an answer written at `at_s`.
    pub(super) fn wrote(&mut self, at_s: f64, n: usize) -> bool {
        let closed = self.close_until(at_s);
        self.written += n as u64;
        closed
    }

    /// The test ended at `at_s`: its intervals closed and the part one after them sampled.
    pub(super) fn end(&mut self, at_s: f64) {
        self.close_until(at_s);
        if self.last_end_s() < at_s {
            self.sample(at_s);
        }
    }

    /// Requests' bytes and answers' so far.
    pub(super) fn bytes(&self) -> (u64, u64) {
        (self.read, self.written)
    }

    fn last_end_s(&self) -> f64 {
        self.samples.last().map_or(0.0, |s| s.end_s)
    }

    fn next_end_s(&self) -> f64 {
        (self.samples.len() + 1) as f64 * self.every_s
    }

    fn sample(&mut self, end_s: f64) {
        self.samples.push(IntervalSample {
            index: self.samples.len() as u32,
            start_s: self.last_end_s(),
            end_s,
            omitted: false,
            streams: vec![
                StreamSample::of_bytes(0, self.read),
                StreamSample::of_bytes(1, self.written),
            ],
        });
    }
}

/// What the first request's header asked, as the result keeps it.
pub(super) fn asked(first: &Bounce) -> BounceAsked {
    BounceAsked {
        request_bytes: first.size,
        hold_us: first.hold_us,
        quickack: first.has(bbflags::QUICKACK),
    }
}

/// The test as the server describes it: one TCP connection both ways, requests and answers of the
/// header's size one at a time, with its type of service and trip times when it asked for them.
pub(super) fn spec(first: &Bounce, every: Duration) -> TestSpec {
    let size = first.size;
    TestSpec {
        transport: Transport::Tcp,
        streams: 1,
        direction: Direction::Bidir,
        length_bytes: u64::from(size),
        interval_s: every,
        nodelay: true,
        tos: first.has(bbflags::TOS).then_some(first.tos as u8),
        trip_times: first.has(bbflags::CLOCK_SYNCED),
        transactions: Some(TransactionSpec {
            request_bytes: size,
            response_bytes: size,
            in_flight: 1,
            connect_each: false,
        }),
        ..TestSpec::default()
    }
}

/// How the connection was made and what its header asked, put into each view of the test.
pub(super) fn made(client_port: Option<u16>, facts: ConnectFacts, first: &Bounce) -> Made {
    Made {
        connections: vec![(client_port, facts)],
        client_software: "iperf 2 bounceback client".into(),
        no_end_report: false,
        bounceback: Some(asked(first)),
    }
}

/// The live view of the test (`ServerOptions::live`): its samples so far.
pub(super) fn live(spec: &TestSpec, context: &RunContext, client_port: Option<u16>, made: &Made) -> Live {
    Live {
        spec: spec.clone(),
        context: context.clone(),
        client_ports: vec![client_port; 2],
        samples: vec![],
        frames: false,
        made: made.clone(),
    }
}

/// The context of the server's view: its end and the client's, when it started.
pub(super) fn context(socket: &std::net::TcpStream, started: SystemTime) -> RunContext {
    let addresses = (socket.local_addr().ok(), socket.peer_addr().ok());
    RunContext {
        protocol: "iperf2 bounceback".into(),
        ..super::server::iperf2_context(addresses, started, 1)
    }
}

/// The test's result at its end (`elapsed_s` after it started): this server's streams (requests
/// received, answers sent) and the client's inferred from them, the samples, how it was made.
pub(super) fn result(
    (spec, context): (&TestSpec, RunContext),
    (tally, elapsed_s): (&Tally, f64),
    client_port: Option<u16>,
    (made, error): (&Made, Option<String>),
) -> RunResult {
    let (read, written) = tally.bytes();
    let stream = |id, flow, role, bytes| StreamReport {
        bytes,
        first_byte_s: Some(0.0),
        last_byte_s: Some(elapsed_s),
        peer_port: client_port,
        error: error.clone(),
        ..StreamReport::empty(id, flow, role)
    };
    let server = EndpointReport {
        software: format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
        streams: vec![
            stream(0, Flow::ClientToServer, Role::Receiver, read),
            stream(1, Flow::ServerToClient, Role::Sender, written),
        ],
        elapsed_s,
        threads: 1,
        error: error.clone(),
        ..EndpointReport::default()
    };
    let client = EndpointReport {
        software: made.client_software.clone(),
        streams: server.streams.iter().map(crate::dial::inferred).collect(),
        elapsed_s,
        ..EndpointReport::default()
    };
    let mut r = landspeed_core::assemble::assemble(&landspeed_core::assemble::Inputs {
        spec,
        context,
        client: &client,
        server: &server,
        client_samples: &[],
        server_samples: &tally.samples,
    });
    r.warnings.push("iperf 2's bounceback carries no figures to the server: the client's side is inferred from this server's, and the latencies are the client's to measure".into());
    r.warnings
        .push("iperf 2's payload is not landspeed's: nothing was verified".into());
    r.payload.pattern = "iperf 2 bounceback: the client's requests, echoed unchecked".into();
    r.payload.unverified_because =
        Some("iperf 2's payload is not landspeed's: its server echoes each request as it came".into());
    // What held a few kbit/s of requests back is the client's pacing and the latency, not a
    // bulk limit (as on the client's side).
    for d in &mut r.directions {
        d.limits.clear();
    }
    made.put_into(&mut r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_in(t: &Tally) -> Vec<(f64, f64, u64, u64)> {
        let mut prev = (0, 0);
        t.samples
            .iter()
            .map(|s| {
                let (r, w) = (s.streams[0].bytes, s.streams[1].bytes);
                let out = (s.start_s, s.end_s, r - prev.0, w - prev.1);
                prev = (r, w);
                out
            })
            .collect()
    }

    #[test]
    fn bytes_fall_in_the_interval_they_were_counted_in() {
        let mut t = Tally::new(Duration::from_millis(500));
        assert!(!t.read(0.0, 64));
        assert!(!t.read(0.001, 36));
        assert!(!t.wrote(0.002, 100));
        // A quiet second: two intervals close while waiting, one with nothing in it.
        assert!(t.close_until(1.2));
        assert!(!t.close_until(1.3));
        assert!(!t.read(1.4, 100));
        assert!(t.wrote(1.6, 100));
        t.end(1.75);
        assert_eq!(
            bytes_in(&t),
            vec![
                (0.0, 0.5, 100, 100),
                (0.5, 1.0, 0, 0),
                (1.0, 1.5, 100, 0),
                (1.5, 1.75, 0, 100)
            ]
        );
        assert_eq!(t.bytes(), (200, 200));
        let idx: Vec<u32> = t.samples.iter().map(|s| s.index).collect();
        assert_eq!(idx, vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_test_ending_on_an_interval_has_no_empty_last_part() {
        let mut t = Tally::new(Duration::from_secs(1));
        t.read(0.1, 10);
        t.end(2.0);
        assert_eq!(bytes_in(&t), vec![(0.0, 1.0, 10, 0), (1.0, 2.0, 0, 0)]);
    }

    #[test]
    fn the_header_asks_the_size_hold_quickack_tos_and_trip_times() {
        let flags = bbflags::QUICKACK | bbflags::TOS;
        let mut b = Bounce::request(
            200,
            1,
            flags,
            landspeed_iperf2::ack::WireTime::from_unix_ns(0),
            2000,
        );
        b.tos = 0x10;
        assert_eq!(
            asked(&b),
            BounceAsked {
                request_bytes: 200,
                hold_us: 2000,
                quickack: true
            }
        );
        let s = spec(&b, Duration::from_secs(1));
        assert_eq!((s.tos, s.trip_times, s.length_bytes), (Some(0x10), false, 200));
        assert_eq!(s.total_streams(), 2);
        let plain = Bounce::request(100, 1, bbflags::CLOCK_SYNCED, b.client_tx, 0);
        let s = spec(&plain, Duration::from_secs(1));
        assert_eq!((s.tos, s.trip_times), (None, true));
        assert!(!asked(&plain).quickack);
    }
}
