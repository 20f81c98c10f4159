#!/usr/bin/env python3
"""Drive landspeed's pScheduler tool the way pScheduler's runner drives a tool, on loopback.

For every case: `can-run` and `duration` on the spec (written as pScheduler's CLI writes it: the lowest
schema that has its keys, names where the CLI was given names), `participant-data` for each participant,
then the `run` input documents pScheduler's runner writes (schema, task-uuid, schedule.start and
.duration, test, participant, participant-data); every participant started 3 s before the scheduled
start (the runner's run_start_margin) and, if still running at the window's end plus 1 s, ended as the
runner's run_program ends it (SIGTERM, SIGKILL 0.5 s later); `merged-results` given 5 s. One case ends
the server participant that way mid-test, as a runner restarting does. These follow pScheduler 5.2.5's
runner as run in contrib/pscheduler/lab (docs/pscheduler.md). The spec and the merged result are checked
against pScheduler's throughput test: with --pscheduler-src (a checkout of perfsonar/pscheduler) by its
own validators (throughput/validate.py's spec_is_valid and result_is_valid, through python-pscheduler's
jsonval.py), else by the schemas transcribed as data in crates/cli/tests/fixtures/pscheduler.

    python3 contrib/pscheduler/harness.py [--landspeed target/release/landspeed]
        [--pscheduler-src DIR] [--only NAME,...] [--list]

Only loopback and namespaces this machine owns are used: every case's dest is 127.0.0.1 or ::1.
"""

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import types
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "crates", "cli", "tests", "fixtures", "pscheduler")

# (name, spec, what the result must show). The everyday list, then every key of the throughput
# spec (schema 7) at least once, the paced rates over 10 s, and fractional durations.
CASES = [
    ("tcp", {"dest": "127.0.0.1", "duration": "PT3S"}, {}),
    ("tcp-P2", {"dest": "127.0.0.1", "duration": "PT3S", "parallel": 2}, {"streams": 2}),
    ("reverse", {"dest": "127.0.0.1", "duration": "PT3S", "reverse": True}, {}),
    ("udp", {"dest": "127.0.0.1", "duration": "PT3S", "udp": True, "bandwidth": 20000000}, {"rate": 20e6}),
    ("udp-P2-burst", {"dest": "127.0.0.1", "duration": "PT3S", "udp": True, "bandwidth": 10000000,
                      "parallel": 2, "burst-size": 4, "buffer-length": 1400}, {"rate": 20e6, "streams": 2}),
    ("loopback", {"dest": "127.0.0.1", "loopback": True, "duration": "PT2S"}, {}),
    ("loopback-false", {"dest": "127.0.0.1", "loopback": False, "duration": "PT2S"}, {}),
    ("ipv6", {"dest": "::1", "duration": "PT2S", "ip-version": 6}, {}),
    ("single-ended", {"dest": "127.0.0.1", "duration": "PT2S", "single-ended": True,
                      "single-ended-port": 5211}, {"server": True}),
    ("window-mss-nodelay", {"dest": "127.0.0.1", "duration": "PT2S", "window-size": 4194304.0,
                            "mss": 1400, "no-delay": True, "congestion": "cubic"}, {}),
    ("omit-interval", {"dest": "127.0.0.1", "duration": "PT3S", "omit": "PT0.02M",
                       "interval": "PT0.5S"}, {"omit": 1.2}),
    ("fractional", {"dest": "127.0.0.1", "duration": "PT0.05M", "link-rtt": "PT0.001H"}, {}),
    ("zero-copy", {"dest": "127.0.0.1", "duration": "PT2S", "zero-copy": True}, {}),
    ("source-local", {"dest": "127.0.0.1", "source": "127.0.0.1", "local-address": "127.0.0.1",
                      "duration": "PT2S", "source-node": "127.0.0.1", "dest-node": "127.0.0.1"}, {}),
    ("cpus", {"dest": "127.0.0.1", "duration": "PT2S", "client-cpu-affinity": 0,
              "server-cpu-affinity": 1}, {}),
    ("fq-rate", {"dest": "127.0.0.1", "duration": "PT3S", "fq-rate": 50000000, "parallel": 2,
                 "bandwidth-strict": True, "schema": 7}, {"rate": 100e6, "streams": 2}),
    ("bw-1M-10s", {"dest": "127.0.0.1", "duration": "PT10S", "bandwidth": 1000000}, {"rate": 1e6}),
    ("bw-5M-10s", {"dest": "127.0.0.1", "duration": "PT10S", "bandwidth": 5000000}, {"rate": 5e6}),
    ("bw-10M-10s", {"dest": "127.0.0.1", "duration": "PT10S", "bandwidth": 10000000.0}, {"rate": 10e6}),
    ("ip-tos", {"dest": "127.0.0.1", "duration": "PT2S", "ip-tos": 32}, {}),
    ("flow-label", {"dest": "::1", "duration": "PT2S", "ip-version": 6, "flow-label": 7}, {}),
    # pScheduler's CLI passes names as it got them (the lab's runs: dest ps-b, source ps-a).
    ("names", {"dest": "localhost", "source": "localhost", "ip-version": 4, "duration": "PT2S"}, {}),
    # The server participant's tool ended by SIGTERM 2 s into the test (the client starts 3 s after the
    # scheduled start), as its runner's restart ends it.
    ("server-restarted", {"dest": "127.0.0.1", "duration": "PT10S"}, {"restart_at": 5}),
    ("bw-100M-P2", {"dest": "127.0.0.1", "duration": "PT3S", "bandwidth": 100000000, "parallel": 2},
     {"rate": 200e6, "streams": 2}),
]

# Keys landspeed refuses with a reason; the harness checks that can-run says no and why.
REFUSED = [
    ("reverse-connections", {"dest": "127.0.0.1", "reverse-connections": True}),
    ("udp-strict", {"dest": "127.0.0.1", "udp": True, "bandwidth-strict": True}),
]


def test_of(spec):
    return {"type": "throughput", "spec": spec}


def method(ls, name, doc, timeout=30):
    p = subprocess.run([ls, "pscheduler", name], input=json.dumps(doc), capture_output=True,
                       text=True, timeout=timeout)
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = None
    return p.returncode, out, p.stderr


class Validators:
    """pScheduler's own validators when its source is given, else the transcribed schemas."""

    def __init__(self, src):
        self.src = src
        if src:
            jsonval = load(os.path.join(src, "python-pscheduler/pscheduler/pscheduler/jsonval.py"),
                           "jsonval")
            shim = types.ModuleType("pscheduler")
            shim.json_validate = jsonval.json_validate
            sys.modules["pscheduler"] = shim
            self.validate = load(os.path.join(src, "pscheduler-test-throughput/throughput/validate.py"),
                                 "throughput_validate")
        else:
            import jsonschema
            self.spec_schema = jsonschema.Draft7Validator(fixture("throughput-spec.schema.json"))
            self.result_schema = jsonschema.Draft7Validator(fixture("throughput-result.schema.json"))

    def spec(self, spec):
        if self.src:
            return self.validate.spec_is_valid(spec)
        errors = [e.message for e in self.spec_schema.iter_errors(spec)]
        return (not errors, "; ".join(errors))

    def result(self, result):
        if self.src:
            return self.validate.result_is_valid(result)
        errors = [e.message for e in self.result_schema.iter_errors(result)]
        return (not errors, "; ".join(errors))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat()


def lowest_schema(v, spec):
    return next((n for n in range(1, 8) if v.spec(dict(spec, schema=n))[0]), 7)


def participants(spec):
    # pScheduler's participants: single-ended and loopback by the key's presence.
    return 1 if ("single-ended" in spec or "loopback" in spec) else 2


def run_case(ls, v, name, spec, expect):
    """One task as pScheduler runs it; returns (row, problems)."""
    problems = []
    # As pScheduler's cli-to-spec writes it: the lowest schema that has every key used (`pscheduler
    # task throughput --dest ps-b` is schema 1), unless a case names one.
    spec = dict(spec, schema=spec.get("schema") or lowest_schema(v, spec))
    ok, why = v.spec(spec)
    if not ok:
        problems.append("pScheduler's validator refuses the spec: " + why)
    test = test_of(spec)
    code, can, _ = method(ls, "can-run", test)
    if not (can or {}).get("can-run"):
        return None, problems + ["can-run said no: %s" % (can or {}).get("reasons")]
    _, dur, _ = method(ls, "duration", test)
    window = iso_seconds(dur["duration"])
    n = participants(spec)
    data = []
    for p in range(n):
        code, d, err = method(ls, "participant-data", {"participant": p, "test": test})
        if code != 0:
            return None, problems + ["participant-data %d: %s" % (p, err)]
        data.append(d)
    start = time.time() + 3.0
    schedule = {"start": iso(start), "duration": dur["duration"]}
    server = None
    if expect.get("server"):
        server = subprocess.Popen([ls, "serve", "-p", "5211", "--bind", "127.0.0.1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = start + window + 1.0
    outcome = [None] * n

    procs = [subprocess.Popen([ls, "pscheduler", "run"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(n)]

    def participant(p):
        doc = {"schema": 1, "task-uuid": str(uuid.uuid4()), "schedule": schedule, "test": test,
               "participant": p, "participant-data": data}
        try:
            out, _ = procs[p].communicate(json.dumps(doc), timeout=max(0.0, deadline - time.time()))
            outcome[p] = (time.time() - start, json.loads(out) if out.strip() else None)
        except subprocess.TimeoutExpired:
            end_process(procs[p])
            outcome[p] = (None, None)

    threads = [threading.Thread(target=participant, args=(p,)) for p in range(n)]
    for t in threads:
        t.start()
    if "restart_at" in expect:
        # As a runner restarting mid-run (its graceful exit) ends the server participant's tool.
        time.sleep(max(0.0, start + expect["restart_at"] - time.time()))
        end_process(procs[1])
    for t in threads:
        t.join()
    ended = [o[0] for o in outcome]
    results = [o[1] for o in outcome]
    if "restart_at" in expect:
        return restarted_row(name, ended, results, port_of(data), problems)
    if any(r is None for r in results):
        problems.append("a participant was still running at the window's end + 1 s: killed")
    if server:
        server.kill()
        server.wait()
    if any(r is None for r in results):
        return None, problems
    code, merged, err = method(ls, "merged-results", {"test": test, "results": results}, timeout=5)
    # pScheduler's runner builds failures itself in the same shape; only results are validated.
    ok, why = v.result(merged) if merged.get("succeeded") else (True, "")
    if not ok:
        problems.append("pScheduler's validator refuses the result: " + why)
    for p, r in enumerate(results):
        if not r.get("succeeded"):
            problems.append("participant %d: %s" % (p, r.get("error")))
    problems += check(merged, spec, expect, window, ended)
    sm = merged.get("summary", {}).get("summary", {})
    row = "| %s | %s s | %s | %s | %.2f Mbit/s |" % (
        name, window, " / ".join("%.2f s" % e for e in ended), merged.get("succeeded"),
        sm.get("throughput-bits", 0) / 1e6)
    return row, problems


def end_process(proc):
    """As pScheduler's run_program ends a tool: SIGTERM, then SIGKILL if it is still there 0.5 s later."""
    proc.terminate()
    try:
        proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def port_of(data):
    return (data[1] or {}).get("server_port", 5201) if len(data) > 1 else None


def listening(port):
    """Whether anything listens on TCP `port` (Linux's /proc tables)."""
    want = ":%04X" % port
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            if any(l.split()[1].endswith(want) and l.split()[3] == "0A" for l in list(f)[1:]):
                return True
    return False


def restarted_row(name, ended, results, port, problems):
    """The server participant ended by signal mid-test: its server gone, the client failed with why."""
    client = results[0]
    if client is None:
        problems.append("the client was still running at the window's end + 1 s: killed")
    elif client.get("succeeded") is not False or "went away" not in (client.get("error") or ""):
        problems.append("the client did not say its server went away: %s" % client.get("error"))
    time.sleep(0.5)
    if port and listening(port):
        problems.append("the server participant's server still listens on %d" % port)
    row = "| %s | - | %s | client failed: %s | - |" % (
        name, " / ".join("%.2f s" % e if e is not None else "killed" for e in ended),
        (client or {}).get("error"))
    return row, problems


def check(merged, spec, expect, window, ended):
    problems = []
    if merged.get("succeeded") is not True:
        return ["not succeeded: %s" % merged.get("error")]
    if max(ended) > window:
        problems.append("ended %.2f s after the start, past the %d s window" % (max(ended), window))
    summary = merged["summary"]
    if "streams" in expect and len(summary["streams"]) != expect["streams"]:
        problems.append("%d streams, not %d" % (len(summary["streams"]), expect["streams"]))
    if "rate" in expect:
        bits = summary["summary"]["throughput-bits"]
        if not 0.9 * expect["rate"] <= bits <= 1.15 * expect["rate"]:
            problems.append("%.2f Mbit/s, asked %.2f" % (bits / 1e6, expect["rate"] / 1e6))
    kept = [i for i in merged["intervals"] if not i["summary"].get("omitted")]
    if kept and kept[0]["summary"]["start"] != 0:
        problems.append("the first kept interval starts at %s" % kept[0]["summary"]["start"])
    if "omit" in expect and not any(i["summary"].get("omitted") for i in merged["intervals"]):
        problems.append("no omitted interval")
    if spec.get("udp") and any(i["summary"].get("sent") is None for i in kept):
        problems.append("an interval without sent/lost")
    return problems


def iso_seconds(d):
    assert d.startswith("PT") and d.endswith("S"), d
    return int(d[2:-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--landspeed", default=os.path.join(ROOT, "target", "release", "landspeed"))
    ap.add_argument("--pscheduler-src", help="a checkout of perfsonar/pscheduler: use its validators")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for name, spec, _ in CASES:
            print(name, json.dumps(spec))
        return 0
    v = Validators(a.pscheduler_src)
    only = set(a.only.split(",")) if a.only else None
    failed = 0
    print("validators: %s" % ("pScheduler's own (%s)" % a.pscheduler_src if a.pscheduler_src
                              else "transcribed schemas (%s)" % FIXTURES))
    print("| case | window | participants ended (s after start) | succeeded | throughput |")
    print("| --- | --- | --- | --- | --- |")
    for name, spec, expect in CASES:
        if only and name not in only:
            continue
        row, problems = run_case(a.landspeed, v, name, spec, expect)
        print(row or "| %s | - | - | - | - |" % name)
        for p in problems:
            print("    PROBLEM: " + p)
        failed += bool(problems)
    for name, spec in REFUSED:
        if only and name not in only:
            continue
        spec = dict(spec, schema=7)
        ok, _ = v.spec(spec)
        _, can, _ = method(a.landspeed, "can-run", test_of(spec))
        said = (can or {}).get("can-run")
        print("| refused: %s | valid for pScheduler: %s | can-run: %s | %s |" % (
            name, ok, said, "; ".join((can or {}).get("reasons", []))))
        failed += said is not False
    print("%d case(s) with problems" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
