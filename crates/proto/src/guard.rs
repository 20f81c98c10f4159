//! Binds a control conversation to a shared key (landspeed authentication version 2). Without it, a
//! key would prove only who opened the connection: an on-path attacker could let the client prove
//! itself and then speak for the server (its limits, its `accepted` with the certificate to pin, its
//! results). With it, both ends derive two keys (one per direction) from the shared secret, both
//! nonces and the bytes of the greeting (hello and welcome, as sent), and every later frame carries an
//! HMAC-SHA256 tag over its sequence number and its bytes. A frame that was changed, dropped, replayed,
//! reordered or moved from another connection fails at the first frame it touches, and an end that
//! does not hold the key fails at its first message. `Guard` is the byte-level state of one
//! connection; `Conn` runs every frame through it. Pure: no clock, no I/O, no randomness.

use super::auth::{AuthError, Key, NONCE_LEN};
use super::preamble::StreamKey;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Bytes of the tag that ends every sealed frame.
pub const TAG_LEN: usize = 32;
/// The labels that make the two directions' keys differ (a frame cannot be reflected to its sender).
const CLIENT_TO_SERVER: &[u8] = b"landspeed control v2: client to server\0";
const SERVER_TO_CLIENT: &[u8] = b"landspeed control v2: server to client\0";
/// The label of the key that proves a test's data connections (data preamble version 2).
const STREAMS: &[u8] = b"landspeed data v2: stream key\0";

type HmacSha256 = Hmac<Sha256>;

/// Which end of the conversation this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The end that sent the hello (a client or a controller).
    Client,
    /// The end that sent the welcome.
    Server,
}

impl Side {
    fn peer(self) -> &'static str {
        match self {
            Side::Client => "server",
            Side::Server => "client",
        }
    }
}

/// What a conversation's keys come from: the shared key and both nonces.
#[derive(Debug, Clone)]
pub struct KeyMaterial {
    key: Key,
    server_nonce: [u8; NONCE_LEN],
    client_nonce: [u8; NONCE_LEN],
    side: Side,
    /// Both ends said in the greeting that they prove data connections with a MAC.
    stream_macs: bool,
    /// A decoy's: every frame is checked as a real key's would be, then refused with this.
    refuse: Option<AuthError>,
}

impl KeyMaterial {
    /// The same material, with a stream key when both ends agreed to prove data connections.
    pub fn with_stream_macs(mut self, agreed: bool) -> Self {
        self.stream_macs = agreed;
        self
    }

    /// The material for `side` of a conversation keyed with `key`.
    pub fn new(key: Key, server_nonce: [u8; NONCE_LEN], client_nonce: [u8; NONCE_LEN], side: Side) -> Self {
        KeyMaterial {
            key,
            server_nonce,
            client_nonce,
            side,
            stream_macs: false,
            refuse: None,
        }
    }

    /// Material for a peer that named a key this end does not have: derived and checked exactly as a
    /// real key's (so an unknown name costs the same work, and takes the same time, as a wrong key),
    /// and its first frame refused with `why` whatever its tag.
    pub fn decoy(
        server_nonce: [u8; NONCE_LEN],
        client_nonce: [u8; NONCE_LEN],
        side: Side,
        why: AuthError,
    ) -> Self {
        let key = Key::new("decoy", b"landspeed decoy key: never accepted").expect("a valid decoy key");
        KeyMaterial {
            refuse: Some(why),
            ..KeyMaterial::new(key, server_nonce, client_nonce, side)
        }
    }

    /// Derives both directions' keys, bound to the greeting whose bytes hash to `transcript`.
    fn derive(&self, transcript: &[u8; 32]) -> Keyed {
        let mut salt = self.server_nonce.to_vec();
        salt.extend_from_slice(&self.client_nonce);
        let hk = hkdf::Hkdf::<Sha256>::new(Some(&salt), self.key.secret());
        let expand = |label: &[u8]| {
            let mut okm = [0u8; 32];
            let info = [label, self.key.name.as_bytes(), b"\0", transcript].concat();
            hk.expand(&info, &mut okm)
                .expect("32 bytes is a valid HKDF-SHA256 output length");
            okm
        };
        let direction = |label: &[u8]| Direction {
            mac: HmacSha256::new_from_slice(&expand(label)).expect("HMAC takes keys of any length"),
            seq: 0,
        };
        let (c2s, s2c) = (direction(CLIENT_TO_SERVER), direction(SERVER_TO_CLIENT));
        let (send, recv) = match self.side {
            Side::Client => (c2s, s2c),
            Side::Server => (s2c, c2s),
        };
        Keyed {
            send,
            recv,
            side: self.side,
            name: self.key.name.clone(),
            peer_proven: false,
            stream_key: self.stream_macs.then(|| StreamKey::new(&expand(STREAMS))),
            refuse: self.refuse.clone(),
        }
    }
}

/// Why a frame from the peer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// A sealed frame too short to hold its tag.
    #[error("control message {seq} from the {from} is too short to carry its MAC ({len} bytes)")]
    Short {
        /// The frame's number in its direction, from 0.
        seq: u64,
        /// Who sent it.
        from: &'static str,
        /// Its length.
        len: usize,
    },
    /// The tag does not match.
    #[error(
        "control message {seq} from the {from} does not carry this conversation's MAC: it was changed, \
         dropped, replayed or reordered on the way, or the {from} does not hold the key '{key}'"
    )]
    BadTag {
        /// The frame's number in its direction, from 0.
        seq: u64,
        /// Who sent it.
        from: &'static str,
        /// The key's name.
        key: String,
    },
    /// The peer named a key this end does not have.
    #[error(transparent)]
    Key(#[from] AuthError),
}

/// One direction: its key and the number of the next frame.
#[derive(Clone)]
struct Direction {
    mac: HmacSha256,
    seq: u64,
}

impl Direction {
    fn mac_of(&self, body: &[u8]) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(&self.seq.to_be_bytes());
        m.update(body);
        m
    }
}

/// A keyed conversation.
#[derive(Clone)]
pub struct Keyed {
    send: Direction,
    recv: Direction,
    side: Side,
    name: String,
    peer_proven: bool,
    /// What proves the test's data connections, when both ends agreed to.
    stream_key: Option<StreamKey>,
    /// A decoy's refusal (`KeyMaterial::decoy`).
    refuse: Option<AuthError>,
}

impl std::fmt::Debug for Keyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Keyed(key {}, sent {}, received {})",
            self.name, self.send.seq, self.recv.seq
        )
    }
}

/// The byte-level protection of one control connection.
#[derive(Debug, Clone)]
pub enum Guard {
    /// Before keys (or without any): frames go as they are, and their bytes are hashed into the
    /// transcript the keys will be bound to.
    Plain(Sha256),
    /// Every frame is sealed and opened.
    Keyed(Box<Keyed>),
    /// The peer named a key this end does not have: its next frame is refused with this error.
    Refusing(AuthError),
    /// A frame failed: nothing more is taken, and what is still said (a refusal the peer could not
    /// check anyway) goes unsealed.
    Broken,
}

impl Default for Guard {
    fn default() -> Self {
        Guard::Plain(Sha256::new())
    }
}

/// A frame: its length, then its bytes.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

impl Guard {
    /// Nothing keyed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Still before keys.
    pub fn is_plain(&self) -> bool {
        matches!(self, Guard::Plain(_))
    }

    /// Keys are in force and a frame from the peer has carried the right tag: the key's name.
    pub fn proven(&self) -> Option<&str> {
        match self {
            Guard::Keyed(k) if k.peer_proven => Some(&k.name),
            _ => None,
        }
    }

    /// The key that proves this conversation's data connections: once the peer has proven the
    /// conversation's key, and only when both ends agreed in the greeting to use it.
    pub fn stream_key(&self) -> Option<&StreamKey> {
        match self {
            Guard::Keyed(k) if k.peer_proven && k.refuse.is_none() => k.stream_key.as_ref(),
            _ => None,
        }
    }

    /// From now on, frames are sealed with keys from `material` and the greeting so far (or, when
    /// the peer named an unknown key, refused). Only a plain guard starts.
    pub fn start(&mut self, material: Result<KeyMaterial, AuthError>) {
        let Guard::Plain(transcript) = self else {
            return;
        };
        let digest: [u8; 32] = transcript.clone().finalize().into();
        *self = match material {
            Ok(m) => Guard::Keyed(Box::new(m.derive(&digest))),
            Err(e) => Guard::Refusing(e),
        };
    }

    /// Gives up on the conversation (a frame failed).
    pub fn break_off(&mut self) {
        *self = Guard::Broken;
    }

    /// The frame that carries `body`: sealed when keyed, else as it is (and hashed while plain).
    pub fn seal(&mut self, body: &[u8]) -> Vec<u8> {
        match self {
            Guard::Plain(t) => {
                let out = framed(body);
                t.update(&out);
                out
            }
            Guard::Keyed(k) => {
                let tag = k.send.mac_of(body).finalize().into_bytes();
                k.send.seq += 1;
                framed(&[body, &tag[..]].concat())
            }
            Guard::Refusing(_) | Guard::Broken => framed(body),
        }
    }

    /// The body of a frame from the peer (`frame`: the bytes after its length), its tag checked
    /// when keyed. A frame that fails leaves the guard as it was; the caller breaks off.
    pub fn open<'a>(&mut self, frame: &'a [u8]) -> Result<&'a [u8], GuardError> {
        match self {
            Guard::Plain(t) => {
                t.update((frame.len() as u32).to_be_bytes());
                t.update(frame);
                Ok(frame)
            }
            Guard::Keyed(k) => {
                let (seq, from) = (k.recv.seq, k.side.peer());
                let Some(split) = frame.len().checked_sub(TAG_LEN).filter(|s| *s > 0) else {
                    return Err(GuardError::Short {
                        seq,
                        from,
                        len: frame.len(),
                    });
                };
                let (body, tag) = frame.split_at(split);
                let checked = k.recv.mac_of(body).verify_slice(tag);
                if let Some(why) = &k.refuse {
                    return Err(GuardError::Key(why.clone()));
                }
                checked.map_err(|_| GuardError::BadTag {
                    seq,
                    from,
                    key: k.name.clone(),
                })?;
                k.recv.seq += 1;
                k.peer_proven = true;
                Ok(body)
            }
            Guard::Refusing(e) => Err(GuardError::Key(e.clone())),
            Guard::Broken => Ok(frame),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(secret: &[u8]) -> Key {
        Key::new("alice", secret).unwrap()
    }

    /// A client's and a server's guard after the same greeting.
    fn pair(client_secret: &[u8], server_secret: &[u8]) -> (Guard, Guard) {
        let (sn, cn) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let (mut c, mut s) = (Guard::new(), Guard::new());
        for greeting in [&b"hello"[..], b"welcome"] {
            let f = c.seal(greeting);
            s.open(&f[4..]).unwrap();
        }
        c.start(Ok(KeyMaterial::new(key(client_secret), sn, cn, Side::Client)));
        s.start(Ok(KeyMaterial::new(key(server_secret), sn, cn, Side::Server)));
        (c, s)
    }

    const SECRET: &[u8] = b"0123456789abcdef-alice";

    #[test]
    fn a_decoy_checks_every_frame_like_a_key_and_refuses_it_whatever_its_tag() {
        let (sn, cn) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let why = AuthError::UnknownName("mallory".into());
        // Even a frame sealed with the decoy's own (public) secret is refused: the decoy only makes an
        // unknown name cost what a wrong key costs.
        let decoy = KeyMaterial::decoy(sn, cn, Side::Server, why.clone());
        let mut s = Guard::new();
        s.start(Ok(decoy));
        assert!(matches!(s, Guard::Keyed(_)), "derived as a real key is");
        let mut c = Guard::new();
        let fake = Key::new("decoy", b"landspeed decoy key: never accepted").unwrap();
        c.start(Ok(KeyMaterial::new(fake, sn, cn, Side::Client)));
        let f = c.seal(b"{}");
        assert_eq!(s.open(&f[4..]), Err(GuardError::Key(why)));
        assert_eq!(s.proven(), None);
    }

    #[test]
    fn sealed_frames_open_in_order_both_ways() {
        let (mut c, mut s) = pair(SECRET, SECRET);
        for i in 0..3u8 {
            let f = c.seal(&[b'{', i, b'}']);
            assert_eq!(f.len(), 4 + 3 + TAG_LEN);
            assert_eq!(s.open(&f[4..]).unwrap(), &[b'{', i, b'}']);
            let back = s.seal(b"{}");
            assert_eq!(c.open(&back[4..]).unwrap(), b"{}");
        }
        assert_eq!((c.proven(), s.proven()), (Some("alice"), Some("alice")));
    }

    #[test]
    fn both_ends_derive_the_same_stream_key_once_the_peer_is_proven_and_only_when_agreed() {
        use crate::messages::SessionId;
        let (sn, cn) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let keyed = |agreed: bool, secret: &[u8]| {
            let (mut c, mut s) = (Guard::new(), Guard::new());
            let m = |side| KeyMaterial::new(key(secret), sn, cn, side).with_stream_macs(agreed);
            c.start(Ok(m(Side::Client)));
            s.start(Ok(m(Side::Server)));
            (c, s)
        };
        let (mut c, mut s) = keyed(true, SECRET);
        assert!(c.stream_key().is_none(), "not before the peer proved the key");
        let f = c.seal(b"{}");
        s.open(&f[4..]).unwrap();
        let back = s.seal(b"{}");
        c.open(&back[4..]).unwrap();
        let (ck, sk) = (c.stream_key().unwrap(), s.stream_key().unwrap());
        let sid = SessionId([5; 16]);
        assert!(sk.verify(sid, 1, &ck.mac(sid, 1)));
        // Not agreed: no stream key, the preambles stay version 1.
        let (mut c, mut s) = keyed(false, SECRET);
        let f = c.seal(b"{}");
        s.open(&f[4..]).unwrap();
        assert!(s.stream_key().is_none());
        // Another secret, another stream key.
        let (mut c2, mut s2) = keyed(true, b"not-alices-key-at-all");
        let f = c2.seal(b"{}");
        s2.open(&f[4..]).unwrap();
        assert!(!sk.verify(sid, 1, &s2.stream_key().unwrap().mac(sid, 1)));
    }

    #[test]
    fn changed_dropped_replayed_reordered_and_reflected_frames_fail() {
        let (mut c, mut s) = pair(SECRET, SECRET);
        let (a, b) = (c.seal(b"{\"a\":1}"), c.seal(b"{\"b\":2}"));
        let mut changed = a.clone();
        changed[6] ^= 1;
        assert!(matches!(
            s.clone().open(&changed[4..]),
            Err(GuardError::BadTag { seq: 0, .. })
        ));
        // Dropped or reordered: b where a was due.
        assert!(matches!(
            s.clone().open(&b[4..]),
            Err(GuardError::BadTag { seq: 0, .. })
        ));
        s.open(&a[4..]).unwrap();
        // Replayed: a again where b is due.
        assert!(matches!(
            s.clone().open(&a[4..]),
            Err(GuardError::BadTag { seq: 1, .. })
        ));
        // Reflected: the client's own frame back to it.
        assert!(c.clone().open(&a[4..]).is_err());
        s.open(&b[4..]).unwrap();
        let short = s.clone().open(&[0u8; TAG_LEN]);
        assert!(
            matches!(short, Err(GuardError::Short { len: 32, .. })),
            "{short:?}"
        );
    }

    #[test]
    fn a_wrong_key_or_another_greeting_fails_at_the_first_frame() {
        let (mut c, mut s) = pair(SECRET, b"not-alices-key-at-all");
        let f = c.seal(b"{}");
        let e = s.open(&f[4..]).unwrap_err();
        assert!(e.to_string().contains("does not hold the key 'alice'"), "{e}");
        assert_eq!(s.proven(), None);
        // The same key after a greeting that differs by one byte.
        let (sn, cn) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let (mut c, mut s) = (Guard::new(), Guard::new());
        let f = c.seal(b"{\"limits\":1}");
        s.open(b"{\"limits\":2}").unwrap();
        let _ = f;
        c.start(Ok(KeyMaterial::new(key(SECRET), sn, cn, Side::Client)));
        s.start(Ok(KeyMaterial::new(key(SECRET), sn, cn, Side::Server)));
        let f = c.seal(b"{}");
        assert!(s.open(&f[4..]).is_err());
    }

    #[test]
    fn an_unknown_key_is_refused_and_a_broken_guard_sends_plain() {
        let mut s = Guard::new();
        s.start(Err(AuthError::UnknownName("carol".into())));
        assert!(matches!(
            s.open(b"{}"),
            Err(GuardError::Key(AuthError::UnknownName(_)))
        ));
        s.break_off();
        assert_eq!(s.seal(b"{}"), framed(b"{}"));
    }
}
