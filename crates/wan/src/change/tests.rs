use super::*;
use crate::settings::Request;

fn path(rtt: &str, rate: &str) -> PathSettings {
    Request {
        rtt: Some(rtt.into()),
        rate: Some(rate.into()),
        ..Request::default()
    }
    .resolve()
    .unwrap()
}

#[test]
fn an_rtt_step_halves_into_both_delays_and_a_byte_queue_stays_in_bytes() {
    let before = path("20ms", "1G");
    let queue = before.a_to_b.queue_bytes.unwrap();
    let c = Change::parse(&["rtt=80ms"]).unwrap();
    let after = c.apply(&before).unwrap();
    assert_eq!(after.a_to_b.delay, Duration::from_millis(40));
    assert_eq!(after.b_to_a.delay, Duration::from_millis(40));
    assert_eq!(
        after.a_to_b.queue_bytes,
        Some(queue),
        "a router's buffer does not grow"
    );
    assert_eq!(c.text(), "rtt=80ms");
}

#[test]
fn a_rate_step_on_one_direction_leaves_the_other_and_resolves_a_bdp_queue_on_the_new_figures() {
    let before = path("20ms", "1G");
    let c = Change::parse(&["direction=b-to-a", "rate=100M", "queue=2bdp"]).unwrap();
    let after = c.apply(&before).unwrap();
    assert_eq!(after.a_to_b, before.a_to_b);
    assert_eq!(after.b_to_a.rate_bps, Some(100e6));
    // 2 × 100 Mbit/s × 20 ms = 500,000 bytes.
    assert_eq!(after.b_to_a.queue_bytes, Some(500_000));
}

#[test]
fn a_path_that_gains_a_rate_gets_the_default_queue_and_one_that_loses_it_has_none() {
    let before = Request {
        rtt: Some("40ms".into()),
        ..Request::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(before.a_to_b.queue_bytes, None);
    let limited = Change::parse(&["rate=100M"]).unwrap().apply(&before).unwrap();
    assert_eq!(limited.a_to_b.queue_bytes, Some(500_000), "one BDP");
    let free = Change::parse(&["rate=unlimited"])
        .unwrap()
        .apply(&limited)
        .unwrap();
    assert_eq!((free.a_to_b.rate_bps, free.a_to_b.queue_bytes), (None, None));
}

#[test]
fn loss_and_jitter_and_an_outage_are_read() {
    let c = Change::parse(&["loss=1%", "jitter=2ms", "down=3s"]).unwrap();
    assert_eq!(c.loss, Some(LossModel::Bernoulli { p: 0.01 }));
    assert_eq!(c.jitter, Some(Duration::from_millis(2)));
    assert_eq!(c.down, Some(Duration::from_secs(3)));
    assert!(c.sets_anything());
    let only_down = Change::parse(&["down=500ms"]).unwrap();
    assert!(!only_down.sets_anything());
    assert_eq!(
        Change::parse(&["down=2s", "proto=udp"]).unwrap().scope.proto,
        Some(17)
    );
    let data = Change::parse(&["down=2s", "ports=40000-40003"]).unwrap();
    assert_eq!(
        (data.scope.ports, data.scope.except_ports),
        (Some((40000, 40003)), false)
    );
    let control = Change::parse(&["down=2s", "proto=tcp", "except-ports=40000"]).unwrap();
    assert_eq!(
        (control.scope.ports, control.scope.except_ports),
        (Some((40000, 40000)), true)
    );
    for bad in ["ports=0", "ports=9-3", "ports=x", "ports=70000"] {
        let e = Change::parse(&["down=1s", bad]).unwrap_err().to_string();
        assert!(e.contains("range A-B of ports"), "{bad}: {e}");
    }
    assert!(Change::parse(&["down=1s", "ports=1", "except-ports=2"]).is_err());
    assert!(Change::parse(&["ports=5201"])
        .unwrap_err()
        .to_string()
        .contains("give them with down="));
    assert!(Change::parse(&["proto=tcp"])
        .unwrap_err()
        .to_string()
        .contains("give them with down="));
    assert!(Change::parse(&["down=1s", "proto=icmp"])
        .unwrap_err()
        .to_string()
        .contains("not tcp or udp"));
    let up = Change::parse(&["up"]).unwrap();
    assert!(up.up && !up.sets_anything());
    assert!(Change::parse(&["up", "down=1s"]).is_err());
    let none = Change::parse(&["loss=0"]).unwrap();
    assert_eq!(none.loss, Some(LossModel::None));
}

#[test]
fn bad_words_and_values_are_named() {
    let e = |w: &[&str]| Change::parse(w).unwrap_err().to_string();
    assert!(
        e(&["speed=1G"]).contains("'speed=1G' is not KEY=VALUE"),
        "{}",
        e(&["speed=1G"])
    );
    assert!(e(&["rtt"]).contains("'rtt' is not KEY=VALUE"));
    assert!(e(&["loss=2"]).contains("not a probability"));
    assert!(e(&["rtt=20s"]).contains("5 s one-way limit"));
    assert!(e(&["down=0s"]).contains("between 1ms and 3600 s"));
    assert!(e(&["down=2h"]).contains("between 1ms and 3600 s"));
    assert!(e(&["rate=10"]).contains("below 1 kbit/s"));
    assert!(e(&["direction=up"]).contains("not both, a-to-b or b-to-a"));
    assert!(e(&["direction=both"]).contains("nothing to change"));
    assert!(e(&[]).contains("nothing to change"));
    let zero_rtt = path("0ms", "1G");
    let err = Change::parse(&["queue=2bdp"])
        .unwrap()
        .apply(&zero_rtt)
        .unwrap_err();
    assert!(err.to_string().contains("non-zero delay"), "{err}");
}

#[test]
fn a_schedule_reads_times_repeats_and_comments() {
    let s = parse_schedule(
        "# a route change, then flaps\n\n10s rtt=80ms\n2s every 4s times 3 down=1s  # flap\n20s direction=a-to-b rate=100M\n",
    )
    .unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!(
        (s[0].line, s[0].at, s[0].every),
        (3, Duration::from_secs(10), None)
    );
    assert_eq!(s[1].every, Some(Duration::from_secs(4)));
    assert_eq!(s[1].times, Some(3));
    assert_eq!(s[2].change.which, Which::AToB);
}

#[test]
fn a_bad_schedule_line_is_named_by_its_number() {
    let e = |t: &str| parse_schedule(t).unwrap_err().to_string();
    assert_eq!(
        e("1s rtt=10ms\nsoon rtt=20ms\n"),
        "line 2: 'soon' is not a time after `wan up` (e.g. 10s, 1.5m), then KEY=VALUE words"
    );
    assert!(e("1s rtt=10ms\n\n3s colour=red").starts_with("line 3: 'colour=red'"));
    assert!(e("1s every 2s down=2s").contains("line 1: down=2s lasts as long as its period"));
    assert!(e("1s every 1ms down=0.5ms").contains("shorter than 10ms"));
    assert!(e("1s every 2s times 0 down=1s").contains("times '0'"));
    assert!(e("4s").contains("line 1: nothing to change"));
}

#[test]
fn the_player_interleaves_repeats_in_time_order_and_stops_after_times() {
    let s = parse_schedule("2s every 4s times 3 down=1s\n7s rtt=80ms\n").unwrap();
    let mut p = Player::new(s);
    let mut order = Vec::new();
    while let Some((t, e)) = p.next_change() {
        order.push((t.as_secs(), e.line));
    }
    assert_eq!(order, vec![(2, 1), (6, 1), (7, 2), (10, 1)]);
    assert!(p.peek().is_none());
}

#[test]
fn an_endless_repeat_keeps_coming() {
    let mut p = Player::new(parse_schedule("0s every 1s down=100ms").unwrap());
    for k in 0..1000u64 {
        assert_eq!(p.next_change().unwrap().0, Duration::from_secs(k));
    }
}

#[test]
fn a_change_may_switch_the_queue_discipline_and_names_a_wrong_one() {
    let now = crate::settings::Request {
        rtt: Some("20ms".into()),
        rate: Some("50M".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let c = Change::parse(&["aqm=codel"]).unwrap();
    let next = c.apply(&now).unwrap();
    assert_eq!(next.a_to_b.aqm, crate::aqm::Aqm::CODEL);
    assert_eq!(next.b_to_a.aqm, crate::aqm::Aqm::CODEL);
    assert_eq!(next.a_to_b.queue_bytes, now.a_to_b.queue_bytes);
    let e = Change::parse(&["aqm=red"]).unwrap_err().to_string();
    assert!(e.contains("tail-drop, codel"), "{e}");
}
