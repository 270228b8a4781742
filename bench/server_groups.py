"""Helpers of bench/run.py's server groups (bench/peers/README.md, "Server groups"): the file
descriptor limit that echo_1000 needs, wrk's command line for the pipelined plaintext group and
the sampling of a server's thread count and the metering of its CPU time during a run (python3
stdlib only)."""

from __future__ import annotations

import os
import threading
import time
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


def nofile_missing(conns: int) -> str | None:
    """Why a group of `conns` connections cannot run under this process's descriptor limit (run
    after raise_nofile_limit), or None. It wants twice the connections: the server holds one
    descriptor per connection plus its runtime's own (CoreCLR's echo server fails at 1,000
    connections under a limit of 1,024)."""
    if resource is None:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft >= 2 * conns:
        return None
    return (f"RLIMIT_NOFILE is {soft} (the hard limit) and {conns:,} connections want "
            f"{2 * conns:,} (ulimit -Hn)")


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


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process `pid` so far, every thread included (those that ended
    too: /proc/PID/stat's utime and stime are the whole thread group's), in seconds; None once
    the process is gone. Resolution: one clock tick (10 ms at USER_HZ 100)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """A server's CPU time over the measured part of a run: start() just before the client's
    measured run, stop() just after (run.py's run_wrk and run_loadgen). seconds() is None where
    either reading failed (the server ended), so that no figure is made up.

    On a machine whose cores the client and the server share, requests/s is often the client's
    ceiling as much as the server's (wrk takes about as much CPU per request as the fastest
    servers); the server's CPU per request is what the server itself costs, whatever the
    kernel did with the cores that second."""

    def __init__(self, pid: int):
        self.pid = pid
        self.begin: float | None = None
        self.end: float | None = None

    def start(self) -> None:
        self.begin = process_cpu_seconds(self.pid)

    def stop(self) -> None:
        self.end = process_cpu_seconds(self.pid)

    def seconds(self) -> float | None:
        if self.begin is None or self.end is None:
            return None
        return self.end - self.begin


class ThreadSampler:
    """Samples a server's thread count (the "Threads:" line of /proc/PID/status: every thread of
    the process, whatever the runtime calls its workers) every `period_s` while the client runs,
    for the groups with `threads` in GROUPS (sync_over_async_server: how many threads a server
    adds while its handlers block). samples(): [[ms after start(), threads], ...], one pair per
    change of the count plus the last sample, so that a step plot shows every change."""

    def __init__(self, pid: int, period_s: float = 0.01):
        self.path = Path(f"/proc/{pid}/status")
        self.period_s = period_s
        self.points: list[list[float]] = []
        self.tail: list[float] | None = None  # the latest sample that did not change the count
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.t0 = 0.0

    def _read(self) -> int | None:
        try:
            for line in self.path.read_text().splitlines():
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return None

    def _run(self) -> None:
        last = None
        while True:
            n = self._read()
            ms = round((time.monotonic() - self.t0) * 1e3, 1)
            if n is None:
                return
            if n != last:
                self.points.append([ms, n])
                last = n
            elif self.points:
                self.tail = [ms, n]
            if self.stopping.wait(self.period_s):
                return

    def start(self) -> "ThreadSampler":
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def samples(self) -> list[list[float]]:
        """Stops the sampling; the samples so far."""
        self.stopping.set()
        if self.thread:
            self.thread.join(5)
        if self.tail and self.points and self.tail[0] > self.points[-1][0]:
            return self.points + [self.tail]
        return list(self.points)
