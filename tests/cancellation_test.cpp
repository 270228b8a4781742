// Cancellation: cancellation_token_source, cancellation_token, cancellation_registration, linked
// sources, when_cancelled(token) and co_await token.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <optional>
#include <span>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <tpl/testing/wait_queues.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace cancellation_test_cpp {

namespace {

using tpl_test::holds;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::thrown_by;

static_assert(!std::is_copy_constructible_v<tpl::cancellation_token_source>);
static_assert(std::is_nothrow_move_constructible_v<tpl::cancellation_token_source>);
static_assert(!std::is_copy_constructible_v<tpl::cancellation_registration>);
static_assert(std::is_nothrow_move_constructible_v<tpl::cancellation_registration>);
static_assert(std::is_nothrow_copy_constructible_v<tpl::cancellation_token>);

/// Bounded busy work that gives another thread a chance to run (no sleeping, no clock).
void let_others_run(int rounds) {
  for (int i = 0; i < rounds; ++i) std::this_thread::yield();
}

void spin_until(const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
}

// ---- coroutines used by the tests -------------------------------------------------------------

tpl::task<> set_after_awaiting_token(tpl::cancellation_token token, std::atomic<bool>& resumed) {
  co_await token;
  resumed.store(true, std::memory_order_release);
}

tpl::task<std::thread::id> thread_after_awaiting_token(tpl::cancellation_token token) {
  co_await token;
  co_return std::this_thread::get_id();
}

/// Awaits a when_cancelled() temporary: the task handle dies inside the resumption, on the
/// canceling thread, while the callback that completed it is still on the stack.
tpl::task<int> awaits_when_cancelled_temporary(tpl::cancellation_token token) {
  co_await tpl::when_cancelled(token);
  co_return 1;
}

}  // namespace

// ---- registering and canceling ----------------------------------------------------------------

TEST(cancellation, callback_registered_on_a_live_token_does_not_run_before_cancel) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  auto reg = cts.token().register_callback([&runs] { ++runs; });
  EXPECT_TRUE(reg.active());
  EXPECT_EQ(runs, 0);
  cts.cancel();
  EXPECT_EQ(runs, 1);
}

TEST(cancellation, cancel_runs_callbacks_on_the_canceling_thread) {
  tpl::cancellation_token_source cts;
  std::vector<std::thread::id> ran_on(3);
  std::vector<tpl::cancellation_registration> regs;
  for (std::size_t i = 0; i < ran_on.size(); ++i)
    regs.push_back(cts.token().register_callback([&ran_on, i] { ran_on[i] = std::this_thread::get_id(); }));

  std::thread canceler([&cts] { cts.cancel(); });
  const std::thread::id canceler_id = canceler.get_id();
  canceler.join();

  for (const std::thread::id& id : ran_on) EXPECT_EQ(id, canceler_id);
}

TEST(cancellation, cancel_runs_callbacks_in_reverse_registration_order) {
  tpl::cancellation_token_source cts;
  std::vector<int> order;
  std::vector<tpl::cancellation_registration> regs;
  for (int i = 0; i < 5; ++i) regs.push_back(cts.token().register_callback([&order, i] { order.push_back(i); }));
  cts.cancel();
  EXPECT_EQ(order, (std::vector<int>{4, 3, 2, 1, 0}));
}

TEST(cancellation, second_cancel_does_nothing) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  auto reg = cts.token().register_callback([&runs] { ++runs; });
  cts.cancel();
  cts.cancel();
  cts.cancel(true);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancellation, second_cancel_on_another_thread_returns_without_waiting_for_running_callbacks) {
  // If the second cancel() waited for the first one's callbacks, this would hang: child process.
  tpl_test::expect_passes_in_a_child_process([] {
    tpl::cancellation_token_source cts;
    std::atomic<bool> started{false};
    std::atomic<bool> release{false};
    auto reg = cts.token().register_callback([&] {
      started.store(true, std::memory_order_release);
      spin_until(release);
    });
    std::thread first([&cts] { cts.cancel(); });
    spin_until(started);
    cts.cancel();  // returns while the callback is still blocked on the first thread
    const bool requested = cts.is_cancellation_requested();
    release.store(true, std::memory_order_release);
    first.join();
    return tpl_test::check(requested, "canceled while the first cancel() runs its callbacks");
  });
}

TEST(cancellation, is_cancellation_requested_becomes_true_on_token_and_source) {
  tpl::cancellation_token_source cts;
  tpl::cancellation_token token = cts.token();
  EXPECT_FALSE(cts.is_cancellation_requested());
  EXPECT_FALSE(token.is_cancellation_requested());
  EXPECT_TRUE(token.can_be_canceled());
  cts.cancel();
  EXPECT_TRUE(cts.is_cancellation_requested());
  EXPECT_TRUE(token.is_cancellation_requested());
  EXPECT_TRUE(cts.token().is_cancellation_requested());
}

TEST(cancellation, is_cancellation_requested_is_true_inside_the_callbacks) {
  tpl::cancellation_token_source cts;
  tpl::cancellation_token token = cts.token();
  bool seen = false;
  auto reg = token.register_callback([&] { seen = token.is_cancellation_requested(); });
  cts.cancel();
  EXPECT_TRUE(seen);
}

TEST(cancellation, throw_if_cancellation_requested_throws_operation_canceled_only_after_cancel) {
  tpl::cancellation_token_source cts;
  tpl::cancellation_token token = cts.token();
  EXPECT_NO_THROW(token.throw_if_cancellation_requested());
  cts.cancel();
  EXPECT_THROW(token.throw_if_cancellation_requested(), tpl::operation_canceled);
}

TEST(cancellation, tokens_of_one_source_compare_equal_and_of_different_sources_unequal) {
  tpl::cancellation_token_source a;
  tpl::cancellation_token_source b;
  EXPECT_TRUE(a.token() == a.token());
  EXPECT_FALSE(a.token() == b.token());
  EXPECT_FALSE(a.token() == tpl::cancellation_token::none());
}

TEST(cancellation, register_on_a_canceled_token_runs_the_callback_synchronously_on_this_thread) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  std::thread::id ran_on;
  int runs = 0;
  auto reg = cts.token().register_callback([&] {
    ++runs;
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(reg.active());
}

TEST(cancellation, register_on_a_canceled_token_propagates_the_callback_exception) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  std::exception_ptr e = thrown_by([&] { auto reg = cts.token().register_callback([] { throw test_error(7); }); });
  EXPECT_EQ(test_error_id(e), 7);
}

TEST(cancellation, register_from_inside_a_running_callback_runs_the_new_callback_at_once) {
  tpl::cancellation_token_source cts;
  tpl::cancellation_token token = cts.token();
  std::vector<int> order;
  tpl::cancellation_registration inner;
  auto outer = token.register_callback([&] {
    order.push_back(1);
    inner = token.register_callback([&order] { order.push_back(2); });
    order.push_back(3);
  });
  cts.cancel();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(inner.active());
}

TEST(cancellation, callback_may_cancel_its_own_source_again_without_effect) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  auto reg = cts.token().register_callback([&] {
    ++runs;
    cts.cancel();
  });
  cts.cancel();
  EXPECT_EQ(runs, 1);
}

// ---- the exception hierarchy ------------------------------------------------------------------

// As .NET: OperationCanceledException and TimeoutException are SystemExceptions (run-time
// conditions: std::runtime_error here); ChannelClosedException, LockRecursionException's and
// SynchronizationLockException's tpl counterparts are InvalidOperationExceptions (misuse:
// std::logic_error); AggregateException derives from Exception directly.
TEST(cancellation, operation_canceled_is_a_runtime_error_and_the_hierarchy_follows_dotnet) {
  static_assert(std::is_base_of_v<std::runtime_error, tpl::operation_canceled>);
  static_assert(std::is_nothrow_default_constructible_v<tpl::operation_canceled>);
  static_assert(std::is_base_of_v<std::runtime_error, tpl::timeout_exception>);
  static_assert(std::is_base_of_v<std::runtime_error, tpl::barrier_post_phase_error>);
  static_assert(std::is_base_of_v<std::logic_error, tpl::invalid_operation>);
  static_assert(std::is_base_of_v<tpl::invalid_operation, tpl::channel_closed>);
  static_assert(std::is_base_of_v<tpl::invalid_operation, tpl::lock_recursion_error>);
  static_assert(std::is_base_of_v<tpl::invalid_operation, tpl::synchronization_lock_error>);
  static_assert(std::is_base_of_v<std::exception, tpl::aggregate_exception>);
  static_assert(!std::is_base_of_v<std::runtime_error, tpl::aggregate_exception>);

  EXPECT_STREQ(tpl::operation_canceled().what(), "The operation was canceled.");
  EXPECT_STREQ(tpl::operation_canceled("stopped by the user").what(), "stopped by the user");

  // What a porter's catch by base class sees: a canceled wait reaches a std::runtime_error handler.
  tpl::cancellation_token_source cts;
  cts.cancel();
  try {
    cts.token().throw_if_cancellation_requested();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(dynamic_cast<const tpl::operation_canceled*>(&e), nullptr);
  }
  tpl::task<int> canceled = tpl::task_from_canceled<int>();
  EXPECT_THROW((void)tpl::sync_wait(canceled), std::runtime_error);
}

// ---- the token that is never canceled ---------------------------------------------------------

TEST(cancellation, none_and_default_token_cannot_be_canceled) {
  for (const tpl::cancellation_token& token : {tpl::cancellation_token::none(), tpl::cancellation_token()}) {
    EXPECT_FALSE(token.can_be_canceled());
    EXPECT_FALSE(token.is_cancellation_requested());
    EXPECT_NO_THROW(token.throw_if_cancellation_requested());
  }
  EXPECT_TRUE(tpl::cancellation_token::none() == tpl::cancellation_token());
}

TEST(cancellation, register_on_none_does_nothing_and_returns_an_inactive_registration) {
  int runs = 0;
  auto reg = tpl::cancellation_token::none().register_callback([&runs] { ++runs; });
  EXPECT_FALSE(reg.active());
  reg.reset();
  EXPECT_EQ(runs, 0);
}

TEST(cancellation, when_cancelled_on_none_throws_invalid_argument) {
  EXPECT_THROW((void)tpl::when_cancelled(tpl::cancellation_token::none()), std::invalid_argument);
  EXPECT_THROW((void)tpl::when_cancelled(tpl::cancellation_token()), std::invalid_argument);
}

// ---- registrations ----------------------------------------------------------------------------

TEST(cancellation, reset_before_cancel_keeps_the_callback_from_running) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  auto reg = cts.token().register_callback([&runs] { ++runs; });
  reg.reset();
  EXPECT_FALSE(reg.active());
  cts.cancel();
  EXPECT_EQ(runs, 0);
}

TEST(cancellation, destroying_the_registration_before_cancel_keeps_the_callback_from_running) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  { auto reg = cts.token().register_callback([&runs] { ++runs; }); }
  cts.cancel();
  EXPECT_EQ(runs, 0);
}

TEST(cancellation, unregistering_one_callback_leaves_the_others_registered) {
  tpl::cancellation_token_source cts;
  std::vector<int> order;
  auto r0 = cts.token().register_callback([&order] { order.push_back(0); });
  auto r1 = cts.token().register_callback([&order] { order.push_back(1); });
  auto r2 = cts.token().register_callback([&order] { order.push_back(2); });
  r1.reset();
  cts.cancel();
  EXPECT_EQ(order, (std::vector<int>{2, 0}));
}

TEST(cancellation, reset_is_idempotent) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  auto reg = cts.token().register_callback([&runs] { ++runs; });
  reg.reset();
  reg.reset();
  cts.cancel();
  reg.reset();
  EXPECT_EQ(runs, 0);
  EXPECT_FALSE(reg.active());
}

TEST(cancellation, reset_after_cancel_is_harmless) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  auto reg = cts.token().register_callback([&runs] { ++runs; });
  cts.cancel();
  EXPECT_TRUE(reg.active());  // still holds its (spent) registration
  reg.reset();
  EXPECT_FALSE(reg.active());
  EXPECT_EQ(runs, 1);
}

TEST(cancellation, default_registration_is_inactive_and_reset_does_nothing) {
  tpl::cancellation_registration reg;
  EXPECT_FALSE(reg.active());
  reg.reset();
  EXPECT_FALSE(reg.active());
}

TEST(cancellation, moved_registration_keeps_the_callback_and_the_moved_from_one_is_inactive) {
  tpl::cancellation_token_source cts;
  int runs = 0;
  auto a = cts.token().register_callback([&runs] { ++runs; });
  tpl::cancellation_registration b(std::move(a));
  EXPECT_FALSE(a.active());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_TRUE(b.active());
  a.reset();  // must not unregister b's callback
  cts.cancel();
  EXPECT_EQ(runs, 1);
}

TEST(cancellation, move_assigning_over_an_active_registration_unregisters_the_old_callback) {
  tpl::cancellation_token_source cts;
  int old_runs = 0;
  int new_runs = 0;
  auto reg = cts.token().register_callback([&old_runs] { ++old_runs; });
  reg = cts.token().register_callback([&new_runs] { ++new_runs; });
  EXPECT_TRUE(reg.active());
  cts.cancel();
  EXPECT_EQ(old_runs, 0);
  EXPECT_EQ(new_runs, 1);
}

TEST(cancellation, registration_outlives_its_source_and_token) {
  int runs = 0;
  tpl::cancellation_registration reg;
  {
    tpl::cancellation_token_source cts;
    reg = cts.token().register_callback([&runs] { ++runs; });
  }
  EXPECT_TRUE(reg.active());
  reg.reset();  // the registration kept the shared state alive; under ASan: no use after free
  EXPECT_EQ(runs, 0);
}

TEST(cancellation, token_outlives_its_source_and_keeps_its_state) {
  tpl::cancellation_token canceled;
  tpl::cancellation_token live;
  {
    tpl::cancellation_token_source a;
    tpl::cancellation_token_source b;
    canceled = a.token();
    live = b.token();
    a.cancel();
  }
  EXPECT_TRUE(canceled.is_cancellation_requested());
  EXPECT_FALSE(live.is_cancellation_requested());
  EXPECT_TRUE(live.can_be_canceled());
}

// ---- exceptions from callbacks ----------------------------------------------------------------

TEST(cancellation, cancel_runs_every_callback_then_throws_their_exceptions_in_run_order) {
  tpl::cancellation_token_source cts;
  std::vector<int> ran;
  std::vector<tpl::cancellation_registration> regs;
  for (int i = 0; i < 5; ++i) {
    regs.push_back(cts.token().register_callback([&ran, i] {
      ran.push_back(i);
      if (i % 2 == 0) throw test_error(i);
    }));
  }

  std::vector<int> ids;
  try {
    cts.cancel();
    ADD_FAILURE() << "cancel() did not throw";
  } catch (const tpl::aggregate_exception& e) {
    for (const std::exception_ptr& inner : e.inner_exceptions()) ids.push_back(test_error_id(inner));
  }
  EXPECT_EQ(ran, (std::vector<int>{4, 3, 2, 1, 0}));
  EXPECT_EQ(ids, (std::vector<int>{4, 2, 0}));
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancellation, cancel_with_one_throwing_callback_still_throws_aggregate_exception) {
  tpl::cancellation_token_source cts;
  auto reg = cts.token().register_callback([] { throw test_error(1); });
  try {
    cts.cancel();
    ADD_FAILURE() << "cancel() did not throw";
  } catch (const tpl::aggregate_exception& e) {
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(test_error_id(e.inner_exceptions()[0]), 1);
  }
}

TEST(cancellation, cancel_throw_on_first_exception_rethrows_it_and_skips_the_rest) {
  tpl::cancellation_token_source cts;
  std::vector<int> ran;
  auto r0 = cts.token().register_callback([&ran] { ran.push_back(0); });
  auto r1 = cts.token().register_callback([&ran] {
    ran.push_back(1);
    throw test_error(1);
  });
  auto r2 = cts.token().register_callback([&ran] {
    ran.push_back(2);
    throw test_error(2);
  });
  auto r3 = cts.token().register_callback([&ran] { ran.push_back(3); });

  std::exception_ptr e = thrown_by([&] { cts.cancel(true); });
  EXPECT_EQ(test_error_id(e), 2);  // the exception itself, not an aggregate_exception
  EXPECT_EQ(ran, (std::vector<int>{3, 2}));
  EXPECT_TRUE(cts.is_cancellation_requested());

  cts.cancel();  // the skipped callbacks are gone: a second cancel runs nothing
  EXPECT_EQ(ran, (std::vector<int>{3, 2}));
  r0.reset();  // resetting a skipped registration is safe
  r1.reset();
}

TEST(cancellation, cancel_false_behaves_like_cancel) {
  tpl::cancellation_token_source cts;
  std::vector<int> ran;
  auto r0 = cts.token().register_callback([&ran] {
    ran.push_back(0);
    throw test_error(0);
  });
  auto r1 = cts.token().register_callback([&ran] {
    ran.push_back(1);
    throw test_error(1);
  });
  std::exception_ptr e = thrown_by([&] { cts.cancel(false); });
  EXPECT_TRUE(holds<tpl::aggregate_exception>(e));
  EXPECT_EQ(ran, (std::vector<int>{1, 0}));
}

// ---- unregistering while the callback runs ----------------------------------------------------

TEST(cancellation, callback_can_reset_its_own_registration_without_deadlock) {
  // A deadlock would hang the whole run, so the scenario runs in a child process.
  tpl_test::expect_passes_in_a_child_process([] {
    struct context {
      tpl::cancellation_registration reg;
      bool reset_returned = false;
      bool active_after_reset = true;
    };
    tpl::cancellation_token_source cts;
    context ctx;
    ctx.reg = cts.token().register_callback([c = &ctx] {
      // reset() destroys this very callback object: copy the capture first, and touch none of
      // the lambda's members afterwards.
      context* self = c;
      self->reg.reset();
      self->active_after_reset = self->reg.active();
      self->reset_returned = true;
    });
    cts.cancel();
    bool ok = tpl_test::check(ctx.reset_returned, "reset() returned inside the callback");
    ok &= tpl_test::check(!ctx.active_after_reset, "the registration is inactive after reset()");
    return ok;
  });
}

TEST(cancellation, callback_can_reset_another_pending_registration_which_then_does_not_run) {
  tpl::cancellation_token_source cts;
  std::vector<int> ran;
  auto older = cts.token().register_callback([&ran] { ran.push_back(0); });
  auto newer = cts.token().register_callback([&] {
    ran.push_back(1);
    older.reset();
  });
  cts.cancel();
  EXPECT_EQ(ran, (std::vector<int>{1}));
}

TEST(cancellation, reset_from_another_thread_waits_for_the_running_callback) {
  const int rounds = tpl_test::scaled(200, 40);
  for (int r = 0; r < rounds; ++r) {
    tpl::cancellation_token_source cts;
    std::atomic<bool> started{false};
    std::atomic<bool> about_to_reset{false};
    std::atomic<bool> finished{false};
    const tpl::cancellation_token token = cts.token();
    auto reg = token.register_callback([&] {
      started.store(true, std::memory_order_release);
      spin_until(about_to_reset);
      // Even rounds: return only once reset() is waiting for this callback, the window the test
      // is about. Odd rounds: return after a few yields, racing reset()'s arrival (it may find the
      // callback still running and wait, or find it finished).
      if (r % 2 == 0) {
        (void)tpl_test::wait_until(
            [&] { return tpl::testing::threads_waiting_for_running_callback(token) == 1; },
            "reset() waits for the running callback");
      } else {
        let_others_run(r % 8);
      }
      finished.store(true, std::memory_order_release);
    });

    std::thread canceler([&cts] { cts.cancel(); });
    spin_until(started);
    about_to_reset.store(true, std::memory_order_release);
    reg.reset();
    EXPECT_TRUE(finished.load(std::memory_order_acquire)) << "reset() returned while the callback ran (round " << r
                                                          << ")";
    canceler.join();
  }
}

TEST(cancellation, destroying_the_registration_from_another_thread_waits_for_the_running_callback) {
  tpl::cancellation_token_source cts;
  std::atomic<bool> started{false};
  std::atomic<bool> about_to_destroy{false};
  std::atomic<bool> finished{false};
  const tpl::cancellation_token token = cts.token();
  std::optional<tpl::cancellation_registration> reg(token.register_callback([&] {
    started.store(true, std::memory_order_release);
    spin_until(about_to_destroy);
    // Return only once the destructor is waiting for this callback (the window the test is about).
    (void)tpl_test::wait_until([&] { return tpl::testing::threads_waiting_for_running_callback(token) == 1; },
                               "the registration's destructor waits for the running callback");
    finished.store(true, std::memory_order_release);
  }));

  std::thread canceler([&cts] { cts.cancel(); });
  spin_until(started);
  about_to_destroy.store(true, std::memory_order_release);
  reg.reset();  // std::optional::reset: runs ~cancellation_registration
  EXPECT_TRUE(finished.load(std::memory_order_acquire));
  canceler.join();
}

TEST(cancellation, concurrent_cancel_register_and_reset_run_each_callback_at_most_once) {
  constexpr int kWorkers = 3;
  constexpr int kPerWorker = 8;
  const int rounds = tpl_test::scaled(2000, 200);

  struct slot {
    std::atomic<int> runs{0};
    std::atomic<bool> finished{false};
    std::atomic<bool> reset_returned{false};
  };
  struct violations {
    std::atomic<int> ran_twice{0};
    std::atomic<int> ran_after_reset_returned{0};
    std::atomic<int> still_running_after_reset{0};
    std::atomic<int> inactive_but_not_run{0};
    std::atomic<int> kept_but_not_run_once{0};
    std::atomic<int> late_registration_not_synchronous{0};
  } bad;

  tpl_test::barrier sync(kWorkers + 1);
  tpl::cancellation_token_source source;
  tpl::cancellation_token token;
  std::atomic<int> registered{0};  // this round's register_callback calls that returned

  auto worker = [&](int w) {
    for (int r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();  // A: this round's token is ready
      const tpl::cancellation_token tok = token;
      std::array<slot, kPerWorker> slots;
      {
        std::array<tpl::cancellation_registration, kPerWorker> regs;
        for (int k = 0; k < kPerWorker; ++k) {
          slot& s = slots[k];
          regs[k] = tok.register_callback([&s, &bad] {
            if (s.reset_returned.load(std::memory_order_acquire)) bad.ran_after_reset_returned.fetch_add(1);
            if (s.runs.fetch_add(1, std::memory_order_acq_rel) != 0) bad.ran_twice.fetch_add(1);
            s.finished.store(true, std::memory_order_release);
          });
          registered.fetch_add(1, std::memory_order_release);
          if (!regs[k].active() && s.runs.load(std::memory_order_acquire) != 1) bad.inactive_but_not_run.fetch_add(1);
          if ((k + w + r) % 2 == 1) {  // reset half of them while cancel() may be running
            regs[k].reset();
            s.reset_returned.store(true, std::memory_order_release);
            if (s.runs.load(std::memory_order_acquire) != 0 && !s.finished.load(std::memory_order_acquire))
              bad.still_running_after_reset.fetch_add(1);
          }
        }
        sync.arrive_and_wait();  // B: cancel() has returned
        for (int k = 0; k < kPerWorker; ++k) {
          const int runs = slots[k].runs.load(std::memory_order_acquire);
          if ((k + w + r) % 2 == 0 && runs != 1) bad.kept_but_not_run_once.fetch_add(1);
          if (runs > 1) bad.ran_twice.fetch_add(1);
        }
      }  // the kept registrations are destroyed after cancel: a no-op
      sync.arrive_and_wait();  // C: the source may be replaced
    }
  };

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back(worker, w);
  for (int r = 0; r < rounds; ++r) {
    source = tpl::cancellation_token_source();
    token = source.token();
    registered.store(0, std::memory_order_relaxed);
    sync.arrive_and_wait();  // A
    // Cancel after a different number of registrations each round, so that cancel() meets the
    // workers at every point of their register / reset sequences.
    const int cancel_after_registrations = r % (kWorkers * kPerWorker);
    while (registered.load(std::memory_order_acquire) < cancel_after_registrations) std::this_thread::yield();
    source.cancel();
    int late_runs = 0;
    auto late = token.register_callback([&late_runs] { ++late_runs; });
    if (late.active() || late_runs != 1) bad.late_registration_not_synchronous.fetch_add(1);
    sync.arrive_and_wait();  // B
    sync.arrive_and_wait();  // C
  }
  for (std::thread& t : workers) t.join();

  EXPECT_EQ(bad.ran_twice.load(), 0);
  EXPECT_EQ(bad.ran_after_reset_returned.load(), 0);
  EXPECT_EQ(bad.still_running_after_reset.load(), 0);
  EXPECT_EQ(bad.inactive_but_not_run.load(), 0);
  EXPECT_EQ(bad.kept_but_not_run_once.load(), 0);
  EXPECT_EQ(bad.late_registration_not_synchronous.load(), 0);
}

// ---- try_reset --------------------------------------------------------------------------------

TEST(cancellation, try_reset_succeeds_on_a_source_that_was_not_canceled) {
  tpl::cancellation_token_source cts;
  EXPECT_TRUE(cts.try_reset());
  EXPECT_FALSE(cts.is_cancellation_requested());
}

TEST(cancellation, try_reset_drops_existing_registrations) {
  tpl::cancellation_token_source cts;
  int old_runs = 0;
  auto old_reg = cts.token().register_callback([&old_runs] { ++old_runs; });
  ASSERT_TRUE(cts.try_reset());
  cts.cancel();
  EXPECT_EQ(old_runs, 0);
  old_reg.reset();  // a dropped registration can still be reset safely
}

TEST(cancellation, registrations_made_after_try_reset_run_on_cancel) {
  tpl::cancellation_token_source cts;
  tpl::cancellation_token token = cts.token();
  ASSERT_TRUE(cts.try_reset());
  int runs = 0;
  auto reg = token.register_callback([&runs] { ++runs; });  // a token taken before the reset
  cts.cancel();
  EXPECT_EQ(runs, 1);
}

TEST(cancellation, try_reset_fails_after_cancel_and_the_source_stays_canceled) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  EXPECT_FALSE(cts.try_reset());
  EXPECT_TRUE(cts.is_cancellation_requested());
  EXPECT_TRUE(cts.token().is_cancellation_requested());
}

// ---- linked sources ---------------------------------------------------------------------------

TEST(cancellation, linked_source_is_canceled_when_its_first_parent_is) {
  tpl::cancellation_token_source a;
  tpl::cancellation_token_source b;
  auto linked = tpl::cancellation_token_source::create_linked(a.token(), b.token());
  EXPECT_FALSE(linked.is_cancellation_requested());
  a.cancel();
  EXPECT_TRUE(linked.is_cancellation_requested());
  EXPECT_FALSE(b.is_cancellation_requested());
}

TEST(cancellation, linked_source_is_canceled_when_its_second_parent_is) {
  tpl::cancellation_token_source a;
  tpl::cancellation_token_source b;
  auto linked = tpl::cancellation_token_source::create_linked(a.token(), b.token());
  b.cancel();
  EXPECT_TRUE(linked.is_cancellation_requested());
  EXPECT_FALSE(a.is_cancellation_requested());
}

TEST(cancellation, canceling_a_linked_source_does_not_cancel_its_parents) {
  tpl::cancellation_token_source a;
  tpl::cancellation_token_source b;
  auto linked = tpl::cancellation_token_source::create_linked(a.token(), b.token());
  linked.cancel();
  EXPECT_TRUE(linked.is_cancellation_requested());
  EXPECT_FALSE(a.is_cancellation_requested());
  EXPECT_FALSE(b.is_cancellation_requested());
}

TEST(cancellation, linked_token_callbacks_run_on_the_parents_canceling_thread) {
  tpl::cancellation_token_source parent;
  auto linked = tpl::cancellation_token_source::create_linked(parent.token());
  std::thread::id ran_on;
  auto reg = linked.token().register_callback([&ran_on] { ran_on = std::this_thread::get_id(); });
  std::thread canceler([&parent] { parent.cancel(); });
  const std::thread::id canceler_id = canceler.get_id();
  canceler.join();
  EXPECT_EQ(ran_on, canceler_id);
}

TEST(cancellation, linked_callback_exception_reaches_the_parents_cancel_nested_in_its_aggregate) {
  tpl::cancellation_token_source parent;
  auto linked = tpl::cancellation_token_source::create_linked(parent.token());
  auto reg = linked.token().register_callback([] { throw test_error(3); });
  std::vector<int> inner_ids;
  try {
    parent.cancel();
    ADD_FAILURE() << "cancel() did not throw";
  } catch (const tpl::aggregate_exception& outer) {
    ASSERT_EQ(outer.size(), 1u);
    try {
      std::rethrow_exception(outer.inner_exceptions()[0]);
    } catch (const tpl::aggregate_exception& inner) {  // the linked source's own cancel()
      for (const std::exception_ptr& x : inner.inner_exceptions()) inner_ids.push_back(test_error_id(x));
    } catch (...) {
      ADD_FAILURE() << "the parent's inner exception is not the linked source's aggregate_exception";
    }
  }
  EXPECT_EQ(inner_ids, (std::vector<int>{3}));
  EXPECT_TRUE(linked.is_cancellation_requested());
}

TEST(cancellation, linked_source_over_an_already_canceled_token_is_canceled_at_once) {
  tpl::cancellation_token_source a;
  tpl::cancellation_token_source b;
  b.cancel();
  auto linked = tpl::cancellation_token_source::create_linked(a.token(), b.token());
  EXPECT_TRUE(linked.is_cancellation_requested());
  EXPECT_FALSE(a.is_cancellation_requested());
}

TEST(cancellation, linked_source_ignores_tokens_that_cannot_be_canceled) {
  tpl::cancellation_token_source a;
  auto linked = tpl::cancellation_token_source::create_linked(tpl::cancellation_token::none(), a.token());
  EXPECT_FALSE(linked.is_cancellation_requested());
  a.cancel();
  EXPECT_TRUE(linked.is_cancellation_requested());
}

TEST(cancellation, create_linked_variadic_form_links_every_token) {
  for (int which = 0; which < 3; ++which) {
    std::array<tpl::cancellation_token_source, 3> parents;
    auto linked = tpl::cancellation_token_source::create_linked(parents[0].token(), parents[1].token(),
                                                                 parents[2].token());
    EXPECT_FALSE(linked.is_cancellation_requested());
    parents[which].cancel();
    EXPECT_TRUE(linked.is_cancellation_requested()) << "parent " << which;
  }
}

TEST(cancellation, create_linked_initializer_list_form_links_every_token) {
  for (int which = 0; which < 3; ++which) {
    std::array<tpl::cancellation_token_source, 3> parents;
    auto linked =
        tpl::cancellation_token_source::create_linked({parents[0].token(), parents[1].token(), parents[2].token()});
    EXPECT_FALSE(linked.is_cancellation_requested());
    parents[which].cancel();
    EXPECT_TRUE(linked.is_cancellation_requested()) << "parent " << which;
  }
}

TEST(cancellation, create_linked_span_form_links_every_token) {
  for (int which = 0; which < 4; ++which) {
    std::array<tpl::cancellation_token_source, 4> parents;
    std::vector<tpl::cancellation_token> tokens;
    for (auto& p : parents) tokens.push_back(p.token());
    auto linked = tpl::cancellation_token_source::create_linked(std::span<const tpl::cancellation_token>(tokens));
    EXPECT_FALSE(linked.is_cancellation_requested());
    parents[which].cancel();
    EXPECT_TRUE(linked.is_cancellation_requested()) << "parent " << which;
  }
}

TEST(cancellation, linked_sources_chain_through_several_levels) {
  tpl::cancellation_token_source root;
  auto middle = tpl::cancellation_token_source::create_linked(root.token());
  auto leaf = tpl::cancellation_token_source::create_linked(middle.token());
  int runs = 0;
  auto reg = leaf.token().register_callback([&runs] { ++runs; });
  root.cancel();
  EXPECT_TRUE(middle.is_cancellation_requested());
  EXPECT_TRUE(leaf.is_cancellation_requested());
  EXPECT_EQ(runs, 1);
}

TEST(cancellation, moved_linked_source_stays_linked) {
  tpl::cancellation_token_source parent;
  tpl::cancellation_token_source target;
  {
    auto linked = tpl::cancellation_token_source::create_linked(parent.token());
    target = std::move(linked);
  }
  parent.cancel();
  EXPECT_TRUE(target.is_cancellation_requested());
}

TEST(cancellation, linked_source_can_be_destroyed_from_its_own_tokens_callback) {
  tpl::cancellation_token_source parent;
  int parent_runs = 0;
  auto older = parent.token().register_callback([&parent_runs] { ++parent_runs; });  // runs last
  std::optional<tpl::cancellation_token_source> linked(tpl::cancellation_token_source::create_linked(parent.token()));
  tpl::cancellation_token linked_token = linked->token();
  int runs = 0;
  auto reg = linked_token.register_callback([&] {
    ++runs;
    linked.reset();  // unregisters from the parent while the parent runs that very registration
  });
  parent.cancel();  // under ASan: nothing freed here is touched afterwards
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(parent_runs, 1);  // the parent went on with its remaining callbacks
  EXPECT_FALSE(linked.has_value());
  EXPECT_TRUE(linked_token.is_cancellation_requested());
}

TEST(cancellation, destroyed_linked_sources_leave_no_registration_on_their_parent) {
  // Each linked source's token keeps a registration alive after the source is gone (the
  // registration keeps the token's state). If a destroyed linked source were still registered on
  // the parent, canceling the parent would cancel that state and run these callbacks.
  const int count = tpl_test::scaled(100'000, 20'000);
  tpl::cancellation_token_source parent;
  std::atomic<int> linked_callbacks{0};
  std::vector<tpl::cancellation_registration> regs;
  regs.reserve(count);
  for (int i = 0; i < count; ++i) {
    auto linked = tpl::cancellation_token_source::create_linked(parent.token());
    regs.push_back(linked.token().register_callback([&linked_callbacks] { linked_callbacks.fetch_add(1); }));
  }
  int parent_callbacks = 0;
  auto parent_reg = parent.token().register_callback([&parent_callbacks] { ++parent_callbacks; });
  parent.cancel();
  EXPECT_EQ(parent_callbacks, 1);
  EXPECT_EQ(linked_callbacks.load(), 0);
}

TEST(cancellation, destroying_a_linked_source_while_its_parent_is_canceled_is_safe) {
  const int rounds = tpl_test::scaled(1000, 100);
  tpl_test::barrier sync(2);
  std::optional<tpl::cancellation_token_source> parent;
  std::atomic<int> ran_twice{0};
  std::thread canceler([&] {
    for (int r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();  // A: parent and linked exist
      parent->cancel();
      sync.arrive_and_wait();  // B
    }
  });
  for (int r = 0; r < rounds; ++r) {
    parent.emplace();
    std::atomic<int> runs{0};
    tpl::cancellation_registration reg;
    {
      auto linked = tpl::cancellation_token_source::create_linked(parent->token());
      reg = linked.token().register_callback([&runs, &ran_twice] {
        if (runs.fetch_add(1) != 0) ran_twice.fetch_add(1);
      });
      sync.arrive_and_wait();  // A
      let_others_run(r % 4);
    }  // destroyed while the parent may be running the linked source's callback
    sync.arrive_and_wait();  // B: cancel() returned
    EXPECT_LE(runs.load(), 1);
    reg.reset();
  }
  canceler.join();
  EXPECT_EQ(ran_twice.load(), 0);
}

// ---- when_cancelled and co_await token ----------------------------------------------------------

TEST(cancellation, when_cancelled_completes_successfully_on_cancel) {
  tpl::cancellation_token_source cts;
  tpl::task<> t = tpl::when_cancelled(cts.token());
  EXPECT_FALSE(t.is_completed());
  cts.cancel();
  EXPECT_TRUE(t.is_completed_successfully());
}

TEST(cancellation, when_cancelled_on_a_canceled_token_is_already_complete) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  tpl::task<> t = tpl::when_cancelled(cts.token());
  EXPECT_TRUE(t.is_completed_successfully());
}

TEST(cancellation, co_await_token_resumes_after_cancel_from_another_thread) {
  tpl::cancellation_token_source cts;
  std::atomic<bool> resumed{false};
  tpl::task<> t = set_after_awaiting_token(cts.token(), resumed);
  EXPECT_FALSE(t.is_completed());
  EXPECT_FALSE(resumed.load());

  std::thread canceler([&cts] { cts.cancel(); });
  t.wait();
  canceler.join();
  EXPECT_TRUE(resumed.load());
  EXPECT_TRUE(t.is_completed_successfully());
}

TEST(cancellation, co_await_token_resumes_inline_on_the_canceling_thread) {
  tpl::cancellation_token_source cts;
  tpl::task<std::thread::id> t = thread_after_awaiting_token(cts.token());
  std::thread canceler([&cts] { cts.cancel(); });
  const std::thread::id canceler_id = canceler.get_id();
  canceler.join();
  EXPECT_EQ(t.get(), canceler_id);
}

TEST(cancellation, co_await_a_canceled_token_does_not_suspend) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  std::atomic<bool> resumed{false};
  tpl::task<> t = set_after_awaiting_token(cts.token(), resumed);
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_TRUE(resumed.load());
}

TEST(cancellation, awaiting_a_when_cancelled_temporary_frees_it_inside_the_callback_safely) {
  tpl::cancellation_token_source cts;
  tpl::task<int> t = awaits_when_cancelled_temporary(cts.token());
  EXPECT_FALSE(t.is_completed());
  cts.cancel();  // under ASan: the state freed in the resumption is not touched afterwards
  EXPECT_EQ(t.get(), 1);
}

TEST(cancellation, dropping_the_when_cancelled_task_before_cancel_removes_its_registration) {
  tpl::cancellation_token_source cts;
  for (int i = 0; i < 1000; ++i) {
    tpl::task<> t = tpl::when_cancelled(cts.token());
  }
  int runs = 0;
  auto reg = cts.token().register_callback([&runs] { ++runs; });
  cts.cancel();  // no stale callback may touch the freed task states (ASan)
  EXPECT_EQ(runs, 1);
}

TEST(cancellation, dropping_the_when_cancelled_task_while_cancel_runs_is_safe) {
  const int rounds = tpl_test::scaled(2000, 200);
  tpl_test::barrier sync(2);
  std::optional<tpl::cancellation_token_source> source;
  std::thread canceler([&] {
    for (int r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();  // A
      source->cancel();
      sync.arrive_and_wait();  // B
    }
  });
  for (int r = 0; r < rounds; ++r) {
    source.emplace();
    {
      tpl::task<> t = tpl::when_cancelled(source->token());
      sync.arrive_and_wait();  // A
      let_others_run(r % 4);
    }  // the last handle goes while the callback may be completing the task
    sync.arrive_and_wait();  // B
  }
  canceler.join();
}

// ---- bad input --------------------------------------------------------------------------------

TEST(cancellation, moved_from_source_throws_invalid_operation) {
  tpl::cancellation_token_source a;
  tpl::cancellation_token_source b(std::move(a));
  // NOLINTBEGIN(bugprone-use-after-move): using a moved-from source is the point
  EXPECT_THROW((void)a.token(), tpl::invalid_operation);
  EXPECT_THROW(a.cancel(), tpl::invalid_operation);
  EXPECT_THROW(a.cancel(true), tpl::invalid_operation);
  EXPECT_THROW((void)a.try_reset(), tpl::invalid_operation);
  EXPECT_THROW((void)a.is_cancellation_requested(), tpl::invalid_operation);
  // NOLINTEND(bugprone-use-after-move)
  EXPECT_NO_THROW(b.cancel());
}

TEST(cancellation, moved_from_source_can_be_assigned_a_new_source) {
  tpl::cancellation_token_source a;
  tpl::cancellation_token_source b(std::move(a));
  a = tpl::cancellation_token_source();
  EXPECT_FALSE(a.is_cancellation_requested());
  a.cancel();
  EXPECT_TRUE(a.is_cancellation_requested());
  EXPECT_FALSE(b.is_cancellation_requested());
}

TEST(cancellation, create_linked_over_no_tokens_throws_invalid_argument) {
  EXPECT_THROW((void)tpl::cancellation_token_source::create_linked(std::span<const tpl::cancellation_token>{}),
               std::invalid_argument);
  EXPECT_THROW((void)tpl::cancellation_token_source::create_linked({}), std::invalid_argument);
}

}  // namespace cancellation_test_cpp
