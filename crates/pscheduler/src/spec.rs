//! The throughput test's spec as pScheduler hands it to a tool (`{"type": "throughput", "spec": {...}}`),
//! checked against what landspeed can do: every key either maps onto a landspeed option or is refused
//! with a reason, so `can-run` can say exactly why a task will not run with this tool.

use serde_json::{Map, Value};
use std::time::Duration;

/// The highest throughput spec schema this tool reads.
pub const MAX_SCHEMA: u64 = 7;

/// The spec keys landspeed carries out, each with the landspeed option it becomes.
pub const SUPPORTED: &[(&str, &str)] = &[
    ("schema", ""),
    ("source", "the client's host"),
    ("source-node", "the client's pScheduler node"),
    ("dest", "the server's host"),
    ("dest-node", "the server's pScheduler node"),
    ("duration", "-t"),
    ("interval", "-i"),
    ("omit", "-O"),
    ("link-rtt", "the setup time in `duration`"),
    ("parallel", "-P"),
    ("window-size", "-w"),
    ("mss", "-M"),
    ("bandwidth", "-b"),
    ("fq-rate", "--fq-rate"),
    (
        "bandwidth-strict",
        "TCP: always (the kernel's pacing never exceeds its rate); refused with udp",
    ),
    ("udp", "-u"),
    ("buffer-length", "-l"),
    ("burst-size", "--burst"),
    ("congestion", "-C"),
    ("zero-copy", "--tx zerocopy"),
    ("no-delay", "-N"),
    ("reverse", "-R"),
    ("ip-version", "-4 / -6"),
    ("local-address", "-B"),
    ("single-ended", "a client against single-ended-port"),
    ("single-ended-port", "-p"),
    ("loopback", "server and client on this host"),
    ("client-cpu-affinity", "--cpus"),
    ("server-cpu-affinity", "--server-cpus"),
    ("ip-tos", "--tos"),
    ("flow-label", "--flow-label (TCP over IPv6)"),
];

/// Keys of the throughput spec landspeed refuses, and why.
pub const REFUSED: &[(&str, &str)] = &[(
    "reverse-connections",
    "landspeed's client always opens the connections (reverse-connections)",
)];

/// A throughput spec landspeed can run, in landspeed's terms.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Spec {
    /// The server's host.
    pub dest: String,
    /// The client's host, when named.
    pub source: Option<String>,
    /// Test length (default 10 s).
    pub duration: Option<Duration>,
    /// Reporting interval.
    pub interval: Option<Duration>,
    /// Warm-up left out.
    pub omit: Option<Duration>,
    /// The path's expected RTT (adds setup time).
    pub link_rtt: Option<Duration>,
    /// Streams.
    pub parallel: Option<u64>,
    /// Socket buffer, bytes.
    pub window_size: Option<u64>,
    /// TCP MSS, bytes.
    pub mss: Option<u64>,
    /// Target rate, bits/s.
    pub bandwidth: Option<u64>,
    /// Fair-queue pacing rate, bits/s.
    pub fq_rate: Option<u64>,
    /// UDP instead of TCP.
    pub udp: bool,
    /// Write size, bytes.
    pub buffer_length: Option<u64>,
    /// UDP burst, datagrams.
    pub burst_size: Option<u64>,
    /// Congestion control.
    pub congestion: Option<String>,
    /// MSG_ZEROCOPY sends.
    pub zero_copy: bool,
    /// TCP_NODELAY.
    pub no_delay: bool,
    /// Data from the server to the client.
    pub reverse: bool,
    /// 4 or 6.
    pub ip_version: Option<u64>,
    /// The client's local address.
    pub local_address: Option<String>,
    /// Only the client participates, against a server at `single_ended_port`.
    pub single_ended: bool,
    /// The server's port when single-ended.
    pub single_ended_port: Option<u16>,
    /// Server and client on this host.
    pub loopback: bool,
    /// The client's CPU.
    pub client_cpu: Option<u64>,
    /// The server's CPU.
    pub server_cpu: Option<u64>,
    /// The IP type-of-service byte (0-255) on every data packet, both ways.
    pub ip_tos: Option<u64>,
    /// The IPv6 flow label of the client's TCP data connections.
    pub flow_label: Option<u64>,
}

/// Why a spec cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct Refusal(pub Vec<String>);

/// An ISO 8601 duration as pScheduler reads it (`PT10S`, `PT1M30.5S`, `P1DT2H`, `PT1.5M`, `P1W2D`):
/// designators in order, each with an optional fraction (`.` or `,`) on any unit, weeks beside days.
/// Years and months are taken as 365 and 30 days: pScheduler measures them from now, and either is
/// longer than any test landspeed runs.
pub fn iso_duration(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("'{s}' is not an ISO 8601 duration ({why})");
    let rest = s.strip_prefix('P').ok_or_else(|| bad("it must start with P"))?;
    let (date, time) = match rest.split_once('T') {
        Some((_, "")) => return Err(bad("nothing after T")),
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    const DAY: f64 = 86_400.0;
    let mut seconds = designators(
        date,
        &[
            ('Y', 365.0 * DAY),
            ('M', 30.0 * DAY),
            ('W', 7.0 * DAY),
            ('D', DAY),
        ],
    )
    .map_err(|e| bad(&e))?;
    if let Some(t) = time {
        seconds += designators(t, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)]).map_err(|e| bad(&e))?;
    }
    if date.is_empty() && time.is_none() {
        return Err(bad("no number in it"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| bad("too long"))
}

/// The seconds in `part` (`1W2D`, `1H30.5M`): numbers each followed by one of `units`, in their order.
fn designators(part: &str, units: &[(char, f64)]) -> Result<f64, String> {
    let (mut total, mut next, mut number) = (0.0, 0, String::new());
    for c in part.chars() {
        if c.is_ascii_digit() || c == '.' || c == ',' {
            number.push(if c == ',' { '.' } else { c });
            continue;
        }
        let Some(k) = units[next..].iter().position(|(u, _)| *u == c) else {
            return Err(format!("'{c}' is not a unit here or is out of order"));
        };
        let n: f64 = number
            .parse()
            .map_err(|_| format!("'{number}' before {c} is not a number"))?;
        total += n * units[next + k].1;
        next += k + 1;
        number.clear();
    }
    if !number.is_empty() {
        return Err(format!("'{number}' has no unit"));
    }
    Ok(total)
}

/// `Duration` as ISO 8601, whole seconds rounded up (`PT19S`).
pub fn iso_seconds(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    format!("PT{s}S")
}

/// Reads and checks the test object: its type, schema, every key, every value.
pub fn parse_test(test: &Value) -> Result<Spec, Refusal> {
    let mut why = Vec::new();
    match test.get("type").and_then(Value::as_str) {
        Some("throughput") => {}
        Some(t) => why.push(format!("landspeed runs throughput tests, not '{t}'")),
        None => why.push("the test has no type".into()),
    }
    let Some(spec) = test.get("spec").and_then(Value::as_object) else {
        why.push("the test has no spec object".into());
        return Err(Refusal(why));
    };
    let mut r = Reader { spec, why };
    let s = r.spec();
    if r.why.is_empty() {
        Ok(s)
    } else {
        Err(Refusal(r.why))
    }
}

/// A JSON whole number, also when written as a float (`1500000000.0`, as pScheduler's `cli-to-spec`
/// writes `-b 1.5G`); never a fraction, a negative or a float beyond 2^53.
pub fn whole_number(v: &Value) -> Option<u64> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=EXACT).contains(f))
            .map(|f| f as u64)
    })
}

/// Reads one spec's values, collecting every problem rather than stopping at the first.
struct Reader<'a> {
    spec: &'a Map<String, Value>,
    why: Vec<String>,
}

impl Reader<'_> {
    fn spec(&mut self) -> Spec {
        self.keys();
        self.boolean("bandwidth-strict");
        let s = Spec {
            dest: self.string("dest").unwrap_or_default(),
            source: self.string("source"),
            duration: self.duration("duration"),
            interval: self.duration("interval"),
            omit: self.duration("omit"),
            link_rtt: self.duration("link-rtt"),
            parallel: self.cardinal("parallel"),
            window_size: self.cardinal("window-size"),
            mss: self.cardinal("mss"),
            bandwidth: self.cardinal("bandwidth"),
            fq_rate: self.cardinal("fq-rate"),
            udp: self.boolean("udp"),
            buffer_length: self.cardinal("buffer-length"),
            burst_size: self.cardinal("burst-size"),
            congestion: self.string("congestion"),
            zero_copy: self.boolean("zero-copy"),
            no_delay: self.boolean("no-delay"),
            reverse: self.boolean("reverse"),
            ip_version: self.integer("ip-version"),
            local_address: self.string("local-address"),
            single_ended: self.present("single-ended"),
            single_ended_port: self.port("single-ended-port"),
            loopback: self.present("loopback"),
            client_cpu: self.integer("client-cpu-affinity"),
            server_cpu: self.integer("server-cpu-affinity"),
            ip_tos: self.integer("ip-tos"),
            flow_label: self.integer("flow-label"),
        };
        self.combinations(&s);
        s
    }

    /// Every key is known: supported, or refused with its reason.
    fn keys(&mut self) {
        for k in self.spec.keys() {
            if let Some((_, why)) = REFUSED.iter().find(|(r, _)| r == k) {
                self.why.push((*why).to_string());
            } else if !SUPPORTED.iter().any(|(s, _)| s == k) {
                self.why.push(format!("landspeed does not support '{k}'"));
            }
        }
        match self.spec.get("schema").map(Value::as_u64) {
            None => {}
            Some(Some(v)) if (1..=MAX_SCHEMA).contains(&v) => {}
            Some(_) => self
                .why
                .push(format!("schema must be an integer from 1 to {MAX_SCHEMA}")),
        }
        if !self.spec.contains_key("dest") && !self.spec.contains_key("loopback") {
            self.why.push("the spec has no dest".into());
        }
    }

    fn combinations(&mut self, s: &Spec) {
        if s.fq_rate.is_some() && s.bandwidth.is_some() && !s.udp {
            self.why
                .push("bandwidth and fq-rate together: give one rate for a TCP test".into());
        }
        if s.udp && (s.congestion.is_some() || s.mss.is_some() || s.no_delay || s.zero_copy) {
            self.why
                .push("congestion, mss, no-delay and zero-copy apply to TCP only, not with udp".into());
        }
        if s.udp && self.spec.get("bandwidth-strict") == Some(&Value::Bool(true)) {
            self.why.push(
                "bandwidth-strict with udp: landspeed's UDP sender makes up for lost time (--burst datagrams back to back)"
                    .into(),
            );
        }
        if s.burst_size.is_some() && !s.udp {
            self.why.push("burst-size applies to UDP only".into());
        }
        if let Some(l) = s.flow_label.filter(|l| !(1..=0xf_ffff).contains(l)) {
            self.why.push(format!("flow-label must be 1 to 1048575, not {l}"));
        }
        if s.flow_label.is_some() && (s.udp || s.ip_version == Some(4)) {
            self.why
                .push("flow-label labels TCP connections over IPv6: not with udp or ip-version 4".into());
        }
        if let Some(t) = s.ip_tos.filter(|t| *t > 255) {
            self.why.push(format!("ip-tos must be 0 to 255, not {t}"));
        }
        if let Some(v) = s.ip_version.filter(|v| *v != 4 && *v != 6) {
            self.why.push(format!("ip-version must be 4 or 6, not {v}"));
        }
        if s.duration.is_some_and(|d| d.is_zero()) {
            self.why.push("duration must be longer than zero".into());
        }
        let max = landspeed_core::config::MAX_TIME;
        for (k, d) in [("duration", s.duration), ("omit", s.omit)] {
            if d.is_some_and(|d| d > max) {
                self.why.push(format!("{k} must be at most {} s", max.as_secs()));
            }
        }
        let c = landspeed_core::config::MAX_WINDOW;
        if s.window_size.is_some_and(|w| w > c) {
            self.why.push(format!("window-size must be at most {c} bytes"));
        }
        if s.mss.is_some_and(|m| !(88..=65535).contains(&m)) {
            self.why.push("mss must be from 88 to 65535".into());
        }
        let most = if s.udp {
            landspeed_core::udp::MAX_UDP_LENGTH
        } else {
            landspeed_core::config::MAX_LENGTH
        };
        if s.buffer_length.is_some_and(|l| l > most) {
            self.why
                .push(format!("buffer-length must be at most {most} bytes"));
        }
        if s.interval
            .is_some_and(|i| i < Duration::from_millis(10) || i > Duration::from_secs(3600))
        {
            self.why.push("interval must be from 10 ms to 1 hour".into());
        }
        if s.parallel.is_some_and(|p| p > 128) {
            self.why.push("parallel is at most 128 streams".into());
        }
    }

    fn string(&mut self, k: &str) -> Option<String> {
        match self.spec.get(k)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            _ => {
                self.why.push(format!("{k} must be a non-empty string"));
                None
            }
        }
    }

    fn boolean(&mut self, k: &str) -> bool {
        match self.spec.get(k) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.why.push(format!("{k} must be true or false"));
                false
            }
        }
    }

    fn integer(&mut self, k: &str) -> Option<u64> {
        let v = self.spec.get(k)?;
        let n = whole_number(v);
        if n.is_none() {
            self.why.push(format!("{k} must be a whole number, not {v}"));
        }
        n
    }

    fn port(&mut self, k: &str) -> Option<u16> {
        let n = self.integer(k)?;
        let p = u16::try_from(n).ok().filter(|p| *p > 0);
        if p.is_none() {
            self.why
                .push(format!("{k} must be a port from 1 to 65535, not {n}"));
        }
        p
    }

    /// pScheduler decides loopback and single-ended by the key's presence (its `participants`), so
    /// `"loopback": false` is a loopback test there, and here.
    fn present(&mut self, k: &str) -> bool {
        self.boolean(k);
        self.spec.contains_key(k)
    }

    fn cardinal(&mut self, k: &str) -> Option<u64> {
        let n = self.integer(k)?;
        if n == 0 {
            self.why.push(format!("{k} must be at least 1"));
            return None;
        }
        Some(n)
    }

    fn duration(&mut self, k: &str) -> Option<Duration> {
        let v = self.spec.get(k)?;
        match v.as_str().map(iso_duration) {
            Some(Ok(d)) => Some(d),
            Some(Err(e)) => {
                self.why.push(format!("{k}: {e}"));
                None
            }
            None => {
                self.why
                    .push(format!("{k} must be an ISO 8601 duration such as \"PT10S\""));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn test(spec: Value) -> Value {
        json!({"type": "throughput", "spec": spec})
    }

    #[test]
    fn a_full_spec_maps_every_key() {
        let s = parse_test(&test(json!({
            "schema": 7, "dest": "b.example", "source": "a.example", "duration": "PT20S",
            "interval": "PT2S", "omit": "PT1.5S", "parallel": 4, "window-size": 4194304,
            "mss": 1400, "fq-rate": 1000000000u64, "congestion": "bbr", "zero-copy": true,
            "reverse": true, "ip-version": 6, "local-address": "2001:db8::1", "no-delay": true,
            "ip-tos": 32, "flow-label": 74565
        })))
        .unwrap();
        assert_eq!((s.ip_tos, s.flow_label), (Some(32), Some(74565)));
        assert_eq!(s.dest, "b.example");
        assert_eq!(s.duration, Some(Duration::from_secs(20)));
        assert_eq!(s.omit, Some(Duration::from_millis(1500)));
        assert_eq!(
            (s.parallel, s.window_size, s.mss),
            (Some(4), Some(4 << 20), Some(1400))
        );
        assert!(s.zero_copy && s.reverse && s.no_delay && !s.udp);
        assert_eq!(s.ip_version, Some(6));
    }

    #[test]
    fn refusals_name_every_problem() {
        let e = parse_test(&test(json!({
            "dest": "b", "ip-tos": 256, "flow-label": 0, "frobnicate": 1, "parallel": 0,
            "duration": "ten seconds", "udp": "yes", "schema": 9
        })))
        .unwrap_err();
        let all = e.to_string();
        for want in [
            "ip-tos must be 0 to 255, not 256",
            "flow-label must be 1 to 1048575, not 0",
            "does not support 'frobnicate'",
            "parallel must be at least 1",
            "duration: 'ten seconds' is not an ISO 8601 duration",
            "udp must be true or false",
            "schema must be an integer from 1 to 7",
        ] {
            assert!(all.contains(want), "{want} in {all}");
        }
    }

    #[test]
    fn other_tests_and_bad_combinations_are_refused() {
        let e = parse_test(&json!({"type": "latency", "spec": {"dest": "b"}})).unwrap_err();
        assert!(e.to_string().contains("not 'latency'"), "{e}");
        let e = parse_test(&test(json!({"dest": "b", "udp": true, "congestion": "bbr"}))).unwrap_err();
        assert!(e.to_string().contains("TCP only"), "{e}");
        let e = parse_test(&test(json!({"dest": "b", "bandwidth": 1, "fq-rate": 2}))).unwrap_err();
        assert!(e.to_string().contains("give one rate"), "{e}");
        let e = parse_test(&json!({"type": "throughput"})).unwrap_err();
        assert!(e.to_string().contains("no spec"), "{e}");
    }

    #[test]
    fn fractions_weeks_and_designators_read_as_pscheduler_reads_them() {
        let d = |s: &str| iso_duration(s).map(|d| d.as_millis());
        assert_eq!(d("PT1.5M"), Ok(90_000));
        assert_eq!(d("PT0.5H"), Ok(1_800_000));
        assert_eq!(d("P1W2D"), Ok(9 * 86_400_000));
        assert_eq!(d("PT0,25S"), Ok(250));
        assert_eq!(d("P1DT1H1M1.5S"), Ok(90_061_500));
        for bad in [
            "", "P", "PT", "T10S", "PT10", "PT1S1M", "P1H", "PTxS", "PT1..5S", "10S",
        ] {
            assert!(iso_duration(bad).is_err(), "{bad}");
        }
        let s = parse_test(&test(
            json!({"dest": "b", "omit": "PT0.05M", "interval": "PT0.5M"}),
        ))
        .unwrap();
        assert_eq!(
            (s.omit, s.interval),
            (Some(Duration::from_secs(3)), Some(Duration::from_secs(30)))
        );
        let e = parse_test(&test(json!({"dest": "b", "duration": "P2D"}))).unwrap_err();
        assert!(e.to_string().contains("duration must be at most 86400 s"), "{e}");
    }

    #[test]
    fn whole_numbers_written_as_floats_are_whole_numbers() {
        let s = parse_test(&test(
            json!({"dest": "b", "bandwidth": 1500000000.0, "window-size": 1500000.0, "parallel": 2.0}),
        ))
        .unwrap();
        assert_eq!(
            (s.bandwidth, s.window_size, s.parallel),
            (Some(1_500_000_000), Some(1_500_000), Some(2))
        );
        for bad in [json!(1.5), json!(-2.0), json!(1e300), json!("2")] {
            let e = parse_test(&test(json!({"dest": "b", "parallel": bad}))).unwrap_err();
            assert!(e.to_string().contains("parallel must be a whole number"), "{e}");
        }
    }

    #[test]
    fn ports_beyond_65535_are_refused_and_presence_decides_loopback() {
        for p in [70000, 65536, 0] {
            let e = parse_test(&test(
                json!({"dest": "b", "single-ended": true, "single-ended-port": p}),
            ))
            .unwrap_err();
            assert!(e.to_string().contains("port from 1 to 65535"), "{e}");
        }
        let s = parse_test(&test(
            json!({"dest": "b", "loopback": false, "single-ended": false}),
        ))
        .unwrap();
        assert!(
            s.loopback && s.single_ended,
            "pScheduler's participants reads presence"
        );
        let s = parse_test(&test(json!({"dest": "b"}))).unwrap();
        assert!(!s.loopback && !s.single_ended);
    }

    #[test]
    fn iso_durations_round_trip_in_whole_seconds() {
        assert_eq!(iso_duration("PT1M30S").unwrap(), Duration::from_secs(90));
        assert_eq!(iso_duration("P1DT1S").unwrap(), Duration::from_secs(86_401));
        assert!(iso_duration("10").is_err());
        assert_eq!(iso_seconds(Duration::from_millis(18_200)), "PT19S");
        assert_eq!(iso_seconds(Duration::from_secs(19)), "PT19S");
    }
}
