#!/usr/bin/env python3
"""A/B comparison of two tpl builds' workload programs, interleaved (python3 stdlib only).

For a change that must not regress (or must improve) the workloads: build the release preset of
the old commit in one tree and of the new one in another, then

    python3 bench/ab.py --a /tmp/before/build/release --b build/release \
        --filter 'chain|skynet|yield_storm|ping_pong|channel_' --reps 7

runs every tpl method whose group matches, in each round A then B or B then A (alternating, so a
drift of the machine during the run weighs on both alike), each in a fresh process
(`tpl_wl_X --run <group> <method>`: one warm-up at the quick size, one measured sample), and prints
the median and range of each side and the ratio B/A of the medians. Only methods present in both
builds are compared. Nothing here asserts a speed: it prints figures for a person to read.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path


def methods(build: Path) -> dict[tuple[str, str], Path]:
    found: dict[tuple[str, str], Path] = {}
    for exe in sorted((build / "bench").glob("tpl_wl_*")):
        out = subprocess.run([str(exe), "--list"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            group, _, name = line.partition("\t")
            if name:
                found[(group, name)] = exe
    return found


def sample(exe: Path, group: str, name: str, timeout: float) -> float | None:
    try:
        p = subprocess.run([str(exe), "--run", group, name], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            return float(json.loads(line)["ms"])
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, type=Path, help="build directory A (the baseline)")
    ap.add_argument("--b", required=True, type=Path, help="build directory B (the change)")
    ap.add_argument("--filter", default="", help="regex over group names")
    ap.add_argument("--reps", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run (default 300)")
    args = ap.parse_args()

    a, b = methods(args.a), methods(args.b)
    keys = [k for k in a if k in b and re.search(args.filter, k[0])]
    if not keys:
        print("no method common to both builds matches the filter", file=sys.stderr)
        return 1
    results: dict[tuple[str, str], tuple[list[float], list[float]]] = {k: ([], []) for k in keys}
    for rep in range(args.reps):
        for k in keys:
            order = [("A", a[k]), ("B", b[k])] if rep % 2 == 0 else [("B", b[k]), ("A", a[k])]
            for side, exe in order:
                ms = sample(exe, k[0], k[1], args.timeout)
                if ms is not None:
                    results[k][0 if side == "A" else 1].append(ms)
        print(f"round {rep + 1}/{args.reps} done", file=sys.stderr)

    def fmt(v: list[float]) -> str:
        if not v:
            return "failed"
        return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"

    print(f"A = {args.a}, B = {args.b}, {args.reps} interleaved rounds, ms: median (min-max)")
    print("| group | method | A | B | B/A |")
    print("|---|---|---:|---:|---:|")
    for k in keys:
        va, vb = results[k]
        ratio = f"{statistics.median(vb) / statistics.median(va):.2f}" if va and vb else "-"
        print(f"| {k[0]} | {k[1]} | {fmt(va)} | {fmt(vb)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
