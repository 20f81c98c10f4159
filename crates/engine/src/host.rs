//! Host facts and counters that explain a result: the machine (OS, kernel, CPU, memory, the network
//! sysctls that cap windows), the interface the test's traffic used and its packet counters from
//! /proc/net/dev, and the interrupt count from /proc/stat (NTttcp's packets and interrupts columns).

use landspeed_core::endpoint::{HostInfo, InterfaceCounters};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Instant;

const SYSCTLS: &[&str] = &[
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/rmem_default",
    "net/core/wmem_default",
    "net/core/default_qdisc",
    "net/core/optmem_max",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/tcp_mem",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_available_congestion_control",
    "net/ipv4/tcp_window_scaling",
    "net/ipv4/tcp_timestamps",
    "net/ipv4/tcp_sack",
    "net/ipv4/tcp_mtu_probing",
    "net/ipv4/tcp_no_metrics_save",
];

/// Reads one sysctl by its /proc/sys path (`net/core/rmem_max`).
pub fn sysctl(path: &str) -> Option<String> {
    crate::os::kernel_file(format!("/proc/sys/{path}"))
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

use crate::os::uname;

fn os_pretty_name() -> Option<String> {
    let text = crate::os::kernel_file("/etc/os-release").ok()?;
    let line = text.lines().find(|l| l.starts_with("PRETTY_NAME="))?;
    Some(
        line.trim_start_matches("PRETTY_NAME=")
            .trim_matches('"')
            .to_string(),
    )
}

/// This process's memory now (peak and current resident set), from /proc/self/status.
pub fn memory() -> Option<landspeed_core::endpoint::MemoryUse> {
    let text = crate::os::kernel_file("/proc/self/status").ok()?;
    landspeed_core::endpoint::MemoryUse::from_status(&text)
}

/// Gathers the host description once per test.
pub fn host_info() -> HostInfo {
    let (hostname, sysname, release) = uname();
    let cpu_model = crate::os::kernel_file("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let memory_bytes = crate::os::kernel_file("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024);
    let sysctls: BTreeMap<String, String> = SYSCTLS
        .iter()
        .filter_map(|p| sysctl(p).map(|v| (p.replace('/', "."), v)))
        .collect();
    HostInfo {
        hostname,
        os: os_pretty_name().unwrap_or_else(|| sysname.clone()),
        kernel: format!("{sysname} {release}"),
        cpu_model,
        cpus: crate::os::cpus_online(),
        memory_bytes,
        sysctls,
        command_line: COMMAND_LINE.get().cloned().unwrap_or_default(),
        nic: None,
        withheld: false,
        aes_instructions: crate::cpu::aes_instructions(),
    }
}

/// Facts about interface `name` from /sys/class/net (and `ethtool -k` when installed).
pub fn nic_info(name: &str) -> landspeed_core::endpoint::NicInfo {
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let read = |f: &str| {
        crate::os::kernel_file(dir.join(f))
            .ok()
            .map(|s| s.trim().to_string())
    };
    landspeed_core::endpoint::NicInfo {
        name: name.to_string(),
        driver: std::fs::read_link(dir.join("device/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned())),
        speed_mbps: read("speed")
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| v as u64),
        mtu: read("mtu").and_then(|v| v.parse().ok()),
        tx_queue_len: read("tx_queue_len").and_then(|v| v.parse().ok()),
        offloads: crate::tune::offloads(name),
        qdisc: root_qdisc(name),
    }
}

/// The root qdisc of interface `name` from `tc qdisc show dev NAME` (iproute2), when tc is installed.
fn root_qdisc(name: &str) -> Option<String> {
    let out = std::process::Command::new("tc")
        .args(["qdisc", "show", "dev", name])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains(" root"))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(str::to_string)
}

/// The command line host facts report, set once by the program (which knows which of its arguments
/// are secret); until it is set, host facts carry none.
static COMMAND_LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the command line this process's host facts report (a second call changes nothing).
pub fn set_command_line(line: String) {
    let _ = COMMAND_LINE.set(line);
}

/// `arg` with the password of any URL in it (`scheme://user:PASSWORD@host`) replaced by "…".
fn without_url_password(arg: &str) -> String {
    let Some(scheme_end) = arg.find("://") else {
        return arg.to_string();
    };
    let rest = &arg[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return arg.to_string();
    };
    let Some(colon) = authority[..at].find(':') else {
        return arg.to_string();
    };
    let start = scheme_end + 3;
    format!("{}{}…{}", &arg[..start], &authority[..=colon], &arg[start + at..])
}

/// Arguments as one shell-quoted line, with the value of every argument named in `hidden` replaced
/// by "…" (a server should not tell clients where its keys live or whom else it allows), and the
/// password of any URL (`--db postgres://user:PASSWORD@host/db`) replaced too.
pub fn command_line(args: impl Iterator<Item = String>, hidden: &[&str]) -> String {
    let mut out = Vec::new();
    let mut hide_next = false;
    for a in args.map(|a| without_url_password(&a)) {
        if hide_next {
            out.push("…".to_string());
            hide_next = false;
            continue;
        }
        if let Some((flag, _)) = a.split_once('=').filter(|(f, _)| hidden.contains(f)) {
            out.push(format!("{flag}=…"));
            continue;
        }
        hide_next = hidden.contains(&a.as_str());
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@".contains(c));
        out.push(if plain {
            a
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        });
    }
    out.join(" ")
}

/// The name of the interface that holds `addr` (the local address of a test connection).
pub fn interface_for(addr: IpAddr) -> Option<String> {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    crate::os::interface_for(addr)
}

fn read_netdev(name: &str) -> Option<[u64; 16]> {
    let text = crate::os::kernel_file("/proc/net/dev").ok()?;
    for line in text.lines().skip(2) {
        let (n, rest) = line.split_once(':')?;
        if n.trim() == name {
            let v: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            let mut out = [0u64; 16];
            for (o, x) in out.iter_mut().zip(v) {
                *o = x;
            }
            return Some(out);
        }
    }
    None
}

fn interrupts_total() -> u64 {
    crate::os::kernel_file("/proc/stat")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("intr "))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|x| x.parse().ok())
        })
        .unwrap_or(0)
}

/// The kernel's protocol counters now (/proc/net/snmp, /proc/net/netstat and /proc/net/snmp6 of this
/// process's network namespace), as `Table.Name`; empty where /proc does not have them.
pub fn kernel_counters() -> std::collections::BTreeMap<String, u64> {
    let text: String = ["/proc/net/snmp", "/proc/net/netstat", "/proc/net/snmp6"]
        .iter()
        .filter_map(|f| crate::os::kernel_file(f).ok())
        .collect::<Vec<_>>()
        .join("\n");
    crate::netstat::parse(&text)
}

/// Interface and interrupt counters at one instant.
#[derive(Debug, Clone)]
pub struct NetSnapshot {
    at: Instant,
    name: String,
    dev: [u64; 16],
    intr: u64,
}

impl NetSnapshot {
    /// The interface `name`'s counters (/proc/net/dev) and the host's interrupts now; None when it has none.
    pub fn take(name: &str) -> Option<Self> {
        Some(NetSnapshot {
            at: Instant::now(),
            name: name.to_string(),
            dev: read_netdev(name)?,
            intr: interrupts_total(),
        })
    }

    /// Counters accumulated between `self` and now.
    pub fn until_now(&self) -> InterfaceCounters {
        let now = read_netdev(&self.name).unwrap_or(self.dev);
        let d = |i: usize| now[i].saturating_sub(self.dev[i]);
        // /proc/net/dev columns: rx bytes packets errs drop fifo frame compressed multicast, then tx ...
        InterfaceCounters {
            name: self.name.clone(),
            rx_bytes: d(0),
            rx_packets: d(1),
            rx_errors: d(2),
            rx_dropped: d(3),
            tx_bytes: d(8),
            tx_packets: d(9),
            tx_errors: d(10),
            tx_dropped: d(11),
            interrupts: interrupts_total().saturating_sub(self.intr),
            wall_s: self.at.elapsed().as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_lo() {
        assert_eq!(interface_for("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
        assert!(NetSnapshot::take("lo").is_some());
    }

    #[test]
    fn command_line_quotes_and_hides_secrets() {
        let args = [
            "landspeed",
            "serve",
            "--auth-keys",
            "/etc/k",
            "--allow=10.0.0.0/8",
            "--log-json",
            "a b",
        ];
        assert_eq!(
            command_line(args.iter().map(|s| s.to_string()), &["--auth-keys", "--allow"]),
            "landspeed serve --auth-keys … --allow=… --log-json 'a b'"
        );
        let db = [
            "landspeed",
            "serve",
            "--db",
            "postgres://ls:s3cret@db.example/ls?x=1",
            "--db=postgresql://u:p:q@h",
        ];
        let line = command_line(db.iter().map(|s| s.to_string()), &[]);
        assert!(!line.contains("s3cret") && !line.contains("p:q"), "{line}");
        assert!(line.contains("'postgres://ls:…@db.example/ls?x=1'"), "{line}");
        // A URL without a password, or an address with '@' but no scheme, is left as it was.
        let plain = ["http://host:80/a@b", "user@host:5201", "sqlite:///x"];
        assert_eq!(
            command_line(plain.iter().map(|s| s.to_string()), &[]),
            "http://host:80/a@b user@host:5201 sqlite:///x"
        );
    }

    #[test]
    fn host_has_basics() {
        let h = host_info();
        assert!(h.cpus >= 1);
        assert!(h.kernel.starts_with("Linux"));
        assert!(h.sysctls.contains_key("net.core.rmem_max"));
    }
}
