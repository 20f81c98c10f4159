//! Units as types. Sizes and rates are easy to confuse (bytes vs bits, 1000 vs 1024), so every figure that
//! crosses an API boundary carries its unit in its type, and parsing follows what iperf users expect:
//! sizes take K/M/G/T as powers of 1024, rates take k/M/G/T as powers of 1000. Durations accept the usual
//! suffixes (`us`, `ms`, `s`, `m`, `h`); a bare number is seconds.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Why a size, rate or duration given by a user could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Nothing given.
    #[error("empty value")]
    Empty,
    /// Not a number.
    #[error("'{0}' is not a number with an optional unit suffix")]
    NotANumber(String),
    /// A suffix this kind of value does not have.
    #[error("unknown unit '{suffix}' in '{input}' (expected {expected})")]
    UnknownSuffix {
        /// The value as given.
        input: String,
        /// The suffix.
        suffix: String,
        /// The suffixes allowed.
        expected: &'static str,
    },
    /// A negative value.
    #[error("'{0}' is negative")]
    Negative(String),
    /// A value too large to hold.
    #[error("'{0}' is too large")]
    TooLarge(String),
}

/// A number of bytes. Parsed with binary multipliers (K = 1024), printed human-readably.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// The count.
    pub const fn get(self) -> u64 {
        self.0
    }
}

fn split_number(input: &str) -> Result<(f64, &str), UnitError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(UnitError::Empty);
    }
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError::NotANumber(input.to_string()))?;
    if !value.is_finite() {
        return Err(UnitError::NotANumber(input.to_string()));
    }
    if value < 0.0 {
        return Err(UnitError::Negative(input.to_string()));
    }
    Ok((value, suffix.trim()))
}

impl FromStr for Bytes {
    type Err = UnitError;
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (value, suffix) = split_number(input)?;
        let mult: f64 = match suffix {
            "" | "B" | "b" => 1.0,
            "K" | "k" | "KB" | "KiB" | "kB" => 1024.0,
            "M" | "m" | "MB" | "MiB" => 1024.0 * 1024.0,
            "G" | "g" | "GB" | "GiB" => 1024.0 * 1024.0 * 1024.0,
            "T" | "t" | "TB" | "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => {
                return Err(UnitError::UnknownSuffix {
                    input: input.to_string(),
                    suffix: suffix.to_string(),
                    expected: "B, K, M, G or T (powers of 1024)",
                })
            }
        };
        let bytes = value * mult;
        if bytes >= u64::MAX as f64 {
            return Err(UnitError::TooLarge(input.to_string()));
        }
        Ok(Bytes(bytes.round() as u64))
    }
}

impl fmt::Display for Bytes {
    /// Binary units with three significant figures, as `ls -h` users expect: `128 KiB`, `1.50 GiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut v = self.0 as f64;
        let mut i = 0;
        while v >= 1024.0 && i + 1 < UNITS.len() {
            v /= 1024.0;
            i += 1;
        }
        if i == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{} {}", three_figures(v), UNITS[i])
        }
    }
}

/// A rate in bits per second. Parsed with decimal multipliers (k = 1000), as network rates are quoted.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(pub f64);

impl BitRate {
    /// The rate, bit/s.
    pub fn bps(self) -> f64 {
        self.0
    }
    /// The rate of `bytes` moved in `seconds`; zero when no time passed.
    pub fn from_bytes(bytes: u64, seconds: f64) -> BitRate {
        if seconds > 0.0 {
            BitRate(bytes as f64 * 8.0 / seconds)
        } else {
            BitRate(0.0)
        }
    }
}

impl FromStr for BitRate {
    type Err = UnitError;
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (value, suffix) = split_number(input)?;
        let stripped = suffix
            .trim_end_matches("/s")
            .trim_end_matches("bps")
            .trim_end_matches("bit");
        let mult: f64 = match stripped {
            "" => 1.0,
            "k" | "K" => 1e3,
            "m" | "M" => 1e6,
            "g" | "G" => 1e9,
            "t" | "T" => 1e12,
            _ => {
                return Err(UnitError::UnknownSuffix {
                    input: input.to_string(),
                    suffix: suffix.to_string(),
                    expected: "k, M, G or T (powers of 1000, bits per second)",
                })
            }
        };
        Ok(BitRate(value * mult))
    }
}

impl fmt::Display for BitRate {
    /// Decimal units: `941 Mbit/s`, `9.41 Gbit/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s", "Pbit/s"];
        let mut v = self.0;
        let mut i = 0;
        while v >= 1000.0 && i + 1 < UNITS.len() {
            v /= 1000.0;
            i += 1;
        }
        write!(f, "{} {}", three_figures(v), UNITS[i])
    }
}

fn three_figures(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Parses a duration: `10` (seconds), `1.5s`, `250ms`, `100us`, `2m`, `1h`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let (value, suffix) = split_number(input)?;
    let secs = match suffix {
        "" | "s" | "sec" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(UnitError::UnknownSuffix {
                input: input.to_string(),
                suffix: suffix.to_string(),
                expected: "us, ms, s, m or h",
            })
        }
    };
    if secs > 1e9 {
        return Err(UnitError::TooLarge(input.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Prints a duration compactly: `10s`, `1.5s`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 || s == 0.0 {
        let t = format!("{s:.3}");
        format!("{}s", t.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{:.0}ms", s * 1e3)
    }
}

/// serde helper: a `Duration` stored as floating-point seconds (fields named `*_s`).
pub mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Writes the duration as seconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
    /// Reads seconds (finite, 0..=10⁹) as a duration.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        if !v.is_finite() || !(0.0..=1e9).contains(&v) {
            return Err(serde::de::Error::custom(format!(
                "duration {v} s is out of range"
            )));
        }
        Ok(Duration::from_secs_f64(v))
    }
}

/// The stricter of two optional limits (either alone when the other is absent).
pub fn lower(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_lower_of_two_limits_is_the_stricter_one_either_alone() {
        assert_eq!(super::lower(Some(2.0), Some(1.0)), Some(1.0));
        assert_eq!(super::lower(None, Some(3.0)), Some(3.0));
        assert_eq!(super::lower(Some(4.0), None), Some(4.0));
        assert_eq!(super::lower(None, None), None);
    }

    use super::*;

    #[test]
    fn sizes_are_binary() {
        assert_eq!("128K".parse::<Bytes>().unwrap(), Bytes(131072));
        assert_eq!("4M".parse::<Bytes>().unwrap(), Bytes(4 << 20));
        assert_eq!("1.5G".parse::<Bytes>().unwrap(), Bytes(3 << 29));
        assert_eq!("4300k".parse::<Bytes>().unwrap(), Bytes(4300 * 1024));
        assert_eq!("1000".parse::<Bytes>().unwrap(), Bytes(1000));
        assert!(matches!(
            "12Q".parse::<Bytes>(),
            Err(UnitError::UnknownSuffix { .. })
        ));
        assert!(matches!("-1K".parse::<Bytes>(), Err(UnitError::Negative(_))));
        assert!(matches!("".parse::<Bytes>(), Err(UnitError::Empty)));
        assert!(matches!("abc".parse::<Bytes>(), Err(UnitError::NotANumber(_))));
        assert!(matches!(
            "99999999T".parse::<Bytes>(),
            Err(UnitError::TooLarge(_))
        ));
    }

    #[test]
    fn rates_are_decimal() {
        assert_eq!("10M".parse::<BitRate>().unwrap(), BitRate(1e7));
        assert_eq!("2.5G".parse::<BitRate>().unwrap(), BitRate(2.5e9));
        assert_eq!("100kbit/s".parse::<BitRate>().unwrap(), BitRate(1e5));
        assert_eq!(BitRate(9.41e9).to_string(), "9.41 Gbit/s");
        assert_eq!(BitRate(941e6).to_string(), "941 Mbit/s");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("10 parsecs").is_err());
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn bytes_display() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(131072).to_string(), "128 KiB");
        assert_eq!(Bytes(3 << 29).to_string(), "1.50 GiB");
    }

    proptest::proptest! {
        #[test]
        fn any_input_parses_or_errors(s in ".{0,20}") {
            let _ = s.parse::<Bytes>();
            let _ = s.parse::<BitRate>();
            let _ = parse_duration(&s);
        }
    }
}
