// tpl/when_any.hpp — tpl::when_any: a task that completes when the first of the given tasks does
// (.NET Task.WhenAny). Its result is that task (not its value), so the caller can tell which one
// finished and inspect its outcome; when_any itself never faults.
//
//   tpl::task<int> winner = co_await tpl::when_any(primary(), fallback());
//   int v = co_await winner;
//
// Forms: variadic (all task<T> of one T; the two-argument form checks for an already completed
// argument first and then allocates nothing after warm-up), and over a range.
// The losers keep running; when_any takes its registrations back from them once it has a winner,
// so calling it in a loop against a long-lived task does not pile up waiters on that task.
#pragma once

#include <atomic>
#include <cstddef>
#include <ranges>
#include <type_traits>
#include <vector>

#include "tpl/task.hpp"
#include "tpl/when_all.hpp"

namespace tpl {

namespace detail {

template <class T, class Derived>
struct when_any_base : task_state<task<T>>, pooled_allocation {
  struct node : waiter {
    when_any_base* owner;
    std::size_t index;
    bool registered = false;
  };

  // References: the returned handle, the registration phase, and one per registered node.
  when_any_base() noexcept : task_state<task<T>>(2, false, &delete_as<Derived>) {}

  std::atomic<bool> decided{false};
  // The winner and the registration phase both pass this gate; the second one removes the
  // losers' nodes (only then is the set of registered nodes final and the winner known).
  std::atomic<int> cleanup_gate{2};

  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  void start() {
    auto& d = self();
    const std::size_t n = d.count();
    for (std::size_t i = 0; i < n; ++i) {
      node& nd = d.node_at(i);
      nd.owner = this;
      nd.index = i;
      nd.set_callback(waiter_callback_for<&node_fired>);
      this->add_ref();
      nd.registered = true;
      if (!task_access::state(d.task_at(i))->add_waiter(&nd)) {
        nd.registered = false;
        this->release_non_last();
        win(i, true);
        break;
      }
      // relaxed: only the registration thread reads `decided` here, as an early stop; the
      // cleanup gate orders the real hand-off.
      if (decided.load(std::memory_order_relaxed)) break;
    }
    pass_cleanup_gate();
    this->release();  // the registration phase's reference
  }

  static void node_fired(waiter* w, fire_mode mode) noexcept {
    auto* nd = static_cast<node*>(w);
    when_any_base* owner = nd->owner;
    owner->win(nd->index, mode == fire_mode::first_inline);
    owner->release();  // this node's reference
  }

  void win(std::size_t i, bool may_run_inline) noexcept {
    // acq_rel: elects one winner; the loser's later cleanup must see the winner's writes.
    if (decided.exchange(true, std::memory_order_acq_rel)) return;
    this->set_value(self().task_at(i));
    winner = i;
    this->add_ref();  // keep alive through firing even if the handle is dropped inside
    waiter* list = this->publish_completion();
    fire_waiters(list, !may_run_inline);
    pass_cleanup_gate();
    this->release();
  }

  void pass_cleanup_gate() noexcept {
    // acq_rel: whoever passes second sees the other's registrations / winner.
    if (cleanup_gate.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    auto& d = self();
    for (std::size_t j = 0; j < d.count(); ++j) {
      node& nd = d.node_at(j);
      if (j == winner || !nd.registered) continue;
      if (task_access::state(d.task_at(j))->remove_waiter(&nd)) this->release_non_last();
    }
  }

  std::size_t winner = static_cast<std::size_t>(-1);
};

template <class T, std::size_t N>
struct when_any_fixed_state final : when_any_base<T, when_any_fixed_state<T, N>> {
  using base = when_any_base<T, when_any_fixed_state<T, N>>;
  task<T> tasks[N];
  typename base::node nodes[N];
  std::size_t count() const noexcept { return N; }
  typename base::node& node_at(std::size_t i) noexcept { return nodes[i]; }
  task<T>& task_at(std::size_t i) noexcept { return tasks[i]; }
};

template <class T>
struct when_any_range_state final : when_any_base<T, when_any_range_state<T>> {
  using base = when_any_base<T, when_any_range_state<T>>;
  std::vector<task<T>> tasks;
  std::vector<typename base::node> nodes;
  std::size_t count() const noexcept { return tasks.size(); }
  typename base::node& node_at(std::size_t i) noexcept { return nodes[i]; }
  task<T>& task_at(std::size_t i) noexcept { return tasks[i]; }
};

template <class State, class T>
task<task<T>> start_when_any(State* s) {
  task<task<T>> result(adopt_state, s);
  s->start();
  return result;
}

template <class T>
task<task<T>> completed_when_any(const task<T>& winner) {
  auto* s = new ready_state<task<T>>();
  s->set_value(winner);
  s->publish_completion_unshared();
  return task<task<T>>(adopt_state, s);
}

}  // namespace detail

/// The first of a and b to complete (a if both already have).
template <class T>
task<task<T>> when_any(task<T> a, task<T> b) {
  if (!a.valid() || !b.valid()) detail::throw_empty_task("when_any");
  if (a.is_completed()) return detail::completed_when_any(a);
  if (b.is_completed()) return detail::completed_when_any(b);
  auto* s = new detail::when_any_fixed_state<T, 2>();
  s->tasks[0] = std::move(a);
  s->tasks[1] = std::move(b);
  return detail::start_when_any<detail::when_any_fixed_state<T, 2>, T>(s);
}

/// The first of the tasks to complete. All must be task<T> of the same T.
template <class T, class... Rest>
  requires(sizeof...(Rest) != 1 && (std::is_same_v<Rest, task<T>> && ...))
task<task<T>> when_any(task<T> first, Rest... rest) {
  constexpr std::size_t n = 1 + sizeof...(Rest);
  auto* s = new detail::when_any_fixed_state<T, n>();
  task<T> all[n] = {std::move(first), std::move(rest)...};
  for (std::size_t i = 0; i < n; ++i) {
    if (!all[i].valid()) {
      delete s;
      detail::throw_empty_task("when_any");
    }
    s->tasks[i] = std::move(all[i]);
  }
  return detail::start_when_any<detail::when_any_fixed_state<T, n>, T>(s);
}

/// The first task of the range to complete. The range must not be empty (.NET throws too).
template <std::ranges::input_range Range>
  requires detail::is_task<std::ranges::range_value_t<Range>>::value
auto when_any(Range&& range) {
  using T = typename std::ranges::range_value_t<Range>::value_type;
  auto* s = new detail::when_any_range_state<T>();
  try {
    for (auto&& t : range) {
      if (!t.valid()) detail::throw_empty_task("when_any");
      if constexpr (std::is_lvalue_reference_v<Range>)
        s->tasks.push_back(t);
      else
        s->tasks.push_back(std::move(t));
    }
    if (s->tasks.empty()) throw std::invalid_argument("when_any: the range of tasks is empty");
    s->nodes.resize(s->tasks.size());
  } catch (...) {
    delete s;
    throw;
  }
  return detail::start_when_any<detail::when_any_range_state<T>, T>(s);
}

}  // namespace tpl
