// The transfer coroutine (src/io/operation.hpp): one awaiter per system call, a loop for the
// operations that move a whole buffer, and the mapping from op.result to a value or an exception.
// A stream's transfer holds its direction's claim (io_handle::stream_busy) from its start to its
// end, so a second read or write on one pipe end is refused before it touches the engine.
#include "operation.hpp"

#include <cerrno>
#include <coroutine>
#include <string>
#include <system_error>

#include "tpl/exceptions.hpp"

namespace tpl::io::detail {

namespace {

const char* describe(op_code code) noexcept {
  switch (code) {
    case op_code::read: return "read";
    case op_code::write: return "write";
    case op_code::fsync: return "fsync";
    case op_code::fdatasync: return "fdatasync";
  }
  return "?";
}

struct op_awaiter {
  io_op& op;
  bool await_ready() noexcept { return op.handle->eng->ready(op); }
  bool await_suspend(std::coroutine_handle<> h) noexcept { return op.handle->eng->suspend(op, h); }
  void await_resume() noexcept { op.handle->eng->complete(op); }
};

// A stream's one read or one write in flight (pipe.hpp, rule 4): claimed for the whole transfer,
// a write-all's every system call included; see io_handle::stream_busy for the orders.
class stream_claim {
 public:
  stream_claim(io_handle* h, op_code code) {
    if (h->kind != handle_kind::stream) return;
    const bool write = code == op_code::write;
    std::atomic<bool>& busy = h->stream_busy[write ? 1 : 0];
    if (busy.exchange(true, std::memory_order_acquire))
      throw invalid_operation(std::string("tpl::io::pipe_stream: another ") + (write ? "write" : "read") +
                              " is already pending on this stream (one read and one write at a time)");
    busy_ = &busy;
  }
  stream_claim(const stream_claim&) = delete;
  stream_claim& operator=(const stream_claim&) = delete;
  ~stream_claim() {
    if (busy_ != nullptr) busy_->store(false, std::memory_order_release);
  }

 private:
  std::atomic<bool>* busy_ = nullptr;
};

}  // namespace

value_task<std::size_t> transfer(io_handle* h, transfer_request request, cancellation_token token) {
  const handle_ref ref(h);
  const stream_claim claim(h, request.code);
  std::size_t done = 0;
  for (;;) {
    io_op op;
    op.handle = h;
    op.code = request.code;
    op.offset = request.offset + (request.positional ? done : 0);
    op.buffer = request.buffer + done;
    op.length = request.length - done;
    op.token = &token;
    co_await op_awaiter{op};
    if (op.result < 0) {
      const int error = static_cast<int>(-op.result);
      const cancel_reason why = op.reason.load(std::memory_order_relaxed);  // set before the result
      if (error == ECANCELED && why == cancel_reason::token) {
        if (done > 0) throw io_canceled(done);
        throw operation_canceled();
      }
      if (error == ECANCELED)
        throw operation_aborted(std::make_error_code(std::errc::operation_canceled),
                                std::string("tpl::io: ") + describe(request.code) +
                                    " aborted: the file or pipe was closed, or the I/O engine stopped");
      throw_io_error(error, std::string("tpl::io: ") + describe(request.code) + " failed");
    }
    done += static_cast<std::size_t>(op.result);
    if (!request.all || done >= request.length) break;
    if (op.result == 0) throw_io_error(EIO, "tpl::io: write made no progress");
    // Between the system calls of one write: a canceled token stops it here (rule 4).
    if (token.is_cancellation_requested()) throw io_canceled(done);
  }
  co_return done;
}

}  // namespace tpl::io::detail
