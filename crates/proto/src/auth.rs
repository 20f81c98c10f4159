//! Shared keys for landspeed's control protocol: the key files, the names, and what the greeting
//! carries. A client that holds a key names it in its hello with a fresh nonce of its own; a server
//! that has keys answers with a fresh nonce in its welcome. Both ends then derive the conversation's
//! keys from the shared secret, both nonces and the greeting's bytes (`crate::guard`), and every
//! later control message in both directions carries a MAC: the client proves it holds the key with its
//! first message, the server with its first answer. The secret never crosses the wire. This protects
//! the control conversation; it does not encrypt it, and it does not protect the data connections
//! (docs/security.md has the threat table). Everything here is pure: the drivers supply the random
//! bytes.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Bytes of each nonce.
pub const NONCE_LEN: usize = 32;
/// The shortest secret a key file may hold.
pub const MIN_SECRET_LEN: usize = 16;
/// The least strength a secret may have, bits, by `strength_bits` (a 32-character hex secret has 128).
pub const MIN_SECRET_BITS: u32 = 64;
/// The authentication this build speaks: 2 binds every control message to the key in both directions
/// (1, before it, only had the client prove the key once, and is refused).
pub const AUTH_VERSION: u8 = 2;

/// Why authentication failed or a key file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A key file line that is not `NAME SECRET` (or a name or secret that is not allowed).
    #[error("line {line}: {msg}")]
    KeyFile {
        /// The line, from 1 (0 for a key given directly).
        line: usize,
        /// What is wrong with it.
        msg: String,
    },
    /// A secret too easy to guess: its length times the bits of its alphabet is under
    /// `MIN_SECRET_BITS`.
    #[error(
        "line {line}: the secret of '{name}' is weak (about {bits} bits: {len} characters from {distinct} \
         different ones; at least {MIN_SECRET_BITS} are needed)"
    )]
    WeakSecret {
        /// The line, from 1 (0 for a key given directly).
        line: usize,
        /// The key's name.
        name: String,
        /// Its estimated strength.
        bits: u32,
        /// Its length.
        len: usize,
        /// The different characters in it.
        distinct: usize,
    },
    /// The client named a key the server does not have.
    #[error("no key named '{0}'")]
    UnknownName(String),
    /// A field of the challenge or the answer is not what the protocol says.
    #[error("malformed authentication field: {0}")]
    Malformed(&'static str),
}

/// The challenge a server puts in its welcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// Hex, `NONCE_LEN` bytes, fresh for this connection.
    pub nonce: String,
    /// The authentication the server speaks (`AUTH_VERSION`; servers before it sent none: 1).
    #[serde(default = "version_one")]
    pub version: u8,
    /// The data preamble the server takes in a keyed test: 2 proves each stream with a MAC under
    /// the stream key (servers before it sent none: 1, the session id alone).
    #[serde(default = "data_version_one", skip_serializing_if = "is_data_version_one")]
    pub data_preamble: u16,
}

fn version_one() -> u8 {
    1
}

fn data_version_one() -> u16 {
    1
}

fn is_data_version_one(v: &u16) -> bool {
    *v == 1
}

/// Whether a keyed test's data preambles carry their MAC: when both ends speak version 2.
pub fn stream_macs(client: u16, server: u16) -> bool {
    client.min(server) >= super::preamble::MAC_DATA_VERSION
}

/// What a client that holds a key says in its hello: which key, and its half of the nonces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloAuth {
    /// The key's name.
    pub name: String,
    /// Hex, `NONCE_LEN` bytes, fresh for this connection.
    pub client_nonce: String,
    /// The authentication the client speaks (`AUTH_VERSION`).
    pub version: u8,
    /// The data preamble the client can send in a keyed test (`Challenge::data_preamble`).
    #[serde(default = "data_version_one", skip_serializing_if = "is_data_version_one")]
    pub data_preamble: u16,
}

/// A version-1 client's answer, sent with its test request. This build never sends one: a server
/// that receives one knows the client is too old to authenticate the server, and says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// The key's name.
    pub name: String,
    /// Hex, `NONCE_LEN` bytes.
    pub client_nonce: String,
    /// Hex HMAC-SHA256.
    pub mac: String,
}

/// A named secret (one line of a key file).
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    /// The key's name.
    pub name: String,
    secret: Vec<u8>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({}, <secret>)", self.name)
    }
}

impl Key {
    /// A key named `name` with `secret` (a plain name; a secret of at least `MIN_SECRET_LEN` bytes).
    pub fn new(name: &str, secret: &[u8]) -> Result<Key, AuthError> {
        check_name(name).map_err(|msg| AuthError::KeyFile { line: 0, msg })?;
        if secret.len() < MIN_SECRET_LEN {
            return Err(AuthError::KeyFile {
                line: 0,
                msg: format!("the key of '{name}' is shorter than {MIN_SECRET_LEN} bytes"),
            });
        }
        let (bits, distinct) = strength_bits(secret);
        if bits < MIN_SECRET_BITS {
            return Err(AuthError::WeakSecret {
                line: 0,
                name: name.into(),
                bits,
                len: secret.len(),
                distinct,
            });
        }
        Ok(Key {
            name: name.into(),
            secret: secret.to_vec(),
        })
    }

    /// The secret, for deriving a conversation's keys.
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// What the hello carries for this key, with `client_nonce` (random, from the driver).
    pub fn hello(&self, client_nonce: &[u8; NONCE_LEN]) -> HelloAuth {
        HelloAuth {
            name: self.name.clone(),
            client_nonce: hex::encode(client_nonce),
            version: AUTH_VERSION,
            data_preamble: super::preamble::MAC_DATA_VERSION,
        }
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("a key name has 1 to 64 characters".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
    {
        return Err(format!(
            "key name '{name}' may hold only letters, digits and . _ @ -"
        ));
    }
    Ok(())
}

/// A nonce from its hex form.
pub fn decode_nonce(s: &str) -> Result<[u8; NONCE_LEN], AuthError> {
    let mut out = [0u8; NONCE_LEN];
    if s.len() != 2 * NONCE_LEN {
        return Err(AuthError::Malformed("nonce length"));
    }
    hex::decode_to_slice(s, &mut out).map_err(|_| AuthError::Malformed("nonce is not hex"))?;
    Ok(out)
}

/// The keys a server accepts (`--auth-keys FILE`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRing {
    keys: HashMap<String, Key>,
}

impl KeyRing {
    /// Parses a key file: one `NAME SECRET` per line (the secret is the rest of the line, at least
    /// `MIN_SECRET_LEN` bytes); blank lines and lines starting with `#` are ignored.
    pub fn parse(text: &str) -> Result<KeyRing, AuthError> {
        let mut keys = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |msg: String| AuthError::KeyFile { line: i + 1, msg };
            let (name, secret) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| err("expected 'NAME SECRET'".into()))?;
            let key = Key::new(name, secret.trim().as_bytes()).map_err(|e| match e {
                AuthError::KeyFile { msg, .. } => err(msg),
                AuthError::WeakSecret {
                    name,
                    bits,
                    len,
                    distinct,
                    ..
                } => AuthError::WeakSecret {
                    line: i + 1,
                    name,
                    bits,
                    len,
                    distinct,
                },
                other => other,
            })?;
            if keys.insert(name.to_string(), key).is_some() {
                return Err(err(format!("key name '{name}' appears twice")));
            }
        }
        Ok(KeyRing { keys })
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No keys at all.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key named `name`.
    pub fn get(&self, name: &str) -> Option<&Key> {
        self.keys.get(name)
    }
}

/// Reads a client's key for `--auth NAME:KEYFILE`: the file is either a key file (the line named NAME
/// is used) or holds the secret alone on its one line.
pub fn client_key(name: &str, text: &str) -> Result<Key, AuthError> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if let [only] = lines.as_slice() {
        if !only.contains(char::is_whitespace) {
            return Key::new(name, only.as_bytes());
        }
    }
    let ring = KeyRing::parse(text)?;
    ring.get(name)
        .cloned()
        .ok_or_else(|| AuthError::UnknownName(name.into()))
}

/// A secret's strength as a guesser sees it at best for them: its length times the bits of an alphabet
/// as large as the different bytes in it (a crude bound that refuses the obviously weak: a repeated
/// word, a short run of digits; a random hex or base64 secret of 16 bytes or more passes). With the
/// number of different bytes.
pub fn strength_bits(secret: &[u8]) -> (u32, usize) {
    let mut seen = [false; 256];
    for &b in secret {
        seen[b as usize] = true;
    }
    let distinct = seen.iter().filter(|s| **s).count();
    let bits = secret.len() as f64 * (distinct.max(1) as f64).log2();
    (bits as u32, distinct)
}

/// A challenge for `nonce` (random bytes from the driver).
pub fn challenge(nonce: &[u8; NONCE_LEN]) -> Challenge {
    Challenge {
        nonce: hex::encode(nonce),
        version: AUTH_VERSION,
        data_preamble: super::preamble::MAC_DATA_VERSION,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# test keys\nalice  0123456789abcdef-alice\n\nbob s3cret-B0b-xyz-4711\n";

    #[test]
    fn nonces_and_hellos_are_checked() {
        let n = [7u8; NONCE_LEN];
        let c = challenge(&n);
        assert_eq!((c.nonce.len(), c.version), (64, AUTH_VERSION));
        assert_eq!(decode_nonce(&c.nonce), Ok(n));
        assert!(decode_nonce("abc").is_err());
        assert!(decode_nonce(&"z".repeat(64)).is_err());
        let key = client_key("alice", FILE).unwrap();
        let h = key.hello(&[9; NONCE_LEN]);
        assert_eq!((h.name.as_str(), h.version), ("alice", AUTH_VERSION));
        assert!(!format!("{h:?}{key:?}").contains("0123456789abcdef-alice"));
        // A version-1 server's challenge has no version field.
        let old: Challenge = serde_json::from_str(r#"{"nonce":"00"}"#).unwrap();
        assert_eq!((old.version, old.data_preamble), (1, 1));
        // Data preambles carry their MAC only when both ends offer version 2.
        assert!(stream_macs(h.data_preamble, c.data_preamble));
        assert!(!stream_macs(h.data_preamble, old.data_preamble));
        assert!(!stream_macs(1, 2));
        assert!(Key::new("bob", b"x").unwrap_err().to_string().contains("shorter"));
    }

    #[test]
    fn key_files_report_their_line() {
        let e = KeyRing::parse("alice 0123456789abcdef\nalice 0123456789abcdef\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2:"), "{e}");
        let e = KeyRing::parse("# c\nlonely\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2:"), "{e}");
        let e = KeyRing::parse("b/d 0123456789abcdef\n").unwrap_err();
        assert!(e.to_string().contains("letters"), "{e}");
        assert!(KeyRing::parse("").unwrap().is_empty());
        // A client's file may hold just the secret.
        let k = client_key("me", "# mine\n0123456789abcdef0123\n").unwrap();
        assert_eq!(k.name, "me");
        assert_eq!(client_key("zed", FILE), Err(AuthError::UnknownName("zed".into())));
    }

    #[test]
    fn weak_secrets_are_refused_by_their_line() {
        // A repeated word and a run of one digit: long enough, too easy to guess.
        for weak in ["bob-bob-bob-bob-bob-bob", "1111111111111111111111111111"] {
            let e = KeyRing::parse(&format!("# c\nbob {weak}\n")).unwrap_err();
            assert!(matches!(e, AuthError::WeakSecret { line: 2, .. }), "{e}");
            assert!(e.to_string().contains("is weak"), "{e}");
        }
        // Random hex of 16 bytes and base64 of 24 pass; so do the test keys.
        assert!(strength_bits(b"00112233445566778899aabbccddeeff").0 >= 128);
        assert!(KeyRing::parse("a 3q2+7wAAAFt0ZXN0a2V5c2VjcmV0eHl6\n").is_ok());
        assert!(KeyRing::parse(FILE).is_ok());
    }
}
