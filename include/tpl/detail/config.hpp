// tpl/detail/config.hpp — compiler and sanitizer detection shared by tpl's headers (internal).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TPL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPL_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define TPL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TPL_TSAN 1
#endif
#endif

#include <chrono>

namespace tpl::detail {
/// t + d, clamped to the clock's range (a due time "in a billion years" must not wrap around and
/// fire at once).
template <class TimePoint, class Rep, class Period>
TimePoint saturating_add(TimePoint t, std::chrono::duration<Rep, Period> d) noexcept {
  using duration = typename TimePoint::duration;
  if (d.count() <= 0) return t + std::chrono::duration_cast<duration>(d);
  const auto room = TimePoint::max() - t;
  if (std::chrono::duration_cast<std::chrono::duration<long double>>(d) >=
      std::chrono::duration_cast<std::chrono::duration<long double>>(room))
    return TimePoint::max();
  return t + std::chrono::duration_cast<duration>(d);
}
}  // namespace tpl::detail

#if defined(__GNUC__) || defined(__clang__)
#define TPL_LIKELY(x) __builtin_expect(!!(x), 1)
#define TPL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TPL_NOINLINE __attribute__((noinline))
#else
#define TPL_LIKELY(x) (x)
#define TPL_UNLIKELY(x) (x)
#define TPL_NOINLINE
#endif

// Thread-local access from code that is inlined into coroutine bodies goes through an accessor.
// Clang 16 may compute a thread-local's address once, before coroutine splitting, and keep it in
// the coroutine frame across a suspension (loop-invariant code motion), so a coroutine resumed on
// another thread would use the first thread's variable (seen under TSan on the destroy stack).
// Under clang the accessor is a call that the optimiser can neither inline nor hoist (the asm
// makes the address opaque); under g++, which splits coroutines before optimising, it is the
// variable itself.
#if defined(__clang__)
#define TPL_TLS_ACCESSOR(type, name, var)   \
  [[gnu::noinline]] inline type& name() noexcept { \
    type* p = &var;                         \
    asm volatile("" : "+r"(p));             \
    return *p;                              \
  }
#else
#define TPL_TLS_ACCESSOR(type, name, var) \
  [[gnu::always_inline]] inline type& name() noexcept { return var; }
#endif

// An awaiter's await_suspend writes its own members and then hands the coroutine to another
// thread, which reads them in await_resume. Clang 16 optimises a coroutine before splitting it,
// when the awaiter is still a local whose address has not escaped, so it may sink those stores
// past the hand-off (seen under TSan: a pool thread read an awaiter member before the store).
// TPL_PUBLISH_AWAITER(this) at the top of await_suspend makes the awaiter's address escape into
// an opaque asm with a memory clobber: the compiler must then assume another thread can see the
// awaiter, so its stores stay before any later hand-off (atomic or call). G++ splits coroutines
// before optimising and needs nothing.
#if defined(__clang__)
#define TPL_PUBLISH_AWAITER(p) asm volatile("" : : "r"(p) : "memory")
#else
#define TPL_PUBLISH_AWAITER(p) ((void)(p))
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TPL_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TPL_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define TPL_CPU_RELAX() ((void)0)
#endif
