// tests/chunk_populate/chunk_populate.cpp -> `tpl_chunk_populate` (ctest tpl_chunk_populate): the
// frame pool makes a class's second and later chunks resident in one system call
// (src/frame_chunks.cpp, populate()). A fresh process, so that the chunks come from memory never
// touched before: it takes frames of one class until the class holds two chunks; the frame that
// made the second one is that chunk's first block (a batch never mixes a new chunk with an old
// one), and only a batch of 64 slots of it has been written. mincore(2) must then find every page
// of the chunk past that batch resident; without the populate call none of them is.
//
// Exit status: 0 passed, 1 failed, 77 skipped (the kernel or the C library has no
// MADV_POPULATE_WRITE; ctest's SKIP_RETURN_CODE).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "tpl/detail/frame_pool.hpp"

int main() {
#if !defined(MADV_POPULATE_WRITE)
  std::puts("tpl_chunk_populate: skipped (no MADV_POPULATE_WRITE in this C library)");
  return 77;
#else
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  {
    void* probe = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const bool supported = probe != MAP_FAILED && ::madvise(probe, page, MADV_POPULATE_WRITE) == 0;
    if (probe != MAP_FAILED) ::munmap(probe, page);
    if (!supported) {
      std::puts("tpl_chunk_populate: skipped (the kernel refuses MADV_POPULATE_WRITE: before Linux 5.14)");
      return 77;
    }
  }
  tpl::detail::frame_pool_set_shared_chunks_for_testing(true);  // not the default under ASan
  constexpr std::size_t kFrameBytes = 40;  // 48-byte slots: a batch of 64 writes 3 KiB of a chunk
  std::vector<void*> frames;
  frames.reserve(100000);  // before the frames, so that it is not allocated among them
  char* first = nullptr;
  while (first == nullptr && frames.size() < 100000) {
    const std::size_t before = tpl::detail::frame_pool_chunks_held(kFrameBytes);
    void* p = tpl::detail::frame_alloc(kFrameBytes);
    frames.push_back(p);
    if (before >= 1 && tpl::detail::frame_pool_chunks_held(kFrameBytes) == before + 1)
      first = static_cast<char*>(p);
  }
  int rc = 0;
  if (first == nullptr) {
    std::fprintf(stderr, "tpl_chunk_populate: FAILED: no second chunk after %zu frames\n", frames.size());
    rc = 1;
  } else {
    // The chunk's pages past the written batch (64 slots of 48 bytes), to 56 KiB into the chunk.
    const std::uintptr_t from = (reinterpret_cast<std::uintptr_t>(first) + 64 * 48 + page - 1) & ~(page - 1);
    const std::uintptr_t to = (reinterpret_cast<std::uintptr_t>(first) + 56 * 1024) & ~(page - 1);
    std::vector<unsigned char> resident((to - from) / page);
    if (::mincore(reinterpret_cast<void*>(from), to - from, resident.data()) != 0) {
      std::perror("mincore");
      rc = 1;
    } else {
      std::size_t missing = 0;
      for (unsigned char r : resident) missing += (r & 1) == 0 ? 1 : 0;
      if (missing != 0) {
        std::fprintf(stderr, "tpl_chunk_populate: FAILED: %zu of %zu pages of the new chunk not resident\n",
                     missing, resident.size());
        rc = 1;
      } else {
        std::printf("tpl_chunk_populate: passed (%zu pages of the second chunk resident before use)\n",
                    resident.size());
      }
    }
  }
  for (void* p : frames) tpl::detail::frame_free(p, kFrameBytes);
  return rc;
#endif
}
