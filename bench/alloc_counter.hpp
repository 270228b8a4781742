// Process-wide allocation counter for tpl's benchmarks: counts every global operator new.
// Include alloc_counter_impl.hpp in exactly one translation unit of a binary to install it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tpl_bench {

struct alloc_counters {
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> count{0};
};

inline alloc_counters& allocs() {
  static alloc_counters c;
  return c;
}

// relaxed: statistics, read after the measured code has been joined.
inline std::uint64_t allocated_bytes() { return allocs().bytes.load(std::memory_order_relaxed); }
inline std::uint64_t allocation_count() { return allocs().count.load(std::memory_order_relaxed); }

}  // namespace tpl_bench
