// The frame pool's backing store: the blocks of each size class are carved from chunks of 64 KiB
// taken from ::operator new, and a chunk goes back to ::operator delete when all its blocks have
// come back. Behind the threads' caches and the transfer lists (frame_pool.cpp), it replaces one
// call of the system allocator per frame: a thread that builds a million frames at once (seed
// 001's chain) takes one chunk per few hundred frames, and carving a block costs a few
// instructions where glibc's malloc and free cost over a hundred each. On a thread other than the
// main one it also spares glibc's per-page growth of the thread's arena: one mprotect(2) per chunk.
//
// Layout. A chunk is a header followed by `slots` slots of class_bytes + 8 bytes; a slot holds the
// address of its chunk (the owner word) and then the block handed out, 16-byte aligned (the header
// is 40 bytes, the owner word 8, the slot a multiple of 16). So a block costs what it cost in
// glibc's heap, the owner word taking the place of glibc's chunk header, and giving a block back
// finds its chunk in one load.
//
// A chunk's slots are carved in order, on demand: a thread that needs ten frames of a class
// touches ten slots, not a chunk. A class that already holds a chunk is building frames in
// number, so its next chunks are made resident in one system call (populate()) instead of a page
// fault per 4 KiB. Blocks given back go on their chunk's free list and are taken
// again before any slot is carved anew, so the free room of a chunk that some long-lived frame
// keeps alive serves its class (the usual trade of a size-class allocator: that room does not
// serve other classes or malloc until the chunk is empty).
//
// Invariants, all under the class's lock except for a chunk of one slot (below):
//  - each slot of a chunk is in exactly one of three states: not carved yet (index >= carved), on
//    the chunk's free list, or out (a live frame, or in a thread's cache or a transfer list);
//    live == carved - (length of the free list);
//  - a chunk is on its class's available list iff it has a free or uncarved slot;
//  - a chunk with live == 0 is the class's spare (at most one per class) or has gone to the
//    system; the spare stops being the spare when a block is taken from it;
//  - the owner word of a carved slot never changes, and is never poisoned.
// A chunk of one slot (one_block mode) is on no list: its block is out from its creation to its
// release, which frees it. That mode is the default under AddressSanitizer: each frame is then an
// allocation of its own, so that LeakSanitizer reports a frame that leaks (a frame in a shared
// chunk would stay reachable through the chunk's lists), and the allocation-failure tests turn it
// on so that each frame is one call of ::operator new.
//
// Under AddressSanitizer a block on a free list or in a cache is poisoned except for its link
// word (frame_pool.hpp), and an uncarved slot is poisoned whole, so a frame that runs past its end
// into a neighbouring slot is reported.
#include "frame_chunks.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>

#include <sys/mman.h>

namespace tpl::detail {
namespace {

// What a chunk asks of ::operator new: with glibc's 8-byte header, rounded to 16, 64 KiB exactly;
// under glibc's mmap threshold (128 KiB), so chunks come from the heap.
constexpr std::size_t kChunkBytes = 64 * 1024 - 16;

struct chunk {
  chunk* prev;
  chunk* next;
  free_block* free;
  std::uint32_t live;
  std::uint32_t carved;
  std::uint32_t slots;
  bool listed;
};
static_assert(sizeof(chunk) == 40, "the first block must be 16-byte aligned");
static_assert((sizeof(chunk) + sizeof(chunk*)) % 16 == 0, "the first block must be 16-byte aligned");

constexpr std::size_t slot_bytes(std::size_t c) noexcept {
  return sizeof(chunk*) + frame_class_bytes(c);
}
static_assert(slot_bytes(0) % 16 == 0 && kFrameGranuleBytes % 16 == 0, "every block 16-byte aligned");

constexpr std::uint32_t slots_per_chunk(std::size_t c) noexcept {
  return static_cast<std::uint32_t>((kChunkBytes - sizeof(chunk)) / slot_bytes(c));
}

// What a chunk of `slots` slots of class c takes from ::operator new: kChunkBytes, or just
// enough for a chunk of one slot (one_block mode).
std::size_t allocation_bytes(std::size_t c, std::uint32_t slots) noexcept {
  return slots == 1 ? sizeof(chunk) + slot_bytes(c) : kChunkBytes;
}

char* slot_of(chunk* k, std::size_t c, std::uint32_t i) noexcept {
  return reinterpret_cast<char*>(k) + sizeof(chunk) + i * slot_bytes(c);
}

chunk* owner_of(free_block* b) noexcept {
  chunk* k;
  std::memcpy(&k, reinterpret_cast<char*>(b) - sizeof(chunk*), sizeof k);
  return k;
}

struct class_store {
  std::mutex lock;
  chunk* available = nullptr;  // doubly linked through prev/next
  chunk* spare = nullptr;
};

class_store& store(std::size_t c) {
  // Leaked on purpose: frames are freed by threads that outlive static destruction.
  static class_store* stores = new class_store[kFrameClassCount];
  return stores[c];
}

// Statistics and the testing mode; relaxed: neither orders any other memory. A thread that reads
// one_block late takes one batch more from a chunk, which is as correct as the other answer; a
// count read stale only decides whether a new chunk's pages are made resident at once.
std::atomic<std::size_t> g_chunks_held[kFrameClassCount]{};
#if defined(TPL_ASAN)
std::atomic<bool> g_one_block{true};
#else
std::atomic<bool> g_one_block{false};
#endif

void push_available(class_store& s, chunk* k) noexcept {
  k->prev = nullptr;
  k->next = s.available;
  if (s.available != nullptr) s.available->prev = k;
  s.available = k;
  k->listed = true;
}

void unlink(class_store& s, chunk* k) noexcept {
  if (k->prev != nullptr) k->prev->next = k->next;
  else s.available = k->next;
  if (k->next != nullptr) k->next->prev = k->prev;
  k->prev = k->next = nullptr;
  k->listed = false;
}

// The end of the highest chunk this thread has allocated (populate()).
thread_local std::uintptr_t t_chunks_high = 0;

// Makes the pages of a new chunk resident in one system call (MADV_POPULATE_WRITE, Linux 5.14)
// instead of one page fault per 4 KiB as its slots are first written. Only where that is likely
// to pay:
//  - for a class that already holds a chunk, so that a class with a few frames costs the pages it
//    touches and no more;
//  - for a chunk above every chunk this thread allocated before. glibc carves new memory from the
//    top of the thread's heap, which grows upwards, so such a chunk is fresh memory that a fault
//    would bring in page by page; one below is most likely memory freed and taken again, already
//    resident, where the call costs a few microseconds for nothing (about 14 ms over the 2,000
//    chunks of a million-link chain). Memory given back to the system and grown again below the
//    mark faults in as without the call.
// On a kernel without MADV_POPULATE_WRITE the call fails and the pages fault in as before.
// Called for every new chunk of shared slots; `wanted` is the first condition above.
void populate(void* p, std::size_t bytes, bool wanted) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const bool above = begin >= t_chunks_high;
  if (begin + bytes > t_chunks_high) t_chunks_high = begin + bytes;
  if (!wanted || !above) return;
#if defined(MADV_POPULATE_WRITE)
  constexpr std::uintptr_t kPage = 4096;
  const auto first = (begin + kPage - 1) & ~(kPage - 1);
  const auto end = (begin + bytes) & ~(kPage - 1);
  if (end > first) (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE);
#endif
}

// A new chunk of class c, every slot uncarved (poisoned). Throws std::bad_alloc.
chunk* new_chunk(std::size_t c, std::uint32_t slots) {
  const std::size_t bytes = allocation_bytes(c, slots);
  auto* k = static_cast<chunk*>(::operator new(bytes));
  k->prev = k->next = nullptr;
  k->free = nullptr;
  k->live = 0;
  k->carved = 0;
  k->slots = slots;
  k->listed = false;
  TPL_POISON(slot_of(k, c, 0), bytes - sizeof(chunk));
  const std::size_t held_before = g_chunks_held[c].fetch_add(1, std::memory_order_relaxed);
  if (slots != 1) populate(k, bytes, held_before > 0);
  return k;
}

void release_chunk(chunk* k, std::size_t c) noexcept {
  g_chunks_held[c].fetch_sub(1, std::memory_order_relaxed);
  // Readable again before the system takes it back.
  TPL_UNPOISON(k, allocation_bytes(c, k->slots));
  ::operator delete(static_cast<void*>(k));
}

// Carves slot i of k: writes its owner word and returns its block, poisoned as a cached block.
free_block* carve(chunk* k, std::size_t c, std::uint32_t i) noexcept {
  char* slot = slot_of(k, c, i);
  TPL_UNPOISON(slot, sizeof(chunk*) + sizeof(free_block));
  std::memcpy(slot, &k, sizeof k);
  return reinterpret_cast<free_block*>(slot + sizeof(chunk*));
}

}  // namespace

std::uint32_t chunk_take(std::size_t c, std::uint32_t want, free_block*& head) {
  head = nullptr;
  if (g_one_block.load(std::memory_order_relaxed)) {
    chunk* k = new_chunk(c, 1);
    head = carve(k, c, 0);
    head->next = nullptr;
    k->carved = 1;
    k->live = 1;  // before any other thread can see k: through this block, handed over later
    return 1;
  }
  class_store& s = store(c);
  std::unique_lock g(s.lock);
  std::uint32_t n = 0;
  while (n < want) {
    chunk* k = s.available;
    if (k == nullptr) {
      if (n > 0) break;
      g.unlock();  // no allocation under the lock
      chunk* fresh = new_chunk(c, slots_per_chunk(c));
      g.lock();
      push_available(s, fresh);
      continue;
    }
    if (k == s.spare) s.spare = nullptr;
    while (n < want && k->free != nullptr) {
      free_block* b = k->free;
      k->free = b->next;
      b->next = head;
      head = b;
      ++k->live;
      ++n;
    }
    // Carved last first, so that the list (and the cache it fills) hands them out in address
    // order: frames made one after another, then used in that order (a chain), stay a stream.
    const std::uint32_t m = std::min(want - n, k->slots - k->carved);
    for (std::uint32_t i = m; i-- > 0;) {
      free_block* b = carve(k, c, k->carved + i);
      b->next = head;
      head = b;
    }
    k->carved += m;
    k->live += m;
    n += m;
    if (k->free == nullptr && k->carved == k->slots) unlink(s, k);
  }
  return n;
}

void chunk_give(std::size_t c, free_block* head) noexcept {
  chunk* to_release = nullptr;  // linked through next, released after the lock
  {
    class_store& s = store(c);
    std::lock_guard g(s.lock);
    while (head != nullptr) {
      free_block* b = head;
      TPL_UNPOISON(b, sizeof(free_block));
      head = b->next;
      chunk* k = owner_of(b);
      b->next = k->free;
      k->free = b;
      poison_cached_block(b, c);
      if (--k->live == 0 && (k->slots == 1 || s.spare != nullptr)) {
        if (k->listed) unlink(s, k);
        k->next = to_release;
        to_release = k;
        continue;
      }
      if (k->live == 0) s.spare = k;
      if (!k->listed) push_available(s, k);
    }
  }
  while (to_release != nullptr) {
    chunk* k = to_release;
    to_release = k->next;
    release_chunk(k, c);
  }
}

void chunk_store_set_one_block(bool on) noexcept {
  g_one_block.store(on, std::memory_order_relaxed);
  if (!on) return;
  for (std::size_t c = 0; c < kFrameClassCount; ++c) {
    class_store& s = store(c);
    chunk* spare = nullptr;
    {
      std::lock_guard g(s.lock);
      spare = s.spare;
      if (spare != nullptr) {
        unlink(s, spare);
        s.spare = nullptr;
      }
    }
    if (spare != nullptr) release_chunk(spare, c);
  }
}

std::size_t chunk_store_blocks_per_chunk(std::size_t c) noexcept { return slots_per_chunk(c); }

std::size_t chunk_store_chunks_held(std::size_t c) noexcept {
  return g_chunks_held[c].load(std::memory_order_relaxed);
}

}  // namespace tpl::detail
