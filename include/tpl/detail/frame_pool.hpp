// tpl/detail/frame_pool.hpp — per-thread size-class pool for coroutine frames and small task
// states (internal).
//
// Frames up to kMaxPooledFrameBytes are rounded up to size classes and served from a
// thread-local free list without locks or atomics. A thread whose list for a class grows beyond
// kMaxCachedFramesPerClass hands a batch to a process-wide transfer list (the cross-thread return
// path: producer/consumer pairs where one thread allocates and another frees keep recycling), and a
// thread whose list is empty takes a batch from there before it takes one from the chunk store
// (src/frame_chunks.cpp: blocks carved from 64 KiB chunks, a chunk going back to the system when
// all its blocks are back). The transfer list is bounded too; overflow goes back to the chunks.
//
// Under AddressSanitizer, cached blocks are poisoned, and a freed block first waits, poisoned, in
// a per-thread quarantine of kAsanQuarantineBlocks blocks before it joins the cache: the next
// frame of its class gets another block, so a use after free (a frame, a channel's core) touches
// poisoned memory and is reported instead of reading the next owner's data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "tpl/detail/config.hpp"

#if defined(TPL_ASAN)
#include <sanitizer/asan_interface.h>
#define TPL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define TPL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define TPL_POISON(p, n) ((void)(p), (void)(n))
#define TPL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tpl::detail {

// Size classes are 24, 40, 56, ... bytes (16 * c + 24): with the 8-byte word in front of each
// block that names its chunk (src/frame_chunks.cpp), each class fills a 16-byte-aligned slot
// exactly, so a million frames of one class cost a million times (class + 8) bytes and not a
// byte more.
inline constexpr std::size_t kFrameGranuleBytes = 16;
inline constexpr std::size_t kSmallestFrameClassBytes = 24;
inline constexpr std::size_t kMaxPooledFrameBytes = 1016;
inline constexpr std::size_t kFrameClassCount =
    (kMaxPooledFrameBytes - kSmallestFrameClassBytes) / kFrameGranuleBytes + 1;
inline constexpr std::uint32_t kMaxCachedFramesPerClass = 128;
inline constexpr std::uint32_t kFrameTransferBatch = 64;

struct free_block {
  free_block* next;
};

inline constexpr std::size_t frame_class_bytes(std::size_t c) noexcept {
  return kSmallestFrameClassBytes + c * kFrameGranuleBytes;
}

// Plain data so that access compiles to a direct TLS access (no init guard, no wrapper call).
struct frame_cache {
  free_block* head[kFrameClassCount];
  std::uint32_t count[kFrameClassCount];
  // 0: no exit hook yet, 1: cache active, 2: thread is exiting (frees go straight to the chunks).
  std::uint8_t hook_state;
};

inline thread_local frame_cache t_frame_cache{};
TPL_TLS_ACCESSOR(frame_cache, frame_cache_tls, t_frame_cache)

// Cached blocks are poisoned except for their link word, so that LeakSanitizer can still follow
// the free lists (a block reachable only through poisoned memory is reported as leaked).
inline void poison_cached_block(void* b, std::size_t c) noexcept {
  TPL_POISON(static_cast<char*>(b) + sizeof(free_block), frame_class_bytes(c) - sizeof(free_block));
  (void)b;
  (void)c;
}
inline void unpoison_cached_block(void* b, std::size_t c) noexcept {
  TPL_UNPOISON(b, frame_class_bytes(c));
  (void)b;
  (void)c;
}

void* frame_alloc_slow(std::size_t size_class);
void frame_free_slow(void* p, std::size_t size_class);
#if defined(TPL_ASAN)
inline constexpr std::size_t kAsanQuarantineBlocks = 1024;
/// Puts p in the calling thread's quarantine; the block that falls out of it goes to the cache.
void frame_free_quarantined(void* p, std::size_t size_class) noexcept;
/// Whether frees go through the quarantine (true unless a test turned it off).
extern std::atomic<bool> frame_quarantine_on;
#endif

/// For tests that count allocations (tests/alloc_task_test.cpp): turns the AddressSanitizer
/// quarantine off (or on) for every thread, so that the pool recycles frames at once as in a
/// normal build. Call before the threads that free frames start. No effect without ASan.
void frame_pool_set_quarantine_for_testing(bool on) noexcept;

inline std::size_t frame_class_of(std::size_t bytes) noexcept {
  return bytes <= kSmallestFrameClassBytes
             ? 0
             : (bytes - kSmallestFrameClassBytes + kFrameGranuleBytes - 1) / kFrameGranuleBytes;
}

inline void* frame_alloc(std::size_t bytes) {
  if (TPL_UNLIKELY(bytes > kMaxPooledFrameBytes || bytes == 0)) return ::operator new(bytes);
  const std::size_t c = frame_class_of(bytes);
  frame_cache& cache = frame_cache_tls();
  free_block* b = cache.head[c];
  if (TPL_LIKELY(b != nullptr)) {
    unpoison_cached_block(b, c);
    cache.head[c] = b->next;
    --cache.count[c];
    return b;
  }
  return frame_alloc_slow(c);
}

/// Returns p (a block of class c) to the calling thread's cache.
inline void frame_free_cached(void* p, std::size_t c) noexcept {
  frame_cache& cache = frame_cache_tls();
  if (TPL_LIKELY(cache.count[c] < kMaxCachedFramesPerClass && cache.hook_state == 1)) {
    auto* b = static_cast<free_block*>(p);
    b->next = cache.head[c];
    cache.head[c] = b;
    ++cache.count[c];
    poison_cached_block(b, c);
    return;
  }
  frame_free_slow(p, c);
}

inline void frame_free(void* p, std::size_t bytes) noexcept {
  if (TPL_UNLIKELY(bytes > kMaxPooledFrameBytes || bytes == 0)) {
    ::operator delete(p);
    return;
  }
#if defined(TPL_ASAN)
  // relaxed: set once by a test before the threads that free frames start (thread creation
  // orders it); either answer is safe for any one free.
  if (frame_quarantine_on.load(std::memory_order_relaxed)) {
    frame_free_quarantined(p, frame_class_of(bytes));
    return;
  }
#endif
  frame_free_cached(p, frame_class_of(bytes));
}

/// Statistics for tests and diagnostics: blocks currently cached by the calling thread.
std::size_t frame_pool_cached_on_this_thread() noexcept;

/// For tests of the chunk store: whether blocks are carved from shared 64 KiB chunks (the default)
/// or each block is a chunk of its own (the default under AddressSanitizer, so that LeakSanitizer
/// sees every frame as an allocation; and what frame_pool_release_caches_for_testing switches
/// to). Safe while other threads use the pool: blocks of either kind go back in either mode.
void frame_pool_set_shared_chunks_for_testing(bool on) noexcept;

/// Statistics for tests and diagnostics: chunks (src/frame_chunks.cpp) that the size class of a
/// frame of `bytes` (1 .. kMaxPooledFrameBytes) holds, whether their blocks are in use or free.
std::size_t frame_pool_chunks_held(std::size_t bytes) noexcept;

/// The blocks of one chunk of the size class of a frame of `bytes` (1 .. kMaxPooledFrameBytes).
std::size_t frame_pool_blocks_per_chunk(std::size_t bytes) noexcept;

/// For tests (the allocation-failure sweep, tests/alloc_failure_test.cpp): gives the calling
/// thread's cached blocks and every process-wide transfer list back to the chunk store, and turns
/// the store, for the rest of the process, to one chunk per block, so that the next frames this
/// thread allocates each come from one call of ::operator new (where a test can make it fail)
/// and not from a cache or a chunk. Other threads' caches are untouched. Safe while other threads
/// use the pool (the transfer lists and the chunks are taken under their locks).
void frame_pool_release_caches_for_testing() noexcept;

}  // namespace tpl::detail
