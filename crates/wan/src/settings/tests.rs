use super::*;

fn req() -> Request {
    Request::default()
}

#[test]
fn probabilities_take_fractions_and_percentages() {
    assert_eq!(Probability::parse("x", "0.01").unwrap().0, 0.01);
    assert!((Probability::parse("x", "1%").unwrap().0 - 0.01).abs() < 1e-12);
    assert!(Probability::parse("x", "150%").is_err());
    assert!(Probability::parse("x", "-0.1").is_err());
    assert!(Probability::parse("x", "lots").is_err());
}

#[test]
fn rtt_is_split_evenly_and_queue_defaults_to_one_bdp() {
    let s = Request {
        rtt: Some("100ms".into()),
        rate: Some("1G".into()),
        ..req()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.a_to_b.delay, Duration::from_millis(50));
    assert_eq!(s.b_to_a.delay, Duration::from_millis(50));
    assert_eq!(s.a_to_b.rate_bps, Some(1e9));
    assert_eq!(s.a_to_b.queue_bytes, Some(12_500_000));
    assert_eq!(s.mtu, 1500);
}

#[test]
fn queue_in_bytes_or_bdp_multiples() {
    assert_eq!(QueueSpec::parse("4M").unwrap(), QueueSpec::Bytes(4 << 20));
    assert_eq!(QueueSpec::parse("2bdp").unwrap(), QueueSpec::Bdp(2.0));
    assert_eq!(QueueSpec::parse("bdp").unwrap(), QueueSpec::Bdp(1.0));
    assert!(QueueSpec::parse("0").is_err());
    assert!(QueueSpec::parse("xbdp").is_err());
    let s = Request {
        rtt: Some("40ms".into()),
        rate: Some("100M".into()),
        queue: Some("0.5bdp".into()),
        ..req()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.a_to_b.queue_bytes, Some(250_000));
    // A BDP multiple needs a rate.
    let e = Request {
        rtt: Some("40ms".into()),
        queue: Some("2bdp".into()),
        ..req()
    }
    .resolve();
    assert!(matches!(e, Err(SettingsError::QueueNeedsBdp(_))));
}

#[test]
fn per_direction_overrides() {
    let s = Request {
        rtt: Some("100ms".into()),
        rate: Some("1G".into()),
        loss: Some("1%".into()),
        a_to_b: vec!["delay=70ms".into(), "rate=200M".into()],
        b_to_a: vec!["loss=0".into(), "loss-model=gilbert:1%,20%".into()],
        ..req()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.a_to_b.delay, Duration::from_millis(70));
    assert_eq!(s.a_to_b.rate_bps, Some(200e6));
    assert_eq!(s.a_to_b.loss, LossModel::Bernoulli { p: 0.01 });
    // The queue's BDP uses the round trip made of both one-way delays (70 + 50 ms).
    assert_eq!(s.a_to_b.queue_bytes, Some(3_000_000));
    assert_eq!(
        s.b_to_a.loss,
        LossModel::Gilbert {
            p: 0.01,
            r: 0.2,
            loss_bad: 1.0,
            loss_good: 0.0
        }
    );
    let bad = Request {
        a_to_b: vec!["speed=1G".into()],
        ..req()
    }
    .resolve();
    assert!(matches!(bad, Err(SettingsError::Override(_))));
}

#[test]
fn loss_models_and_their_mean() {
    assert_eq!(LossModel::parse("bernoulli:0.5%").unwrap().mean_loss(), 0.005);
    let g = LossModel::parse("gilbert:0.01,0.09,0.5,0").unwrap();
    assert!((g.mean_loss() - 0.1 * 0.5).abs() < 1e-12);
    assert!(LossModel::parse("gilbert:0.1").is_err());
    assert!(LossModel::parse("pareto:1").is_err());
}

#[test]
fn names_are_short_and_plain() {
    assert!(check_name("lfn1").is_ok());
    assert!(check_name("").is_err());
    assert!(check_name("toolongname").is_err());
    assert!(check_name("a-b").is_err());
    assert!(check_name("../x").is_err());
}

#[test]
fn mtu_is_checked() {
    let e = Request {
        mtu: Some(100),
        ..req()
    }
    .resolve();
    assert_eq!(e, Err(SettingsError::Mtu(100)));
}
