//! The IP type-of-service byte a test marks its data packets with, as users write it: iperf3's `-S`
//! takes the byte itself (decimal, `0x` hex or `0` octal, as C's `strtol` reads them) and `--dscp`
//! takes a DiffServ code point, by number (0-63, shifted into the byte's upper six bits) or by name
//! (the RFC 2474/2597/3246 names iperf3 and OpenSSH accept, which name whole bytes). Networks that
//! treat classes differently (a scavenger class, an expedited one) are measured per class this way;
//! one parser keeps `landspeed run` and the iperf3 drop-in reading the same text the same way. The
//! IPv6 flow label (iperf3's `-L`), the header's other per-flow field, is read here too.

/// A TOS or DSCP value that cannot be used, with iperf3's own words for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TosError {
    /// `-S`/`--tos`: not a number from 0 to 255.
    #[error("bad TOS value (must be between 0 and 255 inclusive)")]
    Tos,
    /// `--dscp`: neither a number from 0 to 63 nor a known name.
    #[error("bad DSCP value (numeric: 0-63 inclusive, symbolic: one of [af11-13, af21-23, af31-33, af41-43, cs1-7, ef, va, lowdelay, throughput, reliability])")]
    Dscp,
}

/// The names `--dscp` takes and the TOS byte each stands for.
const NAMES: [(&str, u8); 25] = [
    ("af11", 0x28),
    ("af12", 0x30),
    ("af13", 0x38),
    ("af21", 0x48),
    ("af22", 0x50),
    ("af23", 0x58),
    ("af31", 0x68),
    ("af32", 0x70),
    ("af33", 0x78),
    ("af41", 0x88),
    ("af42", 0x90),
    ("af43", 0x98),
    ("cs0", 0x00),
    ("cs1", 0x20),
    ("cs2", 0x40),
    ("cs3", 0x60),
    ("cs4", 0x80),
    ("cs5", 0xa0),
    ("cs6", 0xc0),
    ("cs7", 0xe0),
    ("ef", 0xb8),
    ("va", 0xb0),
    ("lowdelay", 0x10),
    ("throughput", 0x08),
    ("reliability", 0x04),
];

/// An integer as C's `strtol(s, _, 0)` reads a whole string: `0x` hex, a leading `0` octal, else
/// decimal; an optional sign; nothing after it.
fn c_integer(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// `--tos` / iperf3's `-S`: the byte itself.
pub fn parse_tos(s: &str) -> Result<u8, TosError> {
    c_integer(s.trim())
        .and_then(|v| u8::try_from(v).ok())
        .ok_or(TosError::Tos)
}

/// iperf3's `-L`: an IPv6 flow label, 1 to 0xfffff (`strtol` base 0), or None.
pub fn parse_flow_label(s: &str) -> Option<u32> {
    c_integer(s.trim())
        .filter(|v| (1..=0xf_ffff).contains(v))
        .map(|v| v as u32)
}

/// A TOS byte in words: its DSCP's name when it has one (`cs1`, `ef`), else `tos 0x..`.
pub fn tos_name(tos: u8) -> String {
    match NAMES.iter().find(|(_, t)| *t == tos) {
        Some((n, _)) => n.to_string(),
        None => format!("tos {tos:#04x}"),
    }
}

/// `--dscp`: a code point by number (0-63) or by name, as the TOS byte it sets.
pub fn parse_dscp(s: &str) -> Result<u8, TosError> {
    let s = s.trim();
    if let Some((_, tos)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
        return Ok(*tos);
    }
    match c_integer(s) {
        Some(v) if (0..=63).contains(&v) => Ok((v as u8) << 2),
        _ => Err(TosError::Dscp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tos_reads_numbers_as_strtol_does() {
        assert_eq!(parse_tos("16"), Ok(16));
        assert_eq!(parse_tos("0x10"), Ok(16));
        assert_eq!(parse_tos("020"), Ok(16));
        assert_eq!(parse_tos("0"), Ok(0));
        assert_eq!(parse_tos("255"), Ok(255));
        for bad in ["256", "-1", "abc", "", "0x", "12z", "09"] {
            assert_eq!(parse_tos(bad), Err(TosError::Tos), "{bad}");
        }
    }

    #[test]
    fn a_tos_byte_is_named_by_its_dscp_when_it_has_one() {
        assert_eq!(tos_name(parse_dscp("cs1").unwrap()), "cs1");
        assert_eq!(tos_name(parse_dscp("ef").unwrap()), "ef");
        assert_eq!(tos_name(0x21), "tos 0x21");
    }

    #[test]
    fn flow_labels_are_twenty_bits_and_not_zero() {
        assert_eq!(parse_flow_label("0x12345"), Some(0x12345));
        assert_eq!(parse_flow_label("1048575"), Some(0xf_ffff));
        for bad in ["0", "0x100000", "-1", "x"] {
            assert_eq!(parse_flow_label(bad), None, "{bad}");
        }
    }

    #[test]
    fn dscp_takes_code_points_by_number_and_bytes_by_name() {
        assert_eq!(parse_dscp("af11"), Ok(0x28));
        assert_eq!(parse_dscp("EF"), Ok(0xb8));
        assert_eq!(parse_dscp("cs1"), Ok(0x20));
        assert_eq!(parse_dscp("10"), Ok(40));
        assert_eq!(parse_dscp("63"), Ok(252));
        assert_eq!(parse_dscp("0x2e"), Ok(0xb8));
        for bad in ["64", "-1", "af44", "", "cs8"] {
            assert_eq!(parse_dscp(bad), Err(TosError::Dscp), "{bad}");
        }
        assert!(TosError::Dscp
            .to_string()
            .starts_with("bad DSCP value (numeric: 0-63"));
    }
}
