// The io_uring engine: one ring, submitted to under a short lock by the threads that start
// operations, reaped by a dedicated completion thread blocking in io_uring_wait_cqe, which
// resumes each finished operation's coroutine by queuing it to the default thread pool.
//
// The hand-off protocol (tests/model_io_uring_test.cpp checks it exhaustively)
// ---------------------------------------------------------------------------
// Each io_op carries `flags`: SUBMITTED, OP_DONE, CANCEL_SUBMITTED, CANCEL_DONE, NOT_STARTED.
// The kernel names an operation only by its user_data: &op for the operation's own CQE, &op|1
// for the CQE of a cancel aimed at it. The op's memory (in the awaiting coroutine's frame) must
// stay valid until every CQE naming it has been reaped, and the coroutine resumed exactly once.
//
//   start (the awaiting thread): registers the token callback, then under the ring lock: if
//     NOT_STARTED is set (a cancel came first) or the engine is stopping, it does not submit and
//     resumes at once with -ECANCELED; else it queues the SQE, sets SUBMITTED and counts the op
//     in `in_flight_`, and never touches the op again (it may complete on another thread at once).
//   cancel (token callback, or close() of a stream; under the ring lock): if not SUBMITTED, sets
//     NOT_STARTED (start, which takes the same lock, sees it); else CASes CANCEL_SUBMITTED in
//     unless OP_DONE is already set, and only if the CAS won queues an IORING_OP_ASYNC_CANCEL
//     whose CQE carries &op|1. A cancel that finds OP_DONE does nothing: no CQE will name the op.
//   completion thread, the op's CQE: stores the result, fetch_or(OP_DONE); resumes the op if the
//     value it read has no CANCEL_SUBMITTED, or has CANCEL_DONE too. The cancel's CQE:
//     fetch_or(CANCEL_DONE); resumes the op if OP_DONE was set. The two CQEs come in either order
//     (the kernel posts a successful cancel's CQE before the canceled operation's). Both are
//     handled on this one thread, and the canceler's CAS and the reaper's fetch_or are
//     read-modify-writes on one word, so exactly one handler finds the other's bit (or finds no
//     cancel at all): the op is resumed once, after its last CQE.
//   resume: in_flight_ drops by one, then the coroutine is queued to the pool; there it resets the
//     token registration, which waits for a callback still running on another thread, so no
//     cancel can touch the op after its frame moves on.
// Shutdown: under the ring lock `stopping_` is set (later starts resume at once with
// operation_aborted) and one IORING_ASYNC_CANCEL_ANY cancel is queued, which aborts every
// operation still waiting in the kernel (a read on an empty pipe) and wakes the completion thread.
// That thread leaves only once it has seen the stop and `in_flight_` is 0: the in_flight_
// increment of every submitted op happens under the lock before the stop is set, so the thread
// cannot miss one, and every submitted op completes (files finish, waiting ones are canceled).
// The destructor then waits, under `alive_mutex_`, until every operation that entered suspend()
// has left complete(): a resumed coroutine still calls complete() and may still run its token
// callback, both on this engine. Shutdown therefore drains and never hangs.
//
// Counters (thread_pool_stats::io.uring): the completion thread owns an io_engine_counters block
// (src/thread_pool/io_counters.hpp) and is its only writer. A wake-up is io_uring_wait_cqe
// returning with CQEs; its batch is the CQEs ready then (all reaped in that round, none of a later
// one). Each resumption counts a completion before the coroutine is queued, so whoever awaits the
// operation sees it counted; the wake-up is counted before the first of its resumptions.
//
// Submission failures: SQEs are queued into the shared ring before io_uring_submit; if that call
// fails (EBUSY/EAGAIN while the completion queue is full), the SQEs stay in the ring and the
// completion thread submits them after it has reaped, so none is lost.
//
// Reads from the page cache (ready(), before any of the above): a file read first tries
// preadv2(RWF_NOWAIT) on the calling thread, which returns the data when all of it is cached and
// EAGAIN instead of waiting for the disk. All of it (or 0 at the end of the file) completes the
// read there, as a socket's receive completes when data is waiting: no SQE, no completion thread,
// no hop to the pool. Anything else (EAGAIN, a part of the range, an error, a kernel or file
// system without RWF_NOWAIT) goes to the ring as above, where the read starts again from its
// offset into the same buffer, so the result is exactly the ring's. The fast path touches nothing
// the hand-off protocol uses (the op never reaches suspend()), and it is skipped for a closed
// handle or a canceled token, which suspend() reports.
//
// Writes and flushes (ready() and suspend(), before any of the above): a file write first tries
// pwritev2(RWF_NOWAIT) on the calling thread, and completes there with what the kernel took (the
// caller's loop writes the rest). What the kernel cannot write without waiting, and every
// fsync/fdatasync, the ring could only hand to one of the kernel's io-wq worker threads, whose
// wake-up, plus the completion thread's and the hop back to the pool, cost more than the call
// itself when the pages are in memory (docs/io.md has the figures). Those run as the pool engine
// runs them instead: on the pool worker that started them, inside a blocking_scope, or queued to
// the default pool from any other thread (pool_engine.cpp), which also checks closed and canceled
// just before the call. Such an op (`on_pool`) never touches the ring or the hand-off protocol; one
// that went through suspend() is counted in `alive_` like a ring op, so the engine outlives it.
// RWF_NOWAIT refused with EOPNOTSUPP (buffered writes on ext4 and tmpfs, kernel 6.18) stops the
// attempts for the engine's lifetime.
//
// Pipes always take the ring, which waits for them with the kernel's own poll (no worker thread).
// Their writes are not tried on the calling thread first: a read pending in the ring is completed
// by task work queued to the thread that submitted it, which a write through the ring runs on its
// way out of the submission, and a pwritev2 made outside the ring leaves waiting until that thread
// next enters the kernel (docs/io.md has the figures). With fast paths off (tests) every operation
// takes the ring.
#include "engine.hpp"
#include "nowait_call.hpp"

#if TPL_HAVE_LIBURING
#include <liburing.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "../thread_pool/io_counters.hpp"
#include "tpl/thread_pool.hpp"
#endif

namespace tpl::io::detail {

#if TPL_HAVE_LIBURING

namespace {

enum uring_flags : std::uint32_t {
  kSubmitted = 1u << 0,
  kOpDone = 1u << 1,
  kCancelSubmitted = 1u << 2,
  kCancelDone = 1u << 3,
  kNotStarted = 1u << 4,
};

constexpr std::uint64_t kCancelTag = 1;   // user_data of a cancel aimed at op: &op | 1
constexpr std::uint64_t kInternalUserData = 0;  // shutdown's cancel-all: names no op
constexpr unsigned kRingEntries = 256;
// io_uring's read/write lengths are 32-bit; larger requests are split by the callers' loops.
constexpr std::size_t kMaxBytesPerSqe = 1u << 30;

int default_ring_init(unsigned entries, void* ring, unsigned flags) {
  return io_uring_queue_init(entries, static_cast<io_uring*>(ring), flags);
}

class uring_engine final : public engine {
 public:
  explicit uring_engine(bool fast_paths) noexcept
      : fast_paths_(fast_paths), cached_reads_inline_(fast_paths), nowait_writes_(fast_paths) {}
  uring_engine(const uring_engine&) = delete;
  uring_engine& operator=(const uring_engine&) = delete;

  // Returns 0 or -errno.
  int start(ring_init_fn init) {
    if (const int r = init(kRingEntries, &ring_, 0); r < 0) return r;
    ring_ready_ = true;
    try {
      reaper_ = std::thread([this] { reap(); });
    } catch (...) {
      return -EAGAIN;
    }
    return 0;
  }

  ~uring_engine() override {
    if (reaper_.joinable()) {
      {
        const std::lock_guard lock(ring_mutex_);
        stopping_ = true;
        // Release: the completion thread's acquire load then sees every in_flight_ increment,
        // all of which happened under this lock before this store.
        stop_requested_.store(true, std::memory_order_release);
        io_uring_sqe* sqe = next_sqe();
        io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
        io_uring_sqe_set_data64(sqe, kInternalUserData);
        io_uring_submit(&ring_);
      }
      reaper_.join();
      // A resumed operation still calls complete() (and may still run its token callback) on
      // this engine: wait until the last one has finished with it.
      std::unique_lock lock(alive_mutex_);
      alive_cv_.wait(lock, [this] { return alive_ == 0; });
    }
    if (ring_ready_) io_uring_queue_exit(&ring_);
  }

  io_engine kind() const noexcept override { return io_engine::io_uring; }

  bool ready(io_op& op) noexcept override {
    if (!fast_paths_ || op.handle->kind != handle_kind::file) return false;
    constexpr auto kind = tpl::detail::io_kind::uring;
    if (op.code == op_code::read) return try_nowait_file_call(op, cached_reads_inline_, kind, kMaxBytesPerSqe);
    // A write or a flush (header, "Writes and flushes").
    if (op.code == op_code::write && try_nowait_file_call(op, nowait_writes_, kind, kMaxBytesPerSqe)) return true;
    op.on_pool = true;
    return pool_engine().ready(op);
  }

  bool suspend(io_op& op, std::coroutine_handle<> continuation) noexcept override {
    {
      const std::lock_guard lock(alive_mutex_);
      ++alive_;  // every suspend() is followed by one complete() (await_resume)
    }
    op.continuation = continuation;
    if (op.on_pool) return pool_engine().suspend(op, continuation);  // counted in alive_ above
    if (op.token->is_cancellation_requested()) return finish_unstarted(op, cancel_reason::token);
    io_handle& h = *op.handle;
    if (h.kind == handle_kind::stream) {
      const std::lock_guard lock(h.pending_mutex);
      if (h.is_closed()) return finish_unstarted(op, cancel_reason::aborted);
      op.next = h.pending_head;
      if (op.next != nullptr) op.next->prev = &op;
      h.pending_head = &op;
      op.in_pending_list = true;
    }
    if (op.token->can_be_canceled()) {
      try {
        op.registration = op.token->register_callback([this, &op] { cancel(op, cancel_reason::token); });
      } catch (...) {
        op.result = -ENOMEM;  // the callback node could not be allocated
        return false;
      }
    }
    const std::lock_guard lock(ring_mutex_);
    // Relaxed: NOT_STARTED is only written under ring_mutex_, which we hold.
    if ((op.flags.load(std::memory_order_relaxed) & kNotStarted) != 0) {
      op.result = -ECANCELED;
      return false;
    }
    if (stopping_) return finish_unstarted(op, cancel_reason::aborted);
    io_uring_sqe* sqe = next_sqe();
    const bool file = h.kind == handle_kind::file;
    const std::uint64_t offset = file ? op.offset : static_cast<std::uint64_t>(-1);
    const unsigned length = static_cast<unsigned>(std::min(op.length, kMaxBytesPerSqe));
    switch (op.code) {
      case op_code::read: io_uring_prep_read(sqe, h.fd, op.buffer, length, offset); break;
      case op_code::write: io_uring_prep_write(sqe, h.fd, op.buffer, length, offset); break;
      case op_code::fsync: io_uring_prep_fsync(sqe, h.fd, 0); break;
      case op_code::fdatasync: io_uring_prep_fsync(sqe, h.fd, IORING_FSYNC_DATASYNC); break;
    }
    io_uring_sqe_set_data(sqe, &op);
    // Release: the kernel orders the SQE's submission before its CQE, but that ordering is
    // outside the C++ memory model (and invisible to ThreadSanitizer); the completion thread's
    // acquire load of `flags` before it touches the op pairs with this, so every write to the op
    // above happens-before the completion thread's. cancel() reads it under ring_mutex_.
    op.flags.fetch_or(kSubmitted, std::memory_order_release);
    // Relaxed: the count is read after an acquire of stop_requested_ (see ~uring_engine) or by
    // the completion thread, which decrements it itself.
    in_flight_.fetch_add(1, std::memory_order_relaxed);
    io_uring_submit(&ring_);  // on failure the SQE stays queued; reap() submits it (header)
    return true;  // from here on the op belongs to the completion thread
  }

  void complete(io_op& op) noexcept override {
    if (op.completed_in_ready) return;  // never reached suspend(): nothing to undo
    if (op.on_pool) {
      pool_engine().complete(op);  // the system call, on this pool worker (or here, see suspend)
      if (!op.continuation) return;  // ready() said "run it here": suspend() never counted it
    } else {
      finish_ring_op(op);
    }
    // Under the mutex: the destructor may free this engine as soon as it sees 0, so nothing may
    // touch the engine after this unlock.
    const std::lock_guard lock(alive_mutex_);
    if (--alive_ == 0) alive_cv_.notify_all();
  }

  void cancel(io_op& op, cancel_reason why) noexcept override {
    const std::lock_guard lock(ring_mutex_);
    cancel_reason none = cancel_reason::none;
    // Relaxed: the coroutine reads the reason after its resumption, which the pool's queue
    // orders after this (the resumption follows a CQE that follows this cancel's submission).
    op.reason.compare_exchange_strong(none, why, std::memory_order_relaxed);
    // Relaxed: SUBMITTED and NOT_STARTED are written only under ring_mutex_.
    std::uint32_t f = op.flags.load(std::memory_order_relaxed);
    if ((f & kSubmitted) == 0) {
      op.flags.fetch_or(kNotStarted, std::memory_order_relaxed);  // start() sees it under the lock
      return;
    }
    do {
      if ((f & (kOpDone | kCancelSubmitted)) != 0) return;  // completed, or a cancel is on its way
      // acq_rel: orders this CAS against the completion thread's fetch_or on the same word (the
      // protocol needs only their single total order on the word, which every RMW has).
    } while (!op.flags.compare_exchange_weak(f, f | kCancelSubmitted, std::memory_order_acq_rel,
                                             std::memory_order_relaxed));
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(&op), 0);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(&op) | kCancelTag);
    io_uring_submit(&ring_);
  }

  std::size_t operations_waiting() const noexcept override {
    // Relaxed: a count for tests' polling handshakes.
    return static_cast<std::size_t>(in_flight_.load(std::memory_order_relaxed));
  }

 private:
  // A ring operation's clean-up on the resumed coroutine: the token registration and the
  // handle's pending list.
  void finish_ring_op(io_op& op) noexcept {
    op.registration.reset();  // waits for a token callback running elsewhere
    if (op.in_pending_list) {
      io_handle& h = *op.handle;
      const std::lock_guard lock(h.pending_mutex);
      if (op.prev != nullptr) op.prev->next = op.next;
      else h.pending_head = op.next;
      if (op.next != nullptr) op.next->prev = op.prev;
      op.in_pending_list = false;
    }
  }

  bool finish_unstarted(io_op& op, cancel_reason why) noexcept {
    op.reason.store(why, std::memory_order_relaxed);  // read by this same coroutine
    op.result = -ECANCELED;
    return false;
  }

  // Called under ring_mutex_. A full submission queue is flushed to the kernel first; without
  // SQPOLL the kernel consumes it inside io_uring_submit, so the retry finds a free entry.
  io_uring_sqe* next_sqe() noexcept {
    for (;;) {
      if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) return sqe;
      if (const int r = io_uring_submit(&ring_); r < 0 && r != -EBUSY && r != -EAGAIN && r != -EINTR) {
        std::fprintf(stderr, "tpl::io: io_uring_submit failed: %s\n", std::strerror(-r));
        std::abort();
      }
      if (io_uring_sq_space_left(&ring_) == 0) std::this_thread::yield();  // the reaper frees room
    }
  }

  void resume(io_op& op) noexcept {
    const std::coroutine_handle<> continuation = op.continuation;
    // Release: pairs with the acquire in the exit check below (same thread) and keeps the count
    // exact for shutdown; the op's memory is not touched after this point.
    in_flight_.fetch_sub(1, std::memory_order_release);
    io_.record_completion();  // on the completion thread, the block's only writer
    thread_pool::default_pool().schedule(continuation);
  }

  void on_cqe(const io_uring_cqe& cqe) noexcept {
    const std::uint64_t data = io_uring_cqe_get_data64(&cqe);
    if (data == kInternalUserData) return;
    if ((data & kCancelTag) != 0) {
      auto& op = *reinterpret_cast<io_op*>(data & ~kCancelTag);
      // Acquire, as on the op's own CQE below: pairs with cancel()'s release CAS, so the op's
      // construction happens-before this thread's first access to it. The fetch_or's acq_rel
      // would order it as well in the C++ model, but ThreadSanitizer checks an RMW's access
      // before applying its acquire, and would report the op's initialisation as a race.
      (void)op.flags.load(std::memory_order_acquire);
      // acq_rel: see cancel(); OP_DONE set before means the op's CQE is already handled.
      if ((op.flags.fetch_or(kCancelDone, std::memory_order_acq_rel) & kOpDone) != 0) resume(op);
      return;
    }
    auto& op = *reinterpret_cast<io_op*>(data);
    // Acquire: pairs with suspend()'s release of SUBMITTED (see there).
    (void)op.flags.load(std::memory_order_acquire);
    op.result = cqe.res;
    // acq_rel: the result is published with the bit. CANCEL_SUBMITTED without CANCEL_DONE means
    // a cancel CQE will still name the op, so its handler resumes it instead (the kernel posts the
    // cancel's CQE before the canceled operation's, or after it when the operation completed
    // on its own meanwhile).
    const std::uint32_t before = op.flags.fetch_or(kOpDone, std::memory_order_acq_rel);
    if ((before & kCancelSubmitted) == 0 || (before & kCancelDone) != 0) resume(op);
  }

  void reap() noexcept {
    io_.bind_to_current_thread();
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      const int r = io_uring_wait_cqe(&ring_, &cqe);
      if (r < 0 && r != -EINTR && r != -EAGAIN) {
        std::fprintf(stderr, "tpl::io: io_uring_wait_cqe failed: %s\n", std::strerror(-r));
        std::abort();
      }
      // This round's batch: the CQEs ready now; later ones wait for the next round (the wait
      // returns at once for them).
      const unsigned batch = io_uring_cq_ready(&ring_);
      if (batch != 0) io_.record_wakeup(batch);
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        if (seen == batch) break;
        on_cqe(*cqe);
        ++seen;
      }
      io_uring_cq_advance(&ring_, seen);
      if (batch != 0) tpl::detail::io_summary_tick();
      {
        const std::lock_guard lock(ring_mutex_);
        if (io_uring_sq_ready(&ring_) > 0) io_uring_submit(&ring_);  // left by a failed submit
      }
      // Acquire: pairs with the destructor's release (see the header).
      if (stop_requested_.load(std::memory_order_acquire) &&
          in_flight_.load(std::memory_order_acquire) == 0)
        return;
    }
  }

  const bool fast_paths_;
  std::atomic<bool> cached_reads_inline_;
  std::atomic<bool> nowait_writes_;
  io_uring ring_{};
  bool ring_ready_ = false;
  std::mutex ring_mutex_;  // the submission side of ring_, stopping_
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};
  std::atomic<std::uint64_t> in_flight_{0};
  std::thread reaper_;
  // Operations between suspend() and the end of complete(): the engine must outlive them.
  std::mutex alive_mutex_;
  std::condition_variable alive_cv_;
  std::uint64_t alive_ = 0;
  // The completion thread's wake-ups, batch sizes and completions; destroyed after the thread is
  // joined (a member, destroyed after the destructor's body), so its totals are complete.
  tpl::detail::io_engine_counters io_{tpl::detail::io_kind::uring};
};

}  // namespace

std::unique_ptr<engine> make_uring_engine(std::string* why, ring_init_fn init, bool fast_paths) {
  auto e = std::make_unique<uring_engine>(fast_paths);
  if (const int r = e->start(init != nullptr ? init : &default_ring_init); r < 0) {
    if (why != nullptr) *why = std::string("io_uring_queue_init refused: ") + std::strerror(-r);
    return nullptr;
  }
  return e;
}

#else  // !TPL_HAVE_LIBURING

std::unique_ptr<engine> make_uring_engine(std::string* why, ring_init_fn, bool) {
  if (why != nullptr) *why = "tpl was built without liburing";
  return nullptr;
}

#endif

}  // namespace tpl::io::detail
