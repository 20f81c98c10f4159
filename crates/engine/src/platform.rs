//! What this build of landspeed has, in one place: the target it was compiled for, whether it is
//! statically linked, and which of landspeed's features the operating system it was built for
//! provides. `--version` prints it (what a bug report needs), and a feature the platform lacks is
//! refused through `unsupported` with one line naming the platform and the alternative, so the
//! difference between platforms is read here rather than from `cfg` attributes spread through the
//! code.

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
#[error("{name} is not available on {os} (this is {target}); use {instead}")]
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
            "io_uring is not available on windows (this is x86_64-pc-windows-gnu); use --io epoll"
        );
    }
}
