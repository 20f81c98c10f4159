#!/usr/bin/env python3
"""Checks bench/peers' parsers against peers' real output (bench/fixtures): a parser that reads one
stream of a many-stream run would flatter landspeed N times over. Run by .ci/run; exits 1 on a
failure.

Fixtures: iperf2-2.1.8-*.csv were captured from iperf 2.1.8 (Debian's `iperf`) on loopback with
`-f b -y C` (2.1.x prints one row per stream and no sum row, with `-i` also every interval's rows);
iperf2-2.0-P2-sum.csv is written in iperf 2.0.x's format, whose `-P N` runs end with a sum row of
stream id -1 (no 2.0.x binary can be had on this machine to capture one). iperf3-3.21-P2.json and
landspeed-iperf3-P2.json were captured on loopback with `-c 127.0.0.1 -t 1 -P 2 -J` from iperf 3.21+
(against `iperf3 -s`) and from `landspeed iperf3` (against `landspeed serve`): bench/dropin's rate must
be both streams' received rates added, not one stream's. ndt7-client-go-0.10.1-download.jsonl and
ndt7-client-rs-0.3.1-upload.jsonl are M-Lab's Go client (`-format json -upload=false`) and the
ndt7-client crate's command (`--format json --no-download`) against `landspeed serve --ndt7
--ndt7-plain` on loopback: bench/ndt7 must read the client's last count of that subtest (not a
server measurement's, nor the other subtest's) and the summary's rate. goresponsiveness-3439542.txt
is goresponsiveness (network-quality/goresponsiveness at 3439542) against `landspeed serve --rpm` through
the emulator: bench/latency must read each direction's trimmed-mean RPM (not its P90, nor the final
pooled figure) and its connection count. iperf3-3.21-udp-P2.json and landspeed-udp-P2.json are
`-u -b 10G -t 1 -P 2` runs on loopback, iperf3 3.21+ with `-J` (10G per stream) and `landspeed run
--json` (10G in all): bench/udp must read what the receiver received over both streams (iperf3's
`end.sum_received`, not one stream's rate nor the sender's), and each tool's loss.
goresponsiveness-3439542-{debug.txt,self.csv,foreign.csv} are one run of goresponsiveness with
`-debug -rpm.timeout 6 -rpm.mps 10 -logger-filename` against `landspeed serve --rpm` through the emulator
(20 ms, 50 Mbit/s, FQ-CoDel): its probe logs as written, its standard output with the per-probe and
per-interval tracing lines removed (grep -v; the bucket fills, bounds and figures kept):
bench/goresponsiveness-recompute must recompute its own printed figures from its probes (the pairing
and the choice of probes right) before its draft-09 figures mean anything.
quinn-perf-a1931ab8-up-P4.txt and quinn-perf-a1931ab8-down-P1.txt are the standard output of quinn's
perf client (quinn-rs/quinn main at a1931ab8) against its own server on loopback, `--bi-requests 4
--upload-size 512M --download-size 0 --duration 4` and `--bi-requests 1 --upload-size 0
--download-size 512M --duration 4`: it prints its table every second, so bench/transports must read
the last AVG row (the whole run's, not the first second's zeros), in the column of the direction
measured, per request (the script multiplies by the requests in flight).
iperf2-2.1.8-full-duplex.csv is iperf 2.1.8's client `-t 1 --full-duplex -y C` against `iperf -s` on
loopback (its received row's local port is the server's, its remote `::,0`), and
iperf2-2.1.8-udp-e.txt / -udp-e-landspeed.txt its `-u -n 100K -l 1000 -e` text against `iperf -s -u`
and against `landspeed serve` (whose report carries the latency columns): bench/iperf2-side-by-side
must read each way's bytes and each Server Report's lost/total, jitter and mean latency.
iperf2-2.1.8-bounceback.txt is iperf 2.1.8's client `--bounceback --bounceback-period 0 -t 2 -i 1
--trip-times` against `iperf -s` on loopback, and landspeed-bounceback.json `landspeed run
--bounceback=5 --bounceback-period 250ms -t 1 --json` against the same server: bench/bounceback must
read the whole run's total line (not an interval's, nor the OWD or PDF lines that follow it) and
landspeed's transaction figures. iperf2-2.1.8-bounceback-congest.txt is the same client with
`--bounceback-congest -t 2` (no -i), whose bounceback is stream 2 and its full-duplex load stream 1,
and landspeed-bounceback-load.json `landspeed run --bounceback=5 --bounceback-period 250ms -t 1
--under-load --iperf2 --load-settle 500ms --json` against `iperf -s`: the bounceback's total and not
the load's lines, the load's [FD] total, and landspeed's load rates each way.
"""
import importlib.machinery, importlib.util, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    """A bench script (no .py suffix) as a module."""
    loader = importlib.machinery.SourceFileLoader(name, os.path.join(HERE, name))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    return module


peers, dropin, ndt7, latency, udp, transports, recompute, iperf2, bounceback = (
    load(n) for n in ("peers", "dropin", "ndt7", "latency", "udp", "transports",
                      "goresponsiveness-recompute", "iperf2-side-by-side", "bounceback"))


def tally(checks):
    """(passed, failed) over (what was read, got, want, right) checks; each failure printed."""
    passed = failed = 0
    for what, got, want, right in checks:
        if right:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {what} read {got}, want {want}")
    return passed, failed


def fixture(name):
    with open(os.path.join(HERE, "fixtures", name)) as f:
        return f.read()


CASES = [
    # (fixture, bytes, bit/s): the streams' whole-run rows added, or the sum row where there is one.
    ("iperf2-2.1.8-P2.csv", 2429288508 + 2822635580, 19350655181 + 22479387889),
    ("iperf2-2.1.8-P2-i1.csv", 4022992956 + 4339793980, 16066354022 + 17343514726),
    ("iperf2-2.1.8-P1.csv", 2675179580, 21078617611),
    ("iperf2-2.0-P2-sum.csv", 15000000000, 40000000000),
]


DROPIN_CASES = [
    # (fixture, its two streams' receiver bit/s)
    ("iperf3-3.21-P2.json", 18269869921.264244 + 23220773299.73302),
    ("landspeed-iperf3-P2.json", 21934443337.278877 + 16751762365.818167),
]


def check_dropin():
    return tally((f"{name}: bench/dropin", got, want, abs(got - want) <= 1e-6 * want)
                 for name, want in DROPIN_CASES
                 for got in [dropin.rate(json.loads(fixture(name)))])

NDT7_CASES = [
    # (parser, fixture, subtest, (the client's last count, the summary's Mbit/s) or None)
    ("parse_go", "ndt7-client-go-0.10.1-download.jsonl", "download", (35092717508, 28765.05010327546)),
    ("parse_go", "ndt7-client-go-0.10.1-download.jsonl", "upload", None),
    ("parse_rs", "ndt7-client-rs-0.3.1-upload.jsonl", "upload", (46680506368, 38281.349984820765)),
    ("parse_rs", "ndt7-client-rs-0.3.1-upload.jsonl", "download", None),
]


def check_ndt7():
    def read(parser, name, subtest):
        got = getattr(ndt7, parser)(fixture(name), subtest)
        return got[0] if parser == "parse_go" else got
    return tally((f"{name} ({subtest}): bench/ndt7", got, want, got == want)
                 for parser, name, subtest, want in NDT7_CASES
                 for got in [read(parser, name, subtest)])

def check_goresponsiveness():
    got = latency.parse_goresponsiveness(fixture("goresponsiveness-3439542.txt"))
    want = {
        "download": {"mbps": 45.967, "connections": 16, "rpm_p90": 64.0, "rpm": 370.0},
        "upload": {"mbps": 39.365, "connections": 16, "rpm_p90": 37.0, "rpm": 103.0},
        "final": {"rpm_p90": 25.0, "rpm": 366.0},
    }
    return tally([("goresponsiveness-3439542.txt: bench/latency", got, want, got == want)])


RECOMPUTE_CASES = [
    # (figure, probe pairs it counts (its printed totals), draft-09 RPM, foreign ms, self ms)
    ("download", 40, 1401.95, 23.154, 282.24),
    ("upload", 32, 1316.68, 23.439, 815.97),
    ("final", 169, 1359.34, 22.768, 719.68),
]


def check_recompute():
    """bench/goresponsiveness-recompute must pair the probes it logged with the buckets it printed
    and choose them as goresponsiveness does: its own figures recomputed equal what it printed."""
    base = os.path.join(HERE, "fixtures", "goresponsiveness-3439542-")
    r = recompute.recompute(fixture("goresponsiveness-3439542-debug.txt"), base + "self.csv",
                            base + "foreign.csv")

    def close(a, b):
        return abs(a - b) <= 0.01 * max(1.0, abs(b)) / 100
    return tally((f"goresponsiveness-3439542-debug.txt ({k}): bench/goresponsiveness-recompute",
                  got, want, r[k]["matches"] and got[0] == want[0] and all(map(close, got[1:], want[1:])))
                 for k, *want in RECOMPUTE_CASES
                 for got in [(r[k]["pairs"], r[k]["draft09"]["rpm"], r[k]["draft09"]["foreign_ms"],
                              r[k]["draft09"]["self_ms"])])


UDP_CASES = [
    # (parser, fixture, (received bit/s of both streams, loss %, datagrams lost, verified))
    ("iperf3_parse", "iperf3-3.21-udp-P2.json", (19960508954.68384, 0.1546567406747228, 118, None)),
    ("landspeed_parse", "landspeed-udp-P2.json", (9999672188.16331, 0.0, 0, True)),
]


def check_udp():
    return tally((f"{name}: bench/udp", got, want, got == want)
                 for parser, name, want in UDP_CASES
                 for got in [getattr(udp, parser)(fixture(name))])


QUINN_CASES = [
    # (fixture, download, the AVG row's per-request rate in that direction, bit/s)
    ("quinn-perf-a1931ab8-up-P4.txt", False, 1509.43e6),
    ("quinn-perf-a1931ab8-down-P1.txt", True, 7081.38e6),
]


def check_transports():
    return tally((f"{name}: bench/transports", got, want, abs(got - want) <= 1e-9 * want)
                 for name, down, want in QUINN_CASES
                 for got in [transports.quinn_avg_bps(fixture(name), down)])


def check_peers():
    return tally((f"{name}: bench/peers", got, (want_bytes, want_bps), got == (want_bytes, want_bps))
                 for name, want_bytes, want_bps in CASES
                 for got in [peers.iperf2_parse(fixture(name))])


IPERF2_CASES = [
    # (fixture, the server's port, what bench/iperf2-side-by-side must read)
    ("iperf2-2.1.8-full-duplex.csv", 5099, (1059586108, 1031405568)),
    ("iperf2-2.1.8-udp-e.txt", None, [(0, 104, 0.004, None)]),
    ("iperf2-2.1.8-udp-e-landspeed.txt", None, [(0, 104, 0.005, 0.022)]),
    ("iperf2-2.1.8-R-trip-times.txt", None,
     {"mean_ms": 0.102, "min_ms": 0.023, "max_ms": 2.988, "stddev_ms": 0.145, "bursts": 12860,
      "warned": False}),
]


def check_iperf2():
    def read(name, port):
        text = fixture(name)
        if "trip-times" in name:
            return iperf2.bursts(text)
        return iperf2.csv_ways(text, port) if port else iperf2.udp_reports(text)
    return tally((f"{name}: bench/iperf2-side-by-side", got, want, got == want)
                 for name, port, want in IPERF2_CASES
                 for got in [read(name, port)])


def check_bounceback():
    i2 = bounceback.iperf2_total(fixture("iperf2-2.1.8-bounceback.txt"))
    ls = bounceback.landspeed_total(json.loads(fixture("landspeed-bounceback.json")))
    congest = fixture("iperf2-2.1.8-bounceback-congest.txt")
    i2c = {**bounceback.iperf2_total(congest), **bounceback.iperf2_load(congest)}
    lsl = bounceback.landspeed_total(json.loads(fixture("landspeed-bounceback-load.json")))
    cases = [
        ("iperf2-2.1.8-bounceback-congest.txt: bench/bounceback (the bounceback, not its load)",
         (i2c["transactions"], i2c["seconds"], i2c["mean_ms"], i2c["load_both_mbps"]),
         (48195, 2.0093, 0.04, 159.0)),
        ("landspeed-bounceback-load.json: bench/bounceback (the load's rates)",
         (lsl["transactions"], round(lsl["load_up_mbps"]), round(lsl["load_down_mbps"]), lsl["p50_ms"]),
         (20, 3059, 27483, 0.031439)),
        ("iperf2-2.1.8-bounceback.txt: bench/bounceback",
         (i2["transactions"], i2["seconds"], i2["mean_ms"], i2["max_ms"], i2["rps"]),
         (75971, 2.0115, 0.025, 3.516, 39629.0)),
        ("landspeed-bounceback.json: bench/bounceback",
         (ls["transactions"], ls["p50_ms"], ls["p99_ms"], ls["verified"]),
         (20, 0.031023, 0.398517, True)),
    ]
    return tally((what, got, want, got == want) for what, got, want in cases)


def main():
    results = [check() for check in (check_dropin, check_ndt7, check_goresponsiveness, check_recompute, check_udp, check_transports,
                                        check_peers, check_iperf2, check_bounceback)]
    passed, failed = (sum(r[i] for r in results) for i in (0, 1))
    print(f"bench parsers: {passed} of {passed + failed} cases parse right")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
