//! UDP tests in landspeed's own protocol on loopback: pacing to the total rate, every datagram
//! accounted and verified, reverse and bidirectional, and TCP-only options refused. Loss, jitter,
//! reordering and duplication against known impairments are checked through the WAN emulator (wan.rs).

use crate::common;

use common::{landspeed, run_json, run_text, ServerProc};
use std::time::Duration;

fn udp(r: &serde_json::Value) -> &serde_json::Value {
    &r["summary"]["udp"]
}

#[test]
fn udp_paces_to_the_total_rate_and_verifies_every_datagram() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let r = run_json("127.0.0.1", s.port, &["-u", "-b", "200M", "-P", "2", "-t", "2"]);
    let u = udp(&r);
    let sent = u["datagrams_sent"].as_u64().unwrap();
    let got = u["datagrams_received"].as_u64().unwrap();
    assert_eq!(sent, got + u["datagrams_lost"].as_u64().unwrap(), "{u}");
    // -b is the total over both streams, not per stream as in iperf3.
    let bps = r["summary"]["throughput_bps"].as_f64().unwrap();
    assert!(
        (bps / 200e6 - 1.0).abs() < 0.05,
        "{bps} bit/s for a 200 Mbit/s target"
    );
    assert_eq!(r["summary"]["bytes_verified"], r["summary"]["bytes_received"]);
    assert_eq!(r["summary"]["corrupt_blocks"], 0);
    for st in r["streams"].as_array().unwrap() {
        let per = st["throughput_bps"].as_f64().unwrap();
        assert!(
            (per / 100e6 - 1.0).abs() < 0.05,
            "stream at {per} bit/s, expected half of 200M"
        );
        assert_eq!(
            st["udp"]["datagrams_sent"],
            st["udp"]["datagrams_received"].as_u64().unwrap() + st["udp"]["datagrams_lost"].as_u64().unwrap()
        );
    }
    assert_eq!(r["config"]["transport"], "udp", "{}", r["config"]);
    // This kernel offers UDP segmentation and receive offload, and the result says they were used.
    let path = &r["data_path"];
    assert!(
        path["tx"].as_str().unwrap().contains("segmentation offload"),
        "{path}"
    );
    assert!(path["rx"].as_str().unwrap().contains("receive offload"), "{path}");
}

#[test]
fn udp_reverse_bidirectional_and_byte_counts() {
    let s = ServerProc::start("127.0.0.1", &[]);
    // Ethernet-sized datagrams (loopback's own size would send fewer than the counts below).
    let r = run_json(
        "127.0.0.1",
        s.port,
        &["-u", "-b", "50M", "-R", "-t", "1", "-l", "1448"],
    );
    assert!(udp(&r)["datagrams_received"].as_u64().unwrap() > 1000);
    assert_eq!(r["summary"]["bytes_verified"], r["summary"]["bytes_received"]);
    let r = run_json("127.0.0.1", s.port, &["-u", "-b", "50M", "--bidir", "-t", "1"]);
    assert_eq!(r["directions"].as_array().unwrap().len(), 2);
    for d in r["directions"].as_array().unwrap() {
        assert!(
            d["summary"]["udp"]["datagrams_received"].as_u64().unwrap() > 500,
            "{d}"
        );
    }
    // -n: exactly that many bytes of datagrams are sent (whole datagrams, rounded up).
    let r = run_json(
        "127.0.0.1",
        s.port,
        &["-u", "-b", "100M", "-n", "1448000", "-l", "1448"],
    );
    assert_eq!(udp(&r)["datagrams_sent"], 1000);
}

#[test]
fn a_datagram_left_unsized_takes_the_paths_size_and_a_given_one_is_kept() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let length = |args: &[&str]| {
        let r = run_json("127.0.0.1", s.port, args);
        assert_eq!(r["summary"]["bytes_verified"], r["summary"]["bytes_received"]);
        r["config"]["length_bytes"].as_u64().unwrap()
    };
    // Loopback's MTU is 65536: a fast test sends the largest IPv4 datagram, verified like any other.
    assert_eq!(length(&["-u", "-b", "2G", "-t", "0.5"]), 65_507);
    // A slower one sends a thousand a second, and a slow one the Ethernet-sized default.
    assert_eq!(length(&["-u", "-b", "100M", "-t", "0.5"]), 12_500);
    assert_eq!(length(&["-u", "-t", "0.5"]), 1448);
    // -l is the user's, whatever the path.
    assert_eq!(length(&["-u", "-b", "2G", "-t", "0.5", "-l", "1000"]), 1000);
}

#[test]
fn tcp_only_options_are_refused_for_udp() {
    for extra in [
        &["-C", "cubic"][..],
        &["-M", "1400"][..],
        &["-l", "8"][..],
        &["--fq-rate", "1G"][..],
    ] {
        let mut args = vec!["run", "127.0.0.1", "-p", "9", "-u"];
        args.extend_from_slice(extra);
        let o = landspeed(&args, Duration::from_secs(10));
        assert_eq!(o.code, 2, "{extra:?}: {}", o.stderr);
    }
    // -b is the total rate for TCP too (each stream paced at its share), so one rate, not two.
    let o = landspeed(
        &["run", "127.0.0.1", "-p", "9", "-b", "1G", "--fq-rate", "1G"],
        Duration::from_secs(10),
    );
    assert_eq!(o.code, 2, "-b with --fq-rate: {}", o.stderr);
}

/// Offered far above what a receiver with a 64 KiB socket buffer drains, loopback UDP loses datagrams
/// in the receiving host only: the loss split puts (within 1%) all of them there, and the report says
/// so with advice. The physical margin: 10 Gbit/s offered into 64 KiB lost 19-64% on this 2-core
/// machine once, 2.5-4% (21,000-34,000 datagrams) on 2026-12-06; the test needs a thousand. Beside
/// other tests in CI the sender slowed more than the receiver and 592 were lost (0.07%): the test
/// takes the machine alone. Alone, a full CI run (2026-12-06) saw the receiver keep up with 10
/// Gbit/s (16 lost of 863,232; 464-704 in three runs later), so 20 Gbit/s is offered (52,000-75,000
/// lost in three runs by hand, 10 Gbit/s 2,900-5,200 beside them), up to three times for a run with
/// its thousand: the property is where the loss is put, not how much there is.
#[test]
fn loss_in_a_full_receive_buffer_is_put_in_the_receiving_host() {
    let _one = common::alone();
    let s = ServerProc::start("127.0.0.1", &[]);
    // Ethernet-sized datagrams: a 64 KiB buffer then holds dozens, and overflows thousands of times.
    let lost_of = |r: &serde_json::Value| r["summary"]["udp"]["datagrams_lost"].as_u64().unwrap();
    let mut tries = vec![];
    let r = loop {
        let r = run_json(
            "127.0.0.1",
            s.port,
            &["-u", "-b", "20G", "-w", "64K", "-t", "1", "-l", "1448"],
        );
        if lost_of(&r) > 1000 || tries.len() == 2 {
            break r;
        }
        tries.push(r["summary"]["udp"].to_string());
    };
    let u = &r["summary"]["udp"];
    let lost = lost_of(&r);
    assert!(
        lost > 1000,
        "no loss to attribute in three runs: {u}; before: {tries:?}"
    );
    assert!(u["socket_drops"].as_u64().unwrap() > 0, "{u}");
    let host = u["lost_in_receiver"].as_u64().unwrap();
    assert!(host <= lost && host as f64 >= 0.99 * lost as f64, "{u}");
    let sender = u["lost_in_sender"].as_u64().unwrap();
    assert!(host + sender <= lost, "{u}");
    assert!(r.get("emulator").is_none(), "no emulator on loopback");
    // One warning says so, with the rate the receiver kept.
    let kept = r["warnings"].to_string();
    assert!(
        kept.contains("server: the receiver could not keep up: it kept "),
        "{kept}"
    );
    // The kernel's own count of full-buffer drops (host-wide, in buffers) saw them too.
    let k = &r["remote"]["kernel_counters"];
    assert!(k["Udp.RcvbufErrors"].as_u64().unwrap() > 0, "{k}");
    // Wire against data: on loopback both ends count on `lo`, and a UDP test has no TCP efficiency.
    let w = &r["local"]["wire"];
    assert_eq!(w["shared"], "loopback", "{w}");
    assert!(
        w["wire_bytes_out"].as_u64().unwrap() >= w["app_bytes_out"].as_u64().unwrap(),
        "{w}"
    );
    assert!(w["tcp_efficiency_pct"].is_null(), "{w}");
    let args = [
        "-u",
        "-b",
        "20G",
        "-w",
        "64K",
        "-t",
        "1",
        "-l",
        "1448",
        "--no-save",
    ];
    // The text says so too (again up to three runs, for one that lost enough to say it).
    let said =
        |t: &str| t.contains("in the receiving host (socket buffer full") && t.contains("could not keep up");
    let mut texts = vec![];
    for _ in 0..3 {
        let o = run_text(s.port, &args, Duration::from_secs(30));
        if said(&o.stdout) {
            return;
        }
        texts.push(o.stdout);
    }
    panic!("no run's text put its loss in the receiving host: {texts:?}");
}
