//! The `iperf` drop-in's multicast sender, `iperf -c GROUP -u [-T TTL] ...`: iperf 2's datagrams
//! to the group (`landspeed_net::multicast`, as `landspeed multicast send --iperf2` sends them, so
//! `iperf -s -u -B GROUP` and landspeed's receivers count them), printed as iperf 2.1.8's client
//! prints a multicast test: its UDP client's lines, and no server report (no one answers a group).
//! iperf 2's options are read as its client reads them; those a group cannot take are refused by
//! name, as iperf 2.1.8 refuses `-P` over one.

use super::iperf2::{bytes, refuse, Opts, PORT};
use super::iperf2_out as out;
use anyhow::Result;
use landspeed_net::multicast::{GroupPlan, SendPlan, SendWatch};
use landspeed_report::iperf2_multicast_text::{self as text, SentSpan};
use landspeed_report::iperf2_text::{self, Ends, Iperf2Style};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

/// iperf 2's multicast TTL without `-T`.
const TTL: u32 = 1;
/// iperf 2's UDP datagram without `-l`.
const LENGTH: u64 = 1470;

/// Whether a client's host is a multicast group (`GROUP`, `[GROUP]`, either with `%IF`).
pub(crate) fn is_group(host: &str) -> bool {
    group_of(host).is_some_and(|(ip, _)| ip.is_multicast())
}

/// The address and the interface (`%IF`) of a host as iperf 2 takes it.
fn group_of(host: &str) -> Option<(IpAddr, Option<String>)> {
    let (bare, interface) = match host.split_once('%') {
        Some((b, i)) if !i.is_empty() => (b, Some(i.to_string())),
        _ => (host, None),
    };
    let ip = bare.trim_matches(|c| c == '[' || c == ']').parse().ok()?;
    Some((ip, interface))
}

/// What a group cannot take, by name (iperf 2.1.8 refuses `-P` over one itself).
pub(crate) fn refused(o: &Opts) -> Option<String> {
    let list = [
        (
            !o.udp,
            "-c GROUP without -u",
            "multicast is UDP (iperf 2.1.8: \"Multicast requires -u option\")",
        ),
        (
            o.parallel.unwrap_or(1) > 1,
            "-c GROUP with -P",
            "one sender a group (iperf 2.1.8 refuses it too)",
        ),
        (
            o.reverse || o.full_duplex || o.tradeoff || o.dualtest,
            "-c GROUP with -R, --full-duplex, -r or -d",
            "nothing comes back from a group",
        ),
        (
            o.bounceback.is_some() || o.connect_only.is_some() || o.isochronous.is_some() || o.trip_times,
            "-c GROUP with --bounceback, --connect-only, --isochronous or --trip-times",
            "a multicast test here is a stream of datagrams",
        ),
        (
            o.window.is_some(),
            "-c GROUP with -w",
            "the sender's buffer is landspeed's",
        ),
    ];
    list.into_iter()
        .find(|(on, ..)| *on)
        .map(|(_, name, why)| format!("landspeed iperf2 does not support {name}: {why}"))
}

/// The sender's test from iperf 2's options, or why not (one line).
fn plan(o: &Opts, host: &str) -> Result<SendPlan, String> {
    let (group, mut interface) = group_of(host).ok_or_else(|| format!("{host}: not a group"))?;
    let length = match o.length.as_deref() {
        Some(l) => bytes(l).ok_or_else(|| format!("-l {l}: not a number iperf 2 reads"))?,
        None => LENGTH,
    };
    let rate_bps = match o.bandwidth.as_deref() {
        Some(b) => {
            super::iperf2::rate_bps(b, length).ok_or_else(|| format!("-b {b}: not a rate iperf 2 reads"))?
        }
        None => 1 << 20,
    };
    let bind = match o.bind.as_deref() {
        Some(b) => {
            let (ip, dev) =
                group_of(b).ok_or_else(|| format!("-B {b}: not a local address (ADDR or ADDR%DEV)"))?;
            interface = interface.or(dev);
            Some(ip)
        }
        None => None,
    };
    let count = match o.bytes.as_deref() {
        Some(n) => Some(
            bytes(n)
                .ok_or_else(|| format!("-n {n}: not a number iperf 2 reads"))?
                .div_ceil(length.max(1)),
        ),
        None => None,
    };
    let secs = o.time.unwrap_or(10.0);
    if !(secs > 0.0 && secs <= 86_400.0) {
        return Err(format!("-t {secs}: from above 0 to a day"));
    }
    Ok(SendPlan {
        to: GroupPlan {
            group: SocketAddr::new(group, o.port.unwrap_or(PORT)),
            source: None,
            interface,
        },
        bind,
        ttl: o.ttl.unwrap_or(TTL),
        loopback: true,
        rate_bps: rate_bps as f64,
        length: length as usize,
        // -n sends that much whatever -t says, as iperf 2 does.
        duration: if count.is_some() {
            Duration::from_secs(86_400)
        } else {
            Duration::from_secs_f64(secs)
        },
        count,
        iperf2: true,
        key: None,
    })
}

/// The lines as the sender goes: the connection when the socket is open, each `-i` interval as it
/// closes.
struct Lines {
    style: Iperf2Style,
    length: u64,
    group: SocketAddr,
    ends: Option<Ends>,
    started_unix_s: f64,
    /// Intervals printed, and the datagrams sent by the end of the last.
    printed: (u64, u64),
}

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl SendWatch for Lines {
    fn opened(&mut self, from: SocketAddr) {
        let ends = Ends::between(&(from, self.group));
        self.started_unix_s = unix_s();
        if !self.style.csv {
            let when = self.style.enhanced.then_some(self.started_unix_s);
            out::lines(&format!(
                "{}{}",
                iperf2_text::connected(&ends, landspeed_core::config::Direction::Forward, 1, when),
                iperf2_text::column_head_udp(&self.style, false)
            ));
        }
        self.ends = Some(ends);
    }

    fn progress(&mut self, elapsed: Duration, sent: u64) {
        let (Some(step), Some(ends)) = (self.style.interval_s, &self.ends) else {
            return;
        };
        let (k, before) = self.printed;
        let end_s = (k + 1) as f64 * step;
        if elapsed.as_secs_f64() < end_s {
            return;
        }
        let span = SentSpan {
            start_s: k as f64 * step,
            end_s,
            datagrams: sent - before,
        };
        let at = (ends, self.started_unix_s + end_s);
        out::lines(&text::interval(span, self.length, &self.style, at));
        self.printed = (k + 1, sent);
    }
}

/// `iperf -c GROUP -u ...`.
pub(crate) fn client(o: &Opts, host: &str) -> Result<bool> {
    if let Some(why) = refused(o) {
        return refuse(&why);
    }
    let plan = match plan(o, host) {
        Ok(p) => p,
        Err(why) => return refuse(&why),
    };
    let style = Iperf2Style {
        csv: o.style.is_some(),
        enhanced: o.enhanced,
        format: o.format.unwrap_or('a'),
        interval_s: o.interval.filter(|i| *i > 0.0),
    };
    if !style.csv {
        let shown = host.split('%').next().unwrap_or(host);
        let buffer = iperf2_text::TcpHead {
            window: (super::iperf2::granted_window(true, None), None),
            ..Default::default()
        };
        let head = iperf2_text::head_udp(
            shown,
            plan.to.group.port(),
            (plan.length as u64, plan.rate_bps),
            None,
            &buffer,
        );
        out::head(&head);
    }
    let mut lines = Lines {
        style,
        length: plan.length as u64,
        group: plan.to.group,
        ends: None,
        started_unix_s: 0.0,
        printed: (0, 0),
    };
    let stop = crate::common::client::interrupt_flag()?;
    let r = match landspeed_net::multicast::send_multicast_watched(&plan, &stop, &mut lines) {
        Ok(r) => r,
        Err(e) => return refuse(&e.to_string()),
    };
    let Some(ends) = &lines.ends else {
        return Ok(false);
    };
    let whole = SentSpan {
        start_s: 0.0,
        end_s: r.elapsed_s,
        datagrams: r.datagrams.saturating_sub(1),
    };
    let at = (ends, lines.started_unix_s + r.elapsed_s);
    out::lines(&text::totals(
        whole,
        r.datagrams,
        plan.length as u64,
        &lines.style,
        at,
    ));
    if let Some(e) = &r.first_error {
        errln!(
            "iperf: {} of {} datagrams were not sent: {e}",
            r.send_errors,
            r.datagrams
        );
    }
    Ok(r.send_errors == 0)
}
