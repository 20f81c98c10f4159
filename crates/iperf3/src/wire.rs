//! Framing: the 37-byte cookie that opens the control connection and every TCP data connection, the
//! signed state bytes, and the 4-byte big-endian length in front of each JSON message.

/// Cookie length on the wire: 36 characters and a NUL.
pub const COOKIE_LEN: usize = 37;
/// The largest JSON message accepted (iperf3 caps its parameter message at 8 KiB; results with many
/// streams and server output are larger, so results get more room).
pub const MAX_JSON: usize = 8 * 1024;
/// The largest results message accepted.
pub const MAX_RESULTS_JSON: usize = 4 * 1024 * 1024;
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The state machine's messages, one signed byte each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The server starts the test (1).
    TestStart,
    /// The data moves (2).
    TestRunning,
    /// The client ends the test (4).
    TestEnd,
    /// The server asks for the parameters (9).
    ParamExchange,
    /// The server asks for the data connections (10).
    CreateStreams,
    /// The server gave up on the test (11).
    ServerTerminate,
    /// The client gave up on the test (12).
    ClientTerminate,
    /// The server asks for the results (13).
    ExchangeResults,
    /// The server has sent its results (14).
    DisplayResults,
    /// The client's goodbye (16).
    IperfDone,
    /// The server runs another test (-1).
    AccessDenied,
    /// The server refuses or failed the test; two numbers follow (-2).
    ServerError,
    /// landspeed's extension, never sent to an iperf3 client: a landspeed server took the parameters'
    /// `landspeed_payload_key` and will check and send landspeed's pattern (76, 'L'; just before
    /// CREATE_STREAMS, and only to a client that sent the key).
    LandspeedPayload,
}

impl State {
    /// The state's byte on the wire.
    pub fn byte(self) -> u8 {
        (match self {
            State::TestStart => 1i8,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
            State::LandspeedPayload => 76,
        }) as u8
    }

    /// The state a byte stands for, if any.
    pub fn from_byte(b: u8) -> Option<State> {
        Some(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            76 => State::LandspeedPayload,
            _ => return None,
        })
    }
}

/// iperf3 error numbers sent after SERVER_ERROR (from iperf_api.h), the ones landspeed uses.
pub mod errno {
    /// IEDURATION: the test is too long.
    pub const DURATION: i32 = 5;
    /// IENUMSTREAMS: too many streams.
    pub const NUM_STREAMS: i32 = 6;
    /// IEBLOCKSIZE: the write size is out of range.
    pub const BLOCK_SIZE: i32 = 7;
    /// IEBUFSIZE: the socket buffer is out of range.
    pub const BUF_SIZE: i32 = 8;
    /// IEMSS: the MSS is out of range.
    pub const MSS: i32 = 10;
    /// IEOMIT: the warm-up is out of range.
    pub const OMIT: i32 = 12;
    /// IEUNIMP: not implemented.
    pub const UNIMPLEMENTED: i32 = 13;
    /// IEBURST: the UDP burst is out of range.
    pub const BURST: i32 = 15;
    /// IEENDCONDITIONS: more than one end condition, or a count too small.
    pub const END_CONDITIONS: i32 = 16;
    /// IEUDPBLOCKSIZE: the UDP datagram size is out of range.
    pub const UDP_BLOCK_SIZE: i32 = 20;
    /// IEBADTOS: the TOS byte is not 0-255.
    pub const BAD_TOS: i32 = 21;
    /// IEREVERSEBIDIR: reverse and bidirectional together.
    pub const REVERSE_BIDIR: i32 = 25;
    /// IETOTALRATE: over the server's total rate.
    pub const TOTAL_RATE: i32 = 27;
    /// IESERVERTERM: the server has terminated (here: a test cut at the server's byte limit).
    pub const SERVER_TERM: i32 = 120;
    /// IESERVERTESTDURATIONEXPIRED: the server cut the test at its longest test.
    pub const SERVER_TEST_DURATION_EXPIRED: i32 = 160;
    /// IERECVPARAMS: the parameters could not be read.
    pub const RECV_PARAMS: i32 = 114;
    /// IERECVRESULTS: the results could not be read.
    pub const RECV_RESULTS: i32 = 117;
    /// IEACCESSDENIED: the server runs another test.
    pub const ACCESS_DENIED: i32 = 121;
    /// IESETCONGESTION: the congestion control cannot be set.
    pub const SET_CONGESTION: i32 = 134;
    /// IEAUTHTEST: the test's authorization failed (iperf3's RSA authentication).
    pub const AUTH_TEST: i32 = 142;
    /// IESTREAMACCEPT: the data connections did not all come.
    pub const STREAM_ACCEPT: i32 = 204;
}

/// The SERVER_ERROR message: the state byte, then the iperf3 error number and errno, big-endian.
pub fn server_error(code: i32, os_errno: i32) -> [u8; 9] {
    let mut m = [0u8; 9];
    m[0] = State::ServerError.byte();
    m[1..5].copy_from_slice(&code.to_be_bytes());
    m[5..9].copy_from_slice(&os_errno.to_be_bytes());
    m
}

/// A test's cookie: 36 characters from iperf3's alphabet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; 36]);

impl Cookie {
    /// A cookie from 36 random bytes (the caller supplies the randomness).
    pub fn from_random(r: [u8; 36]) -> Cookie {
        Cookie(r.map(|b| ALPHABET[usize::from(b) % 32]))
    }

    /// Parses the 37 bytes read from a connection; `None` if they are not a cookie.
    pub fn parse(b: &[u8]) -> Option<Cookie> {
        if b.len() != COOKIE_LEN || b[36] != 0 || !b[..36].iter().all(|c| ALPHABET.contains(c)) {
            return None;
        }
        let mut c = [0u8; 36];
        c.copy_from_slice(&b[..36]);
        Some(Cookie(c))
    }

    /// The 37 bytes that open a connection: the cookie and a NUL.
    pub fn to_wire(self) -> [u8; COOKIE_LEN] {
        let mut w = [0u8; COOKIE_LEN];
        w[..36].copy_from_slice(&self.0);
        w
    }

    /// The cookie as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("?")
    }
}

/// A JSON message: 4-byte big-endian length and the compact JSON text.
pub fn frame_json(v: &serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(v).expect("JSON values serialize");
    let mut m = Vec::with_capacity(4 + body.len());
    m.extend_from_slice(&(body.len() as u32).to_be_bytes());
    m.extend_from_slice(&body);
    m
}

/// Checks a JSON message's length prefix against a cap.
pub fn json_len(prefix: [u8; 4], cap: usize) -> Result<usize, usize> {
    let n = u32::from_be_bytes(prefix) as usize;
    if n == 0 || n > cap {
        Err(n)
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_bytes_round_trip() {
        for b in 0..=255u8 {
            if let Some(s) = State::from_byte(b) {
                assert_eq!(s.byte(), b);
            }
        }
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        assert_eq!(State::from_byte(3), None);
    }

    #[test]
    fn cookies_use_the_alphabet_and_parse_back() {
        let c = Cookie::from_random([200; 36]);
        let w = c.to_wire();
        assert_eq!(w[36], 0);
        assert_eq!(Cookie::parse(&w), Some(c));
        let mut bad = w;
        bad[3] = b'1';
        assert_eq!(Cookie::parse(&bad), None);
        assert_eq!(Cookie::parse(&w[..36]), None);
    }

    #[test]
    fn server_error_layout() {
        let m = server_error(errno::NUM_STREAMS, 0);
        assert_eq!(m, [0xfe, 0, 0, 0, 6, 0, 0, 0, 0]);
    }

    #[test]
    fn json_lengths_are_capped() {
        assert_eq!(json_len(10u32.to_be_bytes(), MAX_JSON), Ok(10));
        assert_eq!(json_len(0u32.to_be_bytes(), MAX_JSON), Err(0));
        assert_eq!(json_len(u32::MAX.to_be_bytes(), MAX_JSON), Err(u32::MAX as usize));
    }
}
