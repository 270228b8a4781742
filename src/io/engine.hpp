// src/io/engine.hpp (private) — what files and pipes share: the reference-counted descriptor
// (io_handle), one operation in flight (io_op), the engine interface that runs operations, and
// the engine selection with its testing hooks.
//
// Invariants:
//   - An io_handle lives while its owner (file / pipe_stream) or any operation holds a reference;
//     the descriptor is closed by the release that drops the last one, never under a running
//     system call or an io_uring operation naming it.
//   - `closed` only goes false -> true. An operation that has not started when it turns true
//     fails with operation_aborted; one already started completes (files) or is aborted by the
//     engine (pipes: the pool engine's wake-up eventfd, io_uring's cancel).
//   - An io_op lives in the awaiting coroutine's frame from await_ready to await_resume: the
//     engine may touch it only between suspend() and the resumption it schedules (or, for a
//     synchronous completion, not at all after suspend() returned false).
#pragma once

#include <atomic>
#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tpl/cancellation.hpp"
#include "tpl/io/io_error.hpp"

namespace tpl::net::detail {
class socket_context;
}

namespace tpl::io::detail {

class engine;
struct io_op;

enum class handle_kind : unsigned char { file, stream };

struct io_handle {
  io_handle(int fd_, handle_kind kind_, engine* engine_) noexcept : fd(fd_), kind(kind_), eng(engine_) {}

  const int fd;
  const handle_kind kind;
  engine* const eng;
  /// Streams only: an eventfd that cancel and close write to, so that the pool engine's poll()
  /// wakes (-1 for files and for pipes served by readiness).
  int wake_fd = -1;
  /// A pipe end served by the socket engine's readiness (pipe_readiness.hpp), which owns `fd`;
  /// null otherwise. Set before the handle is shared.
  tpl::net::detail::socket_context* readiness = nullptr;
  /// Owner + one per operation in flight.
  std::atomic<std::uint32_t> refs{1};
  /// Set by close(). Release store / acquire loads: an operation that sees it also sees whatever
  /// the closer wrote before (nothing else depends on it; the mutex orders the pending list).
  std::atomic<bool> closed{false};
  /// Streams served by the engine (not by readiness): whether a read ([0]) or a write ([1]) is
  /// in flight, so that a second one is refused (pipe.hpp, rule 4). Claimed by exchange(true,
  /// acquire) when a transfer starts, cleared by store(false, release) when it ends: the release
  /// publishes everything the finished transfer did with the handle to the next claimant, as a
  /// lock's unlock does, on any architecture (exchange is a single read-modify-write, so two
  /// claimants cannot both see false).
  std::atomic<bool> stream_busy[2] = {false, false};
  /// Streams on io_uring: the operations in flight, so that close() can cancel them.
  std::mutex pending_mutex;
  io_op* pending_head = nullptr;

  void add_ref() noexcept {
    // Relaxed: the caller already holds a reference, so the count cannot reach 0 meanwhile.
    refs.fetch_add(1, std::memory_order_relaxed);
  }
  /// Drops a reference; the last one closes the descriptors and frees the handle.
  void release() noexcept;
  bool is_closed() const noexcept {
    // Acquire pairs with close()'s release (see `closed`).
    return closed.load(std::memory_order_acquire);
  }
  /// Marks closed, aborts pending stream operations (signals wake_fd; cancels the pending list),
  /// drops the owner's reference.
  void close_and_release() noexcept;
};

/// Owning reference held by an operation's coroutine frame.
class handle_ref {
 public:
  explicit handle_ref(io_handle* h) noexcept : h_(h) { h_->add_ref(); }
  handle_ref(const handle_ref&) = delete;
  handle_ref& operator=(const handle_ref&) = delete;
  ~handle_ref() { h_->release(); }
  io_handle* get() const noexcept { return h_; }
  io_handle* operator->() const noexcept { return h_; }

 private:
  io_handle* h_;
};

enum class op_code : unsigned char { read, write, fsync, fdatasync };

/// Why an operation was asked to stop (set once, by whoever asks first).
enum class cancel_reason : unsigned char { none, token, aborted };

/// One system call's worth of work.
struct io_op {
  io_handle* handle = nullptr;
  op_code code = op_code::read;
  /// File offset; streams ignore it.
  std::uint64_t offset = 0;
  std::byte* buffer = nullptr;
  std::size_t length = 0;
  const cancellation_token* token = nullptr;
  /// Bytes moved (>= 0) or -errno. -ECANCELED with `reason` saying whose cancel it was.
  std::int64_t result = 0;
  std::coroutine_handle<> continuation;
  /// Completed by the engine's ready() on the calling thread (io_uring: a read served from the
  /// page cache, a write the kernel took without waiting); complete() then has nothing left to do.
  bool completed_in_ready = false;
  /// io_uring engine: the operation runs as the pool engine runs it (a file write or flush that
  /// the kernel could only hand to one of its worker threads; uring_engine.cpp). Set by ready().
  bool on_pool = false;

  // --- io_uring engine state (src/io/uring_engine.cpp explains the protocol) ---
  /// uring_flags bits. Written by the submitter (under the ring lock), the canceler (under the
  /// ring lock) and the completion thread (without it).
  std::atomic<std::uint32_t> flags{0};
  std::atomic<cancel_reason> reason{cancel_reason::none};
  cancellation_registration registration;
  /// The handle's pending list (streams on io_uring), guarded by io_handle::pending_mutex.
  io_op* prev = nullptr;
  io_op* next = nullptr;
  bool in_pending_list = false;
};

/// Runs operations. The awaiter in operation.hpp calls ready() in await_ready, suspend() in
/// await_suspend (only if ready() was false) and complete() in await_resume; after complete()
/// op.result holds the outcome.
class engine {
 public:
  virtual ~engine() = default;
  virtual io_engine kind() const noexcept = 0;
  /// true: the operation can run synchronously here (complete() will do it).
  virtual bool ready(io_op& op) noexcept = 0;
  /// Starts op; false when it already completed (resume at once), true when `continuation` will
  /// be resumed on the pool once it has.
  virtual bool suspend(io_op& op, std::coroutine_handle<> continuation) noexcept = 0;
  /// On the resumed coroutine: finishes op (the pool engine runs the system call here).
  virtual void complete(io_op& op) noexcept = 0;
  /// Asks a started operation to stop (io_uring: IORING_OP_ASYNC_CANCEL). Only for operations the
  /// engine keeps pending (on a handle's pending list or under a token registration it made).
  virtual void cancel(io_op& op, cancel_reason why) noexcept = 0;
  /// For tests' handshakes: operations submitted and not yet resumed (io_uring), or stream
  /// operations waiting in poll() (pool).
  virtual std::size_t operations_waiting() const noexcept = 0;
};

/// The pool engine (a process-wide object that holds no resources).
engine& pool_engine() noexcept;

/// io_uring_queue_init's signature, so that tests can stand in a refusal (-EPERM, -ENOSYS).
using ring_init_fn = int (*)(unsigned entries, void* ring, unsigned flags);

/// A new io_uring engine, or nullptr (and *why filled in) when tpl was built without liburing or
/// `init` (io_uring_queue_init by default) fails. Destroying the engine cancels what is in flight,
/// waits until every operation has completed and stops its completion thread; handles that use
/// it must not start operations afterwards. `fast_paths` (the default): a file read first tries
/// preadv2(RWF_NOWAIT) on the calling thread and goes to the ring only when the data is not all
/// in the page cache, and a file write or flush that the kernel cannot do without waiting runs as
/// the pool engine runs it instead of in the kernel's io-wq workers (uring_engine.cpp); false
/// sends every operation through the ring (tests, so that both paths run).
std::unique_ptr<engine> make_uring_engine(std::string* why, ring_init_fn init = nullptr,
                                          bool fast_paths = true);

/// The engine new files and pipes use: the testing override when set, else the process's engine
/// chosen from TPL_IO_ENGINE on first use (never destroyed).
engine& current_engine();
/// Testing hook: new handles use `e` (nullptr: back to the process's engine). Not thread-safe
/// against concurrent opens; tests set it between operations.
void set_engine_override_for_testing(engine* e) noexcept;

/// The outcome of choosing an engine from TPL_IO_ENGINE's value.
struct engine_choice {
  std::unique_ptr<engine> owned;  ///< the io_uring engine when chosen (null for the pool engine)
  engine* chosen = nullptr;
  std::string fallback_reason;    ///< why io_uring was requested but not used; else empty
};
/// `value` is TPL_IO_ENGINE (nullptr: unset); `init` stands in for io_uring_queue_init in tests.
engine_choice choose_engine(const char* value, ring_init_fn init = nullptr);

/// Parses TPL_IO_ENGINE's value as strictly as the other variables (src/env_parse.hpp): "epoll" or
/// "io_uring", else std::invalid_argument naming the variable and both words.
io_engine parse_io_engine(const char* value);

/// Throws the io_error subclass matching `error` (an errno value), with "what: path".
[[noreturn]] void throw_io_error(int error, const std::string& what);

}  // namespace tpl::io::detail
