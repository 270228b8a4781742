// The coroutine frame pool's slow paths (src/frame_pool.cpp): a thread's cache is handed back when
// the thread exits, and a frame allocated after that (by another thread_local's destructor) is
// not cached again, where nobody would ever hand it back.
#include <gtest/gtest.h>

#include <cstddef>
#include <thread>
#include <vector>

#include <tpl/detail/frame_pool.hpp>

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
    for (int i = 0; i < 1024; ++i) frames.push_back(tpl::detail::frame_alloc(kBytes));
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
