//! What a user asks of an emulated path, parsed and checked before anything is created: one-way delay,
//! rate, queue, loss model and the other impairments, for each direction. Kept apart from the engine so
//! that the command line, the state file and the status output all share one typed description.

use landspeed_core::units::{parse_duration, BitRate, Bytes, UnitError};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Why a setting could not be understood.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// A value with a unit (time, rate, size) could not be read.
    #[error("{what}: {source}")]
    Unit {
        /// The setting.
        what: String,
        /// Why not.
        source: UnitError,
    },
    /// A probability outside 0..1 or not a number.
    #[error("{what}: '{value}' is not a probability (use 0.01 or 1%, between 0 and 1)")]
    Probability {
        /// The setting.
        what: String,
        /// The value as given.
        value: String,
    },
    #[error(
        "queue: '{0}' is neither a size (e.g. 4M) nor a multiple of the bandwidth-delay product (e.g. 2bdp)"
    )]
    /// A queue that is neither a size nor a multiple of the BDP.
    Queue(String),
    /// A queue discipline landspeed does not know, or bad parameters for one.
    #[error("{0}")]
    Aqm(String),
    /// A queue given in BDPs without a rate or delay to compute one from.
    #[error("queue: '{0}' is a multiple of the bandwidth-delay product, which needs a --rate and a non-zero delay")]
    QueueNeedsBdp(String),
    /// A loss model that is not bernoulli:P or gilbert:P,R[,..].
    #[error("loss model: '{0}' (expected bernoulli:P or gilbert:P,R[,LOSS_IN_BAD[,LOSS_IN_GOOD]])")]
    LossModel(String),
    /// An MTU outside 576..=65521.
    #[error("mtu {0} is outside 576..=65521")]
    Mtu(u32),
    /// A per-direction setting that is not KEY=VALUE with a known key.
    #[error("per-direction setting '{0}' is not KEY=VALUE with KEY one of delay, rate, queue, aqm, loss, loss-model, jitter, reorder, reorder-gap, duplicate, corrupt-payload")]
    Override(String),
    /// An emulator name that is not 1 to 8 characters of a-z, 0-9.
    #[error("emulator name '{0}' must be 1 to 8 characters of a-z, 0-9")]
    Name(String),
}

/// A probability in [0, 1], given as a fraction (`0.01`) or a percentage (`1%`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Probability(pub f64);

impl Probability {
    /// Reads `s` (`0.01` or `1%`) as the probability of setting `what`.
    pub fn parse(what: &str, s: &str) -> Result<Probability, SettingsError> {
        let bad = || SettingsError::Probability {
            what: what.into(),
            value: s.into(),
        };
        let t = s.trim();
        let v = match t.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
            None => t.parse::<f64>().map_err(|_| bad())?,
        };
        if !(0.0..=1.0).contains(&v) || !v.is_finite() {
            return Err(bad());
        }
        Ok(Probability(v))
    }
}

/// How packets are lost, independent of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum LossModel {
    /// No packet is lost by the model (the queue may still drop).
    #[default]
    None,
    /// Each packet lost independently with probability `p`.
    Bernoulli {
        /// The loss probability.
        p: f64,
    },
    /// Gilbert–Elliott: a good and a bad state; `p` = P(good→bad), `r` = P(bad→good) per packet, and a
    /// loss probability in each state.
    Gilbert {
        /// P(good→bad) per packet.
        p: f64,
        /// P(bad→good) per packet.
        r: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
        /// Loss probability in the good state.
        loss_good: f64,
    },
}

impl LossModel {
    /// Reads `bernoulli:P` or `gilbert:P,R[,LOSS_IN_BAD[,LOSS_IN_GOOD]]` (bad state loses every packet
    /// and the good state none unless said).
    pub fn parse(s: &str) -> Result<LossModel, SettingsError> {
        let bad = || SettingsError::LossModel(s.into());
        let (kind, args) = s.split_once(':').ok_or_else(bad)?;
        let nums: Vec<f64> = args
            .split(',')
            .map(|a| Probability::parse("loss model", a).map(|p| p.0))
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        match (kind.trim(), nums.as_slice()) {
            ("bernoulli", [p]) => Ok(LossModel::Bernoulli { p: *p }),
            ("gilbert" | "gilbert-elliott" | "ge", [p, r, rest @ ..]) if rest.len() <= 2 => {
                Ok(LossModel::Gilbert {
                    p: *p,
                    r: *r,
                    loss_bad: rest.first().copied().unwrap_or(1.0),
                    loss_good: rest.get(1).copied().unwrap_or(0.0),
                })
            }
            _ => Err(bad()),
        }
    }

    /// The long-run fraction of packets lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::Gilbert {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                if p + r == 0.0 {
                    loss_good
                } else {
                    let bad = p / (p + r);
                    bad * loss_bad + (1.0 - bad) * loss_good
                }
            }
        }
    }
}

/// The bottleneck queue's limit, before it is resolved against the rate and delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueSpec {
    /// A size in bytes.
    Bytes(u64),
    /// A multiple of the path's bandwidth-delay product (rate × RTT).
    Bdp(f64),
}

impl QueueSpec {
    /// Reads a size (`4M`) or a multiple of the BDP (`2bdp`).
    pub fn parse(s: &str) -> Result<QueueSpec, SettingsError> {
        let t = s.trim();
        if let Some(n) = t.strip_suffix("bdp").or_else(|| t.strip_suffix("BDP")) {
            let f: f64 = if n.is_empty() {
                1.0
            } else {
                n.parse().map_err(|_| SettingsError::Queue(s.into()))?
            };
            if !(f > 0.0 && f.is_finite()) {
                return Err(SettingsError::Queue(s.into()));
            }
            return Ok(QueueSpec::Bdp(f));
        }
        let b: Bytes = t.parse().map_err(|_| SettingsError::Queue(s.into()))?;
        if b.0 == 0 {
            return Err(SettingsError::Queue(s.into()));
        }
        Ok(QueueSpec::Bytes(b.0))
    }
}

/// Everything applied to packets going one way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    /// One-way delay.
    #[serde(with = "landspeed_core::units::secs")]
    pub delay: Duration,
    /// Serialization rate in bits per second; `None` is unlimited.
    pub rate_bps: Option<f64>,
    /// Queue limit in bytes (resolved); `None` is unlimited (only without a rate).
    pub queue_bytes: Option<u64>,
    /// Random loss, besides the queue's drops.
    pub loss: LossModel,
    /// Delay variation: each packet gets up to ± this much, without being reordered by it.
    #[serde(with = "landspeed_core::units::secs")]
    pub jitter: Duration,
    /// Probability that a packet is held back and overtaken.
    pub reorder: f64,
    /// How long a reordered packet is held back, letting later packets overtake it.
    #[serde(with = "landspeed_core::units::secs")]
    pub reorder_gap: Duration,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability that a packet's payload gets one flipped bit.
    pub corrupt_payload: f64,
    /// The bottleneck's queue discipline (tail drop unless asked).
    #[serde(default)]
    pub aqm: crate::aqm::Aqm,
}

/// The whole path: the two directions and what they share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathSettings {
    /// The TUN devices' MTU, bytes.
    pub mtu: u32,
    /// From host A to host B.
    pub a_to_b: Direction,
    /// From host B to host A.
    pub b_to_a: Direction,
    /// Seed of the impairment random numbers, so a run can be repeated.
    pub seed: u64,
    /// The forwarding threads run with real-time priority (on time, but they take CPU from the hosts
    /// first); false: the highest ordinary priority (nice -20), which shares the CPU with them.
    #[serde(default = "yes")]
    pub realtime: bool,
    /// Both hosts ask for ECN on their TCP connections (net.ipv4.tcp_ecn = 1 in their namespaces;
    /// the kernel's default, 2, only answers a peer that asks).
    #[serde(default)]
    pub ecn: bool,
}

fn yes() -> bool {
    true
}

/// Raw settings as typed by the user (strings), turned into [`PathSettings`] by [`Request::resolve`].
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Round-trip time (`--rtt`), split evenly between the directions.
    pub rtt: Option<String>,
    /// Bottleneck rate (`--rate`).
    pub rate: Option<String>,
    /// Bottleneck queue (`--queue`): a size or a multiple of the BDP.
    pub queue: Option<String>,
    /// Random loss probability (`--loss`).
    pub loss: Option<String>,
    /// Loss model (`--loss-model`).
    pub loss_model: Option<String>,
    /// Delay variation (`--jitter`).
    pub jitter: Option<String>,
    /// Reordering probability (`--reorder`).
    pub reorder: Option<String>,
    /// How long a reordered packet is held back (`--reorder-gap`).
    pub reorder_gap: Option<String>,
    /// Duplication probability (`--duplicate`).
    pub duplicate: Option<String>,
    /// Payload corruption probability (`--corrupt-payload`).
    pub corrupt_payload: Option<String>,
    /// The bottleneck's queue discipline (`--aqm`).
    pub aqm: Option<String>,
    /// The devices' MTU (`--mtu`).
    pub mtu: Option<u32>,
    /// The impairments' random seed (`--seed`).
    pub seed: Option<u64>,
    /// Ordinary rather than real-time forwarding threads (`--no-realtime`).
    pub no_realtime: bool,
    /// Both hosts ask for ECN (`--ecn`).
    pub ecn: bool,
    /// `KEY=VALUE` overrides for A→B and B→A (`delay` is one-way there).
    pub a_to_b: Vec<String>,
    /// `KEY=VALUE` overrides for B→A.
    pub b_to_a: Vec<String>,
}

pub(crate) fn dur(what: &str, s: &str) -> Result<Duration, SettingsError> {
    parse_duration(s).map_err(|source| SettingsError::Unit {
        what: what.into(),
        source,
    })
}

pub(crate) fn rate(s: &str) -> Result<Option<f64>, SettingsError> {
    if matches!(s.trim(), "0" | "none" | "unlimited") {
        return Ok(None);
    }
    let r: BitRate = s.parse().map_err(|source| SettingsError::Unit {
        what: "rate".into(),
        source,
    })?;
    Ok((r.bps() > 0.0).then_some(r.bps()))
}

/// The default queue when none is given: one bandwidth-delay product, at least 64 KiB.
pub const DEFAULT_QUEUE_BDP: f64 = 1.0;
const MIN_QUEUE: u64 = 64 * 1024;

/// A direction's queue in bytes: `queue` as given, resolved against its `rate` and the round trip
/// `rtt` when it is a multiple of the BDP, one BDP (at least 64 KiB) when not given and there is a
/// rate, none without either.
pub(crate) fn queue_bytes(
    queue: Option<QueueSpec>,
    rate: Option<f64>,
    rtt: Duration,
) -> Result<Option<u64>, SettingsError> {
    let bdp = |f: f64| rate.map(|r| (r / 8.0 * rtt.as_secs_f64() * f) as u64);
    Ok(match queue {
        Some(QueueSpec::Bytes(b)) => Some(b),
        Some(QueueSpec::Bdp(f)) => match bdp(f) {
            Some(b) if rtt > Duration::ZERO => Some(b.max(MIN_QUEUE)),
            _ => return Err(SettingsError::QueueNeedsBdp(format!("{f}bdp"))),
        },
        None => bdp(DEFAULT_QUEUE_BDP).map(|b| b.max(MIN_QUEUE)),
    })
}

struct Partial {
    delay: Duration,
    rate: Option<f64>,
    queue: Option<QueueSpec>,
    loss: LossModel,
    jitter: Duration,
    reorder: f64,
    reorder_gap: Duration,
    duplicate: f64,
    corrupt: f64,
    aqm: crate::aqm::Aqm,
}

impl Partial {
    fn apply(&mut self, kv: &str) -> Result<(), SettingsError> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| SettingsError::Override(kv.into()))?;
        match k.trim() {
            "delay" => self.delay = dur("delay", v)?,
            "rate" => self.rate = rate(v)?,
            "queue" => self.queue = Some(QueueSpec::parse(v)?),
            "loss" => self.loss = bernoulli(v)?,
            "loss-model" => self.loss = LossModel::parse(v)?,
            "jitter" => self.jitter = dur("jitter", v)?,
            "reorder" => self.reorder = Probability::parse("reorder", v)?.0,
            "reorder-gap" => self.reorder_gap = dur("reorder-gap", v)?,
            "duplicate" => self.duplicate = Probability::parse("duplicate", v)?.0,
            "corrupt-payload" => self.corrupt = Probability::parse("corrupt-payload", v)?.0,
            "aqm" => self.aqm = crate::aqm::Aqm::parse(v).map_err(SettingsError::Aqm)?,
            _ => return Err(SettingsError::Override(kv.into())),
        }
        Ok(())
    }

    /// Resolves the queue against this direction's rate and the round trip (both delays).
    fn finish(self, rtt: Duration) -> Result<Direction, SettingsError> {
        let queue_bytes = queue_bytes(self.queue, self.rate, rtt)?;
        Ok(Direction {
            delay: self.delay,
            rate_bps: self.rate,
            queue_bytes,
            loss: self.loss,
            jitter: self.jitter,
            reorder: self.reorder,
            reorder_gap: self.reorder_gap,
            duplicate: self.duplicate,
            corrupt_payload: self.corrupt,
            aqm: self.aqm,
        })
    }
}

pub(crate) fn bernoulli(v: &str) -> Result<LossModel, SettingsError> {
    let p = Probability::parse("loss", v)?.0;
    Ok(if p == 0.0 {
        LossModel::None
    } else {
        LossModel::Bernoulli { p }
    })
}

impl Request {
    /// The settings with units read, defaults applied and the queue resolved against rate and delay.
    pub fn resolve(&self) -> Result<PathSettings, SettingsError> {
        let rtt = self
            .rtt
            .as_deref()
            .map(|s| dur("rtt", s))
            .transpose()?
            .unwrap_or_default();
        let mut loss = match &self.loss {
            Some(v) => bernoulli(v)?,
            None => LossModel::None,
        };
        if let Some(m) = &self.loss_model {
            loss = LossModel::parse(m)?;
        }
        let p = |what: &str, v: &Option<String>| -> Result<f64, SettingsError> {
            v.as_deref()
                .map(|s| Probability::parse(what, s).map(|p| p.0))
                .transpose()
                .map(|o| o.unwrap_or(0.0))
        };
        let base = || -> Result<Partial, SettingsError> {
            Ok(Partial {
                delay: rtt / 2,
                rate: self.rate.as_deref().map(rate).transpose()?.flatten(),
                queue: self.queue.as_deref().map(QueueSpec::parse).transpose()?,
                loss,
                jitter: self
                    .jitter
                    .as_deref()
                    .map(|s| dur("jitter", s))
                    .transpose()?
                    .unwrap_or_default(),
                reorder: p("reorder", &self.reorder)?,
                reorder_gap: self
                    .reorder_gap
                    .as_deref()
                    .map(|s| dur("reorder-gap", s))
                    .transpose()?
                    .unwrap_or(Duration::from_millis(1)),
                duplicate: p("duplicate", &self.duplicate)?,
                corrupt: p("corrupt-payload", &self.corrupt_payload)?,
                aqm: (self.aqm.as_deref())
                    .map(crate::aqm::Aqm::parse)
                    .transpose()
                    .map_err(SettingsError::Aqm)?
                    .unwrap_or_default(),
            })
        };
        let (mut ab, mut ba) = (base()?, base()?);
        for kv in &self.a_to_b {
            ab.apply(kv)?;
        }
        for kv in &self.b_to_a {
            ba.apply(kv)?;
        }
        let round_trip = ab.delay + ba.delay;
        let mtu = self.mtu.unwrap_or(1500);
        if !(576..=65521).contains(&mtu) {
            return Err(SettingsError::Mtu(mtu));
        }
        Ok(PathSettings {
            mtu,
            a_to_b: ab.finish(round_trip)?,
            b_to_a: ba.finish(round_trip)?,
            seed: self.seed.unwrap_or(0x4c53_5744),
            realtime: !self.no_realtime,
            ecn: self.ecn,
        })
    }
}

/// Checks an emulator name: short, because it becomes part of namespace and file names.
pub fn check_name(name: &str) -> Result<(), SettingsError> {
    let ok =
        (1..=8).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(SettingsError::Name(name.into()))
    }
}

#[cfg(test)]
mod tests;
