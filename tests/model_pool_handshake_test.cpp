// Exhaustive model check of the thread pool's thread-request handshake (src/thread_pool/thread_pool.cpp:
// after_push, wake_one_if_needed, pop_idle_within_goal, push_idle, push_idle_if_excess, park,
// wait_parked, worker_main, stop_spinning_and_maybe_wake, find_work, any_work_seq_cst).
//
// The model is explicit-state: the shared variables of the protocol, and producers and workers as
// step functions in which each step is one atomic action of the real code. The real code makes these
// variables sequentially consistent (seq_cst loads, RMWs and fences; the idle list, the thread-count
// word and idle_count change together under idle_lock, so one locked section is one step). Every
// interleaving of every configuration is explored (depth-first, with a visited-state set).
//
// Abstractions (each one keeps every behaviour of the real code, and may add some):
//   - all queues are one counter `q`; a queue push is one step (the seq_cst size store);
//   - find_work / spin_for_work may MISS an item that is there (relaxed size hints, lost steal
//     races): a pop step when q > 0, and a "found nothing" step whatever q is;
//   - may_start_spinning and the relaxed pre-check of the excess park are heuristics: both
//     outcomes are explored;
//   - the parked worker's 100 ms re-check is DISABLED: a parked worker moves only when signalled
//     (or, in configurations with retirement, when its idle timeout retires it). The handshake
//     alone must never strand work;
//   - no shutdown, no blocking_scope, fixed goal per configuration;
//   - no next slots (worker::next): an item there belongs to a worker that is running (it queued
//     it from its running item) and takes it before anything else when that item returns, so the
//     handshake never has to find it; other workers take one only as a latency rescue.
//
// Checked in every reachable state: `spinning` equals the requests in flight (spinning workers,
// signals not yet consumed, a waker between its CAS and its hand-off); `processing` equals the
// workers that exist and are not on the idle list. Checked in every terminal state (no thread can
// take a step; parked workers wait for a signal that nobody will send): the queue is empty and every
// producer is done. Deliberately broken variants (the producer looks at spinning/idle before its
// item is queued; the worker parks without looking at the queues after registering as idle) must
// produce a counterexample, so the checker is shown able to fail.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace {

constexpr int kMaxWorkers = 3;
constexpr int kMaxProducers = 2;
constexpr int kMaxThreads = kMaxWorkers + kMaxProducers;

enum class variant : std::uint8_t {
  real,                      // the protocol as implemented
  check_before_push,         // broken: the producer looks at spinning/idle/counts before queuing
  no_recheck_after_idle,     // broken: park() waits without looking at the queues again
};

struct config {
  const char* name;
  int producers;
  int items_per_producer;
  int workers;       // existing at start (all processing, fresh from start_worker)
  int max_threads;   // slots; start_worker may create up to max_threads - workers more
  int goal;
  int children;      // items pushed by workers while running items (worker as producer)
  bool retire;       // a parked, unsignalled worker may retire (idle timeout)
  variant v = variant::real;
  bool start_parked = false;  // start from an idle pool instead of a just-started one
};

// Program counters. W_*: worker_main and park; K_*: wake_one_if_needed (called by producers and by
// workers); P_*: producer.
enum pc : std::uint8_t {
  W_ABSENT,     // no thread on this slot
  W_FIND,       // find_work()
  W_MAYSPIN,    // may_start_spinning() + spinning.fetch_add
  W_SPIN,       // spin_for_work()
  W_GOT,        // is_spinning: stop_spinning_and_maybe_wake: spinning.fetch_sub
  W_GOT_ANY,    //   ... == 1: any_work_seq_cst()
  W_RUN,        // run(item): may queue a child item (local push + after_push)
  W_AFTER,      // relaxed pre-check of processing > goal
  W_EXCESS,     // push_idle_if_excess (under idle_lock)
  W_PARK1,      // park: push_idle (under idle_lock)
  W_PARK2,      // park: if was_spinning, spinning.fetch_sub
  W_PARK3,      // park: fence; any_work_seq_cst()
  W_PARK4,      // park: remove_idle (under idle_lock)
  W_WAIT,       // wait_parked: until wake_signal != 0
  K_SPIN,       // spinning.load() != 0 -> return
  K_IDLE,       // idle_now = idle_count.load()
  K_COUNTS,     // counts: processing >= goal -> return; idle_now == 0 && existing >= max -> return
  K_CAS,        // spinning CAS 0 -> 1
  K_POP,        // pop_idle_within_goal (under idle_lock)
  K_SIGNAL,     // w->wake_signal.store(1); futex_wake
  K_IDLE2,      // idle_count.load() == 0 -> start_worker
  K_START,      // start_worker (under threads_lock)
  K_GIVEBACK,   // spinning.fetch_sub
  K_IDLE3,      // idle_count.load() == 0 -> return, else loop
  P_PUSH,       // queue one item (or done)
  P_LATEPUSH,   // broken variant: the push after the look
  P_DONE,
  kPcCount
};

const char* pc_name(int p) {
  static const char* const names[] = {"absent", "find_work", "may_start_spinning", "spin_for_work",
                                      "stop_spinning", "stop_spinning:any_work", "run", "excess_precheck",
                                      "push_idle_if_excess", "park:push_idle", "park:stop_spinning",
                                      "park:fence+any_work", "park:remove_idle", "wait_parked",
                                      "wake:spinning?", "wake:idle_count?", "wake:counts?", "wake:CAS",
                                      "wake:pop_idle_within_goal", "wake:signal", "wake:idle_count==0?",
                                      "wake:start_worker", "wake:give_back", "wake:idle_count again?",
                                      "producer:push", "producer:late push", "producer:done"};
  static_assert(sizeof(names) / sizeof(names[0]) == kPcCount);
  return names[p];
}

// Only uint8_t fields: no padding, so the bytes of a state are its key.
struct thread_state {
  std::uint8_t pc;
  std::uint8_t ret;       // where wake_one_if_needed returns to
  std::uint8_t idle_now;  // wake_one_if_needed's local copy of idle_count
  std::uint8_t token;     // worker: is_spinning (holds one unit of `spinning`)
  std::uint8_t wtoken;    // waker: won the CAS, has not handed the request on yet
  std::uint8_t target;    // waker: the worker popped from the idle list
  std::uint8_t signal;    // worker: wake_signal
  std::uint8_t left;      // producer: items still to queue
};

struct state {
  std::uint8_t q;           // queued items
  std::uint8_t spinning;
  std::uint8_t processing;  // counts.processing
  std::uint8_t existing;    // counts.existing
  std::uint8_t idle_len;    // idle.size() == idle_count
  std::uint8_t children_left;
  std::uint8_t idle[kMaxWorkers];
  thread_state t[kMaxThreads];  // workers first (slot i = worker i), then producers
};

struct step {
  state next;
  std::uint8_t thread;
  std::uint8_t from_pc;
  std::uint8_t choice;  // which of a step's outcomes (pop / miss, ...)
};

class checker {
 public:
  explicit checker(const config& c) : c_(c) {}

  // Explores every interleaving. Returns the empty string if every property holds, else a trace.
  std::string run() {
    state s0{};
    s0.existing = static_cast<std::uint8_t>(c_.workers);
    s0.children_left = static_cast<std::uint8_t>(c_.children);
    if (c_.start_parked) {  // an idle pool: every worker waits on the idle list
      for (int i = 0; i < c_.workers; ++i) {
        s0.t[i].pc = W_WAIT;
        idle_push(s0, i);
      }
    } else {  // a pool just started: every worker is processing, about to look for work
      s0.processing = static_cast<std::uint8_t>(c_.workers);
      for (int i = 0; i < c_.workers; ++i) s0.t[i].pc = W_FIND;
    }
    for (int p = 0; p < c_.producers; ++p) {
      s0.t[kMaxWorkers + p].pc = P_PUSH;
      s0.t[kMaxWorkers + p].left = static_cast<std::uint8_t>(c_.items_per_producer);
    }
    struct frame {
      state s;
      std::vector<step> succ;
      std::size_t next = 0;
    };
    std::vector<frame> stack;
    auto enter = [&](const state& s) -> std::string {
      if (!visited_.insert(key(s)).second) return {};
      if (std::string bad = check_state(s); !bad.empty()) return bad;
      frame f;
      f.s = s;
      successors(s, f.succ);
      if (f.succ.empty()) {
        ++terminal_;
        if (std::string bad = check_terminal(s); !bad.empty()) return bad;
      }
      stack.push_back(std::move(f));
      return {};
    };
    if (std::string bad = enter(s0); !bad.empty()) return "initial state: " + bad;
    while (!stack.empty()) {
      frame& f = stack.back();
      if (f.next == f.succ.size()) {
        stack.pop_back();
        continue;
      }
      const step st = f.succ[f.next++];
      ++transitions_;
      if (std::string bad = enter(st.next); !bad.empty()) {
        // The failing state was not pushed: the trace is every frame's chosen step.
        std::string out = "counterexample (" + bad + "):\n";
        for (const frame& g : stack) {
          const step& s = g.succ[g.next - 1];
          out += "  " + describe(s) + "\n      => " + summary(s.next) + "\n";
        }
        return out;
      }
    }
    return {};
  }

  std::size_t states() const { return visited_.size(); }
  std::size_t terminal_states() const { return terminal_; }
  std::size_t transitions() const { return transitions_; }

 private:
  // The visited set stores a 128-bit packing of the state's canonical form.
  struct packed {
    std::uint64_t lo = 0, hi = 0;
    int bits = 0;
    void put(unsigned v, int width) {
      const std::uint64_t x = v & ((1u << width) - 1u);
      if (bits + width <= 64) {
        lo |= x << bits;
      } else if (bits >= 64) {
        hi |= x << (bits - 64);
      } else {
        lo |= x << bits;
        hi |= x >> (64 - bits);
      }
      bits += width;
    }
    bool operator==(const packed& o) const { return lo == o.lo && hi == o.hi; }
    bool operator<(const packed& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
  };
  struct packed_hash {
    std::size_t operator()(const packed& p) const noexcept {
      std::uint64_t x = p.lo ^ (p.hi * 0x9E3779B97F4A7C15ull);
      x ^= x >> 31;
      x *= 0xBF58476D1CE4E5B9ull;
      x ^= x >> 29;
      return static_cast<std::size_t>(x);
    }
  };

  static packed pack(const state& s) {
    packed k;
    k.put(s.q, 3);
    k.put(s.spinning, 3);
    k.put(s.processing, 2);
    k.put(s.existing, 2);
    k.put(s.idle_len, 2);
    k.put(s.children_left, 2);
    for (int i = 0; i < kMaxWorkers; ++i) k.put(s.idle[i], 2);
    for (const thread_state& t : s.t) {
      k.put(t.pc, 5);
      k.put(t.ret, 5);
      k.put(t.idle_now, 2);
      k.put(t.token, 1);
      k.put(t.wtoken, 1);
      k.put(t.target, 2);
      k.put(t.signal, 1);
      k.put(t.left, 2);
    }
    return k;
  }

  // Workers are interchangeable, and so are producers: the key is the smallest packing over every
  // renaming of workers and of producers (symmetry reduction).
  static packed key(const state& s) {
    static_assert(kMaxWorkers == 3 && kMaxProducers == 2);
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    packed best;
    bool first = true;
    for (const auto& p : perms) {
      for (int swap_producers = 0; swap_producers < 2; ++swap_producers) {
        state m = s;
        for (int w = 0; w < kMaxWorkers; ++w) m.t[p[w]] = s.t[w];
        for (int i = 0; i < s.idle_len; ++i) m.idle[i] = static_cast<std::uint8_t>(p[s.idle[i]]);
        if (swap_producers) std::swap(m.t[kMaxWorkers], m.t[kMaxWorkers + 1]);
        for (thread_state& t : m.t)
          if (t.pc == K_SIGNAL) t.target = static_cast<std::uint8_t>(p[t.target]);
        const packed k = pack(m);
        if (first || k < best) best = k;
        first = false;
      }
    }
    return best;
  }

  bool in_idle(const state& s, int w) const {
    for (int i = 0; i < s.idle_len; ++i)
      if (s.idle[i] == w) return true;
    return false;
  }
  static void idle_remove(state& s, int w) {
    int j = 0;
    for (int i = 0; i < s.idle_len; ++i)
      if (s.idle[i] != w) s.idle[j++] = s.idle[i];
    for (int i = j; i < kMaxWorkers; ++i) s.idle[i] = 0;
    s.idle_len = static_cast<std::uint8_t>(j);
  }
  static void idle_push(state& s, int w) { s.idle[s.idle_len++] = static_cast<std::uint8_t>(w); }

  std::string check_state(const state& s) const {
    int tokens = 0, processing = 0, existing = 0;
    for (int i = 0; i < kMaxThreads; ++i) tokens += s.t[i].token + s.t[i].signal + s.t[i].wtoken;
    for (int w = 0; w < kMaxWorkers; ++w) {
      if (s.t[w].pc == W_ABSENT) continue;
      ++existing;
      if (!in_idle(s, w)) ++processing;
    }
    if (tokens != s.spinning) return "spinning != requests in flight";
    if (processing != s.processing) return "processing != workers off the idle list";
    if (existing != s.existing) return "existing != live workers";
    if (s.spinning > 7 || s.q > 7) return "model bounds exceeded";
    return {};
  }

  std::string check_terminal(const state& s) const {
    for (int p = 0; p < c_.producers; ++p)
      if (s.t[kMaxWorkers + p].pc != P_DONE) return "a producer is stuck";
    if (s.q != 0)
      return std::to_string(s.q) + " item(s) queued, every worker parked with no signal coming (lost wake-up)";
    return {};
  }

  // Enters wake_one_if_needed; it returns to `ret`.
  static void call_wake(thread_state& t, std::uint8_t ret) {
    t.pc = K_SPIN;
    t.ret = ret;
  }

  void successors(const state& s, std::vector<step>& out) const {
    for (int i = 0; i < kMaxThreads; ++i) {
      const thread_state& t = s.t[i];
      auto emit = [&](const state& n, int choice) {
        out.push_back(step{n, static_cast<std::uint8_t>(i), t.pc, static_cast<std::uint8_t>(choice)});
      };
      state n = s;
      thread_state& u = n.t[i];
      switch (t.pc) {
        case W_ABSENT:
        case P_DONE:
          break;
        case W_FIND:
        case W_SPIN: {
          if (s.q > 0) {  // found an item
            state m = s;
            --m.q;
            m.t[i].pc = t.token ? W_GOT : W_RUN;
            emit(m, 0);
          }
          // found nothing (also possible with q > 0: relaxed hints, lost steal races)
          u.pc = t.pc == W_FIND ? W_MAYSPIN : W_PARK1;
          emit(n, 1);
          break;
        }
        case W_MAYSPIN: {
          if (t.token) {
            u.pc = W_SPIN;
            emit(n, 0);
            break;
          }
          state m = s;  // may_start_spinning() said yes
          ++m.spinning;
          m.t[i].token = 1;
          m.t[i].pc = W_SPIN;
          emit(m, 0);
          u.pc = W_PARK1;  // ... said no
          emit(n, 1);
          break;
        }
        case W_GOT: {
          const int old = n.spinning--;
          u.token = 0;
          u.pc = old == 1 ? W_GOT_ANY : W_RUN;
          emit(n, 0);
          break;
        }
        case W_GOT_ANY:
          if (s.q > 0)
            call_wake(u, W_RUN);
          else
            u.pc = W_RUN;
          emit(n, 0);
          break;
        case W_RUN:
          if (n.children_left > 0) {  // the item queues a child on this worker's deque
            --n.children_left;
            ++n.q;
            call_wake(u, W_AFTER);
          } else {
            u.pc = W_AFTER;
          }
          emit(n, 0);
          break;
        case W_AFTER: {
          state m = s;  // the relaxed pre-check says "not above the goal"
          m.t[i].pc = W_FIND;
          emit(m, 0);
          if (s.processing > c_.goal) {  // ... says "above": take the lock
            u.pc = W_EXCESS;
            emit(n, 1);
          }
          break;
        }
        case W_EXCESS:
          if (n.processing > c_.goal) {
            idle_push(n, i);
            --n.processing;
            u.pc = W_WAIT;  // wait_parked without a re-check of the queues
          } else {
            u.pc = W_FIND;
          }
          emit(n, 0);
          break;
        case W_PARK1:
          idle_push(n, i);
          --n.processing;
          u.pc = t.token ? W_PARK2 : (c_.v == variant::no_recheck_after_idle ? W_WAIT : W_PARK3);
          emit(n, 0);
          break;
        case W_PARK2:
          --n.spinning;
          u.token = 0;
          u.pc = c_.v == variant::no_recheck_after_idle ? W_WAIT : W_PARK3;
          emit(n, 0);
          break;
        case W_PARK3:
          u.pc = s.q > 0 ? W_PARK4 : W_WAIT;
          emit(n, 0);
          break;
        case W_PARK4:
          if (in_idle(n, i)) {
            idle_remove(n, i);
            ++n.processing;
            u.pc = W_FIND;  // found_work: not spinning
          } else {
            u.pc = W_WAIT;  // a waker popped us: its signal is on the way
          }
          emit(n, 0);
          break;
        case W_WAIT:
          if (t.signal) {
            u.signal = 0;
            u.token = 1;  // woken: spinning
            u.pc = W_FIND;
            emit(n, 0);
          } else if (c_.retire && in_idle(s, i)) {
            idle_remove(n, i);
            --n.existing;
            u = thread_state{};
            u.pc = W_ABSENT;
            emit(n, 1);
          }
          break;
        case K_SPIN:
          u.pc = s.spinning != 0 ? t.ret : std::uint8_t{K_IDLE};
          emit(n, 0);
          break;
        case K_IDLE:
          u.idle_now = s.idle_len;
          u.pc = K_COUNTS;
          emit(n, 0);
          break;
        case K_COUNTS:
          if (s.processing >= c_.goal)
            u.pc = t.ret;  // note_demand
          else if (t.idle_now == 0 && s.existing >= c_.max_threads)
            u.pc = t.ret;
          else
            u.pc = K_CAS;
          emit(n, 0);
          break;
        case K_CAS:
          if (s.spinning == 0) {
            n.spinning = 1;
            u.wtoken = 1;
            u.pc = K_POP;
          } else {
            u.pc = t.ret;
          }
          emit(n, 0);
          break;
        case K_POP:
          if (s.idle_len > 0 && s.processing < c_.goal) {
            const int w = n.idle[--n.idle_len];
            n.idle[n.idle_len] = 0;
            ++n.processing;
            u.target = static_cast<std::uint8_t>(w);
            u.pc = K_SIGNAL;
          } else {
            u.pc = K_IDLE2;
          }
          emit(n, 0);
          break;
        case K_SIGNAL:
          n.t[t.target].signal = 1;
          u.wtoken = 0;
          u.target = 0;
          u.pc = t.ret;
          emit(n, 0);
          break;
        case K_IDLE2:
          u.pc = s.idle_len == 0 ? K_START : K_GIVEBACK;
          emit(n, 0);
          break;
        case K_START: {
          int slot = -1;
          for (int w = 0; w < kMaxWorkers && slot < 0; ++w)
            if (s.t[w].pc == W_ABSENT) slot = w;
          if (slot >= 0 && s.existing < c_.max_threads && s.processing < c_.goal) {
            ++n.existing;
            ++n.processing;
            n.t[slot] = thread_state{};
            n.t[slot].pc = W_FIND;
            n.t[slot].token = 1;  // the new worker starts spinning: it carries the request
            u.wtoken = 0;
            u.pc = t.ret;
          } else {
            u.pc = K_GIVEBACK;
          }
          emit(n, 0);
          break;
        }
        case K_GIVEBACK:
          --n.spinning;
          u.wtoken = 0;
          u.pc = K_IDLE3;
          emit(n, 0);
          break;
        case K_IDLE3:
          u.pc = s.idle_len == 0 ? t.ret : std::uint8_t{K_SPIN};
          emit(n, 0);
          break;
        case P_PUSH:
          if (t.left == 0) {
            u.pc = P_DONE;
          } else if (c_.v == variant::check_before_push) {
            call_wake(u, P_LATEPUSH);
          } else {
            ++n.q;
            --u.left;
            call_wake(u, P_PUSH);  // after_push: fence, wake_one_if_needed
          }
          emit(n, 0);
          break;
        case P_LATEPUSH:
          ++n.q;
          --u.left;
          u.pc = P_PUSH;
          emit(n, 0);
          break;
        default:
          break;
      }
    }
  }

  std::string describe(const step& st) const {
    const bool worker = st.thread < kMaxWorkers;
    std::string who = worker ? "worker " + std::to_string(st.thread) : "producer " + std::to_string(st.thread - kMaxWorkers);
    std::string what = pc_name(st.from_pc);
    if ((st.from_pc == W_FIND || st.from_pc == W_SPIN) ) what += st.choice == 0 ? " -> took an item" : " -> found nothing";
    if (st.from_pc == W_MAYSPIN && st.choice == 1) what += " -> no";
    if (st.from_pc == W_AFTER) what += st.choice == 0 ? " -> not above goal" : " -> above goal";
    if (st.from_pc == W_WAIT) what += st.choice == 0 ? " -> woken" : " -> retired";
    return who + ": " + what;
  }

  std::string summary(const state& s) const {
    std::string r = "q=" + std::to_string(s.q) + " spinning=" + std::to_string(s.spinning) +
                    " processing=" + std::to_string(s.processing) + " existing=" + std::to_string(s.existing) +
                    " goal=" + std::to_string(c_.goal) + " idle=[";
    for (int i = 0; i < s.idle_len; ++i) r += (i ? "," : "") + std::to_string(s.idle[i]);
    r += "]";
    for (int w = 0; w < kMaxWorkers; ++w) {
      if (s.t[w].pc == W_ABSENT) continue;
      r += " w" + std::to_string(w) + "@" + pc_name(s.t[w].pc);
      if (s.t[w].token) r += "(spinning)";
      if (s.t[w].signal) r += "(signalled)";
    }
    return r;
  }

  config c_;
  std::unordered_set<packed, packed_hash> visited_;
  std::size_t terminal_ = 0;
  std::size_t transitions_ = 0;
};

struct outcome {
  std::string counterexample;
  std::size_t states;
};

outcome check(const config& c) {
  checker k(c);
  std::string r = k.run();
  std::printf("[model] %-44s states %9zu  transitions %10zu  terminal %7zu%s\n", c.name, k.states(), k.transitions(),
              k.terminal_states(), r.empty() ? "" : "  COUNTEREXAMPLE");
  return {r, k.states()};
}

// Configurations: {name, producers, items each, workers, max threads, goal, child items, retire,
// variant, start parked}. "fresh": the workers start processing (just created), so their own
// first searches and parks interleave with the producers; "parked": the pool starts idle.
constexpr variant R = variant::real;
std::vector<config> real_configs() {
  std::vector<config> v = {
      {"fresh: 1 producer x 1, 1 worker", 1, 1, 1, 1, 1, 0, false, R, false},
      {"fresh: 1 producer x 2, 2 workers", 1, 2, 2, 2, 2, 0, false, R, false},
      {"fresh: 1 producer x 2, 2 workers, goal 1", 1, 2, 2, 2, 1, 0, false, R, false},
      {"fresh: 1 producer x 1, 1 worker, 2 children", 1, 1, 1, 1, 1, 2, false, R, false},
      {"fresh: 1 producer x 1, 1 worker/max 2, child, retire", 1, 1, 1, 2, 2, 1, true, R, false},
      {"parked: 2 producers x 1, 2 workers", 2, 1, 2, 2, 2, 0, false, R, true},
      {"parked: 2 producers x 1, 3 workers, goal 2", 2, 1, 3, 3, 2, 0, false, R, true},
      {"parked: 1 producer x 2, 2 workers/max 3, retire", 1, 2, 2, 3, 3, 0, true, R, true},
  };
  if (tpl_test::scaled(1, 0) != 0) {
    v.push_back({"fresh: 2 producers x 1, 2 workers", 2, 1, 2, 2, 2, 0, false, R, false});
    v.push_back({"parked: 2 producers x 1, 3 workers", 2, 1, 3, 3, 3, 0, false, R, true});
    v.push_back({"parked: 2 producers x 2, 3 workers, goal 1", 2, 2, 3, 3, 1, 0, false, R, true});
    v.push_back({"parked: 1 producer x 2, 2 workers, 1 child, goal 1", 1, 2, 2, 2, 1, 1, false, R, true});
    v.push_back({"parked: 2 producers x 1, 1 worker/max 3", 2, 1, 1, 3, 3, 0, false, R, true});
    v.push_back({"parked: 2 producers x 1, 2 workers/max 3, retire", 2, 1, 2, 3, 3, 0, true, R, true});
  }
  // Bigger configurations (about 3.2 million more states, some 15 s): TPL_MODEL_EXTENDED=1.
  if (const char* e = std::getenv("TPL_MODEL_EXTENDED"); e != nullptr && std::strcmp(e, "1") == 0) {
    v.push_back({"fresh: 2 producers x 1, 2 workers, goal 1", 2, 1, 2, 2, 1, 0, false, R, false});
    v.push_back({"parked: 2 producers x 2, 2 workers", 2, 2, 2, 2, 2, 0, false, R, true});
  }
  return v;
}

}  // namespace

TEST(model_pool_handshake, no_queued_item_is_ever_stranded) {
  std::size_t total = 0;
  for (const config& c : real_configs()) {
    const outcome o = check(c);
    total += o.states;
    EXPECT_TRUE(o.counterexample.empty()) << c.name << "\n" << o.counterexample;
  }
  std::printf("[model] pool handshake: %zu states explored in all\n", total);
}

TEST(model_pool_handshake, finds_the_lost_wakeup_when_the_producer_looks_before_queuing) {
  config c{"broken: producer looks before queuing", 1, 1, 1, 1, 1, 0, false, variant::check_before_push};
  const outcome o = check(c);
  ASSERT_FALSE(o.counterexample.empty()) << "the checker missed a known lost wake-up";
  EXPECT_NE(o.counterexample.find("lost wake-up"), std::string::npos) << o.counterexample;
  std::printf("%s", o.counterexample.c_str());
}

TEST(model_pool_handshake, finds_the_lost_wakeup_when_park_skips_the_recheck) {
  config c{"broken: park without re-check", 1, 1, 1, 1, 1, 0, false, variant::no_recheck_after_idle};
  const outcome o = check(c);
  ASSERT_FALSE(o.counterexample.empty()) << "the checker missed a known lost wake-up";
  EXPECT_NE(o.counterexample.find("lost wake-up"), std::string::npos) << o.counterexample;
  std::printf("%s", o.counterexample.c_str());
}

TEST(model_pool_handshake, broken_variants_fail_in_bigger_configurations_too) {
  for (variant v : {variant::check_before_push, variant::no_recheck_after_idle}) {
    config c{"broken variant, 2 producers x 1, 2 workers", 2, 1, 2, 2, 2, 0, false, v};
    EXPECT_FALSE(check(c).counterexample.empty());
  }
}
