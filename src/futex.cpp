#include "tpl/detail/futex.hpp"

#include <climits>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tpl::detail {

#if defined(__linux__)
namespace {
long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t val, const timespec* ts) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op | FUTEX_PRIVATE_FLAG,
                   val, ts, nullptr, 0);
}
}  // namespace

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
  futex(word, FUTEX_WAIT, expected, nullptr);
}

bool futex_wait_until(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                      std::chrono::steady_clock::time_point deadline) noexcept {
  auto now = std::chrono::steady_clock::now();
  if (now >= deadline) return false;
  auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count();
  timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
  futex(word, FUTEX_WAIT, expected, &ts);
  return std::chrono::steady_clock::now() < deadline;
}

void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept { futex(word, FUTEX_WAKE, 1, nullptr); }
void futex_wake_all(std::atomic<std::uint32_t>* word) noexcept {
  futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}
#else
// Portable fallback. std::atomic::notify may touch the waiter table for the address only, so it is
// also safe on memory that was reused.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
  word->wait(expected, std::memory_order_acquire);
}
bool futex_wait_until(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                      std::chrono::steady_clock::time_point deadline) noexcept {
  while (word->load(std::memory_order_acquire) == expected) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}
void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept { word->notify_one(); }
void futex_wake_all(std::atomic<std::uint32_t>* word) noexcept { word->notify_all(); }
#endif

}  // namespace tpl::detail
