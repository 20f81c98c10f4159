//! iperf3's own authentication (its `--username`, `--rsa-public-key-path` and `IPERF3_PASSWORD` on the
//! client; `--rsa-private-key-path`, `--authorized-users-path`, `--time-skew-threshold` and
//! `--use-pkcs1-padding` on the server), as iperf3 3.x speaks it: the client encrypts
//! `user: NAME\npwd:  PASSWORD\nts:   UNIX_SECONDS` with the server's RSA public key (OAEP with SHA-1,
//! OpenSSL's default, or PKCS #1 v1.5 padding) and sends it base64-encoded as the parameters'
//! `authtoken`; the server decrypts it, refuses a timestamp more than the skew threshold away from its
//! clock, and looks the name up in its users file, whose lines are `NAME,SHA256HEX` of
//! `{NAME}PASSWORD`. The cryptography is aws-lc's (already linked for TLS), whose RSA decryption is
//! constant-time, unlike the implementation behind iperf3's CVE-2024-26306.
//!
//! Pure apart from the randomness RSA padding draws: the time comes from the caller, the keys and the
//! users file are bytes.

use aws_lc_rs::rsa::{
    OaepPrivateDecryptingKey, OaepPublicEncryptingKey, Pkcs1PrivateDecryptingKey, Pkcs1PublicEncryptingKey,
    PrivateDecryptingKey, PublicEncryptingKey, OAEP_SHA1_MGF1SHA1,
};
use base64::Engine;
use rustls_pki_types::pem::{PemObject, SectionKind};
use sha2::{Digest, Sha256};

/// iperf3's default `--time-skew-threshold`, seconds.
pub const DEFAULT_SKEW_S: i64 = 10;
/// The longest `authtoken` taken (a base64 RSA-8192 ciphertext is 1,368 characters).
pub const MAX_TOKEN_LEN: usize = 4096;

/// The padding the RSA encryption uses (`--use-pkcs1-padding` picks PKCS #1 v1.5; iperf3's default is
/// OAEP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Padding {
    /// OAEP with SHA-1 and MGF1-SHA-1 (OpenSSL's `RSA_PKCS1_OAEP_PADDING`).
    #[default]
    Oaep,
    /// PKCS #1 v1.5.
    Pkcs1,
}

/// Why authentication could not be done or did not pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A key file that is not an RSA key iperf3 would take.
    #[error("{0}")]
    Key(String),
    /// The token could not be made.
    #[error("the authentication token could not be encrypted (is the key RSA, 2048 bits or more?)")]
    Encrypt,
    /// The token is not base64 of a ciphertext this key opens, or not iperf3's text inside.
    #[error("the authentication token does not decrypt with this server's key")]
    Undecryptable,
    /// The token's time is too far from the server's clock.
    #[error("the token's time is {off_s} s from this server's clock (more than {skew_s} s)")]
    Skew {
        /// The token's time less the server's, seconds.
        off_s: i64,
        /// The server's threshold.
        skew_s: i64,
    },
    /// No line of the users file has this name and password.
    #[error("user '{0}' is not in the authorized users file with this password")]
    Unknown(String),
}

/// The credentials an iperf3 client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user's name (no whitespace: iperf3's server reads it with `%s`).
    pub username: String,
    /// The password.
    pub password: String,
}

/// The RSA public key a client encrypts its token with (PEM `PUBLIC KEY`, as `openssl rsa -pubout`
/// writes it).
pub struct PublicKey(PublicEncryptingKey);

/// The RSA private key a server decrypts tokens with (PEM: `PRIVATE KEY` or `RSA PRIVATE KEY`, as
/// `openssl genrsa` and `openssl rsa` write them; an encrypted key must be decrypted first, as iperf3's
/// documentation does).
pub struct PrivateKey(PrivateDecryptingKey);

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey(RSA {} bits)", self.0.key_size_bits())
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey(RSA {} bits)", self.0.key_size_bits())
    }
}

/// The first PEM section of `pem`, with its kind.
fn pem_section(pem: &[u8]) -> Result<(SectionKind, Vec<u8>), AuthError> {
    let mut it = <(SectionKind, Vec<u8>) as PemObject>::pem_slice_iter(pem);
    match it.next() {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => Err(AuthError::Key(format!("not a PEM file: {e}"))),
        None => Err(AuthError::Key("no PEM section in the file".into())),
    }
}

impl PublicKey {
    /// Reads a PEM public key (`openssl rsa -pubout` writes `PUBLIC KEY`).
    pub fn from_pem(pem: &[u8]) -> Result<PublicKey, AuthError> {
        let der = match pem_section(pem)? {
            (SectionKind::PublicKey, der) => der,
            (kind, _) => {
                return Err(AuthError::Key(format!(
                    "a {kind:?} section, not an RSA public key"
                )))
            }
        };
        PublicEncryptingKey::from_der(&der)
            .map(PublicKey)
            .map_err(|e| AuthError::Key(format!("not an RSA public key aws-lc takes: {e}")))
    }

    /// The `authtoken` for `c` at `now_s` (Unix seconds), base64 as iperf3 sends it.
    pub fn token(&self, c: &Credentials, now_s: i64, padding: Padding) -> Result<String, AuthError> {
        let text = format!("user: {}\npwd:  {}\nts:   {now_s}", c.username, c.password);
        let mut out = vec![0u8; self.0.key_size_bytes()];
        let sealed = match padding {
            Padding::Oaep => {
                let k = OaepPublicEncryptingKey::new(self.0.clone()).map_err(|_| AuthError::Encrypt)?;
                k.encrypt(&OAEP_SHA1_MGF1SHA1, text.as_bytes(), &mut out, None)
                    .map_err(|_| AuthError::Encrypt)?
                    .len()
            }
            Padding::Pkcs1 => {
                let k = Pkcs1PublicEncryptingKey::new(self.0.clone()).map_err(|_| AuthError::Encrypt)?;
                k.encrypt(text.as_bytes(), &mut out)
                    .map_err(|_| AuthError::Encrypt)?
                    .len()
            }
        };
        Ok(base64::engine::general_purpose::STANDARD.encode(&out[..sealed]))
    }
}

impl PrivateKey {
    /// A new 2048-bit key (tests and fuzzing; a server reads its own with `from_pem`).
    pub fn generate() -> Result<PrivateKey, AuthError> {
        PrivateDecryptingKey::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
            .map(PrivateKey)
            .map_err(|_| AuthError::Key("no RSA key could be made".into()))
    }

    /// Reads a PEM private key (`PRIVATE KEY`, PKCS #8, or `RSA PRIVATE KEY`, PKCS #1).
    pub fn from_pem(pem: &[u8]) -> Result<PrivateKey, AuthError> {
        if pem.windows(9).any(|w| w == b"ENCRYPTED") {
            return Err(AuthError::Key(
                "the key is encrypted: decrypt it first (openssl rsa -in KEY -out PLAIN)".into(),
            ));
        }
        let der = match pem_section(pem)? {
            (SectionKind::PrivateKey, der) => der,
            (SectionKind::RsaPrivateKey, der) => der::pkcs8_of_pkcs1(&der),
            (kind, _) => {
                return Err(AuthError::Key(format!(
                    "a {kind:?} section, not an RSA private key"
                )))
            }
        };
        PrivateDecryptingKey::from_pkcs8(&der)
            .map(PrivateKey)
            .map_err(|e| {
                AuthError::Key(format!(
                    "not an RSA private key aws-lc takes (2048 bits or more): {e}"
                ))
            })
    }

    /// The public half (a client of this server encrypts with it).
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.public_key())
    }

    /// Opens `token` (base64) and reads iperf3's text in it: the credentials and their time.
    pub fn open(&self, token: &str, padding: Padding) -> Result<(Credentials, i64), AuthError> {
        let sealed = base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .map_err(|_| AuthError::Undecryptable)?;
        let mut out = vec![0u8; self.0.key_size_bytes()];
        let text = match padding {
            Padding::Oaep => {
                let k =
                    OaepPrivateDecryptingKey::new(self.0.clone()).map_err(|_| AuthError::Undecryptable)?;
                k.decrypt(&OAEP_SHA1_MGF1SHA1, &sealed, &mut out, None)
                    .map_err(|_| AuthError::Undecryptable)?
                    .to_vec()
            }
            Padding::Pkcs1 => {
                let k =
                    Pkcs1PrivateDecryptingKey::new(self.0.clone()).map_err(|_| AuthError::Undecryptable)?;
                k.decrypt(&sealed, &mut out)
                    .map_err(|_| AuthError::Undecryptable)?
                    .to_vec()
            }
        };
        parse_text(&text).ok_or(AuthError::Undecryptable)
    }
}

/// iperf3's `user: %s\npwd:  %s\nts:   %ld`, read as its server's `sscanf` reads it: each field the
/// next run of non-space characters after its label.
fn parse_text(text: &[u8]) -> Option<(Credentials, i64)> {
    let text = std::str::from_utf8(text).ok()?;
    let rest = text.strip_prefix("user:")?.trim_start();
    let (username, rest) = rest.split_once(char::is_whitespace)?;
    let rest = rest.trim_start().strip_prefix("pwd:")?.trim_start();
    let (password, rest) = rest.split_once(char::is_whitespace)?;
    let rest = rest.trim_start().strip_prefix("ts:")?.trim_start();
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    let ts = digits.parse().ok()?;
    let c = Credentials {
        username: username.into(),
        password: password.into(),
    };
    Some((c, ts))
}

/// What a client authenticates with: the server's public key, its credentials, the padding.
#[derive(Debug)]
pub struct ClientAuth {
    /// The server's public key.
    pub key: PublicKey,
    /// The user's name and password.
    pub credentials: Credentials,
    /// The padding the server expects.
    pub padding: Padding,
}

impl ClientAuth {
    /// The `authtoken` at `now_s` (Unix seconds).
    pub fn token(&self, now_s: i64) -> Result<String, AuthError> {
        self.key.token(&self.credentials, now_s, self.padding)
    }
}

/// What a server checks tokens with: its private key, its users file's text (read for each test, so
/// an operator's edit takes effect at once), the skew it allows and the padding.
#[derive(Debug)]
pub struct ServerAuth {
    /// The private key.
    pub key: PrivateKey,
    /// The authorized users file.
    pub users_file: std::path::PathBuf,
    /// `--time-skew-threshold`, seconds.
    pub skew_s: i64,
    /// The padding clients use.
    pub padding: Padding,
}

impl ServerAuth {
    /// Checks `token` at `now_s` against `users` (the users file's text): the user's name, or why not.
    pub fn verify(&self, token: &str, now_s: i64, users: &str) -> Result<String, AuthError> {
        let (c, ts) = self.key.open(token, self.padding)?;
        check(&c, ts, now_s, self.skew_s, users)?;
        Ok(c.username)
    }
}

/// The hash an authorized users file holds for `c`: SHA-256 of `{NAME}PASSWORD`, lowercase hex.
pub fn user_hash(c: &Credentials) -> String {
    let digest = Sha256::digest(format!("{{{}}}{}", c.username, c.password).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// iperf3's server check of opened credentials: the time within `skew_s` of `now_s`, then a line
/// `NAME,HASH` of `users` (an authorized users file; empty, comment and comma-less lines skipped) with
/// this name and password. The hash is compared in constant time.
pub fn check(c: &Credentials, ts: i64, now_s: i64, skew_s: i64, users: &str) -> Result<(), AuthError> {
    let off_s = ts - now_s;
    if off_s.abs() > skew_s {
        return Err(AuthError::Skew { off_s, skew_s });
    }
    let want = user_hash(c);
    let found = users
        .lines()
        .map(|l| l.trim_end_matches(['\r', '\n']))
        .filter(|l| !l.is_empty() && !l.starts_with('#') && l.contains(','))
        .filter_map(|l| {
            let mut f = l.split(',');
            Some((f.next()?, f.next()?))
        })
        .any(|(name, hash)| name == c.username && constant_time_eq(hash.as_bytes(), want.as_bytes()));
    if found {
        Ok(())
    } else {
        Err(AuthError::Unknown(c.username.clone()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The DER wrapper that turns a PKCS #1 RSA private key into the PKCS #8 form aws-lc reads.
mod der {
    /// rsaEncryption's AlgorithmIdentifier: SEQUENCE { OID 1.2.840.113549.1.1.1, NULL }.
    const RSA_ALGORITHM: [u8; 15] = [
        0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
    ];

    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let n = body.len();
        if n < 0x80 {
            out.push(n as u8);
        } else {
            let bytes: Vec<u8> = n.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(body);
        out
    }

    /// PrivateKeyInfo { version 0, rsaEncryption, OCTET STRING (the PKCS #1 key) }.
    pub(super) fn pkcs8_of_pkcs1(pkcs1: &[u8]) -> Vec<u8> {
        let body = [&[0x02, 0x01, 0x00][..], &RSA_ALGORITHM, &tlv(0x04, pkcs1)].concat();
        tlv(0x30, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Credentials {
        Credentials {
            username: "alice".into(),
            password: "s3cret".into(),
        }
    }

    #[test]
    fn iperf3s_text_reads_as_its_sscanf_reads_it() {
        let (c, ts) = parse_text(b"user: alice\npwd:  s3cret\nts:   1764200000").unwrap();
        assert_eq!((c, ts), (alice(), 1_764_200_000));
        assert_eq!(parse_text(b"user: alice\npwd: x"), None);
        assert_eq!(parse_text(b"pwd:  x\nuser: a\nts:   1"), None);
        assert_eq!(parse_text(b"\xff"), None);
    }

    #[test]
    fn the_users_file_is_checked_as_iperf3_checks_it() {
        // The hash iperf3's documentation gives for `{mario}rossi`.
        let mario = Credentials {
            username: "mario".into(),
            password: "rossi".into(),
        };
        assert_eq!(
            user_hash(&mario),
            "bf7a49a846d44b454a5d11e7acfaf13d138bbe0b7483aa3e050879700572709b"
        );
        let users = format!(
            "# comment\n\nnocomma\nmario,{}\r\nalice,{}\n",
            user_hash(&mario),
            "0".repeat(64)
        );
        assert_eq!(check(&mario, 100, 105, 10, &users), Ok(()));
        assert_eq!(
            check(&mario, 100, 111, 10, &users),
            Err(AuthError::Skew {
                off_s: -11,
                skew_s: 10
            })
        );
        assert_eq!(
            check(&alice(), 100, 100, 10, &users),
            Err(AuthError::Unknown("alice".into()))
        );
        let wrong = Credentials {
            password: "bianchi".into(),
            ..mario
        };
        assert!(check(&wrong, 100, 100, 10, &users).is_err());
    }

    #[test]
    fn a_token_opens_with_its_key_in_both_paddings_and_with_no_other() {
        let key = PrivateKey(PrivateDecryptingKey::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap());
        let other = PrivateKey(PrivateDecryptingKey::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap());
        for padding in [Padding::Oaep, Padding::Pkcs1] {
            let token = key.public().token(&alice(), 1_764_200_000, padding).unwrap();
            assert_eq!(key.open(&token, padding), Ok((alice(), 1_764_200_000)));
            assert_eq!(other.open(&token, padding), Err(AuthError::Undecryptable));
        }
        let oaep = key.public().token(&alice(), 1, Padding::Oaep).unwrap();
        assert_eq!(key.open(&oaep, Padding::Pkcs1), Err(AuthError::Undecryptable));
        assert_eq!(
            key.open("not base64!", Padding::Oaep),
            Err(AuthError::Undecryptable)
        );
    }

    #[test]
    fn pem_keys_of_every_form_openssl_writes_are_read() {
        assert!(matches!(PrivateKey::from_pem(b"nothing"), Err(AuthError::Key(_))));
        let enc = b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let e = PrivateKey::from_pem(enc).unwrap_err();
        assert!(e.to_string().contains("decrypt it first"), "{e}");
    }
}
