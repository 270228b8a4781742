// tpl::when_all: completes when every task has; results in task order; every exception collected
// in task order; canceled if any was canceled and none faulted.
#include <gtest/gtest.h>

#include <list>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace when_all_test_cpp {

namespace {

using tpl_test::exception_of_await;

template <class T>
T co_await_or_get(tpl::task<T>&& t) {
  return tpl::sync_wait([](tpl::task<T> t) -> tpl::task<T> { co_return co_await std::move(t); }(std::move(t)));
}

using tpl_test::holds;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::wait_inner_exceptions;

tpl::task<int> yields_then_returns(int v) {
  co_await tpl::yield();
  co_return v;
}

tpl::task<int> sum_of_all(std::vector<tpl::task<int>> parts) {
  int sum = 0;
  // (Through a variable: g++ 12 miscompiles some co_awaits nested in statements' conditions.)
  const std::vector<int> all = co_await tpl::when_all(parts);
  for (int v : all) sum += v;
  co_return sum;
}

tpl::task<std::unique_ptr<int>> unique_after(tpl::task<> gate, int v) {
  co_await gate;
  co_return std::make_unique<int>(v);
}

std::exception_ptr error(int id) { return std::make_exception_ptr(test_error(id)); }

}  // namespace

// ---- variadic ---------------------------------------------------------------------------------

TEST(when_all, variadic_result_is_a_tuple_in_argument_order) {
  tpl::task_completion_source<int> a;
  tpl::task_completion_source<std::string> b;
  auto all = tpl::when_all(a.get_task(), b.get_task());
  static_assert(std::is_same_v<decltype(all), tpl::task<std::tuple<int, std::string>>>);

  b.set_result("second");  // completion order is not result order
  EXPECT_FALSE(all.is_completed());
  a.set_result(1);

  EXPECT_TRUE(all.is_completed_successfully());
  EXPECT_EQ(all.get(), std::make_tuple(1, std::string("second")));
}

TEST(when_all, variadic_void_task_contributes_monostate) {
  tpl::task_completion_source<> done;
  auto all = tpl::when_all(tpl::task_from_result(5), done.get_task());
  static_assert(std::is_same_v<decltype(all), tpl::task<std::tuple<int, std::monostate>>>);
  done.set_result();
  EXPECT_EQ(std::get<0>(all.get()), 5);
}

TEST(when_all, variadic_of_only_void_tasks_is_a_void_task) {
  tpl::task_completion_source<> a, b;
  auto all = tpl::when_all(a.get_task(), b.get_task());
  static_assert(std::is_same_v<decltype(all), tpl::task<>>);
  a.set_result();
  EXPECT_FALSE(all.is_completed());
  b.set_result();
  EXPECT_TRUE(all.is_completed_successfully());
}

TEST(when_all, variadic_waits_for_tasks_completing_on_the_pool) {
  auto all = tpl::when_all(yields_then_returns(1), yields_then_returns(2), yields_then_returns(3));
  EXPECT_EQ(all.get(), std::make_tuple(1, 2, 3));
}

TEST(when_all, variadic_of_already_completed_tasks_completes_synchronously) {
  auto all = tpl::when_all(tpl::task_from_result(1), tpl::task_from_result(std::string("x")));
  EXPECT_TRUE(all.is_completed_successfully());
  EXPECT_EQ(all.get(), std::make_tuple(1, std::string("x")));
}

TEST(when_all, of_no_tasks_is_a_completed_void_task) {
  tpl::task<> all = tpl::when_all();
  EXPECT_TRUE(all.is_completed_successfully());
}

TEST(when_all, same_task_passed_twice_contributes_its_result_twice) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> t = tcs.get_task();
  auto all = tpl::when_all(t, t);
  tcs.set_result(4);
  EXPECT_EQ(all.get(), std::make_tuple(4, 4));
}

TEST(when_all, variadic_takes_move_only_results_from_sole_owners) {
  tpl::task_completion_source<> gate;
  auto all = tpl::when_all(unique_after(gate.get_task(), 1), tpl::task_from_result(std::make_unique<int>(2)));
  gate.set_result();  // completes the first input, and with it when_all, on this thread
  auto [p, q] = std::move(all).get();
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(*p, 1);
  EXPECT_EQ(*q, 2);
}

TEST(when_all, range_takes_move_only_results_from_sole_owners) {
  tpl::task_completion_source<> gate;
  auto all = tpl::when_all(std::vector{unique_after(gate.get_task(), 1), unique_after(gate.get_task(), 2)});
  gate.set_result();
  // The caller holds the only handle, so the vector of move-only results is moved out.
  std::vector<std::unique_ptr<int>> results = std::move(all).get();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(*results[0], 1);
  EXPECT_EQ(*results[1], 2);
}

TEST(when_all, shared_result_of_move_only_elements_is_refused_not_copied) {
  tpl::task_completion_source<> gate;
  auto all = tpl::when_all(std::vector{unique_after(gate.get_task(), 1)});
  gate.set_result();
  auto other_handle = all;
  EXPECT_THROW((void)std::move(all).get(), tpl::invalid_operation);
  EXPECT_EQ(*other_handle.get()[0], 1);
}

TEST(when_all, moved_in_range_hands_its_tasks_over) {
  // The caller gave the tasks up (std::move), so when_all is their sole owner and can move
  // move-only results out.
  tpl::task_completion_source<> gate;
  std::vector<tpl::task<std::unique_ptr<int>>> tasks;
  tasks.push_back(unique_after(gate.get_task(), 1));
  tasks.push_back(unique_after(gate.get_task(), 2));
  auto all = tpl::when_all(std::move(tasks));
  gate.set_result();
  std::vector<std::unique_ptr<int>> results = co_await_or_get(std::move(all));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(*results[0], 1);
  EXPECT_EQ(*results[1], 2);
}

TEST(when_all, moved_in_vector_with_an_empty_task_throws_and_keeps_every_task) {
  tpl::task_completion_source<int> source;
  std::vector<tpl::task<int>> tasks{source.get_task(), tpl::task<int>{}, tpl::task_from_result(3)};
  EXPECT_THROW((void)tpl::when_all(std::move(tasks)), tpl::invalid_operation);
  ASSERT_EQ(tasks.size(), 3u) << "checked before it is taken";
  EXPECT_TRUE(tasks[0].valid());
  EXPECT_FALSE(tasks[1].valid());
  EXPECT_TRUE(tasks[2].valid());
  source.set_result(1);
  EXPECT_EQ(tasks[0].get(), 1);
}

TEST(when_all, moved_in_vectors_of_pending_tasks_yield_every_result_in_order) {
  // Up to a few inputs the waiter nodes live in the when_all state, more get their own array:
  // both, with the inputs completing in reverse order.
  for (const int n : {1, 2, 4, 5, 9}) {
    std::vector<tpl::task_completion_source<int>> sources(static_cast<std::size_t>(n));
    std::vector<tpl::task<int>> tasks;
    for (auto& s : sources) tasks.push_back(s.get_task());
    tpl::task<std::vector<int>> all = tpl::when_all(std::move(tasks));
    for (int i = n - 1; i >= 0; --i) {
      EXPECT_FALSE(all.is_completed()) << n;
      sources[static_cast<std::size_t>(i)].set_result(i * 10);
    }
    std::vector<int> expected;
    for (int i = 0; i < n; ++i) expected.push_back(i * 10);
    EXPECT_EQ(all.get(), expected) << n;
  }
}

// ---- range ------------------------------------------------------------------------------------

TEST(when_all, range_result_is_a_vector_in_task_order) {
  std::vector<tpl::task_completion_source<int>> sources(5);
  std::vector<tpl::task<int>> tasks;
  for (auto& s : sources) tasks.push_back(s.get_task());
  tpl::task<std::vector<int>> all = tpl::when_all(tasks);

  for (int i = 4; i >= 0; --i) {  // complete in reverse order
    EXPECT_FALSE(all.is_completed());
    sources[i].set_result(i * 10);
  }

  EXPECT_TRUE(all.is_completed_successfully());
  EXPECT_EQ(all.get(), (std::vector<int>{0, 10, 20, 30, 40}));
}

TEST(when_all, range_of_void_tasks_is_a_void_task) {
  std::vector<tpl::task_completion_source<>> sources(3);
  std::vector<tpl::task<>> tasks;
  for (auto& s : sources) tasks.push_back(s.get_task());
  auto all = tpl::when_all(tasks);
  static_assert(std::is_same_v<decltype(all), tpl::task<>>);
  for (auto& s : sources) s.set_result();
  EXPECT_TRUE(all.is_completed_successfully());
}

TEST(when_all, range_accepts_any_input_range) {
  std::list<tpl::task<int>> tasks{tpl::task_from_result(1), yields_then_returns(2)};
  EXPECT_EQ(tpl::when_all(tasks).get(), (std::vector<int>{1, 2}));
}

TEST(when_all, range_of_tasks_completing_on_the_pool_yields_every_result) {
  std::vector<tpl::task<int>> tasks;
  for (int i = 0; i < 100; ++i) tasks.push_back(yields_then_returns(i));
  EXPECT_EQ(sum_of_all(tasks).get(), 99 * 100 / 2);
}

TEST(when_all, empty_range_completes_immediately_with_no_results) {
  tpl::task<std::vector<int>> all = tpl::when_all(std::vector<tpl::task<int>>{});
  EXPECT_TRUE(all.is_completed_successfully());
  EXPECT_TRUE(all.get().empty());
}

TEST(when_all, empty_range_of_void_tasks_completes_immediately) {
  tpl::task<> all = tpl::when_all(std::vector<tpl::task<>>{});
  EXPECT_TRUE(all.is_completed_successfully());
}

TEST(when_all, range_of_already_completed_tasks_completes_synchronously) {
  std::vector<tpl::task<int>> tasks{tpl::task_from_result(1), tpl::task_from_result(2)};
  tpl::task<std::vector<int>> all = tpl::when_all(tasks);
  EXPECT_TRUE(all.is_completed());
  EXPECT_EQ(all.get(), (std::vector<int>{1, 2}));
}

TEST(when_all, range_does_not_consume_the_callers_tasks) {
  std::vector<tpl::task<int>> tasks{tpl::task_from_result(1000)};
  (void)tpl::when_all(tasks).get();
  ASSERT_TRUE(tasks[0].valid());
  EXPECT_EQ(tasks[0].get(), 1000);
}

// ---- faults and cancellation ------------------------------------------------------------------

TEST(when_all, wait_reports_every_exception_in_task_order) {
  std::vector<tpl::task_completion_source<int>> sources(4);
  std::vector<tpl::task<int>> tasks;
  for (auto& s : sources) tasks.push_back(s.get_task());
  tpl::task<std::vector<int>> all = tpl::when_all(tasks);

  sources[3].set_exception(error(3));  // faults arrive in reverse order
  sources[2].set_result(2);
  sources[1].set_exception(error(1));
  sources[0].set_exception(error(0));

  EXPECT_TRUE(all.is_faulted());
  auto inner = wait_inner_exceptions(all);
  ASSERT_EQ(inner.size(), 3u);
  EXPECT_EQ(test_error_id(inner[0]), 0);
  EXPECT_EQ(test_error_id(inner[1]), 1);
  EXPECT_EQ(test_error_id(inner[2]), 3);
}

TEST(when_all, await_rethrows_the_first_exception_in_task_order) {
  tpl::task_completion_source<int> a, b;
  auto all = tpl::when_all(a.get_task(), b.get_task());
  b.set_exception(error(2));
  a.set_exception(error(1));
  EXPECT_EQ(test_error_id(exception_of_await(all).get()), 1);
}

TEST(when_all, variadic_wait_reports_every_exception_in_argument_order) {
  tpl::task_completion_source<int> a;
  tpl::task_completion_source<> b;
  tpl::task_completion_source<std::string> c;
  auto all = tpl::when_all(a.get_task(), b.get_task(), c.get_task());
  c.set_exception(error(3));
  b.set_exception(error(2));
  a.set_result(1);
  auto inner = wait_inner_exceptions(all);
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(test_error_id(inner[0]), 2);
  EXPECT_EQ(test_error_id(inner[1]), 3);
}

TEST(when_all, task_with_several_exceptions_contributes_all_of_them) {
  tpl::task_completion_source<int> a, b;
  auto all = tpl::when_all(a.get_task(), b.get_task());
  a.set_exception(std::vector{error(1), error(2)});
  b.set_exception(error(3));
  auto inner = wait_inner_exceptions(all);
  ASSERT_EQ(inner.size(), 3u);
  EXPECT_EQ(test_error_id(inner[0]), 1);
  EXPECT_EQ(test_error_id(inner[1]), 2);
  EXPECT_EQ(test_error_id(inner[2]), 3);
}

TEST(when_all, single_fault_is_reported_alone) {
  auto all = tpl::when_all(tpl::task_from_result(1), tpl::task_from_exception<int>(test_error(5)));
  auto inner = wait_inner_exceptions(all);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 5);
  EXPECT_EQ(test_error_id(exception_of_await(all).get()), 5);
}

TEST(when_all, a_fault_does_not_complete_it_before_the_other_tasks) {
  tpl::task_completion_source<int> a, b;
  auto all = tpl::when_all(a.get_task(), b.get_task());
  a.set_exception(error(1));
  EXPECT_FALSE(all.is_completed());
  b.set_result(2);
  EXPECT_TRUE(all.is_faulted());
}

TEST(when_all, canceled_if_any_task_was_canceled_and_none_faulted) {
  tpl::task_completion_source<int> a, b;
  auto all = tpl::when_all(a.get_task(), b.get_task());
  a.set_canceled();
  b.set_result(2);
  EXPECT_TRUE(all.is_canceled());
  EXPECT_TRUE(holds<tpl::operation_canceled>(exception_of_await(all).get()));
  auto inner = wait_inner_exceptions(all);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(holds<tpl::operation_canceled>(inner[0]));
}

TEST(when_all, faulted_rather_than_canceled_when_both_happened) {
  std::vector<tpl::task<int>> tasks{tpl::task_from_canceled<int>(), tpl::task_from_exception<int>(test_error(2))};
  tpl::task<std::vector<int>> all = tpl::when_all(tasks);
  EXPECT_TRUE(all.is_faulted());
  auto inner = wait_inner_exceptions(all);
  ASSERT_EQ(inner.size(), 1u);  // only the faults: the cancellation is not an exception of its own
  EXPECT_EQ(test_error_id(inner[0]), 2);
}

TEST(when_all, of_void_tasks_collects_faults_too) {
  std::vector<tpl::task<>> tasks{tpl::task_from_exception(test_error(1)), tpl::completed_task(),
                                 tpl::task_from_exception(test_error(2))};
  tpl::task<> all = tpl::when_all(tasks);
  auto inner = wait_inner_exceptions(all);
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(test_error_id(inner[0]), 1);
  EXPECT_EQ(test_error_id(inner[1]), 2);
}

TEST(when_all, exception_holds_every_fault) {
  auto all = tpl::when_all(tpl::task_from_exception<int>(test_error(1)), tpl::task_from_exception<int>(test_error(2)));
  try {
    std::rethrow_exception(all.exception());
  } catch (const tpl::aggregate_exception& e) {
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(test_error_id(e.inner_exceptions()[0]), 1);
    EXPECT_EQ(test_error_id(e.inner_exceptions()[1]), 2);
  } catch (...) {
    ADD_FAILURE() << "exception() is not an aggregate_exception";
  }
}

TEST(when_all, when_all_of_a_faulted_when_all_keeps_every_exception_flat) {
  auto inner_all =
      tpl::when_all(tpl::task_from_exception<int>(test_error(1)), tpl::task_from_exception<int>(test_error(2)));
  auto outer = tpl::when_all(inner_all, tpl::task_from_exception<int>(test_error(3)));
  auto inner = wait_inner_exceptions(outer);
  ASSERT_EQ(inner.size(), 3u);
  EXPECT_EQ(test_error_id(inner[0]), 1);
  EXPECT_EQ(test_error_id(inner[1]), 2);
  EXPECT_EQ(test_error_id(inner[2]), 3);
}

}  // namespace when_all_test_cpp
