// tpl/detail/channel_core.hpp — the shared state behind tpl::channel<T>: the buffered items,
// four FIFO queues of waiting operations and the completion state (internal; the public face is
// tpl/channel.hpp).
//
// Two modes. A new channel keeps its items in a growable ring under a short lock, and every
// operation takes the lock (a channel that carries a few items, like each link of seed 001's
// chain, stays this small). After its warm-up writes (channel_fast_ring_warmup) a wait-mode
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
// retrying; it watches for kChannelClaimWaits rounds and then queues anyway, and runs a heavy
// fence (asymmetric_fence_heavy) before it serves the channel once more. Every lock-free write
// (read) looks at the gate a second time after its publication (freeing), with only the light
// half of the fence: either its publication was visible to the waiter's service() after the
// heavy fence, or its second look sees the waiter counted and it serves it.
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
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
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
#include "tpl/detail/config.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/detail/task_state.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/task_completion_source.hpp"

namespace tpl {

/// What a bounded channel does with a write when it is full (.NET BoundedChannelFullMode).
enum class bounded_channel_full_mode : std::uint8_t {
  wait,         ///< the write waits for room (try_write returns false)
  drop_newest,  ///< the newest item in the channel is dropped to make room
  drop_oldest,  ///< the oldest item in the channel is dropped to make room
  drop_write,   ///< the item being written is dropped (the write still reports success)
};

namespace detail {

/// Capacity of an unbounded channel.
inline constexpr std::size_t kUnboundedChannelCapacity = std::numeric_limits<std::size_t>::max();
/// First allocation of a channel's ring buffer, in items (it doubles from there as needed).
inline constexpr std::size_t kChannelRingInitialSlots = 16;
/// Slots of the lock-free ring of a bounded channel at most (with a larger capacity, the items
/// beyond the ring wait in a locked overflow behind it).
inline constexpr std::size_t kChannelFastRingMaxSlots = 1024;
/// Slots of an unbounded channel's first ring (each ring it outgrows is followed by one twice
/// as large).
inline constexpr std::size_t kChannelFastRingFirstUnboundedSlots = 64;

/// Writes a channel takes under its lock before it switches to the lock-free ring (a channel that
/// carries a few items, like each of the million links of seed 001's chain, never allocates one).
/// Read when a channel is created; tests set it to 0 to run every channel on the ring from the
/// start (relaxed: a setting, not a synchronization).
inline std::atomic<std::uint32_t> channel_fast_ring_warmup{64};

/// How many times an operation that found the ring full (empty) looks again before it waits.
inline constexpr int kChannelSpinChecks = 32;

/// Rounds (kChannelSpinChecks looks, then a yield) an operation about to wait watches a ring slot
/// that another thread claimed and has not published (freed) yet, before it queues anyway.
inline constexpr int kChannelClaimWaits = 4;

/// Writes to unbounded channels that a pool worker completes at once before the writing coroutine
/// lets the worker's other work run (see unbounded_write_yields).
inline constexpr unsigned kChannelWriteBudget = 8192;

/// Counts a write_async to an unbounded channel that completed without waiting, on this thread;
/// true for every kChannelWriteBudget-th on a thread pool worker: the writer then yields (it
/// queues behind the worker's other work, as tpl::yield()). An unbounded channel's writer never
/// waits, so without this a producer keeps its worker to the end while the consumers it woke
/// wait behind it (tokio's cooperative budget does the same for its channels).
bool unbounded_write_yields() noexcept;

enum class channel_op : std::uint8_t { read, next, write, wait_to_read, wait_to_write };

/// Where a waiting node is, or how it ended (guarded by the core's lock once it was started).
enum class channel_node_state : std::uint8_t {
  idle,              ///< not started
  queued,            ///< in one of the core's queues
  cancel_requested,  ///< its token fired before it was queued
  resolved,          ///< outcome is final; whoever set it resumes the coroutine
};

/// How an operation ended.
enum class channel_outcome : std::uint8_t {
  none,
  ok,      ///< item read / written, or wait_to_* returned true
  closed,  ///< the channel is completed (error: the completion error, may be null)
  failed,  ///< rethrow error as is (canceled, misuse, channel destroyed)
};

[[noreturn]] void throw_channel_closed(const std::exception_ptr& completion_error);
[[noreturn]] void throw_channel_misuse(const char* what);
std::exception_ptr make_channel_canceled();
std::exception_ptr make_channel_misuse(const char* what);
std::exception_ptr make_channel_destroyed();
std::exception_ptr make_channel_complete_twice();
void check_channel_capacity(std::ptrdiff_t capacity, bounded_channel_full_mode mode);

/// A waiting operation: lives inside the awaiter, in the awaiting coroutine's frame. Two pairs of
/// fields are never needed at once and share their storage, so that an awaiter is 56 bytes for a
/// small T instead of 72 (g++ gives every co_await of a coroutine its own awaiter in the frame:
/// a seed 001 link has two): prev (while queued) with error (once resolved with one; a resolved
/// node is in no queue), and the operation's token (until the awaiter registers with it) with
/// its registration (from then on; a linked registration holds its own reference to the
/// token's state).
struct channel_node {
  channel_node() noexcept : prev(nullptr), token() {}
  channel_node(const channel_node&) = delete;
  channel_node& operator=(const channel_node&) = delete;
  ~channel_node() {
    if (has_error) error.~exception_ptr();
    if (registered)
      registration.~cancellation_registration();
    else
      token.~cancellation_token();
  }

  union {
    channel_node* prev;       ///< while queued (has_error false)
    std::exception_ptr error;  ///< once resolved with an error (has_error true)
  };
  channel_node* next = nullptr;
  std::coroutine_handle<> continuation;
  union {
    cancellation_token token;                 ///< until registered
    cancellation_registration registration;  ///< once registered
  };
  channel_node_state state = channel_node_state::idle;
  channel_outcome outcome = channel_outcome::none;
  bool has_error = false;
  bool registered = false;

  /// Sets the error the operation fails (or, closed, ends) with. The node is in no queue.
  void set_error(std::exception_ptr e) noexcept {
    if (has_error) {
      error = std::move(e);
    } else {
      ::new (static_cast<void*>(&error)) std::exception_ptr(std::move(e));  // ends prev's lifetime
      has_error = true;
    }
  }
  /// The error, or null.
  std::exception_ptr error_or_null() const noexcept { return has_error ? error : std::exception_ptr(); }

  /// Registers fn with the token (if it can be canceled): from then on the node holds the
  /// registration instead of the token. May throw (allocation); the node is unchanged then.
  template <class F>
  void register_with_token(F&& fn) {
    cancellation_registration r = token.register_callback(static_cast<F&&>(fn));
    token.~cancellation_token();  // the linked registration keeps the state alive
    ::new (static_cast<void*>(&registration)) cancellation_registration(std::move(r));
    registered = true;
  }
  /// Waits for the token callback if it is running elsewhere, and unregisters it.
  void reset_registration() noexcept {
    if (registered && registration.active()) registration.reset();
  }
};

/// A node that carries an item: a blocked reader receives one, a blocked writer holds one.
template <class T>
struct channel_item_node : channel_node {
  std::optional<T> item;
};

/// An intrusive FIFO of nodes (guarded by the core's lock): a circular doubly linked list, so the
/// queue is one pointer (a channel has four; a seed 001 chain has a million channels) and removal
/// from the middle (cancellation) is O(1).
class channel_node_queue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  channel_node* front() const noexcept { return head_; }
  void push_back(channel_node* n) noexcept {
    if (head_ == nullptr) {
      n->prev = n->next = n;
      head_ = n;
      return;
    }
    channel_node* tail = head_->prev;
    n->prev = tail;
    n->next = head_;
    tail->next = n;
    head_->prev = n;
  }
  channel_node* pop_front() noexcept {
    channel_node* n = head_;
    remove(n);
    return n;
  }
  void remove(channel_node* n) noexcept {
    if (n->next == n) {
      head_ = nullptr;
    } else {
      n->prev->next = n->next;
      n->next->prev = n->prev;
      if (head_ == n) head_ = n->next;
    }
    n->prev = n->next = nullptr;
  }
  bool contains(const channel_node* n) const noexcept {
    const channel_node* p = head_;
    if (p == nullptr) return false;
    do {
      if (p == n) return true;
      p = p->next;
    } while (p != head_);
    return false;
  }

 private:
  channel_node* head_ = nullptr;
};

/// Resolved nodes to resume once the lock is released, in the order they were resolved. Links
/// through channel_node::next (a node is out of every queue once resolved).
class channel_wake_list {
 public:
  void add(channel_node* n) noexcept {
    n->next = nullptr;
    if (tail_ != nullptr)
      tail_->next = n;
    else
      head_ = n;
    tail_ = n;
  }
  bool empty() const noexcept { return head_ == nullptr; }
  /// Resumes every node: asynchronously (the current scheduler / default pool) unless the channel
  /// allows synchronous continuations. Touches no core state: a resumed coroutine may destroy the
  /// channel.
  void wake_all(bool synchronous) noexcept {
    if (head_ != nullptr) wake_all_slow(synchronous);  // the common case, nobody to wake, inline
  }

 private:
  TPL_NOINLINE void wake_all_slow(bool synchronous) noexcept {
    channel_node* n = head_;
    head_ = tail_ = nullptr;
    while (n != nullptr) {
      channel_node* next = n->next;  // read before resuming: the resumed frame may free n
      // Waits for the node's cancellation callback if it is running elsewhere: after this it can
      // no longer touch the core (which the resumed coroutine may destroy).
      n->reset_registration();
      if (synchronous)
        resume_inline(n->continuation);
      else
        dispatch_wakeup(n->continuation);
      n = next;
    }
  }

  channel_node* head_ = nullptr;
  channel_node* tail_ = nullptr;
};

/// The bookkeeping of a channel_ring, kept at the start of its slot block so that the ring itself
/// is one pointer (every channel has one; a seed 001 chain has a million channels).
struct channel_ring_header {
  std::size_t mask;  ///< slots - 1
  std::size_t head;
  std::size_t size;
};

/// The header of every ring that has no slots yet: capacity mask + 1 == 0 (so the first push
/// grows), size 0. Never written: nothing is pushed before the ring grows, nothing is popped from
/// an empty ring.
inline constinit channel_ring_header g_empty_channel_ring{std::numeric_limits<std::size_t>::max(), 0, 0};

/// A growable ring buffer (power-of-two slots) in one block: the header, then the slots. After it
/// has grown to the channel's working size it never allocates again.
template <class T>
class channel_ring {
 public:
  channel_ring() noexcept = default;
  channel_ring(const channel_ring&) = delete;
  channel_ring& operator=(const channel_ring&) = delete;
  ~channel_ring() {
    while (h_->size != 0) (void)pop_front();
    if (h_ != &g_empty_channel_ring) deallocate(h_);
  }

  std::size_t size() const noexcept { return h_->size; }
  bool empty() const noexcept { return h_->size == 0; }
  T& front() noexcept { return slots(h_)[h_->head]; }

  void push_back(T&& v) {
    if (h_->size == h_->mask + 1) grow();  // the empty header's mask + 1 wraps to 0
    channel_ring_header& h = *h_;
    ::new (static_cast<void*>(slots(h_) + ((h.head + h.size) & h.mask))) T(std::move(v));
    ++h.size;
  }
  T pop_front() noexcept {
    channel_ring_header& h = *h_;
    T& slot = slots(h_)[h.head];
    T v(std::move(slot));
    slot.~T();
    h.head = (h.head + 1) & h.mask;
    --h.size;
    return v;
  }
  T pop_back() noexcept {
    channel_ring_header& h = *h_;
    T& slot = slots(h_)[(h.head + h.size - 1) & h.mask];
    T v(std::move(slot));
    slot.~T();
    --h.size;
    return v;
  }

 private:
  static constexpr std::size_t kSlotsOffset =
      (sizeof(channel_ring_header) + alignof(T) - 1) / alignof(T) * alignof(T);
  static constexpr std::size_t kBlockAlign =
      alignof(T) > alignof(channel_ring_header) ? alignof(T) : alignof(channel_ring_header);
  static constexpr bool kOverAligned = kBlockAlign > __STDCPP_DEFAULT_NEW_ALIGNMENT__;

  static T* slots(channel_ring_header* h) noexcept {
    return reinterpret_cast<T*>(reinterpret_cast<char*>(h) + kSlotsOffset);
  }
  static std::size_t block_bytes(std::size_t capacity) {
    if (capacity > (std::numeric_limits<std::size_t>::max() - kSlotsOffset) / sizeof(T)) throw std::bad_alloc();
    return kSlotsOffset + capacity * sizeof(T);
  }
  static channel_ring_header* allocate(std::size_t capacity) {
    const std::size_t bytes = block_bytes(capacity);
    void* p = kOverAligned ? ::operator new(bytes, std::align_val_t(kBlockAlign)) : ::operator new(bytes);
    return ::new (p) channel_ring_header{capacity - 1, 0, 0};
  }
  static void deallocate(channel_ring_header* h) noexcept {
    h->~channel_ring_header();
    // Unsized: clang 16 declares the sized forms only with -fsized-deallocation.
    if constexpr (kOverAligned)
      ::operator delete(static_cast<void*>(h), std::align_val_t(kBlockAlign));
    else
      ::operator delete(static_cast<void*>(h));
  }

  TPL_NOINLINE void grow() {  // out of line, so push_back inlines into the fast paths
    const std::size_t capacity = h_->mask + 1;  // 0 for the empty header
    if (capacity == 0) {
      h_ = allocate(kChannelRingInitialSlots);
      return;
    }
    channel_ring_header* fresh = allocate(2 * capacity);
    T* from = slots(h_);
    T* to = slots(fresh);
    for (std::size_t i = 0; i < h_->size; ++i) {
      T& slot = from[(h_->head + i) & h_->mask];
      ::new (static_cast<void*>(to + i)) T(std::move(slot));
      slot.~T();
    }
    fresh->size = h_->size;
    deallocate(h_);
    h_ = fresh;
  }

  channel_ring_header* h_ = &g_empty_channel_ring;
};

struct channel_settings {
  std::size_t capacity = kUnboundedChannelCapacity;  ///< 0: rendezvous (unbuffered)
  bounded_channel_full_mode full_mode = bounded_channel_full_mode::wait;
  bool single_reader = false;
  bool single_writer = false;
  bool synchronous_continuations = false;
};

template <class T>
class channel_core final {
 public:
  using item_node = channel_item_node<T>;
  using fast_ring = channel_fast_ring<T>;

  // From the frame pool, as a block of at least kAllocBytes. glibc's malloc keeps freed chunks of
  // up to 128 bytes in fastbins, which never coalesce with their neighbours: a million freed
  // 96-byte chunks (an 88-byte core), interleaved with a seed 001 chain's coroutine frames, kept
  // the frames' free space in pieces and scattered the allocations of the chains built after
  // (the third and later chains in one process: build 141-208 ms instead of 85, hand-offs
  // 184-348 ms instead of 126). A 136-byte block is a 144-byte chunk, out of that range, and
  // repeated chains stay at their second one's speed; the first costs ~20 ms more to fault in.
  static constexpr std::size_t kAllocBytes = 136;
  static void* operator new(std::size_t n) { return frame_alloc(n < kAllocBytes ? kAllocBytes : n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n < kAllocBytes ? kAllocBytes : n); }

  channel_core(channel_settings settings, std::function<void(T)> item_dropped)
      : capacity_(settings.capacity),
        ring_warmup_(channel_fast_ring_warmup.load(std::memory_order_relaxed)),
        mode_(pack_mode(settings)) {
    // Kept out of line: most channels have no callback, and the core stays small (a seed 001 chain
    // makes a million channels). relaxed: nobody else sees the core yet.
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
  bool try_write_fast(T& item) {
    // acquire: a gate without kLockedMode publishes ring_ (see enable_ring_locked).
    const std::uint32_t g = gate_.load(std::memory_order_acquire);
    if (g == 0) {  // on the ring, nobody waiting, not completed, no overflow
      std::uint32_t seen = 0;
      // seq_cst, after the claim's seq_cst CAS: a reader that queued itself since our first look
      // is seen here, or its look at the ring (a seq_cst load of the write position after its
      // seq_cst announce, see start()) sees our claim and does not wait for it (Dekker).
      const auto look = [this, &seen] { seen = gate_.load(std::memory_order_seq_cst); };
      if (ring()->try_push(item, false, look) != fast_ring::push_result::ok) return false;
      // The second look, after the publication: a reader that found our claim unpublished for
      // too long queued itself and then ran a heavy fence (start()'s queue_anyway). Either our
      // publication was visible to it after that fence, or this look sees it counted.
      // relaxed: ordered after the publication by the asymmetric fence pair (the light half is a
      // compiler barrier; see asymmetric_fence.hpp for why that suffices on x86 and ARMv8).
      asymmetric_fence_light();
      if (seen >= kWaitUnit || gate_.load(std::memory_order_relaxed) >= kWaitUnit) service();
      return true;
    }
    // A rendezvous channel buffers nothing: only the general path can hand an item over.
    if ((g != kLockedMode && g != kOverflow) || capacity_ == 0) return false;
    std::lock_guard l(lock_);
    // relaxed: the gate changes only under the lock, which we hold.
    const std::uint32_t now = gate_.load(std::memory_order_relaxed);
    if (now == kLockedMode) {
      if (items_.size() >= capacity_) return false;
      items_.push_back(std::move(item));
      count_write_locked();
      return true;
    }
    // Items wait behind a full ring: this one joins them (readers move them up, see
    // needs_service_after_read), without touching the ring's lines.
    if (now != kOverflow || items_.size() >= overflow_capacity()) return false;
    items_.push_back(std::move(item));
    return true;
  }

  /// Writes item (moved from only on success). False if the channel is full (wait mode) or, for a
  /// rendezvous channel, no reader is waiting. Throws channel_closed once completed.
  bool try_write(T& item) {
    if (try_write_fast(item)) return true;
    channel_wake_list wake;
    std::optional<T> dropped;
    write_result r;
    std::exception_ptr closed_error;
    {
      std::lock_guard g(lock_);
      r = write_locked(item, wake, dropped);
      if (r == write_result::closed) closed_error = error_locked();
    }
    finish(wake, dropped, false, has_mode(kSynchronous));
    if (r == write_result::closed) throw_channel_closed(closed_error);
    return r == write_result::written;
  }

  bool try_complete(std::exception_ptr error) noexcept {
    channel_wake_list wake;
    bool now_done = false;
    {
      std::lock_guard g(lock_);
      if (completed_) return false;
      // The cold block holds the error (made here if need be: a few dozen bytes; running out of
      // memory for them terminates, try_complete being noexcept).
      if (error) cold_locked().error = std::move(error);
      completed_ = true;
      // seq_cst, then the ring's close and the done check below (seq_cst loads): a lock-free
      // reader that took the last item either is seen by the check or sees kCompleted and comes
      // to the lock to finish the channel itself.
      gate_.fetch_or(kCompleted, std::memory_order_seq_cst);
      if (ring()) ring()->close();
      while (!writers_.empty()) resolve(wake, take_front(writers_), channel_outcome::closed, error_locked());
      while (!write_waiters_.empty()) resolve(wake, take_front(write_waiters_), channel_outcome::closed, error_locked());
      if (buffer_empty_locked()) now_done = mark_done_locked(wake);
    }
    const bool synchronous = has_mode(kSynchronous);
    finish_done(now_done);
    wake.wake_all(synchronous);
    return true;
  }

  // ---- reader side ---------------------------------------------------------------------------

  /// The reading twin of try_write_fast: an item is there and nobody waits. On the ring it takes
  /// the item lock-free (and comes to the lock afterwards only if it must: a writer waits for
  /// room, the overflow needs moving up, or it took a completed channel's last item). Without a
  /// ring it refuses a completed channel's last item (the general path finishes the channel).
  /// Takes the oldest item into out and returns true; otherwise returns false.
  bool try_read_fast(std::optional<T>& out) {
    // acquire: as in try_write_fast.
    std::uint32_t g = gate_.load(std::memory_order_acquire);
    if (g < kWaitUnit && (g & kLockedMode) == 0) {  // on the ring, nobody waiting
      std::uint64_t pos;
      // seq_cst, after the claim's seq_cst CAS (as in try_write_fast): a writer that queued
      // itself for room since our first look is seen here, or its look at the ring sees our
      // claim and does not wait for the slot (Dekker); likewise the completion check (see
      // try_complete).
      const auto look = [this, &g] { g = gate_.load(std::memory_order_seq_cst); };
      if (!rring()->try_pop(out, pos, look)) return false;
      // The second look, after freeing the slot: as in try_write_fast, for a writer that found
      // our claim unfreed for too long and queued for room (relaxed: see there).
      asymmetric_fence_light();
      if ((g != 0 && needs_service_after_read(g, pos)) || gate_.load(std::memory_order_relaxed) >= kWaitUnit)
        service();  // the slot is free now
      return true;
    }
    // A rendezvous channel buffers nothing: only the general path can take a waiting writer's item.
    if ((g & ~kCompleted) != kLockedMode || capacity_ == 0) return false;
    std::lock_guard l(lock_);
    g = gate_.load(std::memory_order_relaxed);  // relaxed: changes only under the lock we hold
    // Nobody waits; the last item of a completed channel finishes it: the general path.
    if ((g & ~kCompleted) != kLockedMode || items_.size() <= static_cast<std::size_t>(completed_)) return false;
    out.emplace(items_.pop_front());
    return true;
  }

  /// wait_to_read_async / wait_to_write_async without the lock when the answer is plainly yes: an
  /// item (room) is there on the ring and nobody waits.
  bool wait_ready_fast(channel_op op) const noexcept {
    // acquire: as in try_write_fast.
    const std::uint32_t g = gate_.load(std::memory_order_acquire);
    if (op == channel_op::wait_to_read) return g < kWaitUnit && (g & kLockedMode) == 0 && rring()->front_ready();
    return g == 0 && ring()->has_room();
  }

  /// Before an asynchronous operation on the ring waits (queues, suspends, and is woken through
  /// the pool later), it watches the ring for a moment: with the other side running on another
  /// core, the item or room it lacks usually comes within a few hundred nanoseconds, far sooner
  /// than a suspension round trip. Returns true when op's fast path may succeed now; false at
  /// once without a ring, or when operations are already queued (they come first).
  bool spin_for(channel_op op) const noexcept {
    // On one CPU the other side cannot run while we watch.
    static const bool worthwhile = std::thread::hardware_concurrency() != 1;
    if (!worthwhile) return false;
    for (int i = 0; i < kChannelSpinChecks; ++i) {
      // acquire: as in try_write_fast.
      const std::uint32_t g = gate_.load(std::memory_order_acquire);
      if ((g & kLockedMode) != 0 || g >= kWaitUnit) return false;
      if (is_read_side(op) ? rring()->front_ready() || (g & kCompleted) != 0 : ring()->has_room() || g != 0) return true;
      for (int p = 0; p < 4; ++p) TPL_CPU_RELAX();
    }
    return false;
  }

  /// Takes the oldest item into out. False if none is there (or the channel is done).
  bool try_read(std::optional<T>& out) {
    if (try_read_fast(out)) return true;
    channel_wake_list wake;
    bool now_done = false;
    read_result r;
    {
      std::lock_guard g(lock_);
      r = read_locked(out, wake, now_done);
    }
    const bool synchronous = has_mode(kSynchronous);
    finish_done(now_done);
    wake.wake_all(synchronous);
    return r == read_result::taken;
  }

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

  task<> completion() {
    std::lock_guard g(lock_);
    if (!has_completion_locked()) {
      if (done_) return error_locked() ? task_from_exception(error_locked()) : completed_task();
      cold_locked().completion = std::make_unique<task_completion_source<>>(
          has_mode(kSynchronous) ? task_creation_options::none
                                 : task_creation_options::run_continuations_asynchronously);
    }
    return cold_locked().completion->get_task();
  }

  // ---- asynchronous operations ---------------------------------------------------------------

  /// Runs op for node under the lock. Returns true if the node is resolved now (its outcome is
  /// set; the caller continues without suspending). Otherwise, if may_queue, the node is queued
  /// (it will be resolved and resumed later) and false is returned; if not, nothing happened.
  bool start(channel_op op, channel_node& node, bool may_queue) {
    const bool synchronous = has_mode(kSynchronous);
    int claim_waits = 0;          // times we waited for another thread's claim to finish
    bool queue_anyway = false;    // that thread is slow: queue, and let its second look find us
    for (;;) {
      channel_wake_list wake;
      std::optional<T> dropped;
      bool now_done = false;
      bool resolved_now = true;
      bool pinned = false;
      bool in_progress = false;
      bool fence_and_serve = false;  // queued past a claim in progress (queue_anyway)
      {
        std::lock_guard g(lock_);
        if (node.state == channel_node_state::cancel_requested) {
          node.state = channel_node_state::resolved;
          node.outcome = channel_outcome::failed;
          node.set_error(make_channel_canceled());
        } else {
          // Announce before the attempt (seq_cst, the waiter's half of the Dekker handshake):
          // a lock-free write that claims its slot after this sees us waiting and comes to the
          // lock to serve us once its item is in; a read that frees room after our attempt
          // does the same for a writer. Taken back below unless the node stays queued. Without
          // a ring every operation takes the lock, so there is nobody to announce to: the node
          // is counted only if it is queued (two locked instructions fewer per operation).
          // relaxed: the gate changes only under the lock, which we hold.
          const bool announce = may_queue && (gate_.load(std::memory_order_relaxed) & kLockedMode) == 0;
          if (announce) gate_.fetch_add(kWaitUnit, std::memory_order_seq_cst);
          resolved_now = attempt_locked(op, node, wake, dropped, now_done);
          if (!resolved_now && may_queue) {
            // An item claimed on the ring but not yet published (or, for a write, a slot
            // claimed by a reader but not yet freed): its writer (reader) may have looked at
            // the gate before our announce and then would not serve us. It is a few
            // instructions from done; try again then instead of waiting for it.
            in_progress = claim_in_progress_locked(op);
            if (in_progress && queue_anyway) {
              // Its thread did not finish the claim while we watched (descheduled?). Queue
              // after all: past the heavy fence below, either its publication is visible to
              // our service() or its second look (after publishing) sees us counted in the
              // gate and it serves us (asymmetric Dekker, see asymmetric_fence.hpp).
              in_progress = false;
              fence_and_serve = true;
            }
            if (!in_progress) {
              enqueue_locked(op, node, wake);
              if (!announce && node.state == channel_node_state::queued) gate_count_locked(+1);
            }
          }
          if (node.state == channel_node_state::resolved) resolved_now = true;  // misuse reported
          // Lowering the count only sends fewer operations to the lock.
          if (announce && node.state != channel_node_state::queued) gate_count_locked(-1);
        }
        // Once our node is queued, another thread may resume our coroutine, which may drop the
        // last handle: the nodes we still have to wake keep the core alive through this reference.
        if (!resolved_now && !in_progress && (!wake.empty() || fence_and_serve)) {
          add_ref();
          pinned = true;
        }
      }
      if (in_progress) {
        finish(wake, dropped, now_done, synchronous);  // (nothing to do after a failed attempt)
        // Bounded: after kChannelClaimWaits rounds of watching, queue (see queue_anyway).
        if (!wait_for_claim(op) && ++claim_waits >= kChannelClaimWaits) queue_anyway = true;
        continue;
      }
      if (!resolved_now) {
        // Queued: from here on, touch nothing of node, and of the core only through our pin.
        wake.wake_all(synchronous);
        if (fence_and_serve) {
          asymmetric_fence_heavy();
          service();
        }
        if (pinned) release();
        return false;
      }
      finish(wake, dropped, now_done, synchronous);
      return true;
    }
  }

  /// The token callback of a started node.
  void cancel(channel_op op, channel_node& node) noexcept {
    {
      std::lock_guard g(lock_);
      if (node.state == channel_node_state::idle) {
        node.state = channel_node_state::cancel_requested;  // start() will see it
        return;
      }
      if (node.state != channel_node_state::queued) return;  // already decided
      unlink(queue_of(op), &node);
      node.state = channel_node_state::resolved;
      node.outcome = channel_outcome::failed;
      node.set_error(make_channel_canceled());
    }
    // Always asynchronous: the canceling thread runs cancel() for many registrations, and this
    // callback's registration is reset by the resumed coroutine (which waits for us to return).
    dispatch(node.continuation);
  }

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
  bool claim_in_progress_locked(channel_op op) const noexcept {
    if (ring() == nullptr) return false;
    if (is_read_side(op)) return buffer_size_locked() != 0;
    return op == channel_op::write && ring()->read_in_progress();
  }

  /// The claim start() saw is a few instructions from done, unless its thread was preempted in
  /// between: watch briefly; true if it looks done. Otherwise give the processor away once and
  /// return false (start() counts these rounds and stops watching after kChannelClaimWaits).
  bool wait_for_claim(channel_op op) const noexcept {
    for (int i = 0; i < kChannelSpinChecks; ++i) {
      if (is_read_side(op) ? rring()->front_ready() : ring()->has_room()) return true;
      TPL_CPU_RELAX();
    }
    std::this_thread::yield();
    return false;
  }

  // The gate: one word the lock-free paths read to know they may go ahead (it is 0 then). Changed
  // only under the lock.
  static constexpr std::uint32_t kLockedMode = 1;  // no ring (yet): every operation takes the lock
  static constexpr std::uint32_t kCompleted = 2;   // no more writes
  static constexpr std::uint32_t kOverflow = 4;    // items wait in the overflow behind the ring
  static constexpr std::uint32_t kWaitUnit = 8;    // one node queued (or announcing, see start())

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

  /// Counts one node more (+1) or less (-1) in the gate. Under the lock: the gate changes only
  /// under it, so a load and a store (relaxed: a count the lock-free paths read as a hint to come
  /// to the lock, as a relaxed read-modify-write would be) do without a locked instruction.
  void gate_count_locked(int delta) noexcept {
    const std::uint32_t g = gate_.load(std::memory_order_relaxed);
    gate_.store(delta > 0 ? g + kWaitUnit : g - kWaitUnit, std::memory_order_relaxed);
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

  TPL_NOINLINE void enable_ring_locked() {
    std::size_t slots = kChannelFastRingMaxSlots;
    while (slots > capacity_) slots /= 2;  // the largest power of two within capacity
    if (capacity_ == kUnboundedChannelCapacity) {
      slots = kChannelFastRingFirstUnboundedSlots;
      while (slots < items_.size()) slots *= 2;  // room for every buffered item: no overflow
    }
    ring_.store(new fast_ring(slots), std::memory_order_relaxed);  // published with the gate below
    read_ring_.store(ring(), std::memory_order_relaxed);
    // The buffered items, oldest first, go to the ring; what does not fit stays as the overflow.
    // Nobody else touches the ring yet (the gate still has kLockedMode).
    refill_locked();
    // relaxed: published with kLockedMode's removal below.
    if (!items_.empty()) gate_.fetch_or(kOverflow, std::memory_order_relaxed);
    if (completed_) ring()->close();
    // release: a lock-free path that sees kLockedMode gone sees ring_ and its items.
    gate_.fetch_and(~kLockedMode, std::memory_order_release);
  }

  /// An unbounded channel outgrew its ring: a twice larger one takes the writes from now on;
  /// readers drain the old one first, then move on (see pop_buffer_locked). Nothing is copied,
  /// and every path stays lock-free at any backlog.
  TPL_NOINLINE fast_ring* grow_ring_locked() {
    fast_ring* old = ring();
    auto fresh = std::make_unique<fast_ring>(old->size() * 2);  // may throw: nothing changed yet
    old->close();  // lock-free writers fail on it from now on and come to the lock
    fast_ring::link(old, fresh.get());
    // release: lock-free writers that load the new ring see it constructed.
    ring_.store(fresh.release(), std::memory_order_release);
    return ring();
  }

  /// The read ring is drained and closed (not the write ring): readers move to the next one.
  bool advance_read_ring_locked() noexcept {
    fast_ring* r = rring();
    // count() 0 on a closed ring: every write that claimed a slot was published and taken.
    if (r == ring() || r->count() != 0) return false;
    // release: lock-free readers that load the next ring see it constructed.
    read_ring_.store(r->next(), std::memory_order_release);
    return true;
  }

  /// How many items may wait behind the ring.
  std::size_t overflow_capacity() const noexcept {
    return capacity_ == kUnboundedChannelCapacity ? kUnboundedChannelCapacity : capacity_ - ring()->size();
  }

  /// Moves overflow items (oldest first) into the ring while it has room; clears kOverflow once
  /// the overflow is empty.
  void refill_locked() {
    while (!items_.empty()) {
      // past_close: these items were written before any completion.
      if (ring()->try_push(items_.front(), true) != fast_ring::push_result::ok) break;
      (void)items_.pop_front();  // the moved-from shell
    }
    // relaxed load: the gate changes only under the lock. release: writers that see kOverflow
    // gone may write to the ring, behind the items just moved (published by try_push itself).
    if (items_.empty() && (gate_.load(std::memory_order_relaxed) & kOverflow) != 0)
      gate_.fetch_and(~kOverflow, std::memory_order_release);
  }

  /// Puts item into the buffer if it has room (item moved from only then).
  bool push_buffer_locked(T& item) {
    if (!ring()) {
      if (items_.size() >= capacity_) return false;
      items_.push_back(std::move(item));
      return true;
    }
    if (items_.empty()) {
      if (ring()->try_push(item) == fast_ring::push_result::ok) return true;
      if (capacity_ == kUnboundedChannelCapacity) {
        // An unbounded channel outgrew its ring: a twice larger one takes its items (the lock-free
        // paths stay lock-free at any backlog, instead of queuing behind the lock).
        (void)grow_ring_locked()->try_push(item);  // has room
        return true;
      }
    } else if (items_.size() >= overflow_capacity()) {
      // The overflow is full; the ring may have room since (readers move items up only now and
      // then, see needs_service_after_read).
      refill_locked();
      if (items_.empty() && ring()->try_push(item) == fast_ring::push_result::ok) return true;
    }
    if (items_.size() >= overflow_capacity()) return false;
    items_.push_back(std::move(item));
    if ((gate_.load(std::memory_order_relaxed) & kOverflow) == 0) {
      // seq_cst: a writer that reads the gate after this write returned goes to the lock (and
      // so behind this item).
      gate_.fetch_or(kOverflow, std::memory_order_seq_cst);
    }
    return true;
  }

  /// Takes the oldest buffered item into out.
  bool pop_buffer_locked(std::optional<T>& out) {
    if (!ring()) {
      if (items_.empty()) return false;
      out.emplace(items_.pop_front());
      return true;
    }
    if (!items_.empty()) refill_locked();
    std::uint64_t pos;
    do {
      if (rring()->try_pop(out, pos)) return true;
    } while (advance_read_ring_locked());
    // Its front still being written, the ring may hold finished writes behind it, older than the
    // overflow's: nothing to take until that writer publishes (it then serves those that were
    // waiting when it claimed; a reader that comes to wait meanwhile tries again, see start()).
    if (items_.empty() || rring()->count() != 0) return false;
    out.emplace(items_.pop_front());
    if (items_.empty()) refill_locked();  // clears kOverflow
    return true;
  }

  /// Whether an item can be taken now (an item being written on the ring does not count).
  bool buffer_has_ready_locked() const noexcept {
    if (!items_.empty()) return true;
    for (fast_ring* r = rring(); r != nullptr; r = r->next()) {
      if (r->front_ready()) return true;
      if (r->count() != 0) return false;  // its front is being written
    }
    return false;
  }
  /// Whether no item is in the channel (an item being written on the ring counts).
  bool buffer_empty_locked() const noexcept { return buffer_size_locked() == 0; }
  std::size_t buffer_size_locked() const noexcept {
    std::size_t n = items_.size();
    for (fast_ring* r = rring(); r != nullptr; r = r->next()) n += r->count();
    return n;
  }

  bool has_room_locked() const noexcept {
    if (capacity_ == 0) return !readers_.empty();
    if (full_mode() != bounded_channel_full_mode::wait) return true;
    // Counted, not looked for in the ring: with the overflow full the ring may have room that a
    // write reaches by moving the overflow up first (push_buffer_locked). (Unbounded: the
    // capacity is the largest size_t, always above the count.)
    return buffer_size_locked() < capacity_;
  }

  // ---- lock-free readers and writers that found someone waiting ------------------------------

  /// After a lock-free read found the gate not 0: whether the lock has work to do.
  bool needs_service_after_read(std::uint32_t g, std::uint64_t pos) const noexcept {
    if (g >= kWaitUnit) return true;  // a writer waits for room (or a reader queued meanwhile)
    // Refill the ring from the overflow every quarter lap, and at once when it ran dry; finish a
    // completed channel on its last item.
    const std::uint64_t quarter = rring()->size() >= 4 ? rring()->size() / 4 : 1;
    if ((g & kOverflow) != 0 && (pos & (quarter - 1)) == 0) return true;
    return rring()->count() == 0;
  }

  /// Serves, under the lock, whatever a lock-free operation may have left undone: waiting
  /// readers get ring items, waiting writers get room, the overflow moves up, a completed and
  /// drained channel finishes.
  TPL_NOINLINE void service() {
    channel_wake_list wake;
    bool now_done = false;
    {
      std::lock_guard g(lock_);
      if (!items_.empty()) refill_locked();
      serve_readers_locked(wake);
      if (!read_waiters_.empty() && buffer_has_ready_locked()) wake_waiters_locked(read_waiters_, wake);
      give_room_locked(wake);
      if (completed_ && !done_ && buffer_empty_locked()) now_done = mark_done_locked(wake);
    }
    finish_done(now_done);
    wake.wake_all(has_mode(kSynchronous));
  }

  /// Blocked readers (oldest first) take buffered items (with a ring: items that were being
  /// written when the readers queued, or written behind those).
  void serve_readers_locked(channel_wake_list& wake) {
    while (!readers_.empty()) {
      auto* r = static_cast<item_node*>(readers_.front());
      if (!pop_buffer_locked(r->item)) return;
      resolve(wake, take_front(readers_), channel_outcome::ok, nullptr);
    }
  }

  /// Room was made: blocked writers (oldest first) put their items in, then wait_to_write wakes.
  void give_room_locked(channel_wake_list& wake) {
    while (!writers_.empty()) {
      auto* w = static_cast<item_node*>(writers_.front());
      if (!push_buffer_locked(*w->item)) return;
      w->item.reset();
      resolve(wake, take_front(writers_), channel_outcome::ok, nullptr);
      wake_waiters_locked(read_waiters_, wake);
    }
    if (!write_waiters_.empty() && has_room_locked()) wake_waiters_locked(write_waiters_, wake);
  }

  void wake_waiters_locked(channel_node_queue& q, channel_wake_list& wake) noexcept {
    while (!q.empty()) resolve(wake, take_front(q), channel_outcome::ok, nullptr);
  }

  write_result write_locked(T& item, channel_wake_list& wake, std::optional<T>& dropped) {
    if (completed_) return write_result::closed;
    if (!readers_.empty() && buffer_empty_locked()) {
      // A reader waits and nothing is buffered: hand the item straight over. (With a ring, a
      // reader also waits while the ring's front is being written by a writer that claimed it
      // after the reader queued; the items behind it come first, so this one joins them and the
      // front's writer serves the reader.)
      auto* r = static_cast<item_node*>(take_front(readers_));
      r->item.emplace(std::move(item));
      resolve(wake, r, channel_outcome::ok, nullptr);
      return write_result::written;
    }
    if (capacity_ == 0) return write_result::full;
    if (push_buffer_locked(item)) {
      serve_readers_locked(wake);
      wake_waiters_locked(read_waiters_, wake);
      if (!ring()) count_write_locked();
      return write_result::written;
    }
    switch (full_mode()) {  // full (only a channel without a ring drops)
      case bounded_channel_full_mode::wait:
        return write_result::full;
      case bounded_channel_full_mode::drop_write:
        dropped.emplace(std::move(item));
        return write_result::written;
      case bounded_channel_full_mode::drop_newest:
        dropped.emplace(items_.pop_back());
        items_.push_back(std::move(item));
        return write_result::written;
      case bounded_channel_full_mode::drop_oldest:
        dropped.emplace(items_.pop_front());
        items_.push_back(std::move(item));
        return write_result::written;
    }
    return write_result::full;
  }

  read_result read_locked(std::optional<T>& out, channel_wake_list& wake, bool& now_done) {
    if (pop_buffer_locked(out)) {
      // The room just made goes to the oldest blocked writer.
      give_room_locked(wake);
      if (completed_ && buffer_empty_locked()) now_done = mark_done_locked(wake);
      return read_result::taken;
    }
    if (!writers_.empty() && buffer_empty_locked()) {
      // Rendezvous: take the oldest blocked writer's item.
      auto* w = static_cast<item_node*>(take_front(writers_));
      out.emplace(std::move(*w->item));
      w->item.reset();
      resolve(wake, w, channel_outcome::ok, nullptr);
      return read_result::taken;
    }
    // A completed channel whose last item is still being written is not done yet.
    return completed_ && buffer_empty_locked() ? read_result::closed : read_result::empty;
  }

  /// The synchronous attempt of op. True if node is resolved.
  bool attempt_locked(channel_op op, channel_node& node, channel_wake_list& wake, std::optional<T>& dropped,
                      bool& now_done) {
    auto finish = [&node](channel_outcome outcome, std::exception_ptr error) {
      node.state = channel_node_state::resolved;
      node.outcome = outcome;
      if (error) node.set_error(std::move(error));
      return true;
    };
    switch (op) {
      case channel_op::read:
      case channel_op::next: {
        auto& n = static_cast<item_node&>(node);
        switch (read_locked(n.item, wake, now_done)) {
          case read_result::taken:
            return finish(channel_outcome::ok, nullptr);
          case read_result::closed:
            return finish(channel_outcome::closed, error_locked());
          case read_result::empty:
            return false;
        }
        return false;
      }
      case channel_op::write: {
        auto& n = static_cast<item_node&>(node);
        switch (write_locked(*n.item, wake, dropped)) {
          case write_result::written:
            n.item.reset();
            return finish(channel_outcome::ok, nullptr);
          case write_result::closed:
            return finish(channel_outcome::closed, error_locked());
          case write_result::full:
            return false;
        }
        return false;
      }
      case channel_op::wait_to_read:
        if (buffer_has_ready_locked() || !writers_.empty()) return finish(channel_outcome::ok, nullptr);
        if (completed_ && buffer_empty_locked()) return finish(channel_outcome::closed, error_locked());
        return false;
      case channel_op::wait_to_write:
        if (completed_) return finish(channel_outcome::closed, error_locked());
        if (has_room_locked()) return finish(channel_outcome::ok, nullptr);
        return false;
    }
    return false;
  }

  void enqueue_locked(channel_op op, channel_node& node, channel_wake_list& wake) {
    const bool reader_side = is_read_side(op);
    if (reader_side && has_mode(kSingleReader) && (!readers_.empty() || !read_waiters_.empty())) {
      node.state = channel_node_state::resolved;
      node.outcome = channel_outcome::failed;
      node.set_error(make_channel_misuse(
          "tpl: channel: a second read is waiting while another one is pending on a single_reader "
          "channel (single_reader promises at most one reading operation at a time)"));
      return;
    }
    if (!reader_side && has_mode(kSingleWriter) && (!writers_.empty() || !write_waiters_.empty())) {
      node.state = channel_node_state::resolved;
      node.outcome = channel_outcome::failed;
      node.set_error(make_channel_misuse(
          "tpl: channel: a second write is waiting while another one is pending on a single_writer "
          "channel (single_writer promises at most one writing operation at a time)"));
      return;
    }
    node.state = channel_node_state::queued;
    queue_of(op).push_back(&node);  // counted in the gate by start()
    if (capacity_ == 0) {
      // Rendezvous: a waiting reader is room for a writer, a waiting writer an item for a reader.
      if (op == channel_op::read || op == channel_op::next) wake_waiters_locked(write_waiters_, wake);
      if (op == channel_op::write) wake_waiters_locked(read_waiters_, wake);
    }
  }

  /// Completed and drained: every reader learns it. Returns true (the completion task is due).
  bool mark_done_locked(channel_wake_list& wake) noexcept {
    done_ = true;
    while (!readers_.empty()) resolve(wake, take_front(readers_), channel_outcome::closed, error_locked());
    while (!read_waiters_.empty()) resolve(wake, take_front(read_waiters_), channel_outcome::closed, error_locked());
    return has_completion_locked();
  }

  /// After the lock: the item-dropped callback, the completion task, then the wake-ups, last
  /// because a resumed coroutine may destroy the channel (synchronous: read before any of them).
  void finish(channel_wake_list& wake, std::optional<T>& dropped, bool now_done, bool synchronous) {
    struct waker {
      channel_wake_list& wake;
      bool synchronous;
      ~waker() { wake.wake_all(synchronous); }
    } guard{wake, synchronous};
    finish_done(now_done);
    if (dropped) {
      // acquire: pairs with cold_locked()'s release (the constructor's store is published with
      // the core itself). The callback is set by the constructor only.
      const cold_state* c = cold_.load(std::memory_order_acquire);
      if (c != nullptr && c->item_dropped) c->item_dropped(std::move(*dropped));
    }
  }

  void finish_done(bool now_done) noexcept {
    if (!now_done) return;
    // The completion source and the error no longer change once done_ is set; now_done means the
    // source exists. acquire: pairs with cold_locked()'s release (we also set done_ under the lock).
    const cold_state* c = cold_.load(std::memory_order_acquire);
    if (c->error)
      c->completion->try_set_exception(c->error);
    else
      c->completion->try_set_result();
  }

  // What a channel rarely needs, out of line so that the core stays small (a seed 001 chain has a
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
  cold_state& cold_locked() {
    cold_state* c = cold_if_any_locked();
    if (c == nullptr) {
      c = new cold_state{};
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
