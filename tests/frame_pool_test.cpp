// The coroutine frame pool's slow paths (src/frame_pool.cpp): a thread's cache is handed back when
// the thread exits, and a frame allocated after that (by another thread_local's destructor) is
// not cached again, where nobody would ever hand it back; under AddressSanitizer a freed frame stays
// poisoned and is not handed to the next frames, so a use after free is reported.
#include <gtest/gtest.h>

#include <cstddef>
#include <thread>
#include <vector>

#include <tpl/detail/frame_pool.hpp>

#if defined(TPL_ASAN)
#include <sanitizer/asan_interface.h>
#endif

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
