// src/io/operation.hpp (private) — the coroutine side of an I/O operation: run one io_op on its
// handle's engine, loop where the caller wants the whole buffer moved, and turn the outcome into
// a count or an exception.
//
// Invariants: the io_op lives in the transfer coroutine's frame while the engine may touch it
// (engine.hpp); the frame holds a handle_ref, so the descriptor outlives every system call and
// io_uring operation that names it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine.hpp"
#include "tpl/value_task.hpp"

namespace tpl::io::detail {

struct transfer_request {
  op_code code = op_code::read;
  std::uint64_t offset = 0;
  std::byte* buffer = nullptr;
  std::size_t length = 0;
  /// Loop until `length` bytes moved (writes); false: one system call's worth (reads).
  bool all = false;
  /// Advance `offset` between system calls (files); streams have no offset.
  bool positional = true;
};

/// Runs the request on h's engine. Returns the bytes moved; throws operation_canceled /
/// io_canceled, operation_aborted, or io_error for a failed system call.
value_task<std::size_t> transfer(io_handle* h, transfer_request request, cancellation_token token);

}  // namespace tpl::io::detail
