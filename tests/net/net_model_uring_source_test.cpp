// Exhaustive model check of the io_uring readiness source's hand-offs for one socket
// (src/net/uring_source.cpp): attach() and detach() queue requests for the engine thread and wake
// it through the eventfd; the engine thread submits the poll and its removal; the kernel runs
// them in submission order and posts completions (events, and a last completion when the poll
// ends, on removal or on its own); the engine re-arms a poll that ended while the socket is
// attached, and otherwise retires the socket: it sets `removed` (detach() waits for it, then the
// caller closes the descriptor) and releases its reference after the batch.
//
// Each step is one atomic action of the real code (a locked section is one step). The kernel may
// post up to three readiness events and end the poll on its own up to three times, at any time
// while one is armed (each budget from 0 to 3 is a run of its own). A wake-up of the poll does
// not post its completion at once: it queues task work that owns the poll until it runs (on the
// engine thread, at any time in this model; inside the engine's waits with DEFER_TASKRUN), and
// the removal meets that window: the engine cancels the poll by its user_data
// (IORING_OP_ASYNC_CANCEL), which marks an owned poll so that its task work ends it. The
// eventfd's completions are modelled apart from the socket's, in any order relative to them (the
// kernel gives no order between the two polls' wake-ups).
//
// Checked: no completion naming the socket is handled after its release (use after free); the
// caller never closes the descriptor while a poll is armed or about to be (the file would stay
// open); at the end the socket is released once, detach() has returned, and nothing is left in
// the queues. Known-bad variants must each yield a counterexample: retiring when the removal is
// submitted instead of on the poll's last completion; re-arming without looking at `detached`;
// a detach() that does not wait; a detach() that does not wake the engine; a removal by
// IORING_OP_POLL_REMOVE, which fails with -EALREADY on an owned poll and leaves it armed (the
// hang tpl_net_tests' thousand-connection echo showed with DEFER_TASKRUN).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../model_check.hpp"

namespace net_model_uring_source_test_cpp {

namespace {

enum class variant : std::uint8_t {
  real,
  retire_on_submit,
  rearm_ignoring_detach,
  no_wait,
  detach_without_wake,
  remove_by_poll_remove,
};

enum sock_pc : std::uint8_t { s_attach, s_attach_wake, s_detach, s_detach_wake, s_wait, s_done };
enum sqe : std::uint8_t { q_arm = 1, q_remove = 2 };
enum cqe : std::uint8_t { c_event = 1, c_last = 2 };
enum bits : std::uint8_t { b_arm = 1, b_remove = 2 };

struct state {
  std::uint8_t sock = s_attach;  // the socket's thread: attach, then close
  std::uint8_t requests = 0;     // uring_record::requests
  std::uint8_t queued = 0;       // uring_record::queued
  std::uint8_t listed = 0;       // on the request list
  std::uint8_t wakes = 0;        // eventfd completions not yet handled
  std::uint8_t taken = 0;        // the engine took the list and has yet to handle the socket
  std::uint8_t detached = 0;     // the engine's view
  std::uint8_t removed = 0;      // uring_record::removed
  std::uint8_t release_due = 0;  // on the release list
  std::uint8_t released = 0;
  std::uint8_t armed = 0;        // the kernel holds a poll for the socket
  std::uint8_t owned = 0;        // a wake-up's task work is pending and owns the poll
  std::uint8_t cancel_marked = 0;  // a cancellation found it owned: the task work ends it
  std::uint8_t spontaneous_event = 2;  // budgets
  std::uint8_t spontaneous_end = 2;
  std::uint8_t sq_len = 0;
  std::array<std::uint8_t, 4> sq{};
  std::uint8_t cq_len = 0;
  std::array<std::uint8_t, 6> cq{};
};

void push_sq(state& n, std::uint8_t op, std::string& error) {
  if (n.sq_len == n.sq.size()) {
    error = "model bound: submission queue";
    return;
  }
  n.sq[n.sq_len++] = op;
}
void push_cq(state& n, std::uint8_t c, std::string& error) {
  if (n.cq_len == n.cq.size()) {
    error = "model bound: completion queue";
    return;
  }
  n.cq[n.cq_len++] = c;
}
template <std::size_t N>
std::uint8_t pop_front(std::array<std::uint8_t, N>& a, std::uint8_t& len) {
  const std::uint8_t v = a[0];
  for (std::size_t i = 1; i < len; ++i) a[i - 1] = a[i];
  a[--len] = 0;
  return v;
}

struct model {
  variant v;

  // request(): one locked section; returns whether the caller owes the eventfd a write.
  static bool request(state& n, std::uint8_t bit) {
    n.requests |= bit;
    if (n.queued) return false;
    n.queued = 1;
    n.listed = 1;
    return true;  // the list was empty (one socket)
  }

  void retire(state& n) const {
    n.removed = 1;
    n.release_due = 1;
  }

  void successors(const state& s, std::vector<state>& out, std::vector<std::string>& why, std::string& error) const {
    auto add = [&](const state& n, const char* what) {
      out.push_back(n);
      why.emplace_back(what);
    };
    // The socket's thread.
    switch (s.sock) {
      case s_attach: {
        state n = s;
        n.sock = request(n, b_arm) ? s_attach_wake : s_detach;
        add(n, "attach: queue the arm request");
        break;
      }
      case s_attach_wake: {
        state n = s;
        ++n.wakes;
        n.sock = s_detach;
        add(n, "attach: write the eventfd");
        break;
      }
      case s_detach: {
        state n = s;
        const bool owe = request(n, b_remove);
        n.sock = owe && v != variant::detach_without_wake ? s_detach_wake : s_wait;
        add(n, "detach: queue the remove request");
        break;
      }
      case s_detach_wake: {
        state n = s;
        ++n.wakes;
        n.sock = s_wait;
        add(n, "detach: write the eventfd");
        break;
      }
      case s_wait:
        if (s.removed || v == variant::no_wait) {
          state n = s;
          bool arm_pending = false;
          for (std::uint8_t i = 0; i < s.sq_len; ++i) arm_pending |= s.sq[i] == q_arm;
          if (s.armed || arm_pending) {
            error = "the descriptor is closed while a poll holds (or is about to hold) the socket's file";
            return;
          }
          n.sock = s_done;
          add(n, "detach returns; close(fd)");
        }
        break;
      default:
        break;
    }
    // The engine thread. take_requests() runs to its end before the next completion is handled.
    if (s.taken) {
      state n = s;
      const std::uint8_t b = n.requests;
      n.requests = 0;
      n.queued = 0;
      n.taken = 0;
      if (b & b_remove) {
        n.detached = 1;
        if (b & b_arm) {
          retire(n);
        } else {
          push_sq(n, q_remove, error);
          if (v == variant::retire_on_submit) retire(n);
        }
      } else if (b & b_arm) {
        push_sq(n, q_arm, error);
      }
      if (!error.empty()) return;
      add(n, "engine: handle the socket's requests");
    } else {
      if (s.wakes > 0) {
        state n = s;
        --n.wakes;
        if (n.listed) {
          n.listed = 0;
          n.taken = 1;
        }
        add(n, "engine: eventfd completion, take the request list");
      }
      if (s.cq_len > 0) {
        state n = s;
        const std::uint8_t c = pop_front(n.cq, n.cq_len);
        if (s.released) {
          error = "a completion names the socket after its release";
          return;
        }
        if (c == c_last) {
          if (n.detached && v != variant::rearm_ignoring_detach) {
            if (v != variant::retire_on_submit) retire(n);
          } else {
            push_sq(n, q_arm, error);
            if (!error.empty()) return;
          }
        }
        add(n, c == c_last ? "engine: the poll's last completion" : "engine: a readiness event");
      }
      if (s.release_due) {
        state n = s;
        n.release_due = 0;
        if (n.released) {
          error = "released twice";
          return;
        }
        n.released = 1;
        add(n, "engine: end of batch, release");
      }
    }
    // The kernel.
    if (s.sq_len > 0) {
      state n = s;
      const std::uint8_t op = pop_front(n.sq, n.sq_len);
      if (op == q_arm) {
        if (n.armed) {
          error = "two polls armed for one socket";
          return;
        }
        n.armed = 1;
      } else if (n.armed && n.owned) {
        // The wake-up's task work owns the poll. A cancellation marks it; POLL_REMOVE fails
        // with -EALREADY and changes nothing.
        if (v != variant::remove_by_poll_remove) n.cancel_marked = 1;
      } else if (n.armed) {
        n.armed = 0;
        push_cq(n, c_last, error);
        if (!error.empty()) return;
      }  // else: -ENOENT, the poll had already ended
      add(n, op == q_arm ? "kernel: arm the poll" : "kernel: cancel the poll");
    }
    if (s.armed && !s.owned && s.spontaneous_event) {
      state n = s;
      --n.spontaneous_event;
      n.owned = 1;
      add(n, "kernel: readiness wake-up, task work queued");
    }
    if (s.owned) {
      state n = s;
      n.owned = 0;
      if (n.cancel_marked) {
        n.cancel_marked = 0;
        n.armed = 0;
        push_cq(n, c_last, error);
      } else {
        push_cq(n, c_event, error);
      }
      if (!error.empty()) return;
      add(n, s.cancel_marked ? "kernel: task work ends the canceled poll" : "kernel: task work posts the event");
    }
    if (s.owned && s.spontaneous_end) {
      // The task work cannot post (completion queue overflow) and ends the poll on its own.
      state n = s;
      --n.spontaneous_end;
      n.owned = 0;
      n.cancel_marked = 0;
      n.armed = 0;
      push_cq(n, c_last, error);
      if (!error.empty()) return;
      add(n, "kernel: task work ends the poll on its own");
    }
    if (s.armed && !s.owned && s.spontaneous_end) {
      state n = s;
      --n.spontaneous_end;
      n.armed = 0;
      push_cq(n, c_last, error);
      if (!error.empty()) return;
      add(n, "kernel: the poll ends on its own (completion queue overflow)");
    }
  }

  std::string check_terminal(const state& s) const {
    if (s.sock != s_done) return "detach() waits for ever";
    if (!s.released) return "the socket is never released";
    if (s.armed || s.owned || s.sq_len || s.cq_len || s.listed || s.taken) return "work left in the queues";
    return "";
  }
};

std::string run(variant v, model_check::stats& st, std::uint8_t budget = 2) {
  state s0;
  s0.spontaneous_event = budget;
  s0.spontaneous_end = budget;
  return model_check::search(s0, model{v}, st);
}

TEST(net_model_uring_source, attach_detach_and_the_polls_last_completion_release_the_socket_once) {
  model_check::stats st;
  for (std::uint8_t budget : {0, 1, 2, 3}) {
    model_check::stats one;
    EXPECT_EQ(run(variant::real, one, budget), "");
    std::printf("net_model_uring_source: budget %d: %zu states, %zu terminal\n", budget, one.states, one.terminal_states);
    st.states += one.states;
  }
  EXPECT_GT(st.states, 300u);  // the checker explored something worth the name
}

TEST(net_model_uring_source, known_bad_variants_are_caught) {
  for (variant v : {variant::retire_on_submit, variant::rearm_ignoring_detach, variant::no_wait,
                    variant::detach_without_wake, variant::remove_by_poll_remove}) {
    model_check::stats st;
    const std::string bad = run(v, st);
    EXPECT_NE(bad, "") << "variant " << static_cast<int>(v);
    std::printf("variant %d: %s\n", static_cast<int>(v), bad.substr(0, bad.find('\n')).c_str());
    EXPECT_EQ(bad.find("model bound"), std::string::npos) << bad;
  }
}

}  // namespace

}  // namespace net_model_uring_source_test_cpp
