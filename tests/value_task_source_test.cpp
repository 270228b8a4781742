// value_task over a reusable value_task_source (tpl/value_task_source.hpp): results, faults,
// cancellation, where the continuation runs, the token check, and misuse.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"
#include "value_task_source_support.hpp"

namespace value_task_source_test_cpp {

namespace {

using tpl_test::reusable_source;

static_assert(sizeof(tpl::value_task<int>) == 2 * sizeof(void*),
              "the source kind's token lives in padding: value_task<int> stays two words");

template <class T>
tpl::task<T> await_it(tpl::value_task<T> vt) {
  co_return co_await std::move(vt);
}

}  // namespace

TEST(value_task_source, completed_before_the_await_returns_its_result_synchronously) {
  reusable_source<int> src;
  auto vt = src.start();
  EXPECT_FALSE(vt.is_completed());
  src.complete(41);
  EXPECT_TRUE(vt.is_completed());
  auto t = await_it(std::move(vt));
  ASSERT_TRUE(t.is_completed());
  EXPECT_EQ(t.get(), 41);
}

TEST(value_task_source, completion_after_the_await_resumes_the_awaiter_inside_set_result) {
  reusable_source<int> src;
  auto t = await_it(src.start());
  ASSERT_FALSE(t.is_completed());
  src.complete(7);
  EXPECT_TRUE(t.is_completed()) << "the continuation runs inline on the completing thread by default";
  EXPECT_EQ(t.get(), 7);
}

TEST(value_task_source, one_source_serves_many_operations_in_turn) {
  reusable_source<std::string> src;
  for (int i = 0; i < 100; ++i) {
    const std::uint32_t version = src.core().version();
    auto t = await_it(src.start());
    if (i % 2 == 0) {
      src.complete(std::to_string(i));
    } else {
      ASSERT_FALSE(t.is_completed());
      src.complete(std::to_string(i));
    }
    ASSERT_EQ(t.get(), std::to_string(i));
    EXPECT_EQ(src.core().version(), version + 1) << "get_result reset the core: the next operation";
  }
}

TEST(value_task_source, continuations_run_asynchronously_when_asked) {
  for (const bool asynchronously : {false, true}) {
    auto report = tpl::testing::for_each_seed(20, [asynchronously](tpl::testing::deterministic_scheduler& s) {
      reusable_source<int> src(asynchronously);
      bool resumed = false;
      auto awaiter = s.start([&]() -> tpl::task<> {
        (void)co_await src.start();
        resumed = true;
      });
      s.run_until_idle();  // the awaiter is suspended on the source now
      if (awaiter.is_completed()) return false;
      bool resumed_inside_set_result = false;
      auto completer = s.start([&]() -> tpl::task<> {
        src.complete(1);
        resumed_inside_set_result = resumed;
        co_return;
      });
      s.run_until_idle();
      return completer.is_completed() && awaiter.is_completed() && resumed &&
             resumed_inside_set_result == !asynchronously;
    });
    EXPECT_TRUE(report.ok) << "asynchronously=" << asynchronously << ": " << report.message;
  }
}

TEST(value_task_source, asynchronous_continuations_leave_the_completing_thread) {
  reusable_source<int> src(true);
  auto t = [&]() -> tpl::task<std::thread::id> {
    (void)co_await src.start();
    co_return std::this_thread::get_id();
  }();
  ASSERT_FALSE(t.is_completed());  // suspended on the source, registered from this thread
  src.complete(1);
  EXPECT_NE(t.get(), std::this_thread::get_id()) << "queued to the pool, not resumed inside set_result";
}

TEST(value_task_source, an_exception_reaches_the_awaiter_and_faults_the_operation) {
  reusable_source<int> src;
  auto vt = src.start();
  src.fail(std::make_exception_ptr(std::runtime_error("boom")));
  EXPECT_EQ(src.core().get_status(src.core().version()), tpl::task_status::faulted);
  auto t = await_it(std::move(vt));
  EXPECT_TRUE(t.is_faulted());
  EXPECT_THROW(tpl::sync_wait(t), std::runtime_error);
}

TEST(value_task_source, operation_canceled_makes_the_operation_canceled) {
  reusable_source<int> src;
  auto t = await_it(src.start());
  src.fail(std::make_exception_ptr(tpl::operation_canceled()));
  EXPECT_TRUE(t.is_canceled());
  EXPECT_THROW(tpl::sync_wait(t), tpl::operation_canceled);
}

TEST(value_task_source, void_operations) {
  reusable_source<void> src;
  for (int i = 0; i < 3; ++i) {
    auto t = await_it(src.start());
    EXPECT_FALSE(t.is_completed());
    src.complete();
    EXPECT_TRUE(t.is_completed_successfully());
  }
}

TEST(value_task_source, a_stale_value_task_throws_instead_of_returning_the_next_result) {
  reusable_source<int> src;
  auto stale = src.start();
  src.complete(1);
  src.core().get_result(src.core().version());  // the owner ends operation 0 itself...
  src.core().reset();                          // ...and starts operation 1
  src.complete(2);
  EXPECT_THROW(stale.is_completed(), tpl::invalid_operation);
  auto t = await_it(std::move(stale));
  EXPECT_THROW(tpl::sync_wait(t), tpl::invalid_operation);
  EXPECT_EQ(tpl::sync_wait(await_it(src.start())), 2) << "operation 1's result is still there";
}

TEST(value_task_source, awaiting_one_operation_twice_throws) {
  reusable_source<int> src;
  tpl::value_task<int> first(src, src.core().version());
  tpl::value_task<int> second(src, src.core().version());
  src.complete(5);
  EXPECT_EQ(tpl::sync_wait(await_it(std::move(first))), 5);
  EXPECT_THROW(tpl::sync_wait(await_it(std::move(second))), tpl::invalid_operation);
}

TEST(value_task_source, a_second_continuation_for_one_operation_throws) {
  reusable_source<int> src;
  tpl::value_task<int> first(src, src.core().version());
  tpl::value_task<int> second(src, src.core().version());
  auto a = await_it(std::move(first));
  auto b = await_it(std::move(second));
  ASSERT_FALSE(a.is_completed());
  ASSERT_TRUE(b.is_completed());
  EXPECT_THROW(tpl::sync_wait(b), tpl::invalid_operation);
  src.complete(3);
  EXPECT_EQ(tpl::sync_wait(a), 3) << "the first awaiter is unaffected";
}

TEST(value_task_source, a_value_task_object_is_awaited_once) {
  reusable_source<int> src;
  auto vt = src.start();
  src.complete(9);
  auto twice = [&]() -> tpl::task<int> {
    int a = co_await vt;
    int b = co_await vt;  // the same object again
    co_return a + b;
  };
  EXPECT_THROW(tpl::sync_wait(twice()), tpl::invalid_operation);
}

TEST(value_task_source, misuse_of_the_core_is_reported) {
  tpl::manual_reset_value_task_source_core<int> core;
  EXPECT_THROW(core.get_result(core.version()), tpl::invalid_operation) << "not completed";
  EXPECT_THROW(core.get_status(core.version() + 1), tpl::invalid_operation) << "stale token";
  EXPECT_THROW(core.set_exception(nullptr), tpl::invalid_operation);
  core.set_result(1);
  EXPECT_THROW(core.set_result(2), tpl::invalid_operation) << "completed twice";
  EXPECT_THROW(core.set_exception(std::make_exception_ptr(std::runtime_error("x"))), tpl::invalid_operation);
  EXPECT_EQ(core.get_result(core.version()), 1) << "the first result stands";
  EXPECT_THROW(core.get_result(core.version()), tpl::invalid_operation) << "taken twice";
  core.reset();
  EXPECT_EQ(core.get_status(core.version()), tpl::task_status::running);
}

TEST(value_task_source, reset_with_an_awaiter_waiting_throws_and_keeps_the_awaiter) {
  reusable_source<int> src;
  auto t = await_it(src.start());
  EXPECT_THROW(src.core().reset(), tpl::invalid_operation);
  src.complete(4);
  EXPECT_EQ(tpl::sync_wait(t), 4);
}

TEST(value_task_source, get_and_as_task_work_on_a_source_backed_value_task) {
  reusable_source<int> src;
  auto done = src.start();
  src.complete(1);
  EXPECT_EQ(done.get(), 1);

  auto pending = src.start();
  tpl::task<int> t = std::move(pending).as_task();
  EXPECT_FALSE(t.is_completed());
  src.complete(2);
  EXPECT_EQ(t.get(), 2);

  auto blocking = src.start();
  std::thread completer([&] { src.complete(3); });  // before or while get() blocks: either way
  EXPECT_EQ(blocking.get(), 3);
  completer.join();
}

// on_abandoned: called once, with the operation's token, for a value_task destroyed (or assigned
// over) without having been awaited or converted; never for one that was awaited, converted with
// as_task(), blocked on with get(), or moved from. The default does nothing.
class abandon_counting_source final : public tpl::value_task_source<int> {
 public:
  tpl::value_task<int> start() { return tpl::value_task<int>(*this, core_.version()); }
  void complete(int v) { core_.set_result(v); }
  tpl::task_status get_status(std::uint32_t token) const override { return core_.get_status(token); }
  bool on_completed(std::coroutine_handle<> h, std::uint32_t token) override { return core_.on_completed(h, token); }
  int get_result(std::uint32_t token) override {
    const int v = core_.get_result(token);
    core_.reset();
    return v;
  }
  void on_abandoned(std::uint32_t token) noexcept override {
    ++abandoned;
    last_token = token;
    core_.reset();  // nobody awaits it: recycle (this test completes nothing it abandons)
  }
  int abandoned = 0;
  std::uint32_t last_token = 0;
  std::uint32_t version() const noexcept { return core_.version(); }

 private:
  tpl::manual_reset_value_task_source_core<int> core_;
};

TEST(value_task_source, a_value_task_destroyed_unawaited_tells_its_source_once) {
  abandon_counting_source src;
  const std::uint32_t first = src.version();
  { auto dropped = src.start(); }
  EXPECT_EQ(src.abandoned, 1);
  EXPECT_EQ(src.last_token, first);

  auto over = src.start();
  const std::uint32_t second = src.version();
  over = tpl::value_task<int>(5);  // assigning over an unawaited one abandons it too
  EXPECT_EQ(src.abandoned, 2);
  EXPECT_EQ(src.last_token, second);
  EXPECT_EQ(tpl::sync_wait(std::move(over)), 5);

  {
    auto moved = src.start();
    auto target = std::move(moved);  // the moved-from one is not abandoned; the target is, once
    EXPECT_EQ(src.abandoned, 2);
  }
  EXPECT_EQ(src.abandoned, 3);

  auto awaited = src.start();
  src.complete(1);
  EXPECT_EQ(tpl::sync_wait(std::move(awaited)), 1);
  auto converted = src.start();
  tpl::task<int> t = std::move(converted).as_task();
  src.complete(2);
  EXPECT_EQ(t.get(), 2);
  auto blocked = src.start();
  src.complete(3);
  EXPECT_EQ(blocked.get(), 3);
  EXPECT_EQ(src.abandoned, 3);

  reusable_source<int> plain;  // the default on_abandoned: nothing happens, the owner resets
  { auto dropped = plain.start(); }
  plain.core().reset();
  auto next = plain.start();
  plain.complete(4);
  EXPECT_EQ(tpl::sync_wait(std::move(next)), 4);
}

TEST(value_task_source, completion_racing_the_await_across_threads_delivers_every_result_once) {
  const int ops = tpl_test::scaled(20000, 2000);
  for (const bool asynchronously : {false, true}) {
    reusable_source<int> src(asynchronously);
    std::atomic<int> started{-1};  // the operation the consumer has made a value_task for
    auto consumer = tpl::run([&]() -> tpl::task<long> {
      long sum = 0;
      for (int i = 0; i < ops; ++i) {
        auto vt = src.start();
        // release: the producer completes operation i only after this value_task exists.
        started.store(i, std::memory_order_release);
        sum += co_await std::move(vt);
      }
      co_return sum;
    });
    std::thread producer([&] {
      for (int i = 0; i < ops; ++i) {
        // acquire: pairs with the consumer's release, so the reset that began operation i is seen.
        while (started.load(std::memory_order_acquire) < i) std::this_thread::yield();
        src.complete(i);
      }
    });
    producer.join();
    EXPECT_EQ(consumer.get(), static_cast<long>(ops) * (ops - 1) / 2) << "asynchronously=" << asynchronously;
  }
}

}  // namespace value_task_source_test_cpp
