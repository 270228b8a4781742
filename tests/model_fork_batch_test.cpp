// Exhaustive model check of fork jobs queued together (tpl::parallel::invoke of three or more
// functions on a pool worker: tpl/parallel_invoke.hpp's run_first, fork_push_local_many in
// src/thread_pool/fork_join.cpp, work_stealing_deque::push_many): the invoker lays its queued
// jobs on its own deque in one publication, runs its first function, and joins the queued ones
// in order, while thieves take from the deque's other end.
//
// Threads: the invoker and two thieves. The deque is what the joins rely on: an ordered list of
// job ids (top first); the invoker's pop takes the bottom one, a thief's steal the top one, each
// in one atomic step (the Chase-Lev race on the last item gives it to exactly one of them, as in
// model_fork_join_test.cpp). A thief steals, runs, publishes kDone with an exchange, wakes the
// invoker if the exchange read kSleeping, and then looks again (a worker keeps stealing). Each
// job has its own state word; futex_wait checks the word and queues the invoker in one step (as
// the kernel does). The invoker's spin and help are "any number of looks".
//
// The batch is one step (one release store of the deque's bottom publishes every slot), so a
// thief sees all of its jobs or none; model_pool_handshake_test.cpp checks the pool's wake look
// that follows the publication, for which a batch is one push.
//
// Checked, for 2 and 3 queued jobs: each job runs exactly once; the invoker returns only after
// every job ran and, for each a thief ran, after that thief's kDone; the invoker's pop never
// returns a job other than the one it joins (the real join would take that for a coroutine);
// every terminal state has the invoker returned (no lost wake-up). Known-bad variants, each with
// a counterexample: the batch laid in the wrong order (the first-joined job on top, where thieves
// take it); the invoker joins the jobs newest-last; the thief stores kDone without looking for a
// sleeper.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model_check.hpp"

namespace model_fork_batch_test_cpp {

namespace {

enum class variant : std::uint8_t { real, reversed_batch, joins_last_pushed_last, runner_plain_store };

constexpr std::uint8_t kDone = 1, kSleeping = 2;
constexpr int kMaxJobs = 3;
constexpr std::uint8_t kNone = 0xff;

// The invoker's program counter within the join of job `joining`.
enum inv_pc : std::uint8_t { i_push, i_first, i_pop, i_run, i_look, i_announce, i_futex, i_queued, i_returned };
enum thief_pc : std::uint8_t { t_steal, t_run, t_publish, t_wake, t_end };

struct state {
  std::uint8_t deque[kMaxJobs] = {kNone, kNone, kNone};  // top first; kNone past the end
  std::uint8_t size = 0;
  std::uint8_t word[kMaxJobs] = {};
  std::uint8_t runs[kMaxJobs] = {};
  std::uint8_t run_by_thief[kMaxJobs] = {};
  std::uint8_t inv = i_push;
  std::uint8_t joining = 0;  // how many joins have finished (the job joined now is its order's next)
  std::uint8_t thief[2] = {t_steal, t_steal};
  std::uint8_t thief_job[2] = {kNone, kNone};
};

struct model {
  variant v;
  int jobs;  // queued jobs: invoke's functions 1..jobs (job 0 here is the invoke's second function)

  // The job the invoker joins k-th: run_first joins its queued functions in order, 1 first.
  std::uint8_t join_order(int k) const {
    return static_cast<std::uint8_t>(v == variant::joins_last_pushed_last ? jobs - 1 - k : k);
  }

  void successors(const state& s, std::vector<state>& next, std::vector<std::string>& why, std::string& error) const {
    for (int j = 0; j < jobs; ++j)
      if (s.runs[j] > 1) {
        error = "job " + std::to_string(j) + " ran twice";
        return;
      }
    auto add = [&](const state& n, std::string w) {
      next.push_back(n);
      why.push_back(std::move(w));
    };
    state n = s;
    const std::uint8_t mine = s.joining < jobs ? join_order(s.joining) : kNone;
    // The join of `mine` is over: the next one's pop, or the invoker returns after the last.
    auto joined = [&](state& x) {
      x.joining = static_cast<std::uint8_t>(s.joining + 1);
      x.inv = x.joining == jobs ? i_returned : i_pop;
    };
    switch (s.inv) {
      case i_push:
        // push_many: the last function first, so the first queued one ends at the bottom.
        for (int k = 0; k < jobs; ++k)
          n.deque[k] = static_cast<std::uint8_t>(v == variant::reversed_batch ? k : jobs - 1 - k);
        n.size = static_cast<std::uint8_t>(jobs), n.inv = i_first;
        add(n, "invoker: queues the jobs in one publication");
        break;
      case i_first:
        n.inv = i_pop;
        add(n, "invoker: runs its first function");
        break;
      case i_pop:
        if (s.size > 0) {
          const std::uint8_t got = s.deque[s.size - 1];
          if (got != mine) {
            error = "the join of job " + std::to_string(mine) + " popped job " + std::to_string(got);
            return;
          }
          n.deque[s.size - 1] = kNone, n.size = static_cast<std::uint8_t>(s.size - 1), n.inv = i_run;
          add(n, "invoker: pop takes job " + std::to_string(mine) + " back");
        } else {
          n.inv = i_look;
          add(n, "invoker: pop finds the deque empty (job " + std::to_string(mine) + " stolen)");
        }
        break;
      case i_run:
        ++n.runs[mine];
        joined(n);
        add(n, "invoker: runs job " + std::to_string(mine) + " as a plain call");
        break;
      case i_look:
        if (s.word[mine] == kDone) {
          joined(n);
          add(n, "invoker: load reads job " + std::to_string(mine) + "'s kDone");
        } else {
          n.inv = i_announce;
          add(n, "invoker: load reads not done; the spin ends");
        }
        break;
      case i_announce:
        if (s.word[mine] == 0) {
          n.word[mine] = kSleeping, n.inv = i_futex;
          add(n, "invoker: CAS 0 -> kSleeping on job " + std::to_string(mine));
        } else {
          joined(n);
          add(n, "invoker: CAS fails on kDone");
        }
        break;
      case i_futex:
        if (s.word[mine] == kSleeping) {
          n.inv = i_queued;
          add(n, "invoker: futex_wait(kSleeping) sleeps");
        } else {
          // The word is kDone (only the thief changes it from kSleeping): the wait loop ends.
          joined(n);
          add(n, "invoker: futex_wait returns at once; the loop reads kDone");
        }
        break;
      default:
        break;  // i_queued moves only when woken; i_returned is final
    }
    for (int t = 0; t < 2; ++t) {
      state m = s;
      const std::string who = "thief " + std::to_string(t) + ": ";
      const std::uint8_t j = s.thief_job[t];
      switch (s.thief[t]) {
        case t_steal:
          if (s.size > 0) {
            const std::uint8_t got = s.deque[0];
            for (int k = 0; k + 1 < kMaxJobs; ++k) m.deque[k] = s.deque[k + 1];
            m.deque[kMaxJobs - 1] = kNone;
            m.size = static_cast<std::uint8_t>(s.size - 1);
            m.thief[t] = t_run, m.thief_job[t] = got;
            add(m, who + "steals job " + std::to_string(got));
          } else if (s.inv != i_push) {
            m.thief[t] = t_end;
            add(m, who + "finds nothing");
          }
          break;
        case t_run:
          ++m.runs[j];
          m.run_by_thief[j] = 1, m.thief[t] = t_publish;
          add(m, who + "runs job " + std::to_string(j));
          break;
        case t_publish: {
          const std::uint8_t old = s.word[j];
          m.word[j] = kDone;
          const bool wakes = v != variant::runner_plain_store && old == kSleeping;
          m.thief[t] = wakes ? t_wake : t_steal;
          if (!wakes) m.thief_job[t] = kNone;
          add(m, who + "exchange(kDone) on job " + std::to_string(j) + " reads " + std::to_string(old));
          break;
        }
        case t_wake:
          if (s.inv == i_queued) m.inv = i_futex;  // woken: the loop reads the word again
          m.thief[t] = t_steal, m.thief_job[t] = kNone;
          add(m, who + "futex_wake");
          break;
        default:
          break;
      }
    }
    if (s.inv == i_returned) {
      for (int j2 = 0; j2 < jobs; ++j2)
        if (s.runs[j2] != 1 || (s.run_by_thief[j2] && s.word[j2] != kDone)) {
          error = "the invoker returned before job " + std::to_string(j2) + "'s results were published";
          return;
        }
    }
  }

  std::string check_terminal(const state& s) const {
    if (s.inv != i_returned) return "terminal state: the invoker sleeps forever";
    for (int j = 0; j < jobs; ++j)
      if (s.runs[j] != 1) return "terminal state: job " + std::to_string(j) + " ran " + std::to_string(s.runs[j]) + " times";
    return "";
  }
};

std::string check(variant v, int jobs, model_check::stats& st) { return model_check::search(state{}, model{v, jobs}, st); }

}  // namespace

TEST(model_fork_batch, jobs_queued_together_each_run_once_and_every_join_returns) {
  for (int jobs : {2, 3}) {
    model_check::stats st;
    EXPECT_EQ(check(variant::real, jobs, st), "");
    std::printf("fork batch model (%d jobs): %zu states, %zu terminal\n", jobs, st.states, st.terminal_states);
    EXPECT_GT(st.states, 100u);  // the search explored the interleavings, not just one path
  }
}

TEST(model_fork_batch, each_known_bad_variant_yields_a_counterexample) {
  for (variant v : {variant::reversed_batch, variant::joins_last_pushed_last, variant::runner_plain_store}) {
    model_check::stats st;
    const std::string bad = check(v, 3, st);
    EXPECT_NE(bad, "") << "variant " << static_cast<int>(v) << " found no counterexample";
    std::printf("variant %d: %s", static_cast<int>(v), bad.c_str());
  }
}

}  // namespace model_fork_batch_test_cpp
