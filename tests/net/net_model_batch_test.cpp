// Exhaustive model check of the socket engine's batch hand-off (src/net/socket_engine.cpp: run()'s
// push-then-request, process_events, request_processing) in the default mode.
//
// Threads (each step is one atomic action of the real code; a locked section is one step):
//   - the engine thread: kBatches epoll_wait batches, each of a given number of events. Per batch:
//     push every event under queue_lock (one step), then exchange processing_requested to true;
//     if it was false, queue one batch item.
//   - the pool: any queued item may start at any time (a free worker, or one the pool injects for
//     a handler that blocks inside a blocking_scope).
//   - a batch item: clears processing_requested (seq_cst), pops one event under queue_lock,
//     learning in the same locked section whether events remain; ends if there was none. If events
//     remain it requests a helper (the engine's exchange: queue an item if the flag was false).
//     It handles the event, which may block for good (a handler waiting for something that never
//     comes); otherwise it pops the next event, or its time slice is over: it requests a helper
//     and ends.
//
// Checked in every terminal state (nobody can move; a blocked handler never moves): the ready
// queue is empty, i.e. no event was left queued with no item coming for it, however many
// handlers block. Known-bad variants must each yield a counterexample: the flag cleared after the
// first pop (an item that found the queue empty ends after the engine saw the flag still set);
// no helper at all (the rest of a batch waits behind a blocked handler).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../model_check.hpp"

namespace net_model_batch_test_cpp {

namespace {

enum class variant : std::uint8_t { real, always_helper, clear_after_pop, no_helper };

// A batch item's program counter; the state counts the items at each one (items are alike).
enum item_pc : std::uint8_t {
  i_clear,          // store processing_requested = false
  i_pop_first,      // pop; remember whether more remain
  i_request,        // a helper: exchange the flag, queue an item if it was false
  i_handle,         // handle the event: may block for good
  i_next,           // pop the next event, or time slice over
  i_slice_request,  // time slice over: request a helper, then end
  i_late_clear,     // clear_after_pop: the clear after a first pop that found an event
  i_late_clear_end, // clear_after_pop: the clear after a first pop that found none, then end
  i_late_request,   // clear_after_pop: after the late clear, the helper request
  i_blocked,        // a handler that never returns
  kPcs
};

struct state {
  std::uint8_t queue = 0;           // events in the ready queue
  bool flag = false;                // processing_requested
  std::uint8_t queued_items = 0;    // items queued on the pool, not yet started
  std::uint8_t batch = 0;           // the engine's next batch
  bool engine_pushed = false;       // the engine pushed `batch` and has yet to request
  std::array<std::uint8_t, kPcs> items{};

  std::uint64_t key() const {
    std::uint64_t k = 0;
    auto put = [&](std::uint64_t v, int bits) { k = (k << bits) | v; };
    put(queue, 3), put(flag, 1), put(queued_items, 3), put(batch, 2), put(engine_pushed, 1);
    for (std::uint8_t c : items) put(c, 3);
    return k;
  }
};

struct checker : model_check::recursion<std::uint64_t> {
  explicit checker(variant which) : v(which) {}
  variant v;

  // request_processing(): exchange the flag to true; queue an item if it was false.
  static void request(state& n) {
    if (!n.flag) ++n.queued_items;
    n.flag = true;
  }

  static void move(state& n, item_pc from, item_pc to) {
    --n.items[from];
    if (to != kPcs) ++n.items[to];
  }

  void successors(const state& s, const std::vector<int>& batches, std::vector<state>& out) const {
    out.clear();
    // The engine thread.
    if (s.batch < batches.size()) {
      state n = s;
      if (!s.engine_pushed) {
        n.queue = static_cast<std::uint8_t>(n.queue + batches[s.batch]);
        n.engine_pushed = true;
      } else {
        request(n);
        n.engine_pushed = false;
        ++n.batch;
      }
      out.push_back(n);
    }
    // The pool starts a queued item.
    if (s.queued_items > 0) {
      state n = s;
      --n.queued_items;
      ++n.items[v == variant::clear_after_pop ? i_pop_first : i_clear];
      out.push_back(n);
    }
    // The items, one step of one item at each pc.
    for (int pc = 0; pc < kPcs; ++pc) {
      if (s.items[pc] == 0) continue;
      const auto from = static_cast<item_pc>(pc);
      auto step = [&](auto&& change) {
        state n = s;
        change(n);
        out.push_back(n);
      };
      switch (from) {
        case i_clear:
          step([&](state& n) { n.flag = false, move(n, from, i_pop_first); });
          break;
        case i_pop_first:
          step([&](state& n) {
            if (n.queue == 0) {
              move(n, from, v == variant::clear_after_pop ? i_late_clear_end : kPcs);
              return;
            }
            --n.queue;
            const bool more = n.queue > 0;
            if (v == variant::clear_after_pop) move(n, from, i_late_clear);
            else if (v == variant::no_helper) move(n, from, i_handle);
            else if (v == variant::always_helper || more) move(n, from, i_request);
            else move(n, from, i_handle);
          });
          break;
        case i_late_clear:
          step([&](state& n) { n.flag = false, move(n, from, i_late_request); });
          break;
        case i_late_clear_end:
          step([&](state& n) { n.flag = false, move(n, from, kPcs); });
          break;
        case i_request:
        case i_late_request:
          step([&](state& n) { request(n), move(n, from, i_handle); });
          break;
        case i_handle:
          step([&](state& n) { move(n, from, i_blocked); });
          step([&](state& n) { move(n, from, i_next); });
          break;
        case i_next:
          step([&](state& n) {  // the loop's pop: no helper here
            if (n.queue == 0) {
              move(n, from, kPcs);
              return;
            }
            --n.queue;
            move(n, from, i_handle);
          });
          if (v != variant::no_helper) step([&](state& n) { move(n, from, i_slice_request); });
          break;
        case i_slice_request:
          step([&](state& n) { request(n), move(n, from, kPcs); });
          break;
        case i_blocked:
        case kPcs:
          break;
      }
    }
  }

  bool run(const std::vector<int>& batches) {
    return explore_from(
        state{}, [&](const state& s, std::vector<state>& next) { successors(s, batches, next); },
        [](const state& s) -> std::string {
          return s.queue != 0 ? "an event is left in the ready queue with no batch item coming" : "";
        });
  }
};

// Batch sizes per configuration (at most 7 events in all: the queue's 3 bits).
const std::vector<std::vector<int>> kConfigurations = {
    {1}, {2}, {3}, {1, 1}, {2, 1}, {1, 2}, {2, 2}, {1, 1, 1}, {2, 1, 2}, {3, 3},
};

bool all_pass(variant v, std::string& why, std::size_t& total) {
  for (const auto& c : kConfigurations) {
    checker k(v);
    const bool ok = k.run(c);
    total += k.states;
    if (!ok) {
      why = k.failure;
      return false;
    }
  }
  return true;
}

TEST(net_model_batch, helper_only_while_events_remain_leaves_no_event_behind) {
  std::string why;
  std::size_t total = 0;
  EXPECT_TRUE(all_pass(variant::real, why, total)) << why;
  EXPECT_GT(total, 1'000u);  // the checker explored something worth the name
  std::printf("net_model_batch: %zu states\n", total);
}

TEST(net_model_batch, a_helper_after_every_first_pop_leaves_no_event_behind) {
  std::string why;
  std::size_t total = 0;
  EXPECT_TRUE(all_pass(variant::always_helper, why, total)) << why;
}

TEST(net_model_batch, clearing_the_flag_after_the_pop_strands_an_event) {
  std::string why;
  std::size_t total = 0;
  ASSERT_FALSE(all_pass(variant::clear_after_pop, why, total));
  EXPECT_NE(why.find("no batch item coming"), std::string::npos) << why;
}

TEST(net_model_batch, no_helper_strands_the_rest_of_a_batch_behind_a_blocked_handler) {
  std::string why;
  std::size_t total = 0;
  ASSERT_FALSE(all_pass(variant::no_helper, why, total));
  EXPECT_NE(why.find("no batch item coming"), std::string::npos) << why;
}

}  // namespace

}  // namespace net_model_batch_test_cpp
