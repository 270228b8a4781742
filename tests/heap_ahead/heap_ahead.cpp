// tests/heap_ahead/heap_ahead.cpp -> `tpl_heap_ahead` (ctest tpl_heap_ahead): the frame pool grows
// glibc's heap ahead on a thread other than the main one (src/frame_pool.cpp, "Growing glibc's
// heap ahead"). A fresh process, so that its one extra thread gets a new glibc arena of its own,
// whose blocks are carved from the top of its heap in order: that thread takes 4,096 frames of
// 120 bytes (512 KiB, about ten grow-aheads) from an empty frame pool, and after each one checks
// that the heap is accessible 6 KiB past the frame's end (a one-byte write to a pipe from that
// address fails with EFAULT if not). With the grow-ahead, the top always holds at least
// kGrowAheadBytes - kGrowAheadEvery (12 KiB) beyond the last frame; without it, glibc makes the
// heap accessible one page at a time and most frames fail the check.
//
// Exit status: 0 passed, 1 failed, 77 skipped (not glibc, or a sanitizer build, where the
// grow-ahead is off; ctest's SKIP_RETURN_CODE).
#include <cstdio>
#include <thread>
#include <vector>

#include <unistd.h>

#include "tpl/detail/frame_pool.hpp"

int main() {
#if !defined(__GLIBC__) || defined(TPL_ASAN) || defined(TPL_TSAN)
  std::puts("tpl_heap_ahead: skipped (the grow-ahead is for glibc's allocator, off under sanitizers)");
  return 77;
#else
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("pipe");
    return 1;
  }
  constexpr int kFrames = 4096;
  constexpr std::size_t kFrameBytes = 120;
  constexpr std::size_t kProbeBeyond = 6 * 1024;
  int unreachable = 0;
  int first_unreachable = -1;
  std::thread t([&] {
    std::vector<void*> frames;
    frames.reserve(kFrames);  // before the frames, so that it is not carved among them
    for (int i = 0; i < kFrames; ++i) {
      void* p = tpl::detail::frame_alloc(kFrameBytes);
      frames.push_back(p);
      const char* probe = static_cast<const char*>(p) + kFrameBytes + kProbeBeyond;
      if (::write(fds[1], probe, 1) != 1) {
        if (unreachable++ == 0) first_unreachable = i;
      } else {
        char c;
        if (::read(fds[0], &c, 1) != 1) std::perror("read");
      }
    }
    for (void* p : frames) tpl::detail::frame_free(p, kFrameBytes);
  });
  t.join();
  if (unreachable != 0) {
    std::fprintf(stderr,
                 "tpl_heap_ahead: FAILED: %d of %d frames had no accessible heap %zu bytes past their end "
                 "(the first: frame %d)\n",
                 unreachable, kFrames, kProbeBeyond, first_unreachable);
    return 1;
  }
  std::printf("tpl_heap_ahead: passed (%d frames, each with %zu accessible bytes past its end)\n", kFrames,
              kProbeBeyond);
  return 0;
#endif
}
