// The I/O counters' registry and the per-thread routing of completions (io_counters.hpp).
#include "io_counters.hpp"

#include <algorithm>
#include <mutex>

#include "pool_impl.hpp"

namespace tpl::detail {

struct io_registry {
  std::mutex lock;
  io_engine_counters* head = nullptr;  // live blocks
  std::array<io_engine_stats, kIoKinds> retired{};  // totals of destroyed blocks

  static io_registry& get() {
    // Never destroyed: an engine (the process's io_uring engine, the socket engines) may outlive
    // static destruction.
    static io_registry* r = new io_registry;
    return *r;
  }

  static io_engine_stats sum(io_kind k) noexcept {
    io_registry& r = get();
    const std::lock_guard g(r.lock);
    io_engine_stats s = r.retired[static_cast<std::size_t>(k)];
    for (const io_engine_counters* c = r.head; c != nullptr; c = c->next_)
      if (c->kind() == k) c->add_to(s);
    return s;
  }

  static void add(io_engine_stats& to, const io_engine_stats& from) noexcept {
    to.completions += from.completions;
    to.wakeups += from.wakeups;
    to.events += from.events;
    to.largest_batch = std::max(to.largest_batch, from.largest_batch);
    for (std::size_t i = 0; i < io_batch_buckets; ++i) to.batch_sizes[i] += from.batch_sizes[i];
  }
};

namespace {

// The block of the engine thread running here, if any (bind_to_current_thread).
thread_local io_engine_counters* t_engine_counters = nullptr;

// Completions counted on threads that are neither pool workers nor engine threads. Several such
// threads may count at once, so these are real read-modify-writes.
std::array<std::atomic<std::uint64_t>, kIoKinds> g_unattributed{};

std::size_t index(io_kind k) noexcept { return static_cast<std::size_t>(k); }

}  // namespace

io_engine_counters::io_engine_counters(io_kind kind) noexcept : kind_(kind) {
  io_registry& r = io_registry::get();
  const std::lock_guard g(r.lock);
  next_ = r.head;
  if (next_ != nullptr) next_->prev_ = this;
  r.head = this;
}

io_engine_counters::~io_engine_counters() {
  io_registry& r = io_registry::get();
  const std::lock_guard g(r.lock);
  io_engine_stats mine;
  add_to(mine);
  io_registry::add(r.retired[index(kind_)], mine);
  if (prev_ != nullptr) prev_->next_ = next_;
  else r.head = next_;
  if (next_ != nullptr) next_->prev_ = prev_;
}

void io_engine_counters::bind_to_current_thread() noexcept { t_engine_counters = this; }

void io_engine_counters::add_to(io_engine_stats& s) const noexcept {
  // relaxed throughout: a snapshot for display while the engine thread keeps writing; untorn on
  // ARMv8 and x86 alike, and ordered with nothing (see bump_owned).
  s.completions += completions_.load(std::memory_order_relaxed);
  s.wakeups += wakeups_.load(std::memory_order_relaxed);
  s.events += events_.load(std::memory_order_relaxed);
  s.largest_batch = std::max(s.largest_batch, largest_.load(std::memory_order_relaxed));
  for (std::size_t i = 0; i < io_batch_buckets; ++i) s.batch_sizes[i] += batch_sizes_[i].load(std::memory_order_relaxed);
}

void count_io_completion(io_kind k) noexcept {
  if (thread_pool::impl::worker* w = thread_pool::impl::t_context.self) {
    bump_owned(w->io_completions[index(k)]);  // this thread is the worker, the only writer
    w->pool->maybe_emit_io_summary();
    return;
  }
  if (io_engine_counters* e = t_engine_counters; e != nullptr && e->kind() == k) {
    e->record_completion();  // this thread is the block's engine thread
    return;                  // the engine ticks after its batch
  }
  // relaxed: a statistic; several threads may count here, so the increment is an atomic RMW (LDADD
  // or an LDXR/STXR loop on ARMv8, LOCK XADD on x86), and nothing is published through it, so it
  // needs no ordering on either.
  g_unattributed[index(k)].fetch_add(1, std::memory_order_relaxed);
  io_summary_tick();
}

void io_summary_tick() noexcept {
  // acquire: pairs with default_pool()'s release store, so the impl it points to is seen built. On
  // ARMv8 this is an LDAR (a relaxed LDR could see the pointer before the pool's fields); on x86
  // every load is an acquire and this only restrains the compiler.
  if (thread_pool::impl* p = thread_pool::impl::default_impl.load(std::memory_order_acquire)) p->maybe_emit_io_summary();
}

io_engine_stats engine_io_totals(io_kind k) noexcept {
  io_engine_stats s = io_registry::sum(k);
  // relaxed: a statistic, read untorn; it orders nothing (as above).
  s.completions += g_unattributed[index(k)].load(std::memory_order_relaxed);
  return s;
}

}  // namespace tpl::detail
