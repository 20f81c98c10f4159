//! `landspeed model` and `landspeed tune` end to end: the bounds and the binding one as text and JSON;
//! a stored loopback run modelled with its RFC 6349 figures; the advisor against fake /proc/sys trees of
//! an under-tuned and a well-tuned host, writing a sysctl.d file and applying it to the fake tree.

use crate::common;

use common::{landspeed, ServerProc};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn model_names_each_bound_and_the_one_that_binds() {
    let o = landspeed(
        &[
            "model",
            "--rate",
            "1G",
            "--rtt",
            "100ms",
            "--loss",
            "0.001%",
            "--window",
            "4M",
            "--streams",
            "4",
            "--json",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let p = &json(&o.stdout)["prediction"];
    assert_eq!(p["binding"], "pftk");
    let names: Vec<&str> = p["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["window", "mathis", "pftk", "link"]);
    // window: 4 × 4 MiB × 8 / 0.1 s.
    assert_eq!(
        p["bounds"][0]["total_bps"].as_f64().unwrap(),
        4.0 * 4194304.0 * 8.0 / 0.1
    );
    let o = landspeed(
        &["model", "--rate", "10G", "--rtt", "100ms"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("link") && o.stdout.contains("← binds"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("bandwidth-delay product"), "{}", o.stdout);
    for bad in [
        &["model", "--rate", "1G"][..],
        &["model", "--rtt", "10ms", "--loss", "2"][..],
    ] {
        let o = landspeed(bad, Duration::from_secs(10));
        assert_eq!(o.code, 2, "{bad:?}: {}", o.stderr);
    }
}

#[test]
fn model_of_a_stored_run_has_rfc6349_figures() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let dir = std::env::temp_dir().join(format!("landspeed-cli-model-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = dir.join("a.db").display().to_string();
    let p = s.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-n", "20M", "--db", &db],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = landspeed(
        &["model", "--run", "1", "--rate", "100G", "--db", &db, "--json"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v = json(&o.stdout);
    let t = &v["rfc6349"];
    assert!(t["ideal_transfer_time_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(t["transfer_time_ratio"].as_f64().unwrap() > 0.0, "{v}");
    assert!(t["tcp_efficiency_pct"].as_f64().unwrap() <= 100.0, "{v}");
    assert!(v["measured_bps"].as_f64().unwrap() > 0.0);
    assert!(v["prediction"]["input"]["rtt_s"].as_f64().unwrap() > 0.0);
    let o = landspeed(&["model", "--run", "1", "--db", &db], Duration::from_secs(10));
    assert!(
        o.stdout.contains("RFC 6349") && o.stdout.contains("measured"),
        "{}",
        o.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fake root with /proc/sys values, a default route on eth0 and its /sys/class/net entries.
fn fake_host(name: &str, sysctls: &[(&str, &str)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("landspeed-cli-tune-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let put = |rel: &str, v: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{v}\n")).unwrap();
    };
    for (k, v) in sysctls {
        put(&format!("proc/sys/{}", k.replace('.', "/")), v);
    }
    put(
        "proc/net/route",
        "Iface\tDestination\tGateway\neth0\t00000000\t0100000A",
    );
    put("sys/class/net/eth0/mtu", "1500");
    put("sys/class/net/eth0/tx_queue_len", "1000");
    root
}

const STOCK: [(&str, &str); 11] = [
    ("net.core.rmem_max", "212992"),
    ("net.core.wmem_max", "212992"),
    ("net.ipv4.tcp_rmem", "4096\t131072\t6291456"),
    ("net.ipv4.tcp_wmem", "4096\t16384\t4194304"),
    ("net.ipv4.tcp_window_scaling", "1"),
    ("net.ipv4.tcp_timestamps", "1"),
    ("net.ipv4.tcp_sack", "1"),
    ("net.ipv4.tcp_congestion_control", "cubic"),
    ("net.ipv4.tcp_available_congestion_control", "reno cubic"),
    ("net.core.default_qdisc", "pfifo_fast"),
    ("net.ipv4.tcp_mtu_probing", "0"),
];

fn tune(root: &Path, extra: &[&str]) -> common::Outcome {
    let mut a = vec!["tune", "--root", root.to_str().unwrap()];
    a.extend_from_slice(extra);
    landspeed(&a, Duration::from_secs(10))
}

#[test]
fn tune_finds_the_limits_of_an_under_tuned_host_and_lifts_them() {
    let root = fake_host("stock", &STOCK);
    let o = tune(&root, &["--rate", "10G", "--rtt", "100ms", "--streams", "4"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for l in [
        "LIMIT  net.ipv4.tcp_rmem",
        "LIMIT  net.core.wmem_max",
        "advice net.core.default_qdisc",
    ] {
        assert!(o.stdout.contains(l), "{l}: {}", o.stdout);
    }
    // 4 streams × 31.25 MB of window need 62.5 MB buffers: the 256 MiB / 128 MiB tier.
    assert!(
        o.stdout.contains("net.ipv4.tcp_rmem = 4096 87380 134217728"),
        "{}",
        o.stdout
    );
    // Nothing changed without --apply.
    let before = std::fs::read_to_string(root.join("proc/sys/net/core/rmem_max")).unwrap();
    assert_eq!(before.trim(), "212992");
    let file = root.join("90-landspeed.conf");
    let o = tune(
        &root,
        &[
            "--rate",
            "10G",
            "--rtt",
            "100ms",
            "--streams",
            "4",
            "--write",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let conf = std::fs::read_to_string(&file).unwrap();
    assert!(conf.contains("net.core.rmem_max = 268435456\n"), "{conf}");
    assert_eq!(
        std::fs::read_to_string(root.join("proc/sys/net/core/rmem_max"))
            .unwrap()
            .trim(),
        "212992"
    );
    let o = tune(
        &root,
        &["--rate", "10G", "--rtt", "100ms", "--streams", "4", "--apply"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("0 limit(s) left"), "{}", o.stderr);
    let o = tune(
        &root,
        &["--rate", "10G", "--rtt", "100ms", "--streams", "4", "--json"],
    );
    let v = json(&o.stdout);
    assert_eq!(v["advice"]["sysctl_lines"], serde_json::json!([]), "{v}");
    assert_eq!(v["host"]["sysctls"]["net.core.rmem_max"], "268435456");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn tune_passes_a_well_tuned_host() {
    let mut good: Vec<(&str, &str)> = STOCK.to_vec();
    for (k, v) in [
        ("net.core.rmem_max", "67108864"),
        ("net.core.wmem_max", "67108864"),
        ("net.ipv4.tcp_rmem", "4096 87380 33554432"),
        ("net.ipv4.tcp_wmem", "4096 65536 33554432"),
        ("net.core.default_qdisc", "fq"),
    ] {
        good.iter_mut().find(|p| p.0 == k).unwrap().1 = v;
    }
    let root = fake_host("good", &good);
    let o = tune(
        &root,
        &["--rate", "10G", "--rtt", "100ms", "--streams", "8", "--json"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v = json(&o.stdout);
    let limits = v["advice"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "limit")
        .count();
    assert_eq!(limits, 0, "{v}");
    assert_eq!(v["advice"]["sysctl_lines"], serde_json::json!([]));
    // 8 × 16 MiB windows over 100 ms: 10.7 Gbit/s possible now.
    assert!(v["advice"]["max_rate_now_bps"].as_f64().unwrap() >= 1e10, "{v}");
    let o = tune(&root, &["--rate", "10G"]);
    assert_eq!(o.code, 2, "--rate without --rtt: {}", o.stderr);
    let _ = std::fs::remove_dir_all(&root);
}
