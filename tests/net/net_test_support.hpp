// tests/net/net_test_support.hpp — helpers for the socket tests: a connected loopback pair, byte
// buffers, and a bounded wait on an observable condition (a hang bound, never a timing assertion).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <tpl/net.hpp>

#include "test_support.hpp"
#include <tpl/tpl.hpp>

namespace net_test {

inline tpl::net::endpoint loopback_any_port() { return {tpl::net::ip_address::ipv4_loopback(), 0}; }

struct tcp_pair {
  tpl::net::tcp_listener listener;
  tpl::net::tcp_socket client;
  tpl::net::tcp_socket server;
};

/// A listener on 127.0.0.1 and one connection to it, both ends.
inline tcp_pair connected_pair() {
  tcp_pair p;
  p.listener = tpl::net::tcp_listener(loopback_any_port());
  auto accepted = p.listener.accept_async().as_task();
  tpl::sync_wait(p.client.connect_async(p.listener.local_endpoint()));
  p.server = tpl::sync_wait(std::move(accepted));
  return p;
}

inline std::vector<std::byte> bytes_of(std::string_view s) {
  const auto b = std::as_bytes(std::span<const char>(s.data(), s.size()));
  return {b.begin(), b.end()};
}

inline std::string string_of(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

/// The exception an awaitable fails with (nullptr if it completes).
template <class Awaitable>
std::exception_ptr failure_of(Awaitable a) {
  try {
    (void)tpl::sync_wait(std::move(a));
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

/// p rethrown and caught as E (the test fails with p's exception if it is not an E).
template <class E>
E rethrown_as(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const E& e) {
    return e;
  }
}

/// Polls cond until true; fails the test (returns false) after the hang bound.
template <class Cond>
bool eventually(Cond cond, std::chrono::seconds hang_bound = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + hang_bound;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace net_test
