// Exhaustive model check of detail::short_lock (include/tpl/detail/short_lock.hpp,
// src/short_lock.cpp): a futex word that is 0 (free), 1 (held) or 2 (held, a sleeper may exist).
//
// Each thread takes the lock and releases it kRounds times. Steps are the atomic actions of the
// real code: the fast CAS 0 -> 1; the bounded spin (abstracted: any number of looks, each of which
// may try the CAS when it reads 0, and the spin may end at any time); the sleep loop's exchange
// with 2 and futex_wait(2) (the kernel checks the word and queues the thread in one step); the
// unlock's exchange with 0 and, if it read 2, futex_wake_one (wakes any one queued thread, or
// nobody). Futex waits are not woken spuriously in the model: a spurious wake-up only adds
// behaviours the real code tolerates, and it would hide a lost wake-up.
//
// Checked in every state: at most one thread is inside the critical section. Checked in every
// terminal state: every thread finished its rounds (nobody sleeps on a free lock). Known-bad
// variants each yield a counterexample: an unlock that stores 0 without looking for sleepers; a
// sleeper that marks the word 1 instead of 2; a spinner that takes the lock with an exchange
// (overwriting a sleeper's 2).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model_check.hpp"

namespace model_short_lock_test_cpp {

namespace {

enum class variant : std::uint8_t { real, unlock_plain_store, sleeper_marks_one, spinner_exchanges };

constexpr int kMaxThreads = 3;

enum pc : std::uint8_t {
  fast_cas,   // lock(): CAS 0 -> 1
  spin,       // lock_contended(): the bounded spin
  sleep_xchg, // exchange(2) (variant: 1); free -> held
  wait_call,  // futex_wait(mark): the kernel compares the word and queues the thread, one step
  queued,     // in futex_wait, until woken
  inside,     // critical section
  unlock_x,   // exchange(0) (variant: store 0)
  wake,       // futex_wake_one
  done,
};

struct state {
  std::uint8_t word = 0;
  std::array<std::uint8_t, kMaxThreads> at{};
  std::array<std::uint8_t, kMaxThreads> rounds_left{};

  std::uint64_t key() const {
    std::uint64_t k = word;
    for (int i = 0; i < kMaxThreads; ++i) k = k * 16 + at[i], k = k * 8 + rounds_left[i];
    return k;
  }
};

struct checker : model_check::recursion<std::uint64_t> {
  variant v;
  int threads;

  // Explores every successor of s; false once a violation is found (trace holds it).
  bool explore(const state& s) {
    if (!first_visit(s.key())) return true;
    int inside_count = 0;
    for (int t = 0; t < threads; ++t) inside_count += s.at[t] == inside;
    if (inside_count > 1) return fail("two threads inside the critical section");
    bool any_step = false;
    for (int t = 0; t < threads; ++t) {
      std::vector<std::pair<state, std::string>> next;
      const std::string who = "T" + std::to_string(t) + ": ";
      state n = s;
      switch (s.at[t]) {
        case fast_cas:
          if (s.word == 0) {
            n.word = 1, n.at[t] = inside;
            next.push_back({n, who + "CAS 0->1 takes the lock"});
          } else {
            n.at[t] = spin;
            next.push_back({n, who + "CAS fails (word " + std::to_string(s.word) + "), spins"});
          }
          break;
        case spin: {
          if (s.word == 0) {
            n.word = 1, n.at[t] = inside;
            next.push_back({n, who + "spin: CAS 0->1 takes the lock"});
          }
          if (v == variant::spinner_exchanges && s.word != 0) {
            state x = s;
            x.word = 1;  // exchange(1) on a held word: no acquisition, but a sleeper's 2 is gone
            next.push_back({x, who + "spin: exchange(1) on a held word"});
          }
          state g = s;
          g.at[t] = sleep_xchg;
          next.push_back({g, who + "spin ends (bound reached, or the word read 2)"});
          break;
        }
        case sleep_xchg: {
          const std::uint8_t mark = v == variant::sleeper_marks_one ? 1 : 2;
          const std::uint8_t old = s.word;
          n.word = mark;
          n.at[t] = old == 0 ? inside : wait_call;
          next.push_back({n, who + "exchange(" + std::to_string(mark) + ") read " + std::to_string(old) +
                                 (old == 0 ? ": takes the lock" : "")});
          break;
        }
        case wait_call: {
          const std::uint8_t mark = v == variant::sleeper_marks_one ? 1 : 2;
          n.at[t] = s.word == mark ? queued : sleep_xchg;
          next.push_back({n, who + (s.word == mark ? "futex_wait: queued" : "futex_wait: word changed, returns")});
          break;
        }
        case queued:
          break;  // only a wake moves it
        case inside:
          n.at[t] = unlock_x;
          next.push_back({n, who + "leaves the critical section"});
          break;
        case unlock_x: {
          const std::uint8_t old = s.word;
          n.word = 0;
          const bool wakes = v != variant::unlock_plain_store && old == 2;
          n.at[t] = wakes ? wake : (s.rounds_left[t] > 1 ? fast_cas : done);
          if (!wakes) n.rounds_left[t] = static_cast<std::uint8_t>(s.rounds_left[t] - 1);
          next.push_back({n, who + (v == variant::unlock_plain_store ? "store(0)" : "exchange(0) read " + std::to_string(old))});
          break;
        }
        case wake: {
          bool woke = false;
          for (int u = 0; u < threads; ++u) {
            if (s.at[u] != queued) continue;
            state w = s;
            w.at[u] = sleep_xchg;
            w.at[t] = s.rounds_left[t] > 1 ? fast_cas : done;
            w.rounds_left[t] = static_cast<std::uint8_t>(s.rounds_left[t] - 1);
            next.push_back({w, who + "futex_wake_one wakes T" + std::to_string(u)});
            woke = true;
          }
          if (!woke) {
            n.at[t] = s.rounds_left[t] > 1 ? fast_cas : done;
            n.rounds_left[t] = static_cast<std::uint8_t>(s.rounds_left[t] - 1);
            next.push_back({n, who + "futex_wake_one: nobody queued"});
          }
          break;
        }
        case done:
          break;
      }
      for (auto& [ns, what] : next) {
        any_step = true;
        trace.push_back(what);
        if (!explore(ns)) return false;
        trace.pop_back();
      }
    }
    if (!any_step) {
      for (int t = 0; t < threads; ++t)
        if (s.at[t] != done) return fail("terminal state: T" + std::to_string(t) + " sleeps on the lock forever");
    }
    return true;
  }
};

bool run(variant v, int threads, int rounds, std::string* out_trace, std::size_t* out_states) {
  checker c{{}, v, threads};
  state s;
  for (int t = 0; t < kMaxThreads; ++t) {
    s.at[t] = t < threads ? fast_cas : done;
    s.rounds_left[t] = static_cast<std::uint8_t>(t < threads ? rounds : 0);
  }
  const bool ok = c.explore(s);
  if (out_states) *out_states = c.states;
  if (!ok && out_trace) {
    *out_trace = c.counterexample();
  }
  return ok;
}

}  // namespace

TEST(model_short_lock, the_real_protocol_is_exclusive_and_loses_no_wake_up) {
  for (int threads = 2; threads <= kMaxThreads; ++threads) {
    std::string trace;
    std::size_t states = 0;
    EXPECT_TRUE(run(variant::real, threads, 2, &trace, &states)) << trace;
    std::printf("short_lock model, %d threads x 2 rounds: %zu states\n", threads, states);
  }
}

TEST(model_short_lock, each_known_bad_variant_yields_a_counterexample) {
  for (variant v : {variant::unlock_plain_store, variant::sleeper_marks_one, variant::spinner_exchanges}) {
    std::string trace;
    EXPECT_FALSE(run(v, 3, 2, &trace, nullptr)) << "variant " << static_cast<int>(v) << " found no counterexample";
    std::printf("variant %d counterexample:\n%s", static_cast<int>(v), trace.c_str());
  }
}

}  // namespace model_short_lock_test_cpp
