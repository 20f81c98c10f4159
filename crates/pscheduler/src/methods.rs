//! The answers of the tool's methods that need no I/O: `enumerate`, `can-run`, `duration`,
//! `participant-data`, `merged-results`, and the plan of `run` (which participant serves, which runs
//! the client with which landspeed arguments). The binary reads stdin, calls these, and does the
//! sleeping, serving and measuring.

use crate::spec::{iso_seconds, parse_test, Spec};
use serde_json::{json, Value};
use std::time::Duration;

/// The port a participant's landspeed server listens on unless configured otherwise.
pub const DEFAULT_PORT: u16 = 5201;
/// How long the client waits after the scheduled start for the server to listen.
pub const SERVER_WAIT: Duration = Duration::from_secs(3);
/// Time after the data for results to be exchanged and the server to close.
pub const TEARDOWN: Duration = Duration::from_secs(2);
/// The test length when the spec names none.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// `enumerate`: who the tool is and which test it runs.
pub fn enumerate(version: &str) -> Value {
    json!({
        "schema": 1,
        "name": "landspeed",
        "description": format!(
            "landspeed {version}: bulk TCP/UDP throughput with every byte verified, what limited the rate, iperf3-compatible"
        ),
        "version": "1.0",
        "tests": ["throughput"],
        "preference": 0,
        "maintainer": {
            "name": "landspeed developers",
            "email": "landspeed@example.invalid",
            "href": env!("CARGO_PKG_REPOSITORY")
        }
    })
}

/// `can-run`: yes, or no with every reason.
pub fn can_run(test: &Value) -> Value {
    match parse_test(test) {
        Ok(_) => json!({"can-run": true}),
        Err(e) => json!({"can-run": false, "reasons": e.0}),
    }
}

/// Set-up time before the data: the wait for the server plus connection set-up, 20 RTTs of the
/// spec's `link-rtt` (default 0.2 s) and at least a second.
fn setup(s: &Spec) -> Duration {
    let rtt = s.link_rtt.unwrap_or(Duration::from_millis(200));
    SERVER_WAIT + (rtt * 20).max(Duration::from_secs(1))
}

/// The whole run's length: set-up, warm-up, the test and the teardown.
pub fn run_length(s: &Spec) -> Duration {
    setup(s) + s.omit.unwrap_or_default() + s.duration.unwrap_or(DEFAULT_DURATION) + TEARDOWN
}

/// `duration`: how long pScheduler must reserve, in whole seconds.
pub fn duration(test: &Value) -> Result<Value, String> {
    let s = parse_test(test).map_err(|e| e.to_string())?;
    Ok(json!({"duration": iso_seconds(run_length(&s))}))
}

/// `participant-data`: the server participant (1) says which port its landspeed server takes.
pub fn participant_data(input: &Value, port: u16) -> Result<Value, String> {
    let n = input
        .get("participant")
        .and_then(Value::as_u64)
        .ok_or("participant-data needs a participant number")?;
    parse_test(input.get("test").unwrap_or(&Value::Null)).map_err(|e| e.to_string())?;
    Ok(match n {
        0 => json!({"schema": 1}),
        1 => json!({"schema": 1, "server_port": port}),
        n => return Err(format!("a throughput test has participants 0 and 1, not {n}")),
    })
}

/// `schedule.start` of a run input (ISO 8601, with or without an offset: none means UTC), or now
/// when absent.
pub fn scheduled_start(input: &Value) -> Result<std::time::SystemTime, String> {
    let s = match input.pointer("/schedule/start") {
        None => return Ok(std::time::SystemTime::now()),
        Some(Value::String(s)) => s,
        Some(v) => return Err(format!("schedule.start must be an ISO 8601 time, not {v}")),
    };
    let dt = iso8601::datetime(s).map_err(|e| format!("schedule.start '{s}': {e}"))?;
    let t = chrono::DateTime::<chrono::FixedOffset>::try_from(dt)
        .map_err(|_| format!("schedule.start '{s}' is not a valid time"))?;
    let ms =
        u64::try_from(t.timestamp_millis()).map_err(|_| format!("schedule.start '{s}' is before 1970"))?;
    Ok(std::time::UNIX_EPOCH + Duration::from_millis(ms))
}

/// What one participant's `run` does.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// Serve one test on `port` until it ends or `lifetime` passes.
    Server {
        /// The port.
        port: u16,
        /// The longest it may serve.
        lifetime: Duration,
    },
    /// Run a landspeed client with these arguments (after `landspeed run`).
    Client {
        /// The arguments.
        args: Vec<String>,
        /// Start a server on this host first (`loopback`).
        local_server: bool,
    },
}

/// The plan of `run` for the input pScheduler gives it (`participant`, `test`, `participant-data`),
/// on a host whose tool is configured to serve on `own_port` (what its `participant-data` said).
pub fn plan(input: &Value, own_port: u16) -> Result<Role, String> {
    let test = input.get("test").ok_or("the run input has no test")?;
    let s = parse_test(test).map_err(|e| e.to_string())?;
    let n = input
        .get("participant")
        .and_then(Value::as_u64)
        .ok_or("the run input has no participant number")?;
    if n == 1 && input.get("participant-data").is_none_or(Value::is_null) {
        // pScheduler 5.2.5 can start the server's run before the lead sends every participant's
        // data (docs/pscheduler.md): the port is the server's own answer, which it knows.
        return Ok(Role::Server {
            port: own_port,
            lifetime: run_length(&s),
        });
    }
    let server_port = server_port(input)?;
    match n {
        1 => Ok(Role::Server {
            port: server_port.unwrap_or(own_port),
            lifetime: run_length(&s),
        }),
        0 => {
            let (host, port, local_server) = if s.loopback {
                let lo = if s.ip_version == Some(6) {
                    "::1"
                } else {
                    "127.0.0.1"
                };
                (lo.to_string(), server_port.unwrap_or(DEFAULT_PORT), true)
            } else if s.single_ended {
                (s.dest.clone(), s.single_ended_port.unwrap_or(DEFAULT_PORT), false)
            } else {
                (s.dest.clone(), server_port.unwrap_or(DEFAULT_PORT), false)
            };
            Ok(Role::Client {
                args: client_args(&s, &host, port),
                local_server,
            })
        }
        n => Err(format!("a throughput test has participants 0 and 1, not {n}")),
    }
}

/// The server participant's port from `participant-data` (absent: the default), refused when the
/// data is there but malformed: a test never starts on a guessed port.
fn server_port(input: &Value) -> Result<Option<u16>, String> {
    let data = match input.get("participant-data") {
        None => return Ok(None),
        Some(Value::Array(d)) => d,
        Some(v) => return Err(format!("participant-data must be a list, not {v}")),
    };
    let Some(server) = data.get(1) else {
        return Ok(None);
    };
    let port = server
        .get("server_port")
        .ok_or("participant-data of participant 1 has no server_port")?;
    crate::spec::whole_number(port)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .map(Some)
        .ok_or_else(|| format!("participant-data server_port must be a port from 1 to 65535, not {port}"))
}

/// When the run's window ends: `schedule.start` plus `schedule.duration`, or the run's own length
/// from the start when pScheduler gave no duration.
pub fn window_end(input: &Value) -> Result<std::time::SystemTime, String> {
    let start = scheduled_start(input)?;
    let length = match input.pointer("/schedule/duration") {
        None => {
            let test = input.get("test").ok_or("the run input has no test")?;
            run_length(&parse_test(test).map_err(|e| e.to_string())?)
        }
        Some(Value::String(d)) => {
            crate::spec::iso_duration(d).map_err(|e| format!("schedule.duration: {e}"))?
        }
        Some(v) => return Err(format!("schedule.duration must be an ISO 8601 duration, not {v}")),
    };
    Ok(start + length)
}

fn millis(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// `landspeed run` arguments for the spec, against `host` and `port`.
pub fn client_args(s: &Spec, host: &str, port: u16) -> Vec<String> {
    let mut a = vec![
        host.to_string(),
        "-p".into(),
        port.to_string(),
        "--no-save".into(),
    ];
    let mut opt = |flag: &str, v: Option<String>| {
        if let Some(v) = v {
            a.push(flag.into());
            a.push(v);
        }
    };
    opt("-t", Some(millis(s.duration.unwrap_or(DEFAULT_DURATION))));
    opt("-i", s.interval.map(millis));
    opt("-O", s.omit.map(millis));
    opt("-P", s.parallel.map(|n| n.to_string()));
    opt("-w", s.window_size.map(|n| n.to_string()));
    opt("-M", s.mss.map(|n| n.to_string()));
    // pScheduler's bandwidth is per stream, as iperf3's -b. UDP: landspeed's -b is the total of all
    // streams. TCP: each socket is paced by the kernel (SO_MAX_PACING_RATE, per stream) at either.
    let streams = s.parallel.unwrap_or(1);
    if s.udp {
        opt("-b", s.bandwidth.map(|n| n.saturating_mul(streams).to_string()));
    } else {
        opt("--fq-rate", s.bandwidth.or(s.fq_rate).map(|n| n.to_string()));
    }
    opt("-l", s.buffer_length.map(|n| n.to_string()));
    opt("--burst", s.burst_size.map(|n| n.to_string()));
    opt("-C", s.congestion.clone());
    opt("--tx", s.zero_copy.then(|| "zerocopy".to_string()));
    // pScheduler's source is the client's own address, as iperf3's tool binds it (-B).
    opt("-B", s.local_address.clone().or_else(|| s.source.clone()));
    opt("--cpus", s.client_cpu.map(|n| n.to_string()));
    opt("--tos", s.ip_tos.map(|n| n.to_string()));
    opt("--flow-label", s.flow_label.map(|n| n.to_string()));
    opt("--server-cpus", s.server_cpu.map(|n| n.to_string()));
    for (on, flag) in [
        (s.udp, "-u"),
        (s.no_delay, "-N"),
        (s.reverse, "-R"),
        (s.ip_version == Some(4), "-4"),
        (s.ip_version == Some(6), "-6"),
    ] {
        if on {
            a.push(flag.into());
        }
    }
    a
}

/// `merged-results`: the client participant's result (it carries both ends' figures); a missing
/// result, or the wrong number of them, is a failure.
pub fn merged_results(input: &Value) -> Value {
    let spec = match input.get("test").map(parse_test) {
        None => return crate::result::failure("merged-results needs the test", ""),
        Some(Err(e)) => return crate::result::failure(&format!("the test: {e}"), ""),
        Some(Ok(s)) => s,
    };
    let one = spec.single_ended || spec.loopback;
    let results = input
        .get("results")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let want = if one { 1 } else { 2 };
    if results.len() != want {
        return crate::result::failure(
            &format!("expected {want} participant result(s), got {}", results.len()),
            "",
        );
    }
    let mut merged = match results.first() {
        Some(r @ Value::Object(_)) => r.clone(),
        _ => {
            return crate::result::failure("the client participant's result is missing", "");
        }
    };
    if let Err(why) = crate::result::check_shape(&merged) {
        return crate::result::failure(&format!("the client participant's result is broken: {why}"), "");
    }
    let server_diags = results
        .get(1)
        .and_then(|r| r.get("diags"))
        .and_then(Value::as_str);
    if let (Some(d), Some(Value::String(mine))) = (server_diags, merged.get_mut("diags")) {
        *mine = format!("Participant 0:\n{mine}\n\nParticipant 1:\n{d}");
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(spec: Value) -> Value {
        json!({"type": "throughput", "spec": spec})
    }

    #[test]
    fn the_default_run_takes_as_long_as_iperf3s() {
        let d = duration(&test(json!({"dest": "b"}))).unwrap();
        assert_eq!(d, json!({"duration": "PT19S"}));
        let d = duration(&test(
            json!({"dest": "b", "duration": "PT30S", "omit": "PT2S", "link-rtt": "PT0.3S"}),
        ))
        .unwrap();
        assert_eq!(d, json!({"duration": "PT43S"}), "3 + 6 + 2 + 30 + 2");
    }

    #[test]
    fn participants_get_their_roles() {
        let t = test(
            json!({"dest": "b.example", "parallel": 2, "reverse": true, "udp": true, "bandwidth": 100000000}),
        );
        let data = json!([{"schema": 1}, {"schema": 1, "server_port": 5301}]);
        let server = plan(
            &json!({"participant": 1, "test": t, "participant-data": data}),
            DEFAULT_PORT,
        )
        .unwrap();
        assert_eq!(
            server,
            Role::Server {
                port: 5301,
                lifetime: Duration::from_secs(19)
            }
        );
        let Role::Client { args, local_server } = plan(
            &json!({"participant": 0, "test": t, "participant-data": data}),
            DEFAULT_PORT,
        )
        .unwrap() else {
            panic!("participant 0 is the client")
        };
        assert!(!local_server);
        let line = args.join(" ");
        assert!(
            line.starts_with("b.example -p 5301 --no-save -t 10000ms"),
            "{line}"
        );
        // pScheduler's bandwidth is per stream; landspeed's -b is the total.
        assert!(line.contains("-P 2") && line.contains("-b 200000000"), "{line}");
        assert!(line.ends_with("-u -R"), "{line}");
        let tcp = test(json!({"dest": "b", "bandwidth": 5000, "ip-tos": 32}));
        let Role::Client { args, .. } = plan(&json!({"participant": 0, "test": tcp}), DEFAULT_PORT).unwrap()
        else {
            panic!()
        };
        assert!(args.join(" ").contains("--fq-rate 5000"), "{args:?}");
        assert!(args.join(" ").contains("--tos 32"), "{args:?}");
    }

    #[test]
    fn the_source_is_bound_unless_a_local_address_is_given() {
        let args =
            |spec: Value| match plan(&json!({"participant": 0, "test": test(spec)}), DEFAULT_PORT).unwrap() {
                Role::Client { args, .. } => args.join(" "),
                r => panic!("{r:?}"),
            };
        assert!(args(json!({"dest": "b", "source": "a.example"})).contains("-B a.example"));
        let both = args(json!({"dest": "b", "source": "a.example", "local-address": "192.0.2.1"}));
        assert!(
            both.contains("-B 192.0.2.1") && !both.contains("a.example"),
            "{both}"
        );
        assert!(!args(json!({"dest": "b"})).contains("-B"));
    }

    #[test]
    fn loopback_and_single_ended_runs_have_one_participant() {
        let Role::Client { args, local_server } = plan(
            &json!({
                "participant": 0, "test": test(json!({"loopback": true, "ip-version": 6})),
                "participant-data": [{"schema": 1}]
            }),
            DEFAULT_PORT,
        )
        .unwrap() else {
            panic!()
        };
        assert!(local_server);
        assert_eq!(&args[..3], ["::1", "-p", "5201"]);
        let Role::Client { args, .. } = plan(&json!({
            "participant": 0, "test": test(json!({"dest": "srv", "single-ended": true, "single-ended-port": 5202}))
        }), DEFAULT_PORT)
        .unwrap() else {
            panic!()
        };
        assert_eq!(&args[..3], ["srv", "-p", "5202"]);
        let merged = merged_results(&json!({
            "test": test(json!({"dest": "srv", "single-ended": true})),
            "results": [{"succeeded": true, "diags": "x", "intervals": [], "summary": {}}]
        }));
        assert_eq!(merged["succeeded"], true);
    }

    #[test]
    fn merging_takes_the_client_and_fails_on_missing_results() {
        let t = test(json!({"dest": "b"}));
        let m = merged_results(&json!({"test": t, "results": [
            {"succeeded": true, "diags": "client", "intervals": [], "summary": {}},
            {"succeeded": true, "diags": "server"}
        ]}));
        assert_eq!(m["succeeded"], true);
        assert_eq!(m["diags"], "Participant 0:\nclient\n\nParticipant 1:\nserver");
        let m = merged_results(&json!({"test": t, "results": [null, {"succeeded": true}]}));
        assert_eq!(m["succeeded"], false);
        let m = merged_results(&json!({"test": t, "results": [{"succeeded": true}]}));
        assert!(m["error"].as_str().unwrap().contains("expected 2"), "{m}");
    }

    #[test]
    fn malformed_inputs_fail_rather_than_guess() {
        let t = test(json!({"dest": "b"}));
        let m = merged_results(&json!({"results": [{"succeeded": true}, {"succeeded": true}]}));
        assert!(m["error"].as_str().unwrap().contains("needs the test"), "{m}");
        let m = merged_results(&json!({"test": t, "results": [{"succeeded": true}, {"succeeded": true}]}));
        assert!(m["error"].as_str().unwrap().contains("no intervals"), "{m}");
        let m = merged_results(&json!({"test": t, "results": [{"succeeded": true, "diags": 5,
            "intervals": [], "summary": {}}, {"succeeded": true}]}));
        assert!(m["error"].as_str().unwrap().contains("diags is not text"), "{m}");
        let e = scheduled_start(&json!({"schedule": {"start": 5}})).unwrap_err();
        assert!(e.contains("must be an ISO 8601 time"), "{e}");
        for data in [
            json!("x"),
            json!([{}, {}]),
            json!([{}, {"server_port": 70000}]),
            json!([{}, {"server_port": "5201"}]),
        ] {
            let e = plan(
                &json!({"participant": 0, "test": t, "participant-data": data}),
                DEFAULT_PORT,
            )
            .unwrap_err();
            assert!(e.contains("participant-data"), "{e}");
        }
        let Role::Client { args, .. } = plan(
            &json!({"participant": 0, "test": t, "participant-data": [{}, {"server_port": 5301.0}]}),
            DEFAULT_PORT,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(&args[..3], ["b", "-p", "5301"]);
        // pScheduler's race: the server's run without the data is served on the server's own port;
        // the client's is refused (it cannot know the server's).
        for data in [json!(null), json!([{}, {"server_port": 5301}])] {
            let served = plan(
                &json!({"participant": 1, "test": t, "participant-data": data}),
                5301,
            );
            assert!(
                matches!(served, Ok(Role::Server { port: 5301, .. })),
                "{served:?}"
            );
        }
        let e = plan(
            &json!({"participant": 0, "test": t, "participant-data": null}),
            5301,
        )
        .unwrap_err();
        assert!(e.contains("must be a list, not null"), "{e}");
    }

    #[test]
    fn the_window_ends_at_the_scheduled_duration() {
        let t = test(json!({"dest": "b"}));
        let at = |input: Value| {
            window_end(&input)
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        let start = "2026-05-19T12:34:56+00:00";
        assert_eq!(
            at(json!({"test": t, "schedule": {"start": start, "duration": "PT25S"}})),
            1_779_194_121
        );
        assert_eq!(
            at(json!({"test": t, "schedule": {"start": start}})),
            1_779_194_096 + 19
        );
        assert!(window_end(&json!({"test": t, "schedule": {"start": start, "duration": 25}})).is_err());
    }

    #[test]
    fn the_scheduled_start_reads_offsets_fractions_and_naive_times() {
        let at = |s: &str| {
            scheduled_start(&json!({"schedule": {"start": s}}))
                .map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis())
        };
        assert_eq!(at("2026-05-19T12:34:56+00:00"), Ok(1_779_194_096_000));
        assert_eq!(at("2026-05-19T14:34:56.250+02:00"), Ok(1_779_194_096_250));
        assert_eq!(at("2026-05-19T12:34:56"), Ok(1_779_194_096_000), "naive: UTC");
        assert!(at("yesterday").is_err());
        assert!(scheduled_start(&json!({})).is_ok(), "no schedule: now");
    }

    #[test]
    fn participant_data_names_the_servers_port() {
        let t = test(json!({"dest": "b"}));
        assert_eq!(
            participant_data(&json!({"participant": 1, "test": t}), 5301).unwrap(),
            json!({"schema": 1, "server_port": 5301})
        );
        assert_eq!(
            participant_data(&json!({"participant": 0, "test": t}), 1).unwrap(),
            json!({"schema": 1})
        );
        assert!(participant_data(&json!({"participant": 2, "test": t}), 1).is_err());
    }
}
