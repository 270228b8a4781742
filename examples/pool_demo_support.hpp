// Shared by the thread-injection examples (sync_over_async, barrier, cpu_bound): timestamps,
// the policy switch and the stats printout.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <tpl/tpl.hpp>

namespace demo {

using clock = std::chrono::steady_clock;

inline double ms_since(clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
}

/// Records when each item started; prints a line per item as it starts (as the seed does).
class start_log {
 public:
  explicit start_log(clock::time_point t0, bool print) : t0_(t0), print_(print) {}
  void started(int id) {
    const double ms = ms_since(t0_);
    std::lock_guard g(m_);
    starts_.push_back(ms);
    if (print_) std::printf("%10.3f ms: %d\n", ms, id);
  }
  std::vector<double> starts() {
    std::lock_guard g(m_);
    return starts_;
  }

 private:
  clock::time_point t0_;
  bool print_;
  std::mutex m_;
  std::vector<double> starts_;
};

inline void print_stats(const tpl::thread_pool& pool) {
  const tpl::thread_pool_stats s = pool.stats();
  std::printf(
      "  pool: %u threads (min %u), goal %u; injected: blocking %llu, starvation %llu, hill climbing %llu, "
      "eager %llu, demand %llu; retired %llu; items %llu; hill climbing %s\n",
      s.thread_count, s.min_threads, s.goal, static_cast<unsigned long long>(s.threads_injected_by_blocking),
      static_cast<unsigned long long>(s.threads_injected_by_starvation),
      static_cast<unsigned long long>(s.threads_injected_by_hill_climbing),
      static_cast<unsigned long long>(s.threads_injected_by_eager),
      static_cast<unsigned long long>(s.threads_injected_by_demand),
      static_cast<unsigned long long>(s.threads_retired), static_cast<unsigned long long>(s.items_executed),
      tpl::to_string(s.hill_climbing));
}

/// One JSON line for bench/run.py: the start time of every item, and the total.
inline void print_json(const char* group, const std::string& method, const std::vector<double>& starts,
                       double total_ms, unsigned threads) {
  std::printf("{\"group\": \"%s\", \"method\": \"%s\", \"samples_ms\": [%.3f], \"start_ms\": [", group,
              method.c_str(), total_ms);
  for (std::size_t i = 0; i < starts.size(); ++i) std::printf("%s%.3f", i ? ", " : "", starts[i]);
  std::printf("], \"threads\": %u, \"allocated_bytes\": null, \"peak_rss_kb\": null}\n", threads);
}

/// --policy adaptive|eager|no-cooperation|all (default all but no-cooperation), --quiet, --json.
struct args {
  std::vector<std::string> policies;
  bool quiet = false;
  bool json = false;
  static args parse(int argc, char** argv) {
    args a;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
        a.policies.emplace_back(argv[++i]);
      } else if (std::strcmp(argv[i], "--quiet") == 0) {
        a.quiet = true;
      } else if (std::strcmp(argv[i], "--json") == 0) {
        a.json = true;
        a.quiet = true;
      } else {
        std::fprintf(stderr, "usage: %s [--policy adaptive|eager|no-cooperation]... [--quiet] [--json]\n", argv[0]);
        std::exit(2);
      }
    }
    if (a.policies.empty()) a.policies = {"adaptive", "eager"};
    return a;
  }
};

/// Pool options for a policy name (the pool has one thread per core, as the default pool).
inline tpl::thread_pool_options options_for(const std::string& policy) {
  tpl::thread_pool_options o;
  if (policy == "eager") {
    o.injection = tpl::injection_policy::eager;
  } else if (policy == "no-cooperation") {
    o.cooperative_blocking = false;  // what .NET 5 did: only the starvation gate adds threads
  } else if (policy != "adaptive") {
    std::fprintf(stderr, "unknown policy '%s'\n", policy.c_str());
    std::exit(2);
  }
  return o;
}

}  // namespace demo
