#!/usr/bin/env python3
"""Plots bench/run.py's raw results (matplotlib): plot.py RESULTS.json OUT_DIR

- bench-<group>.png: one horizontal bar per method (median, min-max whiskers), tpl's in blue.
- timeline-<group>.png for the thread-injection groups: when each work item started (first
  round of each program), with the seed's published timelines for context.
- threads-<group>.png for the server groups that sample it (sync_over_async_server): the
  server's thread count while the client ran (first round of each server).
Prints "wrote <path>" per file.
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _unwrap_seconds(secs):
    """Seed 000 prints mm:ss.ff; the seconds wrap at 60. -> ms from the first item."""
    out, base, prev, add = [], secs[0], secs[0], 0.0
    for s in secs:
        if s < prev - 30:
            add += 60.0
        prev = s
        out.append((s + add - base) * 1000.0)
    return out


# Seed 000's published timelines (their machine: 12 logical cores), item start times in ms.
SEED_TIMELINES = {
    "barrier": [
        (".NET 8 portable pool, 12 cores (seed 000)",
         [3.9, 3.9, 4.2, 5.4, 4.7, 4.1, 4.5, 5.2, 5.0, 5.7, 3.9, 5.7, 1026.5, 1532.6, 2047.2,
          2562.8, 3580.6, 4596.0, 5108.7, 6114.3, 7133.2, 7646.7, 8161.4, 8675.0, 8676.4]),
        (".NET 8 Windows pool, 12 cores (seed 000)",
         [3.2, 3.3, 3.3, 3.4, 3.6, 44.7, 44.9, 45.2, 45.4, 45.7, 45.9, 46.1, 46.4, 46.6, 46.7,
          46.9, 47.1, 47.3, 47.5, 47.7, 47.9, 48.1, 48.3, 48.5, 48.7]),
    ],
    "sync_over_async": [
        (".NET 5, 12 cores (seed 000)", _unwrap_seconds(
            [54.51] * 12 + [55.52, 56.52, 57.53, 58.52, 59.52, 0.02, 1.02, 1.52, 2.51, 3.52,
                            4.52, 5.03, 6.02, 7.03, 8.01, 9.03, 10.02, 11.02, 11.52, 12.52,
                            13.52, 14.02, 15.02, 15.53, 16.51, 17.02, 18.02, 18.52, 19.52, 20.52,
                            21.52, 22.55, 23.52, 24.53, 25.52, 26.02])),
        (".NET 6, 12 cores (seed 000)", _unwrap_seconds(
            [53.39] * 11 + [53.47] * 12 + [53.5, 53.53, 53.56, 53.59, 53.63, 53.66, 53.69,
                                           53.72, 53.75, 53.78, 53.81, 53.84, 53.91, 53.97,
                                           54.03, 54.1, 54.16, 54.22, 54.28, 54.35, 54.41,
                                           54.47, 54.54, 54.6, 54.68])),
    ],
}


def label(row):
    return f"{row['runtime']} / {row['method']}"


def bars(group, s, out_dir):
    rows = [r for r in s["rows"] if r.get("median_ms") is not None]
    if not rows:
        return None
    rows = rows[::-1]  # first row on top
    # server groups: requests/s (higher is better); the others: ms (lower is better)
    key = "rps" if all(r.get("rps_median") is not None for r in rows) else "ms"
    names = ("rps_median", "rps_min", "rps_max") if key == "rps" else ("median_ms", "min_ms", "max_ms")
    med = [r[names[0]] for r in rows]
    lo = [r[names[0]] - r[names[1]] for r in rows]
    hi = [r[names[2]] - r[names[0]] for r in rows]
    colors = ["tab:blue" if r["program"] == "tpl" else "tab:gray" for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 1.4))
    ax.barh(range(len(rows)), med, xerr=[lo, hi], color=colors, capsize=3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label(r) for r in rows], fontsize=8)
    if max(med) / max(min(med), 1e-9) > 30:
        ax.set_xscale("log")
    ax.set_xlabel("requests/s (median of the rounds; whiskers: min-max; higher is better)"
                  if key == "rps" else "ms (median of the rounds; whiskers: min-max; lower is better)")
    title = f"{group}" + ("" if s["tpl"] == "present" else "  (tpl: not built yet)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path = out_dir / f"bench-{group}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def timeline(group, s, out_dir):
    series = []
    for r in s["rows"]:
        starts = r.get("starts_ms")
        if starts and starts[0]:
            series.append((label(r), sorted(starts[0]), r["program"] == "tpl"))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(10, 5.5))
    markers = "osD^v<>pP*hX"
    for i, (name, st, is_tpl) in enumerate(series):
        ax.plot([max(v, 0.01) for v in st], range(len(st)), marker=markers[i % len(markers)],
                linestyle="-", linewidth=2.5 if is_tpl else 1, markersize=4, label=name)
    for name, st in SEED_TIMELINES.get(group, []):
        ax.plot([max(v, 0.01) for v in sorted(st)], range(len(st)), linestyle="--", color="black",
                alpha=0.5, linewidth=1, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("ms after the start (log scale)")
    ax.set_ylabel("work item (in order of start)")
    return _save_lines(fig, ax, f"{group}: when each work item started (first round; fresh process)",
                       "upper left", out_dir / f"timeline-{group}.png")


def _save_lines(fig, ax, title, legend_loc, path):
    """Titles, grids and saves a line plot (the timeline and thread-count plots); returns path."""
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc=legend_loc)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def threads(group, s, out_dir):
    series = []
    for r in s["rows"]:
        samples = r.get("threads")
        if samples and samples[0]:
            series.append((label(r), samples[0], r["program"] == "tpl"))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(10, 5.5))
    markers = "osD^v<>pP*hX"
    for i, (name, pts, is_tpl) in enumerate(series):
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post",
                marker=markers[i % len(markers)], linewidth=2.5 if is_tpl else 1, markersize=3,
                label=name)
    ax.set_xlabel("ms after the client started (connecting and warm-up included)")
    ax.set_ylabel("server threads (/proc/PID/status)")
    return _save_lines(fig, ax, f"{group}: the server's thread count while the client ran (first round)",
                       "lower right", out_dir / f"threads-{group}.png")


def main():
    results = json.loads(Path(sys.argv[1]).read_text())
    out_dir = Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    for group, s in results.get("groups", {}).items():
        for fn in (bars, timeline, threads):
            p = fn(group, s, out_dir)
            if p:
                print(f"wrote {p}")


if __name__ == "__main__":
    main()
