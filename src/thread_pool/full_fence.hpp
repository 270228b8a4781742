// full_fence(): a sequentially consistent fence (std::atomic_thread_fence(seq_cst)) for the
// pool's hottest store-load orderings: the work-stealing deque's pop and steal, and the wake check
// after a push onto an empty deque.
//
// On x86-64 (outside ThreadSanitizer) it is one locked no-op on a word 64 bytes below the stack
// pointer, `lock orl $0, -64(%rsp)`, which is what clang and rustc emit for a seq_cst fence. Why it
// suffices: a locked instruction is a full barrier on x86 (Intel SDM vol. 3, 9.2.2: loads and
// stores are not reordered with locked instructions; earlier stores drain before it), and the
// compiler treats the asm as a barrier for every memory access ("memory" clobber). The word lies
// in the red zone, the 128 bytes below the stack pointer that the System V ABI keeps from signal
// handlers and that only this thread's code uses; or-ing 0 leaves whatever it holds unchanged. g++
// instead emits `lock orq $0, (%rsp)`, on the top of the stack, which the function's own loads and
// stores of that line (spills, the return address) then wait behind; below the stack pointer the
// barrier costs only the drain (fib(30) through parallel::invoke on one worker: about 8% less time,
// docs/benchmarks.md).
//
// Elsewhere (ARMv8: dmb ish), and under ThreadSanitizer (which must see the fence), it is
// std::atomic_thread_fence(std::memory_order_seq_cst).
#pragma once

#include <atomic>

#include "tpl/detail/config.hpp"

namespace tpl::detail {

inline void full_fence() noexcept {
#if defined(__x86_64__) && !defined(TPL_TSAN)
  asm volatile("lock orl $0, -64(%%rsp)" ::: "memory", "cc");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace tpl::detail
