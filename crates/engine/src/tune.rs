//! Reading (and, when asked, writing) the limits the tuning advisor reasons about, under a root
//! directory so tests can hand it a fake `/proc/sys` and `/sys/class/net` tree: the sysctls, the
//! default route's interface with its MTU and transmit queue length, and its offloads (from
//! `ethtool -k` when that tool is installed and the root is `/`).

use landspeed_model::tune::{HostLimits, SYSCTLS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why sysctl lines could not be written or applied.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A line that is not `name = value`.
    #[error("'{0}' is not a sysctl line (name = value)")]
    Line(String),
    /// A file could not be written.
    #[error("cannot write {path}: {err}")]
    Write {
        /// The file.
        path: String,
        /// Why not.
        err: std::io::Error,
    },
}

fn sysctl_path(root: &Path, name: &str) -> PathBuf {
    root.join("proc/sys").join(name.replace('.', "/"))
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The interface of the IPv4 default route (`/proc/net/route`, destination 00000000), else None.
fn default_interface(root: &Path) -> Option<String> {
    let t = std::fs::read_to_string(root.join("proc/net/route")).ok()?;
    t.lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[1] == "00000000")
        .map(|f| f[0].to_string())
}

/// `ethtool -k IFACE` as feature → on, for the offloads that matter to bulk transfers.
pub fn offloads(iface: &str) -> BTreeMap<String, bool> {
    const WANTED: [&str; 5] = [
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
        "rx-checksumming",
        "tx-checksumming",
    ];
    let Ok(out) = std::process::Command::new("ethtool")
        .arg("-k")
        .arg(iface)
        .output()
    else {
        return BTreeMap::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let k = k.trim();
            WANTED
                .contains(&k)
                .then(|| (k.to_string(), v.trim().starts_with("on")))
        })
        .collect()
}

/// What the host under `root` reports.
pub fn read_host(root: &Path) -> HostLimits {
    let sysctls = SYSCTLS
        .iter()
        .filter_map(|k| read_trim(&sysctl_path(root, k)).map(|v| (k.to_string(), v)))
        .collect();
    let interface = default_interface(root);
    let class = |f: &str| {
        interface
            .as_ref()
            .and_then(|i| read_trim(&root.join("sys/class/net").join(i).join(f)))
            .and_then(|v| v.parse().ok())
    };
    HostLimits {
        sysctls,
        mtu: class("mtu"),
        tx_queue_len: class("tx_queue_len"),
        offloads: match &interface {
            Some(i) if root == Path::new("/") => offloads(i),
            _ => BTreeMap::new(),
        },
        interface,
    }
}

/// Writes `name = value` lines into the sysctl files under `root` (as `sysctl -w` would).
pub fn apply(root: &Path, lines: &[String]) -> Result<(), TuneError> {
    for l in lines {
        let (k, v) = l.split_once('=').ok_or_else(|| TuneError::Line(l.clone()))?;
        let k = k.trim();
        if k.is_empty() || k.contains('/') || k.contains("..") {
            return Err(TuneError::Line(l.clone()));
        }
        let p = sysctl_path(root, k);
        std::fs::write(&p, format!("{}\n", v.trim())).map_err(|err| TuneError::Write {
            path: p.display().to_string(),
            err,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_fake_tree_and_writes_it_back() {
        let root = std::env::temp_dir().join(format!("landspeed-tune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let put = |rel: &str, v: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        };
        put("proc/sys/net/core/rmem_max", "212992\n");
        put("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n");
        put(
            "proc/net/route",
            "Iface\tDestination\tGateway\nlo\t0000007F\t00000000\neth7\t00000000\t0102A8C0\n",
        );
        put("sys/class/net/eth7/mtu", "9000\n");
        put("sys/class/net/eth7/tx_queue_len", "1000\n");
        let h = read_host(&root);
        assert_eq!(h.sysctls["net.core.rmem_max"], "212992");
        assert_eq!(h.sysctls["net.ipv4.tcp_rmem"], "4096 131072 6291456");
        assert!(!h.sysctls.contains_key("net.core.wmem_max"));
        assert_eq!(h.interface.as_deref(), Some("eth7"));
        assert_eq!((h.mtu, h.tx_queue_len), (Some(9000), Some(1000)));
        apply(&root, &["net.core.rmem_max = 67108864".into()]).unwrap();
        assert_eq!(read_host(&root).sysctls["net.core.rmem_max"], "67108864");
        assert!(apply(&root, &["net/../../etc = 1".into()]).is_err());
        assert!(apply(&root, &["no equals".into()]).is_err());
        let _ = std::fs::remove_dir_all(&root);
    }
}
