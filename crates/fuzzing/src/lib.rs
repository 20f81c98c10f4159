//! What each fuzz target does with its input, as plain functions. cargo-fuzz (the `fuzz/` directory,
//! nightly) calls them with generated inputs; the stable test suite calls them with the committed seed
//! corpus and every crash reproducer, so a fixed bug stays fixed without nightly. Each body decodes
//! hostile bytes the way the server does and asserts what must hold for any input: no panic, nothing held
//! beyond a fixed bound because of a length field, and state machines that stay in a legal state.

#![deny(unreachable_pub)]
#![warn(missing_docs)]

use landspeed_core::config::TestSpec;
use landspeed_iperf3::wire::{json_len, MAX_RESULTS_JSON};
use landspeed_iperf3::{Cookie, Params, Results, MAX_JSON};
use landspeed_proto::{
    auth, Admission, Conn, FrameDecoder, KeyRing, Message, Preamble, ServerAction, ServerSession, SessionId,
    MAX_FRAME_LEN,
};
use std::sync::Arc;
use std::time::Instant;

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name (the names of `fuzz/fuzz_targets/*.rs`).
pub const TARGETS: [(&str, Target); 5] = [
    ("control_decoder", control_decoder),
    ("iperf2_decoder", iperf2_decoder),
    ("iperf3_decoder", iperf3_decoder),
    ("data_hello", data_hello),
    ("perf_request", perf_request),
];

/// A QUIC performance-protocol request as the server reads it (chunk sizes chosen by the first byte),
/// and the shared UDP port's routing of the same bytes as a datagram: the size is exactly the first
/// eight bytes, the upload exactly the rest, nothing panics.
pub fn perf_request(data: &[u8]) {
    let _ = landspeed_core::quic_perf::is_for_quic(data);
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let mut d = landspeed_core::quic_perf::RequestDecoder::new();
    for c in rest.chunks(usize::from(split % 32) + 1) {
        d.push(c);
    }
    assert_eq!(d.uploaded(), rest.len().saturating_sub(8) as u64);
    match d.finish() {
        None => assert!(rest.len() < 8),
        Some(r) => {
            let size = u64::from_be_bytes(rest[..8].try_into().expect("eight bytes"));
            let want = if size == u64::MAX {
                landspeed_core::quic_perf::Response::UntilStopped
            } else {
                landspeed_core::quic_perf::Response::Bytes(size)
            };
            assert_eq!(r, want);
        }
    }
}

/// The server every control-connection input is fed to: it requires key "fuzz" (secret
/// `FUZZ_SECRET`) and its nonce is all 7s, so the seed corpus can hold whole sealed conversations.
pub fn control_server() -> Conn<ServerSession> {
    let keys = Arc::new(KeyRing::parse("fuzz 0123456789abcdef0123").expect("test key"));
    Conn::new(ServerSession::new().with_auth(keys, [7; auth::NONCE_LEN]))
}

/// The secret of `control_server`'s key.
pub const FUZZ_SECRET: &[u8] = b"0123456789abcdef0123";

/// The control connection: bytes arrive in chunks whose sizes the input chooses. The frames alone must
/// decode within their bound and encode again; then the same bytes go to the keyed server's connection
/// exactly as its reader hands them over (the guard checks each frame's tag before the session sees
/// it), and whatever the session accepts was authenticated.
pub fn control_decoder(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(split % 64) + 1;
    frames_alone(rest, chunk);
    let mut conn = control_server();
    for c in rest.chunks(chunk) {
        if conn.handle_input(c, Instant::now()).is_err() {
            break;
        }
        let _ = conn.poll_transmit();
        while let Some(action) = conn.poll_action() {
            if let ServerAction::Accept(spec) = action {
                assert!(conn.peer_proven().is_some() && conn.machine().authenticated().is_some());
                accept_streams(&mut conn, &spec);
            }
        }
    }
}

/// The frames of `rest` as a decoder alone takes them: no length field makes it hold more than one
/// frame's worth, and whatever decodes encodes again to a message of the same kind.
fn frames_alone(rest: &[u8], chunk: usize) {
    let mut dec = FrameDecoder::new();
    for c in rest.chunks(chunk) {
        dec.push(c);
        loop {
            assert!(dec.buffered() <= MAX_FRAME_LEN + 4 + chunk);
            match dec.next_message() {
                Ok(Some(m)) => {
                    let mut d2 = FrameDecoder::new();
                    d2.push(&landspeed_proto::encode(&m));
                    let back = d2.next_message().expect("re-encoded frame").expect("whole frame");
                    assert_eq!(back.kind(), m.kind());
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// Streams arriving for an accepted test, in an order and with ids the test does not expect too.
fn accept_streams(conn: &mut Conn<ServerSession>, spec: &TestSpec) {
    let admitted = Admission::plain(SessionId([0; 16]));
    let _ = conn.handle_local(Instant::now(), |m, _| m.accepted(admitted));
    let n = spec.total_streams();
    for id in [n, 0, 0, n.saturating_sub(1), u32::MAX] {
        let _ = conn.handle_local(Instant::now(), |m, now| m.on_stream(id, now));
    }
}

/// iperf3's authentication as a server meets it: any text as a token to open (with one key made once)
/// and as an authorized users file to check credentials against. Nothing panics; a random token never
/// opens.
fn auth_token(data: &[u8]) {
    use landspeed_iperf3::auth::{check, Credentials, Padding, PrivateKey};
    static KEY: std::sync::OnceLock<Option<PrivateKey>> = std::sync::OnceLock::new();
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(key) = KEY.get_or_init(|| PrivateKey::generate().ok()) {
        for padding in [Padding::Oaep, Padding::Pkcs1] {
            if let Ok((c, _)) = key.open(text, padding) {
                // Only a ciphertext made with this key opens; a fuzzer finding one is a bug.
                panic!("a random token opened: {c:?}");
            }
        }
    }
    let c = Credentials {
        username: "mario".into(),
        password: "rossi".into(),
    };
    let _ = check(&c, 0, 0, 10, text);
}

/// iperf3's control messages: the 4-byte length against its cap, the parameter JSON (and the test it
/// becomes), and the results JSON.
pub fn iperf3_decoder(data: &[u8]) {
    if data.len() >= 4 {
        let prefix = [data[0], data[1], data[2], data[3]];
        for cap in [MAX_JSON, MAX_RESULTS_JSON] {
            if let Ok(n) = json_len(prefix, cap) {
                assert!(n <= cap);
            }
        }
    }
    if let Ok(p) = Params::parse(data) {
        let spec = p.to_spec(1);
        // What parses is what the engine takes, or is refused with one of iperf3's own codes.
        match p.to_test(1) {
            Ok(t) => assert_eq!(t.into_spec(), spec),
            Err(e) => assert_ne!(e.code, landspeed_iperf3::wire::errno::UNIMPLEMENTED, "{e:?}"),
        }
        let _ = p.direction();
        let _ = Params::message_for(&spec, "3.12");
    }
    auth_token(data);
    if let Ok(r) = Results::parse(data) {
        let _ = r.to_json();
    }
}

/// A UDP hello (with or without a token) and a challenge: what parses re-encodes to the same, and the
/// server's judgement of a hello from a foreign address is a challenge smaller than three hellos.
fn udp_hello(data: &[u8]) {
    use landspeed_proto::udp_hello::{Challenge, Hello, Validator, Verdict};
    if let Some(h) = Hello::parse(data) {
        // The reserved byte is not read, so the bytes may differ; what they say may not.
        assert_eq!(Hello::parse(&h.encode()), Some(h));
        let v = Validator::new([7; 32]);
        let from: std::net::SocketAddr = "192.0.2.7:4000".parse().expect("an address");
        let control: std::net::IpAddr = "198.51.100.1".parse().expect("an address");
        match v.judge(&h, from, control) {
            Verdict::Challenge(c) => assert!(c.encode().len() < 3 * data.len()),
            // Only the token sent to that address validates it.
            Verdict::Accept => assert_eq!(h.token, Some(v.token(h.session, h.stream, from))),
        }
    }
    if let Some(c) = Challenge::parse(data) {
        assert_eq!(Challenge::parse(&c.encode()), Some(c));
    }
}

/// The first bytes of a connection and of a UDP stream: landspeed's preamble, an iperf3 cookie, the UDP
/// datagram headers of both protocols, and the echo probes the server answers.
pub fn data_hello(data: &[u8]) {
    match Preamble::parse(data) {
        Ok(Some((p, used))) => {
            assert!(used <= data.len());
            assert_eq!(Preamble::parse(&p.encode()), Ok(Some((p, used))));
            // A stream key admits exactly the preamble it makes for that session and stream.
            if let Preamble::Data { session, stream, .. } = p {
                let k = landspeed_proto::StreamKey::new(&[9; 32]);
                let made = Preamble::data(session, stream, Some(&k));
                assert_eq!(k.admits(&p), p == made);
            }
        }
        Ok(None) => assert!(data.len() < Preamble::wanted(data)),
        Err(_) => {}
    }
    let _ = landspeed_proto::classify(data.first().copied().unwrap_or(0));
    if let Some(c) = Cookie::parse(data) {
        assert_eq!(Cookie::parse(&c.to_wire()), Some(c));
    }
    // The server's echo: it answers in place and never with more bytes than it got.
    let mut echo = data.to_vec();
    if let Some(n) = landspeed_core::path::echo::answer(&mut echo, 1) {
        assert!(n <= data.len());
    }
    udp_hello(data);
    let _ = landspeed_core::udp::Header::read(data);
    let _ = landspeed_core::udp::Header::read_iperf3(data, false);
    let _ = landspeed_core::udp::Header::read_iperf3(data, true);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = KeyRing::parse(text);
        let _ = serde_json::from_str::<Message>(text);
    }
}

/// iperf 2's wire as the server reads it: a TCP connection's first bytes (what they announce and the
/// header they hold, written back the same; the test a header asks for, as the server validates it), a UDP
/// datagram (an iperf 2 client's, with a positive sequence number, or none), the server's report
/// (written back the same) and a run of datagrams counted as the server counts them, its report
/// written; none of it may panic.
pub fn iperf2_decoder(data: &[u8]) {
    use landspeed_iperf2::detect::{self, FirstBytes};
    use landspeed_iperf2::header::MAX_HEADER_BYTES;
    use landspeed_iperf2::{ClientHeader, Datagram, Receipt, ServerReport};
    if let FirstBytes::Iperf2 { header_bytes } = detect::tcp(data) {
        assert!(header_bytes <= MAX_HEADER_BYTES.max(60), "{header_bytes}");
    }
    for prefix in [0, landspeed_iperf2::udp::PREFIX_BYTES] {
        if let Ok((h, used)) = ClientHeader::parse(data, prefix) {
            assert!(used <= data.len());
            if prefix == 0 {
                assert_eq!(ClientHeader::parse(&h.encode(), 0).map(|(h, _)| h), Ok(h.clone()));
            }
            // The server validates what a header asks for (and refuses what does not validate).
            if let Ok(plan) = h.tcp_plan(1) {
                let _ = plan.spec.validated();
            }
            if let Ok(spec) = h.udp_plan(1) {
                let _ = spec.validated();
            }
        }
    }
    // A datagram numbered 0 (iperf 2's first payload) opens a test; an end (negative) none.
    if let Some((d, _)) = detect::udp(data) {
        assert!(d.seq >= 0);
    }
    // A report written again reads as the same bytes (its variance is held in floating point, so
    // the values may differ in the last bit; the wire may not).
    if let Some(r) = ServerReport::parse(data) {
        let wire = r.encode();
        assert_eq!(ServerReport::parse(&wire).map(|r| r.encode()), Some(wire));
    }
    // The input as datagrams of its first byte's size (16 to 271 bytes), each counted on arrival.
    let size = 16 + usize::from(data.first().copied().unwrap_or(0));
    let mut receipt = Receipt::default();
    let mut counted = 0u64;
    for (k, chunk) in data.chunks(size).enumerate() {
        if let Ok(d) = Datagram::parse(chunk, false) {
            receipt.datagram(&d, chunk.len(), k as f64 * 1e-3);
            counted += 1;
        }
    }
    let report = receipt.report(data.len().is_multiple_of(2));
    assert!(counted == 0 || receipt.span_s() >= 0.0);
    let _ = (
        receipt.lost(),
        report.encode(),
        receipt.take_interval(),
        receipt.arrivals(),
    );
}
