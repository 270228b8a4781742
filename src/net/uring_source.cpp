// The io_uring readiness source (TPL_IO_ENGINE=io_uring): one ring per engine, each socket watched
// by one multishot poll (IORING_OP_POLL_ADD with IORING_POLL_ADD_MULTI, edge-triggered, the
// default of io_uring's poll), so the engine thread learns of readiness from completion queue
// entries instead of epoll_wait. The operations themselves stay system calls made by whoever runs
// them (socket_context.hpp): this source replaces epoll, not the readiness handshake.
//
// Only the engine thread touches the ring. A poll's wake-ups are turned into completions by task
// work that runs on the thread that submitted it; with every submission made by the engine thread
// (and the ring set up SINGLE_ISSUER where the kernel has it), that work never interrupts a pool
// worker, and a poll does not end when the thread that created its socket exits (the kernel
// cancels an exiting thread's requests). Where the kernel has DEFER_TASKRUN (6.1), that work runs
// only inside the engine's waits, so it does not interrupt the engine thread either; a poll's
// wake-up then stays pending as task work, owning the poll, until the engine's next wait.
// So attach() and detach() do not submit: they queue a request on the target (intrusive, no
// allocation), link it on the request list under `requests_lock_`, and write the wake-up eventfd
// when the list was empty. The engine thread watches that eventfd with a multishot poll of its
// own, takes the whole list and submits the polls and removals itself before it waits again.
//
// Close (why detach() waits). A poll holds a reference to the socket's file, so closing the
// descriptor while one is armed would not close the socket: a listener would go on accepting, a
// linger-0 close would send no reset. So detach() queues the removal (a cancellation of the poll
// by its user_data, IORING_OP_ASYNC_CANCEL: IORING_OP_POLL_REMOVE fails with -EALREADY on a poll
// whose wake-up is pending as task work, and leaves it armed) and waits (a futex wait on
// `removed`) until the engine thread has seen the poll's last completion; by then the kernel has
// freed the poll and its file reference (it frees completed requests before io_uring_enter
// returns), and the caller's close() is the socket's real close, as with epoll. The wait is one
// round trip to the engine thread, which never waits for the pool. On an engine thread (inline
// completions: a continuation that closes a socket) detach() does not wait: not for itself, which
// could never answer, and not for another engine thread, which may at that moment be waiting the
// same way for this one. The removal is then made at that engine's next wait (for its own
// sockets, right after the continuation returns), and the socket really closes then.
//
// Lifetime (readiness_source.hpp, invariant 2). The kernel names a target only by its user_data
// (the pointer). A multishot poll posts completions with IORING_CQE_F_MORE while it stays armed;
// its last completion has no F_MORE: after the cancellation (detach), or when the kernel ends it on
// its own (for instance when the completion queue overflowed). On that last completion the engine
// thread re-arms the poll unless the target is detached; a detached target goes on the release
// list, released by end_batch() once the batch was handed on. All of this runs on the engine
// thread, in completion order, so:
//   - a removal that finds no poll (it ended on its own and was not re-armed because the detach
//     was already seen) completes with -ENOENT and changes nothing: that ending was the last
//     completion naming the target;
//   - a re-arm made before the detach was seen is submitted before the removal, which removes it.
// Either way exactly one last completion releases the target, and no completion names it after.
// tests/net/net_model_uring_source_test.cpp checks these hand-offs (requests, eventfd, arm,
// removal, the kernel's own ends of a poll, retire and release) over every interleaving, with
// known-bad variants: retiring when the removal is submitted, re-arming without looking at
// `detached`, a detach() that does not wait, a detach() that does not wake the engine, a removal
// by POLL_REMOVE (the model's kernel lets a wake-up's pending task work own the poll).
// A poll that ends with an error while the target is attached reports readable | writable (the
// waiting operations try their system calls, which say what is wrong) before it is re-armed.
//
// Memory order: a target is published to the engine thread by requests_lock_ (attach() links it
// under the lock, the engine thread takes the list under it); the ring carries it back only as an
// opaque number, so nothing relies on the kernel's own ordering (invisible to ThreadSanitizer).
#include "readiness_source.hpp"

#if TPL_HAVE_LIBURING
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "tpl/net/socket_error.hpp"
#endif

namespace tpl::net::detail {

#if TPL_HAVE_LIBURING

namespace {

constexpr unsigned kSqEntries = 256;
constexpr unsigned kCqEntries = 8192;
constexpr std::uint64_t kInternalUserData = 0;  // removals: their completions name no target
constexpr std::uint64_t kWakeUserData = 1;      // the eventfd's poll (targets are aligned pointers)
constexpr unsigned kPollMask = POLLIN | POLLOUT | POLLRDHUP;

enum request_bits : std::uint8_t { kArm = 1, kRemove = 2 };

int default_init(unsigned entries, void* ring, void* params) {
  return io_uring_queue_init_params(entries, static_cast<io_uring*>(ring), static_cast<io_uring_params*>(params));
}

class uring_source final : public readiness_source {
 public:
  ~uring_source() override {
    // Only a source that never served comes here (engines live as long as the process).
    if (ring_ready_) io_uring_queue_exit(&ring_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  // 0 or -errno. The ring starts disabled where the kernel supports single-issuer rings (6.0), so
  // that the engine thread, which enables it, is its only submitter; DEFER_TASKRUN (6.1) is asked
  // for first, and each older kernel's EINVAL drops the newest flag.
  int start(uring_init_fn init) {
    constexpr unsigned kTries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED,
        0,  // before 6.0: no single-issuer rings; the engine thread still submits alone
    };
    int r = -EINVAL;
    for (unsigned extra : kTries) {
      io_uring_params p{};
      p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | extra;
      p.cq_entries = kCqEntries;
      r = init(kSqEntries, &ring_, &p);
      needs_enable_ = (extra & IORING_SETUP_R_DISABLED) != 0;
      if (r != -EINVAL) break;
    }
    if (r < 0) return r;
    ring_ready_ = true;
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return -errno;
    return 0;
  }

  void attach(int fd, readiness_target* t) override {
    t->add_ref();
    t->uring.fd = fd;  // read by the engine thread after it takes the request (requests_lock_)
    request(t, kArm);
  }

  void detach(int, readiness_target* t) noexcept override {
    request(t, kRemove);
    if (t_serving != nullptr) return;  // an engine thread (see the header)
    // Acquire: pairs with the engine thread's release store, after which no poll holds the file.
    while (t->uring.removed.load(std::memory_order_acquire) == 0) t->uring.removed.wait(0, std::memory_order_acquire);
  }

  void wait(std::vector<ready_event>& batch) noexcept override {
    if (!started_) start_on_engine_thread();
    for (;;) {
      const int r = io_uring_submit_and_wait(&ring_, 1);
      if (r >= 0) break;
      if (r == -EINTR) continue;
      if (r == -EAGAIN || r == -EBUSY) {
        // The kernel cannot take the submissions now (completions it holds back for want of room,
        // or memory): wait for completions without submitting, reap them, and submit next round.
        io_uring_cqe* first = nullptr;
        if (const int w = io_uring_wait_cqe(&ring_, &first); w < 0 && w != -EINTR && w != -EAGAIN) {
          std::fprintf(stderr, "tpl::net: io_uring_wait_cqe failed: %s\n", std::strerror(-w));
          std::abort();
        }
        break;
      }
      std::fprintf(stderr, "tpl::net: io_uring_submit_and_wait failed: %s\n", std::strerror(-r));
      std::abort();
    }
    reap(batch);
  }

  void poll(std::vector<ready_event>& batch) noexcept override {
    if (!started_) start_on_engine_thread();
    // Submits what is queued and, with deferred task work, runs it, which posts what the kernel
    // has for us; no wait. A refusal (EBUSY, EAGAIN) leaves the submissions for the next wait.
    const int r = io_uring_submit_and_get_events(&ring_);
    if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
      std::fprintf(stderr, "tpl::net: io_uring_submit_and_get_events failed: %s\n", std::strerror(-r));
      std::abort();
    }
    reap(batch);
  }

  void end_batch() noexcept override {
    while (readiness_target* t = release_list_) {
      release_list_ = t->uring.next;
      t->uring.next = nullptr;
      t->release();
    }
  }

 private:
  // At most kMaxBatch completions; the rest wait for the next round (its wait returns at once).
  // Each is consumed before it is handled, so the completion queue has room for what the kernel
  // holds back whenever handling one submits (next_sqe()).
  void reap(std::vector<ready_event>& batch) noexcept {
    for (std::size_t seen = 0; seen < kMaxBatch; ++seen) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_peek_cqe(&ring_, &cqe) != 0 || cqe == nullptr) break;
      const std::uint64_t data = cqe->user_data;
      const int res = cqe->res;
      const unsigned flags = cqe->flags;
      io_uring_cqe_seen(&ring_, cqe);
      on_cqe(data, res, flags, batch);
    }
  }

  // Any thread: queue `bit` for the engine thread and wake it if the list was empty.
  void request(readiness_target* t, std::uint8_t bit) noexcept {
    bool wake = false;
    {
      const std::lock_guard lock(requests_lock_);
      t->uring.requests |= bit;
      if (!t->uring.queued) {
        t->uring.queued = true;
        t->uring.next = requests_;
        requests_ = t;
        wake = t->uring.next == nullptr;
      }
    }
    if (wake) {
      const std::uint64_t one = 1;
      // The counter is never read back (the poll reports each write), so it only grows; 2^64 - 2
      // writes would be needed to fill it.
      [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof one);
    }
  }

  void start_on_engine_thread() noexcept {
    started_ = true;
    t_serving = this;
    if (needs_enable_) {
      // The system call itself: Debian's liburing 2.3 leaves io_uring_enable_rings out of its
      // shared library.
      if (::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) < 0) {
        std::fprintf(stderr, "tpl::net: enabling the io_uring failed: %s\n", std::strerror(errno));
        std::abort();
      }
    }
    arm_wake();
    take_requests();  // attach() may have come before this thread ran
  }

  // Engine thread: a free submission entry, submitting what is queued when the queue is full.
  io_uring_sqe* next_sqe() noexcept {
    for (unsigned tries = 0;; ++tries) {
      if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) return sqe;
      const int r = io_uring_submit(&ring_);
      if (r < 0 && r != -EBUSY && r != -EAGAIN && r != -EINTR) {
        std::fprintf(stderr, "tpl::net: io_uring_submit failed: %s\n", std::strerror(-r));
        std::abort();
      }
      // -EBUSY: the kernel holds back completions for want of room in the queue; every completion
      // this thread has handled is consumed already (wait()), so the kernel can move them in and
      // take the submissions on a retry. Still refused after that many tries, something is broken.
      if (r < 0 && tries >= 1000) {
        std::fprintf(stderr, "tpl::net: io_uring submission queue stays full: %s\n", std::strerror(-r));
        std::abort();
      }
      if (r < 0) std::this_thread::yield();
    }
  }

  void arm_wake() noexcept {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_multishot(sqe, wake_fd_, POLLIN);
    io_uring_sqe_set_data64(sqe, kWakeUserData);
  }

  void arm(readiness_target* t) noexcept {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_multishot(sqe, t->uring.fd, kPollMask);
    io_uring_sqe_set_data(sqe, t);
  }

  void take_requests() noexcept {
    readiness_target* list;
    {
      const std::lock_guard lock(requests_lock_);
      list = requests_;
      requests_ = nullptr;
    }
    while (list != nullptr) {
      readiness_target* t = list;
      std::uint8_t bits;
      {
        // The lock orders this read against a request() made meanwhile on the same target.
        const std::lock_guard lock(requests_lock_);
        list = t->uring.next;
        t->uring.next = nullptr;
        t->uring.queued = false;
        bits = t->uring.requests;
        t->uring.requests = 0;
      }
      if ((bits & kRemove) != 0) {
        t->uring.detached = true;
        if ((bits & kArm) != 0) {
          // Attached and detached before the engine saw either: no poll was ever armed.
          retire(t);
          continue;
        }
        // A cancellation, not IORING_OP_POLL_REMOVE: a removal that finds the poll's wake-up
        // still pending as task work fails with -EALREADY and leaves the poll armed (and
        // detach() waiting for ever), whereas a cancellation marks it, and the pending task work
        // then ends the poll with its last completion.
        io_uring_sqe* sqe = next_sqe();
        io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(t), 0);
        io_uring_sqe_set_data64(sqe, kInternalUserData);
      } else if ((bits & kArm) != 0) {
        arm(t);
      }
    }
  }

  // Engine thread: no poll names t any more; wakes detach() and releases t after the batch.
  void retire(readiness_target* t) noexcept {
    // Release: detach()'s acquire load then orders its close() after the poll's end.
    t->uring.removed.store(1, std::memory_order_release);
    t->uring.removed.notify_all();  // t stays alive: the detaching caller and this source hold it
    t->uring.next = release_list_;
    release_list_ = t;
  }

  void on_cqe(std::uint64_t data, int res, unsigned flags, std::vector<ready_event>& batch) noexcept {
    if (data == kInternalUserData) return;
    const bool last = (flags & IORING_CQE_F_MORE) == 0;
    if (data == kWakeUserData) {
      if (last) arm_wake();
      take_requests();
      return;
    }
    auto* t = reinterpret_cast<readiness_target*>(data);
    if (res > 0) batch.push_back({t, readiness_from_poll_bits(static_cast<std::uint32_t>(res))});
    if (!last) return;
    if (t->uring.detached) {
      retire(t);
      return;
    }
    if (res < 0) batch.push_back({t, readable | writable});
    arm(t);
  }

  static thread_local const uring_source* t_serving;  // set on each engine thread (to its source)

  io_uring ring_{};
  bool ring_ready_ = false;
  bool needs_enable_ = true;
  bool started_ = false;  // the engine thread's
  int wake_fd_ = -1;
  std::mutex requests_lock_;
  readiness_target* requests_ = nullptr;      // guarded by requests_lock_
  readiness_target* release_list_ = nullptr;  // the engine thread's
};

thread_local const uring_source* uring_source::t_serving = nullptr;

}  // namespace

std::unique_ptr<readiness_source> make_uring_source(std::string* why, uring_init_fn init) {
  auto s = std::make_unique<uring_source>();
  if (const int r = s->start(init != nullptr ? init : &default_init); r < 0) {
    if (why != nullptr) *why = std::string("io_uring_queue_init_params refused: ") + std::strerror(-r);
    return nullptr;
  }
  return s;
}

#else  // !TPL_HAVE_LIBURING

std::unique_ptr<readiness_source> make_uring_source(std::string* why, uring_init_fn) {
  if (why != nullptr) *why = "tpl was built without liburing";
  return nullptr;
}

#endif

}  // namespace tpl::net::detail
