// Exhaustive model check of one socket direction's readiness handshake (src/net/socket_context.hpp:
// op_queue, socket_context::wait / drive / close, the cancel callback) against an edge-triggered
// kernel.
//
// Threads (each step is one atomic action of the real code; a locked section is one step):
//   - the operation thread: runs kOps receives one after another. A receive reads the sequence
//     number, makes its syscall (takes one unit of data, or EAGAIN), and on EAGAIN registers under
//     the lock: `closed` -> aborted; cancel requested -> canceled; number moved -> try again;
//     else it waits in the slot until a handler, the closer or the canceler completes it.
//   - the kernel: kArrivals units of data arrive one at a time. Edge-triggered epoll reports an
//     edge only when the buffer goes from empty to non-empty (the weakest promise: Linux reports
//     more), and the engine hands each edge to a handler; after close() (which detaches the
//     socket) no new edge is reported, while edges already taken may still be handled. A syscall
//     after close() fails fd_acquire: the operation ends "aborted".
//   - two handlers (two batch items may handle two edges of one socket at once): under the lock,
//     bump the number and take the waiting operation; then, for it, read the number, make the
//     syscall, and on EAGAIN register it again by the operation's rule.
//   - a closer (close(): under the lock, mark closed and take the waiting operation), at most
//     once, at any time.
//   - the operations reuse ONE operation object, as a stream socket's receives do (its op_source,
//     src/net/op_source.hpp): whoever finishes an operation publishes its result; the operation
//     thread then takes it, resets the operation's cancellation registration (which waits for a
//     callback that is running) and only then starts the next operation, which clears the object's
//     cancel-requested flag when it registers (op_source::begin). One operation's token (the
//     configuration says which) is canceled once, at any time; its callback, registered when the
//     operation enters the handshake (socket_context::wait) and run at once if the token is
//     canceled already, is two steps: set cancel-requested on the object, then under the lock take
//     the operation if it waits.
//
// Checked in every terminal state (nobody can move): no operation waits while the kernel holds
// data (a lost wake-up) or after close() (a hang); every unit that arrived was consumed or is
// still in the kernel (a canceled receive consumed nothing); a canceled operation does not wait;
// and, in every state, no operation ends canceled unless its own token was canceled. Known-bad
// variants must each yield a counterexample: the number read after the syscall; registration that
// ignores the number; registration that ignores `closed`; the next operation started before the
// registration reset has waited for a running callback (the stale callback cancels the next one).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../model_check.hpp"

namespace net_model_readiness_test_cpp {

namespace {

enum class variant : std::uint8_t {
  real,
  observe_after_syscall,
  register_ignores_sequence,
  register_ignores_closed,
  reuse_before_the_callback_is_done,
};

constexpr int kHandlers = 2;

enum op_pc : std::uint8_t {
  op_observe,
  op_syscall,
  op_observe_late,
  op_register_callback,  // first EAGAIN of this operation: begin() and the token's registration
  op_register,
  op_waiting,
  op_finished,  // its result is published; the operation thread has not taken it yet
  op_reset,     // result taken: reset the registration, then the next operation may start
  op_done
};
enum callback_pc : std::uint8_t { cb_none, cb_flag, cb_take };
enum handler_pc : std::uint8_t { h_idle, h_take, h_observe, h_syscall, h_register };

struct state {
  std::uint8_t data = 0, arrivals_left = 0, edges = 0, seq = 0;
  bool waiting = false, closed = false, cancel_requested = false;
  bool close_left = false, cancel_left = false;
  std::uint8_t consumed = 0;
  // the operation thread
  std::uint8_t op = op_observe, op_obs = 0, ops_left = 0;
  std::uint8_t gen = 0;            // which operation (0, 1, ...) the object serves
  bool registered = false;         // its token's callback is registered
  bool token_canceled = false;     // the token of operation `cancel_gen` was canceled
  std::uint8_t cb = cb_none;       // that callback, running
  bool wrong_cancel = false;       // an operation ended canceled without its token canceled
  // handlers
  std::array<std::uint8_t, kHandlers> h{}, h_obs{};
  std::array<bool, kHandlers> h_has_op{};

  std::uint64_t key() const {
    std::uint64_t k = 0;
    auto put = [&](std::uint64_t v, int bits) { k = (k << bits) | v; };
    put(data, 3), put(arrivals_left, 3), put(edges, 3), put(seq, 4), put(waiting, 1), put(closed, 1);
    put(cancel_requested, 1), put(close_left, 1), put(cancel_left, 1), put(consumed, 3), put(op, 4);
    put(op_obs, 4), put(ops_left, 3);
    put(gen, 2), put(registered, 1), put(token_canceled, 1), put(cb, 2), put(wrong_cancel, 1);
    for (int i = 0; i < kHandlers; ++i) put(h[i], 3), put(h_obs[i], 4), put(h_has_op[i], 1);
    return k;
  }
};

struct checker : model_check::recursion<std::uint64_t> {
  checker(variant which, std::uint8_t canceled_op) : v(which), cancel_gen(canceled_op) {}
  variant v;
  std::uint8_t cancel_gen;  // the operation whose token is canceled (when the configuration cancels)

  // The registration rule (op_queue::try_register), for the operation or a handler. Returns true
  // if the operation now waits; otherwise sets how it ended or that it must try again.
  enum class reg { waiting, retry, ended };
  reg try_register(state& s, std::uint8_t observed) const {
    if (s.closed && v != variant::register_ignores_closed) return reg::ended;          // aborted
    if (s.cancel_requested) return reg::ended;                                         // canceled
    if (s.seq != observed && v != variant::register_ignores_sequence) return reg::retry;
    s.waiting = true;
    return reg::waiting;
  }

  // The operation is over (`canceled`: it ended through its cancellation): the finisher
  // publishes the result, which the operation thread takes next.
  void operation_ended(state& s, bool canceled = false) const {
    if (canceled && !(s.token_canceled && s.gen == cancel_gen)) s.wrong_cancel = true;
    s.op = op_finished;
  }
  // The registration is gone; the claim goes back and the next operation starts.
  void next_operation(state& s) const {
    s.registered = false;
    s.ops_left = static_cast<std::uint8_t>(s.ops_left - 1);
    ++s.gen;
    s.op = s.ops_left == 0 ? op_done : op_observe;
  }

  // All successors of s.
  void successors(const state& s, std::vector<state>& out) const {
    out.clear();
    // The kernel: a unit arrives; an edge only on empty -> non-empty.
    if (s.arrivals_left > 0) {
      state n = s;
      --n.arrivals_left;
      if (n.data == 0 && !n.closed) ++n.edges;  // close() detached the socket from epoll
      ++n.data;
      out.push_back(n);
    }
    // The operation thread.
    // reset() of the registration waits for a callback that is running.
    const bool reset_waits = s.op == op_reset && s.cb != cb_none && v != variant::reuse_before_the_callback_is_done;
    if (s.op != op_done && s.op != op_waiting && !reset_waits) {
      state n = s;
      switch (s.op) {
        case op_observe:
          n.op_obs = s.seq;
          n.op = op_syscall;
          break;
        case op_syscall:
          if (s.closed) {
            operation_ended(n);  // fd_acquire fails: aborted
          } else if (s.data > 0) {
            --n.data, ++n.consumed;
            operation_ended(n);
          } else {
            n.op = v == variant::observe_after_syscall ? op_observe_late
                   : s.registered                      ? op_register
                                                       : op_register_callback;
          }
          break;
        case op_observe_late:
          n.op_obs = s.seq;
          n.op = s.registered ? op_register : op_register_callback;
          break;
        case op_register_callback:
          n.cancel_requested = false;  // begin(): the object's flag belongs to this operation now
          n.registered = true;
          // A token canceled already runs the callback inside the registration: the flag, and a
          // take that finds nothing waiting.
          if (s.token_canceled && s.gen == cancel_gen) n.cancel_requested = true;
          n.op = op_register;
          break;
        case op_register:
          switch (try_register(n, s.op_obs)) {
            case reg::waiting: n.op = op_waiting; break;
            case reg::retry: n.op = v == variant::observe_after_syscall ? op_syscall : op_observe; break;
            case reg::ended: operation_ended(n, !s.closed && s.cancel_requested); break;
          }
          break;
        case op_finished:
          n.op = op_reset;
          break;
        case op_reset: next_operation(n); break;
        default: break;
      }
      out.push_back(n);
    }
    // Handlers.
    for (int i = 0; i < kHandlers; ++i) {
      state n = s;
      switch (s.h[i]) {
        case h_idle:
          if (s.edges == 0) continue;
          --n.edges;
          n.h[i] = h_take;
          break;
        case h_take:  // on_ready(): lock; ++seq; take the waiting operation
          ++n.seq;
          n.h_has_op[i] = s.waiting;
          n.waiting = false;
          n.h[i] = s.waiting ? h_observe : h_idle;
          break;
        case h_observe:
          n.h_obs[i] = s.seq;
          n.h[i] = h_syscall;
          break;
        case h_syscall:
          if (s.closed) {
            n.h_has_op[i] = false;
            n.h[i] = h_idle;
            operation_ended(n);  // fd_acquire fails: aborted
          } else if (s.data > 0) {
            --n.data, ++n.consumed;
            n.h_has_op[i] = false;
            n.h[i] = h_idle;
            operation_ended(n);  // resumed with the data
          } else {
            n.h[i] = h_register;
          }
          break;
        case h_register:
          switch (try_register(n, s.h_obs[i])) {
            case reg::waiting: n.h_has_op[i] = false, n.h[i] = h_idle; break;  // op stays waiting
            case reg::retry: n.h[i] = h_observe; break;
            case reg::ended:
              n.h_has_op[i] = false, n.h[i] = h_idle;
              operation_ended(n, !s.closed && s.cancel_requested);
              break;
          }
          break;
        default: continue;
      }
      out.push_back(n);
    }
    // close(): lock; closed; take the waiting operation (it completes "aborted").
    if (s.close_left) {
      state n = s;
      n.close_left = false;
      n.closed = true;
      if (n.waiting) n.waiting = false, operation_ended(n);
      out.push_back(n);
    }
    // The canceler cancels operation cancel_gen's token: its callback runs now if registered, at
    // registration if that is still to come, and not at all once the registration is reset.
    if (s.cancel_left && s.gen <= cancel_gen && s.op != op_done) {
      state n = s;
      n.cancel_left = false;
      n.token_canceled = true;
      if (s.gen == cancel_gen && s.registered) n.cb = cb_flag;
      out.push_back(n);
    }
    // The callback, on the canceler's thread: the object's flag, then, under the lock, the
    // operation if it waits (whichever operation the object serves by then).
    if (s.cb == cb_flag) {
      state n = s;
      n.cancel_requested = true;
      n.cb = cb_take;
      out.push_back(n);
    } else if (s.cb == cb_take) {
      state n = s;
      n.cb = cb_none;
      if (n.waiting) n.waiting = false, operation_ended(n, true);
      out.push_back(n);
    }
  }

  std::string check_terminal(const state& s, int arrivals) const {
    if (s.wrong_cancel) return "an operation was canceled by an earlier operation's token (stale callback)";
    if (s.op == op_waiting && s.token_canceled && s.gen == cancel_gen) return "a canceled operation still waits (hang)";
    if (s.op == op_waiting && s.closed) return "an operation waits after close() (hang)";
    if (s.op == op_waiting && s.data > 0) return "an operation waits while the kernel holds data (lost wake-up)";
    if (s.consumed + s.data != arrivals) return "data lost or invented";
    if (s.op != op_done && s.op != op_waiting) return "the operation thread stopped mid-operation";
    return {};
  }

  bool run(int ops, int arrivals, bool with_close, bool with_cancel) {
    if (with_cancel && cancel_gen >= ops) return true;  // that operation never runs
    state init;
    init.ops_left = static_cast<std::uint8_t>(ops);
    init.arrivals_left = static_cast<std::uint8_t>(arrivals);
    init.close_left = with_close;
    init.cancel_left = with_cancel;
    return explore_from(
        init, [&](const state& s, std::vector<state>& next) { successors(s, next); },
        [&](const state& s) { return check_terminal(s, arrivals); });
  }
};

struct configuration {
  int ops, arrivals;
  bool with_close, with_cancel;
};

constexpr configuration kConfigurations[] = {
    {1, 1, false, false}, {2, 2, false, false}, {2, 3, false, false}, {3, 3, false, false},
    {2, 2, true, false},  {2, 2, false, true},  {2, 3, true, true},   {3, 3, true, true},
    // Fewer units than operations: an operation whose cancellation were lost would wait for ever.
    {2, 1, false, true},  {3, 2, false, true},
};

TEST(net_model_readiness, real_protocol_loses_no_wakeup_in_any_interleaving) {
  std::size_t total = 0;
  for (const configuration& c : kConfigurations) {
    for (std::uint8_t canceled_op = 0; canceled_op < (c.with_cancel ? 2 : 1); ++canceled_op) {
      checker k(variant::real, canceled_op);
      EXPECT_TRUE(k.run(c.ops, c.arrivals, c.with_close, c.with_cancel))
          << "ops=" << c.ops << " arrivals=" << c.arrivals << " close=" << c.with_close
          << " cancel=" << c.with_cancel << " (operation " << int(canceled_op) << "): " << k.failure;
      total += k.states;
    }
  }
  EXPECT_GT(total, 10'000u);  // the checker explored something worth the name
  std::printf("net_model_readiness: %zu states\n", total);
}

/// Runs every configuration; true if one of them yields a counterexample.
bool finds_counterexample(variant v, std::string& why) {
  for (const configuration& c : kConfigurations) {
    for (std::uint8_t canceled_op = 0; canceled_op < (c.with_cancel ? 2 : 1); ++canceled_op) {
      checker k(v, canceled_op);
      if (!k.run(c.ops, c.arrivals, c.with_close, c.with_cancel)) {
        why = k.failure;
        return true;
      }
    }
  }
  return false;
}

TEST(net_model_readiness, reading_the_sequence_after_the_syscall_loses_a_wakeup) {
  std::string why;
  ASSERT_TRUE(finds_counterexample(variant::observe_after_syscall, why));
  EXPECT_NE(why.find("lost wake-up"), std::string::npos) << why;
}

TEST(net_model_readiness, registering_without_comparing_the_sequence_loses_a_wakeup) {
  std::string why;
  ASSERT_TRUE(finds_counterexample(variant::register_ignores_sequence, why));
  EXPECT_NE(why.find("lost wake-up"), std::string::npos) << why;
}

TEST(net_model_readiness, reusing_the_operation_before_its_callback_is_done_cancels_the_next_one) {
  std::string why;
  ASSERT_TRUE(finds_counterexample(variant::reuse_before_the_callback_is_done, why));
  EXPECT_NE(why.find("stale callback"), std::string::npos) << why;
}

TEST(net_model_readiness, registering_without_looking_at_closed_hangs_after_close) {
  std::string why;
  ASSERT_TRUE(finds_counterexample(variant::register_ignores_closed, why));
  EXPECT_NE(why.find("after close"), std::string::npos) << why;
}

}  // namespace

}  // namespace net_model_readiness_test_cpp
