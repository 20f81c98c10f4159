//! Why a client run failed (`ClientError`), whichever protocol it spoke.

use crate::control::ControlError;
use landspeed_engine::sockopt::SockOptError;
use landspeed_proto::ProtocolError;
use std::net::SocketAddr;
use std::time::Duration;

/// What the user can do about a failed run: the groups `ClientError`'s variants are declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// The command asks for something that cannot be (options that contradict, or that this
    /// server's protocol cannot carry): change the command.
    FixCommand,
    /// This host cannot do what the test asks (a socket option, an interface, kernel TLS, a file):
    /// change this host's setup or drop the option that needs it.
    FixThisHost,
    /// The server cannot be found or reached: check its name, its address and the path to it.
    CheckReach,
    /// The server said no (busy, refused): retry later, or ask its operator.
    AskServer,
    /// The test broke while it ran (a stream, the control connection, the path or the server went
    /// away): run it again, and look at the path if it repeats.
    RunAgain,
    /// The server broke the protocol: report it, with the server's version.
    ReportPeer,
    /// The user stopped the run: nothing to do.
    Nothing,
}

/// Why a client run failed, by kind, declared in groups by what the user can do about it
/// (`remedy`): callers decide retries and exit codes by variant.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    // --- The command asks for something that cannot be: change the command. (`Remedy::FixCommand`)
    /// The test is not valid.
    #[error("invalid test: {0}")]
    Config(#[from] landspeed_core::config::ConfigError),
    /// A file test asked for the direction its file cannot move in: a file sent from this end needs a
    /// forward test, a file received here a reverse one.
    #[error("{}", if *.upload {
        "a file sent from this end needs a forward test (not reverse or bidirectional)"
    } else {
        "a file received at this end needs a reverse test"
    })]
    FileDirection {
        /// True for a file sent from this end, false for one received here.
        upload: bool,
    },
    /// The server is iperf3, and the test asks for something iperf3 cannot do.
    #[error("the server speaks iperf3's protocol, which cannot carry {what}")]
    NotWithIperf3 {
        /// What, and why not.
        what: &'static str,
    },
    /// The test asks for something iperf 2's protocol (`--iperf2`) cannot carry.
    #[error("iperf 2's protocol cannot carry {what}")]
    NotWithIperf2 {
        /// What, and why not.
        what: String,
    },
    /// The client holds a key and the server answered in iperf3's protocol, which cannot carry it:
    /// the test stops rather than fall back unauthenticated (a downgrade anyone in the path can cause
    /// with one byte).
    #[error(
        "{addr} answered in iperf3's protocol (first byte {first_byte:#04x}), which cannot authenticate; \
         a client with a key does not fall back to it"
    )]
    Downgrade {
        /// The server's address.
        addr: SocketAddr,
        /// The byte it answered with.
        first_byte: u8,
    },
    /// The server answered in iperf3's protocol (PARAM_EXCHANGE or ACCESS_DENIED): retry with
    /// `run_iperf3_client`.
    #[error("{addr} is an iperf3 server")]
    Iperf3Server {
        /// The server's address.
        addr: SocketAddr,
    },
    /// A `--tls` test, and the server accepted it without announcing a certificate: it predates TLS.
    #[error("the server accepted the test without offering TLS (a landspeed server older than TLS support?); run without TLS")]
    TlsNotOffered,
    /// A QUIC test, and the server accepted it without a QUIC port or certificate: it predates QUIC.
    #[error(
        "the server accepted a QUIC test without offering QUIC (a landspeed server older than QUIC support?)"
    )]
    QuicNotOffered,
    // --- This host cannot do what the test asks: change this host or the options that need it. (`Remedy::FixThisHost`)
    /// `--flow-label`: the label cannot be used.
    #[error("cannot set the IPv6 flow label: {reason}")]
    FlowLabel {
        /// Why.
        reason: String,
    },
    /// `--bind-dev`: the interface cannot be bound.
    #[error("cannot send from interface {device}: {err}")]
    BindDevice {
        /// The interface.
        device: String,
        /// The kernel's reason (no such device, not permitted).
        err: std::io::Error,
    },
    /// Kernel TLS was asked for and cannot be used.
    #[error("kernel TLS: {reason}")]
    Ktls {
        /// Why not, in words.
        reason: String,
    },
    /// The test asks for something this platform does not have.
    #[error(transparent)]
    Unsupported(#[from] landspeed_engine::platform::Unsupported),
    /// MPTCP was asked for and this host cannot open an MPTCP socket.
    #[error("cannot open an MPTCP socket: {reason}")]
    Mptcp {
        /// The kernel's side of it, in words.
        reason: String,
    },
    /// A socket option the test asks for could not be set.
    #[error(transparent)]
    SockOpt(#[from] SockOptError),
    /// The system had no randomness to give (cookie, key, session id).
    #[error("no randomness for {what}: {err}")]
    Random {
        /// What it was for.
        what: &'static str,
        /// Why not.
        err: getrandom::Error,
    },
    /// A file of a disk-to-disk test could not be read or written.
    #[error("file {path}: {err}")]
    File {
        /// The file.
        path: String,
        /// Why.
        err: std::io::Error,
    },
    // --- The server cannot be found or reached: check the name, the address and the path to it. (`Remedy::CheckReach`)
    /// The server's name did not resolve.
    #[error("cannot resolve host '{host}': {err}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's reason.
        err: std::io::Error,
    },
    /// The name has no address of the family asked for.
    #[error("host '{host}' has no {family} address")]
    NoAddress {
        /// The name.
        host: String,
        /// IPv4 or IPv6.
        family: &'static str,
    },
    /// iperf 2's `-d`/`-r`: this client cannot listen for the server's connections back.
    #[error("cannot listen on {addr} for the server's connections back (-d/-r): {err}{}", if .err.kind() == std::io::ErrorKind::AddrInUse { "; choose another port (iperf 2's -L, run's --listen-port)" } else { "" })]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why not.
        err: std::io::Error,
    },
    /// No connection to the server.
    #[error("cannot connect to {addr}: {err}")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// Why not.
        err: std::io::Error,
    },
    /// No QUIC handshake completed in time.
    #[error(
        "no QUIC answer from {addr} within {after:?} (is UDP blocked, or QUIC turned off on the server?)"
    )]
    QuicTimeout {
        /// The server's QUIC address.
        addr: SocketAddr,
        /// How long the client waited.
        after: Duration,
    },
    /// iperf 2's `-d`/`-r`: the server did not open its connections back to this client in time.
    #[error("the server opened {came} of {want} connections back to port {port} within {after:?} (a firewall or NAT in the way of connections to this host, or a server that does not connect back: landspeed serve needs --connect-back)")]
    NoConnectBack {
        /// The port this client listened on.
        port: u16,
        /// Connections that came.
        came: u32,
        /// Connections the test needs.
        want: u32,
        /// How long the client waited.
        after: Duration,
    },
    /// iperf 2's UDP `-d`/`-r`: not every one of the server's streams came to the listening port.
    #[error("the server sent {came} of {want} streams back to UDP port {port} within {after:?} (a firewall or NAT in the way of datagrams to this host, or a server that does not send back: landspeed serve needs --connect-back and --iperf2-udp-send; iperf 2.1.8's server now and then sends nothing back for -r with -P above 1, its own client's included: docs/iperf2.md)")]
    NoUdpBack {
        /// The port this client listened on.
        port: u16,
        /// Streams that came.
        came: u32,
        /// Streams the test needs.
        want: u32,
        /// How long the client waited.
        after: Duration,
    },
    /// An iperf 2 UDP `-R` test whose server sent nothing.
    #[error("the server sent no datagram within {after:?} of this UDP -R test's request (a server that refused it: landspeed serve without --iperf2-udp-send, or over its limits, as its log says; or a firewall in the way of its datagrams)")]
    NothingSent {
        /// How long this end waited.
        after: Duration,
    },
    /// iperf 2's `-d`/`-r`: the server closed the test's connection instead of acknowledging it.
    #[error("the server closed the connection of this -d/-r test without answering: it does not serve tests it must connect back for (landspeed serve needs --connect-back; its log says why)")]
    BackRefused,
    /// Something answered that is not a landspeed server.
    #[error("{addr} does not speak the landspeed protocol ({detail})")]
    NotLandspeed {
        /// The server's address.
        addr: SocketAddr,
        /// What it did instead.
        detail: String,
    },
    // --- The server said no: retry later, or ask its operator. (`Remedy::AskServer`)
    /// The server is at a capacity limit or rate-limits this address: the same test can succeed later.
    #[error("the server is busy: {reason}")]
    Busy {
        /// The server's words.
        reason: String,
    },
    /// The server refused the test for a reason a retry will not change.
    #[error("the server refused the test: {reason}")]
    Refused {
        /// The server's typed reason.
        code: landspeed_proto::Refusal,
        /// The server's words.
        reason: String,
    },
    /// An iperf3 server refused the test with its own error numbers (SERVER_ERROR).
    #[error("the iperf3 server refused the test: {} (iperf3 error {code})", landspeed_iperf3::strerror::server_error(*code, *errno))]
    Iperf3Refused {
        /// iperf3's error number.
        code: i32,
        /// The server's errno.
        errno: i32,
    },
    // --- The test broke while it ran: the path or the server failed; run it again, and look at the path if it repeats. (`Remedy::RunAgain`)
    /// The control connection failed (I/O, a timeout, the server closed it).
    #[error("control connection to {addr}: {err}")]
    Control {
        /// The server's address.
        addr: SocketAddr,
        /// What happened.
        err: ControlError,
    },
    /// The server closed the control connection mid-conversation: it was stopped, killed or
    /// restarted.
    #[error(
        "the server went away while {phase}: it closed the control connection (stopped, killed or restarted)"
    )]
    ServerWentAway {
        /// What the client was waiting for.
        phase: &'static str,
    },
    /// The data streams ended, but the server's results never came on the control connection.
    #[error("the data streams ended, but no answer came on the control connection for {after:?}: the control connection (or the server) went silent")]
    ControlSilent {
        /// How long the results were waited for after the data ended.
        after: Duration,
    },
    /// The data connections moved nothing for the idle timeout and then the control connection
    /// brought no results either: the path or the server went away mid-test.
    #[error("no progress for {idle:?} on the data connections ({streams}), then no answer on the control connection for {control_after:?}: the path or the server went away")]
    WentSilent {
        /// The idle timeout the data streams gave up after.
        idle: Duration,
        /// Each failed stream and why.
        streams: String,
        /// How long the control connection was then waited on.
        control_after: Duration,
    },
    /// A data stream failed to open.
    #[error("data stream {id}: {err}")]
    Stream {
        /// The stream.
        id: u32,
        /// Why.
        err: std::io::Error,
    },
    /// An iperf 2 server sent nothing on a connection of a `--trip-times` test it sends on, where
    /// it echoes the test's header before its data.
    #[error("data stream {id}: the iperf 2 server sent nothing within {after:?} of this test's start, where it echoes the test's header before it sends (a server that hung: iperf 2.1.8's now and then hangs or dies on -R, its own client's tests included: docs/iperf2.md)")]
    NoEcho {
        /// The stream.
        id: u32,
        /// How long its first bytes were waited for.
        after: Duration,
    },
    /// A data stream's TLS handshake failed.
    #[error("stream {id}: {detail}")]
    Tls {
        /// The stream.
        id: u32,
        /// What went wrong.
        detail: String,
    },
    /// A QUIC connection or stream failed.
    #[error("QUIC: {detail}")]
    Quic {
        /// What went wrong.
        detail: String,
    },
    /// An ndt7 subtest that could not start (`run --ndt7`).
    #[error("ndt7: {detail}")]
    Ndt7 {
        /// What went wrong.
        detail: String,
    },
    #[error(
        "UDP stream {id}: the server did not acknowledge it within {after:?} (is UDP port {port} open?)"
    )]
    /// A UDP stream's hello got no acknowledgement.
    UdpUnacknowledged {
        /// The stream.
        id: u32,
        /// How long it was tried.
        after: Duration,
        /// The server's UDP port.
        port: u16,
    },
    /// The iperf3 control connection failed (an I/O error, a write that timed out).
    #[error("iperf3 control connection: {0}")]
    Iperf3Control(ControlError),
    /// The latency probes could not run.
    #[error("latency probes: {0}")]
    Latency(#[from] landspeed_path::echo::EchoError),
    // --- The server broke the protocol: report it (with the server's version). (`Remedy::ReportPeer`)
    /// The conversation failed (a timeout at a step, a message out of turn, a remote error).
    #[error(transparent)]
    Protocol(ProtocolError),
    /// The server answered with something the session did not wait for at this step.
    #[error("the server answered out of order while {step}")]
    OutOfOrder {
        /// Which step.
        step: &'static str,
    },
    /// An iperf3 server sent a state other than the one its protocol has next.
    #[error("the iperf3 server said {got}, expected {expected}")]
    Iperf3Unexpected {
        /// The state that came.
        got: String,
        /// What the protocol has next.
        expected: &'static str,
    },
    /// The iperf3 conversation failed (the session's typed reason: a timeout or the server leaving
    /// at a named step, its results unreadable, SERVER_TERMINATE).
    #[error("iperf3: {0}")]
    Iperf3(landspeed_iperf3::Iperf3Error),
    /// An iperf3 server answered a UDP stream's hello with something other than `6789`.
    #[error("UDP stream {id}: unexpected answer to the iperf3 UDP hello")]
    Iperf3UdpHello {
        /// The stream.
        id: u32,
    },
    // --- The working load beside a request/response test failed: its own cause's remedy.
    /// The load `run --under-load` runs beside the transactions could not start or failed.
    #[error("the working load (--under-load) {why}")]
    Load {
        /// What happened, with the load's own error.
        why: String,
        /// The load's own error's remedy (`AskServer` when it ended without one).
        remedy: Remedy,
    },
    // --- The user stopped it. (`Remedy::Nothing`)
    /// Ctrl-C before the data moved.
    #[error("interrupted before the test started")]
    Interrupted,
}

impl From<ProtocolError> for ClientError {
    /// A refusal becomes `Busy` or `Refused` by its code, so callers decide by variant.
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Rejected { code, reason } if code.is_transient() => ClientError::Busy { reason },
            ProtocolError::Rejected { code, reason } => ClientError::Refused { code, reason },
            other => ClientError::Protocol(other),
        }
    }
}

impl ClientError {
    /// What the user can do about this failure (every variant is in one group: a new one must
    /// say which).
    pub fn remedy(&self) -> Remedy {
        match self {
            ClientError::Config(_)
            | ClientError::FileDirection { .. }
            | ClientError::NotWithIperf3 { .. }
            | ClientError::NotWithIperf2 { .. }
            | ClientError::Downgrade { .. }
            | ClientError::Iperf3Server { .. }
            | ClientError::TlsNotOffered
            | ClientError::QuicNotOffered => Remedy::FixCommand,
            ClientError::FlowLabel { .. }
            | ClientError::BindDevice { .. }
            | ClientError::Ktls { .. }
            | ClientError::Unsupported(_)
            | ClientError::Mptcp { .. }
            | ClientError::SockOpt(_)
            | ClientError::Random { .. }
            | ClientError::Listen { .. }
            | ClientError::File { .. } => Remedy::FixThisHost,
            ClientError::Resolve { .. }
            | ClientError::NoAddress { .. }
            | ClientError::Connect { .. }
            | ClientError::QuicTimeout { .. }
            | ClientError::NoConnectBack { .. }
            | ClientError::NoUdpBack { .. }
            | ClientError::NothingSent { .. }
            | ClientError::NotLandspeed { .. } => Remedy::CheckReach,
            ClientError::Busy { .. }
            | ClientError::Refused { .. }
            | ClientError::Iperf3Refused { .. }
            | ClientError::BackRefused => Remedy::AskServer,
            ClientError::Control { .. }
            | ClientError::ServerWentAway { .. }
            | ClientError::ControlSilent { .. }
            | ClientError::WentSilent { .. }
            | ClientError::Stream { .. }
            | ClientError::NoEcho { .. }
            | ClientError::Tls { .. }
            | ClientError::Quic { .. }
            | ClientError::Ndt7 { .. }
            | ClientError::UdpUnacknowledged { .. }
            | ClientError::Iperf3Control(_)
            | ClientError::Latency(_) => Remedy::RunAgain,
            ClientError::Protocol(_)
            | ClientError::OutOfOrder { .. }
            | ClientError::Iperf3Unexpected { .. }
            | ClientError::Iperf3(_)
            | ClientError::Iperf3UdpHello { .. } => Remedy::ReportPeer,
            ClientError::Load { remedy, .. } => *remedy,
            ClientError::Interrupted => Remedy::Nothing,
        }
    }

    /// Trying the same test again later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Busy { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_says_what_the_user_can_do() {
        let busy = ClientError::Busy {
            reason: "busy".into(),
        };
        assert_eq!(busy.remedy(), Remedy::AskServer);
        assert!(busy.is_transient());
        let resolve = ClientError::Resolve {
            host: "nowhere.invalid".into(),
            err: std::io::Error::other("no such host"),
        };
        assert_eq!(resolve.remedy(), Remedy::CheckReach);
        let config = ClientError::Config(landspeed_core::config::ConfigError::DiscardNeedsNoVerify);
        assert_eq!(config.remedy(), Remedy::FixCommand);
        assert_eq!(ClientError::Interrupted.remedy(), Remedy::Nothing);
        let odd = ClientError::OutOfOrder { step: "a test" };
        assert_eq!(odd.remedy(), Remedy::ReportPeer);
    }
}
