// The slow paths of the coroutine frame pool: refilling from / spilling to the process-wide
// transfer lists, and returning a thread's cache when the thread exits. Behind both is the chunk
// store (frame_chunks.cpp), where a block comes from when neither has one and goes when neither
// has room.
//
// Invariants: a thread's cache is handed back exactly once, by its exit hook, and after that the
// thread neither caches a freed block nor takes a batch (hook_state 2: straight to the chunks);
// a class's transfer list holds at most max_batches(c) batches (about kMaxTransferBytesPerClass),
// so what the pool keeps after a burst is bounded per class; every block of a pooled class comes
// from chunk_take and goes back through chunk_give, never to ::operator delete ("the system"
// below means the chunk store). Under AddressSanitizer a freed block spends its first
// kAsanQuarantineBlocks frees of the same thread poisoned in the quarantine, and leaves it only to
// the cache or, at thread exit, to the system.
#include <atomic>
#include <mutex>

#include "frame_chunks.hpp"
#include "tpl/detail/frame_pool.hpp"

namespace tpl::detail {
namespace {

constexpr std::size_t kMaxTransferBatchesPerClass = 64;
// What a class's transfer list keeps at most, in bytes: after a burst, frames beyond it go back to
// the system (a list of the largest class holds 4 batches, one of the smallest 64).
constexpr std::size_t kMaxTransferBytesPerClass = 256 * 1024;

constexpr std::size_t max_batches(std::size_t c) noexcept {
  const std::size_t n = kMaxTransferBytesPerClass / (kFrameTransferBatch * frame_class_bytes(c));
  return n == 0 ? 1 : n > kMaxTransferBatchesPerClass ? kMaxTransferBatchesPerClass : n;
}

struct batch {
  free_block* head = nullptr;
  std::uint32_t count = 0;
};

// One lock per size class; taken once per kFrameTransferBatch frames, never on the fast path, and
// not at all by a thread that finds the list empty (a thread that builds a million frames at once
// misses its cache on every frame: it reads size without the lock and goes to the system).
struct transfer_list {
  std::mutex lock;
  batch batches[kMaxTransferBatchesPerClass];
  // Written under the lock; read without it only as a hint (relaxed): a batch added just after an
  // empty reading is taken by the next miss, and nothing is lost either way.
  std::atomic<std::size_t> size{0};
};

// Adds b to t (the list of class c) if it has room. Under t.lock.
bool try_add_batch_locked(transfer_list& t, std::size_t c, batch b) noexcept {
  const std::size_t k = t.size.load(std::memory_order_relaxed);  // relaxed: under the lock
  if (k >= max_batches(c)) return false;
  t.batches[k] = b;
  t.size.store(k + 1, std::memory_order_relaxed);
  return true;
}

transfer_list& transfer(std::size_t c) {
  // Leaked on purpose: frames can be freed by threads that outlive static destruction.
  static transfer_list* lists = new transfer_list[kFrameClassCount];
  return lists[c];
}

void release_chain_to_system(free_block* head, std::size_t c) noexcept {
  if (head != nullptr) chunk_give(c, head);
}

void release_block_to_system(void* p, std::size_t c) noexcept {
  auto* b = static_cast<free_block*>(p);
  b->next = nullptr;
  chunk_give(c, b);
}

// One block of class c straight from the chunk store, for a thread whose cache is gone.
void* take_one_block(std::size_t c) {
  free_block* b = nullptr;
  chunk_take(c, 1, b);
  unpoison_cached_block(b, c);
  return b;
}

#if defined(TPL_ASAN)
// Plain data, as frame_cache: a ring of the last freed blocks, oldest at next once it is full.
// The pointers stay readable (the array is not poisoned), so LeakSanitizer finds the blocks.
struct quarantine {
  void* block[kAsanQuarantineBlocks];
  std::uint16_t size_class[kAsanQuarantineBlocks];
  std::size_t next;
};
thread_local quarantine t_quarantine{};

void release_quarantine_to_system() noexcept {
  quarantine& q = t_quarantine;
  for (std::size_t i = 0; i < kAsanQuarantineBlocks; ++i) {
    if (q.block[i] == nullptr) continue;
    TPL_UNPOISON(q.block[i], frame_class_bytes(q.size_class[i]));
    release_block_to_system(q.block[i], q.size_class[i]);
    q.block[i] = nullptr;
  }
  q.next = 0;
}
#endif

// Hands the whole cache of this thread back when it exits, so a pool of short-lived threads does
// not leak frames.
struct exit_hook {
  ~exit_hook() {
    frame_cache& cache = frame_cache_tls();
    cache.hook_state = 2;  // frees from here on (other thread_local dtors) go direct
#if defined(TPL_ASAN)
    release_quarantine_to_system();
#endif
    for (std::size_t c = 0; c < kFrameClassCount; ++c) {
      free_block* head = cache.head[c];
      const std::uint32_t n = cache.count[c];
      cache.head[c] = nullptr;
      cache.count[c] = 0;
      if (head == nullptr) continue;
      transfer_list& t = transfer(c);
      {
        std::lock_guard g(t.lock);
        if (try_add_batch_locked(t, c, batch{head, n})) head = nullptr;
      }
      release_chain_to_system(head, c);
    }
  }
};

void install_exit_hook() {
  static thread_local exit_hook hook;
  (void)&hook;  // odr-use: constructs it on this thread, so its destructor runs at thread exit
  frame_cache_tls().hook_state = 1;
}

}  // namespace

void* frame_alloc_slow(std::size_t c) {
  frame_cache& cache = frame_cache_tls();
  // Thread exit (other thread_local destructors still run coroutines): the exit hook has handed
  // the cache back and will not run again, so a batch taken now would never be returned.
  if (cache.hook_state == 2) return take_one_block(c);
  if (cache.hook_state == 0) install_exit_hook();
  transfer_list& t = transfer(c);
  batch got;
  if (t.size.load(std::memory_order_relaxed) > 0) {  // relaxed: a hint, see transfer_list
    std::lock_guard g(t.lock);
    // relaxed: under the lock, which orders it with every other writer.
    if (const std::size_t k = t.size.load(std::memory_order_relaxed); k > 0) {
      got = t.batches[k - 1];
      t.size.store(k - 1, std::memory_order_relaxed);
    }
  }
  if (got.head != nullptr) {
    free_block* b = got.head;
    unpoison_cached_block(b, c);
    cache.head[c] = b->next;
    cache.count[c] = got.count - 1;
    return b;
  }
  // A batch from the chunk store: the first block for the caller, the rest to the cache (empty).
  free_block* head = nullptr;
  const std::uint32_t n = chunk_take(c, kFrameTransferBatch, head);
  cache.head[c] = head->next;
  cache.count[c] = n - 1;
  unpoison_cached_block(head, c);
  return head;
}

void frame_free_slow(void* p, std::size_t c) {
  frame_cache& cache = frame_cache_tls();
  auto* b = static_cast<free_block*>(p);
  if (cache.hook_state == 2) {  // thread exit: the cache is gone
    release_block_to_system(p, c);
    return;
  }
  if (cache.hook_state == 0) install_exit_hook();
  if (cache.count[c] < kMaxCachedFramesPerClass) {
    b->next = cache.head[c];
    cache.head[c] = b;
    ++cache.count[c];
    poison_cached_block(b, c);
    return;
  }
  // The cache for this class is full: move a batch of it to the transfer list (or the system).
  free_block* head = cache.head[c];
  free_block* tail = head;
  for (std::uint32_t i = 1; i < kFrameTransferBatch; ++i) tail = tail->next;
  cache.head[c] = tail->next;
  tail->next = nullptr;
  cache.count[c] -= kFrameTransferBatch;
  bool kept = false;
  {
    transfer_list& t = transfer(c);
    std::lock_guard g(t.lock);
    kept = try_add_batch_locked(t, c, batch{head, kFrameTransferBatch});
  }
  if (!kept) release_chain_to_system(head, c);
  b->next = cache.head[c];
  cache.head[c] = b;
  ++cache.count[c];
  poison_cached_block(b, c);
}

#if defined(TPL_ASAN)
void frame_free_quarantined(void* p, std::size_t c) noexcept {
  frame_cache& cache = frame_cache_tls();
  if (cache.hook_state == 2) {  // thread exit: the quarantine is gone with the cache
    release_block_to_system(p, c);
    return;
  }
  if (cache.hook_state == 0) install_exit_hook();
  TPL_POISON(p, frame_class_bytes(c));
  quarantine& q = t_quarantine;
  void* oldest = q.block[q.next];
  const std::size_t oldest_class = q.size_class[q.next];
  q.block[q.next] = p;
  q.size_class[q.next] = static_cast<std::uint16_t>(c);
  q.next = (q.next + 1) % kAsanQuarantineBlocks;
  if (oldest != nullptr) {
    TPL_UNPOISON(oldest, frame_class_bytes(oldest_class));
    frame_free_cached(oldest, oldest_class);
  }
}
#endif

#if defined(TPL_ASAN)
std::atomic<bool> frame_quarantine_on{true};
#endif

void frame_pool_set_quarantine_for_testing(bool on) noexcept {
#if defined(TPL_ASAN)
  frame_quarantine_on.store(on, std::memory_order_relaxed);  // relaxed: see frame_free
#else
  (void)on;
#endif
}

void frame_pool_release_caches_for_testing() noexcept {
  chunk_store_set_one_block(true);
#if defined(TPL_ASAN)
  release_quarantine_to_system();
#endif
  frame_cache& cache = frame_cache_tls();
  for (std::size_t c = 0; c < kFrameClassCount; ++c) {
    free_block* head = cache.head[c];
    cache.head[c] = nullptr;
    cache.count[c] = 0;
    release_chain_to_system(head, c);
    transfer_list& t = transfer(c);
    batch taken[kMaxTransferBatchesPerClass];
    std::size_t k = 0;
    {
      std::lock_guard g(t.lock);
      k = t.size.load(std::memory_order_relaxed);  // relaxed: under the lock
      for (std::size_t i = 0; i < k; ++i) taken[i] = t.batches[i];
      t.size.store(0, std::memory_order_relaxed);  // relaxed: under the lock
    }
    for (std::size_t i = 0; i < k; ++i) release_chain_to_system(taken[i].head, c);
  }
}

void frame_pool_set_shared_chunks_for_testing(bool on) noexcept { chunk_store_set_one_block(!on); }

std::size_t frame_pool_chunks_held(std::size_t bytes) noexcept {
  return chunk_store_chunks_held(frame_class_of(bytes));
}

std::size_t frame_pool_blocks_per_chunk(std::size_t bytes) noexcept {
  return chunk_store_blocks_per_chunk(frame_class_of(bytes));
}

std::size_t frame_pool_cached_on_this_thread() noexcept {
  std::size_t n = 0;
  for (std::size_t c = 0; c < kFrameClassCount; ++c) n += frame_cache_tls().count[c];
  return n;
}

}  // namespace tpl::detail
