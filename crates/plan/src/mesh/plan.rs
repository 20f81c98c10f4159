//! A mesh plan: the hosts of a campaign and the tests between them, as a user writes it (TOML, parsed by
//! the binary into these types), and its expansion into one ordered test per (sender, receiver) pair.
//! Data always flows from `from` to `to`; one entry may name one pair, one sender and many receivers,
//! many senders and one receiver, or a full mesh (every ordered pair of the hosts listed). Errors name
//! the entry and the value that is wrong, before anything is sent.

use landspeed_core::config::{EndCondition, Test, Transport};
use landspeed_core::intent::{Rate, TestIntent};
use landspeed_core::units::{parse_duration, BitRate, Bytes};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// One name or a list of them (`to = "b"` or `to = ["b", "c"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Names {
    /// One host.
    One(String),
    /// Several hosts.
    Many(Vec<String>),
}

impl Names {
    fn list(&self) -> Vec<String> {
        match self {
            Names::One(n) => vec![n.clone()],
            Names::Many(v) => v.clone(),
        }
    }
}

/// Options a test entry (or the plan's defaults) may set; unset ones fall back to the defaults, then
/// to `run`'s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestOptions {
    /// Test time, e.g. "10s".
    pub time: Option<String>,
    /// Warm-up left out of the figures, e.g. "2s".
    pub omit: Option<String>,
    /// Streams per direction.
    pub streams: Option<u32>,
    /// Bytes per write, e.g. "128K".
    pub length: Option<String>,
    /// Socket buffer, e.g. "4M".
    pub window: Option<String>,
    /// UDP instead of TCP.
    pub udp: Option<bool>,
    /// Multipath TCP data connections (`run --mptcp`).
    pub mptcp: Option<bool>,
    /// TLS 1.3 over every TCP stream, this cipher suite (`run --tls --tls-cipher`): "aes128",
    /// "aes256" or "chacha20".
    pub tls: Option<String>,
    /// QUIC instead of TCP (`run --quic`).
    pub quic: Option<bool>,
    /// QUIC: connections the streams are spread over (`run --connections`).
    pub connections: Option<u32>,
    /// Target rate of the test, all streams together, e.g. "100M" (UDP: the send rate; TCP: every
    /// stream paced to its share).
    pub rate: Option<String>,
    /// Interval length, e.g. "1s".
    pub interval: Option<String>,
}

impl TestOptions {
    fn or(&self, d: &TestOptions) -> TestOptions {
        TestOptions {
            time: self.time.clone().or_else(|| d.time.clone()),
            omit: self.omit.clone().or_else(|| d.omit.clone()),
            streams: self.streams.or(d.streams),
            length: self.length.clone().or_else(|| d.length.clone()),
            window: self.window.clone().or_else(|| d.window.clone()),
            udp: self.udp.or(d.udp),
            mptcp: self.mptcp.or(d.mptcp),
            tls: self.tls.clone().or_else(|| d.tls.clone()),
            quic: self.quic.or(d.quic),
            connections: self.connections.or(d.connections),
            rate: self.rate.clone().or_else(|| d.rate.clone()),
            interval: self.interval.clone().or_else(|| d.interval.clone()),
        }
    }

    /// The test these options describe, through the one lowering (`landspeed_core::intent`).
    pub fn test(&self) -> Result<Test, String> {
        let dur = |what: &str, v: &Option<String>| -> Result<Option<Duration>, String> {
            v.as_deref()
                .map(|s| parse_duration(s).map_err(|e| format!("{what} = {s:?}: {e}")))
                .transpose()
        };
        let size = |what: &str, v: &Option<String>| -> Result<Option<u64>, String> {
            v.as_deref()
                .map(|s| {
                    s.parse::<Bytes>()
                        .map(|b| b.get())
                        .map_err(|e| format!("{what} = {s:?}: {e}"))
                })
                .transpose()
        };
        let udp = self.udp == Some(true);
        let intent = TestIntent {
            streams: self.streams,
            connections: self.connections,
            length: size("length", &self.length)?.map(Bytes),
            end: dur("time", &self.time)?.map(EndCondition::Time),
            omit: dur("omit", &self.omit)?,
            window: size("window", &self.window)?.map(Bytes),
            rate: self
                .rate
                .as_deref()
                .map(|r| r.parse::<BitRate>().map_err(|e| format!("rate = {r:?}: {e}")))
                .transpose()?
                .map(Rate::Total),
            interval: dur("interval", &self.interval)?,
            // UDP when both are said: the validation that follows refuses QUIC and UDP together.
            transport: if self.quic == Some(true) {
                Transport::Quic
            } else if udp {
                Transport::Udp
            } else {
                Transport::Tcp
            },
            mptcp: self.mptcp == Some(true),
            tls: self
                .tls
                .as_deref()
                .map(|c| c.parse().map_err(|e| format!("tls = {c:?}: {e}")))
                .transpose()?
                .map(|cipher| landspeed_core::tls::TlsSpec { cipher, ktls: false }),
            ..TestIntent::default()
        };
        // The senders are other hosts: their CPUs are not known where the plan is expanded.
        intent.validated(None).map_err(|e| e.to_string())
    }
}

/// One `[[tests]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestEntry {
    /// The sending host or hosts.
    pub from: Option<Names>,
    /// The receiving host or hosts.
    pub to: Option<Names>,
    /// Every ordered pair of these hosts (instead of from/to).
    pub mesh: Option<Vec<String>>,
    /// Test time, e.g. "10s".
    pub time: Option<String>,
    /// Warm-up left out of the figures, e.g. "2s".
    pub omit: Option<String>,
    /// Streams per direction.
    pub streams: Option<u32>,
    /// Bytes per write, e.g. "128K".
    pub length: Option<String>,
    /// Socket buffer per stream, e.g. "4M".
    pub window: Option<String>,
    /// UDP instead of TCP.
    pub udp: Option<bool>,
    /// Multipath TCP data connections.
    pub mptcp: Option<bool>,
    /// TLS over every TCP stream, this cipher suite.
    pub tls: Option<String>,
    /// QUIC instead of TCP.
    pub quic: Option<bool>,
    /// QUIC: connections the streams are spread over.
    pub connections: Option<u32>,
    /// UDP rate over all streams, e.g. "1G".
    pub rate: Option<String>,
    /// Sample interval, e.g. "1s".
    pub interval: Option<String>,
    /// A multicast test to this group (`GROUP` or `GROUP:PORT`, port 5001 by default): `from`
    /// sends, every host of `to` joins and reports what it heard.
    pub multicast: Option<String>,
    /// A multicast sender's TTL (IPv4) or hop limit (IPv6), 1 (the default) to 32.
    pub ttl: Option<u32>,
}

impl TestEntry {
    /// The entry's own options (serde cannot refuse unknown keys through a flattened struct, so the
    /// fields are spelled out here and gathered).
    pub fn options(&self) -> TestOptions {
        TestOptions {
            time: self.time.clone(),
            omit: self.omit.clone(),
            streams: self.streams,
            length: self.length.clone(),
            window: self.window.clone(),
            udp: self.udp,
            mptcp: self.mptcp,
            tls: self.tls.clone(),
            quic: self.quic,
            connections: self.connections,
            rate: self.rate.clone(),
            interval: self.interval.clone(),
        }
    }
}

/// A campaign as written in the plan file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The campaign's name (archive, report title).
    pub name: String,
    /// True (the default): every test starts at one agreed instant. False: one after another.
    #[serde(default = "yes")]
    pub concurrent: bool,
    /// Seconds between the plan's checks and the agreed start, long enough for every host to connect
    /// its streams (default 2).
    #[serde(default)]
    pub start_delay: Option<String>,
    /// Host name -> its landspeed server, `ADDR` or `ADDR:PORT` (port 5201 by default).
    pub hosts: BTreeMap<String, String>,
    /// Options every test gets unless it sets its own.
    #[serde(default)]
    pub defaults: TestOptions,
    /// The tests, each expanded to one or more host pairs.
    pub tests: Vec<TestEntry>,
}

fn yes() -> bool {
    true
}

/// One test of the expanded plan: `from` sends to `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedTest {
    /// Position in the expanded plan (0-based), the test's name in reports.
    pub index: usize,
    /// The sending host's name in the plan.
    pub from: String,
    /// The receiving host's name in the plan.
    pub to: String,
    /// The validated test (serialized as its `TestSpec`; reading one validates it).
    pub spec: Test,
    /// A multicast entry's part: the sender's (`to` is then the group) or a receiver's (`to` is
    /// the receiving host, the one ordered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicast: Option<PlannedMulticast>,
}

/// One host's part in a multicast entry of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedMulticast {
    /// The group and port.
    pub group: std::net::SocketAddr,
    /// True for the sender's part, false for a receiver's.
    pub send: bool,
    /// The sender's TTL or hop limit.
    pub ttl: u32,
    /// The plan's entry (0-based): its parts share one test key.
    pub entry: usize,
}

impl PlannedTest {
    /// The host the test is ordered from: the sender, or a multicast receiver.
    pub fn ordered_host(&self) -> &str {
        match self.multicast {
            Some(m) if !m.send => &self.to,
            _ => &self.from,
        }
    }
}

/// An entry's (sender, receiver) pairs: a mesh's every ordered pair, or from × to.
fn entry_pairs(k: usize, e: &TestEntry) -> Result<Vec<(String, String)>, String> {
    Ok(match (&e.mesh, &e.from, &e.to) {
        (Some(m), None, None) => {
            if m.len() < 2 {
                return Err(format!("tests entry {}: a mesh needs at least two hosts", k + 1));
            }
            let mut p = vec![];
            for a in m {
                for b in m {
                    if a != b {
                        p.push((a.clone(), b.clone()));
                    }
                }
            }
            p
        }
        (None, Some(f), Some(t)) => {
            let mut p = vec![];
            for a in f.list() {
                for b in t.list() {
                    p.push((a.clone(), b.clone()));
                }
            }
            p
        }
        _ => {
            return Err(format!(
                "tests entry {}: give either `from` and `to`, or `mesh`",
                k + 1
            ))
        }
    })
}

/// `GROUP`, `GROUP:PORT` or `[V6GROUP]:PORT` (port 5001 by default), checked to be a group.
fn multicast_group(t: &str) -> Result<std::net::SocketAddr, String> {
    let group = match t.parse::<std::net::SocketAddr>() {
        Ok(sa) => sa,
        Err(_) => {
            let ip: std::net::IpAddr = t
                .trim_matches(|c| c == '[' || c == ']')
                .parse()
                .map_err(|_| format!("multicast = {t:?}: not a group (239.1.1.1, [ff15::1]:5001)"))?;
            std::net::SocketAddr::new(ip, 5001)
        }
    };
    landspeed_core::multicast::check_group(group, None).map_err(|e| format!("multicast = {t:?}: {e}"))?;
    Ok(group)
}

/// Largest number of tests one plan may expand to.
pub const MAX_TESTS: usize = 256;

impl Plan {
    /// The plan's tests, one per ordered pair, checked.
    pub fn expand(&self) -> Result<Vec<PlannedTest>, String> {
        if self.hosts.is_empty() {
            return Err("the plan names no hosts ([hosts])".into());
        }
        if self.tests.is_empty() {
            return Err("the plan has no tests ([[tests]])".into());
        }
        let known = |n: &str, k: usize| -> Result<(), String> {
            if self.hosts.contains_key(n) {
                Ok(())
            } else {
                Err(format!(
                    "tests entry {}: unknown host '{n}' (hosts: {})",
                    k + 1,
                    self.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
            }
        };
        let mut out = vec![];
        for (k, e) in self.tests.iter().enumerate() {
            if e.multicast.is_some() {
                self.multicast_parts(k, e, &mut out)?;
                continue;
            }
            if e.ttl.is_some() {
                return Err(format!("tests entry {}: ttl applies to multicast entries", k + 1));
            }
            let spec = e
                .options()
                .or(&self.defaults)
                .test()
                .map_err(|m| format!("tests entry {}: {m}", k + 1))?;
            let pairs = entry_pairs(k, e)?;
            for (a, b) in pairs {
                known(&a, k)?;
                known(&b, k)?;
                if a == b {
                    return Err(format!("tests entry {}: '{a}' cannot test to itself", k + 1));
                }
                out.push(PlannedTest {
                    index: out.len(),
                    from: a,
                    to: b,
                    spec: spec.clone(),
                    multicast: None,
                });
            }
        }
        if out.len() > MAX_TESTS {
            return Err(format!(
                "the plan expands to {} tests; at most {MAX_TESTS}",
                out.len()
            ));
        }
        Ok(out)
    }

    /// A multicast entry's parts: the sender's, then one per receiver, all of one UDP stream.
    fn multicast_parts(&self, k: usize, e: &TestEntry, out: &mut Vec<PlannedTest>) -> Result<(), String> {
        let err = |m: String| format!("tests entry {}: {m}", k + 1);
        let text = e.multicast.as_deref().unwrap_or_default();
        let group = multicast_group(text).map_err(err)?;
        let ttl = e.ttl.unwrap_or(1);
        if !(1..=32).contains(&ttl) {
            return Err(err(format!("ttl = {ttl}: 1 to 32")));
        }
        if !self.concurrent {
            return Err(err(
                "a multicast entry needs concurrent = true (its receivers listen while its sender sends)"
                    .into(),
            ));
        }
        let (from, to) = match (&e.mesh, &e.from, &e.to) {
            (None, Some(Names::One(f)), Some(t)) => (f.clone(), t.list()),
            (None, Some(Names::Many(f)), Some(t)) if f.len() == 1 => (f[0].clone(), t.list()),
            _ => {
                return Err(err(
                    "a multicast entry has one `from` (its sender) and `to` (its receivers)".into(),
                ))
            }
        };
        if e.udp == Some(false) || e.quic == Some(true) || e.streams.is_some_and(|s| s != 1) {
            return Err(err(
                "a multicast entry is one UDP stream (no udp = false, quic or streams)".into(),
            ));
        }
        let mut o = e.options().or(&self.defaults);
        (o.udp, o.quic, o.streams, o.mptcp, o.tls) = (Some(true), None, Some(1), None, None);
        let spec = o.test().map_err(err)?;
        for host in std::iter::once(&from).chain(&to) {
            if !self.hosts.contains_key(host) {
                return Err(err(format!("unknown host '{host}'")));
            }
        }
        if to.contains(&from) {
            return Err(err(format!("'{from}' cannot receive its own multicast test")));
        }
        let part = |send: bool, to: String, index: usize| PlannedTest {
            index,
            from: from.clone(),
            to,
            spec: spec.clone(),
            multicast: Some(PlannedMulticast {
                group,
                send,
                ttl,
                entry: k,
            }),
        };
        out.push(part(true, group.to_string(), out.len()));
        for r in to {
            out.push(part(false, r, out.len()));
        }
        Ok(())
    }

    /// The delay between the checks and the agreed start.
    pub fn start_delay(&self) -> Result<Duration, String> {
        match &self.start_delay {
            None => Ok(Duration::from_secs(2)),
            Some(s) => {
                let d = parse_duration(s).map_err(|e| format!("start_delay = {s:?}: {e}"))?;
                if d > Duration::from_secs(30) {
                    return Err(format!("start_delay = {s:?}: at most 30 s"));
                }
                Ok(d)
            }
        }
    }
}

/// `HOST`, `HOST:PORT` or `[V6ADDR]:PORT` (a bare IPv6 address too); the port defaults to 5201.
pub fn host_port(s: &str) -> Result<(String, u16), String> {
    let bad = || format!("expected HOST or HOST:PORT, got '{s}'");
    if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']').ok_or_else(bad)?;
        let port = match p.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if p.is_empty() => 5201,
            None => return Err(bad()),
        };
        return Ok((h.to_string(), port));
    }
    match s.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Ok((s.to_string(), 5201)),
        Some((h, p)) if !h.is_empty() => Ok((h.to_string(), p.parse().map_err(|_| bad())?)),
        None if !s.is_empty() => Ok((s.to_string(), 5201)),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(tests: Vec<TestEntry>) -> Plan {
        Plan {
            name: "t".into(),
            concurrent: true,
            start_delay: None,
            hosts: ["a", "b", "c", "d"]
                .iter()
                .map(|h| (h.to_string(), format!("{h}.example")))
                .collect(),
            defaults: TestOptions {
                time: Some("3s".into()),
                ..Default::default()
            },
            tests,
        }
    }

    fn pairs(p: &Plan) -> Vec<(String, String)> {
        p.expand().unwrap().into_iter().map(|t| (t.from, t.to)).collect()
    }

    #[test]
    fn pairs_one_to_many_many_to_one_and_mesh_expand() {
        let p = plan(vec![
            TestEntry {
                from: Some(Names::One("a".into())),
                to: Some(Names::Many(vec!["b".into(), "c".into()])),
                streams: Some(2),
                ..Default::default()
            },
            TestEntry {
                from: Some(Names::Many(vec!["b".into(), "c".into()])),
                to: Some(Names::One("d".into())),
                ..Default::default()
            },
            TestEntry {
                mesh: Some(vec!["a".into(), "b".into(), "c".into()]),
                ..Default::default()
            },
        ]);
        let got = pairs(&p);
        assert_eq!(got.len(), 2 + 2 + 6);
        assert_eq!(got[0], ("a".to_string(), "b".to_string()));
        assert_eq!(got[3], ("c".to_string(), "d".to_string()));
        let tests = p.expand().unwrap();
        assert_eq!(tests[0].spec.streams, 2);
        assert_eq!(tests[2].spec.streams, 1);
        assert_eq!(tests[2].spec.end, EndCondition::Time(Duration::from_secs(3)));
        assert!(tests.iter().enumerate().all(|(i, t)| t.index == i));
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        let one = |f: &str, t: &str| TestEntry {
            from: Some(Names::One(f.into())),
            to: Some(Names::One(t.into())),
            ..Default::default()
        };
        let e = plan(vec![one("a", "zz")]).expand().unwrap_err();
        assert!(e.contains("unknown host 'zz'"), "{e}");
        let e = plan(vec![one("a", "a")]).expand().unwrap_err();
        assert!(e.contains("itself"), "{e}");
        let e = plan(vec![TestEntry::default()]).expand().unwrap_err();
        assert!(e.contains("either"), "{e}");
        let mut bad = one("a", "b");
        bad.time = Some("soon".into());
        let e = plan(vec![bad]).expand().unwrap_err();
        assert!(e.contains("tests entry 1: time"), "{e}");
        let mut bad = one("a", "b");
        bad.streams = Some(0);
        assert!(plan(vec![bad]).expand().is_err());
        assert!(plan(vec![]).expand().is_err());
    }

    fn multicast(group: &str, from: &str, to: &[&str]) -> TestEntry {
        TestEntry {
            multicast: Some(group.into()),
            from: Some(Names::One(from.into())),
            to: Some(Names::Many(to.iter().map(|t| t.to_string()).collect())),
            rate: Some("4M".into()),
            length: Some("1200".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_multicast_entry_expands_to_its_sender_and_each_receiver() {
        let mut e = multicast("239.1.1.1", "a", &["b", "c", "d"]);
        e.ttl = Some(4);
        let tests = plan(vec![e]).expand().unwrap();
        assert_eq!(tests.len(), 4);
        let group: std::net::SocketAddr = "239.1.1.1:5001".parse().unwrap();
        let send = &tests[0];
        assert_eq!(
            (send.from.as_str(), send.to.as_str(), send.ordered_host()),
            ("a", "239.1.1.1:5001", "a")
        );
        assert_eq!(
            send.multicast,
            Some(PlannedMulticast {
                group,
                send: true,
                ttl: 4,
                entry: 0
            })
        );
        for (t, r) in tests[1..].iter().zip(["b", "c", "d"]) {
            assert_eq!((t.from.as_str(), t.to.as_str(), t.ordered_host()), ("a", r, r));
            assert_eq!(t.multicast.map(|m| (m.send, m.group)), Some((false, group)));
        }
        let spec = &tests[2].spec;
        assert_eq!(
            (spec.transport, spec.streams, spec.length_bytes),
            (Transport::Udp, 1, 1200)
        );
        assert_eq!(spec.rate_bps, Some(4e6));
        assert_eq!(spec.end, EndCondition::Time(Duration::from_secs(3)));
        let v6 = &plan(vec![multicast("[ff15::1]:6000", "a", &["b"])])
            .expand()
            .unwrap()[0];
        assert_eq!(v6.to, "[ff15::1]:6000");
    }

    #[test]
    fn bad_multicast_entries_say_what_is_wrong() {
        let with = |f: &dyn Fn(&mut TestEntry)| {
            let mut e = multicast("239.1.1.1", "a", &["b"]);
            f(&mut e);
            plan(vec![e]).expand().unwrap_err()
        };
        for (e, why) in [
            (
                with(&|e| e.multicast = Some("10.0.0.1".into())),
                "not a multicast group",
            ),
            (with(&|e| e.multicast = Some("nowhere".into())), "not a group"),
            (with(&|e| e.ttl = Some(33)), "1 to 32"),
            (with(&|e| e.streams = Some(2)), "one UDP stream"),
            (with(&|e| e.quic = Some(true)), "one UDP stream"),
            (
                with(&|e| e.from = Some(Names::Many(vec!["a".into(), "c".into()]))),
                "one `from`",
            ),
            (
                with(&|e| e.to = Some(Names::One("a".into()))),
                "its own multicast",
            ),
            (
                with(&|e| e.to = Some(Names::One("zz".into()))),
                "unknown host 'zz'",
            ),
        ] {
            assert!(e.contains(why), "{why}: {e}");
        }
        let mut p = plan(vec![multicast("239.1.1.1", "a", &["b"])]);
        p.concurrent = false;
        assert!(p.expand().unwrap_err().contains("concurrent = true"));
        let mut unicast = multicast("239.1.1.1", "a", &["b"]);
        (unicast.multicast, unicast.ttl) = (None, Some(2));
        assert!(plan(vec![unicast]).expand().unwrap_err().contains("ttl applies"));
    }

    #[test]
    fn mptcp_entries_ask_for_mptcp_and_refuse_pacing() {
        let mut e = TestEntry {
            from: Some(Names::One("a".into())),
            to: Some(Names::One("b".into())),
            mptcp: Some(true),
            ..Default::default()
        };
        let t = &plan(vec![e.clone()]).expand().unwrap()[0];
        assert!(t.spec.mptcp);
        e.rate = Some("100M".into());
        let err = plan(vec![e]).expand().unwrap_err();
        assert!(err.contains("MPTCP"), "{err}");
    }

    #[test]
    fn tls_and_quic_entries_choose_their_transport() {
        let mut e = TestEntry {
            from: Some(Names::One("a".into())),
            to: Some(Names::One("b".into())),
            tls: Some("chacha20".into()),
            ..Default::default()
        };
        let t = &plan(vec![e.clone()]).expand().unwrap()[0];
        let cipher = t.spec.tls.map(|t| t.cipher);
        assert_eq!(cipher, Some(landspeed_core::tls::TlsCipher::Chacha20Poly1305));
        e.tls = Some("rc4".into());
        assert!(plan(vec![e.clone()])
            .expand()
            .unwrap_err()
            .contains("tls = \"rc4\""));
        e.tls = None;
        e.quic = Some(true);
        e.connections = Some(3);
        let t = &plan(vec![e]).expand().unwrap()[0];
        assert_eq!(
            (t.spec.transport, t.spec.connections, t.spec.streams),
            (Transport::Quic, 3, 3)
        );
    }

    #[test]
    fn udp_entries_get_datagram_sized_writes_and_a_rate() {
        let mut e = TestEntry {
            from: Some(Names::One("a".into())),
            to: Some(Names::One("b".into())),
            ..Default::default()
        };
        e.udp = Some(true);
        e.rate = Some("20M".into());
        let t = &plan(vec![e]).expand().unwrap()[0];
        assert_eq!(t.spec.transport, Transport::Udp);
        assert_eq!(
            t.spec.length_bytes,
            landspeed_core::udp::DEFAULT_UDP_LENGTH.get(),
            "run's default: one lowering"
        );
        assert_eq!(t.spec.rate_bps, Some(20e6));
        // TCP: the rate is shared out as per-socket pacing.
        let e = TestEntry {
            from: Some(Names::One("a".into())),
            to: Some(Names::One("b".into())),
            streams: Some(4),
            rate: Some("100M".into()),
            ..Default::default()
        };
        let t = &plan(vec![e]).expand().unwrap()[0];
        assert_eq!((t.spec.rate_bps, t.spec.fq_rate_bps), (None, Some(25e6)));
    }

    #[test]
    fn host_and_port_forms() {
        assert_eq!(host_port("a.example").unwrap(), ("a.example".into(), 5201));
        assert_eq!(host_port("10.0.0.1:6000").unwrap(), ("10.0.0.1".into(), 6000));
        assert_eq!(
            host_port("[2001:db8::1]:7000").unwrap(),
            ("2001:db8::1".into(), 7000)
        );
        assert_eq!(host_port("2001:db8::1").unwrap(), ("2001:db8::1".into(), 5201));
        assert!(host_port("a:b").is_err());
        assert!(host_port("").is_err());
        assert!(host_port(":80").is_err());
    }
}
