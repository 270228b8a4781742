#!/usr/bin/env python3
"""tpl benchmark runner: tpl and its peers side by side (python3 stdlib; matplotlib optional).

1. ``<build>/bench/tpl_micro_bench`` (Google Benchmark, tpl only): one table per group
   (``Group/Method`` names); the counter ``bytes_per_op`` is shown as "Allocated".

2. The workload groups (GROUPS in bench/groups.py: the seeds' workloads). Programs: every
   ``<build>/bench/tpl_wl_*`` (bench/workload.hpp) and one program per peer runtime
   (bench/peers/, built by bench/peers/peers.py; a missing toolchain skips that peer). All speak
   one protocol (bench/peers/README.md): ``--list`` names their methods, ``--run GROUP METHOD
   [--quick]`` warms up and prints ONE measured sample as a JSON line. This runner interleaves
   the invocations of every method of a group round by round (A B C A B C ...), so drift on a
   shared machine hits all alike, checks every checksum, and measures each child's peak RSS.
   Server groups (GROUPS entries with a ``server`` kind: echo, plaintext) run each program as a
   server on a loopback port and drive it with ONE client for all (bench/loadgen, or wrk):
   requests/s and p50/p99 latency (bench/peers/README.md, "Server groups").

Tables: Method | Runtime | Mean (median of the rounds) | Min-Max | Ratio (to the first row) |
Allocated | Peak RSS. Raw samples: build/bench-results.json (``--out``). Plots: bench/plot.py
(build/bench-plots/, or docs/img/ with ``--docs``, which also regenerates the marked region of
docs/benchmarks.md, saves the results to docs/bench-results.json and regenerates README.md's
figures region, see bench/readme_figures.py; ``--regen-docs`` redoes the last two without running
anything). ``--self-test``: every group once, quick, fails on malformed results or on a group
without a description (the ctest ``bench_harness``). Exit status is non-zero if any program failed.

Files: this one runs the programs (discovery, interleaved rounds, servers and their clients);
bench/groups.py is the catalog of groups, bench/report.py prints the tables and writes the docs.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import platform
import queue
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import peers  # noqa: E402  (bench/peers/peers.py: finds toolchains, builds the peer programs)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import readme_figures  # noqa: E402  (bench/readme_figures.py: README.md's generated figures)
import server_groups  # noqa: E402  (bench/server_groups.py: helpers of the server groups)
from groups import (FILES_BLOCK, FILES_READ_BYTES, GROUPS, TPL_EXAMPLES, TPL_SERVERS,  # noqa: E402
                    Entry, _cores, micro_description)
from report import (REPO_ROOT, find_matplotlib_python, fmt_bytes, fmt_ratio,  # noqa: E402
                    fmt_time_ns, group_footer, group_table, gxx_version, machine_description,
                    micro_markdown, print_table, regen_docs, summarize, write_docs)

MICRO_NAME = "tpl_micro_bench"
WORKLOAD_PREFIX = "tpl_wl_"
QUICK_MIN_TIME = 0.05  # seconds per micro benchmark in --quick mode
# Seconds per micro benchmark in a full run (Google Benchmark's default is 0.5): with ~100 of them
# this keeps the micro part near half a minute of the 20-minute budget (LONG_ROUND_S, below).
FULL_MIN_TIME = 0.3

_UNIT_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


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
        cmd.append(min_time_arg(exe, QUICK_MIN_TIME if args.quick else FULL_MIN_TIME))
        cmd += args.micro_arg  # a --benchmark_min_time given here comes last and wins
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
        print_table(f"## {group}  ({exe.name}): {micro_description(group)}",
                    ["Method", "Mean", "Ratio", "Allocated"], table)
    return result


_RSSWRAP: list[str] = []  # [path] once built (see bench/peers/cpp/rsswrap.c)


def build_rsswrap(root: Path) -> None:
    src = Path(__file__).resolve().parent / "peers" / "cpp" / "rsswrap.c"
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not src.exists():
        print("note: no C compiler for bench/peers/cpp/rsswrap.c; Peak RSS includes Python's")
        return
    exe = root / "rsswrap"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        root.mkdir(parents=True, exist_ok=True)
        rc = subprocess.run([cc, "-O2", str(src), "-o", str(exe)]).returncode
        if rc != 0:
            print("note: rsswrap failed to build; Peak RSS includes Python's")
            return
    _RSSWRAP[:] = [str(exe)]


def _timed_child(cmd: list[str], env: dict, timeout: float) -> tuple[int, str, str, int, float]:
    """Runs cmd; returns (rc, stdout, stderr, peak RSS of the child in KB, wall seconds)."""
    start = time.monotonic()
    rss_file = None
    if _RSSWRAP:
        fd, rss_file = tempfile.mkstemp(prefix="tpl-bench-rss-")
        os.close(fd)
        cmd = [_RSSWRAP[0], rss_file] + cmd
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT,
                             env={**os.environ, **env}, start_new_session=True)
    except OSError as exc:
        return -2, "", str(exc), 0, 0.0
    bufs: dict[str, bytes] = {}

    def pump(name, stream):
        bufs[name] = stream.read()

    readers = [threading.Thread(target=pump, args=(n, s), daemon=True)
               for n, s in (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    expired = threading.Event()

    def kill():
        expired.set()
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the wrapper and the program it runs
        except OSError:
            pass

    killer = threading.Timer(timeout, kill)
    killer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        os.killpg(p.pid, signal.SIGKILL)  # leftovers (a program's own children)
    except OSError:
        pass
    for t in readers:
        t.join(10)
    rss = int(ru.ru_maxrss)
    if rss_file:
        try:
            rss = int(Path(rss_file).read_text().strip() or 0)
        except (OSError, ValueError):
            pass
        finally:
            os.unlink(rss_file)
    rc = -1 if expired.is_set() else p.returncode
    return (rc, bufs.get("out", b"").decode(errors="replace"),
            bufs.get("err", b"").decode(errors="replace"), rss, time.monotonic() - start)


_TS_RE = re.compile(r"^\s*(?:\[?)(?P<ts>(?:\d+:)?\d+:\d+(?:\.\d+)?|\d+(?:\.\d+)?)\s*(?P<unit>ms|s)?"
                    r"\]?\s*:\s*(?P<id>\d+)\s*$")
_DONE_RE = re.compile(r"^\s*Done\s*:?\s*(?P<ts>(?:\d+:)?\d+:\d+(?:\.\d+)?|\d+(?:\.\d+)?)\s*"
                      r"(?P<unit>ms|s)?", re.I)


def _ts_ms(ts: str, unit: str | None) -> float:
    if ":" in ts:  # [hh:]mm:ss.fffffff (a .NET TimeSpan, as the seed prints)
        parts = [float(x) for x in ts.split(":")]
        secs = 0.0
        for p in parts:
            secs = secs * 60 + p
        return secs * 1000.0
    return float(ts) * (1000.0 if unit == "s" else 1.0)


def parse_timeline(text: str) -> tuple[list[float], float | None]:
    """Seed-000-style output ('<time>: <id>' per item, 'Done: <time>') -> (starts_ms, done_ms)."""
    starts, done = [], None
    for line in text.splitlines():
        m = _DONE_RE.match(line)
        if m:
            done = _ts_ms(m.group("ts"), m.group("unit"))
            continue
        m = _TS_RE.match(line)
        if m:
            starts.append(_ts_ms(m.group("ts"), m.group("unit")))
    if starts and min(starts) > (done if done is not None else 60_000.0):
        first = min(starts)  # wall-clock stamps (the seed's "mm:ss.ff"): make them offsets
        starts = [v - first for v in starts]
    return starts, done


def run_entry(e: Entry, quick: bool, timeout: float) -> str | None:
    """Runs one sample of e; appends it; returns an error message or None."""
    if e.kind == "server":
        return run_server_entry(e, quick, timeout)
    if e.kind == "example":
        cmd = list(e.program.argv)
    else:
        cmd = e.program.argv + ["--run", e.group, e.method] + (["--quick"] if quick else [])
    env = {**e.program.env, **_FILES_ENV} if GROUPS.get(e.group, {}).get("files") else e.program.env
    rc, out, err, rss, wall = _timed_child(cmd, env, timeout)
    e.wall_s.append(round(wall, 3))
    if rc != 0:
        tail = " | ".join(ln for ln in err.strip().splitlines()[-3:])
        return f"{describe_rc(rc)}: {tail[-300:]}" if tail else describe_rc(rc)
    if e.kind == "example":
        starts, done = parse_timeline(out)
        if not starts:
            return "printed no '<time>: <id>' timeline lines"
        e.samples.append(done if done is not None else wall * 1000.0)
        e.starts.append(sorted(starts))
        e.checksums.append(len(starts))
        e.alloc.append(None)
        e.rss_kb.append(rss)
        return None
    record = None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "ms" in obj:
                record = obj
    if record is None:
        return "printed no JSON result line"
    ms, checksum = record.get("ms"), record.get("checksum")
    if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not ms >= 0 or ms != ms:
        return f"bad 'ms' in {record}"
    if not isinstance(checksum, int) or isinstance(checksum, bool):
        return f"bad 'checksum' in {record}"
    if record.get("group") != e.group or record.get("method") != e.method:
        return f"answered for {record.get('group')!r} / {record.get('method')!r}"
    spec = GROUPS.get(e.group, {})
    if spec.get("expect"):
        want = spec["expect"][1 if quick else 0]
        if checksum != want and e.program.key == "tpl":
            # tpl's workload checks its own expected value; a different one means a different
            # size or checksum convention from the peers': flag it in the table, do not fail.
            e.note = f"checksum {checksum}, the peers' {want}: not the same work?"
        elif checksum != want:
            return f"wrong checksum {checksum} (expected {want})"
    elif checksum <= 0 and e.program.key != "tpl" and not spec.get("any_checksum"):
        # (tpl's workloads check their own expected result and exit non-zero on a mismatch)
        return f"checksum {checksum} (expected the number of items run)"
    alloc = record.get("allocated_bytes")
    starts = record.get("starts_ms")
    if spec.get("timeline"):
        if not isinstance(starts, list) or not starts or \
                not all(isinstance(s, (int, float)) for s in starts):
            return "printed no 'starts_ms' list for a timeline group"
    e.samples.append(float(ms))
    e.checksums.append(checksum)
    e.alloc.append(alloc if isinstance(alloc, (int, float)) and not isinstance(alloc, bool)
                   else None)
    e.rss_kb.append(rss)
    e.starts.append(sorted(starts) if isinstance(starts, list) else None)
    return None


# --------------------------------------------------------------------------- #
# server groups: a server program on a loopback port, driven by one client for every runtime
# --------------------------------------------------------------------------- #
SERVER_READY_TIMEOUT_S = 30
_LISTEN_RE = re.compile(r"(?:127\.0\.0\.1|\[::1\]):(\d+)")
_CLIENTS: dict[str, str] = {}  # "loadgen" -> path, once found or built (see find_clients)
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn of a server: SIGKILL when this runner dies, so that no server outlives it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


class ServerProcess:
    """A server program of a server group, in a session of its own, killed after `lifetime_s`
    at the latest. Its stdout is drained for as long as it runs; its first line naming
    127.0.0.1:PORT (or [::1]:PORT) gives the port."""

    def __init__(self, argv: list[str], env: dict, lifetime_s: float):
        self.stderr = tempfile.TemporaryFile()
        self.lines: queue.Queue = queue.Queue()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.stderr, cwd=REPO_ROOT, env={**os.environ, **env},
                                     start_new_session=True, preexec_fn=_die_with_parent)
        threading.Thread(target=self._pump, daemon=True).start()
        self.killer = threading.Timer(lifetime_s, self._kill)
        self.killer.start()

    def _pump(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(raw.decode(errors="replace"))
        self.lines.put(None)

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def wait_port(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            m = _LISTEN_RE.search(line)
            if m:
                return int(m.group(1))
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def peak_rss_kb(self) -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return 0

    def close(self) -> str:
        """Kills the server; returns the end of its stderr."""
        self.killer.cancel()
        self._kill()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        self.stderr.close()
        return " | ".join(ln for ln in text.strip().splitlines()[-3:])[-300:]


def client_missing(group: str) -> str | None:
    """Why the client of a server group cannot run here, or None."""
    spec = GROUPS.get(group, {})
    if "load" in spec and "loadgen" not in _CLIENTS:
        return _CLIENTS.get("loadgen_why", "bench/loadgen not built")
    if "load" in spec:
        why = server_groups.nofile_missing(spec["load"]["conns"] + spec["load"].get("blocking", 0))
        if why:
            return why
    if "wrk" in spec and not shutil.which("wrk"):
        return "wrk not found (apt-get install wrk)"
    return None


def find_clients(groups: list[str], peers_root: Path, rebuild: bool) -> None:
    if any("load" in GROUPS.get(g, {}) for g in groups):
        exe, why = peers.build_loadgen(peers_root, rebuild)
        if exe:
            _CLIENTS["loadgen"] = str(exe)
        else:
            _CLIENTS["loadgen_why"] = why


def _json_record(out: str) -> dict | None:
    record = None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                record = obj
    return record


def run_loadgen(spec: dict, port: int, quick: bool, timeout: float,
                cpu: server_groups.CpuMeter) -> tuple[dict | None, str]:
    """One bench/loadgen run against 127.0.0.1:port: (sample, "") or (None, why). `cpu` meters
    the server over the whole invocation (its connections, its few warm-up round trips included:
    loadgen does them in the same process)."""
    load = spec["load"]
    i = 1 if quick else 0
    amount = (["-duration", str(load["duration"][i])] if "duration" in load
              else ["-requests", str(load["requests"][i])])
    cmd = [_CLIENTS["loadgen"], "echo", "-addr", f"127.0.0.1:{port}",
           "-conns", str(load["conns"])] + amount + [
           "-warmup", str(load["warmup"][i]), "-blocking", str(load.get("blocking", 0)),
           "-seconds-max", str(int(timeout))]
    cpu.start()
    rc, out, err, _, _ = _timed_child(cmd, {}, timeout + 10)
    cpu.stop()
    if rc != 0:
        tail = " | ".join(err.strip().splitlines()[-2:])[-300:]
        return None, f"loadgen: {describe_rc(rc)}: {tail}"
    rec = _json_record(out)
    if rec is None:
        return None, "loadgen printed no JSON line"
    try:
        sample = {"ms": float(rec["ms"]), "rps": float(rec["requests_per_s"]),
                  "p50_us": float(rec["p50_us"]), "p99_us": float(rec["p99_us"]),
                  "checksum": int(rec["checksum"]),
                  "extra": {k: rec[k] for k in ("blocking_requests", "unanswered") if k in rec}}
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"loadgen: malformed result {rec}: {exc!r}"
    return sample, ""


_WRK_REQUESTS = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s|m|h)\b")
_WRK_RPS = re.compile(r"Requests/sec:\s*([\d.]+)")
_WRK_PERCENTILE = re.compile(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", re.M)
_WRK_NON_2XX = re.compile(r"Non-2xx or 3xx responses:\s*(\d+)")
_WRK_SOCKET_ERRORS = re.compile(r"Socket errors:\s*(.*)")
_WRK_UNIT_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def run_wrk(spec: dict, port: int, quick: bool, timeout: float,
            cpu: server_groups.CpuMeter) -> tuple[dict | None, str]:
    """A warm-up and one measured wrk run against http://127.0.0.1:port/plaintext (with the
    spec's `pipeline` depth: bench/wrk/pipeline.lua, that many requests per write). `cpu`
    meters the server over the measured run only."""
    w = spec["wrk"]
    i = 1 if quick else 0
    wrk = shutil.which("wrk") or "wrk"
    base = [wrk, f"-t{max(1, _cores() // 2)}", f"-c{w['conns']}"] + server_groups.wrk_script_args(w)
    url = [f"http://127.0.0.1:{port}/plaintext"] + server_groups.wrk_tail(w)
    if w["warmup_s"][i] > 0:
        rc, _, err, _, _ = _timed_child(base + [f"-d{w['warmup_s'][i]}s"] + url, {}, timeout)
        if rc != 0:
            return None, f"wrk (warm-up): {describe_rc(rc)}: {err.strip()[-200:]}"
    cpu.start()
    rc, out, err, _, _ = _timed_child(base + [f"-d{w['seconds'][i]}s", "--latency"] + url, {},
                                      timeout)
    cpu.stop()
    if rc != 0:
        return None, f"wrk: {describe_rc(rc)}: {err.strip()[-200:]}"
    reqs, rps = _WRK_REQUESTS.search(out), _WRK_RPS.search(out)
    pct = {m.group(1): float(m.group(2)) * _WRK_UNIT_US[m.group(3)]
           for m in _WRK_PERCENTILE.finditer(out)}
    if not reqs or not rps or set(pct) != {"50", "99"}:
        return None, "wrk printed no requests, Requests/sec or 50%/99% latency lines"
    non_2xx = _WRK_NON_2XX.search(out)
    if non_2xx and int(non_2xx.group(1)) > 0:
        return None, f"{non_2xx.group(1)} answers were not 2xx/3xx"
    sock = _WRK_SOCKET_ERRORS.search(out)
    extra = {"socket_errors": sock.group(1).strip()} if sock else {}
    if w.get("pipeline"):  # wrk's percentiles are wrong then (see server_groups.py)
        pct = {"50": None, "99": None}
    return {"ms": float(reqs.group(2)) * _WRK_UNIT_US[reqs.group(3)] / 1e3,
            "rps": float(rps.group(1)), "p50_us": pct["50"], "p99_us": pct["99"],
            "checksum": int(reqs.group(1)), "extra": extra}, ""


def run_server_entry(e: Entry, quick: bool, timeout: float) -> str | None:
    """Starts e's server, runs the group's client against it once, kills the server."""
    spec = GROUPS[e.group]
    t0 = time.monotonic()
    server = ServerProcess(e.argv or [], e.program.env, SERVER_READY_TIMEOUT_S + 2 * timeout + 60)
    sample, why, rss, cpu_s = None, "", 0, None
    try:
        port = server.wait_port(SERVER_READY_TIMEOUT_S)
        if port is None:
            why = ("exited before it listened" if not server.alive() else
                   f"printed no 'listening on 127.0.0.1:PORT' line in {SERVER_READY_TIMEOUT_S} s")
        else:
            client = run_wrk if "wrk" in spec else run_loadgen
            sampler = (server_groups.ThreadSampler(server.proc.pid).start()
                       if spec.get("threads") else None)
            cpu = server_groups.CpuMeter(server.proc.pid)
            sample, why = client(spec, port, quick, timeout, cpu)
            threads = sampler.samples() if sampler else None
            cpu_s = cpu.seconds()
            if sample is not None and not server.alive():
                sample, why = None, "the server exited during the run"
            rss = server.peak_rss_kb()
    finally:
        tail = server.close()
    e.wall_s.append(round(time.monotonic() - t0, 3))
    if sample is None:
        return f"{why}: server: {tail}" if tail else why
    if spec.get("expect"):
        want = spec["expect"][1 if quick else 0]
        if sample["checksum"] != want:
            return f"{sample['checksum']} round trips answered, expected {want}"
    elif sample["checksum"] <= 0 and not spec.get("any_checksum"):
        return "no request answered"
    e.samples.append(sample["ms"])
    e.checksums.append(sample["checksum"])
    e.alloc.append(None)
    e.rss_kb.append(rss)
    e.starts.append(None)
    e.rps.append(sample["rps"])
    e.p50_us.append(sample["p50_us"])
    e.p99_us.append(sample["p99_us"])
    # Per request answered (per round trip for the echo groups): the whole server's CPU time.
    e.cpu_us.append(None if cpu_s is None or sample["checksum"] <= 0
                    else cpu_s * 1e6 / sample["checksum"])
    e.extra.append(sample["extra"])
    e.threads.append(threads)
    if sample["extra"].get("socket_errors"):
        e.note = f"wrk's socket errors: {sample['extra']['socket_errors']}"
    if sample["extra"].get("unanswered"):
        e.note = (f"{sample['extra']['unanswered']} round trips still unanswered 1 s after the "
                  "end (in p50/p99 with their wait so far)")
    return None


_FILES_ENV: dict[str, str] = {}  # TPL_BENCH_FILE, TPL_BENCH_WRITE_FILE once prepare_files ran


def prepare_files(quick: bool) -> Path:
    """The files groups' data file (FILES_READ_BYTES, read through once so that it is in the page
    cache) and the path of their write file, in a new temporary directory (returned)."""
    tmp = Path(tempfile.mkdtemp(prefix="tpl-bench-files-"))
    data = tmp / "data.bin"
    mib = b"".join(bytes([i]) * FILES_BLOCK for i in range(256))  # blocks 256k .. 256k+255
    with open(data, "wb") as f:
        for _ in range(FILES_READ_BYTES[1 if quick else 0] >> 20):
            f.write(mib)
    with open(data, "rb") as f:
        while f.read(1 << 20):
            pass
    _FILES_ENV.update(TPL_BENCH_FILE=str(data), TPL_BENCH_WRITE_FILE=str(tmp / "write.bin"))
    return tmp


def list_methods(prog: "peers.Program") -> tuple[list[tuple[str, str]], str | None]:
    rc, out, err, _, _ = _timed_child(prog.argv + ["--list"], prog.env, 120)
    if rc != 0:
        return [], f"--list failed: {describe_rc(rc)} {err.strip()[-200:]}"
    pairs = []
    for line in out.splitlines():
        if "\t" in line:
            g, m = line.rstrip("\n").split("\t", 1)
            pairs.append((g.strip(), m.strip()))
    return pairs, None if pairs else "--list printed no methods"


def discover_tpl(build: Path, failures: list[str]) -> tuple[list[Entry], list[str]]:
    """tpl's methods: every tpl_wl_* --list, plus the injection examples."""
    entries: list[Entry] = []
    notes: list[str] = []
    runtime = f"tpl (g++ {gxx_version()} -O2)"
    for exe in sorted((build / "bench").glob(WORKLOAD_PREFIX + "*")):
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            continue
        prog = peers.Program("tpl", runtime, [str(exe)], details={"exe": exe.name})
        pairs, why = list_methods(prog)
        if why:
            failures.append(f"{exe.name}: {why}")
            continue
        entries += [Entry(g, m, prog) for g, m in pairs]
    for group, name, label, args in TPL_EXAMPLES:
        exe = build / "examples" / name
        if exe.is_file() and os.access(exe, os.X_OK):
            prog = peers.Program("tpl", runtime, [str(exe)] + args, details={"exe": name})
            entries.append(Entry(group, f"{label} ({name})", prog, kind="example"))
    for kind, name, label, args, env in TPL_SERVERS:
        exe = build / "examples" / name
        if exe.is_file() and os.access(exe, os.X_OK):
            prog = peers.Program("tpl", runtime, [str(exe)] + args, env=env,
                                 details={"exe": name})
            entries += server_entries(kind, label, prog, [str(exe)] + args)
    return entries, notes


def server_entries(kind: str, method: str, prog: "peers.Program", argv: list[str]) -> list[Entry]:
    """One row per group that a server of this kind serves."""
    return [Entry(g, method, prog, kind="server", argv=argv)
            for g, spec in GROUPS.items() if spec.get("server") == kind]


SERVER_KINDS = {spec["server"] for spec in GROUPS.values() if "server" in spec}


def group_selected(filter_re: str, group: str) -> bool:
    if not filter_re:
        return True
    if filter_re in GROUPS or filter_re.lstrip("-") in GROUPS:
        neg = filter_re.startswith("-")
        return (group == filter_re.lstrip("-")) != neg
    return matches(filter_re, group)


def progress(msg: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + msg[:150])
        sys.stderr.flush()
    else:
        print(msg, flush=True)


# The default number of rounds keeps a full `make bench` under 20 minutes on 2 cores: a group
# whose first round takes longer than LONG_ROUND_S (peers that need seconds per run) is measured
# in LONG_GROUP_REPS rounds; the median of 3 interleaved rounds still drops one outlier. An
# explicit --reps applies to every group as given (max_reps still caps).
LONG_ROUND_S = 5.0
LONG_GROUP_REPS = 3
# A method whose first run takes longer than this (Go and tokio on fib35, Java's virtual threads
# on chain_channels: 10-50x the group's fastest) is measured in that one round; its rank does not
# depend on a second sample, and three of them cost over a minute of the budget.
LONG_METHOD_S = 10.0


def run_groups(groups: dict[str, list[Entry]], reps: int, quick: bool, timeout: float,
               failures: list[str], shorten_long: bool = False) -> None:
    total = sum(len(v) * min(reps, GROUPS.get(g, {}).get("max_reps", reps))
                for g, v in groups.items())
    done = 0
    t_start = time.monotonic()
    for group, entries in groups.items():
        g0 = time.monotonic()
        g_reps = min(reps, GROUPS.get(group, {}).get("max_reps", reps))
        rep = 0
        while rep < g_reps:
            if (shorten_long and rep == 1 and g_reps > LONG_GROUP_REPS
                    and time.monotonic() - g0 > LONG_ROUND_S):
                total -= len(entries) * (g_reps - LONG_GROUP_REPS)
                g_reps = LONG_GROUP_REPS
            for e in entries:  # interleaved: A B C A B C ...
                done += 1
                if e.error:
                    continue
                if shorten_long and rep >= 1 and e.wall_s and e.wall_s[0] > LONG_METHOD_S:
                    e.note = e.note or f"one round: its first run took over {LONG_METHOD_S:.0f} s"
                    continue
                el = time.monotonic() - t_start
                progress(f"[{done}/{total} {el:5.0f} s] {group} round {rep + 1}/{g_reps}: "
                         f"{e.label}")
                err = run_entry(e, quick, timeout)
                if err:
                    e.error = err
                    failures.append(f"{group}: {e.label}: {err}")
                    progress("")
                    print(f"!! {group}: {e.label}: {err}", file=sys.stderr, flush=True)
            rep += 1
        if sys.stderr.isatty():
            progress("")
            sys.stderr.write("\r\033[K")
        print(f"   {group}: {len(entries)} methods x {g_reps} rounds in "
              f"{time.monotonic() - g0:.1f} s", flush=True)


# --------------------------------------------------------------------------- #
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/release",
                    help="CMake build directory (default: build/release)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: small sizes, 1 round, short micro benchmarks")
    ap.add_argument("--filter", default="",
                    help="a group name (exactly that group) or a regex over group names; "
                         "also the Google Benchmark filter for the micro benchmarks "
                         "('-re' negates)")
    ap.add_argument("--reps", type=int, default=None,
                    help=f"measured rounds per group (default 5, or {LONG_GROUP_REPS} for a group "
                         f"whose first round takes over {LONG_ROUND_S:.0f} s; quick 1)")
    ap.add_argument("--out", default=None,
                    help="raw JSON results file (default: <repo>/build/bench-results.json)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="per-invocation timeout in seconds (default 300, quick 120)")
    ap.add_argument("--no-micro", action="store_true", help="skip tpl_micro_bench")
    ap.add_argument("--no-workloads", action="store_true", help="skip the workload groups")
    ap.add_argument("--no-peers", action="store_true", help="tpl's programs only")
    ap.add_argument("--peers", default=None,
                    help="comma-separated subset of " + ",".join(peers.BUILDERS))
    ap.add_argument("--rebuild-peers", action="store_true",
                    help="ignore cached peer builds (and cached build failures)")
    ap.add_argument("--no-plots", action="store_true", help="no PNG plots")
    ap.add_argument("--docs", action="store_true",
                    help="regenerate the marked region of docs/benchmarks.md and docs/img/*.png")
    ap.add_argument("--self-test", action="store_true",
                    help="harness test: every group, quick, 1 round, every available peer; "
                         "fails if a built program prints a malformed or wrong result")
    ap.add_argument("--regen-docs", action="store_true",
                    help="run nothing: regenerate README.md's figures region from the last full "
                         "run (docs/bench-results.json, or docs/benchmarks.md's tables) and bring "
                         "docs/benchmarks.md's group descriptions up to date")
    ap.add_argument("--command", default=None, help="the command line to quote in the docs")
    ap.add_argument("--micro-arg", action="append", default=[],
                    help="extra argument for tpl_micro_bench (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true", help="echo the programs' stdout")
    args = ap.parse_args()

    if args.regen_docs:
        return regen_docs()
    if args.self_test:
        args.quick = True
        args.no_plots = True
        args.docs = False
        if args.reps is None:
            args.reps = 1
        # `make test` sets this under CI=true: building and running every peer is most of the
        # self-test's time there, and `make bench` fails the same way on a peer's bad output.
        if os.environ.get("TPL_BENCH_SELFTEST_PEERS", "1") == "0" and not args.no_peers:
            print("self-test: tpl's programs only (TPL_BENCH_SELFTEST_PEERS=0)")
            args.no_peers = True
    reps = args.reps if args.reps is not None else (1 if args.quick else 5)
    shorten_long = args.reps is None and not args.quick  # the default rounds (LONG_ROUND_S)
    timeout = args.timeout if args.timeout is not None else (120 if args.quick else 300)

    build = Path(args.build)
    if not build.is_absolute():
        build = (Path.cwd() / build).resolve()
    bench_dir = build / "bench"
    out_path = Path(args.out) if args.out else REPO_ROOT / "build" / "bench-results.json"
    peers_root = Path(os.environ.get("TPL_BENCH_PEERS_DIR") or REPO_ROOT / "build" / "peers")
    venv = peers_root / "venv"

    if not bench_dir.is_dir():
        print(f"error: {bench_dir} does not exist (configure/build with TPL_BUILD_BENCH=ON first)",
              file=sys.stderr)
        return 2

    t_run = time.monotonic()
    build_rsswrap(peers_root)
    if line := server_groups.raise_nofile_limit():
        print(line)
    failures: list[str] = []
    results: dict = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "machine": machine_description(),
        "command": args.command or shlex.join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "build_dir": str(build),
        "quick": args.quick,
        "reps": reps,
        "rounds_note": (f", {LONG_GROUP_REPS} for a group whose first round took over "
                        f"{LONG_ROUND_S:.0f} s" if shorten_long else ""),
        "filter": args.filter,
        "micro": None,
        "peers": [],
        "groups": {},
    }
    print(f"tpl benchmarks: build={build} quick={args.quick} rounds={reps} "
          f"filter={args.filter or '(none)'}")

    micro = bench_dir / MICRO_NAME
    if not args.no_micro and not args.self_test:
        print("\n=== micro benchmarks (tpl only) ===")
        if micro.is_file() and os.access(micro, os.X_OK):
            results["micro"] = run_micro(micro, args, failures)
        else:
            print(f"   ({MICRO_NAME} not built; skipped)")
    elif args.self_test and micro.is_file():
        rc, out, err, _, _ = _timed_child([str(micro), "--benchmark_list_tests"], {}, 120)
        if rc != 0 or not out.strip():
            failures.append(f"{MICRO_NAME} --benchmark_list_tests: {describe_rc(rc)}")
        for group in sorted({split_name(n.strip())[0] for n in out.splitlines() if n.strip()}):
            if not micro_description(group):
                failures.append(f"micro-benchmark group {group}: no description "
                                "(add it to MICRO_GROUPS in bench/groups.py)")

    plots: list[str] = []
    if not args.no_workloads:
        print("\n=== workload groups: tpl and the peers, interleaved ===")
        tpl_entries, _ = discover_tpl(build, failures)
        programs: list = []
        if not args.no_peers:
            only = args.peers.split(",") if args.peers else None
            if only is None or "coreclr" in only:
                ok, why = peers.ensure_venv(venv, ["dotnetcore2"])
                if not ok:
                    print(f"peers: {why}")
            programs = peers.build_all(peers_root, args.rebuild_peers, only, venv)
        results["peers"] = [{"key": p.key, "runtime": p.runtime, "skipped": p.skipped,
                             "details": p.details} for p in programs]
        peer_entries: list[Entry] = []
        for p in programs:
            if p.skipped:
                continue
            pairs, why = list_methods(p)
            if why:
                failures.append(f"{p.runtime}: {why}")
                p.skipped = why
                continue
            for g, m in pairs:
                if g in SERVER_KINDS:
                    peer_entries += server_entries(g, m, p, p.argv + ["--serve", g, m])
                else:
                    peer_entries.append(Entry(g, m, p))
        names = list(GROUPS) + sorted({e.group for e in tpl_entries + peer_entries} - set(GROUPS))
        groups: dict[str, list[Entry]] = {}
        for g in names:
            if not group_selected(args.filter, g):
                continue
            es = [e for e in tpl_entries if e.group == g] + [e for e in peer_entries if e.group == g]
            groups[g] = es
        find_clients([g for g, es in groups.items() if es], peers_root, args.rebuild_peers)
        skipped_groups: dict[str, str] = {}
        for g, es in groups.items():
            why = client_missing(g) if es else None
            if why:
                skipped_groups[g] = why
                print(f"   {g}: skipped: {why}")
        files_dir = (prepare_files(args.quick)
                     if any(es and GROUPS.get(g, {}).get("files") for g, es in groups.items())
                     else None)
        try:
            run_groups({g: es for g, es in groups.items() if es and g not in skipped_groups},
                       reps, args.quick, timeout, failures, shorten_long)
        finally:
            if files_dir:
                shutil.rmtree(files_dir, ignore_errors=True)
        for g, es in groups.items():
            tpl_present = any(e.program.key == "tpl" for e in es)
            s = summarize(g, es, programs, tpl_present)
            if g in skipped_groups:
                s["group_skipped"] = skipped_groups[g]
            results["groups"][g] = s
            if not s["description"]:
                msg = f"group {g}: no description (add it to GROUPS in bench/run.py)"
                if args.self_test:
                    failures.append(msg)
                else:
                    print(f"!! {msg}", file=sys.stderr)
            print()
            print(f"## {g}: {s['description']}")
            for line in group_table(g, s):
                print(line)
            for line in group_footer(s):
                print(line)

    results["loadavg_end"] = machine_description().get("loadavg_start")
    results["elapsed_s"] = round(time.monotonic() - t_run, 1)
    results["failures"] = failures
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nraw results (every sample) written to {out_path}")

    if results["groups"] and not args.no_plots:
        py, why = find_matplotlib_python(venv, allow_install=True)
        img_dir = REPO_ROOT / "docs" / "img" if args.docs else REPO_ROOT / "build" / "bench-plots"
        if py is None:
            print(f"plots skipped: {why}")
        else:
            rc, out, err, _, _ = _timed_child(
                [py, str(Path(__file__).with_name("plot.py")), str(out_path), str(img_dir)], {}, 300)
            sys.stdout.write(out)
            if rc != 0:
                print(f"plots failed: {err.strip()[-500:]}")
            plots = [ln.split(" ", 1)[1].strip() for ln in out.splitlines()
                     if ln.startswith("wrote ")]
    if args.docs:
        write_docs(results, micro_markdown(results["micro"]), plots,
                   REPO_ROOT / "docs" / "benchmarks.md")
        readme_figures.save_results(results, REPO_ROOT / "docs" / "bench-results.json")
        readme_figures.write_readme(results, REPO_ROOT / "README.md")

    print(f"total {results['elapsed_s'] / 60:.1f} min")
    if failures:
        print("\nFAILED:", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    if args.self_test:
        n = sum(len(s["rows"]) for s in results["groups"].values() if not s.get("group_skipped"))
        print(f"self-test passed: {n} programs printed well-formed results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
