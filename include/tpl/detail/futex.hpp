// tpl/detail/futex.hpp — a one-word wait/wake primitive (internal).
//
// futex_wake() may be called on an address whose owner has already stopped waiting and reused the
// memory: it never dereferences the address (Linux FUTEX_WAKE), so the waker can publish and then
// wake without keeping the waiter's memory alive. Every futex_wait() caller loops on its own
// condition, so a stray wake-up is harmless.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tpl::detail {

/// Blocks while *word == expected (or until a wake / spurious wake-up).
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept;
/// As futex_wait, giving up at the deadline. Returns false if the deadline passed.
bool futex_wait_until(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                      std::chrono::steady_clock::time_point deadline) noexcept;
void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept;
void futex_wake_all(std::atomic<std::uint32_t>* word) noexcept;

}  // namespace tpl::detail
