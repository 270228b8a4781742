// The non-template parts of tpl/channel.hpp: argument checks and the exceptions channel
// operations report.
#include <stdexcept>
#include <string>

#include "tpl/channel.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl::detail {

void throw_channel_closed(const std::exception_ptr& completion_error) {
  // As .NET: a channel completed with a cancellation reports that cancellation itself.
  if (completion_error && is_operation_canceled(completion_error)) std::rethrow_exception(completion_error);
  throw channel_closed(completion_error);
}

void channel_wake_list::wake_all_slow(bool synchronous) noexcept {
  channel_node* n = head_;
  head_ = tail_ = nullptr;
  while (n != nullptr) {
    channel_node* next = n->next;  // read before resuming: the resumed frame may free n
    // Waits for the node's cancellation callback if it is running elsewhere: after this it can
    // no longer touch the core (which the resumed coroutine may destroy).
    n->reset_registration();
    if (synchronous)
      resume_inline(n->continuation);
    else
      dispatch_wakeup(n->continuation);
    n = next;
  }
}

void throw_channel_misuse(const char* what) { throw invalid_operation(what); }

std::exception_ptr make_channel_canceled() { return std::make_exception_ptr(operation_canceled()); }

std::exception_ptr make_channel_misuse(const char* what) { return std::make_exception_ptr(invalid_operation(what)); }

std::exception_ptr make_channel_destroyed() {
  return std::make_exception_ptr(
      channel_closed("tpl: channel destroyed (its last handle went away) while this operation was waiting"));
}

std::exception_ptr make_channel_complete_twice() {
  return std::make_exception_ptr(channel_closed("tpl: channel_writer::complete: the channel is already completed"));
}

void check_channel_capacity(std::ptrdiff_t capacity, bounded_channel_full_mode mode) {
  if (capacity < 0)
    throw std::invalid_argument("tpl: make_bounded_channel: capacity must not be negative (got " +
                                std::to_string(capacity) + ")");
  switch (mode) {
    case bounded_channel_full_mode::wait:
      return;
    case bounded_channel_full_mode::drop_newest:
    case bounded_channel_full_mode::drop_oldest:
    case bounded_channel_full_mode::drop_write:
      if (capacity == 0)
        throw std::invalid_argument(
            "tpl: make_bounded_channel: a drop full mode needs a capacity of at least 1 (capacity 0 "
            "is a rendezvous channel, which only waits)");
      return;
  }
  throw std::invalid_argument("tpl: make_bounded_channel: unknown bounded_channel_full_mode");
}

namespace {
thread_local unsigned t_unbounded_writes = 0;
}  // namespace

bool unbounded_write_yields() noexcept {
  if (++t_unbounded_writes % kChannelWriteBudget != 0) return false;
  // Only a thread pool's worker: elsewhere (a dedicated thread, the deterministic scheduler, a
  // thread in sync_wait) the writer would move, or a replayed schedule would change.
  return dynamic_cast<thread_pool*>(current_scheduler_tls()) != nullptr;
}

}  // namespace tpl::detail
