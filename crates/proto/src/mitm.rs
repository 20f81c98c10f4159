//! In-memory attacks on a keyed conversation: a client `Conn` and a server `Conn` whose frames cross a
//! wire the test controls, so a frame can be changed, dropped, replayed, reordered, moved to another
//! connection, or answered by an end that does not hold the key. Each attack must be caught at the
//! first frame it touches, with a typed error, and nothing the attacker wrote may reach a session.

use super::auth::{self, Key, KeyRing, NONCE_LEN};
use super::conn::{Conn, Machine};
use super::framing::{body, decode_body, FrameDecoder};
use super::guard::{Guard, GuardError, KeyMaterial, Side};
use super::messages::{Message, Refusal, SessionId};
use super::session::{
    Admission, ClientAction, ClientSession, ProtocolError, ServerAction, ServerPhase, ServerSession,
};
use landspeed_core::config::TestSpec;
use landspeed_core::tls::CertFingerprint;
use std::sync::Arc;
use std::time::Instant;

const SECRET: &[u8] = b"0123456789abcdef-alice";
const SERVER_NONCE: [u8; NONCE_LEN] = [1; NONCE_LEN];
const CLIENT_NONCE: [u8; NONCE_LEN] = [2; NONCE_LEN];

fn key(secret: &[u8]) -> Key {
    Key::new("alice", secret).unwrap()
}

fn ring(secret: &[u8]) -> Arc<KeyRing> {
    let line = format!("alice {}\n", String::from_utf8(secret.to_vec()).unwrap());
    Arc::new(KeyRing::parse(&line).unwrap())
}

/// Every frame one side has written, each whole (length and bytes).
pub(super) fn frames<M: Machine>(from: &mut Conn<M>) -> Vec<Vec<u8>> {
    let mut d = FrameDecoder::new();
    while let Some(b) = from.poll_transmit() {
        d.push(&b);
    }
    let mut out = vec![];
    while let Some(f) = d.next_frame().unwrap() {
        out.push([&(f.len() as u32).to_be_bytes()[..], &f].concat());
    }
    out
}

pub(super) fn deliver<M: Machine>(to: &mut Conn<M>, frames: &[Vec<u8>]) -> Result<(), ProtocolError> {
    frames.iter().try_for_each(|f| to.handle_input(f, Instant::now()))
}

/// A client and a server, the client's hello written.
struct Talk {
    c: Conn<ClientSession>,
    s: Conn<ServerSession>,
}

impl Talk {
    /// A client holding alice's key `client`, a server holding `server` (None: no keys at all).
    fn new(client: Option<&[u8]>, server: Option<&[u8]>, server_nonce: [u8; NONCE_LEN]) -> Talk {
        let mut session = ClientSession::new(TestSpec::default().validated().unwrap());
        if let Some(secret) = client {
            session = session.with_auth(key(secret), CLIENT_NONCE);
        }
        let mut c = Conn::new(session);
        c.handle_local(Instant::now(), |s, now| Ok(ClientAction::Send(s.hello(now))))
            .unwrap();
        let mut s = ServerSession::new();
        if let Some(secret) = server {
            s = s.with_auth(ring(secret), server_nonce);
        }
        Talk { c, s: Conn::new(s) }
    }

    fn keyed() -> Talk {
        Talk::new(Some(SECRET), Some(SECRET), SERVER_NONCE)
    }

    /// Hello and welcome crossed; the client's request is written, not yet delivered.
    fn greeted(mut self) -> Talk {
        deliver(&mut self.s, &frames(&mut self.c)).unwrap();
        deliver(&mut self.c, &frames(&mut self.s)).unwrap();
        self
    }

    /// The request delivered and accepted with `certificate`: the server's `accepted` is written.
    fn accepted(mut self, certificate: Option<CertFingerprint>) -> Talk {
        deliver(&mut self.s, &frames(&mut self.c)).unwrap();
        assert!(matches!(self.s.poll_action(), Some(ServerAction::Accept(_))));
        let a = Admission {
            session: SessionId([7; 16]),
            certificate,
            quic_port: None,
        };
        self.s.handle_local(Instant::now(), |m, _| m.accepted(a)).unwrap();
        self
    }
}

fn bad_tag(e: &ProtocolError, seq: u64) -> bool {
    matches!(e, ProtocolError::Forged { err: GuardError::BadTag { seq: n, .. }, .. } if *n == seq)
}

#[test]
fn a_keyed_conversation_authenticates_both_ends_and_seals_every_message_after_the_welcome() {
    let mut t = Talk::keyed().greeted();
    let request = frames(&mut t.c);
    assert!(
        decode_body(&request[0][4..]).is_err(),
        "the request carries a tag"
    );
    deliver(&mut t.s, &request).unwrap();
    assert!(matches!(t.s.poll_action(), Some(ServerAction::Accept(_))));
    assert_eq!(t.s.machine().authenticated(), Some("alice"));
    t.s.handle_local(Instant::now(), |m, _| {
        m.accepted(Admission::plain(SessionId([7; 16])))
    })
    .unwrap();
    assert_eq!(
        t.c.machine().server_authenticated(),
        None,
        "nothing from the server yet"
    );
    deliver(&mut t.c, &frames(&mut t.s)).unwrap();
    assert!(matches!(t.c.poll_action(), Some(ClientAction::ConnectStreams(_))));
    assert_eq!(t.c.machine().server_authenticated(), Some("alice"));
    assert_eq!(t.c.peer_proven(), Some("alice"));
}

#[test]
fn both_ends_prove_data_streams_with_the_same_key_and_the_offer_cannot_be_stripped() {
    let mut t = Talk::keyed().greeted().accepted(None);
    deliver(&mut t.c, &frames(&mut t.s)).unwrap();
    let (ck, sk) = (t.c.stream_key().unwrap(), t.s.stream_key().unwrap());
    let sid = SessionId([7; 16]);
    assert!(sk.verify(sid, 0, &ck.mac(sid, 0)));
    // Keyless: no stream key, version-1 preambles.
    let mut t = Talk::new(None, None, SERVER_NONCE).greeted().accepted(None);
    deliver(&mut t.c, &frames(&mut t.s)).unwrap();
    assert!(t.c.stream_key().is_none() && t.s.stream_key().is_none());
    // An attacker who strips the offer from the hello (to keep streams unproven) changes the
    // transcript: the client's first sealed message fails.
    let mut t = Talk::keyed();
    let mut hello = frames(&mut t.c);
    let Message::Hello {
        version,
        software,
        auth: Some(mut a),
    } = decode_body(&hello[0][4..]).unwrap()
    else {
        panic!()
    };
    a.data_preamble = 1;
    let changed = body(&Message::Hello {
        version,
        software,
        auth: Some(a),
    });
    hello[0] = [&(changed.len() as u32).to_be_bytes()[..], &changed].concat();
    deliver(&mut t.s, &hello).unwrap();
    deliver(&mut t.c, &frames(&mut t.s)).unwrap();
    deliver(&mut t.s, &frames(&mut t.c)).unwrap();
    assert!(matches!(t.s.poll_action(), Some(ServerAction::AuthFailed { .. })));
}

#[test]
fn a_changed_accepted_or_a_swapped_certificate_is_caught_at_that_message() {
    let real = CertFingerprint([0xaa; 32]);
    let mut t = Talk::keyed().greeted().accepted(Some(real));
    let mut sent = frames(&mut t.s);
    let body = String::from_utf8_lossy(&sent[0][4..sent[0].len() - 32]).to_string();
    assert!(body.contains(&"aa".repeat(32)), "{body}");
    // The attacker's own certificate in place of the server's, same length.
    let forged = body.replace(&"aa".repeat(32), &"bb".repeat(32));
    let tag = sent[0][sent[0].len() - 32..].to_vec();
    sent[0] = [&sent[0][..4], forged.as_bytes(), &tag].concat();
    let e = deliver(&mut t.c, &sent).unwrap_err();
    assert!(bad_tag(&e, 0), "{e:?}");
    assert!(t.c.poll_action().is_none(), "nothing forged reaches the driver");
    assert!(
        e.to_string().contains("does not carry this conversation's MAC"),
        "{e}"
    );
}

#[test]
fn dropped_replayed_and_reordered_messages_are_caught_where_they_land() {
    // Two messages from the server: accepted, then ready.
    let two = || {
        let mut t = Talk::keyed().greeted().accepted(None);
        t.s.handle_local(Instant::now(), |m, now| m.on_stream(0, now))
            .unwrap();
        let f = frames(&mut t.s);
        assert_eq!(f.len(), 2, "accepted and ready");
        (t, f)
    };
    // Dropped: ready arrives where accepted was due.
    let (mut t, f) = two();
    assert!(bad_tag(&deliver(&mut t.c, &f[1..]).unwrap_err(), 0));
    // Reordered: the same, with accepted after it.
    let (mut t, f) = two();
    assert!(bad_tag(
        &deliver(&mut t.c, &[f[1].clone(), f[0].clone()]).unwrap_err(),
        0
    ));
    // Replayed: accepted twice.
    let (mut t, f) = two();
    assert!(bad_tag(
        &deliver(&mut t.c, &[f[0].clone(), f[0].clone()]).unwrap_err(),
        1
    ));
    // In order, both are taken.
    let (mut t, f) = two();
    deliver(&mut t.c, &f[..1]).unwrap();
    t.c.handle_local(Instant::now(), |m, now| {
        m.on_streams_connected(now).map(|()| ClientAction::Wait)
    })
    .unwrap();
    deliver(&mut t.c, &f[1..]).unwrap();
    assert!(matches!(t.c.poll_action(), Some(ClientAction::ConnectStreams(_))));
    assert_eq!(t.c.poll_action(), Some(ClientAction::StartTest));
}

#[test]
fn a_changed_welcome_is_caught_at_the_clients_first_sealed_message() {
    let mut t = Talk::keyed();
    deliver(&mut t.s, &frames(&mut t.c)).unwrap();
    let mut welcome = frames(&mut t.s);
    let Message::Welcome {
        version,
        software,
        mut limits,
        auth,
        control,
    } = decode_body(&welcome[0][4..]).unwrap()
    else {
        panic!()
    };
    limits.max_streams = Some(1);
    let changed = body(&Message::Welcome {
        version,
        software,
        limits,
        auth,
        control,
    });
    welcome[0] = [&(changed.len() as u32).to_be_bytes()[..], &changed].concat();
    deliver(&mut t.c, &welcome).unwrap();
    deliver(&mut t.s, &frames(&mut t.c)).unwrap();
    let Some(ServerAction::AuthFailed { reply, detail }) = t.s.poll_action() else {
        panic!("the server must refuse")
    };
    assert!(detail.contains("control message 0 from the client"), "{detail}");
    assert_eq!(t.s.machine().phase(), ServerPhase::Failed);
    // The refusal goes unsealed (the client's keys differ from the server's anyway).
    let back = frames(&mut t.s);
    assert_eq!(decode_body(&back[0][4..]).unwrap(), reply);
}

#[test]
fn a_request_relayed_from_another_connection_is_refused() {
    // The victim's conversation, with its sealed request.
    let mut victim = Talk::keyed().greeted();
    let request = frames(&mut victim.c);
    // The attacker's own connection to the server: the same hello (relayed), a fresh nonce.
    let mut other = Talk::new(Some(SECRET), Some(SECRET), [9; NONCE_LEN]);
    let hello = frames(&mut other.c);
    deliver(&mut other.s, &hello).unwrap();
    let _welcome = frames(&mut other.s);
    deliver(&mut other.s, &request).unwrap();
    assert!(matches!(
        other.s.poll_action(),
        Some(ServerAction::AuthFailed { .. })
    ));
    assert_eq!(other.s.machine().authenticated(), None);
}

#[test]
fn an_end_without_the_key_fails_at_its_first_message() {
    // A server holding another secret under the same name refuses the request, unsealed.
    let mut t = Talk::new(Some(SECRET), Some(b"not-alices-secret-at-all"), SERVER_NONCE).greeted();
    deliver(&mut t.s, &frames(&mut t.c)).unwrap();
    let Some(ServerAction::AuthFailed { detail, .. }) = t.s.poll_action() else {
        panic!()
    };
    assert!(detail.contains("does not hold the key 'alice'"), "{detail}");
    // The client cannot check that refusal: it fails, quoting it as unauthenticated.
    let e = deliver(&mut t.c, &frames(&mut t.s)).unwrap_err();
    match &e {
        ProtocolError::Forged { said: Some(s), .. } => {
            assert!(s.contains("authentication failed"), "{s}")
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("unauthenticated, it said"), "{e}");

    // An impostor that skips the check and answers `accepted` with a guessed key.
    let mut t = Talk::keyed();
    let hello = frames(&mut t.c);
    let mut impostor = Guard::new();
    impostor.open(&hello[0][4..]).unwrap();
    let welcome = Message::Welcome {
        version: super::PROTOCOL_VERSION,
        software: "impostor".into(),
        limits: Default::default(),
        auth: Some(auth::challenge(&SERVER_NONCE)),
        control: false,
    };
    let w = impostor.seal(&body(&welcome));
    impostor.start(Ok(KeyMaterial::new(
        key(b"guessed-Wrong-key-7531"),
        SERVER_NONCE,
        CLIENT_NONCE,
        Side::Server,
    )));
    deliver(&mut t.c, &[w]).unwrap();
    let accepted = Admission::plain(SessionId([1; 16])).message();
    let e = deliver(&mut t.c, &[impostor.seal(&body(&accepted))]).unwrap_err();
    assert!(bad_tag(&e, 0), "{e:?}");
    assert!(t.c.poll_action().is_none());
}

#[test]
fn an_unknown_key_name_fails_at_the_same_step_as_a_wrong_key() {
    let mut t = Talk::new(Some(SECRET), Some(SECRET), SERVER_NONCE);
    t.c = {
        let s = ClientSession::new(TestSpec::default().validated().unwrap())
            .with_auth(Key::new("carol", SECRET).unwrap(), CLIENT_NONCE);
        let mut c = Conn::new(s);
        c.handle_local(Instant::now(), |s, now| Ok(ClientAction::Send(s.hello(now))))
            .unwrap();
        c
    };
    let mut t = t.greeted();
    deliver(&mut t.s, &frames(&mut t.c)).unwrap();
    let Some(ServerAction::AuthFailed { reply, detail }) = t.s.poll_action() else {
        panic!()
    };
    assert!(detail.contains("no key named 'carol'"), "{detail}");
    let Message::Rejected { reason, code } = reply else {
        panic!()
    };
    assert_eq!(code, Refusal::Authentication);
    assert!(
        !reason.contains("carol"),
        "the client is not told which: {reason}"
    );
}

#[test]
fn versions_never_downgrade_a_key() {
    // A version-1 client (a proof in its request, no key in its hello) is refused by name.
    let mut t = Talk::new(None, Some(SECRET), SERVER_NONCE);
    deliver(&mut t.s, &frames(&mut t.c)).unwrap();
    let _welcome = frames(&mut t.s);
    let old_request = Message::TestRequest {
        spec: Box::default(),
        auth: Some(Box::new(auth::Proof {
            name: "alice".into(),
            client_nonce: hex::encode(CLIENT_NONCE),
            mac: "00".repeat(32),
        })),
    };
    t.s.handle_input(&super::encode(&old_request), Instant::now())
        .unwrap();
    let Some(ServerAction::AuthFailed { reply, .. }) = t.s.poll_action() else {
        panic!()
    };
    let Message::Rejected { reason, .. } = reply else {
        panic!()
    };
    assert!(
        reason.contains("version 1") && reason.contains("version 2"),
        "{reason}"
    );

    // A client with a key against a server without keys, or a version-1 server: refused at the welcome.
    let mut t = Talk::new(Some(SECRET), None, SERVER_NONCE);
    deliver(&mut t.s, &frames(&mut t.c)).unwrap();
    let e = deliver(&mut t.c, &frames(&mut t.s)).unwrap_err();
    assert_eq!(e, ProtocolError::ServerWithoutAuth);
    let mut t = Talk::keyed();
    let _hello = frames(&mut t.c);
    let mut challenge = auth::challenge(&SERVER_NONCE);
    challenge.version = 1;
    let old_welcome = Message::Welcome {
        version: super::PROTOCOL_VERSION,
        software: "landspeed 0.0.9".into(),
        limits: Default::default(),
        auth: Some(challenge),
        control: false,
    };
    let e = t.c.handle_input(&super::encode(&old_welcome), Instant::now());
    assert_eq!(e, Err(ProtocolError::AuthVersion(1)));
    assert!(frames(&mut t.c).is_empty(), "no request went out");
    // Without keys on either end, nothing changes: plain frames, no tags.
    let mut t = Talk::new(None, None, SERVER_NONCE).greeted();
    let request = frames(&mut t.c);
    assert!(decode_body(&request[0][4..]).is_ok());
}
