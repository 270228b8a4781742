// tpl::value_task<T>: a result without allocation, a wrapped task, or a coroutine; awaited once.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace value_task_test_cpp {

namespace {

using tpl_test::holds;
using tpl_test::test_error;
using tpl_test::test_error_id;

tpl::value_task<int> doubled(int x) { co_return 2 * x; }

tpl::value_task<int> doubled_after_yield(int x) {
  co_await tpl::yield();
  co_return 2 * x;
}

tpl::value_task<> yields_once() { co_await tpl::yield(); }

tpl::value_task<int> throws_after_yield(int id) {
  co_await tpl::yield();
  throw test_error(id);
}

// Not a coroutine: returns a stored value or wraps a task.
tpl::value_task<int> cached_or_pending(bool cached, tpl::task<int> pending) {
  if (cached) return tpl::value_task<int>(10);
  return tpl::value_task<int>(std::move(pending));
}

template <class T>
tpl::task<T> await_value_task(tpl::value_task<T> v) {
  co_return co_await std::move(v);
}

tpl::task<int> await_lvalue(tpl::value_task<int>& v) { co_return co_await v; }

std::exception_ptr exception_of_task(const tpl::task<int>& t) {
  try {
    t.wait();
  } catch (const tpl::aggregate_exception& e) {
    return e.inner_exceptions().at(0);
  }
  return nullptr;
}

tpl::task<std::exception_ptr> await_twice(tpl::value_task<int>& v) {
  co_await v;
  try {
    co_await v;
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

tpl::task<std::exception_ptr> await_then_get(tpl::value_task<int>& v) {
  co_await v;
  try {
    (void)v.get();
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

tpl::task<std::exception_ptr> exception_of_await(tpl::value_task<int> v) {
  try {
    co_await std::move(v);
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

}  // namespace

TEST(value_task, from_a_value_is_completed_and_yields_it) {
  tpl::value_task<int> v(5);
  EXPECT_TRUE(v.valid());
  EXPECT_TRUE(v.is_completed());
  EXPECT_EQ(await_value_task(std::move(v)).get(), 5);
}

TEST(value_task, from_a_value_get_returns_it) {
  tpl::value_task<std::string> v(std::string("abc"));
  EXPECT_EQ(v.get(), "abc");
}

TEST(value_task, from_a_value_holds_a_move_only_result) {
  tpl::value_task<std::unique_ptr<int>> v(std::make_unique<int>(3));
  std::unique_ptr<int> p = v.get();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 3);
}

TEST(value_task, from_a_pending_task_completes_when_the_task_does) {
  tpl::task_completion_source<int> tcs;
  tpl::value_task<int> v(tcs.get_task());
  EXPECT_FALSE(v.is_completed());
  tpl::task<int> awaited = await_value_task(std::move(v));
  EXPECT_FALSE(awaited.is_completed());
  tcs.set_result(4);
  EXPECT_EQ(awaited.get(), 4);
}

TEST(value_task, from_a_task_get_blocks_for_the_result) {
  tpl::value_task<int> v(tpl::run([] { return 12; }));
  EXPECT_EQ(v.get(), 12);
}

TEST(value_task, non_coroutine_function_can_return_either_form) {
  tpl::task_completion_source<int> tcs;
  tcs.set_result(20);
  EXPECT_EQ(cached_or_pending(true, tcs.get_task()).get(), 10);
  EXPECT_EQ(cached_or_pending(false, tcs.get_task()).get(), 20);
}

TEST(value_task, coroutine_that_never_suspends_is_completed_on_return) {
  tpl::value_task<int> v = doubled(21);
  EXPECT_TRUE(v.is_completed());
  EXPECT_EQ(v.get(), 42);
}

TEST(value_task, coroutine_that_suspends_completes_later) {
  EXPECT_EQ(await_value_task(doubled_after_yield(4)).get(), 8);
}

TEST(value_task, void_coroutine_completes) {
  tpl::value_task<> v = yields_once();
  EXPECT_NO_THROW(v.get());
}

TEST(value_task, completed_void_value_task_is_completed) {
  tpl::value_task<> v = tpl::value_task<>::completed();
  EXPECT_TRUE(v.is_completed());
  EXPECT_NO_THROW(tpl::sync_wait(std::move(v)));
}

TEST(value_task, can_be_awaited_as_an_lvalue) {
  tpl::value_task<int> v(7);
  EXPECT_EQ(await_lvalue(v).get(), 7);
}

TEST(value_task, awaiting_a_faulted_value_task_rethrows_the_original_exception) {
  EXPECT_EQ(test_error_id(exception_of_await(throws_after_yield(3)).get()), 3);
}

TEST(value_task, get_on_a_faulted_value_task_throws_the_original_exception) {
  tpl::value_task<int> v = throws_after_yield(4);
  EXPECT_THROW((void)v.get(), test_error);
}

TEST(value_task, awaiting_twice_throws_invalid_operation) {
  tpl::value_task<int> v(1);
  EXPECT_TRUE(holds<tpl::invalid_operation>(await_twice(v).get()));
}

TEST(value_task, awaiting_a_wrapped_task_twice_throws_invalid_operation) {
  tpl::value_task<int> v(tpl::task_from_result(1000));
  EXPECT_TRUE(holds<tpl::invalid_operation>(await_twice(v).get()));
}

TEST(value_task, second_await_while_the_first_is_still_pending_throws_invalid_operation) {
  tpl::task_completion_source<int> tcs;
  tpl::value_task<int> v(tcs.get_task());
  tpl::task<int> first = await_lvalue(v);  // suspended: the value_task is being awaited
  EXPECT_FALSE(first.is_completed());
  tpl::task<int> second = await_lvalue(v);
  EXPECT_TRUE(second.is_faulted());
  EXPECT_TRUE(holds<tpl::invalid_operation>(exception_of_task(second)));
  tcs.set_result(3);
  EXPECT_EQ(first.get(), 3);  // the first await is unaffected
}

TEST(value_task, get_after_await_throws_invalid_operation) {
  tpl::value_task<int> v = doubled_after_yield(1);
  EXPECT_TRUE(holds<tpl::invalid_operation>(await_then_get(v).get()));
}

TEST(value_task, get_twice_throws_invalid_operation) {
  tpl::value_task<int> v(1);
  EXPECT_EQ(v.get(), 1);
  EXPECT_THROW((void)v.get(), tpl::invalid_operation);
}

TEST(value_task, consumed_value_task_is_no_longer_valid) {
  tpl::value_task<int> v(1);
  (void)v.get();
  EXPECT_FALSE(v.valid());
}

TEST(value_task, as_task_of_a_value_gives_a_completed_task) {
  tpl::task<int> t = tpl::value_task<int>(1234).as_task();
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_EQ(t.get(), 1234);
}

TEST(value_task, as_task_of_a_wrapped_task_gives_that_task) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> original = tcs.get_task();
  tpl::task<int> t = tpl::value_task<int>(original).as_task();
  EXPECT_TRUE(t == original);
  tcs.set_result(6);
  EXPECT_EQ(t.get(), 6);
}

TEST(value_task, as_task_of_a_coroutine_can_be_awaited_many_times) {
  tpl::task<int> t = doubled_after_yield(5).as_task();
  EXPECT_EQ(t.get(), 10);
  EXPECT_EQ(t.get(), 10);
  EXPECT_EQ(tpl::sync_wait(t), 10);
}

TEST(value_task, as_task_of_a_void_value_task_is_completed) {
  EXPECT_TRUE(tpl::value_task<>::completed().as_task().is_completed_successfully());
}

TEST(value_task, as_task_consumes_the_value_task) {
  tpl::value_task<int> v(1);
  tpl::task<int> t = std::move(v).as_task();
  EXPECT_FALSE(v.valid());  // NOLINT(bugprone-use-after-move): the consumed state is the point
  EXPECT_THROW((void)v.get(), tpl::invalid_operation);
  EXPECT_EQ(t.get(), 1);
}

TEST(value_task, moved_from_value_task_cannot_be_awaited) {
  tpl::value_task<int> v(1);
  tpl::value_task<int> w = std::move(v);
  EXPECT_EQ(w.get(), 1);
  EXPECT_THROW((void)v.get(), tpl::invalid_operation);  // NOLINT(bugprone-use-after-move)
}

TEST(value_task, move_assignment_replaces_the_result) {
  tpl::value_task<int> v(1);
  v = tpl::value_task<int>(tpl::task_from_result(2000));
  EXPECT_EQ(v.get(), 2000);
}

TEST(value_task, sync_wait_returns_the_value) {
  EXPECT_EQ(tpl::sync_wait(doubled_after_yield(6)), 12);
}

TEST(value_task, sync_wait_on_an_lvalue_consumes_it) {
  tpl::value_task<int> v = doubled_after_yield(7);
  EXPECT_EQ(tpl::sync_wait(v), 14);
  EXPECT_THROW((void)tpl::sync_wait(v), tpl::invalid_operation);
}

// ---- a coroutine that completes inside its call hands its result over and frees its frame -----

namespace {

// Sets its flag when the object that was moved around last goes: a coroutine parameter's copy
// lives in the frame, so the flag says when the frame was destroyed.
struct frame_witness {
  bool* destroyed;
  explicit frame_witness(const std::shared_ptr<bool>& d) : destroyed(d.get()) {}
  frame_witness(frame_witness&& o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)) {}
  frame_witness(const frame_witness&) = delete;
  ~frame_witness() {
    if (destroyed != nullptr) *destroyed = true;
  }
};

tpl::value_task<int> sync_with_witness(frame_witness w, int x) {
  (void)w;
  co_return x + 1;
}
tpl::value_task<> sync_void_with_witness(frame_witness w) {
  (void)w;
  co_return;
}
tpl::value_task<int> sync_throw_with_witness(frame_witness w, int id) {
  (void)w;
  throw test_error(id);
  co_return 0;
}
tpl::value_task<int> yield_with_witness(frame_witness w, int x) {
  (void)w;
  co_await tpl::yield();
  co_return x + 1;
}
tpl::value_task<std::unique_ptr<int>> sync_move_only(frame_witness w, int x) {
  (void)w;
  co_return std::make_unique<int>(x);
}

// A result whose move may throw cannot be moved in final_suspend (noexcept): it stays in the frame.
struct throwing_move {
  int v;
  explicit throwing_move(int x) : v(x) {}
  throwing_move(throwing_move&& o) noexcept(false) : v(o.v) {}
  throwing_move(const throwing_move&) = default;
};
tpl::value_task<throwing_move> sync_throwing_move(frame_witness w, int x) {
  (void)w;
  co_return throwing_move(x);
}

template <class F>
auto call_with_witness(F f, std::shared_ptr<bool>& destroyed) {
  destroyed = std::make_shared<bool>(false);
  return f(frame_witness(destroyed));
}

}  // namespace

TEST(value_task, coroutine_completing_inside_its_call_has_freed_its_frame_on_return) {
  std::shared_ptr<bool> destroyed;
  tpl::value_task<int> v = call_with_witness([](frame_witness w) { return sync_with_witness(std::move(w), 41); }, destroyed);
  EXPECT_TRUE(*destroyed);  // before anyone awaits it
  EXPECT_TRUE(v.is_completed());
  EXPECT_EQ(v.get(), 42);
}

TEST(value_task, coroutine_completing_inside_its_call_can_be_moved_and_awaited) {
  std::shared_ptr<bool> destroyed;
  tpl::value_task<int> v = call_with_witness([](frame_witness w) { return sync_with_witness(std::move(w), 1); }, destroyed);
  tpl::value_task<int> w = std::move(v);
  EXPECT_EQ(await_value_task(std::move(w)).get(), 2);
  EXPECT_EQ(tpl::sync_wait(sync_with_witness(frame_witness(std::make_shared<bool>(false)), 9)), 10);
  EXPECT_EQ(sync_with_witness(frame_witness(std::make_shared<bool>(false)), 5).as_task().get(), 6);
}

TEST(value_task, void_coroutine_completing_inside_its_call_has_freed_its_frame_on_return) {
  std::shared_ptr<bool> destroyed;
  tpl::value_task<> v = call_with_witness([](frame_witness w) { return sync_void_with_witness(std::move(w)); }, destroyed);
  EXPECT_TRUE(*destroyed);
  EXPECT_TRUE(v.is_completed());
  EXPECT_NO_THROW(tpl::sync_wait(std::move(v)));
}

TEST(value_task, move_only_result_of_a_coroutine_completing_inside_its_call) {
  std::shared_ptr<bool> destroyed;
  tpl::value_task<std::unique_ptr<int>> v = call_with_witness([](frame_witness w) { return sync_move_only(std::move(w), 3); }, destroyed);
  EXPECT_TRUE(*destroyed);
  std::unique_ptr<int> r = v.get();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(*r, 3);
}

// A fault keeps the frame (its state carries the exception) until the value_task goes.
TEST(value_task, coroutine_faulting_inside_its_call_keeps_its_frame_for_the_exception) {
  std::shared_ptr<bool> destroyed;
  {
    tpl::value_task<int> v = call_with_witness([](frame_witness w) { return sync_throw_with_witness(std::move(w), 77); }, destroyed);
    EXPECT_FALSE(*destroyed);
    EXPECT_TRUE(v.is_completed());
    try {
      (void)await_value_task(std::move(v)).get();
      ADD_FAILURE() << "no exception";
    } catch (const tpl::aggregate_exception& e) {
      EXPECT_TRUE(holds<test_error>(e.inner_exceptions().at(0)));
    }
  }
  EXPECT_TRUE(*destroyed);
}

TEST(value_task, coroutine_that_suspends_keeps_its_frame_until_consumed) {
  std::shared_ptr<bool> destroyed;
  tpl::value_task<int> v = call_with_witness([](frame_witness w) { return yield_with_witness(std::move(w), 1); }, destroyed);
  EXPECT_EQ(tpl::sync_wait(v), 2);
  EXPECT_TRUE(*destroyed);  // the wait consumed it and dropped the last reference
}

TEST(value_task, result_with_a_throwing_move_stays_in_the_frame) {
  std::shared_ptr<bool> destroyed;
  {
    tpl::value_task<throwing_move> v = call_with_witness([](frame_witness w) { return sync_throwing_move(std::move(w), 8); }, destroyed);
    EXPECT_FALSE(*destroyed);
    EXPECT_EQ(v.get().v, 8);
  }
  EXPECT_TRUE(*destroyed);
}

}  // namespace value_task_test_cpp
