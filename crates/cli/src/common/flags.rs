//! The command line's words for what the libraries name in plain terms. Library errors carry typed
//! reasons and no flag names (a library does not know which program drives it); where a reason is
//! a setting the user can change, this module says it with the flag that changes it.

use landspeed_core::config::{ConfigError, TcpSetting};
use landspeed_net::ClientError;
use landspeed_plan::sweep::PlanError;
use landspeed_proto::{ProtocolError, Refusal};

/// The arguments whose values `serve` keeps out of the command line it shows clients: where its keys
/// live and whom else it allows.
pub const SECRET_ARGUMENTS: [&str; 11] = [
    "--auth",
    "--auth-keys",
    "--allow",
    "--control-auth",
    "--key",
    "--cert",
    "--files",
    "--rsa-private-key-path",
    "--rsa-public-key-path",
    "--authorized-users-path",
    "--username",
];

/// A TCP-only setting as the flag that sets it.
fn tcp_flag(s: TcpSetting) -> &'static str {
    match s {
        TcpSetting::Congestion => "-C/--congestion",
        TcpSetting::Mss => "-M/--mss",
        TcpSetting::NoDelay => "-N/--nodelay",
        TcpSetting::FqRate => "--fq-rate (UDP is paced by -b)",
        TcpSetting::IoUring => "--io uring",
        TcpSetting::TxZerocopy => "--tx zerocopy",
        TcpSetting::RxDiscard => "--rx discard",
        TcpSetting::RcvLowat => "--rcvlowat",
        TcpSetting::Mptcp => "-m/--mptcp",
        TcpSetting::Tls => "--tls",
        TcpSetting::Ktls => "--ktls",
        TcpSetting::File => "--send-file/--recv-file",
    }
}

/// A test that did not validate, with the flags that fix it.
pub fn config(e: &ConfigError) -> String {
    match e {
        ConfigError::TcpOnly(s) => format!("{} applies to TCP only", tcp_flag(*s)),
        ConfigError::NotOnMptcp(s) => format!(
            "{} does not work with -m/--mptcp: Linux refuses the socket option on MPTCP sockets",
            match s {
                TcpSetting::FqRate => "--fq-rate",
                other => tcp_flag(*other),
            }
        ),
        ConfigError::NotWithTls(s) => format!(
            "{} does not work with --tls: TLS records are sealed and opened in landspeed's own send and receive calls",
            tcp_flag(*s)
        ),
        ConfigError::ConnectionsNeedQuic => "--connections applies to --quic and --quic-perf only".into(),
        ConfigError::NotOnQuic(s) => format!("{} applies to TCP, not QUIC (--quic)", tcp_flag(*s)),
        ConfigError::DontFragmentNeedsUdp => "--dont-fragment applies to UDP tests only (-u)".into(),
        ConfigError::TosOnQuic => {
            "--tos/--dscp do not work with --quic: quinn writes each datagram's TOS byte itself (for ECN)".into()
        }
        ConfigError::DiscardNeedsNoVerify => {
            "--rx discard throws bytes away unread, so it needs --no-verify".into()
        }
        ConfigError::ZerocopyNeedsEpoll => "--tx zerocopy is implemented for --io epoll only".into(),
        ConfigError::FileNeedsOneTcpStream => {
            "a file moves over one TCP stream in one direction (no -P, -u or --bidir)".into()
        }
        ConfigError::FileNeedsCopyPaths => {
            "a file moves with sendfile and splice (no --io uring, --tx zerocopy or --rx discard)".into()
        }
        ConfigError::Streams(n) => format!(
            "-P/--streams must be 1..={} (streams per direction), got {n}",
            landspeed_core::config::MAX_STREAMS
        ),
        other => other.to_string(),
    }
}

/// A sweep grid that cannot be planned, under the flag that gave it.
pub fn plan(e: &PlanError) -> String {
    match e {
        PlanError::Windows(_) | PlanError::WindowSize(_) | PlanError::TooManyWindows(_) => {
            format!("--windows: {e}")
        }
        PlanError::Streams(_) => format!("--streams: {e}"),
        PlanError::Repeat(_) => format!("--repeat: {e}"),
        PlanError::TooManyCells(_) => e.to_string(),
    }
}

/// A client error as the command line says it.
pub fn client(e: &ClientError) -> String {
    match e {
        ClientError::FileDirection { upload: true } => {
            "--send-file sends from this end: no -R or --bidir".into()
        }
        ClientError::FileDirection { upload: false } => {
            "--recv-file receives at this end: it needs -R".into()
        }
        ClientError::Config(c) => format!("invalid test: {}", config(c)),
        ClientError::Protocol(ProtocolError::AuthRequired) => {
            format!("{e}: give one with --auth NAME:KEYFILE")
        }
        ClientError::Refused {
            code: Refusal::Authentication,
            ..
        } => format!("{e} (--auth NAME:KEYFILE)"),
        ClientError::Protocol(ProtocolError::ServerWithoutAuth) => {
            format!("{e}; run without --auth for a test the server does not authenticate")
        }
        ClientError::Protocol(ProtocolError::Forged { said: Some(_), .. }) => {
            format!("{e} (check the key given with --auth NAME:KEYFILE)")
        }
        ClientError::Iperf3Server { .. } => format!("{e} (use --iperf3)"),
        ClientError::Ktls { reason } => format!("--ktls: {reason}"),
        ClientError::NotWithIperf3 { what } => format!(
            "the server speaks iperf3's protocol, which cannot carry {}",
            what.replacen("TLS:", "--tls:", 1)
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tcp_only_setting_is_told_by_its_flag() {
        let all = [
            TcpSetting::Congestion,
            TcpSetting::Mss,
            TcpSetting::NoDelay,
            TcpSetting::FqRate,
            TcpSetting::IoUring,
            TcpSetting::TxZerocopy,
            TcpSetting::RxDiscard,
            TcpSetting::RcvLowat,
            TcpSetting::Mptcp,
        ];
        for s in all {
            let text = config(&ConfigError::TcpOnly(s));
            assert!(
                text.starts_with('-') && text.ends_with("applies to TCP only"),
                "{text}"
            );
            assert!(!ConfigError::TcpOnly(s).to_string().contains("--"), "{s}");
        }
    }

    #[test]
    fn library_reasons_gain_their_flags() {
        assert!(config(&ConfigError::DiscardNeedsNoVerify).contains("--no-verify"));
        assert!(config(&ConfigError::ZerocopyNeedsEpoll).contains("--io epoll"));
        assert!(config(&ConfigError::FileNeedsOneTcpStream).contains("--bidir"));
        assert!(config(&ConfigError::FileNeedsCopyPaths).contains("--io uring"));
        let nested = client(&ClientError::Config(ConfigError::DiscardNeedsNoVerify));
        assert!(nested.starts_with("invalid test: --rx discard"), "{nested}");
        let auth = client(&ClientError::Protocol(ProtocolError::AuthRequired));
        assert!(auth.contains("requires authentication") && auth.contains("--auth NAME:KEYFILE"));
        let open = client(&ClientError::Protocol(ProtocolError::ServerWithoutAuth));
        assert!(open.contains("does not ask for a key") && open.contains("run without --auth"));
        assert_eq!(
            plan(&PlanError::Repeat(0)),
            "--repeat: the repeat count must be 1..=100, got 0"
        );
        assert!(plan(&PlanError::Streams("x".into())).starts_with("--streams: 'x'"));
        assert!(plan(&PlanError::TooManyWindows("1..9M".into())).starts_with("--windows: a range"));
    }
}
