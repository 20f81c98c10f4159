//! What both ends agree on about encrypted data connections, without any cryptography: the cipher suite
//! a `--tls` test asks for, and the certificate fingerprint the server announces in its `accepted`
//! message so the client can pin the data connections to the server it is already talking to (no CA,
//! no trust store). The handshakes and the record layer live in the engine; this is the test spec's and
//! the protocol's part, so it can be validated, serialised and fuzzed like the rest.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A TLS 1.3 cipher suite for the data connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsCipher {
    /// TLS13_AES_128_GCM_SHA256: the cheapest on CPUs with AES instructions.
    #[default]
    Aes128Gcm,
    /// TLS13_AES_256_GCM_SHA384.
    Aes256Gcm,
    /// TLS13_CHACHA20_POLY1305_SHA256: the fast one on CPUs without AES instructions.
    Chacha20Poly1305,
}

impl TlsCipher {
    /// Every suite, in the order the help text lists them.
    pub const ALL: [TlsCipher; 3] = [
        TlsCipher::Aes128Gcm,
        TlsCipher::Aes256Gcm,
        TlsCipher::Chacha20Poly1305,
    ];

    /// The short name the command line takes and reports print.
    pub fn short_name(self) -> &'static str {
        match self {
            TlsCipher::Aes128Gcm => "aes128",
            TlsCipher::Aes256Gcm => "aes256",
            TlsCipher::Chacha20Poly1305 => "chacha20",
        }
    }

    /// The IANA name of the suite.
    pub fn iana_name(self) -> &'static str {
        match self {
            TlsCipher::Aes128Gcm => "TLS13_AES_128_GCM_SHA256",
            TlsCipher::Aes256Gcm => "TLS13_AES_256_GCM_SHA384",
            TlsCipher::Chacha20Poly1305 => "TLS13_CHACHA20_POLY1305_SHA256",
        }
    }
}

impl fmt::Display for TlsCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

impl FromStr for TlsCipher {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.to_ascii_lowercase().replace(['-', '_'], "");
        match s.as_str() {
            "aes128" | "aes128gcm" | "tls13aes128gcmsha256" => Ok(TlsCipher::Aes128Gcm),
            "aes256" | "aes256gcm" | "tls13aes256gcmsha384" => Ok(TlsCipher::Aes256Gcm),
            "chacha20" | "chacha20poly1305" | "tls13chacha20poly1305sha256" => {
                Ok(TlsCipher::Chacha20Poly1305)
            }
            _ => Err("expected aes128, aes256 or chacha20".into()),
        }
    }
}

/// TLS over every TCP data connection of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TlsSpec {
    /// The one suite both ends use.
    pub cipher: TlsCipher,
    /// Hand the record layer to the kernel after the handshake (kernel TLS).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ktls: bool,
}

/// The SHA-256 digest of a certificate (DER): what a client pins a server's data connections to.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CertFingerprint(pub [u8; 32]);

impl CertFingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of_der(der: &[u8]) -> CertFingerprint {
        use sha2::Digest;
        CertFingerprint(sha2::Sha256::digest(der).into())
    }
}

impl fmt::Display for CertFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for CertFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CertFingerprint({self})")
    }
}

impl FromStr for CertFingerprint {
    type Err = String;

    /// 64 hex digits, optionally with a `sha256:` prefix and colons between bytes (as `openssl x509
    /// -fingerprint -sha256` prints them).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let s = s.strip_prefix("sha256:").unwrap_or(s).replace(':', "");
        let mut out = [0u8; 32];
        hex::decode_to_slice(&s, &mut out)
            .map_err(|_| "expected a SHA-256 fingerprint: 64 hex digits".to_string())?;
        Ok(CertFingerprint(out))
    }
}

impl Serialize for CertFingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CertFingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_names_round_trip_and_accept_iana_spellings() {
        for c in TlsCipher::ALL {
            assert_eq!(c.short_name().parse::<TlsCipher>(), Ok(c));
            assert_eq!(c.iana_name().parse::<TlsCipher>(), Ok(c));
        }
        assert_eq!("AES-256-GCM".parse(), Ok(TlsCipher::Aes256Gcm));
        assert!("rc4".parse::<TlsCipher>().is_err());
    }

    #[test]
    fn fingerprints_parse_in_openssl_form_and_serialise_as_hex() {
        let f = CertFingerprint::of_der(b"not really a certificate");
        let colons =
            f.0.iter()
                .map(|b| format!("{b:02X}"))
                .collect::<Vec<_>>()
                .join(":");
        assert_eq!(colons.parse(), Ok(f));
        assert_eq!(format!("sha256:{f}").parse(), Ok(f));
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(json, format!("\"{f}\""));
        assert_eq!(serde_json::from_str::<CertFingerprint>(&json).unwrap(), f);
        assert!("abcd".parse::<CertFingerprint>().is_err());
        assert!(serde_json::from_str::<CertFingerprint>("\"zz\"").is_err());
    }
}
