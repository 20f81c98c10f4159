//! What this build of landspeed has, in one place: the target it was compiled for, whether it is
//! statically linked, and which of landspeed's features the operating system it was built for
//! provides. `--version` prints it (what a bug report needs), and a feature the platform lacks is
//! refused through `unsupported` with one line naming the platform and the alternative, so the
//! difference between platforms is read here rather than from `cfg` attributes spread through the
//! code.

use landspeed_core::config::{IoBackend, RcvLowat, TestSpec, TxMode};

/// One feature and whether this build carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    /// As `--version` lists it.
    pub name: &'static str,
    /// Whether this build carries it.
    pub built: bool,
    /// What to use where it is not built (shown in the refusal).
    pub instead: &'static str,
}

const LINUX: bool = cfg!(target_os = "linux");

/// Every feature that depends on the platform, in the order `--version` lists them.
pub const FEATURES: &[Feature] = &[
    Feature {
        name: "TLS",
        built: true,
        instead: "",
    },
    Feature {
        name: "QUIC",
        built: true,
        instead: "",
    },
    Feature {
        name: "SQLite archive",
        built: true,
        instead: "",
    },
    Feature {
        name: "PostgreSQL archive",
        built: true,
        instead: "",
    },
    Feature {
        name: "ndt7",
        built: true,
        instead: "",
    },
    Feature {
        name: "io_uring",
        built: LINUX,
        instead: "--io epoll",
    },
    Feature {
        name: "MPTCP",
        built: LINUX,
        instead: "plain TCP",
    },
    Feature {
        name: "splice and MSG_ZEROCOPY",
        built: LINUX,
        instead: "--rx copy --tx copy",
    },
    Feature {
        name: "WAN emulator",
        built: LINUX,
        instead: "a Linux host between the two ends",
    },
    Feature {
        name: "traceroute",
        built: LINUX,
        instead: "the system's tracert or traceroute",
    },
    Feature {
        name: "kernel TLS",
        built: LINUX,
        instead: "--tls without --ktls",
    },
    Feature {
        name: "kernel pacing (--fq-rate)",
        built: LINUX,
        instead: "-b, landspeed's own pacing",
    },
    Feature {
        name: "choosing congestion control",
        built: LINUX,
        instead: "the system's setting (netsh int tcp set supplemental)",
    },
    Feature {
        name: "setting the MSS",
        built: LINUX,
        instead: "the path's own MSS",
    },
    Feature {
        name: "IPv6 flow labels",
        built: LINUX,
        instead: "no flow label",
    },
    Feature {
        name: "host tuning (tune)",
        built: LINUX,
        instead: "the system's own network settings",
    },
    Feature {
        name: "binding to a device (--bind-dev)",
        built: LINUX,
        instead: "-B with the interface's address",
    },
    Feature {
        name: "Don't Fragment on UDP",
        built: LINUX,
        instead: "a test without --dont-fragment",
    },
    Feature {
        name: "multicast tests",
        built: LINUX,
        instead: "a Linux host as sender and receivers",
    },
    Feature {
        name: "the receive low-water mark",
        built: LINUX,
        instead: "--rcvlowat off",
    },
];

/// The target triple this binary was built for (from the build script).
pub const TARGET: &str = env!("LANDSPEED_TARGET");

/// Whether the C library is linked in statically (a musl build, or glibc with crt-static).
pub const STATIC: bool = cfg!(target_feature = "crt-static");

/// The names of the features this build carries.
pub fn built_in() -> Vec<&'static str> {
    FEATURES.iter().filter(|f| f.built).map(|f| f.name).collect()
}

/// A feature this platform lacks, refused with one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{name}: not available on {os} (this build is for {target}); use {instead}")]
pub struct Unsupported {
    /// The feature asked for.
    pub name: &'static str,
    /// The operating system this build is for (`std::env::consts::OS`).
    pub os: &'static str,
    /// The target triple this build is for.
    pub target: &'static str,
    /// What to use instead.
    pub instead: &'static str,
}

/// Ok when this build has the feature named, else the one-line refusal. Unknown names are a bug.
pub fn require(name: &str) -> Result<(), Unsupported> {
    let f = FEATURES
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("platform::require: no feature named {name}"));
    if f.built {
        return Ok(());
    }
    Err(Unsupported {
        name: f.name,
        os: std::env::consts::OS,
        target: TARGET,
        instead: f.instead,
    })
}

/// Whether this build has the feature named.
pub fn has(name: &str) -> bool {
    require(name).is_ok()
}

/// Every option of a test this platform cannot honour, refused before anything connects (on both
/// ends: the client for its own options, the server for the spec it is sent), naming the first.
pub fn check_spec(spec: &TestSpec) -> Result<(), Unsupported> {
    let asks = [
        (spec.io == IoBackend::Uring, "io_uring"),
        (spec.tx == TxMode::Zerocopy, "splice and MSG_ZEROCOPY"),
        (spec.mptcp, "MPTCP"),
        (spec.tls.as_ref().is_some_and(|t| t.ktls), "kernel TLS"),
        (spec.congestion.is_some(), "choosing congestion control"),
        (spec.mss.is_some(), "setting the MSS"),
        (spec.dont_fragment, "Don't Fragment on UDP"),
        (
            spec.rcvlowat_bytes.is_some_and(|b| b > 0),
            "the receive low-water mark",
        ),
    ];
    asks.into_iter()
        .filter(|(asked, _)| *asked)
        .try_for_each(|(_, name)| require(name))
}

/// How a TCP stream's pace (the spec's per-stream rate: `-b` or `--fq-rate` on Linux, iperf3's
/// `-b`) is kept here: by the kernel (SO_MAX_PACING_RATE) where it paces sockets, else by the
/// engine's own cap on each stream's reads and writes. (kernel pace, engine cap), bits per second.
pub fn tcp_pace(spec: &TestSpec) -> (Option<f64>, Option<f64>) {
    if spec.trip_times {
        // Its senders release whole bursts at the rate (`burst_pace`).
        return (None, None);
    }
    if has("kernel pacing (--fq-rate)") {
        (spec.fq_rate_bps, None)
    } else {
        (None, spec.fq_rate_bps)
    }
}

/// The rate at which a test with trip times releases its senders' bursts, bits per second: each
/// burst is written at once when due and the pause comes between bursts, as iperf 2 paces them (a
/// kernel pace would spread each burst over its own length at the rate, and its latency with it).
pub fn burst_pace(spec: &TestSpec) -> Option<f64> {
    spec.fq_rate_bps.filter(|_| spec.trip_times)
}

/// The receive low-water mark a test uses here: the spec's where the platform has one, else off.
pub fn rcvlowat(spec: &TestSpec) -> RcvLowat {
    if has("the receive low-water mark") {
        spec.rcvlowat()
    } else {
        RcvLowat::Off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_missing_feature_says_what_to_use_instead() {
        for (i, f) in FEATURES.iter().enumerate() {
            assert!(FEATURES[..i].iter().all(|g| g.name != f.name), "{}", f.name);
            assert!(f.built || !f.instead.is_empty(), "{}", f.name);
        }
        assert!(TARGET.contains('-'), "{TARGET}");
    }

    #[test]
    fn a_built_feature_is_allowed_and_the_list_names_it() {
        assert_eq!(require("TLS"), Ok(()));
        assert!(built_in().contains(&"TLS"));
        assert_eq!(require("io_uring").is_ok(), cfg!(target_os = "linux"));
    }

    #[test]
    fn a_spec_is_refused_for_exactly_the_options_the_platform_lacks() {
        assert_eq!(check_spec(&TestSpec::default()), Ok(()));
        let uring = TestSpec {
            io: IoBackend::Uring,
            ..TestSpec::default()
        };
        assert_eq!(check_spec(&uring).is_ok(), cfg!(target_os = "linux"));
        let lowat_off = TestSpec {
            rcvlowat_bytes: Some(0),
            ..TestSpec::default()
        };
        assert_eq!(check_spec(&lowat_off), Ok(()));
        if let Err(e) = check_spec(&uring) {
            assert!(e.to_string().starts_with("io_uring: not available on "), "{e}");
        }
    }

    #[test]
    fn a_refusal_is_one_line_naming_the_platform_and_the_alternative() {
        let e = Unsupported {
            name: "io_uring",
            os: "windows",
            target: "x86_64-pc-windows-gnu",
            instead: "--io epoll",
        };
        let line = e.to_string();
        assert_eq!(
            line,
            "io_uring: not available on windows (this build is for x86_64-pc-windows-gnu); use --io epoll"
        );
    }
}
