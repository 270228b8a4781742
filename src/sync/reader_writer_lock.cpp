// reader_writer_lock: one 32-bit word (readers inside, writers waiting, writer inside) changed by
// CAS, and a futex on that same word for sleeping. A sleeper counts itself in sleepers_ before
// re-checking the word; a releaser changes the word before reading sleepers_ (both seq_cst), so
// either the releaser sees the sleeper and wakes it, or the sleeper sees the new word and does not
// sleep (futex_wait also refuses to sleep on a changed word).
#include "tpl/sync/reader_writer_lock.hpp"

#include <cstddef>
#include <string>
#include <vector>

#include "tpl/detail/futex.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/sync/spin_wait.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl {

namespace {
/// spin_once() steps before a waiter sleeps: the pause phase and a few yields.
constexpr int kSpinStepsBeforeSleep = spin_wait::yield_threshold + 10;

/// The reader_writer_locks whose read lock the calling thread holds (the write lock's holder is
/// the lock's own writer_). A thread seldom holds more than a few at once: they sit in a small
/// inline array, the rest in a vector. Plain thread-local data: only its own thread touches it.
class held_read_locks {
 public:
  bool contains(const reader_writer_lock* l) const noexcept {
    for (int i = 0; i < inline_count_; ++i)
      if (inline_[i] == l) return true;
    for (const reader_writer_lock* m : more_)
      if (m == l) return true;
    return false;
  }
  /// Throws std::bad_alloc (with nothing added) only past kInline locks held at once.
  void add(const reader_writer_lock* l) {
    if (inline_count_ < kInline)
      inline_[inline_count_++] = l;
    else
      more_.push_back(l);
  }
  /// False if l is not held.
  bool remove(const reader_writer_lock* l) noexcept {
    for (std::size_t i = 0; i < more_.size(); ++i) {
      if (more_[i] == l) {
        more_[i] = more_.back();
        more_.pop_back();
        return true;
      }
    }
    for (int i = 0; i < inline_count_; ++i) {
      if (inline_[i] == l) {
        inline_[i] = inline_[--inline_count_];
        return true;
      }
    }
    return false;
  }

 private:
  static constexpr int kInline = 8;
  const reader_writer_lock* inline_[kInline] = {};
  int inline_count_ = 0;
  std::vector<const reader_writer_lock*> more_;
};

thread_local held_read_locks t_held_reads;

[[noreturn]] void throw_recursion(const char* what) {
  throw lock_recursion_error(std::string("tpl: reader_writer_lock: ") + what +
                             " (no recursion: .NET's LockRecursionPolicy.NoRecursion)");
}
}  // namespace

bool reader_writer_lock::sleep_while(std::uint32_t seen, bool infinite,
                                     std::chrono::steady_clock::time_point deadline) {
  detail::blocking_region blocked;
  // seq_cst: see the file comment (Dekker-style hand-shake with wake_sleepers()).
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  bool in_time = true;
  if (state_.load(std::memory_order_seq_cst) == seen) {
    if (infinite)
      detail::futex_wait(&state_, seen);
    else
      in_time = detail::futex_wait_until(&state_, seen, deadline);
  }
  // relaxed: only a count; the next state_ load does the synchronising.
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
  return in_time;
}

void reader_writer_lock::wake_sleepers() noexcept {
  // seq_cst: after our seq_cst change of state_; see the file comment.
  if (sleepers_.load(std::memory_order_seq_cst) != 0) detail::futex_wake_all(&state_);
}

void reader_writer_lock::check_read_entry() const {
  if (is_write_lock_held_by_current_thread())
    throw_recursion("the calling thread holds the write lock and asks for a read lock");
  if (t_held_reads.contains(this)) throw_recursion("the calling thread already holds a read lock");
}

bool reader_writer_lock::acquire_read(std::chrono::nanoseconds timeout) {
  if (!acquire_read_word(timeout)) return false;
  try {
    t_held_reads.add(this);
  } catch (...) {  // out of memory recording it: give the read lock back, report the failure
    release_read_word();
    throw;
  }
  return true;
}

bool reader_writer_lock::acquire_read_word(std::chrono::nanoseconds timeout) {
  const bool infinite = detail::is_infinite(timeout);
  const auto deadline =
      detail::saturating_add(std::chrono::steady_clock::now(), infinite ? std::chrono::nanoseconds(0) : timeout);
  spin_wait sw;
  // relaxed first read: the CAS below acquires.
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    if ((s & (kWriterHeld | kWaitingWriterMask)) == 0) {
      if ((s & kReaderMask) == kReaderMask) throw invalid_operation("tpl: reader_writer_lock: too many readers");
      // acquire: the read section sees the last writer's writes. seq_cst also orders it before
      // a later release's read of sleepers_ (not needed here, harmless).
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) return true;
      continue;
    }
    if (timeout.count() == 0) return false;
    if (sw.count() < kSpinStepsBeforeSleep) {
      sw.spin_once();
    } else if (!sleep_while(s, infinite, deadline)) {
      return false;
    }
    if (!infinite && std::chrono::steady_clock::now() >= deadline) return false;
    s = state_.load(std::memory_order_relaxed);  // relaxed: the CAS acquires
  }
}

bool reader_writer_lock::acquire_write(std::chrono::nanoseconds timeout) {
  if (is_write_lock_held_by_current_thread()) throw_recursion("the calling thread already holds the write lock");
  if (t_held_reads.contains(this))
    throw_recursion("the calling thread holds a read lock and asks for the write lock (no upgrade)");
  const bool infinite = detail::is_infinite(timeout);
  const auto deadline =
      detail::saturating_add(std::chrono::steady_clock::now(), infinite ? std::chrono::nanoseconds(0) : timeout);
  // relaxed first read: the CAS below acquires.
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  // Fast path: free lock.
  if (s == 0 && state_.compare_exchange_strong(s, kWriterHeld, std::memory_order_acquire, std::memory_order_relaxed)) {
    // relaxed: read back only by this thread, or for diagnostics.
    writer_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  if (timeout.count() == 0) return false;
  if ((s & kWaitingWriterMask) == kWaitingWriterMask)
    throw invalid_operation("tpl: reader_writer_lock: too many waiting writers (2047)");
  // Announce ourselves so that new readers queue behind us. seq_cst: a state change (see file comment).
  s = state_.fetch_add(kWaitingWriterOne, std::memory_order_seq_cst) + kWaitingWriterOne;
  spin_wait sw;
  for (;;) {
    if ((s & (kWriterHeld | kReaderMask)) == 0) {
      // acquire: the write section sees the previous holders' writes.
      if (state_.compare_exchange_weak(s, (s - kWaitingWriterOne) | kWriterHeld, std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
        writer_.store(std::this_thread::get_id(), std::memory_order_relaxed);  // relaxed: as above
        return true;
      }
      continue;
    }
    bool in_time = true;
    if (sw.count() < kSpinStepsBeforeSleep) {
      sw.spin_once();
    } else {
      try {
        in_time = sleep_while(s, infinite, deadline);
      } catch (...) {  // the pool refused blocking here: withdraw, as on a timeout
        state_.fetch_sub(kWaitingWriterOne, std::memory_order_seq_cst);  // seq_cst: a state change
        wake_sleepers();
        throw;
      }
    }
    if (!in_time || (!infinite && std::chrono::steady_clock::now() >= deadline)) {
      // Withdraw: readers held back by our announcement may go now. seq_cst: a state change.
      state_.fetch_sub(kWaitingWriterOne, std::memory_order_seq_cst);
      wake_sleepers();
      return false;
    }
    s = state_.load(std::memory_order_relaxed);  // relaxed: the CAS acquires
  }
}

void reader_writer_lock::enter_read_lock() {
  check_read_entry();
  (void)acquire_read(std::chrono::nanoseconds(infinite_timeout));
}
bool reader_writer_lock::try_enter_read_lock(std::chrono::nanoseconds timeout) {
  detail::check_timeout(timeout, "reader_writer_lock::try_enter_read_lock");
  check_read_entry();
  return acquire_read(timeout);
}
void reader_writer_lock::enter_write_lock() { (void)acquire_write(std::chrono::nanoseconds(infinite_timeout)); }
bool reader_writer_lock::try_enter_write_lock(std::chrono::nanoseconds timeout) {
  detail::check_timeout(timeout, "reader_writer_lock::try_enter_write_lock");
  return acquire_write(timeout);
}

void reader_writer_lock::exit_read_lock() {
  if (!t_held_reads.remove(this))
    throw synchronization_lock_error(
        "tpl: reader_writer_lock::exit_read_lock: the calling thread does not hold a read lock");
  release_read_word();
}

void reader_writer_lock::release_read_word() noexcept {
  // relaxed first read: the CAS releases.
  std::uint32_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    // The thread's record says it holds a read lock, so the word counts it: never zero here.
    // release: publishes the read section (its reads) before a writer enters; seq_cst for the
    // hand-shake with sleepers (file comment).
    if (state_.compare_exchange_weak(s, s - 1, std::memory_order_seq_cst, std::memory_order_relaxed)) break;
  }
  // Only the last reader out can unblock someone (a waiting writer).
  if ((s & kReaderMask) == 1 && (s & kWaitingWriterMask) != 0) wake_sleepers();
}

void reader_writer_lock::exit_write_lock() {
  if (!is_write_lock_held_by_current_thread())
    throw synchronization_lock_error(
        "tpl: reader_writer_lock::exit_write_lock: the calling thread does not hold the write lock");
  writer_.store(std::thread::id{}, std::memory_order_relaxed);  // relaxed: published by the RMW below
  // release: publishes the write section; seq_cst for the hand-shake with sleepers.
  state_.fetch_and(~kWriterHeld, std::memory_order_seq_cst);
  wake_sleepers();
}

std::uint32_t reader_writer_lock::current_read_count() const noexcept {
  return state_.load(std::memory_order_relaxed) & kReaderMask;  // relaxed: a snapshot
}
bool reader_writer_lock::is_write_lock_held() const noexcept {
  return (state_.load(std::memory_order_relaxed) & kWriterHeld) != 0;  // relaxed: a snapshot
}
bool reader_writer_lock::is_write_lock_held_by_current_thread() const noexcept {
  // relaxed: only this thread stores its own id there.
  return writer_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}
std::uint32_t reader_writer_lock::waiting_writer_count() const noexcept {
  return (state_.load(std::memory_order_relaxed) & kWaitingWriterMask) >> 20;  // relaxed: a snapshot
}

}  // namespace tpl
