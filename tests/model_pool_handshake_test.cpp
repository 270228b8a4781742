// Exhaustive model check of the thread pool's wake protocol (src/thread_pool/: after_push,
// wake_one_if_needed, the idle list, park, wait_parked, the excess park, next slots, blocking_begin /
// blocking_end, before_blocking_wait, goal changes, the starvation gate's injection, retirement,
// shutdown, and the fork jobs of parallel::invoke). docs/internals.md states the invariants in
// prose.
//
// The model is explicit-state: the shared variables of the protocol, and producers, workers and
// two control threads (the gate, shutdown) as step functions in which each step is one atomic
// action of the real code. The real code makes these variables sequentially consistent (seq_cst
// loads, RMWs and fences; the idle list, the thread-count word and idle_count change together
// under idle_lock, so one locked section is one step). Every interleaving of every configuration
// is explored (depth-first, with a visited-state set and symmetry reduction over workers).
//
// Abstractions (each keeps every behaviour of the real code, and may add some):
//   - all queues (deques, yield queues, global queues) are one counter `q`; a push is one step;
//   - find_work / spin_for_work may MISS a queued item (relaxed size hints, lost steal races): a
//     pop step when q > 0, and a "found nothing" step whatever q is;
//   - may_start_spinning, the relaxed pre-check of the excess park, and push_next's relaxed look
//     at `spinning` are heuristics: every outcome is explored;
//   - a spinner may take another worker's next-slot item at any time (the stale-slot rescue);
//   - the parked worker's alarm look (TPL_THREADPOOL_PARK_ALARM) is absent: a parked worker moves
//     only when signalled, asked to stop, or retired. The handshake alone must never strand work;
//   - the gate's starvation injection is a step enabled only when it is the policy's job: work is
//     queued, the goal's workers all process, and every one of them is blocked.
//   - a fork job (fork_push, fork_join_local) is its owner's own queued item, tracked per worker
//     (queued, taken by a thief, done) rather than in `q`, since its owner takes it back. fork_push
//     looks at spinning/idle/counts after its push: behind a fence (after_push) when the deque
//     was empty, without one (after_fork_push_unfenced) when it held items, so that the look may
//     be satisfied before the push is visible (its store still in the store buffer). The model
//     explores the look in both orders and finds no job stranded either way: for a fork job the
//     fence buys parallelism (an idle worker is woken for it), not correctness, since the owner
//     takes an unstolen job back at its join. A join whose job was stolen waits until the thief
//     is done; the real join also helps and sleeps in a blocking_region, which only adds
//     workers and is left out here.
//
// Checked in every reachable state: `spinning` equals the requests in flight (spinning workers,
// kWoken signals not yet consumed, a waker between its CAS and its hand-off); `processing`
// equals the workers that exist and are not on the idle list; `existing` equals the live workers.
// Checked in every terminal state (no thread can take a step): every producer is done, no item
// is queued, no next slot holds an item, every fork job was joined, and a started shutdown has
// finished. A worker blocked
// for good (a wait that never ends) is allowed in a terminal state; work it left must still run.
//
// Known-bad variants must each produce a counterexample, so the checker is shown able to fail:
// the two original ones (the producer looks before queuing; park skips its re-check) and one per
// finding of the review that led to this model (the excess park flushing its next slot after
// registering as idle; blocking_begin flushing without the wake protocol; a wait outside a
// blocking_scope that leaves its next slot; shutdown waking parked workers with the waker's bit),
// and one for the fork join (a join that waits for a thief instead of taking its job back).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace model_pool_handshake_test_cpp {

namespace {

constexpr int kMaxWorkers = 3;
constexpr int kMaxProducers = 2;
constexpr int kGate = kMaxWorkers + kMaxProducers;  // the gate thread (starvation, hill climbing)
constexpr int kShutdown = kGate + 1;                // the thread that calls shutdown()
constexpr int kMaxThreads = kShutdown + 1;

enum class variant : std::uint8_t {
  real,                      // the protocol as implemented
  check_before_push,         // broken: the producer looks at spinning/idle/counts before queuing
  no_recheck_after_idle,     // broken: park() waits without looking at the queues again
  excess_flush_after_idle,   // broken: the excess park flushes its next slot after registering
  blocking_flush_no_wake,    // broken: blocking_begin flushes its next slot and wakes nobody
  wait_keeps_next_slot,      // broken: a wait outside a blocking_scope leaves its next slot
  shutdown_signals_woken,    // broken: shutdown wakes parked workers with the waker's kWoken bit
  giveback_rechecks_idle_only,  // broken: a waker that gives its request back looks only for new idle workers
  fork_join_waits_for_thief,    // broken: a join waits for its fork job to be stolen instead of taking it back
};

// What the items a worker runs may do (each at most the given number of times, in all).
struct item_effects {
  int deque_children = 0;  // queue a child on the worker's deque (push + after_push)
  int slot_children = 0;   // wake a coroutine into the worker's next slot (push_next)
  int blocks = 0;          // hold a blocking_scope (blocking_begin ... blocking_end)
  int waits = 0;           // a wait outside a blocking_scope (before_blocking_wait)
  bool waits_end = true;   // false: a block or wait never ends (the worker stays in it for good)
  int forks = 0;           // parallel::invoke: queue a fork job (fork_push), run on, then join it
};

struct config {
  const char* name;
  int producers;
  int items_per_producer;
  int workers;      // existing at start
  int max_threads;  // slots; start_worker may create up to max_threads - workers more
  int min_goal;     // the minimum: the goal never drops below it
  item_effects fx{};
  bool cooperative = true;  // cooperative blocking: the goal counts blocked workers
  int base_goal_change = -1;  // >= 0: hill climbing moves the base goal there once
  bool retire = false;        // a parked, unsignalled worker may retire (idle timeout)
  bool shutdown = false;      // shutdown() runs concurrently
  bool start_parked = false;  // start from an idle pool instead of a just-started one
  variant v = variant::real;
  int base_start = -1;  // >= 0: the base goal at start (else min_goal)
};

// Program counters. W_*: workers; K_*: wake_one_if_needed (called by producers, workers and the
// gate; its first round's checks are inline in pool_impl.hpp and the rest is wake_one_slow in
// wake_protocol.cpp, one loop split in two with the same steps); P_*: producers; G_*: the gate;
// S_*: shutdown.
enum pc : std::uint8_t {
  W_ABSENT,      // no thread on this slot
  W_FIND,        // find_work(): the next slot first, then the queues
  W_MAYSPIN,     // may_start_spinning() + spinning.fetch_add
  W_SPIN,        // spin_for_work()
  W_STOPCHK,     // worker_main: stopping? (give the request back and exit)
  W_GOT,         // is_spinning: stop_spinning_and_maybe_wake: spinning.fetch_sub
  W_GOT_ANY,     //   ... == 1: any_work_seq_cst()
  W_RUN,         // run(item): what the item does (see item_effects)
  W_AFTER,       // relaxed pre-check of processing > goal
  W_FLUSH,       // excess park: flush_next (before push_idle_if_excess)
  W_EXCESS,      // push_idle_if_excess (under idle_lock)
  W_LATEFLUSH,   // broken variant: flush after registering
  W_PARK1,       // park: push_idle (under idle_lock)
  W_PARK2,       // park: if was_spinning, spinning.fetch_sub
  W_PARK3,       // park: fence; any_work_seq_cst() || stopping
  W_PARK4,       // park: remove_idle (under idle_lock)
  W_WAIT,        // wait_parked: until kWoken (or kStop, or retirement)
  W_WAITSTOP,    // wait_parked saw kStop: remove_idle
  W_BLOCK1,      // blocking_begin: flush_next
  W_BLOCK2,      // blocking_begin: blocked_threads.fetch_add
  W_BLOCK3,      // blocking_begin: update_goal (CAS on counts)
  W_BLOCK4,      // blocking_begin: fence; any_work_seq_cst() -> wake_one_if_needed
  W_BLOCKED,     // inside the blocking_scope
  W_UNBLOCK1,    // blocking_end: blocked_threads.fetch_sub
  W_UNBLOCK2,    // blocking_end: update_goal
  W_WAITX1,      // before_blocking_wait: flush_next (+ after_push if it moved an item)
  W_WAITX,       // the wait itself
  W_GONE,        // the thread exited at shutdown (its counts stay, as in the real code)
  W_FORKPUSH,    // fork_push, the look taken first: the push itself
  W_FORKJOIN,    // fork_join_local: pop; the job if nobody stole it, else wait
  W_FORKWAIT,    // the join's wait for the thief (wait_for_stolen, fork_wait)
  K_SPIN,        // spinning.load() != 0 -> return
  K_IDLE,        // idle_now = idle_count.load()
  K_COUNTS,      // counts: processing >= goal -> return; idle_now == 0 && existing >= max -> return
  K_CAS,         // spinning CAS 0 -> 1
  K_POP,         // pop_idle_within_goal (under idle_lock)
  K_SIGNAL,      // w->wake_signal |= kWoken; futex_wake
  K_IDLE2,       // idle_count.load() == 0 -> start_worker
  K_START,       // start_worker (under threads_lock)
  K_GIVEBACK,    // spinning.fetch_sub
  K_IDLE3,       // idle_count.load() == 0 && counts unchanged -> return, else loop
  P_PUSH,        // queue one item (or done)
  P_LATEPUSH,    // broken variant: the push after the look
  P_DONE,
  G_IDLE,        // the gate: starvation injection / the hill-climbing move, when due
  G_INJECT,      // inject_for_starvation: pop an idle worker within the goal and signal it, or start one
  G_CLIMB,       // climb(): processing < goal && any work -> wake_one_if_needed
  S_STOP,        // shutdown: stopping = true (under threads_lock)
  S_SIGNAL,      // shutdown: kStop to every worker (one step per worker)
  S_JOIN,        // shutdown: wait for every worker to exit, then drain_inline
  S_DRAIN,       // shutdown: wait for pushes in flight, drain again
  S_DONE,
  kPcCount
};

const char* pc_name(int p) {
  static const char* const names[] = {
      "absent", "find_work", "may_start_spinning", "spin_for_work", "stopping?", "stop_spinning",
      "stop_spinning:any_work", "run", "excess_precheck", "excess:flush_next", "push_idle_if_excess",
      "excess:flush_next(late)", "park:push_idle", "park:stop_spinning", "park:fence+any_work",
      "park:remove_idle", "wait_parked", "wait_parked:stop:remove_idle", "blocking_begin:flush_next",
      "blocking_begin:blocked++", "blocking_begin:update_goal", "blocking_begin:fence+any_work",
      "blocked", "blocking_end:blocked--", "blocking_end:update_goal", "before_blocking_wait:flush",
      "waiting", "exited", "fork_push:push", "fork_join:pop", "fork_join:wait", "wake:spinning?", "wake:idle_count?", "wake:counts?", "wake:CAS",
      "wake:pop_idle_within_goal", "wake:signal", "wake:idle_count==0?", "wake:start_worker",
      "wake:give_back", "wake:anything changed?", "producer:push", "producer:late push", "producer:done",
      "gate", "gate:inject", "gate:climb-wake", "shutdown:stopping=true", "shutdown:kStop",
      "shutdown:join+drain", "shutdown:drain again", "shutdown:done"};
  static_assert(sizeof(names) / sizeof(names[0]) == kPcCount);
  return names[p];
}

constexpr std::uint8_t kWoken = 1, kStop = 2;

// Only uint8_t fields: no padding.
struct thread_state {
  std::uint8_t pc;
  std::uint8_t ret;       // where wake_one_if_needed returns to
  std::uint8_t idle_now;  // wake_one_if_needed's local copy of idle_count
  std::uint8_t token;     // worker: is_spinning (holds one unit of `spinning`)
  std::uint8_t wtoken;    // waker: won the CAS, has not handed the request on yet
  std::uint8_t target;    // waker: the worker popped from the idle list; shutdown: next worker
  std::uint8_t signal;    // worker: wake_signal bits (kWoken, kStop)
  std::uint8_t left;      // producer: items still to queue
  std::uint8_t slot;      // worker: its next slot holds an item
  std::uint8_t seen;      // waker: the counts word it decided on (processing, existing, goal)
  std::uint8_t fork;      // worker: its fork job (0 none, kForkQueued, kForkStolen, kForkDone)
  std::uint8_t runs_fork; // worker: 1 + the owner of the stolen fork job it runs (0: none)
};

constexpr std::uint8_t kForkQueued = 1, kForkStolen = 2, kForkDone = 3;

struct state {
  std::uint8_t q;  // queued items
  std::uint8_t spinning;
  std::uint8_t processing;
  std::uint8_t existing;
  std::uint8_t goal;  // counts.goal
  std::uint8_t base;  // base_goal
  std::uint8_t blocked;
  std::uint8_t idle_len;
  std::uint8_t stopping;
  std::uint8_t deque_children, slot_children, blocks, waits, climbs, injections, forks;
  std::uint8_t idle[kMaxWorkers];
  thread_state t[kMaxThreads];  // workers first (slot i = worker i), producers, gate, shutdown
};

struct step {
  state next;
  std::uint8_t thread;
  std::uint8_t from_pc;
  std::uint8_t choice;
};

class checker {
 public:
  explicit checker(const config& c) : c_(c) {}

  std::string run() {
    state s0{};
    s0.existing = static_cast<std::uint8_t>(c_.workers);
    s0.base = static_cast<std::uint8_t>(c_.base_start >= 0 ? c_.base_start : c_.min_goal);
    s0.goal = goal_for(s0);
    s0.deque_children = static_cast<std::uint8_t>(c_.fx.deque_children);
    s0.slot_children = static_cast<std::uint8_t>(c_.fx.slot_children);
    s0.blocks = static_cast<std::uint8_t>(c_.fx.blocks);
    s0.waits = static_cast<std::uint8_t>(c_.fx.waits);
    s0.forks = static_cast<std::uint8_t>(c_.fx.forks);
    s0.climbs = c_.base_goal_change >= 0 ? 1 : 0;
    s0.injections = 1;
    if (c_.start_parked) {
      for (int i = 0; i < c_.workers; ++i) {
        s0.t[i].pc = W_WAIT;
        idle_push(s0, i);
      }
    } else {
      s0.processing = static_cast<std::uint8_t>(c_.workers);
      for (int i = 0; i < c_.workers; ++i) s0.t[i].pc = W_FIND;
    }
    for (int p = 0; p < c_.producers; ++p) {
      s0.t[kMaxWorkers + p].pc = P_PUSH;
      s0.t[kMaxWorkers + p].left = static_cast<std::uint8_t>(c_.items_per_producer);
    }
    for (int p = c_.producers; p < kMaxProducers; ++p) s0.t[kMaxWorkers + p].pc = P_DONE;
    s0.t[kGate].pc = G_IDLE;
    s0.t[kShutdown].pc = c_.shutdown ? S_STOP : S_DONE;

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
  // The visited set stores the canonical state's bytes (state is all uint8_t, no padding).
  using key_t = std::array<std::uint8_t, sizeof(state)>;
  struct key_hash {
    std::size_t operator()(const key_t& k) const noexcept {
      std::uint64_t h = 0xcbf29ce484222325ull;
      for (std::uint8_t b : k) h = (h ^ b) * 0x100000001b3ull;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };

  static key_t bytes(const state& s) {
    key_t k;
    std::memcpy(k.data(), &s, sizeof(state));
    return k;
  }

  // Workers are interchangeable, and so are producers: the key is the smallest byte string over
  // every renaming (symmetry reduction).
  static key_t key(const state& s) {
    static_assert(kMaxWorkers == 3 && kMaxProducers == 2);
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    key_t best{};
    bool first = true;
    for (const auto& p : perms) {
      for (int swap_producers = 0; swap_producers < 2; ++swap_producers) {
        state m = s;
        for (int w = 0; w < kMaxWorkers; ++w) m.t[p[w]] = s.t[w];
        for (int i = 0; i < s.idle_len; ++i) m.idle[i] = static_cast<std::uint8_t>(p[s.idle[i]]);
        if (swap_producers) std::swap(m.t[kMaxWorkers], m.t[kMaxWorkers + 1]);
        for (thread_state& t : m.t) {
          if (t.pc == K_SIGNAL) t.target = static_cast<std::uint8_t>(p[t.target]);
          if (t.runs_fork != 0) t.runs_fork = static_cast<std::uint8_t>(p[t.runs_fork - 1] + 1);
        }
        // The shutdown thread's cursor is a position, not a worker: keep it as is.
        const key_t k = bytes(m);
        if (first || k < best) best = k;
        first = false;
      }
    }
    return best;
  }

  static bool is_worker_pc(int p) { return p != W_ABSENT && p < K_SPIN; }
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

  // goal_for (tpl/detail/pool_policy.hpp).
  std::uint8_t goal_for(const state& s) const {
    int g = s.base;
    if (c_.cooperative && c_.min_goal + s.blocked > g) g = c_.min_goal + s.blocked;
    if (g < c_.min_goal) g = c_.min_goal;
    if (g > c_.max_threads) g = c_.max_threads;
    return static_cast<std::uint8_t>(g);
  }

  // What any_work_seq_cst() finds: an item in a queue, a fork job on a deque included.
  static bool any_queued(const state& s) {
    if (s.q > 0) return true;
    for (int w = 0; w < kMaxWorkers; ++w)
      if (s.t[w].fork == kForkQueued) return true;
    return false;
  }

  // A worker that holds a thread in a wait or a blocking_scope (it counts as processing).
  static bool is_blocked_pc(int p) { return p == W_BLOCKED || p == W_WAITX; }

  std::string check_state(const state& s) const {
    int tokens = 0, processing = 0, existing = 0;
    for (int i = 0; i < kMaxThreads; ++i) tokens += s.t[i].token + (s.t[i].signal & kWoken) + s.t[i].wtoken;
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
    if (s.t[kShutdown].pc != S_DONE) return "shutdown never finishes (a worker never exits)";
    if (s.q != 0)
      return std::to_string(s.q) + " item(s) queued, no worker will take them (lost wake-up)";
    for (int w = 0; w < kMaxWorkers; ++w) {
      if (s.t[w].slot) return "worker " + std::to_string(w) + "'s next-slot item is never run (lost wake-up)";
      if (s.t[w].fork != 0) return "worker " + std::to_string(w) + "'s fork job is never joined";
    }
    return {};
  }

  static void call_wake(thread_state& t, std::uint8_t ret) {
    t.pc = K_SPIN;
    t.ret = ret;
  }

  // A worker's move of its next-slot item to its deque. Returns whether it moved one.
  static bool flush(state& n, int i) {
    if (!n.t[i].slot) return false;
    n.t[i].slot = 0;
    ++n.q;
    return true;
  }

  void successors(const state& s, std::vector<step>& out) const {
    for (int i = 0; i < kMaxThreads; ++i) {
      const thread_state& t = s.t[i];
      auto emit = [&](const state& n, int choice) {
        step st{n, static_cast<std::uint8_t>(i), t.pc, static_cast<std::uint8_t>(choice)};
        thread_state& v = st.next.t[i];
        if (v.pc < K_SPIN || v.pc > K_IDLE3) v.idle_now = v.seen = 0;  // wake_one_if_needed's locals are dead
        out.push_back(st);
      };
      state n = s;
      thread_state& u = n.t[i];
      switch (t.pc) {
        case W_ABSENT:
        case W_GONE:
        case P_DONE:
        case S_DONE:
          break;
        case W_FIND:
        case W_SPIN: {
          if (t.pc == W_FIND && t.slot) {  // take_next: the owner's slot item comes first
            u.slot = 0;
            u.pc = t.token ? W_GOT : W_RUN;
            emit(n, 0);
            break;
          }
          if (s.q > 0) {
            state m = s;
            --m.q;
            m.t[i].pc = t.token ? W_GOT : W_RUN;
            emit(m, 0);
          }
          for (int v = 0; v < kMaxWorkers; ++v) {  // a steal from another worker's deque: its fork job
            if (v == i || s.t[v].fork != kForkQueued) continue;
            state m = s;
            m.t[v].fork = kForkStolen;
            m.t[i].runs_fork = static_cast<std::uint8_t>(v + 1);
            m.t[i].pc = t.token ? W_GOT : W_RUN;
            emit(m, 3);
          }
          if (t.pc == W_SPIN) {  // take_stale_next: another worker's slot item
            for (int v = 0; v < kMaxWorkers; ++v) {
              if (v == i || !s.t[v].slot) continue;
              state m = s;
              m.t[v].slot = 0;
              m.t[i].pc = t.token ? W_GOT : W_RUN;
              emit(m, 2);
            }
          }
          u.pc = t.pc == W_FIND ? W_MAYSPIN : W_STOPCHK;
          emit(n, 1);
          break;
        }
        case W_MAYSPIN: {
          if (t.token) {
            u.pc = W_SPIN;
            emit(n, 0);
            break;
          }
          state m = s;
          ++m.spinning;
          m.t[i].token = 1;
          m.t[i].pc = W_SPIN;
          emit(m, 0);
          u.pc = W_STOPCHK;
          emit(n, 1);
          break;
        }
        case W_STOPCHK:
          if (s.stopping) {
            if (t.token) --n.spinning;
            u.token = 0;
            u.pc = W_GONE;
          } else {
            u.pc = W_PARK1;
          }
          emit(n, 0);
          break;
        case W_GOT: {
          const int old = n.spinning--;
          u.token = 0;
          u.pc = old == 1 ? W_GOT_ANY : W_RUN;
          emit(n, 0);
          break;
        }
        case W_GOT_ANY:
          if (any_queued(s))
            call_wake(u, W_RUN);
          else
            u.pc = W_RUN;
          emit(n, 0);
          break;
        case W_RUN: {
          if (t.runs_fork != 0) {  // a stolen fork job: it runs, then the thief publishes kDone
            n.t[t.runs_fork - 1].fork = kForkDone;
            u.runs_fork = 0;
            u.pc = W_AFTER;
            emit(n, 0);
            break;
          }
          // The item returns, or does one more thing the protocol sees and goes on running.
          u.pc = W_AFTER;
          emit(n, 0);
          if (s.forks > 0 && t.fork == 0) {  // parallel::invoke: fork_push, in both orders (file comment)
            state m = s;
            --m.forks;
            m.t[i].fork = kForkQueued;  // the push seen first, then the look
            call_wake(m.t[i], W_FORKJOIN);
            emit(m, 6);
            state l = s;
            --l.forks;
            call_wake(l.t[i], W_FORKPUSH);  // the look before the push is visible (no fence)
            emit(l, 7);
          }
          if (s.deque_children > 0) {  // queues a child on the worker's deque
            state m = s;
            --m.deque_children;
            ++m.q;
            call_wake(m.t[i], W_RUN);
            emit(m, 1);
          }
          if (s.slot_children > 0) {  // push_next
            state m = s;
            --m.slot_children;
            if (t.slot) {  // the old occupant goes to the deque with the full protocol
              ++m.q;
              call_wake(m.t[i], W_RUN);
              emit(m, 2);
            } else {
              m.t[i].slot = 1;
              emit(m, 2);  // a spinner was seen (relaxed hint): no more
              call_wake(m.t[i], W_RUN);  // the wake protocol, for the rescue's sake
              emit(m, 3);
            }
          }
          if (s.blocks > 0) {
            state m = s;
            --m.blocks;
            m.t[i].pc = W_BLOCK1;
            emit(m, 4);
          }
          if (s.waits > 0) {
            state m = s;
            --m.waits;
            m.t[i].pc = W_WAITX1;
            emit(m, 5);
          }
          break;
        }
        case W_FORKPUSH:
          u.fork = kForkQueued;
          u.pc = W_FORKJOIN;
          emit(n, 0);
          break;
        case W_FORKJOIN:
          // The pop returns the job if nobody stole it (it runs here as a plain call); a stolen
          // job may be done already.
          if ((t.fork == kForkQueued && c_.v != variant::fork_join_waits_for_thief) || t.fork == kForkDone) {
            u.fork = 0;
            u.pc = W_RUN;
          } else {
            u.pc = W_FORKWAIT;
          }
          emit(n, 0);
          break;
        case W_FORKWAIT:
          if (t.fork == kForkDone) {
            u.fork = 0;
            u.pc = W_RUN;
            emit(n, 0);
          }
          break;
        case W_AFTER: {
          state m = s;
          m.t[i].pc = W_FIND;
          emit(m, 0);
          if (s.processing > s.goal) {
            u.pc = c_.v == variant::excess_flush_after_idle ? W_EXCESS : W_FLUSH;
            emit(n, 1);
          }
          break;
        }
        case W_FLUSH:
          flush(n, i);
          u.pc = W_EXCESS;
          emit(n, 0);
          break;
        case W_EXCESS:
          if (n.processing > n.goal) {
            idle_push(n, i);
            --n.processing;
            u.pc = c_.v == variant::excess_flush_after_idle ? W_LATEFLUSH : W_WAIT;
          } else {
            u.pc = W_FIND;
          }
          emit(n, 0);
          break;
        case W_LATEFLUSH:
          flush(n, i);
          u.pc = W_WAIT;
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
          u.pc = (any_queued(s) || s.stopping) ? W_PARK4 : W_WAIT;
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
          if (t.signal & kWoken) {
            u.signal = static_cast<std::uint8_t>(t.signal & ~kWoken);
            u.token = 1;  // woken: spinning
            u.pc = W_FIND;
            emit(n, 0);
          } else if (t.signal & kStop) {
            u.pc = W_WAITSTOP;
            emit(n, 0);
          } else if (c_.retire && in_idle(s, i)) {
            idle_remove(n, i);
            --n.existing;
            u = thread_state{};
            u.pc = W_ABSENT;
            emit(n, 1);
          }
          break;
        case W_WAITSTOP:
          if (in_idle(n, i)) {
            idle_remove(n, i);
            ++n.processing;
            u.pc = W_GONE;
          } else {
            u.pc = W_WAIT;  // popped by a waker: its kWoken comes
          }
          emit(n, 0);
          break;
        case W_BLOCK1:
          if (c_.v != variant::wait_keeps_next_slot) flush(n, i);
          u.pc = W_BLOCK2;
          emit(n, 0);
          break;
        case W_BLOCK2:
          ++n.blocked;
          u.pc = W_BLOCK3;
          emit(n, 0);
          break;
        case W_BLOCK3:
          n.goal = goal_for(n);
          u.pc = W_BLOCK4;
          emit(n, 0);
          break;
        case W_BLOCK4:
          if (any_queued(s) && c_.v != variant::blocking_flush_no_wake)
            call_wake(u, W_BLOCKED);
          else
            u.pc = W_BLOCKED;
          emit(n, 0);
          break;
        case W_BLOCKED:
          if (c_.fx.waits_end) {
            u.pc = W_UNBLOCK1;
            emit(n, 0);
          }
          break;
        case W_UNBLOCK1:
          --n.blocked;
          u.pc = W_UNBLOCK2;
          emit(n, 0);
          break;
        case W_UNBLOCK2:
          n.goal = goal_for(n);
          u.pc = W_RUN;
          emit(n, 0);
          break;
        case W_WAITX1:
          if (c_.v != variant::wait_keeps_next_slot && flush(n, i))
            call_wake(u, W_WAITX);
          else
            u.pc = W_WAITX;
          emit(n, 0);
          break;
        case W_WAITX:
          if (c_.fx.waits_end) {
            u.pc = W_RUN;
            emit(n, 0);
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
          u.seen = counts_word(s);
          if (s.processing >= s.goal)
            u.pc = t.ret;
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
          if (s.idle_len > 0 && s.processing < s.goal) {
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
          n.t[t.target].signal |= kWoken;
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
          const int slot = free_slot(s);
          if (slot >= 0 && !s.stopping && s.existing < c_.max_threads && s.processing < s.goal) {
            start(n, slot, /*spinning=*/true);
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
          u.pc = (s.idle_len == 0 && (counts_word(s) == t.seen || c_.v == variant::giveback_rechecks_idle_only))
                     ? t.ret
                     : std::uint8_t{K_SPIN};
          u.seen = 0;
          emit(n, 0);
          break;
        case P_PUSH:
          if (t.left == 0) {
            u.pc = P_DONE;
          } else if (s.t[kShutdown].pc == S_DONE && c_.shutdown) {
            --u.left;  // after shutdown: the item runs inline on the producer
          } else if (c_.v == variant::check_before_push) {
            call_wake(u, P_LATEPUSH);
          } else {
            ++n.q;
            --u.left;
            call_wake(u, P_PUSH);
          }
          emit(n, 0);
          break;
        case P_LATEPUSH:
          ++n.q;
          --u.left;
          u.pc = P_PUSH;
          emit(n, 0);
          break;
        case G_IDLE:
          if (s.stopping) break;  // the gate is joined first
          if (s.climbs > 0) {  // hill climbing moves the base goal
            --n.climbs;
            n.base = static_cast<std::uint8_t>(c_.base_goal_change);
            n.goal = goal_for(n);
            u.pc = G_CLIMB;
            emit(n, 0);
          }
          if (s.injections > 0 && starving(s)) {  // starvation: base = processing + 1
            state m = s;
            --m.injections;
            m.base = static_cast<std::uint8_t>(std::min<int>(c_.max_threads, std::max<int>(s.base, s.processing) + 1));
            m.goal = goal_for(m);
            m.t[i].pc = G_INJECT;
            emit(m, 1);
          }
          break;
        case G_INJECT:
          if (s.idle_len > 0 && s.processing < s.goal) {
            const int w = n.idle[--n.idle_len];
            n.idle[n.idle_len] = 0;
            ++n.processing;
            ++n.spinning;
            n.t[w].signal |= kWoken;
          } else if (const int slot = free_slot(s);
                     slot >= 0 && !s.stopping && s.existing < c_.max_threads && s.processing < s.goal) {
            start(n, slot, /*spinning=*/false);
          }
          u.pc = G_IDLE;
          emit(n, 0);
          break;
        case G_CLIMB:
          if (s.processing < s.goal && any_queued(s))
            call_wake(u, G_IDLE);
          else
            u.pc = G_IDLE;
          emit(n, 0);
          break;
        case S_STOP:
          n.stopping = 1;
          u.pc = S_SIGNAL;
          u.target = 0;
          emit(n, 0);
          break;
        case S_SIGNAL:
          if (t.target == kMaxWorkers) {
            u.pc = S_JOIN;
          } else {
            if (s.t[t.target].pc != W_ABSENT) {
              if (c_.v == variant::shutdown_signals_woken)
                n.t[t.target].signal |= kWoken;
              else
                n.t[t.target].signal |= kStop;
            }
            ++u.target;
          }
          emit(n, 0);
          break;
        case S_JOIN: {
          bool all_gone = true;
          for (int w = 0; w < kMaxWorkers; ++w)
            if (s.t[w].pc != W_ABSENT && s.t[w].pc != W_GONE) all_gone = false;
          if (all_gone) {  // drain_inline runs what is left, next slots included
            n.q = 0;
            for (int w = 0; w < kMaxWorkers; ++w) n.t[w].slot = 0;
            u.pc = S_DRAIN;
            emit(n, 0);
          }
          break;
        }
        case S_DRAIN: {
          bool in_flight = false;  // pushes_in_flight: a producer inside push/after_push
          for (int p = 0; p < kMaxProducers; ++p)
            if (s.t[kMaxWorkers + p].pc >= K_SPIN && s.t[kMaxWorkers + p].pc <= K_IDLE3) in_flight = true;
          if (!in_flight) {
            n.q = 0;
            u.pc = S_DONE;
            emit(n, 0);
          }
          break;
        }
        default:
          break;
      }
    }
  }

  static std::uint8_t counts_word(const state& s) {
    return static_cast<std::uint8_t>(s.processing | (s.existing << 2) | (s.goal << 4));
  }

  int free_slot(const state& s) const {
    for (int w = 0; w < kMaxWorkers; ++w)
      if (s.t[w].pc == W_ABSENT) return w;
    return -1;
  }

  static void start(state& n, int slot, bool spinning) {
    ++n.existing;
    ++n.processing;
    n.t[slot] = thread_state{};
    n.t[slot].pc = W_FIND;
    n.t[slot].token = spinning ? 1 : 0;
  }

  // The gate's starvation rule, where it is the policy's job: work is queued, the goal's workers
  // all process, and each of them is blocked (nobody else will look at the queues).
  bool starving(const state& s) const {
    if (!any_queued(s) || s.processing < s.goal) return false;
    for (int w = 0; w < kMaxWorkers; ++w) {
      const int p = s.t[w].pc;
      if (p == W_ABSENT || p == W_GONE || in_idle(s, w)) continue;
      if (!is_blocked_pc(p)) return false;
    }
    return true;
  }

  std::string describe(const step& st) const {
    std::string who;
    if (st.thread < kMaxWorkers)
      who = "worker " + std::to_string(st.thread);
    else if (st.thread < kGate)
      who = "producer " + std::to_string(st.thread - kMaxWorkers);
    else
      who = st.thread == kGate ? "gate" : "shutdown";
    std::string what = pc_name(st.from_pc);
    if (st.from_pc == W_FIND || st.from_pc == W_SPIN) {
      static const char* const c[] = {" -> took an item", " -> found nothing", " -> took a stale next-slot item",
                                      " -> stole a fork job"};
      what += c[st.choice];
    }
    if (st.from_pc == W_RUN) {
      static const char* const c[] = {"", " -> queues a child", " -> wakes a coroutine into its next slot",
                                      " -> wakes a coroutine into its next slot (+ wake protocol)",
                                      " -> enters a blocking_scope", " -> waits outside a blocking_scope",
                                      " -> fork_push (push, then look)", " -> fork_push (look, then push)"};
      what += c[st.choice];
    }
    if (st.from_pc == W_MAYSPIN && st.choice == 1) what += " -> no";
    if (st.from_pc == W_AFTER) what += st.choice == 0 ? " -> not above goal" : " -> above goal";
    if (st.from_pc == W_WAIT) what += st.choice == 0 ? " -> woken" : " -> retired";
    if (st.from_pc == G_IDLE) what += st.choice == 0 ? ": hill climbing moves the base goal" : ": starvation";
    return who + ": " + what;
  }

  std::string summary(const state& s) const {
    std::string r = "q=" + std::to_string(s.q) + " spinning=" + std::to_string(s.spinning) +
                    " processing=" + std::to_string(s.processing) + " existing=" + std::to_string(s.existing) +
                    " goal=" + std::to_string(s.goal) + " blocked=" + std::to_string(s.blocked) + " idle=[";
    for (int i = 0; i < s.idle_len; ++i) r += (i ? "," : "") + std::to_string(s.idle[i]);
    r += "]";
    if (s.stopping) r += " stopping";
    for (int w = 0; w < kMaxWorkers; ++w) {
      if (s.t[w].pc == W_ABSENT) continue;
      r += " w" + std::to_string(w) + "@" + pc_name(s.t[w].pc);
      if (s.t[w].token) r += "(spinning)";
      if (s.t[w].signal & kWoken) r += "(signalled)";
      if (s.t[w].signal & kStop) r += "(asked to stop)";
      if (s.t[w].slot) r += "(next slot: 1)";
      if (s.t[w].fork != 0) r += "(fork job: " + std::to_string(s.t[w].fork) + ")";
      if (s.t[w].runs_fork != 0) r += "(runs w" + std::to_string(s.t[w].runs_fork - 1) + "'s fork job)";
    }
    return r;
  }

  config c_;
  std::unordered_set<key_t, key_hash> visited_;
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
  std::printf("[model] %-58s states %9zu  transitions %10zu  terminal %7zu%s\n", c.name, k.states(), k.transitions(),
              k.terminal_states(), r.empty() ? "" : "  COUNTEREXAMPLE");
  std::fflush(stdout);
  return {r, k.states()};
}

// Configurations: {name, producers, items each, workers, max threads, min goal, item effects
// {deque children, slot children, blocks, waits, blocks end}, cooperative, hill-climbing base
// goal (-1: none), retire, shutdown, start parked, variant}. "fresh": the workers start
// processing, so their own first searches and parks interleave with the producers; "parked":
// the pool starts idle.
config with_base(config c, int start, int change) {
  c.base_start = start;
  c.base_goal_change = change;
  return c;
}

std::vector<config> real_configs() {
  // Small enough for the sanitizer builds (about 100,000 states in all).
  std::vector<config> v = {
      {"fresh: 1 producer x 1, 1 worker", 1, 1, 1, 1, 1},
      {"fresh: 1 producer x 1, 1 worker, 2 children", 1, 1, 1, 1, 1, {2, 0, 0, 0}},
      {"fresh: 1 producer x 1, 1 worker/max 2, child, retire", 1, 1, 1, 2, 2, {1, 0, 0, 0}, true, -1, true},
      {"parked: 1 producer x 1, 2 workers, 2 slot wake-ups", 1, 1, 2, 2, 2, {0, 2, 0, 0}, true, -1, false, false, true},
      with_base({"parked: 1 producer x 1, 2 workers, goal 1 -> 2, child", 1, 1, 2, 2, 1, {1, 0, 0, 0}, true, -1, false, false, true}, 1, 2),
      {"parked: 1 producer x 1, 2 workers, slot, block ends", 1, 1, 2, 2, 1, {0, 1, 1, 0}, true, -1, false, false, true},
      {"parked: 1 producer x 1, 2 workers, slot, blocked for good", 1, 1, 2, 2, 1, {0, 1, 1, 0, false}, true, -1, false, false, true},
      {"parked: 1 producer x 1, 2 workers, slot, waits for good", 1, 1, 2, 2, 1, {0, 1, 0, 1, false}, true, -1, false, false, true},
      {"parked: 1 producer x 1, 2 workers, slot, waits, no coop", 1, 1, 2, 2, 2, {0, 1, 0, 1, false}, false, -1, false, false, true},
      {"parked: 1 producer x 1, 2 workers, slot, blocks, no coop", 1, 1, 2, 2, 1, {0, 1, 1, 0, false}, false, -1, false, false, true},
      {"fresh: 1 producer x 1, 1 worker/max 2, slot, blocked for good", 1, 1, 1, 2, 1, {0, 1, 1, 0, false}},
      {"parked: 1 producer x 1, 2 workers, slot, shutdown", 1, 1, 2, 2, 2, {0, 1, 0, 0}, true, -1, false, true, true},
      {"parked: 1 producer x 2, 2 workers, 1 child, goal 1", 1, 2, 2, 2, 1, {1, 0, 0, 0}, true, -1, false, false, true},
      {"parked: 1 producer x 1, 2 workers, fork", 1, 1, 2, 2, 2, {0, 0, 0, 0, true, 1}, true, -1, false, false, true},
      {"fresh: 1 producer x 1, 2 workers, 2 forks", 1, 1, 2, 2, 2, {0, 0, 0, 0, true, 2}},
      {"parked: 1 producer x 1, 2 workers, fork, block ends", 1, 1, 2, 2, 1, {0, 0, 1, 0, true, 1}, true, -1, false, false, true},
  };
  if (tpl_test::scaled(1, 0) != 0) {
    v.push_back({"fresh: 1 producer x 2, 2 workers", 1, 2, 2, 2, 2});
    v.push_back({"fresh: 1 producer x 2, 2 workers, goal 1", 1, 2, 2, 2, 1});
    v.push_back({"parked: 2 producers x 1, 2 workers", 2, 1, 2, 2, 2, {}, true, -1, false, false, true});
    v.push_back({"parked: 1 producer x 2, 2 workers/max 3, retire", 1, 2, 2, 3, 3, {}, true, -1, true, false, true});
    v.push_back({"fresh: 1 producer x 1, 2 workers, slot + child", 1, 1, 2, 2, 2, {1, 1, 0, 0}});
    // The excess park: the goal drops under running workers that hold slot items.
    v.push_back(with_base({"fresh: 1 producer x 1, 2 workers, goal 2 -> 1, slot", 1, 1, 2, 2, 1, {0, 1, 0, 0}}, 2, 1));
    v.push_back({"parked: 2 producers x 1, 3 workers, goal 2", 2, 1, 3, 3, 2, {}, true, -1, false, false, true});
    v.push_back({"fresh: 2 producers x 1, 2 workers", 2, 1, 2, 2, 2});
    v.push_back({"parked: 2 producers x 1, 3 workers", 2, 1, 3, 3, 3, {}, true, -1, false, false, true});
    v.push_back({"parked: 2 producers x 1, 1 worker/max 3", 2, 1, 1, 3, 3, {}, true, -1, false, false, true});
    v.push_back({"parked: 2 producers x 1, 2 workers/max 3, retire", 2, 1, 2, 3, 3, {}, true, -1, true, false, true});
    v.push_back({"parked: 1 producer x 1, 2 workers/max 3, slot, block, wait", 1, 1, 2, 3, 1, {0, 1, 1, 1}, true, -1, false, false, true});
    v.push_back({"fresh: 1 producer x 1, 2 workers, child, shutdown", 1, 1, 2, 2, 2, {1, 0, 0, 0}, true, -1, false, true});
    v.push_back({"parked: 2 producers x 1, 2 workers, shutdown", 2, 1, 2, 2, 2, {}, true, -1, false, true, true});
    v.push_back({"parked: 1 producer x 1, 2 workers, slot, block, shutdown", 1, 1, 2, 2, 1, {0, 1, 1, 0}, true, -1, false, true, true});
    v.push_back({"parked: 1 producer x 2, 2 workers, fork, child", 1, 2, 2, 2, 2, {1, 0, 0, 0, true, 1}, true, -1, false, false, true});
    v.push_back({"fresh: 1 producer x 1, 2 workers, fork, shutdown", 1, 1, 2, 2, 2, {0, 0, 0, 0, true, 1}, true, -1, false, true});
  }
  // Bigger configurations (tens of millions of transitions, minutes): TPL_MODEL_EXTENDED=1.
  if (const char* e = std::getenv("TPL_MODEL_EXTENDED"); e != nullptr && std::strcmp(e, "1") == 0) {
    v.push_back(with_base({"fresh: 1 producer x 2, 2 workers, goal 2 -> 1, 2 slots", 1, 2, 2, 2, 1, {0, 2, 0, 0}}, 2, 1));
    v.push_back(with_base({"fresh: 1 producer x 1, 3 workers, goal 3 -> 1, 2 slots", 1, 1, 3, 3, 1, {0, 2, 0, 0}}, 3, 1));
    v.push_back({"fresh: 1 producer x 1, 2 workers/max 3, slot, child, retire, shutdown", 1, 1, 2, 3, 2, {1, 1, 0, 0}, true, -1, true, true});
    v.push_back({"parked: 1 producer x 2, 2 workers/max 3, slot, block, wait", 1, 2, 2, 3, 1, {0, 1, 1, 1}, true, -1, false, false, true});
    v.push_back({"parked: 2 producers x 1, 2 workers, slot, block, shutdown", 2, 1, 2, 2, 1, {0, 1, 1, 0}, true, -1, false, true, true});
  }
  return v;
}

config broken(const char* name, variant v, config base) {
  base.name = name;
  base.v = v;
  return base;
}

// One configuration that shows each broken variant (the smallest that does).
std::vector<config> broken_configs() {
  return {
      broken("broken: producer looks before queuing", variant::check_before_push, {"", 1, 1, 1, 1, 1}),
      broken("broken: park without re-check", variant::no_recheck_after_idle, {"", 1, 1, 1, 1, 1}),
      broken("broken: excess park flushes after registering", variant::excess_flush_after_idle,
             with_base({"", 1, 1, 2, 2, 1, {0, 1, 0, 0}}, 2, 1)),
      broken("broken: blocking_begin flushes without a wake-up", variant::blocking_flush_no_wake,
             {"", 1, 1, 2, 2, 1, {0, 1, 1, 0, false}, true, -1, false, false, true}),
      broken("broken: a wait keeps its next-slot item", variant::wait_keeps_next_slot,
             {"", 1, 1, 2, 2, 2, {0, 1, 0, 1, false}, true, -1, false, false, true}),
      broken("broken: shutdown wakes with kWoken", variant::shutdown_signals_woken,
             {"", 1, 1, 2, 2, 2, {}, true, -1, false, true, true}),
      broken("broken: a waker's give-back looks only for idle workers", variant::giveback_rechecks_idle_only,
             {"", 1, 1, 1, 2, 1, {0, 1, 1, 0, false}}),
      broken("broken: a fork join waits for a thief instead of taking its job back", variant::fork_join_waits_for_thief,
             {"", 1, 1, 2, 2, 2, {0, 0, 0, 0, true, 1}, true, -1, false, false, true}),
  };
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

TEST(model_pool_handshake, every_known_broken_variant_yields_a_counterexample) {
  for (const config& c : broken_configs()) {
    const outcome o = check(c);
    ASSERT_FALSE(o.counterexample.empty()) << "the checker missed a known bug: " << c.name;
    std::printf("%s\n%s", c.name, o.counterexample.c_str());
  }
}

TEST(model_pool_handshake, broken_variants_fail_in_bigger_configurations_too) {
  for (variant v : {variant::check_before_push, variant::no_recheck_after_idle}) {
    config c{"broken variant, 2 producers x 1, 2 workers", 2, 1, 2, 2, 2};
    c.v = v;
    EXPECT_FALSE(check(c).counterexample.empty());
  }
}

}  // namespace model_pool_handshake_test_cpp
