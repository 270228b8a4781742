// tests/alloc_hook.cpp — the one definition of the global operator new / delete for the
// tpl_alloc_tests binary (tests/alloc_hook.hpp describes the hook).
//
// Invariants: every block is allocated with malloc / posix_memalign and released with free, so any
// operator delete can release any operator new's block (the sanitizers' allocation-kind checks see
// only malloc and free); an armed failure fires at most once per arm_failure() unless persistent;
// the injection state is thread-local, so arming on one thread never fails another thread.
#include "alloc_hook.hpp"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

std::atomic<long> g_allocations{0};

// Plain data (no constructor, no destructor): safe to use from operator new at any point of a
// thread's life, before and after its other thread_locals.
struct injection_state {
  long countdown;   // > 0: the countdown-th counted allocation fails; 0: disarmed
  bool persistent;  // after firing, keep failing
  bool failing;     // fired and persistent: every counted allocation fails
  bool fired;       // fired since the last arm
  bool paused;      // in a tpl_alloc::paused scope
};
thread_local injection_state t_injection{};

// Whether this allocation must fail; counts it.
bool should_fail() noexcept {
  // relaxed: a statistic, read after the measured code joined.
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  injection_state& s = t_injection;
  if (s.paused) return false;
  if (s.failing) return true;
  if (s.countdown > 0 && --s.countdown == 0) {
    s.fired = true;
    s.failing = s.persistent;
    return true;
  }
  return false;
}

void* allocate(std::size_t n) noexcept {
  if (should_fail()) return nullptr;
  return std::malloc(n == 0 ? 1 : n);
}

void* allocate_aligned(std::size_t n, std::align_val_t a) noexcept {
  if (should_fail()) return nullptr;
  std::size_t align = static_cast<std::size_t>(a);
  if (align < sizeof(void*)) align = sizeof(void*);
  void* p = nullptr;
  return posix_memalign(&p, align, n == 0 ? 1 : n) == 0 ? p : nullptr;
}

}  // namespace

namespace tpl_alloc {

long allocations() noexcept { return g_allocations.load(std::memory_order_relaxed); }

void arm_failure(long n, bool persistent) noexcept {
  t_injection.countdown = n;
  t_injection.persistent = persistent;
  t_injection.failing = false;
  t_injection.fired = false;
}

void disarm_failure() noexcept {
  t_injection.countdown = 0;
  t_injection.failing = false;
}

bool failure_injected() noexcept { return t_injection.fired; }

paused::paused() noexcept : was_paused_(t_injection.paused) { t_injection.paused = true; }
paused::~paused() { t_injection.paused = was_paused_; }

}  // namespace tpl_alloc

void* operator new(std::size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = allocate_aligned(n, a)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = allocate_aligned(n, a)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_aligned(n, a);
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
