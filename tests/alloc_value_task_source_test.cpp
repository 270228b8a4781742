// A reusable value_task_source serves operation after operation without allocating: the
// awaiting coroutine waits in the source's core, and the core is reset, not replaced.
#include <gtest/gtest.h>

#include <tpl/detail/frame_pool.hpp>
#include <tpl/tpl.hpp>

#include "alloc_hook.hpp"
#include "value_task_source_support.hpp"

namespace {

[[maybe_unused]] const bool quarantine_off = [] {
  tpl::detail::frame_pool_set_quarantine_for_testing(false);
  return true;
}();

// Awaits `ops` operations of `src`; each is completed by `other`'s loop below, half before the
// await (synchronous) and half after it (the awaiter is resumed inside set_result).
tpl::task<long> consume(tpl_test::reusable_source<int>& src, int ops) {
  long sum = 0;
  for (int i = 0; i < ops; ++i) sum += co_await src.start();
  co_return sum;
}

}  // namespace

TEST(allocations, a_reused_value_task_source_allocates_nothing_per_operation) {
  constexpr int kOps = 100'000;
  tpl_test::reusable_source<int> src;
  auto warm = consume(src, 2);
  src.complete(0);
  src.complete(0);
  ASSERT_EQ(warm.get(), 0);

  const long before = tpl_alloc::allocations();
  long expected = 0;
  {
    auto consumer = consume(src, kOps);  // its one frame is counted: see the bound below
    const long after_start = tpl_alloc::allocations();
    for (int i = 0; i < kOps; ++i) {
      // The consumer is suspended on operation i (registered, not completed): complete it; it
      // resumes here, takes the result, resets the core and awaits operation i + 1.
      ASSERT_FALSE(consumer.is_completed());
      src.complete(i);
      expected += i;
    }
    EXPECT_EQ(tpl_alloc::allocations() - after_start, 0) << "allocations over " << kOps << " operations";
    ASSERT_TRUE(consumer.is_completed());
    EXPECT_EQ(consumer.get(), expected);
  }
  EXPECT_LE(tpl_alloc::allocations() - before, 1) << "at most the consumer's frame, from the frame pool";
}

TEST(allocations, a_value_task_source_completed_before_the_await_allocates_nothing) {
  constexpr int kOps = 100'000;
  tpl_test::reusable_source<int> src;
  long allocations_in_loop = -1;
  auto body = [&]() -> tpl::task<long> {
    long sum = 0;
    const long before = tpl_alloc::allocations();
    for (int i = 0; i < kOps; ++i) {
      auto vt = src.start();
      src.complete(i);  // completed first: the await finishes synchronously
      sum += co_await std::move(vt);
    }
    allocations_in_loop = tpl_alloc::allocations() - before;
    co_return sum;
  };
  auto t = body();
  ASSERT_TRUE(t.is_completed());
  EXPECT_EQ(t.get(), static_cast<long>(kOps) * (kOps - 1) / 2);
  EXPECT_EQ(allocations_in_loop, 0);
}
