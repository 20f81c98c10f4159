use super::*;

fn p(s: &str) -> Result<Params, ParamError> {
    Params::parse(s.as_bytes())
}

#[test]
fn a_real_iperf3_3_12_message_parses() {
    let m = r#"{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":4,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;
    let x = p(m).unwrap();
    assert_eq!((x.parallel, x.len, x.time_s, x.udp), (4, 131072, 10.0, false));
    let spec = x.to_spec(7);
    assert_eq!(spec.streams, 4);
    assert!(!spec.verify);
    assert_eq!(spec.direction, Direction::Forward);
}

#[test]
fn numbers_may_be_floats_and_unknown_keys_are_ignored() {
    let x = p(r#"{"tcp":1,"time":2.5,"parallel":2.0,"window":65536.0,"brand_new_key":[1,2]}"#).unwrap();
    assert_eq!((x.time_s, x.parallel, x.window), (2.5, 2, Some(65536)));
}

#[test]
fn out_of_range_values_get_iperf3_error_numbers() {
    assert_eq!(p(r#"{"parallel":129}"#).unwrap_err().code, errno::NUM_STREAMS);
    assert_eq!(p(r#"{"parallel":0}"#).unwrap_err().code, errno::NUM_STREAMS);
    assert_eq!(p(r#"{"time":86401}"#).unwrap_err().code, errno::DURATION);
    assert_eq!(p(r#"{"omit":601}"#).unwrap_err().code, errno::OMIT);
    assert_eq!(p(r#"{"len":2000000}"#).unwrap_err().code, errno::BLOCK_SIZE);
    assert_eq!(
        p(r#"{"udp":true,"len":70000}"#).unwrap_err().code,
        errno::UDP_BLOCK_SIZE
    );
    assert_eq!(p(r#"{"window":1e12}"#).unwrap_err().code, errno::BUF_SIZE);
    assert_eq!(
        p(r#"{"reverse":1,"bidirectional":true}"#).unwrap_err().code,
        errno::REVERSE_BIDIR
    );
    assert_eq!(
        p(r#"{"num":10,"blockcount":3}"#).unwrap_err().code,
        errno::END_CONDITIONS
    );
    assert_eq!(
        p(r#"{"congestion":"cubic; rm"}"#).unwrap_err().code,
        errno::SET_CONGESTION
    );
}

#[test]
fn wrong_types_and_non_json_are_refused() {
    for bad in [
        r#"{"parallel":"four"}"#,
        r#"{"time":-1}"#,
        "[1,2]",
        "{",
        "",
        r#"{"title":5}"#,
    ] {
        assert_eq!(p(bad).unwrap_err().code, errno::RECV_PARAMS, "{bad}");
    }
}

#[test]
fn end_conditions_and_directions_map_onto_the_spec() {
    let s = p(r#"{"num":1048576,"reverse":1,"parallel":2}"#)
        .unwrap()
        .to_spec(1);
    assert_eq!(s.end, EndCondition::Bytes(1 << 20));
    assert_eq!(s.direction, Direction::Reverse);
    let s = p(r#"{"blockcount":100,"bidirectional":true}"#)
        .unwrap()
        .to_spec(1);
    assert_eq!(s.end, EndCondition::Blocks(100));
    assert_eq!(s.direction, Direction::Bidir);
    // A timed test: the client sends TEST_END; the server's own deadline is only a safety bound.
    let s = p(r#"{"time":3,"omit":1}"#).unwrap().to_spec(1);
    assert_eq!(s.end, EndCondition::Time(Duration::from_secs(14)));
}

#[test]
fn message_for_a_spec_parses_back() {
    let spec = TestSpec {
        streams: 3,
        end: EndCondition::Bytes(5_000_000),
        direction: Direction::Reverse,
        window_bytes: Some(1 << 20),
        congestion: Some("cubic".into()),
        mss: Some(1400),
        ..TestSpec::default()
    };
    let m = Params::message_for(&spec, "landspeed 0.1");
    let back = Params::parse(m.to_string().as_bytes()).unwrap();
    assert_eq!(back.parallel, 3);
    assert_eq!(back.bytes, 5_000_000);
    assert!(back.reverse);
    assert_eq!(back.window, Some(1 << 20));
    assert_eq!(back.mss, Some(1400));
    assert_eq!(back.congestion.as_deref(), Some("cubic"));
}

/// iperf3 3.17+ checks the JSON types of its flags: `reverse` must be `true`, not `1`.
#[test]
fn flags_we_send_are_json_true_and_newer_parameters_parse() {
    let spec = TestSpec {
        direction: Direction::Reverse,
        ..TestSpec::default()
    };
    let m = Params::message_for(&spec, "landspeed 0.1");
    assert_eq!(m["reverse"], serde_json::Value::Bool(true));
    let p = Params::parse(br#"{"udp":true,"dont_fragment":1,"skip_rx_copy":1,"mptcp":true}"#).unwrap();
    assert!(p.dont_fragment);
    assert!(!Params::parse(br#"{"udp":true}"#).unwrap().dont_fragment);
}

/// TOS and Don't Fragment cross in iperf3's own keys and types (`TOS`, `dont_fragment` as numbers:
/// iperf3 3.21 reads no other type there), both ways.
#[test]
fn tos_and_dont_fragment_cross_as_iperf3_spells_them() {
    let spec = TestSpec {
        tos: Some(0x28),
        dont_fragment: true,
        transport: landspeed_core::config::Transport::Udp,
        length_bytes: 1400,
        ..TestSpec::default()
    };
    let m = Params::message_for(&spec, "landspeed 0.1");
    assert_eq!(m["TOS"], serde_json::json!(40));
    assert_eq!(m["dont_fragment"], serde_json::json!(1));
    let p = Params::parse(m.to_string().as_bytes()).unwrap();
    let back = p.to_spec(7);
    assert_eq!((back.tos, back.dont_fragment), (Some(0x28), true));
    let tcp = Params::parse(br#"{"tcp":true,"TOS":184}"#).unwrap().to_spec(7);
    assert_eq!((tcp.tos, tcp.dont_fragment), (Some(184), false));
    let e = Params::parse(br#"{"tcp":true,"TOS":256}"#).unwrap_err();
    assert_eq!(e.code, crate::wire::errno::BAD_TOS);
    let plain = Params::message_for(&TestSpec::default(), "landspeed 0.1");
    assert!(plain.get("TOS").is_none() && plain.get("dont_fragment").is_none());
    // One server CPU is iperf3's -A N,M: server_affinity M.
    let pinned = TestSpec {
        server_cpus: Some(vec![1]),
        ..TestSpec::default()
    };
    assert_eq!(
        Params::message_for(&pinned, "x")["server_affinity"],
        serde_json::json!(1)
    );
    assert!(plain.get("server_affinity").is_none());
}

proptest::proptest! {
    #[test]
    fn any_bytes_parse_or_fail_without_panicking(b in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
        let _ = Params::parse(&b);
    }
}

/// Every request at the edges of what parses becomes a valid test, and the one combination parsing
/// cannot see (fewer bytes than streams) is refused with iperf3's code for end conditions.
#[test]
fn parsed_requests_are_valid_tests() {
    for body in [
        r#"{"time":86400,"omit":600}"#,
        r#"{"time":0}"#,
        r#"{"udp":true,"len":17,"bandwidth":1}"#,
        r#"{"MSS":88,"congestion":"abcdefghijklmno","window":536870912,"len":1048576}"#,
        r#"{"parallel":128,"blockcount":128,"burst":1000,"udp":true}"#,
        r#"{"congestion":""}"#,
    ] {
        let p = Params::parse(body.as_bytes()).unwrap();
        assert_eq!(p.to_test(1).unwrap().into_spec(), p.to_spec(1), "{body}");
    }
    for (body, code) in [
        (r#"{"udp":true,"len":16}"#, errno::UDP_BLOCK_SIZE),
        (r#"{"MSS":87}"#, errno::MSS),
        (r#"{"congestion":"abcdefghijklmnop"}"#, errno::RECV_PARAMS),
    ] {
        assert_eq!(Params::parse(body.as_bytes()).unwrap_err().code, code, "{body}");
    }
    let few = Params::parse(br#"{"parallel":4,"num":3}"#).unwrap();
    assert_eq!(few.to_test(1).unwrap_err().code, errno::END_CONDITIONS);
}
