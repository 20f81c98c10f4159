//! `landspeed rpm`: the responsiveness client (landspeed_rpm has the method, draft-09's). It
//! fetches a server's configuration, then per direction opens load-generating connections (GETs of the
//! large object, or POSTs of an endless body), one more each interval up to the maximum, and
//! meanwhile sends probe pairs at the draft's rate (at most 5% of the capacity measured): foreign ones
//! on new connections (TCP, TLS and HTTP timed apart) and self ones on a load-generating HTTP/2
//! connection picked at random, the two kinds interleaved. Once the goodput has saturated it computes
//! the responsiveness each interval from the probes of the last intervals, and stops when that is
//! stable or at the timeout, each stage with its confidence. HTTP/2 over TLS (ALPN), or with prior
//! knowledge over plain TCP; with HTTP/1.1 (`http1`) a loaded connection cannot carry a probe, so the
//! kernel's round-trip estimate of a load connection picked at random stands in for each self probe,
//! as draft-09 allows (marked `tcp_rtt`). Both ends hold
//! their unsent data near 5 ms of each connection's rate (`backlog`: the kernel's, TLS's and HTTP/2's
//! together), so a self probe measures the path's queue, not the endpoints' buffers. The directions run one after the other, or at once (`parallel`);
//! a configuration naming a `test_endpoint` has every connection made there.

use super::backlog;
use super::conn::{self, ConnError, Sender, Target, UrlError};
use http_body_util::BodyExt;
use hyper::body::{Body, Bytes, Frame};
use landspeed_rpm::{
    self as rpm, ForeignProbe, Ramp, RpmConfig, RpmDirection, RpmDirectionResult, RpmInterval, RpmParams,
    RpmReport, SelfProbe,
};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// What `landspeed rpm` was asked.
#[derive(Debug, Clone)]
pub struct RpmOptions {
    /// The configuration's URL.
    pub config_url: String,
    /// Where to look next when `config_url` answers 404 (a bare host is looked up at draft-09's
    /// `/.well-known/nq`, then at `/config`, where goresponsiveness's servers answer).
    pub fallback_config_url: Option<String>,
    /// The directions, run one after the other (or at once with `parallel`).
    pub directions: Vec<RpmDirection>,
    /// Both directions at once: the download's and the upload's load, and each one's probes, on the
    /// path together (goresponsiveness's `-rpm.parallel`).
    pub parallel: bool,
    /// The method's parameters.
    pub params: RpmParams,
    /// Speak HTTP/1.1 only.
    pub http1: bool,
}

/// Why a responsiveness test could not run.
#[derive(Debug, thiserror::Error)]
pub enum RpmError {
    /// The configuration's URL, or one it names, is not usable.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The configuration could not be fetched or read.
    #[error("the configuration at {url}: {why}")]
    Config {
        /// Where.
        url: String,
        /// Why.
        why: ConfigError,
    },
    /// The runtime could not start.
    #[error("cannot start the client's runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// Why a configuration could not be fetched or read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No connection to its server.
    #[error(transparent)]
    Conn(#[from] ConnError),
    /// A step took longer than `PROBE_TIMEOUT`.
    #[error("{0} within 10 s")]
    Timeout(&'static str),
    /// The request failed.
    #[error("{0}")]
    Request(hyper::Error),
    /// Its body could not be read, or was too long.
    #[error("{0} (a configuration is at most 64 KiB)")]
    Body(Box<dyn std::error::Error + Send + Sync>),
    /// The server answered with an error.
    #[error("HTTP {status}: {text}")]
    Status {
        /// The status.
        status: hyper::StatusCode,
        /// The start of its body.
        text: String,
    },
    /// What came is not a configuration (`RpmConfig::parse`'s reason).
    #[error("{0}")]
    Invalid(String),
}

/// The most read of the configuration or of a small object.
const MAX_SMALL_BODY: usize = 64 * 1024;
/// A probe answered after this long is given up.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the test.
pub fn measure(opts: &RpmOptions, interrupt: &AtomicBool) -> Result<RpmReport, RpmError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rpm")
        .enable_all()
        .build()?;
    let report = rt.block_on(run(opts, interrupt));
    rt.shutdown_timeout(Duration::from_millis(500));
    report
}

async fn run(opts: &RpmOptions, interrupt: &AtomicBool) -> Result<RpmReport, RpmError> {
    let (config_url, config) = discover(opts).await?;
    // A configuration naming a test endpoint is served apart from the test: every URL is reached there.
    let at = config.test_endpoint.as_deref();
    let url = |u: &str| Target::parse(u).map(|t| t.via(at)).map_err(RpmError::from);
    let endpoints = Endpoints {
        small: url(&config.urls.small_https_download_url)?,
        large: url(&config.urls.large_https_download_url)?,
        upload: url(&config.urls.https_upload_url)?,
        http1: opts.http1,
    };
    let (p, e) = (&opts.params, &endpoints);
    let directions = if opts.parallel {
        let (down, up) = tokio::join!(
            direction(RpmDirection::Download, e, p, interrupt),
            direction(RpmDirection::Upload, e, p, interrupt)
        );
        vec![down, up]
    } else {
        let mut one_by_one = vec![];
        for &d in &opts.directions {
            if interrupt.load(Relaxed) {
                break;
            }
            one_by_one.push(direction(d, e, p, interrupt).await);
        }
        one_by_one
    };
    Ok(RpmReport {
        parallel: opts.parallel,
        schema: rpm::RPM_SCHEMA.into(),
        config_url,
        http: if opts.http1 { "HTTP/1.1" } else { "HTTP/2" }.into(),
        params: opts.params,
        overall: opts
            .parallel
            .then(|| rpm::overall(&directions, &opts.params))
            .flatten(),
        directions,
    })
}

/// The configuration, from `config_url` or, when that answers 404, from the fallback: the URL that
/// answered and what it said.
async fn discover(opts: &RpmOptions) -> Result<(String, RpmConfig), RpmError> {
    let urls = std::iter::once(&opts.config_url).chain(opts.fallback_config_url.as_ref());
    let mut last = None;
    for url in urls {
        let target = Target::parse(url)?;
        match fetch_config(&target, opts.http1).await {
            Ok(c) => return Ok((url.clone(), c)),
            Err(why) => {
                let missing = matches!(&why, ConfigError::Status { status, .. } if *status == hyper::StatusCode::NOT_FOUND);
                last = Some(RpmError::Config {
                    url: url.clone(),
                    why,
                });
                if !missing {
                    break;
                }
            }
        }
    }
    Err(last.expect("at least one URL"))
}

/// GETs and reads the configuration.
async fn fetch_config(t: &Target, http1: bool) -> Result<RpmConfig, ConfigError> {
    let mut c = conn::open(t, http1).await?;
    let resp = tokio::time::timeout(PROBE_TIMEOUT, c.sender.send(t.get()))
        .await
        .map_err(|_| ConfigError::Timeout("no answer"))?
        .map_err(ConfigError::Request)?;
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_SMALL_BODY);
    let body = tokio::time::timeout(PROBE_TIMEOUT, body.collect())
        .await
        .map_err(|_| ConfigError::Timeout("the body did not arrive"))?
        .map_err(ConfigError::Body)?
        .to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(300)])
            .trim()
            .to_string();
        return Err(ConfigError::Status { status, text });
    }
    RpmConfig::parse(&String::from_utf8_lossy(&body)).map_err(ConfigError::Invalid)
}

/// The configuration's endpoints, parsed.
struct Endpoints {
    small: Target,
    large: Target,
    upload: Target,
    http1: bool,
}

/// A loaded HTTP/2 connection's request handle.
type H2Sender = hyper::client::conn::http2::SendRequest<conn::ReqBody>;

/// What one direction's tasks share.
#[derive(Default)]
struct Shared {
    /// Bytes the load-generating connections moved.
    bytes: AtomicU64,
    /// The highest goodput of an interval so far, bits per second: the capacity the probes' budget
    /// is a share of.
    capacity_bps: AtomicU64,
    /// The loading HTTP/2 connections, for self probes, each with its budget (whose kernel RTT
    /// estimate goes with each probe).
    senders: Mutex<Vec<(H2Sender, Arc<backlog::Budget>)>>,
    /// The loading connections' budgets (their kernel's RTT estimates stand in for self probes
    /// over HTTP/1.1).
    budgets: Mutex<Vec<Arc<backlog::Budget>>>,
    foreign: Mutex<Vec<ForeignProbe>>,
    self_probes: Mutex<Vec<SelfProbe>>,
    /// Why a load-generating connection failed, if one did (the first reason).
    load_failed: Mutex<Option<String>>,
}

impl Shared {
    fn load_failed(&self, why: String) {
        lock(&self.load_failed).get_or_insert(why);
    }
}

/// One direction: draft-09's ramp (a connection more every interval, saturation, then the
/// responsiveness until stable or the time is up), with probes all along.
async fn direction(
    dir: RpmDirection,
    ep: &Endpoints,
    params: &RpmParams,
    interrupt: &AtomicBool,
) -> RpmDirectionResult {
    let start = Instant::now();
    let deadline = start + params.timeout;
    let shared = Arc::new(Shared::default());
    let load = match dir {
        RpmDirection::Download => &ep.large,
        RpmDirection::Upload => &ep.upload,
    };
    let first = params.fixed_connections.unwrap_or(1).max(1);
    let mut lgcs: Vec<_> = (0..first)
        .map(|_| spawn_lgc(dir, load.clone(), ep.http1, shared.clone(), deadline))
        .collect();
    let prober = tokio::spawn(probe_loop(
        ep.small.clone(),
        ep.http1,
        *params,
        start,
        shared.clone(),
    ));
    let mut ramp = Ramp::new(*params);
    let mut intervals: Vec<RpmInterval> = vec![];
    let mut moved = 0u64;
    let mut tick = tokio::time::interval_at(start + params.interval, params.interval);
    while start.elapsed() < params.timeout && !interrupt.load(Relaxed) {
        tick.tick().await;
        let t_s = start.elapsed().as_secs_f64();
        let now = shared.bytes.load(Relaxed);
        let throughput_bps = (now - moved) as f64 * 8.0 / params.interval.as_secs_f64();
        moved = now;
        shared.capacity_bps.fetch_max(throughput_bps as u64, Relaxed);
        let add = ramp.goodput(throughput_bps, lgcs.len(), t_s);
        let rpm = (ramp.window_from_s(t_s))
            .and_then(|from| window_figures(&shared, from, params))
            .map(|f| f.rpm);
        let done = rpm.is_some_and(|r| ramp.responsiveness(r));
        intervals.push(RpmInterval {
            t_s,
            throughput_bps,
            average_bps: ramp.moving_average_bps(),
            connections: lgcs.len(),
            rpm,
        });
        if done {
            break;
        }
        if add && start.elapsed() < params.timeout {
            lgcs.push(spawn_lgc(dir, load.clone(), ep.http1, shared.clone(), deadline));
        }
    }
    prober.abort();
    for t in &lgcs {
        t.abort();
    }
    lock(&shared.senders).clear();
    finish(dir, &ramp, lgcs.len(), intervals, &shared, params, ep.http1)
}

/// The direction's result: figures from the responsiveness stage's last MAD intervals (or the
/// test's, when that stage never ran a whole interval), with each stage's confidence.
fn finish(
    dir: RpmDirection,
    ramp: &Ramp,
    connections: usize,
    intervals: Vec<RpmInterval>,
    shared: &Shared,
    params: &RpmParams,
    http1: bool,
) -> RpmDirectionResult {
    let end_s = intervals.last().map_or(0.0, |i| i.t_s);
    let confidence = ramp.confidence();
    let mut d = RpmDirectionResult {
        direction: dir,
        throughput_bps: ramp.throughput_bps(),
        connections,
        stable: confidence.responsiveness == rpm::Confidence::High,
        confidence: Some(confidence),
        saturated_at_s: ramp.saturated_at_s(),
        window_from_s: Some(ramp.final_window_from_s(end_s)),
        figures: None,
        error: None,
        intervals,
        foreign: lock(&shared.foreign).clone(),
        self_probes: lock(&shared.self_probes).clone(),
    };
    let failed = lock(&shared.load_failed).clone();
    let (f, s) = d.window(params);
    d.figures = rpm::figures(&f, &s, params).filter(|_| failed.is_none());
    d.error = match (&d.figures, http1) {
        (None, _) if failed.is_some() => failed
            .map(|why| format!("the load was not kept up, so the path was not under working conditions: {why}")),
        (Some(_), _) => None,
        (None, true) => Some(
            "over HTTP/1.1 no load-generating connection had a TCP round-trip estimate to stand in for the self probes"
                .into(),
        ),
        (None, false) => Some("no probe of each kind was answered".into()),
    };
    d
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The figures of the probes sent from `from_s` on.
fn window_figures(shared: &Shared, from_s: f64, params: &RpmParams) -> Option<rpm::RpmFigures> {
    let f: Vec<ForeignProbe> = (lock(&shared.foreign).iter())
        .filter(|p| p.t_s >= from_s)
        .copied()
        .collect();
    let s: Vec<SelfProbe> = (lock(&shared.self_probes).iter())
        .filter(|p| p.t_s >= from_s)
        .copied()
        .collect();
    rpm::figures(&f, &s, params)
}

/// A load-generating connection: GETs the large object (again each time the whole of it came,
/// on a fast path), or POSTs an endless body, counting bytes. A load that fails, or that the server
/// ends before `deadline` (the direction's time), voids the direction's figures with its reason:
/// the path was not kept under working conditions.
fn spawn_lgc(
    dir: RpmDirection,
    t: Target,
    http1: bool,
    shared: Arc<Shared>,
    deadline: Instant,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(why) = run_load(dir, &t, http1, &shared).await {
            // Ended by this client (the direction over) it is aborted before it gets here.
            if Instant::now() < deadline {
                shared.load_failed(why);
            }
        }
    })
}

/// The least the large object holds by the draft's server specification ("at least 8GB"): a
/// download body that ends cleanly having carried this much was the whole object, and is asked for
/// again on the same connection; one that ends sooner was the server ending the load.
const WHOLE_OBJECT_BYTES: u64 = 8_000_000_000;

/// One load until it fails or ends (an error either way: a load outlasts its direction).
async fn run_load(dir: RpmDirection, t: &Target, http1: bool, shared: &Arc<Shared>) -> Result<(), String> {
    let mut c = conn::open(t, http1).await.map_err(|why| why.to_string())?;
    if let Sender::H2(s) = &c.sender {
        lock(&shared.senders).push((s.clone(), c.budget.clone()));
    }
    lock(&shared.budgets).push(c.budget.clone());
    loop {
        let req = match dir {
            RpmDirection::Download => t.get(),
            RpmDirection::Upload => t.post(Endless::new(c.budget.clone(), shared.clone()).boxed()),
        };
        let resp = match c.sender.send(req).await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => return Err(format!("HTTP {} from {}", r.status(), t)),
            Err(e) => return Err(format!("{t}: {e}")),
        };
        if dir == RpmDirection::Upload {
            return Err(format!(
                "{t} answered the upload before the test's end (it stopped taking it)"
            ));
        }
        let got = drain(resp.into_body(), t, shared).await?;
        if got < WHOLE_OBJECT_BYTES {
            return Err(format!(
                "{t} ended the load after {got} bytes, before the test's end"
            ));
        }
    }
}

/// A download's body read to its end, its bytes counted as they come: how many it carried.
async fn drain(mut body: hyper::body::Incoming, t: &Target, shared: &Shared) -> Result<u64, String> {
    let mut got = 0u64;
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                let n = frame.data_ref().map_or(0, |d| d.len() as u64);
                shared.bytes.fetch_add(n, Relaxed);
                got += n;
            }
            Some(Err(e)) => return Err(format!("the load from {t} broke after {got} bytes: {e}")),
            None => return Ok(got),
        }
    }
}

/// Probes as draft-09 sends them: pairs at MPS a second, fewer when they would take more than PTC
/// of the capacity measured so far, the two kinds interleaved (half a period apart), each self probe
/// on a load-generating connection picked at random.
async fn probe_loop(small: Target, http1: bool, params: RpmParams, start: Instant, shared: Arc<Shared>) {
    let mut pick = Pick(getrandom::u64().unwrap_or(0x5eed) | 1);
    let mut foreign_next = true;
    let mut last = Instant::now();
    loop {
        // The rate follows the capacity as it is measured: due half a pair's period after the last
        // probe, looked at again at least every 50 ms.
        let pairs = params.probe_pairs_per_s(capacity_now(&shared, start));
        let due = Duration::from_secs_f64(0.5 / pairs.max(0.01)).saturating_sub(last.elapsed());
        if !due.is_zero() {
            tokio::time::sleep(due.min(Duration::from_millis(50))).await;
            continue;
        }
        last = Instant::now();
        if foreign_next {
            tokio::spawn(foreign_probe(small.clone(), http1, start, shared.clone()));
        } else if http1 {
            tcp_rtt_probe(&shared, &mut pick, start);
        } else {
            let sender = {
                let s = lock(&shared.senders);
                (!s.is_empty()).then(|| s[pick.below(s.len())].clone())
            };
            if let Some((s, budget)) = sender {
                tokio::spawn(self_probe(small.clone(), s, budget, start, shared.clone()));
            }
        }
        foreign_next = !foreign_next;
    }
}

/// Over HTTP/1.1: a load-generating connection picked at random, its kernel's round-trip estimate
/// as the self probe (draft-09's stand-in where no request can ride a loaded connection).
fn tcp_rtt_probe(shared: &Shared, pick: &mut Pick, start: Instant) {
    let rtt = {
        let b = lock(&shared.budgets);
        (!b.is_empty()).then(|| b[pick.below(b.len())].rtt()).flatten()
    };
    if let Some(rtt) = rtt {
        lock(&shared.self_probes).push(SelfProbe {
            t_s: start.elapsed().as_secs_f64(),
            http_ms: rtt.as_secs_f64() * 1e3,
            tcp_rtt: true,
            conn_rtt_ms: None,
        });
    }
}

/// The capacity measured so far, bits per second: the best interval's goodput, or the mean since the
/// start while no interval has ended.
fn capacity_now(shared: &Shared, start: Instant) -> f64 {
    let mean = shared.bytes.load(Relaxed) as f64 * 8.0 / start.elapsed().as_secs_f64().max(1e-3);
    (shared.capacity_bps.load(Relaxed) as f64).max(mean)
}

/// A small random choice (xorshift64*): which load-generating connection carries a self probe.
struct Pick(u64);

impl Pick {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

/// A new connection: its TCP and TLS handshakes and one GET of the small object, timed apart.
async fn foreign_probe(t: Target, http1: bool, start: Instant, shared: Arc<Shared>) {
    let t_s = start.elapsed().as_secs_f64();
    let probe = async {
        let mut c = conn::open(&t, http1).await.ok()?;
        let http_ms = timed_get(&mut c.sender, &t).await?;
        Some(ForeignProbe {
            t_s,
            tcp_ms: c.tcp_ms,
            tls_ms: c.tls_ms,
            http_ms,
        })
    };
    if let Ok(Some(p)) = tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        lock(&shared.foreign).push(p);
    }
}

/// One GET of the small object on a loaded HTTP/2 connection, with that connection's kernel RTT
/// estimate when it was sent.
async fn self_probe(
    t: Target,
    s: H2Sender,
    budget: Arc<backlog::Budget>,
    start: Instant,
    shared: Arc<Shared>,
) {
    let t_s = start.elapsed().as_secs_f64();
    let conn_rtt_ms = budget.rtt().map(|d| d.as_secs_f64() * 1e3);
    let mut sender = Sender::H2(s);
    if let Ok(Some(http_ms)) = tokio::time::timeout(PROBE_TIMEOUT, timed_get(&mut sender, &t)).await {
        lock(&shared.self_probes).push(SelfProbe {
            t_s,
            http_ms,
            tcp_rtt: false,
            conn_rtt_ms,
        });
    }
}

/// GETs `t` and reads the whole answer: the time from sending to its last byte, ms.
async fn timed_get(s: &mut Sender, t: &Target) -> Option<f64> {
    let at = Instant::now();
    let resp = s.send(t.get()).await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    http_body_util::Limited::new(resp.into_body(), MAX_SMALL_BODY)
        .collect()
        .await
        .ok()?;
    Some(at.elapsed().as_secs_f64() * 1e3)
}

/// The upload's body: chunks of its connection's budget's share (draft-09's 5 ms), again and again,
/// counted as they are handed over, never ending.
struct Endless {
    budget: Arc<backlog::Budget>,
    shared: Arc<Shared>,
}

static UPLOAD_CHUNK: [u8; backlog::CEILING_BYTES as usize] = [b'x'; backlog::CEILING_BYTES as usize];

impl Endless {
    fn new(budget: Arc<backlog::Budget>, shared: Arc<Shared>) -> Endless {
        Endless { budget, shared }
    }
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let n = self.budget.chunk_bytes().min(UPLOAD_CHUNK.len());
        self.shared.bytes.fetch_add(n as u64, Relaxed);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&UPLOAD_CHUNK[..n])))))
    }
}
