//! The pScheduler tool's methods as pScheduler drives them: JSON on stdin to `landspeed pscheduler
//! METHOD`, its stdout checked against the throughput spec, result and tool-enumeration JSON schemas
//! (tests/fixtures/pscheduler, written from pScheduler's published field lists), a real
//! two-participant run on loopback (the server participant and the client participant started
//! together, as pScheduler's runners would), a loopback and a UDP run, bad specs refused with reasons,
//! an unreachable server reported as a failed result, and malformed input answered without a panic.

use crate::common;

use common::{bin, free_port, Outcome};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn method(name: &str, input: &str) -> Outcome {
    let mut child = Command::new(bin())
        .args(["pscheduler", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn landspeed pscheduler");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = common::wait_output(child, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("pscheduler {name} did not finish within 60 s"));
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a method that must succeed and returns its JSON.
fn answer(name: &str, input: &Value) -> Value {
    let o = method(name, &input.to_string());
    assert_eq!(o.code, 0, "{name}: {}{}", o.stdout, o.stderr);
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{name} wrote no JSON ({e}): {}", o.stdout))
}

fn schema(name: &str) -> jsonschema::Validator {
    let path = format!("{}/tests/fixtures/pscheduler/{name}", env!("CARGO_MANIFEST_DIR"));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&s).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, doc: &Value) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\nin {doc:#}");
}

/// Tests that run measurements take turns: a port picked for a participant's server is then not taken
/// by another test's connections before the server binds it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    common::take(&ONE_AT_A_TIME)
}

fn test(spec: Value) -> Value {
    json!({"type": "throughput", "spec": spec})
}

#[test]
fn enumerate_can_run_and_duration_answer_in_pschedulers_shapes() {
    let e = answer("enumerate", &Value::Null);
    assert_valid(&schema("enumerate.schema.json"), &e);
    assert_eq!(e["name"], "landspeed");
    assert_eq!(e["tests"], json!(["throughput"]));
    // pScheduler's tool loader validates the enumeration against its PluginEnumeration/Tool type,
    // whose maintainer href has format "uri": an empty one makes it refuse the tool.
    let href = e["maintainer"]["href"].as_str().unwrap_or_default();
    let scheme = href.split_once("://").map(|(s, _)| s).unwrap_or_default();
    assert!(
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)),
        "maintainer.href is not an absolute URI: {href:?}"
    );

    let spec_schema = schema("throughput-spec.schema.json");
    for spec in [
        json!({"dest": "b.example"}),
        json!({"schema": 7, "dest": "b.example", "duration": "PT20S", "omit": "PT2S", "parallel": 4,
               "window-size": 8388608, "congestion": "bbr", "fq-rate": 2000000000u64, "reverse": true,
               "ip-version": 4, "zero-copy": true, "mss": 1400, "no-delay": true, "interval": "PT5S"}),
        json!({"dest": "b.example", "udp": true, "bandwidth": 500000000, "buffer-length": 1400, "burst-size": 8}),
        json!({"dest": "b.example", "single-ended": true, "single-ended-port": 5202}),
        json!({"dest": "localhost", "loopback": true}),
    ] {
        assert_valid(&spec_schema, &spec);
        let c = answer("can-run", &test(spec.clone()));
        assert_eq!(c, json!({"can-run": true}), "{spec}");
    }
    let d = answer(
        "duration",
        &test(json!({"dest": "b", "duration": "PT20S", "omit": "PT2S"})),
    );
    assert_eq!(
        d,
        json!({"duration": "PT31S"}),
        "3 s server wait + 4 s set-up + 2 + 20 + 2 teardown"
    );
    let p = answer(
        "participant-data",
        &json!({"participant": 1, "test": test(json!({"dest": "b"}))}),
    );
    assert_eq!(p["server_port"], 5201);
}

#[test]
fn can_run_refuses_what_landspeed_cannot_do_with_reasons() {
    let spec_schema = schema("throughput-spec.schema.json");
    for (spec, reason) in [
        (
            json!({"dest": "b", "flow-label": 5, "udp": true}),
            "labels TCP connections over IPv6",
        ),
        (
            json!({"dest": "b", "reverse-connections": true}),
            "always opens the connections",
        ),
        (json!({"dest": "b", "udp": true, "congestion": "bbr"}), "TCP only"),
        (
            json!({"dest": "b", "bandwidth": 1000, "fq-rate": 2000}),
            "give one rate",
        ),
        (json!({"dest": "b", "parallel": 500}), "at most 128"),
    ] {
        assert_valid(&spec_schema, &spec);
        let c = answer("can-run", &test(spec.clone()));
        assert_eq!(c["can-run"], false, "{spec}");
        let reasons = c["reasons"].to_string();
        assert!(reasons.contains(reason), "{spec}: {reasons}");
    }
    // ip-tos is carried out (run --tos), within the schema's 0-255.
    let tos = json!({"dest": "b", "ip-tos": 32});
    assert_valid(&spec_schema, &tos);
    assert_eq!(answer("can-run", &test(tos))["can-run"], true);
    let c = answer("can-run", &json!({"type": "rtt", "spec": {"dest": "b"}}));
    assert!(c["reasons"][0].as_str().unwrap().contains("not 'rtt'"), "{c}");
    // A key outside the throughput spec, and a duration that is not ISO 8601.
    let c = answer(
        "can-run",
        &test(json!({"dest": "b", "bogus": 1, "duration": "10"})),
    );
    assert_eq!(c["reasons"].as_array().unwrap().len(), 2, "{c}");
}

#[test]
fn malformed_input_is_a_method_error_with_the_failure_shape_never_a_panic() {
    for m in ["can-run", "duration", "participant-data", "run", "merged-results"] {
        let o = method(m, "{\"type\": \"throughput\", \"spec\": {");
        assert_eq!(o.code, 1, "{m}: {}{}", o.stdout, o.stderr);
        assert!(o.stderr.contains("malformed JSON on stdin"), "{m}: {}", o.stderr);
        assert!(!o.stderr.contains("panicked"), "{m}: {}", o.stderr);
        let v: Value = serde_json::from_str(&o.stdout).expect("the failure shape is JSON");
        assert!(v["can-run"] == false || v["succeeded"] == false, "{m}: {v}");
    }
    // Well-formed JSON that is no test: a method error with the reason.
    let o = method("duration", "[1, 2]");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stderr.contains("no type"), "{}", o.stderr);
}

/// `seconds` from now, as pScheduler writes `schedule.start`.
fn soon(seconds: f64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    landspeed_core::result::format_utc(now + seconds)
}

#[test]
fn two_participants_on_loopback_give_a_valid_merged_result() {
    let _one = serial();
    let port = free_port();
    let t = test(json!({"dest": "127.0.0.1", "duration": "PT2S", "parallel": 2, "interval": "PT1S"}));
    let data = json!([{"schema": 1}, {"schema": 1, "server_port": port}]);
    // As pScheduler's runner: both started before the scheduled start, the window the tool's
    // duration (3 s set-up + 1 s + 2 s + 2 s teardown, whole seconds).
    let start = soon(1.0);
    let input = |n: u64| {
        json!({"schema": 1, "task-uuid": "00000000-0000-0000-0000-000000000001",
        "schedule": {"start": start, "duration": "PT8S"},
        "test": t, "participant": n, "participant-data": data})
    };
    let server_input = input(1);
    let server = std::thread::spawn(move || answer("run", &server_input));
    let client = answer("run", &input(0));
    let served = server.join().unwrap();
    assert_eq!(served["succeeded"], true, "{served}");
    assert!(
        served["diags"].as_str().unwrap().contains("served its test"),
        "{served}"
    );

    let merged = answer("merged-results", &json!({"test": t, "results": [client, served]}));
    assert_valid(&schema("throughput-result.schema.json"), &merged);
    assert_eq!(merged["succeeded"], true, "{}", merged["error"]);
    let sum = &merged["summary"]["summary"];
    assert!(sum["throughput-bits"].as_f64().unwrap() > 1e8, "{sum}");
    assert!(
        sum["retransmits"].is_u64() && sum["rtt"].as_f64().unwrap() > 0.0,
        "{sum}"
    );
    assert_eq!(merged["summary"]["streams"].as_array().unwrap().len(), 2);
    let intervals = merged["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 2, "{intervals:?}");
    assert_eq!(intervals[0]["streams"].as_array().unwrap().len(), 2);
    let diags = merged["diags"].as_str().unwrap();
    assert!(diags.contains("landspeed verdict: trusted"), "{diags}");
    assert!(diags.contains("verified against the payload pattern"), "{diags}");
    assert!(diags.contains("Participant 1:"), "{diags}");
    // What held the rate back, as the text report's last line says it.
    assert!(
        diags.contains("landspeed limited by (client->server): "),
        "{diags}"
    );
}

#[test]
fn a_server_that_never_ran_and_a_client_with_no_answer_both_fail_within_the_window() {
    let _one = serial();
    // The port is held by a listener that accepts and never speaks: landspeed's server cannot bind
    // it, and the client connects to it and hears nothing.
    let silent = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let t = test(json!({"dest": "127.0.0.1", "duration": "PT1S"}));
    let data = json!([{"schema": 1}, {"schema": 1, "server_port": port}]);
    let start = soon(0.5);
    let input = |n: u64| {
        json!({"schema": 1, "schedule": {"start": start, "duration": "PT6S"},
        "test": t, "participant": n, "participant-data": data})
    };
    let served = answer("run", &input(1));
    assert_eq!(served["succeeded"], false, "{served}");
    assert!(
        served["error"]
            .as_str()
            .unwrap()
            .contains("Address already in use"),
        "{served}"
    );
    let t0 = std::time::Instant::now();
    let client = answer("run", &input(0));
    assert_eq!(client["succeeded"], false, "{client}");
    // Its window ends 6 s after a start at most 0.5 s away; the answer comes 1 s before.
    assert!(t0.elapsed() < Duration::from_secs(7), "{:?}", t0.elapsed());
    assert!(
        client["error"]
            .as_str()
            .unwrap()
            .contains("by the end of the run's window"),
        "{client}"
    );
    drop(silent);
}

/// The pids of a process's children (Linux's /proc list for its main thread).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Gone, or a zombie nobody reaps (a container's init may not).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        .unwrap_or(true)
}

#[test]
fn a_server_participant_ended_by_signal_as_pschedulers_runner_ends_it_leaves_no_server() {
    let _one = serial();
    let port = free_port();
    let t = test(json!({"dest": "127.0.0.1", "duration": "PT30S"}));
    let data = json!([{"schema": 1}, {"schema": 1, "server_port": port}]);
    let input = json!({"schema": 1, "schedule": {"start": soon(0.0), "duration": "PT60S"},
        "test": t, "participant": 1, "participant-data": data});
    let mut tool = Command::new(bin())
        .args(["pscheduler", "run"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn landspeed pscheduler run");
    tool.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    // Its server is up once it has a child and the port is taken (no client ever comes).
    let mut server = None;
    let up = common::wait_until(Duration::from_secs(20), || {
        server = children(tool.id()).first().copied();
        server.is_some() && common::listening(port)
    });
    if !up {
        let _ = tool.kill();
        let _ = tool.wait();
        panic!("the server participant's server never listened");
    }
    let server = server.unwrap();
    // pScheduler's runner at the window's end or on its own restart: SIGTERM (then SIGKILL).
    let term = Command::new("kill")
        .args(["-TERM", &tool.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let _ = tool.wait();
    let gone = common::wait_until(Duration::from_secs(10), || ended(server));
    if !gone {
        let _ = Command::new("kill").args(["-KILL", &server.to_string()]).status();
    }
    assert!(gone, "the server ({server}) outlived the tool that started it");
    assert!(!common::listening(port), "port {port} still has a listener");
}

#[test]
fn a_loopback_udp_run_carries_datagram_counts() {
    let _one = serial();
    // bandwidth is per stream, as iperf3's -b: 2 × 50 Mbit/s.
    let t = test(
        json!({"loopback": true, "udp": true, "bandwidth": 50000000, "parallel": 2, "duration": "PT2S"}),
    );
    let r = answer(
        "run",
        &json!({"participant": 0, "test": t, "participant-data": [{"schema": 1}]}),
    );
    let merged = answer("merged-results", &json!({"test": t, "results": [r]}));
    assert_valid(&schema("throughput-result.schema.json"), &merged);
    assert_eq!(merged["succeeded"], true, "{}", merged["error"]);
    let sum = &merged["summary"]["summary"];
    assert!(sum["sent"].as_u64().unwrap() > 1000, "{sum}");
    assert!(sum["lost"].is_u64() && sum["jitter"].is_number(), "{sum}");
    assert!(sum["retransmits"].is_null(), "{sum}");
    let bits = sum["throughput-bits"].as_f64().unwrap();
    assert!(
        (80e6..120e6).contains(&bits),
        "two streams at 50 Mbit/s each: {sum}"
    );
    // Every interval says what was sent and lost in it, and none is the empty wait for the end (a
    // last part-interval stays when datagrams arrived in it: on a busy machine a few arrive late).
    let intervals = merged["intervals"].as_array().unwrap();
    assert!((2..=3).contains(&intervals.len()), "{intervals:#?}");
    let mut sent = 0;
    for i in intervals {
        let s = &i["summary"];
        assert!(
            s["lost"].is_u64() && s["throughput-bytes"].as_u64().unwrap() > 0,
            "{s}"
        );
        sent += s["sent"].as_u64().unwrap();
        for st in i["streams"].as_array().unwrap() {
            assert!(st["sent"].is_u64() && st["lost"].is_u64(), "{st}");
        }
    }
    // The intervals' datagrams add up to the summary's (the sender's own count), a few in flight.
    assert!(
        sum["sent"].as_u64().unwrap().abs_diff(sent) <= 4,
        "{sent} vs {sum}"
    );
}

#[test]
fn the_warm_up_is_marked_and_the_kept_intervals_start_at_zero() {
    let _one = serial();
    let t = test(json!({"loopback": true, "duration": "PT2S", "omit": "PT1S", "fq-rate": 100000000}));
    let r = answer(
        "run",
        &json!({"participant": 0, "test": t, "participant-data": [{"schema": 1}]}),
    );
    assert_valid(&schema("throughput-result.schema.json"), &r);
    let iv: Vec<(f64, f64, bool)> = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let s = &i["summary"];
            (
                s["start"].as_f64().unwrap(),
                s["end"].as_f64().unwrap(),
                s["omitted"] == true,
            )
        })
        .collect();
    assert_eq!(iv.len(), 3, "{iv:?}");
    assert!(iv[0].2 && !iv[1].2 && !iv[2].2, "{iv:?}");
    assert_eq!(
        (iv[1].0, iv[2].0),
        (0.0, 1.0),
        "iperf3 restarts at 0 after the warm-up: {iv:?}"
    );
    let end = r["summary"]["summary"]["end"].as_f64().unwrap();
    assert!(
        (1.9..2.2).contains(&end),
        "the summary is the 2 s asked for: {end}"
    );
}

#[test]
fn an_unreachable_server_is_a_failed_result_not_a_crash() {
    let _one = serial();
    let port = free_port(); // nothing listens there
    let t = test(
        json!({"dest": "127.0.0.1", "duration": "PT1S", "single-ended": true, "single-ended-port": port}),
    );
    let r = answer("run", &json!({"participant": 0, "test": t}));
    assert_eq!(r["succeeded"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("refused"), "{r}");
    let merged = answer("merged-results", &json!({"test": t, "results": [r]}));
    assert_eq!(merged["succeeded"], false);
}

#[test]
fn the_install_layout_is_what_pscheduler_lists_and_runs() {
    let dest = std::env::temp_dir().join(format!("landspeed-pscheduler-{}", std::process::id()));
    let contrib = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/pscheduler");
    let make = Command::new("make")
        .args(["-C", contrib, "install"])
        .arg(format!("DESTDIR={}", dest.display()))
        .output()
        .expect("make (installed by .ci/run)");
    assert!(make.status.success(), "{}", String::from_utf8_lossy(&make.stderr));
    // pScheduler finds a tool as a directory under classes/tool holding one executable per method.
    let tool = dest.join("usr/lib/pscheduler/classes/tool/landspeed");
    for m in [
        "enumerate",
        "can-run",
        "duration",
        "participant-data",
        "run",
        "merged-results",
    ] {
        let meta = std::fs::metadata(tool.join(m)).unwrap_or_else(|e| panic!("{m}: {e}"));
        assert!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0,
            "{m}"
        );
    }
    assert!(dest.join("etc/pscheduler/tool/landspeed.conf").exists());
    let out = Command::new(tool.join("duration"))
        .env("LANDSPEED", bin())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(test(json!({"dest": "b"})).to_string().as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dest);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, json!({"duration": "PT19S"}));
}
