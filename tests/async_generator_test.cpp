// async_generator (.NET IAsyncEnumerable<T> / await foreach / yield return), channel_reader::
// read_all_async (.NET ChannelReader.ReadAllAsync) and when_each (.NET 9 Task.WhenEach).
//
// Order, laziness, co_await in the body, cancellation, early exit (live objects counted),
// exceptions, misuse, a million synchronous items without stack growth (in a child process: an
// overflow fails that test, not the run). Asynchronous steps are sequenced with
// task_completion_source and by waiting on the consumer task; nothing sleeps or measures time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace async_generator_test_cpp {

namespace {

using tpl::async_generator;
using tpl_test::check;
using tpl_test::check_eq;
using tpl_test::expect_passes_in_a_child_process;
using tpl_test::holds;
using tpl_test::ref_count;
using tpl_test::test_error;

// ---- generators and consumers shared by the tests ----------------------------------------------

async_generator<int> count_to(int n) {
  for (int i = 0; i < n; ++i) co_yield i;
}

async_generator<int> nothing() { co_return; }

// Records how far the body got: `progress` is the number of statements passed.
async_generator<int> traced(int& progress) {
  ++progress;  // 1: started
  co_yield 10;
  ++progress;  // 2: resumed after the first item
  co_yield 20;
  ++progress;  // 3: finished
}

// Both consumption forms, each collecting every item.
template <class T>
tpl::task<std::vector<T>> collect(async_generator<T>& gen) {
  std::vector<T> items;
  while (T* item = co_await gen.next()) items.push_back(std::move(*item));
  co_return items;
}

template <class T>
tpl::task<std::vector<T>> collect_with_iterator(async_generator<T>& gen) {
  std::vector<T> items;
  // (void): g++ 12 rejects a co_await as the for-increment of a coroutine template (a compiler
  // bug: "insufficient contextual information to determine type"); the cast works around it.
  for (auto it = co_await gen.begin(); it != gen.end(); (void)co_await ++it) items.push_back(*it);
  co_return items;
}

// Collects items until the generator ends or throws; the exception (if any) goes to `error`.
template <class T>
tpl::task<std::vector<T>> collect_until_error(async_generator<T>& gen, std::exception_ptr& error) {
  std::vector<T> items;
  try {
    while (T* item = co_await gen.next()) items.push_back(std::move(*item));
  } catch (...) {
    error = std::current_exception();
  }
  co_return items;
}

// The exception of one co_await gen.next() (nullptr if it returned).
template <class T>
tpl::task<std::exception_ptr> error_of_next(async_generator<T>& gen) {
  try {
    (void)co_await gen.next();
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

// Counts live instances (constructions of every kind minus destructions).
struct live_object {
  static inline std::atomic<int> alive{0};
  live_object() { ++alive; }
  live_object(const live_object&) { ++alive; }
  live_object(live_object&&) noexcept { ++alive; }
  ~live_object() { --alive; }
};

// Counts copies and moves of the yielded object.
struct copy_counter {
  int* copies;
  int value;
  copy_counter(int* c, int v) : copies(c), value(v) {}
  copy_counter(const copy_counter& o) : copies(o.copies), value(o.value) { ++*copies; }
  copy_counter(copy_counter&& o) noexcept : copies(o.copies), value(o.value) {}
};

// ---- order and laziness ------------------------------------------------------------------------

TEST(AsyncGenerator, next_gives_the_items_in_yield_order_then_nullptr) {
  auto gen = count_to(5);
  EXPECT_EQ(collect(gen).get(), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(AsyncGenerator, begin_end_and_increment_iterate_the_same_items) {
  auto gen = count_to(4);
  EXPECT_EQ(collect_with_iterator(gen).get(), (std::vector<int>{0, 1, 2, 3}));
}

TEST(AsyncGenerator, an_empty_generator_ends_at_the_first_next) {
  auto gen = nothing();
  EXPECT_TRUE(collect(gen).get().empty());
  auto gen2 = nothing();
  EXPECT_TRUE(collect_with_iterator(gen2).get().empty());
}

TEST(AsyncGenerator, the_body_does_not_run_before_the_first_next) {
  int progress = 0;
  auto gen = traced(progress);
  EXPECT_EQ(progress, 0);
  EXPECT_TRUE(gen.valid());
}

tpl::task<int> take_one(async_generator<int>& gen) {
  int* item = co_await gen.next();
  co_return item != nullptr ? *item : -1;
}

TEST(AsyncGenerator, each_next_runs_the_body_up_to_its_next_yield_only) {
  int progress = 0;
  auto gen = traced(progress);
  EXPECT_EQ(take_one(gen).get(), 10);
  EXPECT_EQ(progress, 1);
  EXPECT_EQ(take_one(gen).get(), 20);
  EXPECT_EQ(progress, 2);
  EXPECT_EQ(take_one(gen).get(), -1);
  EXPECT_EQ(progress, 3);
}

// docs/async-streams.md's first example, collecting instead of printing.
async_generator<int> slow_squares(int n) {
  for (int i = 1; i <= n; ++i) {
    co_await tpl::yield();
    co_yield i * i;
  }
}

tpl::task<std::vector<int>> consume_squares_both_ways() {
  std::vector<int> seen;
  auto squares = slow_squares(4);
  while (int* sq = co_await squares.next()) seen.push_back(*sq);
  auto again = slow_squares(3);
  for (auto it = co_await again.begin(); it != again.end(); co_await ++it) seen.push_back(*it);
  co_return seen;
}

TEST(AsyncGenerator, the_example_of_the_docs_yields_the_squares_in_both_forms) {
  EXPECT_EQ(consume_squares_both_ways().get(), (std::vector<int>{1, 4, 9, 16, 1, 4, 9}));
}

// ---- what the consumer gets --------------------------------------------------------------------

async_generator<copy_counter> yield_rvalue_and_lvalue(int* copies, const copy_counter** rvalue_address) {
  copy_counter local(copies, 1);
  *rvalue_address = &local;
  co_yield std::move(local);  // the consumer gets `local` itself
  copy_counter other(copies, 2);
  co_yield other;  // the consumer gets a copy: `other` must stay the producer's
  co_yield other.value == 2 ? copy_counter(copies, 3) : copy_counter(copies, -1);
}

tpl::task<> check_rvalue_and_lvalue(async_generator<copy_counter>& gen, const copy_counter* const* rvalue_address,
                                    int* copies) {
  copy_counter* first = co_await gen.next();
  EXPECT_EQ(first, *rvalue_address);  // the producer's own object
  EXPECT_EQ(*copies, 0);
  copy_counter* second = co_await gen.next();
  EXPECT_EQ(second->value, 2);
  EXPECT_EQ(*copies, 1);
  second->value = 99;  // modifies the copy, not the producer's `other`
  copy_counter* third = co_await gen.next();
  EXPECT_EQ(third->value, 3);
  EXPECT_EQ(*copies, 1);
  EXPECT_EQ(co_await gen.next(), nullptr);
}

TEST(AsyncGenerator, an_rvalue_is_handed_over_without_a_copy_and_an_lvalue_as_a_copy) {
  int copies = 0;
  const copy_counter* rvalue_address = nullptr;
  auto gen = yield_rvalue_and_lvalue(&copies, &rvalue_address);
  check_rvalue_and_lvalue(gen, &rvalue_address, &copies).get();
}

async_generator<std::unique_ptr<int>> boxes() {
  for (int i = 0; i < 3; ++i) co_yield std::make_unique<int>(i);
}

TEST(AsyncGenerator, the_consumer_may_move_a_move_only_item_out) {
  auto gen = boxes();
  std::vector<std::unique_ptr<int>> items = collect(gen).get();
  ASSERT_EQ(items.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*items[i], i);
}

async_generator<std::string> strings_from_other_types() {
  co_yield "literal";
  const std::string constant = "const lvalue";
  co_yield constant;
}

TEST(AsyncGenerator, a_value_of_another_type_or_a_const_lvalue_is_yielded_as_a_t) {
  auto gen = strings_from_other_types();
  EXPECT_EQ(collect(gen).get(), (std::vector<std::string>{"literal", "const lvalue"}));
}

// ---- co_await inside the body ------------------------------------------------------------------

async_generator<int> add_one_to_each(tpl::task<int> a, tpl::task<int> b) {
  co_yield 1 + co_await a;
  co_yield 1 + co_await b;
}

TEST(AsyncGenerator, a_body_that_waits_suspends_the_consumer_until_it_yields) {
  tpl::task_completion_source<int> a;
  tpl::task_completion_source<int> b;
  auto gen = add_one_to_each(a.get_task(), b.get_task());
  auto consumer = collect(gen);
  EXPECT_FALSE(consumer.is_completed());
  a.set_result(10);  // the body yields 11 and the consumer asks for the next, inside this call
  EXPECT_FALSE(consumer.is_completed());
  b.set_result(20);
  ASSERT_TRUE(consumer.is_completed());
  EXPECT_EQ(consumer.get(), (std::vector<int>{11, 21}));
}

async_generator<int> hop_through_the_pool(int n) {
  for (int i = 0; i < n; ++i) {
    co_await tpl::yield();  // continues on a pool thread
    co_yield i;
  }
}

TEST(AsyncGenerator, a_body_resumed_on_pool_threads_delivers_every_item_in_order) {
  constexpr int n = 2000;
  auto gen = hop_through_the_pool(n);
  std::vector<int> items = collect(gen).get();
  ASSERT_EQ(items.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(items[i], i);
}

tpl::task<std::vector<int>> collect_on_the_pool(async_generator<int>& gen) {
  co_await tpl::yield();
  std::vector<int> items;
  while (int* item = co_await gen.next()) {
    items.push_back(*item);
    co_await tpl::yield();
  }
  co_return items;
}

TEST(AsyncGenerator, consumer_and_body_both_hopping_between_pool_threads_see_every_item) {
  constexpr int n = 2000;
  auto gen = hop_through_the_pool(n);
  std::vector<int> items = collect_on_the_pool(gen).get();
  ASSERT_EQ(items.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(items[i], i);
}

tpl::async_local<int> flowing_value;

async_generator<int> read_and_set_the_async_local() {
  co_yield flowing_value.value();
  flowing_value.set(-1);  // does not flow back to the consumer
  co_yield flowing_value.value();
  // Each step starts from the consumer's context again (as .NET's MoveNextAsync does); what the
  // body sets within a step stays with it across its awaits.
  const int at_step_start = flowing_value.value();
  flowing_value.set(-2);
  co_await tpl::yield();  // resumes on a pool thread
  co_yield at_step_start * 100 + flowing_value.value();
}

tpl::task<std::vector<int>> consume_with_async_local(async_generator<int>& gen) {
  flowing_value.set(7);
  std::vector<int> seen;
  while (int* item = co_await gen.next()) {
    seen.push_back(*item);
    seen.push_back(flowing_value.value());
  }
  co_return seen;
}

TEST(AsyncGenerator, async_local_values_flow_into_the_body_and_not_back_out) {
  auto gen = read_and_set_the_async_local();
  EXPECT_EQ(consume_with_async_local(gen).get(), (std::vector<int>{7, 7, -1, 7, 700 - 2, 7}));
}

// ---- exceptions --------------------------------------------------------------------------------

async_generator<int> throws_after(int n, bool wait_first) {
  for (int i = 0; i < n; ++i) co_yield i;
  if (wait_first) co_await tpl::yield();  // throws on a pool thread
  throw test_error(7);
}

TEST(AsyncGenerator, an_exception_of_the_body_is_rethrown_by_the_next_after_the_last_item) {
  for (bool wait_first : {false, true}) {
    auto gen = throws_after(2, wait_first);
    std::exception_ptr error;
    EXPECT_EQ(collect_until_error(gen, error).get(), (std::vector<int>{0, 1}));
    ASSERT_TRUE(holds<test_error>(error));
    try {
      std::rethrow_exception(error);
    } catch (const test_error& e) {
      EXPECT_EQ(e.id, 7);
    }
  }
}

TEST(AsyncGenerator, an_exception_before_the_first_yield_is_rethrown_by_the_first_next) {
  auto gen = throws_after(0, false);
  std::exception_ptr error;
  EXPECT_TRUE(collect_until_error(gen, error).get().empty());
  EXPECT_TRUE(holds<test_error>(error));
}

TEST(AsyncGenerator, next_after_the_exception_throws_invalid_operation) {
  auto gen = throws_after(0, false);
  EXPECT_TRUE(holds<test_error>(error_of_next(gen).get()));
  EXPECT_TRUE(holds<tpl::invalid_operation>(error_of_next(gen).get()));
}

// ---- misuse ------------------------------------------------------------------------------------

TEST(AsyncGenerator, next_or_begin_on_an_empty_generator_throws_invalid_operation) {
  async_generator<int> empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_THROW((void)empty.next(), tpl::invalid_operation);
  EXPECT_THROW((void)empty.begin(), tpl::invalid_operation);

  auto gen = count_to(3);
  auto moved = std::move(gen);
  EXPECT_FALSE(gen.valid());  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_THROW((void)gen.next(), tpl::invalid_operation);
  EXPECT_THROW((void)gen.with_cancellation({}), tpl::invalid_operation);
  EXPECT_EQ(collect(moved).get(), (std::vector<int>{0, 1, 2}));
}

TEST(AsyncGenerator, next_after_the_end_throws_invalid_operation) {
  auto gen = count_to(1);
  EXPECT_EQ(collect(gen).get(), (std::vector<int>{0}));
  EXPECT_TRUE(holds<tpl::invalid_operation>(error_of_next(gen).get()));
}

tpl::task<bool> increment_at_end_throws(async_generator<int>& gen) {
  auto it = co_await gen.begin();
  while (it != gen.end()) co_await ++it;
  try {
    co_await ++it;
  } catch (const tpl::invalid_operation&) {
    co_return true;
  }
  co_return false;
}

TEST(AsyncGenerator, incrementing_an_iterator_at_end_throws_invalid_operation) {
  auto gen = count_to(2);
  EXPECT_TRUE(increment_at_end_throws(gen).get());
  async_generator<int>::iterator default_constructed;
  EXPECT_THROW((void)++default_constructed, tpl::invalid_operation);
}

async_generator<int> wait_then_yield(tpl::task<int> input) { co_yield co_await input; }

TEST(AsyncGenerator, next_while_a_previous_next_is_pending_throws_invalid_operation) {
  tpl::task_completion_source<int> input;
  auto gen = wait_then_yield(input.get_task());
  tpl::task<int> first = take_one(gen);
  ASSERT_FALSE(first.is_completed());  // its next() waits for input

  EXPECT_TRUE(holds<tpl::invalid_operation>(error_of_next(gen).get()));

  input.set_result(5);  // the pending next() is unharmed
  EXPECT_EQ(first.get(), 5);
  EXPECT_EQ(take_one(gen).get(), -1);
}

tpl::task<bool> await_one_operation_twice(async_generator<int>& gen) {
  auto op = gen.next();
  int* item = co_await op;
  if (item == nullptr || *item != 0) co_return false;
  try {
    (void)co_await op;
  } catch (const tpl::invalid_operation&) {
    co_return true;
  }
  co_return false;
}

TEST(AsyncGenerator, awaiting_one_next_operation_twice_throws_invalid_operation) {
  auto gen = count_to(3);
  EXPECT_TRUE(await_one_operation_twice(gen).get());
  EXPECT_EQ(take_one(gen).get(), 1);  // the failed await took nothing
}

TEST(AsyncGenerator, destroying_the_generator_while_a_next_is_pending_terminates_with_a_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tpl::task_completion_source<int> never;
        auto gen = std::make_unique<async_generator<int>>(wait_then_yield(never.get_task()));
        tpl::task<int> pending = take_one(*gen);
        gen.reset();
      },
      "async_generator destroyed while a next\\(\\) is pending");
}

// ---- early exit --------------------------------------------------------------------------------

async_generator<int> holds_live_objects([[maybe_unused]] live_object parameter, bool& ran_to_the_end) {
  live_object outer;
  for (int i = 0;; ++i) {
    live_object per_item;
    if (i == 100) break;
    co_yield i;
  }
  ran_to_the_end = true;
}

tpl::task<int> sum_first_two_then_stop(async_generator<int> gen) {
  int sum = 0;
  int taken = 0;
  for (auto it = co_await gen.begin(); it != gen.end(); co_await ++it) {
    sum += *it;
    if (++taken == 2) break;
  }
  co_return sum;  // gen, and with it the suspended body, is destroyed here
}

TEST(AsyncGenerator, a_consumer_that_stops_early_destroys_the_body_and_its_locals) {
  ASSERT_EQ(live_object::alive.load(), 0);
  bool ran_to_the_end = false;
  {
    auto gen = holds_live_objects(live_object{}, ran_to_the_end);
    EXPECT_EQ(sum_first_two_then_stop(std::move(gen)).get(), 0 + 1);
  }
  EXPECT_EQ(live_object::alive.load(), 0);
  EXPECT_FALSE(ran_to_the_end);
}

TEST(AsyncGenerator, destroying_a_generator_at_a_yield_runs_the_destructors_of_its_locals) {
  bool ran_to_the_end = false;
  {
    auto gen = holds_live_objects(live_object{}, ran_to_the_end);
    EXPECT_EQ(take_one(gen).get(), 0);
    EXPECT_EQ(live_object::alive.load(), 3);  // parameter, outer, per_item
  }
  EXPECT_EQ(live_object::alive.load(), 0);
  EXPECT_FALSE(ran_to_the_end);
}

TEST(AsyncGenerator, destroying_a_generator_that_never_started_destroys_its_parameters) {
  bool ran_to_the_end = false;
  {
    auto gen = holds_live_objects(live_object{}, ran_to_the_end);
    EXPECT_EQ(live_object::alive.load(), 1);  // the parameter's copy in the frame
  }
  EXPECT_EQ(live_object::alive.load(), 0);
}

TEST(AsyncGenerator, move_assignment_destroys_the_generator_it_replaces) {
  bool ran_to_the_end = false;
  auto gen = holds_live_objects(live_object{}, ran_to_the_end);
  EXPECT_EQ(take_one(gen).get(), 0);
  gen = count_to(1);
  EXPECT_EQ(live_object::alive.load(), 0);
  EXPECT_EQ(take_one(gen).get(), 0);
}

// ---- cancellation ------------------------------------------------------------------------------

async_generator<tpl::cancellation_token> report_token() {
  co_yield co_await tpl::this_generator::get_cancellation_token();
}

tpl::task<tpl::cancellation_token> first_token(async_generator<tpl::cancellation_token>& gen) {
  tpl::cancellation_token* token = co_await gen.next();
  co_return *token;
}

TEST(AsyncGeneratorCancellation, the_token_of_with_cancellation_reaches_the_body) {
  tpl::cancellation_token_source cts;
  auto gen = report_token().with_cancellation(cts.token());
  tpl::cancellation_token seen = first_token(gen).get();
  EXPECT_TRUE(seen == cts.token());
  EXPECT_TRUE(seen.can_be_canceled());
}

TEST(AsyncGeneratorCancellation, without_with_cancellation_the_body_gets_a_token_that_cannot_be_canceled) {
  auto gen = report_token();
  EXPECT_FALSE(first_token(gen).get().can_be_canceled());
}

async_generator<int> items_until_canceled(tpl::task<> never) {
  const tpl::cancellation_token token = co_await tpl::this_generator::get_cancellation_token();
  for (int i = 0;; ++i) {
    co_yield i;
    co_await never.wait_async(token);  // throws operation_canceled once token is canceled
  }
}

TEST(AsyncGeneratorCancellation, canceling_mid_stream_ends_the_pending_next_with_operation_canceled) {
  tpl::task_completion_source<> never;
  tpl::cancellation_token_source cts;
  auto gen = items_until_canceled(never.get_task()).with_cancellation(cts.token());
  std::exception_ptr error;
  tpl::task<std::vector<int>> consumer = collect_until_error(gen, error);
  ASSERT_FALSE(consumer.is_completed());  // has item 0, waits for the next

  cts.cancel();
  EXPECT_EQ(consumer.get(), (std::vector<int>{0}));
  EXPECT_TRUE(holds<tpl::operation_canceled>(error));
  EXPECT_TRUE(holds<tpl::invalid_operation>(error_of_next(gen).get()));  // the sequence is over
}

TEST(AsyncGeneratorCancellation, with_cancellation_after_the_first_next_throws_invalid_operation) {
  auto gen = count_to(3);
  EXPECT_EQ(take_one(gen).get(), 0);
  tpl::cancellation_token_source cts;
  EXPECT_THROW(gen.with_cancellation(cts.token()), tpl::invalid_operation);
}

// ---- stack use ---------------------------------------------------------------------------------

constexpr int kMillion = 1'000'000;

async_generator<int> count_synchronously(int n, bool go_async_first, bool await_completed_tasks) {
  if (go_async_first) co_await tpl::yield();  // the consumer is resumed from here, on the pool
  for (int i = 0; i < n; ++i) {
    if (await_completed_tasks) co_await tpl::completed_task();  // ready: no suspension
    co_yield i;
  }
}

tpl::task<long long> sum_all(async_generator<int> gen) {
  long long sum = 0;
  while (int* item = co_await gen.next()) sum += *item;
  co_return sum;
}

bool million_items_sum_up(bool go_async_first, bool await_completed_tasks) {
  const long long expected = static_cast<long long>(kMillion) * (kMillion - 1) / 2;
  return check_eq(sum_all(count_synchronously(kMillion, go_async_first, await_completed_tasks)).get(),
                  expected, "sum of a million items");
}

TEST(AsyncGenerator, a_million_synchronous_yields_in_a_row_do_not_grow_the_stack) {
  expect_passes_in_a_child_process([] { return million_items_sum_up(false, false); });
}

TEST(AsyncGenerator, a_million_yields_each_after_a_ready_await_do_not_grow_the_stack) {
  expect_passes_in_a_child_process([] { return million_items_sum_up(false, true); });
}

TEST(AsyncGenerator, a_million_synchronous_yields_after_the_body_went_asynchronous_do_not_grow_the_stack) {
  expect_passes_in_a_child_process([] { return million_items_sum_up(true, false); });
}

TEST(AsyncGenerator, many_asynchronous_steps_each_resuming_the_consumer_do_not_grow_the_stack) {
  expect_passes_in_a_child_process([] {
    const int n = tpl_test::scaled(200'000, 50'000);
    const long long expected = static_cast<long long>(n) * (n - 1) / 2;
    return check_eq(sum_all(hop_through_the_pool(n)).get(), expected, "sum");
  });
}

// ---- channel_reader::read_all_async ------------------------------------------------------------

TEST(ChannelReadAllAsync, yields_every_item_until_the_channel_is_completed_and_drained) {
  auto ch = tpl::make_unbounded_channel<int>();
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(ch.writer().try_write(i));
  ch.writer().complete();
  auto items = ch.reader().read_all_async();
  EXPECT_EQ(collect(items).get(), (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(ChannelReadAllAsync, items_written_while_the_consumer_waits_reach_it_in_order) {
  auto ch = tpl::make_bounded_channel<int>(2);
  auto items = ch.reader().read_all_async();
  auto consumer = collect(items);
  EXPECT_FALSE(consumer.is_completed());
  tpl::task<> producer = [](tpl::channel_writer<int> w) -> tpl::task<> {
    for (int i = 0; i < 100; ++i) co_await w.write_async(i);
    w.complete();
  }(ch.writer());
  producer.wait();
  std::vector<int> got = consumer.get();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i], i);
}

TEST(ChannelReadAllAsync, a_completion_error_is_rethrown_after_the_items) {
  auto ch = tpl::make_unbounded_channel<int>();
  ch.writer().try_write(1);
  ch.writer().try_write(2);
  ch.writer().complete(std::make_exception_ptr(test_error(9)));
  auto items = ch.reader().read_all_async();
  std::exception_ptr error;
  EXPECT_EQ(collect_until_error(items, error).get(), (std::vector<int>{1, 2}));
  EXPECT_TRUE(holds<test_error>(error));
}

TEST(ChannelReadAllAsync, canceling_the_token_ends_a_waiting_next_and_takes_no_item) {
  for (bool through_with_cancellation : {false, true}) {
    auto ch = tpl::make_unbounded_channel<int>();
    tpl::cancellation_token_source cts;
    tpl::cancellation_token_source other;  // linked with cts's in the second round
    auto items = through_with_cancellation
                     ? ch.reader().read_all_async(other.token()).with_cancellation(cts.token())
                     : ch.reader().read_all_async(cts.token());
    ch.writer().try_write(1);
    std::exception_ptr error;
    auto consumer = collect_until_error(items, error);
    ASSERT_FALSE(consumer.is_completed());  // has 1, waits for more

    cts.cancel();
    EXPECT_EQ(consumer.get(), (std::vector<int>{1}));
    EXPECT_TRUE(holds<tpl::operation_canceled>(error));
    ch.writer().try_write(2);
    EXPECT_EQ(ch.reader().try_read(), std::optional<int>(2));  // the canceled wait took nothing
  }
}

TEST(ChannelReadAllAsync, move_only_items_are_moved_through) {
  auto ch = tpl::make_unbounded_channel<std::unique_ptr<int>>();
  ch.writer().try_write(std::make_unique<int>(4));
  ch.writer().complete();
  auto items = ch.reader().read_all_async();
  auto got = collect(items).get();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(*got[0], 4);
}

TEST(ChannelReadAllAsync, on_an_empty_reader_handle_throws_invalid_operation) {
  tpl::channel_reader<int> empty;
  EXPECT_THROW((void)empty.read_all_async(), tpl::invalid_operation);
}

// ---- when_each ---------------------------------------------------------------------------------

tpl::task<std::vector<int>> results_in_order(async_generator<tpl::task<int>>& gen) {
  std::vector<int> results;
  while (tpl::task<int>* t = co_await gen.next()) {
    if (!t->is_completed()) co_return {};  // when_each must yield completed tasks only
    results.push_back(co_await *t);
  }
  co_return results;
}

TEST(WhenEach, yields_the_tasks_in_the_order_they_complete) {
  tpl::task_completion_source<int> a;
  tpl::task_completion_source<int> b;
  tpl::task_completion_source<int> c;
  auto gen = tpl::when_each(a.get_task(), b.get_task(), c.get_task());
  auto consumer = results_in_order(gen);
  EXPECT_FALSE(consumer.is_completed());
  c.set_result(3);
  a.set_result(1);
  b.set_result(2);
  EXPECT_EQ(consumer.get(), (std::vector<int>{3, 1, 2}));
}

TEST(WhenEach, tasks_completed_before_the_call_come_first_in_argument_order) {
  tpl::task_completion_source<int> pending;
  std::vector<tpl::task<int>> tasks{pending.get_task(), tpl::task_from_result(10), tpl::task_from_result(20)};
  auto gen = tpl::when_each(tasks);
  pending.set_result(0);  // completes after the call: last
  EXPECT_EQ(results_in_order(gen).get(), (std::vector<int>{10, 20, 0}));
}

tpl::task<std::vector<tpl::task_status>> statuses(async_generator<tpl::task<int>> gen) {
  std::vector<tpl::task_status> seen;
  while (tpl::task<int>* t = co_await gen.next()) seen.push_back(t->status());
  co_return seen;
}

TEST(WhenEach, faulted_and_canceled_tasks_are_yielded_not_thrown) {
  tpl::task_completion_source<int> faulted;
  tpl::task_completion_source<int> canceled;
  tpl::task<std::vector<tpl::task_status>> consumer =
      statuses(tpl::when_each(std::vector{faulted.get_task(), canceled.get_task()}));
  canceled.set_canceled();
  faulted.set_exception(std::make_exception_ptr(test_error(1)));
  EXPECT_EQ(consumer.get(),
            (std::vector<tpl::task_status>{tpl::task_status::canceled, tpl::task_status::faulted}));
}

TEST(WhenEach, tasks_completing_on_pool_threads_during_the_call_are_each_yielded_once) {
  constexpr int tasks_per_round = 16;
  for (int round = 0; round < tpl_test::scaled(300, 50); ++round) {
    std::vector<tpl::task<int>> tasks;
    for (int i = 0; i < tasks_per_round; ++i) tasks.push_back(tpl::run([i] { return i; }));
    auto gen = tpl::when_each(tasks);  // races with the completions
    std::vector<int> results = results_in_order(gen).get();
    std::sort(results.begin(), results.end());
    std::vector<int> expected(tasks_per_round);
    std::iota(expected.begin(), expected.end(), 0);
    ASSERT_EQ(results, expected) << "round " << round;
  }
}

TEST(WhenEach, an_empty_range_gives_an_empty_sequence) {
  auto gen = tpl::when_each(std::vector<tpl::task<int>>{});
  EXPECT_TRUE(results_in_order(gen).get().empty());
}

TEST(WhenEach, an_empty_task_handle_throws_invalid_operation_in_the_call) {
  EXPECT_THROW((void)tpl::when_each(tpl::task_from_result(1), tpl::task<int>{}), tpl::invalid_operation);
  EXPECT_THROW((void)tpl::when_each(std::vector<tpl::task<int>>(2)), tpl::invalid_operation);
}

TEST(WhenEach, with_cancellation_ends_a_waiting_next_with_operation_canceled) {
  tpl::task_completion_source<int> never;
  tpl::cancellation_token_source cts;
  auto gen = tpl::when_each(std::vector{tpl::task_from_result(1), never.get_task()}).with_cancellation(cts.token());
  std::exception_ptr error;
  auto consumer = collect_until_error(gen, error);
  ASSERT_FALSE(consumer.is_completed());
  cts.cancel();
  std::vector<tpl::task<int>> got = consumer.get();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].get(), 1);
  EXPECT_TRUE(holds<tpl::operation_canceled>(error));
  EXPECT_FALSE(never.get_task().is_completed());  // the tasks themselves are not canceled
}

tpl::task<int> first_result(async_generator<tpl::task<int>>& gen) {
  tpl::task<int>* t = co_await gen.next();
  co_return co_await *t;
}

TEST(WhenEach, stopping_early_takes_the_registrations_back_from_long_lived_tasks) {
  tpl::task_completion_source<int> long_lived_source;
  tpl::task<int> long_lived = long_lived_source.get_task();
  const std::uint32_t baseline_refs = ref_count(long_lived);

  for (int i = 0; i < 1000; ++i) {
    tpl::task_completion_source<int> tcs;
    auto gen = tpl::when_each(long_lived, tcs.get_task());
    tpl::task<int> first = first_result(gen);
    tcs.set_result(i);
    ASSERT_EQ(first.get(), i);
  }  // gen goes here, on this thread, while long_lived is still running
  // No generator is left: none of them still holds the long-lived task through a registration.
  EXPECT_EQ(ref_count(long_lived), baseline_refs);
  long_lived_source.set_result(-1);
  EXPECT_EQ(long_lived.get(), -1);
}

}  // namespace

}  // namespace async_generator_test_cpp
