//! `landspeed wan`: the command line of the WAN emulator (up, down, change, status, exec, and the hidden
//! `forward` that `up` starts in the background). The emulator itself is the landspeed-wan crate; its
//! text is rendered by landspeed-report's `wan_text`.

use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use landspeed_report::wan_text;
use landspeed_wan::daemon;
use landspeed_wan::{PathSettings, Request, Status, WanError};

#[derive(Args, Debug)]
pub struct WanArgs {
    #[command(subcommand)]
    pub command: WanCommand,
}

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum WanCommand {
    /// Create an emulated path: namespaces for hosts A and B joined by a userspace forwarder.
    #[command(
        after_help = "Examples:\n  landspeed wan up lfn --rtt 100ms --rate 1G\n  landspeed wan up lossy --rtt 40ms --rate 200M --loss 0.1% --queue 2bdp\n  landspeed wan up asym --rtt 60ms --rate 1G --b-to-a rate=100M --b-to-a delay=20ms\n  landspeed wan up bad --rtt 20ms --rate 1G --corrupt-payload 0.01%\n  landspeed wan up aqm --rtt 100ms --rate 100M --queue 4bdp --aqm codel\n  landspeed wan up fq --rtt 100ms --rate 100M --queue 4bdp --aqm fq-codel\n  landspeed wan up l4s --rtt 20ms --rate 100M --aqm dualpi2:any-ect --ecn\n\nThen:\n  landspeed wan exec lfn b -- landspeed serve &\n  landspeed wan exec lfn a -- landspeed run 198.18.0.2 -t 10\n  landspeed wan status lfn\n  landspeed wan down lfn"
    )]
    Up(Box<UpArgs>),
    /// Stop an emulator and remove its namespaces, devices and files.
    Down(DownArgs),
    /// Change a running emulator's path now: RTT, rate, loss, queue, jitter, or an outage.
    #[command(
        after_help = "Settings not given stay as they are; a queue set in bytes stays in bytes when the rate or RTT\nchanges (as a router's buffer does). Every change is stamped in `wan status` and in the results\nof tests crossing the emulator.\n\nExamples:\n  landspeed wan change lfn --rtt 80ms                    # a route change: 20 ms to 80 ms\n  landspeed wan change lfn --rate 100M                   # the bottleneck slows to 100 Mbit/s\n  landspeed wan change lfn --down 3s                     # a 3 s outage, then the path as it was\n  landspeed wan change lfn --down 5s --proto tcp         # a UDP test's control connection only\n  landspeed wan change lfn --down 5s --ports 40000-40003 # the data of `run --cport 40000 -P 4` only\n  landspeed wan change lfn --down 5s --except-ports 40000-40003   # its control connection only\n  landspeed wan change lfn --direction b-to-a --loss 1%  # loss on the way back only"
    )]
    Change(ChangeArgs),
    /// Settings and live counters of one emulator, or a list of all.
    Status(StatusArgs),
    /// Run a command inside host A or B of an emulator.
    #[command(after_help = "Example:\n  landspeed wan exec lfn a -- landspeed run 198.18.0.2 -P 4")]
    Exec(ExecArgs),
    /// (internal) The forwarder process that `up` starts.
    #[command(hide = true)]
    Forward {
        name: String,
        settings_json: String,
        /// The schedule file's text, checked by `up`.
        #[arg(long)]
        schedule: Option<String>,
    },
}

/// The path's settings that `up` sets and `change` changes.
#[derive(Args, Debug)]
pub struct PathFlags {
    /// Round-trip time; each direction gets half as one-way delay [up: default 0ms].
    #[arg(long)]
    pub rtt: Option<String>,
    /// Bottleneck rate of IP packets (e.g. 1G, 200M); unlimited when not given (`unlimited` in a
    /// change).
    #[arg(long)]
    pub rate: Option<String>,
    /// Bottleneck queue: a size (4M) or a multiple of the bandwidth-delay product (2bdp) [up:
    /// default 1bdp].
    #[arg(long)]
    pub queue: Option<String>,
    /// The bottleneck's queue discipline: tail-drop [up: default], codel (RFC 8289: 5 ms target,
    /// 100 ms interval), codel:TARGET:INTERVAL, pie (RFC 8033: 15 ms target), pie:TARGET, fq-codel
    /// (RFC 8290: a CoDel queue per flow), fq-codel:TARGET:INTERVAL, dualpi2 (RFC 9332: the L4S dual
    /// queue; ECT(1) and CE are L4S), dualpi2:any-ect (ECT(0) too) or prio (strict priority by DSCP:
    /// EF, VA, CS5-CS7 first, CS1 and LE last); ECN-capable packets are marked instead of dropped.
    #[arg(long, value_name = "DISCIPLINE")]
    pub aqm: Option<String>,
    /// Random loss per packet, Bernoulli (0.001 or 0.1%; 0 for none).
    #[arg(long)]
    pub loss: Option<String>,
    /// Loss model: bernoulli:P or gilbert:P,R[,LOSS_IN_BAD[,LOSS_IN_GOOD]] (Gilbert–Elliott).
    #[arg(long)]
    pub loss_model: Option<String>,
    /// Delay variation, ± per packet, without reordering.
    #[arg(long)]
    pub jitter: Option<String>,
}

#[derive(Args, Debug)]
pub struct ChangeArgs {
    /// The running emulator.
    pub name: String,
    #[command(flatten)]
    pub path: PathFlags,
    /// An outage from now: every packet dropped for this long (1ms to 1h), then the path as it was.
    #[arg(long, value_name = "DURATION", conflicts_with = "up")]
    pub down: Option<String>,
    /// With --down: take only this protocol down (tcp or udp), so that a UDP test's data and its TCP
    /// control connection fail apart.
    #[arg(long, requires = "down", value_parser = ["tcp", "udp"])]
    pub proto: Option<String>,
    /// With --down: take only the packets to or from these ports down (`40000` or `40000-40007`):
    /// a TCP test's data streams, bound there with `run --cport`, and not its control connection.
    #[arg(
        long,
        value_name = "A[-B]",
        requires = "down",
        conflicts_with = "except_ports"
    )]
    pub ports: Option<String>,
    /// With --down: take every packet down but those to or from these ports: a TCP test's control
    /// connection, and not its data streams bound there with `run --cport`.
    #[arg(long, value_name = "A[-B]", requires = "down")]
    pub except_ports: Option<String>,
    /// End an outage now (one from --down or a schedule), before its time.
    #[arg(long)]
    pub up: bool,
    /// Which way the change applies: both, a-to-b or b-to-a.
    #[arg(long, default_value = "both")]
    pub direction: String,
    /// Print the applied change as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Emulator name: 1 to 8 characters of a-z and 0-9.
    pub name: String,
    #[command(flatten)]
    pub path: PathFlags,
    /// Probability that a packet is held back and overtaken.
    #[arg(long)]
    pub reorder: Option<String>,
    /// How long a reordered packet is held back.
    #[arg(long, default_value = "1ms")]
    pub reorder_gap: String,
    /// Probability that a packet is delivered twice.
    #[arg(long)]
    pub duplicate: Option<String>,
    /// Probability that a packet's payload gets one bit flipped, checksums fixed up (TCP cannot see it).
    #[arg(long)]
    pub corrupt_payload: Option<String>,
    /// MTU of both hosts' interfaces.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Seed of the impairments' random numbers.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run the forwarder at the highest ordinary priority (nice -20) instead of real-time: the hosts
    /// keep more CPU on a small machine, the path's delay is less exact under load (`wan status`
    /// shows how late packets leave).
    #[arg(long)]
    pub no_realtime: bool,
    /// Both hosts' TCP asks for ECN (net.ipv4.tcp_ecn = 1 in their namespaces; the default, 2,
    /// only answers a peer that asks), so a queue discipline marks instead of dropping.
    #[arg(long)]
    pub ecn: bool,
    /// A→B only: KEY=VALUE with KEY delay (one-way), rate, queue, aqm, loss, loss-model, jitter,
    /// reorder, reorder-gap, duplicate, corrupt-payload (repeatable).
    #[arg(long = "a-to-b", value_name = "KEY=VALUE")]
    pub a_to_b: Vec<String>,
    /// B→A only, as --a-to-b.
    #[arg(long = "b-to-a", value_name = "KEY=VALUE")]
    pub b_to_a: Vec<String>,
    /// Play a schedule of changes: one a line, `AT [every PERIOD [times N]] KEY=VALUE...` with keys
    /// rtt, delay, rate, queue, aqm, loss, loss-model, jitter, down, direction (e.g. `10s rtt=80ms`,
    /// `5s every 10s down=2s`); times count from `up`.
    #[arg(long, value_name = "FILE")]
    pub schedule: Option<std::path::PathBuf>,
    /// Print the emulator's state as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// Emulator to stop.
    #[arg(required_unless_present = "all")]
    pub name: Option<String>,
    /// Stop every emulator and remove every leftover namespace with landspeed's prefix.
    #[arg(long, conflicts_with = "name")]
    pub all: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Emulator to show (all when omitted).
    pub name: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExecArgs {
    pub name: String,
    /// Host: a or b.
    pub host: String,
    /// The command and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<String>,
}

fn usage(e: WanError) -> anyhow::Error {
    match e {
        WanError::Settings(_)
        | WanError::Side(_)
        | WanError::Change(_)
        | WanError::Refused(_)
        | WanError::NotFound(_) => UsageError(e.to_string()).into(),
        e => e.into(),
    }
}

pub fn wan(a: WanArgs) -> Result<bool> {
    match a.command {
        WanCommand::Up(u) => up(*u),
        WanCommand::Down(d) => down(d),
        WanCommand::Change(c) => change(c),
        WanCommand::Status(s) => status(s),
        WanCommand::Exec(e) => {
            daemon::exec(&e.name, &e.host, &e.command).map_err(usage)?;
            unreachable!("exec returns only on error")
        }
        WanCommand::Forward {
            name,
            settings_json,
            schedule,
        } => {
            let s: PathSettings = serde_json::from_str(&settings_json).context("bad forwarder settings")?;
            let plan = landspeed_wan::change::parse_schedule(schedule.as_deref().unwrap_or(""))?;
            daemon::forward(&name, s, plan)?;
            Ok(true)
        }
    }
}

fn up(u: UpArgs) -> Result<bool> {
    let req = Request {
        rtt: Some(u.path.rtt.unwrap_or_else(|| "0ms".into())),
        rate: u.path.rate,
        queue: u.path.queue,
        loss: u.path.loss,
        loss_model: u.path.loss_model,
        jitter: u.path.jitter,
        reorder: u.reorder,
        reorder_gap: Some(u.reorder_gap),
        duplicate: u.duplicate,
        corrupt_payload: u.corrupt_payload,
        aqm: u.path.aqm,
        mtu: Some(u.mtu),
        seed: u.seed,
        no_realtime: u.no_realtime,
        ecn: u.ecn,
        a_to_b: u.a_to_b,
        b_to_a: u.b_to_a,
    };
    let settings = req.resolve().map_err(|e| usage(e.into())).and_then(|s| {
        landspeed_wan::settings::check_name(&u.name)
            .map(|_| s)
            .map_err(|e| usage(e.into()))
    })?;
    let schedule = match &u.schedule {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?),
        None => None,
    };
    if let Some(text) = &schedule {
        landspeed_wan::change::parse_schedule(text).map_err(|e| {
            UsageError(format!(
                "schedule {}: {e}",
                u.schedule.as_ref().unwrap().display()
            ))
        })?;
    }
    let exe = std::env::current_exe().context("cannot find the landspeed executable")?;
    let state = daemon::up(&u.name, &settings, schedule.as_deref(), &exe)?;
    if u.json {
        outln!("{}", serde_json::to_string_pretty(&state)?);
    } else {
        out!("{}", wan_text::up_text(&state));
    }
    Ok(true)
}

fn down(d: DownArgs) -> Result<bool> {
    let names = match d.name {
        Some(n) => vec![n],
        None => daemon::known(),
    };
    for n in &names {
        let done = daemon::down(n).map_err(usage)?;
        if !done.ended.is_empty() {
            outln!("{}", wan_text::ended_text(n, &done));
        }
        if done.found {
            outln!("wan {n}: down");
        } else if !d.all {
            errln!("wan {n}: was not up");
        }
    }
    if d.all && names.is_empty() {
        outln!("no emulators");
    }
    Ok(true)
}

/// The change's flags as the `KEY=VALUE` words every change is read from.
fn change_words(c: &ChangeArgs) -> Vec<String> {
    let p = &c.path;
    let flags = [
        ("rtt", &p.rtt),
        ("rate", &p.rate),
        ("queue", &p.queue),
        ("aqm", &p.aqm),
        ("loss", &p.loss),
        ("loss-model", &p.loss_model),
        ("jitter", &p.jitter),
        ("down", &c.down),
        ("proto", &c.proto),
        ("ports", &c.ports),
        ("except-ports", &c.except_ports),
    ];
    let mut words: Vec<String> = flags
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
        .collect();
    if c.up {
        words.push("up".into());
    }
    if c.direction != "both" {
        words.push(format!("direction={}", c.direction));
    }
    words
}

fn change(c: ChangeArgs) -> Result<bool> {
    let words = change_words(&c);
    landspeed_wan::change::Change::parse(&words).map_err(|e| usage(e.into()))?;
    let applied = daemon::change(&c.name, &words).map_err(usage)?;
    if c.json {
        outln!("{}", serde_json::to_string_pretty(&applied)?);
    } else {
        outln!("{}", wan_text::applied_text(&c.name, &applied));
    }
    Ok(true)
}

fn status(s: StatusArgs) -> Result<bool> {
    let all: Vec<Status> = match &s.name {
        Some(n) => vec![daemon::status(n).map_err(usage)?],
        None => daemon::known()
            .iter()
            .filter_map(|n| daemon::status(n).ok())
            .collect(),
    };
    if s.json {
        let v = if s.name.is_some() {
            serde_json::to_value(&all[0])?
        } else {
            serde_json::to_value(&all)?
        };
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else if all.is_empty() {
        outln!("no emulators");
    } else {
        for st in &all {
            out!("{}", wan_text::status_text(st));
        }
    }
    Ok(all.iter().all(|s| s.running))
}
