//! The first bytes of every connection to a landspeed server. They let one port serve control
//! connections, data streams and (later) iperf3 clients: iperf3 starts with a cookie of lowercase letters
//! and digits 2-7, landspeed with the uppercase magic `LSPD`, so one byte is enough to tell them apart.
//!
//! Layout (all integers big-endian):
//!
//! ```text
//! control: `LSPD` | version u16 | kind u8 = b'C' | reserved u8 = 0                      (8 bytes)
//! data:    `LSPD` | version u16 | kind u8 = b'D' | reserved u8 = 0 | session [16] | stream u32 (28 bytes)
//! ```

use super::messages::SessionId;

/// The four bytes every landspeed connection starts with.
pub const MAGIC: [u8; 4] = *b"LSPD";
/// The control protocol's version.
pub const PROTOCOL_VERSION: u16 = 1;
/// A control connection's preamble, bytes.
pub const CONTROL_LEN: usize = 8;
/// A data connection's preamble, bytes.
pub const DATA_LEN: usize = 28;

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
            } => {
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&[b'D', 0]);
                out.extend_from_slice(&session.0);
                out.extend_from_slice(&stream.to_be_bytes());
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
        if version != PROTOCOL_VERSION {
            return Err(PreambleError::Version(version));
        }
        match buf[6] {
            b'C' => Ok(Some((Preamble::Control { version }, CONTROL_LEN))),
            b'D' => {
                if buf.len() < DATA_LEN {
                    return Ok(None);
                }
                let mut s = [0u8; 16];
                s.copy_from_slice(&buf[8..24]);
                let stream = u32::from_be_bytes([buf[24], buf[25], buf[26], buf[27]]);
                Ok(Some((
                    Preamble::Data {
                        version,
                        session: SessionId(s),
                        stream,
                    },
                    DATA_LEN,
                )))
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
            Preamble::Data {
                version: PROTOCOL_VERSION,
                session: SessionId([7; 16]),
                stream: 513,
            },
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
    fn tells_iperf3_from_landspeed() {
        assert_eq!(classify(b'L'), Speaker::Landspeed);
        assert_eq!(classify(b'q'), Speaker::Iperf3);
        assert_eq!(classify(b'5'), Speaker::Iperf3);
        assert_eq!(classify(b'G'), Speaker::Unknown);
    }
}
