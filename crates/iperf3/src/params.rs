//! The parameter message (client → server): parsed liberally (every key optional, numbers as integers
//! or floats, unknown keys ignored), checked strictly against iperf3's own limits, and turned into the
//! `TestSpec` landspeed's engine runs. Also the reverse, for `landspeed run --iperf3`.

use crate::wire::errno;
use landspeed_core::config::{ConfigError, Direction, EndCondition, RxMode, Test, TestSpec};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// iperf3's limits, named after its own (iperf_api.h). Most streams (MAX_STREAMS).
pub const MAX_STREAMS: u64 = 128;
/// Longest test, seconds (MAX_TIME).
pub const MAX_TIME_S: f64 = 86_400.0;
/// Longest warm-up, seconds (MAX_OMIT_TIME).
pub const MAX_OMIT_S: f64 = 600.0;
/// Largest TCP write (MAX_BLOCKSIZE).
pub const MAX_TCP_LEN: u64 = 1024 * 1024;
/// Largest UDP datagram (MAX_UDP_BLOCKSIZE).
pub const MAX_UDP_LEN: u64 = 65_507;
/// Largest socket buffer (MAX_TCP_BUFFER).
pub const MAX_WINDOW: u64 = 512 * 1024 * 1024;
/// Largest MSS (MAX_MSS).
pub const MAX_MSS: u64 = 9 * 1024;
/// Smallest MSS taken (Linux's own floor for TCP_MAXSEG is 88).
pub const MIN_MSS: u32 = 88;
/// iperf3's default TCP write size.
pub const DEFAULT_TCP_LEN: u64 = 128 * 1024;
/// iperf3's default UDP datagram size.
pub const DEFAULT_UDP_LEN: u64 = 1460;

/// A parameter message that cannot be run, with the iperf3 error number to answer it with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    /// iperf3's error number to answer with (after SERVER_ERROR).
    pub code: i32,
    /// What is wrong, in words (for the log).
    pub message: String,
}

/// The parameter that carries landspeed's extension.
pub const PAYLOAD_KEY: &str = "landspeed_payload_key";

fn err(code: i32, message: impl Into<String>) -> ParamError {
    ParamError {
        code,
        message: message.into(),
    }
}

/// The parameters landspeed understands.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Params {
    /// UDP instead of TCP (`-u`).
    pub udp: bool,
    /// Warm-up left out of the results, seconds (`-O`).
    pub omit_s: f64,
    /// Test length, seconds (`-t`; 0 with a byte or block count).
    pub time_s: f64,
    /// Bytes to move (`-n`; 0: not a byte count).
    pub bytes: u64,
    /// Blocks to move (`-k`; 0: not a block count).
    pub blocks: u64,
    /// Streams per direction (`-P`).
    pub parallel: u32,
    /// Write size, or UDP datagram size (`-l`).
    pub len: u64,
    /// The server sends (`-R`).
    pub reverse: bool,
    /// Both ends send (`--bidir`).
    pub bidirectional: bool,
    /// Socket buffer per stream (`-w`).
    pub window: Option<u64>,
    /// TCP maximum segment size (`-M`).
    pub mss: Option<u32>,
    /// TCP_NODELAY (`-N`).
    pub nodelay: bool,
    /// Per-stream rate in bit/s (iperf3's `-b`).
    pub bandwidth_bps: Option<f64>,
    /// Per-stream fq pacing rate, bit/s (`--fq-rate`).
    pub fqrate_bps: Option<f64>,
    /// TCP congestion control (`-C`).
    pub congestion: Option<String>,
    /// The client wants the server's output in the results (`--get-server-output`).
    pub get_server_output: bool,
    /// UDP datagrams carry 64-bit counters (`--udp-counters-64bit`).
    pub udp_counters_64bit: bool,
    /// UDP: datagrams per burst (iperf3's `-b RATE/N`).
    pub burst: Option<u32>,
    /// The client's version string, when it sends one.
    pub client_version: Option<String>,
    /// iperf3's authentication token (`--username` with `--rsa-public-key-path`), base64.
    pub authtoken: Option<String>,
    /// The client's `-T` title.
    pub title: Option<String>,
    /// The client's `--extra-data`.
    pub extra_data: Option<String>,
    /// UDP over IPv4: datagrams leave with Don't Fragment set (`--dont-fragment`, iperf3 3.17+).
    pub dont_fragment: bool,
    /// Multipath TCP data connections (`-m`/`--mptcp`, iperf3 3.19+): `mptcp: true`.
    pub mptcp: bool,
    /// The IP type-of-service byte on every data socket (`-S`/`--dscp`): `TOS`, 0-255.
    pub tos: Option<u8>,
    /// landspeed's extension (`landspeed_payload_key`, which iperf3 ignores): the client sends
    /// landspeed's payload pattern with this key and asks the server to check every byte it receives
    /// and to send the same pattern (docs/iperf3.md, "Verified over iperf3's protocol").
    pub landspeed_payload_key: Option<u64>,
}

fn num(m: &Map<String, Value>, k: &str) -> Result<Option<f64>, ParamError> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(Some)
            .ok_or_else(|| err(errno::RECV_PARAMS, format!("parameter {k} is out of range"))),
        Some(Value::Bool(b)) => Ok(Some(f64::from(u8::from(*b)))),
        Some(_) => Err(err(errno::RECV_PARAMS, format!("parameter {k} is not a number"))),
    }
}

fn flag(m: &Map<String, Value>, k: &str) -> Result<bool, ParamError> {
    Ok(num(m, k)?.is_some_and(|x| x != 0.0))
}

fn text(m: &Map<String, Value>, k: &str, max: usize) -> Result<Option<String>, ParamError> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= max => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(err(errno::RECV_PARAMS, format!("parameter {k} is too long"))),
        Some(_) => Err(err(errno::RECV_PARAMS, format!("parameter {k} is not a string"))),
    }
}

fn int_at_most(m: &Map<String, Value>, k: &str, max: u64, code: i32) -> Result<Option<u64>, ParamError> {
    match num(m, k)? {
        None => Ok(None),
        Some(x) if x <= max as f64 => Ok(Some(x as u64)),
        Some(x) => Err(err(code, format!("{k} {x} is larger than iperf3 allows ({max})"))),
    }
}

/// The test's length and warm-up, seconds, within iperf3's bounds.
fn durations(m: &Map<String, Value>) -> Result<(f64, f64), ParamError> {
    let time_s = num(m, "time")?.unwrap_or(10.0);
    if time_s > MAX_TIME_S {
        return Err(err(
            errno::DURATION,
            format!("time {time_s} s is longer than {MAX_TIME_S} s"),
        ));
    }
    let omit_s = num(m, "omit")?.unwrap_or(0.0);
    if omit_s > MAX_OMIT_S {
        return Err(err(
            errno::OMIT,
            format!("omit {omit_s} s is longer than {MAX_OMIT_S} s"),
        ));
    }
    Ok((time_s, omit_s))
}

/// The write (TCP) or datagram (UDP) size: iperf3's default when absent or 0, within its bounds.
fn block_len(m: &Map<String, Value>, udp: bool) -> Result<u64, ParamError> {
    let (max_len, code, default_len) = if udp {
        (MAX_UDP_LEN, errno::UDP_BLOCK_SIZE, DEFAULT_UDP_LEN)
    } else {
        (MAX_TCP_LEN, errno::BLOCK_SIZE, DEFAULT_TCP_LEN)
    };
    let len = match int_at_most(m, "len", max_len, code)? {
        None | Some(0) => default_len,
        Some(l) => l,
    };
    if udp && len <= landspeed_core::udp::HEADER as u64 {
        return Err(err(
            errno::UDP_BLOCK_SIZE,
            format!("UDP datagrams of {len} bytes are too small"),
        ));
    }
    Ok(len)
}

/// landspeed's extension key, when a landspeed client sent it: a whole number of 64 bits.
fn payload_key(m: &Map<String, Value>) -> Result<Option<u64>, ParamError> {
    match m.get(PAYLOAD_KEY) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            err(
                errno::RECV_PARAMS,
                format!("parameter {PAYLOAD_KEY} is not a 64-bit whole number"),
            )
        }),
    }
}

/// The MSS asked for, when one is (0 means none).
fn mss(m: &Map<String, Value>) -> Result<Option<u32>, ParamError> {
    let mss = int_at_most(m, "MSS", MAX_MSS, errno::MSS)?
        .filter(|x| *x > 0)
        .map(|x| x as u32);
    if let Some(x) = mss.filter(|x| *x < MIN_MSS) {
        return Err(err(errno::MSS, format!("MSS {x} is below {MIN_MSS}")));
    }
    Ok(mss)
}

/// The congestion control asked for, when one is: a name Linux can take.
fn congestion(m: &Map<String, Value>) -> Result<Option<String>, ParamError> {
    // Linux takes congestion control names of at most 15 bytes (TCP_CA_NAME_MAX with its NUL).
    let congestion = text(m, "congestion", 15)?.filter(|c| !c.is_empty());
    if let Some(c) = &congestion {
        if !c
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(err(
                errno::SET_CONGESTION,
                format!("congestion control {c:?} is not a name"),
            ));
        }
    }
    Ok(congestion)
}

impl Params {
    /// Parses and checks a parameter message.
    pub fn parse(body: &[u8]) -> Result<Params, ParamError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| err(errno::RECV_PARAMS, format!("parameters are not JSON: {e}")))?;
        let m = v
            .as_object()
            .ok_or_else(|| err(errno::RECV_PARAMS, "parameters are not a JSON object"))?;
        let udp = flag(m, "udp")?;
        if udp && flag(m, "tcp")? {
            return Err(err(errno::RECV_PARAMS, "both tcp and udp requested"));
        }
        let (time_s, omit_s) = durations(m)?;
        let parallel = int_at_most(m, "parallel", MAX_STREAMS, errno::NUM_STREAMS)?.unwrap_or(1);
        if parallel == 0 {
            return Err(err(errno::NUM_STREAMS, "parallel must be at least 1"));
        }
        let len = block_len(m, udp)?;
        let bytes = num(m, "num")?.unwrap_or(0.0) as u64;
        let blocks = num(m, "blockcount")?.unwrap_or(0.0) as u64;
        if bytes > 0 && blocks > 0 {
            return Err(err(errno::END_CONDITIONS, "both num and blockcount given"));
        }
        let reverse = flag(m, "reverse")?;
        let bidirectional = flag(m, "bidirectional")?;
        if reverse && bidirectional {
            return Err(err(
                errno::REVERSE_BIDIR,
                "both reverse and bidirectional requested",
            ));
        }
        let window = int_at_most(m, "window", MAX_WINDOW, errno::BUF_SIZE)?.filter(|w| *w > 0);
        let mss = mss(m)?;
        let congestion = congestion(m)?;
        Ok(Params {
            udp,
            omit_s,
            time_s,
            bytes,
            blocks,
            parallel: parallel as u32,
            len,
            reverse,
            bidirectional,
            window,
            mss,
            nodelay: flag(m, "nodelay")?,
            bandwidth_bps: num(m, "bandwidth")?.filter(|b| *b > 0.0),
            fqrate_bps: num(m, "fqrate")?.filter(|b| *b > 0.0),
            congestion,
            get_server_output: flag(m, "get_server_output")?,
            udp_counters_64bit: flag(m, "udp_counters_64bit")?,
            burst: int_at_most(m, "burst", 1000, errno::BURST)?.map(|b| b as u32),
            client_version: text(m, "client_version", 64)?,
            authtoken: text(m, "authtoken", crate::auth::MAX_TOKEN_LEN)?,
            title: text(m, "title", 1024)?,
            extra_data: text(m, "extra_data", 4096)?,
            dont_fragment: flag(m, "dont_fragment")?,
            mptcp: flag(m, "mptcp")?,
            tos: int_at_most(m, "TOS", 255, errno::BAD_TOS)?.map(|t| t as u8),
            landspeed_payload_key: payload_key(m)?,
        })
    }

    /// Forward, reverse (`-R`) or both (`--bidir`).
    pub fn direction(&self) -> Direction {
        if self.bidirectional {
            Direction::Bidir
        } else if self.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        }
    }

    /// The spec this server runs for an iperf3 client. The client decides when a timed test ends (it
    /// sends TEST_END), so a sending server gets a generous deadline only as a safety bound. iperf3's
    /// payload is not landspeed's pattern, so nothing is verified and receivers discard in the kernel;
    /// a landspeed client that sent its payload key gets every byte checked, with that key.
    pub fn to_spec(&self, payload_key: u64) -> TestSpec {
        let mut spec = self.unverified_spec(payload_key);
        if let Some(key) = self.landspeed_payload_key {
            spec.verify = true;
            spec.payload_key = key;
            spec.rx = RxMode::default();
        }
        spec
    }

    fn unverified_spec(&self, payload_key: u64) -> TestSpec {
        let end = if self.bytes > 0 {
            EndCondition::Bytes(self.bytes)
        } else if self.blocks > 0 {
            EndCondition::Blocks(self.blocks)
        } else {
            let t = if self.time_s > 0.0 {
                self.time_s
            } else {
                MAX_TIME_S
            };
            // At most a day, the longest test landspeed runs.
            EndCondition::Time(Duration::from_secs_f64((t + self.omit_s + 10.0).min(MAX_TIME_S)))
        };
        // iperf3's -b paces each TCP stream; the kernel's pacing does the same without bursts. For UDP
        // it is each stream's datagram rate (1 Mbit/s when not given).
        let per_stream = match (self.bandwidth_bps, self.fqrate_bps) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if self.udp {
            let rate = self
                .bandwidth_bps
                .unwrap_or(landspeed_core::config::DEFAULT_UDP_RATE_BPS);
            return TestSpec {
                streams: self.parallel,
                length_bytes: self.len,
                end,
                omit_s: Duration::from_secs_f64(self.omit_s),
                direction: self.direction(),
                window_bytes: self.window,
                verify: false,
                payload_key,
                transport: landspeed_core::config::Transport::Udp,
                rate_bps: Some(rate * f64::from(self.parallel)),
                burst: self.burst.filter(|b| *b > 0).unwrap_or(16),
                tos: self.tos,
                dont_fragment: self.dont_fragment,
                ..TestSpec::default()
            };
        }
        TestSpec {
            streams: self.parallel,
            length_bytes: self.len,
            end,
            omit_s: Duration::from_secs_f64(self.omit_s),
            direction: self.direction(),
            window_bytes: self.window,
            congestion: self.congestion.clone(),
            mss: self.mss,
            nodelay: self.nodelay,
            fq_rate_bps: per_stream,
            verify: false,
            payload_key,
            rx: RxMode::Discard,
            mptcp: self.mptcp,
            tos: self.tos,
            ..TestSpec::default()
        }
    }

    /// [`Params::to_spec`], validated: the test this server runs. Parsing bounds every field already, so
    /// a failure here is a combination landspeed's engine does not take; it carries iperf3's nearest
    /// error code for the client.
    pub fn to_test(&self, payload_key: u64) -> Result<Test, ParamError> {
        self.to_spec(payload_key)
            .validated()
            .map_err(|e| err(code_for(&e), e.to_string()))
    }

    /// The parameter message `landspeed run --iperf3` sends for a spec: with landspeed's payload key
    /// when the spec verifies (an iperf3 server ignores it; a landspeed server answers
    /// `State::LandspeedPayload` and checks every byte).
    pub fn message_for(spec: &TestSpec, version: &str) -> Value {
        let mut m = json!({
            "tcp": true,
            "omit": spec.omit_s.as_secs_f64().round() as u64,
            "time": 0,
            "num": 0,
            "blockcount": 0,
            "parallel": spec.streams,
            "len": spec.length_bytes,
            "pacing_timer": 1000,
            "client_version": version,
        });
        match spec.end {
            EndCondition::Time(t) => m["time"] = json!(t.as_secs_f64().ceil() as u64),
            EndCondition::Bytes(b) => m["num"] = json!(b),
            EndCondition::Blocks(k) => m["blockcount"] = json!(k),
        }
        match spec.direction {
            // iperf3 3.17+ takes only a JSON true here (3.12 took anything).
            Direction::Reverse => m["reverse"] = json!(true),
            Direction::Bidir => m["bidirectional"] = json!(true),
            Direction::Forward => {}
        }
        if let Some(w) = spec.window_bytes {
            m["window"] = json!(w);
        }
        if let Some(mss) = spec.mss {
            m["MSS"] = json!(mss);
        }
        if spec.nodelay {
            m["nodelay"] = json!(true);
        }
        if let Some(c) = &spec.congestion {
            m["congestion"] = json!(c);
        }
        if let Some(r) = spec.fq_rate_bps {
            m["fqrate"] = json!(r as u64);
        }
        if spec.mptcp {
            m["mptcp"] = json!(true);
        }
        if let Some(t) = spec.tos.filter(|t| *t > 0) {
            m["TOS"] = json!(t);
        }
        if let Some([cpu]) = spec.server_cpus.as_deref() {
            m["server_affinity"] = json!(cpu);
        }
        if spec.verify {
            m[PAYLOAD_KEY] = json!(spec.payload_key);
        }
        if spec.transport == landspeed_core::config::Transport::Udp {
            if let Some(o) = m.as_object_mut() {
                o.remove("tcp");
            }
            m["udp"] = json!(true);
            m["bandwidth"] = json!(spec.udp_stream_rate_bps() as u64);
            m["burst"] = json!(spec.burst);
            if spec.dont_fragment {
                // A number: iperf3 reads no other type here.
                m["dont_fragment"] = json!(1);
            }
        }
        m
    }
}

#[cfg(test)]
mod tests;

/// iperf3's error code nearest to a refused configuration.
fn code_for(e: &ConfigError) -> i32 {
    match e {
        ConfigError::Streams(_) => errno::NUM_STREAMS,
        ConfigError::Length(_) => errno::BLOCK_SIZE,
        ConfigError::UdpLength(_) => errno::UDP_BLOCK_SIZE,
        ConfigError::Time(_) => errno::DURATION,
        ConfigError::Omit(_) => errno::OMIT,
        ConfigError::Window(_) => errno::BUF_SIZE,
        ConfigError::Mss(_) => errno::MSS,
        ConfigError::Burst(_) => errno::BURST,
        ConfigError::ByteCount { .. } | ConfigError::BlockCount { .. } => errno::END_CONDITIONS,
        ConfigError::Congestion(_) => errno::SET_CONGESTION,
        ConfigError::UdpRate(_) | ConfigError::FqRate(_) => errno::TOTAL_RATE,
        _ => errno::UNIMPLEMENTED,
    }
}
