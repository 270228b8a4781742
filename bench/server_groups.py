"""Helpers of bench/run.py's server groups (bench/peers/README.md, "Server groups"): the file
descriptor limit that echo_1000 needs, wrk's command line for the pipelined plaintext group and
the pool thread counts that tpl's sync-over-async server prints (python3 stdlib only)."""

from __future__ import annotations

import re
from pathlib import Path

try:
    import resource
except ImportError:  # not on Linux: the limit stays as it is
    resource = None

BENCH_DIR = Path(__file__).resolve().parent
WRK_PIPELINE_SCRIPT = BENCH_DIR / "wrk" / "pipeline.lua"


def raise_nofile_limit() -> str:
    """Raises this process's RLIMIT_NOFILE soft limit to its hard limit, so that every server and
    client run.py starts (they inherit it) can hold echo_1000's 1,000 connections, each end of
    each a descriptor. Returns a line for the log, "" when nothing changed."""
    if resource is None:
        return ""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return ""
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        return f"RLIMIT_NOFILE stays {soft} (hard {hard}): {exc}"
    return f"RLIMIT_NOFILE soft limit raised from {soft} to {hard}"


def nofile_soft_limit() -> int | None:
    if resource is None:
        return None
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def wrk_script_args(w: dict) -> list[str]:
    """wrk's arguments for the Lua script of a wrk spec (GROUPS' "wrk"), placed before the URL:
    `-s bench/wrk/pipeline.lua` with the pipeline depth after the URL's `--` (see wrk_tail)."""
    return ["-s", str(WRK_PIPELINE_SCRIPT)] if w.get("pipeline") else []


# wrk's latency percentiles are not used with the pipeline script (run_wrk in run.py): after the
# run wrk adds samples for coordinated omission (stats_correct) spaced by runtime / (requests per
# connection), an interval that assumes one request per round trip: with 16 per write it is 16
# times too short, the added samples fall below the recorded minimum, where stats_percentile does
# not look, and the percentiles come out 0 or far off (seen with Debian's wrk 4.1.0).


def wrk_tail(w: dict) -> list[str]:
    """What goes after the URL: `-- DEPTH` for the pipeline script."""
    return ["--", str(w["pipeline"])] if w.get("pipeline") else []
