// Replaces the global operator new/delete with counting versions (see alloc_counter.hpp).
// Include in exactly one translation unit per binary.
#pragma once

#include <cstdlib>
#include <new>

#include "alloc_counter.hpp"

namespace tpl_bench::detail {
inline void* counted_alloc(std::size_t n) {
  // relaxed: counters only.
  allocs().bytes.fetch_add(n, std::memory_order_relaxed);
  allocs().count.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
inline void* counted_alloc_aligned(std::size_t n, std::size_t al) {
  allocs().bytes.fetch_add(n, std::memory_order_relaxed);
  allocs().count.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  if (posix_memalign(&p, al < sizeof(void*) ? sizeof(void*) : al, n == 0 ? 1 : n) != 0) throw std::bad_alloc();
  return p;
}
}  // namespace tpl_bench::detail

void* operator new(std::size_t n) { return tpl_bench::detail::counted_alloc(n); }
void* operator new[](std::size_t n) { return tpl_bench::detail::counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  return tpl_bench::detail::counted_alloc_aligned(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return tpl_bench::detail::counted_alloc_aligned(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try { return tpl_bench::detail::counted_alloc(n); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try { return tpl_bench::detail::counted_alloc(n); } catch (...) { return nullptr; }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
