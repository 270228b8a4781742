// fuzz_channel — libFuzzer target: a sequence of channel operations decoded from the input, run
// on one thread (tpl::testing::deterministic_scheduler) and checked step by step against a
// sequential model of the channel (docs/channels.md: FIFO readers and writers, hand-off to a
// waiting reader, the four full modes, completion, cancellation, single_reader/single_writer).
//
// Input: byte 0 the kind (unbounded, or bounded with a full mode), byte 1 the capacity (0..4),
// byte 2 flags (single_reader, single_writer, allow_synchronous_continuations, destroy at the
// end: drop the last handles with operations still waiting instead of completing; bits 4-5 when
// the channel moves to its lock-free ring), byte 3 the
// scheduler seed; then one operation per byte (some take one more byte): op % 16 picks it, bit 7
// makes the step lazy (the scheduler runs only the step itself, not everything ready, so earlier
// operations may be resolved but not yet resumed). After every other step the scheduler runs
// until idle, and then every observable result must equal the model's: the outcome of every
// operation started so far (pending or how it ended), the items dropped (in order), count(),
// try_peek(). At the end the channel is completed and drained (or destroyed: the waiting operations
// fail with channel_closed), and every item ever written is accounted for exactly once: read,
// dropped, drained, reported as not written, or buffered when the channel was destroyed. Any
// mismatch prints what differed and aborts.
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

#include <tpl/channel.hpp>
#include <tpl/tpl.hpp>

#define TPL_FUZZ_TARGET "fuzz_channel"
#include "fuzz_support.hpp"

namespace {

using tpl_fuzz::fail;
using tpl_fuzz::fuzz_error;
using tpl_fuzz::input;

// Items are heap-allocated strings (longer than the small-string buffer), so ASan sees an item
// that is used after being moved into the ring and destroyed, or destroyed twice.
std::string make_item(int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "item-%08d-and-some-padding-to-leave-sso", n);
  return buf;
}
int parse_item(const std::string& s) {
  if (s.size() < 13 || s.compare(0, 5, "item-") != 0) fail("corrupt item '%s'", s.c_str());
  return std::atoi(s.substr(5, 8).c_str());
}

enum class op_kind { read, next, write, wait_to_read, wait_to_write };
const char* kind_name(op_kind k) {
  switch (k) {
    case op_kind::read: return "read_async";
    case op_kind::next: return "next_async";
    case op_kind::write: return "write_async";
    case op_kind::wait_to_read: return "wait_to_read_async";
    case op_kind::wait_to_write: return "wait_to_write_async";
  }
  return "?";
}

/// How an operation ended (or that it has not).
struct outcome {
  enum tag_t { pending, ok, end, closed, raw_error, canceled, misuse, unknown } tag = pending;
  int v = -1;  // ok: the item read, 1/0 for wait_to_*, -1 for a write; closed / raw_error: error id
  bool operator==(const outcome&) const = default;
};
std::string describe(const outcome& o) {
  static const char* names[] = {"pending", "ok", "end", "closed", "raw_error", "canceled", "misuse", "unknown"};
  return std::string(names[o.tag]) + "(" + std::to_string(o.v) + ")";
}

/// The error id inside an exception_ptr: -1 for none, -2 for something that is not a fuzz_error.
int error_id(const std::exception_ptr& e) {
  if (!e) return -1;
  try {
    std::rethrow_exception(e);
  } catch (const fuzz_error& f) {
    return f.id;
  } catch (...) {
    return -2;
  }
}

outcome classify(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const tpl::operation_canceled&) {
    return {outcome::canceled, -1};
  } catch (const tpl::channel_closed& c) {
    return {outcome::closed, error_id(c.inner_exception())};
  } catch (const tpl::invalid_operation&) {
    return {outcome::misuse, -1};
  } catch (const fuzz_error& f) {
    return {outcome::raw_error, f.id};
  } catch (...) {
    return {outcome::unknown, -1};
  }
}

/// One asynchronous operation: what the model expects and what the real one did.
struct op_record {
  op_kind kind{};
  int value = -1;  // write: the item
  bool has_cts = false;
  bool cancel_requested = false;
  bool started = false;  // its coroutine has run up to (and into) the channel operation
  tpl::cancellation_token_source cts;
  outcome expected;
  outcome real;
};

using reader_t = tpl::channel_reader<std::string>;
using writer_t = tpl::channel_writer<std::string>;

// The handles are borrowed (the harness owns them): a waiting operation does not keep the channel
// alive, so the end of an input may destroy the channel under it.
tpl::task<> run_op(const reader_t* r, const writer_t* w, tpl::cancellation_token token, op_record* rec) {
  rec->started = true;
  try {
    switch (rec->kind) {
      case op_kind::read: {
        std::string v = co_await r->read_async(token);
        rec->real = {outcome::ok, parse_item(v)};
        break;
      }
      case op_kind::next: {
        std::optional<std::string> v = co_await r->next_async(token);
        rec->real = v ? outcome{outcome::ok, parse_item(*v)} : outcome{outcome::end, -1};
        break;
      }
      case op_kind::write: {
        std::string item = make_item(rec->value);
        co_await w->write_async(std::move(item), token);
        rec->real = {outcome::ok, -1};
        break;
      }
      case op_kind::wait_to_read: {
        const bool b = co_await r->wait_to_read_async(token);
        rec->real = {outcome::ok, b ? 1 : 0};
        break;
      }
      case op_kind::wait_to_write: {
        const bool b = co_await w->wait_to_write_async(token);
        rec->real = {outcome::ok, b ? 1 : 0};
        break;
      }
    }
  } catch (...) {
    rec->real = classify(std::current_exception());
  }
  if (rec->real.tag == outcome::pending) fail("op ended without an outcome");
}

// ---- the sequential model -----------------------------------------------------------------------

struct model {
  bool unbounded = true;
  std::size_t capacity = 0;
  tpl::bounded_channel_full_mode mode = tpl::bounded_channel_full_mode::wait;
  bool single_reader = false;
  bool single_writer = false;

  std::deque<int> items;
  std::deque<op_record*> readers, writers, read_waiters, write_waiters;  // FIFO
  bool completed = false;
  bool done = false;
  int error = -1;
  std::vector<int> dropped;

  static void resolve(op_record* r, outcome o) {
    if (r->expected.tag != outcome::pending) fail("model resolves an op twice");
    r->expected = o;
  }
  // How a pending or starting op ends once the channel is completed (and, for readers, drained).
  outcome closed_outcome(op_kind k) const {
    switch (k) {
      case op_kind::read:
      case op_kind::write:
        return {outcome::closed, error};
      case op_kind::next:
        return error >= 0 ? outcome{outcome::raw_error, error} : outcome{outcome::end, -1};
      case op_kind::wait_to_read:
      case op_kind::wait_to_write:
        return error >= 0 ? outcome{outcome::raw_error, error} : outcome{outcome::ok, 0};
    }
    return {};
  }
  void wake_all(std::deque<op_record*>& q) {
    while (!q.empty()) {
      resolve(q.front(), {outcome::ok, 1});
      q.pop_front();
    }
  }
  void mark_done() {
    done = true;
    for (auto* q : {&readers, &read_waiters}) {
      while (!q->empty()) {
        resolve(q->front(), closed_outcome(q->front()->kind));
        q->pop_front();
      }
    }
  }
  bool has_room() const {
    if (!unbounded && capacity == 0) return !readers.empty();
    return unbounded || items.size() < capacity || mode != tpl::bounded_channel_full_mode::wait;
  }

  enum class wr { written, full, closed };
  wr write(int v) {
    if (completed) return wr::closed;
    if (!readers.empty()) {  // a waiting reader: hand the item over
      resolve(readers.front(), {outcome::ok, v});
      readers.pop_front();
      return wr::written;
    }
    if (!unbounded && capacity == 0) return wr::full;
    if (unbounded || items.size() < capacity) {
      items.push_back(v);
      wake_all(read_waiters);
      return wr::written;
    }
    switch (mode) {
      case tpl::bounded_channel_full_mode::wait:
        return wr::full;
      case tpl::bounded_channel_full_mode::drop_write:
        dropped.push_back(v);
        return wr::written;
      case tpl::bounded_channel_full_mode::drop_newest:
        dropped.push_back(items.back());
        items.back() = v;
        return wr::written;
      case tpl::bounded_channel_full_mode::drop_oldest:
        dropped.push_back(items.front());
        items.pop_front();
        items.push_back(v);
        return wr::written;
    }
    return wr::full;
  }

  enum class rr { taken, empty, closed };
  rr read(int& out) {
    if (!items.empty()) {
      out = items.front();
      items.pop_front();
      if (!writers.empty()) {  // the room goes to the oldest blocked writer
        op_record* w = writers.front();
        writers.pop_front();
        items.push_back(w->value);
        resolve(w, {outcome::ok, -1});
      } else {
        wake_all(write_waiters);
      }
      if (completed && items.empty()) mark_done();
      return rr::taken;
    }
    if (!writers.empty()) {  // rendezvous: take it from the oldest blocked writer
      op_record* w = writers.front();
      writers.pop_front();
      out = w->value;
      resolve(w, {outcome::ok, -1});
      return rr::taken;
    }
    return completed ? rr::closed : rr::empty;
  }

  bool try_complete(int err) {
    if (completed) return false;
    completed = true;
    error = err;
    for (auto* q : {&writers, &write_waiters}) {
      while (!q->empty()) {
        resolve(q->front(), closed_outcome(q->front()->kind));
        q->pop_front();
      }
    }
    if (items.empty()) mark_done();
    return true;
  }

  /// An asynchronous operation starts (its token not canceled yet).
  void start(op_record* r) {
    const bool reader_side = r->kind != op_kind::write && r->kind != op_kind::wait_to_write;
    switch (r->kind) {
      case op_kind::read:
      case op_kind::next: {
        int v = -1;
        switch (read(v)) {
          case rr::taken: resolve(r, {outcome::ok, v}); return;
          case rr::closed: resolve(r, closed_outcome(r->kind)); return;
          case rr::empty: break;
        }
        break;
      }
      case op_kind::write:
        switch (write(r->value)) {
          case wr::written: resolve(r, {outcome::ok, -1}); return;
          case wr::closed: resolve(r, closed_outcome(r->kind)); return;
          case wr::full: break;
        }
        break;
      case op_kind::wait_to_read:
        if (!items.empty() || !writers.empty()) return resolve(r, {outcome::ok, 1});
        if (completed) return resolve(r, closed_outcome(r->kind));
        break;
      case op_kind::wait_to_write:
        if (completed) return resolve(r, closed_outcome(r->kind));
        if (has_room()) return resolve(r, {outcome::ok, 1});
        break;
    }
    // It waits, unless that breaks a single_reader / single_writer promise.
    if (reader_side && single_reader && (!readers.empty() || !read_waiters.empty()))
      return resolve(r, {outcome::misuse, -1});
    if (!reader_side && single_writer && (!writers.empty() || !write_waiters.empty()))
      return resolve(r, {outcome::misuse, -1});
    switch (r->kind) {
      case op_kind::read:
      case op_kind::next:
        readers.push_back(r);
        if (!unbounded && capacity == 0) wake_all(write_waiters);
        break;
      case op_kind::write:
        writers.push_back(r);
        if (!unbounded && capacity == 0) wake_all(read_waiters);
        break;
      case op_kind::wait_to_read:
        read_waiters.push_back(r);
        break;
      case op_kind::wait_to_write:
        write_waiters.push_back(r);
        break;
    }
  }

  /// The op's token fires: a queued op is taken out and fails with operation_canceled.
  void cancel(op_record* r) {
    for (auto* q : {&readers, &writers, &read_waiters, &write_waiters}) {
      for (auto it = q->begin(); it != q->end(); ++it) {
        if (*it == r) {
          q->erase(it);
          resolve(r, {outcome::canceled, -1});
          return;
        }
      }
    }
  }
};

class harness {
 public:
  harness(input in) : in_(in) {}

  int run() {
    const std::uint8_t kind = in_.next();
    const std::uint8_t cap = in_.next();
    const std::uint8_t flags = in_.next();
    const std::uint8_t seed = in_.next();
    m_.unbounded = kind % 5 == 0;
    m_.capacity = cap % 5;
    m_.mode = static_cast<tpl::bounded_channel_full_mode>((kind / 5) % 4);
    m_.single_reader = (flags & 1) != 0;
    m_.single_writer = (flags & 2) != 0;
    const bool sync = (flags & 4) != 0;
    destroy_at_end_ = (flags & 8) != 0;
    // Bits 4-5: when a channel that can have a lock-free ring (wait mode or unbounded, capacity 2
    // and up) moves to it: at once, after 3 writes (with items buffered, blocked writers or
    // waiting readers), or after the default warm-up (which few inputs reach).
    constexpr std::uint32_t kWarmups[] = {64, 0, 3, 0};
    tpl::detail::channel_fast_ring_warmup.store(kWarmups[(flags >> 4) & 3], std::memory_order_relaxed);
    if (m_.unbounded) {
      tpl::unbounded_channel_options o;
      o.single_reader = m_.single_reader;
      o.single_writer = m_.single_writer;
      o.allow_synchronous_continuations = sync;
      ch_ = tpl::make_unbounded_channel<std::string>(o);
    } else {
      tpl::bounded_channel_options o;
      o.capacity = static_cast<std::ptrdiff_t>(m_.capacity);
      o.full_mode = m_.mode;
      o.single_reader = m_.single_reader;
      o.single_writer = m_.single_writer;
      o.allow_synchronous_continuations = sync;
      auto on_drop = [this](std::string s) { real_dropped_.push_back(parse_item(s)); };
      if (m_.capacity == 0 && m_.mode != tpl::bounded_channel_full_mode::wait) {
        bool threw = false;
        try {
          ch_ = tpl::make_bounded_channel<std::string>(o, on_drop);
        } catch (const std::invalid_argument&) {
          threw = true;
        }
        FUZZ_CHECK(threw, "capacity 0 with a drop full mode was accepted");
        return 0;
      }
      ch_ = tpl::make_bounded_channel<std::string>(o, on_drop);
    }
    reader_ = ch_.reader();
    writer_ = ch_.writer();
    sched_.emplace(seed);

    while (!in_.empty()) {
      const std::uint8_t b = in_.next();
      lazy_ = (b & 0x80) != 0;
      step(b);
      check_all("after an operation");
    }
    lazy_ = false;
    finish();
    return 0;
  }

 private:
  /// Runs fn on the scheduler (so the continuations it queues go there), then everything ready;
  /// or, for a lazy step (bit 7 of the operation byte), only until fn has run: operations resolved
  /// earlier may then still wait to be resumed while the next operations run.
  template <class F>
  void on_scheduler(F fn) {
    auto t = sched_->start([&fn]() -> tpl::task<> {
      fn();
      co_return;
    });
    if (lazy_) {
      while (!t.is_completed()) FUZZ_CHECK(sched_->run_one(), "a driver step is not ready to run");
    } else {
      sched_->run_until_idle();
    }
    FUZZ_CHECK(t.is_completed_successfully(), "a driver step did not complete");
  }

  void start_op(op_kind k, std::uint8_t flags) {
    op_record& r = ops_.emplace_back();
    r.kind = k;
    if (k == op_kind::write) {
      r.value = next_value_++;
      attempted_.push_back(r.value);
    }
    r.has_cts = (flags & 1) != 0;
    const bool pre_canceled = (flags & 2) != 0;
    tpl::cancellation_token token;
    if (pre_canceled) {
      tpl::cancellation_token_source c;
      c.cancel();
      token = c.token();
      r.has_cts = false;
      model::resolve(&r, {outcome::canceled, -1});  // fails before looking at the channel
    } else {
      if (r.has_cts) token = r.cts.token();
      m_.start(&r);
    }
    op_record* rec = &r;
    tasks_.push_back(sched_->start([this, token, rec]() { return run_op(&reader_, &writer_, token, rec); }));
    if (lazy_) {
      while (!rec->started) FUZZ_CHECK(sched_->run_one(), "an operation is not ready to start");
    } else {
      sched_->run_until_idle();
    }
  }

  void step(std::uint8_t b) {
    switch (b % 16) {
      case 0: {  // try_write
        const int v = next_value_++;
        attempted_.push_back(v);
        const auto expect = m_.write(v);
        on_scheduler([&] {
          const std::string item = make_item(v);
          std::string moved = item;
          bool ok = false;
          outcome o;
          try {
            ok = writer_.try_write(std::move(moved));
            o = {outcome::ok, ok ? 1 : 0};
          } catch (...) {
            o = classify(std::current_exception());
          }
          // A completed channel refuses the item like a full one: try_write never throws.
          const outcome want = expect == model::wr::written ? outcome{outcome::ok, 1} : outcome{outcome::ok, 0};
          FUZZ_CHECK(o == want, "try_write(%d): got %s, model %s", v, describe(o).c_str(), describe(want).c_str());
          if (!ok) {
            FUZZ_CHECK(moved == item, "try_write(%d) failed but moved the item from", v);
            not_written_.push_back(v);
          }
        });
        break;
      }
      case 1: {  // try_read
        int v = -1;
        const auto expect = m_.read(v);
        on_scheduler([&] {
          std::string out;
          const bool ok = reader_.try_read(out);
          FUZZ_CHECK(ok == (expect == model::rr::taken), "try_read: got %d, model %d", ok, expect == model::rr::taken);
          if (ok) {
            const int got = parse_item(out);
            FUZZ_CHECK(got == v, "try_read: got item %d, model %d", got, v);
            read_.push_back(got);
          }
        });
        break;
      }
      case 2:  // try_peek
        on_scheduler([&] {
          const std::optional<std::string> p = reader_.try_peek();
          FUZZ_CHECK(p.has_value() == !m_.items.empty(), "try_peek: got %d, model %d", p.has_value(),
                     !m_.items.empty());
          if (p) FUZZ_CHECK(parse_item(*p) == m_.items.front(), "try_peek: wrong item");
        });
        break;
      case 3:  // completion() task state
        on_scheduler([&] {
          tpl::task<> c = reader_.completion();
          FUZZ_CHECK(c.is_completed() == m_.done, "completion(): completed %d, model done %d", c.is_completed(),
                     m_.done);
          if (m_.done)
            FUZZ_CHECK(c.is_faulted() == (m_.error >= 0), "completion(): faulted %d, model error %d", c.is_faulted(),
                       m_.error);
        });
        break;
      case 4:
        start_op(op_kind::write, in_.next());
        break;
      case 5:
        start_op(op_kind::read, in_.next());
        break;
      case 6:
        start_op(op_kind::next, in_.next());
        break;
      case 7:
        start_op(op_kind::wait_to_read, in_.next());
        break;
      case 8:
        start_op(op_kind::wait_to_write, in_.next());
        break;
      case 9:
      case 10: {  // cancel one op that has a token source
        std::vector<op_record*> cancelable;
        for (auto& r : ops_)
          if (r.has_cts && !r.cancel_requested) cancelable.push_back(&r);
        const std::uint8_t pick = in_.next();
        if (cancelable.empty()) break;
        cancel_op(cancelable[pick % cancelable.size()]);
        break;
      }
      case 11: {  // try_complete, with or without an error
        const std::uint8_t e = in_.next();
        const int err = (e & 1) != 0 ? next_error_++ : -1;
        const bool expect = m_.try_complete(err);
        on_scheduler([&] {
          const bool got = writer_.try_complete(err >= 0 ? std::make_exception_ptr(fuzz_error(err)) : nullptr);
          FUZZ_CHECK(got == expect, "try_complete: got %d, model %d", got, expect);
        });
        break;
      }
      case 12: {  // complete(): throws channel_closed the second time
        const bool expect = m_.try_complete(-1);
        on_scheduler([&] {
          bool threw = false;
          try {
            writer_.complete();
          } catch (const tpl::channel_closed&) {
            threw = true;
          }
          FUZZ_CHECK(threw == !expect, "complete(): threw %d, model completed before %d", threw, !expect);
        });
        break;
      }
      case 13:  // cancel every pending op that has a token source
        for (auto& r : ops_)
          if (r.has_cts && !r.cancel_requested && r.expected.tag == outcome::pending) cancel_op(&r);
        break;
      case 14:  // drain: try_read until empty
        on_scheduler([&] { drain_buffered("drain"); });
        break;
      case 15:  // count()
        on_scheduler([&] {
          FUZZ_CHECK(reader_.count() == m_.items.size(), "count(): got %zu, model %zu", reader_.count(),
                     m_.items.size());
        });
        break;
    }
  }

  void cancel_op(op_record* r) {
    r->cancel_requested = true;
    m_.cancel(r);
    on_scheduler([r] { r->cts.cancel(); });
  }

  void drain_buffered(const char* what) {
    for (;;) {
      int v = -1;
      const auto expect = m_.read(v);
      std::string out;
      const bool ok = reader_.try_read(out);
      FUZZ_CHECK(ok == (expect == model::rr::taken), "%s: try_read got %d, model %d", what, ok,
                 expect == model::rr::taken);
      if (!ok) break;
      const int got = parse_item(out);
      FUZZ_CHECK(got == v, "%s: try_read got item %d, model %d", what, got, v);
      read_.push_back(got);
    }
  }

  void check_all(const char* when) {
    // With items still queued (after a lazy step), a resolved operation may not have resumed yet.
    const bool idle = sched_->ready_count() == 0;
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const op_record& r = ops_[i];
      if (!idle && r.real.tag == outcome::pending) continue;
      FUZZ_CHECK(r.real == r.expected, "%s: op #%zu %s(value %d, cts %d, cancel %d): got %s, model %s", when, i,
                 kind_name(r.kind), r.value, r.has_cts, r.cancel_requested, describe(r.real).c_str(),
                 describe(r.expected).c_str());
    }
    FUZZ_CHECK(real_dropped_ == m_.dropped, "%s: dropped items differ (got %zu, model %zu)", when,
               real_dropped_.size(), m_.dropped.size());
    if (ch_.valid())
      FUZZ_CHECK(ch_.reader().count() == m_.items.size(), "%s: count() %zu, model %zu", when,
                 ch_.reader().count(), m_.items.size());
  }

  /// Drops the last handles with operations still waiting: they fail with channel_closed
  /// ("destroyed", no inner error); buffered items are destroyed with the channel.
  void destroy_channel() {
    for (auto* q : {&m_.readers, &m_.writers, &m_.read_waiters, &m_.write_waiters}) {
      for (op_record* r : *q) model::resolve(r, {outcome::closed, -1});
      q->clear();
    }
    destroyed_ = std::vector<int>(m_.items.begin(), m_.items.end());
    m_.items.clear();
    on_scheduler([&] {
      ch_ = {};
      reader_ = {};
      writer_ = {};
    });
    check_all("after destroying the channel");
    for (auto& t : tasks_) FUZZ_CHECK(t.is_completed_successfully(), "an operation is still pending at the end");
  }

  void finish() {
    if (destroy_at_end_) {
      destroy_channel();
      account_for_every_item();
      return;
    }
    // Complete (if not yet), drain: nothing may stay pending, every item is accounted for.
    const bool expect = m_.try_complete(-1);
    on_scheduler([&] {
      const bool got = writer_.try_complete();
      FUZZ_CHECK(got == expect, "final try_complete: got %d, model %d", got, expect);
      drain_buffered("final drain");
    });
    check_all("at the end");
    FUZZ_CHECK(m_.done, "model not done after the final drain");
    for (auto& t : tasks_) FUZZ_CHECK(t.is_completed_successfully(), "an operation is still pending at the end");
    FUZZ_CHECK(reader_.completion().is_completed(), "completion() not completed at the end");
    account_for_every_item();
  }

  void account_for_every_item() {
    std::map<int, int> seen;
    for (int v : destroyed_) ++seen[v];
    for (int v : read_) ++seen[v];
    for (int v : real_dropped_) ++seen[v];
    for (int v : not_written_) ++seen[v];
    for (auto& r : ops_) {
      if ((r.kind == op_kind::read || r.kind == op_kind::next) && r.real.tag == outcome::ok) ++seen[r.real.v];
      if (r.kind == op_kind::write && r.real.tag != outcome::ok) ++seen[r.value];
    }
    for (int v : attempted_) {
      auto it = seen.find(v);
      FUZZ_CHECK(it != seen.end(), "item %d was lost (not read, dropped, drained, reported unwritten or destroyed)",
                 v);
      FUZZ_CHECK(it->second == 1, "item %d was accounted for %d times", v, it->second);
      seen.erase(it);
    }
    FUZZ_CHECK(seen.empty(), "item %d came out of the channel but was never written", seen.begin()->first);
  }

  input in_;
  model m_;
  tpl::channel<std::string> ch_;
  reader_t reader_;
  writer_t writer_;
  std::optional<tpl::testing::deterministic_scheduler> sched_;
  std::deque<op_record> ops_;  // stable addresses
  std::vector<tpl::task<>> tasks_;
  std::vector<int> attempted_, read_, not_written_, real_dropped_;
  int next_value_ = 0;
  int next_error_ = 1000;
  bool lazy_ = false;
  bool destroy_at_end_ = false;
  std::vector<int> destroyed_;  // buffered when the channel was destroyed
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  harness h(input{data, size});
  return h.run();
}
