//! The id a landspeed server gives a test: its control protocol (landspeed-proto) carries it in every
//! data connection's preamble, and the server's log of tests (`server_log`) records it. It lives here,
//! below the protocol, so that a test's record needs no protocol to name its test.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifies a test on the server; data connections quote it in their preamble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(pub [u8; 16]);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for SessionId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() != 32 || !s.is_ascii() {
            return Err(format!("session id must be 32 hex digits, got {s:?}"));
        }
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("session id must be 32 hex digits, got {s:?}"))?;
        }
        Ok(SessionId(out))
    }
}

impl Serialize for SessionId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
