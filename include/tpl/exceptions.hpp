// tpl/exceptions.hpp — the exception types tpl reports.
//
// Provides:
//   tpl::operation_canceled   (.NET OperationCanceledException / TaskCanceledException)
//   tpl::aggregate_exception  (.NET AggregateException: every fault of a task or of when_all)
//   tpl::invalid_operation    (.NET InvalidOperationException: misuse such as set_result twice,
//                              awaiting an empty task, awaiting a value_task twice)
//   tpl::channel_closed       (.NET ChannelClosedException: writing to a completed channel,
//                              reading from a completed and drained one)
//   tpl::lock_recursion_error (.NET LockRecursionException: taking a lock the thread already
//                              holds where the lock takes none recursively)
//   tpl::synchronization_lock_error (.NET SynchronizationLockException: releasing a lock the
//                              thread does not hold)
//
// The hierarchy follows .NET's where C++ has the same split: conditions met at run time derive
// from std::runtime_error (operation_canceled, timeout_exception, barrier_post_phase_error: .NET's
// SystemException family), misuse derives from std::logic_error through invalid_operation
// (channel_closed, semaphore_full, lock_recursion_error, synchronization_lock_error: .NET's
// InvalidOperationException family), bad arguments are std::invalid_argument (.NET
// ArgumentException), and aggregate_exception derives from std::exception directly, as .NET's
// AggregateException from Exception. docs/dotnet-mapping.md has the table.
//
// Example:
//   try { t.get(); }
//   catch (const tpl::aggregate_exception& e) {
//     for (const auto& inner : e.inner_exceptions()) log(inner);
//   }
//   try { co_await t; }
//   catch (const tpl::operation_canceled&) { /* canceled: catch it before std::runtime_error */ }
//   catch (const std::runtime_error& e) { /* any other run-time failure */ }
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpl {

/// Thrown by an operation that was canceled, and by awaiting a canceled task (.NET
/// OperationCanceledException and TaskCanceledException, both SystemExceptions: here a
/// std::runtime_error). A coroutine task whose body lets an operation_canceled escape ends in the
/// canceled state.
class operation_canceled : public std::runtime_error {
 public:
  /// what(): "The operation was canceled." Does not allocate (it shares one message buffer).
  operation_canceled() noexcept;
  /// A message of your own, as .NET's OperationCanceledException(string).
  explicit operation_canceled(const std::string& message) : std::runtime_error(message) {}
  explicit operation_canceled(const char* message) : std::runtime_error(message) {}
};

/// One or more exceptions, in a defined order (for when_all: the order of the tasks).
/// task::wait() and task::get() throw this; co_await rethrows the first inner exception instead.
class aggregate_exception : public std::exception {
 public:
  explicit aggregate_exception(std::vector<std::exception_ptr> inner);
  const char* what() const noexcept override { return message_.c_str(); }
  /// Never empty.
  const std::vector<std::exception_ptr>& inner_exceptions() const noexcept { return inner_; }
  std::size_t size() const noexcept { return inner_.size(); }
  /// Rethrows inner_exceptions()[0].
  [[noreturn]] void rethrow_first() const { std::rethrow_exception(inner_.front()); }

 private:
  std::vector<std::exception_ptr> inner_;
  std::string message_;
};

/// A wait that gave up at its timeout (.NET TimeoutException), e.g. task::wait_async(timeout).
class timeout_exception : public std::runtime_error {
 public:
  timeout_exception() : std::runtime_error("The operation has timed out.") {}
  using std::runtime_error::runtime_error;
};

/// A call that is not valid in the object's current state (a programming error reported clearly
/// rather than undefined behaviour).
class invalid_operation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Taking a lock the calling thread already holds, in a combination the lock does not allow
/// (.NET LockRecursionException): reader_writer_lock's read or write lock taken again while the
/// thread holds either, spin_lock taken again by its owner. Derives from invalid_operation, what
/// such misuse reports in general.
class lock_recursion_error : public invalid_operation {
 public:
  using invalid_operation::invalid_operation;
};

/// Releasing a lock the calling thread does not hold (.NET SynchronizationLockException):
/// reader_writer_lock::exit_read_lock / exit_write_lock, spin_lock::unlock with owner tracking.
class synchronization_lock_error : public invalid_operation {
 public:
  using invalid_operation::invalid_operation;
};

/// An operation on a channel that was completed (tpl/channel.hpp): a write after complete(), a
/// read_async once the channel is completed and drained, complete() called twice (.NET
/// ChannelClosedException). inner_exception() is the error the channel was completed with, if any.
class channel_closed : public invalid_operation {
 public:
  channel_closed();
  explicit channel_closed(std::exception_ptr inner);
  channel_closed(const std::string& message, std::exception_ptr inner = nullptr);
  /// The error passed to complete(error) / try_complete(error); null for a plain complete().
  const std::exception_ptr& inner_exception() const noexcept { return inner_; }

 private:
  std::exception_ptr inner_;
};

}  // namespace tpl
