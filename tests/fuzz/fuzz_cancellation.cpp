// fuzz_cancellation — libFuzzer target: sequences of operations on cancellation_token_sources
// (plain and linked), registrations, cancel / cancel(throw_on_first_exception), cancel_after on a
// fake_time_provider and advancing it, try_reset and disposing sources, decoded from the input and
// checked after every operation against a sequential model of tpl/cancellation.hpp's documented
// semantics (.NET's):
//  - cancel() runs the callbacks on the calling thread, newest registration first, each at most
//    once; the exceptions they throw are collected into one aggregate_exception thrown after all
//    ran; with throw_on_first_exception the first one propagates as is and the rest never run;
//    a second cancel does nothing;
//  - registering on a canceled token (also while its callbacks run) runs the callback at once, on
//    this thread; its exception propagates from register_callback;
//  - resetting a registration that has not run means it never runs (also from inside another
//    callback of the same cancellation);
//  - a linked source is canceled by any parent (its callbacks' aggregate becomes one inner
//    exception of the parent's aggregate); a linked source made from a canceled parent is
//    canceled at once; disposing a linked source unregisters it from its parents;
//  - cancel_after(d) cancels when the fake clock reaches now + d (re-arming moves the due time;
//    infinite_timeout disarms); an exception of its callbacks propagates from advance(), which
//    stops at that timer; try_reset (false once canceled) drops the registrations and the timer;
//    disposing a source drops its timer;
//  - when_cancelled(token) completes when its registration runs; dropping the task first removes
//    the registration.
// Callbacks may throw, reset another (or their own) registration, register a new callback, or
// cancel another source. Exceptions are compared as trees: "7" is fuzz_error(7), "[7,[3]]" an
// aggregate_exception holding fuzz_error(7) and an aggregate of fuzz_error(3).
//
// Input: one operation per byte (op % 16), each followed by its operand bytes; see step().
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <tpl/tpl.hpp>

#define TPL_FUZZ_TARGET "fuzz_cancellation"
#include "fuzz_support.hpp"

namespace {

using tpl_fuzz::fail;
using tpl_fuzz::fuzz_error;
using tpl_fuzz::input;

/// "" for no exception, else the tree (see the header comment).
std::string tree_of(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const fuzz_error& f) {
    return std::to_string(f.id);
  } catch (const tpl::aggregate_exception& a) {
    std::string s = "[";
    for (std::size_t i = 0; i < a.inner_exceptions().size(); ++i) {
      if (i != 0) s += ",";
      s += tree_of(a.inner_exceptions()[i]);
    }
    return s + "]";
  } catch (const std::exception& x) {
    return std::string("unexpected:") + x.what();
  } catch (...) {
    return "unexpected:?";
  }
}

template <class F>
std::string tree_of_call(F&& f) {
  try {
    f();
  } catch (...) {
    return tree_of(std::current_exception());
  }
  return "";
}

constexpr std::size_t kMaxSources = 6;
constexpr std::size_t kMaxRegistrations = 64;

/// What a registered callback does when it runs (fixed when it is registered).
struct reg_spec {
  // link: a linked source's registration on a parent; waiter: when_cancelled(token)'s.
  enum kind_t { plain, throws, unregister, register_other, cancel_other, link, waiter } kind = plain;
  int source = 0;     // the source it is registered on (link: the parent)
  int target = -1;    // unregister: registration id; register_other / cancel_other: source; link: child
  bool target_throws = false;  // register_other: the new callback throws
};

// ---- model --------------------------------------------------------------------------------------

struct model_source {
  bool alive = true;
  bool canceled = false;
  std::vector<int> list;  // registration ids still linked, oldest first
  bool has_timer = false;
  bool armed = false;
  std::int64_t due = 0;
  std::uint64_t seq = 0;
  std::vector<int> parent_links;  // its link registrations on its parents
};

struct model_reg {
  bool active = false;  // the real registration object holds a node
  bool linked = false;
  int ran = 0;

  bool internal(const std::vector<reg_spec>& specs, int id) const {
    return specs[id].kind == reg_spec::link || specs[id].kind == reg_spec::waiter;
  }
};

struct model {
  std::vector<model_source> src;
  std::vector<reg_spec>* specs = nullptr;  // shared with the real side: what each callback does
  std::vector<model_reg> regs;
  std::vector<int> log;  // callbacks run, in order (links not included)
  std::int64_t now = 0;  // ms
  std::uint64_t next_seq = 0;

  void unlink(int id) {
    model_reg& r = regs[id];
    if (!r.linked) return;
    auto& l = src[(*specs)[id].source].list;
    for (auto it = l.begin(); it != l.end(); ++it)
      if (*it == id) {
        l.erase(it);
        break;
      }
    r.linked = false;
  }

  /// Runs registration id's callback; returns its exception tree ("" if none).
  std::string run(int id) {
    const reg_spec s = (*specs)[id];  // a copy: registering grows specs
    if (++regs[id].ran > 1) fail("model ran registration %d twice", id);
    if (s.kind == reg_spec::link) return cancel(s.target, false);
    if (s.kind == reg_spec::waiter) return "";  // completes its when_cancelled task
    log.push_back(id);
    switch (s.kind) {
      case reg_spec::plain:
      case reg_spec::link:
      case reg_spec::waiter:
        return "";
      case reg_spec::throws:
        return std::to_string(id);
      case reg_spec::unregister:
        if (regs[s.target].internal(*specs, s.target)) return "";  // a link's or waiter's: not ours
        unlink(s.target);
        regs[s.target].active = false;
        return "";
      case reg_spec::register_other:
        return add_registration(s.target, s.target_throws ? reg_spec::throws : reg_spec::plain, -1, false);
      case reg_spec::cancel_other:
        return src[s.target].alive ? cancel(s.target, false) : "";
    }
    return "";
  }

  /// Registers a new callback (its spec is pushed to specs); returns the exception tree of an
  /// inline run.
  std::string add_registration(int source, reg_spec::kind_t kind, int target, bool target_throws) {
    const int id = static_cast<int>(regs.size());
    specs->push_back({kind, source, target, target_throws});
    regs.emplace_back();
    model_source& s = src[source];
    if (s.canceled) return run(id);  // already canceled (or being canceled): runs right here
    s.list.push_back(id);
    regs[id].active = true;
    regs[id].linked = true;
    return "";
  }

  std::string cancel(int source, bool throw_first) {
    model_source& s0 = src[source];
    if (s0.canceled) return "";
    s0.canceled = true;
    std::vector<std::string> errors;
    std::string first;
    for (;;) {
      auto& l = src[source].list;
      if (l.empty()) break;
      const int id = l.back();  // newest first
      l.pop_back();
      regs[id].linked = false;
      std::string e = run(id);
      if (!e.empty()) {
        if (throw_first) {
          first = e;
          break;
        }
        errors.push_back(e);
      }
    }
    if (!first.empty()) {
      auto& l = src[source].list;  // the rest never runs
      for (int id : l) regs[id].linked = false;
      l.clear();
      return first;
    }
    if (errors.empty()) return "";
    std::string t = "[";
    for (std::size_t i = 0; i < errors.size(); ++i) t += (i ? "," : "") + errors[i];
    return t + "]";
  }

  int armed_timers() const {
    int n = 0;
    for (const auto& s : src) n += s.has_timer && s.armed ? 1 : 0;
    return n;
  }

  std::string advance(std::int64_t d) {
    const std::int64_t target = now + d;
    for (;;) {
      int next = -1;
      for (std::size_t i = 0; i < src.size(); ++i) {
        const auto& s = src[i];
        if (!s.has_timer || !s.armed || s.due > target) continue;
        if (next < 0 || s.due < src[next].due || (s.due == src[next].due && s.seq < src[next].seq))
          next = static_cast<int>(i);
      }
      if (next < 0) {
        now = target;
        return "";
      }
      if (now < src[next].due) now = src[next].due;
      src[next].armed = false;
      std::string e = cancel(next, false);
      if (!e.empty()) return e;  // propagates from advance(), which stops here
    }
  }
};

class harness {
 public:
  explicit harness(input in) : in_(in) { m_.specs = &specs_; }

  ~harness() {
    // Registrations first (their callbacks point at us), then the sources.
    waiters_.clear();
    regs_.clear();
    srcs_.clear();
  }

  void run() {
    while (!in_.empty()) {
      step(in_.next());
      check("after an operation");
    }
    // Dispose everything: nothing may run any more, no timer may stay armed.
    for (std::size_t i = 0; i < srcs_.size(); ++i) dispose(static_cast<int>(i));
    check("after disposing every source");
    FUZZ_CHECK(clock_.armed_timers() == 0, "a disposed source left a timer armed");
    for (auto& r : regs_) r.reset();
  }

 private:
  int pick_source(std::uint8_t b) const { return static_cast<int>(b % srcs_.size()); }

  void on_callback(int id) {
    real_log_.push_back(id);
    const reg_spec s = specs_[id];  // a copy: registering may grow specs_
    switch (s.kind) {
      case reg_spec::plain:
      case reg_spec::link:
      case reg_spec::waiter:
        return;
      case reg_spec::throws:
        throw fuzz_error(id);
      case reg_spec::unregister:
        regs_[s.target].reset();  // may be this very callback: touch no capture after this
        return;
      case reg_spec::register_other:
        register_real(s.target);
        return;
      case reg_spec::cancel_other:
        if (srcs_[s.target]) srcs_[s.target]->cancel();
        return;
    }
  }

  /// Registers a callback on source's token. Its id is the next free one; the model, which runs
  /// every operation first, has pushed its spec (what the callback does) under the same id.
  void register_real(int source) {
    const int id = static_cast<int>(regs_.size());
    regs_.emplace_back();
    harness* h = this;
    // The right-hand side runs first (and may register more, growing regs_: deque references stay).
    regs_[id] = tokens_[source].register_callback([h, id] {
      harness* self = h;  // locals: the callback object may be destroyed by its own reset
      const int me = id;
      self->on_callback(me);
    });
  }

  void new_source(int linked_a, int linked_b) {
    const int idx = static_cast<int>(srcs_.size());
    model_source ms;
    ms.seq = 0;
    if (linked_a < 0) {
      srcs_.emplace_back(tpl::cancellation_token_source());
      tokens_.push_back(srcs_.back()->token());
      m_.src.push_back(ms);
      return;
    }
    // Model: one link registration per parent, in order; stop once the new source is canceled.
    m_.src.push_back(ms);
    std::vector<int> parents{linked_a};
    if (linked_b >= 0) parents.push_back(linked_b);
    for (int p : parents) {
      const int id = static_cast<int>(m_.regs.size());
      m_.src[idx].parent_links.push_back(id);
      const std::string e = m_.add_registration(p, reg_spec::link, idx, false);
      FUZZ_CHECK(e.empty(), "model: linking threw");
      // the real linked source holds a registration object of its own: keep ids aligned
      regs_.emplace_back();
      if (m_.src[idx].canceled) break;
    }
    std::string e;
    if (linked_b < 0)
      e = tree_of_call([&] { srcs_.emplace_back(tpl::cancellation_token_source::create_linked(tokens_[linked_a])); });
    else
      e = tree_of_call([&] {
        srcs_.emplace_back(tpl::cancellation_token_source::create_linked(tokens_[linked_a], tokens_[linked_b]));
      });
    FUZZ_CHECK(e.empty(), "create_linked threw %s", e.c_str());
    tokens_.push_back(srcs_.back()->token());
  }

  void dispose(int i) {
    if (!srcs_[i]) return;
    model_source& s = m_.src[i];
    s.alive = false;
    s.has_timer = false;
    for (int id : s.parent_links) m_.unlink(id);
    srcs_[i].reset();
  }

  void step(std::uint8_t b) {
    const int op = b % 16;
    if (srcs_.empty() && op != 0 && op != 1) {
      new_source(-1, -1);  // most operations need a source
      check("after the first source");
    }
    switch (op) {
      case 0:
        if (srcs_.size() < kMaxSources) new_source(-1, -1);
        break;
      case 1: {  // linked source over one or two sources
        const std::uint8_t a = in_.next();
        const std::uint8_t c = in_.next();
        if (srcs_.empty() || srcs_.size() >= kMaxSources || m_.regs.size() + 2 > kMaxRegistrations) break;
        new_source(pick_source(a), (c & 0x80) != 0 ? -1 : pick_source(c));
        break;
      }
      case 2:
      case 10:
      case 11: {  // register a callback
        const int source = pick_source(in_.next());
        const std::uint8_t k = in_.next();
        const std::uint8_t param = in_.next();
        if (m_.regs.size() + 2 > kMaxRegistrations) break;
        reg_spec::kind_t kind = static_cast<reg_spec::kind_t>(k % 5);
        int target = -1;
        bool target_throws = false;
        switch (kind) {
          case reg_spec::unregister:
            target = static_cast<int>(param % (m_.regs.size() + 1));  // may be itself
            break;
          case reg_spec::register_other:
          case reg_spec::cancel_other:
            target = pick_source(param);
            target_throws = (param & 0x80) != 0;
            break;
          default:
            break;
        }
        const std::string want = m_.add_registration(source, kind, target, target_throws);
        const std::string got = tree_of_call([&] { register_real(source); });
        FUZZ_CHECK(got == want, "register_callback on source %d (kind %d): threw '%s', model '%s'", source, kind,
                   got.c_str(), want.c_str());
        break;
      }
      case 14: {  // when_cancelled(token): a task that completes once the source is canceled
        const int source = pick_source(in_.next());
        if (m_.regs.size() + 2 > kMaxRegistrations) break;
        const int id = static_cast<int>(m_.regs.size());
        const std::string want = m_.add_registration(source, reg_spec::waiter, -1, false);
        FUZZ_CHECK(want.empty(), "model: a waiter threw");
        regs_.emplace_back();  // the registration lives inside the task
        waiters_.emplace(id, tpl::when_cancelled(tokens_[source]));
        break;
      }
      case 3: {  // reset (unregister) a registration; for a waiter, drop its task
        const std::uint8_t p = in_.next();
        if (regs_.empty()) break;
        const int id = static_cast<int>(p % regs_.size());
        if ((*m_.specs)[id].kind == reg_spec::waiter) {
          // The last handle goes: its registration is removed (it never runs).
          m_.unlink(id);
          m_.regs[id].active = false;
          waiters_.erase(id);
          break;
        }
        if ((*m_.specs)[id].kind == reg_spec::link) break;  // owned by its linked source
        m_.unlink(id);
        m_.regs[id].active = false;
        regs_[id].reset();
        break;
      }
      case 4:
      case 5:
      case 12: {  // cancel() / cancel(throw_on_first_exception)
        const int s = pick_source(in_.next());
        if (!srcs_[s]) break;
        const bool first = op == 5;
        const std::string want = m_.cancel(s, first);
        const std::string got = tree_of_call([&] {
          if (first)
            srcs_[s]->cancel(true);
          else
            srcs_[s]->cancel();
        });
        FUZZ_CHECK(got == want, "cancel(source %d, first %d): threw '%s', model '%s'", s, first, got.c_str(),
                   want.c_str());
        break;
      }
      case 6:
      case 15: {  // cancel_after
        const int s = pick_source(in_.next());
        const std::uint8_t d = in_.next();
        if (!srcs_[s]) break;
        model_source& ms = m_.src[s];
        const bool infinite = d == 255;
        if (!ms.canceled) {
          if (ms.has_timer) {
            ms.armed = !infinite;
            if (!infinite) ms.due = m_.now + d;
          } else if (!infinite) {
            ms.has_timer = true;
            ms.armed = true;
            ms.due = m_.now + d;
            ms.seq = m_.next_seq++;
          }
        }
        const std::string got = tree_of_call([&] {
          srcs_[s]->cancel_after(infinite ? std::chrono::nanoseconds(tpl::infinite_timeout)
                                          : std::chrono::nanoseconds(std::chrono::milliseconds(d)),
                                 clock_);
        });
        FUZZ_CHECK(got.empty(), "cancel_after threw '%s'", got.c_str());
        break;
      }
      case 7:
      case 13: {  // advance the fake clock
        const std::uint8_t d = in_.next();
        const std::string want = m_.advance(d);
        const std::string got = tree_of_call([&] { clock_.advance(std::chrono::milliseconds(d)); });
        FUZZ_CHECK(got == want, "advance(%d ms): threw '%s', model '%s'", d, got.c_str(), want.c_str());
        break;
      }
      case 8: {  // try_reset
        const int s = pick_source(in_.next());
        if (!srcs_[s]) break;
        model_source& ms = m_.src[s];
        ms.has_timer = false;
        bool want = false;
        if (!ms.canceled) {
          want = true;
          for (int id : ms.list) m_.regs[id].linked = false;  // dropped: they will never run
          ms.list.clear();
        }
        const bool got = srcs_[s]->try_reset();
        FUZZ_CHECK(got == want, "try_reset(source %d): got %d, model %d", s, got, want);
        break;
      }
      case 9:  // dispose a source
        dispose(pick_source(in_.next()));
        break;
    }
  }

  void check(const char* when) {
    FUZZ_CHECK(real_log_ == m_.log, "%s: callbacks ran differently (got %zu, model %zu; last got %d, model %d)",
               when, real_log_.size(), m_.log.size(), real_log_.empty() ? -1 : real_log_.back(),
               m_.log.empty() ? -1 : m_.log.back());
    FUZZ_CHECK(regs_.size() == m_.regs.size(), "%s: %zu registrations, model %zu", when, regs_.size(),
               m_.regs.size());
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      FUZZ_CHECK(tokens_[i].is_cancellation_requested() == m_.src[i].canceled, "%s: source %zu canceled %d, model %d",
                 when, i, tokens_[i].is_cancellation_requested(), m_.src[i].canceled);
      if (srcs_[i])
        FUZZ_CHECK(srcs_[i]->is_cancellation_requested() == m_.src[i].canceled, "%s: source %zu disagrees with its token",
                   when, i);
    }
    for (std::size_t i = 0; i < regs_.size(); ++i) {
      if (m_.regs[i].internal(*m_.specs, static_cast<int>(i))) continue;  // held by a linked source / a task
      FUZZ_CHECK(regs_[i].active() == m_.regs[i].active, "%s: registration %zu active %d, model %d", when, i,
                 regs_[i].active(), m_.regs[i].active);
    }
    for (const auto& [id, t] : waiters_)
      FUZZ_CHECK(t.is_completed() == (m_.regs[id].ran == 1),
                 "%s: when_cancelled task of registration %d: completed %d, model ran %d", when, id, t.is_completed(),
                 m_.regs[id].ran);
    FUZZ_CHECK(static_cast<int>(clock_.armed_timers()) == m_.armed_timers(), "%s: %zu armed timers, model %d", when,
               clock_.armed_timers(), m_.armed_timers());
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        clock_.utc_now() - tpl::testing::fake_time_provider::default_start());
    FUZZ_CHECK(elapsed.count() == m_.now, "%s: clock at %lld ms, model %lld", when,
               static_cast<long long>(elapsed.count()), static_cast<long long>(m_.now));
  }

  input in_;
  model m_;
  std::vector<reg_spec> specs_;
  tpl::testing::fake_time_provider clock_;
  std::vector<std::optional<tpl::cancellation_token_source>> srcs_;
  std::vector<tpl::cancellation_token> tokens_;  // one per source, kept after it is disposed
  std::deque<tpl::cancellation_registration> regs_;  // by id (a link's or waiter's slot stays empty)
  std::map<int, tpl::task<>> waiters_;               // when_cancelled tasks, by registration id
  std::vector<int> real_log_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  harness h(input{data, size});
  h.run();
  return 0;
}
