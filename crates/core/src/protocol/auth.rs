//! Shared-key authentication for landspeed's control protocol. A server that has keys sends a fresh
//! random nonce in its welcome; the client answers in its test request with its key's name, a nonce of its
//! own and HMAC-SHA256(key, domain ‖ server nonce ‖ client nonce ‖ name). The key never crosses the wire,
//! and because the server's nonce is new for every connection a recorded answer is worthless on the next
//! one. This authenticates who may run tests; it does not encrypt or protect the test itself (like
//! iperf3's authentication). Everything here is pure: the drivers supply the random bytes.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::collections::HashMap;

/// Bytes of each nonce.
pub const NONCE_LEN: usize = 32;
/// The shortest secret a key file may hold.
pub const MIN_SECRET_LEN: usize = 16;
/// Separates landspeed's MACs from any other use of the same key.
const DOMAIN: &[u8] = b"landspeed auth v1\0";

type HmacSha256 = Hmac<Sha256>;

/// Why authentication failed or a key file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A key file line that is not `NAME HEXSECRET` (or a name or secret that is not allowed).
    #[error("line {line}: {msg}")]
    KeyFile {
        /// The line, from 1 (0 for a key given directly).
        line: usize,
        /// What is wrong with it.
        msg: String,
    },
    /// The client named a key the server does not have.
    #[error("no key named '{0}'")]
    UnknownName(String),
    /// A field of the challenge or the answer is not what the protocol says.
    #[error("malformed authentication field: {0}")]
    Malformed(&'static str),
    /// The answer does not match the key.
    #[error("the answer does not match the key (wrong key, or a replayed answer)")]
    BadMac,
}

/// The challenge a server puts in its welcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// Hex, `NONCE_LEN` bytes, fresh for this connection.
    pub nonce: String,
}

/// The client's answer, sent with its test request.
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
        Ok(Key {
            name: name.into(),
            secret: secret.to_vec(),
        })
    }

    fn mac(&self, server_nonce: &[u8], client_nonce: &[u8]) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.secret).expect("HMAC takes keys of any length");
        m.update(DOMAIN);
        m.update(server_nonce);
        m.update(client_nonce);
        m.update(self.name.as_bytes());
        m
    }

    /// The answer to `challenge`, using `client_nonce` (random, from the driver).
    pub fn prove(&self, challenge: &Challenge, client_nonce: &[u8; NONCE_LEN]) -> Result<Proof, AuthError> {
        let server = decode_nonce(&challenge.nonce)?;
        let mac = self.mac(&server, client_nonce).finalize().into_bytes();
        Ok(Proof {
            name: self.name.clone(),
            client_nonce: hex::encode(client_nonce),
            mac: hex::encode(mac),
        })
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

fn decode_nonce(s: &str) -> Result<Vec<u8>, AuthError> {
    if s.len() != 2 * NONCE_LEN {
        return Err(AuthError::Malformed("nonce length"));
    }
    hex::decode(s).map_err(|_| AuthError::Malformed("nonce is not hex"))
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

    /// Checks `proof` against the nonce this server sent; returns the key's name.
    pub fn verify(&self, server_nonce: &[u8; NONCE_LEN], proof: &Proof) -> Result<String, AuthError> {
        let key = self
            .keys
            .get(&proof.name)
            .ok_or_else(|| AuthError::UnknownName(proof.name.clone()))?;
        let client = decode_nonce(&proof.client_nonce)?;
        if client == server_nonce {
            // A client that echoes the server's nonce would let a MAC be reflected back; refuse it.
            return Err(AuthError::Malformed("client nonce equals the server's"));
        }
        let mac = hex::decode(&proof.mac).map_err(|_| AuthError::Malformed("mac is not hex"))?;
        key.mac(server_nonce, &client)
            .verify_slice(&mac)
            .map_err(|_| AuthError::BadMac)?;
        Ok(key.name.clone())
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

/// A challenge for `nonce` (random bytes from the driver).
pub fn challenge(nonce: &[u8; NONCE_LEN]) -> Challenge {
    Challenge {
        nonce: hex::encode(nonce),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# test keys\nalice  0123456789abcdef-alice\n\nbob s3cret-s3cret-s3cret\n";

    #[test]
    fn good_proof_is_accepted() {
        let ring = KeyRing::parse(FILE).unwrap();
        assert_eq!(ring.len(), 2);
        let n = [7u8; NONCE_LEN];
        let key = client_key("alice", FILE).unwrap();
        let proof = key.prove(&challenge(&n), &[9u8; NONCE_LEN]).unwrap();
        assert!(!proof.mac.contains("0123456789abcdef-alice"));
        assert_eq!(ring.verify(&n, &proof).unwrap(), "alice");
    }

    #[test]
    fn wrong_key_unknown_name_and_replay_are_refused() {
        let ring = KeyRing::parse(FILE).unwrap();
        let n = [7u8; NONCE_LEN];
        let wrong = Key::new("alice", b"not-alices-key-at-all").unwrap();
        let p = wrong.prove(&challenge(&n), &[1; NONCE_LEN]).unwrap();
        assert_eq!(ring.verify(&n, &p), Err(AuthError::BadMac));
        let stranger = Key::new("carol", b"0123456789abcdef-alice").unwrap();
        let p = stranger.prove(&challenge(&n), &[1; NONCE_LEN]).unwrap();
        assert_eq!(ring.verify(&n, &p), Err(AuthError::UnknownName("carol".into())));
        // A proof recorded on one connection fails on the next, whose nonce differs.
        let good = ring
            .get("bob")
            .unwrap()
            .prove(&challenge(&n), &[1; NONCE_LEN])
            .unwrap();
        assert!(ring.verify(&n, &good).is_ok());
        assert_eq!(ring.verify(&[8u8; NONCE_LEN], &good), Err(AuthError::BadMac));
        // The name is covered by the MAC: bob's answer cannot be passed off as alice's.
        let renamed = Proof {
            name: "alice".into(),
            ..good.clone()
        };
        assert_eq!(ring.verify(&n, &renamed), Err(AuthError::BadMac));
        // Reflection: the server's own nonce as the client's.
        let reflected = ring.get("bob").unwrap().prove(&challenge(&n), &n).unwrap();
        assert!(matches!(
            ring.verify(&n, &reflected),
            Err(AuthError::Malformed(_))
        ));
    }

    #[test]
    fn malformed_fields_are_errors_not_panics() {
        let ring = KeyRing::parse(FILE).unwrap();
        let n = [7u8; NONCE_LEN];
        for (cn, mac) in [
            ("zz", "00"),
            (&"0".repeat(64)[..], "xyz"),
            (&"0".repeat(64)[..], ""),
        ] {
            let p = Proof {
                name: "bob".into(),
                client_nonce: cn.into(),
                mac: mac.into(),
            };
            assert!(ring.verify(&n, &p).is_err());
        }
        assert!(Key::new("bob", b"x").unwrap_err().to_string().contains("shorter"));
        assert!(challenge(&n).nonce.len() == 64);
        let bad = Challenge { nonce: "abc".into() };
        assert!(ring.get("bob").unwrap().prove(&bad, &[0; NONCE_LEN]).is_err());
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
}
