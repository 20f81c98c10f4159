//! Return routability for UDP streams. A UDP hello is one datagram whose source address anyone can
//! forge, and the server answers a hello by sending the test's data to that address: without a check,
//! a client could make the server flood any host (reflection). The rule here is QUIC's (RFC 9000 §8):
//! the server sends test data only to an address that has shown it receives there, and until then it
//! answers each datagram with fewer bytes than the datagram had (well under QUIC's 3×).
//!
//! An address is validated when it is the control connection's (a TCP handshake already proved it),
//! or when a hello carries a token the server sent to that address: 16 bytes of HMAC-SHA256 under a
//! secret the server draws at start, over the session, the stream and the address. The server keeps
//! no state per challenge, so a flood of forged hellos costs it a MAC each and the forged address at
//! most one 44-byte challenge per 28-byte hello.
//!
//! ```text
//! hello:           the stream's data preamble (version 1: 28 bytes; version 2, with its MAC: 44)
//! hello + token:   the hello | token [16]                                                 (44 or 60 bytes)
//! challenge:       `LSPD` | version u16 = 1 | b'T' | 0 | session [16] | stream u32 | token [16] (44 bytes)
//! ```
//!
//! A test whose preambles carry a MAC (a keyed test, `preamble::StreamKey`) takes a hello only with
//! the right MAC: without the key, a hello gets neither a test nor a challenge.

use super::messages::SessionId;
use super::preamble::{Preamble, StreamKey, StreamMac, DATA_LEN, MAGIC, PROTOCOL_VERSION};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::{IpAddr, SocketAddr};

/// Bytes of a return-routability token.
pub const TOKEN_LEN: usize = 16;
/// Bytes of a challenge, and of a hello that carries its token.
pub const CHALLENGE_LEN: usize = DATA_LEN + TOKEN_LEN;
/// Bytes of the server's secret for tokens.
pub const SECRET_LEN: usize = 32;
/// The challenge's kind byte.
const CHALLENGE_KIND: u8 = b'T';

/// A token the server sends to an address and a hello from that address must echo.
pub type Token = [u8; TOKEN_LEN];

/// A UDP hello: which stream of which test, its MAC in a keyed test, and the token it echoes, if
/// any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The test.
    pub session: SessionId,
    /// The stream.
    pub stream: u32,
    /// Its MAC under the test's stream key (data preamble version 2).
    pub mac: Option<StreamMac>,
    /// The token of a challenge this hello answers.
    pub token: Option<Token>,
}

impl Hello {
    /// The hello of stream `stream` of `session`, with its MAC when the test has a stream key.
    pub fn new(session: SessionId, stream: u32, key: Option<&StreamKey>) -> Hello {
        Hello {
            session,
            stream,
            mac: key.map(|k| k.mac(session, stream)),
            token: None,
        }
    }

    /// Reads a hello datagram (with or without a MAC, with or without a token); None for anything
    /// else.
    pub fn parse(buf: &[u8]) -> Option<Hello> {
        let Ok(Some((
            Preamble::Data {
                session, stream, mac, ..
            },
            used,
        ))) = Preamble::parse(buf)
        else {
            return None;
        };
        let token = match &buf[used..] {
            [] => None,
            t if t.len() == TOKEN_LEN => {
                let mut k = [0u8; TOKEN_LEN];
                k.copy_from_slice(t);
                Some(k)
            }
            _ => return None,
        };
        Some(Hello {
            session,
            stream,
            mac,
            token,
        })
    }

    /// The stream's data preamble this hello carries.
    pub fn preamble(&self) -> Preamble {
        Preamble::with_mac(self.session, self.stream, self.mac)
    }

    /// The datagram.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.preamble().encode();
        if let Some(t) = self.token {
            out.extend_from_slice(&t);
        }
        out
    }
}

/// The server's answer to a hello from an address it has not validated: the token to echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Challenge {
    /// The test.
    pub session: SessionId,
    /// The stream.
    pub stream: u32,
    /// What the next hello from that address must carry.
    pub token: Token,
}

impl Challenge {
    /// The datagram (44 bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHALLENGE_LEN);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        out.extend_from_slice(&[CHALLENGE_KIND, 0]);
        out.extend_from_slice(&self.session.0);
        out.extend_from_slice(&self.stream.to_be_bytes());
        out.extend_from_slice(&self.token);
        out
    }

    /// Reads a challenge; None for anything else.
    pub fn parse(buf: &[u8]) -> Option<Challenge> {
        if buf.len() != CHALLENGE_LEN
            || buf[..4] != MAGIC
            || buf[4..6] != PROTOCOL_VERSION.to_be_bytes()
            || buf[6] != CHALLENGE_KIND
        {
            return None;
        }
        let mut session = [0u8; 16];
        session.copy_from_slice(&buf[8..24]);
        let mut token = [0u8; TOKEN_LEN];
        token.copy_from_slice(&buf[DATA_LEN..]);
        Some(Challenge {
            session: SessionId(session),
            stream: u32::from_be_bytes([buf[24], buf[25], buf[26], buf[27]]),
            token,
        })
    }
}

/// What the server does with a hello for a test whose control connection came from `control`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The address is validated: the hello goes to its test.
    Accept,
    /// Not validated: send this challenge to the hello's address, nothing else.
    Challenge(Challenge),
}

/// The server's token secret and its rule.
pub struct Validator {
    secret: [u8; SECRET_LEN],
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Validator { secret: <hidden> }")
    }
}

impl Validator {
    /// A validator with `secret` (random bytes the server draws at start).
    pub fn new(secret: [u8; SECRET_LEN]) -> Validator {
        Validator { secret }
    }

    fn mac(&self, session: SessionId, stream: u32, from: SocketAddr) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes keys of any length");
        m.update(b"landspeed udp return routability");
        m.update(&session.0);
        m.update(&stream.to_be_bytes());
        match from.ip().to_canonical() {
            IpAddr::V4(a) => m.update(&a.octets()),
            IpAddr::V6(a) => m.update(&a.octets()),
        }
        m.update(&from.port().to_be_bytes());
        m
    }

    /// The token for `from` to echo in its hello for stream `stream` of `session`.
    pub fn token(&self, session: SessionId, stream: u32, from: SocketAddr) -> Token {
        let tag = self.mac(session, stream, from).finalize().into_bytes();
        let mut t = [0u8; TOKEN_LEN];
        t.copy_from_slice(&tag[..TOKEN_LEN]);
        t
    }

    /// Judges `hello` from `from` for a test whose control connection came from `control`: accepted
    /// when `from` is the control connection's address or the hello echoes `from`'s token (compared
    /// in constant time), else a challenge.
    pub fn judge(&self, hello: &Hello, from: SocketAddr, control: IpAddr) -> Verdict {
        if from.ip().to_canonical() == control.to_canonical() {
            return Verdict::Accept;
        }
        if let Some(t) = hello.token {
            if self
                .mac(hello.session, hello.stream, from)
                .verify_truncated_left(&t)
                .is_ok()
            {
                return Verdict::Accept;
            }
        }
        Verdict::Challenge(Challenge {
            session: hello.session,
            stream: hello.stream,
            token: self.token(hello.session, hello.stream, from),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const SID: SessionId = SessionId([9; 16]);

    #[test]
    fn the_control_address_is_accepted_any_other_is_challenged() {
        let v = Validator::new([1; 32]);
        let h = Hello::new(SID, 3, None);
        let control: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(v.judge(&h, addr("127.0.0.1:4000"), control), Verdict::Accept);
        // An IPv4-mapped IPv6 address is the same host.
        assert_eq!(
            v.judge(&h, addr("[::ffff:127.0.0.1]:4000"), control),
            Verdict::Accept
        );
        let Verdict::Challenge(c) = v.judge(&h, addr("127.0.0.2:4000"), control) else {
            panic!("a foreign address must be challenged");
        };
        assert_eq!((c.session, c.stream), (SID, 3));
        // The challenge is smaller than three hellos: the amplification bound.
        assert!(c.encode().len() < 3 * h.encode().len());
    }

    #[test]
    fn only_the_token_sent_to_that_address_validates_it() {
        let v = Validator::new([1; 32]);
        let control: IpAddr = "10.9.9.9".parse().unwrap();
        let from = addr("127.0.0.2:4000");
        let t = v.token(SID, 3, from);
        let h = |token, stream| Hello {
            token: Some(token),
            ..Hello::new(SID, stream, None)
        };
        assert_eq!(v.judge(&h(t, 3), from, control), Verdict::Accept);
        // The same token from another port, another address, for another stream, or from another
        // server's secret: challenged again.
        assert_ne!(
            v.judge(&h(t, 3), addr("127.0.0.2:4001"), control),
            Verdict::Accept
        );
        assert_ne!(
            v.judge(&h(t, 3), addr("127.0.0.3:4000"), control),
            Verdict::Accept
        );
        assert_ne!(v.judge(&h(t, 4), from, control), Verdict::Accept);
        let other = Validator::new([2; 32]);
        assert_ne!(other.judge(&h(t, 3), from, control), Verdict::Accept);
        let mut bad = t;
        bad[15] ^= 1;
        assert_ne!(v.judge(&h(bad, 3), from, control), Verdict::Accept);
    }

    #[test]
    fn datagrams_round_trip_and_nothing_else_parses() {
        let h = Hello {
            token: Some([5; TOKEN_LEN]),
            ..Hello::new(SID, 7, None)
        };
        assert_eq!(Hello::parse(&h.encode()), Some(h));
        let plain = Hello { token: None, ..h };
        assert_eq!(plain.encode().len(), DATA_LEN);
        assert_eq!(Hello::parse(&plain.encode()), Some(plain));
        // A keyed test's hellos carry the MAC, with and without the token.
        let key = StreamKey::new(&[4; 32]);
        let keyed = Hello::new(SID, 7, Some(&key));
        assert_eq!(keyed.encode().len(), super::super::preamble::MAC_DATA_LEN);
        assert_eq!(Hello::parse(&keyed.encode()), Some(keyed));
        assert!(key.admits(&keyed.preamble()));
        let answered = Hello {
            token: Some([5; TOKEN_LEN]),
            ..keyed
        };
        assert_eq!(answered.encode().len(), CHALLENGE_LEN + TOKEN_LEN);
        assert_eq!(Hello::parse(&answered.encode()), Some(answered));
        let c = Challenge {
            session: SID,
            stream: 7,
            token: [6; TOKEN_LEN],
        };
        assert_eq!(Challenge::parse(&c.encode()), Some(c));
        assert_eq!(Hello::parse(&c.encode()), None, "a challenge is not a hello");
        assert_eq!(Challenge::parse(&h.encode()), None, "a hello is not a challenge");
        let mut long = h.encode();
        long.push(0);
        assert_eq!(Hello::parse(&long), None);
        assert_eq!(Hello::parse(&h.encode()[..DATA_LEN + 3]), None);
    }
}
