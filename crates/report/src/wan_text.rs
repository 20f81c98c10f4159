//! The WAN emulator as people read it: what `landspeed wan up` brought up, and `wan status` (its
//! settings per direction and its counters), rendered from landspeed-wan's data.

use landspeed_core::units::{format_duration, BitRate, Bytes};
use landspeed_wan::aqm::Aqm;
use landspeed_wan::forward::DirSnapshot;
use landspeed_wan::settings::{Direction, LossModel};
use landspeed_wan::{PathSettings, State, Status};

/// What `wan down` says of the processes it found still running in the emulator's namespaces.
pub fn ended_text(name: &str, down: &landspeed_wan::daemon::Down) -> String {
    let list = |p: &[i32]| p.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
    let mut t = format!(
        "wan {name}: ended {} process{} left running in its namespaces (pid {})",
        down.ended.len(),
        if down.ended.len() == 1 { "" } else { "es" },
        list(&down.ended)
    );
    if !down.killed.is_empty() {
        t += &format!(
            "; {} did not exit within {} s of SIGTERM and were killed (pid {})",
            down.killed.len(),
            landspeed_wan::daemon::END_GRACE.as_secs(),
            list(&down.killed)
        );
    }
    t
}

/// What `wan up` prints: the hosts, the settings and how to use them.
pub fn up_text(state: &State) -> String {
    let h = &state.hosts;
    format!(
        "wan {}: up (forwarder pid {})\n  host a: {} / {} (namespace {})\n  host b: {} / {} (namespace {})\n{}  try: landspeed wan exec {n} b -- landspeed serve &\n       landspeed wan exec {n} a -- landspeed run {b}\n",
        state.name,
        state.pid,
        h.a.address,
        h.a.address6,
        h.a.namespace,
        h.b.address,
        h.b.address6,
        h.b.namespace,
        settings_text(&state.settings),
        n = state.name,
        b = h.b.address
    )
}

fn rate(r: Option<f64>) -> String {
    r.map_or("unlimited".into(), |b| BitRate(b).to_string())
}

fn loss(l: &LossModel) -> String {
    match *l {
        LossModel::None => "none".into(),
        LossModel::Bernoulli { p } => format!("{}% (Bernoulli)", p * 100.0),
        LossModel::Gilbert {
            p,
            r,
            loss_bad,
            loss_good,
        } => format!(
            "Gilbert-Elliott p={}% r={}% loss in bad {}%, in good {}% (mean {:.4}%)",
            p * 100.0,
            r * 100.0,
            loss_bad * 100.0,
            loss_good * 100.0,
            l.mean_loss() * 100.0
        ),
    }
}

fn direction_text(label: &str, d: &Direction) -> String {
    let mut s = format!(
        "  {label}: delay {}, rate {}, queue {}, loss {}",
        format_duration(d.delay),
        rate(d.rate_bps),
        d.queue_bytes.map_or("unlimited".into(), |q| Bytes(q).to_string()),
        loss(&d.loss)
    );
    match d.aqm {
        Aqm::Codel { target, interval } => {
            s += &format!(
                ", CoDel (target {}, interval {})",
                format_duration(target),
                format_duration(interval)
            )
        }
        Aqm::Pie { target } => s += &format!(", PIE (target {})", format_duration(target)),
        Aqm::FqCodel { target, interval } => {
            s += &format!(
                ", FQ-CoDel (target {}, interval {})",
                format_duration(target),
                format_duration(interval)
            )
        }
        Aqm::DualPi2 {
            target,
            step,
            any_ect,
        } => {
            s += &format!(
                ", DualPI2 (classic target {}, L4S step {}{})",
                format_duration(target),
                format_duration(step),
                if any_ect { ", any ECT as L4S" } else { "" }
            )
        }
        Aqm::Prio => s += ", strict priority by DSCP (EF/VA/CS5-7, then the rest, then CS1/LE)",
        Aqm::TailDrop => {}
    }
    if !d.jitter.is_zero() {
        s += &format!(", jitter ±{}", format_duration(d.jitter));
    }
    for (what, p) in [
        ("reorder", d.reorder),
        ("duplicate", d.duplicate),
        ("corrupt payload", d.corrupt_payload),
    ] {
        if p > 0.0 {
            s += &format!(", {what} {}%", p * 100.0);
        }
    }
    s + "\n"
}

fn settings_text(s: &PathSettings) -> String {
    format!(
        "  mtu {}, forwarder at {}{}\n{}{}",
        s.mtu,
        if s.realtime {
            "real-time priority"
        } else {
            "ordinary priority (nice -20, --no-realtime)"
        },
        if s.ecn {
            ", both hosts' TCP asks for ECN (--ecn)"
        } else {
            ""
        },
        direction_text("a->b", &s.a_to_b),
        direction_text("b->a", &s.b_to_a)
    )
}

fn counters_text(label: &str, c: &DirSnapshot) -> String {
    format!(
        "  {label}: {} packets / {} forwarded; dropped {} by queue, {} by loss{}{}; {} corrupted, {} duplicated, {} reordered; queue now {} (max {}){}\n",
        c.packets_forwarded,
        Bytes(c.bytes_forwarded),
        c.path.dropped_queue,
        c.path.dropped_loss,
        if c.path.dropped_outage > 0 {
            format!(", {} by outages", c.path.dropped_outage)
        } else {
            String::new()
        },
        aqm_text(c),
        c.corrupted,
        c.path.duplicated,
        c.path.reordered,
        Bytes(c.queue_bytes),
        Bytes(c.queue_max_bytes),
        sojourn_text(c)
    ) + &trains_text(label, c)
}

/// How many GSO trains the sending host handed over and the forwarder handed on (TUN offloads).
fn trains_text(label: &str, c: &DirSnapshot) -> String {
    if c.trains_in == 0 && c.trains_refused == 0 {
        return String::new();
    }
    let refused = match c.trains_refused {
        0 => String::new(),
        n => format!("; {n} refused (unreadable, dropped)"),
    };
    format!(
        "  {label}: {} GSO trains in, cut into wire packets for the model; {} frames of several packets out{refused}\n",
        c.trains_in, c.trains_out
    )
}

/// The queue discipline's signals (CoDel's or PIE's), when it made any.
fn aqm_text(c: &DirSnapshot) -> String {
    match (c.path.dropped_aqm, c.path.marked_ce) {
        (0, 0) => String::new(),
        (d, m) => format!(", {d} by the queue discipline, which marked {m} others CE instead"),
    }
}

/// The bottleneck's queueing delay (arrival to serialization), mean and longest.
fn sojourn_text(c: &DirSnapshot) -> String {
    if c.path.sojourn_packets == 0 {
        return String::new();
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    let probes = match c.path.probe_packets {
        0 => String::new(),
        n => format!(
            " (landspeed's echo probes: {n}, mean {:.3} ms)",
            ms(c.probe_sojourn_sum_ns / n)
        ),
    };
    format!(
        "; queueing delay mean {:.2} ms, max {:.2} ms{probes}",
        ms(c.sojourn_sum_ns / c.path.sojourn_packets),
        ms(c.sojourn_max_ns)
    )
}

/// How late one direction's packets left against the delay they were given.
fn lateness_text(label: &str, c: &DirSnapshot, realtime_asked: bool) -> String {
    let l = &c.departure_lateness;
    if l.packets == 0 {
        return String::new();
    }
    let ms = |us: f64| {
        if us < 1_000.0 {
            format!("{us:.0}µs")
        } else {
            format!("{:.2}ms", us / 1e3)
        }
    };
    let mut t = format!(
        "  {label} on time: left late by p50 {}, p99 {}, p99.9 {}, max {} ({} packets)",
        ms(l.p50_us),
        ms(l.p99_us),
        ms(l.p999_us),
        ms(l.max_us),
        l.packets
    );
    if realtime_asked && !c.realtime {
        t += "; not real-time (the kernel refused SCHED_FIFO: run as root or with CAP_SYS_NICE)";
    }
    if l.p99_us > LATE_US {
        t += "; LATE: the forwarder is short of CPU or at its capacity, so the path's delay is not \
              the setting (give it a core, or set --rate below what it forwards)";
    }
    t + "\n"
}

/// A p99 lateness above which `wan status` says the delay is not what was set.
const LATE_US: f64 = 500.0;

/// One applied change: when (on the emulator's clock and the wall clock), what, which way, from where.
pub fn applied_text(name: &str, a: &landspeed_wan::change::Applied) -> String {
    let way = match a.direction {
        landspeed_wan::change::Which::Both => "both directions".to_string(),
        w => w.name().to_string(),
    };
    let back = a
        .down_until_s
        .map(|u| format!(", down until {u:.3} s"))
        .unwrap_or_default();
    format!(
        "wan {name}: {} at {:.3} s ({}), {way}{back}; {}",
        a.change,
        a.at_s,
        landspeed_core::result::format_utc(a.unix_s),
        a.source
    )
}

fn changes_text(st: &Status) -> String {
    if st.changes.is_empty() {
        return String::new();
    }
    let mut t = format!("  changes ({}):\n", st.changes.len());
    for a in st.changes.iter().rev().take(10).rev() {
        let back = a
            .down_until_s
            .map(|u| format!(" (down until {u:.3} s)"))
            .unwrap_or_default();
        t += &format!(
            "    {:>10.3} s  {}{back}  [{}; {}]\n",
            a.at_s,
            a.change,
            a.direction.name(),
            a.source
        );
    }
    if st.changes.len() > 10 {
        t += "    (the last 10; `wan status --json` has all)\n";
    }
    t
}

/// One emulator's status: running or not, its hosts, settings and counters.
pub fn status_text(st: &Status) -> String {
    let state = if st.running {
        format!("running {:.0} s (pid {})", st.uptime_s, st.pid)
    } else {
        format!(
            "NOT RUNNING (forwarder pid {} is gone; `landspeed wan down {}` cleans up)",
            st.pid, st.name
        )
    };
    format!(
        "wan {}: {state}\n  host a: {} / {} ({})\n  host b: {} / {} ({})\n{}{}{}{}{}{}",
        st.name,
        st.hosts.a.address,
        st.hosts.a.address6,
        st.hosts.a.namespace,
        st.hosts.b.address,
        st.hosts.b.address6,
        st.hosts.b.namespace,
        settings_text(&st.settings),
        counters_text("a->b", &st.a_to_b),
        counters_text("b->a", &st.b_to_a),
        lateness_text("a->b", &st.a_to_b, st.settings.realtime),
        lateness_text("b->a", &st.b_to_a, st.settings.realtime),
        changes_text(st)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_wan::{Host, Hosts, Request};

    fn status(running: bool) -> Status {
        let req = Request {
            rtt: Some("100ms".into()),
            rate: Some("1G".into()),
            loss: Some("0.1%".into()),
            ..Request::default()
        };
        let host = |n: &str, a: &str| Host {
            namespace: format!("lfn-{n}"),
            device: format!("lfn{n}"),
            address: a.into(),
            address6: "fd00::1".into(),
        };
        Status {
            name: "lfn".into(),
            running,
            pid: 4242,
            uptime_s: 12.0,
            settings: req.resolve().expect("valid settings"),
            hosts: Hosts {
                a: host("a", "198.18.0.1"),
                b: host("b", "198.18.0.2"),
            },
            a_to_b: DirSnapshot {
                packets_forwarded: 10,
                path: landspeed_core::emulator::PathCounts {
                    dropped_loss: 1,
                    ..Default::default()
                },
                departure_lateness: landspeed_wan::timing::LatenessSnapshot {
                    packets: 10,
                    p50_us: 10.0,
                    p99_us: 120.0,
                    p999_us: 120.0,
                    max_us: 117.5,
                    ..Default::default()
                },
                realtime: true,
                trains_in: 3,
                trains_out: 2,
                ..DirSnapshot::default()
            },
            b_to_a: DirSnapshot::default(),
            changes: Vec::new(),
        }
    }

    #[test]
    fn status_shows_each_direction_its_settings_and_counters() {
        let t = status_text(&status(true));
        assert!(t.starts_with("wan lfn: running 12 s (pid 4242)\n"), "{t}");
        assert!(t.contains("  a->b: delay 50ms, rate 1.00 Gbit/s"), "{t}");
        assert!(t.contains("loss 0.1% (Bernoulli)"), "{t}");
        assert!(
            t.contains("  a->b: 10 packets / 0 B forwarded; dropped 0 by queue, 1 by loss"),
            "{t}"
        );
        assert!(
            t.contains("  a->b on time: left late by p50 10µs, p99 120µs"),
            "{t}"
        );
        assert!(!t.contains("b->a on time"), "no packets, no line: {t}");
        assert!(
            t.contains("  a->b: 3 GSO trains in, cut into wire packets for the model; 2 frames"),
            "{t}"
        );
        assert!(!t.contains("b->a: 0 GSO"), "no trains, no line: {t}");
        assert!(t.contains("  mtu 1500, forwarder at real-time priority\n"), "{t}");
        assert!(!t.contains("LATE") && !t.contains("not real-time"), "{t}");
    }

    #[test]
    fn a_late_or_ordinary_forwarder_is_named() {
        let mut st = status(true);
        st.a_to_b.realtime = false;
        st.a_to_b.departure_lateness.p99_us = 44_000.0;
        let t = status_text(&st);
        assert!(t.contains("p99 44.00ms"), "{t}");
        assert!(t.contains("not real-time (the kernel refused SCHED_FIFO"), "{t}");
        assert!(t.contains("LATE: the forwarder is short of CPU"), "{t}");
    }

    #[test]
    fn changes_and_outage_drops_are_listed() {
        use landspeed_wan::change::{Applied, Which};
        let mut st = status(true);
        st.a_to_b.path.dropped_outage = 7;
        let a = Applied {
            at_s: 5.0,
            unix_s: 1_700_000_000.0,
            change: "down=3s".into(),
            direction: Which::Both,
            down_until_s: Some(8.0),
            source: "schedule line 2".into(),
        };
        st.changes = vec![a.clone()];
        let t = status_text(&st);
        assert!(t.contains("1 by loss, 7 by outages;"), "{t}");
        assert!(
            t.contains(
                "  changes (1):\n         5.000 s  down=3s (down until 8.000 s)  [both; schedule line 2]\n"
            ),
            "{t}"
        );
        assert_eq!(
            applied_text("lfn", &a),
            "wan lfn: down=3s at 5.000 s (2023-11-14T22:13:20Z), both directions, down until 8.000 s; schedule line 2"
        );
    }

    #[test]
    fn a_dead_forwarder_says_how_to_clean_up() {
        let t = status_text(&status(false));
        assert!(
            t.contains("NOT RUNNING (forwarder pid 4242 is gone; `landspeed wan down lfn` cleans up)"),
            "{t}"
        );
    }
}
