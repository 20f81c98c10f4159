//! Writes the fuzz targets' seed corpus (fuzz/corpus/TARGET/) from the real encoders, so the seeds follow
//! the protocol as it changes: `cargo run -p landspeed-fuzzing --example seeds`.

use landspeed_core::config::TestSpec;
use landspeed_core::config::{Direction, Transport};
use landspeed_iperf3::{Cookie, Params};
use landspeed_proto::{
    auth, ClientAction, ClientSession, Conn, Key, Message, Preamble, SessionId, PROTOCOL_VERSION,
};
use std::path::Path;
use std::time::Instant;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("corpus directory");
    std::fs::write(dir.join(name), bytes).expect("seed file");
}

fn frames(split: u8, msgs: &[Message]) -> Vec<u8> {
    let mut out = vec![split];
    for m in msgs {
        out.extend(landspeed_proto::encode(m));
    }
    out
}

/// A whole conversation as a keyed client writes it to the fuzz body's server: the hello, then
/// `spec`'s request and `after`, each sealed (the server's welcome read from the same server).
fn sealed(split: u8, spec: &TestSpec, after: &[Message]) -> Vec<u8> {
    let key = Key::new("fuzz", landspeed_fuzzing::FUZZ_SECRET).expect("key");
    let session = ClientSession::new(spec.clone().validated().expect("a valid seed spec"))
        .with_auth(key, [9; auth::NONCE_LEN]);
    let mut client = Conn::new(session);
    let now = Instant::now();
    client
        .handle_local(now, |s, now| Ok(ClientAction::Send(s.hello(now))))
        .expect("hello");
    let mut out = vec![split];
    let mut server = landspeed_fuzzing::control_server();
    let hello = client.poll_transmit().expect("the hello");
    server
        .handle_input(&hello, now)
        .expect("the server takes the hello");
    out.extend(hello);
    let welcome = server.poll_transmit().expect("the welcome");
    client
        .handle_input(&welcome, now)
        .expect("the client takes the welcome");
    for m in after {
        client.send(m);
    }
    out.extend(client.poll_transmit().expect("the request"));
    out
}

fn main() {
    let hello = Message::Hello {
        version: PROTOCOL_VERSION,
        software: "landspeed 0.1.0".into(),
        auth: None,
    };
    let specs = [
        TestSpec::default(),
        TestSpec {
            streams: 4,
            direction: Direction::Bidir,
            ..TestSpec::default()
        },
        TestSpec {
            transport: Transport::Udp,
            rate_bps: Some(1e8),
            length_bytes: 1448,
            ..TestSpec::default()
        },
    ];
    for (i, spec) in specs.iter().enumerate() {
        let after = [
            Message::Start,
            Message::Stop,
            Message::Results {
                report: Box::default(),
            },
        ];
        write(
            "control_decoder",
            &format!("session-{i}"),
            &sealed(63, spec, &after),
        );
        write(
            "control_decoder",
            &format!("session-{i}-bytewise"),
            &sealed(0, spec, &[]),
        );
    }
    let unauth = Message::TestRequest {
        spec: Box::default(),
        auth: None,
    };
    write("control_decoder", "no-auth", &frames(7, &[hello.clone(), unauth]));
    write(
        "control_decoder",
        "error",
        &frames(5, &[Message::Error { message: "x".into() }]),
    );
    let mut huge = vec![3u8];
    huge.extend_from_slice(&u32::MAX.to_be_bytes());
    write("control_decoder", "huge-length", &huge);
    let mut bad = vec![1u8];
    bad.extend_from_slice(&5u32.to_be_bytes());
    bad.extend_from_slice(b"{\"ty");
    write("control_decoder", "truncated-json", &bad);

    for (i, spec) in specs.iter().enumerate() {
        let v = Params::message_for(spec, "3.12");
        write("iperf3_decoder", &format!("params-{i}"), v.to_string().as_bytes());
    }
    let iperf3_params = r#"{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":2,"reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;
    write("iperf3_decoder", "params-iperf3-3.12", iperf3_params.as_bytes());
    let results = r#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1.0,"sender_has_retransmits":1,"congestion_used":"cubic","streams":[{"id":1,"bytes":123456789,"retransmits":3,"jitter":0,"errors":0,"omitted_errors":0,"packets":0,"omitted_packets":0,"start_time":0,"end_time":10.0002}]}"#;
    write("iperf3_decoder", "results-iperf3-3.12", results.as_bytes());
    write("iperf3_decoder", "length-prefix", &[0, 0, 0x20, 0]);
    write(
        "iperf3_decoder",
        "params-authtoken",
        br#"{"tcp":true,"time":1,"parallel":1,"len":131072,"client_version":"3.21","authtoken":"AAECAwQFBgcICQoLDA0ODw=="}"#,
    );
    write(
        "iperf3_decoder",
        "users-file",
        b"# users
mario,bf7a49a846d44b454a5d11e7acfaf13d138bbe0b7483aa3e050879700572709b
",
    );

    write(
        "data_hello",
        "control",
        &Preamble::Control {
            version: PROTOCOL_VERSION,
        }
        .encode(),
    );
    write(
        "data_hello",
        "data",
        &Preamble::data(SessionId([0xab; 16]), 3, None).encode(),
    );
    write(
        "data_hello",
        "data-mac",
        &Preamble::data(
            SessionId([0xab; 16]),
            3,
            Some(&landspeed_proto::StreamKey::new(&[0x11; 32])),
        )
        .encode(),
    );
    write("data_hello", "cookie", &Cookie::from_random([5; 36]).to_wire());
    {
        use landspeed_proto::udp_hello::{Challenge, Hello};
        let (session, stream) = (SessionId([0xab; 16]), 3);
        let token = Some([0x5a; 16]);
        write(
            "data_hello",
            "udp-hello-token",
            &Hello {
                token,
                ..Hello::new(session, stream, None)
            }
            .encode(),
        );
        let key = landspeed_proto::StreamKey::new(&[0x11; 32]);
        write(
            "data_hello",
            "udp-hello-mac-token",
            &Hello {
                token,
                ..Hello::new(session, stream, Some(&key))
            }
            .encode(),
        );
        let token = [0x5a; 16];
        write(
            "data_hello",
            "udp-challenge",
            &Challenge {
                session,
                stream,
                token,
            }
            .encode(),
        );
    }
    let mut udp = [0u8; 64];
    landspeed_core::udp::Header { seq: 42, sent_ns: 1 }.write(&mut udp);
    write("data_hello", "udp-landspeed", &udp);
    landspeed_core::udp::Header { seq: 42, sent_ns: 1 }.write_iperf3(&mut udp, true);
    write("data_hello", "udp-iperf3", &udp);
    write("data_hello", "keyfile", b"# keys\nalice 0123456789abcdef0123\n");
    let mut echo = vec![0u8; 64];
    landspeed_core::path::EchoHeader::request(7, 1, 123, false).write(&mut echo);
    write("data_hello", "echo", &echo);
    landspeed_core::path::EchoHeader::request(7, 2, 123, true).write(&mut echo);
    write("data_hello", "echo-short", &echo);
    let mut upload = vec![4u8];
    upload.extend(landspeed_core::quic_perf::request_header(Some(0)));
    upload.extend([0x2a; 40]);
    write("perf_request", "upload", &upload);
    let mut download = vec![9u8];
    download.extend(landspeed_core::quic_perf::request_header(Some(1 << 30)));
    write("perf_request", "download", &download);
    let mut unlimited = vec![0u8];
    unlimited.extend(landspeed_core::quic_perf::request_header(None));
    write("perf_request", "until-stopped", &unlimited);
    write("perf_request", "short", &[3, 0, 0, 1]);
    write("perf_request", "quic-initial", &[0, 0xc3, 0, 0, 0, 1, 8, 1, 2]);
}
