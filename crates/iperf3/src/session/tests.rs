//! The iperf3 sessions against each other and against bytes written by hand, with no socket and a
//! virtual clock: the whole conversation in any chunking, forward, reverse, bidirectional and UDP;
//! TEST_START and TEST_RUNNING back to back; refusals with iperf3's numbers; a timeout at every wait
//! and the peer vanishing at every step.

use super::*;
use crate::params::Params;
use crate::results::Results;
use crate::wire::{errno, frame_json, server_error, Cookie, State};
use landspeed_core::config::{Direction, EndCondition, TestSpec, Transport};
use landspeed_proto::{Conversation, Limits};
use std::time::{Duration, Instant};

const T: Iperf3Timers = Iperf3Timers {
    handshake: Duration::from_secs(10),
    results: Duration::from_secs(40),
    idle: Duration::from_secs(30),
};

fn cookie() -> Cookie {
    Cookie::from_random([7; 36])
}

fn params_for(spec: &TestSpec) -> serde_json::Value {
    Params::message_for(spec, "test")
}

fn client(spec: &TestSpec, now: Instant) -> ClientSession {
    ClientSession::new(&cookie(), &params_for(spec), T, now)
}

/// A server whose cookie has been read (the driver reads it to find the test).
fn server(limits: Limits, now: Instant) -> ServerSession {
    ServerSession::new(limits, 42, T, now)
}

/// Moves what `from` has to send into `to`, `chunk` bytes at a time (the cookie goes to the driver,
/// not to the server session).
fn carry<A: Conversation, B: Conversation>(
    from: &mut A,
    to: &mut B,
    chunk: usize,
    now: Instant,
) -> Result<(), B::Error> {
    while let Some(bytes) = from.poll_transmit() {
        for c in bytes.chunks(chunk) {
            to.handle_input(c, now)?;
        }
    }
    Ok(())
}

fn actions<E: Conversation>(e: &mut E) -> Vec<E::Action> {
    std::iter::from_fn(|| e.poll_action()).collect()
}

/// A connected pair: the client's cookie taken off its output as a server driver would.
fn pair(spec: &TestSpec, limits: Limits, now: Instant) -> (ClientSession, ServerSession) {
    let mut c = client(spec, now);
    let wire = c.poll_transmit().unwrap();
    assert_eq!(Cookie::parse(&wire[..37]), Some(cookie()));
    (c, server(limits, now))
}

fn results_json(bytes: u64) -> serde_json::Value {
    let r = Results {
        streams: vec![crate::results::StreamResult {
            id: 1,
            bytes,
            end_time_s: 1.0,
            ..Default::default()
        }],
        ..Default::default()
    };
    r.to_json()
}

/// The whole conversation, in `chunk`-byte pieces, as both drivers would run it.
fn whole_test(spec: &TestSpec, chunk: usize) {
    let now = Instant::now();
    let (mut c, mut s) = pair(spec, Limits::default(), now);
    carry(&mut s, &mut c, chunk, now).unwrap();
    assert_eq!(actions(&mut c), vec![ClientAction::Greeted]);
    carry(&mut c, &mut s, chunk, now).unwrap();
    let Some(ServerAction::Accepted { test, .. }) = s.poll_action() else {
        panic!("not accepted")
    };
    assert_eq!((test.direction, test.transport), (spec.direction, spec.transport));
    // A landspeed client's key is taken: the server checks with the client's key, not its own (42).
    assert_eq!(test.verify, spec.verify);
    assert_eq!(test.payload_key, if spec.verify { spec.payload_key } else { 42 });
    s.create_streams(now).unwrap();
    carry(&mut s, &mut c, chunk, now).unwrap();
    assert_eq!(actions(&mut c), vec![ClientAction::OpenStreams]);
    assert_eq!(c.payload_agreed(), spec.verify);
    c.streams_open(now).unwrap();
    for _ in 0..test.total_streams() {
        s.on_stream(now).unwrap();
    }
    assert_eq!(actions(&mut s), vec![ServerAction::Run]);
    // TEST_START and TEST_RUNNING travel back to back, possibly in one read.
    carry(&mut s, &mut c, chunk, now).unwrap();
    assert_eq!(actions(&mut c), vec![ClientAction::Run]);
    c.end(now);
    c.end(now);
    carry(&mut c, &mut s, chunk, now).unwrap();
    assert_eq!(actions(&mut s), vec![ServerAction::End]);
    s.exchange(&results_json(200), now).unwrap();
    carry(&mut s, &mut c, chunk, now).unwrap();
    c.results(&results_json(100)).unwrap();
    carry(&mut c, &mut s, chunk, now).unwrap();
    let Some(ServerAction::PeerResults(theirs)) = s.poll_action() else {
        panic!("no results")
    };
    assert_eq!(theirs.streams[0].bytes, 100);
    carry(&mut s, &mut c, chunk, now).unwrap();
    let Some(ClientAction::Done(theirs)) = c.poll_action() else {
        panic!("not done")
    };
    assert_eq!(theirs.streams[0].bytes, 200);
    carry(&mut c, &mut s, chunk, now).unwrap();
    assert_eq!(actions(&mut s), vec![ServerAction::Done]);
    assert_eq!(
        (c.phase(), s.phase()),
        (ClientPhase::Finished, ServerPhase::Finished)
    );
    assert!(c.poll_transmit().is_none() && s.poll_transmit().is_none());
}

fn spec(direction: Direction, transport: Transport, streams: u32) -> TestSpec {
    TestSpec {
        direction,
        transport,
        streams,
        length_bytes: if transport == Transport::Udp {
            1400
        } else {
            128 * 1024
        },
        end: EndCondition::Bytes(10 << 20),
        ..TestSpec::default()
    }
}

#[test]
fn whole_tests_in_every_direction_transport_and_chunking() {
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        for transport in [Transport::Tcp, Transport::Udp] {
            for chunk in [1, 3, 4096] {
                for verify in [true, false] {
                    let mut sp = spec(direction, transport, 2);
                    sp.verify = verify;
                    sp.payload_key = 0x1234_5678_9abc_def0;
                    whole_test(&sp, chunk);
                }
            }
        }
    }
}

#[test]
fn results_asked_before_this_end_has_them_go_out_when_ready() {
    let now = Instant::now();
    let mut c = client(&TestSpec::default(), now);
    c.poll_transmit();
    let mut bytes = vec![State::ParamExchange.byte(), State::CreateStreams.byte()];
    c.handle_input(&bytes, now).unwrap();
    c.streams_open(now).unwrap();
    bytes = vec![State::TestStart.byte(), State::TestRunning.byte()];
    c.handle_input(&bytes, now).unwrap();
    c.poll_transmit();
    c.end(now);
    assert_eq!(c.poll_transmit(), Some(vec![State::TestEnd.byte()]));
    c.handle_input(&[State::ExchangeResults.byte()], now).unwrap();
    assert_eq!(c.phase(), ClientPhase::ExchangeAsked);
    assert_eq!(c.poll_transmit(), None);
    c.results(&results_json(5)).unwrap();
    assert_eq!(c.poll_transmit(), Some(frame_json(&results_json(5))));
    assert_eq!(c.phase(), ClientPhase::AwaitResults);
}

/// The client at each of its waits, with what the server has said so far.
fn client_at(step: usize, now: Instant) -> ClientSession {
    let mut c = client(&TestSpec::default(), now);
    let script: [&[u8]; 5] = [
        &[],
        &[State::ParamExchange.byte()],
        &[State::CreateStreams.byte()],
        &[State::TestStart.byte()],
        &[State::TestRunning.byte()],
    ];
    for (k, bytes) in script.iter().enumerate().take(step + 1) {
        c.handle_input(bytes, now).unwrap();
        if k == 2 {
            c.streams_open(now).unwrap();
        }
    }
    if step == 4 {
        c.end(now);
    }
    c
}

#[test]
fn a_client_times_out_at_every_wait_at_its_limit_and_not_before() {
    let now = Instant::now();
    let waits = [
        ("waiting for PARAM_EXCHANGE", T.handshake),
        ("waiting for CREATE_STREAMS", T.handshake),
        ("waiting for TEST_START", T.handshake),
        ("waiting for TEST_RUNNING", T.handshake),
        ("waiting for EXCHANGE_RESULTS", T.results),
    ];
    for (step, (phase, limit)) in waits.into_iter().enumerate() {
        let mut c = client_at(step, now);
        assert!(
            c.handle_timeout(now + limit - Duration::from_millis(1)).is_ok(),
            "{phase}"
        );
        match c.handle_timeout(now + limit) {
            Err(Iperf3Error::Wait(landspeed_proto::WaitFailed::Timeout { phase: p, after })) => {
                assert_eq!((p, after), (phase, limit))
            }
            other => panic!("{phase}: {other:?}"),
        }
        assert_eq!(c.phase(), ClientPhase::Failed);
        let mut c = client_at(step, now);
        match c.handle_closed(now) {
            Iperf3Error::Wait(landspeed_proto::WaitFailed::PeerClosed { phase: p }) => assert_eq!(p, phase),
            other => panic!("{phase}: {other:?}"),
        }
    }
    // While the data moves nothing is awaited with a time limit: the engine decides.
    let mut c = client_at(3, now);
    c.handle_input(&[State::TestRunning.byte()], now).unwrap();
    assert_eq!(c.time_left(now), None);
}

#[test]
fn a_client_learns_iperf3s_numbers_from_a_refusal_in_any_chunking() {
    let now = Instant::now();
    let mut m = vec![State::ParamExchange.byte()];
    m.extend(server_error(errno::NUM_STREAMS, 0));
    for chunk in [1, 2, 10] {
        let mut c = client(&TestSpec::default(), now);
        let mut got = None;
        for piece in m.chunks(chunk) {
            if let Err(e) = c.handle_input(piece, now) {
                got = Some(e);
                break;
            }
        }
        assert!(
            matches!(got, Some(Iperf3Error::ServerError { code: 6, errno: 0 })),
            "{got:?}"
        );
    }
    // A server that closes in the middle of SERVER_ERROR's numbers has still refused.
    let mut c = client(&TestSpec::default(), now);
    c.handle_input(&m[..4], now).unwrap();
    assert!(matches!(c.handle_closed(now), Iperf3Error::ServerError { .. }));
    let mut c = client(&TestSpec::default(), now);
    let e = c.handle_input(&[State::AccessDenied.byte()], now).unwrap_err();
    assert!(matches!(e, Iperf3Error::AccessDenied));
    let mut c = client(&TestSpec::default(), now);
    let e = c.handle_input(&[State::TestStart.byte()], now).unwrap_err();
    assert!(
        matches!(
            e,
            Iperf3Error::Unexpected {
                got: 1,
                expected: "waiting for PARAM_EXCHANGE"
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "the peer said TestStart, expected waiting for PARAM_EXCHANGE"
    );
}

/// The server after the client's parameters (`asked`), with its answer taken off.
fn server_given(
    asked: &serde_json::Value,
    limits: Limits,
    now: Instant,
) -> (ServerSession, Result<(), Iperf3Error>) {
    let mut s = server(limits, now);
    assert_eq!(s.poll_transmit(), Some(vec![State::ParamExchange.byte()]));
    let r = s.handle_input(&frame_json(asked), now);
    (s, r)
}

#[test]
fn a_server_refuses_bad_parameters_and_limits_with_iperf3s_numbers() {
    let now = Instant::now();
    let mut bad = params_for(&TestSpec::default());
    bad["parallel"] = serde_json::json!(0);
    bad["len"] = serde_json::json!(1u64 << 40);
    let (mut s, r) = server_given(&bad, Limits::default(), now);
    assert!(matches!(r, Err(Iperf3Error::Params(_))), "{r:?}");
    let answer = s.poll_transmit().unwrap();
    assert_eq!(answer[0], State::ServerError.byte());
    assert_eq!(s.phase(), ServerPhase::Failed);

    let many = params_for(&spec(Direction::Forward, Transport::Tcp, 8));
    let limits = Limits {
        max_streams: Some(4),
        ..Limits::default()
    };
    let (mut s, r) = server_given(&many, limits, now);
    assert!(matches!(r, Err(Iperf3Error::OverLimit(_))), "{r:?}");
    assert_eq!(
        s.poll_transmit(),
        Some(server_error(errno::NUM_STREAMS, 0).to_vec())
    );

    let mut s = server(Limits::default(), now);
    s.poll_transmit();
    let r = s.handle_input(&u32::MAX.to_be_bytes(), now);
    assert!(matches!(r, Err(Iperf3Error::TooLong { .. })), "{r:?}");
    assert_eq!(
        s.poll_transmit(),
        Some(server_error(errno::RECV_PARAMS, 0).to_vec())
    );
}

#[test]
fn a_total_rate_limit_refuses_what_asks_for_more_and_ends_what_moves_more() {
    let now = Instant::now();
    let mut asked = params_for(&spec(Direction::Bidir, Transport::Tcp, 2));
    // 2 streams both ways at 30 Mbit/s each: 120 Mbit/s in all, over a limit of 100.
    asked["bandwidth"] = serde_json::json!(30_000_000u64);
    let mut s = server(Limits::default(), now).with_total_rate(Some(100e6));
    s.poll_transmit();
    let r = s.handle_input(&frame_json(&asked), now);
    assert!(matches!(r, Err(Iperf3Error::TotalRate)), "{r:?}");
    assert_eq!(
        s.poll_transmit(),
        Some(server_error(errno::TOTAL_RATE, 0).to_vec())
    );
    // At the limit is not over it; the test runs, and is ended with the same number once it moves more.
    asked["bandwidth"] = serde_json::json!(25_000_000u64);
    let mut s = server(Limits::default(), now).with_total_rate(Some(100e6));
    s.poll_transmit();
    assert!(s.handle_input(&frame_json(&asked), now).is_ok());
    s.poll_transmit();
    assert!(matches!(s.over_total_rate(), Iperf3Error::TotalRate));
    assert_eq!(
        s.poll_transmit(),
        Some(server_error(errno::TOTAL_RATE, 0).to_vec())
    );
    assert_eq!(s.phase(), ServerPhase::Failed);
}

/// The server at each of its waits: parameters, streams, running (its streams done), results, done.
fn server_at(step: usize, now: Instant) -> ServerSession {
    let (mut s, r) = server_given(
        &params_for(&spec(Direction::Forward, Transport::Tcp, 2)),
        Limits::default(),
        now,
    );
    r.unwrap();
    if step == 0 {
        return server(Limits::default(), now);
    }
    s.create_streams(now).unwrap();
    if step == 1 {
        s.on_stream(now).unwrap();
        return s;
    }
    s.on_stream(now).unwrap();
    s.on_stream(now).unwrap();
    s.local_done(now);
    if step == 2 {
        return s;
    }
    s.handle_input(&[State::TestEnd.byte()], now).unwrap();
    s.exchange(&results_json(1), now).unwrap();
    if step == 3 {
        return s;
    }
    s.handle_input(&frame_json(&results_json(2)), now).unwrap();
    s
}

#[test]
fn a_server_times_out_at_every_wait_and_knows_what_a_vanished_client_means() {
    let now = Instant::now();
    let waits = [
        ("waiting for the parameters", T.handshake),
        ("waiting for the data streams", T.handshake),
        ("running", T.idle),
        ("waiting for the client's results", T.results),
    ];
    for (step, (phase, limit)) in waits.into_iter().enumerate() {
        let mut s = server_at(step, now);
        s.poll_transmit();
        assert!(
            s.handle_timeout(now + limit - Duration::from_millis(1)).is_ok(),
            "{phase}"
        );
        match s.handle_timeout(now + limit) {
            Err(Iperf3Error::Wait(landspeed_proto::WaitFailed::Timeout { phase: p, after })) => {
                assert_eq!((p, after), (phase, limit))
            }
            other => panic!("{phase}: {other:?}"),
        }
        // Streams that do not all come: the client is told with iperf3's number.
        let told = s.poll_transmit();
        assert_eq!(told.is_some(), step == 1, "{phase}: {told:?}");
        let mut s = server_at(step, now);
        assert!(
            matches!(s.handle_closed(now), Iperf3Error::Wait(landspeed_proto::WaitFailed::PeerClosed { phase: p }) if p == phase)
        );
        assert_eq!(s.phase(), ServerPhase::Failed);
    }
    // After the results, a client that closes or never says IPERF_DONE has completed the test.
    let mut s = server_at(4, now);
    s.handle_closed(now);
    assert_eq!(s.phase(), ServerPhase::Finished);
    let mut s = server_at(4, now);
    assert!(s.handle_timeout(now + T.handshake).is_ok());
    assert_eq!(s.phase(), ServerPhase::Finished);
    let mut s = server_at(4, now);
    let e = s.handle_input(&[State::TestStart.byte()], now).unwrap_err();
    assert!(matches!(e, Iperf3Error::Unexpected { got: 1, .. }), "{e}");
}

#[test]
fn a_client_that_terminates_ends_the_test_at_any_step() {
    let now = Instant::now();
    for step in 1..=3 {
        let mut s = server_at(step, now);
        let e = s.handle_input(&[State::ClientTerminate.byte()], now).unwrap_err();
        assert!(matches!(e, Iperf3Error::ClientTerminated), "step {step}: {e}");
    }
    // The running server's streams not being done yet: no timer while the data moves.
    let (mut s, r) = server_given(&params_for(&TestSpec::default()), Limits::default(), now);
    r.unwrap();
    s.create_streams(now).unwrap();
    s.on_stream(now).unwrap();
    assert_eq!(s.phase(), ServerPhase::Running);
    assert_eq!(s.time_left(now), None);
    assert!(matches!(s.on_stream(now), Err(Iperf3Error::BadLocalEvent { .. })));
}

#[test]
fn streams_the_server_cannot_have_are_refused_to_the_client() {
    let now = Instant::now();
    let mut s = server_at(1, now);
    s.poll_transmit();
    s.streams_failed();
    assert_eq!(
        s.poll_transmit(),
        Some(server_error(errno::STREAM_ACCEPT, 0).to_vec())
    );
    let mut c = client_at(3, now);
    let e = c
        .handle_input(&server_error(errno::STREAM_ACCEPT, 0), now)
        .unwrap_err();
    assert!(matches!(e, Iperf3Error::ServerError { code: 204, .. }));
}

#[test]
fn the_payload_answer_is_refused_by_a_client_that_did_not_offer_its_key() {
    let now = Instant::now();
    let mut sp = spec(Direction::Forward, Transport::Tcp, 1);
    sp.verify = false;
    let mut c = client(&sp, now);
    c.poll_transmit();
    c.handle_input(&[State::ParamExchange.byte()], now).unwrap();
    let e = c
        .handle_input(&[State::LandspeedPayload.byte()], now)
        .unwrap_err();
    assert!(matches!(e, Iperf3Error::Unexpected { got: 76, .. }), "{e:?}");
}

#[test]
fn a_key_that_is_not_a_whole_64_bit_number_is_refused() {
    for bad in [r#""k""#, "-1", "1.5", "18446744073709551616"] {
        let body = format!(r#"{{"tcp": true, "time": 1, "landspeed_payload_key": {bad}}}"#);
        let e = Params::parse(body.as_bytes()).unwrap_err();
        assert_eq!(e.code, errno::RECV_PARAMS, "{bad}");
    }
    let ok = Params::parse(br#"{"tcp": true, "time": 1, "landspeed_payload_key": 18446744073709551615}"#);
    assert_eq!(ok.unwrap().landspeed_payload_key, Some(u64::MAX));
}
