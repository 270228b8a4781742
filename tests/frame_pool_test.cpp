// The coroutine frame pool's slow paths (src/frame_pool.cpp): a thread's cache is handed back when
// the thread exits, and a frame allocated after that (by another thread_local's destructor) is
// not cached again, where nobody would ever hand it back; under AddressSanitizer a freed frame stays
// poisoned and is not handed to the next frames, so a use after free is reported.
// And the chunk store behind it (src/frame_chunks.cpp): frames come from chunks, a chunk whose
// blocks are all back goes to the system, the free blocks of a chunk that a live frame keeps serve
// the class again, and blocks freed by other threads than the one that took them find their way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <tpl/detail/frame_pool.hpp>

#if defined(TPL_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace frame_pool_test_cpp {

namespace {

constexpr std::size_t kBytes = 200;  // one size class, used by nothing else in this test

std::size_t g_cached_after_exit = 12345;

/// Constructed before the thread's first frame (so destroyed after the frame pool's exit hook):
/// allocates and frees a frame during thread exit and records what the thread caches then.
struct late_allocator {
  ~late_allocator() {
    void* p = tpl::detail::frame_alloc(kBytes);
    g_cached_after_exit = tpl::detail::frame_pool_cached_on_this_thread();
    tpl::detail::frame_free(p, kBytes);
  }
};
thread_local late_allocator t_late;

}  // namespace

TEST(frame_pool, a_frame_allocated_after_the_threads_exit_hook_is_not_cached) {
  // Fill the class's transfer list: a thread that frees more frames than its cache keeps hands
  // batches over.
  std::thread([] {
    std::vector<void*> frames;
    // More than a sanitizer build's quarantine holds, so that blocks reach the cache there too.
    for (int i = 0; i < 3072; ++i) frames.push_back(tpl::detail::frame_alloc(kBytes));
    for (void* p : frames) tpl::detail::frame_free(p, kBytes);
  }).join();
  std::thread([] {
    (void)&t_late;  // constructed first: destroyed after the exit hook
    tpl::detail::frame_free(tpl::detail::frame_alloc(kBytes), kBytes);  // installs the hook
  }).join();
  EXPECT_EQ(g_cached_after_exit, 0u) << "a batch taken during thread exit would never be handed back";
}

TEST(frame_pool, a_thread_keeps_a_bounded_cache_and_hands_the_rest_on) {
  std::thread([] {
    std::vector<void*> frames;
    for (int i = 0; i < 4096; ++i) frames.push_back(tpl::detail::frame_alloc(kBytes));
    for (void* p : frames) tpl::detail::frame_free(p, kBytes);
    EXPECT_LE(tpl::detail::frame_pool_cached_on_this_thread(), tpl::detail::kMaxCachedFramesPerClass);
  }).join();
}

TEST(frame_pool, under_address_sanitizer_a_freed_frame_is_not_reused_at_once_and_stays_poisoned) {
#if defined(TPL_ASAN)
  std::thread([] {
    constexpr std::size_t kOther = 72;  // a class of its own in this test
    void* freed = tpl::detail::frame_alloc(kOther);
    tpl::detail::frame_free(freed, kOther);
    EXPECT_TRUE(__asan_address_is_poisoned(freed)) << "a freed frame must be poisoned";
    // Frees of the same thread push it through the quarantine; until then no allocation gets it.
    std::vector<void*> frames;
    for (std::size_t i = 0; i + 1 < tpl::detail::kAsanQuarantineBlocks; ++i) {
      void* p = tpl::detail::frame_alloc(kOther);
      ASSERT_NE(p, freed) << "allocation " << i << " reused a block freed just before";
      frames.push_back(p);
    }
    EXPECT_TRUE(__asan_address_is_poisoned(freed));
    for (void* p : frames) tpl::detail::frame_free(p, kOther);
  }).join();
#else
  GTEST_SKIP() << "the quarantine exists only under AddressSanitizer";
#endif
}

namespace {

// Size classes of their own in this file (nothing else in the process makes frames of exactly
// these sizes in any number that matters; the checks leave room for a few).
constexpr std::size_t kChunked = 344;
constexpr std::size_t kKept = 472;
constexpr std::size_t kShared = 600;

std::size_t chunks(std::size_t bytes) { return tpl::detail::frame_pool_chunks_held(bytes); }

// Blocks carved from shared chunks for the test's duration: the default, except under
// AddressSanitizer, where each block is a chunk of its own (so that LeakSanitizer sees each frame).
struct shared_chunks {
  shared_chunks() { tpl::detail::frame_pool_set_shared_chunks_for_testing(true); }
  ~shared_chunks() {
#if defined(TPL_ASAN)
    tpl::detail::frame_pool_set_shared_chunks_for_testing(false);
#endif
  }
  shared_chunks(const shared_chunks&) = delete;
  shared_chunks& operator=(const shared_chunks&) = delete;
};
std::size_t per_chunk(std::size_t bytes) { return tpl::detail::frame_pool_blocks_per_chunk(bytes); }

}  // namespace

TEST(frame_chunks, frames_come_from_chunks_and_a_chunk_whose_blocks_are_all_back_goes_to_the_system) {
  shared_chunks on;
  constexpr std::size_t kFrames = 20000;
  const std::size_t before = chunks(kChunked);
  std::size_t during = 0;
  std::thread([&] {
    std::vector<void*> frames;
    for (std::size_t i = 0; i < kFrames; ++i) frames.push_back(tpl::detail::frame_alloc(kChunked));
    during = chunks(kChunked) - before;
    for (void* p : frames) tpl::detail::frame_free(p, kChunked);
  }).join();
  const std::size_t after = chunks(kChunked) - std::min(before, chunks(kChunked));
  ASSERT_GE(per_chunk(kChunked), 100u);
  // One chunk per blocks_per_chunk frames (and one more partly used), not one allocation each.
  EXPECT_GE(during, kFrames / per_chunk(kChunked));
  EXPECT_LE(during, kFrames / per_chunk(kChunked) + 2);
  // After the thread: what its cache and the class's transfer list keep (at most 128 + 256 KiB
  // of blocks, freed last, so in the last chunks) and the one spare; every other chunk is gone.
  EXPECT_LE(after, 12u) << "of " << during << " chunks";
}

TEST(frame_chunks, the_free_blocks_of_a_chunk_that_a_live_frame_keeps_serve_the_class_again) {
  shared_chunks on;
  constexpr std::size_t kFrames = 20000;
  std::thread([] {
    std::vector<void*> frames;
    for (std::size_t i = 0; i < kFrames; ++i) frames.push_back(tpl::detail::frame_alloc(kKept));
    // Every 50th frame lives on: every chunk keeps a few blocks in use, none can go back.
    std::vector<void*> kept;
    for (std::size_t i = 0; i < kFrames; ++i) {
      if (i % 50 == 0) kept.push_back(frames[i]);
      else tpl::detail::frame_free(frames[i], kKept);
    }
    const std::size_t held = chunks(kKept);
    EXPECT_GE(held, kFrames / per_chunk(kKept));
    // As many frames again, less the kept ones: all from the free blocks, no new chunk.
    frames.clear();
    for (std::size_t i = 0; i + kept.size() < kFrames; ++i) frames.push_back(tpl::detail::frame_alloc(kKept));
    std::size_t slack = 1;  // the last chunk's uncarved slots
#if defined(TPL_ASAN)
    // Under AddressSanitizer the last kAsanQuarantineBlocks frees wait in the quarantine.
    slack += tpl::detail::kAsanQuarantineBlocks / per_chunk(kKept) + 1;
#endif
    EXPECT_LE(chunks(kKept), held + slack) << "the free blocks of the kept chunks were not reused";
    for (void* p : frames) tpl::detail::frame_free(p, kKept);
    for (void* p : kept) tpl::detail::frame_free(p, kKept);
  }).join();
  EXPECT_LE(chunks(kKept), 12u);
}

TEST(frame_chunks, blocks_freed_by_other_threads_go_back_to_their_chunks) {
  shared_chunks on;
  // Four threads take frames, mix them, and each frees a share of everyone's: blocks cross
  // threads through the transfer lists and the chunks' free lists. Each frame is written whole
  // by its taker and checked by its freer (a block handed out twice, or a chunk freed under a
  // live frame, shows here or under the sanitizers), and each round takes the free blocks of the
  // chunks that the blocks freed at random keep (the transfer list's few hundred blocks can keep
  // as many chunks) before new chunks.
  constexpr int kThreads = 4;
#if defined(TPL_ASAN) || defined(TPL_TSAN)
  constexpr int kRounds = 4;
  constexpr std::size_t kEach = 3000;
#else
  constexpr int kRounds = 20;
  constexpr std::size_t kEach = 5000;
#endif
  std::mutex mu;
  std::vector<void*> shared;
  for (int round = 0; round < kRounds; ++round) {
    shared.clear();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::vector<void*> mine;
        for (std::size_t i = 0; i < kEach; ++i) {
          auto* p = static_cast<std::uint64_t*>(tpl::detail::frame_alloc(kShared));
          std::fill(p, p + kShared / 8, reinterpret_cast<std::uintptr_t>(p));
          mine.push_back(p);
        }
        std::lock_guard g(mu);
        shared.insert(shared.end(), mine.begin(), mine.end());
        (void)t;
      });
    }
    for (auto& th : threads) th.join();
    // Every block of the store is out (shared), or free: in the transfer list (at most 256 KiB
    // and a batch), left in the exited threads' caches (handed on, less than a batch each), or in
    // the last chunks not carved yet. Free blocks of earlier rounds' chunks were taken first.
    const std::size_t free_bound = 256 * 1024 / kShared + tpl::detail::kFrameTransferBatch * (kThreads + 1) +
                                   2 * per_chunk(kShared);
    EXPECT_LE(chunks(kShared) * per_chunk(kShared), shared.size() + free_bound)
        << "round " << round << ": the free blocks of the chunks were not taken again";
    std::sort(shared.begin(), shared.end());
    ASSERT_EQ(std::adjacent_find(shared.begin(), shared.end()), shared.end()) << "a block handed out twice";
    std::shuffle(shared.begin(), shared.end(), std::mt19937(static_cast<unsigned>(round)));
    threads.clear();
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::size_t n = shared.size() / kThreads;
        for (std::size_t i = static_cast<std::size_t>(t) * n; i < (static_cast<std::size_t>(t) + 1) * n; ++i) {
          auto* p = static_cast<std::uint64_t*>(shared[i]);
          for (std::size_t w = 0; w < kShared / 8; ++w)
            ASSERT_EQ(p[w], reinterpret_cast<std::uintptr_t>(p)) << "a frame was overwritten while in use";
          tpl::detail::frame_free(p, kShared);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
}

TEST(frame_chunks, under_address_sanitizer_the_block_after_a_frame_is_poisoned) {
#if defined(TPL_ASAN)
  shared_chunks on;
  std::thread([] {
    constexpr std::size_t kAlone = 856;  // a class of its own in this test
    auto* p = static_cast<char*>(tpl::detail::frame_alloc(kAlone));
    // The next slot: its owner word (never poisoned), then its block, cached or not carved yet.
    EXPECT_TRUE(__asan_address_is_poisoned(p + kAlone + 8 + 8)) << "a frame running past its end would go unseen";
    EXPECT_FALSE(__asan_address_is_poisoned(p + kAlone - 1));
    tpl::detail::frame_free(p, kAlone);
  }).join();
#else
  GTEST_SKIP() << "poisoning exists only under AddressSanitizer";
#endif
}

TEST(frame_chunks, under_address_sanitizer_each_frame_is_an_allocation_of_its_own_by_default) {
#if defined(TPL_ASAN)
  // So that LeakSanitizer reports a leaked frame: inside a shared chunk it would stay reachable.
  std::thread([] {
    constexpr std::size_t kOwn = 984;  // a class of its own in this test
    const std::size_t before = chunks(kOwn);
    std::vector<void*> frames;
    for (int i = 0; i < 10; ++i) frames.push_back(tpl::detail::frame_alloc(kOwn));
    EXPECT_EQ(chunks(kOwn), before + 10);
    for (void* p : frames) tpl::detail::frame_free(p, kOwn);
  }).join();
#else
  GTEST_SKIP() << "blocks are carved from shared chunks outside AddressSanitizer";
#endif
}

}  // namespace frame_pool_test_cpp
