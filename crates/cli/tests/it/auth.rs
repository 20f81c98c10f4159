//! Shared-key authentication end to end: a good key runs a test, a wrong key, a missing key and an
//! unknown name are refused with a clear error and logged as refusals, a sealed request recorded on one
//! connection is refused when replayed on another, a version-1 client is told to upgrade, a man in the
//! middle who changes one byte of `accepted` is caught by the client, and TLS says whether the server
//! was authenticated.

use crate::common;

use common::{landspeed, run_json, ServerProc};
use landspeed_proto::{
    auth, ClientAction, ClientPhase, ClientSession, Conn, FrameDecoder, Message, Preamble, NONCE_LEN,
    PROTOCOL_VERSION,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const KEYS: &str = "# name secret\nalice 0123456789abcdef-alice\nbob   bob-Secret-b0b-9876-xyz\n";

/// A server key file (alice and bob, mode 600) and alice's own key file, in a directory for `tag`.
pub(crate) fn key_files(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("landspeed-auth-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = dir.join("keys");
    std::fs::write(&server, KEYS).unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o600)).unwrap();
    let client = dir.join("alice.key");
    std::fs::write(&client, "0123456789abcdef-alice\n").unwrap();
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o600)).unwrap();
    (server, client)
}

#[test]
fn good_bad_and_missing_keys() {
    let (keys, alice) = key_files("keys");
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let p = s.port.to_string();
    let good = format!("alice:{}", alice.display());
    let r = run_json("127.0.0.1", s.port, &["-t", "0.5", "--auth", &good]);
    assert_eq!(r["summary"]["bytes_sent"], r["summary"]["bytes_received"]);
    assert_eq!(r["authentication"]["data_streams_proven"], true);
    assert!(common::line_with(&s, "test from").contains("(both ends authenticated by key alice)"));
    // UDP hellos and QUIC streams carry their MAC too (data preamble version 2).
    for transport in [&["--udp", "-b", "200M"][..], &["--quic"]] {
        let mut args = vec!["-t", "0.3", "--auth", &good];
        args.extend(transport);
        let r = run_json("127.0.0.1", s.port, &args);
        assert_eq!(r["payload"]["verified"], true, "{transport:?}");
        assert_eq!(r["authentication"]["data_streams_proven"], true, "{transport:?}");
        common::line_with(&s, "test from");
    }
    // The server's own key file works on the client side too (the line named bob is used).
    let bob = format!("bob:{}", keys.display());
    run_json("127.0.0.1", s.port, &["-t", "0.5", "--auth", &bob]);

    for (args, needle) in [
        (
            vec!["--auth", &*format!("bob:{}", alice.display())],
            "authentication failed",
        ),
        (
            vec!["--auth", &*format!("carol:{}", alice.display())],
            "authentication failed",
        ),
        (vec![], "requires authentication"),
    ] {
        let mut all = vec!["run", "127.0.0.1", "-p", &p, "-t", "0.5"];
        all.extend(args.iter().copied());
        let o = landspeed(&all, Duration::from_secs(20));
        assert_eq!(o.code, 1, "{args:?}: {}", o.stdout);
        assert!(o.stderr.contains(needle), "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.contains("--auth"),
            "the error says how to fix it: {}",
            o.stderr
        );
    }
    // Wrong key and unknown name are refusals in the log, with the reason only the operator sees.
    assert!(common::line_with(&s, "refused").contains("does not hold the key"));
    assert!(common::line_with(&s, "refused").contains("no key named 'carol'"));
    // A key file that is not there is a usage error naming the file.
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "--auth", "alice:/nonexistent/key"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("/nonexistent/key"), "{}", o.stderr);
}

/// A keyed client conversation over a real connection, driven by hand through core's `Conn`: the
/// preamble and hello written, the welcome taken; the sealed request is what `conn` has to send.
fn keyed_client(port: u16) -> (TcpStream, Conn<ClientSession>, Vec<u8>) {
    let key = auth::client_key("alice", KEYS).unwrap();
    let session = ClientSession::new(landspeed_core::config::TestSpec::default().validated().unwrap())
        .with_auth(key, [5; NONCE_LEN]);
    let mut conn = Conn::new(session);
    conn.send_raw(
        &Preamble::Control {
            version: PROTOCOL_VERSION,
        }
        .encode(),
    );
    conn.handle_local(Instant::now(), |s, now| Ok(ClientAction::Send(s.hello(now))))
        .unwrap();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let greeting = conn.poll_transmit().unwrap();
    c.write_all(&greeting).unwrap();
    read_into(&mut c, &mut conn, |c| {
        c.machine().phase() != ClientPhase::AwaitWelcome
    });
    (c, conn, greeting)
}

/// Reads into `conn` until `done` holds of it.
fn read_into(c: &mut TcpStream, conn: &mut Conn<ClientSession>, done: impl Fn(&Conn<ClientSession>) -> bool) {
    let mut buf = [0u8; 4096];
    while !done(conn) {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "server closed the control connection");
        conn.handle_input(&buf[..n], Instant::now()).unwrap();
    }
}

/// Reads one unsealed control message.
fn read_msg(c: &mut TcpStream, d: &mut FrameDecoder) -> Message {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = d.next_message().unwrap() {
            return m;
        }
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "server closed the control connection");
        d.push(&buf[..n]);
    }
}

#[test]
fn a_recorded_request_cannot_be_replayed_and_a_version_1_client_is_told_to_upgrade() {
    let (keys, _) = key_files("replay");
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);

    // The legitimate exchange, recorded: the server answers the sealed request, sealed.
    let (mut c1, mut conn1, greeting) = keyed_client(s.port);
    let request = conn1.poll_transmit().unwrap();
    c1.write_all(&request).unwrap();
    read_into(&mut c1, &mut conn1, |c| {
        c.machine().phase() != ClientPhase::AwaitAccepted
    });
    assert_eq!(conn1.machine().server_authenticated(), Some("alice"));
    drop(c1);

    // The same bytes on a new connection: the server's nonce is new, so the request's tag is wrong.
    let mut c2 = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c2.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c2.write_all(&greeting).unwrap();
    let mut d2 = FrameDecoder::new();
    assert!(matches!(read_msg(&mut c2, &mut d2), Message::Welcome { .. }));
    c2.write_all(&request).unwrap();
    match read_msg(&mut c2, &mut d2) {
        Message::Rejected { reason, .. } => assert!(reason.contains("authentication failed"), "{reason}"),
        other => panic!("replay was not refused: {other:?}"),
    }
    assert!(common::line_with(&s, "refused").contains("control message 0 from the client"));

    // A version-1 client: no key in its hello, a proof in its request.
    let mut c3 = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c3.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c3.write_all(&common::control_greeting("landspeed 0.0.9"))
        .unwrap();
    let mut d3 = FrameDecoder::new();
    let Message::Welcome { auth: Some(ch), .. } = read_msg(&mut c3, &mut d3) else {
        panic!("no challenge")
    };
    assert_eq!(ch.version, auth::AUTH_VERSION);
    let old = Message::TestRequest {
        spec: Default::default(),
        auth: Some(Box::new(auth::Proof {
            name: "alice".into(),
            client_nonce: "05".repeat(NONCE_LEN),
            mac: "00".repeat(32),
        })),
    };
    c3.write_all(&landspeed_proto::encode(&old)).unwrap();
    match read_msg(&mut c3, &mut d3) {
        Message::Rejected { reason, .. } => assert!(reason.contains("speaks version 1"), "{reason}"),
        other => panic!("a version-1 client was not refused: {other:?}"),
    }
}

/// A man in the middle on loopback: every connection to `listener` (at most `conns`) goes on to
/// `server`; on the first (the control connection), the server's frame number `tamper` has one byte
/// of its body changed, if given.
fn proxy(
    listener: TcpListener,
    server: u16,
    conns: usize,
    tamper: Option<usize>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut pipes = vec![];
        for i in 0..conns {
            let Ok((down, _)) = listener.accept() else { return };
            let up = TcpStream::connect(("127.0.0.1", server)).unwrap();
            pipes.push(pipe(down.try_clone().unwrap(), up.try_clone().unwrap()));
            pipes.push(match (i, tamper) {
                (0, Some(n)) => std::thread::spawn(move || rewrite_frame(up, down, n)),
                _ => pipe(up, down),
            });
        }
        for p in pipes {
            let _ = p.join();
        }
    })
}

fn pipe(mut from: TcpStream, mut to: TcpStream) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(std::net::Shutdown::Write);
    })
}

/// Copies frames from `from` to `to`, with one byte of frame `n`'s body changed.
fn rewrite_frame(mut from: TcpStream, mut to: TcpStream, n: usize) {
    let mut d = FrameDecoder::new();
    let mut buf = [0u8; 4096];
    let mut seen = 0;
    while let Ok(got @ 1..) = from.read(&mut buf) {
        d.push(&buf[..got]);
        while let Ok(Some(mut f)) = d.next_frame() {
            if seen == n {
                f[2] ^= 0x01;
            }
            seen += 1;
            let out = [&(f.len() as u32).to_be_bytes()[..], &f].concat();
            if to.write_all(&out).is_err() {
                return;
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

#[test]
fn a_man_in_the_middle_who_rewrites_accepted_is_caught_by_the_client() {
    let (keys, alice) = key_files("mitm");
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let good = format!("alice:{}", alice.display());
    // Through the proxy unchanged, the test runs (control and one data connection).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let p = proxy(l, s.port, 2, None);
    let r = run_json("127.0.0.1", port, &["-t", "0.3", "--auth", &good]);
    assert_eq!(r["authentication"]["server"], "key", "{}", r["authentication"]);
    assert_eq!(r["authentication"]["control_messages_authenticated"], true);
    p.join().unwrap();
    // The server's second frame is `accepted`: one changed byte, and the client refuses it.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let p = proxy(l, s.port, 1, Some(1));
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &port, "-t", "0.3", "--auth", &good],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("control message 0 from the server does not carry this conversation's MAC"),
        "{}",
        o.stderr
    );
    p.join().unwrap();
}

#[test]
fn tls_says_whether_the_server_was_authenticated() {
    let (keys, alice) = key_files("tls");
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let open = ServerProc::start("127.0.0.1", &[]);
    let good = format!("alice:{}", alice.display());
    let r = run_json("127.0.0.1", s.port, &["-t", "0.3", "--tls", "--auth", &good]);
    let a = &r["authentication"];
    assert_eq!(
        (a["server"].as_str(), a["data_encrypted"].as_bool()),
        (Some("key"), Some(true))
    );
    assert!(a["note"]
        .as_str()
        .unwrap()
        .contains("certificate came in an authenticated message"));
    let r = run_json("127.0.0.1", open.port, &["-t", "0.3", "--tls"]);
    let a = &r["authentication"];
    assert_eq!(a["server"], "none");
    assert_eq!(a["data_streams_proven"], false);
    assert!(
        a["note"].as_str().unwrap().contains("passive observers only"),
        "{a}"
    );
    // Pinned to the certificate the server logged: authenticated by it, the control conversation not.
    let pin = open
        .first_line
        .split("sha256:")
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    let r = run_json("127.0.0.1", open.port, &["-t", "0.3", "--tls", "--tls-pin", &pin]);
    assert_eq!(
        r["authentication"]["server"], "pinned_certificate",
        "{}",
        r["authentication"]
    );
    assert_eq!(r["authentication"]["control_messages_authenticated"], false);
    let p = open.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-t", "0.3", "--tls"],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("Authentication:"))
        .collect();
    assert_eq!(lines.len(), 1, "once: {}", o.stdout);
    assert!(lines[0].contains("server not authenticated"), "{}", lines[0]);
    assert!(
        !o.stderr.contains("authenticat"),
        "not as an error or warning: {}",
        o.stderr
    );
    // A key against a server that asks for none is refused, not used over less.
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-t", "0.3", "--auth", &good],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stderr.contains("does not ask for a key"), "{}", o.stderr);
}
