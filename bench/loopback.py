#!/usr/bin/env python3
"""Side-by-side loopback throughput: landspeed against iperf3 (and iperf2/nuttcp when installed), in one
run, interleaved so that drift on the machine hits every tool alike. Reports medians and ratios to iperf3.

Not part of CI (it takes minutes and its numbers depend on the machine). Usage:

    cargo build --release
    python3 bench/loopback.py [--time 5] [--repeat 5] [--streams 1,4] [--lengths 128K]

Prints a table and writes bench/results/loopback-<utc>.json with every sample.
"""
import argparse, datetime, json, os, shutil, signal, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANDSPEED = os.path.join(ROOT, "target", "release", "landspeed")


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return p


def length_args(flag, length, convert=str):
    """`default` leaves the write size to each tool's own default."""
    return [] if length == "default" else [flag, convert(length)]


def run_landspeed(port, t, streams, length):
    out = subprocess.run([LANDSPEED, "run", "127.0.0.1", "-p", str(port), "-t", str(t), "-P", str(streams),
                          *length_args("-l", length), "--json"], capture_output=True, text=True, timeout=t + 60)
    d = json.loads(out.stdout)
    return d["summary"]["throughput_bps"], d["local"]["cpu"]["cpu_s_per_gb"]


def run_iperf3(port, t, streams, length):
    out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(t), "-P", str(streams),
                          *length_args("-l", length), "-J"], capture_output=True, text=True, timeout=t + 60)
    d = json.loads(out.stdout)
    return d["end"]["sum_received"]["bits_per_second"], None


def run_iperf2(port, t, streams, length):
    out = subprocess.run(["iperf", "-c", "127.0.0.1", "-p", str(port), "-t", str(t), "-P", str(streams),
                          *length_args("-l", length), "-f", "b", "-y", "C"], capture_output=True, text=True, timeout=t + 60)
    rows = [l.split(",") for l in out.stdout.strip().splitlines() if l.count(",") >= 8]
    # With -P > 1 the last row is the sum (id -1); with one stream it is the only row.
    return float(rows[-1][8]), None


def to_bytes(size):
    mult = {"K": 1024, "M": 1 << 20, "G": 1 << 30}
    return int(float(size[:-1]) * mult[size[-1]]) if size[-1] in mult else int(size)


def run_nuttcp(port, t, streams, length):
    out = subprocess.run(["nuttcp", "-P", str(port), "-p", str(port + 1), "-T", str(t), "-N", str(streams),
                          *length_args("-l", length, lambda l: str(to_bytes(l))), "-fparse", "127.0.0.1"], capture_output=True, text=True, timeout=t + 60)
    line = out.stdout.strip().splitlines()[-1]
    kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
    return float(kv["rate_Mbps"]) * 1e6, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--lengths", default="default", help="comma list of sizes, or 'default' for each tool's own")
    ap.add_argument("--tools", default="landspeed,iperf3,iperf2,nuttcp")
    a = ap.parse_args()
    if not os.path.exists(LANDSPEED):
        sys.exit("build first: cargo build --release")
    servers, tools = [], {}
    want = a.tools.split(",")
    if "landspeed" in want:
        servers.append(start([LANDSPEED, "serve", "-p", "15201", "--bind", "127.0.0.1"]))
        tools["landspeed"] = (run_landspeed, 15201)
    if "iperf3" in want and shutil.which("iperf3"):
        servers.append(start(["iperf3", "-s", "-p", "15202"]))
        tools["iperf3"] = (run_iperf3, 15202)
    if "iperf2" in want and shutil.which("iperf"):
        servers.append(start(["iperf", "-s", "-p", "15203"]))
        tools["iperf2"] = (run_iperf2, 15203)
    if "nuttcp" in want and shutil.which("nuttcp"):
        servers.append(start(["nuttcp", "-S", "-P", "15204", "--nofork"]))
        tools["nuttcp"] = (lambda port, t, s, l: run_nuttcp(15204, t, s, l), 15204)
    samples = []
    try:
        for streams in [int(s) for s in a.streams.split(",")]:
            for length in a.lengths.split(","):
                for rep in range(a.repeat):
                    for name, (fn, port) in tools.items():
                        try:
                            bps, cpu = fn(port, a.time, streams, length)
                        except Exception as e:  # a peer failing must not end the benchmark
                            print(f"  {name} P{streams} {length}: failed ({e})", file=sys.stderr)
                            continue
                        samples.append(dict(tool=name, streams=streams, length=length, rep=rep, bps=bps, cpu_s_per_gb=cpu))
                        print(f"  {name:9} P{streams:<3} {length:>5} rep {rep}: {bps/1e9:7.2f} Gbit/s", file=sys.stderr)
    finally:
        for s in servers:
            s.send_signal(signal.SIGTERM)
            try:
                s.wait(timeout=5)
            except subprocess.TimeoutExpired:
                s.kill()
    print(f"\nloopback, {a.time} s per run, {a.repeat} runs each, medians (Gbit/s) and ratio to iperf3")
    print(f"{'streams':>7} {'length':>6} " + " ".join(f"{t:>18}" for t in tools))
    for streams in [int(s) for s in a.streams.split(",")]:
        for length in a.lengths.split(","):
            med = {}
            for t in tools:
                v = [s["bps"] for s in samples if s["tool"] == t and s["streams"] == streams and s["length"] == length]
                med[t] = statistics.median(v) if v else None
            base = med.get("iperf3")
            cells = []
            for t in tools:
                m = med[t]
                if m is None:
                    cells.append(f"{'-':>18}")
                elif base:
                    cells.append(f"{m/1e9:8.2f} ({m/base:4.2f}x)   ")
                else:
                    cells.append(f"{m/1e9:8.2f}          ")
            print(f"{streams:>7} {length:>6} " + " ".join(cells))
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(ROOT, "bench", "results", f"loopback-{stamp}.json")
    with open(path, "w") as f:
        json.dump(dict(time_s=a.time, repeat=a.repeat, samples=samples), f, indent=1)
    print(f"samples: {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
