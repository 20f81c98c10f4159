//! iperf3's error numbers as its own `iperf_strerror` words them (iperf 3.21's iperf_error.c: the
//! enum of iperf_api.h and the limits of iperf.h filled in), so the drop-in says what iperf3 says when
//! an iperf3 server answers SERVER_ERROR with a number: "SERVER ERROR - total required bandwidth is
//! larger than server limit", not the number. A fact table, in number order.

/// (error number, iperf3's words, whether iperf3 adds ": " and the errno's own words).
const WORDS: &[(i32, &str, bool)] = &[
    (0, "no error", false), // IENONE
    (1, "cannot be both server and client", false), // IESERVCLIENT
    (2, "must either be a client (-c) or server (-s)", false), // IENOROLE
    (3, "some option you are trying to set is server only", false), // IESERVERONLY
    (4, "some option you are trying to set is client only", false), // IECLIENTONLY
    (5, "test duration valid values are 0 to 86400 seconds", false), // IEDURATION
    (6, "invalid number of parallel streams (min = 1, max = 128)", false), // IENUMSTREAMS
    (7, "block size too large (maximum = 1048576 bytes)", false), // IEBLOCKSIZE
    (8, "socket buffer size too large (maximum = 512 bytes)", false), // IEBUFSIZE
    (9, "invalid report interval (min = 0.1, max = 60 seconds)", false), // IEINTERVAL
    (10, "TCP MSS too large (maximum = 32768 bytes)", false), // IEMSS
    (11, "this OS does not support sendfile", false), // IENOSENDFILE
    (12, "bogus value for --omit (maximum = 600 seconds)", false), // IEOMIT
    (13, "an option you are trying to set is not implemented yet", false), // IEUNIMP
    (14, "unable to open -F file", true), // IEFILE
    (15, "invalid burst count (maximum = 1000)", false), // IEBURST
    (16, "only one test end condition (-t, -n, -k) may be specified", false), // IEENDCONDITIONS
    (17, "unable to open log file", true), // IELOGFILE
    (18, "no SCTP support available", false), // IENOSCTP
    (19, "--bind must be specified to use --cport", false), // IEBIND
    (20, "block size invalid (minimum = 4 bytes, maximum = 65535 bytes)", false), // IEUDPBLOCKSIZE
    (21, "bad TOS value (must be between 0 and 255 inclusive)", false), // IEBADTOS
    (22, "you must specify a username, password, and path to a valid RSA public key", false), // IESETCLIENTAUTH
    (23, "you must specify a path to a valid RSA private key and a user credential file", false), // IESETSERVERAUTH
    (24, "bad format specifier (valid formats are in the set [kmgtKMGT])", false), // IEBADFORMAT
    (25, "cannot be both reverse and bidirectional", false), // IEREVERSEBIDIR
    (26, "port number must be between 1 and 65535 inclusive", false), // IEBADPORT
    (27, "total required bandwidth is larger than server limit", false), // IETOTALRATE
    (28, "invalid time interval for calculating average data rate", false), // IETOTALINTERVAL
    (29, "skew threshold must be a positive number", false), // IESKEWTHRESHOLD
    (30, "idle timeout parameter is not positive or larger than allowed limit", false), // IEIDLETIMEOUT
    (31, "receive timeout value is incorrect or not in range", true), // IERCVTIMEOUT
    (32, "client receive timeout is valid only in receiving mode", true), // IERVRSONLYRCVTIMEOUT
    (33, "send timeout value is incorrect or not in range", true), // IESNDTIMEOUT
    (34, "cannot transfer file using UDP", false), // IEUDPFILETRANSFER
    (35, "cannot access authorized users file", false), // IESERVERAUTHUSERS
    (36, "control connection Keepalive period should be larger than the full retry period (interval * count)", true), // IECNTLKA
    (37, "client's requested duration exceeds the server's maximum permitted limit", false), // IEMAXSERVERTESTDURATIONEXCEEDED
    (38, "invalid unit value or suffix", false), // IEUNITVAL
    (39, "this OS does not support --skip-rx-copy", false), // IERVRSONLYSKIPRXCOPY
    (40, "bad DSCP value (numeric: 0-63 inclusive, symbolic: one of [af11-13, af21-23, af31-33, af41-43, cs1-7, ef, va, lowdelay, throughput, reliability])", false), // IEBADDSCP
    (100, "unable to create a new test", true), // IENEWTEST
    (101, "test initialization failed", true), // IEINITTEST
    (102, "unable to start listener for connections", true), // IELISTEN
    (103, "unable to connect to server - server may have stopped running or use a different port, firewall issue, etc.", true), // IECONNECT
    (104, "unable to accept connection from client", true), // IEACCEPT
    (105, "unable to send cookie to server", true), // IESENDCOOKIE
    (106, "unable to receive cookie at server", true), // IERECVCOOKIE
    (107, "unable to write to the control socket", true), // IECTRLWRITE
    (108, "unable to read from the control socket", true), // IECTRLREAD
    (109, "control socket has closed unexpectedly", false), // IECTRLCLOSE
    (110, "received an unknown control message (ensure other side is iperf3 and not iperf)", false), // IEMESSAGE
    (111, "unable to send control message - port may not be available, the other side may have stopped running, etc.", true), // IESENDMESSAGE
    (112, "unable to receive control message - port may not be available, the other side may have stopped running, etc.", true), // IERECVMESSAGE
    (113, "unable to send parameters to server", true), // IESENDPARAMS
    (114, "unable to receive parameters from client", true), // IERECVPARAMS
    (115, "unable to package results", true), // IEPACKAGERESULTS
    (116, "unable to send results", true), // IESENDRESULTS
    (117, "unable to receive results", true), // IERECVRESULTS
    (118, "select failed", true), // IESELECT
    (119, "the client has terminated", false), // IECLIENTTERM
    (120, "the server has terminated", false), // IESERVERTERM
    (121, "the server is busy running a test. try again later", false), // IEACCESSDENIED
    (122, "unable to set TCP/SCTP NODELAY", true), // IESETNODELAY
    (123, "unable to set TCP/SCTP MSS", true), // IESETMSS
    (124, "unable to set socket buffer size", true), // IESETBUF
    (125, "unable to set IP TOS", true), // IESETTOS
    (126, "unable to set IPv6 traffic class", true), // IESETCOS
    (127, "unable to set IPv6 flow label", false), // IESETFLOW
    (128, "unable to reuse address on socket", true), // IEREUSEADDR
    (129, "unable to set socket to non-blocking", true), // IENONBLOCKING
    (130, "unable to set socket window size", true), // IESETWINDOWSIZE
    (131, "protocol does not exist", false), // IEPROTOCOL
    (132, "unable to set CPU affinity", true), // IEAFFINITY
    (133, "unable to become a daemon", true), // IEDAEMON
    (134, "unable to set TCP_CONGESTION: Supplied congestion control algorithm not supported on this host", false), // IESETCONGESTION
    (135, "unable to write PID file", true), // IEPIDFILE
    (136, "Unable to set/reset IPV6_V6ONLY", true), // IEV6ONLY
    (137, "unable to set SCTP_DISABLE_FRAGMENTS", true), // IESETSCTPDISABLEFRAG
    (138, "unable to set SCTP_INIT num of SCTP streams\\n", true), // IESETSCTPNSTREAM
    (140, "unable to set socket pacing", true), // IESETPACING
    (141, "socket buffer size not set correctly", false), // IESETBUF2
    (142, "test authorization failed", false), // IEAUTHTEST
    (143, "Unable to bind-to-device (check perror, maybe permissions?)", false), // IEBINDDEV
    (144, "idle timeout for receiving data", false), // IENOMSG
    (145, "unable to set IP Do-Not-Fragment flag", false), // IESETDONTFRAGMENT
    (146, "`<ip>%%<dev>` is not supported as system does not support bind to device", false), // IEBINDDEVNOSUPPORT
    (147, "host device name (ip%%<dev>) is supported (and required) only for IPv6 link-local address", false), // IEHOSTDEV
    (148, "unable to set TCP USER_TIMEOUT", true), // IESETUSERTIMEOUT
    (150, "unable to create thread", true), // IEPTHREADCREATE
    (151, "unable to cancel thread", true), // IEPTHREADCANCEL
    (152, "unable to join thread", true), // IEPTHREADJOIN
    (153, "unable to create thread attributes", true), // IEPTHREADATTRINIT
    (154, "unable to destroy thread attributes", false), // IEPTHREADATTRDESTROY
    (155, "unable to set socket keepalive (SO_KEEPALIVE) option", true), // IESETCNTLKA
    (156, "unable to set socket keepalive TCP period (TCP_KEEPIDLE) option", true), // IESETCNTLKAKEEPIDLE
    (157, "unable to set/get socket keepalive TCP retry interval (TCP_KEEPINTVL) option", true), // IESETCNTLKAINTERVAL
    (158, "unable to set/get socket keepalive TCP number of retries (TCP_KEEPCNT) option", true), // IESETCNTLKACOUNT
    (159, "unable to change mask of blocked signals", false), // IEPTHREADSIGMASK
    (160, "server test duration expired", true), // IESERVERTESTDURATIONEXPIRED
    (200, "unable to create a new stream", true), // IECREATESTREAM
    (201, "unable to initialize stream", true), // IEINITSTREAM
    (202, "unable to start stream listener", true), // IESTREAMLISTEN
    (203, "unable to connect stream", true), // IESTREAMCONNECT
    (204, "unable to accept stream connection", true), // IESTREAMACCEPT
    (205, "unable to write to stream socket", true), // IESTREAMWRITE
    (206, "unable to read from stream socket", true), // IESTREAMREAD
    (207, "stream socket has closed unexpectedly", false), // IESTREAMCLOSE
    (208, "stream has an invalid id", false), // IESTREAMID
    (300, "unable to create new timer", true), // IENEWTIMER
    (301, "unable to update timer", true), // IEUPDATETIMER
];

/// iperf3's words for its error number `code`, with `errno`'s text where iperf3 adds it (its
/// `iperf_strerror` with that errno set); `None` for a number iperf3 does not have.
pub fn words(code: i32, errno: i32) -> Option<String> {
    let i = WORDS.binary_search_by_key(&code, |w| w.0).ok()?;
    let (_, text, with_errno) = WORDS[i];
    if !with_errno {
        return Some(text.to_string());
    }
    let os = match errno {
        0 => String::new(),
        e => errno_words(e),
    };
    Some(format!("{text}: {os}"))
}

/// The C library's words for `errno` (strerror), as iperf3 prints them.
fn errno_words(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    // std writes "Words (os error N)"; iperf3 writes the words alone.
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// How an iperf3 client words a SERVER_ERROR, as it prints it and puts it in `-J`'s `error`.
pub fn server_error(code: i32, errno: i32) -> String {
    let words = words(code, 0).unwrap_or_else(|| format!("int_errno={code}"));
    match errno {
        e if e > 0 => format!("SERVER ERROR - {words}, errno: {}", errno_words(e)),
        _ => format!("SERVER ERROR - {words}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_iperf3_words_them() {
        assert!(
            WORDS.windows(2).all(|w| w[0].0 < w[1].0),
            "in number order, once each"
        );
        assert_eq!(
            words(27, 0).as_deref(),
            Some("total required bandwidth is larger than server limit")
        );
        assert_eq!(
            words(6, 0).as_deref(),
            Some("invalid number of parallel streams (min = 1, max = 128)")
        );
        assert_eq!(
            server_error(27, 0),
            "SERVER ERROR - total required bandwidth is larger than server limit"
        );
        assert_eq!(words(99_999, 0), None);
        assert_eq!(server_error(99_999, 0), "SERVER ERROR - int_errno=99999");
        let with_errno = WORDS.iter().find(|w| w.2).unwrap();
        assert_eq!(
            words(with_errno.0, 2).unwrap(),
            format!("{}: No such file or directory", with_errno.1)
        );
        assert!(server_error(27, 2).ends_with(", errno: No such file or directory"));
    }
}
