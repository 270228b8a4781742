// tests/model_check.hpp — the exhaustive state-space explorers the model tests share.
//
// A model test describes a protocol as a state (the shared words plus each thread's program
// counter) and the steps each thread may take from it; an explorer visits every state reachable
// from the initial one, in every interleaving, and reports the first violation with the steps
// that led to it. Two shapes, one per way of writing a model:
//
//  - model_check::search(s0, model, stats): an iterative depth-first search for models that
//    give a successor function. The model provides
//      void successors(const State&, std::vector<State>& next, std::vector<std::string>& why,
//                      std::string& error) const;   // error: a violation seen in this state
//      std::string check_terminal(const State&) const;  // "" when a final state is correct
//    and, optionally, std::string summary(const State&) const, printed after each step of a
//    counterexample. State is trivially copyable and its bytes are its identity (keep padding
//    out of it: uint8_t fields).
//  - model_check::recursion<Key>: the bookkeeping of models written as a recursive explore()
//    (visited set, trace of the steps on the current path, failure, state count), and
//    explore_from(), an explicit-stack search without a trace over a successor function.
//
// Invariants: a state is expanded once (the visited set is checked before expansion); a
// counterexample lists exactly the steps from the initial state to the violating one.
//
// Example:
//   model_check::stats st;
//   const std::string bad = model_check::search(initial_state, my_model, st);
//   EXPECT_EQ(bad, "");  // or, for a known-bad variant: EXPECT_NE(bad, "")
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace model_check {

struct stats {
  std::size_t states = 0;           // distinct states visited
  std::size_t terminal_states = 0;  // states without successors
  std::size_t transitions = 0;      // steps taken (edges, including to visited states)
};

/// Every state reachable from s0, depth first. Returns "" when no violation is reachable, else
/// "counterexample (<violation>):" and the steps that reach it, one a line.
template <class State, class Model>
std::string search(const State& s0, const Model& model, stats& st) {
  static_assert(std::is_trivially_copyable_v<State>, "a model state is identified by its bytes");
  struct frame {
    State s;
    std::vector<State> succ;
    std::vector<std::string> why;
    std::size_t next = 0;
  };
  std::unordered_set<std::string> visited;
  std::vector<frame> stack;
  std::string error;
  auto enter = [&](const State& s) -> bool {
    if (!visited.insert(std::string(reinterpret_cast<const char*>(&s), sizeof s)).second) return true;
    ++st.states;
    frame f;
    f.s = s;
    error.clear();
    model.successors(s, f.succ, f.why, error);
    if (!error.empty()) return false;
    if (f.succ.empty()) {
      ++st.terminal_states;
      error = model.check_terminal(s);
      if (!error.empty()) return false;
    }
    stack.push_back(std::move(f));
    return true;
  };
  auto trace = [&] {
    std::string out = "counterexample (" + error + "):\n";
    for (const frame& g : stack) {
      if (g.next == 0) break;
      out += "  " + g.why[g.next - 1];
      if constexpr (requires { model.summary(g.succ[g.next - 1]); }) out += "   => " + model.summary(g.succ[g.next - 1]);
      out += "\n";
    }
    return out;
  };
  if (!enter(s0)) return trace();
  while (!stack.empty()) {
    frame& f = stack.back();
    if (f.next == f.succ.size()) {
      stack.pop_back();
      continue;
    }
    const State n = f.succ[f.next++];
    ++st.transitions;
    if (!enter(n)) return trace();
  }
  return {};
}

/// For a model's recursive explore(state): `if (!first_visit(s.key())) return true;` at its top,
/// `step(next, "what")` for each successor, `fail("why")` on a violation.
template <class Key, class Hash = std::hash<Key>>
struct recursion {
  std::unordered_set<Key, Hash> seen;
  std::vector<std::string> trace;  // the steps from the initial state to the current one
  std::string failure;
  std::size_t states = 0;

  bool fail(const std::string& why) {
    failure = why;
    return false;
  }
  /// False when the state was visited before (its successors are explored already).
  bool first_visit(const Key& k) {
    if (!seen.insert(k).second) return false;
    ++states;
    return true;
  }
  /// For models that give a successor function instead: every state reachable from init, with an
  /// explicit stack and no trace. `successors(s, next)` fills next; `terminal(s)` returns "" or the
  /// violation for a state without successors. State has key() -> Key. False on a violation
  /// (failure holds it).
  template <class State, class Successors, class Terminal>
  bool explore_from(const State& init, Successors successors, Terminal terminal) {
    std::vector<State> stack{init};
    std::vector<State> next;
    seen.insert(init.key());
    while (!stack.empty()) {
      const State s = stack.back();
      stack.pop_back();
      ++states;
      next.clear();
      successors(s, next);
      if (next.empty()) {
        if (std::string why = terminal(s); !why.empty()) return fail(why);
      }
      for (const State& n : next)
        if (seen.insert(n.key()).second) stack.push_back(n);
    }
    return true;
  }
  /// The trace, one step a line, after the failure.
  std::string counterexample() const {
    std::string out = failure + "\n";
    for (const std::string& s : trace) out += "  " + s + "\n";
    return out;
  }
};

}  // namespace model_check
