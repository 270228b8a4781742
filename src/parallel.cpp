// The non-template half of tpl::parallel: loop control (stop / break / errors), blocking loops'
// helpers and waiting, asynchronous loops' budget and completion.
#include "tpl/parallel.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "tpl/detail/cpu_count.hpp"
#include "tpl/detail/futex.hpp"
#include "tpl/sync/spin_wait.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl::detail {

namespace {
/// Largest chunk a blocking loop's worker claims at once (guided schedule: remaining / (4 x
/// workers), so chunks shrink towards the end and the workers finish together).
constexpr std::uint64_t kMaxSyncChunk = 1u << 16;
constexpr std::uint64_t kSyncChunkDivisorPerWorker = 4;
/// spin_once() steps the caller of a blocking loop spins for its helpers before it sleeps.
constexpr int kHelperWaitSpins = spin_wait::yield_threshold;
}  // namespace

// ---- loop control -----------------------------------------------------------------------------

void loop_control::stop() {
  // acq_rel: orders with a concurrent break_at() so that exactly one of the two sees the other.
  const std::uint32_t before = flags.fetch_or(kStopped, std::memory_order_acq_rel);
  if ((before & kBroken) != 0) {
    flags.fetch_and(~kStopped, std::memory_order_acq_rel);  // acq_rel: as above
    throw invalid_operation("tpl: parallel_loop_state::stop() after break_() in the same loop");
  }
}

void loop_control::break_at(std::uint64_t offset) {
  // acquire: see a concurrent stop().
  if ((flags.load(std::memory_order_acquire) & kStopped) != 0)
    throw invalid_operation("tpl: parallel_loop_state::break_() after stop() in the same loop");
  // relaxed: the minimum only needs atomicity; readers are advisory until the loop ends, and the
  // loop's end (helpers' acq_rel decrement, the caller's acquire) publishes the final value.
  std::uint64_t cur = lowest_break.load(std::memory_order_relaxed);
  while (offset < cur && !lowest_break.compare_exchange_weak(cur, offset, std::memory_order_relaxed)) {
  }
  // acq_rel: after the minimum (a worker seeing kBroken usually sees it too; see must_exit).
  const std::uint32_t before = flags.fetch_or(kBroken, std::memory_order_acq_rel);
  if ((before & kStopped) != 0) throw invalid_operation("tpl: parallel_loop_state::break_() after stop() in the same loop");
}

void loop_control::fail(std::exception_ptr e) {
  {
    std::lock_guard g(errors_lock);
    errors.push_back(std::move(e));
  }
  // relaxed: advisory (must_exit); the errors themselves are published by the lock.
  flags.fetch_or(kExceptional, std::memory_order_relaxed);
}

scheduler& loop_scheduler(const parallel_options& o) noexcept {
  return o.scheduler != nullptr ? *o.scheduler : thread_pool::default_pool();
}

std::uint64_t loop_degree(const parallel_options& o, bool blocking) {
  const int d = o.max_degree_of_parallelism;
  if (d < -1)
    throw std::invalid_argument("tpl: parallel_options::max_degree_of_parallelism must be positive, 0 (default) or "
                                "-1 (unlimited); got " + std::to_string(d));
  if (d == -1) return std::numeric_limits<std::uint64_t>::max();
  if (d > 0) return static_cast<std::uint64_t>(d);
  if (blocking) {
    auto* pool = dynamic_cast<thread_pool*>(&loop_scheduler(o));
    const unsigned threads = pool != nullptr ? pool->thread_count() : detail::available_cpus();
    return static_cast<std::uint64_t>(threads == 0 ? 1 : threads) + 1;  // + the caller
  }
  const unsigned cores = detail::available_cpus();
  return cores == 0 ? 1 : cores;
}

void start_worker(scheduler& s, loop_worker w) {
  try {
    s.schedule(w.handle);
  } catch (...) {
    w.handle.destroy();
    throw;
  }
}

// ---- blocking loops -----------------------------------------------------------------------------

namespace {
loop_worker sync_helper(std::shared_ptr<sync_loop> loop) {
  loop->helper_main();
  co_return;
}
}  // namespace

void sync_loop::maybe_start_helper() {
  // relaxed loads: hints; the decrement below is what reserves a helper slot.
  if (done.load(std::memory_order_relaxed) || next.load(std::memory_order_relaxed) >= count) return;
  std::uint64_t left = helpers_left.load(std::memory_order_relaxed);
  do {
    if (left == 0) return;
    // relaxed: only the count matters; the helper reaches the loop through the shared_ptr.
  } while (!helpers_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed));
  try {
    start_worker(*sched, sync_helper(shared_from_this()));
  } catch (...) {
    // The loop goes on without this helper: the caller does the work itself.
  }
}

void sync_loop::helper_main() {
  // seq_cst (with `done` below and in run()): either the caller sees us active and waits, or we
  // see it done and leave without touching the body.
  active.fetch_add(1, std::memory_order_seq_cst);
  if (!done.load(std::memory_order_seq_cst)) {
    maybe_start_helper();
    work();
  }
  // acq_rel: our iterations (and errors) happen before the caller's acquire of 0.
  if (active.fetch_sub(1, std::memory_order_acq_rel) == 1) futex_wake_all(&active);
}

void sync_loop::work() {
  const std::uint64_t divisor = kSyncChunkDivisorPerWorker * (workers == 0 ? 1 : workers);
  for (;;) {
    if (token.is_cancellation_requested()) {
      // relaxed: advisory; the caller reads flags after synchronising with every helper.
      control.flags.fetch_or(loop_control::kCanceled, std::memory_order_relaxed);
      return;
    }
    // relaxed: the guess only sizes the chunk; fetch_add hands out each index exactly once.
    const std::uint64_t seen = next.load(std::memory_order_relaxed);
    if (seen >= count) return;
    const std::uint64_t chunk = std::max<std::uint64_t>(1, std::min((count - seen) / divisor, kMaxSyncChunk));
    const std::uint64_t b = next.fetch_add(chunk, std::memory_order_relaxed);  // relaxed: as above
    if (b >= count) return;
    const std::uint64_t e = count - b < chunk ? count : b + chunk;
    if (control.must_exit(b)) return;
    try {
      run_range(ctx, *this, b, e);
    } catch (...) {
      control.fail(std::current_exception());
      return;
    }
  }
}

parallel_loop_result sync_loop::run() {
  // relaxed: published to helpers by scheduling them (the queue hand-over synchronises).
  helpers_left.store(workers - 1, std::memory_order_relaxed);
  maybe_start_helper();
  work();
  // seq_cst: see helper_main().
  done.store(true, std::memory_order_seq_cst);
  if (active.load(std::memory_order_seq_cst) != 0) {
    spin_wait sw;
    // acquire: pairs with the helpers' acq_rel decrements.
    for (int i = 0; i < kHelperWaitSpins && active.load(std::memory_order_acquire) != 0; ++i) sw.spin_once();
    if (active.load(std::memory_order_acquire) != 0) {
      // Helpers inside a chunk are running, so this wait ends even if the pool refuses to count
      // us as blocked (the region's constructor may throw on such a scheduler): wait regardless,
      // since helpers still use the body on our stack.
      std::optional<blocking_region> blocked;
      try {
        blocked.emplace();
      } catch (...) {
      }
      for (std::uint32_t a; (a = active.load(std::memory_order_acquire)) != 0;) futex_wait(&active, a);
    }
  }
  {
    std::lock_guard g(control.errors_lock);
    if (!control.errors.empty()) throw aggregate_exception(std::move(control.errors));
  }
  // relaxed: every helper's updates were acquired through `active` above.
  const std::uint32_t f = control.flags.load(std::memory_order_relaxed);
  if ((f & loop_control::kCanceled) != 0) throw operation_canceled();
  parallel_loop_result r;
  r.is_completed = (f & (loop_control::kStopped | loop_control::kBroken)) == 0;
  if ((f & loop_control::kBroken) != 0) {
    const std::uint64_t lb = control.lowest_break.load(std::memory_order_relaxed);  // relaxed: as above
    r.lowest_break_iteration = static_cast<std::int64_t>(static_cast<std::uint64_t>(report_from) + lb);
  }
  return r;
}

// ---- asynchronous loops -------------------------------------------------------------------------

namespace {
cancellation_token_source make_loop_source(const cancellation_token& external) {
  if (external.can_be_canceled()) return cancellation_token_source::create_linked(external);
  return cancellation_token_source();
}
}  // namespace

async_loop_core::async_loop_core(const parallel_options& o, std::uint64_t /*degree*/)
    : external(o.token), source(make_loop_source(o.token)), token(source.token()), sched(&loop_scheduler(o)) {}

bool async_loop_core::take_worker_slot() noexcept {
  // relaxed: the budget only needs atomicity; workers reach the loop through the shared_ptr.
  std::uint64_t left = workers_left.load(std::memory_order_relaxed);
  do {
    if (left == 0) return false;
  } while (!workers_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed));
  return true;
}

void async_loop_core::give_back_worker_slot() noexcept {
  // relaxed: as take_worker_slot.
  workers_left.fetch_add(1, std::memory_order_relaxed);
}

void async_loop_core::fail(std::exception_ptr e) {
  {
    std::lock_guard g(errors_lock);
    errors.push_back(std::move(e));
  }
  try {
    source.cancel();  // the other bodies see their token canceled; no new body starts
  } catch (const aggregate_exception& callbacks) {
    std::lock_guard g(errors_lock);
    errors.insert(errors.end(), callbacks.inner_exceptions().begin(), callbacks.inner_exceptions().end());
  }
}

void async_loop_core::worker_finished() noexcept {
  // acq_rel: the last worker must see every other worker's errors and effects.
  if (running.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::vector<std::exception_ptr> faults;
  bool any_canceled = false;
  {
    std::lock_guard g(errors_lock);
    for (auto& e : errors) {
      if (is_operation_canceled(e))
        any_canceled = true;
      else
        faults.push_back(e);
    }
  }
  try {
    if (!faults.empty())
      result.set_exception(std::move(faults));
    else if (any_canceled || external.is_cancellation_requested())
      result.set_canceled();
    else
      result.set_result();
  } catch (...) {
    // Allocation failure while building the fault: report it rather than hang the awaiter.
    result.try_set_exception(std::current_exception());
  }
}

}  // namespace tpl::detail
