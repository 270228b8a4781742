// tpl/detail/channel_core.hpp — the shared state behind tpl::channel<T>: the buffered items,
// four FIFO queues of waiting operations and the completion state (internal; the public face is
// tpl/channel.hpp).
//
// Two modes. A new channel keeps its items in a growable ring under a short lock, and every
// operation takes the lock (a channel that carries a few items, like each link of a chain of a
// million channels, stays this small). After its warm-up writes (channel_fast_ring_warmup) a wait-mode
// bounded channel of capacity 2 or more, or an unbounded one, moves its items to a lock-free
// ring (channel_fast_ring.hpp): then a read or write that finds an item or room, with nobody
// waiting, touches no lock, only the ring's index and slot lines. A bounded channel's ring has
// the largest power of two within its capacity (up to 1024) and the rest waits in a locked
// overflow behind it; an unbounded channel that fills its ring links a twice larger one.
// Drop modes and rendezvous channels stay locked.
//
// The gate. One atomic word says whether the lock-free paths may go ahead: it is 0 when the
// channel is on its ring, nobody waits, it is not completed and nothing overflows. Everything
// else (waiting, hand-over, completion, overflow) is decided under the lock, as in locked mode.
// Waiting against lock-free operations is a Dekker handshake: an operation about to wait first
// counts itself in the gate (seq_cst) and then tries once more under the lock. A lock-free write
// claims its slot (a seq_cst CAS on the ring's write position), reads the gate, and then
// publishes its item (release); if someone waited, it takes the lock and serves them
// (service()). Either the writer sees the waiter, or the waiter sees the claim: then the item is
// there or about to be, and the waiter does not wait but tries again once it is published
// (start()). The write pays one locked instruction, the claim, and no fence: a fence after the
// publication stalls on the slot's line, which the reader's core holds. Reads mirror this for
// writers waiting for room (claim, look, free; a writer about to wait that sees a slot claimed
// but not yet freed tries again) and for completion: the reader that takes the last item of a
// completed channel finishes it.
//
// A claim whose thread is descheduled between claim and publication would keep such a waiter
// retrying; it watches for kChannelClaimWaits rounds and then queues anyway, marks the gate
// kStraggler, and runs a heavy fence (asymmetric_fence_heavy) before it serves the channel once
// more. Every lock-free write (read) looks at the gate's kStraggler a second time after its
// publication (freeing), with only the light half of the fence: either its publication was
// visible to the waiter's service() after the heavy fence, or its second look sees the mark and
// it serves the waiter.
//
// Protocol. Every decision about a waiting operation (handed an item, given room, completed,
// canceled, channel destroyed) is made under the lock by unlinking its node and marking it
// resolved, so exactly one party resolves each node; the node's continuation is then resumed
// outside the lock. The node lives in the awaiting coroutine's frame (inside the awaiter), so
// neither the synchronous nor the waiting path allocates.
//
// Cancellation. The token callback only ever takes the lock and, if the node is still queued,
// unlinks it. A node is registered with its token before it is queued; a callback that runs before
// the node is queued leaves a mark that the queuing code sees under the lock. Whoever resolves a
// node other than its own callback resets the registration before resuming the coroutine (waiting
// for a callback running on another thread), so a callback never touches a core that is gone.
//
// Files (one mechanism each; docs/internals.md states the protocol as the invariants that
// tests/model_channel_protocol_test.cpp checks):
//   channel_waiters.hpp          nodes, their FIFO queues, the wake list
//   channel_ring.hpp             the locked buffer (and the overflow behind the ring)
//   channel_fast_ring.hpp        the lock-free ring
//   channel_settings.hpp         the settings a channel is made with, the tuning constants
//   channel_core.hpp             this class: the gate, the layout
//   channel_core_fast.hpp        the lock-free fast paths
//   channel_core_buffer.hpp      moving items between the locked buffer and the ring
//   channel_core_waiting.hpp     locked attempts, waiting, cancellation, serving waiters
//   channel_core_completion.hpp  completion and finishing a drained channel
//   src/channel.cpp              what is not a template (errors, waking, write budget)
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/asymmetric_fence.hpp"
#include "tpl/detail/channel_fast_ring.hpp"
#include "tpl/detail/channel_ring.hpp"
#include "tpl/detail/channel_settings.hpp"
#include "tpl/detail/channel_waiters.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/cpu_count.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/detail/task_state.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/task_completion_source.hpp"

namespace tpl {
namespace detail {

template <class T>
class channel_core final {
 public:
  using item_node = channel_item_node<T>;
  using fast_ring = channel_fast_ring<T>;

  // From the frame pool, as a block of at least kAllocBytes: a chunk above the allocator's
  // never-coalescing small-chunk range, so that many freed cores do not cut the free space of
  // the coroutine frames around them into pieces (docs/channels.md, Costs, says why 136).
  static constexpr std::size_t kAllocBytes = 136;
  static void* operator new(std::size_t n) { return frame_alloc(n < kAllocBytes ? kAllocBytes : n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n < kAllocBytes ? kAllocBytes : n); }

  channel_core(channel_settings settings, std::function<void(T)> item_dropped)
      : capacity_(settings.capacity),
        ring_warmup_(channel_fast_ring_warmup.load(std::memory_order_relaxed)),
        mode_(pack_mode(settings)) {
    // Kept out of line: most channels have no callback, and the core stays small (a program may make
    // a million channels). relaxed: nobody else sees the core yet.
    if (item_dropped) cold_.store(new cold_state{{}, {}, std::move(item_dropped)}, std::memory_order_relaxed);
    if (ring_warmup_ == 0 && ring_eligible()) enable_ring_locked();  // nobody else sees the core yet
  }
  channel_core(const channel_core&) = delete;
  channel_core& operator=(const channel_core&) = delete;

  /// Nodes still queued fail with channel_closed ("destroyed"); items still buffered are destroyed.
  ~channel_core() {
    channel_wake_list wake;
    {
      std::lock_guard g(lock_);
      for (channel_node_queue* q : {&readers_, &writers_, &read_waiters_, &write_waiters_})
        while (!q->empty()) resolve(wake, take_front(*q), channel_outcome::failed, make_channel_destroyed());
    }
    wake.wake_all(false);
    // relaxed: the last owner, nobody else is here.
    std::unique_ptr<cold_state> cold(cold_.load(std::memory_order_relaxed));
    if (cold && cold->completion && !done_) cold->completion->try_set_exception(make_channel_destroyed());
    delete ring_.load(std::memory_order_relaxed);
  }

  // relaxed: a new handle is copied from a live one, which keeps the count above zero.
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    // acq_rel: the last owner must see every other owner's writes before destroying the core.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  /// Reads (read_async, next_async) and wait_to_read_async operations queued waiting, under the
  /// lock: for tests, through tpl::testing::queued_waiters (O(their number)).
  std::size_t queued_reader_operations_for_testing() const noexcept {
    std::lock_guard g(lock_);
    return readers_.size() + read_waiters_.size();
  }
  /// Writes (write_async) and wait_to_write_async operations queued waiting, as above.
  std::size_t queued_writer_operations_for_testing() const noexcept {
    std::lock_guard g(lock_);
    return writers_.size() + write_waiters_.size();
  }

  channel_settings settings() const noexcept {
    return channel_settings{capacity_, full_mode(), has_mode(kSingleReader), has_mode(kSingleWriter),
                            has_mode(kSynchronous)};
  }
  std::size_t capacity() const noexcept { return capacity_; }

  // ---- writer side ---------------------------------------------------------------------------

  /// The common case of a busy channel, in as few instructions as possible: room in the buffer,
  /// nobody waiting, not completed (lock-free on the ring; under the lock without one, or to join
  /// the overflow). Writes item and returns true; otherwise touches nothing and returns false (the
  /// caller takes the general path, which handles every other case).
  bool try_write_fast(T& item);

  /// Writes item (moved from only on success). False if the channel is full (wait mode), for a
  /// rendezvous channel no reader is waiting, or the channel is completed.
  bool try_write(T& item);
  /// try_write past its lock-free answers (out of line: the fast paths stay small where inlined).
  bool try_write_locked(T& item);

  /// Throws std::bad_alloc, with the channel unchanged, if the block that keeps the error cannot
  /// be allocated.
  bool try_complete(std::exception_ptr error);

  // ---- reader side ---------------------------------------------------------------------------

  /// The reading twin of try_write_fast: an item is there and nobody waits. On the ring it takes
  /// the item lock-free (and comes to the lock afterwards only if it must: a writer waits for
  /// room, the overflow needs moving up, or it took a completed channel's last item). Without a
  /// ring it refuses a completed channel's last item (the general path finishes the channel).
  /// Takes the oldest item into out and returns true; otherwise returns false.
  bool try_read_fast(std::optional<T>& out);

  /// try_read's answer "nothing to read" without the lock, when it is plain: on the ring, nobody
  /// waiting, not completed, nothing in the overflow, and the ring has no published item at its
  /// front. The locked attempt would find the same (read_locked: nothing to pop, no writer to
  /// take from, not completed), so a reader draining the channel with try_read until it fails
  /// pays no lock for the last call.
  bool plainly_empty_fast() const noexcept;

  /// try_write's answer "no room" without the lock, when it is plain: on the ring, nobody
  /// waiting, not completed, a capacity that is exactly the ring's (no overflow behind it), and
  /// the ring full. The locked attempt would find the same (write_locked: no reader to hand the
  /// item to, no room), so a writer that meets a full channel pays no lock to learn it.
  bool plainly_full_fast() const noexcept;

  /// wait_to_read_async / wait_to_write_async without the lock when the answer is plainly yes: an
  /// item (room) is there on the ring and nobody waits.
  bool wait_ready_fast(channel_op op) const noexcept;

  /// Before an asynchronous operation on the ring waits (queues, suspends, and is woken through
  /// the pool later), it watches the ring for a moment: with the other side running on another
  /// core, the item or room it lacks usually comes within a few hundred nanoseconds, far sooner
  /// than a suspension round trip. Returns true when op's fast path may succeed now; false at
  /// once without a ring, or when operations are already queued (they come first).
  bool spin_for(channel_op op) const noexcept;

  /// Takes the oldest item into out. False if none is there (or the channel is done).
  bool try_read(std::optional<T>& out);
  /// try_read past its lock-free answers (out of line, as try_write_locked).
  bool try_read_locked(std::optional<T>& out);

  template <class F>
  bool peek(F&& copy_out) {
    std::lock_guard g(lock_);
    for (fast_ring* r = rring(); r != nullptr; r = r->next()) {
      if (r->peek(copy_out)) return true;
      // The front of the ring is being written (a write still in progress: it comes first), or
      // the ring is empty and the oldest item is in the next ring or waits in the overflow.
      if (r->count() != 0) return false;
    }
    if (items_.empty()) return false;
    copy_out(static_cast<const T&>(items_.front()));
    return true;
  }

  std::size_t count() const noexcept {
    std::lock_guard g(lock_);
    return buffer_size_locked();
  }

  task<> completion();

  // ---- asynchronous operations ---------------------------------------------------------------

  /// Runs op for node under the lock. Returns true if the node is resolved now (its outcome is
  /// set; the caller continues without suspending). Otherwise, if may_queue, the node is queued
  /// (it will be resolved and resumed later) and false is returned; if not, nothing happened.
  bool start(channel_op op, channel_node& node, bool may_queue);

  /// The token callback of a started node.
  void cancel(channel_op op, channel_node& node) noexcept;

 private:
  enum class write_result { written, full, closed };
  enum class read_result { taken, empty, closed };

  static constexpr bool is_read_side(channel_op op) noexcept {
    return op != channel_op::write && op != channel_op::wait_to_write;
  }

  /// After op's attempt failed under the lock: whether the other side has claimed a ring slot
  /// and not finished with it (start() then does not queue op, see there). For a read: an item
  /// is counted in the ring that the attempt could not take (its front is being written, or was
  /// published since). For a write: the ring's count has room the attempt could not use (a slot
  /// that a reader took and had not freed yet, or has freed since).
  bool claim_in_progress_locked(channel_op op) const noexcept;

  /// The claim start() saw is a few instructions from done, unless its thread was preempted in
  /// between: watch briefly; true if it looks done. Otherwise give the processor away once and
  /// return false (start() counts these rounds and stops watching after kChannelClaimWaits).
  bool wait_for_claim(channel_op op) const noexcept;

  // The gate: one word the lock-free paths read to know they may go ahead (it is 0 then). Changed
  // only under the lock.
  static constexpr std::uint32_t kLockedMode = 1;  // no ring (yet): every operation takes the lock
  static constexpr std::uint32_t kCompleted = 2;   // no more writes
  static constexpr std::uint32_t kOverflow = 4;    // items wait in the overflow behind the ring
  // A node queued past a claim in progress (start()'s queue_anyway): the lock-free paths' second
  // look is for it. Set only with a node counted; cleared when the count drops to 0.
  static constexpr std::uint32_t kStraggler = 8;
  static constexpr std::uint32_t kWaitUnit = 16;   // one node queued (or announcing, see start())

  // Nodes leave the four queues only through these two (and join them only in enqueue_locked,
  // announced by start()), which keeps the gate's count exact.
  channel_node* take_front(channel_node_queue& q) noexcept {
    gate_count_locked(-1);  // lowering the count only sends fewer operations to the lock
    return q.pop_front();
  }
  void unlink(channel_node_queue& q, channel_node* n) noexcept {
    gate_count_locked(-1);  // as in take_front
    q.remove(n);
  }

  /// Counts one node more (+1) or less (-1) in the gate; kStraggler goes when the count drops to
  /// 0 (no node is left for a second look to serve). Under the lock: the gate changes only under
  /// it, so a load and a store (relaxed: a count the lock-free paths read as a hint to come to the
  /// lock, as a relaxed read-modify-write would be) do without a locked instruction.
  void gate_count_locked(int delta) noexcept {
    const std::uint32_t g = gate_.load(std::memory_order_relaxed);
    std::uint32_t next = delta > 0 ? g + kWaitUnit : g - kWaitUnit;
    if (next < kWaitUnit) next &= ~kStraggler;
    gate_.store(next, std::memory_order_relaxed);
  }

  static void resolve(channel_wake_list& wake, channel_node* n, channel_outcome outcome,
                      std::exception_ptr error) noexcept {
    n->state = channel_node_state::resolved;
    n->outcome = outcome;
    if (error) n->set_error(std::move(error));  // skips an out-of-line exception_ptr assignment
    wake.add(n);
  }

  channel_node_queue& queue_of(channel_op op) noexcept {
    switch (op) {
      case channel_op::read:
      case channel_op::next:
        return readers_;
      case channel_op::write:
        return writers_;
      case channel_op::wait_to_read:
        return read_waiters_;
      case channel_op::wait_to_write:
        break;
    }
    return write_waiters_;
  }

  // ---- the buffer: items_ alone (locked mode), or the ring with items_ as its overflow --------
  //
  // On the ring, items_ holds the items written while the ring was full (newer than every item in
  // the ring); while it is not empty, kOverflow sends writers to the lock, so the order is kept.
  // A bounded channel keeps at most capacity - ring size items there.

  // acquire: the ring's construction (and, after a growth, the items moved into it).
  fast_ring* ring() const noexcept { return ring_.load(std::memory_order_acquire); }
  /// The ring readers take from: ring() itself, or, after an unbounded channel outgrew its ring,
  /// the oldest one not yet drained (its next() leads to ring()).
  fast_ring* rring() const noexcept { return read_ring_.load(std::memory_order_acquire); }

  bool ring_eligible() const noexcept {
    // (T is nothrow move constructible: tpl::channel requires it, and the ring relies on it.)
    return capacity_ >= 2 &&
           (capacity_ == kUnboundedChannelCapacity || full_mode() == bounded_channel_full_mode::wait);
  }

  /// Counts a write taken under the lock; the warm-up's last one moves the channel to the ring.
  void count_write_locked() {
    if (ring_warmup_ != 0 && --ring_warmup_ == 0 && ring_eligible()) enable_ring_locked();
  }

  TPL_NOINLINE void enable_ring_locked();

  /// An unbounded channel outgrew its ring: a twice larger one takes the writes from now on;
  /// readers drain the old one first, then move on (see pop_buffer_locked). Nothing is copied,
  /// and every path stays lock-free at any backlog.
  TPL_NOINLINE fast_ring* grow_ring_locked();

  /// The read ring is drained and closed (not the write ring): readers move to the next one.
  bool advance_read_ring_locked() noexcept;

  /// How many items may wait behind the ring.
  std::size_t overflow_capacity() const noexcept {
    return capacity_ == kUnboundedChannelCapacity ? kUnboundedChannelCapacity : capacity_ - ring()->size();
  }

  /// Moves overflow items (oldest first) into the ring while it has room; clears kOverflow once
  /// the overflow is empty.
  void refill_locked();

  /// Puts item into the buffer if it has room (item moved from only then).
  bool push_buffer_locked(T& item);

  /// Takes the oldest buffered item into out.
  bool pop_buffer_locked(std::optional<T>& out);

  /// Whether an item can be taken now (an item being written on the ring does not count).
  bool buffer_has_ready_locked() const noexcept;
  /// Whether no item is in the channel (an item being written on the ring counts).
  bool buffer_empty_locked() const noexcept { return buffer_size_locked() == 0; }
  std::size_t buffer_size_locked() const noexcept;

  bool has_room_locked() const noexcept;

  // ---- lock-free readers and writers that found someone waiting ------------------------------

  /// After a lock-free read found the gate not 0: whether the lock has work to do.
  bool needs_service_after_read(std::uint32_t g, std::uint64_t pos) const noexcept;

  /// Serves, under the lock, whatever a lock-free operation may have left undone: waiting
  /// readers get ring items, waiting writers get room, the overflow moves up, a completed and
  /// drained channel finishes.
  TPL_NOINLINE void service();

  /// Blocked readers (oldest first) take buffered items (with a ring: items that were being
  /// written when the readers queued, or written behind those).
  void serve_readers_locked(channel_wake_list& wake);

  /// Room was made: blocked writers (oldest first) put their items in, then wait_to_write wakes.
  void give_room_locked(channel_wake_list& wake);

  void wake_waiters_locked(channel_node_queue& q, channel_wake_list& wake) noexcept {
    while (!q.empty()) resolve(wake, take_front(q), channel_outcome::ok, nullptr);
  }

  write_result write_locked(T& item, channel_wake_list& wake, std::optional<T>& dropped);

  read_result read_locked(std::optional<T>& out, channel_wake_list& wake, bool& now_done);

  /// The synchronous attempt of op. True if node is resolved.
  bool attempt_locked(channel_op op, channel_node& node, channel_wake_list& wake, std::optional<T>& dropped,
                      bool& now_done);

  void enqueue_locked(channel_op op, channel_node& node, channel_wake_list& wake);

  /// Completed and drained: every reader learns it. Returns true (the completion task is due).
  bool mark_done_locked(channel_wake_list& wake) noexcept;

  /// After the lock: the item-dropped callback, the completion task, then the wake-ups, last
  /// because a resumed coroutine may destroy the channel (synchronous: read before any of them).
  void finish(channel_wake_list& wake, std::optional<T>& dropped, bool now_done, bool synchronous);

  void finish_done(bool now_done) noexcept;

  // What a channel rarely needs, out of line so that the core stays small (a program may have a
  // million channels): made by the constructor when there is an item-dropped callback, else by the
  // first completion() call or completion with an error.
  struct cold_state {
    std::exception_ptr error;  // the completion error; no longer changes once completed_ is set
    std::unique_ptr<task_completion_source<>> completion;  // made by the first completion() call
    std::function<void(T)> item_dropped;                   // set by the constructor only
  };

  static constexpr std::uint8_t kFullModeBits = 3;  // bounded_channel_full_mode, 2 bits
  static constexpr std::uint8_t kSingleReader = 4;
  static constexpr std::uint8_t kSingleWriter = 8;
  static constexpr std::uint8_t kSynchronous = 16;
  static_assert(static_cast<std::uint8_t>(bounded_channel_full_mode::drop_write) <= kFullModeBits);

  static std::uint8_t pack_mode(const channel_settings& s) noexcept {
    return static_cast<std::uint8_t>(static_cast<std::uint8_t>(s.full_mode) | (s.single_reader ? kSingleReader : 0) |
                                     (s.single_writer ? kSingleWriter : 0) |
                                     (s.synchronous_continuations ? kSynchronous : 0));
  }
  bool has_mode(std::uint8_t bit) const noexcept { return (mode_ & bit) != 0; }
  bounded_channel_full_mode full_mode() const noexcept {
    return static_cast<bounded_channel_full_mode>(mode_ & kFullModeBits);
  }

  /// The cold state, made if need be (under the lock; may throw bad_alloc before changing anything).
  /// The cold block, made (from spare, if given) when there is none yet. Under the lock.
  cold_state& cold_locked(std::unique_ptr<cold_state> spare = nullptr) {
    cold_state* c = cold_if_any_locked();
    if (c == nullptr) {
      c = spare ? spare.release() : new cold_state{};
      // release: finish() reads it without the lock (acquire).
      cold_.store(c, std::memory_order_release);
    }
    return *c;
  }
  /// The completion error (null if none or not completed). Under the lock.
  const std::exception_ptr& error_locked() const noexcept {
    static const std::exception_ptr none;
    const cold_state* c = cold_if_any_locked();
    return c != nullptr ? c->error : none;
  }
  /// Whether completion() made its task source. Under the lock.
  bool has_completion_locked() const noexcept {
    const cold_state* c = cold_if_any_locked();
    return c != nullptr && c->completion != nullptr;
  }
  /// The cold state if it was made. Under the lock.
  cold_state* cold_if_any_locked() const noexcept {
    return cold_.load(std::memory_order_relaxed);  // relaxed: written only under the lock we hold
  }

  // 96 bytes in all (allocated as 136, see kAllocBytes). The lock-free
  // paths read the gate and the ring pointers on every operation; the locked paths write the lock
  // on every operation (in overflow, a producer takes the lock per item while its consumer reads
  // the ring). The lock is 64 bytes or more after every field the lock-free paths read, so never
  // on one cache line with them; what changes rarely sits between. The locked buffer's indexes
  // live in its own block (channel_ring), not here.
  std::atomic<std::uint32_t> gate_{kLockedMode};
  std::atomic<std::uint32_t> refs_{1};
  // Set under the lock: first published through the gate (kLockedMode's removal), later replaced
  // by a larger one when an unbounded channel outgrows it; owns the rings it replaced.
  std::atomic<fast_ring*> ring_{nullptr};
  std::atomic<fast_ring*> read_ring_{nullptr};  // see rring()
  const std::size_t capacity_;                  // read by the fast paths
  // Set once (under the lock, or by the constructor), deleted by the destructor.
  std::atomic<cold_state*> cold_{nullptr};
  channel_node_queue readers_;        // read_async / next_async, FIFO
  channel_node_queue writers_;        // write_async blocked with their item, FIFO
  channel_node_queue read_waiters_;   // wait_to_read_async
  channel_node_queue write_waiters_;  // wait_to_write_async
  channel_ring<T> items_;             // the buffer without a ring; the overflow with one
  std::uint32_t ring_warmup_;         // writes under the lock left before the ring
  mutable short_lock lock_;
  bool completed_ = false;    // no more writes
  bool done_ = false;         // completed and drained
  const std::uint8_t mode_;   // the other settings: full mode and kSingleReader/Writer, kSynchronous
};

}  // namespace detail
}  // namespace tpl

// The member functions of channel_core, one mechanism per file. They are defined `inline`, as
// they would be inside the class: g++ -O2 inlines a function declared inline far more readily,
// and the lock-free fast paths (try_write, try_read) must fold into their callers.
#include "tpl/detail/channel_core_buffer.hpp"      // IWYU pragma: export
#include "tpl/detail/channel_core_fast.hpp"        // IWYU pragma: export
#include "tpl/detail/channel_core_completion.hpp"  // IWYU pragma: export
#include "tpl/detail/channel_core_waiting.hpp"     // IWYU pragma: export
