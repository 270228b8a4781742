// Exhaustive model check of async_generator's consumer/producer handshake
// (include/tpl/async_generator.hpp, detail::async_generator_promise): one atomic byte, idle ->
// running -> (consumer_waiting) -> delivered -> idle, ..., finished.
//
// The consumer makes kItems + 1 next() calls (the last one gets the end). Steps are the atomic
// actions of the real code: start_next()'s CAS idle -> running; the resumption of the body, which
// either yields before it ever suspends (it stores `delivered` and the item on the consumer's own
// stack: one step) or suspends (then another thread runs it on, as an independent actor);
// start_next()'s load; suspend_consumer()'s CAS running -> consumer_waiting; take_next(). The body
// that went asynchronous delivers with one exchange and, if it found consumer_waiting, resumes the
// consumer as its next step.
//
// Checked in every state: the consumer takes only an item delivered for its current next(); a
// resumption finds the body suspended at a co_yield; the body resumes only a suspended consumer.
// Checked in every terminal state: the consumer got every item and the end (no lost wake-up).
// Known-bad variants each yield a counterexample: an asynchronous body that stores `delivered`
// without looking for a waiting consumer (the synchronous path's store, taken without the
// went_async_ test); a consumer that suspends with a plain store instead of the CAS; a consumer
// that takes the item as soon as the body's resume() returns, without reading the state.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model_check.hpp"

namespace model_async_generator_test_cpp {

namespace {

enum class variant : std::uint8_t {
  real,
  async_body_stores_delivered,
  consumer_suspends_with_store,
  consumer_trusts_resume,
};

enum word : std::uint8_t { idle, running, consumer_waiting, delivered, finished };

enum consumer_pc : std::uint8_t { c_cas, c_resume, c_load, c_suspend, c_suspended, c_take, c_done };
enum producer_pc : std::uint8_t { p_suspended, p_async, p_resume_consumer, p_ended };

constexpr std::uint8_t kNoItem = 0xff;

struct state {
  std::uint8_t w = idle;
  std::uint8_t c = c_cas;
  std::uint8_t c_step = 0;  // which next() the consumer is in
  std::uint8_t p = p_suspended;
  std::uint8_t p_step = 0;  // which next() the body answers next
  std::uint8_t item = kNoItem;

  std::uint64_t key() const {
    return (std::uint64_t{w} << 40) | (std::uint64_t{c} << 32) | (std::uint64_t{c_step} << 24) |
           (std::uint64_t{p} << 16) | (std::uint64_t{p_step} << 8) | item;
  }
};

struct checker : model_check::recursion<std::uint64_t> {
  variant v;
  int items;

  bool step(const state& n, const std::string& what) {
    trace.push_back(what);
    const bool ok = explore(n);
    if (ok) trace.pop_back();
    return ok;
  }

  // The body publishes the answer to next() number p_step (an item, or the end).
  static void publish(state& n) { n.item = n.p_step++; }

  bool explore(const state& s) {
    if (!first_visit(s.key())) return true;
    bool any = false;

    // ---- consumer ----
    switch (s.c) {
      case c_cas: {
        any = true;
        if (s.w != idle) return fail("start_next's CAS failed for the only consumer");
        state n = s;
        n.w = running;
        n.c = c_resume;
        if (!step(n, "C: CAS idle -> running")) return false;
        break;
      }
      case c_resume: {
        any = true;
        if (s.p != p_suspended) return fail("next() resumed a body that is not suspended at a yield");
        const std::uint8_t after = v == variant::consumer_trusts_resume ? c_take : c_load;
        state sync = s;  // the body yields before it ever suspends: on this stack
        publish(sync);
        sync.w = delivered;
        sync.p = sync.item == items ? p_ended : p_suspended;
        sync.c = after;
        if (!step(sync, "C: resume; the body yields synchronously")) return false;
        state async = s;  // the body suspends in a co_await; another thread runs it on
        async.p = p_async;
        async.c = after;
        if (!step(async, "C: resume; the body suspends in a co_await")) return false;
        break;
      }
      case c_load: {
        any = true;
        state n = s;
        n.c = s.w == delivered ? c_take : c_suspend;
        if (!step(n, n.c == c_take ? "C: load: delivered" : "C: load: not yet")) return false;
        break;
      }
      case c_suspend: {
        any = true;
        state n = s;
        if (v == variant::consumer_suspends_with_store) {
          n.w = consumer_waiting;
          n.c = c_suspended;
        } else if (s.w == running) {
          n.w = consumer_waiting;
          n.c = c_suspended;
        } else {
          n.c = c_take;  // the CAS failed: delivered meanwhile
        }
        if (!step(n, n.c == c_suspended ? "C: suspend (waiting)" : "C: CAS failed, go on")) return false;
        break;
      }
      case c_take: {
        any = true;
        if (s.item != s.c_step) return fail("the consumer took an item not delivered for its next()");
        if (s.w != delivered) return fail("the consumer took an item while the word is not `delivered`");
        state n = s;
        n.item = kNoItem;
        if (s.c_step == items) {
          n.w = finished;
          n.c = c_done;
        } else {
          n.w = idle;
          n.c = c_cas;
          ++n.c_step;
        }
        if (!step(n, "C: take item " + std::to_string(s.c_step))) return false;
        break;
      }
      default:
        break;
    }

    // ---- the body, after it went asynchronous ----
    if (s.p == p_async) {
      any = true;
      state n = s;
      publish(n);
      const bool ended = n.item == items;
      if (v == variant::async_body_stores_delivered) {
        n.w = delivered;
        n.p = ended ? p_ended : p_suspended;
      } else {
        const std::uint8_t old = n.w;
        n.w = delivered;
        n.p = old == consumer_waiting ? p_resume_consumer : (ended ? p_ended : p_suspended);
      }
      if (!step(n, "P: deliver " + std::to_string(n.item))) return false;
    } else if (s.p == p_resume_consumer) {
      any = true;
      if (s.c != c_suspended) return fail("the body resumed a consumer that is not suspended");
      state n = s;
      n.c = c_take;
      n.p = n.item == items ? p_ended : p_suspended;
      if (!step(n, "P: resume the consumer")) return false;
    }

    if (!any && s.c != c_done) return fail("terminal state with the consumer not done (lost wake-up)");
    return true;
  }

  void print_trace() const {
    for (const auto& t : trace) std::fprintf(stderr, "  %s\n", t.c_str());
  }
};

checker run(variant v, int items) {
  checker ch{{}, v, items};
  ch.explore(state{});
  return ch;
}

TEST(model_async_generator, every_interleaving_delivers_each_item_once_and_loses_no_wakeup) {
  for (int items = 0; items <= 4; ++items) {
    checker ch = run(variant::real, items);
    EXPECT_TRUE(ch.failure.empty()) << items << " items: " << ch.failure;
    if (!ch.failure.empty()) ch.print_trace();
    std::printf("[model] async_generator, %d items + end: %zu states\n", items, ch.states);
  }
}

TEST(model_async_generator, known_bad_variants_yield_a_counterexample) {
  for (variant v : {variant::async_body_stores_delivered, variant::consumer_suspends_with_store,
                    variant::consumer_trusts_resume}) {
    checker ch = run(v, 2);
    EXPECT_FALSE(ch.failure.empty()) << "variant " << static_cast<int>(v) << " passed";
    if (!ch.failure.empty())
      std::printf("[model] variant %d: %s (trace of %zu steps)\n", static_cast<int>(v), ch.failure.c_str(),
                  ch.trace.size());
  }
}

}  // namespace

}  // namespace model_async_generator_test_cpp
