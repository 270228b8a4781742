#!/usr/bin/env python3
"""CPU per request of HTTP servers under wrk, interleaved: what a server costs, where requests/s
alone only says how the two cores were shared that second.

On a small shared machine wrk and the server compete for the same cores, so requests/s moves
with the machine's phase and with how the kernel schedules the two; the server's own CPU time per
request (user + system, from /proc/PID/stat, across all its threads) is steadier and is what a
server can improve. Each round starts every server afresh, warms it with a 1 s wrk run, then
measures one wrk run; the servers take turns, round after round.

    python3 bench/server_cpu.py --rounds 6 --seconds 3 \\
      'tpl=TPL_SOCKETS_INLINE_COMPLETIONS=0 build/release/examples/example_http_hello 0' \\
      'tpl_inline=TPL_SOCKETS_INLINE_COMPLETIONS=1 build/release/examples/example_http_hello 0' \\
      'asio=build/peers/asio/*/peer --serve plaintext "coroutine per connection, minimal parser (1 thread)"'

Each server is NAME=COMMAND: leading VAR=value words are its environment, a glob in the program
path is expanded (the peers' build directories are named by a hash), and the server must print
"127.0.0.1:PORT" (the bench's servers print "listening on 127.0.0.1:PORT") within 30 s; it runs
as bench/run.py runs the server groups' servers (run.py's ServerProcess).
Loopback only; every run is bounded by --seconds. Prints one line per run and the medians.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

# bench/run.py's server handling (a session of its own, stdout drained, the port from its first
# "127.0.0.1:PORT" line within a timeout, killed with its process group) and wrk's output patterns.
from run import _WRK_REQUESTS, _WRK_RPS, SERVER_READY_TIMEOUT_S, ServerProcess  # noqa: E402
from server_groups import CpuMeter  # noqa: E402


def parse_server(spec: str) -> tuple[str, list[str], dict[str, str]]:
    name, _, command = spec.partition("=")
    if not name or not command:
        raise SystemExit(f"server_cpu: '{spec}' is not NAME=COMMAND")
    words = shlex.split(command)
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        k, _, v = words.pop(0).partition("=")
        env[k] = v
    if not words:
        raise SystemExit(f"server_cpu: '{spec}' has no program")
    matches = sorted(glob.glob(words[0]))
    if len(matches) > 1:
        raise SystemExit(f"server_cpu: '{words[0]}' matches {len(matches)} files")
    if matches:
        words[0] = matches[0]
    if os.sep in words[0]:
        words[0] = os.path.abspath(words[0])  # ServerProcess runs it from the repository's root
    return name, words, env


def context_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of the process's threads alive now."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # the thread ended meanwhile
    return total


def measure(argv: list[str], env: dict[str, str], seconds: int, conns: int, path: str) -> dict:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("server_cpu: wrk is not installed (apt-get install wrk)")
    server = ServerProcess(argv, env, SERVER_READY_TIMEOUT_S + seconds + 90)
    try:
        port = server.wait_port(SERVER_READY_TIMEOUT_S)
        if port is None:
            raise RuntimeError(f"{argv[0]} printed no 127.0.0.1:PORT line in {SERVER_READY_TIMEOUT_S} s")
        pid = server.proc.pid
        url = f"http://127.0.0.1:{port}{path}"
        base = [wrk, "-t1", f"-c{conns}"]
        subprocess.run(base + ["-d1s", url], capture_output=True, timeout=30, check=True)
        cpu = CpuMeter(pid)
        cpu.start()
        switches0, client0 = context_switches(pid), os.times()
        out = subprocess.run(base + [f"-d{seconds}s", url], capture_output=True, text=True,
                             timeout=seconds + 30, check=True).stdout
        cpu.stop()
        switches1, client1 = context_switches(pid), os.times()
        threads = len(os.listdir(f"/proc/{pid}/task"))
    finally:
        server.close()
    done = _WRK_REQUESTS.search(out)
    rps = _WRK_RPS.search(out)
    if not done or not rps or int(done.group(1)) == 0:
        raise RuntimeError(f"wrk printed no request count: {out[-300:]!r}")
    n = int(done.group(1))
    server_s = cpu.seconds()
    if server_s is None:
        raise RuntimeError(f"{argv[0]} ended during the run")
    client_s = (client1.children_user + client1.children_system) - (
        client0.children_user + client0.children_system)
    return {"rps": float(rps.group(1)), "server_us": server_s / n * 1e6,
            "wrk_us": client_s / n * 1e6, "switches_per_1k": (switches1 - switches0) / n * 1e3,
            "threads": threads}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("servers", nargs="+", help="NAME=[VAR=value ...] PROGRAM [ARGS ...]")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3, help="measured wrk run per server and round")
    ap.add_argument("--connections", type=int, default=256)
    ap.add_argument("--path", default="/plaintext")
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds < 1 or args.connections < 1:
        raise SystemExit("server_cpu: --rounds, --seconds and --connections must be positive")
    servers = [parse_server(s) for s in args.servers]
    results: dict[str, list[dict]] = {name: [] for name, _, _ in servers}
    t0 = time.monotonic()
    for r in range(args.rounds):
        for name, argv, env in servers:
            m = measure(argv, env, args.seconds, args.connections, args.path)
            results[name].append(m)
            print(f"round {r + 1}/{args.rounds} {name:>16}: {m['rps']:>9,.0f} requests/s, "
                  f"server {m['server_us']:6.2f} us/request, wrk {m['wrk_us']:6.2f} us/request, "
                  f"{m['switches_per_1k']:6.1f} context switches per 1,000, "
                  f"{m['threads']} threads", flush=True)
    print(f"\nmedians of {args.rounds} rounds ({time.monotonic() - t0:.0f} s):")
    for name, ms in results.items():
        med = {k: statistics.median(m[k] for m in ms) for k in ms[0]}
        lo, hi = min(m["rps"] for m in ms), max(m["rps"] for m in ms)
        print(f"{name:>16}: {med['rps']:>9,.0f} requests/s ({lo:,.0f}-{hi:,.0f}), server "
              f"{med['server_us']:.2f} us/request, wrk {med['wrk_us']:.2f} us/request, "
              f"{med['switches_per_1k']:.1f} context switches per 1,000 requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
