//! Every way a test is described lowers into the same test for the same intent: `run`'s flags, a
//! sweep's cell, a mesh file's options, the iperf3 drop-in's command line, a pScheduler throughput
//! spec and the exporter's probe query, each written the way its own users write it (iperf3's and
//! pScheduler's rates per stream, landspeed's for all streams; iperf3's 128 KiB writes), against
//! `run`'s flags for the same intent. One lowering (`landspeed_core::intent`) holds the defaults
//! and per-stream rules; this test fails when a front end applies one of them again on its own.

use crate::common::client::{cell_spec, options_from_args};
use crate::common::run_args::RunArgs;
use landspeed_core::config::{Direction, Test};
use landspeed_plan::sweep::{CellKey, Order, SweepPlan, PLAN_VERSION};
use proptest::prelude::*;

/// An intent, as a user has it in mind.
#[derive(Debug, Clone)]
struct Intent {
    streams: u32,
    seconds: u32,
    udp: bool,
    reverse: bool,
    /// Each stream's rate, Mbit/s.
    per_stream_mbps: Option<u32>,
    window_kib: Option<u32>,
    length_kib: Option<u32>,
    omit_s: Option<u32>,
}

fn intents() -> impl Strategy<Value = Intent> {
    (
        1u32..=8,
        1u32..=30,
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(1u32..=2000),
        proptest::option::of(64u32..=8192),
        proptest::option::of(1u32..=60),
        proptest::option::of(1u32..=3),
    )
        .prop_map(
            |(streams, seconds, udp, reverse, per_stream_mbps, window_kib, length_kib, omit_s)| Intent {
                streams,
                seconds,
                udp,
                reverse,
                per_stream_mbps,
                window_kib,
                length_kib,
                omit_s,
            },
        )
}

impl Intent {
    /// `run`'s flags (its rate is the total of all streams), with `length` when none is said.
    fn run_words(&self, length_unsaid: Option<&str>) -> Vec<String> {
        let mut w: Vec<String> = ["192.0.2.1", "-p", "5201", "--no-save"]
            .map(String::from)
            .to_vec();
        let mut opt = |f: &str, v: Option<String>| {
            if let Some(v) = v {
                w.extend([f.to_string(), v]);
            }
        };
        opt("-P", Some(self.streams.to_string()));
        opt("-t", Some(format!("{}s", self.seconds)));
        opt(
            "-b",
            self.per_stream_mbps.map(|r| format!("{}M", r * self.streams)),
        );
        opt("-w", self.window_kib.map(|k| format!("{k}K")));
        let unsaid = length_unsaid.map(String::from);
        opt("-l", self.length_kib.map(|k| format!("{k}K")).or(unsaid));
        opt("-O", self.omit_s.map(|s| format!("{s}s")));
        if self.udp {
            w.push("-u".into());
        }
        if self.reverse {
            w.push("-R".into());
        }
        w
    }

    /// iperf3's client command line (its -b per stream).
    fn iperf3_words(&self) -> Vec<String> {
        let mut w: Vec<String> = ["iperf3", "-c", "192.0.2.1", "-P"].map(String::from).to_vec();
        w.push(self.streams.to_string());
        w.extend(["-t".into(), self.seconds.to_string()]);
        let mut opt = |f: &str, v: Option<String>| {
            if let Some(v) = v {
                w.extend([f.to_string(), v]);
            }
        };
        opt("-b", self.per_stream_mbps.map(|r| format!("{r}M")));
        opt("-w", self.window_kib.map(|k| format!("{k}K")));
        opt("-l", self.length_kib.map(|k| format!("{k}K")));
        opt("-O", self.omit_s.map(|s| s.to_string()));
        if self.udp {
            w.push("-u".into());
        }
        if self.reverse {
            w.push("-R".into());
        }
        w
    }

    /// A pScheduler throughput test spec (its bandwidth per stream, in bits per second).
    fn pscheduler_spec(&self) -> serde_json::Value {
        let mut s = serde_json::json!({
            "schema": 1, "dest": "192.0.2.1", "parallel": self.streams,
            "duration": format!("PT{}S", self.seconds), "udp": self.udp, "reverse": self.reverse,
        });
        let mut put = |k: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                s[k] = v;
            }
        };
        put(
            "bandwidth",
            self.per_stream_mbps.map(|r| (u64::from(r) * 1_000_000).into()),
        );
        put(
            "window-size",
            self.window_kib.map(|k| (u64::from(k) * 1024).into()),
        );
        put(
            "buffer-length",
            self.length_kib.map(|k| (u64::from(k) * 1024).into()),
        );
        put("omit", self.omit_s.map(|o| format!("PT{o}S").into()));
        s
    }

    /// A mesh file's test options (its rate for all streams).
    fn mesh_options(&self) -> landspeed_plan::mesh::plan::TestOptions {
        landspeed_plan::mesh::plan::TestOptions {
            time: Some(format!("{}s", self.seconds)),
            omit: self.omit_s.map(|s| format!("{s}s")),
            streams: Some(self.streams),
            length: self.length_kib.map(|k| format!("{k}K")),
            window: self.window_kib.map(|k| format!("{k}K")),
            udp: Some(self.udp),
            rate: self.per_stream_mbps.map(|r| format!("{}M", r * self.streams)),
            ..Default::default()
        }
    }
}

fn run_args(words: &[String]) -> RunArgs {
    #[derive(clap::Parser)]
    struct RunOnly {
        #[command(flatten)]
        run: RunArgs,
    }
    use clap::Parser;
    RunOnly::try_parse_from(std::iter::once("run".to_string()).chain(words.iter().cloned()))
        .unwrap_or_else(|e| panic!("{words:?}: {e}"))
        .run
}

/// The test `run` runs for these words.
fn run_test(words: &[String]) -> Test {
    options_from_args(words)
        .unwrap_or_else(|e| panic!("{words:?}: {e}"))
        .spec
}

fn drop_in_test(i: &Intent) -> Test {
    use clap::Parser;
    let o = super::iperf3::Opts::try_parse_from(i.iperf3_words()).unwrap();
    run_test(&super::iperf3::run_args(&o, "192.0.2.1"))
}

fn pscheduler_test(i: &Intent) -> Test {
    use landspeed_pscheduler::methods::{plan, Role, DEFAULT_PORT};
    let test = serde_json::json!({"type": "throughput", "spec": i.pscheduler_spec()});
    let input = serde_json::json!({"participant": 0, "test": test,
        "participant-data": [{"schema": 1}, {"schema": 1, "server_port": 5201}]});
    match plan(&input, DEFAULT_PORT).unwrap_or_else(|e| panic!("{input}: {e}")) {
        Role::Client { args, .. } => run_test(&args),
        Role::Server { .. } => unreachable!("participant 0 is the client"),
    }
}

/// The sweep's cell of `i`'s streams and window, from a sweep whose options are `i`'s others.
fn sweep_cell_test(i: &Intent) -> Test {
    let base = Intent {
        window_kib: None,
        ..i.clone()
    };
    // A sweep takes its streams and windows from its grid, not from -P and -w; its -b is the total
    // of each cell's streams, whatever their number.
    let mut words = base.run_words(None);
    let p = words.iter().position(|w| w == "-P").unwrap();
    words.drain(p..p + 2);
    let cell = cell_spec(&run_args(&words)).unwrap();
    let plan = SweepPlan {
        version: PLAN_VERSION,
        host: "192.0.2.1".into(),
        port: 5201,
        windows_bytes: vec![u64::from(i.window_kib.unwrap_or(64)) * 1024],
        streams: vec![i.streams],
        directions: vec![Direction::Forward],
        repeat: 1,
        time_s: f64::from(i.seconds),
        order: Order::Sequential,
        seed: 1,
        cell: Some(cell.clone()),
        run_args: vec![],
        command_line: String::new(),
    };
    let key = CellKey {
        window_bytes: plan.windows_bytes[0],
        streams: i.streams,
        direction: if i.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        repeat: 0,
    };
    let opts = crate::common::client::options_for("192.0.2.1", 5201, &cell).unwrap();
    landspeed_campaign::sweep::cell_options(&opts, &plan, &key)
        .unwrap()
        .spec
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_way_in_lowers_the_same_intent_into_the_same_test(i in intents()) {
        let run = run_test(&i.run_words(None));
        // iperf3 writes 128 KiB for TCP unless told, and sends UDP at 1 Mbit/s per stream unless
        // told (the drop-in says both to run: they are iperf3's defaults, not landspeed's).
        let iperf3_length = (!i.udp).then_some("128K");
        let iperf3 = Intent {
            per_stream_mbps: i.per_stream_mbps.or(i.udp.then_some(1)),
            ..i.clone()
        };
        prop_assert_eq!(drop_in_test(&i), run_test(&iperf3.run_words(iperf3_length)), "drop-in");
        prop_assert_eq!(pscheduler_test(&i), run.clone(), "pScheduler");
        let windowed = Intent { window_kib: Some(i.window_kib.unwrap_or(64)), ..i.clone() };
        prop_assert_eq!(sweep_cell_test(&i), run_test(&windowed.run_words(None)), "sweep cell");
        // A mesh is expanded away from its senders: lowered with their CPUs unknown, as `run`'s
        // words are here.
        // Its data flows from a host to another, forward only.
        let forward = Intent { reverse: false, ..i.clone() };
        let mesh = forward.mesh_options().test().unwrap();
        let unknown_host = run_args(&forward.run_words(None)).test.intent().validated(None).unwrap();
        prop_assert_eq!(mesh, unknown_host, "mesh");
    }

    #[test]
    fn the_exporters_probe_is_runs_test(streams in 1u32..=8, seconds in 1u32..=9, udp: bool,
                                        reverse: bool, mbps in proptest::option::of(1u32..=900)) {
        let mut q: Vec<(String, String)> = vec![
            ("target".into(), "192.0.2.1".into()),
            ("time".into(), format!("{seconds}s")),
            ("streams".into(), streams.to_string()),
            ("reverse".into(), u8::from(reverse).to_string()),
            ("udp".into(), u8::from(udp).to_string()),
        ];
        let rate = mbps.filter(|_| udp);
        if let Some(r) = rate {
            q.push(("rate".into(), format!("{r}M")));
        }
        let p = super::exporter::parse_query(&q, std::time::Duration::from_secs(60)).unwrap();
        let i = Intent {
            streams, seconds, udp, reverse,
            per_stream_mbps: None, window_kib: None, length_kib: None, omit_s: None,
        };
        let mut words = i.run_words(None);
        // The exporter's rate is the total, as run's.
        if let Some(r) = rate {
            words.extend(["-b".into(), format!("{r}M")]);
        }
        prop_assert_eq!(run_test(&super::exporter::run_args(&p)), run_test(&words));
    }
}
