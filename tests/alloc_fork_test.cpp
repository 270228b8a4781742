// tpl::parallel::invoke on a pool worker whose deque cannot grow (tpl/parallel_invoke.hpp,
// src/thread_pool/fork_join.cpp): the functions that could not be queued run on the caller, in
// their turn, each exactly once, and nothing throws. Both ways of queuing are covered: one
// function queued by itself (two functions) and several queued at once (ten functions).
//
// The worker's own allocations fail here (the hook fails only the thread that armed it), from
// inside an item of a one-worker pool, so that no thief empties the deque and the recursion below
// deterministically needs more than its first 1,024 slots.
#include <gtest/gtest.h>

#include <atomic>

#include <tpl/tpl.hpp>

#include "alloc_hook.hpp"

namespace {

// depth levels of invokes of `width` functions: the first recurses, the others count a leaf. The
// deque then holds (width - 1) * depth jobs at the deepest level.
void nest(int depth, int width, std::atomic<long>& leaves) {
  if (depth == 0) {
    ++leaves;
    return;
  }
  auto leaf = [&leaves] { ++leaves; };
  auto down = [&] { nest(depth - 1, width, leaves); };
  if (width == 2)
    tpl::parallel::invoke(down, leaf);
  else
    tpl::parallel::invoke(down, leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf);
}

struct result {
  long leaves = 0;
  bool injected = false;
};

result nest_with_failing_allocations(tpl::thread_pool& pool, int depth, int width) {
  std::atomic<long> leaves{0};
  bool injected = false;
  tpl::run(pool, [&] {
    tpl_alloc::arm_failure(1, /*persistent=*/true);
    nest(depth, width, leaves);
    injected = tpl_alloc::failure_injected();
    tpl_alloc::disarm_failure();
  }).get();
  return {leaves.load(), injected};
}

}  // namespace

TEST(allocations, an_invoke_whose_deque_cannot_grow_runs_its_functions_on_the_caller) {
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 1});
  // 9 functions queued at once per level: 120 levels need 1,080 slots.
  result r = nest_with_failing_allocations(pool, 120, 10);
  EXPECT_TRUE(r.injected);
  EXPECT_EQ(r.leaves, 120L * 9 + 1);
  // 1 function queued per level: 1,100 levels need 1,100 slots.
  r = nest_with_failing_allocations(pool, 1'100, 2);
  EXPECT_TRUE(r.injected);
  EXPECT_EQ(r.leaves, 1'100L + 1);
  // The deque is whole afterwards: with allocations allowed again it grows, and all runs.
  std::atomic<long> leaves{0};
  tpl::run(pool, [&] { nest(120, 10, leaves); }).get();
  EXPECT_EQ(leaves.load(), 120L * 9 + 1);
}
