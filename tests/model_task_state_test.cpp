// Exhaustive model check of a task's head word (include/tpl/detail/task_state.hpp: add_waiter,
// remove_waiter, publish_completion, fire_waiters).
//
// The head word is kEmpty, kCompleted, or a pointer to an intrusive LIFO list of waiters, with
// kLocked set while a remover unlinks a node. The model has one completer and up to three waiters;
// each waiter adds its node and, depending on the configuration, later removes it (a timed wait
// giving up, when_any dropping a loser), and may then add the same node again (the memory of a
// removed waiter reused for a new registration: the ABA case the lock in remove_waiter is for).
// Each step is one atomic operation on the head word; a remover's walk and unlink under kLocked is
// one step, because while the word is locked every other thread only re-reads it (adders and the
// completer spin) or writes its own node that no list holds yet. A spurious compare_exchange_weak
// failure leaves the state as it was, so it adds no state.
//
// Checked: a waiter is never fired twice, never fired after remove_waiter() returned true for that
// registration; in every final state each registration was either fired exactly once or removed
// (never both, never neither), a registration whose removal returned false has been fired, and
// nobody is left spinning on a locked word. A deliberately broken remove_waiter (an unlocked CAS
// from the head node to its next, the ABA the code comment warns about) must yield a counterexample.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model_check.hpp"

#include "test_support.hpp"

namespace model_task_state_test_cpp {

namespace {

constexpr int kMaxWaiters = 3;
constexpr std::uint8_t kEmpty = 0;
constexpr std::uint8_t kCompleted = 1;
constexpr std::uint8_t kLocked = 0x80;
constexpr std::uint8_t node(int i) { return static_cast<std::uint8_t>(2 + i); }
constexpr int node_index(std::uint8_t v) { return (v & 0x7F) - 2; }
constexpr bool is_node(std::uint8_t v) { return (v & 0x7F) >= 2; }

enum class plan : std::uint8_t {
  add,                    // add, then wait to be fired
  add_remove,             // add, then remove (timeout / when_any clean-up)
  add_remove_add_remove,  // the node is reused: add, remove, add again, remove again
  add_remove_add,         // add, remove, add again and wait
};

struct config {
  const char* name;
  int waiters;
  plan plans[kMaxWaiters];
  bool broken_unlocked_head_removal = false;
};

// Waiter program counters.
enum : std::uint8_t {
  A_LOAD,     // add_waiter: cur = head.load()
  A_CAS,      // add_waiter: (spin while locked) w->next = cur; CAS(cur -> w)
  R_LOAD,     // remove_waiter: cur = head.load()
  R_LOCK,     // remove_waiter: (spin while locked) CAS(cur -> cur | kLocked)
  R_UNLINK,   // remove_waiter: walk, unlink, head.store(unlocked)
  R_NEXT,     // broken variant: read w->next of the head node
  R_HEADCAS,  // broken variant: CAS(w -> next) without the lock
  W_NEXT,     // decide what to do after add / remove returned
  W_DONE,
};

// Completer program counters.
enum : std::uint8_t { C_LOAD, C_CAS, C_FIRE, C_DONE };

// Only uint8_t fields: the bytes are the key.
struct waiter_state {
  std::uint8_t pc;
  std::uint8_t step;     // index in the plan's action list
  std::uint8_t cur;      // the local copy of the head word
  std::uint8_t next;     // broken variant: the next read from the node
  std::uint8_t in_reg;   // a registration is live (added, not yet removed successfully)
  std::uint8_t fired;    // fires of the current registration
  std::uint8_t removed;  // the current registration's removal returned true
  std::uint8_t lost;     // the current registration's removal returned false: must be fired
  std::uint8_t regs;     // registrations made
  std::uint8_t closed;   // registrations settled (fired once or removed)
};

struct state {
  std::uint8_t head;
  std::uint8_t next[kMaxWaiters];
  std::uint8_t c_pc;
  std::uint8_t c_cur;
  std::uint8_t fifo[kMaxWaiters];  // the completer's list, in firing order
  std::uint8_t fifo_len;
  std::uint8_t fifo_pos;
  waiter_state w[kMaxWaiters];
};

class checker {
 public:
  explicit checker(const config& c) : c_(c) {}

  std::string run() {
    state s0{};
    s0.head = kEmpty;
    s0.c_pc = C_LOAD;
    for (int i = 0; i < kMaxWaiters; ++i) {
      s0.w[i].pc = i < c_.waiters ? A_LOAD : W_DONE;
      s0.w[i].step = 1;  // the plan's first action (an add) is under way
    }
    return model_check::search(s0, *this, stats_);
  }

  std::size_t states() const { return stats_.states; }
  std::size_t terminal_states() const { return stats_.terminal_states; }

 private:
  template <class S, class M>
  friend std::string model_check::search(const S&, const M&, model_check::stats&);

  // The actions of a plan, in order: 'a' add, 'r' remove.
  const char* actions(int i) const {
    switch (c_.plans[i]) {
      case plan::add: return "a";
      case plan::add_remove: return "ar";
      case plan::add_remove_add_remove: return "arar";
      case plan::add_remove_add: return "ara";
    }
    return "";
  }

  // The waiter goes on with its plan.
  void advance(waiter_state& w, int i) const {
    const char* a = actions(i);
    const char next = a[w.step];
    if (next == 0) {
      w.pc = W_DONE;
      return;
    }
    ++w.step;
    w.pc = next == 'a' ? A_LOAD : R_LOAD;
  }

  std::string check_terminal(const state& s) const {
    if (s.c_pc != C_DONE) return "the completer never finished (spinning on a locked word?)";
    if (s.head != kCompleted) return "head is not kCompleted at the end";
    for (int i = 0; i < c_.waiters; ++i) {
      const waiter_state& w = s.w[i];
      if (w.pc != W_DONE) return "waiter " + std::to_string(i) + " never finished";
      if (w.in_reg && w.fired != 1) return "waiter " + std::to_string(i) + " registered, never removed, never fired";
      if (w.lost && w.fired != 1) return "waiter " + std::to_string(i) + ": removal lost to completion but never fired";
      if (w.closed != w.regs) return "waiter " + std::to_string(i) + ": a registration was neither fired nor removed";
    }
    return {};
  }

  void successors(const state& s, std::vector<state>& out, std::vector<std::string>& why, std::string& error) const {
    auto emit = [&](const state& n, std::string what) {
      out.push_back(n);
      why.push_back(std::move(what));
    };
    // The completer.
    {
      state n = s;
      switch (s.c_pc) {
        case C_LOAD:
          n.c_cur = s.head;
          n.c_pc = C_CAS;
          emit(n, "completer: load head");
          break;
        case C_CAS:
          if (s.c_cur & kLocked) {  // spin: re-read once the word is unlocked
            if (!(s.head & kLocked)) {
              n.c_cur = s.head;
              emit(n, "completer: re-read unlocked head");
            }
            break;
          }
          if (s.head == s.c_cur) {
            n.head = kCompleted;
            // Take the LIFO list and reverse it (the nodes are the completer's now).
            std::uint8_t lifo[kMaxWaiters];
            int len = 0;
            for (std::uint8_t p = s.c_cur; is_node(p); p = s.next[node_index(p)]) {
              if (len == kMaxWaiters) {
                error = "cycle in the waiter list";
                return;
              }
              lifo[len++] = p;
            }
            n.fifo_len = static_cast<std::uint8_t>(len);
            for (int k = 0; k < len; ++k) n.fifo[k] = lifo[len - 1 - k];
            n.fifo_pos = 0;
            n.c_pc = C_FIRE;
            emit(n, "completer: CAS head -> kCompleted, takes " + std::to_string(len) + " waiter(s)");
          } else {
            n.c_cur = s.head;  // CAS failure reloads
            emit(n, "completer: CAS fails");
          }
          break;
        case C_FIRE: {
          if (s.fifo_pos == s.fifo_len) {
            n.c_pc = C_DONE;
            emit(n, "completer: done");
            break;
          }
          const int i = node_index(s.fifo[s.fifo_pos]);
          waiter_state& w = n.w[i];
          if (w.removed) {
            error = "waiter " + std::to_string(i) + " fired after its removal returned true";
            return;
          }
          if (!w.in_reg) {
            error = "waiter " + std::to_string(i) + " fired with no registration";
            return;
          }
          if (++w.fired > 1) {
            error = "waiter " + std::to_string(i) + " fired twice";
            return;
          }
          w.in_reg = 0;
          ++w.closed;
          ++n.fifo_pos;
          emit(n, "completer: fires waiter " + std::to_string(i));
          break;
        }
        default:
          break;
      }
    }
    // The waiters.
    for (int i = 0; i < c_.waiters; ++i) {
      const waiter_state& w = s.w[i];
      state n = s;
      waiter_state& u = n.w[i];
      const std::string who = "waiter " + std::to_string(i) + ": ";
      switch (w.pc) {
        case A_LOAD:
          u.cur = s.head;
          u.pc = A_CAS;
          emit(n, who + "add: load head");
          break;
        case A_CAS:
          if (w.cur == kCompleted) {
            advance(u, i);  // add_waiter returned false: continue synchronously
            u.pc = W_DONE;  // a waiter that saw completion has nothing left to do
            emit(n, who + "add: sees kCompleted, returns false");
            break;
          }
          if (w.cur & kLocked) {
            if (!(s.head & kLocked)) {
              u.cur = s.head;
              emit(n, who + "add: re-read unlocked head");
            }
            break;
          }
          if (s.head == w.cur) {
            n.next[i] = w.cur;  // w->next = cur, then the CAS publishes the node
            n.head = node(i);
            u.in_reg = 1;
            u.fired = 0;
            u.removed = 0;
            u.lost = 0;
            ++u.regs;
            advance(u, i);
            emit(n, who + "add: CAS head -> node " + std::to_string(i));
          } else {
            u.cur = s.head;
            emit(n, who + "add: CAS fails");
          }
          break;
        case R_LOAD:
          u.cur = s.head;
          u.pc = R_LOCK;
          emit(n, who + "remove: load head");
          break;
        case R_LOCK:
          if (w.cur == kCompleted || w.cur == kEmpty) {
            // remove_waiter returned false: completion took the node; wait until fired.
            u.lost = 1;
            advance(u, i);
            if (u.pc != W_DONE) u.pc = W_NEXT;  // (must be fired before the node is reused)
            emit(n, who + "remove: sees completed/empty, returns false");
            break;
          }
          if (w.cur & kLocked) {
            if (!(s.head & kLocked)) {
              u.cur = s.head;
              emit(n, who + "remove: re-read unlocked head");
            }
            break;
          }
          if (c_.broken_unlocked_head_removal && w.cur == node(i)) {
            if (s.head == w.cur) {
              u.pc = R_NEXT;
              emit(n, who + "remove (broken): head is my node");
            } else {
              u.cur = s.head;
              emit(n, who + "remove (broken): head changed");
            }
            break;
          }
          if (s.head == w.cur) {
            n.head = static_cast<std::uint8_t>(w.cur | kLocked);
            u.pc = R_UNLINK;
            emit(n, who + "remove: lock the word");
          } else {
            u.cur = s.head;
            emit(n, who + "remove: lock CAS fails");
          }
          break;
        case R_UNLINK: {
          std::uint8_t cur = w.cur;
          bool found = false;
          if (cur == node(i)) {
            cur = s.next[i];
            found = true;
          } else {
            int guard = 0;
            for (std::uint8_t p = w.cur; is_node(p) && is_node(s.next[node_index(p)]); p = s.next[node_index(p)]) {
              if (++guard > kMaxWaiters) {
                error = "cycle in the waiter list";
                return;
              }
              if (s.next[node_index(p)] == node(i)) {
                n.next[node_index(p)] = s.next[i];
                found = true;
                break;
              }
            }
          }
          n.head = cur;
          if (!settle_removal(u, i, found)) {
            error = "waiter " + std::to_string(i) + " unlinked a node that was not registered";
            return;
          }
          emit(n, who + "remove: unlink and unlock (" + (found ? "found" : "not found") + ")");
          break;
        }
        case R_NEXT:
          u.next = s.next[i];
          u.pc = R_HEADCAS;
          emit(n, who + "remove (broken): read next");
          break;
        case R_HEADCAS:
          if (s.head == node(i)) {
            n.head = w.next;
            if (!settle_removal(u, i, true)) {
              error = "waiter " + std::to_string(i) + " unlinked a node that was not registered";
              return;
            }
            emit(n, who + "remove (broken): CAS head -> next without the lock");
          } else {
            u.pc = R_LOAD;
            emit(n, who + "remove (broken): CAS fails, retry");
          }
          break;
        case W_NEXT:
          // A registration whose removal lost must be fired before the node may be reused.
          if (w.lost && w.fired == 0) break;
          u.lost = 0;
          u.pc = actions(i)[w.step - 1] == 'a' ? A_LOAD : R_LOAD;
          emit(n, who + "reuses its node");
          break;
        default:
          break;
      }
    }
  }

  // Returns false if the removal found a node that is not registered (a corrupt list).
  bool settle_removal(waiter_state& u, int i, bool found) const {
    if (found) {
      if (!u.in_reg) return false;
      u.in_reg = 0;
      u.removed = 1;
      ++u.closed;
    } else {
      u.lost = 1;
    }
    advance(u, i);
    if (u.pc != W_DONE && u.lost) u.pc = W_NEXT;
    return true;
  }

  std::string summary(const state& s) const {
    auto v = [](std::uint8_t x) -> std::string {
      std::string r = (x & 0x7F) == kEmpty       ? "empty"
                      : (x & 0x7F) == kCompleted ? "completed"
                                                 : "node" + std::to_string(node_index(x));
      if (x & kLocked) r += "|locked";
      return r;
    };
    std::string r = "head=" + v(s.head);
    for (int i = 0; i < c_.waiters; ++i) r += " next" + std::to_string(i) + "=" + v(s.next[i]);
    return r;
  }

  config c_;
  model_check::stats stats_;
};

std::string check(const config& c, std::size_t& states) {
  checker k(c);
  std::string r = k.run();
  states = k.states();
  std::printf("[model] %-46s states %8zu  terminal %6zu%s\n", c.name, k.states(), k.terminal_states(),
              r.empty() ? "" : "  COUNTEREXAMPLE");
  return r;
}

}  // namespace

TEST(model_task_state, every_waiter_is_fired_once_or_removed) {
  const std::vector<config> configs = {
      {"2 waiters add", 2, {plan::add, plan::add, plan::add}},
      {"2 waiters: add | add+remove", 2, {plan::add, plan::add_remove, plan::add}},
      {"2 waiters add+remove", 2, {plan::add_remove, plan::add_remove, plan::add}},
      {"2 waiters: reuse node | add+remove", 2, {plan::add_remove_add_remove, plan::add_remove, plan::add}},
      {"2 waiters: reuse node x2", 2, {plan::add_remove_add_remove, plan::add_remove_add, plan::add}},
      {"3 waiters: add | add+remove | add+remove", 3, {plan::add, plan::add_remove, plan::add_remove}},
      {"3 waiters add+remove", 3, {plan::add_remove, plan::add_remove, plan::add_remove}},
      {"3 waiters: reuse | add+remove | add+remove", 3,
       {plan::add_remove_add_remove, plan::add_remove, plan::add_remove}},
  };
  std::size_t total = 0;
  for (const config& c : configs) {
    std::size_t n = 0;
    const std::string r = check(c, n);
    total += n;
    EXPECT_TRUE(r.empty()) << c.name << "\n" << r;
  }
  std::printf("[model] task state word: %zu states explored in all\n", total);
}

TEST(model_task_state, finds_the_aba_of_an_unlocked_head_removal) {
  config c{"broken: unlocked CAS removes the head", 2, {plan::add_remove, plan::add_remove, plan::add}, true};
  std::size_t n = 0;
  const std::string r = check(c, n);
  ASSERT_FALSE(r.empty()) << "the checker missed the ABA that remove_waiter's lock prevents";
  std::printf("%s", r.c_str());
}

}  // namespace model_task_state_test_cpp
