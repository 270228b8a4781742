// tpl/sync/reader_writer_lock.hpp — many readers or one writer (.NET ReaderWriterLockSlim, no
// recursion policy), for threads; its waits spin briefly, then sleep in the kernel and tell the
// thread pool they block.
//
//   tpl::reader_writer_lock rw;
//   { tpl::read_lock r(rw);  auto v = table.find(k); }       // shared
//   { tpl::write_lock w(rw); table.insert(k, v); }            // exclusive
//   if (rw.try_enter_write_lock(std::chrono::milliseconds(5))) { ...; rw.exit_write_lock(); }
//
// Writers are preferred: once a writer waits, new readers wait behind it, so a stream of readers
// cannot starve writers. A waiting thread spins with spin_wait (pause, then yields: never a fixed
// 1 ms sleep, see docs/synchronization.md), then sleeps on a futex until the state changes: no
// acquisition waits longer than the lock is actually held.
//
// No recursion, as .NET's LockRecursionPolicy.NoRecursion: a thread that holds the lock, in either
// mode, and asks for it again in either mode (read in read, write in write, read in write, write
// in read) gets lock_recursion_error instead of a deadlock; exit_read_lock / exit_write_lock by a
// thread that does not hold that lock gets synchronization_lock_error (both derive from
// invalid_operation). Each thread records the read locks it holds (a small thread-local list), so
// a read lock is released by the thread that took it, as in .NET. Upgradeable read locks are not
// provided.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "tpl/time_provider.hpp"

namespace tpl {

class reader_writer_lock {
 public:
  reader_writer_lock() noexcept = default;
  reader_writer_lock(const reader_writer_lock&) = delete;
  reader_writer_lock& operator=(const reader_writer_lock&) = delete;

  void enter_read_lock();
  /// False if timeout (infinite_timeout: never) passes first; 0 only tries.
  bool try_enter_read_lock(std::chrono::nanoseconds timeout = std::chrono::nanoseconds(0));
  void exit_read_lock();

  void enter_write_lock();
  bool try_enter_write_lock(std::chrono::nanoseconds timeout = std::chrono::nanoseconds(0));
  void exit_write_lock();

  /// Snapshots (diagnostics).
  std::uint32_t current_read_count() const noexcept;
  bool is_write_lock_held() const noexcept;
  /// Whether the calling thread holds the write lock.
  bool is_write_lock_held_by_current_thread() const noexcept;
  std::uint32_t waiting_writer_count() const noexcept;

 private:
  // state_: bits 0..19 readers inside, bits 20..30 writers waiting, bit 31 a writer inside.
  static constexpr std::uint32_t kReaderMask = (1u << 20) - 1;
  static constexpr std::uint32_t kWaitingWriterOne = 1u << 20;
  static constexpr std::uint32_t kWaitingWriterMask = ((1u << 11) - 1) << 20;
  static constexpr std::uint32_t kWriterHeld = 1u << 31;

  /// Throws lock_recursion_error if the calling thread holds this lock in either mode.
  void check_read_entry() const;
  /// acquire_read_word, then records the read lock as the calling thread's.
  bool acquire_read(std::chrono::nanoseconds timeout);
  bool acquire_read_word(std::chrono::nanoseconds timeout);
  void release_read_word() noexcept;
  bool acquire_write(std::chrono::nanoseconds timeout);
  /// Sleeps until state_ differs from `seen` or the deadline passes; false on deadline.
  bool sleep_while(std::uint32_t seen, bool infinite, std::chrono::steady_clock::time_point deadline);
  void wake_sleepers() noexcept;

  std::atomic<std::uint32_t> state_{0};
  std::atomic<std::uint32_t> sleepers_{0};
  std::atomic<std::thread::id> writer_{};
};

/// RAII shared lock on a reader_writer_lock.
class [[nodiscard]] read_lock {
 public:
  explicit read_lock(reader_writer_lock& l) : l_(l) { l_.enter_read_lock(); }
  ~read_lock() { l_.exit_read_lock(); }
  read_lock(const read_lock&) = delete;
  read_lock& operator=(const read_lock&) = delete;

 private:
  reader_writer_lock& l_;
};

/// RAII exclusive lock on a reader_writer_lock.
class [[nodiscard]] write_lock {
 public:
  explicit write_lock(reader_writer_lock& l) : l_(l) { l_.enter_write_lock(); }
  ~write_lock() { l_.exit_write_lock(); }
  write_lock(const write_lock&) = delete;
  write_lock& operator=(const write_lock&) = delete;

 private:
  reader_writer_lock& l_;
};

}  // namespace tpl
