// The thread pool's next slot: a coroutine that the running item wakes (a channel's reader or
// writer it unblocked) runs next on the same worker, unless that worker stays busy, and never at
// the expense of the work already queued there.
//
// Each test states a liveness property: without the behaviour it checks, the test cannot finish
// (it fails at a generous deadline rather than hanging). Nothing here measures speed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <tpl/channel.hpp>
#include <tpl/tpl.hpp>

namespace thread_pool_next_slot_test_cpp {

namespace {

using namespace std::chrono_literals;

// A deadline far beyond any scheduling delay: reaching it means the awaited event cannot happen.
constexpr auto kLiveness = 30s;

bool spin_until(const std::atomic<bool>& flag) {
  const auto give_up = std::chrono::steady_clock::now() + kLiveness;
  while (!flag.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

tpl::task<> read_then_flag(tpl::channel_reader<int> r, std::atomic<bool>& ran) {
  (void)co_await r.read_async();
  ran.store(true, std::memory_order_release);
}

}  // namespace

// The writer's item goes on running (user code the pool knows nothing of) after it woke the
// reader: another worker takes the reader from the writer's slot.
TEST(thread_pool_next_slot, a_woken_coroutine_is_taken_by_another_worker_while_its_waker_runs_on) {
  tpl::thread_pool pool({.thread_count = 2});
  for (int round = 0; round < 20; ++round) {
    tpl::channel<int> ch = tpl::make_unbounded_channel<int>();
    std::atomic<bool> ran{false};
    tpl::task<> reader = read_then_flag(ch.reader(), ran);  // queued on the channel: it suspended
    ASSERT_FALSE(reader.is_completed());
    std::atomic<bool> writer_saw_it{false};
    tpl::task<> writer = tpl::run(pool, [&] {
      EXPECT_TRUE(ch.writer().try_write(round));  // hands the item to the reader, wakes it
      writer_saw_it.store(spin_until(ran), std::memory_order_relaxed);
    });
    writer.wait();
    reader.wait();
    ASSERT_TRUE(writer_saw_it.load()) << "round " << round << ": the woken reader never ran";
  }
}

// A worker that blocks in a tpl wait on the coroutine it just woke runs it inline (task::wait's
// inlining finds it in the slot): a one-thread pool that cannot grow has no one else to run it.
TEST(thread_pool_next_slot, waiting_on_the_woken_coroutine_runs_it_inline) {
  tpl::thread_pool pool({.thread_count = 1, .max_threads = 1});
  tpl::channel<int> ch = tpl::make_bounded_channel<int>(0);
  std::atomic<bool> ran{false};
  tpl::task<> reader = read_then_flag(ch.reader(), ran);
  tpl::task<bool> writer = tpl::run(pool, [&]() -> tpl::task<bool> {
    co_await ch.writer().write_async(1);  // rendezvous with the waiting reader, which is woken
    co_return reader.wait_for(kLiveness) && ran.load(std::memory_order_acquire);
  });
  EXPECT_TRUE(writer.get());
}

// A worker that blocks (a tpl blocking scope) after waking a coroutine hands it to the others.
TEST(thread_pool_next_slot, a_blocking_call_releases_the_woken_coroutine) {
  tpl::thread_pool pool({.thread_count = 2});
  tpl::channel<int> ch = tpl::make_unbounded_channel<int>();
  std::atomic<bool> ran{false};
  tpl::task<> reader = read_then_flag(ch.reader(), ran);
  std::atomic<bool> writer_saw_it{false};
  tpl::task<> writer = tpl::run(pool, [&] {
    EXPECT_TRUE(ch.writer().try_write(7));
    tpl::blocking_scope blocked("test: waits for the reader");
    writer_saw_it.store(spin_until(ran), std::memory_order_relaxed);
  });
  writer.wait();
  reader.wait();
  EXPECT_TRUE(writer_saw_it.load());
}

// Two coroutines that wake each other forever through rendezvous channels would keep a worker to
// themselves through its slot; after a budget of slot items in a row, the worker runs its other
// queued work. One worker, so nothing else could run it.
TEST(thread_pool_next_slot, a_ping_pong_pair_does_not_starve_the_workers_queue) {
  tpl::thread_pool pool({.thread_count = 1, .max_threads = 1});
  tpl::channel<int> ping = tpl::make_bounded_channel<int>(0);
  tpl::channel<int> pong = tpl::make_bounded_channel<int>(0);
  std::atomic<bool> other_ran{false};
  constexpr int kMaxRounds = 1'000'000;  // far beyond the budget: only starvation gets here
  auto player = [&](tpl::channel_reader<int> in, tpl::channel_writer<int> out, bool serve) -> tpl::task<int> {
    int rounds = 0;
    if (serve) {
      // Queued on this worker's own deque, behind the ping-pong that starts now.
      (void)tpl::run(pool, [&] { other_ran.store(true, std::memory_order_release); });
      co_await out.write_async(0);
    }
    for (;;) {
      const int v = co_await in.read_async();
      if (v < 0) co_return rounds;  // the other side stopped
      ++rounds;
      const bool stop = other_ran.load(std::memory_order_acquire) || rounds >= kMaxRounds;
      co_await out.write_async(stop ? -1 : v + 1);
      if (stop) co_return rounds;
    }
  };
  tpl::task<int> a = tpl::run(pool, [&] { return player(ping.reader(), pong.writer(), false); });
  tpl::task<int> b = tpl::run(pool, [&] { return player(pong.reader(), ping.writer(), true); });
  const int ra = a.get();
  const int rb = b.get();
  EXPECT_TRUE(other_ran.load());
  EXPECT_LT(ra, kMaxRounds);
  EXPECT_LT(rb, kMaxRounds);
}

// stats() counts a slot item among the worker's queued items.
TEST(thread_pool_next_slot, stats_count_a_slot_item_as_queued_work) {
  tpl::thread_pool pool({.thread_count = 1, .max_threads = 1});
  tpl::channel<int> ch = tpl::make_unbounded_channel<int>();
  std::atomic<bool> ran{false};
  tpl::task<> reader = read_then_flag(ch.reader(), ran);
  std::size_t queued_while_running = 0;
  tpl::run(pool, [&] {
    EXPECT_TRUE(ch.writer().try_write(1));
    queued_while_running = pool.stats().local_queue_length;
  }).wait();
  reader.wait();
  EXPECT_EQ(queued_while_running, 1u);
  EXPECT_TRUE(ran.load());
}

}  // namespace thread_pool_next_slot_test_cpp
