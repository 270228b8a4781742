// Exhaustive model check of the socket engine's lent poll duty (src/net/socket_engine.cpp:
// run()'s lend and sleep_while_lent, process_events' poll_lent, reclaim_lent; poll_duty.hpp),
// together with the batch hand-off it rides on (net_model_batch_test.cpp checks that hand-off
// alone).
//
// Threads (each step is one atomic action of the real code; a locked section is one step):
//   - the network: delivers kArrivals readiness edges to the kernel, one at a time, whenever.
//   - the engine thread: blocks in the source's wait until the kernel has events; takes them all,
//     pushes them on the ready queue (one locked step), stores duty = lent, requests processing,
//     then sleeps on the duty word: it reads the word, goes back to waiting in the source if it
//     says "engine", else calls futex_wait with the value read, which returns at once if the word
//     moved, and otherwise sleeps until a futex wake.
//   - the pool: starts any queued batch item at any time.
//   - a batch item: clears processing_requested, pops; when the queue is dry it tries
//     poll_lent: CAS duty lent -> polling; on success it polls the kernel without blocking
//     (taking every event there, possibly none) any number of times; with events it pushes
//     them, stores duty = lent, pops one (requesting a helper if more remain) and handles it;
//     with none and its window over, it leaves: stores duty = lent (seq_cst), reads
//     processing_requested (seq_cst) and, if no item is queued to take the duty, takes it back
//     for the engine (CAS lent -> engine, then a futex wake). (The model also lets it give the
//     duty straight back, store engine then wake, which the code did before.)
//     A handler either returns or blocks for good; before it blocks, the pool's blocking hook
//     (reclaim_lent: CAS lent -> engine, then a futex wake) runs.
//
// Checked: in every state, at most one thread uses the source (the engine between its wait and
// its lend, an item between its CAS and its store); in every terminal state (nobody can move;
// blocked handlers never move), the kernel holds no event and the ready queue is empty, and the
// engine thread is back in its wait, so a later edge is seen too. Known-bad variants must each
// yield a counterexample: a handler that blocks without the hook (untracked blocking; the real
// engine covers it with its watchdog, which the watchdog variant adds and which must pass); an
// item that gives the duty back without the futex wake; an item that keeps the duty (polling)
// while it runs the handler; an engine that lends after requesting processing (the item it
// requested may have found the queue dry and ended before the duty was lent: nobody takes it); an
// item that ends when another took the events it polled before it lent the duty again (that
// other item found the duty still held, and ended); an item that, leaving with nothing polled,
// reads processing_requested before it lends the duty instead of after (the queued item it
// counted on may clear the flag, find the duty still held and end in between).
//
// The model's steps are sequentially consistent: the real lend store and the item's CAS are
// seq_cst for this reason (socket_engine.cpp, "Lent poll duty").
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../model_check.hpp"

namespace net_model_poll_duty_test_cpp {

namespace {

enum class variant : std::uint8_t { real, untracked_block, untracked_block_watchdog, no_wake, hold_across_handler, lend_after_request, end_after_relend,
                             check_before_lend };

enum duty_word : std::uint8_t { d_engine, d_lent, d_polling };

enum engine_pc : std::uint8_t {
  e_wait,     // blocked in the source until the kernel has events (uses the source)
  e_push,     // push the batch (uses the source's batch)
  e_lend,     // end_batch, then store duty = lent (seq_cst: before the request below)
  e_request,  // request processing
  e_read,     // read the duty word
  e_futex,    // futex_wait(seen): returns at once if the word moved, else sleeps
  e_asleep,   // asleep in the futex until a wake
};

enum item_pc : std::uint8_t {
  i_clear,        // processing_requested = false
  i_pop_first,    // the first pop; dry -> try the lent duty; more -> request a helper
  i_next,         // the loop's pop (no helper); dry -> try the lent duty
  i_try,          // CAS duty lent -> polling; ends on failure
  i_poll,         // poll the kernel without blocking (holds the duty)
  i_push,         // push what the poll took (holds the duty)
  i_relend,       // store duty = lent (holds the duty until it is stored)
  i_pop_own,      // pop one of them (a helper if more remain); nothing left -> try the duty again
  i_request,      // a helper: exchange the flag, queue an item if it was false
  i_handle,       // run the handler: returns, blocks for good, or its time slice ends
  i_slice,        // time slice over: request a helper, then end
  i_hook,         // the blocking hook: CAS lent -> engine, futex wake; then block
  i_giveback,     // store duty = engine (holds the duty until it is stored)
  i_leave_lend,   // leaving with an item queued maybe: store duty = lent (seq_cst)
  i_leave_check,  // ... then load processing_requested: set -> end (that item takes the duty)
  i_leave_take,   // ... clear -> CAS duty lent -> engine (+ futex wake), then end
  i_wake,         // futex wake of the engine, then end
  i_blocked,      // a handler that never returns
  i_held_pop,     // hold_across_handler: pops one while still polling
  i_held_handle,  // hold_across_handler: runs the handler while holding the duty
  i_held_relend,  // hold_across_handler: stores duty = lent after the handler
  kItemPcs
};

constexpr std::uint8_t kNoSeen = 3;

struct state {
  std::uint8_t arrivals_left;
  std::uint8_t kernel = 0;      // edges the kernel holds, not yet taken by a poll or wait
  std::uint8_t queue = 0;       // events on the ready queue
  std::uint8_t engine_batch = 0;
  std::uint8_t item_batch = 0;  // what the polling item took (one holder at a time)
  std::uint8_t flag = 0;        // processing_requested
  std::uint8_t queued_items = 0;
  std::uint8_t duty = d_engine;
  std::uint8_t engine = e_wait;
  std::uint8_t seen = kNoSeen;  // the engine's read of the duty word
  std::array<std::uint8_t, kItemPcs> items{};
};
static_assert(std::is_trivially_copyable_v<state>);

struct model {
  variant v;

  static void request(state& n) {
    if (!n.flag) ++n.queued_items;
    n.flag = 1;
  }
  // A futex wake: an engine asleep in the futex wakes up; a wake with nobody asleep is lost (the
  // kernel keeps none), which is safe only because every waker changes the word first and
  // futex_wait re-checks it.
  static void wake(state& n) {
    if (n.engine == e_asleep) n.engine = e_read, n.seen = kNoSeen;
  }
  static void move(state& n, item_pc from, int to) {
    --n.items[from];
    if (to != kItemPcs) ++n.items[to];
  }

  void successors(const state& s, std::vector<state>& out, std::vector<std::string>& why, std::string& error) const {
    // Exclusion: who holds the duty (uses the source) now.
    int holders = (s.engine == e_wait || s.engine == e_push || (s.engine == e_lend) ||
                   (v == variant::lend_after_request && s.engine == e_request)) ? 1 : 0;
    for (item_pc pc : {i_poll, i_push, i_relend, i_giveback, i_leave_lend, i_held_pop, i_held_handle, i_held_relend})
      holders += s.items[pc];
    if (v == variant::check_before_lend) holders += s.items[i_leave_check];
    if (holders > 1) {
      error = "two threads hold the poll duty (use the readiness source) at once";
      return;
    }
    auto add = [&](const state& n, std::string w) {
      out.push_back(n);
      why.push_back(std::move(w));
    };
    // The network.
    if (s.arrivals_left > 0) {
      state n = s;
      --n.arrivals_left, ++n.kernel;
      add(n, "network: an edge arrives");
    }
    // The engine thread.
    {
      state n = s;
      switch (static_cast<engine_pc>(s.engine)) {
        case e_wait:
          if (s.kernel > 0) {
            n.engine_batch = s.kernel, n.kernel = 0, n.engine = e_push;
            add(n, "engine: wait returns the kernel's events");
          }
          break;
        case e_push:
          n.queue = static_cast<std::uint8_t>(n.queue + n.engine_batch), n.engine_batch = 0;
          n.engine = v == variant::lend_after_request ? e_request : e_lend;
          add(n, "engine: pushes the batch");
          break;
        case e_lend:
          n.duty = d_lent, n.engine = v == variant::lend_after_request ? e_read : e_request;
          add(n, "engine: duty = lent");
          break;
        case e_request:
          request(n), n.engine = v == variant::lend_after_request ? e_lend : e_read;
          add(n, "engine: requests processing");
          break;
        case e_read:
          if (s.duty == d_engine) {
            n.engine = e_wait;
            add(n, "engine: reads duty = engine, back to its wait");
          } else {
            n.seen = s.duty, n.engine = e_futex;
            add(n, "engine: reads the duty (not engine)");
          }
          break;
        case e_futex:
          if (s.duty != s.seen) {
            n.engine = e_read, n.seen = kNoSeen;
            add(n, "engine: futex_wait returns at once (the word moved)");
          } else {
            n.engine = e_asleep;
            add(n, "engine: asleep in futex_wait");
          }
          break;
        case e_asleep:
          if (v == variant::untracked_block_watchdog && s.duty == d_lent) {
            n.duty = d_engine, n.engine = e_wait, n.seen = kNoSeen;
            add(n, "engine: the watchdog takes the lent duty back");
          }
          break;
      }
    }
    // The pool starts a queued item.
    if (s.queued_items > 0) {
      state n = s;
      --n.queued_items, ++n.items[i_clear];
      add(n, "pool: starts a batch item");
    }
    // The items.
    for (int pc = 0; pc < kItemPcs; ++pc) {
      if (s.items[pc] == 0) continue;
      const auto from = static_cast<item_pc>(pc);
      auto step = [&](const char* w, auto&& change) {
        state n = s;
        change(n);
        add(n, std::string("item: ") + w);
      };
      switch (from) {
        case i_clear:
          step("clears the flag", [&](state& n) { n.flag = 0, move(n, from, i_pop_first); });
          break;
        case i_pop_first:
          step("pops (first)", [&](state& n) {
            if (n.queue == 0) return move(n, from, i_try);
            --n.queue;
            move(n, from, n.queue > 0 ? i_request : i_handle);
          });
          break;
        case i_next:
          step("pops (loop)", [&](state& n) {
            if (n.queue == 0) return move(n, from, i_try);
            --n.queue;
            move(n, from, i_handle);
          });
          break;
        case i_try:
          step("tries the lent duty", [&](state& n) {
            if (n.duty != d_lent) return move(n, from, kItemPcs);
            n.duty = d_polling;
            move(n, from, i_poll);
          });
          break;
        case i_poll:
          if (s.kernel > 0) {
            step("polls the kernel's events", [&](state& n) {
              n.item_batch = n.kernel, n.kernel = 0;
              move(n, from, i_push);
            });
          } else {
            // An empty poll changes nothing (polling again is this same state); the window may end.
            step("polls nothing; its window is over", [&](state& n) { move(n, from, i_giveback); });
            step("polls nothing; its window is over, it leaves the duty lent if an item is queued",
                 [&](state& n) { move(n, from, v == variant::check_before_lend ? i_leave_check : i_leave_lend); });
          }
          break;
        case i_push:
          step("pushes what it polled", [&](state& n) {
            n.queue = static_cast<std::uint8_t>(n.queue + n.item_batch), n.item_batch = 0;
            move(n, from, v == variant::hold_across_handler ? i_held_pop : i_relend);
          });
          break;
        case i_relend:
          step("duty = lent", [&](state& n) { n.duty = d_lent, move(n, from, i_pop_own); });
          break;
        case i_pop_own:
          step("pops one of its own", [&](state& n) {
            if (n.queue == 0) return move(n, from, v == variant::end_after_relend ? kItemPcs : i_try);
            --n.queue;
            move(n, from, n.queue > 0 ? i_request : i_handle);
          });
          break;
        case i_request:
          step("requests a helper", [&](state& n) { request(n), move(n, from, i_handle); });
          break;
        case i_handle:
          step("the handler returns", [&](state& n) { move(n, from, i_next); });
          step("the handler returns; time slice over", [&](state& n) { move(n, from, i_slice); });
          if (v == variant::untracked_block || v == variant::untracked_block_watchdog)
            step("the handler blocks (untracked)", [&](state& n) { move(n, from, i_blocked); });
          else
            step("the handler is about to block", [&](state& n) { move(n, from, i_hook); });
          break;
        case i_slice:
          step("requests a helper (slice over), ends", [&](state& n) { request(n), move(n, from, kItemPcs); });
          break;
        case i_hook:
          step("the blocking hook, then blocks", [&](state& n) {
            if (n.duty == d_lent) n.duty = d_engine, wake(n);
            move(n, from, i_blocked);
          });
          break;
        case i_leave_lend:
          step("duty = lent (leaving)", [&](state& n) {
            n.duty = d_lent;
            move(n, from, v == variant::check_before_lend ? kItemPcs : i_leave_check);
          });
          break;
        case i_leave_check:
          step("reads processing_requested", [&](state& n) {
            if (v == variant::check_before_lend) return move(n, from, n.flag ? i_leave_lend : i_giveback);
            move(n, from, n.flag ? kItemPcs : i_leave_take);
          });
          break;
        case i_leave_take:
          step("takes the lent duty back for the engine", [&](state& n) {
            if (n.duty == d_lent) n.duty = d_engine, wake(n);
            move(n, from, kItemPcs);
          });
          break;
        case i_giveback:
          step("duty = engine", [&](state& n) { n.duty = d_engine, move(n, from, v == variant::no_wake ? kItemPcs : i_wake); });
          break;
        case i_wake:
          step("wakes the engine's futex", [&](state& n) { wake(n), move(n, from, kItemPcs); });
          break;
        case i_held_pop:
          step("pops one, still polling", [&](state& n) {
            if (n.queue == 0) return move(n, from, i_held_relend);
            --n.queue;
            if (n.queue > 0) request(n);
            move(n, from, i_held_handle);
          });
          break;
        case i_held_handle:
          step("the handler returns (duty held)", [&](state& n) { move(n, from, i_held_relend); });
          step("the handler is about to block (duty held)", [&](state& n) { move(n, from, i_hook); });
          break;
        case i_held_relend:
          step("duty = lent (after the handler)", [&](state& n) { n.duty = d_lent, move(n, from, i_next); });
          break;
        case i_blocked:
        case kItemPcs:
          break;
      }
    }
  }

  std::string check_terminal(const state& s) const {
    if (s.kernel != 0) return "an edge is left in the kernel with nobody polling";
    if (s.queue != 0) return "an event is left on the ready queue with no batch item coming";
    if (s.engine != e_wait) return "the engine sleeps with its duty lent and nobody to poll for the next edge";
    return "";
  }

  std::string summary(const state& s) const {
    static const char* duty_names[] = {"engine", "lent", "polling"};
    char buf[160];
    std::snprintf(buf, sizeof buf, "kernel=%d queue=%d duty=%s engine_pc=%d flag=%d queued_items=%d", s.kernel, s.queue,
                  duty_names[s.duty], s.engine, s.flag, s.queued_items);
    return buf;
  }
};

std::string check(variant v, std::uint8_t arrivals, model_check::stats& st) {
  state s0{};
  s0.arrivals_left = arrivals;
  return model_check::search(s0, model{v}, st);
}

TEST(net_model_poll_duty, lent_duty_leaves_no_edge_unpolled_and_one_poller_at_a_time) {
  std::size_t total = 0;
  for (std::uint8_t arrivals = 1; arrivals <= 4; ++arrivals) {
    model_check::stats st;
    EXPECT_EQ(check(variant::real, arrivals, st), "") << arrivals << " arrivals";
    total += st.states;
  }
  EXPECT_GT(total, 1'000u);  // the checker explored something worth the name
  std::printf("net_model_poll_duty: %zu states\n", total);
}

// A known-bad variant must yield a counterexample whose message names what went wrong.
void expect_counterexample(variant v, std::uint8_t arrivals, const char* symptom) {
  model_check::stats st;
  const std::string bad = check(v, arrivals, st);
  ASSERT_NE(bad, "");
  EXPECT_NE(bad.find(symptom), std::string::npos) << bad;
}

TEST(net_model_poll_duty, an_untracked_blocking_handler_needs_the_watchdog) {
  expect_counterexample(variant::untracked_block, 2, "nobody");
  model_check::stats st;
  EXPECT_EQ(check(variant::untracked_block_watchdog, 2, st), "");
}

TEST(net_model_poll_duty, giving_the_duty_back_without_the_futex_wake_leaves_the_engine_asleep) {
  expect_counterexample(variant::no_wake, 2, "engine sleeps");
}

TEST(net_model_poll_duty, lending_after_the_request_leaves_the_duty_with_nobody) {
  expect_counterexample(variant::lend_after_request, 1, "engine sleeps");
}

TEST(net_model_poll_duty, ending_when_a_helper_took_the_polled_events_leaves_the_duty_with_nobody) {
  expect_counterexample(variant::end_after_relend, 3, "engine sleeps");
}

TEST(net_model_poll_duty, reading_the_flag_before_lending_when_leaving_leaves_the_duty_with_nobody) {
  expect_counterexample(variant::check_before_lend, 2, "engine sleeps");
}

TEST(net_model_poll_duty, holding_the_duty_across_a_handler_strands_edges_when_it_blocks) {
  expect_counterexample(variant::hold_across_handler, 2, "nobody");
}

}  // namespace

}  // namespace net_model_poll_duty_test_cpp
