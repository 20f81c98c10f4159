//! The first bytes of every connection to a landspeed server. They let one port serve control
//! connections, data streams and (later) iperf3 clients: iperf3 starts with a cookie of lowercase letters
//! and digits 2-7, landspeed with the uppercase magic `LSPD`, so one byte is enough to tell them apart.
//!
//! Layout (all integers big-endian):
//!
//! ```text
//! control: `LSPD` | version u16 | kind u8 = b'C' | reserved u8 = 0                      (8 bytes)
//! data:    `LSPD` | version u16 | kind u8 = b'D' | reserved u8 = 0 | session [16] | stream u32 (28 bytes)
//! data, with its MAC (version 2): the same with version 2 | mac [16]                       (44 bytes)
//! ```
//!
//! The session id travels in clear (in `accepted` and in every data preamble), so it does not prove
//! that a data connection is the client's. In a conversation authenticated with a key, both ends
//! also derive a stream key from it (`StreamKey`), and when both said in the greeting that they
//! speak data preamble version 2, every data preamble carries a MAC over its session and stream
//! under that key: a stream injected by anyone who does not hold the key is refused before it
//! reaches the test. Keyless conversations keep version 1, byte for byte.

use super::messages::SessionId;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The four bytes every landspeed connection starts with.
pub const MAGIC: [u8; 4] = *b"LSPD";
/// The control protocol's version.
pub const PROTOCOL_VERSION: u16 = 1;
/// A control connection's preamble, bytes.
pub const CONTROL_LEN: usize = 8;
/// A data connection's preamble, bytes.
pub const DATA_LEN: usize = 28;
/// The data preamble's version that carries a MAC (negotiated in the greeting).
pub const MAC_DATA_VERSION: u16 = 2;
/// Bytes of a data preamble's MAC.
pub const MAC_LEN: usize = 16;
/// A data connection's preamble with its MAC, bytes.
pub const MAC_DATA_LEN: usize = DATA_LEN + MAC_LEN;
/// The longest preamble.
pub const MAX_LEN: usize = MAC_DATA_LEN;

/// A data preamble's MAC: the first 16 bytes of HMAC-SHA256 under the stream key.
pub type StreamMac = [u8; MAC_LEN];

/// The key that proves a data connection belongs to an authenticated test: derived from the control
/// conversation's key and greeting (docs/protocol.md, "Authentication"), known to both ends only.
#[derive(Clone)]
pub struct StreamKey(Hmac<Sha256>);

impl std::fmt::Debug for StreamKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamKey(<secret>)")
    }
}

impl StreamKey {
    /// The key from its 32 bytes.
    pub fn new(bytes: &[u8; 32]) -> StreamKey {
        StreamKey(Hmac::new_from_slice(bytes).expect("HMAC takes keys of any length"))
    }

    fn mac_of(&self, session: SessionId, stream: u32) -> Hmac<Sha256> {
        let mut m = self.0.clone();
        m.update(&MAGIC);
        m.update(&MAC_DATA_VERSION.to_be_bytes());
        m.update(&session.0);
        m.update(&stream.to_be_bytes());
        m
    }

    /// The MAC of stream `stream` of `session`.
    pub fn mac(&self, session: SessionId, stream: u32) -> StreamMac {
        let tag = self.mac_of(session, stream).finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&tag[..MAC_LEN]);
        out
    }

    /// Whether `mac` is the MAC of stream `stream` of `session` (compared in constant time).
    pub fn verify(&self, session: SessionId, stream: u32, mac: &StreamMac) -> bool {
        self.mac_of(session, stream).verify_truncated_left(mac).is_ok()
    }

    /// Whether the data preamble `p` belongs to `session` under this key: version 2 with the right
    /// MAC. Anything else (no MAC, another session, a wrong MAC) does not.
    pub fn admits(&self, p: &Preamble) -> bool {
        match p {
            Preamble::Data {
                session,
                stream,
                mac: Some(mac),
                ..
            } => self.verify(*session, *stream, mac),
            _ => false,
        }
    }
}

/// Who is talking, judged from the first byte of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    /// landspeed's preamble (`L`).
    Landspeed,
    /// An iperf3 cookie (a-z, 2-7).
    Iperf3,
    /// Anything else.
    Unknown,
}

/// Classifies a connection by its first byte.
pub fn classify(first: u8) -> Speaker {
    match first {
        b'L' => Speaker::Landspeed,
        b'a'..=b'z' | b'2'..=b'7' => Speaker::Iperf3,
        _ => Speaker::Unknown,
    }
}

/// The first bytes of a landspeed connection: what kind it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preamble {
    /// A control connection (kind `C`).
    Control {
        /// The protocol version.
        version: u16,
    },
    /// A data connection (kind `D`).
    Data {
        /// The protocol version.
        version: u16,
        /// The test it belongs to.
        session: SessionId,
        /// Its stream number.
        stream: u32,
        /// Its MAC under the test's stream key (version 2 only).
        mac: Option<StreamMac>,
    },
}

/// Why a connection's first bytes are not a landspeed preamble.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreambleError {
    /// Not `LSPD`.
    #[error("not a landspeed connection (first bytes {0:02x?})")]
    BadMagic([u8; 4]),
    /// A kind other than `C` or `D`.
    #[error("unknown connection kind {0:#04x}")]
    BadKind(u8),
    /// Another protocol version.
    #[error("peer speaks landspeed protocol version {0}, this side speaks {PROTOCOL_VERSION}")]
    Version(u16),
}

impl Preamble {
    /// The preamble of stream `stream` of `session`: version 2 with its MAC when the test has a
    /// stream key, else version 1.
    pub fn data(session: SessionId, stream: u32, key: Option<&StreamKey>) -> Preamble {
        Preamble::with_mac(session, stream, key.map(|k| k.mac(session, stream)))
    }

    /// The data preamble of stream `stream` of `session` carrying `mac`: version 2 with one, else 1.
    pub fn with_mac(session: SessionId, stream: u32, mac: Option<StreamMac>) -> Preamble {
        let version = match mac {
            Some(_) => MAC_DATA_VERSION,
            None => PROTOCOL_VERSION,
        };
        Preamble::Data {
            version,
            session,
            stream,
            mac,
        }
    }

    /// How many bytes the preamble that starts `buf` has in all, as far as `buf` tells (at least
    /// the control preamble's).
    pub fn wanted(buf: &[u8]) -> usize {
        if buf.len() < 7 {
            return CONTROL_LEN;
        }
        match (buf[6], u16::from_be_bytes([buf[4], buf[5]])) {
            (b'D', MAC_DATA_VERSION) => MAC_DATA_LEN,
            (b'D', _) => DATA_LEN,
            _ => CONTROL_LEN,
        }
    }

    /// The preamble's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DATA_LEN);
        out.extend_from_slice(&MAGIC);
        match self {
            Preamble::Control { version } => {
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&[b'C', 0]);
            }
            Preamble::Data {
                version,
                session,
                stream,
                mac,
            } => {
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&[b'D', 0]);
                out.extend_from_slice(&session.0);
                out.extend_from_slice(&stream.to_be_bytes());
                if let Some(m) = mac {
                    out.extend_from_slice(m);
                }
            }
        }
        out
    }

    /// Parses a preamble from the start of `buf`. `Ok(None)`: more bytes are needed; `Ok(Some((p, n)))`:
    /// the preamble used `n` bytes. A different version is an error here so the server can answer it.
    pub fn parse(buf: &[u8]) -> Result<Option<(Preamble, usize)>, PreambleError> {
        if buf.len() < CONTROL_LEN {
            return Ok(None);
        }
        let magic = [buf[0], buf[1], buf[2], buf[3]];
        if magic != MAGIC {
            return Err(PreambleError::BadMagic(magic));
        }
        let version = u16::from_be_bytes([buf[4], buf[5]]);
        let data_version = version == MAC_DATA_VERSION && buf[6] == b'D';
        if version != PROTOCOL_VERSION && !data_version {
            return Err(PreambleError::Version(version));
        }
        match buf[6] {
            b'C' => Ok(Some((Preamble::Control { version }, CONTROL_LEN))),
            b'D' => {
                let len = Preamble::wanted(buf);
                if buf.len() < len {
                    return Ok(None);
                }
                let mut s = [0u8; 16];
                s.copy_from_slice(&buf[8..24]);
                let stream = u32::from_be_bytes([buf[24], buf[25], buf[26], buf[27]]);
                let mac = (len == MAC_DATA_LEN).then(|| {
                    let mut m = [0u8; MAC_LEN];
                    m.copy_from_slice(&buf[DATA_LEN..MAC_DATA_LEN]);
                    m
                });
                let p = Preamble::Data {
                    version,
                    session: SessionId(s),
                    stream,
                    mac,
                };
                Ok(Some((p, len)))
            }
            k => Err(PreambleError::BadKind(k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for p in [
            Preamble::Control {
                version: PROTOCOL_VERSION,
            },
            Preamble::data(SessionId([7; 16]), 513, None),
            Preamble::data(SessionId([7; 16]), 513, Some(&StreamKey::new(&[3; 32]))),
        ] {
            let b = p.encode();
            assert_eq!(Preamble::parse(&b).unwrap(), Some((p, b.len())));
            for cut in 0..b.len() {
                assert_eq!(Preamble::parse(&b[..cut]).unwrap(), None, "cut at {cut}");
            }
        }
    }

    #[test]
    fn rejects_garbage_and_other_versions() {
        assert!(matches!(
            Preamble::parse(b"GET / HTTP/1.1"),
            Err(PreambleError::BadMagic(_))
        ));
        assert!(matches!(
            Preamble::parse(b"LSPD\x00\x09C\x00"),
            Err(PreambleError::Version(9))
        ));
        assert!(matches!(
            Preamble::parse(b"LSPD\x00\x01X\x00"),
            Err(PreambleError::BadKind(b'X'))
        ));
    }

    #[test]
    fn a_stream_key_admits_its_own_streams_only() {
        let (k, other) = (StreamKey::new(&[3; 32]), StreamKey::new(&[4; 32]));
        let sid = SessionId([7; 16]);
        let p = Preamble::data(sid, 2, Some(&k));
        assert_eq!(p.encode().len(), MAC_DATA_LEN);
        assert!(k.admits(&p));
        assert!(!other.admits(&p), "another test's key");
        assert!(!k.admits(&Preamble::data(sid, 2, None)), "no MAC");
        let Preamble::Data { mac: Some(mac), .. } = p else {
            panic!("{p:?}")
        };
        assert!(!k.verify(sid, 3, &mac), "another stream");
        assert!(!k.verify(SessionId([8; 16]), 2, &mac), "another session");
        let mut bytes = p.encode();
        bytes[MAC_DATA_LEN - 1] ^= 1;
        let (changed, _) = Preamble::parse(&bytes).unwrap().unwrap();
        assert!(!k.admits(&changed), "one bit of the MAC");
        // A control preamble never takes version 2.
        assert!(matches!(
            Preamble::parse(b"LSPD\x00\x02C\x00"),
            Err(PreambleError::Version(2))
        ));
        assert_eq!(format!("{k:?}"), "StreamKey(<secret>)");
    }

    #[test]
    fn tells_iperf3_from_landspeed() {
        assert_eq!(classify(b'L'), Speaker::Landspeed);
        assert_eq!(classify(b'q'), Speaker::Iperf3);
        assert_eq!(classify(b'5'), Speaker::Iperf3);
        assert_eq!(classify(b'G'), Speaker::Unknown);
    }
}
