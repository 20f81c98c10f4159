//! The command definitions: every command of the binary and its help text, in one place that nothing
//! below imports. Each command's arguments live with the command (`cmd::*`), or in `common` where
//! several commands take them (`run`'s arguments, which sweeps, the exporter and pScheduler reuse).

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "landspeed",
    version,
    about = "Measure how fast bulk data really moves between hosts over TCP and UDP, with both ends' figures",
    long_about = None,
    after_help = "Examples:\n  landspeed demo                         loopback server + client, 4 streams, 5 s\n  landspeed serve                        serve tests on port 5201 (IPv4 and IPv6)\n  landspeed run server.example -P 8 -w 64M -t 30\n  landspeed run ::1 -R --json            server sends; one JSON document at the end\n  landspeed run host -u -b 1G            UDP at 1 Gbit/s: loss, jitter, reordering, every datagram verified\n  landspeed run iperf3.host --iperf3     drive an iperf3 -s server\n  landspeed path host                    RTT, route, path MTU and bottleneck capacity\n  landspeed history                      archived runs (every run is saved)\n  landspeed sweep host --windows 64K..8M --streams 1,2,4   windows × streams, plotted and fitted\n  landspeed report --sweep 1 --html s.html   one self-contained page: tables, plots, both hosts\n  landspeed wan up lfn --rtt 100ms --rate 1G   an emulated long fat network (root)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve tests: landspeed's protocol and iperf3 clients, TCP and UDP, on one port.
    #[command(
        after_help = "Examples:\n  landspeed serve\n  landspeed serve -p 5300 --bind 192.0.2.10\n  landspeed serve --once\n  landspeed serve --max-tests 8 --max-duration 60s --max-streams 16 --allow 192.0.2.0/24 --log-json\n  landspeed serve --metrics 127.0.0.1:9572    # OpenMetrics on http://127.0.0.1:9572/metrics",
        after_long_help = crate::cmd::serve::LONG_HELP,
    )]
    Serve(crate::cmd::serve::ServeArgs),
    /// Run one test against a landspeed server (or an iperf3 server).
    #[command(
        after_help = "Examples:\n  landspeed run host -P 4 -t 30            4 streams for 30 s\n  landspeed run host -n 10G -l 1M          exactly 10 GiB in 1 MiB writes\n  landspeed run host -w 128M -i 5          128 MiB windows, a line every 5 s\n  landspeed run host --bidir --json        both directions, JSON result\n  landspeed run host -P 9 --cpus 0 --server-cpus 1   NTttcp-style pinning"
    )]
    Run(crate::common::run_args::RunArgs),
    /// Many hosts at once: the tests of a plan file (pairs, one-to-many, many-to-one, full mesh) run
    /// by the hosts themselves, started together, reported as one campaign.
    #[command(
        after_help = "Examples:\n  landspeed mesh plan.toml --auth ops:ops.key\n  landspeed mesh plan.toml --json > campaign.json\n  landspeed mesh plan.toml --dry-run          the tests the plan expands to\n\nEvery sending host runs `landspeed serve --auth-keys KEYS --allow-control`; see docs/mesh.md for\nthe plan format."
    )]
    Mesh(crate::cmd::mesh::MeshArgs),
    /// Loopback server and client in one process: 4 streams for 5 seconds, full report.
    Demo(crate::cmd::run::DemoArgs),
    /// Measure the path to a host: RTT (UDP echo, TCP connect), the route, and the path MTU.
    #[command(
        after_help = "Examples:\n  landspeed path host                    RTT (UDP echo and TCP connect), route and path MTU\n  landspeed path host --rtt -c 100 -i 10ms   100 UDP echo probes to a landspeed server, 10 ms apart\n  landspeed path host --tcp 443          TCP connect time to port 443 of any host\n  landspeed path host --trace -n         the route, numeric\n  landspeed path host --pmtu             largest packet that passes, and where bigger ones stop\n  landspeed path host --json             everything as one JSON document"
    )]
    Path(crate::cmd::path::PathArgs),
    /// Latency under load in phases: idle, download, upload, both, idle again, probed throughout.
    #[command(
        after_help = "Each direction's queueing comes from the server's receive time in every echo reply, so it needs\nno synchronised clocks (docs/latency.md).\n\nExamples:\n  landspeed latency host                  five 5 s phases, one stream each way\n  landspeed latency host --phase 10s -P 4 --run-arg=-C --run-arg=bbr\n  landspeed latency host --json\n  landspeed latency host --dscp cs1 --probe-dscp ef --plots out/\n  landspeed wan exec lfn a -- landspeed latency 198.18.0.2 --aqm tail-drop,fq-codel,dualpi2 --plots out/"
    )]
    Latency(crate::cmd::latency::LatencyArgs),
    /// Responsiveness under working conditions (RPM, the IETF method): against landspeed serve
    /// --rpm, network-quality/server or any server of the method.
    #[command(
        after_help = "RPM is round trips a minute on a loaded path, as draft-ietf-ippm-responsiveness-09 defines it:
the mean of 60000 / a new connection's round trip (its TCP, TLS and HTTP steps averaged) and
60000 / an HTTP round trip on a loaded connection, each a mean with its highest 5% trimmed,
measured once the goodput has saturated, with each stage's confidence (docs/latency.md).

Examples:
  landspeed rpm host                      https://host:4043/config (landspeed serve --rpm [::]:4043)
  landspeed rpm https://host:8443/config --direction download
  landspeed rpm host --interval 1s        drafts 03-08's interval: a shorter test
  landspeed rpm host --direction concurrent   both directions at once: the draft's one score
  landspeed rpm host --json > r.json
  landspeed rpm --recompute r.json --draft 03   the same probes under draft-03's formula"
    )]
    Rpm(crate::cmd::rpm::RpmArgs),
    /// Multicast: one sender to a group, any number of receivers that join it (ASM or SSM, IPv4 or
    /// IPv6), each with its loss, order, duplicates, jitter and one-way delay, every byte verified.
    #[command(
        after_help = "Examples:\n  landspeed multicast receive 239.1.1.1           on each receiving host (joins, then waits)\n  landspeed multicast send 239.1.1.1 -b 10M -t 10  on the sending host\n  landspeed multicast send 239.1.1.1 --iperf2      to iperf -s -u -B 239.1.1.1\n\nSee docs/multicast.md."
    )]
    Multicast(crate::cmd::multicast::MulticastArgs),
    /// List the archived runs (every `run` is saved unless --no-save), or export them as CSV or JSON.
    #[command(
        after_help = "Examples:\n  landspeed history                       the last 50 runs\n  landspeed history --host h --since 2026-11-01\n  landspeed history --tag lsr --csv > runs.csv"
    )]
    History(crate::cmd::archive::HistoryArgs),
    /// Print one archived run, as `run` printed it (or its JSON document).
    Show(crate::cmd::archive::ShowArgs),
    /// A windows × streams campaign (SLAC's bulk-throughput method): every cell archived as it finishes.
    #[command(
        after_help = "Examples:\n  landspeed sweep host --windows 64K..8M --streams 1,2,4,8 --repeat 3 --time 10s\n  landspeed sweep host --windows 64K,256K,1M,4M --both-directions --plots out/ --html sweep.html\n  landspeed sweep host --windows 1M..8M:+1M -- -p 5300 -C bbr -l 1M    run options after --\n  landspeed sweep --resume 7             run the cells sweep 7 is missing (after Ctrl-C, a crash, a reboot)\n\nThe summary gives every cell's median, 90th percentile, min, max, mean, sd and 95% CI; per stream\ncount the line throughput = slope × window through the origin (R², the RTT it implies, where it\nsaturates); the best cell and the smallest buffer within 5% of it."
    )]
    Sweep(crate::cmd::sweep::SweepArgs),
    /// Report on archived runs or a sweep: text, plots (SVG + PNG) or one self-contained HTML page.
    #[command(
        after_help = "Examples:\n  landspeed report 12                     run 12 as text\n  landspeed report 12 13 14 --html runs.html --plots plots/\n  landspeed report --sweep 7 --html sweep7.html"
    )]
    Report(crate::cmd::report::ReportArgs),
    /// Throughput models: what the window, loss (Mathis, PFTK) and the link allow, and which binds.
    #[command(
        after_help = "Examples:\n  landspeed model --rate 10G --rtt 100ms --window 64M --streams 4\n  landspeed model --rtt 150ms --loss 0.001% --mss 8948      Mathis and PFTK for a jumbo-frame path\n  landspeed model --run 42 --rate 1G                       a stored run: predicted vs measured, RFC 6349 figures"
    )]
    Model(crate::cmd::model::ModelArgs),
    /// Host tuning advisor: the limits that keep the TCP window below the bandwidth-delay product.
    #[command(
        after_help = "Examples:\n  landspeed tune                                   this host's limits and general advice\n  landspeed tune --rate 10G --rtt 100ms --streams 4   what stops 4 streams filling 10 Gbit/s over 100 ms\n  landspeed tune --rate 10G --rtt 100ms --write /etc/sysctl.d/90-landspeed.conf\n  sudo landspeed tune --rate 10G --rtt 100ms --apply    change the kernel settings now\n\nNothing on the system changes unless --apply is given."
    )]
    Tune(crate::cmd::model::TuneArgs),
    /// Land Speed Record entry from a stored run: path length, bit·m/s, class, rule checks, the document.
    #[command(
        after_help = "Examples:\n  landspeed record --run 42 --path \"Sunnyvale, US > Kansas City, MO, US > Chicago, US > Geneva, CH\"\n  landspeed record --run 42 --path \"Los Angeles, US > Sunnyvale, US > Geneva, CH\" --leg-km 1=489 --markdown lsr.md --html lsr.html\n  landspeed record --result run.json --path \"34.05,-118.24 > 46.20,6.15\" --previous 68.4Pbm/s --min-duration 10m\n\nExit code 1 when a rule fails."
    )]
    Record(crate::cmd::record::RecordArgs),
    /// Packet-level WAN emulator: two namespaces joined through a delaying, shaping, lossy path.
    Wan(crate::cmd::wan::WanArgs),
    /// Make a key for `serve --auth-keys` and `run --auth`: 256 random bits as a key file line.
    #[command(after_help = "Examples:
  landspeed keygen alice --append /etc/landspeed/keys      the server's key file (mode 600)
  landspeed keygen alice > alice.key && chmod 600 alice.key   then copy the line to the server's file

A client's key file may be a copy of that line (run --auth alice:alice.key).")]
    Keygen(crate::cmd::keygen::KeygenArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  landspeed completions bash > ~/.local/share/bash-completion/completions/landspeed\n  landspeed completions zsh > ~/.zfunc/_landspeed\n  landspeed completions fish > ~/.config/fish/completions/landspeed.fish"
    )]
    Completions(crate::cmd::version::CompletionsArgs),
    /// (for packaging) Write the man pages, one per command, into a directory.
    #[command(hide = true)]
    Man(crate::cmd::version::ManArgs),
    /// Prometheus exporter: /probe?target=HOST[:PORT] runs one test and answers its figures.
    #[command(
        after_help = "Examples:\n  landspeed exporter --listen 127.0.0.1:9571\n  curl 'http://127.0.0.1:9571/probe?target=b.example.net&time=5s&streams=4'\n  curl 'http://127.0.0.1:9571/probe?target=b.example.net:5201&udp=1&rate=200M&reverse=1'\n\nA failed test answers probe_success 0 (HTTP 200); a bad query answers 400 with the reason.\nPrometheus configuration: docs/metrics-export.md."
    )]
    Exporter(crate::cmd::exporter::ExporterArgs),
    /// (for pScheduler) One method of the perfSONAR pScheduler tool: JSON on stdin, JSON on stdout.
    #[command(
        after_help = "Installed as /usr/lib/pscheduler/classes/tool/landspeed/METHOD wrappers (contrib/pscheduler).\nExample:\n  echo '{\"type\":\"throughput\",\"spec\":{\"dest\":\"b.example\",\"duration\":\"PT20S\"}}' | landspeed pscheduler duration"
    )]
    Pscheduler(crate::cmd::pscheduler::PschedulerArgs),
    /// iperf3's command line and output (the drop-in; also the binary started as `iperf3`).
    #[command(
        disable_help_flag = true,
        after_help = "Examples:\n  landspeed iperf3 -c 192.0.2.7 -t 10 -P 4 -J\n  landspeed iperf3 -s -1\n  ln -s $(command -v landspeed) /usr/local/lib/landspeed/iperf3   # then iperf3 ... runs landspeed"
    )]
    Iperf3(crate::cmd::iperf3::Iperf3Args),
    /// iperf 2's command line and output (the drop-in; also the binary started as `iperf`).
    #[command(
        disable_help_flag = true,
        after_help = "Examples:\n  landspeed iperf2 -c 192.0.2.7 -t 10 -P 4 -y C\n  landspeed iperf2 -c 192.0.2.7 --full-duplex -i 1 -e\n  landspeed iperf2 -s\n  ln -s $(command -v landspeed) /usr/local/lib/landspeed/iperf   # then iperf ... runs landspeed"
    )]
    Iperf2(crate::cmd::iperf2::Iperf2Args),
}
