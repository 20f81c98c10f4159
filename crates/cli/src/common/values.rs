//! The command line's value parsers and value enums: text to sizes, rates, durations, networks, key
//! specifications and CPU lists, and the data-path choices as enums. Every subcommand's arguments use
//! them; they live in `common`, so no command module needs another module for a parser.

use clap::ValueEnum;
use landspeed_core::config::{IoBackend, TxMode};
use landspeed_core::units::{parse_duration, BitRate, Bytes};
use std::net::IpAddr;
use std::time::Duration;

/// A size: `64K`, `1M`, `1.5G` (bytes, powers of two).
pub fn bytes(s: &str) -> Result<Bytes, String> {
    s.parse::<Bytes>().map_err(|e| e.to_string())
}

/// A rate: `100M`, `10G` (bits per second, powers of ten).
pub fn rate(s: &str) -> Result<BitRate, String> {
    s.parse::<BitRate>().map_err(|e| e.to_string())
}

/// A type-of-service byte (`--tos`): 0-255, decimal, `0x` hex or `0` octal.
pub fn tos(s: &str) -> Result<u8, String> {
    landspeed_core::tos::parse_tos(s).map_err(|e| e.to_string())
}

/// An IPv6 flow label (`--flow-label`): 1 to 0xfffff, as C's `strtol` reads it.
pub fn flow_label(s: &str) -> Result<u32, String> {
    landspeed_core::tos::parse_flow_label(s).ok_or_else(|| "an IPv6 flow label is 1 to 0xfffff".into())
}

/// A DiffServ code point (`--dscp`) by number or name, as the TOS byte it sets.
pub fn dscp(s: &str) -> Result<u8, String> {
    landspeed_core::tos::parse_dscp(s).map_err(|e| e.to_string())
}

/// `--under-load`'s value: `up`, `down` or `bidir` (client to server, back, both), optionally `,N`
/// connections each way (1 to 128; 1 when not given), as iperf 2's `--bounceback-congest` reads it.
pub fn working_load(s: &str) -> Result<(landspeed_core::config::Direction, u32), String> {
    use landspeed_core::config::Direction;
    let (way, n) = s.split_once(',').unwrap_or((s, "1"));
    let direction = match way.to_ascii_lowercase().as_str() {
        "up" => Direction::Forward,
        "down" => Direction::Reverse,
        "bidir" | "" => Direction::Bidir,
        other => return Err(format!("'{other}' is not a load's direction: up, down or bidir")),
    };
    match n.trim().parse::<u32>() {
        Ok(n @ 1..=128) => Ok((direction, n)),
        _ => Err(format!("'{n}' is not a number of load connections (1 to 128)")),
    }
}

/// `--isochronous FPS:MEAN,STDDEV` (iperf 2's form; empty: its defaults).
pub fn frames(s: &str) -> Result<landspeed_core::frames::FrameSpec, String> {
    landspeed_core::frames::FrameSpec::parse(s).map_err(|e| e.to_string())
}

/// A duration: `10s`, `250ms`, `1.5m`.
pub fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// How far ahead `--start-at` may be (iperf 2's `--txstart-time` takes an hour too).
pub const START_AT_FURTHEST_S: f64 = 3600.0;

/// `--start-at`: an instant as Unix seconds (`1796600000`, `1796600000.25`) or a delay from now
/// (`+5s`), at most [`START_AT_FURTHEST_S`] ahead and not past (a second's grace: another host's
/// clock, or the time it took to type).
pub fn start_instant(s: &str) -> Result<f64, String> {
    start_instant_at(s, crate::common::unix_now_s())
}

fn start_instant_at(s: &str, now_s: f64) -> Result<f64, String> {
    let at = match s.strip_prefix('+') {
        Some(d) => now_s + duration(d)?.as_secs_f64(),
        None => s
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite())
            .ok_or_else(|| format!("{s}: not Unix seconds (1796600000.5) nor +DURATION (+5s)"))?,
    };
    if at < now_s - 1.0 {
        return Err(format!("{s}: that instant has passed ({:.1} s ago)", now_s - at));
    }
    if at - now_s > START_AT_FURTHEST_S {
        return Err(format!(
            "{s}: more than {START_AT_FURTHEST_S} s ahead ({:.0} s)",
            at - now_s
        ));
    }
    Ok(at)
}

/// A local address to bind to: an address, or a name of this host resolved to its first address
/// (pScheduler's `source` may be either).
pub fn local_address(s: &str) -> Result<IpAddr, String> {
    local_address_in(s, None)
}

/// A `-B` value as given, once checked that it is an address or resolves: the address itself is
/// taken later (`local_address_in`), when the family the test runs over is known.
pub fn local_name(s: &str) -> Result<String, String> {
    local_address(s).map(|_| s.to_string())
}

/// `s` as a local address of `family` (`true`: IPv6), or of any family: a name that resolves to both
/// (pScheduler's `--source` host name with `--ip-version 4`) gives the address of the family asked
/// for, not whichever comes first.
pub fn local_address_in(s: &str, v6: Option<bool>) -> Result<IpAddr, String> {
    let fits = |a: &IpAddr| v6.is_none_or(|v6| a.is_ipv6() == v6);
    if let Ok(a) = s.parse::<IpAddr>() {
        return Ok(a);
    }
    use std::net::ToSocketAddrs;
    let family = match v6 {
        Some(true) => " IPv6",
        Some(false) => " IPv4",
        None => "",
    };
    (s, 0)
        .to_socket_addrs()
        .map_err(|e| format!("'{s}' is not an address, nor a name that resolves ({e})"))?
        .map(|a| a.ip())
        .find(fits)
        .ok_or_else(|| format!("'{s}' resolves to no{family} address"))
}

/// An address or a network: `192.0.2.7`, `192.0.2.0/24`, `2001:db8::/32`.
pub fn cidr(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("'{s}' is not an address or a network like 192.0.2.0/24"))
}

/// A key to authenticate with: `NAME:KEYFILE`.
pub fn auth(s: &str) -> Result<(String, std::path::PathBuf), String> {
    match s.split_once(':') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => Ok((name.into(), file.into())),
        _ => Err(format!("expected NAME:KEYFILE, got '{s}'")),
    }
}

/// A parsed CPU list (a newtype, so clap treats it as one value rather than many).
#[derive(Debug, Clone)]
pub struct CpuList(pub Vec<usize>);

/// CPUs: `0,2,4-7`.
pub fn cpu_list(s: &str) -> Result<CpuList, String> {
    landspeed_engine::pin::parse_cpu_list(s).map(CpuList)
}

/// `--rx`: how receivers take data off the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RxArg {
    /// Copy into the receive buffer (needed to verify).
    Copy,
    /// MSG_TRUNC: the kernel drops the bytes without copying (only with --no-verify).
    Discard,
}

/// `--tx`: how senders hand data to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TxArg {
    /// send(): the kernel copies the buffer.
    Copy,
    /// MSG_ZEROCOPY.
    Zerocopy,
}

impl From<TxArg> for TxMode {
    fn from(t: TxArg) -> TxMode {
        match t {
            TxArg::Copy => TxMode::Copy,
            TxArg::Zerocopy => TxMode::Zerocopy,
        }
    }
}

/// `--io`: the event loop for the data sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoArg {
    /// Non-blocking sockets and epoll: one system call per buffer.
    Epoll,
    /// io_uring with --queue-depth operations queued per stream.
    Uring,
}

impl From<IoArg> for IoBackend {
    fn from(i: IoArg) -> IoBackend {
        match i {
            IoArg::Epoll => IoBackend::Epoll,
            IoArg::Uring => IoBackend::Uring,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_name_resolves_in_the_family_asked_for() {
        assert_eq!(
            local_address_in("localhost", Some(false)),
            Ok("127.0.0.1".parse().unwrap())
        );
        // Whether localhost has an IPv6 address depends on the host: if it has, that one; else refused.
        match local_address_in("localhost", Some(true)) {
            Ok(a) => assert!(a.is_ipv6(), "{a}"),
            Err(e) => assert!(e.contains("no IPv6 address"), "{e}"),
        }
        assert!(local_address_in("localhost", None).is_ok());
        // An address is taken as it is; a name with no address of the family is refused by name.
        assert_eq!(
            local_address_in("192.0.2.1", Some(true)),
            Ok("192.0.2.1".parse().unwrap())
        );
        let e = local_address_in("localhost.invalid", Some(false)).unwrap_err();
        assert!(e.contains("localhost.invalid"), "{e}");
    }

    #[test]
    fn a_working_load_reads_as_iperf2s_bounceback_congest() {
        use landspeed_core::config::Direction;
        assert_eq!(working_load("bidir"), Ok((Direction::Bidir, 1)));
        assert_eq!(working_load("up,4"), Ok((Direction::Forward, 4)));
        assert_eq!(working_load("DOWN,128"), Ok((Direction::Reverse, 128)));
        assert_eq!(working_load(",2"), Ok((Direction::Bidir, 2)));
        assert!(working_load("sideways")
            .unwrap_err()
            .contains("up, down or bidir"));
        assert!(working_load("up,0").unwrap_err().contains("1 to 128"));
        assert!(working_load("up,129").is_err());
        assert!(working_load("up,x").is_err());
    }

    #[test]
    fn a_start_instant_is_absolute_or_from_now_and_bounded() {
        let now = 1_796_600_000.0;
        assert_eq!(start_instant_at("1796600010.25", now), Ok(1_796_600_010.25));
        assert_eq!(start_instant_at("+5s", now), Ok(now + 5.0));
        assert_eq!(start_instant_at("+250ms", now), Ok(now + 0.25));
        assert!(start_instant_at("1796599990", now)
            .unwrap_err()
            .contains("has passed"));
        assert!(start_instant_at("+2h", now).unwrap_err().contains("ahead"));
        assert!(start_instant_at("soon", now)
            .unwrap_err()
            .contains("not Unix seconds"));
        assert!(start_instant_at("NaN", now).is_err());
    }
}
