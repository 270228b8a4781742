// tests/value_task_source_support.hpp — a minimal pooled source for the value_task_source tests:
// each start() begins an operation of one reusable manual_reset_value_task_source_core, and
// get_result resets the core as a pooled .NET source does in GetResult.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

#include <tpl/value_task.hpp>
#include <tpl/value_task_source.hpp>

namespace tpl_test {

template <class T>
class reusable_source final : public tpl::value_task_source<T> {
 public:
  explicit reusable_source(bool run_continuations_asynchronously = false) {
    core_.set_run_continuations_asynchronously(run_continuations_asynchronously);
  }

  /// A value_task for the current operation.
  tpl::value_task<T> start() { return tpl::value_task<T>(*this, core_.version()); }

  template <class... A>
  void complete(A&&... a) {
    core_.set_result(std::forward<A>(a)...);
  }
  void fail(std::exception_ptr e) { core_.set_exception(std::move(e)); }

  tpl::task_status get_status(std::uint32_t token) const override { return core_.get_status(token); }
  bool on_completed(std::coroutine_handle<> h, std::uint32_t token) override { return core_.on_completed(h, token); }
  T get_result(std::uint32_t token) override {
    // A stale token throws here and leaves the current operation alone; past this line the
    // operation is ours to end, however it ended.
    (void)core_.get_status(token);
    try {
      if constexpr (std::is_void_v<T>) {
        core_.get_result(token);
        core_.reset();
      } else {
        T v = core_.get_result(token);
        core_.reset();
        return v;
      }
    } catch (...) {
      core_.reset();
      throw;
    }
  }

  tpl::manual_reset_value_task_source_core<T>& core() noexcept { return core_; }

 private:
  tpl::manual_reset_value_task_source_core<T> core_;
};

}  // namespace tpl_test
