#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/seed-*.

The byte layouts are documented at the top of fuzz_channel.cpp and fuzz_cancellation.cpp.
Re-running it rewrites the same files (the fuzzer's own finds, named by their SHA-1, stay)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# fuzz_channel: kind, capacity, flags, scheduler seed, then ops (op % 16; some take one byte):
#  0 try_write  1 try_read  2 try_peek  3 completion()  4 write_async f  5 read_async f
#  6 next_async f  7 wait_to_read f  8 wait_to_write f  9/10 cancel one (pick)
#  11 try_complete e  12 complete()  13 cancel all  14 drain  15 count()
# f: bit0 own token source, bit1 token already canceled.  e: bit0 with an error.
# op bit 7: a lazy step.  flags: 1 single_reader 2 single_writer 4 synchronous continuations
# 8 destroy the channel at the end (instead of completing it); bits 4-5: the lock-free ring
# 0x10 from the start, 0x20 after 3 writes.
# kind % 5 == 0: unbounded; else full mode (kind / 5) % 4: 0 wait 1 drop_newest 2 drop_oldest 3 drop_write
CHANNEL = {
    "unbounded-basic": [0, 0, 0, 1, 0, 0, 0, 1, 2, 15, 1, 1, 1, 3, 11, 0, 3],
    "bounded1-wait-blocked-writers": [1, 1, 0, 2, 0, 4, 1, 4, 0, 15, 1, 1, 1, 8, 0, 1, 14, 3],
    "rendezvous": [1, 0, 0, 3, 0, 5, 0, 0, 8, 0, 4, 0, 1, 7, 0, 6, 0, 4, 1, 11, 1, 3],
    "drop-newest": [6, 2, 0, 4, 0, 0, 0, 0, 2, 15, 14],
    "drop-oldest": [11, 2, 0, 5, 0, 0, 0, 0, 0, 2, 1, 1, 1],
    "drop-write": [16, 1, 0, 6, 0, 0, 0, 7, 0, 1, 1],
    "cancel-pending": [1, 1, 0, 7, 0, 4, 1, 4, 1, 5, 1, 9, 0, 13, 1, 1, 5, 1, 10, 0],
    "single-reader-misuse": [0, 0, 1, 8, 5, 0, 5, 0, 7, 1, 0, 11, 0],
    "complete-with-error": [1, 2, 4, 9, 0, 5, 0, 7, 0, 11, 1, 1, 1, 5, 0, 6, 0, 7, 0, 8, 0, 4, 0, 0, 12, 3],
    "sync-continuations": [1, 1, 6, 10, 4, 1, 4, 1, 5, 0, 1, 1, 9, 0, 1, 1, 11, 0],
    "precanceled": [1, 0, 0, 11, 4, 2, 5, 2, 7, 2, 8, 2, 6, 2],
    "destroy-with-waiting-writers": [1, 1, 8, 12, 0, 4, 1, 4, 0, 8, 0, 0x84, 0],
    "destroy-with-waiting-readers": [0, 0, 8, 13, 5, 1, 7, 0, 6, 0, 0x85, 0],
    "lazy-steps": [1, 1, 0, 14, 4, 1, 0x84, 0, 0x81, 0x81, 0x89, 0, 0x81, 0x8b, 0],
    # On the ring: capacity 3 is a 2-slot ring and 1 item of overflow; unbounded, capacity 4.
    "ring-bounded3-overflow": [1, 3, 0x10, 15, 0, 0, 0, 4, 0, 4, 0, 15, 2, 1, 1, 1, 4, 0, 1, 1, 1, 14],
    "ring-unbounded": [0, 0, 0x10, 16, 0, 5, 0, 0, 0, 0, 0, 2, 15, 1, 6, 0, 11, 0, 1, 1, 1, 3],
    "ring-after-3-writes": [1, 4, 0x20, 17, 5, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 4, 0, 1, 1, 1, 8, 0, 1, 14, 12],
    "ring-waiting-readers-switch": [0, 0, 0x20, 18, 5, 0, 6, 0, 7, 0, 0, 0, 0, 0, 0, 1, 2, 15, 12, 1, 3],
    "ring-complete-with-items": [1, 4, 0x10, 19, 0, 0, 0, 11, 1, 2, 15, 1, 1, 1, 5, 0, 3],
    "ring-destroy-blocked": [1, 2, 0x18, 20, 0, 0, 4, 0, 4, 0, 8, 0, 5, 0],
}

# fuzz_cancellation: op % 16, then its operand bytes:
#  0 new source  1 linked(a, b; b & 0x80: one parent)  2/10/11 register(source, kind, param)
#  3 reset registration(pick; a when_cancelled one: drop its task)  14 when_cancelled(source)
#  4/12 cancel(source)  5 cancel(source, throw_on_first_exception)
#  6/15 cancel_after(source, ms; 255 infinite)  7/13 advance(ms)  8 try_reset(source)  9 dispose(source)
# kind % 5: 0 plain 1 throws 2 resets registration param % (count + 1) 3 registers on source param
# (param & 0x80: a throwing one) 4 cancels source param.
CANCELLATION = {
    "register-cancel": [0, 2, 0, 0, 2, 0, 0, 2, 0, 1, 0, 4, 0, 4, 0],
    "linked": [0, 0, 1, 0, 1, 2, 0, 1, 0, 2, 2, 1, 0, 2, 3, 1, 0, 4, 0],
    "linked-dispose": [0, 0, 1, 0, 1, 2, 2, 0, 0, 9, 2, 4, 0, 4, 1],
    "throwing-callbacks": [0, 2, 0, 1, 0, 2, 0, 0, 0, 2, 0, 1, 0, 4, 0],
    "throw-first": [0, 2, 0, 1, 0, 2, 0, 1, 0, 2, 0, 0, 0, 5, 0],
    "cancel-after": [0, 0, 6, 0, 50, 6, 1, 20, 2, 0, 1, 0, 7, 30, 6, 0, 10, 7, 100, 7, 100],
    "cancel-after-infinite": [0, 6, 0, 10, 6, 0, 255, 7, 50, 6, 0, 5, 7, 5],
    "reset": [0, 2, 0, 0, 0, 6, 0, 10, 8, 0, 7, 20, 2, 0, 0, 0, 4, 0, 8, 0],
    "unregister-in-callback": [0, 2, 0, 0, 0, 2, 0, 2, 0, 2, 0, 2, 1, 4, 0],
    "register-in-callback": [0, 0, 2, 0, 3, 1, 2, 0, 3, 0x81, 4, 0, 2, 0, 0, 4, 1],
    "cancel-in-callback": [0, 0, 2, 1, 1, 0, 2, 0, 4, 1, 4, 0, 3, 0, 2, 1, 0, 0, 4, 0],
    "when-cancelled": [0, 0, 14, 0, 14, 1, 2, 0, 0, 0, 14, 0, 3, 1, 6, 1, 5, 4, 0, 7, 9, 14, 0, 14, 1],
}


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, "seed-" + name), "wb") as f:
            f.write(bytes(data))


write("fuzz_channel", CHANNEL)
write("fuzz_cancellation", CANCELLATION)
