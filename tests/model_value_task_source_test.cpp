// Exhaustive model check of manual_reset_value_task_source_core's completion / await hand-off
// (include/tpl/value_task_source.hpp: set_result, get_status, on_completed, get_result, reset).
//
// The hand-off is one word: kNone, kCompleted, or the handle of the awaiter that registered. The
// model has three threads:
//   - the completer, which completes operations 0..ops-1 in turn, each once the owner has started
//     it (the owner's hand-off: a socket learns of the next receive only after it was posted):
//     write the result, exchange the word with kCompleted, resume the handle it took, if any;
//   - the awaiter, which for each operation k awaits a value_task with token k as value_task does
//     (get_status, then on_completed's validate and CAS, then, once resumed or found completed,
//     get_result), and then, as a pooled source does in get_result, resets the core (check, bump
//     the version, clear the word) and starts operation k+1;
//   - optionally a stale awaiter: a second value_task for operation 0, awaited at any moment (a
//     value_task awaited twice, or kept after its source moved on), except inside a reset: reset()
//     must not race anything (the header's semantics 5; its fields are plain), so the misuse this
//     models is sequential, as a single coroutine awaiting a value_task again would be.
// Each step is one atomic operation on the word or the version (or the writes of one thread that
// nobody else reads until a later atomic step publishes them). Memory order is not modelled: the
// comments in the header argue it; this checks the protocol.
//
// Checked, in every interleaving: no awaiter is resumed unless it is suspended, or resumed twice;
// nobody reads a result that was not written, or that belongs to another operation; an operation's
// result is taken once; in every final state no awaiter is left suspended (no lost wake-up), and,
// without a stale awaiter, the awaiter got every operation's result and the completer finished.
// With a stale awaiter, both awaiters may fail with invalid_operation, never with a wrong result.
// Three deliberately broken variants must yield counterexamples.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model_check.hpp"

namespace model_value_task_source_test_cpp {

namespace {

constexpr std::uint8_t kNone = 0;
constexpr std::uint8_t kCompleted = 1;
constexpr std::uint8_t kAwaiterHandle = 2;
constexpr std::uint8_t kStaleHandle = 3;

enum class variant : std::uint8_t {
  correct,
  register_check_then_store,  // on_completed: load the word, then store the handle (no CAS)
  complete_load_then_store,   // set_result: load the word, then store kCompleted (no exchange)
  publish_before_result,      // set_result: exchange first, write the result after
};

struct config {
  const char* name;
  int ops;
  bool stale_awaiter;
  variant v = variant::correct;
};

// Completer program counters.
enum : std::uint8_t { C_WAIT, C_WRITE, C_XCHG, C_STORE, C_RESUME, C_DONE };
// Awaiter program counters (the stale awaiter uses the first five).
enum : std::uint8_t {
  A_STATUS,     // get_status: validate the token, load the word
  A_VALIDATE,   // on_completed: validate the token
  A_CAS,        // on_completed: CAS kNone -> handle (broken variant: load)
  A_STORE,      // broken variant: store the handle
  A_SUSPENDED,  // waiting to be resumed by the completer
  A_RESULT,     // get_result: validate, load the word, check and take the result
  A_RESET,      // reset: check the word, clear the result
  A_VERSION,    // reset: version + 1
  A_CLEAR,      // reset: word = kNone
  A_START,      // the owner hands the next operation to the completer
  A_DONE,
  A_REJECTED,   // an invalid_operation ended the await
};

// Only uint8_t fields: the bytes are the key.
struct state {
  std::uint8_t word;
  std::uint8_t version;
  std::uint8_t started;  // operations handed to the completer
  std::uint8_t result;   // 0, or 1 + the operation whose result is stored
  std::uint8_t taken;    // the current result was taken
  std::uint8_t c_pc, c_op, c_prev;
  std::uint8_t a_pc, a_op, a_cur, a_got;
  std::uint8_t s_pc, s_cur, s_got;
};

class checker {
 public:
  explicit checker(const config& c) : c_(c) {}

  std::string run() {
    state s0{};
    s0.started = 1;
    s0.c_pc = C_WAIT;
    s0.a_pc = A_STATUS;
    s0.s_pc = c_.stale_awaiter ? A_STATUS : A_DONE;
    return model_check::search(s0, *this, stats_);
  }

  std::size_t states() const { return stats_.states; }
  std::size_t terminal_states() const { return stats_.terminal_states; }

 private:
  template <class S, class M>
  friend std::string model_check::search(const S&, const M&, model_check::stats&);

  std::string check_terminal(const state& s) const {
    if (s.a_pc == A_SUSPENDED) return "the awaiter is never resumed (lost wake-up)";
    if (s.s_pc == A_SUSPENDED) return "the stale awaiter is never resumed (lost wake-up)";
    if (!c_.stale_awaiter) {
      if (s.a_pc != A_DONE) return "the awaiter did not finish";
      if (s.a_got != c_.ops) return "the awaiter missed a result";
      if (s.c_pc != C_DONE) return "the completer did not finish";
    }
    if (s.c_pc != C_DONE && !(s.c_pc == C_WAIT && s.started <= s.c_op))
      return "the completer is stuck inside set_result";
    return {};
  }

  void completer(const state& s, std::vector<state>& out, std::vector<std::string>& why, std::string& error) const {
    state n = s;
    const std::string op = " (op " + std::to_string(s.c_op) + ")";
    switch (s.c_pc) {
      case C_WAIT:
        if (s.started <= s.c_op) return;  // the owner has not handed this operation over yet
        n.c_pc = c_.v == variant::publish_before_result ? C_XCHG : C_WRITE;
        why.push_back("completer: starts set_result" + op);
        break;
      case C_WRITE:
        n.result = static_cast<std::uint8_t>(s.c_op + 1);
        n.c_pc = c_.v == variant::publish_before_result ? C_RESUME : C_XCHG;
        why.push_back("completer: writes the result" + op);
        break;
      case C_XCHG:
        n.c_prev = s.word;
        if (c_.v == variant::complete_load_then_store) {
          n.c_pc = C_STORE;
          why.push_back("completer: loads the word" + op);
          break;
        }
        if (s.word == kCompleted) {
          error = "an operation completed twice";
          return;
        }
        n.word = kCompleted;
        n.c_pc = c_.v == variant::publish_before_result ? C_WRITE : C_RESUME;
        why.push_back("completer: exchanges the word with kCompleted" + op);
        break;
      case C_STORE:
        n.word = kCompleted;
        n.c_pc = C_RESUME;
        why.push_back("completer: stores kCompleted" + op);
        break;
      case C_RESUME:
        if (s.c_prev == kAwaiterHandle || s.c_prev == kStaleHandle) {
          std::uint8_t& pc = s.c_prev == kAwaiterHandle ? n.a_pc : n.s_pc;
          if (pc != A_SUSPENDED) {
            error = "resumed an awaiter that is not suspended";
            return;
          }
          pc = A_RESULT;
          why.push_back(std::string("completer: resumes the ") +
                        (s.c_prev == kAwaiterHandle ? "awaiter" : "stale awaiter") + op);
        } else {
          why.push_back("completer: nobody to resume" + op);
        }
        n.c_op = static_cast<std::uint8_t>(s.c_op + 1);
        n.c_pc = n.c_op == c_.ops ? C_DONE : C_WAIT;
        break;
      default:
        return;
    }
    out.push_back(n);
  }

  // One await step of the awaiter (stale: the stale awaiter, token 0, which never resets).
  void awaiter(const state& s, bool stale, std::vector<state>& out, std::vector<std::string>& why,
               std::string& error) const {
    state n = s;
    const std::uint8_t pc = stale ? s.s_pc : s.a_pc;
    const std::uint8_t token = stale ? 0 : s.a_op;
    const std::uint8_t handle = stale ? kAwaiterHandle + 1 : kAwaiterHandle;
    std::uint8_t& npc = stale ? n.s_pc : n.a_pc;
    std::uint8_t& ncur = stale ? n.s_cur : n.a_cur;
    const std::uint8_t cur = stale ? s.s_cur : s.a_cur;
    const std::string who = (stale ? "stale awaiter" : "awaiter") + std::string(" (token ") + std::to_string(token) + "): ";
    auto reject = [&](const char* what) {
      if (!stale && !c_.stale_awaiter) {
        error = std::string("the awaiter was rejected with nobody misusing the core: ") + what;
        return;
      }
      npc = A_REJECTED;
      why.push_back(who + "invalid_operation: " + what);
      out.push_back(n);
    };
    switch (pc) {
      case A_STATUS:
        if (s.version != token) return reject("stale token in get_status");
        npc = s.word == kCompleted ? A_RESULT : A_VALIDATE;
        why.push_back(who + (s.word == kCompleted ? "get_status: completed" : "get_status: running"));
        break;
      case A_VALIDATE:
        if (s.version != token) return reject("stale token in on_completed");
        npc = A_CAS;
        why.push_back(who + "on_completed: token valid");
        break;
      case A_CAS:
        if (c_.v == variant::register_check_then_store) {
          ncur = s.word;
          if (s.word == kCompleted) {
            npc = A_RESULT;
          } else if (s.word != kNone) {
            return reject("a second continuation");
          } else {
            npc = A_STORE;
          }
          why.push_back(who + "on_completed: loads the word");
          break;
        }
        if (s.word == kNone) {
          n.word = handle;
          npc = A_SUSPENDED;
          why.push_back(who + "on_completed: CAS installs the handle, suspends");
        } else if (s.word == kCompleted) {
          npc = A_RESULT;
          why.push_back(who + "on_completed: CAS finds kCompleted, goes on");
        } else {
          return reject("a second continuation");
        }
        break;
      case A_STORE:
        (void)cur;
        n.word = handle;
        npc = A_SUSPENDED;
        why.push_back(who + "on_completed: stores the handle, suspends");
        break;
      case A_RESULT:
        if (s.version != token) return reject("stale token in get_result");
        if (s.word != kCompleted) {
          if (!stale && !c_.stale_awaiter) {
            error = "get_result before completion";
            return;
          }
          return reject("get_result before completion");
        }
        if (s.taken) return reject("result taken already");
        if (s.result != token + 1) {
          error = "read a result that is not operation " + std::to_string(token) + "'s (result=" +
                  std::to_string(s.result) + ")";
          return;
        }
        n.taken = 1;
        if (stale) {
          n.s_got = 1;
          npc = A_DONE;
        } else {
          n.a_got = static_cast<std::uint8_t>(s.a_got + 1);
          npc = A_RESET;
        }
        why.push_back(who + "get_result takes the result");
        break;
      case A_RESET:
        if (s.a_op + 1 == c_.ops) {
          npc = A_DONE;
          why.push_back(who + "done");
          break;
        }
        if (s.word != kNone && s.word != kCompleted) return reject("reset while an awaiter waits");
        n.result = 0;
        n.taken = 0;
        npc = A_VERSION;
        why.push_back(who + "reset: clears the result");
        break;
      case A_VERSION:
        n.version = static_cast<std::uint8_t>(s.version + 1);
        npc = A_CLEAR;
        why.push_back(who + "reset: version + 1");
        break;
      case A_CLEAR:
        n.word = kNone;
        npc = A_START;
        why.push_back(who + "reset: word = kNone");
        break;
      case A_START:
        n.started = static_cast<std::uint8_t>(s.started + 1);
        n.a_op = static_cast<std::uint8_t>(s.a_op + 1);
        npc = A_STATUS;
        why.push_back(who + "starts the next operation");
        break;
      default:
        return;
    }
    out.push_back(n);
  }

  void successors(const state& s, std::vector<state>& out, std::vector<std::string>& why, std::string& error) const {
    completer(s, out, why, error);
    if (!error.empty()) return;
    awaiter(s, false, out, why, error);
    if (!error.empty()) return;
    const bool inside_reset = s.a_pc == A_VERSION || s.a_pc == A_CLEAR;
    if (c_.stale_awaiter && !inside_reset) awaiter(s, true, out, why, error);
  }

  config c_;
  model_check::stats stats_;
};

std::string check(const config& c) {
  checker k(c);
  std::string r = k.run();
  std::printf("[model] %-52s states %6zu  terminal %4zu%s\n", c.name, k.states(), k.terminal_states(),
              r.empty() ? "" : "  COUNTEREXAMPLE");
  EXPECT_GT(k.terminal_states(), 0u) << c.name << ": no final state reached (the model is vacuous)";
  return r;
}

}  // namespace

TEST(model_value_task_source, completion_racing_the_await_never_loses_or_mixes_results) {
  const std::vector<config> configs = {
      {"one operation", 1, false},
      {"three operations through one reused core", 3, false},
      {"one operation, a second await of the same token", 1, true},
      {"three operations, a stale value_task awaited at any time", 3, true},
  };
  for (const config& c : configs) {
    const std::string r = check(c);
    EXPECT_TRUE(r.empty()) << c.name << "\n" << r;
  }
}

TEST(model_value_task_source, finds_the_lost_wake_up_of_a_registration_without_cas) {
  const std::string r = check({"broken: on_completed loads, then stores its handle", 1, false,
                               variant::register_check_then_store});
  ASSERT_FALSE(r.empty()) << "the checker missed the race on_completed's CAS prevents";
  EXPECT_NE(r.find("never resumed"), std::string::npos) << r;
  std::printf("%s", r.c_str());
}

TEST(model_value_task_source, finds_the_lost_wake_up_of_a_completion_without_exchange) {
  const std::string r = check({"broken: set_result loads, then stores kCompleted", 1, false,
                               variant::complete_load_then_store});
  ASSERT_FALSE(r.empty()) << "the checker missed the race set_result's exchange prevents";
  EXPECT_NE(r.find("never resumed"), std::string::npos) << r;
  std::printf("%s", r.c_str());
}

TEST(model_value_task_source, finds_a_result_read_before_it_was_written) {
  const std::string r = check({"broken: set_result publishes before writing", 1, false,
                               variant::publish_before_result});
  ASSERT_FALSE(r.empty()) << "the checker missed the result published before it was written";
  EXPECT_NE(r.find("read a result"), std::string::npos) << r;
  std::printf("%s", r.c_str());
}

}  // namespace model_value_task_source_test_cpp
