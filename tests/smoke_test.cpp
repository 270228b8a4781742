#include <gtest/gtest.h>

#include <tpl/tpl.hpp>

namespace smoke_test_cpp {

namespace {
tpl::task<int> answer() {
  co_await tpl::yield();
  co_return 42;
}
tpl::task<int> sync_answer() { co_return 7; }
}  // namespace

TEST(smoke, sync_wait_on_a_yielding_task_returns_its_value) { EXPECT_EQ(tpl::sync_wait(answer()), 42); }
TEST(smoke, synchronous_task_is_completed_on_return) {
  auto t = sync_answer();
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(t.get(), 7);
}

}  // namespace smoke_test_cpp
