// The engine thread and its batch hand-off to the thread pool (.NET's SocketAsyncEngine.Unix,
// after dotnet/runtime#35330). See socket_engine.hpp for the seam with socket_context.
//
// Each engine is one thread blocked in its readiness source (readiness_source.hpp): epoll by
// default (epoll_source.cpp: sockets registered once, edge-triggered, for EPOLLIN | EPOLLOUT |
// EPOLLRDHUP), or io_uring multishot polls with TPL_IO_ENGINE=io_uring (uring_source.cpp). The
// kernel reports a change of readiness once, and the socket's context keeps what it means (a
// sequence number per direction, socket_context.hpp). The engine only hands the batches over.
//
// Hand-off (default mode). One wait of the source returns a batch of events. The engine thread appends them
// all to its ready queue (a ring under a mutex; each entry holds a reference to its target) and
// then, unless an item is already requested, queues ONE work item on the pool. That item clears
// `processing_requested`, claims one event and, if more remain queued behind it (seen in the same
// locked pop), requests a helper (a copy of itself) unless one is requested; then it handles events
// one at a time until the queue is empty or its time slice is over (then it requests a helper
// before it returns). A lone event thus costs one pool item, not two: the helper exists so that
// events already queued do not wait behind a handler that blocks, and an event pushed later is
// covered by the engine's own request (next paragraph). The batch is thus spread over as many
// workers as are free, Parallel.For style, without one pool item per event, which contended the
// pool's queues and fed back into hill climbing. The items are coroutines ("runners") that park on
// the engine's idle list after each run and are queued again from there, so a steady load queues
// them without allocating; there are never more runners than items that ran at once.
//
// Why no event is left in the queue with no item coming. Invariant: while processing_requested is
// true, an item is queued that has not yet cleared it, and that item clears it *before* it pops.
// The engine pushes under the mutex and then exchanges the flag to true; an item clears the flag
// (seq_cst) and then pops under the mutex. If an item's pop took the mutex before the engine's
// push, that item's clear happens-before the engine's exchange, which therefore reads false (and
// queues an item) or a later true whose item clears and pops later still. Otherwise the pop comes
// after the push and sees the event. Either way someone pops it; an item that pops one event of
// several requests a helper for the rest, so a handler that blocks strands none of them.
// tests/net/net_model_batch_test.cpp checks this in every interleaving (handlers that block for
// good included), with known-bad variants: the flag cleared after the pop, no helper at all.
//
// Why no readiness is lost between the engine and an operation: socket_context.hpp (an operation
// reads its direction's sequence number before its syscall and registers as waiting only if the
// number has not moved; the handler bumps the number under the same lock that guards the waiting
// slot), checked by tests/net/net_model_readiness_test.cpp.
//
// Lent poll duty (default mode, epoll): after queuing a batch and before requesting processing, the
// engine thread lends its polling to the batch items and sleeps (poll_duty.hpp states the protocol
// and its invariants). A batch item whose queue runs dry takes the duty and polls the source
// without blocking for up to its poll window (TPL_SOCKETS_POLL_WINDOW_US, default 50 us; 0 turns
// the lending off); events it finds it queues exactly as the engine does (push,
// then a helper if more than one), lends the duty again and handles them; with nothing in its
// window, or work queued for its worker, it leaves the duty lent to a batch item already queued,
// or, with none queued, gives it back and wakes the engine. So a
// connection answering within the window costs no wake-up of the engine thread nor a hand-off
// between threads. A worker about to block takes a lent duty back for the engine (the pool's
// blocking hook, io_hooks.hpp); the engine's watchdog covers handlers that block unseen.
// tests/net/net_model_poll_duty_test.cpp checks this together with the hand-off above.
//
// Inline completions (TPL_SOCKETS_INLINE_COMPLETIONS=1): the engine thread calls on_readiness
// itself, so continuations run on the engine thread (.NET's experimental
// DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS). One hop less, but a continuation that blocks
// stalls every socket of that engine, and one that waits for another socket of the same engine
// deadlocks it. docs/io.md says the same. After a batch with socket events an inline engine polls
// its source without blocking for up to kInlineBusyPoll before it blocks again (busy_poll()), so
// a peer's next request finds the thread awake instead of costing a wake-up. A pool-mode engine
// does not: measured on two cores, its polling competed with the spinning worker and the client.
//
// Counters (docs/io.md, "Statistics, events and tracing"): each engine owns an io_engine_counters
// block (src/thread_pool/io_counters.hpp), written by whoever holds its poll duty (the engine
// thread, or a batch item polling with the lent duty: one at a time, each hand-over a
// release/acquire pair, so the block keeps one writer at a time). The holder records a
// wake-up and its batch size before it hands the batch on (inside queue_lock, or before the
// inline handling), so whoever sees a completion of that batch also sees the wake-up counted.
// Completions are counted by socket_context::drive on the thread that handles the event. After
// each wake-up the engine lets the default pool send its io_summary event, if one is due.
//
// Lifetime: the source keeps a reference to each attached target until, after detach(), no batch
// can name it; it drops it in end_batch(), after the engine has queued (with their own references)
// every event of the batch, so an event returned just before the detach still finds its target
// alive. Engines are never destroyed (like the default pool): their threads end with the process.
//
// Choosing the source: TPL_IO_ENGINE=io_uring asks for io_uring (as for files and pipes); where
// the ring is refused (seccomp, kernel.io_uring_disabled, tpl built without liburing) every engine
// uses epoll and socket_engine_fallback_reason() says why.
#include "socket_engine.hpp"

#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstdio>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tpl/detail/detached.hpp"
#include "../thread_pool/io_counters.hpp"
#include "../thread_pool/io_hooks.hpp"
#include "accept.hpp"
#include "poll_duty.hpp"
#include "readiness_source.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/net/socket_stats.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl::net::detail {

namespace {

/// Room for parked batch items reserved up front (more grow the list once).
constexpr std::size_t kRunnersReserved = 64;
/// A batch item hands on to a helper after this long, so one item does not hold a worker
/// through an endless stream of events (.NET's EventQueueProcessingTimeSliceMs is 15 as well).
constexpr auto kBatchTimeSliceMs = std::chrono::milliseconds(15);
/// How long an inline engine polls without blocking after a batch with socket events (Go's
/// scheduler polls the network the same way while it spins): the next request of a ping-pong
/// peer then needs no wake-up of a sleeping thread. The same bound as a pool worker's spin.
constexpr auto kInlineBusyPoll = std::chrono::microseconds(50);

/// socket_stats()'s figures that are not the engine threads' own (those are in each engine's
/// io_engine_counters block).
struct counters_t {
  std::atomic<std::uint64_t> batch_items{0};
  std::atomic<std::uint64_t> busy_poll_batches{0};
  std::atomic<std::uint64_t> lent_poll_batches{0};
  std::atomic<std::uint64_t> duty_reclaims{0};
  std::atomic<unsigned> engine_count{0};
  std::atomic<bool> inline_completions{false};
  std::atomic<bool> io_uring{false};
  std::atomic<unsigned> poll_window_us{0};
};
counters_t g_counters;

/// A FIFO ring that grows (never shrinks), so a steady load allocates nothing. Not thread-safe:
/// the engine's queue_lock guards it.
class ready_ring {
 public:
  void push(ready_event e) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = e;
    ++count_;
  }
  bool empty() const noexcept { return count_ == 0; }
  bool pop(ready_event& e) noexcept {
    if (count_ == 0) return false;
    e = slots_[head_];
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
    return true;
  }

 private:
  void grow() {
    std::vector<ready_event> bigger(slots_.empty() ? 256 : slots_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = slots_[(head_ + i) & (slots_.size() - 1)];
    slots_ = std::move(bigger);
    head_ = 0;
  }
  std::vector<ready_event> slots_;
  std::size_t head_ = 0, count_ = 0;
};

}  // namespace

class socket_engine {
 public:
  socket_engine(bool inline_completions, std::chrono::microseconds poll_window, std::unique_ptr<readiness_source> source)
      : inline_(inline_completions),
        lendable_(!inline_completions && poll_window.count() > 0 && source->lendable()),
        poll_window_(poll_window),
        source_(std::move(source)) {
    batch_.reserve(readiness_source::kMaxBatch);
    idle_runners_.reserve(kRunnersReserved);
    thread_ = std::thread([this] { run(); });
  }

  void attach(int fd, readiness_target* t) { source_->attach(fd, t); }
  void detach(int fd, readiness_target* t) noexcept { source_->detach(fd, t); }

  /// One batch item (the first or a helper): claims events one at a time; with the poll duty
  /// lent (see "Lent poll duty" in the file header), polls for more once the queue is empty.
  void process_events() noexcept {
    g_counters.batch_items.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    // seq_cst: must precede this item's pop in the order the engine's exchange sees (file header).
    processing_requested_.store(false, std::memory_order_seq_cst);
    ready_event ev;
    bool more = false;
    if (!pop(ev, more) && !poll_lent(ev, more)) return;
    if (more) request_processing();
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      ev.target->on_readiness(ev.bits);
      ev.target->release();
      // One slice for everything this item handles, polled batches included: under a steady
      // stream it still returns its worker to the pool's other work every slice.
      if (std::chrono::steady_clock::now() - start >= kBatchTimeSliceMs) break;
      if (!pop(ev, more)) {  // the loop's pops request no helper (the model checks it)
        if (!poll_lent(ev, more)) return;
        if (more) request_processing();  // this item queued them: the engine's push-then-request
      }
    }
    request_processing();  // events remain: someone must come for them
  }

  // Before a pool worker blocks (io_hooks.hpp): a lent duty goes back to the engine thread now,
  // so readiness is not left for the blocked handler's item to poll.
  void reclaim_lent() noexcept {
    if (duty_.reclaim()) g_counters.duty_reclaims.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
  }

 private:
  bool pop(ready_event& ev, bool& more) noexcept {
    std::lock_guard g(queue_lock_);
    const bool got = ready_.pop(ev);
    more = !ready_.empty();
    return got;
  }

  void request_processing() noexcept {
    // seq_cst: pairs with the item's clear-then-pop (file header); exchange so only one item is
    // queued per clear.
    if (processing_requested_.exchange(true, std::memory_order_seq_cst)) return;
    std::coroutine_handle<> runner;
    {
      std::lock_guard g(runners_lock_);
      if (!idle_runners_.empty()) {
        runner = idle_runners_.back();
        idle_runners_.pop_back();
      }
    }
    if (runner)
      thread_pool::default_pool().schedule(runner);
    else
      start_runner(this);
  }

  /// A batch item that is reused: after each run it parks itself on idle_runners_ (there are never
  /// more than the batch items that ran at once), so queuing one allocates nothing once warm.
  struct park_runner {
    socket_engine* engine;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const noexcept {
      std::lock_guard g(engine->runners_lock_);
      try {
        engine->idle_runners_.push_back(h);
      } catch (...) {
        // No memory to park it: this runner stays suspended for good (a frame lost, not work:
        // request_processing starts a new one when the list is empty).
      }
    }
    void await_resume() const noexcept {}
  };

  static tpl::detail::detached start_runner(socket_engine* self) noexcept {
    co_await resume_on(thread_pool::default_pool());
    for (;;) {
      self->process_events();
      co_await park_runner{self};
    }
  }

  // Queues a batch's events (each with its own reference) on the ready ring and counts the
  // wake-up; returns how many were queued. Called by the poll duty's holder.
  std::size_t queue_batch() noexcept {
    std::size_t queued = 0;
    std::lock_guard g(queue_lock_);
    for (const ready_event& e : batch_) {
      e.target->add_ref();
      try {
        ready_.push(e);
      } catch (...) {
        // No memory to queue the event: the socket's operations wait for its next edge, which
        // is the best the engine can do; the reference goes back.
        e.target->release();
        continue;
      }
      ++queued;
    }
    // Counted before the unlock: a helper already running may take these events at once.
    if (queued != 0) io_.record_wakeup(queued);
    return queued;
  }

  // A batch item whose queue ran dry: if the engine has lent its poll duty, takes it and polls
  // the source without blocking for up to poll_window_. True with ev (and `more`) popped from
  // what it found and the duty lent again, for the caller to handle; false with the duty given
  // back to the engine thread (nothing came) or never taken.
  bool poll_lent(ready_event& ev, bool& more) noexcept {
    if (!lendable_) return false;
    const auto until = std::chrono::steady_clock::now() + poll_window_;
    for (;;) {
      if (!duty_.try_take()) return false;  // the engine polls, or another item (which answers for what comes)
      for (;;) {
        batch_.clear();
        source_->poll(batch_);
        const std::size_t queued = batch_.empty() ? 0 : queue_batch();
        source_->end_batch();
        if (queued != 0) break;
        if (std::chrono::steady_clock::now() >= until || tpl::detail::current_worker_has_queued_work()) {
          // Nothing came (poll_duty.hpp, invariant 5): a queued batch item takes the duty over;
          // with none, the engine thread polls again. seq_cst: the load half of that Dekker pair.
          duty_.leave();
          if (!processing_requested_.load(std::memory_order_seq_cst)) duty_.reclaim();
          return false;
        }
        // Between polls, the CPU goes to whatever else is runnable on it (sched_yield): a client
        // (or any thread) sharing this CPU runs and sends the next request instead of waiting
        // for the window to end; with nothing else there the yield returns at once and this is
        // a plain poll loop.
        std::this_thread::yield();
      }
      // release: publishes the wake-up queue_batch() just recorded for this batch, so that a
      // socket_stats() that reads this count (acquire) reads at least as many wake-ups.
      g_counters.lent_poll_batches.fetch_add(1, std::memory_order_release);
      tpl::detail::io_summary_tick();
      duty_.relend();  // never held across a handler (poll_duty.hpp, invariant 3)
      if (pop(ev, more)) return true;
      // A running item took them all before the duty was lent again; it may have found the duty
      // still held and ended, so this item takes it again rather than leave it lent with nobody
      // to take it (invariant 3).
    }
  }

  // Inline engines only: after a batch with socket events, polls the source without blocking
  // for up to kInlineBusyPoll; true with batch_ holding what the kernel reported, false when
  // nothing came (the caller then blocks in wait()).
  bool busy_poll() noexcept {
    const auto until = std::chrono::steady_clock::now() + kInlineBusyPoll;
    do {
      batch_.clear();
      source_->poll(batch_);
      if (!batch_.empty()) {
        // relaxed: a statistic.
        g_counters.busy_poll_batches.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      source_->end_batch();  // an empty poll is a batch too: it may have taken a retirement wake-up
      TPL_CPU_RELAX();
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }

  void run() noexcept {
    io_.bind_to_current_thread();  // completions handled inline are counted in io_
    bool was_busy = false;
    for (;;) {
      if (!(inline_ && was_busy && busy_poll())) {
        batch_.clear();
        source_->wait(batch_);  // every target named stays alive until end_batch()
      }
      const std::size_t socket_events = batch_.size();
      std::size_t queued = 0;
      if (inline_) {
        if (socket_events != 0) io_.record_wakeup(socket_events);
        for (const ready_event& e : batch_) e.target->on_readiness(e.bits);
      } else if (socket_events != 0) {
        queued = queue_batch();
      }
      if (socket_events != 0) tpl::detail::io_summary_tick();
      was_busy = socket_events != 0;
      source_->end_batch();
      if (queued == 0) continue;
      if (!lendable_) {
        request_processing();
        continue;
      }
      // Lent before the request (poll_duty.hpp, invariant 2): the item requested, or one already
      // queued, finds the duty lent when its queue runs dry.
      duty_.lend();
      request_processing();
      if (duty_.sleep_while_lent()) g_counters.duty_reclaims.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    }
  }

  const bool inline_;
  const bool lendable_;  // hands its poll duty to the batch items (pool mode, a lendable source, a window)
  const std::chrono::microseconds poll_window_;  // how long a batch item holding the duty polls
  // This engine thread's wake-ups, batch sizes and inline completions (the thread is the only
  // writer); registered for thread_pool_stats::io and socket_stats() while the engine lives.
  tpl::detail::io_engine_counters io_{tpl::detail::io_kind::socket};
  std::unique_ptr<readiness_source> source_;
  std::vector<ready_event> batch_;  // the engine thread's; reserved for a whole batch
  std::thread thread_;
  std::mutex queue_lock_;
  ready_ring ready_;
  std::atomic<bool> processing_requested_{false};
  poll_duty duty_;  // who polls the source (lendable_ engines only)
  std::mutex runners_lock_;
  std::vector<std::coroutine_handle<>> idle_runners_;  // parked batch items, ready to be queued
};

namespace {

struct engine_set {
  engine_config config;
  std::vector<socket_engine*> engines;  // never freed: the engines live as long as the process
  std::atomic<unsigned> next{0};
  std::string fallback_reason;  // why io_uring was asked for and not used; written before publication
};

// The complete set, for the pool's blocking hook (null until engines() has built it).
std::atomic<engine_set*> g_engine_set{nullptr};

void reclaim_lent_duties() noexcept {
  // acquire: the set (and its engines) as engines() built them.
  if (engine_set* s = g_engine_set.load(std::memory_order_acquire))
    for (socket_engine* e : s->engines) e->reclaim_lent();
}

engine_set& engines() {
  static engine_set* set = [] {
    auto* s = new engine_set;
    s->config = engine_config_from_environment();
    // Once a ring is refused the remaining engines use epoll too (a later refusal, a locked-memory
    // limit say, leaves the first engines on io_uring: each socket works on either).
    bool use_uring = s->config.io_uring;
    for (unsigned i = 0; i < s->config.engine_count; ++i) {
      std::unique_ptr<readiness_source> source;
      if (use_uring) {
        source = make_uring_source(&s->fallback_reason);
        use_uring = source != nullptr;
      }
      if (!source) source = make_epoll_source();
      s->engines.push_back(new socket_engine(s->config.inline_completions,
                                             std::chrono::microseconds(s->config.poll_window_us), std::move(source)));
    }
    // relaxed: display only.
    g_counters.inline_completions.store(s->config.inline_completions, std::memory_order_relaxed);
    g_counters.engine_count.store(s->config.engine_count, std::memory_order_relaxed);
    g_counters.poll_window_us.store(s->config.poll_window_us, std::memory_order_relaxed);
    g_counters.io_uring.store(use_uring, std::memory_order_relaxed);
    // release: publishes the complete set to reclaim_lent_duties (its acquire load).
    g_engine_set.store(s, std::memory_order_release);
    tpl::detail::set_worker_blocking_hook(&reclaim_lent_duties);
    return s;
  }();
  return *set;
}

}  // namespace


socket_engine& engine_for_new_socket() {
  engine_set& s = engines();
  if (s.engines.size() == 1) return *s.engines.front();
  // relaxed: only spreads sockets over engines; any interleaving is a valid assignment.
  return *s.engines[s.next.fetch_add(1, std::memory_order_relaxed) % s.engines.size()];
}

void engine_attach(socket_engine& e, int fd, readiness_target* t) { e.attach(fd, t); }
void engine_detach(socket_engine& e, int fd, readiness_target* t) noexcept { e.detach(fd, t); }


}  // namespace tpl::net::detail

namespace tpl::net {

socket_engine_stats socket_stats() noexcept {
  using detail::g_counters;
  socket_engine_stats s;
  // acquire, and read before the engines' counters: every lent batch counted was recorded as a
  // wake-up before its count (release, in poll_lent), so the snapshot never shows more lent
  // batches than wake-ups, even while an item is polling.
  s.lent_poll_batches = g_counters.lent_poll_batches.load(std::memory_order_acquire);
  const io_engine_stats io = tpl::detail::engine_io_totals(tpl::detail::io_kind::socket);
  s.engine_wakeups = io.wakeups;
  s.events = io.events;
  s.largest_batch = io.largest_batch;
  // relaxed: a snapshot for display, not a consistent cut (but for the one above).
  s.engine_count = g_counters.engine_count.load(std::memory_order_relaxed);
  s.inline_completions = g_counters.inline_completions.load(std::memory_order_relaxed);
  s.io_uring = g_counters.io_uring.load(std::memory_order_relaxed);
  s.poll_window_us = g_counters.poll_window_us.load(std::memory_order_relaxed);
  s.batch_items = g_counters.batch_items.load(std::memory_order_relaxed);
  s.busy_poll_batches = g_counters.busy_poll_batches.load(std::memory_order_relaxed);
  s.duty_reclaims = g_counters.duty_reclaims.load(std::memory_order_relaxed);
  s.accept_backoffs = detail::g_accept_backoffs.load(std::memory_order_relaxed);
  return s;
}

std::string socket_engine_fallback_reason() { return detail::engines().fallback_reason; }

std::string to_string(const socket_engine_stats& s) {
  char buf[352];
  std::snprintf(buf, sizeof buf,
                "tpl-sockets engines=%u source=%s inline=%d poll_window_us=%u wakeups=%llu events=%llu batch_items=%llu largest_batch=%llu "
                "accept_backoffs=%llu busy_poll_batches=%llu lent_poll_batches=%llu duty_reclaims=%llu",
                s.engine_count, s.io_uring ? "io_uring" : "epoll", s.inline_completions ? 1 : 0, s.poll_window_us,
                static_cast<unsigned long long>(s.engine_wakeups),
                static_cast<unsigned long long>(s.events), static_cast<unsigned long long>(s.batch_items),
                static_cast<unsigned long long>(s.largest_batch), static_cast<unsigned long long>(s.accept_backoffs),
                static_cast<unsigned long long>(s.busy_poll_batches), static_cast<unsigned long long>(s.lent_poll_batches),
                static_cast<unsigned long long>(s.duty_reclaims));
  return buf;
}

}  // namespace tpl::net
