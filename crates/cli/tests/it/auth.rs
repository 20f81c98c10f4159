//! Shared-key authentication end to end: a good key runs a test, a wrong key, a missing key and an
//! unknown name are refused with a clear error and logged as refusals, and a test request recorded on one
//! connection is refused when replayed on another.

use crate::common;

use common::{landspeed, run_json, ServerProc};
use landspeed_core::protocol::{self, auth, FrameDecoder, Message};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

const KEYS: &str = "# name secret\nalice 0123456789abcdef-alice\nbob   bob-bob-bob-bob-bob-bob\n";

fn key_files(tag: &str) -> (PathBuf, PathBuf) {
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

fn line_containing(s: &ServerProc, needle: &str) -> String {
    loop {
        let l = s
            .next_line(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("no server line with {needle:?}"));
        if l.contains(needle) {
            return l;
        }
    }
}

#[test]
fn good_bad_and_missing_keys() {
    let (keys, alice) = key_files("keys");
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let p = s.port.to_string();
    let good = format!("alice:{}", alice.display());
    let r = run_json("127.0.0.1", s.port, &["-t", "0.5", "--auth", &good]);
    assert_eq!(r["summary"]["bytes_sent"], r["summary"]["bytes_received"]);
    assert!(line_containing(&s, "test from").contains("(key alice)"));
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
    assert!(line_containing(&s, "refused").contains("does not match"));
    assert!(line_containing(&s, "refused").contains("no key named 'carol'"));
    // A key file that is not there is a usage error naming the file.
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "--auth", "alice:/nonexistent/key"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("/nonexistent/key"), "{}", o.stderr);
}

/// Reads one control message.
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

/// Greets the server and returns its welcome.
fn greet(port: u16) -> (TcpStream, FrameDecoder, Message) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let hello = common::control_greeting("replay test");
    c.write_all(&hello).unwrap();
    let mut d = FrameDecoder::new();
    let w = read_msg(&mut c, &mut d);
    (c, d, w)
}

#[test]
fn a_recorded_answer_cannot_be_replayed() {
    let (keys, _) = key_files("replay");
    let s = ServerProc::start("127.0.0.1", &["--auth-keys", keys.to_str().unwrap()]);
    let key = auth::client_key("alice", KEYS).unwrap();

    // The legitimate exchange, recorded.
    let (mut c1, mut d1, w1) = greet(s.port);
    let Message::Welcome { auth: Some(ch1), .. } = w1 else {
        panic!("no challenge in {w1:?}")
    };
    let request = Message::TestRequest {
        spec: Default::default(),
        auth: Some(Box::new(key.prove(&ch1, &[5; auth::NONCE_LEN]).unwrap())),
    };
    c1.write_all(&protocol::encode(&request)).unwrap();
    let m = read_msg(&mut c1, &mut d1);
    assert!(matches!(m, Message::Accepted { .. }), "{m:?}");
    drop(c1);

    // The same bytes on a new connection: the server's nonce is new, so the answer is wrong.
    let (mut c2, mut d2, w2) = greet(s.port);
    let Message::Welcome { auth: Some(ch2), .. } = w2 else {
        panic!("no challenge")
    };
    assert_ne!(ch1, ch2, "every connection gets a fresh nonce");
    c2.write_all(&protocol::encode(&request)).unwrap();
    match read_msg(&mut c2, &mut d2) {
        Message::Rejected { reason, .. } => assert!(reason.contains("authentication failed"), "{reason}"),
        other => panic!("replay was not refused: {other:?}"),
    }
    assert!(line_containing(&s, "refused").contains("authentication failed"));
}
