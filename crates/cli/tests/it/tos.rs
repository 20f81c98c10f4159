//! The type-of-service byte on the wire (`run --tos`/`--dscp`, the drop-in's `-S`/`--dscp`): every data
//! packet of the test carries it, both ways, whichever end sends, and iperf3 and landspeed carry it to
//! each other in iperf3's parameters; and the IPv6 flow label (`run --flow-label`, the drop-in's `-L`)
//! on every data packet the client sends. Read from the packets themselves (a packet socket, root).

use crate::common::{self, capture::Capture, capture::Seen, Iperf3Server, ServerProc};
use std::time::Duration;

/// The data packets (over 1,000 bytes) one way: (with `tos`, without it).
fn data_packets(seen: &[Seen], to_server: bool, tos: u8) -> (usize, usize) {
    let data = seen.iter().filter(|s| s.to_port == to_server && s.len >= 1000);
    // The two ECN bits are the kernel's (ECT on an ECN connection); the DSCP bits are the test's.
    let marked = data.clone().filter(|s| s.tos & 0xfc == tos & 0xfc).count();
    (marked, data.count() - marked)
}

/// Asserts that the data one way was marked: many marked packets, and unmarked ones (control
/// messages that share the port) a small share of them.
fn assert_marked(seen: &[Seen], to_server: bool, tos: u8, what: &str) {
    let (marked, unmarked) = data_packets(seen, to_server, tos);
    let way = if to_server {
        "client to server"
    } else {
        "server to client"
    };
    assert!(
        marked >= 20 && unmarked * 10 <= marked,
        "{what}, {way}: {marked} data packets with TOS {tos:#04x}, {unmarked} without"
    );
}

/// A command's run with a capture of its server's port around it.
fn captured(port: u16, args: &[&str]) -> Option<Vec<Seen>> {
    let cap = Capture::start(port)?;
    let o = common::landspeed(args, Duration::from_secs(30));
    assert_eq!(o.code, 0, "{args:?}: {}\n{}", o.stderr, o.stdout);
    Some(cap.stop())
}

/// `landspeed run` against `host`:`port` for a second with `extra`, captured.
fn run_captured(host: &str, port: u16, extra: &[&str]) -> Option<Vec<Seen>> {
    let cap = Capture::start(port)?;
    let o = common::one_second_run(host, port, extra);
    assert_eq!(o.code, 0, "{extra:?}: {}\n{}", o.stderr, o.stdout);
    Some(cap.stop())
}

#[test]
fn landspeed_marks_every_data_packet_both_ways_tcp_and_udp() {
    let s = ServerProc::start("127.0.0.1", &[]);
    let Some(seen) = run_captured("127.0.0.1", s.port, &["--bidir", "--tos", "0x28"]) else {
        return;
    };
    assert_marked(&seen, true, 0x28, "TCP --bidir --tos 0x28");
    assert_marked(&seen, false, 0x28, "TCP --bidir --tos 0x28");
    let udp = ["-u", "-b", "40M", "--bidir", "--dscp", "ef"];
    let seen = run_captured("127.0.0.1", s.port, &udp).unwrap();
    assert_marked(&seen, true, 0xb8, "UDP --bidir --dscp ef");
    assert_marked(&seen, false, 0xb8, "UDP --bidir --dscp ef");
    // Without the option nothing is marked: the capture tells the two apart.
    let seen = run_captured("127.0.0.1", s.port, &["-R"]).unwrap();
    assert_eq!(data_packets(&seen, false, 0x28).0, 0, "marked without --tos");
}

#[test]
fn iperf3_and_the_drop_in_carry_the_tos_to_each_other() {
    let _one = common::one_iperf3_test();
    let Some(real) = Iperf3Server::start() else { return };
    // The drop-in's -S reaches iperf3's server in the parameters: its sends (-R) are marked.
    let p = real.port.to_string();
    let dropin = [
        "iperf3",
        "-c",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "1",
        "-R",
        "-S",
        "0x28",
    ];
    let Some(seen) = captured(real.port, &dropin) else {
        return;
    };
    assert_marked(
        &seen,
        false,
        0x28,
        "landspeed iperf3 -S 0x28 -R against iperf3 -s",
    );
    // iperf3's --dscp reaches landspeed's server the same way.
    let ours = ServerProc::start("127.0.0.1", &[]);
    let cap = Capture::start(ours.port).unwrap();
    let o = common::output_within(
        std::process::Command::new("iperf3").args([
            "-c",
            "127.0.0.1",
            "-p",
            &ours.port.to_string(),
            "-t",
            "1",
            "-R",
            "--dscp",
            "af11",
        ]),
        Duration::from_secs(30),
    );
    let seen = cap.stop();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_marked(
        &seen,
        false,
        0x28,
        "iperf3 --dscp af11 -R against landspeed serve",
    );
}

#[test]
fn the_flow_label_is_on_every_data_packet_the_client_sends_over_ipv6() {
    let s = ServerProc::start("", &[]);
    let p = s.port.to_string();
    let Some(seen) = run_captured("::1", s.port, &["--flow-label", "0x12345"]) else {
        return;
    };
    let data: Vec<&Seen> = seen.iter().filter(|x| x.to_port && x.len >= 1000).collect();
    let labelled = data.iter().filter(|x| x.flow_label == 0x12345).count();
    assert!(
        labelled >= 20 && (data.len() - labelled) * 10 <= labelled,
        "{labelled} of {} data packets with flow label 0x12345",
        data.len()
    );
    // The drop-in's -L, against the same server.
    let cap = Capture::start(s.port).unwrap();
    let dropin = ["iperf3", "-c", "::1", "-p", &p, "-t", "1", "-L", "0x54321"];
    let o = common::landspeed(&dropin, Duration::from_secs(30));
    let seen = cap.stop();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let labelled = seen
        .iter()
        .filter(|x| x.to_port && x.len >= 1000 && x.flow_label == 0x54321)
        .count();
    assert!(
        labelled >= 20,
        "{labelled} data packets with the drop-in's -L 0x54321"
    );
    // Over IPv4 it is refused, naming why.
    let o = common::one_second_run("127.0.0.1", s.port, &["--flow-label", "5"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("flow labels are IPv6's"), "{}", o.stderr);
}
