// tpl/when_each.hpp — tpl::when_each: the given tasks, one by one, in the order they complete
// (.NET 9 Task.WhenEach), as an async_generator.
//
// Provides:
//   tpl::when_each(task<T>...)        all of one T
//   tpl::when_each(range of task<T>)
// Both return async_generator<task<T>>: each item is one of the tasks, completed (successfully,
// faulted or canceled: when_each itself never throws a task's fault; await the item to get its
// result or exception).
//
// Example:
//   auto finished = tpl::when_each(download(a), download(b), download(c));
//   while (tpl::task<page>* t = co_await finished.next())
//     show(co_await *t);                  // each page as soon as it is there
//
// Semantics (as .NET's):
// - Registration happens in the call, not at the first next(): tasks already completed then come
//   first, in argument order; the others in the order they complete.
// - A next() that has to wait resumes its consumer asynchronously (queued to the completing
//   thread's scheduler, else the pool), never inside the code that completed the task.
// - with_cancellation(token): a next() waiting for the next completion throws operation_canceled
//   once token is canceled; the tasks themselves are not canceled.
// - Destroying the generator before the end takes its registrations back from the tasks that
//   are still running, so calling when_each in a loop against a long-lived task piles nothing up
//   on it.
// - An empty handle among the tasks: invalid_operation, in the call. No tasks: an empty sequence.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/async_generator.hpp"
#include "tpl/channel.hpp"
#include "tpl/task.hpp"

namespace tpl {

namespace detail {

/// The tasks, one registration node on each, and a channel of the indices of completed tasks in
/// completion order (bounded by the count: a completion's write never waits and never fails).
/// Shared by the generator (its holder) and every registered node; the last one frees it.
template <class T>
class when_each_state {
 public:
  explicit when_each_state(std::vector<task<T>> tasks)
      : tasks_(std::move(tasks)),
        nodes_(std::make_unique<node[]>(tasks_.size())),
        completions_(make_bounded_channel<std::size_t>(static_cast<std::ptrdiff_t>(tasks_.size()))),
        writer_(completions_.writer()) {}

  std::size_t count() const noexcept { return tasks_.size(); }
  const task<T>& task_at(std::size_t i) const noexcept { return tasks_[i]; }
  channel_reader<std::size_t> completions() const { return completions_.reader(); }

  /// In the call of when_each: one node per task; a task completed already is written at once.
  void register_all() noexcept {
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      node& n = nodes_[i];
      n.owner = this;
      n.index = i;
      n.set_callback(detail::waiter_callback_for<&node_fired>);
      // relaxed: a reference taken while the caller holds one (the holder's).
      refs_.fetch_add(1, std::memory_order_relaxed);
      n.registered = true;
      if (!task_access::state(tasks_[i])->add_waiter(&n)) {
        n.registered = false;
        // relaxed: the holder's reference keeps the state alive.
        refs_.fetch_sub(1, std::memory_order_relaxed);
        record(i);
      }
    }
  }

  /// When the generator goes: takes back the nodes still waiting, then drops the holder's
  /// reference. A node that completion took already drops its own reference when it has fired.
  void unregister_and_release() noexcept {
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      node& n = nodes_[i];
      if (n.registered && task_access::state(tasks_[i])->remove_waiter(&n)) release();
    }
    release();
  }

 private:
  struct node : waiter {
    when_each_state* owner = nullptr;
    std::size_t index = 0;
    bool registered = false;  // written in register_all(), read by the holder afterwards
  };

  static void node_fired(waiter* w, fire_mode) noexcept {
    auto* n = static_cast<node*>(w);
    when_each_state* owner = n->owner;
    owner->record(n->index);
    owner->release();
  }

  void record(std::size_t i) noexcept {
    // Room for every index (capacity = count, each written once): try_write cannot fail for want
    // of room. The channel is not completed before the state dies, so it cannot fail otherwise.
    writer_.try_write(std::size_t(i));
  }

  void release() noexcept {
    // acq_rel: whoever frees the state must see every other holder's writes (the channel's own
    // operations are synchronised by the channel).
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  std::vector<task<T>> tasks_;
  std::unique_ptr<node[]> nodes_;
  channel<std::size_t> completions_;
  channel_writer<std::size_t> writer_;
  std::atomic<std::uint32_t> refs_{1};  // the holder, plus one per registered node
};

/// The generator's reference to the state (a parameter of the coroutine: it lives in the frame,
/// so an early destruction of the generator unregisters too).
template <class T>
class when_each_holder {
 public:
  explicit when_each_holder(when_each_state<T>* s) noexcept : s_(s) {}
  when_each_holder(when_each_holder&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  when_each_holder(const when_each_holder&) = delete;
  when_each_holder& operator=(const when_each_holder&) = delete;
  when_each_holder& operator=(when_each_holder&&) = delete;
  ~when_each_holder() {
    if (s_ != nullptr) s_->unregister_and_release();
  }
  when_each_state<T>* operator->() const noexcept { return s_; }

 private:
  when_each_state<T>* s_;
};

template <class T>
async_generator<task<T>> when_each_iterate(when_each_holder<T> state) {
  const cancellation_token token = co_await this_generator::get_cancellation_token();
  const channel_reader<std::size_t> completions = state->completions();
  for (std::size_t k = 0; k < state->count(); ++k) {
    const std::size_t i = co_await completions.read_async(token);
    co_yield task<T>(state->task_at(i));
  }
}

template <class T>
async_generator<task<T>> start_when_each(std::vector<task<T>> tasks) {
  for (const task<T>& t : tasks)
    if (!t.valid()) throw_empty_task("when_each");
  auto* s = new when_each_state<T>(std::move(tasks));
  when_each_holder<T> holder(s);
  s->register_all();
  return when_each_iterate<T>(std::move(holder));
}

}  // namespace detail

/// The tasks in completion order (already completed ones first, in argument order). All must be
/// task<T> of the same T.
template <class T, class... Rest>
  requires(std::is_same_v<Rest, task<T>> && ...)
async_generator<task<T>> when_each(task<T> first, Rest... rest) {
  std::vector<task<T>> tasks;
  tasks.reserve(1 + sizeof...(Rest));
  tasks.push_back(std::move(first));
  (tasks.push_back(std::move(rest)), ...);
  return detail::start_when_each<T>(std::move(tasks));
}

/// The tasks of the range in completion order. An empty range gives an empty sequence.
template <std::ranges::input_range Range>
  requires detail::is_task<std::ranges::range_value_t<Range>>::value
auto when_each(Range&& range) {
  using T = typename std::ranges::range_value_t<Range>::value_type;
  std::vector<task<T>> tasks;
  for (auto&& t : range) {
    if constexpr (std::is_lvalue_reference_v<Range>)
      tasks.push_back(t);
    else
      tasks.push_back(std::move(t));
  }
  return detail::start_when_each<T>(std::move(tasks));
}

}  // namespace tpl
