"""The catalog of bench/run.py's workload groups (python3 stdlib only): every group's description,
sizes and expected checksum (GROUPS), tpl's example programs and servers that join the groups
(TPL_EXAMPLES, TPL_SERVERS), the micro-benchmark groups (MICRO_GROUPS), and Entry, one row of a
group (a method of one program) with its samples. run.py runs them; report.py prints them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import peers  # bench/peers/peers.py (run.py puts it on the path)

# --------------------------------------------------------------------------- #
# workload groups: tpl's programs and the peers', side by side
# --------------------------------------------------------------------------- #
def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _sum_below(n: int) -> int:
    return n * (n - 1) // 2


# The files groups (bench/workloads/files.cpp): a file of 4 KiB blocks, block b filled with the
# byte b mod 256, read in its first FILES_READ_BYTES (full, quick); random offsets from one LCG.
FILES_BLOCK = 4096
FILES_READ_BYTES = (1 << 30, 16 << 20)


def _random_blocks(count: int, region: int) -> list[int]:
    x, blocks, out = 42, region // FILES_BLOCK, []
    for _ in range(count):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFF_FFFF_FFFF_FFFF
        out.append((x >> 33) % blocks)
    return out


def _random_read_sum(count: int, region: int) -> int:
    """The files_rand_read checksum: the first byte of every block read, summed."""
    return sum(b & 0xFF for b in _random_blocks(count, region))


# How every server group's client and server share the machine, said in each description.
SHARED_CORES = ("client and server run at once on all of the machine's cores, neither pinned "
                "(no taskset): the kernel shares the cores out between them, alike for every server")

# group -> description, expected checksum (full, quick) or None (the programs check their own),
# timeline: per-item start times are plotted; any_checksum: with expect None, a peer's checksum
# may be 0 (it counts something that should not happen); checksum_label: the footer lists every
# row's checksums under this name; max_reps: at most this many rounds (long fixed-length groups);
# threads (server groups): the server's thread count is sampled while the client runs, listed
# under the table and plotted (threads-<group>.png).
# The order is the report's order. Every group that runs must have a description (--self-test
# fails otherwise), and so must every micro-benchmark group (MICRO_GROUPS).
GROUPS: dict[str, dict] = {
    "chain": dict(desc="1,000,000-link chain: each link awaits the previous one and adds 1 "
                       "(seed 001; quick: 100,000)", expect=(1_000_000, 100_000)),
    "chain_channels": dict(desc="1,000,000 links over channels: seed 001's Go program, one "
                                "goroutine/task and one channel per link (quick: 100,000)",
                           expect=(1_000_000, 100_000)),
    "skynet": dict(desc="skynet: 1,000,000 leaves, fan-out 10, sum of the leaf numbers "
                        "(quick: 100,000)", expect=(499_999_500_000, 4_999_950_000)),
    "fib30": dict(desc="fib(30) as binary fork-join: each call forks one child and runs the other, "
                       "no sequential cutoff (quick: fib(25))", expect=(832_040, 75_025)),
    "fib35": dict(desc="fib(35) as binary fork-join, no sequential cutoff (quick: fib(30); "
                       "3 rounds: Go and tokio take tens of seconds a run)",
                  expect=(9_227_465, 832_040), max_reps=3),
    "recursive_count": dict(desc="recursive async count to 1,000,000, each level deferred to "
                                 "the scheduler (seed 001; quick: 100,000)",
                            expect=(1_000_000, 100_000)),
    "yield_storm": dict(desc="1,000 tasks each yielding 1,000 times (quick: 100 tasks)",
                        expect=(1_000_000, 100_000)),
    "ping_pong": dict(desc="two tasks hand a counter back and forth, 100,000 round trips "
                           "(quick: 10,000)", expect=(100_000, 10_000)),
    "jobs_100": dict(desc="seed 004: 100 jobs of 10-50 ms simulated I/O (delay = 10 + 37 i mod "
                          "41 ms), ids summed by one consumer (quick: 20 jobs)",
                     expect=(_sum_below(100), _sum_below(20))),
    "for_async_1m": dict(desc="parallel loop over 1,000,000 no-op bodies (seed 000's "
                              "ForAsync; quick: 100,000)", expect=(1_000_000, 100_000)),
    "channel_spsc_bounded": dict(desc="10,000,000 items, 1 producer, 1 consumer, capacity 1024 "
                                      "(quick: 1,000,000)",
                                 expect=(_sum_below(10_000_000), _sum_below(1_000_000))),
    "channel_spsc_unbounded": dict(desc="10,000,000 items, 1 producer, 1 consumer, unbounded "
                                        "(quick: 1,000,000)",
                                   expect=(_sum_below(10_000_000), _sum_below(1_000_000))),
    "channel_mpmc_bounded": dict(desc="10,000,000 items, 2 producers x 2 consumers, capacity "
                                      "1024 (quick: 1,000,000)",
                                 expect=(_sum_below(10_000_000), _sum_below(1_000_000))),
    "channel_mpmc_unbounded": dict(desc="10,000,000 items, 2 producers x 2 consumers, unbounded "
                                        "(quick: 1,000,000)",
                                   expect=(_sum_below(10_000_000), _sum_below(1_000_000))),
    "async_generator": dict(desc="an async generator yields 0..999,999 without waiting, the "
                                 "consumer sums them (C#: await foreach over an async iterator; "
                                 "issue 22; no seed figure; quick: 100,000)",
                            expect=(_sum_below(1_000_000), _sum_below(100_000))),
    "for_async_delay_100": dict(desc="parallel loop over 100 bodies that each await delay(1 ms) "
                                     "(seed 000's Parallel.ForAsync: 89 ms on .NET 8); the "
                                     "default degree (cores) and 100; quick: the same",
                                expect=(100, 100)),
    "rw_lock_stress": dict(desc="seed 000: rounds of 100 pool items that each enter and leave a "
                                "read lock, for 2 s (quick: 0.3 s; 3 rounds); checksum = "
                                "acquisitions that took 10 ms or more (.NET 6: ~100 in 10 s, "
                                ".NET 7: none)", expect=None, any_checksum=True,
                           checksum_label="acquisitions >= 10 ms", max_reps=3),
    "multiple_serial": dict(desc="seed 000's MultipleSerial: 8 x rent + clear a 4 KiB buffer, "
                                 "yield, 8 x read every byte and return; 100,000 iterations "
                                 "(quick: 10,000; 3 rounds; .NET 7: 9.3 us per iteration, "
                                 ".NET 6: 14.3 us)", expect=(100_000, 10_000), max_reps=3),
    "sync_over_async": dict(desc="seed 000: 4 x cores pool items block on one unfinished task, "
                                 "one more item completes it (fresh process, no warm-up); "
                                 "Mean = time until all have run", expect=None, timeline=True),
    "barrier": dict(desc="seed 000: 2 x cores + 1 pool items and the main thread meet at a "
                         "barrier (fresh process, no warm-up)", expect=None, timeline=True),
    "echo_1": dict(desc="TCP echo on loopback, 1 connection: 20,000 round trips of a 64-byte "
                        "message, one after another, after 200 unmeasured (quick: 2,000 after 20); "
                        "client: bench/loadgen (Go), the same for every server; " + SHARED_CORES,
                   server="echo",
                   load=dict(conns=1, requests=(20_000, 2_000), warmup=(200, 20)),
                   expect=(20_000, 2_000)),
    "echo_64": dict(desc="TCP echo on loopback, 64 connections at once, each 500 round trips of "
                         "a 64-byte message after 20 unmeasured (quick: 50 after 5); client: "
                         "bench/loadgen, as echo_1; " + SHARED_CORES, server="echo",
                    load=dict(conns=64, requests=(32_000, 3_200), warmup=(20, 5)),
                    expect=(32_000, 3_200)),
    "echo_1000": dict(desc="TCP echo on loopback, 1,000 connections at once, each 200 round trips "
                           "of a 64-byte message after 2 unmeasured (quick: 3 after 1; 3 rounds); "
                           "client: bench/loadgen, as echo_1 (run.py raises the descriptor "
                           "limit to the hard limit); " + SHARED_CORES,
                      server="echo", load=dict(conns=1000, requests=(200_000, 3_000), warmup=(2, 1)),
                      expect=(200_000, 3_000), max_reps=3),
    "files_seq_read": dict(desc="a whole 1 GiB file in the page cache, in 64 KiB sequential "
                                "reads one after another (quick: its first 16 MiB; 3 rounds)",
                           expect=FILES_READ_BYTES, files=True, max_reps=3),
    "files_rand_read": dict(desc="100,000 reads of 4 KiB at random block offsets of that file, one "
                                 "after another (quick: 5,000 in its first 16 MiB; 3 rounds); "
                                 "checksum: the first bytes of the blocks read, summed",
                            expect=(_random_read_sum(100_000, FILES_READ_BYTES[0]),
                                    _random_read_sum(5_000, FILES_READ_BYTES[1])),
                            files=True, max_reps=3),
    "files_rand_read_16": dict(desc="the same 100,000 random 4 KiB reads split over 16 concurrent "
                                    "tasks, goroutines or threads (quick: 5,000; 3 rounds)",
                               expect=(_random_read_sum(100_000, FILES_READ_BYTES[0]),
                                       _random_read_sum(5_000, FILES_READ_BYTES[1])),
                               files=True, max_reps=3),
    "files_seq_write": dict(desc="64 MiB written to a new file in 64 KiB sequential writes, no "
                                 "fsync (quick: 16 MiB; 3 rounds)",
                            expect=(64 << 20, 16 << 20), files=True, max_reps=3),
    "files_rand_write": dict(desc="25,000 writes of 4 KiB at random block offsets of the read "
                                  "file, each block rewritten with the bytes it holds, no fsync "
                                  "(quick: 1,000 in its first 16 MiB; 3 rounds)",
                             expect=(25_000 * FILES_BLOCK, 1_000 * FILES_BLOCK), files=True,
                             max_reps=3),
    "sync_over_async_server": dict(desc="seed 002's sync-over-async server: a 64-byte echo "
                                        "whose handler, for a message starting with 'B', first "
                                        "waits synchronously for a task that completes 100 ms "
                                        "later; 8 connections send only those, 56 others echo "
                                        "for 2 s (quick: 0.3 s; 3 rounds), measured (bench/loadgen; a "
                                        "round trip still unanswered 1 s after the end counts "
                                        "with its wait so far). A server that keeps answering "
                                        "has a p99 far below 100 ms; " + SHARED_CORES,
                                   server="sync_over_async_server",
                                   load=dict(conns=56, blocking=8, duration=(2, 0.3),
                                             warmup=(5, 5)),
                                   expect=None, any_checksum=True, max_reps=3, threads=True,
                                   extra_label=("blocking_requests",
                                                             "blocking requests answered")),
    "plaintext": dict(desc="TechEmpower's plaintext: HTTP/1.1 GET /plaintext answered "
                           "'Hello, World!', keep-alive, not pipelined; wrk with 256 connections "
                           "and cores/2 threads for 3 s after a 1 s warm-up (quick: 1 s, no "
                           "warm-up; 3 rounds); " + SHARED_CORES,
                      server="plaintext", wrk=dict(conns=256, seconds=(3, 1), warmup_s=(1, 0)),
                      expect=None, max_reps=3),
    "plaintext_pipelined": dict(desc="TechEmpower's plaintext pipelined: the same GET /plaintext, "
                                     "16 requests per write (bench/wrk/pipeline.lua), each "
                                     "answered in order; wrk with 256 connections and cores/2 "
                                     "threads for 2 s after a 1 s warm-up (quick: 1 s, no "
                                     "warm-up; 3 rounds); " + SHARED_CORES + ". No p50/p99: "
                                     "wrk corrects its latencies for "
                                     "coordinated omission as if every round trip carried one "
                                     "request, which gives nonsense (0, or a p50 above the mean) "
                                     "with 16",
                                server="plaintext",
                                wrk=dict(conns=256, seconds=(2, 1), warmup_s=(1, 0), pipeline=16),
                                expect=None, max_reps=3),
}

# tpl's thread-injection programs (examples/), one row per pool policy / barrier kind:
# (group, executable, row label, arguments).
TPL_EXAMPLES = [
    ("sync_over_async", "example_sync_over_async", "adaptive pool", ["--policy", "adaptive"]),
    ("sync_over_async", "example_sync_over_async", "eager pool", ["--policy", "eager"]),
    ("barrier", "example_barrier", "adaptive pool, tpl::barrier", ["--policy", "adaptive", "--barrier", "cooperating"]),
    ("barrier", "example_barrier", "adaptive pool, bare std::barrier", ["--policy", "adaptive", "--barrier", "std"]),
    ("barrier", "example_barrier", "eager pool, tpl::barrier", ["--policy", "eager", "--barrier", "cooperating"]),
    ("barrier", "example_barrier", "eager pool, bare std::barrier", ["--policy", "eager", "--barrier", "std"]),
]

# tpl's servers of the server groups (GROUPS' "server" kind; examples/, run with the port 0):
# (kind, executable, row label, arguments, environment).
TPL_SERVERS = [
    ("echo", "example_echo_server", "example_echo_server, completions on the pool (default)", ["0"],
     {"TPL_SOCKETS_INLINE_COMPLETIONS": "0"}),
    ("echo", "example_echo_server", "example_echo_server, inline completions", ["0"],
     {"TPL_SOCKETS_INLINE_COMPLETIONS": "1"}),
    ("echo", "example_echo_server", "example_echo_server, io_uring readiness, completions on the pool",
     ["0"], {"TPL_SOCKETS_INLINE_COMPLETIONS": "0", "TPL_IO_ENGINE": "io_uring"}),
    ("sync_over_async_server", "example_sync_over_async_server",
     "tpl::delay(100 ms).wait() in the handler, completions on the pool (default)", ["0"],
     {"TPL_SOCKETS_INLINE_COMPLETIONS": "0"}),
    ("sync_over_async_server", "example_sync_over_async_server",
     "tpl::delay(100 ms).wait() in the handler, inline completions", ["0"],
     {"TPL_SOCKETS_INLINE_COMPLETIONS": "1"}),
    ("plaintext", "example_http_hello", "example_http_hello, completions on the pool (default)",
     ["0"], {"TPL_SOCKETS_INLINE_COMPLETIONS": "0"}),
    ("plaintext", "example_http_hello", "example_http_hello, inline completions", ["0"],
     {"TPL_SOCKETS_INLINE_COMPLETIONS": "1"}),
    ("plaintext", "example_http_hello", "example_http_hello, io_uring readiness, completions on the pool",
     ["0"], {"TPL_SOCKETS_INLINE_COMPLETIONS": "0", "TPL_IO_ENGINE": "io_uring"}),
]

# tpl_micro_bench's groups (bench/micro/*.cpp, "Group/Method" names) -> description.
MICRO_GROUPS: dict[str, str] = {
    "value_task_source": "ping-pong between two tasks through two reusable value-task sources "
                         "(.NET ManualResetValueTaskSourceCore; 0 B per operation is the point)",
    "async_generator": "one item of an async_generator whose body yields without waiting, and a "
                       "whole generator of 1,000,000 ints",
    "async_local": "async_local updates (seed 000: 4 locals x 1,000 updates, 62 ns and 144 B per "
                   "update on .NET 7) and a task call with a value set",
    "cancellation": "cancellation_token registrations and sources (seed 000: register + dispose "
                    "35 ns; create + register + dispose 57 ns, 192 B)",
    "channel": "channel operations on one thread (item there, waiting reader or writer) and 1M "
               "items between two threads",
    "async_mutex": "async_mutex lock / unlock: uncontended, in a coroutine, queued hand-over",
    "async_manual_reset_event": "async_manual_reset_event: wait on a set event, pending wait + set",
    "async_auto_reset_event": "async_auto_reset_event: set, then a wait that takes the signal",
    "async_countdown_event": "async_countdown_event: signal to zero, reset",
    "spin_lock": "spin_lock lock + unlock: uncontended, with owner tracking, 2 threads",
    "reader_writer_lock": "reader_writer_lock enter + exit, uncontended (read, write)",
    "spin_wait": "the first spin_once of a spin_wait (one calibrated spin unit)",
    "task_sync": "synchronously completing coroutine calls + co_await (seed 000: async Task<T> of "
                 "a default value 8-13 ns, 0 B)",
    "cached_tasks": "completed tasks from the cache or the pool",
    "yield": "co_await tpl::yield() on the default pool (seed 000: Task.Yield 866-919 ns, "
             "96-112 B)",
    "await": "await a pending task, then complete it (seed 003: awaiting adds ~4 us, ~300 B)",
    "when_all": "when_all of 2 pending tasks, then complete both (seed 000: 161 ns, 264 B)",
    "when_any": "when_any (seed 002: completed + pending 8.4 ns, pending + pending 150 ns; "
                "seed 000: 3 pending 260 ns, 504 B)",
    "continue_with": "continue_with(only_on_faulted | execute_synchronously), then set_result "
                     "(seed 002: 106 ns, 112 B)",
    "spawn": "co_await tpl::run(fn) from a pool thread",
    "net": "loopback round trips in one process whose receive waits (UDP receive_from, TCP "
           "receive, a pipe read): the socket's reusable operation and the engine's hand-off; the "
           "kernel dominates, so this compares tpl's versions, not peers (0 B per round trip is the "
           "point)",
    "fork_join": "tpl::parallel::invoke of two trivial functions: taken back on a 1-worker pool, "
                 "and on the default pool whose idle workers may steal the second",
    "semaphore": "async_semaphore wait_async / release (seed 000: 100 WaitAsync + Release(100) "
                 "69 us, 36 KB)",
    "wait_async": "wait_async with a timeout on a completed task / a task that completes first",
    "delay": "a 30 s delay completed by fake_time_provider::advance",
    "timers": "system timers with 100,000 live ones: create + dispose, change",
}


def micro_description(group: str) -> str:
    return MICRO_GROUPS.get(group, "")


@dataclass
class Entry:
    """One row of a group: a method of one program."""
    group: str
    method: str
    program: "peers.Program"
    kind: str = "protocol"        # "protocol" (--run) or "example" (prints a timeline)
    samples: list = field(default_factory=list)      # ms
    alloc: list = field(default_factory=list)
    rss_kb: list = field(default_factory=list)
    checksums: list = field(default_factory=list)
    starts: list = field(default_factory=list)       # per sample: list of ms
    error: str | None = None
    note: str | None = None
    wall_s: list = field(default_factory=list)      # whole invocation (start-up, warm-up)
    argv: list | None = None      # kind "server": the server's command line
    rps: list = field(default_factory=list)         # server groups: requests/s per sample
    p50_us: list = field(default_factory=list)
    p99_us: list = field(default_factory=list)
    cpu_us: list = field(default_factory=list)      # server groups: server CPU us per request (or None)
    extra: list = field(default_factory=list)       # server groups: the client's other figures
    threads: list = field(default_factory=list)     # per sample: [[ms, threads], ...] or None

    @property
    def label(self) -> str:
        return f"{self.program.runtime} / {self.method}"
