//! Responsiveness under working conditions (RPM), as the IETF IPPM draft "Responsiveness under
//! Working Conditions" defines it: load the path with HTTP/2 transfers on a growing number of
//! connections until both the throughput and the probes' round trips are stable, then count how many
//! round trips a minute the loaded path allows. Probes are "foreign" (a new connection: its TCP
//! handshake, its TLS handshake, an HTTP request for a 1-byte object) and "self" (the same request on
//! a loaded connection, behind its bulk data). RPM = 60 000 / (½·(TM(tcp) + TM(tls) + TM(http))/3 +
//! ½·TM(self)), TM being the mean with the highest 5% of samples trimmed (the draft's single-sided
//! trimmed mean); the 90th percentile in place of TM gives the P90 figure goresponsiveness also
//! prints. This module is the method with no I/O: the configuration document both ends agree on, the
//! stability test, the figures and the report's schema. `landspeed_net::rpm` does the HTTP.

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

    /// The document as served: both spellings of the URLs' names (goresponsiveness reads the
    /// `https_` ones, SERVER_SPEC.md names the shorter ones), as the reference server's does.
    pub fn to_json(&self) -> String {
        let u = &self.urls;
        serde_json::json!({
            "version": self.version,
            "urls": {
                "small_https_download_url": u.small_https_download_url,
                "large_https_download_url": u.large_https_download_url,
                "https_upload_url": u.https_upload_url,
                "small_download_url": u.small_https_download_url,
                "large_download_url": u.large_https_download_url,
                "upload_url": u.https_upload_url,
            }
        })
        .to_string()
    }

    /// Parses a configuration, accepting SERVER_SPEC.md's shorter field names too
    /// (`small_download_url`, `large_download_url`, `upload_url`).
    pub fn parse(text: &str) -> Result<RpmConfig, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("the configuration is not JSON: {e}"))?;
        let urls = &v["urls"];
        let pick = |a: &str, b: &str| {
            (urls[a].as_str().or(urls[b].as_str()))
                .map(String::from)
                .ok_or_else(|| format!("the configuration has no urls.{a} (or urls.{b})"))
        };
        Ok(RpmConfig {
            version: v["version"].as_u64().unwrap_or(1) as u32,
            urls: RpmUrls {
                small_https_download_url: pick("small_https_download_url", "small_download_url")?,
                large_https_download_url: pick("large_https_download_url", "large_download_url")?,
                https_upload_url: pick("https_upload_url", "upload_url")?,
            },
            test_endpoint: v["test_endpoint"].as_str().map(String::from),
        })
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

/// The method's parameters, with the draft's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmParams {
    /// How often the conditions are evaluated (ID: 1 s).
    #[serde(with = "crate::units::secs")]
    pub interval: Duration,
    /// Intervals in a moving average, and moving averages in the stability test (MAD: 4).
    pub moving_average: usize,
    /// Percent of the highest samples trimmed before the mean (TMP: 5).
    pub trim_pct: f64,
    /// Stable when the last moving averages' standard deviation is within this percent of their
    /// mean (SDT: 5).
    pub stddev_pct: f64,
    /// Most load-generating connections per direction (MNP: 16).
    pub max_connections: usize,
    /// Open this many load-generating connections at once and add none (no ramp-up): for setting
    /// a test beside a client that ends with a known count. None: the draft's ramp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_connections: Option<usize>,
    /// Probes a second of each kind (foreign and self; the draft's MPS caps both at 100).
    pub probes_per_s: f64,
    /// The percentile of the second figure (90).
    pub percentile: f64,
    /// Longest a direction may take to stabilize before its figures are given as unstable (20 s).
    #[serde(with = "crate::units::secs")]
    pub timeout: Duration,
}

impl Default for RpmParams {
    fn default() -> Self {
        RpmParams {
            interval: Duration::from_secs(1),
            moving_average: 4,
            trim_pct: 5.0,
            stddev_pct: 5.0,
            max_connections: 16,
            fixed_connections: None,
            probes_per_s: 10.0,
            percentile: 90.0,
            timeout: Duration::from_secs(20),
        }
    }
}

/// The stability test over one series sampled once an interval (throughput, or responsiveness):
/// stable when there are `mad` moving averages (each over the last `mad` samples) and their standard
/// deviation is within `stddev_pct` of their mean.
#[derive(Debug, Clone, Default)]
pub struct Stability {
    mad: usize,
    stddev_pct: f64,
    samples: Vec<f64>,
    averages: Vec<f64>,
}

impl Stability {
    /// A test over `mad` intervals with `stddev_pct` tolerance.
    pub fn new(mad: usize, stddev_pct: f64) -> Stability {
        Stability {
            mad: mad.max(1),
            stddev_pct,
            ..Stability::default()
        }
    }

    /// Adds one interval's value.
    pub fn push(&mut self, v: f64) {
        self.samples.push(v);
        if self.samples.len() >= self.mad {
            let last = &self.samples[self.samples.len() - self.mad..];
            self.averages.push(last.iter().sum::<f64>() / self.mad as f64);
        }
    }

    /// Whether the series is stable now.
    pub fn stable(&self) -> bool {
        if self.averages.len() < self.mad {
            return false;
        }
        let last = &self.averages[self.averages.len() - self.mad..];
        let mean = last.iter().sum::<f64>() / last.len() as f64;
        let var = last.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / last.len() as f64;
        mean > 0.0 && var.sqrt() <= mean * self.stddev_pct / 100.0
    }

    /// The latest moving average.
    pub fn average(&self) -> Option<f64> {
        self.averages.last().copied()
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
}

/// The figures of a set of probes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmFigures {
    /// Round trips per minute from the trimmed means (the draft's figure).
    pub rpm: f64,
    /// The same from the `percentile`th percentiles.
    pub rpm_percentile: f64,
    /// The trimmed means, ms: TCP handshake, TLS handshake (None over plain HTTP), foreign HTTP,
    /// self HTTP.
    pub tcp_ms: f64,
    /// TLS.
    pub tls_ms: Option<f64>,
    /// Foreign HTTP.
    pub http_foreign_ms: f64,
    /// Self HTTP.
    pub http_self_ms: f64,
    /// Probes counted.
    pub foreign_probes: usize,
    /// Self probes counted.
    pub self_probes: usize,
}

/// RPM from `foreign` and `self_` probes (None without both kinds).
pub fn figures(foreign: &[ForeignProbe], self_: &[SelfProbe], p: &RpmParams) -> Option<RpmFigures> {
    let tcp: Vec<f64> = foreign.iter().map(|f| f.tcp_ms).collect();
    let tls: Vec<f64> = foreign.iter().filter_map(|f| f.tls_ms).collect();
    let http: Vec<f64> = foreign.iter().map(|f| f.http_ms).collect();
    let own: Vec<f64> = self_.iter().map(|s| s.http_ms).collect();
    let rpm = |stat: &dyn Fn(&[f64]) -> Option<f64>| -> Option<f64> {
        let mut parts = vec![stat(&tcp)?, stat(&http)?];
        if !tls.is_empty() {
            parts.push(stat(&tls)?);
        }
        let foreign_ms = parts.iter().sum::<f64>() / parts.len() as f64;
        let ms = 0.5 * foreign_ms + 0.5 * stat(&own)?;
        (ms > 0.0).then(|| 60_000.0 / ms)
    };
    let tm = |v: &[f64]| trimmed_mean(v, p.trim_pct);
    let pc = |v: &[f64]| percentile(v, p.percentile);
    Some(RpmFigures {
        rpm: rpm(&tm)?,
        rpm_percentile: rpm(&pc)?,
        tcp_ms: tm(&tcp)?,
        tls_ms: tm(&tls),
        http_foreign_ms: tm(&http)?,
        http_self_ms: tm(&own)?,
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
    /// Load-generating connections open at its end.
    pub connections: usize,
    /// RPM from the probes of this interval alone (None without both kinds).
    pub rpm: Option<f64>,
}

/// One direction's test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmDirectionResult {
    /// Download or upload.
    pub direction: RpmDirection,
    /// The moving average of the throughput at the end, bits per second.
    pub throughput_bps: f64,
    /// Load-generating connections at the end.
    pub connections: usize,
    /// Whether both the throughput and the responsiveness were stable (if not, the figures come
    /// from every probe, as the draft's speculative result).
    pub stable: bool,
    /// The figures from the probes of the last `moving_average` intervals (every probe if unstable).
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
    /// The parameters.
    pub params: RpmParams,
    /// Each direction, in the order run (download first when they ran at once).
    pub directions: Vec<RpmDirectionResult>,
    /// The two directions loaded the path at the same time (goresponsiveness's `-rpm.parallel`),
    /// each with its own connections and probes; else one after the other.
    #[serde(default)]
    pub parallel: bool,
    /// Both directions together: the figures of every direction's window of probes pooled (the
    /// "final" RPM goresponsiveness prints); None with fewer than two directions measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<RpmFigures>,
}

impl RpmDirectionResult {
    /// The probes its figures come from: those of the last `moving_average` intervals when it was
    /// stable, else every one.
    pub fn window(&self, p: &RpmParams) -> (Vec<ForeignProbe>, Vec<SelfProbe>) {
        let last = self.intervals.last().map_or(0.0, |i| i.t_s);
        let from = match self.stable {
            true => last - p.interval.as_secs_f64() * p.moving_average as f64,
            false => 0.0,
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

/// Decides, at the end of each interval, whether a direction is done and whether to add a
/// connection: the draft's ramp-up (one more connection an interval while the throughput is not
/// stable, up to the maximum).
#[derive(Debug, Clone)]
pub struct Ramp {
    params: RpmParams,
    throughput: Stability,
    responsiveness: Stability,
}

/// What the ramp says after an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Go on, opening one more load-generating connection.
    AddConnection,
    /// Go on as is.
    Continue,
    /// Both series are stable: compute the figures.
    Stable,
}

impl Ramp {
    /// A ramp with these parameters.
    pub fn new(params: RpmParams) -> Ramp {
        Ramp {
            params,
            throughput: Stability::new(params.moving_average, params.stddev_pct),
            responsiveness: Stability::new(params.moving_average, params.stddev_pct),
        }
    }

    /// Takes one interval's throughput and the RPM of its probes (None: no probe answered yet),
    /// with `connections` open.
    pub fn interval(&mut self, throughput_bps: f64, rpm: Option<f64>, connections: usize) -> Step {
        self.throughput.push(throughput_bps);
        if let Some(r) = rpm {
            self.responsiveness.push(r);
        }
        let steady = self.throughput.stable();
        if steady && self.responsiveness.stable() {
            Step::Stable
        } else if !steady
            && connections < self.params.max_connections
            && self.params.fixed_connections.is_none()
        {
            Step::AddConnection
        } else {
            Step::Continue
        }
    }

    /// The throughput's latest moving average, bits per second.
    pub fn throughput_bps(&self) -> f64 {
        self.throughput.average().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests;
