// asymmetric_fence_heavy(): membarrier(2) private expedited where the kernel grants it, else an
// mprotect of a private page (see tpl/detail/asymmetric_fence.hpp for the contract).
//
// Invariants: the registration is attempted once per process (a function-local static); the
// fallback's page is touched only under its mutex, so two callers never race on its protection.
#include "tpl/detail/asymmetric_fence.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tpl::detail {

#if defined(__linux__)
namespace {

long membarrier(int cmd, unsigned flags) { return ::syscall(__NR_membarrier, cmd, flags, 0); }

/// Whether membarrier's private expedited command is registered for this process.
bool expedited_membarrier() noexcept {
  static const bool registered = [] {
    const long supported = membarrier(MEMBARRIER_CMD_QUERY, 0);
    if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
  }();
  return registered;
}

/// The fallback: revoking write access to a page this process has dirtied makes the kernel shoot
/// down its translation on every core that may cache it, that is every core that runs the process,
/// and the shoot-down's interrupt is a full barrier on each of them.
void mprotect_barrier() noexcept {
  static std::mutex m;
  static void* const page = [] {
    void* p = ::mmap(nullptr, static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }();
  if (page == nullptr) std::abort();  // neither membarrier nor a single page: nothing is left to order with
  std::lock_guard g(m);
  ::mprotect(page, 1, PROT_READ | PROT_WRITE);
  *static_cast<volatile char*>(page) = 0;  // dirty: the translation is cached now
  ::mprotect(page, 1, PROT_READ);
}

}  // namespace

void asymmetric_fence_heavy() noexcept {
  // seq_cst fences around the call: the caller's earlier stores are ordered before the barrier
  // request, and its later loads after the barrier's completion.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!expedited_membarrier() || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != 0) mprotect_barrier();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
#else
void asymmetric_fence_heavy() noexcept { std::atomic_thread_fence(std::memory_order_seq_cst); }
#endif

}  // namespace tpl::detail
