#!/usr/bin/env python3
"""tpl benchmark runner (python3 standard library only).

Runs, from a CMake build directory:

1. ``<build>/bench/tpl_micro_bench`` (Google Benchmark).  Benchmark names are
   ``Group/Method`` (e.g. ``task_sync/call_await``); one table is printed per
   group.  The user counter ``bytes_per_op`` (if set) is shown as "Allocated".

2. every ``<build>/bench/tpl_wl_*`` workload executable.  A workload prints on
   stdout one JSON object per line and per method::

     {"group": "chain", "method": "tpl task chain", "samples_ms": [1.2, 1.3],
      "allocated_bytes": 123 or null, "peak_rss_kb": 456 or null}

   Any other stdout line is ignored.  ``--quick`` is passed on when quick.

Tables: Method | Mean | Ratio | Allocated (| Min-Max | Peak RSS for workloads);
Ratio = Mean / Mean of the first row of the group.  For workloads Mean is the
median of the samples.  All raw results are written to build/bench-results.json
(``--out``).  Exit status is non-zero if any program failed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MICRO_NAME = "tpl_micro_bench"
WORKLOAD_PREFIX = "tpl_wl_"
QUICK_MIN_TIME = 0.05  # seconds per micro benchmark in --quick mode

_UNIT_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


# --------------------------------------------------------------------------- #
# formatting
# --------------------------------------------------------------------------- #
def fmt_time_ns(ns: float | None) -> str:
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return _fmt_num(ns / scale) + " " + unit
    return _fmt_num(ns) + " ns"


def _fmt_num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:.1f}"
    if abs(x) >= 10:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    if abs(n) < 1024:
        return f"{n:.0f} B"
    for unit in ("KB", "MB", "GB"):
        n /= 1024.0
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.1f} {unit}"
    return "-"  # unreachable


def fmt_ratio(value: float | None, base: float | None) -> str:
    if value is None or base is None or base <= 0:
        return "-"
    return f"{value / base:.2f}"


def print_table(title: str, headers: list[str], rows: list[list[str]]) -> None:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: list[str]) -> str:
        # first column left-aligned, the numbers right-aligned
        out = [cells[0].ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return "| " + " | ".join(out) + " |"

    print()
    print(title)
    print(line(headers))
    print("|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2))
                         for i, w in enumerate(widths)) + "|")
    for row in rows:
        print(line(row))


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #
def split_name(name: str) -> tuple[str, str]:
    """'task_sync/call_await' -> ('task_sync', 'call_await')."""
    if "/" in name:
        group, method = name.split("/", 1)
        return group, method
    return name, name


def matches(filter_re: str | None, text: str) -> bool:
    """Google-Benchmark-like filter: regex search, leading '-' negates."""
    if not filter_re:
        return True
    negate = filter_re.startswith("-")
    pattern = filter_re[1:] if negate else filter_re
    try:
        found = re.search(pattern, text) is not None
    except re.error:
        found = pattern in text
    return found != negate


def run_program(cmd: list[str], timeout: float | None) -> tuple[int, str, float]:
    """Runs cmd; stderr is passed through, stdout is captured and returned."""
    print(f"$ {shlex.join(cmd)}", flush=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True,
                              errors="replace", timeout=timeout, cwd=REPO_ROOT)
        rc, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        rc = -1
        print(f"!! timed out after {timeout} s", file=sys.stderr)
    except OSError as exc:
        rc, out = -2, ""
        print(f"!! cannot run {cmd[0]}: {exc}", file=sys.stderr)
    return rc, out, time.monotonic() - start


def describe_rc(rc: int) -> str:
    if rc == -1:
        return "timed out"
    if rc == -2:
        return "could not be started"
    if rc < 0:
        return f"killed by signal {-rc}"
    return f"exit status {rc}"


def min_time_arg(exe: Path, seconds: float) -> str:
    """Google Benchmark < 1.8 takes a plain number of seconds, >= 1.8 '<float>s'."""
    try:
        help_text = subprocess.run([str(exe), "--help"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=30,
                                   errors="replace").stdout
    except (OSError, subprocess.TimeoutExpired):
        help_text = ""
    if "<float>s" in help_text or "<integer>x" in help_text:
        return f"--benchmark_min_time={seconds}s"
    return f"--benchmark_min_time={seconds}"


# --------------------------------------------------------------------------- #
# micro benchmarks (Google Benchmark)
# --------------------------------------------------------------------------- #
def run_micro(exe: Path, args, failures: list[str]) -> dict:
    result: dict = {"executable": str(exe), "ok": False}
    with tempfile.TemporaryDirectory(prefix="tpl-bench-") as tmp:
        json_path = Path(tmp) / "micro.json"
        cmd = [str(exe), f"--benchmark_out={json_path}", "--benchmark_out_format=json",
               "--benchmark_format=console"]
        if args.filter:
            cmd.append(f"--benchmark_filter={args.filter}")
        if args.quick:
            cmd.append(min_time_arg(exe, QUICK_MIN_TIME))
        cmd += args.micro_arg
        rc, out, elapsed = run_program(cmd, args.timeout)
        result.update(command=cmd, returncode=rc, seconds=round(elapsed, 3))
        data = None
        if json_path.exists() and json_path.stat().st_size > 0:
            try:
                data = json.loads(json_path.read_text(errors="replace"))
            except json.JSONDecodeError as exc:
                print(f"!! {exe.name}: invalid JSON output: {exc}", file=sys.stderr)
    if args.verbose or rc != 0:
        sys.stdout.write(out)
    if rc != 0:
        failures.append(f"{exe.name}: {describe_rc(rc)}")
        print(f"!! {exe.name} failed: {describe_rc(rc)}", file=sys.stderr)
    if data is None:
        if rc == 0 and not args.filter:
            failures.append(f"{exe.name}: produced no JSON results")
        elif rc == 0:
            print(f"   (no micro benchmark matched filter {args.filter!r})")
        return result

    result["context"] = data.get("context", {})
    result["benchmarks"] = data.get("benchmarks", [])
    result["ok"] = rc == 0

    # Collapse repetitions: mean of the per-repetition iteration results.
    rows: dict[str, dict] = {}
    for b in result["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        name = b.get("run_name") or b.get("name", "?")
        if b.get("error_occurred") or b.get("skipped"):
            msg = b.get("error_message") or b.get("skip_message") or "error"
            failures.append(f"{exe.name}: {name}: {msg}")
            print(f"!! {name}: {msg}", file=sys.stderr)
            continue
        scale = _UNIT_TO_NS.get(b.get("time_unit", "ns"), 1.0)
        row = rows.setdefault(name, {"times": [], "bytes": []})
        row["times"].append(float(b.get("real_time", 0.0)) * scale)
        if "bytes_per_op" in b:
            row["bytes"].append(float(b["bytes_per_op"]))

    groups: dict[str, list[tuple[str, float, float | None]]] = {}
    for name, row in rows.items():  # dicts keep insertion (= run) order
        group, method = split_name(name)
        mean = statistics.fmean(row["times"])
        alloc = statistics.fmean(row["bytes"]) if row["bytes"] else None
        groups.setdefault(group, []).append((method, mean, alloc))

    result["summary"] = {g: [{"method": m, "mean_ns": t, "bytes_per_op": a} for m, t, a in r]
                         for g, r in groups.items()}
    for group, entries in groups.items():
        base = entries[0][1]
        table = [[m, fmt_time_ns(t), fmt_ratio(t, base), fmt_bytes(a)] for m, t, a in entries]
        print_table(f"## {group}  ({exe.name})", ["Method", "Mean", "Ratio", "Allocated"], table)
    return result


# --------------------------------------------------------------------------- #
# workloads
# --------------------------------------------------------------------------- #
def parse_workload_output(text: str, exe_name: str) -> list[dict]:
    records = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue  # not a result line
        if not isinstance(obj, dict) or "method" not in obj or "samples_ms" not in obj:
            continue
        samples = obj.get("samples_ms") or []
        if not isinstance(samples, list) or not all(isinstance(s, (int, float)) for s in samples):
            print(f"!! {exe_name}:{lineno}: samples_ms is not a list of numbers; ignored",
                  file=sys.stderr)
            continue
        obj.setdefault("group", exe_name[len(WORKLOAD_PREFIX):])
        records.append(obj)
    return records


def run_workload(exe: Path, args, failures: list[str]) -> dict:
    cmd = [str(exe)] + (["--quick"] if args.quick else []) + args.workload_arg
    rc, out, elapsed = run_program(cmd, args.timeout)
    records = parse_workload_output(out, exe.name)
    result = {"executable": str(exe), "command": cmd, "returncode": rc,
              "seconds": round(elapsed, 3), "results": records, "ok": rc == 0 and bool(records)}
    if args.verbose or rc != 0:
        sys.stdout.write(out)
    if rc != 0:
        failures.append(f"{exe.name}: {describe_rc(rc)}")
        print(f"!! {exe.name} failed: {describe_rc(rc)}", file=sys.stderr)
    elif not records:
        failures.append(f"{exe.name}: printed no result lines")
        print(f"!! {exe.name}: printed no JSON result lines", file=sys.stderr)

    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(str(r["group"]), []).append(r)
    for group, entries in groups.items():
        stats = []
        for r in entries:
            s = r["samples_ms"]
            med = statistics.median(s) * 1e6 if s else None
            lo = min(s) * 1e6 if s else None
            hi = max(s) * 1e6 if s else None
            stats.append((r, med, lo, hi))
        base = stats[0][1]
        n = max(len(r["samples_ms"]) for r in entries)
        table = []
        for r, med, lo, hi in stats:
            rss = r.get("peak_rss_kb")
            table.append([
                str(r["method"]),
                fmt_time_ns(med),
                f"{fmt_time_ns(lo)} - {fmt_time_ns(hi)}" if lo is not None else "-",
                fmt_ratio(med, base),
                fmt_bytes(r.get("allocated_bytes")),
                fmt_bytes(rss * 1024) if isinstance(rss, (int, float)) else "-",
            ])
        print_table(f"## {group}  ({exe.name}; Mean = median of {n} samples)",
                    ["Method", "Mean", "Min - Max", "Ratio", "Allocated", "Peak RSS"], table)
    return result


# --------------------------------------------------------------------------- #
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/release",
                    help="CMake build directory (default: build/release)")
    ap.add_argument("--quick", action="store_true",
                    help="short runs: --benchmark_min_time for micro, --quick for workloads")
    ap.add_argument("--filter", default="",
                    help="regex: Google Benchmark filter for micro benchmarks; workloads "
                         "whose executable name does not match are skipped ('-re' negates)")
    ap.add_argument("--out", default=None,
                    help="raw JSON results file (default: <repo>/build/bench-results.json)")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="per-program timeout in seconds (default 3600)")
    ap.add_argument("--no-micro", action="store_true", help="skip tpl_micro_bench")
    ap.add_argument("--no-workloads", action="store_true", help="skip tpl_wl_* workloads")
    ap.add_argument("--micro-arg", action="append", default=[],
                    help="extra argument for tpl_micro_bench (repeatable)")
    ap.add_argument("--workload-arg", action="append", default=[],
                    help="extra argument for every workload (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true", help="echo the programs' stdout")
    args = ap.parse_args()

    build = Path(args.build)
    if not build.is_absolute():
        build = (Path.cwd() / build).resolve()
    bench_dir = build / "bench"
    out_path = Path(args.out) if args.out else REPO_ROOT / "build" / "bench-results.json"

    if not bench_dir.is_dir():
        print(f"error: {bench_dir} does not exist (configure/build with TPL_BUILD_BENCH=ON first)",
              file=sys.stderr)
        return 2

    def is_exe(p: Path) -> bool:
        return p.is_file() and os.access(p, os.X_OK)

    micro = bench_dir / MICRO_NAME
    workloads = sorted(p for p in bench_dir.glob(WORKLOAD_PREFIX + "*") if is_exe(p))
    if not is_exe(micro) and not workloads:
        print(f"error: no {MICRO_NAME} and no {WORKLOAD_PREFIX}* executables in {bench_dir}",
              file=sys.stderr)
        return 1

    failures: list[str] = []
    results: dict = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "build_dir": str(build),
        "quick": args.quick,
        "filter": args.filter,
        "micro": None,
        "workloads": {},
    }

    print(f"tpl benchmarks: build={build} quick={args.quick} filter={args.filter or '(none)'}")

    if not args.no_micro:
        print("\n=== micro benchmarks ===")
        if is_exe(micro):
            results["micro"] = run_micro(micro, args, failures)
        else:
            print(f"   ({MICRO_NAME} not built; skipped)")

    if not args.no_workloads:
        print("\n=== workloads ===")
        selected = [w for w in workloads if matches(args.filter, w.name)]
        if not selected:
            print("   (no workload selected)")
        for exe in selected:
            print()
            results["workloads"][exe.name] = run_workload(exe, args, failures)

    results["failures"] = failures
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nraw results written to {out_path}")

    if failures:
        print("\nFAILED:", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
