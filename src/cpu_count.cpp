// available_cpus() (tpl/detail/cpu_count.hpp): the affinity mask's CPU count, or the machine's.
//
// Invariant: the answer is at least 1 and at most what the mask allows (or, without a readable
// mask, hardware_concurrency()).
#include "tpl/detail/cpu_count.hpp"

#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tpl::detail {

unsigned available_cpus() noexcept {
#if defined(__linux__)
  // A mask for up to 1,024 CPUs first; a larger machine makes sched_getaffinity fail with EINVAL,
  // and a mask sized for 32,768 CPUs is tried once more.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  } else {
    constexpr int kMany = 32768;
    const std::size_t bytes = CPU_ALLOC_SIZE(kMany);
    cpu_set_t* big = CPU_ALLOC(kMany);
    if (big != nullptr) {
      CPU_ZERO_S(bytes, big);
      const int n = sched_getaffinity(0, bytes, big) == 0 ? CPU_COUNT_S(bytes, big) : 0;
      CPU_FREE(big);
      if (n > 0) return static_cast<unsigned>(n);
    }
  }
#endif
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : hw;
}

}  // namespace tpl::detail
