// Exhaustive model check of the io_uring engine's hand-off (src/io/uring_engine.cpp, whose header
// states the protocol): one operation's start, its cancellation by a token callback, the kernel,
// the completion thread, and the engine's shutdown.
//
// Actors, each step one atomic action of the real code (a step under the ring lock is one step,
// except the canceler's, which holds the lock across its CAS and the queuing of its cancel SQE,
// so the completion thread, which takes no lock to reap, may run between them):
//   starter   registers the token callback; then, under the lock, either completes at once
//             (NOT_STARTED set by a cancel that came first, or the engine stopping) or queues the
//             operation's SQE, sets SUBMITTED, counts it in flight and suspends; once resumed it
//             resets the registration (which waits for a callback running elsewhere) and its
//             frame (the io_op) is freed.
//   canceler  the token callback: may fire at any time while the registration is active.
//   kernel    takes SQEs in order. A pending operation may complete on its own (a file read) or
//             not (a read on an empty pipe). A cancel finds a pending operation and ends it,
//             posting its own CQE and the operation's (-ECANCELED) in either order, or finds none
//             (-ENOENT). Shutdown's cancel-all ends a pending operation and posts its own CQE.
//   reaper    pops CQEs in order and applies the flag rules; after each it checks its exit
//             condition (stop seen and nothing in flight).
//   shutdown  under the lock sets stopping and queues the cancel-all; then joins the reaper,
//             waits until the operation has left complete() (the engine's alive count), and
//             destroys the engine.
// A close() of a stream cancels through the same function under the stream's pending-list mutex,
// which the starter takes before its frame is freed exactly as it resets the registration: it is
// this canceler again, and is not modelled twice.
//
// Checked in every state: the operation is resumed at most once; no CQE naming it is handled,
// and no cancel aimed at it is taken by the kernel, after its frame is freed; the canceler does
// not run on a freed frame. Checked in every terminal state: the operation completed and its
// frame was freed (no lost completion), a started shutdown finished (never a hang), and nothing
// naming the operation was left in the ring it destroyed. Known-bad variants each yield a counterexample: the op's CQE
// ignoring an earlier CANCEL_DONE (a lost completion when the kernel posts the cancel's CQE
// first), the op's CQE resuming regardless of a cancel in flight (a CQE handled after the frame
// is freed), the reaper leaving on the stop alone (a lost completion at shutdown), and the starter
// freeing its frame without waiting for a running callback, and the engine destroyed once the
// reaper left without waiting for the resumed operation to finish with it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "model_check.hpp"

namespace model_io_uring_test_cpp {

namespace {

enum class variant : std::uint8_t {
  real,
  op_cqe_ignores_cancel_done,
  op_cqe_always_resumes,
  reaper_exits_on_stop_alone,
  free_without_waiting_for_callback,
  destroy_without_waiting_for_operations,
};

enum flag : std::uint8_t { submitted = 1, op_done = 2, cancel_submitted = 4, cancel_done = 8, not_started = 16 };
enum sqe : std::uint8_t { sqe_op, sqe_cancel, sqe_cancel_all };
enum cqe : std::uint8_t { cqe_op, cqe_cancel, cqe_internal };

enum starter_pc : std::uint8_t { s_register, s_submit, s_suspended, s_resumed, s_freed };
enum canceler_pc : std::uint8_t { c_idle, c_fired, c_locked, c_done };
enum kernel_op : std::uint8_t { k_unseen, k_pending, k_finished };
enum reaper_pc : std::uint8_t { r_wait, r_check, r_exited };
enum shutdown_pc : std::uint8_t { d_idle, d_join, d_done };

struct scenario {
  bool cancel;             // the token may be canceled
  bool shutdown;           // the engine shuts down
  bool op_can_complete;    // a file read (completes) or a pipe read (waits until canceled)
};

struct state {
  std::uint8_t starter = s_register, canceler = c_idle, kernel = k_unseen, reaper = r_wait, shut = d_idle;
  std::uint8_t flags = 0;
  std::uint8_t lock_held_by_canceler = 0;
  std::uint8_t stopping = 0, stop_requested = 0, in_flight = 0, resumed = 0, ring_destroyed = 0;
  std::deque<std::uint8_t> sq, cq;

  std::string key() const {
    std::string k{static_cast<char>(starter), static_cast<char>(canceler), static_cast<char>(kernel),
                  static_cast<char>(reaper), static_cast<char>(shut), static_cast<char>(flags),
                  static_cast<char>(lock_held_by_canceler), static_cast<char>(stopping),
                  static_cast<char>(stop_requested), static_cast<char>(in_flight), static_cast<char>(resumed),
                  static_cast<char>(ring_destroyed), '|'};
    for (auto s : sq) k += static_cast<char>('a' + s);
    k += '|';
    for (auto c : cq) k += static_cast<char>('A' + c);
    return k;
  }
};

struct checker : model_check::recursion<std::string> {
  variant v;
  scenario sc;

  bool registration_active(const state& s) const { return s.starter == s_submit || s.starter == s_suspended || s.starter == s_resumed; }

  // Resumes the starter (the reaper queues its coroutine to the pool); false on a double resume.
  static bool resume(state& s) {
    if (s.starter != s_suspended) return false;
    s.in_flight--;
    s.starter = s_resumed;
    s.resumed++;
    return true;
  }

  bool explore(const state& s) {
    if (!first_visit(s.key())) return true;
    std::vector<std::pair<state, std::string>> next;
    const bool lock_free = s.lock_held_by_canceler == 0;

    // --- starter ---
    if (s.starter == s_register) {
      state n = s;
      n.starter = s_submit;
      next.push_back({n, "starter: registers the token callback"});
    } else if (s.starter == s_submit && lock_free) {
      state n = s;
      if ((s.flags & not_started) != 0 || s.stopping) {
        n.starter = s_resumed;  // completes at once with -ECANCELED
        next.push_back({n, "starter: under the lock finds NOT_STARTED or stopping: completes at once"});
      } else {
        n.flags |= submitted;
        n.in_flight++;
        n.sq.push_back(sqe_op);
        n.starter = s_suspended;
        next.push_back({n, "starter: under the lock queues the SQE, SUBMITTED, in_flight++, suspends"});
      }
    } else if (s.starter == s_resumed) {
      const bool callback_running = s.canceler == c_fired || s.canceler == c_locked;
      if (!callback_running || v == variant::free_without_waiting_for_callback) {
        if (s.ring_destroyed) return fail("the resumed operation calls complete() on a destroyed engine");
        state n = s;
        n.starter = s_freed;
        if (n.canceler == c_idle) n.canceler = c_done;  // unregistered: will never fire
        next.push_back({n, "starter: resets the registration; the frame is freed"});
      }
    }

    // --- canceler (the token callback) ---
    if (sc.cancel) {
      if (s.canceler == c_idle && registration_active(s)) {
        state n = s;
        n.canceler = c_fired;
        next.push_back({n, "canceler: the token is canceled, the callback starts"});
      } else if (s.canceler == c_fired && lock_free) {
        if (s.starter == s_freed) return fail("the callback runs on a freed operation");
        state n = s;
        if ((s.flags & submitted) == 0) {
          n.flags |= not_started;
          n.canceler = c_done;
          next.push_back({n, "canceler: under the lock finds it not submitted: NOT_STARTED"});
        } else if ((s.flags & (op_done | cancel_submitted)) != 0) {
          n.canceler = c_done;
          next.push_back({n, "canceler: CAS finds OP_DONE: nothing to cancel"});
        } else {
          n.flags |= cancel_submitted;
          n.lock_held_by_canceler = 1;
          n.canceler = c_locked;
          next.push_back({n, "canceler: CAS sets CANCEL_SUBMITTED (holding the lock)"});
        }
      } else if (s.canceler == c_locked) {
        if (s.starter == s_freed) return fail("the callback queues a cancel for a freed operation");
        state n = s;
        n.sq.push_back(sqe_cancel);
        n.lock_held_by_canceler = 0;
        n.canceler = c_done;
        next.push_back({n, "canceler: queues the cancel SQE, releases the lock"});
      }
    }

    // --- kernel ---
    if (!s.sq.empty() && !s.ring_destroyed) {
      state n = s;
      const std::uint8_t e = n.sq.front();
      n.sq.pop_front();
      if (e == sqe_op) {
        n.kernel = k_pending;
        next.push_back({n, "kernel: takes the operation (pending)"});
      } else if (e == sqe_cancel) {
        if (s.starter == s_freed) return fail("the kernel takes a cancel aimed at a freed operation");
        if (s.kernel == k_pending) {
          state a = n, b = n;
          a.kernel = b.kernel = k_finished;
          a.cq.push_back(cqe_cancel), a.cq.push_back(cqe_op);
          b.cq.push_back(cqe_op), b.cq.push_back(cqe_cancel);
          next.push_back({a, "kernel: cancel ends the operation: posts the cancel's CQE, then the op's"});
          next.push_back({b, "kernel: cancel ends the operation: posts the op's CQE, then the cancel's"});
        } else {
          n.cq.push_back(cqe_cancel);
          next.push_back({n, "kernel: cancel finds nothing (-ENOENT)"});
        }
      } else {
        if (s.kernel == k_pending) {
          n.kernel = k_finished;
          n.cq.push_back(cqe_op);
        }
        n.cq.push_back(cqe_internal);
        next.push_back({n, "kernel: cancel-all (ends a pending operation)"});
      }
    }
    if (s.kernel == k_pending && sc.op_can_complete) {
      state n = s;
      n.kernel = k_finished;
      n.cq.push_back(cqe_op);
      next.push_back({n, "kernel: the operation completes on its own"});
    }

    // --- reaper ---
    if (s.reaper == r_wait && !s.cq.empty()) {
      state n = s;
      const std::uint8_t e = n.cq.front();
      n.cq.pop_front();
      n.reaper = r_check;
      std::string what;
      if (e == cqe_op || e == cqe_cancel) {
        if (s.starter == s_freed) return fail("a CQE naming the operation is handled after its frame was freed");
      }
      if (e == cqe_op) {
        const std::uint8_t before = n.flags;
        n.flags |= op_done;
        bool resumes = false;
        switch (v) {
          case variant::op_cqe_ignores_cancel_done: resumes = (before & cancel_submitted) == 0; break;
          case variant::op_cqe_always_resumes: resumes = true; break;
          default: resumes = (before & cancel_submitted) == 0 || (before & cancel_done) != 0; break;
        }
        if (resumes && !resume(n)) return fail("the operation is resumed twice");
        what = resumes ? "reaper: op CQE, OP_DONE, resumes" : "reaper: op CQE, OP_DONE, a cancel CQE is due";
      } else if (e == cqe_cancel) {
        const std::uint8_t before = n.flags;
        n.flags |= cancel_done;
        const bool resumes = (before & op_done) != 0;
        if (resumes && !resume(n)) return fail("the operation is resumed twice");
        what = resumes ? "reaper: cancel CQE, CANCEL_DONE, resumes" : "reaper: cancel CQE, CANCEL_DONE";
      } else {
        what = "reaper: the cancel-all's CQE";
      }
      next.push_back({n, what});
    } else if (s.reaper == r_check) {
      state n = s;
      const bool leave = s.stop_requested && (v == variant::reaper_exits_on_stop_alone || s.in_flight == 0);
      n.reaper = leave ? r_exited : r_wait;
      next.push_back({n, leave ? "reaper: stop seen, nothing in flight: exits" : "reaper: waits for CQEs"});
    }

    // --- shutdown ---
    if (sc.shutdown) {
      if (s.shut == d_idle && lock_free) {
        state n = s;
        n.stopping = 1;
        n.stop_requested = 1;
        n.sq.push_back(sqe_cancel_all);
        n.shut = d_join;
        next.push_back({n, "shutdown: under the lock stopping, stop_requested, queues cancel-all"});
      } else if (s.shut == d_join && s.reaper == r_exited &&
                 (s.starter == s_freed || v == variant::destroy_without_waiting_for_operations)) {
        state n = s;
        n.shut = d_done;
        n.ring_destroyed = 1;
        // io_uring_queue_exit drops what is left of the cancel-all; anything naming the operation
        // would be a completion nobody reaps.
        for (auto e : s.sq)
          if (e != sqe_cancel_all) return fail("the ring is destroyed with an SQE naming the operation");
        for (auto e : s.cq)
          if (e != cqe_internal) return fail("the ring is destroyed with a CQE naming the operation unreaped");
        if (s.kernel == k_pending) return fail("the ring is destroyed with the operation pending in the kernel");
        n.sq.clear();
        n.cq.clear();
        next.push_back({n, "shutdown: joins the reaper, destroys the ring"});
      }
    }

    if (next.empty()) {
      if (s.starter != s_freed) return fail("terminal state: the operation never completes (lost completion)");
      if (sc.shutdown && s.shut != d_done) return fail("terminal state: shutdown hangs");
      if (s.resumed > 1) return fail("resumed twice");
      return true;
    }
    for (auto& [ns, what] : next) {
      trace.push_back(what);
      if (!explore(ns)) return false;
      trace.pop_back();
    }
    return true;
  }
};

const scenario kScenarios[] = {
    {true, false, true},   // a file read, canceled
    {true, false, false},  // a pipe read, canceled
    {false, true, true},   // a file read, shutdown
    {false, true, false},  // a pipe read, shutdown
    {true, true, true},    // all of it
    {true, true, false},
};

bool run(variant v, std::string* out_trace, std::size_t* out_states) {
  std::size_t total = 0;
  for (const scenario& sc : kScenarios) {
    checker c{{}, v, sc};
    const bool ok = c.explore(state{});
    total += c.states;
    if (!ok) {
      if (out_trace) {
        *out_trace = c.failure + " (scenario: cancel=" + std::to_string(sc.cancel) +
                     " shutdown=" + std::to_string(sc.shutdown) +
                     " op_can_complete=" + std::to_string(sc.op_can_complete) + ")\n";
        for (const auto& line : c.trace) *out_trace += "  " + line + "\n";
      }
      return false;
    }
  }
  if (out_states) *out_states = total;
  return true;
}

TEST(model_io_uring, the_real_protocol_resumes_once_after_the_last_cqe_and_shutdown_drains) {
  std::string trace;
  std::size_t states = 0;
  EXPECT_TRUE(run(variant::real, &trace, &states)) << trace;
  EXPECT_GT(states, 100u) << "the model explored too little to mean anything";
  std::printf("io_uring hand-off model: %zu states\n", states);
}

TEST(model_io_uring, each_known_bad_variant_yields_a_counterexample) {
  for (variant v : {variant::op_cqe_ignores_cancel_done, variant::op_cqe_always_resumes,
                    variant::reaper_exits_on_stop_alone, variant::free_without_waiting_for_callback,
                    variant::destroy_without_waiting_for_operations}) {
    std::string trace;
    EXPECT_FALSE(run(v, &trace, nullptr)) << "variant " << static_cast<int>(v) << " found no counterexample";
    std::printf("variant %d counterexample: %s", static_cast<int>(v), trace.c_str());
  }
}

}  // namespace

}  // namespace model_io_uring_test_cpp
