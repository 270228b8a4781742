// tpl/when_all.hpp — tpl::when_all: a task that completes when all the given tasks have
// (.NET Task.WhenAll).
//
//   auto [a, b] = co_await tpl::when_all(load_a(), load_b());    // task<std::tuple<A, B>>
//   std::vector<tpl::task<int>> parts = ...;
//   std::vector<int> all = co_await tpl::when_all(parts);        // results in task order
//   co_await tpl::when_all(std::vector<tpl::task<>>{...});       // void tasks: task<>
//
// Outcome (as .NET): if any task faulted, the result faults with every exception of every faulted
// task, in task order (co_await rethrows the first; wait()/get() throw aggregate_exception with
// all); otherwise, if any was canceled, the result is canceled; otherwise it holds the results.
// In the variadic form a void task contributes std::monostate to the tuple (all void: task<>).
// No task is awaited twice and none is canceled by another's failure.
#pragma once

#include <atomic>
#include <cstddef>
#include <iterator>
#include <memory>
#include <ranges>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "tpl/detail/waiter_firing.hpp"
#include "tpl/task.hpp"

namespace tpl {

namespace detail {

template <class T>
using nonvoid_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

/// Collects the outcome of finished tasks in order: exceptions of faulted ones, canceled flag.
struct outcome_collector {
  std::vector<std::exception_ptr> errors;
  bool canceled = false;
  void add(task_state_base& s) {
    switch (s.status()) {
      case task_status::faulted: {
        auto e = s.exceptions();
        errors.insert(errors.end(), e.begin(), e.end());
        break;
      }
      case task_status::canceled:
        canceled = true;
        break;
      default:
        break;
    }
  }
  /// Sets the error outcome on s; true if there was one.
  bool apply(task_state_base& s) {
    if (!errors.empty()) {
      s.set_errors(std::move(errors));
      return true;
    }
    if (canceled) {
      s.set_canceled();
      return true;
    }
    return false;
  }
};

/// Shared machinery: N waiter nodes counting down to completion of Derived.
template <class R, class Derived>
struct when_all_base : task_state<R>, pooled_allocation {
  struct node : waiter {
    when_all_base* owner;
  };

  // One reference for the returned handle, one held until the last input completes.
  when_all_base() noexcept : task_state<R>(2, false, &delete_as<Derived>) {}

  std::atomic<std::size_t> remaining{1};  // +1 while registering, so completion waits for it

  void register_node(node& n, task_state_base& input) {
    n.owner = this;
    n.set_callback(waiter_callback_for<&node_fired>);
    // relaxed: the count only needs to be atomic; the inputs' results are published by their
    // own completion, which we acquire through add_waiter / the completion CAS.
    remaining.fetch_add(1, std::memory_order_relaxed);
    if (!input.add_waiter(&n)) arrive(true);
  }
  void finish_registration() { arrive(true); }

  static void node_fired(waiter* w, fire_mode mode) noexcept {
    static_cast<node*>(w)->owner->arrive(mode == fire_mode::first_inline);
  }

  void arrive(bool may_run_inline) noexcept {
    // acq_rel: the last arriver must see the completions observed by every other arriver.
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    try {
      outcome_collector c;
      static_cast<Derived*>(this)->collect(c);
      if (!c.apply(*this)) static_cast<Derived*>(this)->set_results();
    } catch (...) {
      // No memory to collect the inputs' exceptions, or a result's constructor threw: the
      // combined task faults with that exception (this runs in completion paths, noexcept).
      this->set_error(std::current_exception(), false);
    }
    waiter* list = this->publish_completion();
    this->release();
    fire_waiters(list, !may_run_inline);
  }
};

template <class... Ts>
struct when_all_tuple_state final
    : when_all_base<std::conditional_t<(std::is_void_v<Ts> && ...), void, std::tuple<nonvoid_t<Ts>...>>,
                    when_all_tuple_state<Ts...>> {
  using result_t = std::conditional_t<(std::is_void_v<Ts> && ...), void, std::tuple<nonvoid_t<Ts>...>>;
  using base = when_all_base<result_t, when_all_tuple_state>;

  std::tuple<task<Ts>...> tasks;
  typename base::node nodes[sizeof...(Ts)];

  explicit when_all_tuple_state(task<Ts>&&... ts) : tasks(std::move(ts)...) {}

  void start() {
    std::size_t i = 0;
    std::apply([&](auto&... t) { (this->register_node(nodes[i++], *task_access::state(t)), ...); },
               tasks);
    this->finish_registration();
  }
  void collect(outcome_collector& c) {
    std::apply([&](auto&... t) { (c.add(*task_access::state(t)), ...); }, tasks);
  }
  void set_results() {
    if constexpr (std::is_void_v<result_t>) {
      this->set_value();
    } else {
      this->set_value(std::apply([](auto&... t) { return result_t(take_one(t)...); }, tasks));
    }
  }
  template <class U>
  static nonvoid_t<U> take_one(task<U>& t) {
    if constexpr (std::is_void_v<U>) {
      return {};
    } else {
      auto* s = task_access::state(t);
      return take_or_copy<U>(s->value_ref(), *s);
    }
  }
};

template <class T>
struct when_all_range_state final
    : when_all_base<std::conditional_t<std::is_void_v<T>, void, std::vector<T>>, when_all_range_state<T>> {
  using result_t = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
  using base = when_all_base<result_t, when_all_range_state>;

  using node_t = typename base::node;
  /// Up to this many inputs, their waiter nodes live in the state itself (one allocation fewer
  /// for the common fork of a few tasks); more get an array of their own.
  static constexpr std::size_t kInlineNodes = 4;

  std::vector<task<T>> tasks;
  node_t inline_nodes[kInlineNodes];
  std::unique_ptr<node_t[]> heap_nodes;  // null up to kInlineNodes inputs

  explicit when_all_range_state(std::vector<task<T>>&& ts)
      : tasks(std::move(ts)),
        heap_nodes(tasks.size() > kInlineNodes ? std::make_unique<node_t[]>(tasks.size()) : nullptr) {}

  void start() {
    node_t* const nodes = heap_nodes != nullptr ? heap_nodes.get() : inline_nodes;
    for (std::size_t i = 0; i < tasks.size(); ++i) this->register_node(nodes[i], *task_access::state(tasks[i]));
    this->finish_registration();
  }
  void collect(outcome_collector& c) {
    for (auto& t : tasks) c.add(*task_access::state(t));
  }
  void set_results() {
    if constexpr (std::is_void_v<T>) {
      this->set_value();
    } else {
      std::vector<T> out;
      out.reserve(tasks.size());
      for (auto& t : tasks) {
        auto* s = task_access::state(t);
        out.push_back(take_or_copy<T>(s->value_ref(), *s));
      }
      this->set_value(std::move(out));
    }
  }
};

template <class State, class R>
task<R> start_when_all(State* s) {
  task<R> result(adopt_state, s);  // owns the handle reference even if start() throws
  s->start();
  return result;
}

void validate_tasks(std::size_t count, const void* const* states);

}  // namespace detail

/// when_all of nothing: already completed (.NET WhenAll of an empty set).
inline task<> when_all() { return completed_task(); }

/// Completes when every task has; see the file comment for the outcome.
template <class... Ts>
  requires(sizeof...(Ts) > 0)
auto when_all(task<Ts>... tasks) {
  using state_t = detail::when_all_tuple_state<Ts...>;
  const void* states[] = {detail::task_access::state(tasks)..., nullptr};
  detail::validate_tasks(sizeof...(Ts), states);
  return detail::start_when_all<state_t, typename state_t::result_t>(new state_t(std::move(tasks)...));
}

/// when_all over a range of task<T>: task<std::vector<T>> (task<> for task<void>).
template <std::ranges::input_range Range>
  requires detail::is_task<std::ranges::range_value_t<Range>>::value
auto when_all(Range&& range) {
  using T = typename std::ranges::range_value_t<Range>::value_type;
  using state_t = detail::when_all_range_state<T>;
  std::vector<task<T>> tasks;
  constexpr bool whole_vector = std::is_same_v<std::remove_cvref_t<Range>, std::vector<task<T>>> &&
                               !std::is_lvalue_reference_v<Range> &&
                               !std::is_const_v<std::remove_reference_t<Range>>;
  if constexpr (whole_vector) {
    // A vector handed over whole: checked first, then taken as it is (no second vector). An
    // empty task in it throws and leaves the vector untouched.
    for (const auto& t : range)
      if (!t.valid()) detail::throw_empty_task("when_all");
    tasks = std::move(range);
  } else {
    if constexpr (std::ranges::sized_range<Range>) tasks.reserve(std::ranges::size(range));
    for (auto&& t : range) {
      if (!t.valid()) detail::throw_empty_task("when_all");
      // An rvalue range hands its tasks over, so a move-only result keeps a sole owner.
      if constexpr (std::is_lvalue_reference_v<Range>)
        tasks.push_back(t);
      else
        tasks.push_back(std::move(t));
    }
  }
  return detail::start_when_all<state_t, typename state_t::result_t>(new state_t(std::move(tasks)));
}

}  // namespace tpl
