#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>

#include "alloc_counter.hpp"

namespace tpl_bench {

/// Measures allocations over the benchmark's timed loop: construct before the loop, call
/// finish(state) after it.
class alloc_probe {
 public:
  alloc_probe() : start_(allocated_bytes()) {}
  void finish(benchmark::State& state) const {
    const double per_op = state.iterations() == 0
                              ? 0.0
                              : static_cast<double>(allocated_bytes() - start_) /
                                    static_cast<double>(state.iterations());
    state.counters["bytes_per_op"] = per_op;
  }

 private:
  std::uint64_t start_;
};

}  // namespace tpl_bench
