// tests/io_test_support.hpp — what the tpl::io tests share: a fixture parameterized by engine
// (each test runs on the pool engine and on io_uring, the latter skipped with the reason where the
// kernel refuses io_uring; file tests also on io_uring with every read through the ring, without
// the page-cache fast path), a scratch directory, and byte-pattern helpers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <tpl/io.hpp>

#include "../src/io/engine.hpp"
#include "../src/io/pipe_readiness.hpp"
#include "test_support.hpp"

namespace tpl_test {

/// io_uring: as configured by default (file reads found in the page cache complete on the calling
/// thread); io_uring_ring_only: every operation through the ring; pool_poll_pipes: the pool engine
/// with pipes waiting in poll(2) on a worker (the path of kernels without RWF_NOWAIT on pipes)
/// instead of on the socket engine's readiness.
enum class engine_choice { pool, io_uring, io_uring_ring_only, pool_poll_pipes };

inline std::string engine_name(const ::testing::TestParamInfo<engine_choice>& info) {
  switch (info.param) {
    case engine_choice::pool: return "pool";
    case engine_choice::io_uring: return "io_uring";
    case engine_choice::io_uring_ring_only: return "io_uring_ring_only";
    case engine_choice::pool_poll_pipes: return "pool_poll_pipes";
  }
  return "?";
}

/// Installs the engine under test as the one new files and pipes use, and gives each test a fresh
/// scratch directory.
class io_engine_test : public ::testing::TestWithParam<engine_choice> {
 protected:
  void SetUp() override {
    const bool uring = GetParam() == engine_choice::io_uring || GetParam() == engine_choice::io_uring_ring_only;
    if (GetParam() == engine_choice::pool_poll_pipes) tpl::io::detail::set_readiness_pipes_for_testing(false);
    if (uring) {
      std::string why;
      ring_ = tpl::io::detail::make_uring_engine(&why, nullptr, GetParam() == engine_choice::io_uring);
      if (!ring_) GTEST_SKIP() << "io_uring is not available here (" << why << "); the pool engine runs these tests";
      engine_ = ring_.get();
    } else {
      engine_ = &tpl::io::detail::pool_engine();
    }
    tpl::io::detail::set_engine_override_for_testing(engine_);
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name)
      if (c == '/') c = '_';
    dir_ = std::filesystem::temp_directory_path() / ("tpl_io_test_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    tpl::io::detail::set_engine_override_for_testing(nullptr);
    tpl::io::detail::set_readiness_pipes_for_testing(true);
    ring_.reset();  // drains: every operation of the test has been awaited
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  tpl::io::detail::engine& engine() { return *engine_; }
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

  std::unique_ptr<tpl::io::detail::engine> ring_;
  tpl::io::detail::engine* engine_ = nullptr;
  std::filesystem::path dir_;
};

/// The byte the pattern files hold at `offset`: varies with every position and across 256-byte
/// periods, so a read from a wrong offset shows.
inline std::byte pattern_byte(std::uint64_t offset) {
  return static_cast<std::byte>((offset * 131 + (offset >> 8) * 7 + 3) & 0xff);
}

inline std::vector<std::byte> pattern(std::uint64_t offset, std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = pattern_byte(offset + i);
  return v;
}

inline std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s)); }

inline std::string string_of(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace tpl_test
