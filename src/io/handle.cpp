// io_handle's reference count and close, the io_error mapping, and the choice of engine
// (TPL_IO_ENGINE, the fallback when io_uring is refused, the testing override).
//
// Invariants: the process engine is chosen once (a function-local static: a bad TPL_IO_ENGINE
// throws from every open until fixed, as the pool's variables do from default_pool()) and never
// destroyed, so a handle's engine outlives the handle.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>

#include "engine.hpp"
#include "pipe_readiness.hpp"
#include "../env_parse.hpp"

namespace tpl::io {

const char* to_string(io_engine e) noexcept {
  switch (e) {
    case io_engine::pool: return "pool";
    case io_engine::io_uring: return "io_uring";
  }
  return "?";
}

namespace detail {

void io_handle::release() noexcept {
  // acq_rel: the last release must see every other holder's use of the descriptor (their
  // releases) before it closes it.
  if (refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (readiness != nullptr) {
    readiness_release(*this);  // the context owns fd
  } else {
    ::close(fd);
  }
  if (wake_fd >= 0) ::close(wake_fd);
  delete this;
}

void io_handle::close_and_release() noexcept {
  // Release: pairs with is_closed()'s acquire.
  closed.store(true, std::memory_order_release);
  if (readiness != nullptr) {
    readiness_close(*this);  // ends a pending read or write with "aborted"
  } else if (kind == handle_kind::stream) {
    if (wake_fd >= 0) {
      const std::uint64_t one = 1;
      // An eventfd write of 1 cannot block or fail short of overflowing the counter at 2^64-2.
      [[maybe_unused]] const auto written = ::write(wake_fd, &one, sizeof one);
    }
    const std::lock_guard lock(pending_mutex);
    for (io_op* op = pending_head; op != nullptr; op = op->next) eng->cancel(*op, cancel_reason::aborted);
  }
  release();
}

void throw_io_error(int error, const std::string& what) {
  const std::error_code code(error, std::system_category());
  switch (error) {
    case ENOENT:
    case ENOTDIR: throw file_not_found(code, what);
    case EACCES:
    case EPERM:
    case EROFS:
    case EISDIR: throw access_denied(code, what);
    default: throw io_error(code, what);
  }
}

io_engine parse_io_engine(const char* value) {
  return tpl::detail::parse_environment_word("TPL_IO_ENGINE", value, {"epoll", "io_uring"}) == 0 ? io_engine::pool
                                                                                                 : io_engine::io_uring;
}

namespace {

// Without TPL_IO_ENGINE: the pool engine (docs/io.md, "Choosing an engine", has the figures).
constexpr io_engine kDefaultEngine = io_engine::pool;

}  // namespace

engine_choice choose_engine(const char* value, ring_init_fn init) {
  engine_choice c;
  const io_engine requested = value != nullptr ? parse_io_engine(value) : kDefaultEngine;
  if (requested == io_engine::io_uring) {
    c.owned = make_uring_engine(&c.fallback_reason, init);
    if (c.owned) {
      c.chosen = c.owned.get();
      return c;
    }
  }
  c.chosen = &pool_engine();
  return c;
}

namespace {

const engine_choice& the_process_engine() {
  // Never destroyed (see the header): the io_uring engine's ownership is given up here.
  static const engine_choice* const p = new engine_choice(choose_engine(std::getenv("TPL_IO_ENGINE")));
  return *p;
}

// Acquire/release: a test stores it on one thread and opens on another after a handshake.
std::atomic<engine*> g_engine_override{nullptr};

}  // namespace

engine& current_engine() {
  if (engine* e = g_engine_override.load(std::memory_order_acquire)) return *e;
  return *the_process_engine().chosen;
}

void set_engine_override_for_testing(engine* e) noexcept { g_engine_override.store(e, std::memory_order_release); }

}  // namespace detail

io_engine active_io_engine() { return detail::current_engine().kind(); }

std::string io_engine_fallback_reason() { return detail::the_process_engine().fallback_reason; }

}  // namespace tpl::io
