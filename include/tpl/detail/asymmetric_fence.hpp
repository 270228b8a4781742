// tpl/detail/asymmetric_fence.hpp — a store-load fence split into a cheap half for the hot path
// and an expensive half for the rare one (internal).
//
// A Dekker handshake ("I publish X, then look at Y" on one thread against "I publish Y, then look
// at X" on another) needs a store-load barrier on both sides. When one side runs millions of
// times a second (a lock's unlock, a channel's publication) and the other only when something must
// sleep, the fast side may use asymmetric_fence_light(), which only keeps the compiler from moving
// its look before its store, and the slow side calls asymmetric_fence_heavy(), which makes every
// running thread of the process execute a full barrier (Linux membarrier(2), private expedited;
// where that is refused, an mprotect of a private page, whose TLB shoot-down interrupts every core
// that runs the process). .NET's FlushProcessWriteBuffers and folly's asymmetricThreadFenceHeavy
// are the same mechanism.
//
// Why it suffices, on x86 as on ARMv8: the heavy fence puts a full barrier into every other
// thread's instruction stream at some point P (a running thread is interrupted; one that is not
// running passed through the scheduler's barrier when it was switched out). The fast side's store
// S and look L are in program order S, L (the light fence keeps the compiler from swapping them).
// If P lies after S, S is visible to every load the slow side issues after the heavy fence
// returns. If P lies before S, it lies before L as well, so L sees everything the slow side stored
// before calling the heavy fence (the slow side's seq_cst fence on entry orders its own store
// before the barrier request).
//
// Example (a channel's lock-free write against a reader that queued while the write's slot was
// claimed but not yet published, see channel_core.hpp):
//   writer:  slot.seq.store(published, release); asymmetric_fence_light();
//            if (gate.load(relaxed) >= kWaitUnit) serve_waiters();
//   reader:  gate.fetch_add(kWaitUnit); /* queue */ asymmetric_fence_heavy(); serve_waiters();
// One of the two serve_waiters() calls sees both the item and the queued reader.
#pragma once

#include <atomic>

namespace tpl::detail {

/// The fast side's half: orders the caller's earlier stores before its later loads against a
/// concurrent asymmetric_fence_heavy() (on Linux a compiler barrier, no instruction; elsewhere,
/// without a process-wide barrier to pair with, a full fence).
inline void asymmetric_fence_light() noexcept {
#if defined(__linux__)
  std::atomic_signal_fence(std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/// The slow side's half: a full memory barrier on every thread of the process (microseconds; it
/// interrupts the cores that run the process). Never fails: the fallback works on every Linux.
void asymmetric_fence_heavy() noexcept;

}  // namespace tpl::detail
