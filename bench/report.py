"""bench/run.py's report (python3 stdlib only): the console tables, each group's summary (medians,
ratios, allocation, peak RSS; requests/s and latencies for the server groups), the machine's
description, and the generated region of docs/benchmarks.md (with README.md's figures, through
readme_figures.py)."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import peers  # noqa: E402  (bench/peers/peers.py: the peers' toolchains, and the venv helper)
import readme_figures  # noqa: E402  (bench/readme_figures.py: README.md's generated figures)
from groups import GROUPS, MICRO_GROUPS, Entry, _cores, micro_description  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------- #
# formatting
# --------------------------------------------------------------------------- #
# Times and sizes print as in README.md's figures: one formatter for both.
fmt_time_ns = readme_figures.fmt_ns
fmt_bytes = readme_figures.fmt_bytes


def gxx_version() -> str:
    try:
        out = subprocess.run(["g++", "-dumpfullversion"], stdout=subprocess.PIPE, text=True,
                             timeout=30).stdout.strip()
        return out or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


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



def summarize(group: str, entries: list[Entry], programs: list, tpl_present: bool) -> dict:
    rows = []
    for e in entries:
        row = {"method": e.method, "runtime": e.program.runtime, "program": e.program.key,
               "samples_ms": e.samples, "checksums": e.checksums, "allocated_bytes": e.alloc,
               "peak_rss_kb": e.rss_kb, "error": e.error, "note": e.note,
               "invocation_wall_s": e.wall_s}
        if any(s is not None for s in e.starts):
            row["starts_ms"] = e.starts
        if e.kind == "server":
            row.update(requests_per_s=e.rps, p50_us=e.p50_us, p99_us=e.p99_us, client_extra=e.extra,
                       server_cpu_us=e.cpu_us)
            if any(t for t in e.threads):
                row["threads"] = e.threads
            if e.rps and not e.error:
                row.update(rps_median=statistics.median(e.rps), rps_min=min(e.rps),
                           rps_max=max(e.rps), p50_us_median=_median_or_none(e.p50_us),
                           p99_us_median=_median_or_none(e.p99_us),
                           server_cpu_us_median=_median_or_none(e.cpu_us))
        if e.samples and not e.error:
            row["median_ms"] = statistics.median(e.samples)
            row["min_ms"], row["max_ms"] = min(e.samples), max(e.samples)
            allocs = [a for a in e.alloc if a is not None]
            row["allocated_median"] = statistics.median(allocs) if allocs else None
            row["peak_rss_kb_max"] = max(e.rss_kb) if e.rss_kb else None
        rows.append(row)
    present = {e.program.key for e in entries}
    skipped = [f"{p.runtime} ({p.skipped})" for p in programs if p.skipped]
    no_idiom = [p.runtime for p in programs if not p.skipped and p.key not in present]
    return {"description": GROUPS.get(group, {}).get("desc", ""), "rows": rows,
            "server": GROUPS.get(group, {}).get("server"),
            "extra_label": GROUPS.get(group, {}).get("extra_label"),
            "checksum_label": GROUPS.get(group, {}).get("checksum_label"),
            "tpl": "present" if tpl_present else "not built yet",
            "skipped": skipped, "not_in_group": no_idiom}


def _median_or_none(xs: list) -> float | None:
    """The median, or None where a sample has none (the pipelined group's latencies)."""
    return None if not xs or any(x is None for x in xs) else statistics.median(xs)


def fmt_rps(x: float) -> str:
    return f"{x:,.0f}"


def _fmt_us(us: float | None) -> str:
    return fmt_time_ns(None if us is None else us * 1e3)


def server_group_table(s: dict) -> list[str]:
    """Requests/s (median of the rounds), its range, the ratio to the first row's (higher is
    better), the medians of the rounds' p50 and p99 latencies, of the server's CPU time per
    request (results from before it was measured show '-') and the server's peak RSS."""
    headers = ["Method", "Runtime", "Requests/s", "Min-Max", "Ratio", "p50", "p99", "CPU/request",
               "Peak RSS"]
    rows = []
    if s["tpl"] != "present":
        rows.append(["tpl: not built yet", "tpl", "-", "-", "-", "-", "-", "-", "-"])
    base = next((r["rps_median"] for r in s["rows"] if r.get("rps_median")), None)
    for r in s["rows"]:
        if r.get("rps_median") is None:
            rows.append([r["method"], r["runtime"], "FAILED", (r["error"] or "")[:60],
                         "-", "-", "-", "-", "-"])
            continue
        rss = r.get("peak_rss_kb_max")
        rows.append([r["method"], r["runtime"], fmt_rps(r["rps_median"]),
                     f"{fmt_rps(r['rps_min'])} - {fmt_rps(r['rps_max'])}",
                     fmt_ratio(r["rps_median"], base), _fmt_us(r["p50_us_median"]),
                     _fmt_us(r["p99_us_median"]), _fmt_us(r.get("server_cpu_us_median")),
                     fmt_bytes(rss * 1024) if rss else "-"])
    return table_lines(headers, rows)


def group_table(group: str, s: dict) -> list[str]:
    if s.get("group_skipped"):
        return [f"Skipped: {s['group_skipped']}."]
    if s.get("server"):
        return server_group_table(s)
    headers = ["Method", "Runtime", "Mean", "Min-Max", "Ratio", "Allocated", "Peak RSS"]
    rows = []
    if s["tpl"] != "present":
        rows.append(["tpl: not built yet", "tpl", "-", "-", "-", "-", "-"])
    base = None
    for r in s["rows"]:
        if r.get("median_ms") is not None:
            base = r["median_ms"]
            break
    for r in s["rows"]:
        if r.get("median_ms") is None:
            rows.append([r["method"], r["runtime"], "FAILED", (r["error"] or "")[:60],
                         "-", "-", "-"])
            continue
        rss = r.get("peak_rss_kb_max")
        rows.append([r["method"], r["runtime"], fmt_time_ns(r["median_ms"] * 1e6),
                     f"{fmt_time_ns(r['min_ms'] * 1e6)} - {fmt_time_ns(r['max_ms'] * 1e6)}",
                     fmt_ratio(r["median_ms"], base), fmt_bytes(r.get("allocated_median")),
                     fmt_bytes(rss * 1024) if rss else "-"])
    return table_lines(headers, rows)


def table_lines(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: list[str]) -> str:
        out = [c.ljust(w) for c, w in zip(cells[:2], widths[:2])]
        out += [c.rjust(w) for c, w in zip(cells[2:], widths[2:])]
        return "| " + " | ".join(out) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if i >= 2 else ("-" * (w + 2))
                         for i, w in enumerate(widths)) + "|"
    return [line(headers), sep] + [line(r) for r in rows]


def group_footer(s: dict) -> list[str]:
    out = [f"Note: {r['runtime']} / {r['method']}: {r['note']}" for r in s["rows"] if r.get("note")]
    extra = s.get("extra_label")
    if extra:
        key, text = extra
        out.append(f"{text[0].upper()}{text[1:]}, per round: " + "; ".join(
            f"{r['runtime']} / {r['method']}: "
            + (", ".join(str(x.get(key, "-")) for x in r.get("client_extra", [])) or "-")
            for r in s["rows"]) + ".")
    if any(r.get("threads") for r in s["rows"]):
        out.append("Server threads (/proc/PID/status while the client ran; start -> peak), per "
                   "round: " + "; ".join(
                       f"{r['runtime']} / {r['method']}: " + ", ".join(
                           f"{t[0][1]} -> {max(n for _, n in t)}" if t else "-"
                           for t in r.get("threads", [])) for r in s["rows"]) + ".")
    label = s.get("checksum_label")
    if label:
        runtimes = [r["runtime"] for r in s["rows"]]
        out.append(f"Checksums ({label}), per round: " + "; ".join(
            (r["runtime"] if runtimes.count(r["runtime"]) == 1
             else f"{r['runtime']} / {r['method']}")
            + ": " + (", ".join(str(c) for c in r["checksums"]) or "-") for r in s["rows"]) + ".")
    if s["not_in_group"]:
        out.append("Not in this group (no program for it): " + ", ".join(s["not_in_group"]) + ".")
    if s["skipped"]:
        out.append("Skipped peers: " + "; ".join(s["skipped"]) + ".")
    return out


# --------------------------------------------------------------------------- #
# machine description, docs, plots
# --------------------------------------------------------------------------- #
def machine_description() -> dict:
    d = {"platform": platform.platform(), "cores": _cores(), "cpu_count": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                d["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                d["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
        d["loadavg_start"] = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        pass
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                d["os"] = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return d


DOC_BEGIN = "<!-- bench:begin (generated by bench/run.py --docs; edit outside this region) -->"
DOC_END = "<!-- bench:end -->"


def write_docs(results: dict, micro_tables: list[str], plots: list[str], path: Path) -> None:
    m = results["machine"]
    load = results.get("loadavg_end", ["?"])
    lines = [DOC_BEGIN, "", "## Results", "",
             f"Machine: {m.get('cpu', '?')}, {m.get('cores')} cores, "
             f"{m.get('memory_gib', '?')} GiB, {m.get('os', '?')}; tpl built with g++ "
             f"{gxx_version()} -O2 (release preset). Run {results['date']} with "
             f"`{results['command']}` ({results['reps']} rounds per group"
             f"{results.get('rounds_note', '')}, "
             f"{results['elapsed_s'] / 60:.1f} min in all). Load average at the start "
             f"{' '.join(m.get('loadavg_start', ['?']))}, at the end {' '.join(load)}: "
             "the machine is shared (other builds ran at the same time), so the figures are "
             "noisy; compare rows of one table (they were interleaved), not runs.", "",
             "Mean is the median of the rounds, Min-Max their range, Ratio the Mean over the "
             "first row's. Server groups (echo_*, plaintext*, sync_over_async_server) show "
             "requests/s instead: the median of the rounds, their range, Ratio = requests/s over "
             "the first row's (higher is better), and the medians of the rounds' p50 and p99 "
             "latencies (not for plaintext_pipelined: see its description); CPU/request is the "
             "median of the rounds' server CPU time (user + system, every thread of the server "
             "process, /proc/PID/stat) over the measured run divided by the requests (round "
             "trips) it answered: what the server costs, where requests/s on cores shared with "
             "the client is also the client's ceiling; their Peak RSS is "
             "the server's. Allocated: bytes allocated by the measured run (tpl: global "
             "operator new; Go: MemStats.TotalAlloc; .NET Core: GC.GetTotalAllocatedBytes; "
             "Java: all threads' allocated bytes; '-' where not measurable). Peak RSS: the "
             "whole process's (for Java and .NET it includes the VM and its heap sizing).", "",
             "Peers:", ""]
    for p in results["peers"]:
        lines.append(f"- {p['runtime']}: " + (f"skipped: {p['skipped']}" if p["skipped"]
                                               else "built and run"))
    lines.append("")
    for group, s in results["groups"].items():
        lines += [f"### {group}", "", s["description"], ""]
        lines += group_table(group, s)
        foot = group_footer(s)
        if foot:
            lines += [""] + foot
        lines.append("")
        for p in plots:
            if Path(p).stem in (f"bench-{group}", f"timeline-{group}", f"threads-{group}"):
                rel = os.path.relpath(p, path.parent)
                lines += [f"![{Path(p).stem}]({rel})", ""]
    if micro_tables:
        lines += ["### Micro-benchmarks (`tpl_micro_bench`, tpl only)", ""] + micro_tables + [""]
    lines.append(DOC_END)
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = "\n".join(lines)
    if DOC_BEGIN in text and DOC_END in text:
        pre = text.split(DOC_BEGIN)[0]
        post = text.split(DOC_END, 1)[1]
        text = pre + block + post
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
    print(f"docs written to {path}")


def find_matplotlib_python(venv: Path, allow_install: bool) -> tuple[str | None, str]:
    cands = [sys.executable, "/usr/bin/python3", str(venv / "bin" / "python")]
    for py in cands:
        if Path(py).exists():
            try:
                if subprocess.run([py, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=120).returncode == 0:
                    return py, ""
            except (OSError, subprocess.TimeoutExpired):
                pass
    if not allow_install:
        return None, "matplotlib not found"
    ok, why = peers.ensure_venv(venv, ["matplotlib"])
    return (str(venv / "bin" / "python"), "") if ok else (None, why)


def micro_markdown(micro: dict | None) -> list[str]:
    if not micro or not micro.get("summary"):
        return []
    out = []
    for group, entries in micro["summary"].items():
        base = entries[0]["mean_ns"] if entries else None
        rows = [[e["method"], "tpl", fmt_time_ns(e["mean_ns"]), "-",
                 fmt_ratio(e["mean_ns"], base), fmt_bytes(e["bytes_per_op"]), "-"]
                for e in entries]
        desc = micro_description(group)
        out += [f"#### {group}", ""] + ([desc, ""] if desc else [])
        out += table_lines(["Method", "Runtime", "Mean", "Min-Max", "Ratio", "Allocated",
                            "Peak RSS"], rows)
        out.append("")
    return out


def regen_docs() -> int:
    """--regen-docs: README.md's figures and docs/benchmarks.md's descriptions, no runs."""
    docs = REPO_ROOT / "docs" / "benchmarks.md"
    saved = REPO_ROOT / "docs" / "bench-results.json"
    text = docs.read_text()
    if saved.exists():
        results = json.loads(saved.read_text())
        print(f"figures from {saved}")
    else:
        results = readme_figures.results_from_docs(text, DOC_BEGIN, DOC_END)
        print(f"figures from the tables of {docs} (no {saved.name} yet)")
    new = readme_figures.refresh_descriptions(
        text, DOC_BEGIN, DOC_END, {g: spec.get("desc", "") for g, spec in GROUPS.items()},
        MICRO_GROUPS)
    if new != text:
        docs.write_text(new)
        print(f"group descriptions brought up to date in {docs}")
    readme_figures.write_readme(results, REPO_ROOT / "README.md")
    return 0
