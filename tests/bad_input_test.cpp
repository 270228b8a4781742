// Misuse is reported with a clear exception, never undefined behaviour: empty and moved-from
// handles, completing twice, awaiting a value_task twice, empty inputs, null exceptions.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace bad_input_test_cpp {

namespace {

using tpl_test::holds;
using tpl_test::message_of;
using tpl_test::test_error;

template <class T>
tpl::task<std::exception_ptr> exception_of_await(tpl::task<T>& t) {
  try {
    co_await t;
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

template <class T>
tpl::task<std::exception_ptr> exception_of_rvalue_await(tpl::task<T>& t) {
  try {
    co_await std::move(t);
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

tpl::task<std::exception_ptr> exception_of_configured_await(tpl::task<int>& t) {
  try {
    co_await t.configure<tpl::await_options::suppress_throwing>();
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

tpl::task<std::exception_ptr> exception_of_value_task_await(tpl::value_task<int>& v) {
  try {
    co_await v;
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
  }
  return {};
}

bool mentions(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

tpl::task<int> moved_from_task() {
  tpl::task<int> t = tpl::task_from_result(1000);
  tpl::task<int> taken = std::move(t);
  return t;  // NOLINT(bugprone-use-after-move): an empty handle is what the tests need
}

}  // namespace

// ---- empty task handles -------------------------------------------------------------------------

TEST(bad_input, awaiting_a_default_constructed_task_throws_invalid_operation) {
  tpl::task<int> empty;
  std::exception_ptr e = exception_of_await(empty).get();
  ASSERT_TRUE(holds<tpl::invalid_operation>(e));
  EXPECT_TRUE(mentions(what_of(e), "empty task")) << what_of(e);
}

TEST(bad_input, awaiting_a_moved_from_task_throws_invalid_operation) {
  tpl::task<int> t = moved_from_task();
  std::exception_ptr e = exception_of_await(t).get();
  ASSERT_TRUE(holds<tpl::invalid_operation>(e));
  EXPECT_TRUE(mentions(what_of(e), "empty task")) << what_of(e);
}

TEST(bad_input, awaiting_an_empty_task_as_an_rvalue_throws_invalid_operation) {
  tpl::task<> empty;
  EXPECT_TRUE(holds<tpl::invalid_operation>(exception_of_rvalue_await(empty).get()));
}

TEST(bad_input, configured_await_of_an_empty_task_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_TRUE(holds<tpl::invalid_operation>(exception_of_configured_await(empty).get()));
}

TEST(bad_input, wait_on_a_default_constructed_task_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_THROW(empty.wait(), tpl::invalid_operation);
  EXPECT_TRUE(mentions(message_of([&] { empty.wait(); }), "empty task"));
}

TEST(bad_input, wait_on_a_moved_from_task_throws_invalid_operation) {
  tpl::task<int> t = moved_from_task();
  EXPECT_THROW(t.wait(), tpl::invalid_operation);
  EXPECT_TRUE(mentions(message_of([&] { t.wait(); }), "empty task"));
}

TEST(bad_input, get_on_a_default_constructed_task_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_THROW((void)empty.get(), tpl::invalid_operation);
  EXPECT_TRUE(mentions(message_of([&] { (void)empty.get(); }), "empty task"));
}

TEST(bad_input, get_on_a_moved_from_task_throws_invalid_operation) {
  tpl::task<int> t = moved_from_task();
  EXPECT_THROW((void)t.get(), tpl::invalid_operation);
  EXPECT_THROW((void)std::move(t).get(), tpl::invalid_operation);
}

TEST(bad_input, status_of_a_default_constructed_task_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_THROW((void)empty.status(), tpl::invalid_operation);
  EXPECT_TRUE(mentions(message_of([&] { (void)empty.status(); }), "empty task"));
}

TEST(bad_input, status_queries_on_a_moved_from_task_throw_invalid_operation) {
  tpl::task<int> t = moved_from_task();
  EXPECT_THROW((void)t.status(), tpl::invalid_operation);
  EXPECT_THROW((void)t.is_completed(), tpl::invalid_operation);
  EXPECT_THROW((void)t.is_completed_successfully(), tpl::invalid_operation);
  EXPECT_THROW((void)t.is_faulted(), tpl::invalid_operation);
  EXPECT_THROW((void)t.is_canceled(), tpl::invalid_operation);
  EXPECT_THROW((void)t.exception(), tpl::invalid_operation);
}

TEST(bad_input, wait_for_on_an_empty_task_throws_invalid_operation) {
  tpl::task<> empty;
  EXPECT_THROW((void)empty.wait_for(std::chrono::milliseconds(0)), tpl::invalid_operation);
}

TEST(bad_input, continue_with_on_an_empty_task_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_THROW((void)empty.continue_with([] {}), tpl::invalid_operation);
}

TEST(bad_input, sync_wait_on_an_empty_task_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_THROW((void)tpl::sync_wait(empty), tpl::invalid_operation);
  EXPECT_THROW((void)tpl::sync_wait(tpl::task<int>{}), tpl::invalid_operation);
}

TEST(bad_input, message_names_the_operation) {
  tpl::task<int> empty;
  EXPECT_TRUE(mentions(message_of([&] { empty.wait(); }), "wait()"));
  EXPECT_TRUE(mentions(message_of([&] { (void)empty.status(); }), "status()"));
}

// ---- task_completion_source ---------------------------------------------------------------------

TEST(bad_input, set_result_twice_throws_invalid_operation_saying_it_was_already_completed) {
  tpl::task_completion_source<int> tcs;
  tcs.set_result(1);
  EXPECT_THROW(tcs.set_result(2), tpl::invalid_operation);
  EXPECT_TRUE(mentions(message_of([&] { tcs.set_result(3); }), "already completed"));
}

TEST(bad_input, using_a_moved_from_task_completion_source_throws_invalid_operation) {
  tpl::task_completion_source<int> tcs;
  tpl::task_completion_source<int> other = std::move(tcs);
  // NOLINTBEGIN(bugprone-use-after-move): the moved-from state is the point
  EXPECT_THROW((void)tcs.get_task(), tpl::invalid_operation);
  EXPECT_THROW(tcs.set_result(1), tpl::invalid_operation);
  EXPECT_THROW((void)tcs.try_set_result(1), tpl::invalid_operation);
  EXPECT_THROW(tcs.set_exception(std::make_exception_ptr(test_error(1))), tpl::invalid_operation);
  EXPECT_THROW((void)tcs.try_set_exception(std::vector{std::make_exception_ptr(test_error(1))}),
               tpl::invalid_operation);
  EXPECT_THROW(tcs.set_canceled(), tpl::invalid_operation);
  EXPECT_THROW((void)tcs.try_set_canceled(), tpl::invalid_operation);
  EXPECT_TRUE(mentions(message_of([&] { (void)tcs.get_task(); }), "moved from"));
  // NOLINTEND(bugprone-use-after-move)
  EXPECT_FALSE(other.get_task().is_completed());  // the moved-to source still owns the task
  other.set_result(1);
}

TEST(bad_input, set_exception_with_a_null_exception_throws_invalid_argument) {
  tpl::task_completion_source<int> tcs;
  EXPECT_THROW(tcs.set_exception(std::exception_ptr{}), std::invalid_argument);
  EXPECT_FALSE(tcs.get_task().is_completed());
  tcs.set_result(1);
}

TEST(bad_input, set_exception_with_no_exceptions_throws_invalid_argument) {
  tpl::task_completion_source<int> tcs;
  EXPECT_THROW((void)tcs.try_set_exception(std::vector<std::exception_ptr>{}), std::invalid_argument);
  EXPECT_THROW((void)tcs.try_set_exception(std::vector<std::exception_ptr>{std::make_exception_ptr(test_error(1)), nullptr}),
               std::invalid_argument);
  EXPECT_FALSE(tcs.get_task().is_completed());
  tcs.set_result(1);
}

// ---- value_task -----------------------------------------------------------------------------------

TEST(bad_input, awaiting_a_value_task_twice_throws_invalid_operation) {
  tpl::value_task<int> v(1);
  EXPECT_EQ(v.get(), 1);
  std::exception_ptr e = exception_of_value_task_await(v).get();
  ASSERT_TRUE(holds<tpl::invalid_operation>(e));
  EXPECT_TRUE(mentions(what_of(e), "already awaited")) << what_of(e);
}

TEST(bad_input, awaiting_a_default_constructed_value_task_throws_invalid_operation) {
  tpl::value_task<int> empty;
  EXPECT_FALSE(empty.valid());
  std::exception_ptr e = exception_of_value_task_await(empty).get();
  ASSERT_TRUE(holds<tpl::invalid_operation>(e));
  EXPECT_TRUE(mentions(what_of(e), "empty task")) << what_of(e);
  EXPECT_THROW((void)empty.get(), tpl::invalid_operation);
  EXPECT_THROW((void)empty.is_completed(), tpl::invalid_operation);
}

TEST(bad_input, value_task_from_an_empty_task_throws_invalid_operation) {
  EXPECT_THROW((void)tpl::value_task<int>{tpl::task<int>{}}, tpl::invalid_operation);
}

TEST(bad_input, as_task_of_a_consumed_value_task_throws_invalid_operation) {
  tpl::value_task<int> v(1);
  (void)v.get();
  EXPECT_THROW((void)std::move(v).as_task(), tpl::invalid_operation);
}

// ---- when_all / when_any ------------------------------------------------------------------------

TEST(bad_input, when_all_with_an_empty_task_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_THROW((void)tpl::when_all(tpl::task_from_result(1), empty), tpl::invalid_operation);
  EXPECT_THROW((void)tpl::when_all(tpl::task<>{}), tpl::invalid_operation);
}

TEST(bad_input, when_all_over_a_range_holding_an_empty_task_throws_invalid_operation) {
  std::vector<tpl::task<int>> tasks{tpl::task_from_result(1), tpl::task<int>{}};
  EXPECT_THROW((void)tpl::when_all(tasks), tpl::invalid_operation);
  EXPECT_TRUE(mentions(message_of([&] { (void)tpl::when_all(tasks); }), "empty task"));
}

TEST(bad_input, when_all_rejecting_an_empty_task_leaves_the_valid_ones_untouched) {
  tpl::task_completion_source<int> tcs;
  EXPECT_THROW((void)tpl::when_all(tcs.get_task(), tpl::task<int>{}), tpl::invalid_operation);
  tcs.set_result(1);
  EXPECT_EQ(tcs.get_task().get(), 1);
}

TEST(bad_input, when_any_with_an_empty_task_throws_invalid_operation) {
  tpl::task_completion_source<int> tcs;
  EXPECT_THROW((void)tpl::when_any(tcs.get_task(), tpl::task<int>{}), tpl::invalid_operation);
  EXPECT_THROW((void)tpl::when_any(tpl::task<int>{}, tcs.get_task()), tpl::invalid_operation);
  EXPECT_THROW((void)tpl::when_any(tcs.get_task(), tcs.get_task(), tpl::task<int>{}), tpl::invalid_operation);
  tcs.set_result(1);
}

TEST(bad_input, when_any_over_a_range_holding_an_empty_task_throws_invalid_operation) {
  tpl::task_completion_source<int> tcs;
  std::vector<tpl::task<int>> tasks{tcs.get_task(), tpl::task<int>{}};
  EXPECT_THROW((void)tpl::when_any(tasks), tpl::invalid_operation);
  tcs.set_result(1);
}

TEST(bad_input, when_any_of_an_empty_range_throws_invalid_argument) {
  EXPECT_THROW((void)tpl::when_any(std::vector<tpl::task<int>>{}), std::invalid_argument);
}

// ---- exceptions ---------------------------------------------------------------------------------

TEST(bad_input, aggregate_exception_with_no_exceptions_throws_invalid_argument) {
  EXPECT_THROW(tpl::aggregate_exception(std::vector<std::exception_ptr>{}), std::invalid_argument);
}

TEST(bad_input, aggregate_exception_with_a_null_exception_throws_invalid_argument) {
  EXPECT_THROW(tpl::aggregate_exception(std::vector<std::exception_ptr>{nullptr}), std::invalid_argument);
}

TEST(bad_input, task_from_exception_with_a_null_exception_throws_invalid_argument) {
  EXPECT_THROW((void)tpl::task_from_exception<int>(std::exception_ptr{}), std::invalid_argument);
  EXPECT_THROW((void)tpl::task_from_exception(std::exception_ptr{}), std::invalid_argument);
}

// ---- thread_pool --------------------------------------------------------------------------------

TEST(bad_input, shutting_a_pool_down_from_its_own_thread_throws_logic_error) {
  tpl::thread_pool pool({.thread_count = 1});
  tpl::task<> t = tpl::run(pool, [&pool] { pool.shutdown(); });
  try {
    t.wait();
    ADD_FAILURE() << "shutdown() from a pool thread did not throw";
  } catch (const tpl::aggregate_exception& e) {
    ASSERT_EQ(e.size(), 1u);
    EXPECT_TRUE(holds<std::logic_error>(e.inner_exceptions()[0]));
  }
  // The pool is still usable and shuts down normally from outside.
  EXPECT_EQ(tpl::run(pool, [] { return 1; }).get(), 1);
}

TEST(bad_input, thread_pool_with_an_absurd_thread_count_throws_invalid_argument) {
  EXPECT_THROW(tpl::thread_pool({.thread_count = 1u << 20}), std::invalid_argument);
}

}  // namespace bad_input_test_cpp
