// tpl's own races explored with the deterministic scheduler (issue 8): each scenario runs over
// many seeds (tpl_test::scaled(1000, 300): 1,000 in Release, 300 under the sanitizers), on fake
// time, and checks precise invariants for every order, not only that nothing crashed:
//
//   cancellation races   cancel racing a delay, a channel read, registrations and their reset;
//                        linked tokens
//   async_mutex          mutual exclusion, first-come-first-served hand-over, every wait ends
//   channels             producers / consumers on unbounded, bounded and rendezvous channels,
//                        canceled readers and writers, completion with and without an error
//   parallel loops       for_async / for_each_async with max degree 1-3: never more bodies at
//                        once than the degree and the degree reached; cancellation; first failure
//   timeouts             wait_async(timeout, token) against the result: the right one wins,
//                        exactly at its due time
//
// (async_semaphore's scenario is in deterministic_scheduler_test.cpp.) A failing seed is printed
// with the line to replay it: TPL_TEST_SEED=<seed>. Each scenario also checks, over all seeds,
// that every outcome it distinguishes was reached, so the races are really explored.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace deterministic_scenarios_test_cpp {

using tpl::testing::deterministic_scheduler;
using tpl::testing::for_each_seed;
using tpl_test::check;
using tpl_test::check_eq;
using ms = std::chrono::milliseconds;
using ns = std::chrono::nanoseconds;

namespace {

const int kSeeds = tpl_test::scaled(1000, 300);

/// Fake time elapsed since the scheduler's clock started.
ns now(deterministic_scheduler& s) { return s.clock().utc_now() - tpl::testing::fake_time_provider::default_start(); }

/// Up to max - 1 yields, drawn from the seed.
tpl::task<> yields(deterministic_scheduler& s, std::uint64_t max) {
  for (std::uint64_t k = s.random(max); k > 0; --k) co_await tpl::yield();
}

bool all_succeeded(const std::vector<tpl::task<>>& tasks) {
  bool ok = true;
  for (const auto& t : tasks) ok = ok && t.is_completed_successfully();
  return check(ok, "every task of the scenario ran to completion");
}

/// Whether the seeds reached every outcome (checked only when all seeds ran, not on a replay).
void expect_reached(const tpl::testing::seed_report& report, std::size_t count, const char* what) {
  if (report.ok && report.runs == static_cast<std::size_t>(kSeeds)) {
    EXPECT_GT(count, 0u) << "never reached: " << what;
  }
}

}  // namespace

// ---- 1. cancellation races -----------------------------------------------------------------------

// A delay with a token against a cancel (a direct cancel() after a fake delay, or cancel_after):
// the delay completes iff its due time comes strictly first, at exactly its due time; otherwise it
// ends canceled exactly when cancel runs. Ties go either way, each outcome exactly at that instant.
TEST(deterministic_scenarios, cancel_races_a_delay) {
  std::size_t completed = 0, canceled = 0;
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    tpl::cancellation_token_source cts;
    const ns d = ms(1 + s.random(20));
    const ns c = ms(s.random(25));
    const bool via_cancel_after = s.random(2) == 0;
    std::optional<ns> cancel_at;
    auto reg = cts.token().register_callback([&] { cancel_at = now(s); });
    ns started{-1}, ended{-1};
    int outcome = -1;  // 0: completed, 1: canceled
    std::vector<tpl::task<>> tasks;
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 3);
      started = now(s);
      const tpl::cancellation_token token = cts.token();
      try {
        co_await tpl::delay(d, token, s.clock());
        outcome = 0;
      } catch (const tpl::operation_canceled&) {
        outcome = 1;
      }
      ended = now(s);
    }));
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 3);
      if (via_cancel_after) {
        cts.cancel_after(c, s.clock());
      } else {
        co_await tpl::delay(c, s.clock());
        cts.cancel();
      }
    }));
    s.run_until_idle();
    bool ok = all_succeeded(tasks) && check(cancel_at.has_value(), "the source was canceled");
    if (!ok) return false;
    if (outcome == 0) {
      ++completed;
      ok = ok && check(ended == started + d, "completed exactly at its due time");
      ok = ok && check(*cancel_at >= ended, "completed although cancel came first");
    } else {
      ++canceled;
      ok = ok && check_eq(outcome, 1, "an outcome");
      ok = ok && check(ended == *cancel_at, "canceled exactly when cancel ran");
      ok = ok && check(*cancel_at <= started + d, "canceled after its due time");
    }
    ok = ok && check_eq(static_cast<long long>(s.clock().armed_timers()), 0, "no timer left armed");
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  expect_reached(report, completed, "delay completed");
  expect_reached(report, canceled, "delay canceled");
  std::printf("[scenario] %d seeds: %zu delays completed, %zu canceled\n", kSeeds, completed, canceled);
}

// A read with a token against a write and a cancel: the item is received exactly once, by the
// reader or left in the channel for the next one; never lost, never duplicated; and the order of
// the three events decides the outcome where it must.
TEST(deterministic_scenarios, cancel_races_a_channel_read) {
  std::size_t got_total = 0, canceled_total = 0;
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    const bool bounded = s.random(2) == 0;
    const bool synchronous = s.random(2) == 0;
    auto ch = bounded ? tpl::make_bounded_channel<int>({.capacity = 1, .allow_synchronous_continuations = synchronous})
                      : tpl::make_unbounded_channel<int>({.allow_synchronous_continuations = synchronous});
    auto r = ch.reader();
    auto w = ch.writer();
    tpl::cancellation_token_source cts;
    int seq = 0, reader_start = 0, write_at = 0, cancel_at = 0;
    int outcome = -1;  // 0: got the item, 1: canceled
    int value = 0;
    std::vector<tpl::task<>> tasks;
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 4);
      const tpl::cancellation_token token = cts.token();
      reader_start = ++seq;
      try {
        value = co_await r.read_async(token);
        outcome = 0;
      } catch (const tpl::operation_canceled&) {
        outcome = 1;
      }
    }));
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 4);
      co_await tpl::delay(ms(s.random(3)), s.clock());
      const bool written = w.try_write(42);
      write_at = ++seq;
      if (!written) throw std::logic_error("try_write into an empty channel failed");
    }));
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 4);
      co_await tpl::delay(ms(s.random(3)), s.clock());
      cancel_at = ++seq;
      cts.cancel();
    }));
    s.run_until_idle();
    bool ok = all_succeeded(tasks);
    if (outcome == 0) {
      ++got_total;
      ok = ok && check_eq(value, 42, "the item read");
      ok = ok && check_eq(static_cast<long long>(r.count()), 0, "the item read is gone from the channel");
      ok = ok && check(write_at < cancel_at, "read an item written after the cancel");
      ok = ok && check(reader_start < cancel_at, "read although canceled before starting");
    } else {
      ++canceled_total;
      ok = ok && check_eq(outcome, 1, "an outcome");
      ok = ok && check(r.try_read() == std::optional<int>(42), "a canceled read left the item in the channel");
      ok = ok && check(!(write_at < reader_start && reader_start < cancel_at),
                       "canceled although the item was there when the read started, before the cancel");
    }
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  expect_reached(report, got_total, "read got the item");
  expect_reached(report, canceled_total, "read canceled");
  std::printf("[scenario] %d seeds: %zu reads got the item, %zu canceled\n", kSeeds, got_total, canceled_total);
}

// Three registrations (each reset at a random point) racing cancel(): a callback runs exactly once
// iff it is registered when cancel runs (inside cancel(), newest first) or registered after it
// (synchronously, inside register_callback); a callback reset before cancel never runs.
TEST(deterministic_scenarios, cancel_races_register_and_unregister) {
  std::size_t in_cancel = 0, after_cancel = 0, reset_before = 0;
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    constexpr int n = 3;
    tpl::cancellation_token_source cts;
    int seq = 0, cancel_at = 0, cancel_done = 0;
    int reg_at[n] = {}, reset_at[n] = {}, runs[n] = {}, ran_at[n] = {};
    bool active_after_register[n] = {};
    std::vector<int> ran_in_cancel;
    std::vector<tpl::task<>> tasks;
    for (int id = 0; id < n; ++id) {
      tasks.push_back(s.start([&, id]() -> tpl::task<> {
        co_await yields(s, 5);
        const tpl::cancellation_token token = cts.token();
        reg_at[id] = ++seq;
        auto reg = token.register_callback([&, id] {
          ++runs[id];
          ran_at[id] = ++seq;
          if (cancel_at != 0 && cancel_done == 0) ran_in_cancel.push_back(id);
        });
        active_after_register[id] = reg.active();
        co_await yields(s, 5);
        reset_at[id] = ++seq;
        reg.reset();
      }));
    }
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 8);
      cancel_at = ++seq;
      cts.cancel();
      cancel_done = ++seq;
    }));
    s.run_until_idle();
    bool ok = all_succeeded(tasks);
    std::vector<std::pair<int, int>> expected_in_cancel;  // (reg_at, id) of those registered at cancel
    for (int id = 0; id < n; ++id) {
      const bool registered_at_cancel = reg_at[id] < cancel_at && cancel_at < reset_at[id];
      const bool registered_after = reg_at[id] > cancel_at;
      const bool must_run = registered_at_cancel || registered_after;
      ok = ok && check_eq(runs[id], must_run ? 1 : 0, "callback runs");
      if (registered_after) {
        ++after_cancel;
        ok = ok && check_eq(ran_at[id], reg_at[id] + 1, "ran inside register_callback");
        ok = ok && check(!active_after_register[id], "a registration on a canceled token is inactive");
      } else if (registered_at_cancel) {
        ++in_cancel;
        ok = ok && check(ran_at[id] > cancel_at && ran_at[id] < cancel_done, "ran inside cancel()");
        expected_in_cancel.emplace_back(reg_at[id], id);
      } else {
        ++reset_before;
      }
    }
    std::sort(expected_in_cancel.rbegin(), expected_in_cancel.rend());  // newest registration first
    std::vector<int> expected_order;
    for (const auto& e : expected_in_cancel) expected_order.push_back(e.second);
    ok = ok && check(ran_in_cancel == expected_order, "cancel() ran the callbacks newest first");
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  expect_reached(report, in_cancel, "callback run by cancel()");
  expect_reached(report, after_cancel, "callback registered after cancel");
  expect_reached(report, reset_before, "registration reset before cancel");
  std::printf("[scenario] %d seeds: %zu callbacks run by cancel(), %zu at registration, "
              "%zu reset before\n",
              kSeeds, in_cancel, after_cancel, reset_before);
}

// A linked source over two parents, created at a random point (sometimes after a parent was
// canceled), with a callback and a delay on its token; the parents are canceled at random fake
// times (or never), and the linked source is sometimes destroyed early. The linked token is
// canceled iff it was linked when a parent was canceled, exactly at the first such cancel, its
// callback runs once even when both parents cancel, and the delay's outcome follows.
TEST(deterministic_scenarios, linked_tokens_follow_the_first_parent_cancel) {
  std::size_t linked_canceled = 0, linked_not_canceled = 0, created_canceled = 0, destroyed_early = 0;
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    tpl::cancellation_token_source a, b;
    std::optional<ns> a_at, b_at;
    auto ra = a.token().register_callback([&] { a_at = now(s); });
    auto rb = b.token().register_callback([&] { b_at = now(s); });
    const ns d = ms(1 + s.random(10));
    const bool destroy_early = s.random(4) == 0;
    std::optional<tpl::cancellation_token_source> linked;
    tpl::cancellation_token linked_token;
    ns created{-1}, started{-1}, ended{-1}, destroyed{-1};
    int linked_runs = 0;
    std::optional<ns> linked_at;
    tpl::cancellation_registration observer;  // after linked_token: unregistered first
    int delay_outcome = -1;
    std::vector<tpl::task<>> tasks;
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 3);
      co_await tpl::delay(ms(s.random(4)), s.clock());
      linked.emplace(tpl::cancellation_token_source::create_linked(a.token(), b.token()));
      created = now(s);
      linked_token = linked->token();
      observer = linked_token.register_callback([&] {
        ++linked_runs;
        linked_at = now(s);
      });
      started = now(s);
      try {
        co_await tpl::delay(d, linked_token, s.clock());
        delay_outcome = 0;
      } catch (const tpl::operation_canceled&) {
        delay_outcome = 1;
      }
      ended = now(s);
      if (destroy_early) {
        // (When the delay ended canceled, this runs inside the linked cancel(): the source is
        // destroyed while its callbacks run, which must be safe too.)
        destroyed = now(s);
        linked.reset();
        co_return;
      }
      co_await tpl::delay(ms(20), s.clock());  // keep the source until both parents are done
    }));
    for (auto* parent : {&a, &b}) {
      tasks.push_back(s.start([&, parent]() -> tpl::task<> {
        co_await yields(s, 3);
        const std::uint64_t when = s.random(12);
        if (when >= 10) co_return;  // never canceled
        if (s.random(2) == 0) {
          parent->cancel_after(ms(when), s.clock());
        } else {
          co_await tpl::delay(ms(when), s.clock());
          parent->cancel();
        }
      }));
    }
    s.run_until_idle();
    bool ok = all_succeeded(tasks);
    std::optional<ns> first_parent;
    for (const auto& t : {a_at, b_at})
      if (t && (!first_parent || *t < *first_parent)) first_parent = t;
    // When the linked token had to be canceled: the first parent cancel it was linked for.
    std::optional<ns> expected;
    if (first_parent && *first_parent <= created) {
      expected = created;  // created over a canceled parent: canceled at once
      ++created_canceled;
    } else if (first_parent && (!destroy_early || *first_parent < destroyed ||
                                (*first_parent == destroyed && linked_at.has_value()))) {
      expected = first_parent;
    }
    if (expected) {
      ++linked_canceled;
      ok = ok && check(linked_token.is_cancellation_requested(), "linked token canceled");
      ok = ok && check(linked_at == expected, "linked token canceled at the first parent cancel");
      ok = ok && check_eq(linked_runs, 1, "linked callback ran once");
    } else {
      ++linked_not_canceled;
      ok = ok && check(!linked_token.is_cancellation_requested(), "linked token not canceled");
      ok = ok && check_eq(linked_runs, 0, "linked callback did not run");
    }
    if (destroy_early) ++destroyed_early;
    ok = ok && check(delay_outcome == 0 || delay_outcome == 1, "the delay ended");
    if (delay_outcome == 0) {
      ok = ok && check(ended == started + d, "delay completed at its due time");
      ok = ok && check(!linked_at || *linked_at >= ended, "delay completed after the linked cancel");
    } else {
      ok = ok && check(linked_at.has_value() && ended == *linked_at, "delay canceled at the linked cancel");
      ok = ok && check(ended <= started + d, "delay canceled after its due time");
    }
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  expect_reached(report, linked_canceled, "linked canceled");
  expect_reached(report, linked_not_canceled, "linked not canceled");
  expect_reached(report, created_canceled, "linked created over a canceled parent");
  expect_reached(report, destroyed_early, "linked destroyed early");
  std::printf("[scenario] %d seeds: linked canceled %zu (%zu at creation), not canceled %zu, "
              "destroyed early %zu\n",
              kSeeds, linked_canceled, created_canceled, linked_not_canceled, destroyed_early);
}

// ---- 2. async_mutex ------------------------------------------------------------------------------

// Four users, three rounds each, some with a token canceled at a random fake time, holding the
// lock across delays and yields: mutual exclusion (counted), grants in exactly the order the
// lock_async calls were made (skipping canceled waits: a strict FIFO hand-over, no barging), every
// wait ends once (granted or canceled, none starves), the mutex ends unlocked.
TEST(deterministic_scenarios, async_mutex_is_fifo_and_mutually_exclusive) {
  std::size_t grants_total = 0, canceled_total = 0, handovers_total = 0;
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    tpl::async_mutex m;
    tpl::cancellation_token_source cts;
    int inside = 0, max_inside = 0, sections = 0;
    std::vector<int> requested, granted;
    int canceled = 0, waited = 0;
    constexpr int users = 4, rounds = 3;
    std::vector<tpl::task<>> tasks;
    for (int id = 0; id < users; ++id) {
      tasks.push_back(s.start([&, id]() -> tpl::task<> {
        const bool cancelable = id % 2 == 1;
        for (int round = 0; round < rounds; ++round) {
          co_await yields(s, 3);
          const int ticket = id * 10 + round;
          const tpl::cancellation_token token = cancelable ? cts.token() : tpl::cancellation_token{};
          requested.push_back(ticket);
          const bool was_locked = m.is_locked();
          tpl::async_mutex_lock guard;
          try {
            guard = co_await m.lock_async(token);
          } catch (const tpl::operation_canceled&) {
            ++canceled;
            continue;
          }
          if (was_locked) ++waited;
          granted.push_back(ticket);
          ++sections;
          max_inside = std::max(max_inside, ++inside);
          co_await tpl::delay(ms(s.random(3)), s.clock());
          co_await yields(s, 2);
          --inside;
        }
      }));
    }
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await tpl::delay(ms(s.random(8)), s.clock());
      cts.cancel();
    }));
    s.run_until_idle();
    bool ok = all_succeeded(tasks);
    ok = ok && check_eq(max_inside, 1, "mutual exclusion");
    ok = ok && check_eq(sections, static_cast<long long>(granted.size()), "one critical section per grant");
    ok = ok && check_eq(static_cast<long long>(granted.size()) + canceled, users * rounds, "every wait ended once");
    std::vector<int> fifo;
    for (int t : requested)
      if (std::find(granted.begin(), granted.end(), t) != granted.end()) fifo.push_back(t);
    ok = ok && check(fifo == granted, "granted in request order");
    ok = ok && check(!m.is_locked(), "unlocked at the end");
    grants_total += granted.size();
    canceled_total += static_cast<std::size_t>(canceled);
    handovers_total += static_cast<std::size_t>(waited);
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  expect_reached(report, grants_total, "grants");
  expect_reached(report, canceled_total, "canceled waits");
  expect_reached(report, handovers_total, "hand-overs to a waiter");
  std::printf("[scenario] %d seeds: %zu grants (%zu after waiting), %zu canceled waits\n",
              kSeeds, grants_total, handovers_total, canceled_total);
}

// ---- 3. channels ---------------------------------------------------------------------------------

// Two producers (one with a token canceled at a random time) and three consumers (read_async,
// next_async, wait_to_read_async + try_read; some with a token canceled at a random time) on an
// unbounded, bounded (1 or 2) or rendezvous channel, completed mid-flight with or without an
// error. Every item is reported exactly once: written (then received by exactly one consumer or
// left buffered) or not written (its write was canceled or closed); each consumer and the leftover
// buffer see each producer's items in order; every consumer ends canceled only through its token
// and otherwise learns of the completion (false / nullopt / channel_closed, or the error itself);
// completion() finishes once drained, faulted with the error if there was one.
TEST(deterministic_scenarios, channel_producers_consumers_completion_and_cancellation) {
  std::size_t with_error = 0, leftovers_seen = 0, not_written_seen = 0, consumer_canceled = 0, received_total = 0;
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    const int kind = static_cast<int>(s.random(4));
    tpl::channel<int> ch;
    if (kind == 0)
      ch = tpl::make_unbounded_channel<int>();
    else if (kind == 3)
      ch = tpl::make_bounded_channel<int>(0);
    else
      ch = tpl::make_bounded_channel<int>(kind);
    auto r = ch.reader();
    auto w = ch.writer();
    const bool fail = s.random(2) == 0;
    const std::exception_ptr error = fail ? std::make_exception_ptr(tpl_test::test_error(7)) : nullptr;
    tpl::cancellation_token_source consumer_cts, producer_cts;
    constexpr int producers = 2, items = 4, consumers = 3;
    std::vector<int> written, not_written;
    std::vector<std::vector<int>> received(consumers);
    enum class end { none, closed, canceled };
    std::vector<end> ends(consumers, end::none);
    std::vector<bool> consumer_cancelable(consumers);
    std::vector<std::exception_ptr> seen_error(consumers);
    std::vector<tpl::task<>> tasks;
    for (int p = 0; p < producers; ++p) {
      tasks.push_back(s.start([&, p]() -> tpl::task<> {
        const tpl::cancellation_token token = p == 0 ? producer_cts.token() : tpl::cancellation_token{};
        for (int k = 0; k < items; ++k) {
          co_await yields(s, 3);
          co_await tpl::delay(ms(s.random(2)), s.clock());
          const int item = p * 100 + k;
          bool closed = false;
          try {
            co_await w.write_async(item, token);
            written.push_back(item);
          } catch (const tpl::channel_closed&) {
            closed = true;
          } catch (const tpl::operation_canceled&) {
            not_written.push_back(item);  // a canceled write: the next one may still go through
          }
          if (closed) {
            for (int rest = k; rest < items; ++rest) not_written.push_back(p * 100 + rest);
            co_return;
          }
        }
      }));
    }
    for (int c = 0; c < consumers; ++c) {
      consumer_cancelable[static_cast<std::size_t>(c)] = s.random(2) == 0;
      tasks.push_back(s.start([&, c]() -> tpl::task<> {
        const auto idx = static_cast<std::size_t>(c);
        const tpl::cancellation_token token =
            consumer_cancelable[idx] ? consumer_cts.token() : tpl::cancellation_token{};
        co_await yields(s, 3);
        try {
          if (c == 0) {
            for (;;) {
              const int v = co_await r.read_async(token);
              received[idx].push_back(v);
            }
          } else if (c == 1) {
            for (;;) {
              std::optional<int> v = co_await r.next_async(token);
              if (!v) break;
              received[idx].push_back(*v);
            }
            ends[idx] = end::closed;
          } else {
            for (;;) {
              const bool more = co_await r.wait_to_read_async(token);
              if (!more) break;
              while (auto v = r.try_read()) received[idx].push_back(*v);
            }
            ends[idx] = end::closed;
          }
        } catch (const tpl::channel_closed& e) {
          ends[idx] = end::closed;
          seen_error[idx] = e.inner_exception();
        } catch (const tpl::operation_canceled&) {
          ends[idx] = end::canceled;
        } catch (const tpl_test::test_error&) {
          ends[idx] = end::closed;
          seen_error[idx] = std::current_exception();
        }
      }));
    }
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 6);
      co_await tpl::delay(ms(s.random(6)), s.clock());
      w.complete(error);
    }));
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 6);
      co_await tpl::delay(ms(s.random(8)), s.clock());
      consumer_cts.cancel();
      if (s.random(2) == 0) producer_cts.cancel();
    }));
    s.run_until_idle();
    bool ok = all_succeeded(tasks);
    auto completion = r.completion();
    const bool done_before_drain = completion.is_completed();
    std::vector<int> leftovers;
    while (auto v = r.try_read()) leftovers.push_back(*v);
    ok = ok && check(done_before_drain == leftovers.empty(), "completion() done iff drained");
    ok = ok && check(completion.is_completed(), "completion() done once drained");
    // Every item reported exactly once.
    std::vector<int> all_reported = written;
    all_reported.insert(all_reported.end(), not_written.begin(), not_written.end());
    std::sort(all_reported.begin(), all_reported.end());
    std::vector<int> every_item;
    for (int p = 0; p < producers; ++p)
      for (int k = 0; k < items; ++k) every_item.push_back(p * 100 + k);
    ok = ok && check(all_reported == every_item, "every item written or not written, exactly once");
    std::vector<int> arrived = leftovers;
    for (const auto& got : received) arrived.insert(arrived.end(), got.begin(), got.end());
    std::sort(arrived.begin(), arrived.end());
    std::vector<int> written_sorted = written;
    std::sort(written_sorted.begin(), written_sorted.end());
    ok = ok && check(arrived == written_sorted, "every written item received exactly once, nothing else");
    // Per-producer order, in each consumer and in the leftovers.
    auto in_producer_order = [](const std::vector<int>& seq) {
      std::map<int, int> last;
      for (int v : seq) {
        auto [it, fresh] = last.try_emplace(v / 100, v);
        if (!fresh && it->second > v) return false;
        it->second = v;
      }
      return true;
    };
    for (const auto& got : received)
      ok = ok && check(in_producer_order(got), "a consumer got a producer's items out of order");
    ok = ok && check(in_producer_order(leftovers), "leftovers out of producer order");
    for (int c = 0; c < consumers; ++c) {
      const auto idx = static_cast<std::size_t>(c);
      ok = ok && check(ends[idx] != end::none, "every consumer ended");
      if (ends[idx] == end::canceled) {
        ++consumer_canceled;
        ok = ok && check(consumer_cancelable[idx], "a consumer without a token ended canceled");
      } else {
        ok = ok && check(seen_error[idx] == error, "a consumer saw the completion error (or none)");
      }
    }
    if (completion.is_completed()) {
      if (fail) {
        ok = ok && check(completion.is_faulted(), "completion() faulted with the error");
        if (completion.is_faulted()) {
          try {
            std::rethrow_exception(completion.exception());
          } catch (const tpl::aggregate_exception& e) {
            ok = ok && check(e.size() == 1 && e.inner_exceptions()[0] == error, "completion()'s error");
          }
        }
      } else {
        ok = ok && check(completion.is_completed_successfully(), "completion() completed");
      }
    }
    with_error += fail ? 1 : 0;
    leftovers_seen += leftovers.empty() ? 0 : 1;
    not_written_seen += not_written.empty() ? 0 : 1;
    for (const auto& got : received) received_total += got.size();
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  expect_reached(report, with_error, "completion with an error");
  expect_reached(report, leftovers_seen, "items left buffered after the consumers stopped");
  expect_reached(report, not_written_seen, "writes not done (canceled or closed)");
  expect_reached(report, consumer_canceled, "a canceled consumer");
  expect_reached(report, received_total, "items received");
  std::printf("[scenario] %d seeds: %zu items received, %zu runs with an error, "
              "%zu with leftovers, %zu with writes not done, %zu canceled consumers\n",
              kSeeds, received_total, with_error, leftovers_seen, not_written_seen, consumer_canceled);
}

// ---- 4. parallel loops with a max degree ---------------------------------------------------------

// for_async / for_each_async on the deterministic scheduler, degree 1-3, bodies that await fake
// delays (with the loop's token) and yields. Run to the end, canceled mid-loop, or with one body
// failing: never more bodies at once than the degree, and the degree reached; no body starts once
// the loop's token is canceled, and the bodies in flight then see it canceled at that instant;
// each index at most once (exactly once when nothing stopped the loop); the loop's task ends
// completed / canceled / faulted with exactly the failing body's exception (the other bodies'
// operation_canceled is not reported).
TEST(deterministic_scenarios, parallel_async_loops_respect_the_degree_cancellation_and_failure) {
  std::size_t runs_by_mode[3] = {0, 0, 0};
  std::size_t stopped_early = 0;
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    const int degree = 1 + static_cast<int>(s.random(3));
    const int n = 1 + static_cast<int>(s.random(8));
    const int mode = static_cast<int>(s.random(3));  // 0: to the end, 1: canceled, 2: a body fails
    const int fail_at = static_cast<int>(s.random(static_cast<std::uint64_t>(n)));
    const bool over_range = s.random(2) == 0;
    tpl::cancellation_token_source cts;
    tpl::parallel_options opts;
    opts.max_degree_of_parallelism = degree;
    opts.scheduler = &s;
    opts.token = cts.token();
    int running = 0, max_running = 0;
    bool started_canceled = false;
    std::vector<int> starts(static_cast<std::size_t>(n), 0), finished(static_cast<std::size_t>(n), 0);
    std::vector<ns> due(static_cast<std::size_t>(n), ns(-1)), canceled_at(static_cast<std::size_t>(n), ns(-1));
    std::optional<ns> stop_at;  // when the loop's token was canceled (by cts or by the failure)
    auto body = [&](int i, const tpl::cancellation_token& t) -> tpl::task<> {
      if (t.is_cancellation_requested()) started_canceled = true;
      ++starts[static_cast<std::size_t>(i)];
      max_running = std::max(max_running, ++running);
      struct leave {
        int& running;
        ~leave() { --running; }
      } on_exit{running};
      const auto d = ms(1 + s.random(4));
      due[static_cast<std::size_t>(i)] = now(s) + d;
      try {
        co_await tpl::delay(d, t, s.clock());
      } catch (const tpl::operation_canceled&) {
        canceled_at[static_cast<std::size_t>(i)] = now(s);
        throw;
      }
      co_await yields(s, 3);
      if (mode == 2 && i == fail_at) {
        stop_at = now(s);  // the worker fails the loop as soon as it resumes, at this fake instant
        throw tpl_test::test_error(i);
      }
      ++finished[static_cast<std::size_t>(i)];
    };
    std::vector<int> range;
    for (int i = 0; i < n; ++i) range.push_back(i);
    tpl::task<> loop;
    auto driver = s.start([&]() -> tpl::task<> {
      if (over_range)
        loop = tpl::parallel::for_each_async(range, body, opts);
      else
        loop = tpl::parallel::for_async(0, n, body, opts);
      co_await loop.when_ready();
    });
    auto canceler = s.start([&]() -> tpl::task<> {
      if (mode != 1) co_return;
      co_await tpl::delay(ms(1 + s.random(6)), s.clock());  // after every first body started
      stop_at = now(s);
      cts.cancel();
    });
    s.run_until_idle();
    bool ok = check(driver.is_completed_successfully() && canceler.is_completed_successfully(), "driver ended");
    ok = ok && check(loop.valid() && loop.is_completed(), "the loop ended");
    if (!ok) return false;
    ok = ok && check(max_running <= degree, "more bodies at once than the degree");
    ok = ok && check_eq(max_running, std::min(degree, n), "the degree was reached");
    ok = ok && check(!started_canceled, "a body started after the loop's token was canceled");
    ok = ok && check_eq(running, 0, "every body ended");
    // Every body still in its delay when the loop stopped (canceled, or a body failed) saw its
    // token canceled at once, exactly then; no other body was canceled.
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (starts[k] == 0) continue;
      if (!stop_at || due[k] < *stop_at)
        ok = ok && check(canceled_at[k] == ns(-1), "a body canceled although the loop had not stopped");
      else if (due[k] > *stop_at)
        ok = ok && check(canceled_at[k] == *stop_at, "an in-flight body not canceled exactly when the loop stopped");
    }
    int started = 0, done = 0;
    for (int i = 0; i < n; ++i) {
      ok = ok && check(starts[static_cast<std::size_t>(i)] <= 1, "an index ran twice");
      started += starts[static_cast<std::size_t>(i)];
      done += finished[static_cast<std::size_t>(i)];
    }
    if (mode == 0) {
      ok = ok && check(loop.is_completed_successfully(), "the loop completed");
      ok = ok && check_eq(done, n, "every index ran");
    } else if (mode == 1) {
      ok = ok && check(loop.is_canceled() || (loop.is_completed_successfully() && done == n),
                       "canceled, unless every body had finished first");
    } else {
      ok = ok && check(loop.is_faulted(), "the loop faulted");
      if (loop.is_faulted()) {
        try {
          std::rethrow_exception(loop.exception());
        } catch (const tpl::aggregate_exception& e) {
          ok = ok && check(e.size() == 1 && tpl_test::test_error_id(e.inner_exceptions()[0]) == fail_at,
                           "exactly the failing body's exception");
        }
      }
    }
    ++runs_by_mode[mode];
    if (started < n) ++stopped_early;
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  for (std::size_t m = 0; m < 3; ++m) expect_reached(report, runs_by_mode[m], "a mode");
  expect_reached(report, stopped_early, "a loop stopped before starting every index");
  std::printf("[scenario] %d seeds: %zu run to the end, %zu canceled, "
              "%zu failed; %zu stopped early\n",
              kSeeds, runs_by_mode[0], runs_by_mode[1], runs_by_mode[2], stopped_early);
}

// ---- 5. timeouts ---------------------------------------------------------------------------------

// A result produced at a random fake time (or never), wait_async with a random timeout, and a
// token canceled at a random time (directly, by cancel_after, or never): the earliest of the three
// wins, exactly at its time (a tie may go to either of the tied), and the waiter sees it: the
// value, timeout_exception, or operation_canceled.
TEST(deterministic_scenarios, wait_async_result_timeout_or_cancel_the_earliest_wins_exactly_then) {
  std::size_t outcomes[3] = {0, 0, 0};
  const auto report = for_each_seed(kSeeds, [&](deterministic_scheduler& s) {
    constexpr ns never{-1};
    const ns result_at = s.random(4) == 0 ? never : ns(ms(s.random(10)));
    const ns timeout = s.random(5) == 0 ? ns(tpl::infinite_timeout) : ns(ms(s.random(10)));
    std::uint64_t cancel_mode = s.random(3);  // 0: cancel(), 1: cancel_after, 2: never
    if (result_at == never && timeout == ns(tpl::infinite_timeout) && cancel_mode == 2) cancel_mode = 0;
    const ns cancel_at_planned = ms(s.random(10));
    tpl::task_completion_source<int> source;
    tpl::cancellation_token_source cts;
    std::optional<ns> canceled_at, produced_at;
    auto reg = cts.token().register_callback([&] { canceled_at = now(s); });
    int outcome = -1;  // 0: value, 1: timeout, 2: canceled
    ns started{-1}, ended{-1};
    int value = 0;
    std::vector<tpl::task<>> tasks;
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 3);
      started = now(s);
      const tpl::cancellation_token token = cts.token();
      tpl::task<int> waited = source.get_task().wait_async(timeout, token, s.clock());
      try {
        value = co_await waited;
        outcome = 0;
      } catch (const tpl::timeout_exception&) {
        outcome = 1;
      } catch (const tpl::operation_canceled&) {
        outcome = 2;
      }
      ended = now(s);
    }));
    tasks.push_back(s.start([&]() -> tpl::task<> {
      if (result_at == never) co_return;
      co_await yields(s, 3);
      co_await tpl::delay(result_at, s.clock());
      produced_at = now(s);
      source.set_result(42);
    }));
    tasks.push_back(s.start([&]() -> tpl::task<> {
      co_await yields(s, 3);
      if (cancel_mode == 1) {
        cts.cancel_after(cancel_at_planned, s.clock());
      } else if (cancel_mode == 0) {
        co_await tpl::delay(cancel_at_planned, s.clock());
        cts.cancel();
      }
    }));
    s.run_until_idle();
    bool ok = all_succeeded(tasks);
    if (!ok) return false;
    // Every yield runs at fake time 0, so the waiter started at 0 and the times are absolute.
    ok = ok && check(started == ns(0), "the waiter started at time 0");
    const bool has_timeout = timeout != ns(tpl::infinite_timeout);
    const ns big = ns(std::chrono::hours(1));
    const ns tr = produced_at.value_or(big);
    const ns tt = has_timeout ? timeout : big;
    const ns tc = canceled_at.value_or(big);
    const ns first = std::min({tr, tt, tc});
    ok = ok && check(first < big, "something won");
    ok = ok && check(ended == first, "the waiter resumed exactly at the earliest due time");
    switch (outcome) {
      case 0:
        ok = ok && check(tr == first, "the result won although it was not first") && check_eq(value, 42, "value");
        break;
      case 1:
        ok = ok && check(tt == first, "timed out although the timeout was not first");
        break;
      case 2:
        ok = ok && check(tc == first, "canceled although the cancel was not first");
        break;
      default:
        ok = check(false, "the wait ended");
    }
    if (outcome >= 0) ++outcomes[outcome];
    // The source task itself is never canceled or timed out by wait_async.
    ok = ok && check(source.get_task().is_completed() == produced_at.has_value(), "the source task is untouched");
    return ok;
  });
  EXPECT_TRUE(report.ok) << report.message;
  expect_reached(report, outcomes[0], "the result won");
  expect_reached(report, outcomes[1], "the timeout won");
  expect_reached(report, outcomes[2], "the cancel won");
  std::printf("[scenario] %d seeds: result won %zu, timeout %zu, cancel %zu\n",
              kSeeds, outcomes[0], outcomes[1], outcomes[2]);
}

}  // namespace deterministic_scenarios_test_cpp
