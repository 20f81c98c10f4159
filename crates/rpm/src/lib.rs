//! Responsiveness under working conditions (RPM), as the IETF IPPM draft "Responsiveness under
//! Working Conditions" (draft-ietf-ippm-responsiveness-09) defines it: load the path with HTTP/2
//! transfers, one more connection every interval (ID), until the goodput's moving averages are stable
//! (saturation), then compute the responsiveness of each interval from the probes of the last MAD
//! intervals until those values are stable too. Probes are "foreign" (a new connection: its TCP
//! handshake, its TLS handshake, an HTTP request for a 1-byte object) and "self" (the same request on
//! a loaded connection, behind its bulk data). Responsiveness = (60 000 / foreign + 60 000 / self) / 2,
//! foreign being the mean of TM(tcp), TM(tls) and TM(http) and self TM(http_l), TM the mean with the
//! highest 5% of samples trimmed; drafts 03 and earlier took 60 000 / (foreign/2 + self/2), which a
//! result computed under them says ([`Draft`]) and `landspeed rpm --recompute` can redo. A stage that
//! runs out of time is reported with the draft's Low or Medium confidence. This module is the method
//! with no I/O: the configuration document both ends agree on, the ramp, the figures and the report's
//! schema. `landspeed_net::rpm` does the HTTP.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The schema of `landspeed rpm --json`.
pub const RPM_SCHEMA: &str = "landspeed-rpm/1";

/// The configuration document a responsiveness server answers (network-quality/server's
/// SERVER_SPEC.md): where the small object, the large object and the upload sink are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpmConfig {
    /// 1.
    pub version: u32,
    /// The endpoints.
    pub urls: RpmUrls,
    /// The host the test should run against, when the configuration is served from elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_endpoint: Option<String>,
}

/// The three URLs of a configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpmUrls {
    /// A 1-byte object (the probes).
    pub small_https_download_url: String,
    /// An object too large to finish (the download load).
    pub large_https_download_url: String,
    /// Where to POST the upload load.
    pub https_upload_url: String,
}

impl RpmConfig {
    /// The configuration of a server whose base URL is `base` (e.g. `https://host:4043`), with the
    /// paths landspeed serves.
    pub fn for_base(base: &str) -> RpmConfig {
        let base = base.trim_end_matches('/');
        RpmConfig {
            version: 1,
            urls: RpmUrls {
                small_https_download_url: format!("{base}{SMALL_PATH}"),
                large_https_download_url: format!("{base}{LARGE_PATH}"),
                https_upload_url: format!("{base}{UPLOAD_PATH}"),
            },
            test_endpoint: None,
        }
    }

    /// The document as served: the draft's names, and over HTTPS goresponsiveness's `https_`
    /// spellings beside them, as the reference server's configuration has them (draft-09 says a
    /// server SHOULD NOT add names; goresponsiveness reads only those, and cannot speak plain HTTP,
    /// so a plain server names its `http` URLs the draft's way alone).
    pub fn to_json(&self) -> String {
        let u = &self.urls;
        let mut urls = serde_json::json!({
            "small_download_url": u.small_https_download_url,
            "large_download_url": u.large_https_download_url,
            "upload_url": u.https_upload_url,
        });
        if [
            &u.small_https_download_url,
            &u.large_https_download_url,
            &u.https_upload_url,
        ]
        .iter()
        .all(|url| url.starts_with("https://"))
        {
            urls["small_https_download_url"] = u.small_https_download_url.clone().into();
            urls["large_https_download_url"] = u.large_https_download_url.clone().into();
            urls["https_upload_url"] = u.https_upload_url.clone().into();
        }
        serde_json::json!({ "version": self.version, "urls": urls }).to_string()
    }

    /// Parses and checks a configuration as draft-09's discovery section says: a JSON object with
    /// `version` 1 and the three URLs, each exactly once, all http or https with one host (so they
    /// can share a connection), `test_endpoint` at most once; unknown names are ignored. The URLs'
    /// names are the draft's (`small_download_url`, `large_download_url`, `upload_url`) or
    /// goresponsiveness's older `https_` ones. Anything else is refused with the reason.
    pub fn parse(text: &str) -> Result<RpmConfig, String> {
        let keys: ConfigKeys =
            serde_json::from_str(text).map_err(|e| format!("the configuration is not a JSON object: {e}"))?;
        keys.once()?;
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match v.get("version") {
            Some(n) if n.as_u64() == Some(1) => {}
            Some(n) => {
                return Err(format!(
                    "the configuration's version is {n}; this client reads version 1"
                ))
            }
            None => return Err("the configuration has no version (draft-09: it must say 1)".into()),
        }
        let urls = &v["urls"];
        let pick = |a: &str, b: &str| {
            (urls[a].as_str().or(urls[b].as_str()))
                .map(String::from)
                .ok_or_else(|| format!("the configuration has no urls.{a} (or urls.{b})"))
        };
        let c = RpmConfig {
            version: 1,
            urls: RpmUrls {
                small_https_download_url: pick("small_download_url", "small_https_download_url")?,
                large_https_download_url: pick("large_download_url", "large_https_download_url")?,
                https_upload_url: pick("upload_url", "https_upload_url")?,
            },
            test_endpoint: match v.get("test_endpoint") {
                None => None,
                Some(e) => Some(
                    e.as_str()
                        .ok_or("the configuration's test_endpoint is not a host name")?
                        .to_string(),
                ),
            },
        };
        c.one_host()?;
        Ok(c)
    }

    /// The three URLs are http or https and name one host.
    fn one_host(&self) -> Result<(), String> {
        let u = &self.urls;
        let hosts = [
            &u.small_https_download_url,
            &u.large_https_download_url,
            &u.https_upload_url,
        ]
        .map(|url| url_host(url).ok_or_else(|| format!("'{url}' is not an http or https URL")));
        let [a, b, c] = hosts;
        let (a, b, c) = (a?, b?, c?);
        if a == b && b == c {
            Ok(())
        } else {
            Err(format!(
                "the configuration's URLs name different hosts ({a}, {b}, {c}); draft-09 asks one, so that they can share a connection"
            ))
        }
    }
}

/// The host of an http or https URL, lowercased (None: not such a URL).
fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit('@').next()?;
    let host = match hostport.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => hostport.split(':').next()?,
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The names of a configuration object and of its `urls`, in order, duplicates kept (serde_json's
/// own maps keep the last of a name): draft-09 voids a configuration naming a field twice.
#[derive(Default)]
struct ConfigKeys {
    top: Vec<String>,
    urls: Vec<String>,
}

impl ConfigKeys {
    /// Each field the draft names at most once.
    fn once(&self) -> Result<(), String> {
        let twice = |names: &[String], known: &[&str]| {
            known
                .iter()
                .find(|k| names.iter().filter(|n| n == k).count() > 1)
                .map(|k| k.to_string())
        };
        let top = twice(&self.top, &["version", "urls", "test_endpoint"]);
        let urls = twice(
            &self.urls,
            &[
                "small_download_url",
                "large_download_url",
                "upload_url",
                "small_https_download_url",
                "large_https_download_url",
                "https_upload_url",
            ],
        );
        match top.or(urls) {
            Some(name) => Err(format!(
                "the configuration names {name} more than once: draft-09 voids it"
            )),
            None => Ok(()),
        }
    }
}

impl<'de> Deserialize<'de> for ConfigKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ConfigKeys, D::Error> {
        d.deserialize_map(KeysVisitor { nested: true })
    }
}

struct KeysVisitor {
    nested: bool,
}

impl<'de> serde::de::Visitor<'de> for KeysVisitor {
    type Value = ConfigKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ConfigKeys, A::Error> {
        let mut keys = ConfigKeys::default();
        while let Some(k) = map.next_key::<String>()? {
            if self.nested && k == "urls" {
                keys.urls = map.next_value_seed(UrlsKeys)?.top;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            keys.top.push(k);
        }
        Ok(keys)
    }
}

/// `urls`'s names.
struct UrlsKeys;

impl<'de> serde::de::DeserializeSeed<'de> for UrlsKeys {
    type Value = ConfigKeys;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ConfigKeys, D::Error> {
        d.deserialize_map(KeysVisitor { nested: false })
    }
}

/// Where landspeed's server answers the configuration.
pub const CONFIG_PATH: &str = "/config";
/// The 1-byte object.
pub const SMALL_PATH: &str = "/small";
/// The large object.
pub const LARGE_PATH: &str = "/large";
/// The upload sink (`/slurp`, the reference server's name, is answered too).
pub const UPLOAD_PATH: &str = "/upload";

/// The draft whose formula a result's figures follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Draft {
    /// draft-ietf-ippm-responsiveness-03 and earlier: RPM = 60 000 / (foreign/2 + self/2), the
    /// harmonic form (what goresponsiveness computes, and landspeed before 2026-12-02).
    #[serde(rename = "draft-03")]
    Draft03,
    /// draft-ietf-ippm-responsiveness-09 (since -04): RPM = (60 000/foreign + 60 000/self) / 2.
    #[default]
    #[serde(rename = "draft-09")]
    Draft09,
}

impl Draft {
    /// A report written before results named their draft followed draft-03's formula.
    fn before_naming() -> Draft {
        Draft::Draft03
    }

    /// The draft's name.
    pub fn label(self) -> &'static str {
        match self {
            Draft::Draft03 => "draft-ietf-ippm-responsiveness-03",
            Draft::Draft09 => "draft-ietf-ippm-responsiveness-09",
        }
    }

    /// Round trips a minute from a foreign and a self round trip, ms.
    pub fn rpm(self, foreign_ms: f64, self_ms: f64) -> Option<f64> {
        if !(foreign_ms > 0.0 && self_ms > 0.0) {
            return None;
        }
        Some(match self {
            Draft::Draft03 => 60_000.0 / (0.5 * foreign_ms + 0.5 * self_ms),
            Draft::Draft09 => (60_000.0 / foreign_ms + 60_000.0 / self_ms) / 2.0,
        })
    }
}

/// The method's parameters, with draft-09's defaults (its table of test parameters).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmParams {
    /// Whose formula the figures follow.
    #[serde(default = "Draft::before_naming")]
    pub draft: Draft,
    /// How often the conditions are evaluated and a connection added (ID: 5 s in -09).
    #[serde(with = "landspeed_core::units::secs")]
    pub interval: Duration,
    /// Intervals in a moving average, and values in the stability test (MAD: 4).
    pub moving_average: usize,
    /// Percent of the highest samples trimmed before the mean (100 − TMP; TMP is 95).
    pub trim_pct: f64,
    /// Stable when the standard deviation of the last MAD values is within this percent of the
    /// current one (SDT: 5).
    pub stddev_pct: f64,
    /// Most load-generating connections per direction (MNP: 16).
    pub max_connections: usize,
    /// Open this many load-generating connections at once and add none (no ramp-up): for setting
    /// a test beside a client that ends with a known count. None: the draft's ramp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_connections: Option<usize>,
    /// Most probe pairs (a foreign and a self probe) a second (MPS: 100).
    pub probes_per_s: f64,
    /// Most of the measured capacity the probes may take, percent (PTC: 5).
    #[serde(default = "default_ptc")]
    pub capacity_share_pct: f64,
    /// The percentile of the second figure (90).
    pub percentile: f64,
    /// Longest a direction may take; its first half at most goes to the goodput's saturation, and a
    /// stage cut short is reported with its confidence.
    #[serde(with = "landspeed_core::units::secs")]
    pub timeout: Duration,
}

fn default_ptc() -> f64 {
    5.0
}

impl Default for RpmParams {
    fn default() -> Self {
        RpmParams {
            draft: Draft::Draft09,
            interval: Duration::from_secs(5),
            moving_average: 4,
            trim_pct: 5.0,
            stddev_pct: 5.0,
            max_connections: 16,
            fixed_connections: None,
            probes_per_s: 100.0,
            capacity_share_pct: 5.0,
            percentile: 90.0,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Bytes a foreign probe exchanges (TCP and TLS handshakes, a request and a 1-byte answer), and a
/// self probe: the draft's estimates for its probe budget.
pub const FOREIGN_PROBE_BYTES: f64 = 5000.0;
/// See [`FOREIGN_PROBE_BYTES`].
pub const SELF_PROBE_BYTES: f64 = 1000.0;

impl RpmParams {
    /// Probe pairs a second with `capacity_bps` measured: MPS, or fewer so that the probes take at
    /// most PTC of the capacity (at least one pair per interval, so that a slow path is measured).
    pub fn probe_pairs_per_s(&self, capacity_bps: f64) -> f64 {
        let pair_bits = 8.0 * (FOREIGN_PROBE_BYTES + SELF_PROBE_BYTES);
        let budget = capacity_bps * self.capacity_share_pct / 100.0 / pair_bits;
        let floor = 1.0 / self.interval.as_secs_f64().max(1e-3);
        self.probes_per_s.min(budget).max(floor.min(self.probes_per_s))
    }
}

/// The stability test of draft-09 over a series of values (the goodput's moving averages, or each
/// interval's responsiveness): at least `mad` values, and the standard deviation of the last `mad`
/// within `sdt_pct` percent of the current (last) one.
pub fn steady(values: &[f64], mad: usize, sdt_pct: f64) -> bool {
    let mad = mad.max(1);
    if values.len() < mad {
        return false;
    }
    let last = &values[values.len() - mad..];
    let current = last[mad - 1];
    let mean = last.iter().sum::<f64>() / mad as f64;
    let var = last.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / mad as f64;
    current > 0.0 && var.sqrt() < current * sdt_pct / 100.0
}

/// How far a stage of the method got (draft-09's confidence of test results).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Fewer than MAD intervals of the stage ran before its time was up.
    Low,
    /// MAD intervals or more, not stable within SDT.
    Medium,
    /// Stable within SDT.
    High,
}

impl Confidence {
    fn of(values: usize, mad: usize, stable: bool) -> Confidence {
        match (stable, values >= mad) {
            (true, _) => Confidence::High,
            (false, true) => Confidence::Medium,
            (false, false) => Confidence::Low,
        }
    }
}

/// The mean of `v` with the highest `trim_pct` percent left out (at least one sample kept).
pub fn trimmed_mean(v: &[f64], trim_pct: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let keep = ((s.len() as f64 * (1.0 - trim_pct / 100.0)).ceil() as usize).clamp(1, s.len());
    Some(s[..keep].iter().sum::<f64>() / keep as f64)
}

/// The `p`th percentile of `v` (nearest rank).
pub fn percentile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0 * s.len() as f64).ceil() as usize).clamp(1, s.len());
    Some(s[rank - 1])
}

/// One foreign probe: a new connection's steps, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ForeignProbe {
    /// When it started, seconds since the direction's start.
    pub t_s: f64,
    /// The TCP handshake.
    pub tcp_ms: f64,
    /// The TLS handshake (None over plain HTTP).
    pub tls_ms: Option<f64>,
    /// The HTTP request for the small object, from sending it to the last byte.
    pub http_ms: f64,
}

/// One self probe: the small object requested on a loaded connection, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SelfProbe {
    /// When it started, seconds since the direction's start.
    pub t_s: f64,
    /// From sending the request to the last byte of the answer.
    pub http_ms: f64,
    /// Not a request: the kernel's round-trip estimate of a load-generating connection, which
    /// draft-09 lets stand in for a self probe where none can ride it (HTTP/1.1).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tcp_rtt: bool,
    /// The kernel's round-trip estimate of the connection the probe rode, when it was sent, ms
    /// (goresponsiveness logs the same): what the network alone would have made the probe wait. A
    /// probe that takes much longer waited in the connection's byte stream: behind a loss not yet
    /// repaired (in-order delivery), or in the endpoints' buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_rtt_ms: Option<f64>,
}

/// The figures of a set of probes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmFigures {
    /// Round trips per minute from the trimmed means, by the params' draft's formula.
    pub rpm: f64,
    /// The same from the `percentile`th percentiles.
    pub rpm_percentile: f64,
    /// The foreign responsiveness alone: 60 000 / the mean of the foreign steps' trimmed means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_rpm: Option<f64>,
    /// The loaded (self) responsiveness alone: 60 000 / TM(http_l).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_rpm: Option<f64>,
    /// The trimmed means, ms: TCP handshake, TLS handshake (None over plain HTTP), foreign HTTP,
    /// self HTTP.
    pub tcp_ms: f64,
    /// TLS.
    pub tls_ms: Option<f64>,
    /// Foreign HTTP.
    pub http_foreign_ms: f64,
    /// Self HTTP.
    pub http_self_ms: f64,
    /// The trimmed mean of the kernel's round-trip estimates of the connections the self probes
    /// rode (None when none was read): `http_self_ms` well above it is time spent waiting in the
    /// connection's byte stream, not on the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_conn_rtt_ms: Option<f64>,
    /// Probes counted.
    pub foreign_probes: usize,
    /// Self probes counted.
    pub self_probes: usize,
}

/// RPM from `foreign` and `self_` probes (None without both kinds), by `p.draft`'s formula. Each
/// foreign step weighs the same (TCP, TLS when there is TLS, HTTP), as the draft says.
pub fn figures(foreign: &[ForeignProbe], self_: &[SelfProbe], p: &RpmParams) -> Option<RpmFigures> {
    let tcp: Vec<f64> = foreign.iter().map(|f| f.tcp_ms).collect();
    let tls: Vec<f64> = foreign.iter().filter_map(|f| f.tls_ms).collect();
    let http: Vec<f64> = foreign.iter().map(|f| f.http_ms).collect();
    let own: Vec<f64> = self_.iter().map(|s| s.http_ms).collect();
    let conn_rtt: Vec<f64> = self_.iter().filter_map(|s| s.conn_rtt_ms).collect();
    let foreign_ms = |stat: &dyn Fn(&[f64]) -> Option<f64>| -> Option<f64> {
        let mut parts = vec![stat(&tcp)?, stat(&http)?];
        if !tls.is_empty() {
            parts.push(stat(&tls)?);
        }
        Some(parts.iter().sum::<f64>() / parts.len() as f64)
    };
    let tm = |v: &[f64]| trimmed_mean(v, p.trim_pct);
    let pc = |v: &[f64]| percentile(v, p.percentile);
    let (f_tm, s_tm) = (foreign_ms(&tm)?, tm(&own)?);
    Some(RpmFigures {
        rpm: p.draft.rpm(f_tm, s_tm)?,
        rpm_percentile: p.draft.rpm(foreign_ms(&pc)?, pc(&own)?)?,
        foreign_rpm: (f_tm > 0.0).then(|| 60_000.0 / f_tm),
        loaded_rpm: (s_tm > 0.0).then(|| 60_000.0 / s_tm),
        tcp_ms: tm(&tcp)?,
        tls_ms: tm(&tls),
        http_foreign_ms: tm(&http)?,
        http_self_ms: s_tm,
        self_conn_rtt_ms: tm(&conn_rtt),
        foreign_probes: foreign.len(),
        self_probes: self_.len(),
    })
}

/// Which way a direction loads the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RpmDirection {
    /// GETs of the large object.
    Download,
    /// POSTs to the upload sink.
    Upload,
}

/// One interval of a direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmInterval {
    /// Its end, seconds since the direction's start.
    pub t_s: f64,
    /// Bits per second moved by the load-generating connections in it.
    pub throughput_bps: f64,
    /// The goodput's moving average at its end (the bytes of it and the MAD − 1 before, over MAD
    /// intervals), bits per second.
    #[serde(default)]
    pub average_bps: f64,
    /// Load-generating connections open at its end.
    pub connections: usize,
    /// The responsiveness at its end, from the probes of the last MAD intervals since the goodput
    /// saturated (None before, or without both kinds of probe).
    pub rpm: Option<f64>,
}

/// How far each stage got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpmConfidence {
    /// The goodput's saturation.
    pub capacity: Confidence,
    /// The responsiveness's.
    pub responsiveness: Confidence,
}

/// One direction's test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmDirectionResult {
    /// Download or upload.
    pub direction: RpmDirection,
    /// The goodput's moving average at the end, bits per second.
    pub throughput_bps: f64,
    /// Load-generating connections at the end.
    pub connections: usize,
    /// Whether the responsiveness reached stability (High confidence).
    pub stable: bool,
    /// Each stage's confidence (None in a report written before 2026-12-02).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<RpmConfidence>,
    /// When the goodput saturated (or its stage's time ran out), seconds since the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated_at_s: Option<f64>,
    /// Where the probes of the figures start, seconds since the start: the last MAD intervals of the
    /// responsiveness stage (of the whole test when that stage never ran a full interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_from_s: Option<f64>,
    /// The figures from the probes from `window_from_s` on.
    pub figures: Option<RpmFigures>,
    /// Why figures are missing, if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Each interval.
    pub intervals: Vec<RpmInterval>,
    /// Every foreign probe.
    pub foreign: Vec<ForeignProbe>,
    /// Every self probe.
    pub self_probes: Vec<SelfProbe>,
}

/// A `landspeed rpm` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmReport {
    /// `landspeed-rpm/1`.
    pub schema: String,
    /// The configuration URL.
    pub config_url: String,
    /// The HTTP version the load-generating connections spoke (`HTTP/2` or `HTTP/1.1`).
    pub http: String,
    /// The parameters (`draft`: whose formula the figures follow).
    pub params: RpmParams,
    /// Each direction, in the order run (download first when they ran at once).
    pub directions: Vec<RpmDirectionResult>,
    /// The two directions loaded the path at the same time (the draft's concurrent test), each with
    /// its own connections and probes; else one after the other (its sequential test).
    #[serde(default)]
    pub parallel: bool,
    /// The concurrent test's one score: the figures of both directions' windows of probes pooled.
    /// None in the sequential test (draft-09 reports its two scores apart) and with fewer than two
    /// directions measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<RpmFigures>,
}

impl RpmDirectionResult {
    /// The probes its figures come from: those from `window_from_s` on; in a report written before
    /// it was kept, the last `moving_average` intervals when stable, else every one.
    pub fn window(&self, p: &RpmParams) -> (Vec<ForeignProbe>, Vec<SelfProbe>) {
        let last = self.intervals.last().map_or(0.0, |i| i.t_s);
        let from = match (self.window_from_s, self.stable) {
            (Some(from), _) => from,
            (None, true) => last - p.interval.as_secs_f64() * p.moving_average as f64,
            (None, false) => 0.0,
        };
        let f = self.foreign.iter().filter(|x| x.t_s >= from).copied().collect();
        let s = self
            .self_probes
            .iter()
            .filter(|x| x.t_s >= from)
            .copied()
            .collect();
        (f, s)
    }
}

impl RpmReport {
    /// The same probes' figures under `draft`'s formula (`landspeed rpm --recompute`).
    pub fn recomputed(&self, draft: Draft) -> RpmReport {
        let params = RpmParams { draft, ..self.params };
        let mut r = self.clone();
        r.params = params;
        for d in &mut r.directions {
            if d.figures.is_some() {
                let (f, s) = d.window(&params);
                d.figures = figures(&f, &s, &params);
            }
        }
        r.overall = r.parallel.then(|| overall(&r.directions, &params)).flatten();
        r
    }
}

/// The figures of every measured direction's window pooled (None unless two or more have figures).
pub fn overall(directions: &[RpmDirectionResult], p: &RpmParams) -> Option<RpmFigures> {
    let measured: Vec<&RpmDirectionResult> = directions.iter().filter(|d| d.figures.is_some()).collect();
    if measured.len() < 2 {
        return None;
    }
    let (mut f, mut s) = (vec![], vec![]);
    for d in measured {
        let (df, ds) = d.window(p);
        f.extend(df);
        s.extend(ds);
    }
    figures(&f, &s, p)
}

/// Draft-09's algorithm for one direction, interval by interval, with no clock of its own: a
/// connection more every interval up to MNP; the goodput's moving average (the bytes of the last MAD
/// intervals over MAD intervals) until it is stable, which is saturation (or until half the time is
/// up); then the responsiveness of each interval, from the probes of the last MAD intervals since
/// saturation, until those values are stable (or the time is up).
#[derive(Debug, Clone)]
pub struct Ramp {
    params: RpmParams,
    goodput_bps: Vec<f64>,
    averages: Vec<f64>,
    responsiveness: Vec<f64>,
    saturated_at_s: Option<f64>,
    goodput_stage_intervals: usize,
    capacity_stable: bool,
    responsiveness_stable: bool,
}

impl Ramp {
    /// A ramp with these parameters.
    pub fn new(params: RpmParams) -> Ramp {
        Ramp {
            params,
            goodput_bps: vec![],
            averages: vec![],
            responsiveness: vec![],
            saturated_at_s: None,
            goodput_stage_intervals: 0,
            capacity_stable: false,
            responsiveness_stable: false,
        }
    }

    /// Takes the goodput of the interval that ended at `t_s` with `connections` open: whether to
    /// open one more now.
    pub fn goodput(&mut self, bps: f64, connections: usize, t_s: f64) -> bool {
        let mad = self.params.moving_average.max(1);
        self.goodput_bps.push(bps);
        let last = &self.goodput_bps[self.goodput_bps.len().saturating_sub(mad)..];
        self.averages.push(last.iter().sum::<f64>() / mad as f64);
        if self.saturated_at_s.is_none() {
            self.goodput_stage_intervals += 1;
            self.capacity_stable = steady(&self.averages, mad, self.params.stddev_pct);
            let half_time = t_s >= self.params.timeout.as_secs_f64() / 2.0;
            if self.capacity_stable || half_time {
                self.saturated_at_s = Some(t_s);
            }
        }
        self.params.fixed_connections.is_none() && connections < self.params.max_connections
    }

    /// Where the probes of the responsiveness at `t_s` start: the last MAD intervals, not before
    /// saturation (None: the goodput has not saturated, or saturated at `t_s`).
    pub fn window_from_s(&self, t_s: f64) -> Option<f64> {
        let s = self.saturated_at_s.filter(|s| *s < t_s)?;
        let span = self.params.interval.as_secs_f64() * self.params.moving_average as f64;
        Some(s.max(t_s - span))
    }

    /// Takes the responsiveness computed over [`Ramp::window_from_s`] at the interval's end: true
    /// when it is stable (the direction is done).
    pub fn responsiveness(&mut self, rpm: f64) -> bool {
        self.responsiveness.push(rpm);
        self.responsiveness_stable = steady(
            &self.responsiveness,
            self.params.moving_average,
            self.params.stddev_pct,
        );
        self.responsiveness_stable
    }

    /// The goodput of the last MAD intervals (of those there were, when fewer ran), bits per second:
    /// the figure reported (the stability test divides by MAD intervals whatever ran, as the
    /// draft's moving average does, so that a short ramp never looks saturated).
    pub fn throughput_bps(&self) -> f64 {
        let mad = self.params.moving_average.max(1);
        let last = &self.goodput_bps[self.goodput_bps.len().saturating_sub(mad)..];
        if last.is_empty() {
            return 0.0;
        }
        last.iter().sum::<f64>() / last.len() as f64
    }

    /// The goodput's latest moving average as the draft defines it (the last MAD intervals' bytes
    /// over MAD intervals), bits per second.
    pub fn moving_average_bps(&self) -> f64 {
        self.averages.last().copied().unwrap_or(0.0)
    }

    /// When the goodput saturated (or its stage's time ran out).
    pub fn saturated_at_s(&self) -> Option<f64> {
        self.saturated_at_s
    }

    /// The probes the final figures take at `t_s`, the test's end: the responsiveness window, or the
    /// last MAD intervals when the responsiveness stage has not run a full interval.
    pub fn final_window_from_s(&self, t_s: f64) -> f64 {
        let span = self.params.interval.as_secs_f64() * self.params.moving_average as f64;
        self.window_from_s(t_s)
            .filter(|_| !self.responsiveness.is_empty())
            .unwrap_or((t_s - span).max(0.0))
    }

    /// Each stage's confidence now.
    pub fn confidence(&self) -> RpmConfidence {
        let mad = self.params.moving_average.max(1);
        RpmConfidence {
            capacity: Confidence::of(self.goodput_stage_intervals, mad, self.capacity_stable),
            responsiveness: Confidence::of(self.responsiveness.len(), mad, self.responsiveness_stable),
        }
    }
}

#[cfg(test)]
mod tests;
