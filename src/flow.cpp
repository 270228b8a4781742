// Execution contexts: destruction, the thread's current context, and its exit hook.
#include "tpl/detail/flow.hpp"

namespace tpl::detail {

void destroy_context(context_data* d) noexcept {
  const std::uint32_t n = d->count;
  const std::uint32_t d_capacity = d->capacity;
  for (std::uint32_t i = 0; i < n; ++i) {
    boxed_value* b = d->entries()[i].boxed;
    // acq_rel: as release(): the last owner sees all uses before deleting.
    if (b != nullptr && b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b;
  }
  d->~context_data();
  frame_free(d, context_data::bytes_for(d_capacity));
}

namespace {
// Constructed on a thread the first time it holds a context; at thread exit it drops that
// context so that no reference leaks.
struct flow_exit_hook {
  ~flow_exit_hook() { reset_context(); }
};
thread_local flow_exit_hook t_exit_hook;
}  // namespace

void set_current_context(context_data* d) noexcept {
  (void)&t_exit_hook;  // odr-use: constructs the hook on this thread
  flow_state& f = flow_tls();
  context_data* old = f.current;
  f.current = d;
  release(old);
}

}  // namespace tpl::detail
