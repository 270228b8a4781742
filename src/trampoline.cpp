// The deferred list of the per-thread resumption trampoline (see tpl/detail/trampoline.hpp).
#include <vector>

#include "tpl/detail/trampoline.hpp"

namespace tpl::detail {
namespace {

// A FIFO of deferred coroutines; the vector keeps its capacity, so after warm-up deferring
// allocates nothing.
struct deferred_list {
  std::vector<std::coroutine_handle<>> items;
  std::size_t head = 0;
};

deferred_list& deferred() {
  static thread_local deferred_list list;
  return list;
}

}  // namespace

void defer_resume(std::coroutine_handle<> h) {
  deferred().items.push_back(h);
  t_trampoline.has_deferred = true;
}

void drain_deferred_resumes() noexcept {
  deferred_list& list = deferred();
  trampoline_state& t = t_trampoline;
  while (list.head < list.items.size()) {
    std::coroutine_handle<> h = list.items[list.head++];
    ++t.depth;
    h.resume();
    --t.depth;
  }
  list.items.clear();
  list.head = 0;
  t.has_deferred = false;
}

}  // namespace tpl::detail
