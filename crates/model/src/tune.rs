//! The host tuning advisor's reasoning, without reading anything: given the limits a host reports (its
//! sysctls, the route's interface) and a target rate and RTT, the window each stream needs, every limit
//! that keeps the window below it, and the sysctl lines that would lift them, following the ESnet
//! fasterdata tiers (64 MiB / 32 MiB up to 10 Gbit/s at 100 ms, then 256/128 MiB, 512/256 MiB, and
//! 2 GiB / 1 GiB for 100G). Linux keeps about half of a socket buffer for overhead, so a window of W
//! needs a buffer of 2 W.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a host reports (each None when it could not be read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostLimits {
    /// `net.core.rmem_max` etc. by sysctl name, as read.
    pub sysctls: BTreeMap<String, String>,
    /// The interface of the default route, its MTU and transmit queue length.
    pub interface: Option<String>,
    /// The interface's MTU.
    pub mtu: Option<u32>,
    /// The interface's transmit queue length.
    pub tx_queue_len: Option<u32>,
    /// Offload features by name (`tx-tcp-segmentation: on`), when known.
    pub offloads: BTreeMap<String, bool>,
}

/// The sysctls the advisor reads.
pub const SYSCTLS: [&str; 13] = [
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.core.default_qdisc",
    "net.ipv4.tcp_mtu_probing",
];

/// The target the host is tuned for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The rate, bit/s.
    pub rate_bps: f64,
    /// The path's round-trip time, seconds.
    pub rtt_s: f64,
    /// Streams the transfer will use.
    pub streams: u32,
}

/// How much a setting matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Keeps the window below what the target needs.
    Limit,
    /// Worth changing (pacing, jumbo frames, ...), does not cap the window by itself.
    Advice,
    /// Nothing to change.
    Ok,
}

/// One setting judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The setting's name (a sysctl, or the interface's MTU, queue or an offload).
    pub setting: String,
    /// Its value now.
    pub current: String,
    /// What the target needs.
    pub wanted: String,
    /// How much it matters.
    pub severity: Severity,
    /// Why it matters.
    pub why: String,
}

/// What `landspeed tune` found: the window the target needs, what the host allows, and what to change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// The target, when one was given.
    pub target: Option<Target>,
    /// The target's bandwidth-delay product, bytes.
    pub bdp_bytes: Option<f64>,
    /// Window each stream needs: BDP / streams.
    pub window_per_stream_bytes: Option<f64>,
    /// The socket buffer that gives it: 2 × the window.
    pub buffer_per_stream_bytes: Option<f64>,
    /// The largest window a stream can reach now (auto-tuning's receive maximum / 2), and the rate that
    /// allows over the target's RTT with its streams.
    pub max_window_now_bytes: Option<f64>,
    /// The rate those windows allow over the target's RTT with its streams, bit/s.
    pub max_rate_now_bps: Option<f64>,
    /// Every setting judged.
    pub findings: Vec<Finding>,
    /// `name = value` lines that fix every Limit and Advice finding.
    pub sysctl_lines: Vec<String>,
}

/// (rmem_max / wmem_max, tcp_rmem / tcp_wmem maximum), smallest first.
pub const TIERS: [(u64, u64); 4] = [
    (67_108_864, 33_554_432),
    (268_435_456, 134_217_728),
    (536_870_912, 268_435_456),
    (2_147_483_647, 1_073_741_824),
];

fn int(h: &HostLimits, k: &str) -> Option<u64> {
    h.sysctls.get(k)?.trim().parse().ok()
}

/// The third field of tcp_rmem / tcp_wmem (auto-tuning's maximum).
fn triple_max(h: &HostLimits, k: &str) -> Option<u64> {
    h.sysctls.get(k)?.split_whitespace().nth(2)?.parse().ok()
}

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / 1048576.0)
}

/// The tier whose TCP maximum holds `buffer` (the largest if none does).
pub fn tier_for(buffer: f64) -> (u64, u64) {
    *TIERS.iter().find(|t| t.1 as f64 >= buffer).unwrap_or(&TIERS[3])
}

/// The host's limits judged against a target (or alone): each setting's finding, the sysctl lines
/// that lift the limits, and the window and rate the host allows now.
pub fn advise(h: &HostLimits, target: Option<&Target>) -> Advice {
    let bdp = target.map(|t| t.rate_bps * t.rtt_s / 8.0);
    let per_stream = target.zip(bdp).map(|(t, b)| b / f64::from(t.streams.max(1)));
    let buffer = per_stream.map(|w| 2.0 * w);
    let mut c = Checks {
        buffer,
        findings: Vec::new(),
        lines: Vec::new(),
    };
    c.buffers(h);
    let ws_bad = c.window_scaling(h);
    c.tcp_options(h);
    c.congestion(h);
    c.qdisc(h);
    c.mtu_probing(h);
    c.interface(h, target);
    let max_window = if ws_bad { Some(65_535.0) } else { max_window(h) };
    Advice {
        target: target.cloned(),
        bdp_bytes: bdp,
        window_per_stream_bytes: per_stream,
        buffer_per_stream_bytes: buffer,
        max_window_now_bytes: max_window,
        max_rate_now_bps: target
            .zip(max_window)
            .map(|(t, w)| f64::from(t.streams.max(1)) * w * 8.0 / t.rtt_s),
        findings: c.findings,
        sysctl_lines: c.lines,
    }
}

/// The largest window auto-tuning allows now: half the smaller of the receive and send maxima.
fn max_window(h: &HostLimits) -> Option<f64> {
    match (
        triple_max(h, "net.ipv4.tcp_rmem"),
        triple_max(h, "net.ipv4.tcp_wmem"),
    ) {
        (Some(r), Some(w)) => Some(r.min(w) as f64 / 2.0),
        (Some(x), None) | (None, Some(x)) => Some(x as f64 / 2.0),
        _ => None,
    }
}

/// The findings and sysctl lines as they are gathered; `buffer` is the socket buffer each stream
/// needs (None without a target).
struct Checks {
    buffer: Option<f64>,
    findings: Vec<Finding>,
    lines: Vec<String>,
}

impl Checks {
    fn find(&mut self, setting: String, current: String, wanted: String, severity: Severity, why: &str) {
        self.findings.push(Finding {
            setting,
            current,
            wanted,
            severity,
            why: why.into(),
        });
    }

    fn wanted_buffer(&self, prefix: &str) -> String {
        self.buffer.map_or_else(
            || "(given the path's rate and RTT)".into(),
            |b| format!("{prefix}{}", mib(b)),
        )
    }

    /// The auto-tuning maxima (tcp_rmem, tcp_wmem) and the largest buffers a program may ask for.
    fn buffers(&mut self, h: &HostLimits) {
        let need = self.buffer.unwrap_or(0.0);
        let (tier_core, tier_tcp) = tier_for(need);
        for (name, low, why) in [
            ("net.ipv4.tcp_rmem", "4096 87380", "receive auto-tuning grows each socket's buffer up to this maximum; the window is about half of it"),
            ("net.ipv4.tcp_wmem", "4096 65536", "send auto-tuning's maximum: the data a sender can keep in flight is about half of it"),
        ] {
            let cur = h.sysctls.get(name);
            let max = cur.and_then(|v| v.split_whitespace().nth(2)?.parse::<u64>().ok());
            let bad = self.buffer.is_some() && max.is_none_or(|m| (m as f64) < need);
            let current = cur.cloned().unwrap_or_else(|| "unknown".into());
            let wanted = self.wanted_buffer("maximum ≥ ");
            self.find(name.into(), current, wanted, limit_if(bad), why);
            if bad {
                self.lines.push(format!("{name} = {low} {tier_tcp}"));
            }
        }
        for (k, why) in [
            (
                "net.core.rmem_max",
                "the largest receive buffer a program may ask for (-w): requests above it are cut silently",
            ),
            (
                "net.core.wmem_max",
                "the largest send buffer a program may ask for (-w): requests above it are cut silently",
            ),
        ] {
            let cur = int(h, k);
            let bad = self.buffer.is_some() && cur.is_none_or(|c| (c as f64) < need);
            let current = cur.map_or("unknown".into(), |c| c.to_string());
            let wanted = self.wanted_buffer("≥ ");
            self.find(k.into(), current, wanted, limit_if(bad), why);
            if bad {
                self.lines.push(format!("{k} = {tier_core}"));
            }
        }
    }

    /// Window scaling; true when it is off (no window exceeds 64 KiB then).
    fn window_scaling(&mut self, h: &HostLimits) -> bool {
        let scaling = int(h, "net.ipv4.tcp_window_scaling");
        let bad = scaling == Some(0);
        let current = scaling.map_or("unknown".into(), |v| v.to_string());
        let why = "without window scaling no window exceeds 64 KiB";
        self.find(
            "net.ipv4.tcp_window_scaling".into(),
            current,
            "1".into(),
            limit_if(bad),
            why,
        );
        if bad {
            self.lines.push("net.ipv4.tcp_window_scaling = 1".into());
        }
        bad
    }

    /// Timestamps and SACK.
    fn tcp_options(&mut self, h: &HostLimits) {
        for (k, why) in [
            (
                "net.ipv4.tcp_timestamps",
                "RTT measurement and protection against wrapped sequence numbers at high rates",
            ),
            (
                "net.ipv4.tcp_sack",
                "selective acknowledgements: recovery from several losses in one window without a timeout",
            ),
        ] {
            let v = int(h, k);
            let bad = v == Some(0);
            let current = v.map_or("unknown".into(), |v| v.to_string());
            self.find(k.into(), current, "1".into(), advice_if(bad), why);
            if bad {
                self.lines.push(format!("{k} = 1"));
            }
        }
    }

    /// The congestion control: BBR where it is loaded, else cubic or htcp.
    fn congestion(&mut self, h: &HostLimits) {
        let cc = h.sysctls.get("net.ipv4.tcp_congestion_control").cloned();
        let avail = h
            .sysctls
            .get("net.ipv4.tcp_available_congestion_control")
            .cloned()
            .unwrap_or_default();
        let bbr = avail.split_whitespace().any(|a| a == "bbr");
        let ok =
            matches!(cc.as_deref(), Some("bbr") | Some("htcp")) || (!bbr && cc.as_deref() == Some("cubic"));
        let current = format!("{} (available: {avail})", cc.as_deref().unwrap_or("unknown"));
        let wanted = if bbr {
            "bbr".into()
        } else {
            "cubic or htcp (bbr is not loaded: modprobe tcp_bbr)".into()
        };
        let why = "BBR (with fq pacing) keeps long fat paths full where loss-based algorithms back off";
        self.find(
            "net.ipv4.tcp_congestion_control".into(),
            current,
            wanted,
            advice_if(!ok),
            why,
        );
        if !ok && bbr {
            self.lines.push("net.ipv4.tcp_congestion_control = bbr".into());
        }
    }

    /// The default queueing discipline: fq paces each flow.
    fn qdisc(&mut self, h: &HostLimits) {
        let q = h.sysctls.get("net.core.default_qdisc").cloned();
        let ok = q.as_deref() == Some("fq");
        let current = q.unwrap_or_else(|| "unknown".into());
        let why = "fq paces each flow (BBR needs pacing; it also spreads bursts that overrun switch buffers)";
        self.find(
            "net.core.default_qdisc".into(),
            current,
            "fq".into(),
            advice_if(!ok),
            why,
        );
        if !ok {
            self.lines.push("net.core.default_qdisc = fq".into());
        }
    }

    /// MTU probing, which matters with jumbo frames.
    fn mtu_probing(&mut self, h: &HostLimits) {
        let probing = int(h, "net.ipv4.tcp_mtu_probing");
        let jumbo = h.mtu.is_some_and(|m| m > 1500);
        let bad = jumbo && probing == Some(0);
        let current = probing.map_or("unknown".into(), |v| v.to_string());
        let wanted = if jumbo { "1" } else { "1 with jumbo frames" };
        let why = "with jumbo frames, probing finds a smaller path MTU instead of stalling on a black hole";
        self.find(
            "net.ipv4.tcp_mtu_probing".into(),
            current,
            wanted.into(),
            advice_if(bad),
            why,
        );
        if bad {
            self.lines.push("net.ipv4.tcp_mtu_probing = 1".into());
        }
    }

    /// The interface: its MTU, its transmit queue for the target's rate, its offloads.
    fn interface(&mut self, h: &HostLimits, target: Option<&Target>) {
        let iface = h.interface.as_deref().unwrap_or("interface");
        if let Some(m) = h.mtu {
            let why =
                "jumbo frames cut per-packet work six-fold and recover from loss six times faster (Mathis)";
            let wanted = "9000 where the whole path carries it".into();
            self.find(
                format!("{iface} MTU"),
                m.to_string(),
                wanted,
                advice_if(m < 9000),
                why,
            );
        }
        if let (Some(q), Some(t)) = (h.tx_queue_len, target) {
            let want = if t.rate_bps >= 1e10 { 10_000 } else { 1000 };
            let wanted = format!("≥ {want} (ip link set dev IFACE txqueuelen {want})");
            let why = "a short transmit queue drops bursts at the sender itself at 10 Gbit/s and more";
            self.find(
                format!("{iface} txqueuelen"),
                q.to_string(),
                wanted,
                advice_if(q < want),
                why,
            );
        }
        for (name, on) in &h.offloads {
            if !on {
                let why = "segmentation and receive offloads save most of the per-packet CPU cost";
                self.find(
                    format!("offload {name}"),
                    "off".into(),
                    "on".into(),
                    Severity::Advice,
                    why,
                );
            }
        }
    }
}

fn limit_if(bad: bool) -> Severity {
    if bad {
        Severity::Limit
    } else {
        Severity::Ok
    }
}

fn advice_if(bad: bool) -> Severity {
    if bad {
        Severity::Advice
    } else {
        Severity::Ok
    }
}

/// A sysctl.d file with the lines (and why).
pub fn sysctl_file(a: &Advice) -> String {
    let mut s = String::from("# Written by landspeed tune");
    if let Some(t) = &a.target {
        s.push_str(&format!(
            " for {:.3} Gbit/s over {:.1} ms with {} stream(s)",
            t.rate_bps / 1e9,
            t.rtt_s * 1e3,
            t.streams
        ));
    }
    s.push_str(".\n# Load with: sysctl --system (or sysctl -p FILE)\n");
    for l in &a.sysctl_lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(pairs: &[(&str, &str)]) -> HostLimits {
        HostLimits {
            sysctls: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            interface: Some("eth0".into()),
            mtu: Some(1500),
            tx_queue_len: Some(1000),
            offloads: BTreeMap::new(),
        }
    }

    const STOCK: [(&str, &str); 11] = [
        ("net.core.rmem_max", "212992"),
        ("net.core.wmem_max", "212992"),
        ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
        ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
        ("net.ipv4.tcp_window_scaling", "1"),
        ("net.ipv4.tcp_timestamps", "1"),
        ("net.ipv4.tcp_sack", "1"),
        ("net.ipv4.tcp_congestion_control", "cubic"),
        ("net.ipv4.tcp_available_congestion_control", "reno cubic"),
        ("net.core.default_qdisc", "pfifo_fast"),
        ("net.ipv4.tcp_mtu_probing", "0"),
    ];

    #[test]
    fn a_stock_host_cannot_fill_10g_at_100ms() {
        let t = Target {
            rate_bps: 1e10,
            rtt_s: 0.1,
            streams: 1,
        };
        let a = advise(&host(&STOCK), Some(&t));
        assert_eq!(a.bdp_bytes, Some(125e6));
        assert_eq!(a.buffer_per_stream_bytes, Some(250e6));
        // tcp_wmem's 4 MiB maximum: a 2 MiB window → 167.8 Mbit/s over 100 ms.
        assert_eq!(a.max_window_now_bytes, Some(2_097_152.0));
        assert!((a.max_rate_now_bps.unwrap() - 167_772_160.0).abs() < 1.0);
        let limits: Vec<&str> = a
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Limit)
            .map(|f| f.setting.as_str())
            .collect();
        assert_eq!(
            limits,
            [
                "net.ipv4.tcp_rmem",
                "net.ipv4.tcp_wmem",
                "net.core.rmem_max",
                "net.core.wmem_max"
            ]
        );
        // 250 MB per stream needs the 512 MiB / 256 MiB tier.
        assert_eq!(
            a.sysctl_lines,
            [
                "net.ipv4.tcp_rmem = 4096 87380 268435456",
                "net.ipv4.tcp_wmem = 4096 65536 268435456",
                "net.core.rmem_max = 536870912",
                "net.core.wmem_max = 536870912",
                "net.core.default_qdisc = fq",
            ]
        );
        // Eight streams need 31.25 MB each: the first tier.
        let a = advise(&host(&STOCK), Some(&Target { streams: 8, ..t }));
        assert!(a
            .sysctl_lines
            .contains(&"net.core.rmem_max = 67108864".to_string()));
        assert!(a
            .sysctl_lines
            .contains(&"net.ipv4.tcp_rmem = 4096 87380 33554432".to_string()));
    }

    #[test]
    fn a_tuned_host_passes_and_bbr_is_preferred_when_loaded() {
        let mut tuned = host(&STOCK);
        for (k, v) in [
            ("net.core.rmem_max", "67108864"),
            ("net.core.wmem_max", "67108864"),
            ("net.ipv4.tcp_rmem", "4096 87380 33554432"),
            ("net.ipv4.tcp_wmem", "4096 65536 33554432"),
            ("net.core.default_qdisc", "fq"),
            ("net.ipv4.tcp_available_congestion_control", "reno cubic bbr"),
            ("net.ipv4.tcp_congestion_control", "bbr"),
        ] {
            tuned.sysctls.insert(k.into(), v.into());
        }
        let t = Target {
            rate_bps: 1e10,
            rtt_s: 0.1,
            streams: 8,
        };
        let a = advise(&tuned, Some(&t));
        assert!(a.sysctl_lines.is_empty(), "{:?}", a.sysctl_lines);
        assert!(a.findings.iter().all(|f| f.severity != Severity::Limit));
        tuned
            .sysctls
            .insert("net.ipv4.tcp_congestion_control".into(), "cubic".into());
        assert_eq!(
            advise(&tuned, Some(&t)).sysctl_lines,
            ["net.ipv4.tcp_congestion_control = bbr"]
        );
    }

    #[test]
    fn window_scaling_off_caps_everything_and_jumbo_wants_probing() {
        let mut h = host(&STOCK);
        h.sysctls.insert("net.ipv4.tcp_window_scaling".into(), "0".into());
        h.mtu = Some(9000);
        let t = Target {
            rate_bps: 1e9,
            rtt_s: 0.05,
            streams: 1,
        };
        let a = advise(&h, Some(&t));
        assert_eq!(a.max_window_now_bytes, Some(65_535.0));
        assert!(a
            .sysctl_lines
            .contains(&"net.ipv4.tcp_window_scaling = 1".to_string()));
        assert!(a
            .sysctl_lines
            .contains(&"net.ipv4.tcp_mtu_probing = 1".to_string()));
        // Without a target nothing is a window limit, but the advice stands.
        let a = advise(&host(&STOCK), None);
        assert!(a.findings.iter().all(|f| f.severity != Severity::Limit));
        assert_eq!(a.sysctl_lines, ["net.core.default_qdisc = fq"]);
        assert!(sysctl_file(&a).contains("net.core.default_qdisc = fq\n"));
    }
}
