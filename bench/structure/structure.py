#!/usr/bin/env python3
"""The house's structure, measured: for each crate, its modules (files), lines, the longest file,
imports that run up (a module using its own ancestor), and circles (strongly connected groups of
modules that use one another). Used for issue #66's before/after figures.

usage: structure.py [REPO] [--crate NAME] [--edges]
"""
import os, re, sys
from collections import defaultdict

def modules(src):
    """file path -> module path (tuple) for one crate's src/."""
    out = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(root, f)
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ("lib", "main"):
                rel = rel[:-1]
            elif rel[-1] == "mod":
                rel = rel[:-1]
            if rel and (rel[-1] == "tests" or rel[-1].endswith("_tests")):
                continue  # a test module's imports are its own business
            out[p] = tuple(rel)
    return out

USE = re.compile(r"\buse\s+([^;]+);", re.S)
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")

def strip_tests(text):
    i = text.find("#[cfg(test)]")
    return text if i < 0 else text[:i]

def expand(tree):
    """'a::{b, c::{d}}' -> ['a::b', 'a::c::d']"""
    tree = re.sub(r"\s+", "", tree)
    def go(prefix, s):
        res, depth, cur = [], 0, ""
        parts = []
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur); cur = ""; continue
            depth += ch == "{"; depth -= ch == "}"
            cur += ch
        parts.append(cur)
        for part in parts:
            if not part:
                continue
            if "{" in part:
                head, rest = part.split("{", 1)
                res += go(prefix + head, rest[:-1])
            else:
                res.append(prefix + part)
        return res
    return go("", tree)

def resolve(mod, path, known):
    segs = path.split("::")
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = mod
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    else:
        return None
    target = base
    for s in segs:
        if target + (s,) in known:
            target = target + (s,)
        else:
            break
    return target

def analyse(src):
    mods = modules(src)
    known = set(mods.values())
    edges = defaultdict(set)
    lines = {}
    for p, m in mods.items():
        text = open(p, encoding="utf-8").read()
        lines[m] = text.count("\n")
        body = strip_tests(text)
        paths = []
        for u in USE.findall(body):
            paths += expand(u)
        for m2 in PATH.finditer(body):
            paths.append(m2.group(1) + m2.group(2))
        for path in paths:
            t = resolve(m, path.split(" as ")[0], known)
            if t is None or t == m:
                continue
            if t[: len(m)] == m:  # into own descendant: down
                edges[m].add(t)
                continue
            edges[m].add(t)
    ups = sorted((a, b) for a, bs in edges.items() for b in bs if a[: len(b)] == b and a != b)
    return mods, lines, edges, ups

def sccs(edges, nodes):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)
    def strong(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in nodes:
        if v not in index:
            strong(v)
    return out

def name(m):
    return "::".join(m) or "(root)"

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repo = args[0] if args else "."
    only = sys.argv[sys.argv.index("--crate") + 1] if "--crate" in sys.argv else None
    crates_dir = os.path.join(repo, "crates")
    total = {}
    report = []
    for c in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, c, "src")
        if not os.path.isdir(src) or (only and c != only and only in os.listdir(crates_dir)):
            continue
        mods, lines, edges, ups = analyse(src)
        total[c] = sum(lines.values())
        # circles: only between modules that are not ancestor/descendant of one another's edge
        flat = {a: {b for b in bs if not (a[: len(b)] == b)} for a, bs in edges.items()}
        circles = sccs(flat, list(lines))
        longest = max(lines.items(), key=lambda kv: kv[1])
        report.append((c, len(mods), total[c], longest, ups, circles))
    allines = sum(total.values())
    print(f"{'crate':<12} {'files':>5} {'lines':>7} {'share':>6}  {'up':>3} {'circles':>7}  longest file")
    for c, n, t, longest, ups, circles in report:
        print(f"{c:<12} {n:>5} {t:>7} {100*t/allines:>5.1f}%  {len(ups):>3} {len(circles):>7}  {name(longest[0])} ({longest[1]})")
    print(f"{'total':<12} {sum(r[1] for r in report):>5} {allines:>7}")
    if "--edges" in sys.argv:
        for c, n, t, longest, ups, circles in report:
            for a, b in ups:
                print(f"up      {c}: {name(a)} -> {name(b)}")
            for comp in circles:
                print(f"circle  {c}: " + " <-> ".join(name(m) for m in comp))

if __name__ == "__main__":
    main()
