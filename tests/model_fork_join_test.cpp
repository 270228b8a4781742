// Exhaustive model check of the fork-job join (tpl/detail/fork_job.hpp, src/thread_pool/fork_join.cpp):
// the hand-off of a job queued by its invoker to whoever runs it, and the invoker's wait.
//
// Threads: the invoker and two thieves (workers that steal, or the pool's workers when the job
// was queued from outside). The deque is abstracted to what the join relies on: taking the item
// (the invoker's pop or a thief's steal) is one atomic step that succeeds for exactly one taker.
// The state word is 0, kSleeping or kDone; futex_wait checks the word and queues the invoker in
// one step (as the kernel does); futex_wake wakes the queued invoker, if any. The invoker's help
// (running other jobs) changes nothing here and is left out; its spin is "any number of looks".
//
// Checked: the job runs exactly once; the invoker returns only after it ran and, when a thief
// ran it, only after the thief's kDone (so the results are published); every terminal state has
// the invoker returned (no lost wake-up). Both entries are explored: a job on the invoker's own
// deque (pop first) and one queued from outside (wait only). Known-bad variants each yield a
// counterexample: the runner stores kDone without looking for a sleeper; the invoker announces
// sleep with a plain store; the invoker runs the job after a failed pop.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model_check.hpp"

namespace model_fork_join_test_cpp {

namespace {

enum class variant : std::uint8_t { real, runner_plain_store, sleeper_plain_store, run_after_failed_pop };

constexpr std::uint8_t kDone = 1, kSleeping = 2;

enum inv_pc : std::uint8_t { i_pop, i_run, i_look, i_announce, i_futex, i_queued, i_returned };
enum thief_pc : std::uint8_t { t_steal, t_run, t_publish, t_wake, t_end };

struct state {
  std::uint8_t queued = 1;  // the job is in a queue (not yet taken)
  std::uint8_t word = 0;
  std::uint8_t runs = 0;
  std::uint8_t run_by_thief = 0;
  std::uint8_t inv = i_pop;
  std::uint8_t thief[2] = {t_steal, t_steal};
};

struct model {
  variant v;

  void successors(const state& s, std::vector<state>& next, std::vector<std::string>& why, std::string& error) const {
    if (s.runs > 1) {
      error = "the job ran twice";
      return;
    }
    if (s.inv == i_returned && (s.runs != 1 || (s.run_by_thief && s.word != kDone))) {
      error = "the invoker returned before the job's results were published";
      return;
    }
    auto add = [&](const state& n, std::string w) {
      next.push_back(n);
      why.push_back(std::move(w));
    };
    // The invoker.
    state n = s;
    switch (s.inv) {
      case i_pop:
        if (s.queued) {
          n.queued = 0, n.inv = i_run;
          add(n, "invoker: pop takes the job back");
        } else {
          n.inv = v == variant::run_after_failed_pop ? i_run : i_look;
          add(n, "invoker: pop finds the deque empty (stolen)");
        }
        break;
      case i_run:
        n.runs = static_cast<std::uint8_t>(s.runs + 1), n.inv = i_returned;
        add(n, "invoker: runs the job as a plain call and returns");
        break;
      case i_look:
        if (s.word == kDone) {
          n.inv = i_returned;
          add(n, "invoker: load reads kDone, returns");
        } else {
          n.inv = i_announce;
          add(n, "invoker: load reads not done; the spin ends");
        }
        break;
      case i_announce:
        if (v == variant::sleeper_plain_store) {
          n.word = kSleeping, n.inv = i_futex;
          add(n, "invoker: store(kSleeping)");
        } else if (s.word == 0) {
          n.word = kSleeping, n.inv = i_futex;
          add(n, "invoker: CAS 0 -> kSleeping");
        } else {
          n.inv = i_returned;
          add(n, "invoker: CAS fails on kDone, returns");
        }
        break;
      case i_futex:
        if (s.word == kSleeping) {
          n.inv = i_queued;
          add(n, "invoker: futex_wait(kSleeping) sleeps");
        } else {
          n.inv = s.word == kDone ? i_returned : i_futex;
          add(n, "invoker: futex_wait returns at once; the loop reads kDone, returns");
        }
        break;
      default:
        break;  // i_queued moves only when woken; i_returned is final
    }
    // The thieves.
    for (int t = 0; t < 2; ++t) {
      state m = s;
      const std::string who = "thief " + std::to_string(t) + ": ";
      switch (s.thief[t]) {
        case t_steal:
          if (s.queued) {
            m.queued = 0, m.thief[t] = t_run;
            add(m, who + "steals the job");
          } else {
            m.thief[t] = t_end;
            add(m, who + "finds nothing");
          }
          break;
        case t_run:
          m.runs = static_cast<std::uint8_t>(s.runs + 1), m.run_by_thief = 1, m.thief[t] = t_publish;
          add(m, who + "runs the job");
          break;
        case t_publish: {
          const std::uint8_t old = s.word;
          m.word = kDone;
          const bool wakes = v != variant::runner_plain_store && old == kSleeping;
          m.thief[t] = wakes ? t_wake : t_end;
          add(m, who + (v == variant::runner_plain_store ? "store(kDone)" : "exchange(kDone) reads " + std::to_string(old)));
          break;
        }
        case t_wake:
          if (s.inv == i_queued) m.inv = i_futex;  // woken: the loop reads the word again
          m.thief[t] = t_end;
          add(m, who + "futex_wake");
          break;
        default:
          break;
      }
    }
  }

  std::string check_terminal(const state& s) const {
    if (s.inv != i_returned) return "terminal state: the invoker sleeps forever";
    if (s.runs != 1) return "terminal state: the job ran " + std::to_string(s.runs) + " times";
    return "";
  }
};

std::string check(variant v, bool from_outside, model_check::stats& st) {
  state s0;
  if (from_outside) s0.inv = i_look;  // fork_wait: the job went to the pool's queue
  return model_check::search(s0, model{v}, st);
}

}  // namespace

TEST(model_fork_join, the_real_join_runs_each_job_once_and_loses_no_wake_up) {
  for (bool outside : {false, true}) {
    model_check::stats st;
    EXPECT_EQ(check(variant::real, outside, st), "");
    std::printf("fork-join model (%s): %zu states, %zu terminal\n", outside ? "queued from outside" : "own deque",
                st.states, st.terminal_states);
    EXPECT_GT(st.states, 50u);  // the search explored the interleavings, not just one path
  }
}

TEST(model_fork_join, each_known_bad_variant_yields_a_counterexample) {
  for (variant v : {variant::runner_plain_store, variant::sleeper_plain_store, variant::run_after_failed_pop}) {
    model_check::stats st;
    const std::string bad = check(v, false, st);
    EXPECT_NE(bad, "") << "variant " << static_cast<int>(v) << " found no counterexample";
    std::printf("variant %d: %s", static_cast<int>(v), bad.c_str());
  }
}

}  // namespace model_fork_join_test_cpp
