// tpl/detail/trampoline.hpp — bounded-depth inline resumption of coroutines (internal).
//
// When a task completes, its first awaiter is resumed on the completing thread. Done naively, a
// chain of a million tasks completing one another nests a million stack frames; compilers only
// sometimes turn symmetric transfer into a tail call (g++ 12 does not at -O0 or under ASan), so tpl
// never relies on it. Instead every inline resumption goes through resume_inline(): below
// kMaxInlineResumeDepth nested resumptions it resumes directly (a counter increment); beyond that
// it appends the coroutine to this thread's deferred list, and the outermost resume_inline() on the
// stack drains that list in a loop once the nested frames have unwound. Stack use stays bounded at
// every optimisation level. This is the role .NET's TryEnsureSufficientExecutionStack plays.
#pragma once

#include <coroutine>
#include <cstdint>

#include "tpl/detail/config.hpp"

namespace tpl::detail {

/// Nested inline resumptions allowed before deferring. Each level costs a few hundred bytes of
/// stack at -O2 and a few KiB at -O0 under ASan, so 16 levels stay far below any thread's stack.
inline constexpr std::uint32_t kMaxInlineResumeDepth = 16;

struct trampoline_state {
  std::uint32_t depth;
  bool has_deferred;
};

inline thread_local trampoline_state t_trampoline{};

void defer_resume(std::coroutine_handle<> h);
void drain_deferred_resumes() noexcept;

/// Resumes h on this thread now, or after the current stack of inline resumptions unwinds.
inline void resume_inline(std::coroutine_handle<> h) noexcept {
  trampoline_state& t = t_trampoline;
  if (TPL_UNLIKELY(t.depth >= kMaxInlineResumeDepth)) {
    defer_resume(h);
    return;
  }
  ++t.depth;
  h.resume();
  --t.depth;
  if (TPL_UNLIKELY(t.has_deferred) && t.depth == 0) drain_deferred_resumes();
}

/// Runs h as a top-level item (thread pool workers and schedulers use this): same as resume_inline
/// but counts as the outermost level.
inline void run_item(std::coroutine_handle<> h) noexcept { resume_inline(h); }

}  // namespace tpl::detail
