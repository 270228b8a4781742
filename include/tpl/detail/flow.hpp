// tpl/detail/flow.hpp — the execution context that async_local values live in, and how it flows
// with coroutines (internal; the public face is tpl/async_local.hpp).
//
// A context is an immutable, reference-counted array of (key, value) entries; setting a value
// makes a new array (copy on write), so capturing a context is a pointer copy. The calling thread's
// current context lives in flow_tls().current (an owned reference, nullptr = the default context).
//
// Flow through a tpl coroutine follows .NET's rule that an async method's changes flow into what it
// awaits and calls, but never back out to its caller:
//   - at the start, the coroutine remembers the caller's context (`outer`) and runs in a copy of
//     the reference (unless flow is suppressed: then it starts in the default context);
//   - at each suspension it keeps its own context and gives the thread back the context of whoever
//     resumed it (the caller the first time);
//   - at each resumption it remembers the resumer's context and takes its own back;
//   - at the end it gives the thread back the resumer's context.
// These are pointer moves: reference counts change only at the start (one increment, when a context
// is set) and when a value is set.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "tpl/detail/config.hpp"
#include "tpl/detail/frame_pool.hpp"

namespace tpl::detail {

/// A value too big or too complex to copy as bytes, shared between contexts.
struct boxed_value {
  std::atomic<std::uint32_t> refs{1};
  virtual ~boxed_value() = default;
};

template <class T>
struct boxed_value_of final : boxed_value {
  template <class U>
  explicit boxed_value_of(U&& u) : value(static_cast<U&&>(u)) {}
  T value;
};

inline constexpr std::size_t kInlineValueBytes = 16;

template <class T>
inline constexpr bool stored_inline_v =
    std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T> && sizeof(T) <= kInlineValueBytes && alignof(T) <= alignof(std::max_align_t);

struct context_entry {
  const void* key;
  boxed_value* boxed;  // nullptr: the value is in `bytes`
  alignas(std::max_align_t) unsigned char bytes[kInlineValueBytes];
};

class alignas(std::max_align_t) context_data {
 public:
  std::atomic<std::uint32_t> refs{1};
  std::uint32_t count = 0;
  std::uint32_t capacity = 0;

  context_entry* entries() noexcept { return reinterpret_cast<context_entry*>(this + 1); }
  const context_entry* entries() const noexcept { return reinterpret_cast<const context_entry*>(this + 1); }

  const context_entry* find(const void* key) const noexcept {
    for (std::uint32_t i = 0; i < count; ++i)
      if (entries()[i].key == key) return &entries()[i];
    return nullptr;
  }

  static std::size_t bytes_for(std::uint32_t n) noexcept { return sizeof(context_data) + n * sizeof(context_entry); }

  /// A copy of `from` (may be null) with room for one more entry; the caller fills or replaces it.
  static context_data* copy_with_room(const context_data* from) {
    const std::uint32_t n = from != nullptr ? from->count : 0;
    void* p = frame_alloc(bytes_for(n + 1));
    auto* d = new (p) context_data();
    d->count = n;
    d->capacity = n + 1;
    if (n != 0) {
      std::memcpy(static_cast<void*>(d->entries()), from->entries(), n * sizeof(context_entry));
      for (std::uint32_t i = 0; i < n; ++i)
        // relaxed: taking a reference while the source holds one (standard shared_ptr reasoning).
        if (d->entries()[i].boxed != nullptr) d->entries()[i].boxed->refs.fetch_add(1, std::memory_order_relaxed);
    }
    return d;
  }
};

static_assert(alignof(context_data) <= alignof(context_entry));

inline void add_ref(context_data* d) noexcept {
  // relaxed: the caller already holds a reference (or the thread's), so the object stays alive.
  if (d != nullptr) d->refs.fetch_add(1, std::memory_order_relaxed);
}

void destroy_context(context_data* d) noexcept;

inline void release(context_data* d) noexcept {
  // acq_rel: the last release must see every write made through other references before freeing.
  if (d != nullptr && d->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy_context(d);
}

struct flow_state {
  context_data* current;  // owned reference; nullptr = default context
  bool suppressed;        // suppress_flow(): new coroutines start in the default context
};
inline thread_local flow_state t_flow{nullptr, false};
TPL_TLS_ACCESSOR(flow_state, flow_tls, t_flow)

/// Replaces the calling thread's context (takes ownership of `d`), releasing the old one. Registers
/// a thread-exit hook the first time a thread holds a context, so no reference leaks at exit.
void set_current_context(context_data* d) noexcept;

/// Back to the default context (pool threads after each item).
inline void reset_context() noexcept {
  flow_state& f = flow_tls();
  if (TPL_UNLIKELY(f.current != nullptr)) {
    context_data* old = f.current;
    f.current = nullptr;
    release(old);
  }
}

/// The per-coroutine half of the flow (embedded in tpl's promise). One slot is enough: while the
/// coroutine runs it holds the resumer's context (the thread holds the coroutine's); while it is
/// suspended it holds the coroutine's own (the thread has the resumer's back). Each suspension and
/// resumption is one swap of the slot with the thread's current context.
struct coroutine_flow {
  context_data* slot = nullptr;  // owned

  /// At the start of the coroutine, on the caller's thread.
  void start() noexcept {
    flow_state& f = flow_tls();
    slot = f.current;  // the caller's, given back at the first suspension
    if (TPL_UNLIKELY(f.current != nullptr)) {
      if (f.suppressed)
        f.current = nullptr;  // runs in the default context
      else
        add_ref(f.current);  // runs in a shared reference to the caller's
    }
  }
  /// At each suspension (before the awaiter can hand the coroutine to another thread), and at
  /// each resumption (on the resuming thread): the same swap.
  void swap() noexcept {
    flow_state& f = flow_tls();
    context_data* t = f.current;
    f.current = slot;
    slot = t;
  }
  void suspend() noexcept { swap(); }
  void resume() noexcept { swap(); }
  /// At the end (final suspension), before completion is published.
  void finish() noexcept {
    flow_state& f = flow_tls();
    // Both in the default context (no async_local set anywhere on this path): nothing to move.
    // (One test of the two pointers OR-ed: one branch on the synchronous path, not two.)
    const auto either = reinterpret_cast<std::uintptr_t>(f.current) | reinterpret_cast<std::uintptr_t>(slot);
    if (TPL_LIKELY(either == 0)) return;
    context_data* mine = f.current;
    f.current = slot;
    slot = nullptr;
    release(mine);
  }
  /// A frame destroyed while suspended (never resumed) still owns its context.
  ~coroutine_flow() { release(slot); }
};

}  // namespace tpl::detail
