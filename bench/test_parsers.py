#!/usr/bin/env python3
"""Checks bench/peers' parsers against peers' real output (bench/fixtures): a parser that reads one
stream of a many-stream run would flatter landspeed N times over. Run by .ci/run; exits 1 on a
failure.

Fixtures: iperf2-2.1.8-*.csv were captured from iperf 2.1.8 (Debian's `iperf`) on loopback with
`-f b -y C` (2.1.x prints one row per stream and no sum row, with `-i` also every interval's rows);
iperf2-2.0-P2-sum.csv is written in iperf 2.0.x's format, whose `-P N` runs end with a sum row of
stream id -1 (no 2.0.x binary can be had on this machine to capture one).
"""
import importlib.machinery, importlib.util, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("peers", os.path.join(HERE, "peers"))
spec = importlib.util.spec_from_loader("peers", loader)
peers = importlib.util.module_from_spec(spec)
loader.exec_module(peers)


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


def main():
    passed = failed = 0
    for name, want_bytes, want_bps in CASES:
        got = peers.iperf2_parse(fixture(name))
        if got == (want_bytes, want_bps):
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name}: parsed {got}, want {(want_bytes, want_bps)}")
    print(f"bench parsers: {passed} of {passed + failed} cases parse right")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
