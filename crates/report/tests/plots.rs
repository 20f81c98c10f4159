//! The plots and the HTML report from synthetic data: every SVG parses as XML with the declared size and
//! its title, every PNG decodes to the same size and is not blank, and the page embeds every figure
//! with nothing loaded from elsewhere.

use landspeed_core::assemble::{assemble, Inputs, RunContext};
use landspeed_core::config::{Direction, TestSpec};
use landspeed_core::endpoint::EndpointReport;
use landspeed_core::result::{IntervalResult, IntervalStream, RunResult};
use landspeed_plan::sweep::{summarize, CellKey, Order, RunFigures, SweepPlan, SweepReport};
use landspeed_report::html::{report_html, Subject};
use landspeed_report::plot::{run_figures, runs_cdf, sweep_figures, Figure};

fn plan(host: &str) -> SweepPlan {
    SweepPlan {
        host: host.into(),
        port: 5201,
        windows_bytes: vec![32_768, 65_536, 131_072, 262_144, 524_288, 1 << 20],
        streams: vec![1, 2, 4],
        directions: vec![Direction::Forward, Direction::Reverse],
        repeat: 3,
        time_s: 2.0,
        order: Order::Scrambled,
        seed: 3,
        version: 2,
        cell: None,
        run_args: vec!["-C".into(), "cubic".into()],
        command_line: "landspeed sweep h --windows 32K..1M --streams 1,2,4".into(),
    }
}

fn sweep(host: &str) -> SweepReport {
    let plan = plan(host);
    let runs: Vec<(CellKey, RunFigures)> = plan
        .cells()
        .into_iter()
        .map(|k| {
            let ideal = (f64::from(k.streams) * 8.0 * 1.2 * k.window_bytes as f64 / 0.05).min(9.4e8);
            let f = RunFigures {
                throughput_bps: ideal * (0.97 + 0.03 * f64::from(k.repeat)),
                effective_window_bytes: Some(1.2 * k.window_bytes as f64),
                rtt_s: Some(0.0502),
                // Probes in the sending direction's cells only: the other has no such figure.
                loaded_rtt_ms: (k.direction == Direction::Forward)
                    .then(|| 50.2 + k.window_bytes as f64 / 1e5),
                limit: None,
            };
            (k, f)
        })
        .collect();
    SweepReport {
        sweep_id: 9,
        created_utc: "2026-11-22T10:00:00Z".into(),
        status: "complete".into(),
        summary: summarize(&plan, &runs),
        plan,
    }
}

fn run() -> RunResult {
    let spec = TestSpec {
        streams: 2,
        window_bytes: Some(1 << 20),
        ..TestSpec::default()
    };
    let e = EndpointReport::default();
    let mut r = assemble(&Inputs {
        spec: &spec,
        context: RunContext::example("far.example", 1.8e9),
        client: &e,
        server: &e,
        client_samples: &[],
        server_samples: &[],
    });
    r.local.host.command_line = "landspeed run far.example -P 2 -w 1M".into();
    r.remote.host.command_line = "landspeed serve".into();
    r.summary.throughput_bps = 4e8;
    r.intervals = (0..10)
        .map(|i| IntervalResult {
            index: i,
            start_s: f64::from(i),
            end_s: f64::from(i + 1),
            bytes: 50_000_000,
            throughput_bps: 4e8,
            omitted: false,
            streams: (0..2)
                .map(|id| IntervalStream {
                    id,
                    bytes: 25_000_000,
                    throughput_bps: 2e8 + f64::from(i * id) * 1e6,
                    rtt_us: Some(50_000 + i * 100),
                    cwnd_bytes: Some(1_000_000 + u64::from(i) * 10_000),
                    retransmits: Some(0),
                    datagrams_sent: None,
                    datagrams_lost: None,
                    frames: None,
                    jitter_ms: None,
                    transit: None,
                    reads: None,
                    transit_bins: None,
                    frames_heard: None,
                })
                .collect(),
            probe_rtt: None,
        })
        .collect();
    r
}

fn check(f: &Figure) {
    let doc =
        roxmltree::Document::parse(&f.svg).unwrap_or_else(|e| panic!("{}: SVG does not parse: {e}", f.name));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "{}", f.name);
    assert_eq!(
        root.attribute("width"),
        Some(f.width.to_string().as_str()),
        "{}",
        f.name
    );
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(
        texts.len() > 10,
        "{}: only {} texts: axes and labels missing",
        f.name,
        texts.len()
    );
    assert!(
        texts.iter().any(|t| t.contains("UTC")),
        "{}: no footer with the date: {texts:?}",
        f.name
    );
    assert!(
        f.svg.len() > 2_000 && f.svg.len() < 2_000_000,
        "{}: SVG {} bytes",
        f.name,
        f.svg.len()
    );
    let png = image::load_from_memory_with_format(&f.png, image::ImageFormat::Png)
        .unwrap_or_else(|e| panic!("{}: PNG does not decode: {e}", f.name))
        .to_rgb8();
    assert_eq!((png.width(), png.height()), (f.width, f.height), "{}", f.name);
    assert!(
        f.png.len() > 10_000 && f.png.len() < 4_000_000,
        "{}: PNG {} bytes",
        f.name,
        f.png.len()
    );
    // Drawn on: many colours (lines, text anti-aliasing), and dark pixels (text).
    let mut colours: Vec<[u8; 3]> = png.pixels().map(|p| p.0).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        colours.len() > 20,
        "{}: {} colours: blank?",
        f.name,
        colours.len()
    );
    let dark = png.pixels().filter(|p| p.0.iter().all(|c| *c < 80)).count();
    assert!(dark > 500, "{}: {dark} dark pixels: no text?", f.name);
}

#[test]
fn sweep_figures_are_valid_svg_and_png() {
    let r = sweep("far.example");
    let figs = sweep_figures(&r).unwrap();
    let names: Vec<&str> = figs.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sweep-9-throughput-vs-window-send",
            "sweep-9-loaded-rtt-vs-window-send",
            "sweep-9-heatmap-send",
            "sweep-9-cdf-send",
            "sweep-9-throughput-vs-window-recv",
            "sweep-9-heatmap-recv",
            "sweep-9-cdf-recv"
        ]
    );
    for f in &figs {
        check(f);
    }
    // The fit lines are labelled with the RTT they imply (50 ms, corrected for the granted window).
    assert!(figs[0].svg.contains("RTT 50.0 ms"), "{}", figs[0].svg);
    assert!(figs[0].svg.contains("4 streams"));
    assert!(figs[1].svg.contains("RTT under load vs window"));
    // The heatmap writes every cell's median: 6 windows × 3 stream counts.
    let doc = roxmltree::Document::parse(&figs[2].svg).unwrap();
    let numbers = doc
        .descendants()
        .filter_map(|n| n.text())
        .filter(|t| t.trim().parse::<f64>().is_ok())
        .count();
    assert!(numbers >= 18, "{numbers}");
}

#[test]
fn run_figures_and_the_cdf_of_runs() {
    let r = run();
    let figs = run_figures(&r, Some(4)).unwrap();
    assert_eq!(figs.len(), 2);
    assert_eq!(figs[0].name, "run-4-over-time");
    for f in &figs {
        check(f);
    }
    for panel in ["Throughput per stream", "Congestion window", "RTT"] {
        assert!(figs[0].svg.contains(panel), "{panel}");
    }
    check(&runs_cdf(&[r.clone(), r]).unwrap());
}

#[test]
fn a_request_response_run_has_its_latency_figure_and_its_rate_cdf() {
    use landspeed_core::transactions::{LatencySummary, TransactionInterval, TransactionsReport};
    let mut r = run();
    let latency = |ms: f64| LatencySummary {
        min_ms: Some(ms / 2.0),
        mean_ms: Some(ms),
        p50_ms: Some(ms),
        p99_ms: Some(ms * 3.0),
        max_ms: Some(ms * 10.0),
        ..Default::default()
    };
    r.transactions = Some(TransactionsReport {
        transactions: 3000,
        per_s: 1000.0,
        intervals: (0..3)
            .map(|k| TransactionInterval {
                start_s: f64::from(k),
                end_s: f64::from(k + 1),
                transactions: 1000,
                latency: latency(0.5 + f64::from(k)),
            })
            .collect(),
        ..Default::default()
    });
    let figs = run_figures(&r, Some(7)).unwrap();
    assert_eq!(figs.len(), 1);
    assert_eq!(figs[0].name, "run-7-latency-over-time");
    check(&figs[0]);
    assert!(figs[0].svg.contains("Transaction latency"));
    let cdf = runs_cdf(&[r.clone(), r]).unwrap();
    check(&cdf);
    assert!(cdf.svg.contains("Transactions a second of 2 runs"));
}

#[test]
fn the_html_page_is_self_contained_and_has_everything() {
    let r = sweep("far.<b>example</b>");
    let figs = sweep_figures(&r).unwrap();
    let sample = run();
    let page = report_html(
        &Subject::Sweep {
            report: &r,
            sample: Some(&sample),
        },
        &figs,
        "2026-11-22T12:00:00Z",
    );
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<svg").count(), figs.len());
    assert!(!page.contains("<?xml"), "an XML declaration inside HTML");
    for bad in ["<script", "<link", " src=", "url("] {
        assert!(!page.contains(bad), "{bad} in the page");
    }
    // Only the SVG namespace may look like an address.
    let addresses = page.matches("http").count();
    assert_eq!(addresses, page.matches("http://www.w3.org/2000/svg").count());
    assert!(
        page.contains("far.&lt;b&gt;example&lt;/b&gt;"),
        "host not escaped"
    );
    assert!(!page.contains("<b>example"));
    for must in [
        "landspeed sweep h --windows 32K..1M",
        "landspeed run far.example -P 2 -w 1M",
        "landspeed serve",
        "Best cell",
        "implied RTT",
        "window granted ÷ requested",
        "95% CI",
        "Hosts",
        "client → server",
        "server → client",
    ] {
        assert!(
            page.contains(&landspeed_report::html::esc(must)),
            "missing {must}"
        );
    }
    assert!(
        page.contains("<td>1.200</td>"),
        "the granted-window ratio of the fits"
    );
    // Runs page: tables, both figures, the text report.
    let runs = vec![(4, sample)];
    let figs = run_figures(&runs[0].1, Some(4)).unwrap();
    let page = report_html(&Subject::Runs(&runs), &figs, "2026-11-22T12:00:00Z");
    assert_eq!(page.matches("<svg").count(), 2);
    assert!(page.contains("Run 4"));
}
