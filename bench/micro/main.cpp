// tpl micro-benchmarks (Google Benchmark). Every benchmark reports bytes_per_op: bytes allocated
// through global operator new per iteration, after the warm-up Google Benchmark does itself.
// Names are Group/Method; bench/run.py prints one table per group.
#include <benchmark/benchmark.h>

#include "alloc_counter_impl.hpp"
#include "micro_support.hpp"

BENCHMARK_MAIN();
